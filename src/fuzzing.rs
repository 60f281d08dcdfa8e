//! The properties the fuzz targets (`fuzz/`) check, here so that the integration tests replay
//! every input the fuzzer ever found (`fuzz/regressions/{target}/`) through the same checks.
//! Each function panics when a property fails, which is what the fuzzer looks for.

use std::path::Path;

use url::Url;

use crate::classify::{self, Identifier};
use crate::scope::Scope;

/// The page readers: never panic; when the fast path accepts a body, the reference reader reads
/// the same page from it. Identify and the small answers never panic either. The check is the
/// OAI-PMH crate's own, as the two readers are private to it.
pub fn check_list_records(data: &[u8]) {
    oai_pmh::fuzzing::check_list_records(data);
}

/// Identifier classification: a published URL parses, lies inside the scope, is at most 2,047
/// characters, and `classify` and `publishable` agree on it; and the landing rules' properties
/// ([`check_landing_rules`]).
pub fn check_classify(data: &[u8]) {
    let Ok(value) = std::str::from_utf8(data) else {
        return;
    };
    let base = Url::parse("https://repo.example.org/oai/request").expect("a URL");
    let scope = Scope::from_base_url(&base).expect("a scope");
    check_landing_rules(value);
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

/// The landing rules: whatever a record's identifier, relation or OAI identifier holds (the
/// value, each in turn), every platform's rule and a template give URLs that parse, lie inside
/// the rule's scope and are at most 2,047 characters, and the rule derives one landing page
/// per record at most.
pub fn check_landing_rules(value: &str) {
    use crate::platform::{Detected, Landing, LandingSettings, Platform, Setting, Template};
    use oai_pmh::{DcElement, Record};
    let base = Url::parse("https://repo.example.org/oai/request").expect("a URL");
    let mut record = Record {
        identifier: format!("oai:repo.example.org:{value}"),
        dc_identifiers: vec![value.to_owned(), format!("hdl:{value}")],
        ..Record::default()
    };
    record.dc.push(DcElement::Relation, value);
    record.dc.push(
        DcElement::Relation,
        &format!("https://repo.example.org/{value}/"),
    );
    let template = Template::parse("https://repo.example.org/records/{oai_local}?doi={doi}")
        .expect("a template");
    let rules = Platform::builtin_names()
        .skip(1)
        .map(|p| (Setting::Fixed(p.to_owned()), None, Platform::named(p)))
        .chain([(Setting::Auto, Some(template), Platform::generic())]);
    let mut classes = crate::platform::Classes::new();
    for (platform, template, detected) in rules {
        let settings = LandingSettings {
            platform,
            ui_url: None,
            template,
            ..LandingSettings::default()
        };
        // The record is its own sample: a DSpace UI under a path is found from it too.
        let mut detected = Detected::configured(detected);
        let sample = std::slice::from_ref(&record);
        let rule = Landing::new(&settings, Some(&base), None, &mut detected, sample)
            .expect("a rule")
            .expect("not Google's rule");
        rule.classes(&record, &mut classes);
        let mut landings = 0;
        for class in &classes {
            let url = match class {
                classify::Class::LandingPage(url) => {
                    landings += 1;
                    url
                }
                classify::Class::ContentFile { url, .. } => url,
                _ => continue,
            };
            let parsed = Url::parse(url).unwrap_or_else(|e| panic!("{url:?} does not parse: {e}"));
            assert!(
                rule.scope().contains(&parsed),
                "{url:?} is outside {}",
                rule.scope()
            );
            assert!(url.len() <= 2047, "{} characters", url.len());
        }
        // The rule derives one landing page at most (first, the record's); the others are
        // dc:identifier URLs inside the scope, published as Google's rule would.
        let own = record
            .dc_identifiers
            .iter()
            .filter(|v| {
                matches!(
                    classify::class(v, rule.scope()),
                    classify::Class::LandingPage(_)
                )
            })
            .count();
        assert!(
            landings <= own + 1,
            "{landings} landing pages from {rule}, {own} of them dc:identifiers"
        );
    }
}

/// The keys a row's error may name ([`crate::platform::RowSpec`]'s, as
/// [`crate::platform::Row::new`] checks them).
const ROW_KEYS: [&str; 10] = [
    "name",
    "endpoint",
    "site",
    "identify",
    "sample_identifier",
    "oai_identifier",
    "landing.from",
    "landing.page",
    "landing.match",
    "content_files",
];

/// Where the row text ends and the record values begin in a `platform_rows` input.
pub const ROW_VALUES: &str = "\n---\n";

/// The row interpreter (issue 29): the input is a `[[platform]]` table's keys in TOML, then
/// [`ROW_VALUES`] and a record's values, one a line. Whatever the text, reading it as a row
/// (`Row::new`, `Registry::with`, and a bridge.toml holding it) never panics, and a row refused
/// names its key. A row accepted gives, under its own rule and under what `auto` detects with
/// it, for records made of the values (the first line as the OAI identifier, every line as a
/// `dc:identifier` and a `dc:relation`), URLs that parse, lie inside the rule's scope and are
/// at most 2,047 characters; landing pages that are never a resolver's URL; one derived
/// landing page at most per record.
pub fn check_platform_rows(data: &[u8]) {
    use crate::platform::{
        Detected, Landing, LandingSettings, Registry, Row, RowSpec, Setting, detect_over,
    };
    use oai_pmh::{DcElement, Identify, Record};
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (row_text, values) = text.split_once(ROW_VALUES).unwrap_or((text, ""));
    // As bridge.toml holds it: never a panic, whatever the table says.
    let _ = crate::config::Config::parse(
        &format!("[[platform]]\n{row_text}"),
        "fuzz.toml",
        Path::new("."),
    );
    let Ok(spec) = toml::from_str::<RowSpec>(row_text) else {
        return;
    };
    let row = match Row::new(spec.clone(), false) {
        Ok(row) => row,
        Err(e) => {
            let key = e.key_path();
            assert!(
                ROW_KEYS
                    .iter()
                    .any(|k| key == format!("[[platform]] {:?} {k}", spec.name)),
                "{e} names no key ({key})"
            );
            assert!(e.to_string().starts_with(&key), "{e}");
            return;
        }
    };
    let name = row.name().to_owned();
    let twice = Row::new(spec.clone(), false).expect("a row read once reads again");
    let e = Registry::with(vec![twice, Row::new(spec, false).expect("and again")])
        .expect_err("two rows of one name");
    assert_eq!(e.key_path(), format!("[[platform]] {name:?} name"), "{e}");
    let registry = Registry::with(vec![row]).expect("one row");

    let lines: Vec<&str> = values.lines().take(16).collect();
    let mut record = Record {
        identifier: lines
            .first()
            .map_or("oai:repo.example.org:1", |l| l)
            .to_owned(),
        dc_identifiers: lines.iter().map(|l| (*l).to_owned()).collect(),
        ..Record::default()
    };
    for line in &lines {
        record.dc.push(DcElement::Relation, line);
    }
    let sample = std::slice::from_ref(&record);
    // At the row's endpoint under a path (its site then the path), else at a plain one.
    let mine = registry.get(&name).expect("the row is there");
    let endpoint = mine.spec.endpoint.first().map_or("/oai", String::as_str);
    let base = Url::parse(&format!("https://repo.example.org/site{endpoint}"))
        .or_else(|_| Url::parse("https://repo.example.org/oai"))
        .expect("a URL");
    let fixed = LandingSettings {
        platform: Setting::Fixed(name.clone()),
        platforms: registry.clone(),
        ..LandingSettings::default()
    };
    let auto = LandingSettings {
        platform: Setting::Auto,
        platforms: registry.clone(),
        ..LandingSettings::default()
    };
    let detected = detect_over(Some(&base), &Identify::default(), sample, None, &registry);
    let fixed_detected = Detected::configured(fixed.fixed().expect("the row's platform"));
    let mut classes = crate::platform::Classes::new();
    for (settings, mut detected) in [(fixed, fixed_detected), (auto, detected)] {
        let rule = match Landing::new(&settings, Some(&base), None, &mut detected, sample) {
            Ok(Some(rule)) => rule,
            // Google's rule: what check_classify holds.
            Ok(None) => continue,
            Err(e) => panic!("{name}: no rule at {base}: {e}"),
        };
        rule.classes(&record, &mut classes);
        let mut landings = 0;
        for class in &classes {
            let url = match class {
                classify::Class::LandingPage(url) => {
                    landings += 1;
                    assert!(
                        classify::pid_of(url).is_none(),
                        "{name}: the resolver's {url:?} as a landing page"
                    );
                    url
                }
                classify::Class::ContentFile { url, .. } => url,
                _ => continue,
            };
            let parsed = Url::parse(url).unwrap_or_else(|e| panic!("{url:?} does not parse: {e}"));
            assert!(
                rule.scope().contains(&parsed),
                "{name}: {url:?} is outside {}",
                rule.scope()
            );
            assert!(url.len() <= 2047, "{} characters", url.len());
        }
        let own = record
            .dc_identifiers
            .iter()
            .filter(|v| {
                matches!(
                    classify::class(v, rule.scope()),
                    classify::Class::LandingPage(_)
                )
            })
            .count();
        assert!(
            landings <= own + 1,
            "{name}: {landings} landing pages from {rule}, {own} of them dc:identifiers"
        );
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
        "platform_rows" => Some(check_platform_rows),
        _ => None,
    }
}
