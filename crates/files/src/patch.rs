//! Patching the published sitemap after an incremental harvest: a refresh that changed K records
//! costs in proportion to K and to the shards holding them, not to the repository.
//!
//! The store lists each record an incremental harvest changes, with the version last published
//! (the store crate's `Store::dirty`). From those, [`patch`] knows which URLs leave the sitemap
//! and which come in (with their lastmod), and merges them into the published shards of the
//! ranges they fall in ([`Layout`]): only the entries around a change are read, the runs of
//! entries between are copied byte for byte, and shards none of whose URLs changed are taken
//! whole.
//! The result is the same bytes a whole render of the store would give with the same layout (a
//! property test holds it to that), so the choice never shows in what is served.
//!
//! A patch is refused ([`Unpatchable`]), and the caller renders in full, whenever it could be
//! wrong: a URL that a changed record now publishes beside an unchanged one (a newly shared
//! URL, whose other claim is not at hand), a shard that is missing or not as recorded, changed
//! limits, scope or file names. What only the shards can tell is found while they are written;
//! the caller then renders into a fresh place (the `oai-bridge` package's `incremental::render`).

use std::borrow::Cow;
use std::collections::HashMap;

use oai_pmh::Datestamp;

pub use crate::disk::read::PublishedFile;
use crate::published::{PublishedShard, PublishedSitemap};
use crate::sitemap::{
    Layout, Limits, URLSET_CLOSE, URLSET_OPEN, XML_DECL, render_range, write_url,
};
use crate::{FilesError, Shard};

/// Where the previous sitemap's shards are read: the export folder or the generation being
/// served.
pub struct PreviousShards {
    /// Names the place ([`PublishedSitemap::place`]).
    pub place: String,
    /// Reads a shard's plain bytes, given its published name (`sitemap-3.xml.gz`).
    pub read: ReadShard,
}

/// Finds a published file by its name (`sitemap-3.xml.gz`, `signmap-2.xml`): where its plain
/// bytes are read from, `None` when there is no such file. A patch reads a shard whole
/// ([`PublishedFile::read`]), the profiles' files a window at a time
/// ([`Windows`](crate::disk::read::Windows)).
pub type ReadShard = Box<dyn Fn(&str) -> Option<PublishedFile> + Send + Sync>;

/// A URL and its lastmod, as read from a shard.
type Item<'a> = (Cow<'a, str>, Option<Datestamp>);

impl std::fmt::Debug for PreviousShards {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreviousShards")
            .field("place", &self.place)
            .finish_non_exhaustive()
    }
}

/// Why the published sitemap cannot be patched: not a failure, an outcome; the sitemap is then
/// rendered whole. Met while the shards are written, it ends the writing as
/// [`FilesError::Patch`].
#[derive(Debug, PartialEq, Eq)]
pub struct Unpatchable(pub String);

impl std::fmt::Display for Unpatchable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<Unpatchable> for FilesError {
    fn from(why: Unpatchable) -> Self {
        FilesError::Patch(why.0)
    }
}

/// `Err` with why a patch cannot be made.
///
/// # Errors
///
/// Always: that is what it is for.
pub fn refuse<T>(why: impl Into<String>) -> Result<T, Unpatchable> {
    Err(Unpatchable(why.into()))
}

/// What a patch made of the published sitemap ([`Patch::write`]).
#[derive(Debug)]
pub struct Patched {
    /// The layout after the patch (ranges split where a shard outgrew the limits).
    pub layout: Layout,
    /// URLs in the patched shards.
    pub urls: u64,
    /// Shards rewritten.
    pub rewritten: usize,
    /// Shards taken unchanged.
    pub reused: usize,
}

/// A patch of the published sitemap, checked as far as it can be without reading a shard. Its
/// shards are read and made one at a time as they are written ([`Patch::write`]), in two
/// buffers it reuses: a refresh holds a shard or two of the sitemap, never all of it. Whatever
/// the shards themselves refuse (one edited since the publish, a URL a changed record now
/// shares with an unchanged one) fails the writing with [`Unpatchable`]; the caller then renders
/// every record into a fresh place (the `oai-bridge` package's `incremental::render`).
pub struct Patch {
    shards: Vec<PublishedShard>,
    ext: String,
    layout: Layout,
    limits: Limits,
    removed: Vec<String>,
    added: Vec<(String, Option<Datestamp>)>,
    read: ReadShard,
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

/// A patch of the published sitemap: `removed` are the URLs the changed records published,
/// `added` those they publish now with their lastmod (a URL in both is replaced); `read` gives
/// the published shards, which are read only when the patch is written.
///
/// # Errors
///
/// When the published sitemap cannot be patched ([`Unpatchable`]): no layout or no checksums
/// recorded for it, or a changed URL that two records give.
pub fn patch(
    published: &PublishedSitemap,
    layout: &Layout,
    limits: Limits,
    mut removed: Vec<String>,
    mut added: Vec<(String, Option<Datestamp>)>,
    read: ReadShard,
) -> Result<Patch, Unpatchable> {
    if layout.ranges.is_empty() {
        return refuse("no layout recorded");
    }
    if published.shards.iter().any(|s| s.crc.is_none()) {
        return refuse("the published shards have no checksums recorded");
    }
    removed.sort_unstable();
    if removed.windows(2).any(|w| w[0] == w[1]) {
        return refuse("a changed URL was published by two records");
    }
    added.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    if added.windows(2).any(|w| w[0].0 == w[1].0) {
        return refuse("two changed records now publish the same URL");
    }
    Ok(Patch {
        shards: published.shards.clone(),
        ext: published.ext.clone(),
        layout: layout.clone(),
        limits,
        removed,
        added,
        read,
    })
}

impl Patch {
    /// The URLs the patch puts into the sitemap, in order.
    pub fn added(&self) -> impl Iterator<Item = &str> {
        self.added.iter().map(|(url, _)| url.as_str())
    }

    /// Makes the patched shards and gives each to `emit`, in layout order. Fails, having
    /// emitted some, when a published shard is not as it was published or does not hold what
    /// the change expects.
    ///
    /// # Errors
    ///
    /// What `emit` fails with; or when a published shard read back is not as it was published, or
    /// does not hold what the change expects ([`Unpatchable`]).
    pub fn write<E: From<Unpatchable>>(
        &self,
        mut emit: impl FnMut(u32, &Shard) -> Result<(), E>,
    ) -> Result<Patched, E> {
        let (removed, added, layout) = (&self.removed, &self.added, &self.layout);
        let recorded: HashMap<u32, &PublishedShard> =
            self.shards.iter().map(|s| (s.number, s)).collect();
        let mut next_number = layout.ranges.iter().map(|r| r.1).max().unwrap_or(0) + 1;
        let mut patched = Patched {
            layout: Layout::default(),
            urls: 0,
            rewritten: 0,
            reused: 0,
        };
        // The published shard being read (from `at` on), and the one being made.
        let (mut old, mut at) = (Vec::new(), 0);
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
                at = self.read_published(info, &mut old)?;
            }
            if r == r_end && a == a_end {
                patched.layout.ranges.push(range.clone());
                if let Some(info) = info {
                    patched.reused += 1;
                    patched.urls += info.urls;
                    emit_unchanged(info, &mut old, at, &mut shard, &mut emit)?;
                }
                continue;
            }
            merge(
                number,
                info.map(|info| (info, &old[at..])),
                &removed[r..r_end],
                &added[a..a_end],
                &mut shard,
            )?;
            (r, a) = (r_end, a_end);
            patched.rewritten += 1;
            self.emit_merged(range, &shard, &mut patched, &mut next_number, &mut emit)?;
        }
        Ok(patched)
    }

    /// Reads the published shard `info` into `buf` and checks that it is byte for byte the
    /// one published; returns where its bytes start in `buf`.
    fn read_published(
        &self,
        info: &PublishedShard,
        buf: &mut Vec<u8>,
    ) -> Result<usize, Unpatchable> {
        let number = info.number;
        let name = format!("sitemap-{number}.{}", self.ext);
        let Some(start) = (self.read)(&name).and_then(|file| file.read(buf)) else {
            return Err(Unpatchable(format!("shard {number} cannot be read")));
        };
        let old = &buf[start..];
        if old.len() as u64 != info.len || info.crc != Some(crc32fast::hash(old)) {
            return Err(Unpatchable(format!(
                "shard {number} is not as it was published"
            )));
        }
        Ok(start)
    }

    /// Gives `emit` the merged `shard` of `range` as its number, or, when it outgrew the
    /// limits, the shards a whole render splits it into (numbered from `next_number` on).
    fn emit_merged<E: From<Unpatchable>>(
        &self,
        range: &(String, u32),
        shard: &Shard,
        patched: &mut Patched,
        next_number: &mut u32,
        emit: &mut impl FnMut(u32, &Shard) -> Result<(), E>,
    ) -> Result<(), E> {
        if fits(shard, self.limits) {
            patched.layout.ranges.push(range.clone());
            if shard.urls > 0 {
                patched.urls += shard.urls as u64;
                emit(range.1, shard)?;
            }
        } else {
            // Outgrown: split as a whole render splits a range.
            let entries = entries_of(range.1, &shard.bytes)?;
            let items: Vec<(&str, Option<Datestamp>)> =
                entries.iter().map(|(u, d)| (u.as_ref(), *d)).collect();
            render_range(
                range.clone(),
                &items,
                self.limits,
                &mut patched.layout,
                next_number,
                &mut |n, s| {
                    patched.urls += s.urls as u64;
                    emit(n, s)
                },
            )?;
        }
        Ok(())
    }
}

/// Gives `emit` the published shard `info`, none of whose URLs changed, as it stands: its bytes
/// are `old` from `at` on, lent to `shard` for the call, not copied.
fn emit_unchanged<E>(
    info: &PublishedShard,
    old: &mut Vec<u8>,
    at: usize,
    shard: &mut Shard,
    emit: &mut impl FnMut(u32, &Shard) -> Result<(), E>,
) -> Result<(), E> {
    old.drain(..at);
    std::mem::swap(&mut shard.bytes, old);
    shard.urls = info.urls as usize;
    shard.newest = info.newest.map(Datestamp::unpack);
    emit(info.number, shard)?;
    std::mem::swap(&mut shard.bytes, old);
    Ok(())
}

/// Whether a whole render would keep these entries in one shard ([`render_range`]'s splitter:
/// at most `max_urls`, and within `max_bytes` unless it is a single entry).
fn fits(shard: &Shard, limits: Limits) -> bool {
    let frame = XML_DECL.len() + URLSET_OPEN.len() + URLSET_CLOSE.len();
    shard.urls <= limits.max_urls
        && (shard.urls <= 1 || shard.bytes.len() <= limits.max_bytes.max(frame))
}

/// Merges the changes of one range into its published shard (`old`, with its record). Only the
/// entries around a change are read ([`seek`]); the runs between are copied whole.
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
    shard.urls = old.map_or(0, |(info, _)| info.urls as usize);
    shard.newest = old.and_then(|(info, _)| info.newest.map(Datestamp::unpack));
    shard.bytes.extend_from_slice(XML_DECL.as_bytes());
    shard.bytes.extend_from_slice(URLSET_OPEN.as_bytes());
    let mut date = String::with_capacity(32);
    let mut adds = added.iter().peekable();
    let mut removes = removed.iter().peekable();
    // The newest lastmod must be found again when an entry holding it leaves.
    let old_newest = shard.newest;
    let mut recount = false;
    // Where the body is copied from next: always an entry's start.
    let mut at = 0;
    loop {
        let url = match (removes.peek(), adds.peek()) {
            (None, None) => break,
            (Some(u), None) => u.as_str(),
            (None, Some((u, _))) => u.as_str(),
            (Some(r), Some((a, _))) => r.as_str().min(a.as_str()),
        };
        let found = seek(number, body, at, url)?;
        shard.bytes.extend_from_slice(&body[at..found]);
        at = found;
        let here = Entries::new(number, &body[found..])
            .next()
            .transpose()?
            .map(|entry| Ok::<_, Unpatchable>((entry.url()? == url, entry)))
            .transpose()?
            .filter(|(same, _)| *same)
            .map(|(_, entry)| entry);
        let leaves = removes.next_if(|u| u.as_str() == url).is_some();
        match (&here, leaves) {
            (None, true) => return refuse(format!("{url} is not in shard {number}")),
            (Some(_), false) => return refuse(format!("{url} is now published by two records")),
            (Some(entry), true) => {
                at += entry.bytes.len();
                shard.urls -= 1;
                recount |= old_newest.is_some() && entry.lastmod()? == old_newest;
            }
            (None, false) => {}
        }
        if let Some((url, lastmod)) = adds.next_if(|(u, _)| u.as_str() == url) {
            write_url(&mut shard.bytes, url, *lastmod, &mut date);
            shard.urls += 1;
            shard.newest = shard.newest.max(*lastmod);
        }
    }
    shard.bytes.extend_from_slice(&body[at..]);
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

/// The first entry of `body` from `from` (an entry's start) on whose URL is not below `url`:
/// its start, or the end of the body. Entries are in URL order, so this gallops ahead in
/// growing steps and then halves the gap: a few entries are read, not every one between two
/// changes.
fn seek(number: u32, body: &[u8], from: usize, url: &str) -> Result<usize, Unpatchable> {
    let below = |start: usize| -> Result<bool, Unpatchable> {
        match Entries::new(number, &body[start..]).next() {
            Some(entry) => Ok(entry?.url()?.as_ref() < url),
            None => Ok(false),
        }
    };
    // Every entry starting before `lo` is below `url`; the one at `hi` (or the end) is not.
    let mut lo = from;
    let mut step = 4096;
    let mut hi = loop {
        let probe = entry_start(body, lo + step);
        if probe >= body.len() || !below(probe)? {
            break probe;
        }
        lo = entry_start(body, probe + 1);
        step *= 2;
    };
    while lo < hi {
        let mid = entry_start(body, lo + (hi - lo) / 2);
        // No entry starts between the middle and `hi`: the one at `lo` decides.
        let probe = if mid >= hi { lo } else { mid };
        if below(probe)? {
            lo = entry_start(body, probe + 1);
        } else {
            hi = probe;
        }
    }
    Ok(lo)
}

/// The first entry start at or after `at` (the start of the body, or just after a newline:
/// an entry ends with one and holds no other), or the body's length.
fn entry_start(body: &[u8], at: usize) -> usize {
    if at == 0 {
        return 0;
    }
    if at >= body.len() {
        return body.len();
    }
    memchr::memchr(b'\n', &body[at - 1..]).map_or(body.len(), |i| at + i)
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

/// One `<url>` entry as [`crate::sitemap::render_shards`] writes it.
pub(crate) struct Entry<'a> {
    number: u32,
    /// The whole entry, its newline included.
    pub(crate) bytes: &'a [u8],
    /// The `<loc>` text, escaped.
    loc: &'a [u8],
    /// The `<lastmod>` text.
    lastmod: Option<&'a [u8]>,
}

impl<'a> Entry<'a> {
    pub(crate) fn url(&self) -> Result<Cow<'a, str>, Unpatchable> {
        let loc = std::str::from_utf8(self.loc).map_err(|_| self.damaged())?;
        if memchr::memchr(b'&', self.loc).is_some() {
            quick_xml::escape::unescape(loc).map_err(|_| self.damaged())
        } else {
            Ok(Cow::Borrowed(loc))
        }
    }

    /// [`Entry::url`] as bytes, which order URLs as their text does, not checked for UTF-8
    /// unless it holds an escape: for a file whose hash is checked once it is read, where
    /// checking each URL took 1.7% of a patch's instructions.
    pub(crate) fn url_bytes(&self) -> Result<Cow<'a, [u8]>, Unpatchable> {
        match memchr::memchr(b'&', self.loc) {
            None => Ok(Cow::Borrowed(self.loc)),
            Some(_) => Ok(Cow::Owned(self.url()?.into_owned().into_bytes())),
        }
    }

    pub(crate) fn lastmod(&self) -> Result<Option<Datestamp>, Unpatchable> {
        self.lastmod
            .map(|text| Datestamp::parse_bytes(text).ok_or_else(|| self.damaged()))
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
pub(crate) struct Entries<'a> {
    number: u32,
    rest: &'a [u8],
}

impl<'a> Entries<'a> {
    pub(crate) fn new(number: u32, body: &'a [u8]) -> Self {
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// A shard body of `urls` (sorted) as the bridge writes it, with each entry's start.
    fn body(urls: &[String]) -> (Vec<u8>, Vec<usize>) {
        let (mut bytes, mut starts, mut date) = (Vec::new(), Vec::new(), String::new());
        for (i, url) in urls.iter().enumerate() {
            starts.push(bytes.len());
            let lastmod = (i % 3 > 0).then(|| Datestamp::parse("2024-05-06").unwrap());
            write_url(&mut bytes, url, lastmod, &mut date);
        }
        (bytes, starts)
    }

    proptest! {
        /// Galloping and halving find what reading every entry finds, from any entry on, for
        /// URLs in the shard and between its URLs (escaped ones too).
        #[test]
        fn seek_finds_the_first_entry_not_below_a_url(
            mut paths in prop::collection::btree_set("[a-c&']{0,6}|[a-z]{30,200}", 0..300),
            probes in prop::collection::vec("[a-c&']{0,7}|[a-z]{1,40}", 1..40),
            from in any::<prop::sample::Index>(),
        ) {
            let urls: Vec<String> =
                std::mem::take(&mut paths).into_iter().map(|p| format!("https://r.example/{p}")).collect();
            let (bytes, starts) = body(&urls);
            let first = if urls.is_empty() { 0 } else { from.index(urls.len()) };
            let from = starts.get(first).copied().unwrap_or(bytes.len());
            for probe in probes {
                let probe = format!("https://r.example/{probe}");
                let expected = (first..urls.len())
                    .find(|&i| urls[i] >= probe)
                    .map_or(bytes.len(), |i| starts[i]);
                prop_assert_eq!(seek(1, &bytes, from, &probe).unwrap(), expected, "{}", probe);
            }
        }
    }
}
