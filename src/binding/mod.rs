//! The napi binding: the only code that knows Node. It translates JS values to core types and
//! back, runs the core off Node's main thread, and turns core errors into JS errors with a
//! stable `code`. No rule of the library lives here.

mod bridge;
pub mod engine;
pub mod functions;
mod signals;
mod summarize;
