//! Refreshes: each repository has its own schedule (a task), so one slow or broken upstream never
//! delays another, and never runs two refreshes at once. A refresh harvests, renders into a new
//! generation beside the current one and swaps it in only after the list was read to its end; a
//! refresh that fails leaves the current generation serving (stale-if-error) and says so.
//!
//! The work of a refresh runs on a thread of its own with a single-threaded runtime: parsing and
//! rendering a large repository takes CPU-seconds that must not stall the request handlers.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures_util::StreamExt as _;
use oai_pmh::Client;
use tokio::sync::watch;

use super::fleet::{Claim, Fleet, Lease};
use super::generation::{Generation, Summary, Writer};
use super::history;
use super::metrics::{self, DropLabels, HarvestLabels, Metrics};
use super::{Gateway, Repo, Setup};
use crate::bucket::{Bucket, Fenced, PublishSettings, Uploaded};
use crate::changes::{Changes, Recorder};
use crate::classify::Drop;
use crate::engine::{self, Seen, Stored};
use crate::error::Error;
use crate::error::chain as error_chain;
use crate::incremental::RunSummary;
use crate::patch::{PublishedFile, ReadShard};
use crate::pipeline::Built;
use crate::progress::Progress;
use crate::spill::Account;
use crate::store::Store;

/// How the schedule backs off after failed refreshes: a minute, doubling per failure, up to the
/// interval.
const FAILURE_RETRY: RefreshBackoff = RefreshBackoff::GATEWAY;

/// How the gateway's schedule backs off after failed refreshes: the first wait, doubling with
/// each failure in a row, never past the repository's refresh interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RefreshBackoff {
    /// The wait after the first failure.
    pub first: Duration,
}

impl RefreshBackoff {
    /// The gateway's: a minute after a failure, then two, four... up to the interval.
    pub(crate) const GATEWAY: Self = Self {
        first: Duration::from_secs(60),
    };

    /// The wait after `failures` failed refreshes in a row (at least one) of a repository
    /// refreshed every `interval`.
    pub(crate) fn after(&self, failures: u32, interval: Duration) -> Duration {
        self.first
            .saturating_mul(1 << failures.saturating_sub(1).min(16))
            .min(interval)
    }
}

/// The schedule of `repo`: refresh when due, or at once when asked through `refresh_now`; stop
/// when `stop` turns true (the gateway stops, or a reload removed the repository). The
/// interval is the one of its settings as they stand when a refresh ends. The first refresh
/// is not before `first_after` (its place in `start_spread_secs`). Each refresh waits for its
/// slot ([`super::slots`]) and holds it to its end.
pub(crate) async fn schedule(
    gateway: Arc<Gateway>,
    repo: Arc<Repo>,
    mut stop: watch::Receiver<bool>,
    first_after: Duration,
) {
    let setup = repo.setup();
    // A persisted generation that is still fresh, and was made under the settings of now, is
    // served until it is due; else refresh now.
    let mut due = match repo.current() {
        Some(g) if g.summary.settings == setup.settings => {
            g.created + setup.config.refresh_interval
        }
        Some(_) => {
            tracing::info!(
                repository = repo.name,
                "the served generation was made under other settings (profiles, limits, scope, public URL...): refreshing at once"
            );
            SystemTime::now()
        }
        None => SystemTime::now(),
    };
    // A Retry-After remembered from before a restart is honoured too.
    due = oai_pmh::not_before(due, repo.status().retry_not_before);
    due = due.max(SystemTime::now() + first_after);
    loop {
        repo.update(|s| s.next_refresh = Some(due));
        let wait = due.duration_since(SystemTime::now()).unwrap_or_default();
        let asked = tokio::select! {
            () = tokio::time::sleep(wait) => false,
            () = repo.refresh_now.notified() => true,
            _ = stop.changed() => return,
        };
        if *stop.borrow() {
            return;
        }
        repo.update(|s| s.waiting_for_slot = true);
        let slot = tokio::select! {
            slot = gateway.slots.acquire(repo.setup().host()) => Some(slot),
            _ = stop.changed() => None,
        };
        repo.update(|s| s.waiting_for_slot = false);
        let Some(slot) = slot else {
            return;
        };
        let interval = repo.setup().config.refresh_interval;
        let outcome = match gateway.fleet.clone() {
            None => refresh(&gateway, &repo, stop.clone(), None).await,
            Some(fleet) => match fleet.claim(&repo.name, interval, asked).await {
                Ok(Claim::Granted { fence }) => {
                    let lease = Lease::new(Arc::clone(&fleet), &repo.name, fence);
                    claimed(&gateway, &repo, &fleet, lease, stop.clone()).await
                }
                // Another gateway refreshes it, or did: its generation is followed
                // (`fleet::follow`); this schedule looks again when the repository is due.
                Ok(Claim::Busy { until }) => {
                    due = until;
                    continue;
                }
                Ok(Claim::Fresh { since }) => {
                    due = since + interval;
                    continue;
                }
                Err(e) => {
                    tracing::warn!(repository = repo.name, "{e}; trying again soon");
                    due = SystemTime::now() + fleet.lease.min(interval);
                    continue;
                }
            },
        };
        drop(slot);
        let status = repo.status();
        due = match outcome {
            Ok(()) => SystemTime::now() + interval,
            Err(Error::Shutdown) => return,
            Err(_) => SystemTime::now() + FAILURE_RETRY.after(status.failures, interval),
        };
        // An upstream's Retry-After wins, even when it is longer than the schedule.
        due = oai_pmh::not_before(due, status.retry_not_before);
    }
}

/// Runs one refresh of `repo` under the fleet's lease on it ([`super::fleet`]): renews the lease
/// every third of its length and stops the refresh when it cannot; then records the generation
/// made, or gives the lease up.
async fn claimed(
    gateway: &Arc<Gateway>,
    repo: &Arc<Repo>,
    fleet: &Fleet,
    lease: Lease,
    mut stop: watch::Receiver<bool>,
) -> Result<(), Error> {
    let fence = lease.fence;
    let (abort, aborted) = watch::channel(false);
    let run = refresh(gateway, repo, aborted, Some(lease));
    tokio::pin!(run);
    let (mut lost, mut stopping) = (None, false);
    let outcome = loop {
        tokio::select! {
            outcome = &mut run => break outcome,
            changed = stop.changed(), if !stopping => {
                if changed.is_err() || *stop.borrow() {
                    stopping = true;
                    let _ = abort.send(true);
                }
            }
            () = tokio::time::sleep(fleet.lease / 3), if lost.is_none() => {
                // A renewal answered after a lease's length comes too late to count.
                let renewed = tokio::time::timeout(fleet.lease, fleet.renew(&repo.name, fence)).await;
                if !matches!(renewed, Ok(Ok(true))) {
                    let why = match renewed {
                        Err(_) => format!("lost the lease: fence {fence} not renewed within {:?}", fleet.lease),
                        Ok(Err(e)) => e.to_string(),
                        Ok(_) => fleet.holds(&repo.name, fence).await.err()
                            .unwrap_or_else(|| format!("lost the lease: fence {fence} was not renewed")),
                    };
                    tracing::warn!(repository = repo.name, "{why}: stopping this refresh; nothing made current");
                    lost = Some(why);
                    let _ = abort.send(true);
                }
            }
        }
    };
    let recorded = match (&outcome, repo.current()) {
        (Ok(()), Some(generation)) if lost.is_none() => {
            let manifest = tokio::fs::read(generation.dir.join(super::generation::MANIFEST)).await;
            match manifest {
                Ok(manifest) => fleet
                    .published(&repo.name, fence, &generation.id, &manifest)
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(format!("cannot read the generation's manifest: {e}")),
            }
        }
        _ => Ok(false),
    };
    match recorded {
        Ok(true) => {}
        Ok(false) => {
            if let Err(e) = fleet.release(&repo.name, fence).await {
                tracing::warn!(repository = repo.name, "{e}");
            }
            if outcome.is_ok() {
                tracing::warn!(
                    repository = repo.name,
                    "the claim ended before the generation was recorded: the fleet serves the next one recorded"
                );
            }
        }
        Err(e) => tracing::warn!(
            repository = repo.name,
            "cannot record the generation in the fleet: {e}"
        ),
    }
    match outcome {
        Err(Error::Shutdown) if lost.is_some() && !stopping => {
            // Stopped before its end, the refresh recorded nothing: said here, on the status
            // page and in the history.
            let e = Error::ClaimLost(lost.unwrap_or_default());
            let message = error_chain(&e);
            tracing::error!(repository = repo.name, "refresh failed: {message}");
            let started = repo.status().last_attempt.unwrap_or_else(SystemTime::now);
            repo.update(|s| {
                s.last_error = Some(message.clone());
                s.failures += 1;
                s.refreshing = false;
            });
            repo.history
                .record(history::Entry::ended_now(started).failed(&message))
                .await;
            Err(e)
        }
        outcome => outcome,
    }
}

/// Runs one refresh of `repo`, under its settings as they stand, and records its outcome.
pub(crate) async fn refresh(
    gateway: &Arc<Gateway>,
    repo: &Arc<Repo>,
    stop: watch::Receiver<bool>,
    lease: Option<Lease>,
) -> Result<(), Error> {
    let name = repo.name.clone();
    let started = SystemTime::now();
    repo.update(|s| {
        s.refreshing = true;
        s.last_attempt = Some(started);
    });
    repo.history.start();
    let setup = repo.setup();
    tracing::info!(repository = name, source = %setup.job.request.source, "refresh started");
    // Its memory and spill, counted in the gateway's pool and shown while it runs.
    let account = gateway.pool.account(&name);

    let (result, stats) =
        build_on_thread(gateway, repo, Arc::clone(&setup), &account, stop, lease).await?;
    let held = |entry: history::Entry| entry.held(account.memory.peak(), account.spill.peak());
    let labels = metrics::repo(&name);
    let m = &gateway.metrics;
    count_upstream(m, &name, &stats);
    let outcome = match result {
        Ok((generation, changes)) => {
            let urls = generation.summary.urls;
            serve_generation(gateway, repo, generation, setup, &labels).await;
            if let Some(changes) = changes {
                changed(gateway, repo, changes);
            }
            gateway.publish_robots().await;
            repo.history
                .record(held(history::Entry {
                    urls: Some(urls),
                    ..history::Entry::ended_now(started)
                }))
                .await;
            m.refreshed(&name, "success", started);
            "success"
        }
        Err(Error::Shutdown) => {
            // Its schedule was stopped: by the gateway stopping, or by a reload that removed
            // the repository (which goes on serving the others); or the fleet's lease on it was
            // lost, which `claimed` says.
            if gateway.stopping() {
                tracing::info!(repository = name, "refresh interrupted by shutdown");
            } else if gateway.repos().iter().any(|r| Arc::ptr_eq(r, repo)) {
                tracing::debug!(repository = name, "refresh stopped");
            } else {
                tracing::info!(
                    repository = name,
                    "refresh abandoned: the repository was removed by a reload"
                );
            }
            repo.update(|st| st.refreshing = false);
            return Err(Error::Shutdown);
        }
        Err(e) => {
            m.refreshed(&name, "failure", started);
            record_failure(m, repo, &labels, &e, &stats);
            repo.history
                .record(held(history::Entry::ended_now(started)).failed(&error_chain(&e)))
                .await;
            return Err(e);
        }
    };
    m.harvests
        .get_or_create(&HarvestLabels {
            repository: m.label(&name),
            outcome,
        })
        .inc();
    repo.update(|st| {
        st.refreshing = false;
        st.completed += 1;
        st.retry_not_before = stats.retry_not_before;
    });
    Ok(())
}

/// Builds `repo`'s next generation under `setup` on a thread of its own, its memory and spill
/// counted on `account`, and waits for it.
async fn build_on_thread(
    gateway: &Arc<Gateway>,
    repo: &Arc<Repo>,
    setup: Arc<Setup>,
    account: &Arc<Account>,
    stop: watch::Receiver<bool>,
    lease: Option<Lease>,
) -> Result<(Result<Refreshed, Error>, UpstreamStats), Error> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let worker = Arc::clone(gateway);
    let repo = Arc::clone(repo);
    let account = Arc::clone(account);
    std::thread::Builder::new()
        .name(format!("refresh-{}", repo.name))
        .spawn(move || {
            lower_priority();
            let _ = tx.send(build_on_own_runtime(
                &worker,
                &repo,
                &setup,
                &account,
                stop,
                lease.as_ref(),
            ));
            // What the harvest and the render allocated is free now: give it back, here on the
            // refresh's own thread, not on a request worker, and after the swap is under way.
            crate::memory::release_free_memory();
        })
        .map_err(|e| Error::Aborted(format!("cannot start a thread: {e}")))?;
    Ok(match rx.await {
        Ok(answer) => answer,
        Err(_) => (
            Err(Error::Aborted("the refresh thread panicked".into())),
            UpstreamStats::default(),
        ),
    })
}

/// Adds what the upstream client did in one refresh to the repository's counters.
fn count_upstream(m: &Metrics, name: &str, stats: &UpstreamStats) {
    m.upstream(name, stats.requests, &stats.statuses);
    let labels = &metrics::repo(&m.label(name));
    m.upstream_retries
        .get_or_create(labels)
        .inc_by(stats.retries);
    m.retry_after_waits
        .get_or_create(labels)
        .inc_by(stats.retry_after_waits);
}

/// Swaps `generation`, made under `setup`, in for `repo`, and records it in the log, the
/// metrics and the status.
async fn serve_generation(
    gateway: &Gateway,
    repo: &Repo,
    generation: Generation,
    setup: Arc<Setup>,
    labels: &metrics::RepoLabels,
) {
    let m = &gateway.metrics;
    let s = &generation.summary;
    tracing::info!(
        repository = repo.name,
        generation = generation.id,
        pages = s.pages,
        records = s.records,
        deleted = s.deleted,
        urls = s.urls,
        shards = s.shards,
        platform = s.platform,
        seconds = s.build_ms as f64 / 1000.0,
        "refresh done; serving the new generation"
    );
    record_generation(m, repo, &generation);
    if m.own(&repo.name) {
        m.last_success
            .get_or_create(labels)
            .set(oai_pmh::unix_secs(SystemTime::now()));
        m.last_duration
            .get_or_create(labels)
            .set(s.build_ms as f64 / 1000.0);
    }
    if let Some(replaced) = repo.swap(generation, setup) {
        gateway.forget(replaced);
    }
    gateway.announce().await;
    repo.update(|st| {
        st.last_success = Some(SystemTime::now());
        st.last_error = None;
        st.failures = 0;
    });
}

/// What a refresh whose generation was just swapped in changed of `repo`'s landing pages (in
/// URL order, seen when the generation was made; none after a first harvest): the hook of
/// whatever tells consumers of changes as they happen. ResourceSync's Change Lists are files
/// of the generation already ([`super::resourcesync`]).
fn changed(gateway: &Gateway, repo: &Repo, changes: Changes) {
    tracing::info!(
        repository = repo.name,
        baseline = changes.baseline,
        changes = changes.len(),
        created = changes.count(crate::changes::Kind::Created),
        updated = changes.count(crate::changes::Kind::Updated),
        deleted = changes.count(crate::changes::Kind::Deleted),
        "landing pages changed"
    );
    gateway.indexnow.enqueue(repo, changes);
}

/// Logs the failed refresh of `repo`, and records it in the metrics and the status.
fn record_failure(
    m: &Metrics,
    repo: &Repo,
    labels: &metrics::RepoLabels,
    e: &Error,
    stats: &UpstreamStats,
) {
    let name = &repo.name;
    let message = error_chain(e);
    let serving = repo.current().is_some();
    tracing::error!(
        repository = name,
        serving_stale = serving,
        "refresh failed{}: {message}",
        if serving {
            "; the previous generation keeps serving"
        } else {
            ""
        }
    );
    if m.own(name) {
        m.stale.get_or_create(labels).set(i64::from(serving));
    }
    m.harvests
        .get_or_create(&HarvestLabels {
            repository: m.label(name),
            outcome: "failure",
        })
        .inc();
    repo.update(|st| {
        st.last_error = Some(message);
        st.failures += 1;
        st.refreshing = false;
        st.completed += 1;
        st.retry_not_before = stats.retry_not_before;
    });
}

/// Sets the per-generation gauges of `repo` from `generation`, when it has series of its own
/// (the scrape sums the others').
pub(crate) fn record_generation(m: &Metrics, repo: &Repo, generation: &Generation) {
    super::scrape::record_generation(m, &repo.name, generation);
}

/// Drops every series of `repo`, removed from the configuration: its gauges would go on
/// describing a repository that is no longer served.
pub(crate) fn forget_metrics(m: &Metrics, repo: &Repo) {
    let labels = metrics::repo(&repo.name);
    for family in [
        &m.records,
        &m.urls,
        &m.last_success,
        &m.stale,
        &m.serving,
        &m.shrink_held,
        &m.short_list,
    ] {
        family.remove(&labels);
    }
    m.last_duration.remove(&labels);
    for family in [&m.upstream_retries, &m.retry_after_waits] {
        family.remove(&labels);
    }
    m.forget(&repo.name);
    let repository = || repo.name.clone();
    for outcome in ["success", "failure"] {
        m.harvests.remove(&HarvestLabels {
            repository: repository(),
            outcome,
        });
    }
    for kind in [
        crate::incremental::Kind::Full,
        crate::incremental::Kind::Incremental,
    ] {
        m.harvested_records.remove(&metrics::KindLabels {
            repository: repository(),
            kind: kind.as_str(),
        });
    }
    for platform in crate::platform::Platform::builtin_names() {
        m.platform.remove(&metrics::PlatformLabels {
            repository: repository(),
            platform: platform.to_owned(),
        });
    }
    for reason in Drop::ALL {
        m.dropped.remove(&DropLabels {
            repository: repository(),
            reason: reason.as_str().to_owned(),
        });
    }
    if let Some(generation) = repo.current() {
        for counts in generation.summary.profile_counts() {
            let profile = counts.profile.label();
            for (reason, _) in counts.drops {
                m.profile_dropped.remove(&metrics::ProfileDropLabels {
                    repository: repository(),
                    profile: profile.clone(),
                    reason,
                });
            }
            m.profile_entries.remove(&metrics::ProfileLabels {
                repository: repository(),
                profile,
            });
        }
    }
}

/// What the upstream client did during one refresh.
#[derive(Debug, Default)]
struct UpstreamStats {
    requests: u64,
    retries: u64,
    retry_after_waits: u64,
    retry_not_before: Option<SystemTime>,
    /// Answers by status code.
    statuses: Vec<(u16, u64)>,
}

fn build_on_own_runtime(
    gateway: &Gateway,
    repo: &Repo,
    setup: &Setup,
    account: &Arc<Account>,
    mut stop: watch::Receiver<bool>,
    lease: Option<&Lease>,
) -> (Result<Refreshed, Error>, UpstreamStats) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let e = Error::Aborted(format!("cannot start a runtime: {e}"));
            return (Err(e), UpstreamStats::default());
        }
    };
    // The repository's own settings (`[repository.harvest]` over `[harvest]`), its politeness
    // delay counted per host with every other refresh's.
    let harvest = setup.config.harvest.clone();
    let client = match Client::with_politeness(harvest, Arc::clone(&gateway.politeness)) {
        Ok(c) => c,
        Err(e) => return (Err(e.into()), UpstreamStats::default()),
    };
    let publish = gateway.publish_settings();
    let result = runtime.block_on(async {
        tokio::select! {
            r = build(repo, setup, account, &client, &gateway.metrics, &publish, lease) => r,
            _ = stop.wait_for(|s| *s) => Err(Error::Shutdown),
        }
    });
    use std::sync::atomic::Ordering::Relaxed;
    let stats = UpstreamStats {
        requests: client.stats.requests.load(Relaxed),
        retries: client.stats.retries.load(Relaxed),
        retry_after_waits: client.stats.retry_after_waits.load(Relaxed),
        retry_not_before: client.stats.retry_not_before(),
        statuses: client.stats.statuses(),
    };
    (result, stats)
}

/// [`crate::render::published::PublishedSitemap::place`] of a gateway's sitemaps: the generation being served.
const GENERATION_PLACE: &str = "generation";

/// A refresh's new generation, and what it changed of the landing pages (`None`: not sought,
/// as nothing reads them; [`NextGeneration::changes`]).
type Refreshed = (Generation, Option<Changes>);

/// A refresh's target: a new generation of `repo` beside the one served.
struct NextGeneration<'a> {
    repo: &'a Repo,
    setup: &'a Setup,
    previous: Option<&'a Arc<Generation>>,
    /// How a generation is published to object storage, when it is.
    publish: &'a PublishSettings,
    /// The fleet's lease the refresh runs under, if any.
    lease: Option<&'a Lease>,
}

impl NextGeneration<'_> {
    /// What the refresh whose files `writer` holds changed of the published landing pages:
    /// a patch's `patched` changes, none after a first harvest (a baseline), else the previous
    /// generation's sitemap compared with the new one. A comparison that fails is logged and
    /// taken for a baseline: nothing is reported rather than a wrong set. `None` when nothing
    /// reads them: the repository keeps no Change Lists and pings no IndexNow engine.
    fn changes(&self, writer: &Writer<'_>, patched: Option<Changes>) -> Option<Changes> {
        let seen = writer.created();
        if let Some(mut changes) = patched {
            changes.seen = seen;
            return Some(changes);
        }
        let config = &self.setup.config;
        if config.changelist_days == 0 && config.indexnow.is_none() {
            // The comparison reads both generations' sitemaps whole (1.5 CPU-s at a million
            // pages): not for nobody.
            return None;
        }
        let Some(previous) = self.previous else {
            return Some(Changes::baseline(seen));
        };
        let compared = (|| -> Result<Changes, Error> {
            let mut recorder = Recorder::new(&self.setup.job.budget());
            let before = crate::changes::published(previous.sitemap_shards())?;
            let after = crate::changes::published(writer.sitemap_shards())?;
            crate::changes::diff(before, after, &mut recorder)?;
            recorder.finish(seen)
        })();
        Some(compared.unwrap_or_else(|e| {
            tracing::error!(
                repository = self.repo.name,
                "cannot find what the refresh changed; reporting no changes: {}",
                error_chain(&e)
            );
            Changes::baseline(seen)
        }))
    }
}

impl<'a> engine::Target for NextGeneration<'a> {
    type Sink = Writer<'a>;
    /// The generation, and what it changed of the published landing pages.
    type Committed = Refreshed;

    fn place(&self) -> String {
        GENERATION_PLACE.to_owned()
    }

    fn published(&self) -> Option<ReadShard> {
        let generation = Arc::clone(self.previous?);
        // The generation keeps every shard plain beside its gzip.
        Some(Box::new(move |name: &str| {
            (generation.file(name.strip_suffix(".gz").unwrap_or(name)))
                .map(|(_, meta)| PublishedFile::Path(generation.path(meta)))
        }))
    }

    fn stage(&mut self) -> Result<Writer<'a>, Error> {
        let writer = Writer::new(&self.repo.dir, self.previous.map(|g| &**g))?
            .with_fence(self.lease.map(|l| l.fence));
        Ok(match self.setup.publish {
            Some(_) => writer.with_content_names(),
            None => writer,
        })
    }

    async fn commit(
        &mut self,
        writer: Writer<'a>,
        built: &Built,
        patched: Option<Changes>,
        run: Option<&RunSummary>,
        elapsed: Duration,
    ) -> Result<Refreshed, Error> {
        let changes = self.changes(&writer, patched);
        let mut summary = Summary::new(
            &self.setup.job.request.source,
            built,
            run,
            elapsed,
            &self.setup.settings,
        );
        if built.samples.is_none()
            && let Some(previous) = self.previous
        {
            // A patched sitemap read only the changed records: the examples of what was not
            // published stay those of the last whole render.
            summary.keep_examples(&previous.summary, previous.created);
        }
        let mut writer = writer;
        if let Some(changes) = &changes {
            super::resourcesync::write_changelists(
                &mut writer,
                self.previous.map(|g| &**g),
                changes,
                self.setup.config.changelist_days,
                self.setup.job.limits,
                &self.setup.job.public_url,
            )?;
        }
        let finished = writer.finish(summary)?;
        let lease = self.lease;
        let still_held = move || -> futures_util::future::BoxFuture<'a, Result<(), String>> {
            Box::pin(async move {
                match lease {
                    Some(lease) => lease.check().await,
                    None => Ok(()),
                }
            })
        };
        if let Some(url) = &self.setup.publish {
            // Up in the bucket before it is served here: a failed upload fails the refresh,
            // and both keep the generation before.
            let bucket = Bucket::open(url)?;
            let fenced = lease.map(|l| Fenced {
                token: l.fence,
                still_held: Box::new(still_held),
            });
            let published = bucket
                .publish_fenced(
                    &finished.for_bucket()?,
                    self.publish,
                    SystemTime::now(),
                    fenced.as_ref(),
                )
                .await;
            self.repo.update(|s| {
                s.last_upload = Some(super::LastUpload {
                    at: SystemTime::now(),
                    uploaded: *published.as_ref().unwrap_or(&Uploaded::default()),
                    error: published.as_ref().err().map(|e| error_chain(e)),
                });
            });
            let uploaded = match published {
                Ok(uploaded) => uploaded,
                Err(Error::Superseded { reason, .. }) => {
                    return Err(Error::LeaseLost(reason));
                }
                Err(e) => return Err(e),
            };
            tracing::info!(
                repository = self.repo.name,
                bucket = %url,
                files = uploaded.files,
                uploaded = uploaded.uploaded,
                uploaded_bytes = uploaded.uploaded_bytes,
                deleted = uploaded.deleted,
                retired = uploaded.retired,
                "published to object storage"
            );
        }
        // The last word before it is served here, and recorded for the fleet.
        if let Some(lease) = lease {
            lease.check().await.map_err(Error::LeaseLost)?;
        }
        Ok((finished.install()?, changes))
    }
}

/// Harvests and writes the next generation of `repo` under `setup`, its memory and spill
/// counted on `account`; does not swap it in.
async fn build(
    repo: &Repo,
    setup: &Setup,
    account: &Arc<Account>,
    client: &Client,
    metrics: &Metrics,
    publish: &PublishSettings,
    lease: Option<&Lease>,
) -> Result<Refreshed, Error> {
    let job = counted(&setup.job, account);
    let mut store = Store::open_at(&repo.store).map_err(Error::from)?;
    let previous = repo.current();
    let mut target = NextGeneration {
        repo,
        setup,
        previous: previous.as_ref(),
        publish,
        lease,
    };
    let mut seen = Seen::default();
    let stored = Stored {
        store: &mut store,
        policy: &setup.config.policy,
    };
    let outcome = engine::run(
        &job,
        client,
        Some(stored),
        &mut target,
        &mut Progress::silent(),
        &mut seen,
    )
    .await;
    metrics.phases(&repo.name, seen.harvest_time, seen.render_time);
    show_seen(repo, metrics, &store, &seen)?;
    let outcome = outcome?;
    if let Some(e) = outcome.unrecorded {
        // The generation is served; only the shrink guard's reference count is behind.
        tracing::warn!(repository = repo.name, "cannot record the publish: {e}");
    }
    Ok(outcome.committed)
}

/// `job` as one refresh runs it: its collectors' memory capped at a refresh's
/// (`[harvest] memory_budget_bytes`), and counted, with its spill, on `account` in the
/// gateway's pool, which holds the refreshes running at once to `[server]
/// memory_budget_bytes` and `spill_max_bytes`.
fn counted(job: &crate::pipeline::Job, account: &Arc<Account>) -> crate::pipeline::Job {
    let mut job = job.clone();
    if let Some(dir) = &mut job.spill_dir {
        dir.memory = account.per_refresh();
        dir.account = Some(Arc::clone(account));
    }
    job
}

/// Shows on the status page and in the metrics what a refresh found of the upstream, whatever
/// came of the publish: a short list, a refused `from`, the records harvested, a held shrink.
fn show_seen(repo: &Repo, metrics: &Metrics, store: &Store, seen: &Seen) -> Result<(), Error> {
    let Some(run) = &seen.run else {
        return Ok(());
    };
    repo.history.harvested(run.kind.as_str(), seen.records);
    let state = store.state().map_err(Error::from)?;
    let short_list = state.short_list.is_some();
    repo.update(|s| {
        s.short_list = state.short_list;
        s.selective_refused = state.selective_refused;
        if seen.shrink_held.is_some() {
            s.held_shrink = state.held_shrink;
        }
    });
    // The scrape sums the state of a repository without series of its own.
    if !metrics.own(&repo.name) {
        return Ok(());
    }
    let labels = metrics::repo(&repo.name);
    metrics
        .short_list
        .get_or_create(&labels)
        .set(i64::from(short_list));
    metrics
        .harvested_records
        .get_or_create(&metrics::KindLabels {
            repository: repo.name.clone(),
            kind: run.kind.as_str(),
        })
        .set(seen.records as i64);
    if let Some(held) = seen.shrink_held {
        metrics
            .shrink_held
            .get_or_create(&labels)
            .set(i64::from(held));
    }
    Ok(())
}

/// Refreshes are background work: on Linux, where a thread has a nice value of its own, this
/// thread yields the CPU to the request handlers when both want it.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    if let Err(e) =
        rustix::process::setpriority_process(Some(rustix::thread::gettid()), REFRESH_NICE)
    {
        tracing::debug!("cannot lower the refresh thread's priority: {e}");
    }
}

/// Nice value of refresh threads (0 is normal, 19 the lowest priority).
const REFRESH_NICE: i32 = 10;

/// How often a gateway of a fleet looks for generations the others made.
const FOLLOW_EVERY: Duration = Duration::from_secs(2);

/// Generations a follower makes from the bucket at once. One at a time, a follower of a fleet
/// whose repositories the others refresh often falls behind for good: each import waits on the
/// bucket's answers (tens of milliseconds each, more while it fails) far more than on this
/// machine, and one slow repository held up every other (issue 33, tests/it/chaos.rs).
const FOLLOW_AT_ONCE: usize = 4;

/// Serves the generations the other gateways of the fleet make: every [`FOLLOW_EVERY`], each
/// repository whose recorded generation is newer than the one served here (and that this
/// gateway is not refreshing itself) is made again from the bucket it was published to
/// ([`super::generation::import`]), on a thread of its own, [`FOLLOW_AT_ONCE`] at a time, and
/// swapped in. Runs until the gateway stops (the task is aborted).
pub(crate) async fn follow(gateway: Arc<Gateway>) {
    let Some(fleet) = gateway.fleet.clone() else {
        return;
    };
    loop {
        tokio::time::sleep(FOLLOW_EVERY).await;
        let recorded = match fleet.generations().await {
            Ok(recorded) => recorded,
            Err(e) => {
                tracing::warn!("cannot follow the fleet: {e}");
                continue;
            }
        };
        let repos = gateway.repos();
        let known = recorded.into_iter().filter_map(|recorded| {
            let repo = repos.iter().find(|r| r.name == recorded.repository)?;
            Some((Arc::clone(repo), recorded))
        });
        let (gateway, fleet) = (&gateway, &fleet);
        futures_util::stream::iter(known)
            .for_each_concurrent(FOLLOW_AT_ONCE, |(repo, recorded)| async move {
                let serves = |id: &str| repo.current().is_some_and(|g| g.id == id);
                if let Some(id) = &recorded.generation
                    && !repo.status().refreshing
                    && !serves(id)
                    && let Err(e) = follow_one(gateway, fleet, &repo).await
                {
                    tracing::warn!(
                        repository = repo.name,
                        "cannot serve the generation another gateway made (tried again in {FOLLOW_EVERY:?}): {e}"
                    );
                }
                // What the status page and the metrics show, after this look's follow.
                let current = repo.current();
                repo.update(|s| {
                    let view = s.fleet.take().unwrap_or_default();
                    s.fleet = Some(view.next(&recorded, current.as_ref().map(|g| g.id.as_str())));
                });
            })
            .await;
    }
}

/// Makes and serves the generation recorded for `repo`, if it is newer than the one served.
async fn follow_one(gateway: &Arc<Gateway>, fleet: &Fleet, repo: &Arc<Repo>) -> Result<(), String> {
    let Some((id, manifest, fence)) = fleet
        .manifest(&repo.name)
        .await
        .map_err(|e| e.to_string())?
    else {
        return Ok(());
    };
    let manifest: super::generation::Manifest =
        serde_json::from_slice(&manifest).map_err(|e| format!("its manifest: {e}"))?;
    let current = repo.current();
    if current
        .as_ref()
        .is_some_and(|g| g.id == id || g.created >= manifest.created())
    {
        return Ok(());
    }
    // Never back to a generation of an older lease than the one served (a record made before
    // fenced leases has no token, and neither has a generation made without a fleet).
    let fence = fence.or(manifest.fence());
    if let (Some(served), Some(recorded)) = (current.as_ref().and_then(|g| g.fence), fence)
        && recorded < served
    {
        return Err(format!(
            "the generation recorded, {id}, was made under fence {recorded}, older than the \
             one served here ({served}): not taken"
        ));
    }
    let setup = repo.setup();
    let Some(bucket_url) = setup.publish.clone() else {
        return Err("the gateway has no [server] publish_url to fetch it from".into());
    };
    let dir = repo.dir.clone();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name(format!("follow-{}", repo.name))
        .spawn(move || {
            let made = (|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| format!("cannot start a runtime: {e}"))?;
                let bucket = crate::bucket::Bucket::open(&bucket_url).map_err(|e| e.to_string())?;
                let finished = runtime.block_on(super::generation::import(
                    &dir,
                    current.as_deref(),
                    manifest,
                    |name: String| {
                        let bucket = &bucket;
                        async move { bucket.read(&name).await }
                    },
                ));
                finished
                    .and_then(super::generation::Finished::install)
                    .map_err(|e| e.to_string())
            })();
            let _ = tx.send(made);
        })
        .map_err(|e| format!("cannot start a thread: {e}"))?;
    let generation = rx
        .await
        .map_err(|_| "the thread making it panicked".to_owned())??;
    tracing::info!(
        repository = repo.name,
        generation = generation.id,
        urls = generation.summary.urls,
        "serving the generation another gateway of the fleet made"
    );
    record_generation(&gateway.metrics, repo, &generation);
    if let Some(replaced) = repo.swap(generation, setup) {
        gateway.forget(replaced);
    }
    gateway.announce().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn failed_refreshes_back_off_up_to_the_interval() {
        let b = RefreshBackoff::GATEWAY;
        let hour = secs(3600);
        let waits: Vec<u64> = (1..=8).map(|n| b.after(n, hour).as_secs()).collect();
        assert_eq!(waits, [60, 120, 240, 480, 960, 1920, 3600, 3600]);
        assert_eq!(b.after(0, hour), secs(60));
        assert_eq!(b.after(u32::MAX, Duration::MAX), secs(60 << 16));
        assert_eq!(b.after(3, secs(90)), secs(90));
    }
}
