//! Timestamps: parsing what SQLite and hosts store (always as UTC), and formatting for display
//! in the configured IANA timezone. SQLite `created_at` values are `YYYY-MM-DD HH:MM:SS` UTC;
//! summary `earliest_at`/`latest_at` are ISO-8601 UTC with milliseconds and `Z`.

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, TimeZone, Timelike, Utc};
use std::fmt::Write;

use chrono_tz::{OffsetName, Tz};

use crate::error::{LcmError, Result};

/// The zone used for display. `Utc` renders its abbreviation as the literal `UTC`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DisplayZone {
    Utc,
    Named(Tz),
}

impl DisplayZone {
    /// Parses an IANA zone name (`America/Los_Angeles`, `UTC`, `Etc/GMT+5`). A leading `:`
    /// (the POSIX "read from file" prefix some systems put in `TZ`) is ignored.
    pub fn parse(name: &str) -> Result<Self> {
        let name = name.trim().trim_start_matches(':');
        if name.is_empty() || name.eq_ignore_ascii_case("utc") || name == "Etc/UTC" {
            return Ok(DisplayZone::Utc);
        }
        name.parse::<Tz>().map(DisplayZone::Named).map_err(|_| {
            LcmError::invalid_config(
                "timezone",
                format!("`{name}` is not an IANA timezone name (for example `Europe/Berlin` or `UTC`)"),
            )
        })
    }

    /// The wall-clock date and time of `dt` in this zone, with the zone's abbreviation.
    fn local(&self, dt: &DateTime<Utc>) -> Local {
        fn parts<T: Datelike + Timelike>(t: &T, zone: String) -> Local {
            Local {
                date: (t.year(), t.month(), t.day()),
                time: (t.hour(), t.minute()),
                zone,
            }
        }
        match self {
            DisplayZone::Utc => parts(dt, "UTC".to_string()),
            DisplayZone::Named(tz) => {
                let local = dt.with_timezone(tz);
                // The offset's name is what `%Z` prints (its Display), without a format parser.
                let zone = match local.offset().abbreviation() {
                    Some(name) => gmt_style(name),
                    None => gmt_style(&local.offset().to_string()),
                };
                parts(&local, zone)
            }
        }
    }
}

/// A wall-clock reading. (Formatted by hand: chrono's strftime parser showed up in the
/// assembly profile.)
#[derive(PartialEq)]
struct Local {
    date: (i32, u32, u32),
    time: (u32, u32),
    zone: String,
}

impl Local {
    fn write_date(&self, out: &mut String) {
        let (y, m, d) = self.date;
        // Writing to a String cannot fail.
        let _ = write!(out, "{y:04}-{m:02}-{d:02}");
    }
    fn write_time(&self, out: &mut String) {
        let (h, m) = self.time;
        let _ = write!(out, "{h:02}:{m:02}");
    }
    /// `2026-02-17 15:37`
    fn write_date_time(&self, out: &mut String) {
        self.write_date(out);
        out.push(' ');
        self.write_time(out);
    }
}

/// chrono-tz renders zones without a letter abbreviation as `+04` / `-0330`; show them as
/// `GMT+4` / `GMT-3:30`, the way hosts (Intl) do.
fn gmt_style(abbr: &str) -> String {
    let Some(sign) = abbr.chars().next().filter(|c| *c == '+' || *c == '-') else {
        return abbr.to_string();
    };
    let digits = &abbr[1..];
    if !digits.chars().all(|c| c.is_ascii_digit()) || digits.is_empty() {
        return abbr.to_string();
    }
    let (h, m) = if digits.len() > 2 {
        (&digits[..digits.len() - 2], &digits[digits.len() - 2..])
    } else {
        (digits, "00")
    };
    let h: u32 = h.parse().unwrap_or(0);
    if m == "00" {
        format!("GMT{sign}{h}")
    } else {
        format!("GMT{sign}{h}:{m}")
    }
}

/// Parses a stored or supplied timestamp as UTC. Accepts SQLite's `YYYY-MM-DD HH:MM:SS`
/// (optionally with fractional seconds), ISO-8601 with `T`, `Z` or a numeric offset, and a
/// bare date. Naive values are UTC, never local time (the seed plugin's skew bug).
pub(crate) fn parse_timestamp(value: &str) -> Option<DateTime<Utc>> {
    let v = value.trim();
    if v.is_empty() {
        return None;
    }
    if let Ok(dt) = DateTime::parse_from_rfc3339(v) {
        return Some(dt.with_timezone(&Utc));
    }
    for fmt in [
        "%Y-%m-%d %H:%M:%S%.f%:z",
        "%Y-%m-%dT%H:%M:%S%.f%:z",
        "%Y-%m-%d %H:%M:%S%.f%z",
        "%Y-%m-%dT%H:%M:%S%.f%z",
    ] {
        if let Ok(dt) = DateTime::parse_from_str(v, fmt) {
            return Some(dt.with_timezone(&Utc));
        }
    }
    let naive = v.strip_suffix('Z').unwrap_or(v);
    for fmt in [
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M",
        "%Y-%m-%dT%H:%M",
    ] {
        if let Ok(n) = NaiveDateTime::parse_from_str(naive, fmt) {
            return Some(Utc.from_utc_datetime(&n));
        }
    }
    NaiveDate::parse_from_str(naive, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|n| Utc.from_utc_datetime(&n))
}

/// A UTC instant from epoch milliseconds, if representable.
pub(crate) fn from_epoch_ms(ms: f64) -> Option<DateTime<Utc>> {
    if !ms.is_finite() {
        return None;
    }
    DateTime::<Utc>::from_timestamp_millis(ms.trunc() as i64)
}

/// SQLite's `datetime('now')` shape: `YYYY-MM-DD HH:MM:SS` (UTC, seconds).
pub(crate) fn to_sqlite(dt: &DateTime<Utc>) -> String {
    dt.format("%Y-%m-%d %H:%M:%S").to_string()
}

/// JavaScript's `toISOString()` shape: `YYYY-MM-DDTHH:MM:SS.sssZ`.
pub(crate) fn to_iso_ms(dt: &DateTime<Utc>) -> String {
    dt.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// A stored timestamp as ISO-8601 UTC with milliseconds; text that does not parse is kept.
pub(crate) fn iso_or_raw(raw: String) -> String {
    parse_timestamp(&raw).map(|t| to_iso_ms(&t)).unwrap_or(raw)
}

/// The current time in SQLite's shape.
pub(crate) fn now_sqlite() -> String {
    to_sqlite(&Utc::now())
}

/// `2026-02-17 15:37 PST`: date and 24-hour time to the minute, with the zone abbreviation.
pub(crate) fn format_timestamp(dt: &DateTime<Utc>, zone: DisplayZone) -> String {
    let l = zone.local(dt);
    let mut out = String::with_capacity(24);
    l.write_date_time(&mut out);
    out.push(' ');
    out.push_str(&l.zone);
    out
}

/// `2026-02-17 15:37–17:21 PST` on one day, `2026-02-17 15:37 – 2026-02-18 09:10 PST` across
/// days, a single timestamp when both ends render the same.
pub(crate) fn format_time_range(earliest: &DateTime<Utc>, latest: &DateTime<Utc>, zone: DisplayZone) -> String {
    let (a, b) = (zone.local(earliest), zone.local(latest));
    let mut out = String::with_capacity(48);
    a.write_date_time(&mut out);
    if a == b {
        // Both ends render the same.
    } else if a.zone != b.zone {
        // A daylight-saving change inside the range: name both zones.
        out.push(' ');
        out.push_str(&a.zone);
        out.push_str(" – ");
        b.write_date_time(&mut out);
    } else if a.date == b.date {
        out.push('–');
        b.write_time(&mut out);
    } else {
        out.push_str(" – ");
        b.write_date_time(&mut out);
    }
    out.push(' ');
    out.push_str(&b.zone);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> DateTime<Utc> {
        parse_timestamp(s).unwrap()
    }

    #[test]
    fn sqlite_timestamps_parse_as_utc() {
        let dt = utc("2026-01-01 00:05:00");
        assert_eq!(to_iso_ms(&dt), "2026-01-01T00:05:00.000Z");
        assert_eq!(to_sqlite(&utc("2025-11-20T23:33:01.550Z")), "2025-11-20 23:33:01");
        assert_eq!(to_iso_ms(&utc("2025-11-20T23:33:01.550Z")), "2025-11-20T23:33:01.550Z");
        assert_eq!(to_iso_ms(&utc("2026-02-17T07:37:00+02:00")), "2026-02-17T05:37:00.000Z");
        assert_eq!(to_iso_ms(&utc("2026-02-17")), "2026-02-17T00:00:00.000Z");
        assert!(parse_timestamp("yesterday").is_none());
        assert!(parse_timestamp("").is_none());
    }

    #[test]
    fn epoch_ms() {
        let dt = from_epoch_ms(1_763_681_581_550.0).unwrap();
        assert_eq!(to_iso_ms(&dt), "2025-11-20T23:33:01.550Z");
        assert!(from_epoch_ms(f64::NAN).is_none());
    }

    #[test]
    fn formats_in_named_zones_with_abbreviations() {
        let la = DisplayZone::parse("America/Los_Angeles").unwrap();
        let dt = utc("2026-02-17T23:37:00Z");
        assert_eq!(format_timestamp(&dt, la), "2026-02-17 15:37 PST");
        assert_eq!(format_timestamp(&dt, DisplayZone::Utc), "2026-02-17 23:37 UTC");
        // Midnight renders as 00, never 24.
        assert_eq!(
            format_timestamp(&utc("2026-02-17 00:05:09"), DisplayZone::Utc),
            "2026-02-17 00:05 UTC"
        );
        let dubai = DisplayZone::parse("Asia/Dubai").unwrap();
        assert_eq!(format_timestamp(&dt, dubai), "2026-02-18 03:37 GMT+4");
        let kolkata = DisplayZone::parse("Asia/Kolkata").unwrap();
        assert!(format_timestamp(&dt, kolkata).ends_with("IST"));
    }

    #[test]
    fn time_ranges_compress_same_day() {
        let la = DisplayZone::parse("America/Los_Angeles").unwrap();
        let a = utc("2026-02-17T23:37:00Z");
        let b = utc("2026-02-18T01:21:00Z");
        assert_eq!(format_time_range(&a, &b, la), "2026-02-17 15:37–17:21 PST");
        let c = utc("2026-02-18T17:10:00Z");
        assert_eq!(format_time_range(&a, &c, la), "2026-02-17 15:37 – 2026-02-18 09:10 PST");
        assert_eq!(format_time_range(&a, &a, la), "2026-02-17 15:37 PST");
        // Across a DST change both abbreviations are shown.
        let d = utc("2026-03-09T17:00:00Z");
        assert_eq!(
            format_time_range(&a, &d, la),
            "2026-02-17 15:37 PST – 2026-03-09 10:00 PDT"
        );
    }

    #[test]
    fn zone_parsing() {
        assert_eq!(DisplayZone::parse("UTC").unwrap(), DisplayZone::Utc);
        assert_eq!(DisplayZone::parse(":UTC").unwrap(), DisplayZone::Utc);
        assert!(DisplayZone::parse("Mars/Olympus").is_err());
        assert_eq!(DisplayZone::parse("Nowhere").unwrap_err().code(), "E_INVALID_CONFIG");
    }
}
