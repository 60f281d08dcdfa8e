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
//! decision ([`crate::inventory::Superseded`]), which saw the same occurrences. A shard file
//! none of whose entries lost (superseded, deleted later, a landing page listed by a newer
//! record), or only a few, blanked out in place (`ShardFile::settle`), is published as it
//! stands, and a sink on the same file system links it into place
//! ([`super::files::FileSink::link_shard`]); the winners of files that lost more are cut
//! into shards again. So each entry is written once: for a million records, writing the
//! entries to a temporary file, reading them back and writing the shards took a fifth of the
//! export's time.
//! Holding the profiles' texts in memory instead (titles, teasers, every link) took a gigabyte
//! for a million records, and its page faults cost more than writing the entries.

use std::fs::File;
use std::path::PathBuf;

use oai_pmh::{Datestamp, DcElement, OaiRequest, Record, push_query_value, push_query_value_str};
use url::Url;

use crate::classify::{Class, Pid};
use crate::dctype::{Memo, TypeMap};
use crate::inventory::Superseded;
use crate::render::Limits;
use crate::render::sitemap::{Urlsets, escape, lastmod_text, write_url_open};

use super::Profile;
use super::cdif::CdifDocument;
use super::files::{FileSink, Shards};
use super::ledger::{RowReader, Rows};
use super::ocx::OcxConfig;
pub(crate) use super::spill::{ProfileShard, ShardFile};
use super::spill::{ShardSpill, Spill, SpillFolder, SpillReader, spill_error};
use super::versions::{Occurrences, Resolution, State};
use super::{cdif, ocx, signmap};
use crate::error::Error;
use oai_bridge_files::FilesError;

/// Profile of the `describedby` link to a record's oai_dc metadata.
pub(crate) const OAI_DC_PROFILE: &str = "http://www.openarchives.org/OAI/2.0/oai_dc/";
/// Most `item` links one entry carries; a record with more files lists the first ones, so that
/// one entry can never outgrow a shard.
pub(crate) const MAX_ITEMS: usize = 50;

/// The profiles, as columns of [`Signposts::lens`] (Signmap and OCX also of
/// [`Signposts::shards`]).
const SIGNMAP: usize = 0;
const OCX: usize = 1;
const CDIF: usize = 2;
/// Their names, by column, for errors.
const PROFILES: [&str; 3] = ["Signmap", "OCX", "CDIF"];

/// A 128-bit hash of a text (XXH3-128). Landing pages are told apart by it alone (no text is
/// kept); two of a million texts collide with a chance of about 10^-27.
fn hash128(text: &str) -> u128 {
    xxhash_rust::xxh3::xxh3_128(text.as_bytes())
}

/// Counts of the Signmap, by outcome.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SignStats {
    /// Entries published.
    pub published: u64,
    /// Live records without a landing page inside the scope (not published).
    pub no_landing_page: u64,
    /// Live records whose landing page another, newer record already has (published once).
    pub duplicate: u64,
    /// OCX entries published.
    pub ocx_published: u64,
    /// Records with a landing page but no OCX type (`ocx_no_type`), not in the OCX sitemap.
    pub ocx_no_type: u64,
}

/// Collects the landing-page profiles' records during a harvest.
#[derive(Debug)]
pub struct Signposts {
    types: TypeMap,
    /// The entries of each `dc:type` value seen in `types` and OCX's table.
    type_memo: Memo,
    ocx: Option<OcxConfig>,
    /// The `GetRecord` URL around the percent-encoded identifier, escaped for XML (none for a
    /// Static Repository without an http(s) baseURL), and its plain form for CDIF.
    get_record: Option<GetRecord>,
    /// The URL of the CDIF documents' folder (`{documents}cdif/`), when they are published one
    /// by one: each Signmap entry links its record's document, and OCX points at it.
    documents: Option<String>,
    /// Shard limits of the Signmap and OCX.
    limits: Limits,
    /// Where their shard files are written.
    folder: SpillFolder,
    /// The shard files of the Signmap and OCX when on, by column ([`SIGNMAP`], [`OCX`]).
    shards: [Option<ShardSpill>; 2],
    /// The CDIF documents, when on.
    cdif: Option<Spill>,
    /// Each occurrence's entries' lengths, datestamp and state, and the versions with a landing
    /// page, on disk past their share of the memory budget.
    occurrences: Occurrences,
    /// Scratch space: the entry being written, its lastmod, persistent identifier's URL, OCX
    /// name and teaser written out.
    entry: Vec<u8>,
    date: String,
    cite_as: String,
    name: String,
    teaser: String,
}

/// A record's `GetRecord` URL is `{before}{percent-encoded identifier}{after}`.
#[derive(Debug)]
struct GetRecord {
    before: String,
    after: String,
    /// `before` and `after` escaped for XML (the `&`s).
    xml: (String, String),
    /// The last identifier written up to its last `:`, and that part percent-encoded: an
    /// identifier that starts the same has only the rest encoded. A repository's identifiers
    /// mostly share all but what follows the last colon (`oai:repo.org:` + a number); one whose
    /// local part holds colons too (`oai:h:10.1/x:v2`) just finds it less often. Encoding all
    /// of each was a twentieth of writing a Signmap entry.
    shared: (String, Vec<u8>),
}

impl GetRecord {
    /// Spelled by [`OaiRequest`] itself, around a marker that percent-encoding leaves alone.
    fn new(base: &Url) -> Self {
        const MARK: &str = "IDENTIFIER";
        let url = OaiRequest::new(
            base,
            &[
                ("verb", "GetRecord"),
                ("identifier", MARK),
                ("metadataPrefix", "oai_dc"),
            ],
        )
        .into_url();
        let at = url.rfind(MARK).expect("the marker was just written");
        let (before, after) = (&url[..at], &url[at + MARK.len()..]);
        Self {
            xml: (escape(before).into_owned(), escape(after).into_owned()),
            before: before.to_owned(),
            after: after.to_owned(),
            shared: (String::new(), Vec::new()),
        }
    }

    fn url(&self, id: &str) -> String {
        let mut url = self.before.clone();
        push_query_value_str(&mut url, id);
        url.push_str(&self.after);
        url
    }

    /// Appends the URL for `id`, escaped for XML (percent-encoding leaves nothing to escape in
    /// the identifier: it encodes each byte on its own, so its parts can be encoded apart).
    fn write_xml(&mut self, bytes: &mut Vec<u8>, id: &str) {
        bytes.extend_from_slice(self.xml.0.as_bytes());
        let (prefix, encoded) = &mut self.shared;
        let rest = match id.strip_prefix(prefix.as_str()) {
            Some(rest) if !prefix.is_empty() => rest,
            _ => {
                let end = id.rfind(':').map_or(0, |colon| colon + 1);
                prefix.clear();
                prefix.push_str(&id[..end]);
                encoded.clear();
                push_query_value(encoded, prefix);
                &id[end..]
            }
        };
        bytes.extend_from_slice(encoded);
        push_query_value(bytes, rest);
        bytes.extend_from_slice(self.xml.1.as_bytes());
    }
}

/// What one record's identifiers are to the profiles (found without allocating: there is one
/// for every record).
#[derive(Debug)]
struct Classified<'a> {
    classes: &'a [Class<'a>],
    landing: Option<&'a str>,
    cite_as: Option<&'a Pid<'a>>,
}

impl<'a> Classified<'a> {
    fn of(classes: &'a [Class<'a>]) -> Self {
        let mut found = Self {
            classes,
            landing: None,
            cite_as: None,
        };
        for class in classes {
            match class {
                Class::LandingPage(url) if found.landing.is_none() => {
                    found.landing = Some(url);
                }
                Class::PersistentId(pid) if found.cite_as.is_none() => {
                    found.cite_as = Some(pid);
                }
                _ => {}
            }
        }
        found
    }

    /// Content files, with their media types, at most [`MAX_ITEMS`].
    fn items(&self) -> impl Iterator<Item = (&'a str, &'static str)> + use<'a> {
        let classes: &'a [Class<'a>] = self.classes;
        classes
            .iter()
            .filter_map(|class| match class {
                Class::ContentFile { url, media_type } => Some((url.as_ref(), *media_type)),
                _ => None,
            })
            .take(MAX_ITEMS)
    }

    /// The first image among the content files: OCX's `ocx:image`.
    fn image(&self) -> Option<&'a str> {
        self.items()
            .find(|(_, t)| t.starts_with("image/"))
            .map(|(url, _)| url)
    }
}

/// What the entries of one live record with a landing page share, spelled out once for every
/// profile; borrowed, so that nothing is copied per record.
struct Shared<'r> {
    record: &'r Record,
    found: &'r Classified<'r>,
    landing: &'r str,
    lastmod: Option<&'r str>,
    /// The URL of the record's CDIF document, when the documents are published one by one.
    document: Option<&'r str>,
    /// For the Signmap and CDIF: the persistent identifier's resolver URL, the license URL and
    /// the schema.org type.
    cite_as: Option<&'r str>,
    license: Option<&'r str>,
    kind: Option<&'r str>,
}

impl Shared<'_> {
    /// Writes the record's Signmap `<url>` into `bytes`: its links to the CDIF document, the
    /// oai_dc record (when there is a `get_record` URL), the content files, the persistent
    /// identifier, the license and the type.
    #[inline]
    fn write_signmap(&self, bytes: &mut Vec<u8>, get_record: Option<&mut GetRecord>) {
        bytes.clear();
        write_url_open(bytes, self.landing, self.lastmod);
        if let Some(url) = self.document {
            signmap::write_link(
                bytes,
                "describedby",
                url,
                Some(signmap::JSON_LD),
                Some(crate::profiles::cdif::PROFILE),
            );
        }
        if let Some(get_record) = get_record {
            signmap::link_start(bytes, "describedby");
            get_record.write_xml(bytes, &self.record.identifier);
            signmap::link_end(bytes, Some(signmap::XML), Some(OAI_DC_PROFILE));
        }
        for (url, media_type) in self.found.items() {
            signmap::write_link(bytes, "item", url, Some(media_type), None);
        }
        if let Some(url) = self.cite_as {
            signmap::write_link(bytes, "cite-as", url, None, None);
        }
        if let Some(url) = self.license {
            signmap::write_link(bytes, "license", url, None, None);
        }
        if let Some(url) = self.kind {
            signmap::write_link(bytes, "type", url, None, None);
        }
        bytes.extend_from_slice(b"</url>\n");
    }

    /// Writes the record's OCX `<url>` of type `kind` into `bytes`: its name and teaser (written
    /// out in `name_buf` and `teaser_buf` when they must be changed), its image, and where its
    /// metadata is.
    #[inline]
    fn write_ocx(
        &self,
        bytes: &mut Vec<u8>,
        name_buf: &mut String,
        teaser_buf: &mut String,
        config: &OcxConfig,
        kind: &str,
    ) {
        let record = self.record;
        let name = record
            .dc_values(DcElement::Title)
            .next()
            .map(|t| ocx::teaser_in(t, usize::MAX, name_buf));
        let teaser = record
            .dc_values(DcElement::Description)
            .next()
            .map(|d| ocx::teaser_in(d, config.teaser_chars, teaser_buf));
        // With CDIF, `ocx:loc` is the record's document, in JSON-LD (no `ocx:xpath`, which is
        // for HTML); else what the configuration says.
        let (format, meta, xpath) = match self.document {
            Some(url) => (Some("JSON-LD"), Some(url), None),
            None => (config.format.as_deref(), None, config.xpath.as_deref()),
        };
        bytes.clear();
        ocx::write_entry(
            bytes,
            &ocx::Entry {
                loc: self.landing,
                kind,
                format,
                meta,
                xpath,
                name,
                teaser,
                image: self.found.image(),
            },
            self.lastmod,
        );
    }

    /// Writes the record's CDIF document into `bytes`, after its name (`hash`, the part of it
    /// that is not fixed); it links the oai_dc record when there is a `get_record` URL.
    #[inline]
    fn write_cdif(&self, bytes: &mut Vec<u8>, hash: &str, get_record: Option<&GetRecord>) {
        let record = self.record;
        let metadata = get_record.map(|g| g.url(&record.identifier));
        // On the stack for a record's usual few values of each.
        let values = |e| {
            record
                .dc_values(e)
                .collect::<smallvec::SmallVec<[&str; 4]>>()
        };
        let titles = values(DcElement::Title);
        let descriptions = values(DcElement::Description);
        let creators = values(DcElement::Creator);
        let dates = values(DcElement::Date);
        let subjects = values(DcElement::Subject);
        let publishers = values(DcElement::Publisher);
        let languages = values(DcElement::Language);
        bytes.clear();
        bytes.extend_from_slice(hash.as_bytes());
        cdif::write_document(
            bytes,
            &cdif::Fields {
                url: self.landing,
                kind: self.kind,
                titles: &titles,
                descriptions: &descriptions,
                creators: &creators,
                dates: &dates,
                subjects: &subjects,
                publishers: &publishers,
                languages: &languages,
                license: self.license,
                identifier: self.cite_as,
                metadata: metadata.as_deref(),
            },
        );
    }
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
            ocx: None,
            get_record: metadata_base.map(GetRecord::new),
            documents: None,
            limits,
            folder: SpillFolder::new(std::env::temp_dir()),
            shards: [None, None],
            cdif: None,
            occurrences: Occurrences::new(&crate::spill::Budget::default()),
            entry: Vec::new(),
            date: String::new(),
            cite_as: String::new(),
            name: String::new(),
            teaser: String::new(),
        }
    }

    /// Writes the Signmap's and OCX's shard files in a new folder in `parent` (call before
    /// [`Signposts::add`]). `linked`: the sink links them into place
    /// ([`super::files::FileSink::link_shard`]) rather than reads them, so they are written
    /// with direct I/O when they can be large.
    pub fn spill_in(mut self, parent: PathBuf, linked: bool) -> Self {
        self.folder.parent = parent;
        self.folder.direct = linked && self.limits.max_bytes >= crate::publish::DIRECT_MIN;
        self
    }

    /// Keeps its record occurrences within `budget` (call before [`Signposts::add`]): the
    /// harvest's, shared with the URL inventory.
    pub(crate) fn within(mut self, budget: &crate::spill::Budget) -> Self {
        self.occurrences = Occurrences::new(budget);
        self
    }

    /// Also write the Signmap's entries.
    pub fn with_signmap(mut self) -> Self {
        self.shards[SIGNMAP] = Some(ShardSpill::new(
            SIGNMAP,
            PROFILES[SIGNMAP],
            signmap::URLSET_OPEN,
        ));
        self
    }

    /// Also write OCX entries, as `config` says.
    pub fn with_ocx(mut self, config: OcxConfig) -> Self {
        self.ocx = Some(config);
        self.shards[OCX] = Some(ShardSpill::new(OCX, PROFILES[OCX], ocx::URLSET_OPEN));
        self
    }

    /// Also make each record's CDIF document: to be published each under `documents` (a
    /// directory URL, which file names are joined onto), which the other profiles then link
    /// to; with no `documents`, only gathered into CDIF's metadata lists, and not linked. Call
    /// before [`Signposts::add`].
    pub fn with_cdif(mut self, documents: Option<Url>) -> Result<Self, Error> {
        if let Some(documents) = documents {
            if documents.cannot_be_a_base() {
                return Err(Error::Documents(documents));
            }
            let folder = documents
                .join(CDIF_DIR)
                .map_err(|_| Error::Documents(documents.clone()))?;
            self.documents = Some(folder.into());
        }
        self.cdif = Some(Spill::new()?);
        Ok(self)
    }

    /// Adds one record occurrence (its extended fields must have been read), with its
    /// identifiers classified against the scope (`classes`, one per `dc:identifier`; none for a
    /// deleted record); what it wrote, for a record with a landing page.
    pub fn add(
        &mut self,
        record: &Record,
        classes: &[Class<'_>],
    ) -> Result<Option<Written>, Error> {
        if self.occurrences.len() == u32::MAX {
            return Err(FilesError::InventoryFull.into());
        }
        let mut state = State::Deleted;
        let mut hash = 0;
        let mut lens = [0u32; 3];
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

    /// Writes each profile's entry of a live record with a landing page; whether it has an OCX
    /// entry.
    fn write_entries(
        &mut self,
        record: &Record,
        found: &Classified<'_>,
        landing: &str,
        lens: &mut [u32; 3],
    ) -> Result<bool, Error> {
        // The license and schema.org type are the Signmap's and CDIF's, not OCX's, which has
        // its own table.
        let linked = self.shards[SIGNMAP].is_some() || self.cdif.is_some();
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
        let [kind, ocx_kind] = self.type_memo.lookup(
            [
                linked.then_some(&self.types),
                self.ocx.as_ref().map(|c| &c.types),
            ],
            record.dc_values(DcElement::Type),
        );
        let hash = self.cdif.is_some().then(|| cdif_hash(&record.identifier));
        // The document's URL, for the other profiles to link: the folder's URL and the name
        // (what joining the name onto the documents' URL gives).
        let document = self
            .documents
            .as_ref()
            .zip(hash.as_ref())
            .filter(|_| self.shards.iter().any(Option::is_some))
            .map(|(folder, hash)| format!("{folder}{hash}{CDIF_EXT}"));
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
        };
        if let Some(spill) = &mut self.shards[SIGNMAP] {
            shared.write_signmap(&mut self.entry, self.get_record.as_mut());
            lens[SIGNMAP] =
                spill.append(&mut self.folder, self.limits, &self.entry, record.datestamp)?;
        }
        let mut typed = false;
        if let (Some(config), Some(spill)) = (&self.ocx, &mut self.shards[OCX])
            && let Some(ocx_kind) = ocx_kind.or(config.default_type.as_deref())
        {
            typed = true;
            shared.write_ocx(
                &mut self.entry,
                &mut self.name,
                &mut self.teaser,
                config,
                ocx_kind,
            );
            lens[OCX] =
                spill.append(&mut self.folder, self.limits, &self.entry, record.datestamp)?;
        }
        if let (Some(hash), Some(spill)) = (&hash, &mut self.cdif) {
            shared.write_cdif(&mut self.entry, hash, self.get_record.as_ref());
            lens[CDIF] = spill.append(&self.entry)?;
        }
        Ok(typed)
    }

    /// Keeps the newest version of each record (those `superseded` does not hold) and the newest
    /// record of each landing page; the entries are kept in harvest order.
    ///
    /// # Panics
    ///
    /// When `superseded` does not cover exactly the occurrences added here: it must come from
    /// the inventory that was given the same records in the same order.
    pub fn finish(self, superseded: &Superseded) -> Result<Resolved, Error> {
        assert_eq!(
            superseded.len(),
            self.occurrences.len() as usize,
            "the inventory and the profiles saw different record occurrences"
        );
        let mut counts = super::versions::SignStats::default();
        let resolution = self.occurrences.finish(superseded, &mut counts)?;
        let mut stats = SignStats {
            published: counts.published,
            no_landing_page: counts.no_landing_page,
            duplicate: counts.duplicate,
            ..SignStats::default()
        };
        if self.ocx.is_some() {
            stats.ocx_published = counts.typed;
            stats.ocx_no_type = counts.published - counts.typed;
        }
        let [signmap, ocx] = self.shards;
        let files = |spill: Option<ShardSpill>| {
            spill
                .map(|s| s.finish(&resolution))
                .transpose()
                .map(Option::unwrap_or_default)
        };
        Ok(Resolved {
            shards: [files(signmap)?, files(ocx)?],
            cdif: self.cdif.map(Spill::finish).transpose()?,
            documents: self.documents,
            _folder: self.folder,
            limits: self.limits,
            resolution,
            stats,
        })
    }
}

/// The file name of a record's CDIF document: a hash of its header identifier, so that the URL
/// stays the same from one harvest to the next.
#[cfg(test)]
pub(crate) fn cdif_name(identifier: &str) -> String {
    format!("{CDIF_DIR}{}{CDIF_EXT}", cdif_hash(identifier))
}

const CDIF_DIR: &str = "cdif/";
const CDIF_EXT: &str = ".jsonld";
/// Length of the hash part of [`cdif_name`].
const CDIF_HASH_LEN: usize = 16;

/// The hash part of [`cdif_name`]: the first 8 bytes of the identifier's SHA-256, in hex.
fn cdif_hash(identifier: &str) -> String {
    use sha2::{Digest, Sha256};
    use std::fmt::Write;
    let mut hex = String::with_capacity(CDIF_HASH_LEN);
    for b in &Sha256::digest(identifier.as_bytes())[..CDIF_HASH_LEN / 2] {
        write!(hex, "{b:02x}").expect("writing to a String cannot fail");
    }
    hex
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

/// The profiles' entries, resolved.
#[derive(Debug)]
pub struct Resolved {
    /// The shard files of the Signmap and OCX, by column (none for a profile that is off).
    shards: [Vec<ShardFile>; 2],
    /// The CDIF documents' temporary file, when CDIF is on.
    cdif: Option<File>,
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
    /// Its entries' lengths by profile (Signmap, OCX, CDIF document with its name's hash in
    /// front); 0 for none.
    pub lens: [u32; 3],
    /// The hash of its landing page (entries of one landing page are one record's).
    pub hash: u128,
}

impl Resolved {
    /// `rows` (a ledger's, one for each occurrence collected, in order) with the entries that
    /// lost marked, and every row of a landing page several records give.
    pub(crate) fn settle_ledger(&self, rows: Rows) -> Result<Rows, Error> {
        if self.stats.duplicate == 0 {
            return Ok(rows);
        }
        let lost =
            |row: &super::ledger::Row<'_>, seq: usize| row.landing && !self.resolution.won(seq);
        let each = |f: &mut dyn FnMut(usize, &super::ledger::Row<'_>)| -> Result<(), Error> {
            let mut reader = RowReader::new(rows.as_bytes()).map_err(|why| Error::Ledger(why.0))?;
            let mut seq = 0;
            while let Some(row) = reader.row() {
                f(seq, &row);
                seq += 1;
                reader.advance().map_err(|why| Error::Ledger(why.0))?;
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

    /// Every entry written of each column (Signmap, OCX, CDIF), won or lost, one after another
    /// in the order collected; the CDIF documents with their name's hash in front. An entry that
    /// lost may be blanked out (its length kept).
    pub(crate) fn entry_streams(&self) -> Result<[Vec<u8>; 3], Error> {
        let mut streams: [Vec<u8>; 3] = Default::default();
        for (column, open) in [(SIGNMAP, signmap::URLSET_OPEN), (OCX, ocx::URLSET_OPEN)] {
            for file in &self.shards[column] {
                let bytes = file.read()?;
                let body = bytes
                    .get(crate::render::sitemap::header(open)..)
                    .and_then(|b| b.strip_suffix(crate::render::sitemap::URLSET_CLOSE.as_bytes()));
                streams[column].extend_from_slice(body.unwrap_or_default());
            }
        }
        if let Some(file) = &self.cdif {
            use std::io::{Read, Seek};
            let mut file = file;
            file.rewind()
                .and_then(|()| file.read_to_end(&mut streams[CDIF]))
                .map_err(spill_error("read"))?;
        }
        Ok(streams)
    }

    /// No entry to publish.
    pub fn is_empty(&self) -> bool {
        self.stats.published == 0
    }

    /// With OCX: is there any OCX entry.
    pub fn has_ocx(&self) -> bool {
        self.stats.ocx_published > 0
    }

    /// Writes the shards and the index of `profile`, the Signmap or OCX, into `sink`, files
    /// written during the harvest linked into place where the sink can; the index's URL (none
    /// without an entry).
    pub fn publish<S: FileSink>(
        &self,
        profile: Profile,
        public_url: &Url,
        sink: &mut S,
    ) -> Result<Option<Url>, Error> {
        let mut shards = Shards::new(public_url, profile, "xml");
        match profile {
            Profile::Signmap => self.render_signmap(|shard| shards.put_profile(sink, shard))?,
            Profile::Ocx => self.render_ocx(|shard| shards.put_profile(sink, shard))?,
            _ => unreachable!("{profile:?} is not written from shard files"),
        };
        shards.finish(sink)
    }

    /// The Signmap's shards, each handed to `emit` as soon as it is made, within the limits
    /// counting the links' bytes too (SP-14); their number.
    pub fn render_signmap<E: From<Error>>(
        &self,
        emit: impl FnMut(ProfileShard<'_>) -> Result<(), E>,
    ) -> Result<usize, E> {
        self.render(SIGNMAP, signmap::URLSET_OPEN, emit)
    }

    /// The OCX sitemap's shards (records with an OCX type), as [`Resolved::render_signmap`].
    pub fn render_ocx<E: From<Error>>(
        &self,
        emit: impl FnMut(ProfileShard<'_>) -> Result<(), E>,
    ) -> Result<usize, E> {
        self.render(OCX, ocx::URLSET_OPEN, emit)
    }

    /// Each shard file of profile `column` as it stands, and the winners' entries of those
    /// marked to be cut again ([`ShardSpill::finish`]); in harvest order.
    fn render<E: From<Error>>(
        &self,
        column: usize,
        open: &str,
        mut emit: impl FnMut(ProfileShard<'_>) -> Result<(), E>,
    ) -> Result<usize, E> {
        let mut count = 0;
        // The winners of consecutive files cut again fill shards together, not a shard each.
        let mut cut: Option<Urlsets<'_>> = None;
        for file in &self.shards[column] {
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
    fn cut<E: From<Error>>(
        file: &ShardFile,
        kept: &[(u64, u32, Option<Datestamp>)],
        urlsets: &mut Urlsets<'_>,
        mut emit: impl FnMut(ProfileShard<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        if kept.is_empty() {
            return Ok(());
        }
        let source = File::open(file.path())
            .map_err(file.error("open"))
            .map_err(Error::from)?;
        let mut reader = SpillReader::new(&source)
            .map_err(file.error("read"))
            .map_err(Error::from)?;
        for &(at, len, lastmod) in kept {
            // A failed read stops the rendering before the shard it spoilt is emitted.
            urlsets.try_push(
                |bytes| {
                    reader
                        .read(at, len, bytes)
                        .map_err(file.error("read"))
                        .map_err(Error::from)?;
                    Ok(lastmod)
                },
                |shard| emit(ProfileShard::Cut(shard)),
            )?;
        }
        Ok(())
    }

    /// Where each winner's entry of profile `column` is among all its entries (offset, length),
    /// with its lastmod, in harvest order; winners without one (no OCX type) are left out.
    /// Read from the occurrences' file, front to back.
    fn read_entries(
        &self,
        column: usize,
    ) -> Result<impl Iterator<Item = Result<EntryAt, Error>> + '_, Error> {
        // The entries lie in `seq` order; the offset of one is the sum of the lengths before.
        let mut reader = self.resolution.read()?;
        let mut seq = 0usize;
        let mut offset = 0u64;
        Ok(std::iter::from_fn(move || {
            loop {
                let o = match reader.next_occurrence() {
                    Ok(Some(o)) => o,
                    Ok(None) => return None,
                    Err(e) => return Some(Err(e.into())),
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

    /// [`Resolved::read_entries`], whose reads the tests expect to succeed.
    #[cfg(test)]
    fn entries(&self, column: usize) -> impl Iterator<Item = EntryAt> + '_ {
        (self.read_entries(column).unwrap()).map(Result::unwrap)
    }

    /// Hands `each` the CDIF document of every record that has one, in harvest order. One
    /// buffer serves them all (a `Vec` and a name per document showed in an export's time).
    pub fn for_each_cdif_document<E: From<Error>>(
        &self,
        mut each: impl FnMut(CdifDocument<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let Some(file) = &self.cdif else {
            return Ok(());
        };
        let mut reader = SpillReader::new(file)
            .map_err(spill_error("read"))
            .map_err(Error::from)?;
        let mut bytes = Vec::new();
        let mut name = String::from(CDIF_DIR);
        // The folder's URL and the name's hash part, as the Signmap and OCX link the document.
        let mut url = self.documents.clone();
        let folder = url.as_ref().map_or(0, String::len);
        for entry in self.read_entries(CDIF)? {
            let (at, len, lastmod) = entry?;
            bytes.clear();
            reader
                .read(at, len, &mut bytes)
                .map_err(spill_error("read"))
                .map_err(Error::from)?;
            // The name's hash part first, then the document (as `Signposts::add` wrote them).
            let (hash, document) = bytes.split_at(CDIF_HASH_LEN);
            let hash = String::from_utf8_lossy(hash);
            name.truncate(CDIF_DIR.len());
            name.push_str(&hash);
            name.push_str(CDIF_EXT);
            if let Some(url) = &mut url {
                url.truncate(folder);
                url.push_str(&hash);
                url.push_str(CDIF_EXT);
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::render::Shard;
    use crate::scope::Scope;

    fn record(id: &str, date: &str, ids: &[&str], dc: &[(DcElement, &str)]) -> Record {
        Record {
            identifier: id.to_owned(),
            datestamp: Datestamp::parse(date),
            deleted: false,
            sets: vec![],
            dc_identifiers: ids.iter().map(|s| s.to_string()).collect(),
            dc: dc.iter().map(|(e, v)| (*e, *v)).collect(),
            empty_metadata: false,
        }
    }

    /// What a harvest of the repository at `base` makes of `records` for the profiles of `s`:
    /// each classified against the baseURL's scope, added to `s` and to the URL inventory that
    /// decides the winning versions.
    fn collect(s: Signposts, base: &str, records: Vec<Record>) -> Resolved {
        let mut s = s;
        let scope = &Scope::from_base_url(&Url::parse(base).unwrap()).unwrap();
        let mut inventory = crate::inventory::Inventory::new(scope.clone());
        for r in &records {
            let classes: Vec<Class<'_>> = if r.deleted {
                Vec::new()
            } else {
                r.dc_identifiers
                    .iter()
                    .map(|v| crate::classify::class(v, scope))
                    .collect()
            };
            inventory.add_classified(r, &classes, 0).unwrap();
            s.add(r, &classes).unwrap();
        }
        let (_, superseded) = inventory.finish_with_superseded();
        s.finish(&superseded).unwrap()
    }

    /// The Signmap alone, without a baseURL to link `GetRecord` at.
    fn signmap_alone() -> Signposts {
        Signposts::new(TypeMap::default(), None, Limits::default()).with_signmap()
    }

    /// The shards of the Signmap (or OCX), whether files written during the collection or cut
    /// again, and which of the two.
    fn shards(r: &Resolved, ocx: bool) -> Vec<(Shard, bool)> {
        let mut out = Vec::new();
        let emit = |s: ProfileShard<'_>| {
            out.push(match s {
                ProfileShard::File(f) => {
                    let shard = Shard {
                        bytes: f.read()?,
                        urls: f.urls(),
                        newest: f.newest(),
                    };
                    (shard, true)
                }
                ProfileShard::Cut(s) => (s.clone(), false),
            });
            Ok::<_, Error>(())
        };
        if ocx {
            r.render_ocx(emit).unwrap();
        } else {
            r.render_signmap(emit).unwrap();
        }
        out
    }

    /// Each `<url>` of the shards, as a parser reads them: its loc and its children below the
    /// lastmod (for a Signmap the links as (rel, href), for OCX the OCX elements as (name, text)).
    fn entries(r: &Resolved, ocx: bool) -> Vec<(String, Vec<(String, String)>)> {
        let mut out = Vec::new();
        for (shard, _) in shards(r, ocx) {
            let text = String::from_utf8(shard.bytes).unwrap();
            let doc = roxmltree::Document::parse(&text).unwrap();
            for url in doc.root_element().children().filter(|n| n.is_element()) {
                let loc = url.children().find(|n| n.has_tag_name((SITEMAP_NS, "loc")));
                let parts = url
                    .descendants()
                    .filter(|n| n.tag_name().namespace() != Some(SITEMAP_NS) && n.is_element())
                    .filter(|n| !n.has_tag_name((ocx::OCX_NS, "ocx")))
                    .map(|n| match n.attribute("rel") {
                        Some(rel) => (rel.to_owned(), n.attribute("href").unwrap().to_owned()),
                        None => (
                            n.tag_name().name().to_owned(),
                            n.text().unwrap_or_default().to_owned(),
                        ),
                    })
                    .collect();
                out.push((loc.unwrap().text().unwrap().to_owned(), parts));
            }
        }
        out
    }

    const SITEMAP_NS: &str = "http://www.sitemaps.org/schemas/sitemap/0.9";

    fn pairs(parts: &[(String, String)]) -> Vec<(&str, &str)> {
        parts
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect()
    }

    /// G-06, Q-23: of a record's several identifiers (a PDF, a DOI, the landing page, a URL
    /// outside the scope) the landing page is the Signmap's loc, the file an `item` link, the DOI
    /// `cite-as`; Q-24: an http(s) dc:rights is the `license`.
    #[test]
    fn a_record_becomes_a_landing_page_with_its_links() {
        let base = Url::parse("https://h/oai/request").unwrap();
        let s = Signposts::new(TypeMap::default(), Some(&base), Limits::default()).with_signmap();
        let records = vec![
            record(
                "oai:h:1",
                "2024-05-01",
                &[
                    "https://h/oai/files/1.pdf",
                    "doi:10.1234/ABC",
                    "https://h/oai/record/1",
                    "https://elsewhere/x",
                ],
                &[
                    (DcElement::Rights, "All rights reserved"),
                    (
                        DcElement::Rights,
                        "https://creativecommons.org/licenses/by/4.0/",
                    ),
                    (DcElement::Type, "info:eu-repo/semantics/doctoralThesis"),
                ],
            ),
            // Only a PDF: no landing page, not published.
            record("oai:h:2", "2024-05-01", &["https://h/oai/files/2.pdf"], &[]),
        ];
        let r = collect(s, base.as_str(), records);
        assert_eq!(r.stats.no_landing_page, 1);
        assert_eq!(r.stats.published, 1);
        let e = entries(&r, false);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].0, "https://h/oai/record/1");
        assert_eq!(
            pairs(&e[0].1),
            [
                (
                    "describedby",
                    "https://h/oai/request?verb=GetRecord&identifier=oai%3Ah%3A1&metadataPrefix=oai_dc"
                ),
                ("item", "https://h/oai/files/1.pdf"),
                ("cite-as", "https://doi.org/10.1234/ABC"),
                ("license", "https://creativecommons.org/licenses/by/4.0/"),
                ("type", "https://schema.org/Thesis"),
            ]
        );
    }

    /// The `GetRecord` link is spelled as `OaiRequest` spells it, after an existing query too
    /// (OAI-04), and escaped in the XML; it carries both arguments GetRecord requires,
    /// identifier and metadataPrefix (OAI-02).
    #[test]
    fn the_describedby_link_is_the_get_record_request() {
        for base in ["https://h/oai/request", "https://h/oai/request?repo=a&x=1"] {
            let base = Url::parse(base).unwrap();
            let mut get_record = GetRecord::new(&base);
            // One writer for identifiers that share what comes before their last colon, and
            // for others: the same URLs as each encoded whole.
            for id in [
                "oai:h:a b/é&<",
                "oai:h:a b/é&<:2",
                "oai:h:a b/é&<:3",
                "oai:h:1",
                "oai:h:",
                "oai:h:",
                "no-colon&",
                "oai:h:2",
                "oai:other:2",
                ":",
                "",
            ] {
                let expected = OaiRequest::new(
                    &base,
                    &[
                        ("verb", "GetRecord"),
                        ("identifier", id),
                        ("metadataPrefix", "oai_dc"),
                    ],
                )
                .into_url();
                assert_eq!(get_record.url(id), expected);
                let mut xml = Vec::new();
                get_record.write_xml(&mut xml, id);
                assert_eq!(String::from_utf8(xml).unwrap(), escape(&expected), "{id}");
            }
        }
    }

    /// OCX: the type from the table or the default; without either the record is counted as
    /// `ocx_no_type` (it stays in the Signmap); the teaser is cut; an image file is the image.
    #[test]
    fn ocx_fields_and_types() {
        let config = OcxConfig {
            types: TypeMap::with(&[("Lesplan".into(), "http://oerschema.org/Lesson".into())])
                .unwrap(),
            teaser_chars: 20,
            ..OcxConfig::default()
        };
        // A type the OCX table does not know.
        let thesis = || {
            record(
                "b",
                "2024-01-01",
                &["https://h/b"],
                &[(DcElement::Type, "Proefschrift")],
            )
        };
        let s =
            Signposts::new(TypeMap::default(), None, Limits::default()).with_ocx(config.clone());
        let records = vec![
            record(
                "a",
                "2024-01-01",
                &["https://h/a", "https://h/a/cover.jpg"],
                &[
                    (DcElement::Type, "Lesplan"),
                    (DcElement::Title, "Getijden"),
                    (
                        DcElement::Description,
                        "Een les over eb en vloed aan de kust",
                    ),
                ],
            ),
            thesis(),
        ];
        let r = collect(s, "https://h/oai", records);
        assert_eq!(
            (
                r.stats.published,
                r.stats.ocx_published,
                r.stats.ocx_no_type
            ),
            (2, 1, 1)
        );
        let e = entries(&r, true);
        assert_eq!(e.len(), 1);
        assert_eq!(
            pairs(&e[0].1),
            [
                ("type", "http://oerschema.org/Lesson"),
                ("name", "Getijden"),
                ("teaser", "Een les over eb en…"),
                ("image", "https://h/a/cover.jpg"),
            ]
        );

        // With a default type, the second record is published too.
        let s = Signposts::new(TypeMap::default(), None, Limits::default()).with_ocx(OcxConfig {
            default_type: Some("https://schema.org/CreativeWork".into()),
            ..config
        });
        let records = vec![thesis()];
        let r = collect(s, "https://h/oai", records);
        assert_eq!(
            pairs(&entries(&r, true)[0].1),
            [("type", "https://schema.org/CreativeWork")]
        );
    }

    #[test]
    fn the_newest_version_wins_and_deleted_records_publish_nothing() {
        let s = signmap_alone();
        let mut records = Vec::new();
        records.push(record("a", "2024-01-01", &["https://h/old"], &[]));
        records.push(record("a", "2024-02-01", &["https://h/new"], &[]));
        let mut gone = record("b", "2024-03-01", &[], &[]);
        gone.deleted = true;
        records.push(record("b", "2024-01-01", &["https://h/b"], &[]));
        records.push(gone);
        // Two records with one landing page: listed once, from the newer record.
        records.push(record("c", "2024-01-02", &["https://h/shared"], &[]));
        records.push(record("d", "2024-01-01", &["https://h/shared"], &[]));
        // An older occurrence after a newer one loses too.
        records.push(record("a", "2023-01-01", &["https://h/older"], &[]));
        let r = collect(s, "https://h/oai", records);
        let e = entries(&r, false);
        let locs: Vec<&str> = e.iter().map(|e| e.0.as_str()).collect();
        assert_eq!(locs, ["https://h/new", "https://h/shared"]);
        assert_eq!(r.stats.duplicate, 1);
        assert!(
            e.iter().all(|e| e.1.is_empty()),
            "no describedby without a base"
        );
        let shards = shards(&r, false);
        assert!(
            shards.iter().all(|(_, whole)| !whole),
            "entries lost: the file is cut again"
        );
        let lastmods: Vec<Option<Datestamp>> = r.entries(SIGNMAP).map(|(_, _, d)| d).collect();
        assert_eq!(
            lastmods,
            [
                Datestamp::parse("2024-02-01"),
                Datestamp::parse("2024-01-02")
            ]
        );
    }

    /// A file that lost a few entries keeps its place and its bytes, the lost ones blanked out
    /// (still one well-formed urlset, within the limits); one that lost many is cut again.
    #[test]
    fn a_few_lost_entries_are_blanked_out_and_many_cut_again() {
        let limits = Limits {
            max_urls: 40,
            max_bytes: 1 << 20,
        };
        let s = Signposts::new(TypeMap::default(), None, limits).with_signmap();
        let mut records: Vec<Record> = (0..80)
            .map(|n| {
                record(
                    &format!("r{n}"),
                    "2024-01-01",
                    &[&format!("https://h/oai/r/{n}")],
                    &[],
                )
            })
            .collect();
        // The first file (records 0..40) loses one entry: record 3, listed again later.
        records.push(record("r3", "2024-02-01", &["https://h/oai/r/3b"], &[]));
        // The second (40..80) loses 30 entries: records deleted later.
        for n in 50..80 {
            let mut gone = record(&format!("r{n}"), "2024-02-01", &[], &[]);
            gone.deleted = true;
            records.push(gone);
        }
        let r = collect(s, "https://h/oai", records);
        let shards = shards(&r, false);
        let whole: Vec<bool> = shards.iter().map(|(_, whole)| *whole).collect();
        assert_eq!(
            whole,
            [true, false, true],
            "blanked, cut again, the new version's file"
        );
        let (first, _) = &shards[0];
        let text = std::str::from_utf8(&first.bytes).unwrap();
        let locs: Vec<(String, String)> = locs_and_lastmods(&first.bytes);
        assert_eq!((first.urls, locs.len()), (39, 39));
        assert!(!locs.iter().any(|(loc, _)| loc == "https://h/oai/r/3"));
        let blank = text
            .lines()
            .find(|l| l.trim().is_empty() && !l.is_empty())
            .unwrap();
        assert!(blank.len() > 40, "the lost entry's bytes, blank: {blank:?}");
        assert_eq!(shards[1].0.urls, 10);
        assert_eq!(
            locs_and_lastmods(&shards[2].0.bytes),
            [("https://h/oai/r/3b".to_owned(), "2024-02-01".to_owned())]
        );
        assert_eq!(shards[2].0.newest, Datestamp::parse("2024-02-01"));
    }

    /// SP-14: the links count toward a shard's byte limit; every entry lands in one shard.
    #[test]
    fn shards_split_on_bytes_counting_links() {
        let limits = Limits {
            max_urls: 50_000,
            max_bytes: 64 * 1024,
        };
        let s = Signposts::new(TypeMap::default(), None, limits).with_signmap();
        let mut records = Vec::new();
        let files: Vec<String> = (0..40)
            .map(|i| format!("https://h/oai/files/{i:04}.pdf"))
            .collect();
        for n in 0..100 {
            let mut ids = vec![format!("https://h/oai/r/{n}")];
            ids.extend(files.iter().cloned());
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            records.push(record(&format!("r{n}"), "2024-01-01", &ids, &[]));
        }
        let r = collect(s, "https://h/oai", records);
        let shards = shards(&r, false);
        assert!(shards.len() > 1);
        assert!(
            shards
                .iter()
                .all(|(s, _)| s.bytes.len() <= limits.max_bytes)
        );
        assert_eq!(shards.iter().map(|(s, _)| s.urls).sum::<usize>(), 100);
        for (shard, whole) in &shards {
            assert!(whole, "no entry lost: every file is published as written");
            roxmltree::Document::parse(std::str::from_utf8(&shard.bytes).unwrap()).unwrap();
        }
    }

    /// CDIF: the documents come back with their stable names, and the other profiles link them.
    #[test]
    fn cdif_documents_are_named_by_identifier_and_linked() {
        let base = Url::parse("https://h/oai/request").unwrap();
        let public = Url::parse("https://g/repo/").unwrap();
        let s = Signposts::new(TypeMap::default(), Some(&base), Limits::default())
            .with_signmap()
            .with_ocx(OcxConfig {
                default_type: Some("https://schema.org/CreativeWork".into()),
                ..OcxConfig::default()
            })
            .with_cdif(Some(public.clone()))
            .unwrap();
        let mut records = Vec::new();
        for id in ["oai:h:1", "oai:h:2"] {
            let landing = format!("https://h/oai/{id}");
            records.push(record(
                id,
                "2024-01-01",
                &[&landing],
                &[(DcElement::Title, "T")],
            ));
        }
        let r = collect(s, base.as_str(), records);
        let mut docs = Vec::new();
        let mut urls = Vec::new();
        r.for_each_cdif_document(|d| {
            docs.push((d.name.to_owned(), d.lastmod, d.bytes.to_vec()));
            urls.push(d.url.map(str::to_owned));
            Ok::<(), Error>(())
        })
        .unwrap();
        assert_eq!(docs.len(), 2);
        for ((name, lastmod, bytes), id) in docs.iter().zip(["oai:h:1", "oai:h:2"]) {
            assert_eq!(name, &cdif_name(id));
            let joined = public.join(name).unwrap().to_string();
            assert!(urls.contains(&Some(joined)), "{urls:?}");
            assert_eq!(*lastmod, Datestamp::parse("2024-01-01"));
            let doc: serde_json::Value = serde_json::from_slice(bytes).unwrap();
            assert_eq!(doc["url"], format!("https://h/oai/{id}"));
        }
        let signmap = entries(&r, false);
        assert_eq!(
            signmap[0].1[0],
            (
                "describedby".to_owned(),
                public.join(&cdif_name("oai:h:1")).unwrap().to_string()
            )
        );
        let ocx = entries(&r, true);
        assert!(ocx[1].1.contains(&(
            "loc".to_owned(),
            public.join(&cdif_name("oai:h:2")).unwrap().to_string()
        )));
        assert!(
            ocx[1]
                .1
                .contains(&("format".to_owned(), "JSON-LD".to_owned()))
        );
    }

    /// A record occurrence of the model: identifier, datestamp, deleted, landing page (index
    /// into a few), with an OCX type.
    type Occurrence = (u8, Option<u8>, bool, Option<u8>, bool);

    /// An occurrence among `ids` identifiers and `landings` landing pages, deleted with the
    /// chance `deleted`.
    fn occurrence(
        ids: u8,
        landings: u8,
        deleted: f64,
    ) -> impl proptest::strategy::Strategy<Value = Occurrence> {
        use proptest::prelude::*;
        (
            0..ids,
            proptest::option::of(0u8..3),
            proptest::bool::weighted(deleted),
            proptest::option::weighted(0.85, 0..landings),
            any::<bool>(),
        )
    }

    /// The reference: newest version of each identifier (a tie: the later occurrence), deleted
    /// and landing-less records out, the newest record of each landing page (a tie: the later),
    /// in harvest order. (index, landing, datestamp, typed) of each published record.
    fn model(occurrences: &[Occurrence]) -> Vec<(usize, u8, Option<u8>, bool)> {
        let newest =
            |a: &(usize, &Occurrence), b: &(usize, &Occurrence)| (a.1.1, a.0).cmp(&(b.1.1, b.0));
        let mut by_id: BTreeMap<u8, (usize, &Occurrence)> = BTreeMap::new();
        for (i, o) in occurrences.iter().enumerate() {
            let slot = by_id.entry(o.0).or_insert((i, o));
            if newest(&(i, o), slot).is_ge() {
                *slot = (i, o);
            }
        }
        let mut by_landing: BTreeMap<u8, (usize, &Occurrence)> = BTreeMap::new();
        for (i, o) in by_id.into_values() {
            let (false, Some(landing)) = (o.2, o.3) else {
                continue;
            };
            let slot = by_landing.entry(landing).or_insert((i, o));
            if newest(&(i, o), slot).is_ge() {
                *slot = (i, o);
            }
        }
        let mut published: Vec<_> = by_landing
            .into_iter()
            .map(|(landing, (i, o))| (i, landing, o.1, o.4))
            .collect();
        published.sort();
        published
    }

    fn date(d: Option<u8>) -> String {
        d.map_or(String::new(), |d| format!("2024-01-0{}", d + 1))
    }

    proptest::proptest! {
        /// The Signmap, OCX and CDIF files hold what the reference model publishes, in harvest
        /// order, with the winning versions' lastmods, across small shards and twice over: many
        /// entries lose, and the files are cut again.
        #[test]
        fn the_profiles_publish_what_the_reference_model_does(
            occurrences in proptest::collection::vec(occurrence(5, 4, 0.15), 0..30),
        ) {
            check_profiles(&occurrences, 3)?;
        }

        /// The same with larger files, of which few entries lose: those are blanked out.
        #[test]
        fn the_profiles_publish_what_the_reference_model_does_when_few_lose(
            occurrences in proptest::collection::vec(occurrence(250, 250, 0.01), 0..200),
            max_urls in 20usize..60,
        ) {
            check_profiles(&occurrences, max_urls)?;
        }

        /// Issue 30: the same when the versions outgrow a tiny memory budget (a run on disk
        /// every few records, merged at the end) and the occurrences are read back from disk.
        #[test]
        fn the_profiles_publish_what_the_reference_model_does_when_spilling(
            occurrences in proptest::collection::vec(occurrence(40, 30, 0.1), 0..200),
            max_urls in 3usize..60,
            budget in 1u64..1024,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let budget = crate::spill::Budget::new(dir.path().to_owned(), budget);
            check_profiles_within(&occurrences, max_urls, &budget)?;
            // Its files are gone with the profiles' records.
            proptest::prop_assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        }
    }

    /// What [`the_profiles_publish_what_the_reference_model_does`] checks, with shards of at most
    /// `max_urls` entries.
    fn check_profiles(
        occurrences: &[Occurrence],
        max_urls: usize,
    ) -> Result<(), proptest::test_runner::TestCaseError> {
        check_profiles_within(occurrences, max_urls, &crate::spill::Budget::default())
    }

    /// [`check_profiles`], the records kept within `budget`.
    fn check_profiles_within(
        occurrences: &[Occurrence],
        max_urls: usize,
        budget: &crate::spill::Budget,
    ) -> Result<(), proptest::test_runner::TestCaseError> {
        let base = Url::parse("https://h/oai/request").unwrap();
        let config = OcxConfig {
            types: TypeMap::with(&[("Les".into(), "http://oerschema.org/Lesson".into())]).unwrap(),
            ..OcxConfig::default()
        };
        let limits = Limits {
            max_urls,
            max_bytes: 1 << 20,
        };
        let s = Signposts::new(TypeMap::default(), Some(&base), limits)
            .within(budget)
            .with_signmap()
            .with_ocx(config)
            .with_cdif(Some(Url::parse("https://g/").unwrap()))
            .unwrap();
        let mut records = Vec::new();
        for (i, &(id, day, deleted, landing, typed)) in occurrences.iter().enumerate() {
            let landing = landing.map(|l| format!("https://h/oai/page/{l}"));
            let file = format!("https://h/oai/files/{i}.pdf");
            let mut ids = vec![file.as_str()];
            ids.extend(landing.as_deref());
            let kind = if typed { "Les" } else { "Proefschrift" };
            let mut r = record(
                &format!("oai:h:{id}"),
                &date(day),
                &ids,
                &[(DcElement::Type, kind), (DcElement::Title, "T")],
            );
            r.deleted = deleted;
            records.push(r);
        }
        let r = collect(s, base.as_str(), records);
        let expected = model(occurrences);
        for _ in 0..2 {
            let signmap = shards(&r, false);
            let ocx = shards(&r, true);
            for shards in [&signmap, &ocx] {
                // Winners of files cut again fill shards together: one is emitted short only
                // before a file published whole, or last.
                for pair in shards.windows(2) {
                    let ((first, false), (_, false)) = (&pair[0], &pair[1]) else {
                        continue;
                    };
                    proptest::prop_assert_eq!(first.urls, max_urls);
                }
            }
            for (shard, _) in signmap.iter().chain(&ocx) {
                // Within the limits, counted right, with the newest lastmod for the index.
                let entries = locs_and_lastmods(&shard.bytes);
                proptest::prop_assert!((1..=max_urls).contains(&entries.len()));
                proptest::prop_assert_eq!(shard.urls, entries.len());
                let newest = entries
                    .iter()
                    .map(|(_, d)| Datestamp::parse(d))
                    .max()
                    .flatten();
                proptest::prop_assert_eq!(shard.newest, newest);
            }
            let listed = |shards: &[(Shard, bool)]| -> Vec<(String, String)> {
                (shards.iter())
                    .flat_map(|(s, _)| locs_and_lastmods(&s.bytes))
                    .collect()
            };
            let got = listed(&signmap);
            let want: Vec<(String, String)> = expected
                .iter()
                .map(|&(_, l, d, _)| (format!("https://h/oai/page/{l}"), date(d)))
                .collect();
            proptest::prop_assert_eq!(&got, &want);
            let got_ocx = listed(&ocx);
            let want_ocx: Vec<(String, String)> = expected
                .iter()
                .zip(&want)
                .filter(|(e, _)| e.3)
                .map(|(_, w)| w.clone())
                .collect();
            proptest::prop_assert_eq!(&got_ocx, &want_ocx);
            let mut names = Vec::new();
            r.for_each_cdif_document(|d| {
                names.push(d.name.to_owned());
                Ok::<(), Error>(())
            })
            .unwrap();
            let want_names: Vec<String> = expected
                .iter()
                .map(|&(i, ..)| cdif_name(&format!("oai:h:{}", occurrences[i].0)))
                .collect();
            proptest::prop_assert_eq!(names, want_names);
        }
        proptest::prop_assert_eq!(r.stats.published as usize, expected.len());
        Ok(())
    }

    /// The (loc, lastmod) of each `<url>` of one shard.
    fn locs_and_lastmods(bytes: &[u8]) -> Vec<(String, String)> {
        let text = std::str::from_utf8(bytes).unwrap();
        let doc = roxmltree::Document::parse(text).unwrap();
        doc.root_element()
            .children()
            .filter(|n| n.is_element())
            .map(|url| {
                let child = |name: &str| {
                    url.children()
                        .find(|n| n.has_tag_name((SITEMAP_NS, name)))
                        .and_then(|n| n.text())
                        .unwrap_or_default()
                        .to_owned()
                };
                (child("loc"), child("lastmod"))
            })
            .collect()
    }

    /// SP-07, SP-11: every media type and profile the Signmap's links carry is one `rs:ln`
    /// takes as it is ([`signmap::link_end`] writes them unchecked and unescaped).
    #[test]
    fn the_bridges_media_types_are_written_as_they_are() {
        use crate::profiles::signmap::{self, JSON_LD, XML};
        let types = || crate::classify::media_types().chain([XML, JSON_LD]);
        for t in types() {
            assert_eq!(signmap::rs_ln_type(t), Some(t), "{t} is not an rs:ln type");
        }
        for value in types().chain([
            crate::profiles::signposts::OAI_DC_PROFILE,
            crate::profiles::cdif::PROFILE,
        ]) {
            let escaped = crate::render::sitemap::escape(value);
            assert_eq!(escaped, value, "{value} needs escaping");
        }
    }
}
