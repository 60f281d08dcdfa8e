//! Reloading the configuration while serving (SIGHUP, `POST /-/reload`): the file is read again
//! with the environment and flags of the start over it, and applied without dropping a request.
//!
//! The repositories and the settings a refresh or a request reads are one value
//! ([`super::Live`]) swapped whole, so a request sees the set before or the set after. Added
//! repositories open their state and start their schedules (a first refresh at once, unless a
//! persisted generation is fresh); removed ones stop being served and their schedules stop
//! (their state stays on disk: `oai-bridge prune` removes it); a kept repository takes its new
//! settings from its next refresh, which starts at once when they change its files. What only
//! a restart can change is logged and left as it is. A file that cannot be read or is invalid
//! changes nothing and says why.
//!
//! A reload runs in a task of its own, and what in it blocks (reading the file, opening the
//! added repositories' stores, recording what is served, dating robots.txt) on blocking
//! threads: requests go on being answered while a store takes its time to open.

use std::fmt;
use std::sync::Arc;

use super::{Gateway, Live, Repo};
use crate::config::{Config, ServerConfig};
use crate::error::{ConfigError, Error};

/// Reads the configuration again: the file, with the environment and the flags of the start.
pub(crate) struct Loader(pub(crate) Box<dyn Fn() -> Result<Config, ConfigError> + Send + Sync>);

impl fmt::Debug for Loader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Loader")
    }
}

/// What the blocking part of a reload did ([`Gateway::swap_in`]).
struct Swapped {
    reloaded: Reloaded,
    removed: Vec<Arc<Repo>>,
    added: Vec<Arc<Repo>>,
}

/// The outcome of a task a reload waited for: a panic goes on unwinding in the caller.
fn joined<T>(outcome: Result<Result<T, Error>, tokio::task::JoinError>) -> Result<T, Error> {
    match outcome {
        Ok(outcome) => outcome,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => Err(Error::Interrupted),
    }
}

/// What a reload changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reloaded {
    /// Repositories added, now served (each refreshes at once unless it has a fresh generation).
    pub added: Vec<String>,
    /// Repositories removed: no longer served, their schedules stopped, their state kept.
    pub removed: Vec<String>,
    /// Repositories whose settings changed: they apply from the next refresh (at once when they
    /// change the files).
    pub changed: Vec<String>,
    /// `[server]` keys whose change needs a restart, left as they were.
    pub needs_restart: Vec<&'static str>,
}

impl fmt::Display for Reloaded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |names: &[String]| {
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        };
        write!(
            f,
            "reloaded: added {}; removed {}; changed {}",
            list(&self.added),
            list(&self.removed),
            list(&self.changed)
        )?;
        if !self.needs_restart.is_empty() {
            write!(
                f,
                "; needs a restart (ignored): {}",
                self.needs_restart.join(", ")
            )?;
        }
        Ok(())
    }
}

/// The `[server]` keys that differ between `running` and `next` and that only a restart
/// applies: the listeners, the public URL (every published URL and the routing), the state
/// folder, the cache's size, the connection and shutdown limits, `Cache-Control`, where and
/// how generations are published to object storage.
fn needs_restart(running: &ServerConfig, next: &ServerConfig) -> Vec<&'static str> {
    // Each key's declaration says whether a reload applies it (config::keys).
    running.needs_restart(next)
}

impl Gateway {
    /// Reads the configuration again and applies it ([module docs](self)); one reload at a
    /// time. On error the running configuration stays; either way the outcome is logged and
    /// counted (`oai_bridge_config_reloads_total`, `oai_bridge_config_reload_failed`).
    pub async fn reload(self: &Arc<Self>) -> Result<Reloaded, Error> {
        // A task of its own: a caller that goes away (a client hanging up on `POST /-/reload`
        // while a store opens) never leaves a reload half applied.
        let gateway = Arc::clone(self);
        joined(tokio::spawn(async move { gateway.reload_whole().await }).await)
    }

    async fn reload_whole(self: &Arc<Self>) -> Result<Reloaded, Error> {
        let _one_at_a_time = self.reloading.lock().await;
        let outcome = self.apply_reload().await;
        let m = &self.metrics;
        let error = match &outcome {
            Ok(reloaded) => {
                tracing::info!("configuration {reloaded}");
                m.config_reload_failed.set(0);
                m.reloads("success");
                None
            }
            Err(e) => {
                let error = crate::error::chain(e);
                tracing::error!("configuration not reloaded; the running one stays: {error}");
                m.config_reload_failed.set(1);
                m.reloads("failure");
                Some(error)
            }
        };
        *self.reload_error.lock().unwrap_or_else(|e| e.into_inner()) = error;
        outcome
    }

    async fn apply_reload(self: &Arc<Self>) -> Result<Reloaded, Error> {
        // Reading the file, opening the added repositories' stores (a SQLite file's schema; a
        // PostgreSQL connection, up to its connect_timeout, and its migrations) and recording
        // what is served block: on a blocking thread, not on the runtime that answers requests.
        let gateway = Arc::clone(self);
        let Swapped {
            mut reloaded,
            removed,
            added,
        } = joined(tokio::task::spawn_blocking(move || gateway.swap_in()).await)?;
        // The set has changed: robots.txt follows at once.
        self.announce().await;

        reloaded.removed = removed.iter().map(|r| r.name.clone()).collect();
        self.stop_schedules(Some(&reloaded.removed)).await;
        for repo in &removed {
            tracing::info!(
                repository = repo.name,
                "removed from the configuration: no longer served; its state stays on disk"
            );
            // Its generation stays on disk (not retired); only its cached bytes and its
            // metrics go.
            if let Some(g) = repo.current() {
                self.forget(g.serial);
            }
            super::refresh::forget_metrics(&self.metrics, repo);
        }
        for repo in &added {
            tracing::info!(repository = repo.name, "added by the configuration");
            reloaded.added.push(repo.name.clone());
        }
        // Their first refreshes are spread, as those of the start are.
        self.start_schedules(added);
        Ok(reloaded)
    }

    /// The configuration read again, the added repositories opened, and the repository set
    /// and settings swapped in; nothing changes when any of it fails. Blocking.
    fn swap_in(self: &Arc<Self>) -> Result<Swapped, Error> {
        let loader = self.loader.as_ref().ok_or(Error::NoConfigFile)?;
        let config = (loader.0)()?;
        let mut reloaded = Reloaded {
            needs_restart: needs_restart(&self.server, &config.server),
            ..Reloaded::default()
        };
        if self.state != config.state {
            reloaded.needs_restart.push("[state] url");
        }
        for key in &reloaded.needs_restart {
            tracing::warn!("{key} changed: it needs a restart, and is ignored until then");
        }
        let running = self.live();
        // Every added repository is opened before anything changes: one that cannot be fails
        // the reload as a whole.
        let mut repos = Vec::with_capacity(config.repositories.len());
        let mut added: Vec<Arc<Repo>> = Vec::new();
        // The added repositories take the places among those with series of their own that
        // are free, in configuration order, before they open (and set their gauges).
        let names: Vec<&str> = (config.repositories.iter())
            .map(|r| r.name.as_str())
            .collect();
        // By name, so that a reload of ten thousand repositories is not ten thousand squared
        // comparisons.
        let running_by_name: std::collections::HashMap<&str, &Arc<Repo>> = (running.repos.iter())
            .map(|r| (r.name.as_str(), r))
            .collect();
        let configured: std::collections::HashSet<&str> = names.iter().copied().collect();
        let new: Vec<&str> = (names.iter().copied())
            .filter(|n| !running_by_name.contains_key(n))
            .collect();
        self.metrics.admit(&names, new.iter().copied());
        let memory = super::Remembered::read(
            self.state.url.as_ref(),
            new.iter().map(|n| (*n).to_owned()).collect(),
            &self.server.state_dir,
        )?;
        for rc in &config.repositories {
            match running_by_name.get(rc.name.as_str()) {
                Some(repo) => repos.push((Arc::clone(repo), Some(rc))),
                None => {
                    let opened = Repo::open(
                        rc,
                        &self.public_url,
                        self.server.publish_url.as_ref(),
                        &self.server.state_dir,
                        &memory,
                        &self.metrics,
                        false,
                    );
                    let repo = match opened {
                        Ok(repo) => Arc::new(repo),
                        Err(e) => {
                            for repo in &added {
                                super::refresh::forget_metrics(&self.metrics, repo);
                            }
                            return Err(e);
                        }
                    };
                    added.push(Arc::clone(&repo));
                    repos.push((repo, None));
                }
            }
        }
        for (repo, kept) in &repos {
            if let Some(rc) = kept
                && repo.reconfigure(rc, &self.public_url, self.server.publish_url.as_ref())
            {
                tracing::info!(
                    repository = repo.name,
                    "settings changed; they apply from its next refresh (at once if its files change)"
                );
                reloaded.changed.push(repo.name.clone());
            }
        }
        let removed: Vec<Arc<Repo>> = (running.repos.iter())
            .filter(|r| !configured.contains(r.name.as_str()))
            .cloned()
            .collect();
        let pool_limits = config.pool_limits();
        let next = Live {
            repos: repos.into_iter().map(|(repo, _)| repo).collect(),
            fleet: config.fleet.clone(),
            admin_token: config.server.admin_token,
        };
        // Refreshes waiting for a slot start at once if the limits went up; the memory and
        // spill space they share follow (a default budget follows max_concurrent_refreshes).
        self.slots.resize(&config.fleet);
        self.pool.configure(pool_limits);
        super::prune::record_serving(
            &self.server.state_dir,
            next.repos.iter().map(|r| r.name.as_str()),
        );
        *self.live.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(next);
        drop(running);
        Ok(Swapped {
            reloaded,
            removed,
            added,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_a_restart_applies_is_named() {
        let parse = |text: &str| {
            Config::parse(text, "bridge.toml", std::path::Path::new("."))
                .unwrap()
                .server
        };
        let running = parse("[server]\n");
        assert!(needs_restart(&running, &parse("[server]\n")).is_empty());
        let token = "admin_token = \"0123456789abcdef\"\n";
        assert!(needs_restart(&running, &parse(&format!("[server]\n{token}"))).is_empty());
        assert_eq!(
            needs_restart(
                &running,
                &parse(
                    "[server]\nlisten = \"127.0.0.1:1\"\nadmin_listen = \"off\"\n\
                     state_dir = \"elsewhere\"\nmax_age_secs = 1\n"
                )
            ),
            [
                "[server] listen",
                "[server] admin_listen",
                "[server] state_dir",
                "[server] max_age_secs"
            ]
        );
    }

    #[test]
    fn what_a_reload_did_reads_in_one_line() {
        let reloaded = Reloaded {
            added: vec!["a".into(), "b".into()],
            needs_restart: vec!["[server] listen"],
            ..Reloaded::default()
        };
        assert_eq!(
            reloaded.to_string(),
            "reloaded: added a, b; removed none; changed none; needs a restart (ignored): [server] listen"
        );
    }
}
