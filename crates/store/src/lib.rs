//! The repository's durable state: every record the upstream has said (identifier, datestamp,
//! deleted flag, sets and the oai_dc fields the profiles use), the harvest state with its
//! per-page checkpoint, and what was published. One SQLite file per repository
//! (`store.sqlite`, `sqlite.rs`) by default; or one PostgreSQL database for every repository,
//! each store its rows there (`pg.rs`, `[state] url`). [`Store`] is the one type callers
//! use, the same methods meaning the same on both: each backend implements the crate's
//! `Backend` trait (`backend.rs`), and what a harvested page does to the store is decided
//! once, for both, by `page::decide` (`page.rs`).
//!
//! Each page is applied in one transaction together with the checkpoint that follows it, so a
//! killed process leaves either the page and its checkpoint or neither. ARCHITECTURE.md says
//! why SQLite, and why PostgreSQL beside it.
//!
//! Invariant: the state document on disk is made of the types of `persisted.rs` alone, in its
//! format 1; fields are only ever added, with defaults, so a store written
//! by an earlier version reads the same. Both backends give the same answers to the same calls.
//!
//! API boundary: [`Store`] (open, apply a page with its checkpoint, read the records and the
//! state back), [`StateUrl`] for a PostgreSQL store, [`copy`] for moving stores between the
//! backends, and the lease statements a fleet of gateways claims repositories with
//! ([`LEASE_CLAIM`]). Every failure is a [`StoreError`], which names the store and what was
//! being done. What is kept of a publish is the files crate's types
//! (`oai_bridge_files::published`); what a harvest is and what is made of the records is the
//! `oai-bridge` package's business.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use oai_pmh::{DcElement, Record};
use serde::{Deserialize, Serialize};

use oai_bridge_files::published::SharedUrl;

mod backend;
pub mod copy;
mod error;
mod page;
pub(crate) mod persisted;
mod pg;
mod sqlite;
mod tls;

use backend::{Backend, Stopped};
pub use error::StoreError;
pub use pg::LEASE_CLAIM;
pub use pg::StateUrl;

/// The store's file name in a repository's state folder.
pub const FILE: &str = "store.sqlite";

/// The page size for records holding `fields` ([`Store::fit_pages`]). The records table has no
/// rowid, so its rows live in the tree's pages, and on 4 KiB pages a row over about a kilobyte
/// (a record's body with the profiles' Dublin Core fields, abstract included) spills its tail
/// into an overflow page of its own: a million such records took 3.7 GB for 1.1 GB of bodies,
/// and writing them (to the WAL, then the checkpoint) was a third of a full refresh's CPU. On
/// 16 KiB pages rows of up to about 4 KB stay whole. A store of URLs alone (about 120 bytes a
/// record), or of URLs and EPrints' relations (a URL or two more), keeps SQLite's 4 KiB: an
/// incremental refresh rewrites a page for each scattered change, and 16 KiB pages made that
/// 40% dearer.
pub fn page_size_for(fields: oai_pmh::Fields) -> i64 {
    use oai_pmh::{DcElement, Fields};
    // `dc:relation` (EPrints' abstract page and official URL) is a URL or two.
    let small = Fields::of(&[DcElement::Relation]);
    if fields == Fields::default() || fields == small {
        4096
    } else {
        16384
    }
}

/// A store, as errors and logs name it: never with a password.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Place {
    /// A SQLite file.
    File(PathBuf),
    /// A repository's store in a PostgreSQL database.
    Postgres {
        /// The database's URL without its password ([`StateUrl::redacted`]).
        url: String,
        /// The repository.
        repository: String,
    },
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Place::File(path) => write!(f, "{}", path.display()),
            Place::Postgres { url, repository } => write!(f, "{url} (repository {repository:?})"),
        }
    }
}

/// What the store knows besides the records: kept as one JSON document, written in the same
/// transaction as the records it describes. Its JSON is `persisted::StoredState`'s, which
/// carries the format version (`persisted::FORMAT`) and mirrors the types of other modules
/// that the state holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "persisted::StoredState", into = "persisted::StoredState")]
pub struct State {
    /// The upstream the records come from (a store follows one source).
    pub source: String,
    /// The sets harvested (empty: the whole repository).
    pub sets: Vec<String>,
    /// The oai_dc elements the records hold ([`oai_pmh::Fields::bits`]).
    pub fields: u16,
    /// The configured datestamp bounds ([`oai_pmh::Datestamp::pack`]), which the records respect.
    pub bounds: (Option<i64>, Option<i64>),
    /// The last complete harvest, full or incremental.
    pub complete: Option<Complete>,
    /// When the last complete full harvest ended (Unix seconds).
    pub last_full: Option<i64>,
    /// The harvest under way, or interrupted.
    pub run: Option<Run>,
    /// Number of the last run started.
    pub runs: u64,
    /// The upstream asked not to be called before this time (Unix seconds; `Retry-After`).
    pub retry_not_before: Option<i64>,
    /// URLs in the sitemaps last published.
    pub published_urls: Option<u64>,
    /// A shrink held back by the guard, waiting for confirmation.
    pub held_shrink: Option<HeldShrink>,
    /// The last full harvest's list ended far short of the size it announced (Q-04): it proved
    /// no deletion, and the next harvest is a full one again. Cleared by a full harvest whose
    /// lists end as announced.
    pub short_list: Option<ShortList>,
    /// The upstream refused a `ListRecords` with `from` (OAI-53): every harvest is a full one
    /// until the full-harvest interval has passed since; then `from` is tried again, and an
    /// incremental harvest that completes clears it.
    pub selective_refused: Option<SelectiveRefused>,
    /// The published sitemap's layout: which shard holds which URLs.
    pub layout: oai_bridge_files::sitemap::Layout,
    /// The sitemap as last published, for the next refresh to patch; `None` while what is
    /// published may not match it (a publish under way, a full harvest, which does not mark
    /// what it changes): the next render is then a whole one.
    pub sitemap: Option<oai_bridge_files::published::PublishedSitemap>,
    /// The landing rule learned from the web (the gateway's `learn`), so that later runs decide the
    /// same without asking again.
    pub learned: Option<LearnedRule>,
    /// The robots.txt of the sites the pages are on, as last read, for a run whose read of one
    /// fails: RFC 9309 (section 2.4) lets a crawler keep using its copy of a robots.txt that is
    /// unreachable, and so a site that does not answer once neither changes what is published
    /// nor makes the next refresh render every record.
    pub robots: Vec<RobotsCopy>,
}

/// A site's robots.txt as read ([`State::robots`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RobotsCopy {
    /// The site (its origin: `https://host[:port]`).
    pub origin: String,
    /// The body; empty when the site answered that it has none (4xx).
    pub body: String,
    /// When this body was first read (Unix seconds).
    pub at: i64,
}

impl RobotsCopy {
    /// The most the copies' bodies hold together: the state is saved with every page harvested,
    /// and a repository's robots.txt is a few KiB (DSpace 7's own about 5, EPrints' and Invenio's
    /// one or less). What does not fit is read at each run, unkept.
    pub const MAX_TOTAL: usize = 16 * 1024;
}

/// What learning from the web found for a repository (the gateway's `learn`): a UI or a template,
/// or nothing, with what the web said.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LearnedRule {
    /// What it was learned for: the source, the landing settings and the resolvers, as text;
    /// learnt again when it differs.
    pub key: String,
    /// The UI learned (`ui_url`).
    pub ui_url: Option<String>,
    /// The template learned (`landing_template`).
    pub template: Option<String>,
    /// What the web said, in words.
    pub evidence: String,
    /// When (Unix seconds); learnt again after the gateway's `learn::KEEP_SECS`.
    pub at: i64,
    /// The sites (origins) the sample's pages were on besides the baseURL's, whose robots.txt
    /// is read (the gateway's `LandingSettings::sites`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sites: Vec<String>,
}

/// The last complete harvest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Complete {
    /// The `responseDate` of its first `ListRecords` response: the next incremental harvest
    /// starts there (the server's clock, not ours).
    pub response_date: String,
    /// The repository's granularity then (`YYYY-MM-DD` or `YYYY-MM-DDThh:mm:ssZ`).
    pub granularity: String,
    /// The repository's `deletedRecord` then (`no`, `transient`, `persistent`).
    pub deleted_record: String,
    /// It was an OAI Static Repository, which has no `responseDate`: read whole every time.
    #[serde(default)]
    pub static_repository: bool,
}

/// A harvest under way. When the process dies, the next run continues it: same number (so a
/// full harvest's sweep still knows what it saw), same `from`, from its checkpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    /// Records seen by this run carry this number.
    pub id: u64,
    /// A full harvest (no `from`): records it did not see are removed when it completes.
    pub full: bool,
    /// The `from` bound of an incremental harvest ([`oai_pmh::Datestamp::pack`]).
    pub from: Option<i64>,
    /// The first `responseDate` the run received.
    pub response_date: Option<String>,
    /// Where the list continues after the last page applied.
    pub checkpoint: Option<Checkpoint>,
    /// Pages applied.
    pub pages: u64,
    /// Records applied.
    pub records: u64,
    /// Times the run was resumed after an interruption.
    pub resumed: u32,
    /// The list under way, counted from its first page (Q-04).
    #[serde(default)]
    pub list: ListCount,
    /// The first list of this run that ended far short of the size it announced (Q-04).
    #[serde(default)]
    pub short: Option<ShortList>,
    /// Deleted headers among the records applied.
    #[serde(default)]
    pub deleted: u64,
    /// Why the run is a full harvest.
    #[serde(default)]
    pub full_reason: Option<FullReason>,
}

/// What a list announced and delivered so far, saved with every page so that a continued run
/// still knows (Q-04).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListCount {
    /// Its set (`None`: the whole repository).
    pub set: Option<String>,
    /// Its first page was counted: only then is `delivered` what the list delivered (a run
    /// continued by an earlier version did not count).
    pub from_start: bool,
    /// The `completeListSize` it announced first, normally on its first page.
    pub announced: Option<u64>,
    /// Records its pages delivered, deleted ones and repeats included (as the server counts).
    pub delivered: u64,
}

/// A list that ended (an empty resumption token) far short of the size it announced: OJS 3.3's
/// miscount (Q-04) ends lists early.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShortList {
    /// Its set (`None`: the whole repository).
    pub set: Option<String>,
    /// The `completeListSize` it announced.
    pub announced: u64,
    /// Records it delivered.
    pub delivered: u64,
    /// When a full harvest first ended short, of those in a row (Unix seconds).
    pub since: i64,
    /// Whether the full harvest before ended the same list at the same place: no passing cut,
    /// but a count the server gets wrong every time (or a cut it makes every time). Harvests then
    /// follow the schedule again instead of being full ones, still removing nothing.
    #[serde(default)]
    pub repeated: bool,
}

/// The upstream's refusal of selective harvesting (OAI-53, Q-26, Q-29).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelectiveRefused {
    /// What it answered to a `ListRecords` with `from`: an HTTP status or an OAI-PMH error.
    pub answer: String,
    /// The request refused.
    pub url: String,
    /// When (Unix seconds).
    pub since: i64,
}

/// Why a run harvests the whole list instead of the changes since the last complete harvest:
/// logged, and shown in the export summary and on the status page, so that a refresh that could
/// have been incremental never falls back to a full harvest silently.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FullReason {
    /// The store holds no complete harvest yet.
    FirstHarvest,
    /// The store followed another source, other sets or date bounds, or held fewer Dublin Core
    /// fields than the job needs: it was emptied.
    SettingsChanged,
    /// An OAI Static Repository has no `responseDate` to harvest from.
    StaticRepository,
    /// The last complete harvest's responses carried no `responseDate`.
    NoResponseDate,
    /// The last complete harvest's `responseDate`, which could not be read.
    UnreadableResponseDate(String),
    /// The shrink guard held a publish back: a full harvest confirms or undoes the shrink.
    HeldShrink,
    /// The last full harvest's list ended far short of its announced size (Q-04).
    ShortList,
    /// The upstream refused `from` (OAI-53) with this answer, less than the full-harvest
    /// interval ago.
    SelectiveRefused(String),
    /// The repository does not keep deletions (its `deletedRecord`, OAI-39), and the full-harvest
    /// interval has passed.
    FullInterval(String),
}

impl FullReason {
    /// A reason that comes with the schedule or the operator's own change, logged as
    /// information; the others are warnings.
    pub fn routine(&self) -> bool {
        matches!(
            self,
            Self::FirstHarvest
                | Self::SettingsChanged
                | Self::StaticRepository
                | Self::FullInterval(_)
        )
    }
}

impl std::fmt::Display for FullReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::FirstHarvest => f.write_str("the first harvest into this store"),
            Self::SettingsChanged => f.write_str(
                "the store followed another source, other sets or date bounds, or held fewer \
                 Dublin Core fields than the profiles need",
            ),
            Self::StaticRepository => {
                f.write_str("an OAI Static Repository has no responseDate to harvest from")
            }
            Self::NoResponseDate => {
                f.write_str("the last complete harvest's responses carried no responseDate")
            }
            Self::UnreadableResponseDate(date) => write!(
                f,
                "the last complete harvest's responseDate {date:?} could not be read"
            ),
            Self::HeldShrink => f.write_str(
                "the shrink guard held the last publish back: a full harvest confirms or undoes \
                 the shrink",
            ),
            Self::ShortList => f.write_str(
                "the last full harvest's list ended short of its completeListSize (Q-04)",
            ),
            Self::SelectiveRefused(answer) => write!(
                f,
                "the repository refused selective harvesting ({answer}); from is tried again \
                 once the full-harvest interval has passed (OAI-53)"
            ),
            Self::FullInterval(deleted_record) => write!(
                f,
                "the full-harvest interval has passed, and the repository does not keep \
                 deletions (deletedRecord {deleted_record:?})"
            ),
        }
    }
}

/// Where an interrupted list continues: saved with every page.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The set of the list (`None`: the whole repository).
    pub set: Option<String>,
    /// The resumption token to send next.
    pub token: String,
    /// The page it leads to.
    pub page: u64,
    /// The newest datestamp applied from the list ([`oai_pmh::Datestamp::pack`]).
    pub newest: Option<i64>,
    /// Whether the list delivered in datestamp order so far.
    pub ordered: bool,
}

/// A publish held back because it would remove too many URLs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldShrink {
    /// URLs published.
    pub published: u64,
    /// URLs the harvest would publish.
    pub harvested: u64,
    /// When it was first held (Unix seconds).
    pub since: i64,
}

/// Records and counts as the store holds them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Live records.
    pub live: u64,
    /// Deleted records (kept as tombstones with their datestamp).
    pub deleted: u64,
}

/// Where a repository's store is.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum StoreLocation {
    /// A SQLite file of its own (`{state}/store.sqlite`): the embedded default.
    File(PathBuf),
    /// PostgreSQL: one database holds the stores of many repositories, each under its name.
    Postgres {
        /// The database.
        url: StateUrl,
        /// The repository whose store this is (`[[repository]] name`).
        repository: String,
    },
}

impl StoreLocation {
    /// Where the store is, as errors and logs name it (never with a password).
    pub fn place(&self) -> Place {
        match self {
            StoreLocation::File(path) => Place::File(path.clone()),
            StoreLocation::Postgres { url, repository } => Place::Postgres {
                url: url.redacted(),
                repository: repository.clone(),
            },
        }
    }
}

/// One repository's store: a SQLite file, or its rows in a PostgreSQL database. Every method
/// means the same on both.
#[derive(Debug)]
pub struct Store {
    /// A SQLite file, or a repository's rows in PostgreSQL through a worker thread.
    backend: Box<dyn Backend>,
}

impl Store {
    /// Opens (or creates) the SQLite store at `path`. A store whose tables are of another
    /// schema version, or whose state is of a format this version does not read (a newer
    /// version's, `persisted::FORMAT`), is emptied: the next harvest is a full one.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        sqlite::Sqlite::open(path).map(|s| Store {
            backend: Box::new(s),
        })
    }

    /// Opens the store of `repository` in the PostgreSQL database at `url`, applying the
    /// schema's migrations first (`pg.rs`); a state of a format this version does not
    /// read starts that repository's store anew, as [`Store::open`] does.
    pub fn open_postgres(url: &StateUrl, repository: &str) -> Result<Self, StoreError> {
        pg::Postgres::open(url, repository).map(|p| Store {
            backend: Box::new(p),
        })
    }

    /// What the stores of `repositories` in the PostgreSQL database at `url` remember
    /// ([`Store::state`] of each), read in one query on one connection instead of a store
    /// opened for each: a repository with no state saved, or one of a format this version does
    /// not read (its store starts anew when it opens), is left out.
    pub fn postgres_states(
        url: &StateUrl,
        repositories: Vec<String>,
    ) -> Result<std::collections::HashMap<String, State>, StoreError> {
        pg::Postgres::states(url, repositories)
    }

    /// Opens (or creates) the store at `location`.
    pub fn open_at(location: &StoreLocation) -> Result<Self, StoreError> {
        match location {
            StoreLocation::File(path) => Store::open(path),
            StoreLocation::Postgres { url, repository } => Store::open_postgres(url, repository),
        }
    }

    /// Fits a SQLite store's page size to its records ([`page_size_for`]): a rebuild, best
    /// effort, on an empty store or once on a full one. PostgreSQL's pages are its own: nothing.
    pub fn fit_pages(&mut self, size: i64) {
        self.backend.fit_pages(size)
    }

    /// The SQLite store, for the tests of its tables.
    #[cfg(test)]
    fn sqlite(&self) -> &sqlite::Sqlite {
        let backend: &dyn std::any::Any = &*self.backend;
        backend.downcast_ref().expect("a SQLite store")
    }

    /// Where the store is, as errors and logs name it.
    pub fn place(&self) -> Place {
        self.backend.place()
    }

    /// The state; the default for a new store.
    pub fn state(&self) -> Result<State, StoreError> {
        self.backend.state()
    }

    /// Saves the state alone.
    pub fn save_state(&mut self, state: &State) -> Result<(), StoreError> {
        self.backend.save_state(state)
    }

    /// Removes every record and saves `state`, in one transaction (the store then follows a
    /// new source, or must be harvested again in full).
    pub fn reset(&mut self, state: &State) -> Result<(), StoreError> {
        self.backend.reset(state)
    }

    /// Applies one page: each record replaces the stored one unless that one is newer (a repeat
    /// within a harvest keeps the newest datestamp, OAI-38), and is marked seen by `run`; a
    /// deleted record becomes a tombstone. Saves `state` (the page's checkpoint) in the same
    /// transaction.
    ///
    /// An unreadable record ([`Record::unreadable`]: empty metadata, Q-35) replaces nothing: the
    /// version stored, if any, stays as it is and is marked seen (it is no deletion, I-06), and
    /// the record is listed as rejected ([`Store::rejected`]) until a readable version at least
    /// as new arrives, or a complete full harvest no longer lists it.
    ///
    /// With `track` (incremental harvests), a record that changes is listed in `changes` with
    /// the version last published, so the next publish can patch the sitemap ([`Store::dirty`]);
    /// a full harvest rewrites everything and renders it whole, so it does not pay for this.
    /// The versions last published are kept in a table of their own, not beside each record:
    /// the publish then empties that small table instead of rewriting thousands of scattered
    /// record rows (about a third of a patched refresh's time, with the WAL checkpoint).
    pub fn apply_page(
        &mut self,
        run: u64,
        records: &[Record],
        state: &State,
        track: bool,
    ) -> Result<(), StoreError> {
        self.backend.apply_page(run, records, state, track)
    }

    /// Ends a run: with `sweep`, removes every record that run did not see (a complete full
    /// harvest is the proof of their deletion, I-06); with `full` (a full harvest, which does not
    /// keep the counts as it goes), counts the live and deleted records; saves `state`; one
    /// transaction. Returns how many live records were removed.
    pub fn finish_run(
        &mut self,
        full: bool,
        sweep: Option<u64>,
        state: &State,
    ) -> Result<u64, StoreError> {
        self.backend.finish_run(full, sweep, state)
    }

    /// Calls `f` with every record changed since the last publish ([`Store::apply_page`] with
    /// `track`): as it is now (a tombstone when deleted; with its sets, kept with the change)
    /// and the version last published, if that one was live (without its sets, which the store
    /// does not keep).
    pub fn dirty<E>(
        &self,
        mut f: impl FnMut(Record, Option<Record>) -> Result<(), E>,
    ) -> Result<Result<(), E>, StoreError> {
        let mut stopped = None;
        let read = self.backend.dirty(&mut |(now, before)| {
            f(now, before).map_err(|e| {
                stopped = Some(e);
                Stopped
            })
        })?;
        // Only the callback stops a reading, keeping its error.
        Ok(read.map_err(|Stopped| stopped.expect("the callback's error")))
    }

    /// Records whose newest version the upstream sent was unreadable (empty metadata, Q-35;
    /// [`Store::apply_page`]): counted as [`oai_bridge_files::counts::Drop::EmptyMetadata`]. Those stored
    /// before keep their earlier version, published.
    pub fn rejected(&self) -> Result<u64, StoreError> {
        self.backend.rejected()
    }

    /// The identifiers of up to `n` rejected records ([`Store::rejected`]), as examples.
    pub fn rejected_examples(&self, n: usize) -> Result<Vec<String>, StoreError> {
        self.backend.rejected_examples(n)
    }

    /// The identifiers of up to `n` records whose newest version is deleted, as examples, in
    /// identifier order: read from the partial index of deleted records, so it costs as little
    /// when they are rare among millions as when they are many.
    pub fn deleted_examples(&self, n: usize) -> Result<Vec<String>, StoreError> {
        self.backend.deleted_examples(n)
    }

    /// How many records changed since the last publish ([`Store::dirty`]).
    pub fn changed(&self) -> Result<u64, StoreError> {
        self.backend.changed()
    }

    /// Every URL [`Store::shared`] knows, when there are at most `limit`; else `None`.
    pub fn shared_urls(&self, limit: u64) -> Result<Option<HashSet<String>>, StoreError> {
        self.backend.shared_urls(limit)
    }

    /// How many times `url` is published and the newest datestamp among them, when more than
    /// one record publishes it (or one twice), as recorded by the last publishes
    /// ([`Store::published`]).
    pub fn shared(&self, url: &str) -> Result<Option<SharedUrl>, StoreError> {
        self.backend.shared(url)
    }

    /// Records a publish, in one transaction: saves `state`, marks every record clean, and
    /// records the URLs that several records publish: all of them after a whole render
    /// (`replace`), else those a patch changed (fewer than two claims: no longer shared).
    pub fn published(
        &mut self,
        state: &State,
        shared: &[SharedUrl],
        replace: bool,
    ) -> Result<(), StoreError> {
        self.backend.published(state, shared, replace)
    }

    /// Checks the database (SQLite's `integrity_check`) and that the state parses.
    pub fn verify(&self) -> Result<(), StoreError> {
        self.backend.verify()
    }

    /// Live and deleted records.
    pub fn counts(&self) -> Result<Counts, StoreError> {
        self.backend.counts()
    }

    /// Live records, as kept by incremental runs and counted at the end of each full one:
    /// what [`Store::counts`] would count, without reading every record.
    pub fn live(&self) -> Result<u64, StoreError> {
        self.backend.live()
    }

    /// Records whose newest version is deleted (tombstones), kept like [`Store::live`].
    pub fn deleted(&self) -> Result<u64, StoreError> {
        self.backend.deleted()
    }

    /// Calls `f` with every live record, in identifier order; stops at `f`'s first error.
    pub fn for_each_live<E>(
        &self,
        mut f: impl FnMut(Record) -> Result<(), E>,
    ) -> Result<Result<(), E>, StoreError> {
        let mut stopped = None;
        let read = self.backend.for_each_live(&mut |r| {
            f(r).map_err(|e| {
                stopped = Some(e);
                Stopped
            })
        })?;
        // Only the callback stops a reading, keeping its error.
        Ok(read.map_err(|Stopped| stopped.expect("the callback's error")))
    }
}

/// Tag of a `dc:identifier` value in a record body; the other elements are `1 + e as u8`.
const IDENTIFIER_TAG: u8 = 0;

/// A record's oai_dc values as `tag, length (u32 LE), UTF-8 bytes` triples. Hand-written: a few
/// lines, and the store reads a million of them per render, so no self-describing format.
fn encode_body(record: &Record, out: &mut Vec<u8>) {
    let mut put = |tag: u8, value: &str| {
        out.push(tag);
        out.extend_from_slice(&(value.len() as u32).to_le_bytes());
        out.extend_from_slice(value.as_bytes());
    };
    for v in &record.dc_identifiers {
        put(IDENTIFIER_TAG, v);
    }
    for (element, v) in record.dc.iter() {
        put(1 + element as u8, v);
    }
}

/// A record's sets as the backends keep them (one text, a line each).
fn split_sets(sets: &str) -> Vec<String> {
    if sets.is_empty() {
        Vec::new()
    } else {
        sets.split('\n').map(str::to_owned).collect()
    }
}

/// The inverse of [`encode_body`]; `false` when the bytes are damaged.
fn decode_body(mut body: &[u8], record: &mut Record) -> bool {
    while let [tag, rest @ ..] = body {
        let Some((len, rest)) = rest.split_first_chunk::<4>() else {
            return false;
        };
        let len = u32::from_le_bytes(*len) as usize;
        let Some(value) = rest.get(..len).and_then(|b| std::str::from_utf8(b).ok()) else {
            return false;
        };
        match tag.checked_sub(1) {
            None => record.dc_identifiers.push(value.to_owned()),
            Some(e) => match DcElement::ALL.get(usize::from(e)) {
                Some(element) => record.dc.push(*element, value),
                None => return false,
            },
        }
        body = &rest[len..];
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/operations.md says which versions of the state a binary reads: its numbers are
    /// these (a new schema or format must say so there too).
    #[test]
    fn the_operations_guide_names_the_schema_and_the_format() {
        let guide = include_str!("../../../docs/operations.md");
        for (name, now) in [
            ("store::sqlite::SCHEMA", sqlite::SCHEMA),
            ("store::persisted::FORMAT", i64::from(persisted::FORMAT)),
        ] {
            let said = format!("`{name}`, now {now}");
            assert!(guide.contains(&said), "docs/operations.md lacks {said:?}");
        }
    }
    use oai_pmh::Datestamp;

    /// Where a test's stores are, on each backend: SQLite files in a temporary folder; a
    /// PostgreSQL database of the test's own, when `OAI_BRIDGE_TEST_POSTGRES` names a server
    /// ([`pg::testdb`]).
    pub(super) struct Each {
        dir: tempfile::TempDir,
        db: Option<pg::testdb::TestDb>,
    }

    impl std::fmt::Display for Each {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(if self.db.is_some() {
                "PostgreSQL"
            } else {
                "SQLite"
            })
        }
    }

    impl Each {
        /// SQLite, and PostgreSQL when a server is given (else `test` says it skips it).
        pub(super) fn all(test: &str) -> Vec<Each> {
            let sqlite = Each {
                dir: tempfile::tempdir().unwrap(),
                db: None,
            };
            let postgres = pg::testdb::TestDb::create(test).map(|db| Each {
                dir: tempfile::tempdir().unwrap(),
                db: Some(db),
            });
            std::iter::once(sqlite).chain(postgres).collect()
        }

        /// The store of the repository `name`.
        pub(super) fn location(&self, name: &str) -> StoreLocation {
            match &self.db {
                Some(db) => StoreLocation::Postgres {
                    url: db.url.clone(),
                    repository: name.to_owned(),
                },
                None => StoreLocation::File(self.dir.path().join(format!("{name}.sqlite"))),
            }
        }

        /// The test's store, opened (again).
        pub(super) fn open(&self) -> Store {
            Store::open_at(&self.location("r")).unwrap()
        }

        /// Another repository's store, beside the test's.
        pub(super) fn open_other(&self) -> Store {
            Store::open_at(&self.location("other")).unwrap()
        }

        /// The test's store's state, as saved.
        fn doc(&self, store: &Store) -> String {
            match &self.db {
                Some(db) => (db.client())
                    .query_one(
                        "SELECT doc FROM oai_bridge_state WHERE repository = 'r'",
                        &[],
                    )
                    .unwrap()
                    .get(0),
                None => (store.sqlite().conn)
                    .query_row("SELECT doc FROM state", [], |r| r.get(0))
                    .unwrap(),
            }
        }

        /// Writes `sets` into the row of the test's store's record `id`, as it is (behind the
        /// store's back).
        fn set_row_sets(&self, store: &Store, id: &str, sets: &str) {
            let updated = match &self.db {
                Some(db) => (db.client())
                    .execute(
                        "UPDATE oai_bridge_records SET sets = $1 WHERE repository = 'r' AND id = $2",
                        &[&sets, &id],
                    )
                    .unwrap(),
                None => (store.sqlite().conn)
                    .execute("UPDATE records SET sets = ?1 WHERE id = ?2", [sets, id])
                    .unwrap() as u64,
            };
            assert_eq!(updated, 1, "{id}");
        }

        /// Saves `doc` as the test's store's state, as it is.
        fn set_doc(&self, store: &Store, doc: &str) {
            match &self.db {
                Some(db) => assert_eq!(
                    (db.client())
                        .execute(
                            "UPDATE oai_bridge_state SET doc = $1 WHERE repository = 'r'",
                            &[&doc],
                        )
                        .unwrap(),
                    1
                ),
                None => assert_eq!(
                    (store.sqlite().conn)
                        .execute("UPDATE state SET doc = ?1", [doc])
                        .unwrap(),
                    1
                ),
            }
        }
    }

    /// Records are read back in identifier order, byte by byte (as SQLite compares text, and
    /// the sitemap's layout was made): capitals before small letters, ASCII before the rest,
    /// on both backends; so are the deleted and rejected examples.
    #[test]
    fn records_come_back_in_byte_order_on_both_backends() {
        let ids = [
            "oai:x:b", "oai:x:B", "oai:x:a", "oai:x:é", "oai:x:z", "oai:x:Z", "oai:x:10",
            "oai:x:9", "oai:x:ß", "oai:x:_",
        ];
        let mut sorted: Vec<&str> = ids.to_vec();
        sorted.sort_unstable();
        for each in Each::all("records_come_back_in_byte_order_on_both_backends") {
            let mut store = each.open();
            let page: Vec<Record> = (ids.iter())
                .map(|id| record(id, "2024-05-01", &["https://h/"]))
                .collect();
            store
                .apply_page(1, &page, &State::default(), false)
                .unwrap();
            let read: Vec<String> = live(&store).into_iter().map(|r| r.identifier).collect();
            assert_eq!(read, sorted, "{each}");
            let deleted: Vec<Record> = (ids.iter())
                .map(|id| Record {
                    deleted: true,
                    ..record(id, "2024-05-02", &[])
                })
                .collect();
            store
                .apply_page(2, &deleted, &State::default(), false)
                .unwrap();
            assert_eq!(store.deleted_examples(4).unwrap(), sorted[..4], "{each}");
            let empty: Vec<Record> = (ids.iter())
                .map(|id| Record {
                    empty_metadata: true,
                    dc: Default::default(),
                    ..record(id, "2024-05-03", &[])
                })
                .collect();
            store
                .apply_page(3, &empty, &State::default(), false)
                .unwrap();
            assert_eq!(store.rejected_examples(3).unwrap(), sorted[..3], "{each}");
        }
    }

    /// More records than one batch of the PostgreSQL store's reads come back whole and in
    /// order, and a callback's error stops the reading, on both backends.
    #[test]
    fn many_records_come_back_whole_and_a_callback_stops_the_reading() {
        for each in Each::all("many_records_come_back_whole_and_a_callback_stops_the_reading") {
            let mut store = each.open();
            let page: Vec<Record> = (0..2500)
                .map(|i| {
                    record(
                        &format!("oai:x:{i:05}"),
                        "2024-05-01",
                        &[&format!("https://h/{i}")],
                    )
                })
                .collect();
            store.apply_page(1, &page, &State::default(), true).unwrap();
            let read = live(&store);
            assert_eq!(read, page, "{each}");
            assert_eq!(dirty(&store).len(), 2500, "{each}");
            let mut seen = 0;
            let stopped = store
                .for_each_live(|_| {
                    seen += 1;
                    if seen == 1001 { Err("enough") } else { Ok(()) }
                })
                .unwrap();
            assert_eq!((stopped, seen), (Err("enough"), 1001), "{each}");
            // The store is still usable after a reading stopped early.
            assert_eq!(store.counts().unwrap().live, 2500, "{each}");
        }
    }

    /// A page that holds one record twice applies them in turn, as the upstream sent them:
    /// the newest version wins, an older repeat marks it seen, and the change lists the
    /// version before the page.
    #[test]
    fn a_page_holding_a_record_twice_applies_them_in_turn() {
        for each in Each::all("a_page_holding_a_record_twice_applies_them_in_turn") {
            let (mut store, state, a, _) = store_of_two(&each);
            let a2 = record("oai:x:1", "2024-05-03", &["https://h/1b"]);
            let a_old = record("oai:x:1", "2024-05-02", &["https://h/1old"]);
            let c1 = record("oai:x:3", "2024-05-01", &["https://h/3"]);
            let c2 = record("oai:x:3", "2024-05-02", &["https://h/3b"]);
            let page = [a2.clone(), a_old, c1, c2.clone()];
            store.apply_page(2, &page, &state, true).unwrap();
            let records = live(&store);
            assert_eq!(records[0], a2, "{each}");
            assert_eq!(records[2], c2, "{each}");
            let changes = dirty(&store);
            assert_eq!(changes.len(), 2, "{each}");
            assert_eq!(
                changes[0].1.as_ref().map(|r| &r.dc_identifiers),
                Some(&a.dc_identifiers),
                "{each}"
            );
            // As it is now, its sets too.
            assert_eq!(changes[1].0, c2, "{each}");
            assert_eq!(changes[1].1, None, "{each}");
            assert_eq!(
                (store.live().unwrap(), store.deleted().unwrap()),
                (1, 0),
                "{each}: 1 new record tracked"
            );
        }
    }

    /// A first harvest (SQLite writes its pages without reading first while the proof holds)
    /// that brings a record again in a later page decides it as any page does: an older repeat
    /// marks it seen, a newer one replaces it, and the page's other records are stored.
    #[test]
    fn a_first_harvest_that_repeats_a_record_keeps_the_newest() {
        for each in Each::all("a_first_harvest_that_repeats_a_record_keeps_the_newest") {
            let mut store = each.open();
            let state = State::default();
            let a = record("oai:x:1", "2024-05-02", &["https://h/1"]);
            let b = record("oai:x:2", "2024-05-02", &["https://h/2"]);
            store.apply_page(1, &[a.clone(), b], &state, false).unwrap();
            let a_old = record("oai:x:1", "2024-05-01", &["https://h/1old"]);
            let c = record("oai:x:3", "2024-05-01", &["https://h/3"]);
            store
                .apply_page(1, &[c.clone(), a_old], &state, false)
                .unwrap();
            let b2 = record("oai:x:2", "2024-05-03", &["https://h/2b"]);
            store
                .apply_page(1, std::slice::from_ref(&b2), &state, false)
                .unwrap();
            assert_eq!(live(&store), [a, b2, c], "{each}");
            assert_eq!(
                store.finish_run(true, Some(1), &state).unwrap(),
                0,
                "{each}: all seen"
            );
            assert_eq!(store.counts().unwrap().live, 3, "{each}");
        }
    }

    /// SQLite's page cache is the larger one for pages over records already stored (an
    /// incremental run's, a full harvest's over an earlier one) and SQLite's default for a
    /// first harvest's into an empty store, and when the store was just opened.
    #[test]
    fn the_page_cache_grows_for_pages_over_stored_records_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE);
        let mut store = Store::open(&path).unwrap();
        let cache = |store: &Store| -> i64 {
            (store.sqlite().conn)
                .pragma_query_value(None, "cache_size", |r| r.get(0))
                .unwrap()
        };
        let state = State::default();
        let page = |n: u64| {
            [record(
                &format!("oai:x:{n}"),
                "2024-01-01",
                &["https://h/1"],
            )]
        };
        assert_eq!(cache(&store), -2000, "SQLite's default when opened");
        store.apply_page(1, &page(1), &state, false).unwrap();
        assert_eq!(cache(&store), -2000, "a first harvest into an empty store");
        store.apply_page(2, &page(2), &state, true).unwrap();
        assert_eq!(cache(&store), -16 * 1024, "an incremental run's page");
        store.apply_page(3, &page(3), &state, false).unwrap();
        assert_eq!(
            cache(&store),
            -16 * 1024,
            "a full harvest over stored records"
        );
        store.reset(&state).unwrap();
        store.apply_page(4, &page(4), &state, false).unwrap();
        assert_eq!(
            cache(&store),
            -2000,
            "a full harvest into the emptied store"
        );
    }

    /// The deleted records' examples come from their partial index, not from a scan of every
    /// record (bodies and all), in a store made now and in one made before the index.
    #[test]
    fn deleted_examples_are_read_from_their_index() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE);
        let store = Store::open(&path).unwrap();
        store
            .sqlite()
            .conn
            .execute_batch(
                "DROP INDEX deleted_records;
                 INSERT INTO records VALUES ('c', NULL, 1, '', x'', 0), ('a', NULL, 0, '', x'', 0),
                     ('b', NULL, 1, '', x'', 0);",
            )
            .unwrap();
        drop(store);
        let store = Store::open(&path).unwrap();
        let mut plan = store
            .sqlite()
            .conn
            .prepare(
                "EXPLAIN QUERY PLAN \
                 SELECT id FROM records WHERE deleted <> 0 ORDER BY id LIMIT 3",
            )
            .unwrap();
        let plan: Vec<String> = (plan.query_map([], |r| r.get(3)).unwrap())
            .map(Result::unwrap)
            .collect();
        assert!(
            plan.iter().any(|p| p.contains("deleted_records")),
            "{plan:?}"
        );
        assert_eq!(store.deleted_examples(3).unwrap(), ["b", "c"]);
    }

    /// The state is saved as JSON made from types other modules own (the sitemap's layout, the
    /// published shards, the counts): a change to one of them must not leave a store made
    /// before unreadable, or read it wrong. `fixtures/store/state-v1.json` is a state as an
    /// export with `--state` saved it (the sample, 100 URLs a shard); it must read as it was
    /// written. A change that cannot read it needs a conversion, not a new fixture.
    #[test]
    fn a_state_saved_by_an_earlier_version_reads_as_it_was_written() {
        let doc = include_str!("../../../fixtures/store/state-v1.json");
        let state: State = serde_json::from_str(doc).expect("the saved state reads");
        assert_eq!(state.source, "fixtures/sample-repository.xml");
        assert_eq!(state.published_urls, Some(456));
        assert_eq!(state.layout.ranges.len(), 5);
        assert_eq!(
            state.layout.ranges[1],
            (
                "https://repository.northbridge.example/bitstreams/3/these-3.pdf".to_owned(),
                2
            )
        );
        let sitemap = state.sitemap.expect("a published sitemap");
        assert_eq!(sitemap.scope, "https://repository.northbridge.example/");
        assert_eq!((sitemap.max_urls, sitemap.ext.as_str()), (100, "xml"));
        let shards: Vec<(u32, u64, u64, Option<u32>)> = sitemap
            .shards
            .iter()
            .map(|s| (s.number, s.len, s.urls, s.crc))
            .collect();
        assert_eq!(shards[0], (1, 11942, 100, Some(809_833_213)));
        assert_eq!(shards[4], (5, 5679, 56, Some(3_317_611_144)));
        assert_eq!(sitemap.stats.urls, 456);
        assert_eq!(
            sitemap
                .stats
                .dropped(oai_bridge_files::counts::Drop::PersistentId),
            216
        );
        assert_eq!(
            sitemap
                .stats
                .dropped(oai_bridge_files::counts::Drop::Deleted),
            13
        );
        // Written again, it reads the same.
        let again: State =
            serde_json::from_str(&serde_json::to_string(&state_of(doc)).unwrap()).unwrap();
        assert_eq!(again.layout.ranges, state_of(doc).layout.ranges);
    }

    /// `doc` without the whitespace between its tokens: the JSON `serde_json` writes.
    fn compact(doc: &str) -> String {
        let (mut out, mut in_string, mut escaped) = (String::new(), false, false);
        for c in doc.chars() {
            if in_string {
                in_string = escaped || c != '"';
                escaped = !escaped && c == '\\';
            } else if c.is_whitespace() {
                continue;
            } else {
                in_string = c == '"';
            }
            out.push(c);
        }
        out
    }

    /// A state written now is the one earlier versions wrote, byte for byte, with its format
    /// in front and the mark of changes that keep their sets at its end: earlier versions,
    /// which ignore fields they do not know, read it as before.
    #[test]
    fn a_state_is_written_as_earlier_versions_wrote_it_with_its_format() {
        let doc = include_str!("../../../fixtures/store/state-v1.json");
        let written = serde_json::to_string(&state_of(doc)).unwrap();
        let earlier = compact(doc);
        let fields = (written.strip_prefix(r#"{"format":1,"#))
            .and_then(|w| w.strip_suffix(r#","changes_keep_sets":true}"#));
        assert_eq!(
            fields,
            earlier.strip_prefix('{').and_then(|e| e.strip_suffix('}')),
            "{written}"
        );
        assert!(persisted::keeps_change_sets(&written));
        assert!(!persisted::keeps_change_sets(doc));
    }

    /// Every field of the state, set, comes back from the store as it was saved.
    #[test]
    fn a_state_round_trips_through_the_store() {
        for each in Each::all("a_state_round_trips_through_the_store") {
            let doc = include_str!("../../../fixtures/store/state-v1.json");
            let mut state = state_of(doc);
            let checkpoint = Checkpoint {
                set: Some("a:b".into()),
                token: "tok&en".into(),
                page: 7,
                newest: Some(3_522_182_401),
                ordered: true,
            };
            let short = ShortList {
                set: None,
                announced: 900,
                delivered: 300,
                since: 1_700_000_000,
                repeated: true,
            };
            state.sets = vec!["a:b".into(), "c".into()];
            state.bounds = (Some(1), None);
            state.run = Some(Run {
                id: 4,
                full: true,
                from: Some(3_500_000_000),
                response_date: Some("2026-05-01T00:00:00Z".into()),
                checkpoint: Some(checkpoint),
                pages: 6,
                records: 600,
                resumed: 2,
                list: ListCount {
                    set: Some("a:b".into()),
                    from_start: true,
                    announced: Some(900),
                    delivered: 600,
                },
                short: Some(short.clone()),
                deleted: 3,
                full_reason: Some(FullReason::SelectiveRefused("HTTP 500".into())),
            });
            state.retry_not_before = Some(1_800_000_000);
            state.held_shrink = Some(HeldShrink {
                published: 456,
                harvested: 12,
                since: 1_700_000_001,
            });
            state.short_list = Some(short);
            state.selective_refused = Some(SelectiveRefused {
                answer: "badArgument".into(),
                url: "https://h/oai?verb=ListRecords&from=2026-01-01".into(),
                since: 1_700_000_002,
            });
            each.open().save_state(&state).unwrap();
            let store = each.open();
            assert_eq!(store.state().unwrap(), state, "{each}");
            let saved = each.doc(&store);
            assert!(
                saved.starts_with(r#"{"format":1,"source":"#),
                "{each}: {saved}"
            );
            // A new store's state, too.
            let mut store = each.open_other();
            assert_eq!(store.state().unwrap(), State::default(), "{each}");
            store.save_state(&State::default()).unwrap();
            assert_eq!(store.state().unwrap(), State::default(), "{each}");
        }
    }

    /// A state of a format this version does not know (a newer version's) is not read as if it
    /// were of this one: parsing it says why, and the store starts anew, as a store whose tables
    /// are of another version does.
    #[test]
    fn a_state_of_an_unknown_format_is_not_read_and_the_store_starts_anew() {
        for each in Each::all("a_state_of_an_unknown_format_is_not_read_and_the_store_starts_anew")
        {
            let doc = include_str!("../../../fixtures/store/state-v1.json");
            let newer = doc.replacen('{', r#"{"format": 2,"#, 1);
            let refused = serde_json::from_str::<State>(&newer).unwrap_err();
            assert!(refused.to_string().contains("state format 2"), "{refused}");
            let same = doc.replacen('{', r#"{"format": 1,"#, 1);
            assert_eq!(serde_json::from_str::<State>(&same).unwrap(), state_of(doc));

            let mut store = each.open();
            let state = state_of(doc);
            store
                .apply_page(
                    1,
                    &[record("oai:x:1", "2024-05-01", &["https://h/1"])],
                    &state,
                    false,
                )
                .unwrap();
            drop(store);
            let store = each.open();
            assert_eq!(
                store.state().unwrap(),
                state,
                "{each}: a state of this format is kept"
            );
            assert_eq!(live(&store).len(), 1);
            each.set_doc(&store, &newer);
            assert!(store.state().is_err());
            drop(store);
            let store = each.open();
            assert_eq!(store.state().unwrap(), State::default(), "{each}");
            assert!(live(&store).is_empty());
            assert_eq!(store.live().unwrap(), 0);
        }
    }

    fn state_of(doc: &str) -> State {
        serde_json::from_str(doc).unwrap()
    }

    fn record(id: &str, date: &str, urls: &[&str]) -> Record {
        Record {
            identifier: id.to_owned(),
            datestamp: Datestamp::parse(date),
            deleted: false,
            sets: vec!["a:b".into(), "c".into()],
            dc_identifiers: urls.iter().map(|u| (*u).to_owned()).collect(),
            dc: [(DcElement::Title, "Tïtle"), (DcElement::Rights, "")]
                .into_iter()
                .collect(),
            empty_metadata: false,
        }
    }

    fn live(store: &Store) -> Vec<Record> {
        let mut out = Vec::new();
        store
            .for_each_live(|r| {
                out.push(r);
                Ok::<_, ()>(())
            })
            .unwrap()
            .unwrap();
        out
    }

    fn page_size(path: &Path) -> i64 {
        rusqlite::Connection::open(path)
            .unwrap()
            .pragma_query_value(None, "page_size", |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn a_store_moves_onto_the_pages_its_records_need_keeping_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.sqlite");
        let mut store = Store::open(&path).unwrap();
        assert_eq!(page_size(&path), 4096, "a new store");
        store
            .apply_page(
                1,
                &[record("oai:x:1", "2024-01-01", &["https://x/1"])],
                &State::default(),
                false,
            )
            .unwrap();
        let profiles = page_size_for(oai_pmh::Fields::of(&[DcElement::Title]));
        assert_eq!(profiles, 16384);
        // EPrints' relations are a URL or two: small pages still.
        let relations = oai_pmh::Fields::of(&[DcElement::Relation]);
        assert_eq!(page_size_for(relations), 4096);
        store.fit_pages(profiles);
        assert_eq!(page_size(&path), 16384);
        let mode: String = store
            .sqlite()
            .conn
            .pragma_query_value(None, "journal_mode", |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        let records = live(&store);
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].dc_identifiers, ["https://x/1"]);
        // Not back onto small pages while it holds records; once empty, yes.
        let plain = page_size_for(oai_pmh::Fields::default());
        store.fit_pages(plain);
        assert_eq!(page_size(&path), 16384);
        store.reset(&State::default()).unwrap();
        store.fit_pages(plain);
        assert_eq!(page_size(&path), 4096);
    }

    #[test]
    fn records_round_trip_and_keep_the_newest_datestamp() {
        for each in Each::all("records_round_trip_and_keep_the_newest_datestamp") {
            let mut store = each.open();
            let state = State::default();
            let a = record("oai:x:1", "2024-05-02", &["https://h/1", "doi:10.1/x"]);
            store
                .apply_page(1, std::slice::from_ref(&a), &state, false)
                .unwrap();
            // OAI-38: an older repeat does not replace the record, but marks it seen.
            let older = record("oai:x:1", "2024-05-01", &["https://h/old"]);
            store.apply_page(2, &[older], &state, false).unwrap();
            assert_eq!(live(&store), std::slice::from_ref(&a));
            assert_eq!(store.finish_run(true, Some(2), &state).unwrap(), 0);
            assert_eq!(live(&store), [a]);
        }
    }

    #[test]
    fn deletions_and_the_sweep_of_a_full_harvest() {
        for each in Each::all("deletions_and_the_sweep_of_a_full_harvest") {
            let mut store = each.open();
            let mut state = State::default();
            let records: Vec<_> = (1..=3)
                .map(|i| record(&format!("oai:x:{i}"), "2024-05-01", &["https://h/"]))
                .collect();
            store.apply_page(1, &records, &state, false).unwrap();
            let mut gone = record("oai:x:2", "2024-05-03", &[]);
            gone.deleted = true;
            store.apply_page(2, &[gone], &state, false).unwrap();
            assert_eq!(
                store.counts().unwrap(),
                Counts {
                    live: 2,
                    deleted: 1
                }
            );
            // A full run 3 that saw only record 1: records 3 (live) and 2 (tombstone) go.
            store.apply_page(3, &records[..1], &state, false).unwrap();
            state.runs = 3;
            assert_eq!(store.finish_run(true, Some(3), &state).unwrap(), 1);
            assert_eq!(
                store.counts().unwrap(),
                Counts {
                    live: 1,
                    deleted: 0
                }
            );
            // The full run counted what is live; incremental runs keep the count as they go: a new
            // record, a new one deleted at once, an older repeat that changes nothing, a deletion,
            // an update, a return.
            assert_eq!((store.live().unwrap(), store.deleted().unwrap()), (1, 0));
            let mut dead = record("oai:x:5", "2024-05-04", &[]);
            dead.deleted = true;
            let mut gone = record("oai:x:1", "2024-05-05", &[]);
            gone.deleted = true;
            let steps = [
                vec![record("oai:x:4", "2024-05-04", &["https://h/4"]), dead],
                vec![record("oai:x:4", "2024-05-01", &[])],
                vec![gone],
                vec![record("oai:x:4", "2024-05-06", &["https://h/4b"])],
                vec![record("oai:x:1", "2024-05-07", &["https://h/1"])],
            ];
            for (i, page) in steps.iter().enumerate() {
                store.apply_page(4 + i as u64, page, &state, true).unwrap();
                let counts = store.counts().unwrap();
                assert_eq!(
                    (store.live().unwrap(), store.deleted().unwrap()),
                    (counts.live, counts.deleted),
                    "{each}: step {i}"
                );
            }
            assert_eq!((store.live().unwrap(), store.deleted().unwrap()), (2, 1));
            drop(store);
            let store = each.open();
            assert_eq!(store.state().unwrap().runs, 3);
            assert_eq!(live(&store)[0].identifier, "oai:x:1");
        }
    }

    /// A store of version 5 made before the deleted records were counted counts them on opening.
    #[test]
    fn a_store_made_before_the_deleted_count_counts_its_deleted_records_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE);
        let mut store = Store::open(&path).unwrap();
        let mut gone = record("oai:x:2", "2024-05-03", &[]);
        gone.deleted = true;
        let page = [record("oai:x:1", "2024-05-01", &["https://h/"]), gone];
        store
            .apply_page(1, &page, &State::default(), false)
            .unwrap();
        store
            .sqlite()
            .conn
            .execute_batch("ALTER TABLE tally DROP COLUMN deleted")
            .unwrap();
        drop(store);
        let store = Store::open(&path).unwrap();
        assert_eq!(store.deleted().unwrap(), 1);
    }

    fn dirty(store: &Store) -> Vec<(Record, Option<Record>)> {
        let mut out = Vec::new();
        store
            .dirty(|now, before| {
                out.push((now, before));
                Ok::<_, ()>(())
            })
            .unwrap()
            .unwrap();
        out.sort_by(|a, b| a.0.identifier.cmp(&b.0.identifier));
        out
    }

    /// A new store at `each` that a full harvest's first page gave two records.
    fn store_of_two(each: &Each) -> (Store, State, Record, Record) {
        let mut store = each.open();
        let state = State::default();
        let a = record("oai:x:1", "2024-05-01", &["https://h/1"]);
        let b = record("oai:x:2", "2024-05-01", &["https://h/2"]);
        store
            .apply_page(1, &[a.clone(), b.clone()], &state, false)
            .unwrap();
        (store, state, a, b)
    }

    /// A change keeps the record's sets beside it, so a publish reads the changes alone; one
    /// listed before they were kept (a store of an earlier version, its column added when it
    /// opens) has them read from the record's row.
    #[test]
    fn changes_listed_without_their_sets_have_the_records() {
        for each in Each::all("changes_listed_without_their_sets_have_the_records") {
            let (mut store, state, _, _) = store_of_two(&each);
            let mut a2 = record("oai:x:1", "2024-05-02", &["https://h/1b"]);
            a2.sets = vec!["moved".into()];
            let b2 = record("oai:x:2", "2024-05-02", &["https://h/2b"]);
            store
                .apply_page(2, &[a2.clone(), b2], &state, true)
                .unwrap();
            let listed = dirty(&store);
            assert_eq!(listed[0].0.sets, a2.sets, "{each}");
            // The sets are the change's: what the record's row holds is not read.
            each.set_row_sets(&store, "oai:x:2", "elsewhere");
            assert_eq!(dirty(&store), listed, "{each}");
            // Listed without them (record 1's), the sets are the row's.
            match &each.db {
                Some(db) => {
                    let sql = "UPDATE oai_bridge_changes SET now_sets = NULL WHERE id = 'oai:x:1'";
                    db.client().execute(sql, &[]).unwrap();
                }
                None => {
                    let sql = "ALTER TABLE changes DROP COLUMN now_sets";
                    store.sqlite().conn.execute(sql, []).unwrap();
                    drop(store);
                    store = each.open();
                }
            }
            let read = dirty(&store);
            assert_eq!(read[0], listed[0], "{each}");
            // Record 2's: its row's on SQLite, whose column was dropped for every change.
            let two = match &each.db {
                Some(_) => listed[1].0.sets.clone(),
                None => vec!["elsewhere".to_owned()],
            };
            assert_eq!(read[1].0.sets, two, "{each}");
            // A change listed again keeps them.
            let mut a3 = record("oai:x:1", "2024-05-03", &["https://h/1c"]);
            a3.sets = vec!["again".into()];
            store.apply_page(3, &[a3.clone()], &state, true).unwrap();
            each.set_row_sets(&store, "oai:x:1", "");
            assert_eq!(dirty(&store)[0].0.sets, a3.sets, "{each}");
            // A version before the column, run on a SQLite store (a rollback), writes the
            // record's row, not the change's sets, and saves the state without the mark: opened
            // again, the store reads the sets from the row. The state saved again is marked.
            if each.db.is_none() {
                each.set_row_sets(&store, "oai:x:1", "rolled back");
                assert_eq!(dirty(&store)[0].0.sets, a3.sets);
                store.save_state(&state).unwrap();
                let doc = each.doc(&store);
                let unmarked = doc.replace(r#","changes_keep_sets":true"#, "");
                assert_ne!(doc, unmarked);
                each.set_doc(&store, &unmarked);
                drop(store);
                let mut store = each.open();
                assert_eq!(dirty(&store)[0].0.sets, ["rolled back"]);
                store.save_state(&state).unwrap();
                assert!(persisted::keeps_change_sets(&each.doc(&store)));
            }
        }
    }

    #[test]
    fn tracked_changes_keep_the_version_last_published_until_the_next_publish() {
        for each in
            Each::all("tracked_changes_keep_the_version_last_published_until_the_next_publish")
        {
            // A full harvest marks nothing.
            let (mut store, state, a, b) = store_of_two(&each);
            assert!(dirty(&store).is_empty());
            // Two incremental changes to one record: the version published is the first one's.
            let a2 = record("oai:x:1", "2024-05-02", &["https://h/1b"]);
            let a3 = record("oai:x:1", "2024-05-03", &["https://h/1c"]);
            store
                .apply_page(2, std::slice::from_ref(&a2), &state, true)
                .unwrap();
            store
                .apply_page(3, std::slice::from_ref(&a3), &state, true)
                .unwrap();
            // An older repeat changes nothing; a deletion is a tombstone whose published version
            // was live; a new record had none.
            store
                .apply_page(3, &[record("oai:x:2", "2024-04-01", &[])], &state, true)
                .unwrap();
            let mut gone = record("oai:x:2", "2024-05-04", &[]);
            gone.deleted = true;
            gone.dc.clear();
            gone.sets.clear();
            let c = record("oai:x:3", "2024-05-04", &["https://h/3"]);
            store
                .apply_page(3, &[gone, c.clone()], &state, true)
                .unwrap();
            let changes = dirty(&store);
            assert_eq!(changes.len(), 3);
            assert_eq!(changes[0].0.sets, a3.sets, "{each}");
            assert_eq!(changes[0].0.dc_identifiers, a3.dc_identifiers);
            assert_eq!(
                changes[0].1.as_ref().unwrap().dc_identifiers,
                a.dc_identifiers
            );
            assert!(changes[1].0.deleted);
            assert_eq!(
                changes[1].1.as_ref().unwrap().dc_identifiers,
                b.dc_identifiers
            );
            assert_eq!(changes[2].0.dc_identifiers, c.dc_identifiers);
            assert_eq!(changes[2].1, None);
            assert_eq!(changes[0].1.as_ref().unwrap().datestamp, a.datestamp);
            // A publish cleans every record and records the shared URLs.
            let mut shared = SharedUrl {
                url: "https://h/s".into(),
                claims: Vec::new(),
            };
            for d in ["2020-01-01", "2024-05-01", "2024-05-01"] {
                shared.claim(Datestamp::parse(d));
            }
            shared.claim(None);
            assert_eq!(shared.newest(), Datestamp::parse("2024-05-01"));
            store
                .published(&state, std::slice::from_ref(&shared), true)
                .unwrap();
            assert!(dirty(&store).is_empty());
            assert_eq!(store.shared("https://h/s").unwrap(), Some(shared.clone()));
            assert_eq!(store.shared("https://h/1").unwrap(), None);
            // Down to one claim, it is no longer shared.
            let mut gone = shared;
            for d in ["2024-05-01", "2024-05-01", "2020-01-01"] {
                assert!(gone.release(Datestamp::parse(d)));
            }
            assert!(!gone.release(Datestamp::parse("2020-01-01")));
            assert_eq!(gone.newest(), None);
            assert_eq!(gone.claims.len(), 1);
            store.published(&state, &[gone], false).unwrap();
            assert_eq!(store.shared("https://h/s").unwrap(), None);
        }
    }

    #[test]
    fn an_unreadable_record_keeps_the_stored_version_and_is_counted_as_rejected() {
        for each in
            Each::all("an_unreadable_record_keeps_the_stored_version_and_is_counted_as_rejected")
        {
            // Q-35, I-06: a record sent with empty metadata replaces nothing and removes nothing.
            let (mut store, state, a, b) = store_of_two(&each);
            store.finish_run(true, Some(1), &state).unwrap();
            let empty = |id: &str, date: &str| Record {
                empty_metadata: true,
                dc: Default::default(),
                ..record(id, date, &[])
            };
            // Record 1 comes back unreadable, record 3 is new and unreadable, an older unreadable
            // repeat of record 2 changes nothing: tracked, the store lists no change.
            let page = [
                empty("oai:x:1", "2024-05-02"),
                empty("oai:x:3", "2024-05-02"),
                empty("oai:x:2", "2024-04-01"),
            ];
            store.apply_page(2, &page, &state, true).unwrap();
            assert!(dirty(&store).is_empty());
            assert_eq!(store.rejected().unwrap(), 2);
            assert_eq!(live(&store), [a.clone(), b.clone()]);
            assert_eq!(store.live().unwrap(), 2);
            // A full harvest that sent only those: record 1 was seen (not swept), record 2 too.
            assert_eq!(store.finish_run(true, Some(2), &state).unwrap(), 0);
            assert_eq!(live(&store), [a.clone(), b]);
            // An older readable repeat settles nothing; a version as new does, and so does a
            // deletion.
            store.apply_page(3, &[a], &state, true).unwrap();
            assert_eq!(store.rejected().unwrap(), 2);
            let c = record("oai:x:3", "2024-05-02", &["https://h/3"]);
            store.apply_page(3, &[c], &state, true).unwrap();
            assert_eq!(store.rejected().unwrap(), 1);
            let mut gone = record("oai:x:1", "2024-05-03", &[]);
            gone.deleted = true;
            store.apply_page(3, &[gone], &state, true).unwrap();
            assert_eq!(store.rejected().unwrap(), 0);
            assert_eq!(store.live().unwrap(), store.counts().unwrap().live);
            // A rejection that a complete full harvest no longer lists is forgotten.
            store
                .apply_page(4, &[empty("oai:x:4", "2024-05-04")], &state, true)
                .unwrap();
            assert_eq!(store.rejected().unwrap(), 1);
            store.apply_page(5, &[], &state, false).unwrap();
            store.finish_run(true, Some(5), &state).unwrap();
            assert_eq!(store.rejected().unwrap(), 0);
        }
    }

    #[test]
    fn damaged_bodies_are_refused() {
        let mut r = record("i", "2024-01-01", &[]);
        assert!(!decode_body(&[0, 9, 0, 0, 0, b'x'], &mut r));
        assert!(!decode_body(&[99, 1, 0, 0, 0, b'x'], &mut r));
        assert!(!decode_body(&[1, 1, 0], &mut r));
        assert!(decode_body(&[], &mut r));
    }
}
