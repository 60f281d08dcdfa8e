//! Patching the published sitemap after an incremental harvest: a refresh that changed K records
//! costs in proportion to K and to the shards holding them, not to the repository.
//!
//! The store lists each record an incremental harvest changes, with the version last published
//! ([`crate::store::Store::dirty`]). From those, [`patch`] knows which URLs leave the sitemap
//! and which come in (with their lastmod), and merges them into the published shards of the
//! ranges they fall in ([`Layout`]): entries that did not change are copied byte for byte,
//! without being parsed beyond their `<loc>`; shards none of whose URLs changed are taken whole.
//! The result is the same bytes a whole render of the store would give with the same layout (a
//! property test holds it to that), so the choice never shows in what is served.
//!
//! A patch is refused ([`Unpatchable`]), and the caller renders in full, whenever it could be
//! wrong: a URL that a changed record now publishes beside an unchanged one (a newly shared
//! URL, whose other claim is not at hand), a shard that is missing or not as recorded, changed
//! limits, scope or file names.

use std::borrow::Cow;
use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::datestamp::Datestamp;
use crate::inventory::Stats;
use crate::render::Shard;
use crate::render::sitemap::{
    Layout, Limits, URLSET_CLOSE, URLSET_OPEN, XML_DECL, render_range, write_url_start,
};

/// One shard of the published sitemap, as recorded at the publish.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublishedShard {
    /// Its number: `sitemap-{number}.{ext}`.
    pub number: u32,
    /// Its length, uncompressed.
    pub len: u64,
    /// URLs in it.
    pub urls: u64,
    /// Its newest lastmod ([`Datestamp::pack`]).
    pub newest: Option<i64>,
}

impl PublishedShard {
    /// The record of a shard as rendered.
    pub fn of(number: u32, shard: &Shard) -> Self {
        Self {
            number,
            len: shard.bytes.len() as u64,
            urls: shard.urls as u64,
            newest: shard.newest.map(Datestamp::pack),
        }
    }
}

/// The sitemap as last published: what a patch starts from. Everything a whole render depends
/// on besides the records is here, so that a patch is made only under the same conditions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublishedSitemap {
    /// Where its files are: the export folder, or the gateway's generation.
    pub place: String,
    /// The shards' extension: `xml` or `xml.gz`.
    pub ext: String,
    /// The scope its URLs were classified with.
    pub scope: String,
    /// The limits its shards were split with.
    pub max_urls: usize,
    /// The byte limit its shards were split with.
    pub max_bytes: usize,
    /// Its shards, in layout order.
    pub shards: Vec<PublishedShard>,
    /// The counts of what it publishes.
    pub stats: Stats,
}

/// Where the previous sitemap's shards are read: the export folder or the generation being
/// served.
pub struct PreviousShards {
    /// Names the place ([`PublishedSitemap::place`]).
    pub place: String,
    /// Reads a shard's plain bytes, given its published name (`sitemap-3.xml.gz`).
    pub read: ReadShard,
}

/// Reads a published shard's plain bytes by its name into the buffer (which it clears first,
/// keeping its capacity); false when the shard cannot be read whole.
pub type ReadShard = Box<dyn Fn(&str, &mut Vec<u8>) -> bool + Send + Sync>;

/// Reads a published shard's file into `buf` (a [`ReadShard`] for a folder of them),
/// uncompressed when its name ends in `.gz`; false when it cannot be read whole.
pub fn read_file(path: &std::path::Path, buf: &mut Vec<u8>) -> bool {
    use std::io::Read;
    buf.clear();
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    let read = if path.extension().is_some_and(|e| e == "gz") {
        flate2::read::GzDecoder::new(std::io::BufReader::new(file)).read_to_end(buf)
    } else {
        let mut file = file;
        file.read_to_end(buf)
    };
    read.is_ok()
}

/// A URL and its lastmod, as read from a shard.
type Item<'a> = (Cow<'a, str>, Option<Datestamp>);

impl std::fmt::Debug for PreviousShards {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreviousShards")
            .field("place", &self.place)
            .finish_non_exhaustive()
    }
}

/// Why the published sitemap cannot be patched; the sitemap is then rendered whole.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct Unpatchable(pub String);

/// `Err` with why a patch cannot be made.
pub(crate) fn refuse<T>(why: impl Into<String>) -> Result<T, Unpatchable> {
    Err(Unpatchable(why.into()))
}

/// What a patch makes of the published sitemap, worked out by [`patch`] before anything is
/// written.
#[derive(Debug)]
pub struct Planned {
    /// The layout after the patch (ranges split where a shard outgrew the limits).
    pub layout: Layout,
    /// URLs in the patched shards.
    pub urls: u64,
    /// Shards rewritten.
    pub rewritten: usize,
    /// Shards taken unchanged.
    pub reused: usize,
}

/// A checked patch of the published sitemap. Its shards are made one at a time as they are
/// written ([`Patch::write`]), in two buffers it reuses: a refresh holds a shard or two of the
/// sitemap, never all of it (fresh memory for every shard was most of a patch's cost).
pub struct Patch {
    shards: Vec<PublishedShard>,
    ext: String,
    layout: Layout,
    limits: Limits,
    removed: Vec<String>,
    added: Vec<(String, Option<Datestamp>)>,
    read: ReadShard,
    /// The CRC-32 of each published shard as the plan read it, in reading order: the write
    /// reads them again and stops at one that changed in between.
    sums: Vec<u32>,
}

/// What a walk does with the checksums of the shards it reads: records them (the plan), or
/// checks each against the next one recorded (the write).
enum Sums<'s> {
    Record(&'s mut Vec<u32>),
    Verify(std::slice::Iter<'s, u32>),
}

impl std::fmt::Debug for Patch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Patch")
            .field("shards", &self.shards.len())
            .field("removed", &self.removed.len())
            .field("added", &self.added.len())
            .finish_non_exhaustive()
    }
}

/// Plans a change to the published sitemap: `removed` are the URLs the changed records
/// published, `added` those they publish now with their lastmod (a URL in both is replaced);
/// `read` gives the published shards. Every shard the change touches is merged once here, to
/// check it and to lay it out, and dropped; [`Patch::write`] makes them again as they are
/// written.
pub fn patch(
    published: &PublishedSitemap,
    layout: &Layout,
    limits: Limits,
    mut removed: Vec<String>,
    mut added: Vec<(String, Option<Datestamp>)>,
    read: ReadShard,
) -> Result<(Patch, Planned), Unpatchable> {
    if layout.ranges.is_empty() {
        return refuse("no layout recorded");
    }
    removed.sort_unstable();
    if removed.windows(2).any(|w| w[0] == w[1]) {
        return refuse("a changed URL was published by two records");
    }
    added.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    if added.windows(2).any(|w| w[0].0 == w[1].0) {
        return refuse("two changed records now publish the same URL");
    }
    let mut patch = Patch {
        shards: published.shards.clone(),
        ext: published.ext.clone(),
        layout: layout.clone(),
        limits,
        removed,
        added,
        read,
        sums: Vec::new(),
    };
    let mut sums = Vec::with_capacity(patch.shards.len());
    let planned = patch.walk(
        &mut |_, _| Ok::<_, Unpatchable>(()),
        Sums::Record(&mut sums),
    )?;
    patch.sums = sums;
    Ok((patch, planned))
}

impl Patch {
    /// Makes the patched shards and gives each to `emit`, in layout order: the shards and
    /// layout that [`patch`] planned. Fails when a published shard changed since.
    pub fn write<E: From<Unpatchable>>(
        &self,
        mut emit: impl FnMut(u32, &Shard) -> Result<(), E>,
    ) -> Result<Planned, E> {
        self.walk(&mut emit, Sums::Verify(self.sums.iter()))
    }

    fn walk<E: From<Unpatchable>>(
        &self,
        emit: &mut dyn FnMut(u32, &Shard) -> Result<(), E>,
        mut sums: Sums<'_>,
    ) -> Result<Planned, E> {
        let (removed, added, layout) = (&self.removed, &self.added, &self.layout);
        let recorded: HashMap<u32, &PublishedShard> =
            self.shards.iter().map(|s| (s.number, s)).collect();
        let mut next_number = layout.ranges.iter().map(|r| r.1).max().unwrap_or(0) + 1;
        let mut planned = Planned {
            layout: Layout::default(),
            urls: 0,
            rewritten: 0,
            reused: 0,
        };
        // The published shard being read, and the one being made.
        let mut old = Vec::new();
        let mut shard = Shard {
            bytes: Vec::new(),
            urls: 0,
            newest: None,
        };
        let (mut r, mut a) = (0, 0);
        for (i, range) in layout.ranges.iter().enumerate() {
            // A range holds the URLs from its start up to the next range's start.
            let end = layout.ranges.get(i + 1).map(|next| next.0.as_str());
            let inside = |url: &str| end.is_none_or(|end| url < end);
            let r_end = r + removed[r..].partition_point(|u| inside(u));
            let a_end = a + added[a..].partition_point(|(u, _)| inside(u));
            let number = range.1;
            let info = recorded.get(&number).copied();
            if let Some(info) = info {
                if !(self.read)(&format!("sitemap-{number}.{}", self.ext), &mut old) {
                    return Err(Unpatchable(format!("shard {number} cannot be read")).into());
                }
                let sum = crc32fast::hash(&old);
                let same = match &mut sums {
                    Sums::Record(sums) => {
                        sums.push(sum);
                        true
                    }
                    Sums::Verify(sums) => sums.next() == Some(&sum),
                };
                if old.len() as u64 != info.len || !same {
                    return Err(
                        Unpatchable(format!("shard {number} is not as it was published")).into(),
                    );
                }
            }
            if r == r_end && a == a_end {
                planned.layout.ranges.push(range.clone());
                if let Some(info) = info {
                    planned.reused += 1;
                    planned.urls += info.urls;
                    std::mem::swap(&mut shard.bytes, &mut old);
                    shard.urls = info.urls as usize;
                    shard.newest = info.newest.map(Datestamp::unpack);
                    emit(number, &shard)?;
                    std::mem::swap(&mut shard.bytes, &mut old);
                }
                continue;
            }
            merge(
                number,
                info.map(|info| (info, old.as_slice())),
                &removed[r..r_end],
                &added[a..a_end],
                &mut shard,
            )?;
            (r, a) = (r_end, a_end);
            planned.rewritten += 1;
            if fits(&shard, self.limits) {
                planned.layout.ranges.push(range.clone());
                if shard.urls > 0 {
                    planned.urls += shard.urls as u64;
                    emit(number, &shard)?;
                }
            } else {
                // Outgrown: split as a whole render splits a range.
                let entries = entries_of(number, &shard.bytes)?;
                let items: Vec<(&str, Option<Datestamp>)> =
                    entries.iter().map(|(u, d)| (u.as_ref(), *d)).collect();
                render_range(
                    range.clone(),
                    &items,
                    self.limits,
                    &mut planned.layout,
                    &mut next_number,
                    &mut |n, s| {
                        planned.urls += s.urls as u64;
                        emit(n, &s)
                    },
                )?;
            }
        }
        Ok(planned)
    }
}

/// Whether a whole render would keep these entries in one shard ([`render_range`]'s splitter:
/// at most `max_urls`, and within `max_bytes` unless it is a single entry).
fn fits(shard: &Shard, limits: Limits) -> bool {
    let frame = XML_DECL.len() + URLSET_OPEN.len() + URLSET_CLOSE.len();
    shard.urls <= limits.max_urls
        && (shard.urls <= 1 || shard.bytes.len() <= limits.max_bytes.max(frame))
}

/// Merges the changes of one range into its published shard (`old`, with its record).
fn merge(
    number: u32,
    old: Option<(&PublishedShard, &[u8])>,
    removed: &[String],
    added: &[(String, Option<Datestamp>)],
    shard: &mut Shard,
) -> Result<(), Unpatchable> {
    let body = match old {
        Some((_, bytes)) => body_of(number, bytes)?,
        None => &[][..],
    };
    shard.bytes.clear();
    shard.bytes.reserve(body.len() + added.len() * 160 + 128);
    shard.urls = 0;
    shard.newest = old.and_then(|(info, _)| info.newest.map(Datestamp::unpack));
    shard.bytes.extend_from_slice(XML_DECL.as_bytes());
    shard.bytes.extend_from_slice(URLSET_OPEN.as_bytes());
    let mut date = String::with_capacity(32);
    let mut write_added = |shard: &mut Shard, (url, lastmod): &(String, Option<Datestamp>)| {
        write_url_start(&mut shard.bytes, url, *lastmod, &mut date);
        shard.bytes.extend_from_slice(b"</url>\n");
        shard.urls += 1;
        shard.newest = shard.newest.max(*lastmod);
    };
    let mut adds = added.iter().peekable();
    let mut removes = removed.iter().peekable();
    // The newest lastmod must be found again when an entry holding it leaves.
    let old_newest = shard.newest;
    let mut recount = false;
    for entry in Entries::new(number, body) {
        let entry = entry?;
        let url = entry.url()?;
        while let Some(add) = adds.next_if(|(u, _)| u.as_str() < url.as_ref()) {
            write_added(shard, add);
        }
        if let Some(missing) = removes.next_if(|u| u.as_str() < url.as_ref()) {
            return refuse(format!("{missing} is not in shard {number}"));
        }
        let leaves = removes.next_if(|u| u.as_str() == url.as_ref()).is_some();
        match adds.next_if(|(u, _)| u.as_str() == url.as_ref()) {
            Some(_) if !leaves => {
                return refuse(format!("{url} is now published by two records"));
            }
            Some(add) => write_added(shard, add),
            None if !leaves => {
                shard.bytes.extend_from_slice(entry.bytes);
                shard.urls += 1;
                continue;
            }
            None => {}
        }
        if old_newest.is_some() && entry.lastmod()? == old_newest {
            recount = true;
        }
    }
    for add in adds {
        write_added(shard, add);
    }
    if let Some(missing) = removes.next() {
        return refuse(format!("{missing} is not in shard {number}"));
    }
    if recount {
        let frame = XML_DECL.len() + URLSET_OPEN.len();
        shard.newest = None;
        for entry in Entries::new(number, &shard.bytes[frame..]) {
            shard.newest = shard.newest.max(entry?.lastmod()?);
        }
    }
    shard.bytes.extend_from_slice(URLSET_CLOSE.as_bytes());
    Ok(())
}

/// The entries of a shard, between its frame.
fn body_of(number: u32, bytes: &[u8]) -> Result<&[u8], Unpatchable> {
    bytes
        .strip_prefix(XML_DECL.as_bytes())
        .and_then(|b| b.strip_prefix(URLSET_OPEN.as_bytes()))
        .and_then(|b| b.strip_suffix(URLSET_CLOSE.as_bytes()))
        .ok_or_else(|| Unpatchable(format!("shard {number} is not as the bridge writes them")))
}

/// Every entry of a whole shard as `(url, lastmod)`.
fn entries_of(number: u32, bytes: &[u8]) -> Result<Vec<Item<'_>>, Unpatchable> {
    Entries::new(number, body_of(number, bytes)?)
        .map(|entry| {
            let entry = entry?;
            Ok((entry.url()?, entry.lastmod()?))
        })
        .collect()
}

/// One `<url>` entry as [`crate::render::sitemap::render_shards`] writes it.
struct Entry<'a> {
    number: u32,
    /// The whole entry, its newline included.
    bytes: &'a [u8],
    /// The `<loc>` text, escaped.
    loc: &'a [u8],
    /// The `<lastmod>` text.
    lastmod: Option<&'a [u8]>,
}

impl<'a> Entry<'a> {
    fn url(&self) -> Result<Cow<'a, str>, Unpatchable> {
        let loc = std::str::from_utf8(self.loc).map_err(|_| self.damaged())?;
        if loc.contains('&') {
            quick_xml::escape::unescape(loc).map_err(|_| self.damaged())
        } else {
            Ok(Cow::Borrowed(loc))
        }
    }

    fn lastmod(&self) -> Result<Option<Datestamp>, Unpatchable> {
        self.lastmod
            .map(|text| {
                std::str::from_utf8(text)
                    .ok()
                    .and_then(Datestamp::parse)
                    .ok_or_else(|| self.damaged())
            })
            .transpose()
    }

    fn damaged(&self) -> Unpatchable {
        Unpatchable(format!(
            "shard {} holds an entry the bridge does not write: {}",
            self.number,
            String::from_utf8_lossy(&self.bytes[..self.bytes.len().min(200)])
        ))
    }
}

/// Reads entries one after another; hand-written because the shape is fixed (the bridge wrote
/// it) and only `<loc>` is needed of most entries: an XML parser would cost more than the rest
/// of a patch.
struct Entries<'a> {
    number: u32,
    rest: &'a [u8],
}

impl<'a> Entries<'a> {
    fn new(number: u32, body: &'a [u8]) -> Self {
        Self { number, rest: body }
    }

    fn read(&self) -> Option<(Entry<'a>, &'a [u8])> {
        const OPEN: &[u8] = b"<url><loc>";
        const LOC_CLOSE: &[u8] = b"</loc>";
        const LASTMOD_OPEN: &[u8] = b"<lastmod>";
        const LASTMOD_CLOSE: &[u8] = b"</lastmod>";
        const CLOSE: &[u8] = b"</url>\n";
        let all = self.rest;
        let after_open = all.strip_prefix(OPEN)?;
        let loc_len = memchr::memchr(b'<', after_open)?;
        let loc = &after_open[..loc_len];
        let mut rest = after_open[loc_len..].strip_prefix(LOC_CLOSE)?;
        let mut lastmod = None;
        if let Some(after) = rest.strip_prefix(LASTMOD_OPEN) {
            let len = memchr::memchr(b'<', after)?;
            lastmod = Some(&after[..len]);
            rest = after[len..].strip_prefix(LASTMOD_CLOSE)?;
        }
        let rest = rest.strip_prefix(CLOSE)?;
        let len = all.len() - rest.len();
        Some((
            Entry {
                number: self.number,
                bytes: &all[..len],
                loc,
                lastmod,
            },
            rest,
        ))
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = Result<Entry<'a>, Unpatchable>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        match self.read() {
            Some((entry, rest)) => {
                self.rest = rest;
                Some(Ok(entry))
            }
            None => {
                let start = &self.rest[..self.rest.len().min(200)];
                self.rest = &[];
                Some(refuse(format!(
                    "shard {} holds an entry the bridge does not write: {}",
                    self.number,
                    String::from_utf8_lossy(start)
                )))
            }
        }
    }
}
