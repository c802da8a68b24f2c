//! The OpenClaw plugin's spool: turns the database could not take (busy past every retry,
//! damaged, a server out of reach), kept in files and stored at the next opportunity, in the
//! order they came, each once. One format, one lock protocol, here; the plugin appends and
//! drains through the addon, and `redact` scrubs the same files. Given the base name `B` the
//! plugin chooses (the database file, or for PostgreSQL a name in its state directory):
//!
//! - `B.lcm-native-pending.jsonl`: turns appended, one JSON line each (`target`, `messages`,
//!   `advancementKey`, lossless-claw's `turn` record, the turn's `transcriptPosition`,
//!   `spooledAt`);
//! - `B.lcm-native-pending.jsonl.<ms>-<pid>-<n>.draining`: a file a drain took, named by when,
//!   drained again (oldest first) when that drain did not finish;
//! - `B.lcm-native-held.jsonl`: turns set aside after failing every try (kept, never dropped);
//! - `B.lcm-native-pending.jsonl.lock`: the drain lock ([`lock`]).

pub(crate) mod drain;
pub(crate) mod lock;
pub(crate) mod scrub;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::api::SpoolStatus;
use crate::error::{LcmError, Result};

/// The files of one spool.
pub(crate) struct Files {
    pub pending: PathBuf,
    pub held: PathBuf,
    pub lock: PathBuf,
}

impl Files {
    pub(crate) fn of(base: &str) -> Files {
        let pending = format!("{base}.lcm-native-pending.jsonl");
        Files {
            lock: format!("{pending}.lock").into(),
            held: format!("{base}.lcm-native-held.jsonl").into(),
            pending: pending.into(),
        }
    }

    fn dir(&self) -> &Path {
        self.pending
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
    }

    /// Files a drain took and did not finish, oldest first (files of earlier versions, named
    /// `<pid>.<n>`, count as the oldest).
    pub(crate) fn taken(&self) -> std::io::Result<Vec<PathBuf>> {
        let prefix = format!("{}.", file_name(&self.pending));
        let mut out: Vec<(u64, PathBuf)> = Vec::new();
        let entries = match std::fs::read_dir(self.dir()) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        for e in entries {
            let name = e?.file_name().to_string_lossy().into_owned();
            if let Some(rest) = name.strip_prefix(&prefix).and_then(|r| r.strip_suffix(".draining")) {
                out.push((taken_at(rest), self.dir().join(&name)));
            }
        }
        out.sort();
        Ok(out.into_iter().map(|(_, p)| p).collect())
    }
}

fn file_name(p: &Path) -> String {
    p.file_name().unwrap_or_default().to_string_lossy().into_owned()
}

/// When a taken file was taken: `<13-digit ms>-<pid>-<n>`, else 0.
fn taken_at(stamp: &str) -> u64 {
    match stamp.split_once('-') {
        Some((ms, _)) if ms.len() == 13 => ms.parse().unwrap_or(0),
        _ => 0,
    }
}

pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// An E_IO naming the spool location and what to do about it.
fn spool_error(path: &Path, what: &str, e: &std::io::Error) -> LcmError {
    LcmError::io(
        path.display(),
        format!(
            "{what} {}: {e}; turns that cannot be stored are kept there until they can, so make its directory writable (or free space) for this process",
            path.display()
        ),
    )
}

/// Appends one turn (a JSON object) to the spool, stamped with the time it was spooled. The
/// file is created readable by its owner only.
pub(crate) fn append(base: &str, turn: &Value) -> Result<()> {
    let Value::Object(fields) = turn else {
        return Err(LcmError::invalid_input("a spooled turn must be an object"));
    };
    if !fields.get("messages").is_some_and(Value::is_array) || !fields.contains_key("target") {
        return Err(LcmError::invalid_input(
            "a spooled turn needs `target` and `messages` (an array)",
        ));
    }
    let mut stamped = fields.clone();
    stamped.entry("spooledAt").or_insert_with(|| Value::from(now_ms()));
    let files = Files::of(base);
    append_line(&files.pending, &Value::Object(stamped))
        .map_err(|e| spool_error(&files.pending, "cannot write the spool file", &e))
}

/// Appends `turn` as one JSON line to `path`, created readable by its owner only. A drain
/// renames the file it takes: the line is written under a shared lock of the file, and only
/// while `path` still names the file opened (else it is opened again), so no line lands in a
/// file a drain has already read (`settle`).
pub(crate) fn append_line(path: &Path, turn: &Value) -> std::io::Result<()> {
    use std::io::Write;
    let mut line = serde_json::to_string(turn).map_err(std::io::Error::other)?;
    line.push('\n');
    loop {
        let mut options = std::fs::OpenOptions::new();
        options.create(true).append(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(path)?;
        flock(&file, false)?;
        if same_file(&file, path) {
            return file.write_all(line.as_bytes());
        }
        // Taken by a drain between the open and the lock: the line goes to the new file.
    }
}

/// Waits until no append is writing into `path` any more (a file a drain or a scrub just took
/// by renaming it): every append in flight holds its shared lock until its line is written.
pub(crate) fn settle(path: &Path) -> std::io::Result<()> {
    match std::fs::File::open(path) {
        Ok(file) => flock(&file, true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Whether `path` still names `file`.
fn same_file(file: &std::fs::File, path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (file.metadata(), std::fs::metadata(path)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        // Windows cannot rename a file another process holds open: nothing to check.
        let _ = (file, path);
        true
    }
}

/// Takes an advisory lock of `file` (`exclusive`, or shared), released when it is closed.
fn flock(file: &std::fs::File, exclusive: bool) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::io::AsRawFd;
        let op = if exclusive { libc::LOCK_EX } else { libc::LOCK_SH };
        loop {
            // SAFETY: the descriptor is open for as long as `file` lives.
            if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
                return Ok(());
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (file, exclusive);
        Ok(())
    }
}

/// Writes `bytes` to a new file only its owner can read, the spool's mode.
pub(crate) fn write_owner_only(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.create(true).write(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)?.write_all(bytes)
}

/// Whether turns wait in the spool of `base` (its file, or files a drain took and did not
/// finish): cheap enough for every call of the plugin (a look at the directory).
pub(crate) fn waiting(base: &str) -> bool {
    let files = Files::of(base);
    files.pending.exists() || files.taken().is_ok_and(|t| !t.is_empty())
}

/// The spool of `base` as it is now. Reads only.
pub(crate) fn status(base: &str) -> SpoolStatus {
    let files = Files::of(base);
    let mut out = SpoolStatus::default();
    let mut paths = match files.taken() {
        Ok(t) => t,
        Err(e) => {
            out.problem = Some(format!("{}: {e}", files.dir().display()));
            Vec::new()
        }
    };
    paths.push(files.pending.clone());
    for path in &paths {
        let Some(text) = read_if_there(path, &mut out.problem) else {
            continue;
        };
        let file_time = std::fs::metadata(path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as f64);
        for turn in complete_lines(&text) {
            out.turns += 1;
            let at = turn.get("spooledAt").and_then(Value::as_f64).or(file_time);
            if let Some(at) = at {
                out.oldest_at = Some(out.oldest_at.map_or(at, |o: f64| o.min(at)));
            }
        }
    }
    if let Some(text) = read_if_there(&files.held, &mut out.problem) {
        out.held = complete_lines(&text).count() as u32;
    }
    out.lock = lock::state(&files.lock);
    if out.problem.is_none() {
        out.problem = writable_problem(files.dir());
    }
    out
}

fn read_if_there(path: &Path, problem: &mut Option<String>) -> Option<String> {
    match std::fs::read_to_string(path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            problem.get_or_insert_with(|| format!("{}: {e}", path.display()));
            None
        }
    }
}

/// Why turns could not be spooled in `dir` (a directory that exists but cannot be written),
/// if so. A directory that does not exist yet is no problem: it is created with the database.
fn writable_problem(dir: &Path) -> Option<String> {
    let meta = std::fs::metadata(dir).ok()?;
    if !meta.is_dir() {
        return Some(format!("{} is not a directory", dir.display()));
    }
    let probe = dir.join(format!(".lcm-native-spool-probe-{}", std::process::id()));
    match std::fs::OpenOptions::new().write(true).create_new(true).open(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            None
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => None,
        Err(e) => Some(format!("{} cannot be written: {e}", dir.display())),
    }
}

/// The turns of a spool file's complete lines (a torn last line, a crash while appending, holds
/// no complete turn).
pub(crate) fn complete_lines(text: &str) -> impl Iterator<Item = Value> + '_ {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(Value::is_object)
}
