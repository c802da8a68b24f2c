//! Bounds on what a prompt template may cost. Override files are user input: any template must
//! render in bounded time and memory, or be refused with a reason.
//!
//! - A template file over `MAX_TEMPLATE_BYTES`, or that is not a regular file, is not read.
//! - Templates may not call themselves, directly or through others (gtmpl would recurse until
//!   the native stack overflows), and one render may invoke at most `MAX_INVOCATIONS` templates
//!   (a chain of templates each calling the next twice would otherwise double its output per
//!   level). Checked once, when the file is parsed.
//! - `range` only iterates over the prompt's variables, which are scalars, and `printf` widths
//!   are bounded (see `printf`), so the remaining cost is the output itself: a render stops
//!   with an error once it exceeds `max_rendered_bytes`.
//!
//! The largest legitimate prompt is a condensed prompt over `leafChunkTokens` of inputs (20,000
//! tokens by default, ~80 KB of text, up to ~1 MB with a large chunk size) plus the template
//! itself (the defaults are under 2 KB): the bounds below leave a wide margin above that.

use std::collections::HashMap;
use std::io::Write;

/// A template file larger than this is refused (the defaults are under 2 KB).
pub(super) const MAX_TEMPLATE_BYTES: u64 = 256 * 1024;
/// Templates one render may invoke, counting every call site along every path.
pub(super) const MAX_INVOCATIONS: u64 = 1_000;
/// Native stack of the render thread: room for gtmpl's own depth limit (100,000 nested
/// template calls, ~6 KB each), the backstop should a recursion get past `check_structure`.
pub(super) const RENDER_STACK_BYTES: usize = 1 << 30;
/// The absolute cap on a rendered prompt.
pub(super) const MAX_RENDERED_BYTES: usize = 32 * 1024 * 1024;

/// The cap on one render: a generous multiple of what goes in (the template and the
/// variables' text), and never more than `MAX_RENDERED_BYTES`.
pub(super) fn max_rendered_bytes(template_len: usize, vars_len: usize) -> usize {
    (16 * (template_len + vars_len) + 1024 * 1024).min(MAX_RENDERED_BYTES)
}

/// A writer that refuses to grow past its cap, which ends the render with an error.
pub(super) struct CappedWriter {
    pub buf: Vec<u8>,
    cap: usize,
}

impl CappedWriter {
    pub(super) fn new(cap: usize) -> CappedWriter {
        CappedWriter { buf: Vec::new(), cap }
    }
}

impl Write for CappedWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.buf.len() + data.len() > self.cap {
            return Err(std::io::Error::other(format!(
                "the rendered prompt would exceed {} bytes",
                self.cap
            )));
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The actions (`{{ … }}`) of a template, trimmed of `-` markers and spaces, comments left
/// out. Quoted strings and character constants inside an action may hold `}}`; a comment runs
/// to `*/` whatever it holds. An action that is never closed is an error with its byte offset
/// (Go's "unclosed action"; gtmpl 0.7's lexer loops forever on one that ends in a space, so it
/// must never see one).
fn actions(text: &str) -> Result<Vec<&str>, usize> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(open) = text[i..].find("{{").map(|p| p + i) {
        let mut j = open + 2;
        if text[j..].starts_with("- ") {
            j += 2;
        }
        if text[j..].starts_with("/*") {
            // A comment: to its `*/`, then the action's close.
            let end = text[j + 2..].find("*/").map(|p| p + j + 4).ok_or(open)?;
            let close = text[end..].find("}}").map(|p| p + end).ok_or(open)?;
            i = close + 2;
            continue;
        }
        let mut quote: Option<u8> = None;
        let mut close = None;
        while j < bytes.len() {
            let c = bytes[j];
            match quote {
                Some(b'"' | b'\'') if c == b'\\' => j += 1,
                Some(q) if c == q => quote = None,
                Some(_) => {}
                None if c == b'"' || c == b'`' || c == b'\'' => quote = Some(c),
                None if c == b'}' && bytes.get(j + 1) == Some(&b'}') => {
                    close = Some(j);
                    break;
                }
                None => {}
            }
            j += 1;
        }
        let Some(close) = close else { return Err(open) };
        let inner = text[open + 2..close]
            .trim_start_matches('-')
            .trim_end_matches('-')
            .trim();
        out.push(inner);
        i = close + 2;
    }
    Ok(out)
}

/// The name after a keyword (`define "x"` → `x`), unquoted as Go (and gtmpl) unquote it, so
/// that `"\x72"` and `"r"` name the same template.
fn quoted_name(rest: &str) -> Option<String> {
    let rest = rest.trim_start();
    let mut chars = rest.chars();
    match chars.next()? {
        '`' => {
            let body = &rest[1..];
            body.find('`').map(|end| body[..end].to_string())
        }
        '"' => {
            let mut out = String::new();
            let hex = |chars: &mut std::str::Chars<'_>, n: usize| -> Option<char> {
                let digits: String = chars.by_ref().take(n).collect();
                char::from_u32(u32::from_str_radix(&digits, 16).ok()?)
            };
            loop {
                match chars.next()? {
                    '"' => return Some(out),
                    '\\' => {
                        let c = match chars.next()? {
                            'n' => '\n',
                            't' => '\t',
                            'r' => '\r',
                            'a' => '\u{7}',
                            'b' => '\u{8}',
                            'f' => '\u{c}',
                            'v' => '\u{b}',
                            'x' => hex(&mut chars, 2)?,
                            'u' => hex(&mut chars, 4)?,
                            'U' => hex(&mut chars, 8)?,
                            d @ '0'..='7' => {
                                let rest: String = chars.by_ref().take(2).collect();
                                char::from_u32(u32::from_str_radix(&format!("{d}{rest}"), 8).ok()?)?
                            }
                            other => other,
                        };
                        out.push(c);
                    }
                    c => out.push(c),
                }
            }
        }
        _ => None,
    }
}

/// Refuses a template that calls itself (directly or through others) or whose render would
/// invoke more than `MAX_INVOCATIONS` templates. The reason names the templates.
pub(super) fn check_structure(text: &str) -> Result<(), String> {
    // Calls made by each template, by call site ("" is the file's main template).
    let mut calls: HashMap<String, Vec<String>> = HashMap::new();
    calls.insert(String::new(), Vec::new());
    // Open blocks: Some(name) for a define/block, None for if/range/with.
    let mut open: Vec<Option<String>> = Vec::new();
    let actions = actions(text).map_err(|at| format!("unclosed action: the `{{{{` at byte {at} has no `}}}}`"))?;
    for action in actions {
        let (word, rest) = action.split_once(char::is_whitespace).unwrap_or((action, ""));
        let owner = open.iter().rev().find_map(|o| o.clone()).unwrap_or_default();
        match word {
            "define" => {
                let name = quoted_name(rest).unwrap_or_default();
                calls.entry(name.clone()).or_default();
                open.push(Some(name));
            }
            "block" => {
                let name = quoted_name(rest).unwrap_or_default();
                calls.entry(owner).or_default().push(name.clone());
                calls.entry(name.clone()).or_default();
                open.push(Some(name));
            }
            "template" => {
                if let Some(name) = quoted_name(rest) {
                    calls.entry(owner).or_default().push(name);
                }
            }
            "if" | "range" | "with" => open.push(None),
            "end" => {
                open.pop();
            }
            _ => {}
        }
    }
    // Invocations per template (itself and everything below it), memoised; a template met
    // again while its own count is being computed is a recursion.
    fn count(
        name: &str,
        calls: &HashMap<String, Vec<String>>,
        done: &mut HashMap<String, u64>,
        path: &mut Vec<String>,
    ) -> Result<u64, String> {
        if let Some(n) = done.get(name) {
            return Ok(*n);
        }
        if let Some(at) = path.iter().position(|p| p == name) {
            let mut cycle: Vec<String> = path[at..].iter().map(|p| format!("{p:?}")).collect();
            cycle.push(format!("{name:?}"));
            return Err(format!(
                "template {name:?} calls itself ({}); recursion is not allowed in prompt templates",
                cycle.join(" → ")
            ));
        }
        path.push(name.to_string());
        let mut total: u64 = 1;
        for callee in calls.get(name).map(Vec::as_slice).unwrap_or(&[]) {
            total = total.saturating_add(count(callee, calls, done, path)?);
            if total > MAX_INVOCATIONS {
                break;
            }
        }
        path.pop();
        done.insert(name.to_string(), total);
        Ok(total)
    }
    let mut done = HashMap::new();
    let mut names: Vec<&String> = calls.keys().collect();
    names.sort();
    for name in names {
        let n = count(name, &calls, &mut done, &mut Vec::new())?;
        if n > MAX_INVOCATIONS {
            return Err(format!(
                "rendering template {name:?} would invoke more than {MAX_INVOCATIONS} templates"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recursion_direct_and_mutual_is_refused() {
        let direct = r#"{{define "r"}}{{template "r" .}}{{end}}{{template "r" .}}"#;
        let err = check_structure(direct).unwrap_err();
        assert!(err.contains(r#"template "r" calls itself"#), "{err}");
        let mutual = r#"{{define "a"}}x{{template "b" .}}{{end}}{{define "b"}}{{if .Aggressive}}{{template "a" .}}{{end}}{{end}}{{template "a" .}}"#;
        assert!(check_structure(mutual).unwrap_err().contains("recursion"));
        let via_block = r#"{{block "a" .}}{{template "a" .}}{{end}}"#;
        assert!(check_structure(via_block).is_err());
    }

    #[test]
    fn exponential_fan_out_is_refused_but_reuse_is_fine() {
        let mut t = String::from(r#"{{define "l0"}}x{{end}}"#);
        for i in 1..=12 {
            t.push_str(&format!(
                r#"{{{{define "l{i}"}}}}{{{{template "l{p}" .}}}}{{{{template "l{p}" .}}}}{{{{end}}}}"#,
                p = i - 1
            ));
        }
        t.push_str(r#"{{template "l12" .}}"#);
        assert!(check_structure(&t).unwrap_err().contains("more than 1000"));
        let reuse = r#"{{define "h"}}Header{{end}}{{template "h" .}} {{.SourceText}} {{template "h" .}}"#;
        assert_eq!(check_structure(reuse), Ok(()));
    }

    #[test]
    fn quotes_comments_and_trim_markers_are_read_right() {
        let t = r#"{{- /* {{template "x"}} */ -}}{{printf "%s}}" .SourceText}}{{- define "d" -}}{{template "e" .}}{{end}}{{define "e"}}e{{end}}{{template "d" .}}"#;
        assert_eq!(check_structure(t), Ok(()));
        // The default templates pass.
        for (_, text) in crate::prompts::TEMPLATES {
            assert_eq!(check_structure(text), Ok(()));
        }
    }

    #[test]
    fn an_unclosed_action_is_refused_before_the_parser_sees_it() {
        for text in ["{{ ", "a {{text ", "{{-", "{{.Depth}}{{ .X", "{{printf \"}}\" "] {
            let err = check_structure(text).unwrap_err();
            assert!(err.starts_with("unclosed action"), "{text:?}: {err}");
        }
        assert_eq!(check_structure("{{/* a */}} b }} c"), Ok(()));
    }

    #[test]
    fn comments_character_constants_and_escaped_names_are_read_as_go_reads_them() {
        // An apostrophe in a comment opens nothing.
        assert_eq!(check_structure("{{/* don't */}}{{.Depth}}"), Ok(()));
        assert_eq!(check_structure("{{- /* it's }} fine */ -}}x"), Ok(()));
        // A character constant may hold an escaped quote.
        assert_eq!(check_structure(r#"{{if eq .Depth '\''}}x{{end}}"#), Ok(()));
        // A comment must not hide what follows it.
        let hidden = r#"{{/* don't */}}{{define "r"}}{{template "r" .}}{{end}}{{template "r" .}}"#;
        assert!(check_structure(hidden).unwrap_err().contains("calls itself"));
        // The same template under an escaped name.
        let escaped = r#"{{define "r"}}{{template "\x72" .}}{{end}}{{template "r" .}}"#;
        assert!(check_structure(escaped).unwrap_err().contains("calls itself"));
        let octal = r#"{{define "r"}}{{template "\162" .}}{{end}}{{template `r` .}}"#;
        assert!(check_structure(octal).unwrap_err().contains("calls itself"));
    }

    #[test]
    fn a_capped_writer_stops_at_its_cap() {
        let mut w = CappedWriter::new(10);
        assert!(w.write_all(b"0123456789").is_ok());
        assert!(w.write_all(b"x").is_err());
        assert_eq!(w.buf.len(), 10);
        assert_eq!(max_rendered_bytes(1000, 1000), 16 * 2000 + 1024 * 1024);
        assert_eq!(max_rendered_bytes(usize::MAX / 64, 0), MAX_RENDERED_BYTES);
    }
}
