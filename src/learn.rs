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
//! What is learned must be on the baseURL's site ([`crate::platform::same_site`]): a publisher's
//! DOI in a repository's record leads to the publisher's page, which is never the repository's,
//! and a resolver's own URL is never a landing page. At most [`SAMPLES`] records are looked up,
//! each through at most [`HOPS`] redirects, one request at a time with a timeout: a few dozen
//! requests at most. `OAI_BRIDGE_LEARN=off` switches it off (a gateway that must make no
//! request besides the OAI-PMH ones); `OAI_BRIDGE_HANDLE_RESOLVER` and
//! `OAI_BRIDGE_DOI_RESOLVER` name other resolvers (a mirror; the tests' own).

use std::ops::ControlFlow;
use std::time::Duration;

use url::Url;

use crate::classify::{self, Class, Pid};
use crate::oai::Client;
use crate::oai::parse::Record;
use crate::pipeline::Job;
use crate::platform::{Classes, Setting, Template, same_site};

/// Records looked up at most, per question.
pub(crate) const SAMPLES: usize = 3;
/// Redirects followed at most from a resolver.
pub(crate) const HOPS: usize = 5;
/// How long one request may take.
const TIMEOUT: Duration = Duration::from_secs(10);
/// How long connecting may take (a resolver out of reach is given up on quickly).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Where the resolvers are.
#[derive(Clone, Debug)]
pub(crate) struct Resolvers {
    /// `https://hdl.handle.net/`.
    pub handle: Url,
    /// `https://doi.org/`.
    pub doi: Url,
}

impl Resolvers {
    /// The public resolvers, or those the environment names; `None` when learning is off.
    pub(crate) fn from_env() -> Option<Self> {
        let off = std::env::var("OAI_BRIDGE_LEARN")
            .is_ok_and(|v| matches!(v.trim(), "off" | "0" | "false" | "no"));
        if off {
            return None;
        }
        let url = |var: &str, default: &str| {
            std::env::var(var)
                .ok()
                .and_then(|v| Url::parse(&v).ok())
                .unwrap_or_else(|| Url::parse(default).expect("a resolver URL"))
        };
        Some(Self {
            handle: url("OAI_BRIDGE_HANDLE_RESOLVER", "https://hdl.handle.net/"),
            doi: url("OAI_BRIDGE_DOI_RESOLVER", "https://doi.org/"),
        })
    }
}

/// What was learned, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Learned {
    /// The UI that serves the records' Handles.
    Ui(Url),
    /// A template that gives each sample's page.
    Template(Template),
}

/// Before a harvest: when the job is `auto` with nothing configured that learning would
/// replace, reads the upstream's first page and, if the rule it gives needs the web, learns and
/// sets `ui_url` or `landing_template` on the job, saying what it found in `job.landing.learned`.
/// Nothing is changed when learning is off, finds nothing, or the web does not answer.
pub(crate) async fn prepare(client: &Client, job: &mut Job) {
    let settings = &job.landing;
    if settings.platform != Setting::Auto
        || settings.template.is_some()
        || settings.ui_url.is_some()
        || !job.scope.is_empty()
    {
        return;
    }
    let Some(resolvers) = Resolvers::from_env() else {
        return;
    };
    let mut identify = None;
    let mut records = Vec::new();
    let _ = crate::oai::harvest::harvest_resumable(client, &job.request, None, |event| {
        identify = Some(event.identify.clone());
        records.extend(event.records);
        if records.len() >= crate::platform::SAMPLE {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .await;
    let Some(identify) = identify else {
        return;
    };
    let Ok(landing) = crate::pipeline::landing_for(job, &identify, &records) else {
        return;
    };
    let base = match &job.request.source {
        crate::oai::Source::Oai(base) => Some(base.clone()),
        crate::oai::Source::File(_) => Url::parse(&identify.base_url).ok(),
    };
    let Some(base) = base else { return };
    let Ok(http) = reqwest::Client::builder()
        .user_agent(client.settings().user_agent.clone())
        .redirect(reqwest::redirect::Policy::none())
        .timeout(TIMEOUT)
        .connect_timeout(CONNECT_TIMEOUT)
        .build()
    else {
        return;
    };
    let web = Web {
        http,
        resolvers,
        base,
    };
    let learned = web.learn(&landing, &records).await;
    if let Some((learned, evidence)) = learned {
        tracing::info!(learned = ?learned, evidence = %evidence, "landing rule learned from the web");
        match learned {
            Learned::Ui(ui) => job.landing.ui_url = Some(ui),
            Learned::Template(t) => job.landing.template = Some(t),
        }
        job.landing.learned = Some(evidence);
    }
}

/// The requests learning makes.
pub(crate) struct Web {
    pub(crate) http: reqwest::Client,
    pub(crate) resolvers: Resolvers,
    /// The baseURL: what is learned must be on its site.
    pub(crate) base: Url,
}

impl Web {
    /// What the web says of `records` under `landing`, the rule the records alone give, with the
    /// evidence in words; `None` when there is nothing to ask or nothing agreed.
    pub(crate) async fn learn(
        &self,
        landing: &crate::platform::Landing,
        records: &[Record],
    ) -> Option<(Learned, String)> {
        let live: Vec<&Record> = records
            .iter()
            .filter(|r| !r.deleted && !r.unreadable())
            .take(crate::platform::SAMPLE)
            .collect();
        if landing.detected().platform.as_str() == "dspace"
            && crate::platform::dspace_ui_in(records).is_none()
        {
            return self.handle_ui(&live).await;
        }
        // Most records without a landing page: what their DOIs resolve to.
        let mut classes = Classes::new();
        let with_page = live
            .iter()
            .filter(|r| {
                landing.classes(r, &mut classes);
                classes.iter().any(|c| matches!(c, Class::LandingPage(_)))
            })
            .count();
        if with_page * 2 >= live.len() {
            return None;
        }
        self.doi_template(&live).await
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
        !resolver && self.base.host_str().is_some_and(|b| same_site(b, host))
    }

    /// The UI a DSpace's Handles resolve to: the registered URL's part before `handle/P/S`, the
    /// same for every sample, on the site, and other than the baseURL's root (which the rule
    /// takes anyway).
    async fn handle_ui(&self, live: &[&Record]) -> Option<(Learned, String)> {
        let handles: Vec<&str> = live
            .iter()
            .filter_map(|r| {
                r.dc_identifiers
                    .iter()
                    .find_map(|v| match classify::pid_of(v) {
                        Some(Pid::Handle(h)) => Some(h),
                        _ => None,
                    })
            })
            .take(SAMPLES)
            .collect();
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
