//! Where each setting comes from, in one place: the defaults, then `bridge.toml`, then the
//! environment, then the flags, for `serve`, `export` and `check` alike.
//!
//! The file is read and checked by [`crate::config`], whose errors name its keys. The
//! environment ([`Environment`]) and each command's flags become [`Overrides`], shaped as the
//! file's sections are, each value remembering the variable or flag that gave it ([`Given`]).
//! [`Layers::new`] stacks them in their one order; [`Layers`] checks each value it takes from
//! them as it applies it over the file, an error naming that variable or flag. A value that a
//! higher layer hides is never read, so a bad one there is no error.

use crate::error::ConfigError;
use oai_pmh::HarvestSettings;

use crate::cli::{CheckArgs, ExportArgs, MigrateStateArgs, PruneArgs, ServeArgs};
pub(crate) use crate::config::RepositorySettings;
use crate::config::keys::At;
use crate::config::{self, Config, HarvestTarget, RepositoryConfig, ServerConfig, StateConfig};

pub(crate) use crate::config::keys::{CommandName, Environment, Given, Origin, Overrides};
#[cfg(test)]
use crate::config::keys::{HarvestOverrides, ServerOverrides};

impl Environment {
    /// What `serve` reads: every variable.
    pub(crate) fn for_serve(&self) -> Overrides {
        Overrides::from_env(self, CommandName::Serve)
    }

    /// What `prune` reads: the state directory, the one setting it uses beyond the file's
    /// repositories (a listener or token it has no use for cannot fail it).
    pub(crate) fn for_prune(&self) -> Overrides {
        Overrides::from_env(self, CommandName::Prune)
    }

    /// What `migrate-state` reads: the state directory to copy and the database to copy
    /// into.
    pub(crate) fn for_migrate(&self) -> Overrides {
        Overrides::from_env(self, CommandName::Migrate)
    }

    /// What `export` reads: the user agent, the public URL as the exported repository's
    /// (what `--public-url` sets), and the database of its store.
    pub(crate) fn for_export(&self) -> Overrides {
        Overrides::from_env(self, CommandName::Export)
    }

    /// What `check` reads: the user agent.
    pub(crate) fn for_check(&self) -> Overrides {
        Overrides::from_env(self, CommandName::Check)
    }
}

/// A flag that switches a setting on; without it, the setting is left to the layers below.
fn switch(name: &'static str, on: bool) -> Option<Given<bool>> {
    on.then_some(Given {
        value: true,
        origin: Origin::Flag(name),
    })
}

impl From<&ServeArgs> for Overrides {
    fn from(args: &ServeArgs) -> Overrides {
        Overrides {
            accept_shrink: switch("--accept-shrink", args.accept_shrink),
            ..args.settings.overrides.clone()
        }
    }
}

impl From<&ExportArgs> for Overrides {
    fn from(args: &ExportArgs) -> Overrides {
        Overrides {
            accept_shrink: switch("--accept-shrink", args.accept_shrink),
            ..args.settings.overrides.clone()
        }
    }
}

impl From<&CheckArgs> for Overrides {
    fn from(args: &CheckArgs) -> Overrides {
        args.settings.overrides.clone()
    }
}

impl From<&PruneArgs> for Overrides {
    fn from(args: &PruneArgs) -> Overrides {
        args.settings.overrides.clone()
    }
}

impl From<&MigrateStateArgs> for Overrides {
    fn from(args: &MigrateStateArgs) -> Overrides {
        args.settings.overrides.clone()
    }
}

impl RepositorySettings {
    /// The file's layer: `repo`'s keys, or the defaults when the command takes none.
    fn of(repo: Option<&RepositoryConfig>) -> RepositorySettings {
        let Some(r) = repo else {
            return RepositorySettings::default();
        };
        RepositorySettings {
            name: Some(r.name.clone()),
            source: Some(r.source.clone()),
            public_url: r.public_url.clone(),
            sets: r.sets.clone(),
            scope: r.scope.clone(),
            landing: r.landing.clone(),
            from: r.from,
            until: r.until,
            limits: r.limits,
            gzip: r.gzip,
            signposting_header: r.signposting_header.clone(),
            changelist_days: r.changelist_days,
            profiles: r.profiles.clone(),
            refresh_interval: r.refresh_interval,
            policy: r.policy.clone(),
            indexnow: r.indexnow.clone(),
        }
    }

    /// `repo` with these settings in place of its own, and `harvest` for its upstream.
    fn configure(mut self, repo: &RepositoryConfig, harvest: HarvestSettings) -> RepositoryConfig {
        let source = self.source.take().unwrap_or_else(|| repo.source.clone());
        let harvest = (harvest, repo.learn_from_web);
        self.into_repository(repo.name.clone(), source, harvest, repo.file.clone())
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
            sources: self.sources(),
        })
    }

    /// Where each setting of `[server]`, `[harvest]` and `[state]` comes from: the file's
    /// layer, with what the environment and the flags give over it.
    pub(crate) fn sources(&self) -> config::Sources {
        let mut sources = self.file.sources.clone();
        let over = &self.over;
        let given = (over
            .server
            .origins()
            .into_iter()
            .map(|(k, o)| ("[server]", k, o)))
        .chain(
            over.harvest
                .origins()
                .into_iter()
                .map(|(k, o)| ("[harvest]", k, o)),
        )
        .chain(
            over.state
                .origins()
                .into_iter()
                .map(|(k, o)| ("[state]", k, o)),
        );
        for (section, name, origin) in given {
            sources.given(section, name, origin);
        }
        sources
    }

    /// `[state]`: the file's, with the overrides over it, and the password of
    /// `password_file` in its URL (which either layer may give).
    pub(crate) fn state(&self) -> Result<StateConfig, ConfigError> {
        let mut state = self.file.state.clone();
        self.over.state.apply(&mut state, &At::overrides())?;
        state.join_password()
    }

    /// `[server]`: the file's, with the overrides over it.
    pub(crate) fn server(&self) -> Result<ServerConfig, ConfigError> {
        let over = &self.over.server;
        let mut server = self.file.server.clone();
        over.apply(&mut server, &At::overrides())?;
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
        let file = &self.file;
        let mut target = HarvestTarget {
            harvest: chosen.map_or(&file.harvest, |r| &r.harvest).clone(),
            learn_from_web: chosen.map_or(file.learn_from_web, |r| r.learn_from_web),
            fleet: file.fleet.clone(),
            memory_budget: file.memory_budget,
        };
        self.over.harvest.apply(&mut target, &At::overrides())?;
        let mut harvest = target.harvest;
        if self.over.harvest.backoff_initial_ms.is_some() {
            // Above the file's longest delay, it raises that one (the file's own two are
            // checked against each other when it is read).
            harvest.backoff_max = harvest.backoff_max.max(harvest.backoff_initial);
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
        over.apply(&mut r, &At::overrides())?;
        // What the keys check together, said of the override that gave one of them.
        if let Some(v) = over.from.as_ref().or(over.until.as_ref()) {
            v.parse(|_| config::check_range(r.from, r.until))?;
        }
        if over.max_urls_per_shard.is_some() || over.max_bytes_per_shard.is_some() {
            r.limits = (r.limits.validate())
                .map_err(|m| Origin::Flag("--max-urls / --max-bytes").error(m))?;
        }
        if let Some(v) = &self.over.accept_shrink {
            r.policy.accept_shrink = v.value;
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;
    use std::time::Duration;

    use super::*;

    fn given<T>(value: T, origin: Origin) -> Option<Given<T>> {
        Some(Given { value, origin })
    }

    /// The secrets' `_FILE` twins: the file's text is the variable's value (its final line
    /// break dropped), errors name the twin and the file, never the value; a twin and its
    /// variable both set is an error.
    #[test]
    fn a_secrets_file_variable_gives_its_files_text() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "0123456789abcdef-file-token\n").unwrap();
        let read = |vars: &[(&str, &std::path::Path)]| {
            Environment::read(|name| {
                (vars.iter())
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| OsString::from(v))
            })
        };
        let twin = "OAI_BRIDGE_ADMIN_TOKEN_FILE";
        let env = read(&[(twin, &token)]).unwrap();
        let layers = Layers::new(Config::default(), env.for_serve(), Overrides::default());
        let server = layers.server().unwrap();
        let want = crate::config::AdminToken::new("0123456789abcdef-file-token").unwrap();
        assert_eq!(server.admin_token, Some(want));
        let given = env.for_serve().server.admin_token.unwrap();
        assert_eq!(given.origin, Origin::Env(twin));

        let missing = dir.path().join("missing");
        let err = read(&[(twin, &missing)]).unwrap_err();
        assert_eq!(err.key, twin);
        assert!(
            err.message.contains(&missing.display().to_string()),
            "{err}"
        );
        let short = dir.path().join("short");
        std::fs::write(&short, "short-secret\n").unwrap();
        let env = read(&[(twin, &short)]).unwrap();
        let layers = Layers::new(Config::default(), env.for_serve(), Overrides::default());
        let err = layers.server().unwrap_err();
        assert_eq!(err.key, twin);
        assert!(!err.to_string().contains("short-secret"), "{err}");
        let err = read(&[(twin, &token), (Environment::ADMIN_TOKEN, &token)]).unwrap_err();
        assert_eq!(err.key, twin);
        assert!(err.message.contains(Environment::ADMIN_TOKEN), "{err}");
    }

    /// `[state] password_file` goes into the URL whichever layer gives either; a URL with a
    /// password of its own, or none, is an error naming the password's file.
    #[test]
    fn the_password_file_joins_the_url_of_any_layer() {
        let dir = tempfile::tempdir().unwrap();
        let password = dir.path().join("password");
        std::fs::write(&password, "pw-in-a-file\n").unwrap();
        let file = |state: &str| {
            Config::parse(&format!("[state]\n{state}\n"), "bridge.toml", dir.path()).unwrap()
        };
        let env = |url: &str| {
            let url = OsString::from(url);
            Environment::read(|name| (name == Environment::STATE_URL).then(|| url.clone()))
                .unwrap()
                .for_serve()
        };
        let state =
            |file: Config, env: Overrides| Layers::new(file, env, Overrides::default()).state();
        let joined = state(
            file("password_file = \"password\""),
            env("postgres://u@db.example/d"),
        )
        .unwrap();
        let url = joined.url.unwrap();
        assert!(url.has_password());
        assert_eq!(url.redacted(), "postgres://u@db.example:5432/d");
        assert_eq!(joined.password, None);
        let err = state(
            file("password_file = \"password\""),
            env("postgres://u:pw@db.example/d"),
        )
        .unwrap_err();
        assert_eq!(err.key, "[state] password_file");
        assert_eq!(err.file, password.display().to_string());
        let err = state(file("password_file = \"password\""), Overrides::default()).unwrap_err();
        assert!(err.message.contains("no [state] url"), "{err}");
        let err = Config::parse(
            "[state]\npassword_file = \"nowhere\"\n",
            "bridge.toml",
            dir.path(),
        )
        .unwrap_err();
        assert_eq!(err.key, "[state] password_file");
        assert!(err.message.contains("nowhere"), "{err}");
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
            .unwrap()
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
        // Every variable but the secrets' `_FILE` twins, which would name a file.
        let env =
            Environment::read(|name| (!name.ends_with("_FILE")).then(|| bad.clone())).unwrap();
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

    /// Where each setting came from: a flag over the environment over the file over the
    /// default, a line per place, flags first; the defaults are not listed.
    #[test]
    fn the_sources_say_where_each_setting_came_from() {
        let file = Config::parse(
            "[server]\nlisten = \"127.0.0.1:1001\"\nstate_dir = \"s\"\n[harvest]\nuser_agent = \"a\"\n",
            "bridge.toml",
            std::path::Path::new("."),
        )
        .unwrap();
        let env = Environment::read(|name| {
            (name == Environment::ADMIN_LISTEN).then(|| OsString::from("127.0.0.1:1002"))
        })
        .unwrap()
        .for_serve();
        let flags = Overrides {
            server: ServerOverrides {
                listen: given("127.0.0.1:1003".to_owned(), Origin::Flag("--listen")),
                ..ServerOverrides::default()
            },
            ..Overrides::default()
        };
        let config = Layers::new(file, env, flags).config().unwrap();
        assert_eq!(
            config.sources.lines(),
            [
                "--listen: [server] listen",
                "OAI_BRIDGE_ADMIN_LISTEN: [server] admin_listen",
                "bridge.toml: [server] state_dir; [harvest] user_agent",
            ]
        );
        assert!(Config::default().sources.lines().is_empty());
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
