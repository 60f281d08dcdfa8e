//! Micro-benchmarks of the pure core: parsing a 500-record ListRecords page (by the scanner, and
//! by the quick-xml reader it falls back to) and a datestamp, rendering a 50,000-URL shard, and
//! writing the Signmap's and OCX's entries of 500 records (what the profiles add per record;
//! their end-to-end benchmark is `benches/profiles/run.sh`). The end-to-end harvest benchmark
//! against a peer is `benches/harvest/run.sh`.

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use oai_bridge::Datestamp;
use oai_bridge::Fields;
use oai_bridge::Limits;
use oai_bridge::OcxConfig;
use oai_bridge::Scope;
use oai_bridge::Signposts;
use oai_bridge::TypeMap;
use oai_bridge::fields_for;
use oai_bridge::render_shards;
use oai_bridge::{Class, class};
use oai_bridge::{parse_list_records, parse_list_records_with};
use url::Url;

fn page(records: usize) -> String {
    let mut out = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<OAI-PMH xmlns=\"http://www.openarchives.org/OAI/2.0/\">\
         <responseDate>2026-01-01T00:00:00Z</responseDate><request verb=\"ListRecords\">https://h/oai</request><ListRecords>",
    );
    for i in 0..records {
        out.push_str(&format!(
            "<record><header><identifier>oai:h:{i}</identifier><datestamp>2024-01-02T03:04:05Z</datestamp><setSpec>a</setSpec></header>\
             <metadata><oai_dc:dc xmlns:oai_dc=\"http://www.openarchives.org/OAI/2.0/oai_dc/\" xmlns:dc=\"http://purl.org/dc/elements/1.1/\">\
             <dc:title>A title of extraordinary things &amp; more {i}</dc:title><dc:creator>McCormack, Michael</dc:creator>\
             <dc:description>{}</dc:description><dc:identifier>https://h/item/{i}</dc:identifier>\
             <dc:identifier>doi:10.1234/{i}</dc:identifier></oai_dc:dc></metadata></record>",
            "Lorem ipsum dolor sit amet. ".repeat(40)
        ));
    }
    out.push_str("<resumptionToken cursor=\"0\">next</resumptionToken></ListRecords></OAI-PMH>");
    out
}

/// `page` with a processing instruction after its XML declaration, which the hand-written
/// scanner declines at once: the page is then read by the quick-xml reader alone.
fn declined_by_the_scanner(page: &str) -> String {
    let (declaration, rest) = page.split_once('\n').expect("the page has a declaration");
    format!("{declaration}\n<?xml-stylesheet type=\"text/xsl\" href=\"oai.xsl\"?>{rest}")
}

fn benches(c: &mut Criterion) {
    let body = page(500);
    let mut group = c.benchmark_group("parse");
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_function("list_records_500", |b| {
        b.iter(|| parse_list_records(body.as_bytes()).unwrap())
    });
    // The same page read by the quick-xml reader, which reads what the scanner declines.
    let declined = declined_by_the_scanner(&body);
    group.bench_function("list_records_500_fallback", |b| {
        b.iter(|| parse_list_records(declined.as_bytes()).unwrap())
    });
    group.finish();

    // One datestamp per record: the two UTC forms stay on the fixed-width path; an offset and a
    // fraction (Python's isoformat()) take the longer one.
    let mut group = c.benchmark_group("datestamp");
    for (name, text) in [
        ("seconds", "2024-01-02T03:04:05Z"),
        ("day", "2024-01-02"),
        ("offset", "2024-01-02T03:04:05.085156+02:00"),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| Datestamp::parse(std::hint::black_box(text)))
        });
    }
    group.finish();

    let urls: Vec<String> = (0..50_000)
        .map(|i| format!("https://repository.example.edu/items/{i}?a=1&b=2"))
        .collect();
    let lastmod = Datestamp::parse("2024-01-02T03:04:05Z");
    let mut group = c.benchmark_group("render");
    group.throughput(Throughput::Elements(urls.len() as u64));
    group.bench_function("shard_50000", |b| {
        b.iter(|| {
            render_shards(
                urls.iter().map(|u| (u.as_str(), lastmod)),
                Limits::default(),
                |s| {
                    std::hint::black_box(s);
                    Ok::<_, ()>(())
                },
            )
        })
    });
    group.finish();
}

/// A page of records shaped like a repository's theses and articles (as the profiles benchmark's
/// upstream serves them): a landing page, a DOI and often a PDF each, a long abstract that
/// sometimes holds an ampersand or a `<`, a `dc:type` from the COAR vocabulary and a rights
/// statement.
fn repository_page(records: usize) -> String {
    let words = [
        "coastal",
        "sediment",
        "transport",
        "bayesian",
        "inference",
        "of",
        "groundwater",
        "recharge",
        "in",
        "urban",
        "catchments",
        "with",
        "sparse",
        "data",
        "and",
        "models",
    ];
    let types = [
        "info:eu-repo/semantics/doctoralThesis",
        "info:eu-repo/semantics/article",
        "info:eu-repo/semantics/conferenceObject",
        "Dataset",
    ];
    let mut out = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<OAI-PMH xmlns=\"http://www.openarchives.org/OAI/2.0/\">\
         <responseDate>2026-01-01T00:00:00Z</responseDate><request verb=\"ListRecords\">https://h.example.edu/oai/request</request><ListRecords>",
    );
    for i in 0..records {
        let text = |n: usize| {
            (0..n)
                .map(|k| words[(i * 7 + k * 3) % words.len()])
                .collect::<Vec<_>>()
                .join(" ")
        };
        let extra = match i % 10 {
            0 => " &amp; more.",
            1 => " (n &lt; 500).",
            _ => ".",
        };
        let file = if i % 2 == 0 {
            format!(
                "<dc:identifier>https://h.example.edu/oai/files/{i}/thesis-{i}.pdf</dc:identifier>"
            )
        } else {
            String::new()
        };
        out.push_str(&format!(
            "<record><header><identifier>oai:h.example.edu:{i}</identifier><datestamp>2024-01-02T03:04:05Z</datestamp><setSpec>com_{}</setSpec></header>\
             <metadata><oai_dc:dc xmlns:oai_dc=\"http://www.openarchives.org/OAI/2.0/oai_dc/\" xmlns:dc=\"http://purl.org/dc/elements/1.1/\">\
             <dc:title>{}</dc:title><dc:creator>Tanaka, Jan</dc:creator><dc:subject>Oceanography</dc:subject>\
             <dc:description>{}{extra} {}.</dc:description><dc:publisher>Institute for Coastal Research</dc:publisher>\
             <dc:date>2024-01-02</dc:date><dc:type>{}</dc:type><dc:format>application/pdf</dc:format>\
             <dc:identifier>https://h.example.edu/oai/records/{i}</dc:identifier>{file}\
             <dc:identifier>https://doi.org/10.5555/h.2024.{i}</dc:identifier><dc:language>en</dc:language>\
             <dc:rights>© the authors; all rights reserved</dc:rights></oai_dc:dc></metadata></record>",
            i % 5,
            text(12),
            text(60),
            text(70),
            types[i % types.len()],
        ));
    }
    out.push_str("<resumptionToken cursor=\"0\">next</resumptionToken></ListRecords></OAI-PMH>");
    out
}

/// The Signmap's and OCX's entries of a page of records: what `Signposts::add` costs per
/// record with both on, written into shard files in the system's temporary folder as an
/// export writes them.
fn profiles(c: &mut Criterion) {
    let base = Url::parse("https://h.example.edu/oai/request").unwrap();
    let scope = Scope::from_base_url(&base).unwrap();
    // Google's rule: the profiles' own cost, without a platform's.
    let generic = oai_bridge::LandingSettings {
        platform: oai_bridge::Setting::Fixed("generic".into()),
        ..Default::default()
    };
    let source = oai_bridge::Source::Oai(base.clone());
    // The Signmap's and OCX's fields.
    let profiles = oai_bridge::ProfileSettings {
        signmap: true,
        ocx: Some(OcxConfig::default()),
        ..Default::default()
    };
    let fields: Fields = fields_for(&profiles, &generic, &source);
    let body = repository_page(500);
    let page = parse_list_records_with(body.as_bytes(), fields).unwrap();
    let classes: Vec<Vec<Class<'_>>> = page
        .records
        .iter()
        .map(|r| r.dc_identifiers.iter().map(|v| class(v, &scope)).collect())
        .collect();
    let signposts = || {
        Signposts::new(TypeMap::default(), Some(&base), Limits::default())
            .with_signmap()
            .with_ocx(OcxConfig {
                default_type: Some("https://schema.org/CreativeWork".into()),
                ..OcxConfig::default()
            })
    };
    let mut group = c.benchmark_group("profiles");
    group.throughput(Throughput::Elements(page.records.len() as u64));
    // Classifying a page's identifiers as the profiles read them (with media types).
    group.bench_function("classify_500", |b| {
        b.iter(|| {
            for record in &page.records {
                for value in &record.dc_identifiers {
                    std::hint::black_box(class(value, &scope));
                }
            }
        })
    });
    // Reading a page with the elements the Signmap and OCX write from.
    group.bench_function("parse_500", |b| {
        b.iter(|| parse_list_records_with(body.as_bytes(), fields).unwrap())
    });
    let declined = declined_by_the_scanner(&body);
    group.bench_function("parse_500_fallback", |b| {
        b.iter(|| parse_list_records_with(declined.as_bytes(), fields).unwrap())
    });
    // A new collection each time, so that its files stay small and in the page cache: made
    // (by a first record, the page's first again) before the clock starts and removed after it
    // stops; the 500 timed come after it.
    group.bench_function("signmap_ocx_entries_500", |b| {
        b.iter_batched(
            || {
                let mut s = signposts();
                s.add(&page.records[0], &classes[0]).unwrap();
                s
            },
            |mut signposts| {
                for (record, classes) in page.records.iter().zip(&classes) {
                    signposts.add(record, classes).unwrap();
                }
                signposts
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(core, benches, profiles);
criterion_main!(core);
