//! The properties the fuzz targets (`fuzz/`) check, here so that the integration tests replay
//! every input the fuzzer ever found (`fuzz/regressions/{target}/`) through the same checks.
//! Each function panics when a property fails, which is what the fuzzer looks for.

use std::path::Path;

use url::Url;

use crate::classify::{self, Identifier};
use crate::oai::parse::{self, Fields};
use crate::scope::Scope;

/// The page readers: never panic; when the fast path accepts a body, the reference reader reads
/// the same page from it. Identify and the small answers never panic either.
pub fn check_list_records(data: &[u8]) {
    let fast = parse::parse_list_records_fast(data, Fields::ALL);
    let reference = parse::parse_list_records_reference(data, Fields::ALL);
    if let Some(page) = fast {
        assert_eq!(
            reference.as_ref(),
            Ok(&page),
            "the fast path read a page the reference reads otherwise"
        );
    }
    // `parse_list_records` is the fast path, else the reference: both ran above.
    let _ = parse::parse_identify(data);
    let _ = parse::parse_sets(data);
    let _ = parse::parse_metadata_formats(data);
}

/// Identifier classification: a published URL parses, lies inside the scope, is at most 2,047
/// characters, and `classify` and `publishable` agree on it.
pub fn check_classify(data: &[u8]) {
    let Ok(value) = std::str::from_utf8(data) else {
        return;
    };
    let base = Url::parse("https://repo.example.org/oai/request").expect("a URL");
    let scope = Scope::from_base_url(&base).expect("a scope");
    let classified = classify::classify(value, &scope);
    match classify::publishable(value, &scope) {
        Ok(url) => {
            let parsed = Url::parse(&url).unwrap_or_else(|e| panic!("{url:?} does not parse: {e}"));
            assert!(scope.contains(&parsed), "{url:?} is outside the scope");
            assert!(url.len() <= 2047, "{} characters", url.len());
            match classified {
                Identifier::LandingPage(u) | Identifier::ContentFile { url: u, .. } => {
                    assert_eq!(u, url, "classify and publishable disagree")
                }
                other => panic!("publishable gave {url:?}, classify {other:?}"),
            }
        }
        Err(reason) => match classified {
            Identifier::LandingPage(u) | Identifier::ContentFile { url: u, .. } => {
                panic!("classify published {u:?}, publishable dropped it ({reason:?})")
            }
            Identifier::PersistentId(pid) => {
                assert!(pid.starts_with("https://"), "{pid:?}");
            }
            Identifier::Dropped(_) => {}
        },
    }
}

/// The configuration loader: never panics, whatever the text.
pub fn check_config(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = crate::config::Config::parse(text, "fuzz.toml", Path::new("."));
    }
}

/// The check of a fuzz target by name.
pub fn check(target: &str) -> Option<fn(&[u8])> {
    match target {
        "list_records" => Some(check_list_records),
        "classify" => Some(check_classify),
        "config" => Some(check_config),
        _ => None,
    }
}
