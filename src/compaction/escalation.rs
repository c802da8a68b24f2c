//! Escalation: a normal call, then an aggressive one, then the deterministic fallback. A call
//! is accepted when its output is smaller than its input; an empty answer goes straight to the
//! fallback; an accepted summary longer than the overage factor × its target is capped. The
//! summarizer's failures (throw, reject, timeout, auth) end the pass with nothing written.

use std::sync::Arc;
use std::time::Duration;

use crate::api::Level;
use crate::config::Config;
use crate::error::LcmError;
use crate::fidelity::{self, extract::IdentifierSet, Fidelity};
use crate::history::TemplateRef;
use crate::offline;
use crate::prompts::{name_for_depth, PromptSet, PromptVars};
use crate::summarizer::{SummarizeRequest, Summarizer, SummarizerFailure, SummaryKind, TimeoutPolicy, FALLBACK_MODEL};
use crate::tokens;

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Normal => "normal",
            Level::Aggressive => "aggressive",
            Level::Fallback => "fallback",
            Level::Capped => "capped",
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Escalated {
    pub content: String,
    pub level: Level,
    pub model: String,
    /// Summarizer calls made.
    pub calls: u32,
    /// Time spent waiting for the summarizer.
    pub summarizer_ms: f64,
    /// The summary's fidelity score against its source.
    pub fidelity: Fidelity,
    /// Stayed under `minFidelity` after the retry.
    pub needs_repair: bool,
    /// The template of the prompt the summary answered; none for a fallback and for the offline
    /// summarizer, which reads the source rather than the prompt.
    pub template: Option<TemplateRef>,
}

/// Why a pass ended without a summary.
#[derive(Debug)]
pub(crate) enum PassError {
    /// The provider refused the credentials: the pass is aborted and reported, not thrown.
    Auth(String),
    Failed(LcmError),
}

impl From<LcmError> for PassError {
    fn from(e: LcmError) -> Self {
        PassError::Failed(e)
    }
}

/// The most a call of `kind` asks for: `leafTargetTokens`, or `condensedTargetTokens` (at
/// least 512). A leaf asks for less when its input is short (`target_tokens`).
pub(crate) fn configured_target(config: &Config, kind: SummaryKind) -> i64 {
    match kind {
        SummaryKind::Condensed => config.condensed_target_tokens.max(512),
        SummaryKind::Leaf => config.leaf_target_tokens,
    }
}

/// Target tokens for one call.
pub(crate) fn target_tokens(config: &Config, kind: SummaryKind, input_tokens: i64, aggressive: bool) -> i64 {
    match (kind, aggressive) {
        (SummaryKind::Condensed, _) => configured_target(config, kind),
        (SummaryKind::Leaf, false) => ((input_tokens as f64 * 0.35) as i64)
            .min(configured_target(config, kind))
            .max(192),
        (SummaryKind::Leaf, true) => {
            let cap = 640.min((config.leaf_target_tokens as f64 * 0.55) as i64);
            ((input_tokens as f64 * 0.20) as i64).min(cap).max(96)
        }
    }
}

const FOOTER: &str = "Expand for details about:";

/// Cuts `text` to `max` tokens, keeping its "Expand for details about:" footer and saying
/// that it was capped.
pub(crate) fn cap(text: &str, max: i64) -> String {
    let original = tokens::estimate(text);
    let (body, footer) = match text.rfind(FOOTER) {
        Some(i) => (text[..i].trim_end(), text[i..].trim()),
        None => (text, ""),
    };
    let marker = format!("[Capped from {original} tokens to ~{max}]");
    let footer = tokens::truncate_to_tokens(footer, (max / 4).max(8));
    let room = max - tokens::estimate(&marker) - tokens::estimate(footer) - 2;
    let body = tokens::truncate_to_tokens(body, room.max(0)).trim_end();
    [body, marker.as_str(), footer]
        .iter()
        .filter(|s| !s.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("\n")
}

async fn call(
    summarizer: &Arc<dyn Summarizer>,
    prompt: String,
    request: &SummarizeRequest,
    timeout_ms: i64,
) -> Result<String, PassError> {
    let fut = summarizer.summarize(prompt, request);
    match tokio::time::timeout(Duration::from_millis(timeout_ms.max(1) as u64), fut).await {
        // An empty answer: the caller writes the deterministic fallback.
        Err(_) if request.on_timeout == TimeoutPolicy::Fallback => Ok(String::new()),
        Err(_) => Err(PassError::Failed(LcmError::timeout(timeout_ms))),
        Ok(Err(SummarizerFailure::Auth(m))) => Err(PassError::Auth(m)),
        Ok(Err(SummarizerFailure::Closed)) => Err(PassError::Failed(LcmError::Closed)),
        Ok(Err(SummarizerFailure::LockLost(why))) => Err(PassError::Failed(LcmError::Busy {
            sqlite: None,
            conversation_id: Some(request.conversation_id),
            message: why,
        })),
        Ok(Err(SummarizerFailure::Failed(m))) => Err(PassError::Failed(LcmError::Summarizer(format!(
            "the summarizer failed: {m}; nothing was written"
        )))),
        Ok(Ok(text)) => Ok(text.trim().to_string()),
    }
}

/// The deterministic summary used when the summarizer gives nothing usable.
pub(crate) fn fallback(
    request: &SummarizeRequest,
    identifiers: &IdentifierSet,
    target: i64,
    input_tokens: i64,
) -> Escalated {
    let budget = target.min((input_tokens / 2).max(24));
    let content = offline::summarize(&request.entries, &request.source_text, budget);
    Escalated {
        fidelity: fidelity::score(identifiers, &content),
        content,
        level: Level::Fallback,
        model: FALLBACK_MODEL.to_string(),
        calls: 0,
        summarizer_ms: 0.0,
        needs_repair: false,
        template: None,
    }
}

/// The paragraph a retry prompt ends with when its template does not use
/// `MissingIdentifiers` itself.
fn retry_note(missing: &str) -> String {
    format!(
        "\n\nYour previous summary of this segment left out identifiers that matter. Keep each of these \
         verbatim (in the summary or its \"Expand for details about:\" line): {missing}"
    )
}

/// The identifiers a retry asks for: the salient ones left out, else any left out.
fn missing_for_retry(identifiers: &IdentifierSet, f: &Fidelity, content: &str) -> String {
    if !f.missing_salient.is_empty() {
        return f.missing_salient.join(", ");
    }
    let hay = fidelity::extract::Haystack::new(content);
    identifiers
        .items()
        .iter()
        .filter(|i| !fidelity::extract::kept_in(&hay, i))
        .take(fidelity::MAX_MISSING_LISTED)
        .map(|i| i.text.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// One attempt's prompt: the template of the request's depth, rendered with the attempt's
/// target (what the summarizer is sent, and what the TUI's preview shows).
pub(crate) struct Attempt {
    pub vars: PromptVars,
    pub prompt: String,
    pub target_tokens: i64,
}

/// Renders the prompt of the first (`aggressive: false`) or second attempt.
pub(crate) fn attempt(
    prompts: &PromptSet,
    config: &Config,
    base: &PromptVars,
    request: &SummarizeRequest,
    input_tokens: i64,
    aggressive: bool,
) -> crate::error::Result<Attempt> {
    let target_tokens = target_tokens(config, request.kind, input_tokens, aggressive);
    let vars = PromptVars {
        target_tokens,
        aggressive,
        ..base.clone()
    };
    let prompt = prompts.render(name_for_depth(request.depth), &vars)?;
    Ok(Attempt {
        vars,
        prompt,
        target_tokens,
    })
}

/// Estimated tokens of a request's source text, as the escalation counts them.
pub(crate) fn input_tokens(request: &SummarizeRequest) -> i64 {
    tokens::estimate(&request.source_text).max(1)
}

/// Runs the escalation for one pass. `base` holds the prompt variables that do not depend on
/// the attempt (source, previous context, time range, …).
pub(crate) async fn summarize(
    summarizer: &Arc<dyn Summarizer>,
    prompts: &PromptSet,
    config: &Config,
    base: PromptVars,
    mut request: SummarizeRequest,
) -> Result<Escalated, PassError> {
    let input_tokens = input_tokens(&request);
    request.input_tokens = input_tokens;
    let normal_target = target_tokens(config, request.kind, input_tokens, false);
    let identifiers = fidelity::source_identifiers(&request.entries);
    if request.source_text.trim().is_empty() {
        return Ok(fallback(&request, &identifiers, normal_target, input_tokens));
    }
    let template = name_for_depth(request.depth);
    let mut calls = 0;
    let mut waited = 0.0;
    for aggressive in [false, true] {
        let Attempt {
            vars,
            prompt,
            target_tokens: target,
        } = attempt(prompts, config, &base, &request, input_tokens, aggressive)?;
        request.aggressive = aggressive;
        request.target_tokens = target;
        let started = std::time::Instant::now();
        let text = call(summarizer, prompt, &request, config.summary_timeout_ms).await?;
        waited += started.elapsed().as_secs_f64() * 1000.0;
        calls += 1;
        if text.is_empty() {
            break;
        }
        if tokens::estimate(&text) < input_tokens {
            let max = (target as f64 * config.summary_max_overage_factor).ceil() as i64;
            let accept = |text: String| {
                if tokens::estimate(&text) > max {
                    (cap(&text, max), Level::Capped)
                } else if aggressive {
                    (text, Level::Aggressive)
                } else {
                    (text, Level::Normal)
                }
            };
            let (mut content, mut level) = accept(text);
            let mut score = fidelity::score(&identifiers, &content);
            let mut needs_repair = false;
            // `minFidelity`: a host summary that keeps too little is asked for once more, with
            // what it left out listed; if it still scores under, it is kept and marked.
            if score.is_under(config.min_fidelity) && !summarizer.is_offline() {
                let missing = missing_for_retry(&identifiers, &score, &content);
                let retry_vars = PromptVars {
                    missing_identifiers: missing.clone(),
                    ..vars.clone()
                };
                let mut prompt = prompts.render(template, &retry_vars)?;
                if !prompts.mentions(template, "MissingIdentifiers")? {
                    prompt.push_str(&retry_note(&missing));
                }
                let started = std::time::Instant::now();
                let again = match call(summarizer, prompt, &request, config.summary_timeout_ms).await {
                    Ok(text) => text,
                    // The first answer stands (marked below) when only the retry failed; a
                    // closed engine, a lost operation lock or refused credentials still end the pass.
                    Err(PassError::Failed(e @ (LcmError::Closed | LcmError::Busy { .. }))) => {
                        return Err(PassError::Failed(e))
                    }
                    Err(PassError::Auth(m)) => return Err(PassError::Auth(m)),
                    Err(PassError::Failed(_)) => String::new(),
                };
                waited += started.elapsed().as_secs_f64() * 1000.0;
                calls += 1;
                if !again.is_empty() && tokens::estimate(&again) < input_tokens {
                    let (c, l) = accept(again);
                    let s = fidelity::score(&identifiers, &c);
                    if s.score >= score.score {
                        (content, level, score) = (c, l, s);
                    }
                }
                needs_repair = score.is_under(config.min_fidelity);
            }
            return Ok(Escalated {
                content,
                level,
                model: summarizer.model(),
                calls,
                summarizer_ms: waited,
                fidelity: score,
                needs_repair,
                template: match summarizer.is_offline() {
                    true => None,
                    false => Some(prompts.reference(template)?),
                },
            });
        }
    }
    let mut out = fallback(&request, &identifiers, normal_target, input_tokens);
    out.calls = calls;
    out.summarizer_ms = waited;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_follow_the_design() {
        let c = Config::with_db_path("/tmp/x.db");
        assert_eq!(target_tokens(&c, SummaryKind::Leaf, 10_000, false), 1200);
        assert_eq!(target_tokens(&c, SummaryKind::Leaf, 1_000, false), 350);
        assert_eq!(target_tokens(&c, SummaryKind::Leaf, 100, false), 192);
        assert_eq!(target_tokens(&c, SummaryKind::Leaf, 10_000, true), 640);
        assert_eq!(target_tokens(&c, SummaryKind::Leaf, 1_000, true), 200);
        assert_eq!(target_tokens(&c, SummaryKind::Leaf, 100, true), 96);
        assert_eq!(target_tokens(&c, SummaryKind::Condensed, 100, false), 2000);
        let mut small = c.clone();
        small.condensed_target_tokens = 80;
        small.leaf_target_tokens = 100;
        assert_eq!(target_tokens(&small, SummaryKind::Condensed, 100, true), 512);
        // min(640, 0.55 × 100) = 55 is below the floor of 96: the floor wins.
        assert_eq!(target_tokens(&small, SummaryKind::Leaf, 10_000, true), 96);
    }

    #[test]
    fn capping_keeps_the_footer_and_fits() {
        let body = "word ".repeat(400);
        let text = format!("{body}\nExpand for details about: a, b, c");
        let capped = cap(&text, 60);
        assert!(tokens::estimate(&capped) <= 60, "{}", tokens::estimate(&capped));
        assert!(capped.ends_with("Expand for details about: a, b, c"));
        assert!(capped.contains("[Capped from"));
    }
}
