//! OCX sitemaps (the Open Curriculum "Locating Content" extension): a `urlset` declaring
//! `xmlns:ocx="http://sitemap.ocx.org/v/1.0"`, each `<url>` carrying an `<ocx:ocx>` block whose
//! `ocx:type` is required. Validates with `schemas/ocx-sitemap.xsd`.

use crate::sitemap::{push_escaped, write_url_open};
use oai_pmh::{DcElement, Fields};
use serde::{Deserialize, Serialize};
use url::Url;

use super::record::{Shared, SignStats, Writers};
use super::registry::{self, Indexes, ProfileSummary};
use super::report::{self, Piece, ProfileCounts, Report};
use super::{Audience, Column, ColumnKind, Feed, Profile, ProfileSettings, Spec, SummarySpec};

/// OCX, as the profiles' list knows it ([`super::Spec`]): `ocx.xml`, one entry per record's
/// landing page with an OCX type, to every crawler; written from `dc:type`, `dc:title` and
/// `dc:description`.
pub const SPEC: Spec = Spec {
    label: "ocx",
    prefix: "ocx",
    audience: Audience::AllCrawlers,
    feed: Feed::Records,
    fields: Fields::of(&[DcElement::Type, DcElement::Title, DcElement::Description]),
    summary: Some(SummarySpec {
        field: "ocx",
        list: false,
        load: registry::load::<OcxSummary>,
        from_render: Some(OcxSummary::of),
    }),
    column: Some(Column {
        name: "OCX",
        kind: ColumnKind::Urlset { open: URLSET_OPEN },
        write: write_column,
    }),
};

/// The OCX namespace.
pub const OCX_NS: &str = "http://sitemap.ocx.org/v/1.0";

/// The root's start tag, with the OCX namespace.
pub const URLSET_OPEN: &str = "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" \
                           xmlns:ocx=\"http://sitemap.ocx.org/v/1.0\">\n";

/// `[repository.ocx]`: the OCX sitemap of a repository, as `bridge.toml` sets it (the
/// configuration reads it; the collector and this renderer use it).
#[derive(Clone, Debug)]
pub struct OcxConfig {
    /// `dc:type` -> OER schema or schema.org type URL: the built-in schema.org table with the
    /// repository's `types` on top.
    pub types: crate::dctype::TypeMap,
    /// Type of records whose `dc:type` maps to nothing; without it they are not published.
    pub default_type: Option<String>,
    /// Longest `ocx:teaser`, in characters.
    pub teaser_chars: usize,
    /// `ocx:format`: JSON-LD, Microdata or RDFa.
    pub format: Option<String>,
    /// `ocx:xpath`: where in the landing page the metadata is.
    pub xpath: Option<String>,
}

impl Default for OcxConfig {
    fn default() -> Self {
        Self {
            types: crate::dctype::TypeMap::default(),
            default_type: None,
            teaser_chars: DEFAULT_TEASER_CHARS,
            format: None,
            xpath: None,
        }
    }
}

/// Default longest `ocx:teaser`.
pub const DEFAULT_TEASER_CHARS: usize = 200;

/// The metadata formats `ocx:format` accepts.
pub const FORMATS: [&str; 3] = ["JSON-LD", "Microdata", "RDFa"];

/// One resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry<'a> {
    /// The landing page.
    pub loc: &'a str,
    /// `ocx:type`: an OER schema or schema.org type URL.
    pub kind: &'a str,
    /// `ocx:format`, from the configuration (`JSON-LD` when `meta` is the bridge's document).
    pub format: Option<&'a str>,
    /// `ocx:loc`: where the metadata is, when not in the landing page (the CDIF document).
    pub meta: Option<&'a str>,
    /// `ocx:xpath`, from the configuration.
    pub xpath: Option<&'a str>,
    /// `ocx:name`, from `dc:title`.
    pub name: Option<Text<'a>>,
    /// `ocx:teaser`, from `dc:description`, already trimmed.
    pub teaser: Option<Text<'a>>,
    /// `ocx:image`, an image content file.
    pub image: Option<&'a str>,
}

/// The text of `ocx:name` or `ocx:teaser`, as [`teaser_in`] cut it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Text<'a> {
    /// The text.
    pub text: &'a str,
    /// It holds none of the characters [`push_escaped`] escapes, as found while cutting it: it
    /// is written as it is (most titles and descriptions; testing them again took 2% of
    /// writing a Signmap and OCX entry). Set by [`teaser_in`] alone: outside the crate a text
    /// is made with `From<&str>`, which leaves it to be escaped.
    pub plain: bool,
}

impl<'a> From<&'a str> for Text<'a> {
    /// A text not known to be free of characters to escape.
    fn from(text: &'a str) -> Self {
        Self { text, plain: false }
    }
}

/// Appends one entry, `<url>` to `</url>` and a line feed, with `lastmod` (the record's
/// datestamp, written out). The profiles' collector writes entries as records arrive
/// ([`super::signposts`]); the shards are cut from them later.
pub fn write_entry(bytes: &mut Vec<u8>, e: &Entry<'_>, lastmod: Option<&str>) {
    write_url_open(bytes, e.loc, lastmod);
    bytes.extend_from_slice(b"<ocx:ocx>");
    let mut element = |tag: &str, value: Option<Text<'_>>| {
        if let Some(v) = value {
            bytes.extend_from_slice(b"<ocx:");
            bytes.extend_from_slice(tag.as_bytes());
            bytes.push(b'>');
            if v.plain {
                bytes.extend_from_slice(v.text.as_bytes());
            } else {
                push_escaped(bytes, v.text);
            }
            bytes.extend_from_slice(b"</ocx:");
            bytes.extend_from_slice(tag.as_bytes());
            bytes.push(b'>');
        }
    };
    element("type", Some(e.kind.into()));
    element("format", e.format.map(Text::from));
    element("loc", e.meta.map(Text::from));
    element("xpath", e.xpath.map(Text::from));
    element("name", e.name);
    element("teaser", e.teaser);
    element("image", e.image.map(Text::from));
    bytes.extend_from_slice(b"</ocx:ocx></url>\n");
}

/// Writes a record's OCX `<url>` into `bytes`, from what its entries share, when OCX is on
/// and the record has an OCX type: OCX's [`super::Column`] writer.
pub(crate) fn write_column(
    bytes: &mut Vec<u8>,
    shared: &Shared<'_>,
    settings: &ProfileSettings,
    writers: &mut Writers,
) -> bool {
    let (Some(config), Some(kind)) = (settings.ocx.as_ref(), shared.ocx_kind) else {
        return false;
    };
    let Writers { name, teaser, .. } = writers;
    write_record(bytes, shared, name, teaser, config, kind);
    true
}

/// Writes a record's OCX `<url>` of type `ocx_type` into `bytes`, from what its entries share:
/// its name and teaser (written out in `name_buf` and `teaser_buf` when they must be changed),
/// its image, and where its metadata is.
#[inline]
fn write_record(
    bytes: &mut Vec<u8>,
    shared: &Shared<'_>,
    name_buf: &mut String,
    teaser_buf: &mut String,
    config: &OcxConfig,
    ocx_type: &str,
) {
    let record = shared.record;
    let name = record
        .dc_values(DcElement::Title)
        .next()
        .map(|t| teaser_in(t, usize::MAX, name_buf));
    let teaser = record
        .dc_values(DcElement::Description)
        .next()
        .map(|d| teaser_in(d, config.teaser_chars, teaser_buf));
    // With CDIF, `ocx:loc` is the record's document, in JSON-LD (no `ocx:xpath`, which is
    // for HTML); else what the configuration says.
    let (format, meta, xpath) = match shared.document {
        Some(url) => (Some("JSON-LD"), Some(url), None),
        None => (config.format.as_deref(), None, config.xpath.as_deref()),
    };
    bytes.clear();
    write_entry(
        bytes,
        &Entry {
            loc: shared.landing,
            kind: ocx_type,
            format,
            meta,
            xpath,
            name,
            teaser,
            image: shared.found.image(),
        },
        shared.lastmod,
    );
}

/// [`teaser_in`] as a string of its own.
#[cfg(test)]
pub fn teaser(text: &str, max: usize) -> String {
    teaser_in(text, max, &mut String::new()).text.to_owned()
}

/// `text` cut to at most `max` characters at a word boundary, with an ellipsis when cut;
/// whitespace runs become one space: borrowed from `text` when it needs neither, else written
/// into `buf` (the profiles' collector cuts a title and a description for every record, and a
/// new `String` for each showed in its time).
pub fn teaser_in<'a>(text: &'a str, max: usize, buf: &'a mut String) -> Text<'a> {
    buf.clear();
    match single_spaced(text, max) {
        Some((whole, false, plain)) => return Text { text: whole, plain },
        Some((head, true, plain)) => {
            buf.push_str(head);
            buf.push('…');
            return Text { text: buf, plain };
        }
        None => *buf = cut(text, max),
    }
    Text::from(buf.as_str())
}

/// [`teaser_in`] of the commonest text: ASCII words with single spaces between them, up to the
/// cut. Its characters are its bytes and its words need no splitting: the cut is the last space
/// before `max` (one character is left for the ellipsis). Reads no further than the cut; `None`
/// when the text is not like that (the general path then splits it into words). Titles and
/// descriptions are mostly like that, and splitting every one into words was a tenth of an
/// export with OCX. The teaser is the text returned, followed by an ellipsis when the first
/// `bool` is `true`; the second tells that it holds no character to escape.
fn single_spaced(text: &str, max: usize) -> Option<(&str, bool, bool)> {
    let bytes = text.as_bytes();
    // One byte past the cut tells whether the word at the cut goes on.
    let head = &bytes[..bytes.len().min(max.saturating_add(1))];
    let read = read(head);
    if max == 0 || head.first() == Some(&b' ') || read & ODD != 0 {
        return None;
    }
    // The teaser is a part of `head` (and an ellipsis).
    let plain = read & SPECIAL == 0;
    if bytes.len() <= max {
        // All of it fits: borrowed, unless it ends in a space to trim.
        return (bytes.last() != Some(&b' ')).then_some((text, false, plain));
    }
    if head[max] == b' ' && text[max + 1..].trim_start().is_empty() {
        // Nothing but whitespace after the cut: all of it fits, trimmed.
        return Some((&text[..max], false, plain));
    }
    let end = match head[..max].iter().rposition(|&b| b == b' ') {
        Some(space) => space,
        // The first word alone is too long: its first `max - 1` characters.
        None => max - 1,
    };
    Some((&text[..end], true, plain))
}

/// What [`read`] finds: a byte [`single_spaced`] does not take (the bits of a non-ASCII byte
/// and of one below the space, which two spaces in a row set too)...
const ODD: u8 = 0x81;
/// ... and one of the characters [`push_escaped`] escapes but for the carriage return (which is
/// [`ODD`]): `< > & ' "`.
const SPECIAL: u8 = 0x02;

/// Whether `head` holds a byte [`single_spaced`] does not take ([`ODD`]): a non-ASCII byte, one
/// below the space (the other ASCII whitespace characters, tab to carriage return, and control
/// characters, which XML text does not carry anyway), or two spaces in a row; and whether it
/// holds a character to escape ([`SPECIAL`]), which spares testing the teaser again to write
/// it. One branch-free `u8` fold over the pairs of bytes, which the compiler vectorises (a
/// `bool` one, or two passes, took longer), kept out of line so that it stays vectorised.
#[inline(never)]
fn read(head: &[u8]) -> u8 {
    let alone = |b: u8| {
        (b & 0x80)
            | u8::from(b < b' ')
            // `<` 0x3C and `>` 0x3E differ in one bit, as `&` 0x26 and `'` 0x27 do.
            | (u8::from((b | 0x02) == b'>') | u8::from((b | 0x01) == b'\'') | u8::from(b == b'"')) << 1
    };
    let (Some(&last), Some(rest)) = (head.last(), head.get(1..)) else {
        return 0;
    };
    let pairs = head.iter().zip(rest).fold(0u8, |acc, (&a, &b)| {
        acc | alone(a) | (u8::from(a == b' ') & u8::from(b == b' '))
    });
    pairs | alone(last)
}

/// [`teaser_in`] of any text: its words, one space between them, up to the cut.
fn cut(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max.saturating_mul(4)));
    let mut count = 0usize;
    // `out.len()` at the last word end that leaves room for the ellipsis.
    let mut fits: Option<usize> = None;
    for word in text.split_whitespace() {
        let chars = if word.is_ascii() {
            word.len()
        } else {
            word.chars().count()
        };
        let sep = usize::from(!out.is_empty());
        if count + sep + chars > max {
            match fits {
                Some(end) => out.truncate(end),
                // Even the first word is too long: its first `max - 1` characters.
                None => {
                    let first = if out.is_empty() { word } else { out.as_str() };
                    let end = first
                        .char_indices()
                        .nth(max.saturating_sub(1))
                        .map_or(first.len(), |(i, _)| i);
                    out = first[..end].to_owned();
                }
            }
            out.push('…');
            return out;
        }
        if sep == 1 {
            out.push(' ');
        }
        out.push_str(word);
        count += sep + chars;
        if count < max {
            fits = Some(out.len());
        }
    }
    out
}

/// What a generation's OCX sitemap holds.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct OcxSummary {
    /// Absolute URL of the OCX index.
    pub index_url: String,
    /// Entries published.
    pub published: u64,
    /// Records with a landing page whose type maps to no OCX type.
    pub no_type: u64,
    /// Live records without a landing page inside the scope.
    pub no_landing_page: u64,
}

impl OcxSummary {
    /// What the OCX sitemap published, as the collector counted it, when the render wrote its
    /// index.
    fn of(indexes: &Indexes, stats: &SignStats) -> Option<ProfileSummary> {
        let index_url = indexes.get(Profile::Ocx)?;
        Some(ProfileSummary::new(OcxSummary {
            index_url: index_url.to_string(),
            published: stats.ocx_published,
            no_type: stats.ocx_no_type,
            no_landing_page: stats.no_landing_page,
        }))
    }

    /// What it left out, by reason.
    fn drops(&self) -> [(&'static str, u64); 2] {
        [
            ("ocx_no_type", self.no_type),
            ("no_landing_page", self.no_landing_page),
        ]
    }
}

impl Report for OcxSummary {
    fn profile(&self) -> Profile {
        Profile::Ocx
    }

    fn counts(&self) -> Vec<ProfileCounts> {
        vec![ProfileCounts::new(
            Profile::Ocx,
            self.published,
            &self.drops(),
        )]
    }

    fn export_lines(&self) -> Vec<(String, String)> {
        report::one_index_lines("OCX", &self.index_url, self.published, &self.drops())
    }

    fn status_line(&self, _: &Url) -> Vec<Piece> {
        report::one_index_status("OCX", &self.index_url, self.published, &self.drops())
    }

    fn indexes(&self, _: &Url) -> Vec<String> {
        vec![self.index_url.clone()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_carries_its_ocx_block() {
        let mut bytes = Vec::new();
        write_entry(
            &mut bytes,
            &Entry {
                loc: "https://h/r/1",
                kind: "http://oerschema.org/Lesson",
                format: Some("JSON-LD"),
                meta: None,
                xpath: Some("//script[@type=\"application/ld+json\"]"),
                name: Some("Tides & waves".into()),
                teaser: None,
                image: Some("https://h/r/1/cover.png"),
            },
            Some("2024-05-01"),
        );
        let entry = String::from_utf8(bytes).unwrap();
        let text = format!("{}{URLSET_OPEN}{entry}</urlset>", crate::sitemap::XML_DECL);
        assert!(text.contains("xmlns:ocx=\"http://sitemap.ocx.org/v/1.0\""));
        assert!(text.contains(
            "<url><loc>https://h/r/1</loc><lastmod>2024-05-01</lastmod><ocx:ocx>\
             <ocx:type>http://oerschema.org/Lesson</ocx:type><ocx:format>JSON-LD</ocx:format>\
             <ocx:xpath>//script[@type=&quot;application/ld+json&quot;]</ocx:xpath>\
             <ocx:name>Tides &amp; waves</ocx:name><ocx:image>https://h/r/1/cover.png</ocx:image>\
             </ocx:ocx></url>\n"
        ));
        roxmltree::Document::parse(&text).unwrap();
    }

    /// The plain reading of the rule, as the one-pass version must behave.
    fn teaser_reference(text: &str, max: usize) -> String {
        let words: Vec<&str> = text.split_whitespace().collect();
        let whole = words.join(" ");
        if whole.chars().count() <= max {
            return whole;
        }
        let mut out = String::new();
        for word in words {
            let needed = out.chars().count() + usize::from(!out.is_empty()) + word.chars().count();
            if needed + 1 > max {
                break;
            }
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(word);
        }
        if out.is_empty() {
            out = whole.chars().take(max.saturating_sub(1)).collect();
        }
        out.push('…');
        out
    }

    /// [`teaser_in`], with a buffer holding something already, cuts as the reference does.
    fn check_teaser(text: &str, max: usize) -> Result<(), proptest::test_runner::TestCaseError> {
        let mut buf = "left over".to_owned();
        proptest::prop_assert_eq!(
            teaser_in(text, max, &mut buf).text,
            teaser_reference(text, max)
        );
        Ok(())
    }

    proptest::proptest! {
        #[test]
        fn teaser_matches_the_reference(text in "[a-zé \t\n\u{a0}]{0,60}", max in 0usize..40) {
            check_teaser(&text, max)?;
        }

        /// Every ASCII whitespace character `split_whitespace` knows (vertical tab and form feed
        /// too) separates words, and sends the text off the single-spaced path.
        #[test]
        fn an_ascii_teaser_matches_the_reference(
            text in "[a-z \t\n\r\u{b}\u{c}]{0,60}",
            max in 0usize..40,
        ) {
            check_teaser(&text, max)?;
        }

        /// Single-spaced ASCII text takes the path that finds the cut without splitting.
        #[test]
        fn a_single_spaced_teaser_matches_the_reference(
            text in "[a-z]{1,9}( [a-z]{1,9}){0,12} ?[ \t\n\u{a0}é]{0,5}[a-z]{0,3}",
            max in 0usize..60,
        ) {
            check_teaser(&text, max)?;
        }

        /// SM-03: a teaser said to need no escaping holds no character to escape; one of
        /// single-spaced ASCII words without them is said so.
        #[test]
        fn a_plain_teaser_needs_no_escaping(
            text in "[a-z<>&'\"\r=?%;]{1,9}( [a-z<>&'\"=?%;]{1,9}){0,12}",
            max in 1usize..60,
        ) {
            let mut buf = String::new();
            let teaser = teaser_in(&text, max, &mut buf);
            let escaped = crate::sitemap::escape(teaser.text);
            if teaser.plain {
                proptest::prop_assert_eq!(&escaped, teaser.text);
            }
            let specials = |t: &str| t.contains(['<', '>', '&', '\'', '"', '\r']);
            if !specials(&text) {
                proptest::prop_assert!(teaser.plain);
            }
            let mut bytes = Vec::new();
            let entry = Entry { name: Some(teaser), ..an_entry() };
            write_entry(&mut bytes, &entry, None);
            let want = format!("<ocx:name>{escaped}</ocx:name>");
            proptest::prop_assert!(String::from_utf8(bytes).unwrap().contains(&want));
        }
    }

    fn an_entry() -> Entry<'static> {
        Entry {
            loc: "https://h/r/1",
            kind: "https://schema.org/Thesis",
            format: None,
            meta: None,
            xpath: None,
            name: None,
            teaser: None,
            image: None,
        }
    }

    #[test]
    fn teasers_end_at_a_word() {
        assert_eq!(teaser("  short   text ", 200), "short text");
        assert_eq!(teaser("one two three four", 12), "one two…");
        assert!(teaser("one two three four", 12).chars().count() <= 12);
        assert_eq!(teaser("Donaudampfschifffahrt", 8), "Donauda…");
        assert_eq!(teaser("één twee drie", 9), "één twee…");
    }
}
