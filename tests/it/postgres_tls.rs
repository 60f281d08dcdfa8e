//! TLS to PostgreSQL (`sslmode`, `sslrootcert`, `sslcert`, `sslkey` in `[state] url`), against
//! the server `OAI_BRIDGE_TEST_POSTGRES_TLS` names: `.ci/postgres.sh tls` starts a PostgreSQL
//! that accepts TLS connections only, its certificate signed by a throwaway CA for the name
//! `localhost` alone, with the CA, another CA and a client certificate in the folder
//! `OAI_BRIDGE_TEST_POSTGRES_TLS_CERTS`. Without it the tests say they are skipped, except on
//! CI, which must run them.
//!
//! The server refuses cleartext, so a store that opens connected over TLS; each failure must
//! name what failed (the certificate's issuer or name) and the settings that refused it.

use std::path::PathBuf;

use oai_bridge::{StateUrl, Store};

use crate::faults::{PUBLIC_URL, SCOPE};
use crate::server::{TestRecord, TestServer};

/// The TLS-only test server: its port and the certificates' folder.
struct TlsServer {
    port: u16,
    certs: PathBuf,
}

impl TlsServer {
    /// The server; `None` (and the test says it is skipped) without one, except on CI.
    fn get(test: &str) -> Option<TlsServer> {
        let Some(url) = std::env::var("OAI_BRIDGE_TEST_POSTGRES_TLS")
            .ok()
            .filter(|v| !v.is_empty())
        else {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must test TLS to PostgreSQL: set OAI_BRIDGE_TEST_POSTGRES_TLS and \
                 OAI_BRIDGE_TEST_POSTGRES_TLS_CERTS (.ci/postgres.sh tls)"
            );
            eprintln!("skipped: {test} (OAI_BRIDGE_TEST_POSTGRES_TLS is unset)");
            return None;
        };
        let certs = std::env::var_os("OAI_BRIDGE_TEST_POSTGRES_TLS_CERTS")
            .expect("OAI_BRIDGE_TEST_POSTGRES_TLS_CERTS names the certificates' folder");
        Some(TlsServer {
            port: url::Url::parse(&url).unwrap().port().unwrap(),
            certs: PathBuf::from(certs),
        })
    }

    /// The URL of the database `postgres` as `user` at `host`, with `parameters` (file names
    /// in the certificates' folder are completed).
    fn url(&self, user: &str, host: &str, parameters: &[(&str, &str)]) -> String {
        let query: Vec<String> = (parameters.iter())
            .map(|(key, value)| match *key {
                "sslrootcert" | "sslcert" | "sslkey" if *value != "system" => {
                    format!("{key}={}", self.certs.join(value).display())
                }
                _ => format!("{key}={value}"),
            })
            .collect();
        format!(
            "postgres://{user}@{host}:{}/postgres?{}",
            self.port,
            query.join("&")
        )
    }

    fn cert(&self, name: &str) -> String {
        self.certs.join(name).display().to_string()
    }
}

/// Opens a store at `url` as repository `repository`: `Ok` once connected and migrated; the
/// error with its causes, as the binary prints it.
fn open(url: &str, repository: &str) -> Result<(), String> {
    let url = StateUrl::parse(url)?;
    Store::open_postgres(&url, repository)
        .map(drop)
        .map_err(|e| {
            let mut said = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(cause) = source {
                said = format!("{said}: {cause}");
                source = cause.source();
            }
            said
        })
}

#[test]
fn verify_full_connects_with_the_right_ca_and_host_name() {
    let Some(server) = TlsServer::get("verify_full_connects_with_the_right_ca_and_host_name")
    else {
        return;
    };
    let url = server.url(
        "postgres",
        "localhost",
        &[("sslmode", "verify-full"), ("sslrootcert", "ca.crt")],
    );
    open(&url, "tls-verify-full").unwrap();
}

#[test]
fn verify_full_fails_with_a_wrong_ca_naming_it() {
    let Some(server) = TlsServer::get("verify_full_fails_with_a_wrong_ca_naming_it") else {
        return;
    };
    let url = server.url(
        "postgres",
        "localhost",
        &[("sslmode", "verify-full"), ("sslrootcert", "wrong-ca.crt")],
    );
    let e = open(&url, "tls-wrong-ca").unwrap_err();
    let port = server.port;
    let wanted = [
        format!(
            "state store postgres://postgres@localhost:{port}/postgres (repository \"tls-wrong-ca\"): cannot connect: "
        ),
        "invalid peer certificate: UnknownIssuer".to_owned(),
        format!(
            "(sslmode=verify-full, roots from {})",
            server.cert("wrong-ca.crt")
        ),
    ];
    for part in wanted {
        assert!(e.contains(&part), "{part:?} not in {e}");
    }
}

#[test]
fn verify_full_fails_with_a_host_name_the_certificate_lacks_and_verify_ca_does_not() {
    let Some(server) = TlsServer::get("verify_full_fails_with_a_host_name_the_certificate_lacks")
    else {
        return;
    };
    // The certificate is for localhost alone; 127.0.0.1 reaches the same server.
    let full = server.url(
        "postgres",
        "127.0.0.1",
        &[("sslmode", "verify-full"), ("sslrootcert", "ca.crt")],
    );
    let e = open(&full, "tls-wrong-name").unwrap_err();
    assert!(
        e.contains("certificate not valid for name \"127.0.0.1\"")
            && e.contains("(sslmode=verify-full, roots from "),
        "{e}"
    );
    // verify-ca checks the chain, not the name; require with a root certificate is verify-ca.
    for mode in ["verify-ca", "require"] {
        let url = server.url(
            "postgres",
            "127.0.0.1",
            &[("sslmode", mode), ("sslrootcert", "ca.crt")],
        );
        open(&url, "tls-any-name").unwrap_or_else(|e| panic!("{mode}: {e}"));
        let wrong = server.url(
            "postgres",
            "127.0.0.1",
            &[("sslmode", mode), ("sslrootcert", "wrong-ca.crt")],
        );
        let e = open(&wrong, "tls-any-name").unwrap_err();
        assert!(e.contains("UnknownIssuer"), "{mode}: {e}");
    }
}

#[test]
fn require_and_prefer_encrypt_and_disable_is_refused_by_a_tls_only_server() {
    let Some(server) = TlsServer::get("require_and_prefer_encrypt") else {
        return;
    };
    for mode in ["require", "prefer"] {
        let url = server.url("postgres", "localhost", &[("sslmode", mode)]);
        open(&url, "tls-require").unwrap_or_else(|e| panic!("{mode}: {e}"));
    }
    // The default on loopback is prefer, which takes the TLS the server offers.
    open(&server.url("postgres", "localhost", &[]), "tls-default").unwrap();
    // The control: cleartext is refused here, so the connections above were TLS.
    let e = open(
        &server.url("postgres", "localhost", &[("sslmode", "disable")]),
        "tls-no",
    )
    .unwrap_err();
    assert!(e.contains("no encryption"), "{e}");
}

#[test]
fn a_client_certificate_lets_its_user_in() {
    let Some(server) = TlsServer::get("a_client_certificate_lets_its_user_in") else {
        return;
    };
    let with_cert = server.url(
        "certuser",
        "localhost",
        &[
            ("sslmode", "verify-full"),
            ("sslrootcert", "ca.crt"),
            ("sslcert", "client.crt"),
            ("sslkey", "client.key"),
        ],
    );
    open(&with_cert, "tls-client-cert").unwrap();
    let without = server.url(
        "certuser",
        "localhost",
        &[("sslmode", "verify-full"), ("sslrootcert", "ca.crt")],
    );
    let e = open(&without, "tls-client-cert").unwrap_err();
    assert!(
        e.contains("cannot connect: ")
            && e.contains("connection requires a valid client certificate"),
        "{e}"
    );
}

/// As a user meets it: `export --state-url` with verify-full publishes through the TLS-only
/// server, and with the wrong CA fails naming the certificate and the settings, and publishes
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_through_verify_full_publishes_and_a_wrong_ca_is_named() {
    let Some(server) = TlsServer::get("an_export_through_verify_full") else {
        return;
    };
    let upstream = TestServer::start(vec![
        TestRecord::new("oai:test:1", "2024-01-01").url("https://repo.example/record/1"),
        TestRecord::new("oai:test:2", "2024-01-02").url("https://repo.example/record/2"),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let export = |url: &str, out: &std::path::Path| {
        tokio::task::block_in_place(|| {
            crate::golden::bridge()
                .args(["export", "--base-url", &upstream.url(), "--out"])
                .arg(out)
                .args(["--public-url", PUBLIC_URL, "--scope", SCOPE])
                .args(["--state-url", url])
                .args(["--no-progress", "--politeness-delay", "0"])
                .env_remove("OAI_BRIDGE_CONFIG")
                .env_remove("OAI_BRIDGE_STATE_URL")
                .output()
                .unwrap()
        })
    };
    let good = server.url(
        "postgres",
        "localhost",
        &[("sslmode", "verify-full"), ("sslrootcert", "ca.crt")],
    );
    let out = dir.path().join("good");
    let ok = export(&good, &out);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let published: String = (std::fs::read_dir(&out).unwrap())
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap_or_default())
        .collect();
    assert!(
        published.contains("https://repo.example/record/2"),
        "{published}"
    );
    let wrong = server.url(
        "postgres",
        "localhost",
        &[("sslmode", "verify-full"), ("sslrootcert", "wrong-ca.crt")],
    );
    let out = dir.path().join("wrong");
    let failed = export(&wrong, &out);
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(!failed.status.success(), "{stderr}");
    assert!(
        stderr.contains("invalid peer certificate: UnknownIssuer")
            && stderr.contains(&format!("roots from {}", server.cert("wrong-ca.crt"))),
        "{stderr}"
    );
    assert!(
        !out.exists(),
        "nothing is published when the store cannot be reached"
    );
}

/// A gateway on a TLS-only database with verify-full: its refresh is claimed through the
/// fleet's asynchronous connection and stored through the store's, both over TLS, and the
/// sitemap is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_refreshes_through_verify_full() {
    use std::io::{BufRead as _, BufReader};
    use std::process::Stdio;
    let Some(server) = TlsServer::get("a_gateway_refreshes_through_verify_full") else {
        return;
    };
    let upstream = TestServer::start(vec![
        TestRecord::new("oai:test:7", "2024-01-01").url("https://repo.example/record/7"),
    ]);
    let root = tempfile::tempdir().unwrap();
    let url = server.url(
        "postgres",
        "localhost",
        &[("sslmode", "verify-full"), ("sslrootcert", "ca.crt")],
    );
    let config = root.path().join("bridge.toml");
    let name = format!("tls-gw-{:x}", fastrand::u32(..));
    std::fs::write(
        &config,
        format!(
            "[server]\npublic_url = \"{PUBLIC_URL}\"\n[state]\nurl = \"{url}\"\n\
             [harvest]\npoliteness_delay_ms = 0\nstart_spread_secs = 0\n\
             [[repository]]\nname = \"{name}\"\nbase_url = \"{}\"\nscope = [\"{SCOPE}\"]\n",
            upstream.url()
        ),
    )
    .unwrap();
    let state = root.path().join("state");
    let mut child = crate::golden::serve_on_loopback(&mut crate::golden::bridge(), &config, &state)
        .env_remove("OAI_BRIDGE_STATE_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let base = (first.strip_prefix("oai-bridge serving on "))
        .unwrap_or_else(|| panic!("{first:?}"))
        .split_whitespace()
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_owned();
    let sitemap = format!("{base}/{name}/sitemap.xml");
    let started = std::time::Instant::now();
    let body = loop {
        let answer = reqwest::get(&sitemap).await.unwrap();
        if answer.status() == 200 {
            break answer.text().await.unwrap();
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "no sitemap within 60 s: {}",
            answer.status()
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    let shard = match body.contains("<sitemapindex") {
        true => (reqwest::get(format!("{base}/{name}/sitemap-1.xml"))
            .await
            .unwrap())
        .text()
        .await
        .unwrap(),
        false => body,
    };
    child.kill().unwrap();
    let _ = child.wait();
    assert!(shard.contains("https://repo.example/record/7"), "{shard}");
}
