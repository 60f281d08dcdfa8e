//! harvest -> inventory -> rendered files: the steps shared by `export` and the server's
//! refresh. The files go to a [`FileSink`], so the same code fills an export folder or memory.

use std::time::Duration;

use flate2::Compression;
use flate2::write::GzEncoder;
use std::io::Write;
use url::Url;

use crate::classify::Drop;
use crate::dctype::TypeMap;
use crate::inventory::{Inventory, InventoryFull, Published, Stats};
use crate::oai::parse::{Identify, Record};
use crate::oai::{self, Client, HarvestError, HarvestReport, HarvestRequest, Source};
use crate::patch::PublishedShard;
use crate::platform::{Classes, Detected, Landing, LandingSettings, Setting};
use crate::progress::Progress;
use crate::render::cdif::ItemLists;
use crate::render::robots::{Announced, render_robots};
use crate::render::sitemap::{
    Layout, URLSET_OPEN, Urlsets, entries as sitemap_entries, render_index, render_laid_out,
    render_shards, write_url,
};
use crate::render::{Limits, RenderError, Shard};
use crate::scope::Scope;
use crate::signposts::{CollectError, ProfileShard, Resolved, SignStats, Signposts};

/// Name of the sitemap index in every generation.
pub const INDEX_NAME: &str = "sitemap.xml";

/// Highest Woo information category (the DiWoo table has 17).
pub const DIWOO_CATEGORIES: u8 = 17;

/// Receives the files of a generation.
pub trait FileSink {
    /// The error a write can fail with.
    type Error: std::error::Error + Send + Sync + 'static;
    /// Stores one file.
    fn put(&mut self, name: &str, bytes: &[u8]) -> Result<(), Self::Error>;

    /// Stores one metadata document (`cdif/<hash>.jsonld`) with its record's datestamp. By
    /// default it is a file like any other; the server's sink packs them, as there is one per
    /// record.
    fn put_document(
        &mut self,
        name: &str,
        bytes: &[u8],
        lastmod: Option<crate::datestamp::Datestamp>,
    ) -> Result<(), Self::Error> {
        let _ = lastmod;
        self.put(name, bytes)
    }

    /// Stores the shard `name` (uncompressed: not `.gz`) that is already written out, whole, as
    /// the file at `path`, by linking that file into place instead of writing its bytes again;
    /// `false` when this sink does not or cannot, and the caller puts the bytes. The file is
    /// not changed afterwards.
    fn link_shard(&mut self, name: &str, path: &std::path::Path) -> bool {
        let _ = (name, path);
        false
    }

    /// Stores one shard, given uncompressed; `name` ends in `.xml.gz` when the job gzips.
    /// By default the shard is stored as named (gzipped for `.gz`); the server's sink overrides
    /// this to keep the plain bytes as well, because it answers both spellings.
    ///
    /// Returns when the shard last changed, if the sink knows (the server's, from the
    /// generation before): the index lists the shard with that `lastmod` (SM-10: when the file
    /// changed), not its newest entry's, which a deleted entry does not move. `None` here.
    fn put_shard(
        &mut self,
        name: &str,
        xml: &[u8],
    ) -> Result<Option<crate::datestamp::Datestamp>, Self::Error> {
        if name.ends_with(".gz") {
            self.put(name, &gzip(xml))?;
        } else {
            self.put(name, xml)?;
        }
        Ok(None)
    }
}

/// What to build.
#[derive(Clone, Debug)]
pub struct Job {
    /// What to harvest.
    pub request: HarvestRequest,
    /// Scope prefixes replacing the default.
    pub scope: Vec<Url>,
    /// Where the records' landing pages are: platform, UI, template.
    pub landing: LandingSettings,
    /// Shard limits.
    pub limits: Limits,
    /// Write `.xml.gz` shards.
    pub gzip: bool,
    /// Also write a Signmap (`signmap.xml` and its shards).
    pub signmap: bool,
    /// Also write an OCX sitemap (`ocx.xml` and its shards), so configured.
    pub ocx: Option<crate::render::ocx::OcxConfig>,
    /// Also write each record's CDIF JSON-LD (`cdif/*.jsonld`) and the CDIF sitemap.
    pub cdif: bool,
    /// Also write CDIF's metadata lists (`cdif-list-N.jsonld`, schema.org `ItemList`s of the
    /// same documents) and their sitemap.
    pub cdif_list: bool,
    /// DiWoo: setSpec -> Woo information category; one index per category.
    pub diwoo: Vec<(String, u8)>,
    /// Where the files will be served: a directory URL.
    pub public_url: Url,
    /// Where the Signmap's and OCX's shard files are written during the harvest: the system's
    /// temporary folder when `None`.
    pub spill_dir: Option<SpillDir>,
}

/// Where the Signmap's and OCX's shard files are written during the harvest, in a new folder
/// (`.oai-bridge-shards-*`) removed when the render is done.
#[derive(Clone, Debug)]
pub struct SpillDir {
    /// The folder it is made in: on the file system of the sink's files, so that the sink can
    /// link them into place ([`FileSink::link_shard`]).
    pub parent: std::path::PathBuf,
    /// The sink links them (the export): they are written with direct I/O, as the export writes
    /// its other large files, rather than through the page cache to be read back.
    pub linked: bool,
}

/// Why a generation could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PipelineError {
    /// The harvest did not reach the end of its list.
    #[error(transparent)]
    Harvest(#[from] HarvestError),
    /// No scope can be derived.
    #[error("no scope: {0}")]
    Scope(String),
    /// The job asks for something that cannot be made; the message says what.
    #[error("cannot build this job: {0}")]
    InvalidJob(String),
    /// Nothing would be published; the message says why.
    #[error("nothing to publish: {0}")]
    NothingToPublish(String),
    /// The in-memory inventory is full.
    #[error(transparent)]
    Inventory(#[from] InventoryFull),
    /// A profile's records could not be collected.
    #[error(transparent)]
    Collect(#[from] CollectError),
    /// Rendering failed.
    #[error(transparent)]
    Render(#[from] RenderError),
    /// Storing a file failed.
    #[error("{0}")]
    Sink(Box<dyn std::error::Error + Send + Sync>),
    /// The repository's state store failed.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// The published sitemap turned out not to be patchable while its shards were written (the
    /// caller renders every record instead, [`crate::incremental::render`]).
    #[error("the published sitemap cannot be patched: {0}")]
    Patch(#[from] crate::patch::Unpatchable),
    /// The upstream asked (`Retry-After`) not to be called before then.
    #[error(
        "the upstream asked (Retry-After) not to be called before {}; not harvesting until then",
        httpdate::fmt_http_date(*.0)
    )]
    NotBefore(std::time::SystemTime),
    /// The shrink guard held the publish back.
    #[error(
        "held back: this harvest would publish {harvested} URLs where {published} are published, \
         removing more than {:.0}% of them; the next complete harvest publishes it if it shows the \
         same, or pass --accept-shrink",
        share * 100.0
    )]
    ShrinkHeld {
        /// URLs published now.
        published: u64,
        /// URLs the harvest would publish.
        harvested: u64,
        /// The guard's share.
        share: f64,
    },
}

/// What a built generation holds.
#[derive(Clone, Debug)]
pub struct Built {
    /// What the harvest saw.
    pub report: HarvestReport,
    /// Counts by outcome.
    pub stats: Stats,
    /// The landing rule applied: the platform in effect and why, and the scope
    /// ([`Landing::scope`]).
    pub platform: Landing,
    /// Shard file names, in index order.
    pub shards: Vec<String>,
    /// Absolute URL of the sitemap index.
    pub index_url: Url,
    /// The Signmap's counts and index URL, when the job made one.
    pub signmap: Option<(SignStats, Url)>,
    /// The OCX sitemap's counts (`ocx_*` of [`SignStats`]) and index URL, when the job made one.
    pub ocx: Option<(SignStats, Url)>,
    /// The CDIF sitemap index, when the job made one.
    pub cdif_index: Option<Url>,
    /// The index of the CDIF lists' sitemap and the number of lists, when the job made them.
    pub cdif_lists: Option<(Url, usize)>,
    /// The counts of the landing-page profiles (Signmap, OCX, CDIF), when any is on.
    pub landing: Option<SignStats>,
    /// Each DiWoo category's counts.
    pub diwoo: Vec<DiwooStats>,
    /// Every index written for all crawlers, the sitemap index first, as robots.txt lists them
    /// (CDIF's are apart: [`Built::cdif_index`], [`Built::cdif_lists`]).
    pub indexes: Vec<Url>,
}

impl Built {
    /// Puts together what a finished build holds.
    pub fn new(harvested: Harvested, rendered: Rendered) -> Self {
        let landing = harvested.signposts.map(|s| s.stats);
        Built {
            report: harvested.report,
            stats: harvested.published.stats,
            platform: harvested.landing,
            shards: rendered.shards,
            index_url: rendered.indexes[0].clone(),
            signmap: landing.clone().zip(rendered.signmap_index),
            ocx: landing.clone().zip(rendered.ocx_index),
            cdif_index: rendered.cdif_index,
            cdif_lists: rendered.cdif_lists,
            landing,
            diwoo: rendered.diwoo,
            indexes: rendered.indexes,
        }
    }
}

/// The scope of a job: explicit prefixes, or the directory of the baseURL (for a Static
/// Repository file, of the baseURL its `Identify` states).
pub fn scope_for(job: &Job, identify_base: &str) -> Result<Scope, PipelineError> {
    scope_of(&job.request.source, &job.scope, identify_base)
}

/// [`scope_for`] the `source` with the configured `scope` prefixes (none: the default).
pub fn scope_of(
    source: &Source,
    scope: &[Url],
    identify_base: &str,
) -> Result<Scope, PipelineError> {
    if !scope.is_empty() {
        return Scope::from_prefixes(scope)
            .ok_or_else(|| PipelineError::Scope("scope prefixes must be http(s) URLs".into()));
    }
    match source {
        Source::Oai(base) => Scope::from_base_url(base).ok_or_else(|| PipelineError::Scope(format!("baseURL {base} has no host"))),
        Source::File(path) => Url::parse(identify_base)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .and_then(|u| Scope::from_base_url(&u))
            .ok_or_else(|| {
                PipelineError::Scope(format!(
                    "the Static Repository {} states baseURL {identify_base:?}, which is no http(s) URL to derive a scope from; pass --scope",
                    path.display()
                ))
            }),
    }
}

/// The baseURL whose host and path the landing rules start from: the source's, or the one a
/// Static Repository states (if it is an http(s) URL).
fn base_url(source: &Source, identify_base: &str) -> Option<Url> {
    match source {
        Source::Oai(base) => Some(base.clone()),
        Source::File(_) => Url::parse(identify_base)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https")),
    }
}

/// The landing rule of a job: its configured platform, or the one [`crate::platform::detect`]
/// finds from `identify` and `sample` (the first records); a template over either. Google's
/// rule over [`scope_for`]'s scope when that is what applies.
pub fn landing_for(
    job: &Job,
    identify: &Identify,
    sample: &[Record],
) -> Result<Landing, PipelineError> {
    landing_of(
        &job.landing,
        &job.request.source,
        &job.scope,
        identify,
        sample,
    )
}

/// [`landing_for`] `settings` and the configured `scope` prefixes of `source`.
pub fn landing_of(
    settings: &LandingSettings,
    source: &Source,
    scope: &[Url],
    identify: &Identify,
    sample: &[Record],
) -> Result<Landing, PipelineError> {
    let base = base_url(source, &identify.base_url);
    let explicit = if scope.is_empty() {
        None
    } else {
        Some(scope_of(source, scope, &identify.base_url)?)
    };
    let mut detected = match settings.platform {
        Setting::Fixed(platform) => Detected::configured(platform),
        Setting::Auto => {
            crate::platform::detect_over(base.as_ref(), identify, sample, explicit.as_ref())
        }
    };
    match Landing::new(
        settings,
        base.as_ref(),
        explicit.as_ref(),
        &mut detected,
        sample,
    ) {
        Ok(Some(landing)) => Ok(landing),
        Ok(None) => {
            let scope = match explicit {
                Some(scope) => scope,
                None => scope_of(source, scope, &identify.base_url)?,
            };
            Ok(Landing::generic(scope, detected))
        }
        Err(e) => Err(PipelineError::Scope(e.to_string())),
    }
}

/// [`landing_for`] a job whose records are in `store`: the sample is the first stored live
/// records, so that a refresh that brought no record finds the same platform.
pub fn landing_stored(
    job: &Job,
    store: &crate::store::Store,
    identify: &Identify,
) -> Result<Landing, PipelineError> {
    let mut sample = Vec::new();
    // `auto` detects from it, and DSpace finds a UI under a path from it.
    if job.landing.template.is_none() {
        let _ = store.for_each_live(|record| {
            sample.push(record);
            if sample.len() < crate::platform::SAMPLE {
                Ok(())
            } else {
                Err(())
            }
        })?;
    }
    landing_for(job, identify, &sample)
}

/// What one harvest gathered, resolved: the URL inventory and, when the job asks for a
/// landing-page profile (Signmap, OCX, CDIF), their entries.
#[derive(Debug)]
pub struct Harvested {
    /// What the harvest saw.
    pub report: HarvestReport,
    /// The landing rule the records were read with (its scope is the sitemap's).
    pub landing: Landing,
    /// The sitemap's URLs.
    pub published: Published,
    /// The landing-page profiles' entries (`job.signmap`, `job.ocx`, `job.cdif`).
    pub signposts: Option<Resolved>,
    /// The DiWoo categories (`job.diwoo`), in order: category `diwoo[i]` holds the URLs of
    /// group `i` of `published` ([`Published::iter_grouped`]).
    pub diwoo: Vec<u8>,
    /// Where the sitemap's URLs went last time, so they stay in their shards; a fresh layout
    /// when there is no earlier generation to follow. Empty for a patch, which holds the
    /// layout it starts from and makes the one after ([`crate::patch::Patched::layout`]).
    pub layout: Layout,
    /// The patch of the published sitemap that makes its shards ([`crate::patch`]);
    /// `published` then holds only the counts.
    pub patch: Option<crate::patch::Patch>,
}

/// One DiWoo category: the records of its sets, a group of the inventory.
#[derive(Debug)]
struct Category {
    number: u8,
    sets: Vec<String>,
}

impl Category {
    /// A record in set `s` is in the category: `s` is one of the category's sets or below one
    /// (`a:b` is in `a`).
    fn holds(&self, s: &str) -> bool {
        self.sets.iter().any(|c| {
            s == c || (s.starts_with(c.as_str()) && s.as_bytes().get(c.len()) == Some(&b':'))
        })
    }
}

/// Everything one harvest fills, each from the same records.
#[derive(Debug)]
struct Collectors {
    landing: Landing,
    inventory: Inventory,
    signposts: Option<Signposts>,
    diwoo: Vec<Category>,
    /// The DiWoo categories (bits, as groups) of each set seen, up to [`SETS_REMEMBERED`]: a
    /// repository has a few hundred sets, and every record is in some.
    set_groups: crate::memo::Memo<u32>,
    /// Records whose newest version was unreadable ([`oai::parse::Record::unreadable`]), with
    /// that version's datestamp: rejected, counted as [`Drop::EmptyMetadata`]. Their earlier
    /// version in the same harvest, if any, is published (as the store keeps the version it
    /// has), and a readable version at least as new settles them.
    rejected: std::collections::HashMap<String, Option<crate::datestamp::Datestamp>>,
}

/// Most sets whose DiWoo categories [`Collectors`] remembers.
const SETS_REMEMBERED: usize = 16_384;

impl Collectors {
    fn new(job: &Job, landing: Landing, identify_base: &str) -> Result<Self, PipelineError> {
        let mut diwoo: Vec<Category> = Vec::new();
        for (set, number) in &job.diwoo {
            // A category is a bit of the inventory's groups; the table has 17.
            if !(1..=DIWOO_CATEGORIES).contains(number) {
                return Err(PipelineError::InvalidJob(format!(
                    "set {set:?} is mapped to DiWoo category {number}; the Woo information \
                     categories are 1-{}",
                    DIWOO_CATEGORIES
                )));
            }
            match diwoo.iter_mut().find(|c| c.number == *number) {
                Some(c) => c.sets.push(set.clone()),
                None => diwoo.push(Category {
                    number: *number,
                    sets: vec![set.clone()],
                }),
            }
        }
        diwoo.sort_by_key(|c| c.number);
        let metadata_base = match &job.request.source {
            Source::Oai(base) => Some(base.clone()),
            // A Static Repository is read through a gateway at the baseURL it states, if any.
            Source::File(_) => Url::parse(identify_base)
                .ok()
                .filter(|u| matches!(u.scheme(), "http" | "https")),
        };
        let signposts = if job.signmap || job.ocx.is_some() || job.cdif || job.cdif_list {
            let mut s = Signposts::new(TypeMap::default(), metadata_base.as_ref(), job.limits);
            if let Some(dir) = &job.spill_dir {
                s = s.spill_in(dir.parent.clone(), dir.linked);
            }
            if job.signmap {
                s = s.with_signmap();
            }
            if let Some(config) = &job.ocx {
                s = s.with_ocx(config.clone());
            }
            if job.cdif || job.cdif_list {
                s = s.with_cdif(job.cdif.then(|| job.public_url.clone()))?;
            }
            Some(s)
        } else {
            None
        };
        Ok(Self {
            signposts,
            inventory: Inventory::new(landing.scope().clone()),
            landing,
            diwoo,
            set_groups: crate::memo::Memo::new(SETS_REMEMBERED),
            rejected: std::collections::HashMap::new(),
        })
    }

    fn finish(self, report: HarvestReport) -> Result<Harvested, PipelineError> {
        let (mut published, superseded) = self.inventory.finish_with_superseded();
        published
            .stats
            .set_dropped(Drop::EmptyMetadata, self.rejected.len() as u64);
        Ok(Harvested {
            published,
            landing: self.landing,
            signposts: self.signposts.map(|s| s.finish(&superseded)).transpose()?,
            diwoo: self.diwoo.iter().map(|c| c.number).collect(),
            report,
            layout: Layout::default(),
            patch: None,
        })
    }

    /// The DiWoo categories the record is in, as bits.
    fn groups(&mut self, record: &oai::parse::Record) -> u32 {
        if self.diwoo.is_empty() {
            return 0;
        }
        let mut groups = 0;
        for set in &record.sets {
            let diwoo = &self.diwoo;
            groups |= self.set_groups.get(set, || {
                (diwoo.iter().enumerate())
                    .filter(|(_, c)| c.holds(set))
                    .fold(0u32, |g, (i, _)| g | 1 << i)
            });
        }
        groups
    }

    fn add(&mut self, record: &oai::parse::Record) -> Result<(), CollectError> {
        if record.unreadable() {
            // neither a version of the record nor its deletion (I-06).
            let at = self.rejected.entry(record.identifier.clone()).or_default();
            *at = (*at).max(record.datestamp);
            return Ok(());
        }
        if !self.rejected.is_empty() {
            let settled = |at: &Option<_>| match (record.datestamp, *at) {
                (Some(now), Some(rejected)) => now >= rejected,
                _ => true,
            };
            if self.rejected.get(&record.identifier).is_some_and(settled) {
                self.rejected.remove(&record.identifier);
            }
        }
        // A DiWoo category is a group of the one inventory: the newest version of a record
        // decides its groups as it decides its URLs (a record that left a category's sets leaves
        // the category, as a deleted record leaves the sitemap).
        let groups = self.groups(record);
        if self.signposts.is_none() && self.landing.is_generic() {
            // The sitemap alone under Google's rule: the URLs, without their classes.
            self.inventory.add(record, groups)?;
            return Ok(());
        }
        // Each value is classified once for the sitemap and the profiles. A deleted record
        // publishes nothing: its values are not classified. On the stack for a record's usual
        // few (an allocation per record showed).
        let mut classes = Classes::new();
        self.landing.classes(record, &mut classes);
        self.inventory.add_classified(record, &classes, groups)?;
        if let Some(s) = &mut self.signposts {
            s.add(record, &classes)?;
        }
        Ok(())
    }
}

/// Harvests the job's records into a resolved inventory (and Signmap records), every profile
/// from the same pages: records are fetched once however many files are made of them.
pub async fn harvest(
    client: &Client,
    job: &Job,
    progress: &mut Progress,
) -> Result<Harvested, PipelineError> {
    let mut collectors: Option<Collectors> = None;
    // The records before the landing rule is decided: `auto` decides from the first
    // [`crate::platform::SAMPLE`] live records, as the store's path does from its first ones
    // (a first page can be empty, or all deleted). At most [`WAITING`] are held.
    let mut waiting: Vec<Record> = Vec::new();
    let mut waiting_live = 0;
    let mut identify: Option<Identify> = None;
    let mut failure: Option<PipelineError> = None;
    let report = oai::harvest(client, &job.request, |event| {
        if failure.is_some() {
            return;
        }
        let records = match &mut collectors {
            Some(_) => event.records,
            None => {
                identify.get_or_insert_with(|| event.identify.clone());
                waiting_live += event
                    .records
                    .iter()
                    .filter(|r| !r.deleted && !r.unreadable())
                    .count();
                waiting.extend(event.records);
                if waiting_live < crate::platform::SAMPLE && waiting.len() < WAITING {
                    progress.page(
                        event.page,
                        waiting.len() as u64,
                        0,
                        event.complete_list_size,
                    );
                    return;
                }
                std::mem::take(&mut waiting)
            }
        };
        if collectors.is_none() {
            let identify = identify.as_ref().expect("set above");
            match landing_for(job, identify, &records)
                .and_then(|landing| Collectors::new(job, landing, &identify.base_url))
            {
                Ok(c) => collectors = Some(c),
                Err(e) => {
                    failure = Some(e);
                    return;
                }
            }
        }
        let c = collectors.as_mut().expect("made above");
        for record in &records {
            if let Err(e) = c.add(record) {
                failure = Some(e.into());
                return;
            }
        }
        let inventory = &c.inventory;
        progress.page(
            event.page,
            inventory.records_seen(),
            inventory.urls_kept(),
            event.complete_list_size,
        );
    })
    .await;
    progress.finish();
    let report = report?;
    if let Some(e) = failure {
        return Err(e);
    }
    let mut c = match collectors {
        Some(c) => c,
        // The whole list was shorter than the sample.
        None => Collectors::new(
            job,
            landing_for(job, &report.identify, &waiting)?,
            &report.identify.base_url,
        )?,
    };
    for record in &waiting {
        c.add(record)?;
    }
    c.finish(report)
}

/// Most records held before the landing rule is decided (a list that begins with many deleted
/// records decides from what it has by then).
const WAITING: usize = 10_000;

/// Collects the store's live records as a harvest of the whole repository would have: the
/// render input of a refresh that went through the store. `report` is the harvest's that
/// updated the store. Its deleted records are counted as a harvest counts them, not read.
pub fn collect_stored(
    job: &Job,
    store: &crate::store::Store,
    report: HarvestReport,
) -> Result<Harvested, PipelineError> {
    let landing = landing_stored(job, store, &report.identify)?;
    let mut c = Collectors::new(job, landing, &report.identify.base_url)?;
    store.for_each_live(|record| c.add(&record))??;
    let mut harvested = c.finish(report)?;
    let stats = &mut harvested.published.stats;
    stats.set_dropped(Drop::EmptyMetadata, store.rejected()?);
    stats.set_deleted(store.deleted()?);
    harvested.layout = store.state()?.layout;
    Ok(harvested)
}

/// Says why nothing would be published, as an operator can act on it.
pub fn explain_empty(stats: &Stats, landing: &Landing) -> String {
    let scope = landing.scope();
    if stats.records == 0 {
        return "the repository returned no records for this request (noRecordsMatch)".to_owned();
    }
    if stats.deleted == stats.records {
        return format!("all {} records are deleted", stats.records);
    }
    let urls = stats.dropped(Drop::OutOfScope)
        + stats.dropped(Drop::TooLong)
        + stats.dropped(Drop::InvalidUrl);
    // Handles and no URL: what a DSpace that `auto` did not recognise looks like.
    let hint = if landing.is_generic() && stats.dropped(Drop::PersistentId) > 0 {
        "; if the records' Handles are DSpace's, set platform = \"dspace\" (--platform dspace)"
    } else {
        ""
    };
    if stats.dropped(Drop::OutOfScope) > 0 {
        return format!(
            "0 of {urls} URLs inside the scope {scope}; pass --scope with the prefix of the landing pages (`oai-bridge check` suggests one){hint}"
        );
    }
    format!(
        "none of the {} records has a dc:identifier that is an http(s) URL ({} not URLs, {} persistent identifiers){hint}",
        stats.records,
        stats.dropped(Drop::NotAUrl),
        stats.dropped(Drop::PersistentId)
    )
}

/// The Dublin Core elements each profile writes from, and the landing rule reads: what the
/// harvest reads besides identifiers.
pub fn fields_for(
    signmap: bool,
    ocx: bool,
    cdif: bool,
    landing: &LandingSettings,
    source: &Source,
) -> oai::parse::Fields {
    use oai::parse::{DcElement::*, Fields};
    let mut fields = Fields::default();
    if landing.reads_relations(source) {
        fields = fields.with(Fields::of(&[Relation]));
    }
    if signmap {
        fields = fields.with(Fields::of(&[Type, Rights]));
    }
    if ocx {
        fields = fields.with(Fields::of(&[Type, Title, Description]));
    }
    if cdif {
        fields = fields.with(Fields::of(&[
            Type,
            Title,
            Description,
            Creator,
            Date,
            Subject,
            Publisher,
            Language,
            Rights,
        ]));
    }
    fields
}

/// Name of the Signmap index.
pub const SIGNMAP_INDEX_NAME: &str = "signmap.xml";
/// Name of the OCX index.
pub const OCX_INDEX_NAME: &str = "ocx.xml";
/// Name of the CDIF sitemap index.
pub const CDIF_INDEX_NAME: &str = "cdif-sitemap.xml";
/// Name of the index of the sitemap of CDIF's metadata lists.
pub const CDIF_LIST_INDEX_NAME: &str = "cdif-list-sitemap.xml";
/// Prefix of CDIF's metadata lists' names (`cdif-list-1.jsonld`).
pub const CDIF_LIST_PREFIX: &str = "cdif-list";

/// Renders shards, index and robots.txt of what was harvested into `sink`, and the files of each
/// profile the job asks for (Signmap, DiWoo).
pub fn render<S: FileSink>(
    harvested: &Harvested,
    job: &Job,
    sink: &mut S,
) -> Result<Rendered, PipelineError> {
    let published = &harvested.published;
    if published.is_empty() {
        return Err(RenderError::Empty.into());
    }
    let mut sitemap = Shards::new(&job.public_url, "sitemap", job.shard_ext());
    let mut layout = harvested.layout.clone();
    let mut sitemap_shards = Vec::new();
    let mut diwoo = Diwoo::new(job, &harvested.diwoo);
    // A whole sitemap holds every URL's entry as the DiWoo categories have it, in the same
    // order: they are taken from its shards as they are written (a patch writes only some).
    let mut tap = (harvested.patch.is_none() && !harvested.diwoo.is_empty())
        .then(|| published.lastmods_and_groups());
    let mut put = |number, shard: &Shard| {
        sitemap_shards.push(PublishedShard::of(number, shard));
        sitemap.put_numbered(sink, number, shard)?;
        if let Some(urls) = &mut tap {
            for entry in sitemap_entries(&shard.bytes) {
                let (lastmod, groups) = urls.next().expect("a shard's entries are URLs in order");
                diwoo.add(sink, entry, lastmod, groups)?;
            }
        }
        Ok::<(), PipelineError>(())
    };
    match &harvested.patch {
        Some(patch) => {
            let patched = patch.write(put)?;
            if patched.urls != published.stats.urls {
                return Err(crate::patch::Unpatchable(format!(
                    "the patched shards hold {} URLs, not the {} counted",
                    patched.urls, published.stats.urls
                ))
                .into());
            }
            tracing::info!(
                rewritten = patched.rewritten,
                reused = patched.reused,
                "sitemap patched with the changed records"
            );
            layout = patched.layout;
        }
        None => {
            render_laid_out(published.iter(), job.limits, &mut layout, &mut put)?;
        }
    }
    let names = sitemap.names.clone();
    let mut indexes: Vec<Url> = sitemap.finish(sink, INDEX_NAME)?.into_iter().collect();
    let mut signmap_index = None;
    let mut ocx_index = None;
    if let Some(signposts) = harvested
        .signposts
        .as_ref()
        .filter(|s| job.signmap && !s.is_empty())
    {
        let mut shards = Shards::new(&job.public_url, "signmap", "xml");
        signposts.render_signmap(|shard| shards.put_profile(sink, shard))?;
        signmap_index = shards.finish(sink, SIGNMAP_INDEX_NAME)?;
        indexes.extend(signmap_index.clone());
    }
    if let Some(signposts) = harvested
        .signposts
        .as_ref()
        .filter(|s| job.ocx.is_some() && s.has_ocx())
    {
        let mut shards = Shards::new(&job.public_url, "ocx", "xml");
        signposts.render_ocx(|shard| shards.put_profile(sink, shard))?;
        ocx_index = shards.finish(sink, OCX_INDEX_NAME)?;
        indexes.extend(ocx_index.clone());
    }
    let mut cdif_index = None;
    let mut cdif_lists = None;
    if let Some(signposts) = harvested
        .signposts
        .as_ref()
        .filter(|_| job.cdif || job.cdif_list)
    {
        // One pass over the documents for both forms: each on its own, and in lists.
        let mut locs: Vec<(String, Option<crate::datestamp::Datestamp>)> = Vec::new();
        let mut lists = Shards::new(&job.public_url, CDIF_LIST_PREFIX, "jsonld");
        let mut item_lists = job.cdif_list.then(|| ItemLists::new(job.limits));
        signposts.for_each_cdif_document(|doc| {
            if let Some(l) = &mut item_lists {
                l.add(doc.bytes, |list| lists.put(sink, list))?;
            }
            // Published one by one (`job.cdif`): it has a URL of its own.
            if let Some(url) = doc.url {
                sink.put_document(doc.name, doc.bytes, doc.lastmod)
                    .map_err(|e| PipelineError::Sink(Box::new(e)))?;
                locs.push((url.to_owned(), doc.lastmod));
            }
            Ok::<(), PipelineError>(())
        })?;
        if job.cdif {
            let mut shards = Shards::new(&job.public_url, "cdif-sitemap", "xml");
            let items = locs.iter().map(|(u, d)| (u.as_str(), *d));
            render_shards(items, job.limits, |shard| shards.put(sink, shard))?;
            cdif_index = shards.finish(sink, CDIF_INDEX_NAME)?;
        }
        if let Some(l) = item_lists {
            l.finish(|list| lists.put(sink, list))?;
            // The lists are listed in a sitemap of their own (an index lists sitemaps only).
            let mut shards = Shards::new(&job.public_url, "cdif-list-sitemap", "xml");
            let items = lists.entries.iter().map(|(u, d)| (u.as_str(), *d));
            render_shards(items, job.limits, |shard| shards.put(sink, shard))?;
            let count = lists.names.len();
            cdif_lists = shards
                .finish(sink, CDIF_LIST_INDEX_NAME)?
                .map(|url| (url, count));
        }
    }
    if tap.is_none() {
        diwoo.add_all(sink, published)?;
    }
    let diwoo = diwoo.finish(sink, &mut indexes)?;
    let robots = render_robots(&[Announced {
        indexes: indexes.iter().map(Url::as_str).collect(),
        cdif: (cdif_index.iter())
            .chain(cdif_lists.iter().map(|(url, _)| url))
            .map(Url::as_str)
            .collect(),
    }]);
    sink.put("robots.txt", robots.as_bytes())
        .map_err(|e| PipelineError::Sink(Box::new(e)))?;
    Ok(Rendered {
        shards: names,
        sitemap_shards,
        indexes,
        signmap_index,
        ocx_index,
        cdif_index,
        cdif_lists,
        diwoo,
        layout,
    })
}

/// The DiWoo categories' shards and indexes, filled side by side (`categories[g]` is group `g`
/// of the inventory), each URL's entry written once for all its categories. DiWoo reads only
/// https locations, and every entry needs a lastmod: other URLs are counted, not published.
/// The shards of different categories reach the sink interleaved (with the sitemap's, when
/// taken from them), the indexes last, and up to one shard per category is in memory at once
/// (a few MB each for URLs of usual length; `max_bytes` each at most).
struct Diwoo<'a> {
    /// Each category's splitter, files and counts.
    outputs: Vec<(Urlsets<'a>, Shards<'a>, DiwooStats)>,
}

impl<'a> Diwoo<'a> {
    fn new(job: &'a Job, categories: &[u8]) -> Self {
        debug_assert!(categories.len() <= 32, "a category is one of 32 group bits");
        let outputs = categories
            .iter()
            .map(|&category| {
                (
                    Urlsets::new(URLSET_OPEN, job.limits),
                    Shards::new(
                        &job.public_url,
                        format!("diwoo-infocat{category:03}"),
                        "xml",
                    ),
                    DiwooStats {
                        category,
                        ..DiwooStats::default()
                    },
                )
            })
            .collect();
        Self { outputs }
    }

    /// One URL of the `groups` given, as its sitemap entry (`<url>` to the line feed, as
    /// [`write_url`] writes it) with its lastmod.
    fn add<S: FileSink>(
        &mut self,
        sink: &mut S,
        entry: &[u8],
        lastmod: Option<crate::datestamp::Datestamp>,
        groups: u32,
    ) -> Result<(), PipelineError> {
        if groups == 0 {
            return Ok(());
        }
        let https = entry.starts_with(b"<url><loc>https://");
        for (g, (urlsets, shards, stats)) in self.outputs.iter_mut().enumerate() {
            if groups & 1 << g == 0 {
                continue;
            }
            if !https {
                stats.requires_https += 1;
            } else if lastmod.is_none() {
                stats.requires_lastmod += 1;
            } else {
                stats.urls += 1;
                urlsets.push(
                    |bytes| {
                        bytes.extend_from_slice(entry);
                        lastmod
                    },
                    |shard| shards.put(sink, shard),
                )?;
            }
        }
        Ok(())
    }

    /// Every grouped URL of `published`, in one pass over the inventory (when the sitemap's
    /// shards were not all written: a patch).
    fn add_all<S: FileSink>(
        &mut self,
        sink: &mut S,
        published: &Published,
    ) -> Result<(), PipelineError> {
        if self.outputs.is_empty() {
            return Ok(());
        }
        let mut entry = Vec::with_capacity(512);
        let mut date = String::with_capacity(32);
        for (url, lastmod, groups) in published.iter_grouped() {
            entry.clear();
            write_url(&mut entry, url, lastmod, &mut date);
            self.add(sink, &entry, lastmod, groups)?;
        }
        Ok(())
    }

    /// The last shards and the indexes (their URLs go to `indexes`); the counts.
    fn finish<S: FileSink>(
        self,
        sink: &mut S,
        indexes: &mut Vec<Url>,
    ) -> Result<Vec<DiwooStats>, PipelineError> {
        let mut stats = Vec::with_capacity(self.outputs.len());
        for (urlsets, mut shards, counts) in self.outputs {
            urlsets.finish(|shard| shards.put(sink, shard))?;
            indexes.extend(shards.finish(sink, &diwoo_index_name(counts.category))?);
            stats.push(counts);
        }
        Ok(stats)
    }
}

/// The shards of one index, named `{prefix}-{n}.{ext}` as they are written; then the index.
struct Shards<'a> {
    public_url: &'a Url,
    prefix: String,
    ext: &'a str,
    names: Vec<String>,
    entries: Vec<(String, Option<crate::datestamp::Datestamp>)>,
}

impl<'a> Shards<'a> {
    fn new(public_url: &'a Url, prefix: impl Into<String>, ext: &'a str) -> Self {
        Self {
            public_url,
            prefix: prefix.into(),
            ext,
            names: Vec::new(),
            entries: Vec::new(),
        }
    }

    /// Stores the next shard.
    fn put<S: FileSink>(&mut self, sink: &mut S, shard: &Shard) -> Result<(), PipelineError> {
        let number = self.names.len() as u32 + 1;
        self.put_numbered(sink, number, shard)
    }

    /// The name of shard `number`.
    fn name(&self, number: u32) -> String {
        format!("{}-{number}.{}", self.prefix, self.ext)
    }

    /// Stores a shard as `{prefix}-{number}.{ext}`.
    fn put_numbered<S: FileSink>(
        &mut self,
        sink: &mut S,
        number: u32,
        shard: &Shard,
    ) -> Result<(), PipelineError> {
        let name = self.name(number);
        let changed = sink
            .put_shard(&name, &shard.bytes)
            .map_err(|e| PipelineError::Sink(Box::new(e)))?;
        self.listed(name, changed.or(shard.newest));
        Ok(())
    }

    /// Stores the next shard of a landing-page profile: a shard file written during the
    /// harvest is linked into place when the sink can, else read and put.
    fn put_profile<S: FileSink>(
        &mut self,
        sink: &mut S,
        shard: ProfileShard<'_>,
    ) -> Result<(), PipelineError> {
        let file = match shard {
            ProfileShard::Cut(shard) => return self.put(sink, shard),
            ProfileShard::File(file) => file,
        };
        let name = self.name(self.names.len() as u32 + 1);
        // The landing-page profiles' shards are plain `.xml`, as written (never gzipped).
        debug_assert!(!name.ends_with(".gz"), "{name}");
        let changed = if sink.link_shard(&name, file.path()) {
            None
        } else {
            sink.put_shard(&name, &file.read()?)
                .map_err(|e| PipelineError::Sink(Box::new(e)))?
        };
        self.listed(name, changed.or(file.newest()));
        Ok(())
    }

    /// Lists the shard stored as `name` in the index.
    fn listed(&mut self, name: String, newest: Option<crate::datestamp::Datestamp>) {
        self.entries
            .push((join(self.public_url, &name).to_string(), newest));
        self.names.push(name);
    }

    /// Writes the index of the shards as `index_name`, if there is any shard; its URL.
    fn finish<S: FileSink>(
        self,
        sink: &mut S,
        index_name: &str,
    ) -> Result<Option<Url>, PipelineError> {
        if self.entries.is_empty() {
            return Ok(None);
        }
        let index = render_index(self.entries.iter().map(|(loc, d)| (loc.as_str(), *d)))?;
        sink.put(index_name, &index)
            .map_err(|e| PipelineError::Sink(Box::new(e)))?;
        Ok(Some(join(self.public_url, index_name)))
    }
}

/// The DiWoo index of a Woo information category: `sitemapindex-diwoo-infocat014.xml`.
pub fn diwoo_index_name(category: u8) -> String {
    format!("sitemapindex-diwoo-infocat{category:03}.xml")
}

/// What one DiWoo category published.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DiwooStats {
    /// The Woo information category, 1-17.
    pub category: u8,
    /// URLs published.
    pub urls: u64,
    /// URLs not published because they are not https (`diwoo_requires_https`).
    pub requires_https: u64,
    /// URLs not published because their record has no datestamp (`diwoo_requires_lastmod`).
    pub requires_lastmod: u64,
}

impl Job {
    /// The extension of sitemap shards: `xml.gz` when the job gzips, else `xml`.
    pub fn shard_ext(&self) -> &'static str {
        if self.gzip { "xml.gz" } else { "xml" }
    }

    /// A fingerprint of everything that shapes the files the job writes: the source, sets and
    /// dates, scope, limits, gzip, profiles and public URL, each spelled out (not the `Debug`
    /// text of the job, which an upgrade may change). A gateway whose persisted generation was
    /// made under another one refreshes at once.
    pub fn settings_key(&self) -> String {
        // Taken apart field by field, so that a field added later does not compile until it is
        // placed here or left out on purpose.
        let Job {
            request,
            scope,
            landing,
            limits,
            gzip,
            signmap,
            ocx,
            cdif,
            cdif_list,
            diwoo,
            public_url,
            spill_dir: _,
        } = self;
        let HarvestRequest {
            source,
            sets,
            from,
            until,
            fields: _, // follows from the profiles
        } = request;
        let ocx = ocx.as_ref().map(|o| {
            let crate::render::ocx::OcxConfig {
                types,
                default_type,
                teaser_chars,
                format,
                xpath,
            } = o;
            format!("{types:?} {default_type:?} {teaser_chars} {format:?} {xpath:?}")
        });
        let date = |d: &Option<crate::datestamp::Datestamp>| d.map(|d| d.to_string());
        let scope: Vec<&str> = scope.iter().map(Url::as_str).collect();
        let mut text = format!(
            "source={source} sets={sets:?} from={:?} until={:?} scope={scope:?} max_urls={} \
             max_bytes={} gzip={gzip} signmap={signmap} ocx={ocx:?} cdif={cdif} \
             cdif_list={cdif_list} diwoo={diwoo:?} public_url={public_url}",
            date(from),
            date(until),
            limits.max_urls,
            limits.max_bytes,
        );
        // Only when set: a gateway upgraded from before platforms keeps its key (and does not
        // refresh at once) while its repositories keep the default.
        if *landing != LandingSettings::default() {
            text.push(' ');
            text.push_str(&landing.key());
        }
        format!("{:032x}", xxhash_rust::xxh3::xxh3_128(text.as_bytes()))
    }

    /// Whether the job publishes only the plain sitemap: no profile needs the records, so a
    /// refresh can patch the published sitemap ([`crate::patch`]).
    pub fn sitemap_only(&self) -> bool {
        !self.signmap
            && self.ocx.is_none()
            && !self.cdif
            && !self.cdif_list
            && self.diwoo.is_empty()
    }

    /// The indexes the job publishes, in robots.txt order: the sitemap index, then the Signmap,
    /// OCX and DiWoo indexes its profiles ask for. CDIF's sitemaps are apart ([`Job::cdif`],
    /// [`Job::cdif_list`]), as robots.txt announces them in a group of their own.
    pub fn index_names(&self) -> Vec<String> {
        let mut names = vec![INDEX_NAME.to_owned()];
        if self.signmap {
            names.push(SIGNMAP_INDEX_NAME.to_owned());
        }
        if self.ocx.is_some() {
            names.push(OCX_INDEX_NAME.to_owned());
        }
        let categories: std::collections::BTreeSet<u8> =
            self.diwoo.iter().map(|(_, n)| *n).collect();
        names.extend(categories.into_iter().map(diwoo_index_name));
        names
    }

    /// The CDIF sitemaps' indexes the job publishes: of the documents, of the lists.
    pub fn cdif_index_names(&self) -> Vec<&'static str> {
        [
            (self.cdif, CDIF_INDEX_NAME),
            (self.cdif_list, CDIF_LIST_INDEX_NAME),
        ]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect()
    }
}

/// What [`render`] wrote.
#[derive(Clone, Debug)]
pub struct Rendered {
    /// Sitemap shard names, in index order.
    pub shards: Vec<String>,
    /// The sitemap's shards as the store records them, in index order.
    pub sitemap_shards: Vec<PublishedShard>,
    /// Every index's URL, the sitemap index first, as robots.txt lists them.
    pub indexes: Vec<Url>,
    /// The Signmap index, when one was written.
    pub signmap_index: Option<Url>,
    /// The OCX index, when one was written.
    pub ocx_index: Option<Url>,
    /// The CDIF sitemap index, when one was written.
    pub cdif_index: Option<Url>,
    /// The index of the CDIF lists' sitemap and the number of lists, when lists were written.
    pub cdif_lists: Option<(Url, usize)>,
    /// Each DiWoo category's counts.
    pub diwoo: Vec<DiwooStats>,
    /// The sitemap's layout after this render, to follow next time.
    pub layout: Layout,
}

/// Gzips a file deterministically (no name, zero mtime), so equal input gives equal bytes.
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::with_capacity(bytes.len() / 8), Compression::new(6));
    encoder
        .write_all(bytes)
        .expect("writing to memory cannot fail");
    encoder.finish().expect("writing to memory cannot fail")
}

fn join(base: &Url, name: &str) -> Url {
    base.join(name)
        .expect("a file name joins onto a directory URL")
}

/// Formats a duration for summaries.
pub fn human_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 60.0 {
        format!("{s:.1} s")
    } else {
        format!("{}m{:02}s", d.as_secs() / 60, d.as_secs() % 60)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Google's rule over `scope`.
    fn generic(scope: Scope) -> Landing {
        Landing::generic(
            scope,
            Detected::configured(crate::platform::Platform::Generic),
        )
    }

    /// A job for the repository at `https://r.example/oai/request`, plain sitemap and `diwoo`.
    pub(crate) fn job(diwoo: &[(&str, u8)], limits: Limits) -> Job {
        let base = Url::parse("https://r.example/oai/request").unwrap();
        Job {
            request: HarvestRequest {
                source: Source::Oai(base),
                sets: Vec::new(),
                from: None,
                until: None,
                fields: Default::default(),
            },
            scope: Vec::new(),
            landing: LandingSettings::default(),
            limits,
            gzip: false,
            signmap: false,
            ocx: None,
            cdif: false,
            cdif_list: false,
            diwoo: diwoo.iter().map(|(s, n)| ((*s).to_owned(), *n)).collect(),
            public_url: Url::parse("https://r.example/sitemaps/").unwrap(),
            spill_dir: None,
        }
    }

    /// A sink that keeps the files in memory, by name.
    #[derive(Debug, Default)]
    pub(crate) struct Files(pub(crate) std::collections::BTreeMap<String, Vec<u8>>);

    impl FileSink for Files {
        type Error = std::convert::Infallible;
        fn put(&mut self, name: &str, bytes: &[u8]) -> Result<(), Self::Error> {
            self.0.insert(name.to_owned(), bytes.to_vec());
            Ok(())
        }
    }

    /// A generation records the settings it was made under: the same settings give the same
    /// key in any process (the OCX type table is a hash map), and each setting that shapes the
    /// files changes it; where the job spills does not.
    #[test]
    fn settings_key_is_stable_and_follows_the_settings() {
        let limits = Limits::default();
        let with_types = || {
            let mut j = job(&[("a", 1)], limits);
            let extra: Vec<(String, String)> = (0..40)
                .map(|i| (format!("type {i}"), format!("https://schema.org/T{i}")))
                .collect();
            j.ocx = Some(crate::render::ocx::OcxConfig {
                types: crate::dctype::TypeMap::with(&extra).unwrap(),
                ..Default::default()
            });
            j
        };
        let key = with_types().settings_key();
        assert_eq!(key.len(), 32);
        for _ in 0..5 {
            assert_eq!(with_types().settings_key(), key);
        }
        let mut spilled = with_types();
        spilled.spill_dir = Some(SpillDir {
            parent: "/tmp".into(),
            linked: false,
        });
        assert_eq!(spilled.settings_key(), key);
        let changes: [fn(&mut Job); 6] = [
            |j| j.public_url = Url::parse("https://elsewhere.example/maps/").unwrap(),
            |j| j.signmap = true,
            |j| j.cdif_list = true,
            |j| j.limits.max_urls = 100,
            |j| j.diwoo.push(("b".into(), 2)),
            |j| j.ocx = None,
        ];
        for change in changes {
            let mut j = with_types();
            change(&mut j);
            assert_ne!(j.settings_key(), key, "{j:?}");
        }
    }

    /// Every category's shards are written in one pass over the inventory, side by side: each
    /// category's files are byte for byte what rendering its sets' https URLs with a datestamp
    /// alone makes (in sitemap order, split on both limits on its own); the other URLs are
    /// counted by reason, and a category left with none has no index.
    #[test]
    fn diwoo_categories_rendered_side_by_side_hold_their_sets_urls() {
        // Long URLs, so that the byte limit splits before the URL limit does.
        let limits = Limits {
            max_urls: 40,
            max_bytes: crate::render::sitemap::MIN_BYTES,
        };
        let categories = [("a", 1u8), ("b", 2), ("c", 17), ("d", 9)];
        let mut job = job(&categories, limits);
        // Both schemes in scope: the sitemap takes the http URLs, DiWoo counts them.
        job.scope = ["https://r.example/oai/", "http://r.example/oai/"]
            .map(|u| Url::parse(u).unwrap())
            .to_vec();
        let base = Url::parse("https://r.example/oai/request").unwrap();
        let scope = scope_for(&job, base.as_str()).unwrap();
        let mut c = Collectors::new(&job, generic(scope), base.as_str()).unwrap();
        let pad = "p".repeat(500);
        let mut records = Vec::new();
        for i in 0..120u32 {
            let sets: Vec<String> = [
                ("a", i % 2 == 0),
                ("b", i % 3 == 0),
                ("b:x", i % 5 == 1),
                // Category d: records whose URLs DiWoo cannot take.
                ("d", i % 7 == 3 || i % 11 == 4),
            ]
            .iter()
            .filter(|(_, on)| *on)
            .map(|(s, _)| (*s).to_owned())
            .collect();
            let scheme = if i % 7 == 3 { "http" } else { "https" };
            let date = format!("2024-01-{:02}", 1 + i % 28);
            records.push(oai::parse::Record {
                identifier: format!("oai:r:{i}"),
                datestamp: (i % 11 != 4)
                    .then(|| crate::datestamp::Datestamp::parse(&date).unwrap()),
                deleted: false,
                sets,
                dc_identifiers: vec![
                    format!("{scheme}://r.example/oai/item/{i}/{pad}"),
                    format!("{scheme}://r.example/oai/file/{i}.pdf"),
                ],
                dc: Default::default(),
                empty_metadata: false,
            });
        }
        for r in &records {
            c.add(r).unwrap();
        }
        let harvested = c.finish(HarvestReport::default()).unwrap();
        let mut files = Files::default();
        let rendered = render(&harvested, &job, &mut files).unwrap();

        let in_set = |r: &oai::parse::Record, set: &str| {
            r.sets
                .iter()
                .any(|s| s == set || s.starts_with(&format!("{set}:")))
        };
        for (set, number) in categories {
            let mut expected = DiwooStats {
                category: number,
                ..DiwooStats::default()
            };
            let mut urls = Vec::new();
            for r in records.iter().filter(|r| in_set(r, set)) {
                for url in &r.dc_identifiers {
                    if !url.starts_with("https://") {
                        expected.requires_https += 1;
                    } else if r.datestamp.is_none() {
                        expected.requires_lastmod += 1;
                    } else {
                        expected.urls += 1;
                        urls.push((url.as_str(), r.datestamp));
                    }
                }
            }
            urls.sort();
            let stats = rendered
                .diwoo
                .iter()
                .find(|s| s.category == number)
                .unwrap();
            assert_eq!(stats, &expected, "category {number}");
            // The same URLs rendered alone, the way every other sitemap is.
            let mut alone = Files::default();
            let prefix = format!("diwoo-infocat{number:03}");
            let mut shards = Shards::new(&job.public_url, prefix, "xml");
            let count = render_shards(urls.iter().copied(), limits, |shard| {
                assert!(shard.bytes.len() <= limits.max_bytes && shard.urls <= limits.max_urls);
                shards.put(&mut alone, shard)
            })
            .unwrap();
            shards
                .finish(&mut alone, &diwoo_index_name(number))
                .unwrap();
            let ours: std::collections::BTreeMap<_, _> = files
                .0
                .iter()
                .filter(|(name, _)| name.contains(&format!("infocat{number:03}")))
                .collect();
            assert_eq!(ours, alone.0.iter().collect(), "category {number}");
            match set {
                "a" | "b" => assert!(count > 1, "category {number}: split on bytes: {count}"),
                _ => assert!(ours.is_empty(), "category {number}: nothing to publish"),
            }
        }
        // Taken from the sitemap's shards as above, or in a pass of their own over the
        // inventory (after a patch): the same files and counts.
        let mut own_pass = Files::default();
        let mut diwoo = Diwoo::new(&job, &harvested.diwoo);
        diwoo.add_all(&mut own_pass, &harvested.published).unwrap();
        let stats = diwoo.finish(&mut own_pass, &mut Vec::new()).unwrap();
        assert_eq!(stats, rendered.diwoo);
        let taken: std::collections::BTreeMap<_, _> = (files.0.iter())
            .filter(|(name, _)| name.contains("diwoo"))
            .collect();
        assert_eq!(taken, own_pass.0.iter().collect());
    }

    /// Q-35 in a harvest without a store: a version with empty metadata replaces no earlier
    /// version of the record, publishes nothing for a record not seen before, and is counted
    /// until a readable version at least as new comes.
    #[test]
    fn records_with_empty_metadata_are_rejected_and_counted() {
        let base = Url::parse("https://r.example/oai/request").unwrap();
        let job = job(&[], Limits::default());
        let mut c = Collectors::new(
            &job,
            generic(Scope::from_base_url(&base).unwrap()),
            base.as_str(),
        )
        .unwrap();
        let record = |id: u32, date: &str, empty: bool| oai::parse::Record {
            identifier: format!("oai:r:{id}"),
            datestamp: crate::datestamp::Datestamp::parse(date),
            dc_identifiers: if empty {
                Vec::new()
            } else {
                vec![format!("https://r.example/oai/item/{id}/{date}")]
            },
            empty_metadata: empty,
            ..Default::default()
        };
        let page = [
            record(1, "2024-01-01", false),
            record(1, "2024-02-01", true),
            record(2, "2024-02-01", true),
            record(3, "2024-02-01", true),
            record(3, "2024-01-01", false),
            record(4, "2024-02-01", true),
            record(4, "2024-02-01", false),
        ];
        for r in &page {
            c.add(r).unwrap();
        }
        let harvested = c.finish(HarvestReport::default()).unwrap();
        let urls: Vec<&str> = harvested.published.iter().map(|(u, _)| u).collect();
        assert_eq!(
            urls,
            [
                "https://r.example/oai/item/1/2024-01-01",
                "https://r.example/oai/item/3/2024-01-01",
                "https://r.example/oai/item/4/2024-02-01",
            ]
        );
        let stats = &harvested.published.stats;
        assert_eq!(stats.dropped(Drop::EmptyMetadata), 3);
        assert_eq!((stats.records, stats.dropped(Drop::NoUrl)), (3, 0));
    }

    /// A DiWoo category is a bit of the inventory's groups: only the table's 1-17 are taken,
    /// with an error that names the set and the number.
    #[test]
    fn diwoo_categories_outside_the_table_are_refused() {
        let base = Url::parse("https://r.example/oai/request").unwrap();
        let job = |number: u8| job(&[("theses", number)], Limits::default());
        let scope = Scope::from_base_url(&base).unwrap();
        for number in [1, 17] {
            assert!(Collectors::new(&job(number), generic(scope.clone()), base.as_str()).is_ok());
        }
        for number in [0, 18, 200] {
            let err = Collectors::new(&job(number), generic(scope.clone()), base.as_str())
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(&format!("\"theses\" is mapped to DiWoo category {number};")),
                "{err}"
            );
        }
    }
}
