//! The records of the landing-page profiles (Signmap, OCX, CDIF): for each record, its landing
//! page and what describes it (for the Signmap the Signposting links, SP-01..SP-09; for OCX its
//! type, name, teaser and image; for CDIF its JSON-LD document), resolved like the URL inventory
//! (the newest version of a record wins; deleted records publish nothing; a landing page is
//! listed once).
//!
//! Each record's entries are written as it arrives, Signmap `<url>` and OCX `<url>` alike, each
//! straight into its profile's shard files (whole `urlset`s, split on the limits as
//! [`Urlsets`] splits, in a temporary folder); CDIF documents go to a temporary file. In memory
//! stays only what resolving needs, 44 bytes a record (a hash of the landing page, the
//! datestamp, where its entries are). Which version of a record wins is the URL inventory's
//! decision ([`crate::counts::Superseded`]), which saw the same occurrences. A shard file
//! none of whose entries lost (superseded, deleted later, a landing page listed by a newer
//! record), or only a few, blanked out in place (`ShardFile::settle`), is published as it
//! stands, and a sink on the same file system links it into place
//! ([`super::files::FileSink::link_shard`]); the winners of files that lost more are cut
//! into shards again. So each entry is written once: for a million records, writing the
//! entries to a temporary file, reading them back and writing the shards took a fifth of the
//! export's time.
//! Holding the profiles' texts in memory instead (titles, teasers, every link) took a gigabyte
//! for a million records, and its page faults cost more than writing the entries.

use std::path::PathBuf;

use oai_pmh::{Datestamp, DcElement, Record};
use url::Url;

use crate::Limits;
use crate::counts::Superseded;
use crate::dctype::{Memo, TypeMap};
use crate::identifier::Class;
use crate::sitemap::{Urlsets, lastmod_text};

use super::cdif::CdifDocument;
use super::files::{FileSink, Shards};
use super::ledger::{RowReader, Rows};
use super::ocx::OcxConfig;
use super::record::{Classified, GetRecord, Shared, SignStats, Writers};
use super::versions::{Occurrences, Resolution, State};
use super::{COLUMN_SPECS, COLUMNS, ColumnKind, Lens, Profile, ProfileSettings};
use super::{DOCUMENT_DIR, DOCUMENT_EXT, DOCUMENT_KEY_LEN};
use crate::FilesError;
pub use crate::disk::profiles::{ProfileShard, ShardFile};
use crate::disk::profiles::{ShardSpill, Spill, SpillFolder, Spilled, spill_error};

/// The columns whose entries the collector's shared work is for (the Signmap's and CDIF's
/// links, OCX's type, CDIF's document names).
const SIGNMAP: usize = Profile::Signmap.column().0;
const OCX: usize = Profile::Ocx.column().0;
const CDIF: usize = Profile::Cdif.column().0;

/// A 128-bit hash of a text (XXH3-128). Landing pages are told apart by it alone (no text is
/// kept); two of a million texts collide with a chance of about 10^-27.
fn hash128(text: &str) -> u128 {
    xxhash_rust::xxh3::xxh3_128(text.as_bytes())
}

/// Collects the landing-page profiles' records during a harvest.
#[derive(Debug)]
pub struct Signposts {
    types: TypeMap,
    /// The entries of each `dc:type` value seen in `types` and OCX's table.
    type_memo: Memo,
    /// The settings the columns' writers write with (they read their own: OCX's).
    settings: ProfileSettings,
    /// What the writers keep from one record to the next: the `GetRecord` URL's writer (none
    /// for a Static Repository without an http(s) baseURL), scratch text.
    writers: Writers,
    /// The URL of the CDIF documents' folder (`{documents}cdif/`), when they are published one
    /// by one: each Signmap entry links its record's document, and OCX points at it.
    documents: Option<String>,
    /// Shard limits of the columns of shards.
    limits: Limits,
    /// Where their shard files are written.
    folder: SpillFolder,
    /// Each column's files, for the profiles on ([`super::COLUMN_PROFILES`]).
    columns: [Option<ColumnSpill>; COLUMNS],
    /// Each occurrence's entries' lengths, datestamp and state, and the versions with a landing
    /// page, on disk past their share of the memory budget.
    occurrences: Occurrences,
    /// Scratch space: the entry being written, its lastmod, persistent identifier's URL.
    entry: Vec<u8>,
    date: String,
    cite_as: String,
}

/// A column's files during the harvest.
// One of each column, for a whole harvest: boxing the larger variant would save nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum ColumnSpill {
    /// `urlset` shard files ([`ColumnKind::Urlset`]).
    Shards(ShardSpill),
    /// Documents, one after another in a temporary file ([`ColumnKind::Documents`]).
    Documents(Spill),
}

impl Signposts {
    /// An empty collection, with no profile on yet. `metadata_base` is the OAI-PMH baseURL for
    /// the GetRecord links (none for a Static Repository without an http(s) baseURL); `limits`
    /// are those of the Signmap's and OCX's shards. Their files are written in the system's
    /// temporary folder unless [`Signposts::spill_in`] says otherwise.
    pub fn new(types: TypeMap, metadata_base: Option<&Url>, limits: Limits) -> Self {
        Self {
            types,
            type_memo: Memo::default(),
            settings: ProfileSettings::default(),
            writers: Writers {
                get_record: metadata_base.map(GetRecord::new),
                ..Writers::default()
            },
            documents: None,
            limits,
            folder: SpillFolder::new(crate::disk::profiles::temp_dir()),
            columns: std::array::from_fn(|_| None),
            occurrences: Occurrences::new(&crate::disk::spill::Budget::default()),
            entry: Vec::new(),
            date: String::new(),
            cite_as: String::new(),
        }
    }

    /// Writes the Signmap's and OCX's shard files in a new folder in `parent` (call before
    /// [`Signposts::add`]). `linked`: the sink links them into place
    /// ([`super::files::FileSink::link_shard`]) rather than reads them, so they are written
    /// with direct I/O when they can be large.
    pub fn spill_in(mut self, parent: PathBuf, linked: bool) -> Self {
        self.folder.parent = parent;
        self.folder.direct = linked && self.limits.max_bytes >= crate::disk::write::DIRECT_MIN;
        self
    }

    /// Keeps its record occurrences within `budget` (call before [`Signposts::add`]): the
    /// harvest's, shared with the URL inventory.
    pub fn within(mut self, budget: &crate::disk::spill::Budget) -> Self {
        self.occurrences = Occurrences::new(budget);
        self
    }

    /// Also write the entries of every profile `settings` turn on that has a column of the
    /// collection, with those settings (its writer reads its own, as OCX's does): a column of
    /// shards' entries, and CDIF's documents for CDIF or its lists, published each under
    /// `documents` as [`Signposts::with_cdif`] says. Call before [`Signposts::add`].
    ///
    /// # Errors
    ///
    /// As [`Signposts::with_cdif`].
    pub fn with_profiles(
        mut self,
        settings: &ProfileSettings,
        documents: Option<Url>,
    ) -> Result<Self, FilesError> {
        self.settings.clone_from(settings);
        for profile in settings.profiles() {
            self.open_shards(profile);
        }
        if settings.cdif || settings.cdif_list {
            self = self.with_cdif(documents.filter(|_| settings.cdif))?;
        }
        Ok(self)
    }

    /// Also write the Signmap's entries (what [`Signposts::with_profiles`] does with the
    /// Signmap on).
    pub fn with_signmap(mut self) -> Self {
        self.settings.signmap = true;
        self.open_shards(Profile::Signmap);
        self
    }

    /// Also write OCX entries, as `config` says.
    pub fn with_ocx(mut self, config: OcxConfig) -> Self {
        self.settings.ocx = Some(config);
        self.open_shards(Profile::Ocx);
        self
    }

    /// Opens the shard files of `profile`'s column, when its column is one of shards.
    fn open_shards(&mut self, profile: Profile) {
        if let (Some(c), Some(column)) = (profile.column_index(), &profile.spec().column)
            && let ColumnKind::Urlset { open } = column.kind
        {
            self.columns[c] = Some(ColumnSpill::Shards(ShardSpill::new(c, column.name, open)));
        }
    }

    /// Also make each record's CDIF document: to be published each under `documents` (a
    /// directory URL, which file names are joined onto), which the other profiles then link
    /// to; with no `documents`, only gathered into CDIF's metadata lists, and not linked. Call
    /// before [`Signposts::add`].
    ///
    /// # Errors
    ///
    /// [`FilesError::Documents`] when file names cannot be joined onto `documents`; when the
    /// documents' temporary file cannot be created.
    pub fn with_cdif(mut self, documents: Option<Url>) -> Result<Self, FilesError> {
        if let Some(documents) = documents {
            if documents.cannot_be_a_base() {
                return Err(FilesError::Documents(documents));
            }
            let folder = documents
                .join(DOCUMENT_DIR)
                .map_err(|_| FilesError::Documents(documents.clone()))?;
            self.documents = Some(folder.into());
        }
        self.columns[CDIF] = Some(ColumnSpill::Documents(Spill::new()?));
        Ok(self)
    }

    /// Adds one record occurrence (its extended fields must have been read), with its
    /// identifiers classified against the scope (`classes`, one per `dc:identifier`; none for a
    /// deleted record); what it wrote, for a record with a landing page.
    ///
    /// # Errors
    ///
    /// When a profile's temporary file cannot be written.
    pub fn add(
        &mut self,
        record: &Record,
        classes: &[Class<'_>],
    ) -> Result<Option<Written>, FilesError> {
        if self.occurrences.len() == u32::MAX {
            return Err(FilesError::InventoryFull);
        }
        let mut state = State::Deleted;
        let mut hash = 0;
        let mut lens: Lens = [0; COLUMNS];
        if !record.deleted {
            let found = Classified::of(classes);
            state = match found.landing {
                None => State::NoLandingPage,
                Some(landing) => {
                    hash = hash128(landing);
                    let typed = self.write_entries(record, &found, landing, &mut lens)?;
                    State::Landing { typed }
                }
            };
        }
        let datestamp = Datestamp::pack_option(record.datestamp);
        let written = matches!(state, State::Landing { .. }).then_some(Written { lens, hash });
        self.occurrences.push(lens, datestamp, state, hash)?;
        Ok(written)
    }

    /// Writes each column's entry of a live record with a landing page; whether it has an OCX
    /// entry.
    fn write_entries(
        &mut self,
        record: &Record,
        found: &Classified<'_>,
        landing: &str,
        lens: &mut Lens,
    ) -> Result<bool, FilesError> {
        // The license, persistent identifier and schema.org type are the Signmap's and CDIF's
        // (OCX has its own table of types): spelled out only when one of them is on. A new
        // column whose writer reads them is added here.
        let linked = self.columns[SIGNMAP].is_some() || self.columns[CDIF].is_some();
        let license = linked
            .then(|| record.dc_values(DcElement::Rights).find_map(license_url))
            .flatten();
        // The persistent identifier's resolver URL, spelled out once into a buffer of its own.
        self.cite_as.clear();
        let cite_as = found
            .cite_as
            .filter(|_| linked)
            .map(|pid| pid.write_resolver_url(&mut self.cite_as))
            .map(|()| self.cite_as.as_str());
        let ocx = self
            .settings
            .ocx
            .as_ref()
            .filter(|_| self.columns[OCX].is_some());
        let [kind, ocx_kind] = self.type_memo.lookup(
            [linked.then_some(&self.types), ocx.map(|c| &c.types)],
            record.dc_values(DcElement::Type),
        );
        let ocx_kind = ocx.and_then(|c| ocx_kind.or(c.default_type.as_deref()));
        let hash = self.columns[CDIF]
            .is_some()
            .then(|| cdif_hash(&record.identifier));
        // The document's URL, for the other profiles to link: the folder's URL and the name
        // (what joining the name onto the documents' URL gives).
        let shards = (self.columns.iter()).any(|c| matches!(c, Some(ColumnSpill::Shards(_))));
        let document = self
            .documents
            .as_ref()
            .zip(hash.as_ref())
            .filter(|_| shards)
            .map(|(folder, hash)| format!("{folder}{hash}{DOCUMENT_EXT}"));
        // The lastmod, written out once for every profile.
        let lastmod = lastmod_text(record.datestamp, &mut self.date);
        let shared = Shared {
            record,
            found,
            landing,
            lastmod,
            document: document.as_deref(),
            cite_as,
            license: license.as_deref(),
            kind,
            ocx_kind,
            document_key: hash.as_deref(),
        };
        for ((spill, len), column) in (self.columns.iter_mut())
            .zip(lens.iter_mut())
            .zip(COLUMN_SPECS)
        {
            let Some(spill) = spill else {
                continue;
            };
            if !(column.write)(&mut self.entry, &shared, &self.settings, &mut self.writers) {
                continue;
            }
            *len = match spill {
                ColumnSpill::Shards(shards) => {
                    shards.append(&mut self.folder, self.limits, &self.entry, record.datestamp)?
                }
                ColumnSpill::Documents(documents) => documents.append(&self.entry)?,
            };
        }
        Ok(lens[OCX] > 0)
    }

    /// Keeps the newest version of each record (those `superseded` does not hold) and the newest
    /// record of each landing page; the entries are kept in harvest order.
    ///
    /// # Panics
    ///
    /// When `superseded` does not cover exactly the occurrences added here: it must come from
    /// the inventory that was given the same records in the same order.
    ///
    /// # Errors
    ///
    /// When a profile's temporary file cannot be written or read back.
    pub fn finish(self, superseded: &Superseded) -> Result<Resolved, FilesError> {
        assert_eq!(
            superseded.len(),
            self.occurrences.len() as usize,
            "the inventory and the profiles saw different record occurrences"
        );
        let mut counts = super::versions::Counts::default();
        let resolution = self.occurrences.finish(superseded, &mut counts)?;
        let mut stats = SignStats {
            published: counts.published,
            no_landing_page: counts.no_landing_page,
            duplicate: counts.duplicate,
            ..SignStats::default()
        };
        if self.columns[OCX].is_some() {
            stats.ocx_published = counts.typed;
            stats.ocx_no_type = counts.published - counts.typed;
        }
        let mut columns: [ColumnFiles; COLUMNS] = std::array::from_fn(|_| ColumnFiles::Off);
        for (files, spill) in columns.iter_mut().zip(self.columns) {
            *files = match spill {
                None => ColumnFiles::Off,
                Some(ColumnSpill::Shards(s)) => ColumnFiles::Shards(s.finish(&resolution)?),
                Some(ColumnSpill::Documents(s)) => ColumnFiles::Documents(s.finish()?),
            };
        }
        Ok(Resolved {
            columns,
            documents: self.documents,
            _folder: self.folder,
            limits: self.limits,
            resolution,
            stats,
        })
    }
}

/// The file name of a record's CDIF document ([`Profile::document_name`]): a hash of its header
/// identifier, so that the URL stays the same from one harvest to the next.
pub fn cdif_name(identifier: &str) -> String {
    Profile::document_name(cdif_key(identifier))
}

/// The key of a record's CDIF document: the first 64 bits of its identifier's SHA-256.
fn cdif_key(identifier: &str) -> u64 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(identifier.as_bytes());
    u64::from_be_bytes(digest[..8].try_into().expect("a SHA-256 has 32 bytes"))
}

/// The key part of [`cdif_name`], in hex.
fn cdif_hash(identifier: &str) -> String {
    format!(
        "{:0width$x}",
        cdif_key(identifier),
        width = DOCUMENT_KEY_LEN
    )
}

/// A `dc:rights` value that is a license URL (`https://creativecommons.org/licenses/by/4.0/`),
/// in normal form; rights statements in words are not links.
fn license_url(value: &str) -> Option<String> {
    let lower = value.get(..8)?.to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) || value.contains(' ') {
        return None;
    }
    Url::parse(value)
        .ok()
        .filter(|u| u.host_str().is_some())
        .map(String::from)
}

/// Where an entry is in its profile's file (offset, length), and its lastmod.
type EntryAt = (u64, u32, Option<Datestamp>);

/// A column's files once the winners are known.
#[derive(Debug)]
enum ColumnFiles {
    /// Its profile is off.
    Off,
    /// The shard files, settled ([`ShardSpill::finish`]).
    Shards(Vec<ShardFile>),
    /// The documents' temporary file.
    Documents(Spilled),
}

/// The profiles' entries, resolved.
#[derive(Debug)]
pub struct Resolved {
    /// Each column's files ([`super::COLUMN_PROFILES`]).
    columns: [ColumnFiles; COLUMNS],
    /// The URL of the CDIF documents' folder, when they are published one by one.
    documents: Option<String>,
    /// The folder of the shard files, kept for them (it is removed when dropped).
    _folder: SpillFolder,
    limits: Limits,
    /// Which occurrences won, and where their entries are.
    resolution: Resolution,
    /// Counts by outcome.
    pub stats: SignStats,
}

/// What [`Signposts::add`] wrote of a record with a landing page.
#[derive(Clone, Copy, Debug)]
pub struct Written {
    /// Its entries' lengths by column (the CDIF document with its name's hash in front); 0 for
    /// none.
    pub lens: Lens,
    /// The hash of its landing page (entries of one landing page are one record's).
    pub hash: u128,
}

impl Resolved {
    /// `rows` (a ledger's, one for each occurrence collected, in order) with the entries that
    /// lost marked, and every row of a landing page several records give.
    ///
    /// # Errors
    ///
    /// When `rows` are not the collected occurrences' ([`FilesError::Ledger`]), or the
    /// occurrences' temporary file cannot be read.
    pub fn settle_ledger(&self, rows: Rows) -> Result<Rows, FilesError> {
        if self.stats.duplicate == 0 {
            return Ok(rows);
        }
        let lost =
            |row: &super::ledger::Row<'_>, seq: usize| row.landing && !self.resolution.won(seq);
        let each = |f: &mut dyn FnMut(usize, &super::ledger::Row<'_>)| -> Result<(), FilesError> {
            let mut reader =
                RowReader::new(rows.as_bytes()).map_err(|why| FilesError::Ledger(why.0))?;
            let mut seq = 0;
            while let Some(row) = reader.row() {
                f(seq, &row);
                seq += 1;
                reader.advance().map_err(|why| FilesError::Ledger(why.0))?;
            }
            Ok(())
        };
        // The landing pages of the entries that lost: their winners are several records' too.
        let mut several = std::collections::HashSet::new();
        each(&mut |seq, row| {
            if lost(row, seq) {
                several.insert(row.hash);
            }
        })?;
        let mut settled = Rows::default();
        each(&mut |seq, row| {
            settled.push(&super::ledger::Row {
                lost: lost(row, seq),
                dup: row.landing && several.contains(&row.hash),
                ..*row
            });
        })?;
        Ok(settled)
    }

    /// Every entry written of each column, won or lost, one after another in the order
    /// collected; the CDIF documents with their name's hash in front. An entry that lost may be
    /// blanked out (its length kept).
    ///
    /// # Errors
    ///
    /// When a profile's temporary file cannot be read.
    pub fn entry_streams(&self) -> Result<[Vec<u8>; COLUMNS], FilesError> {
        let mut streams: [Vec<u8>; COLUMNS] = Default::default();
        for ((stream, files), column) in streams.iter_mut().zip(&self.columns).zip(COLUMN_SPECS) {
            match files {
                ColumnFiles::Off => {}
                ColumnFiles::Shards(files) => {
                    let ColumnKind::Urlset { open } = column.kind else {
                        unreachable!("a column of shards is a column of `urlset`s");
                    };
                    for file in files {
                        let bytes = file.read()?;
                        let body = bytes
                            .get(crate::sitemap::header(open)..)
                            .and_then(|b| b.strip_suffix(crate::sitemap::URLSET_CLOSE.as_bytes()));
                        stream.extend_from_slice(body.unwrap_or_default());
                    }
                }
                ColumnFiles::Documents(file) => {
                    file.read_all(stream).map_err(spill_error("read"))?;
                }
            }
        }
        Ok(streams)
    }

    /// No entry to publish.
    pub fn is_empty(&self) -> bool {
        self.stats.published == 0
    }

    /// Writes the shards and the index of `profile`, one with a column of shards, into `sink`,
    /// files written during the harvest linked into place where the sink can; the index's URL
    /// (none without an entry, or when the profile was not collected).
    ///
    /// # Errors
    ///
    /// What the sink fails with; a shard file that cannot be read.
    pub fn publish<S: FileSink>(
        &self,
        profile: Profile,
        public_url: &Url,
        sink: &mut S,
    ) -> Result<Option<Url>, S::Error> {
        let mut shards = Shards::new(public_url, profile, "xml");
        self.render(profile, |shard| shards.put_profile(sink, shard))?;
        shards.finish(sink)
    }

    /// The shards of `profile`, one with a column of shards (the Signmap, OCX), each handed to
    /// `emit` as soon as it is made, within the limits counting every byte of the entries
    /// (the Signmap's links too, SP-14); their number. Each shard file is handed as it stands,
    /// and the winners' entries of those marked to be cut again ([`ShardSpill::finish`]) in
    /// new shards; in harvest order.
    ///
    /// # Errors
    ///
    /// What `emit` fails with; a temporary file that cannot be read.
    ///
    /// # Panics
    ///
    /// When `profile` has no column of shards.
    pub fn render<E: From<FilesError>>(
        &self,
        profile: Profile,
        mut emit: impl FnMut(ProfileShard<'_>) -> Result<(), E>,
    ) -> Result<usize, E> {
        let (c, column) = profile.column();
        let ColumnKind::Urlset { open } = column.kind else {
            panic!("{profile:?}'s column is not of shards");
        };
        let ColumnFiles::Shards(files) = &self.columns[c] else {
            return Ok(0);
        };
        let mut count = 0;
        // The winners of consecutive files cut again fill shards together, not a shard each.
        let mut cut: Option<Urlsets<'_>> = None;
        for file in files {
            match &file.cut {
                None => {
                    if let Some(urlsets) = cut.take() {
                        count += urlsets.finish(|shard| emit(ProfileShard::Cut(shard)))?;
                    }
                    emit(ProfileShard::File(file))?;
                    count += 1;
                }
                Some(kept) => {
                    let urlsets = cut.get_or_insert_with(|| Urlsets::new(open, self.limits));
                    Self::cut(file, kept, urlsets, &mut emit)?;
                }
            }
        }
        if let Some(urlsets) = cut {
            count += urlsets.finish(|shard| emit(ProfileShard::Cut(shard)))?;
        }
        Ok(count)
    }

    /// Pushes the `kept` entries of `file` (offset, length, lastmod) into `urlsets`.
    fn cut<E: From<FilesError>>(
        file: &ShardFile,
        kept: &[(u64, u32, Option<Datestamp>)],
        urlsets: &mut Urlsets<'_>,
        mut emit: impl FnMut(ProfileShard<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        if kept.is_empty() {
            return Ok(());
        }
        let source = file.open()?;
        let mut reader = source.reader().map_err(file.error("read"))?;
        for &(at, len, lastmod) in kept {
            // A failed read stops the rendering before the shard it spoilt is emitted.
            urlsets.try_push(
                |bytes| {
                    reader.read(at, len, bytes).map_err(file.error("read"))?;
                    Ok(lastmod)
                },
                |shard| emit(ProfileShard::Cut(shard)),
            )?;
        }
        Ok(())
    }

    /// Where each winner's entry of column `column` is among all its entries (offset, length),
    /// with its lastmod, in harvest order; winners without one (no OCX type) are left out.
    /// Read from the occurrences' file, front to back.
    fn read_entries(
        &self,
        column: usize,
    ) -> Result<impl Iterator<Item = Result<EntryAt, FilesError>> + '_, FilesError> {
        // The entries lie in `seq` order; the offset of one is the sum of the lengths before.
        let mut reader = self.resolution.read()?;
        let mut seq = 0usize;
        let mut offset = 0u64;
        Ok(std::iter::from_fn(move || {
            loop {
                let o = match reader.next_occurrence() {
                    Ok(Some(o)) => o,
                    Ok(None) => return None,
                    Err(e) => return Some(Err(e)),
                };
                let (at, len) = (seq, o.lens[column]);
                let start = offset;
                offset += u64::from(len);
                seq += 1;
                if len > 0 && self.resolution.won(at) {
                    return Some(Ok((start, len, Datestamp::unpack_option(o.datestamp))));
                }
            }
        }))
    }

    /// The lastmod of each entry of `profile` (one with a column) that won, in harvest order:
    /// what its shards list, before they are cut.
    ///
    /// # Errors
    ///
    /// When the occurrences' temporary file cannot be read.
    pub fn lastmods(&self, profile: Profile) -> Result<Vec<Option<Datestamp>>, FilesError> {
        (self.read_entries(profile.column().0)?)
            .map(|entry| entry.map(|(_, _, lastmod)| lastmod))
            .collect()
    }

    /// Hands `each` the CDIF document of every record that has one, in harvest order. One
    /// buffer serves them all (a `Vec` and a name per document showed in an export's time).
    ///
    /// # Errors
    ///
    /// What `each` fails with; the documents' temporary file that cannot be read.
    pub fn for_each_cdif_document<E: From<FilesError>>(
        &self,
        mut each: impl FnMut(CdifDocument<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let ColumnFiles::Documents(file) = &self.columns[CDIF] else {
            return Ok(());
        };
        let mut reader = file.reader().map_err(spill_error("read"))?;
        let mut bytes = Vec::new();
        let mut name = String::from(DOCUMENT_DIR);
        // The folder's URL and the name's hash part, as the Signmap and OCX link the document.
        let mut url = self.documents.clone();
        let folder = url.as_ref().map_or(0, String::len);
        for entry in self.read_entries(CDIF)? {
            let (at, len, lastmod) = entry?;
            bytes.clear();
            reader
                .read(at, len, &mut bytes)
                .map_err(spill_error("read"))?;
            // The name's hash part first, then the document (as `Signposts::add` wrote them).
            let (hash, document) = bytes.split_at(DOCUMENT_KEY_LEN);
            let hash = String::from_utf8_lossy(hash);
            name.truncate(DOCUMENT_DIR.len());
            name.push_str(&hash);
            name.push_str(DOCUMENT_EXT);
            if let Some(url) = &mut url {
                url.truncate(folder);
                url.push_str(&hash);
                url.push_str(DOCUMENT_EXT);
            }
            each(CdifDocument {
                name: &name,
                url: url.as_deref(),
                lastmod,
                bytes: document,
            })?;
        }
        Ok(())
    }
}

// The collector's tests, which need a harvest's classifier and inventory, are the root's
// (`src/profiles/signposts_tests.rs`).
