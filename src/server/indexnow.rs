//! The gateway's IndexNow sender: after a refresh put a new generation in place, its changed
//! landing pages are queued in the repository's outbox (`{state_dir}/{name}/indexnow/`) and
//! sent from there, batch after batch, to the repository's engine ([`crate::indexnow`] for the
//! protocol and the outbox).
//!
//! Everything runs on a thread of its own with a single-threaded runtime: writing the outbox
//! and waiting for an engine never delays a refresh, a swap or a request. A refresh hands its
//! changes over a channel ([`Pinger::enqueue`]) and goes on. A 429, a 5xx or no answer backs off
//! ([`crate::indexnow::retry_wait`]) and sends the same batch again; a 403, 422 or another
//! refusal stops the repository's pings, saying why on the status page, until its
//! `[repository.indexnow]` changes (a reload) or the gateway restarts: what was queued stays in
//! the outbox and goes then.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::{mpsc, watch};

use super::metrics::{self, UpstreamLabels, UpstreamStatus};
use super::{Gateway, Repo};
use crate::changes::Changes;
use crate::indexnow::{self, Batch, IndexNowConfig, Outbox, Queued, Sent, Verdict};

/// Acknowledged batches the status page shows per repository.
const SHOWN: usize = 5;

/// Longest time one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Characters of an engine's answer kept to say why it refused.
const ANSWER_SHOWN: usize = 200;

/// What the refreshes send the sender: one refresh's changes of a repository's landing pages.
struct Queue {
    /// The repository's name (a reload may have removed it by the time they are read).
    name: String,
    changes: Changes,
}

/// The sender's end the gateway keeps: refreshes queue changes through it; [`serve`] starts the
/// thread that sends them ([`Pinger::start`]) and stops it.
///
/// [`serve`]: super::serve
pub(crate) struct Pinger {
    tx: mpsc::UnboundedSender<Queue>,
    rx: Mutex<Option<mpsc::UnboundedReceiver<Queue>>>,
}

impl std::fmt::Debug for Pinger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pinger")
    }
}

impl Default for Pinger {
    fn default() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Pinger {
            tx,
            rx: Mutex::new(Some(rx)),
        }
    }
}

/// The running sender: its thread, and what stops it.
pub(crate) struct Running {
    stop: watch::Sender<bool>,
    thread: std::thread::JoinHandle<()>,
}

impl Running {
    /// Stops the sender (a request under way is dropped: its batch stays in the outbox; the
    /// changes handed over and not yet queued are written to the outbox first) and waits for
    /// its thread.
    pub(crate) async fn stop(self) {
        let _ = self.stop.send(true);
        let thread = self.thread;
        let _ = tokio::task::spawn_blocking(move || thread.join()).await;
    }
}

impl Pinger {
    /// Hands `changes`, the landing pages a refresh of `repo` created, changed or deleted, to
    /// the sender, and returns at once. Those of a first harvest (a baseline) are no news:
    /// nothing is sent of them.
    pub(crate) fn enqueue(&self, repo: &Repo, changes: Changes) {
        if repo.setup().config.indexnow.is_none() {
            return;
        }
        if changes.baseline {
            repo.update(|s| {
                // A refresh whose changes could not be found is taken for a baseline too
                // (`refresh::NextGeneration::changes`, which logs why).
                s.indexnow.get_or_insert_default().note = Some(
                    "the last refresh was a baseline (a first harvest, or one whose changes \
                     could not be found: see the log): nothing of it was sent"
                        .to_owned(),
                );
            });
            return;
        }
        if changes.len() == 0 {
            return;
        }
        let _ = self.tx.send(Queue {
            name: repo.name.clone(),
            changes,
        });
    }

    /// Starts the sender's thread for `gateway` (once; `None` after the first call).
    pub(crate) fn start(&self, gateway: &Arc<Gateway>) -> Option<Running> {
        let rx = self.rx.lock().unwrap_or_else(|e| e.into_inner()).take()?;
        let (stop, mut stopped) = watch::channel(false);
        let gateway = Arc::clone(gateway);
        let thread = std::thread::Builder::new()
            .name("indexnow".to_owned())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        tracing::error!("IndexNow: cannot start the sender's runtime: {e}");
                        return;
                    }
                };
                runtime.block_on(async {
                    let mut rx = rx;
                    let mut pings = HashMap::new();
                    tokio::select! {
                        () = run(&gateway, &mut rx, &mut pings) => {}
                        _ = stopped.wait_for(|stop| *stop) => {}
                    }
                    // What refreshes handed over while a batch was on its way is written to
                    // the outbox before the thread ends, not dropped: it goes after a restart.
                    while let Ok(queue) = rx.try_recv() {
                        take(&gateway, &mut pings, queue);
                    }
                });
            });
        match thread {
            Ok(thread) => Some(Running { stop, thread }),
            Err(e) => {
                tracing::error!("IndexNow: cannot start the sender's thread: {e}");
                None
            }
        }
    }
}

/// What the status page shows of a repository's IndexNow pings.
#[derive(Clone, Debug, Default)]
pub struct PingStatus {
    /// The engine pinged (never the key).
    pub(crate) endpoint: String,
    /// Batches waiting in the outbox, and their pages.
    pub(crate) pending: (u64, u64),
    /// The last acknowledged batches, newest first.
    pub(crate) sent: Vec<Sent>,
    /// What the last refresh queued, and when.
    pub(crate) queued: Option<(SystemTime, Queued)>,
    /// The batch being retried: tries so far, when the next goes, and the last answer.
    pub(crate) retrying: Option<(u32, SystemTime, String)>,
    /// Why the pings stopped (403, 422, ...), if they did.
    pub(crate) stopped: Option<String>,
    /// A note: the baseline harvest sent nothing.
    pub(crate) note: Option<String>,
    /// The outbox cannot be read or written.
    pub(crate) error: Option<String>,
}

/// The sender's own state of one repository.
struct Pings {
    outbox: Outbox,
    pending: (u64, u64),
    /// Tries of the batch at the head of the outbox that failed in a row.
    failed: u32,
    /// No try before this.
    retry_at: Option<Instant>,
    /// The pings stopped under the settings of this fingerprint, and why.
    stopped: Option<(String, String)>,
    /// The outbox could not be read or written, last time.
    error: Option<String>,
}

/// Queues what the refreshes hand over and sends the outboxes, until dropped.
async fn run(
    gateway: &Gateway,
    rx: &mut mpsc::UnboundedReceiver<Queue>,
    pings: &mut HashMap<String, Pings>,
) {
    let client = match reqwest::Client::builder()
        .user_agent(crate::config::DEFAULT_USER_AGENT)
        .timeout(REQUEST_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
    {
        Ok(client) => client,
        Err(e) => {
            tracing::error!("IndexNow: cannot set up the HTTP client: {e}");
            return;
        }
    };
    loop {
        while let Ok(queue) = rx.try_recv() {
            take(gateway, pings, queue);
        }
        let next = deliver_all(gateway, &client, pings).await;
        let wait = next.map(tokio::time::Instant::from_std);
        tokio::select! {
            queue = rx.recv() => match queue {
                Some(queue) => take(gateway, pings, queue),
                None => return,
            },
            () = async {
                match wait {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => {}
        }
    }
}

/// The pings of `repo`, its outbox opened at the first use; `Err` says why it cannot be.
fn pings_of<'a>(
    pings: &'a mut HashMap<String, Pings>,
    repo: &Repo,
) -> Result<&'a mut Pings, String> {
    if !pings.contains_key(&repo.name) {
        let dir = repo.dir.join(super::generation::OUTBOX);
        let outbox = Outbox::open(&dir)
            .map_err(|e| format!("cannot open the outbox {}: {e}", dir.display()))?;
        let pending = outbox
            .pending()
            .map_err(|e| format!("cannot read the outbox {}: {e}", dir.display()))?;
        pings.insert(
            repo.name.clone(),
            Pings {
                outbox,
                pending,
                failed: 0,
                retry_at: None,
                stopped: None,
                error: None,
            },
        );
    }
    Ok(pings.get_mut(&repo.name).expect("inserted above"))
}

/// Writes one refresh's changes into its repository's outbox.
fn take(gateway: &Gateway, pings: &mut HashMap<String, Pings>, queue: Queue) {
    let Some(repo) = gateway.repo(&queue.name) else {
        return;
    };
    let Some(config) = repo.setup().config.indexnow.clone() else {
        return;
    };
    let written = pings_of(pings, &repo).and_then(|p| {
        let queued = queue_changes(&mut p.outbox, &config, &queue.changes);
        p.error = queued.as_ref().err().cloned();
        let queued = queued?;
        p.pending.0 += queued.batches;
        p.pending.1 += queued.urls;
        Ok(queued)
    });
    match written {
        Ok(queued) => {
            tracing::info!(
                repository = repo.name,
                batches = queued.batches,
                urls = queued.urls,
                outside_key_location = queued.outside,
                "IndexNow: the refresh's changed pages are queued"
            );
            repo.update(|s| {
                let status = s.indexnow.get_or_insert_default();
                status.queued = Some((queue.changes.seen, queued));
                status.note = None;
            });
        }
        Err(e) => {
            tracing::warn!(repository = repo.name, "IndexNow: {e}");
            repo.update(|s| s.indexnow.get_or_insert_default().error = Some(e));
        }
    }
}

/// Writes `changes` into `outbox` under `config`; `Err` says what failed (the batches written
/// before a read error stay, and are sent).
fn queue_changes(
    outbox: &mut Outbox,
    config: &IndexNowConfig,
    changes: &Changes,
) -> Result<Queued, String> {
    let iter = changes
        .iter()
        .map_err(|e| format!("cannot read the refresh's changes: {e}"))?;
    let mut unread = None;
    let pages = iter.map_while(|change| match change {
        Ok(c) => Some((c.url, c.kind)),
        Err(e) => {
            unread = Some(e);
            None
        }
    });
    let queued = outbox
        .enqueue(config, pages)
        .map_err(|e| format!("cannot write the outbox: {e}"))?;
    match unread {
        Some(e) => Err(format!(
            "cannot read the refresh's changes to their end ({} pages queued): {e}",
            queued.urls
        )),
        None => Ok(queued),
    }
}

/// Sends what every repository's outbox holds, as far as its engine lets; returns when the next
/// retry is due, if one waits.
async fn deliver_all(
    gateway: &Gateway,
    client: &reqwest::Client,
    pings: &mut HashMap<String, Pings>,
) -> Option<Instant> {
    let mut next: Option<Instant> = None;
    for repo in gateway.repos() {
        let Some(config) = repo.setup().config.indexnow.clone() else {
            continue;
        };
        let p = match pings_of(pings, &repo) {
            Ok(p) => p,
            Err(e) => {
                repo.update(|s| s.indexnow.get_or_insert_default().error = Some(e));
                continue;
            }
        };
        deliver(gateway, client, &repo, &config, p).await;
        show(&repo, &config, p);
        if let Some(at) = p.retry_at {
            next = Some(next.map_or(at, |n| n.min(at)));
        }
    }
    next
}

/// Sends `repo`'s batches in order until the outbox is empty, the engine asks to wait, or it
/// refuses (the pings stop).
async fn deliver(
    gateway: &Gateway,
    client: &reqwest::Client,
    repo: &Repo,
    config: &IndexNowConfig,
    p: &mut Pings,
) {
    let fingerprint = config.fingerprint();
    match &p.stopped {
        Some((under, _)) if *under == fingerprint => return,
        Some(_) => {
            tracing::info!(
                repository = repo.name,
                "IndexNow: the settings changed; sending again"
            );
            p.stopped = None;
            p.failed = 0;
            p.retry_at = None;
        }
        None => {}
    }
    if p.retry_at.is_some_and(|at| at > Instant::now()) {
        return;
    }
    p.retry_at = None;
    p.error = None;
    loop {
        let batch = match p.outbox.next_batch() {
            Ok(Some(batch)) => batch,
            Ok(None) => return,
            Err(e) => {
                let e = format!("cannot read the outbox: {e}");
                tracing::warn!(repository = repo.name, "IndexNow: {e}");
                p.error = Some(e);
                return;
            }
        };
        let answer = send(client, config, &batch).await;
        let m = &gateway.metrics;
        m.indexnow_requests
            .get_or_create(&UpstreamLabels {
                repository: m.label(&repo.name),
                status: UpstreamStatus(answer.status),
            })
            .inc();
        let tries = p.failed + 1;
        match indexnow::verdict(answer.status, config, &batch.host) {
            Verdict::Received => {
                let status = answer.status.unwrap_or_default();
                if let Err(e) = p.outbox.mark_sent(&batch, status, tries) {
                    // Sent but not marked: a restart sends it again, once.
                    let e = format!("cannot mark a sent batch in the outbox: {e}");
                    tracing::warn!(repository = repo.name, "IndexNow: {e}");
                    p.error = Some(e);
                    return;
                }
                tracing::info!(
                    repository = repo.name,
                    host = batch.host,
                    urls = batch.urls.len(),
                    status,
                    tries,
                    "IndexNow: batch received"
                );
                m.indexnow_urls
                    .get_or_create(&metrics::repo(&m.label(&repo.name)))
                    .inc_by(batch.urls.len() as u64);
                p.failed = 0;
                p.pending.0 = p.pending.0.saturating_sub(1);
                p.pending.1 = p.pending.1.saturating_sub(batch.urls.len() as u64);
                show(repo, config, p);
            }
            Verdict::Retry => {
                p.failed = tries;
                let wait = indexnow::retry_wait(tries, answer.retry_after);
                p.retry_at = Some(Instant::now() + wait);
                tracing::warn!(
                    repository = repo.name,
                    "IndexNow: {}; trying again in {wait:?}",
                    answer.said
                );
                repo.update(|s| {
                    s.indexnow.get_or_insert_default().retrying =
                        Some((tries, SystemTime::now() + wait, answer.said.clone()));
                });
                return;
            }
            Verdict::Stop(why) => {
                let why = match answer.said.is_empty() {
                    true => why,
                    false => format!("{why} (it said: {})", answer.said),
                };
                tracing::error!(
                    repository = repo.name,
                    "IndexNow: pings stopped until [repository.indexnow] changes or the gateway restarts: {why}"
                );
                p.stopped = Some((fingerprint, why));
                return;
            }
        }
    }
}

/// An engine's answer, as the sender reads it.
struct Answer {
    /// Its status; `None`: no answer.
    status: Option<u16>,
    /// Its `Retry-After`, in seconds or as a date.
    retry_after: Option<Duration>,
    /// What it said, short, with the key taken out: the body's start, or the error.
    said: String,
}

/// Posts `batch` to `config`'s engine.
async fn send(client: &reqwest::Client, config: &IndexNowConfig, batch: &Batch) -> Answer {
    let request = client
        .post(config.endpoint.clone())
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/json; charset=utf-8",
        )
        .body(indexnow::body(batch, config));
    let response = match request.send().await {
        Ok(response) => response,
        Err(e) => {
            return Answer {
                status: None,
                retry_after: None,
                said: indexnow::redact(
                    &format!("no answer: {}", crate::error::chain(&e)),
                    &config.key,
                ),
            };
        }
    };
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.trim()
                .parse::<u64>()
                .map(Duration::from_secs)
                .ok()
                .or_else(|| {
                    httpdate::parse_http_date(v)
                        .ok()
                        .map(|t| t.duration_since(SystemTime::now()).unwrap_or_default())
                })
        });
    let body = response.text().await.unwrap_or_default();
    let start: String = body.trim().chars().take(ANSWER_SHOWN).collect();
    Answer {
        status: Some(status),
        retry_after,
        said: indexnow::redact(&format!("{status}: {start}"), &config.key)
            .trim_end_matches([' ', ':'])
            .to_owned(),
    }
}

/// Puts `p` on `repo`'s status.
fn show(repo: &Repo, config: &IndexNowConfig, p: &Pings) {
    let sent: Vec<Sent> = p.outbox.sent().iter().rev().take(SHOWN).cloned().collect();
    repo.update(|s| {
        let status = s.indexnow.get_or_insert_default();
        // An endpoint may carry the key in its query: shown without it.
        status.endpoint = indexnow::redact(config.endpoint.as_str(), &config.key);
        status.pending = p.pending;
        status.sent = sent;
        status.stopped = p.stopped.as_ref().map(|(_, why)| why.clone());
        if p.retry_at.is_none() {
            status.retrying = None;
        }
        status.error = p.error.clone();
    });
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::path::Path;

    use http_body_util::{BodyExt, Full};
    use hyper::body::Bytes;

    use super::*;

    const KEY: &str = "loopback-test-key-0042";

    /// What the loopback receiver was sent, request after request.
    #[derive(Debug)]
    struct Got {
        host: String,
        urls: Vec<String>,
    }

    /// A loopback IndexNow engine: answers each request with the next status of its script
    /// (200 when it runs out; 429 with `Retry-After: 1`; 0: never answers), checking every request as an engine
    /// would: POST to its path, JSON in UTF-8, the key, at most 10,000 URLs, all of the host.
    struct Receiver {
        endpoint: String,
        got: Arc<Mutex<Vec<Got>>>,
        problems: Arc<Mutex<Vec<String>>>,
        script: Arc<Mutex<VecDeque<u16>>>,
    }

    impl Receiver {
        async fn start(script: &[u16]) -> Receiver {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let endpoint = format!("http://{}/indexnow", listener.local_addr().unwrap());
            let receiver = Receiver {
                endpoint,
                got: Arc::default(),
                problems: Arc::default(),
                script: Arc::new(Mutex::new(script.iter().copied().collect())),
            };
            let (got, problems, script) = (
                Arc::clone(&receiver.got),
                Arc::clone(&receiver.problems),
                Arc::clone(&receiver.script),
            );
            tokio::spawn(async move {
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        return;
                    };
                    let (got, problems, script) =
                        (Arc::clone(&got), Arc::clone(&problems), Arc::clone(&script));
                    let service = hyper::service::service_fn(move |req| {
                        let (got, problems, script) =
                            (Arc::clone(&got), Arc::clone(&problems), Arc::clone(&script));
                        async move {
                            let answer = check(req, &got, &problems).await;
                            let status = script.lock().unwrap().pop_front().unwrap_or(answer);
                            if status == 0 {
                                // Silent: the request stays on its way.
                                std::future::pending::<()>().await;
                            }
                            let mut response = hyper::Response::new(Full::new(Bytes::from(
                                format!("answered {status} for key {KEY}"),
                            )));
                            *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
                            if status == 429 {
                                response
                                    .headers_mut()
                                    .insert("retry-after", "1".parse().unwrap());
                            }
                            Ok::<_, std::convert::Infallible>(response)
                        }
                    });
                    tokio::spawn(
                        hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), service),
                    );
                }
            });
            receiver
        }

        fn requests(&self) -> usize {
            self.got.lock().unwrap().len()
        }

        fn urls(&self) -> Vec<String> {
            let got = self.got.lock().unwrap();
            got.iter().flat_map(|g| g.urls.clone()).collect()
        }
    }

    /// Checks one request as the engine would; 200 if it is right, 400 (and a problem noted)
    /// if not.
    async fn check(
        req: hyper::Request<hyper::body::Incoming>,
        got: &Mutex<Vec<Got>>,
        problems: &Mutex<Vec<String>>,
    ) -> u16 {
        let mut wrong = Vec::new();
        if req.method() != hyper::Method::POST || req.uri().path() != "/indexnow" {
            wrong.push(format!("{} {}", req.method(), req.uri()));
        }
        let content_type = req.headers().get("content-type").cloned();
        if content_type.as_ref().and_then(|v| v.to_str().ok())
            != Some("application/json; charset=utf-8")
        {
            wrong.push(format!("content type {content_type:?}"));
        }
        let body = req.into_body().collect().await.unwrap().to_bytes();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let fields: Vec<&String> = json
            .as_object()
            .map(|o| o.keys().collect())
            .unwrap_or_default();
        if fields
            .iter()
            .any(|f| !["host", "key", "keyLocation", "urlList"].contains(&f.as_str()))
        {
            wrong.push(format!("fields {fields:?}"));
        }
        if json["key"] != KEY {
            wrong.push("another key".to_owned());
        }
        let host = json["host"].as_str().unwrap_or_default().to_owned();
        let urls: Vec<String> = (json["urlList"].as_array().cloned().unwrap_or_default())
            .iter()
            .map(|u| u.as_str().unwrap_or_default().to_owned())
            .collect();
        if urls.is_empty() || urls.len() > 10_000 {
            wrong.push(format!("{} URLs in one request", urls.len()));
        }
        let foreign = urls
            .iter()
            .filter(|u| {
                url::Url::parse(u)
                    .ok()
                    .and_then(|u| u.host_str().map(str::to_owned))
                    != Some(host.clone())
            })
            .count();
        if foreign > 0 {
            wrong.push(format!("{foreign} URLs not of host {host}"));
        }
        got.lock().unwrap().push(Got { host, urls });
        if wrong.is_empty() {
            200
        } else {
            problems.lock().unwrap().extend(wrong);
            400
        }
    }

    /// A gateway of one repository `r` pinging `endpoint`, its state in `state`.
    fn gateway(state: &Path, endpoint: &str) -> Arc<Gateway> {
        let text = format!(
            "[server]\nstate_dir = {:?}\n[[repository]]\nname = \"r\"\nbase_url = \"r.xml\"\n\
             [repository.indexnow]\nkey = \"{KEY}\"\nendpoint = \"{endpoint}\"\n",
            state.display().to_string()
        );
        let config = crate::Config::parse(&text, "bridge.toml", state).unwrap();
        let public = url::Url::parse("https://maps.example/").unwrap();
        Arc::new(Gateway::new(&config, public).unwrap())
    }

    /// A refresh's changes: `n` pages of each host, created, updated and deleted in turn.
    fn pages(hosts: &[(&str, usize)]) -> Changes {
        let budget = crate::spill::Budget::new(std::env::temp_dir(), 1 << 20);
        let mut recorder = crate::changes::Recorder::new(&budget);
        for &(host, n) in hosts {
            for i in 0..n {
                let kind = crate::changes::Kind::ALL[i % 3];
                let url = format!("https://{host}/record/{i}");
                (recorder.push(crate::changes::Change {
                    url,
                    kind,
                    lastmod: None,
                }))
                .unwrap();
            }
        }
        recorder.finish(SystemTime::now()).unwrap()
    }

    async fn wait_for(mut done: impl FnMut() -> bool, what: &str) {
        let start = Instant::now();
        while !done() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "timed out waiting until {what}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn ping_status(gateway: &Gateway) -> PingStatus {
        gateway.repos()[0].status().indexnow.unwrap_or_default()
    }

    /// Every batch reaches the engine, one host and at most 10,000 URLs a request; a 429 is
    /// tried again after its Retry-After; the status page, the metrics and the log show the
    /// batches and never the key; the gateway serves the key file.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn batches_reach_the_engine_and_a_429_is_tried_again() {
        let receiver = Receiver::start(&[429]).await;
        let state = tempfile::tempdir().unwrap();
        let g = gateway(state.path(), &receiver.endpoint);
        let pinger = g.indexnow.start(&g).unwrap();
        let repo = g.repos()[0].clone();
        g.indexnow
            .enqueue(&repo, Changes::baseline(SystemTime::now()));
        let noted = ping_status(&g).note.unwrap_or_default();
        assert!(noted.contains("baseline"), "{noted}");
        (g.indexnow).enqueue(&repo, pages(&[("a.example", 20_001), ("b.example", 2)]));
        wait_for(
            || ping_status(&g).sent.len() == 4,
            "four batches are received",
        )
        .await;
        assert!(
            receiver.problems.lock().unwrap().is_empty(),
            "{:?}",
            receiver.problems
        );
        // The first batch twice (429, then 200), then the three others once each.
        assert_eq!(receiver.requests(), 5);
        let urls = receiver.urls();
        let distinct: std::collections::BTreeSet<&String> = urls.iter().collect();
        // The baseline's pages are among these: they would have made a request of their own.
        assert_eq!((urls.len(), distinct.len()), (30_003, 20_003));
        let got = receiver
            .got
            .lock()
            .unwrap()
            .iter()
            .map(|g| (g.host.clone(), g.urls.len()))
            .collect::<Vec<_>>();
        assert_eq!(
            got,
            [
                ("a.example".to_owned(), 10_000),
                ("a.example".to_owned(), 10_000),
                ("a.example".to_owned(), 10_000),
                ("a.example".to_owned(), 1),
                ("b.example".to_owned(), 2)
            ]
        );
        let status = ping_status(&g);
        assert_eq!(status.pending, (0, 0));
        assert_eq!(status.sent[3].tries, 2, "{:?}", status.sent);
        assert!(status.stopped.is_none() && status.retrying.is_none());

        let page = crate::server::status::render(&g);
        assert!(page.contains("IndexNow (key set)"), "{page}");
        assert!(
            page.contains("batch 4 (b.example: 1 created, 1 updated, 0 deleted): 200"),
            "{page}"
        );
        let metrics = crate::server::scrape::scrape(&g, None);
        for want in [
            "oai_bridge_indexnow_requests_total{repository=\"r\",status=\"429\"} 1",
            "oai_bridge_indexnow_requests_total{repository=\"r\",status=\"200\"} 4",
            "oai_bridge_indexnow_urls_sent_total{repository=\"r\"} 20003",
            "oai_bridge_indexnow_pending_urls{repository=\"r\"} 0",
            "oai_bridge_indexnow_stopped{repository=\"r\"} 0",
        ] {
            assert!(metrics.contains(want), "metrics lack {want}:\n{metrics}");
        }
        for shown in [
            &page,
            &metrics,
            &format!("{:?}", g.repos()[0].setup().config),
        ] {
            assert!(!shown.contains(KEY), "the key is shown");
        }
        assert_eq!(
            super::super::http::key_file(&g, &format!("{KEY}.txt")),
            Some(KEY.to_owned())
        );
        assert_eq!(super::super::http::key_file(&g, "other-key-0000.txt"), None);
        pinger.stop().await;
    }

    /// A 403 stops the pings and says why; what was queued stays in the outbox and goes after a
    /// restart, and no batch the engine acknowledged goes twice.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_403_stops_the_pings_and_a_restart_neither_loses_nor_resends() {
        let receiver = Receiver::start(&[200, 403]).await;
        let state = tempfile::tempdir().unwrap();
        let g = gateway(state.path(), &receiver.endpoint);
        let pinger = g.indexnow.start(&g).unwrap();
        let repo = g.repos()[0].clone();
        let changes = pages(&[("a.example", 2), ("b.example", 3), ("c.example", 1)]);
        g.indexnow.enqueue(&repo, changes);
        wait_for(|| ping_status(&g).stopped.is_some(), "the pings stop").await;
        let status = ping_status(&g);
        let why = status.stopped.clone().unwrap();
        assert!(why.starts_with("403 Forbidden"), "{why}");
        assert!(why.contains("https://b.example/***.txt"), "{why}");
        assert!(!why.contains(KEY), "{why}");
        assert_eq!(status.pending, (2, 4));
        let page = crate::server::status::render(&g);
        assert!(page.contains("IndexNow pings stopped"), "{page}");
        assert!(!page.contains(KEY));
        // A later refresh's changes are queued, not sent.
        g.indexnow.enqueue(&repo, pages(&[("d.example", 1)]));
        wait_for(
            || ping_status(&g).pending == (3, 5),
            "the next changes are queued",
        )
        .await;
        assert_eq!(receiver.requests(), 2);
        pinger.stop().await;
        drop(repo);
        drop(g);

        let g = gateway(state.path(), &receiver.endpoint);
        let pinger = g.indexnow.start(&g).unwrap();
        let start = Instant::now();
        while !(ping_status(&g).pending == (0, 0) && ping_status(&g).sent.len() == 4) {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the outbox is not sent: {:?}; hosts received {:?}",
                ping_status(&g),
                receiver
                    .got
                    .lock()
                    .unwrap()
                    .iter()
                    .map(|g| g.host.clone())
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            receiver.problems.lock().unwrap().is_empty(),
            "{:?}",
            receiver.problems
        );
        let hosts: Vec<String> = receiver
            .got
            .lock()
            .unwrap()
            .iter()
            .map(|g| g.host.clone())
            .collect();
        assert_eq!(
            hosts,
            [
                "a.example",
                "b.example",
                "b.example",
                "c.example",
                "d.example"
            ]
        );
        pinger.stop().await;
    }

    /// Changes handed over while a batch is on its way (the engine has not answered yet) are
    /// not lost when the gateway stops then: they are written to the outbox, and go after the
    /// restart, after the batch that was on its way.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn changes_handed_over_during_a_send_survive_a_stop() {
        let silent = Receiver::start(&[0]).await;
        let state = tempfile::tempdir().unwrap();
        let g = gateway(state.path(), &silent.endpoint);
        let pinger = g.indexnow.start(&g).unwrap();
        let repo = g.repos()[0].clone();
        g.indexnow.enqueue(&repo, pages(&[("a.example", 1)]));
        wait_for(|| silent.requests() == 1, "the first batch is on its way").await;
        g.indexnow.enqueue(&repo, pages(&[("b.example", 1)]));
        pinger.stop().await;
        drop(repo);
        drop(g);

        let receiver = Receiver::start(&[]).await;
        let g = gateway(state.path(), &receiver.endpoint);
        let pinger = g.indexnow.start(&g).unwrap();
        wait_for(|| receiver.requests() >= 2, "the outbox is sent").await;
        let hosts: Vec<String> = (receiver.got.lock().unwrap().iter())
            .map(|g| g.host.clone())
            .collect();
        assert_eq!(hosts, ["a.example", "b.example"]);
        pinger.stop().await;
    }
}
