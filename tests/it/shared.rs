//! Issue 23 points 3 and 4: several gateways, one fleet. Three `serve` processes share one
//! PostgreSQL database (`[state] url`) and one bucket (`[server] publish_url`, moto's S3) for 50
//! repositories. One gateway is killed with SIGKILL in the middle of a refresh, and started
//! again. In the end every repository is published exactly, no repository was ever harvested by
//! two gateways at once (each upstream records when requests arrive: one harvester's requests are
//! at least the upstream's answer time apart), no repository was harvested in full twice (the
//! refresh the killed gateway left was continued from its checkpoint by another), and the three
//! gateways answer every file with the same bytes, ETag and Last-Modified as the bucket holds.
//!
//! A follower makes the generations the others recorded several at a time: two repositories
//! whose files the bucket never answers (for this follower) hold up none of the others.
//!
//! Needs moto and PostgreSQL (see tests/it/bucket.rs and tests/it/postgres.rs): without them
//! the test says it is skipped, except on CI.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::bucket::{Held, Moto, Proxy, Serving, Site, pages_of, until};
use crate::faults::SCOPE;
use crate::postgres::Database;
use crate::server::{Fault, TestRecord, TestServer, numbered};

const REPOSITORIES: usize = 50;
/// How long each upstream takes to answer: a refresh of 8 pages takes a few tenths of a second.
const ANSWER: Duration = Duration::from_millis(40);
const TOKEN: &str = "a-token-of-the-fleet-test-0123456789";

fn records(i: usize) -> Vec<TestRecord> {
    numbered(20 + (i % 5) * 5)
}

/// Runs `sql` against the database and gives the first column of each row.
pub(crate) async fn column(url: &str, sql: &str) -> Vec<String> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let task = tokio::spawn(connection);
    let rows = client.query(sql, &[]).await.unwrap();
    drop(client);
    let _ = task.await;
    rows.iter().map(|r| r.get::<_, String>(0)).collect()
}

/// Each file's ETag and Last-Modified as `gateway` answers it, when it answers each with the
/// bytes the bucket holds; else `None`.
pub(crate) async fn served(
    client: &reqwest::Client,
    gateway: &Serving,
    files: &BTreeMap<String, Vec<u8>>,
) -> Option<BTreeMap<String, (String, String)>> {
    let mut seen = BTreeMap::new();
    for (name, bytes) in files {
        let answer = client
            .get(format!("{}{name}", gateway.public))
            .send()
            .await
            .unwrap();
        let header = |h: &str| {
            (answer.headers().get(h))
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default()
        };
        let validators = (header("etag"), header("last-modified"));
        if !answer.status().is_success() || answer.bytes().await.unwrap() != bytes[..] {
            return None;
        }
        seen.insert(name.clone(), validators);
    }
    Some(seen)
}

#[tokio::test]
async fn three_gateways_share_fifty_repositories_and_survive_a_kill() {
    let Some(moto) = Moto::start() else { return };
    let Some(db) = Database::create("three_gateways_share_fifty_repositories") else {
        return;
    };
    let bucket = moto.bucket("shared").await;
    let site = Site {
        bucket: &bucket,
        prefix: "site",
        public_url: "https://cdn.example/",
    };
    let servers: Vec<TestServer> = (0..REPOSITORIES)
        .map(|i| {
            let server = TestServer::builder(records(i)).page_size(5).start();
            server.fault_always(Fault::Delay(ANSWER));
            server
        })
        .collect();
    let root = tempfile::tempdir().unwrap();
    let mut text = format!(
        "[server]\npublic_url = \"https://cdn.example/\"\npublish_url = \"s3://shared/site/\"\n\
         [state]\nurl = \"{}\"\nlease_secs = 2\n\
         [harvest]\npoliteness_delay_ms = 0\nstart_spread_secs = 0\nmax_concurrent_refreshes = 4\n",
        db.url
    );
    for (i, server) in servers.iter().enumerate() {
        text.push_str(&format!(
            "[[repository]]\nname = \"r{i:02}\"\nbase_url = \"{}\"\nscope = [\"{SCOPE}\"]\n\
             max_urls_per_shard = 10\nrefresh_interval_secs = 3600\n",
            server.url()
        ));
    }
    let config = root.path().join("bridge.toml");
    std::fs::write(&config, text).unwrap();
    let args = |n: usize| gateway_args(&config, &root.path().join(format!("state-{n}")));
    let mut gateways = Vec::new();
    for n in 0..3 {
        gateways.push(Serving::start(&moto.endpoint, &args(n), TOKEN).await);
    }

    // The first gateway, while it holds a repository whose list it is half-way through: killed.
    let pid = gateways[0].child.id();
    let holds = format!(
        "SELECT repository FROM oai_bridge_refreshes \
         WHERE holder LIKE '%:{pid}:%' AND expires_at > now()"
    );
    let mut killed = None;
    let started = Instant::now();
    while killed.is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no claim to kill in"
        );
        for name in column(&db.url, &holds).await {
            let i: usize = name[1..].parse().unwrap();
            let pages = (servers[i].list_requests().into_iter())
                .filter(|r| r.status == 200)
                .count();
            if (2..4).contains(&pages) {
                killed = Some(i);
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let killed = killed.unwrap();
    gateways[0].child.kill().unwrap(); // SIGKILL
    gateways[0].child.wait().unwrap();
    let asked_at_kill = servers[killed].list_requests().len();
    // Its other refreshes under way: one cut before its first page was stored starts over.
    let cut: Vec<String> = column(&db.url, &holds).await;
    assert!(cut.contains(&format!("r{killed:02}")), "{cut:?}");
    gateways[0] = Serving::start(&moto.endpoint, &args(0), TOKEN).await;

    // Every repository published, and robots.txt at the root naming every index.
    let recorded = "SELECT repository FROM oai_bridge_refreshes WHERE generation IS NOT NULL";
    until("every repository published", || async {
        column(&db.url, recorded).await.len() == REPOSITORIES
    })
    .await;
    until("robots.txt names every repository", || async {
        let names = site.objects().await;
        if !names.contains("robots.txt") {
            return false;
        }
        let robots = String::from_utf8(site.read("robots.txt").await).unwrap();
        robots
            .lines()
            .filter(|l| l.starts_with("Sitemap: "))
            .count()
            == REPOSITORIES
    })
    .await;
    let (files, _) = site.crawl().await;
    for (i, _) in servers.iter().enumerate() {
        let index = format!("https://cdn.example/r{i:02}/sitemap.xml");
        let (_, pages) = site.crawl_from(vec![index]).await;
        assert_eq!(pages, pages_of(&records(i)), "r{i:02}");
    }

    // Each gateway answers every file as the bucket holds it, with the same validators.
    let client = reqwest::Client::new();
    let mut answers: Vec<BTreeMap<String, (String, String)>> = Vec::new();
    for gateway in &gateways {
        let started = Instant::now();
        let seen = loop {
            match served(&client, gateway, &files).await {
                Some(seen) => break seen,
                None if started.elapsed() < Duration::from_secs(60) => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                None => panic!("{} does not serve what the bucket holds", gateway.public),
            }
        };
        answers.push(seen);
    }
    for other in &answers[1..] {
        for (name, validators) in &answers[0] {
            if name == "robots.txt" {
                continue; // made by each gateway when its repositories change
            }
            assert_eq!(other.get(name), Some(validators), "{name}");
        }
    }

    // No repository was harvested by two gateways at once, nor in full twice: the refresh the
    // killed gateway left was continued from its checkpoint.
    for (i, server) in servers.iter().enumerate() {
        let requests = server.requests();
        for pair in requests.windows(2) {
            let gap = pair[1].at.duration_since(pair[0].at);
            assert!(
                gap >= ANSWER - Duration::from_millis(5),
                "r{i:02}: two requests {gap:?} apart, less than one answer: two harvests at once"
            );
        }
        let full = (server.list_requests().iter())
            .filter(|r| r.arg("resumptionToken").is_none())
            .count();
        let name = format!("r{i:02}");
        match cut.contains(&name) && i != killed {
            true => assert!(
                (1..=2).contains(&full),
                "{name} listed from the start {full} times"
            ),
            false => assert_eq!(full, 1, "{name} was listed from the start {full} times"),
        }
    }
    let continued = &servers[killed].list_requests()[asked_at_kill..];
    assert!(
        continued
            .first()
            .is_some_and(|r| r.arg("resumptionToken").is_some()),
        "r{killed:02} was continued with a token after the kill"
    );
}

#[tokio::test]
async fn a_stalled_import_holds_up_no_other_repository() {
    let Some(moto) = Moto::start() else { return };
    let Some(db) = Database::create("a_stalled_import_holds_up_no_other") else {
        return;
    };
    let bucket = moto.bucket("stalled").await;
    let site = Site {
        bucket: &bucket,
        prefix: "site",
        public_url: "https://cdn.example/",
    };
    let servers: Vec<TestServer> = (0..8).map(|_| TestServer::start(numbered(12))).collect();
    let root = tempfile::tempdir().unwrap();
    let mut text = format!(
        "[server]\npublic_url = \"https://cdn.example/\"\npublish_url = \"s3://stalled/site/\"\n\
         [state]\nurl = \"{}\"\nlease_secs = 2\n\
         [harvest]\npoliteness_delay_ms = 0\nstart_spread_secs = 0\n",
        db.url
    );
    for (i, server) in servers.iter().enumerate() {
        text.push_str(&format!(
            "[[repository]]\nname = \"r{i}\"\nbase_url = \"{}\"\nscope = [\"{SCOPE}\"]\n\
             max_urls_per_shard = 5\nrefresh_interval_secs = 3600\n",
            server.url()
        ));
    }
    let config = root.path().join("bridge.toml");
    std::fs::write(&config, text).unwrap();
    let args = |n: usize| gateway_args(&config, &root.path().join(format!("state-{n}")));
    let _leader = Serving::start(&moto.endpoint, &args(0), TOKEN).await;
    let recorded = "SELECT repository FROM oai_bridge_refreshes WHERE generation IS NOT NULL";
    until("the leader publishes every repository", || async {
        column(&db.url, recorded).await.len() == servers.len()
    })
    .await;

    // The follower starts when every repository is fresh: it refreshes none, and follows all,
    // through a bucket that never answers for the files of r0 and r1.
    let proxy = Proxy::start(moto.endpoint.clone(), usize::MAX, Held::Stall).await;
    proxy.stall_reads_under("/site/r0/");
    proxy.stall_reads_under("/site/r1/");
    let follower = Serving::start(&proxy.address, &args(1), TOKEN).await;
    let (files, _) = site.crawl().await;
    let client = reqwest::Client::new();
    for i in 2..servers.len() {
        let own: BTreeMap<String, Vec<u8>> = (files.iter())
            .filter(|(name, _)| name.starts_with(&format!("r{i}/")))
            .map(|(name, bytes)| (name.clone(), bytes.clone()))
            .collect();
        assert!(own.contains_key(&format!("r{i}/sitemap.xml")), "{own:?}");
        until(&format!("the follower serves r{i}"), || async {
            served(&client, &follower, &own).await.is_some()
        })
        .await;
    }
    // Still stalled: r0 has no generation on the follower.
    let answer = reqwest::get(format!("{}r0/sitemap.xml", follower.public))
        .await
        .unwrap();
    assert_eq!(answer.status(), 503);
}

/// `serve` of the configuration file `config` with the state folder `state`, on loopback ports
/// the kernel picks: the arguments of one gateway of a fleet's tests.
pub(crate) fn gateway_args(config: &std::path::Path, state: &std::path::Path) -> Vec<String> {
    [
        "serve",
        "--config",
        &config.display().to_string(),
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
        "--state-dir",
        &state.display().to_string(),
    ]
    .map(str::to_owned)
    .to_vec()
}
