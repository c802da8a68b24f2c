//! `redact` applied to the spool: a spooled turn holding the redacted text would bring it back
//! with the next drain. The scrub takes the drain lock, so no drain reads a file while it is
//! rewritten, and takes the pending file over first (renamed, as a drain does), so a turn
//! appended meanwhile goes to a new file instead of being lost.

use std::path::Path;

use serde_json::Value;

use super::{lock, Files};
use crate::redact::text::Redactor;

/// What the scrub of the spool did.
#[derive(Debug, Default)]
pub(crate) struct SpoolScrub {
    /// Matches replaced in spooled messages.
    pub matches: usize,
    /// A drain held the spool's lock: the spool was left as it was (`redact` again).
    pub busy: bool,
}

/// `scrub_holding`, the lock released at once.
#[cfg(test)]
fn scrub(base: &str, redactor: &Redactor) -> std::io::Result<SpoolScrub> {
    scrub_holding(base, redactor).map(|(out, _lock)| out)
}

/// Applies `redactor` to every spooled message of the spool named after `base` (files that
/// change are rewritten whole: a temporary file renamed over them), and hands back the drain
/// lock it took when the spool had files: the caller holds it while it redacts the database,
/// so that no drain stores a spooled turn in between, with the text the database redaction
/// would then miss.
pub(crate) fn scrub_holding(base: &str, redactor: &Redactor) -> std::io::Result<(SpoolScrub, Option<lock::Lock>)> {
    let files = Files::of(base);
    let live = files.pending.exists();
    let mut taken = match files.taken() {
        Ok(t) => t,
        Err(_) => return Ok((SpoolScrub::default(), None)),
    };
    if !live && taken.is_empty() && !files.held.exists() {
        return Ok((SpoolScrub::default(), None));
    }
    let Some(held) = lock::take(&files.lock)? else {
        return Ok((SpoolScrub { matches: 0, busy: true }, None));
    };
    if live {
        // Taken as a drain takes it: named by the time it was taken, so that drains store its
        // turns after those of files taken before and before those spooled from now on.
        let name = format!(
            "{}.{:013}-{}-0.draining",
            files.pending.display(),
            super::now_ms(),
            std::process::id()
        );
        if std::fs::rename(&files.pending, &name).is_ok() {
            // Appends in flight finish into it before it is read.
            super::settle(Path::new(&name))?;
            taken.push(name.into());
        }
    }
    if files.held.exists() {
        taken.push(files.held.clone());
    }
    let mut out = SpoolScrub::default();
    for file in taken {
        out.matches += scrub_file(&file, redactor)?;
    }
    Ok((out, Some(held)))
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
        super::write_owner_only(&tmp, out.as_bytes())?;
        std::fs::rename(&tmp, file)?;
    }
    Ok(matches)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redactor() -> Redactor {
        Redactor {
            pattern: Some(crate::redact::text::compile("sk-live-[A-Za-z0-9]+").unwrap()),
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
        let spool = Files::of(&db).pending.display().to_string();
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
        let spool = Files::of(&db).pending.display().to_string();
        std::fs::write(&spool, line("key sk-live-DDD444", "k0")).unwrap();
        let lock = format!("{spool}.lock");
        // A live holder: a process of this host that is not this one.
        let child = lock::LiveProcess::start();
        let live = serde_json::json!({"pid": child.id(), "host": lock::host(), "at": 0}).to_string();
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

    #[test]
    fn the_scrub_hands_back_the_drain_lock_so_no_drain_runs_until_the_database_is_redacted() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("lcm.db").to_string_lossy().into_owned();
        std::fs::write(Files::of(&db).pending, line("key sk-live-EEE555", "k0")).unwrap();
        let (out, held) = scrub_holding(&db, &redactor()).unwrap();
        assert_eq!((out.matches, out.busy), (1, false));
        let held = held.expect("the lock is handed back");
        // Meanwhile a drain (here: another take of the lock) finds it held.
        assert!(lock::take(&Files::of(&db).lock).unwrap().is_none());
        drop(held);
        assert!(lock::take(&Files::of(&db).lock).unwrap().is_some());
    }
}
