//! Writers for the files a generation holds: sitemap shards, the sitemap index and robots.txt.
//! Pure: they produce bytes and never touch the file system.

pub(crate) mod robots;
pub(crate) mod sitemap;

pub(crate) use sitemap::{Limits, RenderError, Shard};
