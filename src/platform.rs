//! Where a record's landing page is, by the repository platform that made the record: the
//! landing rule. Pure.
//!
//! Google's rule (a `dc:identifier` URL under the baseURL's directory) is the base case,
//! `generic`, and is what [`classify`] does alone. Two platforms installed at thousands of
//! institutions put the landing page elsewhere, in shapes found in their own source:
//! - DSpace writes the record's Handle as `dc:identifier` (`http://hdl.handle.net/P/S`, or the
//!   local `{ui}/handle/P/S` that `handle.canonical.prefix` defaults to since 6.0), and its UI
//!   serves the item at `{ui}/handle/P/S` (DSpace 6 `dspace-oai`'s oai_dc crosswalk; DSpace 7
//!   `HandleIdentifierProvider`).
//! - EPrints writes the abstract page as a `dc:relation` (first in 3.3 and later, last in 3.0 to
//!   3.2), and the documents as `dc:identifier` (`EPrints::Plugin::Export::DC`).
//!
//! Islandora 2 names the node in its OAI identifier (`oai:host:node-N`, page `/node/N`) and
//! nowhere in oai_dc. `docs/platforms.md` has the sources, and what the other platforms need.
//!
//! Another shape, the landing page derived from an identifier by a fixed pattern (Dataverse's
//! `dataset.xhtml?persistentId=doi:...`, InvenioRDM's `/records/{id}`), is a [`Template`].
//!
//! The rule turns a record into the same [`Class`] list the generic classification gives, the
//! landing page first, so that the sitemap and every landing-page profile read one notion of a
//! record's landing page.

use std::borrow::Cow;
use std::fmt;

use smallvec::SmallVec;
use url::Url;

use crate::classify::{self, Class, Drop, Pid};
use crate::oai::parse::{DcElement, Identify, Record};
use crate::scope::Scope;

/// A record's classes, on the stack for the usual few identifiers.
pub(crate) type Classes<'a> = SmallVec<[Class<'a>; 8]>;

/// A repository platform whose landing pages the bridge knows how to find.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Platform {
    /// Google's same-directory rule, exactly.
    Generic,
    /// DSpace (any version): the handle gives the landing page.
    Dspace,
    /// EPrints 3: the abstract page is a `dc:relation`.
    Eprints,
    /// Islandora 2 (Drupal's `rest_oai_pmh`): the OAI identifier `oai:host:node-N` names the
    /// node, whose page is `/node/N`.
    Islandora,
}

impl Platform {
    /// Every platform.
    pub const ALL: [Platform; 4] = [
        Platform::Generic,
        Platform::Dspace,
        Platform::Eprints,
        Platform::Islandora,
    ];

    /// The name used in `bridge.toml`, on the command line, in summaries and in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Generic => "generic",
            Platform::Dspace => "dspace",
            Platform::Eprints => "eprints",
            Platform::Islandora => "islandora",
        }
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `platform` setting: a platform, or `auto` (found from what the repository sends).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Setting {
    /// Detect it ([`detect`]); `generic` when nothing is recognised with confidence.
    #[default]
    Auto,
    /// This platform, whatever the repository looks like.
    Fixed(Platform),
}

impl Setting {
    /// Every accepted spelling, for error messages and help.
    pub const NAMES: &'static str = "auto, generic, dspace, eprints, islandora";

    /// Reads `auto` or a platform's name (case-insensitive).
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text.trim().to_ascii_lowercase().as_str() {
            "auto" => Setting::Auto,
            "generic" => Setting::Fixed(Platform::Generic),
            "dspace" => Setting::Fixed(Platform::Dspace),
            "eprints" => Setting::Fixed(Platform::Eprints),
            "islandora" => Setting::Fixed(Platform::Islandora),
            _ => return None,
        })
    }

    /// The spelling [`Setting::parse`] reads.
    pub fn as_str(self) -> &'static str {
        match self {
            Setting::Auto => "auto",
            Setting::Fixed(p) => p.as_str(),
        }
    }
}

/// How a repository's landing pages are found, as configured: the `platform`, `ui_url` and
/// `landing_template` keys of a repository.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LandingSettings {
    /// The platform, or `auto`.
    pub platform: Setting,
    /// DSpace: where the UI serves `/handle/P/S`, when not at the baseURL's scheme, host and
    /// port (DSpace 7 and later serve OAI from the REST host).
    pub ui_url: Option<Url>,
    /// A landing page made from an identifier; it takes precedence over the platform.
    pub template: Option<Template>,
}

impl LandingSettings {
    /// Whether a harvest of `source` must read `dc:relation`: EPrints' abstract page is one,
    /// and a template may take its DOI from one. Under `auto`, only where EPrints may be found:
    /// at EPrints' own endpoint (`/cgi/oai2`, the path its OAI-PMH script has), or a Static
    /// Repository file, whose baseURL is known only once it is read. Elsewhere the records are
    /// read and stored as before platforms (a store keeps the fields it was made with; one
    /// that would need more is started anew).
    pub fn reads_relations(&self, source: &crate::oai::Source) -> bool {
        match (&self.template, self.platform) {
            (Some(_), _) | (None, Setting::Fixed(Platform::Eprints)) => true,
            (None, Setting::Auto) => match source {
                crate::oai::Source::Oai(base) => {
                    base.path().trim_end_matches('/').ends_with("/cgi/oai2")
                }
                crate::oai::Source::File(_) => true,
            },
            (None, Setting::Fixed(_)) => false,
        }
    }

    /// Spelled out for a settings fingerprint.
    pub fn key(&self) -> String {
        format!(
            "platform={} ui_url={:?} template={:?}",
            self.platform.as_str(),
            self.ui_url.as_ref().map(Url::as_str),
            self.template.as_ref().map(Template::as_str),
        )
    }
}

/// A placeholder of a [`Template`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Placeholder {
    /// A Handle, `prefix/suffix`, from any `dc:identifier` spelling.
    Handle,
    /// A DOI, `10.NNNN/suffix`, from any `dc:identifier` (or `dc:relation`) spelling.
    Doi,
    /// The part of the OAI identifier after its last `:`.
    OaiLocal,
}

impl Placeholder {
    const ALL: [(&'static str, Placeholder); 3] = [
        ("handle", Placeholder::Handle),
        ("doi", Placeholder::Doi),
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
    /// Parses and checks a template: placeholders `{handle}`, `{doi}`, `{oai_local}`, at least
    /// one of them, and an absolute http(s) URL with a host once they are filled in. The error
    /// says what is wrong, for the key's message.
    pub fn parse(text: &str) -> Result<Self, String> {
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
            let Some(&(_, p)) = Placeholder::ALL.iter().find(|(n, _)| *n == name) else {
                return Err(format!(
                    "unknown placeholder {{{name}}}; the placeholders are {{handle}}, {{doi}} and {{oai_local}}"
                ));
            };
            parts.push(Part::Value(p));
            rest = &rest[open + close + 1..];
        }
        if rest.contains('}') {
            return Err(format!("a }} without {{ in {rest:?}"));
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_owned()));
        }
        // The scheme and host are the template's own: a record's value may not choose the host.
        let head = match parts.first() {
            Some(Part::Text(t)) => t.as_str(),
            _ => "",
        };
        let after_scheme = head
            .split_once("://")
            .map(|(_, rest)| rest)
            .unwrap_or_default();
        if !after_scheme.contains('/') && parts.iter().any(|p| matches!(p, Part::Value(_))) {
            return Err(
                "a placeholder before the path: the scheme and host must be written out, e.g. https://host/records/{oai_local}"
                    .to_owned(),
            );
        }
        if !parts.iter().any(|p| matches!(p, Part::Value(_))) {
            return Err(
                "no placeholder: every record would get the same landing page; use {handle}, {doi} or {oai_local}"
                    .to_owned(),
            );
        }
        let template = Self {
            text: text.to_owned(),
            parts,
        };
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

    /// The template as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The template's scheme, host and port, with the path `/`: its part of the scope.
    fn origin(&self) -> Option<Url> {
        let url = Url::parse(&self.fill(|_| Some("x"))).ok()?;
        url.join("/").ok()
    }

    /// The text with each placeholder's value, percent-encoded where a URL needs it; `None`
    /// when a value is missing.
    fn try_fill<'v>(
        &self,
        mut value: impl FnMut(Placeholder) -> Option<&'v str>,
    ) -> Option<String> {
        let mut out = String::with_capacity(self.text.len() + 32);
        for part in &self.parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Value(p) => push_encoded(&mut out, value(*p)?),
            }
        }
        Some(out)
    }

    fn fill<'v>(&self, value: impl FnMut(Placeholder) -> Option<&'v str>) -> String {
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
}

impl Detected {
    /// `platform`, as the configuration sets it.
    pub fn configured(platform: Platform) -> Self {
        Self {
            platform,
            configured: true,
            evidence: "set in the configuration".to_owned(),
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

/// How many live records [`detect`] looks at, at most.
pub(crate) const SAMPLE: usize = 200;

/// The platform of a repository that is set to `auto`, from what it really sends: its baseURL's
/// path, the `oai-identifier` description's sample identifier, and the records of `sample` (the
/// first page, or the first stored records; at most [`SAMPLE`] are read). Google's rule stays
/// wherever it gives most records a landing page. A platform is chosen only when most of the
/// records show it: a baseURL path alone is evidence, not proof (another server can sit at
/// `/oai/request`), and so is an `eprints` description (DSpace sends one too). Without live
/// records there is nothing to publish either way, and nothing is chosen.
#[cfg(test)]
pub(crate) fn detect(base: Option<&Url>, identify: &Identify, sample: &[Record]) -> Detected {
    detect_over(base, identify, sample, None)
}

/// [`detect`], with Google's rule over `scope` when one is configured (it replaces the
/// baseURL's directory, so it is what Google's rule would publish).
pub(crate) fn detect_over(
    base: Option<&Url>,
    identify: &Identify,
    sample: &[Record],
    scope: Option<&Scope>,
) -> Detected {
    let signs = Signs::count(base, identify, sample, scope);
    let (platform, evidence) = signs.verdict();
    Detected {
        platform,
        configured: false,
        evidence,
    }
}

/// What a repository shows of each platform: its baseURL's path, Identify's sample identifier,
/// and how many of the first live records carry each platform's sign.
struct Signs<'a> {
    /// The baseURL's path (empty without one).
    path: &'a str,
    /// It ends as DSpace's endpoint does.
    dspace_path: bool,
    /// Identify's sample identifier is a handle.
    dspace_sample: bool,
    /// The path ends as EPrints' endpoint does.
    eprints_path: bool,
    /// Live records looked at (at most [`SAMPLE`]).
    live: usize,
    /// Of them, those carrying a Handle,
    handles: usize,
    /// those with an OAI identifier in DSpace's handle shape,
    handle_headers: usize,
    /// those with their EPrints abstract page as `dc:relation`,
    abstracts: usize,
    /// those with an OAI identifier in Islandora's `oai:host:node-N` shape,
    nodes: usize,
    /// and those Google's rule gives a landing page.
    generic: usize,
}

impl<'a> Signs<'a> {
    /// Counts the signs over the first [`SAMPLE`] live records of `sample`, Google's rule over
    /// `scope` or else the baseURL's directory.
    fn count(
        base: Option<&'a Url>,
        identify: &Identify,
        sample: &[Record],
        scope: Option<&Scope>,
    ) -> Self {
        let path = base.map_or("", Url::path);
        let live: Vec<&Record> = sample
            .iter()
            .filter(|r| !r.deleted && !r.unreadable())
            .take(SAMPLE)
            .collect();
        let handles = live.iter().filter(|r| carries_handle(r)).count();
        let handle_headers = live
            .iter()
            .filter(|r| is_handle_header(&r.identifier))
            .count();
        let abstracts = base.map_or(0, |base| {
            let at = eprints_at(base);
            live.iter()
                .filter(|r| eprints_abstract(r, &at).is_some())
                .count()
        });
        let nodes = live
            .iter()
            .filter(|r| islandora_node(&r.identifier).is_some())
            .count();
        // Records Google's rule already gives a landing page: the base case stays where it works.
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
        Self {
            path,
            dspace_path: path.ends_with("/oai/request"),
            dspace_sample: identify
                .sample_identifier
                .as_deref()
                .is_some_and(is_handle_header),
            eprints_path: path.ends_with("/cgi/oai2"),
            live: live.len(),
            handles,
            handle_headers,
            abstracts,
            nodes,
            generic,
        }
    }

    /// "Most": at least half, so that on a tie Google's rule, tried first, stays.
    fn most(&self, n: usize) -> bool {
        self.live > 0 && n * 2 >= self.live
    }

    /// `n` of the live records, in words.
    fn of(&self, n: usize) -> String {
        format!("{n} of the first {} live records", self.live)
    }

    /// The platform most records show, in the order Google's rule, EPrints, Islandora, DSpace,
    /// and the evidence; Google's rule with what was seen when none is shown by most.
    fn verdict(&self) -> (Platform, String) {
        if self.most(self.generic) {
            return (
                Platform::Generic,
                format!(
                    "{} have a dc:identifier landing page under the baseURL's directory (Google's rule)",
                    self.of(self.generic)
                ),
            );
        }
        if self.most(self.abstracts) {
            let path = if self.eprints_path {
                "the baseURL's path ends in /cgi/oai2 and "
            } else {
                ""
            };
            return (
                Platform::Eprints,
                format!(
                    "{path}{} have a dc:relation that is their own abstract page, as EPrints writes it",
                    self.of(self.abstracts)
                ),
            );
        }
        if self.most(self.nodes) {
            return (
                Platform::Islandora,
                format!(
                    "{} have OAI identifiers in Islandora's oai:host:node-N shape",
                    self.of(self.nodes)
                ),
            );
        }
        if self.most(self.handles)
            && (self.dspace_path || self.dspace_sample || self.most(self.handle_headers))
        {
            return (Platform::Dspace, self.dspace_evidence());
        }
        (Platform::Generic, self.nothing_shown())
    }

    /// Why DSpace: its endpoint, its sample identifier, its OAI identifiers, the Handles.
    fn dspace_evidence(&self) -> String {
        let mut why = Vec::new();
        if self.dspace_path {
            why.push(format!(
                "the baseURL's path ends in {}",
                dspace_suffix(self.path)
            ));
        }
        if self.dspace_sample {
            why.push(
                "Identify's sample identifier is a handle (oai:host:prefix/suffix)".to_owned(),
            );
        }
        if self.most(self.handle_headers) {
            why.push(format!(
                "{} have OAI identifiers in DSpace's handle shape",
                self.of(self.handle_headers)
            ));
        }
        why.push(format!("{} carry a Handle", self.of(self.handles)));
        why.join(", ")
    }

    /// What was seen when no platform is shown by most records: an endpoint whose records do
    /// not bear it out, or no live record at all.
    fn nothing_shown(&self) -> String {
        let mut seen = Vec::new();
        if self.dspace_path || self.dspace_sample {
            seen.push(format!(
                "a DSpace-like endpoint, but {} carry a Handle",
                self.of(self.handles)
            ));
        }
        if self.eprints_path {
            seen.push(format!(
                "an EPrints-like endpoint, but {} have their abstract page as dc:relation",
                self.of(self.abstracts)
            ));
        }
        if self.live == 0 {
            seen.push("no live record to look at".to_owned());
        }
        if seen.is_empty() {
            "nothing platform-specific recognised".to_owned()
        } else {
            seen.join("; ")
        }
    }
}

fn dspace_suffix(path: &str) -> &'static str {
    if path.ends_with("/server/oai/request") {
        "/server/oai/request (DSpace 7 and later)"
    } else {
        "/oai/request (DSpace)"
    }
}

/// Where the records' local Handle URLs (`https://host/xmlui/handle/P/S`, DSpace's default
/// spelling since 6.0) say the UI is: the root (`https://host/xmlui/`) most of the sample's
/// local spellings share, if any. The scheme is the one written, which is often an old `http`.
pub(crate) fn dspace_ui_in(sample: &[Record]) -> Option<Url> {
    // Counted by host and path: `http` and `https` spellings of one UI are one UI, which
    // answers `https` if any spelling says so.
    let mut roots: Vec<(String, bool, usize)> = Vec::new();
    for value in sample
        .iter()
        .filter(|r| !r.deleted)
        .take(SAMPLE)
        .flat_map(|r| &r.dc_identifiers)
    {
        if local_handle(value, None).is_none() {
            continue;
        }
        let Ok(url) = Url::parse(value.trim()) else {
            continue;
        };
        let Some(at) = url.path().find("/handle/") else {
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

/// The node number of an Islandora 2 OAI identifier, `oai:{host}:node-{N}`.
fn islandora_node(identifier: &str) -> Option<&str> {
    let n = identifier.rsplit(':').next()?.strip_prefix("node-")?;
    (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).then_some(n)
}

/// A path under a DSpace UI that serves a file: `bitstream/...` (DSpace 6's XMLUI and JSPUI,
/// also below a context path the UI's base does not name) or `bitstreams/{uuid}/download`
/// (DSpace 7's UI).
fn is_bitstream(path: &str) -> bool {
    ["bitstream/", "bitstreams/"]
        .iter()
        .any(|b| path.starts_with(b) || path.contains(&format!("/{b}")))
}

/// The UI of a DSpace at `base` that no `ui_url` names: under a path of the baseURL's host
/// (`/xmlui/`, `/jspui/`) when the records' local Handle URLs show one there, else the
/// baseURL's root. A UI the records show on another host is not taken (the operator has not
/// named it): `evidence` says where they point and that `ui_url` would take it.
fn dspace_ui(base: &Url, sample: &[Record], evidence: &mut String) -> Url {
    let mut root = base.clone();
    root.set_path("/");
    root.set_query(None);
    let Some(mut ui) = dspace_ui_in(sample) else {
        return root;
    };
    if ui.host_str() != base.host_str() {
        evidence.push_str(&format!(
            "; the records' local Handle URLs are under {ui}: if that is the UI, set ui_url"
        ));
        return root;
    }
    if ui.path() == "/" {
        return root;
    }
    let _ = ui.set_scheme(base.scheme());
    let _ = ui.set_port(base.port());
    evidence.push_str(&format!(
        "; the UI at {ui}, from the records' local Handle URLs"
    ));
    ui
}

/// `oai:{host}:{prefix}/{suffix}`: DSpace's OAI identifier for an item.
fn is_handle_header(identifier: &str) -> bool {
    identifier
        .strip_prefix("oai:")
        .and_then(|rest| rest.split_once(':'))
        .and_then(|(_, handle)| parse_handle(handle))
        .is_some()
}

/// Whether a record has a `dc:identifier` that is a Handle in any spelling, or a local
/// `/handle/P/S` URL.
fn carries_handle(record: &Record) -> bool {
    record.dc_identifiers.iter().any(|v| {
        matches!(classify::pid_of(v), Some(Pid::Handle(h)) if parse_handle(h).is_some())
            || local_handle(v, None).is_some()
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

/// The Handle of a `{ui}handle/P/S` URL (DSpace's local spelling), if it is one: on the UI's
/// host and under its path when `ui` (host, path) is given, in `http` or `https` (DSpace's
/// canonical prefix often says `http`); anywhere but under a bitstream's path when not.
fn local_handle<'v>(
    value: &'v str,
    ui: Option<(&str, &str)>,
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
            path.strip_prefix(ui_path)?.strip_prefix("handle/")?
        }
        None => {
            let at = path.find("/handle/")?;
            if path[..at].contains("/bitstream") {
                return None;
            }
            &path[at + "/handle/".len()..]
        }
    };
    let rest = rest.split(['?', '#']).next().unwrap_or(rest);
    parse_handle(rest)
}

/// The folder EPrints is installed in: the baseURL's directory above `cgi/oai2`, else `/`.
fn eprints_root(base: &Url) -> String {
    let path = base.path().trim_end_matches('/');
    let root = path.strip_suffix("cgi/oai2").unwrap_or("/");
    let mut root = root.to_owned();
    if !root.ends_with('/') {
        root.push('/');
    }
    root
}

/// Where EPrints is installed, without the scheme: the baseURL's host, its port if it names
/// one, and [`eprints_root`] (`eprints.example.ac.uk/`).
fn eprints_at(base: &Url) -> String {
    let port = base.port().map(|p| format!(":{p}")).unwrap_or_default();
    format!(
        "{}{port}{}",
        base.host_str().unwrap_or_default(),
        eprints_root(base)
    )
}

/// The eprint id of an EPrints OAI identifier, `oai:{repository}:{eprintid}`.
fn eprint_id(identifier: &str) -> Option<&str> {
    let id = identifier.rsplit(':').next()?;
    (!id.is_empty() && id.bytes().all(|b| b.is_ascii_digit())).then_some(id)
}

/// The record's abstract page among its `dc:relation`s: an http(s) URL at the installation
/// `at` ([`eprints_at`]; either scheme, as `http_url` and the baseURL often differ) whose path
/// goes on with `{id}/` or `id/eprint/{id}/` for the record's own eprint id (an official URL
/// may point at another record of the same host). When the OAI identifier holds no id, only
/// the first or the last relation counts, where EPrints writes it. Compared as text, as
/// EPrints writes it: a relation is read for every record.
fn eprints_abstract<'r>(record: &'r Record, at: &str) -> Option<&'r str> {
    let own = eprint_id(&record.identifier);
    let relations: SmallVec<[&str; 4]> = record.dc_values(DcElement::Relation).collect();
    let last = relations.len().saturating_sub(1);
    relations.iter().enumerate().find_map(|(i, &value)| {
        let value = value.trim();
        let rest = classify::strip_prefix_ignore_case(value, "https://")
            .or_else(|| classify::strip_prefix_ignore_case(value, "http://"))?;
        let rest = classify::strip_prefix_ignore_case(rest, at)?;
        let rest = rest.strip_prefix("id/eprint/").unwrap_or(rest);
        let id = rest.strip_suffix('/').unwrap_or(rest);
        let id_ok = !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit());
        let ours = match own {
            Some(own) => id == own,
            None => i == 0 || i == last,
        };
        (id_ok && ours).then_some(value)
    })
}

/// The landing rule in effect for one harvest: the platform (or template), its scope, and why.
#[derive(Clone, Debug)]
pub struct Landing {
    rule: Rule,
    scope: Scope,
    detected: Detected,
}

#[derive(Clone, Debug)]
enum Rule {
    Generic,
    /// DSpace, with its UI's base as text ending in `/` (`https://host/` or `https://host/ui/`),
    /// and that base's host and path.
    Dspace {
        ui: String,
        host: String,
        path: String,
    },
    /// EPrints, installed at `at` ([`eprints_at`]), served in the baseURL's `scheme`.
    Eprints {
        at: String,
        scheme: String,
    },
    /// Islandora 2, with its site's root (`https://host/`).
    Islandora {
        site: String,
    },
    Template(Template),
}

/// Why a landing rule cannot be made.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LandingError(String);

/// The error of `platform`'s rule without an http(s) baseURL.
fn no_base(platform: Platform) -> LandingError {
    LandingError(format!(
        "the {platform} rule needs an http(s) baseURL to find the repository's host"
    ))
}

/// The scope of everything under `path` on `url`'s host, for `platform`'s rule.
fn origin_scope(url: &Url, path: &str, platform: Platform) -> Result<Scope, LandingError> {
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
        platform: Platform,
    ) -> Result<(Self, Scope), LandingError> {
        let origin_url = template
            .origin()
            .ok_or_else(|| LandingError(format!("landing_template {template} has no host")))?;
        let mut prefixes = vec![origin_url];
        if let Some(dir) = base.and_then(Scope::from_base_url) {
            prefixes.extend(dir.prefixes().iter().filter_map(|p| Url::parse(p).ok()));
        }
        let scope = Scope::from_prefixes(&prefixes).ok_or_else(|| no_base(platform))?;
        Ok((Rule::Template(template.clone()), scope))
    }

    /// DSpace's rule under its UI: `ui_url` when configured, else the one the baseURL and the
    /// sample show ([`dspace_ui`], which adds to `evidence`).
    fn for_dspace(
        ui_url: Option<&Url>,
        base: Option<&Url>,
        sample: &[Record],
        evidence: &mut String,
    ) -> Result<(Self, Scope), LandingError> {
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
                let base = base.ok_or_else(|| no_base(Platform::Dspace))?;
                dspace_ui(base, sample, evidence)
            }
        };
        let scope = origin_scope(&ui, ui.path(), Platform::Dspace)?;
        let mut text = ui.to_string();
        if let Some(q) = text.find(['?', '#']) {
            text.truncate(q);
        }
        let rule = Rule::Dspace {
            ui: text,
            host: ui.host_str().unwrap_or_default().to_owned(),
            path: ui.path().to_owned(),
        };
        Ok((rule, scope))
    }

    /// Islandora's rule, on the Drupal site whose `oai/request` the baseURL is.
    fn for_islandora(base: Option<&Url>) -> Result<(Self, Scope), LandingError> {
        let base = base.ok_or_else(|| no_base(Platform::Islandora))?;
        // Drupal under a path: the site is the baseURL's folder above `oai/request`.
        let path = base.path().trim_end_matches('/');
        let site = path.strip_suffix("oai/request").unwrap_or("/");
        let site = if site.ends_with('/') {
            site.to_owned()
        } else {
            format!("{site}/")
        };
        let scope = origin_scope(base, &site, Platform::Islandora)?;
        let rule = Rule::Islandora {
            site: scope.to_string(),
        };
        Ok((rule, scope))
    }

    /// EPrints' rule, for the installation the baseURL belongs to.
    fn for_eprints(base: Option<&Url>) -> Result<(Self, Scope), LandingError> {
        let base = base.ok_or_else(|| no_base(Platform::Eprints))?;
        let scope = origin_scope(base, &eprints_root(base), Platform::Eprints)?;
        let rule = Rule::Eprints {
            at: eprints_at(base),
            scheme: base.scheme().to_owned(),
        };
        Ok((rule, scope))
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
        }
    }

    /// The rule for `settings` of a repository at `base` (its baseURL: the one it states, for
    /// a Static Repository) when it is a platform's or a template's; `None` for Google's rule
    /// ([`Landing::generic`]). `explicit` is the configured scope, which replaces the
    /// platform's own; `detected` the platform found or configured, to which what the rule
    /// finds is added; `sample` the first records, where a DSpace UI under a path shows
    /// ([`dspace_ui_in`]). Every platform's scope is on the baseURL's host (or `ui_url`'s, or
    /// the template's): never on a host the operator did not name.
    pub fn new(
        settings: &LandingSettings,
        base: Option<&Url>,
        explicit: Option<&Scope>,
        detected: &mut Detected,
        sample: &[Record],
    ) -> Result<Option<Self>, LandingError> {
        let (rule, own_scope) = if let Some(template) = &settings.template {
            Rule::for_template(template, base, detected.platform)?
        } else {
            match detected.platform {
                Platform::Generic => return Ok(None),
                Platform::Dspace => Rule::for_dspace(
                    settings.ui_url.as_ref(),
                    base,
                    sample,
                    &mut detected.evidence,
                )?,
                Platform::Islandora => Rule::for_islandora(base)?,
                Platform::Eprints => Rule::for_eprints(base)?,
            }
        };
        Ok(Some(Self {
            rule,
            scope: explicit.cloned().unwrap_or(own_scope),
            detected: detected.clone(),
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

    /// Whether this is Google's rule alone, so that the classification of `dc:identifier`
    /// values is all there is to it (the fast path).
    pub fn is_generic(&self) -> bool {
        matches!(self.rule, Rule::Generic)
    }

    /// Where a record's landing page comes from, in words.
    pub fn rule_text(&self) -> String {
        match &self.rule {
            Rule::Generic => format!("a dc:identifier URL inside {}", self.scope),
            Rule::Dspace { ui, .. } => {
                format!("{ui}handle/{{prefix}}/{{suffix}}, from the record's Handle")
            }
            Rule::Eprints { .. } => format!(
                "the dc:relation that is the record's abstract page ({}{{id}}/ or {}id/eprint/{{id}}/)",
                self.scope, self.scope
            ),
            Rule::Islandora { site } => {
                format!("{site}node/{{N}}, from the OAI identifier oai:host:node-N")
            }
            Rule::Template(t) => format!("the template {t}"),
        }
    }

    /// Everything that decides which URLs a record publishes, as text: the scope alone for the
    /// generic rule (what a store recorded before platforms), else with the rule. A published
    /// sitemap is patched only under the same text.
    pub fn key(&self) -> String {
        match &self.rule {
            Rule::Generic => self.scope.to_string(),
            Rule::Dspace { ui, .. } => format!("{} dspace ui={ui}", self.scope),
            Rule::Eprints { at, .. } => format!("{} eprints at={at}", self.scope),
            Rule::Islandora { site } => format!("{} islandora site={site}", self.scope),
            Rule::Template(t) => format!("{} template={t}", self.scope),
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
            Rule::Dspace { ui, host, path } => self.dspace(record, ui, (host, path), out),
            Rule::Eprints { at, scheme } => self.eprints(record, at, scheme, out),
            Rule::Islandora { site } => self.islandora(record, site, out),
            Rule::Template(template) => self.template(record, template, out),
        }
    }

    /// Islandora 2: the node page `{site}node/N` of the OAI identifier `oai:host:node-N`, then
    /// the identifiers as usual (the node page again, if a site's mapping lists it, once).
    fn islandora<'a>(&self, record: &'a Record, site: &str, out: &mut Classes<'a>) {
        let page = islandora_node(&record.identifier)
            .map(|n| landing(format!("{site}node/{n}"), &self.scope, None));
        self.derived_then_identifiers(page, record, out);
    }

    /// A page the rule derived (if any) first, then the record's `dc:identifier`s classified as
    /// Google's rule does, but for the derived page again, which is listed once.
    fn derived_then_identifiers<'a>(
        &self,
        derived: Option<Class<'static>>,
        record: &'a Record,
        out: &mut Classes<'a>,
    ) {
        let first = out.len();
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
    }

    /// DSpace: each Handle (any spelling, or a local `/handle/P/S` URL) gives the landing page
    /// `{ui}handle/P/S`, once; a proxy spelling is also the record's persistent identifier.
    /// Bitstreams on the UI are content files. A value spelled as a Handle that does not parse
    /// is [`Drop::InvalidHandle`].
    fn dspace<'a>(&self, record: &'a Record, ui: &str, ui_at: (&str, &str), out: &mut Classes<'a>) {
        // Every Handle the record gives, once each, in order.
        let mut handles: SmallVec<[(&'a str, &'a str, &'a str); 2]> = SmallVec::new();
        let mut rest: Classes<'a> = SmallVec::new();
        for value in &record.dc_identifiers {
            // Each value is classified once; what DSpace adds is read from that.
            let handle = match classify::class(value, &self.scope) {
                Class::PersistentId(Pid::Handle(h)) => parse_handle(h),
                Class::LandingPage(url) if url.starts_with(ui) => {
                    let path = &url[ui.len()..];
                    if path.starts_with("handle/") {
                        // The local spelling, borrowed from the value itself.
                        local_handle(value, Some(ui_at))
                    } else if is_bitstream(path) {
                        rest.push(Class::ContentFile {
                            url,
                            media_type: classify::OCTET_STREAM,
                        });
                        continue;
                    } else {
                        rest.push(Class::LandingPage(url));
                        continue;
                    }
                }
                // The local spelling in the other scheme (DSpace's canonical prefix often
                // still says `http`).
                Class::Dropped(Drop::OutOfScope) if local_handle(value, Some(ui_at)).is_some() => {
                    local_handle(value, Some(ui_at))
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
        if let Some((whole, prefix, suffix)) = chosen {
            out.push(self.handle_page(ui, prefix, suffix));
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
    }

    /// The landing page `{ui}handle/{prefix}/{suffix}` of a Handle. The UI's base is a URL in
    /// normal form, and so is the page when the Handle holds only letters, digits, `-._~` and
    /// `/` with no dot-segment, as DSpace's do: then only the length and the scope are checked;
    /// any other page is checked as every identifier is.
    fn handle_page(&self, ui: &str, prefix: &str, suffix: &str) -> Class<'static> {
        let mut url =
            String::with_capacity(ui.len() + "handle/".len() + prefix.len() + 1 + suffix.len());
        url.push_str(ui);
        url.push_str("handle/");
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

    /// EPrints: the abstract page (a `dc:relation`) is the landing page; every other URL the
    /// record gives on the host is a document (a content file); a DOI is the persistent
    /// identifier; a `dc:relation` that is no URL is [`Drop::RelationNotAUrl`]. Relations that
    /// are other URLs (an official URL) are not the record's to publish and are not counted.
    /// Without an abstract page, the identifiers are classified as usual.
    fn eprints<'a>(&self, record: &'a Record, at: &str, scheme: &str, out: &mut Classes<'a>) {
        let found = eprints_abstract(record, at);
        // Borrowed from the record, as the abstract page is in normal form as a rule.
        let mut abstract_url: Option<Cow<'a, str>> = None;
        if let Some(value) = found {
            // EPrints' `http_url` often still says `http` where the baseURL says `https`: the
            // page is the same installation's, served in the baseURL's scheme.
            let class = match value.split_once("://") {
                Some((written, rest)) if !written.eq_ignore_ascii_case(scheme) => {
                    landing(format!("{scheme}://{rest}"), &self.scope, None)
                }
                _ => classify::class(value, &self.scope),
            };
            let class = match class {
                Class::LandingPage(url) | Class::ContentFile { url, .. } => {
                    abstract_url = Some(url.clone());
                    Class::LandingPage(url)
                }
                class => class,
            };
            out.push(class);
        }
        for value in &record.dc_identifiers {
            match classify::class(value, &self.scope) {
                Class::LandingPage(url) if abstract_url.is_some() => {
                    if abstract_url.as_deref() != Some(url.as_ref()) {
                        out.push(Class::ContentFile {
                            url,
                            media_type: classify::OCTET_STREAM,
                        });
                    }
                }
                class => out.push(class),
            }
        }
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

    /// A template: the landing page from the record's Handle, DOI or OAI identifier (a record
    /// without the value gets none from it); the identifiers are then classified as usual.
    fn template<'a>(&self, record: &'a Record, template: &Template, out: &mut Classes<'a>) {
        let pid = |want: fn(&Pid<'a>) -> Option<&'a str>| {
            record
                .dc_identifiers
                .iter()
                .map(String::as_str)
                .chain(record.dc_values(DcElement::Relation))
                .filter_map(classify::pid_of)
                .find_map(|p| want(&p))
        };
        // A value that would be a dot segment climbs out of the template's path.
        let mut climbs = false;
        let filled = template.try_fill(|p| {
            let value = match p {
                Placeholder::Handle => pid(|p| match p {
                    Pid::Handle(h) => Some(*h),
                    Pid::Doi(_) => None,
                }),
                Placeholder::Doi => pid(|p| match p {
                    Pid::Doi(d) => Some(*d),
                    Pid::Handle(_) => None,
                }),
                Placeholder::OaiLocal => {
                    let id = record.identifier.as_str();
                    Some(id.rsplit(':').next().unwrap_or(id)).filter(|s| !s.is_empty())
                }
            };
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
            platform: Setting::Fixed(Platform::Dspace),
            ui_url: ui.map(|u| Url::parse(u).unwrap()),
            template: None,
        };
        landing(settings, base, Platform::Dspace)
    }

    fn eprints(base: &str) -> Landing {
        let settings = LandingSettings {
            platform: Setting::Fixed(Platform::Eprints),
            ..LandingSettings::default()
        };
        landing(settings, base, Platform::Eprints)
    }

    fn template(text: &str, base: &str) -> Landing {
        let settings = LandingSettings {
            template: Some(Template::parse(text).unwrap()),
            ..LandingSettings::default()
        };
        landing(settings, base, Platform::Generic)
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

    #[test]
    fn islandora_2_pages_come_from_the_node_in_the_oai_identifier() {
        let settings = LandingSettings {
            platform: Setting::Fixed(Platform::Islandora),
            ..LandingSettings::default()
        };
        let rule = landing(
            settings,
            "https://digital.example.org/oai/request",
            Platform::Islandora,
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
            Platform::Islandora
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
            let Rule::Dspace { ui, .. } = &rule.rule else { unreachable!() };
            let mut url = format!("{ui}handle/{prefix}/");
            push_encoded(&mut url, &suffix);
            let checked = super::landing(url, &rule.scope, None);
            let fast = rule.handle_page(ui, &prefix, &suffix);
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
            platform: Setting::Fixed(Platform::Islandora),
            ..LandingSettings::default()
        };
        let rule = landing(
            settings,
            "https://h.example/site/oai/request",
            Platform::Islandora,
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
        let d = detect_over(Some(&base), &identify(None), &records, Some(&scope));
        assert_eq!(d.platform, Platform::Generic, "{d}");
        let d = detect(Some(&base), &identify(None), &records);
        assert_eq!(d.platform, Platform::Dspace, "{d}");
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
        assert_eq!(d.platform, Platform::Dspace, "{d}");
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
        assert_eq!(d.platform, Platform::Dspace, "{d}");
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
        assert_eq!(d.platform, Platform::Generic, "{d}");
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
        assert_eq!(d.platform, Platform::Generic, "{d}");
        // A DSpace-like endpoint whose records show nothing of DSpace: generic, and why.
        let plain: Vec<Record> = (1..=4)
            .map(|i| record(&format!("oai:h:{i}"), &["Smith (2020)"], &[]))
            .collect();
        let d = detect(
            Some(&url("https://h.example/oai/request")),
            &identify(None),
            &plain,
        );
        assert_eq!(d.platform, Platform::Generic, "{d}");
        assert!(d.evidence.contains("DSpace-like endpoint"), "{d}");
        // No live record: nothing chosen.
        let d = detect(
            Some(&url("https://h.example/oai/request")),
            &identify(None),
            &[],
        );
        assert_eq!(d.platform, Platform::Generic, "{d}");
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
        assert_eq!(d.platform, Platform::Eprints, "{d}");
        assert!(d.evidence.contains("/cgi/oai2"), "{d}");
        // Handles on a few records only: not DSpace.
        let mut mixed = generic.clone();
        mixed.push(dspace_records[0].clone());
        let d = detect(
            Some(&url("https://h.example/oai/request")),
            &identify(None),
            &mixed,
        );
        assert_eq!(d.platform, Platform::Generic, "{d}");
    }
}
