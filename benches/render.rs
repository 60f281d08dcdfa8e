//! Micro-benchmarks of the pure core: parsing a 500-record ListRecords page and rendering a
//! 50,000-URL shard. The end-to-end harvest benchmark against a peer is `benches/harvest/run.sh`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use oai_bridge::datestamp::Datestamp;
use oai_bridge::oai::parse::parse_list_records;
use oai_bridge::render::Limits;
use oai_bridge::render::sitemap::render_shards;

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

fn benches(c: &mut Criterion) {
    let body = page(500);
    let mut group = c.benchmark_group("parse");
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_function("list_records_500", |b| {
        b.iter(|| parse_list_records(body.as_bytes()).unwrap())
    });
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

criterion_group!(core, benches);
criterion_main!(core);
