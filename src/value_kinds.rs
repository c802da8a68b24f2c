//! The kinds of value a text holds (a person with a role, a date, a host:port, a ticket id, a
//! commit, a quantity, a preference, a decision): what a question asking "who …", "which port
//! …" wants, and what each stored message is indexed by at ingest (`kinds_of`), so that recall
//! finds a fact of the kind asked for at any age, not only among the newest messages.

use std::sync::LazyLock;

use regex::Regex;

/// Version of the patterns below, stored with each message's kinds: a row written under
/// another version is read as not indexed (its text is read, as a message's stored before the
/// index). Raise it whenever a pattern stops matching what it matched (an older row would
/// claim a kind its text no longer has). A pattern that only matches more (units added to
/// quantities) leaves the older rows right for the kinds they claim; they miss only the new
/// matches, which recall still reaches through words and meaning.
pub(crate) const VERSION: i64 = 1;

/// Characters of a message its kinds are taken from (and the scan reads): a fact is said in a
/// sentence, not at the end of a pasted file.
pub(crate) const SCANNED_CHARS: usize = 32 * 1024;

/// The kind of answer a question asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Want {
    Person,
    Date,
    Address,
    Ticket,
    Commit,
    Quantity,
    Preference,
    Decision,
}

impl Want {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Want::Person => "person",
            Want::Date => "date",
            Want::Address => "address",
            Want::Ticket => "ticket",
            Want::Commit => "commit",
            Want::Quantity => "quantity",
            Want::Preference => "preference",
            Want::Decision => "decision",
        }
    }

    /// Every kind.
    #[cfg(test)]
    pub(crate) const ALL: [Want; 8] = [
        Want::Person,
        Want::Date,
        Want::Address,
        Want::Ticket,
        Want::Commit,
        Want::Quantity,
        Want::Preference,
        Want::Decision,
    ];

    /// Its bit in a message's stored kinds (fixed: the numbers are on disk, and each kind's
    /// partial index in `db::schema` names its bit).
    pub(crate) fn bit(self) -> i64 {
        1 << match self {
            Want::Person => 0,
            Want::Date => 1,
            Want::Address => 2,
            Want::Ticket => 3,
            Want::Commit => 4,
            Want::Quantity => 5,
            Want::Preference => 6,
            Want::Decision => 7,
        }
    }
}

/// A value of each kind of answer, as it is written.
static VALUES: LazyLock<Vec<(Want, Regex)>> = LazyLock::new(|| {
    let r = |p: &str| Regex::new(p).expect("a valid pattern");
    vec![
        (Want::Ticket, r(r"\b[A-Z][A-Z0-9]{1,15}(?:-[A-Z0-9]+)*-\d{1,7}\b")),
        (Want::Commit, r(r"\b[0-9a-f]{7,40}\b")),
        (
            Want::Address,
            r(r"(?i)\b(?:[a-z][a-z0-9-]*(?:\.[a-z0-9-]+)*|\d{1,3}(?:\.\d{1,3}){3}):\d{2,5}\b|\bhttps?://\S+"),
        ),
        (
            Want::Date,
            r(
                r"(?i)\b\d{4}-\d{2}-\d{2}\b|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.? \d{1,2}\b|\b\d{1,2} (?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b|\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b",
            ),
        ),
        (
            Want::Quantity,
            r(
                r"(?i)\b\d+(?:[.,]\d+)?\s?(?:ms|s|sec|secs|seconds?|min|mins|minutes?|h|hrs?|hours?|days?|weeks?|gb|mb|kb|tb|pb|gib|mib|kib|%|percent|req/s|rps|qps|hz|khz|mhz|ghz|fps|kg|g|grams?|lbs?|tonnes?|v|mv|kv|w|kw|mw|mah|usd|eur|dollars?|k|m|x|rows|users|requests|connections|workers|replicas|nodes|cores|threads)\b|[$€£]\s?\d+",
            ),
        ),
        (
            Want::Preference,
            r(
                r"(?i)\b(?:prefer|prefers|preferred|rather|favou?rite|always use|never use|i like|i love|i hate|i want)\b",
            ),
        ),
        (
            Want::Decision,
            r(
                r"(?i)\b(?:decided|decision|agreed|settled|chose|chosen|going with|go with|we'll use|we will use|switch(?:ed)? to|picked|final answer|let's use)\b",
            ),
        ),
        // A name with what the person is or does beside it.
        (
            Want::Person,
            r(
                r"(?x)\b[A-Z][a-z]+\ [A-Z][a-z]+(?:-[A-Z][a-z]+)?\b .{0,60}? \b(?i:leads?|led|heads?|owns?|owner|manager|manages|engineer|contact|responsible|in\ charge|maintainer|maintains|director|architect|reviewer|admin|on-?call|runs|lead)\b
                | \b(?i:leads?|led|heads?|owns?|owner|manager|manages|engineer|contact|responsible|in\ charge|maintainer|maintains|director|architect|reviewer|admin|on-?call|runs|lead)\b .{0,60}? \b[A-Z][a-z]+\ [A-Z][a-z]+\b",
            ),
        ),
    ]
});

/// Whether `text` holds a value of one of the kinds `wants`; a quantity, when the question
/// says what it measures (`measure`), of that measure only ("how heavy" is not answered by
/// "42 GB").
pub(crate) fn has_value(wants: &[Want], measure: Option<Measure>, text: &str) -> bool {
    VALUES.iter().any(|(w, re)| {
        wants.contains(w)
            && match (w, measure) {
                (Want::Quantity, Some(m)) => m.pattern().is_match(text),
                _ => re.is_match(text),
            }
    })
}

/// What a quantity measures, when a question says ("how heavy": a mass, "per second": a
/// rate).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Measure {
    Time,
    Size,
    Rate,
    Mass,
    Electric,
    Share,
    Money,
}

impl Measure {
    /// A number with a unit of this measure.
    fn pattern(self) -> &'static Regex {
        /// A pattern compiled once, for the arm it stands in.
        macro_rules! unit {
            ($units:literal) => {{
                static PATTERN: LazyLock<Regex> = LazyLock::new(|| {
                    Regex::new(concat!(r"(?i)\b\d+(?:[.,]\d+)?\s?", $units)).expect("a valid pattern")
                });
                &PATTERN
            }};
        }
        match self {
            Measure::Time => unit!(r"(?:ms|s|sec|secs|seconds?|min|mins|minutes?|h|hrs?|hours?|days?|weeks?)\b"),
            Measure::Size => unit!(r"(?:kb|mb|gb|tb|pb|kib|mib|gib|tib|bytes?)\b"),
            Measure::Rate => unit!(r"(?:hz|khz|mhz|ghz|fps|req/s|rps|qps|per second|/s)(?:\b|$)"),
            Measure::Mass => unit!(r"(?:kg|g|grams?|lbs?|tonnes?)\b"),
            Measure::Electric => unit!(r"(?:v|mv|kv|volts?|w|kw|mw|watts?|mah)\b"),
            Measure::Share => unit!(r"(?:%|percent)"),
            Measure::Money => {
                static MONEY: LazyLock<Regex> = LazyLock::new(|| {
                    Regex::new(r"(?i)[$€£]\s?\d+|\b\d+(?:[.,]\d+)?\s?(?:usd|eur|gbp|dollars?|euros?)\b")
                        .expect("a valid pattern")
                });
                &MONEY
            }
        }
    }
}

/// The kinds of value the start of `text` holds (its first `SCANNED_CHARS` characters, what
/// the scan reads), as `Want::bit`s.
pub(crate) fn kinds_of(text: &str) -> i64 {
    let end = text.char_indices().nth(SCANNED_CHARS).map_or(text.len(), |(i, _)| i);
    let text = &text[..end];
    VALUES
        .iter()
        .filter(|(_, re)| re.is_match(text))
        .fold(0, |kinds, (w, _)| kinds | w.bit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_indexed_by_the_kinds_of_value_its_start_holds() {
        let text = "Maya Chen leads the infra team; the cache is on redis-7.int:6380 since 2026-03-04.";
        let kinds = kinds_of(text);
        for w in [Want::Person, Want::Address, Want::Date] {
            assert_ne!(kinds & w.bit(), 0, "{w:?}");
            assert!(has_value(&[w], None, text));
        }
        for w in [Want::Ticket, Want::Preference, Want::Decision] {
            assert_eq!(kinds & w.bit(), 0, "{w:?}");
        }
        assert_eq!(kinds_of("hello there"), 0);
        // What lies past the scanned start is not indexed (the scan would not read it either).
        let late = format!("{}\nTicket OPS-4121 is the one.", "é".repeat(SCANNED_CHARS));
        assert_eq!(kinds_of(&late) & Want::Ticket.bit(), 0);
        assert_ne!(kinds_of("Ticket OPS-4121 is the one.") & Want::Ticket.bit(), 0);
    }

    #[test]
    fn each_kind_has_its_partial_index_on_its_own_bit() {
        for w in Want::ALL {
            let name = format!("lcm_native_message_kinds_{}_idx", w.name());
            let (_, ddl) = crate::db::schema::INDEXES
                .iter()
                .find(|(n, _)| *n == name)
                .unwrap_or_else(|| panic!("no {name}"));
            assert!(ddl.ends_with(&format!("WHERE (kinds & {}) <> 0", w.bit())), "{ddl}");
        }
    }

    #[test]
    fn a_quantity_of_the_measure_asked_for() {
        let payload = "the lift arm is rated for a 38 kg payload";
        let data = "the raw events table grows by about 42 GB a day";
        assert!(has_value(&[Want::Quantity], None, payload) && has_value(&[Want::Quantity], None, data));
        assert!(has_value(&[Want::Quantity], Some(Measure::Mass), payload));
        assert!(!has_value(&[Want::Quantity], Some(Measure::Mass), data));
        assert!(has_value(
            &[Want::Quantity],
            Some(Measure::Rate),
            "ranked servers run at 60 Hz"
        ));
        assert!(!has_value(
            &[Want::Quantity],
            Some(Measure::Rate),
            "a charge lasts 7.2 h"
        ));
        assert!(has_value(
            &[Want::Quantity],
            Some(Measure::Time),
            "a charge lasts 7.2 h"
        ));
        assert!(has_value(
            &[Want::Quantity],
            Some(Measure::Electric),
            "the rail sits at 0.85 V"
        ));
        assert!(has_value(
            &[Want::Quantity],
            Some(Measure::Money),
            "the quote was $4,000"
        ));
        assert!(has_value(&[Want::Quantity], Some(Measure::Share), "within 3 %"));
        // Units added since the first patterns are indexed too.
        assert_ne!(kinds_of("ranked servers run at 60 Hz") & Want::Quantity.bit(), 0);
        assert_ne!(kinds_of("rated for 38 kg") & Want::Quantity.bit(), 0);
        // Another kind asked for with it is not narrowed.
        assert!(has_value(
            &[Want::Quantity, Want::Date],
            Some(Measure::Mass),
            "due 2027-05-11"
        ));
    }
}
