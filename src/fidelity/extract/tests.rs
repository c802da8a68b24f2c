//! The extractor on hand-made cases: paths with spaces and dots, Windows paths, CJK text
//! around identifiers, code blocks, every kind, and what keeping means.

use super::*;

fn idents(text: &str) -> Vec<(String, Kind)> {
    let mut set = IdentifierSet::default();
    extract(text, false, &mut set);
    set.items().iter().map(|i| (i.text.clone(), i.kind)).collect()
}

fn texts(text: &str) -> Vec<String> {
    idents(text).into_iter().map(|(t, _)| t).collect()
}

#[test]
fn paths_with_dots_locations_and_trailing_punctuation() {
    assert_eq!(
        idents("Fixed packages/coding-agent/src/theme/theme.ts:42:7, then ./scripts/run.sh and ~/.config/app.json."),
        [
            ("packages/coding-agent/src/theme/theme.ts".to_string(), Kind::Path),
            ("./scripts/run.sh".to_string(), Kind::Path),
            ("~/.config/app.json".to_string(), Kind::Path),
        ]
    );
    // A bare file name with a known extension is a path; `object.member` is code.
    assert_eq!(
        idents("read theme.ts and Cargo.lock; call console.log"),
        [
            ("theme.ts".to_string(), Kind::Path),
            ("Cargo.lock".to_string(), Kind::Path),
            ("console.log".to_string(), Kind::Code),
        ]
    );
    // Two-part words without an extension or anchor are prose, not paths.
    assert!(idents("and/or input/output").is_empty());
}

#[test]
fn paths_with_spaces_are_taken_whole_when_quoted() {
    assert_eq!(
        texts(r#"open "/Users/me/My Project/app.config.ts" and `C:\Program Files\Tool\tool.exe` now"#),
        ["/Users/me/My Project/app.config.ts", r"C:\Program Files\Tool\tool.exe"]
    );
    // Quoted prose with spaces is not a path.
    assert!(texts(r#"she said "hello there" twice"#).is_empty());
}

#[test]
fn windows_paths_but_not_escape_sequences() {
    assert_eq!(
        idents(r"see C:\Users\me\src\main.rs and src\lib\util.py"),
        [
            (r"C:\Users\me\src\main.rs".to_string(), Kind::Path),
            (r"src\lib\util.py".to_string(), Kind::Path),
        ]
    );
    assert!(
        texts(r"printf 'a\nb\tc'").is_empty(),
        "{:?}",
        texts(r"printf 'a\nb\tc'")
    );
}

#[test]
fn cjk_text_around_identifiers_is_a_boundary() {
    assert_eq!(
        texts("请修改src/auth/login.ts文件中的validateUser函数，错误码E_NOT_FOUND。"),
        ["src/auth/login.ts", "validateUser", "E_NOT_FOUND"]
    );
    assert_eq!(texts("テスト：128 ms、コミット7f3a9c2"), ["128 ms", "7f3a9c2"]);
}

#[test]
fn code_blocks_yield_their_names() {
    let text = "```ts\nconst sessionToken = await LcmEngine.open(dbPath)\nfs.readFileSync('a.json')\n```";
    assert_eq!(
        idents(text),
        [
            ("sessionToken".to_string(), Kind::Code),
            ("LcmEngine.open".to_string(), Kind::Code),
            ("dbPath".to_string(), Kind::Code),
            ("fs.readFileSync".to_string(), Kind::Code),
            ("a.json".to_string(), Kind::Path),
        ]
    );
}

#[test]
fn kinds_of_identifier() {
    let got = idents(
        "TypeError at validate_user(): E_NOT_FOUND, ENOENT, TS2345, exit code 1, 128 ms, 3 failed, 10MB, 42%, \
         v1.2, 2026.9.6, commit 7f3a9c2e, id 0190a2b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b, https://example.com/a?b=1, \
         lcm::engine, @napi-rs/cli, pi-coding-agent, render(x)",
    );
    let want = [
        ("TypeError", Kind::Code),
        ("validate_user", Kind::Code),
        ("E_NOT_FOUND", Kind::ErrorCode),
        ("ENOENT", Kind::ErrorCode),
        ("TS2345", Kind::ErrorCode),
        ("exit code 1", Kind::ErrorCode),
        ("128 ms", Kind::Quantity),
        ("3 failed", Kind::Quantity),
        ("10MB", Kind::Quantity),
        ("42%", Kind::Quantity),
        ("v1.2", Kind::Version),
        ("2026.9.6", Kind::Version),
        ("7f3a9c2e", Kind::Hash),
        ("0190a2b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b", Kind::Hash),
        ("https://example.com/a?b=1", Kind::Url),
        ("lcm::engine", Kind::Code),
        ("@napi-rs/cli", Kind::Code),
        ("pi-coding-agent", Kind::Code),
        ("render", Kind::Code),
    ];
    assert_eq!(got, want.iter().map(|(t, k)| (t.to_string(), *k)).collect::<Vec<_>>());
}

#[test]
fn plain_prose_has_no_identifiers() {
    assert!(texts(
        "Please take a look at the login page; it is well-known and read-only. Version 2 is next, 1.5 times."
    )
    .is_empty());
}

#[test]
fn commands_name_program_and_subcommand() {
    assert_eq!(command_name("npm test -- --run"), Some("npm test".into()));
    assert_eq!(
        command_name("cd /repo && cargo build --release"),
        Some("cargo build".into())
    );
    assert_eq!(command_name("FOO=1 git diff HEAD~1"), Some("git diff".into()));
    assert_eq!(command_name("cat /tmp/x.txt"), None);
    assert_eq!(command_name("ls"), None);
    let mut set = IdentifierSet::default();
    extract_command("npm run build\necho done", true, &mut set);
    assert_eq!(set.items()[0].text, "npm run");
    assert!(set.items()[0].salient);
}

#[test]
fn repeats_are_one_identifier_and_salience_sticks() {
    let mut set = IdentifierSet::default();
    extract("src/a.ts", false, &mut set);
    extract("src/a.ts again", true, &mut set);
    extract("src/a.ts", false, &mut set);
    assert_eq!(set.len(), 1);
    assert!(set.items()[0].salient);
}

#[test]
fn keeping_is_verbatim_on_word_boundaries() {
    let ident = |text: &str, kind| Identifier {
        text: text.into(),
        kind,
        salient: false,
    };
    let h = Haystack::new("edited src/a.ts:42 (commit 7F3A9C2) in 128ms; exited with status 1; user_id");
    assert!(kept_in(&h, &ident("src/a.ts", Kind::Path)));
    assert!(!kept_in(&h, &ident("a.t", Kind::Path)));
    assert!(kept_in(&h, &ident("7f3a9c2e1d0b", Kind::Hash)));
    assert!(kept_in(&h, &ident("128 ms", Kind::Quantity)));
    assert!(kept_in(&h, &ident("exit code 1", Kind::ErrorCode)));
    assert!(!kept_in(&h, &ident("user", Kind::Code)), "inside user_id");
    assert!(kept_in(&h, &ident("user_id", Kind::Code)));
}
