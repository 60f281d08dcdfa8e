//! What would give a repository's records landing pages, tried on the records themselves: the
//! advice of `oai-bridge check`, and of an export that found nothing to publish. Pure.
//!
//! Each setting (another platform, a scope, a DSpace `ui_url`) is applied to the sample with the
//! landing rule a harvest would make of it ([`crate::pipeline::landing_of`]), and is offered
//! only with what it gives there: the share of live records that get a landing page, and three
//! of the pages. A setting is never offered when
//! - it is a platform whose signs are absent ([`platform::shown`]): a rule may well find pages
//!   in what another platform wrote (EPrints' `{site}{id}/` in a Digital Commons record);
//! - it would publish a content file ([`platform::names_file`]) or a resolver's URL
//!   ([`classify::is_resolver`]) as a landing page;
//! - its pages are on another site than the baseURL's ([`platform::same_site`]): that is said
//!   as a fact, as is what the records carry when nothing gives them a page.

use std::collections::BTreeMap;

use oai_pmh::{Identify, Record, Source};
use serde::Serialize;
use url::Url;

use crate::classify::{self, Class, Drop, Pid};
use crate::platform::{self, Classes, Landing, LandingSettings, Registry, Setting};

/// How many of its landing pages a suggestion shows.
pub(crate) const EXAMPLES: usize = 3;

/// A setting tried on the sample, and what it gives there.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Suggestion {
    /// The key it sets: `platform`, `scope` or `ui_url`.
    pub key: String,
    /// The value it sets the key to: `dspace`, `https://host/items/`.
    pub value: String,
    /// As `bridge.toml` writes it: `platform = "dspace"`, `scope = ["https://host/items/"]`.
    pub setting: String,
    /// As a flag of `check` and `export`: `--platform dspace`.
    pub flag: String,
    /// Why it is tried: the platform's signs, or where the records' pages are.
    pub why: String,
    /// Live records of the sample.
    pub live_records: u64,
    /// Those it gives a landing page.
    pub with_landing_page: u64,
    /// `with_landing_page / live_records`.
    pub share: f64,
    /// Landing pages it would publish, of different records (up to [`EXAMPLES`]).
    pub examples: Vec<String>,
}

impl Suggestion {
    /// The setting and its flag: `platform = "dspace" (--platform dspace)`.
    pub(crate) fn named(&self) -> String {
        format!("{} ({})", self.setting, self.flag)
    }

    /// What it gives, after the count of records it speaks of: `would give 6 of them one
    /// (100%), e.g. A, B, C`.
    pub(crate) fn gives(&self) -> String {
        format!(
            "would give {} of them one ({:.0}%), e.g. {}",
            self.with_landing_page,
            100.0 * self.share,
            self.examples.join(", ")
        )
    }

    /// What it gives, counted: `gives 6 of the first 6 live records a landing page (100%),
    /// e.g. A, B, C`.
    pub(crate) fn gives_records(&self) -> String {
        format!(
            "gives {} of the first {} live records a landing page ({:.0}%), e.g. {}",
            self.with_landing_page,
            self.live_records,
            100.0 * self.share,
            self.examples.join(", ")
        )
    }

    /// As an export's error says it: `platform = "dspace" (--platform dspace) gives 6 of the
    /// first 6 live records a landing page (100%), e.g. A, B, C (tried: why)`.
    pub(crate) fn sentence(&self) -> String {
        format!(
            "{} {} (tried, as {})",
            self.named(),
            self.gives_records(),
            self.why
        )
    }
}

/// What the advice found.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Advice {
    /// The setting that gives the most live records a landing page, when it gives most of them
    /// one and more than the rule in effect.
    pub(crate) suggestion: Option<Suggestion>,
    /// The best scope on the baseURL's site, when it gives more records a page than the rule in
    /// effect (even if not most): `check`'s scope line.
    pub(crate) scope: Option<Suggestion>,
    /// A fact, not advice: the UI the records' local Handle URLs show is on another site.
    pub(crate) ui_elsewhere: Option<String>,
    /// A fact, not advice: most records' pages are on another site (when no setting gives most
    /// of them a page).
    pub(crate) pages_elsewhere: Option<String>,
    /// What the records carry, when no setting gives most of them a page.
    pub(crate) contents: Option<String>,
}

impl Advice {
    /// What is said as fact, not advice.
    pub(crate) fn facts(&self) -> Vec<String> {
        [&self.ui_elsewhere, &self.pages_elsewhere, &self.contents]
            .into_iter()
            .flatten()
            .cloned()
            .collect()
    }

    /// The suggestion, else the facts, in one sentence: an export's hint.
    pub(crate) fn hint(&self) -> Option<String> {
        match &self.suggestion {
            Some(s) => Some(s.sentence()),
            None => Some(self.facts().join("; ")).filter(|f| !f.is_empty()),
        }
    }
}

/// How a repository is set up, as a harvest applies it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Setup<'a> {
    /// Its landing settings.
    pub(crate) settings: &'a LandingSettings,
    /// Where it is harvested from.
    pub(crate) source: &'a Source,
    /// Its configured scope prefixes (none: the baseURL's directory).
    pub(crate) scope: &'a [Url],
    /// What its `Identify` says.
    pub(crate) identify: &'a Identify,
}

/// What would give the live records of `records` landing pages where `current` (the rule in
/// effect for `setup`) gives most none, each setting tried on them; and a `ui_url` when
/// `current` is a Handle rule whose pages the records show on another UI.
pub(crate) fn advise(records: &[Record], setup: &Setup<'_>, current: &Landing) -> Advice {
    let live: Vec<&Record> = records
        .iter()
        .filter(|r| !r.deleted && !r.unreadable())
        .collect();
    let mut advice = Advice::default();
    if live.is_empty() {
        return advice;
    }
    let base = crate::pipeline::base_url(setup.source, &setup.identify.base_url);
    let base_host = base.as_ref().and_then(Url::host_str).unwrap_or_default();
    let registry = &setup.settings.platforms;
    let trial = Trial {
        records,
        live: &live,
        base_host,
        registry,
    };
    let most = |n: u64| n * 2 >= live.len() as u64;
    let now = trial.run(current, false).pages;
    let mut best: Option<Suggestion> = None;
    let mut consider = |s: Suggestion, at_least: u64| {
        if most(s.with_landing_page)
            && s.with_landing_page >= at_least
            && best
                .as_ref()
                .is_none_or(|b| s.with_landing_page > b.with_landing_page)
        {
            best = Some(s);
        }
    };

    // A UI the records show elsewhere, whatever the share: DSpace 7 makes pages on the API host.
    if setup.settings.ui_url.is_none()
        && let Some(ui) = current.ui_in(records)
    {
        let host = ui.host_str().unwrap_or_default();
        if platform::same_site(base_host, host) {
            let settings = LandingSettings {
                ui_url: Some(ui.clone()),
                ..setup.settings.clone()
            };
            if let Some(s) = trial.suggestion(
                setup,
                &settings,
                setup.scope,
                ("ui_url", ui.as_str()),
                format!("the records' local Handle URLs are under {ui}"),
            ) {
                consider(s, now);
            }
        } else {
            advice.ui_elsewhere = Some(format!(
                "the records' local Handle URLs are under {ui}, another site than the \
                 baseURL's ({base_host}): set ui_url if that is this repository's UI"
            ));
        }
    }

    if !most(now) {
        let detected = current.detected().platform.as_str();
        for row in registry.rows() {
            if row.name() == detected {
                continue;
            }
            let Some(why) = platform::shown(row, base.as_ref(), setup.identify, records) else {
                continue;
            };
            let settings = LandingSettings {
                platform: Setting::Fixed(row.name().to_owned()),
                template: None,
                learned: None,
                ..setup.settings.clone()
            };
            let name = row.name();
            if let Some(s) =
                trial.suggestion(setup, &settings, setup.scope, ("platform", name), why)
            {
                consider(s, now + 1);
            }
        }
    }

    // A scope over the records' pages on the baseURL's site; said as a fact when they are on
    // another site.
    let Outside {
        here,
        elsewhere,
        records_elsewhere,
    } = Outside::of(&live, current, base_host, registry);
    let mut scopes: Vec<String> = Vec::new();
    if let Some((prefix, _)) = suggest_scope(here.iter()) {
        scopes.push(prefix);
    }
    if let Some(origin) = most_common(here.iter().map(origin_of))
        && !scopes.contains(&origin)
    {
        scopes.push(origin);
    }
    for prefix in scopes {
        let Ok(url) = Url::parse(&prefix) else {
            continue;
        };
        if let Some(s) = trial.suggestion(
            setup,
            setup.settings,
            std::slice::from_ref(&url),
            ("scope", &prefix),
            format!("the records' pages on the baseURL's site are under {prefix}"),
        ) && s.with_landing_page > now
            && advice
                .scope
                .as_ref()
                .is_none_or(|b| s.with_landing_page > b.with_landing_page)
        {
            advice.scope = Some(s);
        }
    }
    if !most(now)
        && let Some(s) = &advice.scope
    {
        consider(s.clone(), now + 1);
    }
    advice.suggestion = best;
    if advice.suggestion.is_some() || most(now) {
        return advice;
    }

    let prefix = suggest_scope(elsewhere.iter())
        .map(|(p, _)| p)
        .or_else(|| most_common(elsewhere.iter().map(origin_of)));
    if most(records_elsewhere)
        && let Some(prefix) = prefix
    {
        advice.pages_elsewhere = Some(format!(
            "the records' pages are on {prefix}, another site than the baseURL's \
             ({base_host}): bridge it as its own repository, or set scope (--scope) if it is yours"
        ));
    }
    advice.contents = Some(contents(&live, base_host, registry));
    advice
}

/// The sample, its live records, and how to judge what a rule gives them.
struct Trial<'a> {
    records: &'a [Record],
    live: &'a [&'a Record],
    base_host: &'a str,
    registry: &'a Registry,
}

/// What a rule gives the sample.
struct Tried {
    /// Records with a landing page.
    pages: u64,
    /// The first few of their pages.
    examples: Vec<String>,
    /// Why it may not be offered: a landing page that is a file, a resolver's URL, or on
    /// another site.
    wrong: Option<String>,
}

impl Trial<'_> {
    /// Applies `rule` to every live record; with `give_up`, only until a page is found that may
    /// not be offered ([`Tried::wrong`]).
    fn run(&self, rule: &Landing, give_up: bool) -> Tried {
        let mut tried = Tried {
            pages: 0,
            examples: Vec::new(),
            wrong: None,
        };
        let mut classes = Classes::new();
        for record in self.live {
            rule.classes(record, &mut classes);
            let mut first = true;
            for class in &classes {
                let Class::LandingPage(page) = class else {
                    continue;
                };
                if tried.wrong.is_none() {
                    tried.wrong = self.wrong(page);
                }
                if give_up && tried.wrong.is_some() {
                    return tried;
                }
                if first {
                    first = false;
                    tried.pages += 1;
                    if tried.examples.len() < EXAMPLES {
                        tried.examples.push(page.to_string());
                    }
                }
            }
        }
        tried
    }

    /// Why `page` may not be published as a landing page, if it may not.
    fn wrong(&self, page: &str) -> Option<String> {
        let Ok(url) = Url::parse(page) else {
            return Some(format!("{page} is no URL"));
        };
        if platform::names_file(&url, self.registry) {
            Some(format!("{page} is a content file"))
        } else if classify::is_resolver(&url) {
            Some(format!("{page} is a resolver's URL"))
        } else if !platform::same_site(self.base_host, url.host_str().unwrap_or_default()) {
            Some(format!("{page} is on another site"))
        } else {
            None
        }
    }

    /// `settings` with the `scope` prefixes, applied to the sample as a harvest would: the
    /// suggestion, unless it cannot be made or publishes what is no landing page.
    fn suggestion(
        &self,
        setup: &Setup<'_>,
        settings: &LandingSettings,
        scope: &[Url],
        (key, value): (&str, &str),
        why: String,
    ) -> Option<Suggestion> {
        let rule = crate::pipeline::landing_of(
            settings,
            setup.source,
            scope,
            setup.identify,
            self.records,
        )
        .ok()?;
        let tried = self.run(&rule, true);
        let (setting, flag) = match key {
            "scope" => (format!("scope = [\"{value}\"]"), format!("--scope {value}")),
            _ => (
                format!("{key} = \"{value}\""),
                format!("--{} {value}", key.replace('_', "-")),
            ),
        };
        if let Some(wrong) = &tried.wrong {
            tracing::debug!(setting, wrong, "a setting not offered");
            return None;
        }
        let live = self.live.len() as u64;
        Some(Suggestion {
            key: key.to_owned(),
            value: value.to_owned(),
            setting,
            flag,
            why,
            live_records: live,
            with_landing_page: tried.pages,
            share: tried.pages as f64 / live as f64,
            examples: tried.examples,
        })
    }
}

/// How many URLs of each kind [`Outside`] keeps for choosing a prefix.
const KEEP: usize = 2_000;

/// The http(s) URLs of the live records outside the scope of the rule in effect that may be
/// pages (no content file, no resolver's URL), on the baseURL's site or not.
struct Outside {
    /// On the baseURL's site (up to [`KEEP`]).
    here: Vec<Url>,
    /// On another site (up to [`KEEP`]).
    elsewhere: Vec<Url>,
    /// Live records with such a URL on another site.
    records_elsewhere: u64,
}

impl Outside {
    fn of(live: &[&Record], current: &Landing, base_host: &str, registry: &Registry) -> Self {
        let mut outside = Outside {
            here: Vec::new(),
            elsewhere: Vec::new(),
            records_elsewhere: 0,
        };
        for record in live {
            let mut elsewhere = false;
            for value in &record.dc_identifiers {
                if !matches!(
                    classify::class(value, current.scope()),
                    Class::Dropped(Drop::OutOfScope)
                ) {
                    continue;
                }
                let Ok(url) = Url::parse(value.trim()) else {
                    continue;
                };
                if platform::names_file(&url, registry) || classify::is_resolver(&url) {
                    continue;
                }
                let kept = if platform::same_site(base_host, url.host_str().unwrap_or_default()) {
                    &mut outside.here
                } else {
                    elsewhere = true;
                    &mut outside.elsewhere
                };
                if kept.len() < KEEP {
                    kept.push(url);
                }
            }
            outside.records_elsewhere += u64::from(elsewhere);
        }
        outside
    }
}

/// `https://host/`, `http://host:8080/`.
fn origin_of(url: &Url) -> String {
    format!("{}/", &url[..url::Position::BeforePath])
}

/// The value most of `values` are, the first of equals.
fn most_common(values: impl Iterator<Item = String>) -> Option<String> {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for v in values {
        match counts.iter_mut().find(|(c, _)| *c == v) {
            Some((_, n)) => *n += 1,
            None => counts.push((v, 1)),
        }
    }
    counts
        .into_iter()
        .rev()
        .max_by_key(|(_, n)| *n)
        .map(|(v, _)| v)
}

/// The prefix (scheme, host, port and first path segment) that covers most of `urls`, and how
/// many it covers; `None` when none covers a third of them.
pub(crate) fn suggest_scope<'u>(urls: impl Iterator<Item = &'u Url>) -> Option<(String, usize)> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut total = 0;
    for url in urls {
        total += 1;
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
    (n * 3 >= total).then_some((prefix, n))
}

/// What one `dc:identifier` value is, for saying what the records carry.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    SitePage,
    SiteFile,
    Elsewhere(String),
    Resolver(String),
    Doi,
    Handle,
    Urn,
    Isbn,
    Citation,
    Other,
}

impl Kind {
    fn of(value: &str, base_host: &str, registry: &Registry) -> Self {
        let value = value.trim();
        match classify::pid_of(value) {
            Some(Pid::Doi(_)) => return Kind::Doi,
            Some(Pid::Handle(_)) => return Kind::Handle,
            None => {}
        }
        if classify::is_http_text(value) {
            let Ok(url) = Url::parse(value) else {
                return Kind::Other;
            };
            let host = url.host_str().unwrap_or_default().to_owned();
            return if classify::is_resolver(&url) {
                Kind::Resolver(host)
            } else if !platform::same_site(base_host, &host) {
                Kind::Elsewhere(host)
            } else if platform::names_file(&url, registry) {
                Kind::SiteFile
            } else {
                Kind::SitePage
            };
        }
        let lower = value.to_ascii_lowercase();
        if lower.starts_with("urn:isbn") || lower.starts_with("isbn") {
            Kind::Isbn
        } else if lower.starts_with("urn:") {
            Kind::Urn
        } else if value.contains(char::is_whitespace) {
            Kind::Citation
        } else {
            Kind::Other
        }
    }

    fn words(&self) -> String {
        match self {
            Kind::SitePage => "a URL on this site".to_owned(),
            Kind::SiteFile => "a file on this site".to_owned(),
            Kind::Elsewhere(host) => format!("a URL on another site, {host}"),
            Kind::Resolver(host) => format!("a resolver's URL, {host}"),
            Kind::Doi => "a DOI".to_owned(),
            Kind::Handle => "a Handle".to_owned(),
            Kind::Urn => "a URN".to_owned(),
            Kind::Isbn => "an ISBN".to_owned(),
            Kind::Citation => "a citation".to_owned(),
            Kind::Other => "another identifier".to_owned(),
        }
    }
}

/// What the live records carry, in words, for when no setting gives them a page: `the 7 live
/// records of the sample carry only a DOI (6) and a citation (7); no URL on this site`. Each
/// kind counts the records with one; of URLs on another site or a resolver, the host most have.
fn contents(live: &[&Record], base_host: &str, registry: &Registry) -> String {
    // Each kind's records, hosts folded into the one most records name.
    let mut by_kind: BTreeMap<Kind, u64> = BTreeMap::new();
    for record in live {
        let mut kinds: Vec<Kind> = record
            .dc_identifiers
            .iter()
            .map(|v| Kind::of(v, base_host, registry))
            .collect();
        kinds.sort();
        kinds.dedup();
        for k in kinds {
            *by_kind.entry(k).or_default() += 1;
        }
    }
    let mut folded: Vec<(Kind, u64)> = Vec::new();
    for (kind, n) in by_kind {
        let same = |k: &Kind| {
            matches!(
                (k, &kind),
                (Kind::Elsewhere(_), Kind::Elsewhere(_)) | (Kind::Resolver(_), Kind::Resolver(_))
            )
        };
        match folded.iter_mut().find(|(k, _)| same(k)) {
            // The host of most records stays; the count is of records with any such URL (an
            // upper bound when a record names two hosts).
            Some((k, m)) => {
                if n > *m {
                    *k = kind;
                }
                *m = (*m + n).min(live.len() as u64);
            }
            None => folded.push((kind, n)),
        }
    }
    let n = live.len();
    let records = if n == 1 {
        "the 1 live record of the sample carries".to_owned()
    } else {
        format!("the {n} live records of the sample carry")
    };
    if folded.is_empty() {
        return format!("{records} no dc:identifier; no URL on this site");
    }
    let on_site = folded.iter().any(|(k, _)| *k == Kind::SitePage);
    let files = folded.iter().any(|(k, _)| *k == Kind::SiteFile);
    let parts: Vec<String> = folded
        .iter()
        .map(|(k, m)| format!("{} ({m})", k.words()))
        .collect();
    let parts = and_list(&parts);
    if on_site {
        format!("{records} {parts}; no setting tried gives most of them a landing page")
    } else if files {
        format!("{records} only {parts}; on this site only files")
    } else {
        format!("{records} only {parts}; no URL on this site")
    }
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(parts: &[String]) -> String {
    match parts {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use oai_pmh::{DcElement, Fields, IdentifyOutcome, parse_identify};

    /// A fixture of `fixtures/platforms/`: its Identify and records, relations read.
    fn fixture(name: &str) -> (Identify, Vec<Record>) {
        let path = format!(
            "{}/fixtures/platforms/{name}.xml",
            env!("CARGO_MANIFEST_DIR")
        );
        let body = std::fs::read(&path).unwrap();
        let IdentifyOutcome::Static(identify) = parse_identify(&body).unwrap() else {
            panic!("{path} is a Static Repository");
        };
        let page =
            oai_pmh::parse_list_records_with(&body, Fields::of(&[DcElement::Relation])).unwrap();
        (identify, page.records)
    }

    /// The advice for `records` harvested from `source` under `platform` and the `scope`
    /// prefixes.
    fn advice_for(
        source: &Source,
        identify: &Identify,
        records: &[Record],
        platform: &str,
        scope: &[Url],
    ) -> Advice {
        let settings = LandingSettings {
            platform: Setting::parse(platform, &Registry::default()).unwrap(),
            ..LandingSettings::default()
        };
        let landing =
            crate::pipeline::landing_of(&settings, source, scope, identify, records).unwrap();
        let setup = Setup {
            settings: &settings,
            source,
            scope,
            identify,
        };
        advise(records, &setup, &landing)
    }

    fn advice_on(name: &str, platform: &str) -> Advice {
        let (identify, records) = fixture(name);
        let source = Source::File(PathBuf::from(format!("{name}.xml")));
        advice_for(&source, &identify, &records, platform, &[])
    }

    /// Records `oai:h:1..=n`, each with the `dc:identifier`s `values` gives it.
    fn records(n: usize, values: impl Fn(usize) -> Vec<String>) -> Vec<Record> {
        (1..=n)
            .map(|i| Record {
                identifier: format!("oai:h:{i}"),
                dc_identifiers: values(i),
                ..Record::default()
            })
            .collect()
    }

    /// The advice for `records` of the baseURL `base` under Google's rule (`auto` would
    /// widen the scope over pages on the site itself).
    fn at(base: &str, records: &[Record]) -> Advice {
        let source = Source::Oai(Url::parse(base).unwrap());
        advice_for(&source, &Identify::default(), records, "generic", &[])
    }

    /// Rule 1: a platform whose signs are absent is never suggested. EPrints' rule gives the
    /// Digital Commons records pages (its site is the host's root, where their dc:identifiers
    /// are) and comes first, DSpace's gives the Dataverse records pages (its scope is the root
    /// too), CONTENTdm's template fills from any `oai:HOST:A/N`: none of them shows there.
    #[test]
    fn a_platform_whose_signs_are_absent_is_never_suggested() {
        let dc = advice_on("digital-commons", "generic");
        let s = dc.suggestion.expect("Digital Commons' own row");
        assert_eq!(
            (s.key.as_str(), s.value.as_str()),
            ("platform", "digital-commons")
        );
        assert!(s.why.contains("/do/oai"), "{}", s.why);
        assert_eq!((s.with_landing_page, s.live_records), (10, 12));
        assert_eq!(
            s.examples,
            [
                "https://digitalcommons.example.edu/bio_facpubs/43",
                "https://digitalcommons.example.edu/geo_facpubs/297",
                "https://digitalcommons.example.edu/physics_facpubs/186",
            ]
        );

        let dv = advice_on("dataverse", "generic");
        let s = dv.suggestion.expect("Dataverse's own row");
        assert_eq!(s.setting, "platform = \"dataverse\"");
        assert_eq!(s.flag, "--platform dataverse");
        assert!(s.why.contains("Identify names Dataverse"), "{}", s.why);
        assert_eq!(s.examples.len(), EXAMPLES);

        // Figshare is a row too (its signs show): its own row, with its article pages.
        let fs = advice_on("figshare", "generic");
        let s = fs.suggestion.expect("Figshare's own row");
        assert_eq!(s.setting, "platform = \"figshare\"");
        assert!(
            s.examples
                .iter()
                .all(|e| e.starts_with("https://figshare.example.com/articles/")),
            "{s:?}"
        );

        // The rows themselves: EPrints' (pages alone suffice, but its own rule gives none) and
        // DSpace's (no sign) do not show on these records; their own rows do.
        let registry = Registry::default();
        let shown = |name: &str, row: &str| {
            let (identify, records) = fixture(name);
            let base = Url::parse(&identify.base_url).unwrap();
            platform::shown(registry.get(row).unwrap(), Some(&base), &identify, &records)
        };
        assert_eq!(shown("digital-commons", "eprints"), None);
        assert!(shown("digital-commons", "digital-commons").is_some());
        assert_eq!(shown("dataverse", "dspace"), None);
        assert!(shown("dataverse", "dataverse").is_some());
        assert_eq!(shown("figshare", "contentdm"), None);
    }

    /// Rule 2: a setting that would publish a content file or a resolver's URL as a landing
    /// page is never offered. Here the records' pages are under `/x/record/`, and beside them
    /// under `/x/` a DSpace bitstream (no extension) or a URN resolver: a scope over `/x/`
    /// would make those landing pages too.
    #[test]
    fn a_setting_that_publishes_files_or_resolvers_is_never_made() {
        let base = "https://repo.example.org/x/oai/provider";
        let with = |other: &'static str| {
            records(4, move |i| {
                vec![
                    format!("https://repo.example.org/x/record/{i}"),
                    format!("https://repo.example.org/x/{other}{i}"),
                ]
            })
        };
        // Pages alone: the scope over them is suggested.
        let plain = at(
            base,
            &records(4, |i| {
                vec![format!("https://repo.example.org/x/record/{i}")]
            }),
        );
        let s = plain.suggestion.expect("the scope over the pages");
        assert_eq!(s.setting, "scope = [\"https://repo.example.org/x/\"]");
        assert_eq!((s.with_landing_page, s.share), (4, 1.0));
        // With a file or a resolver's URL under the same prefix, no scope is.
        for other in ["bitstream/1/", "resolve?urn=urn:nbn:se:x-"] {
            let advice = at(base, &with(other));
            assert_eq!(advice.suggestion, None, "{other}: {advice:?}");
            assert_eq!(advice.scope, None, "{other}");
        }
        // A resolver's URL is never a page to widen to either, even on the baseURL's site.
        let kb = records(4, |i| {
            vec![format!("http://urn.kb.se/resolve?urn=urn:nbn:se:kb:x-{i}")]
        });
        let advice = at("https://oai.kb.se/oai", &kb);
        assert_eq!(advice.suggestion, None, "{advice:?}");
        let carry = advice.contents.unwrap();
        assert!(carry.contains("a resolver's URL, urn.kb.se (4)"), "{carry}");
    }

    /// Rule 3: a scope on another host is suggested only on the baseURL's site (its host, or one
    /// sharing its registered domain); elsewhere it is said as a fact.
    #[test]
    fn a_scope_on_another_site_is_a_fact_not_advice() {
        let base = "https://oai.repo.example.org/oai";
        let sibling = records(5, |i| {
            vec![format!("https://www.repo.example.org/record/{i}")]
        });
        let advice = at(base, &sibling);
        let s = advice.suggestion.expect("a sibling host is the site");
        assert_eq!(s.flag, "--scope https://www.repo.example.org/record/");
        assert_eq!(advice.pages_elsewhere, None);

        let other = records(5, |i| vec![format!("https://pages.example.net/record/{i}")]);
        let advice = at(base, &other);
        assert_eq!(advice.suggestion, None, "{advice:?}");
        assert_eq!(advice.scope, None);
        let fact = advice.pages_elsewhere.unwrap();
        assert!(
            fact.starts_with(
                "the records' pages are on https://pages.example.net/record/, another site"
            ),
            "{fact}"
        );
        assert!(
            fact.contains("bridge it as its own repository, or set scope (--scope) if it is yours")
        );

        // DiVA: the only URL is the National Library's URN resolver, another site and a
        // resolver: no scope there, and the records' contents said plainly.
        let diva = advice_on("diva", "auto");
        assert_eq!(diva.suggestion, None, "{diva:?}");
        assert_eq!(diva.scope, None);
        let carry = diva.contents.unwrap();
        assert!(
            carry.contains("carry only a resolver's URL, urn.kb.example.se (8)")
                && carry.ends_with("; no URL on this site"),
            "{carry}"
        );
    }

    /// Rule 4: when nothing works, what the records carry, plainly; and an export's hint
    /// follows it (the Handles hint was given for a repository of DOIs).
    #[test]
    fn when_nothing_works_it_says_what_the_records_carry() {
        let dois = records(4, |i| {
            vec![
                format!("https://doi.org/10.5555/r.{i}"),
                "Smith, J. (2020). A record. Journal, 1.".to_owned(),
            ]
        });
        let advice = at("https://repo.example.org/oai", &dois);
        assert_eq!(advice.suggestion, None);
        let hint = advice.hint().unwrap();
        assert_eq!(
            hint,
            "the 4 live records of the sample carry only a DOI (4) and a citation (4); no URL on this site"
        );
        assert!(
            !hint.contains("Handle") && !hint.contains("dspace"),
            "{hint}"
        );

        // Handles in DSpace's shape: DSpace's row shows, and is tried.
        let handles: Vec<Record> = (1..=4)
            .map(|i| Record {
                identifier: format!("oai:h:123456789/{i}"),
                dc_identifiers: vec![format!("http://hdl.handle.net/123456789/{i}")],
                ..Record::default()
            })
            .collect();
        let source = Source::Oai(Url::parse("https://repo.example.org/oai").unwrap());
        let advice = advice_for(&source, &Identify::default(), &handles, "generic", &[]);
        let hint = advice.hint().unwrap();
        assert!(
            hint.starts_with(
                "platform = \"dspace\" (--platform dspace) gives 4 of the first 4 live records a landing page (100%), e.g. https://repo.example.org/handle/123456789/1, "
            ),
            "{hint}"
        );
        // No live record: nothing to say.
        assert_eq!(at("https://repo.example.org/oai", &[]).hint(), None);
    }

    /// A DSpace 7's records show their UI on another host: `ui_url` is tried there, on the
    /// baseURL's site; on another site it is a fact.
    #[test]
    fn a_dspace_ui_elsewhere_is_tried_or_said() {
        let advice = advice_on("dspace7", "auto");
        let s = advice.suggestion.expect("the UI's ui_url");
        assert_eq!(s.setting, "ui_url = \"https://dspace7.example.org/\"");
        assert_eq!(s.flag, "--ui-url https://dspace7.example.org/");
        assert_eq!((s.with_landing_page, s.live_records), (6, 6));
        assert!(
            s.examples
                .iter()
                .all(|e| e.starts_with("https://dspace7.example.org/handle/")),
            "{s:?}"
        );

        let records: Vec<Record> = (1..=3)
            .map(|i| Record {
                identifier: format!("oai:h:123456789/{i}"),
                dc_identifiers: vec![format!("https://ui.example.net/handle/123456789/{i}")],
                ..Record::default()
            })
            .collect();
        let source =
            Source::Oai(Url::parse("https://api.repo.example.org/server/oai/request").unwrap());
        let advice = advice_for(&source, &Identify::default(), &records, "auto", &[]);
        assert_eq!(advice.suggestion, None, "{advice:?}");
        let fact = advice.ui_elsewhere.unwrap();
        assert!(
            fact.contains("under https://ui.example.net/, another site"),
            "{fact}"
        );
    }

    #[test]
    fn the_suggested_scope_covers_most_urls() {
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
            suggest_scope(urls.iter()),
            Some(("https://h/handle/".to_owned(), 3))
        );
        // A file at the root suggests the host itself.
        let root = [Url::parse("https://h/record.html").unwrap()];
        assert_eq!(
            suggest_scope(root.iter()),
            Some(("https://h/".to_owned(), 1))
        );
        assert_eq!(suggest_scope([].iter()), None);
    }
}
