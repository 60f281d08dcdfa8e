//! Turns parsed command-line arguments, the environment and `bridge.toml` into the options of
//! each command, through [`crate::settings`] (which holds their precedence: flags, then
//! environment, then file, then defaults), and runs it.

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use oai_pmh::{HarvestRequest, Source};
use url::Url;

use crate::bucket::PublishSettings;
use crate::check::{self, CheckOptions};
use crate::cli::{
    CheckArgs, Cli, CompletionsArgs, ExportArgs, MigrateStateArgs, ProbeArgs, PruneArgs, ServeArgs,
};
use crate::config::{Config, RepositoryConfig, default_public_url};
use crate::error::{ConfigError, EXIT_CONFIG, EXIT_USAGE, Error};
use crate::export::{self, ExportOptions};
use crate::migrate::{Done, MigrateOptions, Outcome};
use crate::pipeline::Job;
use crate::server::preflight::{self, Findings};
use crate::settings::{Environment, Layers, Origin, Overrides, RepositorySettings};

/// Prints the error of building `command`'s options (a usage error with where to read about the
/// flags) and gives its exit code.
fn report(e: Error, command: &str) -> ExitCode {
    let code = e.exit_code();
    if code == EXIT_USAGE {
        eprintln!("error: {e}\n\nFor more information, try 'oai-bridge {command} --help'.");
    } else {
        eprintln!("error: {e}");
    }
    ExitCode::from(code)
}

/// Builds the export options from flags, environment and configuration.
pub(crate) fn export_options(args: &ExportArgs) -> Result<ExportOptions, Error> {
    export_options_in(args, &Environment::process()?)
}

/// [`export_options`] in the environment `env`.
pub(crate) fn export_options_in(
    args: &ExportArgs,
    env: &Environment,
) -> Result<ExportOptions, Error> {
    let mut file = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    // The file's `[state] url` is the gateway's, as its `[server] state_dir` is: an export
    // keeps a store only when asked (`--state`, `--state-url`, OAI_BRIDGE_STATE_URL).
    file.state = crate::config::StateConfig::default();
    let layers = Layers::new(file, env.for_export(), Overrides::from(args));
    let repo = export_repository(layers.file(), args)?;
    let settings = layers.repository(repo)?;
    let public_url = settings
        .public_url
        .clone()
        .or_else(|| repo.and_then(|r| layers.file().public_url_under_server(r)))
        .ok_or_else(|| {
            Error::Usage(
                Origin::Flag("--public-url")
                    .error("is required: the URL where the folder will be served"),
            )
        })?;
    let harvest = layers.harvest_of(repo)?;
    let policy = settings.policy.clone();
    let server = layers.server()?;
    // In a database, the store is the repository's by name: the configured one's, or else
    // the upstream's URL (or file) as read.
    let state_db = layers.state()?.url.map(|url| {
        let repository = match (repo, &settings.source) {
            (Some(r), _) => r.name.clone(),
            (None, Some(source)) => source.to_string(),
            (None, None) => String::new(),
        };
        crate::store::StoreLocation::Postgres { url, repository }
    });
    Ok(ExportOptions {
        job: export_job(settings, public_url, layers.file().memory_budget),
        harvest,
        out: args.out.clone(),
        publish: PublishSettings {
            grace: server.publish_grace,
            max_age: server.max_age,
        },
        progress: !args.no_progress,
        state: args.state.clone(),
        state_db,
        policy,
    })
}

/// The `[[repository]]` an export takes: `--repository`, none with `--base-url` alone, or the
/// only one; with none configured, `--base-url` is missing, and with several, `--repository`.
fn export_repository<'c>(
    config: &'c Config,
    args: &ExportArgs,
) -> Result<Option<&'c RepositoryConfig>, Error> {
    match (
        &args.repository,
        &args.settings.overrides.repository.base_url,
    ) {
        (Some(name), _) => {
            let repo = config.repositories.iter().find(|r| &r.name == name);
            let repo = repo.ok_or_else(|| {
                Origin::Flag("--repository").error(format!(
                    "no [[repository]] named {name:?} in the configuration"
                ))
            })?;
            Ok(Some(repo))
        }
        (None, Some(_)) => Ok(None),
        (None, None) => match config.repositories.as_slice() {
            [only] => Ok(Some(only)),
            [] => Err(Error::Usage(
                Origin::Flag("--base-url")
                    .error("give --base-url, or --config with a [[repository]]"),
            )),
            _ => Err(Error::Usage(Origin::Flag("--repository").error(
                "the configuration has several repositories; choose one with --repository",
            ))),
        },
    }
}

/// The job of an export of `repo`, published at `public_url`, its harvest holding `memory`
/// bytes before it spills (beside the output, where the export puts it).
fn export_job(repo: RepositorySettings, public_url: Url, memory: u64) -> Job {
    let source = repo
        .source
        .expect("a repository or --base-url was chosen (export_repository)");
    Job {
        request: HarvestRequest {
            fields: crate::pipeline::fields_for(&repo.profiles, &repo.landing, &source),
            source,
            sets: repo.sets,
            from: repo.from,
            until: repo.until,
        },
        landing: repo.landing,
        profiles: repo.profiles,
        scope: repo.scope,
        limits: repo.limits,
        gzip: repo.gzip,
        public_url,
        spill_dir: Some(crate::pipeline::SpillDir {
            parent: None,
            linked: true,
            memory,
            account: None,
        }),
    }
}

/// `check`'s harvest settings over every layer: an operator waits for the answer
/// ([`oai_pmh::RetryPolicy::interactive`]).
fn interactive(mut harvest: oai_pmh::HarvestSettings) -> oai_pmh::HarvestSettings {
    oai_pmh::RetryPolicy::of(&harvest)
        .interactive()
        .apply(&mut harvest);
    harvest
}

/// Builds the options of `check`: a baseURL, a configured repository by name, or a local
/// Static Repository file.
pub(crate) fn check_options(args: &CheckArgs) -> Result<CheckOptions, ConfigError> {
    check_options_in(args, &Environment::process()?)
}

/// [`check_options`] in the environment `env`.
pub(crate) fn check_options_in(
    args: &CheckArgs,
    env: &Environment,
) -> Result<CheckOptions, ConfigError> {
    let target = CheckTarget::of(&args.target);
    // A repository name is looked up in the configuration even when a file has the same name.
    let default_config = std::path::Path::new("bridge.toml");
    let file = match &args.config {
        Some(path) => Config::load(path)?,
        None if !target.is_url && (!target.is_file || default_config.is_file()) => {
            Config::load(default_config)?
        }
        None => Config::default(),
    };
    let layers = Layers::new(file, env.for_check(), Overrides::from(args));
    let named = layers
        .file()
        .repositories
        .iter()
        .find(|r| r.name == args.target)
        .filter(|_| !target.is_url);
    let source = target.source(&args.target, named)?;
    let settings = layers.repository(named)?;
    let public_url = settings
        .public_url
        .or_else(|| named.and_then(|r| layers.file().public_url_under_server(r)));
    if args.pages == 0 {
        return Err(Origin::Flag("--pages").error("must be at least 1"));
    }
    Ok(CheckOptions {
        source,
        scope: settings.scope,
        landing: settings.landing,
        fetch: args.fetch,
        public_url,
        pages: args.pages,
        harvest: interactive(layers.harvest_of(named)?),
        indexnow: settings.indexnow,
        profiles: settings.profiles,
        signposting_header: settings.signposting_header,
        changelist_days: settings.changelist_days,
    })
}

/// What `check`'s target looks like, before the configuration is read.
struct CheckTarget {
    is_url: bool,
    is_file: bool,
}

impl CheckTarget {
    fn of(target: &str) -> CheckTarget {
        let is_url = target.starts_with("http://") || target.starts_with("https://");
        let is_file =
            !is_url && (target.starts_with("file://") || std::path::Path::new(target).is_file());
        CheckTarget { is_url, is_file }
    }

    /// The upstream: the baseURL, the file (unless a repository has its name), or the named
    /// repository's.
    fn source(
        &self,
        target: &str,
        named: Option<&RepositoryConfig>,
    ) -> Result<Source, ConfigError> {
        let origin = Origin::Flag("URL");
        if self.is_url {
            let url = Url::parse(target)
                .map_err(|e| origin.error(format!("{target:?} is not a URL: {e}")))?;
            return Ok(Source::Oai(url));
        }
        match named {
            None if self.is_file => Source::parse(target).map_err(|m| origin.error(m)),
            Some(repo) => Ok(repo.source.clone()),
            None => Err(origin.error(format!(
                "{target:?} is neither an http(s) baseURL, a [[repository]] of the configuration, nor a Static Repository file"
            ))),
        }
    }
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
    let printed = print_all(text.as_bytes(), "the report");
    if printed != ExitCode::SUCCESS {
        printed
    } else if report.bridgeable {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Runs `export` and prints its summary or error; returns the exit code. `quiet` (`-q`, for
/// cron): no progress and no summary, so that a run that succeeds prints nothing at all (the
/// log, at its error level, says nothing either); `--json` still prints, being asked for.
pub async fn run_export(args: &ExportArgs, quiet: bool) -> ExitCode {
    let mut options = match export_options(args) {
        Ok(options) => options,
        Err(e) => return report(e, "export"),
    };
    if quiet {
        options.progress = false;
    }
    if let Some(crate::store::StoreLocation::Postgres { url, .. }) = &options.state_db
        && let Some(warning) = url.warning()
    {
        tracing::warn!("[state] url {warning}");
    }
    match export::export(&options).await {
        Ok(summary) => {
            let text = if args.json {
                summary.json(&options.job) + "\n"
            } else if quiet {
                String::new()
            } else {
                summary.render(&options.job)
            };
            print_all(text.as_bytes(), "the summary")
        }
        Err(e) if !e.left_untouched() => {
            eprintln!("error: {}", error_chain(&e));
            ExitCode::from(e.exit_code())
        }
        Err(e) => {
            eprintln!(
                "error: export of {} failed; {} was left as it was.\n{}",
                options.job.request.source,
                options.out,
                error_chain(&e)
            );
            ExitCode::from(e.exit_code())
        }
    }
}

/// The binary's name, as the completion scripts and the manual page spell it.
const BIN: &str = "oai-bridge";

/// The command line as operators see it: without the hidden subcommands (`probe`, the image's
/// HEALTHCHECK), which clap_complete would otherwise offer and clap_mangen list.
fn visible_command() -> clap::Command {
    let full = <Cli as clap::CommandFactory>::command();
    let visible = full.get_subcommands().filter(|s| !s.is_hide_set()).cloned();
    let mut command = clap::Command::new(BIN)
        .version(env!("CARGO_PKG_VERSION"))
        .subcommand_required(full.is_subcommand_required_set())
        .args(full.get_arguments().cloned())
        .subcommands(visible);
    if let Some(about) = full.get_about() {
        command = command.about(about.clone());
    }
    if let Some(long_about) = full.get_long_about() {
        command = command.long_about(long_about.clone());
    }
    if let Some(after_help) = full.get_after_help() {
        command = command.after_help(after_help.clone());
    }
    command
}

/// Prints the completion script for `args.shell` on stdout.
pub fn run_completions(args: &CompletionsArgs) -> ExitCode {
    let mut command = visible_command();
    // Made in memory first: clap_complete panics on a write error.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, BIN, &mut script);
    if args.shell == clap_complete::Shell::Bash {
        script = fix_bash_case_labels(&script);
    }
    print_all(&script, "the completion script")
}

/// clap_complete's bash script, with the case labels that select a subcommand's options
/// spelled as the `cmd` values it sets. For a hyphenated binary name it writes the `cmd` of
/// `oai-bridge serve` as `oai__bridge__subcmd__serve` but labels its case
/// `oai__subcmd__bridge__subcmd__serve`, so nothing after a subcommand completes: upstream
/// clap-rs/clap#6421 (and #6529). Harmless once upstream is fixed: the wrong spelling is then
/// absent.
fn fix_bash_case_labels(script: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(script);
    let wrong = BIN.replace('-', "__subcmd__");
    let right = BIN.replace('-', "__");
    text.replace(&wrong, &right).into_bytes()
}

/// Prints the manual page (roff) on stdout.
pub fn run_man() -> ExitCode {
    let page = manual_page().expect("writing to memory succeeds");
    print_all(page.as_bytes(), "the manual page")
}

/// The manual page, one page for `man -l -` or for installing as `oai-bridge.1`: the top
/// level (synopsis, global options, exit codes), then a COMMANDS section holding each visible
/// subcommand's synopsis, description and options. clap_mangen's own page points at
/// `oai-bridge-serve(1)` and the like, pages of their own that nothing would install.
fn manual_page() -> std::io::Result<String> {
    /// The lines of `roff` onto `page`, less the preamble each of clap_mangen's renders opens
    /// with (the page has it once), each section heading through `heading`.
    fn push(page: &mut String, roff: &[u8], heading: impl Fn(&str) -> Option<&'static str>) {
        for line in String::from_utf8_lossy(roff).lines() {
            if line.starts_with(".ie \\n(.g .ds Aq") || line.starts_with(".el .ds Aq") {
                continue;
            }
            let line = line
                .strip_prefix(".SH ")
                .map_or(line, |h| heading(h).unwrap_or(line));
            page.push_str(line);
            page.push('\n');
        }
    }
    let mut command = visible_command().disable_help_subcommand(true);
    command.build();
    let man = clap_mangen::Man::new(command.clone());
    let mut page = ".ie \\n(.g .ds Aq \\(aq\n.el .ds Aq '\n".to_owned();
    let mut top = Vec::new();
    man.render_title(&mut top)?;
    man.render_name_section(&mut top)?;
    man.render_synopsis_section(&mut top)?;
    man.render_description_section(&mut top)?;
    man.render_options_section(&mut top)?;
    push(&mut page, &top, |_| None);
    page.push_str(".SH COMMANDS\n");
    for sub in command.get_subcommands() {
        let man = clap_mangen::Man::new(sub.clone());
        let mut part = Vec::new();
        man.render_synopsis_section(&mut part)?;
        man.render_description_section(&mut part)?;
        man.render_options_section(&mut part)?;
        page.push_str(&format!(".SS \"oai\\-bridge {}\"\n", sub.get_name()));
        // The sections' headings become paragraphs under the command's own.
        push(&mut page, &part, |heading| match heading {
            "OPTIONS" => Some(".PP\n\\fIOptions:\\fR"),
            _ => Some(".PP"),
        });
    }
    let mut tail = Vec::new();
    man.render_extra_section(&mut tail)?;
    man.render_version_section(&mut tail)?;
    // The text after the help (`after_help`) is the exit codes.
    push(&mut page, &tail, |heading| {
        (heading == "EXTRA").then_some(".SH \"EXIT STATUS\"")
    });
    Ok(page)
}

/// Writes `bytes` to stdout; a reader that stopped early (`| head`, `| true`) had what it
/// wanted, so a broken pipe ends the command quietly with the exit code it would have had.
/// Every command prints through here (never `println!`, which panics on a broken pipe).
fn print_all(bytes: &[u8], what: &str) -> ExitCode {
    match std::io::stdout().lock().write_all(bytes) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: cannot write {what}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// GETs `args.url`: exit 0 on a 2xx answer, 1 on any other answer or none (said on stderr).
pub fn run_probe(args: &ProbeArgs) -> ExitCode {
    match crate::probe::status(&args.url, std::time::Duration::from_secs(args.timeout)) {
        Ok(code) if (200..300).contains(&code) => ExitCode::SUCCESS,
        Ok(code) => {
            eprintln!("probe: {}: {code}", args.url);
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("probe: {e}");
            ExitCode::FAILURE
        }
    }
}

/// An error and its sources, one per line (the shared spelling: [`crate::error::chain`]).
pub use crate::error::chain as error_chain;

/// The configuration of `serve`: the file, overridden by environment variables and flags.
pub(crate) fn serve_config(args: &ServeArgs) -> Result<Config, ConfigError> {
    serve_config_in(args, &Environment::process()?)
}

/// [`serve_config`] in the environment `env`.
pub(crate) fn serve_config_in(args: &ServeArgs, env: &Environment) -> Result<Config, ConfigError> {
    let file = Config::load(&args.config)?;
    let config = Layers::new(file, env.for_serve(), Overrides::from(args)).config()?;
    if config.repositories.is_empty() {
        return Err(ConfigError {
            file: args.config.display().to_string(),
            key: "[[repository]]".to_owned(),
            message: "none is configured; serve needs at least one".to_owned(),
        });
    }
    Ok(config)
}

/// What `serve --check-config` prints of a valid configuration: whether `serve` would start
/// on it (`findings`' problems, printed on stderr by the caller), the repositories and the
/// fleet's limits, then what `serve` would warn of at start and what is worth knowing.
fn check_config_report(args: &ServeArgs, config: &Config, findings: &Findings) -> String {
    use std::fmt::Write as _;
    let n = config.repositories.len();
    let mut out = String::new();
    let noun = if n == 1 { "repository" } else { "repositories" };
    match findings.problems.len() {
        0 => {
            let _ = writeln!(out, "{}: valid; {n} {noun}:", args.config.display());
        }
        p => {
            let _ = writeln!(
                out,
                "{}: valid, but serve would not start ({p} problem{}, on stderr); {n} {noun}:",
                args.config.display(),
                if p == 1 { "" } else { "s" }
            );
        }
    }
    let fleet = &config.fleet;
    let _ = writeln!(
        out,
        "  refreshes: at most {} at a time, {} per upstream host; the first spread over {}",
        fleet.max_concurrent_refreshes,
        fleet.per_host_concurrency,
        crate::pipeline::human_duration(fleet.start_spread)
    );
    for r in &config.repositories {
        let _ = writeln!(
            out,
            "  {:<16} {} (refresh every {})",
            r.name,
            r.source,
            crate::pipeline::human_duration(r.refresh_interval)
        );
    }
    let sources = config.sources.lines();
    if !sources.is_empty() {
        let _ = writeln!(out, "  settings (the others are their defaults):");
        for line in sources {
            let _ = writeln!(out, "    {line}");
        }
    }
    // What `serve` would log at start.
    let public_url = (config.server.public_url.clone())
        .unwrap_or_else(|| default_public_url(config.server.listen));
    let public_url_warning =
        crate::config::public_url_warning(config.server.public_url.as_ref(), &public_url);
    let repositories = config.warnings();
    let warnings = (public_url_warning.iter())
        .chain(&repositories)
        .chain(&findings.warnings);
    for warning in warnings {
        let _ = writeln!(out, "warning: {warning}");
    }
    for note in &findings.notes {
        let _ = writeln!(out, "note: {note}");
    }
    out
}

/// Runs `serve` until SIGTERM or Ctrl-C; returns the exit code: 0 when stopped, 78 when the
/// configuration is bad or cannot start (a file it names, the state directory, a listener's
/// port, another gateway on the state directory), 1 for any other failure to start.
pub async fn run_serve(args: &ServeArgs) -> ExitCode {
    let config = match serve_config(args) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    if args.check_config {
        return check_config(args, &config);
    }
    let problems = preflight::before_binding(&config);
    if !problems.is_empty() {
        for problem in &problems {
            eprintln!("error: {problem}");
        }
        return ExitCode::from(EXIT_CONFIG);
    }
    let (listener, admin) = match bind_listeners(&config).await {
        Ok(listeners) => listeners,
        Err(code) => return code,
    };
    let addr = listener.local_addr().unwrap_or(config.server.listen);
    let public_url = (config.server.public_url.clone()).unwrap_or_else(|| default_public_url(addr));
    warn_of_setup(&config, &public_url);
    // SIGHUP reloads the configuration from now on (its default would end the process).
    let hangups = match hangups() {
        Ok(hangups) => hangups,
        Err(e) => {
            eprintln!("error: cannot listen for SIGHUP: {e}");
            return ExitCode::FAILURE;
        }
    };
    let reload_args = args.clone();
    let gateway = match crate::server::Gateway::new(&config, public_url.clone()) {
        Ok(g) => Arc::new(g.reloading_from(move || {
            serve_config(&reload_args).inspect(|config| {
                for warning in config.warnings() {
                    tracing::warn!("{warning}");
                }
            })
        })),
        // Another gateway on the state directory is a configuration that cannot start until
        // it changes (or the other stops), not a failure a restart mends: `Error::exit_code`.
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(e.exit_code());
        }
    };
    let admin_addr = admin.as_ref().and_then(|l| l.local_addr().ok());
    print_banner(&config, &gateway, addr, admin_addr, &public_url);
    let served = crate::server::serve(
        Arc::clone(&gateway),
        crate::server::Listeners {
            public: listener,
            admin,
        },
        config.server.drain_timeout,
        shutdown_signal(),
    );
    tokio::select! {
        () = served => {}
        () = reload_on(hangups, &gateway) => {}
    }
    ExitCode::SUCCESS
}

/// `serve --check-config`: the report of what the gateway would run with, and the problems
/// that would stop it (exit code 78).
fn check_config(args: &ServeArgs, config: &Config) -> ExitCode {
    let findings = preflight::check(config);
    let printed = print_all(
        check_config_report(args, config, &findings).as_bytes(),
        "the report",
    );
    for problem in &findings.problems {
        eprintln!("error: {problem}");
    }
    if findings.problems.is_empty() {
        printed
    } else {
        ExitCode::from(EXIT_CONFIG)
    }
}

/// Binds the public listener, then the admin one if there is one; exit code 78, the problem
/// said, when one cannot be bound.
async fn bind_listeners(
    config: &Config,
) -> Result<(tokio::net::TcpListener, Option<tokio::net::TcpListener>), ExitCode> {
    let bind = |key: &'static str, addr: SocketAddr| async move {
        tokio::net::TcpListener::bind(addr).await.map_err(|e| {
            eprintln!("error: {}", preflight::bind_problem(config, key, addr, &e));
            ExitCode::from(EXIT_CONFIG)
        })
    };
    let listener = bind("[server] listen", config.server.listen).await?;
    let admin = match config.server.admin_listen {
        Some(admin_addr) => Some(bind("[server] admin_listen", admin_addr).await?),
        None => None,
    };
    Ok((listener, admin))
}

/// Logs what in the configuration the operator should look at before the gateway starts: the
/// listeners' ports and reach, the public URL, and the memory and disk the refreshes may take
/// against what the machine gives.
fn warn_of_setup(config: &Config, public_url: &Url) {
    let listener_warnings = [("[server] listen", Some(config.server.listen))]
        .into_iter()
        .chain([("[server] admin_listen", config.server.admin_listen)])
        .filter_map(|(key, addr)| preflight::port_warning(config, key, addr?));
    for warning in listener_warnings {
        tracing::warn!("{warning}");
    }
    if config
        .server
        .admin_listen
        .is_some_and(|a| a.ip().is_unspecified())
    {
        tracing::warn!(
            "the admin listener (status page, /metrics, reload) is reachable from every interface; keep it off the public network"
        );
    }
    let public_url_warning =
        crate::config::public_url_warning(config.server.public_url.as_ref(), public_url);
    for warning in public_url_warning.iter().chain(&config.warnings()) {
        tracing::warn!("{warning}");
    }
    // The memory and the disk the refreshes may take, against what the machine gives.
    let machine = preflight::resources(config, crate::memory::limit().as_ref());
    for note in &machine.notes {
        tracing::info!("{note}");
    }
    for warning in &machine.warnings {
        tracing::warn!("{warning}");
    }
}

/// Prints where the gateway serves, each repository's indexes, and what to add to the
/// robots.txt of the site the sitemaps list.
fn print_banner(
    config: &Config,
    gateway: &crate::server::Gateway,
    addr: SocketAddr,
    admin: Option<SocketAddr>,
    public_url: &Url,
) {
    let local = default_public_url(addr);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "oai-bridge serving on {local}");
    match admin {
        Some(admin) => {
            let admin = default_public_url(admin);
            let _ = writeln!(out, "  status page  {admin}");
            let _ = writeln!(out, "  metrics      {admin}metrics");
        }
        None => {
            let _ = writeln!(out, "  status page  none (admin_listen is off)");
        }
    }
    let _ = writeln!(out, "  robots.txt   {public_url}robots.txt");
    for repo in gateway.repos() {
        let setup = repo.setup();
        let job = &setup.job;
        let mut indexes = job.index_names();
        indexes.extend(job.cdif_index_names());
        for (i, index) in indexes.iter().enumerate() {
            let name = if i == 0 { repo.name.as_str() } else { "" };
            let _ = writeln!(out, "  {name:<12} {}{index}", job.public_url);
        }
    }
    // What crawlers are to be told, once the public URL is the one they use: robots.txt's
    // `Sitemap:` lines, for the robots.txt of the site whose pages the sitemaps list (the
    // README's second step).
    if config.server.public_url.is_some() {
        let _ = writeln!(
            out,
            "Add to the robots.txt of the site whose pages these sitemaps list:"
        );
        let robots = gateway.robots();
        let text = String::from_utf8_lossy(&robots.bytes);
        for line in text.lines().filter(|l| l.starts_with("Sitemap: ")) {
            let _ = writeln!(out, "{line}");
        }
    } else {
        let _ = writeln!(
            out,
            "No Sitemap: lines for the site's robots.txt until [server] public_url is set: \
             they would name {public_url}, which crawlers do not use"
        );
    }
    let _ = out.flush();
}

/// SIGHUP, as a stream of signals.
#[cfg(unix)]
fn hangups() -> std::io::Result<tokio::signal::unix::Signal> {
    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
}

/// No SIGHUP here.
#[cfg(not(unix))]
fn hangups() -> std::io::Result<()> {
    Ok(())
}

/// Reloads the configuration at each SIGHUP (the outcome is logged by the reload); never ends.
#[cfg(unix)]
async fn reload_on(
    mut hangups: tokio::signal::unix::Signal,
    gateway: &Arc<crate::server::Gateway>,
) {
    while hangups.recv().await.is_some() {
        tracing::info!("SIGHUP received: reloading the configuration");
        let _ = gateway.reload().await;
    }
    std::future::pending::<()>().await;
}

/// No SIGHUP here: never ends.
#[cfg(not(unix))]
async fn reload_on(_: (), _: &Arc<crate::server::Gateway>) {
    std::future::pending::<()>().await;
}

/// Runs `prune`: removes the state of repositories the configuration no longer has; returns
/// the exit code (0, 1 when a folder could not be removed, 78 for a bad configuration).
pub fn run_prune(args: &PruneArgs) -> ExitCode {
    let config = Config::load(&args.config).and_then(|file| {
        Layers::new(
            file,
            Environment::process()?.for_prune(),
            Overrides::from(args),
        )
        .config()
    });
    let config = match config {
        Ok(config) => config,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let state_dir = &config.server.state_dir;
    let names: Vec<&str> = config
        .repositories
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    let pruned = match crate::server::prune::prune(state_dir, &names, args.dry_run) {
        Ok(pruned) => pruned,
        Err(e) => {
            eprintln!("error: cannot read {}: {e}", state_dir.display());
            return ExitCode::FAILURE;
        }
    };
    let mut out = String::new();
    if pruned.is_empty() {
        out = format!(
            "{}: no state of a repository that is not configured\n",
            state_dir.display()
        );
    }
    let mut failed = false;
    for (dir, pruned) in pruned {
        use crate::server::prune::Pruned;
        match pruned {
            Pruned::WouldRemove => out += &format!("would remove {}\n", dir.display()),
            Pruned::Removed => out += &format!("removed {}\n", dir.display()),
            Pruned::StillServed => {
                out += &format!(
                    "kept {}: a running gateway still serves it; reload it (SIGHUP) first\n",
                    dir.display()
                );
            }
            Pruned::Failed(e) => {
                eprintln!("error: cannot remove {}: {e}", dir.display());
                failed = true;
            }
        }
    }
    let printed = print_all(out.as_bytes(), "the folders removed");
    if failed { ExitCode::FAILURE } else { printed }
}

/// Builds the options of `migrate-state`: the state folder as `serve` and `prune` take it
/// (`--state`, `OAI_BRIDGE_STATE_DIR`, `[server] state_dir`), the database as `serve` takes it
/// (`--state-url`, `OAI_BRIDGE_STATE_URL`, `[state] url`).
pub(crate) fn migrate_options(args: &MigrateStateArgs) -> Result<MigrateOptions, Error> {
    migrate_options_in(args, &Environment::process()?)
}

/// [`migrate_options`] in the environment `env`.
pub(crate) fn migrate_options_in(
    args: &MigrateStateArgs,
    env: &Environment,
) -> Result<MigrateOptions, Error> {
    let file = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    let (env, flags) = (env.for_migrate(), Overrides::from(args));
    // Without a file, the default state directory (`state` in the working directory) is no
    // folder anyone asked to move.
    let state_given =
        args.config.is_some() || env.server.state_dir.is_some() || flags.server.state_dir.is_some();
    let layers = Layers::new(file, env, flags);
    if !state_given {
        return Err(Error::Usage(Origin::Flag("--state").error(
            "is required: the state folder to copy (a gateway's state_dir, or an export's \
             --state folder), or --config with [server] state_dir",
        )));
    }
    let state = layers.server()?.state_dir;
    let url = layers.state()?.url.ok_or_else(|| {
        Error::Usage(Origin::Flag("--state-url").error(
            "is required: the PostgreSQL database to copy into (or OAI_BRIDGE_STATE_URL, or \
             [state] url in --config)",
        ))
    })?;
    let configured = args.config.as_ref().map(|_| {
        (layers.file().repositories.iter())
            .map(|r| (r.name.clone(), r.source.to_string()))
            .collect()
    });
    Ok(MigrateOptions {
        state,
        url,
        repositories: args.repositories.clone(),
        configured,
        replace: args.replace,
        dry_run: args.dry_run,
    })
}

/// Runs `migrate-state`: a line per repository on stdout as it is done (its errors on stderr),
/// then the totals; exit 0 when every repository was copied (or, with `--dry-run`, could be),
/// 1 when one was not or nothing could be, 2 or 78 for the options.
pub fn run_migrate_state(args: &MigrateStateArgs) -> ExitCode {
    let options = match migrate_options(args) {
        Ok(options) => options,
        Err(e) => return report(e, "migrate-state"),
    };
    if let Some(warning) = options.url.warning() {
        tracing::warn!("[state] url {warning}");
    }
    let mut printed = ExitCode::SUCCESS;
    let migrated = crate::migrate::migrate(&options, |outcome| match migrated_line(outcome) {
        Ok(line) => {
            let done = print_all(line.as_bytes(), "the repositories copied");
            if done != ExitCode::SUCCESS {
                printed = done;
            }
        }
        Err(e) => eprintln!("error: {e}"),
    });
    let totals = match migrated {
        Ok(totals) => totals,
        Err(e) => {
            eprintln!("error: {}", error_chain(&e));
            return ExitCode::from(e.exit_code());
        }
    };
    let text = migrated_totals(&options, &totals);
    if totals.failed.is_empty() {
        let done = print_all(text.as_bytes(), "the summary");
        if done != ExitCode::SUCCESS {
            done
        } else {
            printed
        }
    } else {
        let _ = print_all(text.as_bytes(), "the summary");
        ExitCode::FAILURE
    }
}

/// The line of one repository's outcome, or its error's text.
fn migrated_line(outcome: &Outcome) -> Result<String, String> {
    use crate::migrate::counted;
    let name = &outcome.name;
    let note = match &outcome.note {
        Some(note) => format!(" ({note})"),
        None => String::new(),
    };
    match &outcome.result {
        Ok(Done::Copied { survey, elapsed }) => Ok(format!(
            "{name}: {} copied in {:.2} s{note}\n",
            counted(survey.records.live + survey.records.deleted, "record"),
            elapsed.as_secs_f64()
        )),
        Ok(Done::WouldCopy { survey, replaces }) => Ok(format!(
            "{name}: would copy {} ({} live, {} deleted), {} changed since the last publish, \
             {}, {} rejected; {}{}{note}\n",
            counted(survey.records.live + survey.records.deleted, "record"),
            survey.records.live,
            survey.records.deleted,
            survey.changed,
            counted(survey.shared, "shared URL"),
            survey.rejected,
            crate::migrate::describe(&survey.state),
            if *replaces {
                "; replacing the rows the database holds of it"
            } else {
                ""
            }
        )),
        Err(e) => Err(format!("{name}: {}{note}", error_chain(e))),
    }
}

/// The totals of `migrate-state`.
fn migrated_totals(options: &MigrateOptions, totals: &crate::migrate::Totals) -> String {
    use crate::migrate::{counted, counted_as};
    let all = totals.done + totals.failed.len() + totals.unverified.len();
    let what = if options.dry_run {
        "would copy"
    } else {
        "copied"
    };
    let mut text = format!(
        "{what} {} of {} ({}) from {} into {} in {:.2} s",
        totals.done,
        counted_as(all as u64, "repository", "repositories"),
        counted(totals.records, "record"),
        options.state.display(),
        options.url.redacted(),
        totals.elapsed.as_secs_f64()
    );
    if options.dry_run {
        text.push_str("; nothing was written");
    }
    if !totals.failed.is_empty() {
        text.push_str(&format!(
            "; failed: {} (nothing of theirs was copied; once the cause is dealt with, rerun \
             for those with --repository)",
            totals.failed.join(", ")
        ));
    }
    if !totals.unverified.is_empty() {
        text.push_str(&format!(
            "; copied but read back otherwise: {} (committed and left as they are; see the \
             errors above)",
            totals.unverified.join(", ")
        ));
    }
    text.push('\n');
    text
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::ffi::OsString;
    use std::path::{Path, PathBuf};
    use std::time::Duration;

    use clap::Parser as _;

    use super::*;
    use crate::cli::{Cli, Command};
    use crate::config::AdminToken;

    /// A file that sets every setting the environment or a flag overrides below.
    const FILE: &str = r#"
[server]
listen = "127.0.0.1:1001"
public_url = "https://file.example/"
state_dir = "/file/state"
admin_token = "file-token-0123456789"

[harvest]
user_agent = "file-agent"
max_attempts = 4

[[repository]]
name = "a"
base_url = "https://file.example/oai"
public_url = "https://file.example/a/"
scope = ["https://file.example/items/"]
from = "2020-01-01"
"#;

    /// `FILE` written as `bridge.toml` in a folder of its own; the folder goes with it.
    fn file() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bridge.toml");
        std::fs::write(&path, FILE).unwrap();
        (dir, path)
    }

    /// An environment of these variables only.
    fn env(vars: &[(&str, &str)]) -> Environment {
        let vars: BTreeMap<String, OsString> = vars
            .iter()
            .map(|(name, value)| (name.to_string(), OsString::from(value)))
            .collect();
        Environment::read(|name| vars.get(name).cloned()).unwrap()
    }

    /// `oai-bridge {command} --config {config} {flags}`, parsed.
    fn command(command: &str, config: &Path, flags: &[&str]) -> Command {
        let config = config.to_str().unwrap();
        let args = ["oai-bridge", command, "--config", config];
        Cli::try_parse_from(args.iter().chain(flags))
            .unwrap()
            .command
    }

    fn serve(config: &Path, vars: &[(&str, &str)], flags: &[&str]) -> Result<Config, ConfigError> {
        let Command::Serve(args) = command("serve", config, flags) else {
            unreachable!()
        };
        serve_config_in(&args, &env(vars))
    }

    fn export(
        config: &Path,
        vars: &[(&str, &str)],
        flags: &[&str],
    ) -> Result<ExportOptions, ConfigError> {
        let flags = [&["--out", "/nowhere/out"], flags].concat();
        let Command::Export(args) = command("export", config, &flags) else {
            unreachable!()
        };
        export_options_in(&args, &env(vars)).map_err(config_error)
    }

    /// The configuration's error an options' error holds, whichever kind.
    fn config_error(e: Error) -> ConfigError {
        match e {
            Error::Config(e) | Error::Usage(e) => e,
            e => panic!("not a configuration error: {e}"),
        }
    }

    fn check(
        config: &Path,
        vars: &[(&str, &str)],
        flags: &[&str],
    ) -> Result<CheckOptions, ConfigError> {
        let Command::Check(args) = command("check", config, &[&["a"], flags].concat()) else {
            unreachable!()
        };
        check_options_in(&args, &env(vars))
    }

    const LISTEN: &str = Environment::LISTEN;
    const PUBLIC_URL: &str = Environment::PUBLIC_URL;
    const STATE_DIR: &str = Environment::STATE_DIR;
    const ADMIN_TOKEN: &str = Environment::ADMIN_TOKEN;
    const USER_AGENT: &str = Environment::USER_AGENT;

    #[test]
    fn serve_takes_the_flag_then_the_environment_then_the_file() {
        let (_dir, config) = file();
        let vars = [
            (LISTEN, "127.0.0.1:1002"),
            (PUBLIC_URL, "https://env.example/"),
            (STATE_DIR, "/env/state"),
            (ADMIN_TOKEN, "env-token-0123456789"),
            (USER_AGENT, "env-agent"),
        ];
        let flags = [
            "--listen",
            "127.0.0.1:1003",
            "--public-url",
            "https://flag.example/",
            "--state-dir",
            "/flag/state",
            "--accept-shrink",
        ];
        let from_file = [
            "127.0.0.1:1001",
            "https://file.example/",
            "/file/state",
            "file-token-0123456789",
            "file-agent",
            "false",
        ];
        let from_env = [
            "127.0.0.1:1002",
            "https://env.example/",
            "/env/state",
            "env-token-0123456789",
            "env-agent",
            "false",
        ];
        // The token and the user agent have no flag of `serve`.
        let from_flags = [
            "127.0.0.1:1003",
            "https://flag.example/",
            "/flag/state",
            "env-token-0123456789",
            "env-agent",
            "true",
        ];
        for (vars, flags, want) in [
            (&[][..], &[][..], from_file),
            (&vars[..], &[][..], from_env),
            (&vars[..], &flags[..], from_flags),
        ] {
            let c = serve(&config, vars, flags).unwrap();
            let token = c.server.admin_token.clone();
            let got = [
                c.server.listen.to_string(),
                c.server.public_url.unwrap().to_string(),
                c.server.state_dir.display().to_string(),
                c.harvest.user_agent,
                c.repositories[0].policy.accept_shrink.to_string(),
            ];
            let [
                listen,
                public_url,
                state_dir,
                want_token,
                user_agent,
                accept_shrink,
            ] = want;
            assert_eq!(
                got,
                [listen, public_url, state_dir, user_agent, accept_shrink],
                "{vars:?} {flags:?}"
            );
            assert_eq!(token, Some(AdminToken::new(want_token).unwrap()));
        }
    }

    /// `[state] url` comes from `--state-url`, then `OAI_BRIDGE_STATE_URL`, then the file, for
    /// `serve`; `export` takes the flag and the variable alone (the file's is the gateway's),
    /// its store then the repository's, by name. A bad URL names where it came from, never
    /// its password.
    #[test]
    fn the_state_url_comes_from_the_flag_then_the_environment_then_the_file() {
        let (dir, _) = file();
        let config = dir.path().join("state.toml");
        let text = FILE.replace(
            "[harvest]",
            "[state]\nurl = \"postgres://f:pw@file.example/oai\"\n\n[harvest]",
        );
        std::fs::write(&config, text).unwrap();
        let vars = [(Environment::STATE_URL, "postgres://e:pw@env.example/oai")];
        let flags = ["--state-url", "postgres://c:pw@flag.example/oai"];
        let shown = |c: &Config| c.state.url.as_ref().map(|u| u.redacted());
        let at = |host: &str, user: &str| Some(format!("postgres://{user}@{host}:5432/oai"));
        assert_eq!(
            shown(&serve(&config, &[], &[]).unwrap()),
            at("file.example", "f")
        );
        assert_eq!(
            shown(&serve(&config, &vars, &[]).unwrap()),
            at("env.example", "e")
        );
        assert_eq!(
            shown(&serve(&config, &vars, &flags).unwrap()),
            at("flag.example", "c")
        );
        let (_plain_dir, plain) = file();
        assert_eq!(serve(&plain, &[], &[]).unwrap().state.url, None);

        let location = |o: ExportOptions| match o.state_db {
            Some(crate::store::StoreLocation::Postgres { url, repository }) => {
                Some((url.redacted(), repository))
            }
            _ => None,
        };
        assert_eq!(location(export(&config, &[], &[]).unwrap()), None);
        assert_eq!(
            location(export(&config, &vars, &[]).unwrap()),
            Some(("postgres://e@env.example:5432/oai".into(), "a".into()))
        );
        assert_eq!(
            location(export(&config, &vars, &flags).unwrap()),
            Some(("postgres://c@flag.example:5432/oai".into(), "a".into()))
        );

        let bad = [(Environment::STATE_URL, "mysql://e:s3cret@env.example/oai")];
        let e = serve(&config, &bad, &[]).unwrap_err().to_string();
        assert!(e.starts_with("environment: OAI_BRIDGE_STATE_URL: "), "{e}");
        assert!(!e.contains("s3cret"), "{e}");
        let e = (serve(
            &config,
            &[],
            &["--state-url", "postgres://c:s3cret@h/oai?sslmode=allow"],
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("command line: --state-url: sslmode=allow is not supported"),
            "{e}"
        );
        std::fs::write(
            &config,
            FILE.replace("[harvest]", "[state]\nurl = \"db\"\n[harvest]"),
        )
        .unwrap();
        let e = serve(&config, &[], &[]).unwrap_err().to_string();
        assert!(e.contains(": [state] url: is not a PostgreSQL URL"), "{e}");
    }

    fn migrate(
        config: Option<&Path>,
        vars: &[(&str, &str)],
        flags: &[&str],
    ) -> Result<MigrateOptions, Error> {
        let config: Vec<&str> = match config {
            Some(path) => vec!["--config", path.to_str().unwrap()],
            None => Vec::new(),
        };
        let args = [&["oai-bridge", "migrate-state"], &config[..], flags].concat();
        let Command::MigrateState(args) = Cli::try_parse_from(args).unwrap().command else {
            unreachable!()
        };
        migrate_options_in(&args, &env(vars))
    }

    /// `migrate-state` takes the state folder as `serve` does (`--state`, then
    /// `OAI_BRIDGE_STATE_DIR`, then `[server] state_dir`) and the database as `serve` does
    /// (`--state-url`, then `OAI_BRIDGE_STATE_URL`, then `[state] url`); without a folder or a
    /// database given, it is a usage error.
    #[test]
    fn migrate_state_takes_the_state_and_the_database_as_serve_does() {
        let (dir, _) = file();
        let config = dir.path().join("state.toml");
        let text = FILE.replace(
            "[harvest]",
            "[state]\nurl = \"postgres://f:pw@file.example/oai\"\n\n[harvest]",
        );
        std::fs::write(&config, text).unwrap();
        let vars = [
            (Environment::STATE_URL, "postgres://e:pw@env.example/oai"),
            (STATE_DIR, "/env/state"),
        ];
        let flags = [
            "--state-url",
            "postgres://c:pw@flag.example/oai",
            "--state",
            "/flag/state",
        ];
        let got = |o: MigrateOptions| (o.state.display().to_string(), o.url.redacted());
        let at = |dir: &str, host: &str, user: &str| {
            (dir.to_owned(), format!("postgres://{user}@{host}:5432/oai"))
        };
        assert_eq!(
            got(migrate(Some(&config), &[], &[]).unwrap()),
            at("/file/state", "file.example", "f")
        );
        assert_eq!(
            got(migrate(Some(&config), &vars, &[]).unwrap()),
            at("/env/state", "env.example", "e")
        );
        assert_eq!(
            got(migrate(Some(&config), &vars, &flags).unwrap()),
            at("/flag/state", "flag.example", "c")
        );
        assert_eq!(
            got(migrate(None, &vars, &[]).unwrap()),
            at("/env/state", "env.example", "e")
        );
        let o = migrate(Some(&config), &[], &["--state-dir", "/alias", "--dry-run"]).unwrap();
        assert_eq!(o.state, Path::new("/alias"));
        assert!(o.dry_run && !o.replace);
        assert_eq!(
            o.configured,
            Some(vec![(
                "a".to_owned(),
                "https://file.example/oai".to_owned()
            )])
        );

        // Neither a state folder nor a file to take it from; no database.
        let url_only = [(Environment::STATE_URL, "postgres://e:pw@env.example/oai")];
        let e = migrate(None, &url_only, &[]).unwrap_err();
        assert!(matches!(&e, Error::Usage(e) if e.key == "--state"), "{e:?}");
        let (_plain_dir, plain) = file();
        let e = migrate(Some(&plain), &[], &[]).unwrap_err();
        assert!(
            matches!(&e, Error::Usage(e) if e.key == "--state-url"),
            "{e:?}"
        );
        let bad = [(Environment::STATE_URL, "mysql://e:s3cret@env.example/oai")];
        let e = config_error(migrate(Some(&plain), &bad, &[]).unwrap_err());
        assert_eq!(e.key, Environment::STATE_URL);
        assert!(!e.to_string().contains("s3cret"), "{e}");
    }

    /// `migrate-state` names an export's store as `export --state-url` named it: the names
    /// are compared with the ones the export's own options give its store, for an export of
    /// the configured repository, of another `--base-url`, and of a `--repository` given;
    /// where two configured repositories harvest the store's source, the export cannot be
    /// told from the store, and `migrate-state` asks for `--repository`.
    #[test]
    fn migrate_state_names_an_exports_store_as_export_does() {
        let (dir, _) = file();
        let db = "postgres://u@db.example/oai";
        let store_name = |config: &Path, flags: &[&str]| -> (String, String) {
            let flags = [
                &["--state-url", db, "--public-url", "https://p.example/"],
                flags,
            ]
            .concat();
            let o = export(config, &[], &flags).unwrap();
            let Some(crate::store::StoreLocation::Postgres { repository, .. }) = o.state_db else {
                panic!("no store in the database")
            };
            // What the export's store records as its source (`State::source`).
            (repository, o.job.request.source.to_string())
        };
        let named = |config: &Path, given: &[&str], source: &str| {
            let mut flags = vec!["--state", "/s", "--state-url", db];
            for name in given {
                flags.extend(["--repository", name]);
            }
            let configured = migrate(Some(config), &[], &flags).unwrap().configured;
            let given: Vec<String> = given.iter().map(|g| g.to_string()).collect();
            crate::migrate::export_name(&given, &configured.unwrap(), source)
        };
        let config = dir.path().join("one.toml");
        std::fs::write(&config, FILE).unwrap();
        for (flags, given) in [
            (&[][..], &[][..]),
            (&["--base-url", "https://other.example/oai"][..], &[][..]),
            (&["--repository", "a"][..], &["a"][..]),
        ] {
            let (exported, source) = store_name(&config, flags);
            let (name, how) = named(&config, given, &source).unwrap();
            assert_eq!(name, exported, "{flags:?}: {how}");
        }
        let (_, source) = store_name(&config, &[]);
        let how = named(&config, &[], &source).unwrap().1;
        assert_eq!(
            how,
            "named after [[repository]] a in the config, which harvests its source"
        );
        let how = named(&config, &[], "https://other.example/oai").unwrap().1;
        assert!(how.contains("named after its source URL"), "{how}");

        // A second repository of the same source: either may have made the store.
        let twice = dir.path().join("twice.toml");
        let second =
            FILE[FILE.find("[[repository]]").unwrap()..].replace("name = \"a\"", "name = \"a2\"");
        std::fs::write(&twice, format!("{FILE}\n{second}")).unwrap();
        let (exported, source) = store_name(&twice, &["--repository", "a2"]);
        assert_eq!(exported, "a2");
        let e = named(&twice, &[], &source).unwrap_err();
        assert!(e.contains("(a, a2): give --repository NAME"), "{e}");
        assert_eq!(named(&twice, &["a2"], &source).unwrap().0, exported);
    }

    #[test]
    fn export_takes_the_flag_then_the_environment_then_the_file() {
        let (_dir, config) = file();
        let vars = [
            (PUBLIC_URL, "https://env.example/"),
            (USER_AGENT, "env-agent"),
        ];
        let flags = [
            "--public-url",
            "https://flag.example/",
            "--user-agent",
            "flag-agent",
            "--max-attempts",
            "3",
            "--scope",
            "https://flag.example/items/",
        ];
        for (vars, flags, want) in [
            (
                &[][..],
                &[][..],
                [
                    "https://file.example/a/",
                    "file-agent",
                    "4",
                    "https://file.example/items/",
                ],
            ),
            // The environment has no attempts or scope.
            (
                &vars[..],
                &[][..],
                [
                    "https://env.example/",
                    "env-agent",
                    "4",
                    "https://file.example/items/",
                ],
            ),
            (
                &vars[..],
                &flags[..],
                [
                    "https://flag.example/",
                    "flag-agent",
                    "3",
                    "https://flag.example/items/",
                ],
            ),
        ] {
            let o = export(&config, vars, flags).unwrap();
            let got = [
                o.job.public_url.to_string(),
                o.harvest.user_agent,
                o.harvest.max_attempts.to_string(),
                o.job.scope[0].to_string(),
            ];
            assert_eq!(got, want, "{vars:?} {flags:?}");
        }
    }

    #[test]
    fn check_takes_the_flag_then_the_environment_then_the_file_then_caps_retries() {
        let (_dir, config) = file();
        // `check` reads no public URL from the environment.
        let vars = [
            (PUBLIC_URL, "https://env.example/"),
            (USER_AGENT, "env-agent"),
        ];
        let flags = [
            "--public-url",
            "https://flag.example/",
            "--scope",
            "https://flag.example/items/",
        ];
        for (vars, flags, want) in [
            (
                &[][..],
                &[][..],
                [
                    "https://file.example/a/",
                    "file-agent",
                    "https://file.example/items/",
                ],
            ),
            (
                &vars[..],
                &[][..],
                [
                    "https://file.example/a/",
                    "env-agent",
                    "https://file.example/items/",
                ],
            ),
            (
                &vars[..],
                &flags[..],
                [
                    "https://flag.example/",
                    "env-agent",
                    "https://flag.example/items/",
                ],
            ),
        ] {
            let o = check(&config, vars, flags).unwrap();
            let got = [
                o.public_url.unwrap().to_string(),
                o.harvest.user_agent.clone(),
                o.scope[0].to_string(),
            ];
            assert_eq!(got, want, "{vars:?} {flags:?}");
            // The file's 4 attempts, capped for an operator waiting.
            assert_eq!(o.harvest.max_attempts, 2);
        }
    }

    /// A bad value names where it was given: the file's key, the variable, or the flag.
    #[test]
    fn an_error_names_the_key_the_variable_or_the_flag() {
        let (dir, config) = file();
        let bad_file = dir.path().join("bad.toml");
        std::fs::write(
            &bad_file,
            FILE.replace("max_attempts = 4", "max_attempts = 0"),
        )
        .unwrap();
        let bad_file_name = bad_file.display().to_string();
        for (err, file, key) in [
            (
                export(&bad_file, &[], &[]).err(),
                bad_file_name.as_str(),
                "[harvest] max_attempts",
            ),
            (
                export(&config, &[], &["--max-attempts", "0"]).err(),
                "command line",
                "--max-attempts",
            ),
            (
                serve(&config, &[(LISTEN, "nowhere")], &[]).err(),
                "environment",
                "OAI_BRIDGE_LISTEN",
            ),
            (
                serve(&config, &[], &["--listen", "nowhere"]).err(),
                "command line",
                "--listen",
            ),
            (
                serve(&config, &[(ADMIN_TOKEN, "short")], &[]).err(),
                "environment",
                "OAI_BRIDGE_ADMIN_TOKEN",
            ),
            (
                export(&config, &[(PUBLIC_URL, "not-a-url")], &[]).err(),
                "environment",
                "OAI_BRIDGE_PUBLIC_URL",
            ),
            (
                export(&config, &[], &["--public-url", "not-a-url"]).err(),
                "command line",
                "--public-url",
            ),
            // The file's `from` is 2020-01-01: the flag given is the one at fault.
            (
                export(&config, &[], &["--until", "2019-12-31"]).err(),
                "command line",
                "--until",
            ),
        ] {
            let err = err.expect("an error");
            assert_eq!((err.file.as_str(), err.key.as_str()), (file, key), "{err}");
        }
    }

    /// A bad value a higher layer hides is never read.
    #[test]
    fn a_hidden_value_is_no_error() {
        let (_dir, config) = file();
        let c = serve(
            &config,
            &[(LISTEN, "nowhere")],
            &["--listen", "127.0.0.1:0"],
        )
        .unwrap();
        assert_eq!(c.server.listen.to_string(), "127.0.0.1:0");
        let o = export(
            &config,
            &[(PUBLIC_URL, "not-a-url")],
            &["--public-url", "https://flag.example/"],
        )
        .unwrap();
        assert_eq!(o.job.public_url.as_str(), "https://flag.example/");
    }

    /// Issue 22: a repository's `[repository.harvest]` is its harvest settings for `serve`,
    /// `export --repository` and `check NAME` alike (one path: `Layers::harvest_of`); the
    /// environment and the flags still override it.
    #[test]
    fn every_command_takes_a_repositorys_harvest_table() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("bridge.toml");
        let table = "[repository.harvest]\nuser_agent = \"repo-agent\"\nmax_attempts = 3\n\
                     politeness_delay_ms = 700\nheaders = { Authorization = \"Bearer t\" }\n";
        std::fs::write(&config, format!("{FILE}{table}")).unwrap();
        let c = serve(&config, &[], &[]).unwrap();
        let h = &c.repositories[0].harvest;
        assert_eq!((h.user_agent.as_str(), h.max_attempts), ("repo-agent", 3));
        assert_eq!(c.harvest.user_agent, "file-agent");
        let e = export(&config, &[], &["--repository", "a"]).unwrap();
        assert_eq!(e.harvest.politeness_delay, Duration::from_millis(700));
        assert_eq!(e.harvest.user_agent, "repo-agent");
        assert!(!e.harvest.headers.is_empty());
        let o = check(&config, &[], &[]).unwrap();
        assert_eq!(o.harvest.politeness_delay, Duration::from_millis(700));
        assert!(!o.harvest.headers.is_empty());
        // The environment over the repository's table; a flag over both.
        let c = serve(&config, &[(USER_AGENT, "env-agent")], &[]).unwrap();
        assert_eq!(c.repositories[0].harvest.user_agent, "env-agent");
        let e = export(
            &config,
            &[(USER_AGENT, "env-agent")],
            &["--max-attempts", "5"],
        )
        .unwrap();
        assert_eq!(
            (e.harvest.user_agent.as_str(), e.harvest.max_attempts),
            ("env-agent", 5)
        );
        assert_eq!(e.harvest.politeness_delay, Duration::from_millis(700));
    }

    /// The command the completions and the manual page are made of is the command line less
    /// its hidden subcommands: every global flag, every visible subcommand with its flags.
    #[test]
    fn the_visible_command_is_the_cli_less_the_hidden_subcommands() {
        let full = <Cli as clap::CommandFactory>::command();
        let visible = visible_command();
        visible.clone().debug_assert();
        let ids = |c: &clap::Command| -> Vec<String> {
            c.get_arguments().map(|a| a.get_id().to_string()).collect()
        };
        assert_eq!(ids(&visible), ids(&full));
        let names = |c: &clap::Command, hidden: bool| -> Vec<String> {
            c.get_subcommands()
                .filter(|s| hidden || !s.is_hide_set())
                .map(|s| s.get_name().to_owned())
                .collect()
        };
        assert_eq!(names(&visible, true), names(&full, false));
        assert!(names(&full, true).contains(&"probe".to_owned()));
        assert!(!names(&visible, true).contains(&"probe".to_owned()));
        for sub in visible.get_subcommands() {
            let original = full.find_subcommand(sub.get_name()).unwrap();
            assert_eq!(ids(sub), ids(original), "{}", sub.get_name());
        }
        assert_eq!(visible.get_version(), full.get_version());
        assert_eq!(
            visible.get_after_help().map(ToString::to_string),
            full.get_after_help().map(ToString::to_string)
        );
    }
}
