//! `oai-bridge check`: what a repository says about itself and why URLs would be dropped, for an
//! operator deciding how to bridge it. Reads `Identify`, `ListMetadataFormats`, the first page of
//! `ListSets`, a few pages of `ListRecords`, and the repository host's robots.txt; publishes
//! nothing and writes nothing.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use oai_pmh::{
    Client, Fields, HarvestRequest, HarvestSettings, Identify, IdentifyOutcome, OaiError,
    OaiRequest, Record, SmallAnswer, Source, parse_identify, parse_metadata_formats, parse_sets,
};
use serde::Serialize;
use url::Url;

use crate::advice::{self, Suggestion};
use crate::classify::{self, Class, Drop};
use crate::error::Error;
use crate::platform::{Classes, Landing};
use crate::scope::Scope;

/// What to check.
#[derive(Clone, Debug)]
pub struct CheckOptions {
    /// The baseURL, or a local Static Repository file.
    pub source: Source,
    /// Scope prefixes replacing the default, as configured.
    pub scope: Vec<Url>,
    /// Where the records' landing pages are, as configured.
    pub landing: crate::platform::LandingSettings,
    /// Sample landing pages to request.
    pub fetch: usize,
    /// Where the bridge's files would be served, when known.
    pub public_url: Option<Url>,
    /// `ListRecords` pages to sample.
    pub pages: u64,
    /// How the upstream is treated.
    pub harvest: HarvestSettings,
    /// The repository's `[repository.indexnow]`, when it is configured and has one.
    pub indexnow: Option<crate::indexnow::IndexNowConfig>,
    /// The profiles the repository publishes: Signposting is made from the Signmap (with a
    /// link to each record's CDIF document when those are on).
    pub profiles: crate::profiles::ProfileSettings,
    /// The relations the Signposting `Link` header carries (`signposting_header`).
    pub signposting_header: Vec<String>,
    /// How long ResourceSync's Change Lists keep a change (`changelist_days`; 0: off).
    pub changelist_days: u32,
}

/// Everything `check` found; `--json` prints it as it is.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CheckReport {
    /// The baseURL checked.
    pub base_url: String,
    /// What `Identify` says, when it answered.
    pub identify: Option<IdentifyReport>,
    /// `ListMetadataFormats`.
    pub formats: FormatsReport,
    /// The first page of `ListSets`.
    pub sets: SetsReport,
    /// The `ListRecords` sample.
    pub sample: SampleReport,
    /// The platform in effect, its landing rule, and what the sample's records get from it.
    pub landing: LandingReport,
    /// The scope applied and what a better one would be.
    pub scope: ScopeReport,
    /// The repository host's robots.txt.
    pub robots: RobotsReport,
    /// What `serve` would send to IndexNow, or why nothing.
    pub indexnow: IndexNowReport,
    /// What `serve` would answer of the sample's pages besides sitemaps: Signposting and
    /// ResourceSync.
    pub discovery: DiscoveryReport,
    /// Why the repository cannot be bridged as configured (empty: it can).
    pub problems: Vec<String>,
    /// What an operator should know but does not stop the bridge.
    pub warnings: Vec<String>,
    /// No problems.
    pub bridgeable: bool,
}

/// What `Identify` says.
#[derive(Clone, Debug, Default, Serialize)]
pub struct IdentifyReport {
    /// `repositoryName`.
    pub repository_name: String,
    /// `baseURL` as stated.
    pub base_url: String,
    /// `protocolVersion`.
    pub protocol_version: String,
    /// `granularity`.
    pub granularity: String,
    /// `deletedRecord`.
    pub deleted_record: String,
    /// `earliestDatestamp`, when parsable.
    pub earliest_datestamp: Option<String>,
    /// `compression` values.
    pub compression: Vec<String>,
    /// Response time in milliseconds.
    pub ms: u64,
}

/// `ListMetadataFormats`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FormatsReport {
    /// Prefixes offered.
    pub prefixes: Vec<String>,
    /// `oai_dc` is one of them.
    pub oai_dc: bool,
    /// Why the list is unknown.
    pub error: Option<String>,
}

/// The first page of `ListSets`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SetsReport {
    /// `(setSpec, setName)` of the first page.
    pub sets: Vec<(String, String)>,
    /// More pages follow.
    pub more: bool,
    /// `noSetHierarchy` or a failure.
    pub error: Option<String>,
}

/// The `ListRecords` sample.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SampleReport {
    /// Pages read.
    pub pages: u64,
    /// Records read.
    pub records: u64,
    /// Deleted ones among them.
    pub deleted: u64,
    /// Time to the first page, in milliseconds.
    pub first_page_ms: u64,
    /// `dc:identifier` values by class: `landing_page`, `content_file`, `persistent_id`, or a drop
    /// reason (`out_of_scope`, `not_a_url`, ...).
    pub identifiers: BTreeMap<String, u64>,
    /// Live records with no publishable URL.
    pub records_without_url: u64,
    /// Live records sent with an empty `<metadata/>` (Q-35): rejected as `empty_metadata`.
    pub empty_metadata: u64,
    /// Why the sample stopped short, if it did.
    pub error: Option<String>,
}

/// Where the landing pages come from, and what the sample's live records get.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LandingReport {
    /// `generic`, `dspace` or `eprints`.
    pub platform: String,
    /// The platform was configured, not detected.
    pub configured: bool,
    /// What it was found from (or that it was configured).
    pub evidence: String,
    /// Where a record's landing page comes from, in words.
    pub rule: String,
    /// Live records of the sample (readable, not deleted).
    pub live_records: u64,
    /// Those that get a landing page.
    pub with_landing_page: u64,
    /// `with_landing_page / live_records`.
    pub share: f64,
    /// A few landing pages it would publish.
    pub examples: Vec<String>,
    /// A few content files it would publish.
    pub content_files: Vec<String>,
    /// Sample landing pages requested.
    pub fetched: Vec<FetchReport>,
    /// The setting that gives more records a landing page, when most get none (or a DSpace's
    /// `ui_url`, when the records show its UI elsewhere), in words: tried on the sample.
    pub suggestion: Option<String>,
    /// The same, as data: the setting, what it gives the sample, its pages requested.
    pub suggested: Option<SuggestedReport>,
    /// What is said as fact, not advice: a DSpace UI on another site; when no setting gives
    /// most records a landing page, what the records carry (pages on another site are
    /// [`ScopeReport::elsewhere`]).
    pub facts: Vec<String>,
}

/// What `serve` would send to IndexNow after a refresh ([`crate::indexnow`]); never the key.
#[derive(Clone, Debug, Default, Serialize)]
pub struct IndexNowReport {
    /// `[repository.indexnow]` is configured (with a key).
    pub configured: bool,
    /// The engine pinged.
    pub endpoint: Option<String>,
    /// The hosts of the sample's landing pages that would be sent, each with where its key
    /// file must be (the key shown as `***`).
    pub key_files: Vec<(String, String)>,
    /// Sample landing pages that would be sent when they change.
    pub sent: u64,
    /// Sample landing pages that would not: outside the key file's location.
    pub outside: u64,
    /// What would be sent, or why nothing, in words.
    pub says: String,
}

/// What `serve` would answer of the sample's landing pages besides sitemaps
/// (docs/discovery.md): FAIR Signposting made from the Signmap, and ResourceSync's lists.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DiscoveryReport {
    /// Signposting, in words: the relations a landing page's `Link` header would carry and
    /// where its linkset would be, or why there is none.
    pub signposting: String,
    /// The linkset URL of the sample's first landing page, when it has one.
    pub linkset_example: Option<String>,
    /// The `Link` header the reverse proxy would add to that page, made as `serve` makes it:
    /// the sample through the Signmap, read back as the gateway reads it.
    pub link_header: Option<String>,
    /// That page's linkset (`application/linkset`, a link a line).
    pub linkset: Option<String>,
    /// Why the header could not be made, when it could not.
    pub link_error: Option<String>,
    /// The header leaves out its `rel="linkset"` links: they name the gateway, and no public
    /// URL says where it is.
    pub linkset_needs_public_url: bool,
    /// ResourceSync, in words.
    pub resourcesync: String,
    /// Hosts of the sample's landing pages other than the lists' host: a ResourceSync client
    /// refuses resources of another host unless the lists are proxied from theirs.
    pub other_hosts: Vec<String>,
}

/// What `serve` would answer of the sample's landing `pages` besides sitemaps, as `options`
/// configure it.
fn discovery_report(options: &CheckOptions, pages: &[String]) -> DiscoveryReport {
    let public = options.public_url.as_ref().map(Url::as_str);
    let base = public.unwrap_or("<public_url>");
    let mut report = DiscoveryReport::default();
    report.signposting = if !options.profiles.signmap {
        "none: the Signmap is off (signmap = true serves a linkset per landing page and the \
         Link header for a reverse proxy)"
            .to_owned()
    } else if let Some(first) = pages.first() {
        let url = crate::server::linkset::linkset_url(base, first);
        let said = format!(
            "each landing page's linkset from the Signmap; the Link header a proxy adds \
             carries {} (with at most {} item links), e.g. {first}: {url}",
            options.signposting_header.join(", "),
            crate::server::linkset::MAX_HEADER_ITEMS
        );
        report.linkset_example = Some(url);
        said
    } else {
        "none: the Signmap is on, but the sample has no landing page".to_owned()
    };
    if options.changelist_days == 0 {
        report.resourcesync = "off (changelist_days = 0)".to_owned();
        return report;
    }
    report.resourcesync = format!(
        "a Resource List of every landing page ({base}resourcelist.xml; the sample has {}) and \
         Change Lists of what each refresh creates, updates and deletes, kept {} days \
         ({base}capabilitylist.xml)",
        pages.len(),
        options.changelist_days
    );
    let lists_host = options.public_url.as_ref().and_then(Url::host_str);
    for page in pages {
        let host = Url::parse(page)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned));
        if let (Some(host), Some(lists)) = (host, lists_host)
            && host != lists
            && !report.other_hosts.contains(&host)
        {
            report.other_hosts.push(host);
        }
    }
    report
}

impl DiscoveryReport {
    fn render(&self, out: &mut String) {
        line(out, "Signposting", &self.signposting);
        if let Some(header) = &self.link_header {
            // A value a line: hrefs hold no ", <" (their delimiters are percent-encoded).
            for (i, value) in header.split(", <").enumerate() {
                let (label, open) = if i == 0 {
                    ("Link: ", "")
                } else {
                    ("      ", "<")
                };
                line(out, "", format_args!("{label}{open}{value}"));
            }
        }
        if self.linkset_needs_public_url {
            line(
                out,
                "",
                "(and rel=\"linkset\" links to the gateway, once public_url says where it is)",
            );
        }
        if let Some(e) = &self.link_error {
            line(out, "", format_args!("no Link header made: {e}"));
        }
        line(out, "ResourceSync", &self.resourcesync);
        if !self.other_hosts.is_empty() {
            line(
                out,
                "",
                format_args!(
                    "the landing pages are on {}, not the lists' host: ResourceSync clients refuse \
                     them unless /.well-known/resourcesync and the lists are proxied from there \
                     (docs/discovery.md)",
                    self.other_hosts.join(", ")
                ),
            );
        }
    }
}

/// The linkset `serve` would answer for landing page `page`: the sample's `records` classified
/// under `landing`, collected into the Signmap as a harvest does (its winning entries, its
/// `describedby` links to `metadata_base`), and read back as the gateway reads a Signmap shard.
fn signposts_of(
    options: &CheckOptions,
    metadata_base: Option<&Url>,
    records: &[Record],
    landing: &Landing,
    page: &str,
) -> Result<Option<crate::server::linkset::Linkset>, String> {
    use crate::profiles::signposts::Signposts;
    use crate::profiles::spill::ProfileShard;
    let text = |e: &dyn std::fmt::Display| e.to_string();
    let mut inventory = crate::inventory::Inventory::new(landing.scope().clone());
    let mut signposts = Signposts::new(
        crate::dctype::TypeMap::default(),
        metadata_base,
        crate::render::Limits::default(),
    )
    .with_signmap();
    if options.profiles.cdif {
        // Documents are linked only where they would be published: under the public URL.
        let documents = options.public_url.clone();
        signposts = signposts.with_cdif(documents).map_err(|e| text(&e))?;
    }
    let mut classes = Classes::new();
    for record in records {
        landing.classes(record, &mut classes);
        (inventory.add_classified(record, &classes, 0)).map_err(|e| text(&e))?;
        signposts.add(record, &classes).map_err(|e| text(&e))?;
    }
    let (_, superseded) = inventory.finish_with_superseded();
    let resolved = signposts.finish(&superseded).map_err(|e| text(&e))?;
    let mut found: Result<Option<_>, String> = Ok(None);
    resolved
        .render(crate::profiles::Profile::Signmap, |shard| {
            if !matches!(found, Ok(None)) {
                return Ok(());
            }
            let bytes = match shard {
                ProfileShard::File(file) => file.read()?,
                ProfileShard::Cut(shard) => shard.bytes.clone(),
            };
            found = match crate::server::linkset::parse_signmap(&bytes) {
                Ok(linksets) => Ok(linksets.into_iter().find(|l| l.anchor == page)),
                Err(e) => Err(format!(
                    "the Signmap made of the sample does not parse: {e}"
                )),
            };
            Ok::<_, Error>(())
        })
        .map_err(|e| text(&e))?;
    found
}

/// What `serve` would send IndexNow of the sample's landing `pages` under `config`.
fn indexnow_report(
    config: Option<&crate::indexnow::IndexNowConfig>,
    pages: &[String],
) -> IndexNowReport {
    let Some(config) = config else {
        return IndexNowReport {
            says: "nothing is sent: the repository has no [repository.indexnow] (docs/discovery.md, IndexNow)"
                .to_owned(),
            ..IndexNowReport::default()
        };
    };
    let mut report = IndexNowReport {
        configured: true,
        endpoint: Some(crate::indexnow::redact(
            config.endpoint.as_str(),
            &config.key,
        )),
        ..IndexNowReport::default()
    };
    for page in pages {
        match config.host_of(page) {
            Ok(host) => {
                report.sent += 1;
                if !report.key_files.iter().any(|(h, _)| *h == host) {
                    let file = config.key_file_shown(&host);
                    report.key_files.push((host, file));
                }
            }
            Err(_) => report.outside += 1,
        }
    }
    report.says = match (report.sent, pages.len()) {
        (_, 0) => "nothing would be sent: the sample has no landing page".to_owned(),
        (0, n) => format!(
            "nothing would be sent: none of the sample's {n} landing pages is under key_location"
        ),
        (sent, n) => format!(
            "after each refresh but the first (the baseline), its created, updated and deleted \
             landing pages, at most 10,000 a request per host: {sent} of the sample's {n} would \
             be sent when they change{}",
            match report.outside {
                0 => String::new(),
                o => format!(", {o} are outside key_location"),
            }
        ),
    };
    report
}

/// A setting tried on the sample ([`advice::advise`]), and its pages requested (`--fetch`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct SuggestedReport {
    /// The setting and what it gives.
    #[serde(flatten)]
    pub tried: Suggestion,
    /// Its example pages requested, as a crawler would.
    pub fetched: Vec<FetchReport>,
}

/// One sample landing page, requested as a crawler would.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FetchReport {
    /// The page.
    pub url: String,
    /// The final HTTP status (redirects on the same host are followed), when it answered.
    pub status: Option<u16>,
    /// Why it did not answer (a redirect to another host, a timeout, ...).
    pub error: Option<String>,
    /// The host's robots.txt lets [`CRAWLER`] fetch it (`None`: robots.txt unreadable).
    pub robots_allowed: Option<bool>,
}

/// The scope.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ScopeReport {
    /// The prefixes applied.
    pub applied: Vec<String>,
    /// http(s) URLs in the sample (inside the scope or not).
    pub http_urls: u64,
    /// Those inside the scope.
    pub inside: u64,
    /// `inside / http_urls`.
    pub inside_share: f64,
    /// A prefix that would cover most URLs outside, when the scope misses most of them.
    pub suggested: Option<String>,
    /// The share of the sample's http(s) URLs the suggestion would cover.
    pub suggested_share: Option<f64>,
    /// The suggested scope tried on the sample: what it gives.
    pub tried: Option<Suggestion>,
    /// Where most records' pages are when that is another site than the baseURL's: a fact, not
    /// a suggestion.
    pub elsewhere: Option<String>,
    /// A few URLs outside the scope.
    pub outside_examples: Vec<String>,
}

/// The repository host's robots.txt.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RobotsReport {
    /// Its URL.
    pub url: String,
    /// HTTP status, when it answered.
    pub status: Option<u16>,
    /// `Sitemap:` lines.
    pub sitemaps: Vec<String>,
    /// Sampled landing pages (inside the scope) checked for Googlebot.
    pub checked: u64,
    /// Those disallowed.
    pub disallowed: u64,
    /// A few disallowed ones.
    pub disallowed_examples: Vec<String>,
    /// The line to add to it for cross-submission, when the bridge's files are served from
    /// another host than the landing pages.
    pub cross_submission: Option<String>,
    /// The line is there already.
    pub cross_submission_listed: bool,
    /// Why it could not be read.
    pub error: Option<String>,
}

/// The crawler whose robots.txt group is checked: the landing pages must be open to it.
const CRAWLER: &str = "Googlebot";
/// URLs remembered for suggestions and robots checks.
const KEEP: usize = 2_000;
/// Records of the sample kept to classify under the landing rule (found after they are read).
const KEEP_RECORDS: usize = 10_000;

/// Runs the check. Fails only when the HTTP client cannot be built; everything the upstream
/// does wrong is in the report.
pub async fn check(options: &CheckOptions) -> Result<CheckReport, reqwest::Error> {
    let client = Client::new(options.harvest.clone())?;
    let mut report = CheckReport {
        base_url: options.source.to_string(),
        ..CheckReport::default()
    };

    let started = Instant::now();
    let (base, outcome) = match identify(&client, options).await {
        Ok(found) => found,
        Err(problem) => return Ok(refused(report, problem)),
    };
    let (identify, is_static) = report.take_identify(outcome, started);
    report.judge_identify(is_static, base.as_ref());
    if !report.problems.is_empty() {
        report.bridgeable = false;
        return Ok(report);
    }

    if is_static {
        // Its formats and records are one document, read with the sample below; it has no sets.
        report.formats.error =
            Some("a Static Repository: its oai_dc records are read below".into());
        report.sets.error = Some("an OAI Static Repository has no sets".into());
    } else if let Some(base) = &base {
        list_formats_and_sets(&client, base, &mut report).await;
    }

    let records = sample(&client, options, &mut report).await;
    // What a harvest would find from the same first records, and from the web as it would ask.
    let landing_of = |settings: &crate::platform::LandingSettings| {
        crate::pipeline::landing_of(
            settings,
            &options.source,
            &options.scope,
            &identify,
            &records,
        )
    };
    let mut settings = options.landing.clone();
    let mut landing = landing_of(&settings);
    // The baseURL the web is asked about, and the profiles' `describedby` links name.
    let oai_base = crate::pipeline::base_url(&options.source, &identify.base_url);
    if let (Ok(found), Some(resolvers), Some(base)) = (
        &landing,
        crate::learn::applies(&options.landing, &options.scope),
        oai_base.clone(),
    ) {
        let named = options
            .public_url
            .as_ref()
            .and_then(|u| u.host_str().map(str::to_owned));
        if let Some((learned, evidence)) =
            crate::learn::ask(&client, resolvers, base, named, found, &records).await
        {
            crate::learn::put(&mut settings, learned, evidence);
            landing = landing_of(&settings);
        }
    }
    let landing = match landing {
        Ok(landing) => landing,
        Err(e) => {
            report.problems.push(e.to_string());
            report.bridgeable = false;
            return Ok(report);
        }
    };
    let scope = landing.scope().clone();
    report.scope.applied = scope.prefixes();
    let (landing_pages, outside) = classify_sample(&records, &landing, &mut report);
    let setup = advice::Setup {
        settings: &settings,
        source: &options.source,
        scope: &options.scope,
        identify: &identify,
    };
    let advice = advice::advise(&records, &setup, &landing);
    report.take_advice(advice, &outside, &landing);
    let robots = robots(
        &client,
        &scope,
        &landing_pages,
        options.public_url.as_ref(),
        &mut report,
    )
    .await;
    let allowed = |page: &str| robots.as_ref().and_then(|r| r.allowed(page));
    report.landing.fetched = fetch_pages(&client, &landing_pages, options.fetch, allowed).await;
    report.indexnow = indexnow_report(options.indexnow.as_ref(), &landing_pages);
    report.discovery = discovery_report(options, &landing_pages);
    if let Some(first) = landing_pages.first().filter(|_| options.profiles.signmap) {
        match signposts_of(options, oai_base.as_ref(), &records, &landing, first) {
            Ok(Some(linkset)) => {
                let d = &mut report.discovery;
                let at = d.linkset_example.as_deref().unwrap_or_default();
                // The linkset's own URL is the gateway's: without a public URL there is none
                // to show (a placeholder would come out percent-encoded).
                let relations: Vec<String> = (options.signposting_header.iter())
                    .filter(|r| options.public_url.is_some() || *r != "linkset")
                    .cloned()
                    .collect();
                d.linkset_needs_public_url = relations.len() < options.signposting_header.len();
                d.link_header = Some(linkset.header(&relations, at));
                d.linkset = Some(linkset.to_text());
            }
            Ok(None) => {
                report.discovery.link_error = Some(format!(
                    "the Signmap made of the sample has no entry for {first}"
                ));
            }
            Err(e) => report.discovery.link_error = Some(e),
        }
    }
    if let Some(s) = &mut report.landing.suggested {
        let n = options.fetch.min(advice::EXAMPLES);
        s.fetched = fetch_pages(&client, &s.tried.examples, n, allowed).await;
    }

    report.judge_scope();
    report.judge_landing();
    report.judge_fetched();
    report.judge_sample();
    report.judge_robots();
    report.bridgeable = report.problems.is_empty();
    Ok(report)
}

/// The baseURL the scope comes from, and what `Identify` says (`Err` inside: why it said
/// nothing); `Err` when a local Static Repository file cannot be checked at all.
async fn identify(
    client: &Client,
    options: &CheckOptions,
) -> Result<(Option<Url>, Result<IdentifyOutcome, String>), String> {
    // A local Static Repository file states its Identify inside; its baseURL (the gateway's)
    // is where its landing pages' scope comes from, as in a harvest.
    match &options.source {
        Source::Oai(base) => {
            let call = OaiRequest::new(base, &[("verb", "Identify")]);
            let outcome = client.fetch(&call, None, parse_identify).await;
            let url = call.url();
            let outcome = outcome.map_err(|kind| format!("Identify failed ({url}): {kind}"));
            Ok((Some(base.clone()), outcome))
        }
        Source::File(path) => {
            let read =
                oai_pmh::read_static_file(path, options.harvest.max_body_bytes, Fields::default())
                    .await;
            let identify = match read {
                Ok((identify, _)) => identify,
                Err(e) => return Err(e.located()),
            };
            let stated = Url::parse(&identify.base_url)
                .ok()
                .filter(|u| matches!(u.scheme(), "http" | "https"));
            if stated.is_none() && options.scope.is_empty() {
                return Err(format!(
                    "the Static Repository {} states baseURL {:?}, which is no http(s) URL to derive a scope from; give --scope",
                    path.display(),
                    identify.base_url
                ));
            }
            Ok((stated, Ok(IdentifyOutcome::Static(identify))))
        }
    }
}

impl CheckReport {
    /// Takes what [`advice::advise`] found: the suggestion (tried on the sample) and what is
    /// said as fact; the scope's suggestion, with the share of the sample's URLs `outside` the
    /// scope it covers; a warning for a `ui_url` that `landing` does not make its pages under.
    fn take_advice(&mut self, advice: advice::Advice, outside: &[Url], landing: &Landing) {
        // Pages on another site are the scope's to say.
        self.landing.facts = [&advice.ui_elsewhere, &advice.contents]
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        if let Some(tried) = advice.scope {
            let prefix = tried.value.clone();
            let covered = outside
                .iter()
                .filter(|u| u.as_str().starts_with(&prefix))
                .count();
            let count = |k: &str| self.sample.identifiers.get(k).copied().unwrap_or(0);
            let outside_total = count(Drop::OutOfScope.as_str()) as f64;
            let sc = &mut self.scope;
            if sc.inside_share < 0.5 && !outside.is_empty() {
                let covered_share = covered as f64 / outside.len() as f64;
                sc.suggested_share = Some(covered_share * outside_total / sc.http_urls as f64);
                sc.suggested = Some(prefix);
                sc.tried = Some(tried);
            }
        }
        if let Some(tried) = advice.suggestion {
            let l = &mut self.landing;
            l.suggestion = Some(format!("{} {}", tried.named(), tried.gives()));
            if tried.key == "ui_url" {
                self.warnings.push(format!(
                    "the records' local Handle URLs are under {ui}, not on the baseURL's host: if \
                     that is the DSpace UI, set {} ({}), which {}; the landing pages are now \
                     made under {}",
                    tried.setting,
                    tried.flag,
                    tried.gives_records(),
                    landing.scope(),
                    ui = tried.value,
                ));
            }
            l.suggested = Some(SuggestedReport {
                tried,
                fetched: Vec::new(),
            });
        }
        self.scope.elsewhere = advice.pages_elsewhere;
    }

    /// Records what `Identify` said; returns it (empty when it said nothing) and whether the
    /// source is a Static Repository.
    fn take_identify(
        &mut self,
        outcome: Result<IdentifyOutcome, String>,
        started: Instant,
    ) -> (Identify, bool) {
        let mut is_static = false;
        let mut identify = Identify::default();
        match outcome {
            Ok(IdentifyOutcome::Identify(i)) => {
                identify = i.clone();
                self.identify = Some(IdentifyReport::new(i, started));
            }
            Ok(IdentifyOutcome::Static(i)) => {
                is_static = true;
                identify = i.clone();
                self.identify = Some(IdentifyReport::new(i, started));
                self.warnings.push(
                    "an OAI Static Repository: it is read whole; sets and dates are applied by the bridge".to_owned(),
                );
            }
            Ok(IdentifyOutcome::Errors(errors)) => self.problems.push(format!(
                "Identify answered with OAI errors: {}",
                describe_errors(&errors)
            )),
            Err(problem) => self.problems.push(problem),
        }
        (identify, is_static)
    }

    /// Problems and warnings from what `Identify` states: the protocol version, how deletions
    /// are kept, a baseURL other than the configured one.
    fn judge_identify(&mut self, is_static: bool, base: Option<&Url>) {
        let Some(i) = &self.identify else {
            return;
        };
        if i.protocol_version != "2.0" {
            self.problems.push(format!(
                "protocolVersion is {:?}; the bridge speaks OAI-PMH 2.0",
                i.protocol_version
            ));
        }
        if i.deleted_record != "persistent" {
            self.warnings.push(format!(
                "deletedRecord is {:?}: deletions are found only by full harvests (full_harvest_interval_secs)",
                i.deleted_record
            ));
        }
        // A Static Repository states its gateway's baseURL, not the file's.
        if let (false, Some(base)) = (is_static, base)
            && !i.base_url.is_empty()
            && i.base_url != base.as_str()
        {
            self.warnings.push(format!(
                "Identify states the baseURL {}; the configured one is kept",
                i.base_url
            ));
        }
    }

    /// A problem when no sampled URL is inside the scope, a warning when most are not.
    fn judge_scope(&mut self) {
        let s = &self.scope;
        if self.sample.records > 0 && s.inside == 0 {
            let mut problem = format!(
                "none of the {} http(s) URLs in the sample is inside the scope ({})",
                s.http_urls,
                s.applied.join(" ")
            );
            if let Some(p) = &s.suggested {
                let _ = write!(problem, "; try --scope {p} (scope = [\"{p}\"])");
            } else if let Some(fact) = &s.elsewhere {
                let _ = write!(problem, "; {fact}");
            }
            self.problems.push(problem);
        } else if self.sample.records > 0 && s.inside_share < 0.5 {
            let mut warning = format!(
                "only {:.0}% of the sample's http(s) URLs are inside the scope",
                100.0 * s.inside_share
            );
            if let Some(p) = &s.suggested {
                let _ = write!(warning, "; --scope {p} would cover more");
            }
            self.warnings.push(warning);
        }
    }

    /// A warning when most live records get no landing page, with the suggested fix.
    fn judge_landing(&mut self) {
        let l = &self.landing;
        if l.live_records > 0 && l.share < 0.5 {
            let what = format!(
                "only {} of {} live records of the sample get a landing page under the {} rule",
                l.with_landing_page, l.live_records, l.platform
            );
            match &l.suggestion {
                Some(fix) => self.warnings.push(format!("{what}; {fix}")),
                None if l.facts.is_empty() => self.warnings.push(what),
                None => self
                    .warnings
                    .push(format!("{what}; {}", l.facts.join("; "))),
            }
        }
    }

    /// Warnings for the sample landing pages a crawler could not fetch; a page on a reserved
    /// name was not asked for, and its report says so, not a warning.
    fn judge_fetched(&mut self) {
        let asked: Vec<&FetchReport> = self
            .landing
            .fetched
            .iter()
            .filter(|f| f.error.as_deref() != Some(RESERVED))
            .collect();
        let failed: Vec<String> = asked
            .iter()
            .filter_map(|f| match (f.status, &f.error) {
                (Some(s), _) if (200..300).contains(&s) => None,
                (Some(s), _) => Some(format!("{} answers HTTP {s}", f.url)),
                (None, Some(e)) => Some(format!("{} failed: {e}", f.url)),
                (None, None) => None,
            })
            .collect();
        match failed.len() {
            0 => {}
            n if n == asked.len() && n > 1 => self.warnings.push(format!(
                "none of the {n} sample landing pages could be fetched, so a crawler would index none of them; the first: {}",
                failed[0]
            )),
            _ => {
                for f in failed {
                    self.warnings
                        .push(format!("the sample landing page {f}: a crawler would not index it"));
                }
            }
        }
    }

    /// Warnings for a sample without records, and for records with an empty `<metadata/>`.
    fn judge_sample(&mut self) {
        if self.sample.records == 0 && self.sample.error.is_none() {
            self.warnings
                .push("the repository returned no records (noRecordsMatch)".to_owned());
        }
        if self.sample.empty_metadata > 0 {
            self.warnings.push(format!(
                "{} live records of the sample have an empty <metadata/> (Q-35): they are rejected \
                 as {}, and only an earlier, readable version of them is published",
                self.sample.empty_metadata,
                Drop::EmptyMetadata.as_str()
            ));
        }
    }

    /// A problem when robots.txt disallows every sampled landing page, a warning when it
    /// disallows some or lacks the cross-submission line.
    fn judge_robots(&mut self) {
        let r = &self.robots;
        if r.checked > 0 && r.disallowed == r.checked {
            self.problems.push(format!(
                "{} disallows every sampled landing page for {CRAWLER}: a sitemap of them would be useless",
                r.url
            ));
        } else if r.disallowed > 0 {
            self.warnings.push(format!(
                "{} disallows {} of {} sampled landing pages for {CRAWLER}",
                r.url, r.disallowed, r.checked
            ));
        }
        if let (Some(line), false) = (&r.cross_submission, r.cross_submission_listed) {
            self.warnings.push(format!(
                "the bridge's files are served from another host: add \"{line}\" to {} (cross-submission)",
                r.url
            ));
        }
    }
}

/// `ListMetadataFormats` and the first page of `ListSets`.
async fn list_formats_and_sets(client: &Client, base: &Url, report: &mut CheckReport) {
    let call = OaiRequest::new(base, &[("verb", "ListMetadataFormats")]);
    match client.fetch(&call, None, parse_metadata_formats).await {
        Ok(SmallAnswer::Answer(prefixes)) => {
            report.formats.oai_dc = prefixes.iter().any(|p| p == "oai_dc");
            report.formats.prefixes = prefixes;
            if !report.formats.oai_dc {
                report.warnings.push(
                    "ListMetadataFormats does not list oai_dc, which every repository must offer; the sample below tells whether it works anyway".to_owned(),
                );
            }
        }
        Ok(SmallAnswer::Errors(e)) => report.formats.error = Some(describe_errors(&e)),
        Err(kind) => report.formats.error = Some(kind.to_string()),
    }

    let call = OaiRequest::new(base, &[("verb", "ListSets")]);
    match client.fetch(&call, None, parse_sets).await {
        Ok(SmallAnswer::Answer((sets, more))) => {
            report.sets.sets = sets;
            report.sets.more = more;
        }
        Ok(SmallAnswer::Errors(e)) => report.sets.error = Some(describe_errors(&e)),
        Err(kind) => report.sets.error = Some(kind.to_string()),
    }
}

/// Reads up to `options.pages` pages of `ListRecords`: counts records, and keeps the live ones
/// (up to [`KEEP_RECORDS`]) to classify once the landing rule is known, which the first of
/// them decide under `platform = "auto"`.
async fn sample(client: &Client, options: &CheckOptions, report: &mut CheckReport) -> Vec<Record> {
    // What a harvest of the repository's profiles reads (the Signmap's links are made of
    // more than the identifiers).
    let fields = crate::pipeline::fields_for(&options.profiles, &options.landing, &options.source);
    let request = HarvestRequest {
        source: options.source.clone(),
        sets: Vec::new(),
        from: None,
        until: None,
        fields,
    };
    let started = Instant::now();
    let mut records = Vec::new();
    let s = &mut report.sample;
    let result = oai_pmh::harvest_resumable(client, &request, None, |event| {
        if s.pages == 0 {
            s.first_page_ms = millis(started.elapsed());
        }
        s.pages += 1;
        for record in event.records {
            s.records += 1;
            if record.deleted {
                s.deleted += 1;
            } else if record.unreadable() {
                s.empty_metadata += 1;
            } else if records.len() < KEEP_RECORDS {
                records.push(record);
            }
        }
        if s.pages >= options.pages {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .await;
    if let Err(e) = result {
        // Without the hint to run `check`, which this is.
        let e = e.located();
        report
            .problems
            .push(format!("ListRecords (oai_dc) failed: {e}"));
        report.sample.error = Some(e);
    }
    records
}

/// Classifies the sample's live records under `landing`, as a harvest would: the identifier
/// classes, the scope's coverage, and the landing report. Returns the landing pages seen and
/// the URLs outside the scope (up to [`KEEP`] each).
fn classify_sample(
    records: &[Record],
    landing: &Landing,
    report: &mut CheckReport,
) -> (Vec<String>, Vec<Url>) {
    let detected = landing.detected();
    let l = &mut report.landing;
    l.platform = detected.platform.to_string();
    l.configured = detected.configured;
    l.evidence = detected.evidence.clone();
    l.rule = landing.rule_text();
    let mut pages = Vec::new();
    let mut outside: Vec<Url> = Vec::new();
    let mut classes = Classes::new();
    let s = &mut report.sample;
    for record in records {
        landing.classes(record, &mut classes);
        let mut published = false;
        let mut has_landing = false;
        for class in &classes {
            let name = match class {
                Class::LandingPage(url) => {
                    published = true;
                    has_landing = true;
                    if pages.len() < KEEP {
                        pages.push(url.to_string());
                    }
                    "landing_page"
                }
                Class::ContentFile { url, .. } => {
                    published = true;
                    if l.content_files.len() < 5 {
                        l.content_files.push(url.to_string());
                    }
                    "content_file"
                }
                Class::PersistentId(_) => "persistent_id",
                Class::Dropped(reason) => reason.as_str(),
            };
            *s.identifiers.entry(name.to_owned()).or_default() += 1;
        }
        // The URLs outside the scope, for a suggestion: the values themselves.
        for value in &record.dc_identifiers {
            if outside.len() < KEEP
                && matches!(
                    classify::class(value, landing.scope()),
                    Class::Dropped(Drop::OutOfScope)
                )
                && let Ok(url) = Url::parse(value.trim())
            {
                outside.push(url);
            }
        }
        s.records_without_url += u64::from(!published);
        l.live_records += 1;
        l.with_landing_page += u64::from(has_landing);
    }
    l.share = share(l.with_landing_page, l.live_records);
    l.examples = pages.iter().take(5).cloned().collect();
    let count = |k: &str| report.sample.identifiers.get(k).copied().unwrap_or(0);
    let inside = count("landing_page") + count("content_file");
    let http = inside + count(Drop::OutOfScope.as_str());
    let sc = &mut report.scope;
    sc.inside = inside;
    sc.http_urls = http;
    sc.inside_share = share(inside, http);
    sc.outside_examples = outside.iter().take(5).map(Url::to_string).collect();
    (pages, outside)
}

fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// Requests up to `n` of `pages`, one at a time, as a crawler would: the status after
/// same-host redirects, and whether robots.txt lets [`CRAWLER`] in (`allowed`, from
/// [`robots`]).
/// Why a URL on a reserved name is not asked for.
const RESERVED: &str = "not asked: its host is a reserved name (.example, .invalid, .test) no DNS answers, as a made-up sample's is";

/// Whether `url`'s host is under a name reserved never to resolve (RFC 2606, RFC 6761):
/// `.example`, `.invalid`, `.test` (the bundled sample's `repository.northbridge.example`).
fn names_no_host(url: &str) -> bool {
    Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_ascii_lowercase))
        .is_some_and(|h| {
            let h = h.trim_end_matches('.');
            ["example", "invalid", "test"]
                .iter()
                .any(|tld| h == *tld || h.ends_with(&format!(".{tld}")))
        })
}

async fn fetch_pages(
    client: &Client,
    pages: &[String],
    n: usize,
    allowed: impl Fn(&str) -> Option<bool>,
) -> Vec<FetchReport> {
    let mut fetched = Vec::new();
    for url in pages.iter().take(n) {
        let (status, error) = if names_no_host(url) {
            (None, Some(RESERVED.to_owned()))
        } else {
            match client.get_once(url).await {
                Ok((status, _)) => (Some(status), None),
                Err(kind) => (None, Some(kind.to_string())),
            }
        };
        fetched.push(FetchReport {
            url: url.clone(),
            status,
            error,
            robots_allowed: allowed(url),
        });
    }
    fetched
}

/// A robots.txt read, for judging pages of its host.
struct Robots {
    /// `https://host/`: the pages it judges.
    on_host: String,
    robot: texting_robots::Robot,
}

impl Robots {
    /// Whether [`CRAWLER`] may fetch `page`; `None` for a page of another host.
    fn allowed(&self, page: &str) -> Option<bool> {
        page.starts_with(&self.on_host)
            .then(|| self.robot.allowed(page))
    }
}

/// Reads the robots.txt of the scope's host: sitemaps, landing pages disallowed for
/// [`CRAWLER`], and the cross-submission line the bridge's public URL needs. Returns it, to
/// judge other pages of its host, when it could be read.
async fn robots(
    client: &Client,
    scope: &Scope,
    landing: &[String],
    public_url: Option<&Url>,
    report: &mut CheckReport,
) -> Option<Robots> {
    let host_of = |u: &str| {
        Url::parse(u)
            .ok()
            .map(|u| format!("{}://{}", u.scheme(), u.authority()))
    };
    let origin = landing
        .first()
        .and_then(|u| host_of(u))
        .or_else(|| scope.prefixes().first().and_then(|p| host_of(p)))?;
    let url = format!("{origin}/robots.txt");
    if names_no_host(&url) {
        report.robots.url = url;
        report.robots.error = Some(RESERVED.to_owned());
        return None;
    }
    let r = &mut report.robots;
    r.url = url.clone();
    let body = match client.get_once(&url).await {
        Ok((status, body)) => {
            r.status = Some(status);
            if (200..300).contains(&status) {
                body
            } else if status >= 500 {
                // An unreachable robots.txt (5xx) means everything is disallowed (RFC 9309
                // 2.3.1.4): what a crawler then does.
                b"User-agent: *\nDisallow: /\n".to_vec()
            } else {
                // No robots.txt (4xx) means everything is allowed (RFC 9309 2.3.1.3).
                Vec::new()
            }
        }
        Err(kind) => {
            r.error = Some(kind.to_string());
            return None;
        }
    };
    let mut read = None;
    match texting_robots::Robot::new(CRAWLER, &body) {
        Ok(robot) => {
            r.sitemaps = robot.sitemaps.clone();
            // Only this host's pages are this robots.txt's to judge.
            let robots = Robots {
                on_host: format!("{origin}/"),
                robot,
            };
            for page in landing {
                let Some(ok) = robots.allowed(page) else {
                    continue;
                };
                r.checked += 1;
                if !ok {
                    r.disallowed += 1;
                    if r.disallowed_examples.len() < 5 {
                        r.disallowed_examples.push(page.clone());
                    }
                }
            }
            read = Some(robots);
        }
        Err(e) => r.error = Some(format!("cannot parse: {e}")),
    }
    // Needed wherever the sitemaps' folder does not hold the pages (sitemaps.org's location
    // rule): on another host, and on the same host under a path (`/sitemaps/` behind the
    // site's proxy, the documented sidecar setup).
    if let Some(public) = public_url
        && !scope.is_under(public)
    {
        let index = format!("{public}sitemap.xml");
        r.cross_submission_listed = r.sitemaps.iter().any(|s| s.trim() == index);
        r.cross_submission = Some(format!("Sitemap: {index}"));
    }
    read
}

fn describe_errors(errors: &[OaiError]) -> String {
    errors
        .iter()
        .map(|e| format!("{} ({})", e.code, e.message))
        .collect::<Vec<_>>()
        .join("; ")
}

/// A report that stops at its first problem.
fn refused(mut report: CheckReport, problem: String) -> CheckReport {
    report.problems.push(problem);
    report.bridgeable = false;
    report
}

impl IdentifyReport {
    fn new(i: Identify, started: Instant) -> Self {
        Self {
            repository_name: i.repository_name,
            base_url: i.base_url,
            protocol_version: i.protocol_version,
            granularity: i
                .granularity_unknown
                .unwrap_or_else(|| i.granularity.as_str().to_owned()),
            deleted_record: i.deleted_record,
            earliest_datestamp: i.earliest_datestamp.map(|d| d.to_string()),
            compression: i.compression,
            ms: millis(started.elapsed()),
        }
    }
}

fn millis(d: Duration) -> u64 {
    d.as_millis().try_into().unwrap_or(u64::MAX)
}

impl CheckReport {
    /// The report for people.
    pub fn render(&self) -> String {
        let mut out = String::new();
        line(&mut out, "baseURL", &self.base_url);
        if let Some(i) = &self.identify {
            i.render(&mut out);
        }
        if self.identify.is_none() && !self.problems.is_empty() {
            // Nothing else was asked.
            for p in &self.problems {
                line(&mut out, "problem", p);
            }
            line(&mut out, "verdict", "cannot be bridged (Identify failed)");
            return out;
        }
        self.formats.render(&mut out);
        self.sets.render(&mut out);
        self.sample.render(&mut out);
        if !self.landing.platform.is_empty() {
            self.landing.render(&mut out);
        }
        self.scope.render(&mut out);
        if !self.robots.url.is_empty() {
            self.robots.render(&mut out);
        }
        self.discovery.render(&mut out);
        self.indexnow.render(&mut out);
        for w in &self.warnings {
            line(&mut out, "warning", w);
        }
        for p in &self.problems {
            line(&mut out, "problem", p);
        }
        let verdict = if self.bridgeable {
            "can be bridged as configured"
        } else {
            "cannot be bridged as configured (see the problems above)"
        };
        line(&mut out, "verdict", verdict);
        out
    }
}

/// One line of the report for people: `label` in a column of its own, then `text`.
fn line(out: &mut String, label: &str, text: impl std::fmt::Display) {
    let _ = writeln!(out, "{label:<13}{text}");
}

impl IndexNowReport {
    /// What would be sent, the engine and the key files, or why nothing.
    fn render(&self, out: &mut String) {
        line(out, "IndexNow", &self.says);
        if let Some(endpoint) = &self.endpoint {
            line(out, "", format_args!("to {endpoint} (key set)"));
        }
        for (host, file) in &self.key_files {
            line(
                out,
                "",
                format_args!("{host}: the key file must be at {file}"),
            );
        }
    }
}

impl IdentifyReport {
    /// The repository's name and the rest of what `Identify` says.
    fn render(&self, out: &mut String) {
        line(
            out,
            "repository",
            format_args!(
                "{} (OAI-PMH {})",
                self.repository_name, self.protocol_version
            ),
        );
        let compression = if self.compression.is_empty() {
            "none".to_owned()
        } else {
            self.compression.join(", ")
        };
        line(
            out,
            "Identify",
            format_args!(
                "{} ms; granularity {}; deletedRecord {}; earliest {}; compression {compression}",
                self.ms,
                self.granularity,
                self.deleted_record,
                self.earliest_datestamp.as_deref().unwrap_or("(none)"),
            ),
        );
    }
}

impl FormatsReport {
    /// Whether `oai_dc` is offered, among which prefixes.
    fn render(&self, out: &mut String) {
        match &self.error {
            Some(e) => line(out, "formats", format_args!("unknown: {e}")),
            None => {
                let oai_dc = if self.oai_dc {
                    "oai_dc offered"
                } else {
                    "oai_dc NOT listed"
                };
                line(
                    out,
                    "formats",
                    format_args!("{oai_dc} ({})", self.prefixes.join(", ")),
                );
            }
        }
    }
}

impl SetsReport {
    /// How many sets the first page holds, with a few of them.
    fn render(&self, out: &mut String) {
        if let Some(e) = &self.error {
            line(out, "sets", format_args!("none: {e}"));
            return;
        }
        let more = if self.more {
            " on the first page, more follow"
        } else {
            ""
        };
        let examples = if self.sets.is_empty() {
            String::new()
        } else {
            format!(
                "; e.g. {}",
                self.sets
                    .iter()
                    .take(5)
                    .map(|(spec, name)| format!("{spec} ({name})"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        line(
            out,
            "sets",
            format_args!("{}{more}{examples}", self.sets.len()),
        );
    }
}

impl SampleReport {
    /// What the sample read, and its identifiers by class.
    fn render(&self, out: &mut String) {
        line(
            out,
            "sample",
            format_args!(
                "{} page(s), {} records ({} deleted), first page in {} ms{}",
                self.pages,
                self.records,
                self.deleted,
                self.first_page_ms,
                self.error
                    .as_ref()
                    .map(|e| format!("; stopped: {e}"))
                    .unwrap_or_default()
            ),
        );
        let identifiers = if self.identifiers.is_empty() {
            "none".to_owned()
        } else {
            self.identifiers
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        line(out, "identifiers", identifiers);
        // What each reason not to publish means: the words the status page and export use.
        for reason in self.identifiers.keys().filter_map(|k| Drop::named(k)) {
            line(out, "", format_args!("{}", reason.explained()));
        }
        if self.records_without_url > 0 {
            line(
                out,
                "",
                format_args!(
                    "{} live records have no publishable URL",
                    self.records_without_url
                ),
            );
        }
        if self.empty_metadata > 0 {
            line(
                out,
                "",
                format_args!(
                    "{} live records have an empty <metadata/> ({})",
                    self.empty_metadata,
                    Drop::EmptyMetadata.as_str()
                ),
            );
        }
    }
}

impl LandingReport {
    /// The platform and its rule, what the sample's records get from it, and the sample landing
    /// pages requested.
    fn render(&self, out: &mut String) {
        let how = if self.configured {
            "configured"
        } else {
            "detected"
        };
        line(
            out,
            "platform",
            format_args!("{} ({how}: {})", self.platform, self.evidence),
        );
        line(out, "landing", &self.rule);
        line(
            out,
            "",
            format_args!(
                "{} of {} live records get a landing page ({:.0}%)",
                self.with_landing_page,
                self.live_records,
                100.0 * self.share
            ),
        );
        for e in &self.examples {
            line(out, "", format_args!("landing page: {e}"));
        }
        for e in &self.content_files {
            line(out, "", format_args!("content file: {e}"));
        }
        for f in &self.fetched {
            f.render(out);
        }
        if let Some(s) = &self.suggested {
            let t = &s.tried;
            line(
                out,
                "",
                format_args!(
                    "suggested: {} would give {} of them one ({:.0}%)",
                    t.named(),
                    t.with_landing_page,
                    100.0 * t.share
                ),
            );
            line(out, "", format_args!("tried, as {}", t.why));
            for e in &t.examples {
                line(out, "", format_args!("would publish: {e}"));
            }
            for f in &s.fetched {
                f.render(out);
            }
        }
        for fact in &self.facts {
            line(out, "", fact);
        }
    }
}

impl FetchReport {
    /// How the page answered, and whether robots.txt lets [`CRAWLER`] in.
    fn render(&self, out: &mut String) {
        let answer = match (self.status, &self.error) {
            (Some(s), _) => format!("HTTP {s}"),
            (None, Some(e)) => format!("failed: {e}"),
            (None, None) => "no answer".to_owned(),
        };
        let robots = match self.robots_allowed {
            Some(true) => format!("allowed for {CRAWLER}"),
            Some(false) => format!("DISALLOWED for {CRAWLER}"),
            None => "robots.txt unread".to_owned(),
        };
        line(
            out,
            "fetched",
            format_args!("{}: {answer}; {robots}", self.url),
        );
    }
}

impl ScopeReport {
    /// The scope's coverage, a few URLs outside it, and a better prefix.
    fn render(&self, out: &mut String) {
        line(
            out,
            "scope",
            format_args!(
                "{}: {} of {} http(s) URLs inside ({:.0}%)",
                self.applied.join(" "),
                self.inside,
                self.http_urls,
                100.0 * self.inside_share
            ),
        );
        for e in &self.outside_examples {
            line(out, "", format_args!("outside: {e}"));
        }
        if let (Some(p), Some(share)) = (&self.suggested, self.suggested_share) {
            line(
                out,
                "",
                format_args!(
                    "suggested: --scope {p} (scope = [\"{p}\"]) would cover about {:.0}% more",
                    100.0 * share
                ),
            );
            if let Some(t) = &self.tried {
                line(out, "", format_args!("it {}", t.gives_records()));
            }
        }
        if let Some(fact) = &self.elsewhere {
            line(out, "", fact);
        }
    }
}

impl RobotsReport {
    /// What robots.txt says: its sitemaps, the landing pages it disallows, the cross-submission
    /// line.
    fn render(&self, out: &mut String) {
        let status = match (&self.error, self.status) {
            (Some(e), _) => format!("unreadable: {e}"),
            (None, Some(s)) if !(200..300).contains(&s) => {
                format!("HTTP {s}: none, everything allowed")
            }
            _ => format!(
                "{} Sitemap line(s); {} of {} sampled landing pages disallowed for {CRAWLER}",
                self.sitemaps.len(),
                self.disallowed,
                self.checked
            ),
        };
        line(out, "robots.txt", format_args!("{}: {status}", self.url));
        for s in &self.sitemaps {
            line(out, "", format_args!("Sitemap: {s}"));
        }
        if let Some(cross) = &self.cross_submission {
            let listed = if self.cross_submission_listed {
                "is listed"
            } else {
                "must be added"
            };
            line(
                out,
                "",
                format_args!("cross-submission: \"{cross}\" {listed}"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bundled sample's made-up host, and any other reserved name, is never asked for.
    #[test]
    fn reserved_names_are_not_asked_for() {
        for url in [
            "https://repository.northbridge.example/items/1",
            "http://x.invalid/",
            "https://a.b.test./r",
            "https://example/",
        ] {
            assert!(names_no_host(url), "{url}");
        }
        for url in [
            "https://example.org/x",
            "https://repo.example.edu/",
            "http://127.0.0.1:8080/",
            "https://testing.org/",
        ] {
            assert!(!names_no_host(url), "{url}");
        }
    }

    /// Pages not asked for (a reserved name) are no failure to warn of; pages that answer 404
    /// are.
    #[test]
    fn pages_not_asked_for_are_not_warned_of() {
        let page = |url: &str, status: Option<u16>, error: Option<&str>| FetchReport {
            url: url.to_owned(),
            status,
            error: error.map(str::to_owned),
            robots_allowed: None,
        };
        let mut report = CheckReport::default();
        report.landing.fetched = vec![
            page("https://r.example/1", None, Some(RESERVED)),
            page("https://r.example/2", None, Some(RESERVED)),
        ];
        report.judge_fetched();
        assert!(report.warnings.is_empty(), "{:?}", report.warnings);
        report.landing.fetched = vec![
            page("https://r.org/1", Some(404), None),
            page("https://r.org/2", Some(404), None),
        ];
        report.judge_fetched();
        assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
        assert!(
            report.warnings[0].starts_with("none of the 2 sample landing pages could be fetched")
        );
    }
    use crate::platform::{Detected, Platform};

    /// A report of four live records none of which gets a landing page under Google's rule
    /// over `https://h.example.org/oai/`, their four URLs outside it.
    fn nothing_published() -> (CheckReport, Landing) {
        let base = Url::parse("https://h.example.org/oai/provider").unwrap();
        let landing = Landing::generic(
            Scope::from_base_url(&base).unwrap(),
            Detected::configured(Platform::generic()),
        );
        let mut report = CheckReport {
            identify: Some(IdentifyReport::default()),
            ..CheckReport::default()
        };
        report.sample.records = 4;
        report
            .sample
            .identifiers
            .insert(Drop::OutOfScope.as_str().to_owned(), 4);
        report.scope = ScopeReport {
            applied: landing.scope().prefixes(),
            http_urls: 4,
            ..ScopeReport::default()
        };
        report.landing = LandingReport {
            platform: "generic".to_owned(),
            configured: true,
            live_records: 4,
            ..LandingReport::default()
        };
        (report, landing)
    }

    /// Issue 29: a suggestion is shown with what it gave the sample (the share, three pages,
    /// their status with `--fetch`), in the text and in `--json`.
    #[test]
    fn a_suggestion_shows_what_it_gives_the_sample() {
        let (mut report, landing) = nothing_published();
        let pages: Vec<String> = (1..=3)
            .map(|i| format!("https://h.example.org/items/{i}"))
            .collect();
        let tried = Suggestion {
            key: "scope".to_owned(),
            value: "https://h.example.org/items/".to_owned(),
            setting: "scope = [\"https://h.example.org/items/\"]".to_owned(),
            flag: "--scope https://h.example.org/items/".to_owned(),
            why: "the records' pages on the baseURL's site are under https://h.example.org/items/"
                .to_owned(),
            live_records: 4,
            with_landing_page: 3,
            share: 0.75,
            examples: pages.clone(),
        };
        let outside: Vec<Url> = (1..=4)
            .map(|i| Url::parse(&format!("https://h.example.org/items/{i}")).unwrap())
            .collect();
        let advice = advice::Advice {
            suggestion: Some(tried.clone()),
            scope: Some(tried),
            ..advice::Advice::default()
        };
        report.take_advice(advice, &outside, &landing);
        let suggested = report.landing.suggested.as_mut().unwrap();
        suggested.fetched = vec![FetchReport {
            url: pages[0].clone(),
            status: Some(200),
            error: None,
            robots_allowed: Some(true),
        }];
        report.judge_scope();
        report.judge_landing();

        let text = report.render();
        for expected in [
            "suggested: scope = [\"https://h.example.org/items/\"] (--scope https://h.example.org/items/) would give 3 of them one (75%)\n",
            "would publish: https://h.example.org/items/1\n",
            "would publish: https://h.example.org/items/3\n",
            "fetched      https://h.example.org/items/1: HTTP 200; allowed for Googlebot\n",
            "suggested: --scope https://h.example.org/items/ (scope = [\"https://h.example.org/items/\"]) would cover about 100% more\n",
            "it gives 3 of the first 4 live records a landing page (75%), e.g. https://h.example.org/items/1, ",
        ] {
            assert!(text.contains(expected), "{expected}\n{text}");
        }
        assert!(
            report.problems[0].ends_with("; try --scope https://h.example.org/items/ (scope = [\"https://h.example.org/items/\"])"),
            "{:?}",
            report.problems
        );
        let json = serde_json::to_value(&report).unwrap();
        let s = &json["landing"]["suggested"];
        assert_eq!(s["setting"], "scope = [\"https://h.example.org/items/\"]");
        assert_eq!(s["share"], 0.75);
        assert_eq!(s["examples"].as_array().unwrap().len(), 3);
        assert_eq!(s["fetched"][0]["status"], 200);
        assert_eq!(json["scope"]["tried"]["with_landing_page"], 3);
    }

    /// Issue 29: what is no advice is said as a fact, in the report and in its problems and
    /// warnings, and nothing is suggested.
    #[test]
    fn a_fact_is_said_as_a_fact() {
        let (mut report, landing) = nothing_published();
        let advice = advice::Advice {
            pages_elsewhere: Some(
                "the records' pages are on https://p.example.net/, another site than the \
                 baseURL's (h.example.org): bridge it as its own repository, or set scope \
                 (--scope) if it is yours"
                    .to_owned(),
            ),
            contents: Some(
                "the 4 live records of the sample carry only a URL on another site, \
                 p.example.net (4); no URL on this site"
                    .to_owned(),
            ),
            ..advice::Advice::default()
        };
        report.take_advice(advice, &[], &landing);
        report.judge_scope();
        report.judge_landing();
        assert_eq!(report.landing.suggestion, None);
        assert_eq!(report.scope.suggested, None);
        assert!(
            report.problems[0]
                .contains("; the records' pages are on https://p.example.net/, another site")
                && !report.problems[0].contains("try --scope"),
            "{:?}",
            report.problems
        );
        assert!(
            report.warnings[0].ends_with("; no URL on this site"),
            "{:?}",
            report.warnings
        );
        let text = report.render();
        assert!(!text.contains("suggested:"), "{text}");
        assert!(
            text.contains(
                "             the 4 live records of the sample carry only a URL on another site"
            ),
            "{text}"
        );
    }

    /// Issue 32: `check` says what IndexNow would be sent of the sample's landing pages, where
    /// each host's key file must be (the key hidden), and why nothing would be.
    #[test]
    fn indexnow_says_what_would_be_sent_and_never_the_key() {
        let pages = [
            "https://a.example/items/1",
            "https://a.example/other/2",
            "https://b.example/3",
        ]
        .map(str::to_owned);
        let none = super::indexnow_report(None, &pages);
        assert!(
            !none.configured && none.says.starts_with("nothing is sent"),
            "{none:?}"
        );
        let key = crate::indexnow::Key::new("check-key-1234".to_owned()).unwrap();
        let mut config = crate::indexnow::IndexNowConfig {
            key,
            endpoint: Url::parse(crate::indexnow::DEFAULT_ENDPOINT).unwrap(),
            key_location: None,
        };
        let all = super::indexnow_report(Some(&config), &pages);
        assert_eq!((all.sent, all.outside), (3, 0));
        assert_eq!(
            all.key_files,
            [
                (
                    "a.example".to_owned(),
                    "https://a.example/***.txt".to_owned()
                ),
                (
                    "b.example".to_owned(),
                    "https://b.example/***.txt".to_owned()
                )
            ]
        );
        config.key_location =
            Some(Url::parse("https://a.example/items/check-key-1234.txt").unwrap());
        let under = super::indexnow_report(Some(&config), &pages);
        assert_eq!((under.sent, under.outside), (1, 2));
        assert!(under.says.contains("1 of the sample's 3"), "{}", under.says);
        let mut report = CheckReport {
            indexnow: under,
            ..CheckReport::default()
        };
        report.identify = Some(IdentifyReport::default());
        let text = report.render();
        assert!(text.contains("https://a.example/items/***.txt"), "{text}");
        assert!(!text.contains("check-key-1234"), "{text}");
        assert!(
            !serde_json::to_string(&report)
                .unwrap()
                .contains("check-key-1234")
        );
    }

    /// Issue 32 point 5: `check` says what Signposting and ResourceSync would answer of the
    /// sample's pages, and warns when the pages are on another host than the lists.
    #[test]
    fn discovery_says_what_would_be_answered() {
        let pages: Vec<String> = ["https://repo.example/item/1?a=b", "https://other.example/2"]
            .map(str::to_owned)
            .to_vec();
        let options = |signmap: bool, days: u32| CheckOptions {
            source: oai_pmh::Source::Oai(Url::parse("https://repo.example/oai").unwrap()),
            scope: Vec::new(),
            landing: crate::platform::LandingSettings::default(),
            fetch: 0,
            public_url: Some(Url::parse("https://gateway.example/r/").unwrap()),
            pages: 1,
            harvest: HarvestSettings::default(),
            indexnow: None,
            profiles: crate::profiles::ProfileSettings {
                signmap,
                ..Default::default()
            },
            signposting_header: vec!["cite-as".to_owned(), "linkset".to_owned()],
            changelist_days: days,
        };
        let on = super::discovery_report(&options(true, 30), &pages);
        assert_eq!(
            on.linkset_example.as_deref(),
            Some(
                "https://gateway.example/r/linkset?url=https%3A%2F%2Frepo.example%2Fitem%2F1%3Fa%3Db"
            )
        );
        assert!(
            on.signposting.contains("carries cite-as, linkset"),
            "{}",
            on.signposting
        );
        assert!(
            on.resourcesync
                .contains("https://gateway.example/r/resourcelist.xml")
                && on.resourcesync.contains("kept 30 days"),
            "{}",
            on.resourcesync
        );
        assert_eq!(on.other_hosts, ["repo.example", "other.example"]);
        let off = super::discovery_report(&options(false, 0), &pages);
        assert!(off.signposting.starts_with("none: the Signmap is off"));
        assert!(off.linkset_example.is_none());
        assert_eq!(off.resourcesync, "off (changelist_days = 0)");
        let none = super::discovery_report(&options(true, 30), &[]);
        assert!(
            none.signposting.contains("no landing page"),
            "{}",
            none.signposting
        );
        let mut report = CheckReport {
            discovery: DiscoveryReport {
                link_header: Some("<https://d.example/1%2C2>; rel=\"cite-as\", <https://g.example/l>; rel=\"linkset\"".to_owned()),
                linkset_needs_public_url: true,
                ..on
            },
            ..CheckReport::default()
        };
        report.identify = Some(IdentifyReport::default());
        let text = report.render();
        assert!(
            text.contains(
                "Link: <https://d.example/1%2C2>; rel=\"cite-as\"\n                   <https://g.example/l>; rel=\"linkset\"\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("Signposting  each landing page's linkset"),
            "{text}"
        );
        assert!(text.contains("not the lists' host"), "{text}");
        assert!(text.contains("once public_url says where it is"), "{text}");
    }
}
