//! The profiles' temporary files, apart from any one profile: shard files written as entries
//! come (with direct I/O when they will be linked into place, not read back), settled once the
//! winners are known (kept as they stand, a few lost entries blanked out, or marked to be cut
//! again), append-only spill files and a reader that skips what it is not asked for. Which
//! entries won is [`crate::profiles::versions`]'s; what the entries are,
//! [`crate::profiles::signposts`]'s.
//!
//! Errors: [`FilesError::ShardFile`](crate::FilesError::ShardFile) for a shard file,
//! [`FilesError::CdifSpill`](crate::FilesError::CdifSpill) for the CDIF documents' file,
//! [`FilesError::InventoryFull`](crate::FilesError::InventoryFull) for an entry past 32 bits.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Seek, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use oai_pmh::Datestamp;

use crate::FilesError as Error;
use crate::disk::write::{Chunk, DirectWriter};
use crate::profiles::versions::Resolution;
use crate::published;
use crate::sitemap::{URLSET_CLOSE, XML_DECL, frame, header};
use crate::{Limits, Shard};

/// The folder the CDIF documents' temporary file is made in (the OS's temporary folder), as
/// [`Error::CdifSpill`] names it.
pub fn temp_dir() -> PathBuf {
    std::env::temp_dir()
}

/// The error of the CDIF documents' temporary file, while doing `action` with it: a
/// [`Error::CdifSpill`].
pub fn spill_error(action: &'static str) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::CdifSpill { action, source }
}

/// An append-only temporary file of the CDIF documents.
#[derive(Debug)]
pub struct Spill {
    out: BufWriter<File>,
}

impl Spill {
    /// A new, empty file.
    ///
    /// # Errors
    ///
    /// [`Error::CdifSpill`] when the file cannot be made.
    pub fn new() -> Result<Self, Error> {
        let file = tempfile::tempfile().map_err(spill_error("create"))?;
        Ok(Self {
            out: BufWriter::with_capacity(1 << 20, file),
        })
    }

    /// Appends `bytes`; their length.
    ///
    /// # Errors
    ///
    /// [`Error::InventoryFull`] past 4 GiB, [`Error::CdifSpill`] when the write fails.
    pub fn append(&mut self, bytes: &[u8]) -> Result<u32, Error> {
        let len = u32::try_from(bytes.len()).map_err(|_| Error::InventoryFull)?;
        self.out.write_all(bytes).map_err(spill_error("write"))?;
        Ok(len)
    }

    /// The file, written out.
    ///
    /// # Errors
    ///
    /// [`Error::CdifSpill`] when the last write fails.
    pub fn finish(self) -> Result<Spilled, Error> {
        self.out
            .into_inner()
            .map(Spilled)
            .map_err(|e| spill_error("write")(e.into_error()))
    }
}

/// A temporary file written out ([`Spill::finish`], [`ShardFile::open`]), to be read back.
#[derive(Debug)]
pub struct Spilled(File);

impl Spilled {
    /// A reader from its start ([`SpillReader`]).
    ///
    /// # Errors
    ///
    /// The OS's error when the file cannot be rewound.
    pub fn reader(&self) -> std::io::Result<SpillReader<'_>> {
        SpillReader::new(&self.0)
    }

    /// Appends its bytes, all of them, to `into`.
    ///
    /// # Errors
    ///
    /// The OS's error when the file cannot be rewound or read.
    pub(crate) fn read_all(&self, into: &mut Vec<u8>) -> std::io::Result<usize> {
        use std::io::Read;
        let mut file = &self.0;
        file.rewind()?;
        file.read_to_end(into)
    }
}

/// The folder of the shard files: a new hidden folder in `parent`, made when the first file is,
/// and removed with what is left in it when dropped (files linked elsewhere stay there).
#[derive(Debug)]
pub struct SpillFolder {
    /// The folder the hidden folder is made in.
    pub parent: PathBuf,
    dir: Option<tempfile::TempDir>,
    /// Write the files with direct I/O, not through the page cache: they are published as they
    /// are (linked into place) and can be large, as the export writes its other large files.
    /// Files that will be read back, and small ones, are written through it.
    pub direct: bool,
}

impl SpillFolder {
    /// A folder to be made in `parent` when the first file is, written through the page cache.
    pub fn new(parent: PathBuf) -> Self {
        Self {
            parent,
            dir: None,
            direct: false,
        }
    }

    /// The folder, made now if it is not yet.
    ///
    /// # Errors
    ///
    /// [`FilesError::Io`](crate::FilesError::Io) when it cannot be made.
    pub fn path(&mut self) -> Result<&Path, Error> {
        if self.dir.is_none() {
            let dir = tempfile::Builder::new()
                .prefix(".oai-bridge-shards-")
                .tempdir_in(&self.parent)
                .map_err(Error::io(
                    "cannot make a folder for the profiles' shard files in",
                    &self.parent,
                ))?;
            self.dir = Some(dir);
        }
        Ok(self.dir.as_ref().expect("made above").path())
    }
}

/// The Signmap's or OCX's entries, written into shard files as they come: a file is closed
/// when the next entry would take it past the limits (the rule of the sitemap's shards,
/// [`Limits::overflows`]).
#[derive(Debug)]
pub struct ShardSpill {
    /// The profile's column of the entries' lengths (`lens`), and its name.
    column: usize,
    profile: &'static str,
    /// The root start tag of the profile's `urlset`s.
    open: &'static str,
    /// The file being filled: its writer, what it holds so far and the hash of its bytes.
    current: Option<(DirectWriter, ShardFile, published::Hasher)>,
    /// The writers' buffer, from one file to the next.
    spare: Option<Chunk>,
    /// The files filled, in order.
    done: Vec<ShardFile>,
}

impl ShardSpill {
    /// The shard files of the profile of `column` (named `profile` in files and errors), each a
    /// `urlset` opened by `open`.
    pub fn new(column: usize, profile: &'static str, open: &'static str) -> Self {
        Self {
            column,
            profile,
            open,
            current: None,
            spare: None,
            done: Vec::new(),
        }
    }

    /// Writes an entry (with `lastmod`) into the current file, or into a new one when it would
    /// take the current one past `limits`; its length.
    ///
    /// # Errors
    ///
    /// [`Error::InventoryFull`] for an entry past 4 GiB, [`Error::Io`] when the folder cannot
    /// be made, [`Error::ShardFile`] when a file cannot be made or written.
    pub fn append(
        &mut self,
        folder: &mut SpillFolder,
        limits: Limits,
        entry: &[u8],
        lastmod: Option<Datestamp>,
    ) -> Result<u32, Error> {
        let len = u32::try_from(entry.len()).map_err(|_| Error::InventoryFull)?;
        if let Some((_, file, _)) = &self.current
            && limits.overflows(file.urls, file.bytes + entry.len(), frame(self.open))
        {
            self.close()?;
        }
        if self.current.is_none() {
            self.current = Some(self.start(folder)?);
        }
        let (out, file, hasher) = self.current.as_mut().expect("started above");
        out.write_all(entry).map_err(file.error("write"))?;
        hasher.update(entry);
        file.urls += 1;
        file.bytes += entry.len();
        file.newest = file.newest.max(lastmod);
        Ok(len)
    }

    /// A new file, with the declaration and the root start tag written.
    fn start(
        &mut self,
        folder: &mut SpillFolder,
    ) -> Result<(DirectWriter, ShardFile, published::Hasher), Error> {
        let name = format!(
            "{}-{}.xml",
            self.profile.to_ascii_lowercase(),
            self.done.len() + 1
        );
        let file = ShardFile {
            profile: self.profile,
            path: folder.path()?.join(name),
            urls: 0,
            bytes: header(self.open),
            newest: None,
            cut: None,
            hash: None,
        };
        let spare = self.spare.take();
        let mut out =
            DirectWriter::create(&file.path, folder.direct, spare).map_err(file.error("create"))?;
        out.write_all(XML_DECL.as_bytes())
            .and_then(|()| out.write_all(self.open.as_bytes()))
            .map_err(file.error("write"))?;
        let mut hasher = published::Hasher::new();
        hasher.update(XML_DECL.as_bytes());
        hasher.update(self.open.as_bytes());
        Ok((out, file, hasher))
    }

    /// Closes the current file, if any: the close tag, written out.
    fn close(&mut self) -> Result<(), Error> {
        if let Some((mut out, mut file, mut hasher)) = self.current.take() {
            out.write_all(URLSET_CLOSE.as_bytes())
                .map_err(file.error("write"))?;
            self.spare = Some(out.finish().map_err(file.error("write"))?.1);
            file.bytes += URLSET_CLOSE.len();
            hasher.update(URLSET_CLOSE.as_bytes());
            file.hash = Some(hasher.finish());
            self.done.push(file);
        }
        Ok(())
    }

    /// Every file, closed and settled now that the winners are known (the entries' lengths
    /// are column `self.column` of each occurrence's in `resolution`): a file whose entries all
    /// won stays as it is; one that lost a few has them blanked out (see
    /// `ShardFile::settle`); one that lost more is marked to be cut again from its winners'
    /// entries.
    ///
    /// # Errors
    ///
    /// [`Error::ShardFile`] when a file cannot be written, read or opened, or what reading
    /// the occurrences back from `resolution` failed with ([`Error::Spill`]).
    pub fn finish(mut self, resolution: &Resolution) -> Result<Vec<ShardFile>, Error> {
        self.close()?;
        let column = self.column;
        let header = header(self.open) as u64;
        let mut occurrences = resolution.read()?;
        let mut seq = 0usize;
        // The next occurrence with an entry in this profile: its number, length and datestamp.
        let mut next_entry = || -> Result<Option<(usize, u32, i64)>, Error> {
            while let Some(o) = occurrences.next_occurrence()? {
                seq += 1;
                if o.lens[column] > 0 {
                    return Ok(Some((seq - 1, o.lens[column], o.datestamp)));
                }
            }
            Ok(None)
        };
        let mut kept = Vec::new();
        let mut lost = Vec::new();
        for file in &mut self.done {
            kept.clear();
            lost.clear();
            // A file holds the next `urls` entries written, in order, after its header.
            let mut at = header;
            for _ in 0..file.urls {
                let (seq, len, datestamp) =
                    next_entry()?.expect("the files hold every entry written");
                if resolution.won(seq) {
                    kept.push((at, len, Datestamp::unpack_option(datestamp)));
                } else {
                    lost.push((at, len));
                }
                at += u64::from(len);
            }
            file.settle(&kept, &lost)?;
        }
        Ok(self.done)
    }
}

/// A shard file whose lost entries take at most this share of its bytes has them blanked out;
/// more, and it is cut again.
pub const BLANK_SHARE: u64 = 16;

/// A shard file of the Signmap or OCX written during the harvest: a whole `urlset`.
#[derive(Debug)]
pub struct ShardFile {
    /// The profile's name, for errors.
    profile: &'static str,
    path: PathBuf,
    urls: usize,
    /// Its length (the close tag counted once written).
    bytes: usize,
    newest: Option<Datestamp>,
    /// Set when it is to be cut again: the winners' entries in it (offset, length, lastmod).
    pub cut: Option<Vec<(u64, u32, Option<Datestamp>)>>,
    /// [`published::hash`] of its bytes, computed as they were written (again once
    /// entries are blanked out); `None` until it is closed.
    hash: Option<u64>,
}

impl ShardFile {
    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The entries in it.
    pub fn urls(&self) -> usize {
        self.urls
    }

    /// The newest lastmod in it: the index's `lastmod` for it.
    pub fn newest(&self) -> Option<Datestamp> {
        self.newest
    }

    /// Its length.
    pub fn size(&self) -> usize {
        self.bytes
    }

    /// [`published::hash`] of its bytes, once it is closed.
    pub fn hash(&self) -> Option<u64> {
        self.hash
    }

    /// Its bytes.
    ///
    /// # Errors
    ///
    /// [`Error::ShardFile`] when it cannot be read.
    pub fn read(&self) -> Result<Vec<u8>, Error> {
        std::fs::read(&self.path).map_err(self.error("read"))
    }

    /// The file opened, to be read back ([`Spilled::reader`]).
    ///
    /// # Errors
    ///
    /// [`Error::ShardFile`] when it cannot be opened.
    pub fn open(&self) -> Result<Spilled, Error> {
        File::open(&self.path)
            .map(Spilled)
            .map_err(self.error("open"))
    }

    /// Takes out the `lost` entries (offset, length) of those written, the `kept` ones (offset,
    /// length, lastmod) staying. When they are few (at most 1/[`BLANK_SHARE`] of the bytes),
    /// they are overwritten in place with spaces and a newline, which XML allows between
    /// elements: the file is still published as it stands, at the cost of a few blank lines.
    /// A handful of records loses in most full harvests (a landing page two records give, a
    /// record changed while it was harvested), and cutting every file again for them took
    /// longer than writing the files. Otherwise the file is marked to be cut again.
    fn settle(
        &mut self,
        kept: &[(u64, u32, Option<Datestamp>)],
        lost: &[(u64, u32)],
    ) -> Result<(), Error> {
        if lost.is_empty() {
            return Ok(());
        }
        self.urls = kept.len();
        self.newest = kept.iter().map(|&(.., lastmod)| lastmod).max().flatten();
        let lost_bytes: u64 = lost.iter().map(|&(_, len)| u64::from(len)).sum();
        // A file left without an entry is not published (the schema wants one in a urlset).
        if kept.is_empty() || lost_bytes * BLANK_SHARE > self.bytes as u64 {
            self.cut = Some(kept.to_vec());
            return Ok(());
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.path)
            .map_err(self.error("open"))?;
        // Each lost entry's bytes are read before it is blanked: the file's hash moves by them
        // alone (published::rehash), so the file is not read back whole to be hashed again.
        let (mut old, mut blank) = (Vec::new(), Vec::new());
        for &(at, len) in lost {
            old.resize(len as usize, 0);
            file.read_exact_at(&mut old, at)
                .map_err(self.error("read"))?;
            blank.clear();
            blank.resize(len as usize - 1, b' ');
            blank.push(b'\n');
            file.write_all_at(&blank, at).map_err(self.error("write"))?;
            self.hash = (self.hash).map(|hash| {
                published::rehash(hash, self.bytes as u64, [(at, &old[..], &blank[..])])
            });
        }
        drop(file);
        if self.hash.is_none() {
            self.hash = Some(published::hash(&self.read()?));
        }
        debug_assert_eq!(self.hash, Some(published::hash(&self.read()?)));
        Ok(())
    }

    /// The error of this file, while doing `action` with it (the path copied only then: an
    /// error made ready for every entry written cost more than writing it): a
    /// [`Error::ShardFile`].
    pub fn error(&self, action: &'static str) -> impl FnOnce(std::io::Error) -> Error + '_ {
        move |source| Error::ShardFile {
            profile: self.profile,
            action,
            path: self.path.clone(),
            source,
        }
    }
}

/// A shard of a profile with a column of shards (the Signmap, OCX), as [`Resolved::render`]
/// hands it over.
///
/// [`Resolved::render`]: crate::profiles::signposts::Resolved::render
#[derive(Debug)]
pub enum ProfileShard<'a> {
    /// A file written during the harvest, published as it stands (the few entries of it that
    /// lost blanked out).
    File(&'a ShardFile),
    /// Cut in memory from the published entries of a file some of whose entries lost to
    /// newer records.
    Cut(&'a Shard),
}

/// Reads entries from a temporary file front to back, skipping those not asked for.
pub struct SpillReader<'a> {
    reader: BufReader<&'a File>,
    /// The file offset `reader` is at.
    at: u64,
}

impl<'a> SpillReader<'a> {
    /// Reads `file` from its start.
    ///
    /// # Errors
    ///
    /// The OS's error when `file` cannot be rewound.
    pub fn new(file: &'a File) -> std::io::Result<Self> {
        Self::with_capacity(file, 1 << 20)
    }

    /// Reads `file` from its start through a buffer of `capacity` bytes.
    ///
    /// # Errors
    ///
    /// The OS's error when `file` cannot be rewound.
    pub(crate) fn with_capacity(file: &'a File, capacity: usize) -> std::io::Result<Self> {
        // Readers of one file share its position: each starts over.
        let mut start = file;
        start.rewind()?;
        Ok(Self {
            reader: BufReader::with_capacity(capacity, file),
            at: 0,
        })
    }

    /// Appends the `len` bytes at offset `at` (not before the last read's end) to `into`.
    ///
    /// # Errors
    ///
    /// The OS's error when reading fails, an error when `at` is before the last read's end or
    /// the file ends before `len` bytes.
    pub fn read(&mut self, at: u64, len: u32, into: &mut Vec<u8>) -> std::io::Result<()> {
        let skip = at
            .checked_sub(self.at)
            .and_then(|s| i64::try_from(s).ok())
            .ok_or_else(|| std::io::Error::other("entries are read front to back"))?;
        self.reader.seek_relative(skip)?;
        let mut left = len as usize;
        while left > 0 {
            let buf = self.reader.fill_buf()?;
            if buf.is_empty() {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            let n = buf.len().min(left);
            into.extend_from_slice(&buf[..n]);
            self.reader.consume(n);
            left -= n;
        }
        self.at = at + u64::from(len);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Skipped entries past the reader's buffer are sought over; a second pass starts over.
    #[test]
    fn the_reader_skips_past_its_buffer_and_starts_over() {
        let mut spill = Spill::new().unwrap();
        for text in ["first-", "second-entry-", "third"] {
            spill.append(text.as_bytes()).unwrap();
        }
        let file = spill.finish().unwrap();
        for _ in 0..2 {
            let mut reader = SpillReader::with_capacity(&file.0, 4).unwrap();
            let mut out = Vec::new();
            reader.read(0, 6, &mut out).unwrap();
            reader.read(19, 5, &mut out).unwrap();
            assert_eq!(out, b"first-third");
            let err = reader.read(0, 1, &mut out).unwrap_err().to_string();
            assert!(err.contains("entries are read front to back"), "{err}");
            let mut past = SpillReader::with_capacity(&file.0, 4).unwrap();
            assert!(past.read(20, 10, &mut Vec::new()).is_err(), "past the end");
        }
    }
}
