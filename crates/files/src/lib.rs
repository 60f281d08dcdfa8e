//! Writers for the files a generation holds: sitemap shards, the sitemap index and robots.txt,
//! and what is pure about the profiles beside the sitemap: their file names and settings, the
//! Signmap's and OCX's entries, and the `dc:type` vocabulary they map records' types with.
//! Pure: they produce bytes and never touch the file system.
//!
//! Invariant: every shard written holds at least one URL and stays within [`Limits`] (at most
//! 50,000 URLs and 52,428,800 bytes uncompressed, SM-09); every value is escaped (SM-03). A
//! published file's name is formatted and parsed in one place, [`profiles::FileName`].
//!
//! API boundary: bytes in memory, in and out. Where the files go (a folder, a gateway's
//! generation, a bucket) and what the URLs are (the records, the scope, which records a
//! profile describes) is the `oai-bridge` package's business; this crate knows the sitemap
//! protocol, robots.txt and the profiles' formats.
//!
//! Errors: [`RenderError`] is the crate's one error type. Writing bytes in memory fails only
//! when there is nothing to write or more than one index can list.

// Every public fallible function says when it fails, in a `# Errors` section.
#![warn(clippy::missing_errors_doc)]

pub mod counts;
pub mod dctype;
pub mod memo;
pub mod profiles;
pub mod published;
pub mod robots;
pub mod sitemap;

pub use sitemap::{Limits, RenderError, Shard};
