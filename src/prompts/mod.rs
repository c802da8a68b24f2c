//! Summarizer prompts: four Go `text/template` files (leaf, d1, d2, d3+), rendered with a real
//! Go-template engine so that operators' lcm-tui templates render here exactly as in lcm-tui.
//!
//! Each file is looked up on its own, first in the explicit `promptDir`, then in
//! `~/.config/lcm-tui/prompts/`, then in the defaults embedded in the binary, so a partial
//! override (one file) works and one override set serves both tools. Templates are parsed
//! and test-rendered once, when the engine opens; a broken one is an E_PROMPT error naming
//! its file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use gtmpl_value::Value as GoValue;
use serde::Serialize;
use sha2::Digest;

use crate::api::{PromptSource, PromptText};
use crate::error::{LcmError, Result};

mod bounds;
mod printf;

/// The four templates, by name, with their embedded defaults.
pub(crate) const TEMPLATES: [(&str, &str); 4] = [
    ("leaf", include_str!("../../prompts/leaf.tmpl")),
    ("condensed-d1", include_str!("../../prompts/condensed-d1.tmpl")),
    ("condensed-d2", include_str!("../../prompts/condensed-d2.tmpl")),
    ("condensed-d3", include_str!("../../prompts/condensed-d3.tmpl")),
];

/// The template for a summary of output depth `depth`: 0 leaf, 1, 2, and 3 for anything deeper.
pub(crate) fn name_for_depth(depth: i64) -> &'static str {
    match depth {
        d if d <= 0 => "leaf",
        1 => "condensed-d1",
        2 => "condensed-d2",
        _ => "condensed-d3",
    }
}

/// The depth a template is for: `leaf` 0, `condensed-dN` N (the inverse of `name_for_depth`).
pub(crate) fn depth_of(canonical: &str) -> i64 {
    (0..=3).find(|&d| name_for_depth(d) == canonical).unwrap_or(3)
}

/// `$HOME/.config/lcm-tui/prompts`: where lcm-native and lcm-tui both look for overrides, and
/// where `export` writes by default.
pub(crate) fn user_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".config/lcm-tui/prompts"))
}

/// Accepts `leaf`, `leaf.tmpl`, `condensed-d2`, `d2`, …; returns the canonical name.
pub(crate) fn canonical_name(name: &str) -> Result<&'static str> {
    let n = name.trim().to_ascii_lowercase();
    let n = n.strip_suffix(".tmpl").unwrap_or(&n);
    let n = match n {
        "d1" | "condensed-d1" => "condensed-d1",
        "d2" | "condensed-d2" => "condensed-d2",
        "d3" | "d3+" | "condensed-d3" => "condensed-d3",
        "leaf" | "d0" => "leaf",
        _ => {
            return Err(LcmError::invalid_input(format!(
                "unknown prompt `{name}`; expected leaf, condensed-d1, condensed-d2 or condensed-d3"
            )))
        }
    };
    Ok(TEMPLATES
        .iter()
        .find(|(t, _)| *t == n)
        .map(|(t, _)| *t)
        .expect("known name"))
}

/// Variables of the prompt templates (in a template, Go field names: `TargetTokens`,
/// `PreviousContext`, …).
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, PartialEq)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct PromptVars {
    pub target_tokens: i64,
    pub previous_context: String,
    pub source_text: String,
    pub child_count: i64,
    pub time_range: String,
    pub depth: i64,
    pub aggressive: bool,
    pub custom_instructions: String,
    /// On a `minFidelity` retry: the salient identifiers the first answer left out, comma
    /// separated; empty otherwise.
    #[serde(default)]
    pub missing_identifiers: String,
}

impl PromptVars {
    fn to_go(&self) -> GoValue {
        let mut m: HashMap<String, GoValue> = HashMap::new();
        m.insert("TargetTokens".into(), self.target_tokens.into());
        m.insert("PreviousContext".into(), self.previous_context.clone().into());
        m.insert("SourceText".into(), self.source_text.clone().into());
        m.insert("ChildCount".into(), self.child_count.into());
        m.insert("TimeRange".into(), self.time_range.clone().into());
        m.insert("Depth".into(), self.depth.into());
        m.insert("Aggressive".into(), self.aggressive.into());
        m.insert("CustomInstructions".into(), self.custom_instructions.clone().into());
        m.insert("MissingIdentifiers".into(), self.missing_identifiers.clone().into());
        GoValue::Object(m)
    }

    /// Sample values for the check at open and for `prompts --render`.
    pub fn sample(depth: i64) -> PromptVars {
        PromptVars {
            target_tokens: 2000,
            previous_context: String::new(),
            source_text: "[2026-02-17 15:37 UTC | user]\nSample message.".into(),
            child_count: 4,
            time_range: "2026-02-17 15:37–17:21 UTC".into(),
            depth,
            aggressive: false,
            custom_instructions: String::new(),
            missing_identifiers: String::new(),
        }
    }
}

/// One parsed template and where it came from.
struct Loaded {
    source: PromptSource,
    text: String,
    template: gtmpl::Template,
    /// What a summary made with it records (`history::TemplateRef`).
    reference: crate::history::TemplateRef,
}

/// The four resolved, parsed templates of one engine.
pub struct PromptSet {
    loaded: Vec<Loaded>,
}

/// The directories searched before the embedded defaults.
#[derive(Clone, Debug, Default)]
pub struct PromptDirs {
    pub explicit: Option<PathBuf>,
    pub user: Option<PathBuf>,
}

impl PromptDirs {
    /// `promptDir`, then `$HOME/.config/lcm-tui/prompts`.
    pub fn new(prompt_dir: Option<&str>) -> PromptDirs {
        PromptDirs {
            explicit: prompt_dir.filter(|d| !d.is_empty()).map(expand_home),
            user: user_dir(),
        }
    }
}

fn expand_home(dir: &str) -> PathBuf {
    match (dir.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(dir),
    }
}

/// Reads the first override of `name` (explicit dir, then the user dir). A file that exists
/// but cannot be read is an error, not a silent fallback.
fn read_override(dirs: &PromptDirs, name: &str) -> Result<Option<(PathBuf, String)>> {
    for dir in [&dirs.explicit, &dirs.user].into_iter().flatten() {
        // A directory that is missing or that this user cannot enter holds no override.
        if !std::fs::metadata(dir).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        let path = dir.join(format!("{name}.tmpl"));
        // Looked at before it is opened: a FIFO or a device would block or never end.
        match std::fs::metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Ok(m) if !m.is_file() => {
                return Err(LcmError::prompt(
                    Some(&path.display().to_string()),
                    format!("prompt template {} is not a regular file", path.display()),
                ))
            }
            Ok(m) if m.len() > bounds::MAX_TEMPLATE_BYTES => {
                return Err(LcmError::prompt(
                    Some(&path.display().to_string()),
                    format!(
                        "prompt template {} is {} bytes; templates are limited to {} bytes",
                        path.display(),
                        m.len(),
                        bounds::MAX_TEMPLATE_BYTES
                    ),
                ))
            }
            _ => {}
        }
        match std::fs::read_to_string(&path) {
            Ok(text) => return Ok(Some((path, text))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(LcmError::prompt(
                    Some(&path.display().to_string()),
                    format!("cannot read prompt template {}: {e}", path.display()),
                ))
            }
        }
    }
    Ok(None)
}

/// A parsed template with Go's `printf` (gtmpl's drops the `0` flag). The error is the parse
/// error's text.
fn go_template(text: &str) -> std::result::Result<gtmpl::Template, String> {
    let mut t = gtmpl::Template::default();
    t.add_func("printf", printf::printf);
    t.parse(text).map_err(|e| e.to_string())?;
    Ok(t)
}

/// Renders with the bounds of `bounds`: the output stops at its cap.
fn render_bounded(t: &gtmpl::Template, text: &str, vars: &PromptVars) -> std::result::Result<String, String> {
    let vars_len = vars.previous_context.len()
        + vars.source_text.len()
        + vars.time_range.len()
        + vars.custom_instructions.len()
        + vars.missing_identifiers.len();
    let mut out = bounds::CappedWriter::new(bounds::max_rendered_bytes(text.len(), vars_len));
    // A backstop for a recursion `check_structure` did not see: gtmpl stops at a template
    // depth of 100,000, which needs ~600 MB of native stack. On a thread whose stack can grow
    // that far (reserved, not allocated), such a template ends with an error, not with the
    // process. Every template that passed the check uses a few kilobytes of it.
    let rendered = std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("lcm-prompt-render".into())
            .stack_size(bounds::RENDER_STACK_BYTES)
            .spawn_scoped(scope, || {
                t.execute(&mut out, &gtmpl::Context::from(vars.to_go()))
                    .map_err(|e| e.to_string())
            })
            .map_err(|e| format!("cannot start the render thread: {e}"))?
            .join()
            .map_err(|_| "the template engine failed while rendering".to_string())?
    });
    rendered?;
    String::from_utf8(out.buf).map_err(|e| e.to_string())
}

fn parse(name: &str, text: &str, origin: &str) -> Result<gtmpl::Template> {
    bounds::check_structure(text)
        .map_err(|why| LcmError::prompt(Some(origin), format!("prompt template {origin} is refused: {why}")))?;
    let t = go_template(text)
        .map_err(|e| LcmError::prompt(Some(origin), format!("prompt template {origin} does not parse: {e}")))?;
    // Catch references to unknown variables now rather than in the middle of a pass.
    render_bounded(&t, text, &PromptVars::sample(depth_of(name)))
        .map_err(|e| LcmError::prompt(Some(origin), format!("prompt template {origin} does not render: {e}")))?;
    Ok(t)
}

impl PromptSet {
    /// Resolves and parses all four templates.
    pub fn load(dirs: &PromptDirs) -> Result<PromptSet> {
        let mut loaded = Vec::with_capacity(4);
        for (name, embedded) in TEMPLATES {
            let (source, text) = match read_override(dirs, name)? {
                Some((path, text)) => (path.display().to_string(), text),
                None => ("embedded".to_string(), embedded.to_string()),
            };
            let origin = if source == "embedded" {
                format!("{name}.tmpl (embedded)")
            } else {
                source.clone()
            };
            let template = parse(name, &text, &origin)?;
            let reference = crate::history::TemplateRef {
                name: format!("{name}.tmpl"),
                sha256: format!("{:x}", sha2::Sha256::digest(text.as_bytes())),
                overridden: source != "embedded",
            };
            loaded.push(Loaded {
                reference,
                source: PromptSource {
                    name: format!("{name}.tmpl"),
                    overridden: source != "embedded",
                    source,
                },
                text,
                template,
            });
        }
        Ok(PromptSet { loaded })
    }

    fn get(&self, name: &str) -> Result<&Loaded> {
        let name = canonical_name(name)?;
        Ok(self
            .loaded
            .iter()
            .find(|l| l.source.name.strip_suffix(".tmpl") == Some(name))
            .expect("all four are loaded"))
    }

    /// Renders template `name` with `vars`.
    /// Whether template `name` refers to variable `var` (for `MissingIdentifiers`, which a
    /// template that does not use it gets appended on a retry).
    pub fn mentions(&self, name: &str, var: &str) -> Result<bool> {
        Ok(self.get(name)?.text.contains(var))
    }

    /// Renders template `name` (any name `canonical_name` accepts) with the sample variables
    /// of its depth, each overridden by `given` (a JSON object; an unknown name is refused).
    ///
    /// `target`: `targetTokens` when `given` does not set it (else the sample's).
    pub fn render_with(&self, name: &str, given: Option<&serde_json::Value>, target: Option<i64>) -> Result<String> {
        let canonical = canonical_name(name)?;
        let mut sample = PromptVars::sample(depth_of(canonical));
        sample.target_tokens = target.unwrap_or(sample.target_tokens);
        let mut merged = serde_json::to_value(sample)?;
        if let Some(serde_json::Value::Object(given)) = given {
            for (k, v) in given {
                if merged.get(k).is_none() {
                    return Err(LcmError::invalid_input(format!("unknown prompt variable `{k}`")));
                }
                merged[k] = v.clone();
            }
        }
        let vars: PromptVars =
            serde_json::from_value(merged).map_err(|e| LcmError::invalid_input(format!("prompt variables: {e}")))?;
        self.render(canonical, &vars)
    }

    pub fn render(&self, name: &str, vars: &PromptVars) -> Result<String> {
        let l = self.get(name)?;
        render_bounded(&l.template, &l.text, vars).map_err(|e| {
            LcmError::prompt(
                Some(&l.source.source),
                format!("prompt template {} failed to render: {e}", l.source.source),
            )
        })
    }

    /// The template `name` as a summary made with it records it.
    pub fn reference(&self, name: &str) -> Result<crate::history::TemplateRef> {
        Ok(self.get(name)?.reference.clone())
    }

    /// Where template `name` came from.
    pub fn source(&self, name: &str) -> Result<PromptSource> {
        Ok(self.get(name)?.source.clone())
    }

    /// Where each template came from.
    pub fn sources(&self) -> Vec<PromptSource> {
        self.loaded.iter().map(|l| l.source.clone()).collect()
    }

    /// The text of the active template `name`.
    pub fn text(&self, name: &str) -> Result<&str> {
        Ok(&self.get(name)?.text)
    }
}

impl PromptSet {
    /// The template `name` in effect, with its default and the difference.
    pub fn show(&self, name: &str) -> Result<PromptText> {
        let l = self.get(name)?;
        let embedded = embedded(name)?.to_string();
        Ok(PromptText {
            diff: crate::diff::unified(
                &format!("{} (embedded)", l.source.name),
                &l.source.source,
                &embedded,
                &l.text,
            ),
            source: l.source.clone(),
            text: l.text.clone(),
            embedded,
        })
    }
}

/// The embedded default of `name`.
pub(crate) fn embedded(name: &str) -> Result<&'static str> {
    let name = canonical_name(name)?;
    Ok(TEMPLATES.iter().find(|(n, _)| *n == name).expect("known").1)
}

/// Writes the embedded defaults into `dir` (created if missing); returns the paths written.
pub(crate) fn export(dir: Option<&Path>, overwrite: bool) -> Result<Vec<PathBuf>> {
    let default = user_dir();
    let dir = dir
        .or(default.as_deref())
        .ok_or_else(|| LcmError::invalid_input("HOME is not set: give the directory to export to"))?;
    std::fs::create_dir_all(dir).map_err(|e| {
        LcmError::io(
            dir.display(),
            format!("cannot create prompt directory {}: {e}", dir.display()),
        )
    })?;
    // An edited template (the folder is shared with lcm-tui) is never replaced silently:
    // every file is checked before any is written.
    if !overwrite {
        let edited: Vec<String> = TEMPLATES
            .iter()
            .map(|(name, text)| (dir.join(format!("{name}.tmpl")), text))
            .filter(|(path, text)| std::fs::read_to_string(path).is_ok_and(|have| have != **text))
            .map(|(path, _)| path.display().to_string())
            .collect();
        if !edited.is_empty() {
            return Err(LcmError::invalid_input(format!(
                "{} differ{} from the default (edited?); nothing was written. Pass overwrite: true (lcm-native prompts --export --force) to replace {}",
                edited.join(", "),
                if edited.len() == 1 { "s" } else { "" },
                if edited.len() == 1 { "it" } else { "them" }
            )));
        }
    }
    TEMPLATES
        .iter()
        .map(|(name, text)| {
            let path = dir.join(format!("{name}.tmpl"));
            std::fs::write(&path, text)
                .map_err(|e| LcmError::io(path.display(), format!("cannot write {}: {e}", path.display())))?;
            Ok(path)
        })
        .collect()
}

#[cfg(test)]
mod tests;
