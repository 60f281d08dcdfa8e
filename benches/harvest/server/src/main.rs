//! A fast, pre-rendering OAI-PMH data provider for the harvest benchmark (benches/harvest/run.sh).
//!
//! At start it renders every `ListRecords` page of a synthetic repository into memory (full HTTP
//! responses, headers included), then serves them over HTTP/1.1 keep-alive on 127.0.0.1 by
//! copying bytes: serving costs next to nothing, so the harvesters' CPU is what gets measured.
//!
//! Records are realistic oai_dc of about 2 KB: title, 1-4 creators, subjects, a long description,
//! publisher, date, type, format, language, rights, and 2-4 `dc:identifier` values of mixed
//! classes (landing page inside the baseURL's directory, PDFs inside and outside it, DOIs, URNs,
//! URLs on other hosts, a few URLs shared by several records); about 2% are deleted. All URLs are
//! ASCII and canonical, so any correct harvester derives the same URL set from them.
//!
//! `--expected-urls FILE` writes that URL set (the distinct in-scope URLs of live records, sorted
//! bytewise), computed from the generator rather than from the XML, as a third opinion.
//!
//! `--changed-every N` makes a later state of the same repository, for incremental harvests: every
//! N-th record has changed (a new datestamp in September 2025, a revised title; every second one
//! of them is deleted). A request with `from` on or after 2025-01-01 (every original datestamp is
//! older) lists exactly the changed records; an earlier `from` is refused. `--response-date`
//! sets the server's clock. With `--changed-newest`, the changed records are instead the newest
//! N-th part (the highest identifiers), as a repository's recent deposits are revised: a change
//! clustered where a stable sitemap layout keeps it in a shard or two. `--deleted-record no|transient` makes Identify say so (a store-backed
//! harvester then re-harvests in full on its schedule). `GET /count` answers how many requests
//! were served.
//!
//! `--shape dspace|eprints` serves the same kind of records as the two most-installed repository
//! platforms send them (docs/platforms.md, fixtures/platforms/dspace6.xml and eprints34.xml), for
//! benches/platforms/run.sh; `generic` (the default) is the shape above, byte for byte.
//! - `dspace` (DSpace 6, `/oai/request`): header `oai:bench.northbridge.example:123456789/{id}`,
//!   sets `com_123456789_N`/`col_123456789_N`, the crosswalk's element order, and `dc:identifier`
//!   a citation text, the Handle `http://hdl.handle.net/123456789/{id}` (every 5th record the
//!   local `{origin}/handle/123456789/{id}`, DSpace 6's default spelling), sometimes a DOI and
//!   sometimes a bitstream `{origin}/bitstream/handle/123456789/{id}/file-{id}.pdf?sequence=1`.
//!   Identify has DSpace's `oai-identifier` description. Expected URLs: the landing page
//!   `{origin}/handle/123456789/{id}` of every live record and the bitstreams.
//! - `eprints` (EPrints 3.4, `/cgi/oai2`): header `oai:bench.northbridge.example:{id}`,
//!   hex-encoded sets, the abstract page `{origin}/id/eprint/{id}/` as the first `dc:relation`,
//!   1-2 documents `{origin}/id/eprint/{id}/N/...` as `dc:identifier`, the citation text as a
//!   `dc:identifier`, the official URL (another host) and sometimes a DOI as `dc:relation`.
//!   Identify has the `oai-identifier` and `eprints` descriptions. Expected URLs: the abstract
//!   pages and the documents.
//!
//! `--on-demand` renders each `ListRecords` page of the whole list when it is asked for instead
//! of at start, the same bytes: for repositories too large to hold rendered (50 million records
//! take about 110 GB), at the cost of the server's CPU during the harvest (shown apart by the
//! benchmarks) and without `--expected-urls`. benches/memory/run.sh uses it.
//!
//! Usage: oai-bench-server [--records N] [--page-size N] [--port P] [--expected-urls FILE]
//!                         [--seed S] [--changed-every N] [--changed-newest] [--response-date D]
//!                         [--deleted-record no|transient|persistent]
//!                         [--shape generic|dspace|eprints] [--on-demand]

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const REPO_HOST: &str = "127.0.0.1";
/// The server's clock (`responseDate`), `--response-date`.
static DATE: OnceLock<String> = OnceLock::new();
/// Requests served (`GET /count`).
static REQUESTS: AtomicU64 = AtomicU64::new(0);
/// Changed records carry datestamps from here on; `from` must be at least `FROM_MIN`.
const CHANGED_FROM: i64 = 1_756_684_800; // 2025-09-01T00:00:00Z
const FROM_MIN: &str = "2025-01-01";

struct Options {
    records: u64,
    page_size: u64,
    port: u16,
    expected_urls: Option<String>,
    seed: u64,
    /// Every N-th record changed (0: none).
    changed_every: u64,
    /// The changed records are the newest `records / changed_every` instead (`--changed-newest`).
    changed_newest: bool,
    /// What Identify says of deletions (`--deleted-record`): `persistent` (the default), or `no`
    /// / `transient`, which make a store-backed harvester re-harvest in full to find deletions.
    deleted_record: String,
    /// The repository's own URLs in `dc:identifier` are https (`--https-identifiers`), as
    /// DiWoo requires; the server itself still answers plain http.
    https: bool,
    /// Which platform's shape the records have (`--shape`).
    shape: Shape,
    /// Render the list's pages as they are asked for (`--on-demand`).
    on_demand: bool,
}

/// The repository platform whose records are imitated.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// The harvest benchmark's own records.
    Generic,
    /// DSpace 6 (XOAI).
    Dspace,
    /// EPrints 3.4.
    Eprints,
}

impl Shape {
    /// The baseURL's path, as the platform serves it.
    fn path(self) -> &'static str {
        match self {
            Shape::Generic | Shape::Dspace => "/oai/request",
            Shape::Eprints => "/cgi/oai2",
        }
    }
}

/// DSpace's Handle prefix (the default of an unregistered installation).
const HANDLE_PREFIX: &str = "123456789";

impl Options {
    fn changed(&self, id: u64) -> bool {
        match self.changed_newest {
            false => self.changed_every > 0 && id % self.changed_every == 0,
            true => self.changed_every > 0 && id > self.records - self.changed_count(),
        }
    }

    /// How many records changed.
    fn changed_count(&self) -> u64 {
        self.records / self.changed_every.max(1)
    }

    /// The identifier of the `i`-th changed record (from 0).
    fn changed_id(&self, i: u64) -> u64 {
        match self.changed_newest {
            false => (i + 1) * self.changed_every.max(1),
            true => self.records - self.changed_count() + i + 1,
        }
    }
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        records: 1_000_000,
        page_size: 500,
        port: 8765,
        expected_urls: None,
        seed: 42,
        changed_every: 0,
        changed_newest: false,
        deleted_record: "persistent".to_owned(),
        https: false,
        shape: Shape::Generic,
        on_demand: false,
    };
    let mut date = "2025-06-01T12:00:00Z".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--records" => o.records = value()?.parse().map_err(|e| format!("--records: {e}"))?,
            "--page-size" => {
                o.page_size = value()?.parse().map_err(|e| format!("--page-size: {e}"))?
            }
            "--port" => o.port = value()?.parse().map_err(|e| format!("--port: {e}"))?,
            "--seed" => o.seed = value()?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--expected-urls" => o.expected_urls = Some(value()?),
            "--changed-every" => {
                o.changed_every = value()?
                    .parse()
                    .map_err(|e| format!("--changed-every: {e}"))?
            }
            "--changed-newest" => o.changed_newest = true,
            "--response-date" => date = value()?,
            "--deleted-record" => o.deleted_record = value()?,
            "--https-identifiers" => o.https = true,
            "--on-demand" => o.on_demand = true,
            "--shape" => {
                o.shape = match value()?.as_str() {
                    "generic" => Shape::Generic,
                    "dspace" => Shape::Dspace,
                    "eprints" => Shape::Eprints,
                    other => {
                        return Err(format!("--shape: generic, dspace or eprints, not {other}"));
                    }
                }
            }
            "-h" | "--help" => {
                println!(
                    "oai-bench-server [--records N] [--page-size N] [--port P] [--expected-urls FILE] [--seed S] [--changed-every N] [--changed-newest] [--response-date D] [--deleted-record no|transient|persistent] [--https-identifiers] [--shape generic|dspace|eprints] [--on-demand]"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if o.page_size == 0 {
        return Err("--page-size must be at least 1".into());
    }
    if !["no", "transient", "persistent"].contains(&o.deleted_record.as_str()) {
        return Err("--deleted-record must be no, transient or persistent".into());
    }
    if o.https && o.shape != Shape::Generic {
        // The platforms' landing pages are on the baseURL's scheme (the server answers http).
        return Err("--https-identifiers is for the generic shape only".into());
    }
    DATE.set(date).expect("set once");
    Ok(o)
}

// ---------------------------------------------------------------------------------------------
// Deterministic pseudo-random content.

struct Rng(u64);

impl Rng {
    fn new(seed: u64, id: u64) -> Self {
        Rng(seed ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// True with probability `percent`/100.
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

const WORDS: &[&str] = &[
    "analysis",
    "adaptive",
    "model",
    "framework",
    "evidence",
    "longitudinal",
    "study",
    "cohort",
    "effects",
    "climate",
    "regional",
    "variability",
    "network",
    "distributed",
    "learning",
    "protein",
    "structure",
    "dynamics",
    "coastal",
    "sediment",
    "transport",
    "policy",
    "urban",
    "mobility",
    "health",
    "outcomes",
    "randomised",
    "trial",
    "quantum",
    "transport",
    "thermal",
    "conductivity",
    "graphene",
    "soil",
    "microbial",
    "community",
    "governance",
    "digital",
    "archive",
    "heritage",
    "language",
    "acquisition",
    "bilingual",
    "children",
    "income",
    "inequality",
    "labour",
    "market",
    "reform",
    "energy",
    "storage",
    "battery",
    "lithium",
    "catalyst",
    "synthesis",
    "machine",
    "translation",
    "corpus",
    "annotation",
    "medieval",
    "manuscript",
    "tradition",
    "ecosystem",
    "services",
    "biodiversity",
    "monitoring",
    "satellite",
    "remote",
    "sensing",
    "groundwater",
    "recharge",
    "estimation",
    "uncertainty",
    "bayesian",
    "inference",
    "hierarchical",
    "spatial",
    "temporal",
    "patterns",
    "migration",
    "routes",
    "seabirds",
    "genomic",
    "variation",
    "population",
    "history",
    "early",
    "modern",
    "trade",
    "ceramics",
    "excavation",
    "settlement",
    "practices",
    "teacher",
    "education",
    "assessment",
    "curriculum",
    "mathematics",
    "reasoning",
    "proof",
    "algebraic",
    "topology",
    "invariants",
    "optimisation",
    "convex",
    "stochastic",
    "gradient",
    "methods",
    "convergence",
    "robust",
    "control",
    "systems",
    "wind",
    "turbine",
    "fatigue",
    "loads",
    "materials",
    "composite",
    "damage",
    "detection",
    "acoustic",
    "emission",
    "signal",
    "processing",
    "sparse",
    "recovery",
    "imaging",
    "magnetic",
    "resonance",
    "brain",
    "connectivity",
    "ageing",
    "cognition",
    "memory",
    "sleep",
    "quality",
    "workers",
    "shift",
    "nursing",
    "hospital",
    "readmission",
    "risk",
    "prediction",
    "fairness",
    "accountability",
    "algorithms",
    "public",
    "sector",
    "welfare",
];

const FIRST: &[&str] = &[
    "Anna", "Jan", "Maria", "Pieter", "Sofia", "Lukas", "Emma", "Noah", "Chiara", "Mateo", "Aoife",
    "Søren", "Zoë", "José", "Björn", "Ines", "Kenji", "Amara", "Olga", "Tomasz",
];
const LAST: &[&str] = &[
    "Jansen",
    "de Vries",
    "Müller",
    "Rossi",
    "García",
    "Nowak",
    "O'Brien",
    "Dubois",
    "Nielsen",
    "Kowalski",
    "Smith",
    "Okafor",
    "Tanaka",
    "Ivanova",
    "Silva",
    "Andersson",
    "Novák",
    "Brown",
    "Horváth",
    "Lefèvre",
];
const PUBLISHERS: &[&str] = &[
    "Northbridge University",
    "Northbridge University Press",
    "Faculty of Science, Northbridge University",
    "Institute for Coastal Research",
    "Northbridge University Library",
];
const TYPES: &[&str] = &[
    "info:eu-repo/semantics/article",
    "info:eu-repo/semantics/doctoralThesis",
    "info:eu-repo/semantics/conferenceObject",
    "info:eu-repo/semantics/report",
    "Text",
];
const SUBJECTS: &[&str] = &[
    "Earth sciences",
    "Oceanography",
    "Public health",
    "Computer science",
    "Linguistics",
    "Economics",
    "History",
    "Archaeology",
    "Education",
    "Mathematics",
    "Engineering",
    "Neuroscience",
    "Nursing",
    "Law",
    "Political science",
    "Ecology",
    "Chemistry",
    "Physics",
];
const LANGS: &[&str] = &["en", "en", "en", "de", "nl", "fr"];
const RIGHTS: &[&str] = &[
    "info:eu-repo/semantics/openAccess",
    "Attribution 4.0 International (CC BY 4.0) https://creativecommons.org/licenses/by/4.0/",
    "info:eu-repo/semantics/embargoedAccess",
    "© the authors; all rights reserved",
];

fn words(r: &mut Rng, out: &mut String, n: usize) {
    for i in 0..n {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(r.pick(WORDS));
    }
}

fn capitalised_words(r: &mut Rng, out: &mut String, n: usize) {
    let start = out.len();
    words(r, out, n);
    // ASCII word lists: upper-casing the first byte keeps the string valid.
    out[start..start + 1].make_ascii_uppercase();
}

/// `days` since 1970-01-01 -> (year, month, day) (Howard Hinnant's civil_from_days).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Everything that depends on where the repository is served.
#[derive(Clone)]
struct Site {
    /// `http://127.0.0.1:PORT` (`https` with `--https-identifiers`)
    origin: String,
    /// `http://127.0.0.1:PORT/oai/request`
    base_url: String,
}

/// Appends one `<record>` for record `id` to `out`; pushes its in-scope URLs onto `urls`.
fn render_record(out: &mut String, id: u64, o: &Options, site: &Site, urls: &mut Vec<String>) {
    let mut r = Rng::new(o.seed, id);
    let Some(head) = render_header(out, &mut r, id, o) else {
        return;
    };
    match o.shape {
        Shape::Generic => render_generic(out, &mut r, id, &head, site, urls),
        Shape::Dspace => render_dspace(out, &mut r, id, &head, site, urls),
        Shape::Eprints => render_eprints(out, &mut r, id, &head, site, urls),
    }
}

/// What the metadata of a live record reads from its header.
struct Head {
    changed: bool,
    /// The datestamp's date.
    y: i64,
    mo: u32,
    d: u32,
    /// The whole datestamp, `YYYY-MM-DDThh:mm:ssZ`.
    datestamp: String,
}

/// Appends the record's header, in the shape's spelling; a deleted record is closed and gives
/// `None`. Every shape draws the same numbers here: the same records are deleted.
fn render_header(out: &mut String, r: &mut Rng, id: u64, o: &Options) -> Option<Head> {
    let changed = o.changed(id);
    // Half the changed records are deleted.
    let half = match o.changed_newest {
        false => (id / o.changed_every.max(1)) % 2 == 0,
        true => id % 2 == 0,
    };
    let deleted = r.chance(2) || (changed && half);
    // Datestamps between 2010 and 2025; changed records' in September 2025.
    let mut secs = 1_262_304_000 + r.below(15 * 365 * 86_400) as i64;
    if changed {
        secs = CHANGED_FROM + (id % 86_400) as i64;
    }
    let (y, mo, d) = civil(secs.div_euclid(86_400));
    let tod = secs.rem_euclid(86_400);
    let set = r.below(40);
    let datestamp = format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}Z",
        tod / 3600,
        tod / 60 % 60,
        tod % 60
    );
    let status = if deleted { " status=\"deleted\"" } else { "" };
    let _ = match o.shape {
        Shape::Generic => write!(
            out,
            "<record>\n<header{status}>\n<identifier>oai:bench.northbridge.example:{id}</identifier>\n\
             <datestamp>{datestamp}</datestamp>\n\
             <setSpec>com_{}</setSpec>\n<setSpec>col_{set}</setSpec>\n</header>\n",
            set / 8,
        ),
        // DSpace: the item's Handle after the repository identifier; sets by community and
        // collection Handle.
        Shape::Dspace => write!(
            out,
            "<record>\n<header{status}>\n\
             <identifier>oai:bench.northbridge.example:{HANDLE_PREFIX}/{id}</identifier>\n\
             <datestamp>{datestamp}</datestamp>\n\
             <setSpec>com_{HANDLE_PREFIX}_{}</setSpec>\n<setSpec>col_{HANDLE_PREFIX}_{}</setSpec>\n\
             </header>\n",
            set / 8 + 1,
            set + 10,
        ),
        // EPrints: the eprint id; hex-encoded sets (`status=pub`, `divisions=div_N`), none for
        // a deleted eprint.
        Shape::Eprints => {
            let _ = write!(
                out,
                "<record>\n<header{status}>\n<identifier>oai:bench.northbridge.example:{id}</identifier>\n\
                 <datestamp>{datestamp}</datestamp>\n"
            );
            if !deleted {
                out.push_str("<setSpec>7374617475733D707562</setSpec>\n<setSpec>");
                for b in format!("divisions=div_{}", set / 8).bytes() {
                    let _ = write!(out, "{b:02X}");
                }
                out.push_str("</setSpec>\n");
            }
            out.push_str("</header>\n");
            Ok(())
        }
    };
    if deleted {
        out.push_str("</record>\n");
        return None;
    }
    Some(Head {
        changed,
        y,
        mo,
        d,
        datestamp,
    })
}

const OAI_DC_OPEN: &str = "<metadata>\n<oai_dc:dc xmlns:oai_dc=\"http://www.openarchives.org/OAI/2.0/oai_dc/\" \
     xmlns:dc=\"http://purl.org/dc/elements/1.1/\" \
     xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" \
     xsi:schemaLocation=\"http://www.openarchives.org/OAI/2.0/oai_dc/ \
     http://www.openarchives.org/OAI/2.0/oai_dc.xsd\">\n";
const OAI_DC_CLOSE: &str = "</oai_dc:dc>\n</metadata>\n</record>\n";

/// The descriptive elements every shape writes in this order: title, 1-4 creators, 2-5
/// subjects and the abstract. Returns the first creator (for a citation) and the title.
fn render_description(out: &mut String, r: &mut Rng, head: &Head) -> (String, String) {
    out.push_str("<dc:title>");
    let title_start = out.len();
    if head.changed {
        out.push_str("Revised: ");
    }
    let n = 6 + r.below(9) as usize;
    capitalised_words(r, out, n);
    if r.chance(30) {
        out.push_str(": ");
        words(r, out, 4);
    }
    let title = out[title_start..].to_owned();
    out.push_str("</dc:title>\n");
    let mut first = String::new();
    for i in 0..1 + r.below(4) {
        let creator = format!(
            "{}, {}",
            r.pick(LAST).replace('\'', "&apos;"),
            r.pick(FIRST)
        );
        let _ = writeln!(out, "<dc:creator>{creator}</dc:creator>");
        if i == 0 {
            first = creator;
        }
    }
    for _ in 0..2 + r.below(4) {
        let _ = writeln!(out, "<dc:subject>{}</dc:subject>", r.pick(SUBJECTS));
    }
    // The long part: an abstract of 60-110 words in sentences, with the odd escaped character.
    out.push_str("<dc:description>");
    let total = 60 + r.below(51) as usize;
    let mut written = 0;
    while written < total {
        let n = (8 + r.below(14) as usize).min(total - written);
        capitalised_words(r, out, n);
        written += n;
        out.push_str(match r.below(20) {
            0 => " &amp; more. ",
            1 => " (n &lt; 500). ",
            _ => ". ",
        });
    }
    out.pop();
    out.push_str("</dc:description>\n");
    (first, title)
}

/// The harvest benchmark's own records (module doc).
fn render_generic(
    out: &mut String,
    r: &mut Rng,
    id: u64,
    head: &Head,
    site: &Site,
    urls: &mut Vec<String>,
) {
    let Head { y, mo, d, .. } = *head;
    out.push_str(OAI_DC_OPEN);
    render_description(out, r, head);
    let _ = writeln!(out, "<dc:publisher>{}</dc:publisher>", r.pick(PUBLISHERS));
    let _ = writeln!(out, "<dc:date>{y:04}-{mo:02}-{d:02}</dc:date>");
    let _ = writeln!(out, "<dc:type>{}</dc:type>", r.pick(TYPES));
    let _ = writeln!(out, "<dc:format>application/pdf</dc:format>");

    // dc:identifier: 2-4 values of mixed classes.
    let origin = &site.origin;
    let mut ids: Vec<String> = Vec::with_capacity(4);
    let mut scoped: Vec<String> = Vec::with_capacity(3);
    if !r.chance(1) {
        // The landing page, inside the baseURL's directory (/oai/); some with a query string.
        let url = if r.chance(10) {
            format!("{origin}/oai/view?id={id}&lang=en")
        } else {
            format!("{origin}/oai/records/{id}")
        };
        scoped.push(url.clone());
        ids.push(url);
    }
    if r.chance(50) {
        let slug = r.pick(WORDS);
        if r.chance(70) {
            let url = format!("{origin}/oai/files/{id}/{slug}-{id}.pdf");
            scoped.push(url.clone());
            ids.push(url);
        } else {
            // Same host, outside the baseURL's directory: out of scope.
            ids.push(format!("{origin}/bitstream/{id}/{slug}.pdf"));
        }
    }
    if r.chance(1) {
        // A collection page several records share: published once.
        let url = format!("{origin}/oai/collections/{}", id % 97);
        scoped.push(url.clone());
        ids.push(url);
    }
    if ids.len() < 4 && r.chance(70) {
        ids.push(if r.chance(50) {
            format!("doi:10.5555/nb.{}.{id}", y)
        } else {
            format!("https://doi.org/10.5555/nb.{}.{id}", y)
        });
    }
    if ids.len() < 4 && r.chance(30) {
        ids.push(format!("https://www.example.org/article/{id}"));
    }
    if ids.len() < 4 && r.chance(5) {
        ids.push(format!("urn:nbn:nl:ui:99-{id}"));
    }
    if ids.len() < 4 && r.chance(3) {
        ids.push(format!("http://hdl.handle.net/99999/{id}"));
    }
    while ids.len() < 2 {
        ids.push(format!("doi:10.5555/nb.{id}"));
    }
    for v in &ids {
        out.push_str("<dc:identifier>");
        out.push_str(&v.replace('&', "&amp;"));
        out.push_str("</dc:identifier>\n");
    }
    let _ = writeln!(out, "<dc:language>{}</dc:language>", r.pick(LANGS));
    let _ = writeln!(out, "<dc:rights>{}</dc:rights>", r.pick(RIGHTS));
    out.push_str(OAI_DC_CLOSE);
    urls.append(&mut scoped);
}

/// A citation as the platforms write it into `dc:identifier`: authors, year, title, journal.
fn citation(r: &mut Rng, first: &str, title: &str, y: i64) -> String {
    format!(
        "{first} (et al.) ({y}). {title}. Journal of {}, {}({}), {}-{}.",
        r.pick(SUBJECTS),
        1 + r.below(40),
        1 + r.below(6),
        10 + r.below(200),
        220 + r.below(200),
    )
}

/// DSpace 6's oai_dc crosswalk (dspace/config/crosswalks/oai/metadataFormats/oai_dc.xsl):
/// title, creator, subject, description, date (accessioned, available, issued), type,
/// identifier (citation, uri, doi, and here and there a bitstream URL staff typed in),
/// language, rights, format, publisher.
fn render_dspace(
    out: &mut String,
    r: &mut Rng,
    id: u64,
    head: &Head,
    site: &Site,
    urls: &mut Vec<String>,
) {
    let Head { y, mo, d, .. } = *head;
    let origin = &site.origin;
    out.push_str(OAI_DC_OPEN);
    let (first, title) = render_description(out, r, head);
    let stamp = &head.datestamp;
    let _ = writeln!(
        out,
        "<dc:date>{stamp}</dc:date>\n<dc:date>{stamp}</dc:date>\n<dc:date>{y:04}-{mo:02}-{d:02}</dc:date>"
    );
    let _ = writeln!(out, "<dc:type>{}</dc:type>", r.pick(TYPES));
    // The citation text (dc.identifier.citation), escaped as XML text.
    let _ = writeln!(
        out,
        "<dc:identifier>{}</dc:identifier>",
        citation(r, &first, &title, y).replace(" (et al.)", " &amp; al.")
    );
    // dc.identifier.uri: the Handle; DSpace 6's default canonical prefix is the local
    // ${dspace.url}/handle/, handle.net-registered sites and 5.x items have the proxy's.
    if id % 5 == 0 {
        let _ = writeln!(
            out,
            "<dc:identifier>{origin}/handle/{HANDLE_PREFIX}/{id}</dc:identifier>"
        );
    } else {
        let _ = writeln!(
            out,
            "<dc:identifier>http://hdl.handle.net/{HANDLE_PREFIX}/{id}</dc:identifier>"
        );
    }
    urls.push(format!("{origin}/handle/{HANDLE_PREFIX}/{id}"));
    if r.chance(40) {
        // dc.identifier.doi, as typed: a resolver URL or the bare DOI.
        let _ = if r.chance(50) {
            writeln!(
                out,
                "<dc:identifier>https://doi.org/10.5555/nb.{y}.{id}</dc:identifier>"
            )
        } else {
            writeln!(out, "<dc:identifier>10.5555/nb.{y}.{id}</dc:identifier>")
        };
    }
    if r.chance(30) {
        // A full-text link in dc.identifier.uri (XMLUI's spelling).
        let url =
            format!("{origin}/bitstream/handle/{HANDLE_PREFIX}/{id}/file-{id}.pdf?sequence=1");
        let _ = writeln!(out, "<dc:identifier>{url}</dc:identifier>");
        urls.push(url);
    }
    let _ = writeln!(out, "<dc:language>{}</dc:language>", r.pick(LANGS));
    let _ = writeln!(out, "<dc:rights>{}</dc:rights>", r.pick(RIGHTS));
    let _ = writeln!(out, "<dc:format>application/pdf</dc:format>");
    let _ = writeln!(out, "<dc:publisher>{}</dc:publisher>", r.pick(PUBLISHERS));
    out.push_str(OAI_DC_CLOSE);
}

/// EPrints 3.4's Export::DC (flavours/pub_lib/plugins/EPrints/Plugin/Export/DC.pm): the abstract
/// page as the first dc:relation, title, creator, subject, description, publisher, date, type,
/// per document its format, language, rights and URL (dc:identifier), the citation
/// (dc:identifier), the official URL (dc:relation) and the id_number, often a DOI (dc:relation).
fn render_eprints(
    out: &mut String,
    r: &mut Rng,
    id: u64,
    head: &Head,
    site: &Site,
    urls: &mut Vec<String>,
) {
    let Head { y, mo, d, .. } = *head;
    let origin = &site.origin;
    out.push_str(OAI_DC_OPEN);
    let abstract_page = format!("{origin}/id/eprint/{id}/");
    let _ = writeln!(out, "<dc:relation>{abstract_page}</dc:relation>");
    urls.push(abstract_page);
    let (first, title) = render_description(out, r, head);
    let _ = writeln!(out, "<dc:publisher>{}</dc:publisher>", r.pick(PUBLISHERS));
    let _ = writeln!(out, "<dc:date>{y:04}-{mo:02}-{d:02}</dc:date>");
    let _ = writeln!(out, "<dc:type>{}</dc:type>", r.pick(TYPES));
    let _ = writeln!(out, "<dc:type>PeerReviewed</dc:type>");
    let lang = r.pick(LANGS);
    for pos in 1..=1 + r.below(2) {
        let (format, url) = if pos == 1 {
            (
                "application/pdf",
                format!("{origin}/id/eprint/{id}/1/paper-{id}.pdf"),
            )
        } else {
            (
                "application/zip",
                format!("{origin}/id/eprint/{id}/{pos}/data-{id}.zip"),
            )
        };
        let _ = writeln!(
            out,
            "<dc:format>{format}</dc:format>\n<dc:language>{lang}</dc:language>\n\
             <dc:rights>cc_by_4</dc:rights>\n<dc:identifier>{url}</dc:identifier>"
        );
        urls.push(url);
    }
    // The citation, with the padding EPrints' citation rendering leaves.
    let _ = writeln!(
        out,
        "<dc:identifier>  {}  </dc:identifier>",
        citation(r, &first, &title, y).replace(" (et al.)", " and others")
    );
    let _ = writeln!(
        out,
        "<dc:relation>https://publisher.example.com/journal/article/{id}</dc:relation>"
    );
    if r.chance(50) {
        let _ = writeln!(out, "<dc:relation>10.5555/nb.{y}.{id}</dc:relation>");
    }
    out.push_str(OAI_DC_CLOSE);
}

fn envelope_open(out: &mut String, site: &Site, request_attrs: &str) {
    let _ = write!(
        out,
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <OAI-PMH xmlns=\"http://www.openarchives.org/OAI/2.0/\" \
         xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" \
         xsi:schemaLocation=\"http://www.openarchives.org/OAI/2.0/ \
         http://www.openarchives.org/OAI/2.0/OAI-PMH.xsd\">\n\
         <responseDate>{}</responseDate>\n<request{request_attrs}>{}</request>\n",
        DATE.get().expect("set at start"),
        site.base_url
    );
}

fn http_response(status: &str, body: &[u8]) -> Arc<[u8]> {
    let mut v = Vec::with_capacity(body.len() + 128);
    let _ = write!(
        v,
        "HTTP/1.1 {status}\r\nContent-Type: text/xml; charset=utf-8\r\nContent-Length: {}\r\n\
         Date: Sun, 01 Jun 2025 12:00:00 GMT\r\n\r\n",
        body.len()
    );
    v.extend_from_slice(body);
    v.into()
}

fn token_for(cursor: u64, list: List) -> String {
    // Pipes and a slash, as real servers use, so clients must percent-encode the token.
    match list {
        List::All => format!("oai_dc|{cursor}|/bench"),
        List::Changed => format!("oai_dc|{cursor}|/changed"),
    }
}

fn cursor_of(token: &str) -> Option<(u64, List)> {
    let rest = token.strip_prefix("oai_dc|")?;
    let (cursor, tail) = rest.split_once('|')?;
    let list = match tail {
        "/bench" => List::All,
        "/changed" => List::Changed,
        _ => return None,
    };
    Some((cursor.parse().ok()?, list))
}

/// The whole repository, or the records changed since [`FROM_MIN`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum List {
    All,
    Changed,
}

/// All responses, rendered (the list's pages, with `--on-demand`, when asked for).
struct Pages {
    list: Vec<Arc<[u8]>>,
    /// With `--on-demand`: what renders the list's pages, and how many there are.
    on_demand: Option<(Arc<Options>, Site, u64)>,
    /// The pages of the changed records' list.
    changed: Vec<Arc<[u8]>>,
    identify: Arc<[u8]>,
    page_size: u64,
    base_url: String,
    /// The baseURL's path: where the server answers OAI-PMH requests.
    path: &'static str,
}

fn render_page(
    o: &Options,
    site: &Site,
    page: u64,
    list: List,
    urls: &mut Vec<String>,
) -> (Vec<u8>, u64) {
    // The list's records: every one, or the changed ones.
    let total = match list {
        List::All => o.records,
        List::Changed => o.changed_count(),
    };
    let start = page * o.page_size;
    let end = (start + o.page_size).min(total);
    let mut out = String::with_capacity(((end - start) * 2300) as usize + 1024);
    let attrs = match (page, list) {
        (0, List::All) => " verb=\"ListRecords\" metadataPrefix=\"oai_dc\"".to_owned(),
        (0, List::Changed) => {
            format!(" verb=\"ListRecords\" metadataPrefix=\"oai_dc\" from=\"{FROM_MIN}\"")
        }
        _ => format!(
            " verb=\"ListRecords\" resumptionToken=\"{}\"",
            token_for(start, list)
        ),
    };
    envelope_open(&mut out, site, &attrs);
    out.push_str("<ListRecords>\n");
    let records_start = out.len();
    for i in start..end {
        let id = match list {
            List::All => i + 1,
            List::Changed => o.changed_id(i),
        };
        render_record(&mut out, id, o, site, urls);
    }
    let record_bytes = (out.len() - records_start) as u64;
    if end < total {
        let _ = writeln!(
            out,
            "<resumptionToken completeListSize=\"{total}\" cursor=\"{start}\">{}</resumptionToken>",
            token_for(end, list)
        );
    } else if page > 0 {
        let _ = writeln!(
            out,
            "<resumptionToken completeListSize=\"{total}\" cursor=\"{start}\"/>"
        );
    }
    out.push_str("</ListRecords>\n</OAI-PMH>\n");
    (out.into_bytes(), record_bytes)
}

impl Pages {
    /// Page `index` of the whole list, rendered now with `--on-demand`.
    fn list_page(&self, index: u64) -> Option<Arc<[u8]>> {
        match &self.on_demand {
            Some((o, site, pages)) => (index < *pages).then(|| {
                let (body, _) = render_page(o, site, index, List::All, &mut Vec::new());
                http_response("200 OK", &body)
            }),
            None => self.list.get(index as usize).cloned(),
        }
    }
}

fn render_all(o: &Arc<Options>) -> (Pages, Vec<String>) {
    let site = Site {
        origin: format!(
            "{}://{REPO_HOST}:{}",
            if o.https { "https" } else { "http" },
            o.port
        ),
        base_url: format!("http://{REPO_HOST}:{}{}", o.port, o.shape.path()),
    };
    let pages = o.records.div_ceil(o.page_size).max(1);
    // Two threads render halves of the pages (the machine has two cores).
    let half = pages.div_ceil(2);
    let (mut list, mut urls, mut record_bytes, mut max_page) = (Vec::new(), Vec::new(), 0u64, 0);
    // With `--on-demand` nothing of the list is rendered here.
    let (half, pages) = if o.on_demand { (0, 0) } else { (half, pages) };
    std::thread::scope(|s| {
        let work = |from: u64, to: u64| {
            let site = &site;
            move || {
                let mut list = Vec::new();
                let mut urls = Vec::new();
                let mut record_bytes = 0;
                let mut max_page = 0;
                for p in from..to {
                    let (body, rb) = render_page(o, site, p, List::All, &mut urls);
                    record_bytes += rb;
                    max_page = max_page.max(body.len());
                    list.push(http_response("200 OK", &body));
                }
                (list, urls, record_bytes, max_page)
            }
        };
        let a = s.spawn(work(0, half));
        let b = s.spawn(work(half, pages));
        for h in [a, b] {
            let (l, u, rb, mp) = h.join().expect("render thread");
            list.extend(l);
            urls.extend(u);
            record_bytes += rb;
            max_page = max_page.max(mp);
        }
    });
    let mut identify = String::new();
    envelope_open(&mut identify, &site, " verb=\"Identify\"");
    let _ = write!(
        identify,
        "<Identify>\n<repositoryName>Northbridge benchmark repository</repositoryName>\n\
         <baseURL>{}</baseURL>\n<protocolVersion>2.0</protocolVersion>\n\
         <adminEmail>repository@northbridge.example</adminEmail>\n\
         <earliestDatestamp>2010-01-01T00:00:00Z</earliestDatestamp>\n\
         <deletedRecord>{}</deletedRecord>\n<granularity>YYYY-MM-DDThh:mm:ssZ</granularity>\n",
        site.base_url, o.deleted_record
    );
    // The platforms' own descriptions (dspace/config/crosswalks/oai/description.xml; EPrints'
    // cgi/oai2); the generic shape has none.
    let oai_identifier = |sample: &str| {
        format!(
            "<description>\n<oai-identifier xmlns=\"http://www.openarchives.org/OAI/2.0/oai-identifier\" \
             xsi:schemaLocation=\"http://www.openarchives.org/OAI/2.0/oai-identifier \
             http://www.openarchives.org/OAI/2.0/oai-identifier.xsd\">\n<scheme>oai</scheme>\n\
             <repositoryIdentifier>bench.northbridge.example</repositoryIdentifier>\n\
             <delimiter>:</delimiter>\n<sampleIdentifier>{sample}</sampleIdentifier>\n\
             </oai-identifier>\n</description>\n"
        )
    };
    match o.shape {
        Shape::Generic => {}
        Shape::Dspace => identify.push_str(&oai_identifier(&format!(
            "oai:bench.northbridge.example:{HANDLE_PREFIX}/1234"
        ))),
        Shape::Eprints => {
            identify.push_str(&oai_identifier("oai:bench.northbridge.example:1"));
            identify.push_str(
                "<description>\n<eprints xmlns=\"http://www.openarchives.org/OAI/1.1/eprints\" \
                 xsi:schemaLocation=\"http://www.openarchives.org/OAI/1.1/eprints \
                 http://www.openarchives.org/OAI/1.1/eprints.xsd\">\n\
                 <content><text>Northbridge benchmark repository</text></content>\n\
                 <metadataPolicy><text>No metadata policy defined.</text></metadataPolicy>\n\
                 <dataPolicy><text>No data policy defined.</text></dataPolicy>\n\
                 <comment>This system is running eprints server software (EPrints 3.4.5) \
                 developed at the University of Southampton. For more information see \
                 http://www.eprints.org/</comment>\n</eprints>\n</description>\n",
            );
        }
    }
    identify.push_str("</Identify>\n</OAI-PMH>\n");
    let changed_pages = if o.changed_every > 0 {
        o.changed_count().div_ceil(o.page_size)
    } else {
        0
    };
    let changed = (0..changed_pages)
        .map(|p| {
            let (body, _) = render_page(o, &site, p, List::Changed, &mut Vec::new());
            http_response("200 OK", &body)
        })
        .collect();
    let total: usize = list.iter().map(|p| p.len()).sum();
    let on_demand = o.on_demand.then(|| {
        let pages = o.records.div_ceil(o.page_size).max(1);
        eprintln!(
            "oai-bench-server: {} records in {pages} pages of {}, rendered as they are asked for",
            o.records, o.page_size
        );
        (o.clone(), site.clone(), pages)
    });
    if !o.on_demand {
        eprintln!(
            "oai-bench-server: {} records in {} pages of {}; {:.1} MB in all, {:.0} bytes a record on average, largest page {:.2} MB",
            o.records,
            pages,
            o.page_size,
            total as f64 / 1e6,
            record_bytes as f64 / o.records.max(1) as f64,
            max_page as f64 / 1e6,
        );
    }
    (
        Pages {
            list,
            on_demand,
            changed,
            identify: http_response("200 OK", identify.as_bytes()),
            page_size: o.page_size,
            base_url: site.base_url,
            path: o.shape.path(),
        },
        urls,
    )
}

// ---------------------------------------------------------------------------------------------
// HTTP.

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = |c: u8| (c as char).to_digit(16);
                match (hex(b[i + 1]), hex(b[i + 2])) {
                    (Some(h), Some(l)) => {
                        out.push((h * 16 + l) as u8);
                        i += 3;
                        continue;
                    }
                    _ => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn oai_error(pages: &Pages, code: &str, message: &str) -> Arc<[u8]> {
    let site = Site {
        origin: String::new(),
        base_url: pages.base_url.clone(),
    };
    let mut out = String::new();
    envelope_open(&mut out, &site, "");
    let _ = write!(
        out,
        "<error code=\"{code}\">{message}</error>\n</OAI-PMH>\n"
    );
    http_response("200 OK", out.as_bytes())
}

fn route(pages: &Pages, target: &str) -> Arc<[u8]> {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if path == "/count" {
        let n = REQUESTS.load(Ordering::Relaxed);
        return http_response("200 OK", format!("{n}\n").as_bytes());
    }
    REQUESTS.fetch_add(1, Ordering::Relaxed);
    if path != pages.path {
        return http_response("404 Not Found", b"not found\n");
    }
    let mut verb = None;
    let mut prefix = None;
    let mut token = None;
    let mut from = None;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let v = percent_decode(v);
        match k {
            "verb" => verb = Some(v),
            "metadataPrefix" => prefix = Some(v),
            "resumptionToken" => token = Some(v),
            "from" => from = Some(v),
            _ => return oai_error(pages, "badArgument", "unknown argument"),
        }
    }
    match verb.as_deref() {
        Some("Identify") => pages.identify.clone(),
        Some("ListRecords") => match (prefix.as_deref(), token.as_deref(), from.as_deref()) {
            (Some("oai_dc"), None, None) => pages.list_page(0).expect("a list has a page"),
            (Some("oai_dc"), None, Some(f)) if f >= FROM_MIN => match pages.changed.first() {
                Some(page) => page.clone(),
                None => oai_error(pages, "noRecordsMatch", "nothing changed"),
            },
            (Some("oai_dc"), None, Some(_)) => oai_error(
                pages,
                "badArgument",
                "the benchmark server answers from only from 2025-01-01 on",
            ),
            (Some(_), None, _) => oai_error(pages, "cannotDisseminateFormat", "only oai_dc"),
            (None, Some(t), None) => {
                let size = pages.page_size;
                let page = cursor_of(t).and_then(|(c, list)| {
                    (c % size == 0).then_some(())?;
                    match list {
                        List::All => pages.list_page(c / size),
                        List::Changed => pages.changed.get((c / size) as usize).cloned(),
                    }
                });
                match page {
                    Some(p) => p,
                    None => oai_error(pages, "badResumptionToken", "unknown token"),
                }
            }
            _ => oai_error(pages, "badArgument", "metadataPrefix or resumptionToken"),
        },
        _ => oai_error(pages, "badVerb", "unsupported verb"),
    }
}

async fn serve(mut stream: TcpStream, pages: Arc<Pages>) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut buf = Vec::with_capacity(8192);
    let mut chunk = [0u8; 8192];
    loop {
        // Read one request head.
        let end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            if buf.len() > 64 * 1024 {
                return Ok(());
            }
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        buf.drain(..end);
        let mut lines = head.split("\r\n");
        let request_line = lines.next().unwrap_or("");
        let mut parts = request_line.split(' ');
        let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let close = lines.any(|l| {
            let l = l.to_ascii_lowercase();
            l.starts_with("connection:") && l.contains("close")
        }) || request_line.ends_with("HTTP/1.0");
        let response = if method == "GET" {
            route(&pages, target)
        } else {
            http_response("405 Method Not Allowed", b"GET only\n")
        };
        stream.write_all(&response).await?;
        if close {
            stream.shutdown().await?;
            return Ok(());
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("oai-bench-server: {e}");
            std::process::exit(2);
        }
    };
    if o.on_demand && o.expected_urls.is_some() {
        eprintln!(
            "oai-bench-server: --expected-urls needs the pages rendered at start, not --on-demand"
        );
        std::process::exit(2);
    }
    let o = Arc::new(o);
    let started = Instant::now();
    let (pages, mut urls) = render_all(&o);
    if let Some(path) = &o.expected_urls {
        urls.sort_unstable();
        urls.dedup();
        let set: BTreeSet<&str> = urls.iter().map(String::as_str).collect();
        let mut f =
            std::io::BufWriter::new(std::fs::File::create(path).expect("expected-urls file"));
        for u in &set {
            writeln!(f, "{u}").expect("write expected-urls");
        }
        f.flush().expect("write expected-urls");
        eprintln!(
            "oai-bench-server: {} distinct in-scope URLs written to {path}",
            set.len()
        );
    }
    drop(urls);
    // Listen only once everything is rendered, so an open port means ready.
    let listener = TcpListener::bind((REPO_HOST, o.port))
        .await
        .unwrap_or_else(|e| {
            eprintln!(
                "oai-bench-server: cannot listen on {REPO_HOST}:{}: {e}",
                o.port
            );
            std::process::exit(1);
        });
    eprintln!(
        "oai-bench-server: rendered in {:.1} s; serving {} on {REPO_HOST}:{}",
        started.elapsed().as_secs_f64(),
        pages.base_url,
        o.port
    );
    let pages = Arc::new(pages);
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let pages = pages.clone();
        tokio::spawn(async move {
            let _ = serve(stream, pages).await;
        });
    }
}
