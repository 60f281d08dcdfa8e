//! Harvesting through faults: the local repository (`crate::server`) misbehaves in one way per
//! test, and the harvest must end with every record or with an error an operator can act on.
//! Rule ids (OAI-xx, Q-xx, I-xx) are those of docs/conformance.md.
//!
//! Time is only ever bounded from below, from the server's request log: a retry came no earlier
//! than it was told to. Settings keep backoffs at milliseconds so the whole module runs in a few
//! seconds.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use oai_bridge::Datestamp;
use oai_bridge::Job;
use oai_bridge::Limits;
use oai_bridge::MARKER;
use oai_bridge::{
    Client, HarvestError, HarvestErrorKind, HarvestReport, HarvestRequest, HarvestSettings, Source,
    harvest,
};
use oai_bridge::{DcElement, Fields, Record};
use oai_bridge::{Error, ExportOptions, ExportSummary, export};
use url::Url;

use crate::server::{
    Compression, Fault, FinalToken, Granularity, RetryAfter, Seen, TestRecord, TestServer, numbered,
};

/// The landing pages of [`numbered`] records live here; exports use it as their scope.
pub(crate) const SCOPE: &str = "https://repo.example/";
/// Where exported sitemaps would be served.
pub(crate) const PUBLIC_URL: &str = "https://sitemaps.example/repo/";

/// Millisecond backoffs, a few attempts, generous timeouts.
pub(crate) fn fast() -> HarvestSettings {
    HarvestSettings {
        user_agent: "oai-bridge-tests (mailto:tests@repo.example)".to_owned(),
        request_timeout: Duration::from_secs(20),
        connect_timeout: Duration::from_secs(5),
        max_attempts: 3,
        backoff_initial: Duration::from_millis(10),
        backoff_max: Duration::from_millis(40),
        retry_after_max: Duration::from_secs(5),
        politeness_delay: Duration::ZERO,
        deadline: None,
        max_body_bytes: 1 << 20,
        max_empty_pages: 10,
        min_transfer_bytes_per_sec: 1024,
        min_transfer_window: Duration::from_secs(30),
        headers: Default::default(),
        diagnose_command: Some("oai-bridge check".to_owned()),
    }
}

fn whole_repository(server: &TestServer) -> HarvestRequest {
    HarvestRequest {
        source: Source::Oai(server.base_url()),
        sets: Vec::new(),
        from: None,
        until: None,
        fields: Default::default(),
    }
}

/// What a harvest returned, and every record it handed out.
struct Harvest {
    result: Result<HarvestReport, HarvestError>,
    records: Vec<Record>,
}

impl Harvest {
    #[track_caller]
    fn ok(self) -> (HarvestReport, Vec<Record>) {
        match self.result {
            Ok(report) => (report, self.records),
            Err(e) => panic!("the harvest failed: {e}"),
        }
    }

    #[track_caller]
    fn err(self) -> HarvestError {
        match self.result {
            Ok(report) => panic!(
                "the harvest succeeded ({} records, {} pages); an error was expected",
                report.records, report.pages
            ),
            Err(e) => e,
        }
    }
}

/// A client with `settings`; tests that harvest several servers alike share one, as the
/// bridge shares one per upstream.
fn client(settings: HarvestSettings) -> Client {
    Client::new(settings).expect("an HTTP client")
}

async fn run_on(client: &Client, request: &HarvestRequest) -> Harvest {
    let mut records = Vec::new();
    let result = harvest(client, request, |page| records.extend(page.records)).await;
    Harvest { result, records }
}

async fn run(settings: HarvestSettings, request: &HarvestRequest) -> Harvest {
    run_on(&client(settings), request).await
}

async fn run_all(server: &TestServer, settings: HarvestSettings) -> Harvest {
    run(settings, &whole_repository(server)).await
}

fn ids(records: &[Record]) -> Vec<String> {
    records.iter().map(|r| r.identifier.clone()).collect()
}

fn expected_ids(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("oai:test:{i}")).collect()
}

/// The first request that met a fault, and the request after it, which must re-send the very
/// same query (OAI-25: re-issuing a token is idempotent).
#[track_caller]
fn faulted_and_retry(server: &TestServer) -> (Seen, Seen) {
    let log = server.requests();
    let i = log
        .iter()
        .position(|s| s.fault.is_some())
        .expect("a fault was applied");
    let retry = log
        .get(i + 1)
        .cloned()
        .unwrap_or_else(|| panic!("no request after the fault {:?}", log[i].fault));
    assert_eq!(
        retry.query, log[i].query,
        "the retry re-sends the same request"
    );
    (log[i].clone(), retry)
}

// --- Resumption tokens -------------------------------------------------------------------

#[tokio::test]
async fn follow_ups_carry_only_the_verb_and_the_token_encoded_once() {
    // OAI-03: a follow-up carries `verb` and `resumptionToken` only (the server answers
    // badArgument otherwise). OAI-05: the token's `=`, `|`, `/`, `+` and space are
    // percent-encoded exactly once (the server decodes `+` as a space, as many do). OAI-23: the
    // token goes back as it came, never parsed or rebuilt. Q-27: the tokens carry no
    // expirationDate (EPrints), and nothing waits for one.
    let server = TestServer::builder(numbered(12)).page_size(5).start();
    let (report, records) = run_all(&server, fast()).await.ok();
    assert_eq!(ids(&records), expected_ids(12));
    assert_eq!(report.pages, 3);
    let log = server.requests();
    assert!(
        log.iter()
            .all(|s| s.method == "GET" && s.target == format!("/oai?{}", s.query))
    );
    let queries: Vec<&str> = log.iter().map(|s| s.query.as_str()).collect();
    assert_eq!(
        queries,
        [
            "verb=Identify",
            "verb=ListRecords&metadataPrefix=oai_dc",
            "verb=ListRecords&resumptionToken=p%3D2%7Ck%2F1%2By%20z",
            "verb=ListRecords&resumptionToken=p%3D3%7Ck%2F2%2By%20z",
        ]
    );
    // Each follow-up returns, decoded, exactly the token the previous answer carried.
    for pair in log[1..].windows(2) {
        assert_eq!(pair[1].arg("resumptionToken"), pair[0].token);
    }
}

#[tokio::test]
async fn a_pretty_printed_token_is_trimmed() {
    // OAI-23, Q-20: newlines and indentation around the token text are layout, not token.
    let server = TestServer::builder(numbered(7))
        .page_size(5)
        .pad_tokens()
        .start();
    let (_, records) = run_all(&server, fast()).await.ok();
    assert_eq!(ids(&records), expected_ids(7));
    assert_eq!(
        server.list_requests()[1].query,
        "verb=ListRecords&resumptionToken=p%3D2%7Ck%2F1%2By%20z"
    );
}

#[tokio::test]
async fn the_list_ends_at_an_empty_blank_or_missing_token() {
    // OAI-21: the last page carries an empty token element (here with completeListSize and
    // cursor attributes); whitespace only is empty; no token element at all also ends the list
    // . Nothing is requested after the last page.
    let client = client(fast());
    for final_token in [
        FinalToken::Empty,
        FinalToken::Whitespace,
        FinalToken::Missing,
    ] {
        let server = TestServer::builder(numbered(12))
            .page_size(5)
            .final_token(final_token)
            .start();
        let (_, records) = run_on(&client, &whole_repository(&server)).await.ok();
        assert_eq!(ids(&records), expected_ids(12), "{final_token:?}");
        let pages: Vec<Option<u64>> = server.list_requests().iter().map(|s| s.page).collect();
        assert_eq!(pages, [Some(1), Some(2), Some(3)], "{final_token:?}");
    }
}

#[tokio::test]
async fn complete_list_size_and_cursor_are_only_hints() {
    // OAI-22: completeListSize may be an estimate and cursor may not advance; only the empty
    // token ends the list. The server claims a size (too small, then too large) with cursor="0"
    // on every page.
    let client = client(fast());
    for claimed in [3, 1000] {
        let server = TestServer::builder(numbered(12))
            .page_size(5)
            .claim_complete_list_size(claimed)
            .start();
        let (_, records) = run_on(&client, &whole_repository(&server)).await.ok();
        assert_eq!(
            ids(&records),
            expected_ids(12),
            "completeListSize={claimed}"
        );
        assert_eq!(
            server.list_requests().len(),
            3,
            "completeListSize={claimed}"
        );
    }
}

// --- Flow control and retries --------------------------------------------------------------

/// Harvests two repositories at once, one answering page 2 with a 503, the other with a 429,
/// both saying `retry_after`; checks every record arrived and returns, per status, the request
/// told to wait and its retry.
async fn told_to_wait(retry_after: RetryAfter) -> [(u16, Seen, Seen); 2] {
    let unavailable = TestServer::builder(numbered(12)).page_size(5).start();
    unavailable.fault_on_page(2, Fault::Unavailable(retry_after.clone()));
    let too_many = TestServer::builder(numbered(12)).page_size(5).start();
    too_many.fault_on_page(2, Fault::TooManyRequests(retry_after));
    let client = client(fast());
    let (first, second) = (whole_repository(&unavailable), whole_repository(&too_many));
    let (a, b) = tokio::join!(run_on(&client, &first), run_on(&client, &second));
    for harvested in [a, b] {
        assert_eq!(ids(&harvested.ok().1), expected_ids(12));
    }
    [(503, &unavailable), (429, &too_many)].map(|(status, server)| {
        let (told, retry) = faulted_and_retry(server);
        assert_eq!((told.status, told.page), (status, Some(2)));
        (status, told, retry)
    })
}

#[tokio::test]
async fn retry_after_in_seconds_is_honoured_on_503_and_429() {
    // OAI-33, Q-31: wait at least as long as `Retry-After` says, then re-send the same request.
    for (status, told, retry) in told_to_wait(RetryAfter::Seconds(1)).await {
        assert_eq!(told.retry_after.as_deref(), Some("1"));
        let waited = retry.at.duration_since(told.at);
        assert!(
            waited >= Duration::from_secs(1),
            "{status}: retried after {waited:?}, told 1 s"
        );
    }
}

#[tokio::test]
async fn retry_after_as_an_http_date_is_honoured_on_503_and_429() {
    // OAI-33: `Retry-After` may be an HTTP-date (RFC 9110 §10.2.3); Sickle and pyoai only read
    // integers. The retry must not arrive before that date.
    let ahead = Duration::from_millis(500);
    for (status, told, retry) in told_to_wait(RetryAfter::Date(ahead)).await {
        let date = told.retry_after.as_deref().expect("a Retry-After date");
        let not_before = httpdate::parse_http_date(date).expect("an HTTP-date");
        assert!(
            retry.wall >= not_before,
            "{status}: retried at {:?}, told not before {date}",
            retry.wall
        );
    }
}

#[tokio::test]
async fn retry_after_is_capped_by_retry_after_max() {
    // OAI-33: a `Retry-After` of an hour is cut to retry_after_max. Were it not, the wait would
    // run past the deadline and the harvest would fail with Deadline; so success proves the cap
    // without bounding time from above.
    let server = TestServer::builder(numbered(7)).page_size(5).start();
    server.fault_on_page(2, Fault::Unavailable(RetryAfter::Seconds(3600)));
    let settings = HarvestSettings {
        retry_after_max: Duration::from_millis(100),
        deadline: Some(Duration::from_secs(60)),
        ..fast()
    };
    let (_, records) = run_all(&server, settings).await.ok();
    assert_eq!(ids(&records), expected_ids(7));
    let (told, retry) = faulted_and_retry(&server);
    assert!(retry.at.duration_since(told.at) >= Duration::from_millis(100));
}

#[tokio::test]
async fn a_missing_or_unreadable_retry_after_falls_back_to_backoff() {
    // OAI-33: a 503 without `Retry-After`, or with `Retry-After: soon`, gives no instruction;
    // the exponential backoff applies.
    let settings = fast();
    let backoff = settings.backoff_initial;
    let client = client(settings);
    for retry_after in [RetryAfter::Missing, RetryAfter::Raw("soon".to_owned())] {
        let server = TestServer::builder(numbered(7)).page_size(5).start();
        server.fault_on_page(2, Fault::Unavailable(retry_after.clone()));
        let (_, records) = run_on(&client, &whole_repository(&server)).await.ok();
        assert_eq!(ids(&records), expected_ids(7), "{retry_after:?}");
        let (told, retry) = faulted_and_retry(&server);
        assert!(
            retry.at.duration_since(told.at) >= backoff,
            "{retry_after:?}"
        );
    }
}

#[tokio::test]
async fn a_slow_response_times_out_and_is_retried_with_the_same_token() {
    // OAI-25: past request_timeout the request is abandoned and the same token re-sent. The
    // backoff (100 ms) is larger than any delay between the client starting its timer and the
    // server seeing the request, so the gap is at least the timeout.
    let server = TestServer::builder(numbered(12)).page_size(5).start();
    server.fault_on_page(2, Fault::Delay(Duration::from_secs(5)));
    let settings = HarvestSettings {
        request_timeout: Duration::from_millis(300),
        backoff_initial: Duration::from_millis(100),
        backoff_max: Duration::from_millis(100),
        ..fast()
    };
    let (_, records) = run_all(&server, settings).await.ok();
    assert_eq!(ids(&records), expected_ids(12));
    let (slow, retry) = faulted_and_retry(&server);
    assert_eq!(slow.page, Some(2));
    assert!(retry.at.duration_since(slow.at) >= Duration::from_millis(300));
}

#[tokio::test]
async fn a_dropped_connection_is_retried_with_the_same_token() {
    // OAI-25: no answer at all (the connection closed after the request) is transient.
    let server = TestServer::builder(numbered(12)).page_size(5).start();
    server.fault_on_page(2, Fault::DropConnection);
    let (_, records) = run_all(&server, fast()).await.ok();
    assert_eq!(ids(&records), expected_ids(12));
    let (dropped, _) = faulted_and_retry(&server);
    assert_eq!((dropped.page, dropped.status), (Some(2), 0));
}

#[tokio::test]
async fn a_truncated_body_is_retried_with_the_same_token() {
    // OAI-50, Q-14: Content-Length announces more than arrives before the connection closes.
    let server = TestServer::builder(numbered(12)).page_size(5).start();
    server.fault_on_page(3, Fault::TruncateBody);
    let (_, records) = run_all(&server, fast()).await.ok();
    assert_eq!(ids(&records), expected_ids(12));
    let (cut, _) = faulted_and_retry(&server);
    assert_eq!(cut.page, Some(3));
}

#[tokio::test]
async fn http_500_is_retried_with_the_same_token() {
    // DataCite and Dataverse answer 500 on some resumptions; the next try may pass.
    let server = TestServer::builder(numbered(12)).page_size(5).start();
    server.fault_on_page_times(2, 2, Fault::Status(500));
    let (_, records) = run_all(&server, fast()).await.ok();
    assert_eq!(ids(&records), expected_ids(12));
    let tries = server.page_requests(2);
    assert_eq!(tries.len(), 3);
    assert!(tries.iter().all(|s| s.query == tries[0].query));
}

#[tokio::test]
async fn after_max_attempts_the_error_names_url_page_and_token() {
    // I-02, OAI-25: when the retries run out, the harvest fails with where it stopped.
    let server = TestServer::builder(numbered(12)).page_size(5).start();
    server.fault_on_page_always(3, Fault::Status(500));
    let err = run_all(&server, fast()).await.err();
    assert!(
        matches!(
            err.kind,
            HarvestErrorKind::Status {
                status: 500,
                attempts: 3
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.page, 3);
    assert_eq!(err.token.as_deref(), Some("p=3|k/2+y z"));
    assert_eq!(
        err.url,
        format!(
            "{}?verb=ListRecords&resumptionToken=p%3D3%7Ck%2F2%2By%20z",
            server.url()
        )
    );
    let text = err.to_string();
    for part in [err.url.as_str(), "page 3", "p=3|k/2+y z"] {
        assert!(text.contains(part), "{text:?} should name {part:?}");
    }
    assert_eq!(server.page_requests(3).len(), 3);
}

#[tokio::test]
async fn endless_503s_fail_after_max_attempts() {
    // OAI-33: waiting as told is bounded by the retry count too; a repository that answers 503
    // forever fails the harvest (I-02) instead of holding it.
    let server = TestServer::builder(numbered(12)).page_size(5).start();
    server.fault_on_page_always(2, Fault::Unavailable(RetryAfter::Seconds(0)));
    let err = run_all(&server, fast()).await.err();
    assert!(
        matches!(
            err.kind,
            HarvestErrorKind::Status {
                status: 503,
                attempts: 3
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.page, 2);
    assert_eq!(server.page_requests(2).len(), 3);
}

#[tokio::test]
async fn the_deadline_stops_waiting_for_a_retry() {
    // A Retry-After (30 s) that would run past the deadline (1 s) ends the harvest at once
    // rather than sleeping into it.
    let server = TestServer::builder(numbered(12)).page_size(5).start();
    server.fault_on_page_always(2, Fault::Unavailable(RetryAfter::Seconds(30)));
    let settings = HarvestSettings {
        retry_after_max: Duration::from_secs(60),
        deadline: Some(Duration::from_secs(1)),
        ..fast()
    };
    let err = run_all(&server, settings).await.err();
    assert!(
        matches!(err.kind, HarvestErrorKind::Deadline { .. }),
        "{err:?}"
    );
    assert_eq!(err.page, 2);
    assert_eq!(server.page_requests(2).len(), 1);
}

#[tokio::test]
async fn the_deadline_stops_a_harvest_between_pages() {
    // harvest.deadline bounds the whole harvest, not only retries: ten pages spaced by a 60 ms
    // politeness delay take more than 540 ms, far past a 250 ms deadline, even though every
    // request succeeds.
    let server = TestServer::builder(numbered(10)).page_size(1).start();
    let settings = HarvestSettings {
        politeness_delay: Duration::from_millis(60),
        deadline: Some(Duration::from_millis(250)),
        ..fast()
    };
    let err = run_all(&server, settings).await.err();
    assert!(
        matches!(err.kind, HarvestErrorKind::Deadline { .. }),
        "{err:?}"
    );
    assert!(server.list_requests().len() < 10);
}

#[tokio::test]
async fn the_deadline_cuts_a_slow_response() {
    // A response still coming when the deadline passes (request_timeout is much longer) ends
    // the harvest with Deadline.
    let server = TestServer::builder(numbered(12)).page_size(5).start();
    server.fault_on_page(2, Fault::Delay(Duration::from_secs(5)));
    let settings = HarvestSettings {
        request_timeout: Duration::from_secs(20),
        deadline: Some(Duration::from_millis(500)),
        ..fast()
    };
    let err = run_all(&server, settings).await.err();
    assert!(
        matches!(err.kind, HarvestErrorKind::Deadline { .. }),
        "{err:?}"
    );
    assert_eq!(err.page, 2);
}

#[tokio::test]
async fn the_politeness_delay_separates_consecutive_pages() {
    // OAI-52: sequential requests, at least politeness_delay apart.
    let server = TestServer::builder(numbered(12)).page_size(5).start();
    let delay = Duration::from_millis(80);
    let settings = HarvestSettings {
        politeness_delay: delay,
        ..fast()
    };
    let (_, records) = run_all(&server, settings).await.ok();
    assert_eq!(records.len(), 12);
    let pages = server.list_requests();
    assert_eq!(pages.len(), 3);
    for pair in pages.windows(2) {
        let gap = pair[1].at.duration_since(pair[0].at);
        assert!(
            gap >= delay,
            "requests {} and {} only {gap:?} apart",
            pair[0].n,
            pair[1].n
        );
    }
}

#[tokio::test]
async fn the_politeness_delay_also_follows_identify() {
    // OAI-52 and the setting's own definition ("pause between consecutive requests to the same
    // upstream"): Identify is a request too, so the first ListRecords waits after it.
    let server = TestServer::builder(numbered(3)).start();
    let delay = Duration::from_millis(80);
    let settings = HarvestSettings {
        politeness_delay: delay,
        ..fast()
    };
    run_all(&server, settings).await.ok();
    let log = server.requests();
    assert_eq!(log[0].verb.as_deref(), Some("Identify"));
    let gap = log[1].at.duration_since(log[0].at);
    assert!(
        gap >= delay,
        "ListRecords came {gap:?} after Identify; the politeness delay is {delay:?}"
    );
}

#[tokio::test]
async fn every_request_names_the_configured_user_agent() {
    // OAI-52, Q-29: a descriptive User-Agent with a contact, on every request (some servers
    // refuse library defaults).
    let server = TestServer::builder(numbered(7)).page_size(5).start();
    let settings = fast();
    let agent = settings.user_agent.clone();
    run_all(&server, settings).await.ok();
    let log = server.requests();
    assert_eq!(log.len(), 3);
    assert!(
        log.iter()
            .all(|s| s.user_agent.as_deref() == Some(agent.as_str()))
    );
}

#[tokio::test]
async fn identify_naming_another_base_url_changes_nothing() {
    // OAI-15: Identify's baseURL differs from the configured one (http vs https, another host):
    // a warning at most; every request still goes to the configured URL.
    let server = TestServer::builder(numbered(7))
        .page_size(5)
        .identify_base_url("https://mirror.repo.example/oai/")
        .start();
    let (report, records) = run_all(&server, fast()).await.ok();
    assert_eq!(ids(&records), expected_ids(7));
    assert_eq!(report.identify.base_url, "https://mirror.repo.example/oai/");
    assert_eq!(server.list_requests().len(), 2);
}

#[tokio::test]
async fn the_first_response_date_is_the_servers_clock() {
    // OAI-10: the responseDate of the first ListRecords page (the server's clock, not ours) is
    // kept for the next incremental harvest.
    let server = TestServer::builder(numbered(7))
        .page_size(5)
        .response_date("2031-02-03T04:05:06Z")
        .start();
    let (report, _) = run_all(&server, fast()).await.ok();
    assert_eq!(
        report.first_response_date.as_deref(),
        Some("2031-02-03T04:05:06Z")
    );
}

// --- Guards --------------------------------------------------------------------------------

#[tokio::test]
async fn a_repeated_token_is_a_token_loop_error() {
    // OAI-28, Q-02: the server answers page 2 with the token that asked for it, forever. The
    // harvest stops on the first repeat instead of filling the disk.
    let server = TestServer::builder(numbered(12)).page_size(5).start();
    server.fault_on_page_always(2, Fault::TokenLoop);
    let err = run_all(&server, fast()).await.err();
    assert!(
        matches!(&err.kind, HarvestErrorKind::TokenLoop { token } if token == "p=2|k/1+y z"),
        "{err:?}"
    );
    assert_eq!(err.page, 2);
    assert_eq!(server.list_requests().len(), 2);
}

#[tokio::test]
async fn fewer_empty_pages_than_the_limit_are_followed() {
    // OAI-29: pages [5 records, 0 records + token, 5 records, empty token] give 10 records. A
    // harvester that stops at the first empty page (pyoai's loop) loses the second half.
    let server = TestServer::builder(numbered(10)).page_size(5).start();
    server.fault_on_page(2, Fault::EmptyPage);
    let (report, records) = run_all(&server, fast()).await.ok();
    assert_eq!(ids(&records), expected_ids(10));
    assert_eq!(report.pages, 3);
}

#[tokio::test]
async fn exactly_max_empty_pages_in_a_row_are_followed() {
    // OAI-29: the limit counts empty pages in a row; reaching it is still fine.
    let server = TestServer::builder(numbered(10)).page_size(5).start();
    server.fault_on_page_times(2, 3, Fault::EmptyPage);
    let settings = HarvestSettings {
        max_empty_pages: 3,
        ..fast()
    };
    let (_, records) = run_all(&server, settings).await.ok();
    assert_eq!(ids(&records), expected_ids(10));
    assert_eq!(server.list_requests().len(), 5);
}

#[tokio::test]
async fn more_empty_pages_than_the_limit_are_an_error() {
    // OAI-29: an endless run of empty pages, each with a fresh token, fails after
    // max_empty_pages instead of paging forever.
    let server = TestServer::builder(numbered(10)).page_size(5).start();
    server.fault_on_page_always(2, Fault::EmptyPage);
    let settings = HarvestSettings {
        max_empty_pages: 3,
        ..fast()
    };
    let err = run_all(&server, settings).await.err();
    assert!(
        matches!(err.kind, HarvestErrorKind::EmptyPages { count: 4 }),
        "{err:?}"
    );
    assert_eq!(server.list_requests().len(), 5);
}

#[tokio::test]
async fn no_records_match_on_the_first_request_is_an_empty_result() {
    // OAI-31: noRecordsMatch answering the first request is an empty list, not a failure.
    let server = TestServer::start(numbered(5));
    let request = HarvestRequest {
        from: Datestamp::parse("2030-01-01"),
        ..whole_repository(&server)
    };
    let (report, records) = run(fast(), &request).await.ok();
    assert!(records.is_empty());
    assert_eq!(report.records, 0);
    let lists = server.list_requests();
    assert_eq!(lists.len(), 1);
    assert_eq!(lists[0].arg("from").as_deref(), Some("2030-01-01"));
}

#[tokio::test]
async fn no_records_match_answering_a_token_ends_the_list() {
    // OAI-29, Q-03: InvenioRDM sends a token on the last full page and answers its follow-up
    // with noRecordsMatch; that is the end of the list, with what was harvested so far.
    let server = TestServer::builder(numbered(15)).page_size(5).start();
    server.fault_on_page(3, Fault::oai("noRecordsMatch", "no more records"));
    let (_, records) = run_all(&server, fast()).await.ok();
    assert_eq!(ids(&records), expected_ids(10));
    assert_eq!(server.list_requests().len(), 3);
}

#[tokio::test]
async fn bad_resumption_token_mid_list_is_a_typed_error() {
    // OAI-27: badResumptionToken (expired) is not an end of list. The list is started again
    // (MAX_RESTARTS times); when the token keeps failing, the harvest fails with the code, the
    // server's message, the URL and the page; nothing is published (I-02).
    // Newest first: no datestamp order to restart from, so each restart is a whole list.
    let mut records = numbered(15);
    records.reverse();
    let server = TestServer::builder(records).page_size(5).start();
    server.fault_on_page_always(3, Fault::bad_resumption_token());
    let err = run_all(&server, fast()).await.err();
    let restarts = oai_bridge::MAX_RESTARTS as usize;
    assert_eq!(server.list_requests().len(), 3 * (restarts + 1));
    match &err.kind {
        HarvestErrorKind::Oai { code, message } => {
            assert_eq!(code, "badResumptionToken");
            assert_eq!(
                message,
                "The value of the resumptionToken argument is invalid or expired."
            );
        }
        other => panic!("expected an OAI error, got {other:?}"),
    }
    assert_eq!(err.page, 3);
    // The last list's token (two tokens issued per list).
    assert_eq!(err.token, Some(format!("p=3|k/{}+y z", 2 * (restarts + 1))));
    assert_eq!(
        err.url,
        format!(
            "{}?{}",
            server.url(),
            server.page_requests(3).last().unwrap().query
        )
    );
    let text = err.to_string();
    for part in [err.url.as_str(), "page 3", "badResumptionToken"] {
        assert!(text.contains(part), "{text:?} should name {part:?}");
    }
}

#[tokio::test]
async fn other_oai_errors_are_typed_errors_with_code_message_url_and_page() {
    // OAI-30, OAI-31, OAI-32: each code, standard or not (`undefinedError`, as in sickle's
    // fixtures), arrives in a 200 body and fails the harvest as itself, without retries.
    let client = client(fast());
    for (page, code) in [
        (1, "cannotDisseminateFormat"),
        (1, "badArgument"),
        (1, "noSetHierarchy"),
        (2, "badVerb"),
        (2, "undefinedError"),
    ] {
        let server = TestServer::builder(numbered(7)).page_size(5).start();
        server.fault_on_page(page, Fault::oai(code, "told by the test"));
        let err = run_on(&client, &whole_repository(&server)).await.err();
        assert!(
            matches!(&err.kind, HarvestErrorKind::Oai { code: c, message }
                if c == code && message == "told by the test"),
            "{code}: {err:?}"
        );
        assert_eq!(err.page, page, "{code}");
        let tries = server.page_requests(page);
        assert_eq!(
            tries.len(),
            1,
            "{code}: an OAI error is an answer, not retried"
        );
        assert_eq!(err.url, format!("{}?{}", server.url(), tries[0].query));
    }
}

// --- Bad bodies ----------------------------------------------------------------------------

#[tokio::test]
async fn an_html_page_with_status_200_is_an_error_naming_the_url() {
    // OAI-07, Q-13: a maintenance page is never "0 records". Served with 200 it is what the
    // server serves at that URL, not a passing fault (a proxy's hiccup comes with a 5xx): the
    // harvest fails at once (issue 22), naming the URL, what came back, and how to look.
    let server = TestServer::builder(numbered(12)).page_size(5).start();
    server.fault_on_page_always(2, Fault::HtmlPage);
    let err = run_all(&server, fast()).await.err();
    assert!(
        matches!(
            &err.kind,
            HarvestErrorKind::Parse { source, .. }
                if matches!(**source, HarvestErrorKind::NotOai { .. })
        ),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains(&err.url), "{text}");
    assert!(text.contains(&server.url()), "{text}");
    assert!(text.contains("HTML page"), "{text}");
    assert!(text.contains("page 2"), "{text}");
    let hint = format!("run `oai-bridge check {}`", server.url());
    assert!(text.contains(&hint), "{text}");
    assert_eq!(server.page_requests(2).len(), 1);
}

#[tokio::test]
async fn a_refusal_fails_at_once_and_a_server_error_is_retried() {
    // Issue 22: a 401, 403, 404 or 410 (a login wall, a moved endpoint) and a lasting 5xx
    // (501) come back the same however often asked: one request, and an error naming the
    // URL, the page, the token and `check`. A 500, 502, 504 and 408 may pass: retried up to
    // max_attempts (3 in these settings).
    let client = client(fast());
    for (status, requests) in [
        (401, 1),
        (403, 1),
        (404, 1),
        (410, 1),
        (501, 1),
        (500, 3),
        (502, 3),
        (504, 3),
        (408, 3),
    ] {
        let server = TestServer::builder(numbered(12)).page_size(5).start();
        server.fault_on_page_always(3, Fault::Status(status));
        let err = run_on(&client, &whole_repository(&server)).await.err();
        assert!(
            matches!(err.kind, HarvestErrorKind::Status { status: s, attempts } if s == status && attempts == requests),
            "{status}: {err:?}"
        );
        assert_eq!(server.page_requests(3).len() as u32, requests, "{status}");
        let text = err.to_string();
        for part in [
            err.url.as_str(),
            "page 3",
            "p=3|k/2+y z",
            &format!("run `oai-bridge check {}`", server.url()),
        ] {
            assert!(text.contains(part), "{text:?} should name {part:?}");
        }
    }
}

#[tokio::test]
async fn a_login_page_at_identify_fails_at_once() {
    // Issue 22: the first request meets the page; nothing is retried or harvested.
    let server = TestServer::builder(numbered(12)).page_size(5).start();
    server.fault_on_request(1, Fault::HtmlPage);
    let err = run_all(&server, fast()).await.err();
    assert_eq!(err.page, 0);
    assert_eq!(server.requests().len(), 1);
    assert!(err.to_string().contains("(Identify)"), "{err}");
    assert!(err.to_string().contains("oai-bridge check"), "{err}");
}

#[tokio::test]
async fn a_utf8_bom_is_skipped() {
    // OAI-48, Q-10: a BOM before the XML declaration, on Identify and every page.
    let server = TestServer::builder(numbered(7)).page_size(5).start();
    server.fault_always(Fault::Bom);
    let (_, records) = run_all(&server, fast()).await.ok();
    assert_eq!(ids(&records), expected_ids(7));
    assert!(
        server
            .requests()
            .iter()
            .all(|s| s.fault == Some(Fault::Bom))
    );
}

#[tokio::test]
async fn illegal_xml_characters_are_removed_and_counted_but_never_tab_lf_cr() {
    // OAI-46, Q-08: a raw U+001A (TreeBASE) and `&#xFFFE;` (DSpace) in a title are removed and
    // counted, and the record is kept. The same title holds a raw TAB, LF, CR and `&#x9;`, which
    // XML allows: a count of exactly 2 shows they were left alone (metha strips TAB).
    let server = TestServer::builder(numbered(7)).page_size(5).start();
    server.fault_on_page(1, Fault::IllegalChars);
    let (report, records) = run_all(&server, fast()).await.ok();
    assert_eq!(ids(&records), expected_ids(7));
    assert_eq!(records[0].dc_identifiers, ["https://repo.example/record/1"]);
    assert_eq!(report.quirks.illegal_chars_removed, 2);
}

/// A page (or, with `identify`, an Identify answer) whose DTD declares an external entity
/// pointing at /etc/passwd, used in a title and a dc:identifier.
fn xxe_body(base: &str, identify: bool) -> String {
    let inner = if identify {
        "<Identify><repositoryName>&e;</repositoryName><baseURL>&e;</baseURL>\
         <protocolVersion>2.0</protocolVersion><adminEmail>a@repo.example</adminEmail>\
         <earliestDatestamp>2024-05-01</earliestDatestamp><deletedRecord>no</deletedRecord>\
         <granularity>YYYY-MM-DD</granularity></Identify>"
            .to_owned()
    } else {
        "<ListRecords><record><header><identifier>oai:test:1</identifier>\
         <datestamp>2024-05-01</datestamp></header><metadata>\
         <oai_dc:dc xmlns:oai_dc=\"http://www.openarchives.org/OAI/2.0/oai_dc/\" \
         xmlns:dc=\"http://purl.org/dc/elements/1.1/\"><dc:title>&e;</dc:title>\
         <dc:identifier>https://repo.example/&e;</dc:identifier></oai_dc:dc></metadata>\
         </record></ListRecords>"
            .to_owned()
    };
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <!DOCTYPE x [<!ENTITY e SYSTEM \"file:///etc/passwd\">]>\n\
         <OAI-PMH xmlns=\"http://www.openarchives.org/OAI/2.0/\">\
         <responseDate>2024-06-01T12:00:00Z</responseDate><request>{base}</request>{inner}</OAI-PMH>\n"
    )
}

#[tokio::test]
async fn a_dtd_with_an_external_entity_is_never_loaded() {
    // OAI-09: responses stand alone; an external entity is never resolved (XXE), and an
    // undefined one is an error. Checked on both parsers: Identify and a ListRecords page.
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let first_line = passwd.lines().next().unwrap_or("root:x:0:0:");
    let client = client(fast());
    for identify in [true, false] {
        let server = TestServer::builder(numbered(3)).start();
        let body = xxe_body(&server.url(), identify);
        if identify {
            server.fault_on_request(1, Fault::Body(body));
        } else {
            server.fault_on_page_always(1, Fault::Body(body));
        }
        let harvested = run_on(&client, &whole_repository(&server)).await;
        let leaked = harvested
            .records
            .iter()
            .flat_map(|r| r.dc_identifiers.iter().chain([&r.identifier]))
            .any(|v| v.contains("root:") || v.contains(first_line));
        assert!(!leaked, "identify={identify}: {:?}", harvested.records);
        let err = harvested.err();
        assert!(
            matches!(err.kind, HarvestErrorKind::Parse { .. }),
            "identify={identify}: {err:?}"
        );
        assert_eq!(err.page, u64::from(!identify));
        let text = format!("{err} {err:?}");
        assert!(
            !text.contains(first_line) && !text.contains("root:x"),
            "identify={identify}: {text}"
        );
    }
}

#[tokio::test]
async fn a_body_over_max_body_bytes_is_an_error() {
    // OAI-51: the cap holds whether the length is announced (Content-Length) or not (a body
    // delimited by closing the connection). The Identify answer (under 1 KiB) fits; a page of
    // ten records (over 4 KiB) does not.
    let client = client(HarvestSettings {
        max_body_bytes: 2048,
        ..fast()
    });
    for fault in [None, Some(Fault::NoContentLength)] {
        let server = TestServer::builder(numbered(10)).page_size(10).start();
        if let Some(fault) = &fault {
            server.fault_on_page_always(1, fault.clone());
        }
        let err = run_on(&client, &whole_repository(&server)).await.err();
        assert!(
            matches!(err.kind, HarvestErrorKind::TooLarge { limit: 2048 }),
            "{fault:?}: {err:?}"
        );
        assert_eq!(err.page, 1, "{fault:?}");
    }
}

#[tokio::test]
async fn https_namespace_spellings_give_identical_output() {
    // OAI-43, Q-16: https:// spellings of the OAI, oai_dc and DC namespaces (DSpace/xoai #71)
    // are accepted, counted, and give byte-identical sitemaps. G-04: accepted on input (as
    // Google's migrated sample spells them), never emitted.
    let plain = TestServer::builder(numbered(7)).page_size(5).start();
    let https = TestServer::builder(numbered(7)).page_size(5).start();
    https.fault_always(Fault::HttpsNamespaces);
    let root = tempfile::tempdir().unwrap();
    let plain_out = root.path().join("plain");
    let https_out = root.path().join("https");
    let plain_summary = export_to(&plain, &plain_out).await.unwrap();
    let https_summary = export_to(&https, &https_out).await.unwrap();
    assert_eq!(plain_summary.built.stats.urls, 7);
    assert_eq!(https_summary.built.stats, plain_summary.built.stats);
    assert_eq!(snapshot(&https_out), snapshot(&plain_out));
    assert_eq!(plain_summary.built.report.quirks.https_namespaces, 0);
    assert!(https_summary.built.report.quirks.https_namespaces > 0);
}

// --- Records to sitemap entries ------------------------------------------------------------

#[tokio::test]
async fn deleted_records_publish_nothing_and_datestamps_become_lastmod() {
    // OAI-39: a record whose newest version is deleted publishes nothing, also when its deleted
    // header still carries metadata (oai:test:4). OAI-38, Q-06: oai:test:3 is live on page 2 and
    // deleted on page 3; the newer, deleted version wins. OAI-20: the datestamp is the lastmod,
    // in the form it was given (SM-13). G-02: the loc is the record's dc:identifier.
    let records = vec![
        TestRecord::new("oai:test:1", "2024-05-02T10:11:12Z").url("https://repo.example/record/1"),
        TestRecord::new("oai:test:2", "2024-05-03").url("https://repo.example/record/2"),
        TestRecord::new("oai:test:3", "2024-05-01T00:00:00Z").url("https://repo.example/record/3"),
        TestRecord::new("oai:test:4", "2024-05-04T00:00:00Z")
            .url("https://repo.example/record/4")
            .deleted(),
        TestRecord::new("oai:test:3", "2024-05-09T08:00:00Z").deleted(),
    ];
    let server = TestServer::builder(records)
        .page_size(2)
        .granularity(Granularity::Seconds)
        .start();
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("out");
    let summary = export_to(&server, &out).await.unwrap();
    assert_eq!(server.list_requests().len(), 3);
    let sitemap = std::fs::read_to_string(out.join("sitemap-1.xml")).unwrap();
    assert!(
        sitemap.contains(
            "<url><loc>https://repo.example/record/1</loc><lastmod>2024-05-02T10:11:12Z</lastmod></url>"
        ),
        "{sitemap}"
    );
    assert!(
        sitemap.contains(
            "<url><loc>https://repo.example/record/2</loc><lastmod>2024-05-03</lastmod></url>"
        ),
        "{sitemap}"
    );
    assert!(!sitemap.contains("record/3"), "{sitemap}");
    assert!(!sitemap.contains("record/4"), "{sitemap}");
    assert_eq!(summary.built.stats.urls, 2);
    assert_eq!(summary.built.stats.deleted, 2);
}

// --- Exports -------------------------------------------------------------------------------

pub(crate) fn job(server: &TestServer) -> Job {
    Job {
        request: whole_repository(server),
        scope: vec![Url::parse(SCOPE).unwrap()],
        landing: Default::default(),
        limits: Limits::default(),
        gzip: false,
        profiles: Default::default(),
        public_url: Url::parse(PUBLIC_URL).unwrap(),
        spill_dir: None,
    }
}

async fn export_to(server: &TestServer, out: &Path) -> Result<ExportSummary, Error> {
    export(&ExportOptions {
        job: job(server),
        harvest: fast(),
        out: out.to_owned().into(),
        publish: Default::default(),
        progress: false,
        state: None,
        state_db: None,
        policy: Default::default(),
    })
    .await
}

/// Every file of a folder (flat, as exports are) with its bytes.
pub(crate) fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            (
                entry.file_name().to_string_lossy().into_owned(),
                std::fs::read(entry.path()).unwrap(),
            )
        })
        .collect()
}

/// A folder as a previous export left it.
fn previous_export(out: &Path) {
    std::fs::create_dir_all(out).unwrap();
    std::fs::write(out.join(MARKER), "written by an earlier export\n").unwrap();
    std::fs::write(
        out.join("sitemap.xml"),
        "<sitemapindex>previous</sitemapindex>\n",
    )
    .unwrap();
    std::fs::write(out.join("sitemap-1.xml"), "<urlset>previous</urlset>\n").unwrap();
}

/// `export` arguments for `server` into `out`, with fast retries, then `extra`.
fn export_args(server: &TestServer, out: &Path, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "export",
        "--base-url",
        &server.url(),
        "--out",
        &out.to_string_lossy(),
        "--public-url",
        PUBLIC_URL,
        "--no-progress",
        "--max-attempts",
        "2",
        "--backoff-initial",
        "10",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// Runs the real binary in a blocking thread, so this runtime keeps serving the test server.
async fn bridge(args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || {
        let mut command = crate::golden::bridge();
        command.args(&args);
        for var in [
            "OAI_BRIDGE_CONFIG",
            "OAI_BRIDGE_PUBLIC_URL",
            "OAI_BRIDGE_USER_AGENT",
            "OAI_BRIDGE_LOG_FORMAT",
            "RUST_LOG",
        ] {
            command.env_remove(var);
        }
        command.output().expect("run oai-bridge")
    })
    .await
    .expect("the process thread")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `export -q` is for cron: a run that succeeds prints nothing at all, on stdout or stderr,
/// even when the harvest met what the log warns of (a 503 retried); `--json` still prints the
/// summary it asks for; a run that fails still says why, on stderr, and exits 1.
#[tokio::test]
async fn a_quiet_export_prints_nothing_unless_it_fails() {
    let server = TestServer::builder(numbered(8)).page_size(4).start();
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("out");
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    // The same run without -q: the summary, and the retry warned of.
    server.fault_on_page(2, Fault::Unavailable(RetryAfter::Missing));
    let loud = bridge(export_args(&server, &out, &["--scope", SCOPE])).await;
    assert!(loud.status.success(), "{}", stderr(&loud));
    assert!(
        text(&loud.stdout).contains("Exported "),
        "{}",
        text(&loud.stdout)
    );
    assert!(stderr(&loud).contains("WARN"), "{}", stderr(&loud));

    server.fault_on_page(2, Fault::Unavailable(RetryAfter::Missing));
    let quiet = bridge(export_args(&server, &out, &["--scope", SCOPE, "-q"])).await;
    assert!(quiet.status.success(), "{}", stderr(&quiet));
    assert_eq!(text(&quiet.stdout), "", "stdout");
    assert_eq!(stderr(&quiet), "", "stderr");
    assert_eq!(
        server.page_requests(2).len(),
        4,
        "both runs met the 503 and retried it"
    );

    let json = bridge(export_args(
        &server,
        &out,
        &["--scope", SCOPE, "-q", "--json"],
    ))
    .await;
    assert!(json.status.success(), "{}", stderr(&json));
    let summary: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(summary["urls"], 8, "{summary}");
    assert_eq!(stderr(&json), "", "stderr");

    server.fault_always(Fault::Status(500));
    let failed = bridge(export_args(&server, &out, &["--scope", SCOPE, "-q"])).await;
    assert_eq!(failed.status.code(), Some(1), "{}", stderr(&failed));
    assert_eq!(text(&failed.stdout), "", "stdout");
    assert!(
        stderr(&failed).starts_with("error: "),
        "{}",
        stderr(&failed)
    );
    assert!(stderr(&failed).contains("500"), "{}", stderr(&failed));
}

#[tokio::test]
async fn an_export_failing_on_page_3_leaves_the_previous_export_byte_identical() {
    // I-02: a list that never reached its end is not published. The folder of the previous
    // export stays byte for byte, no staging folder is left beside it, nor the Signmap's and
    // OCX's shard files written while harvesting, and the exit is non-zero.
    let server = TestServer::builder(numbered(20)).page_size(4).start();
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("out");
    let args = ["--scope", SCOPE, "--signmap", "--ocx"];
    let first = bridge(export_args(&server, &out, &args)).await;
    assert!(first.status.success(), "{}", stderr(&first));
    let before = snapshot(&out);
    assert!(before.contains_key("sitemap.xml"), "{:?}", before.keys());
    assert!(before.contains_key("signmap-1.xml"), "{:?}", before.keys());

    server.fault_on_page_always(3, Fault::Status(500));
    let second = bridge(export_args(&server, &out, &args)).await;
    assert!(!second.status.success());
    assert!(stderr(&second).contains("page 3"), "{}", stderr(&second));
    assert_eq!(snapshot(&out), before);
    let beside: Vec<String> = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(beside, ["out"]);

    // Once the repository recovers, the next export replaces the folder.
    server.clear_faults();
    let third = bridge(export_args(&server, &out, &args)).await;
    assert!(third.status.success(), "{}", stderr(&third));
    assert!(snapshot(&out).contains_key("sitemap.xml"));
    assert_eq!(snapshot(&out), before, "the same records again");
    assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 1);
}

#[tokio::test]
async fn each_retry_warning_says_which_attempt_failed() {
    // Issue 22: the warnings of an export count the attempts ("attempt 2 of 3 failed"), where
    // each once said "failed after 1 attempt(s)".
    let server = TestServer::builder(numbered(12)).page_size(5).start();
    server.fault_on_page_times(2, 2, Fault::Status(500));
    let root = tempfile::tempdir().unwrap();
    let mut args = export_args(&server, &root.path().join("out"), &["--scope", SCOPE]);
    let at = args.iter().position(|a| a == "--max-attempts").unwrap();
    args[at + 1] = "3".to_owned();
    let output = bridge(args).await;
    let text = stderr(&output);
    assert!(output.status.success(), "{text}");
    assert_eq!(server.page_requests(2).len(), 3);
    for n in [1, 2] {
        let warning = format!("attempt {n} of 3 failed: HTTP status 500; retrying in ");
        assert_eq!(text.matches(&warning).count(), 1, "{warning:?} in {text}");
    }
    assert!(!text.contains("attempt(s)"), "{text}");
}

#[tokio::test]
async fn an_export_with_no_url_inside_the_scope_fails_and_says_how_to_fix_it() {
    // G-03, SM-07: the default scope is the baseURL's directory (http://127.0.0.1:<port>/); the
    // records' landing pages are elsewhere. Nothing is published, the previous folder stays,
    // and the message says how many URLs were outside and points at --scope.
    let server = TestServer::start(numbered(6));
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("out");
    previous_export(&out);
    let before = snapshot(&out);
    let output = bridge(export_args(&server, &out, &[])).await;
    assert!(!output.status.success());
    let message = stderr(&output);
    assert!(message.contains("0 of"), "{message}");
    assert!(message.contains("--scope"), "{message}");
    assert_eq!(snapshot(&out), before);
}

#[tokio::test]
async fn from_and_until_are_sent_in_the_repository_granularity() {
    // OAI-17: a day repository gets days (a time would be badArgument, as Dataverse #11020 got);
    // a seconds repository gets the first second of --from's day and the last of --until's, so
    // both bounds stay inclusive. The server answers badArgument to a wrong form.
    let cases = [
        (
            Granularity::Day,
            "2024-05-01",
            "2024-05-31",
            "2024-05-01",
            "2024-05-31",
        ),
        (
            Granularity::Seconds,
            "2024-05-01",
            "2024-05-31",
            "2024-05-01T00:00:00Z",
            "2024-05-31T23:59:59Z",
        ),
        (
            Granularity::Day,
            "2024-05-01T10:00:00Z",
            "2024-05-31T08:00:00Z",
            "2024-05-01",
            "2024-05-31",
        ),
        (
            Granularity::Seconds,
            "2024-05-01T10:00:00Z",
            "2024-05-31T08:00:00Z",
            "2024-05-01T10:00:00Z",
            "2024-05-31T08:00:00Z",
        ),
    ];
    for (granularity, from, until, sent_from, sent_until) in cases {
        let server = TestServer::builder(numbered(6))
            .granularity(granularity)
            .start();
        let root = tempfile::tempdir().unwrap();
        let out = root.path().join("out");
        let extra = ["--scope", SCOPE, "--from", from, "--until", until];
        let output = bridge(export_args(&server, &out, &extra)).await;
        assert!(
            output.status.success(),
            "{granularity:?} {from}: {}",
            stderr(&output)
        );
        let first = &server.list_requests()[0];
        assert_eq!(
            first.arg("from").as_deref(),
            Some(sent_from),
            "{granularity:?} {from}"
        );
        assert_eq!(
            first.arg("until").as_deref(),
            Some(sent_until),
            "{granularity:?} {until}"
        );
    }
}

#[tokio::test]
async fn each_set_is_harvested_as_its_own_list() {
    // OAI-40, Q-28: `--set a --set b` gives two lists, each started with its set and followed
    // with its own tokens. `a:sub` belongs to `a`; a record in both sets is published once
    // (OAI-38); a record only in `c` is not harvested.
    let record = |i: usize, sets: &[&str]| {
        sets.iter().fold(
            TestRecord::new(&format!("oai:test:{i}"), "2024-05-01")
                .url(&format!("https://repo.example/record/{i}")),
            |r, s| r.set(s),
        )
    };
    let records = vec![
        record(1, &["a"]),
        record(2, &["a"]),
        record(3, &["a:sub"]),
        record(4, &["b"]),
        record(5, &["b"]),
        record(6, &["c"]),
        record(7, &["a", "b"]),
    ];
    let server = TestServer::builder(records).page_size(2).start();
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("out");
    let extra = ["--scope", SCOPE, "--set", "a", "--set", "b"];
    let output = bridge(export_args(&server, &out, &extra)).await;
    assert!(output.status.success(), "{}", stderr(&output));

    let lists = server.list_requests();
    let starts: Vec<Option<String>> = lists
        .iter()
        .filter(|s| s.arg("resumptionToken").is_none())
        .map(|s| s.arg("set"))
        .collect();
    assert_eq!(starts, [Some("a".to_owned()), Some("b".to_owned())]);
    // Set a holds 4 records (2 pages), set b 3 (2 pages); every follow-up is verb + token only.
    assert_eq!(lists.len(), 4);
    for follow_up in lists.iter().filter(|s| s.page != Some(1)) {
        let keys: Vec<String> = follow_up.args().into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["verb", "resumptionToken"]);
    }
    let sitemap = std::fs::read_to_string(out.join("sitemap-1.xml")).unwrap();
    for i in [1, 2, 3, 4, 5, 7] {
        let loc = format!("<loc>https://repo.example/record/{i}</loc>");
        assert_eq!(sitemap.matches(&loc).count(), 1, "{loc} in {sitemap}");
    }
    assert!(!sitemap.contains("record/6"), "{sitemap}");
}

// --- Hostile upstreams (issue 6 point 4) -----------------------------------------------------
// Each ends in a clear error within the configured limits of time and memory, and an export
// leaves the published folder as it was.

/// Exports `server` over an earlier export with `settings`; the error, after checking that the
/// folder is byte-identical.
async fn export_fails_untouched(server: &TestServer, settings: HarvestSettings) -> String {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("out");
    previous_export(&out);
    let before = snapshot(&out);
    let err = export(&ExportOptions {
        job: job(server),
        harvest: settings,
        out: out.clone().into(),
        publish: Default::default(),
        progress: false,
        state: None,
        state_db: None,
        policy: Default::default(),
    })
    .await
    .expect_err("the export must fail");
    assert_eq!(snapshot(&out), before, "the published folder changed");
    oai_bridge::error_chain(&err)
}

fn one_attempt() -> HarvestSettings {
    HarvestSettings {
        max_attempts: 1,
        ..fast()
    }
}

#[tokio::test]
async fn a_slow_drip_body_ends_at_the_request_timeout() {
    let server = TestServer::start(numbered(3));
    server.fault_on_page(1, Fault::SlowDrip(Duration::from_millis(50)));
    let settings = HarvestSettings {
        request_timeout: Duration::from_secs(1),
        ..one_attempt()
    };
    let started = std::time::Instant::now();
    let message = export_fails_untouched(&server, settings).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(
        message.contains("timed out") || message.contains("timeout"),
        "{message}"
    );
    assert!(message.contains("page 1"), "{message}");
}

/// A minimum transfer rate of 1 KiB a second over `window`.
fn minimum_rate(window: Duration) -> HarvestSettings {
    HarvestSettings {
        min_transfer_bytes_per_sec: 1024,
        min_transfer_window: window,
        ..fast()
    }
}

#[tokio::test]
async fn a_drip_fails_at_the_minimum_rate_not_the_timeout_and_is_not_retried() {
    // Issue 22: a body dripping at 20 bytes a second fails when its first 2 s window ends,
    // well before the 20 s request timeout, with the rate it came at; it is not sent again
    // (three attempts allowed, every one would drip), and an export leaves the folder as it was.
    let server = TestServer::builder(numbered(3)).start();
    server.fault_on_page_always(1, Fault::SlowDrip(Duration::from_millis(50)));
    let settings = minimum_rate(Duration::from_secs(2));
    let err = run_all(&server, settings.clone()).await.err();
    match err.kind {
        HarvestErrorKind::TooSlow {
            observed,
            window,
            received,
            min,
        } => {
            assert!(observed < 1024, "{observed}");
            assert_eq!((window, min), (Duration::from_secs(2), 1024));
            assert!(received > 0 && received < 2048, "{received}");
        }
        ref other => panic!("the drip error was expected: {other:?}"),
    }
    assert_eq!(err.page, 1);
    assert_eq!(server.page_requests(1).len(), 1);
    let text = err.to_string();
    for part in [
        err.url.as_str(),
        "page 1",
        "bytes/s over 2 s",
        "harvest.min_transfer_bytes_per_sec",
        "not retried",
    ] {
        assert!(text.contains(part), "{text:?} should name {part:?}");
    }

    let message = export_fails_untouched(&server, settings).await;
    assert!(message.contains("min_transfer_bytes_per_sec"), "{message}");
    assert!(!message.contains("timed out"), "{message}");
}

#[tokio::test]
async fn a_body_that_stalls_fails_when_its_window_ends() {
    // Issue 22: half a page (under 1 KiB), then silence: no later byte comes to close the
    // window, so its end does. The drip error, with the half page over the 1 s window, not
    // the 20 s request timeout, and not retried.
    let server = TestServer::builder(numbered(3)).start();
    server.fault_on_page_always(1, Fault::Stall);
    let err = run_all(&server, minimum_rate(Duration::from_secs(1)))
        .await
        .err();
    match err.kind {
        HarvestErrorKind::TooSlow {
            observed,
            received,
            min: 1024,
            ..
        } => assert!(received < 1024 && observed <= received, "{err:?}"),
        ref other => panic!("the drip error was expected: {other:?}"),
    }
    assert_eq!(server.page_requests(1).len(), 1);
}

#[tokio::test]
async fn the_wait_for_the_first_byte_is_no_part_of_the_minimum_rate() {
    // Issue 22: a repository that thinks 2 s before it answers (DSpace, a large page) is not
    // slow by a 1 s window: the window starts at the body's first byte.
    let server = TestServer::builder(numbered(12)).page_size(5).start();
    server.fault_on_page(2, Fault::Delay(Duration::from_secs(2)));
    let (_, records) = run_all(&server, minimum_rate(Duration::from_secs(1)))
        .await
        .ok();
    assert_eq!(ids(&records), expected_ids(12));
    assert_eq!(server.page_requests(2).len(), 1);
}

#[tokio::test]
async fn a_body_that_never_ends_stops_at_max_body_bytes() {
    let server = TestServer::start(numbered(3));
    server.fault_on_page(1, Fault::Endless);
    let message = export_fails_untouched(&server, one_attempt()).await;
    assert!(message.contains("exceeds the limit"), "{message}");
}

#[tokio::test]
async fn a_gzip_bomb_stops_at_max_body_bytes_after_inflating() {
    // 32 MiB of spaces in about 32 KiB of gzip; the cap (1 MiB in these settings) counts the
    // inflated bytes, so memory stays bounded.
    let server = TestServer::start(numbered(3));
    server.fault_on_page(1, Fault::GzipBomb);
    let message = export_fails_untouched(&server, one_attempt()).await;
    assert!(message.contains("exceeds the limit"), "{message}");
}

#[tokio::test]
async fn entity_bombs_and_deep_nesting_are_errors_not_expansions() {
    // OAI-44, OAI-45: billion laughs (internal entities) is never expanded, in a page or in
    // Identify; 100,000 nested elements neither overflow the stack nor pass.
    let laughs = {
        let mut dtd = String::from("<!ENTITY lol \"lol\">");
        for i in 1..10 {
            let prev = if i == 1 {
                "lol".to_owned()
            } else {
                format!("lol{}", i - 1)
            };
            dtd.push_str(&format!(
                "<!ENTITY lol{i} \"{}\">",
                format!("&{prev};").repeat(10)
            ));
        }
        format!(
            "<?xml version=\"1.0\"?>\n<!DOCTYPE OAI-PMH [{dtd}]>\n<OAI-PMH xmlns=\"http://www.openarchives.org/OAI/2.0/\">\
             <responseDate>2024-01-01T00:00:00Z</responseDate><request>x</request>\
             <Identify><repositoryName>&lol9;</repositoryName></Identify>\
             <ListRecords><record><header><identifier>&lol9;</identifier><datestamp>2024-01-01</datestamp></header></record></ListRecords></OAI-PMH>"
        )
    };
    let deep = format!(
        "<?xml version=\"1.0\"?>\n<OAI-PMH xmlns=\"http://www.openarchives.org/OAI/2.0/\">\
         <responseDate>2024-01-01T00:00:00Z</responseDate><request>x</request><ListRecords>{}{}</ListRecords></OAI-PMH>",
        "<a>".repeat(100_000),
        "</a>".repeat(100_000)
    );
    for (what, body, on_identify) in [
        ("billion laughs in a page", laughs.clone(), false),
        ("billion laughs in Identify", laughs, true),
        ("100,000 nested elements in a page", deep.clone(), false),
        ("100,000 nested elements in Identify", deep, true),
    ] {
        let server = TestServer::start(numbered(3));
        if on_identify {
            server.fault_on_request(1, Fault::Body(body));
        } else {
            server.fault_on_page(1, Fault::Body(body));
        }
        let started = std::time::Instant::now();
        let message = export_fails_untouched(&server, one_attempt()).await;
        assert!(started.elapsed() < Duration::from_secs(10), "{what}");
        assert!(
            !message.contains("lollollol"),
            "{what}: expanded: {message}"
        );
        assert!(
            message.contains("page 1") || message.contains("Identify"),
            "{what}: {message}"
        );
    }
}

#[tokio::test]
async fn a_megabyte_identifier_is_dropped_as_too_long() {
    let mut records = numbered(3);
    records[1] = TestRecord::new("oai:test:2", "2024-05-02")
        .url(&format!("https://repo.example/{}", "x".repeat(1 << 20)));
    let server = TestServer::builder(records).start();
    let settings = HarvestSettings {
        max_body_bytes: 4 << 20,
        ..fast()
    };
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("out");
    let summary = export(&ExportOptions {
        job: job(&server),
        harvest: settings,
        out: out.clone().into(),
        publish: Default::default(),
        progress: false,
        state: None,
        state_db: None,
        policy: Default::default(),
    })
    .await
    .unwrap();
    assert_eq!(summary.built.stats.urls, 2);
    assert_eq!(summary.built.stats.dropped(oai_bridge::Drop::TooLong), 1);
}

#[tokio::test]
async fn redirect_loops_and_redirects_to_another_host_are_errors() {
    let server = TestServer::start(numbered(3));
    server.fault_always(Fault::Redirect("/oai?verb=Identify".to_owned()));
    let message = export_fails_untouched(&server, one_attempt()).await;
    assert!(
        message.contains("redirects (a redirect loop?)"),
        "{message}"
    );

    let server = TestServer::start(numbered(3));
    server.fault_on_request(
        1,
        Fault::Redirect("http://elsewhere.example/oai?verb=Identify".to_owned()),
    );
    let message = export_fails_untouched(&server, fast()).await;
    assert!(
        message.contains("to another host, http://elsewhere.example/"),
        "{message}"
    );
    // Not retried: one request only.
    assert_eq!(server.requests().len(), 1);
}

// --- Requests, transport and envelope --------------------------------------------------------

#[tokio::test]
async fn only_the_protocols_verbs_and_arguments_are_sent() {
    // OAI-01: verbs spelled as the protocol spells them (the test server answers badVerb to any
    // other spelling, `listrecords` included). OAI-02: Identify carries no argument; the first
    // ListRecords of a list carries metadataPrefix and the optional set, from and until; a
    // follow-up the token alone (the server answers badArgument to anything else). OAI-41: the
    // prefix is oai_dc. OAI-42: the URLs come from ListRecords; no other verb is asked for.
    let records = numbered(12).into_iter().map(|r| r.set("a")).collect();
    let server = TestServer::builder(records).page_size(5).start();
    let request = HarvestRequest {
        sets: vec!["a".to_owned()],
        from: Datestamp::parse("2024-05-01"),
        until: Datestamp::parse("2024-05-31"),
        ..whole_repository(&server)
    };
    let (_, records) = run(fast(), &request).await.ok();
    assert_eq!(ids(&records), expected_ids(12));
    let keys = |s: &Seen| s.args().into_iter().map(|(k, _)| k).collect::<Vec<_>>();
    let log = server.requests();
    let verbs: Vec<Option<&str>> = log.iter().map(|s| s.verb.as_deref()).collect();
    assert_eq!(
        verbs,
        [
            Some("Identify"),
            Some("ListRecords"),
            Some("ListRecords"),
            Some("ListRecords")
        ]
    );
    assert_eq!(keys(&log[0]), ["verb"]);
    assert_eq!(
        keys(&log[1]),
        ["verb", "metadataPrefix", "set", "from", "until"]
    );
    assert_eq!(log[1].arg("metadataPrefix").as_deref(), Some("oai_dc"));
    for follow_up in &log[2..] {
        assert_eq!(keys(follow_up), ["verb", "resumptionToken"]);
    }
}

#[tokio::test]
async fn a_get_refused_as_uri_too_long_is_sent_again_as_post() {
    // OAI-06: repositories must take POST (application/x-www-form-urlencoded) as well as GET;
    // a GET refused with 414 (a long resumption token past a proxy's URL limit) is sent again
    // as a POST of the same arguments. The test server answers 414 to every GET of page 2 and
    // the page to a POST.
    let server = TestServer::builder(numbered(12)).page_size(5).start();
    server.fault_on_page_always(2, Fault::UriTooLong);
    let (_, records) = run_all(&server, fast()).await.ok();
    assert_eq!(ids(&records), expected_ids(12));
    let tries = server.page_requests(2);
    let answered: Vec<(&str, u16)> = tries
        .iter()
        .map(|s| (s.method.as_str(), s.status))
        .collect();
    assert_eq!(answered, [("GET", 414), ("POST", 200)]);
    assert_eq!(
        tries[1].query, tries[0].query,
        "the same arguments, in the body"
    );
}

/// A `ListRecords` answer from the test server's envelope around `inner`.
fn list_answer(inner: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <OAI-PMH xmlns=\"http://www.openarchives.org/OAI/2.0/\">\
         <responseDate>2024-06-01T12:00:00Z</responseDate>\
         <request verb=\"ListRecords\" metadataPrefix=\"oai_dc\">http://127.0.0.1/oai</request>\
         {inner}</OAI-PMH>\n"
    )
}

/// A record of `list_answer` with oai_dc metadata; `metadata_head` goes before `oai_dc:dc`.
fn record_xml(identifier: &str, datestamp: &str, metadata_head: &str, dc: &str) -> String {
    format!(
        "<record><header><identifier>{identifier}</identifier><datestamp>{datestamp}</datestamp>\
         </header><metadata>{metadata_head}<oai_dc:dc \
         xmlns:oai_dc=\"http://www.openarchives.org/OAI/2.0/oai_dc/\" \
         xmlns:dc=\"http://purl.org/dc/elements/1.1/\">{dc}</oai_dc:dc></metadata></record>"
    )
}

#[tokio::test]
async fn a_page_without_its_list_records_element_is_an_error_not_the_end_of_the_list() {
    // OAI-08, I-02: an answer holds one or more <error>s or exactly one element named after the
    // verb, in the OAI-PMH namespace. Page 2 here is an envelope with responseDate and request
    // only, or a ListRecords in another namespace (the trailing slash missing). Neither answers
    // ListRecords: the harvest must fail. Taken as an empty last page, page 1 alone is
    // published as the whole repository.
    let client = client(fast());
    let wrong_namespace = format!(
        "<ListRecords xmlns=\"http://www.openarchives.org/OAI/2.0\">{}</ListRecords>",
        record_xml(
            "oai:test:6",
            "2024-05-06",
            "",
            "<dc:identifier>https://repo.example/record/6</dc:identifier>"
        )
    );
    let mut outcomes = Vec::new();
    for inner in [String::new(), wrong_namespace] {
        let server = TestServer::builder(numbered(12)).page_size(5).start();
        server.fault_on_page_always(2, Fault::Body(list_answer(&inner)));
        let harvested = run_on(&client, &whole_repository(&server)).await;
        outcomes.push(match harvested.result {
            Ok(report) => format!("complete after {} records", report.records),
            Err(e) => format!("failed on page {}", e.page),
        });
    }
    assert_eq!(outcomes, ["failed on page 2", "failed on page 2"]);
}

#[tokio::test]
async fn a_redirect_on_the_same_host_is_followed_and_the_base_url_kept() {
    // OAI-34: a 302 (the spec's load-balancing case) is followed, here to a mirror path on the
    // same host, for Identify and for page 2, with the query intact; the harvest completes and
    // the next request goes to the configured baseURL again, which is never rewritten. (A
    // redirect to another host is refused by design: see
    // redirect_loops_and_redirects_to_another_host_are_errors.)
    let server = TestServer::builder(numbered(12)).page_size(5).start();
    server.fault_on_request(1, Fault::RedirectToMirror);
    server.fault_on_page(2, Fault::RedirectToMirror);
    let (report, records) = run_all(&server, fast()).await.ok();
    assert_eq!(ids(&records), expected_ids(12));
    assert_eq!(report.pages, 3);
    let log = server.requests();
    let paths: Vec<(u16, &str)> = log
        .iter()
        .map(|s| (s.status, s.target.split('?').next().unwrap()))
        .collect();
    assert_eq!(
        paths,
        [
            (302, "/oai"),
            (200, "/mirror/oai"),
            (200, "/oai"),
            (302, "/oai"),
            (200, "/mirror/oai"),
            (200, "/oai"),
        ]
    );
    assert_eq!(log[1].query, log[0].query);
    assert_eq!(log[4].query, log[3].query);
}

#[tokio::test]
async fn gzip_and_deflate_answers_are_asked_for_and_decoded() {
    // OAI-35: every request offers gzip and deflate (Accept-Encoding), and answers in either,
    // Identify and every page, are decoded (deflate as HTTP defines it: zlib-wrapped).
    let client = client(fast());
    for compression in [Compression::Gzip, Compression::Zlib] {
        let server = TestServer::builder(numbered(12)).page_size(5).start();
        server.fault_always(Fault::Compressed(compression));
        let (_, records) = run_on(&client, &whole_repository(&server)).await.ok();
        assert_eq!(ids(&records), expected_ids(12), "{compression:?}");
        let log = server.requests();
        assert_eq!(log.len(), 4, "{compression:?}");
        for seen in &log {
            assert_eq!(seen.fault, Some(Fault::Compressed(compression)));
            let offered = seen.accept_encoding.as_deref().unwrap_or_default();
            assert!(
                offered.contains("gzip") && offered.contains("deflate"),
                "Accept-Encoding {offered:?}"
            );
        }
    }
}

#[tokio::test]
async fn a_raw_deflate_answer_is_decoded() {
    // OAI-35: "handle both zlib-wrapped and raw deflate"; servers that call raw deflate
    // `deflate` exist (the HTTP/1.1 spec's ambiguity, which browsers tolerate).
    let server = TestServer::builder(numbered(12)).page_size(5).start();
    server.fault_on_page_always(2, Fault::Compressed(Compression::RawDeflate));
    let (_, records) = run_all(&server, fast()).await.ok();
    assert_eq!(ids(&records), expected_ids(12));
}

#[tokio::test]
async fn a_gzip_answer_without_content_encoding_is_decoded() {
    // OAI-35: "sniff gzip magic 1f 8b when a server compresses without the header" (metha's
    // maybeCompressed), with a warning.
    let server = TestServer::builder(numbered(12)).page_size(5).start();
    server.fault_on_page_always(2, Fault::Compressed(Compression::UnlabelledGzip));
    let (_, records) = run_all(&server, fast()).await.ok();
    assert_eq!(ids(&records), expected_ids(12));
}

#[tokio::test]
async fn the_body_decides_not_the_content_type() {
    // OAI-07, Q-12: an OAI-PMH body labelled application/xml (e-periodica; DSpace before PR
    // #1804), application/json (LearningRegistry #92) or text/html is read all the same. The
    // Accept header admits any type after text/xml, so no server has a reason to answer 406
    // (oaipmh-scythe #446).
    let client = client(fast());
    for content_type in [
        "application/xml",
        "application/json",
        "text/html; charset=utf-8",
    ] {
        let server = TestServer::builder(numbered(12)).page_size(5).start();
        server.fault_always(Fault::ContentType(content_type));
        let (_, records) = run_on(&client, &whole_repository(&server)).await.ok();
        assert_eq!(ids(&records), expected_ids(12), "{content_type}");
        for seen in server.requests() {
            let accept = seen.accept.as_deref().unwrap_or_default();
            assert!(accept.starts_with("text/xml"), "Accept {accept:?}");
            assert!(accept.contains("*/*"), "Accept {accept:?}");
        }
    }
}

#[tokio::test]
async fn prefixed_oai_elements_are_read_alike() {
    // Q-15, OAI-44: every OAI-PMH element in a prefix (`<oai:OAI-PMH xmlns:oai=...>`,
    // `<oai:ListRecords>`, `<oai:resumptionToken>`, as OpenAIRE and pycsw write them), in
    // Identify and every page: the same records, the same tokens followed.
    let server = TestServer::builder(numbered(12)).page_size(5).start();
    server.fault_always(Fault::Prefixed);
    let (report, records) = run_all(&server, fast()).await.ok();
    assert_eq!(ids(&records), expected_ids(12));
    assert_eq!(records[0].dc_identifiers, ["https://repo.example/record/1"]);
    assert_eq!(
        report.identify.repository_name,
        "oai-bridge test repository"
    );
    assert_eq!(report.pages, 3);
    assert!(
        server
            .requests()
            .iter()
            .all(|s| s.fault == Some(Fault::Prefixed))
    );
}

/// `body` with every byte `0x01` replaced by `0xE9` (Latin-1 `é`).
fn latin1(body: &str) -> Vec<u8> {
    body.bytes()
        .map(|b| if b == 1 { 0xE9 } else { b })
        .collect()
}

#[tokio::test]
async fn latin1_bytes_under_a_utf8_declaration_are_decoded_with_a_warning() {
    // OAI-47, Q-11: digi.ub.uni-heidelberg.de (metha's client.go) declares UTF-8 and sends
    // ISO-8859-1. Invalid UTF-8 is decoded as Windows-1252, with a warning, never lossily and
    // silently; the record is kept with its title.
    let server = TestServer::start(numbered(3));
    let page = list_answer(&format!(
        "<ListRecords>{}</ListRecords>",
        record_xml(
            "oai:test:1",
            "2024-05-01",
            "",
            "<dc:title>Caf\u{1}</dc:title>\
             <dc:identifier>https://repo.example/record/1</dc:identifier>"
        )
    ));
    server.fault_on_page_always(1, Fault::Bytes(latin1(&page)));
    let request = HarvestRequest {
        fields: Fields::of(&[DcElement::Title]),
        ..whole_repository(&server)
    };
    let (_, records) = run(fast(), &request).await.ok();
    assert_eq!(ids(&records), ["oai:test:1"]);
    assert_eq!(
        records[0].dc_values(DcElement::Title).collect::<Vec<_>>(),
        ["Café"]
    );
}

#[tokio::test]
async fn an_xml_declaration_inside_metadata_does_not_lose_the_record() {
    // OAI-49, Q-09: Dataverse (#7431) copied each record's XML declaration into <metadata>,
    // which makes the page not well-formed. The narrow recovery the rule allows is taken: the
    // declaration is passed over and every record keeps its dc:identifier. A page with no
    // declaration at its top (legal XML) is read as well.
    let dc = |i: u32| format!("<dc:identifier>https://repo.example/record/{i}</dc:identifier>");
    let records = format!(
        "<ListRecords>{}{}</ListRecords>",
        record_xml("oai:test:1", "2024-05-01", "", &dc(1)),
        record_xml(
            "oai:test:2",
            "2024-05-02",
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
            &dc(2)
        )
    );
    let embedded = list_answer(&records);
    let undeclared = embedded
        .replacen("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", "", 1)
        .replace("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", "");
    assert!(!undeclared.contains("<?xml"));
    let client = client(fast());
    for body in [embedded, undeclared] {
        let server = TestServer::start(numbered(2));
        server.fault_on_page_always(1, Fault::Body(body.clone()));
        let (_, records) = run_on(&client, &whole_repository(&server)).await.ok();
        let found: Vec<&[String]> = records.iter().map(|r| &r.dc_identifiers[..]).collect();
        assert_eq!(
            found,
            [
                ["https://repo.example/record/1".to_owned()],
                ["https://repo.example/record/2".to_owned()]
            ],
            "{body}"
        );
    }
}

#[tokio::test]
async fn a_datestamp_in_the_future_is_published_without_lastmod() {
    // a datestamp ahead of the clock (a bulk update, a wrong server clock) tells nothing
    // of when the page changed: the record is kept and its URL published, without a lastmod,
    // and the index's lastmod is not taken from it.
    let mut records = numbered(3);
    records[1] = TestRecord::new("oai:test:2", "2999-01-01").url("https://repo.example/record/2");
    let server = TestServer::start(records);
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("out");
    export_to(&server, &out).await.unwrap();
    let sitemap = std::fs::read_to_string(out.join("sitemap-1.xml")).unwrap();
    assert!(
        sitemap.contains("<loc>https://repo.example/record/2</loc>"),
        "{sitemap}"
    );
    let index = std::fs::read_to_string(out.join("sitemap.xml")).unwrap();
    assert!(!sitemap.contains("2999"), "{sitemap}");
    assert!(!index.contains("2999"), "{index}");
}

#[tokio::test]
async fn an_export_sends_no_request_but_to_its_upstream() {
    // SM-19: no sitemap ping (Google's endpoint is gone). The export runs with every proxy
    // variable pointing at a listener that counts connections, only the test server exempt
    // (NO_PROXY): any other request, a ping included, would reach the listener. A control run
    // without the exemption shows that the listener would see it.
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let proxy = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_url = format!("http://{}", proxy.local_addr().unwrap());
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&connections);
    let listener = tokio::spawn(async move {
        while let Ok((stream, _)) = proxy.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
    let server = TestServer::start(numbered(3));
    let root = tempfile::tempdir().unwrap();
    let run = |out: std::path::PathBuf, exempt: bool| {
        let args = export_args(&server, &out, &["--scope", SCOPE]);
        let proxy_url = proxy_url.clone();
        tokio::task::spawn_blocking(move || {
            let mut command = crate::golden::bridge();
            command.args(&args);
            for var in ["OAI_BRIDGE_CONFIG", "RUST_LOG", "NO_PROXY", "no_proxy"] {
                command.env_remove(var);
            }
            for var in [
                "HTTP_PROXY",
                "http_proxy",
                "HTTPS_PROXY",
                "https_proxy",
                "ALL_PROXY",
                "all_proxy",
            ] {
                command.env(var, &proxy_url);
            }
            if exempt {
                command.env("NO_PROXY", "127.0.0.1");
            }
            command.output().expect("run oai-bridge")
        })
    };
    let output = run(root.path().join("out"), true).await.unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(connections.load(Ordering::SeqCst), 0, "a request left");
    let control = run(root.path().join("control"), false).await.unwrap();
    assert!(!control.status.success());
    assert!(
        connections.load(Ordering::SeqCst) > 0,
        "the proxy saw nothing"
    );
    listener.abort();
}
