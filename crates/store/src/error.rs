//! The store crate's one error type, [`StoreError`]: every failure names the store (a SQLite
//! file, or a PostgreSQL database and repository, never with a password) and what was being
//! done, as an operator needs it to act.

use std::path::PathBuf;

use oai_bridge_files::counts::Drop;

use crate::Place;
use crate::persisted::FORMAT;

/// Everything that can go wrong in a store, a database or a copy between them.
///
/// ```
/// use oai_bridge_store::{Place, StoreError};
///
/// let error = StoreError::Failed {
///     place: Place::File("state/repo/store.sqlite".into()),
///     what: "cannot open",
///     source: "unable to open database file".into(),
/// };
/// assert_eq!(
///     error.to_string(),
///     "state store state/repo/store.sqlite: cannot open: unable to open database file"
/// );
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A store's SQLite or PostgreSQL call failed, or what it read cannot be used.
    #[error("state store {place}: {what}: {source}")]
    Failed {
        /// The store.
        place: Place,
        /// What was being done.
        what: &'static str,
        /// SQLite's or PostgreSQL's error, or why what was read cannot be used.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A PostgreSQL database cannot be reached or prepared (its schema's migrations), before
    /// any repository's store in it ([`Database::connect`](crate::copy::Database::connect)).
    #[error("state database {url}: {what}: {source}")]
    Database {
        /// The database's URL without its password.
        url: String,
        /// What was being done.
        what: &'static str,
        /// Why it failed.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A copy into the database was refused: it already holds rows of the repository, and
    /// they were not to be replaced ([`Database::copy`](crate::copy::Database::copy)).
    #[error("state store {0}: already holds rows of this repository")]
    Occupied(Place),
    /// A copy was refused: a gateway of a fleet (or another migration) holds a live lease on
    /// the repository: it is refreshing it now.
    #[error("state store {place}: {holder:?} holds a live lease on this repository")]
    Leased {
        /// The repository's store in the database.
        place: Place,
        /// Who holds the lease.
        holder: String,
    },
    /// The lease taken for a copy ended before the copy was committed (it could not be
    /// renewed): the copy was rolled back.
    #[error(
        "state store {0}: the lease taken for the copy ended before it was committed: the copy \
         was rolled back"
    )]
    LeaseLost(Place),
    /// What a copy's transaction wrote differs from the SQLite store: the copy was rolled back.
    #[error(
        "state store {place}: the copy does not match {} (SQLite, PostgreSQL): {}; it was \
         rolled back, the database holds what it held before",
        path.display(),
        differences.join("; ")
    )]
    Mismatch {
        /// The repository's store in the database.
        place: Place,
        /// The SQLite store.
        path: PathBuf,
        /// What differs.
        differences: Vec<String>,
    },
    /// A copy was committed (it matched in its transaction), but reads back differently
    /// through the PostgreSQL store: left as it is, reported.
    #[error(
        "state store {place}: the copy was committed, but reads back through the store \
         otherwise than {} (SQLite, PostgreSQL): {}; it was left as it is",
        path.display(),
        differences.join("; ")
    )]
    ReadBack {
        /// The repository's store in the database.
        place: Place,
        /// The SQLite store.
        path: PathBuf,
        /// What differs.
        differences: Vec<String>,
    },
    /// A state document written in a format this version does not know: a newer version's.
    /// Met while the document is read, it reaches a caller as the source of a
    /// [`Failed`](Self::Failed) that names the store.
    #[error(
        "state format {0} is not one this version reads (1 to {FORMAT}): a newer oai-bridge wrote it"
    )]
    UnknownFormat(u32),
    /// A state document with more drop counts than there are drop reasons; as
    /// [`UnknownFormat`](Self::UnknownFormat), the source of a [`Failed`](Self::Failed).
    #[error("{0} drop counts, more than the {known} drop reasons there are", known = Drop::ALL.len())]
    TooManyDrops(usize),
}
