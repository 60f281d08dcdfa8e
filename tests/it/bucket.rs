//! Issue 23 point 1: `export --out s3://...` against a real S3 implementation (moto's server,
//! started here on a loopback port; `.ci/run` installs it). A crawler that starts at the
//! bucket's robots.txt always finds a complete generation: after an export, after a second one
//! that changed one record (and uploaded only what changed), and after an export killed with
//! SIGKILL part-way through its uploads.
//!
//! moto is found through `OAI_BRIDGE_TEST_MOTO` (the path of `moto_server`) or on the `PATH`.
//! Without it these tests say so and pass, except under CI (`CI` set), where they fail: CI
//! installs it.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::TryStreamExt as _;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt as _};
use tokio::sync::Notify;

use crate::faults::SCOPE;
use crate::server::{TestRecord, TestServer, numbered};

/// Where the bucket's files are served (a CDN in front of it).
const PUBLIC_URL: &str = "https://cdn.example/repo/";
const PREFIX: &str = "sites/repo";
/// What moto accepts; the secret must never show in anything the bridge prints.
const KEY_ID: &str = "AKIDTESTTESTTEST";
const SECRET: &str = "secret-that-must-never-show-4f1c";

/// A moto S3 server on a loopback port, stopped on drop.
pub(crate) struct Moto {
    child: Child,
    pub(crate) endpoint: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Moto {
    /// Starts moto, or `None` (outside CI) when it is not installed.
    pub(crate) fn start() -> Option<Moto> {
        let Some(program) = Moto::program() else {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must install moto (OAI_BRIDGE_TEST_MOTO or moto_server on the PATH)"
            );
            eprintln!("skipped: moto_server not found (set OAI_BRIDGE_TEST_MOTO to run)");
            return None;
        };
        Some(Moto::start_program(&program))
    }

    /// Where moto's `moto_server` is: `OAI_BRIDGE_TEST_MOTO`, or on the `PATH`.
    pub(crate) fn program() -> Option<std::path::PathBuf> {
        std::env::var_os("OAI_BRIDGE_TEST_MOTO")
            .map(std::path::PathBuf::from)
            .or_else(|| {
                let path = std::env::var_os("PATH")?;
                std::env::split_paths(&path)
                    .map(|dir| dir.join("moto_server"))
                    .find(|p| p.is_file())
            })
    }

    /// Starts the moto server `program`.
    pub(crate) fn start_program(program: &std::path::Path) -> Moto {
        let mut child = Command::new(program)
            .args(["-H", "127.0.0.1", "-p", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", program.display()));
        // " * Running on http://127.0.0.1:PORT"
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let mut lines = stderr.lines();
        let endpoint = loop {
            let line = lines
                .next()
                .expect("moto printed where it runs")
                .expect("moto's stderr");
            if let Some(at) = line.find("http://127.0.0.1:") {
                break line[at..].trim().to_owned();
            }
        };
        // Keep draining moto's log, so that it never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Moto { child, endpoint }
    }

    /// Creates the bucket `name` and opens it as the tests read it.
    pub(crate) async fn bucket(&self, name: &str) -> AmazonS3 {
        let created = reqwest::Client::new()
            .put(format!("{}/{name}", self.endpoint))
            .send()
            .await
            .unwrap();
        assert!(created.status().is_success(), "{:?}", created.status());
        AmazonS3Builder::new()
            .with_endpoint(&self.endpoint)
            .with_allow_http(true)
            .with_bucket_name(name)
            .with_region("us-east-1")
            .with_access_key_id(KEY_ID)
            .with_secret_access_key(SECRET)
            .build()
            .unwrap()
    }
}

/// The bridge with the bucket's credentials and `endpoint` in its environment.
fn bridge(endpoint: &str, args: &[String]) -> Command {
    let mut command = crate::golden::bridge();
    command
        .args(args)
        .env("AWS_ACCESS_KEY_ID", KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ENDPOINT", endpoint)
        .env("AWS_ALLOW_HTTP", "true")
        // The most the bridge logs: not even this shows a secret.
        .env("RUST_LOG", "debug");
    for var in [
        "OAI_BRIDGE_CONFIG",
        "OAI_BRIDGE_PUBLIC_URL",
        "OAI_BRIDGE_LOG_FORMAT",
    ] {
        command.env_remove(var);
    }
    command
}

fn export_args(server: &TestServer, bucket: &str, extra: &[&str]) -> Vec<String> {
    let out = format!("s3://{bucket}/{PREFIX}/");
    let mut args: Vec<String> = [
        "export",
        "--base-url",
        &server.url(),
        "--out",
        &out,
        "--public-url",
        PUBLIC_URL,
        "--scope",
        SCOPE,
        "--max-urls",
        "10",
        "--no-progress",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// Runs an export to completion; its stdout. Fails the test on a non-zero exit or a secret
/// in the output.
async fn export(endpoint: &str, args: Vec<String>) -> String {
    let endpoint = endpoint.to_owned();
    let output = tokio::task::spawn_blocking(move || bridge(&endpoint, &args).output())
        .await
        .unwrap()
        .expect("run oai-bridge");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    );
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(!stdout.contains(SECRET) && !stderr.contains(SECRET));
    stdout
}

/// A site in a bucket: its files under `prefix`, served at `public_url`.
pub(crate) struct Site<'a> {
    pub(crate) bucket: &'a AmazonS3,
    pub(crate) prefix: &'a str,
    pub(crate) public_url: &'a str,
}

impl Site<'_> {
    /// What an export of these tests publishes to `bucket`.
    fn exported(bucket: &AmazonS3) -> Site<'_> {
        Site {
            bucket,
            prefix: PREFIX,
            public_url: PUBLIC_URL,
        }
    }

    /// What a crawler finds starting at the site's robots.txt: the bytes of every file it
    /// reaches (robots.txt, the indexes, the shards), by name, and every page URL the shards
    /// list. Fails on any file that is named but missing.
    pub(crate) async fn crawl(&self) -> (BTreeMap<String, Vec<u8>>, BTreeSet<String>) {
        let robots = self.read("robots.txt").await;
        let indexes: Vec<String> = String::from_utf8(robots.clone())
            .unwrap()
            .lines()
            .filter_map(|l| l.strip_prefix("Sitemap: "))
            .map(str::to_owned)
            .collect();
        let (mut files, pages) = self.crawl_from(indexes).await;
        files.insert("robots.txt".to_owned(), robots);
        (files, pages)
    }

    /// What a crawler finds starting at the indexes `todo` (their URLs).
    pub(crate) async fn crawl_from(
        &self,
        mut todo: Vec<String>,
    ) -> (BTreeMap<String, Vec<u8>>, BTreeSet<String>) {
        let mut files = BTreeMap::new();
        let mut pages = BTreeSet::new();
        while let Some(url) = todo.pop() {
            let name = url
                .strip_prefix(self.public_url)
                .unwrap_or_else(|| panic!("{url} is not under {}", self.public_url))
                .to_owned();
            if files.contains_key(&name) {
                continue;
            }
            let bytes = self.read(&name).await;
            let text = String::from_utf8(bytes.clone()).unwrap();
            let doc = roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
            let index = doc.root_element().tag_name().name() == "sitemapindex";
            for loc in doc.descendants().filter(|n| n.has_tag_name("loc")) {
                let loc = loc.text().unwrap().to_owned();
                if index {
                    todo.push(loc);
                } else {
                    pages.insert(loc);
                }
            }
            files.insert(name, bytes);
        }
        (files, pages)
    }

    /// The bytes of `name`, or `None` while the bucket has no such object.
    pub(crate) async fn get(&self, name: &str) -> Option<Vec<u8>> {
        match self.bucket.get(&self.key(name)).await {
            Ok(got) => Some(got.bytes().await.unwrap().to_vec()),
            Err(object_store::Error::NotFound { .. }) => None,
            Err(e) => panic!("{name} cannot be read: {e}"),
        }
    }

    pub(crate) async fn read(&self, name: &str) -> Vec<u8> {
        match self.bucket.get(&self.key(name)).await {
            Ok(got) => got.bytes().await.unwrap().to_vec(),
            Err(e) => panic!("{name} is named but cannot be read: {e}"),
        }
    }

    fn key(&self, name: &str) -> Key {
        Key::from(format!("{}/{name}", self.prefix))
    }

    /// Every object under the prefix.
    pub(crate) async fn objects(&self) -> BTreeSet<String> {
        let prefix = Key::from(self.prefix);
        let listed: Vec<_> = self.bucket.list(Some(&prefix)).try_collect().await.unwrap();
        listed
            .into_iter()
            .map(|meta| meta.location.as_ref()[self.prefix.len() + 1..].to_owned())
            .collect()
    }
}

/// The pages of `records`, as the sitemaps list them.
pub(crate) fn pages_of(records: &[TestRecord]) -> BTreeSet<String> {
    records
        .iter()
        .filter(|r| !r.deleted)
        .flat_map(|r| r.dc_identifiers.clone())
        .collect()
}

/// `records` with every datestamp moved to `day` of June 2024 (every shard's lastmod changes).
fn redated(records: &[TestRecord], day: u32) -> Vec<TestRecord> {
    let mut records = records.to_vec();
    for r in &mut records {
        r.datestamp = format!("2024-06-{day:02}");
    }
    records
}

#[tokio::test]
async fn an_export_to_s3_is_complete_and_the_next_uploads_only_what_changed() {
    let Some(moto) = Moto::start() else { return };
    let bucket = moto.bucket("change").await;
    let site = Site::exported(&bucket);
    let records = numbered(95);
    let server = TestServer::start(records.clone());

    let first = export(
        &moto.endpoint,
        export_args(&server, "change", &["--signmap"]),
    )
    .await;
    assert!(first.contains("uploaded        "), "{first}");
    let (files, pages) = site.crawl().await;
    assert_eq!(pages, pages_of(&records));
    // Ten shards of the sitemap, named after their content; the index, the Signmap's.
    let shards: BTreeSet<&String> = (files.keys())
        .filter(|n| n.starts_with("sitemap-"))
        .collect();
    assert_eq!(shards.len(), 10, "{:?}", files.keys());
    assert!(
        shards
            .iter()
            .all(|n| n.len() == "sitemap-N-0123456789abcdef.xml".len()
                || n.len() == "sitemap-NN-0123456789abcdef.xml".len()),
        "{shards:?}"
    );
    assert!(files.contains_key("sitemap.xml") && files.contains_key("signmap.xml"));
    // As the gateway serves them: a crawler and a CDN read the type and the caching.
    let head = |name: &str| {
        let key = site.key(name);
        let bucket = &bucket;
        async move { bucket.get(&key).await.unwrap().attributes }
    };
    let index = head("sitemap.xml").await;
    let content_type = |a: &object_store::Attributes| {
        a.get(&object_store::Attribute::ContentType)
            .map(|v| v.to_string())
    };
    let cache = |a: &object_store::Attributes| {
        a.get(&object_store::Attribute::CacheControl)
            .map(|v| v.to_string())
    };
    assert_eq!(
        content_type(&index).as_deref(),
        Some("application/xml; charset=utf-8")
    );
    assert_eq!(cache(&index).as_deref(), Some("public, max-age=3600"));
    let shard = head(shards.iter().next().unwrap()).await;
    assert_eq!(
        cache(&shard).as_deref(),
        Some("public, max-age=31536000, immutable")
    );
    let robots = head("robots.txt").await;
    assert_eq!(
        content_type(&robots).as_deref(),
        Some("text/plain; charset=utf-8")
    );

    // One record changes: its shard and the index go up again (with the Signmap's shard and
    // index, which list the same record), nothing else.
    let mut changed = records.clone();
    changed[49].datestamp = "2024-06-30".to_owned();
    changed[49].title = "Record 50, revised".to_owned();
    server.set_records(changed.clone());
    let second = export(
        &moto.endpoint,
        export_args(&server, "change", &["--signmap"]),
    )
    .await;
    let (after, pages) = site.crawl().await;
    assert_eq!(pages, pages_of(&changed));
    let names = |f: &BTreeMap<String, Vec<u8>>| f.keys().cloned().collect::<BTreeSet<_>>();
    let new: Vec<String> = names(&after).difference(&names(&files)).cloned().collect();
    assert_eq!(
        new.iter().filter(|n| n.starts_with("sitemap-")).count(),
        1,
        "one sitemap shard renamed: {new:?}"
    );
    assert!(
        second.contains("uploaded        4 of"),
        "the sitemap's shard and index, the Signmap's shard and index: {second}"
    );
    // The shard the old index named stays for a crawler that holds that index.
    let gone: Vec<String> = names(&files).difference(&names(&after)).cloned().collect();
    assert_eq!(gone.len(), 2, "{gone:?}");
    let stored = site.objects().await;
    assert!(
        gone.iter().all(|n| stored.contains(n)),
        "{gone:?} deleted early"
    );
}

/// What a proxy does with a PUT past its allowance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Held {
    /// Never answers, as a network that stops mid-upload.
    Stall,
    /// Passes it on once [`Proxy::release`] is called, as a stall that ends.
    Pause,
    /// Answers 403 AccessDenied, as a bucket whose credentials were revoked.
    Refuse,
}

/// What a proxy does with every request, whatever its method, while it is set
/// ([`Proxy::fail`]): the bucket failing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BucketFault {
    /// Passes requests on (and holds PUTs past the allowance as `Held` says).
    None = 0,
    /// Answers 500 InternalError, as a bucket that is failing.
    Error = 1,
    /// Accepts the request and answers nothing while the fault lasts, as a bucket that times
    /// out; then passes it on.
    Silent = 2,
}

/// An S3 error answer: `status`, with the error document S3 sends (`code`, `message`).
fn s3_error(
    status: u16,
    code: &str,
    message: &str,
) -> hyper::Response<http_body_util::Full<bytes::Bytes>> {
    let body = format!(
        "<?xml version=\"1.0\"?><Error><Code>{code}</Code><Message>{message}</Message></Error>"
    );
    hyper::Response::builder()
        .status(status)
        .header("content-type", "application/xml")
        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
        .unwrap()
}

/// A proxy in front of moto that lets `allowed` PUTs through and holds every later one;
/// `held` is notified at each held request.
pub(crate) struct Proxy {
    pub(crate) address: String,
    fault: Arc<std::sync::atomic::AtomicU8>,
    /// Parts of paths whose GETs are never answered ([`Proxy::stall_reads_under`]).
    stalled: Arc<std::sync::Mutex<Vec<String>>>,
    allowed: Arc<AtomicUsize>,
    puts: Arc<AtomicUsize>,
    pub(crate) held: Arc<Notify>,
    /// What the held requests of [`Held::Pause`] wait for.
    released: Arc<tokio::sync::Semaphore>,
    /// The path of every PUT, in the order they came.
    pub(crate) paths: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Proxy {
    pub(crate) async fn start(endpoint: String, allowed: usize, mode: Held) -> Proxy {
        use http_body_util::{BodyExt as _, Full};
        use hyper::service::service_fn;
        use hyper_util::rt::TokioIo;

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy = Proxy {
            address: format!("http://{}", listener.local_addr().unwrap()),
            fault: Arc::default(),
            stalled: Arc::default(),
            allowed: Arc::new(AtomicUsize::new(allowed)),
            puts: Arc::new(AtomicUsize::new(0)),
            held: Arc::new(Notify::new()),
            released: Arc::new(tokio::sync::Semaphore::new(0)),
            paths: Arc::default(),
        };
        let shared = (
            Arc::clone(&proxy.allowed),
            Arc::clone(&proxy.puts),
            Arc::clone(&proxy.held),
            reqwest::Client::new(),
            endpoint,
            Arc::clone(&proxy.released),
            Arc::clone(&proxy.paths),
            Arc::clone(&proxy.fault),
            Arc::clone(&proxy.stalled),
        );
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let shared = shared.clone();
                let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                    let (allowed, puts, held, client, endpoint, released, paths, fault, stalled) =
                        shared.clone();
                    async move {
                        let path = request.uri().path().to_owned();
                        let stall = request.method() == hyper::Method::GET
                            && stalled.lock().unwrap().iter().any(|p| path.contains(p));
                        if stall {
                            std::future::pending::<()>().await;
                        }
                        match fault.load(Ordering::SeqCst) {
                            1 => {
                                let failed = s3_error(
                                    500,
                                    "InternalError",
                                    "We encountered an internal error.",
                                );
                                return Ok::<_, std::convert::Infallible>(failed);
                            }
                            2 => {
                                // No answer while the fault lasts; then the request goes on,
                                // late, as to a bucket that recovers (unless its client gave
                                // up on it meanwhile).
                                while fault.load(Ordering::SeqCst) == 2 {
                                    tokio::time::sleep(Duration::from_millis(100)).await;
                                }
                            }
                            _ => {}
                        }
                        if request.method() == hyper::Method::PUT {
                            paths.lock().unwrap().push(request.uri().path().to_owned());
                        }
                        let over = request.method() == hyper::Method::PUT
                            && puts.fetch_add(1, Ordering::SeqCst)
                                >= allowed.load(Ordering::SeqCst)
                            && !(mode == Held::Pause && released.available_permits() > 0);
                        if over {
                            held.notify_one();
                            if mode == Held::Stall {
                                std::future::pending::<()>().await;
                            }
                            if mode == Held::Pause {
                                drop(released.acquire().await.unwrap());
                            }
                        }
                        if over && mode == Held::Refuse {
                            let denied = s3_error(403, "AccessDenied", "Access Denied");
                            return Ok::<_, std::convert::Infallible>(denied);
                        }
                        let (parts, body) = request.into_parts();
                        let body = body.collect().await.unwrap().to_bytes();
                        let url = format!("{endpoint}{}", parts.uri.path_and_query().unwrap());
                        // The signed Host header goes along as it is.
                        let answer = client
                            .request(parts.method, url)
                            .headers(parts.headers)
                            .body(body)
                            .send()
                            .await
                            .unwrap();
                        let mut response = hyper::Response::builder().status(answer.status());
                        for (name, value) in answer.headers() {
                            response = response.header(name, value);
                        }
                        let bytes = answer.bytes().await.unwrap();
                        Ok(response.body(Full::new(bytes)).unwrap())
                    }
                });
                tokio::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        proxy
    }

    /// Never answers a GET from now on whose path contains `part`, as a bucket that stalls on
    /// some objects.
    pub(crate) fn stall_reads_under(&self, part: &str) {
        self.stalled.lock().unwrap().push(part.to_owned());
    }

    /// Makes every request from now on meet `fault` (or none).
    pub(crate) fn fail(&self, fault: BucketFault) {
        self.fault.store(fault as u8, Ordering::SeqCst);
    }

    /// Lets the requests held by [`Held::Pause`] through, and every later one.
    pub(crate) fn release(&self) {
        self.released.add_permits(1 << 20);
    }

    /// Holds every PUT from now on.
    fn hold_from_now(&self) {
        self.allowed
            .store(self.puts.load(Ordering::SeqCst), Ordering::SeqCst);
    }
}

#[tokio::test]
async fn an_export_killed_mid_upload_leaves_the_previous_generation_complete() {
    let Some(moto) = Moto::start() else { return };
    let bucket = moto.bucket("killed").await;
    let site = Site::exported(&bucket);
    let records = numbered(95);
    let server = TestServer::start(records.clone());
    let args = |extra: &[&str]| export_args(&server, "killed", extra);
    export(&moto.endpoint, args(&["--publish-grace-secs", "0"])).await;
    let before = site.crawl().await;
    assert_eq!(before.1, pages_of(&records));

    // Every shard changes; the export is let through its first manifest and two shards, then
    // its uploads hang, and it is killed.
    server.set_records(redated(&records, 10));
    let proxy = Proxy::start(moto.endpoint.clone(), 3, Held::Stall).await;
    let mut child = bridge(&proxy.address, &args(&["--publish-grace-secs", "0"]))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    tokio::time::timeout(Duration::from_secs(60), proxy.held.notified())
        .await
        .expect("the export reached its uploads");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // The two shards let through reach the bucket (the proxy finishes forwarding them).
    until("two new shards went up before the hang", || async {
        let new = site
            .objects()
            .await
            .into_iter()
            .filter(|n| !before.0.contains_key(n) && !n.starts_with(".oai-bridge/"));
        new.count() == 2
    })
    .await;
    // A crawler finds the previous generation, byte for byte.
    assert_eq!(site.crawl().await, before);

    // The next export (of yet other records) publishes in full, and deletes what the killed
    // one left (its grace is 0 here), so the bucket holds exactly the new generation.
    let latest = redated(&records, 20);
    server.set_records(latest.clone());
    let report = export(&moto.endpoint, args(&["--publish-grace-secs", "0"])).await;
    let (files, pages) = site.crawl().await;
    assert_eq!(pages, pages_of(&latest));
    let mut expected: BTreeSet<String> = files.keys().cloned().collect();
    expected.insert(oai_bridge::BUCKET_MANIFEST.to_owned());
    assert_eq!(site.objects().await, expected, "{report}");
}

#[tokio::test]
async fn an_unusable_bucket_fails_before_the_harvest_and_names_it() {
    let Some(moto) = Moto::start() else { return };
    let server = TestServer::start(numbered(3));
    let args = export_args(&server, "no-such-bucket", &[]);
    let endpoint = moto.endpoint.clone();
    let output = tokio::task::spawn_blocking(move || bridge(&endpoint, &args).output())
        .await
        .unwrap()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot list s3://no-such-bucket/sites/repo/"),
        "{stderr}"
    );
    assert!(!stderr.contains(SECRET), "{stderr}");
    assert!(
        server.list_requests().is_empty(),
        "no harvest for a bucket that cannot be used"
    );
}

/// A `serve` process, stopped on drop.
pub(crate) struct Serving {
    pub(crate) child: Child,
    /// `http://127.0.0.1:PORT/` of the public and the admin listener.
    pub(crate) public: String,
    pub(crate) admin: String,
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serving {
    /// Starts `oai-bridge serve` with the bucket's credentials and `endpoint`.
    pub(crate) async fn start(endpoint: &str, args: &[String], token: &str) -> Serving {
        Serving::start_logging(endpoint, args, token, Stdio::null(), "debug").await
    }

    /// [`Serving::start`], its log at `level` (`RUST_LOG`) to `log`.
    pub(crate) async fn start_logging(
        endpoint: &str,
        args: &[String],
        token: &str,
        log: impl Into<Stdio>,
        level: &str,
    ) -> Serving {
        let mut child = bridge(endpoint, args)
            .env("OAI_BRIDGE_ADMIN_TOKEN", token)
            .env("RUST_LOG", level)
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        // "oai-bridge serving on URL", then "  status page  URL".
        let (public, admin) = tokio::task::spawn_blocking(move || {
            let mut lines = BufReader::new(stdout).lines().map(Result::unwrap);
            let public = lines.next().unwrap();
            let admin = lines.next().unwrap();
            std::thread::spawn(move || lines.for_each(drop));
            (public, admin)
        })
        .await
        .unwrap();
        let last = |line: &str| line.split_whitespace().last().unwrap().to_owned();
        Serving {
            child,
            public: last(&public),
            admin: last(&admin),
        }
    }

    /// Asks for a refresh of repository `name` now, with the admin `token`.
    pub(crate) async fn refresh(&self, name: &str, token: &str) {
        let asked = reqwest::Client::new()
            .post(format!("{}-/refresh/{name}", self.admin))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert!(asked.status().is_success(), "{}", asked.status());
    }

    pub(crate) async fn get(&self, path: &str) -> Vec<u8> {
        let answer = reqwest::get(format!("{}{path}", self.public))
            .await
            .unwrap();
        assert!(answer.status().is_success(), "{path}: {}", answer.status());
        answer.bytes().await.unwrap().to_vec()
    }
}

/// Waits up to 60 s for `done`.
pub(crate) async fn until<F: Future<Output = bool>>(what: &str, mut done: impl FnMut() -> F) {
    for _ in 0..600 {
        if done().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("not within 60 s: {what}");
}

#[tokio::test]
async fn a_gateway_publishes_each_generation_to_the_bucket_and_serves_the_same_bytes() {
    let Some(moto) = Moto::start() else { return };
    let bucket = moto.bucket("fleet").await;
    let site = Site {
        bucket: &bucket,
        prefix: "site",
        public_url: "https://cdn.example/",
    };
    let (one_records, two_records) = (numbered(25), numbered(12));
    let one = TestServer::start(one_records.clone());
    let two = TestServer::start(two_records.clone());
    let proxy = Proxy::start(moto.endpoint.clone(), usize::MAX, Held::Refuse).await;
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("bridge.toml");
    let repository = |name: &str, server: &TestServer| {
        format!(
            "[[repository]]\nname = \"{name}\"\nbase_url = \"{}\"\nscope = [\"{SCOPE}\"]\n\
             max_urls_per_shard = 10\n",
            server.url()
        )
    };
    let text = format!(
        "[server]\npublic_url = \"https://cdn.example/\"\npublish_url = \"s3://fleet/site/\"\n\
         publish_grace_secs = 0\n[harvest]\npoliteness_delay_ms = 0\nstart_spread_secs = 0\n{}{}",
        repository("one", &one),
        repository("two", &two)
    );
    std::fs::write(&config, text).unwrap();
    let token = "a-token-of-the-test-0123456789";
    let args: Vec<String> = ["serve", "--config"]
        .into_iter()
        .map(str::to_owned)
        .chain([config.display().to_string()])
        .chain(
            [
                "--listen",
                "127.0.0.1:0",
                "--admin-listen",
                "127.0.0.1:0",
                "--state-dir",
            ]
            .map(str::to_owned),
        )
        .chain([state.path().join("state").display().to_string()])
        .collect();
    let gateway = Serving::start(&proxy.address, &args, token).await;

    // Both repositories up, and robots.txt at the root naming both indexes.
    // And served: a generation goes up before the gateway installs it, and robots.txt names
    // every configured index from the start, so the bucket alone can be ahead of the gateway
    // (`/readyz` answers 200 once every repository has a generation).
    until("both repositories published", || async {
        let objects = site.objects().await;
        let robots = match objects.contains("robots.txt") {
            true => String::from_utf8(site.read("robots.txt").await).unwrap(),
            false => String::new(),
        };
        let served = reqwest::get(format!("{}readyz", gateway.public))
            .await
            .is_ok_and(|r| r.status().is_success());
        served
            && ["one", "two"].iter().all(|r| {
                objects.contains(&format!("{r}/{}", oai_bridge::BUCKET_MANIFEST))
                    && robots.contains(&format!("Sitemap: https://cdn.example/{r}/sitemap.xml"))
            })
    })
    .await;
    let before = site.crawl().await;
    let (files, pages) = &before;
    let mut expected = pages_of(&one_records);
    expected.extend(pages_of(&two_records));
    assert_eq!(*pages, expected);
    let shards: Vec<&String> = files.keys().filter(|n| n.contains("/sitemap-")).collect();
    assert_eq!(shards.len(), 3 + 2, "{shards:?}");
    assert!(
        shards
            .iter()
            .all(|n| n.ends_with(".xml") && n.len() > "one/sitemap-1-.xml".len() + 15),
        "named after their content: {shards:?}"
    );
    // The gateway serves every file a crawler reaches in the bucket, byte for byte.
    for (name, bytes) in files {
        assert_eq!(&gateway.get(name).await, bytes, "{name}");
    }

    // The bucket refuses uploads from now on: a refresh of a changed repository fails, and
    // both the bucket and the gateway keep the generation before.
    one.set_records(redated(&one_records, 10));
    proxy.hold_from_now();
    gateway.refresh("one", token).await;
    tokio::time::timeout(Duration::from_secs(60), proxy.held.notified())
        .await
        .expect("the refresh tried to upload");
    let failed =
        "oai_bridge_refresh_duration_seconds_count{repository=\"one\",outcome=\"failure\"} 1";
    until("the refresh failed", || async {
        let metrics = reqwest::get(format!("{}metrics", gateway.admin))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        metrics.lines().any(|l| l == failed)
    })
    .await;
    assert_eq!(site.crawl().await, before, "the bucket changed");
    for (name, bytes) in files {
        assert_eq!(
            &gateway.get(name).await,
            bytes,
            "{name} changed on the gateway"
        );
    }
}

/// A crawler that read an index before a refresh and asks the gateway for a shard it listed
/// gets that shard after the refresh too: a published repository's shards are named after
/// their content, the new generation has new names, and the old ones are answered from the
/// bucket, which keeps them for `publish_grace_secs`. A made-up content name stays a 404.
#[tokio::test]
async fn a_gateway_answers_a_retired_shard_name_from_the_bucket() {
    let Some(moto) = Moto::start() else { return };
    let bucket = moto.bucket("retired").await;
    let records = numbered(12);
    let upstream = TestServer::start(records.clone());
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("bridge.toml");
    let text = format!(
        "[server]\npublic_url = \"https://cdn.example/\"\npublish_url = \"s3://retired/site/\"\n\
         [harvest]\npoliteness_delay_ms = 0\nstart_spread_secs = 0\n\
         [[repository]]\nname = \"r\"\nbase_url = \"{}\"\nscope = [\"{SCOPE}\"]\n\
         max_urls_per_shard = 5\n",
        upstream.url()
    );
    std::fs::write(&config, text).unwrap();
    let token = "a-token-of-the-test-0123456789";
    let args: Vec<String> = ["serve", "--config"]
        .into_iter()
        .map(str::to_owned)
        .chain([config.display().to_string()])
        .chain(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"].map(str::to_owned))
        .chain(["--state-dir".to_owned()])
        .chain([state.path().join("state").display().to_string()])
        .collect();
    let gateway = Serving::start(&moto.endpoint, &args, token).await;
    let index = || async {
        let answer = reqwest::get(format!("{}r/sitemap.xml", gateway.public)).await;
        match answer {
            Ok(a) if a.status().is_success() => a.text().await.unwrap(),
            _ => String::new(),
        }
    };
    let shard_names = |index: &str| -> BTreeSet<String> {
        (index.split("<loc>").skip(1))
            .filter_map(|l| l.split("</loc>").next())
            .filter_map(|l| l.strip_prefix("https://cdn.example/"))
            .map(str::to_owned)
            .collect()
    };
    until("the first generation is served", || async {
        !index().await.is_empty()
    })
    .await;
    let before = shard_names(&index().await);
    let mut old = BTreeMap::new();
    for name in &before {
        old.insert(name.clone(), gateway.get(name).await);
    }

    upstream.set_records(redated(&records, 11));
    gateway.refresh("r", token).await;
    until(
        "a new generation with other shard names is served",
        || async {
            let now = shard_names(&index().await);
            !now.is_empty() && now.is_disjoint(&before)
        },
    )
    .await;
    for (name, bytes) in &old {
        assert_eq!(&gateway.get(name).await, bytes, "{name}, retired");
    }
    // The shape of a content name, with a hash no shard has.
    let some = before.iter().next().unwrap();
    let (stem, ext) = some.split_once('.').unwrap();
    let (shard, _) = stem.rsplit_once('-').unwrap();
    let made_up = format!("{shard}-0000000000000000.{ext}");
    let answer = reqwest::get(format!("{}{made_up}", gateway.public))
        .await
        .unwrap();
    assert_eq!(answer.status(), reqwest::StatusCode::NOT_FOUND, "{made_up}");
    drop(bucket);
}

/// What a fenced publish relies on (src/bucket.rs): S3 writes an object only over the version
/// named (`If-Match`), and creates one only where there is none (`If-None-Match: *`), as
/// object_store asks them; a write over a version another writer replaced is refused.
#[tokio::test]
async fn s3_writes_conditionally_over_the_version_read() {
    use object_store::{PutMode, PutOptions, UpdateVersion};
    let Some(moto) = Moto::start() else { return };
    let bucket = moto.bucket("conditional").await;
    let key = Key::from("site/r/.oai-bridge/published.json");
    let put = |mode: PutMode, body: &'static str| {
        let (bucket, key) = (&bucket, key.clone());
        async move {
            let options = PutOptions {
                mode,
                ..PutOptions::default()
            };
            bucket.put_opts(&key, body.into(), options).await
        }
    };
    let first = put(PutMode::Create, "a").await.unwrap();
    assert!(matches!(
        put(PutMode::Create, "b").await,
        Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. })
    ));
    let version = |r: &object_store::PutResult| UpdateVersion {
        e_tag: r.e_tag.clone(),
        version: r.version.clone(),
    };
    let second = put(PutMode::Update(version(&first)), "c").await.unwrap();
    // Another writer's version in between: the stale one is refused.
    let stale = put(PutMode::Update(version(&first)), "d").await;
    assert!(
        matches!(stale, Err(object_store::Error::Precondition { .. })),
        "{stale:?}"
    );
    put(PutMode::Update(version(&second)), "e").await.unwrap();
    let bytes = bucket.get(&key).await.unwrap().bytes().await.unwrap();
    assert_eq!(&bytes[..], b"e");
}
