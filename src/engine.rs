//! The publish sequence, spelled once: harvest (through the repository's store, or straight from
//! the upstream), refuse to publish nothing, render into a target's sink, commit it, and record
//! the publish in the store. `export` and the gateway's refresh only choose the target (a
//! folder's staging, a generation) and present the [`Outcome`].
//!
//! The store's invariant lives here: the store is marked as publishing before a sink is filled
//! ([`incremental::render`]), and the publish is recorded only after the target committed, so a
//! store never describes files that were not published; a failure at any step before the commit
//! leaves what is published as it was (after it, only recording can fail:
//! [`Outcome::unrecorded`]).

use std::time::{Duration, Instant};

use oai_pmh::Client;

use crate::advice;
use crate::changes::Changes;
use crate::error::Error;
use crate::incremental::{self, Policy, Publish, RunSummary};
use crate::learn::Prepared;
use crate::patch::{PreviousShards, ReadShard};
use crate::pipeline::{self, Built, FileSink, Harvested, Job};
use crate::progress::Progress;
use crate::store::{Store, StoreError};

/// Where a run publishes: a folder's staging (`export`), a generation (the gateway).
pub(crate) trait Target {
    /// The sink one attempt at rendering writes into.
    type Sink: FileSink;
    /// What committing gives back: the generation made (the gateway's), the bytes written (an
    /// export's).
    type Committed;

    /// Names the place published to ([`crate::render::published::PublishedSitemap::place`]): a store
    /// patches only a sitemap published at the same place.
    fn place(&self) -> String;

    /// Reads the published shards back, for a patch of the sitemap (with a store only); `None`
    /// when nothing is published.
    fn published(&self) -> Option<ReadShard>;

    /// A new, empty sink. A render given up part-way (a patch that does not fit) drops its sink
    /// and asks for another.
    fn stage(&mut self) -> Result<Self::Sink, Error>;

    /// Makes what `sink` holds the published files; `built` and `run` say what they are, and
    /// `elapsed` how long it took until now; `changes`, after a patch, what it changed of the
    /// published landing pages (a whole render's are the target's to find, if it wants them).
    /// Async for a bucket's uploads; a folder's and a generation's commit await nothing.
    async fn commit(
        &mut self,
        sink: Self::Sink,
        built: &Built,
        changes: Option<Changes>,
        run: Option<&RunSummary>,
        elapsed: Duration,
    ) -> Result<Self::Committed, Error>;
}

/// The repository's store and how it is used: an incremental harvest.
pub(crate) struct Stored<'a> {
    /// The store.
    pub store: &'a mut Store,
    /// How it is used.
    pub policy: &'a Policy,
}

/// What a run saw of the upstream, whatever came of the publish: the gateway shows it on its
/// status page and in its metrics even when the run failed after the harvest.
#[derive(Clone, Debug, Default)]
pub(crate) struct Seen {
    /// The harvest through the store, once it completed.
    pub run: Option<RunSummary>,
    /// Records the completed harvest received.
    pub records: u64,
    /// Whether the shrink guard held the publish back, once it looked.
    pub shrink_held: Option<bool>,
    /// How long the harvest took, once the list was read to its end.
    pub(crate) harvest_time: Option<Duration>,
    /// How long rendering and committing the generation took, once it was committed.
    pub(crate) render_time: Option<Duration>,
}

/// What a run published.
#[derive(Debug)]
pub(crate) struct Outcome<C> {
    /// The generation's counts, files and indexes.
    pub built: Built,
    /// What the harvest did to the store, with one.
    pub run: Option<RunSummary>,
    /// What the target gave back.
    pub committed: C,
    /// The publish is in place but the store could not record it: the next render is then a
    /// whole one (the store was marked as publishing), and the shrink guard still compares with
    /// the publish before. The caller says so; the gateway serves on, `export` fails.
    pub unrecorded: Option<StoreError>,
}

/// Harvests `job` from `client` (through `stored`, when given), renders it into a sink of
/// `target` and commits it. On any error nothing published is changed; `seen` then holds what
/// was learnt of the upstream before the error.
pub(crate) async fn run<T: Target>(
    job: &Job,
    client: &Client,
    mut stored: Option<Stored<'_>>,
    target: &mut T,
    progress: &mut Progress,
    seen: &mut Seen,
) -> Result<Outcome<T::Committed>, Error>
where
    Error: From<<T::Sink as FileSink>::Error>,
{
    let started = Instant::now();
    // Under `auto`, what the records alone cannot tell is asked of the web first.
    let store = stored.as_ref().map(|s| &*s.store);
    let (mut learned, mut prepared) = learn(client, job, store).await;
    let (mut harvested, mut run) =
        harvest(&learned, client, &mut stored, target, progress, seen).await?;
    // A remembered rule whose new pages answer 404 is learned again, and every stored record
    // rendered with what is learned now, as after a settings change (the second harvest asks
    // the upstream for what changed since the first, which is nothing).
    if let (Prepared::Remembered(rule), Some(s), Some(patch)) =
        (&prepared, &mut stored, &harvested.patch)
        && let Some(said) = crate::learn::gone(client, rule, patch.added()).await
    {
        tracing::warn!(%said, "learning the landing rule again, and rendering every record");
        crate::learn::forget(s.store);
        (learned, prepared) = learn(client, job, Some(&*s.store)).await;
        let again = learned.landing.learned.take();
        learned.landing.learned = Some(again.map_or(format!("{said}; learned again"), |a| {
            format!("{said}; learned again: {a}")
        }));
        (harvested, run) = harvest(&learned, client, &mut stored, target, progress, seen).await?;
    }
    let remember = match prepared {
        Prepared::Learned(rule) => Some(rule),
        _ => None,
    };
    let job = &learned;
    let harvest_time = started.elapsed();
    seen.harvest_time = Some(harvest_time);
    log_landing_rule(&harvested);
    if harvested.published.is_empty() {
        // What would give the first records pages, tried on them; a store's are read again.
        let sample = match &stored {
            Some(s) => pipeline::stored_sample(s.store)?,
            None => std::mem::take(&mut harvested.sample),
        };
        let setup = advice::Setup {
            settings: &job.landing,
            source: &job.request.source,
            scope: &job.scope,
            identify: &harvested.report.identify,
        };
        let advice = advice::advise(&sample, &setup, &harvested.landing);
        return Err(Error::NothingToPublish(pipeline::explain_empty(
            &harvested.published.stats,
            &harvested.landing,
            advice.hint().as_deref(),
        )));
    }
    let (sink, rendered) = match &mut stored {
        Some(s) => {
            let rendered =
                incremental::render(job, s.store, s.policy, &mut harvested, || target.stage());
            seen.shrink_held = Some(matches!(rendered, Err(Error::ShrinkHeld { .. })));
            rendered?
        }
        None => {
            let mut sink = target.stage()?;
            let rendered = pipeline::render(&harvested, job, &mut sink)?;
            (sink, rendered)
        }
    };
    let publish = stored
        .as_ref()
        .map(|_| Publish::new(&target.place(), job, &harvested, &rendered));
    let changes = harvested.changes.take();
    let built = Built::new(harvested, rendered);
    let committed = target
        .commit(sink, &built, changes, run.as_ref(), started.elapsed())
        .await?;
    seen.render_time = Some(started.elapsed().saturating_sub(harvest_time));
    let unrecorded = match (stored, publish) {
        (Some(s), Some(publish)) => {
            let unrecorded = incremental::published(s.store, publish).err();
            // What was learned is kept once a publish made of it is in place.
            if let Some(rule) = remember {
                crate::learn::remember(s.store, rule);
            }
            if let Some(robots) = &job.landing.robots {
                crate::learn::keep_robots(s.store, robots);
            }
            unrecorded
        }
        _ => None,
    };
    Ok(Outcome {
        built,
        run,
        committed,
        unrecorded,
    })
}

/// `job` with what the web says put on it ([`crate::learn::prepare`]), and the sites'
/// robots.txt read, when learning is on; `job` as it is otherwise.
async fn learn(client: &Client, job: &Job, store: Option<&Store>) -> (Job, Prepared) {
    let mut learned = job.clone();
    if job.landing.web.is_none() {
        return (learned, Prepared::Untouched);
    }
    // What the store remembers of the web, read once for both.
    let state = store.and_then(|s| s.state().ok());
    let prepared = crate::learn::prepare(client, &mut learned, state.as_ref()).await;
    let kept = state.as_ref().map_or(&[][..], |s| &s.robots);
    crate::learn::robots(client, &mut learned, kept).await;
    (learned, prepared)
}

/// Harvests `job` through `stored`'s store (following what `target` published), or straight
/// from the upstream; notes what was seen in `seen`.
async fn harvest<T: Target>(
    job: &Job,
    client: &Client,
    stored: &mut Option<Stored<'_>>,
    target: &T,
    progress: &mut Progress,
    seen: &mut Seen,
) -> Result<(Harvested, Option<RunSummary>), Error> {
    match stored {
        Some(s) => {
            let previous = target.published().map(|read| PreviousShards {
                place: target.place(),
                read,
            });
            let (harvested, run) =
                incremental::harvest(client, job, s.store, s.policy, progress, previous).await?;
            seen.run = Some(run.clone());
            seen.records = harvested.report.records;
            Ok((harvested, Some(run)))
        }
        None => Ok((pipeline::harvest(client, job, progress).await?, None)),
    }
}

fn log_landing_rule(harvested: &Harvested) {
    let detected = harvested.landing.detected();
    tracing::info!(
        platform = %detected.platform,
        configured = detected.configured,
        evidence = %detected.evidence,
        landing = %harvested.landing,
        "landing rule"
    );
}
