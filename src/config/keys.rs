//! Every setting, declared once: its TOML name and type, what it takes (said in errors), the
//! environment variable and the flags that override it, and its doc line. From these tables
//! come the raw serde sections of `bridge.toml`, the overrides the environment and the flags
//! give ([`ServerOverrides`], ...), the reading of the environment ([`Environment`]), the
//! provenance of each value ([`Origin`]) and the list of keys the reference tests hold
//! `bridge.toml` and `docs/configuration.md` to ([`SECTIONS`]).
//!
//! A key is written once, in the `section!` table of its section (the macro and the types it
//! makes are `declare.rs`'s); what it means once read
//! (its check and where it lands in the validated [`Config`](super::Config)) is its `apply`
//! function, written beside its declaration and used for the file and the overrides alike.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use url::Url;

use super::declare::FlagValue;
#[cfg(test)]
pub(crate) use super::declare::Kind;
pub(crate) use super::declare::{At, CommandName, Environment, Given, Key, Origin};
use super::{ConfigError, HarvestTarget, RepositorySettings};

/// How a variable is read. An address or URL that is not Unicode is read with replacement
/// characters, so that it is an error naming its variable.
fn lossy(value: &OsString) -> Option<String> {
    Some(value.to_string_lossy().into_owned())
}

/// An address or URL; empty is unset.
fn lossy_or_unset(value: &OsString) -> Option<String> {
    lossy(value).filter(|v| !v.is_empty())
}

/// A secret that is not Unicode is unset (it is never shown, so it could not be told apart).
fn text(value: &OsString) -> Option<String> {
    value.clone().into_string().ok()
}

/// Text that is not Unicode, or blank, is unset.
fn text_or_unset(value: &OsString) -> Option<String> {
    text(value).filter(|v| !v.trim().is_empty())
}

/// A path, as the operating system gives it.
fn path(value: &OsString) -> Option<PathBuf> {
    Some(PathBuf::from(value))
}

section! {
    /// `[server]`: the gateway's listeners, state folder, cache and limits.
    "[server]" => RawServer, ServerOverrides, SERVER, ServerConfig
        = #[derive(Clone, Debug)] struct ServerConfig(at) {
        /// Address of the public listener (robots.txt, the repositories' files, `/healthz`,
        /// `/readyz`).
        listen: String {
            takes: "an address:port in quotes, e.g. \"127.0.0.1:8080\"",
            env: LISTEN = "OAI_BRIDGE_LISTEN" via lossy for [Serve],
            flags: [
                Serve "--listen" "ADDR:PORT": "Address to listen on, e.g. 0.0.0.0:8080 (port 0 \
                    picks a free port); overrides OAI_BRIDGE_LISTEN and `[server] listen`."
            ],
            field: listen: SocketAddr =
                super::parse_listen(super::DEFAULT_LISTEN).expect("an address"); restart,
            apply: |s, v, _| set(&mut s.listen, super::parse_listen(&v)?),
        }
        /// Address of the admin listener (the status page, `/metrics`, the admin endpoints);
        /// `None` (`"off"` or `""`): no admin listener.
        admin_listen: String {
            takes: "an address:port in quotes, e.g. \"127.0.0.1:8081\", or \"off\"",
            env: ADMIN_LISTEN = "OAI_BRIDGE_ADMIN_LISTEN" via lossy for [Serve],
            flags: [
                Serve "--admin-listen" "ADDR:PORT": "Address of the admin listener (status page, \
                    /metrics, admin endpoints), e.g. 127.0.0.1:8081, or \"off\"; overrides \
                    OAI_BRIDGE_ADMIN_LISTEN and `[server] admin_listen`."
            ],
            field: admin_listen: Option<SocketAddr> =
                super::parse_admin_listen(super::DEFAULT_ADMIN_LISTEN).expect("an address");
                restart,
            apply: |s, v, _| set(&mut s.admin_listen, super::parse_admin_listen(&v)?),
        }
        /// Public URL of the gateway (may include a path prefix).
        public_url: String {
            takes: "a URL in quotes, e.g. \"https://repository.example.edu/sitemaps/\"",
            env: PUBLIC_URL = "OAI_BRIDGE_PUBLIC_URL" via lossy for [Serve],
            flags: [
                Serve "--public-url" "PUBLIC_URL": "Public URL of the gateway, as crawlers reach \
                    it; overrides OAI_BRIDGE_PUBLIC_URL and `[server] public_url`."
            ],
            field: public_url: Option<Url> = None; restart,
            apply: |s, v, _| set(&mut s.public_url, Some(super::directory_url(&v)?)),
        }
        /// Where generations and stores are kept; an override's is taken from the working
        /// directory (the file's from its folder).
        state_dir: PathBuf {
            takes: "a folder in quotes",
            env: STATE_DIR = "OAI_BRIDGE_STATE_DIR" via path for [Serve, Prune, Migrate],
            flags: [
                Serve "--state-dir" "STATE_DIR": "Where generations are kept; overrides \
                    OAI_BRIDGE_STATE_DIR and `[server] state_dir`.",
                Prune "--state-dir" "STATE_DIR": "The state directory to prune; overrides \
                    OAI_BRIDGE_STATE_DIR and `[server] state_dir`.",
                Migrate "--state" "DIR" visible_alias("state-dir"): "The state folder to copy: a \
                    gateway's state directory ({DIR}/{name}/store.sqlite, each the store of \
                    repository {name}) or an export's --state folder ({DIR}/store.sqlite); \
                    overrides OAI_BRIDGE_STATE_DIR and `[server] state_dir`."
            ],
            field: state_dir: PathBuf = at.base_dir.join(super::DEFAULT_STATE_DIR); restart,
            apply: |s, v, at| set(&mut s.state_dir, at.base_dir.join(v)),
        }
        /// Bytes of file content the gateway keeps in memory.
        cache_bytes: u64 {
            takes: "a number of bytes",
            field: cache_bytes: u64 = super::DEFAULT_CACHE_BYTES; restart,
            apply: |s, v, _| match v {
                ..1_048_576 => Err("must be at least 1048576 (1 MiB)".to_owned()),
                v => set(&mut s.cache_bytes, v),
            },
        }
        /// Time in-flight requests get to finish at shutdown.
        drain_timeout_secs: u64 {
            takes: "a number of seconds",
            field: drain_timeout: Duration = super::DEFAULT_DRAIN_TIMEOUT; restart,
            apply: |s, v, _| set(&mut s.drain_timeout, Duration::from_secs(v)),
        }
        /// Time a client has to send a request head, and that an idle connection is kept open.
        client_timeout_secs: u64 {
            takes: "a number of seconds",
            field: client_timeout: Duration = super::DEFAULT_CLIENT_TIMEOUT; restart,
            apply: |s, v, _| set(&mut s.client_timeout, Duration::from_secs(at_least_one(v)?)),
        }
        /// `Cache-Control: max-age` of sitemap files and robots.txt.
        max_age_secs: u64 {
            takes: "a number of seconds",
            field: max_age: Duration = super::DEFAULT_MAX_AGE; restart,
            apply: |s, v, _| set(&mut s.max_age, Duration::from_secs(v)),
        }
        /// The bearer token of `POST /-/refresh/{name}` and `POST /-/reload`; without one, they
        /// do not exist. Its variable has no flag, so that it stays out of the process list.
        admin_token: String {
            takes: "a token in quotes",
            env: ADMIN_TOKEN = "OAI_BRIDGE_ADMIN_TOKEN" via text for [Serve],
            field: admin_token: Option<super::AdminToken> = None; reloaded,
            apply: |s, v, _| set(&mut s.admin_token, Some(super::AdminToken::new(&v)?)),
        }
        /// A file holding the admin token (a mounted secret), instead of `admin_token`; a
        /// relative path is taken from the configuration's folder.
        admin_token_file: PathBuf {
            takes: "a file in quotes",
            apply: |s, v, at| {
                if s.admin_token.is_some() {
                    return Err("admin_token is given too: give the token in one place".to_owned());
                }
                let token = super::read_secret(&at.base_dir.join(v))?;
                set(&mut s.admin_token, Some(super::AdminToken::new(&token)?))
            },
        }
        /// Object storage each repository's generations are published to, under
        /// `{publish_url}{name}/`, with robots.txt at its root.
        publish_url: String {
            takes: "a URL in quotes, e.g. \"s3://bucket/prefix/\"",
            env: PUBLISH_URL = "OAI_BRIDGE_PUBLISH_URL" via lossy for [Serve],
            flags: [
                Serve "--publish-url" "URL": "Also publish every generation to object storage \
                    (s3://bucket/prefix/, gs://, az://, file://), each repository under its name, \
                    robots.txt at the root; credentials from the environment. Overrides \
                    OAI_BRIDGE_PUBLISH_URL and `[server] publish_url`."
            ],
            field: publish_url: Option<crate::publish::BucketUrl> = None; restart,
            apply: |s, v, _| set(&mut s.publish_url, Some(super::parse_publish_url(&v)?)),
        }
        /// How long a file published to a bucket stays there once no index names it.
        publish_grace_secs: u64 {
            takes: "a number of seconds",
            flags: [
                Export "--publish-grace-secs" "SECS": "Object storage: how long a file no index \
                    names any more stays in the bucket, so that a crawler holding the index \
                    before finds it (default: a day). Overrides the configuration's `[server] \
                    publish_grace_secs`."
            ],
            field: publish_grace: Duration = super::DEFAULT_PUBLISH_GRACE; restart,
            apply: |s, v, _| set(&mut s.publish_grace, Duration::from_secs(v)),
        }
        /// How many repositories, the first of the configuration, have series of their own in
        /// `/metrics`; the others are summed under `repository="_other"`. 0: only the sums.
        metrics_repository_series: usize {
            takes: "a whole number (0 or more)",
            field: metrics_repository_series: usize =
                super::DEFAULT_METRICS_REPOSITORY_SERIES; restart,
            apply: |s, v, _| set(&mut s.metrics_repository_series, v),
        }
        /// Bytes of memory the refreshes running at once hold together in their collectors
        /// before they spill; `None`: `max_concurrent_refreshes` times `[harvest]
        /// memory_budget_bytes` ([`Config::pool_limits`](super::Config::pool_limits)).
        memory_budget_bytes: u64 {
            takes: "a number of bytes",
            field: memory_budget: Option<u64> = None; reloaded,
            apply: |s, v, _| set(&mut s.memory_budget, Some(at_least_one_or_default(v)?)),
        }
        /// Bytes the refreshes' spill files take on disk together at most: a refresh that would
        /// pass it fails, and the generation served stays. `None`: no cap but the file
        /// system's free space, less a reserve.
        spill_max_bytes: u64 {
            takes: "a number of bytes",
            field: spill_max: Option<u64> = None; reloaded,
            apply: |s, v, _| set(&mut s.spill_max, Some(at_least_one_or_default(v)?)),
        }
    }
}

section! {
    /// `[state]`: where the repositories' stores are.
    "[state]" => RawState, StateOverrides, STATE, StateConfig
        = #[derive(Clone, Debug, PartialEq, Eq)] struct StateConfig(at) {
        /// A PostgreSQL database holding every repository's store (a variable keeps its
        /// password out of the process list); `None`: a SQLite file per repository in its
        /// folder under `[server] state_dir`, the default.
        url: String {
            takes: "a URL in quotes, e.g. \"postgres://user@host/database\"",
            env: STATE_URL = "OAI_BRIDGE_STATE_URL" via lossy_or_unset for [Serve, Migrate, Export],
            flags: [
                Serve "--state-url" "URL": "Keep every repository's store in this PostgreSQL \
                    database (postgres://user:password@host:port/database) instead of a SQLite \
                    file in its folder; overrides OAI_BRIDGE_STATE_URL and `[state] url`. The \
                    variable keeps the password out of the process list.",
                Migrate "--state-url" "URL": "The PostgreSQL database to copy into \
                    (postgres://user:password@host:port/database); overrides \
                    OAI_BRIDGE_STATE_URL and `[state] url`. The variable keeps the password out \
                    of the process list.",
                Export "--state-url" "URL": "Keep the repository's state in this PostgreSQL \
                    database (postgres://user:password@host:port/database) instead, under the \
                    repository's name (--repository's, or else the --base-url as given); \
                    overrides OAI_BRIDGE_STATE_URL, which keeps the password out of the process \
                    list."
            ],
            field: url: Option<crate::store::StateUrl> = None; restart,
            apply: |s, v, _| set(&mut s.url, Some(crate::store::StateUrl::parse(&v)?)),
        }
        /// A file holding the database's password (a mounted secret), for a `url` without
        /// one; a relative path is taken from the configuration's folder.
        password_file: PathBuf {
            takes: "a file in quotes",
            env: STATE_PASSWORD_FILE = "OAI_BRIDGE_STATE_PASSWORD_FILE" via path
                for [Serve, Migrate, Export],
            field: password: Option<super::StatePassword> = None; restart,
            apply: |s, v, at| {
                set(&mut s.password, Some(super::StatePassword::read(at.base_dir.join(v))?))
            },
        }
        /// With a database: how long a gateway's claim on a repository's refresh lasts unless it
        /// renews it (it renews it while the refresh runs); a gateway that dies loses it after
        /// this.
        lease_secs: u64 {
            takes: "a number of seconds",
            field: lease: Duration = super::DEFAULT_LEASE; restart,
            apply: |s, v, _| set(&mut s.lease, Duration::from_secs(at_least_one(v)?)),
        }
    }
}

section! {
    /// `[harvest]` (and a repository's `[repository.harvest]`): how upstreams are treated.
    "[harvest]" => RawHarvest, HarvestOverrides, HARVEST, HarvestTarget {
        /// `User-Agent` sent upstream (not empty in a file); a blank variable is unset.
        user_agent: String {
            takes: "text in quotes",
            env: USER_AGENT = "OAI_BRIDGE_USER_AGENT" via text_or_unset for [Serve, Export, Check],
            flags: [
                Export "--user-agent" "USER_AGENT": "User-Agent to send; include a contact \
                    address. Overrides OAI_BRIDGE_USER_AGENT and `[harvest] user_agent`."
            ],
            apply: |h, v, _| set(&mut h.harvest.user_agent, v),
        }
        /// Timeout for one request.
        request_timeout_secs: u64 {
            takes: "a number of seconds",
            flags: [
                Export "--request-timeout" "SECS": "Timeout for one request, in seconds."
            ],
            apply: |h, v, _| {
                set(&mut h.harvest.request_timeout, Duration::from_secs(at_least_one(v)?))
            },
        }
        /// Timeout for establishing a connection.
        connect_timeout_secs: u64 {
            takes: "a number of seconds",
            apply: |h, v, _| {
                set(&mut h.harvest.connect_timeout, Duration::from_secs(at_least_one(v)?))
            },
        }
        /// Attempts per request, the first included.
        max_attempts: u32 {
            takes: "a whole number (0 or more)",
            flags: [
                Export "--max-attempts" "MAX_ATTEMPTS": "Attempts per request before giving up."
            ],
            apply: |h, v, _| set(&mut h.harvest.max_attempts, at_least_one(v)?),
        }
        /// First retry delay (at most `backoff_max_secs`; a flag's raises that).
        backoff_initial_ms: u64 {
            takes: "a number of milliseconds",
            flags: [
                Export "--backoff-initial" "MS": "First retry delay, in milliseconds (doubles per \
                    attempt, with jitter)."
            ],
            apply: |h, v, _| set(&mut h.harvest.backoff_initial, Duration::from_millis(v)),
        }
        /// Longest retry delay.
        backoff_max_secs: u64 {
            takes: "a number of seconds",
            apply: |h, v, _| set(&mut h.harvest.backoff_max, Duration::from_secs(v)),
        }
        /// Longest wait a `Retry-After` may impose.
        retry_after_max_secs: u64 {
            takes: "a number of seconds",
            flags: [
                Export "--retry-after-max" "SECS": "Longest wait a Retry-After header may impose, \
                    in seconds."
            ],
            apply: |h, v, _| set(&mut h.harvest.retry_after_max, Duration::from_secs(v)),
        }
        /// Pause between consecutive requests to one upstream host.
        politeness_delay_ms: u64 {
            takes: "a number of milliseconds",
            flags: [
                Export "--politeness-delay" "MS": "Pause between requests, in milliseconds."
            ],
            apply: |h, v, _| set(&mut h.harvest.politeness_delay, Duration::from_millis(v)),
        }
        /// Limit for one whole harvest; 0 for none.
        deadline_secs: u64 {
            takes: "a number of seconds",
            flags: [
                Export "--deadline" "SECS": "Limit for the whole harvest, in seconds."
            ],
            apply: |h, v, _| {
                set(&mut h.harvest.deadline, (v > 0).then(|| Duration::from_secs(v)))
            },
        }
        /// Largest response body accepted, after decompression (at least 1024 in a file; a
        /// flag may go lower, for tests).
        max_body_bytes: u64 {
            takes: "a number of bytes",
            flags: [
                Export "--max-body-bytes" "BYTES": "Largest response body accepted, in bytes \
                    (after decompression)."
            ],
            apply: |h, v, _| set(&mut h.harvest.max_body_bytes, v),
        }
        /// Pages in a row with a token but no records before the harvest fails.
        max_empty_pages: u32 {
            takes: "a whole number (0 or more)",
            apply: |h, v, _| set(&mut h.harvest.max_empty_pages, v),
        }
        /// Slowest body accepted, in bytes a second; 0 turns the minimum off.
        min_transfer_bytes_per_sec: u64 {
            takes: "a number of bytes a second",
            apply: |h, v, _| set(&mut h.harvest.min_transfer_bytes_per_sec, v),
        }
        /// The span over which `min_transfer_bytes_per_sec` is averaged.
        min_transfer_window_secs: u64 {
            takes: "a number of seconds",
            apply: |h, v, _| match v {
                0 => Err("must be at least 1 (min_transfer_bytes_per_sec = 0 turns the \
                          minimum off)"
                    .to_owned()),
                v => set(&mut h.harvest.min_transfer_window, Duration::from_secs(v)),
            },
        }
        /// Extra request headers sent with every OAI-PMH request, added to those of the
        /// section below (a repository's to `[harvest]`'s).
        headers: BTreeMap<String, String> {
            takes: "a table of header names and values, e.g. { Authorization = \"Bearer ...\" }",
            entries: "a header value in quotes",
            apply: |h, v, _| {
                let pairs = v.iter().map(|(k, v)| (k.as_str(), v.as_str()));
                let merged = h.harvest.headers.merged(&oai_pmh::RequestHeaders::parse(pairs)?);
                set(&mut h.harvest.headers, merged)
            },
        }
        /// Whether the bridge may ask the web where the records alone cannot tell.
        learn_from_web: bool {
            takes: "true or false",
            apply: |h, v, _| set(&mut h.learn_from_web, v),
        }
        /// `serve`: refreshes running at once across the gateway.
        max_concurrent_refreshes: usize {
            takes: "a whole number (0 or more)",
            gateway_wide: true,
            apply: |h, v, _| set(&mut h.fleet.max_concurrent_refreshes, at_least_one(v)?),
        }
        /// `serve`: refreshes running at once against one upstream host.
        per_host_concurrency: usize {
            takes: "a whole number (0 or more)",
            gateway_wide: true,
            apply: |h, v, _| set(&mut h.fleet.per_host_concurrency, at_least_one(v)?),
        }
        /// `serve`: the window the first refreshes are spread over.
        start_spread_secs: u64 {
            takes: "a number of seconds",
            gateway_wide: true,
            apply: |h, v, _| set(&mut h.fleet.start_spread, Duration::from_secs(v)),
        }
        /// Bytes of memory one harvest holds before it spills.
        memory_budget_bytes: u64 {
            takes: "a number of bytes",
            gateway_wide: true,
            apply: |h, v, _| set(&mut h.memory_budget, at_least_one(v)?),
        }
    }
}

section! {
    /// `[[repository]]`: one upstream and what is published of it.
    "[[repository]]" => RawRepository, RepositoryOverrides, REPOSITORY, RepositorySettings {
        /// Short name, used in paths and logs.
        name: String {
            takes: "a name in quotes",
            apply: |r, v, _| set(&mut r.name, Some(v)),
        }
        /// The upstream: an OAI-PMH baseURL or a Static Repository file, taken from the
        /// file's folder (an override's from the working directory).
        base_url: String {
            takes: "a baseURL or a file in quotes",
            flags: [
                Export "--base-url" "BASE_URL": "OAI-PMH baseURL, or an OAI Static Repository \
                    file (path or URL)."
            ],
            apply: |r, v, at| {
                let source = match oai_pmh::Source::parse(&v)? {
                    oai_pmh::Source::File(path) if path.is_relative() => {
                        oai_pmh::Source::File(at.base_dir.join(path))
                    }
                    other => other,
                };
                set(&mut r.source, Some(source))
            },
        }
        /// Where this repository's files are published.
        public_url: String {
            takes: "a URL in quotes, e.g. \"https://repository.example.edu/sitemaps/\"",
            env: PUBLIC_URL via lossy for [Export],
            flags: [
                Export "--public-url" "PUBLIC_URL": "Where the folder will be served (a directory \
                    URL); index and robots.txt URLs use it. Overrides OAI_BRIDGE_PUBLIC_URL and \
                    the configuration's.",
                Check "--public-url" "PUBLIC_URL": "Where the bridge's files would be served: \
                    says whether robots.txt needs a cross-submission line."
            ],
            apply: |r, v, _| set(&mut r.public_url, Some(super::directory_url(&v)?)),
        }
        /// Sets to harvest; empty for all.
        sets: Vec<String> {
            takes: "a list of setSpecs in quotes, e.g. [\"com_1\"]",
            flags: [
                Export "--set" "SETSPEC": "Harvest only this set (repeatable)."
            ],
            apply: |r, v, _| set(&mut r.sets, super::validate_sets(v)?),
        }
        /// Scope prefixes replacing the default.
        scope: Vec<String> {
            takes: "a list of URLs in quotes",
            flags: [
                Export "--scope" "PREFIX": "Publish URLs under this prefix instead of the \
                    baseURL's directory (repeatable).",
                Check "--scope" "PREFIX": "Scope prefixes to check instead of the baseURL's \
                    directory (repeatable)."
            ],
            apply: |r, v, _| set(&mut r.scope, super::parse_scope(&v)?),
        }
        /// Where the records' landing pages are: a platform's name, `auto` or `generic`.
        platform: String {
            takes: "a platform name in quotes, e.g. \"dspace\"",
            flags: [
                Export "--platform" "NAME": PLATFORM_HELP,
                Check "--platform" "NAME": PLATFORM_HELP
            ],
            apply: |r, v, _| {
                let platform = super::parse_platform(&v, &r.landing.platforms)?;
                set(&mut r.landing.platform, platform)
            },
        }
        /// DSpace: where the UI serves `/handle/P/S`.
        ui_url: String {
            takes: "a URL in quotes",
            flags: [
                Export "--ui-url" "URL": UI_URL_HELP,
                Check "--ui-url" "URL": UI_URL_HELP
            ],
            apply: |r, v, _| set(&mut r.landing.ui_url, Some(super::parse_ui_url(&v)?)),
        }
        /// A landing page made from each record's identifiers.
        landing_template: String {
            takes: "a URL template in quotes",
            flags: [
                Export "--landing-template" "TEMPLATE": TEMPLATE_HELP,
                Check "--landing-template" "TEMPLATE": TEMPLATE_HELP
            ],
            apply: |r, v, _| set(&mut r.landing.template, Some(super::parse_template(&v)?)),
        }
        /// Whether the records' content files are listed beside their landing pages.
        content_files: bool {
            takes: "true or false",
            apply: |r, v, _| set(&mut r.landing.leave_out_files, !v),
        }
        /// Lower datestamp bound (not after `until`).
        from: String {
            takes: "a date in quotes, e.g. \"2020-01-01\"",
            flags: [
                Export "--from" "FROM": "Only records changed at or after this date (YYYY-MM-DD \
                    or YYYY-MM-DDThh:mm:ssZ)."
            ],
            apply: |r, v, _| set(&mut r.from, Some(super::parse_date(&v)?)),
        }
        /// Upper datestamp bound.
        until: String {
            takes: "a date in quotes, e.g. \"2020-01-01\"",
            flags: [
                Export "--until" "UNTIL": "Only records changed at or before this date."
            ],
            apply: |r, v, _| set(&mut r.until, Some(super::parse_date(&v)?)),
        }
        /// URLs per shard (checked with `max_bytes_per_shard`).
        max_urls_per_shard: usize {
            takes: "a whole number (0 or more)",
            flags: [
                Export "--max-urls" "MAX_URLS": "Most URLs per shard (at most 50000)."
            ],
            apply: |r, v, _| set(&mut r.limits.max_urls, v),
        }
        /// Bytes per shard, uncompressed (checked with `max_urls_per_shard`).
        max_bytes_per_shard: usize {
            takes: "a number of bytes",
            flags: [
                Export "--max-bytes" "MAX_BYTES": "Most bytes per shard, uncompressed (at most \
                    52428800)."
            ],
            apply: |r, v, _| set(&mut r.limits.max_bytes, v),
        }
        /// Write `.xml.gz` shards.
        gzip: bool {
            takes: "true or false",
            flags: [
                Export "--gzip" "": "Write gzip-compressed shards (sitemap-N.xml.gz)."
            ],
            apply: |r, v, _| set(&mut r.gzip, v),
        }
        /// Also publish a Signmap.
        signmap: bool {
            takes: "true or false",
            flags: [
                Export "--signmap" "": "Also write a Signmap: signmap.xml and signmap-N.xml, \
                    landing pages with Signposting links."
            ],
            apply: |r, v, _| set(&mut r.profiles.signmap, v),
        }
        /// `serve`, with the Signmap: the relations of the Signposting `Link` header a reverse
        /// proxy adds to a landing page (`/{name}/signposting`).
        signposting_header: Vec<String> {
            takes: "a list of relations in quotes, of cite-as, describedby, type, license, item \
                and linkset",
            apply: |r, v, _| set(&mut r.signposting_header, super::parse_header_relations(v)?),
        }
        /// `serve`: days a ResourceSync Change List keeps a change before it is retired; 0
        /// publishes no ResourceSync documents for the repository.
        changelist_days: u32 {
            takes: "a whole number of days (0 to 3650)",
            apply: |r, v, _| match v {
                0..=3650 => set(&mut r.changelist_days, v),
                v => Err(format!("{v} must be at most 3650 (ten years)")),
            },
        }
        /// Also publish CDIF JSON-LD documents.
        cdif: bool {
            takes: "true or false",
            flags: [
                Export "--cdif" "": "Also write each record's metadata as CDIF JSON-LD \
                    (cdif/*.jsonld) and the CDIF sitemap (cdif-sitemap.xml), announced in \
                    robots.txt for `User-agent: CDIF1.0`."
            ],
            apply: |r, v, _| set(&mut r.profiles.cdif, v),
        }
        /// Also publish CDIF's metadata lists.
        cdif_list: bool {
            takes: "true or false",
            flags: [
                Export "--cdif-list" "": "Also write CDIF's metadata lists: the same JSON-LD \
                    documents gathered in schema.org ItemLists (cdif-list-N.jsonld, profile \
                    CDIF-list-1.0), listed in cdif-list-sitemap.xml, announced for `User-agent: \
                    CDIF1.0`. Without --cdif, the documents are in the lists only."
            ],
            apply: |r, v, _| set(&mut r.profiles.cdif_list, v),
        }
        /// DiWoo: setSpec -> Woo information category; a flag's `SETSPEC=N` entries replace
        /// the table.
        diwoo: BTreeMap<String, i64> {
            takes: "a table of setSpecs and category numbers, e.g. { \"besluiten\" = 1 }",
            entries: "a category number from 1 to 17",
            over: Vec<String>,
            flags: [
                Export "--diwoo" "SPEC=N": "DiWoo: publish the records of set SPEC under Woo \
                    information category N (1-17), in sitemapindex-diwoo-infocatNNN.xml \
                    (repeatable; replaces the configuration's table)."
            ],
            apply: |r, v, _| set(&mut r.profiles.diwoo, super::parse_diwoo(&v)?),
            apply_over: |r, v, _| set(&mut r.profiles.diwoo, super::parse_diwoo_entries(&v)?),
        }
        /// The OCX sitemap ([`OCX`]); a flag switches it on with the table's settings, or the
        /// defaults.
        ocx: RawOcx {
            takes: "a table, [repository.ocx]",
            over: bool,
            flags: [
                Export "--ocx" "": "Also write an OCX sitemap (ocx.xml, ocx-N.xml), with the \
                    configuration's `[repository.ocx]` settings or the defaults."
            ],
            kind: table,
            apply_over: |r, v, _| {
                if v && r.profiles.ocx.is_none() {
                    r.profiles.ocx = Some(super::OcxConfig::default());
                }
                Ok(())
            },
        }
        /// How this repository's upstream is treated, over `[harvest]` ([`HARVEST`]).
        harvest: RawHarvest {
            takes: "a table, [harvest] (in a repository, [repository.harvest])",
            over: (),
            kind: table,
        }
        /// `serve`: IndexNow pings of the landing pages each refresh changes ([`INDEXNOW`]).
        indexnow: RawIndexNow {
            takes: "a table, [repository.indexnow]",
            over: (),
            kind: table,
        }
        /// `serve`: time from the end of one refresh to the start of the next.
        refresh_interval_secs: u64 {
            takes: "a number of seconds",
            apply: |r, v, _| match Duration::from_secs(v) {
                d if d < super::MIN_REFRESH_INTERVAL => Err(format!(
                    "must be at least {} seconds",
                    super::MIN_REFRESH_INTERVAL.as_secs()
                )),
                d => set(&mut r.refresh_interval, d),
            },
        }
        /// How often a repository that keeps no deletions is harvested in full.
        full_harvest_interval_secs: u64 {
            takes: "a number of seconds",
            flags: [
                Export "--full-harvest-interval" "SECS" requires("store"): "With --state or \
                    --state-url: harvest in full this often (seconds) when the repository does \
                    not keep deletions (deletedRecord no or transient). Default 604800 (a week)."
            ],
            apply: |r, v, _| set(&mut r.policy.full_interval, Duration::from_secs(v)),
        }
        /// The largest share of the published URLs a harvest may remove before it is held
        /// back.
        shrink_guard: f64 {
            takes: "a number from 0 to 1, e.g. 0.5",
            flags: [
                Export "--shrink-guard" "SHARE" requires("store"): "With --state or --state-url: \
                    the largest share (0 to 1) of the published URLs a harvest may remove before \
                    it is held back. Default 0.5."
            ],
            apply: |r, v, _| set(&mut r.policy.shrink_guard, super::check_share(Some(v))?),
        }
    }
}

section! {
    /// `[repository.ocx]`: the OCX sitemap of the repository above it.
    "[repository.ocx]" => RawOcx, OcxOverrides, OCX, super::OcxConfig {
        /// `false` keeps the table but publishes no OCX sitemap (read before the others).
        enabled: bool {
            takes: "true or false",
        }
        /// Type URL of records whose `dc:type` maps to no type.
        default_type: String {
            takes: "a type URL in quotes",
            apply: |o, v, _| {
                if !(v.starts_with("https://") || v.starts_with("http://")) {
                    return Err(format!(
                        "{v:?} must be a type URL, e.g. https://schema.org/CreativeWork"
                    ));
                }
                set(&mut o.default_type, Some(v))
            },
        }
        /// `ocx:teaser`: `dc:description` cut to this many characters.
        teaser_chars: usize {
            takes: "a whole number (0 or more)",
            apply: |o, v, _| match v {
                10..=10_000 => set(&mut o.teaser_chars, v),
                v => Err(format!("{v} must be between 10 and 10000")),
            },
        }
        /// `ocx:format` of the metadata in the landing page.
        format: String {
            takes: "a format name in quotes",
            apply: |o, v, _| {
                let formats = crate::profiles::ocx::FORMATS;
                if !formats.contains(&v.as_str()) {
                    return Err(format!("{v:?} must be one of {formats:?}"));
                }
                set(&mut o.format, Some(v))
            },
        }
        /// `ocx:xpath` of that metadata in the landing page.
        xpath: String {
            takes: "an XPath in quotes",
            apply: |o, v, _| set(&mut o.xpath, Some(v)),
        }
        /// `dc:type` value -> type URL, on top of the built-in table.
        types: BTreeMap<String, String> {
            takes: "a table of dc:type values and type URLs",
            entries: "a type URL in quotes",
            apply: |o, v, _| {
                let types: Vec<(String, String)> = v.into_iter().collect();
                set(&mut o.types, crate::dctype::TypeMap::with(&types)?)
            },
        }
    }
}

section! {
    /// `[repository.indexnow]`: `serve` tells IndexNow's search engines which landing pages of
    /// the repository above it each refresh created, changed or deleted.
    "[repository.indexnow]" => RawIndexNow, IndexNowOverrides, INDEXNOW, crate::indexnow::Settings {
        /// The repository's IndexNow key, 8 to 128 of a-z, A-Z, 0-9 and '-' (required). A secret:
        /// shown nowhere, served as the key file `/{key}.txt`.
        key: String {
            takes: "a key in quotes: 8 to 128 of a-z, A-Z, 0-9 and '-'",
            apply: |n, v, _| set(&mut n.key, Some(crate::indexnow::Key::new(v)?)),
        }
        /// The engine pinged; IndexNow's own shares each ping with every participating engine.
        endpoint: String {
            takes: "a URL in quotes, e.g. \"https://api.indexnow.org/indexnow\"",
            apply: |n, v, _| set(&mut n.endpoint, crate::indexnow::parse_endpoint(&v)?),
        }
        /// Where the key file is, when not at `https://{host}/{key}.txt` (`keyLocation`): only
        /// pages on its host and under its folder are sent.
        key_location: String {
            takes: "a URL in quotes, of a .txt file",
            apply: |n, v, _| set(&mut n.key_location, Some(crate::indexnow::parse_key_location(&v)?)),
        }
    }
}

/// The help of `--platform` (`export`, `check`).
const PLATFORM_HELP: &str = "The repository's platform: auto (detect it), generic (Google's \
    rule: URLs under the baseURL's directory), dspace (the Handle gives the landing page), \
    eprints (the abstract page is a dc:relation) or islandora (oai:host:node-N is /node/N).";
/// The help of `--ui-url` (`export`, `check`).
const UI_URL_HELP: &str = "DSpace: where the UI serves /handle/P/S, when not at the baseURL's \
    host (DSpace 7+).";
/// The help of `--landing-template` (`export`, `check`).
const TEMPLATE_HELP: &str = "A landing page made from each record's {handle}, {doi} or \
    {oai_local}, e.g. \"https://host/records/{oai_local}\".";

/// Stores `value` in `place`: the end of every `apply`.
fn set<T>(place: &mut T, value: T) -> Result<(), String> {
    *place = value;
    Ok(())
}

/// A count or a time that must not be 0.
fn at_least_one<N: PartialEq + Default>(n: N) -> Result<N, String> {
    if n == N::default() {
        return Err("must be at least 1".to_owned());
    }
    Ok(n)
}

/// A limit whose absence is its default, and which 0 would not mean.
fn at_least_one_or_default(n: u64) -> Result<u64, String> {
    if n == 0 {
        return Err("must be at least 1 (leave it out for the default)".to_owned());
    }
    Ok(n)
}

/// The top level's keys (its tables are the sections).
pub(crate) const ROOT: &[Key] = &[Key {
    section: "",
    name: "include",
    #[cfg(test)]
    doc: "Files of `[[repository]]` tables, read after this file's own.\n",
    takes: "a list of file names in quotes, e.g. [\"repositories.d/*.toml\"]",
    entries: None,
    #[cfg(test)]
    kind: Kind::Key,
    gateway_wide: false,
    env: None,
    flags: &[],
}];

/// The top level's tables, as errors say what they take.
pub(crate) const TABLES: &[(&str, &str)] = &[
    ("server", "a table, [server]"),
    (
        "harvest",
        "a table, [harvest] (in a repository, [repository.harvest])",
    ),
    ("state", "a table, [state]"),
    ("repository", "tables, each [[repository]]"),
];

/// Every section's declarations, the top level first, in the file's order.
pub(crate) const SECTIONS: &[&[Key]] = &[ROOT, SERVER, HARVEST, STATE, REPOSITORY, OCX, INDEXNOW];

/// Every declared key and table.
pub(crate) fn all() -> impl Iterator<Item = &'static Key> {
    SECTIONS.iter().flat_map(|keys| keys.iter())
}

/// What the key or table `name` takes, in words ([`Key::takes`]); for `table.*`, what an entry
/// of that table of free keys takes.
pub(crate) fn takes(name: &str) -> Option<&'static str> {
    if let Some(table) = name.strip_suffix(".*") {
        return all().find(|k| k.name == table).and_then(|k| k.entries);
    }
    (TABLES
        .iter()
        .find(|(t, _)| *t == name)
        .map(|(_, what)| *what))
    .or_else(|| all().find(|k| k.name == name).map(|k| k.takes))
}

/// The variables that carry a secret, each with its twin that names a file holding it instead
/// (the container convention: `OAI_BRIDGE_ADMIN_TOKEN_FILE=/run/secrets/admin_token`).
pub(crate) const SECRET_FILES: &[(&str, &str)] = &[
    (Environment::ADMIN_TOKEN, "OAI_BRIDGE_ADMIN_TOKEN_FILE"),
    (Environment::STATE_URL, "OAI_BRIDGE_STATE_URL_FILE"),
];

impl Environment {
    /// The process's environment; `Err` when a secret's file cannot be read.
    pub(crate) fn process() -> Result<Environment, ConfigError> {
        Self::read(|name| std::env::var_os(name))
    }

    /// The variables of the declared settings as `lookup` gives them (tests pass their own),
    /// and the secrets' files their `_FILE` twins name ([`SECRET_FILES`]).
    pub(crate) fn read(
        lookup: impl Fn(&str) -> Option<OsString>,
    ) -> Result<Environment, ConfigError> {
        Environment::of_variables(
            all().filter_map(|key| key.env).map(|(name, _)| name),
            &lookup,
        )
        .with_files(SECRET_FILES, &lookup)
    }
}

/// The settings one layer gives over the file, section by section as `bridge.toml` has them;
/// `None` leaves a setting to the layer below.
#[derive(Clone, Debug, Default)]
pub(crate) struct Overrides {
    /// `[server]`.
    pub server: ServerOverrides,
    /// `[harvest]`.
    pub harvest: HarvestOverrides,
    /// `[state]`.
    pub state: StateOverrides,
    /// The `[[repository]]` a command takes (`serve`: each of them).
    pub repository: RepositoryOverrides,
    /// Publish a shrink the guard holds back (no key: an operator's decision, once).
    pub accept_shrink: Option<Given<bool>>,
}

impl Overrides {
    /// These overrides with `over` on top: each setting `over` gives replaces this one's.
    pub(crate) fn merge(self, over: Overrides) -> Overrides {
        Overrides {
            server: self.server.merge(over.server),
            harvest: self.harvest.merge(over.harvest),
            state: self.state.merge(over.state),
            repository: self.repository.merge(over.repository),
            accept_shrink: over.accept_shrink.or(self.accept_shrink),
        }
    }

    /// What the environment gives `command`: the variables the declarations name for it.
    pub(crate) fn from_env(env: &Environment, command: CommandName) -> Overrides {
        Overrides {
            server: ServerOverrides::from_env(env, command),
            harvest: HarvestOverrides::from_env(env, command),
            state: StateOverrides::from_env(env, command),
            repository: RepositoryOverrides::from_env(env, command),
            accept_shrink: None,
        }
    }

    /// What the flags of `command` give, as clap read them.
    fn from_flags(matches: &clap::ArgMatches, command: CommandName) -> Overrides {
        Overrides {
            server: ServerOverrides::from_flags(matches, command),
            harvest: HarvestOverrides::from_flags(matches, command),
            state: StateOverrides::from_flags(matches, command),
            repository: RepositoryOverrides::from_flags(matches, command),
            accept_shrink: None,
        }
    }
}

/// A command whose flags over the settings [`Flags`] declares.
pub(crate) trait Reads {
    /// The command.
    const COMMAND: CommandName;
}

macro_rules! reads {
    ($($(#[doc = $doc:literal])* $Marker:ident => $command:ident,)*) => {$(
        $(#[doc = $doc])*
        #[derive(Clone, Copy, Debug)]
        pub(crate) struct $Marker;

        impl Reads for $Marker {
            const COMMAND: CommandName = CommandName::$command;
        }
    )*};
}

reads! {
    /// `serve`'s flags.
    ServeFlags => Serve,
    /// `export`'s flags.
    ExportFlags => Export,
    /// `check`'s flags.
    CheckFlags => Check,
    /// `prune`'s flags.
    PruneFlags => Prune,
    /// `migrate-state`'s flags.
    MigrateFlags => Migrate,
}

/// The flags of command `C` over the settings, as the declarations give them: a command's
/// clap struct flattens it (`#[command(flatten)]`), and [`Flags::overrides`] is what they
/// gave, each value with its flag.
#[derive(Clone, Debug)]
pub(crate) struct Flags<C> {
    /// What the flags gave.
    pub overrides: Overrides,
    command: std::marker::PhantomData<C>,
}

impl<C: Reads> clap::FromArgMatches for Flags<C> {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        Ok(Flags {
            overrides: Overrides::from_flags(matches, C::COMMAND),
            command: std::marker::PhantomData,
        })
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl<C: Reads> clap::Args for Flags<C> {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        let cmd = ServerOverrides::flag_args(cmd, C::COMMAND);
        let cmd = HarvestOverrides::flag_args(cmd, C::COMMAND);
        let cmd = StateOverrides::flag_args(cmd, C::COMMAND);
        RepositoryOverrides::flag_args(cmd, C::COMMAND)
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}
