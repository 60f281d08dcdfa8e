//! The landing-page profiles' collector ([`signposts`], the files crate's) as a harvest feeds
//! it: each record classified against the baseURL's scope ([`crate::classify`]) and counted in
//! the URL inventory ([`crate::inventory`]) that decides the winning versions. Here rather than
//! beside the collector, as the classifier and the inventory are this package's.

use std::collections::BTreeMap;

use oai_bridge_files::dctype::TypeMap;
use oai_bridge_files::disk::profiles::ProfileShard;
use oai_bridge_files::profiles::Profile;
use oai_bridge_files::profiles::ocx::{self, OcxConfig};
use oai_bridge_files::{FilesError, Limits, Shard};
use oai_pmh::{Datestamp, DcElement, Record};
use url::Url;

use super::signposts::*;
use crate::classify::Class;
use crate::scope::Scope;

fn record(id: &str, date: &str, ids: &[&str], dc: &[(DcElement, &str)]) -> Record {
    Record {
        identifier: id.to_owned(),
        datestamp: Datestamp::parse(date),
        deleted: false,
        sets: vec![],
        dc_identifiers: ids.iter().map(|s| s.to_string()).collect(),
        dc: dc.iter().map(|(e, v)| (*e, *v)).collect(),
        empty_metadata: false,
    }
}

/// What a harvest of the repository at `base` makes of `records` for the profiles of `s`:
/// each classified against the baseURL's scope, added to `s` and to the URL inventory that
/// decides the winning versions.
fn collect(s: Signposts, base: &str, records: Vec<Record>) -> Resolved {
    let mut s = s;
    let scope = &Scope::from_base_url(&Url::parse(base).unwrap()).unwrap();
    let mut inventory = crate::inventory::Inventory::new(scope.clone());
    for r in &records {
        let classes: Vec<Class<'_>> = if r.deleted {
            Vec::new()
        } else {
            r.dc_identifiers
                .iter()
                .map(|v| crate::classify::class(v, scope))
                .collect()
        };
        inventory.add_classified(r, &classes, 0).unwrap();
        s.add(r, &classes).unwrap();
    }
    let (_, superseded) = inventory.finish_with_superseded();
    s.finish(&superseded).unwrap()
}

/// The Signmap alone, without a baseURL to link `GetRecord` at.
fn signmap_alone() -> Signposts {
    Signposts::new(TypeMap::default(), None, Limits::default()).with_signmap()
}

/// The shards of the Signmap (or OCX), whether files written during the collection or cut
/// again, and which of the two.
fn shards(r: &Resolved, ocx: bool) -> Vec<(Shard, bool)> {
    let mut out = Vec::new();
    let emit = |s: ProfileShard<'_>| {
        out.push(match s {
            ProfileShard::File(f) => {
                let shard = Shard {
                    bytes: f.read()?,
                    urls: f.urls(),
                    newest: f.newest(),
                };
                (shard, true)
            }
            ProfileShard::Cut(s) => (s.clone(), false),
        });
        Ok::<_, FilesError>(())
    };
    let profile = if ocx { Profile::Ocx } else { Profile::Signmap };
    r.render(profile, emit).unwrap();
    out
}

/// Each `<url>` of the shards, as a parser reads them: its loc and its children below the
/// lastmod (for a Signmap the links as (rel, href), for OCX the OCX elements as (name, text)).
fn entries(r: &Resolved, ocx: bool) -> Vec<(String, Vec<(String, String)>)> {
    let mut out = Vec::new();
    for (shard, _) in shards(r, ocx) {
        let text = String::from_utf8(shard.bytes).unwrap();
        let doc = roxmltree::Document::parse(&text).unwrap();
        for url in doc.root_element().children().filter(|n| n.is_element()) {
            let loc = url.children().find(|n| n.has_tag_name((SITEMAP_NS, "loc")));
            let parts = url
                .descendants()
                .filter(|n| n.tag_name().namespace() != Some(SITEMAP_NS) && n.is_element())
                .filter(|n| !n.has_tag_name((ocx::OCX_NS, "ocx")))
                .map(|n| match n.attribute("rel") {
                    Some(rel) => (rel.to_owned(), n.attribute("href").unwrap().to_owned()),
                    None => (
                        n.tag_name().name().to_owned(),
                        n.text().unwrap_or_default().to_owned(),
                    ),
                })
                .collect();
            out.push((loc.unwrap().text().unwrap().to_owned(), parts));
        }
    }
    out
}

const SITEMAP_NS: &str = "http://www.sitemaps.org/schemas/sitemap/0.9";

fn pairs(parts: &[(String, String)]) -> Vec<(&str, &str)> {
    parts
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect()
}

/// G-06, Q-23: of a record's several identifiers (a PDF, a DOI, the landing page, a URL
/// outside the scope) the landing page is the Signmap's loc, the file an `item` link, the DOI
/// `cite-as`; Q-24: an http(s) dc:rights is the `license`.
#[test]
fn a_record_becomes_a_landing_page_with_its_links() {
    let base = Url::parse("https://h/oai/request").unwrap();
    let s = Signposts::new(TypeMap::default(), Some(&base), Limits::default()).with_signmap();
    let records = vec![
        record(
            "oai:h:1",
            "2024-05-01",
            &[
                "https://h/oai/files/1.pdf",
                "doi:10.1234/ABC",
                "https://h/oai/record/1",
                "https://elsewhere/x",
            ],
            &[
                (DcElement::Rights, "All rights reserved"),
                (
                    DcElement::Rights,
                    "https://creativecommons.org/licenses/by/4.0/",
                ),
                (DcElement::Type, "info:eu-repo/semantics/doctoralThesis"),
            ],
        ),
        // Only a PDF: no landing page, not published.
        record("oai:h:2", "2024-05-01", &["https://h/oai/files/2.pdf"], &[]),
    ];
    let r = collect(s, base.as_str(), records);
    assert_eq!(r.stats.no_landing_page, 1);
    assert_eq!(r.stats.published, 1);
    let e = entries(&r, false);
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].0, "https://h/oai/record/1");
    assert_eq!(
        pairs(&e[0].1),
        [
            (
                "describedby",
                "https://h/oai/request?verb=GetRecord&identifier=oai%3Ah%3A1&metadataPrefix=oai_dc"
            ),
            ("item", "https://h/oai/files/1.pdf"),
            ("cite-as", "https://doi.org/10.1234/ABC"),
            ("license", "https://creativecommons.org/licenses/by/4.0/"),
            ("type", "https://schema.org/Thesis"),
        ]
    );
}

/// OCX: the type from the table or the default; without either the record is counted as
/// `ocx_no_type` (it stays in the Signmap); the teaser is cut; an image file is the image.
#[test]
fn ocx_fields_and_types() {
    let config = OcxConfig {
        types: TypeMap::with(&[("Lesplan".into(), "http://oerschema.org/Lesson".into())]).unwrap(),
        teaser_chars: 20,
        ..OcxConfig::default()
    };
    // A type the OCX table does not know.
    let thesis = || {
        record(
            "b",
            "2024-01-01",
            &["https://h/b"],
            &[(DcElement::Type, "Proefschrift")],
        )
    };
    let s = Signposts::new(TypeMap::default(), None, Limits::default()).with_ocx(config.clone());
    let records = vec![
        record(
            "a",
            "2024-01-01",
            &["https://h/a", "https://h/a/cover.jpg"],
            &[
                (DcElement::Type, "Lesplan"),
                (DcElement::Title, "Getijden"),
                (
                    DcElement::Description,
                    "Een les over eb en vloed aan de kust",
                ),
            ],
        ),
        thesis(),
    ];
    let r = collect(s, "https://h/oai", records);
    assert_eq!(
        (
            r.stats.published,
            r.stats.ocx_published,
            r.stats.ocx_no_type
        ),
        (2, 1, 1)
    );
    let e = entries(&r, true);
    assert_eq!(e.len(), 1);
    assert_eq!(
        pairs(&e[0].1),
        [
            ("type", "http://oerschema.org/Lesson"),
            ("name", "Getijden"),
            ("teaser", "Een les over eb en…"),
            ("image", "https://h/a/cover.jpg"),
        ]
    );

    // With a default type, the second record is published too.
    let s = Signposts::new(TypeMap::default(), None, Limits::default()).with_ocx(OcxConfig {
        default_type: Some("https://schema.org/CreativeWork".into()),
        ..config
    });
    let records = vec![thesis()];
    let r = collect(s, "https://h/oai", records);
    assert_eq!(
        pairs(&entries(&r, true)[0].1),
        [("type", "https://schema.org/CreativeWork")]
    );
}

#[test]
fn the_newest_version_wins_and_deleted_records_publish_nothing() {
    let s = signmap_alone();
    let mut records = Vec::new();
    records.push(record("a", "2024-01-01", &["https://h/old"], &[]));
    records.push(record("a", "2024-02-01", &["https://h/new"], &[]));
    let mut gone = record("b", "2024-03-01", &[], &[]);
    gone.deleted = true;
    records.push(record("b", "2024-01-01", &["https://h/b"], &[]));
    records.push(gone);
    // Two records with one landing page: listed once, from the newer record.
    records.push(record("c", "2024-01-02", &["https://h/shared"], &[]));
    records.push(record("d", "2024-01-01", &["https://h/shared"], &[]));
    // An older occurrence after a newer one loses too.
    records.push(record("a", "2023-01-01", &["https://h/older"], &[]));
    let r = collect(s, "https://h/oai", records);
    let e = entries(&r, false);
    let locs: Vec<&str> = e.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(locs, ["https://h/new", "https://h/shared"]);
    assert_eq!(r.stats.duplicate, 1);
    assert!(
        e.iter().all(|e| e.1.is_empty()),
        "no describedby without a base"
    );
    let shards = shards(&r, false);
    assert!(
        shards.iter().all(|(_, whole)| !whole),
        "entries lost: the file is cut again"
    );
    let lastmods: Vec<Option<Datestamp>> = r.lastmods(Profile::Signmap).unwrap();
    assert_eq!(
        lastmods,
        [
            Datestamp::parse("2024-02-01"),
            Datestamp::parse("2024-01-02")
        ]
    );
}

/// A file that lost a few entries keeps its place and its bytes, the lost ones blanked out
/// (still one well-formed urlset, within the limits); one that lost many is cut again.
#[test]
fn a_few_lost_entries_are_blanked_out_and_many_cut_again() {
    let limits = Limits {
        max_urls: 40,
        max_bytes: 1 << 20,
    };
    let s = Signposts::new(TypeMap::default(), None, limits).with_signmap();
    let mut records: Vec<Record> = (0..80)
        .map(|n| {
            record(
                &format!("r{n}"),
                "2024-01-01",
                &[&format!("https://h/oai/r/{n}")],
                &[],
            )
        })
        .collect();
    // The first file (records 0..40) loses one entry: record 3, listed again later.
    records.push(record("r3", "2024-02-01", &["https://h/oai/r/3b"], &[]));
    // The second (40..80) loses 30 entries: records deleted later.
    for n in 50..80 {
        let mut gone = record(&format!("r{n}"), "2024-02-01", &[], &[]);
        gone.deleted = true;
        records.push(gone);
    }
    let r = collect(s, "https://h/oai", records);
    let shards = shards(&r, false);
    let whole: Vec<bool> = shards.iter().map(|(_, whole)| *whole).collect();
    assert_eq!(
        whole,
        [true, false, true],
        "blanked, cut again, the new version's file"
    );
    let (first, _) = &shards[0];
    let text = std::str::from_utf8(&first.bytes).unwrap();
    let locs: Vec<(String, String)> = locs_and_lastmods(&first.bytes);
    assert_eq!((first.urls, locs.len()), (39, 39));
    assert!(!locs.iter().any(|(loc, _)| loc == "https://h/oai/r/3"));
    let blank = text
        .lines()
        .find(|l| l.trim().is_empty() && !l.is_empty())
        .unwrap();
    assert!(blank.len() > 40, "the lost entry's bytes, blank: {blank:?}");
    assert_eq!(shards[1].0.urls, 10);
    assert_eq!(
        locs_and_lastmods(&shards[2].0.bytes),
        [("https://h/oai/r/3b".to_owned(), "2024-02-01".to_owned())]
    );
    assert_eq!(shards[2].0.newest, Datestamp::parse("2024-02-01"));
}

/// SP-14: the links count toward a shard's byte limit; every entry lands in one shard.
#[test]
fn shards_split_on_bytes_counting_links() {
    let limits = Limits {
        max_urls: 50_000,
        max_bytes: 64 * 1024,
    };
    let s = Signposts::new(TypeMap::default(), None, limits).with_signmap();
    let mut records = Vec::new();
    let files: Vec<String> = (0..40)
        .map(|i| format!("https://h/oai/files/{i:04}.pdf"))
        .collect();
    for n in 0..100 {
        let mut ids = vec![format!("https://h/oai/r/{n}")];
        ids.extend(files.iter().cloned());
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        records.push(record(&format!("r{n}"), "2024-01-01", &ids, &[]));
    }
    let r = collect(s, "https://h/oai", records);
    let shards = shards(&r, false);
    assert!(shards.len() > 1);
    assert!(
        shards
            .iter()
            .all(|(s, _)| s.bytes.len() <= limits.max_bytes)
    );
    assert_eq!(shards.iter().map(|(s, _)| s.urls).sum::<usize>(), 100);
    for (shard, whole) in &shards {
        assert!(whole, "no entry lost: every file is published as written");
        roxmltree::Document::parse(std::str::from_utf8(&shard.bytes).unwrap()).unwrap();
    }
}

/// CDIF: the documents come back with their stable names, and the other profiles link them.
#[test]
fn cdif_documents_are_named_by_identifier_and_linked() {
    let base = Url::parse("https://h/oai/request").unwrap();
    let public = Url::parse("https://g/repo/").unwrap();
    let s = Signposts::new(TypeMap::default(), Some(&base), Limits::default())
        .with_signmap()
        .with_ocx(OcxConfig {
            default_type: Some("https://schema.org/CreativeWork".into()),
            ..OcxConfig::default()
        })
        .with_cdif(Some(public.clone()))
        .unwrap();
    let mut records = Vec::new();
    for id in ["oai:h:1", "oai:h:2"] {
        let landing = format!("https://h/oai/{id}");
        records.push(record(
            id,
            "2024-01-01",
            &[&landing],
            &[(DcElement::Title, "T")],
        ));
    }
    let r = collect(s, base.as_str(), records);
    let mut docs = Vec::new();
    let mut urls = Vec::new();
    r.for_each_cdif_document(|d| {
        docs.push((d.name.to_owned(), d.lastmod, d.bytes.to_vec()));
        urls.push(d.url.map(str::to_owned));
        Ok::<(), FilesError>(())
    })
    .unwrap();
    assert_eq!(docs.len(), 2);
    for ((name, lastmod, bytes), id) in docs.iter().zip(["oai:h:1", "oai:h:2"]) {
        assert_eq!(name, &cdif_name(id));
        let joined = public.join(name).unwrap().to_string();
        assert!(urls.contains(&Some(joined)), "{urls:?}");
        assert_eq!(*lastmod, Datestamp::parse("2024-01-01"));
        let doc: serde_json::Value = serde_json::from_slice(bytes).unwrap();
        assert_eq!(doc["url"], format!("https://h/oai/{id}"));
    }
    let signmap = entries(&r, false);
    assert_eq!(
        signmap[0].1[0],
        (
            "describedby".to_owned(),
            public.join(&cdif_name("oai:h:1")).unwrap().to_string()
        )
    );
    let ocx = entries(&r, true);
    assert!(ocx[1].1.contains(&(
        "loc".to_owned(),
        public.join(&cdif_name("oai:h:2")).unwrap().to_string()
    )));
    assert!(
        ocx[1]
            .1
            .contains(&("format".to_owned(), "JSON-LD".to_owned()))
    );
}

/// A record occurrence of the model: identifier, datestamp, deleted, landing page (index
/// into a few), with an OCX type.
type Occurrence = (u8, Option<u8>, bool, Option<u8>, bool);

/// An occurrence among `ids` identifiers and `landings` landing pages, deleted with the
/// chance `deleted`.
fn occurrence(
    ids: u8,
    landings: u8,
    deleted: f64,
) -> impl proptest::strategy::Strategy<Value = Occurrence> {
    use proptest::prelude::*;
    (
        0..ids,
        proptest::option::of(0u8..3),
        proptest::bool::weighted(deleted),
        proptest::option::weighted(0.85, 0..landings),
        any::<bool>(),
    )
}

/// The reference: newest version of each identifier (a tie: the later occurrence), deleted
/// and landing-less records out, the newest record of each landing page (a tie: the later),
/// in harvest order. (index, landing, datestamp, typed) of each published record.
fn model(occurrences: &[Occurrence]) -> Vec<(usize, u8, Option<u8>, bool)> {
    let newest =
        |a: &(usize, &Occurrence), b: &(usize, &Occurrence)| (a.1.1, a.0).cmp(&(b.1.1, b.0));
    let mut by_id: BTreeMap<u8, (usize, &Occurrence)> = BTreeMap::new();
    for (i, o) in occurrences.iter().enumerate() {
        let slot = by_id.entry(o.0).or_insert((i, o));
        if newest(&(i, o), slot).is_ge() {
            *slot = (i, o);
        }
    }
    let mut by_landing: BTreeMap<u8, (usize, &Occurrence)> = BTreeMap::new();
    for (i, o) in by_id.into_values() {
        let (false, Some(landing)) = (o.2, o.3) else {
            continue;
        };
        let slot = by_landing.entry(landing).or_insert((i, o));
        if newest(&(i, o), slot).is_ge() {
            *slot = (i, o);
        }
    }
    let mut published: Vec<_> = by_landing
        .into_iter()
        .map(|(landing, (i, o))| (i, landing, o.1, o.4))
        .collect();
    published.sort();
    published
}

fn date(d: Option<u8>) -> String {
    d.map_or(String::new(), |d| format!("2024-01-0{}", d + 1))
}

proptest::proptest! {
    /// The Signmap, OCX and CDIF files hold what the reference model publishes, in harvest
    /// order, with the winning versions' lastmods, across small shards and twice over: many
    /// entries lose, and the files are cut again.
    #[test]
    fn the_profiles_publish_what_the_reference_model_does(
        occurrences in proptest::collection::vec(occurrence(5, 4, 0.15), 0..30),
    ) {
        check_profiles(&occurrences, 3)?;
    }

    /// The same with larger files, of which few entries lose: those are blanked out.
    #[test]
    fn the_profiles_publish_what_the_reference_model_does_when_few_lose(
        occurrences in proptest::collection::vec(occurrence(250, 250, 0.01), 0..200),
        max_urls in 20usize..60,
    ) {
        check_profiles(&occurrences, max_urls)?;
    }

    /// Issue 30: the same when the versions outgrow a tiny memory budget (a run on disk
    /// every few records, merged at the end) and the occurrences are read back from disk.
    #[test]
    fn the_profiles_publish_what_the_reference_model_does_when_spilling(
        occurrences in proptest::collection::vec(occurrence(40, 30, 0.1), 0..200),
        max_urls in 3usize..60,
        budget in 1u64..1024,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let budget = oai_bridge_files::disk::spill::Budget::new(dir.path().to_owned(), budget);
        check_profiles_within(&occurrences, max_urls, &budget)?;
        // Its files are gone with the profiles' records.
        proptest::prop_assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}

/// What [`the_profiles_publish_what_the_reference_model_does`] checks, with shards of at most
/// `max_urls` entries.
fn check_profiles(
    occurrences: &[Occurrence],
    max_urls: usize,
) -> Result<(), proptest::test_runner::TestCaseError> {
    check_profiles_within(
        occurrences,
        max_urls,
        &oai_bridge_files::disk::spill::Budget::default(),
    )
}

/// [`check_profiles`], the records kept within `budget`.
fn check_profiles_within(
    occurrences: &[Occurrence],
    max_urls: usize,
    budget: &oai_bridge_files::disk::spill::Budget,
) -> Result<(), proptest::test_runner::TestCaseError> {
    let base = Url::parse("https://h/oai/request").unwrap();
    let config = OcxConfig {
        types: TypeMap::with(&[("Les".into(), "http://oerschema.org/Lesson".into())]).unwrap(),
        ..OcxConfig::default()
    };
    let limits = Limits {
        max_urls,
        max_bytes: 1 << 20,
    };
    let s = Signposts::new(TypeMap::default(), Some(&base), limits)
        .within(budget)
        .with_signmap()
        .with_ocx(config)
        .with_cdif(Some(Url::parse("https://g/").unwrap()))
        .unwrap();
    let mut records = Vec::new();
    for (i, &(id, day, deleted, landing, typed)) in occurrences.iter().enumerate() {
        let landing = landing.map(|l| format!("https://h/oai/page/{l}"));
        let file = format!("https://h/oai/files/{i}.pdf");
        let mut ids = vec![file.as_str()];
        ids.extend(landing.as_deref());
        let kind = if typed { "Les" } else { "Proefschrift" };
        let mut r = record(
            &format!("oai:h:{id}"),
            &date(day),
            &ids,
            &[(DcElement::Type, kind), (DcElement::Title, "T")],
        );
        r.deleted = deleted;
        records.push(r);
    }
    let r = collect(s, base.as_str(), records);
    let expected = model(occurrences);
    for _ in 0..2 {
        let signmap = shards(&r, false);
        let ocx = shards(&r, true);
        for shards in [&signmap, &ocx] {
            // Winners of files cut again fill shards together: one is emitted short only
            // before a file published whole, or last.
            for pair in shards.windows(2) {
                let ((first, false), (_, false)) = (&pair[0], &pair[1]) else {
                    continue;
                };
                proptest::prop_assert_eq!(first.urls, max_urls);
            }
        }
        for (shard, _) in signmap.iter().chain(&ocx) {
            // Within the limits, counted right, with the newest lastmod for the index.
            let entries = locs_and_lastmods(&shard.bytes);
            proptest::prop_assert!((1..=max_urls).contains(&entries.len()));
            proptest::prop_assert_eq!(shard.urls, entries.len());
            let newest = entries
                .iter()
                .map(|(_, d)| Datestamp::parse(d))
                .max()
                .flatten();
            proptest::prop_assert_eq!(shard.newest, newest);
        }
        let listed = |shards: &[(Shard, bool)]| -> Vec<(String, String)> {
            (shards.iter())
                .flat_map(|(s, _)| locs_and_lastmods(&s.bytes))
                .collect()
        };
        let got = listed(&signmap);
        let want: Vec<(String, String)> = expected
            .iter()
            .map(|&(_, l, d, _)| (format!("https://h/oai/page/{l}"), date(d)))
            .collect();
        proptest::prop_assert_eq!(&got, &want);
        let got_ocx = listed(&ocx);
        let want_ocx: Vec<(String, String)> = expected
            .iter()
            .zip(&want)
            .filter(|(e, _)| e.3)
            .map(|(_, w)| w.clone())
            .collect();
        proptest::prop_assert_eq!(&got_ocx, &want_ocx);
        let mut names = Vec::new();
        r.for_each_cdif_document(|d| {
            names.push(d.name.to_owned());
            Ok::<(), FilesError>(())
        })
        .unwrap();
        let want_names: Vec<String> = expected
            .iter()
            .map(|&(i, ..)| cdif_name(&format!("oai:h:{}", occurrences[i].0)))
            .collect();
        proptest::prop_assert_eq!(names, want_names);
    }
    proptest::prop_assert_eq!(r.stats.published as usize, expected.len());
    Ok(())
}

/// The (loc, lastmod) of each `<url>` of one shard.
fn locs_and_lastmods(bytes: &[u8]) -> Vec<(String, String)> {
    let text = std::str::from_utf8(bytes).unwrap();
    let doc = roxmltree::Document::parse(text).unwrap();
    doc.root_element()
        .children()
        .filter(|n| n.is_element())
        .map(|url| {
            let child = |name: &str| {
                url.children()
                    .find(|n| n.has_tag_name((SITEMAP_NS, name)))
                    .and_then(|n| n.text())
                    .unwrap_or_default()
                    .to_owned()
            };
            (child("loc"), child("lastmod"))
        })
        .collect()
}

/// SP-07, SP-11: every media type and profile the Signmap's links carry is one `rs:ln`
/// takes as it is ([`signmap::link_end`] writes them unchecked and unescaped).
#[test]
fn the_bridges_media_types_are_written_as_they_are() {
    use crate::profiles::signmap::{self, JSON_LD, XML};
    let types = || crate::classify::media_types().chain([XML, JSON_LD]);
    for t in types() {
        assert_eq!(signmap::rs_ln_type(t), Some(t), "{t} is not an rs:ln type");
    }
    for value in types().chain([
        crate::profiles::signmap::OAI_DC_PROFILE,
        crate::profiles::cdif::PROFILE,
    ]) {
        let escaped = oai_bridge_files::sitemap::escape(value);
        assert_eq!(escaped, value, "{value} needs escaping");
    }
}
