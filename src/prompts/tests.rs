use super::*;

fn testdata(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/prompts/testdata")
            .join(name),
    )
    .unwrap()
}

fn render_text(text: &str, vars: &PromptVars) -> String {
    let t = go_template(text).unwrap();
    t.render(&gtmpl::Context::from(vars.to_go())).unwrap()
}

fn no_dirs() -> PromptDirs {
    PromptDirs::default()
}

/// lcm-tui's own d1 template ({{if .PreviousContext -}}…{{else -}}…{{end -}} and {{- if}}) must
/// render as Go's text/template renders it. Expected outputs follow Go's trim rules: `{{-`
/// removes all whitespace before the action, `-}}` all whitespace after it.
#[test]
fn lcm_tui_d1_renders_as_go_does() {
    let tmpl = testdata("lcm-tui-d1.tmpl");
    let with = PromptVars {
        target_tokens: 2000,
        previous_context: "Earlier: set up the database.".into(),
        ..PromptVars::default()
    };
    assert_eq!(render_text(&tmpl, &with), testdata("lcm-tui-d1.with-previous.txt"));
    let without = PromptVars {
        target_tokens: 1500,
        ..PromptVars::default()
    };
    assert_eq!(
        render_text(&tmpl, &without),
        testdata("lcm-tui-d1.without-previous.txt")
    );
}

#[test]
fn other_go_constructs_render_as_go_does() {
    let tmpl = testdata("constructs.tmpl");
    let aggressive = PromptVars {
        depth: 1,
        time_range: "2026-02-17 15:37–17:21 UTC".into(),
        child_count: 4,
        aggressive: true,
        target_tokens: 2000,
        ..PromptVars::default()
    };
    assert_eq!(render_text(&tmpl, &aggressive), testdata("constructs.aggressive.txt"));
    let normal = PromptVars {
        depth: 3,
        child_count: 12,
        target_tokens: 512,
        custom_instructions: "be brief".into(),
        ..PromptVars::default()
    };
    assert_eq!(render_text(&tmpl, &normal), testdata("constructs.normal.txt"));
}

#[test]
fn embedded_prompts_are_domain_agnostic_and_end_with_the_expand_footer() {
    let set = PromptSet::load(&no_dirs()).unwrap();
    for (depth, name) in [
        (0, "leaf"),
        (1, "condensed-d1"),
        (2, "condensed-d2"),
        (3, "condensed-d3"),
    ] {
        let vars = PromptVars {
            source_text: "SOURCE-MARKER".into(),
            target_tokens: 777,
            ..PromptVars::sample(depth)
        };
        let out = set.render(name, &vars).unwrap();
        assert!(out.contains("Expand for details about:"), "{name}");
        assert!(out.contains("about 777 tokens"), "{name}");
        assert!(out.contains("SOURCE-MARKER"), "{name}");
        assert!(!out.contains("{{"), "{name} left a template action");
        let lower = out.to_lowercase();
        for word in ["openclaw", "software", "code review", "pull request"] {
            assert!(!lower.contains(word), "{name} mentions {word}");
        }
        assert_eq!(name_for_depth(depth), name);
    }
    assert_eq!(name_for_depth(9), "condensed-d3");
}

#[test]
fn previous_context_aggressive_and_instructions_switch_sections() {
    let set = PromptSet::load(&no_dirs()).unwrap();
    let base = PromptVars::sample(0);
    let plain = set.render("leaf", &base).unwrap();
    assert!(!plain.contains("<previous_context>"));
    assert!(plain.contains("Summary policy:"));
    assert!(!plain.contains("Operator instructions"));
    let rich = set
        .render(
            "leaf",
            &PromptVars {
                previous_context: "PREV".into(),
                aggressive: true,
                custom_instructions: "Keep names.".into(),
                ..base.clone()
            },
        )
        .unwrap();
    assert!(rich.contains("<previous_context>\nPREV\n</previous_context>"));
    assert!(rich.contains("aggressive"));
    assert!(rich.contains("Operator instructions:\nKeep names."));
    let d1 = set
        .render(
            "condensed-d1",
            &PromptVars {
                previous_context: "PREV".into(),
                ..PromptVars::sample(1)
            },
        )
        .unwrap();
    assert!(d1.contains("<previous_context>\nPREV\n</previous_context>"));
    // d2 and d3 take no previous context.
    let d2 = set
        .render(
            "condensed-d2",
            &PromptVars {
                previous_context: "PREV".into(),
                ..PromptVars::sample(2)
            },
        )
        .unwrap();
    assert!(!d2.contains("PREV"));
}

#[test]
fn overrides_resolve_per_file_explicit_dir_first() {
    let explicit = tempfile::tempdir().unwrap();
    let user = tempfile::tempdir().unwrap();
    std::fs::write(explicit.path().join("condensed-d1.tmpl"), "EXPLICIT {{.TargetTokens}}").unwrap();
    std::fs::write(user.path().join("condensed-d1.tmpl"), "USER d1").unwrap();
    std::fs::write(user.path().join("condensed-d2.tmpl"), "USER d2 {{.Depth}}").unwrap();
    let dirs = PromptDirs {
        explicit: Some(explicit.path().to_path_buf()),
        user: Some(user.path().to_path_buf()),
    };
    let set = PromptSet::load(&dirs).unwrap();
    assert_eq!(
        set.render("condensed-d1", &PromptVars::sample(1)).unwrap(),
        "EXPLICIT 2000"
    );
    assert_eq!(set.render("d2", &PromptVars::sample(2)).unwrap(), "USER d2 2");
    assert!(set
        .render("leaf", &PromptVars::sample(0))
        .unwrap()
        .contains("conversation_segment"));
    let sources = set.sources();
    assert_eq!(sources[0].source, "embedded");
    assert!(!sources[0].overridden);
    assert!(
        sources[1].source.ends_with("condensed-d1.tmpl")
            && sources[1].source.starts_with(&*explicit.path().to_string_lossy())
    );
    assert!(sources[2].source.starts_with(&*user.path().to_string_lossy()));
    assert_eq!(sources[3].source, "embedded");
}

#[test]
fn show_gives_the_text_in_effect_the_default_and_the_diff() {
    let explicit = tempfile::tempdir().unwrap();
    let custom = embedded("leaf")
        .unwrap()
        .replacen("conversation_segment", "CUSTOM_SEGMENT", 1);
    std::fs::write(explicit.path().join("leaf.tmpl"), &custom).unwrap();
    let set = PromptSet::load(&PromptDirs {
        explicit: Some(explicit.path().to_path_buf()),
        user: None,
    })
    .unwrap();
    let leaf = set.show("leaf").unwrap();
    assert!(leaf.source.overridden);
    assert_eq!(leaf.text, custom);
    assert_eq!(leaf.embedded, embedded("leaf").unwrap());
    assert!(leaf.diff.starts_with("--- leaf.tmpl (embedded)\n+++ "), "{}", leaf.diff);
    assert!(leaf.diff.contains("\n+") && leaf.diff.contains("CUSTOM_SEGMENT"));
    let d1 = set.show("d1").unwrap();
    assert!(!d1.source.overridden && d1.diff.is_empty() && d1.text == d1.embedded);
}

#[test]
fn a_broken_template_is_e_prompt_naming_its_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("leaf.tmpl"), "Hello {{if .Depth}} unterminated").unwrap();
    let dirs = PromptDirs {
        explicit: Some(dir.path().to_path_buf()),
        user: None,
    };
    let err = PromptSet::load(&dirs).err().expect("must fail");
    assert_eq!(err.code(), "E_PROMPT");
    assert!(err.to_string().contains("leaf.tmpl"), "{err}");
    std::fs::write(dir.path().join("leaf.tmpl"), "Hello {{.NoSuchVariable.Deeper}}").unwrap();
    let err = PromptSet::load(&dirs).err().expect("must fail");
    assert_eq!(err.code(), "E_PROMPT");
}

#[test]
fn names_are_accepted_in_several_spellings() {
    assert_eq!(canonical_name("leaf.tmpl").unwrap(), "leaf");
    assert_eq!(canonical_name("D2").unwrap(), "condensed-d2");
    assert_eq!(canonical_name("condensed-d3.tmpl").unwrap(), "condensed-d3");
    assert_eq!(canonical_name("d7").unwrap_err().code(), "E_INVALID_INPUT");
}

#[test]
fn export_writes_the_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("nested/prompts");
    let written = export(Some(&target), false).unwrap();
    assert_eq!(written.len(), 4);
    assert_eq!(
        std::fs::read_to_string(target.join("leaf.tmpl")).unwrap(),
        embedded("leaf").unwrap()
    );
}

#[test]
fn an_unreadable_override_file_is_an_error_but_a_missing_directory_is_not() {
    let dirs = PromptDirs {
        explicit: Some(PathBuf::from("/definitely/not/here")),
        user: None,
    };
    assert!(PromptSet::load(&dirs).is_ok());
    let dir = tempfile::tempdir().unwrap();
    // A directory where the file should be: it exists but cannot be read as a file.
    std::fs::create_dir(dir.path().join("leaf.tmpl")).unwrap();
    let dirs = PromptDirs {
        explicit: Some(dir.path().to_path_buf()),
        user: None,
    };
    let err = PromptSet::load(&dirs).err().expect("must fail");
    assert_eq!(err.code(), "E_PROMPT");
    assert!(err.to_string().contains("leaf.tmpl"));
}

/// Fuzzing what users control: any template built from Go-template pieces (defines, calls,
/// blocks, conditionals, ranges, printf with any width, variables, stray delimiters) is either
/// refused (E_PROMPT's reasons) or renders within its bounds, without a panic, in bounded
/// time. The pieces can build recursion, fan-out, huge padding and output past the cap.
mod fuzz {
    use std::time::{Duration, Instant};

    use proptest::prelude::*;

    use super::*;

    fn piece() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("text ".to_string()),
            Just("{{.SourceText}}".to_string()),
            Just("{{.TargetTokens}}".to_string()),
            Just("{{.Missing}}".to_string()),
            (0u8..3).prop_map(|k| format!("{{{{define \"t{k}\"}}}}")),
            (0u8..3).prop_map(|k| format!("{{{{template \"t{k}\" .}}}}")),
            (0u8..3).prop_map(|k| format!("{{{{block \"t{k}\" .}}}}")),
            Just("{{end}}".to_string()),
            Just("{{if .Aggressive}}".to_string()),
            Just("{{else}}".to_string()),
            Just("{{range .SourceText}}".to_string()),
            Just("{{with .TimeRange}}".to_string()),
            (0u32..3_000_000).prop_map(|w| format!("{{{{printf \"%{w}d\" 1}}}}")),
            (0u32..3_000_000).prop_map(|w| format!("{{{{printf \"%.{w}f\" 1.5}}}}")),
            Just("{{printf \"%*d\" 999999999 1}}".to_string()),
            Just("{{$a := printf \"%900000d\" 1}}".to_string()),
            Just("{{$a}}{{$a}}{{$a}}{{$a}}".to_string()),
            Just("{{/* comment {{template \"t0\"}} */}}".to_string()),
            Just("{{- .Depth -}}".to_string()),
            Just("{{len .SourceText}}".to_string()),
            Just("{{index .SourceText 99}}".to_string()),
            Just("{{printf \"%s}}\" .SourceText}}".to_string()),
            Just("{{".to_string()),
            Just("}}".to_string()),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 600, ..ProptestConfig::default() })]
        #[test]
        fn any_template_is_refused_or_renders_within_bounds(pieces in prop::collection::vec(piece(), 0..40)) {
            let text = pieces.concat();
            let started = Instant::now();
            // On a thread of its own, so that a case that never ends fails the test (naming
            // its template) instead of hanging it.
            let (tx, rx) = std::sync::mpsc::channel();
            let input = text.clone();
            std::thread::spawn(move || {
                let outcome = std::panic::catch_unwind(|| {
                    if bounds::check_structure(&input).is_err() {
                        return None;
                    }
                    let t = go_template(&input).ok()?;
                    render_bounded(&t, &input, &PromptVars::sample(1)).ok().map(|s| s.len())
                });
                let _ = tx.send(outcome.map_err(|_| ()));
            });
            let outcome = rx.recv_timeout(Duration::from_secs(5));
            prop_assert!(outcome.is_ok(), "no answer within 5 s for {text:?}");
            let outcome = outcome.unwrap();
            prop_assert!(outcome.is_ok(), "panicked on {text:?}");
            if let Ok(Some(len)) = outcome {
                prop_assert!(len <= bounds::max_rendered_bytes(text.len(), 200));
            }
            prop_assert!(started.elapsed() < Duration::from_secs(5), "{:?} on {text:?}", started.elapsed());
        }
    }
}

/// The backstop: a recursion the structure check would not see ends with gtmpl's depth error
/// on the render thread's large stack, not with a stack overflow of the process.
#[test]
fn a_recursion_past_the_check_ends_with_an_error() {
    let text = r#"{{define "r"}}{{template "r" .}}{{end}}{{template "r" .}}"#;
    let t = go_template(text).unwrap();
    let err = render_bounded(&t, text, &PromptVars::sample(0)).unwrap_err();
    assert!(err.to_lowercase().contains("depth"), "{err}");
}

#[test]
fn depth_of_is_the_inverse_of_name_for_depth() {
    for d in 0..=3 {
        assert_eq!(depth_of(name_for_depth(d)), d);
    }
}

#[test]
fn render_with_overrides_the_sample_and_refuses_unknown_names() {
    let set = PromptSet::load(&PromptDirs::default()).unwrap();
    let out = set
        .render_with(
            "d2",
            Some(&serde_json::json!({"sourceText": "SRC-X", "targetTokens": 77})),
            Some(1234),
        )
        .unwrap();
    assert!(
        out.contains("SRC-X") && out.contains("77") && !out.contains("1234"),
        "{out}"
    );
    // Without `targetTokens` in the variables, the caller's target (what compaction asks for).
    let out = set.render_with("leaf", None, Some(1234)).unwrap();
    assert!(out.contains("1234"), "{out}");
    let err = set
        .render_with("leaf", Some(&serde_json::json!({"nope": 1})), None)
        .unwrap_err();
    assert_eq!(err.code(), "E_INVALID_INPUT");
}

/// `export` writes the defaults, again over identical files, but never over an edited one
/// unless told: it names the file and writes nothing (#30: an edited template was lost).
#[test]
fn export_never_replaces_an_edited_template_silently() {
    let dir = tempfile::tempdir().unwrap();
    let paths = export(Some(dir.path()), false).unwrap();
    assert_eq!(paths.len(), TEMPLATES.len());
    export(Some(dir.path()), false).unwrap();
    let edited = dir.path().join("leaf.tmpl");
    std::fs::write(&edited, "my own leaf prompt").unwrap();
    std::fs::remove_file(dir.path().join("condensed-d1.tmpl")).unwrap();
    let err = export(Some(dir.path()), false).unwrap_err();
    assert_eq!(err.code(), "E_INVALID_INPUT");
    assert!(err.to_string().contains("leaf.tmpl differs from the default"), "{err}");
    assert_eq!(std::fs::read_to_string(&edited).unwrap(), "my own leaf prompt");
    assert!(
        !dir.path().join("condensed-d1.tmpl").exists(),
        "nothing is written when one file is refused"
    );
    export(Some(dir.path()), true).unwrap();
    assert_ne!(std::fs::read_to_string(&edited).unwrap(), "my own leaf prompt");
}
