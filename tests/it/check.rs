//! `oai-bridge check` against the local test server: what the repository says, the scope and a
//! better one, the host's robots.txt, and the exit code that says whether it can be bridged.

use std::process::Output;

use crate::server::{Fault, TestRecord, TestServer, numbered};

/// Runs `oai-bridge check` on a blocking thread, so that the runtime goes on serving the test
/// server meanwhile.
async fn check(args: &[&str]) -> Output {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        crate::golden::bridge()
            .arg("check")
            .args(args)
            .env_remove("OAI_BRIDGE_CONFIG")
            .env_remove("RUST_LOG")
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

fn json(output: &Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// Records whose landing pages live on the test server itself, under `/record/`.
fn local_records(server: &TestServer, n: usize) -> Vec<TestRecord> {
    let origin = server.url().trim_end_matches("/oai").to_owned();
    (1..=n)
        .map(|i| {
            TestRecord::new(&format!("oai:test:{i}"), "2024-05-01")
                .url(&format!("{origin}/record/{i}"))
                .url(&format!("doi:10.1234/{i}"))
                .set(if i % 2 == 0 { "even" } else { "odd" })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_whose_pages_are_outside_the_scope_gets_a_suggestion() {
    // Landing pages on the repository's host, outside the baseURL's directory /mirror/ (the
    // test server answers OAI-PMH at /mirror/oai too): under Google's rule (`auto` would widen
    // the scope over them itself) nothing is inside the default scope (G-OAI scope rule), and a
    // scope over them is tried on the records.
    let server = TestServer::builder(Vec::new())
        .page_size(5)
        .pages("/record/")
        .start();
    let origin = server.url().trim_end_matches("/oai").to_owned();
    server.set_records(
        (1..=12)
            .map(|i| {
                TestRecord::new(&format!("oai:test:{i}"), "2024-05-01")
                    .url(&format!("{origin}/record/{i}"))
            })
            .collect(),
    );
    let url = format!("{origin}/mirror/oai");
    let out = check(&[&url, "--json", "--platform", "generic", "--fetch", "2"]).await;
    assert_eq!(
        out.status.code(),
        Some(1),
        "cannot be bridged as configured"
    );
    let report = json(&out);
    assert_eq!(report["identify"]["granularity"], "YYYY-MM-DD");
    assert_eq!(report["identify"]["deleted_record"], "persistent");
    assert_eq!(report["identify"]["protocol_version"], "2.0");
    assert_eq!(report["formats"]["oai_dc"], true);
    assert_eq!(
        report["sets"]["error"]
            .as_str()
            .map(|e| e.contains("noSetHierarchy")),
        Some(true)
    );
    // Two pages of five records, every landing page outside.
    assert_eq!(report["sample"]["pages"], 2);
    assert_eq!(report["sample"]["records"], 10);
    assert_eq!(report["sample"]["identifiers"]["out_of_scope"], 10);
    assert_eq!(report["scope"]["inside"], 0);
    let prefix = format!("{origin}/record/");
    assert_eq!(report["scope"]["suggested"], prefix.as_str());
    assert_eq!(report["bridgeable"], false);
    let problems = report["problems"].to_string();
    assert!(
        problems.contains(&format!("--scope {prefix}")),
        "{problems}"
    );
    // Issue 29: the suggestion was tried on the records: what it gives them, three of its
    // pages, and (with --fetch) how two of them answer.
    let suggested = &report["landing"]["suggested"];
    assert_eq!(suggested["setting"], format!("scope = [\"{prefix}\"]"));
    assert_eq!(suggested["with_landing_page"], 10);
    assert_eq!(suggested["share"], 1.0);
    assert_eq!(
        suggested["examples"],
        serde_json::json!([
            format!("{prefix}1"),
            format!("{prefix}2"),
            format!("{prefix}3")
        ])
    );
    let statuses: Vec<(String, u64)> = suggested["fetched"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["url"].as_str().unwrap().to_owned(),
                f["status"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [(format!("{prefix}1"), 200), (format!("{prefix}2"), 200)]
    );
    assert_eq!(report["scope"]["tried"]["with_landing_page"], 10);
    // Two ListRecords pages only, not the whole list.
    assert_eq!(server.list_requests().len(), 2);

    // With the suggested scope, it can be bridged.
    let out = check(&[&url, "--scope", &prefix, "--pages", "1"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("landing_page 5"), "{text}");
    assert!(text.contains("can be bridged as configured"), "{text}");

    // Issue 22: each reason not to publish in words, the words of the status page.
    let out = check(&[
        &url,
        "--platform",
        "generic",
        "--pages",
        "1",
        "--fetch",
        "1",
    ])
    .await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "\n             out_of_scope: {}\n",
            oai_bridge::Drop::OutOfScope.meaning()
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "suggested: scope = [\"{prefix}\"] (--scope {prefix}) would give 5 of them one (100%)\n"
        )) && text.contains(&format!("would publish: {prefix}1\n"))
            && text.contains(&format!("fetched      {prefix}1: HTTP 200")),
        "{text}"
    );
}

/// Issue 29, rule 3: the records' pages on another site than the baseURL's are said as a fact
/// (bridge that site as its own repository, or set scope if it is yours), never suggested as a
/// scope: no `try --scope PREFIX`. This test once expected `--scope https://repo.example/record/` for a repository at
/// 127.0.0.1: advice to publish another site's pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_on_another_site_are_a_fact_not_a_suggestion() {
    let server = TestServer::builder(numbered(12)).page_size(5).start();
    let out = check(&[&server.url(), "--json", "--fetch", "3"]).await;
    assert_eq!(out.status.code(), Some(1));
    let report = json(&out);
    assert_eq!(report["scope"]["suggested"], serde_json::Value::Null);
    assert_eq!(report["landing"]["suggested"], serde_json::Value::Null);
    let fact = report["scope"]["elsewhere"].as_str().unwrap();
    assert!(
        fact.starts_with("the records' pages are on https://repo.example/record/, another site")
            && fact.ends_with(
                "bridge it as its own repository, or set scope (--scope) if it is yours"
            ),
        "{fact}"
    );
    let problems = report["problems"].to_string();
    assert!(
        !problems.contains("try --scope") && !problems.contains("--scope https://repo.example"),
        "{problems}"
    );
    assert!(problems.contains("another site"), "{problems}");
    // Nothing was fetched on that site.
    assert!(
        report["landing"]["fetched"].as_array().unwrap().is_empty(),
        "{report:#}"
    );
}

/// Issue 29: a public URL on the repository's own host, under a path (`/sitemaps/` behind the
/// site's proxy, the documented sidecar setup), still needs the cross-submission line: the
/// sitemaps' folder does not hold the pages; at the host's root it does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_url_on_the_same_host_under_a_path_needs_the_sitemap_line() {
    let server = TestServer::builder(Vec::new())
        .robots("User-agent: *\nAllow: /\n")
        .start();
    server.set_records(local_records(&server, 6));
    let url = server.url();
    let origin = url.split("/oai").next().unwrap().to_owned();
    let under_a_path = format!("{origin}/sitemaps/");
    let out = check(&[&url, "--json", "--public-url", &under_a_path]).await;
    let report = json(&out);
    assert_eq!(
        report["robots"]["cross_submission"],
        format!("Sitemap: {under_a_path}sitemap.xml"),
        "{report:#}"
    );
    let at_the_root = format!("{origin}/");
    let out = check(&[&url, "--json", "--public-url", &at_the_root]).await;
    let report = json(&out);
    assert!(report["robots"]["cross_submission"].is_null(), "{report:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn robots_txt_that_disallows_the_landing_pages_is_a_problem() {
    let server = TestServer::builder(Vec::new())
        .robots(
            "User-agent: *\nDisallow: /record/\n\nSitemap: https://elsewhere.example/sitemap.xml\n",
        )
        .start();
    server.set_records(local_records(&server, 6));
    let url = server.url();
    let out = check(&[
        &url,
        "--json",
        "--public-url",
        "https://sitemaps.example/repo/",
    ])
    .await;
    assert_eq!(out.status.code(), Some(1));
    let report = json(&out);
    assert_eq!(report["sets"]["sets"].as_array().unwrap().len(), 2);
    assert_eq!(report["sample"]["identifiers"]["landing_page"], 6);
    assert_eq!(report["sample"]["identifiers"]["persistent_id"], 6);
    let robots = &report["robots"];
    assert_eq!(robots["status"], 200);
    assert_eq!(robots["checked"], 6);
    assert_eq!(robots["disallowed"], 6);
    assert_eq!(
        robots["sitemaps"][0],
        "https://elsewhere.example/sitemap.xml"
    );
    // The gateway is on another host: the repository's robots.txt must point at it.
    assert_eq!(
        robots["cross_submission"],
        "Sitemap: https://sitemaps.example/repo/sitemap.xml"
    );
    assert_eq!(robots["cross_submission_listed"], false);
    assert!(
        report["problems"]
            .to_string()
            .contains("disallows every sampled landing page")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_repository_passes_and_an_unreachable_one_fails_clearly() {
    let server = TestServer::builder(Vec::new())
        .robots("User-agent: *\nDisallow: /admin/\n")
        .start();
    server.set_records(local_records(&server, 3));
    let url = server.url();
    let out = check(&[&url]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("0 of 3 sampled landing pages disallowed"),
        "{text}"
    );

    // Nothing listens there: Identify fails, and the report says where.
    drop(server);
    let out = check(&["http://127.0.0.1:9/oai", "--json"]).await;
    assert_eq!(out.status.code(), Some(1));
    let report = json(&out);
    assert!(
        report["problems"][0]
            .as_str()
            .unwrap()
            .contains("Identify failed (http://127.0.0.1:9/oai?verb=Identify)")
    );
    // A name that is neither a URL nor a configured repository is a usage error naming it.
    let out = check(&["nonesuch", "--config", "bridge.toml"]).await;
    assert_eq!(out.status.code(), Some(78));
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"nonesuch\""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_repository_file_is_checked_from_its_own_identify() {
    // The sample Static Repository, moved onto the test server's origin so that its robots.txt
    // is read from loopback. Its Identify states the gateway's baseURL; the file has no sets.
    let server = TestServer::builder(Vec::new())
        .robots("User-agent: *\nDisallow: /admin/\n")
        .start();
    let origin = server.url().trim_end_matches("/oai").to_owned();
    let sample = std::fs::read_to_string("fixtures/sample-repository.xml").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("static.xml");
    std::fs::write(
        &file,
        sample.replace("https://repository.northbridge.example", &origin),
    )
    .unwrap();
    let records = sample.matches("<oai:record>").count();
    let deleted = sample.matches("status=\"deleted\"").count();

    let path = file.to_str().unwrap().to_owned();
    let scope = format!("{origin}/items/");
    let out = check(&[&path, "--json", "--scope", &scope]).await;
    let report = json(&out);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert_eq!(
        report["identify"]["repository_name"],
        "Northbridge University Research Repository (sample)"
    );
    assert_eq!(report["identify"]["base_url"], format!("{origin}/oai"));
    assert!(
        report["sets"]["error"]
            .as_str()
            .unwrap()
            .contains("no sets")
    );
    // The whole file is one page.
    assert_eq!(report["sample"]["pages"], 1);
    assert_eq!(report["sample"]["records"], records);
    assert_eq!(report["sample"]["deleted"], deleted);
    assert!(
        report["sample"]["identifiers"]["landing_page"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(report["robots"]["status"], 200);
    assert_eq!(report["robots"]["disallowed"], 0);
    // Only robots.txt was asked of the server: the file is read from disk.
    assert!(server.list_requests().is_empty());

    // A file whose Identify states no http(s) baseURL cannot give a scope: the report says so.
    let broken = dir.path().join("broken.xml");
    std::fs::write(
        &broken,
        sample
            .replace(
                "<oai:baseURL>https://repository.northbridge.example/oai</oai:baseURL>",
                "<oai:baseURL>ftp://x/oai</oai:baseURL>",
            )
            .replace("https://repository.northbridge.example", &origin),
    )
    .unwrap();
    let path = broken.to_str().unwrap().to_owned();
    let out = check(&[&path, "--json"]).await;
    assert_eq!(out.status.code(), Some(1));
    let problems = json(&out)["problems"].to_string();
    assert!(
        problems.contains("broken.xml") && problems.contains("ftp://x/oai"),
        "{problems}"
    );
    // With scope prefixes it needs no baseURL, as in a harvest; a file:// URL names it too.
    let target = format!("file://{}", broken.display());
    let scope = format!("{origin}/items/");
    let out = check(&[&target, "--json", "--scope", &scope]).await;
    let report = json(&out);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert_eq!(report["sample"]["records"], records);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oai_dc_missing_from_list_metadata_formats_is_a_warning_and_records_are_still_read() {
    // OAI-41 bad input: ListMetadataFormats does not list oai_dc (which every repository must
    // offer): a warning, and ListRecords with oai_dc is tried all the same; it decides. OAI-01:
    // every request uses one of the protocol's verbs, spelled as the protocol spells them.
    let server = TestServer::builder(Vec::new()).page_size(5).start();
    server.set_records(local_records(&server, 3));
    let formats = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <OAI-PMH xmlns=\"http://www.openarchives.org/OAI/2.0/\">\
         <responseDate>2024-06-01T12:00:00Z</responseDate>\
         <request verb=\"ListMetadataFormats\">{}</request><ListMetadataFormats><metadataFormat>\
         <metadataPrefix>mods</metadataPrefix><schema>http://www.loc.gov/standards/mods/v3/mods-3-7.xsd</schema>\
         <metadataNamespace>http://www.loc.gov/mods/v3</metadataNamespace></metadataFormat>\
         </ListMetadataFormats></OAI-PMH>\n",
        server.url()
    );
    server.fault_on_request(2, Fault::Body(formats));
    let url = server.url();
    let out = check(&[&url, "--json"]).await;
    let report = json(&out);
    let verbs: Vec<Option<String>> = server.requests().into_iter().map(|s| s.verb).collect();
    assert_eq!(
        verbs[..3],
        [
            Some("Identify".to_owned()),
            Some("ListMetadataFormats".to_owned()),
            Some("ListSets".to_owned())
        ]
    );
    // The sample is a harvest of its own (Identify, ListRecords); the last is robots.txt.
    assert!(
        verbs[3..]
            .iter()
            .all(|v| matches!(v.as_deref(), Some("Identify" | "ListRecords") | None)),
        "{verbs:?}"
    );
    assert_eq!(report["formats"]["oai_dc"], false);
    assert_eq!(report["formats"]["prefixes"][0], "mods");
    assert!(
        report["warnings"]
            .to_string()
            .contains("does not list oai_dc"),
        "{report}"
    );
    assert_eq!(report["sample"]["records"], 3);
    assert_eq!(report["sample"]["identifiers"]["landing_page"], 3);
    assert_eq!(out.status.code(), Some(0), "{report}");
}

/// `OAI_BRIDGE_USER_AGENT` names the harvester to the upstream for `check` as for `export`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_sends_the_environment_s_user_agent() {
    let server = TestServer::start(numbered(3));
    let url = server.url();
    let out = tokio::task::spawn_blocking(move || {
        crate::golden::bridge()
            .args(["check", &url, "--fetch", "0"])
            .env_remove("OAI_BRIDGE_CONFIG")
            .env(
                "OAI_BRIDGE_USER_AGENT",
                "repo-team-harvester (ops@example.org)",
            )
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(out.status.code().is_some(), "{out:?}");
    let agents: Vec<Option<String>> = server
        .requests()
        .iter()
        .map(|r| r.user_agent.clone())
        .collect();
    assert!(!agents.is_empty());
    assert!(
        agents
            .iter()
            .all(|a| a.as_deref() == Some("repo-team-harvester (ops@example.org)")),
        "{agents:?}"
    );
}

/// Records in DSpace's shape: a `oai:host:P/S` header, the Handle as the proxy's URL, a
/// citation; no URL of a landing page anywhere.
fn dspace_records(n: usize) -> Vec<TestRecord> {
    (1..=n)
        .map(|i| {
            TestRecord::new(&format!("oai:test:123456789/{i}"), "2024-05-01")
                .url("Smith, J. (2020). A record. Journal, 1.")
                .url(&format!("http://hdl.handle.net/123456789/{i}"))
        })
        .collect()
}

/// Issue 20, point 6: `check` says which platform it found and from what, where the landing
/// pages come from, a sample of them, the share of live records that get one, and what a
/// crawler meets when it requests a few: their status and robots.txt's word.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_tells_what_a_dspace_repository_will_get() {
    let server = TestServer::builder(dspace_records(12))
        .page_size(5)
        .pages("/handle/")
        .robots("User-agent: *\nDisallow: /handle/123456789/2\n")
        .start();
    let origin = server.url().trim_end_matches("/oai").to_owned();
    let out = check(&[&server.url(), "--json", "--fetch", "3"]).await;
    let report = json(&out);
    assert_eq!(out.status.code(), Some(0), "{report:#}");
    let landing = &report["landing"];
    assert_eq!(landing["platform"], "dspace");
    assert_eq!(landing["configured"], false);
    let evidence = landing["evidence"].as_str().unwrap();
    assert!(
        evidence.contains("10 of the first 10 live records carry a Handle"),
        "{evidence}"
    );
    assert_eq!(landing["live_records"], 10);
    assert_eq!(landing["with_landing_page"], 10);
    assert_eq!(landing["share"], 1.0);
    assert_eq!(
        landing["examples"][0],
        format!("{origin}/handle/123456789/1")
    );
    let fetched = landing["fetched"].as_array().unwrap();
    assert_eq!(fetched.len(), 3);
    let got: Vec<(String, u64, bool)> = fetched
        .iter()
        .map(|f| {
            (
                f["url"].as_str().unwrap().to_owned(),
                f["status"].as_u64().unwrap(),
                f["robots_allowed"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (format!("{origin}/handle/123456789/1"), 200, true),
            (format!("{origin}/handle/123456789/2"), 200, false),
            (format!("{origin}/handle/123456789/3"), 200, true),
        ]
    );
    // Each page was requested once, by the check itself.
    let seen: Vec<String> = server
        .requests()
        .iter()
        .map(|r| r.target.clone())
        .filter(|p| p.starts_with("/handle/"))
        .collect();
    assert_eq!(seen.len(), 3, "{seen:?}");
    // The text report says the same.
    let text = String::from_utf8(check(&[&server.url(), "--fetch", "1"]).await.stdout).unwrap();
    assert!(text.contains("platform     dspace (detected: "), "{text}");
    assert!(
        text.contains("10 of 10 live records get a landing page (100%)"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "fetched      {origin}/handle/123456789/1: HTTP 200; allowed for Googlebot"
        )),
        "{text}"
    );
}

/// When most records get no landing page, `check` names the setting that gives them one,
/// tried on the same records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_names_the_setting_that_would_give_records_landing_pages() {
    let server = TestServer::builder(dspace_records(6)).page_size(10).start();
    let out = check(&[
        &server.url(),
        "--json",
        "--platform",
        "generic",
        "--fetch",
        "0",
    ])
    .await;
    let report = json(&out);
    let landing = &report["landing"];
    assert_eq!(landing["platform"], "generic");
    assert_eq!(landing["configured"], true);
    assert_eq!(landing["with_landing_page"], 0);
    let suggestion = landing["suggestion"].as_str().unwrap();
    assert!(
        suggestion.contains("platform = \"dspace\"") && suggestion.contains("6 of them"),
        "{suggestion}"
    );
    assert!(landing["fetched"].as_array().unwrap().is_empty());
    assert!(
        report["warnings"]
            .to_string()
            .contains("platform = \\\"dspace\\\""),
        "{:#}",
        report["warnings"]
    );
    // An invalid setting is a usage error naming the flag.
    let out = check(&[&server.url(), "--landing-template", "https://h/{nope}"]).await;
    assert_eq!(out.status.code(), Some(78));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--landing-template") && err.contains("{nope}"),
        "{err}"
    );
}

/// `fixtures/platforms/{name}.xml` in `dir`, its host `host` moved onto the test server's
/// origin, so that robots.txt and the pages fetched are asked of loopback; its path.
fn fixture_on(server: &TestServer, name: &str, host: &str, dir: &std::path::Path) -> String {
    let origin = server.url().trim_end_matches("/oai").to_owned();
    let text = std::fs::read_to_string(format!("fixtures/platforms/{name}.xml"))
        .unwrap()
        .replace(&format!("https://{host}"), &origin)
        .replace(&format!("http://{host}"), &origin);
    let path = dir.join(format!("{name}.xml"));
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

/// Issue 29, rule 1: a platform whose signs are absent is never suggested. Under Google's rule
/// (auto finds these two outright), EPrints' rule gave the bepress Digital Commons records
/// pages and was advised, and DSpace's the Dataverse ones: each gives pages only through the
/// scope its site has, and shows none of its signs. Their own rows are suggested instead,
/// tried on the records: the share, three pages, and with --fetch how they answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_never_suggests_a_platform_whose_signs_are_absent() {
    let server = TestServer::builder(Vec::new()).pages("/").start();
    let origin = server.url().trim_end_matches("/oai").to_owned();
    let dir = tempfile::tempdir().unwrap();

    let dc = fixture_on(
        &server,
        "digital-commons",
        "digitalcommons.example.edu",
        dir.path(),
    );
    let out = check(&[&dc, "--json", "--platform", "generic", "--fetch", "3"]).await;
    let report = json(&out);
    let landing = &report["landing"];
    assert_eq!(landing["platform"], "generic");
    assert_eq!(landing["with_landing_page"], 0);
    let suggested = &landing["suggested"];
    assert_eq!(suggested["key"], "platform", "{report:#}");
    assert_eq!(suggested["value"], "digital-commons");
    assert_eq!(suggested["flag"], "--platform digital-commons");
    assert_eq!(suggested["live_records"], 12);
    assert_eq!(suggested["with_landing_page"], 10);
    let pages = [
        format!("{origin}/bio_facpubs/43"),
        format!("{origin}/geo_facpubs/297"),
        format!("{origin}/physics_facpubs/186"),
    ];
    assert_eq!(suggested["examples"], serde_json::json!(pages));
    let fetched: Vec<u64> = suggested["fetched"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["status"].as_u64().unwrap())
        .collect();
    assert_eq!(fetched, [200, 200, 200], "{report:#}");
    let said = report.to_string();
    assert!(!said.contains("eprints"), "{report:#}");
    let text = String::from_utf8(
        check(&[&dc, "--platform", "generic", "--fetch", "1"])
            .await
            .stdout,
    )
    .unwrap();
    assert!(
        text.contains("suggested: platform = \"digital-commons\" (--platform digital-commons) would give 10 of them one (83%)\n")
            && text.contains("tried, as the baseURL's path ends in /do/oai (bepress Digital Commons)")
            && text.contains(&format!("would publish: {}\n", pages[2]))
            && text.contains(&format!("fetched      {}: HTTP 200", pages[0])),
        "{text}"
    );

    let dv = fixture_on(&server, "dataverse", "dataverse.example.edu", dir.path());
    let out = check(&[&dv, "--json", "--platform", "generic", "--fetch", "0"]).await;
    let report = json(&out);
    let suggested = &report["landing"]["suggested"];
    assert_eq!(suggested["value"], "dataverse", "{report:#}");
    assert_eq!(suggested["share"], 1.0);
    assert!(
        suggested["examples"][0]
            .as_str()
            .unwrap()
            .starts_with(&format!("{origin}/dataset.xhtml?persistentId=")),
        "{report:#}"
    );
    assert!(!report.to_string().contains("dspace"), "{report:#}");
}

/// Issue 29, rules 2 and 4: a scope that would publish a content file as a landing page is
/// never suggested (here DSpace bitstreams beside the pages, no extension to tell them by);
/// and then the report says plainly what the records carry. Under Google's rule, which `auto`
/// would widen over the pages itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_never_suggests_a_setting_that_publishes_files() {
    let server = TestServer::builder(Vec::new()).start();
    let origin = server.url().trim_end_matches("/oai").to_owned();
    let records = |files: bool| -> Vec<TestRecord> {
        (1..=4)
            .map(|i| {
                let r = TestRecord::new(&format!("oai:test:{i}"), "2024-05-01")
                    .url(&format!("{origin}/site/record/{i}"));
                if files {
                    r.url(&format!("{origin}/site/bitstream/{i}/data"))
                } else {
                    r
                }
            })
            .collect()
    };
    let url = format!("{origin}/mirror/oai");
    server.set_records(records(false));
    let report = json(&check(&[&url, "--json", "--platform", "generic", "--fetch", "0"]).await);
    assert_eq!(
        report["landing"]["suggested"]["setting"],
        format!("scope = [\"{origin}/site/\"]"),
        "{report:#}"
    );
    server.set_records(records(true));
    let report = json(&check(&[&url, "--json", "--platform", "generic", "--fetch", "0"]).await);
    assert_eq!(
        report["landing"]["suggested"],
        serde_json::Value::Null,
        "{report:#}"
    );
    assert_eq!(report["scope"]["suggested"], serde_json::Value::Null);
    let facts = report["landing"]["facts"].to_string();
    assert!(
        facts.contains(
            "the 4 live records of the sample carry a URL on this site (4) and a file on this site (4); no setting tried gives most of them a landing page"
        ),
        "{facts}"
    );
}

/// Issue 29, rules 3 and 4: DiVA's only URL is the National Library's URN resolver, on another
/// registered domain: check once advised a scope there. Now nothing is suggested, and the
/// report says what the records carry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_says_what_diva_records_carry_and_suggests_no_resolver() {
    let server = TestServer::builder(Vec::new()).start();
    let dir = tempfile::tempdir().unwrap();
    let diva = fixture_on(&server, "diva", "www.diva-portal.example.org", dir.path());
    let out = check(&[&diva, "--json", "--fetch", "3"]).await;
    let report = json(&out);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(report["scope"]["suggested"], serde_json::Value::Null);
    assert_eq!(report["landing"]["suggested"], serde_json::Value::Null);
    assert_eq!(report["landing"]["suggestion"], serde_json::Value::Null);
    let facts = report["landing"]["facts"].to_string();
    assert!(
        facts.contains("the 8 live records of the sample carry only a resolver's URL, urn.kb.example.se (8), a DOI (3)")
            && facts.contains("; no URL on this site"),
        "{facts}"
    );
    let said = format!("{} {}", report["problems"], report["warnings"]);
    assert!(!said.contains("--scope"), "{said}");
    assert!(said.contains("no URL on this site"), "{said}");
    // Nothing was asked of the resolver.
    assert!(report["landing"]["fetched"].as_array().unwrap().is_empty());
}

/// `oai-bridge export` of `fixtures/platforms/{fixture}.xml` into a temporary folder, nothing
/// asked of the web (`OAI_BRIDGE_LEARN=off`), with `extra` flags.
fn export(fixture: &str, extra: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    crate::golden::bridge()
        .env_remove("OAI_BRIDGE_CONFIG")
        .env_remove("OAI_BRIDGE_PUBLIC_URL")
        .env_remove("RUST_LOG")
        .env("OAI_BRIDGE_LEARN", "off")
        .arg("export")
        .args(["--base-url", &format!("fixtures/platforms/{fixture}.xml")])
        .arg("--out")
        .arg(dir.path().join("out"))
        .args([
            "--public-url",
            "https://sitemaps.example.org/",
            "--no-progress",
        ])
        .args(extra)
        .output()
        .unwrap()
}

/// Issue 29: export's "nothing to publish" follows what the records hold. It said "if the
/// records' Handles are DSpace's, set platform = dspace" of a repository of DOIs; now it says
/// they carry only DOIs, and where a platform shows, that platform tried on the records.
#[test]
fn an_empty_export_s_hint_follows_what_the_records_hold() {
    let out = export("figshare", &["--platform", "generic"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("nothing to publish: ")
            && err.contains(
                "; the 8 live records of the sample carry only a DOI (8); no URL on this site"
            ),
        "{err}"
    );
    assert!(!err.contains("DSpace") && !err.contains("dspace"), "{err}");

    let out = export("digital-commons", &["--platform", "generic"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(
            "platform = \"digital-commons\" (--platform digital-commons) gives 10 of the first 12 live records a landing page (83%), e.g. https://digitalcommons.example.edu/bio_facpubs/43, "
        ),
        "{err}"
    );
    assert!(!err.contains("eprints"), "{err}");

    let out = export("diva", &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    // What `auto` found them to hold: only the URN resolver's URLs.
    assert!(err.contains("no URL but a resolver's"), "{err}");
    assert!(err.contains("urn.kb.example.se"), "{err}");
    assert!(!err.contains("set the repository's scope"), "{err}");
}
