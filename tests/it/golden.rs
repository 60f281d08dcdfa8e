//! Golden files: the export of the bundled sample repository (`fixtures/sample-repository.xml`,
//! through the shipped `bridge.toml`) must equal `fixtures/golden/sample/` (plain shards) and
//! `fixtures/golden/sample-gzip/` (`--gzip --max-urls 100`, stored gunzipped, each
//! `sitemap-N.xml.gz` as `sitemap-N.xml`) and `fixtures/golden/sample-signmap/` (`--signmap
//! --max-urls 100`), file by file, byte for byte.
//!
//! After an intended change of the output, regenerate them and review the diff:
//!
//! ```text
//! UPDATE_GOLDEN=1 cargo test --test it golden
//! git diff fixtures/golden
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const PUBLIC_URL: &str = "https://repository.northbridge.example/";
const GZIP_ARGS: &[&str] = &["--gzip", "--max-urls", "100"];

/// The oai-bridge binary, with nothing learned from the web (`OAI_BRIDGE_LEARN=off`): the
/// fixtures' made-up hosts sit under real domains, and a test reaches loopback only. The tests
/// of learning (tests/it/learn.rs) switch it on against their own loopback resolvers.
pub(crate) fn bridge() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_oai-bridge"));
    command.env("OAI_BRIDGE_LEARN", "off");
    command
}

/// `command` (the binary, [`bridge`]) set to `serve` `config` on loopback ports the system
/// picks, its state in `state`.
pub(crate) fn serve_on_loopback<'a>(
    command: &'a mut Command,
    config: &Path,
    state: &Path,
) -> &'a mut Command {
    command
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
        ])
        .arg("--config")
        .arg(config)
        .arg("--state-dir")
        .arg(state)
}

pub(crate) fn crate_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `oai-bridge export` on the sample into `out`, from the crate root, and expects success.
fn export(out: &Path, extra: &[&str]) -> Output {
    let output = crate::golden::bridge()
        .current_dir(crate_root())
        .env_remove("OAI_BRIDGE_CONFIG")
        .env_remove("OAI_BRIDGE_PUBLIC_URL")
        .env_remove("RUST_LOG")
        .args(["export", "--config", "bridge.toml", "--out"])
        .arg(out)
        .args(["--public-url", PUBLIC_URL, "--no-progress", "-q"])
        .args(extra)
        .output()
        .expect("the oai-bridge binary runs");
    assert!(
        output.status.success(),
        "export {extra:?} failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Every file in `dir`, by name, as written.
pub(crate) fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| {
            let entry = entry.unwrap();
            assert!(
                entry.file_type().unwrap().is_file(),
                "{} is not a file",
                entry.path().display()
            );
            let name = entry.file_name().into_string().unwrap();
            (name, fs::read(entry.path()).unwrap())
        })
        .collect()
}

/// The files as the golden folder keeps them: `.xml.gz` shards gunzipped, under their `.xml` name.
pub(crate) fn expanded(files: &BTreeMap<String, Vec<u8>>) -> BTreeMap<String, Vec<u8>> {
    files
        .iter()
        .map(|(name, bytes)| match name.strip_suffix(".gz") {
            Some(stem) => (stem.to_owned(), gunzip(name, bytes)),
            None => (name.clone(), bytes.clone()),
        })
        .collect()
}

fn gunzip(name: &str, bytes: &[u8]) -> Vec<u8> {
    // SM-17: gzip, not zip.
    assert!(bytes.starts_with(&[0x1f, 0x8b]), "{name} is not gzip");
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .unwrap_or_else(|e| panic!("{name} does not gunzip: {e}"));
    out
}

/// Compares `actual` with the golden folder `fixtures/golden/{name}`, or rewrites the folder
/// when `UPDATE_GOLDEN` is set.
pub(crate) fn check_golden(name: &str, actual: &BTreeMap<String, Vec<u8>>) {
    let dir = crate_root().join("fixtures/golden").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| !v.is_empty() && v != "0") {
        if dir.exists() {
            fs::remove_dir_all(&dir).unwrap();
        }
        fs::create_dir_all(&dir).unwrap();
        for (file, bytes) in actual {
            fs::write(dir.join(file), bytes).unwrap();
        }
        eprintln!("golden: rewrote {}", dir.display());
        return;
    }
    assert!(
        dir.is_dir(),
        "{} is missing; create it with UPDATE_GOLDEN=1 cargo test --test it golden",
        dir.display()
    );
    let expected = files(&dir);
    let mut report = String::new();
    for file in expected.keys().filter(|f| !actual.contains_key(*f)) {
        let _ = writeln!(
            report,
            "{file}: in the golden folder, not written by the export"
        );
    }
    for file in actual.keys().filter(|f| !expected.contains_key(*f)) {
        let _ = writeln!(
            report,
            "{file}: written by the export, not in the golden folder"
        );
    }
    for (file, want) in &expected {
        match actual.get(file) {
            Some(got) if got != want => {
                let _ = writeln!(report, "{file}: {}", first_difference(want, got));
            }
            _ => {}
        }
    }
    assert!(
        report.is_empty(),
        "the export differs from {}:\n{report}\nIf the change is intended: UPDATE_GOLDEN=1 cargo \
         test --test it golden, and review `git diff fixtures/golden`.",
        dir.display()
    );
}

/// The first differing line, numbered from 1, with both sides.
fn first_difference(expected: &[u8], actual: &[u8]) -> String {
    let expected = String::from_utf8_lossy(expected);
    let actual = String::from_utf8_lossy(actual);
    let mut want = expected.split_inclusive('\n');
    let mut got = actual.split_inclusive('\n');
    let show = |line: Option<&str>| match line {
        None => "<end of file>".to_owned(),
        Some(l) if l.chars().count() > 300 => {
            format!(
                "{:?}... ({} characters)",
                l.chars().take(300).collect::<String>(),
                l.len()
            )
        }
        Some(l) => format!("{l:?}"),
    };
    for number in 1.. {
        let (w, g) = (want.next(), got.next());
        if w != g {
            return format!(
                "first difference at line {number}\n  expected: {}\n  actual:   {}",
                show(w),
                show(g)
            );
        }
        if w.is_none() {
            break;
        }
    }
    "differs".to_owned()
}

#[test]
fn sample_export_matches_golden() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    export(&out, &[]);
    let written = files(&out);
    // H-09: stable names: the index, robots.txt, one shard, the marker; nothing else.
    let names: Vec<&str> = written.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            ".oai-bridge-export",
            "robots.txt",
            "sitemap-1.xml",
            "sitemap.xml"
        ]
    );
    // SM-14: no changefreq or priority (search engines ignore them).
    for (name, bytes) in &written {
        let text = String::from_utf8_lossy(bytes);
        assert!(
            !text.contains("<changefreq") && !text.contains("<priority"),
            "{name}"
        );
    }
    check_golden("sample", &expanded(&written));
}

/// The Signmap of the sample (`--signmap --max-urls 100`): golden files, and what SP-01..SP-05
/// require of each entry, checked with a real XML parser.
#[test]
fn signmap_export_matches_golden() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    export(&out, &["--signmap", "--max-urls", "100"]);
    // The shard files written while harvesting are linked into `out`; nothing is left beside.
    let beside: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert_eq!(beside.len(), 1, "{beside:?}");
    let written = files(&out);
    let robots = String::from_utf8(written["robots.txt"].clone()).unwrap();
    // SP-10: the Signmap is announced by a Sitemap: line of the robots.txt written beside it
    // (which the operator copies to the host's root robots.txt, where crawlers look).
    assert!(robots.contains(&format!("Sitemap: {PUBLIC_URL}signmap.xml\n")));
    let sitemap_locs: std::collections::BTreeSet<String> = written
        .iter()
        .filter(|(n, _)| n.starts_with("sitemap-"))
        .flat_map(|(_, b)| locs_of(b))
        .collect();
    let mut entries = 0;
    for (name, bytes) in written.iter().filter(|(n, _)| n.starts_with("signmap-")) {
        let text = std::str::from_utf8(bytes).unwrap();
        let doc = roxmltree::Document::parse(text).unwrap();
        let rs = "http://www.openarchives.org/rs/terms/";
        for url in doc.root_element().children().filter(|n| n.is_element()) {
            entries += 1;
            let kids: Vec<_> = url.children().filter(|n| n.is_element()).collect();
            // SP-01: the loc is a landing page the sitemap also lists; SP-04: links after it.
            assert_eq!(kids[0].tag_name().name(), "loc", "{name}");
            assert!(sitemap_locs.contains(kids[0].text().unwrap()), "{name}");
            // SM-12: the sitemap's own elements (loc, lastmod; SM-14: no changefreq or
            // priority) first, then the extension elements.
            let own: Vec<&str> = kids
                .iter()
                .take_while(|k| k.tag_name().namespace() != Some(rs))
                .map(|k| k.tag_name().name())
                .collect();
            assert!(
                own == ["loc"] || own == ["loc", "lastmod"],
                "{name}: {own:?}"
            );
            assert!(
                kids[own.len()..]
                    .iter()
                    .all(|k| k.tag_name().namespace() == Some(rs)),
                "{name}"
            );
            let links: Vec<_> = kids
                .iter()
                .filter(|k| k.tag_name().namespace() == Some(rs))
                .collect();
            assert!(!links.is_empty(), "every sample record has links");
            for link in links {
                let rel = link.attribute("rel").unwrap();
                let href = link.attribute("href").unwrap();
                // SP-15: no Level-2 link sets (rel="linkset") are made.
                assert!(
                    ["describedby", "item", "cite-as", "license", "type"].contains(&rel),
                    "{rel}"
                );
                // SP-13: no optional ResourceSync attribute, none being known exactly.
                for attribute in link.attributes() {
                    assert!(
                        ["rel", "href", "type", "profile"].contains(&attribute.name()),
                        "{name}: {rel} has {}",
                        attribute.name()
                    );
                }
                assert!(
                    href.starts_with("https://") || href.starts_with("http://"),
                    "SP-03: {href}"
                );
                if rel == "describedby" {
                    assert_eq!(link.attribute("type"), Some("application/xml"));
                    assert!(href.contains("verb=GetRecord&identifier="), "{href}");
                }
            }
        }
    }
    assert_eq!(entries, 307, "every live record with a landing page, once");
    check_golden("sample-signmap", &expanded(&written));
}

/// DiWoo of the sample (`--diwoo articles=12 --diwoo theses=15 --max-urls 100`): golden files;
/// each category lists exactly the sitemap URLs of its set's records, every one with a lastmod.
#[test]
fn diwoo_export_matches_golden() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    export(
        &out,
        &[
            "--diwoo",
            "articles=12",
            "--diwoo",
            "theses=15",
            "--max-urls",
            "100",
        ],
    );
    let written = files(&out);
    let robots = String::from_utf8(written["robots.txt"].clone()).unwrap();
    for n in ["012", "015"] {
        let index = format!("sitemapindex-diwoo-infocat{n}.xml");
        assert!(
            robots.contains(&format!("Sitemap: {PUBLIC_URL}{index}\n")),
            "{robots}"
        );
        assert!(written.contains_key(&index));
    }
    let all: std::collections::BTreeSet<String> = written
        .iter()
        .filter(|(n, _)| n.starts_with("sitemap-"))
        .flat_map(|(_, b)| locs_of(b))
        .collect();
    for (name, bytes) in written.iter().filter(|(n, _)| n.starts_with("diwoo-")) {
        let text = std::str::from_utf8(bytes).unwrap();
        assert_eq!(
            text.matches("<url>").count(),
            text.matches("<lastmod>").count(),
            "{name}"
        );
        for loc in locs_of(bytes) {
            assert!(
                loc.starts_with("https://") && all.contains(&loc),
                "{name}: {loc}"
            );
        }
    }
    check_golden("sample-diwoo", &expanded(&written));
}

/// OCX of the sample (`--ocx --max-urls 100`): golden files; every entry's `ocx:ocx` has its
/// required `ocx:type` and a name, and its loc is a landing page of the sitemap.
#[test]
fn ocx_export_matches_golden() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    export(&out, &["--ocx", "--max-urls", "100"]);
    let written = files(&out);
    let robots = String::from_utf8(written["robots.txt"].clone()).unwrap();
    assert!(robots.contains(&format!("Sitemap: {PUBLIC_URL}ocx.xml\n")));
    let all: std::collections::BTreeSet<String> = written
        .iter()
        .filter(|(n, _)| n.starts_with("sitemap-"))
        .flat_map(|(_, b)| locs_of(b))
        .collect();
    let ns = "http://sitemap.ocx.org/v/1.0";
    let mut entries = 0;
    for (name, bytes) in written.iter().filter(|(n, _)| n.starts_with("ocx-")) {
        let text = std::str::from_utf8(bytes).unwrap();
        let doc = roxmltree::Document::parse(text).unwrap();
        for url in doc.root_element().children().filter(|n| n.is_element()) {
            entries += 1;
            let loc = url.children().find(|n| n.has_tag_name("loc")).unwrap();
            assert!(all.contains(loc.text().unwrap()), "{name}");
            let block = url
                .children()
                .find(|n| n.has_tag_name((ns, "ocx")))
                .unwrap();
            let child = |tag: &str| block.children().find(|n| n.has_tag_name((ns, tag)));
            assert!(
                child("type")
                    .unwrap()
                    .text()
                    .unwrap()
                    .starts_with("https://schema.org/")
            );
            assert!(!child("name").unwrap().text().unwrap().is_empty());
            if let Some(teaser) = child("teaser") {
                assert!(teaser.text().unwrap().chars().count() <= 200);
            }
        }
    }
    assert_eq!(entries, 307);
    check_golden("sample-ocx", &expanded(&written));
}

/// CDIF of the sample (`--cdif`): one JSON-LD document per record with a landing page, each
/// parsing and carrying the crosswalked fields; the CDIF sitemap lists exactly those documents;
/// robots.txt announces it to `User-agent: CDIF1.0`. Document names are stable across exports.
#[test]
fn cdif_export_writes_json_ld_and_its_sitemap() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    export(&out, &["--cdif"]);
    let robots = fs::read_to_string(out.join("robots.txt")).unwrap();
    assert!(
        robots.contains(&format!(
            "\nUser-agent: CDIF1.0\nDisallow:\nSitemap: {PUBLIC_URL}cdif-sitemap.xml\n"
        )),
        "{robots}"
    );
    let docs = files(&out.join("cdif"));
    assert_eq!(docs.len(), 307, "every live record with a landing page");
    let landing: std::collections::BTreeSet<String> = top_files(&out)
        .iter()
        .filter(|(n, _)| n.starts_with("sitemap-"))
        .flat_map(|(_, b)| locs_of(b))
        .collect();
    let mut with = std::collections::BTreeMap::<&str, usize>::new();
    for (name, bytes) in &docs {
        assert!(name.ends_with(".jsonld") && name.len() == 16 + 7, "{name}");
        let v: serde_json::Value = serde_json::from_slice(bytes).unwrap();
        assert_eq!(v["@context"], "https://schema.org/");
        assert!(v["@type"].as_str().is_some_and(|t| !t.is_empty()));
        let url = v["url"].as_str().unwrap();
        assert_eq!(v["@id"], url);
        assert!(
            landing.contains(url),
            "{url} is a landing page of the sitemap"
        );
        for field in [
            "name",
            "description",
            "creator",
            "datePublished",
            "keywords",
            "publisher",
            "inLanguage",
            "license",
            "identifier",
            "subjectOf",
        ] {
            if v.get(field).is_some() {
                *with.entry(field).or_default() += 1;
            }
        }
    }
    // The sample's records carry every element somewhere.
    for field in [
        "name",
        "creator",
        "datePublished",
        "publisher",
        "license",
        "identifier",
        "subjectOf",
    ] {
        assert!(
            with.get(field).is_some_and(|n| *n > 0),
            "no document has {field}: {with:?}"
        );
    }
    let sitemap_locs: std::collections::BTreeSet<String> = top_files(&out)
        .iter()
        .filter(|(n, _)| n.starts_with("cdif-sitemap-"))
        .flat_map(|(_, b)| locs_of(b))
        .collect();
    let doc_urls: std::collections::BTreeSet<String> = docs
        .keys()
        .map(|n| format!("{PUBLIC_URL}cdif/{n}"))
        .collect();
    assert_eq!(sitemap_locs, doc_urls);

    // The same records give the same names and bytes.
    let again = tmp.path().join("again");
    export(&again, &["--cdif"]);
    assert_eq!(files(&again.join("cdif")), docs);
}

/// CDIF's metadata list form (`--cdif-list`): the same documents gathered in schema.org
/// `ItemList`s of at most `--max-urls` each, in order, each item a `ListItem` whose `item` is the
/// document as published on its own; the lists' sitemap lists exactly the lists; robots.txt
/// announces both CDIF sitemaps to
/// `User-agent: CDIF1.0`; the files beside the `cdif/` folder match their golden copies. Alone,
/// the lists hold every document and no `cdif/` folder is written.
#[test]
fn cdif_lists_hold_the_documents() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    export(&out, &["--cdif", "--cdif-list", "--max-urls", "100"]);
    let robots = fs::read_to_string(out.join("robots.txt")).unwrap();
    assert!(
        robots.ends_with(&format!(
            "\nUser-agent: CDIF1.0\nDisallow:\nSitemap: {PUBLIC_URL}cdif-sitemap.xml\n\
             Sitemap: {PUBLIC_URL}cdif-list-sitemap.xml\n"
        )),
        "{robots}"
    );
    // Each document as one canonical string (its members sorted), to compare as sets.
    let canonical = |v: &serde_json::Value| serde_json::to_string(v).unwrap();
    let docs: std::collections::BTreeSet<String> = files(&out.join("cdif"))
        .values()
        .map(|b| canonical(&serde_json::from_slice(b).unwrap()))
        .collect();
    assert_eq!(docs.len(), 307);
    let top = top_files(&out);
    let lists: Vec<(&String, serde_json::Value)> = top
        .iter()
        .filter(|(n, _)| n.starts_with("cdif-list-") && n.ends_with(".jsonld"))
        .map(|(n, b)| (n, serde_json::from_slice(b).unwrap()))
        .collect();
    let names: Vec<&str> = lists.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "cdif-list-1.jsonld",
            "cdif-list-2.jsonld",
            "cdif-list-3.jsonld",
            "cdif-list-4.jsonld"
        ]
    );
    let mut listed = Vec::new();
    for (name, list) in &lists {
        assert_eq!(list["@context"], "https://schema.org/", "{name}");
        assert_eq!(list["@type"], "ItemList", "{name}");
        let items = list["itemListElement"].as_array().unwrap();
        assert_eq!(list["numberOfItems"], items.len(), "{name}");
        assert!(items.len() <= 100, "{name}");
        for (k, item) in items.iter().enumerate() {
            assert_eq!(item["@type"], "ListItem");
            assert_eq!(item["position"], k + 1);
            listed.push(item["item"].clone());
        }
    }
    let listed_set: std::collections::BTreeSet<String> = listed.iter().map(canonical).collect();
    assert_eq!(listed.len(), 307, "each document once");
    assert_eq!(listed_set, docs, "the lists hold the documents as they are");
    // The lists' sitemap: an index with one shard listing the four lists.
    let index_locs = locs_of(&top["cdif-list-sitemap.xml"]);
    assert_eq!(index_locs, [format!("{PUBLIC_URL}cdif-list-sitemap-1.xml")]);
    let list_locs = locs_of(&top["cdif-list-sitemap-1.xml"]);
    // No lastmod: a record deleted moves the documents after it from list to list, which the
    // newest datestamp of each would not show.
    assert!(!String::from_utf8_lossy(&top["cdif-list-sitemap-1.xml"]).contains("<lastmod>"));
    assert_eq!(
        list_locs,
        names
            .iter()
            .map(|n| format!("{PUBLIC_URL}{n}"))
            .collect::<Vec<_>>()
    );

    // The files beside the documents, golden; the lists hold every document's bytes (the
    // same as its file, as checked above).
    check_golden("sample-cdif", &top);

    // The lists alone: the same documents in the same lists, no file per record.
    let alone = tmp.path().join("alone");
    export(&alone, &["--cdif-list", "--max-urls", "100"]);
    assert!(!alone.join("cdif").exists());
    assert!(!alone.join("cdif-sitemap.xml").exists());
    let top_alone = top_files(&alone);
    for name in &names {
        assert_eq!(top_alone[*name], top[*name], "{name}");
    }
    let robots = fs::read_to_string(alone.join("robots.txt")).unwrap();
    assert!(
        robots.ends_with(&format!(
            "\nUser-agent: CDIF1.0\nDisallow:\nSitemap: {PUBLIC_URL}cdif-list-sitemap.xml\n"
        )),
        "{robots}"
    );
}

/// The files directly in `dir`, by name; folders are left out.
pub(crate) fn top_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            (
                e.file_name().into_string().unwrap(),
                fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

pub(crate) fn locs_of(bytes: &[u8]) -> Vec<String> {
    let text = std::str::from_utf8(bytes).unwrap();
    let doc = roxmltree::Document::parse(text).unwrap();
    doc.descendants()
        .filter(|n| n.tag_name().name() == "loc")
        .filter_map(|n| n.text().map(str::to_owned))
        .collect()
}

#[test]
fn gzip_export_matches_golden() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    export(&out, GZIP_ARGS);
    let written = files(&out);
    let shards: Vec<&str> = written
        .keys()
        .map(String::as_str)
        .filter(|n| n.starts_with("sitemap-"))
        .collect();
    // 456 URLs at 100 per shard; every shard compressed, none left plain (SM-17).
    assert_eq!(
        shards,
        [
            "sitemap-1.xml.gz",
            "sitemap-2.xml.gz",
            "sitemap-3.xml.gz",
            "sitemap-4.xml.gz",
            "sitemap-5.xml.gz"
        ]
    );
    check_golden("sample-gzip", &expanded(&written));
}

#[test]
fn exports_are_deterministic() {
    // ARCHITECTURE.md's invariant "output is deterministic", H-09: the same records give
    // byte-identical files, including the gzip bytes (no name, no mtime in the header).
    for extra in [&[][..], GZIP_ARGS] {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        export(&a, extra);
        export(&b, extra);
        let (first, second) = (files(&a), files(&b));
        assert_eq!(
            first.keys().collect::<Vec<_>>(),
            second.keys().collect::<Vec<_>>(),
            "{extra:?}"
        );
        for (name, bytes) in &first {
            assert!(
                &second[name] == bytes,
                "{name} differs between two exports {extra:?}: {}",
                first_difference(bytes, &second[name])
            );
        }
    }
}

#[test]
fn sample_export_reads_right() {
    // What the golden files must show, checked on the output itself so that a careless
    // regeneration cannot bless a regression.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    export(&out, &[]);
    let shard = fs::read_to_string(out.join("sitemap-1.xml")).unwrap();
    let index = fs::read_to_string(out.join("sitemap.xml")).unwrap();
    let robots = fs::read_to_string(out.join("robots.txt")).unwrap();
    let host = "https://repository.northbridge.example";

    // SM-02: the declaration at byte 0 of both XML files.
    for text in [&shard, &index] {
        assert!(text.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"));
    }
    let doc = roxmltree::Document::parse(&shard).expect("the shard is well-formed");
    let locs: Vec<(&str, Option<&str>)> = doc
        .root_element()
        .children()
        .filter(|n| n.has_tag_name("url"))
        .map(|url| {
            let child = |name: &str| {
                url.children()
                    .find(|n| n.has_tag_name(name))
                    .and_then(|n| n.text())
            };
            (child("loc").unwrap(), child("lastmod"))
        })
        .collect();
    let lastmod = |loc: &str| {
        locs.iter()
            .find(|(l, _)| *l == loc)
            .unwrap_or_else(|| panic!("{loc} is not published"))
            .1
    };

    // SM-03: `&` escaped in the file, the URL intact once parsed.
    assert!(shard.contains(&format!("<loc>{host}/items/view?id=42&amp;lang=en</loc>")));
    assert_eq!(
        lastmod(&format!("{host}/items/view?id=42&lang=en")),
        Some("2024-07-15")
    );
    // SM-04: non-ASCII percent-encoded as UTF-8.
    assert!(shard.contains(&format!("<loc>{host}/items/caf%C3%A9-42</loc>")));
    assert!(!shard.contains("café"));
    // SM-05: the 2,100-character URL of record 44 is not published, not truncated.
    assert!(!shard.contains("xxxxxxxxxx"));
    assert!(locs.iter().all(|(l, _)| l.len() <= 2047));
    // SM-16: items/42 is listed by records 42 (2024-07-15) and 43 (2025-08-16): once, newest.
    assert_eq!(
        locs.iter()
            .filter(|(l, _)| l.ends_with("/items/42"))
            .count(),
        1
    );
    assert_eq!(lastmod(&format!("{host}/items/42")), Some("2025-08-16"));
    // A record's lastmod is its datestamp (record 1: 2016-02-02); deleted record 23 is absent.
    assert_eq!(lastmod(&format!("{host}/items/1")), Some("2016-02-02"));
    assert!(!locs.iter().any(|(l, _)| l.ends_with("/items/23")));
    // SM-13: lastmod is a date or a UTC date-time, never anything else.
    for (loc, d) in &locs {
        let d = d.unwrap_or_else(|| panic!("{loc} has no lastmod"));
        assert!(
            d.len() == 10
                && d.as_bytes()
                    .iter()
                    .enumerate()
                    .all(|(i, b)| if i == 4 || i == 7 {
                        *b == b'-'
                    } else {
                        b.is_ascii_digit()
                    }),
            "{loc}: lastmod {d}"
        );
    }
    // SM-16: each URL once; and sorted, so the same records always give the same file.
    let mut sorted: Vec<&str> = locs.iter().map(|(l, _)| *l).collect();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted, locs.iter().map(|(l, _)| *l).collect::<Vec<_>>());
    // SM-07, G-03: only URLs inside the scope (the baseURL's directory, here the host root).
    assert!(locs.iter().all(|(l, _)| l.starts_with(&format!("{host}/"))));
    assert!(!shard.contains("publisher.example.com") && !shard.contains("doi.org"));
    assert!(!shard.contains("http://repository.northbridge.example/"));
    // SM-10: the index lists the shard with the newest lastmod in it.
    let newest = locs.iter().filter_map(|(_, d)| *d).max().unwrap();
    assert!(index.contains(&format!(
        "<sitemap><loc>{host}/sitemap-1.xml</loc><lastmod>{newest}</lastmod></sitemap>"
    )));
    // SM-18: robots.txt announces the index with an absolute URL.
    assert!(
        robots
            .lines()
            .any(|l| l == format!("Sitemap: {host}/sitemap.xml"))
    );
}
