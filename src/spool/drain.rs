//! Storing what a spool holds: its turns in the order they were spooled, one drainer at a
//! time (the drain lock). At the first turn that cannot be stored the drain stops: that turn
//! and those after it stay, in order, for the next drain (a later turn is never stored before
//! an earlier one). A turn that fails for a reason that is not transient, drain after drain,
//! is set aside in the held file with its error, so that it cannot hold every later turn back.
//! Turns carry advancement keys: a drain that was killed and runs again stores each once.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::{append_line, complete_lines, lock, now_ms, spool_error, write_owner_only, Files};
use crate::api::{DrainReport, HeldTurn, IngestOptions};
use crate::error::{LcmError, Result};
use crate::store::conversations::Target;
use crate::store::messages::IngestOutcome;

/// A turn that fails this often for a reason that is not transient is set aside.
const POISON_ATTEMPTS: u64 = 3;

/// Failures that say "later", not "never": the turn stays first in line.
const TRANSIENT: &[&str] = &[
    "E_BUSY",
    "E_SQLITE",
    "E_IO",
    "E_CORRUPT",
    "E_CLOSED",
    "E_SCHEMA",
    "E_READ_ONLY",
    "E_CONNECTION",
    "E_TIMEOUT",
];

/// Stores the spool of `base` through `ingest`. E_IO (naming the location) when the lock or
/// the files cannot be created, read or written.
pub(crate) fn run(
    base: &str,
    mut ingest: impl FnMut(&Target, &[Value], IngestOptions) -> Result<IngestOutcome>,
) -> Result<DrainReport> {
    let files = Files::of(base);
    let mut report = DrainReport::default();
    let mut taken = files
        .taken()
        .map_err(|e| spool_error(&files.pending, "cannot list the spool files", &e))?;
    if taken.is_empty() && !files.pending.exists() {
        return Ok(report);
    }
    let Some(lock) =
        lock::take(&files.lock).map_err(|e| spool_error(&files.lock, "cannot take the spool's drain lock", &e))?
    else {
        report.busy = true;
        return Ok(report);
    };
    report.took_over = lock.took_over.clone();
    // Taken under the lock (a name of this drain's own, after every older one): turns
    // spooled meanwhile go to a new file.
    taken = files
        .taken()
        .map_err(|e| spool_error(&files.pending, "cannot list the spool files", &e))?;
    if files.pending.exists() {
        let mine: PathBuf = format!(
            "{}.{:013}-{}-{}.draining",
            files.pending.display(),
            now_ms(),
            std::process::id(),
            next_drain()
        )
        .into();
        match std::fs::rename(&files.pending, &mine) {
            Ok(()) => {
                // Appends in flight finish into it before it is read.
                super::settle(&mine).map_err(|e| spool_error(&mine, "cannot lock a spool file", &e))?;
                taken.push(mine)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(spool_error(&files.pending, "cannot take the spool file", &e)),
        }
    }
    for (n, path) in taken.iter().enumerate() {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(spool_error(path, "cannot read a spool file", &e)),
        };
        let turns: Vec<Value> = complete_lines(&text).collect();
        for (i, turn) in turns.iter().enumerate() {
            match store(turn, &mut ingest) {
                Ok(()) => report.stored += 1,
                Err(e) => {
                    let attempts = turn.get("attempts").and_then(Value::as_u64).unwrap_or(0) + 1;
                    let error = format!("{}: {e}", e.code());
                    if !TRANSIENT.contains(&e.code()) && attempts >= POISON_ATTEMPTS {
                        let mut aside = turn.clone();
                        aside["attempts"] = attempts.into();
                        aside["error"] = error.clone().into();
                        append_line(&files.held, &aside)
                            .map_err(|e| spool_error(&files.held, "cannot set a turn aside", &e))?;
                        report.held.push(HeldTurn {
                            advancement_key: turn.get("advancementKey").and_then(Value::as_str).map(str::to_string),
                            error,
                        });
                        continue;
                    }
                    // This turn and the rest stay in this file, which keeps its place.
                    let mut first = turn.clone();
                    first["attempts"] = attempts.into();
                    let rest: Vec<&Value> = std::iter::once(&first).chain(&turns[i + 1..]).collect();
                    rewrite(path, &rest)?;
                    report.remaining = rest.len() as u32 + remaining_after(&taken[n + 1..]);
                    report.stopped_by = Some(error);
                    drop(lock);
                    return Ok(report);
                }
            }
        }
        let _ = std::fs::remove_file(path);
    }
    drop(lock);
    Ok(report)
}

/// One spooled turn: under its key alone when it has one (the session id it was spooled with
/// may be an old one by now); a batch the engine refuses as input is stored as text rather
/// than kept for ever.
fn store(
    turn: &Value,
    ingest: &mut impl FnMut(&Target, &[Value], IngestOptions) -> Result<IngestOutcome>,
) -> Result<()> {
    let target = target_of(turn)?;
    let messages = turn
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| LcmError::invalid_input("a spooled turn without messages"))?;
    let options = || -> Result<IngestOptions> {
        Ok(IngestOptions {
            advancement_key: turn.get("advancementKey").and_then(Value::as_str).map(str::to_string),
            turn: match turn.get("turn") {
                Some(t) if !t.is_null() => Some(
                    serde_json::from_value(t.clone())
                        .map_err(|e| LcmError::invalid_input(format!("a spooled turn's record: {e}")))?,
                ),
                _ => None,
            },
            transcript_position: turn.get("transcriptPosition").and_then(Value::as_i64),
            ..Default::default()
        })
    };
    match ingest(&target, messages, options()?) {
        Err(e) if e.code() == "E_INVALID_INPUT" => ingest(&target, &as_plain_text(messages), options()?).map(|_| ()),
        other => other.map(|_| ()),
    }
}

fn target_of(turn: &Value) -> Result<Target> {
    let raw = turn
        .get("target")
        .ok_or_else(|| LcmError::invalid_input("a spooled turn without a target"))?;
    if let Some(key) = raw.get("sessionKey").and_then(Value::as_str).filter(|k| !k.is_empty()) {
        return Ok(Target::SessionKey {
            key: key.to_string(),
            session_id: None,
        });
    }
    serde_json::from_value(raw.clone()).map_err(|e| LcmError::invalid_input(format!("a spooled turn's target: {e}")))
}

/// Each message as the text of its JSON, in a user (or assistant) message: what the engine
/// takes whatever the host sent.
pub(crate) fn as_plain_text(messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .map(|m| {
            let role = if m.get("role").and_then(Value::as_str) == Some("assistant") {
                "assistant"
            } else {
                "user"
            };
            json!({"role": role, "content": [{"type": "text", "text": m.to_string()}]})
        })
        .collect()
}

fn remaining_after(paths: &[PathBuf]) -> u32 {
    paths
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .map(|t| complete_lines(&t).count() as u32)
        .sum()
}

fn rewrite(path: &Path, turns: &[&Value]) -> Result<()> {
    let mut text = String::new();
    for t in turns {
        text.push_str(&serde_json::to_string(t)?);
        text.push('\n');
    }
    let tmp = path.with_extension("tmp");
    write_owner_only(&tmp, text.as_bytes())
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| spool_error(path, "cannot rewrite a spool file", &e))
}

/// This process's drains, numbered (two in one millisecond get distinct names).
fn next_drain() -> u64 {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    N.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1
}
