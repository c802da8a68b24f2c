//! The drain lock of a spool: one drainer (or scrubber) at a time, across processes and hosts
//! sharing the directory. A file created exclusively names its holder (pid, host, boot id,
//! the process's start time) and proves it is alive by its modification time, which the
//! holder renews every [`RENEW`]. A lock is stale, and taken over, when it was not renewed for
//! [`EXPIRES`]; or, on the same host, when the machine was restarted since (another boot id),
//! its process is gone, its pid now belongs to another process (another start time), or it
//! names this very process, which does not hold it (a container restarted under the same
//! pid); or when it does not name a process at all (pid 0, −1, garbage).

use crate::api::LockState;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How often a holder renews its lock.
pub(crate) const RENEW: Duration = Duration::from_secs(10);
/// A lock not renewed for this long is stale, whoever holds it.
pub(crate) const EXPIRES: Duration = Duration::from_secs(60);
/// A lock file that does not parse is being written for at most this long.
const TORN_AFTER: Duration = Duration::from_secs(5);

/// The nonces of the locks this process holds or is taking: a lock naming this process whose
/// nonce is not here is stale. A nonce is registered before its file is created, so no thread
/// of this process ever sees its own lock as stale.
static HELD: Mutex<Option<HashSet<String>>> = Mutex::new(None);

fn held(nonce: &str) -> bool {
    HELD.lock()
        .map(|h| h.as_ref().is_some_and(|s| s.contains(nonce)))
        .unwrap_or(false)
}

fn set_held(nonce: &str, on: bool) {
    if let Ok(mut h) = HELD.lock() {
        let set = h.get_or_insert_with(HashSet::new);
        if on {
            set.insert(nonce.to_string());
        } else {
            set.remove(nonce);
        }
    }
}

/// What a lock file says of its holder.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
struct Holder {
    pid: serde_json::Value,
    #[serde(default)]
    host: Option<String>,
    #[serde(default)]
    boot_id: Option<String>,
    #[serde(default)]
    started: Option<u64>,
    #[serde(default)]
    at: Option<u64>,
    /// The process's pid namespace: two containers on one host (and boot) number their
    /// processes apart, so a pid of another namespace cannot be checked from here.
    #[serde(default)]
    pid_ns: Option<String>,
    /// Unique to this holding of the lock.
    #[serde(default)]
    nonce: Option<String>,
}

/// The lock file at `path`, if there is one (also one this process cannot read: a directory
/// at its path, a file another user left without read permission).
pub(crate) fn state(path: &Path) -> Option<LockState> {
    std::fs::symlink_metadata(path).ok()?;
    let (holder, unreadable) = match read(path) {
        Ok(text) => (serde_json::from_str::<Holder>(&text).ok(), None),
        Err(why) => (None, Some(why)),
    };
    Some(LockState {
        pid: holder.as_ref().and_then(|h| h.pid.as_i64()),
        host: holder.as_ref().and_then(|h| h.host.clone()),
        age_ms: age(path).map_or(0.0, |a| a.as_millis() as f64),
        stale: stale_reason(path),
        unreadable,
    })
}

/// The text of the lock file at `path`, or why this process cannot read it.
fn read(path: &Path) -> Result<String, String> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => return Err("it is a directory, not a lock file".into()),
        Ok(m) if !m.is_file() => return Err("it is not a regular file".into()),
        _ => {}
    }
    std::fs::read_to_string(path).map_err(|e| format!("this process cannot read it ({e})"))
}

fn age(path: &Path) -> Option<Duration> {
    let modified = std::fs::symlink_metadata(path).ok()?.modified().ok()?;
    Some(
        std::time::SystemTime::now()
            .duration_since(modified)
            .unwrap_or_default(),
    )
}

/// Why the lock at `path` is stale, or None while its holder is alive (or it is gone). One
/// this process cannot read ages by its file time like any other: its holder, whoever it is,
/// renews that time while it lives.
pub(crate) fn stale_reason(path: &Path) -> Option<String> {
    std::fs::symlink_metadata(path).ok()?;
    let age = age(path).unwrap_or_default();
    let text = match read(path) {
        Ok(text) => text,
        Err(why) => return (age > EXPIRES).then(|| format!("{why}, and it was not renewed for {} s", age.as_secs())),
    };
    if age > EXPIRES {
        return Some(format!("not renewed for {} s", age.as_secs()));
    }
    let Ok(holder) = serde_json::from_str::<Holder>(&text) else {
        return (age > TORN_AFTER).then(|| "it names no holder (a torn write)".to_string());
    };
    let pid = match holder.pid.as_i64() {
        Some(p) if p > 0 && p <= i64::from(i32::MAX) => p,
        _ => return Some(format!("it names no process (pid {})", holder.pid)),
    };
    let me = identity();
    if !holder.host.as_deref().is_some_and(|h| same_host(h, &me.host)) {
        // Another host sharing the directory: alive while it renews the lock.
        return None;
    }
    if let (Some(theirs), Some(ours)) = (&holder.boot_id, &me.boot_id) {
        if theirs != ours {
            return Some("the machine was restarted since".into());
        }
    }
    if let (Some(theirs), Some(ours)) = (&holder.pid_ns, &me.pid_ns) {
        if theirs != ours {
            // Another container on this host: alive while it renews the lock.
            return None;
        }
    }
    if pid == i64::from(std::process::id()) {
        let mine = holder.nonce.as_deref().is_some_and(held);
        return (!mine).then(|| "it names this process, which does not hold it (a restart reused the pid)".into());
    }
    if !process_alive(pid) {
        return Some(format!("process {pid} is gone"));
    }
    if let (Some(theirs), Some(now)) = (holder.started, process_started(pid)) {
        if theirs != now {
            return Some(format!("pid {pid} now belongs to another process"));
        }
    }
    None
}

/// A held lock: renewed by a thread until dropped, then removed.
pub(crate) struct Lock {
    path: PathBuf,
    me: String,
    nonce: String,
    stop: Arc<AtomicBool>,
    renewer: Option<std::thread::JoinHandle<()>>,
    /// Why the lock found was taken over, if it was.
    pub took_over: Option<String>,
}

/// The lock at `path`: Ok(None) while a live holder has it; an error when the directory does
/// not let this process create it (read-only, no permission).
pub(crate) fn take(path: &Path) -> std::io::Result<Option<Lock>> {
    let me = identity();
    let nonce = uuid::Uuid::now_v7().to_string();
    let holder = serde_json::to_string(&Holder {
        pid: std::process::id().into(),
        host: Some(me.host),
        boot_id: me.boot_id,
        started: process_started(i64::from(std::process::id())),
        at: Some(super::now_ms()),
        pid_ns: me.pid_ns,
        nonce: Some(nonce.clone()),
    })
    .map_err(std::io::Error::other)?;
    let mut took_over = None;
    set_held(&nonce, true);
    for _ in 0..2 {
        match std::fs::OpenOptions::new().write(true).create_new(true).open(path) {
            Ok(mut f) => {
                use std::io::Write;
                if let Err(e) = f.write_all(holder.as_bytes()) {
                    let _ = std::fs::remove_file(path);
                    set_held(&nonce, false);
                    return Err(e);
                }
                let stop = Arc::new(AtomicBool::new(false));
                let renewer = spawn_renewer(path.to_path_buf(), holder.clone(), stop.clone());
                return Ok(Some(Lock {
                    path: path.to_path_buf(),
                    me: holder,
                    nonce,
                    stop,
                    renewer,
                    took_over,
                }));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                set_held(&nonce, false);
                return Err(e);
            }
        }
        let Some((reason, judged)) = stale_with_snapshot(path) else {
            break;
        };
        // Taken over: renamed aside first, then checked to be the lock judged stale. Two
        // processes taking over at once: the second may have moved the first's new lock,
        // which it then puts back and leaves alone.
        let aside = path.with_extension(format!("lock.{nonce}.stale"));
        if let Err(e) = std::fs::rename(path, &aside) {
            if e.kind() == std::io::ErrorKind::NotFound {
                continue;
            }
            set_held(&nonce, false);
            return Err(std::io::Error::new(
                e.kind(),
                format!(
                    "the drain lock {} is stale ({}) but this process cannot move it aside ({e}); until its owner removes it (as that user: rm -r {}), spooled turns wait",
                    path.display(),
                    stable(&reason),
                    path.display()
                ),
            ));
        }
        if snapshot(&aside).is_some_and(|now| now == judged) {
            // A directory is removed only when empty; one that holds anything stays aside.
            let removed = match judged {
                Snapshot::Other { dir: true, .. } => std::fs::remove_dir(&aside).is_ok(),
                _ => std::fs::remove_file(&aside).is_ok(),
            };
            took_over = Some(match removed {
                true => reason,
                false => format!("{reason}; moved aside to {}", aside.display()),
            });
        } else {
            let _ = std::fs::rename(&aside, path);
            break;
        }
    }
    set_held(&nonce, false);
    Ok(None)
}

/// What a lock file was when it was judged: its text, or for one this process cannot read,
/// its kind, size and time.
#[derive(Debug, PartialEq)]
enum Snapshot {
    Text(String),
    Other {
        dir: bool,
        len: u64,
        modified: Option<std::time::SystemTime>,
    },
}

fn snapshot(path: &Path) -> Option<Snapshot> {
    match read(path) {
        Ok(text) => Some(Snapshot::Text(text)),
        Err(_) => {
            let m = std::fs::symlink_metadata(path).ok()?;
            Some(Snapshot::Other {
                dir: m.is_dir(),
                len: m.len(),
                modified: m.modified().ok(),
            })
        }
    }
}

/// `stale_reason`, with what the lock file was when it was judged.
fn stale_with_snapshot(path: &Path) -> Option<(String, Snapshot)> {
    let before = snapshot(path)?;
    let reason = stale_reason(path)?;
    // What was judged is what is there still: a file replaced meanwhile is judged next time.
    (snapshot(path)? == before).then_some((reason, before))
}

/// A reason without the seconds it names, so that the same lock gives the same message each
/// time (the plugin logs a message once).
fn stable(reason: &str) -> String {
    static SECONDS: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r" for \d+ s\b").expect("a valid pattern"));
    SECONDS.replace_all(reason, " for over a minute").into_owned()
}

fn spawn_renewer(path: PathBuf, me: String, stop: Arc<AtomicBool>) -> Option<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("lcm-spool-lock".into())
        .spawn(move || loop {
            std::thread::park_timeout(RENEW);
            if stop.load(Ordering::SeqCst) {
                return;
            }
            if std::fs::read_to_string(&path).is_ok_and(|s| s == me) {
                let _ = std::fs::File::options()
                    .write(true)
                    .open(&path)
                    .and_then(|f| f.set_modified(std::time::SystemTime::now()));
            }
        })
        .ok()
}

impl Drop for Lock {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.renewer.take() {
            t.thread().unpark();
            let _ = t.join();
        }
        if std::fs::read_to_string(&self.path).is_ok_and(|s| s == self.me) {
            let _ = std::fs::remove_file(&self.path);
        }
        set_held(&self.nonce, false);
    }
}

/// This machine as a lock names it.
struct Identity {
    host: String,
    boot_id: Option<String>,
    pid_ns: Option<String>,
}

fn identity() -> Identity {
    Identity {
        host: host(),
        boot_id: std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty()),
        pid_ns: std::fs::read_link("/proc/self/ns/pid")
            .ok()
            .map(|p| p.display().to_string()),
    }
}

/// When process `pid` started, where that can be read: on Linux clock ticks since boot
/// (`/proc/<pid>/stat` field 22), on Windows its creation time (100 ns since 1601). Only
/// compared with what the same machine wrote, to tell a reused pid.
#[cfg(not(windows))]
fn process_started(pid: i64) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count after its last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(windows)]
fn process_started(pid: i64) -> Option<u64> {
    use windows_sys::Win32::Foundation::FILETIME;
    use windows_sys::Win32::System::Threading::GetProcessTimes;
    let zero = || FILETIME {
        dwLowDateTime: 0,
        dwHighDateTime: 0,
    };
    let (mut created, mut exited, mut kernel, mut user) = (zero(), zero(), zero(), zero());
    // SAFETY: the handle is open for the call; the four FILETIMEs are writable.
    let read = with_process(pid, |handle| unsafe {
        GetProcessTimes(handle, &mut created, &mut exited, &mut kernel, &mut user) != 0
    })
    .ok()?;
    read.then(|| (u64::from(created.dwHighDateTime) << 32) | u64::from(created.dwLowDateTime))
}

/// `f` with a handle of process `pid` open for reading, closed afterwards; Err(the error
/// Windows gave) when it cannot be opened.
#[cfg(windows)]
fn with_process<T>(pid: i64, f: impl FnOnce(windows_sys::Win32::Foundation::HANDLE) -> T) -> Result<T, u32> {
    use windows_sys::Win32::Foundation::{CloseHandle, GetLastError, ERROR_INVALID_PARAMETER};
    use windows_sys::Win32::System::Threading::{OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION};
    let Ok(pid) = u32::try_from(pid) else {
        return Err(ERROR_INVALID_PARAMETER);
    };
    // SAFETY: the handle opened here is only passed to `f` and is closed here.
    unsafe {
        let handle = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid);
        if handle.is_null() {
            return Err(GetLastError());
        }
        let out = f(handle);
        CloseHandle(handle);
        Ok(out)
    }
}

#[cfg(unix)]
fn process_alive(pid: i64) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(windows)]
fn process_alive(pid: i64) -> bool {
    use windows_sys::Win32::Foundation::{ERROR_ACCESS_DENIED, STILL_ACTIVE};
    use windows_sys::Win32::System::Threading::GetExitCodeProcess;
    let mut code = 0u32;
    // SAFETY: the handle is open for the call; `code` is writable.
    match with_process(pid, |handle| unsafe { GetExitCodeProcess(handle, &mut code) != 0 }) {
        // A process that ended keeps its handle while one is open: its exit code says so.
        Ok(read) => !read || code == STILL_ACTIVE as u32,
        // Another user's process may refuse to be opened: it exists.
        Err(error) => error == ERROR_ACCESS_DENIED,
    }
}

#[cfg(not(any(unix, windows)))]
fn process_alive(_pid: i64) -> bool {
    // Not checked here: the lock expires when its holder stops renewing it.
    true
}

/// Whether two host names name this machine alike: Windows' names have no case.
fn same_host(a: &str, b: &str) -> bool {
    if cfg!(windows) {
        a.eq_ignore_ascii_case(b)
    } else {
        a == b
    }
}

/// This machine's host name, as Node's `os.hostname()` gives it.
pub(crate) fn host() -> String {
    #[cfg(unix)]
    {
        let mut buf = [0u8; 256];
        // SAFETY: the buffer is writable for its length; the name is NUL-terminated within it.
        if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0 {
            let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
            return String::from_utf8_lossy(&buf[..end]).into_owned();
        }
    }
    #[cfg(windows)]
    {
        // The DNS host name, as Node's (libuv's) is: COMPUTERNAME is the NetBIOS name, upper
        // case and cut at 15 characters, and would make every lock the plugin writes look like
        // another host's.
        use windows_sys::Win32::System::SystemInformation::{ComputerNameDnsHostname, GetComputerNameExW};
        let mut buf = [0u16; 256];
        let mut len = buf.len() as u32;
        // SAFETY: the buffer is writable for `len` UTF-16 units; on success `len` is the length.
        if unsafe { GetComputerNameExW(ComputerNameDnsHostname, buf.as_mut_ptr(), &mut len) } != 0 {
            return String::from_utf16_lossy(&buf[..(len as usize).min(buf.len())]);
        }
    }
    std::env::var("COMPUTERNAME").unwrap_or_default()
}

/// A live process of this host that is not this one (a sleeping child), for tests of a live
/// lock holder: killed and reaped when the guard drops, also when an assertion fails first.
#[cfg(test)]
pub(crate) struct LiveProcess(std::process::Child);

#[cfg(test)]
impl LiveProcess {
    pub(crate) fn start() -> LiveProcess {
        #[cfg(not(windows))]
        let child = std::process::Command::new("sleep").arg("30").spawn();
        // Windows has no `sleep`: `pause` waits for a key on a pipe this process keeps open.
        #[cfg(windows)]
        let child = std::process::Command::new("cmd")
            .args(["/C", "pause"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn();
        LiveProcess(child.unwrap())
    }

    pub(crate) fn id(&self) -> u32 {
        self.0.id()
    }
}

#[cfg(test)]
impl Drop for LiveProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dates a lock file's last renewal (its modification time) back to `when`.
    fn last_renewed(path: &Path, when: std::time::SystemTime) {
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(when)
            .unwrap();
    }

    fn write_lock(path: &Path, holder: serde_json::Value) {
        std::fs::write(path, holder.to_string()).unwrap();
    }

    fn me() -> serde_json::Value {
        let i = identity();
        serde_json::json!({"pid": std::process::id(), "host": i.host, "bootId": i.boot_id,
                           "started": process_started(i64::from(std::process::id()))})
    }

    #[test]
    fn a_live_holder_keeps_its_lock_and_every_dead_one_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.lock");
        // A live process of this host that is not this one: a child that sleeps.
        let child = LiveProcess::start();
        let i = identity();
        let child_pid = i64::from(child.id());
        let live = serde_json::json!({"pid": child_pid, "host": i.host, "bootId": i.boot_id,
                                      "started": process_started(child_pid)});
        write_lock(&path, live.clone());
        assert_eq!(stale_reason(&path), None);
        assert!(take(&path).unwrap().is_none(), "a live holder keeps it");
        // Another host, renewing: trusted.
        write_lock(&path, serde_json::json!({"pid": 1234, "host": "elsewhere", "at": 1}));
        assert!(take(&path).unwrap().is_none());
        let mut stale = vec![
            (serde_json::json!({"pid": 0, "host": i.host}), "names no process"),
            (serde_json::json!({"pid": -1, "host": i.host}), "names no process"),
            (serde_json::json!({"pid": "x", "host": i.host}), "names no process"),
            (me(), "names this process"),
            (
                serde_json::json!({"pid": child_pid, "host": i.host, "started": 1}),
                "another process",
            ),
            (serde_json::json!({"pid": i32::MAX, "host": i.host}), "is gone"),
        ];
        if i.boot_id.is_some() {
            stale.push((
                serde_json::json!({"pid": child_pid, "host": i.host, "bootId": "another-boot"}),
                "restarted",
            ));
        }
        for (holder, why) in stale {
            write_lock(&path, holder.clone());
            let reason = stale_reason(&path).unwrap_or_default();
            assert!(reason.contains(why), "{holder}: {reason}");
            let lock = take(&path).unwrap().expect("taken over");
            assert!(lock.took_over.as_deref().is_some_and(|r| r.contains(why)), "{holder}");
            // Held by this process now: not stale to itself, refused to another take.
            assert_eq!(stale_reason(&path), None);
            assert!(take(&path).unwrap().is_none());
            drop(lock);
            assert!(!path.exists(), "released");
        }
        // Another host that stopped renewing, and a torn file, once old enough.
        let old = std::time::SystemTime::now() - EXPIRES - Duration::from_secs(1);
        write_lock(&path, serde_json::json!({"pid": 1234, "host": "elsewhere"}));
        last_renewed(&path, old);
        assert!(stale_reason(&path).unwrap().contains("not renewed"));
        std::fs::write(&path, "{\"pid\": 12").unwrap();
        assert_eq!(stale_reason(&path), None, "being written");
        last_renewed(&path, old);
        assert!(take(&path).unwrap().is_some());
    }

    /// Dates the last change of whatever is at `path` (a directory too) back to `when`.
    fn dated(path: &Path, when: std::time::SystemTime) {
        let f = std::fs::File::open(path).unwrap();
        f.set_modified(when).unwrap();
    }

    #[test]
    fn a_lock_this_process_cannot_read_ages_by_its_file_time_and_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.lock");
        let old = std::time::SystemTime::now() - EXPIRES - Duration::from_secs(1);
        // A directory at the lock path: shown, not stale while young, taken over once old
        // (an empty one removed, one that holds something moved aside).
        for holds_something in [false, true] {
            std::fs::create_dir(&path).unwrap();
            if holds_something {
                std::fs::write(path.join("keep.txt"), "x").unwrap();
            }
            let shown = state(&path).expect("shown");
            assert!(
                shown.unreadable.as_deref().is_some_and(|u| u.contains("directory")),
                "{shown:?}"
            );
            assert_eq!(shown.stale, None);
            assert!(take(&path).unwrap().is_none(), "young: it may be someone's");
            dated(&path, old);
            let reason = stale_reason(&path).expect("stale once old");
            assert!(
                reason.contains("directory") && reason.contains("not renewed"),
                "{reason}"
            );
            let lock = take(&path).unwrap().expect("taken over");
            let why = lock.took_over.clone().unwrap();
            assert_eq!(why.contains("moved aside"), holds_something, "{why}");
            drop(lock);
            assert!(!path.exists());
        }
        let aside: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(aside.len(), 1, "{aside:?}");
        assert!(aside[0].join("keep.txt").exists(), "nothing in it is deleted");
        // A FIFO at the lock path is not read (reading one would wait for a writer for ever).
        #[cfg(unix)]
        {
            let fifo = dir.path().join("y.lock");
            let made = std::process::Command::new("mkfifo").arg(&fifo).status();
            if made.is_ok_and(|s| s.success()) {
                assert!(state(&fifo).unwrap().unreadable.unwrap().contains("not a regular file"));
                assert!(take(&fifo).unwrap().is_none());
            }
        }
    }

    #[test]
    fn the_message_of_a_lock_that_cannot_be_moved_is_the_same_each_time() {
        assert_eq!(
            stable("it is a directory, not a lock file, and it was not renewed for 7265 s"),
            "it is a directory, not a lock file, and it was not renewed for over a minute"
        );
        assert_eq!(stable("process 12 is gone"), "process 12 is gone");
    }

    #[test]
    fn a_lock_in_a_directory_that_cannot_be_written_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = take(&dir.path().join("missing").join("x.lock"))
            .err()
            .expect("an error");
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    }
}
