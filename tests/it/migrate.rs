//! `oai-bridge migrate-state` through the real binary: an export's SQLite state and a gateway's
//! state directory move into PostgreSQL; the next export through the database continues
//! incrementally from the moved state and publishes what an export through the SQLite store
//! publishes, byte for byte; a repository the database already holds is refused (and the
//! others are moved all the same) unless replaced; a dry run writes nothing; the SQLite files
//! are left as they were. The server is the one `OAI_BRIDGE_TEST_POSTGRES` names; without
//! it the tests say they are skipped, except on CI.

use std::path::Path;
use std::process::Output;

use oai_bridge::{Record, StateUrl, Store};

use crate::faults::{PUBLIC_URL, SCOPE, snapshot};
use crate::postgres::{Database, off_runtime};
use crate::server::{TestRecord, TestServer};

/// `oai-bridge migrate-state {args}` in an environment of `vars` alone (of its settings).
fn migrate(args: &[&str], vars: &[(&str, &str)]) -> Output {
    crate::golden::bridge()
        .arg("migrate-state")
        .args(args)
        .env_remove("OAI_BRIDGE_CONFIG")
        .env_remove("OAI_BRIDGE_STATE_URL")
        .env_remove("OAI_BRIDGE_STATE_DIR")
        .envs(vars.iter().copied())
        .output()
        .unwrap()
}

/// `oai-bridge export` of `server` into `out`, with `flags` (its store among them).
fn export(server: &TestServer, out: &Path, flags: &[&str]) -> Output {
    crate::golden::bridge()
        .args(["export", "--base-url", &server.url(), "--out"])
        .arg(out)
        .args(["--public-url", PUBLIC_URL, "--scope", SCOPE])
        .args(flags)
        .args(["--no-progress", "-q", "--politeness-delay", "0"])
        .env_remove("OAI_BRIDGE_CONFIG")
        .env_remove("OAI_BRIDGE_STATE_URL")
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[track_caller]
fn succeeded(output: &Output) -> String {
    assert!(
        output.status.success(),
        "{}\n{}",
        text(&output.stdout),
        text(&output.stderr)
    );
    text(&output.stdout)
}

fn record(i: usize, date: &str, version: u32) -> TestRecord {
    TestRecord::new(&format!("oai:test:{i}"), date)
        .url(&format!("https://repo.example/record/{i}/v{version}"))
        .title(&format!("Record {i}"))
}

/// The URL of `db` with a password, which trust authentication ignores: never shown.
fn with_password(db: &Database) -> String {
    let mut url = url::Url::parse(&db.url).unwrap();
    url.set_password(Some("s3cret")).unwrap();
    url.to_string()
}

/// `oai_bridge_*` tables in `db`.
fn tables(db: &Database) -> i64 {
    off_runtime(|| {
        let mut client = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
        client
            .query_one(
                "SELECT count(*) FROM information_schema.tables
                 WHERE table_name LIKE 'oai_bridge_%'",
                &[],
            )
            .unwrap()
            .get(0)
    })
}

/// The repositories `db` holds rows of, in any table of the stores.
fn repositories(db: &Database) -> Vec<String> {
    off_runtime(|| {
        let mut client = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
        client
            .query(
                "SELECT repository FROM oai_bridge_records UNION SELECT repository FROM oai_bridge_changes
                 UNION SELECT repository FROM oai_bridge_shared
                 UNION SELECT repository FROM oai_bridge_rejected
                 UNION SELECT repository FROM oai_bridge_state
                 UNION SELECT repository FROM oai_bridge_tally
                 ORDER BY 1",
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    })
}

/// The lease row of `repository` in `db`: its holder, and whether it is live; `None` without
/// a row. A row whose `refreshed_at` is set (fresh) is a test failure: a copy releases its
/// lease as not fresh.
fn lease(db: &Database, repository: &str) -> Option<(Option<String>, bool)> {
    off_runtime(|| {
        let mut client = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
        let row = client
            .query_opt(
                "SELECT holder, coalesce(expires_at > now(), false), refreshed_at IS NULL
                 FROM oai_bridge_refreshes WHERE repository = $1",
                &[&repository],
            )
            .unwrap()?;
        assert!(row.get::<_, bool>(2), "{repository}: released as fresh");
        Some((row.get(0), row.get(1)))
    })
}

/// Every file of `from` (flat, as exports are) copied into `to`.
fn copy_folder(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for (name, bytes) in snapshot(from) {
        std::fs::write(to.join(name), bytes).unwrap();
    }
}

/// The live records of a store.
fn live(store: &Store) -> Vec<Record> {
    let mut out = Vec::new();
    store
        .for_each_live(|r| {
            out.push(r);
            Ok::<_, ()>(())
        })
        .unwrap()
        .unwrap();
    out
}

/// An export's state moved into the database: a dry run first writes nothing; the move copies
/// every record and leaves the SQLite file as it was; a second move is refused, naming the
/// repository and the database without its password; the next export through the database
/// asks only for the changes and publishes byte for byte what the next export through the
/// SQLite store publishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exports_state_moves_and_the_next_export_continues_from_it() {
    let Some(db) = Database::create("an_exports_state_moves_and_the_next_export_continues_from_it")
    else {
        return;
    };
    let mut records: Vec<TestRecord> = (1..=40).map(|i| record(i, "2024-05-01", 0)).collect();
    records[20] = TestRecord::new("oai:test:21", "2024-05-01").deleted();
    let server = TestServer::builder(records.clone()).page_size(7).start();
    server.set_response_date("2024-05-02T00:00:00Z");
    let root = tempfile::tempdir().unwrap();
    let (out, out_pg) = (root.path().join("out"), root.path().join("out-pg"));
    let state = root.path().join("state");
    let state_arg = state.to_str().unwrap();
    let url = with_password(&db);
    tokio::task::block_in_place(|| succeeded(&export(&server, &out, &["--state", state_arg])));
    let store_file = state.join(oai_bridge::STORE_FILE);
    let sqlite_bytes = std::fs::read(&store_file).unwrap();
    let name = server.url();

    // A dry run: what would be copied, and nothing written.
    let dry = tokio::task::block_in_place(|| {
        migrate(
            &["--state", state_arg, "--state-url", &url, "--dry-run"],
            &[],
        )
    });
    let stdout = succeeded(&dry);
    assert!(
        stdout.contains(&format!(
            "{name}: would copy 40 records (39 live, 1 deleted)"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains("harvested up to 2024-05-02T00:00:00Z"),
        "{stdout}"
    );
    // How the store was named: no --repository, no configuration, so after its source.
    assert!(
        stdout.contains(
            "(named after its source URL, as export --state-url names it without --repository)"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("nothing was written"), "{stdout}");
    assert!(!stdout.contains("s3cret"), "{stdout}");
    assert_eq!(tables(&db), 0, "a dry run makes no table");

    // The move, with the database from the environment.
    let moved = tokio::task::block_in_place(|| {
        migrate(
            &["--state", state_arg],
            &[("OAI_BRIDGE_STATE_URL", url.as_str())],
        )
    });
    let stdout = succeeded(&moved);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(
        lines[0].starts_with(&format!("{name}: 40 records copied in ")),
        "{stdout}"
    );
    assert!(
        lines[1].starts_with("copied 1 of 1 repository (40 records)"),
        "{stdout}"
    );
    assert!(!stdout.contains("s3cret"), "{stdout}");
    assert_eq!(std::fs::read(&store_file).unwrap(), sqlite_bytes);
    let state_url = StateUrl::parse(&db.url).unwrap();
    let sqlite = Store::open(&store_file).unwrap();
    let moved_store = Store::open_postgres(&state_url, &name).unwrap();
    assert_eq!(moved_store.state().unwrap(), sqlite.state().unwrap());
    assert_eq!(live(&moved_store), live(&sqlite));
    assert_eq!(moved_store.counts().unwrap(), sqlite.counts().unwrap());
    drop((sqlite, moved_store));

    // Again: refused, the error naming the repository and the database, never the password.
    for extra in [&[][..], &["--dry-run"][..]] {
        let again = tokio::task::block_in_place(|| {
            migrate(
                &[&["--state", state_arg, "--state-url", &url], extra].concat(),
                &[],
            )
        });
        let stderr = text(&again.stderr);
        assert_eq!(again.status.code(), Some(1), "{extra:?}: {stderr}");
        let shown = StateUrl::parse(&db.url).unwrap().redacted();
        assert!(
            stderr.contains(&format!(
                "state store {shown} (repository \"{name}\"): already holds rows"
            )),
            "{stderr}"
        );
        assert!(stderr.contains("--replace"), "{stderr}");
        assert!(!stderr.contains("s3cret"), "{stderr}");
        assert!(
            text(&again.stdout).contains(&format!("failed: {name}")),
            "{}",
            text(&again.stdout)
        );
    }
    let replaced = tokio::task::block_in_place(|| {
        migrate(
            &["--state", state_arg, "--state-url", &url, "--replace"],
            &[],
        )
    });
    succeeded(&replaced);

    // Changes upstream: an update, a deletion, a new record. The export through the database
    // continues from the moved state: the changes alone, published as through SQLite.
    copy_folder(&out, &out_pg);
    records[4] = record(5, "2024-05-03", 1);
    records[9] = TestRecord::new("oai:test:10", "2024-05-03").deleted();
    records.push(record(41, "2024-05-03", 0));
    server.set_records(records);
    server.set_response_date("2024-05-04T00:00:00Z");
    let before = server.list_requests().len();
    tokio::task::block_in_place(|| succeeded(&export(&server, &out_pg, &["--state-url", &db.url])));
    let asked = server.list_requests();
    let asked = &asked[before..];
    assert!(
        !asked.is_empty()
            && asked[0].query.contains("&from=2024-05-01")
            && asked
                .iter()
                .all(|s| s.query.contains("&from=") || s.query.contains("resumptionToken")),
        "the export through the database asks for the changes alone: {:?}",
        asked.iter().map(|s| &s.query).collect::<Vec<_>>()
    );
    tokio::task::block_in_place(|| succeeded(&export(&server, &out, &["--state", state_arg])));
    assert_eq!(snapshot(&out_pg), snapshot(&out));
    let sitemap = text(&snapshot(&out_pg)["sitemap-1.xml"]);
    assert!(sitemap.contains("https://repo.example/record/5/v1"));
    assert!(sitemap.contains("https://repo.example/record/41/v0"));
    assert!(!sitemap.contains("https://repo.example/record/10/"));
}

/// A gateway's state directory, as `serve` lays it out (a folder per repository), moves
/// repository by repository, its folder and database from `--config`: one the database holds
/// already is refused while the others are moved, and moved in turn with `--repository` and
/// `--replace`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateways_state_directory_moves_repository_by_repository() {
    let Some(db) = Database::create("a_gateways_state_directory_moves_repository_by_repository")
    else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let state = root.path().join("state");
    let names = ["alpha", "beta", "gamma"];
    let servers: Vec<TestServer> = (names.iter().enumerate())
        .map(|(n, _)| {
            let records = (1..=5 + 3 * n)
                .map(|i| record(i, "2024-05-01", 0))
                .collect();
            let server = TestServer::builder(records).page_size(4).start();
            server.set_response_date("2024-05-02T00:00:00Z");
            server
        })
        .collect();
    let url = with_password(&db);
    let mut config = format!(
        "[server]\nstate_dir = {:?}\npublic_url = \"https://sitemaps.example/\"\n\n\
         [state]\nurl = {url:?}\n",
        state.to_str().unwrap()
    );
    for (name, server) in names.iter().zip(&servers) {
        config.push_str(&format!(
            "\n[[repository]]\nname = \"{name}\"\nbase_url = \"{}\"\nscope = [\"{SCOPE}\"]\n",
            server.url()
        ));
    }
    let config_file = root.path().join("bridge.toml");
    std::fs::write(&config_file, config).unwrap();
    let config_arg = config_file.to_str().unwrap();
    // Each repository's store where `serve` keeps it: `{state_dir}/{name}/store.sqlite`.
    for (name, server) in names.iter().zip(&servers) {
        let dir = state.join(name);
        let out = root.path().join("out").join(name);
        tokio::task::block_in_place(|| {
            succeeded(&export(server, &out, &["--state", dir.to_str().unwrap()]))
        });
    }
    // What else a gateway keeps there is no repository to move.
    std::fs::write(state.join("gateway.lock"), "").unwrap();
    std::fs::create_dir_all(state.join("elsewhere")).unwrap();
    std::fs::write(state.join("elsewhere").join("current"), "g1").unwrap();

    // The database holds "beta" already (a gateway ran on it).
    let state_url = StateUrl::parse(&db.url).unwrap();
    let mut beta = Store::open_postgres(&state_url, "beta").unwrap();
    let stray = Record {
        identifier: "oai:stray:1".into(),
        ..Record::default()
    };
    beta.apply_page(1, &[stray], &Default::default(), false)
        .unwrap();
    drop(beta);

    let moved = tokio::task::block_in_place(|| migrate(&["--config", config_arg], &[]));
    let (stdout, stderr) = (text(&moved.stdout), text(&moved.stderr));
    assert_eq!(moved.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stdout.contains("alpha: 5 records copied in "), "{stdout}");
    assert!(stdout.contains("gamma: 11 records copied in "), "{stdout}");
    assert!(!stdout.contains("beta:"), "{stdout}");
    assert!(
        stdout.contains("copied 2 of 3 repositories (16 records)")
            && stdout.contains("failed: beta"),
        "{stdout}"
    );
    assert!(
        stderr.contains("error: beta: state store postgres://")
            && stderr.contains("(repository \"beta\"): already holds rows"),
        "{stderr}"
    );
    assert!(!stderr.contains("s3cret") && !stdout.contains("s3cret"));
    let count = |name: &str| {
        Store::open_postgres(&state_url, name)
            .unwrap()
            .counts()
            .unwrap()
            .live
    };
    assert_eq!((count("alpha"), count("beta"), count("gamma")), (5, 1, 11));
    // The folder without a store is no repository: the database holds nothing of it, nor of
    // any repository but the three.
    assert_eq!(
        repositories(&db),
        ["alpha", "beta", "gamma"],
        "the repositories with rows in any table"
    );
    // Each lease the copies held is free, and the repositories not fresh: a gateway claims
    // them at once and continues from the copies.
    for name in ["alpha", "gamma"] {
        assert_eq!(lease(&db, name), Some((None, false)), "{name}");
    }

    // The one refused, replaced on its own.
    let again = tokio::task::block_in_place(|| {
        migrate(
            &["--config", config_arg, "--repository", "beta", "--replace"],
            &[],
        )
    });
    let stdout = succeeded(&again);
    assert!(stdout.contains("beta: 8 records copied in "), "{stdout}");
    assert!(
        stdout.contains("copied 1 of 1 repository (8 records)"),
        "{stdout}"
    );
    assert_eq!(count("beta"), 8);
    let beta = Store::open_postgres(&state_url, "beta").unwrap();
    let sqlite = Store::open(&state.join("beta").join(oai_bridge::STORE_FILE)).unwrap();
    assert_eq!(live(&beta), live(&sqlite));
    assert_eq!(beta.state().unwrap(), sqlite.state().unwrap());

    // A gateway of a fleet refreshing "alpha" (a live lease): refused, in a dry run too, and its
    // lease left as it is.
    off_runtime(|| {
        let mut client = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
        client
            .execute(
                "UPDATE oai_bridge_refreshes SET holder = 'gw-9',
                   expires_at = now() + interval '1 minute' WHERE repository = 'alpha'",
                &[],
            )
            .unwrap();
    });
    for extra in [&["--dry-run"][..], &[][..]] {
        let leased = tokio::task::block_in_place(|| {
            migrate(
                &[
                    &["--config", config_arg, "--repository", "alpha", "--replace"],
                    extra,
                ]
                .concat(),
                &[],
            )
        });
        let stderr = text(&leased.stderr);
        assert_eq!(leased.status.code(), Some(1), "{extra:?}: {stderr}");
        assert!(
            stderr.contains("(repository \"alpha\"): \"gw-9\" holds a live lease"),
            "{stderr}"
        );
        assert_eq!(lease(&db, "alpha"), Some((Some("gw-9".to_owned()), true)));
    }

    // A store folder that is no configured repository: copied under its folder's name, and
    // said so.
    std::fs::create_dir_all(state.join("extra")).unwrap();
    std::fs::copy(
        state.join("alpha").join(oai_bridge::STORE_FILE),
        state.join("extra").join(oai_bridge::STORE_FILE),
    )
    .unwrap();
    let extra = tokio::task::block_in_place(|| {
        migrate(&["--config", config_arg, "--repository", "extra"], &[])
    });
    let stdout = succeeded(&extra);
    assert!(
        stdout.contains("extra: 5 records copied in ")
            && stdout.contains(
                " s (not a [[repository]] of the config: copied all the same, under its \
                 folder's name)\n"
            ),
        "{stdout}"
    );

    // A repository the state directory does not hold is an error before anything is done.
    let unknown = tokio::task::block_in_place(|| {
        migrate(&["--config", config_arg, "--repository", "delta"], &[])
    });
    assert_eq!(unknown.status.code(), Some(1));
    assert!(
        text(&unknown.stderr).contains("no store of the repository \"delta\""),
        "{}",
        text(&unknown.stderr)
    );
}
