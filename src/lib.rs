//! oai-bridge makes OAI-PMH repositories visible to search engines and FAIR crawlers: it
//! harvests `ListRecords` (oai_dc), takes the URLs from `dc:identifier`, keeps those inside the
//! scope, and publishes shard-split sitemaps with robots.txt.
//!
//! The library exists for the binary, the tests, the benchmarks and the fuzz targets: its modules
//! are private (but `fuzzing`, the fuzz targets' checks), and what those need is re-exported
//! here, grouped by what it is for. The flow, one module per step, is in ARCHITECTURE.md: the
//! `oai_pmh` crate (`crates/oai-pmh`: client, paging, parsing, datestamps) -> `platform`,
//! `classify` and `scope` -> `inventory`, and the profiles' collectors, and the writers of
//! every file (the `oai_bridge_files` crate, `crates/files`, named here `render`, `profiles`
//! and `patch`), tied together by `pipeline`, kept across runs by `store` (the
//! `oai_bridge_store` crate, `crates/store`), and run by `engine` for `export` (once, into a
//! folder) and `server` (the gateway, on a schedule).

mod advice;
mod app;
mod bucket;
mod changes;
mod check;
mod classify;
mod cli;
mod config;
mod engine;
mod error;
mod export;
#[doc(hidden)]
pub mod fuzzing;
mod incremental;
mod indexnow;
mod inventory;
mod learn;
mod memory;
mod migrate;
mod pipeline;
mod platform;
mod probe;
mod profiles;
mod progress;
mod publish;
// The files' writers, a crate of their own (crates/files); `crate::render` names it here.
use oai_bridge_files as render;
// The dc:type vocabulary and the memo moved to the files crate with the profiles they serve,
// and the patch of a published sitemap with the writers it shares; the root names them at their
// old paths.
use oai_bridge_files::{dctype, memo, patch};
mod scope;
mod server;
mod settings;
mod spill;
// The durable state, a crate of its own (crates/store); `crate::store` names it here.
use oai_bridge_store as store;
mod summary;

// The commands, as the binary runs them.
pub use app::{
    error_chain, run_check, run_completions, run_export, run_man, run_migrate_state, run_probe,
    run_prune, run_serve,
};
pub use cli::{Cli, Command, CompletionsArgs, LogFormat, ProbeArgs};
pub use memory::limit_arenas;

// The commands as library calls, with their options and outcomes.
pub use bucket::{MANIFEST as BUCKET_MANIFEST, PublishSettings, Uploaded};
pub use check::{CheckOptions, CheckReport, check};
pub use config::{Config, StateConfig};
pub use error::{ConfigError, EXIT_CONFIG, EXIT_USAGE, Error};
pub use export::{ExportOptions, ExportSummary, export};
pub use incremental::{Kind, Policy};
pub use indexnow::{IndexNowConfig, Key as IndexNowKey};
pub use pipeline::{Job, fields_for};
pub use platform::{LandingSettings, Platform, Registry, Resolvers, Row, RowSpec, Setting};
pub use profiles::cdif::CdifSummary;
pub use profiles::diwoo::DiwooStats;
pub use profiles::ocx::{OcxConfig, OcxSummary};
pub use profiles::registry::ProfileSummary;
pub use profiles::signmap::SignmapSummary;
pub use profiles::{Profile, ProfileSettings};
pub use publish::{BucketUrl, MARKER, Output};
pub use server::reload::Reloaded;
pub use server::slots::SlotCounts;
pub use server::{Gateway, Listeners, Repo, serve};
pub use store::{FILE as STORE_FILE, Place, StateUrl, Store, StoreError, StoreLocation};

// The OAI-PMH side: the client, a harvest, what a page holds.
pub use oai_pmh::{
    Client, DcElement, Fields, HarvestError, HarvestErrorKind, HarvestReport, HarvestRequest,
    HarvestSettings, MAX_RESTARTS, Record, RequestHeaders, Source, harvest, parse_list_records,
    parse_list_records_with,
};

// The steps the property tests and benchmarks drive one by one.
pub use classify::{Class, Drop, class};
pub use dctype::TypeMap;
pub use inventory::{DropSample, DropSamples, Inventory, Published};
pub use oai_pmh::Datestamp;
pub use profiles::signposts::Signposts;
pub use render::sitemap::{Limits, MAX_BYTES, MIN_BYTES, Shard, escape, render_shards};
pub use scope::Scope;
