//! Prometheus metrics (`/metrics`, OpenMetrics text), with conventional names: a `oai_bridge_`
//! prefix, `_total` on counters, base units (seconds, bytes) in the name.
//!
//! The series labelled by repository are bounded (`[server] metrics_repository_series`): the
//! first repositories of the configuration have series of their own, and the others are summed
//! under `repository="_other"`, so that a fleet of ten thousand repositories costs a scrape of a
//! few thousand lines while every total stays right. Counters and histograms are counted under
//! `_other` as they happen; the gauges of the aggregated repositories are computed from their
//! state as the scrape comes (`scrape.rs`), since a gauge cannot be summed as it is set.

use std::collections::HashSet;
use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, RwLock};
use std::time::{Duration, SystemTime};

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// The `repository` label of the series summed over the repositories beyond
/// `[server] metrics_repository_series` (a name no repository may take).
pub(crate) const OTHER: &str = "_other";

/// Upper bounds of the refresh duration histogram's buckets, in seconds: a small repository
/// refreshes in a tenth of a second, a large one behind a slow upstream in hours.
const REFRESH_BUCKETS: [f64; 17] = [
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0,
    7200.0, 14400.0,
];

/// The refresh duration histogram's constructor.
type RefreshHistogram = fn() -> Histogram;

/// A refresh duration histogram.
fn refresh_histogram() -> Histogram {
    Histogram::new(REFRESH_BUCKETS)
}

/// What a request asked for, as a bounded label (never the raw path).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Route {
    /// `/`, the status page.
    Status,
    /// `/robots.txt`.
    Robots,
    /// `/{repo}/sitemap.xml`.
    Index,
    /// `/{repo}/sitemap-{n}.xml` or `.xml.gz` (and the other profiles' shards).
    Shard,
    /// `/{repo}/cdif/{key}.jsonld`.
    Document,
    /// `/{repo}/linkset?url=`, a landing page's linkset.
    Linkset,
    /// `/{repo}/signposting`, a landing page's `Link` header for a reverse proxy.
    Signposting,
    /// ResourceSync: `/.well-known/resourcesync`, a repository's Capability List, Resource
    /// Lists and Change Lists.
    ResourceSync,
    /// `/healthz`.
    Healthz,
    /// `/readyz`.
    Readyz,
    /// `/metrics`.
    Metrics,
    /// `POST /-/refresh/{repo}`, the admin endpoint.
    Admin,
    /// `/{key}.txt`, a repository's IndexNow key file.
    KeyFile,
    /// Anything else.
    Other,
}

impl Route {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Route::Status => "status",
            Route::Robots => "robots",
            Route::Index => "index",
            Route::Shard => "shard",
            Route::Document => "document",
            Route::Linkset => "linkset",
            Route::Signposting => "signposting",
            Route::ResourceSync => "resourcesync",
            Route::Healthz => "healthz",
            Route::Readyz => "readyz",
            Route::Metrics => "metrics",
            Route::Admin => "admin",
            Route::KeyFile => "indexnow_key",
            Route::Other => "other",
        }
    }
}

impl EncodeLabelValue for Route {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&self.as_str(), encoder)
    }
}

/// Labels of `oai_bridge_http_requests_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// The route.
    pub route: Route,
    /// The response status.
    pub status: u16,
}

/// Labels of the byte counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    /// The route.
    pub route: Route,
}

/// Labels of per-repository metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RepoLabels {
    /// `[[repository]] name`.
    pub repository: String,
}

/// Labels of the harvest counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HarvestLabels {
    /// `[[repository]] name`.
    pub repository: String,
    /// `success` or `failure`.
    pub outcome: &'static str,
}

/// Labels of the reload counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// `success` or `failure`.
    pub outcome: &'static str,
}

/// Labels of a harvest kind.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    /// `[[repository]] name`.
    pub repository: String,
    /// `full` or `incremental`.
    pub kind: &'static str,
}

/// Labels of the drop gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DropLabels {
    /// `[[repository]] name`.
    pub repository: String,
    /// Why identifiers were not published (`Drop::as_str`).
    pub reason: String,
}

/// Labels of `oai_bridge_build_info`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct BuildLabels {
    /// The crate's version (`oai-bridge --version`).
    pub(crate) version: &'static str,
}

/// What an upstream answered a request with: its HTTP status code, or `none` when no answer
/// came (the connection failed or timed out before the status line).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub(crate) struct UpstreamStatus(pub(crate) Option<u16>);

impl EncodeLabelValue for UpstreamStatus {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
        match self.0 {
            Some(code) => EncodeLabelValue::encode(&code, encoder),
            None => EncodeLabelValue::encode(&"none", encoder),
        }
    }
}

/// Labels of `oai_bridge_upstream_requests_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct UpstreamLabels {
    /// `[[repository]] name`.
    pub(crate) repository: String,
    /// The answer's status code, or `none`.
    pub(crate) status: UpstreamStatus,
}

/// Labels of `oai_bridge_refresh_phase_duration_seconds`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct PhaseLabels {
    /// `[[repository]] name`.
    pub(crate) repository: String,
    /// `harvest` or `render`.
    pub(crate) phase: &'static str,
}

/// Labels of `oai_bridge_served_bytes_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ServedLabels {
    /// `[[repository]] name`.
    pub(crate) repository: String,
    /// The answer's `Content-Encoding`: `gzip` or `identity`.
    pub(crate) encoding: &'static str,
}

/// Labels of `oai_bridge_signposting_answers_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct SignpostingLabels {
    /// `[[repository]] name`.
    pub(crate) repository: String,
    /// `linkset` (Level 2) or `header` (Level 1).
    pub(crate) answer: &'static str,
    /// `found`, or `unknown` for a page the generation does not list.
    pub(crate) page: &'static str,
}

/// Declares [`Metrics`] and its constructor from one list, so that a metric is written once:
/// its field (the family's first type parameter is its labels), its name (without the
/// `oai_bridge_` prefix and the `_total` the encoder adds to counters) and its help. The
/// families are registered in the list's order, which is the order `/metrics` shows them in. A
/// metric given `, init` after its help is made by that expression, the others by `Default`.
macro_rules! metrics {
    (@init) => {
        Default::default()
    };
    (@init $init:expr) => {
        $init
    };
    (
        $(
            $(#[$doc:meta])*
            $vis:vis $field:ident: $ty:ty => $name:literal, $help:literal $(, $init:expr)?;
        )*
    ) => {
        /// Every metric the gateway keeps.
        #[derive(Debug)]
        pub struct Metrics {
            /// The families kept between scrapes.
            pub(crate) registry: Registry,
            $(
                $(#[$doc])*
                $vis $field: $ty,
            )*
            /// How many repositories have series of their own
            /// (`[server] metrics_repository_series`).
            bound: usize,
            /// The repositories that have series of their own; the others count under [`OTHER`].
            own: RwLock<HashSet<String>>,
            /// The label sets of the `_other` gauges the last scrape set, so that the next
            /// removes the ones that no aggregated repository has any more (a profile switched
            /// off).
            pub(crate) other_series: Mutex<OtherSeries>,
        }

        impl Metrics {
            /// The metrics of a gateway where at most `bound` repositories have series of
            /// their own.
            pub fn new(bound: usize) -> Self {
                let mut registry = Registry::with_prefix("oai_bridge");
                $(
                    let $field: $ty = metrics!(@init $($init)?);
                    registry.register($name, $help, $field.clone());
                )*
                let metrics = Self {
                    registry,
                    $($field,)*
                    bound,
                    own: RwLock::default(),
                    other_series: Mutex::default(),
                };
                metrics
                    .build_info
                    .get_or_create(&BuildLabels {
                        version: env!("CARGO_PKG_VERSION"),
                    })
                    .set(1);
                metrics
            }
        }
    };
}

metrics! {
    /// Requests by route and status.
    pub requests: Family<RequestLabels, Counter> =>
        "http_requests", "HTTP requests answered, by route and status";
    /// Body bytes sent, by route.
    pub bytes: Family<RouteLabels, Counter> =>
        "http_response_body_bytes", "Response body bytes sent, by route";
    /// Refreshes by repository and outcome.
    pub harvests: Family<HarvestLabels, Counter> =>
        "harvests", "Refreshes from the upstream, by repository and outcome";
    /// Distinct records in the generation being served.
    pub records: Family<RepoLabels, Gauge> =>
        "records", "Distinct records in the generation being served";
    /// URLs published in the generation being served.
    pub urls: Family<RepoLabels, Gauge> =>
        "urls_published", "URLs in the sitemaps being served";
    /// Identifiers not published, by reason, in the generation being served.
    pub dropped: Family<DropLabels, Gauge> =>
        "identifiers_dropped",
        "dc:identifier values not published in the generation being served, by reason";
    /// Unix time of the last successful refresh.
    pub last_success: Family<RepoLabels, Gauge> =>
        "last_success_timestamp_seconds", "Unix time of the last successful refresh";
    /// Build time of the last successful refresh: harvest and render, without the set-up before
    /// and the commit and swap after (`refresh_duration` counts those).
    pub last_duration: Family<RepoLabels, Gauge<f64, AtomicU64>> =>
        "last_harvest_duration_seconds",
        "Seconds the last successful refresh took to harvest and render (not its set-up, commit and swap)";
    /// 1 while the last refresh failed and an older generation is served.
    pub stale: Family<RepoLabels, Gauge> =>
        "serving_stale", "1 when the last refresh failed and an older generation is served";
    /// 1 while the repository has a generation to serve.
    pub serving: Family<RepoLabels, Gauge> =>
        "serving", "1 when the repository has a generation to serve";
    /// 1 while the shrink guard holds a publish back.
    pub shrink_held: Family<RepoLabels, Gauge> =>
        "shrink_held",
        "1 while a harvest that would remove more than shrink_guard of the published URLs is held back";
    /// 1 while the last full harvest's list ended far short of its announced size.
    pub short_list: Family<RepoLabels, Gauge> =>
        "short_list",
        "1 while the last full harvest's list ended far short of the completeListSize it \
         announced: nothing was removed, and the next refresh harvests in full";
    /// Records the last refresh asked the upstream for (all of them for a full harvest).
    pub harvested_records: Family<KindLabels, Gauge> =>
        "last_harvest_records",
        "Records received by the last complete harvest, by kind (full or incremental)";
    /// Upstream requests retried.
    pub upstream_retries: Family<RepoLabels, Counter> =>
        "upstream_retries", "Upstream requests retried after a failure";
    /// Waits imposed by an upstream's `Retry-After`.
    pub retry_after_waits: Family<RepoLabels, Counter> =>
        "upstream_retry_after_waits", "Waits imposed by an upstream's Retry-After header";
    /// IndexNow requests sent, by the status of their answer (`none`: no answer).
    pub(crate) indexnow_requests: Family<UpstreamLabels, Counter> =>
        "indexnow_requests",
        "IndexNow requests sent, by repository and the status of the engine's answer \
         (none: no answer); 429 and 5xx are tried again, other refusals stop the pings";
    /// Landing pages an IndexNow engine acknowledged (200 or 202).
    pub(crate) indexnow_urls: Family<RepoLabels, Counter> =>
        "indexnow_urls_sent",
        "Changed landing pages an IndexNow engine acknowledged (200 or 202), by repository";
    /// Upstream requests sent, by the status of their answer.
    pub(crate) upstream_requests: Family<UpstreamLabels, Counter> =>
        "upstream_requests",
        "Requests sent to the upstream, retries included, by the status code of the answer \
         (none: no answer)";
    /// Wall time of refreshes, by repository and outcome.
    pub(crate) refresh_duration: Family<HarvestLabels, Histogram, RefreshHistogram> =>
        "refresh_duration_seconds",
        "Wall time of refreshes (harvest and render), by repository and outcome",
        Family::new_with_constructor(refresh_histogram);
    /// Wall time of the harvest and the render of refreshes, by repository.
    pub(crate) refresh_phase: Family<PhaseLabels, Histogram, RefreshHistogram> =>
        "refresh_phase_duration_seconds",
        "Wall time of the phases of refreshes, by repository: harvest (to the end of the \
         list) and render (from there to the new generation written)",
        Family::new_with_constructor(refresh_histogram);
    /// Body bytes of repositories' files and documents sent, by repository and encoding.
    pub(crate) served_bytes: Family<ServedLabels, Counter> =>
        "served_bytes",
        "Response body bytes of repositories' files and documents sent, by repository and \
         Content-Encoding";
    /// Signposting answers, by repository, kind and whether the page was listed.
    pub(crate) signposting_answers: Family<SignpostingLabels, Counter> =>
        "signposting_answers",
        "Signposting requests answered, by repository, answer (linkset: Level 2; header: \
         Level 1) and page (found, or unknown: a page the served generation does not list)";
    /// 1, labelled with the version of the running build (set once, by [`Metrics::new`]).
    build_info: Family<BuildLabels, Gauge> =>
        "build_info", "1, labelled with the version of the running build";
    /// Files read from the state directory into the cache (misses; concurrent misses read once).
    pub cache_fills: Counter =>
        "cache_fills", "Files read from the state directory into the byte cache";
    /// Entries of each profile beyond the sitemap (e.g. the Signmap) being served.
    pub profile_entries: Family<ProfileLabels, Gauge> =>
        "profile_entries",
        "Entries in the files of each profile beyond the sitemap, in the generation being served";
    /// Records a profile did not publish, by reason.
    pub profile_dropped: Family<ProfileDropLabels, Gauge> =>
        "profile_records_dropped",
        "Records a profile did not publish, by reason, in the generation being served";
    /// The platform whose landing rule the served generation was made with (1), by repository.
    pub platform: Family<PlatformLabels, Gauge> =>
        "platform",
        "The platform whose landing rule made the generation being served (1; the others 0)";
    /// Reloads of the configuration, by outcome.
    pub config_reloads: Family<OutcomeLabels, Counter> =>
        "config_reloads", "Reloads of the configuration (SIGHUP, POST /-/reload), by outcome";
    /// 1 while the last reload failed (the running configuration stays), 0 after a good one.
    pub config_reload_failed: Gauge =>
        "config_reload_failed",
        "1 while the last reload of the configuration failed and the running one stays; 0 after a good one";
    /// Repositories summed under `repository="_other"`.
    pub(crate) aggregated: Gauge =>
        "repositories_aggregated",
        "Repositories beyond metrics_repository_series: their series are summed under \
         repository=\"_other\"";
}

/// The `_other` series with a label besides the repository's, as the last scrape set them.
#[derive(Debug, Default)]
pub(crate) struct OtherSeries {
    /// Of `oai_bridge_platform`.
    pub(crate) platform: Vec<PlatformLabels>,
    /// Of `oai_bridge_profile_entries`.
    pub(crate) profile_entries: Vec<ProfileLabels>,
    /// Of `oai_bridge_profile_records_dropped`.
    pub(crate) profile_dropped: Vec<ProfileDropLabels>,
}

/// Labels of the platform gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PlatformLabels {
    /// `[[repository]] name`.
    pub repository: String,
    /// The platform's name ([`crate::platform::Platform::as_str`]).
    pub platform: String,
}

/// Labels of the per-profile entry gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProfileLabels {
    /// `[[repository]] name`.
    pub repository: String,
    /// `signmap`, `diwoo-infocat014`, ...
    pub profile: String,
}

/// Labels of the per-profile drop gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProfileDropLabels {
    /// `[[repository]] name`.
    pub repository: String,
    /// `signmap`, `diwoo-infocat014`, ...
    pub profile: String,
    /// Why records or URLs were not published (`no_landing_page`, `diwoo_requires_https`, ...).
    pub reason: &'static str,
}

impl Metrics {
    /// Gives each repository of `added`, in configuration order, series of its own while fewer
    /// than the bound have them, counting only those still `configured` (the ones a reload
    /// removes free their places for the repositories it adds). A repository keeps its series
    /// as long as it is configured, so that its counters never move to `_other` and back.
    pub(crate) fn admit<'a>(&self, configured: &[&str], added: impl Iterator<Item = &'a str>) {
        let mut own = self.own.write().unwrap_or_else(|e| e.into_inner());
        let configured: HashSet<&str> = configured.iter().copied().collect();
        let mut kept = own
            .iter()
            .filter(|n| configured.contains(n.as_str()))
            .count();
        for name in added {
            if kept >= self.bound {
                break;
            }
            if own.insert(name.to_owned()) {
                kept += 1;
            }
        }
    }

    /// Whether `repository` has series of its own.
    pub(crate) fn own(&self, repository: &str) -> bool {
        (self.own.read().unwrap_or_else(|e| e.into_inner())).contains(repository)
    }

    /// The `repository` label that counts `repository`: its name, or [`OTHER`].
    pub(crate) fn label(&self, repository: &str) -> String {
        if self.own(repository) {
            repository.to_owned()
        } else {
            OTHER.to_owned()
        }
    }

    /// Counts one answered request.
    pub fn request(&self, route: Route, status: u16, body_bytes: u64) {
        self.requests
            .get_or_create(&RequestLabels { route, status })
            .inc();
        if body_bytes > 0 {
            self.bytes
                .get_or_create(&RouteLabels { route })
                .inc_by(body_bytes);
        }
    }

    /// Counts one reload of the configuration.
    pub fn reloads(&self, outcome: &'static str) {
        self.config_reloads
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// Counts the `bytes` of a successful answer with a file or document of `repository`;
    /// `gzip`: it was sent with `Content-Encoding: gzip`.
    pub(crate) fn served(&self, repository: &str, gzip: bool, bytes: u64) {
        let labels = ServedLabels {
            repository: self.label(repository),
            encoding: if gzip { "gzip" } else { "identity" },
        };
        self.served_bytes.get_or_create(&labels).inc_by(bytes);
    }

    /// Counts a Signposting answer for `repository`: `answer` is `linkset` or `header`;
    /// `found`: the page is listed.
    pub(crate) fn signposting(&self, repository: &str, answer: &'static str, found: bool) {
        let labels = SignpostingLabels {
            repository: self.label(repository),
            answer,
            page: if found { "found" } else { "unknown" },
        };
        self.signposting_answers.get_or_create(&labels).inc();
    }

    /// Records a refresh of `repository` that `started` and has just ended with `outcome`.
    pub(crate) fn refreshed(&self, repository: &str, outcome: &'static str, started: SystemTime) {
        let labels = HarvestLabels {
            repository: self.label(repository),
            outcome,
        };
        let seconds = started.elapsed().unwrap_or_default().as_secs_f64();
        self.refresh_duration
            .get_or_create(&labels)
            .observe(seconds);
    }

    /// Records the phases a refresh of `repository` completed: its `harvest` (the list read to
    /// its end) and its `render` (the generation written), each when it got that far.
    pub(crate) fn phases(
        &self,
        repository: &str,
        harvest: Option<Duration>,
        render: Option<Duration>,
    ) {
        for (phase, took) in [("harvest", harvest), ("render", render)] {
            if let Some(took) = took {
                let labels = PhaseLabels {
                    repository: self.label(repository),
                    phase,
                };
                let histogram = self.refresh_phase.get_or_create(&labels);
                histogram.observe(took.as_secs_f64());
            }
        }
    }

    /// Adds the `requests` one refresh of `repository` sent upstream, of which `statuses` were
    /// answered with each status code; the rest had no answer.
    pub(crate) fn upstream(&self, repository: &str, requests: u64, statuses: &[(u16, u64)]) {
        let repository = self.label(repository);
        let count = |status: Option<u16>, n: u64| {
            let labels = UpstreamLabels {
                repository: repository.clone(),
                status: UpstreamStatus(status),
            };
            self.upstream_requests.get_or_create(&labels).inc_by(n);
        };
        let mut answered = 0;
        for &(code, n) in statuses {
            count(Some(code), n);
            answered += n;
        }
        // Present from the first refresh on, so a rate over it is 0 rather than absent.
        count(None, requests.saturating_sub(answered));
    }

    /// Drops the series of `repository` that this module sets, when a reload removes it, and
    /// its place among those with series of their own. One summed under `_other` has none to
    /// drop: its counts stay in the sums, as counters never go down.
    pub(crate) fn forget(&self, repository: &str) {
        if !(self.own.write().unwrap_or_else(|e| e.into_inner())).remove(repository) {
            return;
        }
        let repository = || repository.to_owned();
        for outcome in ["success", "failure"] {
            self.refresh_duration.remove(&HarvestLabels {
                repository: repository(),
                outcome,
            });
        }
        for phase in ["harvest", "render"] {
            self.refresh_phase.remove(&PhaseLabels {
                repository: repository(),
                phase,
            });
        }
        for encoding in ["gzip", "identity"] {
            self.served_bytes.remove(&ServedLabels {
                repository: repository(),
                encoding,
            });
        }
        for answer in ["linkset", "header"] {
            for page in ["found", "unknown"] {
                self.signposting_answers.remove(&SignpostingLabels {
                    repository: repository(),
                    answer,
                    page,
                });
            }
        }
        // A family cannot be walked: every status code an answer can have (reqwest's
        // `StatusCode` holds 100..=999), and none. Rare (a reload), and quick.
        for status in (100..1000).map(Some).chain([None]) {
            let labels = UpstreamLabels {
                repository: repository(),
                status: UpstreamStatus(status),
            };
            self.upstream_requests.remove(&labels);
            self.indexnow_requests.remove(&labels);
        }
        self.indexnow_urls.remove(&RepoLabels {
            repository: repository(),
        });
    }
}

/// Labels for one repository.
pub(crate) fn repo(name: &str) -> RepoLabels {
    RepoLabels {
        repository: name.to_owned(),
    }
}
