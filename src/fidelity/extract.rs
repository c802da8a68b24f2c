//! The identifier extractor: the specific, checkable things a text names — paths, URLs, code
//! identifiers, error codes, commands, numbers with units, versions and hashes. Deterministic
//! and linear in the text. The rules are documented in the README ("Summary fidelity"), so
//! a user can judge what a score counts.

use std::collections::HashMap;

use serde::Serialize;

/// What kind of thing an identifier is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Kind {
    Path,
    Url,
    Code,
    ErrorCode,
    Command,
    Quantity,
    Version,
    Hash,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Identifier {
    pub text: String,
    pub kind: Kind,
    /// Named by the user or used by a tool call.
    pub salient: bool,
}

/// Identifiers in first-seen order, without repeats (a repeat can only make one salient).
#[derive(Clone, Debug, Default)]
pub(crate) struct IdentifierSet {
    items: Vec<Identifier>,
    index: HashMap<String, usize>,
}

impl IdentifierSet {
    pub(crate) fn add(&mut self, text: &str, kind: Kind, salient: bool) {
        let key = match kind {
            Kind::Hash => text.to_ascii_lowercase(),
            _ => text.to_string(),
        };
        match self.index.get(&key) {
            Some(&i) => self.items[i].salient |= salient,
            None => {
                self.index.insert(key, self.items.len());
                self.items.push(Identifier {
                    text: text.to_string(),
                    kind,
                    salient,
                });
            }
        }
    }

    pub(crate) fn items(&self) -> &[Identifier] {
        &self.items
    }

    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    pub(crate) fn contains(&self, text: &str) -> bool {
        self.index.contains_key(text) || self.index.contains_key(&text.to_ascii_lowercase())
    }
}

/// Extensions that make `name.ext` a file name rather than `object.member`.
const FILE_EXTENSIONS: &[&str] = &[
    "ts", "tsx", "mts", "cts", "js", "jsx", "mjs", "cjs", "rs", "py", "rb", "go", "java", "kt", "c", "h", "cc", "cpp",
    "hpp", "cs", "swift", "php", "lua", "md", "mdx", "txt", "rst", "json", "jsonl", "yaml", "yml", "toml", "lock",
    "ini", "cfg", "conf", "env", "sh", "bash", "zsh", "fish", "ps1", "bat", "sql", "db", "sqlite", "html", "htm",
    "css", "scss", "less", "xml", "svg", "png", "jpg", "jpeg", "gif", "webp", "ico", "pdf", "csv", "tsv", "tmpl",
    "tpl", "vue", "svelte", "astro", "gradle", "proto", "graphql", "wasm", "dll", "so", "dylib", "exe", "zip", "tar",
    "gz", "tgz", "xz", "patch", "diff",
];

/// Units that make a number a quantity (`128 ms`, `3 failed`, `10MB`).
const UNITS: &[&str] = &[
    "ns",
    "us",
    "µs",
    "ms",
    "s",
    "sec",
    "secs",
    "second",
    "seconds",
    "min",
    "mins",
    "minute",
    "minutes",
    "h",
    "hr",
    "hrs",
    "hour",
    "hours",
    "day",
    "days",
    "b",
    "kb",
    "mb",
    "gb",
    "tb",
    "kib",
    "mib",
    "gib",
    "byte",
    "bytes",
    "token",
    "tokens",
    "line",
    "lines",
    "file",
    "files",
    "test",
    "tests",
    "passed",
    "failed",
    "failing",
    "passing",
    "skipped",
    "error",
    "errors",
    "warning",
    "warnings",
    "message",
    "messages",
    "row",
    "rows",
    "item",
    "items",
    "px",
    "rem",
    "em",
    "%",
    "x",
    "k",
    "kbps",
    "mbps",
    "mhz",
    "ghz",
    "fps",
    "cores",
    "core",
    "leaves",
    "summaries",
    "chars",
    "characters",
    "commits",
    "issues",
];

/// errno names that appear in tool output as error codes.
const ERRNO: &[&str] = &[
    "ENOENT",
    "EACCES",
    "EEXIST",
    "EPERM",
    "EISDIR",
    "ENOTDIR",
    "ENOTEMPTY",
    "ECONNREFUSED",
    "ECONNRESET",
    "ETIMEDOUT",
    "EADDRINUSE",
    "EPIPE",
    "EMFILE",
    "ENOSPC",
    "EBUSY",
    "EAGAIN",
    "EINVAL",
    "EROFS",
    "ENOTFOUND",
    "EAI_AGAIN",
    "ELOOP",
    "ENAMETOOLONG",
];

/// Characters that can be part of an identifier-bearing word. CJK text and full-width
/// punctuation are boundaries, so `修改src/a.ts文件` yields `src/a.ts`.
fn is_word_char(c: char) -> bool {
    matches!(c,
        'a'..='z' | 'A'..='Z' | '0'..='9'
        | '_' | '-' | '.' | '/' | '\\' | ':' | '~' | '@' | '+' | '#' | '%' | '&' | '?' | '=' | '$'
        | '\u{C0}'..='\u{24F}' | 'µ')
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// `theme.ts`, `Cargo.lock`, `.env`: the last dot-segment is a known file extension.
fn has_file_extension(w: &str) -> bool {
    let last = w.rsplit(['/', '\\']).next().unwrap_or(w);
    match last.rsplit_once('.') {
        Some((stem, ext)) => {
            let ext = ext.to_ascii_lowercase();
            FILE_EXTENSIONS.contains(&ext.as_str())
                && (stem.chars().any(|c| c.is_ascii_alphabetic()) || stem.is_empty())
                && stem
                    .chars()
                    .all(|c| is_ident_char(c) || "-.@+".contains(c) || c as u32 >= 0xC0)
        }
        None => false,
    }
}

/// Strips a `:line` or `:line:col` location (`src/a.ts:42:7` → `src/a.ts`).
fn strip_location(w: &str) -> &str {
    let mut s = w;
    for _ in 0..2 {
        match s.rsplit_once(':') {
            Some((head, tail)) if !tail.is_empty() && tail.chars().all(|c| c.is_ascii_digit()) && !head.is_empty() => {
                s = head
            }
            _ => break,
        }
    }
    s
}

fn is_windows_path(w: &str) -> bool {
    let b = w.as_bytes();
    (b.len() > 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && b[2] == b'\\') || w.starts_with("\\\\")
}

fn is_path(w: &str) -> bool {
    if !w.chars().any(|c| c.is_ascii_alphabetic()) || w.contains("//") && !w.starts_with("\\\\") {
        return false;
    }
    if is_windows_path(w) {
        return true;
    }
    if w.contains('\\') {
        // `a\b.txt`: a relative Windows path; escapes such as `\n` are not paths.
        return w.split('\\').count() >= 2 && has_file_extension(w);
    }
    if !w.contains('/') {
        return false;
    }
    let anchored = w.starts_with('/') || w.starts_with("./") || w.starts_with("../") || w.starts_with("~/");
    let slashes = w.matches('/').count();
    (anchored && w.len() > 2) || slashes >= 2 || has_file_extension(w)
}

fn is_hash(w: &str) -> bool {
    let n = w.len();
    let hex = w.bytes().all(|b| b.is_ascii_hexdigit());
    let uniform = w.bytes().all(|b| !b.is_ascii_uppercase()) || w.bytes().all(|b| !b.is_ascii_lowercase());
    if (7..=64).contains(&n) && hex && uniform {
        let digits = w.bytes().filter(u8::is_ascii_digit).count();
        return digits > 0 && digits < n && w.bytes().any(|b| b.is_ascii_alphabetic());
    }
    // A UUID.
    let groups: Vec<&str> = w.split('-').collect();
    groups.len() == 5
        && groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups.iter().all(|g| g.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn is_version(w: &str) -> bool {
    let v = w.strip_prefix('v').unwrap_or(w);
    let parts: Vec<&str> = v.split('.').collect();
    let numeric = parts
        .iter()
        .all(|p| !p.is_empty() && p.len() <= 8 && p.bytes().all(|b| b.is_ascii_digit()));
    numeric && (parts.len() >= 3 || (parts.len() == 2 && w.starts_with('v')))
}

fn is_error_code(w: &str) -> bool {
    if ERRNO.contains(&w) {
        return true;
    }
    let upper_snake = w.contains('_')
        && w.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && w.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    if upper_snake && (w.starts_with("E_") || w.starts_with("ERR") || w.contains("_ERR") || w.starts_with("SQLITE_")) {
        return true;
    }
    // TS2345, E0425, HTTP-style `ERR42`.
    let letters = w.chars().take_while(|c| c.is_ascii_uppercase()).count();
    let digits = &w[letters..];
    (1..=3).contains(&letters) && (3..=5).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit())
}

/// A code identifier: snake_case, camelCase, PascalCase with two humps, `a::b`, `obj.member`,
/// `@scope/pkg`, kebab names of three or more parts.
fn is_code(w: &str) -> bool {
    if w.len() < 3 || !w.chars().any(|c| c.is_ascii_alphabetic()) {
        return false;
    }
    if w.starts_with('@') && w.matches('/').count() == 1 && w.len() > 3 {
        return true;
    }
    if w.contains("::") {
        return w.split("::").all(|p| !p.is_empty() && p.chars().all(is_ident_char));
    }
    if w.contains('.') {
        // `console.log`, `engine.compact`: dot-separated identifiers starting with a letter.
        let parts: Vec<&str> = w.split('.').collect();
        return parts.len() >= 2
            && parts.iter().all(|p| {
                p.len() >= 2
                    && p.chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
                    && p.chars().all(|c| is_ident_char(c) || c == '$')
            })
            && parts.iter().any(|p| p.chars().any(|c| c.is_ascii_lowercase()))
            && !parts.iter().all(|p| p.len() <= 2);
    }
    if w.contains('-') {
        let parts: Vec<&str> = w.split('-').collect();
        return parts.len() >= 3
            && parts
                .iter()
                .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()));
    }
    if !w.chars().all(|c| is_ident_char(c) || c == '$') {
        return false;
    }
    let inner_underscore = w.trim_matches('_').contains('_');
    let chars: Vec<char> = w.chars().collect();
    let camel = chars
        .windows(2)
        .any(|p| p[0].is_ascii_lowercase() && p[1].is_ascii_uppercase());
    let humps = chars
        .windows(2)
        .filter(|p| p[0].is_ascii_uppercase() && p[1].is_ascii_lowercase())
        .count();
    inner_underscore || camel || humps >= 2
}

fn is_unit(w: &str) -> bool {
    let lower = w.to_lowercase();
    UNITS.contains(&lower.as_str())
}

/// `128ms`, `42%`, `1.5GiB`: a number with its unit in the same word.
fn is_inline_quantity(w: &str) -> bool {
    let digits = w.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(w.len());
    digits > 0 && digits < w.len() && w[..digits].bytes().any(|b| b.is_ascii_digit()) && is_unit(&w[digits..])
}

fn is_number(w: &str) -> bool {
    w.bytes().any(|b| b.is_ascii_digit())
        && w.bytes().all(|b| b.is_ascii_digit() || b == b'.' || b == b',')
        && w.matches('.').count() <= 1
        && !w.ends_with('.')
}

/// `lorem`, `Ipsum`: letters only, lower case after the first. No rule below can match such a
/// word (each needs a digit, a separator or an inner capital), and prose is mostly these.
fn is_plain_word(w: &str) -> bool {
    let mut bytes = w.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic()) && bytes.all(|b| b.is_ascii_lowercase())
}

/// Classifies one word (already trimmed).
fn classify(w: &str) -> Option<(String, Kind)> {
    if w.len() < 2 || is_plain_word(w) {
        return None;
    }
    let lower = w.to_ascii_lowercase();
    if ["http://", "https://", "file://", "ws://", "wss://"]
        .iter()
        .any(|p| lower.starts_with(p))
    {
        return (w.len() > 10).then(|| (w.to_string(), Kind::Url));
    }
    let located = strip_location(w);
    if is_path(located) {
        return Some((located.to_string(), Kind::Path));
    }
    if is_hash(w) {
        return Some((w.to_string(), Kind::Hash));
    }
    if is_version(w) {
        return Some((w.to_string(), Kind::Version));
    }
    if is_inline_quantity(w) {
        return Some((w.to_string(), Kind::Quantity));
    }
    if is_error_code(w) {
        return Some((w.to_string(), Kind::ErrorCode));
    }
    if has_file_extension(located) && !located.contains(':') {
        return Some((located.to_string(), Kind::Path));
    }
    if is_code(w) {
        return Some((w.to_string(), Kind::Code));
    }
    None
}

/// Trims sentence punctuation and wrapping from a raw word.
fn trim_word(w: &str) -> &str {
    let w = w.trim_end_matches(['.', ',', ':', ';', '?', '!', '=', '&', '#']);
    let w = w.trim_start_matches([':', '=', '&', '?', '#', '+']);
    // A leading `-` is a flag or a minus sign, not part of a name.
    w.trim_start_matches('-')
}

/// Spans of quoted text that are paths with spaces (`"C:\Program Files\x.exe"`,
/// `'/tmp/my dir/a.txt'`), as byte ranges including the quotes.
fn quoted_paths(line: &str) -> Vec<(usize, usize, &str)> {
    let mut out = Vec::new();
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let q = bytes[i];
        if matches!(q, b'"' | b'\'' | b'`') {
            if let Some(len) = line[i + 1..].find(q as char) {
                let inner = &line[i + 1..i + 1 + len];
                if inner.contains(' ') && inner.len() <= 260 && is_path(inner.trim()) && !inner.contains('\n') {
                    out.push((i, i + len + 2, inner.trim()));
                    i += len + 2;
                    continue;
                }
            }
        }
        i += 1;
    }
    out
}

/// Adds the identifiers of `text` to `out`.
pub(crate) fn extract(text: &str, salient: bool, out: &mut IdentifierSet) {
    for line in text.lines() {
        extract_line(line, salient, out);
    }
}

fn extract_line(line: &str, salient: bool, out: &mut IdentifierSet) {
    let quoted = quoted_paths(line);
    for (_, _, p) in &quoted {
        out.add(p, Kind::Path, salient);
    }
    // Words: maximal runs of word characters outside the quoted paths.
    let mut words: Vec<(&str, usize)> = Vec::new();
    let mut start: Option<usize> = None;
    let mut skip_to = 0;
    for (i, c) in line.char_indices().chain(std::iter::once((line.len(), ' '))) {
        if i < skip_to {
            continue;
        }
        if let Some(&(_, qe, _)) = quoted.iter().find(|(qs, _, _)| *qs == i) {
            if let Some(s) = start.take() {
                words.push((&line[s..i], s));
            }
            skip_to = qe;
            continue;
        }
        if is_word_char(c) && i < line.len() {
            start.get_or_insert(i);
        } else if let Some(s) = start.take() {
            words.push((&line[s..i], s));
        }
    }
    for (k, &(raw, at)) in words.iter().enumerate() {
        let w = trim_word(raw);
        if w.is_empty() {
            continue;
        }
        // A number followed by a unit word: `128 ms`, `3 failed`.
        if is_number(w) {
            if let Some(&(next, _)) = words.get(k + 1) {
                let unit = trim_word(next);
                if is_unit(unit) && unit != "x" && unit != "k" && unit != "b" {
                    out.add(&format!("{w} {unit}"), Kind::Quantity, salient);
                }
            }
            continue;
        }
        // `exit code 1`, `exited with code 2`, `exit status 127`.
        if w.eq_ignore_ascii_case("code") || w.eq_ignore_ascii_case("status") {
            let before = line[..at].trim_end().to_ascii_lowercase();
            if before.ends_with("exit") || before.ends_with("exited with") {
                if let Some(&(next, _)) = words.get(k + 1) {
                    let n = trim_word(next);
                    if !n.is_empty() && n.len() <= 3 && n.bytes().all(|b| b.is_ascii_digit()) {
                        out.add(&format!("exit code {n}"), Kind::ErrorCode, salient);
                    }
                }
            }
            continue;
        }
        if let Some((text, kind)) = classify(w) {
            out.add(&text, kind, salient);
            continue;
        }
        // `render(`: a plain name called as a function.
        let end = at + raw.len();
        if line[end..].starts_with('(')
            && w.len() >= 3
            && w.chars().all(is_ident_char)
            && w.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        {
            out.add(w, Kind::Code, salient);
        }
    }
}

/// The command of a shell call as an identifier: its program and subcommand (`npm test`,
/// `git diff`, `cargo build`), from the first line; the rest of that line is scanned as text.
pub(crate) fn extract_command(command: &str, salient: bool, out: &mut IdentifierSet) {
    let first = command.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    if let Some(name) = command_name(first) {
        out.add(&name, Kind::Command, salient);
    }
    extract_line(first, salient, out);
}

/// `npm test`, `git commit`, `cargo build`: a program and a plain-word subcommand, skipping
/// `cd dir &&` and environment assignments. `None` when there is no subcommand.
pub(crate) fn command_name(line: &str) -> Option<String> {
    let segment = line.rsplit("&& ").next().unwrap_or(line);
    let mut words = segment
        .split_whitespace()
        .skip_while(|w| w.contains('=') && !w.starts_with('-') || *w == "sudo" || *w == "env");
    let program = words.next()?;
    let sub = words.next()?;
    let plain = |w: &str| {
        w.len() >= 2 && w.chars().all(|c| c.is_ascii_lowercase() || c == '-' || c == ':') && !w.starts_with('-')
    };
    let program_ok = program.len() >= 2 && program.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    (program_ok && plain(sub)).then(|| format!("{program} {sub}"))
}

/// Whether `summary` keeps `ident`: it appears verbatim on word boundaries. Hashes match
/// case-insensitively and by a prefix of 7 or more characters (`7f3a9c2` keeps the full
/// hash); quantities match with or without the space (`128 ms`, `128ms`).
pub(crate) fn kept_in(summary: &Haystack, ident: &Identifier) -> bool {
    match ident.kind {
        Kind::Hash => {
            let lower = ident.text.to_ascii_lowercase();
            summary
                .lower_words
                .iter()
                .any(|w| w.len() >= 7 && w.len() <= lower.len() && lower.starts_with(w.as_str()) || *w == lower)
        }
        Kind::Quantity => {
            find_bounded(&summary.text, &ident.text) || find_bounded(&summary.text, &ident.text.replace(' ', ""))
        }
        Kind::ErrorCode if ident.text.starts_with("exit code ") => {
            let n = &ident.text["exit code ".len()..];
            ["code ", "status ", "exit "]
                .iter()
                .any(|p| find_bounded(&summary.lower, &format!("{p}{n}")))
        }
        _ => find_bounded(&summary.text, &ident.text),
    }
}

/// A summary prepared for `kept_in`.
pub(crate) struct Haystack {
    pub text: String,
    pub lower: String,
    lower_words: Vec<String>,
}

impl Haystack {
    pub(crate) fn new(text: &str) -> Haystack {
        let lower = text.to_ascii_lowercase();
        let lower_words = lower
            .split(|c: char| !c.is_ascii_hexdigit())
            .filter(|w| w.len() >= 7)
            .map(str::to_string)
            .collect();
        Haystack {
            text: text.to_string(),
            lower,
            lower_words,
        }
    }
}

/// `needle` occurs in `hay` with no identifier character on either side.
fn find_bounded(hay: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return false;
    }
    let first = needle.chars().next().is_some_and(is_ident_char);
    let last = needle.chars().last().is_some_and(is_ident_char);
    let mut from = 0;
    while let Some(pos) = hay[from..].find(needle) {
        let start = from + pos;
        let end = start + needle.len();
        let before_ok = !first || !hay[..start].chars().next_back().is_some_and(is_ident_char);
        let after_ok = !last || !hay[end..].chars().next().is_some_and(is_ident_char);
        if before_ok && after_ok {
            return true;
        }
        from = start + needle.chars().next().map_or(1, char::len_utf8);
    }
    false
}

#[cfg(test)]
mod tests;
