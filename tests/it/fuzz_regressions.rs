//! Replays every input the fuzzers found (`fuzz/regressions/{target}/`) and seeds from the fixtures
//! through the same property checks the fuzz targets run (`oai_bridge::fuzzing`), so a crash once
//! found stays fixed under plain `cargo test`, without a nightly toolchain.

use std::path::Path;

use oai_bridge::fuzzing;

/// The fuzz targets, by the names `fuzz/Cargo.toml` gives them.
const TARGETS: [&str; 4] = ["list_records", "classify", "config", "platform_rows"];

/// Every file of `fuzz/regressions/{target}/` but the `.keep` placeholder.
fn regressions(target: &str) -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/regressions")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.file_name().is_some_and(|n| n != ".keep"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_fuzz_target_has_a_check_and_a_regressions_folder() {
    for target in TARGETS {
        assert!(fuzzing::check(target).is_some(), "no check for {target}");
        let source = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz/fuzz_targets")
            .join(format!("{target}.rs"));
        let text = std::fs::read_to_string(&source).unwrap();
        assert!(
            text.contains(&format!("fuzzing::check_{target}")),
            "{} does not call fuzzing::check_{target}",
            source.display()
        );
        regressions(target);
    }
    assert!(fuzzing::check("no_such_target").is_none());
}

#[test]
fn every_input_the_fuzzers_found_passes_its_check() {
    for target in TARGETS {
        let check = fuzzing::check(target).unwrap();
        for file in regressions(target) {
            let data = std::fs::read(&file).unwrap();
            if let Err(panic) = std::panic::catch_unwind(|| check(&data)) {
                let why = panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("a panic");
                panic!("{target}: {} fails again: {why}", file.display());
            }
        }
    }
}

#[test]
fn the_fuzzers_seeds_pass_their_checks() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for page in ["page-1.xml", "page-2.xml"] {
        let body = std::fs::read(root.join("fuzz/seeds/list_records").join(page)).unwrap();
        let parsed = oai_bridge::parse_list_records(&body)
            .unwrap_or_else(|e| panic!("the seed {page} is no ListRecords page: {e}"));
        assert_eq!(parsed.records.len(), 4, "{page}");
        fuzzing::check_list_records(&body);
    }
    let sample = std::fs::read(root.join("fixtures/sample-repository.xml")).unwrap();
    fuzzing::check_list_records(&sample);
    fuzzing::check_config(&std::fs::read(root.join("bridge.toml")).unwrap());
    let text = String::from_utf8(sample).unwrap();
    let mut seen = 0;
    for piece in text.split("<dc:identifier>").skip(1) {
        let value = piece.split('<').next().unwrap();
        fuzzing::check_classify(value.as_bytes());
        seen += 1;
    }
    assert!(seen > 100, "only {seen} identifiers in the sample");
    // Each built-in platform row, as fuzz/run.sh seeds the platform_rows target with it.
    let table = std::fs::read_to_string(root.join("src/platform/platforms.toml")).unwrap();
    let values = [
        "oai:repo.example.org:123456789/7",
        "http://hdl.handle.net/123456789/7",
        "https://repo.example.org/site/id/eprint/7/",
        "https://repo.example.org/articles/x/7",
        "https://doi.org/10.5555/x.7",
    ]
    .join("\n");
    let mut rows = 0;
    for row in table.split("[[platform]]\n").skip(1) {
        let input = format!("{row}{}{values}\n", fuzzing::ROW_VALUES);
        fuzzing::check_platform_rows(input.as_bytes());
        rows += 1;
    }
    assert!(rows >= 10, "only {rows} rows in the table");
}

/// The `platform_rows` check itself: a row refused names its key, and one of the keys a row
/// has; a row's rule holds its landing pages inside its scope.
#[test]
fn the_platform_rows_check_holds_what_it_says() {
    let row = "name = \"x\"\ntitle = \"X\"\nevidence = \"e\"\n";
    for bad in [
        "landing = { from = \"nowhere\" }",
        "oai_identifier = '(?<id>'\nlanding = { from = \"handle\" }",
        "site = \"domain\"\nlanding = { from = \"template\", page = \"{site}{oai_local}\" }",
    ] {
        fuzzing::check_platform_rows(format!("{row}{bad}\n").as_bytes());
    }
    let input = format!(
        "{row}site = \"domain\"\nlanding = {{ from = \"dc:relation\", match = [\"{{site}}*\"] }}{}oai:h:1\nhttps://www.example.org/a\nhttps://doi.org/10.1/x\nhttps://other.example.net/b\n",
        fuzzing::ROW_VALUES
    );
    fuzzing::check_platform_rows(input.as_bytes());
}
