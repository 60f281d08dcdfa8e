//! Publishing a generation to object storage (S3 and compatibles, Google Cloud Storage, Azure
//! Blob Storage, or a `file://` folder by the same protocol), through the `object_store` crate.
//!
//! A bucket has no atomic swap of many objects, so the order of the uploads keeps every reader
//! consistent instead:
//!
//! 1. the shards are named after their content (`sitemap-1-<hash>.xml`, [`Upload::listed_name`]):
//!    a new shard never overwrites one that the published index names, and an unchanged shard
//!    keeps its name and is not uploaded again;
//! 2. the documents (`cdif/<hash>.jsonld`) and the shards go up first, then the indexes, then
//!    `robots.txt`: until an index is replaced, every file it names is the one it named;
//! 3. a file that no index names any more is deleted only after a grace period
//!    (`publish_grace_secs`, a day by default), so a crawler that fetched the index before never gets a 404.
//!
//! What is published is kept in the bucket itself, in [`MANIFEST`]: every file's SHA-256, and
//! when each retired file was retired. It lives in the bucket rather than in a state store so
//! that whichever process publishes next (another machine's export, another gateway) compares
//! with what the bucket holds. A new file is recorded as retired before it is uploaded, so an
//! upload cut short (a crash, `kill -9`) leaves nothing that a later publish would not delete.
//!
//! A gateway of a fleet publishes under a fenced lease ([`Fenced`]): the manifest carries the
//! lease's token, a publish never writes over a manifest of a newer token, and it checks that it
//! still holds its lease before the files of fixed names (indexes, robots.txt, the manifest) go
//! up. The manifest itself is written only if nobody wrote it since this publish read or wrote
//! it (a conditional write: `If-Match` on S3 and Azure, the object's generation on GCS); a
//! `file://` folder has no conditional write, and relies on the checks alone.
//!
//! Credentials and endpoints come from the environment, as each service's tools read them
//! (`AWS_*`, `GOOGLE_*`, `AZURE_*`); no builder, store or option is ever logged or printed,
//! since their `Debug` shows the secrets.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io::{self, Read as _};
use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures_util::{StreamExt as _, TryStreamExt as _};
use object_store::path::Path;
use object_store::{
    Attribute, Attributes, ObjectStore, ObjectStoreExt as _, ObjectStoreScheme, PutMode,
    PutOptions, PutPayload, UpdateVersion,
};
use sha2::{Digest as _, Sha256};

use crate::error::Error;
use crate::pipeline::FileSink;
use crate::publish::{BucketUrl, Staging};
pub(crate) use oai_bridge_files::profiles::content_name;

/// The object that records what is published, under the bucket URL's prefix.
pub const MANIFEST: &str = ".oai-bridge/published.json";

/// Uploads at once: object stores answer each request in tens of milliseconds, so one at a time
/// would leave the line idle; more than this gains little and costs memory (a file is read
/// whole before its upload).
const PARALLEL_UPLOADS: usize = 8;

/// An opened bucket.
pub(crate) struct Bucket {
    store: Arc<dyn ObjectStore>,
    prefix: Path,
    url: BucketUrl,
    /// Whether the store keeps a content type and cache control with an object (the local
    /// file system does not, and refuses them).
    attributes: bool,
}

impl fmt::Debug for Bucket {
    // Only the URL: a store's own Debug shows its credentials.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bucket").field("url", &self.url).finish()
    }
}

impl Bucket {
    /// Opens `url` with credentials and endpoint from the environment. Makes no request.
    pub(crate) fn open(url: &BucketUrl) -> Result<Self, Error> {
        let open = |source: object_store::Error| Error::BucketOpen {
            url: url.to_string(),
            source,
        };
        let (scheme, prefix) =
            ObjectStoreScheme::parse(url.as_url()).map_err(|e| open(e.into()))?;
        let raw = url.as_url().as_str();
        let store: Arc<dyn ObjectStore> = match scheme {
            ObjectStoreScheme::AmazonS3 => Arc::new(
                object_store::aws::AmazonS3Builder::from_env()
                    .with_url(raw)
                    .build()
                    .map_err(open)?,
            ),
            ObjectStoreScheme::GoogleCloudStorage => Arc::new(
                object_store::gcp::GoogleCloudStorageBuilder::from_env()
                    .with_url(raw)
                    .build()
                    .map_err(open)?,
            ),
            ObjectStoreScheme::MicrosoftAzure => Arc::new(
                object_store::azure::MicrosoftAzureBuilder::from_env()
                    .with_url(raw)
                    .build()
                    .map_err(open)?,
            ),
            ObjectStoreScheme::Local => Arc::new(object_store::local::LocalFileSystem::new()),
            _ => {
                return Err(open(object_store::Error::NotSupported {
                    source: format!(
                        "{} is not object storage oai-bridge publishes to",
                        url.as_url().scheme()
                    )
                    .into(),
                }));
            }
        };
        let attributes = scheme != ObjectStoreScheme::Local;
        Ok(Self::new(store, prefix, url.clone(), attributes))
    }

    /// A bucket on `store`, under `prefix`.
    pub(crate) fn new(
        store: Arc<dyn ObjectStore>,
        prefix: Path,
        url: BucketUrl,
        attributes: bool,
    ) -> Self {
        Self {
            store,
            prefix,
            url,
            attributes,
        }
    }

    /// The object of the file `name` (which may hold folders: `cdif/<hash>.jsonld`).
    fn key(&self, name: &str) -> Path {
        name.split('/')
            .fold(self.prefix.clone(), |key, part| key.clone().join(part))
    }

    /// The URL of the file `name`, for messages.
    fn url_of(&self, name: &str) -> String {
        let base = self.url.as_url().as_str();
        format!("{}/{name}", base.trim_end_matches('/'))
    }

    fn request(
        &self,
        action: &'static str,
        name: &str,
    ) -> impl FnOnce(object_store::Error) -> Error {
        let url = self.url_of(name);
        move |source| Error::BucketRequest {
            action,
            url,
            source,
        }
    }

    /// Lists the prefix and reads the manifest: fails early on a bucket that does not exist,
    /// credentials it refuses, or a manifest that cannot be read (a missing object and a
    /// missing bucket answer a read alike; a list tells them apart).
    pub(crate) async fn check(&self) -> Result<(), Error> {
        (self.store)
            .list_with_delimiter(Some(&self.prefix))
            .await
            .map_err(self.request("list", ""))?;
        self.manifest().await.map(drop)
    }

    /// What the bucket says is published; empty when nothing is.
    async fn manifest(&self) -> Result<Manifest, Error> {
        Ok(self.versioned_manifest().await?.0)
    }

    /// What the bucket says is published, and the version of the object saying it (`None`
    /// when there is none).
    async fn versioned_manifest(&self) -> Result<(Manifest, Option<UpdateVersion>), Error> {
        let key = self.key(MANIFEST);
        let (bytes, version) = match self.store.get(&key).await {
            Ok(got) => {
                let version = UpdateVersion {
                    e_tag: got.meta.e_tag.clone(),
                    version: got.meta.version.clone(),
                };
                let bytes = got.bytes().await.map_err(self.request("read", MANIFEST))?;
                (bytes, Some(version))
            }
            Err(object_store::Error::NotFound { .. }) => return Ok((Manifest::default(), None)),
            Err(e) => return Err(self.request("read", MANIFEST)(e)),
        };
        let manifest: Manifest =
            serde_json::from_slice(&bytes).map_err(|e| Error::BucketManifest {
                url: self.url_of(MANIFEST),
                reason: e.to_string(),
            })?;
        if manifest.format != Manifest::FORMAT {
            return Err(Error::BucketManifest {
                url: self.url_of(MANIFEST),
                reason: format!(
                    "format {} (this oai-bridge writes {})",
                    manifest.format,
                    Manifest::FORMAT
                ),
            });
        }
        Ok((manifest, version))
    }

    async fn write_manifest(&self, manifest: &Manifest) -> Result<(), Error> {
        self.write_manifest_over(manifest, None).await.map(drop)
    }

    /// Writes `manifest`; with `over` (a fenced publish), only over the manifest of that
    /// version (`Some(None)`: only where there is none), a conflict refused as another holder's
    /// write. The version written, when the store tells it and writes conditionally.
    async fn write_manifest_over(
        &self,
        manifest: &Manifest,
        over: Option<Option<&UpdateVersion>>,
    ) -> Result<Option<UpdateVersion>, Error> {
        let bytes =
            PutPayload::from(serde_json::to_vec(manifest).expect("the manifest serialises"));
        let key = self.key(MANIFEST);
        let mut options = self.options("application/json", "no-store");
        options.mode = match over {
            None => PutMode::Overwrite,
            Some(None) => PutMode::Create,
            Some(Some(version)) => PutMode::Update(version.clone()),
        };
        let conditional = options.mode != PutMode::Overwrite;
        let written = match self.store.put_opts(&key, bytes.clone(), options).await {
            Ok(written) => written,
            Err(
                object_store::Error::Precondition { .. }
                | object_store::Error::AlreadyExists { .. },
            ) => {
                return Err(self.superseded(
                    "another publisher wrote the bucket's manifest during this publish",
                ));
            }
            // A store without conditional writes (a `file://` folder): the lease's checks
            // alone keep an older holder out.
            Err(object_store::Error::NotImplemented { .. }) if conditional => {
                let options = self.options("application/json", "no-store");
                self.store
                    .put_opts(&key, bytes, options)
                    .await
                    .map_err(self.request("write", MANIFEST))?;
                return Ok(None);
            }
            Err(e) => return Err(self.request("write", MANIFEST)(e)),
        };
        let known = written.e_tag.is_some() || written.version.is_some();
        Ok((conditional && known).then_some(UpdateVersion {
            e_tag: written.e_tag,
            version: written.version,
        }))
    }

    fn superseded(&self, reason: &str) -> Error {
        Error::Superseded {
            url: self.url.to_string(),
            reason: reason.to_owned(),
        }
    }

    /// Before a fenced publish writes a file of a fixed name: the lease still held, and the
    /// bucket's manifest still the one this publish wrote (`ours`), or at least of no newer
    /// token when the store gives no version.
    async fn still_ours(
        &self,
        fenced: &Fenced<'_>,
        ours: Option<&UpdateVersion>,
    ) -> Result<(), Error> {
        (fenced.still_held)()
            .await
            .map_err(|reason| self.superseded(&reason))?;
        let (now, version) = self.versioned_manifest().await?;
        if let Some(newer) = now.fence.filter(|f| *f > fenced.token) {
            return Err(self.superseded(&format!(
                "lost the lease: the bucket's manifest holds fence {newer}, newer than this publish's {}",
                fenced.token
            )));
        }
        if let (Some(ours), Some(now)) = (ours, version)
            && (ours.e_tag.is_some() && ours.e_tag != now.e_tag
                || ours.version.is_some() && ours.version != now.version)
        {
            return Err(self
                .superseded("another publisher wrote the bucket's manifest during this publish"));
        }
        Ok(())
    }

    fn options(&self, content_type: &'static str, cache_control: &str) -> PutOptions {
        let mut attributes = Attributes::new();
        if self.attributes {
            attributes.insert(Attribute::ContentType, content_type.into());
            attributes.insert(Attribute::CacheControl, cache_control.to_owned().into());
        }
        PutOptions {
            attributes,
            ..PutOptions::default()
        }
    }

    /// Publishes `files` in the order that keeps readers consistent (by [`Rank`]); deletes
    /// the files retired at least `settings.grace` before `now`.
    pub(crate) async fn publish(
        &self,
        files: &[Staged],
        settings: &PublishSettings,
        now: SystemTime,
    ) -> Result<Uploaded, Error> {
        self.publish_fenced(files, settings, now, None).await
    }

    /// [`Bucket::publish`], under a fenced lease when `fenced` is given: refused
    /// ([`Error::Superseded`]) before anything of a fixed name is written when the bucket
    /// holds a newer token, the lease was lost, or another publisher wrote the manifest since.
    pub(crate) async fn publish_fenced(
        &self,
        files: &[Staged],
        settings: &PublishSettings,
        now: SystemTime,
        fenced: Option<&Fenced<'_>>,
    ) -> Result<Uploaded, Error> {
        let now = unix_secs(now);
        let (old, version) = self.versioned_manifest().await?;
        // An unfenced publish (an export) keeps the bucket's token: a fleet's holders still
        // compare with it.
        let fence = fenced.map(|f| f.token).or(old.fence);
        if let (Some(fenced), Some(newer)) = (fenced, old.fence)
            && newer > fenced.token
        {
            return Err(self.superseded(&format!(
                "lost the lease: the bucket's manifest holds fence {newer}, newer than this publish's {}",
                fenced.token
            )));
        }
        let mut report = Uploaded {
            files: files.len() as u64,
            ..Uploaded::default()
        };
        let changed: Vec<&Staged> = (files.iter())
            .filter(|f| old.files.get(&f.name) != Some(&f.hash))
            .collect();
        // A new file is retired until an index names it: an upload cut short leaves nothing
        // that the next publish would not delete in time.
        let mut pending = Manifest {
            format: Manifest::FORMAT,
            files: old.files.clone(),
            retired: old.retired.clone(),
            fence,
        };
        for file in changed.iter().filter(|f| !old.files.contains_key(&f.name)) {
            pending.retired.entry(file.name.clone()).or_insert(now);
        }
        // A fenced publish writes its token into the bucket first, conditionally: from then on
        // an older holder's publish stops at its next check.
        let mut ours = None;
        if fenced.is_some() {
            ours = (self.write_manifest_over(&pending, Some(version.as_ref()))).await?;
        } else if pending.retired != old.retired {
            self.write_manifest(&pending).await?;
        }
        for rank in [Rank::Document, Rank::Shard, Rank::Index, Rank::Robots] {
            if rank == Rank::Index
                && let Some(fenced) = fenced
            {
                self.still_ours(fenced, ours.as_ref()).await?;
            }
            let group = changed.iter().filter(|f| f.rank == rank);
            let bytes: Vec<u64> = futures_util::stream::iter(group)
                .map(|file| self.upload(file, settings))
                .buffer_unordered(PARALLEL_UPLOADS)
                .try_collect()
                .await?;
            report.uploaded += bytes.len() as u64;
            report.uploaded_bytes += bytes.iter().sum::<u64>();
        }
        report.bytes = files.iter().map(|f| f.size).sum();
        // Every file is up; what no index names any more is retired, and deleted once its
        // grace is over.
        let mut next = Manifest {
            format: Manifest::FORMAT,
            files: files
                .iter()
                .map(|f| (f.name.clone(), f.hash.clone()))
                .collect(),
            retired: pending.retired,
            fence,
        };
        for name in old.files.keys() {
            if !next.files.contains_key(name) {
                next.retired.entry(name.clone()).or_insert(now);
            }
        }
        next.retired
            .retain(|name, _| !next.files.contains_key(name));
        let grace = settings.grace.as_secs();
        let due: Vec<String> = (next.retired.iter())
            .filter(|(_, since)| now.saturating_sub(**since) >= grace)
            .map(|(name, _)| name.clone())
            .collect();
        // Deleted before the manifest forgets them: a publish cut short here deletes them again.
        futures_util::stream::iter(&due)
            .map(|name| self.delete(name.as_str()))
            .buffer_unordered(PARALLEL_UPLOADS)
            .try_collect::<Vec<()>>()
            .await?;
        for name in &due {
            next.retired.remove(name);
        }
        report.deleted = due.len() as u64;
        report.retired = next.retired.len() as u64;
        match fenced {
            Some(_) => {
                // Without a version to match, the checks before the indexes were the last word.
                let over = ours.as_ref().map(Some);
                if over.is_some() {
                    self.write_manifest_over(&next, over).await?;
                } else {
                    self.write_manifest(&next).await?;
                }
            }
            None => self.write_manifest(&next).await?,
        }
        Ok(report)
    }

    async fn upload(&self, file: &Staged, settings: &PublishSettings) -> Result<u64, Error> {
        let bytes = file.read().await?;
        let len = bytes.len() as u64;
        let cache_control = if file.rank == Rank::Shard {
            // Named after its content: never changes.
            "public, max-age=31536000, immutable".to_owned()
        } else {
            format!("public, max-age={}", settings.max_age.as_secs())
        };
        let options = self.options(content_type(&file.name), &cache_control);
        self.store
            .put_opts(&self.key(&file.name), PutPayload::from(bytes), options)
            .await
            .map_err(self.request("upload", &file.name))?;
        tracing::debug!(file = %file.name, bytes = len, "uploaded");
        Ok(len)
    }

    async fn delete(&self, name: &str) -> Result<(), Error> {
        match self.store.delete(&self.key(name)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.request("delete", name)(e)),
        }
    }

    /// Uploads `bytes` as the file `name` unless the bucket holds them already; whether it
    /// uploaded. For a single file of a fixed name outside any manifest (the root robots.txt).
    pub(crate) async fn put_if_changed(
        &self,
        name: &str,
        bytes: &[u8],
        settings: &PublishSettings,
    ) -> Result<bool, Error> {
        if self.read(name).await?.as_deref() == Some(bytes) {
            return Ok(false);
        }
        let cache_control = format!("public, max-age={}", settings.max_age.as_secs());
        let options = self.options(content_type(name), &cache_control);
        self.store
            .put_opts(&self.key(name), PutPayload::from(bytes.to_vec()), options)
            .await
            .map_err(self.request("upload", name))?;
        Ok(true)
    }

    /// Reads the file `name` from the bucket, with when it was written; `None` when there is
    /// none.
    pub(crate) async fn read_dated(
        &self,
        name: &str,
    ) -> Result<Option<(bytes::Bytes, std::time::SystemTime)>, Error> {
        match self.store.get(&self.key(name)).await {
            Ok(got) => {
                let modified = std::time::SystemTime::from(got.meta.last_modified);
                let bytes = got.bytes().await.map_err(self.request("read", name))?;
                Ok(Some((bytes, modified)))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.request("read", name)(e)),
        }
    }

    /// Reads the file `name` from the bucket; `None` when there is none.
    pub(crate) async fn read(&self, name: &str) -> Result<Option<bytes::Bytes>, Error> {
        Ok(self.read_dated(name).await?.map(|(bytes, _)| bytes))
    }
}

/// How files are published.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublishSettings {
    /// How long a file no index names any more stays.
    pub grace: Duration,
    /// `Cache-Control: max-age` of the files that keep their names (indexes, robots.txt,
    /// documents); the shards, named after their content, are cached for a year.
    pub max_age: Duration,
}

impl Default for PublishSettings {
    fn default() -> Self {
        Self {
            grace: crate::config::DEFAULT_PUBLISH_GRACE,
            max_age: crate::config::DEFAULT_MAX_AGE,
        }
    }
}

/// What a publish to a bucket did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Uploaded {
    /// Files in the generation.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Files uploaded (the rest were in the bucket already, unchanged).
    pub uploaded: u64,
    /// Bytes uploaded.
    pub uploaded_bytes: u64,
    /// Files deleted: retired longer than the grace period.
    pub deleted: u64,
    /// Files no index names any more, kept until their grace period ends.
    pub retired: u64,
}

/// What the bucket holds, as [`MANIFEST`].
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Manifest {
    format: u32,
    /// Every published file's SHA-256, in hex, by name.
    files: BTreeMap<String, String>,
    /// The files no index names (any more, or yet), with the Unix time since when.
    retired: BTreeMap<String, u64>,
    /// The fencing token of the fleet's lease the last publish held (absent before fenced
    /// leases, and for a bucket no fleet published to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fence: Option<i64>,
}

/// The lease a publish holds, in a fleet ([`crate::server::fleet`]): its token, and the check
/// that it still holds it (`Err`: why not, in words).
pub(crate) struct Fenced<'a> {
    /// The lease's fencing token.
    pub(crate) token: i64,
    /// Whether the lease is still this publisher's.
    pub(crate) still_held:
        Box<dyn Fn() -> futures_util::future::BoxFuture<'a, Result<(), String>> + Send + Sync + 'a>,
}

impl Manifest {
    const FORMAT: u32 = 1;
}

/// When a file goes up: what names a file goes up after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rank {
    /// A CDIF document, named in the shards.
    Document,
    /// A shard (or CDIF list), named after its content, named in an index.
    Shard,
    /// An index (or any other file of a fixed name), named in robots.txt.
    Index,
    /// robots.txt.
    Robots,
}

/// A file to publish: its name in the bucket, where its bytes are, and a hash of them.
#[derive(Debug)]
pub(crate) struct Staged {
    /// Its name under the bucket's prefix.
    pub name: String,
    /// The file holding its bytes.
    pub path: PathBuf,
    /// Where in the file they start (a document packed with others), and how many there are.
    pub range: Option<(u64, u64)>,
    /// Its length.
    pub size: u64,
    /// A hash of its bytes, in hex (the same bytes always give the same hash).
    pub hash: String,
    /// When it goes up.
    pub rank: Rank,
}

impl Staged {
    /// Reads its bytes.
    async fn read(&self) -> Result<Vec<u8>, Error> {
        use tokio::io::{AsyncReadExt as _, AsyncSeekExt as _};
        let local = |e: io::Error| Error::io("cannot read", &self.path)(e);
        let Some((offset, len)) = self.range else {
            return tokio::fs::read(&self.path).await.map_err(local);
        };
        let mut file = tokio::fs::File::open(&self.path).await.map_err(local)?;
        file.seek(io::SeekFrom::Start(offset))
            .await
            .map_err(local)?;
        let mut bytes = vec![0; len as usize];
        file.read_exact(&mut bytes).await.map_err(local)?;
        Ok(bytes)
    }
}

/// The files of `dir` (one folder level deep), with their hashes and ranks; `staged` names the
/// shards renamed after their content, with their SHA-256.
pub(crate) fn files_of(
    dir: &FsPath,
    staged: &HashMap<String, String>,
) -> Result<Vec<Staged>, Error> {
    let local = |path: &FsPath| {
        let path = path.to_owned();
        Error::io("cannot read", path)
    };
    let mut out = Vec::new();
    let mut folders = vec![(dir.to_owned(), String::new())];
    while let Some((folder, under)) = folders.pop() {
        for entry in std::fs::read_dir(&folder).map_err(local(&folder))? {
            let entry = entry.map_err(local(&folder))?;
            let path = entry.path();
            let name = format!("{under}{}", entry.file_name().to_string_lossy());
            let meta = entry.metadata().map_err(local(&path))?;
            if meta.is_dir() {
                folders.push((path, format!("{name}/")));
                continue;
            }
            let (hash, rank) = match staged.get(&name) {
                Some(hash) => (hash.clone(), Rank::Shard),
                None => {
                    let rank = if name == "robots.txt" {
                        Rank::Robots
                    } else if name.contains('/') {
                        Rank::Document
                    } else {
                        Rank::Index
                    };
                    (sha256_of(&path).map_err(local(&path))?, rank)
                }
            };
            out.push(Staged {
                name,
                path,
                range: None,
                size: meta.len(),
                hash,
                rank,
            });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The SHA-256 of the file at `path`, in hex.
fn sha256_of(path: &FsPath) -> io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0; 1 << 16];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

/// The SHA-256 of `bytes`, in hex.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// The `Content-Type` a file is published with, as the gateway serves it.
fn content_type(name: &str) -> &'static str {
    if name == "robots.txt" {
        "text/plain; charset=utf-8"
    } else if name.ends_with(".gz") {
        "application/gzip"
    } else if name.starts_with("cdif-list-") && name.ends_with(".jsonld") {
        crate::profiles::cdif::LIST_CONTENT_TYPE
    } else if name.ends_with(".jsonld") {
        crate::profiles::cdif::CONTENT_TYPE
    } else {
        "application/xml; charset=utf-8"
    }
}

fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The sink of an export to a bucket: a local staging folder whose shards are renamed after
/// their content as they are listed; [`Bucket::publish`] then uploads the folder.
#[derive(Debug)]
pub(crate) struct Upload {
    /// The staging folder.
    pub staging: Staging,
    /// The shards named after their content, with their SHA-256.
    pub staged: HashMap<String, String>,
}

impl FileSink for Upload {
    type Error = Error;

    /// An export to a bucket is never patched (its target reads no published shard).
    fn keeps_ledger(&self) -> bool {
        false
    }

    fn put(&mut self, name: &str, bytes: &[u8]) -> Result<(), Error> {
        Ok(self.staging.write(name, bytes)?)
    }

    fn link_shard(&mut self, name: &str, path: &FsPath) -> bool {
        self.staging.link(name, path)
    }

    fn listed_name(&mut self, name: String) -> Result<String, Error> {
        let path = self.staging.path().join(&name);
        let io = |action| Error::io(action, path.clone());
        let sha256 = sha256_of(&path).map_err(io("cannot read"))?;
        let renamed = content_name(&name, &sha256);
        std::fs::rename(&path, self.staging.path().join(&renamed)).map_err(io("cannot rename"))?;
        self.staged.insert(renamed.clone(), sha256);
        Ok(renamed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;

    fn bucket() -> Bucket {
        Bucket::new(
            Arc::new(InMemory::new()),
            Path::from("site/repo"),
            BucketUrl::parse("s3://test/site/repo/").unwrap(),
            true,
        )
    }

    fn stage(files: &[(&str, &str)]) -> (tempfile::TempDir, HashMap<String, String>) {
        let dir = tempfile::tempdir().unwrap();
        let mut staged = HashMap::new();
        for (name, text) in files {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, text).unwrap();
            if name.starts_with("sitemap-") {
                staged.insert((*name).to_owned(), sha256_of(&path).unwrap());
            }
        }
        (dir, staged)
    }

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn content_names_keep_the_extension() {
        let hash = "0123456789abcdef0123";
        assert_eq!(
            content_name("sitemap-1.xml.gz", hash),
            "sitemap-1-0123456789abcdef.xml.gz"
        );
        assert_eq!(content_name("x", hash), "x-0123456789abcdef");
    }

    #[tokio::test]
    async fn an_unchanged_file_is_not_uploaded_again_and_a_retired_one_waits_for_its_grace() {
        let bucket = bucket();
        let settings = PublishSettings {
            grace: Duration::from_secs(100),
            ..PublishSettings::default()
        };
        let (one, staged) = stage(&[
            ("sitemap-a.xml", "a"),
            ("sitemap-b.xml", "b"),
            ("sitemap.xml", "index 1"),
            ("robots.txt", "robots"),
        ]);
        let first = bucket
            .publish(&files_of(one.path(), &staged).unwrap(), &settings, at(1000))
            .await
            .unwrap();
        assert_eq!((first.files, first.uploaded, first.deleted), (4, 4, 0));
        assert_eq!(
            &bucket.read("sitemap-b.xml").await.unwrap().unwrap()[..],
            b"b"
        );

        // b is gone, c is new, the index changed, robots.txt did not.
        let (two, staged) = stage(&[
            ("sitemap-a.xml", "a"),
            ("sitemap-c.xml", "c"),
            ("sitemap.xml", "index 2"),
            ("robots.txt", "robots"),
        ]);
        let second = bucket
            .publish(&files_of(two.path(), &staged).unwrap(), &settings, at(1050))
            .await
            .unwrap();
        assert_eq!((second.uploaded, second.uploaded_bytes), (2, 8));
        assert_eq!((second.deleted, second.retired), (0, 1));
        assert!(
            bucket.read("sitemap-b.xml").await.unwrap().is_some(),
            "within its grace"
        );

        let third = bucket
            .publish(&files_of(two.path(), &staged).unwrap(), &settings, at(1150))
            .await
            .unwrap();
        assert_eq!((third.uploaded, third.deleted, third.retired), (0, 1, 0));
        assert!(bucket.read("sitemap-b.xml").await.unwrap().is_none());
        assert_eq!(
            &bucket.read("sitemap.xml").await.unwrap().unwrap()[..],
            b"index 2"
        );
    }

    #[tokio::test]
    async fn a_file_uploaded_by_a_publish_cut_short_is_deleted_after_its_grace() {
        let bucket = bucket();
        let settings = PublishSettings {
            grace: Duration::from_secs(10),
            ..PublishSettings::default()
        };
        // A publish that wrote its pending manifest and one shard, then died.
        let (dead, staged) = stage(&[("sitemap-x.xml", "x"), ("sitemap.xml", "index x")]);
        let files = files_of(dead.path(), &staged).unwrap();
        let mut pending = Manifest {
            format: Manifest::FORMAT,
            ..Manifest::default()
        };
        pending.retired.insert("sitemap-x.xml".into(), 100);
        bucket.write_manifest(&pending).await.unwrap();
        let shard = files.iter().find(|f| f.name == "sitemap-x.xml").unwrap();
        bucket.upload(shard, &settings).await.unwrap();

        let (next, staged) = stage(&[("sitemap-y.xml", "y"), ("sitemap.xml", "index y")]);
        let done = bucket
            .publish(&files_of(next.path(), &staged).unwrap(), &settings, at(200))
            .await
            .unwrap();
        assert_eq!(done.deleted, 1);
        assert!(bucket.read("sitemap-x.xml").await.unwrap().is_none());
        assert!(bucket.read("sitemap-y.xml").await.unwrap().is_some());
    }

    /// A lease of token `token` that is held, or lost with `lost` as the reason.
    fn fenced(token: i64, lost: Option<&'static str>) -> Fenced<'static> {
        Fenced {
            token,
            still_held: Box::new(move || {
                Box::pin(async move { lost.map_or(Ok(()), |why| Err(why.to_owned())) })
            }),
        }
    }

    async fn fence_in_bucket(bucket: &Bucket) -> Option<i64> {
        bucket.manifest().await.unwrap().fence
    }

    #[tokio::test]
    async fn a_fenced_publish_records_its_token_and_an_older_one_changes_nothing() {
        let bucket = bucket();
        let settings = PublishSettings::default();
        let (one, staged) = stage(&[("sitemap-a.xml", "a"), ("sitemap.xml", "index a")]);
        let files = files_of(one.path(), &staged).unwrap();
        (bucket.publish_fenced(&files, &settings, at(10), Some(&fenced(42, None))))
            .await
            .unwrap();
        assert_eq!(fence_in_bucket(&bucket).await, Some(42));

        // A holder of an older token (it stalled past its lease) is refused before it writes.
        let (two, staged) = stage(&[("sitemap-b.xml", "b"), ("sitemap.xml", "index b")]);
        let files = files_of(two.path(), &staged).unwrap();
        let err = (bucket.publish_fenced(&files, &settings, at(20), Some(&fenced(41, None))))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::Superseded { reason, .. }
                if reason.contains("fence 42, newer than this publish's 41")),
            "{err}"
        );
        assert_eq!(
            &bucket.read("sitemap.xml").await.unwrap().unwrap()[..],
            b"index a"
        );
        assert!(bucket.read("sitemap-b.xml").await.unwrap().is_none());
        assert_eq!(fence_in_bucket(&bucket).await, Some(42));

        // An unfenced publish (an export) keeps the token the fleet compares with.
        (bucket.publish(&files, &settings, at(30))).await.unwrap();
        assert_eq!(fence_in_bucket(&bucket).await, Some(42));
    }

    #[tokio::test]
    async fn a_publish_whose_lease_was_lost_writes_no_file_of_a_fixed_name() {
        let bucket = bucket();
        let settings = PublishSettings::default();
        let (one, staged) = stage(&[("sitemap-a.xml", "a"), ("sitemap.xml", "index a")]);
        let files = files_of(one.path(), &staged).unwrap();
        (bucket.publish_fenced(&files, &settings, at(10), Some(&fenced(7, None))))
            .await
            .unwrap();
        let (two, staged) = stage(&[
            ("sitemap-b.xml", "b"),
            ("sitemap.xml", "index b"),
            ("robots.txt", "robots b"),
        ]);
        let files = files_of(two.path(), &staged).unwrap();
        let lost = "lost the lease: fence 8 was superseded by 9 (holder other)";
        let err = (bucket.publish_fenced(&files, &settings, at(20), Some(&fenced(8, Some(lost)))))
            .await
            .unwrap_err();
        assert!(err.to_string().contains(lost), "{err}");
        // Its shard is up (named after its content, no index names it), nothing else.
        assert!(bucket.read("sitemap-b.xml").await.unwrap().is_some());
        assert_eq!(
            &bucket.read("sitemap.xml").await.unwrap().unwrap()[..],
            b"index a"
        );
        assert!(bucket.read("robots.txt").await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_manifest_written_by_another_publisher_meanwhile_stops_a_fenced_publish() {
        let bucket = bucket();
        let settings = PublishSettings::default();
        let (one, staged) = stage(&[("sitemap-a.xml", "a"), ("sitemap.xml", "index a")]);
        let files = files_of(one.path(), &staged).unwrap();
        // Its check before the indexes finds the manifest rewritten by another publisher (of
        // the same token: what only the object's version tells apart).
        let other = Arc::new(Bucket::new(
            Arc::clone(&bucket.store),
            bucket.prefix.clone(),
            bucket.url.clone(),
            true,
        ));
        let rewritten = Fenced {
            token: 3,
            still_held: Box::new(move || {
                let other = Arc::clone(&other);
                Box::pin(async move {
                    let mut manifest = other.manifest().await.unwrap();
                    manifest.retired.insert("elsewhere.xml".into(), 1);
                    other.write_manifest(&manifest).await.unwrap();
                    Ok(())
                })
            }),
        };
        let err = (bucket.publish_fenced(&files, &settings, at(10), Some(&rewritten)))
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("another publisher wrote the bucket's manifest during this publish"),
            "{err}"
        );
        assert!(bucket.read("sitemap.xml").await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_manifest_of_another_format_is_an_error_naming_it() {
        let bucket = bucket();
        let key = bucket.key(MANIFEST);
        let body = PutPayload::from(r#"{"format":9,"files":{},"retired":{}}"#.as_bytes().to_vec());
        bucket.store.put(&key, body).await.unwrap();
        let (dir, staged) = stage(&[("robots.txt", "r")]);
        let err = bucket
            .publish(
                &files_of(dir.path(), &staged).unwrap(),
                &PublishSettings::default(),
                at(1),
            )
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("s3://test/site/repo/.oai-bridge/published.json")
                && text.contains("format 9"),
            "{text}"
        );
    }
}
