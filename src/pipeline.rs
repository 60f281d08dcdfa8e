//! harvest -> inventory -> rendered files: the steps shared by `export` and the server's
//! refresh. The files go to a [`FileSink`], so the same code fills an export folder or memory.

use std::time::Duration;

use oai_pmh::{Client, HarvestReport, HarvestRequest, Identify, Record, Source};
use url::Url;

use crate::classify::Drop;
use crate::dctype::TypeMap;
use crate::error::Error;
use crate::inventory::{Inventory, Published, Stats};
use crate::platform::{Classes, Detected, Landing, LandingSettings, Setting};
pub(crate) use crate::profiles::diwoo::DiwooStats;
use crate::profiles::diwoo::{self, Category};
use crate::profiles::files::Shards;
pub(crate) use crate::profiles::files::{FileSink, gzip};
use crate::profiles::ledger::{self, Rows};
use crate::profiles::merge::{self, ProfilePatch};
use crate::profiles::record::SignStats;
use crate::profiles::registry::{self, ProfileSummary};
use crate::profiles::render as profiles_render;
use crate::profiles::signposts::{Resolved, Signposts, Written};
use crate::profiles::{Profile, ProfileSettings};
use crate::progress::Progress;
use crate::render::published::PublishedShard;
use crate::render::robots::{Announced, render_robots};
use crate::render::sitemap::{Layout, entries as sitemap_entries, try_render_laid_out};
use crate::render::{FilesError, Limits, Shard};
use crate::scope::Scope;

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
    /// The profiles published beside the sitemap, with their settings.
    pub profiles: ProfileSettings,
    /// Where the files will be served: a directory URL.
    pub public_url: Url,
    /// Where the Signmap's and OCX's shard files are written during the harvest: the system's
    /// temporary folder when `None`.
    pub spill_dir: Option<SpillDir>,
}

/// Where a harvest's temporary files are written, in new folders removed when the render is
/// done: the Signmap's and OCX's shard files (`.oai-bridge-shards-*`) and the URL inventory's
/// sorted runs once it holds more than `memory` (`.oai-bridge-spill-*`, [`crate::spill`]).
#[derive(Clone, Debug)]
pub struct SpillDir {
    /// The folder it is made in: on the file system of the sink's files, so that the sink can
    /// link them into place ([`FileSink::link_shard`]). `None`: where the export puts it,
    /// beside its output (the system's temporary folder for a job run otherwise).
    pub parent: Option<std::path::PathBuf>,
    /// The sink links them (the export): they are written with direct I/O, as the export writes
    /// its other large files, rather than through the page cache to be read back.
    pub linked: bool,
    /// Bytes of memory the URL inventory holds before it spills sorted runs
    /// ([`crate::spill::DEFAULT_MEMORY_BUDGET`] unless set).
    pub memory: u64,
    /// A gateway's refresh: its account with the pool the refreshes share (`[server]
    /// memory_budget_bytes`, `spill_max_bytes`), where its memory and spill are counted.
    pub(crate) account: Option<std::sync::Arc<crate::spill::Account>>,
}

impl Job {
    /// Where the harvest spills, and the memory it holds first: the job's spill folder, or the
    /// system's temporary folder.
    pub(crate) fn budget(&self) -> crate::spill::Budget {
        let Some(dir) = &self.spill_dir else {
            return crate::spill::Budget::default();
        };
        let parent = (dir.parent.clone()).unwrap_or_else(std::env::temp_dir);
        let budget = crate::spill::Budget::new(parent, dir.memory);
        match &dir.account {
            Some(account) => budget.within(account),
            None => budget,
        }
    }
}

/// What a built generation holds.
#[derive(Clone, Debug)]
pub struct Built {
    /// What the harvest saw.
    pub report: HarvestReport,
    /// Counts by outcome.
    pub stats: Stats,
    /// A few examples of each reason not to publish; `None` when the sitemap was patched
    /// (an incremental refresh reads only the changed records).
    pub samples: Option<crate::inventory::DropSamples>,
    /// The landing rule applied: the platform in effect and why, and the scope
    /// ([`Landing::scope`]).
    pub platform: Landing,
    /// Shard file names, in index order.
    pub shards: Vec<String>,
    /// Absolute URL of the sitemap index.
    pub index_url: Url,
    /// What each profile beside the sitemap published.
    pub profiles: Vec<ProfileSummary>,
    /// The most bytes the harvest's temporary files took on disk at once
    /// ([`Harvested::spill_bytes`]).
    pub spill_bytes: u64,
    /// Every index written for all crawlers, the sitemap index first, as robots.txt lists them
    /// (CDIF's are apart: [`crate::profiles::report::Report::jsonld_indexes`]).
    pub indexes: Vec<Url>,
}

impl Built {
    /// Puts together what a finished build holds.
    pub fn new(harvested: Harvested, rendered: Rendered) -> Self {
        let landing = (harvested.signposts.map(|s| s.stats)).or(rendered.landing);
        Built {
            report: harvested.report,
            stats: harvested.published.stats,
            samples: harvested.published.samples,
            platform: harvested.landing,
            shards: rendered.shards,
            index_url: rendered.indexes[0].clone(),
            profiles: ProfileSummary::of(
                landing.as_ref(),
                &rendered.profile_indexes,
                rendered.diwoo.into_iter().map(ProfileSummary::new),
            ),
            indexes: rendered.indexes,
            spill_bytes: harvested.spill_bytes,
        }
    }
}

/// The scope of a job: explicit prefixes, or the directory of the baseURL (for a Static
/// Repository file, of the baseURL its `Identify` states).
#[cfg(test)]
pub(crate) fn scope_for(job: &Job, identify_base: &str) -> Result<Scope, Error> {
    scope_of(&job.request.source, &job.scope, identify_base)
}

/// [`scope_for`] the `source` with the configured `scope` prefixes (none: the default).
pub(crate) fn scope_of(
    source: &Source,
    scope: &[Url],
    identify_base: &str,
) -> Result<Scope, Error> {
    if !scope.is_empty() {
        return Scope::from_prefixes(scope)
            .ok_or_else(|| Error::Scope("scope prefixes must be http(s) URLs".into()));
    }
    match source {
        Source::Oai(base) => Scope::from_base_url(base).ok_or_else(|| Error::Scope(format!("baseURL {base} has no host"))),
        Source::File(path) => Url::parse(identify_base)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .and_then(|u| Scope::from_base_url(&u))
            .ok_or_else(|| {
                Error::Scope(format!(
                    "the Static Repository {} states baseURL {identify_base:?}, which is no http(s) URL to derive a scope from; set the repository's scope (--scope)",
                    path.display()
                ))
            }),
    }
}

/// The baseURL whose host and path the landing rules start from: the source's, or the one a
/// Static Repository states (if it is an http(s) URL).
pub(crate) fn base_url(source: &Source, identify_base: &str) -> Option<Url> {
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
pub(crate) fn landing_for(
    job: &Job,
    identify: &Identify,
    sample: &[Record],
) -> Result<Landing, Error> {
    landing_of(
        &job.landing,
        &job.request.source,
        &job.scope,
        identify,
        sample,
    )
}

/// [`landing_for`] `settings` and the configured `scope` prefixes of `source`.
pub(crate) fn landing_of(
    settings: &LandingSettings,
    source: &Source,
    scope: &[Url],
    identify: &Identify,
    sample: &[Record],
) -> Result<Landing, Error> {
    let base = base_url(source, &identify.base_url);
    let explicit = if scope.is_empty() {
        None
    } else {
        Some(scope_of(source, scope, &identify.base_url)?)
    };
    let mut detected = match settings.platform {
        Setting::Fixed(_) => Detected::configured(settings.fixed().unwrap_or_default()),
        Setting::Auto => crate::platform::detect_over(
            base.as_ref(),
            identify,
            sample,
            explicit.as_ref(),
            &settings.platforms,
        ),
    };
    if let Some(learned) = &settings.learned {
        detected.evidence.push_str("; learned: ");
        detected.evidence.push_str(learned);
    }
    let landing = match Landing::new(
        settings,
        base.as_ref(),
        explicit.as_ref(),
        &mut detected,
        sample,
    ) {
        Ok(Some(landing)) => landing,
        Ok(None) => {
            let scope = match explicit {
                Some(scope) => scope,
                None => scope_of(source, scope, &identify.base_url)?,
            };
            Landing::generic(scope, detected)
        }
        Err(why) => return Err(Error::Scope(why)),
    };
    Ok(internal_pages_said(landing).with_robots(settings.robots.clone(), settings.leave_out_files))
}

/// A landing rule whose pages are on a loopback or private address (a sidecar harvesting its
/// platform's own Tomcat at `http://127.0.0.1:8080/oai/request`) publishes what no crawler can
/// fetch: its evidence says so, and what to set, wherever the rule is shown (the summary, the
/// status page, `check`).
fn internal_pages_said(mut landing: Landing) -> Landing {
    let internal: Vec<String> = landing
        .scope()
        .prefixes()
        .into_iter()
        .filter(|p| Url::parse(p).is_ok_and(|u| crate::scope::is_internal(&u)))
        .collect();
    if !internal.is_empty() {
        landing.say(&format!(
            "the landing pages would be under {}, a loopback or private address no crawler can reach: set ui_url (DSpace) or scope to the site's public address",
            internal.join(", ")
        ));
    }
    landing
}

/// [`landing_for`] a job whose records are in `store`: the sample is the first stored live
/// records, so that a refresh that brought no record finds the same platform.
pub(crate) fn landing_stored(
    job: &Job,
    store: &crate::store::Store,
    identify: &Identify,
) -> Result<Landing, Error> {
    // `auto` detects from it, and DSpace finds a UI under a path from it.
    let sample = if job.landing.template.is_none() {
        stored_sample(store)?
    } else {
        Vec::new()
    };
    landing_for(job, identify, &sample)
}

/// The first live records of `store`, at most [`crate::platform::SAMPLE`]: what the landing
/// rule of a stored harvest is decided from ([`landing_stored`]).
pub(crate) fn stored_sample(store: &crate::store::Store) -> Result<Vec<Record>, Error> {
    let mut sample = Vec::new();
    let _ = store.for_each_live(|record| {
        sample.push(record);
        if sample.len() < crate::platform::SAMPLE {
            Ok(())
        } else {
            Err(())
        }
    })?;
    Ok(sample)
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
    /// The patch of the profiles' published files ([`crate::profiles::merge`]), beside the
    /// sitemap's; `signposts` is then `None`.
    pub profiles: Option<ProfilePatch>,
    /// The profiles' ledger's rows, a record each, when rendered from the store (whose
    /// records come one each in identifier order): the ledger is written with the files
    /// ([`crate::profiles::ledger`]).
    pub ledger: Option<Rows>,
    /// The first live records (at most [`crate::platform::SAMPLE`]) the landing rule was
    /// decided from: what [`crate::advice`] tries settings on when nothing is published.
    pub sample: Vec<Record>,
    /// The most bytes the harvest's temporary files took on disk at once: the URL inventory's
    /// sorted runs past its memory budget, and the landing-page profiles' record occurrences
    /// (0: neither).
    pub spill_bytes: u64,
    /// What a patch changed of the published landing pages ([`crate::changes::from_sorted`]);
    /// `None` for a whole render, whose changes the target finds by comparing sitemaps.
    pub(crate) changes: Option<crate::changes::Changes>,
}

/// The first live records of `records`, at most [`crate::platform::SAMPLE`]: a harvest's
/// sample ([`Harvested::sample`]).
fn sample_of(records: &[Record]) -> Vec<Record> {
    records
        .iter()
        .filter(|r| !r.deleted && !r.unreadable())
        .take(crate::platform::SAMPLE)
        .cloned()
        .collect()
}

/// Everything one harvest fills, each from the same records.
#[derive(Debug)]
struct Collectors {
    landing: Landing,
    /// See [`Harvested::sample`].
    sample: Vec<Record>,
    inventory: Inventory,
    signposts: Option<Signposts>,
    diwoo: Vec<Category>,
    /// The DiWoo categories (bits, as groups) of each set seen, up to [`SETS_REMEMBERED`]: a
    /// repository has a few hundred sets, and every record is in some.
    set_groups: crate::memo::Memo<u32>,
    /// The profiles' ledger's rows, when kept ([`Harvested::ledger`]).
    ledger: Option<Rows>,
    /// Records whose newest version was unreadable ([`oai_pmh::Record::unreadable`]), with
    /// that version's datestamp: rejected, counted as [`Drop::EmptyMetadata`]. Their earlier
    /// version in the same harvest, if any, is published (as the store keeps the version it
    /// has), and a readable version at least as new settles them.
    rejected: std::collections::HashMap<String, Option<oai_pmh::Datestamp>>,
}

/// Most sets whose DiWoo categories [`Collectors`] remembers.
const SETS_REMEMBERED: usize = 16_384;

impl Collectors {
    fn new(job: &Job, landing: Landing, identify_base: &str) -> Result<Self, Error> {
        let diwoo = diwoo::categories(&job.profiles.diwoo).map_err(Error::InvalidJob)?;
        // The profiles' `describedby` links ask `GetRecord` of it.
        let metadata_base = base_url(&job.request.source, identify_base);
        let profiles = &job.profiles;
        // The inventory and the profiles' records share one budget, and report one spill.
        let budget = job.budget();
        let signposts = if profiles.describes_records() {
            let mut s = Signposts::new(TypeMap::default(), metadata_base.as_ref(), job.limits)
                .within(&budget);
            if let Some(SpillDir {
                parent: Some(parent),
                linked,
                ..
            }) = &job.spill_dir
            {
                s = s.spill_in(parent.clone(), *linked);
            }
            s = s.with_profiles(profiles, Some(job.public_url.clone()))?;
            Some(s)
        } else {
            None
        };
        Ok(Self {
            signposts,
            inventory: Inventory::with_budget(landing.scope().clone(), budget),
            landing,
            sample: Vec::new(),
            diwoo,
            set_groups: crate::memo::Memo::new(SETS_REMEMBERED),
            ledger: None,
            rejected: std::collections::HashMap::new(),
        })
    }

    fn finish(self, report: HarvestReport) -> Result<Harvested, Error> {
        let meter = self.inventory.meter();
        let (mut published, superseded) = self.inventory.resolve()?;
        let signposts = self.signposts.map(|s| s.finish(&superseded)).transpose()?;
        // Which entries lost is known now.
        let ledger = match (self.ledger, &signposts) {
            (Some(rows), Some(resolved)) => Some(resolved.settle_ledger(rows)?),
            (rows, _) => rows,
        };
        published
            .stats
            .set_dropped(Drop::EmptyMetadata, self.rejected.len() as u64);
        if let Some(samples) = &mut published.samples {
            let mut rejected: Vec<&String> = self.rejected.keys().collect();
            rejected.sort_unstable();
            for id in rejected
                .into_iter()
                .take(crate::inventory::SAMPLES_PER_REASON)
            {
                samples.note(Drop::EmptyMetadata, Some(id), None);
            }
        }
        Ok(Harvested {
            published,
            landing: self.landing,
            signposts,
            diwoo: self.diwoo.iter().map(|c| c.number).collect(),
            report,
            layout: Layout::default(),
            patch: None,
            profiles: None,
            ledger,
            sample: self.sample,
            spill_bytes: meter.peak(),
            changes: None,
        })
    }

    /// The DiWoo categories the record is in, as bits.
    fn groups(&mut self, record: &oai_pmh::Record) -> u32 {
        if self.diwoo.is_empty() {
            return 0;
        }
        let mut groups = 0;
        for set in &record.sets {
            let diwoo = &self.diwoo;
            groups |= self.set_groups.get(set, || diwoo::set_groups(diwoo, set));
        }
        groups
    }

    fn add(&mut self, record: &oai_pmh::Record) -> Result<(), Error> {
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
            self.note(record, groups, None);
            return Ok(());
        }
        // Each value is classified once for the sitemap and the profiles. A deleted record
        // publishes nothing: its values are not classified. On the stack for a record's usual
        // few (an allocation per record showed).
        let mut classes = Classes::new();
        self.landing.classes(record, &mut classes);
        // Under Google's rule each class is its value's (for the examples of drops).
        let values = (self.landing.is_generic()).then_some(record.dc_identifiers.as_slice());
        self.inventory
            .add_classes(record, &classes, values, groups)?;
        let mut written = None;
        if let Some(s) = &mut self.signposts {
            written = s.add(record, &classes)?;
        }
        self.note(record, groups, written);
        Ok(())
    }

    /// The ledger's row of a record added, when the ledger is kept.
    fn note(&mut self, record: &Record, groups: u32, written: Option<Written>) {
        let Some(rows) = &mut self.ledger else {
            return;
        };
        let mut row = ledger::Row {
            id: &record.identifier,
            groups,
            ..ledger::Row::default()
        };
        if let Some(w) = written {
            row.landing = true;
            row.lens = w.lens;
            row.datestamp = oai_pmh::Datestamp::pack_option(record.datestamp);
            row.hash = w.hash;
        }
        rows.push(&row);
    }
}

/// Harvests the job's records into a resolved inventory (and Signmap records), every profile
/// from the same pages: records are fetched once however many files are made of them.
pub(crate) async fn harvest(
    client: &Client,
    job: &Job,
    progress: &mut Progress,
) -> Result<Harvested, Error> {
    let mut gathering = Gathering {
        job,
        collectors: None,
        waiting: Vec::new(),
        waiting_live: 0,
        identify: None,
        failure: None,
    };
    let report = oai_pmh::harvest(client, &job.request, |event| {
        gathering.page(event, progress);
    })
    .await;
    progress.finish();
    gathering.finish(report?)
}

/// A harvest's records on their way to the [`Collectors`], held until the landing rule is decided.
struct Gathering<'j> {
    job: &'j Job,
    collectors: Option<Collectors>,
    /// The records before the landing rule is decided: `auto` decides from the first
    /// [`crate::platform::SAMPLE`] live records, as the store's path does from its first ones
    /// (a first page can be empty, or all deleted). At most [`WAITING`] are held.
    waiting: Vec<Record>,
    /// Live, readable records among those held.
    waiting_live: usize,
    identify: Option<Identify>,
    /// Why the records can no longer be collected; the rest of the harvest is skipped.
    failure: Option<Error>,
}

impl Gathering<'_> {
    /// Collects the page of `event`, or holds it until the landing rule is decided.
    fn page(&mut self, event: oai_pmh::PageEvent<'_>, progress: &mut Progress) {
        if self.failure.is_some() {
            return;
        }
        let job = self.job;
        let records = match &mut self.collectors {
            Some(_) => event.records,
            None => {
                self.identify.get_or_insert_with(|| event.identify.clone());
                self.waiting_live += event
                    .records
                    .iter()
                    .filter(|r| !r.deleted && !r.unreadable())
                    .count();
                self.waiting.extend(event.records);
                if self.waiting_live < crate::platform::SAMPLE && self.waiting.len() < WAITING {
                    progress.page(
                        event.page,
                        self.waiting.len() as u64,
                        0,
                        event.complete_list_size,
                    );
                    return;
                }
                std::mem::take(&mut self.waiting)
            }
        };
        if self.collectors.is_none() {
            let identify = self.identify.as_ref().expect("set above");
            match landing_for(job, identify, &records)
                .and_then(|landing| Collectors::new(job, landing, &identify.base_url))
            {
                Ok(mut c) => {
                    c.sample = sample_of(&records);
                    self.collectors = Some(c);
                }
                Err(e) => {
                    self.failure = Some(e);
                    return;
                }
            }
        }
        let c = self.collectors.as_mut().expect("made above");
        for record in &records {
            if let Err(e) = c.add(record) {
                self.failure = Some(e);
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
    }

    /// What was gathered, resolved, once the harvest completed with `report`.
    fn finish(self, report: HarvestReport) -> Result<Harvested, Error> {
        if let Some(e) = self.failure {
            return Err(e);
        }
        let job = self.job;
        let mut c = match self.collectors {
            Some(c) => c,
            // The whole list was shorter than the sample.
            None => {
                let mut c = Collectors::new(
                    job,
                    landing_for(job, &report.identify, &self.waiting)?,
                    &report.identify.base_url,
                )?;
                c.sample = sample_of(&self.waiting);
                c
            }
        };
        for record in &self.waiting {
            c.add(record)?;
        }
        c.finish(report)
    }
}

/// Most records held before the landing rule is decided (a list that begins with many deleted
/// records decides from what it has by then).
const WAITING: usize = 10_000;

/// Collects the store's live records as a harvest of the whole repository would have: the
/// render input of a refresh that went through the store. `report` is the harvest's that
/// updated the store. Its deleted records are counted as a harvest counts them, not read.
pub(crate) fn collect_stored(
    job: &Job,
    store: &crate::store::Store,
    report: HarvestReport,
) -> Result<Harvested, Error> {
    let landing = landing_stored(job, store, &report.identify)?;
    let mut c = Collectors::new(job, landing, &report.identify.base_url)?;
    c.ledger = Some(Rows::default());
    store.for_each_live(|record| c.add(&record))??;
    let mut harvested = c.finish(report)?;
    let stats = &mut harvested.published.stats;
    stats.set_dropped(Drop::EmptyMetadata, store.rejected()?);
    stats.set_deleted(store.deleted()?);
    // The store's rejected and deleted records are its own (its deleted ones are not read
    // above): a few of each from it.
    if let Some(samples) = &mut harvested.published.samples {
        let n = crate::inventory::SAMPLES_PER_REASON;
        samples.forget(Drop::EmptyMetadata);
        for id in store.rejected_examples(n)? {
            samples.note(Drop::EmptyMetadata, Some(&id), None);
        }
        if stats.deleted > 0 {
            for id in store.deleted_examples(n)? {
                samples.note(Drop::Deleted, Some(&id), None);
            }
        }
    }
    harvested.layout = store.state()?.layout;
    Ok(harvested)
}

/// The ledger's rows of `records` (changed records, live, in identifier order) and their
/// landing-page profiles' entries (none when no such profile is on), for a patch of the
/// profiles' files: each profile's entries in one file, read back whole
/// ([`Resolved::entry_streams`]).
pub(crate) fn collect_changed(
    job: &Job,
    landing: Landing,
    report: &HarvestReport,
    records: &[Record],
) -> Result<(Option<Resolved>, Rows), Error> {
    let unlimited = Job {
        limits: Limits {
            max_urls: usize::MAX,
            max_bytes: usize::MAX,
        },
        spill_dir: None,
        ..job.clone()
    };
    let mut c = Collectors::new(&unlimited, landing, &report.identify.base_url)?;
    c.ledger = Some(Rows::default());
    for record in records {
        c.add(record)?;
    }
    let harvested = c.finish(report.clone())?;
    Ok((harvested.signposts, harvested.ledger.unwrap_or_default()))
}

/// Says why nothing would be published, as an operator can act on it. `advice` is what
/// [`crate::advice`] found on the first records: a setting tried on them, or what they carry
/// ([`crate::advice::Advice::hint`]); without it, where to look.
pub(crate) fn explain_empty(stats: &Stats, landing: &Landing, advice: Option<&str>) -> String {
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
    // What `auto` found the records to hold instead (HAL's pages on another registered
    // domain, DiVA's resolver URLs) says more than any hint below.
    if let Some(holds) = &landing.detected().holds {
        return format!("0 of {urls} URLs inside the scope {scope}: {holds}");
    }
    // What the records hold, tried: never a platform the records do not show.
    let hint = advice.map(|a| format!("; {a}")).unwrap_or_default();
    if stats.dropped(Drop::OutOfScope) > 0 {
        let look = if advice.is_some() {
            String::new()
        } else {
            "; set the repository's scope (--scope) to the prefix of the landing pages (`oai-bridge check` tries one)".to_owned()
        };
        return format!("0 of {urls} URLs inside the scope {scope}{look}{hint}");
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
    profiles: &ProfileSettings,
    landing: &LandingSettings,
    source: &Source,
) -> oai_pmh::Fields {
    use oai_pmh::{DcElement, Fields};
    let fields = profiles.fields();
    if landing.reads_relations(source) {
        fields.with(Fields::of(&[DcElement::Relation]))
    } else {
        fields
    }
}

/// Renders shards, index and robots.txt of what was harvested into `sink`, and the files of each
/// profile the job asks for (Signmap, DiWoo). A render from the store with profiles writes the
/// profiles' ledger beside them ([`crate::profiles::ledger`]), which the next refresh patches
/// them with: unless CDIF's documents are on (they are not patched), or an entry lost to
/// another record's of the same landing page (the files are then not the ledger's rows).
pub(crate) fn render<S: FileSink>(
    harvested: &Harvested,
    job: &Job,
    sink: &mut S,
) -> Result<Rendered, Error>
where
    Error: From<S::Error>,
{
    let ledger = !job.sitemap_only()
        && !job.profiles.cdif
        && sink.keeps_ledger()
        && (harvested.profiles.is_some() || harvested.ledger.is_some());
    if !ledger {
        return render_into(harvested, job, sink).map(|(rendered, _)| rendered);
    }
    let mut recording = crate::profiles::files::Recording::new(sink);
    let (rendered, patched) = render_into(harvested, job, &mut recording)?;
    let mut files = std::mem::take(&mut recording.files);
    // In name order: a render and a patch store the profiles' shards in different orders.
    files.sort_unstable_by(|a, b| a.name.cmp(&b.name));
    let mut head = ledger::Head {
        key: job.settings_key(),
        sitemap: ledger::sitemap_fingerprint(&rendered.sitemap_shards),
        diwoo: (rendered.diwoo.iter())
            .map(|d| {
                [
                    u64::from(d.category),
                    d.urls,
                    d.requires_https,
                    d.requires_lastmod,
                ]
            })
            .collect(),
        files,
        ..ledger::Head::default()
    };
    let empty = Rows::default();
    let (rows, stats) = match &patched {
        Some(p) => (&p.rows, Some(&p.stats)),
        None => (
            harvested.ledger.as_ref().unwrap_or(&empty),
            harvested.signposts.as_ref().map(|s| &s.stats),
        ),
    };
    if let Some(s) = stats.filter(|_| job.profiles.describes_records()) {
        head.stats = [
            s.published,
            s.no_landing_page,
            s.duplicate,
            s.ocx_published,
            s.ocx_no_type,
        ];
    }
    head.shared = match &harvested.profiles {
        Some(patch) => patch.shared().to_vec(),
        None => ledger::shared_claims(
            &harvested.published.shared,
            &harvested.published.shared_groups,
        ),
    };
    let parts = rows.encode_parts(head);
    match sink.stream(ledger::LEDGER)? {
        Some(mut stream) => {
            for part in &parts {
                stream.write(part).map_err(FilesError::Stream)?;
            }
            sink.end_stream(ledger::LEDGER, stream)?;
        }
        None => sink.put(ledger::LEDGER, &parts.concat())?,
    }
    Ok(rendered)
}

/// [`render`] but for the ledger; with the profiles' patch written, if there was one.
fn render_into<S: FileSink>(
    harvested: &Harvested,
    job: &Job,
    sink: &mut S,
) -> Result<(Rendered, Option<merge::Patched>), Error>
where
    Error: From<S::Error>,
{
    let published = &harvested.published;
    if published.is_empty() {
        return Err(FilesError::Empty.into());
    }
    let mut sitemap = Shards::new(&job.public_url, Profile::Sitemap, job.shard_ext());
    let mut layout = harvested.layout.clone();
    let mut sitemap_shards = Vec::new();
    let mut diwoo = diwoo::Writer::new(&job.public_url, job.limits, &harvested.diwoo);
    // A whole sitemap holds every URL's entry as the DiWoo categories have it, in the same
    // order: they are taken from its shards as they are written (a patch writes only some).
    let mut tap = (harvested.patch.is_none() && !harvested.diwoo.is_empty())
        .then(|| published.entries())
        .transpose()?;
    let mut put = |number, shard: &Shard| {
        sitemap_shards.push(PublishedShard::of(number, shard));
        sitemap.put_numbered(sink, number, shard)?;
        if let Some(urls) = &mut tap {
            for entry in sitemap_entries(&shard.bytes) {
                let (_, lastmod, groups) =
                    (urls.next()).expect("a shard's entries are URLs in order")?;
                diwoo.add(sink, entry, lastmod, groups)?;
            }
        }
        Ok::<(), Error>(())
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
            let urls = published.entries()?.map(|entry| {
                let (url, lastmod, _) = entry?;
                Ok((url, lastmod))
            });
            try_render_laid_out(urls, job.limits, &mut layout, &mut put)?;
        }
    }
    let names = sitemap.names.clone();
    let mut indexes: Vec<Url> = sitemap.finish(sink)?.into_iter().collect();
    let source = match &harvested.profiles {
        Some(patch) => profiles_render::Source::Patched(patch),
        None => profiles_render::Source::Collected {
            resolved: harvested.signposts.as_ref(),
            // The categories the sitemap's shards did not feed as they were written.
            inventory: (tap.is_none() && !diwoo.is_empty())
                .then(|| published.entries())
                .transpose()?,
        },
    };
    let profiles = profiles_render::render::<_, Error, _>(
        &job.profiles,
        (&job.public_url, job.limits),
        source,
        diwoo,
        sink,
    )?;
    indexes.extend(profiles.announced.iter().cloned());
    let robots = render_robots(&[Announced {
        indexes: indexes.iter().map(Url::as_str).collect(),
        cdif: profiles.jsonld_indexes().map(Url::as_str).collect(),
    }]);
    sink.put("robots.txt", robots.as_bytes())?;
    let rendered = Rendered {
        shards: names,
        sitemap_shards,
        indexes,
        profile_indexes: profiles.indexes,
        diwoo: profiles.diwoo,
        layout,
        landing: (profiles.patched.as_ref())
            .filter(|_| job.profiles.describes_records())
            .map(|p| p.stats.clone()),
    };
    Ok((rendered, profiles.patched))
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
            profiles,
            public_url,
            spill_dir: _,
        } = self;
        let ProfileSettings {
            signmap,
            ocx,
            cdif,
            cdif_list,
            diwoo,
        } = profiles;
        let HarvestRequest {
            source,
            sets,
            from,
            until,
            fields: _, // follows from the profiles
        } = request;
        let ocx = ocx.as_ref().map(|o| {
            let crate::profiles::ocx::OcxConfig {
                types,
                default_type,
                teaser_chars,
                format,
                xpath,
            } = o;
            format!("{types:?} {default_type:?} {teaser_chars} {format:?} {xpath:?}")
        });
        let date = |d: &Option<oai_pmh::Datestamp>| d.map(|d| d.to_string());
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
        self.profiles.sitemap_only()
    }

    /// The indexes the job publishes, in robots.txt order: the sitemap index, then the Signmap,
    /// OCX and DiWoo indexes its profiles ask for. CDIF's sitemaps are apart ([`Job::cdif`],
    /// [`Job::cdif_list`]), as robots.txt announces them in a group of their own.
    pub fn index_names(&self) -> Vec<String> {
        (self.profiles().into_iter())
            .filter(|p| !p.for_cdif())
            .map(Profile::index_name)
            .collect()
    }

    /// The CDIF sitemaps' indexes the job publishes: of the documents, of the lists.
    pub fn cdif_index_names(&self) -> Vec<String> {
        (self.profiles().into_iter())
            .filter(|p| p.for_cdif())
            .map(Profile::index_name)
            .collect()
    }

    /// The profiles the job publishes, the sitemap first, in robots.txt order.
    pub fn profiles(&self) -> Vec<Profile> {
        self.profiles.profiles()
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
    /// The indexes the landing-page profiles wrote (the Signmap's, OCX's, CDIF's).
    pub(crate) profile_indexes: registry::Indexes,
    /// Each DiWoo category's counts.
    pub diwoo: Vec<DiwooStats>,
    /// The sitemap's layout after this render, to follow next time.
    pub layout: Layout,
    /// The landing-page profiles' counts, when a patch made their files (a render counts
    /// them as it collects: [`Harvested::signposts`]).
    pub landing: Option<SignStats>,
}

/// Formats a duration for people, in its two largest units: `12.3 s` under a minute,
/// `4 min 05 s`, `5 h 57 min`, `2 d 3 h` (a refresh due in six hours reads as hours, not as
/// 357 minutes).
pub(crate) fn human_duration(d: Duration) -> String {
    // Under 59.95 s, which would round to "60.0 s".
    if d.as_millis() < 59_950 {
        return format!("{:.1} s", d.as_secs_f64());
    }
    let secs = d.as_secs_f64().round() as u64;
    let (days, hours, minutes) = (secs / 86_400, secs / 3_600 % 24, secs / 60 % 60);
    if days > 0 {
        format!("{days} d {hours} h")
    } else if hours > 0 {
        format!("{hours} h {minutes:02} min")
    } else {
        format!("{minutes} min {:02} s", secs % 60)
    }
}

/// Formats a number of bytes for people, in binary units with one decimal past the bytes:
/// `512 B`, `1.5 KiB`, `192.0 MiB`, `3.2 GiB`.
pub(crate) fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    // 1023.95 would round to "1024.0".
    while value >= 1023.95 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::render::sitemap::render_shards;

    /// Bytes read in their largest binary unit.
    #[test]
    fn bytes_read_in_binary_units() {
        for (bytes, text) in [
            (0, "0 B"),
            (1023, "1023 B"),
            (1536, "1.5 KiB"),
            (192 << 20, "192.0 MiB"),
            ((1 << 30) - 1, "1.0 GiB"),
            (u64::MAX, "16384.0 PiB"),
        ] {
            assert_eq!(human_bytes(bytes), text);
        }
    }

    /// Issue 22: durations read in their two largest units ("in 357m25s" was a refresh six
    /// hours away).
    #[test]
    fn durations_read_in_hours_and_days() {
        let cases = [
            (Duration::from_millis(0), "0.0 s"),
            (Duration::from_millis(12_345), "12.3 s"),
            (Duration::from_millis(59_960), "1 min 00 s"),
            (Duration::from_secs(245), "4 min 05 s"),
            (Duration::from_secs(3_599), "59 min 59 s"),
            (Duration::from_secs(3_600), "1 h 00 min"),
            (Duration::from_secs(357 * 60 + 25), "5 h 57 min"),
            (Duration::from_secs(86_400 * 2 + 3 * 3_600 + 59), "2 d 3 h"),
        ];
        for (d, want) in cases {
            assert_eq!(human_duration(d), want, "{d:?}");
        }
    }

    /// Google's rule over `scope`.
    fn generic(scope: Scope) -> Landing {
        Landing::generic(
            scope,
            Detected::configured(crate::platform::Platform::generic()),
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
            profiles: ProfileSettings {
                diwoo: diwoo.iter().map(|(s, n)| ((*s).to_owned(), *n)).collect(),
                ..ProfileSettings::default()
            },
            public_url: Url::parse("https://r.example/sitemaps/").unwrap(),
            spill_dir: None,
        }
    }

    /// A sink that keeps the files in memory, by name.
    #[derive(Debug, Default)]
    pub(crate) struct Files(pub(crate) std::collections::BTreeMap<String, Vec<u8>>);

    impl FileSink for Files {
        type Error = Error;

        fn put(&mut self, name: &str, bytes: &[u8]) -> Result<(), Error> {
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
            j.profiles.ocx = Some(crate::profiles::ocx::OcxConfig {
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
            parent: Some("/tmp".into()),
            linked: false,
            memory: crate::spill::DEFAULT_MEMORY_BUDGET,
            account: None,
        });
        assert_eq!(spilled.settings_key(), key);
        let changes: [fn(&mut Job); 6] = [
            |j| j.public_url = Url::parse("https://elsewhere.example/maps/").unwrap(),
            |j| j.profiles.signmap = true,
            |j| j.profiles.cdif_list = true,
            |j| j.limits.max_urls = 100,
            |j| j.profiles.diwoo.push(("b".into(), 2)),
            |j| j.profiles.ocx = None,
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
            records.push(oai_pmh::Record {
                identifier: format!("oai:r:{i}"),
                datestamp: (i % 11 != 4).then(|| oai_pmh::Datestamp::parse(&date).unwrap()),
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

        let in_set = |r: &oai_pmh::Record, set: &str| {
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
            let profile = Profile::Diwoo(number);
            assert_eq!(profile.shard_prefix(), format!("diwoo-infocat{number:03}"));
            assert_eq!(
                profile.index_name(),
                format!("sitemapindex-diwoo-infocat{number:03}.xml")
            );
            let mut shards = Shards::new(&job.public_url, profile, "xml");
            let count = render_shards(urls.iter().copied(), limits, |shard| {
                assert!(shard.bytes.len() <= limits.max_bytes && shard.urls <= limits.max_urls);
                shards.put(&mut alone, shard)
            })
            .unwrap();
            shards.finish(&mut alone).unwrap();
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
        let mut diwoo = diwoo::Writer::new(&job.public_url, job.limits, &harvested.diwoo);
        diwoo
            .add_all::<_, Error>(&mut own_pass, harvested.published.entries().unwrap())
            .unwrap();
        let stats = diwoo.finish(&mut own_pass, &mut Vec::new()).unwrap();
        assert_eq!(stats, rendered.diwoo);
        let taken: std::collections::BTreeMap<_, _> = (files.0.iter())
            .filter(|(name, _)| name.contains("diwoo"))
            .collect();
        assert_eq!(taken, own_pass.0.iter().collect());
    }

    /// Issue 30: a harvest whose inventory and profiles' records outgrow a tiny memory budget
    /// (a run on disk after every record, merged at the end) renders the same files, byte for
    /// byte, with the same counts, as one held in memory: the sitemap across several shards,
    /// the Signmap and OCX, and DiWoo's categories taken from the sitemap's shards or in a
    /// pass of their own; repeats of records, newer and older, deleted ones and URLs several
    /// records list included. Its spill folder is gone afterwards, and the bytes it held are
    /// reported.
    #[test]
    fn a_spilled_harvest_renders_what_one_in_memory_does() {
        let limits = Limits {
            max_urls: 17,
            ..Limits::default()
        };
        let mut records = Vec::new();
        for i in 0..400u32 {
            let id = i % 150;
            records.push(oai_pmh::Record {
                identifier: format!("oai:r:{id}"),
                datestamp: oai_pmh::Datestamp::parse(&format!(
                    "2024-0{}-{:02}",
                    1 + i % 3,
                    1 + (i * 7) % 28
                )),
                deleted: i % 13 == 5,
                sets: vec![["a", "b", "c"][(i % 3) as usize].to_owned()],
                dc_identifiers: vec![
                    format!("https://r.example/oai/item/{}", id % 120),
                    format!("https://r.example/oai/file/{}.pdf", i % 90),
                    format!("doi:10.1/{i}"),
                ],
                dc: Default::default(),
                empty_metadata: false,
            });
        }
        let base = Url::parse("https://r.example/oai/request").unwrap();
        let render_with = |spill_dir: Option<SpillDir>| {
            let mut job = job(&[("a", 1), ("b", 2)], limits);
            job.profiles.signmap = true;
            job.profiles.ocx = Some(crate::profiles::ocx::OcxConfig::default());
            job.spill_dir = spill_dir;
            let scope = scope_for(&job, base.as_str()).unwrap();
            let mut c = Collectors::new(&job, generic(scope), base.as_str()).unwrap();
            for r in &records {
                c.add(r).unwrap();
            }
            let harvested = c.finish(HarvestReport::default()).unwrap();
            let mut files = Files::default();
            let rendered = render(&harvested, &job, &mut files).unwrap();
            let mut own_pass = Files::default();
            let mut diwoo = diwoo::Writer::new(&job.public_url, job.limits, &harvested.diwoo);
            diwoo
                .add_all::<_, Error>(&mut own_pass, harvested.published.entries().unwrap())
                .unwrap();
            diwoo.finish(&mut own_pass, &mut Vec::new()).unwrap();
            let signposts = harvested.signposts.as_ref().map(|s| s.stats.clone());
            let built = (
                harvested.published.stats.clone(),
                harvested.published.shared.clone(),
                signposts,
                rendered.diwoo,
                own_pass.0,
            );
            (
                files.0,
                built,
                harvested.spill_bytes,
                harvested.published.spilled(),
            )
        };
        // The profiles' record occurrences are on disk either way.
        let (memory, memory_built, occurrences, in_memory) = render_with(None);
        assert!(!in_memory);
        let dir = tempfile::tempdir().unwrap();
        let (spilled, spilled_built, bytes, on_disk) = render_with(Some(SpillDir {
            parent: Some(dir.path().to_owned()),
            linked: false,
            memory: 1,
            account: None,
        }));
        assert!(on_disk && bytes > occurrences, "{bytes} {occurrences}");
        assert!(
            memory.keys().filter(|n| n.starts_with("sitemap-")).count() > 3,
            "{:?}",
            memory.keys()
        );
        assert!(memory.keys().any(|n| n.starts_with("signmap-")));
        assert_eq!(memory, spilled);
        assert_eq!(memory_built, spilled_built);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
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
        let record = |id: u32, date: &str, empty: bool| oai_pmh::Record {
            identifier: format!("oai:r:{id}"),
            datestamp: oai_pmh::Datestamp::parse(date),
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
