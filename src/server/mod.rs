//! `oai-bridge serve`: the gateway. Each repository has a current [`Generation`] that a refresh
//! replaces atomically; requests are answered from it, with bytes from a moka cache bounded by
//! size. Refreshes run on their own threads, so a harvest never holds up a request.
//!
//! - [`generation`]: generations on disk (staging, manifest, `current` pointer) and in memory.
//! - [`refresh`]: the schedule of each repository and one refresh.
//! - [`http`]: routing and answering requests (conditional GET, HEAD, gzip negotiation).
//! - [`status`]: the status page for people.
//! - [`metrics`]: Prometheus metrics; `scrape`: the `/metrics` answer.
//! - [`reload`]: the configuration read again (SIGHUP, `POST /-/reload`), applied while serving.
//! - [`prune`]: the state of repositories no longer configured, removed on request.
//! - [`sendfile`]: big files sent to the socket from the page cache, beneath hyper.

pub(crate) mod fleet;
pub(crate) mod generation;
pub(crate) mod history;
pub(crate) mod http;
pub(crate) mod indexnow;
pub(crate) mod keyed;
pub(crate) mod linkset;
pub(crate) mod metrics;
pub(crate) mod preflight;
pub(crate) mod prune;
pub(crate) mod refresh;
pub(crate) mod reload;
pub(crate) mod resourcesync;
mod scrape;
pub(crate) mod sendfile;
pub(crate) mod slots;
pub(crate) mod status;

use crate::error::ConfigError;
use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use oai_pmh::{HarvestRequest, HostKey, Politeness};
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use url::Url;

use crate::config::{AdminToken, Config, FleetSettings, RepositoryConfig, ServerConfig};
use crate::error::Error;
use crate::pipeline::Job;
use crate::profiles::Profile;
use crate::publish::BucketUrl;
use crate::render::robots::Announced;
use generation::Generation;
use metrics::Metrics;

/// Largest request head (request line and headers): crawlers send a few hundred bytes; a larger
/// head is answered 431 (or 414 for a long URI) and the connection closed.
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// Connections served at once; further clients wait in the listen backlog until one ends, so a
/// flood of idle connections cannot exhaust file descriptors or memory.
const MAX_CONNECTIONS: usize = 4096;
/// HTTP/2 connections are pinged this often; a peer that does not answer is dropped.
const H2_PING_INTERVAL: Duration = Duration::from_secs(60);

/// Cache key: (generation serial, what of it). Bytes of two generations never share a key.
pub(crate) type CacheKey = (u64, Slot);

/// What of a generation a cache entry holds.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub(crate) enum Slot {
    /// A file, by its index among the generation's.
    File(u32),
    /// An item of a pack, by its position in the pack's index.
    Item(keyed::Pack, u64),
    /// A block of a pack's index ([`keyed::STRIDE`] entries), by its number.
    Block(keyed::Pack, u64),
}

/// Everything the request handlers and refreshes share.
#[derive(Debug)]
pub struct Gateway {
    /// What a reload may change: the repositories and the settings read at each refresh or
    /// request. Swapped whole ([`Gateway::live`]), so a request sees one set or the next.
    live: RwLock<Arc<Live>>,
    /// File bytes, plain and gzipped, bounded by `[server] cache_bytes`.
    pub(crate) cache: moka::future::Cache<CacheKey, Bytes>,
    /// The cached bodies big enough to be sent with sendfile(2), and the files they came from.
    pub(crate) bodies: sendfile::FileBodies,
    /// Metrics.
    pub metrics: Metrics,
    /// The public URL of the gateway (a directory URL).
    pub public_url: Url,
    /// Its path without the final `/` (`""` at the root): requests may carry it or not.
    pub prefix: String,
    /// `Cache-Control` of sitemaps and robots.txt.
    pub cache_control: hyper::header::HeaderValue,
    /// robots.txt, made again whenever a generation is swapped in ([`Gateway::announce`]).
    robots: RwLock<Arc<http::StaticFile>>,
    /// Held while robots.txt is made again and installed: repositories refresh in tasks of
    /// their own, and a text made before another swap must not replace one made after it. A
    /// tokio lock, held across the wait for the blocking thread that dates the text; that thread
    /// owns the guard while it writes, so a caller that goes away never lets a second write of
    /// the same temporary file begin beside it.
    announcing: Arc<tokio::sync::Mutex<()>>,
    /// When the process started.
    pub started: SystemTime,
    /// Longest time a client may take to send a request head, and an idle keep-alive connection
    /// stays open (`[server] client_timeout_secs`): slow clients would hold connections.
    pub client_timeout: Duration,
    /// Its hold on `state_dir`, so that `oai-bridge prune` keeps what it serves.
    _hold: prune::Hold,
    /// `[server]` as the process started with it: a reload that changes what only a restart can
    /// change says so ([`reload`]).
    server: ServerConfig,
    /// `[state]` as the process started with it: only a restart changes it.
    state: crate::config::StateConfig,
    /// Where each setting of `[server]`, `[harvest]` and `[state]` came from at the start, for
    /// the status page.
    pub(crate) sources: crate::config::Sources,
    /// With a shared state database: the fleet of gateways it coordinates.
    pub(crate) fleet: Option<Arc<fleet::Fleet>>,
    /// Reads the configuration again, with the layers of the start; `None`: nothing to reload.
    loader: Option<reload::Loader>,
    /// The running refresh schedules, by repository.
    schedules: Mutex<Schedules>,
    /// Held by a reload: one at a time.
    reloading: tokio::sync::Mutex<()>,
    /// Why the last reload failed, for the status page; `None` after a good one.
    pub(crate) reload_error: Mutex<Option<String>>,
    /// The refresh slots: how many refreshes run at once, in all and per upstream host.
    pub(crate) slots: Arc<slots::Slots>,
    /// The politeness delay per upstream host, shared by every refresh's client.
    pub(crate) politeness: Arc<Politeness>,
    /// The memory and spill space the running refreshes share (`[server]
    /// memory_budget_bytes`, `spill_max_bytes`), and what each holds now.
    pub(crate) pool: crate::spill::Pool,
    /// The memory the process may use, as the machine or its cgroup says at the start.
    pub(crate) machine: Option<crate::memory::Limit>,
    /// The IndexNow sender's queue: refreshes hand their changes to it.
    pub(crate) indexnow: indexnow::Pinger,
}

/// What a reload may change, swapped as a whole.
#[derive(Debug)]
pub(crate) struct Live {
    /// The repositories, in configuration order.
    pub(crate) repos: Vec<Arc<Repo>>,
    /// The limits on refreshes and the spread of the first ones.
    pub(crate) fleet: FleetSettings,
    /// The admin endpoints' token; `None`: no admin endpoints.
    pub(crate) admin_token: Option<AdminToken>,
}

/// The refresh schedules of the repositories being served.
#[derive(Debug, Default)]
struct Schedules {
    running: HashMap<String, Schedule>,
    /// The gateway is stopping: no schedule starts any more.
    stopped: bool,
}

/// One repository's schedule task, and what stops it.
#[derive(Debug)]
struct Schedule {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

/// One `[[repository]]` being served.
#[derive(Debug)]
pub struct Repo {
    /// `[[repository]] name` (a repository renamed by a reload is another repository).
    pub name: String,
    /// Its state folder, `{state_dir}/{name}`.
    pub dir: PathBuf,
    /// Its store: `store.sqlite` in `dir`, or its rows in the `[state] url` database.
    pub store: crate::store::StoreLocation,
    /// What its refreshes are made under; a reload replaces it, a refresh takes it as it starts.
    setup: RwLock<Arc<Setup>>,
    current: RwLock<Option<Arc<Generation>>>,
    /// The setup the generation being served was made under (or, before one, the first): what
    /// requests follow (`.xml.gz` routes, CDIF documents) until the next swap.
    served: RwLock<Arc<Setup>>,
    /// What its refreshes did.
    pub status: Mutex<RepoStatus>,
    /// Wakes its schedule for an immediate refresh.
    pub refresh_now: Notify,
    /// Its last refreshes, for the status page.
    pub(crate) history: history::History,
    /// What its Signposting answered, for the status page.
    pub(crate) signposting: linkset::Answered,
    /// Configured when the process started: the process is not ready before its first
    /// generation, or before its first refresh has ended: one that failed leaves the process
    /// ready (a broken upstream shows on the status page and in the metrics, not as an unready
    /// process). One a reload adds keeps no ready process from serving the others. Its own
    /// readiness, `/readyz?repository=NAME`, waits for its first generation.
    gates_readiness: bool,
}

/// A repository's settings, as its next refresh takes them.
#[derive(Debug)]
pub(crate) struct Setup {
    /// Its configuration.
    pub(crate) config: RepositoryConfig,
    /// What a refresh builds.
    pub(crate) job: Job,
    /// What its files are made under ([`Job::settings_key`], and whether its shards are named
    /// after their content), as each generation records it.
    pub(crate) settings: String,
    /// Where its generations are published besides (`{publish_url}{name}/`).
    pub(crate) publish: Option<BucketUrl>,
    /// That bucket, opened by the first request that reads from it (a retired shard's,
    /// [`http`]) and kept: opening one builds an HTTP client and may read a credentials file,
    /// which a crawler's request should not pay for, or wait on, each time. A failed opening is
    /// not kept: the next request tries again. Only the serving runtime uses it: a refresh runs
    /// on a runtime of its own, which ends with it, and a client's pooled connections belong to
    /// the runtime that opened them, so a refresh opens the bucket for its upload itself.
    pub(crate) bucket: tokio::sync::OnceCell<crate::bucket::Bucket>,
}

impl Setup {
    /// The setup of `rc`, published under the gateway's `public_url` unless it has its own,
    /// and to `{publish_url}{name}/` too when there is a publish URL, with its temporary files
    /// in `dir`.
    fn new(
        rc: &RepositoryConfig,
        public_url: &Url,
        publish_url: Option<&BucketUrl>,
        dir: &std::path::Path,
    ) -> Self {
        let repo_public = rc
            .public_url
            .clone()
            .unwrap_or_else(|| join_dir(public_url, &rc.name));
        let job = job_for(rc, repo_public, dir);
        let key = job.settings_key();
        // Shards named after their content are other files: a generation made without them is
        // made again at once.
        let settings = match publish_url {
            Some(_) => generation::content_hash(format!("{key} content names").as_bytes()),
            None => key,
        };
        Self {
            config: rc.clone(),
            settings,
            job,
            publish: publish_url.map(|url| url.join(&rc.name)),
            bucket: tokio::sync::OnceCell::new(),
        }
    }

    /// The bucket its generations are published to ([`Setup::bucket`]), opened off the
    /// serving threads the first time; `None` without one.
    pub(crate) async fn bucket(
        &self,
    ) -> Option<Result<&crate::bucket::Bucket, crate::error::Error>> {
        let url = self.publish.as_ref()?;
        let open = || async {
            let url = url.clone();
            tokio::task::spawn_blocking(move || crate::bucket::Bucket::open(&url))
                .await
                .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
        };
        Some(self.bucket.get_or_try_init(open).await)
    }

    /// The upstream host its refreshes count against (`per_host_concurrency`); `None` for a
    /// Static Repository file.
    pub(crate) fn host(&self) -> Option<HostKey> {
        match &self.job.request.source {
            oai_pmh::Source::Oai(url) => HostKey::of(url),
            oai_pmh::Source::File(_) => None,
        }
    }

    /// Whether `other` makes different refreshes: other files, another schedule or policy, or
    /// another way of treating the upstream (`[repository.harvest]`).
    fn differs(&self, other: &Setup) -> bool {
        self.settings != other.settings
            || self.config.refresh_interval != other.config.refresh_interval
            || self.config.policy != other.config.policy
            || self.config.harvest != other.config.harvest
    }
}

/// The refresh history of a repository, for the status page, metrics and `Retry-After`.
#[derive(Clone, Debug, Default)]
pub struct RepoStatus {
    /// When the last refresh started.
    pub last_attempt: Option<SystemTime>,
    /// When the last successful refresh ended.
    pub last_success: Option<SystemTime>,
    /// The error of the last refresh, if it failed; cleared by a success.
    pub last_error: Option<String>,
    /// Failed refreshes in a row.
    pub failures: u32,
    /// A refresh is running.
    pub refreshing: bool,
    /// A refresh is due and waits for a slot (`max_concurrent_refreshes`,
    /// `per_host_concurrency`).
    pub waiting_for_slot: bool,
    /// Refreshes ended so far, successful or not.
    pub completed: u64,
    /// When the next refresh is due.
    pub next_refresh: Option<SystemTime>,
    /// The upstream asked not to be asked before this (`Retry-After`).
    pub retry_not_before: Option<SystemTime>,
    /// A publish the shrink guard holds back.
    pub held_shrink: Option<crate::store::HeldShrink>,
    /// The last full harvest's list ended far short of its announced size: it removed
    /// nothing, and the next refresh harvests in full.
    pub short_list: Option<crate::store::ShortList>,
    /// The upstream refused `from` (OAI-53): refreshes harvest in full until the full-harvest
    /// interval has passed.
    pub selective_refused: Option<crate::store::SelectiveRefused>,
    /// In a fleet: its lease and how far this gateway is behind the generation it records, as
    /// last read (every few seconds).
    pub fleet: Option<fleet::FleetView>,
    /// The last upload of a generation to the bucket (`[server] publish_url`), if any.
    pub last_upload: Option<LastUpload>,
    /// Its IndexNow pings (`[repository.indexnow]`), once the sender has seen it.
    pub indexnow: Option<indexnow::PingStatus>,
}

/// What the last upload of a generation to the bucket did.
#[derive(Clone, Debug)]
pub struct LastUpload {
    /// When it ended.
    pub at: SystemTime,
    /// What it sent and kept; all zero when it failed before its end.
    pub uploaded: crate::bucket::Uploaded,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

impl Repo {
    /// Its settings as they stand: what the next refresh takes.
    pub(crate) fn setup(&self) -> Arc<Setup> {
        self.setup.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The setup the generation being served was made under ([`Repo::served`]).
    pub(crate) fn served(&self) -> Arc<Setup> {
        self.served
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Whether it has a generation to serve (a stale one counts).
    pub fn serving(&self) -> bool {
        self.current().is_some()
    }

    /// The generation being served, if any.
    pub fn current(&self) -> Option<Arc<Generation>> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Serves `next`, made under `setup`, from now on; the generation it replaces is retired
    /// (its folder goes when the last request holding it ends). Returns the replaced
    /// generation's serial, whose cache entries [`Gateway::forget`] drops.
    pub(crate) fn swap(&self, next: Generation, setup: Arc<Setup>) -> Option<u64> {
        *self.served.write().unwrap_or_else(|e| e.into_inner()) = setup;
        let previous = self
            .current
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .replace(Arc::new(next));
        previous.map(|previous| {
            previous.retire();
            previous.serial
        })
    }

    /// A copy of the refresh history.
    pub fn status(&self) -> RepoStatus {
        self.status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The indexes robots.txt announces for this repository, as absolute URLs: first those for
    /// every crawler (the sitemap index, then the Signmap, OCX and DiWoo indexes), then those for
    /// `User-agent: CDIF1.0` (the CDIF sitemaps). Those the generation being served holds, in
    /// the order an export's robots.txt lists them; before the first generation, those the
    /// configuration asks for (each answers 503 with `Retry-After` until then).
    pub fn announced(&self) -> Announced<String> {
        let setup = self.setup();
        let job = &setup.job;
        let base = &job.public_url;
        let Some(g) = self.current() else {
            return Announced {
                indexes: (job.index_names().iter())
                    .map(|n| format!("{base}{n}"))
                    .collect(),
                cdif: (job.cdif_index_names().iter())
                    .map(|n| format!("{base}{n}"))
                    .collect(),
            };
        };
        let s = &g.summary;
        let reports = || s.profiles.iter().map(|p| p.report());
        let indexes = std::iter::once(s.index_url.clone())
            .chain(reports().flat_map(|r| r.indexes(base)))
            .collect();
        let cdif = reports().flat_map(|r| r.jsonld_indexes()).collect();
        Announced { indexes, cdif }
    }

    fn update(&self, f: impl FnOnce(&mut RepoStatus)) {
        f(&mut self.status.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// Sets up the repository of `rc` in its folder under `state_dir`, with what its store
    /// (there, or in the database `memory` read it from) remembers, serving its persisted
    /// generation when that can be served. `gates_readiness`: see [`Repo::gates_readiness`].
    fn open(
        rc: &RepositoryConfig,
        public_url: &Url,
        publish_url: Option<&BucketUrl>,
        state_dir: &std::path::Path,
        memory: &Remembered,
        metrics: &Metrics,
        gates_readiness: bool,
    ) -> Result<Self, Error> {
        let dir = state_dir.join(&rc.name);
        let store = match memory {
            Remembered::Read { url, .. } => crate::store::StoreLocation::Postgres {
                url: url.clone(),
                repository: rc.name.clone(),
            },
            Remembered::Files => crate::store::StoreLocation::File(dir.join(crate::store::FILE)),
        };
        let setup = Setup::new(rc, public_url, publish_url, &dir);
        let remembered = remembered(&dir, &store, memory)?;
        let current = persisted_generation(&rc.name, &dir, &setup.job);
        let setup = Arc::new(setup);
        let repo = Self {
            name: rc.name.clone(),
            served: RwLock::new(Arc::clone(&setup)),
            setup: RwLock::new(Arc::clone(&setup)),
            gates_readiness,
            current: RwLock::new(None),
            status: Mutex::new(RepoStatus {
                retry_not_before: remembered
                    .retry_not_before
                    .map(|t| SystemTime::UNIX_EPOCH + Duration::from_secs(t.max(0) as u64)),
                held_shrink: remembered.held_shrink,
                short_list: remembered.short_list,
                selective_refused: remembered.selective_refused,
                ..RepoStatus::default()
            }),
            refresh_now: Notify::new(),
            history: history::History::load(&dir),
            signposting: linkset::Answered::default(),
            dir,
            store,
        };
        if let Some(g) = current {
            tracing::info!(
                repository = rc.name,
                generation = g.id,
                urls = g.summary.urls,
                "serving the persisted generation"
            );
            refresh::record_generation(metrics, &repo, &g);
            repo.update(|s| {
                s.last_success = Some(g.created);
            });
            let _ = repo.swap(g, setup);
        }
        if metrics.own(&rc.name) {
            metrics
                .serving
                .get_or_create(&metrics::repo(&rc.name))
                .set(i64::from(repo.current().is_some()));
        }
        Ok(repo)
    }

    /// Takes `rc`'s settings for the refreshes from the next on; whether they differ. When they
    /// make other files (profiles, gzip, limits, scope, public URL...), the schedule is woken
    /// for a refresh at once, as a restart would refresh: the generation being served keeps
    /// serving (under its old URLs, after a change of public URL) until the new one is swapped
    /// in. A refresh running now finishes under the old settings, and the next starts after it.
    fn reconfigure(
        &self,
        rc: &RepositoryConfig,
        public_url: &Url,
        publish_url: Option<&BucketUrl>,
    ) -> bool {
        let next = Setup::new(rc, public_url, publish_url, &self.dir);
        let mut setup = self.setup.write().unwrap_or_else(|e| e.into_inner());
        let differs = setup.differs(&next);
        let other_files = setup.settings != next.settings;
        *setup = Arc::new(next);
        drop(setup);
        if other_files {
            tracing::info!(
                repository = self.name,
                "its files are made differently now (profiles, gzip, limits, scope, public URL...): refreshing at once"
            );
            // A permit is kept if the schedule is not waiting now (a refresh runs): it wakes
            // the schedule as soon as it waits again.
            self.refresh_now.notify_one();
        }
        differs
    }
}

/// What a refresh of `rc` builds, published at `public_url`, its temporary files in `dir`.
fn job_for(rc: &RepositoryConfig, public_url: Url, dir: &std::path::Path) -> Job {
    Job {
        request: HarvestRequest {
            source: rc.source.clone(),
            sets: rc.sets.clone(),
            from: rc.from,
            until: rc.until,
            fields: crate::pipeline::fields_for(&rc.profiles, &rc.landing, &rc.source),
        },
        landing: rc.landing.clone(),
        profiles: rc.profiles.clone(),
        scope: rc.scope.clone(),
        limits: rc.limits,
        gzip: rc.gzip,
        public_url,
        // Beside the generations, where a folder left by a crash is removed at the next
        // start; read back into the generation, not linked.
        // Its memory and its account with the gateway's pool are each refresh's own
        // (`refresh::build`).
        spill_dir: Some(crate::pipeline::SpillDir {
            parent: Some(dir.to_path_buf()),
            linked: false,
            memory: crate::spill::DEFAULT_MEMORY_BUDGET,
            account: None,
        }),
    }
}

/// What the store at `store` (created if need be, as the repository's folder `dir`)
/// remembers across restarts: a Retry-After not yet over, a held shrink.
fn remembered(
    dir: &std::path::Path,
    store: &crate::store::StoreLocation,
    memory: &Remembered,
) -> Result<crate::store::State, Error> {
    std::fs::create_dir_all(dir)
        .map_err(|source| Error::Io {
            action: "cannot create",
            path: dir.to_path_buf(),
            source: source.into(),
        })
        .and_then(|()| {
            if let (
                Remembered::Read { states, .. },
                crate::store::StoreLocation::Postgres { repository, .. },
            ) = (memory, store)
            {
                return Ok(states.get(repository).cloned().unwrap_or_default());
            }
            // A repository new to the state directory has nothing to remember, and its first
            // refresh makes its SQLite store: made here, 10,000 of them (each its tables and an
            // fsync) held a fleet's first start five minutes before it answered a request.
            if let crate::store::StoreLocation::File(path) = store
                && !path.exists()
            {
                return Ok(crate::store::State::default());
            }
            crate::store::Store::open_at(store)
                .and_then(|s| s.state())
                .map_err(|e| Error::Io {
                    action: "cannot read the state store of",
                    path: dir.to_path_buf(),
                    source: e.into(),
                })
        })
}

/// What the stores of the repositories a start or a reload opens remember, for [`Repo::open`].
pub(crate) enum Remembered {
    /// Each repository's SQLite file, read as the repository opens.
    Files,
    /// Read from the PostgreSQL database at `url` in one query for all of them: a store opened
    /// for each (a connection, the migrations' lock, a query) held a start of 1,000
    /// repositories 8 s before it answered.
    Read {
        url: crate::store::StateUrl,
        states: std::collections::HashMap<String, crate::store::State>,
    },
}

impl Remembered {
    /// For opening the repositories `names`, whose state is in the database at `state_url`, or
    /// in SQLite files under `state_dir` when there is none.
    pub(crate) fn read(
        state_url: Option<&crate::store::StateUrl>,
        names: Vec<String>,
        state_dir: &std::path::Path,
    ) -> Result<Self, Error> {
        let Some(url) = state_url else {
            return Ok(Self::Files);
        };
        // Named as each repository's store was when it was opened alone: the first one's.
        let first = state_dir.join(names.first().map_or("", String::as_str));
        crate::store::Store::postgres_states(url, names)
            .map(|states| Self::Read {
                url: url.clone(),
                states,
            })
            .map_err(|e| Error::Io {
                action: "cannot read the state store of",
                path: first,
                source: e.into(),
            })
    }
}

/// The generation persisted in `dir` for the repository `name`, unless it cannot be served
/// (logged): unreadable, or published at another URL than `job`'s.
fn persisted_generation(name: &str, dir: &std::path::Path, job: &Job) -> Option<Generation> {
    match generation::load_current(dir) {
        // Its files name the gateway's URLs of then: served at another public URL, they
        // would send crawlers elsewhere until the first refresh (which runs at once).
        Ok(Some(g))
            if g.summary.index_url
                != format!("{}{}", job.public_url, Profile::Sitemap.index_name()) =>
        {
            tracing::warn!(
                repository = name,
                was = g.summary.index_url,
                "the persisted generation was published at another URL and is not served; the first refresh makes one at once"
            );
            None
        }
        Ok(g) => g,
        Err(e) => {
            tracing::warn!(
                repository = name,
                "the persisted generation cannot be served and waits for the first refresh: {e}"
            );
            None
        }
    }
}

impl Gateway {
    /// Sets up the gateway for `config`, published at `public_url`, and loads the persisted
    /// generation of each repository. A generation that cannot be loaded is logged and left
    /// for the first refresh to replace.
    pub fn new(config: &Config, public_url: Url) -> Result<Self, Error> {
        let state_dir = &config.server.state_dir;
        std::fs::create_dir_all(state_dir).map_err(|source| Error::Io {
            action: "cannot create the state directory",
            path: state_dir.clone(),
            source: source.into(),
        })?;
        let hold = prune::Hold::take(state_dir).map_err(|in_use| Error::StateDirInUse {
            state_dir: state_dir.clone(),
            lock: in_use.lock,
            holder: in_use.holder.map(|h| h.to_string()),
        })?;
        let metrics = Metrics::new(config.server.metrics_repository_series);
        let names: Vec<&str> = (config.repositories.iter())
            .map(|r| r.name.as_str())
            .collect();
        metrics.admit(&names, names.iter().copied());
        let memory = Remembered::read(
            config.state.url.as_ref(),
            names.iter().map(|n| (*n).to_owned()).collect(),
            state_dir,
        )?;
        let mut repos = Vec::new();
        for rc in &config.repositories {
            repos.push(Arc::new(Repo::open(
                rc,
                &public_url,
                config.server.publish_url.as_ref(),
                state_dir,
                &memory,
                &metrics,
                true,
            )?));
        }
        let cache = moka::future::Cache::builder()
            .max_capacity(config.server.cache_bytes)
            .weigher(|_: &CacheKey, v: &Bytes| u32::try_from(v.len()).unwrap_or(u32::MAX))
            .support_invalidation_closures()
            .build();
        let prefix = public_url.path().trim_end_matches('/').to_owned();
        let robots = robots_file(&repos, state_dir);
        prune::record_serving(state_dir, repos.iter().map(|r| r.name.as_str()));
        Ok(Self {
            live: RwLock::new(Arc::new(Live {
                repos,
                fleet: config.fleet.clone(),
                admin_token: config.server.admin_token.clone(),
            })),
            slots: slots::Slots::new(&config.fleet),
            politeness: Arc::default(),
            pool: crate::spill::Pool::new(config.pool_limits()),
            machine: crate::memory::limit(),
            indexnow: indexnow::Pinger::default(),
            cache,
            bodies: sendfile::FileBodies::new(),
            metrics,
            prefix,
            cache_control: hyper::header::HeaderValue::from_str(&format!(
                "public, max-age={}",
                config.server.max_age.as_secs()
            ))
            .expect("digits make a header value"),
            robots: RwLock::new(Arc::new(robots)),
            announcing: Arc::default(),
            public_url,
            started: SystemTime::now(),
            client_timeout: config.server.client_timeout,
            _hold: hold,
            server: config.server.clone(),
            state: config.state.clone(),
            sources: config.sources.clone(),
            fleet: (config.state.url.as_ref())
                .map(|url| Arc::new(fleet::Fleet::new(url, config.state.lease))),
            loader: None,
            schedules: Mutex::new(Schedules::default()),
            reloading: tokio::sync::Mutex::new(()),
            reload_error: Mutex::new(None),
        })
    }

    /// This gateway, reloading its configuration with `load` (SIGHUP, `POST /-/reload`):
    /// the file read again with the environment and flags of the start over it.
    pub fn reloading_from(
        mut self,
        load: impl Fn() -> Result<Config, ConfigError> + Send + Sync + 'static,
    ) -> Self {
        self.loader = Some(reload::Loader(Box::new(load)));
        self
    }

    /// What a reload may change, as it stands.
    pub(crate) fn live(&self) -> Arc<Live> {
        self.live.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The repositories being served, in configuration order.
    pub fn repos(&self) -> Vec<Arc<Repo>> {
        self.live().repos.clone()
    }

    /// The repository named `name`.
    pub fn repo(&self, name: &str) -> Option<Arc<Repo>> {
        self.live().repos.iter().find(|r| r.name == name).cloned()
    }

    /// How generations are published to object storage (with a publish URL).
    pub(crate) fn publish_settings(&self) -> crate::bucket::PublishSettings {
        crate::bucket::PublishSettings {
            grace: self.server.publish_grace,
            max_age: self.server.max_age,
        }
    }

    /// Uploads robots.txt to the root of the publish URL when the bucket's differs (a
    /// repository's indexes came or went), after a repository's generation went up. A failure
    /// is logged: the next refresh tries again, and the indexes are published either way.
    pub(crate) async fn publish_robots(&self) {
        let Some(url) = &self.server.publish_url else {
            return;
        };
        let robots = self.robots();
        let put = async {
            let bucket = crate::bucket::Bucket::open(url)?;
            bucket
                .put_if_changed("robots.txt", &robots.bytes, &self.publish_settings())
                .await
        };
        match put.await {
            Ok(true) => tracing::info!(bucket = %url, "robots.txt published"),
            Ok(false) => {}
            Err(e) => tracing::warn!(
                bucket = %url,
                "cannot publish robots.txt (the next refresh tries again): {}",
                crate::error::chain(&e)
            ),
        }
    }

    /// robots.txt as it stands.
    pub fn robots(&self) -> Arc<http::StaticFile> {
        self.robots
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Makes robots.txt again from the generations being served, after a swap: a profile that
    /// published nothing this time has no index, and announcing it would send crawlers to a 404.
    /// An unchanged text keeps its validators. When it was first served is read and recorded in
    /// the state directory on a blocking thread, never on the runtime that answers requests.
    pub async fn announce(&self) {
        let one_at_a_time = Arc::clone(&self.announcing).lock_owned().await;
        let bytes = Bytes::from(robots_txt(&self.live().repos));
        let state_dir = self.server.state_dir.clone();
        let dated =
            tokio::task::spawn_blocking(move || (one_at_a_time, dated_robots(bytes, &state_dir)))
                .await;
        let (_one_at_a_time, next) = match dated {
            Ok(dated) => dated,
            Err(e) => {
                tracing::warn!("cannot make robots.txt again (the one served stays): {e}");
                return;
            }
        };
        let mut robots = self.robots.write().unwrap_or_else(|e| e.into_inner());
        if robots.bytes != next.bytes {
            *robots = Arc::new(next);
        }
    }

    /// The room on the state directory's file system (free, size, what a spill leaves), for
    /// the status page and the metrics; `None` when it cannot be had. statvfs(2) can block (a
    /// network file system that does not answer), so it is asked on a blocking thread.
    pub(crate) async fn state_dir_room(&self) -> Option<crate::spill::Room> {
        let dir = self.server.state_dir.clone();
        (tokio::task::spawn_blocking(move || crate::spill::Room::of(&dir).ok()).await)
            .ok()
            .flatten()
    }

    /// Drops the cached bytes of the generation with `serial`, once it is replaced: no request
    /// asks for them again, and left in place they would crowd out the current generation's
    /// files until the cache is full, growing memory by `cache_bytes` for nothing.
    pub fn forget(&self, serial: u64) {
        // Entries a request still holding the old generation fills later are dropped as they
        // are filled (`http::cached`).
        if let Err(e) = self
            .cache
            .invalidate_entries_if(move |key, _| key.0 == serial)
        {
            tracing::warn!("cannot drop a replaced generation's cache entries: {e}");
        }
    }

    /// The generation serial of every entry in the cache, once its pending work is done: what
    /// a swap leaves there.
    pub async fn cached_serials(&self) -> Vec<u64> {
        self.cache.run_pending_tasks().await;
        self.cache.iter().map(|(k, _)| k.0).collect()
    }

    /// No repository keeps `/readyz` at 503 ([`Gateway::waiting`]).
    pub fn ready(&self) -> bool {
        self.waiting().is_empty()
    }

    /// The repositories that keep `/readyz` at 503: those configured at start that have no
    /// generation and whose first refresh has not ended yet (see [`Repo::gates_readiness`]).
    pub fn waiting(&self) -> Vec<String> {
        (self.live().repos.iter())
            .filter(|r| r.gates_readiness && !r.serving() && r.status().completed == 0)
            .map(|r| r.name.clone())
            .collect()
    }

    /// The gateway is stopping (every schedule stops for good), as opposed to a reload stopping
    /// the schedules of the repositories it removed.
    pub(crate) fn stopping(&self) -> bool {
        (self.schedules.lock().unwrap_or_else(|e| e.into_inner())).stopped
    }

    /// How many refreshes run, and wait for a slot.
    pub fn refresh_slots(&self) -> slots::SlotCounts {
        self.slots.counts()
    }

    /// Starts the schedules of `repos` (all those of the start, or those a reload added), the
    /// first refresh of the `i`-th of `n` not before `i / n` of the spread window
    /// (`start_spread_secs`): evenly over it, not all at once.
    fn start_schedules(self: &Arc<Self>, repos: Vec<Arc<Repo>>) {
        let spread = self.live().fleet.start_spread;
        let n = repos.len().max(1) as u32;
        for (i, repo) in (0u32..).zip(repos) {
            self.start_schedule(repo, spread * i / n);
        }
    }

    /// Starts `repo`'s refresh schedule, its first refresh not before `first_after` from now,
    /// unless the gateway is stopping.
    fn start_schedule(self: &Arc<Self>, repo: Arc<Repo>, first_after: Duration) {
        let mut schedules = self.schedules.lock().unwrap_or_else(|e| e.into_inner());
        if schedules.stopped {
            return;
        }
        let (stop, stopped) = watch::channel(false);
        let name = repo.name.clone();
        let task = tokio::spawn(refresh::schedule(
            Arc::clone(self),
            repo,
            stopped,
            first_after,
        ));
        if let Some(old) = schedules.running.insert(name, Schedule { stop, task }) {
            // Never so: a schedule is stopped before its repository is opened again.
            let _ = old.stop.send(true);
        }
    }

    /// Stops the schedules of `names` (of every repository, for good, when `None`) and waits
    /// until they have ended: a running refresh is abandoned and leaves nothing behind.
    async fn stop_schedules(&self, names: Option<&[String]>) {
        let stopping: Vec<Schedule> = {
            let mut schedules = self.schedules.lock().unwrap_or_else(|e| e.into_inner());
            match names {
                Some(names) => (names.iter())
                    .filter_map(|n| schedules.running.remove(n))
                    .collect(),
                None => {
                    schedules.stopped = true;
                    schedules.running.drain().map(|(_, s)| s).collect()
                }
            }
        };
        for s in &stopping {
            let _ = s.stop.send(true);
        }
        for s in stopping {
            let _ = s.task.await;
        }
    }
}

/// `base` + `name/`: the directory of a repository under the gateway's public URL.
fn join_dir(base: &Url, name: &str) -> Url {
    let mut url = base.clone();
    let path = format!("{}{name}/", url.path());
    url.set_path(&path);
    url
}

/// The gateway's listeners, bound before it starts (tests bind `127.0.0.1:0`).
#[derive(Debug)]
pub struct Listeners {
    /// What crawlers and the reverse proxy reach: robots.txt, the repositories' files,
    /// `/healthz`, `/readyz`.
    pub public: TcpListener,
    /// What operators and monitoring reach (`[server] admin_listen`): the status page,
    /// `/metrics`, the admin endpoints, `/healthz`, `/readyz`; `None` when switched off.
    pub admin: Option<TcpListener>,
}

/// Which listener a request came in on: it decides which routes exist ([`http::handle`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    /// `[server] listen`.
    Public,
    /// `[server] admin_listen`.
    Admin,
}

/// Connections the admin listener serves at once, apart from the public listener's: a flood of
/// crawler connections never locks an operator out of the status page and the metrics.
const MAX_ADMIN_CONNECTIONS: usize = 64;

/// A running gateway: refresh schedules started, requests answered on both listeners until
/// `shutdown` completes; then it stops accepting, gives in-flight requests `drain_timeout` to
/// finish, and stops the refreshes (an interrupted refresh leaves nothing behind).
pub async fn serve(
    gateway: Arc<Gateway>,
    listeners: Listeners,
    drain_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) {
    gateway.start_schedules(gateway.repos());
    let follower =
        (gateway.fleet.is_some()).then(|| tokio::spawn(refresh::follow(Arc::clone(&gateway))));
    let pinger = gateway.indexnow.start(&gateway);

    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(gateway.client_timeout)
        .max_buf_size(MAX_HEAD_BYTES.max(8192));
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(MAX_HEAD_BYTES as u32)
        .max_concurrent_streams(128)
        .keep_alive_interval(Some(H2_PING_INTERVAL));
    let graceful = GracefulShutdown::new();
    let Listeners { public, admin } = listeners;
    {
        let server = Server {
            gateway: &gateway,
            builder: &builder,
            graceful: &graceful,
        };
        let public = server.accept(public, Side::Public, MAX_CONNECTIONS);
        let admin = async {
            match admin {
                Some(admin) => {
                    server
                        .accept(admin, Side::Admin, MAX_ADMIN_CONNECTIONS)
                        .await
                }
                None => std::future::pending().await,
            }
        };
        // The accept loops end only with the shutdown; dropping them closes the listeners.
        tokio::select! {
            () = shutdown => {}
            () = public => {}
            () = admin => {}
        }
    }
    tracing::info!("shutting down: no new connections; draining in-flight requests");
    if let Some(follower) = follower {
        follower.abort();
    }
    // Refreshes stop at once (each leaves nothing behind), while requests drain.
    let (drained, ()) = tokio::join!(
        tokio::time::timeout(drain_timeout, graceful.shutdown()),
        gateway.stop_schedules(None),
    );
    if drained.is_err() {
        tracing::warn!(
            "requests still in flight after the drain timeout of {drain_timeout:?}; closing them"
        );
    }
    if let Some(pinger) = pinger {
        pinger.stop().await;
    }
    tracing::info!("stopped");
}

/// What the accept loops of both listeners share.
struct Server<'a> {
    gateway: &'a Arc<Gateway>,
    builder: &'a auto::Builder<TokioExecutor>,
    graceful: &'a GracefulShutdown,
}

impl Server<'_> {
    /// Accepts connections on `listener`, at most `limit` served at once (more wait in the
    /// listen backlog), each answered as `side`'s; runs until dropped.
    async fn accept(&self, listener: TcpListener, side: Side, limit: usize) {
        let connections = Arc::new(tokio::sync::Semaphore::new(limit));
        loop {
            let Ok(permit) = Arc::clone(&connections).acquire_owned().await else {
                return;
            };
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let connection = sendfile::Connection::new(stream, self.gateway.bodies.clone());
            let gateway = Arc::clone(self.gateway);
            let service = hyper::service::service_fn(move |req| {
                let gateway = Arc::clone(&gateway);
                async move { Ok::<_, std::convert::Infallible>(http::handle(&gateway, side, req).await) }
            });
            let conn = self
                .builder
                .serve_connection(TokioIo::new(connection), service)
                .into_owned();
            let conn = self.graceful.watch(conn);
            tokio::spawn(async move {
                if let Err(e) = conn.await {
                    tracing::debug!("connection ended: {e}");
                }
                drop(permit);
            });
        }
    }
}

/// File in the state directory holding the hash of robots.txt and when that text was first
/// served, in seconds since the Unix epoch: `{hash} {seconds}`.
const ROBOTS_MODIFIED: &str = "robots.txt.modified";

/// robots.txt for `repos`, last modified when this text was first served, in this process or an
/// earlier one (H-04: a restart or a refresh that gives the same bytes does not move it).
/// Blocking (it reads and writes a file): at the start, or on a blocking thread
/// ([`Gateway::announce`]).
fn robots_file(repos: &[Arc<Repo>], state_dir: &std::path::Path) -> http::StaticFile {
    dated_robots(Bytes::from(robots_txt(repos)), state_dir)
}

/// robots.txt of `bytes`, last modified when this text was first served, as recorded in
/// `state_dir` (recorded now if it was not). Blocking.
fn dated_robots(bytes: Bytes, state_dir: &std::path::Path) -> http::StaticFile {
    let hash = generation::content_hash(&bytes);
    let path = state_dir.join(ROBOTS_MODIFIED);
    let kept = std::fs::read_to_string(&path).ok().and_then(|text| {
        let (h, secs) = text.trim().split_once(' ')?;
        (h == hash).then(|| secs.parse::<u64>().ok()).flatten()
    });
    let secs = kept.unwrap_or_else(|| {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        // Replaced by a rename of a synced file, so a crash leaves the old record or the new
        // one. Made one at a time (`Gateway::announcing`), so one temporary name does.
        let tmp = state_dir.join(format!("{ROBOTS_MODIFIED}.tmp"));
        let written = std::fs::File::create(&tmp)
            .and_then(|mut f| {
                std::io::Write::write_all(&mut f, format!("{hash} {now}\n").as_bytes())?;
                f.sync_all()
            })
            .and_then(|()| std::fs::rename(&tmp, &path));
        if let Err(e) = written {
            tracing::warn!(
                path = %path.display(),
                "cannot record when robots.txt changed (a restart will date it anew): {e}"
            );
        }
        now
    });
    http::StaticFile::new(bytes, SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
}

/// robots.txt for `repos` ([`Repo::announced`]).
fn robots_txt(repos: &[Arc<Repo>]) -> String {
    let announced: Vec<_> = repos.iter().map(|r| r.announced()).collect();
    crate::render::robots::render_robots(&announced)
}
