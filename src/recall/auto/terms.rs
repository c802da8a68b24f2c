//! The words of a turn's message worth looking for in the history: identifiers, numbers and
//! content words (stemmed as the full-text index stems them), without the words every
//! question has ("what", "again", "remind me"), and the kind of answer the message asks for
//! ("who …" a person, "which port …" an address), which finds a fact whose sentence shares
//! no word with the question.

use std::collections::HashSet;
use std::sync::LazyLock;

use rust_stemmers::{Algorithm, Stemmer};

/// Most terms searched for one message: the strongest are kept.
pub(crate) const MAX_TERMS: usize = 12;

/// Longest message read for terms, in bytes (a pasted log is not a question).
const MAX_QUERY_BYTES: usize = 4 * 1024;

/// One term of the query.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Term {
    /// As written, lowercased.
    pub text: String,
    /// The stem of a word (the text itself for an identifier).
    pub stem: String,
    /// An identifier or a number (`ORION-7731`, `6380`, `a1b2c3d`): rare, and worth more.
    pub strong: bool,
    /// Its parts as the index splits them (words of an identifier), for a phrase query.
    pub parts: Vec<String>,
    /// What finding it counts: its rarity in the history, 0 to 2 (`weigh`), 1 more for an
    /// identifier or a number; until weighed, 1 (2 for an identifier).
    pub weight: f64,
    /// Held by so many messages that it is not searched for (`weigh` found it at its cap).
    pub common: bool,
    /// It stands in a sentence that asks something: only such a word is evidence that an
    /// excerpt answers (the words of a statement beside the question are not what it asks).
    pub asked: bool,
}

impl Term {
    /// A bare number (`102`, `44`): in a history of logs and sizes it stands in many places
    /// for many things, so finding it says nothing by itself.
    pub(crate) fn is_bare_number(&self) -> bool {
        !self.text.is_empty() && self.text.chars().all(|c| c.is_ascii_digit())
    }

    /// An identifier or a long number (a digit or inner `-_.:/` in it): what a statement names.
    /// A word in capitals (`API`, `TOOLCALL`) weighs as one but is not one.
    pub(crate) fn is_identifier(&self) -> bool {
        self.strong && (self.text.chars().any(|c| c.is_ascii_digit()) || self.text.contains(['-', '_', '.', ':', '/']))
    }
}

/// The weight of a term found in `df` of the `n` stored messages: BM25's inverse document
/// frequency over the largest it can be (a term in no message), times two, so that a word in
/// one message of many counts about 2 and one in half of them next to nothing; an identifier
/// or a number counts 1 more.
pub(crate) fn weigh(term: &Term, df: i64, n: i64) -> f64 {
    let (df, n) = (df.max(0) as f64, n.max(df).max(1) as f64);
    let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
    let most = (1.0 + (n + 0.5) / 0.5).ln();
    2.0 * idf / most + if term.strong { 1.0 } else { 0.0 }
}

/// A line of a log (it begins with a time or a number, or names a log level): not a question
/// to search for, and its values (latencies, sizes, request ids) are the log's, not facts
/// someone stated.
pub(crate) fn is_log_line(line: &str) -> bool {
    static LOG_LINE: LazyLock<regex::Regex> = LazyLock::new(|| {
        regex::Regex::new(r"^\s*\[?\d|\b(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL)\b").expect("a valid pattern")
    });
    LOG_LINE.is_match(line)
}

pub(crate) use crate::value_kinds::{Measure, Want};

/// What one message asks the history for.
#[derive(Clone, Debug, Default)]
pub(crate) struct Query {
    pub terms: Vec<Term>,
    /// The kinds of answer its questions ask for (one per question that names one).
    pub wants: Vec<Want>,
    /// Its sentences that ask (a question, "remind me …"), as written (not a pasted log's
    /// lines): what recall by meaning compares. A message with none recalls only what an
    /// identifier of it names.
    pub asking: Vec<String>,
    /// What the quantity asked for measures, when a question says ("how heavy …?").
    pub measure: Option<Measure>,
}

impl Query {
    /// Whether `text` holds a value of the kind asked for (a quantity of the measure asked).
    pub(crate) fn holds_value(&self, text: &str) -> bool {
        crate::value_kinds::has_value(&self.wants, self.measure, text)
    }

    /// It asks something.
    pub(crate) fn asks(&self) -> bool {
        !self.asking.is_empty()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.terms.is_empty() && self.wants.is_empty()
    }

    /// The terms the full-text search looks for: a common one would make the index rank most
    /// of the history (at 100,000 messages, 150 ms) for next to nothing.
    pub(crate) fn searched(&self) -> impl Iterator<Item = &Term> {
        self.terms.iter().filter(|t| !t.common)
    }

    /// The FTS5 expression: any of the terms that are not common (an identifier as the phrase
    /// of its parts); empty when every term is common.
    pub(crate) fn fts_match(&self) -> String {
        self.searched()
            .map(|t| format!("\"{}\"", t.parts.join(" ")))
            .collect::<Vec<_>>()
            .join(" OR ")
    }
}

static STEMMER: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));

/// Words that say nothing of what is asked: English function words, the words of asking and
/// remembering, and the small talk of a chat ("thanks", "looks good").
const STOP_WORDS: &str = "a about above after again against all almost also am an and any anyone anything are aren't around as
 ask asked at back be because been before being below between both but by can can't cannot could couldn't
 did didn't do does doesn't doing don't done down during each earlier either else ever every few for from further get gets
 getting give go goes going gone good got great had hadn't has hasn't have haven't having he he'd he'll he's her here here's
 hers herself him himself his how how's however i i'd i'll i'm i've if in into is isn't it it's its itself just know
 last later let let's like likely look looked looks lot made make many may maybe me mean meant mention mentioned might mine
 more most much must my myself need needs never new next nice no nor not nothing now of off ok okay on once one only or
 other others ought our ours ourselves out over own please quick quite rather really recall recalled remember remind
 right said same say saying says see seem seems shall she she'd she'll she's should shouldn't so some something
 sorry still such sure tell telling than thank thanks that that's the their theirs them themselves then there there's these
 they they'd they'll they're they've thing things think this those though thought through to told too under until up
 upon us use used very via want wanted was wasn't way we we'd we'll we're we've well were weren't what what's whatever when
 when's where where's whether which while who who's whom whose why why's will with within without won't would wouldn't
 yeah yes yet you you'd you'll you're you've your yours yourself yourselves again already anyway continue continued
 hi hello hey bye cool fine awesome perfect ah oh hmm alright thing stuff exactly correct true false sounds sound
 again time times today yesterday ago day days week weeks session conversation chat message messages talk talked
 discussed discuss note noted question questions answer answers behind beside besides beyond across
 along among amongst toward towards onto near inside outside first second happen happened happens";

static STOPS: LazyLock<HashSet<&'static str>> = LazyLock::new(|| STOP_WORDS.split_whitespace().collect());

/// Whether a lowercase word says nothing of what is asked (`STOP_WORDS`).
pub(crate) fn is_stop(word: &str) -> bool {
    STOPS.contains(word)
}

/// The cues of each measure a quantity asked for can have, as whole words (the first measure
/// cued wins: "how many updates per second" asks a rate).
const MEASURES: &[(Measure, &[&str])] = &[
    (
        Measure::Rate,
        &[
            "per second",
            "per minute",
            "a second",
            "how often",
            "frequency",
            "tick rate",
            "throughput",
        ],
    ),
    (
        Measure::Time,
        &[
            "how long",
            "how soon",
            "how quickly",
            "how fast",
            "how early",
            "in advance",
            "timeout",
            "latency",
            "duration",
            "interval",
            "uptime",
        ],
    ),
    (
        Measure::Size,
        &[
            "how big",
            "how large",
            "size",
            "memory",
            "ram",
            "storage",
            "disk",
            "data",
            "bandwidth",
        ],
    ),
    (Measure::Mass, &["how heavy", "weigh", "weight", "payload", "mass"]),
    (
        Measure::Electric,
        &["voltage", "volts", "watts", "wattage", "power draw"],
    ),
    (
        Measure::Share,
        &["percent", "percentage", "what fraction", "what share"],
    ),
    (
        Measure::Money,
        &["cost", "price", "budget", "spend", "how much money", "quote"],
    ),
];

/// Cues of `MEASURES` that only a quantity answers (besides those beginning "how …").
const QUANTITY_ONLY: [&str; 14] = [
    "per second",
    "per minute",
    "frequency",
    "tick rate",
    "latency",
    "interval",
    "timeout",
    "duration",
    "weigh",
    "weight",
    "voltage",
    "volts",
    "watts",
    "percentage",
];

/// What a question's quantity measures, if it says, and whether its cue asks for a quantity
/// by itself.
fn measure_of(question: &str) -> Option<(Measure, bool)> {
    let words = format!(" {} ", tokens(&question.to_lowercase()).collect::<Vec<_>>().join(" "));
    MEASURES.iter().find_map(|(m, cues)| {
        let cue = cues.iter().find(|c| words.contains(&format!(" {c} ")))?;
        Some((*m, cue.starts_with("how ") || QUANTITY_ONLY.contains(cue)))
    })
}

/// Numbers that name something rather than count it.
const NAMING_NUMBERS: [&str; 5] = [
    "phone number",
    "account number",
    "serial number",
    "version number",
    "license number",
];

/// The cue words of each kind of answer, in the question (stemmed forms are compared).
const WANTS: &[(Want, &[&str])] = &[
    (
        Want::Ticket,
        &[
            "ticket",
            "issue",
            "jira",
            "bug",
            "incident",
            "case",
            "reference",
            "filed",
        ],
    ),
    (
        Want::Commit,
        &[
            "commit",
            "hash",
            "sha",
            "revision",
            "changeset",
            "bisect",
            "fixed",
            "hotfix",
        ],
    ),
    (
        Want::Address,
        &[
            "port", "host", "hostname", "address", "endpoint", "url", "server", "connect", "reach", "dns", "ip",
        ],
    ),
    (
        Want::Date,
        &[
            "date",
            "deadline",
            "schedule",
            "scheduled",
            "due",
            "launch",
            "freeze",
            "weekday",
        ],
    ),
    (
        Want::Quantity,
        &[
            "how much",
            "how many",
            "how long",
            "how big",
            "how large",
            "how fast",
            "how often",
            "limit",
            "size",
            "budget",
            "cost",
            "timeout",
            "threshold",
            "quota",
            "capacity",
            "number",
            "count",
            "percent",
            "rate",
        ],
    ),
    (
        Want::Preference,
        &[
            "prefer",
            "preference",
            "favorite",
            "favourite",
            "style",
            "rather",
            "taste",
        ],
    ),
    (
        Want::Decision,
        &[
            "decide", "decided", "decision", "settle", "settled", "choose", "chose", "chosen", "pick", "picked",
            "agree", "agreed", "plan",
        ],
    ),
    (
        Want::Person,
        &[
            "who",
            "whom",
            "whose",
            "owner",
            "owns",
            "lead",
            "leads",
            "responsible",
            "in charge",
            "contact",
            "person",
            "manager",
        ],
    ),
];

/// Whether a token is an identifier or a number: it has a digit, or inner punctuation
/// (`-`, `_`, `.`, `:`, `/`), or capitals after its first letter.
fn is_strong(token: &str) -> bool {
    let inner = token.trim_matches(|c: char| !c.is_alphanumeric());
    // A short number ("run 44", "3 days") is everywhere in a history: a word like any other.
    if inner.chars().all(|c| c.is_ascii_digit()) {
        return inner.len() >= 4;
    }
    // A hyphenated word ("on-call") is a word; in capitals ("ORION-DEPLOY") a name.
    let capitals = inner.chars().any(char::is_alphabetic) && !inner.chars().any(char::is_lowercase);
    inner.chars().any(|c| c.is_ascii_digit())
        || inner.contains(['_', '.', ':', '/'])
        || inner.contains('-') && capitals
        || inner.chars().skip(1).any(|c| c.is_uppercase())
}

/// The words of a token as the index splits them (letters and digits, lowercased).
fn parts(token: &str) -> Vec<String> {
    token
        .split(|c: char| !c.is_alphanumeric())
        .filter(|p| !p.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The stem of a lowercase word, as the index's English stemmer makes it.
pub(crate) fn stem(word: &str) -> String {
    STEMMER.stem(word).into_owned()
}

/// The tokens of a text: runs of letters and digits, joined by inner `-_.:/` (an identifier,
/// a host:port, a path), trailing punctuation left off.
pub(crate) fn tokens(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '/' | '\'')))
        .map(|t| t.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|t| !t.is_empty())
}

/// The query of a message: its terms (at most `MAX_TERMS`, the strongest and longest first)
/// and what it asks for.
pub(crate) fn parse(message: &str) -> Query {
    let mut end = message.len().min(MAX_QUERY_BYTES);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    // The lines someone wrote, not the lines of a log pasted with them.
    let prose: String = message[..end]
        .lines()
        .filter(|l| !is_log_line(l))
        .collect::<Vec<_>>()
        .join("\n");
    let message = prose.as_str();
    // A term's key: an identifier as written, a word by its stem.
    let key = |token: &str| {
        let lower = token.to_lowercase();
        match is_strong(token) {
            true => lower,
            false => stem(lower.trim_end_matches("'s")),
        }
    };
    let asked_keys: HashSet<String> = questions(message)
        .filter(|q| asks(q))
        .flat_map(tokens)
        .map(key)
        .collect();
    let mut seen = HashSet::new();
    let mut terms = Vec::new();
    for token in tokens(message) {
        let lower = token.to_lowercase();
        let strong = is_strong(token);
        if !strong {
            let plain = lower.trim_end_matches("'s");
            if plain.chars().count() < 3 || STOPS.contains(plain) || STOPS.contains(lower.as_str()) {
                continue;
            }
        }
        let parts = parts(token);
        if parts.is_empty() {
            continue;
        }
        let stem = key(token);
        if !seen.insert(stem.clone()) {
            continue;
        }
        let asked = asked_keys.contains(&stem);
        terms.push(Term {
            text: lower,
            stem,
            strong,
            parts,
            weight: if strong { 2.0 } else { 1.0 },
            common: false,
            asked,
        });
    }
    // The strongest and longest first: a long question keeps its rarest words.
    terms.sort_by(|a, b| b.strong.cmp(&a.strong).then(b.text.len().cmp(&a.text.len())));
    terms.truncate(MAX_TERMS);
    // Each question of the message may ask for a kind of its own ("Who …? Also, when …?").
    let mut wants = Vec::new();
    for question in questions(message) {
        if let Some(w) = want_of(question) {
            if !wants.contains(&w) {
                wants.push(w);
            }
        }
    }
    let asking: Vec<String> = questions(message).filter(|q| asks(q)).map(String::from).collect();
    let measure = asking.iter().find_map(|q| measure_of(q));
    // A cue that only a quantity answers ("what voltage …?") asks for one; a word like "data"
    // only says which quantity, when one is asked for.
    if let Some((_, true)) = measure {
        if !wants.contains(&Want::Quantity) {
            wants.push(Want::Quantity);
        }
    }
    let measure = measure.map(|(m, _)| m);
    Query {
        wants,
        terms,
        asking,
        measure,
    }
}

/// The message's sentences, each ending at `?`, `.` or `!` (or the end).
fn questions(message: &str) -> impl Iterator<Item = &str> {
    message
        .split_inclusive(['?', '.', '!', '\n'])
        .map(str::trim)
        .filter(|q| !q.is_empty())
}

/// Whether a sentence asks something: a `?`, or a question word first ("Also, …" and "So …"
/// lead into a question without being one).
fn asks(question: &str) -> bool {
    let lower = question.to_lowercase();
    let first = tokens(&lower)
        .find(|w| !matches!(*w, "also" | "so" | "and" | "ok" | "okay" | "then" | "but" | "now"))
        .unwrap_or("");
    lower.contains('?')
        || matches!(
            first,
            "what"
                | "what's"
                | "which"
                | "who"
                | "who's"
                | "whom"
                | "whose"
                | "when"
                | "where"
                | "how"
                | "remind"
                | "tell"
        )
}

fn want_of(message: &str) -> Option<Want> {
    let lower = message.to_lowercase();
    if !asks(message) {
        return None;
    }
    // The question word says it first: "who …", "when …".
    // The first question word only: in "what's the code for the room where …" the question is
    // "what", and "where" begins a clause of it.
    let leading = tokens(&lower)
        .find(|w| {
            matches!(
                *w,
                "who" | "who's" | "whom" | "whose" | "when" | "where" | "what" | "what's" | "which" | "how"
            )
        })
        .filter(|w| !matches!(*w, "what" | "what's" | "which" | "how"));
    match leading {
        Some("when") => return Some(Want::Date),
        // "Where do I point …": a place to connect to, unless a cue below says otherwise.
        Some("where") => {}
        Some(_) => return Some(Want::Person),
        None => {}
    }
    // A number that names (a phone's, an account's) is an identifier, not a quantity: no kind
    // indexed holds it, and sizes or durations would answer it wrongly.
    let lower = NAMING_NUMBERS.iter().fold(lower.clone(), |l, n| l.replace(n, " "));
    let words: Vec<String> = tokens(&lower).map(stem).collect();
    let cued = WANTS.iter().find_map(|(want, cues)| {
        cues.iter()
            .any(|cue| {
                if cue.contains(' ') {
                    lower.contains(cue)
                } else {
                    let s = stem(cue);
                    words.contains(&s)
                }
            })
            .then_some(*want)
    });
    cued.or((leading == Some("where")).then_some(Want::Address))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(q: &Query) -> Vec<&str> {
        q.terms.iter().map(|t| t.text.as_str()).collect()
    }

    #[test]
    fn small_talk_and_question_words_are_no_terms() {
        for m in [
            "thanks!",
            "ok, continue",
            "hi there",
            "Can you remind me what we said earlier?",
            "sounds good",
        ] {
            assert!(parse(m).terms.is_empty(), "{m}: {:?}", texts(&parse(m)));
        }
    }

    #[test]
    fn identifiers_and_numbers_come_first_and_whole() {
        let q = parse("what was the status of ORION-DEPLOY-7731 on cache-stg.internal:6380 and the rollback?");
        assert_eq!(&texts(&q)[..2], &["cache-stg.internal:6380", "orion-deploy-7731"]);
        assert!(q.terms[0].strong);
        assert_eq!(q.terms[1].parts, vec!["orion", "deploy", "7731"]);
        assert!(texts(&q).contains(&"rollback"));
        assert!(!texts(&q).contains(&"status") || q.terms.iter().any(|t| t.stem == "status"));
        assert_eq!(q.fts_match().matches(" OR ").count(), q.terms.len() - 1);
        // A short number and a hyphenated word are words.
        let q = parse("what did run 44 say about the on-call rota?");
        assert!(q.terms.iter().all(|t| !t.strong), "{:?}", q.terms);
    }

    #[test]
    fn a_term_is_asked_only_in_a_sentence_that_asks() {
        let q = parse("Side note: the checkout budget is 350 ms for OPS-7753. Anyway, what should we look at next for the rollout?");
        let asked = |w: &str| q.terms.iter().find(|t| t.text == w).map(|t| t.asked);
        assert_eq!(asked("checkout"), Some(false));
        assert_eq!(asked("rollout"), Some(true));
        assert!(q.asks());
        // An identifier is one wherever it stands; a word in capitals weighs as one but is not.
        let id = q.terms.iter().find(|t| t.text == "ops-7753").unwrap();
        assert!(id.is_identifier() && !id.asked);
        let caps = parse("is the API up?");
        assert!(caps.terms[0].strong && !caps.terms[0].is_identifier() && caps.terms[0].asked);
    }

    #[test]
    fn words_are_stemmed_and_deduplicated() {
        let q = parse("deployments deploy deploying");
        assert_eq!(q.terms.len(), 1);
        assert_eq!(q.terms[0].stem, "deploy");
    }

    #[test]
    fn a_question_names_the_kind_of_answer() {
        let wants = |m: &str| parse(m).wants;
        assert_eq!(wants("who runs billing these days?"), [Want::Person]);
        assert_eq!(wants("Which port does the staging cache listen on?"), [Want::Address]);
        assert_eq!(wants("what ticket was the flaky login test?"), [Want::Ticket]);
        assert_eq!(wants("how long is the session timeout?"), [Want::Quantity]);
        assert_eq!(wants("what did we settle on for the queue?"), [Want::Decision]);
        assert_eq!(wants("Where do I point psql now?"), [Want::Address]);
        // Two questions, two kinds.
        assert_eq!(
            wants("When is the move? Also, who leads payments?"),
            [Want::Date, Want::Person]
        );
        // Not a question: nothing asked.
        assert!(wants("the port is open now").is_empty());
        // "Charge" is a person's only when someone is in it; a phone number counts nothing.
        assert_eq!(wants("Who is in charge of billing?"), [Want::Person]);
        assert_eq!(wants("Which person is in charge of the rollout?"), [Want::Person]);
        assert!(wants("What's the door code for the room where the robots charge?").is_empty());
        assert!(wants("What's the on-call phone number for the network team?").is_empty());
        assert_eq!(wants("How many pallets a night?"), [Want::Quantity]);
        // A measure named: a quantity of it is asked for.
        let q = parse("What voltage should the SoC supply read?");
        assert_eq!((q.wants, q.measure), (vec![Want::Quantity], Some(Measure::Electric)));
        assert_eq!(
            parse("How many simulation updates per second do ranked games run at?").measure,
            Some(Measure::Rate)
        );
        assert_eq!(parse("How heavy a bin can the bots lift?").measure, Some(Measure::Mass));
        assert_eq!(
            parse("How long can a robot run on one charge?").measure,
            Some(Measure::Time)
        );
        assert_eq!(parse("How much RAM do the workers get?").measure, Some(Measure::Size));
        assert_eq!(parse("How many pallets a night?").measure, None);
        // A word that only says which quantity asks for none by itself.
        assert!(parse("Which tool carries usage data out of the apps?")
            .wants
            .iter()
            .all(|w| *w != Want::Quantity));
        // A statement names none.
        assert_eq!(parse("The payload limit is 38 kg.").measure, None);
    }

    #[test]
    fn a_pasted_log_is_not_the_question() {
        let q = parse("Here is the log, what went wrong?\n2026-11-25T10:00:01Z INFO svc-3 req=abc latency=12ms\nERROR disk full on node-7");
        assert!(
            q.terms.iter().all(|t| !t.text.contains("svc") && t.text != "disk"),
            "{:?}",
            texts(&q)
        );
    }

    #[test]
    fn a_rare_term_weighs_more_than_a_common_one() {
        let t = parse("backoff").terms.remove(0);
        let (rare, common) = (weigh(&t, 1, 1_000), weigh(&t, 500, 1_000));
        assert!(rare > 1.5 && rare <= 2.0, "{rare}");
        assert!(common < 0.3, "{common}");
        let id = parse("INC-40718").terms.remove(0);
        assert!(weigh(&id, 1, 1_000) > 2.5);
    }

    #[test]
    fn a_huge_message_is_read_up_to_its_bound() {
        let text = "word ".repeat(10_000) + "ZEBRA-1234";
        let q = parse(&text);
        assert!(!texts(&q).contains(&"zebra-1234"));
        assert!(q.terms.len() <= MAX_TERMS);
    }
}
