//! A platform as data: one row of the platforms table (`src/platform/platforms.toml`, built in)
//! or a `[[platform]]` table of bridge.toml (an operator's), read by the interpreter in
//! [`super`]. A row says how a repository shows the platform (its signs) and where a record's
//! landing page is (its landing rule), in one of four shapes:
//! - `from = "handle"`: the record's Handle, as a page `{site}handle/{handle}` of the platform's
//!   UI (DSpace);
//! - `from = "template"`: a template over the OAI identifier's parts (named groups of the
//!   row's `oai_identifier` pattern), the record's DOI or Handle, and the site's root;
//! - `from = "dc:identifier"` or `"dc:relation"`: the value of that element that matches one of
//!   the row's `match` patterns (`{site}{id}/`, `{site}*`);
//! - the OAI identifier's parts are named groups of `oai_identifier`, e.g. `(?<id>[0-9]+)`.
//!
//! A row is checked when it is read, and its errors name the key (`[[platform]] "x" landing.page:
//! ...`), so a table an operator writes fails at load, never at a harvest.

use std::fmt;
use std::sync::{Arc, LazyLock};

use oai_pmh::DcElement;
use regex::Regex;
use serde::Deserialize;

use super::{Placeholder, Template};

/// A row as written (TOML). Unknown keys are refused, so a typo names itself.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowSpec {
    /// The name used in `platform = "..."`, summaries and metrics (lower case, `[a-z0-9-]`).
    pub name: String,
    /// The platform's name for people (`bepress Digital Commons`).
    pub title: String,
    /// Where the row's facts come from (a repository and path, or a documentation page).
    #[serde(default)]
    pub sources: Vec<String>,
    /// Endings of the baseURL's path that the platform's OAI-PMH endpoint has (`/cgi/oai2`): a
    /// sign, and where the site is (the path above the ending).
    #[serde(default)]
    pub endpoint: Vec<String>,
    /// `endpoint` (default): the site is the baseURL's path above the endpoint (else the host's
    /// root); `root`: always the host's root; `domain` (a `dc:*` rule only): the root of the
    /// host the records' pages are on, one sharing the baseURL's registered domain (Figshare's
    /// pages on `figshare.com`, its endpoint on `api.figshare.com`).
    #[serde(default)]
    pub site: SiteSpec,
    /// A pattern over Identify's `repositoryName` and `<description>` text: a sign.
    pub identify: Option<String>,
    /// A pattern over Identify's `sampleIdentifier`: a sign.
    pub sample_identifier: Option<String>,
    /// A pattern over each record's OAI identifier; its named groups are placeholders of the
    /// landing rule. Most records matching it is a sign.
    pub oai_identifier: Option<String>,
    /// `sign` (default): chosen under `auto` only when one of the signs above shows as well as
    /// most records getting a landing page; `landing`: the landing pages alone are enough;
    /// `endpoint`: the baseURL's path must end as `endpoint` says.
    #[serde(default)]
    pub requires: Requires,
    /// Where the landing page is.
    pub landing: LandingSpec,
    /// Patterns over a URL's path and query (after the site) that name content files, not pages.
    #[serde(default)]
    pub content_files: Vec<String>,
    /// Which of a record's persistent identifiers is its `cite-as` (the Signmap's, the
    /// linkset's), in order of preference: `["doi", "handle"]` makes the DOI it carries the
    /// cite-as even when its Handle comes first. Empty (default): the first one the record
    /// gives.
    #[serde(default)]
    pub cite_as: Vec<CiteAs>,
    /// What most records show when the rule applies, after "N of the first M live records"
    /// (`carry a Handle`).
    pub evidence: String,
    /// What an operator needs to do when the records hold no way to the page, for `check`.
    pub advice: Option<String>,
}

/// A kind of persistent identifier ([`RowSpec::cite_as`]).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum CiteAs {
    /// A DOI.
    Doi,
    /// A Handle.
    Handle,
}

impl CiteAs {
    /// Whether `pid` is of this kind.
    pub fn is(self, pid: &crate::classify::Pid<'_>) -> bool {
        matches!(
            (self, pid),
            (CiteAs::Doi, crate::classify::Pid::Doi(_))
                | (CiteAs::Handle, crate::classify::Pid::Handle(_))
        )
    }
}

/// See [`RowSpec::site`].
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum SiteSpec {
    /// The baseURL's path above the endpoint.
    #[default]
    Endpoint,
    /// The host's root.
    Root,
    /// The root of the host most of the first records' pages are on, among the hosts that share
    /// the baseURL's registered domain (by the Public Suffix List, as the widened scope's).
    Domain,
}

/// See [`RowSpec::requires`].
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Requires {
    /// A sign besides the landing pages.
    #[default]
    Sign,
    /// The landing pages alone.
    Landing,
    /// The endpoint (for a platform whose identifiers look like others', InvenioRDM's numbers).
    Endpoint,
}

/// A row's landing rule as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LandingSpec {
    /// `handle`, `template`, `dc:identifier` or `dc:relation`.
    pub from: String,
    /// The page: `{site}handle/{handle}` (from a Handle), or the template.
    pub page: Option<String>,
    /// For `dc:*`: the patterns a value must match, tried in order (`{site}{id}/`, `{site}*`).
    #[serde(default, rename = "match")]
    pub patterns: Vec<String>,
    /// For `dc:*`: `record` (default) keeps the scheme the value is written in; `base` serves it
    /// in the baseURL's scheme (EPrints' `http_url` often still says `http`).
    #[serde(default)]
    pub scheme: SchemeSpec,
}

/// See [`LandingSpec::scheme`].
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum SchemeSpec {
    /// As the record writes it.
    #[default]
    Record,
    /// The baseURL's.
    Base,
}

/// A row, checked and compiled.
#[derive(Debug)]
pub struct Row {
    /// As written.
    pub spec: RowSpec,
    /// Whether it is one of the built-in rows.
    pub builtin: bool,
    pub(super) identify: Option<Regex>,
    pub(super) sample_identifier: Option<Regex>,
    pub(super) oai_identifier: Option<Regex>,
    /// When `oai_identifier` is `^oai:[^:]+:(?<NAME>[0-9]+)$` (EPrints', and `oai:host:N`
    /// anywhere): NAME, whose value a record's OAI identifier gives without the regex
    /// ([`oai_local_digits`]), as the match arm this row replaced read it; a regex search per
    /// record was most of what the interpreter cost more (issue 29, point 7).
    pub(super) oai_local_digits: Option<String>,
    pub(super) landing: RowLanding,
    pub(super) content_files: Option<regex::RegexSet>,
}

/// A row's landing rule, compiled.
#[derive(Debug)]
pub(super) enum RowLanding {
    /// `{site}{before}{handle}`: DSpace's `handle/`.
    Handle { before: String },
    /// A template (with `{site}` and the OAI identifier's groups).
    Template(Template),
    /// A value of `element` matching one of `patterns`.
    Field {
        element: Element,
        patterns: Vec<Pattern>,
        scheme: SchemeSpec,
    },
}

/// The Dublin Core element a `dc:*` rule reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Element {
    Identifier,
    Relation,
}

/// A `match` pattern: after `{site}` (which matches either scheme), literal text and
/// placeholders; `*` at the end matches any rest. A placeholder whose value the record gives
/// (its OAI identifier's group) matches that value only; one it does not give matches a path
/// segment (letters, digits, `.`, `_`, `-`), and then only in the first or the last value, where
/// platforms write their own page. A final `/` may be missing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Pattern {
    pub(super) parts: Vec<PatternPart>,
    pub(super) rest: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum PatternPart {
    Text(String),
    Group(String),
}

/// Why a row cannot be used; names the key. Not a failure of its own but the pure check's
/// answer: the configuration reports it as a [`crate::error::ConfigError`] naming the file
/// ([`RowError::key_path`], [`RowError::message`]); the fuzz target reads its key.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("[[platform]] {name:?} {key}: {message}")]
pub struct RowError {
    name: String,
    key: &'static str,
    message: String,
}

impl RowError {
    /// The key, as a configuration error names it: `[[platform]] "x" landing.page`.
    pub fn key_path(&self) -> String {
        format!("[[platform]] {:?} {}", self.name, self.key)
    }

    /// What is wrong.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl Row {
    /// Checks and compiles a row; `builtin` for the table's own.
    pub fn new(spec: RowSpec, builtin: bool) -> Result<Self, RowError> {
        let fail = |key: &'static str, message: String| RowError {
            name: spec.name.clone(),
            key,
            message,
        };
        if spec.name.is_empty()
            || !spec
                .name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return Err(fail(
                "name",
                "a platform's name is lower-case letters, digits and '-'".to_owned(),
            ));
        }
        if matches!(spec.name.as_str(), "auto" | "generic") {
            return Err(fail("name", format!("{:?} is reserved", spec.name)));
        }
        let regex = |key: &'static str, text: &Option<String>| -> Result<Option<Regex>, RowError> {
            text.as_deref()
                .map(|t| Regex::new(t).map_err(|e| fail(key, format!("{t:?} is no pattern: {e}"))))
                .transpose()
        };
        let identify = regex("identify", &spec.identify)?;
        let sample_identifier = regex("sample_identifier", &spec.sample_identifier)?;
        let oai_identifier = regex("oai_identifier", &spec.oai_identifier)?;
        for ending in &spec.endpoint {
            if !ending.starts_with('/') {
                return Err(fail(
                    "endpoint",
                    format!("{ending:?}: an ending of the baseURL's path starts with '/'"),
                ));
            }
        }
        let groups: Vec<&str> = oai_identifier
            .as_ref()
            .map(|r| r.capture_names().flatten().collect())
            .unwrap_or_default();
        let landing = match spec.landing.from.as_str() {
            "handle" => {
                let page = spec
                    .landing
                    .page
                    .as_deref()
                    .unwrap_or("{site}handle/{handle}");
                let before = page
                    .strip_prefix("{site}")
                    .and_then(|rest| rest.strip_suffix("{handle}"))
                    .filter(|b| !b.contains(['{', '}']))
                    .ok_or_else(|| {
                        fail(
                            "landing.page",
                            format!(
                                "{page:?}: a Handle's page is {{site}}, a path, then {{handle}}"
                            ),
                        )
                    })?;
                RowLanding::Handle {
                    before: before.to_owned(),
                }
            }
            "template" => {
                let page =
                    spec.landing.page.as_deref().ok_or_else(|| {
                        fail("landing.page", "a template needs its page".to_owned())
                    })?;
                let template = Template::parse_row(page, &groups)
                    .map_err(|m| fail("landing.page", format!("{page:?}: {m}")))?;
                RowLanding::Template(template)
            }
            "dc:identifier" | "dc:relation" => {
                if spec.landing.patterns.is_empty() {
                    return Err(fail(
                        "landing.match",
                        "a dc:* rule needs at least one pattern, e.g. \"{site}*\"".to_owned(),
                    ));
                }
                let patterns = spec
                    .landing
                    .patterns
                    .iter()
                    .map(|p| {
                        Pattern::parse(p, &groups)
                            .map_err(|m| fail("landing.match", format!("{p:?}: {m}")))
                    })
                    .collect::<Result<_, _>>()?;
                RowLanding::Field {
                    element: if spec.landing.from == "dc:identifier" {
                        Element::Identifier
                    } else {
                        Element::Relation
                    },
                    patterns,
                    scheme: spec.landing.scheme,
                }
            }
            other => {
                return Err(fail(
                    "landing.from",
                    format!(
                        "{other:?}: a landing page comes from \"handle\", \"template\", \"dc:identifier\" or \"dc:relation\""
                    ),
                ));
            }
        };
        // A template or a Handle makes a page on a host that must be known before any record
        // is read; only a value the records give can tell which host of the domain it is.
        if spec.site == SiteSpec::Domain && !matches!(landing, RowLanding::Field { .. }) {
            return Err(fail(
                "site",
                "\"domain\" is for a dc:identifier or dc:relation rule, whose records name the host"
                    .to_owned(),
            ));
        }
        let content_files = if spec.content_files.is_empty() {
            None
        } else {
            Some(
                regex::RegexSet::new(&spec.content_files)
                    .map_err(|e| fail("content_files", format!("no pattern: {e}")))?,
            )
        };
        Ok(Self {
            identify,
            sample_identifier,
            oai_local_digits: spec.oai_identifier.as_deref().and_then(local_digits_group),
            oai_identifier,
            landing,
            content_files,
            spec,
            builtin,
        })
    }

    /// The row's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Whether the rule reads `dc:relation` (a harvest then keeps it).
    pub(super) fn reads_relations(&self) -> bool {
        match &self.landing {
            RowLanding::Field { element, .. } => *element == Element::Relation,
            RowLanding::Template(t) => t.uses(Placeholder::Doi),
            RowLanding::Handle { .. } => false,
        }
    }

    /// Whether `path` (after the site) names a content file.
    pub(super) fn is_content_file(&self, path: &str) -> bool {
        self.content_files
            .as_ref()
            .is_some_and(|s| s.is_match(path))
    }

    /// The row as text, for a settings fingerprint and a landing rule's key: an edited row
    /// re-renders what it published.
    pub fn fingerprint(&self) -> String {
        format!("{:?}", self.spec)
    }
}

impl Pattern {
    fn parse(text: &str, groups: &[&str]) -> Result<Self, String> {
        let rest_text = text
            .strip_prefix("{site}")
            .ok_or("a pattern starts with {site}")?;
        let (body, rest) = match rest_text.strip_suffix('*') {
            Some(body) => (body, true),
            None => (rest_text, false),
        };
        let mut parts = Vec::new();
        let mut tail = body;
        while let Some(open) = tail.find('{') {
            if open > 0 {
                parts.push(PatternPart::Text(tail[..open].to_owned()));
            }
            let close = tail[open..].find('}').ok_or("an unclosed {")? + open;
            let name = &tail[open + 1..close];
            if !groups.contains(&name) {
                return Err(format!(
                    "{{{name}}} is no named group of oai_identifier (groups: {groups:?})"
                ));
            }
            parts.push(PatternPart::Group(name.to_owned()));
            tail = &tail[close + 1..];
        }
        if tail.contains(['}', '*']) {
            return Err("a } without {, or a * before the end".to_owned());
        }
        if !tail.is_empty() {
            parts.push(PatternPart::Text(tail.to_owned()));
        }
        Ok(Self { parts, rest })
    }
}

impl fmt::Display for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.spec.name)
    }
}

/// The group's name when `pattern` is exactly `^oai:[^:]+:(?<NAME>[0-9]+)$` (or `(?P<NAME>`).
fn local_digits_group(pattern: &str) -> Option<String> {
    let rest = pattern.strip_prefix("^oai:[^:]+:(?")?;
    let rest = rest.strip_prefix('P').unwrap_or(rest).strip_prefix('<')?;
    let (name, tail) = rest.split_once('>')?;
    let word = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    (word && tail == "[0-9]+)$").then(|| name.to_owned())
}

/// What `^oai:[^:]+:(?<NAME>[0-9]+)$` captures as NAME in `identifier`, without the regex.
pub(super) fn oai_local_digits(identifier: &str) -> Option<&str> {
    let (middle, digits) = identifier.strip_prefix("oai:")?.split_once(':')?;
    (!middle.is_empty() && !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .then_some(digits)
}

/// The built-in rows, in the order `auto` tries them.
const TABLE: &str = include_str!("platforms.toml");

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    platform: Vec<RowSpec>,
}

/// The built-in rows, read once.
pub(crate) static BUILTIN: LazyLock<Vec<Arc<Row>>> = LazyLock::new(|| {
    let table: Table = toml::from_str(TABLE).expect("src/platform/platforms.toml is valid TOML");
    table
        .platform
        .into_iter()
        .map(|spec| Arc::new(Row::new(spec, true).expect("every built-in row is valid")))
        .collect()
});

/// The rows `auto` tries and `platform = "..."` names: an operator's `[[platform]]` rows
/// (first, so that one may replace a built-in row of the same name), then the built-in ones.
#[derive(Clone, Debug, Default)]
pub struct Registry {
    own: Vec<Arc<Row>>,
}

impl Registry {
    /// The built-in rows and `own`: refused when two of `own` share a name.
    pub fn with(own: Vec<Row>) -> Result<Self, RowError> {
        for (i, row) in own.iter().enumerate() {
            if own[..i].iter().any(|r| r.name() == row.name()) {
                return Err(RowError {
                    name: row.name().to_owned(),
                    key: "name",
                    message: "two [[platform]] tables have this name".to_owned(),
                });
            }
        }
        Ok(Self {
            own: own.into_iter().map(Arc::new).collect(),
        })
    }

    /// Every row, the operator's first; a built-in row an operator's replaces is left out.
    pub fn rows(&self) -> impl Iterator<Item = &Arc<Row>> {
        self.own.iter().chain(
            BUILTIN
                .iter()
                .filter(|b| !self.own.iter().any(|o| o.name() == b.name())),
        )
    }

    /// The row named `name` (case-insensitive).
    pub fn get(&self, name: &str) -> Option<&Arc<Row>> {
        self.rows().find(|r| r.name().eq_ignore_ascii_case(name))
    }

    /// Every name, for messages.
    pub fn names(&self) -> String {
        let mut names = vec!["auto".to_owned(), "generic".to_owned()];
        names.extend(self.rows().map(|r| r.name().to_owned()));
        names.join(", ")
    }

    /// The operator's rows as text, for a settings fingerprint.
    pub fn fingerprint(&self) -> String {
        self.own.iter().map(|r| r.fingerprint()).collect()
    }
}

impl PartialEq for Registry {
    fn eq(&self, other: &Self) -> bool {
        self.fingerprint() == other.fingerprint()
    }
}

impl Eq for Registry {}

impl std::hash::Hash for Registry {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.fingerprint().hash(state);
    }
}

/// An element's values in a record.
pub(super) fn element_values(
    record: &oai_pmh::Record,
    element: Element,
) -> smallvec::SmallVec<[&str; 4]> {
    match element {
        Element::Identifier => record.dc_identifiers.iter().map(String::as_str).collect(),
        Element::Relation => record.dc_values(DcElement::Relation).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(extra: &str) -> Result<Row, RowError> {
        let text = format!("name = \"x\"\ntitle = \"X\"\nevidence = \"show it\"\n{extra}");
        let spec: RowSpec = toml::from_str(&text).map_err(|e| RowError {
            name: "x".into(),
            key: "toml",
            message: e.to_string(),
        })?;
        Row::new(spec, false)
    }

    #[test]
    fn the_builtin_table_reads() {
        assert!(BUILTIN.len() >= 3);
        for name in ["dspace", "eprints", "islandora"] {
            assert!(BUILTIN.iter().any(|r| r.name() == name), "{name}");
        }
    }

    #[test]
    fn errors_name_the_key() {
        let cases = [
            ("landing = { from = \"nowhere\" }", "landing.from"),
            ("landing = { from = \"template\" }", "landing.page"),
            (
                "landing = { from = \"template\", page = \"https://h/{id}\" }",
                "landing.page",
            ),
            ("landing = { from = \"dc:relation\" }", "landing.match"),
            (
                "oai_identifier = \"(?<id>[0-9\"\nlanding = { from = \"handle\" }",
                "oai_identifier",
            ),
            (
                "endpoint = [\"cgi/oai2\"]\nlanding = { from = \"handle\" }",
                "endpoint",
            ),
            (
                "landing = { from = \"handle\", page = \"{site}{handle}/x\" }",
                "landing.page",
            ),
            (
                "landing = { from = \"dc:identifier\", match = [\"https://h/*\"] }",
                "landing.match",
            ),
            ("site = \"domain\"\nlanding = { from = \"handle\" }", "site"),
        ];
        for (extra, key) in cases {
            let err = spec(extra).expect_err(extra);
            assert_eq!(err.key, key, "{extra}: {err}");
            assert!(err.to_string().starts_with("[[platform]] \"x\" "), "{err}");
        }
        let ok = spec(
            "oai_identifier = '^oai:[^:]+:(?<coll>[^/]+)/(?<id>[0-9]+)$'\nlanding = { from = \"template\", page = \"{site}digital/collection/{coll}/id/{id}\" }",
        );
        assert!(ok.is_ok(), "{ok:?}");
    }

    /// The OAI identifier read by hand gives what the regex it stands for captures.
    #[test]
    fn local_digits_are_read_as_the_regex_reads_them() {
        for (pattern, name) in [
            ("^oai:[^:]+:(?<id>[0-9]+)$", Some("id")),
            ("^oai:[^:]+:(?P<n_1>[0-9]+)$", Some("n_1")),
            ("^oai:[^:]+:(?<id>[0-9]+)", None),
            ("^oai:[^:]+:(?<id>[0-9]*)$", None),
            ("^oai:[^:]+:(?<1d>[0-9]+)$", None),
            ("^oai:[^:]*:(?<id>[0-9]+)$", None),
        ] {
            assert_eq!(local_digits_group(pattern).as_deref(), name, "{pattern}");
        }
        let eprints = BUILTIN.iter().find(|r| r.name() == "eprints").unwrap();
        assert_eq!(eprints.oai_local_digits.as_deref(), Some("id"));
    }

    proptest::proptest! {
        #[test]
        fn local_digits_agree_with_the_regex(
            id in "(oai|OAI|oai:)?:?[a-z.:é\n]{0,6}:?[0-9٣]{0,4}[:a\n]?",
        ) {
            let re = Regex::new("^oai:[^:]+:(?<id>[0-9]+)$").unwrap();
            let by_regex = re.captures(&id).and_then(|c| c.name("id")).map(|m| m.as_str());
            proptest::prop_assert_eq!(oai_local_digits(&id), by_regex);
        }
    }

    #[test]
    fn an_operator_row_replaces_a_builtin_one_of_its_name() {
        let own = spec("landing = { from = \"handle\" }").unwrap();
        let mut spec2 = own.spec.clone();
        spec2.name = "dspace".into();
        let registry = Registry::with(vec![Row::new(spec2, false).unwrap()]).unwrap();
        let dspace: Vec<_> = registry.rows().filter(|r| r.name() == "dspace").collect();
        assert_eq!(dspace.len(), 1);
        assert!(!dspace[0].builtin);
        let twice = Registry::with(vec![
            spec("landing = { from = \"handle\" }").unwrap(),
            spec("landing = { from = \"handle\" }").unwrap(),
        ]);
        assert!(twice.is_err());
    }
}
