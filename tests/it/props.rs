//! Property tests of the pure core: shard splitting (no URL lost or duplicated, every shard within
//! both limits and well-formed), escaping (round-trips through a real XML parser) and the URL
//! inventory (equal to a plain reference model of "newest version wins, each URL once").
//!
//! Case counts are kept moderate so the module runs in a few seconds in a debug build. Failures
//! are not persisted to `proptest-regressions/`: proptest prints the shrunk input, and a case
//! worth keeping belongs in an example test below.

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;

use oai_bridge::Datestamp;
use oai_bridge::Drop;
use oai_bridge::Record;
use oai_bridge::Scope;
use oai_bridge::{Inventory, Published};
use oai_bridge::{Limits, MAX_BYTES, MIN_BYTES, Shard, escape, render_shards};
use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;
use url::Url;

const XML_DECL: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
const SITEMAP_NS: &str = "http://www.sitemaps.org/schemas/sitemap/0.9";

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Shards

/// One piece of a URL: plain text, one of the five characters XML escaping is about (SM-03), or a
/// non-ASCII character percent-encoded as UTF-8 (SM-04), the form classify hands to render.
fn url_piece() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-zA-Z0-9/._~=?-]{1,8}",
        2 => prop::sample::select(vec!["&", "'", "\"", "<", ">"]).prop_map(str::to_owned),
        1 => any::<char>()
            .prop_filter("non-ASCII", |c| !c.is_ascii())
            .prop_map(|c| {
                let mut buf = [0; 4];
                c.encode_utf8(&mut buf)
                    .bytes()
                    .map(|b| format!("%{b:02X}"))
                    .collect::<String>()
            }),
    ]
}

/// A URL of `len` characters (all pieces are ASCII, so any byte offset is a boundary).
fn url_of(len: impl Strategy<Value = usize>) -> impl Strategy<Value = String> {
    (prop::collection::vec(url_piece(), 1..12), len).prop_map(|(pieces, len)| {
        let mut url = String::from("https://h.example/");
        while url.len() < len {
            for p in &pieces {
                url.push_str(p);
            }
        }
        url.truncate(len);
        url
    })
}

/// A URL of 20 to 2,047 characters (SM-05): short ones, and long ones often enough that shards
/// split on bytes as well as on URLs.
fn url() -> impl Strategy<Value = String> {
    url_of(prop_oneof![3 => 20usize..200, 1 => 200usize..1900, 1 => 1900usize..=2047])
}

fn datestamp() -> impl Strategy<Value = Option<Datestamp>> {
    prop_oneof![
        1 => Just(None),
        2 => (0i64..4_000_000_000).prop_map(|s| Some(Datestamp::from_unix(s))),
        2 => (0i64..4_000_000_000).prop_map(|s| {
            let day = Datestamp::from_unix(s).to_string();
            Datestamp::parse(&day[..10])
        }),
    ]
}

fn limits() -> impl Strategy<Value = Limits> {
    (1usize..=50, MIN_BYTES..=MIN_BYTES * 4).prop_map(|(max_urls, max_bytes)| Limits {
        max_urls,
        max_bytes,
    })
}

/// What one shard says, read back with roxmltree: `(loc, lastmod)` per `<url>`, unescaped.
fn read_shard(shard: &Shard) -> Result<Vec<(String, Option<String>)>, TestCaseError> {
    // SM-02: the declaration at byte 0, strict UTF-8.
    prop_assert!(
        shard.bytes.starts_with(XML_DECL.as_bytes()),
        "shard does not start with the XML declaration"
    );
    let text = std::str::from_utf8(&shard.bytes)
        .map_err(|e| TestCaseError::fail(format!("shard is not UTF-8: {e}")))?;
    let doc = roxmltree::Document::parse(text)
        .map_err(|e| TestCaseError::fail(format!("shard is not well-formed XML: {e}")))?;
    // SM-01, SM-20: a urlset in the sitemaps namespace, one <url> with a <loc> per URL.
    let root = doc.root_element();
    prop_assert_eq!(root.tag_name().name(), "urlset");
    prop_assert_eq!(root.tag_name().namespace(), Some(SITEMAP_NS));
    let mut entries = Vec::new();
    for url in root.children().filter(|n| n.is_element()) {
        prop_assert_eq!(url.tag_name().name(), "url");
        let fields: Vec<_> = url.children().filter(|n| n.is_element()).collect();
        prop_assert!(!fields.is_empty() && fields.len() <= 2, "{:?}", fields);
        prop_assert_eq!(fields[0].tag_name().name(), "loc");
        let lastmod = match fields.get(1) {
            Some(f) => {
                prop_assert_eq!(f.tag_name().name(), "lastmod");
                Some(text_of(*f))
            }
            None => None,
        };
        entries.push((text_of(fields[0]), lastmod));
    }
    Ok(entries)
}

fn text_of(node: roxmltree::Node) -> String {
    node.descendants()
        .filter(|n| n.is_text())
        .filter_map(|n| n.text())
        .collect()
}

/// The first `<url>` line of a shard, as written: what the previous shard could not take.
fn first_entry(shard: &Shard) -> &[u8] {
    let text = &shard.bytes[..];
    let start = find(text, b"<url>").expect("a shard holds at least one <url>");
    let end = start
        + text[start..]
            .iter()
            .position(|&b| b == b'\n')
            .expect("entries end with a newline")
        + 1;
    &text[start..end]
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

proptest! {
    #![proptest_config(config(128))]

    /// SM-09, SM-15, SM-16: across any split, every URL comes back once, in order, and every
    /// shard is non-empty, within both limits and a well-formed urlset (SM-01, SM-02, SM-03).
    #[test]
    fn shards_lose_and_duplicate_nothing_and_keep_both_limits(
        items in prop::collection::btree_map(url(), datestamp(), 0..120),
        limits in limits(),
    ) {
        let items: Vec<(String, Option<Datestamp>)> = items.into_iter().collect();
        let mut shards = Vec::new();
        let count = render_shards(
            items.iter().map(|(u, d)| (u.as_str(), *d)),
            limits,
            |s| {
                shards.push(s.clone());
                Ok::<_, Infallible>(())
            },
        )
        .unwrap();
        // The count returned is the count emitted.
        prop_assert_eq!(count, shards.len());
        if items.is_empty() {
            prop_assert_eq!(count, 0);
        }

        let mut read_back: Vec<(String, Option<String>)> = Vec::new();
        for (k, shard) in shards.iter().enumerate() {
            prop_assert!(shard.urls >= 1, "shard {} is empty (SM-15)", k + 1);
            prop_assert!(
                shard.urls <= limits.max_urls,
                "shard {} holds {} URLs, limit {}", k + 1, shard.urls, limits.max_urls
            );
            prop_assert!(
                shard.bytes.len() <= limits.max_bytes,
                "shard {} has {} bytes, limit {}", k + 1, shard.bytes.len(), limits.max_bytes
            );
            let entries = read_shard(shard)?;
            prop_assert_eq!(entries.len(), shard.urls);
            // The index's lastmod for the shard is the newest in it (SM-10).
            let start = read_back.len();
            let newest = items[start..start + shard.urls].iter().filter_map(|(_, d)| *d).max();
            prop_assert_eq!(shard.newest, newest);
            read_back.extend(entries);
        }
        let expected: Vec<(String, Option<String>)> = items
            .iter()
            .map(|(u, d)| (u.clone(), d.map(|d| d.to_string())))
            .collect();
        prop_assert_eq!(read_back, expected);

        // Shards are filled greedily: one is closed only when the next entry would break a limit.
        for (k, pair) in shards.windows(2).enumerate() {
            let next = first_entry(&pair[1]).len();
            prop_assert!(
                pair[0].urls == limits.max_urls
                    || pair[0].bytes.len() + next > limits.max_bytes,
                "shard {} was closed early: {} URLs, {} bytes, next entry {} bytes, limits {:?}",
                k + 1, pair[0].urls, pair[0].bytes.len(), next, limits
            );
        }
    }
}

/// Renders `items` and collects the shards.
fn shards_of(items: &[(String, Option<Datestamp>)], limits: Limits) -> Vec<Shard> {
    let mut shards = Vec::new();
    render_shards(items.iter().map(|(u, d)| (u.as_str(), *d)), limits, |s| {
        shards.push(s.clone());
        Ok::<_, Infallible>(())
    })
    .unwrap();
    shards
}

proptest! {
    #![proptest_config(config(64))]

    /// SM-09: the byte limit is inclusive and counts the whole file: a shard of exactly
    /// `max_bytes` is written as one, one byte less moves its last URL to the next shard.
    #[test]
    fn a_shard_of_exactly_max_bytes_fits_and_one_byte_less_splits(
        items in prop::collection::btree_map(url_of(1000usize..=2047), datestamp(), 20..50),
        pick in any::<prop::sample::Index>(),
    ) {
        let items: Vec<(String, Option<Datestamp>)> = items.into_iter().collect();
        let roomy = Limits { max_urls: 50, max_bytes: MAX_BYTES };
        // The size of a shard holding the first k URLs, as render writes it.
        let size = |k: usize| {
            let shards = shards_of(&items[..k], roomy);
            assert_eq!(shards.len(), 1);
            shards[0].bytes.len()
        };
        let candidates: Vec<(usize, usize)> = (1..=items.len())
            .map(|k| (k, size(k)))
            .filter(|&(_, bytes)| bytes > MIN_BYTES)
            .collect();
        prop_assert!(!candidates.is_empty());
        let (k, bytes) = candidates[pick.index(candidates.len())];

        let exact = shards_of(&items, Limits { max_urls: 50, max_bytes: bytes });
        prop_assert_eq!(exact[0].urls, k);
        prop_assert_eq!(exact[0].bytes.len(), bytes);

        let less = shards_of(&items, Limits { max_urls: 50, max_bytes: bytes - 1 });
        prop_assert_eq!(less[0].urls, k - 1);
        prop_assert!(less.iter().all(|s| s.bytes.len() < bytes));
        prop_assert_eq!(less.iter().map(|s| s.urls).sum::<usize>(), items.len());
    }
}

// ---------------------------------------------------------------------------------------------
// Escaping

/// Any character XML 1.0 can carry (its `Char` production), with the five special ones and the
/// whitespace XML normalises drawn often.
fn xml_char() -> impl Strategy<Value = char> {
    prop_oneof![
        2 => prop::sample::select(vec!['&', '\'', '"', '<', '>', '\r', '\n', '\t', ';', '#']),
        3 => any::<char>().prop_filter("XML Char", |&c| matches!(
            c,
            '\u{9}' | '\u{A}' | '\u{D}' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}'
                | '\u{10000}'..='\u{10FFFF}'
        )),
    ]
}

proptest! {
    #![proptest_config(config(256))]

    /// SM-03: all five characters are written as their named entities, nothing else raw that XML
    /// would misread, and the value parses back to itself.
    #[test]
    fn escaping_round_trips_through_an_xml_parser(
        value in prop::collection::vec(xml_char(), 0..64).prop_map(String::from_iter),
    ) {
        let escaped = escape(&value);
        for raw in ['<', '>', '"', '\''] {
            prop_assert!(!escaped.contains(raw), "raw {:?} in {:?}", raw, escaped);
        }
        for (c, entity) in [('&', "&amp;"), ('<', "&lt;"), ('>', "&gt;"), ('\'', "&apos;"), ('"', "&quot;")] {
            prop_assert_eq!(
                escaped.matches(entity).count(),
                value.matches(c).count(),
                "{:?} must become {}", c, entity
            );
        }
        let doc = format!("<v>{escaped}</v>");
        let parsed = roxmltree::Document::parse(&doc)
            .map_err(|e| TestCaseError::fail(format!("{doc:?} is not well-formed: {e}")))?;
        prop_assert_eq!(text_of(parsed.root_element()), value);
    }
}

#[test]
fn the_five_characters_are_escaped_as_the_protocol_shows() {
    // SM-03: the worked example, plus the other three characters.
    assert_eq!(
        escape("https://h/p?a=1&b='x'"),
        "https://h/p?a=1&amp;b=&apos;x&apos;"
    );
    assert_eq!(escape("<\">"), "&lt;&quot;&gt;");
    assert_eq!(escape("https://h/plain"), "https://h/plain");
}

// ---------------------------------------------------------------------------------------------
// Inventory

/// What a `dc:identifier` value should become under the scope `https://repo.example/oai/`.
#[derive(Clone, Debug)]
enum Expect {
    /// Published as this (normalised) URL.
    Url(String),
    /// Not published, for this reason.
    Dropped(Drop),
}

/// In-scope URLs (some spelled differently but equal once normalised), out-of-scope URLs,
/// persistent identifiers and junk.
fn pool() -> Vec<(String, Expect)> {
    let url = |s: &str| Expect::Url(s.to_owned());
    let base = "https://repo.example/oai/";
    let longest = format!("{base}{}", "a".repeat(2047 - base.len()));
    let mut pool = vec![
        (
            "https://repo.example/oai/items/1",
            url("https://repo.example/oai/items/1"),
        ),
        (
            "https://REPO.example/oai/items/1",
            url("https://repo.example/oai/items/1"),
        ),
        (
            "  https://repo.example/oai/items/2\n",
            url("https://repo.example/oai/items/2"),
        ),
        (
            "https://repo.example/oai/items/2",
            url("https://repo.example/oai/items/2"),
        ),
        (
            "https://repo.example/oai/items/view?id=3&lang=en",
            url("https://repo.example/oai/items/view?id=3&lang=en"),
        ),
        (
            "https://repo.example/oai/items/café",
            url("https://repo.example/oai/items/caf%C3%A9"),
        ),
        (
            "https://repo.example/oai/files/4.pdf",
            url("https://repo.example/oai/files/4.pdf"),
        ),
        (
            "https://repo.example:443/oai/items/5",
            url("https://repo.example/oai/items/5"),
        ),
        (
            "https://repo.example/oai/x/../items/6",
            url("https://repo.example/oai/items/6"),
        ),
        (
            "https://repo.example/oai/it'em\"<7>",
            url("https://repo.example/oai/it'em%22%3C7%3E"),
        ),
        (
            "https://repo.example/other/1",
            Expect::Dropped(Drop::OutOfScope),
        ),
        (
            "http://repo.example/oai/items/1",
            Expect::Dropped(Drop::OutOfScope),
        ),
        (
            "https://elsewhere.example/oai/items/1",
            Expect::Dropped(Drop::OutOfScope),
        ),
        (
            "https://repo.example/oai/../admin",
            Expect::Dropped(Drop::OutOfScope),
        ),
        ("doi:10.1234/abc", Expect::Dropped(Drop::PersistentId)),
        (
            "https://doi.org/10.1234/abc",
            Expect::Dropped(Drop::PersistentId),
        ),
        ("10.5555/nbu.7", Expect::Dropped(Drop::PersistentId)),
        ("hdl:1765/315", Expect::Dropped(Drop::PersistentId)),
        ("ISBN 90-9014980-5", Expect::Dropped(Drop::NotAUrl)),
        (
            "urn:nbn:de:kobv:83-opus-12345",
            Expect::Dropped(Drop::NotAUrl),
        ),
        ("oai:repo.example:1", Expect::Dropped(Drop::NotAUrl)),
        (
            "Smith, A. (2001). A title & more.",
            Expect::Dropped(Drop::NotAUrl),
        ),
        (
            "https://repo.example/oai/a b",
            Expect::Dropped(Drop::InvalidUrl),
        ),
    ]
    .into_iter()
    .map(|(v, e)| (v.to_owned(), e))
    .collect::<Vec<_>>();
    // SM-05: 2,047 characters fit, 2,048 do not.
    pool.push((longest.clone(), Expect::Url(longest.clone())));
    pool.push((format!("{longest}a"), Expect::Dropped(Drop::TooLong)));
    pool
}

fn scope() -> Scope {
    Scope::from_base_url(&Url::parse("https://repo.example/oai/request").unwrap()).unwrap()
}

/// A record occurrence: header identifier, datestamp, deleted flag, indexes into [`pool`], and
/// the groups it is in (bits 0 and 1: DiWoo categories).
type Occurrence = (String, Option<Datestamp>, bool, Vec<usize>, u32);

fn occurrences() -> impl Strategy<Value = Vec<Occurrence>> {
    let ids = prop::sample::select(vec!["oai:r:1", "oai:r:2", "oai:r:3", "oai:r:4", "oai:r:5"]);
    // Same instants in both granularities, so ties and near-ties happen.
    let dates = prop::sample::select(vec![
        None,
        Some("2019-12-31T23:59:59Z"),
        Some("2020-01-01"),
        Some("2020-01-01T00:00:00Z"),
        Some("2020-01-01T12:00:00Z"),
        Some("2021-06-30"),
    ])
    .prop_map(|d| d.and_then(Datestamp::parse));
    let pool_len = pool().len();
    let occurrence = (
        ids,
        dates,
        prop::bool::weighted(0.2),
        prop::collection::vec(0..pool_len, 0..6),
        0u32..4,
    )
        .prop_map(|(id, d, deleted, ids, groups)| (id.to_owned(), d, deleted, ids, groups));
    prop::collection::vec(occurrence, 0..40)
}

fn resolve(occurrences: &[Occurrence]) -> Published {
    let pool = pool();
    let mut inventory = Inventory::new(scope());
    for (id, datestamp, deleted, ids, groups) in occurrences {
        inventory
            .add(
                &Record {
                    identifier: id.clone(),
                    datestamp: *datestamp,
                    deleted: *deleted,
                    sets: vec![],
                    dc_identifiers: ids.iter().map(|&i| pool[i].0.clone()).collect(),
                    dc: Default::default(),
                    empty_metadata: false,
                },
                *groups,
            )
            .unwrap();
    }
    inventory.finish()
}

/// The reference model, written as plainly as possible.
#[derive(Debug, Default)]
struct Model {
    /// Sorted URLs with their lastmod.
    published: Vec<(String, Option<Datestamp>)>,
    /// The URLs of group 0 and of group 1: those a winning version in the group publishes.
    groups: [Vec<String>; 2],
    records: u64,
    deleted: u64,
    no_url: u64,
    /// Publishable identifier values of the winning versions, repeats included.
    publishable: u64,
    /// Drops by classification reason, over the winning versions.
    dropped: BTreeMap<&'static str, u64>,
}

fn model(occurrences: &[Occurrence]) -> Model {
    let pool = pool();
    // Newest datestamp per identifier wins (no datestamp is oldest); on a tie the later
    // occurrence (OAI-38).
    let mut winners: BTreeMap<&str, &Occurrence> = BTreeMap::new();
    for occ in occurrences {
        match winners.get(occ.0.as_str()) {
            Some(best) if best.1 > occ.1 => {}
            _ => {
                winners.insert(&occ.0, occ);
            }
        }
    }
    let mut m = Model {
        records: winners.len() as u64,
        ..Model::default()
    };
    let mut urls: BTreeMap<String, Option<Datestamp>> = BTreeMap::new();
    let mut groups: [BTreeSet<String>; 2] = Default::default();
    for (_, datestamp, deleted, ids, in_groups) in winners.values() {
        if *deleted {
            m.deleted += 1;
            continue;
        }
        let mut any = false;
        for &i in ids {
            match &pool[i].1 {
                Expect::Url(u) => {
                    any = true;
                    m.publishable += 1;
                    // Each URL once, with the newest datestamp of the records listing it (SM-16).
                    let lastmod = urls.entry(u.clone()).or_insert(*datestamp);
                    *lastmod = (*lastmod).max(*datestamp);
                    for (g, urls) in groups.iter_mut().enumerate() {
                        if in_groups & 1 << g != 0 {
                            urls.insert(u.clone());
                        }
                    }
                }
                Expect::Dropped(reason) => *m.dropped.entry(reason.as_str()).or_default() += 1,
            }
        }
        if !any {
            m.no_url += 1;
        }
    }
    m.published = urls.into_iter().collect();
    m.groups = groups.map(|g| g.into_iter().collect());
    m
}

const CLASSIFY_REASONS: [Drop; 5] = [
    Drop::OutOfScope,
    Drop::NotAUrl,
    Drop::InvalidUrl,
    Drop::TooLong,
    Drop::PersistentId,
];

proptest! {
    #![proptest_config(config(256))]

    /// OAI-38, OAI-39, SM-16: the published list equals the reference model, sorted.
    #[test]
    fn inventory_publishes_what_the_reference_model_does(occurrences in occurrences()) {
        let published = resolve(&occurrences);
        let expected = model(&occurrences);
        let got: Vec<(String, Option<Datestamp>)> =
            published.iter().map(|(u, d)| (u.to_owned(), d)).collect();
        prop_assert_eq!(&got, &expected.published);
        prop_assert_eq!(published.len(), expected.published.len());
        prop_assert_eq!(published.is_empty(), expected.published.is_empty());
    }

    /// A group (a DiWoo category) lists the URLs of its records' winning versions, each once, in
    /// order, with the URL's lastmod of the whole list; a record whose newest version left the
    /// group is not in it.
    #[test]
    fn a_group_lists_the_urls_of_its_winning_records(occurrences in occurrences()) {
        let published = resolve(&occurrences);
        let expected = model(&occurrences);
        prop_assert!(published.iter_grouped().all(|(_, _, groups)| groups != 0));
        for (g, urls) in expected.groups.iter().enumerate() {
            let got: Vec<(String, Option<Datestamp>)> = published
                .iter_grouped()
                .filter(|(_, _, groups)| groups & 1 << g != 0)
                .map(|(u, d, _)| (u.to_owned(), d))
                .collect();
            let want: Vec<(String, Option<Datestamp>)> = expected
                .published
                .iter()
                .filter(|(u, _)| urls.contains(u))
                .cloned()
                .collect();
            prop_assert_eq!(got, want);
        }
    }

    /// I-01, OAI-38, SM-16: the counts add up. Every record occurrence is seen; every distinct
    /// record is deleted, without URL or publishing; and every `dc:identifier` of a winning
    /// version is counted exactly once: published, a duplicate, or dropped for one reason.
    #[test]
    fn inventory_counts_add_up(occurrences in occurrences()) {
        let s = resolve(&occurrences).stats;
        let m = model(&occurrences);
        prop_assert_eq!(s.records_seen, occurrences.len() as u64);
        prop_assert_eq!(s.records, m.records);
        prop_assert_eq!(s.deleted, m.deleted);
        prop_assert_eq!(s.dropped(Drop::Deleted), m.deleted);
        prop_assert_eq!(s.dropped(Drop::NoUrl), m.no_url);
        prop_assert_eq!(s.urls, m.published.len() as u64);
        prop_assert_eq!(s.dropped(Drop::Duplicate), m.publishable - s.urls);
        for reason in CLASSIFY_REASONS {
            prop_assert_eq!(
                s.dropped(reason),
                m.dropped.get(reason.as_str()).copied().unwrap_or(0),
                "{} counted over the winning versions", reason.as_str()
            );
        }
        let winners_values: u64 = m.publishable + m.dropped.values().sum::<u64>();
        let accounted: u64 = s.urls
            + s.dropped(Drop::Duplicate)
            + CLASSIFY_REASONS.iter().map(|r| s.dropped(*r)).sum::<u64>();
        prop_assert_eq!(accounted, winners_values);
    }
}

#[test]
fn a_superseded_version_is_not_counted() {
    // OAI-38, Q-06: the same record on two pages; the newer version replaces the older one, so the
    // older one's identifiers are neither published nor counted a second time.
    let pool = pool();
    let doi = pool
        .iter()
        .position(|(v, _)| v == "doi:10.1234/abc")
        .unwrap();
    let isbn = pool
        .iter()
        .position(|(v, _)| v.starts_with("ISBN"))
        .unwrap();
    let item = pool
        .iter()
        .position(|(v, _)| v == "https://repo.example/oai/items/1")
        .unwrap();
    let older = Datestamp::parse("2020-01-01");
    let newer = Datestamp::parse("2021-01-01");
    let id = || "oai:r:1".to_owned();
    let s = resolve(&[
        (id(), older, false, vec![doi, isbn, item], 0),
        (id(), newer, false, vec![doi, item], 0),
    ])
    .stats;
    assert_eq!((s.records_seen, s.records, s.urls), (2, 1, 1));
    assert_eq!(s.dropped(Drop::PersistentId), 1, "{s:?}");
    assert_eq!(s.dropped(Drop::NotAUrl), 0, "{s:?}");
}

#[test]
fn the_pool_covers_every_class() {
    // The model is only as good as its inputs: each outcome occurs in the pool.
    let pool = pool();
    let reasons: BTreeSet<&str> = pool
        .iter()
        .filter_map(|(_, e)| match e {
            Expect::Dropped(r) => Some(r.as_str()),
            Expect::Url(_) => None,
        })
        .collect();
    for r in CLASSIFY_REASONS {
        assert!(reasons.contains(r.as_str()), "{}", r.as_str());
    }
    let urls: BTreeSet<&str> = pool
        .iter()
        .filter_map(|(_, e)| match e {
            Expect::Url(u) => Some(u.as_str()),
            Expect::Dropped(_) => None,
        })
        .collect();
    // Some values differ in spelling only, so duplicates arise within one record too.
    assert!(
        urls.len()
            < pool
                .iter()
                .filter(|(_, e)| matches!(e, Expect::Url(_)))
                .count()
    );
}
