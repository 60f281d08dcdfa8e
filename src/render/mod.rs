//! Writers for the files a generation holds: sitemap shards, the sitemap index and robots.txt.
//! Pure: they produce bytes and never touch the file system.

pub mod robots;
pub mod sitemap;

pub use sitemap::{Limits, RenderError, Shard};
