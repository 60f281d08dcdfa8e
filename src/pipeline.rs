//! harvest -> inventory -> rendered files: the steps shared by `export` and the server's
//! refresh. The files go to a [`FileSink`], so the same code fills an export folder or memory.

use std::time::Duration;

use flate2::Compression;
use flate2::write::GzEncoder;
use std::io::Write;
use url::Url;

use crate::classify::Drop;
use crate::dctype::TypeMap;
use crate::inventory::{Inventory, InventoryFull, Published, Stats};
use crate::oai::{self, Client, HarvestError, HarvestReport, HarvestRequest, Source};
use crate::progress::Progress;
use crate::render::robots::render_robots;
use crate::render::signmap::render_signmaps;
use crate::render::sitemap::{render_index, render_shards};
use crate::render::{Limits, RenderError};
use crate::scope::Scope;
use crate::signposts::{Resolved, SignStats, Signposts};

/// Name of the sitemap index in every generation.
pub const INDEX_NAME: &str = "sitemap.xml";

/// Receives the files of a generation.
pub trait FileSink {
    /// The error a write can fail with.
    type Error: std::error::Error + Send + Sync + 'static;
    /// Stores one file.
    fn put(&mut self, name: &str, bytes: &[u8]) -> Result<(), Self::Error>;

    /// Stores one shard, given uncompressed; `name` ends in `.xml.gz` when the job gzips.
    /// By default the shard is stored as named (gzipped for `.gz`); the server's sink overrides
    /// this to keep the plain bytes as well, because it answers both spellings.
    fn put_shard(&mut self, name: &str, xml: &[u8]) -> Result<(), Self::Error> {
        if name.ends_with(".gz") {
            self.put(name, &gzip(xml))
        } else {
            self.put(name, xml)
        }
    }
}

/// What to build.
#[derive(Clone, Debug)]
pub struct Job {
    /// What to harvest.
    pub request: HarvestRequest,
    /// Scope prefixes replacing the default.
    pub scope: Vec<Url>,
    /// Shard limits.
    pub limits: Limits,
    /// Write `.xml.gz` shards.
    pub gzip: bool,
    /// Also write a Signmap (`signmap.xml` and its shards).
    pub signmap: bool,
    /// Where the files will be served: a directory URL.
    pub public_url: Url,
}

/// Why a generation could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PipelineError {
    /// The harvest did not reach the end of its list.
    #[error(transparent)]
    Harvest(#[from] HarvestError),
    /// No scope can be derived.
    #[error("no scope: {0}")]
    Scope(String),
    /// Nothing would be published; the message says why.
    #[error("nothing to publish: {0}")]
    NothingToPublish(String),
    /// The in-memory inventory is full.
    #[error(transparent)]
    Inventory(#[from] InventoryFull),
    /// Rendering failed.
    #[error(transparent)]
    Render(#[from] RenderError),
    /// Storing a file failed.
    #[error("{0}")]
    Sink(Box<dyn std::error::Error + Send + Sync>),
}

/// What a built generation holds.
#[derive(Clone, Debug)]
pub struct Built {
    /// What the harvest saw.
    pub report: HarvestReport,
    /// Counts by outcome.
    pub stats: Stats,
    /// The scope applied.
    pub scope: Scope,
    /// Shard file names, in index order.
    pub shards: Vec<String>,
    /// Absolute URL of the sitemap index.
    pub index_url: Url,
    /// The Signmap's counts and index URL, when the job made one.
    pub signmap: Option<(SignStats, Url)>,
}

impl Built {
    /// Puts together what a finished build holds; `indexes` as [`render`] returned them.
    pub fn new(harvested: Harvested, scope: Scope, shards: Vec<String>, indexes: Vec<Url>) -> Self {
        let mut indexes = indexes.into_iter();
        let index_url = indexes
            .next()
            .expect("render returns the sitemap index first");
        let signmap = harvested.signposts.map(|s| s.stats).zip(indexes.next());
        Built {
            report: harvested.report,
            stats: harvested.published.stats,
            scope,
            shards,
            index_url,
            signmap,
        }
    }
}

/// The scope of a job: explicit prefixes, or the directory of the baseURL (for a Static
/// Repository file, of the baseURL its `Identify` states).
pub fn scope_for(job: &Job, identify_base: &str) -> Result<Scope, PipelineError> {
    if !job.scope.is_empty() {
        return Scope::from_prefixes(&job.scope)
            .ok_or_else(|| PipelineError::Scope("scope prefixes must be http(s) URLs".into()));
    }
    match &job.request.source {
        Source::Oai(base) => Scope::from_base_url(base).ok_or_else(|| PipelineError::Scope(format!("baseURL {base} has no host"))),
        Source::File(path) => Url::parse(identify_base)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .and_then(|u| Scope::from_base_url(&u))
            .ok_or_else(|| {
                PipelineError::Scope(format!(
                    "the Static Repository {} states baseURL {identify_base:?}, which is no http(s) URL to derive a scope from; pass --scope",
                    path.display()
                ))
            }),
    }
}

/// What one harvest gathered, resolved: the URL inventory and, when the job asks for a Signmap,
/// its records.
#[derive(Debug)]
pub struct Harvested {
    /// What the harvest saw.
    pub report: HarvestReport,
    /// The sitemap's URLs.
    pub published: Published,
    /// The Signmap's records (`job.signmap`).
    pub signposts: Option<Resolved>,
}

/// Harvests the job's records into a resolved inventory (and Signmap records), every profile
/// from the same pages: records are fetched once however many files are made of them.
pub async fn harvest(
    client: &Client,
    job: &Job,
    progress: &mut Progress,
) -> Result<Harvested, PipelineError> {
    let mut inventory: Option<(Inventory, Option<Signposts>)> = None;
    let mut failure: Option<PipelineError> = None;
    let mut urls_kept = 0u64;
    let new_collectors = |scope: Scope| {
        let signposts = job
            .signmap
            .then(|| Signposts::new(scope.clone(), TypeMap::default()));
        (Inventory::new(scope), signposts)
    };
    let report = oai::harvest(client, &job.request, |event| {
        if failure.is_some() {
            return;
        }
        let (inventory, signposts) = match &mut inventory {
            Some(inv) => inv,
            None => match scope_for(job, &event.identify.base_url) {
                Ok(scope) => inventory.insert(new_collectors(scope)),
                Err(e) => {
                    failure = Some(e);
                    return;
                }
            },
        };
        for record in &event.records {
            if let Err(e) = inventory.add(record) {
                failure = Some(e.into());
                return;
            }
            if let Some(s) = signposts
                && let Err(e) = s.add(record)
            {
                failure = Some(e.into());
                return;
            }
        }
        urls_kept = inventory.urls_kept();
        progress.page(
            event.page,
            inventory.records_seen(),
            urls_kept,
            event.complete_list_size,
        );
    })
    .await;
    progress.finish();
    let report = report?;
    if let Some(e) = failure {
        return Err(e);
    }
    let (inventory, signposts) = match inventory {
        Some(inv) => inv,
        None => new_collectors(scope_for(job, &report.identify.base_url)?),
    };
    let metadata_base = match &job.request.source {
        Source::Oai(base) => Some(base.clone()),
        // A Static Repository is read through a gateway at the baseURL it states, if any.
        Source::File(_) => Url::parse(&report.identify.base_url)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https")),
    };
    Ok(Harvested {
        published: inventory.finish(),
        signposts: signposts.map(|s| s.finish(metadata_base)),
        report,
    })
}

/// Says why nothing would be published, as an operator can act on it.
pub fn explain_empty(stats: &Stats, scope: &Scope) -> String {
    if stats.records == 0 {
        return "the repository returned no records for this request (noRecordsMatch)".to_owned();
    }
    if stats.deleted == stats.records {
        return format!("all {} records are deleted", stats.records);
    }
    let urls = stats.dropped(Drop::OutOfScope)
        + stats.dropped(Drop::TooLong)
        + stats.dropped(Drop::InvalidUrl);
    if stats.dropped(Drop::OutOfScope) > 0 {
        return format!(
            "0 of {urls} URLs inside the scope {scope}; pass --scope with the prefix of the landing pages (`oai-bridge check` suggests one)"
        );
    }
    format!(
        "none of the {} records has a dc:identifier that is an http(s) URL ({} not URLs, {} persistent identifiers)",
        stats.records,
        stats.dropped(Drop::NotAUrl),
        stats.dropped(Drop::PersistentId)
    )
}

/// Name of the Signmap index.
pub const SIGNMAP_INDEX_NAME: &str = "signmap.xml";

/// Renders shards, index and robots.txt of what was harvested into `sink` (and the Signmap's,
/// when there is one); returns the sitemap shards' names and the index URLs for robots.txt.
pub fn render<S: FileSink>(
    harvested: &Harvested,
    job: &Job,
    sink: &mut S,
) -> Result<(Vec<String>, Vec<Url>), PipelineError> {
    let published = &harvested.published;
    if published.is_empty() {
        return Err(RenderError::Empty.into());
    }
    let ext = if job.gzip { "xml.gz" } else { "xml" };
    let mut entries: Vec<(String, Option<crate::datestamp::Datestamp>)> = Vec::new();
    let mut names = Vec::new();
    let sink_err = |e: S::Error| PipelineError::Sink(Box::new(e));
    render_shards(published.iter(), job.limits, |shard| {
        let name = format!("sitemap-{}.{ext}", names.len() + 1);
        sink.put_shard(&name, &shard.bytes).map_err(sink_err)?;
        entries.push((join(&job.public_url, &name).to_string(), shard.newest));
        names.push(name);
        Ok::<_, PipelineError>(())
    })?;
    let index = render_index(entries.iter().map(|(loc, d)| (loc.as_str(), *d)))?;
    sink.put(INDEX_NAME, &index).map_err(sink_err)?;
    let mut indexes = vec![join(&job.public_url, INDEX_NAME)];
    if let Some(signposts) = harvested.signposts.as_ref().filter(|s| !s.is_empty()) {
        let mut entries: Vec<(String, Option<crate::datestamp::Datestamp>)> = Vec::new();
        render_signmaps(signposts.entries(), job.limits, |shard| {
            let name = format!("signmap-{}.xml", entries.len() + 1);
            sink.put_shard(&name, &shard.bytes).map_err(sink_err)?;
            entries.push((join(&job.public_url, &name).to_string(), shard.newest));
            Ok::<_, PipelineError>(())
        })?;
        let index = render_index(entries.iter().map(|(loc, d)| (loc.as_str(), *d)))?;
        sink.put(SIGNMAP_INDEX_NAME, &index).map_err(sink_err)?;
        indexes.push(join(&job.public_url, SIGNMAP_INDEX_NAME));
    }
    sink.put(
        "robots.txt",
        render_robots(indexes.iter().map(Url::as_str)).as_bytes(),
    )
    .map_err(sink_err)?;
    Ok((names, indexes))
}

/// Gzips a file deterministically (no name, zero mtime), so equal input gives equal bytes.
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::with_capacity(bytes.len() / 8), Compression::new(6));
    encoder
        .write_all(bytes)
        .expect("writing to memory cannot fail");
    encoder.finish().expect("writing to memory cannot fail")
}

fn join(base: &Url, name: &str) -> Url {
    base.join(name)
        .expect("a file name joins onto a directory URL")
}

/// Formats a duration for summaries.
pub fn human_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 60.0 {
        format!("{s:.1} s")
    } else {
        format!("{}m{:02}s", d.as_secs() / 60, d.as_secs() % 60)
    }
}
