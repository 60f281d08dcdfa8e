//! Issue 33 point 2: fenced leases. Two gateways share PostgreSQL and a bucket (moto's S3).
//! Gateway A claims the repository, harvests, and is stopped (SIGSTOP) in the middle of its
//! upload (a proxy in front of moto holds its first file after the manifest) until its lease
//! has ended; B claims the repository with a greater fencing token, harvests what the upstream
//! holds by then (a record changed) and publishes; A resumes (SIGCONT, the proxy lets its upload
//! go on). A makes nothing current (not in the bucket, where the indexes and the manifest stay
//! B's, nor here), says why on its status page (its token superseded by B's), and follows B:
//! both gateways answer every file with the bytes of B's generation, as the bucket holds them.
//!
//! Needs moto and PostgreSQL (see tests/it/bucket.rs and tests/it/postgres.rs): without them
//! the test says it is skipped, except on CI.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use crate::bucket::{Held, Moto, Proxy, Serving, Site, pages_of, until};
use crate::faults::SCOPE;
use crate::postgres::Database;
use crate::server::{TestServer, numbered};
use crate::shared::{column, gateway_args, served};

const TOKEN: &str = "a-token-of-the-fence-test-0123456789";
const LEASE_SECS: u64 = 2;

fn signal(gateway: &Serving, signal: &str) {
    let pid = gateway.child.id().to_string();
    let status = Command::new("kill").args([signal, &pid]).status().unwrap();
    assert!(status.success(), "kill {signal} {pid}");
}

/// The repository's row, as numbers: (fence of the last claim, fence of the generation
/// recorded); -1 for none.
async fn fences(db: &Database) -> (i64, i64) {
    let row = column(
        &db.url,
        "SELECT coalesce(fence, -1)::text || ' ' || coalesce(generation_fence, -1)::text \
         FROM oai_bridge_refreshes WHERE repository = 'r'",
    )
    .await;
    let Some(row) = row.first() else {
        return (-1, -1);
    };
    let (claim, generation) = row.split_once(' ').unwrap();
    (claim.parse().unwrap(), generation.parse().unwrap())
}

async fn status_page(gateway: &Serving) -> String {
    let answer = reqwest::get(&gateway.admin).await.unwrap();
    answer.text().await.unwrap()
}

#[tokio::test]
async fn a_holder_stopped_past_its_lease_publishes_nothing_current_and_follows() {
    let Some(moto) = Moto::start() else { return };
    let Some(db) = Database::create("a_holder_stopped_past_its_lease") else {
        return;
    };
    let bucket = moto.bucket("fenced").await;
    let site = Site {
        bucket: &bucket,
        prefix: "site",
        public_url: "https://cdn.example/",
    };
    let records = numbered(30);
    let server = TestServer::builder(records.clone()).page_size(5).start();
    let root = tempfile::tempdir().unwrap();
    let config = root.path().join("bridge.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\npublic_url = \"https://cdn.example/\"\npublish_url = \"s3://fenced/site/\"\n\
             [state]\nurl = \"{}\"\nlease_secs = {LEASE_SECS}\n\
             [harvest]\npoliteness_delay_ms = 0\nstart_spread_secs = 0\n\
             [[repository]]\nname = \"r\"\nbase_url = \"{}\"\nscope = [\"{SCOPE}\"]\n\
             max_urls_per_shard = 10\nrefresh_interval_secs = 3600\n",
            db.url,
            server.url()
        ),
    )
    .unwrap();
    let args = |n: usize| gateway_args(&config, &root.path().join(format!("state-{n}")));

    // A, through a proxy that lets one PUT through (the manifest that carries A's token) and
    // holds the next (its first file): stopped there, past its lease.
    let proxy = Proxy::start(moto.endpoint.clone(), 1, Held::Pause).await;
    let a = Serving::start(&proxy.address, &args(0), TOKEN).await;
    tokio::time::timeout(Duration::from_secs(60), proxy.held.notified())
        .await
        .expect("A uploads within 60 s");
    signal(&a, "-STOP");
    let (a_fence, none) = fences(&db).await;
    assert!(a_fence > 0 && none == -1, "{a_fence} {none}");
    tokio::time::sleep(Duration::from_secs(LEASE_SECS + 1)).await;

    // B claims the repository once A's lease has ended, and publishes what the upstream holds
    // now: one record changed.
    let mut changed = records.clone();
    changed[12].datestamp = "2024-06-30".to_owned();
    changed[12].title = "Record 13, revised".to_owned();
    server.set_records(changed.clone());
    let b = Serving::start(&moto.endpoint, &args(1), TOKEN).await;
    until("B records its generation", || async {
        fences(&db).await.1 > a_fence
    })
    .await;
    let (b_fence, recorded) = fences(&db).await;
    assert_eq!(b_fence, recorded, "B's generation carries B's token");
    let (b_files, pages) = site.crawl().await;
    assert_eq!(pages, pages_of(&changed));

    // A resumes, and its upload goes on.
    signal(&a, "-CONT");
    proxy.release();
    let superseded = format!("lost the lease: fence {a_fence} was superseded by {b_fence}");
    until("A says it lost the lease", || async {
        status_page(&a).await.contains(&superseded)
    })
    .await;
    let page = status_page(&a).await;
    assert!(page.contains("nothing made current"), "{page}");
    // What A sent the bucket: its manifest (with its token) before it was stopped, then
    // files named after their content at most; no index or manifest of the repository (the
    // root robots.txt is the gateway's, not the generation's).
    let paths = proxy.paths.lock().unwrap().clone();
    let (first, after) = paths.split_first().expect("A wrote its manifest");
    assert!(
        first.ends_with("/r/.oai-bridge/published.json"),
        "{paths:?}"
    );
    let fixed = |p: &String| {
        let name = p.rsplit('/').next().unwrap();
        p.contains("/site/r/") && (name.starts_with("sitemap.xml") || name == "published.json")
    };
    assert!(!after.iter().any(fixed), "{paths:?}");

    // Nothing of A's became current: the bucket holds B's files and token, the fleet records
    // B's generation, and both gateways answer with B's bytes.
    let manifest: serde_json::Value =
        serde_json::from_slice(&site.read("r/.oai-bridge/published.json").await).unwrap();
    assert_eq!(manifest["fence"], b_fence, "{manifest}");
    assert_eq!(fences(&db).await, (b_fence, b_fence));
    let (files, pages) = site.crawl().await;
    assert_eq!(pages, pages_of(&changed));
    let without_robots = |f: &BTreeMap<String, Vec<u8>>| {
        let mut f = f.clone();
        f.remove("robots.txt");
        f
    };
    assert_eq!(without_robots(&files), without_robots(&b_files));
    let client = reqwest::Client::new();
    for (who, gateway) in [("A", &a), ("B", &b)] {
        let mut tries = 0;
        while served(&client, gateway, &files).await.is_none() {
            tries += 1;
            assert!(tries < 300, "{who} does not serve B's generation");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    // A follows: its status page shows the lease free at B's token, and A caught up.
    let page = status_page(&a).await;
    assert!(
        page.contains(&format!("lease: free (last fence {b_fence})"))
            && page.contains("serving the fleet's generation"),
        "{page}"
    );
    let metrics = reqwest::get(format!("{}metrics", a.admin))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(&format!(
            "oai_bridge_fleet_lease_fence{{repository=\"r\"}} {b_fence}"
        )) && metrics.contains("oai_bridge_fleet_generations_behind{repository=\"r\"} 0"),
        "{metrics}"
    );
}
