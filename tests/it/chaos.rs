//! Issue 33 point 3: chaos under load. Three gateways share one PostgreSQL server (a throwaway
//! one of `.ci/postgres.sh`, which this test stops and starts) and one bucket (moto's S3 behind a
//! [`Proxy`] that can fail) for 50 repositories, whose upstreams gain records while faults run.
//! Readers fetch robots.txt, indexes and shards through all three gateways the whole time, while
//! in turn: PostgreSQL is restarted while a refresh holds a lease; PostgreSQL is down for 60 s;
//! the bucket answers 500 for 60 s; the bucket accepts requests and never answers for 60 s; each
//! gateway is killed with SIGKILL at a random moment and started again, three times each.
//!
//! It passes when: no file a gateway served before is answered other than 200 (stale is fine:
//! a 5xx, a 404 of a file its current index names, a refused connection or a timeout while
//! the gateway's process lives are failures; a killed gateway's refused connections are counted
//! apart, and so is a shard that a newer generation no longer names); every 200 carries the
//! ETag of its bytes (the gateway's ETag is a content hash); after each fault ends, within two
//! refresh intervals, every repository is caught up: PostgreSQL holds as many live records as
//! the upstream, the three gateways serve the bucket's index (the same ETag: a generation's
//! identity in bytes, since a refresh that changed nothing makes a new generation of the same
//! files), and it lists exactly the upstream's records; after the last fault, the bucket's
//! files list them too.
//!
//! Counted apart and not failed ("retired" in the table): a gateway publishing to a bucket names
//! its shards after their content, so a crawler that fetched an index just before a swap asks
//! for names the new generation does not have. The gateway answers them from the bucket, which
//! keeps them for `publish_grace_secs`; while the bucket cannot answer (its faults here), or
//! within 5 s, they are 404. No fault of the gateway causes these.
//!
//! Minutes long, so `#[ignore]`d: `.ci/run` runs it (`cargo test --test it chaos:: -- --ignored`),
//! and then it fails, not skips, without PostgreSQL's binaries or moto. It prints, per fault,
//! the reads, the failures and the time to recovery; the gateways' logs are kept under
//! `CARGO_TARGET_TMPDIR/chaos/`.

use std::collections::{BTreeSet, HashSet};
use std::fmt::Write as _;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use sha2::{Digest as _, Sha256};

use crate::bucket::{BucketFault, Held, Moto, Proxy, Serving, Site, pages_of};
use crate::faults::SCOPE;
use crate::server::{Fault, TestRecord, TestServer, numbered};
use crate::shared::{column, gateway_args};

const REPOSITORIES: usize = 50;
const GATEWAYS: usize = 3;
const READERS: usize = 8;
/// Each repository's `refresh_interval_secs`.
const INTERVAL: Duration = Duration::from_secs(20);
const LEASE_SECS: u64 = 3;
/// How long PostgreSQL is down, and the bucket fails each way.
const OUTAGE: Duration = Duration::from_secs(60);
const KILLS_EACH: usize = 3;
/// Recovery after a fault is required within this (the "two refresh intervals"); the
/// test waits a while longer, to measure a slower recovery before it fails.
const RECOVERY: Duration = Duration::from_secs(2 * INTERVAL.as_secs());
const RECOVERY_WAIT: Duration = Duration::from_secs(2 * INTERVAL.as_secs() + 30);
/// The whole test, past which it fails saying where it was.
const BUDGET: Duration = Duration::from_secs(12 * 60);
const PUBLIC_URL: &str = "https://cdn.example/";
const TOKEN: &str = "a-token-of-the-chaos-test-0123456789";

/// A PostgreSQL server of its own (`.ci/postgres.sh`), stopped and removed on drop.
struct Postgres {
    url: String,
    dir: String,
}

fn postgres_script(args: &[&str]) -> std::process::Output {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/postgres.sh");
    let output = Command::new("bash")
        .arg(script)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {script}: {e}"));
    assert!(
        output.status.success(),
        "{script} {args:?} failed (the chaos test needs PostgreSQL's server binaries: \
         apt-get install postgresql-15): {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

impl Postgres {
    fn start() -> Postgres {
        let output = postgres_script(&[]);
        let url = String::from_utf8(output.stdout).unwrap().trim().to_owned();
        let stderr = String::from_utf8(output.stderr).unwrap();
        let dir = stderr.lines().last().unwrap().trim().to_owned();
        Postgres { url, dir }
    }

    async fn down(&self) {
        let dir = self.dir.clone();
        tokio::task::spawn_blocking(move || postgres_script(&["down", &dir]))
            .await
            .unwrap();
    }

    async fn up(&self) {
        let dir = self.dir.clone();
        tokio::task::spawn_blocking(move || postgres_script(&["up", &dir]))
            .await
            .unwrap();
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/postgres.sh");
        let _ = Command::new("bash")
            .args([script, "stop", &self.dir])
            .status();
    }
}

/// One gateway as the readers see it: where it listens now, and whether its process is alive.
#[derive(Default)]
struct Node {
    public: RwLock<String>,
    admin: RwLock<String>,
    up: AtomicBool,
    /// Counts kills and starts: a read during which it moved met a kill or a restart.
    epoch: AtomicU64,
}

/// What the readers met during one phase (a fault and its recovery).
#[derive(Default)]
struct Phase {
    name: String,
    /// A fault's phase, whose recovery is held to [`RECOVERY`].
    fault: bool,
    reads: u64,
    /// Reads of a file the gateway had served before, not answered 200 (or 304) while its
    /// process lived; and 200s whose bytes differ from their ETag's.
    failures: u64,
    /// Reads refused by a gateway while it was killed.
    down: u64,
    /// Shards of an older generation, no longer named by the gateway's index, that the bucket
    /// could not give: 404 (see the module's documentation).
    retired: u64,
    /// Other answers to files not served before (a gateway not serving a new name yet).
    other: u64,
    /// From the fault's end until every repository was caught up on every gateway.
    recovery: Option<Duration>,
    /// The first few failures, in words.
    examples: Vec<String>,
}

/// What the readers met, phase by phase, and every file each gateway served.
#[derive(Default)]
struct Log {
    phases: Mutex<Vec<Phase>>,
    served: Mutex<HashSet<(usize, String)>>,
    /// After the last fault: what the bucket lacks or has in excess, if anything.
    lost: Mutex<Option<String>>,
}

enum Outcome {
    Ok,
    Failure(String),
    Down,
    Retired,
    Other,
}

impl Log {
    fn begin(&self, name: &str, fault: bool) {
        println!("chaos: {name}");
        self.phases.lock().unwrap().push(Phase {
            name: name.to_owned(),
            fault,
            ..Phase::default()
        });
    }

    fn count(&self, outcome: Outcome) {
        let mut phases = self.phases.lock().unwrap();
        let phase = phases.last_mut().unwrap();
        phase.reads += 1;
        match outcome {
            Outcome::Ok => {}
            Outcome::Failure(what) => {
                phase.failures += 1;
                if phase.examples.len() < 5 {
                    eprintln!("chaos: failed read in {}: {what}", phase.name);
                    phase.examples.push(what);
                }
            }
            Outcome::Down => phase.down += 1,
            Outcome::Retired => phase.retired += 1,
            Outcome::Other => phase.other += 1,
        }
    }

    fn recovered(&self, after: Option<Duration>) {
        self.phases.lock().unwrap().last_mut().unwrap().recovery = after;
    }
}

/// The strong ETag of `bytes` as the gateway computes it: the first 128 bits of their SHA-256.
fn etag_of(bytes: &[u8]) -> String {
    let hash: String = Sha256::digest(bytes)[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("\"{hash}\"")
}

/// The names (under [`PUBLIC_URL`]) of the files an index lists.
fn listed(index: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(index);
    let Ok(doc) = roxmltree::Document::parse(&text) else {
        return Vec::new();
    };
    doc.descendants()
        .filter(|n| n.has_tag_name("loc"))
        .filter_map(|n| n.text()?.strip_prefix(PUBLIC_URL).map(str::to_owned))
        .collect()
}

/// A reader: a crawler that asks a gateway at random for robots.txt, a repository's index and
/// the shards it lists, until `stop`.
async fn reader(nodes: Arc<Vec<Node>>, log: Arc<Log>, stop: Arc<AtomicBool>) {
    // Without gzip, so that each 200's bytes are the representation its ETag names.
    let client = reqwest::Client::builder()
        .no_gzip()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    while !stop.load(Ordering::SeqCst) {
        let g = fastrand::usize(..GATEWAYS);
        if fastrand::u8(..5) == 0 {
            read(&client, &nodes, &log, g, "robots.txt").await;
        }
        let index = format!("r{:02}/sitemap.xml", fastrand::usize(..REPOSITORIES));
        let Some(bytes) = read(&client, &nodes, &log, g, &index).await else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        for shard in listed(&bytes) {
            read(&client, &nodes, &log, g, &shard).await;
        }
        // A pause between crawls: load that a loaded two-core CI machine still runs the
        // gateways' refreshes beside (about a thousand reads a second in all).
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Reads `path` from gateway `g`, counts the outcome, and gives the bytes of a 200.
async fn read(
    client: &reqwest::Client,
    nodes: &[Node],
    log: &Log,
    g: usize,
    path: &str,
) -> Option<Vec<u8>> {
    let node = &nodes[g];
    let epoch = node.epoch.load(Ordering::SeqCst);
    let up = node.up.load(Ordering::SeqCst);
    let base = node.public.read().unwrap().clone();
    let key = (g, path.to_owned());
    let known = log.served.lock().unwrap().contains(&key);
    let started = Instant::now();
    let answer = async {
        let answer = client.get(format!("{base}{path}")).send().await?;
        let status = answer.status();
        let etag = (answer.headers().get("etag")).map(|v| v.to_str().unwrap_or("").to_owned());
        Ok::<_, reqwest::Error>((status, etag, answer.bytes().await?))
    }
    .await;
    let lived = up && node.up.load(Ordering::SeqCst) && node.epoch.load(Ordering::SeqCst) == epoch;
    let what = |said: &str| format!("gateway {g} {path}: {said} after {:?}", started.elapsed());
    let (outcome, bytes) = match answer {
        Ok((status, etag, bytes)) if status.is_success() => match etag {
            Some(etag) if etag != etag_of(&bytes) => (
                Outcome::Failure(what(&format!(
                    "200 with ETag {etag}, its bytes' is {}",
                    etag_of(&bytes)
                ))),
                None,
            ),
            _ => {
                log.served.lock().unwrap().insert(key);
                (Outcome::Ok, Some(bytes.to_vec()))
            }
        },
        Ok((status, ..)) if status == reqwest::StatusCode::NOT_MODIFIED => (Outcome::Ok, None),
        Ok((status, ..)) if known => {
            if status == reqwest::StatusCode::NOT_FOUND
                && path.contains('-')
                && !still_named(client, &base, path).await
            {
                (Outcome::Retired, None)
            } else {
                (Outcome::Failure(what(&status.to_string())), None)
            }
        }
        Ok(_) => (Outcome::Other, None),
        Err(_) if !lived => (Outcome::Down, None),
        Err(e) if known => (Outcome::Failure(what(&format!("{e:?}"))), None),
        Err(_) => (Outcome::Other, None),
    };
    log.count(outcome);
    bytes
}

/// Whether the index of the repository of shard `path` (as the gateway at `base` serves it
/// now) names the shard.
async fn still_named(client: &reqwest::Client, base: &str, path: &str) -> bool {
    let repo = path.split('/').next().unwrap();
    let Ok(answer) = client.get(format!("{base}{repo}/sitemap.xml")).send().await else {
        return true;
    };
    let Ok(bytes) = answer.bytes().await else {
        return true;
    };
    listed(&bytes).iter().any(|name| name == path)
}

/// The datestamp of a record added under chaos: the day of the upstreams' clock (their
/// `responseDate`), which an incremental harvest from the last one asks for.
const ADDED_ON: &str = "2024-06-01";

/// The upstreams and what each holds now.
struct Upstreams {
    servers: Vec<TestServer>,
    records: Vec<Mutex<Vec<TestRecord>>>,
}

impl Upstreams {
    /// A new record in a repository picked at random: every refresh after it has work to do.
    fn add_one(&self) {
        let i = fastrand::usize(..REPOSITORIES);
        let mut records = self.records[i].lock().unwrap();
        let n = records.len() + 1;
        records.push(
            TestRecord::new(&format!("oai:test:{n}"), ADDED_ON)
                .url(&format!("https://repo.example/record/{n}"))
                .title(&format!("Record {n}, added under chaos")),
        );
        self.servers[i].set_records(records.clone());
    }
}

/// Adds a record somewhere every second while `on`, until `stop`.
async fn mutator(upstreams: Arc<Upstreams>, on: Arc<AtomicBool>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::SeqCst) {
        if on.load(Ordering::SeqCst) {
            upstreams.add_one();
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The pages that the index `index` of the gateway at `base` lists through its shards, or why
/// there are none.
async fn served_pages(
    client: &reqwest::Client,
    base: &str,
    index: &str,
) -> Result<BTreeSet<String>, String> {
    let get = |name: String| async move {
        let answer = (client.get(format!("{base}{name}")).send().await)
            .map_err(|e| format!("{name}: {e}"))?;
        if !answer.status().is_success() {
            return Err(format!("{name}: {}", answer.status()));
        }
        answer.bytes().await.map_err(|e| format!("{name}: {e}"))
    };
    let mut pages = BTreeSet::new();
    for shard in listed(&get(index.to_owned()).await?) {
        let bytes = get(shard).await?;
        let text = String::from_utf8_lossy(&bytes);
        let doc = roxmltree::Document::parse(&text).map_err(|e| e.to_string())?;
        pages.extend(
            (doc.descendants())
                .filter(|n| n.has_tag_name("loc"))
                .filter_map(|n| n.text().map(str::to_owned)),
        );
    }
    Ok(pages)
}

/// Takes out of `pending` the repositories that are caught up: PostgreSQL holds as many live
/// records as the upstream, every gateway serves the repository's index with the ETag of the
/// bucket's (the same bytes: a refresh that changed nothing makes a generation of the same
/// files), and that index lists exactly the upstream's records. With `bucket_pages`, the
/// bucket's files must list them too (a crawl of the bucket, slower). Why the first of those
/// left is not caught up, if any is.
async fn caught_up(
    client: &reqwest::Client,
    site: &Site<'_>,
    db: &str,
    upstreams: &Upstreams,
    nodes: &[Node],
    bucket_pages: bool,
    pending: &mut BTreeSet<usize>,
) -> Result<(), String> {
    let mut why = Vec::new();
    for i in pending.clone() {
        match repository_caught_up(client, site, db, upstreams, nodes, bucket_pages, i).await {
            Ok(()) => {
                pending.remove(&i);
            }
            Err(e) => why.push(e),
        }
    }
    match why.first() {
        None => Ok(()),
        Some(first) => Err(format!("{} repositories behind; {first}", why.len())),
    }
}

/// Whether repository `i` is caught up ([`caught_up`]), or why not.
async fn repository_caught_up(
    client: &reqwest::Client,
    site: &Site<'_>,
    db: &str,
    upstreams: &Upstreams,
    nodes: &[Node],
    bucket_pages: bool,
    i: usize,
) -> Result<(), String> {
    let name = format!("r{i:02}");
    let stored: usize = column(
        db,
        &format!(
            "SELECT count(*)::text FROM oai_bridge_records \
             WHERE repository = '{name}' AND NOT deleted"
        ),
    )
    .await[0]
        .parse()
        .unwrap();
    let bases: Vec<String> = (nodes.iter())
        .map(|n| n.public.read().unwrap().clone())
        .collect();
    let records = upstreams.records[i].lock().unwrap().clone();
    let live = records.iter().filter(|r| !r.deleted).count();
    if stored != live {
        return Err(format!(
            "{name}: {stored} live records in PostgreSQL, {live} upstream"
        ));
    }
    let index = format!("{name}/sitemap.xml");
    let Some(published) = site.get(&index).await else {
        return Err(format!("{name}: the bucket has no {index} yet"));
    };
    let etag = etag_of(&published);
    for (g, base) in bases.iter().enumerate() {
        let answer = client.get(format!("{base}{index}")).send().await;
        let served = answer
            .ok()
            .filter(|a| a.status().is_success())
            .and_then(|a| Some(a.headers().get("etag")?.to_str().ok()?.to_owned()));
        if served.as_deref() != Some(etag.as_str()) {
            return Err(format!(
                "gateway {g} serves {index} as {served:?}, the bucket's is {etag}"
            ));
        }
    }
    let pages = served_pages(client, &bases[0], &index).await?;
    if pages != pages_of(&records) {
        return Err(format!(
            "{name}: the gateways list {} pages, the upstream {}",
            pages.len(),
            pages_of(&records).len()
        ));
    }
    if bucket_pages {
        let (_, pages) = (site.crawl_from(vec![format!("{PUBLIC_URL}{index}")])).await;
        if pages != pages_of(&records) {
            return Err(format!(
                "{name}: the bucket lists {} pages, the upstream {}",
                pages.len(),
                pages_of(&records).len()
            ));
        }
    }
    Ok(())
}

/// Everything the test runs on.
struct Chaos<'a> {
    nodes: Arc<Vec<Node>>,
    log: Arc<Log>,
    upstreams: Arc<Upstreams>,
    mutating: Arc<AtomicBool>,
    site: Site<'a>,
    db: String,
    client: reqwest::Client,
    gateways: Vec<Serving>,
    /// The gateways' arguments, by number, and where their bucket is.
    args: Vec<Vec<String>>,
    endpoint: String,
    logs: std::path::PathBuf,
}

impl Drop for Chaos<'_> {
    /// The gateways are killed when they drop (at the end, or past the budget): the readers
    /// still running count what they meet then as the gateways being down.
    fn drop(&mut self) {
        for node in self.nodes.iter() {
            node.up.store(false, Ordering::SeqCst);
            node.epoch.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl Chaos<'_> {
    async fn start_gateway(&self, g: usize) -> Serving {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.logs.join(format!("gateway-{g}.log")))
            .unwrap();
        let serving =
            Serving::start_logging(&self.endpoint, &self.args[g], TOKEN, log, "info").await;
        let node = &self.nodes[g];
        *node.public.write().unwrap() = serving.public.clone();
        *node.admin.write().unwrap() = serving.admin.clone();
        node.epoch.fetch_add(1, Ordering::SeqCst);
        node.up.store(true, Ordering::SeqCst);
        serving
    }

    async fn kill(&mut self, g: usize) {
        let node = &self.nodes[g];
        node.up.store(false, Ordering::SeqCst);
        node.epoch.fetch_add(1, Ordering::SeqCst);
        let child = &mut self.gateways[g].child;
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
    }

    /// The fault's end: records the time until the fleet is caught up, and waits for it up to
    /// [`RECOVERY_WAIT`].
    async fn recover(&self) {
        self.mutating.store(false, Ordering::SeqCst);
        let ended = Instant::now();
        let mut why = String::new();
        let mut pending: BTreeSet<usize> = (0..REPOSITORIES).collect();
        let mut said = ended;
        while ended.elapsed() < RECOVERY_WAIT {
            let looked = Instant::now();
            let (site, db, upstreams) = (&self.site, &self.db, &self.upstreams);
            let nodes = &self.nodes;
            match caught_up(
                &self.client,
                site,
                db,
                upstreams,
                nodes,
                false,
                &mut pending,
            )
            .await
            {
                Ok(()) => {
                    println!(
                        "chaos:   caught up after {:.1?} (seen in a look of {:.1?})",
                        ended.elapsed(),
                        looked.elapsed()
                    );
                    self.log.recovered(Some(ended.elapsed()));
                    return;
                }
                Err(e) => {
                    if said.elapsed() > Duration::from_secs(15) {
                        println!("chaos:   {:.0?}: {e}", ended.elapsed());
                        said = Instant::now();
                    }
                    why = e;
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        println!("chaos:   not caught up within {RECOVERY_WAIT:?}: {why}");
        self.log.recovered(None);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "run by .ci/run: chaos under load, minutes"]
async fn chaos_under_load() {
    let started = Instant::now();
    let log = Arc::new(Log::default());
    let outcome = tokio::time::timeout(BUDGET, run(Arc::clone(&log))).await;
    let table = table(&log);
    println!("{table}");
    println!("chaos: {:.0?} in all", started.elapsed());
    assert!(
        outcome.is_ok(),
        "the chaos test ran past its budget of {BUDGET:?}, in phase {:?}\n{table}",
        log.phases.lock().unwrap().last().map(|p| p.name.clone())
    );
    let phases = log.phases.lock().unwrap();
    let mut wrong = String::new();
    for phase in phases.iter() {
        if phase.failures > 0 {
            let _ = writeln!(
                wrong,
                "{}: {} failed reads, e.g. {:#?}",
                phase.name, phase.failures, phase.examples
            );
        }
        if phase.fault && phase.recovery.is_none_or(|r| r > RECOVERY) {
            let _ = writeln!(
                wrong,
                "{}: not caught up within two refresh intervals ({RECOVERY:?}): {:?}",
                phase.name, phase.recovery
            );
        }
    }
    match log.lost.lock().unwrap().as_deref() {
        Some("") => {}
        Some(lost) => {
            let _ = writeln!(
                wrong,
                "after the faults, not every record is published: {lost}"
            );
        }
        None => wrong.push_str("the last check did not run\n"),
    }
    assert!(wrong.is_empty(), "{wrong}{table}");
}

fn table(log: &Log) -> String {
    let mut out = format!(
        "{:<34} {:>7} {:>8} {:>6} {:>7} {:>6} {:>10}\n",
        "fault", "reads", "failures", "down", "retired", "other", "recovery"
    );
    for p in log.phases.lock().unwrap().iter() {
        let recovery = p
            .recovery
            .map_or("none".to_owned(), |r| format!("{:.1} s", r.as_secs_f64()));
        let _ = writeln!(
            out,
            "{:<34} {:>7} {:>8} {:>6} {:>7} {:>6} {:>10}",
            p.name, p.reads, p.failures, p.down, p.retired, p.other, recovery
        );
    }
    out
}

async fn run(log: Arc<Log>) {
    let moto = Moto::program().expect(
        "the chaos test needs moto: OAI_BRIDGE_TEST_MOTO or moto_server on the PATH (.ci/run)",
    );
    let moto = Moto::start_program(&moto);
    let postgres = Postgres::start();
    let bucket = moto.bucket("chaos").await;
    let proxy = Proxy::start(moto.endpoint.clone(), usize::MAX, Held::Stall).await;
    let upstreams = Arc::new(Upstreams {
        servers: (0..REPOSITORIES)
            .map(|i| {
                let server = TestServer::builder(numbered(20 + (i % 5) * 5))
                    .page_size(5)
                    .start();
                // A refresh takes a few tenths of a second: long enough to be cut.
                server.fault_always(Fault::Delay(Duration::from_millis(30)));
                server
            })
            .collect(),
        records: (0..REPOSITORIES)
            .map(|i| Mutex::new(numbered(20 + (i % 5) * 5)))
            .collect(),
    });
    let root = tempfile::tempdir().unwrap();
    let mut text = format!(
        "[server]\npublic_url = \"{PUBLIC_URL}\"\npublish_url = \"s3://chaos/site/\"\n\
         [state]\nurl = \"{}\"\nlease_secs = {LEASE_SECS}\n\
         [harvest]\npoliteness_delay_ms = 0\nstart_spread_secs = 0\nmax_concurrent_refreshes = 4\n",
        postgres.url
    );
    for (i, server) in upstreams.servers.iter().enumerate() {
        let _ = write!(
            text,
            "[[repository]]\nname = \"r{i:02}\"\nbase_url = \"{}\"\nscope = [\"{SCOPE}\"]\n\
             max_urls_per_shard = 10\nrefresh_interval_secs = {}\n",
            server.url(),
            INTERVAL.as_secs()
        );
    }
    let config = root.path().join("bridge.toml");
    std::fs::write(&config, text).unwrap();
    let logs = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("chaos");
    let _ = std::fs::remove_dir_all(&logs);
    std::fs::create_dir_all(&logs).unwrap();
    println!("chaos: the gateways' logs are in {}", logs.display());
    let mut chaos = Chaos {
        nodes: Arc::new((0..GATEWAYS).map(|_| Node::default()).collect()),
        log: Arc::clone(&log),
        upstreams: Arc::clone(&upstreams),
        mutating: Arc::default(),
        site: Site {
            bucket: &bucket,
            prefix: "site",
            public_url: PUBLIC_URL,
        },
        db: postgres.url.clone(),
        client: reqwest::Client::builder()
            .no_gzip()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap(),
        gateways: Vec::new(),
        args: (0..GATEWAYS)
            .map(|g| gateway_args(&config, &root.path().join(format!("state-{g}"))))
            .collect(),
        endpoint: proxy.address.clone(),
        logs,
    };
    for g in 0..GATEWAYS {
        let serving = chaos.start_gateway(g).await;
        chaos.gateways.push(serving);
    }

    log.begin("first harvest (no readers)", false);
    chaos.recover().await;
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..READERS {
        let (nodes, log, stop) = (
            Arc::clone(&chaos.nodes),
            Arc::clone(&log),
            Arc::clone(&stop),
        );
        tasks.push(tokio::spawn(reader(nodes, log, stop)));
    }
    let (on, halt) = (Arc::clone(&chaos.mutating), Arc::clone(&stop));
    tasks.push(tokio::spawn(mutator(Arc::clone(&upstreams), on, halt)));
    log.begin("baseline", false);
    tokio::time::sleep(Duration::from_secs(10)).await;

    log.begin("PostgreSQL restarted mid-refresh", true);
    chaos.mutating.store(true, Ordering::SeqCst);
    let held = "SELECT count(*)::text FROM oai_bridge_refreshes WHERE expires_at > now()";
    let waited = Instant::now();
    while column(&postgres.url, held).await[0] == "0" {
        assert!(
            waited.elapsed() < Duration::from_secs(60),
            "no refresh to cut within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    postgres.down().await;
    postgres.up().await;
    chaos.recover().await;

    log.begin("PostgreSQL down for 60 s", true);
    chaos.mutating.store(true, Ordering::SeqCst);
    postgres.down().await;
    tokio::time::sleep(OUTAGE).await;
    postgres.up().await;
    chaos.recover().await;

    for (fault, name) in [
        (BucketFault::Error, "bucket answering 500 for 60 s"),
        (BucketFault::Silent, "bucket silent for 60 s"),
    ] {
        log.begin(name, true);
        chaos.mutating.store(true, Ordering::SeqCst);
        proxy.fail(fault);
        tokio::time::sleep(OUTAGE).await;
        proxy.fail(BucketFault::None);
        chaos.recover().await;
    }

    for round in 1..=KILLS_EACH {
        for g in 0..GATEWAYS {
            log.begin(
                &format!("gateway {g} SIGKILLed ({round} of {KILLS_EACH})"),
                true,
            );
            chaos.mutating.store(true, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(fastrand::u64(..5_000))).await;
            chaos.kill(g).await;
            tokio::time::sleep(Duration::from_millis(500 + fastrand::u64(..1_500))).await;
            chaos.gateways[g] = chaos.start_gateway(g).await;
            chaos.recover().await;
        }
    }

    // Nothing lost: the bucket's files list every upstream record (the last recovery saw the
    // records in PostgreSQL and the gateways' files).
    let (site, db, upstreams) = (&chaos.site, &chaos.db, &chaos.upstreams);
    let mut all = (0..REPOSITORIES).collect();
    let last = caught_up(
        &chaos.client,
        site,
        db,
        upstreams,
        &chaos.nodes,
        true,
        &mut all,
    )
    .await;
    *log.lost.lock().unwrap() = Some(last.err().unwrap_or_default());
    stop.store(true, Ordering::SeqCst);
    for task in tasks {
        task.await.unwrap();
    }
}
