//! Sitemap shards (`urlset`) split on both limits, counted on the bytes actually written, and the
//! sitemap index that lists them (SM-01..SM-17).

use std::borrow::Cow;

use oai_pmh::Datestamp;

use crate::FilesError;

/// Most URLs one sitemap may hold, and most sitemaps one index may list (SM-09, SM-10).
pub const MAX_URLS: usize = 50_000;
/// Most bytes one sitemap or index may have, uncompressed (SM-09).
pub const MAX_BYTES: usize = 52_428_800;
/// Smallest byte limit accepted: a shard must fit its frame and one longest possible entry
/// (a 2,047-character URL whose every character needs escaping).
pub const MIN_BYTES: usize = 16 * 1024;

/// Written first in every file, at byte 0 (SM-02).
pub const XML_DECL: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
/// Opens a plain sitemap's `<urlset>` (the profiles open theirs with their own namespaces).
pub const URLSET_OPEN: &str = "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n";
/// Closes every `<urlset>`.
pub const URLSET_CLOSE: &str = "</urlset>\n";
const INDEX_OPEN: &str = "<sitemapindex xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n";
const INDEX_CLOSE: &str = "</sitemapindex>\n";

/// Per-shard limits; both may be set lower than the protocol's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// URLs per shard, 1..=50,000.
    pub max_urls: usize,
    /// Bytes per shard, uncompressed, [`MIN_BYTES`]..=52,428,800.
    pub max_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_urls: MAX_URLS,
            max_bytes: MAX_BYTES,
        }
    }
}

impl Limits {
    /// Checks the limits against the protocol's and the smallest workable size.
    ///
    /// # Errors
    ///
    /// A sentence naming the limit out of its bounds: `max_urls` from 1 to [`MAX_URLS`],
    /// `max_bytes` from [`MIN_BYTES`] to [`MAX_BYTES`].
    pub fn validate(self) -> Result<Self, String> {
        if !(1..=MAX_URLS).contains(&self.max_urls) {
            return Err(format!(
                "max_urls must be between 1 and {MAX_URLS}, not {}",
                self.max_urls
            ));
        }
        if !(MIN_BYTES..=MAX_BYTES).contains(&self.max_bytes) {
            return Err(format!(
                "max_bytes must be between {MIN_BYTES} and {MAX_BYTES}, not {}",
                self.max_bytes
            ));
        }
        Ok(self)
    }

    /// Whether the entry just written takes a shard past the limits, so that it starts the
    /// next shard instead: `urls` entries were there before it, `bytes` is the shard's length
    /// with it (without the close tag), `frame` the length of a shard without entries. A shard
    /// always takes its first entry.
    pub fn overflows(self, urls: usize, bytes: usize, frame: usize) -> bool {
        urls > 0
            && (urls == self.max_urls || bytes + URLSET_CLOSE.len() > self.max_bytes.max(frame))
    }
}

/// The length of a `urlset` shard whose root start tag is `open`, with no entry.
pub fn frame(open: &str) -> usize {
    header(open) + URLSET_CLOSE.len()
}

/// Where the first entry of a `urlset` shard whose root start tag is `open` starts.
pub fn header(open: &str) -> usize {
    XML_DECL.len() + open.len()
}

/// One finished sitemap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shard {
    /// The whole file, uncompressed.
    pub bytes: Vec<u8>,
    /// URLs in it.
    pub urls: usize,
    /// The newest lastmod in it: the index's `lastmod` for this shard.
    pub newest: Option<Datestamp>,
}

/// Escapes `& ' " < >` in a value (SM-03), and a carriage return (which XML would otherwise
/// read as a line feed).
pub fn escape(value: &str) -> Cow<'_, str> {
    if !needs_escape(value) {
        return Cow::Borrowed(value);
    }
    let mut out = Vec::with_capacity(value.len() + 16);
    write_escaped(&mut out, value);
    Cow::Owned(String::from_utf8(out).expect("escaping keeps UTF-8 whole"))
}

/// Whether `value` holds one of the characters [`escape`] escapes.
fn needs_escape(value: &str) -> bool {
    // quick-xml tests the value a byte at a time; most values (URLs, titles) hold none of the
    // six. Short ones (media types, type URLs, most URLs) are told eight bytes at a time
    // ([`any_special`]); longer ones (titles, teasers) by two `memchr3` searches, whose
    // vectors pay for setting them up there (a tenth of rendering the Signmap and OCX shards
    // was spent here before either).
    let bytes = value.as_bytes();
    if bytes.len() < 64 {
        return any_special(bytes);
    }
    memchr::memchr3(b'<', b'>', b'&', bytes).is_some()
        || memchr::memchr3(b'\'', b'"', b'\r', bytes).is_some()
}

/// The test of [`needs_escape`] for short values, on eight bytes at a time held in a `u64`
/// (the last eight overlapping those before them; fewer than eight padded with zeros, which
/// are not special). Written by hand because what the crates offer does not fit values this
/// short: `memchr` searches for at most three bytes and its vectors cost more to set up than
/// these values take to read, and a byte-wise fold, which the compiler vectorises 64 bytes at a
/// time, reads all of a value shorter than that a byte at a time (a tenth of writing a
/// Signmap and OCX entry was spent so; eight bytes at a time took 5% off it, in the
/// `signmap_ocx_entries_500` bench).
fn any_special(bytes: &[u8]) -> bool {
    let word = |chunk: &[u8]| u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
    if bytes.len() < 8 {
        let mut padded = [0u8; 8];
        padded[..bytes.len()].copy_from_slice(bytes);
        return special_in(u64::from_le_bytes(padded));
    }
    let chunks = bytes.chunks_exact(8);
    let last = word(&bytes[bytes.len() - 8..]);
    chunks.fold(special_in(last), |found, chunk| {
        found | special_in(word(chunk))
    })
}

/// Whether one of the eight bytes in `x` is `< > & ' "` or a carriage return.
fn special_in(x: u64) -> bool {
    specials(x) != 0
}

/// The bytes of `x` that are `< > & ' "` or a carriage return, as the high bit of each, exact
/// for the lowest (the first in the text); above it a byte may be marked that is not special.
/// Pairs that differ in one bit are told by one comparison with that bit set (`<` 0x3C and
/// `>` 0x3E; `&` 0x26 and `'` 0x27); a byte equal to `c` is a zero byte of `x ^ c`, found by
/// the usual carry trick (`(v - 0x01..) & !v & 0x80..`, whose borrows run upwards only).
fn specials(x: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero_byte = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    zero_byte((x | (ONES * 0x02)) ^ (ONES * 0x3E))
        | zero_byte((x | ONES) ^ (ONES * 0x27))
        | zero_byte(x ^ (ONES * u64::from(b'"')))
        | zero_byte(x ^ (ONES * u64::from(b'\r')))
}

/// Where the first of the characters [`escape`] escapes is in `bytes`, eight bytes at a time
/// as [`any_special`] reads them.
fn first_special(bytes: &[u8]) -> Option<usize> {
    let at = |base: usize, found: u64| base + (found.trailing_zeros() / 8) as usize;
    let mut chunks = bytes.chunks_exact(8);
    let mut base = 0;
    for chunk in &mut chunks {
        let found = specials(u64::from_le_bytes(chunk.try_into().expect("eight bytes")));
        if found != 0 {
            return Some(at(base, found));
        }
        base += 8;
    }
    let rest = chunks.remainder();
    let mut padded = [0u8; 8];
    padded[..rest.len()].copy_from_slice(rest);
    let found = specials(u64::from_le_bytes(padded));
    (found != 0).then(|| at(base, found))
}

/// Appends `value` to `out`, escaped as [`escape`] escapes it, without a string in between:
/// the entries of the landing-page profiles are written this way, a handful of values each.
pub fn push_escaped(out: &mut Vec<u8>, value: &str) {
    if needs_escape(value) {
        write_escaped(out, value);
    } else {
        out.extend_from_slice(value.as_bytes());
    }
}

/// Appends `value`, which holds a character to escape, escaped.
fn write_escaped(out: &mut Vec<u8>, value: &str) {
    // Rarer (an ampersand in a query or a description, an apostrophe in a title), but not
    // rare enough to build a string for each (quick-xml's `escape` does, and a sixth of the
    // benchmark's teasers took that path) or to test each byte on its own: the runs between
    // specials, found eight bytes at a time, copied straight into `out`, each special as the
    // entity quick-xml writes for it (a test holds the two equal).
    let mut rest = value.as_bytes();
    while let Some(i) = first_special(rest) {
        out.extend_from_slice(&rest[..i]);
        out.extend_from_slice(match rest[i] {
            b'<' => b"&lt;",
            b'>' => b"&gt;",
            b'&' => b"&amp;",
            b'\'' => b"&apos;",
            b'"' => b"&quot;",
            _ => b"&#13;",
        });
        rest = &rest[i + 1..];
    }
    out.extend_from_slice(rest);
}

/// Splits `(url, lastmod)` items, in the order given, into shards, each within `limits`, and
/// hands each one to `emit` as soon as it is full, so at most one shard is in memory.
///
/// # Errors
///
/// `emit`'s first error; the shards before it were emitted.
pub fn render_shards<'a, E>(
    items: impl IntoIterator<Item = (&'a str, Option<Datestamp>)>,
    limits: Limits,
    emit: impl FnMut(&Shard) -> Result<(), E>,
) -> Result<usize, E> {
    let mut date = String::with_capacity(32);
    render_urlsets(
        items,
        URLSET_OPEN,
        limits,
        |bytes, (url, lastmod)| {
            write_url(bytes, url, lastmod, &mut date);
            lastmod
        },
        emit,
    )
}

/// Which shard each URL belongs to, kept from one generation to the next so that a URL stays in
/// its shard: shard `n` holds the URLs from its range's first URL up to the next range's, in
/// URL (byte) order. A refresh then changes only the shards whose URLs changed; a shard that
/// outgrows the limits is split, its first part keeping the number and the rest getting new
/// ones. A fresh layout packs the URLs into as few shards as the limits allow.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    /// `(first URL, shard number)` of each range, in URL order; the first range starts below
    /// every URL (`""`). Empty for a fresh layout.
    pub ranges: Vec<(String, u32)>,
}

/// [`render_shards`] through a [`Layout`]: `emit` gets each shard with its number, in URL order;
/// a range without URLs has no file. `layout` is updated with the ranges split on the way.
#[cfg(test)]
pub(crate) fn render_laid_out<'a, E>(
    items: impl IntoIterator<Item = (&'a str, Option<Datestamp>)>,
    limits: Limits,
    layout: &mut Layout,
    emit: impl FnMut(u32, &Shard) -> Result<(), E>,
) -> Result<usize, E> {
    try_render_laid_out(items.into_iter().map(Ok), limits, layout, emit)
}

/// `render_laid_out` of URLs read from somewhere that can fail (the inventory's file on
/// disk). The URLs stream through: at most one shard is in memory, however many URLs a range
/// of the layout holds (a fresh layout is one range of every URL).
///
/// # Errors
///
/// The items' or `emit`'s first error; the shards before it were emitted.
pub fn try_render_laid_out<S: AsRef<str>, E>(
    items: impl IntoIterator<Item = Result<(S, Option<Datestamp>), E>>,
    limits: Limits,
    layout: &mut Layout,
    mut emit: impl FnMut(u32, &Shard) -> Result<(), E>,
) -> Result<usize, E> {
    let old = if layout.ranges.is_empty() {
        vec![(String::new(), 1)]
    } else {
        std::mem::take(&mut layout.ranges)
    };
    let mut next_number = old.iter().map(|(_, n)| *n).max().unwrap_or(0) + 1;
    let mut count = 0;
    let mut ranges = old.into_iter().peekable();
    // The range being filled: the number of its shard being filled, and the splitter. The
    // first shard keeps the range's number; when its URLs no longer fit one shard, each
    // further shard starts a new range at its first URL, numbered from `next_number`.
    let start = |range: (String, u32), layout: &mut Layout| {
        let number = range.1;
        layout.ranges.push(range);
        (number, Urlsets::new(URLSET_OPEN, limits))
    };
    let (mut number, mut urlsets) = start(ranges.next().expect("a layout has a range"), layout);
    let mut date = String::with_capacity(32);
    for item in items {
        let (url, lastmod) = item?;
        let url = url.as_ref();
        while ranges
            .peek()
            .is_some_and(|(begins, _)| url >= begins.as_str())
        {
            count += urlsets.finish(|shard| emit(number, shard))?;
            (number, urlsets) = start(ranges.next().expect("peeked"), layout);
        }
        urlsets.push(
            |bytes| {
                write_url(bytes, url, lastmod, &mut date);
                lastmod
            },
            // The shard before this URL is full: this URL starts the next one.
            |shard| {
                emit(number, shard)?;
                number = next_number;
                next_number += 1;
                layout.ranges.push((url.to_owned(), number));
                Ok(())
            },
        )?;
    }
    count += urlsets.finish(|shard| emit(number, shard))?;
    // The ranges after the last URL hold none: kept, without a file.
    layout.ranges.extend(ranges);
    Ok(count)
}

/// Renders the URLs of one range of a [`Layout`] and appends the range to `layout`: the first
/// shard keeps the range's number; when they no longer fit one shard, each further shard starts
/// a new range at its first URL, numbered from `next_number`. Returns the shards emitted.
///
/// # Errors
///
/// `emit`'s first error.
pub fn render_range<E>(
    range: (String, u32),
    run: &[(&str, Option<Datestamp>)],
    limits: Limits,
    layout: &mut Layout,
    next_number: &mut u32,
    emit: &mut impl FnMut(u32, &Shard) -> Result<(), E>,
) -> Result<usize, E> {
    let mut first = 0;
    let mut number = range.1;
    layout.ranges.push(range);
    render_shards(run.iter().copied(), limits, |shard| {
        if first > 0 {
            number = *next_number;
            *next_number += 1;
            layout.ranges.push((run[first].0.to_owned(), number));
        }
        first += shard.urls;
        emit(number, shard)
    })
}

/// Writes a plain sitemap's whole `<url>` entry (SM-05, SM-06); `date` is scratch space.
pub fn write_url(bytes: &mut Vec<u8>, url: &str, lastmod: Option<Datestamp>, date: &mut String) {
    write_url_open(bytes, url, lastmod_text(lastmod, date));
    bytes.extend_from_slice(b"</url>\n");
}

/// The entries of a plain sitemap shard ([`write_url`]'s), in order: each `<url>` to its line
/// feed. Each ends at the first `</url>` after it starts, as a location holds no `<`.
pub fn entries(shard: &[u8]) -> impl Iterator<Item = &[u8]> {
    const END: &[u8] = b"</url>\n";
    let body = shard
        .get(header(URLSET_OPEN)..shard.len().saturating_sub(URLSET_CLOSE.len()))
        .unwrap_or_default();
    let mut at = 0;
    memchr::memmem::find_iter(body, END).map(move |end| {
        let entry = &body[at..end + END.len()];
        at = end + END.len();
        entry
    })
}

/// `lastmod` written out into `date` (cleared first), for [`write_url_open`].
pub fn lastmod_text(lastmod: Option<Datestamp>, date: &mut String) -> Option<&str> {
    date.clear();
    let d = lastmod?;
    d.write_to(date);
    Some(date.as_str())
}

/// Writes `<url><loc>..</loc>` and `<lastmod>..</lastmod>` when there is one (written out by
/// [`lastmod_text`], once for the entries of several files that share it); the caller adds
/// what else the entry holds and `</url>`.
pub fn write_url_open(bytes: &mut Vec<u8>, url: &str, lastmod: Option<&str>) {
    bytes.extend_from_slice(b"<url><loc>");
    push_escaped(bytes, url);
    bytes.extend_from_slice(b"</loc>");
    if let Some(date) = lastmod {
        bytes.extend_from_slice(b"<lastmod>");
        bytes.extend_from_slice(date.as_bytes());
        bytes.extend_from_slice(b"</lastmod>");
    }
}

/// The shard splitter behind every `urlset` kind (sitemaps, Signmaps, ...): `open` is the root's
/// start tag with its namespaces, `write` appends one whole entry and returns its lastmod: a
/// [`Urlsets`] given `items` in order.
fn render_urlsets<T, E>(
    items: impl IntoIterator<Item = T>,
    open: &str,
    limits: Limits,
    mut write: impl FnMut(&mut Vec<u8>, T) -> Option<Datestamp>,
    mut emit: impl FnMut(&Shard) -> Result<(), E>,
) -> Result<usize, E> {
    let mut urlsets = Urlsets::new(open, limits);
    for item in items {
        urlsets.push(|bytes| write(bytes, item), &mut emit)?;
    }
    urlsets.finish(emit)
}

/// Splits entries, pushed one at a time, into `urlset` shards within `limits`. A shard is
/// handed to the `emit` of the push whose entry does not fit in it, and the last one to
/// [`Urlsets::finish`]'s, which must be called (dropped unfinished, the last shard is lost).
/// At most one shard per splitter is in memory (up to `limits.max_bytes`); several splitters
/// can fill files of one sink side by side. Entries are counted on the bytes actually written:
/// one that does not fit moves, already written, to the next shard. One buffer serves every
/// shard: a fresh one per shard (up to 50 MB each) cost more in zeroed pages than writing the
/// entries into it.
#[must_use = "the last shard is emitted by `finish`"]
pub struct Urlsets<'o> {
    open: &'o str,
    limits: Limits,
    /// The declaration, `open` and the close tag: a shard's bytes without entries.
    frame: usize,
    shard: Shard,
    /// The entry that did not fit, on its way to the next shard.
    moving: Vec<u8>,
    /// Shards emitted.
    count: usize,
}

impl<'o> Urlsets<'o> {
    /// A splitter of `urlset`s whose root start tag is `open`.
    pub fn new(open: &'o str, limits: Limits) -> Self {
        let mut shard = Shard {
            bytes: Vec::with_capacity(64 * 1024),
            urls: 0,
            newest: None,
        };
        start_shard(&mut shard, open);
        Self {
            open,
            limits,
            frame: frame(open),
            shard,
            moving: Vec::new(),
            count: 0,
        }
    }

    /// Appends the entry `write` writes (returning its lastmod); when it does not fit, the
    /// shard before it is closed and handed to `emit` first.
    ///
    /// # Errors
    ///
    /// `emit`'s error.
    pub fn push<E>(
        &mut self,
        write: impl FnOnce(&mut Vec<u8>) -> Option<Datestamp>,
        emit: impl FnOnce(&Shard) -> Result<(), E>,
    ) -> Result<(), E> {
        self.try_push(|bytes| Ok(write(bytes)), emit)
    }

    /// [`Urlsets::push`] of an entry whose writing can fail (read from elsewhere): on failure
    /// the entry's bytes are taken back and the error returned before any shard is emitted.
    ///
    /// # Errors
    ///
    /// `write`'s error (nothing emitted, the entry taken back) or `emit`'s.
    pub fn try_push<E>(
        &mut self,
        write: impl FnOnce(&mut Vec<u8>) -> Result<Option<Datestamp>, E>,
        emit: impl FnOnce(&Shard) -> Result<(), E>,
    ) -> Result<(), E> {
        let shard = &mut self.shard;
        let start = shard.bytes.len();
        let lastmod = match write(&mut shard.bytes) {
            Ok(lastmod) => lastmod,
            Err(e) => {
                shard.bytes.truncate(start);
                return Err(e);
            }
        };
        if self
            .limits
            .overflows(shard.urls, shard.bytes.len(), self.frame)
        {
            self.moving.clear();
            self.moving.extend_from_slice(&shard.bytes[start..]);
            shard.bytes.truncate(start);
            shard.bytes.extend_from_slice(URLSET_CLOSE.as_bytes());
            emit(shard)?;
            self.count += 1;
            start_shard(shard, self.open);
            shard.bytes.extend_from_slice(&self.moving);
        }
        shard.urls += 1;
        shard.newest = shard.newest.max(lastmod);
        Ok(())
    }

    /// Closes and emits the last shard, if it holds an entry; the number of shards emitted.
    ///
    /// # Errors
    ///
    /// `emit`'s error.
    pub fn finish<E>(mut self, emit: impl FnOnce(&Shard) -> Result<(), E>) -> Result<usize, E> {
        if self.shard.urls > 0 {
            self.shard.bytes.extend_from_slice(URLSET_CLOSE.as_bytes());
            emit(&self.shard)?;
            self.count += 1;
        }
        Ok(self.count)
    }
}

/// Empties `shard` (keeping its buffer) and writes the declaration and `open`.
fn start_shard(shard: &mut Shard, open: &str) {
    shard.bytes.clear();
    shard.bytes.extend_from_slice(XML_DECL.as_bytes());
    shard.bytes.extend_from_slice(open.as_bytes());
    shard.urls = 0;
    shard.newest = None;
}

/// The sitemap index: one `<sitemap>` per shard with its absolute `loc` and newest `lastmod`.
///
/// # Errors
///
/// [`FilesError::Empty`] without entries, [`FilesError::TooManyShards`] with more than
/// 50,000.
pub fn render_index<'a>(
    entries: impl IntoIterator<Item = (&'a str, Option<Datestamp>)>,
) -> Result<Vec<u8>, FilesError> {
    let mut out = String::with_capacity(4096);
    out.push_str(XML_DECL);
    out.push_str(INDEX_OPEN);
    let mut n = 0;
    for (loc, lastmod) in entries {
        n += 1;
        out.push_str("<sitemap><loc>");
        out.push_str(&escape(loc));
        out.push_str("</loc>");
        if let Some(d) = lastmod {
            out.push_str("<lastmod>");
            out.push_str(&d.to_string());
            out.push_str("</lastmod>");
        }
        out.push_str("</sitemap>\n");
    }
    if n == 0 {
        return Err(FilesError::Empty);
    }
    if n > MAX_URLS {
        return Err(FilesError::TooManyShards { shards: n });
    }
    out.push_str(INDEX_CLOSE);
    Ok(out.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn laid_out(urls: &[String], limits: Limits, layout: &mut Layout) -> Vec<(u32, Shard)> {
        let mut out = Vec::new();
        let items = urls.iter().map(|u| (u.as_str(), None));
        render_laid_out(items, limits, layout, |n, s| {
            out.push((n, s.clone()));
            Ok::<_, ()>(())
        })
        .unwrap();
        out
    }

    fn urls(ids: impl IntoIterator<Item = u32>) -> Vec<String> {
        let mut v: Vec<String> = ids
            .into_iter()
            .map(|i| format!("https://h/r/{i:05}"))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_fresh_layout_packs_like_the_plain_splitter() {
        let limits = Limits {
            max_urls: 10,
            ..Limits::default()
        };
        let all = urls(0..35);
        let mut layout = Layout::default();
        let got = laid_out(&all, limits, &mut layout);
        let plain = shards(
            &all.iter().map(|u| (u.as_str(), None)).collect::<Vec<_>>(),
            limits,
        );
        assert_eq!(
            got.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
            [1, 2, 3, 4]
        );
        assert_eq!(got.into_iter().map(|(_, s)| s).collect::<Vec<_>>(), plain);
        assert_eq!(layout.ranges.len(), 4);
        assert_eq!(layout.ranges[0].0, "");
        assert_eq!(layout.ranges[1].0, all[10]);
    }

    #[test]
    fn shards_keep_their_urls_and_only_changed_ones_change() {
        // Issue 5 point 8: a change of a few URLs rewrites only the shards holding them.
        let limits = Limits {
            max_urls: 10,
            ..Limits::default()
        };
        let mut layout = Layout::default();
        let before = laid_out(&urls(0..40), limits, &mut layout);
        // URL 15 goes, URL 15.5 arrives in the same range; 100 and 101 come at the end.
        let mut next: Vec<u32> = (0..40).filter(|i| *i != 15).collect();
        next.extend([100, 101]);
        let mut changed = urls(next);
        changed.push("https://h/r/00015a".to_owned());
        changed.sort();
        let after = laid_out(&changed, limits, &mut layout);
        // Shard 4 (URLs 30-39) is full, so 100 and 101 start shard 5.
        let numbers: Vec<u32> = after.iter().map(|(n, _)| *n).collect();
        assert_eq!(numbers, [1, 2, 3, 4, 5], "{layout:?}");
        for ((n0, s0), (_, s1)) in before.iter().zip(&after) {
            assert_eq!(s0.bytes == s1.bytes, *n0 != 2, "shard {n0}");
        }
    }

    #[test]
    fn an_outgrown_range_splits_with_new_numbers_and_empty_ranges_have_no_file() {
        let limits = Limits {
            max_urls: 10,
            ..Limits::default()
        };
        let mut layout = Layout::default();
        laid_out(&urls(0..30), limits, &mut layout);
        // Shard 2 (URLs 10-19) gets 15 more; shard 1's URLs all go.
        let mut changed = urls(10..30);
        changed.extend((0..15).map(|k| format!("https://h/r/00012x{k:02}")));
        changed.sort();
        let after = laid_out(&changed, limits, &mut layout);
        let numbers: Vec<u32> = after.iter().map(|(n, _)| *n).collect();
        assert_eq!(numbers, [2, 4, 5, 3], "{layout:?}");
        assert!(after.iter().all(|(_, s)| s.urls <= 10));
        assert_eq!(
            after.iter().map(|(_, s)| s.urls).sum::<usize>(),
            changed.len()
        );
        // The range of shard 1 is kept for URLs that may come back.
        assert_eq!(layout.ranges[0], (String::new(), 1));
    }

    fn shards(items: &[(&str, Option<&str>)], limits: Limits) -> Vec<Shard> {
        let mut out = Vec::new();
        let items = items
            .iter()
            .map(|&(u, d)| (u, d.and_then(Datestamp::parse)));
        render_shards(items, limits, |s| {
            out.push(s.clone());
            Ok::<_, ()>(())
        })
        .unwrap();
        out
    }

    #[test]
    fn one_shard_reads_as_the_protocol_shows() {
        let got = shards(
            &[
                ("https://h/p?a=1&b='x'", Some("2020-01-02")),
                ("https://h/q", None),
            ],
            Limits::default(),
        );
        assert_eq!(got.len(), 1);
        // SM-02 declaration at byte 0; SM-03 all five escapes; SM-13 lastmod form.
        assert_eq!(
            String::from_utf8(got[0].bytes.clone()).unwrap(),
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n\
             <url><loc>https://h/p?a=1&amp;b=&apos;x&apos;</loc><lastmod>2020-01-02</lastmod></url>\n\
             <url><loc>https://h/q</loc></url>\n\
             </urlset>\n"
        );
        assert_eq!(got[0].newest, Datestamp::parse("2020-01-02"));
    }

    #[test]
    fn splits_on_the_url_limit() {
        let urls: Vec<String> = (0..5).map(|i| format!("https://h/{i}")).collect();
        let items: Vec<(&str, Option<&str>)> = urls.iter().map(|u| (u.as_str(), None)).collect();
        let got = shards(
            &items,
            Limits {
                max_urls: 2,
                max_bytes: MAX_BYTES,
            },
        );
        assert_eq!(got.iter().map(|s| s.urls).collect::<Vec<_>>(), [2, 2, 1]);
    }

    #[test]
    fn splits_on_the_byte_limit_counting_real_bytes() {
        // SM-09: bytes, not characters: multi-byte text counts in full.
        let url = format!("https://h/{}", "%C3%A4".repeat(300));
        let items: Vec<(&str, Option<&str>)> = (0..40).map(|_| (url.as_str(), None)).collect();
        let got = shards(
            &items,
            Limits {
                max_urls: MAX_URLS,
                max_bytes: MIN_BYTES,
            },
        );
        assert!(got.len() > 1);
        assert!(got.iter().all(|s| s.bytes.len() <= MIN_BYTES));
        assert_eq!(got.iter().map(|s| s.urls).sum::<usize>(), 40);
    }

    #[test]
    fn index_lists_every_shard_with_its_newest_lastmod() {
        let index = render_index([
            ("https://b/sitemap-1.xml", Datestamp::parse("2021-01-01")),
            ("https://b/sitemap-2.xml", None),
        ])
        .unwrap();
        let text = String::from_utf8(index).unwrap();
        assert!(text.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<sitemapindex"));
        assert!(text.contains(
            "<sitemap><loc>https://b/sitemap-1.xml</loc><lastmod>2021-01-01</lastmod></sitemap>"
        ));
        assert!(text.contains("<sitemap><loc>https://b/sitemap-2.xml</loc></sitemap>"));
        assert_eq!(render_index(std::iter::empty()), Err(FilesError::Empty));
    }

    #[test]
    fn limits_are_checked() {
        assert!(
            Limits {
                max_urls: 0,
                max_bytes: MAX_BYTES
            }
            .validate()
            .is_err()
        );
        assert!(
            Limits {
                max_urls: 50_001,
                max_bytes: MAX_BYTES
            }
            .validate()
            .is_err()
        );
        assert!(
            Limits {
                max_urls: 10,
                max_bytes: 100
            }
            .validate()
            .is_err()
        );
        assert!(
            Limits {
                max_urls: 10,
                max_bytes: MIN_BYTES
            }
            .validate()
            .is_ok()
        );
    }

    /// SM-03: eight bytes as the SWAR test reads them, every byte value at every place among
    /// fillers of every value and a second special after it: the first special found is the
    /// first there is (a later byte may be flagged falsely only above a real one), and none
    /// is found where there is none (bytes 0x80-0xFF, NUL and the padding included).
    #[test]
    fn the_first_special_of_eight_bytes_is_found_for_every_byte() {
        let special = |b: u8| b"<>&'\"\r".contains(&b);
        for fill in 0..=255u8 {
            for b in 0..=255u8 {
                for at in 0..8 {
                    let mut word = [fill; 8];
                    word[at] = b;
                    let first = word.iter().position(|&c| special(c));
                    assert_eq!(first_special(&word), first, "{word:?}");
                    assert_eq!(any_special(&word), first.is_some(), "{word:?}");
                    // A special after it, which a false flag could otherwise hide behind.
                    if at < 7 {
                        word[7] = b'<';
                        let first = word.iter().position(|&c| special(c));
                        assert_eq!(first_special(&word), first, "{word:?}");
                    }
                    // Shorter than eight: padded.
                    assert_eq!(
                        any_special(&word[..at + 1]),
                        word[..=at].iter().any(|&c| special(c))
                    );
                }
            }
        }
    }

    proptest::proptest! {
        /// SM-03: the quick test lets through exactly the values quick-xml leaves as they are,
        /// and escapes the others as it does (`\r` too).
        #[test]
        fn escape_is_quick_xmls(value in "[a-z<>&'\"\r\n é/:?=üæ§¢č\0]{0,80}") {
            let ours = escape(&value);
            let theirs = quick_xml::escape::escape(value.as_str());
            proptest::prop_assert_eq!(matches!(ours, Cow::Borrowed(_)), matches!(theirs, Cow::Borrowed(_)));
            proptest::prop_assert_eq!(&ours, &theirs);
            let mut pushed = b"before ".to_vec();
            push_escaped(&mut pushed, &value);
            proptest::prop_assert_eq!(pushed, format!("before {theirs}").into_bytes());
        }

        /// SM-03: values with at most one special character, anywhere (in the first, a middle
        /// or the overlapping last eight bytes, in a value of any length either side of 64),
        /// among the bytes next to the specials (`= ? % $ # ;`, form feed, shift out) and
        /// multi-byte characters: the quick test misses none and flags no value without one.
        #[test]
        fn one_special_is_told_wherever_it_is(
            head in "[a-z=?%$#;\u{c}\u{e}é/:.üæ§¢č\0]{0,70}",
            special in proptest::option::of("[<>&'\"\r]"),
            tail in "[a-z=?%$#;\u{c}\u{e}é/:.üæ§¢č\0]{0,70}",
        ) {
            let value = format!("{head}{}{tail}", special.as_deref().unwrap_or(""));
            let theirs = quick_xml::escape::escape(value.as_str());
            proptest::prop_assert_eq!(needs_escape(&value), special.is_some());
            proptest::prop_assert_eq!(needs_escape(&value), matches!(theirs, Cow::Owned(_)));
            let mut pushed = Vec::new();
            push_escaped(&mut pushed, &value);
            proptest::prop_assert_eq!(pushed, theirs.as_bytes());
        }
    }
}
