//! The files a generation holds, written: sitemap shards, the sitemap index and robots.txt
//! ([`sitemap`], [`robots`]), the patch of a published sitemap with a refresh's changes
//! ([`patch`]), and the profiles beside the sitemap ([`profiles`]): their file names and
//! settings, the collector of a harvest's records for the landing-page profiles, the Signmap's,
//! OCX's, CDIF's and DiWoo's files, the ledger of what was published and its patch, and the
//! `dc:type` vocabulary they map records' types with ([`dctype`]). They write into a
//! [`profiles::files::FileSink`] the caller gives: this crate does not know where the files go.
//! What a `dc:identifier` value is, the collectors read as [`identifier::Class`].
//!
//! Bytes in memory, but for [`disk`], the crate's one part that touches the file system: the
//! spill folders a harvest's temporary files go in ([`disk::spill`]), the profiles' temporary
//! files ([`disk::profiles`]) and the on-disk writers a publish puts its files with
//! ([`disk::write`]), an export's staging folder among them.
//!
//! Invariant: every shard written holds at least one URL and stays within [`Limits`] (at most
//! 50,000 URLs and 52,428,800 bytes uncompressed, SM-09); every value is escaped (SM-03). A
//! published file's name is formatted and parsed in one place, [`profiles::FileName`].
//!
//! API boundary: records and classified identifiers in, files out through a sink, but for
//! [`disk`], which writes bytes to files and folders it is given. Which files go where (a
//! folder, a gateway's generation, a bucket) and what the URLs are (the records, the scope,
//! how an identifier is classified, the inventory of URLs) is the `oai-bridge` package's
//! business; this crate knows the sitemap protocol, robots.txt and the profiles' formats.
//!
//! Errors: [`FilesError`] (once `RenderError`, a name kept) is the crate's one error type.
//! Writing bytes in memory fails only when there is nothing to write or more than one index
//! can list, or a patch finds the published files not as recorded; writing them to disk when
//! the file system refuses. A sink's own failures are its own type
//! ([`profiles::files::FileSink::Error`]), which the crate's errors convert into: a collector
//! fails with what its sink fails with.

// Every public fallible function says when it fails, in a `# Errors` section.
#![warn(clippy::missing_errors_doc)]

pub mod counts;
pub mod dctype;
pub mod disk;
mod error;
pub mod identifier;
pub mod memo;
pub mod patch;
pub mod profiles;
pub mod published;
pub mod robots;
pub mod sitemap;

pub use error::FilesError;
/// [`FilesError`]'s name while the crate only rendered.
pub use error::FilesError as RenderError;
pub use sitemap::{Limits, Shard};
