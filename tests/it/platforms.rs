//! Platform-aware landing pages (README, "Which platform?"): exports of fixtures in the shapes
//! DSpace 6 and 7, EPrints 3.2 and 3.4, OJS 3 and InvenioRDM really send
//! (`fixtures/platforms/`, each citing the platform's source it follows), compared with golden
//! files (`fixtures/golden/platform-*`, regenerated with `UPDATE_GOLDEN=1` as the sample's are),
//! and what each rule must give: one landing page per record, the same in the sitemap and the
//! Signmap, content files as items, the Handle or DOI as cite-as.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

use crate::golden::{check_golden, crate_root, expanded, files, locs_of};

/// Runs `oai-bridge export` of `fixtures/platforms/{fixture}.xml` with the Signmap on, and
/// expects success; the summary and the files written.
fn export(fixture: &str, out: &Path, extra: &[&str]) -> (String, BTreeMap<String, Vec<u8>>) {
    let output = run(fixture, out, extra);
    assert!(
        output.status.success(),
        "export of {fixture} {extra:?} failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        files(out),
    )
}

fn run(fixture: &str, out: &Path, extra: &[&str]) -> Output {
    crate::golden::bridge()
        .current_dir(crate_root())
        .env_remove("OAI_BRIDGE_CONFIG")
        .env_remove("OAI_BRIDGE_PUBLIC_URL")
        .env_remove("RUST_LOG")
        // No network in the tests: the DOIs of HAL's, DiVA's and Figshare's records are not
        // looked up (a resolver that does not answer changes nothing, but takes its time).
        .env("OAI_BRIDGE_LEARN", "off")
        .arg("export")
        .arg("--base-url")
        .arg(format!("fixtures/platforms/{fixture}.xml"))
        .arg("--out")
        .arg(out)
        .args(["--public-url", "https://sitemaps.example.org/"])
        .args(["--signmap", "--no-progress"])
        .args(extra)
        .output()
        .expect("the oai-bridge binary runs")
}

/// A Signmap's (or an OCX sitemap's) entries: each `<url>`'s loc and its links as `rel href`.
fn signmap_entries(bytes: &[u8]) -> BTreeMap<String, Vec<String>> {
    let text = std::str::from_utf8(bytes).unwrap();
    let doc = roxmltree::Document::parse(text).unwrap();
    doc.descendants()
        .filter(|n| n.tag_name().name() == "url")
        .map(|url| {
            let loc = url
                .children()
                .find(|n| n.tag_name().name() == "loc")
                .and_then(|n| n.text())
                .unwrap()
                .to_owned();
            let links = url
                .children()
                .filter(|n| n.tag_name().name() == "ln")
                .map(|n| {
                    format!(
                        "{} {}",
                        n.attribute("rel").unwrap_or_default(),
                        n.attribute("href").unwrap_or_default()
                    )
                })
                .collect();
            (loc, links)
        })
        .collect()
}

/// Exports `fixture` and checks it against its golden folder; the summary, the sitemap's
/// locations and the Signmap's entries.
fn golden(fixture: &str, extra: &[&str]) -> (String, Vec<String>, BTreeMap<String, Vec<String>>) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let (summary, written) = export(fixture, &out, extra);
    check_golden(&format!("platform-{fixture}"), &expanded(&written));
    let locs = locs_of(&written["sitemap-1.xml"]);
    let signmap = signmap_entries(&written["signmap-1.xml"]);
    // One landing page everywhere: each Signmap entry's loc is in the sitemap.
    for loc in signmap.keys() {
        assert!(
            locs.contains(loc),
            "{fixture}: {loc} is in the Signmap only"
        );
    }
    (summary, locs, signmap)
}

#[test]
fn dspace_6_publishes_the_handle_pages_it_never_names_as_urls() {
    let (summary, locs, signmap) = golden("dspace6", &[]);
    assert!(
        summary.contains("platform        dspace (detected: "),
        "{summary}"
    );
    // Every live record gets its own /handle/ page, in whichever spelling it gave its Handle
    // (proxy, hdl:, local); a second Handle of a record is cited, not a second page.
    let pages: Vec<&String> = locs
        .iter()
        .filter(|l| l.contains("/handle/") && !l.contains("/bitstream/"))
        .collect();
    assert_eq!(pages.len(), signmap.len(), "{locs:?}");
    for (loc, links) in &signmap {
        let handle = loc.rsplit_once("/handle/").unwrap().1;
        assert!(
            links.contains(&format!("cite-as https://hdl.handle.net/{handle}")),
            "{loc}: {links:?}"
        );
    }
    // The bitstream is a content file: the Signmap's item of its record.
    assert!(
        signmap
            .values()
            .flatten()
            .any(|l| l.starts_with("item ") && l.contains("/bitstream/handle/"))
    );
    // The malformed Handle is counted.
    assert!(summary.contains("invalid_handle 1"), "{summary}");
}

#[test]
fn dspace_7_puts_the_pages_on_the_ui_host_it_is_told() {
    // Untold, it says where the records point (a host the operator has not named is not
    // taken from them).
    let tmp = tempfile::tempdir().unwrap();
    let (untold, _) = export("dspace7", &tmp.path().join("out"), &[]);
    assert!(
        untold.contains("the records' local Handle URLs are under https://dspace7.example.org/: if that is the UI, set ui_url, which gives 6 of the first 6 live records a page there (100%), e.g. https://dspace7.example.org/handle/20.500.12345/701, "),
        "{untold}"
    );
    let (summary, locs, _) = golden("dspace7", &["--ui-url", "https://dspace7.example.org/"]);
    assert!(summary.contains("dspace (detected: "), "{summary}");
    assert!(
        locs.iter()
            .all(|l| l.starts_with("https://dspace7.example.org/")),
        "{locs:?}"
    );
    assert!(
        locs.contains(&"https://dspace7.example.org/handle/20.500.12345/701".to_owned()),
        "{locs:?}"
    );
    // The UI's bitstream download is a content file, not a second landing page.
    assert_eq!(
        locs.iter().filter(|l| l.contains("/handle/")).count() + 1,
        locs.len(),
        "{locs:?}"
    );
}

#[test]
fn eprints_3_4_and_3_2_publish_the_abstract_pages_in_either_relation_order() {
    for (fixture, abstract_page) in [
        ("eprints34", "https://eprints34.example.org/id/eprint/101/"),
        ("eprints32", "http://eprints32.example.org/201/"),
    ] {
        let (summary, locs, signmap) = golden(fixture, &[]);
        assert!(
            summary.contains("platform        eprints (detected: "),
            "{summary}"
        );
        let links = &signmap[abstract_page];
        // The documents are the abstract page's items, never landing pages of their own.
        assert!(links.iter().any(|l| l.starts_with("item ")), "{links:?}");
        for loc in signmap.keys() {
            assert!(loc.ends_with('/'), "{fixture}: {loc} is no abstract page");
        }
        assert!(locs.contains(&abstract_page.to_owned()));
    }
}

#[test]
fn ojs_3_stays_on_googles_rule() {
    let (summary, locs, _) = golden("ojs3", &[]);
    assert!(
        summary.contains("platform        generic (detected: "),
        "{summary}"
    );
    assert!(
        locs.iter().all(|l| l.contains("/article/view/")),
        "{locs:?}"
    );
}

#[test]
fn invenio_rdm_under_googles_rule_needs_its_template() {
    let tmp = tempfile::tempdir().unwrap();
    // Under Google's rule nothing in the records is a landing page: a clear error (`auto`
    // knows InvenioRDM's row, below).
    let failed = run(
        "invenio-rdm",
        &tmp.path().join("none"),
        &["--platform", "generic"],
    );
    assert!(!failed.status.success());
    let (summary, locs, signmap) = golden(
        "invenio-rdm",
        &[
            "--landing-template",
            "https://invenio-rdm.example.org/records/{oai_local}",
        ],
    );
    assert!(
        summary.contains("the template https://invenio-rdm.example.org/records/{oai_local}"),
        "{summary}"
    );
    assert!(
        locs.contains(&"https://invenio-rdm.example.org/records/7hbrk-5zq31".to_owned()),
        "{locs:?}"
    );
    assert!(
        signmap["https://invenio-rdm.example.org/records/7hbrk-5zq31"]
            .contains(&"cite-as https://doi.org/10.5555/rdm.7hbrk-5zq31".to_owned())
    );
}

/// `generic` is exactly Google's rule: the sample (whose baseURL is no platform's) exports the
/// same bytes with `--platform generic` as with `auto`, which its golden files hold.
#[test]
fn generic_output_is_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    let export = |out: &Path, platform: &str| {
        let output = crate::golden::bridge()
            .current_dir(crate_root())
            .env_remove("OAI_BRIDGE_CONFIG")
            .env_remove("RUST_LOG")
            .args(["export", "--config", "bridge.toml", "--out"])
            .arg(out)
            .args([
                "--public-url",
                "https://repository.northbridge.example/",
                "--no-progress",
                "-q",
                "--signmap",
                "--platform",
                platform,
            ])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        files(out)
    };
    let auto = export(&tmp.path().join("auto"), "auto");
    let generic = export(&tmp.path().join("generic"), "generic");
    assert_eq!(auto, generic);
    let dspace = export(&tmp.path().join("dspace"), "dspace");
    assert_ne!(auto, dspace, "the platform is applied");
}

/// EPrints over HTTP, at its endpoint `/cgi/oai2`, detected from what the first page's records
/// carry: `auto` reads each record's `dc:relation`s there (the page readers' fast path
/// included), finds the record's own abstract page among them, and publishes it with the
/// documents as content files, not the official URL of another record on the same host.
/// Elsewhere `auto` reads no relation, and the same records stay under Google's rule.
#[tokio::test]
async fn eprints_over_http_is_detected_from_its_relations() {
    use crate::server::{TestRecord, TestServer};
    let server = TestServer::builder(Vec::new()).page_size(4).start();
    let origin = server.url().trim_end_matches("/oai").to_owned();
    let records = (1..=9)
        .map(|i| {
            TestRecord::new(&format!("oai:eprints.test:{i}"), "2024-05-01")
                .url(&format!("{origin}/id/eprint/{i}/1/paper.pdf"))
                .url("Smith, J. (2020) A paper. Journal, 1.")
                .relation(&format!("{origin}/id/eprint/{i}/"))
                .relation(&format!("{origin}/id/eprint/{}/", i + 100))
                .relation("https://doi.org/10.5555/x")
        })
        .collect();
    server.set_records(records);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let job_at = |path: &str| {
        let mut job = crate::faults::job(&server);
        job.scope = Vec::new();
        job.request.source =
            oai_bridge::Source::Oai(url::Url::parse(&format!("{origin}{path}")).unwrap());
        job.request.fields =
            oai_bridge::fields_for(&job.profiles, &job.landing, &job.request.source);
        job
    };
    let export = crate::incremental::export_job;
    let elsewhere = export(
        job_at("/oai"),
        &tmp.path().join("elsewhere"),
        None,
        Default::default(),
    )
    .await
    .unwrap();
    assert_eq!(
        elsewhere.built.platform.detected().platform.as_str(),
        "generic"
    );
    let summary = export(
        job_at(crate::server::EPRINTS_PATH),
        &out,
        None,
        Default::default(),
    )
    .await
    .unwrap();
    let detected = summary.built.platform.detected();
    assert_eq!(detected.platform.as_str(), "eprints", "{detected}");
    let locs = crate::incremental::published(&out);
    assert_eq!(locs.len(), 18, "{locs:?}");
    assert!(locs.contains(&format!("{origin}/id/eprint/3/")));
    assert!(locs.contains(&format!("{origin}/id/eprint/3/1/paper.pdf")));
    assert!(!locs.contains(&format!("{origin}/id/eprint/103/")));
    let drops = &summary.built.stats;
    assert_eq!(drops.dropped(oai_bridge::Drop::NotAUrl), 9);
}

/// One landing page per record in every profile (issue 20, point 5): the CDIF documents' `url`
/// and the OCX entries are the DSpace records' /handle/ pages, as the sitemap and the Signmap
/// have them.
#[test]
fn every_profile_reads_the_same_landing_page() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let output = run(
        "dspace6",
        &out,
        &["--cdif", "--ocx", "--diwoo", "com_123456789_1=2"],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let written = crate::golden::top_files(&out);
    let sitemap: std::collections::BTreeSet<String> =
        locs_of(&written["sitemap-1.xml"]).into_iter().collect();
    let signmap: std::collections::BTreeSet<String> = signmap_entries(&written["signmap-1.xml"])
        .into_keys()
        .collect();
    // Each entry's own loc (an OCX entry's `ocx:loc` is its document).
    let ocx: std::collections::BTreeSet<String> =
        signmap_entries(&written["ocx-1.xml"]).into_keys().collect();
    let mut cdif = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(out.join("cdif")).unwrap() {
        let doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(entry.unwrap().path()).unwrap()).unwrap();
        cdif.insert(doc["url"].as_str().unwrap().to_owned());
    }
    assert!(
        signmap
            .iter()
            .all(|l| l.contains("/handle/123456789/") || l.contains("/handle/2345/")),
        "{signmap:?}"
    );
    assert_eq!(cdif, signmap);
    assert!(ocx.is_subset(&signmap) && !ocx.is_empty(), "{ocx:?}");
    assert!(signmap.is_subset(&sitemap));
}

/// `auto` decides from the first live records however the list begins: a first page of deleted
/// records (or an empty one) does not lock a DSpace into Google's rule in a plain export, as the
/// store's path, which reads its first stored records, would not either.
#[tokio::test]
async fn auto_decides_from_the_first_live_records_not_the_first_page() {
    use crate::server::{TestRecord, TestServer};
    let mut records: Vec<TestRecord> = (1..=5)
        .map(|i| TestRecord::new(&format!("oai:test:123456789/{i}"), "2024-05-01").deleted())
        .collect();
    records.extend((6..=15).map(|i| {
        TestRecord::new(&format!("oai:test:123456789/{i}"), "2024-05-01")
            .url(&format!("http://hdl.handle.net/123456789/{i}"))
    }));
    let server = TestServer::builder(records).page_size(5).start();
    let origin = server.url().trim_end_matches("/oai").to_owned();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let mut job = crate::faults::job(&server);
    job.scope = Vec::new();
    let summary = crate::incremental::export_job(job, &out, None, Default::default())
        .await
        .unwrap();
    let detected = summary.built.platform.detected();
    assert_eq!(detected.platform.as_str(), "dspace", "{detected}");
    let locs = crate::incremental::published(&out);
    assert_eq!(locs.len(), 10, "{locs:?}");
    assert!(locs.contains(&format!("{origin}/handle/123456789/15")));
    assert_eq!(summary.built.stats.deleted, 5);
}

/// The platforms added as rows of the table (issue 29), each in its real shape with `auto`:
/// the platform detected, and each live record's landing page as the platform serves it.
#[test]
fn digital_commons_publishes_the_series_page_beside_the_file() {
    let (summary, locs, signmap) = golden("digital-commons", &[]);
    assert!(
        summary.contains("platform        digital-commons (detected: "),
        "{summary}"
    );
    // The page of a series article and of a journal article; the files are items, not pages.
    for page in [
        "https://digitalcommons.example.edu/bio_facpubs/43",
        "https://digitalcommons.example.edu/mpq/vol61/iss1/1",
        "https://digitalcommons.example.edu/symposium/2007/papers/1",
    ] {
        assert!(
            signmap.contains_key(page),
            "{page} not a landing page: {signmap:?}"
        );
    }
    assert!(
        signmap.keys().all(|p| !p.contains("viewcontent")),
        "a file as a landing page: {signmap:?}"
    );
    // Records on another site (SelectedWorks, a journal's own domain) publish nothing here.
    assert!(
        locs.iter()
            .all(|l| l.starts_with("https://digitalcommons.example.edu/")),
        "{locs:?}"
    );
}

#[test]
fn pubmed_central_publishes_the_article_page_not_the_pubmed_one() {
    let (summary, locs, signmap) = golden("pmc", &[]);
    assert!(
        summary.contains("platform        pmc (detected: "),
        "{summary}"
    );
    assert_eq!(signmap.len(), 10, "{signmap:?}");
    assert!(
        signmap
            .keys()
            .all(|p| p.starts_with("http://www.ncbi.example.gov/pmc/articles/PMC")),
        "{signmap:?}"
    );
    assert!(locs.iter().all(|l| !l.contains("/pubmed/")), "{locs:?}");
}

#[test]
fn arxiv_pages_on_a_sibling_host_widen_the_scope_under_auto() {
    let (summary, _, signmap) = golden("arxiv", &[]);
    assert!(
        summary.contains("the scope is widened to https://arxiv.example.org/"),
        "{summary}"
    );
    assert_eq!(signmap.len(), 10, "{signmap:?}");
    assert!(
        signmap
            .keys()
            .all(|p| p.starts_with("https://arxiv.example.org/abs/")),
        "{signmap:?}"
    );
    // Google's rule, asked for by name, stays exactly Google's rule: nothing to publish.
    let tmp = tempfile::tempdir().unwrap();
    let output = run("arxiv", &tmp.path().join("out"), &["--platform", "generic"]);
    assert!(!output.status.success());
}

#[test]
fn invenio_3_keeps_googles_rule_and_invenio_rdm_its_records_page() {
    let (summary, _, signmap) = golden("invenio3", &[]);
    assert!(
        summary.contains("platform        generic (detected: "),
        "{summary}"
    );
    assert!(!signmap.is_empty());
    let (summary, _, signmap) = golden("invenio-rdm", &[]);
    assert!(
        summary.contains("platform        invenio-rdm (detected: "),
        "{summary}"
    );
    assert!(
        signmap
            .keys()
            .all(|p| p.starts_with("https://invenio-rdm.example.org/records/")),
        "{signmap:?}"
    );
}

#[test]
fn dataverse_hyku_and_pure_publish_their_own_pages() {
    let (summary, _, signmap) = golden("dataverse", &[]);
    assert!(
        summary.contains("platform        dataverse (detected: "),
        "{summary}"
    );
    // DOIs, Handles and PermaLinks alike: the dataset page of the global id.
    assert!(
        signmap
            .keys()
            .all(|p| p.starts_with("https://dataverse.example.edu/dataset.xhtml?persistentId=")),
        "{signmap:?}"
    );
    assert!(
        signmap.keys().any(|p| p.contains("persistentId=hdl:")),
        "{signmap:?}"
    );
    let (summary, locs, signmap) = golden("hyrax", &[]);
    assert!(
        summary.contains("platform        hyku (detected: "),
        "{summary}"
    );
    assert_eq!(signmap.len(), 8, "{signmap:?}");
    assert!(
        signmap.keys().all(|p| !p.contains("/downloads/")),
        "{signmap:?}"
    );
    assert!(
        locs.iter().any(|l| l.contains("/downloads/")),
        "the thumbnails are items"
    );
    let (summary, _, signmap) = golden("pure", &[]);
    assert!(
        summary.contains("the scope is widened to https://research.example.ac.uk/"),
        "{summary}"
    );
    assert!(
        signmap.keys().all(|p| !p.contains("/ws/files/")),
        "{signmap:?}"
    );
}

#[test]
fn contentdm_publishes_the_item_page_made_from_the_oai_identifier() {
    let (summary, _, signmap) = golden("contentdm", &[]);
    assert!(
        summary.contains("platform        contentdm (detected: "),
        "{summary}"
    );
    assert!(!signmap.is_empty());
    assert!(
        signmap.keys().all(
            |p| p.starts_with("https://cdm.example.org/digital/collection/") && p.contains("/id/")
        ),
        "{signmap:?}"
    );
}

/// An export that must fail: its whole output, which says why.
fn failed(fixture: &str, extra: &[&str]) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let output = run(fixture, &tmp.path().join("out"), extra);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        !output.status.success(),
        "{fixture} {extra:?} exported:\n{text}"
    );
    assert!(text.contains("nothing to publish: "), "{text}");
    text
}

/// The fixtures of issue 29 that had no golden export (points 2, 6): the page each record gets,
/// as the platform serves it, and never a file, a thumbnail or a resolver's URL.
#[test]
fn hal_says_its_pages_are_elsewhere_and_publishes_them_with_its_template() {
    // The API host and the portals are two registered domains: nothing under auto, and the
    // error names the portals.
    let text = failed("hal", &[]);
    assert!(
        text.contains("9 of the first 9 live records have their URLs only on another registered domain than the baseURL's: https://inria.hal.example.science/ (3), https://hal.example.science/ (2), https://shs.hal.example.science/ (2) and 2 more"),
        "{text}"
    );
    assert!(text.contains("--landing-template"), "{text}");
    assert!(!text.contains("dspace"), "no Handle here: {text}");
    // docs/platforms.md's setting, on the fixture's made-up host: CCSD's own rule, the
    // versioned page of every deposit on the main portal, whichever portal the record names.
    let (summary, locs, signmap) = golden(
        "hal",
        &[
            "--landing-template",
            "https://hal.example.science/{oai_local}",
        ],
    );
    assert!(
        summary.contains("the template https://hal.example.science/{oai_local}"),
        "{summary}"
    );
    assert_eq!(signmap.len(), 9, "{signmap:?}");
    for page in signmap.keys() {
        let id = page.strip_prefix("https://hal.example.science/").unwrap();
        let (_, version) = id.rsplit_once('v').unwrap();
        assert!(
            version.parse::<u32>().is_ok(),
            "{page} is no deposit's page"
        );
    }
    // The main file (/document) and the files are the record's items, never pages.
    let links = &signmap["https://hal.example.science/hal-03456211v2"];
    for item in [
        "item https://hal.example.science/hal-03456211v2/document",
        "item https://hal.example.science/hal-03456211v2/file/twisted_thermal.pdf",
        "cite-as https://doi.org/10.5555/PhysRevB.107.125401",
    ] {
        assert!(links.contains(&item.to_owned()), "{links:?}");
    }
    assert!(
        locs.iter()
            .all(|l| l.starts_with("https://hal.example.science/")),
        "{locs:?}"
    );
}

#[test]
fn diva_names_no_page_of_its_own_and_says_so() {
    // The only URL of a DiVA record is the National Library's URN resolver: no landing page,
    // and no scope is suggested that would publish the resolver's redirects.
    let text = failed("diva", &[]);
    assert!(
        text.contains("8 of the first 8 live records have no URL but a resolver's (http://urn.kb.example.se/resolve?urn=urn:nbn:se:kau:diva-2500), which redirects and is not the record's page"),
        "{text}"
    );
    assert!(!text.contains("--scope"), "{text}");
}

#[test]
fn figshare_publishes_the_article_page_its_relation_names_on_the_site() {
    let (summary, locs, signmap) = golden("figshare", &[]);
    assert!(
        summary.contains("platform        figshare (detected: "),
        "{summary}"
    );
    assert!(
        summary.contains("the pages on https://figshare.example.com/, as the records name them"),
        "{summary}"
    );
    // One page per record, the article's own (its id last), its DOI cited; nothing else.
    assert_eq!(signmap.len(), 8, "{signmap:?}");
    for (page, links) in &signmap {
        assert!(
            page.starts_with("https://figshare.example.com/articles/"),
            "{page}"
        );
        let id = page.rsplit('/').next().unwrap();
        assert!(id.parse::<u64>().is_ok(), "{page}");
        assert!(
            links
                .iter()
                .any(|l| l.starts_with("cite-as https://doi.org/")),
            "{page}: {links:?}"
        );
    }
    assert_eq!(locs.len(), 8, "{locs:?}");
    // Google's rule, asked for by name, reads no relation: nothing to publish.
    failed("figshare", &["--platform", "generic"]);
}

#[test]
fn omeka_publishes_the_item_page_and_files_without_an_extension_as_its_items() {
    for (fixture, pages, stored) in [
        (
            "omeka-classic",
            "https://omeka.example.org/items/show/",
            "https://omeka.example.org/files/original/a87ff679a2f3e71d9181a67b7542122c",
        ),
        (
            "omeka-s",
            "https://omeka-s.example.org/s/archive/item/",
            "https://omeka-s.example.org/files/original/4b227777d4dd1fc61c6f884f48641d02b4d121d3",
        ),
    ] {
        let (_, locs, signmap) = golden(fixture, &[]);
        assert_eq!(signmap.len(), 9, "{fixture}: {signmap:?}");
        assert!(
            signmap.keys().all(|p| p.starts_with(pages)),
            "{fixture}: {signmap:?}"
        );
        // The original stored without an extension is its record's item, as the others are.
        assert!(
            signmap
                .values()
                .flatten()
                .any(|l| *l == format!("item {stored}")),
            "{fixture}: {signmap:?}"
        );
        assert!(locs.contains(&stored.to_owned()));
    }
}

#[test]
fn ojs_2_and_islandora_7_keep_googles_rule() {
    let (summary, _, signmap) = golden("ojs2", &[]);
    assert!(
        summary.contains("platform        generic (detected: "),
        "{summary}"
    );
    assert_eq!(signmap.len(), 8, "{signmap:?}");
    assert!(
        signmap
            .keys()
            .all(|p| p.starts_with("https://journals.example.org/index.php/jeps/article/view/")),
        "{signmap:?}"
    );
    // Islandora 7 with its object links on: the object's page, never its thumbnail.
    let (summary, locs, signmap) = golden("islandora7", &[]);
    assert!(
        summary.contains("platform        generic (detected: "),
        "{summary}"
    );
    assert_eq!(signmap.len(), 9, "{signmap:?}");
    assert!(
        signmap
            .keys()
            .all(|p| p.starts_with("https://islandora.example.org/islandora/object/")),
        "{signmap:?}"
    );
    assert!(locs.iter().all(|l| !l.contains("/datastream/")), "{locs:?}");
}
