//! The command line (clap). Flags override the environment, which overrides `bridge.toml`,
//! which overrides the defaults: `settings` reads the settings' environment variables and
//! stacks the layers. Clap reads only `OAI_BRIDGE_CONFIG` (which file) and
//! `OAI_BRIDGE_LOG_FORMAT` (how to log), both needed before any layer.
//!
//! The flags over a setting are declared with the setting (`config::keys`): each command
//! flattens its [`Flags`]; what is here are the flags that are no setting.

use std::path::PathBuf;

use crate::config::keys::{CheckFlags, ExportFlags, Flags, MigrateFlags, PruneFlags, ServeFlags};
use crate::publish::Output;
use clap::{Args, Parser, Subcommand, ValueEnum};

/// Publishes OAI-PMH repositories as sitemaps for search engines and FAIR crawlers.
#[derive(Debug, Parser)]
#[command(
    name = "oai-bridge",
    version,
    about,
    after_help = "Exit codes: 0 success; 1 failure (an export leaves its folder as it was; check: the repository cannot be bridged as configured); 2 usage error; 78 bad configuration (EX_CONFIG), also when serve cannot start on it: a listener's port in use, a state_dir it cannot make or write in, a Static Repository file it cannot read, another gateway on its state_dir. The systemd unit does not restart on 78 (RestartPreventExitStatus=78); a restart would not mend it."
)]
pub struct Cli {
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "OAI_BRIDGE_LOG_FORMAT")]
    pub log_format: LogFormat,
    /// More log output (-v: debug, -vv: trace). RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Print nothing but errors (for cron): the log only at its error level, and `export` no
    /// summary (but `--json`'s) and no progress, so that a run that succeeds prints nothing.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Log formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the gateway: serve every configured repository's sitemaps, refreshed on a schedule.
    Serve(ServeArgs),
    /// Harvest a repository once and write sitemaps and robots.txt to a folder.
    Export(Box<ExportArgs>),
    /// Tell what a repository says and why its URLs would be dropped: Identify, formats, sets,
    /// a sample of records, the scope, the host's robots.txt. Writes nothing. Exit 0 when it can
    /// be bridged as configured, 1 when not. Each request is tried at most twice.
    Check(CheckArgs),
    /// Remove the state (store and generations) of repositories no longer in the
    /// configuration, printing each folder removed. Run it after the reload or restart that
    /// removed them: a gateway serves what its configuration held when it last read it.
    Prune(PruneArgs),
    /// Copy the SQLite stores of a state folder (a gateway's state_dir, a folder per
    /// repository, or an export's --state folder) into a PostgreSQL database, for a gateway or
    /// a fleet moving onto `[state] url`: each repository in one transaction, then read back and
    /// compared. The SQLite files are left as they are. Stop the gateways first. Exit 0 when
    /// every repository was copied, 1 when one was not (the others are copied all the same).
    MigrateState(MigrateStateArgs),
    /// Print a shell completion script on stdout, e.g.
    /// `oai-bridge completions bash > /etc/bash_completion.d/oai-bridge`.
    Completions(CompletionsArgs),
    /// Print the manual page (roff) on stdout, e.g. `oai-bridge man | man -l -`.
    Man,
    /// GET an http:// URL and exit 0 when it answers 2xx, 1 otherwise: the container image's
    /// HEALTHCHECK, which has no curl. Hidden: a tool for the image, not for operators.
    #[command(hide = true)]
    Probe(ProbeArgs),
}

/// `oai-bridge prune`.
#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Configuration file: its repositories are kept, and its `state_dir` pruned.
    #[arg(long, env = "OAI_BRIDGE_CONFIG", default_value = "bridge.toml")]
    pub config: PathBuf,
    /// The settings' flags.
    #[command(flatten)]
    pub(crate) settings: Flags<PruneFlags>,
    /// Print what would be removed, and remove nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// `oai-bridge migrate-state`.
#[derive(Debug, Args)]
pub struct MigrateStateArgs {
    /// Configuration file: its `[server] state_dir` and `[state] url`, and its repositories
    /// (an export's store takes the name of the one that harvests its source).
    #[arg(long, env = "OAI_BRIDGE_CONFIG")]
    pub config: Option<PathBuf>,
    /// The settings' flags.
    #[command(flatten)]
    pub(crate) settings: Flags<MigrateFlags>,
    /// Copy only this repository (repeatable). For an export's state folder: the name its
    /// store takes in the database (default: the configured repository that harvests its
    /// source, or else the source as it reads, as `export --state-url` names it).
    #[arg(long = "repository", value_name = "NAME")]
    pub repositories: Vec<String>,
    /// Replace the rows a repository already has in the database, in the copy's transaction
    /// (without it, such a repository is refused).
    #[arg(long)]
    pub replace: bool,
    /// Print what would be copied, per repository, and write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// `oai-bridge completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `oai-bridge probe`.
#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// What to GET: http://HOST:PORT/PATH (plain HTTP, as the gateway listens).
    pub url: String,
    /// Seconds to wait for the connection and for the status line, each.
    #[arg(long, value_name = "SECS", default_value_t = 5)]
    pub timeout: u64,
}

/// `oai-bridge check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// An OAI-PMH baseURL, the name of a `[[repository]]` in the configuration, or a local
    /// OAI Static Repository file.
    pub target: String,
    /// Configuration file, for a repository name (and its scope and public URL) and the
    /// `[harvest]` settings.
    #[arg(long, env = "OAI_BRIDGE_CONFIG")]
    pub config: Option<PathBuf>,
    /// The settings' flags.
    #[command(flatten)]
    pub(crate) settings: Flags<CheckFlags>,
    /// Sample landing pages to request (status, and whether the host's robots.txt allows
    /// them); 0 requests none.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub fetch: usize,
    /// ListRecords pages to sample.
    #[arg(long, default_value_t = 2)]
    pub pages: u64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `oai-bridge serve`.
#[derive(Clone, Debug, Args)]
pub struct ServeArgs {
    /// Configuration file.
    #[arg(long, env = "OAI_BRIDGE_CONFIG", default_value = "bridge.toml")]
    pub config: PathBuf,
    /// The settings' flags.
    #[command(flatten)]
    pub(crate) settings: Flags<ServeFlags>,
    /// Validate the configuration and what serve needs to start on it (state_dir, the files it
    /// names, the listeners' ports, no other gateway on state_dir), print what would be served
    /// and what serve would warn of, and exit (0 it would start, 78 not).
    #[arg(long)]
    pub check_config: bool,
    /// Publish a shrink the guard holds back (`shrink_guard`), for every repository, at its
    /// next refresh.
    #[arg(long)]
    pub accept_shrink: bool,
}

/// `oai-bridge export`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("store").multiple(true).args(["state", "state-url"])))]
pub struct ExportArgs {
    /// Configuration file; its `[harvest]` settings apply, and a `[[repository]]` may be chosen.
    #[arg(long, env = "OAI_BRIDGE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Which `[[repository]]` of the configuration to export (default: the only one).
    #[arg(long)]
    pub repository: Option<String>,
    /// Folder to write, replaced as a whole, atomically, when the export succeeds; or object
    /// storage (s3://bucket/prefix/, gs://, az://, file://), uploaded so that readers always
    /// see a complete generation. Credentials from the environment (AWS_*, GOOGLE_*, AZURE_*).
    #[arg(long, value_name = "FOLDER|URL", value_parser = Output::parse)]
    pub out: Output,
    /// The settings' flags.
    #[command(flatten)]
    pub(crate) settings: Flags<ExportFlags>,
    /// No live progress line.
    #[arg(long)]
    pub no_progress: bool,
    /// Print the summary as JSON: the fields of a gateway generation's summary, with the
    /// folder and the bytes written.
    #[arg(long)]
    pub json: bool,
    /// Keep the repository's state in this folder (store.sqlite): later exports ask only for
    /// changes, and continue an interrupted harvest where it stopped.
    #[arg(long, value_name = "DIR")]
    pub state: Option<PathBuf>,
    /// With --state or --state-url: publish even when the shrink guard would hold the export back.
    #[arg(long, requires = "store")]
    pub accept_shrink: bool,
}
