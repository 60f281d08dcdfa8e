//! Where each setting comes from, in one place: the defaults, then `bridge.toml`, then the
//! environment, then the flags, for `serve`, `export` and `check` alike.
//!
//! The file is read and checked by [`crate::config`], whose errors name its keys. The
//! environment ([`Environment`]) and each command's flags become [`Overrides`], shaped as the
//! file's sections are, each value remembering the variable or flag that gave it ([`Given`]).
//! [`Layers::new`] stacks them in their one order; [`Layers`] checks each value it takes from
//! them as it applies it over the file, an error naming that variable or flag. A value that a
//! higher layer hides is never read, so a bad one there is no error.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use oai_pmh::{Datestamp, HarvestSettings, Source};
use url::Url;

use crate::cli::{CheckArgs, ExportArgs, LandingArgs, MigrateStateArgs, PruneArgs, ServeArgs};
use crate::config::{
    self, AdminToken, Config, ConfigError, OcxConfig, RepositoryConfig, ServerConfig, StateConfig,
};
use crate::incremental::Policy;
use crate::platform::LandingSettings;
use crate::render::Limits;

/// Where an override was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// An environment variable, e.g. `OAI_BRIDGE_USER_AGENT`.
    Env(&'static str),
    /// A command-line flag or argument, e.g. `--max-attempts`.
    Flag(&'static str),
}

impl Origin {
    /// The error of a value given here: `environment: VARIABLE: ...` or
    /// `command line: --flag: ...`.
    pub(crate) fn error(self, message: impl Into<String>) -> ConfigError {
        let (file, key) = match self {
            Origin::Env(variable) => ("environment", variable),
            Origin::Flag(flag) => ("command line", flag),
        };
        ConfigError {
            file: file.to_owned(),
            key: key.to_owned(),
            message: message.into(),
        }
    }
}

/// A value an override gives, as it was given, and where.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Given<T> {
    /// The value, not yet checked.
    pub value: T,
    /// The variable or flag that gave it.
    pub origin: Origin,
}

impl<T> Given<T> {
    /// The value read by `parse`, or its error naming the variable or flag.
    pub(crate) fn parse<U>(
        &self,
        parse: impl FnOnce(&T) -> Result<U, String>,
    ) -> Result<U, ConfigError> {
        parse(&self.value).map_err(|m| self.origin.error(m))
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
}

/// `[server]` keys an override may set.
#[derive(Clone, Debug, Default)]
pub(crate) struct ServerOverrides {
    /// `listen`.
    pub listen: Option<Given<String>>,
    /// `admin_listen`.
    pub admin_listen: Option<Given<String>>,
    /// `public_url`.
    pub public_url: Option<Given<String>>,
    /// `state_dir`, taken from the working directory (the file's is taken from its folder).
    pub state_dir: Option<Given<PathBuf>>,
    /// `admin_token`.
    pub admin_token: Option<Given<String>>,
    /// `publish_url`.
    pub publish_url: Option<Given<String>>,
    /// `publish_grace_secs`.
    pub publish_grace_secs: Option<Given<u64>>,
}

/// `[state]` keys an override may set.
#[derive(Clone, Debug, Default)]
pub(crate) struct StateOverrides {
    /// `url`.
    pub url: Option<Given<String>>,
}

/// `[harvest]` keys an override may set.
#[derive(Clone, Debug, Default)]
pub(crate) struct HarvestOverrides {
    /// `user_agent`.
    pub user_agent: Option<Given<String>>,
    /// `max_attempts`.
    pub max_attempts: Option<Given<u32>>,
    /// `request_timeout_secs`.
    pub request_timeout_secs: Option<Given<u64>>,
    /// `politeness_delay_ms`.
    pub politeness_delay_ms: Option<Given<u64>>,
    /// `retry_after_max_secs`.
    pub retry_after_max_secs: Option<Given<u64>>,
    /// `deadline_secs`; 0 for none.
    pub deadline_secs: Option<Given<u64>>,
    /// `max_body_bytes`.
    pub max_body_bytes: Option<Given<u64>>,
    /// `backoff_initial_ms`.
    pub backoff_initial_ms: Option<Given<u64>>,
}

/// `[[repository]]` keys an override may set, and the one-off `accept_shrink`.
#[derive(Clone, Debug, Default)]
pub(crate) struct RepositoryOverrides {
    /// `base_url`, taken from the working directory when a file.
    pub base_url: Option<Given<String>>,
    /// `public_url`.
    pub public_url: Option<Given<String>>,
    /// `sets`.
    pub sets: Option<Given<Vec<String>>>,
    /// `from`.
    pub from: Option<Given<String>>,
    /// `until`.
    pub until: Option<Given<String>>,
    /// `scope`.
    pub scope: Option<Given<Vec<String>>>,
    /// `platform`.
    pub platform: Option<Given<String>>,
    /// `ui_url`.
    pub ui_url: Option<Given<String>>,
    /// `landing_template`.
    pub landing_template: Option<Given<String>>,
    /// `max_urls_per_shard`.
    pub max_urls_per_shard: Option<Given<usize>>,
    /// `max_bytes_per_shard`.
    pub max_bytes_per_shard: Option<Given<usize>>,
    /// `gzip`.
    pub gzip: Option<Given<bool>>,
    /// `signmap`.
    pub signmap: Option<Given<bool>>,
    /// `cdif`.
    pub cdif: Option<Given<bool>>,
    /// `cdif_list`.
    pub cdif_list: Option<Given<bool>>,
    /// `[repository.ocx]` switched on: the file's settings, or the defaults when it has none.
    pub ocx: Option<Given<bool>>,
    /// `diwoo`, as `SETSPEC=N` entries; they replace the file's table.
    pub diwoo: Option<Given<Vec<String>>>,
    /// `full_harvest_interval_secs`.
    pub full_harvest_interval_secs: Option<Given<u64>>,
    /// `shrink_guard`.
    pub shrink_guard: Option<Given<f64>>,
    /// Publish a shrink the guard holds back (no key: an operator's decision, once).
    pub accept_shrink: Option<Given<bool>>,
}

/// A struct of overrides whose every field is `over`'s when it gives one, else `base`'s. The
/// struct literal names every field, so a field added to one is added here too.
macro_rules! merged {
    ($Struct:ident, $base:ident, $over:ident, [$($field:ident),* $(,)?]) => {
        $Struct { $($field: $over.$field.or($base.$field)),* }
    };
}

impl Overrides {
    /// These overrides with `over` on top: each setting `over` gives replaces this one's.
    pub(crate) fn merge(self, over: Overrides) -> Overrides {
        let (base, over) = (self, over);
        let (b, o) = (base.server, over.server);
        let server = merged!(
            ServerOverrides,
            b,
            o,
            [
                listen,
                admin_listen,
                public_url,
                state_dir,
                admin_token,
                publish_url,
                publish_grace_secs
            ]
        );
        let (b, o) = (base.harvest, over.harvest);
        let harvest = merged!(
            HarvestOverrides,
            b,
            o,
            [
                user_agent,
                max_attempts,
                request_timeout_secs,
                politeness_delay_ms,
                retry_after_max_secs,
                deadline_secs,
                max_body_bytes,
                backoff_initial_ms,
            ]
        );
        let (b, o) = (base.state, over.state);
        let state = merged!(StateOverrides, b, o, [url]);
        let (b, o) = (base.repository, over.repository);
        let repository = merged!(
            RepositoryOverrides,
            b,
            o,
            [
                base_url,
                public_url,
                sets,
                from,
                until,
                scope,
                platform,
                ui_url,
                landing_template,
                max_urls_per_shard,
                max_bytes_per_shard,
                gzip,
                signmap,
                cdif,
                cdif_list,
                ocx,
                diwoo,
                full_harvest_interval_secs,
                shrink_guard,
                accept_shrink,
            ]
        );
        Overrides {
            server,
            harvest,
            state,
            repository,
        }
    }
}

/// The environment variables of the settings. `OAI_BRIDGE_CONFIG` (which file) and
/// `OAI_BRIDGE_LOG_FORMAT` (how to log) are clap's: both are read before any layer.
#[derive(Clone, Debug, Default)]
pub(crate) struct Environment {
    listen: Option<String>,
    admin_listen: Option<String>,
    public_url: Option<String>,
    state_dir: Option<PathBuf>,
    admin_token: Option<String>,
    publish_url: Option<String>,
    user_agent: Option<String>,
    state_url: Option<String>,
}

impl Environment {
    /// `[server] listen` (`serve`).
    pub(crate) const LISTEN: &str = "OAI_BRIDGE_LISTEN";
    /// `[server] admin_listen` (`serve`).
    pub(crate) const ADMIN_LISTEN: &str = "OAI_BRIDGE_ADMIN_LISTEN";
    /// `[server] public_url` (`serve`); the exported repository's `--public-url` (`export`).
    pub(crate) const PUBLIC_URL: &str = "OAI_BRIDGE_PUBLIC_URL";
    /// `[server] state_dir` (`serve`, `prune`, `migrate-state`).
    pub(crate) const STATE_DIR: &str = "OAI_BRIDGE_STATE_DIR";
    /// `[server] admin_token` (`serve`), which has no flag so that it stays out of the process
    /// list.
    pub(crate) const ADMIN_TOKEN: &str = "OAI_BRIDGE_ADMIN_TOKEN";
    /// `[harvest] user_agent` (every command).
    pub(crate) const USER_AGENT: &str = "OAI_BRIDGE_USER_AGENT";
    /// `[server] publish_url` (`serve`).
    pub(crate) const PUBLISH_URL: &str = "OAI_BRIDGE_PUBLISH_URL";
    /// `[state] url` (`serve`, `migrate-state`); the exported repository's store (`export`). A
    /// variable keeps the database's password out of the process list.
    pub(crate) const STATE_URL: &str = "OAI_BRIDGE_STATE_URL";

    /// The process's environment.
    pub(crate) fn process() -> Environment {
        Self::read(|name| std::env::var_os(name))
    }

    /// The variables as `lookup` gives them (tests pass their own). An address or URL that is
    /// not Unicode is read with replacement characters, so that it is an error naming its
    /// variable; a user agent or token that is not is unset, as is an empty user agent.
    pub(crate) fn read(lookup: impl Fn(&str) -> Option<OsString>) -> Environment {
        let lossy = |name| lookup(name).map(|v| v.to_string_lossy().into_owned());
        let text = |name| lookup(name).and_then(|v| v.into_string().ok());
        Environment {
            listen: lossy(Self::LISTEN),
            admin_listen: lossy(Self::ADMIN_LISTEN),
            public_url: lossy(Self::PUBLIC_URL),
            state_dir: lookup(Self::STATE_DIR).map(PathBuf::from),
            admin_token: text(Self::ADMIN_TOKEN),
            publish_url: lossy(Self::PUBLISH_URL),
            user_agent: text(Self::USER_AGENT).filter(|a| !a.trim().is_empty()),
            state_url: lossy(Self::STATE_URL).filter(|u| !u.is_empty()),
        }
    }

    /// What `serve` reads: every variable.
    pub(crate) fn for_serve(&self) -> Overrides {
        Overrides {
            server: ServerOverrides {
                listen: variable(Self::LISTEN, &self.listen),
                admin_listen: variable(Self::ADMIN_LISTEN, &self.admin_listen),
                public_url: variable(Self::PUBLIC_URL, &self.public_url),
                state_dir: variable(Self::STATE_DIR, &self.state_dir),
                admin_token: variable(Self::ADMIN_TOKEN, &self.admin_token),
                publish_url: variable(Self::PUBLISH_URL, &self.publish_url),
                publish_grace_secs: None,
            },
            state: StateOverrides {
                url: variable(Self::STATE_URL, &self.state_url),
            },
            ..self.for_check()
        }
    }

    /// What `prune` reads: the state directory, the one setting it uses beyond the file's
    /// repositories (a listener or token it has no use for cannot fail it).
    pub(crate) fn for_prune(&self) -> Overrides {
        Overrides {
            server: ServerOverrides {
                state_dir: variable(Self::STATE_DIR, &self.state_dir),
                ..ServerOverrides::default()
            },
            ..Overrides::default()
        }
    }

    /// What `migrate-state` reads: the state directory to copy and the database to copy
    /// into.
    pub(crate) fn for_migrate(&self) -> Overrides {
        Overrides {
            state: StateOverrides {
                url: variable(Self::STATE_URL, &self.state_url),
            },
            ..self.for_prune()
        }
    }

    /// What `export` reads: the user agent, the public URL as the exported repository's
    /// (what `--public-url` sets), and the database of its store.
    pub(crate) fn for_export(&self) -> Overrides {
        Overrides {
            repository: RepositoryOverrides {
                public_url: variable(Self::PUBLIC_URL, &self.public_url),
                ..RepositoryOverrides::default()
            },
            state: StateOverrides {
                url: variable(Self::STATE_URL, &self.state_url),
            },
            ..self.for_check()
        }
    }

    /// What `check` reads: the user agent.
    pub(crate) fn for_check(&self) -> Overrides {
        Overrides {
            harvest: HarvestOverrides {
                user_agent: variable(Self::USER_AGENT, &self.user_agent),
                ..HarvestOverrides::default()
            },
            ..Overrides::default()
        }
    }
}

fn variable<T: Clone>(name: &'static str, value: &Option<T>) -> Option<Given<T>> {
    value.clone().map(|value| Given {
        value,
        origin: Origin::Env(name),
    })
}

fn flag<T: Clone>(name: &'static str, value: &Option<T>) -> Option<Given<T>> {
    value.clone().map(|value| Given {
        value,
        origin: Origin::Flag(name),
    })
}

/// A repeatable flag: given when it was given at least once.
fn flags(name: &'static str, values: &[String]) -> Option<Given<Vec<String>>> {
    flag(name, &(!values.is_empty()).then(|| values.to_vec()))
}

/// A flag that switches a setting on; without it, the setting is left to the layers below.
fn switch(name: &'static str, on: bool) -> Option<Given<bool>> {
    flag(name, &on.then_some(true))
}

impl From<&ServeArgs> for Overrides {
    fn from(args: &ServeArgs) -> Overrides {
        Overrides {
            server: ServerOverrides {
                listen: flag("--listen", &args.listen),
                admin_listen: flag("--admin-listen", &args.admin_listen),
                public_url: flag("--public-url", &args.public_url),
                state_dir: flag("--state-dir", &args.state_dir),
                admin_token: None,
                publish_url: flag("--publish-url", &args.publish_url),
                publish_grace_secs: None,
            },
            harvest: HarvestOverrides::default(),
            state: StateOverrides {
                url: flag("--state-url", &args.state_url),
            },
            repository: RepositoryOverrides {
                accept_shrink: switch("--accept-shrink", args.accept_shrink),
                ..RepositoryOverrides::default()
            },
        }
    }
}

impl From<&PruneArgs> for Overrides {
    fn from(args: &PruneArgs) -> Overrides {
        Overrides {
            server: ServerOverrides {
                state_dir: flag("--state-dir", &args.state_dir),
                ..ServerOverrides::default()
            },
            ..Overrides::default()
        }
    }
}

impl From<&MigrateStateArgs> for Overrides {
    fn from(args: &MigrateStateArgs) -> Overrides {
        Overrides {
            server: ServerOverrides {
                state_dir: flag("--state", &args.state),
                ..ServerOverrides::default()
            },
            state: StateOverrides {
                url: flag("--state-url", &args.state_url),
            },
            ..Overrides::default()
        }
    }
}

impl From<&ExportArgs> for Overrides {
    fn from(args: &ExportArgs) -> Overrides {
        Overrides {
            server: ServerOverrides {
                publish_grace_secs: flag("--publish-grace-secs", &args.publish_grace_secs),
                ..ServerOverrides::default()
            },
            harvest: HarvestOverrides {
                user_agent: flag("--user-agent", &args.user_agent),
                max_attempts: flag("--max-attempts", &args.max_attempts),
                request_timeout_secs: flag("--request-timeout", &args.request_timeout),
                politeness_delay_ms: flag("--politeness-delay", &args.politeness_delay),
                retry_after_max_secs: flag("--retry-after-max", &args.retry_after_max),
                deadline_secs: flag("--deadline", &args.deadline),
                max_body_bytes: flag("--max-body-bytes", &args.max_body_bytes),
                backoff_initial_ms: flag("--backoff-initial", &args.backoff_initial),
            },
            state: StateOverrides {
                url: flag("--state-url", &args.state_url),
            },
            repository: RepositoryOverrides {
                base_url: flag("--base-url", &args.base_url),
                public_url: flag("--public-url", &args.public_url),
                sets: flags("--set", &args.sets),
                from: flag("--from", &args.from),
                until: flag("--until", &args.until),
                max_urls_per_shard: flag("--max-urls", &args.max_urls),
                max_bytes_per_shard: flag("--max-bytes", &args.max_bytes),
                gzip: switch("--gzip", args.gzip),
                signmap: switch("--signmap", args.signmap),
                cdif: switch("--cdif", args.cdif),
                cdif_list: switch("--cdif-list", args.cdif_list),
                ocx: switch("--ocx", args.ocx),
                diwoo: flags("--diwoo", &args.diwoo),
                full_harvest_interval_secs: flag(
                    "--full-harvest-interval",
                    &args.full_harvest_interval,
                ),
                shrink_guard: flag("--shrink-guard", &args.shrink_guard),
                accept_shrink: switch("--accept-shrink", args.accept_shrink),
                ..where_and_what(&args.scope, &args.landing)
            },
        }
    }
}

impl From<&CheckArgs> for Overrides {
    fn from(args: &CheckArgs) -> Overrides {
        Overrides {
            repository: RepositoryOverrides {
                public_url: flag("--public-url", &args.public_url),
                ..where_and_what(&args.scope, &args.landing)
            },
            ..Overrides::default()
        }
    }
}

/// The flags `export` and `check` share: the scope and where the landing pages are.
fn where_and_what(scope: &[String], landing: &LandingArgs) -> RepositoryOverrides {
    RepositoryOverrides {
        scope: flags("--scope", scope),
        platform: flag("--platform", &landing.platform),
        ui_url: flag("--ui-url", &landing.ui_url),
        landing_template: flag("--landing-template", &landing.landing_template),
        ..RepositoryOverrides::default()
    }
}

/// One repository's settings after every layer: what `export` and `check` take, and what
/// `serve` takes of each repository.
#[derive(Clone, Debug, Default)]
pub(crate) struct RepositorySettings {
    /// The upstream; `None` when neither the file nor an override names one.
    pub source: Option<Source>,
    /// Where its files are published, when given (not yet derived from `[server]`).
    pub public_url: Option<Url>,
    /// Sets to harvest; empty for all.
    pub sets: Vec<String>,
    /// Scope prefixes replacing the default.
    pub scope: Vec<Url>,
    /// Where the records' landing pages are.
    pub landing: LandingSettings,
    /// Lower datestamp bound.
    pub from: Option<Datestamp>,
    /// Upper datestamp bound.
    pub until: Option<Datestamp>,
    /// Shard limits.
    pub limits: Limits,
    /// Write `.xml.gz` shards.
    pub gzip: bool,
    /// The profiles published beside the sitemap.
    pub profiles: crate::profiles::ProfileSettings,
    /// How the store is used.
    pub policy: Policy,
}

impl RepositorySettings {
    /// The file's layer: `repo`'s keys, or the defaults when the command takes none.
    fn of(repo: Option<&RepositoryConfig>) -> RepositorySettings {
        let Some(r) = repo else {
            return RepositorySettings::default();
        };
        RepositorySettings {
            source: Some(r.source.clone()),
            public_url: r.public_url.clone(),
            sets: r.sets.clone(),
            scope: r.scope.clone(),
            landing: r.landing.clone(),
            from: r.from,
            until: r.until,
            limits: r.limits,
            gzip: r.gzip,
            profiles: r.profiles.clone(),
            policy: r.policy.clone(),
        }
    }

    /// `repo` with these settings in place of its own, and `harvest` for its upstream.
    fn configure(self, repo: &RepositoryConfig, harvest: HarvestSettings) -> RepositoryConfig {
        let RepositorySettings {
            source,
            public_url,
            sets,
            scope,
            landing,
            from,
            until,
            limits,
            gzip,
            profiles,
            policy,
        } = self;
        RepositoryConfig {
            name: repo.name.clone(),
            source: source.unwrap_or_else(|| repo.source.clone()),
            public_url,
            sets,
            scope,
            landing,
            from,
            until,
            limits,
            gzip,
            profiles,
            refresh_interval: repo.refresh_interval,
            harvest,
            learn_from_web: repo.learn_from_web,
            file: repo.file.clone(),
            policy,
        }
    }
}

/// The layers of one command's settings: the file's [`Config`] (with the defaults under it),
/// then the environment, then the flags.
#[derive(Clone, Debug)]
pub(crate) struct Layers {
    file: Config,
    over: Overrides,
}

impl Layers {
    /// Stacks the layers; this is where their order is written, once.
    pub(crate) fn new(file: Config, env: Overrides, flags: Overrides) -> Layers {
        Layers {
            file,
            over: env.merge(flags),
        }
    }

    /// The file's layer, as read.
    pub(crate) fn file(&self) -> &Config {
        &self.file
    }

    /// The whole configuration with every layer applied (`serve`): `[server]`, `[harvest]`,
    /// and each repository.
    pub(crate) fn config(&self) -> Result<Config, ConfigError> {
        let server = self.server()?;
        let harvest = self.harvest()?;
        let repositories = self
            .file
            .repositories
            .iter()
            .map(|r| {
                Ok(self
                    .repository(Some(r))?
                    .configure(r, self.harvest_of(Some(r))?))
            })
            .collect::<Result<_, ConfigError>>()?;
        Ok(Config {
            server,
            harvest,
            learn_from_web: self.file.learn_from_web,
            fleet: self.file.fleet.clone(),
            state: self.state()?,
            repositories,
            memory_budget: self.file.memory_budget,
        })
    }

    /// `[state]`: the file's, or the database an override names.
    pub(crate) fn state(&self) -> Result<StateConfig, ConfigError> {
        let mut state = self.file.state.clone();
        if let Some(v) = &self.over.state.url {
            state.url = Some(v.parse(|url| crate::store::StateUrl::parse(url))?);
        }
        Ok(state)
    }

    /// `[server]`.
    pub(crate) fn server(&self) -> Result<ServerConfig, ConfigError> {
        let over = &self.over.server;
        let mut server = self.file.server.clone();
        if let Some(v) = &over.listen {
            server.listen = v.parse(|listen| {
                listen
                    .parse()
                    .map_err(|e| format!("{listen:?} is not an address:port: {e}"))
            })?;
        }
        if let Some(v) = &over.admin_listen {
            server.admin_listen = v.parse(|listen| config::parse_admin_listen(listen))?;
        }
        // The file's own pair was checked when it was read; an override can make a clash,
        // said of the override (the admin listener's first), naming the other key.
        if let Some(admin) = server.admin_listen
            && config::listeners_clash(server.listen, admin)
        {
            let key = |given: Option<&Given<String>>, file_key: &'static str| match given {
                Some(Given {
                    origin: Origin::Env(name) | Origin::Flag(name),
                    ..
                }) => *name,
                None => file_key,
            };
            let listen_key = key(over.listen.as_ref(), "[server] listen");
            let admin_key = key(over.admin_listen.as_ref(), "[server] admin_listen");
            let blamed = match (&over.admin_listen, &over.listen) {
                (Some(given), _) => Some((given.origin, admin, listen_key, server.listen)),
                (None, Some(given)) => Some((given.origin, server.listen, admin_key, admin)),
                (None, None) => None,
            };
            if let Some((origin, this, other_key, other)) = blamed {
                return Err(origin.error(config::listeners_clash_message(this, other_key, other)));
            }
        }
        if let Some(v) = &over.public_url {
            server.public_url = Some(v.parse(|url| config::directory_url(url))?);
        }
        if let Some(v) = &over.state_dir {
            server.state_dir = v.value.clone();
        }
        if let Some(v) = &over.admin_token {
            server.admin_token = Some(v.parse(|token| AdminToken::new(token))?);
        }
        if let Some(v) = &over.publish_url {
            server.publish_url = Some(v.parse(|url| config::parse_publish_url(url))?);
        }
        if let Some(v) = &over.publish_grace_secs {
            server.publish_grace = Duration::from_secs(v.value);
        }
        Ok(server)
    }

    /// `[harvest]`.
    pub(crate) fn harvest(&self) -> Result<HarvestSettings, ConfigError> {
        self.harvest_of(None)
    }

    /// How `chosen`'s upstream is treated: `[harvest]`, its `[repository.harvest]` over it
    /// (already in [`RepositoryConfig::harvest`]), then the environment and the flags; only
    /// `[harvest]` and those when the command takes no repository. The one path every command
    /// takes to a repository's harvest settings.
    pub(crate) fn harvest_of(
        &self,
        chosen: Option<&RepositoryConfig>,
    ) -> Result<HarvestSettings, ConfigError> {
        let over = &self.over.harvest;
        let mut harvest = chosen.map_or(&self.file.harvest, |r| &r.harvest).clone();
        if let Some(v) = &over.max_attempts {
            harvest.max_attempts = v.parse(|&n| at_least_one(n))?;
        }
        if let Some(v) = &over.request_timeout_secs {
            harvest.request_timeout = Duration::from_secs(v.parse(|&n| at_least_one(n))?);
        }
        if let Some(v) = &over.politeness_delay_ms {
            harvest.politeness_delay = Duration::from_millis(v.value);
        }
        if let Some(v) = &over.retry_after_max_secs {
            harvest.retry_after_max = Duration::from_secs(v.value);
        }
        if let Some(v) = &over.deadline_secs {
            harvest.deadline = (v.value > 0).then(|| Duration::from_secs(v.value));
        }
        if let Some(v) = &over.max_body_bytes {
            harvest.max_body_bytes = v.value;
        }
        if let Some(v) = &over.backoff_initial_ms {
            // Above the file's longest delay, it raises that one (the file's own two are
            // checked against each other when it is read).
            harvest.backoff_initial = Duration::from_millis(v.value);
            harvest.backoff_max = harvest.backoff_max.max(harvest.backoff_initial);
        }
        if let Some(v) = &over.user_agent {
            harvest.user_agent = v.value.clone();
        }
        Ok(harvest)
    }

    /// One repository's settings: `chosen`'s (the defaults when the command takes none) with
    /// the overrides on top.
    pub(crate) fn repository(
        &self,
        chosen: Option<&RepositoryConfig>,
    ) -> Result<RepositorySettings, ConfigError> {
        let over = &self.over.repository;
        let mut r = RepositorySettings::of(chosen);
        // Learning from the web, as the environment says, whether or not a file names the
        // repository, unless its `learn_from_web` says no.
        r.landing.web = crate::platform::Resolvers::for_commands().filter(|_| {
            let learn = chosen.map_or(self.file.learn_from_web, |r| r.learn_from_web);
            self.harvest_of(chosen).is_ok() && learn
        });
        what_to_harvest(&mut r, over)?;
        where_published(&mut r, over)?;
        what_to_publish(&mut r, over)?;
        Ok(r)
    }
}

fn at_least_one<N: Copy + Into<u64>>(n: N) -> Result<N, String> {
    if n.into() == 0 {
        return Err("must be at least 1".to_owned());
    }
    Ok(n)
}

/// The source, the sets, the datestamp bounds and how the store is used.
fn what_to_harvest(
    r: &mut RepositorySettings,
    over: &RepositoryOverrides,
) -> Result<(), ConfigError> {
    if let Some(v) = &over.base_url {
        r.source = Some(v.parse(|url| Source::parse(url))?);
    }
    if let Some(v) = &over.sets {
        r.sets = v.parse(|sets| config::validate_sets(sets.clone()))?;
    }
    if let Some(v) = &over.from {
        r.from = Some(v.parse(|date| config::parse_date(date))?);
    }
    if let Some(v) = &over.until {
        r.until = Some(v.parse(|date| config::parse_date(date))?);
    }
    if let Some(v) = over.from.as_ref().or(over.until.as_ref()) {
        v.parse(|_| config::check_range(r.from, r.until))?;
    }
    if let Some(v) = &over.full_harvest_interval_secs {
        r.policy.full_interval = Duration::from_secs(v.value);
    }
    if let Some(v) = &over.shrink_guard {
        r.policy.shrink_guard = v.parse(|&share| config::check_share(Some(share)))?;
    }
    if let Some(v) = &over.accept_shrink {
        r.policy.accept_shrink = v.value;
    }
    Ok(())
}

/// The public URL, the scope and where the landing pages are.
fn where_published(
    r: &mut RepositorySettings,
    over: &RepositoryOverrides,
) -> Result<(), ConfigError> {
    if let Some(v) = &over.public_url {
        r.public_url = Some(v.parse(|url| config::directory_url(url))?);
    }
    if let Some(v) = &over.scope {
        r.scope = v.parse(|scope| config::parse_scope(scope))?;
    }
    if let Some(v) = &over.platform {
        let platforms = r.landing.platforms.clone();
        r.landing.platform = v.parse(|name| config::parse_platform(name, &platforms))?;
    }
    if let Some(v) = &over.ui_url {
        r.landing.ui_url = Some(v.parse(|url| config::parse_ui_url(url))?);
    }
    if let Some(v) = &over.landing_template {
        r.landing.template = Some(v.parse(|template| config::parse_template(template))?);
    }
    Ok(())
}

/// The shard limits and the files published beside the sitemap.
fn what_to_publish(
    r: &mut RepositorySettings,
    over: &RepositoryOverrides,
) -> Result<(), ConfigError> {
    let (max_urls, max_bytes) = (&over.max_urls_per_shard, &over.max_bytes_per_shard);
    if max_urls.is_some() || max_bytes.is_some() {
        let limits = Limits {
            max_urls: max_urls.as_ref().map_or(r.limits.max_urls, |v| v.value),
            max_bytes: max_bytes.as_ref().map_or(r.limits.max_bytes, |v| v.value),
        };
        r.limits = limits
            .validate()
            .map_err(|m| Origin::Flag("--max-urls / --max-bytes").error(m))?;
    }
    for (setting, over) in [
        (&mut r.gzip, &over.gzip),
        (&mut r.profiles.signmap, &over.signmap),
        (&mut r.profiles.cdif, &over.cdif),
        (&mut r.profiles.cdif_list, &over.cdif_list),
    ] {
        if let Some(v) = over {
            *setting = v.value;
        }
    }
    if over.ocx.as_ref().is_some_and(|v| v.value) && r.profiles.ocx.is_none() {
        r.profiles.ocx = Some(OcxConfig::default());
    }
    if let Some(v) = &over.diwoo {
        r.profiles.diwoo = v.parse(|entries| parse_diwoo_entries(entries))?;
    }
    Ok(())
}

/// `SETSPEC=N` entries -> a DiWoo table.
fn parse_diwoo_entries(entries: &[String]) -> Result<Vec<(String, u8)>, String> {
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
    config::parse_diwoo(&table)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given<T>(value: T, origin: Origin) -> Option<Given<T>> {
        Some(Given { value, origin })
    }

    /// Each setting the upper layer gives replaces the lower one's; the others stay.
    #[test]
    fn merge_puts_the_upper_layer_on_top() {
        let env = Origin::Env(Environment::USER_AGENT);
        let flag = Origin::Flag("--user-agent");
        let lower = Overrides {
            harvest: HarvestOverrides {
                user_agent: given("env".to_owned(), env),
                max_attempts: given(3, Origin::Env("X")),
                ..HarvestOverrides::default()
            },
            ..Overrides::default()
        };
        let upper = Overrides {
            harvest: HarvestOverrides {
                user_agent: given("flag".to_owned(), flag),
                ..HarvestOverrides::default()
            },
            ..Overrides::default()
        };
        let merged = lower.clone().merge(upper.clone()).harvest;
        assert_eq!(merged.user_agent, given("flag".to_owned(), flag));
        assert_eq!(merged.max_attempts, given(3, Origin::Env("X")));
        let merged = upper.merge(lower).harvest;
        assert_eq!(merged.user_agent, given("env".to_owned(), env));
    }

    #[test]
    fn the_environment_is_read_as_given() {
        let read = |vars: &[(&str, OsString)]| {
            Environment::read(|name| {
                vars.iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.clone())
            })
        };
        // A blank user agent is none, for every command; any other is taken as it is.
        for (value, want) in [("", None), ("  ", None), (" a ", Some(" a "))] {
            let env = read(&[(Environment::USER_AGENT, value.into())]);
            let got = env.for_serve().harvest.user_agent.map(|g| g.value);
            assert_eq!(got.as_deref(), want, "{value:?}");
            let got = env.for_export().harvest.user_agent.map(|g| g.value);
            assert_eq!(got.as_deref(), want, "{value:?}");
        }
        // `export` takes the public URL as its repository's, `serve` as the gateway's, `check`
        // not at all.
        let env = read(&[(Environment::PUBLIC_URL, "https://h/".into())]);
        let public = Some(Given {
            value: "https://h/".to_owned(),
            origin: Origin::Env(Environment::PUBLIC_URL),
        });
        assert_eq!(env.for_export().repository.public_url, public);
        assert_eq!(env.for_export().server.public_url, None);
        assert_eq!(env.for_serve().server.public_url, public);
        assert_eq!(env.for_check().repository.public_url, None);
        assert_eq!(env.for_check().server.public_url, None);
    }

    #[cfg(unix)]
    #[test]
    fn a_variable_that_is_not_unicode_is_an_error_or_unset() {
        use std::os::unix::ffi::OsStringExt as _;
        let bad = OsString::from_vec(b"127.0.0.1:\xff".to_vec());
        let env = Environment::read(|_| Some(bad.clone()));
        let layers = Layers::new(Config::default(), env.for_serve(), Overrides::default());
        let err = layers.server().unwrap_err();
        assert_eq!(err.key, Environment::LISTEN);
        assert_eq!(env.for_serve().server.admin_token, None);
        assert_eq!(env.for_serve().harvest.user_agent, None);
    }

    /// `[server] admin_listen`: the flag, then `OAI_BRIDGE_ADMIN_LISTEN`, then the file; "off"
    /// in any layer switches the admin listener off; a bad value names its layer.
    #[test]
    fn the_admin_listener_takes_the_flag_then_the_environment_then_the_file() {
        let file = Config::parse(
            "[server]\nadmin_listen = \"127.0.0.1:1001\"\n",
            "bridge.toml",
            std::path::Path::new("."),
        )
        .unwrap();
        let env = |v: &str| Overrides {
            server: ServerOverrides {
                admin_listen: given(v.to_owned(), Origin::Env(Environment::ADMIN_LISTEN)),
                ..ServerOverrides::default()
            },
            ..Overrides::default()
        };
        let flag = |v: &str| Overrides {
            server: ServerOverrides {
                admin_listen: given(v.to_owned(), Origin::Flag("--admin-listen")),
                ..ServerOverrides::default()
            },
            ..Overrides::default()
        };
        let none = Overrides::default;
        let admin = |env: Overrides, flags: Overrides| {
            Layers::new(file.clone(), env, flags)
                .server()
                .map(|s| s.admin_listen.map(|a| a.to_string()))
        };
        let got = |env, flags| admin(env, flags).unwrap();
        assert_eq!(got(none(), none()).as_deref(), Some("127.0.0.1:1001"));
        assert_eq!(
            got(env("127.0.0.1:1002"), none()).as_deref(),
            Some("127.0.0.1:1002")
        );
        assert_eq!(
            got(env("127.0.0.1:1002"), flag("127.0.0.1:1003")).as_deref(),
            Some("127.0.0.1:1003")
        );
        assert_eq!(got(env("off"), none()), None);
        assert_eq!(
            got(env("off"), flag("127.0.0.1:1003")).as_deref(),
            Some("127.0.0.1:1003")
        );
        assert_eq!(got(none(), flag("")), None);
        let err = admin(env("nowhere"), none()).unwrap_err();
        assert_eq!(err.key, Environment::ADMIN_LISTEN);
        let err = admin(none(), flag("nowhere")).unwrap_err();
        assert_eq!(err.key, "--admin-listen");
        // Hidden by the flag, a bad variable is no error.
        assert!(admin(env("nowhere"), flag("off")).is_ok());
    }

    /// A flag's first retry delay above the file's longest raises the longest; in the file
    /// alone, the pair is an error.
    #[test]
    fn a_flags_first_delay_raises_the_files_longest() {
        let file = Config::parse(
            "[harvest]\nbackoff_max_secs = 1\nbackoff_initial_ms = 500\n",
            "bridge.toml",
            std::path::Path::new("."),
        )
        .unwrap();
        let flags = Overrides {
            harvest: HarvestOverrides {
                backoff_initial_ms: given(5000, Origin::Flag("--backoff-initial")),
                ..HarvestOverrides::default()
            },
            ..Overrides::default()
        };
        let harvest = Layers::new(file, Overrides::default(), flags)
            .harvest()
            .unwrap();
        assert_eq!(harvest.backoff_initial, Duration::from_secs(5));
        assert_eq!(harvest.backoff_max, Duration::from_secs(5));
    }
}
