//! The command line (clap). Flags override the environment, which overrides `bridge.toml`,
//! which overrides the defaults: `settings` reads the settings' environment variables and
//! stacks the layers. Clap reads only `OAI_BRIDGE_CONFIG` (which file) and
//! `OAI_BRIDGE_LOG_FORMAT` (how to log), both needed before any layer.

use std::path::PathBuf;

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
    /// The state directory to prune; overrides OAI_BRIDGE_STATE_DIR and `[server] state_dir`.
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
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
    /// The state folder to copy: a gateway's state directory ({DIR}/{name}/store.sqlite,
    /// each the store of repository {name}) or an export's --state folder ({DIR}/store.sqlite);
    /// overrides OAI_BRIDGE_STATE_DIR and `[server] state_dir`.
    #[arg(long, visible_alias = "state-dir", value_name = "DIR")]
    pub state: Option<PathBuf>,
    /// The PostgreSQL database to copy into (postgres://user:password@host:port/database);
    /// overrides OAI_BRIDGE_STATE_URL and `[state] url`. The variable keeps the password out of
    /// the process list.
    #[arg(long, value_name = "URL")]
    pub state_url: Option<String>,
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
    /// Scope prefixes to check instead of the baseURL's directory (repeatable).
    #[arg(long = "scope", value_name = "PREFIX")]
    pub scope: Vec<String>,
    /// Where the records' landing pages are.
    #[command(flatten)]
    pub landing: LandingArgs,
    /// Sample landing pages to request (status, and whether the host's robots.txt allows
    /// them); 0 requests none.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub fetch: usize,
    /// Where the bridge's files would be served: says whether robots.txt needs a
    /// cross-submission line.
    #[arg(long)]
    pub public_url: Option<String>,
    /// ListRecords pages to sample.
    #[arg(long, default_value_t = 2)]
    pub pages: u64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Where a repository's landing pages are: each flag overrides its `[[repository]]` key.
#[derive(Debug, Args, Default)]
pub struct LandingArgs {
    /// The repository's platform: auto (detect it), generic (Google's rule: URLs under the
    /// baseURL's directory), dspace (the Handle gives the landing page), eprints (the
    /// abstract page is a dc:relation) or islandora (oai:host:node-N is /node/N).
    #[arg(long, value_name = "NAME")]
    pub platform: Option<String>,
    /// DSpace: where the UI serves /handle/P/S, when not at the baseURL's host (DSpace 7+).
    #[arg(long, value_name = "URL")]
    pub ui_url: Option<String>,
    /// A landing page made from each record's {handle}, {doi} or {oai_local}, e.g.
    /// "https://host/records/{oai_local}".
    #[arg(long, value_name = "TEMPLATE")]
    pub landing_template: Option<String>,
}

/// `oai-bridge serve`.
#[derive(Clone, Debug, Args)]
pub struct ServeArgs {
    /// Configuration file.
    #[arg(long, env = "OAI_BRIDGE_CONFIG", default_value = "bridge.toml")]
    pub config: PathBuf,
    /// Address to listen on, e.g. 0.0.0.0:8080 (port 0 picks a free port); overrides
    /// OAI_BRIDGE_LISTEN and `[server] listen`.
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<String>,
    /// Address of the admin listener (status page, /metrics, admin endpoints), e.g.
    /// 127.0.0.1:8081, or "off"; overrides OAI_BRIDGE_ADMIN_LISTEN and `[server] admin_listen`.
    #[arg(long, value_name = "ADDR:PORT")]
    pub admin_listen: Option<String>,
    /// Public URL of the gateway, as crawlers reach it; overrides OAI_BRIDGE_PUBLIC_URL and
    /// `[server] public_url`.
    #[arg(long)]
    pub public_url: Option<String>,
    /// Also publish every generation to object storage (s3://bucket/prefix/, gs://, az://,
    /// file://), each repository under its name, robots.txt at the root; credentials from the
    /// environment. Overrides OAI_BRIDGE_PUBLISH_URL and `[server] publish_url`.
    #[arg(long, value_name = "URL")]
    pub publish_url: Option<String>,
    /// Where generations are kept; overrides OAI_BRIDGE_STATE_DIR and `[server] state_dir`.
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// Keep every repository's store in this PostgreSQL database
    /// (postgres://user:password@host:port/database) instead of a SQLite file in its folder;
    /// overrides OAI_BRIDGE_STATE_URL and `[state] url`. The variable keeps the password out
    /// of the process list.
    #[arg(long, value_name = "URL")]
    pub state_url: Option<String>,
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
#[command(group(clap::ArgGroup::new("store").multiple(true).args(["state", "state_url"])))]
pub struct ExportArgs {
    /// Configuration file; its `[harvest]` settings apply, and a `[[repository]]` may be chosen.
    #[arg(long, env = "OAI_BRIDGE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Which `[[repository]]` of the configuration to export (default: the only one).
    #[arg(long)]
    pub repository: Option<String>,
    /// OAI-PMH baseURL, or an OAI Static Repository file (path or URL).
    #[arg(long)]
    pub base_url: Option<String>,
    /// Folder to write, replaced as a whole, atomically, when the export succeeds; or object
    /// storage (s3://bucket/prefix/, gs://, az://, file://), uploaded so that readers always
    /// see a complete generation. Credentials from the environment (AWS_*, GOOGLE_*, AZURE_*).
    #[arg(long, value_name = "FOLDER|URL", value_parser = Output::parse)]
    pub out: Output,
    /// Object storage: how long a file no index names any more stays in the bucket, so that
    /// a crawler holding the index before finds it (default: a day). Overrides the
    /// configuration's `[server] publish_grace_secs`.
    #[arg(long, value_name = "SECS")]
    pub publish_grace_secs: Option<u64>,
    /// Where the folder will be served (a directory URL); index and robots.txt URLs use it.
    /// Overrides OAI_BRIDGE_PUBLIC_URL and the configuration's.
    #[arg(long)]
    pub public_url: Option<String>,
    /// Harvest only this set (repeatable).
    #[arg(long = "set", value_name = "SETSPEC")]
    pub sets: Vec<String>,
    /// Only records changed at or after this date (YYYY-MM-DD or YYYY-MM-DDThh:mm:ssZ).
    #[arg(long)]
    pub from: Option<String>,
    /// Only records changed at or before this date.
    #[arg(long)]
    pub until: Option<String>,
    /// Publish URLs under this prefix instead of the baseURL's directory (repeatable).
    #[arg(long = "scope", value_name = "PREFIX")]
    pub scope: Vec<String>,
    /// Where the records' landing pages are.
    #[command(flatten)]
    pub landing: LandingArgs,
    /// Write gzip-compressed shards (sitemap-N.xml.gz).
    #[arg(long)]
    pub gzip: bool,
    /// Also write a Signmap: signmap.xml and signmap-N.xml, landing pages with Signposting links.
    #[arg(long)]
    pub signmap: bool,
    /// Also write an OCX sitemap (ocx.xml, ocx-N.xml), with the configuration's
    /// `[repository.ocx]` settings or the defaults.
    #[arg(long)]
    pub ocx: bool,
    /// Also write each record's metadata as CDIF JSON-LD (cdif/*.jsonld) and the CDIF sitemap
    /// (cdif-sitemap.xml), announced in robots.txt for `User-agent: CDIF1.0`.
    #[arg(long)]
    pub cdif: bool,
    /// Also write CDIF's metadata lists: the same JSON-LD documents gathered in schema.org
    /// ItemLists (cdif-list-N.jsonld, profile CDIF-list-1.0), listed in cdif-list-sitemap.xml,
    /// announced for `User-agent: CDIF1.0`. Without --cdif, the documents are in the lists only.
    #[arg(long)]
    pub cdif_list: bool,
    /// DiWoo: publish the records of set SPEC under Woo information category N (1-17), in
    /// sitemapindex-diwoo-infocatNNN.xml (repeatable; replaces the configuration's table).
    #[arg(long = "diwoo", value_name = "SPEC=N")]
    pub diwoo: Vec<String>,
    /// Most URLs per shard (at most 50000).
    #[arg(long)]
    pub max_urls: Option<usize>,
    /// Most bytes per shard, uncompressed (at most 52428800).
    #[arg(long)]
    pub max_bytes: Option<usize>,
    /// Attempts per request before giving up.
    #[arg(long)]
    pub max_attempts: Option<u32>,
    /// Timeout for one request, in seconds.
    #[arg(long, value_name = "SECS")]
    pub request_timeout: Option<u64>,
    /// Pause between requests, in milliseconds.
    #[arg(long, value_name = "MS")]
    pub politeness_delay: Option<u64>,
    /// Longest wait a Retry-After header may impose, in seconds.
    #[arg(long, value_name = "SECS")]
    pub retry_after_max: Option<u64>,
    /// Limit for the whole harvest, in seconds.
    #[arg(long, value_name = "SECS")]
    pub deadline: Option<u64>,
    /// Largest response body accepted, in bytes (after decompression).
    #[arg(long, value_name = "BYTES")]
    pub max_body_bytes: Option<u64>,
    /// First retry delay, in milliseconds (doubles per attempt, with jitter).
    #[arg(long, value_name = "MS")]
    pub backoff_initial: Option<u64>,
    /// User-Agent to send; include a contact address. Overrides OAI_BRIDGE_USER_AGENT and
    /// `[harvest] user_agent`.
    #[arg(long)]
    pub user_agent: Option<String>,
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
    /// Keep the repository's state in this PostgreSQL database
    /// (postgres://user:password@host:port/database) instead, under the repository's name
    /// (--repository's, or else the --base-url as given); overrides OAI_BRIDGE_STATE_URL,
    /// which keeps the password out of the process list.
    #[arg(long, value_name = "URL")]
    pub state_url: Option<String>,
    /// With --state or --state-url: harvest in full this often (seconds) when the repository does not keep
    /// deletions (deletedRecord no or transient). Default 604800 (a week).
    #[arg(long, value_name = "SECS", requires = "store")]
    pub full_harvest_interval: Option<u64>,
    /// With --state or --state-url: the largest share (0 to 1) of the published URLs a harvest may remove
    /// before it is held back. Default 0.5.
    #[arg(long, value_name = "SHARE", requires = "store")]
    pub shrink_guard: Option<f64>,
    /// With --state or --state-url: publish even when the shrink guard would hold the export back.
    #[arg(long, requires = "store")]
    pub accept_shrink: bool,
}
