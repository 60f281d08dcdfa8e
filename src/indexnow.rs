//! IndexNow (<https://www.indexnow.org/documentation>): after a refresh, the landing pages it
//! created, changed or deleted are told to the search engines that share IndexNow pings,
//! instead of waiting for their next crawl of the sitemap. This module is the protocol and the
//! repository's outbox; the gateway's sender (`server::indexnow`) runs them.
//!
//! - [`Key`], [`Settings`], [`IndexNowConfig`]: `[repository.indexnow]`, checked as it loads.
//!   The key is a secret-like value: its `Debug` hides it, and nothing here puts it in an error,
//!   a log line or the status page ([`redact`] takes it out of an engine's answer).
//! - [`Outbox`]: the batches of a repository, written to its state folder before they are
//!   sent and marked after each acknowledged one, so a restart neither loses nor resends one.
//! - [`body`], [`Verdict`], [`retry_wait`]: one request, what its answer means, when to retry.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use url::Url;

use crate::changes::Kind;

/// The endpoint used when `[repository.indexnow]` names none: IndexNow's own, which shares
/// each ping with every participating engine (Bing, Naver, Seznam, Yandex, Yep, ...).
pub(crate) const DEFAULT_ENDPOINT: &str = "https://api.indexnow.org/indexnow";

/// Most URLs in one request (the protocol's limit).
pub(crate) const MAX_BATCH: usize = 10_000;

/// The wait before the first retry of a batch an engine answered 429 or 5xx (or did not
/// answer); it doubles with each retry in a row, up to [`MAX_WAIT`].
pub(crate) const FIRST_WAIT: Duration = Duration::from_secs(5);

/// The longest wait between two tries of a batch, `Retry-After` included: a ping is worth
/// something only while the change is new.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(3600);

/// Acknowledged batches kept in `sent.jsonl` (the status page shows the last few).
const SENT_KEPT: usize = 100;

/// A repository's IndexNow key: 8 to 128 of `a-z`, `A-Z`, `0-9` and `-` (the protocol's rule).
/// Whoever has it can ping for the repository's host, so it is shown nowhere: `Debug` prints
/// `Key(***)`, and [`Key::expose`] is called only to send it and to serve the key file.
#[derive(Clone, PartialEq, Eq)]
pub struct Key(String);

impl Key {
    /// `text` as a key, or what is wrong with it, in words that do not repeat it.
    pub(crate) fn new(text: String) -> Result<Key, String> {
        let chars = text.chars().count();
        let allowed = |c: char| c.is_ascii_alphanumeric() || c == '-';
        let rule = "an IndexNow key is 8 to 128 characters, each a-z, A-Z, 0-9 or '-'";
        if !(8..=128).contains(&chars) {
            return Err(format!(
                "{rule}; this one has {chars} (the value is not shown: it is a secret)"
            ));
        }
        if let Some(bad) = text.chars().position(|c| !allowed(c)) {
            return Err(format!(
                "{rule}; character {} of this one is not (the value is not shown: it is a secret)",
                bad + 1
            ));
        }
        Ok(Key(text))
    }

    /// The key itself: for the request's body and the key file, nothing else.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    /// The key file's name at the root of a host, `{key}.txt`.
    pub(crate) fn file_name(&self) -> String {
        format!("{}.txt", self.0)
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(***)")
    }
}

/// `[repository.indexnow]` as its keys are applied; [`Settings::validated`] makes the
/// [`IndexNowConfig`].
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    /// `key`, required.
    pub key: Option<Key>,
    /// `endpoint`.
    pub endpoint: Url,
    /// `key_location`.
    pub key_location: Option<Url>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            key: None,
            endpoint: Url::parse(DEFAULT_ENDPOINT).expect("the default endpoint is a URL"),
            key_location: None,
        }
    }
}

impl Settings {
    /// The configuration these settings make; `Err` names the key and what is wrong.
    pub(crate) fn validated(self) -> Result<IndexNowConfig, (&'static str, String)> {
        let key = self.key.ok_or((
            "key",
            "is required: the repository's IndexNow key (8 to 128 of a-z, A-Z, 0-9 and '-')"
                .to_owned(),
        ))?;
        Ok(IndexNowConfig {
            key,
            endpoint: self.endpoint,
            key_location: self.key_location,
        })
    }
}

/// A repository's IndexNow settings (`serve`): its key, the engine it pings, and where the key
/// file is when it is not `https://{host}/{key}.txt`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexNowConfig {
    /// The key.
    pub key: Key,
    /// The engine's endpoint, e.g. `https://api.indexnow.org/indexnow`.
    pub endpoint: Url,
    /// The key file's URL (`keyLocation`): only URLs on its host and under its folder are sent.
    pub key_location: Option<Url>,
}

impl IndexNowConfig {
    /// What the pings are made under: a stop (403, 422) holds until this changes. A hash, so
    /// that the key is not kept in the clear beside the stop.
    pub(crate) fn fingerprint(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        for part in [
            self.key.expose(),
            self.endpoint.as_str(),
            self.key_location.as_ref().map_or("", Url::as_str),
        ] {
            h.update(part.as_bytes());
            h.update([0]);
        }
        format!("{:x}", h.finalize())
    }

    /// Where the key file must be for the pages of `host`, with the key hidden: the status page
    /// and `check` say it this way.
    pub(crate) fn key_file_shown(&self, host: &str) -> String {
        match &self.key_location {
            Some(url) => redact(url.as_str(), &self.key),
            None => format!("https://{host}/***.txt"),
        }
    }

    /// The host a page is sent under (`host[:port]`), or why it is not sent: it is no URL, or
    /// it lies outside the key file's location (IndexNow refuses those for the whole batch).
    pub(crate) fn host_of(&self, page: &str) -> Result<String, Unsent> {
        let url = Url::parse(page).map_err(|_| Unsent::NotAUrl)?;
        let host = authority(&url).ok_or(Unsent::NotAUrl)?;
        if let Some(location) = &self.key_location {
            let folder = location.join(".").map_err(|_| Unsent::OutsideKeyLocation)?;
            if authority(location).as_deref() != Some(host.as_str())
                || !page.starts_with(folder.as_str())
            {
                return Err(Unsent::OutsideKeyLocation);
            }
        }
        Ok(host)
    }
}

/// `host` or `host:port` of a URL (the port when it is not the scheme's).
fn authority(url: &Url) -> Option<String> {
    let host = url.host_str()?;
    Some(match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    })
}

/// Why a changed page is not sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unsent {
    /// It does not parse as a URL with a host.
    NotAUrl,
    /// It is not on the key file's host or not under its folder.
    OutsideKeyLocation,
}

/// `endpoint`: an http(s) URL.
pub(crate) fn parse_endpoint(text: &str) -> Result<Url, String> {
    let url = Url::parse(text).map_err(|e| format!("{text:?} is not a URL: {e}"))?;
    if !matches!(url.scheme(), "https" | "http") || url.host_str().is_none() {
        return Err(format!(
            "{text:?} must be an http(s) URL, e.g. {DEFAULT_ENDPOINT:?}"
        ));
    }
    Ok(url)
}

/// `key_location`: an http(s) URL of a `.txt` file (the key file on the repository's host). It
/// usually names the key, so an error does not repeat it.
pub(crate) fn parse_key_location(text: &str) -> Result<Url, String> {
    let rule = "must be the http(s) URL of the key file, a .txt file on the pages' host, e.g. \
                \"https://repository.example.edu/indexnow-key.txt\" (the value is not shown: \
                it usually holds the key)";
    let url = Url::parse(text).map_err(|_| rule.to_owned())?;
    if !matches!(url.scheme(), "https" | "http")
        || url.host_str().is_none()
        || !url.path().ends_with(".txt")
        || url.query().is_some()
    {
        return Err(rule.to_owned());
    }
    Ok(url)
}

/// `text` with every occurrence of the key replaced by `***`: for what an engine answers,
/// which may echo it.
pub(crate) fn redact(text: &str, key: &Key) -> String {
    text.replace(key.expose(), "***")
}

/// How many pages of each kind a batch holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Counts {
    /// Created pages.
    pub created: u64,
    /// Updated pages.
    pub updated: u64,
    /// Deleted pages.
    pub deleted: u64,
}

impl Counts {
    fn add(&mut self, kind: Kind) {
        match kind {
            Kind::Created => self.created += 1,
            Kind::Updated => self.updated += 1,
            Kind::Deleted => self.deleted += 1,
        }
    }

    /// All pages.
    #[cfg(test)]
    pub(crate) fn total(&self) -> u64 {
        self.created + self.updated + self.deleted
    }
}

/// One request's worth of pages, as the outbox keeps it: at most [`MAX_BATCH`] URLs, all of one
/// host. The key is not in it: it is added as the batch is sent, from the settings of then.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Batch {
    /// Its place in the repository's order of batches, from 1.
    pub seq: u64,
    /// The pages' host (`host[:port]`).
    pub host: String,
    /// The pages.
    pub urls: Vec<String>,
    /// What the refresh did to them.
    pub counts: Counts,
    /// When it was queued, in seconds since the Unix epoch.
    pub queued: i64,
}

/// The JSON body of `batch`'s request under `config`: `{host, key, keyLocation?, urlList}`.
pub(crate) fn body(batch: &Batch, config: &IndexNowConfig) -> Vec<u8> {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Body<'a> {
        host: &'a str,
        key: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        key_location: Option<&'a str>,
        url_list: &'a [String],
    }
    let host = batch.host.split(':').next().unwrap_or(&batch.host);
    serde_json::to_vec(&Body {
        host,
        key: config.key.expose(),
        key_location: config.key_location.as_ref().map(Url::as_str),
        url_list: &batch.urls,
    })
    .expect("a batch serializes")
}

/// What an engine's answer to a batch means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// 200 or 202: received (202: the key is still being checked).
    Received,
    /// 429, a 5xx, or no answer: the same batch again later.
    Retry,
    /// Anything else (403: the key is not valid; 422: the URLs are not the host's, or the key
    /// breaks the rule; 400: the request is malformed): sending again would be answered alike,
    /// so the repository's pings stop until its settings change, saying why.
    Stop(String),
}

/// The verdict on an answer with `status` (`None`: no answer), the key file expected for
/// `host` under `config`.
pub(crate) fn verdict(status: Option<u16>, config: &IndexNowConfig, host: &str) -> Verdict {
    match status {
        Some(200 | 202) => Verdict::Received,
        None | Some(429 | 500..=599) => Verdict::Retry,
        Some(403) => Verdict::Stop(format!(
            "403 Forbidden: the engine found no valid key: is the key file at {} with the key as its content?",
            config.key_file_shown(host)
        )),
        Some(422) => Verdict::Stop(
            "422 Unprocessable Entity: the URLs are not the host's, or the key does not match \
             the key file's"
                .to_owned(),
        ),
        Some(400) => Verdict::Stop("400 Bad Request: the engine refused the request".to_owned()),
        Some(code) => Verdict::Stop(format!("the engine answered {code}")),
    }
}

/// The wait before try `retries + 1` of a batch (`retries` failed in a row, at least one): the
/// engine's `Retry-After` when it gave one, else [`FIRST_WAIT`] doubling; never past [`MAX_WAIT`].
pub(crate) fn retry_wait(retries: u32, retry_after: Option<Duration>) -> Duration {
    retry_after
        .unwrap_or_else(|| FIRST_WAIT.saturating_mul(1 << retries.saturating_sub(1).min(16)))
        .min(MAX_WAIT)
}

/// An acknowledged batch, as `sent.jsonl` records it (the URLs are not kept).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Sent {
    /// The batch's `seq`.
    pub seq: u64,
    /// Its host.
    pub host: String,
    /// Its pages, by kind.
    pub counts: Counts,
    /// The engine's answer (200 or 202).
    pub status: u16,
    /// Tries it took.
    pub tries: u32,
    /// When it was acknowledged, in seconds since the Unix epoch.
    pub at: i64,
}

/// What [`Outbox::enqueue`] queued.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Queued {
    /// Batches written.
    pub batches: u64,
    /// Pages in them.
    pub urls: u64,
    /// Pages left out: outside the key file's location.
    pub outside: u64,
    /// Pages left out: not URLs.
    pub not_urls: u64,
}

/// A repository's outbox: `{dir}/pending/{seq}.json`, one file per batch not yet acknowledged,
/// and `{dir}/sent.jsonl`, the last acknowledged ones. A batch is written (and synced) before it
/// is sent, and marked in `sent.jsonl` when the engine acknowledged it, then its file is
/// removed; a file whose batch `sent.jsonl` already marks (a stop between the two) is removed
/// at the next opening, not sent again.
#[derive(Debug)]
pub(crate) struct Outbox {
    dir: PathBuf,
    /// The next batch's `seq`.
    next: u64,
    /// The acknowledged batches `sent.jsonl` holds, oldest first.
    sent: Vec<Sent>,
}

impl Outbox {
    /// The outbox in `dir` (created if need be).
    pub(crate) fn open(dir: &Path) -> std::io::Result<Outbox> {
        std::fs::create_dir_all(dir.join("pending"))?;
        let sent = read_sent(&dir.join("sent.jsonl"))?;
        let last_sent = sent.last().map_or(0, |s| s.seq);
        let mut outbox = Outbox {
            dir: dir.to_owned(),
            next: last_sent + 1,
            sent,
        };
        for (seq, path) in outbox.pending_files()? {
            if seq <= last_sent {
                std::fs::remove_file(&path)?;
            } else {
                outbox.next = outbox.next.max(seq + 1);
            }
        }
        Ok(outbox)
    }

    /// Queues `changes` as batches of at most [`MAX_BATCH`] URLs of one host each, under
    /// `config` (its key file's location decides which pages may be sent); each batch file is
    /// synced before this returns. Memory: one partial batch per host.
    pub(crate) fn enqueue(
        &mut self,
        config: &IndexNowConfig,
        changes: impl Iterator<Item = (String, Kind)>,
    ) -> std::io::Result<Queued> {
        let queued_at = unix_now();
        let mut open: BTreeMap<String, (Vec<String>, Counts)> = BTreeMap::new();
        let mut queued = Queued::default();
        for (url, kind) in changes {
            let host = match config.host_of(&url) {
                Ok(host) => host,
                Err(Unsent::OutsideKeyLocation) => {
                    queued.outside += 1;
                    continue;
                }
                Err(Unsent::NotAUrl) => {
                    queued.not_urls += 1;
                    continue;
                }
            };
            let (urls, counts) = open.entry(host.clone()).or_default();
            urls.push(url);
            counts.add(kind);
            if urls.len() == MAX_BATCH {
                let (urls, counts) = open.remove(&host).unwrap_or_default();
                self.write(host, urls, counts, queued_at, &mut queued)?;
            }
        }
        for (host, (urls, counts)) in open {
            self.write(host, urls, counts, queued_at, &mut queued)?;
        }
        if queued.batches > 0 {
            std::fs::File::open(self.dir.join("pending"))?.sync_all()?;
        }
        Ok(queued)
    }

    fn write(
        &mut self,
        host: String,
        urls: Vec<String>,
        counts: Counts,
        queued_at: i64,
        queued: &mut Queued,
    ) -> std::io::Result<()> {
        let batch = Batch {
            seq: self.next,
            host,
            urls,
            counts,
            queued: queued_at,
        };
        let path = self.batch_path(batch.seq);
        let tmp = path.with_extension("tmp");
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(&serde_json::to_vec(&batch).map_err(std::io::Error::other)?)?;
        file.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        self.next += 1;
        queued.batches += 1;
        queued.urls += batch.urls.len() as u64;
        Ok(())
    }

    /// The batch to send next (the oldest not acknowledged), if any.
    pub(crate) fn next_batch(&self) -> std::io::Result<Option<Batch>> {
        let Some((_, path)) = self.pending_files()?.into_iter().next() else {
            return Ok(None);
        };
        let bytes = std::fs::read(&path)?;
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))
    }

    /// The batches waiting, and their pages.
    pub(crate) fn pending(&self) -> std::io::Result<(u64, u64)> {
        let mut urls = 0;
        let files = self.pending_files()?;
        for (_, path) in &files {
            let bytes = std::fs::read(path)?;
            let batch: Batch = serde_json::from_slice(&bytes)
                .map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))?;
            urls += batch.urls.len() as u64;
        }
        Ok((files.len() as u64, urls))
    }

    /// Marks `batch` acknowledged with `status` after `tries`: recorded in `sent.jsonl` (synced),
    /// then its file removed.
    pub(crate) fn mark_sent(
        &mut self,
        batch: &Batch,
        status: u16,
        tries: u32,
    ) -> std::io::Result<Sent> {
        let sent = Sent {
            seq: batch.seq,
            host: batch.host.clone(),
            counts: batch.counts,
            status,
            tries,
            at: unix_now(),
        };
        self.sent.push(sent.clone());
        let log = self.dir.join("sent.jsonl");
        if self.sent.len() > 2 * SENT_KEPT {
            self.sent.drain(..self.sent.len() - SENT_KEPT);
            let tmp = log.with_extension("tmp");
            let mut file = std::fs::File::create(&tmp)?;
            for s in &self.sent {
                writeln!(
                    file,
                    "{}",
                    serde_json::to_string(s).map_err(std::io::Error::other)?
                )?;
            }
            file.sync_all()?;
            std::fs::rename(&tmp, &log)?;
        } else {
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)?;
            writeln!(
                file,
                "{}",
                serde_json::to_string(&sent).map_err(std::io::Error::other)?
            )?;
            file.sync_all()?;
        }
        std::fs::remove_file(self.batch_path(batch.seq))?;
        Ok(sent)
    }

    /// The acknowledged batches kept, oldest first.
    pub(crate) fn sent(&self) -> &[Sent] {
        &self.sent
    }

    fn batch_path(&self, seq: u64) -> PathBuf {
        self.dir.join("pending").join(format!("{seq:020}.json"))
    }

    /// The batch files, in order.
    fn pending_files(&self) -> std::io::Result<Vec<(u64, PathBuf)>> {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(self.dir.join("pending"))? {
            let path = entry?.path();
            let seq = (path.extension().is_some_and(|e| e == "json"))
                .then(|| path.file_stem()?.to_str()?.parse::<u64>().ok())
                .flatten();
            match seq {
                Some(seq) => files.push((seq, path)),
                // A batch file cut short by a stop before its rename: never sent, written
                // again by no one (its changes went with the process).
                None if path.extension().is_some_and(|e| e == "tmp") => {
                    let _ = std::fs::remove_file(&path);
                }
                None => {}
            }
        }
        files.sort();
        Ok(files)
    }
}

/// The records of `sent.jsonl`; a last line cut short by a stop is left out.
fn read_sent(path: &Path) -> std::io::Result<Vec<Sent>> {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut sent = Vec::new();
    for line in std::io::BufReader::new(file).lines() {
        if let Ok(s) = serde_json::from_str::<Sent>(&line?) {
            sent.push(s);
        }
    }
    Ok(sent)
}

fn unix_now() -> i64 {
    oai_pmh::unix_secs(SystemTime::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(location: Option<&str>) -> IndexNowConfig {
        IndexNowConfig {
            key: Key::new("0123456789abcdef-KEY".to_owned()).unwrap(),
            endpoint: Url::parse(DEFAULT_ENDPOINT).unwrap(),
            key_location: location.map(|l| Url::parse(l).unwrap()),
        }
    }

    #[test]
    fn keys_follow_the_protocols_rule_and_errors_never_show_them() {
        for good in ["abcdefgh", "A-1-b-2-C-3", &"k".repeat(128)] {
            assert!(Key::new(good.to_owned()).is_ok(), "{good}");
        }
        for bad in [
            "short-7",
            &"k".repeat(129),
            "with space1",
            "under_score",
            "ünïcode-key",
        ] {
            let e = Key::new(bad.to_owned()).unwrap_err();
            assert!(e.contains("8 to 128 characters"), "{e}");
            assert!(!e.contains(bad), "the error shows the key: {e}");
        }
        let key = Key::new("secret-key-123".to_owned()).unwrap();
        assert_eq!(format!("{key:?}"), "Key(***)");
        assert!(!format!("{:?}", config(None)).contains("0123456789abcdef-KEY"));
        assert_eq!(redact("bad key secret-key-123!", &key), "bad key ***!");
    }

    #[test]
    fn a_key_location_admits_only_pages_under_its_folder_on_its_host() {
        let at_root = config(None);
        assert_eq!(
            at_root.host_of("https://repo.example/a").unwrap(),
            "repo.example"
        );
        assert_eq!(
            at_root.host_of("http://repo.example:8080/a").unwrap(),
            "repo.example:8080"
        );
        assert_eq!(at_root.host_of("not a url"), Err(Unsent::NotAUrl));
        let folder = config(Some("https://repo.example/items/key.txt"));
        assert!(folder.host_of("https://repo.example/items/1").is_ok());
        for outside in [
            "https://repo.example/other/1",
            "https://elsewhere.example/items/1",
        ] {
            assert_eq!(
                folder.host_of(outside),
                Err(Unsent::OutsideKeyLocation),
                "{outside}"
            );
        }
        assert_eq!(
            folder.key_file_shown("x"),
            "https://repo.example/items/key.txt"
        );
        assert_eq!(
            at_root.key_file_shown("repo.example"),
            "https://repo.example/***.txt"
        );
        assert!(parse_key_location("https://repo.example/k").is_err());
        assert!(parse_key_location("ftp://repo.example/k.txt").is_err());
        assert!(parse_endpoint("api.indexnow.org").is_err());
    }

    #[test]
    fn the_body_is_the_protocols_json() {
        let batch = Batch {
            seq: 1,
            host: "repo.example:8443".to_owned(),
            urls: vec!["https://repo.example:8443/a".to_owned()],
            counts: Counts::default(),
            queued: 0,
        };
        let json: serde_json::Value = serde_json::from_slice(&body(&batch, &config(None))).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "host": "repo.example",
                "key": "0123456789abcdef-KEY",
                "urlList": ["https://repo.example:8443/a"],
            })
        );
        let located = config(Some("https://repo.example/k.txt"));
        let json: serde_json::Value = serde_json::from_slice(&body(&batch, &located)).unwrap();
        assert_eq!(json["keyLocation"], "https://repo.example/k.txt");
    }

    #[test]
    fn answers_decide_between_done_retry_and_stop() {
        let c = config(None);
        assert_eq!(verdict(Some(200), &c, "h"), Verdict::Received);
        assert_eq!(verdict(Some(202), &c, "h"), Verdict::Received);
        for retried in [None, Some(429), Some(500), Some(503)] {
            assert_eq!(verdict(retried, &c, "h"), Verdict::Retry);
        }
        for stopped in [400, 403, 404, 422] {
            assert!(matches!(verdict(Some(stopped), &c, "h"), Verdict::Stop(_)));
        }
        let Verdict::Stop(why) = verdict(Some(403), &c, "repo.example") else {
            unreachable!()
        };
        assert!(why.contains("https://repo.example/***.txt"), "{why}");
        assert!(!why.contains(c.key.expose()));
    }

    #[test]
    fn retries_wait_longer_each_time_up_to_the_cap() {
        let s = Duration::from_secs;
        assert_eq!(retry_wait(1, None), FIRST_WAIT);
        assert_eq!(retry_wait(2, None), FIRST_WAIT * 2);
        assert_eq!(retry_wait(3, None), FIRST_WAIT * 4);
        assert_eq!(retry_wait(40, None), MAX_WAIT);
        assert_eq!(retry_wait(1, Some(s(1))), s(1));
        assert_eq!(retry_wait(1, Some(s(86_400))), MAX_WAIT);
    }

    fn pages(host: &str, n: usize) -> impl Iterator<Item = (String, Kind)> + '_ {
        (0..n).map(move |i| {
            let kind = [Kind::Created, Kind::Updated, Kind::Deleted][i % 3];
            (format!("https://{host}/p/{i}"), kind)
        })
    }

    #[test]
    fn batches_hold_one_host_and_at_most_ten_thousand_urls() {
        let dir = tempfile::tempdir().unwrap();
        let mut outbox = Outbox::open(dir.path()).unwrap();
        let changes = pages("a.example", 25_001)
            .chain(pages("b.example", 3))
            .chain([("not a url".to_owned(), Kind::Created)]);
        let queued = outbox.enqueue(&config(None), changes).unwrap();
        assert_eq!(
            (queued.batches, queued.urls, queued.not_urls),
            (4, 25_004, 1)
        );
        let mut seen = Vec::new();
        while let Some(batch) = outbox.next_batch().unwrap() {
            assert!(batch.urls.len() <= MAX_BATCH);
            assert!(
                batch
                    .urls
                    .iter()
                    .all(|u| u.starts_with(&format!("https://{}/", batch.host)))
            );
            assert_eq!(batch.counts.total(), batch.urls.len() as u64);
            seen.push((batch.seq, batch.host.clone(), batch.urls.len()));
            outbox.mark_sent(&batch, 200, 1).unwrap();
        }
        assert_eq!(
            seen,
            [
                (1, "a.example".to_owned(), 10_000),
                (2, "a.example".to_owned(), 10_000),
                (3, "a.example".to_owned(), 5_001),
                (4, "b.example".to_owned(), 3),
            ]
        );
        assert_eq!(outbox.sent().len(), 4);
    }

    /// A restart finds the batches not yet acknowledged, in order, and never one that was: also
    /// when the stop came between the mark and the removal of its file.
    #[test]
    fn a_restart_neither_loses_nor_resends_a_batch() {
        let dir = tempfile::tempdir().unwrap();
        let mut outbox = Outbox::open(dir.path()).unwrap();
        outbox
            .enqueue(&config(None), pages("a.example", 3))
            .unwrap();
        outbox
            .enqueue(&config(None), pages("b.example", 2))
            .unwrap();
        let first = outbox.next_batch().unwrap().unwrap();
        outbox.mark_sent(&first, 202, 2).unwrap();
        // As if stopped after the mark of the second, before its file went.
        let second = outbox.next_batch().unwrap().unwrap();
        let kept = std::fs::read(outbox.batch_path(second.seq)).unwrap();
        outbox.mark_sent(&second, 200, 1).unwrap();
        std::fs::write(outbox.batch_path(second.seq), kept).unwrap();
        drop(outbox);

        let mut again = Outbox::open(dir.path()).unwrap();
        assert_eq!(again.pending().unwrap(), (0, 0));
        assert_eq!(again.next_batch().unwrap(), None);
        assert_eq!(
            again
                .sent()
                .iter()
                .map(|s| (s.seq, s.status, s.tries))
                .collect::<Vec<_>>(),
            [(1, 202, 2), (2, 200, 1)]
        );
        // Numbering goes on after the last acknowledged batch.
        again.enqueue(&config(None), pages("c.example", 1)).unwrap();
        assert_eq!(again.next_batch().unwrap().unwrap().seq, 3);
        drop(again);
        let reopened = Outbox::open(dir.path()).unwrap();
        assert_eq!(reopened.pending().unwrap(), (1, 1));
    }

    #[test]
    fn the_sent_log_keeps_the_last_batches() {
        let dir = tempfile::tempdir().unwrap();
        let mut outbox = Outbox::open(dir.path()).unwrap();
        for _ in 0..(2 * SENT_KEPT + 1) {
            outbox
                .enqueue(&config(None), pages("a.example", 1))
                .unwrap();
            let batch = outbox.next_batch().unwrap().unwrap();
            outbox.mark_sent(&batch, 200, 1).unwrap();
        }
        let reopened = Outbox::open(dir.path()).unwrap();
        assert_eq!(reopened.sent().len(), SENT_KEPT);
        assert_eq!(
            reopened.sent().last().unwrap().seq,
            2 * SENT_KEPT as u64 + 1
        );
        assert_eq!(reopened.next, 2 * SENT_KEPT as u64 + 2);
    }
}
