//! Junk lines: summary lines a reader cannot use — raw JSON, escape sequences, source code.
//! The benchmark reports their share, and the offline summarizer never emits a candidate
//! line this calls junk. The rules are in the README ("Summary fidelity").

/// Why a line is junk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Junk {
    /// `\n`, `\t`, `\"`, `\\`, `\u00e9` written out.
    Escapes,
    /// A JSON object or a `"key": value` pair.
    Json,
    /// A line of source code.
    Code,
}

/// Classifies one line of a summary; `None` when it reads as prose, a log entry or a list.
pub(crate) fn classify(line: &str) -> Option<Junk> {
    let line = line.trim();
    if line.is_empty() {
        return None;
    }
    if has_escapes(line) {
        return Some(Junk::Escapes);
    }
    if has_json(line) {
        return Some(Junk::Json);
    }
    // A `role:` or `Did:` label in front of the line does not make it prose.
    let body = match line.split_once(": ") {
        Some((label, rest))
            if label.len() <= 24 && label.chars().all(|c| c.is_alphanumeric() || " -_[]:".contains(c)) =>
        {
            rest.trim()
        }
        _ => line,
    };
    is_code(body).then_some(Junk::Code)
}

fn has_escapes(line: &str) -> bool {
    let b = line.as_bytes();
    b.windows(2).enumerate().any(|(i, w)| {
        w[0] == b'\\'
            && match w[1] {
                b'n' | b't' | b'r' => b.get(i + 2).is_none_or(|c| !c.is_ascii_lowercase()),
                b'"' | b'\\' => true,
                b'u' => b.len() >= i + 6 && b[i + 2..i + 6].iter().all(u8::is_ascii_hexdigit),
                _ => false,
            }
    })
}

fn has_json(line: &str) -> bool {
    if line.contains("{\"") || line.contains("\":\"") || line.contains("\": \"") || line.contains("[{") {
        return true;
    }
    // `"key": 1`, `"key": [`, `"key": {`.
    let mut rest = line;
    while let Some(i) = rest.find("\":") {
        let after = rest[i + 2..].trim_start();
        let before = &rest[..i];
        let key_ok = before.rfind('"').is_some_and(|q| {
            let key = &before[q + 1..];
            !key.is_empty() && key.len() <= 40 && !key.contains(' ')
        });
        if key_ok && after.starts_with(|c: char| c.is_ascii_digit() || "[{tfn-".contains(c)) {
            return true;
        }
        rest = &rest[i + 2..];
    }
    false
}

/// Statement shapes and symbol density of source code.
fn is_code(line: &str) -> bool {
    const STARTS: &[&str] = &[
        "import ",
        "export ",
        "const ",
        "let mut ",
        "var ",
        "function ",
        "def ",
        "class ",
        "return ",
        "pub fn ",
        "fn ",
        "use ",
        "#include",
        "package ",
        "public ",
        "private ",
        "async fn ",
        "impl ",
        "struct ",
        "interface ",
        "type ",
        "} else",
        "if (",
        "for (",
        "while (",
        "elif ",
        "from ",
        "#!/",
    ];
    const ENDS: &[&str] = &[";", "{", "}", "};", "});", "})", "=>", "(", ","];
    let starts = STARTS.iter().any(|s| line.starts_with(s))
        && (line.contains('(')
            || line.contains('=')
            || line.contains('{')
            || line.contains(';')
            || line.contains(" from "));
    let ends = ENDS.iter().any(|e| line.ends_with(e)) && line.chars().filter(|c| "(){}[];=".contains(*c)).count() >= 2;
    let assignment = line.starts_with("let ") && line.contains(" = ");
    let non_space: Vec<char> = line.chars().filter(|c| !c.is_whitespace()).collect();
    let symbols = non_space.iter().filter(|c| "{}[]();=<>|&*$\\^".contains(**c)).count();
    let dense = non_space.len() >= 12 && symbols * 100 / non_space.len() >= 15;
    let bare_brace = matches!(line, "{" | "}" | "};" | "})" | "});" | ")" | "]" | "],");
    starts || ends || assignment || dense || bare_brace
}

/// Junk lines / all non-empty lines, without the "Expand for details about:" footer.
#[cfg(test)]
pub(crate) fn share(summary: &str) -> (usize, usize) {
    let lines: Vec<&str> = summary
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("Expand for details about:"))
        .collect();
    (lines.iter().filter(|l| classify(l).is_some()).count(), lines.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issues_examples_are_junk() {
        assert_eq!(
            classify(
                r#"Run: `) +\n\t\t\t\t\t\tchalk.cyan(\"npm install -g @mariozechner/pi-coding-agent\"),\n\t\t\t\t\t1,…"#
            ),
            Some(Junk::Escapes)
        );
        assert_eq!(
            classify(r#"assistant: [tool call: bash] {"command":"cat > /tmp/fix_markdown2.py << 'EOF'"}"#),
            Some(Junk::Json)
        );
    }

    #[test]
    fn code_lines_are_junk() {
        for line in [
            "import { foo } from './bar'",
            "const x = await engine.open(path);",
            "  if (a) {",
            "});",
            "assistant: export function render(theme: Theme): string {",
            "let mut n = 0;",
            "def main(argv):",
            "x[i] = (a && b) || (c <= d);",
        ] {
            assert_eq!(classify(line), Some(Junk::Code), "{line}");
        }
    }

    #[test]
    fn log_lines_and_prose_are_not_junk() {
        for line in [
            "15:37 Asked: port user-message-selector.ts using the patterns of the other selectors",
            "Did: read packages/coding-agent/docs/theme.md; edit src/a.ts ×4; bash: npm test",
            "Found: src/auth/login.ts:42: TypeError: cannot read properties of undefined (reading 'x')",
            "Concluded: let me know if the theme looks right.",
            "bash: find packages/coding-agent/src -name \"*selector.ts\" -type f",
            "user: what does E_NOT_FOUND mean (in describe)?",
            "Tests: 128 passed, 2 failed (exit code 1)",
        ] {
            assert_eq!(classify(line), None, "{line}");
        }
    }

    #[test]
    fn share_skips_the_footer() {
        let s = "Did: edit a.ts\n{\"a\": 1}\n\nExpand for details about: x, y";
        assert_eq!(share(s), (1, 2));
    }
}
