//! `oai-bridge check`: what a repository says about itself and why URLs would be dropped, for an
//! operator deciding how to bridge it. Reads `Identify`, `ListMetadataFormats`, the first page of
//! `ListSets`, a few pages of `ListRecords`, and the repository host's robots.txt; publishes
//! nothing and writes nothing.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use serde::Serialize;
use url::Url;

use crate::classify::{self, Drop, Identifier};
use crate::oai::parse::{self, SmallAnswer};
use crate::oai::{self, Client, HarvestRequest, HarvestSettings, OaiRequest, Source};
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
    /// The scope applied and what a better one would be.
    pub scope: ScopeReport,
    /// The repository host's robots.txt.
    pub robots: RobotsReport,
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
    /// Live records sent with an empty `<metadata/>`: rejected as `empty_metadata`.
    pub empty_metadata: u64,
    /// Why the sample stopped short, if it did.
    pub error: Option<String>,
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

/// Runs the check. Fails only when the HTTP client cannot be built; everything the upstream
/// does wrong is in the report.
pub async fn check(options: &CheckOptions) -> Result<CheckReport, reqwest::Error> {
    let client = Client::new(options.harvest.clone())?;
    let mut report = CheckReport {
        base_url: options.source.to_string(),
        ..CheckReport::default()
    };

    let started = Instant::now();
    // A local Static Repository file states its Identify inside; its baseURL (the gateway's)
    // is where its landing pages' scope comes from, as in a harvest.
    let (base, outcome) = match &options.source {
        Source::Oai(base) => {
            let call = OaiRequest::new(base, &[("verb", "Identify")]);
            let outcome = client.fetch(&call, None, parse::parse_identify).await;
            let url = call.url();
            let outcome = outcome.map_err(|kind| format!("Identify failed ({url}): {kind}"));
            (Some(base.clone()), outcome)
        }
        Source::File(path) => {
            let read = oai::harvest::read_static_file(
                path,
                options.harvest.max_body_bytes,
                parse::Fields::default(),
            )
            .await;
            let identify = match read {
                Ok((identify, _)) => identify,
                Err(e) => return Ok(refused(report, e.to_string())),
            };
            let stated = Url::parse(&identify.base_url)
                .ok()
                .filter(|u| matches!(u.scheme(), "http" | "https"));
            if stated.is_none() && options.scope.is_empty() {
                let problem = format!(
                    "the Static Repository {} states baseURL {:?}, which is no http(s) URL to derive a scope from; give --scope",
                    path.display(),
                    identify.base_url
                );
                return Ok(refused(report, problem));
            }
            (stated, Ok(parse::IdentifyOutcome::Static(identify)))
        }
    };
    let mut is_static = false;
    match outcome {
        Ok(parse::IdentifyOutcome::Identify(i)) => {
            report.identify = Some(IdentifyReport::new(i, started));
        }
        Ok(parse::IdentifyOutcome::Static(i)) => {
            is_static = true;
            report.identify = Some(IdentifyReport::new(i, started));
            report.warnings.push(
                "an OAI Static Repository: it is read whole; sets and dates are applied by the bridge".to_owned(),
            );
        }
        Ok(parse::IdentifyOutcome::Errors(errors)) => report.problems.push(format!(
            "Identify answered with OAI errors: {}",
            describe_errors(&errors)
        )),
        Err(problem) => report.problems.push(problem),
    }
    if let Some(i) = &report.identify {
        if i.protocol_version != "2.0" {
            report.problems.push(format!(
                "protocolVersion is {:?}; the bridge speaks OAI-PMH 2.0",
                i.protocol_version
            ));
        }
        if i.deleted_record != "persistent" {
            report.warnings.push(format!(
                "deletedRecord is {:?}: deletions are found only by full harvests (full_harvest_interval_secs)",
                i.deleted_record
            ));
        }
        // A Static Repository states its gateway's baseURL, not the file's.
        if let (false, Some(base)) = (is_static, &base)
            && !i.base_url.is_empty()
            && i.base_url != base.as_str()
        {
            report.warnings.push(format!(
                "Identify states the baseURL {}; the configured one is kept",
                i.base_url
            ));
        }
    }
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

    let scope = if options.scope.is_empty() {
        base.as_ref().and_then(Scope::from_base_url)
    } else {
        Scope::from_prefixes(&options.scope)
    };
    let Some(scope) = scope else {
        report
            .problems
            .push("no scope can be derived from the baseURL; give --scope".to_owned());
        return Ok(report);
    };
    report.scope.applied = scope.prefixes();
    let sample = sample(&client, &options.source, &scope, options.pages, &mut report).await;
    robots(
        &client,
        &scope,
        &sample,
        options.public_url.as_ref(),
        &mut report,
    )
    .await;

    let s = &report.scope;
    if report.sample.records > 0 && s.inside == 0 {
        let mut problem = format!(
            "none of the {} http(s) URLs in the sample is inside the scope ({})",
            s.http_urls,
            s.applied.join(" ")
        );
        if let Some(p) = &s.suggested {
            let _ = write!(problem, "; try --scope {p} (scope = [\"{p}\"])");
        }
        report.problems.push(problem);
    } else if report.sample.records > 0 && s.inside_share < 0.5 {
        let mut warning = format!(
            "only {:.0}% of the sample's http(s) URLs are inside the scope",
            100.0 * s.inside_share
        );
        if let Some(p) = &s.suggested {
            let _ = write!(warning, "; --scope {p} would cover more");
        }
        report.warnings.push(warning);
    }
    if report.sample.records == 0 && report.sample.error.is_none() {
        report
            .warnings
            .push("the repository returned no records (noRecordsMatch)".to_owned());
    }
    if report.sample.empty_metadata > 0 {
        report.warnings.push(format!(
            "{} live records of the sample have an empty <metadata/> (Q-35): they are rejected \
             as {}, and only an earlier, readable version of them is published",
            report.sample.empty_metadata,
            Drop::EmptyMetadata.as_str()
        ));
    }
    let r = &report.robots;
    if r.checked > 0 && r.disallowed == r.checked {
        report.problems.push(format!(
            "{} disallows every sampled landing page for {CRAWLER}: a sitemap of them would be useless",
            r.url
        ));
    } else if r.disallowed > 0 {
        report.warnings.push(format!(
            "{} disallows {} of {} sampled landing pages for {CRAWLER}",
            r.url, r.disallowed, r.checked
        ));
    }
    if let (Some(line), false) = (&r.cross_submission, r.cross_submission_listed) {
        report.warnings.push(format!(
            "the bridge's files are served from another host: add \"{line}\" to {} (cross-submission)",
            r.url
        ));
    }
    report.bridgeable = report.problems.is_empty();
    Ok(report)
}

/// `ListMetadataFormats` and the first page of `ListSets`.
async fn list_formats_and_sets(client: &Client, base: &Url, report: &mut CheckReport) {
    let call = OaiRequest::new(base, &[("verb", "ListMetadataFormats")]);
    match client
        .fetch(&call, None, parse::parse_metadata_formats)
        .await
    {
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
    match client.fetch(&call, None, parse::parse_sets).await {
        Ok(SmallAnswer::Answer((sets, more))) => {
            report.sets.sets = sets;
            report.sets.more = more;
        }
        Ok(SmallAnswer::Errors(e)) => report.sets.error = Some(describe_errors(&e)),
        Err(kind) => report.sets.error = Some(kind.to_string()),
    }
}

/// Reads up to `pages` pages of `ListRecords` and classifies every `dc:identifier`; returns
/// the in-scope landing pages seen (up to [`KEEP`]).
async fn sample(
    client: &Client,
    source: &Source,
    scope: &Scope,
    pages: u64,
    report: &mut CheckReport,
) -> Vec<String> {
    let request = HarvestRequest {
        source: source.clone(),
        sets: Vec::new(),
        from: None,
        until: None,
        fields: parse::Fields::default(),
    };
    let started = Instant::now();
    let mut landing = Vec::new();
    let mut outside: Vec<Url> = Vec::new();
    let s = &mut report.sample;
    let result = oai::harvest_resumable(client, &request, None, |event| {
        if s.pages == 0 {
            s.first_page_ms = millis(started.elapsed());
        }
        s.pages += 1;
        for record in &event.records {
            s.records += 1;
            if record.deleted {
                s.deleted += 1;
                continue;
            }
            if record.unreadable() {
                s.empty_metadata += 1;
                continue;
            }
            let mut published = false;
            for value in &record.dc_identifiers {
                let class = match classify::classify(value, scope) {
                    Identifier::LandingPage(url) => {
                        published = true;
                        if landing.len() < KEEP {
                            landing.push(url);
                        }
                        "landing_page"
                    }
                    Identifier::ContentFile { .. } => {
                        published = true;
                        "content_file"
                    }
                    Identifier::PersistentId(_) => "persistent_id",
                    Identifier::Dropped(Drop::OutOfScope) => {
                        if outside.len() < KEEP
                            && let Ok(url) = Url::parse(value.trim())
                        {
                            outside.push(url);
                        }
                        Drop::OutOfScope.as_str()
                    }
                    Identifier::Dropped(reason) => reason.as_str(),
                };
                *s.identifiers.entry(class.to_owned()).or_default() += 1;
            }
            s.records_without_url += u64::from(!published);
        }
        if s.pages >= pages {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .await;
    if let Err(e) = result {
        report.sample.error = Some(e.to_string());
        report
            .problems
            .push(format!("ListRecords (oai_dc) failed: {e}"));
    }
    let count = |k: &str| report.sample.identifiers.get(k).copied().unwrap_or(0);
    let inside = count("landing_page") + count("content_file");
    let http = inside + count(Drop::OutOfScope.as_str());
    let sc = &mut report.scope;
    sc.inside = inside;
    sc.http_urls = http;
    sc.inside_share = if http == 0 {
        0.0
    } else {
        inside as f64 / http as f64
    };
    sc.outside_examples = outside.iter().take(5).map(Url::to_string).collect();
    if sc.inside_share < 0.5
        && let Some((prefix, covered)) = suggest_scope(&outside)
    {
        // The share of all http(s) URLs the prefix covers, from the sampled outside URLs.
        let covered_share = covered as f64 / outside.len() as f64;
        let outside_total = count(Drop::OutOfScope.as_str()) as f64;
        sc.suggested_share = Some((covered_share * outside_total) / http as f64);
        sc.suggested = Some(prefix);
    }
    landing
}

/// The prefix (scheme, host, port and first path segment) that covers most of `outside`, and how
/// many it covers; `None` when none covers a third of them.
fn suggest_scope(outside: &[Url]) -> Option<(String, usize)> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for url in outside {
        let Some(host) = url.host_str() else {
            continue;
        };
        let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
        let segment = url
            .path_segments()
            .and_then(|mut s| s.next())
            .filter(|s| !s.is_empty());
        let prefix = match segment {
            // A first segment that is the whole path (a file at the root) is no directory.
            Some(seg) if url.path().len() > seg.len() + 1 => {
                format!("{}://{host}{port}/{seg}/", url.scheme())
            }
            _ => format!("{}://{host}{port}/", url.scheme()),
        };
        *counts.entry(prefix).or_default() += 1;
    }
    let (prefix, n) = counts
        .into_iter()
        .max_by_key(|(p, n)| (*n, usize::MAX - p.len()))?;
    (n * 3 >= outside.len()).then_some((prefix, n))
}

/// Reads the robots.txt of the scope's host: sitemaps, landing pages disallowed for
/// [`CRAWLER`], and the cross-submission line the bridge's public URL needs.
async fn robots(
    client: &Client,
    scope: &Scope,
    landing: &[String],
    public_url: Option<&Url>,
    report: &mut CheckReport,
) {
    let host_of = |u: &str| {
        Url::parse(u)
            .ok()
            .map(|u| format!("{}://{}", u.scheme(), u.authority()))
    };
    let Some(origin) = landing
        .first()
        .and_then(|u| host_of(u))
        .or_else(|| scope.prefixes().first().and_then(|p| host_of(p)))
    else {
        return;
    };
    let url = format!("{origin}/robots.txt");
    let r = &mut report.robots;
    r.url = url.clone();
    let body = match client.get_once(&url).await {
        Ok((status, body)) => {
            r.status = Some(status);
            if (200..300).contains(&status) {
                body
            } else {
                // No robots.txt (4xx) means everything is allowed (RFC 9309 2.3.1.3).
                Vec::new()
            }
        }
        Err(kind) => {
            r.error = Some(kind.to_string());
            return;
        }
    };
    match texting_robots::Robot::new(CRAWLER, &body) {
        Ok(robot) => {
            r.sitemaps = robot.sitemaps.clone();
            for page in landing.iter().filter(|p| p.starts_with(&origin)) {
                r.checked += 1;
                if !robot.allowed(page) {
                    r.disallowed += 1;
                    if r.disallowed_examples.len() < 5 {
                        r.disallowed_examples.push(page.clone());
                    }
                }
            }
        }
        Err(e) => r.error = Some(format!("cannot parse: {e}")),
    }
    if let Some(public) = public_url
        && host_of(public.as_str()).as_deref() != Some(origin.as_str())
    {
        let index = format!("{public}sitemap.xml");
        r.cross_submission_listed = r.sitemaps.iter().any(|s| s.trim() == index);
        r.cross_submission = Some(format!("Sitemap: {index}"));
    }
}

fn describe_errors(errors: &[parse::OaiError]) -> String {
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
    fn new(i: parse::Identify, started: Instant) -> Self {
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
        let mut line = |label: &str, text: String| {
            let _ = writeln!(out, "{label:<13}{text}");
        };
        line("baseURL", self.base_url.clone());
        if let Some(i) = &self.identify {
            line(
                "repository",
                format!("{} (OAI-PMH {})", i.repository_name, i.protocol_version),
            );
            line(
                "Identify",
                format!(
                    "{} ms; granularity {}; deletedRecord {}; earliest {}; compression {}",
                    i.ms,
                    i.granularity,
                    i.deleted_record,
                    i.earliest_datestamp.as_deref().unwrap_or("(none)"),
                    if i.compression.is_empty() {
                        "none".to_owned()
                    } else {
                        i.compression.join(", ")
                    }
                ),
            );
        }
        if self.identify.is_none() && !self.problems.is_empty() {
            // Nothing else was asked.
            for p in &self.problems {
                line("problem", p.clone());
            }
            line("verdict", "cannot be bridged (Identify failed)".to_owned());
            return out;
        }
        let f = &self.formats;
        line(
            "formats",
            match &f.error {
                Some(e) => format!("unknown: {e}"),
                None => format!(
                    "{} ({})",
                    if f.oai_dc {
                        "oai_dc offered"
                    } else {
                        "oai_dc NOT listed"
                    },
                    f.prefixes.join(", ")
                ),
            },
        );
        let s = &self.sets;
        line(
            "sets",
            match &s.error {
                Some(e) => format!("none: {e}"),
                None => format!(
                    "{}{}{}",
                    s.sets.len(),
                    if s.more {
                        " on the first page, more follow"
                    } else {
                        ""
                    },
                    if s.sets.is_empty() {
                        String::new()
                    } else {
                        format!(
                            "; e.g. {}",
                            s.sets
                                .iter()
                                .take(5)
                                .map(|(spec, name)| format!("{spec} ({name})"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    }
                ),
            },
        );
        let m = &self.sample;
        line(
            "sample",
            format!(
                "{} page(s), {} records ({} deleted), first page in {} ms{}",
                m.pages,
                m.records,
                m.deleted,
                m.first_page_ms,
                m.error
                    .as_ref()
                    .map(|e| format!("; stopped: {e}"))
                    .unwrap_or_default()
            ),
        );
        line(
            "identifiers",
            if m.identifiers.is_empty() {
                "none".to_owned()
            } else {
                m.identifiers
                    .iter()
                    .map(|(k, n)| format!("{k} {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        );
        if m.records_without_url > 0 {
            line(
                "",
                format!(
                    "{} live records have no publishable URL",
                    m.records_without_url
                ),
            );
        }
        if m.empty_metadata > 0 {
            line(
                "",
                format!(
                    "{} live records have an empty <metadata/> ({})",
                    m.empty_metadata,
                    Drop::EmptyMetadata.as_str()
                ),
            );
        }
        let sc = &self.scope;
        line(
            "scope",
            format!(
                "{}: {} of {} http(s) URLs inside ({:.0}%)",
                sc.applied.join(" "),
                sc.inside,
                sc.http_urls,
                100.0 * sc.inside_share
            ),
        );
        for e in &sc.outside_examples {
            line("", format!("outside: {e}"));
        }
        if let (Some(p), Some(share)) = (&sc.suggested, sc.suggested_share) {
            line(
                "",
                format!(
                    "suggested: --scope {p} (scope = [\"{p}\"]) would cover about {:.0}% more",
                    100.0 * share
                ),
            );
        }
        let r = &self.robots;
        if !r.url.is_empty() {
            let status = match (&r.error, r.status) {
                (Some(e), _) => format!("unreadable: {e}"),
                (None, Some(s)) if !(200..300).contains(&s) => {
                    format!("HTTP {s}: none, everything allowed")
                }
                _ => format!(
                    "{} Sitemap line(s); {} of {} sampled landing pages disallowed for {CRAWLER}",
                    r.sitemaps.len(),
                    r.disallowed,
                    r.checked
                ),
            };
            line("robots.txt", format!("{}: {status}", r.url));
            for s in &r.sitemaps {
                line("", format!("Sitemap: {s}"));
            }
            if let Some(cross) = &r.cross_submission {
                line(
                    "",
                    format!(
                        "cross-submission: \"{cross}\" {}",
                        if r.cross_submission_listed {
                            "is listed"
                        } else {
                            "must be added"
                        }
                    ),
                );
            }
        }
        for w in &self.warnings {
            line("warning", w.clone());
        }
        for p in &self.problems {
            line("problem", p.clone());
        }
        line(
            "verdict",
            if self.bridgeable {
                "can be bridged as configured".to_owned()
            } else {
                "cannot be bridged as configured (see the problems above)".to_owned()
            },
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_suggested_scope_covers_most_urls_outside() {
        let urls: Vec<Url> = [
            "https://h/handle/1/2",
            "https://h/handle/1/3",
            "https://h/handle/9/9",
            "https://h/bitstream/1/a.pdf",
            "https://other/x",
        ]
        .iter()
        .map(|u| Url::parse(u).unwrap())
        .collect();
        assert_eq!(
            suggest_scope(&urls),
            Some(("https://h/handle/".to_owned(), 3))
        );
        // A file at the root suggests the host itself.
        let root = [Url::parse("https://h/record.html").unwrap()];
        assert_eq!(suggest_scope(&root), Some(("https://h/".to_owned(), 1)));
        assert_eq!(suggest_scope(&[]), None);
    }
}
