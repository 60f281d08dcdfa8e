//! OAI-PMH datestamps and granularity: parsing the two UTC forms (and the offsets, fractions and
//! spellings servers write instead), ordering, W3C-datetime output.
//!
//! Written by hand rather than with a date crate: the harvest parses one datestamp per record
//! (millions per run), the common grammar is two fixed-width forms, and the output must be
//! exactly the intersection of W3C-DTF and `xsd:date`/`xsd:dateTime`, which consumers of either
//! accept (SM-13).

use std::fmt;

/// The datestamp granularity a repository declares in `Identify` (OAI-13).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Granularity {
    /// `YYYY-MM-DD`: every repository supports it.
    #[default]
    Day,
    /// `YYYY-MM-DDThh:mm:ssZ`.
    Seconds,
}

impl Granularity {
    /// Parses the `granularity` element of `Identify`; `None` for anything but the two forms
    /// (compared case-insensitively, as some servers write `yyyy-mm-dd`).
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("YYYY-MM-DD") {
            Some(Self::Day)
        } else if text.eq_ignore_ascii_case("YYYY-MM-DDThh:mm:ssZ") {
            Some(Self::Seconds)
        } else {
            None
        }
    }

    /// The spelling used in `Identify`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Day => "YYYY-MM-DD",
            Self::Seconds => "YYYY-MM-DDThh:mm:ssZ",
        }
    }
}

/// A UTC instant as an OAI-PMH datestamp, remembering whether it was given to the day or to the
/// second so it is written back in the same form. Ordered by instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Datestamp {
    secs: i64,
    day_only: bool,
}

/// `t` in seconds since the Unix epoch (0 for a time before it).
pub fn unix_secs(t: std::time::SystemTime) -> i64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

impl Datestamp {
    /// Parses `YYYY-MM-DD`, or a time `YYYY-MM-DDThh:mm:ss` with an optional fraction of any
    /// length (truncated, OAI-19) and a zone: `Z`, an offset (`+hh:mm`, `+hhmm`, `+hh`, RFC 3339
    /// and ISO 8601), converted to UTC, or none, read as UTC. `t`, `z` and a space for `T` are
    /// accepted too. Surrounding whitespace is allowed.
    ///
    /// OAI-PMH asks for the UTC forms, but servers write what their platform's date library
    /// does (Python's `isoformat()`: `2026-11-25T21:46:58.085156+00:00`; PostgreSQL's text:
    /// `2026-11-25 21:46:58+00`), and an unread `responseDate` leaves an incremental harvester
    /// nothing to start its next harvest from. The two UTC forms stay on the fixed-width path: one datestamp per record.
    pub fn parse(text: &str) -> Option<Self> {
        Self::parse_bytes(text.trim().as_bytes())
    }

    /// [`Datestamp::parse`] of bytes not known to be UTF-8 (what is read is ASCII), around which
    /// only ASCII whitespace is allowed: for text the bridge wrote itself, such as a sitemap's
    /// `lastmod`, read back a million times in a patch, where checking it for UTF-8 first
    /// cost as much as the parse.
    pub fn parse_bytes(b: &[u8]) -> Option<Self> {
        let b = b.trim_ascii();
        if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
            return None;
        }
        let year = digits(&b[0..4])? as i64;
        let month = digits(&b[5..7])?;
        let day = digits(&b[8..10])?;
        if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
            return None;
        }
        let days = days_from_civil(year, month, day);
        if b.len() == 10 {
            return Some(Self {
                secs: days * 86_400,
                day_only: true,
            });
        }
        if b.len() < 19 || !matches!(b[10], b'T' | b't' | b' ') || b[13] != b':' || b[16] != b':' {
            return None;
        }
        let (h, m, s) = (
            digits(&b[11..13])?,
            digits(&b[14..16])?,
            digits(&b[17..19])?,
        );
        if h > 23 || m > 59 || s > 60 {
            return None;
        }
        let rest = &b[19..];
        let offset = if rest == b"Z" { 0 } else { zone(rest)? };
        Some(Self {
            secs: days * 86_400 + i64::from(h * 3600 + m * 60 + s.min(59)) - offset,
            day_only: false,
        })
    }

    /// A datestamp from seconds since the Unix epoch, to the second.
    pub fn from_unix(secs: i64) -> Self {
        Self {
            secs,
            day_only: false,
        }
    }

    /// Packs the value into one `i64` (`secs * 2 + day flag`), ordered like the value itself.
    pub fn pack(self) -> i64 {
        self.secs * 2 + i64::from(self.day_only)
    }

    /// The inverse of [`Datestamp::pack`].
    pub fn unpack(packed: i64) -> Self {
        Self {
            secs: packed.div_euclid(2),
            day_only: packed.rem_euclid(2) == 1,
        }
    }

    /// [`Datestamp::pack`] of a datestamp that may be missing: `i64::MIN` for none, which sorts
    /// below every datestamp (a record without one is the oldest).
    pub fn pack_option(d: Option<Self>) -> i64 {
        d.map_or(i64::MIN, Self::pack)
    }

    /// The inverse of [`Datestamp::pack_option`].
    pub fn unpack_option(packed: i64) -> Option<Self> {
        (packed != i64::MIN).then(|| Self::unpack(packed))
    }

    /// Seconds since the Unix epoch.
    pub fn unix(self) -> i64 {
        self.secs
    }

    /// The last second the value covers: the end of the day for a day, else the instant itself.
    pub fn last_second(self) -> i64 {
        if self.day_only {
            self.secs + 86_399
        } else {
            self.secs
        }
    }

    /// One unit of `granularity` earlier (a day, or a second): the overlap an incremental
    /// harvest keeps so that a change in the same unit as the last harvest is not missed.
    pub fn minus_unit(self, granularity: Granularity) -> Self {
        match granularity {
            Granularity::Day => Self {
                secs: self.secs.div_euclid(86_400) * 86_400 - 86_400,
                day_only: true,
            },
            Granularity::Seconds => Self {
                secs: self.secs - 1,
                day_only: false,
            },
        }
    }

    /// Whether the value was given to the day only.
    pub fn is_day(self) -> bool {
        self.day_only
    }

    /// The value written in `granularity`, as an OAI-PMH `from`/`until` argument. When `end` is
    /// true and a day is widened to seconds, the last second of the day is used, so an `until`
    /// bound stays inclusive of the whole day (OAI-17).
    pub fn in_granularity(self, granularity: Granularity, end: bool) -> String {
        match granularity {
            Granularity::Day => Self {
                secs: self.secs.div_euclid(86_400) * 86_400,
                day_only: true,
            }
            .to_string(),
            Granularity::Seconds if self.day_only && end => Self {
                secs: self.secs + 86_399,
                day_only: false,
            }
            .to_string(),
            Granularity::Seconds => Self {
                secs: self.secs,
                day_only: false,
            }
            .to_string(),
        }
    }
}

impl Datestamp {
    /// Appends `YYYY-MM-DD` or `YYYY-MM-DDThh:mm:ssZ` to `out`: valid W3C-DTF and valid
    /// `xsd:date`/`xsd:dateTime` (SM-13). Formats digits directly: a caller may write one per record.
    pub fn write_to(self, out: &mut String) {
        // The digits go into one buffer, pushed once.
        fn put(slot: &mut [u8], value: i64) {
            let mut v = value.unsigned_abs();
            for digit in slot.iter_mut().rev() {
                *digit = b'0' + (v % 10) as u8;
                v /= 10;
            }
        }
        let (y, m, d) = civil_from_days(self.secs.div_euclid(86_400));
        let mut text = *b"0000-00-00T00:00:00Z";
        // A year outside W3C-DTF's four digits is spelled as it is, before the rest (never
        // produced from a parsed datestamp).
        let four_digits = (0..=9999).contains(&y);
        if four_digits {
            put(&mut text[0..4], y);
        } else {
            out.push_str(&format!("{y:04}"));
        }
        put(&mut text[5..7], i64::from(m));
        put(&mut text[8..10], i64::from(d));
        let len = if self.day_only {
            10
        } else {
            let rem = self.secs.rem_euclid(86_400);
            put(&mut text[11..13], rem / 3600);
            put(&mut text[14..16], rem % 3600 / 60);
            put(&mut text[17..19], rem % 60);
            text.len()
        };
        let from = if four_digits { 0 } else { 4 };
        out.push_str(std::str::from_utf8(&text[from..len]).expect("ASCII digits"));
    }
}

/// Writes `YYYY-MM-DD` or `YYYY-MM-DDThh:mm:ssZ` (see [`Datestamp::write_to`]).
impl fmt::Display for Datestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::with_capacity(20);
        self.write_to(&mut out);
        f.write_str(&out)
    }
}

fn digits(b: &[u8]) -> Option<u32> {
    if b.is_empty() || b.len() > 9 {
        return None;
    }
    b.iter().try_fold(0u32, |acc, &c| {
        c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0'))
    })
}

/// The offset from UTC in seconds of what follows a time's seconds: an optional fraction (one
/// digit or more, dropped), then `Z`, nothing (UTC), or `+hh:mm`, `+hhmm`, `+hh` (or `-`), at
/// most 23:59 (RFC 3339's `time-numoffset`). `None` for anything else.
fn zone(rest: &[u8]) -> Option<i64> {
    let rest = match rest {
        [b'.', fraction @ ..] => {
            let n = fraction.iter().take_while(|c| c.is_ascii_digit()).count();
            if n == 0 {
                return None;
            }
            &fraction[n..]
        }
        _ => rest,
    };
    let (sign, hhmm) = match rest {
        [] | [b'Z' | b'z'] => return Some(0),
        [b'+', hhmm @ ..] => (1, hhmm),
        [b'-', hhmm @ ..] => (-1, hhmm),
        _ => return None,
    };
    let (hh, mm): (&[u8], &[u8]) = match hhmm {
        [_, _] => (hhmm, b"00"),
        [_, _, b':', _, _] => (&hhmm[..2], &hhmm[3..]),
        [_, _, _, _] => (&hhmm[..2], &hhmm[2..]),
        _ => return None,
    };
    let (h, m) = (digits(hh)?, digits(mm)?);
    if h > 23 || m > 59 {
        return None;
    }
    Some(sign * i64::from(h * 3600 + m * 60))
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

// Howard Hinnant's days_from_civil / civil_from_days (public-domain algorithms).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `input` parses to `expected`, as text and as bytes.
    #[track_caller]
    fn check(input: &str, expected: Option<&str>) {
        assert_eq!(
            Datestamp::parse(input).map(|d| d.to_string()).as_deref(),
            expected,
            "{input:?}"
        );
        let bytes = Datestamp::parse_bytes(input.as_bytes());
        assert_eq!(bytes, Datestamp::parse(input), "{input:?} as bytes");
    }

    /// Bytes are read as ASCII: anything else, whitespace included, is refused.
    #[test]
    fn bytes_that_are_not_ascii_are_no_datestamp() {
        assert!(Datestamp::parse_bytes(b"2011-07-18T16:31:00Z").is_some());
        for bad in [
            &b"2011-07-18T16:31:00\xff"[..],
            b"2011-07-18T16:31:00.\xc3\xa9Z",
            b"\xc2\xa02011-07-18",
            b"2011\xe2\x80\x9107-18",
        ] {
            assert_eq!(Datestamp::parse_bytes(bad), None, "{bad:?}");
        }
        // As text, Unicode's whitespace around it is allowed (a no-break space).
        assert!(Datestamp::parse("\u{a0}2011-07-18").is_some());
    }

    #[test]
    fn parses_both_granularities_and_rejects_the_rest() {
        // OAI-19: both forms, fractional seconds truncated.
        check("2008-04-16", Some("2008-04-16"));
        check(" 2011-07-18T16:31:00Z\n", Some("2011-07-18T16:31:00Z"));
        check("2011-07-18T16:31:00.123Z", Some("2011-07-18T16:31:00Z"));
        check("2011-07-18T16:31Z", None);
        check("2011-02-29", None);
        check("2012-02-29", Some("2012-02-29"));
        check("aaaa-bb-cc", None);
        check("1969-12-31T23:59:59Z", Some("1969-12-31T23:59:59Z"));
        check("2011-07-18T16:31:00.Z", None);
        check("", None);
    }

    #[test]
    fn reads_the_forms_servers_write_instead() {
        // Python's isoformat() (the server of issue 20), PostgreSQL's timestamptz text.
        check(
            "2026-11-25T21:46:58.085156+00:00",
            Some("2026-11-25T21:46:58Z"),
        );
        check(
            "2026-11-25 21:46:58.085156+00",
            Some("2026-11-25T21:46:58Z"),
        );
        // Offsets of every spelling, converted to UTC.
        check("2011-07-18T16:31:00+02:00", Some("2011-07-18T14:31:00Z"));
        check("2011-07-18T16:31:00+0200", Some("2011-07-18T14:31:00Z"));
        check("2011-07-18T16:31:00+02", Some("2011-07-18T14:31:00Z"));
        check("2011-07-18T16:31:00-05:00", Some("2011-07-18T21:31:00Z"));
        check("2011-07-18T16:31:00+05:30", Some("2011-07-18T11:01:00Z"));
        check("2011-07-18T16:31:00-00:00", Some("2011-07-18T16:31:00Z"));
        check("2011-07-18T16:31:00.5-03:30", Some("2011-07-18T20:01:00Z"));
        // Fractions of any length, truncated; no zone is UTC; lower case; a space for T.
        check("2011-07-18T16:31:00.1Z", Some("2011-07-18T16:31:00Z"));
        check(
            "2011-07-18T16:31:00.123456789012Z",
            Some("2011-07-18T16:31:00Z"),
        );
        check("2011-07-18T16:31:00", Some("2011-07-18T16:31:00Z"));
        check("2011-07-18T16:31:00.999", Some("2011-07-18T16:31:00Z"));
        check("2011-07-18t16:31:00z", Some("2011-07-18T16:31:00Z"));
        check("2011-07-18 16:31:00Z", Some("2011-07-18T16:31:00Z"));
        // A leap second, as before, is the 59th.
        check("2016-12-31T23:59:60+01:00", Some("2016-12-31T22:59:59Z"));
    }

    #[test]
    fn offsets_cross_days_months_and_years() {
        check("2024-03-01T01:00:00+02:00", Some("2024-02-29T23:00:00Z"));
        check("2023-03-01T01:00:00+02:00", Some("2023-02-28T23:00:00Z"));
        check("2024-01-01T00:30:00+01:00", Some("2023-12-31T23:30:00Z"));
        check("2023-12-31T23:30:00-01:00", Some("2024-01-01T00:30:00Z"));
        check("2024-04-30T22:00:00-05:00", Some("2024-05-01T03:00:00Z"));
        check("1970-01-01T00:00:00+00:01", Some("1969-12-31T23:59:00Z"));
    }

    #[test]
    fn rejects_what_is_no_time() {
        for bad in [
            "2011-07-18T16:31:00+25:00",
            "2011-07-18T16:31:00+24:00",
            "2011-07-18T16:31:00+02:60",
            "2011-07-18T16:31:00+2:00",
            "2011-07-18T16:31:00+02:0",
            "2011-07-18T16:31:00+020",
            "2011-07-18T16:31:00+02:00Z",
            "2011-07-18T16:31:00Z+02:00",
            "2011-07-18T16:31:00 +02:00",
            "2011-07-18T16:31:00+",
            "2011-07-18T16:31:00.",
            "2011-07-18T16:31:00.+02:00",
            "2011-07-18T16:31:00.12a",
            "2011-07-18T16:31:00ZZ",
            "2011-07-18T16:31:00GMT",
            "2011-07-18X16:31:00Z",
            "2011-07-18T16:31",
            "2011-07-18T24:00:00Z",
            "2011-07-18T16:31:00+ab:cd",
        ] {
            check(bad, None);
        }
    }

    /// A record's datestamp to the second stays one, whatever its zone; a day stays a day.
    #[test]
    fn a_time_with_an_offset_is_to_the_second() {
        for text in [
            "2024-05-01T10:00:00+02:00",
            "2024-05-01T10:00:00",
            "2024-05-01 10:00:00Z",
        ] {
            assert!(!Datestamp::parse(text).unwrap().is_day(), "{text}");
        }
        assert!(Datestamp::parse("2024-05-01").unwrap().is_day());
    }

    /// The parser before offsets were read: every text it accepted parses to the same value.
    fn parse_before(text: &str) -> Option<Datestamp> {
        let b = text.trim().as_bytes();
        if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
            return None;
        }
        let year = digits(&b[0..4])? as i64;
        let month = digits(&b[5..7])?;
        let day = digits(&b[8..10])?;
        if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
            return None;
        }
        let days = days_from_civil(year, month, day);
        if b.len() == 10 {
            return Some(Datestamp {
                secs: days * 86_400,
                day_only: true,
            });
        }
        if b.len() < 20 || b[10] != b'T' || b[13] != b':' || b[16] != b':' || b[b.len() - 1] != b'Z'
        {
            return None;
        }
        let (h, m, s) = (
            digits(&b[11..13])?,
            digits(&b[14..16])?,
            digits(&b[17..19])?,
        );
        if h > 23 || m > 59 || s > 60 {
            return None;
        }
        let rest = &b[19..b.len() - 1];
        let fraction_ok =
            rest.len() > 1 && rest[0] == b'.' && rest[1..].iter().all(u8::is_ascii_digit);
        if !rest.is_empty() && !fraction_ok {
            return None;
        }
        let secs = days * 86_400 + i64::from(h * 3600 + m * 60 + s.min(59));
        Some(Datestamp {
            secs,
            day_only: false,
        })
    }

    proptest::proptest! {
        #[test]
        fn what_parsed_before_parses_as_before(
            text in proptest::prop_oneof![
                "[ \t\n]?[0-9]{4}-[01][0-9]-[0-3][0-9]([Tt ][0-2][0-9]:[0-6][0-9]:[0-6][0-9](\\.[0-9]{0,12})?[Zz]?)?[ \n]?",
                "[0-9T:Zz. +-]{0,32}",
            ]
        ) {
            if let Some(before) = parse_before(&text) {
                proptest::prop_assert_eq!(Datestamp::parse(&text), Some(before), "{:?}", text);
            }
        }

        #[test]
        fn an_offset_moves_the_instant_by_itself(
            secs in 0i64..253_402_300_800,
            hours in 0u32..24,
            minutes in 0u32..60,
            east in proptest::bool::ANY,
            colon in proptest::bool::ANY,
        ) {
            let utc = Datestamp::from_unix(secs).to_string();
            let local = &utc[..19];
            let sign = if east { '+' } else { '-' };
            let text = if colon {
                format!("{local}{sign}{hours:02}:{minutes:02}")
            } else {
                format!("{local}{sign}{hours:02}{minutes:02}")
            };
            let offset = i64::from(hours * 3600 + minutes * 60) * if east { 1 } else { -1 };
            proptest::prop_assert_eq!(
                Datestamp::parse(&text).map(Datestamp::unix),
                Some(secs - offset)
            );
        }
    }

    /// Years beyond four digits (from arithmetic, never parsed) keep their digits and sign.
    #[test]
    fn years_outside_four_digits_are_written_whole() {
        let day = 86_400;
        let after = Datestamp::from_unix(253_402_300_800 + day + 3_661); // 10000-01-02T01:01:01Z
        assert_eq!(after.to_string(), "10000-01-02T01:01:01Z");
        let before = Datestamp::from_unix(-62_167_219_200 - day); // the day before 0000-01-01
        assert_eq!(before.to_string(), "-001-12-31T00:00:00Z");
        let last = Datestamp::from_unix(253_402_300_799); // 9999-12-31T23:59:59Z
        assert_eq!(last.to_string(), "9999-12-31T23:59:59Z");
    }

    #[test]
    fn orders_by_instant() {
        let day = Datestamp::parse("2020-01-02").unwrap();
        let later = Datestamp::parse("2020-01-02T00:00:01Z").unwrap();
        assert!(later > day);
        assert_eq!(day.unix(), 1_577_923_200);
    }

    #[test]
    fn converts_to_the_repository_granularity() {
        // OAI-17: a day repository gets days, a seconds repository gets seconds.
        let d = Datestamp::parse("2024-05-01T10:00:00Z").unwrap();
        assert_eq!(d.in_granularity(Granularity::Day, false), "2024-05-01");
        assert_eq!(
            d.in_granularity(Granularity::Seconds, false),
            "2024-05-01T10:00:00Z"
        );
        let day = Datestamp::parse("2024-05-01").unwrap();
        assert_eq!(
            day.in_granularity(Granularity::Seconds, false),
            "2024-05-01T00:00:00Z"
        );
        assert_eq!(
            day.in_granularity(Granularity::Seconds, true),
            "2024-05-01T23:59:59Z"
        );
    }

    #[test]
    fn granularity_spellings() {
        assert_eq!(
            Granularity::parse("YYYY-MM-DDThh:mm:ssZ"),
            Some(Granularity::Seconds)
        );
        assert_eq!(Granularity::parse("yyyy-mm-dd"), Some(Granularity::Day));
        assert_eq!(Granularity::parse("seconds"), None);
    }
}
