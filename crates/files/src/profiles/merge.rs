//! Patching the profiles' published files after an incremental harvest (issue 30, point 5):
//! the Signmap, OCX, CDIF's metadata lists and the DiWoo categories are made from the files
//! published last and the records changed since, not from every stored record, and come out
//! byte for byte as a render from the store would make them.
//!
//! A render from the store fills these files densely (each shard as full as the limits allow),
//! so one entry that comes or goes moves every entry after it from shard to shard: a patch
//! cannot keep shards apart as the sitemap's does ([`crate::patch`]). It streams instead: the
//! published files are read one after another (checked against the length and hash the ledger
//! recorded), their entries taken in order and the changed records' merged in, and the result
//! cut into shards again by the rule every render uses ([`Urlsets`], `cdif::ItemLists`).
//! The Signmap's, OCX's and the lists' entries are in identifier order, which only the ledger
//! knows ([`super::ledger`]); the DiWoo categories' are in URL order, and say their URL.
//! Copying bytes costs a fraction of reading every record back, classifying it and writing
//! its entries again.
//!
//! Not patched (the caller renders every record): CDIF's documents one by one (an export's
//! folder is made anew, and a million documents linked or written one by one cost what the
//! render does), a landing page or URL several records give (the ledger keeps one row per
//! record, and such a URL's entry is decided among records not at hand), and anything the
//! published files or the ledger do not confirm.

use oai_pmh::Datestamp;
use url::Url;

use crate::patch::{Entries, ReadShard, Unpatchable, refuse};
use crate::sitemap::{URLSET_CLOSE, URLSET_OPEN, Urlsets, frame, header, write_url};
use crate::{Limits, Shard};

use super::cdif::{self, CdifDocument};
use super::diwoo::{self, DiwooStats};
use super::files::{FileSink, Shards};
use super::ledger::{FileRecord, Head, Row, RowReader, Rows, SharedClaims};
use super::record::SignStats;
use super::registry::Indexes;
use super::{
    COLUMN_PROFILES, COLUMN_SPECS, COLUMNS, ColumnKind, DOCUMENT_KEY_LEN, Profile, ProfileSettings,
};
use crate::FilesError;
use crate::disk::profiles::BLANK_SHARE;
use crate::disk::read::Windows;
use crate::disk::write::{FileStream, HASH_STRETCH};

/// OCX's column, whose entries are counted apart.
const OCX: usize = Profile::Ocx.column().0;

/// The kind of column `c`.
fn kind(c: usize) -> ColumnKind {
    COLUMN_SPECS[c].kind
}

/// The changed records, as the patch merges them.
pub struct Changes {
    /// Every changed record's identifier, sorted: their published rows and entries leave.
    pub gone: Vec<String>,
    /// The rows of the changed records live now, by identifier (their entries that lost among
    /// themselves not marked: [`Changes::decided`] decides).
    pub fresh: Rows,
    /// Their entries one after another in each column (a document with its name's hash in
    /// front: [`super::signposts::Resolved::entry_streams`]), lost ones too.
    pub streams: [Vec<u8>; COLUMNS],
    /// The landing pages (hashes) the change touches, each with the identifier of the record
    /// whose entries win it and how many records give it. (foldhash: looked up for every row;
    /// std's SipHash showed.)
    pub decided: foldhash::HashMap<u128, (String, usize)>,
    /// For each column of shards, whether each entry that lost in the published files (in
    /// order) is there, blanked out, or was cut out with its file ([`BlankReplay`]).
    pub blanked: [Vec<bool>; COLUMNS],
    /// Each DiWoo category's changes, in the categories' order.
    pub diwoo: Vec<CategoryChanges>,
    /// The URLs several records give, after the change.
    pub shared: Vec<SharedClaims>,
}

/// The changes of one DiWoo category.
#[derive(Debug, Default)]
pub struct CategoryChanges {
    /// URLs that leave its files, sorted, each once.
    pub removed: Vec<String>,
    /// URLs that come, with their lastmod, sorted, each once.
    pub added: Vec<(String, Option<Datestamp>)>,
    /// What its counts of URLs not published lose: not https, no lastmod.
    pub uncounted: [u64; 2],
}

/// A patch of the profiles' published files, checked as far as it can be before they are read.
pub struct ProfilePatch {
    ledger: Vec<u8>,
    head: Head,
    changes: Changes,
    read: ReadShard,
}

impl std::fmt::Debug for ProfilePatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProfilePatch")
            .field("rows", &self.head.rows)
            .field("gone", &self.changes.gone.len())
            .field("fresh", &self.changes.fresh.count())
            .finish_non_exhaustive()
    }
}

impl ProfilePatch {
    /// A patch of the files the ledger `ledger` describes (its head `head`), with `changes`;
    /// `read` reads the published files by name.
    pub fn new(ledger: Vec<u8>, head: Head, changes: Changes, read: ReadShard) -> Self {
        Self {
            ledger,
            head,
            changes,
            read,
        }
    }

    /// The URLs several records give, after the change.
    pub fn shared(&self) -> &[SharedClaims] {
        &self.changes.shared
    }
}

/// What a patch of the profiles wrote.
#[derive(Debug)]
pub struct Patched {
    /// The indexes written: the Signmap's and OCX's, when they have a shard; CDIF lists'
    /// sitemap's, with the number of lists, when there are lists.
    pub indexes: Indexes,
    /// The landing-page profiles' counts after the patch.
    pub stats: SignStats,
    /// The ledger's rows after the patch.
    pub rows: Rows,
}

/// An entry of the Signmap or OCX: its bytes, or only its length when it lost (or in a dry
/// run).
#[derive(Clone, Copy)]
enum Entry<'e> {
    Won(&'e [u8], Option<Datestamp>),
    Lost(usize),
    /// A winner of a dry run, of this length.
    Sized(usize),
}

/// The shard files a collection writes entries into and how they are settled once the winners
/// are known ([`crate::disk::profiles::ShardSpill`], [`super::signposts::Resolved`]'s render), replayed:
/// a file closes when the next entry, won or lost, would take it past the limits; a file
/// without a lost entry is published as it stands, one whose lost entries are at most
/// 1/[`BLANK_SHARE`] of its bytes with them blanked out, and the winners of the others are cut
/// into shards again, consecutive files together. `shards` is `None` for a dry run, which only
/// tells which lost entries are blanked out ([`replay_blanked`]).
struct Files<'a> {
    open: &'a str,
    limits: Limits,
    shards: Option<Shards<'a>>,
    /// The file being filled: its bytes (lost entries blanked; none in a dry run), length,
    /// entries, the winners' (offset, length, lastmod) and the lost ones' lengths.
    file: Vec<u8>,
    size: usize,
    urls: usize,
    kept: Vec<(usize, usize, Option<Datestamp>)>,
    lost: Vec<usize>,
    /// The winners of consecutive files cut again.
    cut: Option<Urlsets<'a>>,
    /// Of each lost entry, in order: whether it was blanked out (else cut out).
    blanked: Vec<bool>,
    /// The file being filled, when it is written as it fills ([`FileSink::stream`]): its
    /// name and stream. `file` then holds only the header.
    stream: Option<(String, FileStream)>,
    /// A streamed file read back to be cut again (rare: its lost entries took more than
    /// 1/[`BLANK_SHARE`] of it).
    back: Vec<u8>,
}

/// Spaces, to blank out a lost entry in a streamed file.
const SPACES: [u8; 256] = [b' '; 256];

impl<'a> Files<'a> {
    fn new(open: &'a str, limits: Limits, shards: Option<Shards<'a>>) -> Self {
        let mut file = Vec::new();
        if shards.is_some() {
            file.extend_from_slice(crate::sitemap::XML_DECL.as_bytes());
            file.extend_from_slice(open.as_bytes());
        }
        Self {
            open,
            limits,
            shards,
            file,
            size: header(open),
            urls: 0,
            kept: Vec::new(),
            lost: Vec::new(),
            cut: None,
            blanked: Vec::new(),
            stream: None,
            back: Vec::new(),
        }
    }

    fn push<S: FileSink>(&mut self, sink: &mut S, entry: Entry<'_>) -> Result<(), S::Error> {
        let len = match entry {
            Entry::Won(bytes, _) => bytes.len(),
            Entry::Lost(len) | Entry::Sized(len) => len,
        };
        if self
            .limits
            .overflows(self.urls, self.size + len, frame(self.open))
        {
            self.close(sink)?;
        }
        // A file starts: written as it fills when the sink streams, unless shards cut again
        // are still to be numbered before it.
        if let Some(shards) = self
            .shards
            .as_ref()
            .filter(|_| self.urls == 0 && self.cut.is_none())
        {
            self.stream = shards.open_next(sink)?;
            if let Some((_, stream)) = &mut self.stream {
                stream.write(&self.file).map_err(FilesError::Stream)?;
            }
        }
        let at = self.size;
        self.size += len;
        match entry {
            Entry::Won(bytes, lastmod) => {
                self.kept.push((at, len, lastmod));
                match &mut self.stream {
                    Some((_, stream)) => stream.write(bytes).map_err(FilesError::Stream)?,
                    None if self.shards.is_some() => self.file.extend_from_slice(bytes),
                    None => {}
                }
            }
            Entry::Sized(len) => self.kept.push((at, len, None)),
            Entry::Lost(len) => {
                self.lost.push(len);
                // As `ShardFile::settle` blanks it: spaces and a line feed.
                let spaces = len.saturating_sub(1);
                match &mut self.stream {
                    Some((_, stream)) => {
                        let mut left = spaces;
                        while left > 0 {
                            let n = left.min(SPACES.len());
                            stream.write(&SPACES[..n]).map_err(FilesError::Stream)?;
                            left -= n;
                        }
                        stream.write(b"\n").map_err(FilesError::Stream)?;
                    }
                    None if self.shards.is_some() => {
                        self.file.resize(self.file.len() + spaces, b' ');
                        self.file.push(b'\n');
                    }
                    None => {}
                }
            }
        }
        self.urls += 1;
        Ok(())
    }

    /// Closes the file being filled, published, blanked or cut as a render settles it.
    fn close<S: FileSink>(&mut self, sink: &mut S) -> Result<(), S::Error> {
        if self.urls == 0 {
            return Ok(());
        }
        let bytes = self.size + URLSET_CLOSE.len();
        let lost: usize = self.lost.iter().sum();
        let cut = !self.lost.is_empty()
            && (self.kept.is_empty() || lost as u64 * BLANK_SHARE > bytes as u64);
        self.blanked.extend(self.lost.iter().map(|_| !cut));
        if let Some(shards) = &mut self.shards {
            let newest = self.kept.iter().map(|k| k.2).max().flatten();
            let mut from = None;
            if let Some((name, mut stream)) = self.stream.take() {
                if !cut {
                    stream
                        .write(URLSET_CLOSE.as_bytes())
                        .map_err(FilesError::Stream)?;
                    shards.end_next(sink, (name, stream), newest)?;
                    self.reset();
                    return Ok(());
                }
                // Its winners are cut again from the bytes as written.
                sink.end_stream(&name, stream)?;
                from = Some(sink.take_back(&name, &mut self.back)?);
            }
            if cut {
                let urlsets = self
                    .cut
                    .get_or_insert_with(|| Urlsets::new(self.open, self.limits));
                let bytes = match from {
                    Some(start) => &self.back[start..],
                    None => &self.file[..],
                };
                for &(at, len, lastmod) in &self.kept {
                    let entry = &bytes[at..at + len];
                    urlsets.push(
                        |b| {
                            b.extend_from_slice(entry);
                            lastmod
                        },
                        |shard| shards.put(sink, shard),
                    )?;
                }
            } else {
                if let Some(urlsets) = self.cut.take() {
                    urlsets.finish(|shard| shards.put(sink, shard))?;
                }
                self.file.extend_from_slice(URLSET_CLOSE.as_bytes());
                let shard = Shard {
                    bytes: std::mem::take(&mut self.file),
                    urls: self.kept.len(),
                    newest,
                };
                shards.put(sink, &shard)?;
                self.file = shard.bytes;
            }
        }
        self.reset();
        Ok(())
    }

    /// Empties the file being filled, for the next.
    fn reset(&mut self) {
        if self.shards.is_some() {
            self.file.clear();
            self.file
                .extend_from_slice(crate::sitemap::XML_DECL.as_bytes());
            self.file.extend_from_slice(self.open.as_bytes());
        }
        self.size = header(self.open);
        self.urls = 0;
        self.kept.clear();
        self.lost.clear();
    }

    /// The last file and cut shards; the index's URL.
    fn finish<S: FileSink>(mut self, sink: &mut S) -> Result<Option<Url>, S::Error> {
        self.close(sink)?;
        let Some(mut shards) = self.shards else {
            return Ok(None);
        };
        if let Some(urlsets) = self.cut.take() {
            urlsets.finish(|shard| shards.put(sink, shard))?;
        }
        shards.finish(sink)
    }
}

/// A sink that stores nothing, for a dry run of [`Files`].
struct Nowhere;

impl FileSink for Nowhere {
    type Error = FilesError;

    fn put(&mut self, _: &str, _: &[u8]) -> Result<(), FilesError> {
        Ok(())
    }
}

/// Which of the entries that lost in the files a ledger's rows describe (in order, for each
/// column of shards) are there blanked out, rather than cut out with their file: the rows
/// given one after another ([`BlankReplay::row`]), as the ledger is read for other ends too.
pub struct BlankReplay {
    /// A dry run of each column of shards' files.
    files: [Option<Files<'static>>; COLUMNS],
}

impl BlankReplay {
    /// A replay of files cut within `limits`.
    pub fn new(limits: Limits) -> Self {
        Self {
            files: std::array::from_fn(|c| match kind(c) {
                ColumnKind::Urlset { open } => Some(Files::new(open, limits, None)),
                ColumnKind::Documents => None,
            }),
        }
    }

    /// The next row.
    ///
    /// # Errors
    ///
    /// When the row's entries cannot be replayed into the files the ledger describes
    /// ([`Unpatchable`]).
    pub fn row(&mut self, row: &super::ledger::Row<'_>) -> Result<(), Unpatchable> {
        for (files, &len) in self.files.iter_mut().zip(&row.lens) {
            let (Some(files), len) = (files, len as usize) else {
                continue;
            };
            if row.landing && len > 0 {
                let entry = if row.lost {
                    Entry::Lost(len)
                } else {
                    Entry::Sized(len)
                };
                files.push(&mut Nowhere, entry).map_err(never)?;
            }
        }
        Ok(())
    }

    /// Of each lost entry of each column of shards, whether it is blanked out (none for
    /// another column).
    ///
    /// # Errors
    ///
    /// When the files replayed do not end as the ledger describes them ([`Unpatchable`]).
    pub fn finish(self) -> Result<[Vec<bool>; COLUMNS], Unpatchable> {
        let mut blanked: [Vec<bool>; COLUMNS] = Default::default();
        for (blanked, files) in blanked.iter_mut().zip(self.files) {
            if let Some(mut files) = files {
                files.close(&mut Nowhere).map_err(never)?;
                *blanked = files.blanked;
            }
        }
        Ok(blanked)
    }
}

impl Changes {
    /// The entries of the changed record `f` (a document without its name's hash), the next
    /// in each column's stream, whose cursor `at` moves past them.
    fn fresh_entries(
        &self,
        f: &Row<'_>,
        at: &mut [usize; COLUMNS],
    ) -> Result<[&[u8]; COLUMNS], Unpatchable> {
        let mut entries: [&[u8]; COLUMNS] = [&[]; COLUMNS];
        for (c, entry) in entries.iter_mut().enumerate() {
            let len = f.lens[c] as usize;
            *entry = (self.streams[c].get(at[c]..at[c] + len))
                .ok_or_else(|| Unpatchable("a changed record's entry is missing".into()))?;
            at[c] += len;
            if kind(c) == ColumnKind::Documents {
                *entry = entry.get(DOCUMENT_KEY_LEN..).unwrap_or_default();
            }
        }
        Ok(entries)
    }

    /// Whether `row`'s entries win its landing page, as the change decided it for the pages it
    /// touches (`fresh`: a changed record's row). A published record whose entries lost
    /// cannot win now: they were blanked or cut out, and are not at hand.
    fn settle(&self, row: &mut Row<'_>, fresh: bool) -> Result<(), Unpatchable> {
        let Some((winner, records)) = self.decided.get(&row.hash).filter(|_| row.landing) else {
            return Ok(());
        };
        let lost = winner != row.id;
        if row.lost && !lost && !fresh {
            return Err(Unpatchable(
                "a record whose entries lost now wins its landing page".into(),
            ));
        }
        row.lost = lost;
        row.dup = *records > 1;
        Ok(())
    }
}

impl SignStats {
    /// Counts one record's row of the patched files.
    fn count(&mut self, row: &Row<'_>) {
        if !row.landing {
            self.no_landing_page += 1;
        } else if row.lost {
            self.duplicate += 1;
        } else {
            self.published += 1;
            if row.lens[OCX] > 0 {
                self.ocx_published += 1;
            }
        }
    }
}

/// The published files of each column (a column of documents': CDIF's lists), read in the
/// ledger's order as a patch goes.
struct PublishedLanding<'p> {
    /// Each column's files.
    files: [Published<'p>; COLUMNS],
    changes: &'p Changes,
    /// Which lost entry of the published files is next, per column.
    lost_at: [usize; COLUMNS],
    /// Which of the changed records (`Changes::gone`) is next.
    gone: usize,
}

impl<'p> PublishedLanding<'p> {
    fn new(patch: &'p ProfilePatch) -> Self {
        Self {
            files: std::array::from_fn(|c| match kind(c) {
                ColumnKind::Urlset { open } => Published::urlsets(patch, COLUMN_PROFILES[c], open),
                ColumnKind::Documents => Published::lists(patch),
            }),
            changes: &patch.changes,
            lost_at: [0; COLUMNS],
            gone: 0,
        }
    }

    /// The entries of the published record `o` (a document without its name's hash; none for
    /// an entry that lost), read past in the files; `None` when the record changed since, and
    /// its row and entries leave.
    fn entries(&mut self, o: &Row<'_>) -> Result<Option<[&[u8]; COLUMNS]>, Unpatchable> {
        let gone = &self.changes.gone;
        while gone.get(self.gone).is_some_and(|g| g.as_str() < o.id) {
            self.gone += 1;
        }
        let leaves = gone.get(self.gone).is_some_and(|g| g == o.id);
        let mut entries: [&[u8]; COLUMNS] = [&[]; COLUMNS];
        if !o.landing {
            return Ok((!leaves).then_some(entries));
        }
        for (c, (file, entry)) in self.files.iter_mut().zip(&mut entries).enumerate() {
            let len = o.lens[c] as usize;
            if kind(c) == ColumnKind::Documents {
                // A document that lost is in no list.
                if !o.lost {
                    *entry = file.take(len.saturating_sub(DOCUMENT_KEY_LEN))?;
                }
                continue;
            }
            if len == 0 {
                continue;
            }
            if !o.lost {
                *entry = file.take(len)?;
                continue;
            }
            let blanked = self.changes.blanked[c].get(self.lost_at[c]).copied();
            self.lost_at[c] += 1;
            match blanked {
                Some(true) => file.take_blank(len)?,
                Some(false) => {}
                None => return refuse("the ledger's lost entries do not add up"),
            }
        }
        Ok((!leaves).then_some(entries))
    }

    /// Checks that every published entry was read.
    fn finished(&mut self) -> Result<(), Unpatchable> {
        self.files.iter_mut().try_for_each(Published::finished)
    }
}

/// The files of each column a patch writes, those the settings ask for: a column of shards'
/// shards, a column of documents' lists (CDIF's; its documents one by one are not patched).
struct LandingFiles<'a> {
    columns: [Option<ColumnFiles<'a>>; COLUMNS],
}

/// The files a patch writes of one column.
enum ColumnFiles<'a> {
    Shards(Files<'a>),
    Lists(cdif::Writer<'a>),
}

impl<'a> LandingFiles<'a> {
    fn new(public_url: &'a Url, limits: Limits, settings: &ProfileSettings) -> Self {
        let on = settings.profiles();
        Self {
            columns: std::array::from_fn(|c| match kind(c) {
                ColumnKind::Urlset { open } => on.contains(&COLUMN_PROFILES[c]).then(|| {
                    let shards = Shards::new(public_url, COLUMN_PROFILES[c], "xml");
                    ColumnFiles::Shards(Files::new(open, limits, Some(shards)))
                }),
                // CDIF's documents, patched in its lists only (the one column of documents).
                ColumnKind::Documents => (on.contains(&Profile::CdifList)).then(|| {
                    ColumnFiles::Lists(cdif::Writer::new(public_url, limits, false, true))
                }),
            }),
        }
    }

    /// Writes one record's `entries` (none but their lengths when they lost).
    fn write<S: FileSink>(
        &mut self,
        sink: &mut S,
        row: &Row<'_>,
        entries: &[&[u8]; COLUMNS],
    ) -> Result<(), S::Error> {
        if !row.landing {
            return Ok(());
        }
        let lastmod = Datestamp::unpack_option(row.datestamp);
        for ((files, &entry), &len) in self.columns.iter_mut().zip(entries).zip(&row.lens) {
            let len = len as usize;
            match files {
                Some(_) if len == 0 => {}
                Some(ColumnFiles::Shards(files)) => {
                    let entry = match row.lost {
                        true => Entry::Lost(len),
                        false => Entry::Won(entry, lastmod),
                    };
                    files.push(sink, entry)?;
                }
                Some(ColumnFiles::Lists(lists)) if !row.lost => {
                    let document = CdifDocument {
                        name: "",
                        url: None,
                        lastmod,
                        bytes: entry,
                    };
                    lists.add(sink, document)?;
                }
                Some(ColumnFiles::Lists(_)) | None => {}
            }
        }
        Ok(())
    }

    /// The last files and the indexes: each column of shards', and the lists' with their
    /// number.
    fn finish<S: FileSink>(self, sink: &mut S) -> Result<Indexes, S::Error> {
        let mut indexes = Indexes::default();
        for (files, profile) in self.columns.into_iter().zip(COLUMN_PROFILES) {
            match files {
                Some(ColumnFiles::Shards(files)) => indexes.add(profile, files.finish(sink)?),
                Some(ColumnFiles::Lists(lists)) => lists.finish(sink, &mut indexes)?,
                None => {}
            }
        }
        Ok(indexes)
    }
}

/// A dry run writes nothing, so it cannot fail to.
fn never(e: FilesError) -> Unpatchable {
    Unpatchable(e.to_string())
}

impl ProfilePatch {
    /// Writes the Signmap's, OCX's and CDIF lists' files the `settings` ask for into `sink`,
    /// the published entries merged with the changed records'. Fails, having written some,
    /// when a published file is not as the ledger recorded it or does not hold what the
    /// changes expect.
    ///
    /// # Errors
    ///
    /// When a published file is not as the ledger recorded it or does not hold what the changes
    /// expect ([`Unpatchable`]); what the sink fails with.
    pub(crate) fn write_landing<
        S: FileSink,
        E: From<Unpatchable> + From<FilesError> + From<S::Error>,
    >(
        &self,
        public_url: &Url,
        limits: Limits,
        settings: &ProfileSettings,
        sink: &mut S,
    ) -> Result<Patched, E> {
        let (_, rows) = super::ledger::decode(&self.ledger)?;
        let mut old = RowReader::new(rows)?;
        let changes = &self.changes;
        let mut fresh = RowReader::new(changes.fresh.as_bytes())?;
        let mut fresh_at = [0usize; COLUMNS];
        let mut published = PublishedLanding::new(self);
        let mut written = LandingFiles::new(public_url, limits, settings);
        let mut out = Rows::with_capacity(rows.len() + changes.fresh.as_bytes().len());
        let mut stats = SignStats::default();
        // Whether the row written last is the one before the old reader's in the ledger: an
        // unchanged row after it is copied as the ledger codes it.
        let mut after_old = true;
        // The ledger's rows and the changed records', merged by identifier.
        loop {
            let take_fresh = match (old.row(), fresh.row()) {
                (None, None) => break,
                (Some(o), Some(f)) => f.id < o.id,
                (None, Some(_)) => true,
                (Some(_), None) => false,
            };
            let (mut row, entries) = if take_fresh {
                let f = fresh.row().expect("matched above");
                (f, changes.fresh_entries(&f, &mut fresh_at)?)
            } else {
                let o = old.row().expect("matched above");
                let Some(entries) = published.entries(&o)? else {
                    // A changed record: its row and entries leave.
                    old.advance()?;
                    after_old = false;
                    continue;
                };
                if fresh.row().is_some_and(|f| f.id == o.id) {
                    let why = "a changed record is in the ledger as unchanged";
                    return Err(Unpatchable(why.into()).into());
                }
                (o, entries)
            };
            let was = row;
            changes.settle(&mut row, take_fresh)?;
            match !take_fresh && after_old && row == was {
                true => out.push_encoded(&row, old.encoded()),
                false => out.push(&row),
            }
            stats.count(&row);
            written.write(sink, &row, &entries)?;
            after_old = !take_fresh;
            if take_fresh {
                fresh.advance()?;
            } else {
                old.advance()?;
            }
        }
        published.finished()?;
        if settings.ocx.is_some() {
            stats.ocx_no_type = stats.published - stats.ocx_published;
        } else {
            stats.ocx_published = 0;
        }
        Ok(Patched {
            indexes: written.finish(sink)?,
            stats,
            rows: out,
        })
    }

    /// Writes the DiWoo categories' files (`categories`, in order) into `writer`: each
    /// category's published entries, with its changed URLs merged in by URL. What the counts
    /// that `writer` makes lack: the URLs each category counts without publishing them.
    ///
    /// # Errors
    ///
    /// When a category is not in the ledger, or its published files are not as recorded
    /// ([`Unpatchable`]); what the sink fails with.
    pub(crate) fn write_diwoo<
        S: FileSink,
        E: From<Unpatchable> + From<FilesError> + From<S::Error>,
    >(
        &self,
        categories: &[u8],
        writer: &mut diwoo::Writer<'_>,
        sink: &mut S,
    ) -> Result<Vec<[u64; 2]>, E> {
        let mut adjust = Vec::with_capacity(categories.len());
        let (mut entry, mut date) = (Vec::with_capacity(512), String::new());
        let mut add = |writer: &mut diwoo::Writer<'_>,
                       sink: &mut S,
                       bit: u32,
                       (url, lastmod): &(String, Option<Datestamp>)| {
            entry.clear();
            write_url(&mut entry, url, *lastmod, &mut date);
            writer.add(sink, &entry, *lastmod, bit)
        };
        for (g, (&category, changes)) in categories.iter().zip(&self.changes.diwoo).enumerate() {
            let bit = 1u32 << g;
            let recorded = self.head.diwoo.iter().find(|d| d[0] == u64::from(category));
            let Some(&[_, _, https, lastmod]) = recorded else {
                let why = format!("DiWoo category {category} is not in the ledger");
                return Err(Unpatchable(why).into());
            };
            let [less_https, less_lastmod] = changes.uncounted;
            let counts = https
                .checked_sub(less_https)
                .zip(lastmod.checked_sub(less_lastmod));
            let Some((https, lastmod)) = counts else {
                let why = format!("DiWoo category {category}'s counts do not add up");
                return Err(Unpatchable(why).into());
            };
            adjust.push([https, lastmod]);
            let (added, removed) = (&changes.added, &changes.removed);
            let mut file = Published::urlsets(self, Profile::Diwoo(category), URLSET_OPEN);
            let (mut r, mut a) = (0, 0);
            while let Some(bytes) = file.next_entry()? {
                let Some(old) = Entries::new(0, bytes).next().transpose()? else {
                    break;
                };
                // Compared as bytes: the file is checked once read ([`Published::finished`]).
                let url = old.url_bytes()?;
                let url = url.as_ref();
                while let Some(new) = added.get(a).filter(|(u, _)| u.as_bytes() < url) {
                    add(writer, sink, bit, new)?;
                    a += 1;
                }
                if removed.get(r).is_some_and(|u| u.as_bytes() < url) {
                    let why = format!("{} is not in DiWoo category {category}", removed[r]);
                    return Err(Unpatchable(why).into());
                }
                if removed.get(r).is_some_and(|u| u.as_bytes() == url) {
                    r += 1;
                    continue;
                }
                if added.get(a).is_some_and(|(u, _)| u.as_bytes() == url) {
                    let url = String::from_utf8_lossy(url);
                    let why = format!("{url} is now published by two records");
                    return Err(Unpatchable(why).into());
                }
                writer.add(sink, bytes, old.lastmod()?, bit)?;
            }
            file.finished()?;
            if let Some(url) = removed.get(r) {
                let why = format!("{url} is not in DiWoo category {category}");
                return Err(Unpatchable(why).into());
            }
            for new in &added[a..] {
                add(writer, sink, bit, new)?;
            }
        }
        Ok(adjust)
    }
}

/// A series of published files read one after another, each checked against its record in the
/// ledger, and the entries taken from them in order: `urlset` shards or CDIF lists. A file is
/// read a window at a time ([`Windows`]), hashed a little ahead of what is taken from it (while
/// those bytes are in the cache anyway) and checked once it has been read to its end (before
/// the next is read); what was made of a file that is not as recorded then fails the writing.
struct Published<'p> {
    read: &'p ReadShard,
    /// The files, in order.
    names: Vec<&'p FileRecord>,
    next: usize,
    /// `open` for `urlset` shards, `None` for lists.
    open: Option<&'static str>,
    file: Windows,
    /// Where the next entry starts in `file.bytes()`.
    at: usize,
    /// Where the current file's entries end in `file.bytes()`, once its last bytes are read.
    end: Option<usize>,
    /// Whether the next item of a list is its first.
    first: bool,
    /// The current file's record, and its CRC-32 so far: of what was read of it up to
    /// `hashed` in `file.bytes()`.
    record: Option<&'p FileRecord>,
    hasher: super::ledger::Hasher,
    hashed: usize,
}

/// The most bytes a file's closing takes (a `urlset`'s end tag, a list's end): until a file's
/// last bytes are read, its entries are taken only before as many bytes.
const CLOSING_MAX: usize = if URLSET_CLOSE.len() > cdif::LIST_END_MAX {
    URLSET_CLOSE.len()
} else {
    cdif::LIST_END_MAX
};

impl<'p> Published<'p> {
    /// The shards of `profile` whose root start tag is `open`.
    fn urlsets(patch: &'p ProfilePatch, profile: Profile, open: &'static str) -> Self {
        let name = |n| profile.shard_name(n, "xml");
        Self::of(&patch.head, &patch.read, name, Some(open))
    }

    /// CDIF's metadata lists.
    fn lists(patch: &'p ProfilePatch) -> Self {
        Self::of(&patch.head, &patch.read, Profile::list_name, None)
    }

    /// The files `head` records under the names `name` gives from 1 on, read through `read`.
    fn of(
        head: &'p Head,
        read: &'p ReadShard,
        name: impl Fn(u32) -> String,
        open: Option<&'static str>,
    ) -> Self {
        let names = (1..).map_while(|n| head.file(&name(n))).collect();
        Self {
            read,
            names,
            next: 0,
            open,
            file: Windows::new(),
            at: 0,
            // No file yet: the first is read at the first entry.
            end: Some(0),
            first: true,
            record: None,
            hasher: super::ledger::Hasher::new(),
            hashed: 0,
        }
    }

    /// The current file's name, for what is said of it.
    fn name(&self) -> &str {
        self.record.map_or("", |r| r.name.as_str())
    }

    /// Where the entries that may be taken end in `file.bytes()`: before the bytes that may be
    /// the file's closing, until its end is read.
    fn limit(&self) -> usize {
        (self.end).unwrap_or_else(|| self.file.bytes().len().saturating_sub(CLOSING_MAX))
    }

    /// Reads the current file's next window, keeping its bytes from `at` on, and hashes it; once
    /// the file's end is read, finds where its entries end.
    fn fill(&mut self) -> Result<(), Unpatchable> {
        // What goes is hashed (everything before `at`); what is kept moves.
        self.hash_to(self.at);
        let (at, _) = (self.file.fill(self.at))
            .map_err(|e| Unpatchable(format!("{} cannot be read: {e}", self.name())))?;
        self.hashed = at + (self.hashed - self.at);
        self.at = at;
        if self.file.eof() {
            let tail = &self.file.bytes()[at..];
            let entries = match self.open {
                Some(_) => (tail.strip_suffix(URLSET_CLOSE.as_bytes())).map(<[u8]>::len),
                None => cdif::list_end(tail),
            };
            let Some(len) = entries else {
                return refuse(format!("{} is not as the bridge writes it", self.name()));
            };
            self.end = Some(at + len);
        }
        Ok(())
    }

    /// Reads on until `n` bytes from `at` on may be taken, or the file's end is read.
    fn ensure(&mut self, n: usize) -> Result<(), Unpatchable> {
        while self.end.is_none() && self.at + n > self.limit() {
            self.fill()?;
        }
        Ok(())
    }

    /// Hashes the current file up to `to` at least ([`HASH_STRETCH`] ahead of what was hashed,
    /// within what was read).
    fn hash_to(&mut self, to: usize) {
        if to > self.hashed {
            let bytes = self.file.bytes();
            let end = (to.max(self.hashed + HASH_STRETCH)).min(bytes.len());
            self.hasher.update(&bytes[self.hashed..end]);
            self.hashed = end;
        }
    }

    /// Checks that the current file, read to its end, is as the ledger recorded it.
    fn check(&mut self) -> Result<(), Unpatchable> {
        let Some(record) = self.record.take() else {
            return Ok(());
        };
        self.hash_to(self.file.bytes().len());
        let hasher = std::mem::replace(&mut self.hasher, super::ledger::Hasher::new());
        if self.file.read() != record.len || hasher.finish() != record.hash {
            return refuse(format!("{} is not as it was published", record.name));
        }
        Ok(())
    }

    /// Reads the next file's start; `false` past the last.
    fn load(&mut self) -> Result<bool, Unpatchable> {
        self.check()?;
        let Some(&record) = self.names.get(self.next) else {
            return Ok(false);
        };
        self.next += 1;
        let name = &record.name;
        let Some(file) = (self.read)(name) else {
            return refuse(format!("{name} cannot be read"));
        };
        let len = (self.file.start(&file))
            .map_err(|e| Unpatchable(format!("{name} cannot be read: {e}")))?;
        if len != record.len && len != u64::MAX {
            return refuse(format!("{name} is not as it was published"));
        }
        (self.record, self.at, self.end, self.first) = (Some(record), self.file.kept(), None, true);
        self.hashed = self.at;
        let start = match self.open {
            Some(open) => header(open),
            None => cdif::LIST_OPEN.len(),
        };
        self.ensure(start)?;
        let bytes = &self.file.bytes()[self.at..self.limit()];
        let started = match self.open {
            Some(open) => (bytes.strip_prefix(crate::sitemap::XML_DECL.as_bytes()))
                .is_some_and(|b| b.starts_with(open.as_bytes())),
            None => bytes.starts_with(cdif::LIST_OPEN.as_bytes()),
        };
        if !started {
            return refuse(format!("{name} is not as the bridge writes it"));
        }
        self.at += start;
        self.hash_to(self.at);
        Ok(true)
    }

    /// Reads on to the next file while every entry of the current one was taken; `false` past
    /// the last file.
    fn next_file(&mut self) -> Result<bool, Unpatchable> {
        loop {
            self.ensure(1)?;
            if self.end != Some(self.at) {
                return Ok(true);
            }
            if !self.load()? {
                return Ok(false);
            }
        }
    }

    /// The next entry, `len` bytes long (a CDIF list's document without its item's frame);
    /// nothing for 0.
    fn take(&mut self, len: usize) -> Result<&[u8], Unpatchable> {
        if len == 0 {
            return Ok(&[]);
        }
        let damaged = || Unpatchable("a published file does not hold the ledger's entries".into());
        match self.open {
            Some(_) => {
                let entry = self.take_bytes(len)?;
                if !entry.starts_with(b"<url>") || !entry.ends_with(b"\n") {
                    return Err(damaged());
                }
                Ok(entry)
            }
            None => {
                if !self.next_file()? {
                    return refuse("the published files hold fewer entries than the ledger");
                }
                self.ensure(len + cdif::ITEM_FRAME_MAX)?;
                let rest = &self.file.bytes()[self.at..self.limit()];
                let (document, used) =
                    cdif::list_item(rest, self.first, len).ok_or_else(damaged)?;
                let start = self.at + (document.as_ptr().addr() - rest.as_ptr().addr());
                self.at += used;
                self.first = false;
                self.hash_to(self.at);
                Ok(&self.file.bytes()[start..start + len])
            }
        }
    }

    /// The next entry, `len` bytes long, blanked out: spaces and a line feed.
    fn take_blank(&mut self, len: usize) -> Result<(), Unpatchable> {
        let blank = self.take_bytes(len)?;
        match blank.split_last() {
            Some((b'\n', spaces)) if spaces.iter().all(|&b| b == b' ') => Ok(()),
            _ => refuse("a published file does not hold the ledger's blanked entry"),
        }
    }

    /// The next `len` bytes of a `urlset` file's entries, in the file they are in.
    fn take_bytes(&mut self, len: usize) -> Result<&[u8], Unpatchable> {
        if !self.next_file()? {
            return refuse("the published files hold fewer entries than the ledger");
        }
        self.ensure(len)?;
        if self.at + len > self.limit() {
            return refuse("a published file does not hold the ledger's entries");
        }
        self.at += len;
        self.hash_to(self.at);
        Ok(&self.file.bytes()[self.at - len..self.at])
    }

    /// The next `urlset` entry, to its line feed; `None` past the last file's.
    fn next_entry(&mut self) -> Result<Option<&[u8]>, Unpatchable> {
        loop {
            if !self.next_file()? {
                return Ok(None);
            }
            let rest = &self.file.bytes()[self.at..self.limit()];
            let len = match memchr::memchr(b'\n', rest) {
                Some(i) => i + 1,
                // The last entry of the last file, without its line feed.
                None if self.end.is_some() => rest.len(),
                None => {
                    self.fill()?;
                    continue;
                }
            };
            self.at += len;
            self.hash_to(self.at);
            return Ok(Some(&self.file.bytes()[self.at - len..self.at]));
        }
    }

    /// Checks that every entry of every file was taken, and the last file read.
    fn finished(&mut self) -> Result<(), Unpatchable> {
        self.ensure(1)?;
        if self.end != Some(self.at) || self.next != self.names.len() {
            return refuse("the published files hold more entries than the ledger");
        }
        self.check()
    }
}

/// The counts of the DiWoo categories after a patch: the writer's (of what went through it)
/// with what it did not see, `adjust` ([`ProfilePatch::write_diwoo`]).
pub(crate) fn diwoo_counts(mut stats: Vec<DiwooStats>, adjust: &[[u64; 2]]) -> Vec<DiwooStats> {
    for (s, [https, lastmod]) in stats.iter_mut().zip(adjust) {
        s.requires_https += https;
        s.requires_lastmod += lastmod;
    }
    stats
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::disk::write::Staging;
    use crate::patch::PublishedFile;
    use crate::profiles::signmap;

    /// A sink that keeps every file in memory, and never streams.
    #[derive(Default)]
    struct Memory(BTreeMap<String, Vec<u8>>);

    impl FileSink for Memory {
        type Error = FilesError;

        fn put(&mut self, name: &str, bytes: &[u8]) -> Result<(), FilesError> {
            self.0.insert(name.to_owned(), bytes.to_vec());
            Ok(())
        }
    }

    /// The files of a staging folder, by name.
    fn staged(staging: &Staging) -> BTreeMap<String, Vec<u8>> {
        std::fs::read_dir(staging.path())
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let name = e.file_name().into_string().unwrap();
                (name, std::fs::read(e.path()).unwrap())
            })
            .collect()
    }

    /// An entry of the Signmap's shape for `i`, of some length.
    fn entry(i: usize) -> Vec<u8> {
        format!(
            "<url><loc>https://r.example/{i}</loc><x>{}</x></url>\n",
            "y".repeat(i * 37 % 300)
        )
        .into_bytes()
    }

    /// `entries` (those `lost` says lost) pushed into the Signmap's files in `sink`: the entries
    /// blanked out, the index, and the records of the files written.
    fn fill<S: FileSink<Error = FilesError>>(
        sink: &mut S,
        url: &Url,
        limits: Limits,
        entries: &[Vec<u8>],
        lost: &[bool],
    ) -> (
        Vec<bool>,
        Option<Url>,
        Vec<crate::profiles::ledger::FileRecord>,
    ) {
        let lastmod = Datestamp::parse("2024-05-06");
        let mut recording = crate::profiles::files::Recording::new(sink);
        let mut files = Files::new(
            signmap::URLSET_OPEN,
            limits,
            Some(Shards::new(url, Profile::Signmap, "xml")),
        );
        for (e, &l) in entries.iter().zip(lost) {
            let entry = if l {
                Entry::Lost(e.len())
            } else {
                Entry::Won(e, lastmod)
            };
            files.push(&mut recording, entry).unwrap();
        }
        files.close(&mut recording).unwrap();
        let blanked = files.blanked.clone();
        let index = files.finish(&mut recording).unwrap();
        (blanked, index, recording.files)
    }

    /// Files in memory, as a patch finds them.
    fn reader(files: &BTreeMap<String, Vec<u8>>) -> ReadShard {
        let files = files.clone();
        Box::new(move |name| (files.get(name)).map(|b| PublishedFile::Bytes(b.clone())))
    }

    /// `files` with one byte of `name`'s at `at` changed to `to`.
    fn edited(
        files: &BTreeMap<String, Vec<u8>>,
        name: &str,
        at: usize,
        to: u8,
    ) -> BTreeMap<String, Vec<u8>> {
        let mut files = files.clone();
        files.get_mut(name).unwrap()[at] = to;
        files
    }

    /// Entries of lengths `lens` (`y`s inside): mostly short, some longer than the room a
    /// window keeps before it (64 KiB, with a test's window).
    fn long_entries(lens: &[usize]) -> Vec<Vec<u8>> {
        let entry = |(i, &len): (usize, &usize)| {
            format!(
                "<url><loc>https://r.example/{i}</loc><x>{}</x></url>\n",
                "y".repeat(len)
            )
        };
        lens.iter()
            .enumerate()
            .map(entry)
            .map(String::into_bytes)
            .collect()
    }

    /// Whether reading `takes` entries of these lengths from `files` (as `head` records
    /// them, the files `name` gives, of root `open`) is refused somewhere, or at the end.
    fn refused(
        head: &Head,
        files: &BTreeMap<String, Vec<u8>>,
        name: impl Fn(u32) -> String,
        open: Option<&'static str>,
        takes: &[usize],
    ) -> bool {
        let read = reader(files);
        let mut published = Published::of(head, &read, name, open);
        published.file = Windows::with_window(4096);
        takes.iter().any(|&len| published.take(len).is_err()) || published.finished().is_err()
    }

    /// Every way a file can differ from what the ledger recorded, made of one published file:
    /// a byte of an entry (the first `y`), of its start, of its closing, a byte more, one less.
    fn edits(bytes: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
        let mut edits = vec![(bytes.to_vec(), "nothing changed")];
        let y = bytes.iter().position(|&b| b == b'y').unwrap();
        for (at, what) in [
            (y, "an entry"),
            (1, "its start"),
            (bytes.len() - 3, "its closing"),
        ] {
            let mut edited = bytes.to_vec();
            edited[at] ^= 1;
            edits.push((edited, what));
        }
        edits.push(([bytes, b" "].concat(), "a byte more"));
        edits.push((bytes[..bytes.len() - 1].to_vec(), "a byte less"));
        edits.into_iter().map(|(b, what)| (what, b)).collect()
    }

    #[test]
    fn shards_and_lists_not_as_recorded_are_refused() {
        let url = Url::parse("https://r.example/").unwrap();
        let limits = Limits {
            max_urls: 3,
            max_bytes: 50_000_000,
        };
        let lens = [5, 70_000, 10, 300, 0, 90_000, 7];
        let entries = long_entries(&lens);
        let mut shards = Memory::default();
        let (_, _, files) = fill(&mut shards, &url, limits, &entries, &[false; 7]);
        let shards_head = Head {
            files,
            ..Head::default()
        };
        let mut lists = Memory::default();
        let mut recording = crate::profiles::files::Recording::new(&mut lists);
        let mut writer = cdif::Writer::new(&url, limits, false, true);
        let documents: Vec<String> = lens
            .iter()
            .map(|&n| format!("\"{}\"", "y".repeat(n)))
            .collect();
        for d in &documents {
            let document = CdifDocument {
                name: "",
                url: None,
                lastmod: None,
                bytes: d.as_bytes(),
            };
            writer.add(&mut recording, document).unwrap();
        }
        writer
            .finish(&mut recording, &mut Indexes::default())
            .unwrap();
        let lists_head = Head {
            files: recording.files,
            ..Head::default()
        };
        let shard = |n| Profile::Signmap.shard_name(n, "xml");
        let entry_lens: Vec<usize> = entries.iter().map(Vec::len).collect();
        let document_lens: Vec<usize> = documents.iter().map(String::len).collect();
        // The second file of each, whose entries run across windows.
        let columns = [
            (
                &shards_head,
                &shards.0,
                Some(signmap::URLSET_OPEN),
                &entry_lens,
            ),
            (&lists_head, &lists.0, None, &document_lens),
        ];
        for (head, files, open, takes) in columns {
            let names = |n| match open {
                Some(_) => shard(n),
                None => Profile::list_name(n),
            };
            let name = names(2);
            for (what, bytes) in edits(&files[&name]) {
                let mut edited = files.clone();
                edited.insert(name.clone(), bytes);
                let refused = refused(head, &edited, names, open, takes);
                assert_eq!(refused, what != "nothing changed", "{name}: {what}");
            }
        }
    }

    fn lens() -> impl proptest::strategy::Strategy<Value = Vec<usize>> {
        use proptest::prelude::*;
        let len = prop_oneof![9 => 0usize..400, 1 => 60_000usize..140_000];
        proptest::collection::vec(len, 1..60)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// The Signmap's files read a window at a time give back every entry written, in
        /// order, taken by their lengths (as the ledger gives them) or to their line feeds,
        /// whatever the windows' size; a file changed since it was written is refused once
        /// it has been read.
        #[test]
        fn shards_read_a_window_at_a_time_give_their_entries(
            lens in lens(),
            blocks in 1usize..4,
            max_urls in 1usize..30,
            edit in proptest::prelude::any::<proptest::sample::Index>(),
        ) {
            let url = Url::parse("https://r.example/").unwrap();
            let limits = Limits { max_urls, max_bytes: 50_000_000 };
            let entries = long_entries(&lens);
            let mut memory = Memory::default();
            let (_, _, files) = fill(&mut memory, &url, limits, &entries, &vec![false; lens.len()]);
            let head = Head { files, ..Head::default() };
            let name = |n| Profile::Signmap.shard_name(n, "xml");
            let published = |read| {
                let mut p = Published::of(&head, read, name, Some(signmap::URLSET_OPEN));
                p.file = Windows::with_window(blocks * 4096);
                p
            };
            let read = reader(&memory.0);
            let mut by_len = published(&read);
            for e in &entries {
                proptest::prop_assert_eq!(by_len.take(e.len()).unwrap(), &e[..]);
            }
            by_len.finished().unwrap();
            let mut by_line = published(&read);
            for e in &entries {
                proptest::prop_assert_eq!(by_line.next_entry().unwrap(), Some(&e[..]));
            }
            proptest::prop_assert_eq!(by_line.next_entry().unwrap(), None);
            by_line.finished().unwrap();

            // One `y` of one file made a `z`: the file is read, and refused at its end.
            let file = &head.files[edit.index(head.files.len())];
            let bytes = &memory.0[&file.name];
            if let Some(at) = bytes.iter().position(|&b| b == b'y') {
                let read = reader(&edited(&memory.0, &file.name, at, b'z'));
                let mut edited = published(&read);
                let why = entries.iter().find_map(|e| edited.take(e.len()).err())
                    .or_else(|| edited.finished().err())
                    .expect("refused");
                proptest::prop_assert!(why.0.contains("is not as it was published"), "{why}");
            }
        }

        /// CDIF's lists read a window at a time give back every document, whatever the windows'
        /// size.
        #[test]
        fn lists_read_a_window_at_a_time_give_their_documents(
            lens in lens(),
            blocks in 1usize..4,
            max_urls in 1usize..30,
        ) {
            let url = Url::parse("https://r.example/").unwrap();
            let limits = Limits { max_urls, max_bytes: 50_000_000 };
            let documents: Vec<String> =
                lens.iter().map(|&len| format!("{{\"n\":\"{}\"}}", "y".repeat(len))).collect();
            let mut memory = Memory::default();
            let mut recording = crate::profiles::files::Recording::new(&mut memory);
            let mut lists = cdif::Writer::new(&url, limits, false, true);
            for d in &documents {
                let document = CdifDocument { name: "", url: None, lastmod: None, bytes: d.as_bytes() };
                lists.add(&mut recording, document).unwrap();
            }
            lists.finish(&mut recording, &mut Indexes::default()).unwrap();
            let head = Head { files: recording.files, ..Head::default() };
            let read = reader(&memory.0);
            let mut published = Published::of(&head, &read, Profile::list_name, None);
            published.file = Windows::with_window(blocks * 4096);
            for d in &documents {
                proptest::prop_assert_eq!(published.take(d.len()).unwrap(), d.as_bytes());
            }
            published.finished().unwrap();
        }
    }

    proptest::proptest! {
        /// Shards written as they fill into a staging folder are the shards gathered in
        /// memory, byte for byte, with the same records of them: a file without lost entries,
        /// one whose few lost entries are blanked out, and one cut again from its winners
        /// (read back from the folder), the next files after it gathered.
        #[test]
        fn streamed_shards_are_the_gathered_ones(
            lost in proptest::collection::vec(proptest::bool::weighted(0.15), 1..200),
            max_urls in 1usize..30,
        ) {
            let url = Url::parse("https://r.example/").unwrap();
            let limits = Limits { max_urls, max_bytes: 6_000 };
            let entries: Vec<Vec<u8>> = (0..lost.len()).map(entry).collect();
            let dir = tempfile::tempdir().unwrap();
            let mut staging = Staging::new(&dir.path().join("out")).unwrap();
            let (streamed_blanked, streamed_index, mut streamed_records) =
                fill(&mut staging, &url, limits, &entries, &lost);
            let mut memory = Memory::default();
            let (gathered_blanked, gathered_index, mut gathered_records) =
                fill(&mut memory, &url, limits, &entries, &lost);

            proptest::prop_assert_eq!(streamed_index, gathered_index);
            proptest::prop_assert_eq!(streamed_blanked, gathered_blanked);
            streamed_records.sort_unstable_by(|a, b| a.name.cmp(&b.name));
            gathered_records.sort_unstable_by(|a, b| a.name.cmp(&b.name));
            proptest::prop_assert_eq!(streamed_records, gathered_records);
            proptest::prop_assert_eq!(staged(&staging), memory.0);
        }
    }
}
