//! `bridge.toml` -> a validated [`Config`]: a raw serde layer that rejects unknown keys, then
//! checks that turn strings into URLs, durations and limits, naming the key when one is wrong.

use crate::error::ConfigError;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use oai_pmh::{Datestamp, HarvestSettings, Source};
use serde::Deserialize;
use url::Url;

use crate::render::Limits;

#[macro_use]
mod declare;
mod exposed;
pub(crate) mod keys;

pub(crate) use keys::ServerConfig;
pub use keys::StateConfig;
use keys::{RawHarvest, RawIndexNow, RawOcx, RawRepository, RawServer, RawState};

/// Default listen address of `serve`.
pub(crate) const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// Default address of `serve`'s admin listener (status page, metrics, admin endpoints).
pub(crate) const DEFAULT_ADMIN_LISTEN: &str = "127.0.0.1:8081";
/// Default state directory of `serve`.
pub(crate) const DEFAULT_STATE_DIR: &str = "state";
/// Default size of the gateway's cache of file bytes.
pub(crate) const DEFAULT_CACHE_BYTES: u64 = 256 * 1024 * 1024;
/// Default time in-flight requests get to finish at shutdown.
pub(crate) const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// Default `Cache-Control: max-age` of sitemap files.
pub(crate) const DEFAULT_MAX_AGE: Duration = Duration::from_secs(3600);
/// Default `[server] publish_grace_secs`: how long a file no index names any more stays in a
/// bucket.
pub(crate) const DEFAULT_PUBLISH_GRACE: Duration = Duration::from_secs(24 * 3600);
/// Default `[server] metrics_repository_series`: repositories with series of their own in
/// `/metrics`. A repository costs about 100 lines of a scrape (its two refresh histograms most
/// of them), so 100 keep a scrape near 10,000 lines and 850 KiB whatever the fleet's size, well
/// within what one Prometheus target is expected to hold, while a gateway of up to 100
/// repositories (most of them) sees every one of its repositories as before.
pub(crate) const DEFAULT_METRICS_REPOSITORY_SERIES: usize = 100;
/// Default `[state] lease_secs`: how long a claim on a repository's refresh lasts unrenewed.
pub(crate) const DEFAULT_LEASE: Duration = Duration::from_secs(60);
/// Default `[server] client_timeout_secs`.
pub(crate) const DEFAULT_CLIENT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default time between refreshes of a repository.
pub(crate) const DEFAULT_REFRESH_INTERVAL: Duration = Duration::from_secs(6 * 3600);
/// Days a ResourceSync Change List keeps a change, by default: a synchronising aggregator that
/// runs monthly still finds every change since its last run.
pub(crate) const DEFAULT_CHANGELIST_DAYS: u32 = 30;
/// Default `[harvest] max_concurrent_refreshes`: refreshes running at once across the gateway.
pub(crate) const DEFAULT_MAX_CONCURRENT_REFRESHES: usize = 4;
/// Default `[harvest] per_host_concurrency`: refreshes running at once against one upstream host.
pub(crate) const DEFAULT_PER_HOST_CONCURRENCY: usize = 1;
/// Default `[harvest] start_spread_secs`: the window the first refreshes are spread over.
pub(crate) const DEFAULT_START_SPREAD: Duration = Duration::from_secs(30);
/// Default `[harvest] user_agent`: the product and version, and where to read about it.
pub(crate) const DEFAULT_USER_AGENT: &str = concat!(
    "oai-bridge/",
    env!("CARGO_PKG_VERSION"),
    " (OAI-PMH to sitemaps gateway)"
);
/// The command an error of a harvest names when the upstream answered something that is no
/// OAI-PMH answer: it shows what the repository answers.
pub(crate) const DIAGNOSE_COMMAND: &str = "oai-bridge check";
/// Default `[harvest] learn_from_web`: the bridge may ask the web where the records alone
/// cannot tell.
pub(crate) const DEFAULT_LEARN_FROM_WEB: bool = true;
/// Shortest refresh interval accepted (a refresh never starts before the previous one ended,
/// so a short interval means back-to-back harvests, not overlapping ones).
pub(crate) const MIN_REFRESH_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    /// Files of `[[repository]]` tables, read after this file's own.
    #[serde(default)]
    include: Vec<String>,
    #[serde(default)]
    server: RawServer,
    #[serde(default)]
    harvest: RawHarvest,
    #[serde(default)]
    state: RawState,
    #[serde(default)]
    repository: Vec<RawRepository>,
    /// An operator's platforms (`[[platform]]`, the keys of `src/platform/platforms.toml`).
    #[serde(default)]
    platform: Vec<crate::platform::RowSpec>,
}

/// An included file: `[[repository]]` tables only.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIncluded {
    #[serde(default)]
    repository: Vec<RawRepository>,
}

pub(crate) use crate::profiles::ProfileSettings;
pub(crate) use crate::profiles::ocx::OcxConfig;

/// `[repository.ocx]` over the defaults, unless it says `enabled = false`; `Err` names the key.
fn parse_ocx(raw: RawOcx, at: &keys::At<'_>) -> Result<Option<OcxConfig>, (&'static str, String)> {
    if raw.enabled == Some(false) {
        return Ok(None);
    }
    let mut ocx = OcxConfig::default();
    raw.apply(&mut ocx, at)?;
    Ok(Some(ocx))
}

/// `[repository.indexnow]` over the defaults (IndexNow's own endpoint); `Err` names the key.
fn parse_indexnow(
    raw: RawIndexNow,
    at: &keys::At<'_>,
) -> Result<crate::indexnow::IndexNowConfig, (&'static str, String)> {
    let mut settings = crate::indexnow::Settings::default();
    raw.apply(&mut settings, at)?;
    settings.validated()
}

/// The validated configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// `[server]`.
    pub server: ServerConfig,
    /// `[harvest]`: how upstreams are treated (each repository's own, with its
    /// `[repository.harvest]` over it, is [`RepositoryConfig::harvest`]).
    pub harvest: HarvestSettings,
    /// `[harvest] learn_from_web`: whether the bridge may ask the web besides the OAI-PMH
    /// requests where the records alone cannot tell (Handle and DOI resolvers, a few landing
    /// pages, the sites' robots.txt); each repository's own is
    /// [`RepositoryConfig::learn_from_web`]. Not the OAI-PMH client's: the bridge's learning
    /// reads it.
    pub learn_from_web: bool,
    /// The gateway's limits on refreshes (from `[harvest]`).
    pub fleet: FleetSettings,
    /// `[state]`: where the repositories' stores are.
    pub state: StateConfig,
    /// `[[repository]]`, in file order, then those of the `include`d files.
    pub repositories: Vec<RepositoryConfig>,
    /// Bytes of memory an export's harvest holds before it spills sorted runs to disk
    /// (`[harvest] memory_budget_bytes`).
    pub memory_budget: u64,
    /// Where each setting of `[server]`, `[harvest]` and `[state]` came from.
    pub(crate) sources: Sources,
}

/// Where a setting's value came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Provenance {
    /// Its default: no layer gives it.
    Default,
    /// The configuration file.
    File,
    /// An environment variable.
    Env(&'static str),
    /// A flag.
    Flag(&'static str),
}

/// Where each setting of `[server]`, `[harvest]` and `[state]` came from, in the declared
/// order: what `serve --check-config` and the status page show.
#[derive(Clone, Debug, Default)]
pub(crate) struct Sources {
    /// The configuration file, as errors name it.
    pub file: String,
    /// Each declared setting and where its value came from.
    pub of: Vec<(&'static keys::Key, Provenance)>,
}

impl Sources {
    /// The file's layer: each key of `sections` the file gives (`given`, by section and name)
    /// is the file's, the others their defaults.
    fn of_file(file: &str, given: &[(&str, &str)]) -> Sources {
        let of = [keys::SERVER, keys::HARVEST, keys::STATE]
            .into_iter()
            .flatten()
            .map(|key| {
                let from_file = given.contains(&(key.section, key.name));
                (
                    key,
                    if from_file {
                        Provenance::File
                    } else {
                        Provenance::Default
                    },
                )
            })
            .collect();
        Sources {
            file: file.to_owned(),
            of,
        }
    }

    /// `section`'s `name` came from `origin`, a layer over the file.
    pub(crate) fn given(&mut self, section: &str, name: &str, origin: keys::Origin) {
        let source = match origin {
            keys::Origin::Env(variable) => Provenance::Env(variable),
            keys::Origin::Flag(flag) => Provenance::Flag(flag),
        };
        for (key, at) in &mut self.of {
            if key.section == section && key.name == name {
                *at = source;
            }
        }
    }

    /// The settings not at their default, a line per place they came from, flags first:
    /// `--listen: [server] listen`, `bridge.toml: [server] state_dir, cache_bytes; [harvest]
    /// user_agent`.
    pub(crate) fn lines(&self) -> Vec<String> {
        let mut places: Vec<(Provenance, String)> = Vec::new();
        for (key, source) in &self.of {
            if *source == Provenance::Default {
                continue;
            }
            let line = match places.iter_mut().find(|(s, _)| s == source) {
                Some((_, line)) => line,
                None => {
                    let place = match source {
                        Provenance::Flag(name) | Provenance::Env(name) => (*name).to_owned(),
                        Provenance::File | Provenance::Default => self.file.clone(),
                    };
                    places.push((*source, format!("{place}:")));
                    &mut places.last_mut().expect("just pushed").1
                }
            };
            // The section is said once, before its first key of the line.
            if line.contains(&format!("{} ", key.section)) {
                line.push_str(&format!(", {}", key.name));
            } else {
                let sep = if line.ends_with(':') { " " } else { "; " };
                line.push_str(&format!("{sep}{} {}", key.section, key.name));
            }
        }
        let rank = |s: &Provenance| match s {
            Provenance::Flag(_) => 0,
            Provenance::Env(_) => 1,
            Provenance::File | Provenance::Default => 2,
        };
        places.sort_by_key(|(s, _)| rank(s));
        places.into_iter().map(|(_, line)| line).collect()
    }
}

impl Default for StateConfig {
    fn default() -> Self {
        Self::defaults(&keys::At::overrides())
    }
}

/// How the gateway schedules the refreshes of many repositories (`[harvest]` keys that only
/// the gateway reads, and only gateway-wide).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetSettings {
    /// Refreshes running at once, across all repositories (`max_concurrent_refreshes`).
    pub max_concurrent_refreshes: usize,
    /// Refreshes running at once against one upstream host, its host and port
    /// (`per_host_concurrency`). Static Repository files have no host.
    pub per_host_concurrency: usize,
    /// The first refreshes after the start, and those of repositories a reload adds, are
    /// spread evenly over this window (`start_spread_secs`).
    pub start_spread: Duration,
}

impl Default for FleetSettings {
    fn default() -> Self {
        Self {
            max_concurrent_refreshes: DEFAULT_MAX_CONCURRENT_REFRESHES,
            per_host_concurrency: DEFAULT_PER_HOST_CONCURRENCY,
            start_spread: DEFAULT_START_SPREAD,
        }
    }
}

/// A secret: compared in constant time, never shown (`Debug` prints `***`).
#[derive(Clone, PartialEq, Eq)]
pub struct AdminToken(String);

impl AdminToken {
    /// Shortest token accepted.
    pub const MIN_LEN: usize = 16;

    /// A token of at least [`Self::MIN_LEN`] visible ASCII characters.
    pub fn new(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.len() < Self::MIN_LEN || !text.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!(
                "must be at least {} visible ASCII characters (e.g. from `openssl rand -hex 32`)",
                Self::MIN_LEN
            ));
        }
        Ok(Self(text.to_owned()))
    }

    /// Whether `offered` is the token, in time that does not depend on where they differ (both
    /// are hashed first, so not on the length either).
    pub fn matches(&self, offered: &[u8]) -> bool {
        use sha2::{Digest, Sha256};
        use subtle::ConstantTimeEq;
        let want = Sha256::digest(self.0.as_bytes());
        let got = Sha256::digest(offered);
        want.ct_eq(&got).into()
    }
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(***)")
    }
}

/// Warns when the configuration file at `path`, which holds `text`, holds a secret that other
/// users can read. Said as the file is read, for every command, and again at each reload
/// (still true until it is mended). A warning, not OpenSSH's refusal of a key file others can
/// read: a container's mounted file often has a mode nobody chose.
fn warn_if_exposed(path: &Path, text: &str) {
    let Ok(table) = toml::from_str::<toml::Table>(text) else {
        return;
    };
    if let Some(warning) = exposed::warning(path, &table) {
        tracing::warn!("{warning}");
    }
}

/// A secret kept in a file of its own (a `*_file` key, a `*_FILE` variable: the container
/// convention, a Docker or Kubernetes secret mounted read-only): its text without the final line
/// break that editors and `echo` add. The error names the file, never what it holds.
pub(crate) fn read_secret(path: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the secret file {}: {e}", path.display()))?;
    let text = text.strip_suffix('\n').unwrap_or(&text);
    let text = text.strip_suffix('\r').unwrap_or(text);
    if text.trim().is_empty() {
        return Err(format!("the secret file {} is empty", path.display()));
    }
    Ok(text.to_owned())
}

/// The `[state] password_file`'s password, until the layers join it to the `[state] url`
/// ([`StateConfig::join_password`]). A secret: `Debug` names the file only.
#[derive(Clone, PartialEq, Eq)]
pub struct StatePassword {
    text: String,
    /// The file it was read from, for errors.
    file: PathBuf,
}

impl StatePassword {
    /// The password in `file`.
    pub(crate) fn read(file: PathBuf) -> Result<StatePassword, String> {
        Ok(StatePassword {
            text: read_secret(&file)?,
            file,
        })
    }
}

impl std::fmt::Debug for StatePassword {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StatePassword(*** from {})", self.file.display())
    }
}

impl StateConfig {
    /// The `[state] url` with the `password_file`'s password in it, once every layer has
    /// given what it gives (a URL from the environment and a password from the file, say).
    pub(crate) fn join_password(mut self) -> Result<StateConfig, ConfigError> {
        let Some(password) = self.password.take() else {
            return Ok(self);
        };
        let err = |message: &str| ConfigError {
            file: password.file.display().to_string(),
            key: "[state] password_file".to_owned(),
            message: message.to_owned(),
        };
        let Some(url) = &self.url else {
            return Err(err(
                "gives the password of a database, but no [state] url names one",
            ));
        };
        self.url = Some(url.with_password(&password.text).map_err(|m| err(&m))?);
        Ok(self)
    }
}

/// One `[[repository]]`.
#[derive(Clone, Debug)]
pub struct RepositoryConfig {
    /// Short name, used in paths (`/{name}/sitemap.xml`) and logs.
    pub name: String,
    /// The upstream: an OAI-PMH baseURL or a Static Repository file.
    pub source: Source,
    /// Where this repository's files are published (export); a directory URL.
    pub public_url: Option<Url>,
    /// Sets to harvest; empty for all.
    pub sets: Vec<String>,
    /// Scope prefixes replacing the default (the baseURL's directory, or the platform's).
    pub scope: Vec<Url>,
    /// Where the records' landing pages are: `platform`, `ui_url`, `landing_template`.
    pub landing: crate::platform::LandingSettings,
    /// Lower datestamp bound.
    pub from: Option<Datestamp>,
    /// Upper datestamp bound.
    pub until: Option<Datestamp>,
    /// Shard limits.
    pub limits: Limits,
    /// Write `.xml.gz` shards.
    pub gzip: bool,
    /// `serve`, with the Signmap: the relations of a landing page's Signposting `Link` header.
    pub signposting_header: Vec<String>,
    /// `serve`: days a ResourceSync Change List keeps a change; 0 publishes no ResourceSync.
    pub changelist_days: u32,
    /// The profiles published beside the sitemap: `signmap`, `cdif`, `cdif_list`, `diwoo` and
    /// `[repository.ocx]` (when present and not `enabled = false`).
    pub profiles: ProfileSettings,
    /// Time between refreshes (`serve`).
    pub refresh_interval: Duration,
    /// How its upstream is treated: `[harvest]` with its `[repository.harvest]` table over it.
    pub harvest: HarvestSettings,
    /// `learn_from_web` of `[harvest]`, with its `[repository.harvest]`'s over it.
    pub learn_from_web: bool,
    /// The file that configures it (the main file, or an `include`d one).
    pub file: String,
    /// How refreshes go through the repository's store: full-harvest interval, shrink guard.
    pub policy: crate::incremental::Policy,
    /// `serve`: its IndexNow pings (`[repository.indexnow]`), when configured.
    pub indexnow: Option<crate::indexnow::IndexNowConfig>,
}

/// A share of published URLs (0 to 1); the default guard when absent.
pub(crate) fn check_share(value: Option<f64>) -> Result<f64, String> {
    match value {
        None => Ok(crate::incremental::Policy::default().shrink_guard),
        Some(v) if (0.0..=1.0).contains(&v) => Ok(v),
        Some(v) => Err(format!(
            "{v} is not a share: give a number from 0 to 1 (0.5 holds back a harvest that removes more than half the URLs; 1 turns the guard off)"
        )),
    }
}

impl Config {
    /// Reads and validates a configuration file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: file.clone(),
            key: "(file)".to_owned(),
            message: format!("cannot read: {e}"),
        })?;
        let base_dir = path.parent().unwrap_or(Path::new("."));
        let config = Self::parse(&text, &file, base_dir)?;
        warn_if_exposed(path, &text);
        Ok(config)
    }

    /// Parses and validates configuration text; relative file paths are taken from `base_dir`.
    pub fn parse(text: &str, file: &str, base_dir: &Path) -> Result<Config, ConfigError> {
        let err = |key: &str, message: String| ConfigError {
            file: file.to_owned(),
            key: key.to_owned(),
            message,
        };
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            let (key, message) = typed::explain(text, &e);
            err(&key, message)
        })?;
        let given: Vec<(&str, &str)> = (raw.server.given().into_iter())
            .map(|k| ("[server]", k))
            .chain(raw.harvest.given().into_iter().map(|k| ("[harvest]", k)))
            .chain(raw.state.given().into_iter().map(|k| ("[state]", k)))
            .collect();
        let sources = Sources::of_file(file, &given);
        let at = keys::At { base_dir };
        let server =
            parse_server(raw.server, &at).map_err(|(k, m)| err(&format!("[server] {k}"), m))?;
        let mut state = StateConfig::default();
        (raw.state.apply(&mut state, &at)).map_err(|(k, m)| err(&format!("[state] {k}"), m))?;
        let mut harvest = HarvestTarget::defaults();
        (raw.harvest.apply(&mut harvest, &at))
            .and_then(|()| check_file_harvest(&harvest.harvest))
            .map_err(|(k, m)| err(&format!("[harvest] {k}"), m))?;
        let platforms = raw
            .platform
            .into_iter()
            .map(|spec| crate::platform::Row::new(spec, false))
            .collect::<Result<Vec<_>, _>>()
            .and_then(crate::platform::Registry::with)
            .map_err(|e| err(&e.key_path(), e.message().to_owned()))?;
        let mut repositories = ReadSoFar::default();
        let from = Origin {
            file,
            base_dir,
            harvest: &harvest,
            platforms: &platforms,
        };
        for r in raw.repository {
            let repo = parse_repository(r, &repositories, &from).map_err(|(k, m)| err(&k, m))?;
            repositories.add(repo);
        }
        for pattern in &raw.include {
            let files = include::expand(base_dir, pattern).map_err(|m| err("include", m))?;
            for path in files {
                let included = path.display().to_string();
                let from = Origin {
                    file: &included,
                    base_dir: path.parent().unwrap_or(base_dir),
                    harvest: &harvest,
                    platforms: &platforms,
                };
                for r in include::read(&path)? {
                    let repo = parse_repository(r, &repositories, &from).map_err(|(k, m)| {
                        ConfigError {
                            file: included.clone(),
                            key: k,
                            message: m,
                        }
                    })?;
                    repositories.add(repo);
                }
            }
        }
        Ok(Config {
            server,
            harvest: harvest.harvest,
            learn_from_web: harvest.learn_from_web,
            fleet: harvest.fleet,
            state,
            repositories: repositories.list,
            memory_budget: harvest.memory_budget,
            sources,
        })
    }
}

/// The repositories read so far, found by name without a scan: a fleet's configuration has
/// thousands, and a scan for each made reading one of 10,000 quadratic (half of a reload's CPU).
#[derive(Default)]
struct ReadSoFar {
    list: Vec<RepositoryConfig>,
    by_name: std::collections::HashMap<String, usize>,
}

impl ReadSoFar {
    fn named(&self, name: &str) -> Option<&RepositoryConfig> {
        self.by_name.get(name).map(|&i| &self.list[i])
    }

    fn add(&mut self, repository: RepositoryConfig) {
        (self.by_name).insert(repository.name.clone(), self.list.len());
        self.list.push(repository);
    }
}

/// Where the `[[repository]]` tables being read come from: the file, its folder (which their
/// relative paths are taken from), and the `[harvest]` their own tables go over.
struct Origin<'a> {
    file: &'a str,
    base_dir: &'a Path,
    harvest: &'a HarvestTarget,
    platforms: &'a crate::platform::Registry,
}

/// What serde makes of a value of the wrong type (`invalid type: string "daily", expected
/// u64`), said as the key and what it takes: `[harvest] deadline_secs: expected a number of
/// seconds, found "daily" (line 4)`. The key is found from the error's place in the text; what
/// each key takes is its declaration's ([`keys::takes`]).
mod typed {
    use std::ops::Range;

    use toml::Spanned;
    use toml::de::{DeTable, DeValue};

    use super::line_of;

    /// One step of a key's path: a table's key, or an array's element.
    #[derive(Debug)]
    enum Step<'t> {
        Key(&'t str),
        Index(usize),
    }

    /// The key and the message of `e`, an error reading `text`: the key where the text is
    /// valid TOML and serde refused a value or a key; else (a syntax error) the line.
    pub(super) fn explain(text: &str, e: &toml::de::Error) -> (String, String) {
        let Some(span) = e.span() else {
            return ("(syntax)".to_owned(), e.message().to_owned());
        };
        let line = line_of(text, span.start);
        let at_line = || (format!("line {line}"), e.message().to_owned());
        let Ok(root) = DeTable::parse(text) else {
            return at_line();
        };
        let mut path = Vec::new();
        if !find(root.get_ref(), &span, &mut path) {
            return at_line();
        }
        let key = label(root.get_ref(), &path);
        let message = e.message();
        let wrong_value = ["invalid type:", "invalid value:", "invalid length"]
            .iter()
            .any(|p| message.starts_with(p));
        let message = match expected(&path) {
            Some(expected) if wrong_value => {
                let found = (secret(&path).then(|| text_kind(text, &span)).flatten())
                    .map_or_else(|| found(text, &span), str::to_owned);
                format!("expected {expected}, found {found} (line {line})")
            }
            _ => format!("{message} (line {line})"),
        };
        (key, message)
    }

    /// Whether `span` is in `table` (a key or a value): then `path` leads to the innermost
    /// key or element holding it.
    fn find<'t>(table: &'t DeTable<'_>, span: &Range<usize>, path: &mut Vec<Step<'t>>) -> bool {
        for (key, value) in table {
            if within(span, &key.span()) {
                path.push(Step::Key(key.get_ref()));
                return true;
            }
            path.push(Step::Key(key.get_ref()));
            if in_value(value, span, path) {
                return true;
            }
            path.pop();
        }
        false
    }

    /// Whether `span` is in `value`, a table's or an array's (a table given by a header spans
    /// the header alone, so tables and arrays are searched whatever their span).
    fn in_value<'t>(
        value: &'t Spanned<DeValue<'_>>,
        span: &Range<usize>,
        path: &mut Vec<Step<'t>>,
    ) -> bool {
        match value.get_ref() {
            DeValue::Table(inner) => find(inner, span, path) || within(span, &value.span()),
            DeValue::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    path.push(Step::Index(i));
                    if in_value(item, span, path) {
                        return true;
                    }
                    path.pop();
                }
                within(span, &value.span())
            }
            _ => within(span, &value.span()),
        }
    }

    fn within(span: &Range<usize>, outer: &Range<usize>) -> bool {
        outer.start <= span.start && span.end <= outer.end && outer.start < outer.end
    }

    /// The key as errors name it: `[harvest] max_attempts`, `[[repository]] "a" harvest.
    /// max_attempts` (or `#2` for a repository without a name), `include`.
    fn label(root: &DeTable<'_>, path: &[Step<'_>]) -> String {
        let keys = |steps: &[Step<'_>]| {
            steps
                .iter()
                .map(|s| match s {
                    Step::Key(k) => (*k).to_owned(),
                    Step::Index(i) => format!("[{i}]"),
                })
                .collect::<Vec<_>>()
                .join(".")
                .replace(".[", "[")
        };
        match path {
            [Step::Key("repository"), Step::Index(i), rest @ ..] => {
                let repo = match repository_name(root, *i) {
                    Some(name) => format!("[[repository]] {name:?}"),
                    None => format!("[[repository]] #{}", i + 1),
                };
                if rest.is_empty() {
                    repo
                } else {
                    format!("{repo} {}", keys(rest))
                }
            }
            [Step::Key("repository")] => "[[repository]]".to_owned(),
            [Step::Key(table @ ("server" | "harvest" | "state"))] => format!("[{table}]"),
            // An unknown table, `[serve]`.
            [Step::Key(key)]
                if root.iter().any(|(k, v)| {
                    k.get_ref() == key && matches!(v.get_ref(), DeValue::Table(_))
                }) =>
            {
                format!("[{key}]")
            }
            [
                Step::Key(table @ ("server" | "harvest" | "state")),
                rest @ ..,
            ] => {
                format!("[{table}] {}", keys(rest))
            }
            _ => keys(path),
        }
    }

    /// The `name` of the `i`-th `[[repository]]`, when it has one.
    fn repository_name(root: &DeTable<'_>, i: usize) -> Option<String> {
        let (_, repos) = root.iter().find(|(k, _)| k.get_ref() == "repository")?;
        let DeValue::Array(repos) = repos.get_ref() else {
            return None;
        };
        let DeValue::Table(repo) = repos.get(i)?.get_ref() else {
            return None;
        };
        let (_, name) = repo.iter().find(|(k, _)| k.get_ref() == "name")?;
        match name.get_ref() {
            DeValue::String(name) => Some(name.to_string()),
            _ => None,
        }
    }

    /// What the key at `path` takes ([`keys::takes`]): by its name, or for an entry of a table
    /// of free keys by the table's name.
    fn expected(path: &[Step<'_>]) -> Option<&'static str> {
        let keys: Vec<&str> = path
            .iter()
            .filter_map(|s| match s {
                Step::Key(k) => Some(*k),
                Step::Index(_) => None,
            })
            .collect();
        let free = |table: &str| super::keys::all().any(|k| k.name == table && k.entries.is_some());
        match keys.as_slice() {
            [.., table, _] if free(table) => super::keys::takes(&format!("{table}.*")),
            [.., last] => super::keys::takes(last),
            [] => None,
        }
    }

    /// Whether the key at `path` holds a secret (or is in a table of them): the admin token,
    /// the database's URL, the harvest headers, an IndexNow key. Text written there is not
    /// repeated, only its kind ([`text_kind`]).
    fn secret(path: &[Step<'_>]) -> bool {
        let keys: Vec<&str> = path
            .iter()
            .filter_map(|s| match s {
                Step::Key(k) => Some(*k),
                Step::Index(_) => None,
            })
            .collect();
        keys.iter().any(|k| matches!(*k, "admin_token" | "headers"))
            || matches!(keys.as_slice(), ["state", "url"] | [.., "indexnow", "key"])
    }

    /// What kind of value the text at `span` is, said without it. A secret written as a number
    /// (a PIN, a numeric API key) is as secret as one in quotes.
    fn text_kind(text: &str, span: &Range<usize>) -> Option<&'static str> {
        let written = text.get(span.clone()).unwrap_or("").trim_start();
        Some(match written.bytes().next()? {
            b'"' | b'\'' => "a string",
            b'[' => "an array",
            b'{' => "a table",
            b't' | b'f' => "a boolean",
            // A TOML date starts with its four-digit year and a dash.
            _ if written.get(4..5) == Some("-")
                && written[..4].bytes().all(|b| b.is_ascii_digit()) =>
            {
                "a date"
            }
            _ => "a number",
        })
    }

    /// The text serde refused, as written, on one line and cut short when long.
    fn found(text: &str, span: &Range<usize>) -> String {
        const MAX: usize = 60;
        let written = text.get(span.clone()).unwrap_or("").trim();
        let one_line = written.split_whitespace().collect::<Vec<_>>().join(" ");
        if one_line.chars().count() > MAX {
            let cut: String = one_line.chars().take(MAX).collect();
            format!("{cut}...")
        } else {
            one_line
        }
    }
}

/// `include`: files of `[[repository]]` tables (one file per repository, for a consortium's
/// hundreds), named by a pattern relative to the main file's folder.
mod include {
    use super::{ConfigError, RawIncluded, RawRepository, line_of};
    use std::path::{Path, PathBuf};

    /// The files `pattern` names, from `base_dir`, in name order: a path, or one whose last
    /// part has `*` (any run of characters) or `?` (one character) in it, as
    /// `repositories.d/*.toml`. A pattern without them names a file that must exist; one with
    /// them may name none.
    ///
    /// Written here rather than taken from a glob crate: one wildcard part is all a folder of
    /// configuration files needs, and the rules stay the few a reader can check.
    pub(super) fn expand(base_dir: &Path, pattern: &str) -> Result<Vec<PathBuf>, String> {
        let path = base_dir.join(pattern);
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let dir = path.parent().unwrap_or(base_dir);
        if dir.to_str().is_some_and(|d| d.contains(['*', '?'])) {
            return Err(format!(
                "{pattern:?}: only the file name may hold * or ?, not the folders"
            ));
        }
        if !name.contains(['*', '?']) {
            return Ok(vec![path]);
        }
        let entries = std::fs::read_dir(dir)
            .map_err(|e| format!("{pattern:?}: cannot read {}: {e}", dir.display()))?;
        let mut files: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .filter(|e| {
                let file_name = e.file_name();
                let file_name = file_name.to_string_lossy();
                // Hidden files (an editor's swap file) are never read.
                !file_name.starts_with('.') && matches(name.as_bytes(), file_name.as_bytes())
            })
            .filter(|e| e.file_type().is_ok_and(|t| !t.is_dir()))
            .map(|e| e.path())
            .collect();
        files.sort();
        Ok(files)
    }

    /// Whether `name` matches `pattern`: `*` any run of bytes, `?` one, the rest itself.
    pub(super) fn matches(pattern: &[u8], name: &[u8]) -> bool {
        match (pattern.split_first(), name.split_first()) {
            (None, None) => true,
            (Some((b'*', rest)), _) => {
                matches(rest, name) || (!name.is_empty() && matches(pattern, &name[1..]))
            }
            (Some((b'?', rest)), Some((_, tail))) => matches(rest, tail),
            (Some((p, rest)), Some((n, tail))) if p == n => matches(rest, tail),
            _ => false,
        }
    }

    /// The `[[repository]]` tables of the included file `path`; anything else in it is an
    /// error naming the file and the key.
    pub(super) fn read(path: &Path) -> Result<Vec<RawRepository>, ConfigError> {
        let file = path.display().to_string();
        let err = |key: String, message: String| ConfigError {
            file: file.clone(),
            key,
            message,
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| err("(file)".to_owned(), format!("cannot read: {e}")))?;
        let table: toml::Table = toml::from_str(&text).map_err(|e| {
            let key = e.span().map_or_else(
                || "(syntax)".to_owned(),
                |s| format!("line {}", line_of(&text, s.start)),
            );
            err(key, e.message().to_owned())
        })?;
        super::warn_if_exposed(path, &text);
        if let Some(key) = table.keys().find(|k| *k != "repository") {
            let key = if table[key].is_table() {
                format!("[{key}]")
            } else {
                key.clone()
            };
            return Err(err(
                key,
                "an included file holds [[repository]] tables only; [server], [harvest] and \
                 include belong in the main file"
                    .to_owned(),
            ));
        }
        let raw: RawIncluded = toml::from_str(&text).map_err(|e| {
            let (key, message) = super::typed::explain(&text, &e);
            err(key, message)
        })?;
        Ok(raw.repository)
    }
}

/// `[server]` over its defaults; `Err` names the key and what is wrong with it.
fn parse_server(raw: RawServer, at: &keys::At<'_>) -> Result<ServerConfig, (&'static str, String)> {
    let mut server = ServerConfig::defaults(at);
    raw.apply(&mut server, at)?;
    if let Some(admin) = server.admin_listen
        && listeners_clash(server.listen, admin)
    {
        return Err((
            "admin_listen",
            listeners_clash_message(admin, "[server] listen", server.listen),
        ));
    }
    Ok(server)
}

/// `[server] listen`: an address:port.
pub(crate) fn parse_listen(value: &str) -> Result<SocketAddr, String> {
    (value.parse()).map_err(|e| format!("{value:?} is not an address:port: {e}"))
}

/// `[server] publish_url`: object storage (`s3://bucket/prefix/`, `gs://`, `az://`, `file://`)
/// as a folder URL, ending in `/`.
pub(crate) fn parse_publish_url(value: &str) -> Result<crate::publish::BucketUrl, String> {
    match crate::publish::Output::parse(value)? {
        crate::publish::Output::Bucket(url) => Ok(url.as_folder()),
        crate::publish::Output::Folder(_) => Err(format!(
            "{value:?} is not object storage: s3://bucket/prefix/, gs://, az:// or file://"
        )),
    }
}

/// Whether the public listener at `listen` and the admin listener at `admin` would fight over
/// one port, so that `serve` could not bind the second: the same nonzero port on the same
/// address, or on any address when either is the unspecified one (0.0.0.0 or ::). Port 0 on
/// both is two ephemeral ports, no clash.
pub(crate) fn listeners_clash(listen: SocketAddr, admin: SocketAddr) -> bool {
    listen.port() != 0
        && listen.port() == admin.port()
        && (listen.ip() == admin.ip()
            || listen.ip().is_unspecified()
            || admin.ip().is_unspecified())
}

/// The message of a [`listeners_clash`], said of the key that gave `this`: `other_key` gave
/// `other`, the other listener's address.
pub(crate) fn listeners_clash_message(
    this: SocketAddr,
    other_key: &str,
    other: SocketAddr,
) -> String {
    format!(
        "{this} takes the port of {other_key} ({other}): the public and the admin listener \
         each need a port of their own (or admin_listen \"off\")"
    )
}

/// `[server] admin_listen`: an address:port, or `""` / `"off"` for no admin listener.
pub(crate) fn parse_admin_listen(value: &str) -> Result<Option<SocketAddr>, String> {
    let value = value.trim();
    if value.is_empty() || value.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    value.parse().map(Some).map_err(|e| {
        format!("{value:?} is not an address:port (or \"off\" for no admin listener): {e}")
    })
}

/// The `[harvest]` defaults: the OAI-PMH client's, with the bridge's `User-Agent`, and
/// `oai-bridge check` named in the error of an answer that is no OAI-PMH answer.
pub(crate) fn default_harvest() -> HarvestSettings {
    HarvestSettings {
        user_agent: DEFAULT_USER_AGENT.to_owned(),
        diagnose_command: Some(DIAGNOSE_COMMAND.to_owned()),
        ..HarvestSettings::default()
    }
}

/// What `[harvest]` sets, and a `[repository.harvest]` over it: the OAI-PMH client's
/// settings, whether to learn from the web, and (from `[harvest]` only) the gateway's limits.
#[derive(Clone, Debug)]
pub(crate) struct HarvestTarget {
    /// How upstreams are treated.
    pub harvest: HarvestSettings,
    /// `learn_from_web`.
    pub learn_from_web: bool,
    /// The gateway's limits on refreshes.
    pub fleet: FleetSettings,
    /// `memory_budget_bytes`: bytes one harvest holds before it spills.
    pub memory_budget: u64,
}

impl HarvestTarget {
    /// `[harvest]`'s defaults.
    fn defaults() -> HarvestTarget {
        HarvestTarget {
            harvest: default_harvest(),
            learn_from_web: DEFAULT_LEARN_FROM_WEB,
            fleet: FleetSettings::default(),
            memory_budget: crate::spill::DEFAULT_MEMORY_BUDGET,
        }
    }
}

/// What a file's `[harvest]` (or `[repository.harvest]`) must hold beyond each key's own
/// check, and the environment and the flags need not: a user agent, a body cap of at least
/// 1 KiB, a first retry delay no longer than the longest (a flag's raises the longest).
fn check_file_harvest(h: &HarvestSettings) -> Result<(), (&'static str, String)> {
    if h.user_agent.trim().is_empty() {
        return Err(("user_agent", "must not be empty".to_owned()));
    }
    if h.max_body_bytes < 1024 {
        return Err(("max_body_bytes", "must be at least 1024".to_owned()));
    }
    if h.backoff_initial > h.backoff_max {
        return Err((
            "backoff_initial_ms",
            "must not exceed backoff_max_secs".to_owned(),
        ));
    }
    Ok(())
}

/// A `[repository.harvest]` table over `[harvest]`: every key of `[harvest]` but the
/// gateway-wide ones; `Err` names the key.
fn parse_repository_harvest(
    raw: Option<RawHarvest>,
    harvest: &HarvestTarget,
    at: &keys::At<'_>,
) -> Result<HarvestTarget, (&'static str, String)> {
    let Some(raw) = raw else {
        return Ok(harvest.clone());
    };
    let gateway_wide = |name: &str| {
        keys::HARVEST
            .iter()
            .any(|k| k.name == name && k.gateway_wide)
    };
    if let Some(key) = raw.given().into_iter().find(|k| gateway_wide(k)) {
        return Err((
            key,
            "is gateway-wide: set it in [harvest], not in a repository's table".to_owned(),
        ));
    }
    let mut own = harvest.clone();
    raw.apply(&mut own, at)?;
    check_file_harvest(&own.harvest)?;
    Ok(own)
}

/// One repository's settings as the layers set them: its `[[repository]]` keys (the defaults
/// when a command takes none), then the environment and the flags over them.
#[derive(Clone, Debug)]
pub(crate) struct RepositorySettings {
    /// Its name; `None` when no file names the repository.
    pub name: Option<String>,
    /// The upstream; `None` when neither the file nor an override names one.
    pub source: Option<Source>,
    /// Where its files are published, when given (not yet derived from `[server]`).
    pub public_url: Option<Url>,
    /// Sets to harvest; empty for all.
    pub sets: Vec<String>,
    /// Scope prefixes replacing the default.
    pub scope: Vec<Url>,
    /// Where the records' landing pages are.
    pub landing: crate::platform::LandingSettings,
    /// Lower datestamp bound.
    pub from: Option<Datestamp>,
    /// Upper datestamp bound.
    pub until: Option<Datestamp>,
    /// Shard limits.
    pub limits: Limits,
    /// Write `.xml.gz` shards.
    pub gzip: bool,
    /// The relations of a landing page's Signposting `Link` header.
    pub signposting_header: Vec<String>,
    /// Days a Change List keeps a change (`serve`); 0: no ResourceSync.
    pub changelist_days: u32,
    /// The profiles published beside the sitemap.
    pub profiles: ProfileSettings,
    /// Time between refreshes (`serve`).
    pub refresh_interval: Duration,
    /// How the store is used.
    pub policy: crate::incremental::Policy,
    /// Its IndexNow pings, when `[repository.indexnow]` is given.
    pub indexnow: Option<crate::indexnow::IndexNowConfig>,
}

impl Default for RepositorySettings {
    fn default() -> Self {
        RepositorySettings {
            name: None,
            source: None,
            public_url: None,
            sets: Vec::new(),
            scope: Vec::new(),
            landing: crate::platform::LandingSettings::default(),
            from: None,
            until: None,
            limits: Limits::default(),
            gzip: false,
            signposting_header: crate::profiles::signmap::HEADER_RELATIONS
                .map(str::to_owned)
                .to_vec(),
            changelist_days: DEFAULT_CHANGELIST_DAYS,
            profiles: ProfileSettings::default(),
            refresh_interval: DEFAULT_REFRESH_INTERVAL,
            policy: crate::incremental::Policy::default(),
            indexnow: None,
        }
    }
}

impl RepositorySettings {
    /// The repository these settings make, named `name`, reading `source`, its upstream
    /// treated as `harvest` says, configured in `file`.
    pub(crate) fn into_repository(
        self,
        name: String,
        source: Source,
        harvest: (HarvestSettings, bool),
        file: String,
    ) -> RepositoryConfig {
        RepositoryConfig {
            name,
            source,
            public_url: self.public_url,
            sets: self.sets,
            scope: self.scope,
            landing: self.landing,
            from: self.from,
            until: self.until,
            limits: self.limits,
            gzip: self.gzip,
            signposting_header: self.signposting_header,
            changelist_days: self.changelist_days,
            profiles: self.profiles,
            refresh_interval: self.refresh_interval,
            harvest: harvest.0,
            learn_from_web: harvest.1,
            file,
            policy: self.policy,
            indexnow: self.indexnow,
        }
    }
}

/// A `[[repository]]` read from `from`, its name not taken `before` it; `Err` names the key.
fn parse_repository(
    mut r: RawRepository,
    before: &ReadSoFar,
    from: &Origin<'_>,
) -> Result<RepositoryConfig, (String, String)> {
    let label = match &r.name {
        Some(name) => format!("[[repository]] {name:?}"),
        None => format!(
            "[[repository]] #{}",
            before.list.iter().filter(|b| b.file == from.file).count() + 1
        ),
    };
    let key = |k: &str| format!("{label} {k}");
    let name = r
        .name
        .clone()
        .ok_or_else(|| (key("name"), "is required".to_owned()))?;
    check_name(&name, before, from.file).map_err(|m| (key("name"), m))?;
    if r.base_url.is_none() {
        return Err((key("base_url"), "is required".to_owned()));
    }
    let (ocx, harvest, indexnow) = (r.ocx.take(), r.harvest.take(), r.indexnow.take());
    let at = keys::At {
        base_dir: from.base_dir,
    };
    let mut s = RepositorySettings::default();
    s.landing.platforms = from.platforms.clone();
    s.landing.web = crate::platform::Resolvers::for_commands();
    r.apply(&mut s, &at).map_err(|(k, m)| (key(k), m))?;
    s.limits =
        (s.limits.validate()).map_err(|m| (key("max_urls_per_shard / max_bytes_per_shard"), m))?;
    if let Some(raw) = ocx {
        s.profiles.ocx = parse_ocx(raw, &at).map_err(|(k, m)| (key(&format!("ocx.{k}")), m))?;
    }
    if let Some(raw) = indexnow {
        s.indexnow =
            Some(parse_indexnow(raw, &at).map_err(|(k, m)| (key(&format!("indexnow.{k}")), m))?);
    }
    let harvest = parse_repository_harvest(harvest, from.harvest, &at)
        .map_err(|(k, m)| (key(&format!("harvest.{k}")), m))?;
    check_range(s.from, s.until).map_err(|m| (key("from"), m))?;
    let source = s.source.take().expect("base_url is given");
    let harvest = (harvest.harvest, harvest.learn_from_web);
    Ok(s.into_repository(name, source, harvest, from.file.to_owned()))
}

/// A repository's `name` (read in `file`): letters, digits, '-' and '_', not `_other`, used by
/// no repository `before` it.
fn check_name(name: &str, before: &ReadSoFar, file: &str) -> Result<(), String> {
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(format!("{name:?}: use letters, digits, '-' and '_' only"));
    }
    // The metrics sum the repositories beyond [server] metrics_repository_series under it.
    if name == crate::server::metrics::OTHER {
        return Err(format!(
            "{name:?} is reserved: /metrics sums repositories under it"
        ));
    }
    if let Some(other) = before.named(name) {
        if other.file == file {
            return Err(format!("{name:?} is used by two repositories"));
        }
        return Err(format!(
            "{name:?} is used by two repositories: also in {}",
            other.file
        ));
    }
    Ok(())
}

impl Config {
    /// Where `repo`'s files are under `[server] public_url` (`{public_url}{name}/`), when that
    /// is set: `export` and `check` take it when the repository sets no `public_url` of its own.
    pub fn public_url_under_server(&self, repo: &RepositoryConfig) -> Option<Url> {
        let server = self.server.public_url.as_ref()?;
        server.join(&format!("{}/", repo.name)).ok()
    }

    /// The memory and disk the gateway's refreshes share: `[server] memory_budget_bytes`
    /// (by default `max_concurrent_refreshes` times `[harvest] memory_budget_bytes`, so that
    /// the refreshes running at once hold what each would alone), each refresh's own cap
    /// (`[harvest] memory_budget_bytes`), and `[server] spill_max_bytes`.
    pub(crate) fn pool_limits(&self) -> crate::spill::PoolLimits {
        let refreshes = self.fleet.max_concurrent_refreshes as u64;
        crate::spill::PoolLimits {
            memory: (self.server.memory_budget)
                .unwrap_or_else(|| self.memory_budget.saturating_mul(refreshes)),
            per_refresh: self.memory_budget,
            spill_max: self.server.spill_max,
        }
    }

    /// A memory budget too small for the refreshes that may run at once: each then spills in
    /// runs so small that merging them takes several passes.
    fn memory_warning(&self) -> Option<String> {
        let limits = self.pool_limits();
        let refreshes = self.fleet.max_concurrent_refreshes as u64;
        let each = limits.memory / refreshes.max(1);
        let least = crate::spill::MIN_REFRESH_MEMORY.min(limits.per_refresh);
        (each < least).then(|| {
            format!(
                "[server] memory_budget_bytes = {} leaves each of the {refreshes} refreshes \
                 that may run at once (max_concurrent_refreshes) {each} bytes when all of them \
                 hold memory, less than {least}: a large repository's refresh then spills many \
                 small runs and merges them in several passes; raise memory_budget_bytes or \
                 lower max_concurrent_refreshes",
                limits.memory
            )
        })
    }

    /// What is valid but likely wrong, a sentence each, for `serve` to log at start and at a
    /// reload, and for `serve --check-config` to print: a memory budget too small for the
    /// refreshes that may run at once; a state database reached in cleartext or without its
    /// certificate checked, off loopback ([`StateUrl::warning`]); two repositories whose names differ only in case, or
    /// that harvest the same thing. (The public URL's is
    /// [`public_url_warning`], said of the address the gateway listens on once bound; a
    /// listener on a repository's own port is the server's `preflight`, which binds it.)
    pub(crate) fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        warnings.extend(self.memory_warning());
        let state_url = self
            .state
            .url
            .as_ref()
            .and_then(crate::store::StateUrl::warning);
        warnings.extend(state_url.map(|w| format!("[state] url {w}")));
        let repos = &self.repositories;
        for (i, j) in Self::alike(repos) {
            let (a, b) = (&repos[i], &repos[j]);
            if a.name != b.name && a.name.eq_ignore_ascii_case(&b.name) {
                warnings.push(format!(
                    "[[repository]] {:?}{} and {:?}{} differ only in case: their URLs \
                         (/{}/ and /{}/) and state folders are one on a file system, proxy or \
                         CDN that ignores case; rename one",
                    a.name,
                    in_file(a, b),
                    b.name,
                    in_file(b, a),
                    a.name,
                    b.name
                ));
            }
            if harvest_the_same(a, b) {
                warnings.push(format!(
                    "[[repository]] {:?}{} and {:?}{} harvest the same {} ({}): the upstream \
                         is harvested twice and its pages published in two sitemaps; remove \
                         one, or give each its own sets",
                    a.name,
                    in_file(a, b),
                    b.name,
                    in_file(b, a),
                    match a.source {
                        Source::Oai(_) => "baseURL",
                        Source::File(_) => "file",
                    },
                    match (a.sets.is_empty(), a.from.is_some() || a.until.is_some()) {
                        (true, false) => format!("{}, every set", a.source),
                        (true, true) => format!("{}, the same dates", a.source),
                        (false, _) => format!("{}, sets {}", a.source, a.sets.join(", ")),
                    }
                ));
            }
        }
        warnings
    }

    /// The pairs of `repos` (by index, in order) that may warn: those whose names are one
    /// ignoring case, or that read the same source. Found by grouping, not by comparing every
    /// pair: a fleet of ten thousand repositories would be fifty million pairs, ten seconds of
    /// each start and reload.
    fn alike(repos: &[RepositoryConfig]) -> std::collections::BTreeSet<(usize, usize)> {
        let mut groups: std::collections::HashMap<String, Vec<usize>> =
            std::collections::HashMap::new();
        for (i, r) in repos.iter().enumerate() {
            let source = match &r.source {
                Source::Oai(url) => format!("oai {url}"),
                Source::File(path) => {
                    let path: PathBuf = path.components().collect();
                    format!("file {}", path.display())
                }
            };
            groups.entry(source).or_default().push(i);
            let name = format!("name {}", r.name.to_ascii_lowercase());
            groups.entry(name).or_default().push(i);
        }
        let mut pairs = std::collections::BTreeSet::new();
        for members in groups.values() {
            for (k, &i) in members.iter().enumerate() {
                for &j in &members[k + 1..] {
                    pairs.insert((i, j));
                }
            }
        }
        pairs
    }

    /// The repository whose baseURL is on `addr`'s port of this host (a loopback host, and
    /// `addr` on loopback or every address), when one is: a DSpace whose Tomcat listens on
    /// 127.0.0.1:8080, the gateway's default `listen`.
    pub(crate) fn repository_on_port(&self, addr: SocketAddr) -> Option<&RepositoryConfig> {
        if addr.port() == 0 || !(addr.ip().is_loopback() || addr.ip().is_unspecified()) {
            return None;
        }
        self.repositories.iter().find(|r| match &r.source {
            Source::Oai(url) => {
                crate::scope::is_loopback(url) && url.port_or_known_default() == Some(addr.port())
            }
            Source::File(_) => false,
        })
    }
}

/// `" (in FILE)"` when `a` and `b` are configured in different files.
fn in_file(a: &RepositoryConfig, b: &RepositoryConfig) -> String {
    if a.file == b.file {
        String::new()
    } else {
        format!(" (in {})", a.file)
    }
}

/// Whether `a` and `b` ask the same upstream for the same records: the same source, the same
/// sets (in any order) and the same dates. (Their metadata format is oai_dc for both.)
fn harvest_the_same(a: &RepositoryConfig, b: &RepositoryConfig) -> bool {
    let sets = |r: &RepositoryConfig| {
        let mut sets = r.sets.clone();
        sets.sort();
        sets.dedup();
        sets
    };
    a.source == b.source && sets(a) == sets(b) && (a.from, a.until) == (b.from, b.until)
}

/// What follows `{key} {addr}` when `repo`'s baseURL is on that port of this host
/// ([`Config::repository_on_port`]).
pub(crate) fn repository_on_port_message(
    key: &str,
    addr: SocketAddr,
    repo: &RepositoryConfig,
) -> String {
    let flags = listener_flags(key);
    format!(
        "is the port of [[repository]] {:?}'s baseURL {}, on this host (a DSpace's Tomcat \
         listens on 127.0.0.1:8080, the gateway's default port): the repository and the gateway \
         cannot both listen there. Set {key} ({flags}) to a free port, e.g. \"{}:{}\", and \
         point the reverse proxy's sitemap location at it",
        repo.name,
        repo.source,
        addr.ip(),
        suggested_port(addr.port()),
    )
}

/// The variable and the flag over the listener `key` (`[server] listen` or `admin_listen`),
/// as their declarations give them: `OAI_BRIDGE_LISTEN, --listen`.
pub(crate) fn listener_flags(key: &str) -> String {
    let name = key.rsplit(' ').next().unwrap_or(key);
    let Some(declared) = keys::SERVER.iter().find(|k| k.name == name) else {
        return String::new();
    };
    let variable = declared.env.map(|(variable, _)| variable);
    let flags = (declared.flags.iter())
        .filter(|(command, _)| *command == keys::CommandName::Serve)
        .map(|(_, flag)| *flag);
    variable
        .into_iter()
        .chain(flags)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A port to suggest instead of `port`: the next one up that no common web service takes.
fn suggested_port(port: u16) -> u16 {
    match port {
        8080 | 8081 => 8090,
        p => p.checked_add(10).unwrap_or(p - 10),
    }
}

/// The public URL when none is configured: the listen address, with loopback for "any".
pub(crate) fn default_public_url(addr: SocketAddr) -> Url {
    let mut addr = addr;
    if addr.ip().is_unspecified() {
        addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    Url::parse(&format!("http://{addr}/")).expect("an address makes a URL")
}

/// Why crawlers cannot use `effective`, the public URL in force, when they cannot: none is
/// `configured` (the default names the listen address), or it is on a loopback address (the
/// status page's test, [`crate::scope::is_loopback`]). One sentence, for the log at start,
/// `serve --check-config` and the status page alike.
pub(crate) fn public_url_warning(configured: Option<&Url>, effective: &Url) -> Option<String> {
    const SET: &str = "set public_url ([server], OAI_BRIDGE_PUBLIC_URL or --public-url) to the \
                       URL crawlers use";
    let loopback = crate::scope::is_loopback(effective);
    match (configured, loopback) {
        (None, true) => Some(format!(
            "no [server] public_url: the sitemaps, their index and robots.txt name {effective}, \
             which is a loopback address no crawler can reach; {SET}"
        )),
        (None, false) => Some(format!(
            "no [server] public_url: the sitemaps, their index and robots.txt name {effective}, \
             the gateway's listen address, not where crawlers reach it through the site; {SET}"
        )),
        (Some(url), true) => Some(format!(
            "the public URL {url} is a loopback address: the sitemaps, their index and \
             robots.txt name URLs no crawler can reach; {SET}"
        )),
        (Some(_), false) => None,
    }
}

impl Default for Config {
    fn default() -> Self {
        Config::parse("", "(defaults)", Path::new(".")).expect("the defaults are valid")
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())]
        .bytes()
        .filter(|&b| b == b'\n')
        .count()
        + 1
}

/// An absolute http(s) URL naming a directory; a missing trailing `/` is added.
pub(crate) fn directory_url(value: &str) -> Result<Url, String> {
    let mut url =
        Url::parse(value).map_err(|e| format!("{value:?} is not an absolute URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(format!("{value:?} must be an http(s) URL"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!("{value:?} must not have a query or fragment"));
    }
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    Ok(url)
}

pub(crate) use crate::profiles::diwoo::CATEGORIES as DIWOO_CATEGORIES;

/// A DiWoo table: setSpec -> information category 1-17.
pub(crate) fn parse_diwoo(
    table: &std::collections::BTreeMap<String, i64>,
) -> Result<Vec<(String, u8)>, String> {
    let sets = validate_sets(table.keys().cloned().collect())?;
    sets.into_iter()
        .map(|set| {
            let n = table[&set];
            match u8::try_from(n) {
                Ok(c) if (1..=DIWOO_CATEGORIES).contains(&c) => Ok((set, c)),
                _ => Err(format!(
                    "set {set:?}: {n} is not a Woo information category (1 to {DIWOO_CATEGORIES})"
                )),
            }
        })
        .collect()
}

/// `SETSPEC=N` entries (`export --diwoo`) -> a DiWoo table.
pub(crate) fn parse_diwoo_entries(entries: &[String]) -> Result<Vec<(String, u8)>, String> {
    let mut table = std::collections::BTreeMap::new();
    for entry in entries {
        let (set, n) = entry
            .rsplit_once('=')
            .ok_or_else(|| format!("{entry:?}: give SETSPEC=CATEGORY"))?;
        let n: i64 = n
            .parse()
            .map_err(|_| format!("{entry:?}: the category is a number"))?;
        table.insert(set.to_owned(), n);
    }
    parse_diwoo(&table)
}

/// `platform`: `auto`, `generic`, or the name of a row of `platforms`.
pub(crate) fn parse_platform(
    value: &str,
    platforms: &crate::platform::Registry,
) -> Result<crate::platform::Setting, String> {
    crate::platform::Setting::parse(value, platforms).ok_or_else(|| {
        format!(
            "{value:?} is not a platform: use one of {}",
            platforms.names()
        )
    })
}

/// `ui_url`: where a DSpace UI serves `/handle/P/S`, an absolute http(s) URL with a host and
/// neither query nor fragment.
pub(crate) fn parse_ui_url(value: &str) -> Result<Url, String> {
    let url = Url::parse(value).map_err(|e| format!("{value:?} is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(format!("{value:?} must be an http(s) URL with a host"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!(
            "{value:?} must have no query or fragment: give the UI's root, e.g. https://host/"
        ));
    }
    Ok(url)
}

/// `landing_template`: a URL with `{handle}`, `{doi}` or `{oai_local}` placeholders.
pub(crate) fn parse_template(value: &str) -> Result<crate::platform::Template, String> {
    crate::platform::Template::parse(value).map_err(|m| format!("{value:?}: {m}"))
}

/// Scope prefixes: absolute http(s) URLs.
pub(crate) fn parse_scope(values: &[String]) -> Result<Vec<Url>, String> {
    values
        .iter()
        .map(|v| {
            let url = Url::parse(v).map_err(|e| format!("{v:?} is not an absolute URL: {e}"))?;
            if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
                return Err(format!("{v:?} must be an http(s) URL"));
            }
            Ok(url)
        })
        .collect()
}

/// Set specs: colon-separated parts of unreserved characters (OAI-40).
/// The relations of a Signposting `Link` header: each one the gateway can send, once.
pub(crate) fn parse_header_relations(relations: Vec<String>) -> Result<Vec<String>, String> {
    let known = crate::profiles::signmap::HEADER_RELATIONS;
    for (i, rel) in relations.iter().enumerate() {
        if !known.contains(&rel.as_str()) {
            return Err(format!(
                "{rel:?} is not a relation the gateway sends; it sends {}",
                known.join(", ")
            ));
        }
        if relations[..i].contains(rel) {
            return Err(format!("{rel:?} is named twice"));
        }
    }
    Ok(relations)
}

pub(crate) fn validate_sets(sets: Vec<String>) -> Result<Vec<String>, String> {
    for set in &sets {
        let ok = !set.is_empty()
            && set.split(':').all(|part| {
                !part.is_empty()
                    && part
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&b))
            });
        if !ok {
            return Err(format!("{set:?} is not a valid setSpec"));
        }
    }
    Ok(sets)
}

/// A `from`/`until` date: `YYYY-MM-DD` or `YYYY-MM-DDThh:mm:ssZ`, or a time with an offset
/// (converted to UTC), as [`Datestamp::parse`] reads them.
pub(crate) fn parse_date(value: &str) -> Result<Datestamp, String> {
    Datestamp::parse(value).ok_or_else(|| {
        format!("{value:?} is not YYYY-MM-DD or YYYY-MM-DDThh:mm:ssZ (or hh:mm:ss+hh:mm)")
    })
}

/// `from` must not be after `until` (OAI-17).
pub(crate) fn check_range(from: Option<Datestamp>, until: Option<Datestamp>) -> Result<(), String> {
    match (from, until) {
        (Some(f), Some(u)) if f.unix() > u.last_second() => {
            Err(format!("from ({f}) is after until ({u})"))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn rejects(text: &str, key: &str, message: &str) {
        let e = Config::parse(text, "bridge.toml", Path::new("/etc/oai-bridge")).unwrap_err();
        assert!(e.key.contains(key), "key {:?} should name {key:?}", e.key);
        assert!(
            e.message.contains(message),
            "message {:?} should say {message:?}",
            e.message
        );
    }

    /// `admin_token_file`: the file's token, relative to the configuration's folder; not beside
    /// `admin_token`; a file it cannot read is named. A secret given with the wrong type is
    /// said by its kind, not quoted.
    #[test]
    fn the_admin_token_comes_from_its_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), "0123456789abcdef-from-file\r\n").unwrap();
        let text = "[server]\nadmin_token_file = \"token\"\n";
        let config = Config::parse(text, "bridge.toml", dir.path()).unwrap();
        let want = AdminToken::new("0123456789abcdef-from-file").unwrap();
        assert_eq!(config.server.admin_token, Some(want));
        let both = "[server]\nadmin_token = \"0123456789abcdef\"\nadmin_token_file = \"token\"\n";
        rejects(
            both,
            "[server] admin_token_file",
            "admin_token is given too",
        );
        rejects(
            "[server]\nadmin_token_file = \"/nonexistent/token\"\n",
            "[server] admin_token_file",
            "cannot read the secret file /nonexistent/token",
        );
        rejects(
            "[server]\nadmin_token = { token = \"s3cr3t\" }\n",
            "[server] admin_token",
            "found a table",
        );
        rejects(
            "[[repository]]\nname = \"a\"\nbase_url = \"https://h/oai\"\n\
             [repository.harvest]\nheaders = [\"Bearer s3cr3t\"]\n",
            "headers",
            "found an array",
        );
    }

    /// A secret written as a number, a boolean or a date is not repeated either: said by kind.
    #[test]
    fn a_secret_of_the_wrong_type_is_never_repeated() {
        let repo = "[[repository]]\nname = \"a\"\nbase_url = \"https://h/oai\"\n";
        for (text, key, kind, written) in [
            (
                "[server]\nadmin_token = 987654321987654321\n".to_owned(),
                "[server] admin_token",
                "found a number",
                "987654321987654321",
            ),
            (
                format!("{repo}[repository.harvest]\nheaders = {{ X-Api-Key = 4242424242 }}\n"),
                "headers",
                "found a number",
                "4242424242",
            ),
            (
                format!("{repo}[repository.indexnow]\nkey = 2031-07-15\n"),
                "indexnow",
                "found a date",
                "2031-07-15",
            ),
            (
                "[state]\nurl = true\n".to_owned(),
                "[state] url",
                "found a boolean",
                "true",
            ),
        ] {
            let e = Config::parse(&text, "bridge.toml", Path::new("/etc/oai-bridge")).unwrap_err();
            assert!(e.key.contains(key), "key {:?} should name {key:?}", e.key);
            assert!(
                e.message.contains(kind),
                "{:?} should say {kind}",
                e.message
            );
            assert!(!e.to_string().contains(written), "{e} repeats {written}");
        }
    }

    #[test]
    fn empty_file_gives_the_defaults() {
        let c = Config::parse("", "bridge.toml", Path::new(".")).unwrap();
        assert_eq!(c.harvest, default_harvest());
        assert_eq!(c.server.listen.to_string(), DEFAULT_LISTEN);
        assert_eq!(
            c.server.admin_listen.map(|a| a.to_string()).as_deref(),
            Some(DEFAULT_ADMIN_LISTEN)
        );
        assert!(c.repositories.is_empty());
    }

    /// Issue 22: the minimum transfer rate is read from `[harvest]`, 0 turning it off; a
    /// window of 0 is an error naming its key.
    #[test]
    fn the_minimum_transfer_rate_is_read_and_checked() {
        let read = |text: &str| {
            Config::parse(text, "bridge.toml", Path::new("."))
                .unwrap()
                .harvest
        };
        let d = read("");
        assert_eq!(
            (d.min_transfer_bytes_per_sec, d.min_transfer_window),
            (1024, Duration::from_secs(30))
        );
        let h = read("[harvest]\nmin_transfer_bytes_per_sec = 100\nmin_transfer_window_secs = 5\n");
        assert_eq!(
            (h.min_transfer_bytes_per_sec, h.min_transfer_window),
            (100, Duration::from_secs(5))
        );
        assert_eq!(
            read("[harvest]\nmin_transfer_bytes_per_sec = 0\n").min_transfer_bytes_per_sec,
            0
        );
        rejects(
            "[harvest]\nmin_transfer_window_secs = 0\n",
            "[harvest] min_transfer_window_secs",
            "at least 1",
        );
        let e = Config::parse(
            "[harvest]\nmin_transfer_window_secs = 0\n",
            "bridge.toml",
            Path::new("."),
        )
        .unwrap_err();
        assert_eq!(e.file, "bridge.toml");
        // A negative rate is no u64: the key, what it takes and what it found.
        rejects(
            "[harvest]\nmin_transfer_bytes_per_sec = -1\n",
            "[harvest] min_transfer_bytes_per_sec",
            "expected a number of bytes a second, found -1 (line 2)",
        );
    }

    /// Issue 30: `metrics_repository_series` bounds the repositories with series of their own
    /// (100 unless set; 0: only the sums), and no repository may take the name their sums go
    /// under.
    #[test]
    fn the_metrics_bound_and_its_reserved_name() {
        let read = |text: &str| {
            (Config::parse(text, "bridge.toml", Path::new(".")).unwrap())
                .server
                .metrics_repository_series
        };
        assert_eq!(read(""), DEFAULT_METRICS_REPOSITORY_SERIES);
        assert_eq!(read("[server]\nmetrics_repository_series = 0\n"), 0);
        assert_eq!(read("[server]\nmetrics_repository_series = 5000\n"), 5000);
        rejects(
            "[server]\nmetrics_repository_series = -1\n",
            "[server] metrics_repository_series",
            "expected a whole number (0 or more), found -1",
        );
        rejects(
            "[[repository]]\nname = \"_other\"\nbase_url = \"r.xml\"\n",
            "name",
            "\"_other\" is reserved",
        );
    }

    /// `admin_listen = ""` or `"off"` switches the admin listener off.
    #[test]
    fn the_admin_listener_can_be_switched_off() {
        for off in ["", "off", "OFF"] {
            let text = format!("[server]\nadmin_listen = \"{off}\"\n");
            let c = Config::parse(&text, "bridge.toml", Path::new(".")).unwrap();
            assert_eq!(c.server.admin_listen, None, "{off:?}");
        }
        let c = Config::parse(
            "[server]\nadmin_listen = \"0.0.0.0:9000\"\n",
            "bridge.toml",
            Path::new("."),
        )
        .unwrap();
        assert_eq!(c.server.admin_listen, Some("0.0.0.0:9000".parse().unwrap()));
    }

    #[test]
    fn the_listeners_need_ports_of_their_own() {
        let addr = |s: &str| s.parse::<SocketAddr>().unwrap();
        for (listen, admin, clash) in [
            ("127.0.0.1:9000", "127.0.0.1:9000", true),
            ("0.0.0.0:9000", "127.0.0.1:9000", true),
            ("127.0.0.1:9000", "[::]:9000", true),
            ("[::]:9000", "0.0.0.0:9000", true),
            ("127.0.0.1:0", "127.0.0.1:0", false),
            ("0.0.0.0:0", "0.0.0.0:0", false),
            ("127.0.0.1:9000", "127.0.0.2:9000", false),
            ("0.0.0.0:9000", "0.0.0.0:9001", false),
        ] {
            assert_eq!(
                listeners_clash(addr(listen), addr(admin)),
                clash,
                "{listen} {admin}"
            );
        }
        rejects(
            "[server]\nlisten = \"0.0.0.0:8080\"\nadmin_listen = \"127.0.0.1:8080\"\n",
            "[server] admin_listen",
            "takes the port of [server] listen (0.0.0.0:8080)",
        );
        let off = "[server]\nlisten = \"127.0.0.1:8081\"\nadmin_listen = \"off\"\n";
        assert!(Config::parse(off, "bridge.toml", Path::new(".")).is_ok());
    }

    #[test]
    fn bad_values_name_their_key() {
        rejects(
            "[harvest]\nmax_atempts = 3\n",
            "[harvest] max_atempts",
            "unknown field `max_atempts`",
        );
        rejects(
            "[harvest]\nmax_attempts = 0\n",
            "[harvest] max_attempts",
            "at least 1",
        );
        rejects(
            "[server]\nlisten = \"nowhere\"\n",
            "[server] listen",
            "not an address",
        );
        rejects(
            "[server]\nadmin_listen = \"nowhere\"\n",
            "[server] admin_listen",
            "not an address",
        );
        rejects(
            "[[repository]]\nname = \"a\"\n",
            "[[repository]] \"a\" base_url",
            "required",
        );
        // G-01: a baseURL, not a request URL.
        rejects(
            "[[repository]]\nname = \"a\"\nbase_url = \"https://h/oai?verb=Identify\"\n",
            "base_url",
            "without verb",
        );
        rejects(
            "[[repository]]\nname = \"a\"\nbase_url = \"x.xml\"\n[[repository]]\nname = \"a\"\nbase_url = \"y.xml\"\n",
            "name",
            "used by two",
        );
        rejects(
            "[[repository]]\nname = \"a\"\nbase_url = \"x.xml\"\nmax_urls_per_shard = 60000\n",
            "max_urls_per_shard",
            "between",
        );
        rejects(
            "[[repository]]\nname = \"a\"\nbase_url = \"x.xml\"\nsets = [\"a b\"]\n",
            "sets",
            "setSpec",
        );
        rejects(
            "[[repository]]\nname = \"a\"\nbase_url = \"x.xml\"\nfrom = \"2020-02-01\"\nuntil = \"2020-01-01\"\n",
            "from",
            "after",
        );
        rejects(
            "[[repository]]\nname = \"a/b\"\nbase_url = \"x.xml\"\n",
            "name",
            "letters",
        );
    }

    /// An operator's `[[platform]]` is a row like the built-in ones: a repository may name it,
    /// and a mistake in it names its key.
    #[test]
    fn an_operators_platform_is_read_and_checked() {
        let row = "[[platform]]\nname = \"ours\"\ntitle = \"Our archive\"\nevidence = \"x\"\n\
                   oai_identifier = '^oai:[^:]+:(?<n>[0-9]+)$'\n\
                   landing = { from = \"template\", page = \"{site}show/{n}\" }\n";
        let repo = "[[repository]]\nname = \"a\"\nbase_url = \"x.xml\"\nplatform = \"Ours\"\n";
        let config = Config::parse(&format!("{row}{repo}"), "t.toml", Path::new(".")).unwrap();
        let landing = &config.repositories[0].landing;
        assert_eq!(
            landing.platform,
            crate::platform::Setting::Fixed("ours".into())
        );
        assert_eq!(landing.fixed().unwrap().as_str(), "ours");
        assert!(landing.platforms.names().contains("ours"));
        rejects(
            &row.replace("{site}show/{n}", "{site}show/{id}"),
            "[[platform]] \"ours\" landing.page",
            "unknown placeholder {id}",
        );
        rejects(
            &format!("{row}landing_rule = 1\n"),
            "platform[0].landing_rule",
            "unknown field `landing_rule`",
        );
    }

    /// Issue 20: the landing settings are checked when the file loads, each naming its key.
    #[test]
    fn landing_settings_are_checked_when_read() {
        let repo = "[[repository]]\nname = \"a\"\nbase_url = \"x.xml\"\n";
        rejects(
            &format!("{repo}platform = \"dspace7\"\n"),
            "[[repository]] \"a\" platform",
            "use one of auto, generic, eprints, islandora, dspace",
        );
        rejects(
            &format!("{repo}ui_url = \"host/\"\n"),
            "[[repository]] \"a\" ui_url",
            "not a URL",
        );
        rejects(
            &format!("{repo}ui_url = \"ftp://host/\"\n"),
            "ui_url",
            "http(s)",
        );
        rejects(
            &format!("{repo}landing_template = \"https://h/records/{{id}}\"\n"),
            "[[repository]] \"a\" landing_template",
            "unknown placeholder {id}",
        );
        rejects(
            &format!("{repo}landing_template = \"ftp://h/{{doi}}\"\n"),
            "landing_template",
            "not an http(s) URL",
        );
        let c = Config::parse(
            &format!(
                "{repo}platform = \"EPrints\"\nlanding_template = \"https://h/node/{{oai_local}}\"\n"
            ),
            "f",
            Path::new("."),
        )
        .unwrap();
        let landing = &c.repositories[0].landing;
        assert_eq!(
            landing.platform,
            crate::platform::Setting::Fixed("eprints".into())
        );
        assert_eq!(
            landing.template.as_ref().map(|t| t.as_str()),
            Some("https://h/node/{oai_local}")
        );
        assert_eq!(
            Config::parse(repo, "f", Path::new("."))
                .unwrap()
                .repositories[0]
                .landing
                .platform,
            crate::platform::Setting::Auto
        );
    }

    #[test]
    fn relative_files_are_taken_from_the_config_directory() {
        let c = Config::parse("[[repository]]\nname = \"s\"\nbase_url = \"fixtures/s.xml\"\npublic_url = \"https://h/maps\"\n", "f", Path::new("/etc/ob")).unwrap();
        assert_eq!(
            c.repositories[0].source,
            Source::File(PathBuf::from("/etc/ob/fixtures/s.xml"))
        );
        assert_eq!(
            c.repositories[0].public_url.as_ref().unwrap().as_str(),
            "https://h/maps/"
        );
    }

    #[test]
    fn impossible_server_and_refresh_limits_are_rejected() {
        rejects(
            "[server]\ncache_bytes = 10\n",
            "[server] cache_bytes",
            "at least",
        );
        rejects(
            "[[repository]]\nname = \"a\"\nbase_url = \"x.xml\"\nrefresh_interval_secs = 0\n",
            "[[repository]] \"a\" refresh_interval_secs",
            "at least 1",
        );
        rejects(
            "[[repository]]\nname = \"a\"\nbase_url = \"x.xml\"\nrefresh = 5\n",
            "[[repository]] \"a\" refresh",
            "unknown field `refresh`",
        );
        rejects(
            "[[repository]]\nname = \"a\"\nbase_url = \"x.xml\"\ndiwoo = { \"woo:besluiten\" = 18 }\n",
            "[[repository]] \"a\" diwoo",
            "not a Woo information category",
        );
        rejects(
            "[[repository]]\nname = \"a\"\nbase_url = \"x.xml\"\ndiwoo = { \"a b\" = 1 }\n",
            "diwoo",
            "setSpec",
        );
        rejects(
            "[[repository]]\nname = \"a\"\nbase_url = \"x.xml\"\n[repository.ocx]\nformat = \"JSON\"\n",
            "[[repository]] \"a\" ocx.format",
            "must be one of",
        );
        rejects(
            "[[repository]]\nname = \"a\"\nbase_url = \"x.xml\"\n[repository.ocx]\ntypes = { \"Les\" = \"a lesson\" }\n",
            "ocx.types",
            "neither a schema.org type",
        );
        rejects(
            "[server]\npublic_url = \"ftp://h/\"\n",
            "[server] public_url",
            "http",
        );
    }

    /// Issue 32: `[repository.indexnow]` is checked as the configuration loads; an error names
    /// the repository, the key and the rule, and never the key's value.
    #[test]
    fn indexnow_keys_are_checked_and_never_shown() {
        let repo = "[[repository]]\nname = \"a\"\nbase_url = \"x.xml\"\n[repository.indexnow]\n";
        for (table, key, rule) in [
            (
                "key = \"short\"\n",
                "[[repository]] \"a\" indexnow.key",
                "8 to 128 characters",
            ),
            (
                "key = \"has_an_underscore\"\n",
                "indexnow.key",
                "a-z, A-Z, 0-9 or '-'",
            ),
            (
                "endpoint = \"https://api.indexnow.org/indexnow\"\n",
                "indexnow.key",
                "is required",
            ),
            (
                "key = \"abcdefgh\"\nendpoint = \"indexnow\"\n",
                "indexnow.endpoint",
                "not a URL",
            ),
            (
                "key = \"abcdefgh\"\nkey_location = \"https://h/abcdefgh\"\n",
                "indexnow.key_location",
                ".txt",
            ),
            (
                "key = \"abcdefgh\"\nkeys = 1\n",
                "indexnow",
                "unknown field `keys`",
            ),
        ] {
            rejects(&format!("{repo}{table}"), key, rule);
            let e = Config::parse(&format!("{repo}{table}"), "f", Path::new(".")).unwrap_err();
            for secret in ["has_an_underscore", "abcdefgh"] {
                assert!(!e.message.contains(secret), "{e}");
            }
        }
        let c = Config::parse(
            &format!("{repo}key = \"0123-abcd-EFGH\"\n"),
            "f",
            Path::new("."),
        )
        .unwrap();
        let n = c.repositories[0].indexnow.as_ref().unwrap();
        assert_eq!(n.endpoint.as_str(), crate::indexnow::DEFAULT_ENDPOINT);
        assert_eq!(n.key.expose(), "0123-abcd-EFGH");
        assert!(!format!("{c:?}").contains("0123-abcd-EFGH"));
    }

    /// Issue 22: the gateway's refresh limits are read from `[harvest]`, with their defaults;
    /// 0 is an error naming the key.
    #[test]
    fn the_fleet_limits_are_read_and_checked() {
        let c = Config::parse("", "bridge.toml", Path::new(".")).unwrap();
        assert_eq!(c.fleet, FleetSettings::default());
        assert_eq!(
            (
                c.fleet.max_concurrent_refreshes,
                c.fleet.per_host_concurrency
            ),
            (4, 1)
        );
        assert_eq!(c.fleet.start_spread, Duration::from_secs(30));
        let c = Config::parse(
            "[harvest]\nmax_concurrent_refreshes = 8\nper_host_concurrency = 2\nstart_spread_secs = 0\n",
            "bridge.toml",
            Path::new("."),
        )
        .unwrap();
        assert_eq!(
            c.fleet,
            FleetSettings {
                max_concurrent_refreshes: 8,
                per_host_concurrency: 2,
                start_spread: Duration::ZERO
            }
        );
        rejects(
            "[harvest]\nmax_concurrent_refreshes = 0\n",
            "[harvest] max_concurrent_refreshes",
            "at least 1",
        );
        rejects(
            "[harvest]\nper_host_concurrency = 0\n",
            "[harvest] per_host_concurrency",
            "at least 1",
        );
    }

    /// Issue 22: a `[repository.harvest]` table overrides `[harvest]` for its repository only;
    /// its headers are added to `[harvest]`'s; the gateway-wide keys and bad values are errors
    /// naming `[[repository]] "name" harvest.key`.
    #[test]
    fn a_repository_harvest_table_overrides_harvest() {
        let text = "[harvest]\nuser_agent = \"ua (mailto:a@b)\"\npoliteness_delay_ms = 100\n\
                    headers = { X-Consortium = \"c\" }\n\
                    [[repository]]\nname = \"a\"\nbase_url = \"https://h/oai\"\n\
                    [repository.harvest]\npoliteness_delay_ms = 3000\nmax_attempts = 2\n\
                    headers = { Authorization = \"Bearer s3cret\" }\n\
                    [[repository]]\nname = \"b\"\nbase_url = \"https://h/oai2\"\n";
        let c = Config::parse(text, "bridge.toml", Path::new(".")).unwrap();
        let (a, b) = (&c.repositories[0].harvest, &c.repositories[1].harvest);
        assert_eq!(a.politeness_delay, Duration::from_millis(3000));
        assert_eq!(a.max_attempts, 2);
        assert_eq!(a.user_agent, "ua (mailto:a@b)");
        assert_eq!(b, &c.harvest);
        assert_eq!(b.politeness_delay, Duration::from_millis(100));
        let names: Vec<_> = a.headers.to_map().keys().map(|k| k.to_string()).collect();
        assert_eq!(names, ["x-consortium", "authorization"]);
        // The token is never shown.
        let shown = format!("{:?}", c.repositories[0]);
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("authorization"), "{shown}");
        let repo = "[[repository]]\nname = \"a\"\nbase_url = \"x.xml\"\n[repository.harvest]\n";
        for key in [
            "max_concurrent_refreshes",
            "per_host_concurrency",
            "start_spread_secs",
        ] {
            rejects(
                &format!("{repo}{key} = 2\n"),
                &format!("[[repository]] \"a\" harvest.{key}"),
                "gateway-wide",
            );
        }
        rejects(
            &format!("{repo}max_attempts = 0\n"),
            "[[repository]] \"a\" harvest.max_attempts",
            "at least 1",
        );
        rejects(
            &format!("{repo}headers = {{ \"Bad Name\" = \"x\" }}\n"),
            "[[repository]] \"a\" harvest.headers",
            "not a header name",
        );
        rejects(
            &format!("{repo}headers = {{ User-Agent = \"x\" }}\n"),
            "harvest.headers",
            "use user_agent",
        );
        let e = Config::parse(
            &format!("{repo}headers = {{ Authorization = \"Bearer s3cret\\n\" }}\n"),
            "bridge.toml",
            Path::new("."),
        )
        .unwrap_err();
        assert!(!e.to_string().contains("s3cret"), "{e}");
        rejects(
            &format!("{repo}max_atempts = 2\n"),
            "[[repository]] \"a\" harvest.max_atempts",
            "unknown field",
        );
    }

    /// Issue 22: `include` reads `[[repository]]` tables from other files, in name order after
    /// the main file's; their relative paths are their own folder's; anything else in them, or
    /// a name used twice, is an error naming the file(s).
    #[test]
    fn included_files_add_repositories() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("repositories.d");
        std::fs::create_dir(&d).unwrap();
        let repo =
            |name: &str| format!("[[repository]]\nname = \"{name}\"\nbase_url = \"{name}.xml\"\n");
        std::fs::write(d.join("b.toml"), repo("b")).unwrap();
        std::fs::write(
            d.join("a.toml"),
            format!("{}[repository.harvest]\nmax_attempts = 2\n", repo("a")),
        )
        .unwrap();
        std::fs::write(d.join("notes.txt"), "not read").unwrap();
        std::fs::write(d.join(".a.toml.swp"), "not read").unwrap();
        let main = format!("include = [\"repositories.d/*.toml\"]\n{}", repo("main"));
        let c = Config::parse(&main, "bridge.toml", dir.path()).unwrap();
        let names: Vec<_> = c.repositories.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["main", "a", "b"]);
        assert_eq!(c.repositories[1].source, Source::File(d.join("a.xml")));
        assert_eq!(
            c.repositories[0].source,
            Source::File(dir.path().join("main.xml"))
        );
        assert_eq!(c.repositories[1].harvest.max_attempts, 2);
        assert_eq!(
            c.repositories[1].file,
            d.join("a.toml").display().to_string()
        );
        // A pattern that matches nothing adds nothing; a named file must exist.
        let none = "include = [\"repositories.d/*.conf\"]\n";
        assert!(
            Config::parse(none, "f", dir.path())
                .unwrap()
                .repositories
                .is_empty()
        );
        let e = Config::parse("include = [\"missing.toml\"]\n", "f", dir.path()).unwrap_err();
        assert!(
            e.file.ends_with("missing.toml") && e.message.contains("cannot read"),
            "{e}"
        );
        let e = Config::parse("include = [\"*/a.toml\"]\n", "f", dir.path()).unwrap_err();
        assert_eq!((e.file.as_str(), e.key.as_str()), ("f", "include"));
        // The same name in the main file and an included one: both files named.
        let e = Config::parse(
            &format!("include = [\"repositories.d/*.toml\"]\n{}", repo("b")),
            "bridge.toml",
            dir.path(),
        )
        .unwrap_err();
        assert!(e.file.ends_with("b.toml"), "{e}");
        assert!(e.message.contains("also in bridge.toml"), "{e}");
        // An included file with anything but [[repository]] tables.
        std::fs::write(d.join("c.toml"), "[harvest]\nmax_attempts = 2\n").unwrap();
        let e = Config::parse(&main, "bridge.toml", dir.path()).unwrap_err();
        assert!(e.file.ends_with("c.toml"), "{e}");
        assert_eq!(e.key, "[harvest]");
        assert!(e.message.contains("[[repository]] tables only"), "{e}");
        std::fs::write(d.join("c.toml"), "[[repository]]\nname = \"c\"\nbase = 1\n").unwrap();
        let e = Config::parse(&main, "bridge.toml", dir.path()).unwrap_err();
        assert!(
            e.file.ends_with("c.toml") && e.key == "[[repository]] \"c\" base",
            "{e}"
        );
    }

    /// A value of the wrong type names the key, what it takes and what the file says, for any
    /// key, in any table; a syntax error names its line.
    #[test]
    fn a_value_of_the_wrong_type_names_the_key_what_it_takes_and_what_was_found() {
        let repo = "[[repository]]\nname = \"dspace\"\nbase_url = \"x.xml\"\n";
        for (text, key, message) in [
            (
                "[harvest]\ndeadline_secs = \"daily\"\n".to_owned(),
                "[harvest] deadline_secs",
                "expected a number of seconds, found \"daily\" (line 2)",
            ),
            (
                format!("{repo}refresh_interval_secs = \"daily\"\n"),
                "[[repository]] \"dspace\" refresh_interval_secs",
                "expected a number of seconds, found \"daily\" (line 4)",
            ),
            (
                "[server]\nlisten = 8080\n".to_owned(),
                "[server] listen",
                "expected an address:port in quotes, e.g. \"127.0.0.1:8080\", found 8080",
            ),
            (
                "[server]\ncache_bytes = 1.5\n".to_owned(),
                "[server] cache_bytes",
                "expected a number of bytes, found 1.5",
            ),
            (
                "[harvest]\nmax_attempts = -1\n".to_owned(),
                "[harvest] max_attempts",
                "expected a whole number (0 or more), found -1",
            ),
            (
                "[harvest]\npoliteness_delay_ms = \"3 s\"\n".to_owned(),
                "[harvest] politeness_delay_ms",
                "expected a number of milliseconds, found \"3 s\"",
            ),
            (
                "[state]\nlease_secs = true\n".to_owned(),
                "[state] lease_secs",
                "expected a number of seconds, found true",
            ),
            (
                format!("{repo}gzip = \"yes\"\n"),
                "[[repository]] \"dspace\" gzip",
                "expected true or false, found \"yes\"",
            ),
            (
                format!("{repo}shrink_guard = \"half\"\n"),
                "[[repository]] \"dspace\" shrink_guard",
                "expected a number from 0 to 1, e.g. 0.5, found \"half\"",
            ),
            (
                format!("{repo}sets = \"com_1\"\n"),
                "[[repository]] \"dspace\" sets",
                "expected a list of setSpecs in quotes, e.g. [\"com_1\"], found \"com_1\"",
            ),
            (
                // An element of a list: the list's key, and the element.
                format!("{repo}scope = [\"https://h/\", 7]\n"),
                "[[repository]] \"dspace\" scope[1]",
                "expected a list of URLs in quotes, found 7",
            ),
            (
                // TOML reads an unquoted date as a date-time.
                format!("{repo}from = 2020-01-01\n"),
                "[[repository]] \"dspace\" from",
                "expected a date in quotes, e.g. \"2020-01-01\", found 2020-01-01",
            ),
            (
                format!("{repo}diwoo = {{ \"besluiten\" = \"one\" }}\n"),
                "[[repository]] \"dspace\" diwoo.besluiten",
                "expected a category number from 1 to 17, found \"one\"",
            ),
            (
                format!("{repo}[repository.harvest]\nheaders = {{ Authorization = 1 }}\n"),
                "[[repository]] \"dspace\" harvest.headers.Authorization",
                "expected a header value in quotes, found a number",
            ),
            (
                format!("{repo}[repository.ocx]\nteaser_chars = \"long\"\n"),
                "[[repository]] \"dspace\" ocx.teaser_chars",
                "expected a whole number (0 or more), found \"long\" (line 5)",
            ),
            (
                // A repository without a name is numbered.
                "[[repository]]\nbase_url = [\"a\", \"b\"]\n".to_owned(),
                "[[repository]] #1 base_url",
                "expected a baseURL or a file in quotes, found [\"a\", \"b\"]",
            ),
            (
                "server = 3\n".to_owned(),
                "[server]",
                "expected a table, [server], found 3",
            ),
            (
                "include = \"repositories.d/*.toml\"\n".to_owned(),
                "include",
                "expected a list of file names in quotes",
            ),
            (
                "[serve]\nlisten = \"x\"\n".to_owned(),
                "[serve]",
                "unknown field `serve`",
            ),
            (
                "[server\nlisten = 1\n".to_owned(),
                "line 1",
                "unclosed table",
            ),
        ] {
            let e = Config::parse(&text, "bridge.toml", Path::new(".")).unwrap_err();
            assert_eq!(e.key, key, "{text}");
            assert!(
                e.message.contains(message),
                "{text}: {:?} should say {message:?}",
                e.message
            );
        }
        // What is found is cut short on one line.
        let long = format!("{repo}sets = \"{}\"\n", "x".repeat(100));
        let e = Config::parse(&long, "bridge.toml", Path::new(".")).unwrap_err();
        assert!(
            e.message
                .contains(&format!("found \"{}...", "x".repeat(59))),
            "{e}"
        );
        assert!(e.message.len() < 160, "{e}");
    }

    /// Every key of the file says what it takes, for the errors above.
    #[test]
    fn every_key_says_what_it_takes() {
        for key in file_keys() {
            assert!(
                keys::takes(key).is_some_and(|t| !t.is_empty()),
                "{key} does not say what it takes"
            );
        }
    }

    /// Issue: what a DSpace sidecar's first configuration may hold that is valid but wrong is
    /// warned of: names that differ only in case, two repositories harvesting the same thing;
    /// nothing else.
    #[test]
    fn likely_mistakes_are_warned_of() {
        let repo = |name: &str, base: &str, extra: &str| {
            format!("[[repository]]\nname = \"{name}\"\nbase_url = \"{base}\"\n{extra}")
        };
        let remote = "https://dspace.example.edu/server/oai/request";
        for (text, want) in [
            (
                format!(
                    "{}{}",
                    repo("dspace", remote, ""),
                    repo("DSpace", "x.xml", "")
                ),
                &["[[repository]] \"dspace\" and \"DSpace\" differ only in case"][..],
            ),
            (
                format!("{}{}", repo("a", remote, ""), repo("b", remote, "")),
                &[
                    "\"a\" and \"b\" harvest the same baseURL (https://dspace.example.edu/server/oai/request, every set)",
                ][..],
            ),
            (
                format!(
                    "{}{}",
                    repo("a", remote, "sets = [\"x\", \"y\"]\n"),
                    repo("b", remote, "sets = [\"y\", \"x\"]\n")
                ),
                &["harvest the same baseURL"][..],
            ),
            (
                format!(
                    "{}{}",
                    repo("a", remote, "sets = [\"x\"]\n"),
                    repo("b", remote, "sets = [\"y\"]\n")
                ),
                &[][..],
            ),
            (
                format!(
                    "{}{}",
                    repo("a", remote, "from = \"2020-01-01\"\n"),
                    repo("b", remote, "")
                ),
                &[][..],
            ),
            (
                format!("{}{}", repo("a", remote, ""), repo("b", "a.xml", "")),
                &[][..],
            ),
        ] {
            let c = Config::parse(&text, "bridge.toml", Path::new(".")).unwrap();
            let warnings = c.warnings();
            assert_eq!(warnings.len(), want.len(), "{text}\n{warnings:#?}");
            for (warning, want) in warnings.iter().zip(want) {
                assert!(warning.contains(want), "{warning}\nshould say {want}");
            }
        }
    }

    /// A listener on the port of a repository's own baseURL on this host (a DSpace's Tomcat on
    /// 127.0.0.1:8080, `listen`'s default) is found, and said with what to set.
    #[test]
    fn a_listener_on_a_repositorys_own_port_is_found() {
        let repo =
            |base: &str| format!("[[repository]]\nname = \"dspace\"\nbase_url = \"{base}\"\n");
        let tomcat = repo("http://localhost:8080/server/oai/request");
        for (text, listen, admin) in [
            (tomcat.clone(), true, false),
            (
                format!("[server]\nlisten = \"0.0.0.0:8080\"\n{tomcat}"),
                true,
                false,
            ),
            (
                format!(
                    "[server]\nlisten = \"127.0.0.1:8090\"\nadmin_listen = \"127.0.0.1:8080\"\n{}",
                    repo("http://127.0.0.1:8080/oai")
                ),
                false,
                true,
            ),
            (
                format!("[server]\nlisten = \"127.0.0.1:8090\"\n{tomcat}"),
                false,
                false,
            ),
            (
                format!("[server]\nlisten = \"127.0.0.1:0\"\n{tomcat}"),
                false,
                false,
            ),
            (
                format!("[server]\nlisten = \"10.0.0.5:8080\"\n{tomcat}"),
                false,
                false,
            ),
            (repo("https://dspace.example.edu:8080/oai"), false, false),
            (repo("http://[::1]/oai"), false, false),
        ] {
            let c = Config::parse(&text, "bridge.toml", Path::new(".")).unwrap();
            assert_eq!(
                c.repository_on_port(c.server.listen).is_some(),
                listen,
                "{text}"
            );
            assert_eq!(
                (c.server.admin_listen).is_some_and(|a| c.repository_on_port(a).is_some()),
                admin,
                "{text}"
            );
        }
        let c = Config::parse(&tomcat, "f", Path::new(".")).unwrap();
        let message = repository_on_port_message(
            "[server] listen",
            c.server.listen,
            c.repository_on_port(c.server.listen).unwrap(),
        );
        assert_eq!(
            message,
            "is the port of [[repository]] \"dspace\"'s baseURL \
             http://localhost:8080/server/oai/request, on this host (a DSpace's Tomcat listens on \
             127.0.0.1:8080, the gateway's default port): the repository and the gateway cannot \
             both listen there. Set [server] listen (OAI_BRIDGE_LISTEN, --listen) to a free port, \
             e.g. \"127.0.0.1:8090\", and point the reverse proxy's sitemap location at it"
        );
    }

    /// The public URL crawlers are given: warned of when none is set (the default names the
    /// listen address) or when it is on loopback, as the status page decides.
    #[test]
    fn a_public_url_crawlers_cannot_use_is_warned_of() {
        let url = |s: &str| Url::parse(s).unwrap();
        for (configured, effective, want) in [
            (
                None,
                "http://127.0.0.1:8080/",
                Some("which is a loopback address"),
            ),
            (
                None,
                "http://10.0.0.5:8080/",
                Some("the gateway's listen address"),
            ),
            (
                Some("http://localhost/sitemaps/"),
                "http://localhost/sitemaps/",
                Some("the public URL http://localhost/sitemaps/ is a loopback address"),
            ),
            (
                Some("https://repository.example.edu/sitemaps/"),
                "https://repository.example.edu/sitemaps/",
                None,
            ),
        ] {
            let configured = configured.map(url);
            let warning = public_url_warning(configured.as_ref(), &url(effective));
            match (want, &warning) {
                (Some(want), Some(warning)) => {
                    assert!(warning.contains(want), "{warning}");
                    assert!(warning.contains(effective), "{warning}");
                    assert!(warning.contains("set public_url ([server]"), "{warning}");
                }
                (None, None) => {}
                _ => panic!("{configured:?} {effective}: {warning:?}"),
            }
        }
    }

    #[test]
    fn a_pattern_matches_file_names() {
        let m = |p: &str, n: &str| include::matches(p.as_bytes(), n.as_bytes());
        assert!(m("*.toml", "a.toml"));
        assert!(m("*.toml", ".toml"));
        assert!(!m("*.toml", "a.toml.bak"));
        assert!(m("j-?.toml", "j-1.toml"));
        assert!(!m("j-?.toml", "j-12.toml"));
        assert!(m("*-*.toml", "a-b-c.toml"));
        assert!(m("a.toml", "a.toml"));
        assert!(!m("a.toml", "b.toml"));
    }

    /// Every key of `bridge.toml`, from the declarations: the shipped file shows each with its
    /// default, and the configuration reference (`docs/configuration.md`) describes each.
    fn file_keys() -> impl Iterator<Item = &'static str> {
        (keys::all())
            .filter(|k| k.kind == keys::Kind::Key)
            .map(|k| k.name)
    }

    /// The shipped file parses, serves the sample repository, shows every key, and shows each
    /// with its default: what it says equals what an empty file gives.
    #[test]
    fn the_shipped_bridge_toml_shows_every_key_with_its_default() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("bridge.toml");
        let shipped = Config::load(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let base = path.parent().unwrap();
        let defaults = Config::parse(
            "[[repository]]\nname = \"sample\"\nbase_url = \"fixtures/sample-repository.xml\"\n",
            "defaults",
            base,
        )
        .unwrap();
        assert_eq!(shipped.harvest, defaults.harvest);
        assert_eq!(shipped.fleet, defaults.fleet);
        assert_eq!(
            shipped.state, defaults.state,
            "[state] url is shown commented out"
        );
        let (s, d) = (&shipped.server, &defaults.server);
        assert_eq!(
            (
                s.listen,
                s.admin_listen,
                &s.state_dir,
                s.cache_bytes,
                s.drain_timeout,
                s.client_timeout,
                s.max_age,
                s.memory_budget,
                s.spill_max
            ),
            (
                d.listen,
                d.admin_listen,
                &d.state_dir,
                d.cache_bytes,
                d.drain_timeout,
                d.client_timeout,
                d.max_age,
                d.memory_budget,
                d.spill_max
            )
        );
        assert_eq!(
            (shipped.pool_limits(), shipped.memory_budget),
            (defaults.pool_limits(), defaults.memory_budget)
        );
        assert_eq!(
            s.public_url, None,
            "public_url defaults to http://{{listen}}/"
        );
        let (r, d) = (&shipped.repositories[..], &defaults.repositories[0]);
        assert_eq!(r.len(), 1);
        let r = &r[0];
        assert_eq!(r.harvest, d.harvest);
        assert_eq!(
            (&r.name, &r.source, &r.sets, &r.scope, r.from, r.until),
            (&d.name, &d.source, &d.sets, &d.scope, d.from, d.until)
        );
        assert_eq!(
            (r.limits.max_urls, r.limits.max_bytes, r.gzip),
            (d.limits.max_urls, d.limits.max_bytes, d.gzip)
        );
        let (p, q) = (&r.profiles, &d.profiles);
        assert_eq!(
            (p.signmap, p.cdif, p.cdif_list, &p.diwoo, r.refresh_interval),
            (q.signmap, q.cdif, q.cdif_list, &q.diwoo, d.refresh_interval)
        );
        assert_eq!(&r.policy, &d.policy);
        assert!(p.ocx.is_none() && q.ocx.is_none());
        for key in file_keys() {
            let shown = text.lines().any(|l| {
                l.trim_start_matches(['#', ' '])
                    .starts_with(&format!("{key} ="))
            });
            assert!(shown, "bridge.toml does not show the key {key}");
        }
    }

    /// Every declaration has a doc line, and the configuration reference names every
    /// variable and flag the declarations give.
    #[test]
    fn the_configuration_reference_names_every_variable_and_flag() {
        let reference = include_str!("../docs/configuration.md");
        for key in keys::all() {
            let name = format!("{} {}", key.section, key.name);
            assert!(!key.doc.trim().is_empty(), "{name} has no doc line");
            if let Some((variable, _)) = key.env {
                assert!(
                    reference.contains(&format!("`{variable}`")),
                    "docs/configuration.md does not name {variable} ({name})"
                );
            }
            for (_, flag) in key.flags {
                // The flag itself, not a longer one it begins (`--state`, `--state-url`).
                let named = reference.match_indices(flag).any(|(at, _)| {
                    let next = reference[at + flag.len()..].chars().next();
                    !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
                });
                assert!(named, "docs/configuration.md does not name {flag} ({name})");
            }
        }
    }

    /// The configuration reference names every key of `bridge.toml`, as `` `key` ``.
    #[test]
    fn the_configuration_reference_describes_every_key() {
        let reference = include_str!("../docs/configuration.md");
        for key in file_keys() {
            assert!(
                reference.contains(&format!("`{key}`")),
                "docs/configuration.md does not describe the key `{key}`"
            );
        }
    }
}
