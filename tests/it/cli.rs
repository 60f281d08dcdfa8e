//! The `oai-bridge` binary as a user runs it: the export summary (checked against figures
//! computed here from the sample repository and from the files written), `--help`, exit codes
//! (0 success, 1 failure, 2 usage, 78 bad configuration), and what happens to the output folder
//! when an export fails, is refused, or replaces an earlier one.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use url::Url;

const PUBLIC_URL: &str = "https://repository.northbridge.example/";
const SAMPLE: &str = "fixtures/sample-repository.xml";

fn crate_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `oai-bridge` from the crate root, with no configuration leaking in from the environment.
fn bridge() -> Command {
    let mut cmd = crate::golden::bridge();
    cmd.current_dir(crate_root())
        .env_remove("OAI_BRIDGE_CONFIG")
        .env_remove("OAI_BRIDGE_PUBLIC_URL")
        .env_remove("OAI_BRIDGE_USER_AGENT")
        .env_remove("OAI_BRIDGE_LOG_FORMAT")
        .env_remove("RUST_LOG");
    cmd
}

/// `oai-bridge export --config bridge.toml --out OUT --no-progress` plus `args`; `args` must
/// give `--public-url`. Not `-q`, which leaves the summary out.
fn export(out: &Path, args: &[&str]) -> Output {
    bridge()
        .args([
            "export",
            "--config",
            "bridge.toml",
            "--no-progress",
            "--out",
        ])
        .arg(out)
        .args(args)
        .output()
        .expect("the oai-bridge binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[track_caller]
fn assert_exit(o: &Output, code: i32) {
    assert_eq!(
        o.status.code(),
        Some(code),
        "exit status {}\n--- stdout\n{}--- stderr\n{}",
        o.status,
        stdout(o),
        stderr(o)
    );
}

/// Every file under `dir`, by relative path, with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let bytes = fs::read(&path).unwrap();
                out.insert(path.strip_prefix(root).unwrap().to_owned(), bytes);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// Names in `dir`, sorted: shows any staging folder left behind.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

// ---------------------------------------------------------------------------------------------
// The summary

/// What the sample repository holds, computed here from the XML, independently of the bridge's
/// classifier: DOIs and Handles in their spellings, http(s) URLs inside the scope (the host
/// root, as the baseURL is `https://repository.northbridge.example/oai`), the rest.
#[derive(Debug, Default)]
struct Expected {
    records: u64,
    deleted: u64,
    urls: u64,
    drops: BTreeMap<String, u64>,
}

fn expected_from_sample() -> Expected {
    const OAI: &str = "http://www.openarchives.org/OAI/2.0/";
    const DC: &str = "http://purl.org/dc/elements/1.1/";
    const PID: &[&str] = &[
        "doi:",
        "info:doi/",
        "https://doi.org/",
        "http://dx.doi.org/",
        "hdl:",
        "http://hdl.handle.net/",
    ];
    let text = fs::read_to_string(crate_root().join(SAMPLE)).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    let mut e = Expected::default();
    let mut count_drop = |reason: &str| *e.drops.entry(reason.to_owned()).or_default() += 1;
    let mut urls = std::collections::BTreeSet::new();
    let mut records = 0;
    let mut deleted = 0;
    for record in doc
        .descendants()
        .filter(|n| n.has_tag_name((OAI, "record")))
    {
        records += 1;
        let header = record
            .children()
            .find(|n| n.has_tag_name((OAI, "header")))
            .unwrap();
        if header.attribute("status") == Some("deleted") {
            deleted += 1;
            count_drop("deleted");
            continue;
        }
        for id in record
            .descendants()
            .filter(|n| n.has_tag_name((DC, "identifier")))
        {
            let v = id.text().unwrap().trim();
            let bare_doi = v.starts_with("10.") && v.contains('/');
            if bare_doi || PID.iter().any(|p| v.starts_with(p)) {
                count_drop("persistent_id");
            } else if !v.starts_with("http://") && !v.starts_with("https://") {
                count_drop("not_a_url");
            } else if v.len() > 2047 {
                count_drop("too_long");
            } else if v.starts_with(PUBLIC_URL) {
                let url = Url::parse(v).unwrap().to_string();
                if !urls.insert(url) {
                    count_drop("duplicate");
                }
            } else {
                count_drop("out_of_scope");
            }
        }
    }
    e.records = records;
    e.deleted = deleted;
    e.urls = urls.len() as u64;
    e
}

/// The value part of the summary line labelled `label`.
fn summary_line<'a>(summary: &'a str, label: &str) -> &'a str {
    summary
        .lines()
        .find_map(|l| l.trim_start().strip_prefix(label))
        .unwrap_or_else(|| panic!("no {label:?} line in the summary:\n{summary}"))
        .trim()
}

/// The numbers in a line, in order.
fn numbers(line: &str) -> Vec<u64> {
    line.split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect()
}

/// `out_of_scope 78, not_a_url 113, ...` as a map.
fn drops(line: &str) -> BTreeMap<String, u64> {
    if line == "none" {
        return BTreeMap::new();
    }
    line.split(", ")
        .map(|part| {
            let (reason, n) = part.rsplit_once(' ').unwrap_or_else(|| panic!("{part:?}"));
            (reason.to_owned(), n.parse().unwrap())
        })
        .collect()
}

fn count(haystack: &str, needle: &str) -> u64 {
    haystack.matches(needle).count() as u64
}

#[test]
fn summary_adds_up_against_the_sample_and_the_files() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = export(&out, &["--public-url", PUBLIC_URL]);
    assert_exit(&o, 0);
    let summary = stdout(&o);
    let expected = expected_from_sample();

    // I-01: records, deletions and every drop reason, as counted from the XML here.
    let seen = numbers(summary_line(&summary, "records seen"));
    assert_eq!(
        seen,
        [expected.records, expected.records, expected.deleted],
        "{summary}"
    );
    assert_eq!(
        drops(summary_line(&summary, "not published")),
        expected.drops,
        "{summary}"
    );
    for reason in [
        "out_of_scope",
        "not_a_url",
        "too_long",
        "persistent_id",
        "duplicate",
        "deleted",
    ] {
        assert!(
            expected.drops.contains_key(reason),
            "the sample has no {reason}"
        );
    }

    // The published figures match the files: <url> elements, shards, bytes.
    let published = numbers(summary_line(&summary, "URLs published"));
    let [urls, shards, bytes] = published[..] else {
        panic!("{summary}")
    };
    let files = snapshot(&out);
    let shard_texts: Vec<String> = files
        .iter()
        .filter(|(p, _)| p.to_str().unwrap().starts_with("sitemap-"))
        .map(|(_, b)| String::from_utf8(b.clone()).unwrap())
        .collect();
    assert_eq!(urls, expected.urls);
    assert_eq!(
        urls,
        shard_texts.iter().map(|t| count(t, "<url>")).sum::<u64>()
    );
    assert_eq!(shards, shard_texts.len() as u64);
    let index = String::from_utf8(files[Path::new("sitemap.xml")].clone()).unwrap();
    assert_eq!(shards, count(&index, "<sitemap>"));
    // The bytes of the generation: every file but the folder's marker.
    let written: u64 = files
        .iter()
        .filter(|(p, _)| *p != Path::new(".oai-bridge-export"))
        .map(|(_, b)| b.len() as u64)
        .sum();
    assert_eq!(bytes, written, "{summary}");

    let elapsed = summary_line(&summary, "elapsed");
    let seconds = elapsed
        .strip_suffix(" s")
        .is_some_and(|s| s.parse::<f64>().is_ok());
    // "4 min 05 s" (issue 22: no longer "4m05s").
    let minutes = elapsed.contains(" min ") && elapsed.ends_with(" s");
    assert!(seconds || minutes, "elapsed {elapsed:?}");
    assert_eq!(
        summary_line(&summary, "sitemap index"),
        format!("{PUBLIC_URL}sitemap.xml")
    );
    assert_eq!(summary_line(&summary, "scope"), PUBLIC_URL);
    assert!(summary.starts_with(&format!("Exported {SAMPLE} to {}", out.display())));

    // Issue 22: each reason in words, with a few examples (value and record, in harvest
    // order), the words the status page shows.
    for want in [
        "\n    persistent_id: (expected) a DOI or Handle, not a URL of this repository: rightly \
         not a <loc>",
        "\n      e.g. 10.5555/nbu.2 (oai:repository.northbridge.example:2); \
         http://dx.doi.org/10.5555/nbu.4 (oai:repository.northbridge.example:4); ",
        "\n    out_of_scope: an http(s) URL outside the scope",
        "\n      e.g. oai:repository.northbridge.example:23; ",
    ] {
        assert!(summary.contains(want), "lacks {want:?}:\n{summary}");
    }
    assert!(!summary.contains("loopback"), "{summary}");
}

/// Issue 22: a public URL on a loopback address names files no crawler can reach; the export
/// says so.
#[test]
fn a_loopback_public_url_is_pointed_out() {
    let tmp = tempfile::tempdir().unwrap();
    for (public, loopback) in [
        ("http://127.0.0.1:8080/sample/", true),
        ("http://localhost/", true),
        ("http://[::1]:8080/", true),
        ("https://bridge.example/maps/", false),
    ] {
        let out = tmp.path().join("out");
        let o = export(&out, &["--public-url", public]);
        assert_exit(&o, 0);
        let summary = stdout(&o);
        assert_eq!(
            summary.contains(&format!(
                "Note: the public URL {public} is a loopback address"
            )),
            loopback,
            "{summary}"
        );
    }
}

/// `export --json` says in JSON what the text summary says, with the same counts as the sample
/// and the files.
#[test]
fn the_json_summary_holds_the_same_figures() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = export(&out, &["--public-url", PUBLIC_URL, "--json"]);
    assert_exit(&o, 0);
    let json: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let expected = expected_from_sample();
    let n = |key: &str| {
        json[key]
            .as_u64()
            .unwrap_or_else(|| panic!("{key} in {json}"))
    };
    assert_eq!(n("records"), expected.records);
    assert_eq!(n("records_seen"), expected.records);
    assert_eq!(n("deleted"), expected.deleted);
    assert_eq!(n("urls"), expected.urls);
    // Issue 22: a few examples of each reason (up to 3), and the counts they stand for.
    let examples = json["drop_examples"].as_object().unwrap();
    assert_eq!(
        examples.keys().collect::<BTreeSet<_>>(),
        expected.drops.keys().collect::<BTreeSet<_>>()
    );
    assert_eq!(
        json["drop_examples"]["persistent_id"][0],
        serde_json::json!({"record": "oai:repository.northbridge.example:2", "value": "10.5555/nbu.2"})
    );
    assert!(
        examples
            .values()
            .all(|e| (1..=3).contains(&e.as_array().unwrap().len()))
    );
    assert_eq!(json["deleted_counted"], true);
    let drops: BTreeMap<String, u64> = serde_json::from_value(json["drops"].clone()).unwrap();
    assert_eq!(drops, expected.drops);
    let files = snapshot(&out);
    let shards = files
        .keys()
        .filter(|p| p.to_str().unwrap().starts_with("sitemap-"))
        .count() as u64;
    assert_eq!(n("shards"), shards);
    let written: u64 = files
        .iter()
        .filter(|(p, _)| *p != Path::new(".oai-bridge-export"))
        .map(|(_, b)| b.len() as u64)
        .sum();
    assert_eq!(n("bytes_written"), written);
    assert_eq!(json["out"], out.to_str().unwrap());
    assert_eq!(json["index_url"], format!("{PUBLIC_URL}sitemap.xml"));
    assert_eq!(json["source"], SAMPLE);
}

#[test]
fn gzip_summary_counts_shards_and_compressed_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = export(
        &out,
        &["--public-url", PUBLIC_URL, "--gzip", "--max-urls", "100"],
    );
    assert_exit(&o, 0);
    let summary = stdout(&o);
    let published = numbers(summary_line(&summary, "URLs published"));
    let files = snapshot(&out);
    let gz = files
        .keys()
        .filter(|p| p.to_str().unwrap().ends_with(".xml.gz"))
        .count() as u64;
    let written: u64 = files
        .iter()
        .filter(|(p, _)| *p != Path::new(".oai-bridge-export"))
        .map(|(_, b)| b.len() as u64)
        .sum();
    // 456 URLs at 100 per shard (SM-09 with a lower limit); bytes as stored on disk.
    assert_eq!(published, [expected_from_sample().urls, 5, written]);
    assert_eq!(gz, 5);
}

// ---------------------------------------------------------------------------------------------
// --help and exit codes

#[test]
fn help_lists_every_export_flag() {
    use clap::CommandFactory;

    let o = bridge().args(["export", "--help"]).output().unwrap();
    assert_exit(&o, 0);
    let help = stdout(&o);
    // The flags a user reads about in the README, by name...
    for flag in [
        "--config",
        "--repository",
        "--base-url",
        "--out",
        "--public-url",
        "--set",
        "--from",
        "--until",
        "--scope",
        "--gzip",
        "--max-urls",
        "--max-bytes",
        "--max-attempts",
        "--request-timeout",
        "--politeness-delay",
        "--retry-after-max",
        "--deadline",
        "--max-body-bytes",
        "--backoff-initial",
        "--user-agent",
        "--no-progress",
        "--log-format",
        "--verbose",
        "--quiet",
    ] {
        assert!(help.contains(flag), "`export --help` lacks {flag}:\n{help}");
    }
    // ...and every argument clap knows of, each with a description.
    let cli = oai_bridge::Cli::command();
    let export = cli.find_subcommand("export").unwrap();
    for arg in cli.get_arguments().chain(export.get_arguments()) {
        let Some(long) = arg.get_long() else { continue };
        if long == "help" || long == "version" {
            continue;
        }
        assert!(
            help.contains(&format!("--{long}")),
            "`export --help` lacks --{long}"
        );
        assert!(arg.get_help().is_some(), "--{long} has no help text");
    }
}

#[test]
fn bad_configuration_exits_78_naming_the_key() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    // Unknown key in a copy of the shipped bridge.toml; the copy's relative paths would point
    // into the temp dir, but the file is rejected before any of them is used.
    let shipped = fs::read_to_string(crate_root().join("bridge.toml")).unwrap();
    let typo = shipped.replace(
        "max_empty_pages = 10",
        "max_empty_pages = 10\nmax_empty_page = 3",
    );
    assert_ne!(typo, shipped);
    let config = tmp.path().join("bridge.toml");
    fs::write(&config, typo).unwrap();
    let o = bridge()
        .args(["export", "--no-progress", "-q", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(&out)
        .args(["--public-url", PUBLIC_URL])
        .output()
        .unwrap();
    assert_exit(&o, 78);
    let err = stderr(&o);
    assert!(err.contains("max_empty_page`"), "{err}");
    assert!(err.contains(&config.display().to_string()), "{err}");

    for (args, key, value) in [
        (
            &["--public-url", PUBLIC_URL, "--max-urls", "60000"][..],
            "--max-urls",
            "60000",
        ),
        (
            &["--public-url", "not-a-url"][..],
            "--public-url",
            "not-a-url",
        ),
        (
            &[
                "--public-url",
                PUBLIC_URL,
                "--from",
                "2020-02-01",
                "--until",
                "2020-01-01",
            ][..],
            "--from",
            "2020-02-01",
        ),
    ] {
        let o = export(&out, args);
        assert_exit(&o, 78);
        let err = stderr(&o);
        assert!(err.contains(key) && err.contains(value), "{args:?}: {err}");
    }
    // Nothing was written for any of them.
    assert_eq!(names(tmp.path()), ["bridge.toml"]);
}

#[test]
fn usage_errors_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let out = out.to_str().unwrap();
    for args in [
        &["export", "--out", out, "--bogus"][..],
        &["export", "--public-url", PUBLIC_URL][..],
        &["export", "--out", out, "--max-urls", "many"][..],
        &["export", "--out", out, "--log-format", "xml"][..],
        &["exprot", "--out", out][..],
        &[][..],
    ] {
        let o = bridge().args(args).output().unwrap();
        assert_exit(&o, 2);
        assert!(!stderr(&o).is_empty(), "{args:?}");
    }
    // A flag no layer gives: a usage error too, naming the flag, whether or not a (good)
    // configuration file was read; a bad file stays 78 (above).
    for (args, flag) in [
        (&["export", "--out", out][..], "--base-url"),
        (
            &["export", "--out", out, "--base-url", SAMPLE][..],
            "--public-url",
        ),
        (
            &["export", "--out", out, "--config", "bridge.toml"][..],
            "--public-url",
        ),
    ] {
        let o = bridge().args(args).output().unwrap();
        assert_exit(&o, 2);
        let err = stderr(&o);
        assert!(
            err.contains(&format!("command line: {flag}:")) && err.contains("--help"),
            "{args:?}: {err}"
        );
    }
    assert!(names(tmp.path()).is_empty());
}

#[test]
fn a_missing_static_file_fails_naming_the_path() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("no-such-repository.xml");
    let o = export(
        &tmp.path().join("out"),
        &[
            "--base-url",
            missing.to_str().unwrap(),
            "--public-url",
            PUBLIC_URL,
        ],
    );
    assert_exit(&o, 1);
    assert!(
        stderr(&o).contains(&missing.display().to_string()),
        "{}",
        stderr(&o)
    );
    assert!(names(tmp.path()).is_empty());
}

// ---------------------------------------------------------------------------------------------
// The output folder

#[test]
fn a_failed_export_leaves_the_previous_folder_byte_identical() {
    // I-02: a harvest that did not reach the end, or found nothing to publish, replaces nothing.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    assert_exit(&export(&out, &["--public-url", PUBLIC_URL]), 0);
    let before = snapshot(&out);
    assert!(before.contains_key(Path::new("sitemap-1.xml")));

    // A Static Repository file cut off in the middle of a record.
    let sample = fs::read(crate_root().join(SAMPLE)).unwrap();
    let broken_dir = tempfile::tempdir().unwrap();
    let broken = broken_dir.path().join("broken.xml");
    fs::write(&broken, &sample[..sample.len() / 2]).unwrap();
    let o = export(
        &out,
        &[
            "--base-url",
            broken.to_str().unwrap(),
            "--public-url",
            PUBLIC_URL,
        ],
    );
    assert_exit(&o, 1);
    assert!(stderr(&o).contains("left as it was"), "{}", stderr(&o));
    assert_eq!(snapshot(&out), before);
    assert_eq!(names(tmp.path()), ["out"]);

    // Nothing inside the scope: no empty sitemap (SM-15), and the message says what to do.
    let o = export(
        &out,
        &[
            "--public-url",
            PUBLIC_URL,
            "--scope",
            "https://elsewhere.example/",
        ],
    );
    assert_exit(&o, 1);
    let err = stderr(&o);
    assert!(err.contains("0 of") && err.contains("--scope"), "{err}");
    assert_eq!(snapshot(&out), before);
    assert_eq!(names(tmp.path()), ["out"]);
}

#[test]
fn a_folder_not_written_by_oai_bridge_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("home");
    fs::create_dir(&out).unwrap();
    fs::write(out.join("thesis.tex"), "\\documentclass{article}\n").unwrap();
    fs::create_dir(out.join("notes")).unwrap();
    fs::write(out.join("notes/todo.txt"), "everything\n").unwrap();
    let before = snapshot(&out);

    let o = export(&out, &["--public-url", PUBLIC_URL]);
    assert_exit(&o, 1);
    let err = stderr(&o);
    assert!(
        err.contains("refusing") && err.contains(&out.display().to_string()),
        "{err}"
    );
    assert_eq!(snapshot(&out), before);
    assert_eq!(names(tmp.path()), ["home"]);
}

#[test]
fn a_second_export_replaces_the_folder_and_leaves_no_staging() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    assert_exit(
        &export(&out, &["--public-url", PUBLIC_URL, "--max-urls", "100"]),
        0,
    );
    assert!(out.join("sitemap-5.xml").exists());

    assert_exit(&export(&out, &["--public-url", PUBLIC_URL]), 0);
    // The folder is replaced as a whole: the shards of the first export are gone.
    let after = snapshot(&out);
    let files: Vec<&str> = after.keys().map(|p| p.to_str().unwrap()).collect();
    assert_eq!(
        files,
        [
            ".oai-bridge-export",
            "robots.txt",
            "sitemap-1.xml",
            "sitemap.xml"
        ]
    );
    let index = String::from_utf8(after[Path::new("sitemap.xml")].clone()).unwrap();
    assert_eq!(count(&index, "<sitemap>"), 1);
    assert_eq!(names(tmp.path()), ["out"]);

    // An empty folder is fine too, and so is an unchanged rerun.
    let empty = tmp.path().join("empty");
    fs::create_dir(&empty).unwrap();
    assert_exit(&export(&empty, &["--public-url", PUBLIC_URL]), 0);
    assert_eq!(snapshot(&empty), after);
    assert_eq!(names(tmp.path()), ["empty", "out"]);
}

#[test]
fn cross_submission_note_only_when_the_public_url_is_not_above_the_scope() {
    // SM-07, SM-08: the scope is https://repository.northbridge.example/ (the baseURL's
    // directory). Served elsewhere, or below it, the sitemaps need a Sitemap: line on the
    // repository host; served at its root, they do not.
    // With profiles, every index that lists the repository's pages needs its line.
    let tmp = tempfile::tempdir().unwrap();
    let profiles = ["--signmap", "--ocx", "--cdif", "--diwoo", "articles=12"];
    for (public, extra, note) in [
        ("https://bridge.example/maps/", &[][..], true),
        (
            "https://repository.northbridge.example/sitemaps/",
            &[],
            true,
        ),
        (PUBLIC_URL, &[], false),
        ("https://bridge.example/maps/", &profiles, true),
    ] {
        let out = tmp.path().join("out");
        let mut args = vec!["--public-url", public];
        args.extend(extra);
        let o = export(&out, &args);
        assert_exit(&o, 0);
        let summary = stdout(&o);
        let line = format!("Sitemap: {public}sitemap.xml");
        assert_eq!(
            summary.contains("cross-submission"),
            note,
            "{public}:\n{summary}"
        );
        assert_eq!(summary.contains(&line), note, "{public}:\n{summary}");
        // Either way the files point at where they are served (SM-18).
        let robots = fs::read_to_string(out.join("robots.txt")).unwrap();
        assert!(robots.lines().any(|l| l == line), "{robots}");
        let advised: Vec<&str> = summary
            .lines()
            .filter_map(|l| l.strip_prefix("  Sitemap: "))
            .collect();
        if !extra.is_empty() {
            let names = [
                "sitemap.xml",
                "signmap.xml",
                "ocx.xml",
                "sitemapindex-diwoo-infocat012.xml",
            ];
            assert_eq!(advised, names.map(|n| format!("{public}{n}")), "{summary}");
        }
        for url in advised {
            assert!(
                robots.contains(&format!("Sitemap: {url}\n")),
                "{url}: {robots}"
            );
        }
        let index = fs::read_to_string(out.join("sitemap.xml")).unwrap();
        assert!(index.contains(&format!("<loc>{public}sitemap-1.xml</loc>")));
    }
}

/// `oai-bridge serve --check-config` from the crate root with `args`, no listener setting
/// leaking in from the environment.
fn check_config(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = bridge();
    cmd.args(["serve", "--check-config"])
        .args(args)
        .env_remove("OAI_BRIDGE_LISTEN")
        .env_remove("OAI_BRIDGE_ADMIN_LISTEN");
    cmd.envs(env.iter().copied());
    cmd.output().expect("the oai-bridge binary runs")
}

/// The public and the admin listener on one port: refused when the configuration is
/// validated (exit 78, naming both keys), not when `serve` fails to bind the second.
#[test]
fn one_port_for_both_listeners_is_a_configuration_error() {
    for (args, env, keys) in [
        (
            &[
                "--listen",
                "127.0.0.1:9000",
                "--admin-listen",
                "127.0.0.1:9000",
            ][..],
            &[][..],
            ["--listen", "--admin-listen"],
        ),
        (
            &["--listen", "127.0.0.1:9000"][..],
            &[("OAI_BRIDGE_ADMIN_LISTEN", "0.0.0.0:9000")][..],
            ["--listen", "OAI_BRIDGE_ADMIN_LISTEN"],
        ),
        (
            &["--admin-listen", "127.0.0.2:9000"][..],
            &[("OAI_BRIDGE_LISTEN", "[::]:9000")][..],
            ["OAI_BRIDGE_LISTEN", "--admin-listen"],
        ),
    ] {
        let o = check_config(args, env);
        assert_exit(&o, 78);
        let err = stderr(&o);
        for key in keys {
            assert!(
                err.contains(key),
                "{args:?} {env:?}: {err} should name {key}"
            );
        }
        assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    }
    // Two ephemeral ports, two addresses on one port, two ports on one address: all valid.
    for args in [
        ["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"],
        ["--listen", "0.0.0.0:0", "--admin-listen", "0.0.0.0:0"],
        [
            "--listen",
            "127.0.0.1:9000",
            "--admin-listen",
            "127.0.0.2:9000",
        ],
        ["--listen", "0.0.0.0:9000", "--admin-listen", "0.0.0.0:9001"],
    ] {
        let o = check_config(&args, &[]);
        assert_exit(&o, 0);
        assert!(stdout(&o).contains("valid"), "{args:?}: {}", stdout(&o));
    }
    // The same pair from the file alone is refused too, naming the file's keys.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bridge.toml");
    let sample = crate_root().join(SAMPLE);
    let text = format!(
        "[server]\nlisten = \"0.0.0.0:9000\"\nadmin_listen = \"127.0.0.1:9000\"\n\n\
         [[repository]]\nname = \"sample\"\nbase_url = {:?}\n",
        sample.display().to_string()
    );
    fs::write(&config, text).unwrap();
    let o = check_config(&["--config", config.to_str().unwrap()], &[]);
    assert_exit(&o, 78);
    let err = stderr(&o);
    assert!(
        err.contains("[server] admin_listen") && err.contains("[server] listen"),
        "{err}"
    );
}

/// `oai-bridge serve` with `args` (no listener setting from the environment), expected to exit
/// at start: its output; a gateway that starts instead is killed, and the test fails.
fn serve_that_exits(args: &[&std::ffi::OsStr]) -> Output {
    use std::process::Stdio;
    let mut child = bridge()
        .arg("serve")
        .args(args)
        .env_remove("OAI_BRIDGE_LISTEN")
        .env_remove("OAI_BRIDGE_ADMIN_LISTEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the oai-bridge binary runs");
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > std::time::Duration::from_secs(20) {
            child.kill().unwrap();
            panic!("serve {args:?} started: {:?}", child.wait_with_output());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Issue: what stops `serve` from starting on a configuration exits 78 (EX_CONFIG, which the
/// systemd unit does not restart; 1 it would restart forever) with the key named, and
/// `--check-config` finds it first: a port in use (the one a repository's own baseURL takes on
/// this host said so, with what to set), a state_dir that is no folder, a Static Repository
/// file that is missing.
#[test]
fn what_stops_the_start_exits_78_and_check_config_finds_it() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let sample = crate_root().join(SAMPLE).display().to_string();
    let write = |name: &str, base: &str, server: &str| {
        let path = dir.path().join(name);
        fs::write(
            &path,
            format!(
                "[server]\n{server}state_dir = {:?}\n\
                 [[repository]]\nname = \"dspace\"\nbase_url = {base:?}\n",
                state.display().to_string()
            ),
        )
        .unwrap();
        path
    };
    let tomcat = format!("http://127.0.0.1:{port}/server/oai/request");
    // Every listener but the one each case is about on a port of its own: the default admin
    // port (8081) may be taken on the machine running the tests.
    let dspace = write(
        "dspace.toml",
        &tomcat,
        &format!("listen = \"127.0.0.1:{port}\"\nadmin_listen = \"127.0.0.1:0\"\n"),
    );
    let busy = write(
        "busy.toml",
        &sample,
        &format!("listen = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:{port}\"\n"),
    );
    let missing = write(
        "missing.toml",
        "gone.xml",
        "listen = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\n",
    );
    let plain = write(
        "plain.toml",
        &sample,
        "listen = \"127.0.0.1:0\"\nadmin_listen = \"off\"\n",
    );
    let file_state = dir.path().join("a-file");
    fs::write(&file_state, "").unwrap();
    let in_use = format!(
        "[server] listen 127.0.0.1:{port} is in use, and it is the port of [[repository]] \
         \"dspace\"'s baseURL {tomcat}, on this host"
    );
    for (args, want) in [
        (
            vec![dspace.as_os_str()],
            vec![
                in_use.clone(),
                "Set [server] listen (OAI_BRIDGE_LISTEN, --listen) to a free port".to_owned(),
            ],
        ),
        (
            vec![busy.as_os_str()],
            vec![format!(
                "[server] admin_listen 127.0.0.1:{port} is in use by another process: stop it, \
                 or set [server] admin_listen (OAI_BRIDGE_ADMIN_LISTEN, --admin-listen) to a free \
                 port"
            )],
        ),
        (
            vec![missing.as_os_str()],
            vec![format!(
                "{}: [[repository]] \"dspace\" base_url: cannot read the Static Repository \
                 file {}: ",
                missing.display(),
                dir.path().join("gone.xml").display()
            )],
        ),
        (
            vec![
                plain.as_os_str(),
                "--state-dir".as_ref(),
                file_state.as_os_str(),
            ],
            vec![format!(
                "[server] state_dir {}: not a folder",
                file_state.display()
            )],
        ),
    ] {
        let mut serve = vec!["--config".as_ref()];
        serve.extend(&args);
        let o = serve_that_exits(&serve);
        assert_exit(&o, 78);
        let err = stderr(&o);
        for want in &want {
            assert!(
                err.contains(want.as_str()),
                "{args:?}: {err}\nshould say {want}"
            );
        }
        assert!(!stdout(&o).contains("serving on"), "{}", stdout(&o));

        let mut checked = vec!["--config"];
        checked.extend(args.iter().map(|a| a.to_str().unwrap()));
        let o = check_config(&checked, &[]);
        assert_exit(&o, 78);
        let err = stderr(&o);
        for (i, want) in want.iter().enumerate() {
            let want = if i == 0 {
                format!("error: {want}")
            } else {
                want.clone()
            };
            assert!(err.contains(&want), "{args:?}: {err}\nshould say {want}");
        }
        assert!(
            stdout(&o).contains("valid, but serve would not start (1 problem, on stderr)"),
            "{}",
            stdout(&o)
        );
    }
    assert!(!state.exists(), "no check made the state_dir");
    // The DSpace's port free (its Tomcat stopped), the gateway would take it: a warning.
    drop(taken);
    let o = check_config(
        &[
            "--config",
            dspace.to_str().unwrap(),
            "--admin-listen",
            "off",
        ],
        &[],
    );
    assert_exit(&o, 0);
    assert!(
        stdout(&o).contains(&format!(
            "warning: [server] listen 127.0.0.1:{port} is the port of [[repository]] \"dspace\""
        )),
        "{}",
        stdout(&o)
    );
}

/// `--check-config` counts repositories in English.
#[test]
fn check_config_says_repository_for_one() {
    let o = check_config(
        &["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"],
        &[],
    );
    assert_exit(&o, 0);
    let out = stdout(&o);
    assert!(
        out.starts_with("bridge.toml: valid; 1 repository:\n"),
        "{out}"
    );
}

/// `--check-config` says where each setting that is not at its default came from: a flag, a
/// variable or the file.
#[test]
fn check_config_says_where_the_settings_come_from() {
    let o = check_config(
        &["--listen", "127.0.0.1:0"],
        &[("OAI_BRIDGE_ADMIN_LISTEN", "off")],
    );
    assert_exit(&o, 0);
    let out = stdout(&o);
    for line in [
        "  settings (the others are their defaults):\n",
        "    --listen: [server] listen\n",
        "    OAI_BRIDGE_ADMIN_LISTEN: [server] admin_listen\n",
        "    bridge.toml: [server] state_dir, cache_bytes,",
    ] {
        assert!(out.contains(line), "{line:?}: {out}");
    }
}

/// A command whose reader went away before it printed (`| true`): it ends quietly, with no
/// panic and no exit 101, as Unix tools do.
#[test]
fn a_closed_pipe_ends_a_command_quietly() {
    use std::process::Stdio;
    let commands: [&[&str]; 4] = [
        &["serve", "--check-config"],
        &["check", SAMPLE, "--fetch", "0"],
        &["check", SAMPLE, "--fetch", "0", "--json"],
        &["man"],
    ];
    for args in commands {
        // Free ports: the check binds the listeners' (the shipped 8080 and 8081 may be taken).
        let mut child = bridge()
            .args(args)
            .env("OAI_BRIDGE_LISTEN", "127.0.0.1:0")
            .env("OAI_BRIDGE_ADMIN_LISTEN", "127.0.0.1:0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the oai-bridge binary runs");
        // The reader closes at once: the child's first write meets a broken pipe.
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        let err = stderr(&o);
        assert_ne!(o.status.code(), Some(101), "{args:?}: {err}");
        assert!(o.status.success(), "{args:?}: {} {err}", o.status);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(!err.contains("Broken pipe"), "{args:?}: {err}");
    }
}

/// `serve` warns, once and at start, when the admin listener is on every interface, and not
/// when it is on loopback.
#[test]
fn an_admin_listener_on_every_interface_is_warned_about() {
    use std::io::{BufRead as _, BufReader};
    use std::process::Stdio;
    const WARNING: &str = "the admin listener (status page, /metrics, reload) is reachable from \
                           every interface; keep it off the public network";
    for (admin, warned) in [("0.0.0.0:0", true), ("127.0.0.1:0", false)] {
        let state = tempfile::tempdir().unwrap();
        let mut child = bridge()
            .args(["serve", "--listen", "127.0.0.1:0", "--admin-listen", admin])
            .arg("--state-dir")
            .arg(state.path())
            .env_remove("OAI_BRIDGE_LISTEN")
            .env_remove("OAI_BRIDGE_ADMIN_LISTEN")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the oai-bridge binary runs");
        // The first line on stdout comes after the warning (logged as it is, unbuffered).
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        assert!(first.starts_with("oai-bridge serving on"), "{first:?}");
        child.kill().unwrap();
        let o = child.wait_with_output().unwrap();
        let err = stderr(&o);
        let lines: Vec<&str> = err.lines().filter(|l| l.contains(WARNING)).collect();
        assert_eq!(lines.len(), usize::from(warned), "{admin}: {err}");
        if warned {
            assert!(lines[0].contains("WARN"), "{}", lines[0]);
        }
    }
}

/// Issue: `serve` without a public URL names files no crawler reaches; the status page said so,
/// now the log says it at start, and `serve --check-config` too (on loopback, the default;
/// anywhere else, the listen address is not the site's either). A public URL silences it.
#[test]
fn serve_without_a_public_url_warns_at_start_and_in_check_config() {
    use std::io::{BufRead as _, BufReader};
    use std::process::Stdio;
    const NONE: &str = "no [server] public_url: the sitemaps, their index and robots.txt name";
    for (public, warned) in [
        (None, true),
        (Some("https://repo.example/sitemaps/"), false),
    ] {
        let state = tempfile::tempdir().unwrap();
        let mut cmd = bridge();
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--admin-listen", "off"])
            .arg("--state-dir")
            .arg(state.path())
            .env_remove("OAI_BRIDGE_LISTEN")
            .env_remove("OAI_BRIDGE_ADMIN_LISTEN")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(public) = public {
            cmd.args(["--public-url", public]);
        }
        let mut child = cmd.spawn().expect("the oai-bridge binary runs");
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let served = first
            .strip_prefix("oai-bridge serving on ")
            .unwrap_or_else(|| panic!("{first:?}"))
            .trim()
            .to_owned();
        child.kill().unwrap();
        let err = stderr(&child.wait_with_output().unwrap());
        let lines: Vec<&str> = err.lines().filter(|l| l.contains(NONE)).collect();
        assert_eq!(lines.len(), usize::from(warned), "{public:?}: {err}");
        if warned {
            // Said of the address bound, not of port 0.
            assert!(lines[0].contains("WARN"), "{}", lines[0]);
            assert!(
                lines[0].contains(&format!("name {served}, which is a loopback address")),
                "{}",
                lines[0]
            );
        }

        let mut args = vec!["--listen", "127.0.0.1:0", "--admin-listen", "off"];
        args.extend(public.map(|p| ["--public-url", p]).into_iter().flatten());
        let o = check_config(&args, &[]);
        assert_exit(&o, 0);
        assert_eq!(
            stdout(&o).contains(&format!("warning: {NONE} http://127.0.0.1:0/")),
            warned,
            "{public:?}: {}",
            stdout(&o)
        );
    }
}

/// Two repositories whose names differ only in case, and two that harvest the same baseURL,
/// are warned of by `--check-config` (and in the log when `serve` starts), and valid.
#[test]
fn check_config_warns_of_repositories_that_collide() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bridge.toml");
    let sample = crate_root().join(SAMPLE).display().to_string();
    fs::write(
        &config,
        format!(
            "[server]\npublic_url = \"https://repo.example/sitemaps/\"\n\
             [[repository]]\nname = \"sample\"\nbase_url = {sample:?}\n\
             [[repository]]\nname = \"Sample\"\nbase_url = {sample:?}\nsets = [\"x\"]\n\
             [[repository]]\nname = \"again\"\nbase_url = {sample:?}\n"
        ),
    )
    .unwrap();
    let o = check_config(
        &[
            "--config",
            config.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ],
        &[("OAI_BRIDGE_ADMIN_LISTEN", "off")],
    );
    assert_exit(&o, 0);
    let out = stdout(&o);
    let warnings: Vec<&str> = out.lines().filter(|l| l.starts_with("warning: ")).collect();
    assert_eq!(warnings.len(), 2, "{out}");
    assert!(
        warnings[0].contains("\"sample\" and \"Sample\" differ only in case"),
        "{out}"
    );
    assert!(
        warnings[1].contains(&format!(
            "\"sample\" and \"again\" harvest the same file ({sample}, every set)"
        )),
        "{out}"
    );
}

/// `prune` reads `OAI_BRIDGE_CONFIG` and `OAI_BRIDGE_STATE_DIR` (docs/configuration.md's
/// table), and no variable it has no use for: a bad listener or token does not fail it.
#[test]
fn prune_reads_the_config_and_state_dir_variables_only() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bridge.toml");
    fs::write(
        &config,
        "[[repository]]\nname = \"kept\"\nbase_url = \"kept.xml\"\n",
    )
    .unwrap();
    let state = dir.path().join("state-from-env");
    for name in ["kept", "gone"] {
        // A repository's state, as prune recognises it: a folder with a current generation.
        fs::create_dir_all(state.join(name).join("current")).unwrap();
    }
    let o = bridge()
        .args(["prune", "--dry-run"])
        .env("OAI_BRIDGE_CONFIG", &config)
        .env("OAI_BRIDGE_STATE_DIR", &state)
        .env("OAI_BRIDGE_LISTEN", "nowhere")
        .env("OAI_BRIDGE_ADMIN_LISTEN", "nowhere")
        .env("OAI_BRIDGE_ADMIN_TOKEN", "short")
        .env("OAI_BRIDGE_PUBLIC_URL", "not a url")
        .output()
        .expect("the oai-bridge binary runs");
    assert_exit(&o, 0);
    assert_eq!(
        stdout(&o),
        format!("would remove {}\n", state.join("gone").display())
    );
}

/// Issue 30: with `[harvest] memory_budget_bytes` small enough that the harvest writes its
/// inventory and the profiles' records to disk after every record, the export writes the same
/// files, byte for byte, as with the default budget, says how much it spilled, and leaves no
/// spill folder beside the output.
#[test]
fn a_tiny_memory_budget_spills_and_exports_the_same_files() {
    let root = crate_root();
    let text = fs::read_to_string(root.join("bridge.toml")).unwrap();
    let tiny = text.replace("memory_budget_bytes = 201326592", "memory_budget_bytes = 1");
    assert_ne!(tiny, text, "bridge.toml shows the default budget");
    // The sample's path, relative to the file's folder, spelled out.
    let tiny = tiny.replace("\"fixtures/", &format!("\"{}/fixtures/", root.display()));
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tiny.toml");
    fs::write(&config, tiny).unwrap();
    let export = |config: &Path, out: &Path| {
        let output = bridge()
            .args(["export", "--config"])
            .arg(config)
            .args(["--no-progress", "-q", "--json", "--signmap", "--ocx"])
            .args(["--public-url", PUBLIC_URL, "--out"])
            .arg(out)
            .output()
            .expect("the oai-bridge binary runs");
        assert_exit(&output, 0);
        let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        summary["spill_bytes"].as_u64().unwrap_or(0)
    };
    let (default, tiny) = (dir.path().join("default"), dir.path().join("tiny"));
    let default_spill = export(&root.join("bridge.toml"), &default);
    let tiny_spill = export(&config, &tiny);
    fs::remove_file(&config).unwrap();
    assert!(tiny_spill > default_spill, "{tiny_spill} {default_spill}");
    assert_eq!(snapshot(&default), snapshot(&tiny));
    assert_eq!(names(dir.path()), ["default", "tiny"]);
}
