//! CDIF: each record's metadata as schema.org JSON-LD crosswalked from oai_dc (Content-Type
//! `application/ld+json; profile="CDIF1.0"`), and the sitemap that lists those documents, which
//! robots.txt announces under `User-agent: CDIF1.0`.
//!
//! | schema.org | from |
//! |---|---|
//! | `@type` | `dc:type` through [`crate::dctype`] (default `CreativeWork`) |
//! | `@id`, `url` | the landing page |
//! | `name` | the first `dc:title` |
//! | `description` | the first `dc:description` |
//! | `creator` | every `dc:creator`, as `Person` with a `name` |
//! | `datePublished` | the first `dc:date` that starts with a year (`YYYY`, `YYYY-MM`, `YYYY-MM-DD`) |
//! | `keywords` | every `dc:subject` |
//! | `publisher` | the first `dc:publisher`, as `Organization` |
//! | `inLanguage` | every `dc:language` |
//! | `license` | the first `dc:rights` that is a URL |
//! | `identifier` | the DOI or Handle, as its resolver URL |
//! | `subjectOf` | the oai_dc record (`GetRecord`), as `DataDownload` with `encodingFormat` |
//!
//! CDIF's metadata list form (its option 3) gathers the same documents into schema.org
//! `ItemList`s (`ItemLists`, `application/ld+json; profile="CDIF-list-1.0"`).

use oai_pmh::{Datestamp, DcElement};
use serde::{Deserialize, Serialize};

use url::Url;

use crate::disk::write::FileStream;
use crate::sitemap::render_shards;
use crate::{Limits, Shard};

use super::files::{FileSink, Shards};
use super::record::{GetRecord, Shared, SignStats, Writers};
use super::registry::{self, Indexes, ProfileSummary};
use super::report::{self, Piece, ProfileCounts, Report};
use super::{Audience, Column, ColumnKind, Feed, Profile, ProfileSettings, Spec, SummarySpec};
use crate::FilesError;

/// CDIF's documents, as the profiles' list knows them ([`super::Spec`]): `cdif-sitemap.xml`
/// lists each record's document, announced to JSON-LD crawlers alone; a document is written
/// from every element of `DOCUMENT_FIELDS`.
pub const SPEC: Spec = Spec {
    label: "cdif",
    prefix: "cdif-sitemap",
    audience: Audience::Cdif,
    feed: Feed::Records,
    fields: DOCUMENT_FIELDS,
    summary: Some(SummarySpec {
        field: "cdif",
        list: false,
        load: registry::load::<CdifSummary>,
        from_render: Some(CdifSummary::of),
    }),
    column: Some(Column {
        name: "CDIF",
        kind: ColumnKind::Documents,
        write: write_column,
    }),
};

/// CDIF's metadata lists, as the profiles' list knows them: `cdif-list-sitemap.xml` lists the
/// lists of the same documents as [`SPEC`]'s.
pub const LIST_SPEC: Spec = Spec {
    label: "cdif_list",
    prefix: "cdif-list-sitemap",
    summary: None,
    column: None,
    ..SPEC
};

/// The Dublin Core elements a CDIF document is written from (the table above).
const DOCUMENT_FIELDS: oai_pmh::Fields = oai_pmh::Fields::of(&[
    DcElement::Type,
    DcElement::Title,
    DcElement::Description,
    DcElement::Creator,
    DcElement::Date,
    DcElement::Subject,
    DcElement::Publisher,
    DcElement::Language,
    DcElement::Rights,
]);

/// Content-Type of one CDIF document.
pub const CONTENT_TYPE: &str = "application/ld+json; profile=\"CDIF1.0\"";
/// The profile of one CDIF document, as a Signmap's `describedby` link to it names it (CDIF's
/// "Metadata publication": `rel='describedby'`, `type='application/ld+json'` and
/// `profile='CDIF1.0'`).
pub const PROFILE: &str = "CDIF1.0";
/// Content-Type of a CDIF metadata list: an `ItemList` of documents.
pub const LIST_CONTENT_TYPE: &str = "application/ld+json; profile=\"CDIF-list-1.0\"";

/// What one document is made of.
#[derive(Clone, Debug, Default)]
pub(crate) struct Fields<'a> {
    /// The landing page.
    pub url: &'a str,
    /// schema.org type URL (`https://schema.org/Thesis`).
    pub kind: Option<&'a str>,
    /// `dc:title`s.
    pub titles: &'a [&'a str],
    /// `dc:description`s.
    pub descriptions: &'a [&'a str],
    /// `dc:creator`s.
    pub creators: &'a [&'a str],
    /// `dc:date`s.
    pub dates: &'a [&'a str],
    /// `dc:subject`s.
    pub subjects: &'a [&'a str],
    /// `dc:publisher`s.
    pub publishers: &'a [&'a str],
    /// `dc:language`s.
    pub languages: &'a [&'a str],
    /// License URL.
    pub license: Option<&'a str>,
    /// Persistent identifier as a resolver URL.
    pub identifier: Option<&'a str>,
    /// The record's `GetRecord` URL.
    pub metadata: Option<&'a str>,
}

/// The JSON-LD document, compact (one line), its keys in a fixed order.
#[cfg(test)]
pub(crate) fn document(f: &Fields<'_>) -> String {
    let mut out = Vec::new();
    write_document(&mut out, f);
    String::from_utf8(out).expect("JSON is UTF-8")
}

/// Writes a record's CDIF document into `bytes`, after its name's key, when the documents are
/// made: CDIF's [`super::Column`] writer.
pub(crate) fn write_column(
    bytes: &mut Vec<u8>,
    shared: &Shared<'_>,
    _: &ProfileSettings,
    writers: &mut Writers,
) -> bool {
    let Some(key) = shared.document_key else {
        return false;
    };
    write_record(bytes, shared, key, writers.get_record.as_ref());
    true
}

/// Writes a record's CDIF document into `bytes`, from what its entries share, after its name
/// (`hash`, the part of it that is not fixed); it links the oai_dc record when there is a
/// `get_record` URL.
#[inline]
fn write_record(
    bytes: &mut Vec<u8>,
    shared: &Shared<'_>,
    hash: &str,
    get_record: Option<&GetRecord>,
) {
    let record = shared.record;
    let metadata = get_record.map(|g| g.url(&record.identifier));
    // On the stack for a record's usual few values of each.
    let values = |e| {
        record
            .dc_values(e)
            .collect::<smallvec::SmallVec<[&str; 4]>>()
    };
    let titles = values(DcElement::Title);
    let descriptions = values(DcElement::Description);
    let creators = values(DcElement::Creator);
    let dates = values(DcElement::Date);
    let subjects = values(DcElement::Subject);
    let publishers = values(DcElement::Publisher);
    let languages = values(DcElement::Language);
    bytes.clear();
    bytes.extend_from_slice(hash.as_bytes());
    write_document(
        bytes,
        &Fields {
            url: shared.landing,
            kind: shared.kind,
            titles: &titles,
            descriptions: &descriptions,
            creators: &creators,
            dates: &dates,
            subjects: &subjects,
            publishers: &publishers,
            languages: &languages,
            license: shared.license,
            identifier: shared.cite_as,
            metadata: metadata.as_deref(),
        },
    );
}

/// Appends [`document`] to `out`. Serialised from borrowed structs (no intermediate map or
/// `Vec` per record) by sonic-rs, whose strings are escaped a vector at a time: serde_json's
/// escaping, a byte at a time, was an eighth of an export with CDIF's lists, and the per-record
/// `Vec`s a good part of the rest of CDIF's cost (the two together: a third of it). A test
/// holds its strings equal to serde_json's.
pub(crate) fn write_document(out: &mut Vec<u8>, f: &Fields<'_>) {
    sonic_rs::to_writer(out, &Doc::of(f)).expect("serialising borrowed strings cannot fail");
}

/// One document as it is serialised, its members in this order; every string borrowed from
/// [`Fields`].
#[derive(Serialize)]
struct Doc<'a> {
    #[serde(rename = "@context")]
    context: &'static str,
    #[serde(rename = "@type")]
    kind: &'a str,
    #[serde(rename = "@id")]
    id: &'a str,
    url: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    #[serde(skip_serializing_if = "Persons::is_empty")]
    creator: Persons<'a>,
    #[serde(rename = "datePublished", skip_serializing_if = "Option::is_none")]
    date_published: Option<&'a str>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    keywords: &'a [&'a str],
    #[serde(skip_serializing_if = "Option::is_none")]
    publisher: Option<Named<'a>>,
    #[serde(rename = "inLanguage", skip_serializing_if = "Option::is_none")]
    in_language: Option<OneOrMany<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    license: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    identifier: Option<&'a str>,
    #[serde(rename = "subjectOf", skip_serializing_if = "Option::is_none")]
    subject_of: Option<Download<'a>>,
}

/// A thing of a schema.org type with a name.
#[derive(Serialize)]
struct Named<'a> {
    #[serde(rename = "@type")]
    kind: &'static str,
    name: &'a str,
}

/// A download of the record's metadata.
#[derive(Serialize)]
struct Download<'a> {
    #[serde(rename = "@type")]
    kind: &'static str,
    #[serde(rename = "contentUrl")]
    content_url: &'a str,
    #[serde(rename = "encodingFormat")]
    encoding_format: &'static str,
    description: &'static str,
}

/// Names, each as a `Person`, serialised without a `Vec` of them per record.
struct Persons<'a>(&'a [&'a str]);

impl Persons<'_> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for Persons<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|name| Named {
            kind: "Person",
            name,
        }))
    }
}

/// One value as itself, several as an array.
#[derive(Serialize)]
#[serde(untagged)]
enum OneOrMany<'a> {
    One(&'a str),
    Many(&'a [&'a str]),
}

impl<'a> Doc<'a> {
    /// The document of `f`, crosswalked as the table in the module docs says.
    #[inline]
    fn of(f: &Fields<'a>) -> Self {
        Self {
            context: "https://schema.org/",
            kind: f
                .kind
                .and_then(|k| k.strip_prefix(crate::dctype::SCHEMA_ORG))
                .unwrap_or("CreativeWork"),
            id: f.url,
            url: f.url,
            name: f.titles.first().copied(),
            description: f.descriptions.first().copied(),
            creator: Persons(f.creators),
            date_published: f.dates.iter().find_map(|d| date(d)),
            keywords: f.subjects,
            publisher: f.publishers.first().map(|p| Named {
                kind: "Organization",
                name: p,
            }),
            in_language: match f.languages {
                [] => None,
                [one] => Some(OneOrMany::One(one)),
                many => Some(OneOrMany::Many(many)),
            },
            license: f.license,
            identifier: f.identifier,
            subject_of: f.metadata.map(|m| Download {
                kind: "DataDownload",
                content_url: m,
                encoding_format: "application/xml",
                description: "the OAI-PMH oai_dc record",
            }),
        }
    }
}

/// A list's start: the documents' context is the list's too.
pub(crate) const LIST_OPEN: &str =
    "{\"@context\":\"https://schema.org/\",\"@type\":\"ItemList\",\"itemListElement\":[\n";
/// An item's start, before its position.
const ITEM_OPEN: &str = "{\"@type\":\"ListItem\",\"position\":";
/// Between an item's position and its document.
const ITEM_DOCUMENT: &str = ",\"item\":";
/// A list's end, before its number of items (which is known only there: JSON does not order an
/// object's members) and after it.
const LIST_COUNT: &str = "\n],\"numberOfItems\":";
const LIST_CLOSE: &str = "}\n";
/// The longest end: the number of items has at most five digits (`max_urls` <= 50,000).
pub(crate) const LIST_END_MAX: usize = LIST_COUNT.len() + 5 + LIST_CLOSE.len();

/// Splits documents, added one at a time, into CDIF metadata lists: schema.org `ItemList`s of
/// at most `limits.max_urls` items and `limits.max_bytes` bytes, one item a line, each item a
/// `ListItem` holding a document as it is served on its own (its `@context` included, so that
/// an item taken out of the list is the same document). A list is handed to the `emit` of the
/// add whose document does not fit in it, the last one to [`ItemLists::finish`]. One list is
/// in memory at a time.
#[derive(Debug)]
#[must_use = "the last list is emitted by `finish`"]
pub(crate) struct ItemLists {
    limits: Limits,
    /// The list being filled (`urls` counts its items); its bytes when it is not streamed.
    list: Shard,
    /// The list's length so far.
    len: usize,
    /// The list, when it is written as it fills ([`ItemLists::add_into`]): its name and file.
    stream: Option<(String, FileStream)>,
    /// An item's bytes before its document.
    head: Vec<u8>,
}

impl ItemLists {
    /// A splitter into lists within `limits`.
    pub(crate) fn new(limits: Limits) -> Self {
        let mut bytes = Vec::with_capacity(64 * 1024);
        bytes.extend_from_slice(LIST_OPEN.as_bytes());
        Self {
            limits,
            list: Shard {
                bytes,
                urls: 0,
                newest: None,
            },
            len: LIST_OPEN.len(),
            stream: None,
            head: Vec::with_capacity(64),
        }
    }

    /// Appends `document`; when it does not fit, the list before it is closed and handed to
    /// `emit` first. A document too large for an empty list is a list of its own. What
    /// [`ItemLists::add_into`] writes, gathered in memory (for tests).
    #[cfg(test)]
    pub(crate) fn add<E>(
        &mut self,
        document: &[u8],
        emit: impl FnOnce(&Shard) -> Result<(), E>,
    ) -> Result<(), E> {
        if self.full(document) {
            self.close();
            emit(&self.list)?;
            self.restart();
        }
        debug_assert!(self.stream.is_none(), "a gathered list never streams");
        self.append(document).expect("gathered in memory");
        Ok(())
    }

    /// Appends `document` to the lists stored in `files` of `sink`; when it does not fit, the
    /// list before it is closed and stored first. A document too large for an empty list is a
    /// list of its own. When the sink streams ([`FileSink::stream`]), each list is written as
    /// it fills instead of gathered first.
    ///
    /// The lists carry no `newest` datestamp: which list a document falls in depends on the
    /// documents before it, so one record deleted moves documents from list to list, which
    /// the newest datestamp of each would not show (an export's sitemap of them gives no
    /// `lastmod`; the gateway's gives when each list's file changed, as its validators do).
    pub(crate) fn add_into<S: FileSink>(
        &mut self,
        sink: &mut S,
        files: &mut Shards<'_>,
        document: &[u8],
    ) -> Result<(), S::Error> {
        if self.full(document) {
            self.end_into(sink, files)?;
        }
        if self.list.urls == 0 && self.stream.is_none() {
            self.stream = files.open_next(sink)?;
            if let Some((_, stream)) = &mut self.stream {
                stream
                    .write(LIST_OPEN.as_bytes())
                    .map_err(FilesError::Stream)?;
            }
        }
        Ok(self.append(document).map_err(FilesError::Stream)?)
    }

    /// Counts the next item and appends it, `document` in its head: to the list's file when
    /// it streams, else to the list gathered in memory.
    fn append(&mut self, document: &[u8]) -> std::io::Result<()> {
        self.item_head();
        let parts = [&self.head[..], document, b"}"];
        match &mut self.stream {
            Some((_, stream)) => {
                for part in parts {
                    stream.write(part)?;
                }
            }
            None => {
                for part in parts {
                    self.list.bytes.extend_from_slice(part);
                }
            }
        }
        self.len += self.head.len() + document.len() + 1;
        Ok(())
    }

    /// [`ItemLists::finish`] into `files` of `sink` ([`ItemLists::add_into`]).
    pub(crate) fn finish_into<S: FileSink>(
        mut self,
        sink: &mut S,
        files: &mut Shards<'_>,
    ) -> Result<(), S::Error> {
        if self.list.urls > 0 {
            self.end_into(sink, files)?;
        }
        Ok(())
    }

    /// Closes the list and stores it in `files`; the next one starts.
    fn end_into<S: FileSink>(
        &mut self,
        sink: &mut S,
        files: &mut Shards<'_>,
    ) -> Result<(), S::Error> {
        match self.stream.take() {
            Some((name, mut stream)) => {
                self.head.clear();
                self.end_bytes();
                stream.write(&self.head).map_err(FilesError::Stream)?;
                files.end_next(sink, (name, stream), None)?;
            }
            None => {
                self.close();
                files.put(sink, &self.list)?;
            }
        }
        self.restart();
        Ok(())
    }

    /// Whether `document` goes into the next list rather than this one.
    fn full(&self, document: &[u8]) -> bool {
        // ",\n" before it, the position's digits (at most five), the braces.
        let len = 2 + ITEM_OPEN.len() + 5 + ITEM_DOCUMENT.len() + document.len() + 1;
        self.list.urls > 0
            && (self.list.urls == self.limits.max_urls
                || self.len + len + LIST_END_MAX > self.limits.max_bytes)
    }

    /// Counts the next item, and puts its bytes before its document in `head`.
    fn item_head(&mut self) {
        let head = &mut self.head;
        head.clear();
        if self.list.urls > 0 {
            head.extend_from_slice(b",\n");
        }
        self.list.urls += 1;
        head.extend_from_slice(ITEM_OPEN.as_bytes());
        decimal(head, self.list.urls);
        head.extend_from_slice(ITEM_DOCUMENT.as_bytes());
    }

    /// Starts the next list.
    fn restart(&mut self) {
        self.list.bytes.clear();
        self.list.bytes.extend_from_slice(LIST_OPEN.as_bytes());
        self.list.urls = 0;
        self.len = LIST_OPEN.len();
    }

    /// Hands the last list, if it holds any document, to `emit`.
    #[cfg(test)]
    pub(crate) fn finish<E>(mut self, emit: impl FnOnce(&Shard) -> Result<(), E>) -> Result<(), E> {
        if self.list.urls == 0 {
            return Ok(());
        }
        self.close();
        emit(&self.list)
    }

    /// Writes the list's end.
    fn close(&mut self) {
        self.head.clear();
        self.end_bytes();
        self.list.bytes.extend_from_slice(&self.head);
    }

    /// Puts the list's end after `head`.
    fn end_bytes(&mut self) {
        self.head.extend_from_slice(LIST_COUNT.as_bytes());
        decimal(&mut self.head, self.list.urls);
        self.head.extend_from_slice(LIST_CLOSE.as_bytes());
    }
}

/// Appends `n` in decimal digits (as `{}` formats it, without the formatting machinery, once
/// per item).
fn decimal(out: &mut Vec<u8>, mut n: usize) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// The most bytes of an item besides its document: the `,\n` before it, its start with its
/// position, and the brace after the document.
pub(crate) const ITEM_FRAME_MAX: usize = 2 + ITEM_OPEN.len() + 20 + ITEM_DOCUMENT.len() + 1;

/// Where the items end in `tail`, a list's last bytes from the end of an item (or the list's
/// start) on; `None` when they do not end as [`ItemLists`] ends a list.
pub(crate) fn list_end(tail: &[u8]) -> Option<usize> {
    let end = memchr::memmem::rfind(tail, LIST_COUNT.as_bytes())?;
    let digits = tail[end + LIST_COUNT.len()..].strip_suffix(LIST_CLOSE.as_bytes())?;
    (!digits.is_empty() && digits.iter().all(u8::is_ascii_digit)).then_some(end)
}

/// The document, `len` bytes long, of the item `rest` starts with (after a `,\n` unless it is
/// the list's `first`), and how many bytes of `rest` the item takes; `None` when there is no
/// such item there.
pub(crate) fn list_item(rest: &[u8], first: bool, len: usize) -> Option<(&[u8], usize)> {
    let mut item = rest;
    if !first {
        item = item.strip_prefix(b",\n")?;
    }
    item = item.strip_prefix(ITEM_OPEN.as_bytes())?;
    let digits = item.iter().take_while(|b| b.is_ascii_digit()).count();
    item = item[digits..].strip_prefix(ITEM_DOCUMENT.as_bytes())?;
    let document = item.get(..len)?;
    let after = item[len..].strip_prefix(b"}")?;
    Some((document, rest.len() - after.len()))
}

/// A `dc:date` as schema.org `Date` when it starts with `YYYY`, `YYYY-MM` or `YYYY-MM-DD`.
fn date(value: &str) -> Option<&str> {
    let v = value.trim();
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    for len in [10, 7, 4] {
        if let Some(prefix) = v.get(..len) {
            let ok = match len {
                10 => digits(&prefix[..4]) && digits(&prefix[5..7]) && digits(&prefix[8..]),
                7 => digits(&prefix[..4]) && digits(&prefix[5..]),
                _ => digits(prefix),
            } && (len == 4 || prefix.as_bytes()[4] == b'-')
                && (len != 10 || prefix.as_bytes()[7] == b'-');
            if ok && v.as_bytes().get(len).is_none_or(|b| !b.is_ascii_digit()) {
                return Some(prefix);
            }
        }
    }
    None
}

/// A CDIF document, lent by [`super::signposts::Resolved::for_each_cdif_document`].
#[derive(Clone, Copy, Debug)]
pub struct CdifDocument<'a> {
    /// Its file name, `cdif/{hash}.jsonld`, stable for a record identifier.
    pub name: &'a str,
    /// Its URL, the one the Signmap and OCX link, when the documents are published one by one.
    pub url: Option<&'a str>,
    /// Its record's datestamp.
    pub lastmod: Option<Datestamp>,
    /// The JSON-LD.
    pub bytes: &'a [u8],
}

/// Publishes the CDIF documents handed to it: each on its own (`cdif/{hash}.jsonld`, listed
/// in `cdif-sitemap.xml`), in metadata lists (`cdif-list-{n}.jsonld`, listed in
/// `cdif-list-sitemap.xml`), or both, from one pass over them.
pub struct Writer<'a> {
    public_url: &'a Url,
    limits: Limits,
    /// Each document's URL and lastmod, when they are published one by one.
    locs: Option<Vec<(String, Option<Datestamp>)>>,
    /// The lists, when on: their files, and the list being filled.
    lists: Option<(Shards<'a>, ItemLists)>,
}

impl<'a> Writer<'a> {
    /// Publishes each document on its own (`documents`), in lists (`lists`), or both, under
    /// `public_url`, within `limits`.
    pub fn new(public_url: &'a Url, limits: Limits, documents: bool, lists: bool) -> Self {
        Self {
            public_url,
            limits,
            locs: documents.then(Vec::new),
            lists: lists.then(|| (Shards::lists(public_url), ItemLists::new(limits))),
        }
    }

    /// Publishes one document.
    ///
    /// # Errors
    ///
    /// What the sink fails with, storing the document or a list it closes.
    pub fn add<S: FileSink>(
        &mut self,
        sink: &mut S,
        doc: CdifDocument<'_>,
    ) -> Result<(), S::Error> {
        if let Some((files, lists)) = &mut self.lists {
            lists.add_into(sink, files, doc.bytes)?;
        }
        // Published one by one: it has a URL of its own.
        if let (Some(locs), Some(url)) = (&mut self.locs, doc.url) {
            sink.put_document(doc.name, doc.bytes, doc.lastmod)?;
            locs.push((url.to_owned(), doc.lastmod));
        }
        Ok(())
    }

    /// The last list, and the sitemaps that list the documents and the lists, whose indexes
    /// it adds to a render's `indexes` (the lists' with their number).
    ///
    /// # Errors
    ///
    /// What the sink fails with; an index that cannot be rendered ([`FilesError`]).
    pub fn finish<S: FileSink>(self, sink: &mut S, indexes: &mut Indexes) -> Result<(), S::Error> {
        if let Some(locs) = self.locs {
            let mut shards = Shards::new(self.public_url, Profile::Cdif, "xml");
            let items = locs.iter().map(|(u, d)| (u.as_str(), *d));
            render_shards(items, self.limits, |shard| shards.put(sink, shard))?;
            indexes.add(Profile::Cdif, shards.finish(sink)?);
        }
        if let Some((mut files, lists)) = self.lists {
            lists.finish_into(sink, &mut files)?;
            // The lists are listed in a sitemap of their own (an index lists sitemaps only).
            let mut shards = Shards::new(self.public_url, Profile::CdifList, "xml");
            let items = files.entries.iter().map(|(u, d)| (u.as_str(), *d));
            render_shards(items, self.limits, |shard| shards.put(sink, shard))?;
            if let Some(index) = shards.finish(sink)? {
                indexes.add_counted(Profile::CdifList, index, files.names.len());
            }
        }
        Ok(())
    }
}

/// What a generation's CDIF documents are.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct CdifSummary {
    /// Absolute URL of the CDIF sitemap index, when the documents are published one by one.
    pub index_url: Option<String>,
    /// Absolute URL of the index of the CDIF lists' sitemap, when there are lists.
    #[serde(default)]
    pub lists_index_url: Option<String>,
    /// Metadata lists (`ItemList`s) published.
    #[serde(default)]
    pub lists: u64,
    /// Documents published.
    pub documents: u64,
    /// Live records without a landing page inside the scope (no document).
    pub no_landing_page: u64,
}

impl CdifSummary {
    /// What CDIF published, as the collector counted it: its documents one by one (when the
    /// render wrote [`Profile::Cdif`]'s index), in lists ([`Profile::CdifList`]'s, with their
    /// number), or both; none when neither.
    fn of(indexes: &Indexes, stats: &SignStats) -> Option<ProfileSummary> {
        let index = indexes.get(Profile::Cdif);
        let lists = indexes.counted(Profile::CdifList);
        (index.is_some() || lists.is_some()).then(|| {
            ProfileSummary::new(CdifSummary {
                index_url: index.map(Url::to_string),
                lists_index_url: lists.map(|(url, _)| url.to_string()),
                lists: lists.map_or(0, |(_, n)| n as u64),
                documents: stats.published,
                no_landing_page: stats.no_landing_page,
            })
        })
    }

    /// What it left out, by reason.
    fn drops(&self) -> [(&'static str, u64); 1] {
        [("no_landing_page", self.no_landing_page)]
    }
}

impl Report for CdifSummary {
    fn profile(&self) -> Profile {
        Profile::Cdif
    }

    fn counts(&self) -> Vec<ProfileCounts> {
        let drops = self.drops();
        let forms = [
            (self.index_url.is_some()).then_some(Profile::Cdif),
            (self.lists_index_url.is_some()).then_some(Profile::CdifList),
        ];
        (forms.into_iter().flatten())
            .map(|profile| ProfileCounts::new(profile, self.documents, &drops))
            .collect()
    }

    fn export_lines(&self) -> Vec<(String, String)> {
        // CDIF's two forms: a document per record, and lists of them.
        let forms = [
            self.index_url.as_ref().map(|url| {
                let what = format!("{} JSON-LD documents in cdif/", self.documents);
                ("CDIF", what, CONTENT_TYPE, "CDIF sitemap", url)
            }),
            self.lists_index_url.as_ref().map(|url| {
                let what = format!(
                    "{} documents in {} ItemList file(s), cdif-list-N.jsonld",
                    self.documents, self.lists
                );
                (
                    "CDIF lists",
                    what,
                    LIST_CONTENT_TYPE,
                    "CDIF list index",
                    url,
                )
            }),
        ];
        let mut lines = Vec::new();
        for (label, what, media_type, index, url) in forms.into_iter().flatten() {
            let what = format!(
                "{what} (serve them as {media_type}); {}",
                report::not_published(&self.drops())
            );
            lines.extend([(label.into(), what), (index.into(), url.clone())]);
        }
        lines
    }

    fn status_line(&self, _: &Url) -> Vec<Piece> {
        let mut line = vec![match &self.index_url {
            Some(url) => Piece::Link("CDIF", url.clone()),
            None => Piece::Text("CDIF".into()),
        }];
        line.push(Piece::Text(format!(
            ": {} JSON-LD documents",
            self.documents
        )));
        if let Some(url) = &self.lists_index_url {
            line.push(Piece::Text(" in ".into()));
            line.push(Piece::Link("lists", url.clone()));
            line.push(Piece::Text(format!(": {}", self.lists)));
        }
        let drops = report::not_published(&self.drops());
        line.push(Piece::Text(format!("; {drops}")));
        line
    }

    fn indexes(&self, _: &Url) -> Vec<String> {
        Vec::new()
    }

    fn jsonld_indexes(&self) -> Vec<String> {
        (self.index_url.iter().chain(&self.lists_index_url))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn the_crosswalk() {
        let doc = document(&Fields {
            url: "https://h/r/1",
            kind: Some("https://schema.org/Thesis"),
            titles: &["Tides & waves \"quoted\""],
            descriptions: &["About <tides>."],
            creators: &["Müller, A.", "Jansen, B."],
            dates: &["n.d.", "2021-06-30T00:00:00Z"],
            subjects: &["tides", "coasts"],
            publishers: &["Northbridge University"],
            languages: &["en"],
            license: Some("https://creativecommons.org/licenses/by/4.0/"),
            identifier: Some("https://doi.org/10.1/x"),
            metadata: Some(
                "https://h/oai?verb=GetRecord&identifier=oai%3Ah%3A1&metadataPrefix=oai_dc",
            ),
        });
        let v: Value = serde_json::from_str(&doc).unwrap();
        assert_eq!(v["@context"], "https://schema.org/");
        assert_eq!(v["@type"], "Thesis");
        assert_eq!(v["@id"], "https://h/r/1");
        assert_eq!(v["url"], "https://h/r/1");
        assert_eq!(v["name"], "Tides & waves \"quoted\"");
        assert_eq!(v["description"], "About <tides>.");
        assert_eq!(v["creator"][1]["name"], "Jansen, B.");
        assert_eq!(v["creator"][0]["@type"], "Person");
        assert_eq!(v["datePublished"], "2021-06-30");
        assert_eq!(v["keywords"], json!(["tides", "coasts"]));
        assert_eq!(v["publisher"]["name"], "Northbridge University");
        assert_eq!(v["inLanguage"], "en");
        assert_eq!(v["license"], "https://creativecommons.org/licenses/by/4.0/");
        assert_eq!(v["identifier"], "https://doi.org/10.1/x");
        assert_eq!(v["subjectOf"]["encodingFormat"], "application/xml");
        assert!(
            doc.starts_with("{\"@context\":\"https://schema.org/\",\"@type\":\"Thesis\",\"@id\":")
        );
    }

    #[test]
    fn minimal_documents_and_dates() {
        let v: Value = serde_json::from_str(&document(&Fields {
            url: "https://h/r/2",
            ..Fields::default()
        }))
        .unwrap();
        assert_eq!(v["@type"], "CreativeWork");
        assert!(v.get("name").is_none() && v.get("datePublished").is_none());
        assert_eq!(date("2020"), Some("2020"));
        assert_eq!(date("2020-05"), Some("2020-05"));
        assert_eq!(date("2020-05-06"), Some("2020-05-06"));
        assert_eq!(date("20201"), None);
        assert_eq!(date("May 2020"), None);
        assert_eq!(date("2020-5-6"), Some("2020"));
    }

    /// Lists a document per item, in order, split on both limits, each list a JSON-LD
    /// `ItemList` whose items are the documents unchanged.
    #[test]
    fn item_lists_split_on_both_limits() {
        let docs: Vec<String> = (1..=7)
            .map(|i| {
                document(&Fields {
                    url: &format!("https://h/r/{i}"),
                    titles: &["T"],
                    ..Fields::default()
                })
            })
            .collect();
        let split = |limits: Limits| {
            let mut lists: Vec<(Value, usize)> = Vec::new();
            let mut emit = |list: &Shard| {
                assert!(list.bytes.len() <= limits.max_bytes, "{}", list.bytes.len());
                let text = std::str::from_utf8(&list.bytes).unwrap();
                assert_eq!(list.newest, None);
                lists.push((serde_json::from_str(text).unwrap(), list.urls));
                Ok::<(), ()>(())
            };
            let mut l = ItemLists::new(limits);
            for doc in &docs {
                l.add(doc.as_bytes(), &mut emit).unwrap();
            }
            l.finish(&mut emit).unwrap();
            lists
        };
        let by_count = split(Limits {
            max_urls: 3,
            max_bytes: 1 << 20,
        });
        assert_eq!(by_count.iter().map(|l| l.1).collect::<Vec<_>>(), [3, 3, 1]);
        let (first, ..) = &by_count[0];
        assert_eq!(first["@context"], "https://schema.org/");
        assert_eq!(first["@type"], "ItemList");
        assert_eq!(first["numberOfItems"], 3);
        let items = first["itemListElement"].as_array().unwrap();
        for (k, item) in items.iter().enumerate() {
            assert_eq!(item["@type"], "ListItem");
            assert_eq!(item["position"], k + 1);
            let alone: Value = serde_json::from_str(&docs[k]).unwrap();
            assert_eq!(item["item"], alone);
        }
        assert_eq!(
            by_count[2].0["itemListElement"][0]["item"]["@id"],
            "https://h/r/7"
        );
        // Room for two documents and the list's frame, not three.
        let max_bytes = LIST_OPEN.len() + 2 * (docs[0].len() + 60) + LIST_END_MAX;
        let by_bytes = split(Limits {
            max_urls: 50_000,
            max_bytes,
        });
        assert_eq!(
            by_bytes.iter().map(|l| l.1).collect::<Vec<_>>(),
            [2, 2, 2, 1]
        );
        let ids: Vec<Value> = by_bytes
            .iter()
            .flat_map(|(v, ..)| v["itemListElement"].as_array().unwrap().clone())
            .map(|item| item["item"]["@id"].clone())
            .collect();
        assert_eq!(
            ids,
            (1..=7)
                .map(|i| json!(format!("https://h/r/{i}")))
                .collect::<Vec<_>>()
        );
    }

    /// Lists written as they fill into a staging folder ([`ItemLists::add_into`]) are the lists
    /// gathered in memory ([`ItemLists::add`]), byte for byte, and recorded with their length
    /// and hash.
    #[test]
    fn streamed_lists_are_the_gathered_ones() {
        let docs: Vec<String> = (1..=40)
            .map(|i| {
                document(&Fields {
                    url: &format!("https://h/r/{i}"),
                    titles: &[&"T".repeat(i * 13 % 200)],
                    ..Fields::default()
                })
            })
            .collect();
        let url = Url::parse("https://h/").unwrap();
        for limits in [
            Limits {
                max_urls: 3,
                max_bytes: 1 << 20,
            },
            Limits {
                max_urls: 50_000,
                max_bytes: 2_000,
            },
            Limits {
                max_urls: 11,
                max_bytes: 5_000,
            },
        ] {
            let mut gathered = Vec::new();
            let mut l = ItemLists::new(limits);
            for doc in &docs {
                l.add(doc.as_bytes(), |list| {
                    gathered.push(list.bytes.clone());
                    Ok::<(), ()>(())
                })
                .unwrap();
            }
            l.finish(|list| {
                gathered.push(list.bytes.clone());
                Ok::<(), ()>(())
            })
            .unwrap();

            let dir = tempfile::tempdir().unwrap();
            let mut staging = crate::disk::write::Staging::new(&dir.path().join("out")).unwrap();
            let mut sink = super::super::files::Recording::new(&mut staging);
            let mut files = Shards::lists(&url);
            let mut l = ItemLists::new(limits);
            for doc in &docs {
                l.add_into(&mut sink, &mut files, doc.as_bytes()).unwrap();
            }
            l.finish_into(&mut sink, &mut files).unwrap();
            let records = std::mem::take(&mut sink.files);
            assert_eq!(files.names.len(), gathered.len(), "{limits:?}");
            for (n, (list, record)) in gathered.iter().zip(&records).enumerate() {
                let name = Profile::list_name(n as u32 + 1);
                let streamed = std::fs::read(staging.path().join(&name)).unwrap();
                assert!(streamed == *list, "{limits:?}: {name} differs");
                assert_eq!(record.name, name);
                assert_eq!(record.len, list.len() as u64);
                assert_eq!(record.hash, crate::profiles::ledger::hash(list));
            }
        }
    }

    /// No document, no list; a document larger than a list may be is a list of its own.
    #[test]
    fn item_lists_empty_and_oversized() {
        let limits = Limits {
            max_urls: 10,
            max_bytes: 200,
        };
        let mut count = 0;
        ItemLists::new(limits)
            .finish(|_| {
                count += 1;
                Ok::<(), ()>(())
            })
            .unwrap();
        assert_eq!(count, 0);
        let big = format!("{{\"name\":\"{}\"}}", "x".repeat(300));
        let mut lists = Vec::new();
        let mut l = ItemLists::new(limits);
        for _ in 0..2 {
            l.add(big.as_bytes(), |s: &Shard| {
                lists.push(s.urls);
                Ok::<(), ()>(())
            })
            .unwrap();
        }
        l.finish(|s| {
            lists.push(s.urls);
            Ok::<(), ()>(())
        })
        .unwrap();
        assert_eq!(lists, [1, 1]);
    }

    /// The documents are written by sonic-rs, whose strings are as serde_json writes them (the
    /// reference): every control character, quote and backslash escaped, the rest as it is.
    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        use proptest::prelude::*;
        let every_ascii: String = (0u8..0x80)
            .map(char::from)
            .chain(['é', '\u{2028}', '😀'])
            .collect();
        assert_eq!(
            sonic_rs::to_string(&every_ascii).unwrap(),
            serde_json::to_string(&every_ascii).unwrap()
        );
        proptest!(|(s in any::<String>(), t in "[\\x00-\\x7f\"\\\\]{0,80}")| {
            for v in [&s, &t] {
                prop_assert_eq!(sonic_rs::to_string(v).unwrap(), serde_json::to_string(v).unwrap());
            }
        });
    }
}
