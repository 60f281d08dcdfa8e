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
    let mut record = Vec::new();
    for &(name, last_modified) in shards {
        let path = dir.join(name);
        let bytes = fs::read(&path)?;
        let last_modified = last_modified
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        for linkset in parse_signmap(&bytes)
            .map_err(|e| io::Error::other(format!("{}: {e}", path.display())))?
        {
            record.clear();
            encode(&linkset, &mut record);
            pack.write_all(&record)?;
            // A landing URL that two entries carry is found at its first: the sort keeps
            // equal keys in order.
            sorter.push(Entry {
                key: key(&linkset.anchor),
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

/// A Signmap's entries as linksets: `<loc>` and the `rs:ln` links of each `<url>`. A value
/// holding a tab or a line break (which no URL the bridge writes does) leaves its link or entry
/// out, as the pack could not keep it.
pub(crate) fn parse_signmap(xml: &[u8]) -> Result<Vec<Linkset>, quick_xml::Error> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_reader(xml);
    let mut out = Vec::new();
    let mut current: Option<Linkset> = None;
    let mut in_loc = false;
    let mut buf = Vec::new();
    loop {
        match reader.read_event_into(&mut buf)? {
            Event::Start(e) if e.name().as_ref() == "url" => {
                current = Some(Linkset {
                    anchor: String::new(),
                    links: Vec::new(),
                });
            }
            Event::Start(e) if e.name().as_ref() == "loc" => in_loc = true,
            Event::End(e) if e.name().as_ref() == "loc" => in_loc = false,
            Event::Text(t) if in_loc => {
                if let Some(c) = current.as_mut() {
                    c.anchor.push_str(&t);
                }
            }
            Event::GeneralRef(r) if in_loc => {
                if let (Some(c), Some(ch)) = (current.as_mut(), resolve(&r)) {
                    c.anchor.push_str(&ch);
                }
            }
            Event::Empty(e) | Event::Start(e) if e.name().as_ref() == "rs:ln" => {
                let Some(c) = current.as_mut() else { continue };
                let mut link = Link {
                    rel: String::new(),
                    href: String::new(),
                    media_type: None,
                    profile: None,
                };
                for a in e.attributes() {
                    let a = a.map_err(quick_xml::Error::from)?;
                    let value = a
                        .normalized_value(quick_xml::XmlVersion::Implicit1_0)?
                        .into_owned();
                    match a.key.as_ref() {
                        "rel" => link.rel = value,
                        "href" => link.href = value,
                        "type" => link.media_type = Some(value),
                        "profile" => link.profile = Some(value),
                        _ => {}
                    }
                }
                let clean_fields = [&link.rel, &link.href]
                    .into_iter()
                    .chain(link.media_type.as_ref())
                    .chain(link.profile.as_ref())
                    .all(|v| clean(v));
                if !link.rel.is_empty() && !link.href.is_empty() && clean_fields {
                    c.links.push(link);
                }
            }
            Event::End(e) if e.name().as_ref() == "url" => {
                if let Some(c) = current.take()
                    && !c.anchor.is_empty()
                    && clean(&c.anchor)
                {
                    out.push(c);
                }
            }
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    Ok(out)
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

fn encode(linkset: &Linkset, out: &mut Vec<u8>) {
    out.extend_from_slice(linkset.anchor.as_bytes());
    out.push(b'\n');
    for l in &linkset.links {
        for (i, field) in [
            l.rel.as_str(),
            &l.href,
            l.media_type.as_deref().unwrap_or(""),
            l.profile.as_deref().unwrap_or(""),
        ]
        .into_iter()
        .enumerate()
        {
            if i > 0 {
                out.push(b'\t');
            }
            out.extend_from_slice(field.as_bytes());
        }
        out.push(b'\n');
    }
}

/// A record of the pack, as [`encode`] wrote it; `None` when it is not one.
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
        let mut bytes = Vec::new();
        encode(&sets[0], &mut bytes);
        assert_eq!(decode_record(&bytes).as_ref(), Some(&sets[0]));
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
