//! Replays every input the fuzzers found (`fuzz/regressions/{target}/`) and seeds from the fixtures
//! through the same property checks the fuzz targets run (`oai_bridge::fuzzing`), so a crash once
//! found stays fixed under plain `cargo test`, without a nightly toolchain.

use std::path::Path;

use oai_bridge::fuzzing;

/// The fuzz targets, by the names `fuzz/Cargo.toml` gives them.
const TARGETS: [&str; 3] = ["list_records", "classify", "config"];

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
}
