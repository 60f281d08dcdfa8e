//! oai-bridge makes OAI-PMH repositories visible to search engines and FAIR crawlers: it
//! harvests `ListRecords` (oai_dc), takes the URLs from `dc:identifier`, keeps those inside the
//! scope, and publishes shard-split sitemaps with robots.txt.
//!
//! The flow, one module per step (see ARCHITECTURE.md): [`oai`] (client, paging, parsing) ->
//! [`classify`] and [`scope`] -> [`inventory`] -> [`render`] -> [`publish`], tied together by
//! [`pipeline`] and driven by [`export`] (once, into a folder) or [`server`] (the gateway, on a
//! schedule).

pub mod app;
pub mod check;
pub mod classify;
pub mod cli;
pub mod config;
pub mod datestamp;
pub mod dctype;
pub mod engine;
pub mod error;
pub mod export;
#[doc(hidden)]
pub mod fuzzing;
pub mod incremental;
pub mod inventory;
pub mod memo;
pub mod memory;
pub mod oai;
pub mod patch;
pub mod pipeline;
pub mod platform;
pub mod profiles;
pub mod progress;
pub mod publish;
pub mod render;
pub mod scope;
pub mod server;
pub mod settings;
pub mod store;
pub mod summary;
