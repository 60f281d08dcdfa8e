//! Where two rules meet (a 4xx and OAI-53, a short list and the live count, Q-36 and OAI-38,
//! Q-35 and OAI-38, OAI-06 and OAI-34): cases a review of the third-party server fixes found.
//! Each test states the input and what is expected; the two ignored ones are limitations not
//! mended yet, named in their reasons.

use std::path::Path;

use oai_bridge::Drop;
use oai_bridge::{Error, ExportSummary};
use oai_bridge::{Kind, Policy};
use oai_bridge::{STORE_FILE, Store};

use crate::faults::job;
use crate::incremental::{export_to, folders, published};
use crate::server::{Fault, TestRecord, TestServer, numbered};

async fn export_at(
    server: &TestServer,
    out: &Path,
    state: Option<&Path>,
) -> Result<ExportSummary, Error> {
    export_to(server, out, state, Policy::default()).await
}

/// OAI-53: one 404, 403 or 401 (a proxy's hiccup, a login page) to the incremental request says
/// nothing of `from`: it is not taken for a refusal, and the next refresh is incremental.
#[tokio::test]
async fn a_transient_404_to_the_incremental_request_is_not_a_refusal_of_from_for_ever() {
    let mut wrong = Vec::new();
    for status in [404u16, 403, 401] {
        let server = TestServer::builder(numbered(12)).page_size(5).start();
        let (_root, out, state) = folders();
        export_at(&server, &out, Some(&state)).await.unwrap();
        server.set_response_date("2024-06-03T08:00:00Z");
        // Once, to the first ListRecords request of the incremental refresh (the one with from).
        server.fault_on_page(1, Fault::Status(status));
        let _ = export_at(&server, &out, Some(&state)).await;
        let refused = Store::open(&state.join(STORE_FILE))
            .unwrap()
            .state()
            .unwrap()
            .selective_refused;
        let third = export_at(&server, &out, Some(&state)).await.unwrap();
        let got = (refused.map(|r| r.answer), third.run.unwrap().kind);
        if got != (None, Kind::Incremental) {
            wrong.push((status, got));
        }
    }
    assert!(
        wrong.is_empty(),
        "a single 4xx made every later refresh a full harvest: {wrong:?}"
    );
}

/// a full harvest whose list ended short is not swept, and still counts the live records
/// the store keeps (a full harvest does not count them as it goes): 10, as published.
#[tokio::test]
async fn a_short_full_harvest_reports_the_live_records_it_keeps() {
    let server = TestServer::builder(numbered(15)).page_size(5).start();
    let (_root, out, state) = folders();
    server.fault_on_page(2, Fault::PrematureEnd);
    let first = export_at(&server, &out, Some(&state)).await.unwrap();
    let run = first.run.as_ref().unwrap();
    assert!(run.short.is_some(), "the list ended short");
    assert_eq!(published(&out).len(), 10);
    let counted = Store::open(&state.join(STORE_FILE))
        .unwrap()
        .counts()
        .unwrap()
        .live;
    assert_eq!(counted, 10);
    let summary = first.render(&job(&server));
    assert_eq!(
        run.live, counted,
        "RunSummary.live (the store's tally) disagrees with the store: {summary}"
    );
}

/// Q-36 with OAI-38: two versions of one record in one harvest, the later one with a datestamp
/// in the future. Forgetting the datestamp makes the version lose to the older one in the
/// inventory (a missing datestamp sorts lowest), while the store lets it win (a missing
/// datestamp is "newer"): `export` and `export --state` publish different versions.
#[tokio::test]
#[ignore = "LIMITATION: a datestamp forgotten for being in the future (Q-36) sorts lowest in the \
            inventory and newest in the store, so the two can pick different versions of a record \
            sent twice in one harvest; the fix is to keep the date for ordering and drop only \
            the lastmod"]
async fn a_future_dated_version_wins_or_loses_alike_with_and_without_the_store() {
    let records = vec![
        TestRecord::new("oai:test:1", "2024-05-01").url("https://repo.example/record/1/old"),
        TestRecord::new("oai:test:1", "2099-01-01").url("https://repo.example/record/1/new"),
        TestRecord::new("oai:test:2", "2024-05-01").url("https://repo.example/record/2"),
    ];
    let server = TestServer::builder(records).page_size(5).start();
    let (_root, out, state) = folders();
    let (_root2, plain_out, _) = folders();
    export_at(&server, &out, Some(&state)).await.unwrap();
    export_at(&server, &plain_out, None).await.unwrap();
    let with_store = published(&out);
    let without = published(&plain_out);
    assert!(
        with_store.contains("https://repo.example/record/1/new"),
        "{with_store:?}"
    );
    assert_eq!(
        without, with_store,
        "export without a store published the older version"
    );
}

/// the plain export counts a record as rejected when an *older* version of it came with
/// empty metadata after its newest, readable version; the store does not.
#[tokio::test]
#[ignore = "LIMITATION: without a store, an export counts a record as empty_metadata when an \
            older version with empty metadata follows its newest, readable one (what is published \
            is right; only the count is off)"]
async fn an_older_empty_repeat_is_not_counted_as_rejected() {
    let records = vec![
        TestRecord::new("oai:test:1", "2024-05-02").url("https://repo.example/record/1"),
        TestRecord::new("oai:test:1", "2024-05-01").empty_metadata(),
        TestRecord::new("oai:test:2", "2024-05-01").url("https://repo.example/record/2"),
    ];
    let server = TestServer::builder(records).page_size(5).start();
    let (_root, out, state) = folders();
    let (_root2, plain_out, _) = folders();
    let stored = export_at(&server, &out, Some(&state)).await.unwrap();
    let plain = export_at(&server, &plain_out, None).await.unwrap();
    assert_eq!(stored.built.stats.dropped(Drop::EmptyMetadata), 0);
    assert_eq!(
        plain.built.stats.dropped(Drop::EmptyMetadata),
        0,
        "the newest version was readable and is published"
    );
}

/// OAI-06 with OAI-34: the POST sent after a 414 is redirected (302, a load balancer; or 301
/// http -> https): it is sent again, as a POST with its arguments, to the new place (reqwest
/// alone would turn it into a GET without them, which the server answers badVerb).
#[tokio::test]
async fn a_post_after_414_survives_a_redirect() {
    let server = TestServer::builder(numbered(12)).page_size(5).start();
    // Requests: 1 Identify, 2 page 1, 3 page 2 (GET: 414), 4 page 2 (POST: 302 to the mirror's
    // baseURL), 5 what follows the redirect.
    server.fault_on_request(3, Fault::UriTooLong);
    server.fault_on_request(4, Fault::Redirect("/mirror/oai".to_owned()));
    let (_root, out, _) = folders();
    let result = export_at(&server, &out, None).await;
    let log: Vec<(usize, String, String, u16)> = server
        .requests()
        .iter()
        .map(|s| (s.n, s.method.clone(), s.query.clone(), s.status))
        .collect();
    assert!(
        result.is_ok(),
        "{:?}\n{log:#?}",
        result.err().map(|e| e.to_string())
    );
}

/// a list that ends at the same place in two full harvests in a row is no passing cut
/// (a server whose completeListSize is always too high): the harvest after them follows the
/// schedule again (incremental here) instead of being full at every refresh; removals still
/// wait for a list that ends as announced.
#[tokio::test]
async fn a_list_short_at_the_same_place_twice_stops_forcing_full_harvests() {
    let server = TestServer::builder(numbered(15))
        .page_size(5)
        .deleted_record("persistent")
        .start();
    server.fault_on_page_always(2, Fault::PrematureEnd);
    let (_root, out, state) = folders();
    let mut kinds = Vec::new();
    for _ in 0..3 {
        let summary = export_at(&server, &out, Some(&state)).await.unwrap();
        let run = summary.run.unwrap();
        kinds.push((run.kind, run.short.map(|s| s.repeated), run.removed));
    }
    assert_eq!(
        kinds,
        [
            (Kind::Full, Some(false), 0),
            (Kind::Full, Some(false), 0),
            (Kind::Incremental, None, 0)
        ]
    );
    let short = Store::open(&state.join(STORE_FILE))
        .unwrap()
        .state()
        .unwrap()
        .short_list
        .unwrap();
    assert!(short.repeated, "{short:?}");
}
