//! Writers for the files a generation holds: sitemap shards, the sitemap index and robots.txt.
//! Pure: they produce bytes and never touch the file system.
//!
//! Invariant: every shard written holds at least one URL and stays within [`Limits`] (at most
//! 50,000 URLs and 52,428,800 bytes uncompressed, SM-09); every value is escaped (SM-03).
//!
//! API boundary: bytes in memory, in and out. Where the files go (a folder, a gateway's
//! generation, a bucket) and what the URLs are (the records, the scope, the profiles) is the
//! `oai-bridge` package's business; this crate knows only the sitemap protocol and robots.txt.
//!
//! Errors: [`RenderError`] is the crate's one error type. Writing bytes in memory fails only
//! when there is nothing to write or more than one index can list.

// Every public fallible function says when it fails, in a `# Errors` section.
#![warn(clippy::missing_errors_doc)]

pub mod counts;
pub mod published;
pub mod robots;
pub mod sitemap;

pub use sitemap::{Limits, RenderError, Shard};
