//! Fixed-width entries sorted by the 64-bit key they start with, kept on disk: a generation's
//! indexes of its packed documents ([`super::generation::DOCS_INDEX`]) and of its linksets
//! ([`super::linkset::INDEX`]).
//!
//! Held in memory, such an index grows with the repository: 28 bytes a record, 1.4 GB at 50
//! million records, twice while a swap holds two generations. On disk, a lookup reads one
//! block of [`STRIDE`] entries, found from the first key of each block, the only part kept in
//! memory (1.6 MB at 50 million); the gateway caches the blocks it reads like any other bytes.
//! A memory map would spare even that read, but needs `unsafe` (a file changed under a map is
//! undefined behaviour), which the crate denies.
//!
//! [`Sorter`] writes such an index from entries in any order, in bounded memory: sorted runs
//! spilled to anonymous temporary files beside the index, then merged.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, Write};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Bytes of one entry: key, offset, length, time, little-endian.
pub(crate) const WIDTH: usize = 8 + 8 + 4 + 8;

/// Entries a lookup reads at once: 7 KB, two pages.
pub(crate) const STRIDE: u64 = 256;

/// Entries a [`Sorter`] holds before it writes a sorted run: 32 MiB.
const RUN: usize = 1 << 20;

/// A generation's packs of small items, each with its index.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub(crate) enum Pack {
    /// The CDIF documents ([`super::generation::DOCS_PACK`]).
    Documents,
    /// The linksets ([`super::linkset::PACK`]).
    Linksets,
}

/// Where one packed item is, and its time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    /// What it is looked up by.
    pub(crate) key: u64,
    /// Where it starts in its pack.
    pub(crate) offset: u64,
    /// Its length.
    pub(crate) len: u32,
    /// Seconds since the epoch: a document's datestamp (`i64::MIN` for none), a linkset's
    /// Last-Modified.
    pub(crate) time: i64,
}

impl Entry {
    pub(crate) fn encode(&self) -> [u8; WIDTH] {
        let mut out = [0; WIDTH];
        out[0..8].copy_from_slice(&self.key.to_le_bytes());
        out[8..16].copy_from_slice(&self.offset.to_le_bytes());
        out[16..20].copy_from_slice(&self.len.to_le_bytes());
        out[20..28].copy_from_slice(&self.time.to_le_bytes());
        out
    }

    /// The entry in `bytes` ([`WIDTH`] of them).
    pub(crate) fn decode(bytes: &[u8]) -> Self {
        let eight = |at: usize| bytes[at..at + 8].try_into().expect("8 bytes");
        Self {
            key: u64::from_le_bytes(eight(0)),
            offset: u64::from_le_bytes(eight(8)),
            len: u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes")),
            time: i64::from_le_bytes(eight(20)),
        }
    }
}

/// The entries of `bytes`, an index's or one of its blocks, in order.
pub(crate) fn entries(bytes: &[u8]) -> impl Iterator<Item = Entry> + '_ {
    bytes.chunks_exact(WIDTH).map(Entry::decode)
}

/// An index file, open for lookups.
#[derive(Debug, Default)]
pub(crate) struct Index {
    file: Option<File>,
    len: u64,
    /// The key of the first entry of each block.
    firsts: Vec<u64>,
}

impl Index {
    /// Opens the index at `path`, reading it once: it must be whole entries in key order.
    pub(crate) fn open(path: &Path) -> io::Result<Self> {
        let file = File::open(path)?;
        let bytes = file.metadata()?.len();
        if bytes % WIDTH as u64 != 0 {
            return Err(io::Error::other(format!(
                "{}: {bytes} bytes, not a whole number of {WIDTH}-byte entries",
                path.display()
            )));
        }
        let mut reader = BufReader::with_capacity(1 << 16, &file);
        let mut firsts = Vec::new();
        let mut entry = [0; WIDTH];
        let mut last = 0;
        for i in 0..bytes / WIDTH as u64 {
            reader.read_exact(&mut entry)?;
            let key = Entry::decode(&entry).key;
            if key < last {
                return Err(io::Error::other(format!(
                    "{}: entry {i} is out of key order",
                    path.display()
                )));
            }
            last = key;
            if i % STRIDE == 0 {
                firsts.push(key);
            }
        }
        drop(reader);
        Ok(Self {
            file: Some(file),
            len: bytes / WIDTH as u64,
            firsts,
        })
    }

    /// How many entries it has.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// The blocks that may hold entries with `key`: one, but for a run of equal keys that
    /// crosses a block's end.
    pub(crate) fn blocks(&self, key: u64) -> Range<u64> {
        // A block whose first key is below `key` may end with it; those from the first one
        // starting above it hold none.
        let start = self.firsts.partition_point(|&k| k < key).saturating_sub(1);
        let end = self.firsts.partition_point(|&k| k <= key);
        start as u64..(end as u64).max(start as u64)
    }

    /// Block `block`'s bytes.
    pub(crate) fn read_block(&self, block: u64) -> io::Result<Vec<u8>> {
        let Some(file) = &self.file else {
            return Ok(Vec::new());
        };
        let first = block * STRIDE;
        let count = STRIDE.min(self.len.saturating_sub(first));
        let mut bytes = vec![0; (count as usize) * WIDTH];
        file.read_exact_at(&mut bytes, first * WIDTH as u64)?;
        Ok(bytes)
    }

    /// The entries with `key` in block `block` (as [`Index::read_block`] read it), each with
    /// its position in the index.
    pub(crate) fn in_block(
        block: u64,
        bytes: &[u8],
        key: u64,
    ) -> impl Iterator<Item = (u64, Entry)> + '_ {
        let first = block * STRIDE;
        entries(bytes)
            .enumerate()
            .skip_while(move |(_, e)| e.key < key)
            .take_while(move |(_, e)| e.key == key)
            .map(move |(i, e)| (first + i as u64, e))
    }

    /// The entries with `key`, with their positions, read from the disk.
    pub(crate) fn find(&self, key: u64) -> io::Result<Vec<(u64, Entry)>> {
        let mut found = Vec::new();
        for block in self.blocks(key) {
            found.extend(Self::in_block(block, &self.read_block(block)?, key));
        }
        Ok(found)
    }

    /// Every entry in key order, read from the disk as it goes.
    pub(crate) fn iter(&self) -> io::Result<impl Iterator<Item = io::Result<Entry>> + '_> {
        let reader = match &self.file {
            Some(file) => {
                let mut file = file.try_clone()?;
                file.rewind()?;
                Some(BufReader::with_capacity(1 << 16, file))
            }
            None => None,
        };
        Ok(reader.into_iter().flat_map(move |mut reader| {
            (0..self.len).map(move |_| {
                let mut entry = [0; WIDTH];
                reader.read_exact(&mut entry)?;
                Ok(Entry::decode(&entry))
            })
        }))
    }
}

/// Writes an index from entries in any order, in bounded memory. Entries with equal keys keep
/// the order they came in (a lookup finds the first first).
#[derive(Debug)]
pub(crate) struct Sorter {
    /// Where the runs go: the index's own folder, so they are on its file system.
    dir: PathBuf,
    run: Vec<Entry>,
    runs: Vec<File>,
    count: u64,
}

impl Sorter {
    /// A sorter whose runs go in `dir`.
    pub(crate) fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_owned(),
            run: Vec::new(),
            runs: Vec::new(),
            count: 0,
        }
    }

    /// Adds an entry.
    pub(crate) fn push(&mut self, entry: Entry) -> io::Result<()> {
        self.run.push(entry);
        self.count += 1;
        if self.run.len() >= RUN {
            self.spill()?;
        }
        Ok(())
    }

    fn spill(&mut self) -> io::Result<()> {
        self.run.sort_by_key(|e| e.key);
        // Anonymous: a crash leaves nothing behind.
        let mut out = BufWriter::new(tempfile::tempfile_in(&self.dir)?);
        for e in self.run.drain(..) {
            out.write_all(&e.encode())?;
        }
        let mut file = out.into_inner().map_err(|e| e.into_error())?;
        file.rewind()?;
        self.runs.push(file);
        Ok(())
    }

    /// Writes the sorted index to `path` and syncs it; returns how many entries it has.
    pub(crate) fn finish(mut self, path: &Path) -> io::Result<u64> {
        let mut out = BufWriter::with_capacity(1 << 16, File::create(path)?);
        if self.runs.is_empty() {
            self.run.sort_by_key(|e| e.key);
            for e in &self.run {
                out.write_all(&e.encode())?;
            }
        } else {
            if !self.run.is_empty() {
                self.spill()?;
            }
            merge(std::mem::take(&mut self.runs), &mut out)?;
        }
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        Ok(self.count)
    }
}

/// Merges sorted runs into `out`; among equal keys, the earlier run's entries first.
fn merge(runs: Vec<File>, out: &mut impl Write) -> io::Result<()> {
    let mut readers: Vec<BufReader<File>> = runs
        .into_iter()
        .map(|f| BufReader::with_capacity(1 << 16, f))
        .collect();
    let next = |reader: &mut BufReader<File>| -> io::Result<Option<[u8; WIDTH]>> {
        let mut entry = [0; WIDTH];
        match reader.read_exact(&mut entry) {
            Ok(()) => Ok(Some(entry)),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(None),
            Err(e) => Err(e),
        }
    };
    let mut heads = BinaryHeap::new();
    for (run, reader) in readers.iter_mut().enumerate() {
        if let Some(entry) = next(reader)? {
            heads.push(Reverse((Entry::decode(&entry).key, run, entry)));
        }
    }
    while let Some(Reverse((_, run, entry))) = heads.pop() {
        out.write_all(&entry)?;
        if let Some(entry) = next(&mut readers[run])? {
            heads.push(Reverse((Entry::decode(&entry).key, run, entry)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: u64, offset: u64) -> Entry {
        Entry {
            key,
            offset,
            len: 1,
            time: -1,
        }
    }

    /// Sorts `keys` (pushed in that order, the offset their position) through runs of `run`
    /// entries, and checks the index against a sort in memory.
    fn sorted_through_runs(keys: &[u64], run: usize) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index");
        let mut sorter = Sorter::new(dir.path());
        for (i, &k) in keys.iter().enumerate() {
            sorter.run.push(entry(k, i as u64));
            sorter.count += 1;
            if sorter.run.len() >= run {
                sorter.spill().unwrap();
            }
        }
        assert_eq!(sorter.finish(&path).unwrap(), keys.len() as u64);
        let mut expected: Vec<Entry> = (keys.iter().enumerate())
            .map(|(i, &k)| entry(k, i as u64))
            .collect();
        expected.sort_by_key(|e| e.key); // stable, as the index must be
        let index = Index::open(&path).unwrap();
        let read: Vec<Entry> = index.iter().unwrap().map(Result::unwrap).collect();
        assert_eq!(read, expected);
        // Every key is found, with its first entry first, across block ends too.
        for &k in keys {
            let found = index.find(k).unwrap();
            let want: Vec<(u64, Entry)> = (expected.iter().enumerate())
                .filter(|(_, e)| e.key == k)
                .map(|(i, e)| (i as u64, *e))
                .collect();
            assert_eq!(found, want, "key {k}");
        }
        assert!(index.find(u64::MAX).unwrap().is_empty());
    }

    #[test]
    fn sorts_in_runs_keeping_equal_keys_in_order() {
        // Keys repeat (hash collisions, a URL two records give) and runs of equal keys cross
        // block ends: 600 entries over 7 keys, spilled every 100.
        let keys: Vec<u64> = (0..600u64).map(|i| (i * 7919) % 7).collect();
        sorted_through_runs(&keys, 100);
        // In memory, no run spilled.
        let keys: Vec<u64> = (0..1000u64)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .collect();
        sorted_through_runs(&keys, usize::MAX);
        sorted_through_runs(&keys, 64);
        sorted_through_runs(&[], 64);
    }

    #[test]
    fn a_damaged_index_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index");
        std::fs::write(&path, [0u8; WIDTH + 1]).unwrap();
        let e = Index::open(&path).unwrap_err().to_string();
        assert!(e.contains("not a whole number"), "{e}");
        let mut bytes = entry(2, 0).encode().to_vec();
        bytes.extend(entry(1, 0).encode());
        std::fs::write(&path, bytes).unwrap();
        let e = Index::open(&path).unwrap_err().to_string();
        assert!(e.contains("entry 1 is out of key order"), "{e}");
    }
}
