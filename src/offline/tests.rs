//! Golden outputs of the offline summarizer on short fixed conversations. Each expected text
//! was read line by line against its conversation: it says what was asked, done, found and
//! concluded, keeps every path and command whole, and holds no JSON, escapes or code.

use serde_json::json;

use super::*;
use crate::fidelity::junk;
use crate::summarizer::entries::SourcePart;

fn call(id: &str, name: &str, args: serde_json::Value) -> SourcePart {
    SourcePart::ToolCall {
        id: Some(id.into()),
        name: name.into(),
        arguments: args,
    }
}

fn result(id: &str, text: &str, is_error: bool) -> SourceEntry {
    SourceEntry {
        role: "tool".into(),
        stamp: "2026-02-17 15:38 UTC".into(),
        parts: vec![SourcePart::ToolResult {
            call_id: Some(id.into()),
            name: None,
            text: text.into(),
            is_error,
        }],
    }
}

fn assistant(stamp: &str, parts: Vec<SourcePart>) -> SourceEntry {
    SourceEntry {
        role: "assistant".into(),
        stamp: stamp.into(),
        parts,
    }
}

/// A login bug: asked, read, a failing test run, two edits, a passing run, the conclusion.
fn login_fix() -> Vec<SourceEntry> {
    vec![
        SourceEntry::text(
            "user",
            "2026-02-17 15:37 UTC",
            "Please fix the login bug in src/auth/login.ts, users get a 500 after their session expires.",
        ),
        assistant(
            "2026-02-17 15:38 UTC",
            vec![
                SourcePart::Text("Let me look at the login code first.".into()),
                call("c1", "read", json!({"path": "src/auth/login.ts"})),
                call("c2", "bash", json!({"command": "npm test -- src/auth"})),
            ],
        ),
        result(
            "c1",
            "import { session } from './session'\nexport function validateUser(req) {\n  return req.session.sessionToken.length > 0 // error if missing\n}\n",
            false,
        ),
        result(
            "c2",
            "> vitest run src/auth\n\n FAIL  src/auth/login.test.ts > validateUser > expired session\nTypeError: Cannot read properties of undefined (reading 'sessionToken')\n    at validateUser (src/auth/login.ts:3:22)\n\n Tests  1 failed | 41 passed (42)\nCommand exited with code 1",
            true,
        ),
        assistant(
            "2026-02-17 15:40 UTC",
            vec![
                call("c3", "edit", json!({"path": "src/auth/login.ts", "oldText": "req.session.sessionToken", "newText": "req.session?.sessionToken"})),
                call("c4", "edit", json!({"path": "src/auth/login.ts", "oldText": "> 0", "newText": "> 0 ?? false"})),
                call("c5", "bash", json!({"command": "npm test -- src/auth"})),
            ],
        ),
        result("c3", "Successfully replaced text in src/auth/login.ts.", false),
        result("c4", "Successfully replaced text in src/auth/login.ts.", false),
        result("c5", "> vitest run src/auth\n\n Tests  42 passed (42)", false),
        assistant(
            "2026-02-17 15:41 UTC",
            vec![SourcePart::Text(
                "Fixed: validateUser now guards the missing session with optional chaining, so an expired session gets a 401 instead of a 500. All 42 tests pass.\n\n```ts\nreturn req.session?.sessionToken?.length > 0\n```".into(),
            )],
        ),
    ]
}

#[test]
fn a_leaf_reads_as_a_log_of_the_span() {
    let out = summarize(&login_fix(), "", 400);
    let want = "\
15:37 Asked: Please fix the login bug in src/auth/login.ts, users get a 500 after their session expires.
Did: read src/auth/login.ts · bash: npm test -- src/auth ×2 · edit src/auth/login.ts ×2
Found: bash: npm test -- src/auth failed: FAIL src/auth/login.test.ts > validateUser > expired session
Found: TypeError: Cannot read properties of undefined (reading 'sessionToken')
Found: Tests 1 failed | 41 passed (42)
Found: Tests 42 passed (42)
Said: Let me look at the login code first.
Said: Fixed: validateUser now guards the missing session with optional chaining, so an expired session gets a 401 instead of a 500.
Said: All 42 tests pass.
Expand for details about: req.session.sessionToken, output of 5 tool calls, full text of 9 messages, ./session, req.session.sessionToken.length, exit code 1";
    assert_eq!(out, want, "\n{out}");
}

#[test]
fn a_tight_target_keeps_the_request_the_changes_and_the_conclusion_first() {
    let out = summarize(&login_fix(), "", 90);
    assert!(
        tokens::estimate(&out) <= 90,
        "{} tokens:\n{out}",
        tokens::estimate(&out)
    );
    let want = "\
15:37 Asked: Please fix the login bug in src/auth/login.ts, users get a 500 after their session expires.
Did: edit src/auth/login.ts ×2
Said: Fixed: validateUser now guards the missing session with optional chaining, so an expired session gets a 401 instead of a 500.
Expand for details about: npm test, req.session.sessionToken, 8 more lines, ./session";
    assert_eq!(out, want, "\n{out}");
}

#[test]
fn a_condensed_summary_merges_its_inputs_into_one_timeline() {
    let first = summarize(&login_fix(), "", 400);
    let second = "\
16:02 Asked: Also make logout clear the session cookie.
Did: read src/auth/logout.ts · edit src/auth/logout.ts · edit src/auth/login.ts · bash: npm test -- src/auth
Found: Tests 44 passed (44)
Said: Logout now clears the sid cookie; login and logout share clearSession() in src/auth/session.ts.
Expand for details about: full text of 6 messages";
    let inputs = vec![
        SourceEntry::text("summary", "2026-02-17 15:37–15:41 UTC", &first),
        SourceEntry::text("summary", "2026-02-17 16:02–16:10 UTC", second),
    ];
    let out = summarize(&inputs, "", 600);
    let want = "\
Overview: 2 summaries, 2 requests, 2 changes, 1 command, 3 errors seen
Asked: Please fix the login bug in src/auth/login.ts, users get a 500 after their session expires.
Asked: Also make logout clear the session cookie.
Changed: edit src/auth/login.ts ×3 · edit src/auth/logout.ts
Ran: bash: npm test -- src/auth ×3
Looked at: read src/auth/login.ts · read src/auth/logout.ts
Found: bash: npm test -- src/auth failed: FAIL src/auth/login.test.ts > validateUser > expired session
Found: TypeError: Cannot read properties of undefined (reading 'sessionToken')
Found: Tests 44 passed (44)
Said: Fixed: validateUser now guards the missing session with optional chaining, so an expired session gets a 401 instead of a 500.
Said: All 42 tests pass.
Said: Logout now clears the sid cookie; login and logout share clearSession() in src/auth/session.ts.
Expand for details about: req.session.sessionToken, ./session, req.session.sessionToken.length, exit code 1, full text of 2 input summaries, 1 failed, 41 passed, 42 passed";
    assert_eq!(out, want, "\n{out}");
}

#[test]
fn prose_from_another_summarizer_is_condensed_by_its_sentences() {
    let inputs = vec![
        SourceEntry::text(
            "summary",
            "",
            "The user asked to migrate the schema to v3. We decided to add the column with ALTER TABLE instead of rebuilding.\nExpand for details about: exact SQL, row counts",
        ),
        SourceEntry::text(
            "summary",
            "",
            "Deployed v3 to staging; the migration took 42 s on 1.2M rows.\nExpand for details about: deploy logs",
        ),
    ];
    let out = summarize(&inputs, "", 300);
    let want = "\
Overview: 2 summaries
Said: The user asked to migrate the schema to v3.
Said: We decided to add the column with ALTER TABLE instead of rebuilding.
Said: Deployed v3 to staging; the migration took 42 s on 1.2M rows.
Expand for details about: exact SQL, row counts, deploy logs, full text of 2 input summaries";
    assert_eq!(out, want, "\n{out}");
}

#[test]
fn json_escapes_and_code_never_reach_a_summary() {
    let entries = vec![
        SourceEntry::text("user", "", "Run the installer script please"),
        assistant(
            "",
            vec![
                SourcePart::Text("```js\nconsole.log(\"x\")\n```\n{\"a\": 1}\nconst y = 2;".into()),
                call(
                    "c1",
                    "bash",
                    json!({"command": "cat > /tmp/fix_markdown2.py << 'EOF'\nimport re\nprint(re.sub(r'\\n', ' ', open('a').read()))\nEOF"}),
                ),
                call(
                    "c2",
                    "write",
                    json!({"path": "scripts/setup.sh", "content": "#!/bin/sh\nnpm install -g @mariozechner/pi-coding-agent\n"}),
                ),
            ],
        ),
        result(
            "c1",
            ") +\\n\\t\\t\\t\\t\\t\\tchalk.cyan(\\\"npm install\\\"),\n{\"ok\":true}",
            false,
        ),
    ];
    let out = summarize(&entries, "", 300);
    for line in out.lines() {
        assert_eq!(junk::classify(line), None, "junk line {line:?} in\n{out}");
    }
    assert!(out.contains("bash: cat > /tmp/fix_markdown2.py << 'EOF' …"), "{out}");
    assert!(out.contains("write scripts/setup.sh"), "{out}");
}

#[test]
fn deterministic_within_every_target_and_never_empty() {
    let entries = login_fix();
    assert_eq!(summarize(&entries, "", 120), summarize(&entries, "", 120));
    for target in [1, 10, 24, 30, 50, 200, 2000] {
        let out = summarize(&entries, "", target);
        assert!(tokens::estimate(&out) <= target.max(24), "target {target}: {out}");
        assert!(out.contains("Expand for details about:"), "target {target}: {out}");
    }
    let empty = summarize(&[], "", 100);
    assert_eq!(empty, "(no text content)\nExpand for details about:");
    // A caller with text only still gets a summary of it.
    let text = summarize(&[], "We decided to ship v2.1.0 on Friday after the E_STALE fix.", 100);
    assert!(text.starts_with("Said: We decided to ship v2.1.0"), "{text}");
}
