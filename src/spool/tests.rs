//! The spool end to end with an engine: turns appended are stored in order, each once, by
//! whichever drain gets the lock; a turn that cannot be stored yet stops the drain; one that
//! never can is set aside; what a spool holds is reported.

use serde_json::{json, Value};

use super::*;
use crate::api::SpoolStatus;
use crate::test_support::temp_engine;

fn turn(n: usize, key: &str) -> Value {
    json!({"target": {"sessionKey": "agent:main:main", "sessionId": "s1"}, "advancementKey": key,
           "messages": [{"role": "user", "content": format!("question {n}")},
                        {"role": "assistant", "content": [{"type": "text", "text": format!("answer {n}")}]}]})
}

fn questions(engine: &crate::engine::Engine) -> Vec<String> {
    let Some(conv) = engine
        .find_conversation(&crate::store::conversations::Target::SessionKey {
            key: "agent:main:main".into(),
            session_id: None,
        })
        .unwrap()
    else {
        return Vec::new();
    };
    engine
        .messages(conv.conversation_id, 0, 1000)
        .unwrap()
        .into_iter()
        .filter(|m| m.role == "user")
        .map(|m| m.content.as_str().map_or_else(|| m.content.to_string(), str::to_string))
        .collect()
}

#[test]
fn spooled_turns_are_stored_in_order_once_and_the_status_says_what_waits() {
    let (dir, engine) = temp_engine();
    let base = dir.path().join("lcm.db").display().to_string();
    for n in 1..=3 {
        append(&base, &turn(n, &format!("k{n}"))).unwrap();
    }
    // A file an earlier drain took and did not finish comes first.
    let files = Files::of(&base);
    std::fs::write(
        format!("{}.1700000000000-1-1.draining", files.pending.display()),
        format!("{}\n{{\"torn", turn(0, "k0")),
    )
    .unwrap();
    assert!(waiting(&base));
    let found = status(&base);
    assert_eq!(
        (found.turns, found.held, found.lock.is_none()),
        (4, 0, true),
        "{found:?}"
    );
    assert!(found.oldest_at.is_some() && found.problem.is_none(), "{found:?}");
    let r = engine.drain_spool(&base).unwrap();
    assert_eq!((r.stored, r.remaining, r.busy), (4, 0, false), "{r:?}");
    assert_eq!(
        questions(&engine),
        ["question 0", "question 1", "question 2", "question 3"]
    );
    assert_eq!(status(&base), SpoolStatus::default());
    assert!(!waiting(&base));
    // The same turns again (a drain replayed after a kill): stored once.
    append(&base, &turn(2, "k2")).unwrap();
    assert_eq!(engine.drain_spool(&base).unwrap().stored, 1);
    assert_eq!(questions(&engine).len(), 4);
}

#[test]
fn a_turn_that_cannot_be_stored_stops_the_drain_and_one_that_never_can_is_set_aside() {
    let (dir, engine) = temp_engine();
    let base = dir.path().join("lcm.db").display().to_string();
    append(&base, &turn(1, "k1")).unwrap();
    // Not a target the engine takes: it fails the same way on every try.
    append(
        &base,
        &json!({"target": {"sessionKey": "", "conversationId": "x"}, "advancementKey": "bad", "messages": []}),
    )
    .unwrap();
    append(&base, &turn(2, "k2")).unwrap();
    let first = engine.drain_spool(&base).unwrap();
    assert_eq!((first.stored, first.remaining), (1, 2), "{first:?}");
    assert!(
        first
            .stopped_by
            .as_deref()
            .is_some_and(|e| e.starts_with("E_INVALID_INPUT")),
        "{first:?}"
    );
    assert_eq!(
        questions(&engine),
        ["question 1"],
        "a later turn waits behind an earlier one"
    );
    engine.drain_spool(&base).unwrap();
    let third = engine.drain_spool(&base).unwrap();
    assert_eq!(third.held.len(), 1, "{third:?}");
    assert_eq!(third.held[0].advancement_key.as_deref(), Some("bad"));
    assert_eq!(questions(&engine), ["question 1", "question 2"]);
    let s = status(&base);
    assert_eq!((s.turns, s.held), (0, 1));
    // A batch the engine refuses as input is stored as text instead of being kept for ever.
    append(
        &base,
        &json!({"target": {"sessionKey": "agent:main:main"}, "advancementKey": "odd",
                          "messages": [{"role": "user", "content": 42}]}),
    )
    .unwrap();
    assert_eq!(engine.drain_spool(&base).unwrap().stored, 1);
    assert!(questions(&engine)[2].contains("42"));
}

#[test]
fn two_drains_at_once_store_each_turn_once() {
    let (dir, engine) = temp_engine();
    let engine = std::sync::Arc::new(engine);
    let base = dir.path().join("lcm.db").display().to_string();
    for n in 0..40 {
        append(&base, &turn(n, &format!("k{n}"))).unwrap();
    }
    let drains: Vec<_> = (0..2)
        .map(|_| {
            let (engine, base) = (engine.clone(), base.clone());
            std::thread::spawn(move || engine.drain_spool(&base).unwrap())
        })
        .collect();
    let reports: Vec<_> = drains.into_iter().map(|d| d.join().unwrap()).collect();
    // One drainer at a time: every turn is stored by exactly one of them (a second drain of
    // the same turns would count them again, as duplicates).
    let stored: u32 = reports.iter().map(|r| r.stored).sum();
    assert_eq!(stored, 40, "{reports:?}");
    let q = questions(&engine);
    assert_eq!(q.len(), 40);
    assert_eq!(q, (0..40).map(|n| format!("question {n}")).collect::<Vec<_>>());
}

#[test]
fn a_stale_lock_is_taken_over_and_a_spool_that_cannot_be_written_says_where() {
    let (dir, engine) = temp_engine();
    let base = dir.path().join("lcm.db").display().to_string();
    append(&base, &turn(1, "k1")).unwrap();
    let files = Files::of(&base);
    // The lock names this very process, which does not hold it (a container restarted under
    // the same pid): before, every later drain waited for ever.
    std::fs::write(
        &files.lock,
        json!({"pid": std::process::id(), "host": lock::host()}).to_string(),
    )
    .unwrap();
    let s = status(&base);
    assert!(s.lock.as_ref().and_then(|l| l.stale.as_deref()).is_some(), "{s:?}");
    let r = engine.drain_spool(&base).unwrap();
    assert_eq!(r.stored, 1, "{r:?}");
    assert!(r.took_over.is_some(), "{r:?}");
    assert!(!files.lock.exists());
    // A location that cannot be written: an error naming it, with what to do.
    let missing = dir.path().join("no-such-dir").join("lcm.db").display().to_string();
    let e = append(&missing, &turn(2, "k2")).unwrap_err();
    assert_eq!(e.code(), "E_IO");
    assert!(
        e.to_string().contains("no-such-dir") && e.to_string().contains("writable"),
        "{e}"
    );
    // A file where the directory should be: no process can write there, root included.
    let blocker = dir.path().join("blocker");
    std::fs::write(&blocker, "").unwrap();
    let blocked = blocker.join("lcm.db").display().to_string();
    assert_eq!(append(&blocked, &turn(2, "k2")).unwrap_err().code(), "E_IO");
    assert!(status(&blocked).problem.is_some());
    let e = engine.drain_spool(&blocked).unwrap_err();
    assert!(e.code() == "E_IO" && e.to_string().contains("blocker"), "{e}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let ro = dir.path().join("ro");
        std::fs::create_dir(&ro).unwrap();
        let ro_base = ro.join("lcm.db").display().to_string();
        std::fs::write(Files::of(&ro_base).pending, format!("{}\n", turn(3, "k3"))).unwrap();
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o500)).unwrap();
        // Root may write anyway: the check only holds for a user the mode binds.
        if append(&ro_base, &turn(4, "k4")).is_err() {
            assert!(status(&ro_base).problem.is_some());
            let e = engine.drain_spool(&ro_base).unwrap_err();
            assert_eq!(e.code(), "E_IO");
            assert!(e.to_string().contains(&ro.display().to_string()), "{e}");
        }
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
}
