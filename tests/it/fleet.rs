//! Issue 22 points 4 and 8: a gateway for a fleet of repositories. 200 repositories on 20
//! upstream hosts (10 journals each, as a consortium's OJS servers hold them), configured one
//! file per repository through `include`: every repository is published, no host ever has two
//! requests at once, consecutive requests to a host are spaced by the politeness delay whichever
//! repository sends them, never more than `max_concurrent_refreshes` refreshes run, and a
//! repository's `[repository.harvest] headers` reach its upstream and no other.
//!
//! Each host is a server of its own on its own loopback address (127.0.0.2 to 127.0.0.21; Linux
//! routes all of 127/8 to the loopback interface), so that a host is what an operator means by
//! one: an address. The gateway's limiter counts a host as the URL's host and port, which for
//! these servers is the same thing.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use oai_bridge::{Config, Gateway, Listeners, serve};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use url::Url;

const HOSTS: usize = 20;
const JOURNALS: usize = 10;
/// Records per journal: two `ListRecords` pages (2 + 1), so a refresh is three requests.
const RECORDS: usize = 3;
const MAX_CONCURRENT: usize = 4;
const POLITENESS: Duration = Duration::from_millis(10);
/// Each answer takes this long, longer than the politeness delay: two requests to one host
/// would overlap if the per-host limit let them.
const THINK: Duration = Duration::from_millis(30);

/// Requests in flight across every host: the gateway's concurrency as the upstreams see it.
#[derive(Debug, Default)]
struct Fleet {
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

/// What one host saw.
#[derive(Debug, Default)]
struct HostLog {
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    /// Each request's arrival and the end of its answer (as it starts to be sent), in order of
    /// arrival.
    requests: Mutex<Vec<(Instant, Instant)>>,
    /// Requests of the journal that needs a token that came without it, and requests of the
    /// others that came with one.
    wrong_token: AtomicUsize,
}

/// One upstream host: an OAI-PMH server for its journals `/j0/oai` ... `/j9/oai`; `/j0/oai`
/// requires `Authorization: Bearer host-{ip}`.
struct Host {
    ip: String,
    port: u16,
    log: Arc<HostLog>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Host {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Host {
    async fn start(ip: &str, fleet: Arc<Fleet>) -> Host {
        let listener = TcpListener::bind((ip, 0))
            .await
            .expect("bind a loopback address");
        let port = listener.local_addr().unwrap().port();
        let log = Arc::new(HostLog::default());
        let (ip_owned, served) = (ip.to_owned(), Arc::clone(&log));
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        if let Ok((stream, _)) = accepted {
                            let host = format!("{ip_owned}:{port}");
                            connections.spawn(answer(stream, host, Arc::clone(&served), Arc::clone(&fleet)));
                        }
                    }
                    Some(_) = connections.join_next(), if !connections.is_empty() => {}
                }
            }
        });
        Host {
            ip: ip.to_owned(),
            port,
            log,
            task,
        }
    }

    fn base_url(&self, journal: usize) -> String {
        format!("http://{}:{}/j{journal}/oai", self.ip, self.port)
    }

    fn token(&self) -> String {
        format!("Bearer host-{}", self.ip)
    }
}

/// The name of journal `j` of host `h`.
fn name(h: usize, j: usize) -> String {
    format!("h{h:02}-j{j}")
}

/// The landing pages journal `j` of `host` publishes.
fn landing_pages(host: &str, j: usize) -> BTreeSet<String> {
    (1..=RECORDS)
        .map(|n| format!("http://{host}/j{j}/article/{n}"))
        .collect()
}

/// Answers one request on `stream` (and closes it), counting it in flight on its host and the
/// fleet while it is answered.
async fn answer(mut stream: TcpStream, host: String, log: Arc<HostLog>, fleet: Arc<Fleet>) {
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let arrived = Instant::now();
    let up = |n: &AtomicUsize, max: &AtomicUsize| {
        let now = n.fetch_add(1, Ordering::SeqCst) + 1;
        max.fetch_max(now, Ordering::SeqCst);
    };
    up(&log.in_flight, &log.max_in_flight);
    up(&fleet.in_flight, &fleet.max_in_flight);
    let head = String::from_utf8_lossy(&head).into_owned();
    let target = head.split(' ').nth(1).unwrap_or("/").to_owned();
    let url = Url::parse(&format!("http://{host}{target}")).unwrap();
    let journal: usize = (url.path().trim_start_matches("/j").trim_end_matches("/oai"))
        .parse()
        .unwrap_or(usize::MAX);
    let token = head.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.eq_ignore_ascii_case("authorization")
            .then(|| value.trim().to_owned())
    });
    let wanted = (journal == 0).then(|| format!("Bearer host-{}", url.host_str().unwrap()));
    let (status, body) = if token != wanted {
        log.wrong_token.fetch_add(1, Ordering::SeqCst);
        ("401 Unauthorized", "no".to_owned())
    } else {
        ("200 OK", oai(&url, &host, journal))
    };
    tokio::time::sleep(THINK).await;
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/xml; charset=utf-8\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    // The answer's end, as late as the server can be sure the client has not yet read it all:
    // the client counts the delay from the moment it has, which is later. The request leaves
    // the count then too: once the answer is on its way the client may send its next request,
    // which a server task slow to count this one's end (a loaded machine) took for a second
    // one in flight.
    // It is logged then for the same reason: logged after the write, it could follow the next.
    let ended = Instant::now();
    log.requests.lock().unwrap().push((arrived, ended));
    log.in_flight.fetch_sub(1, Ordering::SeqCst);
    fleet.in_flight.fetch_sub(1, Ordering::SeqCst);
    let _ = stream.write_all(reply.as_bytes()).await;
    let _ = stream.flush().await;
}

/// The OAI-PMH answer to `url` for `journal` of `host`: `Identify`, or a `ListRecords` page.
fn oai(url: &Url, host: &str, journal: usize) -> String {
    let arg = |key: &str| {
        url.query_pairs()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.into_owned())
    };
    let base = format!("http://{host}/j{journal}/oai");
    let verb = arg("verb").unwrap_or_default();
    let inner = match verb.as_str() {
        "Identify" => format!(
            "<Identify><repositoryName>Journal {journal}</repositoryName><baseURL>{base}</baseURL>\
             <protocolVersion>2.0</protocolVersion><adminEmail>a@h.example</adminEmail>\
             <earliestDatestamp>2024-01-01</earliestDatestamp><deletedRecord>persistent\
             </deletedRecord><granularity>YYYY-MM-DD</granularity></Identify>"
        ),
        "ListRecords" => {
            let (numbers, token) = match arg("resumptionToken").as_deref() {
                None => (
                    1..=2,
                    format!(
                        "<resumptionToken completeListSize=\"{RECORDS}\" cursor=\"0\">p2</resumptionToken>"
                    ),
                ),
                Some(_) => (
                    3..=3,
                    format!("<resumptionToken completeListSize=\"{RECORDS}\" cursor=\"2\"/>"),
                ),
            };
            let records: String = numbers
                .map(|n| {
                    format!(
                        "<record><header><identifier>oai:{host}:j{journal}/{n}</identifier>\
                         <datestamp>2024-01-0{n}</datestamp></header><metadata>\
                         <oai_dc:dc xmlns:oai_dc=\"http://www.openarchives.org/OAI/2.0/oai_dc/\" \
                         xmlns:dc=\"http://purl.org/dc/elements/1.1/\"><dc:title>Article {n}\
                         </dc:title><dc:identifier>http://{host}/j{journal}/article/{n}\
                         </dc:identifier></oai_dc:dc></metadata></record>"
                    )
                })
                .collect();
            format!("<ListRecords>{records}{token}</ListRecords>")
        }
        _ => "<error code=\"badVerb\">no</error>".to_owned(),
    };
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<OAI-PMH xmlns=\"http://www.openarchives.org/OAI/2.0/\">\
         <responseDate>2024-06-01T12:00:00Z</responseDate><request verb=\"{verb}\">{base}</request>\
         {inner}</OAI-PMH>"
    )
}

/// The `<loc>`s of a sitemap or index.
fn locs(xml: &str) -> Vec<String> {
    xml.split("<loc>")
        .skip(1)
        .map(|s| s.split("</loc>").next().unwrap().to_owned())
        .collect()
}

/// The main file and one file per repository under `repositories.d/`.
fn write_configuration(dir: &Path, hosts: &[Host]) -> std::path::PathBuf {
    let main = dir.join("bridge.toml");
    std::fs::write(
        &main,
        format!(
            "include = [\"repositories.d/*.toml\"]\n\
             [server]\nstate_dir = \"state\"\nadmin_listen = \"off\"\n\
             [harvest]\nmax_attempts = 1\npoliteness_delay_ms = {}\n\
             max_concurrent_refreshes = {MAX_CONCURRENT}\nper_host_concurrency = 1\n\
             start_spread_secs = 1\n",
            POLITENESS.as_millis()
        ),
    )
    .unwrap();
    let included = dir.join("repositories.d");
    std::fs::create_dir(&included).unwrap();
    for (h, host) in hosts.iter().enumerate() {
        for j in 0..JOURNALS {
            let mut table = format!(
                "[[repository]]\nname = \"{}\"\nbase_url = \"{}\"\nplatform = \"generic\"\n\
                 refresh_interval_secs = 3600\n",
                name(h, j),
                host.base_url(j)
            );
            if j == 0 {
                table.push_str(&format!(
                    "[repository.harvest]\nheaders = {{ Authorization = \"{}\" }}\n",
                    host.token()
                ));
            }
            std::fs::write(included.join(format!("{}.toml", name(h, j))), table).unwrap();
        }
    }
    main
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_of_200_repositories_on_20_hosts_is_published_within_the_limits() {
    let fleet = Arc::new(Fleet::default());
    let mut hosts = Vec::new();
    for i in 0..HOSTS {
        hosts.push(Host::start(&format!("127.0.0.{}", i + 2), Arc::clone(&fleet)).await);
    }
    let dir = tempfile::tempdir().unwrap();
    let config = Config::load(&write_configuration(dir.path(), &hosts)).unwrap();
    assert_eq!(config.repositories.len(), HOSTS * JOURNALS);

    let public = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", public.local_addr().unwrap());
    let gateway = Arc::new(Gateway::new(&config, Url::parse(&url).unwrap()).unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(serve(
        Arc::clone(&gateway),
        Listeners {
            public,
            admin: None,
        },
        Duration::from_secs(5),
        async {
            let _ = stopped.await;
        },
    ));

    let start = Instant::now();
    while !gateway.ready() {
        let waiting = gateway.waiting();
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "{} repositories still without a generation, e.g. {:?}: {:?}",
            waiting.len(),
            waiting.first(),
            waiting
                .first()
                .and_then(|n| gateway.repo(n))
                .and_then(|r| r.status().last_error)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Every repository is published: its index's shards list its three landing pages.
    let client = reqwest::Client::new();
    let get = |path: String| {
        let client = client.clone();
        let url = format!("{url}{}", path.trim_start_matches('/'));
        async move {
            let reply = client.get(&url).send().await.unwrap();
            assert_eq!(reply.status(), 200, "{url}");
            reply.text().await.unwrap()
        }
    };
    for (h, host) in hosts.iter().enumerate() {
        for j in 0..JOURNALS {
            let index = get(format!("/{}/sitemap.xml", name(h, j))).await;
            let mut urls = BTreeSet::new();
            for shard in locs(&index) {
                urls.extend(locs(
                    &get(Url::parse(&shard).unwrap().path().to_owned()).await,
                ));
            }
            let authority = format!("{}:{}", host.ip, host.port);
            assert_eq!(urls, landing_pages(&authority, j), "{}", name(h, j));
        }
    }

    // Never two requests at once to one host; consecutive ones spaced by the politeness
    // delay, whichever journal sent them; the token only where it belongs.
    for host in &hosts {
        let log = &host.log;
        assert_eq!(log.max_in_flight.load(Ordering::SeqCst), 1, "{}", host.ip);
        assert_eq!(log.wrong_token.load(Ordering::SeqCst), 0, "{}", host.ip);
        let requests = log.requests.lock().unwrap().clone();
        assert_eq!(requests.len(), JOURNALS * 3, "{}", host.ip);
        for pair in requests.windows(2) {
            let gap = pair[1].0.saturating_duration_since(pair[0].1);
            assert!(
                gap >= POLITENESS,
                "{}: a request {gap:?} after the one before ended",
                host.ip
            );
        }
    }

    // Never more refreshes at once than the limit, and the limit was used: the gateway's own
    // count, and the upstreams' view of it (a refresh has one request in flight at a time).
    let slots = gateway.refresh_slots();
    assert_eq!(slots.peak, MAX_CONCURRENT, "{slots:?}");
    assert_eq!((slots.running, slots.waiting), (0, 0));
    let upstream_peak = fleet.max_in_flight.load(Ordering::SeqCst);
    assert!(
        (2..=MAX_CONCURRENT).contains(&upstream_peak),
        "{upstream_peak} requests at once across the hosts"
    );

    let _ = stop.send(());
    served.await.unwrap();
}
