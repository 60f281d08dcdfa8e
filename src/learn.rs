//! Rules learned from the web, where the records alone cannot tell, as a person would learn
//! them: ask the Handle or DOI resolver where a few sample records live, and keep what their
//! answers agree on.
//!
//! Two questions are asked, under `platform = "auto"` with no `ui_url`, `landing_template` or
//! `scope` configured:
//! - a repository whose records carry Handles only as `http://hdl.handle.net/P/S` (a DSpace whose
//!   UI is under `/xmlui/`, `/jspui/` or on another host of its site): where does the resolver
//!   send a Handle? The page's path before `handle/P/S` is the UI (`ui_url`);
//! - a repository whose records give no landing page but carry DOIs (InvenioRDM, a publisher's
//!   OAI identifiers holding the DOI): where does the DOI resolver send each? A template over
//!   the record's OAI identifier, DOI or DOI suffix that gives every sample's page is kept
//!   (`landing_template`).
//!
//! Then a few of the pages the rule would publish are asked for (one GET each, redirects not
//! followed): a DSpace whose Handle pages answer 404 at the root is tried under `/xmlui/`,
//! `/jspui/` and `/dspace/`; pages that answer 404 under any other rule are said.
//!
//! What was learned (or that nothing was) is kept in the repository's store
//! ([`crate::store::LearnedRule`]), so a refresh asks nothing again until the settings, the
//! source or the resolvers change, or [`KEEP_SECS`] have passed, or the pages a refresh adds
//! under the remembered rule answer 404 ([`gone`]: the engine then learns again and renders
//! every record); an export without a store asks on every run.
//!
//! What is learned must be on the baseURL's site ([`crate::platform::same_site`]): a publisher's
//! DOI in a repository's record leads to the publisher's page, which is never the repository's,
//! and a resolver's own URL is never a landing page. At most [`SAMPLES`] records are looked up,
//! each through at most [`HOPS`] redirects, one request at a time with a timeout: a few dozen
//! requests at most. `[harvest] learn_from_web = false` switches it off for a repository, and
//! `OAI_BRIDGE_LEARN=off` for all (a gateway that must make no request besides the OAI-PMH
//! ones); `OAI_BRIDGE_HANDLE_RESOLVER` and
//! `OAI_BRIDGE_DOI_RESOLVER` name other resolvers (a mirror; the tests' own): see
//! [`crate::platform::Resolvers`].

use std::ops::ControlFlow;
use std::time::Duration;

use oai_pmh::{Client, Record};
use url::Url;

use crate::classify::{self, Class, Pid};
use crate::pipeline::Job;
use crate::platform::{Classes, LandingSettings, Resolvers, Robots, Setting, Template, same_site};
use crate::store::{LearnedRule, RobotsCopy, State, Store};

/// Records looked up at most, per question.
pub(crate) const SAMPLES: usize = 3;
/// How long what was learned is kept before it is asked again: 30 days.
pub(crate) const KEEP_SECS: i64 = 30 * 24 * 3600;
/// Redirects followed at most from a resolver.
pub(crate) const HOPS: usize = 5;
/// How long one request may take.
const TIMEOUT: Duration = Duration::from_secs(10);
/// How long connecting may take (a resolver out of reach is given up on quickly).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// What was learned, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Learned {
    /// The UI that serves the records' Handles.
    Ui(Url),
    /// A template that gives each sample's page.
    Template(Template),
    /// Nothing to change; what was found is still said (pages that answer 404).
    Nothing,
}

/// What [`prepare`] did.
#[derive(Debug)]
pub(crate) enum Prepared {
    /// Nothing: learning is off, or settings leave nothing to learn.
    Untouched,
    /// Applied what the store remembered (checked again by [`gone`] as records change).
    Remembered(LearnedRule),
    /// Asked the web now: to keep in the store once a publish made of it is in place.
    Learned(LearnedRule),
}

/// Before a harvest: when the job is `auto` with nothing configured that learning would
/// replace, and learning is on (`job.landing.web`), decides from what the store's `state`
/// remembers, or else reads the upstream's first page and, if the rule it gives needs the web,
/// learns. Sets `ui_url` or `landing_template` on the job, the sites its pages were seen on,
/// and says what was found in `job.landing.learned`.
pub(crate) async fn prepare(client: &Client, job: &mut Job, state: Option<&State>) -> Prepared {
    let settings = &job.landing;
    let Some(resolvers) = applies(settings, &job.scope) else {
        return Prepared::Untouched;
    };
    let key = format!(
        "{} {} handle={} doi={}",
        job.request.source,
        settings.key(),
        resolvers.handle,
        resolvers.doi
    );
    let now = oai_pmh::unix_secs(std::time::SystemTime::now());
    if let Some(remembered) = state
        .and_then(|state| state.learned.clone())
        .filter(|l| l.key == key && now - l.at < KEEP_SECS)
    {
        apply(job, &remembered);
        return Prepared::Remembered(remembered);
    }
    let Some((identify, records)) = sample(client, job).await else {
        return Prepared::Untouched;
    };
    let Ok(landing) = crate::pipeline::landing_for(job, &identify, &records) else {
        return Prepared::Untouched;
    };
    let Some(base) = (match &job.request.source {
        oai_pmh::Source::Oai(base) => Some(base.clone()),
        oai_pmh::Source::File(_) => Url::parse(&identify.base_url).ok(),
    }) else {
        return Prepared::Untouched;
    };
    let named = job.public_url.host_str().map(str::to_owned);
    let Some((learned, evidence)) =
        ask(client, resolvers, base.clone(), named, &landing, &records).await
    else {
        return Prepared::Untouched;
    };
    let mut rule = LearnedRule {
        key,
        ui_url: match &learned {
            Learned::Ui(ui) => Some(ui.to_string()),
            _ => None,
        },
        template: match &learned {
            Learned::Template(t) => Some(t.as_str().to_owned()),
            _ => None,
        },
        evidence,
        at: now,
        sites: Vec::new(),
    };
    apply(job, &rule);
    // Where the rule's pages are, besides the baseURL's site: their robots.txt is read too.
    if let Ok(landing) = crate::pipeline::landing_for(job, &identify, &records) {
        let live: Vec<&Record> = records.iter().filter(|r| !r.deleted).collect();
        for page in pages_of(&landing, &live) {
            let Ok(page) = Url::parse(&page) else {
                continue;
            };
            let site = origin_of(&page);
            if site != origin_of(&base) && !rule.sites.contains(&site) {
                rule.sites.push(site);
            }
        }
        apply(job, &rule);
    }
    Prepared::Learned(rule)
}

/// The resolvers to ask when `settings` leave something to learn: `auto`, with no `ui_url`,
/// `landing_template` or `scope` configured (`scope`), and learning on.
pub(crate) fn applies(settings: &LandingSettings, scope: &[Url]) -> Option<Resolvers> {
    let configured = settings.platform != Setting::Auto
        || settings.template.is_some()
        || settings.ui_url.is_some()
        || !scope.is_empty();
    if configured {
        return None;
    }
    settings.web.clone()
}

/// What the web says of `records` under `landing` (the rule the records alone give), asking
/// `resolvers` and the pages; what is learned must be on `base`'s site or `named`'s.
pub(crate) async fn ask(
    client: &Client,
    resolvers: Resolvers,
    base: Url,
    named: Option<String>,
    landing: &crate::platform::Landing,
    records: &[Record],
) -> Option<(Learned, String)> {
    let http = http_client(client, reqwest::redirect::Policy::none())?;
    let web = Web {
        http,
        resolvers,
        base,
        named,
    };
    let (learned, evidence) = web.learn(landing, records).await;
    tracing::info!(learned = ?learned, evidence = %evidence, "what the web says of the landing pages");
    Some((learned, evidence))
}

/// Puts what was learned on `settings`.
pub(crate) fn put(settings: &mut LandingSettings, learned: Learned, evidence: String) {
    match learned {
        Learned::Ui(ui) => settings.ui_url = Some(ui),
        Learned::Template(t) => settings.template = Some(t),
        Learned::Nothing => {}
    }
    if !evidence.is_empty() {
        settings.learned = Some(evidence);
    }
}

/// `url`'s scheme, host and port: `https://host:8080`.
fn origin_of(url: &Url) -> String {
    url[..url::Position::BeforePath].to_owned()
}

/// The client of learning's requests: the harvest's user agent, its own timeouts (or the
/// harvest's, when shorter), `redirect`.
fn http_client(client: &Client, redirect: reqwest::redirect::Policy) -> Option<reqwest::Client> {
    let settings = client.settings();
    reqwest::Client::builder()
        .user_agent(settings.user_agent.clone())
        .redirect(redirect)
        .timeout(TIMEOUT.min(settings.request_timeout))
        .connect_timeout(CONNECT_TIMEOUT.min(settings.connect_timeout))
        .build()
        .ok()
}

/// Puts what `rule` learned on the job.
fn apply(job: &mut Job, rule: &LearnedRule) {
    if let Some(ui) = rule.ui_url.as_deref().and_then(|u| Url::parse(u).ok()) {
        job.landing.ui_url = Some(ui);
    }
    if let Some(t) = rule
        .template
        .as_deref()
        .and_then(|t| Template::parse(t).ok())
    {
        job.landing.template = Some(t);
    }
    if !rule.evidence.is_empty() {
        job.landing.learned = Some(rule.evidence.clone());
    }
    job.landing.sites = rule
        .sites
        .iter()
        .filter_map(|s| Url::parse(s).ok())
        .collect();
}

/// Keeps `rule` in `store`'s state, for the next run; a failure only loses the memory (the next
/// run asks again), so it is logged, not raised.
pub(crate) fn remember(store: &mut Store, rule: LearnedRule) {
    keep(store, Some(rule));
}

/// Forgets what `store` remembers of the web: the next [`prepare`] asks again.
pub(crate) fn forget(store: &mut Store) {
    keep(store, None);
}

fn keep(store: &mut Store, rule: Option<LearnedRule>) {
    let saved = store.state().and_then(|mut state| {
        state.learned = rule;
        store.save_state(&state)
    });
    if let Err(e) = saved {
        tracing::warn!(error = %e, "what was learned of the landing pages could not be kept");
    }
}

/// Whether the pages a remembered `rule` gives have started to answer 404: asks for up to
/// [`SAMPLES`] of `added` (the URLs a refresh adds to the sitemap) that the rule made (under
/// its UI or its template's fixed start), and says what was found when every one that
/// answers says 404 or 410. Nothing is asked when the rule learned nothing or the refresh
/// added no such page: a refresh that changes nothing asks nothing.
pub(crate) async fn gone<'u>(
    client: &Client,
    rule: &LearnedRule,
    added: impl Iterator<Item = &'u str>,
) -> Option<String> {
    let prefix = match (&rule.ui_url, &rule.template) {
        (Some(ui), _) => format!("{ui}handle/"),
        (None, Some(t)) => t.split('{').next().unwrap_or_default().to_owned(),
        (None, None) => return None,
    };
    let pages: Vec<String> = added
        .filter(|u| u.starts_with(&prefix))
        .take(SAMPLES)
        .map(str::to_owned)
        .collect();
    if pages.is_empty() {
        return None;
    }
    let http = http_client(client, reqwest::redirect::Policy::none())?;
    let missing = not_found(&http, &pages).await?;
    Some(format!(
        "{missing} of the pages this refresh added under the rule learned before answer 404 (e.g. {})",
        pages[0]
    ))
}

/// Identify and the upstream's first records (its first page, or more up to
/// [`crate::platform::SAMPLE`]).
async fn sample(client: &Client, job: &Job) -> Option<(oai_pmh::Identify, Vec<Record>)> {
    let mut identify = None;
    let mut records = Vec::new();
    let _ = oai_pmh::harvest_resumable(client, &job.request, None, |event| {
        identify = Some(event.identify.clone());
        records.extend(event.records);
        if records.len() >= crate::platform::SAMPLE {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .await;
    Some((identify?, records))
}

/// The requests learning makes.
pub(crate) struct Web {
    pub(crate) http: reqwest::Client,
    pub(crate) resolvers: Resolvers,
    /// The baseURL: what is learned must be on its site,
    pub(crate) base: Url,
    /// or on the host the operator named for the sitemaps (`public_url`): a sidecar that
    /// harvests its platform at `127.0.0.1` publishes for the site's public host.
    pub(crate) named: Option<String>,
}

impl Web {
    /// What the web says of `records` under `landing`, the rule the records alone give, with the
    /// evidence in words; `None` when there is nothing to ask or nothing agreed.
    pub(crate) async fn learn(
        &self,
        landing: &crate::platform::Landing,
        records: &[Record],
    ) -> (Learned, String) {
        let live: Vec<&Record> = records
            .iter()
            .filter(|r| !r.deleted && !r.unreadable())
            .take(crate::platform::SAMPLE)
            .collect();
        let is_dspace = landing.detected().platform.as_str() == "dspace";
        if is_dspace && crate::platform::dspace_ui_in(records).is_none() {
            if let Some(found) = self.handle_ui(&live).await {
                return found;
            }
            // No resolver's word: the pages at the root, else a UI under a usual path.
            return self.handle_ui_by_pages(&live).await;
        }
        let pages = pages_of(landing, &live);
        if pages.len() * 2 < live.len() {
            // Most records without a landing page: what their DOIs resolve to.
            if let Some(found) = self.doi_template(&live).await {
                return found;
            }
            return (Learned::Nothing, String::new());
        }
        match not_found(&self.http, &pages).await {
            Some(missing) => (
                Learned::Nothing,
                format!(
                    "{missing} of the sample's landing pages answer 404 (e.g. {}): the rule gives no page the site serves; check the platform's settings",
                    pages[0]
                ),
            ),
            None => (Learned::Nothing, String::new()),
        }
    }

    /// The status of `url` (one GET, redirects not followed); `None` when it does not answer.
    async fn status(&self, url: &str) -> Option<u16> {
        status(&self.http, url).await
    }

    /// A DSpace's UI found by asking for its Handle pages: at the baseURL's root, else under
    /// `/xmlui/`, `/jspui/` or `/dspace/`, the first where no sample page answers 404 and one
    /// answers.
    async fn handle_ui_by_pages(&self, live: &[&Record]) -> (Learned, String) {
        let handles = handles_of(live);
        if handles.is_empty() {
            return (Learned::Nothing, String::new());
        }
        let mut root = self.base.clone();
        root.set_path("/");
        root.set_query(None);
        let mut tried = Vec::new();
        for path in ["", "xmlui/", "jspui/", "dspace/"] {
            let Ok(ui) = root.join(path) else { continue };
            let pages: Vec<String> = handles.iter().map(|h| format!("{ui}handle/{h}")).collect();
            let mut ok = 0;
            let mut missing = 0;
            for page in &pages {
                match self.status(page).await {
                    Some(404 | 410) => missing += 1,
                    Some(_) => ok += 1,
                    // The site does not answer: nothing to learn from it.
                    None => return (Learned::Nothing, String::new()),
                }
            }
            if missing == 0 && ok > 0 {
                if path.is_empty() {
                    return (Learned::Nothing, String::new());
                }
                let said = format!(
                    "the Handle pages answer 404 under {}; under {ui} they answer: the UI is {ui}",
                    tried.join(", ")
                );
                return (Learned::Ui(ui), said);
            }
            tried.push(ui.to_string());
        }
        (
            Learned::Nothing,
            format!(
                "the Handle pages answer 404 under {}: set ui_url to where the DSpace UI serves /handle/",
                tried.join(", ")
            ),
        )
    }

    /// The URLs a resolver's answer for `start` leads through, each redirect's target in turn
    /// (at most [`HOPS`]); the first is where the identifier is registered. `None` when the
    /// resolver itself does not answer: then no other record is asked either.
    pub(crate) async fn chain(&self, start: Url) -> Option<Vec<Url>> {
        let mut out = Vec::new();
        let mut at = start;
        for hop in 0..HOPS {
            let response = match self.http.get(at.clone()).send().await {
                Ok(response) => response,
                Err(e) if hop == 0 => {
                    tracing::info!(url = %at, error = %e, "the resolver does not answer: nothing learned");
                    return None;
                }
                Err(_) => break,
            };
            if !response.status().is_redirection() {
                break;
            }
            let Some(next) = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|l| at.join(l).ok())
            else {
                break;
            };
            if !matches!(next.scheme(), "http" | "https") {
                break;
            }
            out.push(next.clone());
            at = next;
        }
        Some(out)
    }

    /// Whether `url` is on the baseURL's site and is no resolver's.
    fn on_site(&self, url: &Url) -> bool {
        let host = url.host_str().unwrap_or_default();
        let resolver = [&self.resolvers.handle, &self.resolvers.doi]
            .iter()
            .any(|r| {
                r.host_str() == Some(host)
                    && r.port_or_known_default() == url.port_or_known_default()
            });
        let named = self.named.as_deref().is_some_and(|n| same_site(n, host));
        !resolver && (named || self.base.host_str().is_some_and(|b| same_site(b, host)))
    }

    /// The UI a DSpace's Handles resolve to: the registered URL's part before `handle/P/S`, the
    /// same for every sample, on the site, and other than the baseURL's root (which the rule
    /// takes anyway).
    async fn handle_ui(&self, live: &[&Record]) -> Option<(Learned, String)> {
        let handles = handles_of(live);
        let mut ui: Option<Url> = None;
        for handle in &handles {
            let start = self.resolvers.handle.join(handle).ok()?;
            let chain = self.chain(start).await?;
            let registered = chain.first()?;
            let path = registered.path();
            let at = path.find(&format!("/handle/{handle}"))?;
            let mut found = registered.clone();
            found.set_path(&path[..=at]);
            found.set_query(None);
            found.set_fragment(None);
            if !self.on_site(&found) || ui.as_ref().is_some_and(|u| *u != found) {
                return None;
            }
            ui = Some(found);
        }
        let ui = ui?;
        let mut root = self.base.clone();
        root.set_path("/");
        root.set_query(None);
        if ui == root {
            return None;
        }
        let evidence = format!(
            "the Handle resolver {} sends {} of the records' Handles to {ui}handle/...: the UI is {ui}",
            self.resolvers.handle,
            handles.len()
        );
        Some((Learned::Ui(ui), evidence))
    }

    /// A template over each sample's OAI identifier, DOI or DOI suffix that gives the page its
    /// DOI resolves to (the last on-site URL of the redirects that the template can express),
    /// the same template for every sample.
    async fn doi_template(&self, live: &[&Record]) -> Option<(Learned, String)> {
        let samples: Vec<(&Record, &str)> = live
            .iter()
            .filter_map(|r| {
                r.dc_identifiers
                    .iter()
                    .map(String::as_str)
                    .chain(std::iter::once(r.identifier.as_str()))
                    .find_map(|v| match classify::pid_of(v) {
                        Some(Pid::Doi(d)) => Some((*r, d)),
                        _ => None,
                    })
                    .or_else(|| {
                        // `oai:host:10.1038/x`: the OAI identifier holds the DOI.
                        let local = r.identifier.rsplit(':').next()?;
                        local
                            .starts_with("10.")
                            .then(|| match classify::pid_of(local) {
                                Some(Pid::Doi(d)) => Some((*r, d)),
                                _ => None,
                            })?
                    })
            })
            .take(SAMPLES)
            .collect();
        let mut chosen: Option<Template> = None;
        for (record, doi) in &samples {
            let start = self.resolvers.doi.join(doi).ok()?;
            let chain = self.chain(start).await?;
            let found = chain
                .iter()
                .rev()
                .filter(|u| self.on_site(u))
                .find_map(|u| template_for(u, record, doi))?;
            match &chosen {
                None => chosen = Some(found),
                Some(t) if *t == found => {}
                // Another shape for another record: nothing one template says.
                Some(_) => return None,
            }
        }
        let template = chosen?;
        let evidence = format!(
            "the DOI resolver {} sends {} of the records' DOIs to pages {template} gives",
            self.resolvers.doi,
            samples.len()
        );
        Some((Learned::Template(template), evidence))
    }
}

/// The status of `url` (one GET, redirects not followed); `None` when it does not answer.
async fn status(http: &reqwest::Client, url: &str) -> Option<u16> {
    let response = http.get(url).send().await.ok()?;
    Some(response.status().as_u16())
}

/// Asks for up to [`SAMPLES`] of `pages`: when every one that answers says 404 or 410 (and at
/// least one answers), how many did.
async fn not_found(http: &reqwest::Client, pages: &[String]) -> Option<usize> {
    let mut missing = 0;
    let mut answered = 0;
    for page in pages.iter().take(SAMPLES) {
        match status(http, page).await {
            Some(404 | 410) => {
                missing += 1;
                answered += 1;
            }
            Some(_) => answered += 1,
            None => {}
        }
    }
    (answered > 0 && missing == answered).then_some(missing)
}

/// A template that gives `url` for `record`: `url` with the record's OAI identifier's last part,
/// its DOI or the DOI's suffix in place of the whole path segment (or query value) that holds
/// it, tried in that order.
fn template_for(url: &Url, record: &Record, doi: &str) -> Option<Template> {
    let local = record.identifier.rsplit(':').next().unwrap_or_default();
    let suffix = doi.split_once('/').map(|(_, s)| s).unwrap_or_default();
    let text = url.as_str();
    let path_start = url[..url::Position::BeforePath].len();
    for (name, value) in [("oai_local", local), ("doi", doi), ("doi_suffix", suffix)] {
        if value.is_empty() {
            continue;
        }
        {
            let Some(at) = text[path_start..].rfind(value).map(|i| i + path_start) else {
                continue;
            };
            let end = at + value.len();
            // A whole segment or value: what stands around it ends one.
            let before_ok = matches!(text.as_bytes()[at - 1], b'/' | b'=' | b':');
            let after_ok =
                end == text.len() || matches!(text.as_bytes()[end], b'/' | b'?' | b'&' | b'#');
            if !(before_ok && after_ok) {
                continue;
            }
            let candidate = format!("{}{{{name}}}{}", &text[..at], &text[end..]);
            if let Ok(t) = Template::parse(&candidate) {
                return Some(t);
            }
        }
    }
    None
}

/// The first Handle of each of the first [`SAMPLES`] records that give one.
fn handles_of<'r>(live: &[&'r Record]) -> Vec<&'r str> {
    live.iter()
        .filter_map(|r| {
            r.dc_identifiers
                .iter()
                .find_map(|v| match classify::pid_of(v) {
                    Some(Pid::Handle(h)) => Some(h),
                    _ => None,
                })
        })
        .take(SAMPLES)
        .collect()
}

/// The landing page `landing` gives each of `live` that gets one.
fn pages_of(landing: &crate::platform::Landing, live: &[&Record]) -> Vec<String> {
    let mut classes = Classes::new();
    live.iter()
        .filter_map(|r| {
            landing.classes(r, &mut classes);
            classes.iter().find_map(|c| match c {
                Class::LandingPage(url) => Some(url.to_string()),
                _ => None,
            })
        })
        .collect()
}

/// Reads, once per run, the robots.txt of the sites the job's pages may be on (the baseURL's
/// origin, and `ui_url`'s, the template's and the public URL's when they are others), so that
/// what it disallows for the major crawlers is left out ([`Robots`]). A robots.txt that is
/// missing (4xx) allows everything. One that does not answer, or answers 5xx, is taken from
/// `kept` (the copy the state keeps, [`keep_robots`]), as RFC 9309 (section 2.4) lets a crawler
/// use its copy of an unreachable robots.txt: a site down for one refresh changes neither what
/// is published nor what the next refresh may patch. Without a copy the site is left out (its
/// pages are then not judged: a failed fetch must not empty a sitemap). Asked only when
/// learning is on (`job.landing.web`).
pub(crate) async fn robots(client: &Client, job: &mut Job, kept: &[RobotsCopy]) {
    if job.landing.web.is_none() {
        return;
    }
    let mut origins: Vec<String> = Vec::new();
    let base = match &job.request.source {
        oai_pmh::Source::Oai(base) => Some(base.clone()),
        oai_pmh::Source::File(_) => None,
    };
    let template = job
        .landing
        .template
        .as_ref()
        .and_then(|t| Url::parse(&t.as_str().replace(['{', '}'], "")).ok());
    for url in [
        base,
        job.landing.ui_url.clone(),
        template,
        Some(job.public_url.clone()),
    ]
    .into_iter()
    .flatten()
    .chain(job.scope.iter().cloned())
    .chain(job.landing.sites.iter().cloned())
    {
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            continue;
        }
        let origin = url[..url::Position::BeforePath].to_owned();
        if !origins.contains(&origin) {
            origins.push(origin);
        }
    }
    // RFC 9309: a crawler follows at least five redirects to a robots.txt.
    let Some(http) = http_client(client, reqwest::redirect::Policy::limited(5)) else {
        return;
    };
    let now = oai_pmh::unix_secs(std::time::SystemTime::now());
    let mut bodies = Vec::new();
    let mut copies = Vec::new();
    for origin in origins.into_iter().take(4) {
        let url = format!("{origin}/robots.txt");
        let read = match http.get(&url).send().await {
            Ok(response) if response.status().is_success() => {
                // A robots.txt is small; 500 KiB is the most RFC 9309 asks a crawler to read.
                response
                    .bytes()
                    .await
                    .map(|body| body[..body.len().min(500 * 1024)].to_vec())
                    .map_err(|e| e.to_string())
            }
            // A missing robots.txt allows everything (RFC 9309 section 2.3.1.3); a 408 or a 429
            // says the site is busy, not that it has none, as Google's crawlers read them.
            Ok(response)
                if response.status().is_client_error()
                    && !matches!(response.status().as_u16(), 408 | 429) =>
            {
                Ok(Vec::new())
            }
            Ok(response) => Err(format!("HTTP {}", response.status().as_u16())),
            Err(e) => Err(e.without_url().to_string()),
        };
        match read {
            Ok(body) => {
                // Kept when it is text (RFC 9309 has it UTF-8) and the copies stay within
                // `RobotsCopy::MAX_TOTAL`. A body as kept keeps its copy, time and all, so that
                // the state is saved again only when a body changes.
                let kept_len: usize = copies.iter().map(|c: &RobotsCopy| c.body.len()).sum();
                if let Ok(text) = std::str::from_utf8(&body)
                    && kept_len + body.len() <= RobotsCopy::MAX_TOTAL
                {
                    let same = kept.iter().find(|k| k.origin == origin && k.body == text);
                    copies.push(same.cloned().unwrap_or_else(|| RobotsCopy {
                        origin: origin.clone(),
                        body: text.to_owned(),
                        at: now,
                    }));
                }
                bodies.push((origin, body));
            }
            Err(why) => match kept.iter().find(|k| k.origin == origin) {
                Some(copy) => {
                    tracing::warn!(
                        %url, error = %why, first_read_secs_ago = now - copy.at,
                        "robots.txt could not be read; the copy read before is used"
                    );
                    bodies.push((origin, copy.body.clone().into_bytes()));
                    copies.push(copy.clone());
                }
                None => tracing::info!(
                    %url, error = %why,
                    "robots.txt could not be read, and no copy is kept: the site's pages are not judged by it"
                ),
            },
        }
    }
    if !bodies.is_empty() {
        let robots = Robots::new(&bodies).read_as(copies);
        job.landing.robots = Some(std::sync::Arc::new(robots));
    }
}

/// Keeps in `store`'s state the robots.txt copies `robots` was made of, for a later run whose
/// read fails ([`robots`]); saved only when they changed, after a publish made with them.
pub(crate) fn keep_robots(store: &mut Store, robots: &Robots) {
    let copies = robots.copies();
    let saved = store.state().and_then(|mut state| {
        if state.robots == copies {
            return Ok(());
        }
        state.robots = copies.to_vec();
        store.save_state(&state)
    });
    if let Err(e) = saved {
        tracing::warn!(error = %e, "the sites' robots.txt could not be kept");
    }
}
