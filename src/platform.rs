//! Where a record's landing page is, by the repository platform that made the record: the
//! landing rule. Pure.
//!
//! Google's rule (a `dc:identifier` URL under the baseURL's directory) is the base case,
//! `generic`, and is what [`classify`] does alone. Every other platform is a row of data
//! ([`row`]: the built-in table `src/platform/platforms.toml`, and an operator's `[[platform]]`
//! tables), each with its signs and its landing rule, and this module is their interpreter: it
//! counts the signs of every row over the first records ([`detect_over`]) and applies the chosen
//! row's rule to each record ([`Landing::classes`]). The rule kinds are four:
//! - a Handle, as a page of the platform's UI (DSpace writes the Handle as `dc:identifier`,
//!   `http://hdl.handle.net/P/S` or the local `{ui}/handle/P/S`, and serves `{ui}/handle/P/S`);
//! - a Dublin Core element's value matched by a pattern (EPrints writes the abstract page as a
//!   `dc:relation`, bepress Digital Commons as a `dc:identifier` beside its files);
//! - a template over the OAI identifier's parts, the DOI or the Handle (Islandora 2's
//!   `oai:host:node-N` is `/node/N`);
//! - a configured `landing_template` ([`Template`]), the operator's.
//!
//! `docs/platforms.md` has each platform's sources. The rule turns a record into the same
//! [`Class`] list the generic classification gives, the landing page first, so that the sitemap
//! and every landing-page profile read one notion of a record's landing page.

mod row;

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use oai_pmh::{DcElement, Identify, Record};
use smallvec::SmallVec;
use url::Url;

use crate::classify::{self, Class, Drop, Pid};
use crate::scope::Scope;
use row::{Element, Pattern, PatternPart, RowLanding, SchemeSpec, SiteSpec};
pub use row::{Registry, Row, RowSpec};

/// A record's classes, on the stack for the usual few identifiers.
pub(crate) type Classes<'a> = SmallVec<[Class<'a>; 8]>;

/// A repository platform whose landing pages the bridge knows how to find: Google's rule
/// (`generic`), or a row of the platforms table.
#[derive(Clone, Debug, Default)]
pub struct Platform(Option<Arc<Row>>);

impl Platform {
    /// Google's same-directory rule, exactly.
    pub fn generic() -> Self {
        Self(None)
    }

    /// The built-in platform `name`; `generic` for an unknown name.
    pub fn named(name: &str) -> Self {
        Self(Registry::default().get(name).cloned())
    }

    /// The name used in `bridge.toml`, on the command line, in summaries and in metrics.
    pub fn as_str(&self) -> &str {
        self.0.as_ref().map_or("generic", |r| r.name())
    }

    /// Its row (none for Google's rule).
    pub fn row(&self) -> Option<&Arc<Row>> {
        self.0.as_ref()
    }

    /// Every built-in platform's name, `generic` first (the metrics' label values).
    pub fn builtin_names() -> impl Iterator<Item = &'static str> {
        std::iter::once("generic").chain(row::BUILTIN.iter().map(|r| r.spec.name.as_str()))
    }
}

impl PartialEq for Platform {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Platform {}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `platform` setting: a platform's name, or `auto` (found from what the repository sends).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum Setting {
    /// Detect it ([`detect_over`]); `generic` when nothing is recognised with confidence.
    #[default]
    Auto,
    /// This platform (`generic`, or a row's name), whatever the repository looks like.
    Fixed(String),
}

impl Setting {
    /// Reads `auto` or a platform's name (case-insensitive) among `registry`'s.
    pub fn parse(text: &str, registry: &Registry) -> Option<Self> {
        let name = text.trim().to_ascii_lowercase();
        match name.as_str() {
            "auto" => Some(Setting::Auto),
            "generic" => Some(Setting::Fixed(name)),
            _ => registry
                .get(&name)
                .map(|r| Setting::Fixed(r.name().to_owned())),
        }
    }

    /// The spelling [`Setting::parse`] reads.
    pub fn as_str(&self) -> &str {
        match self {
            Setting::Auto => "auto",
            Setting::Fixed(p) => p,
        }
    }
}

/// How a repository's landing pages are found, as configured: the `platform`, `ui_url` and
/// `landing_template` keys of a repository, and the `[[platform]]` rows of the configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LandingSettings {
    /// The platform, or `auto`.
    pub platform: Setting,
    /// DSpace: where the UI serves `/handle/P/S`, when not at the baseURL's scheme, host and
    /// port (DSpace 7 and later serve OAI from the REST host).
    pub ui_url: Option<Url>,
    /// A landing page made from an identifier; it takes precedence over the platform.
    pub template: Option<Template>,
    /// The platforms `auto` tries and `platform` names: the built-in rows and the
    /// configuration's `[[platform]]` tables.
    pub platforms: Registry,
    /// What the web said when `ui_url` or `template` was learned rather than configured
    /// ([`crate::learn`]), in words; `None` when nothing was learned.
    pub learned: Option<String>,
    /// Where to ask what the records alone cannot tell (`crate::learn`); `None`: ask nothing
    /// besides the OAI-PMH requests. The commands set it from the environment
    /// ([`Resolvers::from_env`]); a job made in code asks nothing unless told.
    pub web: Option<Resolvers>,
    /// The sites' robots.txt as read for this run (`crate::learn::robots`): what they disallow
    /// for the major crawlers is left out.
    pub robots: Option<Arc<Robots>>,
    /// The sites (origins) a sample of the pages was seen on when the rule was learned, beside
    /// the baseURL's and the configured ones: a scope widened to `arxiv.org` from
    /// `export.arxiv.org`. Their robots.txt is read too.
    pub sites: Vec<Url>,
    /// `content_files = false`: the records' content files are left out
    /// ([`Drop::ContentFileLeftOut`]), the landing pages alone listed, as DSpace's own sitemaps do.
    pub leave_out_files: bool,
}

/// The robots.txt of the sites a repository's pages are on, for the crawlers a sitemap is
/// read by: a URL disallowed for Googlebot or Bingbot is left out ([`Drop::RobotsDisallowed`]),
/// as a search console reports each as an error. Only URLs of a site whose robots.txt was read
/// are judged.
pub struct Robots {
    /// Per origin (`https://host`), its rules for each crawler.
    sites: Vec<(String, Vec<texting_robots::Robot>)>,
    /// The robots.txt bodies' digest: a change of them re-renders (part of the rule's key).
    digest: String,
    /// The bodies as read, for the state to keep ([`Robots::read_as`]).
    copies: Vec<crate::store::RobotsCopy>,
}

impl Robots {
    /// The crawlers judged.
    pub const CRAWLERS: [&'static str; 2] = ["Googlebot", "Bingbot"];

    /// Rules from each origin's robots.txt body; an origin whose body does not parse is left out,
    /// and so is one that disallows nothing (no `Disallow` line with a path, as a missing
    /// robots.txt): its URLs need no judging, which is most of what judging them would cost.
    pub fn new(bodies: &[(String, Vec<u8>)]) -> Self {
        let sites = bodies
            .iter()
            .filter(|(_, body)| disallows_any(body))
            .filter_map(|(origin, body)| {
                let robots: Option<Vec<_>> = Self::CRAWLERS
                    .iter()
                    .map(|agent| texting_robots::Robot::new(agent, body).ok())
                    .collect();
                Some((origin.clone(), robots?))
            })
            .collect();
        let digest = bodies
            .iter()
            .map(|(origin, body)| format!("{origin}:{:016x}", xxhash_rust::xxh3::xxh3_64(body)))
            .collect::<Vec<_>>()
            .join(",");
        Self {
            sites,
            digest,
            copies: Vec::new(),
        }
    }

    /// These rules, made of `copies` (what each site's robots.txt said, and when it was read),
    /// which the state keeps for a run whose read fails ([`crate::learn::keep_robots`]).
    pub(crate) fn read_as(mut self, copies: Vec<crate::store::RobotsCopy>) -> Self {
        self.copies = copies;
        self
    }

    /// The robots.txt bodies these rules were made of, as the state keeps them.
    pub(crate) fn copies(&self) -> &[crate::store::RobotsCopy] {
        &self.copies
    }

    /// Whether `url` (in normal form, as the landing rules give it) is disallowed for one of
    /// the crawlers by its site's robots.txt.
    pub fn disallows(&self, url: &str) -> bool {
        self.sites.iter().any(|(origin, robots)| {
            let Some(rest) = url.strip_prefix(origin.as_str()) else {
                return false;
            };
            // The path and query, as the rules match them. Given whole, the URL would be parsed
            // again for each crawler (`Robot::allowed` keeps only what follows the host), a
            // fifth of a small record's cost; a normal URL's path needs no more encoding.
            let path = match rest.split_once('#').map_or(rest, |(p, _)| p) {
                "" => "/",
                p if p.starts_with('/') => p,
                _ => return false,
            };
            robots.iter().any(|r| !r.allowed(path))
        })
    }
}

/// Whether a robots.txt body has a `Disallow` line with a path: one without any allows
/// everything to every crawler (an empty `Disallow:` allows all, RFC 9309 section 2.2.2).
fn disallows_any(body: &[u8]) -> bool {
    body.split(|&b| b == b'\n').any(|line| {
        let line = line.trim_ascii_start();
        let Some(head) = line.get(..8) else {
            return false;
        };
        if !head.eq_ignore_ascii_case(b"disallow") {
            return false;
        }
        let rest = line[8..].trim_ascii_start();
        let value = rest.strip_prefix(b":").unwrap_or(rest);
        let value = value.split(|&b| b == b'#').next().unwrap_or_default();
        !value.trim_ascii().is_empty()
    })
}

impl fmt::Debug for Robots {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Robots")
            .field("digest", &self.digest)
            .finish()
    }
}

impl PartialEq for Robots {
    fn eq(&self, other: &Self) -> bool {
        self.digest == other.digest
    }
}

impl Eq for Robots {}

impl std::hash::Hash for Robots {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.digest.hash(state);
    }
}

/// The resolvers learning asks ([`crate::learn`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Resolvers {
    /// `https://hdl.handle.net/`.
    pub handle: Url,
    /// `https://doi.org/`.
    pub doi: Url,
}

/// Whether the commands learn from the web, and where: set once by the binary's `main`
/// ([`Resolvers::use_environment`]); unset in a program that embeds the library (its tests
/// among them), which then asks nothing besides the OAI-PMH requests unless a job says so.
static COMMANDS_WEB: std::sync::OnceLock<Option<Resolvers>> = std::sync::OnceLock::new();

impl Resolvers {
    /// Makes the commands learn as the environment says ([`Resolvers::from_env`]): called by
    /// the binary's `main`.
    pub fn use_environment() {
        let _ = COMMANDS_WEB.set(Self::from_env());
    }

    /// What the commands' repositories learn from: the environment's, once
    /// [`Resolvers::use_environment`] was called; `None` before.
    pub fn for_commands() -> Option<Self> {
        COMMANDS_WEB.get().cloned().flatten()
    }

    /// The public resolvers, or those `OAI_BRIDGE_HANDLE_RESOLVER` and
    /// `OAI_BRIDGE_DOI_RESOLVER` name; `None` when `OAI_BRIDGE_LEARN` is `off` (or `0`, `false`,
    /// `no`).
    pub fn from_env() -> Option<Self> {
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

impl LandingSettings {
    /// The platform `platform` names (`generic` when it names none).
    pub fn fixed(&self) -> Option<Platform> {
        match &self.platform {
            Setting::Auto => None,
            Setting::Fixed(name) => Some(Platform(self.platforms.get(name).cloned())),
        }
    }

    /// Whether a harvest of `source` must read `dc:relation`: a rule may find the landing page
    /// there (EPrints' abstract page), and a template may take its DOI from one. Under `auto`,
    /// only where such a platform may be found: at the endpoint of a row that reads relations
    /// (EPrints' `/cgi/oai2`), or a Static Repository file, whose baseURL is known only once it
    /// is read. Elsewhere the records are read and stored as before platforms (a store keeps
    /// the fields it was made with; one that would need more is started anew).
    pub fn reads_relations(&self, source: &oai_pmh::Source) -> bool {
        if self.template.is_some() {
            return true;
        }
        match (&self.platform, source) {
            (Setting::Fixed(_), _) => self
                .fixed()
                .and_then(|p| p.row().map(|r| r.reads_relations()))
                .unwrap_or(false),
            (Setting::Auto, oai_pmh::Source::File(_)) => true,
            (Setting::Auto, oai_pmh::Source::Oai(base)) => {
                let path = base.path().trim_end_matches('/');
                self.platforms.rows().any(|r| {
                    r.reads_relations()
                        && r.spec.endpoint.iter().any(|e| path.ends_with(e.as_str()))
                })
            }
        }
    }

    /// Spelled out for a settings fingerprint.
    pub fn key(&self) -> String {
        format!(
            "platform={} ui_url={:?} template={:?}{}",
            self.platform.as_str(),
            self.ui_url.as_ref().map(Url::as_str),
            self.template.as_ref().map(Template::as_str),
            self.platforms.fingerprint(),
        ) + if self.leave_out_files {
            " content_files=false"
        } else {
            ""
        }
    }
}

/// Puts the first persistent identifier of the first kind in `order` that the record carries
/// before its other persistent identifiers: the profiles' `cite-as` is the first one. The other
/// classes keep their order.
fn prefer_cite_as(order: &[row::CiteAs], out: &mut Classes<'_>) {
    let Some(first) = out.iter().position(|c| matches!(c, Class::PersistentId(_))) else {
        return;
    };
    let preferred = order.iter().find_map(|kind| {
        out.iter()
            .position(|c| matches!(c, Class::PersistentId(pid) if kind.is(pid)))
    });
    if let Some(at) = preferred {
        out[first..=at].rotate_right(1);
    }
}

/// A placeholder of a [`Template`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Placeholder {
    /// A Handle, `prefix/suffix`, from any `dc:identifier` spelling.
    Handle,
    /// A DOI, `10.NNNN/suffix`, from any `dc:identifier` (or `dc:relation`) spelling.
    Doi,
    /// The DOI's suffix, after its first `/`.
    DoiSuffix,
    /// The part of the OAI identifier after its last `:`.
    OaiLocal,
    /// A row's: the site's root (`https://host/path/`), at the start only.
    Site,
    /// A row's: a named group of its `oai_identifier` pattern.
    Group(String),
}

impl Placeholder {
    /// The placeholders a configured template may use.
    const CONFIGURED: [(&'static str, Placeholder); 4] = [
        ("handle", Placeholder::Handle),
        ("doi", Placeholder::Doi),
        ("doi_suffix", Placeholder::DoiSuffix),
        ("oai_local", Placeholder::OaiLocal),
    ];
}

/// A landing-page template such as `https://host/records/{oai_local}`: literal text and
/// placeholders, checked when the configuration loads.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Template {
    text: String,
    parts: Vec<Part>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Part {
    Text(String),
    Value(Placeholder),
}

impl Template {
    /// Parses and checks a template: placeholders `{handle}`, `{doi}`, `{doi_suffix}`,
    /// `{oai_local}`, at least one of them, and an absolute http(s) URL with a host once they
    /// are filled in. The error says what is wrong, for the key's message.
    pub fn parse(text: &str) -> Result<Self, String> {
        let template = Self::read(text, |name| {
            Placeholder::CONFIGURED
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, p)| p.clone())
                .ok_or_else(|| {
                    format!(
                        "unknown placeholder {{{name}}}; the placeholders are {{handle}}, {{doi}}, {{doi_suffix}} and {{oai_local}}"
                    )
                })
        })?;
        // The scheme and host are the template's own: a record's value may not choose the host.
        let head = match template.parts.first() {
            Some(Part::Text(t)) => t.as_str(),
            _ => "",
        };
        let after_scheme = head
            .split_once("://")
            .map(|(_, rest)| rest)
            .unwrap_or_default();
        if !after_scheme.contains('/') {
            return Err(
                "a placeholder before the path: the scheme and host must be written out, e.g. https://host/records/{oai_local}"
                    .to_owned(),
            );
        }
        let sample = template.fill(|_| Some("10.1234/sample-1"));
        match Url::parse(&sample) {
            Ok(url) if matches!(url.scheme(), "http" | "https") && url.host_str().is_some() => {
                Ok(template)
            }
            Ok(url) => Err(format!(
                "filled in, it is {sample:?}: not an http(s) URL with a host (scheme {:?})",
                url.scheme()
            )),
            Err(e) => Err(format!("filled in, it is {sample:?}, not a URL: {e}")),
        }
    }

    /// A row's template: `{site}` first, then a path with the configured placeholders and the
    /// named `groups` of the row's OAI identifier pattern.
    fn parse_row(text: &str, groups: &[&str]) -> Result<Self, String> {
        if !text.starts_with("{site}") {
            return Err("a platform's template starts with {site}".to_owned());
        }
        Self::read(text, |name| {
            if name == "site" {
                return Ok(Placeholder::Site);
            }
            if let Some((_, p)) = Placeholder::CONFIGURED.iter().find(|(n, _)| *n == name) {
                return Ok(p.clone());
            }
            if groups.contains(&name) {
                return Ok(Placeholder::Group(name.to_owned()));
            }
            Err(format!(
                "unknown placeholder {{{name}}}: {{site}}, {{handle}}, {{doi}}, {{doi_suffix}}, {{oai_local}} or a named group of oai_identifier ({groups:?})"
            ))
        })
    }

    /// Splits `text` into literal parts and placeholders named as `placeholder` reads them;
    /// at least one placeholder besides `{site}`.
    fn read(
        text: &str,
        placeholder: impl Fn(&str) -> Result<Placeholder, String>,
    ) -> Result<Self, String> {
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                parts.push(Part::Text(rest[..open].to_owned()));
            }
            let Some(close) = rest[open..].find('}') else {
                return Err(format!("an unclosed {{ at {:?}", &rest[open..]));
            };
            let name = &rest[open + 1..open + close];
            let p = placeholder(name)?;
            if p == Placeholder::Site && !parts.is_empty() {
                return Err("{site} stands at the start only".to_owned());
            }
            parts.push(Part::Value(p));
            rest = &rest[open + close + 1..];
        }
        if rest.contains('}') {
            return Err(format!("a }} without {{ in {rest:?}"));
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_owned()));
        }
        if !parts
            .iter()
            .any(|p| matches!(p, Part::Value(v) if *v != Placeholder::Site))
        {
            return Err(
                "no placeholder: every record would get the same landing page; use {handle}, {doi}, {doi_suffix} or {oai_local}"
                    .to_owned(),
            );
        }
        Ok(Self {
            text: text.to_owned(),
            parts,
        })
    }

    /// The template as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether it uses `placeholder`.
    fn uses(&self, placeholder: Placeholder) -> bool {
        self.parts
            .iter()
            .any(|p| matches!(p, Part::Value(v) if *v == placeholder))
    }

    /// The template's scheme, host and port, with the path `/`: its part of the scope.
    fn origin(&self) -> Option<Url> {
        let url = Url::parse(&self.fill(|_| Some("x"))).ok()?;
        url.join("/").ok()
    }

    /// The text with each placeholder's value, percent-encoded where a URL needs it (but
    /// `{site}`, a URL already); `None` when a value is missing.
    fn try_fill<'v>(
        &self,
        mut value: impl FnMut(&Placeholder) -> Option<&'v str>,
    ) -> Option<String> {
        let mut out = String::with_capacity(self.text.len() + 32);
        for part in &self.parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Value(Placeholder::Site) => out.push_str(value(&Placeholder::Site)?),
                Part::Value(p) => push_encoded(&mut out, value(p)?),
            }
        }
        Some(out)
    }

    fn fill<'v>(&self, value: impl FnMut(&Placeholder) -> Option<&'v str>) -> String {
        self.try_fill(value).unwrap_or_default()
    }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Appends `value` with what may not stand raw in a URL's path or query percent-encoded: an
/// identifier's `/` and `:` are kept (`doi:10.1/x`), a `?`, `&`, `=`, `+` or `#` would change
/// the URL's meaning.
fn push_encoded(out: &mut String, value: &str) {
    const VALUE: &percent_encoding::AsciiSet = &classify::NOT_IN_PATH
        .add(b'&')
        .add(b'=')
        .add(b'+')
        .add(b'^')
        .add(b'|')
        .add(b'\\')
        .add(b'[')
        .add(b']');
    out.push_str(&Cow::from(percent_encoding::utf8_percent_encode(
        value, VALUE,
    )));
}

/// The platform in effect, and why: configured, or what detection saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Detected {
    /// The platform whose rule applies.
    pub platform: Platform,
    /// Whether `platform` was configured rather than detected.
    pub configured: bool,
    /// What it was found from, in words (`the baseURL's path ends in /cgi/oai2, ...`).
    pub evidence: String,
    /// Under `auto`, when no platform's rule and not Google's applies: what the records show
    /// without one.
    pub fallback: Fallback,
    /// Under `auto`, when nothing gives most records a landing page: what their URLs are, in
    /// words, with what an operator can do (for the error when there is nothing to publish).
    pub holds: Option<String>,
}

/// What `auto` finds in records that no platform's rule and not Google's gives landing pages.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Fallback {
    /// Nothing: Google's rule over the baseURL's directory.
    #[default]
    None,
    /// Most records have a `dc:identifier` URL on the baseURL's site (its host, or one sharing
    /// its registered domain) outside its directory: Google's rule over this wider scope, the
    /// origin as the records spell it.
    Widened(Scope),
    /// Most records' OAI identifiers are http(s) URLs on the baseURL's site: each is its
    /// record's page, within this scope.
    OaiUrl(Scope),
}

impl Detected {
    /// `platform`, as the configuration sets it.
    pub fn configured(platform: Platform) -> Self {
        Self {
            platform,
            configured: true,
            evidence: "set in the configuration".to_owned(),
            fallback: Fallback::None,
            holds: None,
        }
    }
}

impl fmt::Display for Detected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let how = if self.configured {
            "configured"
        } else {
            "detected"
        };
        write!(f, "{} ({how}: {})", self.platform, self.evidence)
    }
}

/// How many live records [`detect_over`] looks at, at most.
pub(crate) const SAMPLE: usize = 200;

/// The platform of a repository that is set to `auto`, from what it really sends: its baseURL's
/// path, Identify, and the records of `sample` (the first page, or the first stored records; at
/// most [`SAMPLE`] live ones are read), under the rows of `registry`. Google's rule (over
/// `scope` when one is configured: it replaces the baseURL's directory) stays wherever it gives
/// most records a landing page. A row is chosen only when its rule gives most of the records a
/// landing page, and (unless the row says its pages are enough) one of its signs shows: a
/// baseURL path alone is evidence, not proof (another server can sit at `/oai/request`). Rows
/// are tried in order, the operator's first. Without live records nothing is chosen.
pub(crate) fn detect_over(
    base: Option<&Url>,
    identify: &Identify,
    sample: &[Record],
    scope: Option<&Scope>,
    registry: &Registry,
) -> Detected {
    let live: Vec<&Record> = sample
        .iter()
        .filter(|r| !r.deleted && !r.unreadable())
        .take(SAMPLE)
        .collect();
    let google = scope
        .cloned()
        .or_else(|| base.and_then(Scope::from_base_url));
    let generic = google.map_or(0, |scope| {
        live.iter()
            .filter(|r| {
                r.dc_identifiers
                    .iter()
                    .any(|v| matches!(classify::class(v, &scope), Class::LandingPage(_)))
            })
            .count()
    });
    let of = |n: usize| format!("{n} of the first {} live records", live.len());
    let most = |n: usize| !live.is_empty() && n * 2 >= live.len();
    // Records Google's rule already gives a landing page: the base case stays where it works.
    if most(generic) {
        return Detected {
            platform: Platform::generic(),
            configured: false,
            evidence: format!(
                "{} have a dc:identifier landing page under the baseURL's directory (Google's rule)",
                of(generic)
            ),
            fallback: Fallback::None,
            holds: None,
        };
    }
    let mut seen = Vec::new();
    for row in registry.rows() {
        let signs = Signs::of(row, base, identify, &live);
        if signs.shown(row, most) {
            let mut why = signs.words(row, most, &of);
            why.push(format!("{} {}", of(signs.hits), row.spec.evidence));
            return Detected {
                platform: Platform(Some(row.clone())),
                configured: false,
                evidence: why.join(", "),
                fallback: Fallback::None,
                holds: None,
            };
        }
        // An endpoint of one path segment (`/oai`) is too common to be worth saying.
        if signs.endpoint.is_some_and(|e| e.matches('/').count() >= 2) {
            let a = if row.spec.title.starts_with(['A', 'E', 'I', 'O', 'U']) {
                "an"
            } else {
                "a"
            };
            seen.push(format!(
                "{a} {}-like endpoint, but {} {}",
                row.spec.title,
                of(signs.hits),
                row.spec.evidence
            ));
        }
    }
    if live.is_empty() {
        seen.push("no live record to look at".to_owned());
    }
    let mut evidence = if seen.is_empty() {
        "nothing platform-specific recognised".to_owned()
    } else {
        seen.join("; ")
    };
    // Without a configured scope (which keeps Google's rule exactly), what the records show of
    // their pages on the baseURL's site.
    let fallback = match (base, scope) {
        (Some(base), None) => site_fallback(base, &live, &most, &of, &mut evidence),
        _ => Fallback::None,
    };
    let holds = match (base, scope, &fallback) {
        (Some(base), None, Fallback::None) => records_hold(base, &live, &most, &of),
        _ => None,
    };
    Detected {
        platform: Platform::generic(),
        configured: false,
        evidence,
        fallback,
        holds,
    }
}

/// Whether `row` shows on a repository as [`detect_over`] counts it: its own rule gives most of
/// the first live records of `sample` a landing page, and the signs its `requires` asks for show
/// (the baseURL's path, Identify, the sample identifier, the OAI identifiers' shape). The signs
/// in words, as detection's evidence says them; `None` when they are absent. A row that does not
/// show is never offered: its rule may well give pages, from what another platform wrote.
pub(crate) fn shown(
    row: &Row,
    base: Option<&Url>,
    identify: &Identify,
    sample: &[Record],
) -> Option<String> {
    let live: Vec<&Record> = sample
        .iter()
        .filter(|r| !r.deleted && !r.unreadable())
        .take(SAMPLE)
        .collect();
    let of = |n: usize| format!("{n} of the first {} live records", live.len());
    let most = |n: usize| !live.is_empty() && n * 2 >= live.len();
    let signs = Signs::of(row, base, identify, &live);
    signs.shown(row, most).then(|| {
        let mut why = signs.words(row, most, &of);
        why.push(format!("{} {}", of(signs.hits), row.spec.evidence));
        why.join(", ")
    })
}

/// Whether `url` names a content file rather than a page: by its extension, or in the shape of
/// a platform's files (any row's `content_files`: Digital Commons' `cgi/viewcontent.cgi`,
/// DSpace's `bitstream/`), tried on its path from each directory down, as the site may be
/// anywhere above it.
pub(crate) fn names_file(url: &Url, registry: &Registry) -> bool {
    if classify::content_type(url).is_some() {
        return true;
    }
    let path = url.path().trim_start_matches('/');
    let tail = match url.query() {
        Some(q) => format!("{path}?{q}"),
        None => path.to_owned(),
    };
    let starts = std::iter::once(0).chain(path.match_indices('/').map(|(i, _)| i + 1));
    starts
        .into_iter()
        .any(|at| registry.rows().any(|row| row.is_content_file(&tail[at..])))
}

/// Whether `host` is the baseURL's host `base`, or shares its registered domain
/// (`export.arxiv.org` and `arxiv.org`; `www.host` and `host`), by the Public Suffix List: a
/// page there is the repository's. Addresses (`127.0.0.1`) only as themselves.
pub(crate) fn same_site(base: &str, host: &str) -> bool {
    let (base, host) = (base.trim_end_matches('.'), host.trim_end_matches('.'));
    if base.eq_ignore_ascii_case(host) {
        return true;
    }
    let is_address = |h: &str| h.parse::<std::net::IpAddr>().is_ok() || h.starts_with('[');
    if is_address(base) || is_address(host) {
        return false;
    }
    let (base, host) = (base.to_ascii_lowercase(), host.to_ascii_lowercase());
    matches!((psl::domain_str(&base), psl::domain_str(&host)), (Some(a), Some(b)) if a == b)
}

/// The origin (`https://host/`, `http://host:8080/`) of an http(s) URL on the site of `base`
/// ([`same_site`]) that is a page, not a file by its extension.
fn site_page_origin(value: &str, base: &Url) -> Option<String> {
    let url = Url::parse(value.trim()).ok()?;
    if !matches!(url.scheme(), "http" | "https")
        || classify::content_type(&url).is_some()
        || classify::is_resolver(&url)
    {
        return None;
    }
    let host = url.host_str()?;
    if !same_site(base.host_str()?, host) {
        return None;
    }
    Some(url[..url::Position::BeforePath].to_owned() + "/")
}

/// Under `auto` with no platform found: a wider scope when most records have a `dc:identifier`
/// page on the baseURL's site outside its directory (pages beside the OAI path, on a sibling
/// host, or spelt `http`/`www.` where the baseURL is not), else each OAI identifier as its
/// record's page when most are http(s) URLs on the site. Adds what it found to `evidence`.
fn site_fallback(
    base: &Url,
    live: &[&Record],
    most: &impl Fn(usize) -> bool,
    of: &impl Fn(usize) -> String,
    evidence: &mut String,
) -> Fallback {
    // Each record counts once, for the first origin it shows; the origin most records show wins.
    let tally = |origin_of: &dyn Fn(&Record) -> Option<String>| {
        let mut origins: Vec<(String, usize)> = Vec::new();
        let mut records = 0;
        for record in live {
            let Some(origin) = origin_of(record) else {
                continue;
            };
            records += 1;
            match origins.iter_mut().find(|(o, _)| *o == origin) {
                Some((_, n)) => *n += 1,
                None => origins.push((origin, 1)),
            }
        }
        let best = origins.into_iter().rev().max_by_key(|(_, n)| *n);
        (records, best)
    };
    // The scope over the origin most records show, when most show one.
    let scope = |(records, best): (usize, Option<(String, usize)>)| {
        let (origin, _) = best.filter(|_| most(records))?;
        let scope = Url::parse(&origin)
            .ok()
            .and_then(|u| Scope::from_prefixes(&[u]))?;
        Some((records, origin, scope))
    };
    let identifiers = tally(&|r: &Record| {
        r.dc_identifiers
            .iter()
            .find_map(|v| site_page_origin(v, base))
    });
    if let Some((records, origin, scope)) = scope(identifiers) {
        evidence.push_str(&format!(
            "; {} have a dc:identifier URL on the repository's site outside the baseURL's directory: the scope is widened to {origin}",
            of(records)
        ));
        return Fallback::Widened(scope);
    }
    if let Some((records, origin, scope)) =
        scope(tally(&|r: &Record| site_page_origin(&r.identifier, base)))
    {
        evidence.push_str(&format!(
            "; {} have OAI identifiers that are URLs on the repository's site: each is its record's page, under {origin}",
            of(records)
        ));
        return Fallback::OaiUrl(scope);
    }
    Fallback::None
}

/// What the first live records hold when nothing gives most of them a landing page, in words
/// with what an operator can do: when most have URLs only on another registered domain than
/// the baseURL's (HAL's portals, `hal.science`, beside its API host), which hosts; when most
/// have only a resolver's URL, one that carries a URN (DiVA's
/// `http://urn.kb.se/resolve?urn=urn:nbn:se:...`), which redirects and is no page of theirs.
fn records_hold(
    base: &Url,
    live: &[&Record],
    most: &impl Fn(usize) -> bool,
    of: &impl Fn(usize) -> String,
) -> Option<String> {
    let base_host = base.host_str()?;
    let mut elsewhere: Vec<(String, usize)> = Vec::new();
    let (mut away, mut resolved) = (0, 0);
    let mut example = None;
    for record in live {
        let (mut origin, mut resolver, mut on_site) = (None, None, false);
        for value in &record.dc_identifiers {
            let value = value.trim();
            if !classify::is_http_text(value) || classify::pid_of(value).is_some() {
                continue;
            }
            let Ok(url) = Url::parse(value) else {
                continue;
            };
            let Some(host) = url.host_str() else {
                continue;
            };
            if same_site(base_host, host) {
                on_site = true;
                break;
            }
            if url[url::Position::BeforePath..]
                .to_ascii_lowercase()
                .contains("urn:")
            {
                resolver.get_or_insert(value);
            } else if origin.is_none() {
                origin = Some(url[..url::Position::BeforePath].to_owned() + "/");
            }
        }
        if on_site {
            continue;
        }
        if let Some(origin) = origin {
            away += 1;
            match elsewhere.iter_mut().find(|(o, _)| *o == origin) {
                Some((_, n)) => *n += 1,
                None => elsewhere.push((origin, 1)),
            }
        } else if let Some(value) = resolver {
            resolved += 1;
            example.get_or_insert(value);
        }
    }
    if most(away) {
        // Most records first; a stable sort keeps the first met first among equals.
        elsewhere.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        let mut hosts = elsewhere
            .iter()
            .take(3)
            .map(|(o, n)| format!("{o} ({n})"))
            .collect::<Vec<_>>()
            .join(", ");
        if elsewhere.len() > 3 {
            hosts.push_str(&format!(" and {} more", elsewhere.len() - 3));
        }
        return Some(format!(
            "{} have their URLs only on another registered domain than the baseURL's: {hosts}; a sitemap lists the pages of one site: set a landing_template (--landing-template) that makes each record's page from its identifiers, or a scope (--scope) on their host (docs/platforms.md)",
            of(away),
        ));
    }
    if most(resolved) {
        return Some(format!(
            "{} have no URL but a resolver's ({}), which redirects and is not the record's page: the records name no page of the repository to publish (docs/platforms.md says what each platform needs)",
            of(resolved),
            example.unwrap_or_default()
        ));
    }
    None
}

/// What a repository shows of one row: its endpoint, Identify, and how many of the first live
/// records match the row's OAI identifier pattern and get a landing page from its rule.
struct Signs<'a> {
    /// The ending of the baseURL's path that is the row's endpoint.
    endpoint: Option<&'a str>,
    /// Identify's name or descriptions match the row's pattern.
    identify: bool,
    /// Identify's sample identifier matches the row's pattern.
    sample: bool,
    /// Records whose OAI identifier matches the row's pattern (none without one).
    shaped: usize,
    /// Records the row's rule gives a landing page.
    hits: usize,
}

impl<'a> Signs<'a> {
    fn of(row: &'a Row, base: Option<&Url>, identify: &Identify, live: &[&Record]) -> Self {
        let path = base.map_or("", |b| b.path().trim_end_matches('/'));
        let endpoint = row
            .spec
            .endpoint
            .iter()
            .find(|e| path.ends_with(e.as_str()))
            .map(String::as_str);
        let identify_text = || {
            [
                identify.repository_name.as_str(),
                identify.descriptions.as_str(),
            ]
            .join("\n")
        };
        let shaped = row.oai_identifier.as_ref().map_or(0, |re| {
            live.iter().filter(|r| re.is_match(&r.identifier)).count()
        });
        let hits = match base.and_then(|b| Site::of(row, b)) {
            Some(site) => live.iter().filter(|r| site.hit(row, r)).count(),
            None => 0,
        };
        Self {
            endpoint,
            identify: row
                .identify
                .as_ref()
                .is_some_and(|re| re.is_match(&identify_text())),
            sample: row.sample_identifier.as_ref().is_some_and(|re| {
                identify
                    .sample_identifier
                    .as_deref()
                    .is_some_and(|s| re.is_match(s))
            }),
            shaped,
            hits,
        }
    }

    /// Whether a sign besides the landing pages shows.
    fn any(&self, most: impl Fn(usize) -> bool) -> bool {
        self.endpoint.is_some() || self.identify || self.sample || most(self.shaped)
    }

    /// Whether `row` shows: its rule gives most records a landing page, and the signs its
    /// `requires` asks for show.
    fn shown(&self, row: &Row, most: impl Fn(usize) -> bool + Copy) -> bool {
        let signs = match row.spec.requires {
            row::Requires::Landing => true,
            row::Requires::Sign => self.any(most),
            row::Requires::Endpoint => self.endpoint.is_some(),
        };
        most(self.hits) && signs
    }

    /// The signs that show, in words.
    fn words(
        &self,
        row: &Row,
        most: impl Fn(usize) -> bool,
        of: &impl Fn(usize) -> String,
    ) -> Vec<String> {
        let title = &row.spec.title;
        let mut why = Vec::new();
        if let Some(e) = self.endpoint {
            why.push(format!("the baseURL's path ends in {e} ({title})"));
        }
        if self.identify {
            why.push(format!("Identify names {title}"));
        }
        if self.sample {
            why.push(format!(
                "Identify's sample identifier is in {title}'s shape"
            ));
        }
        if row.spec.requires == row::Requires::Sign && most(self.shaped) {
            why.push(format!(
                "{} have OAI identifiers in {title}'s shape",
                of(self.shaped)
            ));
        }
        why
    }
}

/// Where a row's platform is installed, from the baseURL: the site's root URL and, without the
/// scheme, its host, port and path (`eprints.example.ac.uk/`), which `dc:*` patterns match in
/// either scheme.
struct Site {
    /// `https://host/path/`.
    url: Url,
    /// `host[:port]/path/`.
    at: String,
    /// `site = "domain"` before the records told the host: the baseURL's host, whose registered
    /// domain the pages' host shares (`url` and `at` are then the baseURL host's root).
    domain: Option<String>,
}

impl Site {
    fn of(row: &Row, base: &Url) -> Option<Self> {
        let root = match row.spec.site {
            SiteSpec::Root | SiteSpec::Domain => "/".to_owned(),
            SiteSpec::Endpoint => {
                let path = base.path().trim_end_matches('/');
                let root = row
                    .spec
                    .endpoint
                    .iter()
                    .find_map(|e| path.strip_suffix(e.trim_start_matches('/')))
                    .unwrap_or("/");
                if root.ends_with('/') {
                    root.to_owned()
                } else {
                    format!("{root}/")
                }
            }
        };
        let mut url = base.clone();
        url.set_path(&root);
        url.set_query(None);
        url.set_fragment(None);
        let host = url.host_str()?;
        let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
        let at = format!("{host}{port}{root}");
        let domain = (row.spec.site == SiteSpec::Domain).then(|| host.to_owned());
        matches!(url.scheme(), "http" | "https").then_some(Self { url, at, domain })
    }

    /// For `site = "domain"`: the site at the root of the host most of `sample`'s pages under
    /// `row`'s rule are on, as the records spell its origin; `None` when none has one.
    fn on_records_host(row: &Row, domain: &str, sample: &[Record]) -> Option<Self> {
        let RowLanding::Field {
            element, patterns, ..
        } = &row.landing
        else {
            return None;
        };
        let mut origins: Vec<(String, usize)> = Vec::new();
        for record in sample
            .iter()
            .filter(|r| !r.deleted && !r.unreadable())
            .take(SAMPLE)
        {
            let found = find_field(row, record, *element, patterns, FieldAt::Domain(domain));
            let Some(url) = found.and_then(|v| Url::parse(v.trim()).ok()) else {
                continue;
            };
            let origin = &url[..url::Position::BeforePath];
            match origins.iter_mut().find(|(o, _)| o == origin) {
                Some((_, n)) => *n += 1,
                None => origins.push((origin.to_owned(), 1)),
            }
        }
        let (origin, _) = origins.into_iter().rev().max_by_key(|(_, n)| *n)?;
        let url = Url::parse(&format!("{origin}/")).ok()?;
        let host = url.host_str()?;
        let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
        let at = format!("{host}{port}/");
        Some(Self {
            url,
            at,
            domain: None,
        })
    }

    /// Where a `dc:*` rule's values must be.
    fn field_at(&self) -> FieldAt<'_> {
        match &self.domain {
            Some(host) => FieldAt::Domain(host),
            None => FieldAt::Installation(&self.at),
        }
    }

    /// Whether `row`'s rule gives `record` a landing page here (for detection; the UI of a
    /// Handle rule is not known yet, so any Handle counts).
    fn hit(&self, row: &Row, record: &Record) -> bool {
        match &row.landing {
            RowLanding::Handle { before } => carries_handle(record, before),
            RowLanding::Template(t) => fill_row(t, row, record, self.url.as_str()).is_some(),
            RowLanding::Field {
                element, patterns, ..
            } => find_field(row, record, *element, patterns, self.field_at()).is_some(),
        }
    }
}

/// Where a `dc:*` rule's value must be to be matched against its patterns.
#[derive(Clone, Copy, Debug)]
enum FieldAt<'a> {
    /// At one installation: `host[:port]/path/` ([`Site::at`]), in either scheme.
    Installation(&'a str),
    /// At the root of any host sharing this host's registered domain ([`same_site`]).
    Domain(&'a str),
}

impl FieldAt<'_> {
    /// `rest`, a URL after its `scheme://`, after the site; `None` when it is not there.
    fn strip(self, rest: &str) -> Option<&str> {
        match self {
            FieldAt::Installation(at) => classify::strip_prefix_ignore_case(rest, at),
            FieldAt::Domain(base) => {
                let (authority, path) = rest.split_at(rest.find('/')?);
                if authority.contains('@') {
                    return None;
                }
                let host = match authority.rsplit_once(':') {
                    Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
                    _ => authority,
                };
                same_site(base, host).then(|| &path[1..])
            }
        }
    }
}

/// The OAI identifier's named groups under a row's pattern.
enum Groups<'r, 'p> {
    /// As the regex captures them.
    Captures(regex::Captures<'r>),
    /// The one group of `^oai:[^:]+:(?<NAME>[0-9]+)$`, NAME and its value, read by hand
    /// ([`row::oai_local_digits`]).
    One(&'p str, &'r str),
}

impl<'r> Groups<'r, '_> {
    /// The value of the group `name`.
    fn name(&self, name: &str) -> Option<&'r str> {
        match self {
            Groups::Captures(c) => c.name(name).map(|m| m.as_str()),
            Groups::One(own, value) => (*own == name).then_some(*value),
        }
    }
}

/// The OAI identifier's named groups under `row`'s pattern.
fn groups<'r, 'p>(row: &'p Row, record: &'r Record) -> Option<Groups<'r, 'p>> {
    if let Some(name) = &row.oai_local_digits {
        return row::oai_local_digits(&record.identifier).map(|v| Groups::One(name, v));
    }
    let caps = row.oai_identifier.as_ref()?.captures(&record.identifier)?;
    Some(Groups::Captures(caps))
}

/// A row's template filled for `record` at `site`; `None` when a value is missing.
fn fill_row(template: &Template, row: &Row, record: &Record, site: &str) -> Option<String> {
    let caps = groups(row, record);
    let mut climbs = false;
    let filled = template.try_fill(|p| {
        let value = match p {
            Placeholder::Site => Some(site),
            Placeholder::Group(name) => caps.as_ref()?.name(name),
            other => record_value(record, other),
        };
        climbs |= value.is_some_and(has_dot_segment) && *p != Placeholder::Site;
        value
    })?;
    (!climbs).then_some(filled)
}

/// A record's value of a configured placeholder: its Handle, DOI (or the DOI's suffix), or the
/// OAI identifier's part after the last `:`.
fn record_value<'r>(record: &'r Record, placeholder: &Placeholder) -> Option<&'r str> {
    let pid = |want: fn(&Pid<'r>) -> Option<&'r str>| {
        record
            .dc_identifiers
            .iter()
            .map(String::as_str)
            .chain(record.dc_values(DcElement::Relation))
            .filter_map(classify::pid_of)
            .find_map(|p| want(&p))
    };
    match placeholder {
        Placeholder::Handle => pid(|p| match p {
            Pid::Handle(h) => Some(*h),
            Pid::Doi(_) => None,
        }),
        Placeholder::Doi => pid(|p| match p {
            Pid::Doi(d) => Some(*d),
            Pid::Handle(_) => None,
        }),
        Placeholder::DoiSuffix => pid(|p| match p {
            Pid::Doi(d) => d.split_once('/').map(|(_, s)| s).filter(|s| !s.is_empty()),
            Pid::Handle(_) => None,
        }),
        Placeholder::OaiLocal => {
            let id = record.identifier.as_str();
            Some(id.rsplit(':').next().unwrap_or(id)).filter(|s| !s.is_empty())
        }
        Placeholder::Site | Placeholder::Group(_) => None,
    }
}

/// The value of `element` that is the record's page under `patterns`, at `at` (an installation,
/// [`Site::at`], or any host of a registered domain). A pattern whose placeholder the record's
/// OAI identifier does not give matches only the first or the last value, where platforms write
/// their own page.
fn find_field<'r>(
    row: &Row,
    record: &'r Record,
    element: Element,
    patterns: &[Pattern],
    at: FieldAt<'_>,
) -> Option<&'r str> {
    // Read once a pattern needs them: most `dc:*` rules' patterns name no group.
    let caps = std::cell::OnceCell::new();
    let values = row::element_values(record, element);
    let last = values.len().saturating_sub(1);
    values.iter().enumerate().find_map(|(i, &value)| {
        let value = value.trim();
        let rest = classify::strip_prefix_ignore_case(value, "https://")
            .or_else(|| classify::strip_prefix_ignore_case(value, "http://"))?;
        let rest = at.strip(rest)?;
        let edge = i == 0 || i == last;
        patterns
            .iter()
            .any(|p| {
                matches_pattern(p, rest, edge, |name| {
                    caps.get_or_init(|| groups(row, record))
                        .as_ref()
                        .and_then(|c| c.name(name))
                })
            })
            .then_some(value)
            .filter(|_| !row.is_content_file(rest))
    })
}

/// Whether `rest` (a value after its site) matches `pattern`, with the record's group values.
fn matches_pattern<'v>(
    pattern: &Pattern,
    mut rest: &str,
    edge: bool,
    group: impl Fn(&str) -> Option<&'v str>,
) -> bool {
    for part in &pattern.parts {
        match part {
            PatternPart::Text(t) => match rest.strip_prefix(t.as_str()) {
                Some(r) => rest = r,
                // A final `/` may be missing.
                None if t == "/" && rest.is_empty() => {}
                None => return false,
            },
            PatternPart::Group(name) => match group(name) {
                Some(own) => match rest.strip_prefix(own) {
                    Some(r) => rest = r,
                    None => return false,
                },
                None => {
                    if !edge {
                        return false;
                    }
                    let n = rest
                        .bytes()
                        .take_while(|b| {
                            b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')
                        })
                        .count();
                    if n == 0 {
                        return false;
                    }
                    rest = &rest[n..];
                }
            },
        }
    }
    pattern.rest || rest.is_empty() || rest == "/"
}

/// Where the records' local Handle URLs (`https://host/xmlui/handle/P/S`, DSpace's default
/// spelling since 6.0) say the UI is: the root (`https://host/xmlui/`) most of the sample's
/// local spellings share, if any. The scheme is the one written, which is often an old `http`.
pub(crate) fn dspace_ui_in(sample: &[Record]) -> Option<Url> {
    ui_in(sample, "handle/")
}

/// [`dspace_ui_in`] for a UI that serves Handles under `before` (`handle/`).
fn ui_in(sample: &[Record], before: &str) -> Option<Url> {
    let marker = format!("/{before}");
    // Counted by host and path: `http` and `https` spellings of one UI are one UI, which
    // answers `https` if any spelling says so.
    let mut roots: Vec<(String, bool, usize)> = Vec::new();
    for value in sample
        .iter()
        .filter(|r| !r.deleted)
        .take(SAMPLE)
        .flat_map(|r| &r.dc_identifiers)
    {
        if local_handle(value, None, before).is_none() {
            continue;
        }
        let Ok(url) = Url::parse(value.trim()) else {
            continue;
        };
        let Some(at) = url.path().find(&marker) else {
            continue;
        };
        let root = format!(
            "{}{}",
            &url[url::Position::BeforeHost..url::Position::BeforePath],
            &url.path()[..=at]
        );
        let https = url.scheme() == "https";
        match roots.iter_mut().find(|(r, _, _)| *r == root) {
            Some((_, secure, n)) => {
                *n += 1;
                *secure |= https;
            }
            None => roots.push((root, https, 1)),
        }
    }
    let (root, https, _) = roots.into_iter().rev().max_by_key(|(_, _, n)| *n)?;
    let scheme = if https { "https" } else { "http" };
    Url::parse(&format!("{scheme}://{root}")).ok()
}

/// The UI of a platform at `base` whose pages are Handles and that no `ui_url` names: under a
/// path of the baseURL's host (`/xmlui/`, `/jspui/`) when the records' local Handle URLs show
/// one there, else the baseURL's root. A UI the records show on another host is not taken
/// (the operator has not named it), and is returned as well, for `evidence` to say what
/// `ui_url` would give there.
fn handle_ui(
    base: &Url,
    sample: &[Record],
    before: &str,
    evidence: &mut String,
) -> (Url, Option<Url>) {
    let mut root = base.clone();
    root.set_path("/");
    root.set_query(None);
    let Some(mut ui) = ui_in(sample, before) else {
        return (root, None);
    };
    if ui.host_str() != base.host_str() {
        return (root, Some(ui));
    }
    if ui.path() == "/" {
        return (root, None);
    }
    let _ = ui.set_scheme(base.scheme());
    let _ = ui.set_port(base.port());
    evidence.push_str(&format!(
        "; the UI at {ui}, from the records' local Handle URLs"
    ));
    (ui, None)
}

/// Whether a record has a `dc:identifier` that is a Handle in any spelling, or a local
/// `/{before}P/S` URL.
fn carries_handle(record: &Record, before: &str) -> bool {
    record.dc_identifiers.iter().any(|v| {
        matches!(classify::pid_of(v), Some(Pid::Handle(h)) if parse_handle(h).is_some())
            || local_handle(v, None, before).is_some()
    })
}

/// A Handle if `text` is one: the whole `prefix/suffix`, the prefix (letters, digits and dots)
/// and the suffix (no whitespace, `?` or `#`; a trailing `/` left out). Borrowed from `text`.
fn parse_handle(text: &str) -> Option<(&str, &str, &str)> {
    let text = text.trim();
    let (prefix, suffix) = text.split_once('/')?;
    let prefix_ok = !prefix.is_empty()
        && prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.')
        && prefix.bytes().any(|b| b.is_ascii_digit());
    let suffix = suffix.trim_end_matches('/');
    let suffix_ok = !suffix.is_empty()
        && !suffix
            .chars()
            .any(|c| c.is_whitespace() || c == '?' || c == '#')
        && !has_dot_segment(suffix);
    let whole = &text[..prefix.len() + 1 + suffix.len()];
    (prefix_ok && suffix_ok).then_some((whole, prefix, suffix))
}

/// Whether a value put into a URL's path would be a `.` or `..` segment there, which would
/// climb out of where it is put (`%2e` counts: the URL standard reads it as a dot).
fn has_dot_segment(value: &str) -> bool {
    value.split('/').any(|segment| {
        let dots = segment.to_ascii_lowercase().replace("%2e", ".");
        dots == "." || dots == ".."
    })
}

/// The Handle of a `{ui}{before}P/S` URL (DSpace's local spelling, `before` = `handle/`), if it
/// is one: on the UI's host and under its path when `ui` (host, path) is given, in `http` or
/// `https` (DSpace's canonical prefix often says `http`); anywhere but under a bitstream's path
/// when not.
fn local_handle<'v>(
    value: &'v str,
    ui: Option<(&str, &str)>,
    before: &str,
) -> Option<(&'v str, &'v str, &'v str)> {
    let value = value.trim();
    let rest = value
        .strip_prefix("http://")
        .or_else(|| value.strip_prefix("https://"))?;
    let (authority, path) = rest.split_at(rest.find('/')?);
    let value_host = authority.rsplit('@').next().unwrap_or(authority);
    let value_host = value_host.split(':').next().unwrap_or(value_host);
    let rest = match ui {
        Some((host, ui_path)) => {
            if !value_host.eq_ignore_ascii_case(host) {
                return None;
            }
            path.strip_prefix(ui_path)?.strip_prefix(before)?
        }
        None => {
            let marker = format!("/{before}");
            let at = path.find(&marker)?;
            if path[..at].contains("/bitstream") {
                return None;
            }
            &path[at + marker.len()..]
        }
    };
    let rest = rest.split(['?', '#']).next().unwrap_or(rest);
    parse_handle(rest)
}

/// The landing rule in effect for one harvest: the platform (or template), its scope, and why.
#[derive(Clone, Debug)]
pub struct Landing {
    rule: Rule,
    scope: Scope,
    detected: Detected,
    /// What the sites' robots.txt disallows, left out.
    robots: Option<Arc<Robots>>,
    /// Content files left out (`content_files = false`).
    leave_out_files: bool,
}

#[derive(Clone, Debug)]
enum Rule {
    Generic,
    /// A row's rule, at its site.
    Row {
        row: Arc<Row>,
        at: RowAt,
    },
    /// A configured template.
    Template(Template),
    /// The OAI identifier, an http(s) URL, is the page ([`Fallback::OaiUrl`]).
    OaiUrl,
}

/// Where a row's rule is applied.
#[derive(Clone, Debug)]
enum RowAt {
    /// A Handle's page: the UI's base as text ending in `/` (`https://host/` or
    /// `https://host/ui/`), that base's host and path, and the text before the Handle.
    Handle {
        ui: String,
        host: String,
        path: String,
        before: String,
    },
    /// A `dc:*` value or a template: the site's root URL and `host[:port]/path/`, and the
    /// baseURL's scheme.
    Site {
        url: String,
        at: String,
        scheme: String,
    },
}

/// Why `platform`'s rule cannot be made without an http(s) baseURL. (Why a landing rule cannot
/// be made is a sentence: the pipeline says it as [`crate::error::Error::Scope`].)
fn no_base(platform: &str) -> String {
    format!("the {platform} rule needs an http(s) baseURL to find the repository's host")
}

/// The scope of everything under `path` on `url`'s host, for `platform`'s rule.
fn origin_scope(url: &Url, path: &str, platform: &str) -> Result<Scope, String> {
    let mut at = url.clone();
    at.set_path(path);
    at.set_query(None);
    at.set_fragment(None);
    Scope::from_prefixes(&[at]).ok_or_else(|| no_base(platform))
}

impl Rule {
    /// A template's rule, scoped to the template's origin and the baseURL's directory
    /// (`platform`, the one found or configured, names it in an error).
    fn for_template(
        template: &Template,
        base: Option<&Url>,
        platform: &str,
    ) -> Result<(Self, Scope), String> {
        let origin_url = template
            .origin()
            .ok_or_else(|| format!("landing_template {template} has no host"))?;
        let mut prefixes = vec![origin_url];
        if let Some(dir) = base.and_then(Scope::from_base_url) {
            prefixes.extend(dir.prefixes().iter().filter_map(|p| Url::parse(p).ok()));
        }
        let scope = Scope::from_prefixes(&prefixes).ok_or_else(|| no_base(platform))?;
        Ok((Rule::Template(template.clone()), scope))
    }

    /// A Handle rule under its UI: `ui_url` when configured, else the one the baseURL and the
    /// sample show ([`handle_ui`], which adds to `evidence`).
    fn for_handle(
        row: &Arc<Row>,
        before: &str,
        ui_url: Option<&Url>,
        base: Option<&Url>,
        sample: &[Record],
        evidence: &mut String,
    ) -> Result<(Self, Scope), String> {
        let ui = match ui_url {
            Some(ui) => {
                let mut ui = ui.clone();
                if !ui.path().ends_with('/') {
                    let path = format!("{}/", ui.path());
                    ui.set_path(&path);
                }
                ui
            }
            None => {
                let base = base.ok_or_else(|| no_base(row.name()))?;
                let (ui, elsewhere) = handle_ui(base, sample, before, evidence);
                if let Some(other) = elsewhere {
                    let said = Self::ui_elsewhere(row, before, &other, base, sample);
                    evidence.push_str(&said);
                }
                ui
            }
        };
        let scope = origin_scope(&ui, ui.path(), row.name())?;
        let mut text = ui.to_string();
        if let Some(q) = text.find(['?', '#']) {
            text.truncate(q);
        }
        let at = RowAt::Handle {
            ui: text,
            host: ui.host_str().unwrap_or_default().to_owned(),
            path: ui.path().to_owned(),
            before: before.to_owned(),
        };
        Ok((
            Rule::Row {
                row: row.clone(),
                at,
            },
            scope,
        ))
    }

    /// What `evidence` says of a UI `ui` the records' local Handle URLs show on another host
    /// than the baseURL's: tried on the live records of `sample` when it is on the baseURL's site
    /// ([`same_site`]), with the share of them that would get a page there and three of the
    /// pages; else that it is another site.
    fn ui_elsewhere(
        row: &Arc<Row>,
        before: &str,
        ui: &Url,
        base: &Url,
        sample: &[Record],
    ) -> String {
        let said = format!("; the records' local Handle URLs are under {ui}");
        if !same_site(
            base.host_str().unwrap_or_default(),
            ui.host_str().unwrap_or_default(),
        ) {
            return format!(
                "{said}, another site than the baseURL's: set ui_url if that is this \
                 repository's UI"
            );
        }
        let Ok((rule, scope)) = Self::for_handle(
            row,
            before,
            Some(ui),
            Some(base),
            sample,
            &mut String::new(),
        ) else {
            return said;
        };
        let there = Landing {
            rule,
            scope,
            detected: Detected::configured(Platform(Some(row.clone()))),
            robots: None,
            leave_out_files: false,
        };
        let live: Vec<&Record> = sample
            .iter()
            .filter(|r| !r.deleted && !r.unreadable())
            .take(SAMPLE)
            .collect();
        let mut classes = Classes::new();
        let mut pages = Vec::new();
        for record in &live {
            there.classes(record, &mut classes);
            if let Some(Class::LandingPage(page)) = classes.first() {
                pages.push(page.to_string());
            }
        }
        format!(
            "{said}: if that is the UI, set ui_url, which gives {} of the first {} live records \
             a page there ({:.0}%), e.g. {}",
            pages.len(),
            live.len(),
            100.0 * pages.len() as f64 / live.len().max(1) as f64,
            pages[..pages.len().min(3)].join(", ")
        )
    }

    /// A `dc:*` or template rule, for the installation the baseURL belongs to; for a row whose
    /// site is the registered domain's, on the host `sample`'s pages are on (then added to
    /// `evidence`), else the baseURL host's root.
    fn for_site(
        row: &Arc<Row>,
        base: Option<&Url>,
        sample: &[Record],
        evidence: &mut String,
    ) -> Result<(Self, Scope), String> {
        let base = base.ok_or_else(|| no_base(row.name()))?;
        let mut site = Site::of(row, base).ok_or_else(|| no_base(row.name()))?;
        if let Some(domain) = site.domain.take()
            && let Some(on) = Site::on_records_host(row, &domain, sample)
        {
            evidence.push_str(&format!(
                "; the pages on {}, as the records name them",
                on.url
            ));
            site = on;
        }
        let mut scope = origin_scope(&site.url, site.url.path(), row.name())?;
        // A page as the record writes it: `http` or `https`, whichever the baseURL says.
        if let RowLanding::Field {
            scheme: SchemeSpec::Record,
            ..
        } = &row.landing
        {
            let mut other = site.url.clone();
            let flipped = if other.scheme() == "https" {
                "http"
            } else {
                "https"
            };
            if other.set_scheme(flipped).is_ok()
                && let Some(both) = Scope::from_prefixes(&[site.url.clone(), other])
            {
                scope = both;
            }
        }
        let at = RowAt::Site {
            url: site.url.to_string(),
            at: site.at,
            scheme: base.scheme().to_owned(),
        };
        Ok((
            Rule::Row {
                row: row.clone(),
                at,
            },
            scope,
        ))
    }
}

impl Landing {
    /// Google's rule over `scope` (what every repository had before platforms); `detected`
    /// says why it applies.
    pub fn generic(scope: Scope, detected: Detected) -> Self {
        Self {
            rule: Rule::Generic,
            scope,
            detected,
            robots: None,
            leave_out_files: false,
        }
    }

    /// This rule, leaving out what `robots` disallows, and the content files when
    /// `leave_out_files`.
    pub(crate) fn with_robots(
        mut self,
        robots: Option<Arc<Robots>>,
        leave_out_files: bool,
    ) -> Self {
        self.robots = robots;
        self.leave_out_files = leave_out_files;
        self
    }

    /// The rule for `settings` of a repository at `base` (its baseURL: the one it states, for
    /// a Static Repository) when it is a platform's or a template's; `None` for Google's rule
    /// ([`Landing::generic`]). `explicit` is the configured scope, which replaces the
    /// platform's own; `detected` the platform found or configured, to which what the rule
    /// finds is added; `sample` the first records, where a DSpace UI under a path shows
    /// ([`dspace_ui_in`]). Every platform's scope is on the baseURL's host (or `ui_url`'s, or
    /// the template's): never on a host the operator did not name. `Err` says why no rule can
    /// be made (the pipeline reports it as [`crate::error::Error::Scope`]).
    pub fn new(
        settings: &LandingSettings,
        base: Option<&Url>,
        explicit: Option<&Scope>,
        detected: &mut Detected,
        sample: &[Record],
    ) -> Result<Option<Self>, String> {
        let (rule, own_scope) = if let Some(template) = &settings.template {
            Rule::for_template(template, base, detected.platform.as_str())?
        } else {
            let Some(row) = detected.platform.row().cloned() else {
                // No platform: Google's rule, or what the records show without one.
                let (rule, scope) = match &detected.fallback {
                    Fallback::None => return Ok(None),
                    Fallback::Widened(scope) => (Rule::Generic, scope.clone()),
                    Fallback::OaiUrl(scope) => (Rule::OaiUrl, scope.clone()),
                };
                return Ok(Some(Self {
                    rule,
                    scope: explicit.cloned().unwrap_or(scope),
                    detected: detected.clone(),
                    robots: None,
                    leave_out_files: false,
                }));
            };
            match &row.landing {
                RowLanding::Handle { before } => Rule::for_handle(
                    &row,
                    before,
                    settings.ui_url.as_ref(),
                    base,
                    sample,
                    &mut detected.evidence,
                )?,
                RowLanding::Template(_) | RowLanding::Field { .. } => {
                    Rule::for_site(&row, base, sample, &mut detected.evidence)?
                }
            }
        };
        Ok(Some(Self {
            rule,
            scope: explicit.cloned().unwrap_or(own_scope),
            detected: detected.clone(),
            robots: None,
            leave_out_files: false,
        }))
    }

    /// The URLs the repository's sitemaps may list.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// The platform in effect and why.
    pub fn detected(&self) -> &Detected {
        &self.detected
    }

    /// Adds `warning` to what is said of the rule (its evidence).
    pub(crate) fn say(&mut self, warning: &str) {
        self.detected.evidence.push_str("; ");
        self.detected.evidence.push_str(warning);
    }

    /// Whether this is Google's rule alone, so that the classification of `dc:identifier`
    /// values is all there is to it (the fast path).
    pub fn is_generic(&self) -> bool {
        matches!(self.rule, Rule::Generic) && self.robots.is_none() && !self.leave_out_files
    }

    /// Under a Handle rule (DSpace) whose UI no `ui_url` named: where the records' local Handle
    /// URLs say the UI is ([`dspace_ui_in`]), when this rule does not make its pages there.
    pub(crate) fn ui_in(&self, sample: &[Record]) -> Option<Url> {
        let Rule::Row {
            at: RowAt::Handle { before, .. },
            ..
        } = &self.rule
        else {
            return None;
        };
        ui_in(sample, before).filter(|ui| !self.scope.contains(ui))
    }

    /// Where a record's landing page comes from, in words.
    pub fn rule_text(&self) -> String {
        match &self.rule {
            Rule::Generic => format!("a dc:identifier URL inside {}", self.scope),
            Rule::Row { row, at } => match (&row.landing, at) {
                (RowLanding::Handle { .. }, RowAt::Handle { ui, before, .. }) => {
                    format!("{ui}{before}{{prefix}}/{{suffix}}, from the record's Handle")
                }
                (RowLanding::Template(t), RowAt::Site { url, .. }) => format!(
                    "{}, from the record's {}",
                    t.as_str().replacen("{site}", url, 1),
                    row.spec
                        .oai_identifier
                        .as_deref()
                        .map_or("identifiers".to_owned(), |p| format!(
                            "OAI identifier ({p})"
                        ))
                ),
                (RowLanding::Field { element, .. }, RowAt::Site { .. }) => {
                    let element = match element {
                        Element::Identifier => "dc:identifier",
                        Element::Relation => "dc:relation",
                    };
                    let shapes: Vec<String> = row
                        .spec
                        .landing
                        .patterns
                        .iter()
                        .map(|p| {
                            let site = self.scope.prefixes().into_iter().next().unwrap_or_default();
                            p.replacen("{site}", &site, 1)
                        })
                        .collect();
                    format!(
                        "the {element} that is the record's own page ({})",
                        shapes.join(" or ")
                    )
                }
                _ => row.name().to_owned(),
            },
            Rule::Template(t) => format!("the template {t}"),
            Rule::OaiUrl => format!("the OAI identifier, a URL inside {}", self.scope),
        }
    }

    /// Everything that decides which URLs a record publishes, as text: the scope alone for the
    /// generic rule (what a store recorded before platforms), else with the rule. A published
    /// sitemap is patched only under the same text.
    pub fn key(&self) -> String {
        let mut key = self.rule_key();
        if let Some(robots) = &self.robots {
            key.push_str(" robots=");
            key.push_str(&robots.digest);
        }
        if self.leave_out_files {
            key.push_str(" content_files=false");
        }
        key
    }

    /// [`Landing::key`] without the robots.txt.
    fn rule_key(&self) -> String {
        match &self.rule {
            Rule::Generic => self.scope.to_string(),
            Rule::Row { row, at } => {
                let at = match at {
                    RowAt::Handle { ui, .. } => format!("ui={ui}"),
                    RowAt::Site { url, scheme, .. } => format!("site={url} scheme={scheme}"),
                };
                let own = if row.builtin {
                    String::new()
                } else {
                    format!(" row={}", row.fingerprint())
                };
                format!("{} {} {at}{own}", self.scope, row.name())
            }
            Rule::Template(t) => format!("{} template={t}", self.scope),
            Rule::OaiUrl => format!("{} oai-identifier", self.scope),
        }
    }

    /// Classifies a live record's values for publishing, the landing page first: what
    /// [`classify::class`] gives each `dc:identifier`, under this rule. A deleted record
    /// publishes nothing, and gets no classes.
    pub fn classes<'a>(&self, record: &'a Record, out: &mut Classes<'a>) {
        out.clear();
        if record.deleted {
            return;
        }
        let scope = &self.scope;
        match &self.rule {
            Rule::Generic => out.extend(
                record
                    .dc_identifiers
                    .iter()
                    .map(|value| classify::class(value, scope)),
            ),
            Rule::Row { row, at } => {
                let derived = match (&row.landing, at) {
                    (
                        RowLanding::Handle { .. },
                        RowAt::Handle {
                            ui,
                            host,
                            path,
                            before,
                        },
                    ) => self.handle(record, ui, (host, path), before, out),
                    (RowLanding::Template(t), RowAt::Site { url, .. }) => {
                        let page = fill_row(t, row, record, url)
                            .map(|u| landing(u, scope, Some(Drop::TemplateInvalidUrl)));
                        self.derived_then_identifiers(page, record, out)
                    }
                    (
                        RowLanding::Field {
                            element,
                            patterns,
                            scheme: written,
                        },
                        RowAt::Site { at, scheme, .. },
                    ) => {
                        let scheme = (*written == SchemeSpec::Base).then_some(scheme.as_str());
                        let at = FieldAt::Installation(at);
                        self.field(record, row, (*element, patterns), at, scheme, out)
                    }
                    _ => false,
                };
                if row.content_files.is_some() {
                    self.content_files(row, derived, out);
                }
                prefer_cite_as(&row.spec.cite_as, out);
            }
            Rule::Template(template) => self.template(record, template, out),
            Rule::OaiUrl => {
                let page = match classify::class(&record.identifier, scope) {
                    Class::LandingPage(url) => {
                        Some(Class::LandingPage(Cow::Owned(url.into_owned())))
                    }
                    _ => None,
                };
                self.derived_then_identifiers(page, record, out);
            }
        }
        if self.leave_out_files {
            for class in out.iter_mut() {
                if matches!(class, Class::ContentFile { .. }) {
                    *class = Class::Dropped(Drop::ContentFileLeftOut);
                }
            }
        }
        if let Some(robots) = &self.robots {
            for class in out.iter_mut() {
                if let Class::LandingPage(url) | Class::ContentFile { url, .. } = class
                    && robots.disallows(url)
                {
                    *class = Class::Dropped(Drop::RobotsDisallowed);
                }
            }
        }
    }

    /// The URLs in scope that `row` names content files (a path after the scope's prefix
    /// matching its `content_files`), but the page the rule derived (`derived`: the first).
    fn content_files(&self, row: &Row, derived: bool, out: &mut Classes<'_>) {
        for class in out.iter_mut().skip(usize::from(derived)) {
            let Class::LandingPage(url) = class else {
                continue;
            };
            // The scope's own spelling of its prefixes, borrowed: this runs for every record.
            let after = self
                .scope
                .prefix_texts()
                .find_map(|p| url.strip_prefix(p))
                .unwrap_or(url);
            if row.is_content_file(after) {
                let url = std::mem::take(url);
                *class = Class::ContentFile {
                    url,
                    media_type: classify::OCTET_STREAM,
                };
            }
        }
    }

    /// A page the rule derived (if any) first, then the record's `dc:identifier`s classified as
    /// Google's rule does, but for the derived page again, which is listed once. Whether a page
    /// was derived.
    fn derived_then_identifiers<'a>(
        &self,
        derived: Option<Class<'static>>,
        record: &'a Record,
        out: &mut Classes<'a>,
    ) -> bool {
        let first = out.len();
        let was = derived.is_some();
        out.extend(derived);
        for value in &record.dc_identifiers {
            let class = classify::class(value, &self.scope);
            let again = matches!(
                (&class, out.get(first)),
                (Class::LandingPage(url), Some(Class::LandingPage(page))) if url == page
            );
            if !again {
                out.push(class);
            }
        }
        was
    }

    /// A Handle rule (DSpace): each Handle (any spelling, or a local `{ui}handle/P/S` URL)
    /// gives the landing page `{ui}handle/P/S`, once; a proxy spelling is also the record's
    /// persistent identifier. A value spelled as a Handle that does not parse is
    /// [`Drop::InvalidHandle`]. Whether a page was derived.
    fn handle<'a>(
        &self,
        record: &'a Record,
        ui: &str,
        ui_at: (&str, &str),
        before: &str,
        out: &mut Classes<'a>,
    ) -> bool {
        // Every Handle the record gives, once each, in order.
        let mut handles: SmallVec<[(&'a str, &'a str, &'a str); 2]> = SmallVec::new();
        let mut rest: Classes<'a> = SmallVec::new();
        for value in &record.dc_identifiers {
            // Each value is classified once; what the rule adds is read from that.
            let handle = match classify::class(value, &self.scope) {
                Class::PersistentId(Pid::Handle(h)) => parse_handle(h),
                Class::LandingPage(url)
                    if url.starts_with(ui) && url[ui.len()..].starts_with(before) =>
                {
                    // The local spelling, borrowed from the value itself.
                    local_handle(value, Some(ui_at), before)
                }
                // The local spelling in the other scheme (DSpace's canonical prefix often
                // still says `http`).
                Class::Dropped(Drop::OutOfScope)
                    if local_handle(value, Some(ui_at), before).is_some() =>
                {
                    local_handle(value, Some(ui_at), before)
                }
                Class::Dropped(_) if classify::spelled_as_handle(value) => None,
                class => {
                    rest.push(class);
                    continue;
                }
            };
            match handle {
                Some(h) if !handles.iter().any(|seen| seen.0 == h.0) => handles.push(h),
                Some(_) => {}
                None => rest.push(Class::Dropped(Drop::InvalidHandle)),
            }
        }
        // One landing page: the item's own Handle (its OAI identifier is `oai:host:P/S`) when
        // the record gives it, else the first it gives, else the OAI identifier's.
        let own = record
            .identifier
            .rsplit_once(':')
            .and_then(|(_, h)| parse_handle(h));
        let chosen = handles
            .iter()
            .position(|h| own.is_some_and(|o| o.0 == h.0))
            .or((!handles.is_empty()).then_some(0));
        let chosen = match chosen {
            Some(i) => Some(handles.remove(i)),
            None => own,
        };
        let derived = chosen.is_some();
        if let Some((whole, prefix, suffix)) = chosen {
            out.push(self.handle_page(ui, before, prefix, suffix));
            // The Handle is the record's persistent identifier (the Signmap's cite-as), whatever
            // spelling gave it.
            out.push(Class::PersistentId(Pid::Handle(whole)));
        }
        out.extend(
            handles
                .into_iter()
                .map(|(whole, _, _)| Class::PersistentId(Pid::Handle(whole))),
        );
        out.extend(rest);
        derived
    }

    /// The landing page `{ui}{before}{prefix}/{suffix}` of a Handle. The UI's base is a URL in
    /// normal form, and so is the page when the Handle holds only letters, digits, `-._~` and
    /// `/` with no dot-segment, as DSpace's do: then only the length and the scope are checked;
    /// any other page is checked as every identifier is.
    fn handle_page(&self, ui: &str, before: &str, prefix: &str, suffix: &str) -> Class<'static> {
        let mut url =
            String::with_capacity(ui.len() + before.len() + prefix.len() + 1 + suffix.len());
        url.push_str(ui);
        url.push_str(before);
        url.push_str(prefix);
        url.push('/');
        let plain = suffix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/'))
            && !suffix.split('/').any(|s| s == "." || s == "..");
        if !plain {
            push_encoded(&mut url, suffix);
            return landing(url, &self.scope, None);
        }
        url.push_str(suffix);
        if url.len() > classify::MAX_URL_LEN {
            Class::Dropped(Drop::TooLong)
        } else if !self.scope.contains_normal(&url) {
            Class::Dropped(Drop::OutOfScope)
        } else {
            Class::LandingPage(Cow::Owned(url))
        }
    }

    /// A `dc:*` rule (EPrints' abstract page as a `dc:relation`, Digital Commons' page as a
    /// `dc:identifier`): the value that matches the row's patterns is the landing page (in the
    /// baseURL's `scheme` when the row says so); every other URL the record gives in scope is
    /// then a content file; a DOI is the persistent identifier; a `dc:relation` that is no URL
    /// is [`Drop::RelationNotAUrl`]. Relations that are other URLs (an official URL) are not the
    /// record's to publish and are not counted. Without a page found, the identifiers are
    /// classified as usual. Whether a page was derived.
    fn field<'a>(
        &self,
        record: &'a Record,
        row: &Row,
        (element, patterns): (Element, &[Pattern]),
        at: FieldAt<'_>,
        scheme: Option<&str>,
        out: &mut Classes<'a>,
    ) -> bool {
        let found = find_field(row, record, element, patterns, at);
        // Borrowed from the record, as the page is in normal form as a rule.
        let mut page: Option<Cow<'a, str>> = None;
        if let Some(value) = found {
            let class = match (scheme, value.split_once("://")) {
                (Some(scheme), Some((written, rest))) if !written.eq_ignore_ascii_case(scheme) => {
                    landing(format!("{scheme}://{rest}"), &self.scope, None)
                }
                _ => classify::class(value, &self.scope),
            };
            let class = match class {
                Class::LandingPage(url) | Class::ContentFile { url, .. } => {
                    page = Some(url.clone());
                    Class::LandingPage(url)
                }
                class => class,
            };
            out.push(class);
        }
        for value in &record.dc_identifiers {
            match classify::class(value, &self.scope) {
                Class::LandingPage(url) if page.is_some() => {
                    if page.as_deref() != Some(url.as_ref()) {
                        out.push(Class::ContentFile {
                            url,
                            media_type: classify::OCTET_STREAM,
                        });
                    }
                }
                class => out.push(class),
            }
        }
        if element == Element::Relation {
            for value in record.dc_values(DcElement::Relation) {
                if Some(value) == found {
                    continue;
                }
                if let Some(pid) = classify::pid_of(value) {
                    out.push(Class::PersistentId(pid));
                } else if !classify::is_http_text(value.trim()) {
                    out.push(Class::Dropped(Drop::RelationNotAUrl));
                }
            }
        }
        page.is_some()
    }

    /// A configured template: the landing page from the record's Handle, DOI or OAI identifier
    /// (a record without the value gets none from it); the identifiers are then classified as
    /// usual.
    fn template<'a>(&self, record: &'a Record, template: &Template, out: &mut Classes<'a>) {
        // A value that would be a dot segment climbs out of the template's path.
        let mut climbs = false;
        let filled = template.try_fill(|p| {
            let value = record_value(record, p);
            climbs |= value.is_some_and(has_dot_segment);
            value
        });
        let page = if climbs {
            Some(Class::Dropped(Drop::TemplateInvalidUrl))
        } else {
            filled.map(|url| landing(url, &self.scope, Some(Drop::TemplateInvalidUrl)))
        };
        self.derived_then_identifiers(page, record, out);
    }
}

impl fmt::Display for Landing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.rule_text())
    }
}

/// A derived URL as a landing page: normalised, bounded and checked against the scope as any
/// identifier is, whatever its extension. A URL that does not parse is `invalid` (or
/// [`Drop::InvalidUrl`]).
fn landing(url: String, scope: &Scope, invalid: Option<Drop>) -> Class<'static> {
    match classify::publishable(&url, scope) {
        Ok(Cow::Borrowed(_)) => Class::LandingPage(Cow::Owned(url)),
        Ok(Cow::Owned(normal)) => Class::LandingPage(Cow::Owned(normal)),
        Err(Drop::InvalidUrl | Drop::NotAUrl) => {
            Class::Dropped(invalid.unwrap_or(Drop::InvalidUrl))
        }
        Err(reason) => Class::Dropped(reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`detect_over`] with the built-in rows and no configured scope.
    fn detect(base: Option<&Url>, identify: &Identify, sample: &[Record]) -> Detected {
        detect_over(base, identify, sample, None, &Registry::default())
    }

    fn record(id: &str, identifiers: &[&str], relations: &[&str]) -> Record {
        let mut r = Record {
            identifier: id.to_owned(),
            dc_identifiers: identifiers.iter().map(|s| (*s).to_owned()).collect(),
            ..Record::default()
        };
        for v in relations {
            r.dc.push(DcElement::Relation, v);
        }
        r
    }

    fn landing(settings: LandingSettings, base: &str, platform: Platform) -> Landing {
        let base = Url::parse(base).unwrap();
        let mut detected = Detected::configured(platform);
        Landing::new(&settings, Some(&base), None, &mut detected, &[])
            .unwrap()
            .expect("a platform's rule")
    }

    fn dspace(base: &str, ui: Option<&str>) -> Landing {
        let settings = LandingSettings {
            platform: Setting::Fixed("dspace".into()),
            ui_url: ui.map(|u| Url::parse(u).unwrap()),
            template: None,
            ..LandingSettings::default()
        };
        landing(settings, base, Platform::named("dspace"))
    }

    fn eprints(base: &str) -> Landing {
        let settings = LandingSettings {
            platform: Setting::Fixed("eprints".into()),
            ..LandingSettings::default()
        };
        landing(settings, base, Platform::named("eprints"))
    }

    fn template(text: &str, base: &str) -> Landing {
        let settings = LandingSettings {
            template: Some(Template::parse(text).unwrap()),
            ..LandingSettings::default()
        };
        landing(settings, base, Platform::generic())
    }

    /// The classes of a record, one line each, as the checks below spell them.
    fn classes(rule: &Landing, record: &Record) -> Vec<String> {
        let mut out = Classes::new();
        rule.classes(record, &mut out);
        out.iter()
            .map(|c| match c {
                Class::LandingPage(u) => format!("landing {u}"),
                Class::ContentFile { url, media_type } => format!("file {media_type} {url}"),
                Class::PersistentId(p) => format!("pid {}", p.resolver_url()),
                Class::Dropped(d) => format!("drop {}", d.as_str()),
            })
            .collect()
    }

    /// A row's `cite_as` puts the kind it prefers first among the persistent identifiers (the
    /// profiles cite the first); without it, the record's own order stands.
    #[test]
    fn a_rows_cite_as_chooses_the_persistent_identifier() {
        let r = record(
            "doi:10.5072/FK2/ABC",
            &[
                "http://hdl.handle.net/1902/7",
                "https://doi.org/10.5072/FK2/ABC",
            ],
            &[],
        );
        let dataverse = |cite_as: &[row::CiteAs]| {
            let mut spec = row::BUILTIN
                .iter()
                .find(|r| r.name() == "dataverse")
                .unwrap()
                .spec
                .clone();
            spec.name = "dv".into();
            spec.cite_as = cite_as.to_vec();
            let platforms = Registry::with(vec![Row::new(spec, false).unwrap()]).unwrap();
            let settings = LandingSettings {
                platform: Setting::Fixed("dv".into()),
                platforms: platforms.clone(),
                ..LandingSettings::default()
            };
            landing(
                settings,
                "https://data.example.edu/oai",
                Platform(platforms.get("dv").cloned()),
            )
        };
        let pids = |rule: &Landing| -> Vec<String> {
            classes(rule, &r)
                .into_iter()
                .filter(|c| c.starts_with("pid "))
                .collect()
        };
        let handle = "pid https://hdl.handle.net/1902/7".to_owned();
        let doi = "pid https://doi.org/10.5072/FK2/ABC".to_owned();
        use row::CiteAs::{Doi, Handle};
        assert_eq!(
            pids(&dataverse(&[Doi, Handle])),
            [doi.clone(), handle.clone()]
        );
        assert_eq!(pids(&dataverse(&[Handle])), [handle.clone(), doi.clone()]);
        assert_eq!(pids(&dataverse(&[])), [handle, doi]);
        assert_eq!(
            classes(&dataverse(&[Doi]), &r)[0],
            "landing https://data.example.edu/dataset.xhtml?persistentId=doi:10.5072/FK2/ABC"
        );
    }

    /// A robots.txt judges the paths of its own origin's URLs; one that disallows nothing
    /// (missing, or `Disallow:` with no path) is not kept.
    #[test]
    fn robots_txt_judges_its_origins_paths() {
        let body = |t: &str| t.as_bytes().to_vec();
        let robots = Robots::new(&[
            (
                "https://a.example".to_owned(),
                body("User-agent: *\nDisallow: /private # not for crawlers\n"),
            ),
            ("https://b.example".to_owned(), body("")),
            (
                "https://c.example".to_owned(),
                body("User-agent: *\nDisallow:\n# Disallow: /x\n"),
            ),
        ]);
        assert_eq!(robots.sites.len(), 1);
        assert!(robots.disallows("https://a.example/private/1"));
        assert!(robots.disallows("https://a.example/private?x=1#f"));
        assert!(!robots.disallows("https://a.example/public"));
        assert!(!robots.disallows("https://a.example"));
        assert!(!robots.disallows("https://a.example.org/private"));
        assert!(!robots.disallows("https://b.example/private"));
        assert!(!robots.disallows("https://c.example/x"));
        assert!(disallows_any(b"user-agent: bingbot\r\n  disallow : /a\r\n"));
        assert!(!disallows_any(b"Allow: /\nCrawl-delay: 1\n"));
    }

    /// `content_files = false`: the files are counted as left out, the landing page stays;
    /// a robots.txt's disallowed page is left out with its reason.
    #[test]
    fn content_files_and_robots_disallowed_pages_are_left_out_with_their_reasons() {
        let r = record(
            "oai:h:1/2",
            &[
                "http://hdl.handle.net/1/2",
                "https://repo.example.edu/bitstream/1/2/1/thesis.pdf",
            ],
            &[],
        );
        let rule = dspace("https://repo.example.edu/oai/request", None).with_robots(None, true);
        assert_eq!(
            classes(&rule, &r),
            [
                "landing https://repo.example.edu/handle/1/2",
                "pid https://hdl.handle.net/1/2",
                "drop content_file_left_out",
            ]
        );
        let robots = Robots::new(&[(
            "https://repo.example.edu".to_owned(),
            b"User-agent: Googlebot\nDisallow: /handle/1/\n".to_vec(),
        )]);
        let rule = dspace("https://repo.example.edu/oai/request", None)
            .with_robots(Some(Arc::new(robots)), false);
        assert_eq!(
            classes(&rule, &r),
            [
                "drop robots_disallowed",
                "pid https://hdl.handle.net/1/2",
                "file application/pdf https://repo.example.edu/bitstream/1/2/1/thesis.pdf",
            ]
        );
        assert!(rule.key().contains(" robots="), "{}", rule.key());
    }

    #[test]
    fn a_dspace_handle_in_every_spelling_gives_one_landing_page_on_the_ui() {
        let rule = dspace("https://repo.example.edu/oai/request", None);
        for spelling in [
            "http://hdl.handle.net/1765/315",
            "https://hdl.handle.net/1765/315",
            "hdl:1765/315",
            "info:hdl/1765/315",
            " HDL:1765/315\n",
        ] {
            let got = classes(
                &rule,
                &record("oai:repo.example.edu:1765/315", &[spelling], &[]),
            );
            assert_eq!(
                got,
                [
                    "landing https://repo.example.edu/handle/1765/315",
                    "pid https://hdl.handle.net/1765/315"
                ],
                "{spelling:?}"
            );
        }
        // The local spelling (handle.canonical.prefix set to the UI, often with http): the
        // landing page on the UI, and the Handle still cited.
        let got = classes(
            &rule,
            &record(
                "oai:h:1765/315",
                &["http://repo.example.edu/handle/1765/315"],
                &[],
            ),
        );
        assert_eq!(
            got,
            [
                "landing https://repo.example.edu/handle/1765/315",
                "pid https://hdl.handle.net/1765/315"
            ]
        );
    }

    #[test]
    fn dspace_gives_each_landing_page_once_and_bitstreams_as_content_files() {
        let rule = dspace("https://repo.example.edu/oai/request", None);
        let r = record(
            "oai:h:1/2",
            &[
                "http://hdl.handle.net/20.500.12345/7",
                "hdl:20.500.12345/7",
                "https://repo.example.edu/bitstream/20.500.12345/7/1/thesis.pdf",
                "https://repo.example.edu/bitstream/handle/20.500.12345/7/data?sequence=2",
                "10.1234/abc",
                "Smith, J. (2020) A thesis.",
                "https://elsewhere.example/x",
            ],
            &[],
        );
        assert_eq!(
            classes(&rule, &r),
            [
                "landing https://repo.example.edu/handle/20.500.12345/7",
                "pid https://hdl.handle.net/20.500.12345/7",
                "file application/pdf https://repo.example.edu/bitstream/20.500.12345/7/1/thesis.pdf",
                "file application/octet-stream https://repo.example.edu/bitstream/handle/20.500.12345/7/data?sequence=2",
                "pid https://doi.org/10.1234/abc",
                "drop not_a_url",
                "drop out_of_scope",
            ]
        );
    }

    #[test]
    fn a_dspace_record_gets_one_landing_page_its_own_handle_s() {
        let rule = dspace("https://repo.example.edu/oai/request", None);
        // A second Handle (an item registered twice) is cited, not a second landing page.
        let r = record(
            "oai:repo.example.edu:123456789/103",
            &[
                "http://hdl.handle.net/2345/871",
                "http://hdl.handle.net/123456789/103",
            ],
            &[],
        );
        assert_eq!(
            classes(&rule, &r),
            [
                "landing https://repo.example.edu/handle/123456789/103",
                "pid https://hdl.handle.net/123456789/103",
                "pid https://hdl.handle.net/2345/871",
            ]
        );
        // No Handle in dc:identifier: the OAI identifier's.
        let r = record("oai:repo.example.edu:123456789/9", &["Smith (2020)"], &[]);
        assert_eq!(
            classes(&rule, &r),
            [
                "landing https://repo.example.edu/handle/123456789/9",
                "pid https://hdl.handle.net/123456789/9",
                "drop not_a_url",
            ]
        );
    }

    #[test]
    fn a_value_spelled_as_a_handle_that_does_not_parse_is_counted_not_fatal() {
        let rule = dspace("https://repo.example.edu/oai/request", None);
        for bad in [
            "http://hdl.handle.net/",
            "hdl:",
            "hdl:1765",
            "info:hdl/1765/",
            "http://hdl.handle.net/1765/a b",
        ] {
            let got = classes(&rule, &record("oai:h:1", &[bad], &[]));
            assert_eq!(got, ["drop invalid_handle"], "{bad:?}");
        }
    }

    #[test]
    fn dspace_7_puts_the_landing_page_on_the_ui_host_and_the_scope_there() {
        let rule = dspace(
            "https://api.repo.example.edu/server/oai/request",
            Some("https://repo.example.edu/"),
        );
        assert_eq!(rule.scope().to_string(), "https://repo.example.edu/");
        let r = record(
            "oai:repo.example.edu:123456789/4",
            &[
                "https://hdl.handle.net/123456789/4",
                "https://api.repo.example.edu/server/api/core/bitstreams/0f6a/content",
            ],
            &[],
        );
        assert_eq!(
            classes(&rule, &r),
            [
                "landing https://repo.example.edu/handle/123456789/4",
                "pid https://hdl.handle.net/123456789/4",
                "drop out_of_scope",
            ]
        );
        // A UI under a path.
        let rule = dspace(
            "https://api.example.edu/server/oai/request",
            Some("https://example.edu/repository"),
        );
        let r = record("oai:h:1/4", &["hdl:1/4"], &[]);
        assert_eq!(
            classes(&rule, &r)[0],
            "landing https://example.edu/repository/handle/1/4"
        );
    }

    #[test]
    fn eprints_takes_its_own_abstract_relation_and_makes_documents_content_files() {
        let rule = eprints("https://eprints.example.ac.uk/cgi/oai2");
        assert_eq!(rule.scope().to_string(), "https://eprints.example.ac.uk/");
        // 3.4: the abstract page first, an official URL pointing at another record of the same
        // host, a DOI; documents and the citation as identifiers.
        let r = record(
            "oai:eprints.example.ac.uk:42",
            &[
                "https://eprints.example.ac.uk/id/eprint/42/1/paper.pdf",
                "https://eprints.example.ac.uk/id/eprint/42/2/data",
                "Smith, J. (2020) A paper. Journal, 1 (2). pp. 3-4.",
            ],
            &[
                "https://eprints.example.ac.uk/id/eprint/42/",
                "https://eprints.example.ac.uk/id/eprint/7/",
                "https://doi.org/10.5555/paper.42",
                "See also the conference version",
            ],
        );
        assert_eq!(
            classes(&rule, &r),
            [
                "landing https://eprints.example.ac.uk/id/eprint/42/",
                "file application/pdf https://eprints.example.ac.uk/id/eprint/42/1/paper.pdf",
                "file application/octet-stream https://eprints.example.ac.uk/id/eprint/42/2/data",
                "drop not_a_url",
                "pid https://doi.org/10.5555/paper.42",
                "drop relation_not_a_url",
            ]
        );
        // 3.0-3.2: the short spelling, last.
        let r = record(
            "oai:eprints.example.ac.uk:42",
            &["https://eprints.example.ac.uk/42/1/paper.pdf"],
            &[
                "https://publisher.example/a/42",
                "https://eprints.example.ac.uk/42/",
            ],
        );
        assert_eq!(
            classes(&rule, &r)[..2],
            [
                "landing https://eprints.example.ac.uk/42/",
                "file application/pdf https://eprints.example.ac.uk/42/1/paper.pdf",
            ]
        );
        // Only another record's page: no landing page from the relations.
        let r = record(
            "oai:eprints.example.ac.uk:42",
            &[],
            &["https://eprints.example.ac.uk/7/"],
        );
        assert!(classes(&rule, &r).is_empty());
    }

    #[test]
    fn eprints_installed_under_a_path_looks_there() {
        let rule = eprints("https://www.example.ac.uk/research/cgi/oai2");
        assert_eq!(
            rule.scope().to_string(),
            "https://www.example.ac.uk/research/"
        );
        let r = record("oai:x:5", &[], &["https://www.example.ac.uk/research/5/"]);
        assert_eq!(
            classes(&rule, &r),
            ["landing https://www.example.ac.uk/research/5/"]
        );
    }

    #[test]
    fn templates_fill_their_placeholders_from_each_record() {
        let rule = template(
            "https://data.example.org/dataset.xhtml?persistentId=doi:{doi}",
            "https://data.example.org/oai",
        );
        let r = record(
            "oai:data.example.org:doi:10.70122/FK2/ABC",
            &["https://doi.org/10.70122/FK2/ABC"],
            &[],
        );
        assert_eq!(
            classes(&rule, &r),
            [
                "landing https://data.example.org/dataset.xhtml?persistentId=doi:10.70122/FK2/ABC",
                "pid https://doi.org/10.70122/FK2/ABC",
            ]
        );
        let rule = template(
            "https://zenodo.example.org/records/{oai_local}",
            "https://zenodo.example.org/oai2d",
        );
        let r = record(
            "oai:zenodo.example.org:abc12-x7y89",
            &["https://zenodo.example.org/records/abc12-x7y89"],
            &[],
        );
        assert_eq!(
            classes(&rule, &r),
            ["landing https://zenodo.example.org/records/abc12-x7y89"]
        );
        // A value that would climb out of the template's path is counted, and the record goes
        // on.
        let rule = template(
            "https://h.example/records/{oai_local}",
            "https://h.example/oai",
        );
        for local in ["..", "%2E%2e", "x/../../admin"] {
            let r = record(&format!("oai:h:{local}"), &["https://h.example/oai/x"], &[]);
            assert_eq!(
                classes(&rule, &r),
                [
                    "drop template_invalid_url",
                    "landing https://h.example/oai/x"
                ],
                "{local}"
            );
        }
        // A record without the value gets no landing page from the template.
        let rule = template("https://h.example/handle/{handle}", "https://h.example/oai");
        let r = record("oai:h:1", &["https://h.example/items/1"], &[]);
        assert_eq!(classes(&rule, &r), ["landing https://h.example/items/1"]);
    }

    #[test]
    fn templates_are_checked_when_read() {
        for (bad, says) in [
            ("https://h/{nope}", "unknown placeholder {nope}"),
            ("https://h/records/1", "no placeholder"),
            ("ftp://h/{doi}", "not an http(s) URL"),
            ("{doi}", "a placeholder before the path"),
            (
                "https://{oai_local}.example.org/x",
                "a placeholder before the path",
            ),
            ("https://h/{doi", "unclosed"),
        ] {
            let e = Template::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        assert!(Template::parse("https://h/handle/{handle}").is_ok());
    }

    #[test]
    fn a_deleted_record_gets_no_classes() {
        let rule = dspace("https://repo.example.edu/oai/request", None);
        let mut r = record("oai:h:1/2", &["hdl:1/2"], &[]);
        r.deleted = true;
        assert!(classes(&rule, &r).is_empty());
    }

    #[test]
    fn the_dspace_ui_is_where_most_local_handle_urls_are() {
        let records = [
            record("oai:h:1/1", &["http://h.example.edu/xmlui/handle/1/1"], &[]),
            record(
                "oai:h:1/2",
                &["https://h.example.edu/xmlui/handle/1/2", "hdl:1/2"],
                &[],
            ),
            record("oai:h:1/3", &["https://h.example.edu/handle/1/3"], &[]),
            record(
                "oai:h:1/4",
                &["https://h.example.edu/xmlui/bitstream/handle/1/4/a.pdf"],
                &[],
            ),
        ];
        assert_eq!(
            dspace_ui_in(&records).map(String::from).as_deref(),
            Some("https://h.example.edu/xmlui/")
        );
        assert_eq!(dspace_ui_in(&records[3..]), None);
    }

    /// Issue 29: a UI the records' local Handle URLs show on another host is not taken, and
    /// the evidence says what `ui_url` would give there, tried on the records; on another
    /// registered domain only that it is another site.
    #[test]
    fn a_ui_the_records_show_elsewhere_is_tried_or_said() {
        let records = |host: &str| -> Vec<Record> {
            (1..=3)
                .map(|i| {
                    record(
                        &format!("oai:h:1/{i}"),
                        &[&format!("https://{host}/handle/1/{i}")],
                        &[],
                    )
                })
                .collect()
        };
        let settings = LandingSettings {
            platform: Setting::Fixed("dspace".into()),
            ..LandingSettings::default()
        };
        let base = Url::parse("https://api.repo.example.org/server/oai/request").unwrap();
        let evidence = |host: &str| {
            let mut detected = Detected::configured(Platform::named("dspace"));
            let rule = Landing::new(&settings, Some(&base), None, &mut detected, &records(host))
                .unwrap()
                .unwrap();
            assert_eq!(rule.scope().to_string(), "https://api.repo.example.org/");
            detected.evidence
        };
        let said = evidence("ui.repo.example.org");
        assert!(
            said.ends_with(
                "; the records' local Handle URLs are under https://ui.repo.example.org/: if that is \
                 the UI, set ui_url, which gives 3 of the first 3 live records a page there (100%), \
                 e.g. https://ui.repo.example.org/handle/1/1, https://ui.repo.example.org/handle/1/2, \
                 https://ui.repo.example.org/handle/1/3"
            ),
            "{said}"
        );
        let said = evidence("ui.example.net");
        assert!(
            said.ends_with(
                "; the records' local Handle URLs are under https://ui.example.net/, another site \
                 than the baseURL's: set ui_url if that is this repository's UI"
            ),
            "{said}"
        );
    }

    #[test]
    fn islandora_2_pages_come_from_the_node_in_the_oai_identifier() {
        let settings = LandingSettings {
            platform: Setting::Fixed("islandora".into()),
            ..LandingSettings::default()
        };
        let rule = landing(
            settings,
            "https://digital.example.org/oai/request",
            Platform::named("islandora"),
        );
        assert_eq!(rule.scope().to_string(), "https://digital.example.org/");
        let r = record(
            "oai:digital.example.org:node-42",
            &[
                "https://digital.example.org/node/42",
                "islandora:42",
                "https://doi.org/10.5555/i.42",
            ],
            &[],
        );
        assert_eq!(
            classes(&rule, &r),
            [
                "landing https://digital.example.org/node/42",
                "drop not_a_url",
                "pid https://doi.org/10.5555/i.42",
            ]
        );
        let nodes: Vec<Record> = (1..=3)
            .map(|i| record(&format!("oai:digital.example.org:node-{i}"), &[], &[]))
            .collect();
        let base = Url::parse("https://digital.example.org/oai/request").unwrap();
        assert_eq!(
            detect(Some(&base), &identify(None), &nodes).platform,
            Platform::named("islandora")
        );
    }

    proptest::proptest! {
        /// A Handle's page built without the check agrees with the page checked as any
        /// identifier is.
        #[test]
        fn handle_pages_agree_with_the_checked_path(
            prefix in "[0-9][0-9a-zA-Z.]{0,8}",
            suffix in "[a-zA-Z0-9._~/%é ?#-]{1,12}",
            ui in proptest::sample::select(vec![
                "https://repo.example.edu/",
                "https://repo.example.edu/xmlui/",
                "http://h.example:8080/",
            ]),
        ) {
            let rule = dspace("https://repo.example.edu/oai/request", Some(ui));
            let Rule::Row { at: RowAt::Handle { ui, .. }, .. } = &rule.rule else { unreachable!() };
            let mut url = format!("{ui}handle/{prefix}/");
            push_encoded(&mut url, &suffix);
            let checked = super::landing(url, &rule.scope, None);
            let fast = rule.handle_page(ui, "handle/", &prefix, &suffix);
            proptest::prop_assert_eq!(format!("{fast:?}"), format!("{checked:?}"));
        }
    }

    /// What the review of the first version found, each held.
    #[test]
    fn climbing_handles_other_schemes_and_paths() {
        // A Handle whose suffix is a dot segment would climb out of /handle/.
        let rule = dspace("https://repo.example.edu/oai/request", None);
        for bad in ["hdl:1765/..", "hdl:1/../../x", "hdl:1/%2e%2E"] {
            assert_eq!(
                classes(&rule, &record("oai:h:x", &[bad], &[])),
                ["drop invalid_handle"],
                "{bad}"
            );
        }
        // A bitstream below a context path the UI's base does not name is a content file.
        let r = record(
            "oai:h:1/4",
            &["https://repo.example.edu/xmlui/bitstream/handle/1/4/data?sequence=2"],
            &[],
        );
        assert_eq!(
            classes(&rule, &r)[2],
            "file application/octet-stream https://repo.example.edu/xmlui/bitstream/handle/1/4/data?sequence=2"
        );
        // EPrints' http_url in http under an https baseURL: the page in the baseURL's scheme.
        let rule = eprints("https://e.example.ac.uk/cgi/oai2/");
        let r = record("oai:e:42", &[], &["http://e.example.ac.uk/id/eprint/42/"]);
        assert_eq!(
            classes(&rule, &r),
            ["landing https://e.example.ac.uk/id/eprint/42/"]
        );
        // Islandora under a path.
        let settings = LandingSettings {
            platform: Setting::Fixed("islandora".into()),
            ..LandingSettings::default()
        };
        let rule = landing(
            settings,
            "https://h.example/site/oai/request",
            Platform::named("islandora"),
        );
        let r = record("oai:h:node-7", &[], &[]);
        assert_eq!(
            classes(&rule, &r),
            ["landing https://h.example/site/node/7"]
        );
    }

    /// Google's rule over a configured scope that already finds the landing pages stays, even
    /// where the records carry Handles.
    #[test]
    fn detection_weighs_the_configured_scope() {
        let base = Url::parse("https://h.example/oai/request").unwrap();
        let records: Vec<Record> = (1..=3)
            .map(|i| {
                record(
                    &format!("oai:h:1234/{i}"),
                    &[
                        &format!("https://h.example/items/{i}"),
                        &format!("hdl:1234/{i}"),
                    ],
                    &[],
                )
            })
            .collect();
        let scope = Scope::from_prefixes(&[Url::parse("https://h.example/").unwrap()]).unwrap();
        let d = detect_over(
            Some(&base),
            &identify(None),
            &records,
            Some(&scope),
            &Registry::default(),
        );
        assert_eq!(d.platform, Platform::generic(), "{d}");
        let d = detect(Some(&base), &identify(None), &records);
        assert_eq!(d.platform, Platform::named("dspace"), "{d}");
    }

    /// Figshare (issue 29): its pages on the site's host that the records' relations name,
    /// within the baseURL's registered domain; its endpoint makes a harvest read relations.
    #[test]
    fn figshare_pages_are_on_the_host_its_relations_name() {
        let base = Url::parse("https://api.figshare.example.com/v2/oai").unwrap();
        let records: Vec<Record> = (1..=3)
            .map(|i| {
                record(
                    &format!("oai:figshare.example.com:article/{i}"),
                    &[&format!("10.5555/fig.{i}")],
                    &[&format!(
                        "https://figshare.example.com/articles/dataset/Title_{i}/{i}"
                    )],
                )
            })
            .collect();
        let mut d = detect(Some(&base), &identify(None), &records);
        assert_eq!(d.platform, Platform::named("figshare"), "{d}");
        let rule = Landing::new(
            &LandingSettings::default(),
            Some(&base),
            None,
            &mut d,
            &records,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            rule.scope().to_string(),
            "https://figshare.example.com/, http://figshare.example.com/"
        );
        assert_eq!(
            classes(&rule, &records[0]),
            [
                "landing https://figshare.example.com/articles/dataset/Title_1/1",
                "pid https://doi.org/10.5555/fig.1",
            ]
        );
        // A relation on another registered domain is no page of the repository's.
        let other = record(
            "oai:figshare.example.com:article/9",
            &[],
            &["https://figshare.example.net/articles/x/9"],
        );
        assert!(classes(&rule, &other).is_empty());
        let d = detect(Some(&base), &identify(None), &[other]);
        assert_eq!(d.platform, Platform::generic(), "{d}");
        // Under auto, Figshare's endpoint is what makes a harvest read relations.
        let settings = LandingSettings::default();
        assert!(settings.reads_relations(&oai_pmh::Source::Oai(base.clone())));
        let elsewhere = Url::parse("https://h.example/oai").unwrap();
        assert!(!settings.reads_relations(&oai_pmh::Source::Oai(elsewhere)));
    }

    /// What `auto` says the records hold when nothing gives most of them a page (issue 29:
    /// HAL's portals, DiVA's URN resolver).
    #[test]
    fn detection_says_what_the_records_hold_when_nothing_applies() {
        let base = Url::parse("https://api.example.fr/oai/hal/").unwrap();
        let hal: Vec<Record> = [
            "https://a.example.science/hal-1",
            "https://b.example.science/hal-2",
            "https://a.example.science/hal-3",
        ]
        .iter()
        .enumerate()
        .map(|(i, url)| {
            record(
                &format!("oai:HAL:hal-{i}v1"),
                &[&format!("hal-{i}"), url],
                &[],
            )
        })
        .collect();
        let d = detect(Some(&base), &identify(None), &hal);
        let holds = d.holds.expect("what they hold");
        assert!(
            holds.contains("3 of the first 3 live records have their URLs only on another registered domain than the baseURL's: https://a.example.science/ (2), https://b.example.science/ (1);"),
            "{holds}"
        );
        let base = Url::parse("https://www.diva.example.org/dice/oai").unwrap();
        let diva: Vec<Record> = (1..=2)
            .map(|i| {
                let url = format!("http://urn.example.se/resolve?urn=urn:nbn:se:x:diva-{i}");
                record(&format!("oai:DiVA.org:x-{i}"), &[&url, "urn:isbn:1"], &[])
            })
            .collect();
        let holds = detect(Some(&base), &identify(None), &diva).holds.unwrap();
        assert!(
            holds.contains(
                "no URL but a resolver's (http://urn.example.se/resolve?urn=urn:nbn:se:x:diva-1)"
            ),
            "{holds}"
        );
        // Pages on the site: the widened scope says it, and nothing else needs saying.
        let site: Vec<Record> = (1..=2)
            .map(|i| {
                record(
                    &format!("oai:h:{i}"),
                    &[&format!("https://www.diva.example.org/r/{i}")],
                    &[],
                )
            })
            .collect();
        let d = detect(Some(&base), &identify(None), &site);
        assert!(matches!(d.fallback, Fallback::Widened(_)), "{d}");
        assert_eq!(d.holds, None);
    }

    fn identify(sample: Option<&str>) -> Identify {
        Identify {
            sample_identifier: sample.map(str::to_owned),
            ..Identify::default()
        }
    }

    #[test]
    fn detection_needs_the_records_to_agree() {
        let url = |u: &str| Url::parse(u).unwrap();
        let dspace_records: Vec<Record> = (1..=4)
            .map(|i| {
                record(
                    &format!("oai:repo.example.edu:1765/{i}"),
                    &[&format!("http://hdl.handle.net/1765/{i}")],
                    &[],
                )
            })
            .collect();
        let d = detect(
            Some(&url("https://repo.example.edu/oai/request")),
            &identify(Some("oai:repo.example.edu:123456789/1")),
            &dspace_records,
        );
        assert_eq!(d.platform, Platform::named("dspace"), "{d}");
        assert!(d.evidence.contains("/oai/request"), "{d}");
        assert!(
            d.evidence
                .contains("4 of the first 4 live records carry a Handle"),
            "{d}"
        );
        // On another path, the header shape and the Handles still tell DSpace.
        let d = detect(
            Some(&url("https://h.example/oai")),
            &identify(None),
            &dspace_records,
        );
        assert_eq!(d.platform, Platform::named("dspace"), "{d}");
        // A DSpace-like path whose records carry landing pages: generic, and why.
        let generic: Vec<Record> = (1..=4)
            .map(|i| {
                record(
                    &format!("oai:h:{i}"),
                    &[&format!("https://h.example/oai/item/{i}")],
                    &[],
                )
            })
            .collect();
        let d = detect(
            Some(&url("https://h.example/oai/request")),
            &identify(None),
            &generic,
        );
        assert_eq!(d.platform, Platform::generic(), "{d}");
        assert!(d.evidence.contains("(Google's rule)"), "{d}");
        // Handles on most records, but their landing pages under the baseURL's directory:
        // Google's rule works, and stays.
        let both: Vec<Record> = generic
            .iter()
            .zip(&dspace_records)
            .map(|(g, d)| {
                let mut r = d.clone();
                r.dc_identifiers.extend(g.dc_identifiers.iter().cloned());
                r
            })
            .collect();
        let d = detect(
            Some(&url("https://h.example/oai/request")),
            &identify(None),
            &both,
        );
        assert_eq!(d.platform, Platform::generic(), "{d}");
        // A DSpace-like endpoint whose records show nothing of DSpace: generic, and why.
        let plain: Vec<Record> = (1..=4)
            .map(|i| record(&format!("oai:h:{i}"), &["Smith (2020)"], &[]))
            .collect();
        let d = detect(
            Some(&url("https://h.example/oai/request")),
            &identify(None),
            &plain,
        );
        assert_eq!(d.platform, Platform::generic(), "{d}");
        assert!(d.evidence.contains("DSpace-like endpoint"), "{d}");
        // No live record: nothing chosen.
        let d = detect(
            Some(&url("https://h.example/oai/request")),
            &identify(None),
            &[],
        );
        assert_eq!(d.platform, Platform::generic(), "{d}");
        // EPrints: its own abstract relation on most records (an eprints description alone
        // would prove nothing).
        let eprints_records: Vec<Record> = (1..=3)
            .map(|i| {
                record(
                    &format!("oai:e.example.ac.uk:{i}"),
                    &[&format!("https://e.example.ac.uk/{i}/1/a.pdf")],
                    &[&format!("https://e.example.ac.uk/id/eprint/{i}/")],
                )
            })
            .collect();
        let d = detect(
            Some(&url("https://e.example.ac.uk/cgi/oai2")),
            &identify(None),
            &eprints_records,
        );
        assert_eq!(d.platform, Platform::named("eprints"), "{d}");
        assert!(d.evidence.contains("/cgi/oai2"), "{d}");
        // Handles on a few records only: not DSpace.
        let mut mixed = generic.clone();
        mixed.push(dspace_records[0].clone());
        let d = detect(
            Some(&url("https://h.example/oai/request")),
            &identify(None),
            &mixed,
        );
        assert_eq!(d.platform, Platform::generic(), "{d}");
    }
}
