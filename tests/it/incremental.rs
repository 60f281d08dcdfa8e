//! Incremental, durable and crash-safe harvesting through the store (`export --state`): changes
//! between refreshes, deletions without `deletedRecord` support, expired tokens, the shrink
//! guard, and a process killed at random points. Rule ids are those of docs/conformance.md.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use oai_bridge::Drop;
use oai_bridge::{Error, ExportOptions, ExportSummary, export};
use oai_bridge::{Kind, Policy};
use oai_bridge::{STORE_FILE, Store};

use crate::faults::{PUBLIC_URL, SCOPE, fast, job, snapshot};
use crate::server::{Fault, Granularity, TestRecord, TestServer, numbered};

async fn export_with(
    server: &TestServer,
    out: &Path,
    state: &Path,
    policy: Policy,
) -> Result<ExportSummary, Error> {
    export_to(server, out, Some(state), policy).await
}

/// An export of `server` into `out`, through the store in `state` when there is one.
pub(crate) async fn export_to(
    server: &TestServer,
    out: &Path,
    state: Option<&Path>,
    policy: Policy,
) -> Result<ExportSummary, Error> {
    export_job(job(server), out, state, policy).await
}

/// An export of `job` into `out`, through the store in `state` when there is one, with the
/// tests' harvest settings.
pub(crate) async fn export_job(
    job: oai_bridge::Job,
    out: &Path,
    state: Option<&Path>,
    policy: Policy,
) -> Result<ExportSummary, Error> {
    export(&ExportOptions {
        job,
        harvest: fast(),
        out: out.to_owned().into(),
        publish: Default::default(),
        progress: false,
        state: state.map(Path::to_owned),
        state_db: None,
        policy,
    })
    .await
}

/// A temporary folder (kept while it lives) with the paths of an export's output and state in it.
pub(crate) fn folders() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let (out, state) = (root.path().join("out"), root.path().join("state"));
    (root, out, state)
}

/// Every `<loc>` of every sitemap shard in `out`.
pub(crate) fn published(out: &Path) -> BTreeSet<String> {
    let mut urls = BTreeSet::new();
    for entry in std::fs::read_dir(out).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.starts_with("sitemap-") && name.ends_with(".xml") {
            let text = std::fs::read_to_string(out.join(&name)).unwrap();
            for part in text.split("<loc>").skip(1) {
                urls.insert(part.split("</loc>").next().unwrap().to_owned());
            }
        }
    }
    urls
}

/// The URLs a complete harvest of `records` publishes: every live record's identifiers.
fn expected(records: &[TestRecord]) -> BTreeSet<String> {
    records
        .iter()
        .filter(|r| !r.deleted)
        .flat_map(|r| r.dc_identifiers.iter().cloned())
        .collect()
}

fn record(i: usize, date: &str, version: u32) -> TestRecord {
    let url = if version == 0 {
        format!("https://repo.example/record/{i}")
    } else {
        format!("https://repo.example/record/{i}/v{version}")
    };
    TestRecord::new(&format!("oai:test:{i}"), date)
        .url(&url)
        .title(&format!("Record {i}"))
}

#[tokio::test]
async fn updates_and_deletions_between_refreshes_are_applied_exactly() {
    // OAI-17, OAI-18, OAI-39 (deletedRecord persistent), I-06.
    let mut records = numbered(12);
    let server = TestServer::builder(records.clone()).page_size(5).start();
    let (_root, out, state) = folders();

    let first = export_with(&server, &out, &state, Policy::default())
        .await
        .unwrap();
    assert_eq!(first.run.as_ref().unwrap().kind, Kind::Full);
    assert_eq!(published(&out), expected(&records));
    assert!(server.list_requests()[0].arg("from").is_none());

    records[2] = record(3, "2024-06-02", 2);
    records[4] = TestRecord::new("oai:test:5", "2024-06-02").deleted();
    records.push(record(13, "2024-06-02", 0));
    server.set_records(records.clone());
    server.set_response_date("2024-06-03T08:00:00Z");
    let asked = server.list_requests().len();
    let second = export_with(&server, &out, &state, Policy::default())
        .await
        .unwrap();
    let run = second.run.as_ref().unwrap();
    assert_eq!(run.kind, Kind::Incremental);
    // The first harvest's responseDate (2024-06-01T12:00:00Z) minus one day, in the
    // repository's day granularity.
    assert_eq!(run.from.as_deref(), Some("2024-05-31"));
    let requests = &server.list_requests()[asked..];
    assert_eq!(requests[0].arg("from").as_deref(), Some("2024-05-31"));
    // Only the three changed records were sent (one page).
    assert_eq!(requests.len(), 1);
    assert_eq!(second.built.report.records, 3);
    assert_eq!(published(&out), expected(&records));
    assert!(!published(&out).contains("https://repo.example/record/5"));
    assert!(published(&out).contains("https://repo.example/record/3/v2"));
    assert!(!published(&out).contains("https://repo.example/record/3"));

    // The next refresh starts from the second harvest's responseDate.
    let third = export_with(&server, &out, &state, Policy::default())
        .await
        .unwrap();
    assert_eq!(third.run.unwrap().from.as_deref(), Some("2024-06-02"));
    assert_eq!(published(&out), expected(&records));
}

#[tokio::test]
async fn a_shard_edited_on_disk_is_not_patched_but_rendered_from_every_record() {
    // A published shard that is not as the bridge wrote it (here a lastmod edited by hand,
    // the length unchanged) is never the base of a patch: the refresh renders every stored
    // record instead, and the edit is gone.
    let mut records = numbered(12);
    let server = TestServer::builder(records.clone()).page_size(5).start();
    let (_root, out, state) = folders();
    export_with(&server, &out, &state, Policy::default())
        .await
        .unwrap();
    let shard = out.join("sitemap-1.xml");
    edit_a_lastmod(&shard);

    records[2] = record(3, "2024-06-02", 2);
    server.set_records(records.clone());
    server.set_response_date("2024-06-03T08:00:00Z");
    let second = export_with(&server, &out, &state, Policy::default())
        .await
        .unwrap();
    assert_eq!(second.run.as_ref().unwrap().kind, Kind::Incremental);
    assert_eq!(second.built.report.records, 1);
    assert_eq!(published(&out), expected(&records));
    let rendered = std::fs::read_to_string(&shard).unwrap();
    assert!(!rendered.contains("<lastmod>1"), "{rendered}");
}

/// Edits the first lastmod of the published file at `path` by hand, its length unchanged (a
/// year 2xxx becomes 1xxx).
pub(crate) fn edit_a_lastmod(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap();
    let edited = text.replacen("<lastmod>2", "<lastmod>1", 1);
    assert_ne!(edited, text);
    std::fs::write(path, &edited).unwrap();
}

#[tokio::test]
async fn without_deletion_support_only_a_complete_full_harvest_removes_records() {
    // OAI-39, I-06: deletedRecord=no (Zenodo's, Q-26) never says what went; absence from a
    // complete full harvest is the proof.
    let records = numbered(8);
    let server = TestServer::builder(records.clone())
        .page_size(3)
        .deleted_record("no")
        .start();
    let (_root, out, state) = folders();
    let weekly = Policy::default();
    export_with(&server, &out, &state, weekly.clone())
        .await
        .unwrap();
    server.set_records(records[..7].to_vec());
    server.set_response_date("2024-06-02T12:00:00Z");

    let incremental = export_with(&server, &out, &state, weekly.clone())
        .await
        .unwrap();
    assert_eq!(incremental.run.unwrap().kind, Kind::Incremental);
    assert_eq!(
        published(&out),
        expected(&records),
        "no proof of deletion yet"
    );

    // A full harvest that fails on its last page proves nothing.
    let always_full = Policy {
        full_interval: Duration::ZERO,
        ..weekly
    };
    server.fault_on_page_times(3, 10, Fault::oai("badArgument", "broken"));
    let snapshot_before = snapshot(&out);
    export_with(&server, &out, &state, always_full.clone())
        .await
        .unwrap_err();
    assert_eq!(snapshot(&out), snapshot_before);
    server.clear_faults();

    let full = export_with(&server, &out, &state, always_full)
        .await
        .unwrap();
    let run = full.run.unwrap();
    assert_eq!((run.kind, run.removed, run.live), (Kind::Full, 1, 7));
    assert_eq!(published(&out), expected(&records[..7]));
}

#[tokio::test]
async fn an_expired_token_restarts_the_list_from_the_newest_datestamp_applied() {
    // OAI-27, Q-01: badResumptionToken mid-list (a token that expired, as Zenodo's do after
    // about two minutes). The records come in datestamp order, so the list
    // starts again one day before the newest datestamp applied, and nothing is lost.
    let records = numbered(20);
    let server = TestServer::builder(records.clone()).page_size(5).start();
    server.fault_on_page(3, Fault::bad_resumption_token());
    let (_root, out, state) = folders();
    let summary = export_with(&server, &out, &state, Policy::default())
        .await
        .unwrap();
    assert_eq!(summary.built.report.restarts, 1);
    assert_eq!(published(&out), expected(&records));
    let restart = server
        .list_requests()
        .into_iter()
        .find(|r| r.arg("from").is_some())
        .expect("a restarted list");
    // Pages 1-2 applied records dated 2024-05-01 to 2024-05-10.
    assert_eq!(restart.arg("from").as_deref(), Some("2024-05-09"));
}

#[tokio::test]
async fn an_expired_token_in_an_unordered_list_restarts_it_from_the_beginning() {
    // OAI-24, OAI-27: records not in datestamp order; restarting from the newest datestamp
    // would lose the older records not yet sent.
    let mut records = numbered(20);
    records.reverse();
    let server = TestServer::builder(records.clone()).page_size(5).start();
    server.fault_on_page(3, Fault::bad_resumption_token());
    let (_root, out, state) = folders();
    export_with(&server, &out, &state, Policy::default())
        .await
        .unwrap();
    assert_eq!(published(&out), expected(&records));
    let firsts: Vec<_> = server
        .list_requests()
        .into_iter()
        .filter(|r| r.arg("resumptionToken").is_none())
        .collect();
    assert_eq!(firsts.len(), 2);
    assert!(firsts.iter().all(|r| r.arg("from").is_none()));
}

#[tokio::test]
async fn the_shrink_guard_holds_a_shrink_until_confirmed_or_accepted() {
    // I-07: an upstream that suddenly shows a quarter of its records is not believed at once.
    let records = numbered(20);
    let server = TestServer::builder(records.clone())
        .page_size(10)
        .deleted_record("no")
        .start();
    let (_root, out, state) = folders();
    let full = Policy {
        full_interval: Duration::ZERO,
        ..Policy::default()
    };
    export_with(&server, &out, &state, full.clone())
        .await
        .unwrap();
    let before = snapshot(&out);

    server.set_records(records[..5].to_vec());
    let err = export_with(&server, &out, &state, full.clone())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::ShrinkHeld {
                published: 20,
                harvested: 5,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("--accept-shrink"), "{err}");
    assert_eq!(snapshot(&out), before, "the published files are untouched");

    // The upstream recovers: the next full harvest publishes everything, nothing was lost.
    server.set_records(records.clone());
    export_with(&server, &out, &state, full.clone())
        .await
        .unwrap();
    assert_eq!(published(&out), expected(&records));

    // It shrinks again, twice in a row: the second complete harvest confirms it.
    server.set_records(records[..5].to_vec());
    export_with(&server, &out, &state, full.clone())
        .await
        .unwrap_err();
    export_with(&server, &out, &state, full.clone())
        .await
        .unwrap();
    assert_eq!(published(&out), expected(&records[..5]));

    // The operator's override publishes at once.
    server.set_records(records.clone());
    export_with(&server, &out, &state, full.clone())
        .await
        .unwrap();
    server.set_records(records[..2].to_vec());
    let accept = Policy {
        accept_shrink: true,
        ..full
    };
    export_with(&server, &out, &state, accept).await.unwrap();
    assert_eq!(published(&out), expected(&records[..2]));
}

/// A small deterministic generator (the crash points must be reproducible from the seed).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

/// The published folder is whole: every shard its index lists is there, and nothing else is
/// half-written.
fn assert_intact(out: &Path) {
    if !out.exists() {
        return;
    }
    let index = std::fs::read_to_string(out.join("sitemap.xml")).unwrap();
    for part in index.split("<loc>").skip(1) {
        let url = part.split("</loc>").next().unwrap();
        let name = url.rsplit('/').next().unwrap();
        let shard = std::fs::read_to_string(out.join(name)).unwrap();
        assert!(shard.trim_end().ends_with("</urlset>"), "{name} is cut");
    }
    assert!(out.join(oai_bridge::MARKER).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_at_random_points_the_next_run_converges() {
    // I-03, I-04, OAI-25: `kill -9` during harvest and publish, 24 times; each time the store
    // must open consistent, the published folder be whole, and the next run publish exactly
    // the repository's URLs, continuing from the checkpoint.
    let mut records: Vec<TestRecord> = (1..=400).map(|i| record(i, "2024-05-01", 0)).collect();
    let server = TestServer::builder(records.clone()).page_size(5).start();
    let (_root, out, state) = folders();
    let run = |kill_after: Option<Duration>| {
        let mut child = crate::golden::bridge()
            .args(["export", "--base-url", &server.url(), "--out"])
            .arg(&out)
            .args(["--public-url", PUBLIC_URL, "--scope", SCOPE, "--state"])
            .arg(&state)
            .args(["--no-progress", "-q", "--politeness-delay", "8"])
            .args(["--full-harvest-interval", "86400"])
            .env_remove("OAI_BRIDGE_CONFIG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        match kill_after {
            Some(after) => {
                std::thread::sleep(after);
                let _ = child.kill();
                child.wait().unwrap();
                None
            }
            None => Some(child.wait_with_output().unwrap()),
        }
    };
    let mut rng = Lcg(0x5eed);
    let (mut killed_mid_harvest, mut resumable) = (0, 0);
    let mut run_ms = 250;
    for (iteration, day) in (0..24).zip(2..) {
        // The repository changes between runs: a few updates, a deletion, a new record.
        for _ in 0..50 {
            let i = rng.below(records.len() as u64) as usize;
            let n = i + 1;
            if !records[i].deleted {
                records[i] = record(n, &format!("2024-06-{day:02}"), iteration + 1);
            }
        }
        let gone = rng.below(records.len() as u64) as usize;
        records[gone] = TestRecord::new(
            &format!("oai:test:{}", gone + 1),
            &format!("2024-06-{day:02}"),
        )
        .deleted();
        records.push(record(records.len() + 1, &format!("2024-06-{day:02}"), 0));
        server.set_records(records.clone());
        server.set_response_date(&format!("2024-06-{:02}T12:00:00Z", day + 1));

        // Within the time a whole run took last, so that the kills land in harvests however
        // busy the machine is (a fixed 250 ms fell mostly before the harvest under load).
        let delay = Duration::from_millis(rng.below(run_ms.max(1)));
        tokio::task::block_in_place(|| run(Some(delay)));
        // A kill before the run made its state folder (the first run, killed within a few
        // dozen milliseconds on a busy machine) leaves no store to check, as a kill before
        // anything was published leaves no output folder (`assert_intact`).
        if state.exists() {
            let store = Store::open(&state.join(STORE_FILE)).expect("the store opens after a kill");
            store
                .verify()
                .expect("the store is consistent after a kill");
            let interrupted = store.state().unwrap().run;
            if let Some(run) = &interrupted {
                killed_mid_harvest += 1;
                resumable += u32::from(run.checkpoint.is_some());
            }
        }
        assert_intact(&out);

        let started = std::time::Instant::now();
        let output = tokio::task::block_in_place(|| run(None)).unwrap();
        run_ms = started.elapsed().as_millis() as u64;
        assert!(
            output.status.success(),
            "iteration {iteration}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(published(&out), expected(&records), "iteration {iteration}");
    }
    eprintln!(
        "{killed_mid_harvest} of 24 kills landed in a harvest, {resumable} after a checkpoint"
    );
    // The kills must have hit harvests, else this test proves nothing.
    assert!(
        killed_mid_harvest >= 5 && resumable >= 3,
        "{killed_mid_harvest} {resumable}"
    );
}

#[tokio::test]
async fn a_stored_retry_after_keeps_the_next_export_from_calling_early() {
    // OAI-26, Q-25: a Retry-After longer than the schedule is remembered in the store.
    let server = TestServer::start(numbered(3));
    server.fault_always(Fault::Unavailable(crate::server::RetryAfter::Seconds(7200)));
    let (_root, out, state) = folders();
    let options = ExportOptions {
        job: job(&server),
        harvest: oai_bridge::HarvestSettings {
            max_attempts: 1,
            ..fast()
        },
        out: out.into(),
        publish: Default::default(),
        progress: false,
        state: Some(state),
        state_db: None,
        policy: Policy::default(),
    };
    export(&options).await.unwrap_err();
    let asked = server.requests().len();
    assert_eq!(asked, 1);
    let err = export(&options).await.unwrap_err();
    assert!(matches!(err, Error::NotBefore(_)), "{err}");
    assert!(err.to_string().contains("Retry-After"), "{err}");
    assert_eq!(
        server.requests().len(),
        asked,
        "the upstream was called early"
    );
}

/// A `ListRecords` answer holding `records` (XML) and no resumption token.
fn last_page(records: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <OAI-PMH xmlns=\"http://www.openarchives.org/OAI/2.0/\">\
         <responseDate>2024-06-03T08:00:00Z</responseDate>\
         <request verb=\"ListRecords\" metadataPrefix=\"oai_dc\">http://127.0.0.1/oai</request>\
         <ListRecords>{records}</ListRecords></OAI-PMH>\n"
    )
}

/// A live record of [`last_page`] with one `dc:identifier`.
fn live_xml(identifier: &str, datestamp: &str, url: &str) -> String {
    format!(
        "<record><header><identifier>{identifier}</identifier><datestamp>{datestamp}</datestamp>\
         </header><metadata><oai_dc:dc xmlns:oai_dc=\"http://www.openarchives.org/OAI/2.0/oai_dc/\" \
         xmlns:dc=\"http://purl.org/dc/elements/1.1/\"><dc:identifier>{url}</dc:identifier>\
         </oai_dc:dc></metadata></record>"
    )
}

#[tokio::test]
async fn a_deleted_header_without_identifier_or_datestamp_removes_nothing() {
    // Q-34, OAI-39 bad input: sickle's ListRecords4.xml ends with a deleted header that has no
    // identifier and no datestamp. It names no record, so none is removed; the rest of the page
    // is applied and the refresh completes.
    let records = numbered(7);
    let server = TestServer::builder(records.clone()).page_size(5).start();
    let (_root, out, state) = folders();
    export_with(&server, &out, &state, Policy::default())
        .await
        .unwrap();
    assert_eq!(published(&out), expected(&records));

    server.fault_on_page(
        1,
        Fault::Body(last_page(&format!(
            "<record><header status=\"deleted\"></header></record>{}",
            live_xml("oai:test:8", "2024-06-02", "https://repo.example/record/8")
        ))),
    );
    let second = export_with(&server, &out, &state, Policy::default())
        .await
        .unwrap();
    let run = second.run.unwrap();
    assert_eq!((run.kind, run.removed, run.live), (Kind::Incremental, 0, 8));
    let mut now = expected(&records);
    now.insert("https://repo.example/record/8".to_owned());
    assert_eq!(published(&out), now);
}

#[tokio::test]
async fn an_empty_metadata_element_is_not_a_deletion() {
    // Q-35, I-06: B2SHARE (#812, #636) sent records with an empty <metadata/>. That is a record
    // the bridge cannot read (the rule: reject it as EMPTY_METADATA), not a proof that its
    // landing page went: the page published before stays.
    let records = numbered(7);
    let server = TestServer::builder(records.clone()).page_size(5).start();
    let (_root, out, state) = folders();
    export_with(&server, &out, &state, Policy::default())
        .await
        .unwrap();
    server.fault_on_page(
        1,
        Fault::Body(last_page(
            "<record><header><identifier>oai:test:3</identifier>\
             <datestamp>2024-06-02</datestamp></header><metadata/></record>\
             <record><header><identifier>oai:test:99</identifier>\
             <datestamp>2024-06-02</datestamp></header><metadata>\n</metadata></record>",
        )),
    );
    let second = export_with(&server, &out, &state, Policy::default()).await;
    let run = second.as_ref().map(|s| s.run.clone());
    assert_eq!(published(&out), expected(&records), "{run:?}");
    // Both are rejected and counted; the one never seen before publishes nothing.
    let second = second.unwrap();
    assert_eq!(second.built.stats.dropped(Drop::EmptyMetadata), 2);
    assert_eq!(second.run.as_ref().unwrap().live, 7);
    let summary = second.render(&job(&server));
    assert!(summary.contains("empty_metadata 2"), "{summary}");

    // A readable version settles the rejection.
    server.clear_faults();
    let mut records = records;
    records[2] = record(3, "2024-06-03", 2);
    server.set_records(records.clone());
    let third = export_with(&server, &out, &state, Policy::default())
        .await
        .unwrap();
    assert_eq!(third.built.stats.dropped(Drop::EmptyMetadata), 1);
    assert_eq!(published(&out), expected(&records));
}

#[tokio::test]
async fn a_list_ending_short_of_its_announced_size_removes_nothing() {
    // Q-04, I-06: OJS 3.3.0 (pkp-lib #7214) miscounts and ends a list with an empty token after
    // page 2 while completeListSize still says 15. A full harvest that ends that far short of
    // the size announced is suspect and proves no deletion. Five of fifteen is less than the
    // shrink guard's half, which therefore does not catch it.
    let records = numbered(15);
    let server = TestServer::builder(records.clone())
        .page_size(5)
        .deleted_record("no")
        .start();
    let (_root, out, state) = folders();
    let full = Policy {
        full_interval: Duration::ZERO,
        ..Policy::default()
    };
    export_with(&server, &out, &state, full.clone())
        .await
        .unwrap();
    assert_eq!(published(&out), expected(&records));

    server.fault_on_page(2, Fault::PrematureEnd);
    let second = export_with(&server, &out, &state, full.clone()).await;
    assert_eq!(
        server.list_requests().len(),
        3 + 2,
        "the list ended after page 2"
    );
    let run = second.as_ref().map(|s| s.run.clone());
    assert_eq!(published(&out), expected(&records), "{run:?}");
    // Said in the summary and kept in the state.
    let second = second.unwrap();
    let run = second.run.as_ref().unwrap();
    let short = run.short.as_ref().expect("the list ended short");
    assert_eq!((short.announced, short.delivered, run.removed), (15, 10, 0));
    let summary = second.render(&job(&server));
    assert!(summary.contains("10 of the 15"), "{summary}");
    let stored = || {
        Store::open(&state.join(STORE_FILE))
            .unwrap()
            .state()
            .unwrap()
    };
    assert_eq!(stored().short_list.map(|s| s.delivered), Some(10));

    // A full harvest whose list ends as announced clears it, and removes what went.
    server.clear_faults();
    server.set_records(records[..14].to_vec());
    let third = export_with(&server, &out, &state, full).await.unwrap();
    let run = third.run.unwrap();
    assert_eq!((run.kind, run.short, run.removed), (Kind::Full, None, 1));
    assert_eq!(stored().short_list, None);
    assert_eq!(published(&out), expected(&records[..14]));
}

#[tokio::test]
async fn a_repository_that_refuses_selective_harvesting_is_still_refreshed() {
    // OAI-53, Q-26, Q-29: some repositories reject or mishandle from/until (Zenodo's 422 on some
    // date windows, metha #39; zvdd.org). The refresh falls back to a full harvest (or a
    // configuration switch turns from/until off), and the change is published.
    let mut records = numbered(7);
    let server = TestServer::builder(records.clone())
        .page_size(5)
        .refuse_from(422)
        .start();
    let (_root, out, state) = folders();
    export_with(&server, &out, &state, Policy::default())
        .await
        .unwrap();
    assert_eq!(published(&out), expected(&records));

    records[2] = record(3, "2024-06-02", 2);
    server.set_records(records.clone());
    server.set_response_date("2024-06-03T08:00:00Z");
    let second = export_with(&server, &out, &state, Policy::default()).await;
    assert!(second.is_ok(), "{:?}", second.err());
    assert_eq!(published(&out), expected(&records));
    let run = second.unwrap().run.unwrap();
    assert_eq!(run.kind, Kind::Full);
    assert_eq!(run.selective_refused.as_deref(), Some("HTTP status 422"));

    // Remembered: the next refresh goes straight to a full harvest, without asking with `from`.
    let store = Store::open(&state.join(STORE_FILE)).unwrap();
    let refused = store.state().unwrap().selective_refused.unwrap();
    assert_eq!(refused.answer, "HTTP status 422");
    assert!(refused.url.contains("from="), "{}", refused.url);
    drop(store);
    let asked = server.list_requests().len();
    records[3] = record(4, "2024-06-03", 2);
    server.set_records(records.clone());
    let third = export_with(&server, &out, &state, Policy::default())
        .await
        .unwrap();
    assert_eq!(third.run.unwrap().kind, Kind::Full);
    let requests = &server.list_requests()[asked..];
    assert!(requests.iter().all(|r| r.arg("from").is_none()));
    assert_eq!(published(&out), expected(&records));
}

/// Issue 20, point 8: a change of platform is a change of settings. The next refresh keeps its
/// store (the same fields are read) but renders every stored record under the new rule instead
/// of patching what the old rule published, and the shrink guard still holds back a rule that
/// would remove most of the published URLs.
#[tokio::test]
async fn a_change_of_platform_renders_in_full_and_the_shrink_guard_still_holds() {
    let server = TestServer::builder(Vec::new()).page_size(5).start();
    let origin = server.url().trim_end_matches("/oai").to_owned();
    // Records in DSpace's shape: their Handles; two also give a page under the OAI directory.
    let records = (1..=10)
        .map(|i| {
            let r = TestRecord::new(&format!("oai:test:123456789/{i}"), "2024-05-01")
                .url(&format!("http://hdl.handle.net/123456789/{i}"));
            if i <= 2 {
                r.url(&format!("{origin}/item/{i}"))
            } else {
                r
            }
        })
        .collect();
    server.set_records(records);
    let (_root, out, state) = folders();
    let generic = export_as(&server, &out, &state, "generic").await.unwrap();
    assert_eq!(generic.built.stats.urls, 2);
    let before = published(&out);

    let dspace = export_as(&server, &out, &state, "dspace").await.unwrap();
    assert_eq!(dspace.run.as_ref().unwrap().kind, Kind::Incremental);
    let now = published(&out);
    assert_eq!(now.len(), 12, "{now:?}");
    assert!(now.is_superset(&before));
    assert!(now.contains(&format!("{origin}/handle/123456789/7")));

    // Back to Google's rule: 2 of 12 URLs left, more than the guard's half removed.
    match export_as(&server, &out, &state, "generic").await {
        Err(Error::ShrinkHeld {
            published,
            harvested,
            ..
        }) => assert_eq!((published, harvested), (12, 2)),
        other => panic!("the shrink guard should hold this back: {other:?}"),
    }
    assert_eq!(published(&out), now, "what was published stays");
}

/// An export of `server` through the store in `state`, under `platform`'s rule and no scope
/// but the platform's own.
async fn export_as(
    server: &TestServer,
    out: &Path,
    state: &Path,
    platform: &str,
) -> Result<ExportSummary, Error> {
    let mut job = job(server);
    job.scope = Vec::new();
    job.landing.platform = oai_bridge::Setting::Fixed(platform.to_owned());
    export_job(job, out, Some(state), Policy::default()).await
}

#[tokio::test]
async fn a_response_date_with_a_fraction_and_an_offset_gives_the_next_from() {
    // Issue 20: a server writing responseDate as Python's isoformat() does. Read, it is the
    // next harvest's from (minus a second); unread, every refresh was a silent full harvest.
    let mut records = numbered(12);
    let server = TestServer::builder(records.clone())
        .page_size(5)
        .granularity(Granularity::Seconds)
        .response_date("2026-11-25T21:46:58.085156+00:00")
        .start();
    let (_root, out, state) = folders();
    export_with(&server, &out, &state, Policy::default())
        .await
        .unwrap();
    records[2] = record(3, "2026-11-25T22:00:00Z", 2);
    server.set_records(records.clone());
    let asked = server.list_requests().len();
    let second = export_with(&server, &out, &state, Policy::default())
        .await
        .unwrap();
    let requests = &server.list_requests()[asked..];
    assert_eq!(
        requests[0].arg("from").as_deref(),
        Some("2026-11-25T21:46:57Z"),
        "{}",
        second.render(&job(&server))
    );
    assert_eq!(second.built.report.records, 1);
    assert_eq!(published(&out), expected(&records));
}

/// Runs `oai-bridge export --state` against `server` as a process: its summary and its log.
fn export_process(server: &TestServer, out: &Path, state: &Path) -> (String, String) {
    let output = crate::golden::bridge()
        .args(["export", "--base-url", &server.url(), "--out"])
        .arg(out)
        .args(["--public-url", PUBLIC_URL, "--scope", SCOPE, "--state"])
        .arg(state)
        .args(["--no-progress", "--politeness-delay", "0"])
        .env_remove("OAI_BRIDGE_CONFIG")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    );
    assert!(output.status.success(), "{stdout}\n{stderr}");
    (stdout, stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_response_date_makes_a_full_harvest_that_says_why() {
    // Issue 20: a full harvest that could have been incremental names the value it could not
    // read, in the summary and as a warning in the log; a first harvest says so as information.
    let server = TestServer::builder(numbered(12))
        .page_size(5)
        .response_date("garbage")
        .start();
    let (_root, out, state) = folders();
    let (first, first_log) = tokio::task::block_in_place(|| export_process(&server, &out, &state));
    assert!(
        first.contains("  why full        the first harvest into this store\n"),
        "{first}"
    );
    assert!(!first_log.contains("WARN"), "{first_log}");
    let asked = server.list_requests().len();
    let (second, log) = tokio::task::block_in_place(|| export_process(&server, &out, &state));
    assert!(
        server.list_requests()[asked..]
            .iter()
            .all(|r| r.arg("from").is_none())
    );
    let why = "the last complete harvest's responseDate \"garbage\" could not be read";
    assert!(second.contains("  harvest         full;"), "{second}");
    assert!(
        second.contains(&format!("  why full        {why}\n")),
        "{second}"
    );
    let warning = log
        .lines()
        .find(|l| l.contains(&format!("{why}; harvesting in full")))
        .unwrap_or_else(|| panic!("no warning naming the value:\n{log}"));
    assert!(warning.contains("WARN"), "{warning}");
}

#[tokio::test]
async fn the_summary_counts_deleted_records_with_the_store_as_without() {
    // Issue 20: deleted headers came in, and `export --state` said none; the plain export
    // counts them. Through the store they are the store's deleted records, as published.
    let mut records = numbered(12);
    records.push(TestRecord::new("oai:test:13", "2024-05-20").deleted());
    let server = TestServer::builder(records.clone()).page_size(5).start();
    let (_root, out, state) = folders();
    let (_plain_root, plain_out, _) = folders();
    let plain = export_to(&server, &plain_out, None, Policy::default())
        .await
        .unwrap();
    let first = export_with(&server, &out, &state, Policy::default())
        .await
        .unwrap();
    assert_eq!(plain.built.stats.deleted, 1);
    assert_eq!(first.built.stats, plain.built.stats, "counted alike");
    let summary = first.render(&job(&server));
    for want in [
        "the store holds 12 live records and 1 deleted",
        "records seen    13 in this harvest, 1 of them deleted",
        "deleted 1",
        // Issue 22: the store's deleted record is the example.
        "    deleted: (expected) a record marked deleted by the upstream",
        "      e.g. oai:test:13\n",
    ] {
        assert!(summary.contains(want), "{want:?} not in:\n{summary}");
    }

    // An incremental harvest brings one more deletion: what it received, and the store's.
    records[4] = TestRecord::new("oai:test:5", "2024-06-02").deleted();
    server.set_records(records);
    server.set_response_date("2024-06-03T08:00:00Z");
    let second = export_with(&server, &out, &state, Policy::default())
        .await
        .unwrap();
    assert_eq!(second.run.as_ref().unwrap().kind, Kind::Incremental);
    assert_eq!(
        (second.built.stats.records, second.built.stats.deleted),
        (13, 2)
    );
    let summary = second.render(&job(&server));
    for want in [
        "the store holds 11 live records and 2 deleted",
        "records seen    1 in this harvest, 1 of them deleted",
        "deleted 2",
        // A patch reads only the changed records: no examples, and the summary says why.
        "(no examples: the published sitemap was patched",
    ] {
        assert!(summary.contains(want), "{want:?} not in:\n{summary}");
    }
}
