//! The state store in PostgreSQL through the real binary: `export --state-url` harvests
//! incrementally from its database and publishes what an export through SQLite publishes, and
//! its errors name the database without the password. The server is the one
//! `OAI_BRIDGE_TEST_POSTGRES` names (`.ci/postgres.sh` starts one); each test makes a database
//! of its own. Without it the tests say they are skipped, except on CI, which must run them.

use std::path::Path;
use std::process::Output;

use oai_bridge::{StateUrl, Store};

use crate::faults::{PUBLIC_URL, SCOPE, snapshot};
use crate::server::{TestRecord, TestServer};

/// A test's database on the test server, dropped at the end.
pub(crate) struct Database {
    admin: String,
    name: String,
    pub(crate) url: String,
}

impl Database {
    /// A new database; `None` (and the test says it is skipped) without a server, except on CI.
    pub(crate) fn create(test: &str) -> Option<Database> {
        let Some(admin) = std::env::var("OAI_BRIDGE_TEST_POSTGRES")
            .ok()
            .filter(|v| !v.is_empty())
        else {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must test the PostgreSQL store: set OAI_BRIDGE_TEST_POSTGRES (.ci/postgres.sh)"
            );
            eprintln!("skipped: {test} (OAI_BRIDGE_TEST_POSTGRES is unset)");
            return None;
        };
        let name = format!("it_{}_{:x}", std::process::id(), fastrand::u64(..));
        off_runtime(|| {
            let mut client = postgres::Client::connect(&admin, postgres::NoTls).unwrap();
            client
                .batch_execute(&format!("CREATE DATABASE {name}"))
                .unwrap();
        });
        let mut url = url::Url::parse(&admin).unwrap();
        url.set_path(&format!("/{name}"));
        Some(Database {
            url: url.to_string(),
            admin,
            name,
        })
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        off_runtime(|| {
            if let Ok(mut client) = postgres::Client::connect(&self.admin, postgres::NoTls) {
                let _ = client.batch_execute(&format!(
                    "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                    self.name
                ));
            }
        });
    }
}

/// Runs `f` on a thread of its own: the `postgres` client blocks on a runtime of its own,
/// which it cannot start on a thread of the test's runtime.
pub(crate) fn off_runtime<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    std::thread::scope(|s| s.spawn(f).join().unwrap())
}

/// `oai-bridge export` of `server` into `out`, its store given by `store` (flags).
fn export(server: &TestServer, out: &Path, store: &[&str]) -> Output {
    crate::golden::bridge()
        .args(["export", "--base-url", &server.url(), "--out"])
        .arg(out)
        .args(["--public-url", PUBLIC_URL, "--scope", SCOPE])
        .args(store)
        .args(["--no-progress", "-q", "--politeness-delay", "0"])
        .env_remove("OAI_BRIDGE_CONFIG")
        .env_remove("OAI_BRIDGE_STATE_URL")
        .output()
        .unwrap()
}

#[track_caller]
fn succeeded(output: &Output) {
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

fn record(i: usize, date: &str, version: u32) -> TestRecord {
    TestRecord::new(&format!("oai:test:{i}"), date)
        .url(&format!("https://repo.example/record/{i}/v{version}"))
        .title(&format!("Record {i}"))
}

/// Two exports through the database: the second asks only for the changes (`from`), and each
/// publishes byte for byte what the same exports through a SQLite store publish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_through_postgresql_is_incremental_and_publishes_as_sqlite() {
    let Some(db) =
        Database::create("an_export_through_postgresql_is_incremental_and_publishes_as_sqlite")
    else {
        return;
    };
    let mut records: Vec<TestRecord> = (1..=40).map(|i| record(i, "2024-05-01", 0)).collect();
    let server = TestServer::builder(records.clone()).page_size(7).start();
    server.set_response_date("2024-05-02T00:00:00Z");
    let root = tempfile::tempdir().unwrap();
    let (pg_out, sqlite_out) = (root.path().join("pg"), root.path().join("sqlite"));
    let sqlite_state = root.path().join("state");
    let via_pg = ["--state-url", db.url.as_str()];
    let sqlite_state_arg = sqlite_state.to_str().unwrap();
    let via_sqlite = ["--state", sqlite_state_arg];

    tokio::task::block_in_place(|| {
        succeeded(&export(&server, &pg_out, &via_pg));
        succeeded(&export(&server, &sqlite_out, &via_sqlite));
    });
    assert_eq!(snapshot(&pg_out), snapshot(&sqlite_out), "the first export");

    // Changes upstream: an update, a deletion, a new record.
    records[4] = record(5, "2024-05-03", 1);
    records[9] = TestRecord::new("oai:test:10", "2024-05-03").deleted();
    records.push(record(41, "2024-05-03", 0));
    server.set_records(records.clone());
    server.set_response_date("2024-05-04T00:00:00Z");
    let before = server.list_requests().len();
    tokio::task::block_in_place(|| succeeded(&export(&server, &pg_out, &via_pg)));
    let asked = server.list_requests();
    let asked = &asked[before..];
    assert!(!asked.is_empty());
    assert!(
        asked
            .iter()
            .all(|s| s.query.contains("&from=2024-05-") || s.query.contains("resumptionToken"))
            && asked[0].query.contains("&from="),
        "the second export through PostgreSQL asks for the changes alone: {:?}",
        asked.iter().map(|s| &s.query).collect::<Vec<_>>()
    );
    tokio::task::block_in_place(|| succeeded(&export(&server, &sqlite_out, &via_sqlite)));
    assert_eq!(
        snapshot(&pg_out),
        snapshot(&sqlite_out),
        "the incremental export"
    );
    let sitemap = String::from_utf8(snapshot(&pg_out)["sitemap-1.xml"].clone()).unwrap();
    assert!(sitemap.contains("https://repo.example/record/5/v1"));
    assert!(!sitemap.contains("https://repo.example/record/10/"));

    // The store is the repository's, named after its base URL, in the database.
    let url = StateUrl::parse(&db.url).unwrap();
    let store = Store::open_postgres(&url, &server.url()).unwrap();
    assert_eq!(store.counts().unwrap().live, 40);
    assert_eq!(store.live().unwrap(), 40);
}

/// A database that cannot be reached, or does not exist, fails the export with an error that
/// names it, without its password, and leaves the output folder untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_database_is_named_without_its_password() {
    let server = TestServer::start((1..=3).map(|i| record(i, "2024-05-01", 0)).collect());
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("out");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cases = vec![(
        format!("postgres://bridge:s3cret@127.0.0.1:{port}/oai"),
        format!("postgres://bridge@127.0.0.1:{port}/oai"),
    )];
    if let Ok(admin) = std::env::var("OAI_BRIDGE_TEST_POSTGRES")
        && !admin.is_empty()
    {
        let mut url = url::Url::parse(&admin).unwrap();
        url.set_path("/no_such_database");
        url.set_password(Some("s3cret")).unwrap();
        let shown = StateUrl::parse(url.as_str()).unwrap().redacted();
        assert!(shown.ends_with("/no_such_database"), "{shown}");
        cases.push((url.to_string(), shown));
    }
    for (given, shown) in cases {
        let output =
            tokio::task::block_in_place(|| export(&server, &out, &["--state-url", &given]));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success());
        assert!(
            stderr.contains(&format!(
                "state store {shown} (repository \"{}\")",
                server.url()
            )),
            "{stderr}"
        );
        assert!(stderr.contains("cannot connect"), "{stderr}");
        assert!(!stderr.contains("s3cret"), "{stderr}");
        assert!(!out.exists(), "the output is untouched");
    }
    // A URL that is no PostgreSQL URL is a usage error naming the flag, not its value.
    let output = tokio::task::block_in_place(|| {
        export(
            &server,
            &out,
            &["--state-url", "mysql://bridge:s3cret@h/oai"],
        )
    });
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("--state-url"), "{stderr}");
    assert!(!stderr.contains("s3cret"), "{stderr}");
}
