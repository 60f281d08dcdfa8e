//! The landing-page profiles' record occurrences, out of memory: each occurrence's entry
//! lengths, datestamp and state go to a file in harvest order and are read back front to back;
//! the versions with a landing page are sorted by landing page, in runs on disk once they
//! outgrow their share of the memory budget, and merged to decide which record lists each
//! landing page. A record occurrence costs no memory here past the budget (it cost 44 bytes,
//! 2.2 GB for 50 million records).
//!
//! No file-system IO of its own: its files are [`crate::disk::spill`]'s runs, and its errors
//! theirs ([`FilesError::Spill`](crate::FilesError::Spill)). The profiles' shard files are
//! settled with its [`Resolution`] ([`crate::disk::profiles`]).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::FilesError as Error;
use crate::counts::Superseded;
use crate::disk::spill::{Budget, Folder, Run, RunReader, RunWriter, Share};

use super::{COLUMNS, Lens};

/// What resolving counted, as [`SignStats`](super::record::SignStats) has it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counts {
    /// Landing pages published, once each.
    pub published: u64,
    /// Live records without a landing page.
    pub no_landing_page: u64,
    /// Live records whose landing page a newer record has.
    pub duplicate: u64,
    /// Published ones with an OCX entry.
    pub typed: u64,
}

/// What became of one record occurrence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// A deleted record.
    Deleted,
    /// A live record without a landing page.
    NoLandingPage,
    /// Published with a landing page; `typed`: with an OCX entry.
    Landing {
        /// With an OCX entry.
        typed: bool,
    },
}

/// A version with a landing page, as resolving needs it; ordered by landing page first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Version {
    /// The 128-bit hash of the landing page ([`super::signposts`]'s `hash128`).
    landing: u128,
    datestamp: i64,
    /// Its place in the harvest, and in the temporary files.
    seq: u32,
    typed: bool,
}

/// The record occurrences of one harvest, as they come.
#[derive(Debug)]
pub struct Occurrences {
    folder: Folder,
    /// Each occurrence, in order: its entries' lengths, datestamp and state.
    file: Option<RunWriter>,
    count: u32,
    /// Versions with a landing page not yet in a run.
    versions: Vec<Version>,
    runs: Vec<Run>,
    /// Most versions held before they are written as a run.
    capacity: usize,
    /// Their memory, within the budget (and in the gateway, the refreshes' pool).
    share: Share,
}

/// Share of the memory budget the versions take (the URL inventory takes the budget itself:
/// its entries are larger and more).
const SHARE: u64 = 4;

impl Occurrences {
    /// None yet, their files in a folder of `budget`, and their memory within it.
    pub fn new(budget: &Budget) -> Self {
        let cap = budget.memory / SHARE;
        Self {
            folder: Folder::new(budget),
            file: None,
            count: 0,
            versions: Vec::new(),
            runs: Vec::new(),
            capacity: (cap as usize / size_of::<Version>()).max(1),
            share: Share::new(budget, cap),
        }
    }

    /// The occurrences added.
    pub fn len(&self) -> u32 {
        self.count
    }

    /// Whether none was added.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Adds the next occurrence: its entries' `lens` by profile, its packed `datestamp`, its
    /// `state` and, with a landing page, the page's hash.
    ///
    /// # Errors
    ///
    /// [`Error::Spill`] when the occurrences' file or a run of versions cannot be written.
    pub fn push(
        &mut self,
        lens: Lens,
        datestamp: i64,
        state: State,
        landing: u128,
    ) -> Result<(), Error> {
        let file = match &mut self.file {
            Some(file) => file,
            None => self.file.insert(self.folder.create("occurrences")?),
        };
        for len in lens {
            file.varint(u64::from(len))?;
        }
        file.fixed(datestamp as u64)?;
        file.varint(match state {
            State::Deleted => 0,
            State::NoLandingPage => 1,
            State::Landing { .. } => 2,
        })?;
        if let State::Landing { typed } = state {
            self.versions.push(Version {
                landing,
                datestamp,
                seq: self.count,
                typed,
            });
            let held = (self.versions.len() * size_of::<Version>()) as u64;
            if self.versions.len() >= self.capacity || !self.share.allows(held) {
                self.spill()?;
            }
        }
        self.count += 1;
        Ok(())
    }

    fn spill(&mut self) -> Result<(), Error> {
        self.versions.sort_unstable();
        let mut out = self.folder.create("versions")?;
        for v in &self.versions {
            out.fixed((v.landing >> 64) as u64)?;
            out.fixed(v.landing as u64)?;
            out.fixed(v.datestamp as u64)?;
            out.varint(u64::from(v.seq))?;
            out.varint(u64::from(v.typed))?;
        }
        self.runs.push(out.finish()?);
        // Cleared, not freed; unless the pool holds it to less than its cap.
        if self.share.limit() < self.share.cap() {
            self.versions = Vec::new();
        } else {
            self.versions.clear();
        }
        self.share.count(0);
        Ok(())
    }

    /// Keeps the newest version of each record (those `superseded` does not hold) and the
    /// newest record of each landing page (a tie: the later), counted into `stats`.
    ///
    /// # Errors
    ///
    /// [`Error::Spill`] when a run cannot be written or read back.
    pub fn finish(
        mut self,
        superseded: &Superseded,
        stats: &mut Counts,
    ) -> Result<Resolution, Error> {
        let file = self.file.take().map(RunWriter::finish).transpose()?;
        let mut won = vec![0u64; (self.count as usize).div_ceil(64)];
        let mut group: Option<Version> = None;
        let mut settle = |winner: Option<Version>, stats: &mut Counts| {
            if let Some(w) = winner {
                stats.published += 1;
                stats.typed += u64::from(w.typed);
                won[w.seq as usize / 64] |= 1 << (w.seq % 64);
            }
        };
        let mut each = |v: Version, stats: &mut Counts| {
            if superseded.contains(v.seq as usize) {
                return;
            }
            match &mut group {
                Some(kept) if kept.landing == v.landing => {
                    stats.duplicate += 1;
                    if (v.datestamp, v.seq) > (kept.datestamp, kept.seq) {
                        *kept = v;
                    }
                }
                _ => settle(group.replace(v), stats),
            }
        };
        if self.runs.is_empty() {
            // A landing page two records give is rare: sorted by the page alone.
            self.versions.sort_unstable_by_key(|v| v.landing);
            for v in std::mem::take(&mut self.versions) {
                each(v, stats);
            }
        } else {
            if !self.versions.is_empty() {
                self.spill()?;
            }
            let mut readers = (self.runs.iter())
                .map(Run::read)
                .collect::<Result<Vec<_>, _>>()?;
            let mut heap = BinaryHeap::with_capacity(readers.len());
            for (r, reader) in readers.iter_mut().enumerate() {
                if let Some(v) = read_version(reader)? {
                    heap.push(Reverse((v, r)));
                }
            }
            while let Some(Reverse((v, r))) = heap.pop() {
                if let Some(next) = read_version(&mut readers[r])? {
                    heap.push(Reverse((next, r)));
                }
                each(v, stats);
            }
        }
        settle(group.take(), stats);
        let resolution = Resolution {
            file,
            won,
            count: self.count,
        };
        // The live records without a landing page that won, from the file.
        let mut reader = resolution.read()?;
        let mut seq = 0usize;
        while let Some(o) = reader.next_occurrence()? {
            if o.state == 1 && !superseded.contains(seq) {
                stats.no_landing_page += 1;
            }
            seq += 1;
        }
        Ok(resolution)
    }
}

fn read_version(input: &mut RunReader) -> Result<Option<Version>, Error> {
    let Some(high) = input.fixed_or_end()? else {
        return Ok(None);
    };
    let low = input.fixed()?;
    Ok(Some(Version {
        landing: u128::from(high) << 64 | u128::from(low),
        datestamp: input.fixed()? as i64,
        seq: input.varint()? as u32,
        typed: input.varint()? != 0,
    }))
}

/// Which occurrences won, and the file of every occurrence.
#[derive(Debug)]
pub struct Resolution {
    file: Option<Run>,
    /// A bit per occurrence: whether its entries are published.
    won: Vec<u64>,
    count: u32,
}

impl Resolution {
    /// Whether occurrence `seq` won.
    pub fn won(&self, seq: usize) -> bool {
        self.won
            .get(seq / 64)
            .is_some_and(|w| w & (1 << (seq % 64)) != 0)
    }

    /// The occurrences in harvest order.
    ///
    /// # Errors
    ///
    /// [`Error::Spill`] when their file cannot be read.
    pub fn read(&self) -> Result<OccurrenceReader, Error> {
        Ok(OccurrenceReader {
            input: self.file.as_ref().map(Run::read).transpose()?,
            left: self.count,
        })
    }
}

/// One occurrence as read back: its entries' lengths by profile, packed datestamp and state
/// (0 deleted, 1 without a landing page, 2 with one).
#[derive(Clone, Copy, Debug)]
pub struct Occurrence {
    /// Its entries' lengths by column (0: none).
    pub lens: Lens,
    /// Its datestamp, packed.
    pub datestamp: i64,
    state: u64,
}

/// Reads the occurrences front to back.
pub struct OccurrenceReader {
    input: Option<RunReader>,
    left: u32,
}

impl OccurrenceReader {
    /// The next occurrence; `None` after the last.
    ///
    /// # Errors
    ///
    /// [`Error::Spill`] when their file cannot be read.
    pub fn next_occurrence(&mut self) -> Result<Option<Occurrence>, Error> {
        let Some(input) = self.input.as_mut().filter(|_| self.left > 0) else {
            return Ok(None);
        };
        self.left -= 1;
        let mut lens: Lens = [0; COLUMNS];
        for len in &mut lens {
            *len = input.varint()? as u32;
        }
        Ok(Some(Occurrence {
            lens,
            datestamp: input.fixed()? as i64,
            state: input.varint()?,
        }))
    }
}
