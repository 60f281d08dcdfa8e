//! `oai-bridge export`: one harvest into a folder for static hosting, swapped in atomically, or
//! into a bucket of object storage, uploaded in an order that keeps readers consistent
//! ([`crate::bucket`]).

use std::borrow::Cow;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use oai_pmh::{Client, HarvestSettings};

use crate::bucket::{Bucket, PublishSettings, Upload, Uploaded, files_of};
use crate::classify::Drop;
use crate::engine::{self, Seen, Stored};
use crate::error::Error;
use crate::incremental::{Policy, RunSummary};
use crate::patch::{PublishedFile, ReadShard};
use crate::pipeline::{Built, Job, SpillDir, human_duration};
use crate::progress::Progress;
use crate::publish::{Output, Staging};
use crate::store::{self, Store, StoreLocation};
use crate::summary::Summary;

/// Everything an export needs.
#[derive(Clone, Debug)]
pub struct ExportOptions {
    /// What to build.
    pub job: Job,
    /// How to treat the upstream.
    pub harvest: HarvestSettings,
    /// The folder or bucket to write.
    pub out: Output,
    /// How files are published to a bucket (unused for a folder).
    pub publish: PublishSettings,
    /// Show a live progress line when stderr is a terminal.
    pub progress: bool,
    /// Harvest through the store in this folder, incrementally (`--state`).
    pub state: Option<PathBuf>,
    /// Harvest through this store instead, incrementally: a repository's store in PostgreSQL
    /// (`--state-url`). `state`, if given too, then only holds the files staged for a bucket.
    pub state_db: Option<StoreLocation>,
    /// How the store is used.
    pub policy: Policy,
}

/// What an export did.
#[derive(Clone, Debug)]
pub struct ExportSummary {
    /// The generation written.
    pub built: Built,
    /// Bytes written.
    pub bytes: u64,
    /// What went up to the bucket, for an export to one.
    pub uploaded: Option<Uploaded>,
    /// Wall time.
    pub elapsed: Duration,
    /// The folder or bucket written.
    pub out: Output,
    /// What the harvest did to the store, with `--state`.
    pub run: Option<RunSummary>,
}

/// What an export's target gives back on commit.
struct Written {
    /// Bytes written (locally: into the folder, or staged for the bucket).
    bytes: u64,
    /// What went up to the bucket.
    uploaded: Option<Uploaded>,
}

/// The export's target: a staging folder beside `out`, swapped in on commit.
struct Folder<'a> {
    out: &'a Path,
}

impl engine::Target for Folder<'_> {
    type Sink = Staging;
    type Committed = Written;

    fn place(&self) -> String {
        self.out.display().to_string()
    }

    fn published(&self) -> Option<ReadShard> {
        let out = self.out.to_owned();
        Some(Box::new(move |name| {
            Some(PublishedFile::Path(out.join(name)))
        }))
    }

    fn stage(&mut self) -> Result<Staging, Error> {
        Ok(Staging::new(self.out)?)
    }

    async fn commit(
        &mut self,
        staging: Staging,
        _: &Built,
        _: Option<crate::changes::Changes>,
        _: Option<&RunSummary>,
        _: Duration,
    ) -> Result<Written, Error> {
        let bytes = staging.bytes();
        staging.commit()?;
        Ok(Written {
            bytes,
            uploaded: None,
        })
    }
}

/// The export's target in a bucket: a staging folder in `scratch`, uploaded on commit.
struct ToBucket<'a> {
    bucket: &'a Bucket,
    place: String,
    scratch: &'a Path,
    settings: &'a PublishSettings,
}

impl engine::Target for ToBucket<'_> {
    type Sink = Upload;
    type Committed = Written;

    fn place(&self) -> String {
        self.place.clone()
    }

    /// The bucket's shards are not read back: every export through a store renders in full
    /// (on the store's stable layout, so unchanged shards keep their bytes and are not
    /// uploaded again).
    fn published(&self) -> Option<ReadShard> {
        None
    }

    fn stage(&mut self) -> Result<Upload, Error> {
        Ok(Upload {
            staging: Staging::new(&self.scratch.join("generation"))?,
            staged: Default::default(),
        })
    }

    async fn commit(
        &mut self,
        upload: Upload,
        _: &Built,
        _: Option<crate::changes::Changes>,
        _: Option<&RunSummary>,
        _: Duration,
    ) -> Result<Written, Error> {
        let uploaded = (self.bucket)
            .publish(
                &files_of(upload.staging.path(), &upload.staged)?,
                self.settings,
                std::time::SystemTime::now(),
            )
            .await?;
        Ok(Written {
            bytes: upload.staging.bytes(),
            uploaded: Some(uploaded),
        })
    }
}

/// Harvests, renders into a staging folder beside `out` and swaps it in, or uploads it to the
/// bucket `out`. On any error but [`Error::Unrecorded`] `out` is as it was (a bucket:
/// every file its indexes name is there, as it was).
pub async fn export(options: &ExportOptions) -> Result<ExportSummary, Error> {
    let started = Instant::now();
    let client = Client::new(options.harvest.clone())?;
    let mut store = match (&options.state_db, &options.state) {
        (Some(location), _) => Some(Store::open_at(location).map_err(Error::from)?),
        (None, Some(dir)) => {
            std::fs::create_dir_all(dir).map_err(Error::io("cannot use the state folder", dir))?;
            Some(Store::open(&dir.join(store::FILE)).map_err(Error::from)?)
        }
        (None, None) => None,
    };
    let stored = store.as_mut().map(|store| Stored {
        store,
        policy: &options.policy,
    });
    let progress = &mut Progress::new(options.progress);
    let outcome = match &options.out {
        Output::Folder(out) => {
            // Fail on an unusable output folder before spending a harvest on it.
            drop(Staging::new(out)?);
            // The profiles' shard files are written beside the output folder, where the
            // staging folder is: linked into it, they are written once.
            let job = with_spill_dir(&options.job, crate::publish::beside(out));
            let mut folder = Folder { out };
            engine::run(
                &job,
                &client,
                stored,
                &mut folder,
                progress,
                &mut Seen::default(),
            )
            .await?
        }
        Output::Bucket(url) => {
            let bucket = Bucket::open(url)?;
            // Fail on an unreachable bucket (credentials, a missing bucket) before the harvest.
            bucket.check().await?;
            // The files are staged in the state folder, or else the temporary folder: a large
            // repository's generation takes gigabytes, which a tmpfs would take from memory.
            let parent = options.state.clone().unwrap_or_else(std::env::temp_dir);
            let scratch = tempfile::Builder::new()
                .prefix(".oai-bridge-upload-")
                .tempdir_in(&parent)
                .map_err(|source| Error::Io {
                    action: "cannot create a staging folder in",
                    path: parent.clone(),
                    source: source.into(),
                })?;
            let job = with_spill_dir(&options.job, scratch.path().to_owned());
            let mut target = ToBucket {
                bucket: &bucket,
                place: url.to_string(),
                scratch: scratch.path(),
                settings: &options.publish,
            };
            engine::run(
                &job,
                &client,
                stored,
                &mut target,
                progress,
                &mut Seen::default(),
            )
            .await?
        }
    };
    if let Some(source) = outcome.unrecorded {
        return Err(Error::Unrecorded {
            out: options.out.to_string(),
            source: Box::new(source),
        });
    }
    Ok(ExportSummary {
        built: outcome.built,
        bytes: outcome.committed.bytes,
        uploaded: outcome.committed.uploaded,
        elapsed: started.elapsed(),
        out: options.out.clone(),
        run: outcome.run,
    })
}

/// `job`, its temporary files (the profiles' shard files, the inventory's runs) written in
/// `parent` unless the job says where: the profiles' shard files can be linked into the
/// staging folder from there. The job's memory budget stays.
fn with_spill_dir(job: &Job, parent: PathBuf) -> Job {
    let spill_dir = match &job.spill_dir {
        Some(dir) if dir.parent.is_some() => dir.clone(),
        given => SpillDir {
            parent: Some(parent),
            linked: true,
            memory: given
                .as_ref()
                .map_or(crate::spill::DEFAULT_MEMORY_BUDGET, |d| d.memory),
            account: None,
        },
    };
    Job {
        spill_dir: Some(spill_dir),
        ..job.clone()
    }
}

impl ExportSummary {
    /// The summary as JSON: the fields of a gateway generation's [`Summary`], with the folder
    /// and the bytes written.
    pub fn json(&self, job: &Job) -> String {
        #[derive(serde::Serialize)]
        struct Exported {
            out: String,
            bytes_written: u64,
            #[serde(skip_serializing_if = "Option::is_none")]
            uploaded: Option<Uploaded>,
            #[serde(flatten)]
            summary: Summary,
        }
        let summary = Summary::new(
            &job.request.source,
            &self.built,
            self.run.as_ref(),
            self.elapsed,
            &job.settings_key(),
        );
        let exported = Exported {
            out: self.out.to_string(),
            bytes_written: self.bytes,
            uploaded: self.uploaded,
            summary,
        };
        serde_json::to_string_pretty(&exported).expect("the summary serialises")
    }

    /// The summary printed at the end of an export: a line naming it, a column of labelled
    /// values (each section's lines shown only where they have something to say), then notes
    /// on what the operator should change.
    pub fn render(&self, job: &Job) -> String {
        let mut out = format!("Exported {} to {}\n", job.request.source, self.out);
        let lines = [
            self.source_lines(),
            self.harvest_lines(),
            self.output_lines(),
            self.drop_lines(),
            self.quirk_lines(),
            self.profile_lines(),
            vec![Line::field("sitemap index", &self.built.index_url)],
        ];
        for line in lines.iter().flatten() {
            let _ = writeln!(out, "{line}");
        }
        self.notes(job, &mut out);
        out
    }

    /// The repository and how its landing pages are found.
    fn source_lines(&self) -> Vec<Line> {
        let b = &self.built;
        let name = &b.report.identify.repository_name;
        vec![
            Line::field(
                "repository",
                if name.is_empty() { "(unnamed)" } else { name },
            ),
            Line::field("platform", b.platform.detected()),
            Line::field("landing pages", b.platform.rule_text()),
            Line::field("scope", b.platform.scope()),
            Line::field("pages", b.report.pages),
        ]
    }

    /// What the harvest brought: through a store, what it did to the store; without, the
    /// records it read.
    fn harvest_lines(&self) -> Vec<Line> {
        let Some(run) = &self.run else {
            let s = &self.built.stats;
            return vec![Line::field(
                "records seen",
                format!(
                    "{} ({} distinct, {} deleted)",
                    s.records_seen, s.records, s.deleted
                ),
            )];
        };
        let resumed = if run.resumed > 0 {
            format!(", continued after {} interruption(s)", run.resumed)
        } else {
            String::new()
        };
        let removed = if run.removed > 0 {
            format!(" ({} removed: not in the full harvest)", run.removed)
        } else {
            String::new()
        };
        let mut lines = vec![Line::field(
            "harvest",
            format!(
                "{}{resumed}; the store holds {} live records and {} deleted{removed}",
                run.kind_text(),
                run.live,
                run.deleted,
            ),
        )];
        if let Some(short) = &run.short {
            let set = (short.set.as_ref())
                .map(|set| format!(" (set {set})"))
                .unwrap_or_default();
            lines.push(Line::field(
                "",
                format!(
                    "a list{set} ended after {} of the {} records it announced: nothing \
                     removed; the next harvest is a full one",
                    short.delivered, short.announced
                ),
            ));
        }
        if let Some(reason) = &run.full_reason {
            lines.push(Line::field("why full", reason));
        }
        // What this harvest brought; the store's records are counted above.
        lines.push(Line::field(
            "records seen",
            format!(
                "{} in this harvest, {} of them deleted",
                run.received, run.received_deleted
            ),
        ));
        lines
    }

    /// What was written, spilled and uploaded.
    fn output_lines(&self) -> Vec<Line> {
        let b = &self.built;
        let published = format!(
            "{} in {} shard(s); {} bytes written in all",
            b.stats.urls,
            b.shards.len(),
            self.bytes
        );
        let spilled = (b.spill_bytes > 0).then(|| {
            let what = format!(
                "{} bytes on disk at most (sorted runs past the memory budget, the profiles' \
                 records)",
                b.spill_bytes
            );
            Line::field("spilled", what)
        });
        let uploaded = self.uploaded.as_ref().map(|u| {
            let what = format!(
                "{} of {} files ({} of {} bytes; the rest were there, unchanged); {} deleted, \
                 {} kept until their grace period ends",
                u.uploaded, u.files, u.uploaded_bytes, u.bytes, u.deleted, u.retired
            );
            Line::field("uploaded", what)
        });
        [
            Some(Line::field("URLs published", published)),
            spilled,
            uploaded,
        ]
        .into_iter()
        .flatten()
        .collect()
    }

    /// The identifiers not published, by reason, each reason in words with a few examples
    /// (the status page shows the same).
    fn drop_lines(&self) -> Vec<Line> {
        let b = &self.built;
        let s = &b.stats;
        let reasons: Vec<Drop> = (Drop::ALL.iter().copied())
            .filter(|r| s.dropped(*r) > 0)
            .collect();
        let counts: Vec<String> = (reasons.iter())
            .map(|r| format!("{} {}", r.as_str(), s.dropped(*r)))
            .collect();
        let mut lines = vec![Line::field(
            "not published",
            if counts.is_empty() {
                "none".to_owned()
            } else {
                counts.join(", ")
            },
        )];
        if b.samples.is_none() && !reasons.is_empty() {
            lines.push(Line::under(
                "    ",
                "(no examples: the published sitemap was patched with the changed records \
                 only; a whole render shows them)",
            ));
        }
        for reason in reasons {
            let examples = (b.samples.as_ref())
                .map(|x| x.of(reason))
                .unwrap_or_default();
            lines.push(Line::under("    ", reason.explained()));
            if !examples.is_empty() {
                let shown: Vec<String> = (examples.iter())
                    .map(|e| match (&e.record, &e.value) {
                        (Some(r), Some(v)) => format!("{v} ({r})"),
                        (Some(one), None) | (None, Some(one)) => one.clone(),
                        (None, None) => String::new(),
                    })
                    .collect();
                lines.push(Line::under("      ", format!("e.g. {}", shown.join("; "))));
            }
        }
        lines
    }

    /// The quirks of the upstream that the harvest tolerated, if any, and the time it took.
    fn quirk_lines(&self) -> Vec<Line> {
        let q = &self.built.report.quirks;
        let quirks: Vec<String> = [
            (q.illegal_chars_removed > 0).then(|| {
                format!(
                    "{} characters illegal in XML removed",
                    q.illegal_chars_removed
                )
            }),
            (q.https_namespaces > 0).then(|| "https:// namespace spellings accepted".to_owned()),
            q.no_namespace
                .then(|| "responses without the OAI-PMH namespace accepted".to_owned()),
            q.leading_whitespace
                .then(|| "whitespace before the XML declaration skipped".to_owned()),
            (q.future_datestamps > 0).then(|| {
                format!(
                    "{} datestamps ahead of the clock ignored",
                    q.future_datestamps
                )
            }),
            (q.windows_1252_bytes > 0).then(|| {
                format!(
                    "{} bytes that are not UTF-8 read as Windows-1252",
                    q.windows_1252_bytes
                )
            }),
        ]
        .into_iter()
        .flatten()
        .collect();
        let tolerated = (!quirks.is_empty()).then(|| Line::field("tolerated", quirks.join("; ")));
        let elapsed = Line::field("elapsed", human_duration(self.elapsed));
        tolerated.into_iter().chain([elapsed]).collect()
    }

    /// What each profile beyond the sitemap published, and its index.
    fn profile_lines(&self) -> Vec<Line> {
        (self.built.profiles.iter())
            .flat_map(|p| p.report().export_lines())
            .map(|(label, what)| Line::field(label, what))
            .collect()
    }

    /// Notes after the summary, on a public URL that search engines or crawlers will not take
    /// as it is.
    fn notes(&self, job: &Job, out: &mut String) {
        let b = &self.built;
        if !b.platform.scope().is_under(&job.public_url) {
            // Every index whose files list the repository's pages: the sitemap, Signmap, OCX and
            // DiWoo ones (CDIF's list the JSON-LD beside them, on the public URL's host).
            let (these, them) = match b.indexes.len() {
                1 => ("this line", "it"),
                _ => ("these lines", "them"),
            };
            let _ = write!(
                out,
                "\nNote: the scope {} is not under the public URL {}. Search engines accept these sitemaps only \
                 through cross-submission: add {these} to the robots.txt of the repository host (the \
                 robots.txt written here holds {them} too):",
                b.platform.scope(),
                job.public_url
            );
            for url in &b.indexes {
                let _ = write!(out, "\n  Sitemap: {url}");
            }
            let _ = writeln!(out);
        }
        if crate::scope::is_loopback(&job.public_url) {
            let _ = writeln!(
                out,
                "\nNote: the public URL {} is a loopback address: the files name URLs no crawler \
                 can reach. Pass the address they will be served at (--public-url).",
                job.public_url
            );
        }
    }
}

/// A line of the export summary.
enum Line {
    /// A value after its label, the labels in a column of their own (an empty label: the value
    /// goes on from the line above).
    Field(Cow<'static, str>, String),
    /// Text on a line of its own, indented under the field above.
    Under(&'static str, Cow<'static, str>),
}

impl Line {
    fn field(label: impl Into<Cow<'static, str>>, value: impl std::fmt::Display) -> Self {
        Line::Field(label.into(), value.to_string())
    }

    fn under(indent: &'static str, text: impl Into<Cow<'static, str>>) -> Self {
        Line::Under(indent, text.into())
    }
}

impl std::fmt::Display for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Line::Field(label, value) => write!(f, "  {label:<15} {value}"),
            Line::Under(indent, text) => write!(f, "{indent}{text}"),
        }
    }
}
