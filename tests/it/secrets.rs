//! Issue 33 point 4: secrets never leak. Every command (`export`, `check`, `migrate-state`,
//! `prune`, `serve` and `serve --check-config`) runs with known, distinctive secrets (the
//! database password, the bucket's secret key and session token, the admin token, the
//! `[harvest] headers` values), at every log level and in both log formats, through each
//! failure it can be led into: an upstream answering 401 and 500, a database that is not there
//! and one that refuses the password, a bucket that refuses, configurations that are wrong
//! around a secret. Then all it printed (stdout, stderr) and all the gateway answered (status
//! lines, headers and bodies of its public and admin listeners) is searched for each secret and
//! for the marker inside it (which shows a secret cut short or quoted too).
//!
//! The secrets come through each way they can: the configuration file (readable by others, so
//! that its warning is said), the environment, and files (`*_file` keys, `*_FILE` variables);
//! the fake database checks that the password read from a file is the one it was sent.

use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

use crate::faults::{PUBLIC_URL, SCOPE};
use crate::server::{Fault, TestServer, numbered};

/// The database password.
const DB_PASSWORD: &str = "pw-Zq7Lk3-database-password";
/// The bucket's secret access key.
const BUCKET_SECRET: &str = "bk-Wx9Tj2-bucket-secret-key";
/// The bucket's session token.
const BUCKET_SESSION: &str = "st-Hb5Gc8-bucket-session-token";
/// The admin token (at least 16 characters).
const ADMIN_TOKEN: &str = "at-Mv4Rp8-admin-token-0123456789";
/// A `[harvest] headers` value.
const HEADER_VALUE: &str = "Bearer hv-Qy6Nd1-harvest-header";
/// A `[repository.harvest] headers` value.
const REPO_HEADER_VALUE: &str = "rh-Pk2Vb7-repository-header";
/// A `[repository.indexnow] key` (IndexNow publishes it in a key file on the repository's
/// host, but the gateway shows it nowhere: its status page and `check` write it as `***`).
const INDEXNOW_KEY: &str = "ik-Zr3Lm5-indexnow-key";
/// The bucket's key ID: not a secret (it names the key, as a user name does, and is sent in
/// every request's `Authorization`), given so that the test's bucket sees who signed.
const BUCKET_KEY_ID: &str = "AKIDLEAKTEST";

/// Every secret, by what it is. Each holds a marker of its own (its second part) that nothing
/// else prints; a secret shows when it or its marker does.
const SECRETS: &[(&str, &str)] = &[
    ("the database password", DB_PASSWORD),
    ("the bucket's secret key", BUCKET_SECRET),
    ("the bucket's session token", BUCKET_SESSION),
    ("the admin token", ADMIN_TOKEN),
    ("a [harvest] headers value", HEADER_VALUE),
    ("a [repository.harvest] headers value", REPO_HEADER_VALUE),
    ("the IndexNow key", INDEXNOW_KEY),
];

/// The log levels (`RUST_LOG`, every crate's) and formats each command runs at.
const LOGS: &[(&str, &str)] = &[
    ("warn", "text"),
    ("info", "json"),
    ("debug", "text"),
    ("trace", "text"),
    ("trace", "json"),
];

/// The marker inside `secret`.
fn marker(secret: &str) -> &str {
    secret
        .split(['-', ' '])
        .find(|part| part.len() == 6 && part.bytes().any(|b| b.is_ascii_digit()))
        .expect("each secret holds a marker")
}

/// Everything the processes printed and the gateway answered, each with what it was.
#[derive(Default)]
struct Seen(Vec<(String, String)>);

impl Seen {
    fn add(&mut self, what: impl Into<String>, text: impl Into<String>) {
        self.0.push((what.into(), text.into()));
    }

    /// Each place a secret shows, with the text around it.
    fn leaks(&self) -> Vec<String> {
        let mut leaks = Vec::new();
        for (what, text) in &self.0 {
            for (name, secret) in SECRETS {
                let Some(at) = text.find(marker(secret)) else {
                    continue;
                };
                let around = &text.as_bytes()[at.saturating_sub(200)..(at + 200).min(text.len())];
                let around = String::from_utf8_lossy(around);
                leaks.push(format!("{name} in {what}:\n  ...{around}..."));
            }
        }
        leaks
    }

    /// All text seen by outputs whose description contains `of`.
    fn of(&self, of: &str) -> String {
        (self.0.iter())
            .filter(|(what, _)| what.contains(of))
            .map(|(_, text)| text.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A process's exit code, stdout and stderr; killed after `limit` (a gateway that serves on).
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn run(mut command: Command, limit: Duration) -> Ran {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the oai-bridge binary starts");
    let drain = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = pipe.read_to_end(&mut text);
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let start = Instant::now();
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ran {
        code,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

/// A PostgreSQL server that asks for the password in cleartext, keeps what it was sent, and
/// refuses it, as a server whose password changed does.
struct RefusingDatabase {
    port: u16,
    passwords: Arc<Mutex<Vec<String>>>,
}

impl RefusingDatabase {
    async fn start() -> RefusingDatabase {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let passwords = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&passwords);
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let kept = Arc::clone(&kept);
                tokio::spawn(async move {
                    if let Some(password) = refuse(&mut socket).await {
                        kept.lock().unwrap().push(password);
                    }
                });
            }
        });
        RefusingDatabase { port, passwords }
    }

    fn url(&self, password: Option<&str>) -> String {
        let password = password.map(|p| format!(":{p}")).unwrap_or_default();
        format!("postgres://bridge{password}@127.0.0.1:{}/oai", self.port)
    }
}

/// One connection: TLS declined, the startup message read, the password asked for and read,
/// then `28P01 password authentication failed`. The password sent, if any.
async fn refuse(socket: &mut tokio::net::TcpStream) -> Option<String> {
    async fn message(socket: &mut tokio::net::TcpStream) -> Option<Vec<u8>> {
        let len = socket.read_u32().await.ok()? as usize;
        let mut body = vec![0; len.checked_sub(4)?];
        socket.read_exact(&mut body).await.ok()?;
        Some(body)
    }
    let mut first = message(socket).await?;
    // SSLRequest (80877103) or GSSENCRequest (80877104): no, then the startup message.
    while first.len() == 4 && matches!(first[..], [4, 210, 22, 47 | 48]) {
        socket.write_all(b"N").await.ok()?;
        first = message(socket).await?;
    }
    socket
        .write_all(&[b'R', 0, 0, 0, 8, 0, 0, 0, 3])
        .await
        .ok()?;
    if socket.read_u8().await.ok()? != b'p' {
        return None;
    }
    let body = message(socket).await?;
    let password = String::from_utf8_lossy(body.strip_suffix(&[0]).unwrap_or(&body)).into_owned();
    let mut error = Vec::new();
    for (field, value) in [
        (b'S', "FATAL"),
        (b'V', "FATAL"),
        (b'C', "28P01"),
        (b'M', "password authentication failed for user \"bridge\""),
    ] {
        error.push(field);
        error.extend_from_slice(value.as_bytes());
        error.push(0);
    }
    error.push(0);
    let mut answer = vec![b'E'];
    answer.extend_from_slice(&(error.len() as u32 + 4).to_be_bytes());
    answer.extend_from_slice(&error);
    let _ = socket.write_all(&answer).await;
    Some(password)
}

/// An S3 endpoint that refuses every request with `403 AccessDenied`, as a bucket whose policy
/// or key changed does; it keeps each request's head.
struct RefusingBucket {
    endpoint: String,
    heads: Arc<Mutex<Vec<String>>>,
}

impl RefusingBucket {
    async fn start() -> RefusingBucket {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let heads = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&heads);
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let kept = Arc::clone(&kept);
                tokio::spawn(async move {
                    loop {
                        let mut head = Vec::new();
                        while !head.ends_with(b"\r\n\r\n") {
                            match socket.read_u8().await {
                                Ok(b) => head.push(b),
                                Err(_) => return,
                            }
                        }
                        let head = String::from_utf8_lossy(&head).into_owned();
                        let length = (head.lines())
                            .filter_map(|l| l.split_once(':'))
                            .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                            .and_then(|(_, v)| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        let mut body = vec![0; length];
                        if socket.read_exact(&mut body).await.is_err() {
                            return;
                        }
                        kept.lock().unwrap().push(head);
                        let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>\
                                    AccessDenied</Code><Message>Access Denied</Message></Error>";
                        let answer = format!(
                            "HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\n\
                             Content-Length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if socket.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        RefusingBucket { endpoint, heads }
    }
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// The bridge at a log level and format, with the bucket's credentials in its environment.
fn bridge(log: (&str, &str), bucket: &str) -> Command {
    let mut command = crate::golden::bridge();
    command
        .env("RUST_LOG", log.0)
        .env("OAI_BRIDGE_LOG_FORMAT", log.1)
        .env("AWS_ACCESS_KEY_ID", BUCKET_KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", BUCKET_SECRET)
        .env("AWS_SESSION_TOKEN", BUCKET_SESSION)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ENDPOINT", bucket)
        .env("AWS_ALLOW_HTTP", "true")
        .env_remove("OAI_BRIDGE_STATE_URL")
        .env_remove("OAI_BRIDGE_ADMIN_TOKEN");
    command
}

/// A configuration with the admin token and the headers in it, the repositories `open` (which
/// answers) and `locked` (which refuses), and `extra` at the end of its `[server]`.
fn config(open: &str, locked: &str, server: &str, state: &str) -> String {
    format!(
        "[server]\nadmin_token = \"{ADMIN_TOKEN}\"\n{server}\n\
         [state]\n{state}\n\
         [harvest]\nmax_attempts = 1\npoliteness_delay_ms = 0\nstart_spread_secs = 0\n\
         [harvest.headers]\nAuthorization = \"{HEADER_VALUE}\"\n\
         [[repository]]\nname = \"open\"\nbase_url = \"{open}\"\nscope = [\"{SCOPE}\"]\n\
         public_url = \"{PUBLIC_URL}\"\n\
         [repository.indexnow]\nkey = \"{INDEXNOW_KEY}\"\nendpoint = \"http://127.0.0.1:9/indexnow\"\n\
         [[repository]]\nname = \"locked\"\nbase_url = \"{locked}\"\nscope = [\"{SCOPE}\"]\n\
         public_url = \"{PUBLIC_URL}\"\n\
         [repository.harvest.headers]\nX-Api-Key = \"{REPO_HEADER_VALUE}\"\n"
    )
}

/// Writes `text` to `dir/name`, readable by others (mode 0644), and returns its path.
fn write(dir: &Path, name: &str, text: &str) -> String {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    path.display().to_string()
}

/// GETs and POSTs to a running gateway: each answer's status, headers and body into `seen`;
/// the statuses.
async fn ask(
    seen: &mut Seen,
    label: &str,
    base: &str,
    requests: &[(&str, &str, Option<&str>)],
) -> Vec<u16> {
    let client = reqwest::Client::new();
    let mut statuses = Vec::new();
    for (method, path, token) in requests {
        let mut request = match *method {
            "POST" => client.post(format!("{base}{path}")),
            _ => client.get(format!("{base}{path}")),
        };
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let answer = request.send().await.unwrap();
        statuses.push(answer.status().as_u16());
        let mut text = format!("{:?}\n", answer.status());
        for (name, value) in answer.headers() {
            text.push_str(&format!(
                "{name}: {}\n",
                String::from_utf8_lossy(value.as_bytes())
            ));
        }
        text.push_str(&answer.text().await.unwrap());
        seen.add(format!("{label}: {method} {base}{path}"), text);
    }
    statuses
}

/// Runs `command` for `label`, off the runtime; what it printed goes into `seen`.
async fn ran(seen: &mut Seen, label: String, command: Command) -> Ran {
    let ran = tokio::task::spawn_blocking(move || run(command, Duration::from_secs(60)))
        .await
        .unwrap();
    seen.add(format!("{label}: stdout"), ran.stdout.clone());
    seen.add(format!("{label}: stderr"), ran.stderr.clone());
    ran
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_command_shows_a_secret_at_any_log_level_through_any_failure() {
    let open = TestServer::start(numbered(3));
    let locked = TestServer::start(numbered(3));
    locked.fault_always(Fault::Status(401));
    let failing = TestServer::start(numbered(3));
    failing.fault_always(Fault::Status(500));
    let database = RefusingDatabase::start().await;
    let bucket = RefusingBucket::start().await;
    let nowhere = format!(
        "postgres://bridge:{DB_PASSWORD}@127.0.0.1:{}/oai",
        closed_port()
    );

    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let password_file = write(d, "db-password", &format!("{DB_PASSWORD}\n"));
    let token_file = write(d, "admin-token", &format!("{ADMIN_TOKEN}\n"));
    let url_file = write(d, "state-url", &database.url(Some(DB_PASSWORD)));
    // Everything in the file: the token, the headers, the database's URL with its password.
    let full = write(
        d,
        "full.toml",
        &config(
            &open.url(),
            &locked.url(),
            "publish_url = \"s3://leaks/site/\"",
            &format!("url = \"{}\"", database.url(Some(DB_PASSWORD))),
        ),
    );
    // The gateway that runs: SQLite state, the bucket that refuses.
    let serving = write(
        d,
        "serve.toml",
        &config(
            &open.url(),
            &locked.url(),
            "publish_url = \"s3://leaks/site/\"",
            "",
        ),
    );
    // The same with the password in a file of its own, and the URL without it.
    let by_file = write(
        d,
        "by-file.toml",
        &config(
            &open.url(),
            &failing.url(),
            "",
            &format!(
                "url = \"{}\"\npassword_file = \"{password_file}\"",
                database.url(None)
            ),
        ),
    );
    // Configurations wrong around a secret: each error must name the key, not the value.
    let broken: Vec<(&str, String)> = vec![
        (
            "a token too short for the admin",
            format!("[server]\nadmin_token = \"{}\"\n", marker(ADMIN_TOKEN)),
        ),
        (
            "a token with a space",
            format!("[server]\nadmin_token = \"{ADMIN_TOKEN} x\"\n"),
        ),
        (
            "a token that is not a string",
            format!("[server]\nadmin_token = [\"{ADMIN_TOKEN}\"]\n"),
        ),
        (
            "headers that are not a table",
            format!("[harvest]\nheaders = \"{HEADER_VALUE}\"\n"),
        ),
        (
            "a header value with a line break",
            format!("[harvest.headers]\nAuthorization = \"{HEADER_VALUE}\\nX: y\"\n"),
        ),
        (
            "an IndexNow key with a character IndexNow refuses",
            format!(
                "[[repository]]\nname = \"r\"\nbase_url = \"https://r.example/oai\"\n\
                 [repository.indexnow]\nkey = \"{INDEXNOW_KEY}!\"\n"
            ),
        ),
        (
            "an IndexNow key that is not a string",
            format!(
                "[[repository]]\nname = \"r\"\nbase_url = \"https://r.example/oai\"\n\
                 [repository.indexnow]\nkey = [\"{INDEXNOW_KEY}\"]\n"
            ),
        ),
        (
            "a syntax error on the token's line",
            format!("[server]\nadmin_token = \"{ADMIN_TOKEN}\" x\n"),
        ),
        (
            "a database URL of another kind",
            format!("[state]\nurl = \"mysql://bridge:{DB_PASSWORD}@db.example/oai\"\n"),
        ),
        (
            "a database URL without a host",
            format!("[state]\nurl = \"postgres://bridge:{DB_PASSWORD}@/oai\"\n"),
        ),
        (
            "a database URL with a bad setting",
            format!(
                "[state]\nurl = \"postgres://bridge:{DB_PASSWORD}@db.example/oai?sslmode=sometimes\"\n"
            ),
        ),
        (
            "a database URL with its password in a file too",
            format!(
                "[state]\nurl = \"{}\"\npassword_file = \"{password_file}\"\n",
                database.url(Some(DB_PASSWORD))
            ),
        ),
    ];
    let broken: Vec<(&str, String)> = (broken.into_iter())
        .enumerate()
        .map(|(i, (what, text))| (what, write(d, &format!("broken-{i}.toml"), &text)))
        .collect();

    let mut seen = Seen::default();
    let b = bucket.endpoint.as_str();
    // A store to copy for migrate-state, from an export that succeeds.
    let stored = d.join("stored").display().to_string();
    let mut command = bridge(("info", "text"), b);
    command.args(["export", "--config", &serving, "--repository", "open"]);
    command.args([
        "--state",
        &stored,
        "--out",
        &d.join("out").display().to_string(),
    ]);
    let r = ran(&mut seen, "export that succeeds".to_owned(), command).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    for &log in LOGS {
        let at = format!("RUST_LOG={} {}", log.0, log.1);
        let out = d.join(format!("out-{}-{}", log.0, log.1));
        let out = out.display().to_string();
        let export = |repository: &str, config: &str, target: &str| {
            let mut command = bridge(log, b);
            command.args([
                "export",
                "--config",
                config,
                "--repository",
                repository,
                "--out",
                target,
            ]);
            command
        };
        // The upstream refuses, then fails.
        let r = ran(
            &mut seen,
            format!("{at} export 401"),
            export("locked", &full, &out),
        )
        .await;
        assert_eq!(r.code, Some(1), "{}", r.stderr);
        assert!(r.stderr.contains("401"), "{}", r.stderr);
        let mut command = export("locked", &by_file, &out);
        command.env_remove("AWS_ENDPOINT");
        let r = ran(&mut seen, format!("{at} export 500"), command).await;
        assert!(r.stderr.contains("500"), "{}", r.stderr);
        // The bucket refuses.
        let r = ran(
            &mut seen,
            format!("{at} export to a bucket"),
            export("open", &serving, "s3://leaks/site/"),
        )
        .await;
        assert_eq!(r.code, Some(1), "{}", r.stderr);
        assert!(r.stderr.contains("403"), "{}", r.stderr);
        // The database: not there; refusing the URL's password, the file's, the variable's.
        let mut command = export("open", &serving, &out);
        command.env("OAI_BRIDGE_STATE_URL", &nowhere);
        let r = ran(&mut seen, format!("{at} export, no database"), command).await;
        assert_ne!(r.code, Some(0), "{}", r.stderr);
        let mut command = export("open", &serving, &out);
        command.env("OAI_BRIDGE_STATE_URL", database.url(Some(DB_PASSWORD)));
        let r = ran(&mut seen, format!("{at} export, password refused"), command).await;
        assert!(
            r.stderr.contains("password authentication failed"),
            "{}",
            r.stderr
        );
        let mut command = export("open", &by_file, &out);
        command.env("OAI_BRIDGE_STATE_URL_FILE", &url_file);
        command.env_remove("OAI_BRIDGE_STATE_PASSWORD_FILE");
        let r = ran(
            &mut seen,
            format!("{at} export, URL and password file"),
            command,
        )
        .await;
        assert!(r.stderr.contains("password_file"), "{}", r.stderr);
        let mut command = export("open", &serving, &out);
        command.env("OAI_BRIDGE_STATE_URL_FILE", &url_file);
        let r = ran(&mut seen, format!("{at} export, URL file"), command).await;
        assert!(
            r.stderr.contains("password authentication failed"),
            "{}",
            r.stderr
        );
        let mut command = export("open", &serving, &out);
        command.env("OAI_BRIDGE_STATE_URL", database.url(None));
        command.env("OAI_BRIDGE_STATE_PASSWORD_FILE", &password_file);
        let r = ran(&mut seen, format!("{at} export, password file"), command).await;
        assert!(
            r.stderr.contains("password authentication failed"),
            "{}",
            r.stderr
        );

        // check, of the repository that refuses.
        let mut command = bridge(log, b);
        command.args(["check", "locked", "--config", &full]);
        ran(&mut seen, format!("{at} check 401"), command).await;

        // migrate-state into the database that refuses.
        let mut command = bridge(log, b);
        command.args(["migrate-state", "--config", &full, "--state", &stored]);
        let r = ran(&mut seen, format!("{at} migrate-state"), command).await;
        assert!(
            r.stderr.contains("password authentication failed"),
            "{}",
            r.stderr
        );

        // prune, of the state folder the export left.
        let mut command = bridge(log, b);
        command.args([
            "prune",
            "--config",
            &full,
            "--state-dir",
            &stored,
            "--dry-run",
        ]);
        ran(&mut seen, format!("{at} prune"), command).await;

        // serve --check-config, of the full configuration and of each broken one.
        let mut command = bridge(log, b);
        command.args(["serve", "--check-config", "--config", &full]);
        let r = ran(&mut seen, format!("{at} serve --check-config"), command).await;
        assert!(
            r.stderr.contains("other users can read this file"),
            "{}",
            r.stderr
        );
        for (what, config) in &broken {
            let mut command = bridge(log, b);
            command.args(["serve", "--check-config", "--config", config]);
            let r = ran(
                &mut seen,
                format!("{at} serve --check-config, {what}"),
                command,
            )
            .await;
            assert_eq!(r.code, Some(78), "{what}: {}{}", r.stdout, r.stderr);
        }
        // serve on the database that refuses, and on none.
        let mut command = bridge(log, b);
        command.args(["serve", "--config", &full, "--listen", "127.0.0.1:0"]);
        command.args(["--admin-listen", "127.0.0.1:0"]);
        let state = d.join(format!("state-{}-{}", log.0, log.1));
        command.arg("--state-dir").arg(&state);
        let r = ran(&mut seen, format!("{at} serve, password refused"), command).await;
        // The server's reason, not only "db error".
        assert!(
            r.stderr.contains("password authentication failed"),
            "{}",
            r.stderr
        );
        let mut command = bridge(log, b);
        command.args(["serve", "--config", &serving, "--listen", "127.0.0.1:0"]);
        command.args(["--admin-listen", "127.0.0.1:0", "--state-url", &nowhere]);
        command.arg("--state-dir").arg(&state);
        ran(&mut seen, format!("{at} serve, no database"), command).await;

        // serve that runs: its listeners asked everything, with and without the token.
        serve(&mut seen, &at, log, b, &serving, &token_file, &state).await;
    }
    assert!(
        (database.passwords.lock().unwrap().iter()).all(|p| p == DB_PASSWORD),
        "the database was sent the password of the URL, the file and the variable"
    );
    assert!(
        !database.passwords.lock().unwrap().is_empty(),
        "the database was asked"
    );
    assert!(
        !bucket.heads.lock().unwrap().is_empty(),
        "the bucket was asked"
    );
    let status = seen.of("GET http");
    assert!(status.contains("401"), "the status page shows the failure");
    let leaks = seen.leaks();
    assert!(
        leaks.is_empty(),
        "{} leaks:\n{}",
        leaks.len(),
        leaks.join("\n\n")
    );
}

/// `serve` with the token from `OAI_BRIDGE_ADMIN_TOKEN_FILE`, until the refusing upstream's
/// failure and the refusing bucket's show on the status page; every route of both listeners
/// asked, the admin ones with no token, a wrong one and the right one; then SIGTERM.
async fn serve(
    seen: &mut Seen,
    at: &str,
    log: (&str, &str),
    bucket: &str,
    config: &str,
    token_file: &str,
    state: &Path,
) {
    // The token from `OAI_BRIDGE_ADMIN_TOKEN_FILE` alone: without `admin_token` in the
    // configuration, the admin endpoints take the token only if the twin's file was read.
    let text = std::fs::read_to_string(config).unwrap();
    let text = text.replace(&format!("admin_token = \"{ADMIN_TOKEN}\"\n"), "");
    let config = Path::new(config).with_file_name("serve-token-file.toml");
    std::fs::write(&config, text).unwrap();
    let mut command = bridge(log, bucket);
    let state = state.with_extension("serve");
    crate::golden::serve_on_loopback(&mut command, &config, &state)
        .env("OAI_BRIDGE_ADMIN_TOKEN_FILE", token_file)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = stderr.read_to_end(&mut text);
        String::from_utf8_lossy(&text).into_owned()
    });
    let (lines, stdout) = tokio::task::spawn_blocking(move || {
        use std::io::BufRead as _;
        let mut lines = std::io::BufReader::new(stdout).lines().map(Result::unwrap);
        let first: Vec<String> = lines.by_ref().take(2).collect();
        (
            first,
            std::thread::spawn(move || lines.collect::<Vec<_>>().join("\n")),
        )
    })
    .await
    .unwrap();
    let last = |line: &String| line.split_whitespace().last().unwrap().to_owned();
    let public = last(&lines[0]);
    let admin = last(&lines[1]);
    let client = reqwest::Client::new();
    let start = Instant::now();
    loop {
        let page = client
            .get(&admin)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if page.contains("401") && page.contains("last upload") {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{at}: the status page shows both failures:\n{page}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let label = format!("{at} serve");
    let wrong = "wrong-token-0123456789abcdef";
    let statuses = ask(
        seen,
        &label,
        &admin,
        &[
            ("GET", "", None),
            ("GET", "metrics", None),
            ("GET", "readyz?repository=locked", None),
            ("POST", "-/refresh/locked", None),
            ("POST", "-/refresh/locked", Some(wrong)),
            ("POST", "-/refresh/locked", Some(ADMIN_TOKEN)),
            ("POST", "-/reload", Some(wrong)),
            ("POST", "-/reload", Some(ADMIN_TOKEN)),
            ("GET", "", None),
        ],
    )
    .await;
    // The admin endpoints refuse no token and a wrong one, and take the file's. With the
    // file's, a refresh is started (202) or, when a retry of the refusing upstream is running
    // at that moment, said to be running (409): an answer given only past the token's check.
    let refresh = if statuses[5] == 409 { 409 } else { 202 };
    assert_eq!(statuses[3..8], [401, 401, refresh, 401, 200], "{label}");
    ask(
        seen,
        &label,
        &public,
        &[
            ("GET", "", None),
            ("GET", "robots.txt", None),
            ("GET", "open/sitemap.xml", None),
            ("GET", "locked/sitemap.xml", None),
            ("GET", "healthz", None),
            ("GET", "readyz", None),
            ("GET", "-/refresh/locked", Some(ADMIN_TOKEN)),
            ("GET", "../../etc/passwd", None),
        ],
    )
    .await;
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let exited = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    seen.add(
        format!("{label}: stdout"),
        lines.join("\n") + &stdout.join().unwrap(),
    );
    seen.add(format!("{label}: stderr"), stderr.join().unwrap());
    assert_eq!(exited.code(), Some(0), "{label}: {}", seen.of(&label));
}
