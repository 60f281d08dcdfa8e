//! `oai-bridge serve`: the real gateway on a pre-bound loopback port, harvesting the local test
//! repository. Rule ids (H-xx) are those of docs/conformance.md, section 5.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use oai_bridge::Config;
use oai_bridge::{Gateway, Listeners, serve};
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use url::Url;

use crate::server::{Fault, TestRecord, TestServer, numbered};

/// A gateway running in this process, on loopback ports bound before it starts.
pub(crate) struct Running {
    /// The public listener's URL.
    pub(crate) url: String,
    /// The admin listener's URL.
    admin_url: String,
    pub(crate) gateway: Arc<Gateway>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Running {
    /// Starts a gateway for `config` (TOML text; `{state}` is replaced by `state`).
    pub(crate) async fn start(config: &str, state: &Path) -> Running {
        let text = config.replace("{state}", &state.display().to_string());
        let config = Config::parse(&text, "test.toml", Path::new(".")).expect("valid config");
        Self::launch(config, None).await
    }

    /// Starts a gateway for the configuration file `path`, which a reload reads again.
    async fn start_file(path: &Path) -> Running {
        let config = Config::load(path).expect("valid config");
        Self::launch(config, Some(path.to_owned())).await
    }

    /// The first refreshes start at once (`start_spread_secs = 0`) unless the test's
    /// configuration spreads them.
    async fn launch(mut config: Config, file: Option<std::path::PathBuf>) -> Running {
        let spread = |text: &str| text.contains("start_spread_secs");
        let spread_in_file = file
            .as_ref()
            .is_some_and(|f| spread(&std::fs::read_to_string(f).unwrap_or_default()));
        if !spread_in_file && config.fleet.start_spread == Duration::from_secs(30) {
            config.fleet.start_spread = Duration::ZERO;
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let url = format!("http://{addr}/");
        let admin = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let admin_url = format!("http://{}/", admin.local_addr().unwrap());
        let public = config
            .server
            .public_url
            .clone()
            .unwrap_or_else(|| Url::parse(&url).unwrap());
        let mut gateway = Gateway::new(&config, public).unwrap();
        if let Some(file) = file {
            gateway = gateway.reloading_from(move || {
                let mut config = Config::load(&file)?;
                if !spread(&std::fs::read_to_string(&file).unwrap_or_default()) {
                    config.fleet.start_spread = Duration::ZERO;
                }
                Ok(config)
            });
        }
        let gateway = Arc::new(gateway);
        let (tx, rx) = oneshot::channel();
        let listeners = Listeners {
            public: listener,
            admin: Some(admin),
        };
        let task = tokio::spawn(serve(
            Arc::clone(&gateway),
            listeners,
            Duration::from_secs(5),
            async {
                let _ = rx.await;
            },
        ));
        Running {
            url,
            admin_url,
            gateway,
            stop: Some(tx),
            task,
        }
    }

    pub(crate) async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(Duration::from_secs(10), &mut self.task)
            .await
            .expect("the gateway stops within the drain timeout")
            .unwrap();
    }

    /// Waits until every repository has a generation.
    pub(crate) async fn ready(&self) {
        let start = Instant::now();
        // Not `Gateway::ready`: a failed first refresh makes the process ready too.
        while !self.gateway.repos().iter().all(|r| r.serving()) {
            let errors: Vec<_> = self
                .gateway
                .repos()
                .iter()
                .map(|r| r.status().last_error)
                .collect();
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "no generation for every repository; last errors: {errors:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Asks repository `i` for a refresh now and waits until it has ended.
    pub(crate) async fn refresh(&self, i: usize) {
        let repo = self.gateway.repos()[i].clone();
        let before = repo.status().completed;
        repo.refresh_now.notify_one();
        wait_for(|| repo.status().completed > before, "the refresh ends").await;
    }

    /// GET `path` from the public listener.
    pub(crate) async fn get(&self, path: &str) -> Reply {
        self.request(reqwest::Method::GET, path, &[]).await
    }

    /// GET `path` from the admin listener (the status page, the metrics).
    pub(crate) async fn admin(&self, path: &str) -> Reply {
        fetch(&self.admin_url, reqwest::Method::GET, path, &[]).await
    }

    async fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        headers: &[(&str, &str)],
    ) -> Reply {
        fetch(&self.url, method, path, headers).await
    }
}

/// A request to the listener at `base`.
async fn fetch(base: &str, method: reqwest::Method, path: &str, headers: &[(&str, &str)]) -> Reply {
    let mut req = client().request(method, format!("{}{}", base, path.trim_start_matches('/')));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let response = req.send().await.expect("the gateway answers");
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.bytes().await.unwrap().to_vec();
    Reply {
        status,
        headers,
        body,
    }
}

pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Reply {
    pub(crate) fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .map_or("", |v| v.to_str().unwrap_or(""))
    }

    pub(crate) fn text(&self) -> String {
        String::from_utf8(self.body.clone()).unwrap()
    }
}

/// A client that neither decompresses nor follows redirects: the tests see the raw answer.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_gzip()
        .no_deflate()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
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

/// A configuration with one repository `r` harvesting `upstream`, 5 URLs a shard.
/// A gateway on `upstream` (with `extra_repo` settings) serving its first generation, and its
/// state folder, which must live as long as it.
async fn serving(upstream: &TestServer, extra_repo: &str) -> (Running, tempfile::TempDir) {
    let state = tempfile::tempdir().unwrap();
    let g = Running::start(&config(upstream, extra_repo), state.path()).await;
    g.ready().await;
    (g, state)
}

fn config(upstream: &TestServer, extra_repo: &str) -> String {
    format!(
        "[server]\nstate_dir = \"{{state}}\"\n\
         [harvest]\nmax_attempts = 1\nbackoff_initial_ms = 10\n\
         [[repository]]\nname = \"r\"\nbase_url = \"{}\"\nmax_urls_per_shard = 5\n\
         scope = [\"https://repo.example/\"]\nrefresh_interval_secs = 3600\n{extra_repo}",
        upstream.url()
    )
}

/// The `<loc>`s of a sitemap or index.
fn locs(xml: &str) -> Vec<String> {
    xml.split("<loc>")
        .skip(1)
        .map(|s| s.split("</loc>").next().unwrap().to_owned())
        .collect()
}

/// The `<loc>` and `<lastmod>` of each `<sitemap>` of an index.
fn lastmods(index: &str) -> Vec<(String, String)> {
    index
        .split("<sitemap>")
        .skip(1)
        .map(|entry| {
            let field = |tag: &str| {
                let open = format!("<{tag}>");
                let from = entry.find(&open).map(|i| i + open.len()).unwrap_or(0);
                let to = entry[from..].find('<').map_or(from, |i| from + i);
                entry[from..to].to_owned()
            };
            (field("loc"), field("lastmod"))
        })
        .collect()
}

/// Path of an absolute URL of the gateway.
fn path_of(url: &str) -> String {
    Url::parse(url).unwrap().path().to_owned()
}

/// Every URL the gateway publishes for repository `r`, reading the index and its shards.
async fn published(g: &Running) -> BTreeSet<String> {
    let index = g.get("/r/sitemap.xml").await;
    assert_eq!(index.status, StatusCode::OK);
    let mut urls = BTreeSet::new();
    for shard in locs(&index.text()) {
        let reply = g.get(&path_of(&shard)).await;
        assert_eq!(reply.status, StatusCode::OK, "{shard}");
        urls.extend(locs(&reply.text()));
    }
    urls
}

fn expected(n: usize) -> BTreeSet<String> {
    (1..=n)
        .map(|i| format!("https://repo.example/record/{i}"))
        .collect()
}

#[tokio::test]
async fn a_full_serve_cycle() {
    let upstream = TestServer::builder(numbered(12))
        .identify_base_url("https://repo.example/oai")
        .start();
    let (g, state) = serving(&upstream, "").await;

    // H-10: robots.txt is text/plain with absolute Sitemap lines.
    let robots = g.get("/robots.txt").await;
    assert_eq!(robots.status, StatusCode::OK);
    assert!(robots.header("content-type").starts_with("text/plain"));
    assert!(
        robots
            .text()
            .contains(&format!("Sitemap: {}r/sitemap.xml\n", g.url)),
        "{}",
        robots.text()
    );

    // H-01: XML is application/xml; the index lists 3 shards of at most 5 URLs.
    let index = g.get("/r/sitemap.xml").await;
    assert!(index.header("content-type").starts_with("application/xml"));
    let shards = locs(&index.text());
    assert_eq!(
        shards,
        (1..=3)
            .map(|n| format!("{}r/sitemap-{n}.xml", g.url))
            .collect::<Vec<_>>()
    );
    assert_eq!(published(&g).await, expected(12));

    assert_eq!(g.get("/healthz").await.status, StatusCode::OK);
    assert_eq!(g.get("/readyz").await.status, StatusCode::OK);
    let status = g.admin("/").await;
    assert!(status.header("content-type").starts_with("text/html"));
    let page = status.text();
    for want in [
        "<b>r</b>",
        "fresh",
        "12 records: 12 live, 0 deleted",
        "last success",
        // Issue 22: the gateway's own URL is on loopback here, which crawlers cannot reach.
        "is a loopback address",
        // Issue 20: the platform in effect and why.
        "platform: generic (detected: ",
    ] {
        assert!(page.contains(want), "status page lacks {want:?}:\n{page}");
    }
    let metrics = g.admin("/metrics").await.text();
    for want in [
        "oai_bridge_http_requests_total{route=\"index\",status=\"200\"}",
        "oai_bridge_harvests_total{repository=\"r\",outcome=\"success\"} 1",
        "oai_bridge_urls_published{repository=\"r\"} 12",
        "oai_bridge_records{repository=\"r\"} 12",
        "oai_bridge_serving_stale{repository=\"r\"} 0",
        "oai_bridge_last_success_timestamp_seconds{repository=\"r\"}",
        "oai_bridge_identifiers_dropped{repository=\"r\",reason=\"out_of_scope\"} 0",
        "oai_bridge_upstream_requests_total{repository=\"r\",status=\"200\"}",
        "oai_bridge_platform{repository=\"r\",platform=\"generic\"} 1",
        "oai_bridge_platform{repository=\"r\",platform=\"dspace\"} 0",
    ] {
        assert!(metrics.contains(want), "metrics lack {want:?}:\n{metrics}");
    }
    // The generation is on disk, named by `current`.
    let current = std::fs::read_to_string(state.path().join("r/current")).unwrap();
    assert!(
        state
            .path()
            .join("r")
            .join(current.trim())
            .join("sitemap-3.xml")
            .exists()
    );
    g.stop().await;
}

/// Issue 20: the status page counts the store's deleted records as a harvest counts them (it
/// said "0 deleted" for every repository), and says why a refresh harvested in full: as a
/// warning when it could have been incremental (a responseDate it could not read).
#[tokio::test]
async fn the_status_page_counts_deleted_records_and_says_why_a_harvest_was_full() {
    let mut records = numbered(12);
    records.push(TestRecord::new("oai:test:13", "2024-05-20").deleted());
    let upstream = TestServer::builder(records.clone())
        .response_date("garbage")
        .start();
    let (g, _state) = serving(&upstream, "").await;
    let page = g.admin("/").await.text();
    for want in [
        "13 records: 12 live, 1 deleted",
        "last harvest: full: 13 records received, 1 of them deleted",
        "<small>why full: the first harvest into this store</small>",
    ] {
        assert!(page.contains(want), "status page lacks {want:?}:\n{page}");
    }

    records[4] = TestRecord::new("oai:test:5", "2024-06-02").deleted();
    upstream.set_records(records);
    g.refresh(0).await;
    let page = g.admin("/").await.text();
    for want in [
        "13 records: 11 live, 2 deleted",
        "<small class=\"bad\">why full: the last complete harvest&#39;s responseDate \
         &quot;garbage&quot; could not be read</small>",
    ] {
        assert!(page.contains(want), "status page lacks {want:?}:\n{page}");
    }
    g.stop().await;
}

/// Issue 22: the status page says each reason not to publish in words, with examples (kept
/// from the last whole render when a refresh patched the sitemap), warns when crawlers need a
/// cross-submission, and shows the last refreshes (a chart and a table) across a restart.
#[tokio::test]
async fn the_status_page_explains_drops_and_keeps_a_history() {
    let mut records = numbered(6);
    records[1] = records[1].clone().url("doi:10.1234/two");
    records.push(TestRecord::new("oai:test:7", "2024-05-07").deleted());
    records.push(TestRecord::new("oai:test:8", "2024-05-08").url("urn:nbn:nl:ui:8"));
    let upstream = TestServer::builder(records.clone()).start();
    let state = tempfile::tempdir().unwrap();
    let text = published_at(&config(&upstream, ""), "https://maps.example/");
    let g = Running::start(&text, state.path()).await;
    let repo = g.gateway.repos()[0].clone();
    wait_for(|| repo.status().completed == 1, "the first refresh ends").await;
    let page = g.admin("/").await.text();
    for want in [
        "8 records: 7 live, 1 deleted",
        // The reason in words, expected, with the value and its record.
        "<code>persistent_id</code> 1 <span class=\"ok\">expected</span>",
        "a DOI or Handle, not a URL of this repository: rightly not a &lt;loc&gt;",
        "e.g. <code>doi:10.1234/two</code> in oai:test:2",
        "e.g. <code>urn:nbn:nl:ui:8</code> in oai:test:8",
        "<code>no_url</code> 1 <span class=\"bad\">check if many</span>",
        // A deleted record, from the store.
        "<code>deleted</code> 1 <span class=\"ok\">expected</span>",
        "e.g. oai:test:7",
        // The scope is not under the public URL.
        "<b>Cross-submission needed:</b> the scope https://repo.example/ is not under the \
         public URL https://maps.example/r/",
        "<code>Sitemap: https://maps.example/r/sitemap.xml</code> to https://repo.example/robots.txt",
        "<b>The last refresh</b> (0 failed)",
        "<svg class=\"chart\"",
        "<td>full</td>",
    ] {
        assert!(page.contains(want), "status page lacks {want:?}:\n{page}");
    }
    assert!(!page.contains("loopback"), "{page}");

    // An incremental refresh that patches the sitemap keeps the examples it did not read.
    records.push(TestRecord::new("oai:test:9", "2024-06-01").url("https://repo.example/record/9"));
    upstream.set_records(records);
    g.refresh(0).await;
    let page = g.admin("/").await.text();
    for want in [
        "9 records: 8 live, 1 deleted",
        "(examples from the whole render of ",
        "e.g. <code>doi:10.1234/two</code> in oai:test:2",
        "<b>The last 2 refreshes</b> (0 failed)",
        "<td>incremental</td>",
    ] {
        assert!(page.contains(want), "status page lacks {want:?}:\n{page}");
    }

    // A failed refresh is in the history, with its error.
    upstream.fault_always(Fault::Status(500));
    g.refresh(0).await;
    let page = g.admin("/").await.text();
    assert!(
        page.contains("<b>The last 3 refreshes</b> (1 failed)"),
        "{page}"
    );
    assert!(
        page.contains("<span class=\"bad\">failed:</span><pre class=\"error\">"),
        "{page}"
    );
    assert_eq!(page.matches("fill=\"#c00\"").count(), 1, "{page}");
    g.stop().await;

    // The history survives a restart (the persisted generation is served; no refresh yet).
    let again = Running::start(&text, state.path()).await;
    let page = again.admin("/").await.text();
    assert!(
        page.contains("<b>The last 3 refreshes</b> (1 failed)"),
        "{page}"
    );
    assert_eq!(
        std::fs::read_to_string(state.path().join("r/history.jsonl"))
            .unwrap()
            .lines()
            .count(),
        3
    );
    again.stop().await;
}

/// H-08: until the first generation, 503 with Retry-After; `/readyz?repository=` says it is
/// missing; the status page shows the error. A later refresh that succeeds serves.
#[tokio::test]
async fn no_generation_yet_is_503_with_retry_after() {
    let upstream = TestServer::builder(numbered(3)).start();
    upstream.fault_always(Fault::Status(500));
    let state = tempfile::tempdir().unwrap();
    let g = Running::start(&config(&upstream, ""), state.path()).await;
    wait_for(
        || g.gateway.repos()[0].status().completed >= 1,
        "the first refresh fails",
    )
    .await;

    for path in ["/r/sitemap.xml", "/r/sitemap-1.xml"] {
        let reply = g.get(path).await;
        assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE, "{path}");
        let retry: u64 = reply.header("retry-after").parse().unwrap();
        assert!((1..=3600).contains(&retry), "Retry-After {retry}");
        // The public listener never shows the refresh's error: it names the upstream URL
        // (which may carry an API key); the status page and the log have it.
        let text = reply.text();
        assert_eq!(
            text,
            "r: no sitemap yet; the last refresh failed; the next one is scheduled\n"
        );
        assert!(!text.contains(&upstream.url().to_string()), "{text}");
        assert!(!text.contains("500"), "{text}");
    }
    assert!(g.admin("/").await.text().contains("HTTP status 500"));
    // Its first refresh has ended: the process is ready; the repository is not.
    assert_eq!(g.get("/readyz").await.status, StatusCode::OK);
    let ready = g.get("/readyz?repository=r").await;
    assert_eq!(ready.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        ready.text(),
        "not ready: no generation yet for r; the last refresh failed\n"
    );
    assert!(g.admin("/").await.text().contains("nothing yet"));
    // Names that can never exist are 404 even now.
    assert_eq!(g.get("/r/other.xml").await.status, StatusCode::NOT_FOUND);

    upstream.clear_faults();
    g.refresh(0).await;
    assert_eq!(published(&g).await, expected(3));
    assert_eq!(g.get("/readyz").await.status, StatusCode::OK);
    g.stop().await;
}

/// A `[[repository]]` table of `upstream` named `name`, in the test scope, refreshed hourly.
fn repo_table(name: &str, upstream: &TestServer) -> String {
    format!(
        "[[repository]]\nname = \"{name}\"\nbase_url = \"{}\"\n\
         scope = [\"https://repo.example/\"]\nrefresh_interval_secs = 3600\n",
        upstream.url()
    )
}

/// Issue 30: `[server] metrics_repository_series` bounds the series labelled by repository:
/// the first repositories of the configuration have their own, and the others are summed under
/// `repository="_other"` (counters and histograms as they count, gauges as the scrape comes),
/// so that the totals are those of every repository; a state is the worst case of those summed.
#[tokio::test]
async fn metrics_sum_the_repositories_beyond_the_bound() {
    let upstreams: Vec<TestServer> = (3..6).map(|n| TestServer::start(numbered(n))).collect();
    let text = format!(
        "[server]\nstate_dir = \"{{state}}\"\nmetrics_repository_series = 1\n\
         [harvest]\nmax_attempts = 1\n{}{}{}",
        repo_table("a", &upstreams[0]),
        repo_table("b", &upstreams[1]),
        repo_table("c", &upstreams[2]),
    );
    let state = tempfile::tempdir().unwrap();
    let g = Running::start(&text, state.path()).await;
    g.ready().await;
    let repos = g.gateway.repos();
    wait_for(
        || repos.iter().all(|r| r.status().completed >= 1),
        "the first refreshes end",
    )
    .await;
    assert_eq!(g.get("/b/sitemap.xml").await.status, StatusCode::OK);
    let records = |i: usize| repos[i].current().unwrap().summary.records;
    let urls = |i: usize| repos[i].current().unwrap().summary.urls;
    let metrics = g.admin("/metrics").await.text();
    for (series, value) in [
        (
            "oai_bridge_records{repository=\"a\"}",
            records(0).to_string(),
        ),
        (
            "oai_bridge_records{repository=\"_other\"}",
            (records(1) + records(2)).to_string(),
        ),
        (
            "oai_bridge_urls_published{repository=\"_other\"}",
            (urls(1) + urls(2)).to_string(),
        ),
        (
            "oai_bridge_harvests_total{repository=\"_other\",outcome=\"success\"}",
            "2".to_owned(),
        ),
        (
            "oai_bridge_refresh_duration_seconds_count{repository=\"_other\",outcome=\"success\"}",
            "2".to_owned(),
        ),
        (
            "oai_bridge_platform{repository=\"_other\",platform=\"generic\"}",
            "2".to_owned(),
        ),
        ("oai_bridge_serving{repository=\"_other\"}", "1".to_owned()),
        (
            "oai_bridge_serving_stale{repository=\"_other\"}",
            "0".to_owned(),
        ),
        (
            "oai_bridge_refresh_interval_seconds{repository=\"_other\"}",
            "3600".to_owned(),
        ),
        ("oai_bridge_repositories_aggregated", "2".to_owned()),
    ] {
        let line = format!("{series} {value}\n");
        assert!(metrics.contains(&line), "{line}:\n{metrics}");
    }
    assert!(
        metrics
            .contains("oai_bridge_served_bytes_total{repository=\"_other\",encoding=\"identity\"}"),
        "{metrics}"
    );
    for name in ["b", "c"] {
        assert!(
            !metrics.contains(&format!("repository=\"{name}\"")),
            "{name}:\n{metrics}"
        );
    }
    // Every family has the same total as one repository's series each would have.
    let lines = |prefix: &str| metrics.lines().filter(|l| l.starts_with(prefix)).count();
    assert_eq!(lines("oai_bridge_refresh_duration_seconds_bucket"), 2 * 18);

    // One of those summed fails: `_other` is stale, and counts the failure.
    upstreams[2].fault_always(Fault::Status(500));
    g.refresh(2).await;
    assert_eq!(
        g.metric("oai_bridge_serving_stale{repository=\"_other\"}")
            .await
            .as_deref(),
        Some("1")
    );
    assert_eq!(
        g.metric("oai_bridge_harvests_total{repository=\"_other\",outcome=\"failure\"}")
            .await
            .as_deref(),
        Some("1")
    );
    g.stop().await;
}

/// Each file of repository `name` that `g` serves, by path: the shards its sitemap and Signmap
/// indexes list, and of each index the shards it lists (its lastmods are the generation's
/// time).
async fn files_of(g: &Running, name: &str) -> std::collections::BTreeMap<String, String> {
    let mut files = std::collections::BTreeMap::new();
    for index in ["sitemap.xml", "signmap.xml"] {
        let path = format!("/{name}/{index}");
        let reply = g.get(&path).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}");
        let listed = locs(&reply.text());
        for shard in &listed {
            let shard = path_of(shard);
            let body = g.get(&shard).await;
            assert_eq!(body.status, StatusCode::OK, "{shard}");
            files.insert(shard, body.text());
        }
        files.insert(path, listed.join("\n"));
    }
    files
}

/// Issue 30 point 2: the refreshes running at once share `[server] memory_budget_bytes`. Two
/// repositories refreshing together within a budget of a few bytes both spill (their URL
/// inventories and their Signmap's records) and serve the same bytes as a gateway with the
/// default budget; what each held and spilled at most is in its history on the status page,
/// and /metrics has each refresh's memory and spill (0 once it ended) and the budget.
#[tokio::test]
async fn refreshes_within_a_shared_budget_spill_and_serve_the_same_files() {
    let upstreams: Vec<TestServer> = [40, 60]
        .into_iter()
        .map(|n| TestServer::start(numbered(n)))
        .collect();
    let text = |server: &str| {
        let mut text = format!(
            "[server]\nstate_dir = \"{{state}}\"\npublic_url = \"https://maps.example/\"\n\
             {server}[harvest]\nmax_attempts = 1\nmax_concurrent_refreshes = 2\n"
        );
        for (name, upstream) in ["a", "b"].into_iter().zip(&upstreams) {
            text.push_str(&repo_table(name, upstream));
            text.push_str("max_urls_per_shard = 7\nsignmap = true\n");
        }
        text
    };
    let mut served = Vec::new();
    for server in ["", "memory_budget_bytes = 64\n"] {
        let state = tempfile::tempdir().unwrap();
        let g = Running::start(&text(server), state.path()).await;
        g.ready().await;
        let mut files = Vec::new();
        for name in ["a", "b"] {
            files.push(files_of(&g, name).await);
        }
        let spilled: Vec<u64> = (g.gateway.repos().iter())
            .map(|r| r.current().unwrap().summary.spill_bytes)
            .collect();
        let page = g.admin("/").await.text();
        let metrics = g.admin("/metrics").await.text();
        served.push((files, spilled, page, metrics));
        g.stop().await;
    }
    let (unbudgeted, budgeted) = (&served[0], &served[1]);
    for (without, within) in unbudgeted.0.iter().zip(&budgeted.0) {
        assert_eq!(
            without.keys().collect::<Vec<_>>(),
            within.keys().collect::<Vec<_>>()
        );
        for (path, text) in without {
            assert!(within[path] == *text, "{path} differs within the budget");
        }
    }
    assert_eq!(budgeted.0[0].len(), 2 + 2 * 40_usize.div_ceil(7));
    for (i, name) in ["a", "b"].iter().enumerate() {
        // The Signmap's records go to a file either way; the sorted runs only past the budget.
        assert!(
            budgeted.1[i] > unbudgeted.1[i],
            "{name} spilled {} within the budget, {} without",
            budgeted.1[i],
            unbudgeted.1[i]
        );
    }
    let (page, metrics) = (&budgeted.2, &budgeted.3);
    assert!(
        page.contains("<th>memory, spilled (most)</th>"),
        "the history says what each refresh held: {page}"
    );
    assert!(
        page.contains("Memory: the running refreshes hold 0 B of 64 B (memory_budget_bytes"),
        "{page}"
    );
    for line in [
        "oai_bridge_refresh_memory_bytes{repository=\"a\"} 0",
        "oai_bridge_refresh_spill_bytes{repository=\"b\"} 0",
        "oai_bridge_refreshes_memory_bytes 0",
        "oai_bridge_refreshes_spill_bytes 0",
        "oai_bridge_memory_budget_bytes 64",
        "oai_bridge_refresh_memory_budget_bytes 201326592",
    ] {
        assert!(metrics.contains(&format!("{line}\n")), "{line}:\n{metrics}");
    }
    // The default budget: max_concurrent_refreshes times [harvest] memory_budget_bytes.
    assert!(
        unbudgeted.3.contains(&format!(
            "oai_bridge_memory_budget_bytes {}\n",
            2 * 201_326_592
        )),
        "{}",
        unbudgeted.3
    );
    assert!(
        !metrics.contains("oai_bridge_spill_max_bytes"),
        "no cap set"
    );
}

/// Issue 30 point 2: the spill space is bounded. A reload sets `[server] spill_max_bytes` far
/// below what the next refresh spills: it fails with an error naming the cap, the repository
/// and the folder, leaves no spill folder behind, and the generation served before keeps
/// serving, byte for byte.
#[tokio::test]
async fn a_refresh_past_the_spill_cap_fails_and_the_served_generation_stays() {
    let upstream = TestServer::start(numbered(30));
    let state = tempfile::tempdir().unwrap();
    // CDIF's file per record makes every refresh render from the whole store (the profiles'
    // patch leaves it out), and a budget of a few bytes makes it spill.
    let text = |cap: &str| {
        reload_config(
            state.path(),
            &[("r", &upstream, "signmap = true\ncdif = true\n")],
        )
        .replace(
            "[harvest]",
            &format!("memory_budget_bytes = 64\n{cap}[harvest]"),
        )
    };
    let file = state.path().join("bridge.toml");
    let write = |cap: &str| std::fs::write(&file, text(cap)).unwrap();
    write("");
    let g = Running::start_file(&file).await;
    g.ready().await;
    let before = files_of(&g, "r").await;
    write("spill_max_bytes = 100\n");
    let reloaded = g.gateway.reload().await.unwrap();
    assert!(reloaded.needs_restart.is_empty(), "{reloaded}");
    assert_eq!(
        g.metric("oai_bridge_spill_max_bytes").await.as_deref(),
        Some("100")
    );
    g.refresh(0).await;
    let repo = g.gateway.repo("r").unwrap();
    let error = repo.status().last_error.expect("the refresh failed");
    for said in [
        "spill_max_bytes = 100",
        "(repository r)",
        "the generation being served stays",
        &format!(
            "{}",
            state.path().join("r").join(".oai-bridge-spill-").display()
        ),
    ] {
        assert!(error.contains(said), "{said}: {error}");
    }
    assert_eq!(
        files_of(&g, "r").await,
        before,
        "the generation before serves"
    );
    assert_eq!(
        g.metric("oai_bridge_serving_stale{repository=\"r\"}")
            .await
            .as_deref(),
        Some("1")
    );
    let page = g.admin("/").await.text();
    assert!(page.contains("spill_max_bytes = 100"), "{page}");
    let left: Vec<_> = std::fs::read_dir(state.path().join("r"))
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".oai-bridge-spill-")
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // Lifted again, the next refresh publishes.
    write("");
    g.gateway.reload().await.unwrap();
    g.refresh(0).await;
    assert_eq!(repo.status().last_error, None);
    g.stop().await;
}

/// Issue 22 point 2: `/readyz` fits orchestration. It is 503 only while a repository configured
/// at start has neither a generation nor an ended first refresh, naming it; a stale generation
/// counts as serving, and a failed first refresh releases the process too, so a broken upstream
/// shows on the status page and in the metrics but never takes the process out of service, with
/// or without a restart. `?repository=NAME` asks about one repository, strictly (503 until its
/// first generation); an unknown name is 404. Both listeners answer.
#[tokio::test]
async fn readiness_waits_only_for_first_generations() {
    let good = TestServer::builder(numbered(3)).start();
    let broken = TestServer::builder(numbered(4)).start();
    broken.fault_always(Fault::Status(500));
    let text = format!(
        "[server]\nstate_dir = \"{{state}}\"\n[harvest]\nmax_attempts = 1\n{}{}",
        repo_table("good", &good),
        repo_table("broken", &broken)
    );
    let state = tempfile::tempdir().unwrap();
    // The broken one's first refresh hangs a while: the process waits for it. Its first
    // answer is delayed long enough for the checks below to run before its next request, which
    // fails (1.5 s was too short on a loaded machine: the next request came before the switch).
    broken.clear_faults();
    broken.fault_always(Fault::Delay(Duration::from_secs(5)));
    let g = Running::start(&text, state.path()).await;
    let repos = g.gateway.repos();
    wait_for(|| repos[0].serving(), "good serves").await;
    assert!(repos[1].status().refreshing);
    assert_eq!(
        g.get("/readyz").await.text(),
        "not ready: no generation yet for broken\n"
    );
    assert!(!g.gateway.ready());
    broken.clear_faults();
    broken.fault_always(Fault::Status(500));
    wait_for(
        || repos.iter().all(|r| r.status().completed >= 1),
        "both first refreshes end",
    )
    .await;
    assert!(!repos[1].serving() && repos[1].status().last_error.is_some());
    let ready = |path: &'static str| {
        let g = &g;
        async move {
            let public = g.get(path).await;
            let admin = g.admin(path).await;
            assert_eq!(public.status, admin.status, "{path}");
            (public.status, public.text())
        }
    };
    // Its first refresh failed: the process is ready, the repository alone is not.
    assert_eq!(
        ready("/readyz").await,
        (StatusCode::OK, "ready\n".to_owned())
    );
    assert!(g.gateway.ready());
    assert_eq!(ready("/readyz?repository=good").await.0, StatusCode::OK);
    let (status, text) = ready("/readyz?repository=broken").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        text,
        "not ready: no generation yet for broken; the last refresh failed\n"
    );
    assert_eq!(
        g.get("/broken/sitemap.xml").await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert!(g.admin("/").await.text().contains("nothing yet"));
    let metrics = g.admin("/metrics").await.text();
    assert!(
        metrics.contains("oai_bridge_serving{repository=\"broken\"} 0"),
        "{metrics}"
    );
    assert_eq!(
        ready("/readyz?repository=nope").await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(ready("/readyz?repository=").await.0, StatusCode::NOT_FOUND);

    // Its first generation: ready. Then its upstream breaks again: stale, and still ready.
    broken.clear_faults();
    g.refresh(1).await;
    assert_eq!(
        ready("/readyz").await,
        (StatusCode::OK, "ready\n".to_owned())
    );
    assert_eq!(ready("/readyz?repository=broken").await.0, StatusCode::OK);
    broken.fault_always(Fault::Status(500));
    g.refresh(1).await;
    assert!(repos[1].status().last_error.is_some());
    assert_eq!(ready("/readyz").await.0, StatusCode::OK);
    assert_eq!(ready("/readyz?repository=broken").await.0, StatusCode::OK);
    // What is wrong shows where operators look.
    assert!(
        g.admin("/")
            .await
            .text()
            .contains("stale, the last refresh failed")
    );
    let metrics = g.admin("/metrics").await.text();
    assert!(
        metrics.contains("oai_bridge_serving_stale{repository=\"broken\"} 1"),
        "{metrics}"
    );
    g.stop().await;
}

/// The status page of many repositories: a summary above the table counts them by state and
/// links the rows of those with a problem; the details under a row are collapsed unless its
/// repository has a problem; the public URL is text (`/` of the public listener is 404), and
/// robots.txt is linked.
#[tokio::test]
async fn the_status_page_sums_up_and_points_at_the_problems() {
    let good = TestServer::builder(numbered(3)).start();
    let broken = TestServer::builder(numbered(4)).start();
    broken.fault_always(Fault::Status(500));
    let stale = TestServer::builder(numbered(2)).start();
    let text = format!(
        "[server]\nstate_dir = \"{{state}}\"\n[harvest]\nmax_attempts = 1\n{}{}{}",
        repo_table("good", &good),
        repo_table("broken", &broken),
        repo_table("stale", &stale),
    );
    let state = tempfile::tempdir().unwrap();
    let g = Running::start(&text, state.path()).await;
    let repos = g.gateway.repos();
    wait_for(
        || repos.iter().all(|r| r.status().completed >= 1),
        "the first refreshes end",
    )
    .await;
    stale.fault_always(Fault::Status(500));
    g.refresh(2).await;

    let page = g.admin("/").await.text();
    assert!(
        page.contains(
            "<b>3 repositories:</b> <span class=\"ok\">1 fresh</span>, <span class=\"bad\">1 \
             stale (the last refresh failed)</span>, <span class=\"bad\">1 nothing yet (a refresh \
             failed)</span>, 0 waiting for a first refresh."
        ),
        "{page}"
    );
    assert!(
        page.contains(
            "<p class=\"bad\"><b>2 with a problem:</b></p><ul>\
             <li><a href=\"#repo-broken\">broken</a>: nothing served, the last refresh failed</li>\
             <li><a href=\"#repo-stale\">stale</a>: stale, the last refresh failed</li></ul>"
        ),
        "{page}"
    );
    // The summary comes before the table, and each link has its row.
    assert!(page.find("id=\"problems\"").unwrap() < page.find("<table>").unwrap());
    for name in ["good", "broken", "stale"] {
        assert!(page.contains(&format!("<tr id=\"repo-{name}\">")), "{name}");
    }
    // Collapsed for the good one, open for those with a problem.
    let section = |name: &str| {
        let from = page.find(&format!("<tr id=\"repo-{name}\">")).unwrap();
        let rest = &page[from..];
        let to = rest[1..].find("<tr id=").map_or(rest.len(), |i| i + 1);
        rest[..to].to_owned()
    };
    let good_rows = section("good");
    assert!(
        good_rows.contains("<details class=\"history\">"),
        "{good_rows}"
    );
    assert!(!good_rows.contains(" open>"), "{good_rows}");
    assert!(section("broken").contains("<details class=\"history\" open>"));
    assert!(section("stale").contains("<details class=\"history\" open>"));
    // The public URL is shown, not linked; robots.txt is.
    assert!(!page.contains(&format!("<a href=\"{}\">", g.url)), "{page}");
    assert!(page.contains(&format!("Public URL <code>{}</code>", g.url)));
    assert!(page.contains(&format!("<a href=\"{}robots.txt\">robots.txt</a>", g.url)));

    // Nothing wrong: the summary says so.
    broken.clear_faults();
    stale.clear_faults();
    g.refresh(1).await;
    g.refresh(2).await;
    let page = g.admin("/").await.text();
    assert!(page.contains("<span class=\"ok\">3 fresh</span>"), "{page}");
    assert!(page.contains("No repository has a problem."), "{page}");
    assert!(
        page.contains("<span>0 stale (the last refresh failed)</span>"),
        "{page}"
    );
    assert!(!page.contains(" open>"), "{page}");
    g.stop().await;
}

/// Stale-if-error: a refresh that fails mid-list keeps the previous generation byte-identical,
/// with the same validators, and says so on the status page and in the metrics.
#[tokio::test]
async fn a_failed_refresh_keeps_the_previous_generation() {
    let upstream = TestServer::builder(numbered(12)).start();
    let (g, state) = serving(&upstream, "").await;
    let mut before = Vec::new();
    for path in ["/r/sitemap.xml", "/r/sitemap-1.xml", "/r/sitemap-3.xml"] {
        before.push(g.get(path).await);
    }

    // The repository changes, but the refresh fails on its second page.
    let changed = numbered(14).into_iter().map(|mut r| {
        r.datestamp = "2024-06-02".to_owned();
        r
    });
    upstream.set_records(changed.collect());
    upstream.fault_on_page_always(2, Fault::Status(500));
    g.refresh(0).await;
    let status = g.gateway.repos()[0].status();
    assert!(
        status.last_error.as_deref().unwrap().contains("page 2"),
        "{status:?}"
    );

    for (path, old) in ["/r/sitemap.xml", "/r/sitemap-1.xml", "/r/sitemap-3.xml"]
        .iter()
        .zip(&before)
    {
        let now = g.get(path).await;
        assert_eq!(now.status, StatusCode::OK);
        assert_eq!(now.body, old.body, "{path} changed");
        assert_eq!(now.header("etag"), old.header("etag"));
        assert_eq!(now.header("last-modified"), old.header("last-modified"));
    }
    assert_eq!(
        g.get("/r/sitemap-4.xml").await.status,
        StatusCode::NOT_FOUND
    );
    assert!(g.admin("/").await.text().contains("stale"));
    let metrics = g.admin("/metrics").await.text();
    assert!(metrics.contains("oai_bridge_serving_stale{repository=\"r\"} 1"));
    assert!(metrics.contains("oai_bridge_harvests_total{repository=\"r\",outcome=\"failure\"} 1"));
    // Only one generation folder is on disk.
    let dirs = std::fs::read_dir(state.path().join("r"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_type().unwrap().is_dir())
        .count();
    assert_eq!(dirs, 1);

    // Once the upstream recovers, the new records are served.
    upstream.clear_faults();
    g.refresh(0).await;
    assert_eq!(published(&g).await, expected(14));
    assert!(
        g.admin("/metrics")
            .await
            .text()
            .contains("oai_bridge_serving_stale{repository=\"r\"} 0")
    );
    g.stop().await;
}

/// OAI-53, Q-04, Q-35 on the status page: a repository that refuses `from`, a list that ended
/// short of its announced size, a record sent with empty metadata.
#[tokio::test]
async fn what_the_upstream_got_wrong_is_on_the_status_page() {
    let upstream = TestServer::builder(numbered(20))
        .page_size(5)
        .refuse_from(422)
        .start();
    let (g, _state) = serving(&upstream, "").await;
    let page = g.admin("/").await.text();
    assert!(!page.contains("selective harvesting refused"), "{page}");
    assert!(!page.contains("list ended short"), "{page}");

    // The incremental refresh is refused; its fallback to a full harvest ends after page 2,
    // where a record comes with empty metadata.
    upstream.fault_on_page(2, Fault::PrematureEnd);
    let mut records = numbered(20);
    records[7] = records[7].clone().empty_metadata();
    upstream.set_records(records);
    g.refresh(0).await;
    let status = g.gateway.repos()[0].status();
    assert_eq!(status.last_error, None);
    assert_eq!(
        status.short_list.map(|s| (s.announced, s.delivered)),
        Some((20, 10))
    );
    let page = g.admin("/").await.text();
    for want in [
        "selective harvesting refused:</span> HTTP status 422",
        "ended after 10 of the 20 records",
        "empty_metadata 1",
    ] {
        assert!(page.contains(want), "status page lacks {want:?}:\n{page}");
    }
    assert_eq!(published(&g).await, expected(20), "nothing removed");
    let metrics = g.admin("/metrics").await.text();
    for want in [
        "oai_bridge_short_list{repository=\"r\"} 1",
        "oai_bridge_identifiers_dropped{repository=\"r\",reason=\"empty_metadata\"} 1",
    ] {
        assert!(metrics.contains(want), "metrics lack {want:?}:\n{metrics}");
    }
    g.stop().await;
}

/// H-03, H-04, H-09: a refresh with unchanged content keeps names, ETags and Last-Modified; a
/// changed shard gets a new ETag, the unchanged ones keep theirs.
#[tokio::test]
async fn validators_follow_content_not_refreshes() {
    let upstream = TestServer::builder(numbered(12)).start();
    let (g, _state) = serving(&upstream, "").await;
    let first = g.get("/r/sitemap-1.xml").await;
    let third = g.get("/r/sitemap-3.xml").await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    g.refresh(0).await;
    let again = g.get("/r/sitemap-1.xml").await;
    assert_eq!(again.header("etag"), first.header("etag"));
    assert_eq!(again.header("last-modified"), first.header("last-modified"));

    // Record 9 (in shard 3: URLs sort as text, 1 10 11 12 2 | 3 4 5 6 7 | 8 9) gets a new
    // datestamp: only shard 3 and the index change.
    let mut records = numbered(12);
    records[8] = TestRecord::new("oai:test:9", "2025-01-01").url("https://repo.example/record/9");
    upstream.set_records(records);
    g.refresh(0).await;
    let first_now = g.get("/r/sitemap-1.xml").await;
    let third_now = g.get("/r/sitemap-3.xml").await;
    assert_eq!(first_now.header("etag"), first.header("etag"));
    assert_ne!(third_now.header("etag"), third.header("etag"));
    assert!(third_now.text().contains("2025-01-01"));
    let lm = |r: &Reply| httpdate::parse_http_date(r.header("last-modified")).unwrap();
    assert!(lm(&third_now) > lm(&third));
    g.stop().await;
}

/// Issue 6 point 6 (memory flat under load): a swap drops the replaced generation's cached
/// bytes, so refreshes do not pile dead generations into the cache until it is full.
#[tokio::test]
async fn a_swap_drops_the_replaced_generations_cached_bytes() {
    let upstream = TestServer::builder(numbered(12)).start();
    let (g, _state) = serving(&upstream, "").await;
    let serial = |g: &Running| g.gateway.repos()[0].current().unwrap().serial;
    let cached_serials = async |g: &Running| {
        let mut serials = g.gateway.cached_serials().await;
        let entries = serials.len();
        serials.dedup();
        (serials, entries)
    };
    for path in ["/r/sitemap.xml", "/r/sitemap-1.xml", "/r/sitemap-2.xml"] {
        assert_eq!(g.get(path).await.status, StatusCode::OK);
    }
    let first = serial(&g);
    let (serials, entries) = cached_serials(&g).await;
    assert_eq!(serials, vec![first]);
    assert!(entries >= 3);

    g.refresh(0).await;
    let second = serial(&g);
    assert_ne!(first, second);
    let (serials, entries) = cached_serials(&g).await;
    assert!(serials.is_empty(), "{serials:?}");
    assert_eq!(entries, 0);
    assert_eq!(g.get("/r/sitemap-1.xml").await.status, StatusCode::OK);
    assert_eq!(cached_serials(&g).await.0, vec![second]);
    g.stop().await;
}

/// Issue 5 point 8: shards are stable. Records keep their shard across refreshes; a refresh
/// that adds, changes and deletes a few records changes only the shards holding them, and every
/// other shard keeps its bytes, ETag and Last-Modified; its files are linked, not rewritten.
#[tokio::test]
async fn a_small_change_rewrites_only_the_shards_holding_it() {
    let ids = |r: std::ops::RangeInclusive<usize>| {
        r.map(|i| {
            TestRecord::new(&format!("oai:test:{i}"), "2024-05-01")
                .url(&format!("https://repo.example/record/{i:03}"))
        })
        .collect::<Vec<_>>()
    };
    let upstream = TestServer::builder(ids(1..=30)).page_size(10).start();
    let (g, state) = serving(&upstream, "").await;
    let names: Vec<String> = (1..=6).map(|n| format!("/r/sitemap-{n}.xml")).collect();
    let mut before = Vec::new();
    for name in &names {
        before.push(g.get(name).await);
    }
    let index_before = lastmods(&g.get("/r/sitemap.xml").await.text());
    let inode = |name: &str| {
        use std::os::unix::fs::MetadataExt;
        let repo = state.path().join("r");
        let id = std::fs::read_to_string(repo.join("current")).unwrap();
        std::fs::metadata(repo.join(id.trim()).join(name))
            .unwrap()
            .ino()
    };
    let fourth_inode = inode("sitemap-4.xml.gz");

    // Shard n holds records 5n-4..5n. Record 3 is deleted (shard 1), record 7 changes its URL
    // within shard 2's range, and record 31 arrives after the last URL. Packed anew, every
    // shard after the first would shift by one URL; here shards 3-6 stay as they were.
    let mut records = ids(1..=31);
    records[2] = TestRecord::new("oai:test:3", "2024-06-02").deleted();
    records[6] =
        TestRecord::new("oai:test:7", "2024-06-02").url("https://repo.example/record/007b");
    records[30].datestamp = "2024-06-02".to_owned();
    upstream.set_records(records);
    upstream.set_response_date("2024-06-03T00:00:00Z");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    g.refresh(0).await;
    assert!(g.gateway.repos()[0].status().last_error.is_none());
    for (name, old) in names.iter().zip(&before) {
        let now = g.get(name).await;
        let changed = name.ends_with("-1.xml") || name.ends_with("-2.xml");
        assert_eq!(now.body != old.body, changed, "{name}");
        assert_eq!(now.header("etag") != old.header("etag"), changed, "{name}");
        assert_eq!(
            now.header("last-modified") != old.header("last-modified"),
            changed,
            "{name}"
        );
    }
    // SM-10: the index dates each shard by when the file changed, as its Last-Modified does;
    // deleting record 3 changed no datestamp of shard 1, but its lastmod moved.
    let index_after = lastmods(&g.get("/r/sitemap.xml").await.text());
    for (n, name) in names.iter().enumerate() {
        let modified =
            httpdate::parse_http_date(g.get(name).await.header("last-modified")).unwrap();
        let secs = modified
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let lastmod = oai_bridge::Datestamp::from_unix(secs);
        assert_eq!(index_after[n].1, lastmod.to_string(), "{name}");
        let changed = n < 2;
        assert_eq!(index_after[n] != index_before[n], changed, "{name}");
    }
    assert!(
        g.get("/r/sitemap-2.xml")
            .await
            .text()
            .contains("record/007b")
    );
    assert!(
        !g.get("/r/sitemap-1.xml")
            .await
            .text()
            .contains("record/003")
    );
    // Shard 6 was full: the new record starts shard 7.
    assert!(
        g.get("/r/sitemap-7.xml")
            .await
            .text()
            .contains("record/031")
    );
    assert_eq!(
        inode("sitemap-4.xml.gz"),
        fourth_inode,
        "an unchanged shard is linked from the previous generation, not written again"
    );
    g.stop().await;
}

/// H-02, H-05, H-06, H-07, H-08 and exact path matching.
#[tokio::test]
async fn conditional_requests_head_gzip_and_errors() {
    let upstream = TestServer::builder(numbered(12)).start();
    let (g, _state) = serving(&upstream, "gzip = true\n").await;
    let get = reqwest::Method::GET;
    let plain = g.get("/r/sitemap-1.xml").await;
    let etag = plain.header("etag").to_owned();
    let lm = plain.header("last-modified").to_owned();
    assert!(
        etag.starts_with('"') && etag.ends_with('"'),
        "strong ETag: {etag}"
    );
    assert_eq!(plain.header("vary"), "Accept-Encoding");
    assert_eq!(plain.header("content-encoding"), "");
    assert!(plain.header("cache-control").contains("max-age=3600"));

    // If-None-Match wins over If-Modified-Since (H-05); a 304 carries the validators (H-06).
    // If-Match and If-Unmodified-Since that fail give 412 (RFC 9110 §13.1.1, §13.1.4).
    let cases: [(&[(&str, &str)], StatusCode); 9] = [
        (&[("if-none-match", &etag)], StatusCode::NOT_MODIFIED),
        (
            &[
                ("if-none-match", &etag),
                ("if-modified-since", "Thu, 01 Jan 1970 00:00:00 GMT"),
            ],
            StatusCode::NOT_MODIFIED,
        ),
        (
            &[("if-none-match", "\"other\""), ("if-modified-since", &lm)],
            StatusCode::OK,
        ),
        (&[("if-modified-since", &lm)], StatusCode::NOT_MODIFIED),
        (&[("if-modified-since", "not a date")], StatusCode::OK),
        (&[("if-match", &etag)], StatusCode::OK),
        (
            &[("if-match", "\"other\"")],
            StatusCode::PRECONDITION_FAILED,
        ),
        (
            &[("if-unmodified-since", "Thu, 01 Jan 2015 00:00:00 GMT")],
            StatusCode::PRECONDITION_FAILED,
        ),
        (&[("if-unmodified-since", &lm)], StatusCode::OK),
    ];
    for (headers, want) in cases {
        let reply = g.request(get.clone(), "/r/sitemap-1.xml", headers).await;
        assert_eq!(reply.status, want, "{headers:?}");
        if want == StatusCode::NOT_MODIFIED {
            assert!(reply.body.is_empty());
            for h in ["etag", "cache-control", "vary", "last-modified"] {
                assert_eq!(reply.header(h), plain.header(h), "304 header {h}");
            }
        }
    }

    // HEAD: the headers of GET, no body (H-07).
    let head = g
        .request(reqwest::Method::HEAD, "/r/sitemap-1.xml", &[])
        .await;
    assert_eq!(head.status, StatusCode::OK);
    assert!(head.body.is_empty());
    for h in [
        "content-type",
        "content-length",
        "etag",
        "last-modified",
        "vary",
        "cache-control",
    ] {
        assert_eq!(head.header(h), plain.header(h), "HEAD header {h}");
    }

    // Negotiated gzip: encoded, its own ETag, same content (H-02, H-03).
    let gz = g
        .request(
            get.clone(),
            "/r/sitemap-1.xml",
            &[("accept-encoding", "br, gzip")],
        )
        .await;
    assert_eq!(gz.header("content-encoding"), "gzip");
    assert_eq!(gz.header("vary"), "Accept-Encoding");
    assert!(gz.header("content-type").starts_with("application/xml"));
    assert_ne!(gz.header("etag"), etag);
    assert_eq!(gunzip(&gz.body), plain.body);
    let refused = g
        .request(
            get.clone(),
            "/r/sitemap-1.xml",
            &[("accept-encoding", "gzip;q=0")],
        )
        .await;
    assert_eq!(refused.header("content-encoding"), "");
    assert_eq!(refused.body, plain.body);

    // .xml.gz is a gzip file, not an encoding (H-02); the index lists .xml.gz shards.
    let file = g.get("/r/sitemap-1.xml.gz").await;
    assert_eq!(file.header("content-type"), "application/gzip");
    assert_eq!(file.header("content-encoding"), "");
    assert_eq!(&file.body[..2], &[0x1f, 0x8b]);
    assert_eq!(gunzip(&file.body), plain.body);
    assert!(
        g.get("/r/sitemap.xml")
            .await
            .text()
            .contains("sitemap-1.xml.gz</loc>")
    );

    // 405 with Allow; 404 for unknown paths and repositories (H-08).
    for method in [
        reqwest::Method::POST,
        reqwest::Method::PUT,
        reqwest::Method::DELETE,
    ] {
        let reply = g.request(method, "/r/sitemap.xml", &[]).await;
        assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(reply.header("allow"), "GET, HEAD");
    }
    for path in [
        "/nope",
        "/x/sitemap.xml",
        "/r/sitemap-9.xml",
        "/r/sitemap-1.xml.gz.gz",
        "/r/manifest.json",
        "/r/current",
    ] {
        assert_eq!(g.get(path).await.status, StatusCode::NOT_FOUND, "{path}");
    }
    // Traversal, sent raw (an HTTP client would normalise the path): a plain 404.
    for path in [
        "/r/../r/sitemap.xml",
        "/r/%2e%2e/current",
        "/../../etc/passwd",
    ] {
        assert_eq!(raw_status(&g.url, path).await, 404, "{path}");
    }
    g.stop().await;
}

/// The status of a request whose path is sent as is.
async fn raw_status(base: &str, path: &str) -> u16 {
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    raw_request_status(base, request.as_bytes()).await
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// A repository with `signmap = true`: the gateway serves its Signmap and announces it, and a
/// refresh still reads every page once.
#[tokio::test]
async fn the_signmap_is_served_from_the_same_harvest() {
    let records: Vec<TestRecord> = (1..=7)
        .map(|i| {
            TestRecord::new(&format!("oai:test:{i}"), "2024-05-01")
                .url(&format!("https://repo.example/record/{i}"))
                .url(&format!("https://repo.example/files/{i}.pdf"))
                .url(&format!("doi:10.1234/{i}"))
        })
        .collect();
    let upstream = TestServer::builder(records).page_size(3).start();
    let (g, _state) = serving(&upstream, "signmap = true\n").await;
    // Three pages, each requested once: the Signmap costs no extra request.
    assert_eq!(upstream.list_requests().len(), 3);
    assert!(
        g.get("/robots.txt")
            .await
            .text()
            .contains(&format!("Sitemap: {}r/signmap.xml", g.url))
    );
    let index = g.get("/r/signmap.xml").await;
    assert_eq!(index.status, StatusCode::OK);
    let shards = locs(&index.text());
    assert_eq!(shards.len(), 2, "7 entries, 5 a shard");
    let first = g.get(&path_of(&shards[0])).await.text();
    assert!(first.contains("xmlns:rs=\"http://www.openarchives.org/rs/terms/\""));
    assert!(first.contains(
        "<url><loc>https://repo.example/record/1</loc><lastmod>2024-05-01</lastmod>\
         <rs:ln rel=\"describedby\" href=\""
    ));
    assert!(first.contains(
        "<rs:ln rel=\"item\" href=\"https://repo.example/files/1.pdf\" type=\"application/pdf\"/>"
    ));
    assert!(first.contains("<rs:ln rel=\"cite-as\" href=\"https://doi.org/10.1234/1\"/>"));
    // Its own section on the status page and in the metrics.
    assert!(g.admin("/").await.text().contains("Signmap</a>: 7 entries"));
    let metrics = g.admin("/metrics").await.text();
    assert!(
        metrics.contains("oai_bridge_profile_entries{repository=\"r\",profile=\"signmap\"} 7"),
        "{metrics}"
    );
    assert!(metrics.contains(
        "oai_bridge_profile_records_dropped{repository=\"r\",profile=\"signmap\",reason=\"no_landing_page\"} 0"
    ));
    g.stop().await;
}

/// DiWoo: one index per Woo information category with the records of its sets (sub-sets
/// included), https locations only, every entry with a lastmod; a record that leaves the set
/// leaves the category at the next refresh. With the Signmap on too, each page is still read
/// once.
#[tokio::test]
async fn diwoo_categories_follow_the_sets() {
    let records = vec![
        TestRecord::new("oai:test:1", "2024-05-01")
            .url("https://repo.example/record/1")
            .set("besluiten"),
        TestRecord::new("oai:test:2", "2024-05-02")
            .url("https://repo.example/record/2")
            .set("besluiten:2024"),
        TestRecord::new("oai:test:3", "2024-05-03")
            .url("http://repo.example/record/3")
            .set("besluiten"),
        TestRecord::new("oai:test:4", "2024-05-04")
            .url("https://repo.example/record/4")
            .set("rapporten"),
    ];
    let upstream = TestServer::builder(records.clone()).start();
    let state = tempfile::tempdir().unwrap();
    // Every profile at once, from one harvest.
    let extra = "signmap = true\ndiwoo = { \"besluiten\" = 16, \"rapporten\" = 15 }\n\
                 [repository.ocx]\ndefault_type = \"https://schema.org/CreativeWork\"\n";
    let text = config(&upstream, extra).replace(
        "scope = [\"https://repo.example/\"]",
        "scope = [\"https://repo.example/\", \"http://repo.example/\"]",
    );
    let g = Running::start(&text, state.path()).await;
    g.ready().await;
    assert_eq!(
        upstream.list_requests().len(),
        1,
        "one page, read once for every profile"
    );
    assert_eq!(g.get("/r/signmap.xml").await.status, StatusCode::OK);
    let ocx = g.get("/r/ocx.xml").await;
    assert_eq!(ocx.status, StatusCode::OK);
    let ocx_shard = g.get(&path_of(&locs(&ocx.text())[0])).await.text();
    assert_eq!(
        ocx_shard
            .matches("<ocx:type>https://schema.org/CreativeWork</ocx:type>")
            .count(),
        4
    );
    assert!(
        g.admin("/metrics")
            .await
            .text()
            .contains("oai_bridge_profile_entries{repository=\"r\",profile=\"ocx\"} 4")
    );
    let robots = g.get("/robots.txt").await.text();
    assert!(
        robots.contains(&format!("Sitemap: {}r/ocx.xml", g.url)),
        "{robots}"
    );
    for n in ["015", "016"] {
        assert!(
            robots.contains(&format!(
                "Sitemap: {}r/sitemapindex-diwoo-infocat{n}.xml",
                g.url
            )),
            "{robots}"
        );
    }
    let category = |n: &'static str| {
        let g = &g;
        async move {
            let index = g
                .get(&format!("/r/sitemapindex-diwoo-infocat{n}.xml"))
                .await;
            assert_eq!(index.status, StatusCode::OK);
            let mut urls = Vec::new();
            for shard in locs(&index.text()) {
                let text = g.get(&path_of(&shard)).await.text();
                assert_eq!(
                    text.matches("<url>").count(),
                    text.matches("<lastmod>").count(),
                    "every entry has a lastmod"
                );
                urls.extend(locs(&text));
            }
            urls
        }
    };
    assert_eq!(
        category("016").await,
        [
            "https://repo.example/record/1",
            "https://repo.example/record/2"
        ],
        "record 3 is http: not published for DiWoo"
    );
    assert_eq!(category("015").await, ["https://repo.example/record/4"]);
    let metrics = g.admin("/metrics").await.text();
    assert!(metrics.contains(
        "oai_bridge_profile_records_dropped{repository=\"r\",profile=\"diwoo-infocat016\",reason=\"diwoo_requires_https\"} 1"
    ), "{metrics}");
    assert!(
        g.admin("/")
            .await
            .text()
            .contains("DiWoo</a> category 016: 2 URLs")
    );

    // Record 1 moves to the reports: it leaves category 16 and joins 15.
    let mut moved = records;
    moved[0] = TestRecord::new("oai:test:1", "2024-06-01")
        .url("https://repo.example/record/1")
        .set("rapporten");
    upstream.set_records(moved);
    g.refresh(0).await;
    assert_eq!(category("016").await, ["https://repo.example/record/2"]);
    assert_eq!(
        category("015").await,
        [
            "https://repo.example/record/1",
            "https://repo.example/record/4"
        ]
    );
    g.stop().await;
}

/// CDIF in the gateway: each record's JSON-LD at a stable URL under the repository, with the
/// CDIF media type, a Link back to the landing page and validators; listed in the CDIF sitemap,
/// announced to `User-agent: CDIF1.0`; linked from the Signmap; served again after a restart.
/// The metadata lists too: the same documents in an `ItemList` with the list's media type,
/// listed in their own sitemap, announced beside the documents' one.
#[tokio::test]
async fn cdif_documents_are_served_from_the_generation() {
    const PUBLIC: &str = "https://maps.example/";
    let records: Vec<TestRecord> = (1..=3)
        .map(|i| {
            TestRecord::new(&format!("oai:test:{i}"), "2024-05-01")
                .url(&format!("https://repo.example/record/{i}"))
                .title(&format!("Record {i}"))
        })
        .collect();
    let upstream = TestServer::builder(records).start();
    let state = tempfile::tempdir().unwrap();
    // Published at a fixed URL: the restart below listens on another port.
    let text = published_at(
        &config(
            &upstream,
            "cdif = true\ncdif_list = true\nsignmap = true\n[repository.ocx]\ndefault_type = \"https://schema.org/Dataset\"\n",
        ),
        "https://maps.example/",
    );
    let g = Running::start(&text, state.path()).await;
    g.ready().await;
    let robots = g.get("/robots.txt").await.text();
    assert!(
        robots.contains(&format!(
            "\nUser-agent: CDIF1.0\nDisallow:\nSitemap: {0}r/cdif-sitemap.xml\n\
             Sitemap: {0}r/cdif-list-sitemap.xml\n",
            PUBLIC
        )),
        "{robots}"
    );
    let index = g.get("/r/cdif-sitemap.xml").await;
    assert_eq!(index.status, StatusCode::OK);
    let docs = locs(&g.get(&path_of(&locs(&index.text())[0])).await.text());
    assert_eq!(docs.len(), 3);
    let mut landing = BTreeSet::new();
    for doc in &docs {
        let reply = g.get(&path_of(doc)).await;
        assert_eq!(reply.status, StatusCode::OK, "{doc}");
        assert_eq!(
            reply.header("content-type"),
            "application/ld+json; profile=\"CDIF1.0\""
        );
        let v: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
        let url = v["url"].as_str().unwrap().to_owned();
        assert_eq!(reply.header("link"), format!("<{url}>; rel=\"describes\""));
        assert!(v["name"].as_str().unwrap().starts_with("Record "));
        assert_eq!(
            reply.header("last-modified"),
            "Wed, 01 May 2024 00:00:00 GMT"
        );
        let again = g
            .request(
                reqwest::Method::GET,
                &path_of(doc),
                &[("if-none-match", reply.header("etag"))],
            )
            .await;
        assert_eq!(again.status, StatusCode::NOT_MODIFIED);
        landing.insert(url);
    }
    assert_eq!(landing, expected(3));
    // The list: one, holding the same three documents, served as is (not gzipped).
    let list_index = g.get("/r/cdif-list-sitemap.xml").await.text();
    let lists = locs(&g.get(&path_of(&locs(&list_index)[0])).await.text());
    assert_eq!(lists, [format!("{}r/cdif-list-1.jsonld", PUBLIC)]);
    let list = g
        .request(
            reqwest::Method::GET,
            &path_of(&lists[0]),
            &[("accept-encoding", "gzip")],
        )
        .await;
    assert_eq!(list.status, StatusCode::OK);
    assert_eq!(
        list.header("content-type"),
        "application/ld+json; profile=\"CDIF-list-1.0\""
    );
    assert_eq!(list.header("content-encoding"), "");
    let list: serde_json::Value = serde_json::from_slice(&list.body).unwrap();
    assert_eq!(list["@type"], "ItemList");
    assert_eq!(list["numberOfItems"], 3);
    let mut in_list = Vec::new();
    for (item, doc) in list["itemListElement"]
        .as_array()
        .unwrap()
        .iter()
        .zip(&docs)
    {
        let alone: serde_json::Value =
            serde_json::from_slice(&g.get(&path_of(doc)).await.body).unwrap();
        assert_eq!(item["item"], alone, "{doc}");
        in_list.push(item["item"]["url"].as_str().unwrap().to_owned());
    }
    assert_eq!(in_list.len(), 3);
    // The Signmap links each record's JSON-LD.
    let signmap = g.get("/r/signmap-1.xml").await.text();
    for doc in &docs {
        assert!(
            signmap.contains(&format!(
                "<rs:ln rel=\"describedby\" href=\"{doc}\" type=\"application/ld+json\" profile=\"CDIF1.0\"/>"
            )),
            "{signmap}"
        );
    }
    assert_eq!(
        g.get("/r/cdif/0000000000000000.jsonld").await.status,
        StatusCode::NOT_FOUND
    );
    // OCX points at the same documents.
    let ocx = g.get("/r/ocx-1.xml").await.text();
    for doc in &docs {
        assert!(
            ocx.contains(&format!(
                "<ocx:format>JSON-LD</ocx:format><ocx:loc>{doc}</ocx:loc>"
            )),
            "{ocx}"
        );
    }
    assert!(
        g.admin("/")
            .await
            .text()
            .contains("CDIF</a>: 3 JSON-LD documents in <a href=")
    );
    assert!(
        g.admin("/metrics")
            .await
            .text()
            .contains("oai_bridge_profile_entries{repository=\"r\",profile=\"cdif\"} 3")
    );
    assert!(
        g.admin("/metrics")
            .await
            .text()
            .contains("oai_bridge_profile_entries{repository=\"r\",profile=\"cdif_list\"} 3")
    );
    let first = g.get(&path_of(&docs[0])).await.body;
    g.stop().await;

    // Restarted on the same state, before any refresh: the same document.
    upstream.fault_always(Fault::Delay(Duration::from_secs(60)));
    let second = Running::start(&text, state.path()).await;
    assert_eq!(second.get(&path_of(&docs[0])).await.body, first);
    second.stop().await;
}

/// robots.txt announces the indexes the generation being served holds, not those the
/// configuration could make: with every profile on and no record yet having a landing page (nor
/// a record in one DiWoo category), only the sitemap and one DiWoo index are announced, and each
/// `Sitemap:` line answers 200. When the next refresh finds landing pages, robots.txt announces
/// the other profiles too, under a new ETag (SM-18, H-10).
#[tokio::test]
async fn robots_txt_announces_what_the_generation_holds() {
    let pdf_only = vec![
        TestRecord::new("oai:test:1", "2024-05-01")
            .url("https://repo.example/files/1.pdf")
            .set("besluiten"),
    ];
    let upstream = TestServer::builder(pdf_only).start();
    let extra = "signmap = true\ncdif = true\ncdif_list = true\n\
                 diwoo = { \"besluiten\" = 16, \"rapporten\" = 15 }\n\
                 [repository.ocx]\ndefault_type = \"https://schema.org/CreativeWork\"\n";
    let (g, _state) = serving(&upstream, extra).await;
    let announced = |robots: &str| -> Vec<String> {
        (robots.lines())
            .filter_map(|l| l.strip_prefix("Sitemap: "))
            .map(str::to_owned)
            .collect()
    };
    let first = g.get("/robots.txt").await;
    assert_eq!(
        announced(&first.text()),
        [
            format!("{}r/sitemap.xml", g.url),
            format!("{}r/sitemapindex-diwoo-infocat016.xml", g.url)
        ],
        "{}",
        first.text()
    );
    assert!(!first.text().contains("CDIF1.0"), "{}", first.text());
    // What robots.txt leaves out is indeed not there.
    for absent in [
        "signmap.xml",
        "ocx.xml",
        "cdif-sitemap.xml",
        "cdif-list-sitemap.xml",
    ] {
        assert_eq!(
            g.get(&format!("/r/{absent}")).await.status,
            StatusCode::NOT_FOUND,
            "{absent}"
        );
    }

    upstream.set_records(vec![
        TestRecord::new("oai:test:1", "2024-06-01")
            .url("https://repo.example/record/1")
            .url("https://repo.example/files/1.pdf")
            .set("besluiten"),
        TestRecord::new("oai:test:2", "2024-06-01")
            .url("https://repo.example/record/2")
            .set("rapporten"),
    ]);
    g.refresh(0).await;
    let second = g.get("/robots.txt").await;
    let urls = announced(&second.text());
    let expected: Vec<String> = [
        "sitemap.xml",
        "signmap.xml",
        "ocx.xml",
        "sitemapindex-diwoo-infocat015.xml",
        "sitemapindex-diwoo-infocat016.xml",
        "cdif-sitemap.xml",
        "cdif-list-sitemap.xml",
    ]
    .iter()
    .map(|n| format!("{}r/{n}", g.url))
    .collect();
    assert_eq!(urls, expected, "{}", second.text());
    assert!(
        second.text().contains("\nUser-agent: CDIF1.0\n"),
        "{}",
        second.text()
    );
    assert_ne!(second.header("etag"), first.header("etag"));
    for url in &urls {
        assert_eq!(g.get(&path_of(url)).await.status, StatusCode::OK, "{url}");
    }
    g.stop().await;
}

/// A public URL with a path prefix (a reverse-proxied sidecar): the sitemaps name it, and
/// requests are answered with or without it.
#[tokio::test]
async fn a_public_url_with_a_path_prefix() {
    let upstream = TestServer::builder(numbered(3)).start();
    let state = tempfile::tempdir().unwrap();
    let text = config(&upstream, "").replace(
        "[server]\n",
        "[server]\npublic_url = \"https://repo.example.org/sitemaps/\"\n",
    );
    let g = Running::start(&text, state.path()).await;
    g.ready().await;
    let with = g.get("/sitemaps/r/sitemap.xml").await;
    let without = g.get("/r/sitemap.xml").await;
    assert_eq!(with.status, StatusCode::OK);
    assert_eq!(with.body, without.body);
    assert_eq!(
        locs(&with.text()),
        ["https://repo.example.org/sitemaps/r/sitemap-1.xml"]
    );
    assert!(
        g.get("/sitemaps/robots.txt")
            .await
            .text()
            .contains("Sitemap: https://repo.example.org/sitemaps/r/sitemap.xml")
    );
    g.stop().await;
}

/// Readers that fetch the index and then every shard it lists, while generations are swapped
/// underneath them, never meet a missing shard or a mix of generations.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_during_swaps_never_see_a_missing_shard() {
    let upstream = TestServer::builder(numbered(12)).start();
    let (g, state) = serving(&upstream, "").await;
    let g = Arc::new(g);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut readers = Vec::new();
    for _ in 0..4 {
        let (g, stop) = (Arc::clone(&g), Arc::clone(&stop));
        readers.push(tokio::spawn(async move {
            let mut rounds = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let index = g.get("/r/sitemap.xml").await;
                assert_eq!(index.status, StatusCode::OK);
                for shard in locs(&index.text()) {
                    let reply = g.get(&path_of(&shard)).await;
                    assert_eq!(reply.status, StatusCode::OK, "{shard}");
                    assert!(reply.text().ends_with("</urlset>\n"), "a whole shard");
                }
                rounds += 1;
            }
            rounds
        }));
    }
    // Alternate two versions of the repository with the same number of shards.
    for round in 0..8 {
        let day = if round % 2 == 0 { "2023" } else { "2024" };
        let records = (1..=12)
            .map(|i| {
                TestRecord::new(&format!("oai:test:{i}"), &format!("{day}-01-{i:02}"))
                    .url(&format!("https://repo.example/record/{i}"))
            })
            .collect();
        upstream.set_records(records);
        g.refresh(0).await;
        assert!(g.gateway.repos()[0].status().last_error.is_none());
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for r in readers {
        assert!(r.await.unwrap() > 0, "each reader completed rounds");
    }
    // Retired generations are gone from disk once no reader holds them.
    wait_for(
        || {
            std::fs::read_dir(state.path().join("r"))
                .unwrap()
                .filter(|e| e.as_ref().unwrap().file_type().unwrap().is_dir())
                .count()
                == 1
        },
        "only the current generation is left on disk",
    )
    .await;
    Arc::into_inner(g).unwrap().stop().await;
}

/// Concurrent requests for a shard that is not cached read it from disk once (moka's
/// `try_get_with`), and later requests are answered from memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_misses_read_a_file_once() {
    let upstream = TestServer::builder(numbered(12)).start();
    let (g, state) = serving(&upstream, "").await;
    let g = Arc::new(g);
    let fills = || g.gateway.metrics.cache_fills.get();
    let before = fills();
    let requests: Vec<_> = (0..32)
        .map(|_| {
            let g = Arc::clone(&g);
            tokio::spawn(async move { g.get("/r/sitemap-2.xml").await })
        })
        .collect();
    let mut bodies = BTreeSet::new();
    for r in requests {
        let reply = r.await.unwrap();
        assert_eq!(reply.status, StatusCode::OK);
        bodies.insert(reply.body);
    }
    assert_eq!(bodies.len(), 1);
    assert_eq!(fills() - before, 1, "32 concurrent requests, one disk read");
    // From memory now: even with the file gone from disk, it is served.
    let current = std::fs::read_to_string(state.path().join("r/current")).unwrap();
    std::fs::remove_file(
        state
            .path()
            .join("r")
            .join(current.trim())
            .join("sitemap-2.xml"),
    )
    .unwrap();
    assert_eq!(g.get("/r/sitemap-2.xml").await.status, StatusCode::OK);
    assert_eq!(fills() - before, 1);
    Arc::into_inner(g).unwrap().stop().await;
}

/// The configuration `text`, published at `public_url` (a restart listens on another port).
fn published_at(text: &str, public_url: &str) -> String {
    text.replace(
        "[server]\n",
        &format!("[server]\npublic_url = \"{public_url}\"\n"),
    )
}

/// A restart serves the persisted generation at once, before (and without) the upstream; but
/// not after the public URL changed, since its files name the old one: then the repository
/// waits for its first refresh (SM-10, H-08).
#[tokio::test]
async fn a_restart_serves_the_persisted_generation_at_once() {
    let upstream = TestServer::builder(numbered(7)).start();
    let state = tempfile::tempdir().unwrap();
    let text = published_at(&config(&upstream, ""), "https://maps.example/");
    let first = Running::start(&text, state.path()).await;
    first.ready().await;
    let index = first.get("/r/sitemap.xml").await;
    let shard = first.get("/r/sitemap-2.xml").await;
    let robots = first.get("/robots.txt").await;
    first.stop().await;
    // When robots.txt's text was first served is kept in the state folder; dated back here, so
    // that a restart within the same second cannot pass for keeping it.
    let record = state.path().join("robots.txt.modified");
    let kept = std::fs::read_to_string(&record).unwrap();
    let (hash, _) = kept.trim().split_once(' ').unwrap();
    std::fs::write(&record, format!("{hash} 1600000000\n")).unwrap();

    // The upstream now hangs on every request.
    upstream.fault_always(Fault::Delay(Duration::from_secs(60)));
    let second = Running::start(&text, state.path()).await;
    assert!(second.gateway.ready(), "ready before any refresh");
    let again = second.get("/r/sitemap.xml").await;
    assert_eq!(again.body, index.body);
    assert_eq!(again.header("etag"), index.header("etag"));
    assert_eq!(again.header("last-modified"), index.header("last-modified"));
    assert_eq!(second.get("/r/sitemap-2.xml").await.body, shard.body);
    assert_eq!(second.get("/readyz").await.status, StatusCode::OK);
    // robots.txt too keeps its validators: its text has not changed since it was first served
    // (H-04), though this process made it anew, and it is dated as then.
    let robots_again = second.get("/robots.txt").await;
    assert_eq!(robots_again.body, robots.body);
    assert_eq!(robots_again.header("etag"), robots.header("etag"));
    assert_eq!(
        robots_again.header("last-modified"),
        "Sun, 13 Sep 2020 12:26:40 GMT"
    );
    second.stop().await;

    let moved = published_at(&config(&upstream, ""), "https://elsewhere.example/maps/");
    let third = Running::start(&moved, state.path()).await;
    assert!(
        !third.gateway.ready(),
        "nothing to serve at the new URL yet"
    );
    assert_eq!(
        third.get("/r/sitemap.xml").await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );
    // The refresh starts at once (and hangs on the upstream).
    wait_for(
        || third.gateway.repos()[0].status().refreshing,
        "the refresh starts",
    )
    .await;
    assert_eq!(
        third.get("/robots.txt").await.text().lines().last(),
        Some("Sitemap: https://elsewhere.example/maps/r/sitemap.xml")
    );
    third.stop().await;
}

/// A restart after a profile was switched on serves the persisted generation (its URLs are
/// right) and refreshes at once, rather than when the old one would be due: the Signmap is
/// served without waiting out the refresh interval (an hour here).
#[tokio::test]
async fn a_restart_with_other_settings_refreshes_at_once() {
    let upstream = TestServer::builder(numbered(7)).start();
    let state = tempfile::tempdir().unwrap();
    let text = published_at(&config(&upstream, ""), "https://maps.example/");
    let first = Running::start(&text, state.path()).await;
    first.ready().await;
    first.stop().await;

    let signmap = published_at(
        &config(&upstream, "signmap = true\n"),
        "https://maps.example/",
    );
    let second = Running::start(&signmap, state.path()).await;
    assert!(second.gateway.ready(), "the persisted generation is served");
    let repo = second.gateway.repos()[0].clone();
    wait_for(
        || repo.status().completed >= 1,
        "the refresh that runs at once ends",
    )
    .await;
    assert_eq!(repo.status().last_error, None);
    assert_eq!(second.get("/r/signmap.xml").await.status, StatusCode::OK);
    assert!(
        second
            .get("/robots.txt")
            .await
            .text()
            .contains("Sitemap: https://maps.example/r/signmap.xml\n")
    );
    second.stop().await;
}

/// Repositories refresh independently: one hanging upstream does not hold up another; and an
/// upstream's Retry-After is respected even when it is longer than the schedule.
#[tokio::test]
async fn repositories_refresh_independently_and_respect_retry_after() {
    let slow = TestServer::builder(numbered(3)).start();
    slow.fault_always(Fault::Delay(Duration::from_secs(60)));
    let fast = TestServer::builder(numbered(4)).start();
    let busy = TestServer::builder(numbered(2)).start();
    busy.fault_always(Fault::Unavailable(crate::server::RetryAfter::Seconds(7200)));
    let state = tempfile::tempdir().unwrap();
    let text = format!(
        "[server]\nstate_dir = \"{{state}}\"\n[harvest]\nmax_attempts = 1\n\
         [[repository]]\nname = \"slow\"\nbase_url = \"{}\"\n\
         [[repository]]\nname = \"fast\"\nbase_url = \"{}\"\nscope = [\"https://repo.example/\"]\n\
         [[repository]]\nname = \"busy\"\nbase_url = \"{}\"\nrefresh_interval_secs = 1\n",
        slow.url(),
        fast.url(),
        busy.url()
    );
    let g = Running::start(&text, state.path()).await;
    let fast_repo = g.gateway.repos()[1].clone();
    wait_for(
        || fast_repo.current().is_some(),
        "the fast repository is served",
    )
    .await;
    assert!(
        g.gateway.repos()[0].status().refreshing,
        "the slow one is still harvesting"
    );
    assert_eq!(g.get("/fast/sitemap.xml").await.status, StatusCode::OK);
    assert_eq!(
        g.get("/slow/sitemap.xml").await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );
    let ready = g.get("/readyz").await;
    assert_eq!(ready.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(ready.text().contains("slow") && !ready.text().contains("fast"));
    // robots.txt announces every repository's index, in configuration order, the ones not yet
    // served too (they answer 503 with Retry-After until their first generation).
    let robots = g.get("/robots.txt").await.text();
    let sitemaps: Vec<&str> = robots
        .lines()
        .filter(|l| l.starts_with("Sitemap: "))
        .collect();
    assert_eq!(
        sitemaps,
        ["slow", "fast", "busy"].map(|r| format!("Sitemap: {}{r}/sitemap.xml", g.url)),
        "{robots}"
    );

    let busy_repo = g.gateway.repos()[2].clone();
    wait_for(
        || busy_repo.status().completed >= 1,
        "the busy repository's refresh fails",
    )
    .await;
    // The refresh ends before its schedule sets the next one: wait for that, not only the end.
    wait_for(
        || {
            let s = busy_repo.status();
            !s.refreshing && s.next_refresh.is_some_and(|n| n > SystemTime::now())
        },
        "it is scheduled again",
    )
    .await;
    let next = busy_repo.status().next_refresh.unwrap();
    let ahead = next.duration_since(SystemTime::now()).unwrap();
    assert!(
        ahead > Duration::from_secs(7000),
        "the next refresh waits for Retry-After (7200 s), not the 1 s schedule: {ahead:?}"
    );
    assert!(
        g.admin("/metrics")
            .await
            .text()
            .contains("oai_bridge_upstream_retry_after_waits_total{repository=\"busy\"}")
    );
    g.stop().await;

    // Issue 5 point 7: the Retry-After is stored; a restarted gateway does not call the
    // upstream before it is over.
    let asked = busy.requests().len();
    let again = Running::start(&text, state.path()).await;
    let busy_repo = again.gateway.repos()[2].clone();
    wait_for(
        || busy_repo.status().next_refresh.is_some(),
        "the busy repository is scheduled",
    )
    .await;
    let next = busy_repo.status().next_refresh.unwrap();
    let ahead = next.duration_since(SystemTime::now()).unwrap();
    assert!(ahead > Duration::from_secs(7000), "{ahead:?}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        busy.requests().len(),
        asked,
        "the upstream was called early"
    );
    again.stop().await;
}

fn binary() -> Command {
    crate::golden::bridge()
}

/// Config errors name the key and exit 78; `--check-config` validates and exits.
#[test]
fn config_errors_and_check_config() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("[server]\nlisten = \"nowhere\"\n", "[server] listen"),
        ("[server]\nlisten_on = \"x\"\n", "unknown field `listen_on`"),
        (
            "[[repository]]\nname = \"a\"\nbase_url = \"ftp://x/\"\n",
            "[[repository]] \"a\" base_url",
        ),
        (
            "[[repository]]\nname = \"a\"\nbase_url = \"a.xml\"\n[[repository]]\nname = \"a\"\nbase_url = \"b.xml\"\n",
            "used by two repositories",
        ),
        (
            "[[repository]]\nname = \"a\"\nbase_url = \"a.xml\"\nmax_urls_per_shard = 0\n",
            "max_urls_per_shard",
        ),
        ("[server]\n", "none is configured"),
    ];
    for (text, want) in cases {
        let path = dir.path().join("bridge.toml");
        std::fs::write(&path, text).unwrap();
        let out = binary()
            .args(["serve", "--check-config", "--config"])
            .arg(&path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{text}: {stderr}");
        assert!(
            stderr.contains(want),
            "{text}: {stderr} should name {want:?}"
        );
    }
    let out = binary()
        .args(["serve", "--check-config", "--public-url", "nope"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--public-url"));

    // Free ports: the check binds the listeners' (the shipped 8080 and 8081 may be taken).
    let out = binary()
        .args(["serve", "--check-config"])
        .env("OAI_BRIDGE_LISTEN", "127.0.0.1:0")
        .env("OAI_BRIDGE_ADMIN_LISTEN", "127.0.0.1:0")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("sample"));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("refreshes: at most 4 at a time, 1 per upstream host"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// `oai-bridge serve` with `args`, in the crate's folder, on free loopback ports; its public
/// and admin URLs, as the lines it prints at start give them.
fn spawn_serve(args: &[&std::ffi::OsStr]) -> (std::process::Child, String, String) {
    let listen: [&std::ffi::OsStr; 2] = ["--admin-listen".as_ref(), "127.0.0.1:0".as_ref()];
    let (child, mut line) = serve_printing(&[&listen[..], args].concat(), &[]);
    let first = line().trim().to_owned();
    let base = (first.strip_prefix("oai-bridge serving on "))
        .unwrap_or_else(|| panic!("first line: {first:?}"))
        .to_owned();
    let second = line().trim().to_owned();
    let admin = (second.strip_prefix("status page"))
        .unwrap_or_else(|| panic!("second line: {second:?}"))
        .trim()
        .to_owned();
    (child, base, admin)
}

/// `oai-bridge serve` with `args` on a free loopback port, in the crate's folder, without the
/// environment's `remove`d variables; and what it prints, a line (its end trimmed) a call.
fn serve_printing(
    args: &[&std::ffi::OsStr],
    remove: &[&str],
) -> (std::process::Child, impl FnMut() -> String + use<>) {
    let mut command = binary();
    command
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(args);
    for variable in remove {
        command.env_remove(variable);
    }
    let mut child = command
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let line = move || {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        line.trim_end().to_owned()
    };
    (child, line)
}

/// Waits until `child` exits, at most 20 s.
fn exit_status(child: &mut std::process::Child) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the process exits"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The shipped configuration serves the sample repository; SIGTERM drains and exits 0. It
/// prints both listeners' URLs: the status page and the metrics are on the admin one only.
#[test]
fn the_binary_serves_the_sample_and_stops_on_sigterm() {
    let state = tempfile::tempdir().unwrap();
    let (mut child, base, admin) = spawn_serve(&["--state-dir".as_ref(), state.path().as_os_str()]);
    assert_ne!(base, admin);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let index = runtime.block_on(async {
        let start = Instant::now();
        loop {
            let r = client()
                .get(format!("{base}sample/sitemap.xml"))
                .send()
                .await
                .unwrap();
            if r.status() == StatusCode::OK {
                break r.text().await.unwrap();
            }
            assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the sample is served"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    assert!(
        index.contains(&format!("<loc>{base}sample/sitemap-1.xml</loc>")),
        "{index}"
    );
    runtime.block_on(async {
        for (base, path, want) in [
            (&admin, "", 200),
            (&admin, "metrics", 200),
            (&admin, "readyz", 200),
            (&admin, "sample/sitemap.xml", 404),
            (&base, "", 404),
            (&base, "metrics", 404),
            (&base, "readyz", 200),
        ] {
            let got = client().get(format!("{base}{path}")).send().await.unwrap();
            assert_eq!(got.status().as_u16(), want, "{base}{path}");
        }
    });
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert_eq!(exit_status(&mut child).code(), Some(0));
}

/// Issue: two `serve` on one state_dir both started, harvested into the same stores and swapped
/// `current` under each other, silently. The second is refused with exit 78 (not 1, which
/// systemd's Restart=on-failure would retry forever), naming the lock file and the first
/// gateway's process; once the first stopped, it starts.
#[test]
fn a_second_gateway_on_the_same_state_dir_is_refused() {
    let state = tempfile::tempdir().unwrap();
    let dir = ["--state-dir".as_ref(), state.path().as_os_str()];
    let (mut first, base, _) = spawn_serve(&dir);
    let second = binary()
        .args(["serve", "--listen", "127.0.0.1:0", "--admin-listen", "off"])
        .args(dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(78), "{err}");
    for want in [
        format!(
            "[server] state_dir {}: another gateway runs on it",
            state.path().display()
        ),
        format!(
            "{} is held by `oai-bridge serve`, process {}",
            state.path().join("gateway.lock").display(),
            first.id()
        ),
        "--state-dir".to_owned(),
    ] {
        assert!(err.contains(&want), "{err}\nshould say {want}");
    }
    assert!(
        !String::from_utf8_lossy(&second.stdout).contains("serving on"),
        "{}",
        String::from_utf8_lossy(&second.stdout)
    );
    // `--check-config` beside it (as before a reload): valid, the running gateway and its port
    // said as notes.
    let listen = base
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let checked = binary()
        .args([
            "serve",
            "--check-config",
            "--listen",
            &listen,
            "--admin-listen",
            "off",
        ])
        .args(dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&checked.stdout);
    assert_eq!(
        checked.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    assert!(
        out.contains(&format!(
            "note: a gateway runs on [server] state_dir {} (`oai-bridge serve`, process {}",
            state.path().display(),
            first.id()
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!("note: [server] listen {listen} is in use, presumably by the gateway running on this state_dir")),
        "{out}"
    );
    let killed = Command::new("kill")
        .args(["-TERM", &first.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert_eq!(exit_status(&mut first).code(), Some(0));
    // The first gone, the state_dir is free.
    let (mut third, _, _) = spawn_serve(&dir);
    third.kill().unwrap();
    third.wait().unwrap();
}

/// The README says to add "the `Sitemap:` lines the gateway prints at start" to the site's
/// robots.txt: with a public URL, it prints them, the very lines of the robots.txt it serves;
/// without one, it says why it prints none.
#[test]
fn the_start_prints_the_sitemap_lines_for_the_sites_robots_txt() {
    let state = tempfile::tempdir().unwrap();
    let public = "https://repository.northbridge.example/sitemaps/";
    let (mut child, mut line) = serve_printing(
        &[
            "--admin-listen".as_ref(),
            "off".as_ref(),
            "--public-url".as_ref(),
            public.as_ref(),
            "--state-dir".as_ref(),
            state.path().as_os_str(),
        ],
        &[],
    );
    let first = line();
    let base = first
        .strip_prefix("oai-bridge serving on ")
        .unwrap()
        .to_owned();
    while line() != "Add to the robots.txt of the site whose pages these sitemaps list:" {}
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let robots = runtime.block_on(async {
        let r = client()
            .get(format!("{base}robots.txt"))
            .send()
            .await
            .unwrap();
        r.text().await.unwrap()
    });
    let served: Vec<&str> = robots
        .lines()
        .filter(|l| l.starts_with("Sitemap: "))
        .collect();
    assert_eq!(
        served,
        [format!("Sitemap: {public}sample/sitemap.xml")],
        "{robots}"
    );
    let printed: Vec<String> = served.iter().map(|_| line()).collect();
    assert_eq!(printed, served);
    child.kill().unwrap();
    child.wait().unwrap();

    // Without a public URL, none, and why.
    let state = tempfile::tempdir().unwrap();
    let (mut child, mut line) = serve_printing(
        &[
            "--admin-listen".as_ref(),
            "off".as_ref(),
            "--state-dir".as_ref(),
            state.path().as_os_str(),
        ],
        &["OAI_BRIDGE_PUBLIC_URL"],
    );
    let mut banner = Vec::new();
    loop {
        let line = line();
        let done = line.starts_with("No Sitemap: lines");
        banner.push(line);
        if done {
            break;
        }
        assert!(banner.len() < 20, "{banner:?}");
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        banner
            .last()
            .unwrap()
            .contains("until [server] public_url is set"),
        "{banner:?}"
    );
    assert!(
        !banner.iter().any(|l| l.starts_with("Sitemap:")),
        "{banner:?}"
    );
}

/// Issue 6 point 7: the admin endpoint starts a refresh only with the configured bearer token;
/// without a token configured it does not exist.
#[tokio::test]
async fn the_admin_endpoint_needs_its_token() {
    let upstream = TestServer::builder(numbered(3)).start();
    let state = tempfile::tempdir().unwrap();
    let token = "0123456789abcdef0123456789abcdef";
    let text = config(&upstream, "").replace(
        "[harvest]",
        &format!("admin_token = \"{token}\"\n[harvest]"),
    );
    let g = Running::start(&text, state.path()).await;
    g.ready().await;
    let asked = upstream.list_requests().len();
    let post = |auth: Option<String>, path: &'static str| {
        let g = &g;
        async move {
            let headers: Vec<(&str, String)> =
                auth.map(|a| ("authorization", a)).into_iter().collect();
            let headers: Vec<(&str, &str)> =
                headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            fetch(&g.admin_url, reqwest::Method::POST, path, &headers).await
        }
    };
    let none = post(None, "/-/refresh/r").await;
    assert_eq!(none.status, StatusCode::UNAUTHORIZED);
    assert!(none.header("www-authenticate").starts_with("Bearer"));
    let wrong = post(Some(format!("Bearer {token}x")), "/-/refresh/r").await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    let basic = post(Some(format!("Basic {token}")), "/-/refresh/r").await;
    assert_eq!(basic.status, StatusCode::UNAUTHORIZED);
    let get = g.admin("/-/refresh/r").await;
    assert_eq!(get.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(get.header("allow"), "POST");
    let unknown = post(Some(format!("Bearer {token}")), "/-/refresh/nope").await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    // Issue 22: the admin endpoints exist on the admin listener only.
    let public = g
        .request(
            reqwest::Method::POST,
            "/-/refresh/r",
            &[("authorization", &format!("Bearer {token}"))],
        )
        .await;
    assert_eq!(public.status, StatusCode::NOT_FOUND);
    assert_eq!(upstream.list_requests().len(), asked, "no refresh yet");

    let repo = g.gateway.repos()[0].clone();
    let before = repo.status().completed;
    let ok = post(Some(format!("Bearer {token}")), "/-/refresh/r").await;
    assert_eq!(ok.status, StatusCode::ACCEPTED);
    wait_for(|| repo.status().completed > before, "the refresh ends").await;
    assert!(upstream.list_requests().len() > asked);
    // The token shows nowhere: not in the status page, the metrics or the config's Debug.
    for path in ["/", "/metrics"] {
        assert!(!g.admin(path).await.text().contains(token), "{path}");
    }
    let parsed = Config::parse(&text.replace("{state}", "s"), "t.toml", Path::new(".")).unwrap();
    assert!(!format!("{parsed:?}").contains(token));
    g.stop().await;

    // Without a token the endpoint does not exist.
    let g = Running::start(&config(&upstream, ""), state.path()).await;
    let answer = fetch(
        &g.admin_url,
        reqwest::Method::POST,
        "/-/refresh/r",
        &[("authorization", "Bearer anything-at-all-16")],
    )
    .await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    g.stop().await;
}

/// Sends raw bytes to the gateway at `base` and returns the status code of its answer (0 when
/// the connection was closed without one).
async fn raw_request_status(base: &str, request: &[u8]) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = Url::parse(base).unwrap();
    let mut stream =
        tokio::net::TcpStream::connect((addr.host_str().unwrap(), addr.port().unwrap()))
            .await
            .unwrap();
    // The gateway may answer (and close) before the whole request is written.
    let _ = stream.write_all(request).await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer);
    text.strip_prefix("HTTP/1.1 ")
        .and_then(|t| t.get(..3))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// Issue 6 point 5: slow clients are timed out. With `client_timeout_secs = 1`, a client that
/// sends half a request head and then nothing, one that drips its head a byte at a time, and an
/// idle keep-alive connection after an answer are all closed by the gateway; the gateway goes on
/// serving. (The default is 30 s; only the number differs.)
#[tokio::test]
async fn slow_and_idle_clients_are_disconnected() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let upstream = TestServer::builder(numbered(3)).start();
    let state = tempfile::tempdir().unwrap();
    let text = config(&upstream, "").replace("[server]\n", "[server]\nclient_timeout_secs = 1\n");
    let g = Running::start(&text, state.path()).await;
    g.ready().await;
    let addr = Url::parse(&g.url).unwrap();
    let connect =
        || tokio::net::TcpStream::connect((addr.host_str().unwrap(), addr.port().unwrap()));
    // Reads until the gateway closes the connection: what it sent, and how long that took.
    let until_closed = |mut stream: tokio::net::TcpStream| async move {
        let start = Instant::now();
        let mut answer = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
            .await
            .expect("the gateway closes the connection within 10 s")
            .ok();
        (
            String::from_utf8_lossy(&answer).into_owned(),
            start.elapsed(),
        )
    };

    let mut half = connect().await.unwrap();
    half.write_all(b"GET /r/sitemap.xml HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let (answer, took) = until_closed(half).await;
    assert!(!answer.contains("200 OK"), "{answer}");
    assert!(took < Duration::from_secs(5), "{took:?}");

    let mut drip = connect().await.unwrap();
    let start = Instant::now();
    let mut closed = false;
    for byte in b"GET /r/sitemap.xml HTTP/1.1\r\nHost: x\r\nX-Slow: yes\r\n\r\n" {
        tokio::time::sleep(Duration::from_millis(200)).await;
        if drip.write_all(&[*byte]).await.is_err() {
            closed = true;
            break;
        }
    }
    let (answer, _) = until_closed(drip).await;
    assert!(
        closed || !answer.contains("200 OK"),
        "a head dripped over {:?} was answered: {answer}",
        start.elapsed()
    );
    assert!(start.elapsed() < Duration::from_secs(12));

    let mut idle = connect().await.unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let (answer, took) = until_closed(idle).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        took < Duration::from_secs(5),
        "an idle connection stayed {took:?}"
    );

    assert_eq!(g.get("/r/sitemap.xml").await.status, StatusCode::OK);
    g.stop().await;
}

/// Issue 6 point 5: hostile requests get plain 4xx answers (or a closed connection), never a
/// file outside the generation, and the gateway keeps serving.
#[tokio::test]
async fn hostile_requests_get_plain_4xx_answers() {
    let upstream = TestServer::builder(numbered(3)).start();
    let state = tempfile::tempdir().unwrap();
    std::fs::write(state.path().join("secret.txt"), "do not serve").unwrap();
    let g = Running::start(&config(&upstream, ""), state.path()).await;
    g.ready().await;
    for path in [
        "/r/../secret.txt",
        "/r/..%2fsecret.txt",
        "/r/%2e%2e/%2e%2e/etc/passwd",
        "/r/sitemap.xml%00",
        "/r/sitemap-1.xml/",
        "/r//sitemap.xml",
        "/R/sitemap.xml",
        "/r/current",
        "/r/store.sqlite",
        "/r/sitemap-01.xml",
        "/-/refresh/r",
    ] {
        assert_eq!(raw_status(&g.url, path).await, 404, "{path}");
    }
    let cases: Vec<(&str, Vec<u8>, &[u16])> = vec![
        (
            "a NUL in the path",
            b"GET /r/sitemap.xml\0 HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            &[400],
        ),
        (
            "a 100 KB path",
            format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(100_000)).into_bytes(),
            &[414, 431, 400, 0],
        ),
        (
            "100 KB of headers",
            format!(
                "GET /r/sitemap.xml HTTP/1.1\r\nHost: x\r\n{}\r\n",
                "X-Junk: yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy\r\n"
                    .repeat(1_300)
            )
            .into_bytes(),
            &[431, 400, 0],
        ),
        (
            "not HTTP at all",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n".to_vec(),
            &[400, 0],
        ),
        (
            "a request line without a version",
            b"GET /r/sitemap.xml\r\n\r\n".to_vec(),
            &[400, 0],
        ),
    ];
    for (what, request, allowed) in cases {
        let status = raw_request_status(&g.url, &request).await;
        assert!(allowed.contains(&status), "{what}: {status}");
    }
    // Still serving.
    assert_eq!(g.get("/r/sitemap.xml").await.status, StatusCode::OK);
    g.stop().await;
}

/// Issue 22 point 3: a configuration of repositories named `repos` (each `(name, upstream,
/// extra settings)`), with an admin token, in `state`.
fn reload_config(state: &Path, repos: &[(&str, &TestServer, &str)]) -> String {
    let mut text = format!(
        "[server]\nstate_dir = \"{}\"\nadmin_token = \"{RELOAD_TOKEN}\"\n\
         [harvest]\nmax_attempts = 1\nbackoff_initial_ms = 10\n",
        state.display()
    );
    for (name, upstream, extra) in repos {
        text.push_str(&format!(
            "[[repository]]\nname = \"{name}\"\nbase_url = \"{}\"\nmax_urls_per_shard = 5\n\
             scope = [\"https://repo.example/\"]\nrefresh_interval_secs = 3600\n{extra}",
            upstream.url()
        ));
    }
    text
}

const RELOAD_TOKEN: &str = "0123456789abcdef0123456789abcdef";

impl Running {
    /// `POST /-/reload` on the admin listener, with the token.
    async fn post_reload(&self) -> Reply {
        let auth = format!("Bearer {RELOAD_TOKEN}");
        let headers = [("authorization", auth.as_str())];
        fetch(
            &self.admin_url,
            reqwest::Method::POST,
            "/-/reload",
            &headers,
        )
        .await
    }

    /// The value of the metric line that starts with `series`.
    async fn metric(&self, series: &str) -> Option<String> {
        let text = self.admin("/metrics").await.text();
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ').map(str::to_owned))
    }
}

/// Issue 22 point 3: reloads add and remove repositories while four readers fetch the sitemaps
/// of one present throughout, and no request of theirs fails. A removed repository is 404, its
/// schedule stops and its state stays on disk; added back, it serves its persisted generation
/// at once, under a new cache serial. robots.txt follows the set. A changed setting applies
/// from the next refresh. An added repository keeps a ready gateway ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reloads_add_and_remove_repositories_without_failing_a_request() {
    let kept = TestServer::start(numbered(12));
    let old = TestServer::start(numbered(3));
    let new = TestServer::start(numbered(4));
    let state = tempfile::tempdir().unwrap();
    let file = state.path().join("bridge.toml");
    let write = |repos: &[(&str, &TestServer, &str)]| {
        std::fs::write(&file, reload_config(state.path(), repos)).unwrap();
    };
    write(&[("r", &kept, ""), ("old", &old, "")]);
    let g = Arc::new(Running::start_file(&file).await);
    g.ready().await;
    let old_serial = g.gateway.repo("old").unwrap().current().unwrap().serial;

    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut readers = Vec::new();
    for _ in 0..4 {
        let (g, stop) = (Arc::clone(&g), Arc::clone(&stop));
        readers.push(tokio::spawn(async move {
            let (mut rounds, mut failed) = (0, Vec::new());
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let index = g.get("/r/sitemap.xml").await;
                if index.status != StatusCode::OK {
                    failed.push(format!("index: {}", index.status));
                    continue;
                }
                // After `gzip = true`, the index lists `.xml.gz` shards.
                for shard in locs(&index.text()) {
                    let reply = g.get(&path_of(&shard)).await;
                    let body = if shard.ends_with(".gz") && reply.status == StatusCode::OK {
                        gunzip(&reply.body)
                    } else {
                        reply.body
                    };
                    if reply.status != StatusCode::OK || !body.ends_with(b"</urlset>\n") {
                        failed.push(format!("{shard}: {}", reply.status));
                    }
                }
                rounds += 1;
            }
            (rounds, failed)
        }));
    }

    // `old` has a series in every family that has a repository label and is set by then.
    let old_repo = g.gateway.repo("old").unwrap();
    wait_for(
        || old_repo.status().completed >= 1,
        "old's first refresh ends",
    )
    .await;
    assert_eq!(g.get("/old/sitemap.xml").await.status, StatusCode::OK);
    let metrics = g.admin("/metrics").await.text();
    for series in [
        "oai_bridge_upstream_requests_total{repository=\"old\",status=\"200\"}",
        "oai_bridge_refresh_duration_seconds_count{repository=\"old\",outcome=\"success\"}",
        "oai_bridge_refresh_phase_duration_seconds_count{repository=\"old\",phase=\"render\"}",
        "oai_bridge_served_bytes_total{repository=\"old\",encoding=\"identity\"}",
        "oai_bridge_refresh_interval_seconds{repository=\"old\"}",
        "oai_bridge_last_attempt_timestamp_seconds{repository=\"old\"}",
    ] {
        assert!(metrics.contains(series), "{series}:\n{metrics}");
    }

    // Remove `old`, add `new`.
    new.fault_always(Fault::Status(500));
    write(&[("r", &kept, ""), ("new", &new, "")]);
    let answer = g.post_reload().await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text());
    assert_eq!(
        answer.text(),
        "reloaded: added new; removed old; changed none\n"
    );
    assert_eq!(
        g.get("/old/sitemap.xml").await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        g.get("/readyz?repository=old").await.status,
        StatusCode::NOT_FOUND
    );
    assert!(state.path().join("old/current").exists(), "its state stays");
    let asked = old.list_requests().len();
    // `new`'s first refresh fails: the gateway stays ready, `new` alone is not.
    let first = g.gateway.repo("new").unwrap();
    wait_for(|| first.status().completed >= 1, "new's first refresh ends").await;
    assert_eq!(g.get("/readyz").await.status, StatusCode::OK);
    assert_eq!(
        g.get("/readyz?repository=new").await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );
    new.clear_faults();
    g.refresh(1).await;
    assert!(first.serving());
    assert_eq!(g.get("/readyz?repository=new").await.status, StatusCode::OK);
    assert_eq!(published_of(&g, "new").await, expected(4));
    let robots = g.get("/robots.txt").await.text();
    assert!(
        robots.contains(&format!("{}new/sitemap.xml", g.url)),
        "{robots}"
    );
    assert!(!robots.contains("/old/"), "{robots}");
    let metrics = g.admin("/metrics").await.text();
    assert!(!metrics.contains("repository=\"old\""), "{metrics}");
    assert!(
        metrics.contains("oai_bridge_serving{repository=\"new\"} 1"),
        "{metrics}"
    );

    // `old` back: its persisted generation is served at once, under a serial of its own.
    write(&[("r", &kept, ""), ("new", &new, ""), ("old", &old, "")]);
    let reloaded = g.gateway.reload().await.unwrap();
    assert_eq!(reloaded.added, ["old"]);
    let again = g
        .gateway
        .repo("old")
        .unwrap()
        .current()
        .expect("served at once");
    assert_ne!(
        again.serial, old_serial,
        "cache keys stay unique across reloads"
    );
    assert_eq!(published_of(&g, "old").await, expected(3));
    assert_eq!(
        old.list_requests().len(),
        asked,
        "a fresh generation is not harvested again"
    );

    // A setting that changes the files refreshes at once, as a restart does (here gzip:
    // `.xml.gz` shards), with no refresh asked for.
    write(&[
        ("r", &kept, "gzip = true\n"),
        ("new", &new, ""),
        ("old", &old, ""),
    ]);
    assert_eq!(g.gateway.reload().await.unwrap().changed, ["r"]);
    wait_for_status(&g, "/r/sitemap-1.xml.gz", StatusCode::OK).await;
    // So does a change of how its upstream is treated alone.
    write(&[
        (
            "r",
            &kept,
            "gzip = true
[repository.harvest]
max_attempts = 2
",
        ),
        ("new", &new, ""),
        ("old", &old, ""),
    ]);
    assert_eq!(g.gateway.reload().await.unwrap().changed, ["r"]);

    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for r in readers {
        let (rounds, failed) = r.await.unwrap();
        assert!(rounds > 0, "each reader completed rounds");
        assert_eq!(failed, Vec::<String>::new(), "no request failed");
    }
    Arc::into_inner(g).unwrap().stop().await;
}

/// Waits until `path` on the public listener answers `status`.
async fn wait_for_status(g: &Running, path: &str, status: StatusCode) {
    let start = Instant::now();
    while g.get(path).await.status != status {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out waiting until {path} answers {status}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A reload that gives a repository a public URL of its own refreshes it at once: robots.txt
/// and the index name the new URLs without a refresh asked for, and the old generation serves
/// until then.
#[tokio::test]
async fn a_reload_that_changes_the_files_refreshes_at_once() {
    let upstream = TestServer::start(numbered(7));
    let state = tempfile::tempdir().unwrap();
    let file = state.path().join("bridge.toml");
    let write = |extra: &str| {
        std::fs::write(
            &file,
            reload_config(state.path(), &[("r", &upstream, extra)]),
        )
        .unwrap();
    };
    write("");
    let g = Running::start_file(&file).await;
    g.ready().await;
    let cdn = "https://cdn.example/maps/r/";
    assert!(!g.get("/robots.txt").await.text().contains(cdn));
    let repo = g.gateway.repo("r").unwrap();
    let before = repo.status().completed;

    write(&format!("public_url = \"{cdn}\"\n"));
    assert_eq!(g.gateway.reload().await.unwrap().changed, ["r"]);
    wait_for(
        || repo.status().completed > before && !repo.status().refreshing,
        "the refresh the reload started ends",
    )
    .await;
    assert!(repo.status().last_error.is_none());
    let robots = g.get("/robots.txt").await.text();
    assert!(
        robots.contains(&format!("Sitemap: {cdn}sitemap.xml\n")),
        "{robots}"
    );
    let index = g.get("/r/sitemap.xml").await;
    assert_eq!(index.status, StatusCode::OK);
    let shards = locs(&index.text());
    assert!(!shards.is_empty());
    assert!(shards.iter().all(|s| s.starts_with(cdn)), "{shards:?}");
    g.stop().await;
}

/// The log lines written on this thread while it lives (the tests' runtime has one thread, so
/// the gateway's tasks log here).
#[derive(Clone, Default)]
struct LogLines(Arc<std::sync::Mutex<Vec<u8>>>);

impl LogLines {
    fn capture(&self) -> tracing::subscriber::DefaultGuard {
        let writer = self.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl std::io::Write for LogLines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A refresh stopped because a reload removed its repository says so in the log; one stopped
/// by the gateway stopping says shutdown.
#[tokio::test]
async fn the_log_says_why_a_refresh_was_abandoned() {
    let logs = LogLines::default();
    let _guard = logs.capture();
    let hanging = TestServer::builder(numbered(3)).start();
    hanging.fault_always(Fault::Delay(Duration::from_secs(60)));
    let also = TestServer::builder(numbered(3)).start();
    also.fault_always(Fault::Delay(Duration::from_secs(60)));
    let state = tempfile::tempdir().unwrap();
    let file = state.path().join("bridge.toml");
    let write = |repos: &[(&str, &TestServer, &str)]| {
        std::fs::write(&file, reload_config(state.path(), repos)).unwrap();
    };
    write(&[("gone", &hanging, ""), ("kept", &also, "")]);
    let g = Running::start_file(&file).await;
    let repos = g.gateway.repos();
    wait_for(
        || repos.iter().all(|r| r.status().refreshing),
        "both refreshes hang",
    )
    .await;

    write(&[("kept", &also, "")]);
    assert_eq!(g.gateway.reload().await.unwrap().removed, ["gone"]);
    let text = logs.text();
    let line = text
        .lines()
        .find(|l| l.contains("repository=\"gone\"") && l.contains("refresh abandoned"))
        .unwrap_or_else(|| panic!("no line on the abandoned refresh:\n{text}"));
    assert!(
        line.contains("refresh abandoned: the repository was removed by a reload"),
        "{line}"
    );
    assert!(!text.contains("interrupted by shutdown"), "{text}");

    g.stop().await;
    let text = logs.text();
    assert!(
        text.lines()
            .any(|l| l.contains("repository=\"kept\"")
                && l.contains("refresh interrupted by shutdown")),
        "{text}"
    );
    assert!(
        !text.contains("repository=\"kept\" refresh abandoned"),
        "{text}"
    );
}

/// Every URL of repository `name`'s sitemap.
async fn published_of(g: &Running, name: &str) -> BTreeSet<String> {
    let index = g.get(&format!("/{name}/sitemap.xml")).await;
    assert_eq!(index.status, StatusCode::OK, "{name}");
    let mut urls = BTreeSet::new();
    for shard in locs(&index.text()) {
        urls.extend(locs(&g.get(&path_of(&shard)).await.text()));
    }
    urls
}

/// Issue 22 point 3: `POST /-/reload` needs the admin token; a file that is invalid keeps the
/// running configuration, answers 422 naming the key, and sets
/// `oai_bridge_config_reload_failed` until a good reload; a change only a restart applies is
/// named and ignored.
#[tokio::test]
async fn a_broken_file_keeps_the_running_configuration() {
    let upstream = TestServer::start(numbered(3));
    let state = tempfile::tempdir().unwrap();
    let file = state.path().join("bridge.toml");
    let good = reload_config(state.path(), &[("r", &upstream, "")]);
    std::fs::write(&file, &good).unwrap();
    let g = Running::start_file(&file).await;
    g.ready().await;
    assert_eq!(
        g.metric("oai_bridge_config_reload_failed").await.as_deref(),
        Some("0")
    );

    let unauthorized = fetch(&g.admin_url, reqwest::Method::POST, "/-/reload", &[]).await;
    assert_eq!(unauthorized.status, StatusCode::UNAUTHORIZED);
    let public = g
        .request(
            reqwest::Method::POST,
            "/-/reload",
            &[("authorization", &format!("Bearer {RELOAD_TOKEN}"))],
        )
        .await;
    assert_eq!(
        public.status,
        StatusCode::NOT_FOUND,
        "not on the public listener"
    );

    std::fs::write(&file, good.replace("max_attempts = 1", "max_attempts = 0")).unwrap();
    let answer = g.post_reload().await;
    assert_eq!(answer.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        answer.text().contains("[harvest] max_attempts"),
        "{}",
        answer.text()
    );
    assert_eq!(
        g.metric("oai_bridge_config_reload_failed").await.as_deref(),
        Some("1")
    );
    assert_eq!(
        g.metric("oai_bridge_config_reloads_total{outcome=\"failure\"}")
            .await
            .as_deref(),
        Some("1")
    );
    assert_eq!(published(&g).await, expected(3), "still serving");
    assert_eq!(g.get("/readyz").await.status, StatusCode::OK);
    let page = g.admin("/").await.text();
    assert!(
        page.contains("The last reload of the configuration failed")
            && page.contains("[harvest] max_attempts"),
        "{page}"
    );

    // A good file again, with a listen address and a state folder that need a restart.
    let moved = good
        .replace("[server]\n", "[server]\nlisten = \"127.0.0.1:1\"\n")
        .replace(&state.path().display().to_string(), "/elsewhere");
    std::fs::write(&file, moved).unwrap();
    let answer = g.post_reload().await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(
        answer.text(),
        "reloaded: added none; removed none; changed none; \
         needs a restart (ignored): [server] listen, [server] state_dir\n"
    );
    assert_eq!(
        g.metric("oai_bridge_config_reload_failed").await.as_deref(),
        Some("0")
    );
    assert_eq!(
        g.metric("oai_bridge_config_reloads_total{outcome=\"success\"}")
            .await
            .as_deref(),
        Some("1")
    );
    assert!(!g.admin("/").await.text().contains("reload"));
    assert_eq!(published(&g).await, expected(3));
    g.stop().await;
}

/// Issue 22 point 3: SIGHUP reloads the configuration of the running binary (it used to end
/// the process): a broken file keeps it serving and sets the gauge; a good one adds a
/// repository. `oai-bridge prune` then removes the state of the one no longer configured.
#[test]
fn sighup_reloads_the_binary_and_prune_removes_what_is_gone() {
    let state = tempfile::tempdir().unwrap();
    let file = state.path().join("bridge.toml");
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/sample-repository.xml");
    let repo = |name: &str| {
        format!(
            "[[repository]]\nname = \"{name}\"\nbase_url = \"{}\"\n",
            sample.display()
        )
    };
    let server = format!("[server]\nstate_dir = \"{}\"\n", state.path().display());
    std::fs::write(&file, format!("{server}{}", repo("sample"))).unwrap();
    let (mut child, base, admin) = spawn_serve(&["--config".as_ref(), file.as_os_str()]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let get = |url: String| {
        runtime.block_on(async {
            let r = client().get(url).send().await.unwrap();
            (r.status(), r.text().await.unwrap())
        })
    };
    let until = |what: &str, done: &dyn Fn() -> bool| {
        let start = Instant::now();
        while !done() {
            assert!(start.elapsed() < Duration::from_secs(30), "{what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let pid = child.id().to_string();
    let hup = || {
        let sent = Command::new("kill").args(["-HUP", &pid]).status().unwrap();
        assert!(sent.success());
    };
    until("the sample is served", &|| {
        get(format!("{base}sample/sitemap.xml")).0 == StatusCode::OK
    });
    let metrics = format!("{admin}metrics");
    let gauge = |value: &str| {
        let want = format!("oai_bridge_config_reload_failed {value}");
        let (get, metrics) = (&get, &metrics);
        move || get(metrics.clone()).1.lines().any(|l| l == want)
    };
    assert!(gauge("0")());

    std::fs::write(&file, format!("{server}{}nonsense = 1\n", repo("sample"))).unwrap();
    hup();
    until("the failed reload shows", &gauge("1"));
    assert_eq!(get(format!("{base}sample/sitemap.xml")).0, StatusCode::OK);
    assert!(
        child.try_wait().unwrap().is_none(),
        "SIGHUP does not end the process"
    );

    std::fs::write(
        &file,
        format!("{server}{}{}", repo("sample"), repo("second")),
    )
    .unwrap();
    hup();
    until("the good reload shows", &gauge("0"));
    until("the added repository is served", &|| {
        get(format!("{base}second/sitemap.xml")).0 == StatusCode::OK
    });

    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert_eq!(exit_status(&mut child).code(), Some(0));

    // `second` is no longer configured: prune removes its state, and only its.
    std::fs::write(&file, format!("{server}{}", repo("sample"))).unwrap();
    let prune = |dry: bool| {
        let mut command = binary();
        command.args(["prune", "--config"]).arg(&file);
        if dry {
            command.arg("--dry-run");
        }
        let out = command.output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let second = state.path().join("second");
    assert_eq!(prune(true), format!("would remove {}\n", second.display()));
    assert!(second.exists());
    assert_eq!(prune(false), format!("removed {}\n", second.display()));
    assert!(!second.exists());
    assert!(state.path().join("sample/store.sqlite").exists());
    assert!(prune(false).contains("no state of a repository that is not configured"));
}

/// Seconds since the Unix epoch, now.
fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

impl Running {
    /// The value of the metric line that starts with `series`, as a number; 0 when absent.
    async fn value(&self, series: &str) -> f64 {
        self.metric(series)
            .await
            .map_or(0.0, |v| v.parse().expect("a number"))
    }

    /// Asserts that `oai_bridge_upstream_requests_total` of `r` counts, by status, exactly the
    /// answers `upstream` gave (`none` for the connections it dropped).
    async fn upstream_statuses_match(&self, upstream: &TestServer) {
        let mut answered = std::collections::BTreeMap::<u16, usize>::new();
        for seen in upstream.requests() {
            *answered.entry(seen.status).or_default() += 1;
        }
        let text = self.admin("/metrics").await.text();
        let prefix = "oai_bridge_upstream_requests_total{repository=\"r\",status=\"";
        let mut counted = std::collections::BTreeMap::<u16, usize>::new();
        for line in text.lines().filter_map(|l| l.strip_prefix(prefix)) {
            let (status, n) = line.split_once("\"} ").unwrap();
            let status = if status == "none" {
                0
            } else {
                status.parse().unwrap()
            };
            let n: usize = n.parse().unwrap();
            if n > 0 {
                counted.insert(status, n);
            }
        }
        assert_eq!(counted, answered, "counted by status (0: none) != answered");
    }
}

/// Issue 22 point 5: the metrics an operator alerts on, with their labels and values: the
/// build, each refresh's duration and outcome, when the last one started and ended, the
/// interval (so that "stale for N refreshes" is one expression), the upstream's answers by
/// status (none when it gave none), and the body bytes of each repository's files by encoding,
/// which grow by exactly the bytes sent.
#[tokio::test]
async fn the_metrics_an_operator_alerts_on() {
    let upstream = TestServer::builder(numbered(12)).start();
    let before = unix_now().floor();
    let (g, _state) = serving(&upstream, "gzip = true\n").await;
    let repo = g.gateway.repos()[0].clone();
    wait_for(|| repo.status().completed == 1, "the first refresh ends").await;
    let after = unix_now();

    let version = env!("CARGO_PKG_VERSION");
    let build = format!("oai_bridge_build_info{{version=\"{version}\"}}");
    assert_eq!(g.metric(&build).await.as_deref(), Some("1"));
    let r = "{repository=\"r\"}";
    assert_eq!(
        g.value(&format!("oai_bridge_refresh_interval_seconds{r}"))
            .await,
        3600.0
    );
    let attempt = g
        .value(&format!("oai_bridge_last_attempt_timestamp_seconds{r}"))
        .await;
    let success = g
        .value(&format!("oai_bridge_last_success_timestamp_seconds{r}"))
        .await;
    assert!(
        before <= attempt && attempt <= success && success <= after,
        "{before} <= attempt {attempt} <= success {success} <= {after}"
    );
    let duration = "oai_bridge_refresh_duration_seconds";
    let ok = "repository=\"r\",outcome=\"success\"";
    assert_eq!(g.value(&format!("{duration}_count{{{ok}}}")).await, 1.0);
    assert_eq!(
        g.value(&format!("{duration}_bucket{{le=\"+Inf\",{ok}}}"))
            .await,
        1.0
    );
    assert_eq!(
        g.value(&format!("{duration}_bucket{{le=\"14400.0\",{ok}}}"))
            .await,
        1.0
    );
    let took = g.value(&format!("{duration}_sum{{{ok}}}")).await;
    assert!(0.0 < took && took <= after - before + 1.0, "{took}");
    let phase = |name: &str, what: &str| {
        format!(
            "oai_bridge_refresh_phase_duration_seconds_{what}{{repository=\"r\",phase=\"{name}\"}}"
        )
    };
    let mut phases = 0.0;
    for name in ["harvest", "render"] {
        assert_eq!(g.value(&phase(name, "count")).await, 1.0, "{name}");
        let took = g.value(&phase(name, "sum")).await;
        assert!(took > 0.0, "{name} took {took}");
        phases += took;
    }
    assert!(
        phases <= took,
        "the phases ({phases} s) are parts of the refresh ({took} s)"
    );
    assert_eq!(
        g.metric(&format!(
            "{duration}_count{{repository=\"r\",outcome=\"failure\"}}"
        ))
        .await,
        None
    );
    g.upstream_statuses_match(&upstream).await;
    assert_eq!(
        g.metric("oai_bridge_upstream_requests_total{repository=\"r\",status=\"none\"}")
            .await
            .as_deref(),
        Some("0"),
        "present at 0, so that a rate over it is 0 rather than absent"
    );

    // Bytes: exactly the body of each successful GET, by Content-Encoding; an `.xml.gz` is a
    // file sent as it is (identity). HEAD, 304 and 404 add none, and an unknown repository
    // makes no series.
    let served = |encoding: &str| {
        format!("oai_bridge_served_bytes_total{{repository=\"r\",encoding=\"{encoding}\"}}")
    };
    let (identity, gzip) = (served("identity"), served("gzip"));
    assert_eq!(g.metric(&identity).await, None, "nothing sent yet");
    let plain = g.get("/r/sitemap-1.xml").await;
    assert_eq!(plain.header("content-encoding"), "");
    assert_eq!(g.value(&identity).await, plain.body.len() as f64);
    let file = g.get("/r/sitemap-1.xml.gz").await;
    assert_eq!(file.header("content-type"), "application/gzip");
    let encoded = g
        .request(
            reqwest::Method::GET,
            "/r/sitemap.xml",
            &[("accept-encoding", "gzip")],
        )
        .await;
    assert_eq!(encoded.header("content-encoding"), "gzip");
    let sent_identity = (plain.body.len() + file.body.len()) as f64;
    assert_eq!(g.value(&identity).await, sent_identity);
    assert_eq!(g.value(&gzip).await, encoded.body.len() as f64);
    let etag = plain.header("etag").to_owned();
    let head = g
        .request(reqwest::Method::HEAD, "/r/sitemap-1.xml", &[])
        .await;
    assert_eq!(head.status, StatusCode::OK);
    let unchanged = g
        .request(
            reqwest::Method::GET,
            "/r/sitemap-1.xml",
            &[("if-none-match", &etag)],
        )
        .await;
    assert_eq!(unchanged.status, StatusCode::NOT_MODIFIED);
    assert_eq!(
        g.get("/r/sitemap-9.xml").await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        g.get("/nope/sitemap.xml").await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(g.value(&identity).await, sent_identity);
    assert_eq!(g.value(&gzip).await, encoded.body.len() as f64);
    let text = g.admin("/metrics").await.text();
    assert!(!text.contains("repository=\"nope\""), "{text}");

    // A failing upstream: its 500 is counted, and the refresh's duration as a failure; a
    // connection it drops is counted as none.
    upstream.fault_always(Fault::Status(500));
    g.refresh(0).await;
    upstream.clear_faults();
    upstream.fault_always(Fault::DropConnection);
    g.refresh(0).await;
    g.upstream_statuses_match(&upstream).await;
    assert!(
        g.value("oai_bridge_upstream_requests_total{repository=\"r\",status=\"500\"}")
            .await
            >= 1.0
    );
    assert!(
        g.value("oai_bridge_upstream_requests_total{repository=\"r\",status=\"none\"}")
            .await
            >= 1.0
    );
    assert_eq!(
        g.value(&format!(
            "{duration}_count{{repository=\"r\",outcome=\"failure\"}}"
        ))
        .await,
        2.0
    );
    assert_eq!(g.value(&format!("{duration}_count{{{ok}}}")).await, 1.0);
    for name in ["harvest", "render"] {
        let count = g.value(&phase(name, "count")).await;
        assert_eq!(count, 1.0, "neither failed refresh harvested to the end");
    }
    let attempt_now = g
        .value(&format!("oai_bridge_last_attempt_timestamp_seconds{r}"))
        .await;
    assert!(attempt_now >= attempt && attempt_now >= success);
    assert_eq!(
        g.value(&format!("oai_bridge_last_success_timestamp_seconds{r}"))
            .await,
        success,
        "failures leave the last success"
    );

    // docs/metrics.md is the reference: every family the gateway exposes is in it.
    let reference =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/metrics.md"))
            .unwrap();
    let text = g.admin("/metrics").await.text();
    for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
        let mut words = line.split(' ').skip(2);
        let (name, kind) = (words.next().unwrap(), words.next().unwrap());
        let name = match kind {
            "counter" => format!("{name}_total"),
            _ => name.to_owned(),
        };
        assert!(
            reference.contains(&format!("| `{name}` | {kind} |")),
            "docs/metrics.md lacks a row for {name} ({kind})"
        );
    }
    g.stop().await;
}

/// The example alert rules of docs/metrics.md are docs/alerts.yml, which CI checks with
/// `promtool check rules` and `promtool test rules` (.ci/run).
#[test]
fn the_metrics_reference_shows_the_alert_rules_ci_checks() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
    let reference = std::fs::read_to_string(docs.join("metrics.md")).unwrap();
    let rules = std::fs::read_to_string(docs.join("alerts.yml")).unwrap();
    let shown = reference
        .split_once("```yaml\n")
        .and_then(|(_, rest)| rest.split_once("```\n"))
        .map(|(block, _)| block)
        .expect("docs/metrics.md has a yaml block");
    assert_eq!(
        shown, rules,
        "docs/metrics.md's rules differ from docs/alerts.yml"
    );
}

/// Issue 22 point 4: with `max_concurrent_refreshes = 1`, a repository that is due while
/// another refreshes waits for the slot, and the status page says so; a gateway stopped then
/// stops the waiting schedule too.
#[tokio::test]
async fn a_refresh_waits_for_a_slot_and_the_status_page_says_so() {
    let slow = TestServer::builder(numbered(3)).start();
    slow.fault_always(Fault::Delay(Duration::from_secs(60)));
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/sample-repository.xml");
    let state = tempfile::tempdir().unwrap();
    // The spread puts the slow one first: "b" is due half a second later.
    let text = format!(
        "[server]\nstate_dir = \"{{state}}\"\n[harvest]\nmax_attempts = 1\n\
         max_concurrent_refreshes = 1\nstart_spread_secs = 1\n\
         [[repository]]\nname = \"slow\"\nbase_url = \"{}\"\n\
         [[repository]]\nname = \"b\"\nbase_url = \"{}\"\n",
        slow.url(),
        sample.display()
    );
    let g = Running::start(&text, state.path()).await;
    let b = g.gateway.repo("b").unwrap();
    wait_for(|| b.status().waiting_for_slot, "b waits for a slot").await;
    let slots = g.gateway.refresh_slots();
    assert_eq!((slots.running, slots.waiting, slots.max), (1, 1, 1));
    for (series, value) in [
        ("oai_bridge_refreshes_running", "1"),
        ("oai_bridge_refreshes_waiting", "1"),
        ("oai_bridge_refreshes_max_concurrent", "1"),
    ] {
        assert_eq!(g.metric(series).await.as_deref(), Some(value), "{series}");
    }
    assert!(g.gateway.repo("slow").unwrap().status().refreshing);
    assert!(!b.status().refreshing && b.current().is_none());
    let page = g.admin("/").await.text();
    assert!(
        page.contains("1 running, 1 waiting for a slot (at most 1 at a time, 1 per upstream host"),
        "{page}"
    );
    assert!(page.contains("due, waiting for a slot"), "{page}");
    // The 503 of a repository without a sitemap says truthfully why.
    assert_eq!(
        g.get("/b/sitemap.xml").await.text(),
        "b: no sitemap yet; the first refresh is waiting for a refresh slot\n"
    );
    assert_eq!(
        g.get("/slow/sitemap.xml").await.text(),
        "slow: no sitemap yet; the first refresh is running\n"
    );
    g.stop().await;
}

/// A repository whose first refresh the spread puts later answers 503 saying it is scheduled,
/// with a `Retry-After` of the time until then.
#[tokio::test]
async fn a_repository_waiting_for_its_first_refresh_says_so() {
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/sample-repository.xml");
    let state = tempfile::tempdir().unwrap();
    let repos: String = ["now", "later"]
        .iter()
        .map(|name| {
            format!(
                "[[repository]]\nname = \"{name}\"\nbase_url = \"{}\"\n",
                sample.display()
            )
        })
        .collect();
    let text = format!(
        "[server]\nstate_dir = \"{{state}}\"\n[harvest]\nstart_spread_secs = 3600\n{repos}"
    );
    let g = Running::start(&text, state.path()).await;
    let later = g.gateway.repo("later").unwrap();
    wait_for(
        || later.status().next_refresh.is_some(),
        "later is scheduled",
    )
    .await;
    let reply = g.get("/later/sitemap.xml").await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        reply.text(),
        "later: no sitemap yet; the first refresh is scheduled\n"
    );
    let retry: u64 = reply.header("retry-after").parse().unwrap();
    assert!((1700..=1800).contains(&retry), "Retry-After {retry}");
    g.stop().await;
}

/// Issue 22 point 4: the first refreshes are spread over `start_spread_secs`: the i-th of n
/// repositories starts no sooner than i/n of it after the start.
#[tokio::test]
async fn the_first_refreshes_are_spread_over_the_window() {
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/sample-repository.xml");
    let state = tempfile::tempdir().unwrap();
    let repos: String = (0..3)
        .map(|i| {
            format!(
                "[[repository]]\nname = \"r{i}\"\nbase_url = \"{}\"\n",
                sample.display()
            )
        })
        .collect();
    let text =
        format!("[server]\nstate_dir = \"{{state}}\"\n[harvest]\nstart_spread_secs = 3\n{repos}");
    let started = SystemTime::now();
    let g = Running::start(&text, state.path()).await;
    g.ready().await;
    for (i, repo) in g.gateway.repos().iter().enumerate() {
        let attempt = repo.status().last_attempt.unwrap();
        let after = attempt.duration_since(started).unwrap();
        assert!(
            after >= Duration::from_secs(i as u64),
            "{} started {after:?} after the gateway",
            repo.name
        );
    }
    g.stop().await;
}

// Issue 31 point 4: no blocking I/O on the serving runtime. The gateway below runs on the
// test's runtime, which has one thread (`#[tokio::test]`): whatever blocks it (a file or a
// database that does not answer, waited for on the runtime instead of on a blocking thread)
// holds up every request until it ends. A slow disk or database is played by a FIFO no one
// opens, or by a PostgreSQL port that accepts and never answers; `/healthz` is asked all along,
// and must never wait more than a fraction of the stall.

/// How long the slow disk or database below keeps its caller waiting.
const STALL: Duration = Duration::from_secs(10);

/// The longest `/healthz` may wait meanwhile: well under [`STALL`], and generous for a loaded
/// machine (an answer takes milliseconds).
const ANSWER_WITHIN: Duration = Duration::from_secs(3);

/// The longest wait between two answers of `/healthz`, asked every 50 ms until `busy` ends
/// (within a minute), and what `busy` gave.
async fn longest_wait_for_healthz<T>(g: &Running, busy: JoinHandle<T>) -> (Duration, T) {
    let started = Instant::now();
    let mut last = started;
    let mut longest = Duration::ZERO;
    while !busy.is_finished() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "still busy after a minute"
        );
        let reply = g.get("/healthz").await;
        assert_eq!(reply.status, StatusCode::OK);
        longest = longest.max(last.elapsed());
        last = Instant::now();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    longest = longest.max(last.elapsed());
    (longest, busy.await.unwrap())
}

/// A "PostgreSQL server" that accepts connections and never answers; each is closed after
/// [`STALL`], which fails the client's connect. On a thread of its own, so that a runtime the
/// gateway blocks cannot hold it up too.
struct SilentDatabase {
    port: u16,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SilentDatabase {
    fn start() -> SilentDatabase {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut held = Vec::new();
            while !stopping.load(std::sync::atomic::Ordering::Relaxed) {
                match listener.accept() {
                    Ok((connection, _)) => held.push((Instant::now(), connection)),
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
                held.retain(|(at, _)| at.elapsed() < STALL);
            }
        });
        SilentDatabase {
            port,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for SilentDatabase {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A reload opens an added repository's store (here a PostgreSQL connection that hangs for
/// [`STALL`]) on a blocking thread: requests are answered all the while, and the reload then
/// fails naming the store, changing nothing. Catches a reload that opens stores, reads the
/// configuration or writes its files on the runtime again.
#[tokio::test]
async fn requests_are_answered_while_a_reload_waits_for_a_store() {
    let database = SilentDatabase::start();
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/sample-repository.xml");
    let state = tempfile::tempdir().unwrap();
    let file = state.path().join("bridge.toml");
    let config = |repositories: &str| {
        format!(
            "[server]\nstate_dir = \"{}\"\n[state]\nurl = \"postgres://oai@127.0.0.1:{}/oai\"\n\
             {repositories}",
            state.path().display(),
            database.port
        )
    };
    std::fs::write(&file, config("")).unwrap();
    let g = Running::start_file(&file).await;
    let added = format!(
        "[[repository]]\nname = \"added\"\nbase_url = \"{}\"\n",
        sample.display()
    );
    std::fs::write(&file, config(&added)).unwrap();
    let started = Instant::now();
    let gateway = Arc::clone(&g.gateway);
    let reload = tokio::spawn(async move { gateway.reload().await });
    let (longest, reloaded) = longest_wait_for_healthz(&g, reload).await;
    let waited = started.elapsed();
    let error = reloaded
        .expect_err("the store cannot be opened")
        .to_string();
    assert!(error.contains("cannot read the state store of"), "{error}");
    assert!(
        waited >= STALL / 2,
        "the reload ended after {waited:?}: it did not wait on the database"
    );
    assert!(
        longest < ANSWER_WITHIN,
        "/healthz waited {longest:?} while a reload waited {waited:?} for a store"
    );
    assert!(
        g.gateway.repos().is_empty(),
        "a failed reload changes nothing"
    );
    g.stop().await;
}

/// What a reload reads and writes (an added repository's refresh history, the list of the
/// repositories served, the record of when robots.txt changed) goes through files that stall
/// here for [`STALL`] / 2 each (FIFOs no one opens until then): requests are answered all the
/// while, and the reload then applies. Catches a return of any of them to the runtime.
#[tokio::test]
async fn requests_are_answered_while_a_reload_waits_for_the_disk() {
    use std::io::Read as _;
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/sample-repository.xml");
    let state = tempfile::tempdir().unwrap();
    let file = state.path().join("bridge.toml");
    let config = |repositories: &str| {
        format!(
            "[server]\nstate_dir = \"{}\"\n{repositories}",
            state.path().display()
        )
    };
    std::fs::write(&file, config("")).unwrap();
    let g = Running::start_file(&file).await;
    let added = format!(
        "[[repository]]\nname = \"added\"\nbase_url = \"{}\"\n",
        sample.display()
    );
    std::fs::write(&file, config(&added)).unwrap();
    // The files a reload reads or writes first, in the order it does; each a FIFO.
    std::fs::create_dir(state.path().join("added")).unwrap();
    let history = state.path().join("added").join("history.jsonl");
    let serving = state.path().join("serving.tmp");
    let robots = state.path().join("robots.txt.modified.tmp");
    for fifo in [&history, &serving, &robots] {
        let mode = rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR;
        rustix::fs::mknodat(rustix::fs::CWD, fifo, rustix::fs::FileType::Fifo, mode, 0).unwrap();
    }
    let (go, going) = std::sync::mpsc::channel();
    let disk = std::thread::spawn(move || {
        going.recv().unwrap();
        // The history is read: opened for writing and closed, it reads as empty.
        std::thread::sleep(STALL / 2);
        drop(
            std::fs::OpenOptions::new()
                .write(true)
                .open(&history)
                .unwrap(),
        );
        for fifo in [serving, robots] {
            std::thread::sleep(STALL / 2);
            let mut written = Vec::new();
            std::fs::File::open(&fifo)
                .and_then(|mut f| f.read_to_end(&mut written))
                .unwrap();
            assert!(!written.is_empty(), "{}", fifo.display());
            // Not renamed into place (a FIFO cannot be synced): gone, the next write of
            // robots.txt's date makes a file again.
            let _ = std::fs::remove_file(&fifo);
        }
    });
    let started = Instant::now();
    go.send(()).unwrap();
    let gateway = Arc::clone(&g.gateway);
    let reload = tokio::spawn(async move { gateway.reload().await });
    let (longest, reloaded) = longest_wait_for_healthz(&g, reload).await;
    let waited = started.elapsed();
    disk.join().unwrap();
    assert_eq!(reloaded.unwrap().added, ["added"]);
    assert!(
        waited >= STALL,
        "the reload ended after {waited:?}: it did not wait for its files"
    );
    assert!(
        longest < ANSWER_WITHIN,
        "/healthz waited {longest:?} while a reload waited {waited:?} for its files"
    );
    g.stop().await;
}

/// What a refresh writes as it ends (the record of when robots.txt changed, the refresh
/// history) goes through files that stall here for [`STALL`] / 2 each (FIFOs no one opens
/// until then): requests are answered all the while, and the refresh ends once both are
/// written. Catches a return of either write, or of any other file write at a refresh's end,
/// to the runtime.
#[tokio::test]
async fn requests_are_answered_while_a_refresh_waits_for_the_disk() {
    use std::io::Read as _;
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/sample-repository.xml");
    let state = tempfile::tempdir().unwrap();
    let text = format!(
        "[server]\nstate_dir = \"{{state}}\"\n[[repository]]\nname = \"r\"\nbase_url = \"{}\"\n",
        sample.display()
    );
    let g = Running::start(&text, state.path()).await;
    let repo = g.gateway.repos()[0].clone();
    // Its first refresh has written its files (serving, it may still be writing them).
    wait_for(|| repo.status().completed > 0, "the first refresh ends").await;
    // The record of robots.txt's date is gone, so the next announce writes it again; both
    // writes go through a temporary file first, and those are the FIFOs.
    std::fs::remove_file(state.path().join("robots.txt.modified")).unwrap();
    let fifos = [
        state.path().join("robots.txt.modified.tmp"),
        state.path().join("r").join("history.jsonl.tmp"),
    ];
    for fifo in &fifos {
        let mode = rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR;
        rustix::fs::mknodat(rustix::fs::CWD, fifo, rustix::fs::FileType::Fifo, mode, 0).unwrap();
    }
    // The disk answers each write STALL / 2 after it could start: the first once the new
    // generation is in place (its `current` pointer replaced, on the refresh's own thread).
    let pointer = state.path().join("r").join("current");
    let before = std::fs::read_to_string(&pointer).unwrap();
    let disk = std::thread::spawn(move || {
        let started = Instant::now();
        while std::fs::read_to_string(&pointer).unwrap() == before {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "no new generation"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        for fifo in fifos {
            std::thread::sleep(STALL / 2);
            let mut written = Vec::new();
            std::fs::File::open(&fifo)
                .and_then(|mut f| f.read_to_end(&mut written))
                .unwrap();
            assert!(!written.is_empty(), "{}", fifo.display());
        }
    });
    let ended = repo.status().completed;
    repo.refresh_now.notify_one();
    let refresh = tokio::spawn(async move {
        while repo.status().completed == ended {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        repo.status()
    });
    let started = Instant::now();
    let (longest, status) = longest_wait_for_healthz(&g, refresh).await;
    let waited = started.elapsed();
    disk.join().unwrap();
    assert_eq!(status.last_error, None);
    assert!(
        waited >= STALL,
        "the refresh ended after {waited:?}: it did not wait for its files"
    );
    assert!(
        longest < ANSWER_WITHIN,
        "/healthz waited {longest:?} while a refresh waited {waited:?} for its files"
    );
    g.stop().await;
}

/// The Signmap entry of `landing` in the gateway's Signmap shards: its `rs:ln` elements.
async fn signmap_links(g: &Running, landing: &str) -> Vec<String> {
    let index = g.get("/r/signmap.xml").await.text();
    for shard in locs(&index) {
        let text = g.get(&path_of(&shard)).await.text();
        let open = format!("<url><loc>{}</loc>", landing.replace('&', "&amp;"));
        if let Some(at) = text.find(&open) {
            let entry = &text[at..at + text[at..].find("</url>").unwrap()];
            return entry
                .split("<rs:ln ")
                .skip(1)
                .map(|l| l.split("/>").next().unwrap().to_owned())
                .collect();
        }
    }
    panic!("{landing} is in no Signmap shard");
}

/// The records the Signposting tests harvest: a page with one file, a PID and a type; a page
/// with seven files; a page whose URL and file hold a comma and a semicolon.
fn signposting_records() -> Vec<TestRecord> {
    let mut many = TestRecord::new("oai:test:2", "2024-05-02").url("https://repo.example/record/2");
    for i in 1..=7 {
        many = many.url(&format!("https://repo.example/files/2-{i}.pdf"));
    }
    vec![
        TestRecord::new("oai:test:1", "2024-05-01")
            .url("https://repo.example/record/1")
            .url("https://repo.example/files/1.pdf")
            .url("doi:10.1234/1")
            .kind("Article"),
        many,
        TestRecord::new("oai:test:3", "2024-05-03")
            .url("https://repo.example/record/3,a;b")
            .url("https://repo.example/files/3,a;b.pdf"),
    ]
}

fn encoded(landing: &str) -> String {
    url::form_urlencoded::byte_serialize(landing.as_bytes()).collect()
}

/// Signposting Level 2 (issue 32 point 1): a landing page's linkset carries exactly its Signmap
/// entry's links, anchored at the landing URL, as JSON or the Link format by `Accept`, with a
/// strong ETag, 304, HEAD and 404 for a page the Signmap does not list.
#[tokio::test]
async fn a_landing_pages_linkset_is_its_signmap_entry() {
    let upstream = TestServer::builder(signposting_records()).start();
    let (g, _state) = serving(&upstream, "signmap = true\n").await;
    let landing = "https://repo.example/record/1";
    let path = format!("/r/linkset?url={}", encoded(landing));
    let json = g.get(&path).await;
    assert_eq!(json.status, StatusCode::OK);
    assert_eq!(json.header("content-type"), "application/linkset+json");
    assert_eq!(json.header("vary"), "Accept");
    let doc: serde_json::Value = serde_json::from_slice(&json.body).unwrap();
    let set = &doc["linkset"][0];
    assert_eq!(doc["linkset"].as_array().unwrap().len(), 1);
    assert_eq!(set["anchor"], landing);
    assert_eq!(set["cite-as"][0]["href"], "https://doi.org/10.1234/1");
    assert_eq!(set["item"][0]["href"], "https://repo.example/files/1.pdf");
    assert_eq!(set["item"][0]["type"], "application/pdf");
    let described = &set["describedby"][0];
    assert!(
        described["href"]
            .as_str()
            .unwrap()
            .contains("verb=GetRecord")
    );
    assert_eq!(described["type"], "application/xml");
    assert!(described["profile"].is_string(), "{set}");
    // Every link of the Signmap entry, and no other.
    let entry = signmap_links(&g, landing).await;
    let links: usize = (set.as_object().unwrap().iter())
        .filter(|(rel, _)| *rel != "anchor")
        .map(|(rel, targets)| {
            for t in targets.as_array().unwrap() {
                let href = t["href"].as_str().unwrap().replace('&', "&amp;");
                let ln = format!("rel=\"{rel}\" href=\"{href}\"");
                assert!(
                    entry.iter().any(|l| l.starts_with(&ln)),
                    "{ln} in {entry:?}"
                );
            }
            targets.as_array().unwrap().len()
        })
        .sum();
    assert_eq!(links, entry.len(), "{entry:?}");
    assert!(
        set.get("type").is_some(),
        "a dc:type gives a type link: {set}"
    );

    let text = g
        .request(
            reqwest::Method::GET,
            &path,
            &[("accept", "application/linkset")],
        )
        .await;
    assert_eq!(text.header("content-type"), "application/linkset");
    let body = text.text();
    assert!(
        body.contains(
            "<https://doi.org/10.1234/1>; rel=\"cite-as\"; anchor=\"https://repo.example/record/1\""
        ),
        "{body}"
    );
    assert_eq!(body.lines().count(), entry.len());
    assert_ne!(text.header("etag"), json.header("etag"));
    // JSON wins a tie and is the default.
    let either = g
        .request(
            reqwest::Method::GET,
            &path,
            &[("accept", "application/linkset, application/linkset+json")],
        )
        .await;
    assert_eq!(either.header("content-type"), "application/linkset+json");

    let etag = json.header("etag").to_owned();
    assert!(etag.starts_with('"'), "strong: {etag}");
    let again = g
        .request(reqwest::Method::GET, &path, &[("if-none-match", &etag)])
        .await;
    assert_eq!(again.status, StatusCode::NOT_MODIFIED);
    let head = g.request(reqwest::Method::HEAD, &path, &[]).await;
    assert_eq!(head.status, StatusCode::OK);
    assert_eq!(head.header("etag"), etag);
    assert_eq!(head.header("content-length"), json.body.len().to_string());
    assert!(head.body.is_empty());

    let unknown = format!(
        "/r/linkset?url={}",
        encoded("https://repo.example/record/9")
    );
    assert_eq!(g.get(&unknown).await.status, StatusCode::NOT_FOUND);
    assert_eq!(g.get("/r/linkset").await.status, StatusCode::BAD_REQUEST);
    // The anchor is the landing URL exactly: a trailing slash is another page.
    let slash = format!(
        "/r/linkset?url={}",
        encoded("https://repo.example/record/1/")
    );
    assert_eq!(g.get(&slash).await.status, StatusCode::NOT_FOUND);

    // A URL with a comma and a semicolon: found by its exact spelling, the anchor unchanged.
    let odd = "https://repo.example/record/3,a;b";
    let reply = g.get(&format!("/r/linkset?url={}", encoded(odd))).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let doc: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(doc["linkset"][0]["anchor"], odd);
    g.stop().await;
}

/// Signposting Level 1 (issue 32 point 2): the `Link` header a proxy adds to a landing page:
/// its few links and the linkset, hrefs with delimiters percent-encoded, `item`s only when few,
/// and 204 without a `Link` for a page the gateway does not know.
#[tokio::test]
async fn a_proxy_gets_the_link_header_of_a_landing_page() {
    let upstream = TestServer::builder(signposting_records()).start();
    let (g, _state) = serving(&upstream, "signmap = true\n").await;
    let level1 = |landing: &'static str| {
        let g = &g;
        async move {
            g.request(
                reqwest::Method::GET,
                "/r/signposting",
                &[("x-signposting-url", landing)],
            )
            .await
        }
    };
    let one = level1("https://repo.example/record/1").await;
    assert_eq!(one.status, StatusCode::NO_CONTENT);
    let link = one.header("link");
    assert!(
        link.contains("<https://doi.org/10.1234/1>; rel=\"cite-as\""),
        "{link}"
    );
    assert!(link.contains("rel=\"describedby\"; type=\"application/xml\"; profile="));
    assert!(
        link.contains("<https://repo.example/files/1.pdf>; rel=\"item\"; type=\"application/pdf\"")
    );
    assert!(link.contains("rel=\"type\""), "{link}");
    let linkset = format!(
        "{}r/linkset?url=https%3A%2F%2Frepo.example%2Frecord%2F1",
        g.url
    );
    assert!(
        link.contains(&format!(
            "<{linkset}>; rel=\"linkset\"; type=\"application/linkset+json\""
        )),
        "{link}"
    );
    // The linkset it names is there.
    let named = Url::parse(&linkset).unwrap();
    let named = format!("{}?{}", named.path(), named.query().unwrap());
    assert_eq!(g.get(&named).await.status, StatusCode::OK);
    // Split on commas, as F-UJI does, every value is still one whole link.
    for value in link.split(',') {
        let value = value.trim();
        assert!(
            value.starts_with('<') && value.contains(">; rel="),
            "{value} of {link}"
        );
    }

    // Seven files: none in the header, all in the linkset.
    let many = level1("https://repo.example/record/2").await;
    assert!(
        !many.header("link").contains("rel=\"item\""),
        "{}",
        many.header("link")
    );
    assert!(many.header("link").contains("rel=\"linkset\""));
    let set = g
        .get(&format!(
            "/r/linkset?url={}",
            encoded("https://repo.example/record/2")
        ))
        .await;
    let doc: serde_json::Value = serde_json::from_slice(&set.body).unwrap();
    assert_eq!(doc["linkset"][0]["item"].as_array().unwrap().len(), 7);

    // Delimiters in an href percent-encoded.
    let odd = level1("https://repo.example/record/3,a;b").await;
    let link = odd.header("link");
    assert!(
        link.contains("<https://repo.example/files/3%2Ca%3Bb.pdf>; rel=\"item\""),
        "{link}"
    );
    for value in link.split(',') {
        assert!(value.trim().starts_with('<'), "{value} of {link}");
    }

    // An unknown page, or none named: 204 without links.
    let unknown = level1("https://repo.example/elsewhere").await;
    assert_eq!(unknown.status, StatusCode::NO_CONTENT);
    assert!(unknown.headers.get("link").is_none());
    let none = g.get("/r/signposting").await;
    assert_eq!(none.status, StatusCode::NO_CONTENT);
    assert!(none.headers.get("link").is_none());
    // `?url=` names the page too.
    let query = g
        .get(&format!(
            "/r/signposting?url={}",
            encoded("https://repo.example/record/1")
        ))
        .await;
    assert_eq!(query.header("link"), one.header("link"));

    // Point 5: what was asked shows on the status page and in the metrics, with the page a
    // proxy named that the Signmap does not list (a request naming none counts as nothing).
    let status = g.admin("/").await.text();
    assert!(
        status.contains("asked for that are not listed, newest last: <code>https://repo.example/elsewhere</code>"),
        "{status}"
    );
    let metrics = g.admin("/metrics").await.text();
    assert!(
        metrics.contains(
            "oai_bridge_signposting_answers_total{repository=\"r\",answer=\"header\",page=\"unknown\"} 1\n"
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains(
            "oai_bridge_signposting_answers_total{repository=\"r\",answer=\"linkset\",page=\"found\"}"
        ),
        "{metrics}"
    );
    g.stop().await;
}

/// Each path's status, ETag and body.
async fn linkset_answers(g: &Running, paths: &[String]) -> Vec<(StatusCode, String, Vec<u8>)> {
    let mut out = Vec::new();
    for p in paths {
        let r = g.get(p).await;
        out.push((r.status, r.header("etag").to_owned(), r.body));
    }
    out
}

/// The linksets are the gateway's own, made from the generation's Signmap: a gateway that
/// loads the generation without them (a follower's import, a generation of an earlier
/// version) makes them again and answers the same bytes and validators.
#[tokio::test]
async fn linksets_made_again_answer_the_same() {
    let upstream = TestServer::builder(signposting_records()).start();
    let state = tempfile::tempdir().unwrap();
    let config = config(&upstream, "signmap = true\n");
    let paths: Vec<String> = [
        "https://repo.example/record/1",
        "https://repo.example/record/3,a;b",
    ]
    .iter()
    .map(|l| format!("/r/linkset?url={}", encoded(l)))
    .collect();
    let g = Running::start(&config, state.path()).await;
    g.ready().await;
    let before = linkset_answers(&g, &paths).await;
    assert!(before.iter().all(|(s, _, _)| *s == StatusCode::OK));
    let dir = g.gateway.repos()[0].current().unwrap().dir.clone();
    g.stop().await;
    for name in ["linksets.pack", "linksets.index"] {
        std::fs::remove_file(dir.join(name)).unwrap();
    }
    let g = Running::start(&config, state.path()).await;
    g.ready().await;
    assert!(dir.join("linksets.index").exists(), "made again at load");
    assert_eq!(linkset_answers(&g, &paths).await, before);
    g.stop().await;
}

/// A repository whose pages send some Signposting already names the relations the gateway adds.
#[tokio::test]
async fn the_link_header_carries_the_repositorys_relations() {
    let upstream = TestServer::builder(signposting_records()).start();
    let (g, _state) = serving(
        &upstream,
        "signmap = true\nsignposting_header = [\"describedby\", \"linkset\"]\n",
    )
    .await;
    let reply = g
        .request(
            reqwest::Method::GET,
            "/r/signposting",
            &[("x-signposting-url", "https://repo.example/record/1")],
        )
        .await;
    let link = reply.header("link");
    assert!(link.contains("rel=\"describedby\""), "{link}");
    assert!(link.contains("rel=\"linkset\""), "{link}");
    for rel in ["cite-as", "item", "type"] {
        assert!(!link.contains(&format!("rel=\"{rel}\"")), "{rel} in {link}");
    }
    g.stop().await;
}

/// Issue 32 point 5: `check` prints the `Link` header the gateway answers for the sample's
/// first landing page, byte for byte, and that page's linkset: made from the same records, not
/// from the gateway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_prints_the_link_header_the_gateway_sends() {
    let upstream = TestServer::builder(signposting_records()).start();
    let extra = "signmap = true\npublic_url = \"https://gw.example/r/\"\n";
    let (g, state) = serving(&upstream, extra).await;
    let landing = "https://repo.example/record/1";
    let served = g
        .request(
            reqwest::Method::GET,
            "/r/signposting",
            &[("x-signposting-url", landing)],
        )
        .await
        .header("link")
        .to_owned();
    g.stop().await;
    let file = state.path().join("check.toml");
    let text = config(&upstream, extra).replace("{state}", &state.path().display().to_string());
    std::fs::write(&file, text).unwrap();
    let output = tokio::task::spawn_blocking(move || {
        crate::golden::bridge()
            .args(["check", "r", "--json", "--config"])
            .arg(&file)
            .env_remove("OAI_BRIDGE_CONFIG")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stderr)));
    let discovery = &report["discovery"];
    assert_eq!(
        discovery["link_header"].as_str(),
        Some(served.as_str()),
        "{discovery}"
    );
    // The header names the page's PID, metadata, file and type, and its linkset in both formats.
    for rel in ["cite-as", "describedby", "item", "type", "linkset"] {
        assert!(
            served.contains(&format!("rel=\"{rel}\"")),
            "{rel} missing in {served}"
        );
    }
    let linkset = discovery["linkset"].as_str().unwrap_or_default();
    assert!(
        linkset.contains("<https://repo.example/files/1.pdf>; rel=\"item\"")
            && linkset.contains("anchor=\"https://repo.example/record/1\""),
        "{linkset}"
    );
}

/// Waits until the first refresh is counted as ended: its generation is served a moment before,
/// and [`Running::refresh`] counts from the refreshes ended.
async fn first_refresh_counted(g: &Running) {
    let repo = g.gateway.repos()[0].clone();
    wait_for(|| repo.status().completed >= 1, "the first refresh ends").await;
}

/// The entries of a ResourceSync Change List: `(loc, lastmod, change, datetime)`.
fn changelist_entries(xml: &str) -> Vec<(String, String, String, String)> {
    let between = |s: &str, open: &str, close: &str| {
        s.split(open)
            .nth(1)
            .and_then(|r| r.split(close).next())
            .unwrap_or_default()
            .to_owned()
    };
    xml.split("<url>")
        .skip(1)
        .map(|e| {
            (
                between(e, "<loc>", "</loc>"),
                between(e, "<lastmod>", "</lastmod>"),
                between(e, "change=\"", "\""),
                between(e, "datetime=\"", "\""),
            )
        })
        .collect()
}

/// The upstream of the ResourceSync tests after its changes: record 1 updated, record 2 deleted
/// (a deleted header, or gone from the list where deletions are not kept), record 8 created,
/// the others as they were.
fn changed_upstream(keeps_deletions: bool) -> Vec<TestRecord> {
    let mut records = numbered(7);
    records[0] = TestRecord::new("oai:test:1", "2024-06-02")
        .url("https://repo.example/record/1")
        .title("Record 1, again");
    if keeps_deletions {
        records[1] = TestRecord::new("oai:test:2", "2024-06-02").deleted();
    } else {
        records.remove(1);
    }
    records.push(
        TestRecord::new("oai:test:8", "2024-06-02")
            .url("https://repo.example/record/8")
            .title("Record 8"),
    );
    records
}

/// ResourceSync (issue 32 point 3): after a baseline the Change List is empty; a refresh's
/// created, updated and deleted landing pages are its entries, `lastmod` the datestamp and
/// `datetime` when the gateway saw them; the same whether the refresh patched the sitemap
/// (deletions kept, an incremental harvest) or harvested in full because the upstream refuses
/// `from` (the previous generation's sitemap compared with the new one). The Capability List
/// names the Resource List (an index of one list per sitemap shard, each the shard's entries)
/// and the Change List; the Source Description names the Capability List.
#[tokio::test]
async fn change_lists_hold_each_refreshs_changes_exactly_whether_patched_or_harvested_in_full() {
    let mut lists = Vec::new();
    for keeps_deletions in [true, false] {
        let mut upstream = TestServer::builder(numbered(7));
        if !keeps_deletions {
            upstream = upstream.deleted_record("no").refuse_from(422);
        }
        let upstream = upstream.start();
        let (g, _state) = serving(&upstream, "").await;
        first_refresh_counted(&g).await;
        let baseline = g.get("/r/changelist-1.xml").await;
        assert_eq!(baseline.status, StatusCode::OK);
        assert!(
            changelist_entries(&baseline.text()).is_empty(),
            "{}",
            baseline.text()
        );
        let capabilities = g.get("/r/capabilitylist.xml").await.text();
        assert!(
            capabilities.contains("<rs:md capability=\"capabilitylist\"/>"),
            "{capabilities}"
        );
        assert_eq!(
            locs(&capabilities),
            [
                format!("{}r/resourcelist.xml", g.url),
                format!("{}r/changelist-1.xml", g.url)
            ]
        );
        let description = g.get("/.well-known/resourcesync").await.text();
        assert_eq!(
            locs(&description),
            [format!("{}r/capabilitylist.xml", g.url)]
        );
        // Seven URLs, five a shard: a Resource List Index of two lists, the shards' entries.
        let index = g.get("/r/resourcelist.xml").await.text();
        assert!(
            index.starts_with("<?xml") && index.contains("<sitemapindex"),
            "{index}"
        );
        assert!(
            index.contains("capability=\"resourcelist\" at=\""),
            "{index}"
        );
        let mut listed = Vec::new();
        for list in locs(&index) {
            let text = g.get(&path_of(&list)).await.text();
            assert!(text.contains(&format!(
                "<rs:ln rel=\"up\" href=\"{}r/capabilitylist.xml\"/>",
                g.url
            )));
            listed.extend(locs(&text));
        }
        listed.sort();
        let mut expected: Vec<String> = (1..=7)
            .map(|i| format!("https://repo.example/record/{i}"))
            .collect();
        expected.sort();
        assert_eq!(listed, expected);

        upstream.set_records(changed_upstream(keeps_deletions));
        upstream.set_response_date("2024-06-03T08:00:00Z");
        let before = SystemTime::now();
        tokio::time::sleep(Duration::from_millis(1100)).await;
        g.refresh(0).await;
        let reply = g.get("/r/changelist-1.xml").await;
        let text = reply.text();
        let entries = changelist_entries(&text);
        let seen = &entries.first().expect("changes").3;
        assert!(
            entries.iter().all(|e| &e.3 == seen),
            "one refresh, one datetime: {text}"
        );
        // Seen when the refresh made its generation: the Change List's own time.
        let seen_at = oai_bridge::Datestamp::parse(seen)
            .expect("a datetime")
            .unix();
        let modified = httpdate::parse_http_date(reply.header("last-modified")).unwrap();
        let modified_secs = modified
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert_eq!(seen_at, modified_secs as i64, "{text}");
        assert!(
            modified >= before,
            "{seen} is when the gateway saw the changes"
        );
        let changes: Vec<(&str, &str, &str)> = entries
            .iter()
            .map(|(loc, lastmod, change, _)| (loc.as_str(), lastmod.as_str(), change.as_str()))
            .collect();
        assert_eq!(
            changes,
            [
                ("https://repo.example/record/1", "2024-06-02", "updated"),
                ("https://repo.example/record/2", "2024-05-02", "deleted"),
                ("https://repo.example/record/8", "2024-06-02", "created"),
            ],
            "keeping deletions: {keeps_deletions}"
        );
        assert!(
            text.contains("<rs:md capability=\"changelist\" from=\""),
            "{text}"
        );
        // Conditional requests and gzip, as a shard's.
        let etag = reply.header("etag").to_owned();
        let again = g
            .request(
                reqwest::Method::GET,
                "/r/changelist-1.xml",
                &[("if-none-match", &etag)],
            )
            .await;
        assert_eq!(again.status, StatusCode::NOT_MODIFIED);
        let gz = g
            .request(
                reqwest::Method::GET,
                "/r/changelist-1.xml",
                &[("accept-encoding", "gzip")],
            )
            .await;
        assert_eq!(gz.header("content-encoding"), "gzip");
        lists.push(changes.iter().map(|c| format!("{c:?}")).collect::<Vec<_>>());
        g.stop().await;
    }
    assert_eq!(
        lists[0], lists[1],
        "a patch and a full harvest give the same changes"
    );
}

/// A Change List that is full goes on in the next one (`until` on the full one), and an index
/// lists them, oldest first; with `changelist_days = 0` there are no ResourceSync documents.
#[tokio::test]
async fn change_lists_roll_over_into_an_index_and_can_be_turned_off() {
    let upstream = TestServer::start(numbered(3));
    // Two entries a list: three changes fill one and start another.
    let state = tempfile::tempdir().unwrap();
    let two = config(&upstream, "").replace("max_urls_per_shard = 5", "max_urls_per_shard = 2");
    let g = Running::start(&two, state.path()).await;
    g.ready().await;
    first_refresh_counted(&g).await;
    let mut records = numbered(3);
    records[0] = TestRecord::new("oai:test:1", "2024-06-02").deleted();
    for i in [4, 5] {
        let url = format!("https://repo.example/record/{i}");
        records.push(TestRecord::new(&format!("oai:test:{i}"), "2024-06-02").url(&url));
    }
    upstream.set_records(records);
    upstream.set_response_date("2024-06-03T08:00:00Z");
    g.refresh(0).await;
    let capabilities = g.get("/r/capabilitylist.xml").await.text();
    assert!(
        capabilities.contains(&format!("<loc>{}r/changelist-index.xml</loc>", g.url)),
        "{capabilities}"
    );
    let index = g.get("/r/changelist-index.xml").await.text();
    assert_eq!(
        locs(&index),
        [
            format!("{}r/changelist-1.xml", g.url),
            format!("{}r/changelist-2.xml", g.url)
        ]
    );
    let first = g.get("/r/changelist-1.xml").await.text();
    let second = g.get("/r/changelist-2.xml").await.text();
    assert!(first.contains(" until=\""), "{first}");
    assert!(!second.contains(" until=\""), "{second}");
    let urls: Vec<String> = [first, second]
        .iter()
        .flat_map(|t| changelist_entries(t))
        .map(|e| format!("{} {}", e.2, e.0))
        .collect();
    assert_eq!(
        urls,
        [
            "deleted https://repo.example/record/1",
            "created https://repo.example/record/4",
            "created https://repo.example/record/5",
        ]
    );
    // Their size and age on the status page and in the metrics.
    let status = g.admin("/").await.text();
    assert!(
        status.contains("<b>ResourceSync:</b> 3 changes in 2 Change Lists since"),
        "{status}"
    );
    let metrics = g.admin("/metrics").await.text();
    assert!(
        metrics.contains("oai_bridge_changelist_entries{repository=\"r\"} 3\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("oai_bridge_changelist_last_change_timestamp_seconds{repository=\"r\"}")
    );
    g.stop().await;

    let upstream = TestServer::start(numbered(3));
    let (g, _state) = serving(&upstream, "changelist_days = 0\n").await;
    for path in [
        "/r/capabilitylist.xml",
        "/r/resourcelist.xml",
        "/r/changelist-1.xml",
    ] {
        assert_eq!(g.get(path).await.status, StatusCode::NOT_FOUND, "{path}");
    }
    assert!(locs(&g.get("/.well-known/resourcesync").await.text()).is_empty());
    g.stop().await;
}
