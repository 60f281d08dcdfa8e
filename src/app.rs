//! Turns parsed command-line arguments and `bridge.toml` into the options of each command
//! (precedence: flags, then environment, then file, then defaults), and runs it.

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use url::Url;

use crate::check::{self, CheckOptions};
use crate::cli::{CheckArgs, ExportArgs, ServeArgs};
use crate::config::{self, Config, ConfigError, RepositoryConfig};
use crate::export::{self, ExportOptions};
use crate::oai::{HarvestRequest, Source};
use crate::pipeline::Job;
use crate::render::Limits;

/// Exit code for a bad configuration (sysexits `EX_CONFIG`).
pub const EXIT_CONFIG: u8 = 78;

fn flag_err(flag: &str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        file: "command line".to_owned(),
        key: flag.to_owned(),
        message: message.into(),
    }
}

/// Builds the export options from flags and configuration.
pub fn export_options(args: &ExportArgs) -> Result<ExportOptions, ConfigError> {
    let config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    let repo: Option<&RepositoryConfig> = match (&args.repository, &args.base_url) {
        (Some(name), _) => Some(
            config
                .repositories
                .iter()
                .find(|r| &r.name == name)
                .ok_or_else(|| {
                    flag_err(
                        "--repository",
                        format!("no [[repository]] named {name:?} in the configuration"),
                    )
                })?,
        ),
        (None, Some(_)) => None,
        (None, None) => match config.repositories.as_slice() {
            [only] => Some(only),
            [] => {
                return Err(flag_err(
                    "--base-url",
                    "give --base-url, or --config with a [[repository]]",
                ));
            }
            _ => {
                return Err(flag_err(
                    "--repository",
                    "the configuration has several repositories; choose one with --repository",
                ));
            }
        },
    };

    let source = match &args.base_url {
        Some(value) => Source::parse(value).map_err(|m| flag_err("--base-url", m))?,
        None => repo
            .map(|r| r.source.clone())
            .expect("a repository was chosen above"),
    };
    let public_url = match &args.public_url {
        Some(value) => config::directory_url(value).map_err(|m| flag_err("--public-url", m))?,
        None => repo
            .and_then(|r| r.public_url.clone())
            .or_else(|| {
                let server = config.server.public_url.as_ref()?;
                let name = repo.map(|r| format!("{}/", r.name))?;
                server.join(&name).ok()
            })
            .ok_or_else(|| {
                flag_err(
                    "--public-url",
                    "is required: the URL where the folder will be served",
                )
            })?,
    };
    let sets = if args.sets.is_empty() {
        repo.map(|r| r.sets.clone()).unwrap_or_default()
    } else {
        config::validate_sets(args.sets.clone()).map_err(|m| flag_err("--set", m))?
    };
    let from = match &args.from {
        Some(v) => Some(config::parse_date(v).map_err(|m| flag_err("--from", m))?),
        None => repo.and_then(|r| r.from),
    };
    let until = match &args.until {
        Some(v) => Some(config::parse_date(v).map_err(|m| flag_err("--until", m))?),
        None => repo.and_then(|r| r.until),
    };
    config::check_range(from, until).map_err(|m| flag_err("--from", m))?;
    let scope: Vec<Url> = if args.scope.is_empty() {
        repo.map(|r| r.scope.clone()).unwrap_or_default()
    } else {
        config::parse_scope(&args.scope).map_err(|m| flag_err("--scope", m))?
    };
    let landing = landing_settings(
        &args.landing,
        repo.map(|r| r.landing.clone()).unwrap_or_default(),
    )?;
    let base_limits = repo.map(|r| r.limits).unwrap_or_default();
    let limits = Limits {
        max_urls: args.max_urls.unwrap_or(base_limits.max_urls),
        max_bytes: args.max_bytes.unwrap_or(base_limits.max_bytes),
    }
    .validate()
    .map_err(|m| flag_err("--max-urls / --max-bytes", m))?;

    let mut harvest = config.harvest.clone();
    if let Some(v) = args.max_attempts {
        if v == 0 {
            return Err(flag_err("--max-attempts", "must be at least 1"));
        }
        harvest.max_attempts = v;
    }
    if let Some(v) = args.request_timeout {
        if v == 0 {
            return Err(flag_err("--request-timeout", "must be at least 1"));
        }
        harvest.request_timeout = Duration::from_secs(v);
    }
    if let Some(v) = args.politeness_delay {
        harvest.politeness_delay = Duration::from_millis(v);
    }
    if let Some(v) = args.retry_after_max {
        harvest.retry_after_max = Duration::from_secs(v);
    }
    if let Some(v) = args.deadline {
        harvest.deadline = (v > 0).then(|| Duration::from_secs(v));
    }
    if let Some(v) = args.max_body_bytes {
        harvest.max_body_bytes = v;
    }
    if let Some(v) = args.backoff_initial {
        harvest.backoff_initial = Duration::from_millis(v);
        harvest.backoff_max = harvest.backoff_max.max(harvest.backoff_initial);
    }
    if let Some(v) = &args.user_agent {
        harvest.user_agent = v.clone();
    }

    let mut policy = repo.map(|r| r.policy.clone()).unwrap_or_default();
    if let Some(v) = args.full_harvest_interval {
        policy.full_interval = Duration::from_secs(v);
    }
    if args.shrink_guard.is_some() {
        policy.shrink_guard =
            config::check_share(args.shrink_guard).map_err(|m| flag_err("--shrink-guard", m))?;
    }
    policy.accept_shrink = args.accept_shrink;
    let signmap = args.signmap || repo.is_some_and(|r| r.signmap);
    let cdif = args.cdif || repo.is_some_and(|r| r.cdif);
    let cdif_list = args.cdif_list || repo.is_some_and(|r| r.cdif_list);
    let ocx = repo
        .and_then(|r| r.ocx.clone())
        .or_else(|| args.ocx.then(config::OcxConfig::default));
    let diwoo = if args.diwoo.is_empty() {
        repo.map(|r| r.diwoo.clone()).unwrap_or_default()
    } else {
        let mut table = std::collections::BTreeMap::new();
        for value in &args.diwoo {
            let (set, n) = value
                .rsplit_once('=')
                .ok_or_else(|| flag_err("--diwoo", format!("{value:?}: give SETSPEC=CATEGORY")))?;
            let n: i64 = n
                .parse()
                .map_err(|_| flag_err("--diwoo", format!("{value:?}: the category is a number")))?;
            table.insert(set.to_owned(), n);
        }
        config::parse_diwoo(&table).map_err(|m| flag_err("--diwoo", m))?
    };
    Ok(ExportOptions {
        job: Job {
            request: HarvestRequest {
                fields: crate::pipeline::fields_for(
                    signmap,
                    ocx.is_some(),
                    cdif || cdif_list,
                    &landing,
                    &source,
                ),
                source,
                sets,
                from,
                until,
            },
            landing,
            signmap,
            ocx,
            cdif,
            cdif_list,
            diwoo,
            scope,
            limits,
            gzip: args.gzip || repo.is_some_and(|r| r.gzip),
            public_url,
            spill_dir: None,
        },
        harvest,
        out: args.out.clone(),
        progress: !args.no_progress,
        state: args.state.clone(),
        policy,
    })
}

/// Builds the options of `check`: a baseURL, a configured repository by name, or a local
/// Static Repository file.
pub fn check_options(args: &CheckArgs) -> Result<CheckOptions, ConfigError> {
    let is_url = args.target.starts_with("http://") || args.target.starts_with("https://");
    let is_file = !is_url
        && (args.target.starts_with("file://") || std::path::Path::new(&args.target).is_file());
    // A repository name is looked up in the configuration even when a file has the same name.
    let default_config = std::path::Path::new("bridge.toml");
    let config = match &args.config {
        Some(path) => Config::load(path)?,
        None if !is_url && (!is_file || default_config.is_file()) => Config::load(default_config)?,
        None => Config::default(),
    };
    let named = config.repositories.iter().find(|r| r.name == args.target);
    let (source, mut scope, mut public_url) = if is_url {
        let url = Url::parse(&args.target)
            .map_err(|e| flag_err("URL", format!("{:?} is not a URL: {e}", args.target)))?;
        (Source::Oai(url), Vec::new(), None)
    } else if let (None, true) = (named, is_file) {
        let source = Source::parse(&args.target).map_err(|m| flag_err("URL", m))?;
        (source, Vec::new(), None)
    } else {
        let repo = named.ok_or_else(|| {
            flag_err(
                "URL",
                format!(
                    "{:?} is neither an http(s) baseURL, a [[repository]] of the configuration, nor a Static Repository file",
                    args.target
                ),
            )
        })?;
        let public = repo.public_url.clone().or_else(|| {
            config
                .server
                .public_url
                .as_ref()
                .and_then(|p| p.join(&format!("{}/", repo.name)).ok())
        });
        (repo.source.clone(), repo.scope.clone(), public)
    };
    let landing = landing_settings(
        &args.landing,
        named
            .filter(|_| !is_url)
            .map(|r| r.landing.clone())
            .unwrap_or_default(),
    )?;
    if !args.scope.is_empty() {
        scope = config::parse_scope(&args.scope).map_err(|m| flag_err("--scope", m))?;
    }
    if let Some(url) = &args.public_url {
        public_url = Some(config::directory_url(url).map_err(|m| flag_err("--public-url", m))?);
    }
    if args.pages == 0 {
        return Err(flag_err("--pages", "must be at least 1"));
    }
    // An operator waits for the answer: each request is tried twice at most, with short waits.
    let mut harvest = config.harvest.clone();
    if let Some(agent) = env_user_agent() {
        harvest.user_agent = agent;
    }
    crate::oai::RetryPolicy::of(&harvest)
        .interactive()
        .apply(&mut harvest);
    Ok(CheckOptions {
        source,
        scope,
        landing,
        fetch: args.fetch,
        public_url,
        pages: args.pages,
        harvest,
    })
}

/// The landing settings of a command: the repository's, each flag given overriding its key.
fn landing_settings(
    args: &crate::cli::LandingArgs,
    mut settings: crate::platform::LandingSettings,
) -> Result<crate::platform::LandingSettings, ConfigError> {
    if let Some(v) = &args.platform {
        settings.platform = config::parse_platform(v).map_err(|m| flag_err("--platform", m))?;
    }
    if let Some(v) = &args.ui_url {
        settings.ui_url = Some(config::parse_ui_url(v).map_err(|m| flag_err("--ui-url", m))?);
    }
    if let Some(v) = &args.landing_template {
        settings.template =
            Some(config::parse_template(v).map_err(|m| flag_err("--landing-template", m))?);
    }
    Ok(settings)
}

/// Runs `check` and prints its report; exit 0 when the repository can be bridged as configured,
/// 1 when not, 78 for a bad configuration.
pub async fn run_check(args: &CheckArgs) -> ExitCode {
    let options = match check_options(args) {
        Ok(options) => options,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let report = match check::check(&options).await {
        Ok(report) => report,
        Err(e) => {
            eprintln!("error: cannot set up the HTTP client: {e}");
            return ExitCode::FAILURE;
        }
    };
    let text = if args.json {
        serde_json::to_string_pretty(&report).expect("the report serialises") + "\n"
    } else {
        report.render()
    };
    print!("{text}");
    if report.bridgeable {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Runs `export` and prints its summary or error; returns the exit code.
pub async fn run_export(args: &ExportArgs) -> ExitCode {
    let options = match export_options(args) {
        Ok(options) => options,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    match export::export(&options).await {
        Ok(summary) => {
            print!("{}", summary.render(&options.job));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!(
                "error: export of {} failed; {} was left as it was.\n{}",
                options.job.request.source,
                options.out.display(),
                error_chain(&e)
            );
            ExitCode::FAILURE
        }
    }
}

/// An error and its sources, one per line (the shared spelling: [`crate::error::chain`]).
pub use crate::error::chain as error_chain;

/// The configuration of `serve`: the file, overridden by environment variables and flags.
pub fn serve_config(args: &ServeArgs) -> Result<Config, ConfigError> {
    let mut config = Config::load(&args.config)?;
    if let Some(listen) = &args.listen {
        config.server.listen = listen.parse().map_err(|e| {
            flag_err(
                "--listen / OAI_BRIDGE_LISTEN",
                format!("{listen:?} is not an address:port: {e}"),
            )
        })?;
    }
    if let Some(url) = &args.public_url {
        config.server.public_url = Some(
            config::directory_url(url)
                .map_err(|m| flag_err("--public-url / OAI_BRIDGE_PUBLIC_URL", m))?,
        );
    }
    if let Some(dir) = &args.state_dir {
        config.server.state_dir = dir.clone();
    }
    for r in &mut config.repositories {
        r.policy.accept_shrink = args.accept_shrink;
    }
    // The environment's user agent, as `export --user-agent` reads it (bridge.toml's header
    // promises it overrides the file for every command).
    if let Some(agent) = env_user_agent() {
        config.harvest.user_agent = agent;
    }
    if let Ok(token) = std::env::var("OAI_BRIDGE_ADMIN_TOKEN") {
        config.server.admin_token = Some(
            config::AdminToken::new(&token).map_err(|m| flag_err("OAI_BRIDGE_ADMIN_TOKEN", m))?,
        );
    }
    if config.repositories.is_empty() {
        return Err(ConfigError {
            file: args.config.display().to_string(),
            key: "[[repository]]".to_owned(),
            message: "none is configured; serve needs at least one".to_owned(),
        });
    }
    Ok(config)
}

/// `OAI_BRIDGE_USER_AGENT`, when set and not empty.
fn env_user_agent() -> Option<String> {
    std::env::var("OAI_BRIDGE_USER_AGENT")
        .ok()
        .filter(|a| !a.trim().is_empty())
}

/// The public URL when none is configured: the listen address, with loopback for "any".
fn default_public_url(addr: SocketAddr) -> Url {
    let mut addr = addr;
    if addr.ip().is_unspecified() {
        addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    Url::parse(&format!("http://{addr}/")).expect("an address makes a URL")
}

/// Runs `serve` until SIGTERM or Ctrl-C; returns the exit code.
pub async fn run_serve(args: &ServeArgs) -> ExitCode {
    let config = match serve_config(args) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    if args.check_config {
        println!(
            "{}: valid; {} repositories:",
            args.config.display(),
            config.repositories.len()
        );
        for r in &config.repositories {
            println!(
                "  {:<16} {} (refresh every {})",
                r.name,
                r.source,
                crate::pipeline::human_duration(r.refresh_interval)
            );
        }
        return ExitCode::SUCCESS;
    }
    let listener = match tokio::net::TcpListener::bind(config.server.listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: cannot listen on {}: {e}", config.server.listen);
            return ExitCode::FAILURE;
        }
    };
    let addr = listener.local_addr().unwrap_or(config.server.listen);
    let public_url = match &config.server.public_url {
        Some(url) => url.clone(),
        None => {
            if !addr.ip().is_loopback() {
                tracing::warn!(
                    "no [server] public_url: sitemaps will name http://{addr}/; set the URL crawlers use"
                );
            }
            default_public_url(addr)
        }
    };
    let gateway = match crate::server::Gateway::new(&config, public_url.clone()) {
        Ok(g) => Arc::new(g),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let local = default_public_url(addr);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "oai-bridge serving on {local}");
    let _ = writeln!(out, "  status page  {local}");
    let _ = writeln!(out, "  robots.txt   {public_url}robots.txt");
    for repo in &gateway.repos {
        let job = &repo.job;
        let mut indexes = job.index_names();
        indexes.extend(job.cdif_index_names());
        for (i, index) in indexes.iter().enumerate() {
            let name = if i == 0 {
                repo.config.name.as_str()
            } else {
                ""
            };
            let _ = writeln!(out, "  {name:<12} {}{index}", job.public_url);
        }
    }
    let _ = out.flush();
    drop(out);
    crate::server::serve(
        gateway,
        listener,
        config.server.drain_timeout,
        shutdown_signal(),
    )
    .await;
    ExitCode::SUCCESS
}

/// Completes on SIGTERM or Ctrl-C (SIGINT).
async fn shutdown_signal() {
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::warn!("cannot listen for SIGTERM: {e}");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        r = tokio::signal::ctrl_c() => {
            if let Err(e) = r {
                tracing::warn!("cannot listen for Ctrl-C: {e}");
                std::future::pending::<()>().await;
            }
            tracing::info!("Ctrl-C received");
        }
        () = terminate => tracing::info!("SIGTERM received"),
    }
}
