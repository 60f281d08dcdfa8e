//! OAI-PMH datestamps and granularity: parsing the two UTC forms, ordering, W3C-datetime output.
//!
//! Written by hand rather than with a date crate: the harvest parses one datestamp per record
//! (millions per run), the grammar is two fixed-width forms, and the output must be exactly the
//! intersection of W3C-DTF and `xsd:date`/`xsd:dateTime` that sitemap consumers accept (SM-13).

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
    /// Parses `YYYY-MM-DD` or `YYYY-MM-DDThh:mm:ss[.fff]Z` (surrounding whitespace allowed;
    /// fractional seconds are truncated, OAI-19). Offsets other than `Z` are rejected.
    pub fn parse(text: &str) -> Option<Self> {
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
            return Some(Self {
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
        Some(Self {
            secs,
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
    /// `xsd:date`/`xsd:dateTime` (SM-13). Formats digits directly: sitemaps write one per URL.
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

    #[track_caller]
    fn check(input: &str, expected: Option<&str>) {
        assert_eq!(
            Datestamp::parse(input).map(|d| d.to_string()).as_deref(),
            expected,
            "{input:?}"
        );
    }

    #[test]
    fn parses_both_granularities_and_rejects_the_rest() {
        // OAI-19: both forms, fractional seconds truncated, offsets rejected.
        check("2008-04-16", Some("2008-04-16"));
        check(" 2011-07-18T16:31:00Z\n", Some("2011-07-18T16:31:00Z"));
        check("2011-07-18T16:31:00.123Z", Some("2011-07-18T16:31:00Z"));
        check("2011-07-18T16:31:00+02:00", None);
        check("2011-07-18T16:31Z", None);
        check("2011-02-29", None);
        check("2012-02-29", Some("2012-02-29"));
        check("aaaa-bb-cc", None);
        check("1969-12-31T23:59:59Z", Some("1969-12-31T23:59:59Z"));
        check("2011-07-18T16:31:00.Z", None);
        check("", None);
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
