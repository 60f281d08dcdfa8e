//! The inventory past its memory budget: each time what it holds reaches the budget, it is
//! written to disk as two sorted runs, the record occurrences by record and the URLs by text,
//! and the memory is used again. At the end the runs are merged: the occurrences' merge decides
//! which version of each record wins (OAI-38) and counts the winners, as
//! [`super::superseded`] does in memory; the URLs' merge skips the occurrences that lost and
//! lists each URL once with its newest datestamp (SM-16), as the in-memory sort does, into one
//! file that the render reads front to back. The result is the in-memory one, entry for entry
//! (a property test holds the two equal).
//!
//! The URL runs are front-coded (each URL as the length it shares with the one before and the
//! rest): sorted URLs share most of their text, so a run takes about a third of the URLs' bytes
//! and no time to compress; a general-purpose compressor on top was not worth its CPU.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use crate::classify::Drop;
use crate::spill::{Budget, Folder, Run, RunReader, RunWriter};

use super::{
    Collected, DropSamples, IDENTIFIER_DROPS, Key, SharedUrl, Span, Stats, Superseded, index, key,
};
use crate::error::Error;
use crate::render::FilesError;

/// The runs spilled so far, in order.
#[derive(Debug)]
pub(super) struct Spilled {
    folder: Folder,
    /// The record occurrences of each run, by (record, datestamp, occurrence).
    entries: Vec<Run>,
    /// The URLs of each run, by (text, newest first).
    urls: Vec<Run>,
}

/// Most runs merged at once: past it, runs are first merged into fewer (each reader holds a
/// buffer, and a wider heap costs more per URL).
const FAN_IN: usize = 64;

/// A URL of a run, to sort: as [`super::Item`], with the occurrence that lists it.
#[derive(Clone, Copy, Debug)]
struct RunItem {
    key: Key,
    span: Span,
    /// Index of its occurrence in the chunk.
    entry: u32,
}

impl Spilled {
    pub(super) fn new(budget: &Budget) -> Self {
        Self {
            folder: Folder::new(budget),
            entries: Vec::new(),
            urls: Vec::new(),
        }
    }

    /// Writes what `chunk` holds as a run of each kind; its first occurrence is number `first`
    /// of the harvest. The caller empties it.
    pub(super) fn spill(&mut self, chunk: &Collected, first: u32) -> Result<(), Error> {
        let Collected {
            arena,
            entries,
            urls,
            common,
            ..
        } = chunk;
        let common = *common;
        let text = |s: Span| &arena.as_bytes()[s.start as usize..][..s.len as usize];
        let mut items: Vec<RunItem> = Vec::with_capacity(urls.len());
        for (i, e) in entries.iter().enumerate() {
            let spans = &urls[e.url_start as usize..][..usize::from(e.url_count)];
            items.extend(spans.iter().map(|&span| RunItem {
                key: key(arena, span, common),
                span,
                entry: i as u32,
            }));
        }
        items.sort_unstable_by_key(|item| item.key);
        for run in items.chunk_by_mut(|a, b| a.key == b.key) {
            if run.len() > 1 {
                run.sort_unstable_by(|a, b| {
                    text(a.span)[common..].cmp(&text(b.span)[common..]).then(
                        entries[b.entry as usize]
                            .datestamp
                            .cmp(&entries[a.entry as usize].datestamp),
                    )
                });
            }
        }
        let mut out = self.folder.create("urls")?;
        let mut last: &[u8] = &[];
        for item in &items {
            let e = &entries[item.entry as usize];
            let url = text(item.span);
            write_url(&mut out, last, url)?;
            out.fixed(e.datestamp as u64)?;
            out.varint(u64::from(e.groups))?;
            out.varint(u64::from(first + item.entry))?;
            last = url;
        }
        drop(items);
        self.urls.push(out.finish()?);
        let mut order: Vec<u32> = (0..entries.len() as u32).collect();
        order.sort_unstable_by_key(|&i| {
            let e = &entries[i as usize];
            (e.id_hash, e.datestamp, i)
        });
        let mut out = self.folder.create("records")?;
        for i in order {
            let e = &entries[i as usize];
            out.fixed(e.id_hash)?;
            out.fixed(e.datestamp as u64)?;
            out.varint(u64::from(first + i))?;
            out.bytes(&[u8::from(e.deleted) | u8::from(e.url_count == 0) << 1])?;
            out.bytes(&e.drops)?;
        }
        self.entries.push(out.finish()?);
        Ok(())
    }

    /// Merges the runs: which of the `occurrences` lost to a newer version, the winners counted
    /// into `stats`; then each URL once into one file, the duplicates counted and a few noted in
    /// `samples`, and the URLs that several records list as `shared`.
    pub(super) fn finish(
        mut self,
        occurrences: usize,
        stats: &mut Stats,
        samples: &mut DropSamples,
    ) -> Result<(Run, super::Shared, Superseded), Error> {
        let superseded = self.resolve_records(occurrences, stats)?;
        let runs = std::mem::take(&mut self.urls);
        let runs = self.narrow(runs)?;
        let mut merge = Merge::new(&runs)?;
        let mut out = self.folder.create("published")?;
        let (mut shared, mut shared_groups): (Vec<SharedUrl>, Vec<Vec<u32>>) = Default::default();
        // The URL being listed: its text, lastmod and groups, and every claim's datestamp and
        // groups.
        let mut kept: Option<UrlItem> = None;
        let mut claims: Vec<i64> = Vec::new();
        let mut groups: Vec<u32> = Vec::new();
        let mut last = Vec::new();
        let mut urls = 0u64;
        let mut flush =
            |kept: &UrlItem, claims: &mut Vec<i64>, groups: &mut Vec<u32>| -> Result<(), Error> {
                write_url(&mut out, &last, &kept.url)?;
                out.fixed(kept.datestamp as u64)?;
                out.varint(u64::from(kept.groups))?;
                last.clone_from(&kept.url);
                urls += 1;
                if claims.len() > 1 {
                    shared.push(SharedUrl {
                        url: String::from_utf8_lossy(&kept.url).into_owned(),
                        claims: std::mem::take(claims),
                    });
                    shared_groups.push(std::mem::take(groups));
                }
                claims.clear();
                groups.clear();
                Ok(())
            };
        while let Some(item) = merge.next()? {
            if superseded.contains(item.seq as usize) {
                continue;
            }
            match &mut kept {
                Some(k) if k.url == item.url => {
                    // The URL is in every group of a record that publishes it.
                    k.groups |= item.groups;
                    stats.drop(Drop::Duplicate);
                    if samples.wants(Drop::Duplicate) {
                        samples.note(Drop::Duplicate, None, std::str::from_utf8(&k.url).ok());
                    }
                    claims.push(item.datestamp);
                    groups.push(item.groups);
                }
                _ => {
                    if let Some(k) = kept.take() {
                        flush(&k, &mut claims, &mut groups)?;
                    }
                    claims.push(item.datestamp);
                    groups.push(item.groups);
                    kept = Some(item);
                }
            }
        }
        if let Some(k) = kept.take() {
            flush(&k, &mut claims, &mut groups)?;
        }
        stats.urls = urls;
        drop(merge);
        drop(runs);
        Ok((out.finish()?, (shared, shared_groups), superseded))
    }

    /// Merges runs of URLs into at most [`FAN_IN`], [`FAN_IN`] at a time.
    fn narrow(&mut self, mut runs: Vec<Run>) -> Result<Vec<Run>, Error> {
        while runs.len() > FAN_IN {
            let rest = runs.split_off(FAN_IN);
            let mut merge = Merge::new(&runs)?;
            let mut out = self.folder.create("urls")?;
            let mut last = Vec::new();
            while let Some(item) = merge.next()? {
                write_url(&mut out, &last, &item.url)?;
                out.fixed(item.datestamp as u64)?;
                out.varint(u64::from(item.groups))?;
                out.varint(u64::from(item.seq))?;
                last = item.url;
            }
            drop(merge);
            runs = rest;
            runs.push(out.finish()?);
        }
        Ok(runs)
    }

    /// Merges the occurrences' runs: the occurrences that lost to a newer version of their
    /// record (the newest datestamp wins, on a tie the later occurrence), and each winner
    /// counted into `stats` as [`Collected::finish`] counts it.
    fn resolve_records(
        &mut self,
        occurrences: usize,
        stats: &mut Stats,
    ) -> Result<Superseded, Error> {
        let mut bits = vec![0u64; occurrences.div_ceil(64)];
        let mut readers = (self.entries.iter())
            .map(Run::read)
            .collect::<Result<Vec<_>, _>>()?;
        let mut heap = BinaryHeap::with_capacity(readers.len());
        for (r, reader) in readers.iter_mut().enumerate() {
            if let Some(e) = RecordItem::read(reader)? {
                heap.push(Reverse((e, r)));
            }
        }
        let mut count = |winner: &RecordItem| {
            stats.records += 1;
            for (reason, n) in Drop::PER_IDENTIFIER.iter().zip(winner.drops) {
                stats.drops[index(*reason)] += u64::from(n);
            }
            if winner.flags & 1 != 0 {
                stats.drop(Drop::Deleted);
                stats.deleted += 1;
            } else if winner.flags & 2 != 0 {
                stats.drop(Drop::NoUrl);
            }
        };
        let mut previous: Option<RecordItem> = None;
        while let Some(Reverse((e, r))) = heap.pop() {
            if let Some(next) = RecordItem::read(&mut readers[r])? {
                heap.push(Reverse((next, r)));
            }
            if let Some(p) = previous.take() {
                if p.id_hash == e.id_hash {
                    // A later item of the same record is newer (or as new and later).
                    bits[p.seq as usize / 64] |= 1 << (p.seq % 64);
                } else {
                    count(&p);
                }
            }
            previous = Some(e);
        }
        if let Some(p) = previous {
            count(&p);
        }
        self.entries.clear();
        Ok(Superseded::new(bits, occurrences))
    }
}

/// Writes `url` front-coded after `last`: the length they share, the rest's length, the rest.
fn write_url(out: &mut RunWriter, last: &[u8], url: &[u8]) -> Result<(), Error> {
    let shared = last.iter().zip(url).take_while(|(a, b)| a == b).count();
    out.varint(shared as u64)?;
    out.varint((url.len() - shared) as u64)?;
    Ok(out.bytes(&url[shared..])?)
}

/// Reads a URL [`write_url`] wrote after `url`, into it; `false` at the end of the file.
fn read_url(input: &mut RunReader, url: &mut Vec<u8>) -> Result<bool, Error> {
    let Some(shared) = input.varint_or_end()? else {
        return Ok(false);
    };
    let rest = input.varint()? as usize;
    url.truncate(shared as usize);
    let at = url.len();
    url.resize(at + rest, 0);
    input.exact(&mut url[at..])?;
    Ok(true)
}

/// One record occurrence of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RecordItem {
    id_hash: u64,
    datestamp: i64,
    seq: u32,
    /// 1: deleted; 2: without a URL.
    flags: u8,
    drops: [u8; IDENTIFIER_DROPS],
}

impl RecordItem {
    fn read(input: &mut RunReader) -> Result<Option<Self>, Error> {
        let mut hash = [0u8; 8];
        // The end of the file comes between records: a record starts with 8 bytes.
        match input.exact(&mut hash) {
            Ok(()) => {}
            Err(FilesError::Spill { source, .. })
                if source.kind() == std::io::ErrorKind::UnexpectedEof =>
            {
                return Ok(None);
            }
            Err(e) => return Err(e.into()),
        }
        let datestamp = input.fixed()? as i64;
        let seq = input.varint()? as u32;
        let mut flags = [0u8; 1];
        input.exact(&mut flags)?;
        let mut drops = [0u8; IDENTIFIER_DROPS];
        input.exact(&mut drops)?;
        Ok(Some(Self {
            id_hash: u64::from_le_bytes(hash),
            datestamp,
            seq,
            flags: flags[0],
            drops,
        }))
    }
}

impl Ord for RecordItem {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.id_hash, self.datestamp, self.seq).cmp(&(other.id_hash, other.datestamp, other.seq))
    }
}

impl PartialOrd for RecordItem {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// One URL of a run, with its occurrence's datestamp, groups and number.
#[derive(Clone, Debug, PartialEq, Eq)]
struct UrlItem {
    url: Vec<u8>,
    datestamp: i64,
    groups: u32,
    seq: u32,
}

impl Ord for UrlItem {
    /// By text, and for equal texts newest first, as the in-memory sort.
    fn cmp(&self, other: &Self) -> Ordering {
        (self.url.cmp(&other.url))
            .then(other.datestamp.cmp(&self.datestamp))
            .then(self.seq.cmp(&other.seq))
    }
}

impl PartialOrd for UrlItem {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Reads a run of URLs.
struct UrlReader {
    input: RunReader,
    /// The last URL read (the next is front-coded after it).
    url: Vec<u8>,
}

impl UrlReader {
    fn next(&mut self) -> Result<Option<UrlItem>, Error> {
        if !read_url(&mut self.input, &mut self.url)? {
            return Ok(None);
        }
        Ok(Some(UrlItem {
            url: self.url.clone(),
            datestamp: self.input.fixed()? as i64,
            groups: self.input.varint()? as u32,
            seq: self.input.varint()? as u32,
        }))
    }
}

/// The k-way merge of runs of URLs, in [`UrlItem`] order.
struct Merge {
    readers: Vec<UrlReader>,
    heap: BinaryHeap<Reverse<(UrlItem, usize)>>,
}

impl Merge {
    fn new(runs: &[Run]) -> Result<Self, Error> {
        let mut readers = (runs.iter())
            .map(|run| {
                Ok(UrlReader {
                    input: run.read()?,
                    url: Vec::new(),
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let mut heap = BinaryHeap::with_capacity(readers.len());
        for (r, reader) in readers.iter_mut().enumerate() {
            if let Some(item) = reader.next()? {
                heap.push(Reverse((item, r)));
            }
        }
        Ok(Self { readers, heap })
    }

    fn next(&mut self) -> Result<Option<UrlItem>, Error> {
        let Some(Reverse((item, r))) = self.heap.pop() else {
            return Ok(None);
        };
        if let Some(next) = self.readers[r].next()? {
            self.heap.push(Reverse((next, r)));
        }
        Ok(Some(item))
    }
}

/// Reads the file of published URLs ([`Spilled::finish`]) front to back.
#[derive(Debug)]
pub(super) struct PublishedReader {
    input: RunReader,
    url: Vec<u8>,
}

impl PublishedReader {
    pub(super) fn new(run: &Run) -> Result<Self, Error> {
        Ok(Self {
            input: run.read()?,
            url: Vec::new(),
        })
    }

    /// The next URL, its packed datestamp and groups.
    pub(super) fn next(&mut self) -> Result<Option<(String, i64, u32)>, Error> {
        if !read_url(&mut self.input, &mut self.url)? {
            return Ok(None);
        }
        let datestamp = self.input.fixed()? as i64;
        let groups = self.input.varint()? as u32;
        // The URLs were `str`s when they were written.
        let url = String::from_utf8_lossy(&self.url).into_owned();
        Ok(Some((url, datestamp, groups)))
    }
}
