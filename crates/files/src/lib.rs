//! Writers for the files a generation holds: sitemap shards, the sitemap index and robots.txt,
//! and what is pure about the profiles beside the sitemap: their file names and settings, the
//! Signmap's and OCX's entries, and the `dc:type` vocabulary they map records' types with.
//! Pure: they produce bytes and never touch the file system. Beside them, in [`disk`], the
//! crate's one part that does: the spill folders a harvest's temporary files go in
//! ([`disk::spill`]), the profiles' temporary files ([`disk::profiles`]) and the on-disk
//! writers a publish puts its files with ([`disk::write`]). Which version of a record's
//! profile entries wins is [`profiles::versions`]'s, over the spill folders' runs.
//!
//! Invariant: every shard written holds at least one URL and stays within [`Limits`] (at most
//! 50,000 URLs and 52,428,800 bytes uncompressed, SM-09); every value is escaped (SM-03). A
//! published file's name is formatted and parsed in one place, [`profiles::FileName`].
//!
//! API boundary: bytes in memory, in and out, but for [`disk`], which writes bytes to files
//! and folders it is given. Which files go where (a folder, a gateway's generation, a bucket)
//! and what the URLs are (the records, the scope, which records a profile describes) is the
//! `oai-bridge` package's business; this crate knows the sitemap protocol, robots.txt and the
//! profiles' formats.
//!
//! Errors: [`FilesError`] (once `RenderError`, a name kept) is the crate's one error type.
//! Writing bytes in memory fails only when there is nothing to write or more than one index
//! can list; writing them to disk when the file system refuses.

// Every public fallible function says when it fails, in a `# Errors` section.
#![warn(clippy::missing_errors_doc)]

pub mod counts;
pub mod dctype;
pub mod disk;
mod error;
pub mod memo;
pub mod profiles;
pub mod published;
pub mod robots;
pub mod sitemap;

pub use error::FilesError;
/// [`FilesError`]'s name while the crate only rendered.
pub use error::FilesError as RenderError;
pub use sitemap::{Limits, Shard};
