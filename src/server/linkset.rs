//! FAIR Signposting from the Signmap (issue 32 points 1 and 2): a linkset per landing page
//! (RFC 9264, Level 2) and the `Link` header a reverse proxy adds to the landing page (Level 1).
//!
//! The links are exactly the Signmap entry's: `<loc>` is the anchor, each `rs:ln` a link. Every
//! gateway, holder or follower, derives them from the generation's Signmap shards when the
//! generation is put in place or loaded ([`open`], on the refresh, follow or start thread, never
//! on the serving runtime), into two files beside the generation's own (neither in its manifest
//! nor in the bucket): [`PACK`], each landing page's links as lines, and [`INDEX`], entries
//! sorted by a 64-bit hash of the landing URL. The entry's landing URL is compared on lookup, so
//! a hash collision never serves another page's links.

use std::collections::VecDeque;
use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use percent_encoding::{AsciiSet, CONTROLS, NON_ALPHANUMERIC, utf8_percent_encode};

use super::keyed::{Entry, Index, Sorter};
use crate::profiles::{FileName, Profile};

/// Each landing page's links: the landing URL on a line, then a line per link,
/// `rel \t href \t type \t profile` (empty when absent).
pub(crate) const PACK: &str = "linksets.pack";
/// The pack's index ([`super::keyed`]): by [`key`] of the landing URL, each record's offset,
/// length and Last-Modified (the Signmap shard's, in seconds).
pub(crate) const INDEX: &str = "linksets.index";

/// `application/linkset+json` (RFC 9264 §4.2).
pub(crate) const JSON: &str = "application/linkset+json";
/// `application/linkset` (RFC 9264 §4.1).
pub(crate) const TEXT: &str = "application/linkset";

/// At most this many `item` links go into a Level 1 `Link` header; a page with more gets them in
/// its linkset only, so the header stays small (proxies refuse large upstream headers).
pub(crate) const MAX_HEADER_ITEMS: usize = 5;

/// Which Signposting answer a request asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Asked {
    /// A linkset (Level 2).
    Linkset,
    /// The `Link` header for a reverse proxy (Level 1).
    Header,
}

impl Asked {
    /// Its label in the metrics.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Asked::Linkset => "linkset",
            Asked::Header => "header",
        }
    }
}

/// How many pages an operator sees among those asked for that the generation does not list.
const UNKNOWN_KEPT: usize = 5;
/// How much of such a page's URL is kept (it comes from the request).
const UNKNOWN_CHARS: usize = 200;

/// What a repository's Signposting answered since the gateway started, for the status page.
#[derive(Debug, Default)]
pub(crate) struct Answered {
    /// Linksets: found, and asked for pages the generation does not list.
    linksets: [AtomicU64; 2],
    /// `Link` headers likewise.
    headers: [AtomicU64; 2],
    /// When the last one was asked, in seconds since the epoch (0: never).
    last: AtomicU64,
    /// The last pages asked for that the generation does not list: a proxy that names pages
    /// otherwise than the records do (`http` for `https`, another host) shows there.
    unknown: Mutex<VecDeque<String>>,
}

/// [`Answered`] at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct AnsweredNow {
    /// Linksets sent, and asked for pages not listed.
    pub(crate) linksets: (u64, u64),
    /// `Link` headers sent, and asked for pages not listed.
    pub(crate) headers: (u64, u64),
    /// When the last request came.
    pub(crate) last: Option<SystemTime>,
    /// The last pages asked for that are not listed, newest last.
    pub(crate) unknown: Vec<String>,
}

impl Answered {
    /// Counts a request for `landing`'s linkset or header; `found`: the generation lists it.
    pub(crate) fn count(&self, asked: Asked, landing: &str, found: bool) {
        let counts = match asked {
            Asked::Linkset => &self.linksets,
            Asked::Header => &self.headers,
        };
        counts[usize::from(!found)].fetch_add(1, Ordering::Relaxed);
        let now = SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        self.last.store(now, Ordering::Relaxed);
        if !found {
            let mut unknown = self.unknown.lock().unwrap_or_else(|e| e.into_inner());
            if unknown.len() == UNKNOWN_KEPT {
                unknown.pop_front();
            }
            unknown.push_back(landing.chars().take(UNKNOWN_CHARS).collect());
        }
    }

    /// The counts now.
    pub(crate) fn now(&self) -> AnsweredNow {
        let pair =
            |c: &[AtomicU64; 2]| (c[0].load(Ordering::Relaxed), c[1].load(Ordering::Relaxed));
        let last = self.last.load(Ordering::Relaxed);
        AnsweredNow {
            linksets: pair(&self.linksets),
            headers: pair(&self.headers),
            last: (last > 0).then(|| std::time::UNIX_EPOCH + std::time::Duration::from_secs(last)),
            unknown: (self.unknown.lock().unwrap_or_else(|e| e.into_inner()))
                .iter()
                .cloned()
                .collect(),
        }
    }
}

/// The key of a landing URL.
pub(crate) fn key(landing: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(landing.as_bytes())
}

/// One typed link of a landing page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Link {
    pub(crate) rel: String,
    pub(crate) href: String,
    pub(crate) media_type: Option<String>,
    pub(crate) profile: Option<String>,
}

/// A landing page and its links, in the Signmap's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Linkset {
    pub(crate) anchor: String,
    pub(crate) links: Vec<Link>,
}

/// The generation's linkset index: read from [`INDEX`] when it is there, else built from the
/// Signmap shards among `files` (their names and Last-Modified times; none: empty). A failure is
/// logged and leaves the generation without linksets (its files are served as before).
pub(crate) fn open<'a>(dir: &Path, files: impl Iterator<Item = (&'a str, SystemTime)>) -> Index {
    let shards: Vec<(&str, SystemTime)> = files
        .filter(|(name, _)| {
            !name.ends_with(".gz")
                && matches!(
                    FileName::parse(name),
                    Some(FileName::Shard(Profile::Signmap, _))
                )
        })
        .collect();
    if shards.is_empty() {
        return Index::default();
    }
    let index = dir.join(INDEX);
    match Index::open(&index) {
        Ok(index) => return index,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => {
            tracing::warn!(path = %index.display(), "damaged linkset index ({e}); made again")
        }
    }
    match build(dir, &shards) {
        Ok(entries) => entries,
        Err(e) => {
            tracing::error!(
                dir = %dir.display(),
                "cannot make the linksets from the Signmap; none are served for this generation: {e}"
            );
            Index::default()
        }
    }
}

/// Reads every Signmap shard, writes the pack and then the index (each by a rename, the index
/// last: a pack without its index is made again at the next load).
fn build(dir: &Path, shards: &[(&str, SystemTime)]) -> io::Result<Index> {
    let tmp_pack = dir.join(format!(".{PACK}.tmp"));
    let mut pack = BufWriter::new(fs::File::create(&tmp_pack)?);
    let mut sorter = Sorter::new(dir);
    let mut offset = 0u64;
    for &(name, last_modified) in shards {
        let path = dir.join(name);
        let bytes = fs::read(&path)?;
        let last_modified = last_modified
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let mut records = SignmapRecords::new(&bytes);
        let damaged = |e| io::Error::other(format!("{}: {e}", path.display()));
        while let Some((anchor, record)) = records.next().map_err(damaged)? {
            pack.write_all(record)?;
            // A landing URL that two entries carry is found at its first: the sort keeps
            // equal keys in order.
            sorter.push(Entry {
                key: key(anchor),
                offset,
                len: record.len() as u32,
                time: last_modified,
            })?;
            offset += record.len() as u64;
        }
    }
    pack.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    fs::rename(&tmp_pack, dir.join(PACK))?;
    let tmp_index = dir.join(format!(".{INDEX}.tmp"));
    sorter.finish(&tmp_index)?;
    fs::rename(&tmp_index, dir.join(INDEX))?;
    Index::open(&dir.join(INDEX))
}

/// A Signmap's entries as linksets: `<loc>` and the `rs:ln` links of each `<url>`, as the pack
/// keeps them ([`SignmapRecords`], read back by [`decode_record`]).
pub(crate) fn parse_signmap(xml: &[u8]) -> Result<Vec<Linkset>, quick_xml::Error> {
    let mut records = SignmapRecords::new(xml);
    let mut out = Vec::new();
    while let Some((_, record)) = records.next()? {
        out.extend(decode_record(record));
    }
    Ok(out)
}

/// A Signmap's entries read one after another, each as the pack's record of its landing page:
/// the landing URL (`<loc>`) on a line, then a line per `rs:ln` link, `rel \t href \t type \t
/// profile` (empty when absent). A value holding a tab or a line break (which no URL the bridge
/// writes does) leaves its link or entry out, as the pack could not keep it.
///
/// Every gateway reads every Signmap shard so at each refresh; the entry, its links and the
/// attributes' values are written into buffers kept from one entry to the next, not made into
/// strings of their own (a million entries read into [`Linkset`]s first cost a tenth of a
/// gateway's first refresh with the Signmap on, a third of it in the allocator).
struct SignmapRecords<'a> {
    reader: quick_xml::Reader<&'a [u8]>,
    buf: Vec<u8>,
    /// Inside a `<url>`, inside its `<loc>`.
    in_url: bool,
    in_loc: bool,
    /// The entry's landing URL, and its links as the record's lines.
    anchor: String,
    links: Vec<u8>,
    /// An `rs:ln`'s rel, href, type and profile.
    fields: [String; 4],
    /// The last entry's record.
    record: Vec<u8>,
}

impl<'a> SignmapRecords<'a> {
    fn new(xml: &'a [u8]) -> Self {
        Self {
            reader: quick_xml::Reader::from_reader(xml),
            buf: Vec::new(),
            in_url: false,
            in_loc: false,
            anchor: String::new(),
            links: Vec::new(),
            fields: Default::default(),
            record: Vec::new(),
        }
    }

    /// The next entry with a landing page: its landing URL and its record; `None` at the end.
    fn next(&mut self) -> Result<Option<(&str, &[u8])>, quick_xml::Error> {
        use quick_xml::events::Event;
        loop {
            self.buf.clear();
            match self.reader.read_event_into(&mut self.buf)? {
                Event::Start(e) if e.name().as_ref() == "url" => {
                    self.in_url = true;
                    self.anchor.clear();
                    self.links.clear();
                }
                Event::Start(e) if e.name().as_ref() == "loc" => self.in_loc = true,
                Event::End(e) if e.name().as_ref() == "loc" => self.in_loc = false,
                Event::Text(t) if self.in_loc && self.in_url => self.anchor.push_str(&t),
                Event::GeneralRef(r) if self.in_loc && self.in_url => {
                    if let Some(c) = resolve(&r) {
                        self.anchor.push_str(&c);
                    }
                }
                Event::Empty(e) | Event::Start(e)
                    if self.in_url && e.name().as_ref() == "rs:ln" =>
                {
                    push_link(&e, &mut self.fields, &mut self.links)?;
                }
                Event::End(e) if e.name().as_ref() == "url" => {
                    let in_url = std::mem::take(&mut self.in_url);
                    if in_url && !self.anchor.is_empty() && clean(&self.anchor) {
                        self.record.clear();
                        self.record.extend_from_slice(self.anchor.as_bytes());
                        self.record.push(b'\n');
                        self.record.extend_from_slice(&self.links);
                        return Ok(Some((&self.anchor, &self.record)));
                    }
                }
                Event::Eof => return Ok(None),
                _ => {}
            }
        }
    }
}

/// Appends `link`'s line to `links` when it has a relation and a target and no value holds a
/// tab or a line break; `fields` are the buffers its values are read into.
fn push_link(
    link: &quick_xml::events::BytesStart<'_>,
    fields: &mut [String; 4],
    links: &mut Vec<u8>,
) -> Result<(), quick_xml::Error> {
    fields.iter_mut().for_each(String::clear);
    for a in link.attributes() {
        let a = a.map_err(quick_xml::Error::from)?;
        let field = match a.key.as_ref() {
            "rel" => 0,
            "href" => 1,
            "type" => 2,
            "profile" => 3,
            _ => continue,
        };
        let value = a.normalized_value(quick_xml::XmlVersion::Implicit1_0)?;
        fields[field].clear();
        fields[field].push_str(&value);
    }
    if fields[0].is_empty() || fields[1].is_empty() || !fields.iter().all(|f| clean(f)) {
        return Ok(());
    }
    for (i, field) in fields.iter().enumerate() {
        if i > 0 {
            links.push(b'\t');
        }
        links.extend_from_slice(field.as_bytes());
    }
    links.push(b'\n');
    Ok(())
}

/// A character or predefined entity reference in text (the bridge escapes `&`, `<` and the
/// like).
fn resolve(r: &quick_xml::events::BytesRef<'_>) -> Option<String> {
    if let Ok(Some(c)) = r.resolve_char_ref() {
        return Some(c.to_string());
    }
    quick_xml::escape::resolve_predefined_entity(r).map(str::to_owned)
}

fn clean(value: &str) -> bool {
    !value.contains(['\t', '\n', '\r'])
}

/// A record of the pack, as [`SignmapRecords`] makes it; `None` when it is not one.
pub(crate) fn decode_record(bytes: &[u8]) -> Option<Linkset> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut lines = text.lines();
    let anchor = lines.next()?.to_owned();
    let links = lines
        .map(|line| {
            let mut f = line.split('\t');
            let mut next = || f.next().map(str::to_owned);
            let (rel, href, t, p) = (next()?, next()?, next()?, next()?);
            Some(Link {
                rel,
                href,
                media_type: (!t.is_empty()).then_some(t),
                profile: (!p.is_empty()).then_some(p),
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Linkset { anchor, links })
}

/// What a `Link` target or anchor may not hold literally for a naive parser to read it: the
/// header's delimiters (F-UJI splits Link values on commas), quotes, spaces, angle brackets.
const LINK_UNSAFE: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b',')
    .add(b';')
    .add(b'<')
    .add(b'>')
    .add(b'\\');

/// Everything but RFC 3986's unreserved characters: a landing URL as a query value.
const QUERY_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

fn link_safe(url: &str) -> String {
    utf8_percent_encode(url, LINK_UNSAFE).to_string()
}

/// A parameter value as an RFC 8288 quoted-string (the bridge's types and profiles hold no
/// quote; one that did is escaped).
fn quoted(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// The linkset URL of a landing page: `{repository's public URL}linkset?url={landing}`, the
/// landing URL percent-encoded.
pub(crate) fn linkset_url(public_url: &str, landing: &str) -> String {
    format!(
        "{public_url}linkset?url={}",
        utf8_percent_encode(landing, QUERY_VALUE)
    )
}

impl Linkset {
    /// RFC 9264 §4.2: one context object, its anchor the landing URL exactly, the relations in
    /// the order the Signmap first names them, each target with its type and profile.
    pub(crate) fn to_json(&self) -> String {
        let s = |v: &str| serde_json::to_string(v).expect("a string serializes");
        let mut rels: Vec<&str> = Vec::new();
        for l in &self.links {
            if !rels.contains(&l.rel.as_str()) {
                rels.push(&l.rel);
            }
        }
        let mut out = format!("{{\"linkset\":[{{\"anchor\":{}", s(&self.anchor));
        for rel in rels {
            out.push_str(&format!(",{}:[", s(rel)));
            let targets = self.links.iter().filter(|l| l.rel == rel);
            for (i, l) in targets.enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&format!("{{\"href\":{}", s(&l.href)));
                if let Some(t) = &l.media_type {
                    out.push_str(&format!(",\"type\":{}", s(t)));
                }
                if let Some(p) = &l.profile {
                    out.push_str(&format!(",\"profile\":{}", s(p)));
                }
                out.push('}');
            }
            out.push(']');
        }
        out.push_str("}]}\n");
        out
    }

    /// RFC 9264 §4.1: each link with its anchor, a link a line.
    pub(crate) fn to_text(&self) -> String {
        let anchor = quoted(&link_safe(&self.anchor));
        let lines: Vec<String> = self
            .links
            .iter()
            .map(|l| format!("{}; anchor={anchor}", link_value(l)))
            .collect();
        let mut out = lines.join(",\n");
        out.push('\n');
        out
    }

    /// The Level 1 `Link` header: the page's links of `relations` (`item` only when there are
    /// at most [`MAX_HEADER_ITEMS`]), then the linkset in both formats when `linkset` is named.
    pub(crate) fn header(&self, relations: &[String], linkset: &str) -> String {
        let wanted = |rel: &str| relations.iter().any(|r| r == rel);
        let items = self.links.iter().filter(|l| l.rel == "item").count();
        let mut values: Vec<String> = self
            .links
            .iter()
            .filter(|l| wanted(&l.rel) && (l.rel != "item" || items <= MAX_HEADER_ITEMS))
            .map(link_value)
            .collect();
        if wanted("linkset") {
            for t in [JSON, TEXT] {
                values.push(format!(
                    "<{}>; rel=\"linkset\"; type=\"{t}\"",
                    link_safe(linkset)
                ));
            }
        }
        values.join(", ")
    }
}

fn link_value(l: &Link) -> String {
    let mut v = format!("<{}>; rel={}", link_safe(&l.href), quoted(&l.rel));
    if let Some(t) = &l.media_type {
        v.push_str(&format!("; type={}", quoted(t)));
    }
    if let Some(p) = &l.profile {
        v.push_str(&format!("; profile={}", quoted(p)));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIGNMAP: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
        <urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" \
        xmlns:rs=\"http://www.openarchives.org/rs/terms/\">\n\
        <url><loc>https://repo.example/record/1?a=1&amp;b=2</loc><lastmod>2024-05-01</lastmod>\
        <rs:ln rel=\"describedby\" href=\"https://repo.example/oai?verb=GetRecord&amp;id=1\" \
        type=\"application/xml\" profile=\"http://www.openarchives.org/OAI/2.0/oai_dc/\"/>\
        <rs:ln rel=\"item\" href=\"https://repo.example/files/a,b;c d.pdf\" type=\"application/pdf\"/>\
        <rs:ln rel=\"cite-as\" href=\"https://doi.org/10.1234/1\"/></url>\n\
        <url><loc>https://repo.example/record/2</loc></url>\n</urlset>\n";

    #[test]
    fn a_signmap_entry_is_its_landing_page_and_links() {
        let sets = parse_signmap(SIGNMAP.as_bytes()).unwrap();
        assert_eq!(sets.len(), 2);
        assert_eq!(sets[0].anchor, "https://repo.example/record/1?a=1&b=2");
        assert_eq!(
            sets[0].links[0].href,
            "https://repo.example/oai?verb=GetRecord&id=1"
        );
        assert_eq!(sets[0].links.len(), 3);
        assert!(sets[1].links.is_empty());
    }

    #[test]
    fn the_pack_keeps_each_entry_as_lines_of_tab_separated_fields() {
        let mut records = SignmapRecords::new(SIGNMAP.as_bytes());
        let (anchor, record) = records.next().unwrap().unwrap();
        assert_eq!(anchor, "https://repo.example/record/1?a=1&b=2");
        assert_eq!(
            std::str::from_utf8(record).unwrap(),
            "https://repo.example/record/1?a=1&b=2\n\
             describedby\thttps://repo.example/oai?verb=GetRecord&id=1\tapplication/xml\t\
             http://www.openarchives.org/OAI/2.0/oai_dc/\n\
             item\thttps://repo.example/files/a,b;c d.pdf\tapplication/pdf\t\n\
             cite-as\thttps://doi.org/10.1234/1\t\t\n"
        );
        let (anchor, record) = records.next().unwrap().unwrap();
        assert_eq!(anchor, "https://repo.example/record/2");
        assert_eq!(record, b"https://repo.example/record/2\n");
        assert!(records.next().unwrap().is_none());
    }

    #[test]
    fn a_link_or_entry_the_pack_cannot_keep_is_left_out() {
        let xml = "<urlset xmlns:rs=\"http://www.openarchives.org/rs/terms/\">\
            <url><loc>https://r.example/1</loc>\
            <rs:ln rel=\"item\" href=\"https://r.example/a&#9;b\"/>\
            <rs:ln rel=\"item\"/>\
            <rs:ln href=\"https://r.example/c\"/>\
            <rs:ln rel=\"cite-as\" href=\"https://doi.org/10.1/x\" other=\"ignored\"/></url>\
            <url><loc>https://r.example/&#10;2</loc><rs:ln rel=\"item\" href=\"https://r.example/d\"/></url>\
            <url><rs:ln rel=\"item\" href=\"https://r.example/e\"/></url>\
            <url><loc>https://r.example/3</loc></url></urlset>";
        let sets = parse_signmap(xml.as_bytes()).unwrap();
        let anchors: Vec<&str> = sets.iter().map(|s| s.anchor.as_str()).collect();
        assert_eq!(anchors, ["https://r.example/1", "https://r.example/3"]);
        assert_eq!(sets[0].links.len(), 1, "{:?}", sets[0].links);
        assert_eq!(sets[0].links[0].href, "https://doi.org/10.1/x");
        assert!(sets[1].links.is_empty(), "{:?}", sets[1].links);
    }

    #[test]
    fn the_header_percent_encodes_delimiters_and_cuts_items() {
        let sets = parse_signmap(SIGNMAP.as_bytes()).unwrap();
        let all: Vec<String> = crate::profiles::signmap::HEADER_RELATIONS
            .map(str::to_owned)
            .to_vec();
        let header = sets[0].header(&all, "https://g.example/r/linkset?url=x");
        assert!(header.contains(
            "<https://repo.example/files/a%2Cb%3Bc%20d.pdf>; rel=\"item\"; type=\"application/pdf\""
        ));
        assert_eq!(header.matches("rel=\"linkset\"").count(), 2);
        let mut many = sets[0].clone();
        for i in 0..MAX_HEADER_ITEMS {
            many.links.push(Link {
                rel: "item".into(),
                href: format!("https://repo.example/f/{i}"),
                media_type: None,
                profile: None,
            });
        }
        let header = many.header(&all, "https://g.example/l");
        assert!(!header.contains("rel=\"item\""), "{header}");
        assert!(header.contains("rel=\"cite-as\""));
        let only = many.header(&["cite-as".to_owned()], "https://g.example/l");
        assert_eq!(only, "<https://doi.org/10.1234/1>; rel=\"cite-as\"");
    }
}
