//! The OpenClaw plugin keeps turns the database could not take (locked, damaged) in a spool
//! beside it: `<db>.lcm-native-pending.jsonl`, files a drain took (`….draining`) and turns it
//! set aside (`<db>.lcm-native-held.jsonl`), one JSON turn per line with its host messages. A
//! redaction that left them alone would come back with the next drain, so `redact` applies its
//! pattern to them too. The plugin drains under `<spool>.lock` (a file naming its process);
//! the scrub takes the same lock, so no drain reads a file while it is rewritten, and it takes
//! the live spool over first (renamed, as a drain does), so a turn appended meanwhile goes to
//! a new file instead of being lost.

use std::path::Path;

use serde_json::Value;

use super::text::Redactor;

/// What the scrub of the spool did.
#[derive(Debug, Default)]
pub(crate) struct SpoolScrub {
    /// Matches replaced in spooled messages.
    pub matches: usize,
    /// A drain held the spool's lock: the spool was left as it was (`redact` again).
    pub busy: bool,
}

fn spool_path(db_path: &str) -> String {
    format!("{db_path}.lcm-native-pending.jsonl")
}

/// Applies `redactor` to every spooled message beside `db_path`. Files that change are
/// rewritten whole (a temporary file renamed over them).
pub(crate) fn scrub(db_path: &str, redactor: &Redactor) -> std::io::Result<SpoolScrub> {
    let spool = spool_path(db_path);
    let (dir, name) = match Path::new(&spool).parent() {
        Some(d) => (
            d.to_path_buf(),
            Path::new(&spool)
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned(),
        ),
        None => return Ok(SpoolScrub::default()),
    };
    let held = format!("{db_path}.lcm-native-held.jsonl");
    let live = Path::new(&spool).exists();
    let mut files: Vec<std::path::PathBuf> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok())
            .filter(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.starts_with(&format!("{name}.")) && n.ends_with(".draining")
            })
            .map(|e| e.path())
            .collect(),
        Err(_) => return Ok(SpoolScrub::default()),
    };
    if !live && files.is_empty() && !Path::new(&held).exists() {
        return Ok(SpoolScrub::default());
    }
    let Some(_lock) = lock::Lock::take(&format!("{spool}.lock")) else {
        return Ok(SpoolScrub { matches: 0, busy: true });
    };
    if live {
        // Taken as a drain takes it: named by the time it was taken, so that drains store its
        // turns after those of files taken before and before those spooled from now on.
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let taken = format!("{spool}.{ms:013}-{}-0.draining", std::process::id());
        if std::fs::rename(&spool, &taken).is_ok() {
            files.push(taken.into());
        }
    }
    if Path::new(&held).exists() {
        files.push(held.into());
    }
    let mut out = SpoolScrub::default();
    for file in files {
        out.matches += scrub_file(&file, redactor)?;
    }
    Ok(out)
}

/// One spool file: each line's `messages` redacted as ingest would redact them; a line that
/// does not parse (torn by a crash) as text. Returns the matches replaced.
fn scrub_file(file: &Path, redactor: &Redactor) -> std::io::Result<usize> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let mut matches = 0;
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        match serde_json::from_str::<Value>(body) {
            Ok(mut turn) => {
                let n: usize = match turn.get_mut("messages").and_then(Value::as_array_mut) {
                    Some(messages) => messages.iter_mut().map(|m| redactor.message(m)).sum(),
                    None => 0,
                };
                if n > 0 {
                    matches += n;
                    out.push_str(&serde_json::to_string(&turn).map_err(std::io::Error::other)?);
                } else {
                    out.push_str(body);
                }
            }
            Err(_) => match redactor.text(body) {
                Some((new, n)) => {
                    matches += n;
                    out.push_str(&new);
                }
                None => out.push_str(body),
            },
        }
        out.push_str(end);
    }
    if matches > 0 {
        let tmp = file.with_extension("redact-tmp");
        write_private(&tmp, out.as_bytes())?;
        std::fs::rename(&tmp, file)?;
    }
    Ok(matches)
}

/// Writes a file only its owner can read (the spool's own mode).
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)?.write_all(bytes)
}

/// The plugin's drain lock (plugin/shared.cjs `lockSpool`): a file created exclusively that
/// names its process and host; one whose process is gone is taken over.
mod lock {
    pub(super) struct Lock {
        path: String,
        me: String,
    }

    impl Lock {
        /// The lock, or None while a live process holds it.
        pub(super) fn take(path: &str) -> Option<Lock> {
            let me = serde_json::json!({
                "pid": std::process::id(),
                "host": host(),
                "at": std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64),
            })
            .to_string();
            for _ in 0..2 {
                match std::fs::OpenOptions::new().write(true).create_new(true).open(path) {
                    Ok(mut f) => {
                        use std::io::Write;
                        if f.write_all(me.as_bytes()).is_err() {
                            let _ = std::fs::remove_file(path);
                            return None;
                        }
                        return Some(Lock {
                            path: path.to_string(),
                            me,
                        });
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(_) => return None,
                }
                if holder_alive(path) {
                    return None;
                }
                let stale = format!("{path}.{}.stale", std::process::id());
                if std::fs::rename(path, &stale).is_ok() {
                    let _ = std::fs::remove_file(&stale);
                }
            }
            None
        }
    }

    impl Drop for Lock {
        fn drop(&mut self) {
            if std::fs::read_to_string(&self.path).is_ok_and(|s| s == self.me) {
                let _ = std::fs::remove_file(&self.path);
            }
        }
    }

    /// Whether the process a lock file names still runs. A holder on another host, or one that
    /// cannot be checked here, counts as alive.
    fn holder_alive(path: &str) -> bool {
        let Ok(text) = std::fs::read_to_string(path) else {
            return false;
        };
        let Ok(holder) = serde_json::from_str::<serde_json::Value>(&text) else {
            return false;
        };
        let Some(pid) = holder["pid"].as_i64() else {
            return false;
        };
        if holder["host"].as_str() != Some(host().as_str()) {
            return true;
        }
        process_alive(pid)
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

    #[cfg(not(unix))]
    fn process_alive(_pid: i64) -> bool {
        true
    }

    /// This machine's host name, as Node's `os.hostname()` gives it.
    pub(super) fn host() -> String {
        #[cfg(unix)]
        {
            let mut buf = [0u8; 256];
            // SAFETY: the buffer is writable for its length; the name is NUL-terminated within it.
            if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0 {
                let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
                return String::from_utf8_lossy(&buf[..end]).into_owned();
            }
        }
        std::env::var("COMPUTERNAME").unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redactor() -> Redactor {
        Redactor {
            pattern: Some(super::super::text::compile("sk-live-[A-Za-z0-9]+").unwrap()),
            replacement: "[REDACTED]".into(),
        }
    }

    fn line(text: &str, key: &str) -> String {
        format!(
            "{}\n",
            serde_json::json!({"target": {"sessionKey": "agent:main:explicit:s"}, "messages": [{"role": "user", "content": text, "timestamp": 1}], "advancementKey": key})
        )
    }

    #[test]
    fn spooled_turns_are_redacted_in_every_spool_file_and_keep_their_order_and_keys() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("lcm.db").to_string_lossy().into_owned();
        let spool = spool_path(&db);
        let taken = format!("{spool}.1700000000000-1-1.draining");
        std::fs::write(&taken, line("older: key sk-live-AAA111", "k0")).unwrap();
        std::fs::write(
            &spool,
            format!(
                "{}{}{{\"torn",
                line("my key is sk-live-BBB222", "k1"),
                line("nothing secret", "k2")
            ),
        )
        .unwrap();
        std::fs::write(format!("{db}.lcm-native-held.jsonl"), line("held sk-live-CCC333", "k3")).unwrap();
        let r = scrub(&db, &redactor()).unwrap();
        assert_eq!((r.matches, r.busy), (3, false));
        assert!(!Path::new(&spool).exists(), "the live spool was not taken over");
        let mut all = String::new();
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("lcm-native"))
            .collect();
        names.sort();
        for n in &names {
            all.push_str(&std::fs::read_to_string(dir.path().join(n)).unwrap());
        }
        assert!(!all.contains("sk-live-"), "{all}");
        assert!(
            !names.iter().any(|n| n.ends_with(".lock") || n.ends_with("redact-tmp")),
            "{names:?}"
        );
        // The taken files in drain order: the older one first, then the live spool's turns.
        let drains: Vec<&String> = names.iter().filter(|n| n.ends_with(".draining")).collect();
        assert_eq!(drains.len(), 2);
        let second = std::fs::read_to_string(dir.path().join(drains[1])).unwrap();
        let keys: Vec<String> = second
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|v| v["advancementKey"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(keys, ["k1", "k2"]);
        assert!(second.contains("[REDACTED]") && second.ends_with("{\"torn"));
    }

    #[test]
    fn a_spool_locked_by_a_live_drain_is_left_alone_and_a_dead_holder_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("lcm.db").to_string_lossy().into_owned();
        let spool = spool_path(&db);
        std::fs::write(&spool, line("key sk-live-DDD444", "k0")).unwrap();
        let lock = format!("{spool}.lock");
        let live = serde_json::json!({"pid": std::process::id(), "host": lock::host(), "at": 0}).to_string();
        std::fs::write(&lock, &live).unwrap();
        let r = scrub(&db, &redactor()).unwrap();
        assert!(r.busy);
        assert!(std::fs::read_to_string(&spool).unwrap().contains("sk-live-DDD444"));
        // A holder that is gone (a pid no process has).
        let dead = serde_json::json!({"pid": i32::MAX, "host": lock::host(), "at": 0}).to_string();
        std::fs::write(&lock, dead).unwrap();
        let r = scrub(&db, &redactor()).unwrap();
        assert_eq!((r.matches, r.busy), (1, false));
        assert!(!Path::new(&lock).exists());
    }
}
