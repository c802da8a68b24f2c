//! Bounded waits for the writer. A write waits twice: for this engine's other writes (the
//! writer connection is one) and for SQLite's lock (another process, or a checkpoint). Both
//! waits of one call share one deadline, `busyTimeoutMs` from the call's start, so the k-th
//! write in line fails after one timeout, not k of them. SQLite's own busy timeout cannot know
//! that deadline, so the writer gets a busy handler that reads it from the calling thread
//! (set for the length of the call by [`CallDeadline`]) and gives up at once when the engine
//! is closing, so that `close` is not held up by a write waiting out its timeout.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

thread_local! {
    /// The deadline of the writer call running on this thread, and whether its engine is
    /// closing.
    static CALL: Cell<Option<Instant>> = const { Cell::new(None) };
    static CLOSING: Cell<Option<*const AtomicBool>> = const { Cell::new(None) };
}

/// Sets this thread's writer deadline for the life of the value (restoring the one before:
/// calls can nest, e.g. a read on the writer inside a write's closure).
pub(crate) struct CallDeadline {
    previous: Option<Instant>,
    previous_closing: Option<*const AtomicBool>,
    /// Keeps the flag alive while the thread-local points at it.
    _closing: Arc<AtomicBool>,
}

impl CallDeadline {
    pub(crate) fn set(deadline: Instant, closing: &Arc<AtomicBool>) -> CallDeadline {
        let previous = CALL.with(|c| c.replace(Some(deadline)));
        let previous_closing = CLOSING.with(|c| c.replace(Some(Arc::as_ptr(closing))));
        CallDeadline {
            previous,
            previous_closing,
            _closing: closing.clone(),
        }
    }
}

impl Drop for CallDeadline {
    fn drop(&mut self) {
        CALL.with(|c| c.set(self.previous));
        CLOSING.with(|c| c.set(self.previous_closing));
    }
}

/// SQLite's waits between tries, as its default busy handler spaces them (ms).
const DELAYS_MS: [u64; 12] = [1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100];

/// The writer's busy handler: sleeps and retries until this thread's deadline, stops at once
/// when the engine closes. Without a deadline set (a path that did not go through the pool)
/// it waits as a 5 s busy timeout would.
pub(crate) fn wait_for_lock(tries: i32) -> bool {
    let closing = CLOSING.with(Cell::get);
    // SAFETY: the pointer is set by a live `CallDeadline`, which holds an Arc of the flag.
    if closing.is_some_and(|flag| unsafe { &*flag }.load(Ordering::SeqCst)) {
        return false;
    }
    let deadline = CALL.with(Cell::get);
    let now = Instant::now();
    let left = match deadline {
        Some(d) if d <= now => return false,
        Some(d) => d - now,
        None => {
            let waited: u64 = DELAYS_MS.iter().take(tries.max(0) as usize).sum::<u64>()
                + DELAYS_MS[DELAYS_MS.len() - 1] * (tries.max(0) as u64).saturating_sub(DELAYS_MS.len() as u64);
            match 5_000u64.checked_sub(waited) {
                Some(left) if left > 0 => Duration::from_millis(left),
                _ => return false,
            }
        }
    };
    let step = DELAYS_MS[(tries.max(0) as usize).min(DELAYS_MS.len() - 1)];
    std::thread::sleep(left.min(Duration::from_millis(step)));
    true
}

/// A mutex whose lock can wait with a deadline, for the writer connection: a release wakes
/// one waiter.
pub(crate) struct TimedMutex<T> {
    inner: Mutex<T>,
    released: (Mutex<()>, Condvar),
}

/// The guard of a [`TimedMutex`]; wakes a waiter when dropped.
pub(crate) struct TimedGuard<'a, T> {
    guard: Option<MutexGuard<'a, T>>,
    released: &'a (Mutex<()>, Condvar),
}

impl<T> std::ops::Deref for TimedGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.guard.as_ref().expect("held until drop")
    }
}

impl<T> std::ops::DerefMut for TimedGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.guard.as_mut().expect("held until drop")
    }
}

impl<T> Drop for TimedGuard<'_, T> {
    fn drop(&mut self) {
        drop(self.guard.take());
        let _wake = self.released.0.lock().unwrap_or_else(|e| e.into_inner());
        self.released.1.notify_one();
    }
}

/// How long a waiter sleeps at most between two looks (a release that came between its look
/// and its wait is seen then).
const RECHECK: Duration = Duration::from_millis(5);

impl<T> TimedMutex<T> {
    pub(crate) fn new(value: T) -> Self {
        TimedMutex {
            inner: Mutex::new(value),
            released: (Mutex::new(()), Condvar::new()),
        }
    }

    /// The lock, waiting until `deadline` at most (None when it passed, or when `give_up`
    /// turned true). A panic while it was held leaves the value usable (see `Pool`).
    pub(crate) fn lock_until(&self, deadline: Instant, give_up: &AtomicBool) -> Option<TimedGuard<'_, T>> {
        loop {
            match self.inner.try_lock() {
                Ok(g) => return Some(self.guard(g)),
                Err(TryLockError::Poisoned(e)) => return Some(self.guard(e.into_inner())),
                Err(TryLockError::WouldBlock) => {}
            }
            let now = Instant::now();
            if now >= deadline || give_up.load(Ordering::SeqCst) {
                return None;
            }
            let wait = self.released.0.lock().unwrap_or_else(|e| e.into_inner());
            let _ = self.released.1.wait_timeout(wait, (deadline - now).min(RECHECK));
        }
    }

    /// A call panicked holding the lock (the value is still used: see `Pool`).
    #[cfg(test)]
    pub(crate) fn is_poisoned(&self) -> bool {
        self.inner.is_poisoned()
    }

    /// The lock, waiting as long as it takes.
    #[cfg(test)]
    pub(crate) fn lock(&self) -> TimedGuard<'_, T> {
        self.guard(self.inner.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The lock if it is free now.
    pub(crate) fn try_lock(&self) -> Option<TimedGuard<'_, T>> {
        match self.inner.try_lock() {
            Ok(g) => Some(self.guard(g)),
            Err(TryLockError::Poisoned(e)) => Some(self.guard(e.into_inner())),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    fn guard<'a>(&'a self, g: MutexGuard<'a, T>) -> TimedGuard<'a, T> {
        TimedGuard {
            guard: Some(g),
            released: &self.released,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiter_gets_the_lock_when_it_is_released_and_gives_up_at_its_deadline() {
        let m = Arc::new(TimedMutex::new(0));
        let never = AtomicBool::new(false);
        let held = m.lock();
        let started = Instant::now();
        assert!(m.lock_until(started + Duration::from_millis(60), &never).is_none());
        assert!(started.elapsed() >= Duration::from_millis(60) && started.elapsed() < Duration::from_secs(2));
        let other = m.clone();
        let waiter = std::thread::spawn(move || {
            let never = AtomicBool::new(false);
            other
                .lock_until(Instant::now() + Duration::from_secs(10), &never)
                .map(|mut g| {
                    *g += 1;
                    Instant::now()
                })
        });
        std::thread::sleep(Duration::from_millis(50));
        let released = Instant::now();
        drop(held);
        let got = waiter.join().unwrap().expect("the waiter gave up");
        assert!(got - released < Duration::from_millis(500));
        assert_eq!(*m.lock(), 1);
    }

    #[test]
    fn the_busy_handler_keeps_to_the_calls_deadline_and_stops_when_closing() {
        let closing = Arc::new(AtomicBool::new(false));
        {
            let _d = CallDeadline::set(Instant::now() + Duration::from_millis(40), &closing);
            let started = Instant::now();
            let mut tries = 0;
            while wait_for_lock(tries) {
                tries += 1;
            }
            assert!(started.elapsed() >= Duration::from_millis(35) && started.elapsed() < Duration::from_millis(500));
            closing.store(true, Ordering::SeqCst);
            let _far = CallDeadline::set(Instant::now() + Duration::from_secs(60), &closing);
            assert!(!wait_for_lock(0));
        }
        assert_eq!(CALL.with(Cell::get), None);
    }
}
