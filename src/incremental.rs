//! Harvesting through the store: a refresh asks the upstream only for what changed since the last
//! complete harvest, applies every page to the store with its checkpoint, continues an
//! interrupted harvest where it stopped, and renders from the store's records. The gateway does
//! this for every repository; `export --state DIR` does it too.
//!
//! Which harvest a run makes:
//! - an interrupted run is continued: from its checkpoint's token while the upstream still knows
//!   it, else from the newest datestamp it applied (see [`oai_pmh::harvest_resumable`]);
//! - a full harvest when there was no complete one, when the store followed another source or
//!   held fewer oai_dc fields than the job needs, after a publish held back by the shrink guard,
//!   and every `full_interval` when the repository does not keep deletions (`deletedRecord` `no`
//!   or `transient`, OAI-39): records it does not see are removed, only once it completes (I-06),
//!   and only when none of its lists ended far short of the `completeListSize` it announced
//!   such a harvest is published but removes nothing, and the next one is full again,
//!   unless the one before ended the same list at the same place);
//! - else an incremental one: `from` = the `responseDate` of the last complete harvest (the
//!   server's clock) minus one granularity unit, in the repository's granularity (OAI-17, OAI-18).
//!   When the upstream refuses `from` (HTTP 400 or 422, or `badArgument`, to the list's first
//!   request; OAI-53), the run becomes a full harvest, and so does every later one until the
//!   full-harvest interval has passed. A missing `responseDate`, or one in none of the forms
//!   [`Datestamp::parse`] reads, leaves no `from`: a full harvest.
//!
//! A full harvest always says why ([`FullReason`]): in the log (a warning unless the reason is
//! routine, as a first harvest or the schedule is), the export summary and the status page.
//!
//! A record sent with an empty `<metadata/>` is rejected: it replaces no version stored
//! before and removes nothing ([`Store::apply_page`]).

use std::ops::ControlFlow;
use std::time::{Duration, SystemTime};

use std::collections::{HashMap, HashSet};

use oai_pmh::{
    Client, Datestamp, Granularity, HarvestError, HarvestErrorKind, PageEvent, Record, Resume,
    unix_secs,
};

use crate::error::Error;
use crate::inventory::{Published, SharedUrl, Stats, contribution};
use crate::patch::{self, PreviousShards, Unpatchable, refuse};
use crate::pipeline::{self, Harvested, Job, Rendered};
use crate::platform::Landing;
use crate::profiles::merge::{CategoryChanges, Changes, ProfilePatch};
use crate::progress::Progress;
use crate::render::FilesError;
use crate::render::published::PublishedSitemap;
use crate::render::sitemap::Layout;
pub(crate) use crate::store::FullReason;
use crate::store::{
    Checkpoint, Complete, HeldShrink, ListCount, Run, SelectiveRefused, ShortList, State, Store,
    StoreError,
};

/// How a repository is refreshed through its store.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// How often a full harvest finds deletions in a repository that does not report them.
    pub full_interval: Duration,
    /// The largest share of the published URLs one harvest may remove without confirmation.
    pub shrink_guard: f64,
    /// Publish a shrink that the guard holds back.
    pub accept_shrink: bool,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            full_interval: Duration::from_secs(7 * 86_400),
            shrink_guard: 0.5,
            accept_shrink: false,
        }
    }
}

/// What kind of harvest a run made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The whole list; deletions found by absence.
    Full,
    /// Changes since the last complete harvest.
    Incremental,
}

impl Kind {
    /// `full` or `incremental`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Full => "full",
            Kind::Incremental => "incremental",
        }
    }
}

/// What a run did to the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunSummary {
    /// Full or incremental.
    pub kind: Kind,
    /// The `from` sent, when incremental.
    pub from: Option<String>,
    /// The run continued an interrupted one (that many times).
    pub resumed: u32,
    /// Live records removed because a complete full harvest did not see them.
    pub removed: u64,
    /// Live records in the store afterwards.
    pub live: u64,
    /// Records in the store afterwards whose newest version is deleted (tombstones).
    pub deleted: u64,
    /// Records this run received (repeats included).
    pub received: u64,
    /// Deleted headers among them.
    pub received_deleted: u64,
    /// Why the run harvested in full; `None` for an incremental one.
    pub full_reason: Option<FullReason>,
    /// A list of this full harvest ended far short of its announced size: nothing was
    /// removed.
    pub short: Option<ShortList>,
    /// The upstream refused the incremental harvest's `from` (OAI-53) with this answer, and the
    /// run harvested in full instead.
    pub selective_refused: Option<String>,
}

impl RunSummary {
    /// The kind of harvest in words: `full`, or `incremental from <date>`.
    pub(crate) fn kind_text(&self) -> String {
        match &self.from {
            Some(from) => format!("{} from {from}", self.kind.as_str()),
            None => self.kind.as_str().to_owned(),
        }
    }
}

/// Harvests `job` into `store` and collects the store's records for rendering. Fails, with the
/// store consistent and its checkpoint saved, when the harvest does not complete.
///
/// After an incremental harvest, when the published sitemap can be read from `previous`, it is
/// patched with the changed records alone ([`crate::patch`]) instead of collecting every record.
pub(crate) async fn harvest(
    client: &Client,
    job: &Job,
    store: &mut Store,
    policy: &Policy,
    progress: &mut Progress,
    previous: Option<PreviousShards>,
) -> Result<(Harvested, RunSummary), Error> {
    let now = unix_secs(SystemTime::now());
    let state = store.state()?;
    if let Some(t) = oai_pmh::pending(state.retry_not_before, now) {
        return Err(Error::NotBefore(
            SystemTime::UNIX_EPOCH + Duration::from_secs(t as u64),
        ));
    }
    let (mut state, settings_changed) = follow_settings(job, store, state)?;
    store.fit_pages(crate::store::page_size_for(job.request.fields));
    let mut run = next_run(&mut state, store, policy, now, settings_changed);
    let (report, refusal) =
        harvest_or_full(client, job, store, &mut state, &mut run, now, progress).await?;
    let sweep = record_complete(&mut state, &run, &report, refusal.as_ref(), now);
    state.run = None;
    let removed = store.finish_run(run.full, sweep.then_some(run.id), &state)?;
    let summary = summarize(job, store, &run, &report, removed, refusal)?;
    let patched = match previous.filter(|_| !run.full) {
        Some(previous) => patch_stored(job, store, &state, &report, previous)?,
        None => refuse("a full harvest renders whole"),
    };
    let harvested = match patched {
        Ok(harvested) => harvested,
        Err(why) => {
            tracing::debug!(%why, "rendering the sitemap from every stored record");
            pipeline::collect_stored(job, store, report)?
        }
    };
    Ok((harvested, summary))
}

/// `state` if the store follows `job`'s settings, else a reset store's; `true` if they changed.
fn follow_settings(
    job: &Job,
    store: &mut Store,
    state: State,
) -> Result<(State, bool), StoreError> {
    let source = job.request.source.to_string();
    let fields = job.request.fields;
    let bounds = (
        job.request.from.map(Datestamp::pack),
        job.request.until.map(Datestamp::pack),
    );
    let follows = state.source == source
        && state.sets == job.request.sets
        && state.bounds == bounds
        && oai_pmh::Fields::from_bits(state.fields).covers(fields);
    // A store emptied for other settings says so (`next_run`), rather than "the first harvest".
    let settings_changed = !follows && !state.source.is_empty();
    if follows {
        return Ok((state, settings_changed));
    }
    // A refusal of `from` is the server's, whatever is harvested from it.
    let refused = state.selective_refused.filter(|_| state.source == source);
    // What was learned of the same upstream still holds (its key says for what).
    let learned = state.learned.filter(|_| state.source == source);
    let state = State {
        source,
        sets: job.request.sets.clone(),
        fields: fields.bits(),
        bounds,
        runs: state.runs,
        retry_not_before: state.retry_not_before,
        published_urls: state.published_urls,
        held_shrink: state.held_shrink,
        selective_refused: refused,
        learned,
        // The sites' robots.txt, by origin: whatever is harvested, what they said holds.
        robots: state.robots,
        ..State::default()
    };
    store.reset(&state)?;
    Ok((state, settings_changed))
}

/// The run to make: the interrupted one `state` holds (taken out of it), else a new one.
fn next_run(
    state: &mut State,
    store: &Store,
    policy: &Policy,
    now: i64,
    settings_changed: bool,
) -> Run {
    match state.run.take() {
        Some(mut run) => {
            run.resumed += 1;
            tracing::info!(
                run = run.id,
                full = run.full,
                pages = run.pages,
                token = run.checkpoint.as_ref().map(|c| c.token.as_str()),
                full_reason = run.full_reason.as_ref().map(ToString::to_string),
                "continuing an interrupted harvest"
            );
            run
        }
        None => {
            let mut run = plan(state, policy, now);
            if settings_changed && run.full {
                run.full_reason = Some(FullReason::SettingsChanged);
            }
            if let Some(reason) = &run.full_reason {
                if reason.routine() {
                    tracing::info!(store = %store.place(), "{reason}; harvesting in full");
                } else {
                    tracing::warn!(store = %store.place(), "{reason}; harvesting in full");
                }
            }
            run
        }
    }
}

/// [`harvest_run`], or a full run instead when the upstream refuses `from` (returned, OAI-53).
async fn harvest_or_full(
    client: &Client,
    job: &Job,
    store: &mut Store,
    state: &mut State,
    run: &mut Run,
    now: i64,
    progress: &mut Progress,
) -> Result<(oai_pmh::HarvestReport, Option<SelectiveRefused>), Error> {
    // A repository that refuses `from` is harvested in full instead, once per refresh (OAI-53).
    let mut refusal: Option<SelectiveRefused> = None;
    let report = loop {
        state.runs = state.runs.max(run.id);
        state.run = Some(run.clone());
        if run.full {
            // A full harvest does not mark what it changes: the next sitemap is rendered whole.
            state.sitemap = None;
        }
        store.save_state(state)?;
        let result = harvest_run(client, job, store, state, run, refusal.clone(), progress).await;
        match result {
            Err(Error::Harvest(e)) if !run.full => {
                let Some(answer) = refuses_selective(&e) else {
                    return Err(e.into());
                };
                tracing::warn!(
                    url = e.url,
                    answer,
                    "the repository refuses selective harvesting (a ListRecords with from); \
                     harvesting in full now and at every refresh until the full-harvest interval \
                     has passed, when from is tried again (OAI-53)"
                );
                *run = full_run(state.runs + 1, FullReason::SelectiveRefused(answer.clone()));
                refusal = Some(SelectiveRefused {
                    answer,
                    url: e.url,
                    since: now,
                });
            }
            result => break result?,
        }
    };
    Ok((report, refusal))
}

/// Records in `state` what the completed `run` showed; whether it sweeps what it did not see.
fn record_complete(
    state: &mut State,
    run: &Run,
    report: &oai_pmh::HarvestReport,
    refusal: Option<&SelectiveRefused>,
    now: i64,
) -> bool {
    if !run.full {
        // `from` was taken: a refusal recorded before is over.
        state.selective_refused = None;
    }
    if let Some(refusal) = refusal {
        // Recorded with the first page, unless the list had none (noRecordsMatch).
        state
            .selective_refused
            .get_or_insert_with(|| refusal.clone());
    }

    let identify = &report.identify;
    // Recorded without a responseDate too, so that the next run can say why it is full.
    state.complete = Some(Complete {
        response_date: run
            .response_date
            .clone()
            .or_else(|| report.first_response_date.clone())
            .unwrap_or_default(),
        granularity: identify.granularity.as_str().to_owned(),
        deleted_record: identify.deleted_record.clone(),
        static_repository: report.is_static,
    });
    // A full harvest whose list ended far short of its announced size proves no deletion
    // (Q-04, I-06): what it listed is kept, nothing else is swept, and the next harvest is a
    // full one again.
    let sweep = run.full && run.short.is_none();
    if let Some(short) = &run.short {
        let before = state.short_list.as_ref();
        state.short_list = Some(ShortList {
            since: before.map_or(now, |s| s.since),
            repeated: before.is_some_and(|b| {
                (&b.set, b.announced, b.delivered) == (&short.set, short.announced, short.delivered)
            }),
            ..short.clone()
        });
    } else if run.full {
        state.short_list = None;
    }
    if sweep {
        state.last_full = Some(now);
    }
    sweep
}

/// What the finished `run` did to the store, which then holds these counts; logged.
fn summarize(
    job: &Job,
    store: &Store,
    run: &Run,
    report: &oai_pmh::HarvestReport,
    removed: u64,
    refusal: Option<SelectiveRefused>,
) -> Result<RunSummary, StoreError> {
    let request_from = run.from.map(Datestamp::unpack).max(job.request.from);
    let live = store.live()?;
    let deleted = store.deleted()?;
    let summary = RunSummary {
        kind: if run.full {
            Kind::Full
        } else {
            Kind::Incremental
        },
        from: request_from.map(|f| f.in_granularity(report.identify.granularity, false)),
        resumed: run.resumed,
        removed,
        live,
        deleted,
        received: run.records,
        received_deleted: run.deleted,
        full_reason: run.full_reason.clone(),
        short: run.short.clone(),
        selective_refused: refusal.map(|r| r.answer),
    };
    tracing::info!(
        kind = summary.kind.as_str(),
        from = summary.from,
        full_reason = summary.full_reason.as_ref().map(ToString::to_string),
        pages = run.pages,
        records = run.records,
        deleted_headers = run.deleted,
        removed,
        live,
        deleted,
        "harvest complete; store updated"
    );
    Ok(summary)
}

/// A URL several records publish, as the changed records change it.
struct SharedChange {
    /// Its lastmod as published.
    before: Option<Datestamp>,
    /// Its claims now.
    now: SharedUrl,
}

/// The URLs several records publish, as the changed records change them.
struct Claims<'s> {
    store: &'s Store,
    /// Every URL the store lists as shared, when they are few beside the changes: most changed
    /// URLs are one record's, and looking each up was a tenth of a patched refresh.
    listed: Option<HashSet<String>>,
    changes: HashMap<String, SharedChange>,
}

impl<'s> Claims<'s> {
    fn new(store: &'s Store) -> Result<Self, StoreError> {
        let few = store.changed()?.saturating_mul(4).max(1024);
        Ok(Self {
            store,
            listed: store.shared_urls(few)?,
            changes: HashMap::new(),
        })
    }

    /// The change to `url` when several records publish it (looked up in the store the first
    /// time); `None` for a URL of one record.
    fn of(&mut self, url: &str) -> Result<Option<&mut SharedChange>, StoreError> {
        if !self.changes.contains_key(url) {
            if self.listed.as_ref().is_some_and(|l| !l.contains(url)) {
                return Ok(None);
            }
            let Some(now) = self.store.shared(url)? else {
                return Ok(None);
            };
            let change = SharedChange {
                before: now.newest(),
                now,
            };
            self.changes.insert(url.to_owned(), change);
        }
        Ok(self.changes.get_mut(url))
    }
}

/// The published sitemap patched with the records changed since it was published, when that
/// can be done exactly; else why not.
fn patch_stored(
    job: &Job,
    store: &Store,
    state: &State,
    report: &oai_pmh::HarvestReport,
    previous: PreviousShards,
) -> Result<Result<Harvested, Unpatchable>, Error> {
    let Some(published) = &state.sitemap else {
        return Ok(refuse("no published sitemap is recorded"));
    };
    if published.place != previous.place
        || published.ext != job.shard_ext()
        || published.max_urls != job.limits.max_urls
        || published.max_bytes != job.limits.max_bytes
    {
        return Ok(refuse(
            "the sitemap was published elsewhere or with other settings",
        ));
    }
    let landing = pipeline::landing_stored(job, store, &report.identify)?;
    if landing.key() != published.scope {
        return Ok(refuse("the scope or the landing rule changed"));
    }
    let mut stats = published.stats.clone();
    // The profiles' patch reads the same changed records: read once, kept for it.
    let mut changed = (!job.sitemap_only()).then(Vec::new);
    let Some(changes) = url_changes(store, &landing, &mut stats, changed.as_mut())? else {
        return Ok(refuse(
            "a record gave up a shared URL with a datestamp it was not recorded with",
        ));
    };
    let UrlChanges {
        mut removed,
        mut added,
        shared_after,
    } = changes;
    // What the refresh changed of the published pages, for ResourceSync and IndexNow; made
    // before the patch takes the URLs, and dropped with it when it does not fit.
    removed.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    added.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let mut recorder = crate::changes::Recorder::new(&job.budget());
    crate::changes::from_sorted(&removed, &added, &mut recorder)?;
    let page_changes = recorder.finish(std::time::SystemTime::now())?;
    let removed: Vec<String> = removed.into_iter().map(|(url, _)| url).collect();
    // The sitemap's patch and the profiles' read the same published files.
    let read = std::sync::Arc::new(previous.read);
    let reader = || -> patch::ReadShard {
        let read = std::sync::Arc::clone(&read);
        Box::new(move |name| read(name))
    };
    let profiles = match changed {
        None => None,
        Some(changed) => match patch_profiles(job, changed, &landing, report, published, reader())?
        {
            Ok(patch) => Some(patch),
            Err(why) => return Ok(Err(why)),
        },
    };
    // The changed records and what was made of them are freed: handed back before the patch
    // reads and writes the profiles' files, whose buffers make its peak (3-5 MiB less at a
    // million records).
    crate::memory::release_free_memory();
    let (removing, adding) = (removed.len(), added.len());
    let patch = match patch::patch(
        published,
        &state.layout,
        job.limits,
        removed,
        added,
        reader(),
    ) {
        Ok(patch) => patch,
        Err(why) => return Ok(Err(why)),
    };
    // What the patched shards will hold; writing them checks each URL that leaves or comes.
    let Some(urls) = (published.stats.urls + adding as u64).checked_sub(removing as u64) else {
        return Ok(refuse("more URLs leave than were published"));
    };
    // The records' counts add up their own URLs; what they share is counted once.
    let duplicate = crate::inventory::index(crate::classify::Drop::Duplicate);
    stats.drops[duplicate] = stats.drops[duplicate].wrapping_add(stats.urls.wrapping_sub(urls));
    stats.urls = urls;
    // Not a record's counts: the store's, which the harvest may have changed.
    stats.set_dropped(crate::classify::Drop::EmptyMetadata, store.rejected()?);
    stats.set_deleted(store.deleted()?);
    tracing::debug!(
        removing,
        adding,
        "patching the sitemap with the changed records"
    );
    let mut counted = Published::counted(stats);
    counted.shared = shared_after;
    Ok(Ok(Harvested {
        report: report.clone(),
        landing,
        published: counted,
        signposts: None,
        diwoo: (crate::profiles::diwoo::categories(&job.profiles.diwoo))
            .map_err(Error::InvalidJob)?
            .iter()
            .map(|c| c.number)
            .collect(),
        // The patch holds the layout it starts from, and its writing gives the one after.
        layout: Layout::default(),
        patch: Some(patch),
        profiles,
        ledger: None,
        sample: Vec::new(),
        spill_bytes: 0,
        changes: Some(page_changes),
    }))
}

/// The patch of the profiles' published files ([`crate::profiles::merge`]) with the records
/// changed since the publish (`changed`: as they are now, and the version published), when it
/// can be made exactly; else why not.
fn patch_profiles(
    job: &Job,
    mut changed: Vec<(Record, Option<Record>)>,
    landing: &Landing,
    report: &oai_pmh::HarvestReport,
    published: &PublishedSitemap,
    read: patch::ReadShard,
) -> Result<Result<ProfilePatch, Unpatchable>, Error> {
    use crate::profiles::ledger::{self, LEDGER};
    if job.profiles.cdif {
        // An export's folder is made anew: each of a million documents would be linked or
        // written again one by one, which is what a render costs.
        return Ok(refuse("CDIF's documents are rendered with every record"));
    }
    let mut buf = Vec::new();
    let Some(start) = read(LEDGER).and_then(|file| file.read(&mut buf)) else {
        return Ok(refuse("no profiles' ledger was published"));
    };
    buf.drain(..start);
    let (head, rows) = match ledger::decode(&buf) {
        Ok(read) => read,
        Err(why) => return Ok(Err(why)),
    };
    if head.key != job.settings_key() {
        return Ok(refuse("the profiles were published with other settings"));
    }
    if head.sitemap != ledger::sitemap_fingerprint(&published.shards) {
        return Ok(refuse(
            "the profiles' ledger is not the published sitemap's",
        ));
    }
    let categories =
        crate::profiles::diwoo::categories(&job.profiles.diwoo).map_err(Error::InvalidJob)?;
    // The changed records, by identifier.
    changed.sort_unstable_by(|a, b| a.0.identifier.cmp(&b.0.identifier));
    if changed
        .iter()
        .any(|(now, _)| !now.deleted && now.unreadable())
    {
        return Ok(refuse("a changed record is unreadable"));
    }
    let gone: Vec<String> = changed
        .iter()
        .map(|(now, _)| now.identifier.clone())
        .collect();
    let live: Vec<Record> = (changed.iter())
        .filter(|(now, _)| !now.deleted)
        .map(|(now, _)| now.clone())
        .collect();
    // Their rows and entries, as a render writes them.
    let (resolved, fresh) = pipeline::collect_changed(job, landing.clone(), report, &live)?;
    let streams = resolved.map(|r| r.entry_streams()).transpose()?;
    let scanned = scan_rows(fresh.as_bytes(), rows, &gone, job.limits);
    let Scanned {
        fresh_pages,
        pages,
        touched,
        before_groups,
        blanked,
    } = match scanned {
        Ok(scanned) => scanned,
        Err(why) => return Ok(Err(why)),
    };
    // Who wins each landing page touched: the newest record (a tie: the later identifier).
    let mut decided = foldhash::HashMap::default();
    for hash in &touched {
        let unchanged = pages.get(hash).into_iter().flatten();
        let mut records: Vec<(i64, &str, bool)> = unchanged
            .map(|(id, d, lost)| (*d, id.as_str(), *lost))
            .chain(
                fresh_pages
                    .get(hash)
                    .into_iter()
                    .flatten()
                    .map(|(id, d, ())| (*d, id.as_str(), false)),
            )
            .collect();
        records.sort_unstable();
        let Some(&(_, winner, lost)) = records.last() else {
            continue;
        };
        if lost {
            // Its entries were blanked or cut out of the published files.
            return Ok(refuse(
                "a record whose entries lost now wins its landing page",
            ));
        }
        decided.insert(*hash, (winner.to_owned(), records.len()));
    }
    let diwoo = match diwoo_changes(&categories, landing, &changed, &before_groups, &head.shared) {
        Ok(diwoo) => diwoo,
        Err(why) => return Ok(Err(why)),
    };
    let (diwoo, shared) = diwoo;
    let changes = Changes {
        gone,
        fresh,
        streams: streams.unwrap_or_default(),
        decided,
        blanked,
        diwoo,
        shared,
    };
    Ok(Ok(ProfilePatch::new(buf, head, changes, read)))
}

/// The records of a landing page, with their packed datestamps (and, published, whether their
/// entries lost it), by the page's hash. (foldhash, here and for the pages touched: they are
/// looked up for every row of the ledger, where std's SipHash took 2% of a patch's
/// instructions.)
type Pages<T> = foldhash::HashMap<u128, Vec<(String, i64, T)>>;

/// What the published rows say of the changed records ([`scan_rows`]).
struct Scanned {
    /// The landing pages the changed records give now.
    fresh_pages: Pages<()>,
    /// The unchanged records that give a landing page a changed record gives or gave.
    pages: Pages<bool>,
    /// Those landing pages.
    touched: foldhash::HashSet<u128>,
    /// The categories of each changed record when last published.
    before_groups: Vec<Option<u32>>,
    /// Which entries that lost in the published files are blanked out there
    /// ([`crate::profiles::merge::BlankReplay`]).
    blanked: [Vec<bool>; crate::profiles::COLUMNS],
}

/// What the published rows (`rows`, of files cut within `limits`) say of the changed records
/// (`gone`, with their rows now: `fresh`), in one pass over them.
fn scan_rows(
    fresh: &[u8],
    rows: &[u8],
    gone: &[String],
    limits: crate::render::Limits,
) -> Result<Scanned, Unpatchable> {
    use crate::profiles::ledger::RowReader;
    let mut fresh_pages: Pages<()> = Pages::default();
    let mut reader = RowReader::new(fresh)?;
    while let Some(row) = reader.row() {
        if row.landing {
            let page = fresh_pages.entry(row.hash).or_default();
            page.push((row.id.to_owned(), row.datestamp, ()));
        }
        reader.advance()?;
    }
    let mut before_groups: Vec<Option<u32>> = vec![None; gone.len()];
    let mut pages: Pages<bool> = Pages::default();
    let mut touched: foldhash::HashSet<u128> = fresh_pages.keys().copied().collect();
    let mut replay = crate::profiles::merge::BlankReplay::new(limits);
    let mut reader = RowReader::new(rows)?;
    let mut g = 0;
    while let Some(row) = reader.row() {
        replay.row(&row)?;
        while gone.get(g).is_some_and(|id| id.as_str() < row.id) {
            g += 1;
        }
        if gone.get(g).is_some_and(|id| id == row.id) {
            before_groups[g] = Some(row.groups);
            if row.landing && row.dup {
                touched.insert(row.hash);
            }
        } else if row.landing && (row.dup || touched.contains(&row.hash)) {
            let page = pages.entry(row.hash).or_default();
            page.push((row.id.to_owned(), row.datestamp, row.lost));
        }
        reader.advance()?;
    }
    Ok(Scanned {
        fresh_pages,
        pages,
        touched,
        before_groups,
        blanked: replay.finish()?,
    })
}

/// What the changed records (`changed`, by identifier, with their categories when last
/// published: `before_groups`) change in each DiWoo category, and the URLs several records give
/// after the change (`shared`: before it).
fn diwoo_changes(
    categories: &[crate::profiles::diwoo::Category],
    landing: &Landing,
    changed: &[(Record, Option<Record>)],
    before_groups: &[Option<u32>],
    shared: &[crate::profiles::ledger::SharedClaims],
) -> Result<
    (
        Vec<CategoryChanges>,
        Vec<crate::profiles::ledger::SharedClaims>,
    ),
    Unpatchable,
> {
    use crate::profiles::ledger::{SharedClaims, sorted_claims};
    let mut diwoo: Vec<CategoryChanges> = categories.iter().map(|_| Default::default()).collect();
    // Each shared URL's claims (packed datestamp, categories) before and after.
    type Claims = Vec<(i64, u32)>;
    let mut claims: HashMap<&str, (Claims, Claims)> = (shared.iter())
        .map(|s| (s.url.as_str(), (s.claims.clone(), s.claims.clone())))
        .collect();
    // A URL of one record leaves its categories, or comes into them.
    let mut one = |url: String, groups: u32, lastmod: Option<Datestamp>, comes: bool| {
        for (g, category) in diwoo.iter_mut().enumerate() {
            if groups & 1 << g == 0 {
                continue;
            }
            if comes {
                category.added.push((url.clone(), lastmod));
            } else {
                leaves(category, url.clone(), lastmod);
            }
        }
    };
    for ((now, before), groups) in changed.iter().zip(before_groups) {
        if let Some(before) = before {
            let Some(groups) = *groups else {
                return refuse("a changed record is not in the profiles' ledger");
            };
            let d = Datestamp::pack_option(before.datestamp);
            for url in contribution(before, landing).0 {
                match claims.get_mut(url.as_str()) {
                    Some((_, after)) => {
                        let Some(at) = after.iter().position(|&c| c == (d, groups)) else {
                            return refuse(
                                "a changed record's claim of a shared URL is not in the ledger",
                            );
                        };
                        after.remove(at);
                    }
                    None => one(url, groups, before.datestamp, false),
                }
            }
        }
        if !now.deleted {
            let groups = crate::profiles::diwoo::groups(categories, &now.sets);
            let d = Datestamp::pack_option(now.datestamp);
            for url in contribution(now, landing).0 {
                match claims.get_mut(url.as_str()) {
                    Some((_, after)) => after.push((d, groups)),
                    None => one(url, groups, now.datestamp, true),
                }
            }
        }
    }
    // A URL several records give is in every category of one of them; its lastmod is the newest.
    let mut shared_after = Vec::with_capacity(claims.len());
    for (url, (before, after)) in claims {
        let of = |claims: &[(i64, u32)]| {
            let groups = claims.iter().fold(0, |g, c| g | c.1);
            let newest = claims
                .iter()
                .map(|c| c.0)
                .max()
                .and_then(Datestamp::unpack_option);
            (groups, newest)
        };
        let ((was, then), (is, now)) = (of(&before), of(&after));
        for (g, category) in diwoo.iter_mut().enumerate() {
            let (was, is) = (was & 1 << g != 0, is & 1 << g != 0);
            if was && !(is && then == now) {
                leaves(category, url.to_owned(), then);
            }
            if is && !(was && then == now) {
                category.added.push((url.to_owned(), now));
            }
        }
        if after.len() > 1 {
            shared_after.push(SharedClaims {
                url: url.to_owned(),
                claims: sorted_claims(after),
            });
        }
    }
    shared_after.sort_unstable_by(|a, b| a.url.cmp(&b.url));
    for category in &mut diwoo {
        category.removed.sort_unstable();
        category.removed.dedup();
        category.added.sort_unstable();
        if category.added.windows(2).any(|w| w[0].0 == w[1].0) {
            return refuse("two changed records now publish the same URL");
        }
    }
    Ok((diwoo, shared_after))
}

/// `url` (with `lastmod`) leaves `category`: out of its files when it was published there,
/// else out of its count of URLs it does not publish (DiWoo publishes https URLs with a
/// lastmod).
fn leaves(category: &mut CategoryChanges, url: String, lastmod: Option<Datestamp>) {
    if !url.starts_with("https://") {
        category.uncounted[0] += 1;
    } else if lastmod.is_none() {
        category.uncounted[1] += 1;
    } else {
        category.removed.push(url);
    }
}

/// The URLs the records changed since the publish take out of its sitemap and put into it.
struct UrlChanges {
    /// With the lastmod they were published with.
    removed: Vec<(String, Option<Datestamp>)>,
    /// With their lastmod.
    added: Vec<(String, Option<Datestamp>)>,
    /// The URLs several records publish that the changes touched, as they are now.
    shared_after: Vec<SharedUrl>,
}

/// The changed records' effect on the published URLs and `stats`; `None` on an unknown claim.
/// The records (as they are now, and the version published) go to `keep` when given.
fn url_changes(
    store: &Store,
    landing: &Landing,
    stats: &mut Stats,
    mut keep: Option<&mut Vec<(Record, Option<Record>)>>,
) -> Result<Option<UrlChanges>, StoreError> {
    let mut removed: Vec<(String, Option<Datestamp>)> = Vec::new();
    let mut added: Vec<(String, Option<Datestamp>)> = Vec::new();
    // URLs several records publish: their claims and lastmod change instead.
    let mut shared = Claims::new(store)?;
    let mut unknown_claim = false;
    store.dirty(|now, before| {
        if let Some(before) = &before {
            let (urls, counts) = contribution(before, landing);
            stats.remove(&counts);
            for url in urls {
                match shared.of(&url)? {
                    Some(change) => unknown_claim |= !change.now.release(before.datestamp),
                    None => removed.push((url, before.datestamp)),
                }
            }
        }
        if !now.deleted {
            let (urls, counts) = contribution(&now, landing);
            stats.add(&counts);
            for url in urls {
                match shared.of(&url)? {
                    Some(change) => change.now.claim(now.datestamp),
                    None => added.push((url, now.datestamp)),
                }
            }
        }
        if let Some(keep) = keep.as_mut() {
            keep.push((now, before));
        }
        Ok::<_, StoreError>(())
    })??;
    if unknown_claim {
        return Ok(None);
    }
    let mut shared_after = Vec::with_capacity(shared.changes.len());
    for (url, change) in shared.changes {
        // The lastmod moves with the newest claim left (the next one when the newest left).
        let newest = change.now.newest();
        if change.now.claims.is_empty() {
            removed.push((url, change.before));
        } else if newest != change.before {
            removed.push((url.clone(), change.before));
            added.push((url, newest));
        }
        shared_after.push(change.now);
    }
    Ok(Some(UrlChanges {
        removed,
        added,
        shared_after,
    }))
}

/// Harvests `run` into `store`, each page applied with its checkpoint (and the list counts that
/// tell a list ending short, Q-04). `refusal`, when given, is recorded in the state with the
/// first page: the upstream answered a list without `from`, so later runs go straight to full
/// harvests.
async fn harvest_run(
    client: &Client,
    job: &Job,
    store: &mut Store,
    state: &mut State,
    run: &mut Run,
    mut refusal: Option<SelectiveRefused>,
    progress: &mut Progress,
) -> Result<oai_pmh::HarvestReport, Error> {
    let mut request = job.request.clone();
    // A configured lower bound still holds for an incremental harvest.
    request.from = run.from.map(Datestamp::unpack).max(job.request.from);
    let resume = run.checkpoint.as_ref().map(|c| Resume {
        set: c.set.clone(),
        token: c.token.clone(),
        page: c.page,
        newest: c.newest.map(Datestamp::unpack),
        ordered: c.ordered,
    });
    let mut failure: Option<StoreError> = None;
    let result = oai_pmh::harvest_resumable(client, &request, resume.as_ref(), |event| {
        if run.response_date.is_none() {
            run.response_date = event.response_date.map(str::to_owned);
        }
        run.pages += 1;
        run.records += event.records.len() as u64;
        run.deleted += event.records.iter().filter(|r| r.deleted).count() as u64;
        if run.full {
            count_list(run, &event);
        }
        run.checkpoint = event.next.map(|r| Checkpoint {
            set: r.set,
            token: r.token,
            page: r.page,
            newest: r.newest.map(Datestamp::pack),
            ordered: r.ordered,
        });
        if let Some(refusal) = refusal.take() {
            state.selective_refused = Some(refusal);
        }
        state.run = Some(run.clone());
        if let Err(e) = store.apply_page(run.id, &event.records, state, !run.full) {
            failure = Some(e);
            return ControlFlow::Break(());
        }
        progress.page(event.page, run.records, 0, event.complete_list_size);
        ControlFlow::Continue(())
    })
    .await;
    progress.finish();
    if let Some(t) = client.stats.retry_not_before() {
        state.retry_not_before = Some(unix_secs(t));
        store.save_state(state)?;
    }
    let report = result?;
    if let Some(e) = failure {
        return Err(e.into());
    }
    // A list whose follow-up answered noRecordsMatch ended without a page that said so.
    if run.list.from_start {
        end_list(run);
    }
    Ok(report)
}

/// A list that ends this short of the `completeListSize` it announced is suspect: more
/// than this share of the announced records missing, and more than [`SHORT_LIST_SLACK`].
///
/// completeListSize is a hint (OAI-22): some servers estimate it (a search index's count, or
/// records their oai_dc crosswalk then skips), and records deleted without a trace during a
/// harvest of hours leave the list; a complete list comes up short by those, a few percent at
/// most. OJS's miscount (pkp-lib #7214) ends a list at a page boundary, a page or more short,
/// usually most of the list. And a false alarm costs little (the harvest is published; only the
/// removal of what it did not list waits for a full harvest that ends as announced), where a
/// truncation taken for a complete list removes every record it did not list.
const SHORT_LIST_SHARE: f64 = 0.05;

/// Missing records a list may always end short by (a record or two deleted during the harvest
/// is a large share of a small list).
const SHORT_LIST_SLACK: u64 = 2;

/// Whether a list that delivered `delivered` records ended clearly short of the `announced`
/// size ([`SHORT_LIST_SHARE`]).
fn ended_short(delivered: u64, announced: u64) -> bool {
    let missing = announced.saturating_sub(delivered);
    missing > SHORT_LIST_SLACK && missing as f64 > announced as f64 * SHORT_LIST_SHARE
}

/// Counts the page of `event` into the list under way of a full harvest, and judges the list
/// when the page ends it.
fn count_list(run: &mut Run, event: &PageEvent<'_>) {
    if event.page == 1 {
        // A list starts. The one before ended, unless this is the same list started again
        // (badResumptionToken), whose records are then counted again from here.
        if run.list.from_start && run.list.set.as_deref() != event.set {
            end_list(run);
        }
        run.list = ListCount {
            set: event.set.map(str::to_owned),
            from_start: true,
            announced: None,
            delivered: 0,
        };
    }
    let list = &mut run.list;
    list.delivered += event.records.len() as u64;
    list.announced = list.announced.or(event.complete_list_size);
    if event.next.is_none() {
        end_list(run);
    }
}

/// Judges the list under way, which ended: a list counted from its first page that ended far
/// short of its announced size makes the run's [`Run::short`].
fn end_list(run: &mut Run) {
    let list = std::mem::take(&mut run.list);
    let Some(announced) = list.announced.filter(|_| list.from_start) else {
        return;
    };
    if !ended_short(list.delivered, announced) {
        return;
    }
    tracing::warn!(
        set = list.set,
        announced,
        delivered = list.delivered,
        "the list ended (empty resumptionToken) having delivered {} of the {announced} records \
         its completeListSize announced (Q-04): its records are kept, but no record is removed \
         for missing from it, and the next refresh harvests in full again",
        list.delivered
    );
    run.short.get_or_insert(ShortList {
        set: list.set,
        announced,
        delivered: list.delivered,
        since: unix_secs(SystemTime::now()),
        repeated: false,
    });
}

/// What the upstream answered when it refused the first request of a list with `from` (OAI-53):
/// HTTP 400 or 422 (Zenodo's), which say the request's arguments were refused, or the OAI-PMH
/// error `badArgument`. `None` for any other failure: a 401, 403 or 404 says nothing of `from`
/// (a proxy, a login page, a moved endpoint) and must not turn every later harvest into a
/// full one. `None` also for a request that was not the first of a list (a follow-up carries
/// only the token: the list's `from` was accepted) or was `Identify`.
fn refuses_selective(e: &HarvestError) -> Option<String> {
    if e.page == 0 || e.token.is_some() {
        return None;
    }
    match &e.kind {
        HarvestErrorKind::Status { status, .. } if matches!(status, 400 | 422) => {
            Some(format!("HTTP status {status}"))
        }
        HarvestErrorKind::Oai { code, message } if code == "badArgument" => {
            Some(format!("OAI-PMH error badArgument: {message:?}"))
        }
        _ => None,
    }
}

/// A full harvest, numbered `id`.
fn full_run(id: u64, reason: FullReason) -> Run {
    Run {
        id,
        full: true,
        full_reason: Some(reason),
        ..Run::default()
    }
}

/// The next run when none is under way.
fn plan(state: &State, policy: &Policy, now: i64) -> Run {
    let id = state.runs + 1;
    match next_from(state, policy, now) {
        Ok(from) => Run {
            id,
            from: Some(from.pack()),
            ..Run::default()
        },
        Err(reason) => full_run(id, reason),
    }
}

/// The `from` of the next harvest, or why it must be a full one.
fn next_from(state: &State, policy: &Policy, now: i64) -> Result<Datestamp, FullReason> {
    let interval = policy.full_interval.as_secs() as i64;
    if state.held_shrink.is_some() {
        return Err(FullReason::HeldShrink);
    }
    let Some(complete) = &state.complete else {
        return Err(FullReason::FirstHarvest);
    };
    if complete.static_repository {
        return Err(FullReason::StaticRepository);
    }
    if state.short_list.as_ref().is_some_and(|s| !s.repeated) {
        return Err(FullReason::ShortList);
    }
    // A refusal of `from` is tried again after the full-harvest interval: a server's refusal
    // can be a passing one (Zenodo's 422s come and go with the date window).
    if let Some(refused) = &state.selective_refused
        && now.saturating_sub(refused.since) < interval
    {
        return Err(FullReason::SelectiveRefused(refused.answer.clone()));
    }
    if complete.deleted_record != "persistent"
        && state
            .last_full
            .is_none_or(|t| now.saturating_sub(t) >= interval)
    {
        return Err(FullReason::FullInterval(complete.deleted_record.clone()));
    }
    if complete.response_date.is_empty() {
        return Err(FullReason::NoResponseDate);
    }
    let granularity = Granularity::parse(&complete.granularity).unwrap_or_default();
    Datestamp::parse(&complete.response_date)
        .map(|d| d.minus_unit(granularity))
        .ok_or_else(|| FullReason::UnreadableResponseDate(complete.response_date.clone()))
}

/// The shrink guard (I-07): `Err` when publishing `urls` would remove more than the policy's
/// share of the URLs published last, unless the operator accepts it or the previous complete
/// harvest already showed the same shrink. A held shrink makes the next run a full harvest,
/// which either brings the URLs back or confirms their removal.
fn guard_shrink(store: &mut Store, urls: u64, policy: &Policy) -> Result<(), Error> {
    let mut state = store.state()?;
    let Some(published) = state.published_urls.filter(|p| *p > 0) else {
        return Ok(());
    };
    let floor = published as f64 * (1.0 - policy.shrink_guard);
    if (urls as f64) >= floor {
        return Ok(());
    }
    if policy.accept_shrink {
        tracing::warn!(
            published,
            urls,
            "publishing a shrink: accepted by the operator"
        );
        return Ok(());
    }
    if let Some(held) = &state.held_shrink {
        tracing::warn!(
            published,
            urls,
            first_held = held.harvested,
            "publishing a shrink: a second complete harvest confirmed it"
        );
        return Ok(());
    }
    state.held_shrink = Some(HeldShrink {
        published,
        harvested: urls,
        since: unix_secs(SystemTime::now()),
    });
    // The next run harvests in full, to confirm or undo the shrink.
    state.complete = None;
    store.save_state(&state)?;
    Err(Error::ShrinkHeld {
        published,
        harvested: urls,
        share: policy.shrink_guard,
    })
}

/// Called before a generation is written: until [`published`] records it, what is published may
/// not be the sitemap the store recorded, so no patch may start from it.
fn publishing(store: &mut Store) -> Result<(), StoreError> {
    let mut state = store.state()?;
    if state.sitemap.take().is_some() {
        store.save_state(&state)?;
    }
    Ok(())
}

/// Renders what was harvested into a sink from `new_sink`, returning both, once the shrink
/// guard (`guard_shrink`) lets it be published (and `publishing` has been recorded). A
/// patch that turns out not to fit the published shards while they are written (one edited
/// since the publish, a URL a changed record now shares with an unchanged record) is given up
/// with its sink: `harvested` becomes every stored record, rendered into a fresh sink. Its
/// count can differ from the patch's (a newly shared URL is counted once), so the shrink guard
/// looks at it again. A held shrink is [`Error::ShrinkHeld`], whichever look held it.
pub(crate) fn render<S>(
    job: &Job,
    store: &mut Store,
    policy: &Policy,
    harvested: &mut Harvested,
    mut new_sink: impl FnMut() -> Result<S, Error>,
) -> Result<(S, Rendered), Error>
where
    S: pipeline::FileSink,
    Error: From<S::Error>,
{
    guard_shrink(store, harvested.published.stats.urls, policy)?;
    publishing(store)?;
    let mut sink = new_sink()?;
    match pipeline::render(harvested, job, &mut sink) {
        Ok(rendered) => return Ok((sink, rendered)),
        Err(Error::Files(FilesError::Patch(why))) => {
            tracing::info!(%why, "rendering the sitemap from every stored record");
        }
        Err(e) => return Err(e),
    }
    drop(sink);
    let counted = harvested.published.stats.urls;
    *harvested = pipeline::collect_stored(job, store, harvested.report.clone())?;
    let urls = harvested.published.stats.urls;
    if urls != counted {
        guard_shrink(store, urls, policy)?;
    }
    let mut sink = new_sink()?;
    let rendered = pipeline::render(harvested, job, &mut sink)?;
    Ok((sink, rendered))
}

/// What the store records of a publish: made from what was rendered, before the generation is
/// written (the harvest's records are gone by then in the gateway), and recorded by
/// [`published`] once the generation is in place.
#[derive(Debug)]
pub(crate) struct Publish {
    sitemap: PublishedSitemap,
    layout: Layout,
    /// URLs several records publish: all of them after a whole render (`replace`), else those
    /// the patch changed.
    shared: Vec<SharedUrl>,
    replace: bool,
}

impl Publish {
    /// The publish of the sitemap rendered from `harvested` as `rendered`, at `place`.
    pub(crate) fn new(place: &str, job: &Job, harvested: &Harvested, rendered: &Rendered) -> Self {
        Self {
            sitemap: PublishedSitemap {
                place: place.to_owned(),
                ext: job.shard_ext().to_owned(),
                // The landing rule's key: the scope's text under Google's rule.
                scope: harvested.landing.key(),
                max_urls: job.limits.max_urls,
                max_bytes: job.limits.max_bytes,
                shards: rendered.sitemap_shards.clone(),
                stats: harvested.published.stats.clone(),
            },
            layout: rendered.layout.clone(),
            shared: harvested.published.shared.clone(),
            replace: harvested.patch.is_none(),
        }
    }
}

/// Records a publish: its sitemap, layout and shared URLs; every record is then clean, and a
/// held shrink is settled.
pub(crate) fn published(store: &mut Store, publish: Publish) -> Result<(), StoreError> {
    let mut state = store.state()?;
    state.published_urls = Some(publish.sitemap.stats.urls);
    state.held_shrink = None;
    state.layout = publish.layout;
    state.sitemap = Some(publish.sitemap);
    store.published(&state, &publish.shared, publish.replace)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn complete(deleted_record: &str) -> Option<Complete> {
        Some(Complete {
            response_date: "2024-06-01T12:00:00Z".into(),
            granularity: "YYYY-MM-DD".into(),
            deleted_record: deleted_record.into(),
            static_repository: false,
        })
    }

    /// Why `state` gets a full harvest next; `None` for an incremental one.
    fn why_full(state: &State, now: i64) -> Option<FullReason> {
        let run = plan(state, &Policy::default(), now);
        assert_eq!(run.full, run.full_reason.is_some());
        run.full_reason
    }

    #[test]
    fn plans() {
        let policy = Policy::default();
        let now = 1_800_000_000;
        // No complete harvest: full.
        let run = plan(&State::default(), &policy, now);
        assert!(run.full && run.from.is_none() && run.id == 1);
        // OAI-18: incremental, one day of overlap before the server's responseDate.
        let state = State {
            complete: complete("persistent"),
            runs: 4,
            ..State::default()
        };
        let run = plan(&state, &policy, now);
        assert!(!run.full && run.id == 5);
        assert_eq!(
            Datestamp::unpack(run.from.unwrap()).to_string(),
            "2024-05-31"
        );
        // OAI-39: deletedRecord=no needs a full harvest every interval.
        let state = State {
            complete: complete("no"),
            last_full: Some(now - 8 * 86_400),
            ..State::default()
        };
        assert!(plan(&state, &policy, now).full);
        let state = State {
            last_full: Some(now - 86_400),
            ..state
        };
        assert!(!plan(&state, &policy, now).full);
        // A held shrink is confirmed or undone by a full harvest.
        let state = State {
            held_shrink: Some(HeldShrink {
                published: 10,
                harvested: 1,
                since: now,
            }),
            ..state
        };
        assert!(plan(&state, &policy, now).full);
        // So does a list that ended short, unless the one before ended at the same place
        // (then the schedule holds), and a refusal of `from` (OAI-53) until the full-harvest
        // interval has passed.
        let persistent = State {
            complete: complete("persistent"),
            ..State::default()
        };
        assert!(!plan(&persistent, &policy, now).full);
        let short = |repeated| State {
            short_list: Some(ShortList {
                set: None,
                announced: 15,
                delivered: 10,
                since: now,
                repeated,
            }),
            ..persistent.clone()
        };
        assert!(plan(&short(false), &policy, now).full);
        assert!(!plan(&short(true), &policy, now).full);
        let refused = |since| State {
            selective_refused: Some(SelectiveRefused {
                answer: "HTTP status 422".into(),
                url: "https://h/oai?verb=ListRecords&from=2024-05-31".into(),
                since,
            }),
            ..persistent.clone()
        };
        assert!(plan(&refused(now - 60), &policy, now).full);
        let interval = policy.full_interval.as_secs() as i64;
        assert!(!plan(&refused(now - interval), &policy, now).full);
    }

    #[test]
    fn a_full_harvest_says_why() {
        use FullReason as R;
        let now = 1_800_000_000;
        let persistent = State {
            complete: complete("persistent"),
            ..State::default()
        };
        let with_date = |date: &str| State {
            complete: Some(Complete {
                response_date: date.into(),
                ..persistent.complete.clone().unwrap()
            }),
            ..persistent.clone()
        };
        assert_eq!(why_full(&State::default(), now), Some(R::FirstHarvest));
        assert_eq!(why_full(&persistent, now), None);
        // Issue 20: Python's isoformat() is read; what is not read is named.
        assert_eq!(
            why_full(&with_date("2026-11-25T21:46:58.085156+00:00"), now),
            None
        );
        assert_eq!(
            why_full(&with_date("Tue, 25 Nov 2026 21:46:58 GMT"), now),
            Some(R::UnreadableResponseDate(
                "Tue, 25 Nov 2026 21:46:58 GMT".into()
            ))
        );
        assert_eq!(why_full(&with_date(""), now), Some(R::NoResponseDate));
        let static_file = State {
            complete: Some(Complete {
                response_date: String::new(),
                static_repository: true,
                ..persistent.complete.clone().unwrap()
            }),
            ..persistent.clone()
        };
        assert_eq!(why_full(&static_file, now), Some(R::StaticRepository));
        let no = State {
            complete: complete("no"),
            ..State::default()
        };
        assert_eq!(why_full(&no, now), Some(R::FullInterval("no".into())));
        let held = State {
            held_shrink: Some(HeldShrink {
                published: 10,
                harvested: 1,
                since: now,
            }),
            complete: None,
            ..persistent.clone()
        };
        assert_eq!(why_full(&held, now), Some(R::HeldShrink));
        let short = State {
            short_list: Some(ShortList {
                set: None,
                announced: 15,
                delivered: 10,
                since: now,
                repeated: false,
            }),
            ..persistent.clone()
        };
        assert_eq!(why_full(&short, now), Some(R::ShortList));
        let refused = State {
            selective_refused: Some(SelectiveRefused {
                answer: "HTTP status 422".into(),
                url: "https://h/oai?verb=ListRecords&from=2024-05-31".into(),
                since: now,
            }),
            ..persistent
        };
        assert_eq!(
            why_full(&refused, now),
            Some(R::SelectiveRefused("HTTP status 422".into()))
        );
        // Only what the schedule or the operator brings is routine.
        assert!(R::FirstHarvest.routine() && R::FullInterval("no".into()).routine());
        assert!(!R::UnreadableResponseDate("x".into()).routine() && !R::HeldShrink.routine());
        assert_eq!(
            R::UnreadableResponseDate("garbage".into()).to_string(),
            "the last complete harvest's responseDate \"garbage\" could not be read"
        );
    }

    #[test]
    fn a_list_is_short_when_clearly_fewer_records_came_than_announced() {
        // more than 5% and more than 2 records missing.
        for (delivered, announced, short) in [
            (10, 15, true),
            (0, 3, true),
            (13, 15, false),
            (12, 15, true),
            (95, 100, false),
            (94, 100, true),
            (9_500, 10_000, false),
            (9_499, 10_000, true),
            (20, 15, false),
        ] {
            assert_eq!(
                ended_short(delivered, announced),
                short,
                "{delivered} of {announced}"
            );
        }
    }

    #[test]
    fn lists_are_counted_from_their_first_page_and_judged_when_they_end() {
        let identify = oai_pmh::Identify::default();
        let event =
            |set: Option<&'static str>, page: u64, records: usize, size, last: bool| PageEvent {
                identify: &identify,
                page,
                set,
                records: vec![Default::default(); records],
                complete_list_size: size,
                next: (!last).then(|| Resume {
                    set: set.map(str::to_owned),
                    token: "t".into(),
                    page: page + 1,
                    newest: None,
                    ordered: true,
                }),
                response_date: None,
            };
        let count = |events: &[PageEvent<'_>]| {
            let mut run = full_run(1, FullReason::FirstHarvest);
            for e in events {
                count_list(&mut run, e);
            }
            if run.list.from_start {
                end_list(&mut run);
            }
            run.short.map(|s| (s.set, s.announced, s.delivered))
        };
        // Ended as announced; ended short; the size announced on a later page.
        assert_eq!(
            count(&[
                event(None, 1, 5, Some(10), false),
                event(None, 2, 5, None, true)
            ]),
            None
        );
        assert_eq!(
            count(&[
                event(None, 1, 5, Some(15), false),
                event(None, 2, 5, Some(15), true)
            ]),
            Some((None, 15, 10))
        );
        assert_eq!(
            count(&[
                event(None, 1, 5, None, false),
                event(None, 2, 1, Some(15), true)
            ]),
            Some((None, 15, 6))
        );
        // A list started again (badResumptionToken) is counted from its new start.
        assert_eq!(
            count(&[
                event(None, 1, 5, Some(10), false),
                event(None, 1, 5, Some(10), false),
                event(None, 2, 5, None, true),
            ]),
            None
        );
        // Sets: each list on its own; one that ended without a last page (noRecordsMatch
        // answering a token) is judged when the next starts, or when the harvest ends.
        assert_eq!(
            count(&[
                event(Some("a"), 1, 5, Some(50), false),
                event(Some("b"), 1, 5, Some(5), true),
            ]),
            Some((Some("a".into()), 50, 5))
        );
        assert_eq!(
            count(&[event(Some("a"), 1, 5, Some(50), false)]),
            Some((Some("a".into()), 50, 5))
        );
        // A run continued from a checkpoint without counts (an earlier version's) judges nothing.
        assert_eq!(count(&[event(None, 3, 5, Some(50), true)]), None);
    }

    #[test]
    fn only_a_refused_first_request_of_a_list_is_a_refusal_of_from() {
        let error = |page, token: Option<&str>, kind| HarvestError {
            url: "https://h/oai?verb=ListRecords&metadataPrefix=oai_dc&from=2024-05-31".into(),
            page,
            token: token.map(str::to_owned),
            kind,
            diagnose_command: None,
        };
        let status = |status| HarvestErrorKind::Status {
            status,
            attempts: 1,
        };
        let oai = |code: &str| HarvestErrorKind::Oai {
            code: code.into(),
            message: "bad date".into(),
        };
        assert_eq!(
            refuses_selective(&error(1, None, status(422))).as_deref(),
            Some("HTTP status 422")
        );
        assert!(refuses_selective(&error(1, None, status(400))).is_some());
        assert_eq!(
            refuses_selective(&error(1, None, oai("badArgument"))).as_deref(),
            Some("OAI-PMH error badArgument: \"bad date\"")
        );
        for (page, token, kind) in [
            (1, None, status(429)),
            (1, None, status(408)),
            (1, None, status(500)),
            (1, None, oai("cannotDisseminateFormat")),
            (0, None, status(422)),
            (2, Some("t"), status(422)),
            (2, Some("t"), oai("badArgument")),
        ] {
            assert_eq!(refuses_selective(&error(page, token, kind)), None);
        }
    }

    fn publish_of(urls: u64) -> Publish {
        Publish {
            sitemap: PublishedSitemap {
                place: String::new(),
                ext: "xml".into(),
                scope: String::new(),
                max_urls: 1,
                max_bytes: 1,
                shards: Vec::new(),
                stats: crate::inventory::Stats {
                    urls,
                    ..Default::default()
                },
            },
            layout: Layout::default(),
            shared: Vec::new(),
            replace: true,
        }
    }

    #[test]
    fn the_shrink_guard_holds_once_then_accepts_a_confirmation() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join(crate::store::FILE)).unwrap();
        let policy = Policy::default();
        // Nothing published yet: anything goes.
        guard_shrink(&mut store, 1, &policy).unwrap();
        published(&mut store, publish_of(100)).unwrap();
        guard_shrink(&mut store, 50, &policy).unwrap();
        let err = guard_shrink(&mut store, 49, &policy).unwrap_err();
        assert!(matches!(
            err,
            Error::ShrinkHeld {
                published: 100,
                harvested: 49,
                ..
            }
        ));
        assert!(store.state().unwrap().held_shrink.is_some());
        // The next complete harvest shows the same: confirmed.
        guard_shrink(&mut store, 40, &policy).unwrap();
        published(&mut store, publish_of(40)).unwrap();
        assert_eq!(store.state().unwrap().held_shrink, None);
        // The operator's override.
        let accept = Policy {
            accept_shrink: true,
            ..policy
        };
        guard_shrink(&mut store, 0, &accept).unwrap();
    }
}

/// A patched sitemap is the one a whole render of the store gives (the reason patching may be
/// used at all): random records, random rounds of updates, deletions and new records, shards
/// small enough to split.
#[cfg(test)]
mod patch_equivalence {
    use proptest::prelude::*;

    use super::*;
    use crate::pipeline::tests::Files;
    use crate::render::sitemap::{Limits, MIN_BYTES};
    use oai_pmh::HarvestReport;
    use oai_pmh::{Identify, Record};

    use crate::patch::PublishedFile;

    const BASE: &str = "https://r.example/oai/request";

    /// The published files at place "p", as a patch reads them.
    fn previous(files: &Files) -> PreviousShards {
        let files = files.0.clone();
        PreviousShards {
            place: "p".into(),
            read: Box::new(move |name| {
                (files.get(name)).map(|bytes| PublishedFile::Bytes(bytes.clone()))
            }),
        }
    }

    fn job(max_urls: usize) -> Job {
        let limits = Limits {
            max_urls,
            max_bytes: MIN_BYTES,
        };
        crate::pipeline::tests::job(&[], limits)
    }

    fn report() -> HarvestReport {
        HarvestReport {
            identify: Identify {
                base_url: BASE.into(),
                ..Identify::default()
            },
            ..HarvestReport::default()
        }
    }

    /// A record version: `kind` picks its identifiers (in scope, one shared with other records,
    /// none, a duplicate, an entity that needs escaping, out of scope, a DOI); `version` its
    /// URLs' spelling.
    fn record(id: u32, kind: u8, version: u32, date: &str) -> Record {
        let url = |s: &str| format!("https://r.example/oai/item/{id}{s}");
        let dc_identifiers = match kind % 7 {
            0 => vec![url("")],
            1 => vec![
                url(""),
                format!("https://r.example/oai/collections/{}", id % 3),
            ],
            2 => vec![],
            3 => vec![url(""), url("")],
            4 => vec![url(&format!("?a={version}&b=1"))],
            5 => vec!["https://elsewhere.example/x".into(), url("")],
            _ => vec![format!("doi:10.1/{id}"), url(&format!("/v{version}"))],
        };
        Record {
            identifier: format!("oai:r:{id}"),
            datestamp: Datestamp::parse(date),
            dc_identifiers,
            ..Record::default()
        }
    }

    fn date(round: u32, day: u8, seconds: bool) -> String {
        let day = day % 28 + 1;
        if seconds {
            format!("202{round}-01-{day:02}T10:00:{day:02}Z")
        } else {
            format!("202{round}-01-{day:02}")
        }
    }

    /// `(id, kind, day, seconds, delete)` of each change.
    type Change = (u32, u8, u8, bool, bool);

    fn whole(job: &Job, store: &Store) -> (Files, Harvested, Rendered) {
        let harvested = pipeline::collect_stored(job, store, report()).unwrap();
        let mut files = Files::default();
        let rendered = pipeline::render(&harvested, job, &mut files).unwrap();
        (files, harvested, rendered)
    }

    fn check(max_urls: usize, initial: Vec<(u8, u8)>, rounds: Vec<Vec<Change>>) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join(crate::store::FILE)).unwrap();
        let job = job(max_urls);
        let state = State::default();
        let records: Vec<Record> = initial
            .iter()
            .enumerate()
            // A URL listed twice by one record is recorded as shared by the whole render, and
            // a change to it is then rendered whole (tested below); changes may add such URLs.
            .map(|(i, (kind, day))| {
                let kind = if *kind == 3 { 0 } else { *kind };
                record(i as u32, kind, 0, &date(0, *day, false))
            })
            // One record no round changes (changes go up to 449), so that there is always a
            // sitemap to render: a store publishing nothing has none, whole or patched.
            .chain([record(1000, 0, 0, &date(0, 0, false))])
            .collect();
        store.apply_page(1, &records, &state, false).unwrap();
        let (mut published_files, harvested, rendered) = whole(&job, &store);
        let publish = Publish::new("p", &job, &harvested, &rendered);
        published(&mut store, publish).unwrap();

        for (round, changes) in rounds.into_iter().enumerate() {
            let round = round as u32 + 1;
            let page: Vec<Record> = changes
                .iter()
                .map(|(id, kind, day, seconds, delete)| {
                    let mut r = record(*id, *kind, round, &date(round, *day, *seconds));
                    if *delete {
                        r.deleted = true;
                        r.dc_identifiers.clear();
                    }
                    r
                })
                .collect();
            let state = store.state().unwrap();
            store
                .apply_page(u64::from(round) + 1, &page, &state, true)
                .unwrap();
            // The deleted records an incremental run counts as it goes are the store's.
            assert_eq!(store.deleted().unwrap(), store.counts().unwrap().deleted);
            let outcome =
                patch_stored(&job, &store, &state, &report(), previous(&published_files)).unwrap();
            let (whole_files, whole_harvested, whole_rendered) = whole(&job, &store);
            let mut patched_files = Files::default();
            let patched = outcome.map_err(Error::from).and_then(|patched| {
                let rendered = pipeline::render(&patched, &job, &mut patched_files)?;
                Ok((patched, rendered))
            });
            let (patched, rendered) = match patched {
                Ok(patched) => patched,
                // A URL newly listed by two records or twice by one (found by the plan, or by
                // the writing when the other record did not change): rendered whole.
                Err(Error::Files(FilesError::Patch(why))) if why.contains("now publish") => {
                    let publish = Publish::new("p", &job, &whole_harvested, &whole_rendered);
                    published(&mut store, publish).unwrap();
                    published_files = whole_files;
                    continue;
                }
                Err(why) => panic!("round {round}: not patched: {why}"),
            };
            assert_eq!(
                patched.published.stats, whole_harvested.published.stats,
                "round {round}: counts"
            );
            assert_eq!(patched_files.0, whole_files.0, "round {round}: files");
            // What the patch records of shared URLs is what a whole render finds.
            for s in &whole_harvested.published.shared {
                assert_eq!(
                    store_shared_after(&store, &patched, &s.url),
                    Some(s.clone())
                );
            }
            let publish = Publish::new("p", &job, &patched, &rendered);
            published(&mut store, publish).unwrap();
            published_files = patched_files;
        }
    }

    /// A shared URL as the store will record it once `patched` is published.
    fn store_shared_after(store: &Store, patched: &Harvested, url: &str) -> Option<SharedUrl> {
        match patched.published.shared.iter().find(|s| s.url == url) {
            Some(s) => Some(s.clone()).filter(|s| s.claims.len() > 1),
            None => store.shared(url).unwrap(),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn a_patch_gives_the_files_of_a_whole_render(
            // Few URLs per shard, or only the 16 KiB byte limit splitting.
            max_urls in prop_oneof![2usize..12, Just(50_000)],
            initial in prop::collection::vec((0u8..7, any::<u8>()), 1..400),
            rounds in prop::collection::vec(
                prop::collection::btree_map(
                    0u32..450,
                    (0u8..7, any::<u8>(), any::<bool>(), prop::bool::weighted(0.3)),
                    0..25,
                ),
                1..4,
            ),
        ) {
            let rounds = rounds
                .into_iter()
                .map(|m| m.into_iter().map(|(id, (k, d, s, del))| (id, k, d, s, del)).collect())
                .collect();
            check(max_urls, initial, rounds);
        }
    }

    /// A store holding `records`, their sitemap rendered whole and published at "p": where a
    /// patch starts.
    fn published_store(job: &Job, records: &[Record]) -> (tempfile::TempDir, Store, Files) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join(crate::store::FILE)).unwrap();
        store
            .apply_page(1, records, &State::default(), false)
            .unwrap();
        let (files, harvested, rendered) = whole(job, &store);
        let publish = Publish::new("p", job, &harvested, &rendered);
        published(&mut store, publish).unwrap();
        (dir, store, files)
    }

    #[test]
    fn a_shard_edited_since_the_publish_is_not_patched_but_rendered_whole() {
        let job = job(3);
        let records: Vec<Record> = (0..9).map(|i| record(i, 0, 0, "2020-01-01")).collect();
        let (_dir, mut store, mut files) = published_store(&job, &records);
        let state = store.state().unwrap();
        store
            .apply_page(2, &[record(4, 0, 1, "2021-01-01")], &state, true)
            .unwrap();
        // Someone edits a published shard (a lastmod of a record that did not change, the
        // length unchanged): a patch would carry the edit on, so the shard is refused by its
        // checksum, and every record is rendered instead.
        let shard = files.0.get_mut("sitemap-1.xml").unwrap();
        let at = shard.windows(4).position(|w| w == b"2020").unwrap();
        shard[at..at + 4].copy_from_slice(b"2019");
        let mut patched = patch_stored(&job, &store, &state, &report(), previous(&files))
            .unwrap()
            .unwrap();
        let err = pipeline::render(&patched, &job, &mut Files::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the published sitemap cannot be patched: shard 1 is not as it was published"
        );
        let (rendered_files, _) =
            render(&job, &mut store, &Policy::default(), &mut patched, || {
                Ok::<_, Error>(Files::default())
            })
            .unwrap();
        assert!(patched.patch.is_none(), "rendered from every record");
        assert_eq!(rendered_files.0, whole(&job, &store).0.0);
    }

    #[test]
    fn a_fallback_that_publishes_fewer_urls_meets_the_shrink_guard_again() {
        // I-07 after a fallback: record 1 now also lists record 2's URL, which the store does
        // not know as shared (record 2 did not change), so the patch counts it as new; records
        // 3 and 4 go. The patch counts 3 of 4 URLs (the guard at 40% lets that through), the
        // whole render that the writing falls back to publishes 2: held.
        let job = job(10);
        let records: Vec<Record> = (1..=4).map(|i| record(i, 0, 0, "2020-01-01")).collect();
        let (_dir, mut store, files) = published_store(&job, &records);
        let state = store.state().unwrap();
        let mut a = record(1, 0, 1, "2021-01-01");
        a.dc_identifiers.push(records[1].dc_identifiers[0].clone());
        let gone = |id| Record {
            deleted: true,
            dc_identifiers: Vec::new(),
            ..record(id, 0, 1, "2021-01-01")
        };
        store
            .apply_page(2, &[a, gone(3), gone(4)], &state, true)
            .unwrap();
        let mut patched = patch_stored(&job, &store, &state, &report(), previous(&files))
            .unwrap()
            .unwrap();
        assert_eq!(patched.published.stats.urls, 3);
        let policy = Policy {
            shrink_guard: 0.4,
            ..Policy::default()
        };
        let err = render(&job, &mut store, &policy, &mut patched, || {
            Ok::<_, Error>(Files::default())
        })
        .unwrap_err();
        assert!(
            matches!(
                err,
                Error::ShrinkHeld {
                    published: 4,
                    harvested: 2,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn a_url_that_several_records_publish_is_patched_and_keeps_the_newest_lastmod() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join(crate::store::FILE)).unwrap();
        let job = job(10);
        let state = State::default();
        let mut a = record(1, 0, 0, "2020-01-01");
        let b = record(2, 0, 0, "2019-06-01");
        a.dc_identifiers.push(b.dc_identifiers[0].clone());
        store.apply_page(1, &[a, b], &state, false).unwrap();
        let (files, harvested, rendered) = whole(&job, &store);
        let shared = harvested.published.shared.clone();
        let date = |d: &str| Datestamp::parse(d).map(Datestamp::pack);
        assert_eq!(
            shared,
            [SharedUrl {
                url: "https://r.example/oai/item/2".into(),
                claims: vec![date("2020-01-01").unwrap(), date("2019-06-01").unwrap()],
            }]
        );
        let publish = Publish::new("p", &job, &harvested, &rendered);
        published(&mut store, publish).unwrap();
        let mut files = files;
        // Each change is patched and gives the files of a whole render: record 1 changes and
        // still publishes item/2 (item/2 takes its datestamp); then record 1, whose datestamp
        // item/2 carries, gives it up (item/2 falls back to record 2's: no longer shared);
        // then record 2 is deleted (item/2 goes).
        let mut a1 = record(1, 0, 1, "2021-01-01");
        a1.dc_identifiers.push(shared[0].url.clone());
        let mut b3 = record(2, 0, 3, "2023-01-01");
        b3.deleted = true;
        b3.dc_identifiers.clear();
        let steps: [(Record, Option<&str>, usize); 3] = [
            (a1, Some("2021-01-01"), 2),
            (record(1, 0, 2, "2022-01-01"), Some("2019-06-01"), 1),
            (b3, None, 0),
        ];
        for (round, (change, lastmod, claims)) in steps.into_iter().enumerate() {
            let state = store.state().unwrap();
            store
                .apply_page(round as u64 + 2, &[change], &state, true)
                .unwrap();
            let patched = patch_stored(&job, &store, &state, &report(), previous(&files))
                .unwrap()
                .unwrap_or_else(|why| panic!("round {round}: {}", why.0));
            let (whole_files, _, _) = whole(&job, &store);
            let mut patched_files = Files::default();
            let rendered = pipeline::render(&patched, &job, &mut patched_files).unwrap();
            assert_eq!(patched_files.0, whole_files.0, "round {round}");
            // A URL of one record is no longer looked after as shared.
            let item = patched.published.shared.first();
            assert_eq!(item.map_or(0, |i| i.claims.len()), claims);
            assert_eq!(
                item.and_then(SharedUrl::newest),
                lastmod.and_then(Datestamp::parse)
            );
            let publish = Publish::new("p", &job, &patched, &rendered);
            published(&mut store, publish).unwrap();
            assert_eq!(store.shared(&shared[0].url).unwrap().is_some(), claims > 1);
            files = patched_files;
        }
        let state = store.state().unwrap();
        // Elsewhere, or with other limits, the published files are not the ones to patch.
        let elsewhere = PreviousShards {
            place: "q".into(),
            read: Box::new(|_| None),
        };
        assert!(
            patch_stored(&job, &store, &state, &report(), elsewhere)
                .unwrap()
                .is_err()
        );
    }
}
