//! The root package's errors: [`Error`], the one enum of every failure of a command, a harvest,
//! a publish or the gateway, as lychee's `ErrorKind` is its crate's; [`ConfigError`], a
//! configuration's; and how an error is told to an operator ([`chain`]).
//!
//! Each variant carries what an operator needs to act: the file and key, the URL, page and
//! token (in [`HarvestError`]), the path and what was being done. Where a failure becomes an
//! exit code is decided here once ([`Error::exit_code`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::SystemTime;

use oai_bridge_files::FilesError;
use oai_bridge_store::{FILE, Place, StoreError};
use oai_pmh::HarvestError;

/// Exit code for a bad configuration (sysexits `EX_CONFIG`).
pub const EXIT_CONFIG: u8 = 78;

/// Exit code for a usage error, as clap's own: a flag the command needs was not given.
pub const EXIT_USAGE: u8 = 2;

/// A configuration error, naming the file and key.
///
/// A type of its own beside [`Error`], rather than variants of it: it is the user's input, found
/// before anything runs, always with a file (or `command line`, `environment`) and a key, and the
/// configuration's code (its keys' checks, the flags, the environment, `serve --check-config`,
/// a reload) builds and reports nothing else. [`Error::Config`] carries it where it ends a
/// command or a reload.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {key}: {message}")]
pub struct ConfigError {
    /// The configuration file (or `command line`, or `environment`).
    pub file: String,
    /// The key, e.g. `[harvest] max_attempts` or `[[repository]] #2 base_url`; or the flag
    /// (`--max-attempts`) or the environment variable (`OAI_BRIDGE_LISTEN`).
    pub key: String,
    /// What is wrong with it.
    pub message: String,
}

/// Every failure of the root package: of a harvest and its rendering, of a publish (a folder,
/// a generation, a bucket), of an export, a refresh, a reload or the gateway's start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // The configuration and the command line.
    /// The configuration is bad: in a command's options, or in a reload (which then changes
    /// nothing).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A flag the command needs is missing and no other layer (the file, the environment)
    /// gives it: a usage error, as clap's own.
    #[error(transparent)]
    Usage(ConfigError),
    /// A reload was asked of a gateway started without a configuration file to read again.
    #[error("no configuration file to reload")]
    NoConfigFile,

    // A harvest.
    /// The harvest did not reach the end of its list.
    #[error(transparent)]
    Harvest(#[from] HarvestError),
    /// The upstream asked (`Retry-After`) not to be called before then.
    #[error(
        "the upstream asked (Retry-After) not to be called before {}; not harvesting until then",
        httpdate::fmt_http_date(*.0)
    )]
    NotBefore(SystemTime),
    /// The HTTP client could not be built.
    #[error("cannot set up the HTTP client: {0}")]
    Client(#[from] reqwest::Error),

    // Building a generation.
    /// No scope can be derived.
    #[error("no scope: {0}")]
    Scope(String),
    /// The job asks for something that cannot be made; the message says what.
    #[error("cannot build this job: {0}")]
    InvalidJob(String),
    /// Nothing would be published; the message says why.
    #[error("nothing to publish: {0}")]
    NothingToPublish(String),
    /// The shrink guard held the publish back.
    #[error(
        "held back: this harvest would publish {harvested} URLs where {published} are published, \
         removing more than {:.0}% of them; the next complete harvest publishes it if it shows the \
         same, or pass --accept-shrink",
        share * 100.0
    )]
    ShrinkHeld {
        /// URLs published now.
        published: u64,
        /// URLs the harvest would publish.
        harvested: u64,
        /// The guard's share.
        share: f64,
    },
    /// A published sitemap shard's entries, read back to find what a refresh changed, were not
    /// in the order every shard of the stable layout has.
    #[error("the sitemap shard {} lists {url} out of order", path.display())]
    Unordered {
        /// The shard.
        path: PathBuf,
        /// The URL out of order.
        url: String,
    },
    /// The files crate failed: rendering (nothing to publish, too many shards), a temporary
    /// file of the harvest (the inventory's sorted runs, the profiles' versions, the refresh's
    /// changes: [`FilesError::Spill`]; the profiles' shard files and CDIF documents:
    /// [`FilesError::ShardFile`], [`FilesError::CdifSpill`]), an inventory past 32 bits
    /// ([`FilesError::InventoryFull`]), a file or folder of an export written on disk (the
    /// staging folder, its files, the swap: [`FilesError::Io`]), a file written as a stream
    /// ([`FilesError::Stream`]), the CDIF documents' URL ([`FilesError::Documents`]), the
    /// profiles' ledger ([`FilesError::Ledger`]); or a patch of the published files that cannot
    /// be made ([`FilesError::Patch`]), which `incremental::render` matches to render every
    /// record instead (a sink whose error type is not this enum must convert `FilesError` into
    /// it whole, or that fallback would become a failure).
    #[error(transparent)]
    Files(#[from] FilesError),
    /// A state store failed: the repository's, or in `migrate-state` a SQLite store, the
    /// database (reached, prepared) or a copy into it (rolled back, or read back different).
    #[error(transparent)]
    Store(#[from] StoreError),

    // Publishing.
    /// A file or folder could not be used (written, read, created, renamed; a generation's,
    /// an export's, the state directory's): `action` says what was being done and `path`
    /// where; `source` is the OS's error, or what made the file unusable.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What was being done ("cannot write", "cannot read the state store of").
        action: &'static str,
        /// Where.
        path: PathBuf,
        /// Why.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The folder was published, but the state store could not record it: the next export
    /// through the store renders every record instead of patching.
    #[error(
        "{out} was published, but the state store could not record it (the next export renders in \
         full): {source}"
    )]
    Unrecorded {
        /// The folder or bucket published, as `--out` names it.
        out: String,
        /// Why the store failed (boxed: the enum's largest variant otherwise).
        source: Box<StoreError>,
    },
    /// A bucket could not be set up (a missing region, credentials, an unknown URL).
    #[error("cannot use {url}: {source}")]
    BucketOpen {
        /// The bucket URL.
        url: String,
        /// Why.
        source: object_store::Error,
    },
    /// A request to the bucket failed.
    #[error("cannot {action} {url}: {source}")]
    BucketRequest {
        /// What was being done.
        action: &'static str,
        /// The object's URL.
        url: String,
        /// Why.
        source: object_store::Error,
    },
    /// The manifest in the bucket cannot be read.
    #[error("{url} is not a manifest of oai-bridge: {reason}")]
    BucketManifest {
        /// The manifest's URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// A publish to a bucket under a fenced lease found that another holder has the
    /// repository: it stopped before making anything current.
    #[error("{url}: {reason}")]
    Superseded {
        /// The bucket's URL.
        url: String,
        /// Why, in words ("lost the lease: fence 41 was superseded by 42").
        reason: String,
    },

    // The gateway.
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// Another gateway runs on the state directory: it holds its lock.
    #[error(
        "[server] state_dir {}: another gateway runs on it ({} is held{}): two gateways on one \
         state_dir would harvest into the same stores and replace each other's generations. \
         Stop the other one, or give this one a state_dir of its own ([server] state_dir, \
         OAI_BRIDGE_STATE_DIR, --state-dir)",
        state_dir.display(),
        lock.display(),
        match holder {
            Some(h) => format!(" by {h}"),
            None => " by a process that does not say which (an oai-bridge older than this one?)"
                .to_owned(),
        }
    )]
    StateDirInUse {
        /// The state directory.
        state_dir: PathBuf,
        /// Its lock file.
        lock: PathBuf,
        /// Who holds it (`oai-bridge serve`, its process id and host), when it said.
        holder: Option<String>,
    },
    /// A refresh's thread ended without an answer (it panicked), or could not start.
    #[error("the refresh stopped unexpectedly: {0}")]
    Aborted(String),
    /// A refresh's schedule was stopped: the gateway is shutting down, or a reload removed the
    /// repository.
    #[error("interrupted by shutdown or removal")]
    Shutdown,
    /// The fleet's lease on a refresh could not be renewed: it was stopped, as another gateway
    /// may have claimed the repository meanwhile.
    #[error("stopped: the claim on the refresh was lost: {0}; nothing made current")]
    ClaimLost(String),
    /// The fleet's lease was found lost, or superseded by another gateway's, before the
    /// generation was made current: nothing was (here or in the bucket), and this gateway
    /// follows the one that has the repository now.
    #[error("{0}; nothing made current (this gateway follows the fleet's generation)")]
    LeaseLost(String),
    /// The gateway stopped before a reload ended (its runtime shut down).
    #[error("the gateway stopped before the reload ended")]
    Interrupted,
    /// The fleet's database (`[state] url` of a fleet of gateways) failed; named without its
    /// password, with what was being done.
    #[error("fleet state {url}: cannot {what}: {source}")]
    Fleet {
        /// The database's URL, without its password.
        url: String,
        /// What was being done.
        what: &'static str,
        /// PostgreSQL's error, or why it did not answer.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    // migrate-state.
    /// The state folder to migrate holds no store.
    #[error(
        "{}: no store found (neither {FILE} in it, as an export's --state folder holds, nor in \
         its folders, as a gateway's state_dir holds)",
        path.display()
    )]
    NoStores {
        /// The folder.
        path: PathBuf,
    },
    /// `migrate-state --repository` names a repository the state directory has no store of.
    #[error("{}: no store of the repository {name:?} (no {name}/{FILE})", path.display())]
    UnknownRepository {
        /// The state directory.
        path: PathBuf,
        /// The name given.
        name: String,
    },
    /// A gateway runs on the state directory to migrate: its stores would change after the
    /// copy.
    #[error(
        "{}: a gateway runs on this state directory (it holds {}): stop it first, or its \
         stores change after they are copied",
        path.display(),
        path.join("gateway.lock").display()
    )]
    GatewayRuns {
        /// The state directory.
        path: PathBuf,
    },
    /// An export's store to migrate whose repository's name cannot be told.
    #[error("{}: {message}", path.display())]
    StoreName {
        /// The store's file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The database to migrate into holds rows of the repository already.
    #[error(
        "state store {0}: already holds rows of this repository: refused (--replace replaces \
         them; stop the gateways that use the database first)"
    )]
    Occupied(Place),
    /// A gateway (or another migration) holds a live lease on the repository to migrate now.
    #[error(
        "state store {place}: {holder:?} holds a live lease on this repository (a gateway of \
         a fleet refreshing it, or another migrate-state copying it): refused; stop the \
         gateways that use the database first"
    )]
    Leased {
        /// The repository's store in the database.
        place: Place,
        /// Who holds it.
        holder: String,
    },
}

/// A patch found it cannot be made, in the files crate's code or the root's: the files crate's
/// [`FilesError::Patch`], which the caller matches to render every record instead.
impl From<oai_bridge_files::patch::Unpatchable> for Error {
    fn from(why: oai_bridge_files::patch::Unpatchable) -> Self {
        Error::Files(why.into())
    }
}

impl Error {
    /// `action` on `path` failed with `source`: [`Error::Io`].
    pub(crate) fn io<'a, E>(
        action: &'static str,
        path: impl Into<PathBuf> + 'a,
    ) -> impl FnOnce(E) -> Error + 'a
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        move |source| Error::Io {
            action,
            path: path.into(),
            source: source.into(),
        }
    }

    /// Whether an export's output is as it was before it (all but [`Error::Unrecorded`]).
    pub fn left_untouched(&self) -> bool {
        !matches!(self, Error::Unrecorded { .. })
    }

    /// The exit code of a command that ends with this error: 2 for a flag the command needs
    /// and was not given, 78 (`EX_CONFIG`) for a configuration that cannot run until it changes
    /// (another gateway on the state directory among them), 1 for any other failure.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage(_) => EXIT_USAGE,
            Error::Config(_) | Error::StateDirInUse { .. } => EXIT_CONFIG,
            _ => 1,
        }
    }
}

/// An error and its sources, one per line; a source whose text the message already holds is
/// left out.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let line = s.to_string();
        if !text.contains(&line) {
            text.push_str("\n  caused by: ");
            text.push_str(&line);
        }
        source = s.source();
    }
    text
}
