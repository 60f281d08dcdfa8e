//! One OAI-PMH response body -> data: the `ListRecords` records and token, `Identify`, or the OAI
//! errors it carries. Pure: no IO, no tokio. Namespace-aware (OAI-44), never DTD-loading (OAI-09).
//!
//! `ListRecords` pages are read with quick-xml as a stream of events, keeping only what
//! the caller asked for per record; most pages are first taken by the hand-written scanner in
//! [`super::scan`], which gives the same result faster and declines anything unusual.
//! `Identify` is small and read with roxmltree.

use std::borrow::Cow;
use std::sync::Arc;

use quick_xml::Reader;
use quick_xml::events::{BytesRef, BytesStart, Event};

use crate::HarvestErrorKind;
use crate::datestamp::{Datestamp, Granularity};

/// The OAI-PMH namespace; the `https` spelling is accepted on input (OAI-43).
#[cfg(test)]
pub(crate) const OAI_NS: &str = "http://www.openarchives.org/OAI/2.0/";
/// The oai_dc namespace.
#[cfg(test)]
pub(crate) const OAI_DC_NS: &str = "http://www.openarchives.org/OAI/2.0/oai_dc/";
/// The Dublin Core elements namespace.
#[cfg(test)]
pub(crate) const DC_NS: &str = "http://purl.org/dc/elements/1.1/";
/// The OAI Static Repository namespace.
#[cfg(test)]
pub(crate) const STATIC_NS: &str = "http://www.openarchives.org/OAI/2.0/static-repository";

/// Deepest element nesting accepted; real oai_dc pages are 6 deep.
pub(super) const MAX_DEPTH: usize = 256;

/// One harvested record: its header, its `dc:identifier`s and the other oai_dc values asked for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// The header identifier (the record's key, not a URL to resolve; OAI-37).
    pub identifier: String,
    /// The header datestamp; `None` when missing or unparsable (the record is kept).
    pub datestamp: Option<Datestamp>,
    /// `status="deleted"` on the header.
    pub deleted: bool,
    /// The header's `setSpec`s.
    pub sets: Vec<String>,
    /// Every `dc:identifier` of the oai_dc metadata, trimmed.
    pub dc_identifiers: Vec<String>,
    /// The other oai_dc elements, trimmed, in document order; read only when the harvest asks
    /// for them ([`Fields`]), empty otherwise.
    pub dc: DcValues,
    /// Its `<metadata>` held no element at all (`<metadata/>`, Q-35), which is not the same as
    /// oai_dc without a `dc:identifier`: see [`Record::unreadable`].
    pub empty_metadata: bool,
}

/// A record's other Dublin Core values, in document order, with their elements. The records of
/// a list page share one text buffer for all their values (the page's `Values`), each record
/// holding where its own are: a buffer per record, grown and freed record by record, showed in
/// the time of callers that read many elements (and a `String` per value before that, more so).
#[derive(Clone, Default)]
pub struct DcValues {
    /// The values of this record and, from a list page, of the page's other records; `None`
    /// when there are none (or while the page is read).
    store: Option<Arc<Values>>,
    /// Where this record's values are in `store.spans`.
    spans: std::ops::Range<u32>,
}

/// Dublin Core values of one record or of a page of records: one text buffer, and each value's
/// element and place in it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Values {
    text: String,
    /// Each value's element, and where it is in `text` (start, length).
    spans: Vec<(DcElement, u32, u32)>,
}

impl Values {
    /// Appends a value of `element`; `false` (with a warning) when it would take the text past
    /// 4 GiB, and it is left out (no page that large is read unless `max_body_bytes` is raised
    /// past it).
    pub(crate) fn push(&mut self, element: DcElement, value: &str) -> bool {
        let Ok(end) = u32::try_from(self.text.len() + value.len()) else {
            tracing::warn!(
                ?element,
                bytes = value.len(),
                "a Dublin Core value left out: the values would exceed 4 GiB"
            );
            return false;
        };
        // Both fit, as their sum does.
        let len = value.len() as u32;
        self.text.push_str(value);
        self.spans.push((element, end - len, len));
        true
    }

    /// Room for the values of a page of `bytes`, read for `fields`: their text is never longer
    /// than the page, so its buffer never grows (growing it a few times a page freed large
    /// blocks, on each of which glibc sorts every small free block it holds: reading a page
    /// with many elements took 3% longer so, in the root package's `parse_500` bench); the spans get
    /// a guess, and grow on pages of many short values. Only the pages touched are memory in
    /// use, and the buffer goes with the page's records.
    pub(crate) fn for_page(bytes: usize, fields: Fields) -> Self {
        if !fields.any() {
            return Self::default();
        }
        Self {
            text: String::with_capacity(bytes),
            spans: Vec::with_capacity(bytes / 64),
        }
    }

    /// The values pushed so far.
    pub(crate) fn len(&self) -> u32 {
        self.spans.len() as u32
    }

    /// Gives each record of a page, which holds the range of these values that is its own
    /// ([`DcValues::pending`]), these values.
    pub(crate) fn share(self, records: &mut [Record]) {
        let store = Arc::new(self);
        for record in records.iter_mut().filter(|r| !r.dc.spans.is_empty()) {
            record.dc.store = Some(Arc::clone(&store));
        }
    }
}

impl DcValues {
    /// A record's values `spans` of a page's values that are still being read: the page gives
    /// them with [`Values::share`].
    pub(crate) fn pending(spans: std::ops::Range<u32>) -> Self {
        Self { store: None, spans }
    }

    /// Appends a value of `element`, left out (with a warning) when it would take the values
    /// past 4 GiB. A record of a list page first takes a copy of its own values.
    pub fn push(&mut self, element: DcElement, value: &str) {
        if self.own().push(element, value) {
            self.spans.end += 1;
        }
    }

    /// This record's values alone, to push onto.
    fn own(&mut self) -> &mut Values {
        let alone = (self.store.as_mut())
            .and_then(Arc::get_mut)
            .is_some_and(|v| v.len() == self.spans.end);
        if !alone {
            let mut own = Values::default();
            for (element, value) in self.iter() {
                own.push(element, value);
            }
            self.spans = 0..own.len();
            self.store = Some(Arc::new(own));
        }
        let store = self.store.as_mut().expect("made above");
        Arc::get_mut(store).expect("this record's alone")
    }

    /// The values with their elements, in document order.
    pub fn iter(&self) -> impl Iterator<Item = (DcElement, &str)> {
        let (text, spans) = self.parts();
        spans
            .iter()
            .map(move |&(e, start, len)| (e, &text[start as usize..][..len as usize]))
    }

    /// The values of `element`, in document order. The others' text is not touched: slicing
    /// it (checking the ends for character boundaries) read bytes of a page's values that had
    /// left the cache, for every lookup of an element (a caller that looks up several elements of
    /// every record took 4% longer so, in the root package's `signmap_ocx_entries_500` bench).
    pub fn of(&self, element: DcElement) -> impl Iterator<Item = &str> {
        let (text, spans) = self.parts();
        spans
            .iter()
            .filter(move |&&(e, _, _)| e == element)
            .map(move |&(_, start, len)| &text[start as usize..][..len as usize])
    }

    /// The text the values are in, and this record's spans of it.
    fn parts(&self) -> (&str, &[(DcElement, u32, u32)]) {
        match &self.store {
            Some(v) => (
                v.text.as_str(),
                &v.spans[self.spans.start as usize..self.spans.end as usize],
            ),
            None => ("", &[][..]),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Removes every value.
    pub fn clear(&mut self) {
        *self = Self::default();
    }
}

/// The values, not where they are kept.
impl PartialEq for DcValues {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for DcValues {}

/// The values, not the page's others.
impl std::fmt::Debug for DcValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Values pushed in order, as [`DcValues::push`] does.
impl<S: AsRef<str>> FromIterator<(DcElement, S)> for DcValues {
    fn from_iter<I: IntoIterator<Item = (DcElement, S)>>(values: I) -> Self {
        let mut dc = Self::default();
        for (element, value) in values {
            dc.push(element, value.as_ref());
        }
        dc
    }
}

/// What to read of each record besides its header and `dc:identifier`s: the other Dublin Core
/// elements ([`Record::dc`]) that the caller uses, as a set. Empty for a caller that needs only
/// the identifiers, which then pays nothing for the others; each element read costs unescaping
/// and copying its values, so a caller asks only for what it uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fields {
    elements: u16,
}

impl Fields {
    /// Every element.
    pub(crate) const ALL: Fields = Fields { elements: u16::MAX };

    /// These elements.
    pub const fn of(elements: &[DcElement]) -> Fields {
        let mut bits = 0u16;
        let mut i = 0;
        while i < elements.len() {
            bits |= 1 << elements[i] as u16;
            i += 1;
        }
        Fields { elements: bits }
    }

    /// Both sets.
    pub const fn with(self, other: Fields) -> Fields {
        Fields {
            elements: self.elements | other.elements,
        }
    }

    /// Is this element read.
    pub(crate) fn wants(self, element: DcElement) -> bool {
        self.elements & (1 << element as u16) != 0
    }

    /// Is any element read.
    pub(crate) fn any(self) -> bool {
        self.elements != 0
    }

    /// The set as bits (element `e` is bit `e as u16`), for storing it.
    pub fn bits(self) -> u16 {
        self.elements
    }

    /// The inverse of [`Fields::bits`].
    pub fn from_bits(elements: u16) -> Fields {
        Fields { elements }
    }

    /// Every element of `other` is in this set.
    pub fn covers(self, other: Fields) -> bool {
        other.elements & !self.elements == 0
    }
}

/// The Dublin Core elements of oai_dc other than `identifier`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum DcElement {
    Title,
    Creator,
    Subject,
    Description,
    Publisher,
    Contributor,
    Date,
    Type,
    Format,
    Source,
    Language,
    Relation,
    Coverage,
    Rights,
}

impl DcElement {
    /// Every element, in declaration order (`ALL[e as usize] == e`).
    pub const ALL: [DcElement; 14] = [
        Self::Title,
        Self::Creator,
        Self::Subject,
        Self::Description,
        Self::Publisher,
        Self::Contributor,
        Self::Date,
        Self::Type,
        Self::Format,
        Self::Source,
        Self::Language,
        Self::Relation,
        Self::Coverage,
        Self::Rights,
    ];

    /// The element with this local name in the DC namespace.
    pub(crate) fn from_local(local: &str) -> Option<Self> {
        Some(match local {
            "title" => Self::Title,
            "creator" => Self::Creator,
            "subject" => Self::Subject,
            "description" => Self::Description,
            "publisher" => Self::Publisher,
            "contributor" => Self::Contributor,
            "date" => Self::Date,
            "type" => Self::Type,
            "format" => Self::Format,
            "source" => Self::Source,
            "language" => Self::Language,
            "relation" => Self::Relation,
            "coverage" => Self::Coverage,
            "rights" => Self::Rights,
            _ => return None,
        })
    }
}

impl Record {
    /// The values of one extended element, in document order.
    pub fn dc_values(&self, element: DcElement) -> impl Iterator<Item = &str> {
        self.dc.of(element)
    }

    /// A live record whose metadata is empty (Q-35): it cannot be read, so it is rejected
    /// (`empty_metadata`), and it is no deletion either (I-06).
    pub fn unreadable(&self) -> bool {
        self.empty_metadata && !self.deleted
    }
}

/// A resumption token as the server sent it. Only the value matters; the rest are hints (OAI-22).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Token {
    /// The token text with surrounding XML whitespace trimmed; empty ends the list (OAI-21).
    pub value: String,
    /// `completeListSize`, if present and a number.
    pub complete_list_size: Option<u64>,
    /// `cursor`, if present and a number.
    pub cursor: Option<u64>,
}

/// An OAI-PMH `<error>` that a repository answered. Data, not a Rust error: a response may hold
/// several, and what one means is the caller's to decide (`noRecordsMatch` ends a list, and
/// is no failure; `badResumptionToken` starts it again), so it is what a page or answer holds
/// ([`ListPage::errors`], [`SmallAnswer::Errors`]); a harvest that stops on one says so as
/// [`HarvestErrorKind::Oai`](crate::HarvestErrorKind::Oai).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OaiError {
    /// The `code` attribute: `badArgument`, `noRecordsMatch`, ...
    pub code: String,
    /// The server's message, trimmed.
    pub message: String,
}

/// Deviations from the spec that were tolerated while reading a body (I-05), counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Quirks {
    /// Characters illegal in XML 1.0 that were removed before parsing (OAI-46).
    pub illegal_chars_removed: u64,
    /// Elements in an `https://` spelling of the OAI, oai_dc or DC namespace (OAI-43).
    pub https_namespaces: u64,
    /// The document carried no OAI namespace at all (Q-19).
    pub no_namespace: bool,
    /// Whitespace before the XML declaration (OAI-48).
    pub leading_whitespace: bool,
    /// Bytes that were not UTF-8, read as Windows-1252 (OAI-47).
    pub windows_1252_bytes: u64,
    /// Datestamps more than a day ahead of the clock, forgotten: the record is kept without one
    /// (Q-36).
    pub future_datestamps: u64,
}

impl Quirks {
    /// Adds another body's counts to these.
    pub(crate) fn add(&mut self, other: &Quirks) {
        self.illegal_chars_removed += other.illegal_chars_removed;
        self.https_namespaces += other.https_namespaces;
        self.no_namespace |= other.no_namespace;
        self.leading_whitespace |= other.leading_whitespace;
        self.windows_1252_bytes += other.windows_1252_bytes;
        self.future_datestamps += other.future_datestamps;
    }
}

/// What a `ListRecords` response (or a Static Repository file) holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListPage {
    /// The `responseDate` text, trimmed.
    pub response_date: Option<String>,
    /// The records, in document order.
    pub records: Vec<Record>,
    /// The resumption token element, if any.
    pub token: Option<Token>,
    /// OAI errors; when present the other fields are empty.
    pub errors: Vec<OaiError>,
    /// Tolerated deviations.
    pub quirks: Quirks,
    /// True when the body was an OAI Static Repository, not an OAI-PMH response.
    pub is_static: bool,
    /// Whether it holds the `ListRecords` element (OAI-08): a page with neither it nor errors is
    /// no answer, not an empty last page.
    pub listed: bool,
}

impl ListPage {
    /// How far ahead of the clock a datestamp may be: a server's clock a little fast, or local
    /// time written as UTC, is not yet a wrong datestamp.
    pub(crate) const FUTURE_TOLERANCE_SECS: i64 = 24 * 60 * 60;

    /// Forgets each record's datestamp later than `now` by more than
    /// [`ListPage::FUTURE_TOLERANCE_SECS`] (Q-36; a bulk update, a wrong clock): it says nothing
    /// of when the record changed. The record is kept without a datestamp, so the date is neither
    /// taken for when it changed nor where a resumed harvest starts. Counted in the quirks, for
    /// the warning.
    pub(crate) fn forget_future_datestamps(&mut self, now: i64) {
        let latest = now.saturating_add(Self::FUTURE_TOLERANCE_SECS);
        for record in &mut self.records {
            if record.datestamp.is_some_and(|d| d.unix() > latest) {
                record.datestamp = None;
                self.quirks.future_datestamps += 1;
            }
        }
    }
}

/// What `Identify` says (OAI-12).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Identify {
    /// `repositoryName`.
    pub repository_name: String,
    /// `baseURL` as the repository states it.
    pub base_url: String,
    /// `protocolVersion`; this crate speaks 2.0 only.
    pub protocol_version: String,
    /// `granularity`, or day granularity when missing or unknown (OAI-13).
    pub granularity: Granularity,
    /// The `granularity` text when it was not one of the two forms.
    pub granularity_unknown: Option<String>,
    /// `deletedRecord`: `no`, `persistent` or `transient`.
    pub deleted_record: String,
    /// `earliestDatestamp`, if parsable (OAI-14).
    pub earliest_datestamp: Option<Datestamp>,
    /// `compression` values.
    pub compression: Vec<String>,
    /// The `oai-identifier` description's `sampleIdentifier`, if any: its shape tells a
    /// platform (DSpace's is a Handle, `oai:host:123456789/1`).
    pub sample_identifier: Option<String>,
    /// The text of the `<description>`s (toolkit titles, EPrints' comment, ...), joined by
    /// newlines and cut at 8 KiB: a platform may name itself there.
    pub descriptions: String,
}

/// Which namespace an element name resolved to, folding the accepted aliases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ns {
    Oai,
    OaiDc,
    Dc,
    Static,
    None,
    Other,
}

/// Classifies a namespace URI, folding the accepted `https://` aliases (OAI-43); the flag says
/// whether the alias was used.
pub(super) fn classify_uri(uri: &str) -> (Ns, bool) {
    let (https, rest) = if let Some(rest) = uri.strip_prefix("https://") {
        (true, rest)
    } else if let Some(rest) = uri.strip_prefix("http://") {
        (false, rest)
    } else {
        return (if uri.is_empty() { Ns::None } else { Ns::Other }, false);
    };
    match rest {
        "www.openarchives.org/OAI/2.0/" => (Ns::Oai, https),
        "www.openarchives.org/OAI/2.0/oai_dc/" => (Ns::OaiDc, https),
        "purl.org/dc/elements/1.1/" => (Ns::Dc, https),
        "www.openarchives.org/OAI/2.0/static-repository" if !https => (Ns::Static, false),
        _ => (Ns::Other, false),
    }
}

/// Namespace bindings in scope, classified once when declared.
///
/// Tracked here rather than with quick-xml's `NsReader`: declarations are rare (on the root, the
/// `oai_dc:dc` element, sometimes a record), yet `NsReader` inspects and resolves every element,
/// which cost about a fifth of the page parse, the hot path of a harvest.
#[derive(Debug, Default)]
struct Scopes {
    /// (depth of the declaring element, prefix key, prefix, namespace, declared with `https://`).
    bindings: Vec<(usize, u64, String, Ns, bool)>,
}

/// A cheap key of a prefix (length and first bytes), so lookups rarely compare whole strings:
/// resolution runs for every element of every page.
fn prefix_key(prefix: &str) -> u64 {
    let b = prefix.as_bytes();
    let mut key = [0u8; 8];
    let n = b.len().min(7);
    key[..n].copy_from_slice(&b[..n]);
    key[7] = b.len().min(255) as u8;
    u64::from_le_bytes(key)
}

impl Scopes {
    /// Records the `xmlns` declarations of an element at `depth`.
    fn declare(&mut self, e: &BytesStart<'_>, depth: usize) -> Result<(), quick_xml::Error> {
        let raw = e.attributes_raw();
        if raw.is_empty() || memchr::memmem::find(raw.as_bytes(), b"xmlns").is_none() {
            return Ok(());
        }
        for attr in e.attributes() {
            let attr = attr?;
            let key: &str = attr.key.as_ref();
            let prefix = match key.strip_prefix("xmlns") {
                Some("") => "",
                Some(rest) => match rest.strip_prefix(':') {
                    Some(prefix) => prefix,
                    None => continue,
                },
                None => continue,
            };
            let uri = attr.normalized_value(quick_xml::XmlVersion::Implicit1_0)?;
            let (ns, https) = classify_uri(uri.trim());
            self.bindings
                .push((depth, prefix_key(prefix), prefix.to_owned(), ns, https));
        }
        Ok(())
    }

    /// Forgets the declarations of elements at `depth` or deeper.
    fn close(&mut self, depth: usize) {
        while self.bindings.last().is_some_and(|b| b.0 >= depth) {
            self.bindings.pop();
        }
    }

    /// The namespace and local name of a qualified name; an undeclared prefix is `Other`.
    fn resolve<'n>(&self, qname: &'n str, quirks: &mut Quirks) -> (Ns, &'n str) {
        let (prefix, local) = qname.split_once(':').unwrap_or(("", qname));
        let key = prefix_key(prefix);
        let found = self
            .bindings
            .iter()
            .rev()
            .find(|b| b.1 == key && (prefix.len() < 8 || b.2 == prefix));
        match found {
            Some(&(_, _, _, ns, https)) => {
                if https {
                    quirks.https_namespaces += 1;
                }
                (ns, local)
            }
            None if prefix.is_empty() => (Ns::None, local),
            None => (Ns::Other, local),
        }
    }
}

/// Removes a BOM and leading whitespace, removes characters illegal in XML 1.0 (never TAB, LF or
/// CR; OAI-46) and checks UTF-8: a byte that is not part of a UTF-8 sequence is read as
/// Windows-1252 and counted (OAI-47). Returns the text to parse.
pub(crate) fn prepare<'a>(
    body: &'a [u8],
    quirks: &mut Quirks,
) -> Result<Cow<'a, str>, HarvestErrorKind> {
    let mut body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
    let start = body
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(body.len());
    if start > 0 {
        quirks.leading_whitespace = true;
        body = &body[start..];
    }
    let cleaned = remove_illegal_chars(body, quirks);
    match cleaned {
        // simdutf8 validates several times faster than std on this hot path; on failure std
        // finds the offset for the message.
        // simdutf8 validates several times faster than std on this hot path.
        Cow::Borrowed(b) => match simdutf8::basic::from_utf8(b) {
            Ok(text) => Ok(Cow::Borrowed(text)),
            Err(_) => Ok(Cow::Owned(windows_1252_fallback(b, quirks))),
        },
        Cow::Owned(b) => match String::from_utf8(b) {
            Ok(text) => Ok(Cow::Owned(text)),
            Err(e) => Ok(Cow::Owned(windows_1252_fallback(e.as_bytes(), quirks))),
        },
    }
}

/// What Windows-1252 reads bytes 0x80 to 0x9F as; its other bytes are Latin-1's, the code point
/// of the same value. The five it leaves undefined are the C1 controls of the same value, as
/// WHATWG's decoder reads them. Written out: one table, where a crate (encoding_rs) would bring
/// every other encoding.
const WINDOWS_1252_HIGH: [char; 32] = [
    '\u{20AC}', '\u{81}', '\u{201A}', '\u{192}', '\u{201E}', '\u{2026}', '\u{2020}', '\u{2021}',
    '\u{2C6}', '\u{2030}', '\u{160}', '\u{2039}', '\u{152}', '\u{8D}', '\u{17D}', '\u{8F}',
    '\u{90}', '\u{2018}', '\u{2019}', '\u{201C}', '\u{201D}', '\u{2022}', '\u{2013}', '\u{2014}',
    '\u{2DC}', '\u{2122}', '\u{161}', '\u{203A}', '\u{153}', '\u{9D}', '\u{17E}', '\u{178}',
];

/// `body`, which is not UTF-8, as text (OAI-47): every UTF-8 sequence in it is kept and every
/// other byte read as Windows-1252. Servers that declare UTF-8 and send ISO-8859-1 or
/// Windows-1252 (Q-11) are read whole this way, and a UTF-8 page with a few such bytes (records
/// from another system) keeps its UTF-8. Counted in `quirks`, for the warning.
fn windows_1252_fallback(body: &[u8], quirks: &mut Quirks) -> String {
    let mut text = String::with_capacity(body.len() + body.len() / 8);
    for chunk in body.utf8_chunks() {
        text.push_str(chunk.valid());
        for &b in chunk.invalid() {
            text.push(match b {
                0x80..=0x9F => WINDOWS_1252_HIGH[usize::from(b - 0x80)],
                _ => char::from(b),
            });
            quirks.windows_1252_bytes += 1;
        }
    }
    text
}

/// Whether a numeric character reference names a character XML 1.0 allows.
pub(super) fn legal_xml_char(c: u32) -> bool {
    matches!(c, 0x9 | 0xA | 0xD | 0x20..=0xD7FF | 0xE000..=0xFFFD | 0x10000..=0x10FFFF)
}

/// Length of an illegal construct starting at `body[i]`, or 0: a raw C0 control, raw U+FFFE/U+FFFF,
/// or a numeric character reference to an illegal code point (`&#x1A;`, `&#55349;`).
fn illegal_at(body: &[u8], i: usize) -> usize {
    match body[i] {
        b if b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r') => 1,
        0xEF if body.get(i + 1) == Some(&0xBF) && matches!(body.get(i + 2), Some(0xBE | 0xBF)) => 3,
        b'&' if body.get(i + 1) == Some(&b'#') => {
            let rest = &body[i + 2..body.len().min(i + 14)];
            let Some(end) = rest.iter().position(|&b| b == b';') else {
                return 0;
            };
            let digits = &rest[..end];
            let value = match digits.split_first() {
                Some((b'x', hex)) => std::str::from_utf8(hex)
                    .ok()
                    .and_then(|h| u32::from_str_radix(h, 16).ok()),
                _ => std::str::from_utf8(digits)
                    .ok()
                    .and_then(|d| d.parse::<u32>().ok()),
            };
            match value {
                Some(v) if !legal_xml_char(v) => end + 3,
                _ => 0,
            }
        }
        _ => 0,
    }
}

/// Whether `body` may hold anything [`illegal_at`] removes. Written branch-free so it vectorises:
/// it runs over every byte of every page, and almost always finds nothing.
fn may_hold_illegal(body: &[u8]) -> bool {
    let control = body.iter().fold(false, |acc, &b| {
        acc | ((b < 0x20) & (b != b'\t') & (b != b'\n') & (b != b'\r'))
    });
    control
        || memchr::memmem::find(body, b"&#").is_some()
        || memchr::memchr_iter(0xEF, body).any(|i| illegal_at(body, i) > 0)
}

fn remove_illegal_chars<'a>(body: &'a [u8], quirks: &mut Quirks) -> Cow<'a, [u8]> {
    if !may_hold_illegal(body) {
        return Cow::Borrowed(body);
    }
    let suspicious =
        |b: &u8| (*b < 0x20 && !matches!(*b, b'\t' | b'\n' | b'\r')) || *b == 0xEF || *b == b'&';
    let mut i = match body.iter().position(suspicious) {
        Some(i) => i,
        None => return Cow::Borrowed(body),
    };
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0;
    while i < body.len() {
        let len = illegal_at(body, i);
        if len > 0 {
            let out = out.get_or_insert_with(|| Vec::with_capacity(body.len()));
            out.extend_from_slice(&body[copied..i]);
            copied = i + len;
            quirks.illegal_chars_removed += 1;
            i += len;
        } else {
            i += 1;
        }
        match body[i.min(body.len())..].iter().position(suspicious) {
            Some(next) => i += next,
            None => break,
        }
    }
    match out {
        Some(mut out) => {
            out.extend_from_slice(&body[copied..]);
            Cow::Owned(out)
        }
        None => Cow::Borrowed(body),
    }
}

/// Describes a body that is not OAI-PMH, for the error message.
fn describe_non_oai(text: &str, root: Option<&str>) -> String {
    let lower = text
        .get(..text.len().min(4096))
        .unwrap_or(text)
        .to_ascii_lowercase();
    if lower.contains("<html") || lower.starts_with("<!doctype html") {
        let title = lower
            .find("<title>")
            .and_then(|s| {
                text.get(s + 7..)
                    .and_then(|t| t.find("</").map(|e| t[..e].trim().to_owned()))
            })
            .filter(|t| !t.is_empty());
        return match title {
            Some(t) => format!("an HTML page titled {t:?}"),
            None => "an HTML page".to_owned(),
        };
    }
    match root {
        Some(root) => format!("an XML document with root element <{root}>"),
        None => {
            let snippet: String = text.chars().take(80).collect();
            format!("a body starting {snippet:?}")
        }
    }
}

/// Which text is being collected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Capture {
    ResponseDate,
    Error,
    Identifier,
    Datestamp,
    SetSpec,
    DcIdentifier,
    Dc(DcElement),
    Token,
}

/// The page, when it answers `ListRecords` (OAI-08): an OAI-PMH answer holds either errors or
/// the element named after its verb, in the OAI-PMH namespace. One with neither (an envelope
/// with `responseDate` and `request` alone, a `ListRecords` in another namespace) is an error,
/// not an empty last page, which would end the list early and pass for the whole repository.
pub(super) fn answered(page: ListPage) -> Result<ListPage, HarvestErrorKind> {
    if page.listed || !page.errors.is_empty() {
        return Ok(page);
    }
    Err(HarvestErrorKind::Invalid(
        "the answer holds neither a ListRecords element in the OAI-PMH namespace nor an error \
         (OAI-08)"
            .to_owned(),
    ))
}

/// The reference reader alone (quick-xml), never the fast path: for differential tests and
/// fuzzing.
#[doc(hidden)]
pub(crate) fn parse_list_records_reference(
    body: &[u8],
    fields: Fields,
) -> Result<ListPage, HarvestErrorKind> {
    prepared(body, |text, quirks| {
        parse_with_quick_xml(text, quirks, body.len(), fields)
    })?
    .and_then(answered)
}

/// `read` applied to the body after [`prepare`], with the quirks it tolerated.
pub(super) fn prepared<T>(
    body: &[u8],
    read: impl FnOnce(&str, Quirks) -> T,
) -> Result<T, HarvestErrorKind> {
    let mut quirks = Quirks::default();
    let text = prepare(body, &mut quirks)?;
    Ok(read(&text, quirks))
}

/// [`parse_list_records`] with quick-xml, after [`prepare`]: the reference reader, and the
/// fallback for every page [`scan::scan_list_records`] declines. `body_len` is the length of the
/// body as received, for [`HarvestErrorKind::Truncated`].
pub(super) fn parse_with_quick_xml(
    text: &str,
    quirks: Quirks,
    body_len: usize,
    fields: Fields,
) -> Result<ListPage, HarvestErrorKind> {
    let mut reader = Reader::from_str(text);
    let mut state = QuickXml {
        text,
        body_len,
        scopes: Scopes::default(),
        depth: 0,
        root_seen: false,
        contexts: Contexts::new(quirks, text.len(), fields),
    };
    loop {
        let event = match reader.read_event() {
            Ok(event) => event,
            Err(e) => return Err(state.unreadable(e, reader.error_position())),
        };
        let at = reader.buffer_position();
        match event {
            Event::Start(e) => state.start(&e, at)?,
            Event::Empty(e) => {
                state.start(&e, at)?;
                state.end();
            }
            Event::End(_) => state.end(),
            Event::Text(t) => state.contexts.text(&t),
            Event::CData(t) => state.contexts.text(&t),
            Event::GeneralRef(r) => state.reference(&r, at)?,
            Event::Eof => return state.eof(),
            _ => {}
        }
    }
}

/// The quick-xml reader's state between events, as `Scanner` is the scanner's: the depth and
/// the namespaces in scope, and the contexts of the page it is in.
struct QuickXml<'t> {
    /// The prepared text, to describe it when it is not OAI-PMH.
    text: &'t str,
    /// The length of the body as received, for [`HarvestErrorKind::Truncated`].
    body_len: usize,
    scopes: Scopes,
    /// Depth of the element being read (the root's is 1).
    depth: usize,
    root_seen: bool,
    /// What the elements read so far mean, and the page read from them.
    contexts: Contexts,
}

impl QuickXml<'_> {
    /// The start of an element whose tag ends at `at`: the root, or what the contexts make of
    /// an element below it.
    fn start(&mut self, e: &BytesStart<'_>, at: u64) -> Result<(), HarvestErrorKind> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(HarvestErrorKind::TooDeep { offset: at });
        }
        if let Err(err) = self.scopes.declare(e, self.depth) {
            return Err(self.truncated_or(err, at));
        }
        let qname = e.name();
        let (ns, local) = self.scopes.resolve(qname.as_ref(), self.contexts.quirks());
        if self.root_seen {
            self.contexts
                .start(ns, local, self.depth, |name| attr(e, name).map(Cow::Owned));
        } else {
            self.root_seen = true;
            if !self.contexts.root(ns, local) {
                let root = e.name().as_ref().to_owned();
                return Err(HarvestErrorKind::NotOai {
                    what: describe_non_oai(self.text, Some(&root)),
                });
            }
        }
        Ok(())
    }

    /// The end of the element being read (or of an empty one, right after its start).
    fn end(&mut self) {
        self.contexts.close(self.depth);
        self.scopes.close(self.depth);
        self.depth = self.depth.saturating_sub(1);
    }

    /// An entity or character reference ending at `at`: its character is kept where text is
    /// collected, and one that names no character fails the page, wherever it stands.
    fn reference(&mut self, r: &BytesRef<'_>, at: u64) -> Result<(), HarvestErrorKind> {
        let resolved = match r.resolve_char_ref() {
            Ok(Some(c)) => Some(c),
            Ok(None) => match &**r {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "apos" => Some('\''),
                "quot" => Some('"'),
                _ => None,
            },
            Err(_) => None,
        };
        match resolved {
            Some(c) => {
                self.contexts.char(c);
                Ok(())
            }
            None => Err(HarvestErrorKind::Xml {
                offset: at,
                message: format!("undefined entity &{};", &**r),
            }),
        }
    }

    /// The end of the body: the page, unless it held no element or ended inside one.
    fn eof(self) -> Result<ListPage, HarvestErrorKind> {
        if !self.root_seen {
            return Err(HarvestErrorKind::NotOai {
                what: describe_non_oai(self.text, None),
            });
        }
        if self.depth > 0 {
            return Err(HarvestErrorKind::Truncated { len: self.body_len });
        }
        Ok(self.contexts.finish())
    }

    /// The error for a body quick-xml cannot read at `offset`: not OAI-PMH before the root,
    /// else truncated or malformed.
    fn unreadable(&self, e: quick_xml::Error, offset: u64) -> HarvestErrorKind {
        if self.root_seen {
            self.truncated_or(e, offset)
        } else {
            HarvestErrorKind::NotOai {
                what: describe_non_oai(self.text, None),
            }
        }
    }

    /// [`HarvestErrorKind::Truncated`] for the errors of a body that ends too early, else
    /// [`HarvestErrorKind::Xml`] at `offset`.
    fn truncated_or(&self, e: quick_xml::Error, offset: u64) -> HarvestErrorKind {
        use quick_xml::errors::{IllFormedError, SyntaxError};
        match e {
            quick_xml::Error::Syntax(
                SyntaxError::UnclosedTag
                | SyntaxError::UnclosedComment
                | SyntaxError::UnclosedCData
                | SyntaxError::UnclosedPI
                | SyntaxError::UnclosedXmlDecl
                | SyntaxError::UnclosedDoctype
                | SyntaxError::UnclosedDoubleQuotedAttributeValue
                | SyntaxError::UnclosedSingleQuotedAttributeValue
                | SyntaxError::InvalidBangMarkup,
            ) => HarvestErrorKind::Truncated { len: self.body_len },
            quick_xml::Error::IllFormed(IllFormedError::MissingEndTag(_)) => {
                HarvestErrorKind::Truncated { len: self.body_len }
            }
            other => HarvestErrorKind::Xml {
                offset,
                message: other.to_string(),
            },
        }
    }
}

/// What an element of a `ListRecords` page means where it stands, and what is kept of it: the
/// rules that both readers, the quick-xml reader here and the hand-written scanner
/// ([`super::scan`]), follow element by element. Written once, so that the two differ only in
/// how they read XML, which is what their differential tests compare.
///
/// The contexts are kept as the depths at which they opened (0 = not inside), with the text
/// being collected and the page read so far.
pub(super) struct Contexts {
    fields: Fields,
    page: ListPage,
    list: usize,
    record_at: usize,
    header: usize,
    metadata: usize,
    dc: usize,
    /// What the text being collected is, and the depth of its element.
    capture: Option<(Capture, usize)>,
    buf: String,
    record: Record,
    /// The Dublin Core values of the page's records, shared by them when it is read.
    values: Values,
    /// Where the values of the record being read start in `values`.
    dc_start: u32,
    error_code: String,
    token: Token,
}

impl Contexts {
    /// Before the root of a page of `len` bytes, with the `quirks` counted in preparing it.
    pub(super) fn new(quirks: Quirks, len: usize, fields: Fields) -> Self {
        Self {
            fields,
            page: ListPage {
                quirks,
                ..ListPage::default()
            },
            list: 0,
            record_at: 0,
            header: 0,
            metadata: 0,
            dc: 0,
            capture: None,
            buf: String::new(),
            record: Record::default(),
            values: Values::for_page(len, fields),
            dc_start: 0,
            error_code: String::new(),
            token: Token::default(),
        }
    }

    /// What the page tolerated so far, for a reader to count its own.
    #[inline]
    pub(super) fn quirks(&mut self) -> &mut Quirks {
        &mut self.page.quirks
    }

    /// The root: `OAI-PMH` (in its namespace or none) or a Static Repository's `Repository`;
    /// `false` for anything else, which is not OAI-PMH.
    #[inline]
    pub(super) fn root(&mut self, ns: Ns, local: &str) -> bool {
        match (ns, local) {
            (Ns::Oai, "OAI-PMH") => {}
            (Ns::None, "OAI-PMH") => self.page.quirks.no_namespace = true,
            (Ns::Static, "Repository") => self.page.is_static = true,
            _ => return false,
        }
        true
    }

    /// Keeps `text` if it is part of a value being collected.
    #[inline]
    pub(super) fn text(&mut self, text: &str) {
        if self.capture.is_some() {
            self.buf.push_str(text);
        }
    }

    /// Keeps the character of a reference if it is part of a value being collected.
    #[inline]
    pub(super) fn char(&mut self, c: char) {
        if self.capture.is_some() {
            self.buf.push(c);
        }
    }

    /// The start of an element below the root at `depth`: what it is depends on the innermost
    /// context open. `attr` gives the normalised value of one of its unprefixed attributes.
    #[inline]
    pub(super) fn start<'a>(
        &mut self,
        ns: Ns,
        local: &str,
        depth: usize,
        attr: impl Fn(&str) -> Option<Cow<'a, str>>,
    ) {
        let oai = ns == Ns::Oai || (self.page.quirks.no_namespace && ns == Ns::None);
        let capture = if self.capture.is_some() {
            // Markup inside a captured value: keep collecting its text.
            None
        } else if self.dc > 0 {
            self.dc_child(ns, local)
        } else if self.metadata > 0 {
            self.metadata_child(ns, local, depth);
            None
        } else if self.header > 0 {
            Self::header_child(oai, local)
        } else if self.record_at > 0 {
            self.record_child(oai, local, depth, attr);
            None
        } else if self.list > 0 {
            self.list_child(oai, local, depth, attr)
        } else if depth == 2 {
            let container = oai || (self.page.is_static && ns == Ns::Static);
            self.root_child(container, local, depth, attr)
        } else {
            None
        };
        if let Some(capture) = capture {
            self.buf.clear();
            self.capture = Some((capture, depth));
        }
    }

    /// An element inside `oai_dc:dc`: the Dublin Core value to capture, if it is one read.
    #[inline]
    fn dc_child(&self, ns: Ns, local: &str) -> Option<Capture> {
        if ns != Ns::Dc {
            None
        } else if local == "identifier" {
            Some(Capture::DcIdentifier)
        } else if self.fields.any() {
            DcElement::from_local(local)
                .filter(|e| self.fields.wants(*e))
                .map(Capture::Dc)
        } else {
            None
        }
    }

    /// An element inside `metadata`: the metadata is not empty, and `oai_dc:dc` right inside
    /// it opens the Dublin Core.
    #[inline]
    fn metadata_child(&mut self, ns: Ns, local: &str, depth: usize) {
        self.record.empty_metadata = false;
        if ns == Ns::OaiDc && local == "dc" && depth == self.metadata + 1 {
            self.dc = depth;
        }
    }

    /// An element inside a record's `header`: its identifier, datestamp or a set to capture.
    #[inline]
    fn header_child(oai: bool, local: &str) -> Option<Capture> {
        match (oai, local) {
            (true, "identifier") => Some(Capture::Identifier),
            (true, "datestamp") => Some(Capture::Datestamp),
            (true, "setSpec") => Some(Capture::SetSpec),
            _ => None,
        }
    }

    /// An element inside a `record`: its `header` (with its deleted status) or its `metadata`
    /// opens.
    #[inline]
    fn record_child<'a>(
        &mut self,
        oai: bool,
        local: &str,
        depth: usize,
        attr: impl Fn(&str) -> Option<Cow<'a, str>>,
    ) {
        match (oai, local) {
            (true, "header") => {
                self.header = depth;
                self.record.deleted = attr("status").as_deref() == Some("deleted");
            }
            (true, "metadata") => {
                self.metadata = depth;
                self.record.empty_metadata = true;
            }
            _ => {}
        }
    }

    /// An element inside `ListRecords`: a `record` opens, or the resumption token (with its
    /// attributes) is captured.
    #[inline]
    fn list_child<'a>(
        &mut self,
        oai: bool,
        local: &str,
        depth: usize,
        attr: impl Fn(&str) -> Option<Cow<'a, str>>,
    ) -> Option<Capture> {
        match (oai, local) {
            (true, "record") => {
                self.record_at = depth;
                self.record = Record::default();
                None
            }
            (true, "resumptionToken") => {
                self.token = Token {
                    value: String::new(),
                    complete_list_size: attr("completeListSize")
                        .and_then(|v| v.trim().parse().ok()),
                    cursor: attr("cursor").and_then(|v| v.trim().parse().ok()),
                };
                Some(Capture::Token)
            }
            _ => None,
        }
    }

    /// A child of the root (`container`: in the root's namespace): `ListRecords` opens, or the
    /// response date or an error (with its code) is captured.
    #[inline]
    fn root_child<'a>(
        &mut self,
        container: bool,
        local: &str,
        depth: usize,
        attr: impl Fn(&str) -> Option<Cow<'a, str>>,
    ) -> Option<Capture> {
        match (container, local) {
            (true, "ListRecords") => {
                self.list = depth;
                self.page.listed = true;
                None
            }
            (true, "responseDate") => Some(Capture::ResponseDate),
            (true, "error") => {
                self.error_code = attr("code").map(Cow::into_owned).unwrap_or_default();
                Some(Capture::Error)
            }
            _ => None,
        }
    }

    /// The end of the element at `depth`: stores the text captured in it, or closes the
    /// context it opened.
    #[inline]
    pub(super) fn close(&mut self, depth: usize) {
        if let Some((what, at)) = self.capture {
            if at != depth {
                return;
            }
            self.capture = None;
            self.store(what);
            return;
        }
        if self.dc == depth {
            self.dc = 0;
        } else if self.metadata == depth {
            self.metadata = 0;
        } else if self.header == depth {
            self.header = 0;
        } else if self.record_at == depth {
            self.record_at = 0;
            let mut record = std::mem::take(&mut self.record);
            let start = std::mem::replace(&mut self.dc_start, self.values.len());
            record.dc = DcValues::pending(start..self.values.len());
            self.page.records.push(record);
        } else if self.list == depth {
            self.list = 0;
        }
    }

    /// Stores the value collected, trimmed of XML whitespace, as `what`.
    #[inline]
    fn store(&mut self, what: Capture) {
        let value = trim_xml_ws(&self.buf);
        let page = &mut self.page;
        let record = &mut self.record;
        match what {
            Capture::ResponseDate => page.response_date = Some(value.to_owned()),
            Capture::Error => page.errors.push(OaiError {
                code: std::mem::take(&mut self.error_code),
                message: value.to_owned(),
            }),
            Capture::Identifier => record.identifier = value.to_owned(),
            Capture::Datestamp => record.datestamp = Datestamp::parse(value),
            Capture::SetSpec => record.sets.push(value.to_owned()),
            Capture::DcIdentifier => {
                if !value.is_empty() {
                    record.dc_identifiers.push(value.to_owned());
                }
            }
            Capture::Dc(element) => {
                if !value.is_empty() {
                    self.values.push(element, value);
                }
            }
            Capture::Token => {
                self.token.value = value.to_owned();
                page.token = Some(std::mem::take(&mut self.token));
            }
        }
    }

    /// The page read to its end, its records given their Dublin Core values.
    pub(super) fn finish(self) -> ListPage {
        let mut page = self.page;
        self.values.share(&mut page.records);
        finish(page)
    }
}

/// `s` without XML whitespace (space, TAB, LF, CR) at either end.
fn trim_xml_ws(s: &str) -> &str {
    let is_ws = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r');
    let bytes = s.as_bytes();
    let start = bytes.iter().position(|b| !is_ws(b)).unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !is_ws(b))
        .map_or(start, |i| i + 1);
    // Both ends are next to ASCII bytes or the ends of `s`: character boundaries.
    &s[start..end.max(start)]
}

/// Completes a page read to its end: a response with errors holds nothing else.
pub(super) fn finish(mut page: ListPage) -> ListPage {
    if !page.errors.is_empty() {
        page.records.clear();
        page.token = None;
    }
    page
}

/// The unescaped value of an unprefixed attribute.
fn attr(e: &BytesStart<'_>, name: &str) -> Option<String> {
    e.attributes()
        .flatten()
        .find(|a| a.key.as_ref() == name)
        .and_then(|a| {
            a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
                .ok()
                .map(Cow::into_owned)
        })
}

/// The answer to `ListMetadataFormats` or `ListSets` (a diagnosis of a repository reads them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SmallAnswer<T> {
    /// What was asked for.
    Answer(T),
    /// OAI-PMH errors instead.
    Errors(Vec<OaiError>),
}

/// `ListMetadataFormats`: the `metadataPrefix` values offered.
///
/// # Errors
///
/// When the body is not an OAI-PMH response or not well-formed ([`HarvestErrorKind::NotOai`],
/// [`HarvestErrorKind::Xml`], ...); OAI-PMH errors are an answer ([`SmallAnswer::Errors`]).
pub fn parse_metadata_formats(body: &[u8]) -> Result<SmallAnswer<Vec<String>>, HarvestErrorKind> {
    parse_small(body, "ListMetadataFormats", |list| {
        list.descendants()
            .filter(|n| n.is_element() && n.tag_name().name() == "metadataPrefix")
            .map(|n| n.text().unwrap_or_default().trim().to_owned())
            .collect()
    })
}

/// One page of `ListSets`: `(setSpec, setName)` pairs, and whether a resumption token follows.
pub type SetsPage = (Vec<(String, String)>, bool);

/// One page of `ListSets`.
///
/// # Errors
///
/// As [`parse_metadata_formats`].
pub fn parse_sets(body: &[u8]) -> Result<SmallAnswer<SetsPage>, HarvestErrorKind> {
    parse_small(body, "ListSets", |list| {
        let text_of = |set: roxmltree::Node<'_, '_>, name: &str| {
            set.children()
                .find(|n| n.is_element() && n.tag_name().name() == name)
                .and_then(|n| n.text())
                .unwrap_or_default()
                .trim()
                .to_owned()
        };
        let sets = list
            .children()
            .filter(|n| n.is_element() && n.tag_name().name() == "set")
            .map(|set| (text_of(set, "setSpec"), text_of(set, "setName")))
            .collect();
        let more = list.children().any(|n| {
            n.is_element()
                && n.tag_name().name() == "resumptionToken"
                && n.text().is_some_and(|t| !t.trim().is_empty())
        });
        (sets, more)
    })
}

fn parse_small<T>(
    body: &[u8],
    verb: &str,
    read: impl FnOnce(roxmltree::Node<'_, '_>) -> T,
) -> Result<SmallAnswer<T>, HarvestErrorKind> {
    let mut quirks = Quirks::default();
    let text = prepare(body, &mut quirks)?;
    let doc = small_document(&text, body.len())?;
    let root = doc.root_element();
    if root.tag_name().name() != "OAI-PMH" {
        return Err(HarvestErrorKind::NotOai {
            what: describe_non_oai(&text, Some(root.tag_name().name())),
        });
    }
    let errors: Vec<OaiError> = root
        .children()
        .filter(|n| n.is_element() && n.tag_name().name() == "error")
        .map(|n| OaiError {
            code: n.attribute("code").unwrap_or_default().to_owned(),
            message: n.text().unwrap_or_default().trim().to_owned(),
        })
        .collect();
    if !errors.is_empty() {
        return Ok(SmallAnswer::Errors(errors));
    }
    let list = root
        .children()
        .find(|n| n.is_element() && n.tag_name().name() == verb)
        .ok_or_else(|| {
            HarvestErrorKind::Invalid(format!("the response has no <{verb}> element"))
        })?;
    Ok(SmallAnswer::Answer(read(list)))
}

/// A small response (Identify, ListSets, ...) as a tree (roxmltree never loads external entities).
fn small_document(
    text: &str,
    body_len: usize,
) -> Result<roxmltree::Document<'_>, HarvestErrorKind> {
    roxmltree::Document::parse(text).map_err(|e| {
        let looks_xml =
            text.starts_with("<?xml") || text.starts_with("<OAI-PMH") || text.contains("OAI/2.0/");
        if looks_xml && !text.to_ascii_lowercase().contains("<html") {
            match e {
                roxmltree::Error::UnexpectedEndOfStream => {
                    HarvestErrorKind::Truncated { len: body_len }
                }
                other => HarvestErrorKind::Xml {
                    offset: 0,
                    message: other.to_string(),
                },
            }
        } else {
            HarvestErrorKind::NotOai {
                what: describe_non_oai(text, None),
            }
        }
    })
}

/// Parses an `Identify` response, or the `Identify` part of a Static Repository file. Errors
/// responses come back as `Err(errors)` in the `Ok` value's place via [`IdentifyOutcome`].
///
/// # Errors
///
/// As [`parse_metadata_formats`].
pub fn parse_identify(body: &[u8]) -> Result<IdentifyOutcome, HarvestErrorKind> {
    let mut quirks = Quirks::default();
    let text = prepare(body, &mut quirks)?;
    let doc = small_document(&text, body.len())?;
    let root = doc.root_element();
    let fold = |ns: Option<&str>| -> Ns {
        match ns.map(|n| {
            n.strip_prefix("https://")
                .or_else(|| n.strip_prefix("http://"))
                .unwrap_or(n)
        }) {
            Some("www.openarchives.org/OAI/2.0/") => Ns::Oai,
            Some("www.openarchives.org/OAI/2.0/static-repository") => Ns::Static,
            None => Ns::None,
            _ => Ns::Other,
        }
    };
    let root_ns = fold(root.tag_name().namespace());
    let is_static = match (root_ns, root.tag_name().name()) {
        (Ns::Oai | Ns::None, "OAI-PMH") => false,
        (Ns::Static, "Repository") => true,
        (_, name) => {
            return Err(HarvestErrorKind::NotOai {
                what: describe_non_oai(&text, Some(name)),
            });
        }
    };
    let errors: Vec<OaiError> = root
        .children()
        .filter(|n| n.is_element() && n.tag_name().name() == "error")
        .map(|n| OaiError {
            code: n.attribute("code").unwrap_or_default().to_owned(),
            message: n.text().unwrap_or_default().trim().to_owned(),
        })
        .collect();
    if !errors.is_empty() {
        return Ok(IdentifyOutcome::Errors(errors));
    }
    let identify = root
        .children()
        .find(|n| n.is_element() && n.tag_name().name() == "Identify")
        .ok_or_else(|| {
            HarvestErrorKind::Invalid("the response has no <Identify> element".to_owned())
        })?;
    let field = |name: &str| -> Option<String> {
        identify
            .children()
            .find(|n| n.is_element() && n.tag_name().name() == name)
            .map(|n| n.text().unwrap_or_default().trim().to_owned())
    };
    let granularity_text = field("granularity").unwrap_or_default();
    let granularity = Granularity::parse(&granularity_text);
    let result = Identify {
        repository_name: field("repositoryName").unwrap_or_default(),
        base_url: field("baseURL").unwrap_or_default(),
        protocol_version: field("protocolVersion").unwrap_or_default(),
        granularity: granularity.unwrap_or_default(),
        granularity_unknown: granularity.is_none().then_some(granularity_text),
        deleted_record: field("deletedRecord").unwrap_or_default(),
        earliest_datestamp: field("earliestDatestamp")
            .as_deref()
            .and_then(Datestamp::parse),
        compression: identify
            .children()
            .filter(|n| n.is_element() && n.tag_name().name() == "compression")
            .filter_map(|n| n.text().map(|t| t.trim().to_owned()))
            .collect(),
        sample_identifier: identify
            .descendants()
            .find(|n| n.is_element() && n.tag_name().name() == "sampleIdentifier")
            .and_then(|n| n.text())
            .map(|t| t.trim().to_owned()),
        descriptions: description_text(identify),
    };
    Ok(if is_static {
        IdentifyOutcome::Static(result)
    } else {
        IdentifyOutcome::Identify(result)
    })
}

/// The text of `identify`'s `<description>`s, each text node trimmed, joined by newlines and
/// cut at 8 KiB (at a character boundary).
fn description_text(identify: roxmltree::Node<'_, '_>) -> String {
    const MAX: usize = 8 * 1024;
    let mut text = String::new();
    for description in identify
        .children()
        .filter(|n| n.is_element() && n.tag_name().name() == "description")
    {
        for t in description.descendants().filter_map(|n| n.text()) {
            let t = t.trim();
            if t.is_empty() {
                continue;
            }
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(t);
        }
    }
    if text.len() > MAX {
        let mut end = MAX;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// What an `Identify` request answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IdentifyOutcome {
    /// An OAI-PMH repository.
    Identify(Identify),
    /// The URL serves an OAI Static Repository file: this is its `Identify` part, and the same
    /// body holds all its records.
    Static(Identify),
    /// OAI errors.
    Errors(Vec<OaiError>),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::{parse_list_records, parse_list_records_fast, parse_list_records_with};

    /// The records of a page share one buffer, each seeing its own values; one pushed onto
    /// takes a copy of its own first, the others unchanged.
    #[test]
    fn a_pages_records_share_their_values() {
        let mut values = Values::default();
        let mut records = vec![Record::default(), Record::default(), Record::default()];
        for (record, texts) in records.iter_mut().zip([&["a", "b"][..], &[], &["c"]]) {
            let start = values.len();
            for text in texts {
                assert!(values.push(DcElement::Title, text));
            }
            record.dc = DcValues::pending(start..values.len());
        }
        values.share(&mut records);
        fn titles(r: &Record) -> Vec<&str> {
            r.dc_values(DcElement::Title).collect()
        }
        assert_eq!(
            records.iter().map(titles).collect::<Vec<_>>(),
            [vec!["a", "b"], vec![], vec!["c"]]
        );
        assert!(records[1].dc.store.is_none(), "no values, no share");
        let owned: DcValues = [(DcElement::Title, "c")].into_iter().collect();
        assert_eq!(records[2].dc, owned);
        records[0].dc.push(DcElement::Rights, "r");
        assert_eq!(
            records[0].dc.iter().collect::<Vec<_>>(),
            [
                (DcElement::Title, "a"),
                (DcElement::Title, "b"),
                (DcElement::Rights, "r")
            ]
        );
        assert_eq!(titles(&records[2]), ["c"]);
        assert_eq!(format!("{:?}", records[2].dc), r#"[(Title, "c")]"#);
    }

    #[test]
    fn dc_values_keep_document_order_per_element() {
        let mut record = Record {
            dc: [
                (DcElement::Title, "One"),
                (DcElement::Type, "Text"),
                (DcElement::Title, ""),
                (DcElement::Title, "Thrée"),
            ]
            .into_iter()
            .collect(),
            ..Record::default()
        };
        let titles: Vec<_> = record.dc_values(DcElement::Title).collect();
        assert_eq!(titles, ["One", "", "Thrée"]);
        assert_eq!(
            record.dc_values(DcElement::Type).collect::<Vec<_>>(),
            ["Text"]
        );
        assert_eq!(record.dc_values(DcElement::Rights).count(), 0);
        assert_eq!(record.dc.iter().count(), 4);
        record.dc.clear();
        assert!(record.dc.is_empty());
        record.dc.push(DcElement::Rights, "r");
        assert_eq!(
            record.dc.iter().collect::<Vec<_>>(),
            [(DcElement::Rights, "r")]
        );
    }

    const DC_OPEN: &str = r#"<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" xmlns:dc="http://purl.org/dc/elements/1.1/">"#;

    fn envelope(inner: &str) -> String {
        format!(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/">
  <responseDate>2026-01-01T00:00:00Z</responseDate>
  <request verb="ListRecords" metadataPrefix="oai_dc">https://h/oai</request>
  {inner}
</OAI-PMH>"#
        )
    }

    fn one_record(ids: &str) -> String {
        envelope(&format!(
            "<ListRecords><record><header><identifier>oai:h:1</identifier><datestamp>2020-01-02</datestamp>\
             <setSpec>a</setSpec><setSpec>b:c</setSpec></header><metadata>{DC_OPEN}<dc:title>T</dc:title>{ids}</oai_dc:dc></metadata></record>\
             <resumptionToken completeListSize=\"10\" cursor=\"0\">\n  tok+/= |1  \n</resumptionToken></ListRecords>"
        ))
    }

    fn parse(text: &str) -> ListPage {
        parse_list_records(text.as_bytes()).unwrap()
    }

    #[test]
    fn reads_header_identifiers_and_token() {
        let page = parse(&one_record(
            "<dc:identifier> https://h/x?a=1&amp;b=2 </dc:identifier><dc:identifier>doi:10.1/2</dc:identifier>",
        ));
        assert_eq!(page.response_date.as_deref(), Some("2026-01-01T00:00:00Z"));
        let r = &page.records[0];
        assert_eq!(r.identifier, "oai:h:1");
        assert_eq!(
            r.datestamp.map(|d| d.to_string()).as_deref(),
            Some("2020-01-02")
        );
        assert_eq!(r.sets, ["a", "b:c"]);
        assert_eq!(r.dc_identifiers, ["https://h/x?a=1&b=2", "doi:10.1/2"]);
        // OAI-23: trimmed, otherwise untouched; OAI-22: hints read.
        let token = page.token.unwrap();
        assert_eq!(token.value, "tok+/= |1");
        assert_eq!(
            (token.complete_list_size, token.cursor),
            (Some(10), Some(0))
        );
    }

    #[test]
    fn namespace_declaration_styles_give_the_same_records() {
        // OAI-44: prefixed OAI elements (Q-15), declarations on the record and on each element
        // (Q-18).
        let prefixed = r#"<oai:OAI-PMH xmlns:oai="http://www.openarchives.org/OAI/2.0/"><oai:ListRecords><oai:record><oai:header><oai:identifier>oai:h:1</oai:identifier><oai:datestamp>2020-01-02</oai:datestamp></oai:header><oai:metadata><d:dc xmlns:d="http://www.openarchives.org/OAI/2.0/oai_dc/"><e:identifier xmlns:e="http://purl.org/dc/elements/1.1/">https://h/x</e:identifier></d:dc></oai:metadata></oai:record></oai:ListRecords></oai:OAI-PMH>"#;
        let on_record = r#"<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><ListRecords><record xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" xmlns:dc="http://purl.org/dc/elements/1.1/"><header><identifier>oai:h:1</identifier><datestamp>2020-01-02</datestamp></header><metadata><oai_dc:dc><dc:identifier>https://h/x</dc:identifier></oai_dc:dc></metadata></record></ListRecords></OAI-PMH>"#;
        let default_ns = r#"<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><ListRecords><record><header><identifier>oai:h:1</identifier><datestamp>2020-01-02</datestamp></header><metadata><dc xmlns="http://www.openarchives.org/OAI/2.0/oai_dc/"><identifier xmlns="http://purl.org/dc/elements/1.1/">https://h/x</identifier><identifier>not dc: oai_dc namespace</identifier></dc></metadata></record></ListRecords></OAI-PMH>"#;
        let https = r#"<OAI-PMH xmlns="https://www.openarchives.org/OAI/2.0/"><ListRecords><record><header><identifier>oai:h:1</identifier><datestamp>2020-01-02</datestamp></header><metadata><oai_dc:dc xmlns:oai_dc="https://www.openarchives.org/OAI/2.0/oai_dc/" xmlns:dc="https://purl.org/dc/elements/1.1/"><dc:identifier>https://h/x</dc:identifier></oai_dc:dc></metadata></record></ListRecords></OAI-PMH>"#;
        let expected = vec![Record {
            identifier: "oai:h:1".into(),
            datestamp: Datestamp::parse("2020-01-02"),
            dc_identifiers: vec!["https://h/x".into()],
            dc: DcValues::default(),
            ..Record::default()
        }];
        for doc in [prefixed, on_record, default_ns, https] {
            assert_eq!(parse(doc).records, expected, "{doc}");
        }
        // OAI-43: the https spellings are counted.
        assert_eq!(parse(https).quirks.https_namespaces, 9);
    }

    #[test]
    fn other_dc_namespaces_are_not_dublin_core() {
        // OAI-43 bad input, Q-17: a wrong DC namespace (OpenSKOS #10) yields no identifiers.
        let doc = one_record("").replace(
            "</oai_dc:dc>",
            r#"<x:identifier xmlns:x="http://dublincore.org/documents/dcmi-namespace/">https://h/y</x:identifier></oai_dc:dc>"#,
        );
        assert!(parse(&doc).records[0].dc_identifiers.is_empty());
    }

    #[test]
    fn deleted_records_and_the_end_of_the_list() {
        let doc = envelope(
            r#"<ListRecords><record><header status="deleted"><identifier>oai:h:9</identifier><datestamp>2021-01-01T00:00:00Z</datestamp></header></record><resumptionToken completeListSize="1" cursor="0"/></ListRecords>"#,
        );
        let page = parse(&doc);
        assert!(page.records[0].deleted);
        // OAI-21: an empty token (with attributes) ends the list.
        assert_eq!(page.token.unwrap().value, "");
    }

    #[test]
    fn errors_are_data() {
        let page = parse(&envelope(
            r#"<error code="badResumptionToken">  expired  </error><error code="badArgument">x</error>"#,
        ));
        assert_eq!(
            page.errors,
            [
                OaiError {
                    code: "badResumptionToken".into(),
                    message: "expired".into()
                },
                OaiError {
                    code: "badArgument".into(),
                    message: "x".into()
                },
            ]
        );
    }

    #[test]
    fn tolerated_deviations_are_counted() {
        // OAI-48: BOM and leading whitespace.
        let doc = format!(
            "\u{feff}\n\n{}",
            one_record("<dc:identifier>https://h/x</dc:identifier>")
        );
        let page = parse(&doc);
        assert!(page.quirks.leading_whitespace);
        assert_eq!(page.records.len(), 1);
        // OAI-46: raw control characters and references to illegal characters go; TAB/LF/CR stay.
        let doc = one_record("<dc:identifier>https://h/x</dc:identifier>").replace(
            "<dc:title>T</dc:title>",
            "<dc:title>a\u{1a}b&#xFFFE;c&#55349;\t\u{fffe}d</dc:title>",
        );
        let page = parse(&doc);
        assert_eq!(page.quirks.illegal_chars_removed, 4);
        assert_eq!(page.records[0].dc_identifiers, ["https://h/x"]);
        // Q-19: no namespace at all.
        let page = parse(
            "<OAI-PMH><ListRecords><record><header><identifier>i</identifier><datestamp>2020-01-01</datestamp></header></record></ListRecords></OAI-PMH>",
        );
        assert!(page.quirks.no_namespace);
        assert_eq!(page.records[0].identifier, "i");
    }

    #[test]
    fn bodies_that_are_not_oai() {
        let html = parse_list_records(b"<!DOCTYPE html><html><head><title>Service Unavailable</title></head><body>down</body></html>");
        assert_eq!(
            html,
            Err(HarvestErrorKind::NotOai {
                what: "an HTML page titled \"Service Unavailable\"".into()
            })
        );
        let json = parse_list_records(br#"{"error": "no"}"#).unwrap_err();
        assert!(matches!(json, HarvestErrorKind::NotOai { .. }), "{json:?}");
        let other = parse_list_records(b"<rss><channel/></rss>").unwrap_err();
        assert_eq!(
            other,
            HarvestErrorKind::NotOai {
                what: "an XML document with root element <rss>".into()
            }
        );
        assert!(parse_list_records(b"").is_err());
    }

    #[test]
    fn broken_xml_is_an_error_never_an_empty_page() {
        let doc = one_record("<dc:identifier>https://h/x</dc:identifier>");
        // OAI-50: a cut body is truncation (worth a retry).
        let cut = &doc.as_bytes()[..doc.len() * 7 / 10];
        let e = parse_list_records(cut);
        assert!(
            matches!(e, Err(HarvestErrorKind::Truncated { .. })),
            "{e:?}"
        );
        // OAI-09: undefined entities are errors; DTD entities are never expanded.
        let bogus = doc.replace("<dc:title>T</dc:title>", "<dc:title>&bogus;</dc:title>");
        assert!(matches!(
            parse_list_records(bogus.as_bytes()),
            Err(HarvestErrorKind::Xml { .. })
        ));
        let xxe = doc
            .replace(
                "<OAI-PMH",
                "<!DOCTYPE OAI-PMH [<!ENTITY e SYSTEM \"file:///etc/passwd\">]>\n<OAI-PMH",
            )
            .replace("<dc:title>T</dc:title>", "<dc:title>&e;</dc:title>");
        let e = parse_list_records(xxe.as_bytes()).unwrap_err();
        assert!(e.to_string().contains("undefined entity &e;"), "{e}");
        // Q-30: an unescaped `&` is not well-formed.
        let amp = doc.replace("<dc:title>T</dc:title>", "<dc:title>A & B</dc:title>");
        assert!(parse_list_records(amp.as_bytes()).is_err());
        // OAI-47: bytes that are not UTF-8 are read as Windows-1252, and counted; the UTF-8
        // around them is kept.
        let mut bytes = doc.replace("<dc:title>T", "<dc:title>Tü.").into_bytes();
        let at = doc.find("<dc:title>T").unwrap() + 10;
        bytes.splice(at..at, [0xE9, 0x80, 0xFF]);
        let page = parse_list_records_with(&bytes, Fields::of(&[DcElement::Title])).unwrap();
        assert_eq!(
            page.records[0]
                .dc_values(DcElement::Title)
                .collect::<Vec<_>>(),
            ["é€ÿTü."]
        );
        assert_eq!(page.quirks.windows_1252_bytes, 3);
        // Nesting far deeper than any OAI-PMH response.
        let deep = format!("<OAI-PMH xmlns=\"{OAI_NS}\">{}", "<a>".repeat(1000));
        assert!(matches!(
            parse_list_records(deep.as_bytes()),
            Err(HarvestErrorKind::TooDeep { .. })
        ));
    }

    /// OAI-36: a record is its header, optional metadata and any number of `about` containers,
    /// which are passed over, whatever they hold (here provenance naming another record, and an
    /// oai_dc record of its own). OAI-45, Q-17: an element this crate does not read, a dcterms
    /// element put in the DC namespace (Dataverse #3368), is passed over without failing the
    /// record. Both readers agree.
    #[test]
    fn about_containers_and_unknown_elements_are_passed_over() {
        let about = format!(
            "<about><provenance xmlns=\"http://www.openarchives.org/OAI/2.0/provenance\">\
             <originDescription><baseURL>https://other/oai</baseURL><identifier>oai:other:1</identifier>\
             <datestamp>2001-01-01</datestamp></originDescription></provenance></about>\
             <about>{DC_OPEN}<dc:identifier>https://h/from-about</dc:identifier></oai_dc:dc></about>"
        );
        let doc = one_record(
            "<dc:isReferencedBy>https://h/cited-by</dc:isReferencedBy>\
             <dc:identifier>https://h/x</dc:identifier>",
        )
        .replace(
            "</metadata></record>",
            &format!("</metadata>{about}</record>"),
        );
        let page = parse_list_records_reference(doc.as_bytes(), Fields::ALL).unwrap();
        assert_eq!(
            parse_list_records_fast(doc.as_bytes(), Fields::ALL).as_ref(),
            Some(&page)
        );
        assert_eq!(page.records.len(), 1);
        let r = &page.records[0];
        assert_eq!(r.identifier, "oai:h:1");
        assert_eq!(r.dc_identifiers, ["https://h/x"]);
        assert_eq!(r.dc.iter().collect::<Vec<_>>(), [(DcElement::Title, "T")]);
        assert_eq!(page.token.unwrap().value, "tok+/= |1");
    }

    /// OAI-16: `compression` lists the encodings the repository offers (pyoai's fake3..5 list
    /// gzip and deflate).
    #[test]
    fn identify_fields() {
        let doc = r#"<?xml version="1.0"?>
<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><responseDate>2026-01-01T00:00:00Z</responseDate>
<request verb="Identify">https://h/oai</request><Identify><repositoryName>R &amp; D</repositoryName>
<baseURL> https://h/oai </baseURL><protocolVersion>2.0</protocolVersion><adminEmail>a@h</adminEmail>
<earliestDatestamp>aaaa-bb-cc</earliestDatestamp><deletedRecord>transient</deletedRecord>
<granularity>YYYY-MM-DDThh:mm:ssZ</granularity><compression>gzip</compression><compression>deflate</compression></Identify></OAI-PMH>"#;
        let IdentifyOutcome::Identify(i) = parse_identify(doc.as_bytes()).unwrap() else {
            panic!("not Identify")
        };
        assert_eq!(i.repository_name, "R & D");
        assert_eq!(i.base_url, "https://h/oai");
        assert_eq!(i.granularity, Granularity::Seconds);
        assert_eq!(i.deleted_record, "transient");
        // OAI-12: an unparsable earliestDatestamp is ignored.
        assert_eq!(i.earliest_datestamp, None);
        assert_eq!(i.compression, ["gzip", "deflate"]);
        let unknown = doc.replace("YYYY-MM-DDThh:mm:ssZ", "seconds");
        let IdentifyOutcome::Identify(i) = parse_identify(unknown.as_bytes()).unwrap() else {
            panic!()
        };
        assert_eq!(
            (i.granularity, i.granularity_unknown.as_deref()),
            (Granularity::Day, Some("seconds"))
        );
    }

    /// Q-33: a `description` that does not validate (SobekCM #13: an oai-identifier whose
    /// repositoryIdentifier has no dot), or that holds anything at all, is not read and fails
    /// nothing.
    #[test]
    fn identify_with_an_invalid_description() {
        let doc = r#"<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><responseDate>2026-01-01T00:00:00Z</responseDate>
<request verb="Identify">https://h/oai</request><Identify><repositoryName>R</repositoryName>
<baseURL>https://h/oai</baseURL><protocolVersion>2.0</protocolVersion><adminEmail>a@h</adminEmail>
<earliestDatestamp>2001-01-01</earliestDatestamp><deletedRecord>persistent</deletedRecord>
<granularity>YYYY-MM-DD</granularity>
<description><oai-identifier xmlns="http://www.openarchives.org/OAI/2.0/oai-identifier">
<scheme>oai</scheme><repositoryIdentifier>nodot</repositoryIdentifier><delimiter>::</delimiter>
<sampleIdentifier>not an identifier</sampleIdentifier></oai-identifier></description>
<description><baseURL>https://elsewhere/oai</baseURL><granularity>junk</granularity></description>
<description/></Identify></OAI-PMH>"#;
        let IdentifyOutcome::Identify(i) = parse_identify(doc.as_bytes()).unwrap() else {
            panic!("not Identify")
        };
        assert_eq!(i.base_url, "https://h/oai");
        assert_eq!(i.granularity, Granularity::Day);
        assert_eq!(i.granularity_unknown, None);
        assert_eq!(i.deleted_record, "persistent");
    }

    #[test]
    fn static_repository_files() {
        let doc = r#"<Repository xmlns="http://www.openarchives.org/OAI/2.0/static-repository" xmlns:oai="http://www.openarchives.org/OAI/2.0/">
<Identify><oai:repositoryName>S</oai:repositoryName><oai:baseURL>https://h/oai</oai:baseURL><oai:protocolVersion>2.0</oai:protocolVersion>
<oai:granularity>YYYY-MM-DD</oai:granularity><oai:deletedRecord>no</oai:deletedRecord><oai:earliestDatestamp>2002-01-01</oai:earliestDatestamp></Identify>
<ListRecords metadataPrefix="oai_dc"><oai:record><oai:header><oai:identifier>oai:h:1</oai:identifier><oai:datestamp>2002-02-02</oai:datestamp></oai:header>
<oai:metadata><oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:identifier>https://h/1</dc:identifier></oai_dc:dc></oai:metadata></oai:record></ListRecords></Repository>"#;
        let IdentifyOutcome::Static(i) = parse_identify(doc.as_bytes()).unwrap() else {
            panic!("not static")
        };
        assert_eq!(i.base_url, "https://h/oai");
        let page = parse(doc);
        assert!(page.is_static);
        assert_eq!(page.records[0].dc_identifiers, ["https://h/1"]);
        assert_eq!(page.token, None);
    }
}
