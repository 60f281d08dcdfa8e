//! Issue 32 point 4, IndexNow: the real gateway, harvesting the local test repository, pings a
//! loopback engine that checks every request, with the landing pages each refresh changed.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use reqwest::StatusCode;

use crate::serve::Running;
use crate::server::{TestRecord, TestServer};

const KEY: &str = "it-indexnow-key-4711";

/// Each request's host and URLs.
type Requests = Arc<Mutex<Vec<(String, Vec<String>)>>>;

/// A loopback engine answering 200, recording each request's host and URLs, and what was
/// wrong with it (method, content type, fields, key, more than 10,000 URLs, a foreign host).
#[derive(Clone, Default)]
struct Engine {
    got: Requests,
    wrong: Arc<Mutex<Vec<String>>>,
}

impl Engine {
    async fn start(&self) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}/indexnow", listener.local_addr().unwrap());
        let engine = self.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let engine = engine.clone();
                let service = hyper::service::service_fn(move |req| {
                    let engine = engine.clone();
                    async move {
                        engine.check(req).await;
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(
                            Bytes::new(),
                        )))
                    }
                });
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service),
                );
            }
        });
        endpoint
    }

    async fn check(&self, req: hyper::Request<hyper::body::Incoming>) {
        let mut wrong = Vec::new();
        if req.method() != hyper::Method::POST {
            wrong.push(format!("method {}", req.method()));
        }
        let content_type = req.headers().get("content-type").cloned();
        if content_type.as_ref().and_then(|v| v.to_str().ok())
            != Some("application/json; charset=utf-8")
        {
            wrong.push(format!("content type {content_type:?}"));
        }
        let body = req.into_body().collect().await.unwrap().to_bytes();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let mut fields: Vec<&str> = (json.as_object().into_iter())
            .flat_map(|o| o.keys().map(String::as_str))
            .collect();
        fields.sort();
        if fields != ["host", "key", "urlList"] {
            wrong.push(format!("fields {fields:?}"));
        }
        if json["key"] != KEY {
            wrong.push("another key".to_owned());
        }
        let host = json["host"].as_str().unwrap_or_default().to_owned();
        let urls: Vec<String> = (json["urlList"].as_array().into_iter().flatten())
            .map(|u| u.as_str().unwrap_or_default().to_owned())
            .collect();
        if urls.is_empty() || urls.len() > 10_000 {
            wrong.push(format!("{} URLs", urls.len()));
        }
        for url in &urls {
            if url::Url::parse(url)
                .ok()
                .and_then(|u| u.host_str().map(str::to_owned))
                != Some(host.clone())
            {
                wrong.push(format!("{url} is not of {host}"));
            }
        }
        self.wrong.lock().unwrap().extend(wrong);
        self.got.lock().unwrap().push((host, urls));
    }

    fn requests(&self) -> usize {
        self.got.lock().unwrap().len()
    }
}

fn record(i: usize, datestamp: &str) -> TestRecord {
    TestRecord::new(&format!("oai:test:{i}"), datestamp)
        .url(&format!("https://repo.example/record/{i:03}"))
}

/// The first harvest is a baseline: nothing is sent. The next refresh sends exactly the pages it
/// created, changed and deleted, in one checked request; the status page and the metrics show
/// the batch and its answer, never the key; the public listener serves the key file.
/// Without Change Lists (`changelist_days = 0`): IndexNow alone still has the refresh's changes
/// found.
#[tokio::test]
async fn a_refresh_pings_its_changed_landing_pages() {
    let engine = Engine::default();
    let endpoint = engine.start().await;
    let records: Vec<TestRecord> = (1..=12).map(|i| record(i, "2024-05-01")).collect();
    let upstream = TestServer::builder(records.clone()).start();
    let state = tempfile::tempdir().unwrap();
    let config = format!(
        "[server]\nstate_dir = \"{{state}}\"\n[harvest]\nmax_attempts = 1\n\
         [[repository]]\nname = \"r\"\nbase_url = \"{}\"\nscope = [\"https://repo.example/\"]\n\
         refresh_interval_secs = 3600\nchangelist_days = 0\n\
         [repository.indexnow]\nkey = \"{KEY}\"\n\
         endpoint = \"{endpoint}\"\n",
        upstream.url()
    );
    let g = Running::start(&config, state.path()).await;
    g.ready().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(engine.requests(), 0, "nothing is sent after the baseline");
    let page = g.admin("/").await.text();
    assert!(page.contains("the last refresh was a baseline"), "{page}");

    // Record 3 is deleted, record 7 moves to another page, record 12 changes, 13 arrives.
    let mut next = records;
    next[2] = TestRecord::new("oai:test:3", "2024-06-02").deleted();
    next[6] = TestRecord::new("oai:test:7", "2024-06-02").url("https://repo.example/record/007b");
    next[11] = record(12, "2024-06-02");
    next.push(record(13, "2024-06-02"));
    upstream.set_records(next);
    upstream.set_response_date("2024-06-03T00:00:00Z");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    g.refresh(0).await;
    let start = Instant::now();
    while engine.requests() == 0 {
        assert!(start.elapsed() < Duration::from_secs(30), "no ping came");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        engine.wrong.lock().unwrap().is_empty(),
        "{:?}",
        engine.wrong
    );
    let got = engine.got.lock().unwrap().clone();
    assert_eq!(got.len(), 1, "{got:?}");
    let (host, urls) = &got[0];
    assert_eq!(host, "repo.example");
    let urls: BTreeSet<&str> = urls.iter().map(String::as_str).collect();
    let want: BTreeSet<&str> = [
        "https://repo.example/record/003",
        "https://repo.example/record/007",
        "https://repo.example/record/007b",
        "https://repo.example/record/012",
        "https://repo.example/record/013",
    ]
    .into();
    assert_eq!(urls, want);

    let start = Instant::now();
    let page = loop {
        let page = g.admin("/").await.text();
        if page.contains("batch 1 (repo.example: 2 created, 1 updated, 2 deleted): 200") {
            break page;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{page}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let metrics = g.admin("/metrics").await.text();
    for want in [
        "oai_bridge_indexnow_requests_total{repository=\"r\",status=\"200\"} 1",
        "oai_bridge_indexnow_urls_sent_total{repository=\"r\"} 5",
        "oai_bridge_indexnow_pending_urls{repository=\"r\"} 0",
    ] {
        assert!(metrics.contains(want), "metrics lack {want}:\n{metrics}");
    }
    assert!(
        !page.contains(KEY) && !metrics.contains(KEY),
        "the key is shown"
    );
    let key_file = g.get(&format!("/{KEY}.txt")).await;
    assert_eq!(key_file.status, StatusCode::OK);
    assert!(key_file.header("content-type").starts_with("text/plain"));
    assert_eq!(key_file.text(), KEY);
    assert_eq!(
        g.get("/not-the-key-0000.txt").await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        g.admin(&format!("/{KEY}.txt")).await.status,
        StatusCode::NOT_FOUND
    );
    g.stop().await;
}
