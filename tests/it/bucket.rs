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
struct Moto {
    child: Child,
    endpoint: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Moto {
    /// Starts moto, or `None` (outside CI) when it is not installed.
    fn start() -> Option<Moto> {
        let program = std::env::var_os("OAI_BRIDGE_TEST_MOTO")
            .map(std::path::PathBuf::from)
            .or_else(|| {
                let path = std::env::var_os("PATH")?;
                std::env::split_paths(&path)
                    .map(|dir| dir.join("moto_server"))
                    .find(|p| p.is_file())
            });
        let Some(program) = program else {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must install moto (OAI_BRIDGE_TEST_MOTO or moto_server on the PATH)"
            );
            eprintln!("skipped: moto_server not found (set OAI_BRIDGE_TEST_MOTO to run)");
            return None;
        };
        let mut child = Command::new(&program)
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
        Some(Moto { child, endpoint })
    }

    /// Creates the bucket `name` and opens it as the tests read it.
    async fn bucket(&self, name: &str) -> AmazonS3 {
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
    let mut command = Command::new(env!("CARGO_BIN_EXE_oai-bridge"));
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

/// What a crawler finds starting at the bucket's robots.txt: the bytes of every file it reaches
/// (robots.txt, the indexes, the shards), by name, and every page URL the shards list. Fails
/// on any file that is named but missing.
async fn crawl(bucket: &AmazonS3) -> (BTreeMap<String, Vec<u8>>, BTreeSet<String>) {
    let mut files = BTreeMap::new();
    let mut pages = BTreeSet::new();
    let robots = read(bucket, "robots.txt").await;
    let mut todo: Vec<String> = String::from_utf8(robots.clone())
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("Sitemap: "))
        .map(str::to_owned)
        .collect();
    files.insert("robots.txt".to_owned(), robots);
    while let Some(url) = todo.pop() {
        let name = url
            .strip_prefix(PUBLIC_URL)
            .unwrap_or_else(|| panic!("{url} is not under {PUBLIC_URL}"))
            .to_owned();
        if files.contains_key(&name) {
            continue;
        }
        let bytes = read(bucket, &name).await;
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

async fn read(bucket: &AmazonS3, name: &str) -> Vec<u8> {
    let key = Key::from(format!("{PREFIX}/{name}"));
    match bucket.get(&key).await {
        Ok(got) => got.bytes().await.unwrap().to_vec(),
        Err(e) => panic!("{name} is named but cannot be read: {e}"),
    }
}

/// Every object under the prefix.
async fn objects(bucket: &AmazonS3) -> BTreeSet<String> {
    let prefix = Key::from(PREFIX);
    let listed: Vec<_> = bucket.list(Some(&prefix)).try_collect().await.unwrap();
    listed
        .into_iter()
        .map(|meta| meta.location.as_ref()[PREFIX.len() + 1..].to_owned())
        .collect()
}

/// The pages of `records`, as the sitemaps list them.
fn pages_of(records: &[TestRecord]) -> BTreeSet<String> {
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
    let records = numbered(95);
    let server = TestServer::start(records.clone());

    let first = export(
        &moto.endpoint,
        export_args(&server, "change", &["--signmap"]),
    )
    .await;
    assert!(first.contains("uploaded        "), "{first}");
    let (files, pages) = crawl(&bucket).await;
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
        let key = Key::from(format!("{PREFIX}/{name}"));
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
    let (after, pages) = crawl(&bucket).await;
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
    let stored = objects(&bucket).await;
    assert!(
        gone.iter().all(|n| stored.contains(n)),
        "{gone:?} deleted early"
    );
}

/// A proxy in front of moto that lets `allowed` PUTs through and holds every later one
/// unanswered, as a network that stops mid-upload does; `stalled` is notified at the first
/// held request.
async fn stalling_proxy(endpoint: String, allowed: usize, stalled: Arc<Notify>) -> String {
    use http_body_util::{BodyExt as _, Full};
    use hyper::service::service_fn;
    use hyper_util::rt::TokioIo;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let puts = Arc::new(AtomicUsize::new(0));
    let client = reqwest::Client::new();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let (endpoint, puts, client, stalled) = (
                endpoint.clone(),
                puts.clone(),
                client.clone(),
                stalled.clone(),
            );
            let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                let (endpoint, puts, client, stalled) = (
                    endpoint.clone(),
                    puts.clone(),
                    client.clone(),
                    stalled.clone(),
                );
                async move {
                    if request.method() == hyper::Method::PUT
                        && puts.fetch_add(1, Ordering::SeqCst) >= allowed
                    {
                        stalled.notify_one();
                        std::future::pending::<()>().await;
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
                    Ok::<_, std::convert::Infallible>(response.body(Full::new(bytes)).unwrap())
                }
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    address
}

#[tokio::test]
async fn an_export_killed_mid_upload_leaves_the_previous_generation_complete() {
    let Some(moto) = Moto::start() else { return };
    let bucket = moto.bucket("killed").await;
    let records = numbered(95);
    let server = TestServer::start(records.clone());
    let args = |extra: &[&str]| export_args(&server, "killed", extra);
    export(&moto.endpoint, args(&["--publish-grace-secs", "0"])).await;
    let before = crawl(&bucket).await;
    assert_eq!(before.1, pages_of(&records));

    // Every shard changes; the export is let through its first manifest and two shards, then
    // its uploads hang, and it is killed.
    server.set_records(redated(&records, 10));
    let stalled = Arc::new(Notify::new());
    let proxy = stalling_proxy(moto.endpoint.clone(), 3, stalled.clone()).await;
    let mut child = bridge(&proxy, &args(&["--publish-grace-secs", "0"]))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    tokio::time::timeout(Duration::from_secs(60), stalled.notified())
        .await
        .expect("the export reached its uploads");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let uploaded_by_the_killed: BTreeSet<String> = objects(&bucket)
        .await
        .into_iter()
        .filter(|n| !before.0.contains_key(n) && !n.starts_with(".oai-bridge/"))
        .collect();
    assert_eq!(
        uploaded_by_the_killed.len(),
        2,
        "two new shards went up before the hang: {uploaded_by_the_killed:?}"
    );
    // A crawler finds the previous generation, byte for byte.
    assert_eq!(crawl(&bucket).await, before);

    // The next export (of yet other records) publishes in full, and deletes what the killed
    // one left (its grace is 0 here), so the bucket holds exactly the new generation.
    let latest = redated(&records, 20);
    server.set_records(latest.clone());
    let report = export(&moto.endpoint, args(&["--publish-grace-secs", "0"])).await;
    let (files, pages) = crawl(&bucket).await;
    assert_eq!(pages, pages_of(&latest));
    let mut expected: BTreeSet<String> = files.keys().cloned().collect();
    expected.insert(oai_bridge::BUCKET_MANIFEST.to_owned());
    assert_eq!(objects(&bucket).await, expected, "{report}");
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
