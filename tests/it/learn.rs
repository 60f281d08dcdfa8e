//! Rules learned from the web (issue 29, point 3), on a loopback test web: a site (the
//! repository's pages), a Handle and a DOI resolver that redirect, each its own listener, and
//! an OAI Static Repository whose baseURL is on the site. Exports through the binary, with
//! the resolvers named by the environment.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::golden::{files, locs_of};

/// A loopback web server answering each path of `routes` with a status and a `Location`
/// (empty: none; for a 200, the text is the body instead), and 404 elsewhere; it runs until the
/// test ends.
fn web(routes: BTreeMap<String, (u16, String)>) -> String {
    web_counted(routes).0
}

/// [`web`], and how many requests it has had.
fn web_counted(routes: BTreeMap<String, (u16, String)>) -> (String, Arc<AtomicUsize>) {
    let (origin, hits, _) = web_shared(routes);
    (origin, hits)
}

/// The routes of a [`web_shared`] server, which a test may change while it runs.
type Routes = Arc<Mutex<BTreeMap<String, (u16, String)>>>;

/// [`web_counted`], and its routes to change. A route whose location is `/slow` is never
/// answered (a resolver that hangs).
fn web_shared(routes: BTreeMap<String, (u16, String)>) -> (String, Arc<AtomicUsize>, Routes) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let routes = Arc::new(Mutex::new(routes));
    let shared = routes.clone();
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let routes = routes.clone();
            counted.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let n = stream.read(&mut buf).unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]);
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
                let route = routes.lock().unwrap().get(&path).cloned();
                let (status, location) = route.unwrap_or((404, String::new()));
                if location == "/slow" {
                    // Holds the connection, answering nothing, longer than any client waits.
                    std::thread::sleep(std::time::Duration::from_secs(60));
                    return;
                }
                let (location, body) = match (status, location.is_empty()) {
                    (_, true) => (String::new(), String::new()),
                    (200, false) => (String::new(), location),
                    (_, false) => (format!("Location: {location}\r\n"), String::new()),
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status} X\r\n{location}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    (origin, hits, shared)
}

/// A Static Repository at `base` with `records` (`(oai id, [dc:identifier])`).
fn repository(dir: &Path, base: &str, sample: &str, records: &[(String, Vec<String>)]) -> String {
    let mut xml = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<Repository xmlns="http://www.openarchives.org/OAI/2.0/static-repository" xmlns:oai="http://www.openarchives.org/OAI/2.0/">
  <Identify>
    <oai:repositoryName>Test</oai:repositoryName>
    <oai:baseURL>{base}</oai:baseURL>
    <oai:protocolVersion>2.0</oai:protocolVersion>
    <oai:adminEmail>a@example.org</oai:adminEmail>
    <oai:earliestDatestamp>2020-01-01</oai:earliestDatestamp>
    <oai:deletedRecord>no</oai:deletedRecord>
    <oai:granularity>YYYY-MM-DD</oai:granularity>
    <oai:description><oai-identifier xmlns="http://www.openarchives.org/OAI/2.0/oai-identifier"><scheme>oai</scheme><repositoryIdentifier>t</repositoryIdentifier><delimiter>:</delimiter><sampleIdentifier>{sample}</sampleIdentifier></oai-identifier></oai:description>
  </Identify>
  <ListMetadataFormats><oai:metadataFormat><oai:metadataPrefix>oai_dc</oai:metadataPrefix><oai:schema>http://www.openarchives.org/OAI/2.0/oai_dc.xsd</oai:schema><oai:metadataNamespace>http://www.openarchives.org/OAI/2.0/oai_dc/</oai:metadataNamespace></oai:metadataFormat></ListMetadataFormats>
  <ListRecords metadataPrefix="oai_dc">
"#
    );
    for (id, identifiers) in records {
        xml.push_str(&format!(
            "<oai:record><oai:header><oai:identifier>{id}</oai:identifier><oai:datestamp>2021-01-01</oai:datestamp></oai:header><oai:metadata><oai_dc:dc xmlns:oai_dc=\"http://www.openarchives.org/OAI/2.0/oai_dc/\" xmlns:dc=\"http://purl.org/dc/elements/1.1/\"><dc:title>T</dc:title>"
        ));
        for v in identifiers {
            xml.push_str(&format!("<dc:identifier>{v}</dc:identifier>"));
        }
        xml.push_str("</oai_dc:dc></oai:metadata></oai:record>\n");
    }
    xml.push_str("  </ListRecords>\n</Repository>\n");
    let path = dir.join("repository.xml");
    std::fs::write(&path, xml).unwrap();
    path.display().to_string()
}

/// Exports `file` with the environment `env` (the resolvers); the sitemap's locations, or the
/// error output.
fn export(file: &str, out: &Path, env: &[(&str, &str)]) -> Result<Vec<String>, String> {
    export_with(file, out, env, &[])
}

/// [`export`] with more arguments.
fn export_with(
    file: &str,
    out: &Path,
    env: &[(&str, &str)],
    args: &[&str],
) -> Result<Vec<String>, String> {
    let mut command = crate::golden::bridge();
    command
        .env_remove("OAI_BRIDGE_CONFIG")
        .env("OAI_BRIDGE_LEARN", "on")
        .args(["export", "--base-url", file, "--out"])
        .arg(out)
        .args(["--no-progress", "-q"]);
    if !args.contains(&"--public-url") {
        command.args(["--public-url", "https://sitemaps.example.org/"]);
    }
    command.args(args);
    for (k, v) in env {
        command.env(k, v);
    }
    let output = command.output().unwrap();
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    Ok(locs_of(&files(out)["sitemap-1.xml"]))
}

/// A Static Repository of [`dspace_records`] whose baseURL is `{site}/oai/request`.
fn dspace_repository(dir: &Path, site: &str) -> String {
    repository(
        dir,
        &format!("{site}/oai/request"),
        "oai:t:123456789/1",
        &dspace_records(),
    )
}

/// The pages of [`dspace_records`] under the UI `ui` (ending in `/`).
fn handle_pages(ui: &str) -> Vec<String> {
    (1..=3)
        .map(|n| format!("{ui}handle/123456789/{n}"))
        .collect()
}

/// A Handle resolver's routes that send the Handles of [`dspace_records`] to the UI `ui`.
fn handles_to(ui: &str) -> BTreeMap<String, (u16, String)> {
    (1..=3)
        .map(|n| {
            (
                format!("/123456789/{n}"),
                (302, format!("{ui}handle/123456789/{n}")),
            )
        })
        .collect()
}

/// A site's routes that serve the pages of [`dspace_records`] under the path `ui`.
fn serving(ui: &str) -> BTreeMap<String, (u16, String)> {
    (1..=3)
        .map(|n| {
            (
                format!("{ui}handle/123456789/{n}"),
                (200, "page".to_owned()),
            )
        })
        .collect()
}

/// Three DSpace records that give their Handles only as `http://hdl.handle.net/...`.
fn dspace_records() -> Vec<(String, Vec<String>)> {
    (1..=3)
        .map(|n| {
            (
                format!("oai:t:123456789/{n}"),
                vec![format!("http://hdl.handle.net/123456789/{n}")],
            )
        })
        .collect()
}

#[test]
fn a_dspace_ui_under_a_path_is_learned_from_the_handle_resolver() {
    let site = web(BTreeMap::new());
    let mut to_ui = BTreeMap::new();
    let mut elsewhere = BTreeMap::new();
    for n in 1..=3 {
        to_ui.insert(
            format!("/123456789/{n}"),
            (302, format!("{site}/xmlui/handle/123456789/{n}")),
        );
        elsewhere.insert(
            format!("/123456789/{n}"),
            (
                302,
                format!("https://another.example.net/handle/123456789/{n}"),
            ),
        );
    }
    let resolver = web(to_ui);
    let wrong = web(elsewhere);
    let tmp = tempfile::tempdir().unwrap();
    let file = dspace_repository(tmp.path(), &site);
    let handle = format!("{resolver}/");
    let locs = export(
        &file,
        &tmp.path().join("a"),
        &[("OAI_BRIDGE_HANDLE_RESOLVER", &handle)],
    )
    .unwrap();
    assert_eq!(locs, handle_pages(&format!("{site}/xmlui/")));
    // Without learning, with a resolver that is down, and with one that sends the Handles to
    // another site: the UI stays the baseURL's root, as before.
    let root: Vec<String> = handle_pages(&format!("{site}/"));
    let down = format!("http://127.0.0.1:{}/", free_port());
    let wrong = format!("{wrong}/");
    for env in [
        vec![
            ("OAI_BRIDGE_LEARN", "off"),
            ("OAI_BRIDGE_HANDLE_RESOLVER", handle.as_str()),
        ],
        vec![("OAI_BRIDGE_HANDLE_RESOLVER", down.as_str())],
        vec![("OAI_BRIDGE_HANDLE_RESOLVER", wrong.as_str())],
    ] {
        let out = tempfile::tempdir().unwrap();
        assert_eq!(export(&file, out.path(), &env).unwrap(), root, "{env:?}");
    }
}

#[test]
fn a_template_is_learned_from_where_the_dois_resolve() {
    let ids = ["ab12c-3de45", "fg67h-8ij90", "kl12m-3no45"];
    // The site's pages: /record/{id} redirects once more to /records/{id}, as Zenodo's does.
    let site = web(ids
        .iter()
        .map(|id| (format!("/record/{id}"), (301, format!("/records/{id}"))))
        .collect());
    let resolver = |target: &dyn Fn(&str) -> String| {
        let routes = ids
            .iter()
            .map(|id| (format!("/10.5555/rec.{id}"), (302, target(id))))
            .collect();
        format!("{}/", web(routes))
    };
    let to_site = resolver(&|id| format!("{site}/record/{id}"));
    let to_publisher = resolver(&|id| format!("https://publisher.example.com/articles/rec.{id}"));
    let tmp = tempfile::tempdir().unwrap();
    // Records with a DOI and nothing else, at an endpoint no platform's row knows.
    let records: Vec<(String, Vec<String>)> = ids
        .iter()
        .map(|id| {
            (
                format!("oai:t:{id}"),
                vec![
                    format!("https://doi.org/10.5555/rec.{id}"),
                    "Some text".to_owned(),
                ],
            )
        })
        .collect();
    let file = repository(
        tmp.path(),
        &format!("{site}/oai/provider"),
        "oai:t:ab12c-3de45",
        &records,
    );
    let locs = export(
        &file,
        &tmp.path().join("a"),
        &[("OAI_BRIDGE_DOI_RESOLVER", &to_site)],
    )
    .unwrap();
    // The last page of the redirects that a template can express: /records/{oai_local}.
    assert_eq!(
        locs,
        ids.iter()
            .map(|id| format!("{site}/records/{id}"))
            .collect::<Vec<_>>()
    );
    // A publisher's page is never the repository's: nothing learned, nothing to publish.
    let failed = export(
        &file,
        &tmp.path().join("b"),
        &[("OAI_BRIDGE_DOI_RESOLVER", &to_publisher)],
    );
    assert!(failed.is_err(), "{failed:?}");
}

#[test]
fn without_a_resolver_a_dspace_ui_is_found_by_asking_for_its_pages() {
    // The site serves the Handle pages under /xmlui/ only; the root answers 404.
    let site = web(serving("/xmlui/"));
    let tmp = tempfile::tempdir().unwrap();
    let file = dspace_repository(tmp.path(), &site);
    let down = format!("http://127.0.0.1:{}/", free_port());
    let locs = export(
        &file,
        &tmp.path().join("a"),
        &[("OAI_BRIDGE_HANDLE_RESOLVER", &down)],
    )
    .unwrap();
    assert_eq!(locs, handle_pages(&format!("{site}/xmlui/")));
}

#[test]
fn what_was_learned_is_kept_in_the_store_and_not_asked_again() {
    let site = web(BTreeMap::new());
    let (resolver, asked) = web_counted(handles_to(&format!("{site}/xmlui/")));
    let tmp = tempfile::tempdir().unwrap();
    let file = dspace_repository(tmp.path(), &site);
    let state = tmp.path().join("state");
    let state = state.to_str().unwrap();
    let handle = format!("{resolver}/");
    let env = [("OAI_BRIDGE_HANDLE_RESOLVER", handle.as_str())];
    let want: Vec<String> = handle_pages(&format!("{site}/xmlui/"));
    let first = export_with(&file, &tmp.path().join("a"), &env, &["--state", state]).unwrap();
    assert_eq!(first, want);
    let after_first = asked.load(Ordering::SeqCst);
    assert!(
        after_first >= 3,
        "the resolver was asked {after_first} times"
    );
    let second = export_with(&file, &tmp.path().join("a"), &env, &["--state", state]).unwrap();
    assert_eq!(second, want);
    assert_eq!(
        asked.load(Ordering::SeqCst),
        after_first,
        "a second run asks the resolver again"
    );
}

/// A sidecar: the gateway harvests its DSpace's Tomcat on loopback, whose records carry proxy
/// Handles. Without more, the pages would be on 127.0.0.1, which is said; the Handle resolver
/// sends them to the site's public host, which the operator named as the public URL's.
#[test]
fn a_sidecar_on_loopback_learns_the_public_ui_of_the_host_it_publishes_for() {
    let (resolver, _) = web_counted(handles_to("https://repo.example.edu/"));
    let tmp = tempfile::tempdir().unwrap();
    let tomcat = format!("http://127.0.0.1:{}", free_port());
    let file = dspace_repository(tmp.path(), &tomcat);
    let handle = format!("{resolver}/");
    let locs = export_with(
        &file,
        &tmp.path().join("a"),
        &[("OAI_BRIDGE_HANDLE_RESOLVER", &handle)],
        &["--public-url", "https://repo.example.edu/sitemaps/"],
    )
    .unwrap();
    assert_eq!(locs, handle_pages("https://repo.example.edu/"));
    // Learning off: the pages on loopback, and the summary says so.
    let output = crate::golden::bridge()
        .args(["export", "--base-url", &file, "--out"])
        .arg(tmp.path().join("b"))
        .args([
            "--public-url",
            "https://repo.example.edu/sitemaps/",
            "--no-progress",
        ])
        .output()
        .unwrap();
    let summary = String::from_utf8_lossy(&output.stdout);
    assert!(
        summary.contains("a loopback or private address no crawler can reach"),
        "{summary}"
    );
}

/// What the site's robots.txt disallows for Googlebot or Bingbot is left out, with its reason;
/// a site without one (404) is not judged.
#[test]
fn what_the_sites_robots_txt_disallows_is_left_out() {
    let robots = "User-agent: *\nAllow: /\n\nUser-agent: bingbot\nDisallow: /handle/123456789/2\n";
    let site = web([("/robots.txt".to_owned(), (200, robots.to_owned()))]
        .into_iter()
        .chain((1..=3).map(|n| (format!("/handle/123456789/{n}"), (200, "page".to_owned()))))
        .collect());
    let tmp = tempfile::tempdir().unwrap();
    let file = dspace_repository(tmp.path(), &site);
    let down = format!("http://127.0.0.1:{}/", free_port());
    // The robots.txt is read from the sites the job names: here the UI the operator gives.
    let ui = format!("{site}/");
    let out = tmp.path().join("a");
    let output = crate::golden::bridge()
        .env("OAI_BRIDGE_LEARN", "on")
        .env("OAI_BRIDGE_HANDLE_RESOLVER", &down)
        .args(["export", "--base-url", &file, "--out"])
        .arg(&out)
        .args([
            "--public-url",
            "https://sitemaps.example.org/",
            "--no-progress",
        ])
        .args(["--ui-url", &ui])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        locs_of(&files(&out)["sitemap-1.xml"]),
        [1, 3]
            .iter()
            .map(|n| format!("{site}/handle/123456789/{n}"))
            .collect::<Vec<_>>()
    );
    assert!(summary.contains("robots_disallowed"), "{summary}");
}

/// A Handle resolver that accepts and never answers is given up on within the harvest's
/// request timeout (`--request-timeout 1`), and the UI is found by asking for its pages.
#[test]
fn a_resolver_that_hangs_is_given_up_on_and_the_pages_are_asked_for() {
    let site = web((1..=3)
        .map(|n| {
            (
                format!("/xmlui/handle/123456789/{n}"),
                (200, "page".to_owned()),
            )
        })
        .collect());
    let (resolver, asked) = web_counted(
        (1..=3)
            .map(|n| (format!("/123456789/{n}"), (302, "/slow".to_owned())))
            .collect(),
    );
    let tmp = tempfile::tempdir().unwrap();
    let file = dspace_repository(tmp.path(), &site);
    let handle = format!("{resolver}/");
    let locs = export_with(
        &file,
        &tmp.path().join("a"),
        &[("OAI_BRIDGE_HANDLE_RESOLVER", &handle)],
        &["--request-timeout", "1"],
    )
    .unwrap();
    assert_eq!(locs, handle_pages(&format!("{site}/xmlui/")));
    // A resolver that does not answer the first Handle is not asked for the others.
    assert_eq!(asked.load(Ordering::SeqCst), 1);
}

/// `[harvest] learn_from_web = false`: no request besides the OAI-PMH ones, whatever the
/// environment allows.
#[test]
fn learn_from_web_false_asks_nothing() {
    let (site, site_asked) = web_counted(BTreeMap::new());
    let (resolver, asked) = web_counted(handles_to(&format!("{site}/xmlui/")));
    let tmp = tempfile::tempdir().unwrap();
    let file = dspace_repository(tmp.path(), &site);
    let config = tmp.path().join("bridge.toml");
    std::fs::write(&config, "[harvest]\nlearn_from_web = false\n").unwrap();
    let handle = format!("{resolver}/");
    let locs = export_with(
        &file,
        &tmp.path().join("a"),
        &[("OAI_BRIDGE_HANDLE_RESOLVER", &handle)],
        &["--config", config.to_str().unwrap()],
    )
    .unwrap();
    assert_eq!(
        locs,
        (1..=3)
            .map(|n| format!("{site}/handle/123456789/{n}"))
            .collect::<Vec<_>>()
    );
    assert_eq!(asked.load(Ordering::SeqCst), 0, "the resolver was asked");
    assert_eq!(site_asked.load(Ordering::SeqCst), 0, "the site was asked");
}

/// Pages on another site than the baseURL's (a scope widened from the records, as arXiv's
/// `export.` host and its pages' host): that site's robots.txt is read too.
#[test]
fn the_robots_txt_of_the_site_the_pages_are_on_is_read() {
    let pages = web([(
        "/robots.txt".to_owned(),
        (200, "User-agent: *\nDisallow: /abs/2\n".to_owned()),
    )]
    .into_iter()
    .chain((1..=3).map(|n| (format!("/abs/{n}"), (200, "page".to_owned()))))
    .collect());
    let oai = web(BTreeMap::new());
    let tmp = tempfile::tempdir().unwrap();
    let records: Vec<(String, Vec<String>)> = (1..=3)
        .map(|n| (format!("oai:t:{n}"), vec![format!("{pages}/abs/{n}")]))
        .collect();
    let file = repository(tmp.path(), &format!("{oai}/oai2"), "oai:t:1", &records);
    let down = format!("http://127.0.0.1:{}/", free_port());
    let locs = export(
        &file,
        &tmp.path().join("a"),
        &[
            ("OAI_BRIDGE_HANDLE_RESOLVER", &down),
            ("OAI_BRIDGE_DOI_RESOLVER", &down),
        ],
    )
    .unwrap();
    assert_eq!(
        locs,
        [1, 3]
            .iter()
            .map(|n| format!("{pages}/abs/{n}"))
            .collect::<Vec<_>>()
    );
}

/// A remembered UI whose pages start to answer 404 (the DSpace moved from `/xmlui/` to
/// `/jspui/`, and the Handle server was told) is learned again at the refresh that adds a page
/// under it, and every record published under the new UI; a refresh that adds nothing asks
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remembered_ui_whose_new_pages_answer_404_is_learned_again() {
    use crate::server::{TestRecord, TestServer};
    let record = |n: u32, date: &str| {
        TestRecord::new(&format!("oai:t:123456789/{n}"), date)
            .url(&format!("http://hdl.handle.net/123456789/{n}"))
    };
    let mut records: Vec<TestRecord> = (1..=3).map(|n| record(n, "2024-05-01")).collect();
    let server = TestServer::start(records.clone());
    let site = web((1..=4)
        .map(|n| {
            (
                format!("/jspui/handle/123456789/{n}"),
                (200, "page".to_owned()),
            )
        })
        .collect());
    let to = |ui: &str| -> BTreeMap<String, (u16, String)> {
        (1..=4)
            .map(|n| {
                (
                    format!("/123456789/{n}"),
                    (302, format!("{site}/{ui}/handle/123456789/{n}")),
                )
            })
            .collect()
    };
    let (resolver, asked, routes) = web_shared(to("xmlui"));
    let tmp = tempfile::tempdir().unwrap();
    let base = server.url();
    let state = tmp.path().join("state");
    let out = tmp.path().join("out");
    let handle = format!("{resolver}/");
    let run = move || {
        let (base, state, out, handle) = (base.clone(), state.clone(), out.clone(), handle.clone());
        async move {
            tokio::task::spawn_blocking(move || {
                export_with(
                    &base,
                    &out,
                    &[("OAI_BRIDGE_HANDLE_RESOLVER", &handle)],
                    &["--state", state.to_str().unwrap()],
                )
            })
            .await
            .unwrap()
            .unwrap()
        }
    };
    let under = |ui: &str, n: u32| -> Vec<String> {
        (1..=n)
            .map(|i| format!("{site}/{ui}/handle/123456789/{i}"))
            .collect()
    };
    assert_eq!(run().await, under("xmlui", 3));

    // The UI moves: its old pages answer 404, the resolver sends the Handles to the new one,
    // and a record is added.
    *routes.lock().unwrap() = to("jspui");
    records.push(record(4, "2024-06-02"));
    server.set_records(records);
    server.set_response_date("2024-06-03T08:00:00Z");
    let before = asked.load(Ordering::SeqCst);
    assert_eq!(run().await, under("jspui", 4));
    assert!(asked.load(Ordering::SeqCst) > before, "not learned again");

    // Learned again, and kept: the next refresh asks the resolver nothing.
    let before = asked.load(Ordering::SeqCst);
    assert_eq!(run().await, under("jspui", 4));
    assert_eq!(asked.load(Ordering::SeqCst), before);
}

/// `check` asks the web as a harvest would, and says what it learned: the sample's pages are
/// those the export publishes.
#[test]
fn check_learns_what_the_export_learns() {
    let site = web((1..=3)
        .map(|n| {
            (
                format!("/xmlui/handle/123456789/{n}"),
                (200, "page".to_owned()),
            )
        })
        .collect());
    let resolver = web(handles_to(&format!("{site}/xmlui/")));
    let tmp = tempfile::tempdir().unwrap();
    let file = dspace_repository(tmp.path(), &site);
    let handle = format!("{resolver}/");
    let output = crate::golden::bridge()
        .env_remove("OAI_BRIDGE_CONFIG")
        .env("OAI_BRIDGE_LEARN", "on")
        .env("OAI_BRIDGE_HANDLE_RESOLVER", &handle)
        .args(["check", &file, "--json"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    let report: serde_json::Value = serde_json::from_str(&text).expect(&text);
    let evidence = report.to_string();
    assert!(
        evidence.contains(&format!(
            "learned: the Handle resolver {handle} sends 3 of the records' Handles to {site}/xmlui/handle/"
        )),
        "{evidence}"
    );
    let pages = report["landing"]["fetched"].to_string();
    assert!(
        pages.contains(&format!("{site}/xmlui/handle/123456789/1")),
        "{text}"
    );
}

/// A loopback port nothing listens on.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A site whose robots.txt does not answer at a refresh (503) is judged by the copy read
/// before, as RFC 9309 (section 2.4) lets a crawler: what it disallows stays out, and the
/// sitemap is patched with the change, not rendered from every record because the rules
/// seemed to change; a 429 is read so too (busy, not missing). With no copy kept (no state),
/// the site's pages are not judged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_robots_txt_that_does_not_answer_is_read_from_the_copy_kept() {
    use crate::server::{TestRecord, TestServer};
    let server = TestServer::builder(Vec::new())
        .page_size(5)
        .pages("/record/")
        .robots("User-agent: *\nDisallow: /record/2\n")
        .start();
    let origin = server.url().trim_end_matches("/oai").to_owned();
    let record = |n: u32, date: &str| {
        TestRecord::new(&format!("oai:t:{n}"), date).url(&format!("{origin}/record/{n}"))
    };
    let mut records: Vec<TestRecord> = (1..=6).map(|n| record(n, "2024-05-01")).collect();
    server.set_records(records.clone());
    let tmp = tempfile::tempdir().unwrap();
    let base = server.url();
    let public = format!("{origin}/sitemaps/");
    let root = tmp.path().to_owned();
    // An export into `out`, through the store in `state` when given: its stderr and `<loc>`s.
    let run = move |out: &str, state: Option<&str>| {
        let (base, public, out) = (base.clone(), public.clone(), root.join(out));
        let state = state.map(|s| root.join(s));
        async move {
            tokio::task::spawn_blocking(move || {
                let mut command = crate::golden::bridge();
                command
                    .env_remove("OAI_BRIDGE_CONFIG")
                    .env_remove("RUST_LOG")
                    .env("OAI_BRIDGE_LEARN", "on")
                    .args(["export", "--base-url", &base, "--no-progress"])
                    .args(["--public-url", &public, "--out"])
                    .arg(&out);
                if let Some(state) = &state {
                    command.arg("--state").arg(state);
                }
                let output = command.output().unwrap();
                let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
                assert!(output.status.success(), "{stderr}");
                (stderr, locs_of(&files(&out)["sitemap-1.xml"]))
            })
            .await
            .unwrap()
        }
    };
    let pages = |numbers: &[u32]| -> Vec<String> {
        numbers
            .iter()
            .map(|n| format!("{origin}/record/{n}"))
            .collect()
    };
    let (_, first) = run("out", Some("state")).await;
    assert_eq!(first, pages(&[1, 3, 4, 5, 6]));

    // The site is down for robots.txt; a record is added.
    server.set_robots_status(Some(503));
    records.push(record(7, "2024-06-02"));
    server.set_records(records);
    server.set_response_date("2024-06-03T08:00:00Z");
    let (said, second) = run("out", Some("state")).await;
    assert_eq!(second, pages(&[1, 3, 4, 5, 6, 7]), "{said}");
    assert!(said.contains("the copy read before is used"), "{said}");
    assert!(
        said.contains(&format!("url={origin}/robots.txt error=HTTP 503")),
        "{said}"
    );
    assert!(
        said.contains("sitemap patched with the changed records"),
        "{said}"
    );

    // A 429 is a busy site, not one without a robots.txt.
    server.set_robots_status(Some(429));
    let (said, third) = run("out", Some("state")).await;
    assert_eq!(third, pages(&[1, 3, 4, 5, 6, 7]), "{said}");
    assert!(said.contains("error=HTTP 429"), "{said}");
    assert!(said.contains("the copy read before is used"), "{said}");
    server.set_robots_status(Some(503));

    // Without a store nothing is kept: the site's pages are not judged.
    let (said, alone) = run("alone", None).await;
    assert_eq!(alone, pages(&[1, 2, 3, 4, 5, 6, 7]), "{said}");
    assert!(said.contains("no copy is kept"), "{said}");
}
