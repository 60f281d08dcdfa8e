//! Generations: the files one successful refresh of a repository produced. Each lives in its own
//! folder, `{state_dir}/{repo}/{id}/`, with a `manifest.json`; the file `{state_dir}/{repo}/current`
//! names the one being served. A generation is written into a staging folder, made durable, renamed
//! into place, and only then named in `current`, so a crash at any point leaves the previous one
//! intact and a restart serves it at once.
//!
//! Every `.xml` file is stored twice, plain and gzipped (`.xml.gz`), so neither `.xml.gz` routes
//! nor gzip negotiation compress anything per request. Each stored file carries a content hash,
//! which is its strong ETag, and the time its content last changed: a file whose bytes equal those
//! of the previous generation keeps its `Last-Modified` (H-03, H-04).

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use futures_util::StreamExt as _;
use futures_util::future::Either;
use hyper::header::HeaderValue;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::keyed::Pack;
use crate::bucket::{Rank, Staged};
use crate::error::Error;
use crate::pipeline::{self, FileSink};
use crate::profiles::{FileName, Profile};

/// Name of the file in a repository's state folder that names the current generation.
pub(crate) const CURRENT: &str = "current";
/// Name of the manifest in a generation folder.
pub(crate) const MANIFEST: &str = "manifest.json";
/// The packed metadata documents (CDIF JSON-LD) of a generation, one per record: too many to be
/// files of their own.
pub(crate) const DOCS_PACK: &str = "documents.pack";
/// Their index: sorted [`DocEntry`]s, `DOC_ENTRY_LEN` bytes each, little-endian.
pub(crate) const DOCS_INDEX: &str = "documents.index";
/// One packed document: its key (the 16 hex digits of its name, `cdif/<key>.jsonld`, as a
/// number), where it is in the pack, and its record's datestamp (`time`, `i64::MIN` for none).
pub(crate) type DocEntry = super::keyed::Entry;

/// The key of a document name, `cdif/<16 hex digits>.jsonld` ([`FileName::Document`]).
fn doc_key(name: &str) -> Option<u64> {
    match FileName::parse(name)? {
        FileName::Document(key) => Some(key),
        _ => None,
    }
}

/// Version of the manifest format; another version is not loaded.
const FORMAT: u32 = 1;

/// Process-wide counter for [`Generation::serial`].
static SERIAL: AtomicU64 = AtomicU64::new(1);

pub(crate) use crate::summary::Summary;

/// What a generation holds, as `manifest.json` records it; a gateway of a fleet records it in
/// the shared state too, and the others make the same generation from it ([`super::follow`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Manifest {
    format: u32,
    pub(crate) id: String,
    /// Seconds since the Unix epoch.
    created: u64,
    summary: Summary,
    pub(crate) files: Vec<StoredFile>,
    /// Packed documents ([`DOCS_PACK`]).
    #[serde(default)]
    pub(crate) documents: u64,
    /// Names the index lists a shard under, other than its own: a shard named after its
    /// content (`sitemap-1-<hash>.xml`, with a publish URL) -> the file it is (`sitemap-1.xml`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) aliases: BTreeMap<String, String>,
    /// The fencing token of the fleet's lease it was made under ([`super::fleet`]); absent
    /// without a fleet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) fence: Option<i64>,
    /// Its ResourceSync Change Lists, oldest first ([`super::resourcesync`]); absent when the
    /// repository keeps none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) changelists: Vec<ChangeListFile>,
}

/// One Change List of a generation (`changelist-{number}.xml`): the changes seen from `from`
/// (seconds since the Unix epoch) until `until` (the list is closed: full), or until now (the
/// last, which the next changes go into).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ChangeListFile {
    pub(crate) number: u32,
    pub(crate) from: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) until: Option<u64>,
    /// Its entries, and the bytes they take (within the sitemap limits).
    pub(crate) entries: u64,
    pub(crate) bytes: u64,
    /// When its first entry was seen, if it has one: it goes when that is older than the
    /// repository keeps changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) oldest: Option<u64>,
    /// When its last entry was seen, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) newest: Option<u64>,
}

/// What a repository's Change Lists hold, for the status page and the metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ChangeListStats {
    /// The lists.
    pub(crate) lists: usize,
    /// Their entries.
    pub(crate) entries: u64,
    /// The start of the period they cover (seconds since the Unix epoch).
    pub(crate) from: u64,
    /// When the newest change was seen, if any is kept.
    pub(crate) newest: Option<u64>,
}

impl Generation {
    /// What its Change Lists hold; `None` when it has none.
    pub(crate) fn changelist_stats(&self) -> Option<ChangeListStats> {
        let first = self.changelists.first()?;
        Some(ChangeListStats {
            lists: self.changelists.len(),
            entries: self.changelists.iter().map(|l| l.entries).sum(),
            from: first.from,
            newest: self.changelists.iter().filter_map(|l| l.newest).max(),
        })
    }
}

/// One file of a generation, as its manifest records it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct StoredFile {
    pub(crate) name: String,
    pub(crate) len: u64,
    /// The first 128 bits of the SHA-256 of the bytes, in hex.
    pub(crate) hash: String,
    /// Seconds since the Unix epoch.
    pub(crate) last_modified: u64,
}

/// One stored file, as the server answers it.
#[derive(Clone, Debug)]
pub struct FileMeta {
    /// File name within the generation, e.g. `sitemap-2.xml.gz`.
    pub name: String,
    /// Length in bytes.
    pub len: u64,
    /// Strong ETag, quoted, ready to send.
    pub etag: HeaderValue,
    /// When this content first appeared (whole seconds).
    pub last_modified: SystemTime,
    /// The same as an HTTP-date, ready to send.
    pub last_modified_header: HeaderValue,
}

/// A generation being served. Cheap to share (`Arc`); once replaced it is retired, and its folder
/// is removed when the last request still holding it finishes.
#[derive(Debug)]
pub struct Generation {
    /// Unique in this process; the cache key, so that bytes of two generations never mix.
    pub serial: u64,
    /// Folder name under the repository's state folder.
    pub id: String,
    /// The folder.
    pub dir: PathBuf,
    /// When it was built.
    pub created: SystemTime,
    /// What its harvest found.
    pub summary: Summary,
    /// The fencing token of the fleet's lease it was made under, if any.
    pub fence: Option<i64>,
    files: Vec<FileMeta>,
    by_name: HashMap<String, u32>,
    /// The packed documents' index ([`DOCS_INDEX`]).
    documents: super::keyed::Index,
    /// The index of the linksets made from its Signmap ([`super::linkset`]).
    linksets: super::keyed::Index,
    /// Its ResourceSync Change Lists, oldest first.
    pub(crate) changelists: Vec<ChangeListFile>,
    retired: AtomicBool,
}

impl Generation {
    fn from_manifest(dir: PathBuf, manifest: Manifest, documents: super::keyed::Index) -> Self {
        let files: Vec<FileMeta> = manifest
            .files
            .into_iter()
            .map(|f| {
                let last_modified = from_secs(f.last_modified);
                FileMeta {
                    etag: etag_header(&f.hash),
                    name: f.name,
                    len: f.len,
                    last_modified,
                    last_modified_header: date_header(last_modified),
                }
            })
            .collect();
        let linksets = super::linkset::open(
            &dir,
            (files.iter()).map(|f| (f.name.as_str(), f.last_modified)),
        );
        let mut by_name: HashMap<String, u32> = files
            .iter()
            .enumerate()
            .map(|(i, f)| (f.name.clone(), i as u32))
            .collect();
        for (alias, name) in manifest.aliases {
            if let Some(&i) = by_name.get(&name) {
                by_name.insert(alias, i);
            }
        }
        Self {
            serial: SERIAL.fetch_add(1, Ordering::Relaxed),
            id: manifest.id,
            dir,
            created: from_secs(manifest.created),
            summary: manifest.summary,
            fence: manifest.fence,
            files,
            by_name,
            documents,
            linksets,
            changelists: manifest.changelists,
            retired: AtomicBool::new(false),
        }
    }

    /// A file by name, with its index (part of the cache key).
    pub fn file(&self, name: &str) -> Option<(u32, &FileMeta)> {
        let index = *self.by_name.get(name)?;
        Some((index, &self.files[index as usize]))
    }

    /// All files, in the order they were written.
    pub fn files(&self) -> &[FileMeta] {
        &self.files
    }

    /// Where a file's bytes are.
    pub fn path(&self, meta: &FileMeta) -> PathBuf {
        self.dir.join(&meta.name)
    }

    /// The index of one of its packs. The linksets' is by [`super::linkset::key`] of the
    /// landing URL: more than one entry for a key but for a hash collision, so the caller
    /// compares the anchor.
    pub(crate) fn index(&self, pack: Pack) -> &super::keyed::Index {
        match pack {
            Pack::Documents => &self.documents,
            Pack::Linksets => &self.linksets,
        }
    }

    /// Where one of its packs is.
    pub(crate) fn pack_path(&self, pack: Pack) -> PathBuf {
        self.dir.join(match pack {
            Pack::Documents => DOCS_PACK,
            Pack::Linksets => super::linkset::PACK,
        })
    }

    /// A packed document by key, with its position in the index, read from the disk.
    pub(crate) fn document(&self, key: u64) -> io::Result<Option<(u64, DocEntry)>> {
        Ok(self.documents.find(key)?.into_iter().next())
    }

    /// Where the packed documents are.
    pub fn documents_path(&self) -> PathBuf {
        self.pack_path(Pack::Documents)
    }

    /// Where its plain sitemap shards are.
    pub(crate) fn sitemap_shards(&self) -> Vec<PathBuf> {
        let names = self.files.iter().map(|f| f.name.as_str());
        sitemap_shards(names).map(|n| self.dir.join(n)).collect()
    }

    /// Marks this generation as replaced: its folder goes when the last holder lets go.
    pub fn retire(&self) {
        self.retired.store(true, Ordering::Release);
    }

    /// Whether this generation has been replaced.
    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Acquire)
    }
}

/// The plain sitemap shards among a generation's file `names` (every shard is kept plain
/// beside its gzip; content names are aliases, not files).
fn sitemap_shards<'a>(names: impl Iterator<Item = &'a str>) -> impl Iterator<Item = &'a str> {
    names.filter(|n| {
        n.ends_with(".xml")
            && matches!(
                FileName::parse(n),
                Some(FileName::Shard(Profile::Sitemap, _))
            )
    })
}

impl Drop for Generation {
    /// Removes a retired generation's folder. The last holder may be a request handler or the
    /// refresh schedule, both on the serving runtime, and unlinking hundreds of megabytes takes
    /// long enough to stall requests: so it happens on a thread of its own.
    fn drop(&mut self) {
        if !self.retired.load(Ordering::Acquire) {
            return;
        }
        let dir = std::mem::take(&mut self.dir);
        let remove = move || {
            if let Err(e) = fs::remove_dir_all(&dir) {
                tracing::warn!(dir = %dir.display(), "cannot remove a retired generation: {e}");
            }
        };
        if let Err(e) = std::thread::Builder::new()
            .name("remove-generation".into())
            .spawn(remove)
        {
            tracing::warn!("cannot start a thread to remove a retired generation: {e}");
        }
    }
}

/// Reads a file of a generation whole.
pub(crate) fn read(path: &Path) -> Result<Vec<u8>, Error> {
    fs::read(path).map_err(Error::io("cannot read", path))
}

/// A file a generation should hold and does not.
pub(crate) fn missing(path: &Path) -> Error {
    Error::io("no such file in the generation:", path)(io::Error::from(io::ErrorKind::NotFound))
}

/// Loads the current generation of the repository whose state folder is `repo_dir`, and removes
/// whatever else is there (staging folders of interrupted refreshes, retired generations).
/// `Ok(None)` when there is none yet.
pub(crate) fn load_current(repo_dir: &Path) -> Result<Option<Generation>, Error> {
    let pointer = repo_dir.join(CURRENT);
    let id = match fs::read_to_string(&pointer) {
        Ok(id) => id.trim().to_owned(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            remove_all_but(repo_dir, None);
            return Ok(None);
        }
        Err(e) => return Err(Error::io("cannot read", &pointer)(e)),
    };
    if id.is_empty() || id.contains(['/', '\\']) || id.starts_with('.') {
        return Err(Error::io("not a generation id in", &pointer)(format!(
            "{id:?}"
        )));
    }
    let dir = repo_dir.join(&id);
    let manifest_path = dir.join(MANIFEST);
    let text = fs::read(&manifest_path).map_err(Error::io("cannot read", &manifest_path))?;
    let manifest: Manifest =
        serde_json::from_slice(&text).map_err(Error::io("cannot parse", &manifest_path))?;
    if manifest.format != FORMAT || manifest.id != id {
        return Err(Error::io("unexpected manifest", &manifest_path)(format!(
            "format {} id {:?}, expected format {FORMAT} id {id:?}",
            manifest.format, manifest.id
        )));
    }
    for f in &manifest.files {
        let path = dir.join(&f.name);
        let len = fs::metadata(&path)
            .map_err(Error::io("missing file of the generation:", &path))?
            .len();
        if len != f.len {
            return Err(Error::io("damaged file of the generation:", &path)(
                format!("{len} bytes, the manifest says {}", f.len),
            ));
        }
    }
    let documents = open_documents(&dir, manifest.documents)?;
    remove_all_but(repo_dir, Some(&id));
    Ok(Some(Generation::from_manifest(dir, manifest, documents)))
}

/// The document index in `dir`, which must have `count` entries (none: no index).
fn open_documents(dir: &Path, count: u64) -> Result<super::keyed::Index, Error> {
    if count == 0 {
        return Ok(super::keyed::Index::default());
    }
    let path = dir.join(DOCS_INDEX);
    let index =
        super::keyed::Index::open(&path).map_err(Error::io("damaged document index", &path))?;
    if index.len() != count {
        return Err(Error::io("damaged document index", &path)(format!(
            "{} entries, the manifest says {count}",
            index.len()
        )));
    }
    Ok(index)
}

/// The IndexNow outbox's folder in a repository's state (`server::indexnow`).
pub(crate) const OUTBOX: &str = "indexnow";

/// The folders of a repository's state that are no generation, kept by [`remove_all_but`]: the
/// IndexNow outbox, which must outlive a restart.
const KEPT_FOLDERS: &[&str] = &[OUTBOX];

/// Removes every folder in `repo_dir` except `keep` and the [`KEPT_FOLDERS`]; failures are only
/// logged.
fn remove_all_but(repo_dir: &Path, keep: Option<&str>) {
    let Ok(entries) = fs::read_dir(repo_dir) else {
        return;
    };
    for entry in entries.flatten() {
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        let kept = KEPT_FOLDERS.iter().any(|k| entry.file_name() == *k);
        if is_dir && !kept && keep.is_none_or(|k| entry.file_name() != k) {
            let path = entry.path();
            // A refresh's spill files, which a crash or a kill left: said, with their size.
            let spill = (entry.file_name().to_str())
                .is_some_and(|n| n.starts_with(crate::spill::PREFIX))
                .then(|| dir_bytes(&path));
            match fs::remove_dir_all(&path) {
                Ok(()) => match spill {
                    Some(bytes) => tracing::info!(
                        dir = %path.display(),
                        bytes,
                        "removed the spill files a stopped refresh left"
                    ),
                    None => tracing::debug!(dir = %path.display(), "removed a leftover folder"),
                },
                Err(e) => tracing::warn!(dir = %path.display(), "cannot remove: {e}"),
            }
        }
    }
}

/// The bytes of the files directly in `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    (fs::read_dir(dir).into_iter().flatten().flatten())
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}

/// Writes the next generation into a staging folder, then commits it. Dropped without
/// [`Writer::commit`], the staging folder is removed and nothing else changed.
#[derive(Debug)]
pub(crate) struct Writer<'a> {
    repo_dir: PathBuf,
    staging: tempfile::TempDir,
    previous: Option<&'a Generation>,
    now: u64,
    files: Vec<StoredFile>,
    /// The pack, written past the page cache like a large file, and its length so far.
    documents: Option<(crate::publish::DirectWriter, u64)>,
    /// Their index, sorted as the generation is finished.
    doc_index: Option<super::keyed::Sorter>,
    /// Room for writing large files directly, kept from file to file.
    aligned: Option<crate::publish::Chunk>,
    /// Whether the indexes list shards under names of their content ([`FileSink::listed_name`]),
    /// for a gateway that publishes to object storage.
    content_names: bool,
    /// Those names, both spellings (`.xml`, `.xml.gz`) -> the files they are.
    aliases: BTreeMap<String, String>,
    /// The names the indexes list, as they list them.
    listed: Vec<String>,
    /// The generation's id, when it is another gateway's ([`import`]).
    id: Option<String>,
    /// Its Change Lists, as written ([`Writer::put_changelists`]).
    changelists: Vec<ChangeListFile>,
    /// The fencing token of the lease it is made under.
    fence: Option<i64>,
}

impl<'a> Writer<'a> {
    /// Starts a generation for the repository whose state folder is `repo_dir`; `previous` is the
    /// one being served, whose `Last-Modified` times carry over to unchanged files.
    pub(crate) fn new(repo_dir: &Path, previous: Option<&'a Generation>) -> Result<Self, Error> {
        fs::create_dir_all(repo_dir).map_err(Error::io("cannot create", repo_dir))?;
        let staging = tempfile::Builder::new()
            .prefix(".staging-")
            .tempdir_in(repo_dir)
            .map_err(Error::io("cannot create a staging folder in", repo_dir))?;
        Ok(Self {
            repo_dir: repo_dir.to_owned(),
            staging,
            previous,
            now: secs(SystemTime::now()),
            files: Vec::new(),
            documents: None,
            doc_index: None,
            aligned: None,
            content_names: false,
            aliases: BTreeMap::new(),
            listed: Vec::new(),
            id: None,
            fence: None,
            changelists: Vec::new(),
        })
    }

    /// Records the fencing token of the fleet's lease the generation is made under.
    pub(crate) fn with_fence(mut self, fence: Option<i64>) -> Self {
        self.fence = fence;
        self
    }

    /// Lists shards under names of their content (`sitemap-1-<hash>.xml`), as a bucket needs
    /// them ([`crate::bucket`]); they are kept under their own names, which the patch of the
    /// next refresh reads, and served under both.
    pub(crate) fn with_content_names(mut self) -> Self {
        self.content_names = true;
        self
    }

    fn store(&mut self, name: &str, bytes: &[u8], changed: Option<u64>) -> Result<u64, Error> {
        let path = self.staging.path().join(name);
        // A shard is written past the page cache, as an export writes it: copying a gigabyte of
        // Signmap and OCX shards into the page cache was the largest part of a refresh's
        // system time.
        crate::publish::write_file(&path, bytes, &mut self.aligned, true)
            .map_err(Error::io("cannot write", &path))?;
        let hash = content_hash(bytes);
        let last_modified = changed.unwrap_or_else(|| {
            let etag = etag_header(&hash);
            match self.previous.and_then(|p| p.file(name)) {
                Some((_, old)) if old.etag == etag && old.len == bytes.len() as u64 => {
                    secs(old.last_modified)
                }
                _ => self.now,
            }
        });
        self.files.push(StoredFile {
            name: name.to_owned(),
            len: bytes.len() as u64,
            hash,
            last_modified,
        });
        Ok(last_modified)
    }

    /// Stores a file, and an `.xml` file's gzipped sibling; when it last changed, in seconds
    /// since the Unix epoch (now, unless the previous generation has the same bytes).
    fn put_file(&mut self, name: &str, bytes: &[u8]) -> Result<u64, Error> {
        if name.ends_with(".xml")
            && let Some(changed) = self.link_unchanged(name, bytes)?
        {
            return Ok(changed);
        }
        let changed = self.store(name, bytes, None)?;
        if name.ends_with(".xml") {
            // The sibling changes exactly when the plain file does (the gzip is deterministic).
            self.store(&format!("{name}.gz"), &pipeline::gzip(bytes), Some(changed))?;
        }
        Ok(changed)
    }

    /// Takes an `.xml` file identical to the previous generation's, with its gzip sibling, by
    /// hard-linking both from there: not written, synced or compressed again, and with the same
    /// validators; returns when it last changed. `None` when the file changed or cannot be
    /// linked (it is then written).
    fn link_unchanged(&mut self, name: &str, bytes: &[u8]) -> Result<Option<u64>, Error> {
        let Some(previous) = self.previous else {
            return Ok(None);
        };
        let Some((_, old)) = previous.file(name) else {
            return Ok(None);
        };
        if old.len != bytes.len() as u64 || old.etag != etag_header(&content_hash(bytes)) {
            return Ok(None);
        }
        let changed = secs(old.last_modified);
        Ok(self.link_previous(name)?.then_some(changed))
    }

    /// When the generation is made: its files' `Last-Modified` when new, and the time a refresh's
    /// changes are seen ([`crate::changes::Changes::seen`]).
    pub(crate) fn created(&self) -> SystemTime {
        from_secs(self.now)
    }

    /// Stores a file made by the gateway beside the harvest's ([`super::resourcesync`]): as
    /// [`Writer::put_file`], a plain `.xml` with its gzip, linked when unchanged.
    pub(crate) fn put_derived(&mut self, name: &str, bytes: &[u8]) -> Result<(), Error> {
        self.put_file(name, bytes).map(|_| ())
    }

    /// Takes the previous generation's file `name` (and its gzip sibling) as it is, by
    /// hard-linking, without reading it; `false` when there is none or it cannot be linked.
    pub(crate) fn link_previous(&mut self, name: &str) -> Result<bool, Error> {
        let Some(previous) = self.previous else {
            return Ok(false);
        };
        let gz = format!("{name}.gz");
        let (Some((_, old)), Some((_, old_gz))) = (previous.file(name), previous.file(&gz)) else {
            return Ok(false);
        };
        let mut linked: Vec<PathBuf> = Vec::new();
        for meta in [old, old_gz] {
            let to = self.staging.path().join(&meta.name);
            if let Err(e) = fs::hard_link(previous.dir.join(&meta.name), &to) {
                tracing::debug!(file = meta.name, "cannot link the file, writing it: {e}");
                for path in &linked {
                    fs::remove_file(path).map_err(Error::io("cannot remove", path))?;
                }
                return Ok(false);
            }
            linked.push(to);
        }
        for meta in [old, old_gz] {
            let etag = meta.etag.to_str().unwrap_or_default();
            self.files.push(StoredFile {
                name: meta.name.clone(),
                len: meta.len,
                hash: etag.trim_matches('"').to_owned(),
                last_modified: secs(meta.last_modified),
            });
        }
        Ok(true)
    }

    /// Records the generation's Change Lists, whose files are put already.
    pub(crate) fn set_changelists(&mut self, lists: Vec<ChangeListFile>) {
        self.changelists = lists;
    }

    /// Where the plain sitemap shards written so far are, in the staging folder.
    pub(crate) fn sitemap_shards(&self) -> Vec<PathBuf> {
        let names = self.files.iter().map(|f| f.name.as_str());
        sitemap_shards(names)
            .map(|n| self.staging.path().join(n))
            .collect()
    }

    /// Makes the generation durable and current; returns it, ready to serve.
    #[cfg(test)]
    pub(crate) fn commit(self, summary: Summary) -> Result<Generation, Error> {
        self.finish(summary)?.install()
    }

    /// Makes the generation durable in its staging folder, not yet in place: what is served
    /// and what a restart serves are as they were until [`Finished::install`].
    pub(crate) fn finish(mut self, summary: Summary) -> Result<Finished, Error> {
        let created = self.now;
        if let Some((out, _)) = self.documents.take() {
            let pack = self.staging.path().join(DOCS_PACK);
            out.finish()
                .and_then(|(file, _)| file.sync_all())
                .map_err(Error::io("cannot write", &pack))?;
        }
        let documents = match self.doc_index.take() {
            Some(sorter) => {
                let index = self.staging.path().join(DOCS_INDEX);
                sorter
                    .finish(&index)
                    .map_err(Error::io("cannot write", &index))?
            }
            None => 0,
        };
        // Unique within the folder: creation time, then the staging folder's random suffix.
        let suffix = self
            .staging
            .path()
            .file_name()
            .map(|n| {
                n.to_string_lossy()
                    .trim_start_matches(".staging-")
                    .to_owned()
            })
            .unwrap_or_default();
        let id = self.id.take().unwrap_or(format!("{created}-{suffix}"));
        let manifest = Manifest {
            format: FORMAT,
            id,
            created,
            summary,
            files: self.files,
            documents,
            aliases: self.aliases,
            fence: self.fence,
            changelists: self.changelists,
        };
        let manifest_path = self.staging.path().join(MANIFEST);
        let json = serde_json::to_vec_pretty(&manifest)
            .map_err(Error::io("cannot encode", &manifest_path))?;
        write_synced(&manifest_path, &json)?;
        sync_dir(self.staging.path())?;
        Ok(Finished {
            repo_dir: self.repo_dir,
            staging: self.staging,
            manifest,
            listed: self.listed,
        })
    }
}

/// A generation written and durable in its staging folder, not yet in place. Dropped without
/// [`Finished::install`], the staging folder is removed and nothing else changed.
#[derive(Debug)]
pub(crate) struct Finished {
    repo_dir: PathBuf,
    staging: tempfile::TempDir,
    manifest: Manifest,
    listed: Vec<String>,
}

impl Manifest {
    /// When the generation was made.
    pub(crate) fn created(&self) -> SystemTime {
        from_secs(self.created)
    }

    /// The fencing token of the lease it was made under.
    pub(crate) fn fence(&self) -> Option<i64> {
        self.fence
    }
}

impl Finished {
    /// The generation's manifest.
    #[cfg(test)]
    pub(crate) fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Puts the generation in place and names it current; returns it, ready to serve.
    pub(crate) fn install(self) -> Result<Generation, Error> {
        let id = self.manifest.id.clone();
        let staged = self.staging.keep();
        let dir = self.repo_dir.join(&id);
        fs::rename(&staged, &dir).map_err(Error::io("cannot move into place", &dir))?;
        // The pointer is replaced by a rename, so it always names a whole generation.
        let pointer = self.repo_dir.join(CURRENT);
        let tmp = self.repo_dir.join(format!(".{CURRENT}.tmp"));
        write_synced(&tmp, format!("{id}\n").as_bytes())?;
        fs::rename(&tmp, &pointer).map_err(Error::io("cannot replace", &pointer))?;
        sync_dir(&self.repo_dir)?;
        let documents = open_documents(&dir, self.manifest.documents)?;
        Ok(Generation::from_manifest(dir, self.manifest, documents))
    }

    /// The generation's files as a bucket publishes them: the shards under the names their
    /// indexes list (named after their content, with a publish URL), the indexes, and each
    /// document out of the pack; not the gzipped siblings a gateway keeps for negotiation.
    pub(crate) fn for_bucket(&self) -> Result<Vec<Staged>, Error> {
        let dir = self.staging.path();
        let aliases = &self.manifest.aliases;
        // Each listed file under the name its index lists; the other spelling of a listed
        // shard, and an index's gzipped sibling, are the gateway's own.
        let listed_as: HashMap<&str, &str> = (self.listed.iter())
            .filter_map(|l| Some((aliases.get(l)?.as_str(), l.as_str())))
            .collect();
        let aliased: std::collections::HashSet<&str> =
            aliases.values().map(String::as_str).collect();
        let mut out = Vec::new();
        for f in &self.manifest.files {
            let (name, rank) = match listed_as.get(f.name.as_str()) {
                Some(listed) => ((*listed).to_owned(), Rank::Shard),
                None if aliased.contains(f.name.as_str()) || f.name.ends_with(".gz") => continue,
                None if never_published(&f.name) => continue,
                None => (f.name.clone(), Rank::Index),
            };
            out.push(Staged {
                name,
                path: dir.join(&f.name),
                range: None,
                size: f.len,
                hash: f.hash.clone(),
                rank,
            });
        }
        if self.manifest.documents > 0 {
            let index = open_documents(dir, self.manifest.documents)?;
            out.extend(documents_for_bucket(&dir.join(DOCS_PACK), &index)?);
            // The documents' keys, lengths and dates, for the other gateways of a fleet.
            let index = dir.join(DOCS_INDEX);
            let bytes = fs::read(&index).map_err(Error::io("cannot read", &index))?;
            out.push(Staged {
                name: BUCKET_DOCS_INDEX.to_owned(),
                path: index,
                range: None,
                size: bytes.len() as u64,
                hash: crate::bucket::sha256_hex(&bytes),
                rank: Rank::Document,
            });
        }
        Ok(out)
    }
}

/// Documents a follower fetches at once while it imports a generation ([`import`]): one GET
/// after another, a million documents at 5 ms a round trip take over an hour; a few at once
/// hide the round trips without flooding the bucket with connections, and bound the memory
/// held by documents fetched ahead of their turn in the pack (as `bucket`'s uploads do).
const IMPORT_CONCURRENCY: usize = 8;

/// Whether a file of a generation stays with the gateway that made it, out of the bucket: the
/// profiles' ledger, which is the next refresh's and never a crawler's. A gateway that imports
/// the generation has none, so its next refresh, if it takes the repository's lease, renders
/// the profiles from the store instead of patching them.
fn never_published(name: &str) -> bool {
    name == crate::profiles::ledger::LEDGER
}

/// Where a generation's document index is in the bucket (for [`import`]).
pub(crate) const BUCKET_DOCS_INDEX: &str = ".oai-bridge/documents.index";

/// Makes in `repo_dir` the generation `manifest` describes, which another gateway of the fleet
/// made and published to a bucket, with the bytes `fetch` reads from there (`None`: no such
/// file); written into a staging folder and [`Finished`], ready to install. The files keep the
/// manifest's hashes (ETags) and `Last-Modified` times, so every gateway serves the same
/// answers: each is checked against its hash. A file the gateway serves already with the same
/// hash is linked from `previous`, not fetched; a shard's other spelling (its gzip, or the
/// plain text of a `.xml.gz` the index lists) is made from the one in the bucket. A document
/// whose key, length and date are those of one in `previous` is taken from there; the others
/// are fetched a few at a time ([`IMPORT_CONCURRENCY`]). A file no bucket holds
/// ([`never_published`]) is left out.
pub(crate) async fn import<F, Fut>(
    repo_dir: &Path,
    previous: Option<&Generation>,
    manifest: Manifest,
    mut fetch: F,
) -> Result<Finished, Error>
where
    F: FnMut(String) -> Fut,
    Fut: std::future::Future<Output = Result<Option<bytes::Bytes>, Error>>,
{
    let fetched = |name: &str| {
        let name = name.to_owned();
        move |e: Error| {
            Error::io("cannot fetch from the bucket", Path::new(&name))(crate::error::chain(&e))
        }
    };
    let mut writer = Writer::new(repo_dir, previous)?;
    // The bucket's names of a file: those the indexes list it under, then its own.
    let mut listed: HashMap<&str, Vec<&str>> = HashMap::new();
    for (alias, file) in &manifest.aliases {
        listed.entry(file.as_str()).or_default().push(alias);
    }
    for f in manifest.files.iter().filter(|f| !never_published(&f.name)) {
        if let Some(previous) = previous
            && let Some((_, old)) = previous.file(&f.name)
            && old.name == f.name
            && old.len == f.len
            && old.etag == etag_header(&f.hash)
            && fs::hard_link(
                previous.dir.join(&f.name),
                writer.staging.path().join(&f.name),
            )
            .is_ok()
        {
            writer.files.push(f.clone());
            continue;
        }
        // This spelling in the bucket, or the other one, made into this one.
        let gz = f.name.ends_with(".gz");
        let other = match gz {
            true => f.name.strip_suffix(".gz").unwrap_or(&f.name).to_owned(),
            false => format!("{}.gz", f.name),
        };
        let names = |file: &str| -> Vec<String> {
            let mut names: Vec<String> = (listed.get(file).into_iter().flatten())
                .map(|n| (*n).to_owned())
                .collect();
            names.push(file.to_owned());
            names
        };
        let mut bytes = None;
        for name in names(&f.name) {
            if let Some(b) = fetch(name.clone()).await.map_err(fetched(&name))? {
                bytes = Some(b.to_vec());
                break;
            }
        }
        if bytes.is_none() {
            for name in names(&other) {
                if let Some(b) = fetch(name.clone()).await.map_err(fetched(&name))? {
                    bytes = Some(match gz {
                        true => pipeline::gzip(&b),
                        false => {
                            gunzip(&b).map_err(Error::io("cannot gunzip", Path::new(&name)))?
                        }
                    });
                    break;
                }
            }
        }
        let Some(bytes) = bytes else {
            return Err(Error::io("not in the bucket:", Path::new(&f.name))(
                io::Error::from(io::ErrorKind::NotFound),
            ));
        };
        if content_hash(&bytes) != f.hash {
            return Err(Error::io(
                "not the bytes the manifest names:",
                Path::new(&f.name),
            )(
                "another generation was published meanwhile, or the file was changed",
            ));
        }
        writer.store(&f.name, &bytes, Some(f.last_modified))?;
    }
    if manifest.documents > 0 {
        let index = fetch(BUCKET_DOCS_INDEX.to_owned())
            .await
            .map_err(fetched(BUCKET_DOCS_INDEX))?
            .ok_or_else(|| {
                Error::io("not in the bucket:", Path::new(BUCKET_DOCS_INDEX))(io::Error::from(
                    io::ErrorKind::NotFound,
                ))
            })?;
        let kept = previous.and_then(|p| Some((p, fs::File::open(p.documents_path()).ok()?)));
        // Fetched [`IMPORT_CONCURRENCY`] at a time, packed in the index's order; the first
        // document that fails (in that order) fails the import, and the fetches under way are
        // dropped with it.
        let mut documents = futures_util::stream::iter(super::keyed::entries(&index))
            .map(|entry| {
                let name = Profile::document_name(entry.key);
                let same = kept.as_ref().and_then(|(p, pack)| {
                    use std::os::unix::fs::FileExt as _;
                    let (_, old) = p.document(entry.key).ok()??;
                    if old.len != entry.len || old.time != entry.time {
                        return None;
                    }
                    let mut bytes = vec![0; old.len as usize];
                    pack.read_exact_at(&mut bytes, old.offset).ok()?;
                    Some(bytes)
                });
                let kept_or_fetching = match same {
                    Some(bytes) => Either::Left(bytes),
                    None => Either::Right(fetch(name.clone())),
                };
                async move {
                    let bytes = match kept_or_fetching {
                        Either::Left(bytes) => bytes,
                        Either::Right(fetching) => fetching
                            .await
                            .map_err(fetched(&name))?
                            .ok_or_else(|| {
                                Error::io("not in the bucket:", Path::new(&name))(io::Error::from(
                                    io::ErrorKind::NotFound,
                                ))
                            })?
                            .to_vec(),
                    };
                    Ok::<_, Error>((entry, name, bytes))
                }
            })
            .buffered(IMPORT_CONCURRENCY);
        while let Some(document) = documents.next().await {
            let (entry, name, bytes) = document?;
            let lastmod =
                (entry.time != i64::MIN).then(|| oai_pmh::Datestamp::from_unix(entry.time));
            writer.put_document(&name, &bytes, lastmod)?;
        }
    }
    // The same generation: its id, time, names and summary.
    writer.aliases = manifest.aliases;
    writer.now = manifest.created;
    writer.id = Some(manifest.id);
    writer.fence = manifest.fence;
    writer.changelists = manifest.changelists;
    writer.finish(manifest.summary)
}

fn gunzip(bytes: &[u8]) -> io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes).read_to_end(&mut out)?;
    Ok(out)
}

/// The packed documents as files of a bucket (`cdif/<key>.jsonld`), each with the SHA-256 of
/// its bytes, in the index's order.
fn documents_for_bucket(pack: &Path, index: &super::keyed::Index) -> Result<Vec<Staged>, Error> {
    use std::os::unix::fs::FileExt as _;
    let file = fs::File::open(pack).map_err(Error::io("cannot read", pack))?;
    let mut buf = Vec::new();
    let mut out = Vec::with_capacity(index.len() as usize);
    let entries = index
        .iter()
        .map_err(Error::io("cannot read the index of", pack))?;
    for d in entries {
        let d = d.map_err(Error::io("cannot read the index of", pack))?;
        buf.resize(d.len as usize, 0);
        file.read_exact_at(&mut buf, d.offset)
            .map_err(Error::io("cannot read", pack))?;
        out.push(Staged {
            name: Profile::document_name(d.key),
            path: pack.to_owned(),
            range: Some((d.offset, u64::from(d.len))),
            size: u64::from(d.len),
            hash: crate::bucket::sha256_hex(&buf),
            rank: Rank::Document,
        });
    }
    Ok(out)
}

impl FileSink for Writer<'_> {
    type Error = Error;

    /// Stores the file; an `.xml` file also gets its gzipped sibling. The per-repository
    /// robots.txt of an export is not kept: the gateway answers one robots.txt for all.
    fn put(&mut self, name: &str, bytes: &[u8]) -> Result<(), Error> {
        if name == "robots.txt" {
            return Ok(());
        }
        self.put_file(name, bytes).map(drop)
    }

    /// Documents go into the pack, with their datestamp as `Last-Modified`.
    fn put_document(
        &mut self,
        name: &str,
        bytes: &[u8],
        lastmod: Option<oai_pmh::Datestamp>,
    ) -> Result<(), Error> {
        let pack = self.staging.path().join(DOCS_PACK);
        let key = doc_key(name).ok_or_else(|| {
            Error::io("not a document name:", Path::new(name))("expected cdif/<16 hex>.jsonld")
        })?;
        if self.documents.is_none() {
            let out = crate::publish::DirectWriter::create(&pack, true, self.aligned.take())
                .map_err(Error::io("cannot create", &pack))?;
            self.documents = Some((out, 0));
        }
        let (out, len) = self.documents.as_mut().expect("created above");
        out.write_all(bytes)
            .map_err(Error::io("cannot write", &pack))?;
        let entry = DocEntry {
            key,
            offset: *len,
            len: u32::try_from(bytes.len())
                .map_err(|_| Error::io("document too large:", Path::new(name))("over 4 GiB"))?,
            time: lastmod.map_or(i64::MIN, |d| d.unix()),
        };
        let staging = self.staging.path();
        (self
            .doc_index
            .get_or_insert_with(|| super::keyed::Sorter::new(staging)))
        .push(entry)
        .map_err(Error::io("cannot write the document index in", staging))?;
        *len += bytes.len() as u64;
        Ok(())
    }

    /// Shards are kept plain under `.xml` (and gzipped beside), whatever the index calls them.
    /// The index lists each with the time it last changed, which its `Last-Modified` says too.
    fn put_shard(&mut self, name: &str, xml: &[u8]) -> Result<Option<oai_pmh::Datestamp>, Error> {
        let changed = self.put_file(name.strip_suffix(".gz").unwrap_or(name), xml)?;
        Ok(Some(oai_pmh::Datestamp::from_unix(changed as i64)))
    }

    /// With content names ([`Writer::with_content_names`]), the shard's name after its
    /// content, both spellings served; else its own.
    fn listed_name(&mut self, name: String) -> Result<String, Error> {
        if !self.content_names {
            return Ok(name);
        }
        let file = name.strip_suffix(".gz").unwrap_or(&name);
        let hash = (self.files.iter().rev())
            .find(|f| f.name == file)
            .map(|f| f.hash.clone())
            .ok_or_else(|| {
                Error::io("no such file to list:", Path::new(file))("the shard was not stored")
            })?;
        let content = crate::bucket::content_name(file, &hash);
        if file.ends_with(".xml") {
            (self.aliases).insert(format!("{content}.gz"), format!("{file}.gz"));
        }
        self.aliases.insert(content.clone(), file.to_owned());
        let listed = if name.ends_with(".gz") {
            format!("{content}.gz")
        } else {
            content
        };
        self.listed.push(listed.clone());
        Ok(listed)
    }
}

/// The first 128 bits of the SHA-256 of `bytes`, in hex: a file's strong ETag (quoted), the
/// same across restarts for the same bytes.
pub(crate) fn content_hash(bytes: &[u8]) -> String {
    Sha256::digest(bytes)[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A content hash as a strong ETag header value.
pub(crate) fn etag_header(hash: &str) -> HeaderValue {
    HeaderValue::from_str(&format!("\"{hash}\"")).expect("hex digits make a header value")
}

/// A time as an HTTP-date header value (`Last-Modified`).
pub(crate) fn date_header(t: SystemTime) -> HeaderValue {
    HeaderValue::from_str(&httpdate::fmt_http_date(t)).expect("an HTTP-date is a header value")
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    fs::File::create(path)
        .and_then(|mut f| {
            f.write_all(bytes)?;
            f.sync_all()
        })
        .map_err(Error::io("cannot write", path))
}

fn sync_dir(dir: &Path) -> Result<(), Error> {
    fs::File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(Error::io("cannot sync", dir))
}

fn secs(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn from_secs(s: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profiles::ledger::LEDGER;

    /// docs/operations.md says which manifests this version serves: the format is this.
    #[test]
    fn the_operations_guide_names_the_manifest_format() {
        let said = format!("`server::generation::FORMAT`, now {FORMAT}");
        let guide = include_str!("../../docs/operations.md");
        assert!(guide.contains(&said), "docs/operations.md lacks {said:?}");
    }

    fn build(dir: &Path, previous: Option<&Generation>, files: &[(&str, &[u8])]) -> Generation {
        let mut w = Writer::new(dir, previous).unwrap();
        for (name, bytes) in files {
            w.put(name, bytes).unwrap();
        }
        w.commit(Summary::default()).unwrap()
    }

    /// The DiWoo counts go into a manifest as they always did (`DiwooStats` is that format).
    #[test]
    fn a_summary_keeps_its_diwoo_counts_in_the_manifest_format() {
        let diwoo = crate::pipeline::DiwooStats {
            category: 14,
            urls: 3,
            requires_https: 1,
            requires_lastmod: 2,
        };
        let summary = Summary {
            profiles: vec![crate::profiles::registry::ProfileSummary::new(diwoo)],
            ..Summary::default()
        };
        let json = serde_json::to_string(&summary).unwrap();
        assert!(
            json.contains(
                r#""diwoo":[{"category":14,"urls":3,"requires_https":1,"requires_lastmod":2}]"#
            ),
            "{json}"
        );
        assert_eq!(serde_json::from_str::<Summary>(&json).unwrap(), summary);
        let without: Summary = serde_json::from_str(&json.replace(
            r#""diwoo":[{"category":14,"urls":3,"requires_https":1,"requires_lastmod":2}],"#,
            "",
        ))
        .unwrap();
        assert!(without.profiles.is_empty());
    }

    #[test]
    fn a_committed_generation_loads_back_with_gzip_siblings() {
        let root = tempfile::tempdir().unwrap();
        let g = build(
            root.path(),
            None,
            &[("sitemap.xml", b"<a/>"), ("robots.txt", b"x")],
        );
        let names: Vec<&str> = g.files().iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["sitemap.xml", "sitemap.xml.gz"]);
        let loaded = load_current(root.path()).unwrap().unwrap();
        assert_eq!(loaded.id, g.id);
        assert_ne!(loaded.serial, g.serial);
        let (_, plain) = loaded.file("sitemap.xml").unwrap();
        let (_, gz) = loaded.file("sitemap.xml.gz").unwrap();
        assert_eq!(fs::read(loaded.path(plain)).unwrap(), b"<a/>");
        assert_ne!(
            plain.etag, gz.etag,
            "H-03: each representation has its own ETag"
        );
        assert_eq!(plain.last_modified, gz.last_modified);
    }

    /// H-04: an unchanged file keeps its Last-Modified across generations; a changed one not.
    #[test]
    fn unchanged_files_keep_their_last_modified() {
        let root = tempfile::tempdir().unwrap();
        let mut first = Writer::new(root.path(), None).unwrap();
        first.now -= 3600;
        first.put("a.xml", b"<same/>").unwrap();
        first.put("b.xml", b"<old/>").unwrap();
        let first = first.commit(Summary::default()).unwrap();
        let second = build(
            root.path(),
            Some(&first),
            &[("a.xml", b"<same/>"), ("b.xml", b"<new/>")],
        );
        let lm = |g: &Generation, n: &str| g.file(n).unwrap().1.last_modified;
        assert_eq!(lm(&second, "a.xml"), lm(&first, "a.xml"));
        assert_eq!(lm(&second, "a.xml.gz"), lm(&first, "a.xml"));
        assert!(lm(&second, "b.xml") > lm(&first, "b.xml"));
    }

    #[test]
    fn retired_generations_are_removed_when_dropped_and_leftovers_at_load() {
        let root = tempfile::tempdir().unwrap();
        let first = build(root.path(), None, &[("a.xml", b"1")]);
        let second = build(root.path(), Some(&first), &[("a.xml", b"2")]);
        let first_dir = first.dir.clone();
        first.retire();
        drop(first);
        let start = std::time::Instant::now();
        while first_dir.exists() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "removed in the background"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        // An interrupted refresh leaves a staging folder; the next start removes it.
        let abandoned = Writer::new(root.path(), Some(&second))
            .unwrap()
            .staging
            .keep();
        assert!(abandoned.exists());
        // So does a refresh's folder of profile shard files (pipeline::SpillDir).
        let shards = root.path().join(".oai-bridge-shards-x");
        fs::create_dir(&shards).unwrap();
        fs::write(shards.join("signmap-1.xml"), b"<").unwrap();
        let loaded = load_current(root.path()).unwrap().unwrap();
        assert_eq!(loaded.id, second.id);
        assert!(!abandoned.exists());
        assert!(!shards.exists());
        assert!(second.dir.exists(), "the current generation stays");
    }

    /// With content names, the index lists a shard under the name of its content, which is
    /// served (both spellings) as well as its own; a bucket gets the listed spelling, the
    /// index and the documents, not the gateway's gzip siblings.
    #[test]
    fn content_names_are_served_and_go_to_the_bucket_as_listed() {
        let root = tempfile::tempdir().unwrap();
        let mut w = Writer::new(root.path(), None).unwrap().with_content_names();
        w.put_shard("sitemap-1.xml", b"<urlset/>").unwrap();
        let listed = w.listed_name("sitemap-1.xml".to_owned()).unwrap();
        let hash = content_hash(b"<urlset/>");
        assert_eq!(listed, format!("sitemap-1-{}.xml", &hash[..16]));
        w.put("sitemap.xml", b"<sitemapindex/>").unwrap();
        w.put_document("cdif/00000000000000ff.jsonld", b"{\"b\":2}", None)
            .unwrap();
        let finished = w.finish(Summary::default()).unwrap();
        let mut bucket: Vec<(String, Rank, Vec<u8>)> = (finished.for_bucket().unwrap())
            .into_iter()
            .map(|f| {
                let bytes = fs::read(&f.path).unwrap();
                let bytes = match f.range {
                    Some((at, len)) => bytes[at as usize..][..len as usize].to_vec(),
                    None => bytes,
                };
                assert_eq!(f.size, bytes.len() as u64, "{}", f.name);
                (f.name, f.rank, bytes)
            })
            .collect();
        bucket.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            bucket,
            [
                (
                    BUCKET_DOCS_INDEX.to_owned(),
                    Rank::Document,
                    DocEntry {
                        key: 0xff,
                        offset: 0,
                        len: 7,
                        time: i64::MIN,
                    }
                    .encode()
                    .to_vec(),
                ),
                (
                    "cdif/00000000000000ff.jsonld".to_owned(),
                    Rank::Document,
                    b"{\"b\":2}".to_vec()
                ),
                (listed.clone(), Rank::Shard, b"<urlset/>".to_vec()),
                (
                    "sitemap.xml".to_owned(),
                    Rank::Index,
                    b"<sitemapindex/>".to_vec()
                ),
            ]
        );
        finished.install().unwrap();
        let loaded = load_current(root.path()).unwrap().unwrap();
        for name in [
            listed.clone(),
            format!("{listed}.gz"),
            "sitemap-1.xml".to_owned(),
        ] {
            assert!(loaded.file(&name).is_some(), "{name} is served");
        }
        assert_eq!(
            loaded.file(&listed).unwrap().1.name,
            "sitemap-1.xml",
            "the same file"
        );
    }

    /// Another gateway makes the same generation from the bucket and the manifest: the same
    /// files, bytes, ETags, `Last-Modified` times and documents; a file it has already is
    /// linked, and a file whose bytes differ from the manifest's hash is refused.
    #[tokio::test]
    async fn a_generation_imported_from_the_bucket_is_the_same() {
        use crate::bucket::{Bucket, PublishSettings};
        let holder = tempfile::tempdir().unwrap();
        let mut w = Writer::new(holder.path(), None)
            .unwrap()
            .with_content_names();
        for (name, xml) in [("sitemap-1.xml.gz", "<a/>"), ("sitemap-2.xml.gz", "<b/>")] {
            w.put_shard(name, xml.as_bytes()).unwrap();
            w.listed_name(name.to_owned()).unwrap();
        }
        w.put("sitemap.xml", b"<sitemapindex/>").unwrap();
        // A Signmap: a follower makes the same linksets from it as the holder.
        let landing = "https://repo.example/record/1";
        let signmap = format!(
            "<urlset><url><loc>{landing}</loc>\
             <rs:ln rel=\"cite-as\" href=\"https://doi.org/10.1/x\"/></url></urlset>"
        );
        w.put_shard("signmap-1.xml", signmap.as_bytes()).unwrap();
        w.listed_name("signmap-1.xml".to_owned()).unwrap();
        w.put("signmap.xml", b"<sitemapindex/>").unwrap();
        // The profiles' ledger stays with the holder: the bucket never has it, and a follower
        // makes the generation without it.
        w.put(LEDGER, b"the ledger's rows").unwrap();
        let day = oai_pmh::Datestamp::parse("2024-05-01");
        w.put_document("cdif/00000000000000ff.jsonld", b"{\"b\":2}", day)
            .unwrap();
        let finished = w.finish(Summary::default()).unwrap();
        let store = std::sync::Arc::new(object_store::memory::InMemory::new());
        let bucket = Bucket::new(
            store,
            object_store::path::Path::from("one"),
            crate::publish::BucketUrl::parse("s3://b/one/").unwrap(),
            true,
        );
        let files = finished.for_bucket().unwrap();
        (bucket.publish(&files, &PublishSettings::default(), SystemTime::now()))
            .await
            .unwrap();
        let manifest = finished.manifest().clone();
        let made = finished.install().unwrap();

        let follower = tempfile::tempdir().unwrap();
        let fetch = |name: String| {
            let bucket = &bucket;
            async move { bucket.read(&name).await }
        };
        let imported = import(follower.path(), None, manifest.clone(), fetch)
            .await
            .unwrap()
            .install()
            .unwrap();
        let again = load_current(follower.path()).unwrap().unwrap();
        let published: Vec<_> = (made.files().iter()).filter(|f| f.name != LEDGER).collect();
        assert_eq!(published.len() + 1, made.files().len());
        for g in [&imported, &again] {
            assert_eq!(g.id, made.id);
            assert!(g.file(LEDGER).is_none());
            assert_eq!(g.files().len(), published.len());
            for f in published.iter().copied() {
                let (_, got) = g.file(&f.name).unwrap();
                assert_eq!(
                    (&got.etag, got.last_modified, got.len),
                    (&f.etag, f.last_modified, f.len),
                    "{}",
                    f.name
                );
                assert_eq!(
                    fs::read(g.path(got)).unwrap(),
                    fs::read(made.path(f)).unwrap()
                );
            }
            let linkset = |g: &Generation| {
                let found = g
                    .index(Pack::Linksets)
                    .find(super::super::linkset::key(landing))
                    .unwrap();
                let (_, e) = *found.first().expect("a linkset");
                let pack = fs::read(g.pack_path(Pack::Linksets)).unwrap();
                (e, pack[e.offset as usize..][..e.len as usize].to_vec())
            };
            assert_eq!(linkset(g), linkset(&made));
            let (_, d) = g.document(0xff).unwrap().unwrap();
            assert_eq!(d.time, day.unwrap().unix());
            let pack = fs::read(g.documents_path()).unwrap();
            assert_eq!(&pack[d.offset as usize..][..d.len as usize], b"{\"b\":2}");
            for alias in manifest.aliases.keys() {
                assert!(g.file(alias).is_some(), "{alias}");
            }
        }

        // A file changed in the bucket since: refused, naming it.
        let listed = (manifest.aliases.keys())
            .find(|a| a.starts_with("sitemap-1-"))
            .unwrap()
            .clone();
        let changed = |name: String| {
            let bucket = &bucket;
            let listed = listed.clone();
            async move {
                match name == listed {
                    true => Ok(Some(bytes::Bytes::from(pipeline::gzip(b"<c/>")))),
                    false => bucket.read(&name).await,
                }
            }
        };
        let other = tempfile::tempdir().unwrap();
        let err = import(other.path(), None, manifest, changed)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("sitemap-1"), "{err}");
    }

    /// A follower fetches a generation's documents a few at a time (issue 31: they came one
    /// GET after another), packs them in the index's order as the
    /// generation made them, and fails the import when one cannot be fetched, installing
    /// nothing. Fails if the documents are fetched one at a time again.
    #[tokio::test]
    async fn a_follower_fetches_documents_a_few_at_a_time() {
        use crate::bucket::{Bucket, PublishSettings};
        use std::sync::atomic::AtomicUsize;
        let holder = tempfile::tempdir().unwrap();
        let mut w = Writer::new(holder.path(), None).unwrap();
        w.put("sitemap.xml", b"<a/>").unwrap();
        for key in 1..=40u64 {
            let json = format!("{{\"n\":{key}}}");
            (w.put_document(&format!("cdif/{key:016x}.jsonld"), json.as_bytes(), None)).unwrap();
        }
        let finished = w.finish(Summary::default()).unwrap();
        let store = std::sync::Arc::new(object_store::memory::InMemory::new());
        let bucket = Bucket::new(
            store,
            object_store::path::Path::from("one"),
            crate::publish::BucketUrl::parse("s3://b/one/").unwrap(),
            true,
        );
        let files = finished.for_bucket().unwrap();
        (bucket.publish(&files, &PublishSettings::default(), SystemTime::now()))
            .await
            .unwrap();
        let manifest = finished.manifest().clone();
        let made = finished.install().unwrap();

        let (in_flight, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let fetch = |name: String| {
            let (bucket, in_flight, most) = (&bucket, &in_flight, &most);
            async move {
                let document = name.starts_with("cdif/");
                if document {
                    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    // A round trip: the others may start meanwhile.
                    tokio::task::yield_now().await;
                }
                let got = bucket.read(&name).await;
                if document {
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                }
                got
            }
        };
        let follower = tempfile::tempdir().unwrap();
        let imported = import(follower.path(), None, manifest.clone(), fetch)
            .await
            .unwrap()
            .install()
            .unwrap();
        let most = most.load(Ordering::SeqCst);
        assert!(
            (2..=IMPORT_CONCURRENCY).contains(&most),
            "{most} documents fetched at once"
        );
        assert_eq!(
            fs::read(imported.documents_path()).unwrap(),
            fs::read(made.documents_path()).unwrap()
        );

        // One document missing from the bucket: the import fails naming it, and nothing is
        // current.
        let missing = |name: String| {
            let bucket = &bucket;
            async move {
                match name == format!("cdif/{:016x}.jsonld", 30) {
                    true => Ok(None),
                    false => bucket.read(&name).await,
                }
            }
        };
        let other = tempfile::tempdir().unwrap();
        let err = import(other.path(), None, manifest, missing)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("000000000000001e.jsonld"), "{err}");
        assert!(load_current(other.path()).unwrap().is_none());
    }

    /// Documents are packed with a sorted index that survives a reload.
    #[test]
    fn documents_are_packed_and_found_by_key() {
        let root = tempfile::tempdir().unwrap();
        let mut w = Writer::new(root.path(), None).unwrap();
        w.put("sitemap.xml", b"<a/>").unwrap();
        let day = oai_pmh::Datestamp::parse("2024-05-01");
        w.put_document("cdif/00000000000000ff.jsonld", b"{\"b\":2}", day)
            .unwrap();
        w.put_document("cdif/0000000000000001.jsonld", b"{\"a\":1}", None)
            .unwrap();
        assert!(w.put_document("cdif/x.jsonld", b"{}", None).is_err());
        let g = w.commit(Summary::default()).unwrap();
        let loaded = load_current(root.path()).unwrap().unwrap();
        for generation in [&g, &loaded] {
            let (_, d) = generation.document(0xff).unwrap().unwrap();
            let pack = fs::read(generation.documents_path()).unwrap();
            assert_eq!(&pack[d.offset as usize..][..d.len as usize], b"{\"b\":2}");
            assert_eq!(d.time, day.unwrap().unix());
            assert_eq!(generation.document(1).unwrap().unwrap().1.time, i64::MIN);
            assert!(generation.document(2).unwrap().is_none());
        }
        // The pack and index are not routable files.
        assert!(loaded.file(DOCS_PACK).is_none() && loaded.file(DOCS_INDEX).is_none());
        assert_eq!(
            doc_key("cdif/00000000000000FF.jsonld"),
            None,
            "lower-case hex only"
        );
    }

    #[test]
    fn a_damaged_generation_is_an_error_naming_the_file() {
        let root = tempfile::tempdir().unwrap();
        let g = build(root.path(), None, &[("a.xml", b"<x/>")]);
        fs::write(g.dir.join("a.xml"), b"<x").unwrap();
        let e = load_current(root.path()).unwrap_err();
        assert!(e.to_string().contains("a.xml"), "{e}");
        assert!(load_current(&root.path().join("none")).unwrap().is_none());
    }
}
