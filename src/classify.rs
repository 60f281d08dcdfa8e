//! Classifies each `dc:identifier` value: landing page, content file, persistent identifier, or a
//! named reason why it cannot be published (the reasons README.md lists under "The scope rule,
//! and what is not published"; Q-21, SM-04, SM-05).

use std::borrow::Cow;

use url::Url;

use crate::scope::Scope;

/// Longest `<loc>` a sitemap may hold: the protocol says "less than 2,048 characters" (SM-05).
pub(crate) const MAX_URL_LEN: usize = 2047;

/// What a `dc:identifier` value is, for publishing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Identifier {
    /// An http(s) URL inside the scope that is not a content file: a sitemap `<loc>`. The URL
    /// is in normal form (as `url::Url` serialises it).
    LandingPage(String),
    /// An http(s) URL inside the scope to a file, with the media type its extension implies.
    ContentFile {
        /// The file's URL, in normal form.
        url: String,
        /// Media type from the extension, e.g. `application/pdf`.
        media_type: &'static str,
    },
    /// A DOI or Handle, normalised to its resolver URL (`https://doi.org/10...`).
    PersistentId(String),
    /// Not published, for this reason.
    Dropped(Drop),
}

// The reasons are counted in the files crate's `Stats`, so they are its type; named here, where
// they are decided.
pub use oai_bridge_files::counts::Drop;
/// What a value is, borrowed ([`class`]), and the persistent identifier in it: the files
/// crate's types, as the profiles' collectors read them.
pub use oai_bridge_files::identifier::Class;
pub(crate) use oai_bridge_files::identifier::{NOT_IN_PATH, Pid};

/// Content-file extensions and their media types: a URL names a content file by its extension.
const CONTENT_TYPES: &[(&str, &str)] = &[
    ("pdf", "application/pdf"),
    ("epub", "application/epub+zip"),
    ("zip", "application/zip"),
    ("gz", "application/gzip"),
    ("tar", "application/x-tar"),
    ("doc", "application/msword"),
    (
        "docx",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ),
    ("xls", "application/vnd.ms-excel"),
    (
        "xlsx",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ),
    ("ppt", "application/vnd.ms-powerpoint"),
    (
        "pptx",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ),
    ("odt", "application/vnd.oasis.opendocument.text"),
    ("ods", "application/vnd.oasis.opendocument.spreadsheet"),
    ("rtf", "application/rtf"),
    ("txt", "text/plain"),
    ("csv", "text/csv"),
    ("tsv", "text/tab-separated-values"),
    ("json", "application/json"),
    ("jpg", "image/jpeg"),
    ("jpeg", "image/jpeg"),
    ("png", "image/png"),
    ("gif", "image/gif"),
    ("tif", "image/tiff"),
    ("tiff", "image/tiff"),
    ("jp2", "image/jp2"),
    ("svg", "image/svg+xml"),
    ("mp3", "audio/mpeg"),
    ("wav", "audio/wav"),
    ("flac", "audio/flac"),
    ("mp4", "video/mp4"),
    ("m4a", "audio/mp4"),
    ("webm", "video/webm"),
    ("mov", "video/quicktime"),
];

/// The media type of a content file known as such by where it is (a DSpace bitstream, an
/// EPrints document) but not by its extension.
pub(crate) const OCTET_STREAM: &str = "application/octet-stream";

/// Every media type a content file can be given: [`content_type`]'s and [`OCTET_STREAM`].
#[cfg(test)]
pub(crate) fn media_types() -> impl Iterator<Item = &'static str> {
    CONTENT_TYPES.iter().map(|&(_, t)| t).chain([OCTET_STREAM])
}

/// The media type of a content file, from the extension of the URL's last path segment, or
/// [`OCTET_STREAM`] for a platform's stored file without one ([`is_stored_file`]).
pub(crate) fn content_type(url: &Url) -> Option<&'static str> {
    content_type_of_path(url.path())
}

fn content_type_of_path(path: &str) -> Option<&'static str> {
    // Found by bytes: splitting at a `char` searched for its last byte, then compared the
    // whole encoding again (a path is short, and every identifier's is read).
    let path = path.as_bytes();
    let (dir, segment) = path.split_at(path.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1));
    let by_extension = segment
        .iter()
        .rposition(|&b| b == b'.')
        .and_then(|dot| {
            let ext = &segment[dot + 1..];
            CONTENT_TYPES
                .iter()
                .find(|(e, _)| ext.eq_ignore_ascii_case(e.as_bytes()))
        })
        .map(|&(_, t)| t);
    by_extension.or_else(|| is_stored_file(dir, segment).then_some(OCTET_STREAM))
}

/// Whether a path (its directory `dir`, ending in `/`, and last `segment`) is where a platform
/// stores a file under a name that tells no type, which Google's rule would otherwise publish as
/// a landing page (issue 29):
/// - Omeka Classic's and Omeka S's originals, `/files/original/HASH[.ext]`: a random MD5 (Omeka
///   Classic, `Omeka_Filter_Filename`) or SHA-1 (Omeka S, `File\TempFile::getStorageId`) in hex,
///   whose extension Omeka Classic drops when it has a character outside `[A-Za-z0-9_-]`;
/// - HAL's main file, `/HALID[vN]/document` (`hal-01821474v2/document`, CCSDForge/HAL
///   `xsl/dc.xsl`: the current edition's file), beside the page `/HALID`.
fn is_stored_file(dir: &[u8], segment: &[u8]) -> bool {
    if dir.ends_with(b"/files/original/") {
        let stem = segment.split(|&b| b == b'.').next().unwrap_or_default();
        return matches!(stem.len(), 32 | 40)
            && stem.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    }
    if segment == b"document"
        && let Some(parent) = dir.strip_suffix(b"/")
    {
        let id = &parent[parent.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1)..];
        return is_hal_id(id);
    }
    false
}

/// A HAL document id with its optional version: `hal-01821474`, `tel-02955615v1`,
/// `halshs-02112233` (a portal's lower-case prefix, `-`, eight digits, `vN`).
fn is_hal_id(id: &[u8]) -> bool {
    let Some(dash) = id.iter().position(|&b| b == b'-') else {
        return false;
    };
    let (prefix, number) = (&id[..dash], &id[dash + 1..]);
    if prefix.is_empty()
        || !prefix.iter().all(u8::is_ascii_lowercase)
        || number.len() < 8
        || !number[..8].iter().all(u8::is_ascii_digit)
    {
        return false;
    }
    match &number[8..] {
        [] => true,
        [b'v', version @ ..] => !version.is_empty() && version.iter().all(u8::is_ascii_digit),
        _ => false,
    }
}

/// Bytes the URL standard leaves as they are in a path (`NORMAL_PATH`) and in a query
/// (`NORMAL_QUERY`): ASCII alphanumerics and these punctuation characters.
const NORMAL_PATH: [bool; 256] = byte_set(b"-._~!$&'()*+,;=:@/");
const NORMAL_QUERY: [bool; 256] = byte_set(b"-._~!$&()*+,;=:@/?");

const fn byte_set(punctuation: &[u8]) -> [bool; 256] {
    let mut set = [false; 256];
    let mut b = 0;
    while b < 256 {
        set[b] = (b as u8).is_ascii_alphanumeric();
        b += 1;
    }
    let mut i = 0;
    while i < punctuation.len() {
        set[punctuation[i] as usize] = true;
        i += 1;
    }
    set
}

/// Four decimal parts of 0..=255 without leading zeros: an IPv4 host `url` leaves as it is.
fn is_normal_ipv4(host: &[u8]) -> bool {
    let mut parts = 0;
    for part in host.split(|&b| b == b'.') {
        parts += 1;
        let ok = !part.is_empty()
            && part.len() <= 3
            && (part.len() == 1 || part[0] != b'0')
            && part.iter().all(u8::is_ascii_digit)
            && part.iter().fold(0u32, |n, &d| n * 10 + u32::from(d - b'0')) <= 255;
        if !ok || parts > 4 {
            return false;
        }
    }
    parts == 4
}

/// Whether `value` is an http(s) URL already in the normal form `url::Url` serialises to, so it
/// can be classified without parsing: lower-case scheme and ASCII host, no default or empty
/// port, no user info, a path that starts with `/` and has no dot-segments or escapes, and only
/// characters the URL standard leaves as they are. Anything else takes the full parse.
///
/// Written by hand because it runs for every identifier of every record, and a full parse costs
/// more than everything else in classifying; `tests::fast_path_agrees_with_url` checks that both
/// paths give the same answer.
#[cfg(test)]
fn is_normal_http_url(value: &str) -> bool {
    normal_http_path(value).is_some()
}

/// For a URL [`is_normal_http_url`] accepts, the byte range of its path (without the query);
/// `None` for any other value. One pass over the bytes, without allocating.
fn normal_http_path(value: &str) -> Option<(usize, usize)> {
    let bytes = value.as_bytes();
    let (start, default_port): (usize, &[u8]) = if bytes.starts_with(b"https://") {
        (8, b"443")
    } else if bytes.starts_with(b"http://") {
        (7, b"80")
    } else {
        return None;
    };
    let rest = &bytes[start..];
    let authority_len = memchr::memchr(b'/', rest).unwrap_or(rest.len());
    let authority = &rest[..authority_len];
    let (host, port) = match memchr::memchr(b':', authority) {
        Some(i) => (&authority[..i], Some(&authority[i + 1..])),
        None => (authority, None),
    };
    // Every label non-empty, no `xn--` label, only lower-case letters, digits and `-`.
    let mut last = 0;
    for (i, &b) in host.iter().enumerate() {
        if b == b'.' {
            if i == last || host[last..i].starts_with(b"xn--") {
                return None;
            }
            last = i + 1;
        } else if !(b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
            return None;
        }
    }
    let last = &host[last..];
    if last.is_empty() || last.starts_with(b"xn--") {
        return None;
    }
    // A host whose last label is a number is parsed as an IPv4 address (`1.2.3` becomes
    // `1.2.0.3`, `a.0` is rejected), so those take the full parse.
    if (last.iter().all(u8::is_ascii_digit) || last.starts_with(b"0x")) && !is_normal_ipv4(host) {
        return None;
    }
    if let Some(p) = port {
        let ok = !p.is_empty()
            && p[0] != b'0'
            && p != default_port
            && p.len() <= 5
            && p.iter().all(u8::is_ascii_digit)
            && p.iter().fold(0u32, |n, &d| n * 10 + u32::from(d - b'0')) <= u32::from(u16::MAX);
        if !ok {
            return None;
        }
    }
    let path_start = start + authority_len;
    let path = &bytes[path_start..];
    if path.first() != Some(&b'/') {
        return None;
    }
    let path_len = memchr::memchr(b'?', path).unwrap_or(path.len());
    let (path, query) = path.split_at(path_len);
    if !path.iter().all(|&b| NORMAL_PATH[usize::from(b)])
        || !query.iter().skip(1).all(|&b| NORMAL_QUERY[usize::from(b)])
    {
        return None;
    }
    // No `.` or `..` segment.
    let mut from = 0;
    while let Some(i) = memchr::memchr(b'.', &path[from..]) {
        let at = from + i;
        let dots = if path.get(at + 1) == Some(&b'.') {
            2
        } else {
            1
        };
        if path[at - 1] == b'/' && path.get(at + dots).is_none_or(|&b| b == b'/') {
            return None;
        }
        from = at + dots;
    }
    Some((path_start, path_start + path_len))
}

/// What [`classify`] finds, before anything is copied.
enum Found<'a> {
    /// A URL inside the scope, already in normal form: the value itself, and its path's range.
    Normal(&'a str, (usize, usize)),
    /// A URL inside the scope that needed the full parse.
    Parsed(Url),
    /// A DOI or Handle.
    PersistentId(Pid<'a>),
    /// Not published, for this reason.
    Dropped(Drop),
}

/// Classifies one `dc:identifier` value against `scope`. Pure; surrounding XML whitespace is
/// trimmed first.
pub(crate) fn classify(value: &str, scope: &Scope) -> Identifier {
    match class(value, scope) {
        Class::LandingPage(url) => Identifier::LandingPage(url.into_owned()),
        Class::ContentFile { url, media_type } => Identifier::ContentFile {
            url: url.into_owned(),
            media_type,
        },
        Class::PersistentId(pid) => Identifier::PersistentId(pid.resolver_url()),
        Class::Dropped(reason) => Identifier::Dropped(reason),
    }
}

/// [`classify`] without copying the value.
pub fn class<'a>(value: &'a str, scope: &Scope) -> Class<'a> {
    match find(value, scope) {
        Found::Normal(url, (start, end)) => match content_type_of_path(&url[start..end]) {
            Some(media_type) => Class::ContentFile {
                url: Cow::Borrowed(url),
                media_type,
            },
            None => Class::LandingPage(Cow::Borrowed(url)),
        },
        Found::Parsed(url) => match content_type(&url) {
            Some(media_type) => Class::ContentFile {
                url: Cow::Owned(url.into()),
                media_type,
            },
            None => Class::LandingPage(Cow::Owned(url.into())),
        },
        Found::PersistentId(pid) => Class::PersistentId(pid),
        Found::Dropped(reason) => Class::Dropped(reason),
    }
}

/// What [`classify`] says of `value`, reduced to what the inventory keeps: the URL to publish
/// (landing page or content file), borrowed from `value` when it is already in normal form, or
/// the reason it is not published (a persistent identifier counts as [`Drop::PersistentId`]).
/// Copies nothing and builds no resolver URL on the common paths.
pub(crate) fn publishable<'a>(value: &'a str, scope: &Scope) -> Result<Cow<'a, str>, Drop> {
    match find(value, scope) {
        Found::Normal(url, _) => Ok(Cow::Borrowed(url)),
        Found::Parsed(url) => Ok(Cow::Owned(url.into())),
        Found::PersistentId(_) => Err(Drop::PersistentId),
        Found::Dropped(reason) => Err(reason),
    }
}

fn find<'a>(value: &'a str, scope: &Scope) -> Found<'a> {
    let value = value.trim_matches(|c| matches!(c, ' ' | '\t' | '\n' | '\r'));
    if let Some(pid) = pid(value) {
        return Found::PersistentId(pid);
    }
    if !is_http_text(value) {
        // `url` would accept `urn:`, `doi:` or `uva-lib:332086` as absolute URIs, so the
        // scheme is checked first, explicitly.
        return Found::Dropped(Drop::NotAUrl);
    }
    if let Some(path) = normal_http_path(value) {
        if value.len() > MAX_URL_LEN {
            return Found::Dropped(Drop::TooLong);
        }
        if !scope.contains_normal(value) {
            return Found::Dropped(Drop::OutOfScope);
        }
        return Found::Normal(value, path);
    }
    if value.chars().any(char::is_whitespace) {
        return Found::Dropped(Drop::InvalidUrl);
    }
    let Ok(url) = Url::parse(value) else {
        return Found::Dropped(Drop::InvalidUrl);
    };
    if url.host_str().is_none_or(str::is_empty) {
        return Found::Dropped(Drop::InvalidUrl);
    }
    if url.as_str().len() > MAX_URL_LEN {
        return Found::Dropped(Drop::TooLong);
    }
    if !scope.contains(&url) {
        return Found::Dropped(Drop::OutOfScope);
    }
    Found::Parsed(url)
}

fn starts_with_ignore_case(value: &str, prefix: &str) -> bool {
    strip_prefix_ignore_case(value, prefix).is_some()
}

/// `value` without `prefix`, compared ignoring ASCII case.
pub(crate) fn strip_prefix_ignore_case<'v>(value: &'v str, prefix: &str) -> Option<&'v str> {
    let head = value.as_bytes().get(..prefix.len())?;
    // An ASCII prefix that matches ends on a character boundary.
    head.eq_ignore_ascii_case(prefix.as_bytes())
        .then(|| &value[prefix.len()..])
}

/// Whether `value` starts as an http(s) URL does (`http://`, `https://`, in any case), whether
/// or not the rest parses.
pub(crate) fn is_http_text(value: &str) -> bool {
    starts_with_ignore_case(value, "http://") || starts_with_ignore_case(value, "https://")
}

/// The spellings a Handle is written in.
const HANDLE_SPELLINGS: &[&str] = &[
    "hdl:",
    "info:hdl/",
    "https://hdl.handle.net/",
    "http://hdl.handle.net/",
];

/// Whether a value is spelled as a Handle (`hdl:`, `info:hdl/`, the proxy's URL, or the
/// proxy alone), whether or not what follows parses. Surrounding whitespace is trimmed.
pub(crate) fn spelled_as_handle(value: &str) -> bool {
    let value = value.trim();
    HANDLE_SPELLINGS
        .iter()
        .any(|s| starts_with_ignore_case(value, s))
        || ["http://hdl.handle.net", "https://hdl.handle.net"]
            .iter()
            .any(|s| value.eq_ignore_ascii_case(s))
}

/// A DOI or Handle in any common spelling, borrowed from `value` (surrounding XML whitespace
/// trimmed); `None` otherwise.
pub(crate) fn pid_of(value: &str) -> Option<Pid<'_>> {
    pid(value.trim_matches(|c| matches!(c, ' ' | '\t' | '\n' | '\r')))
}

/// Hosts that resolve an identifier to a page elsewhere: a DOI's or Handle's proxy, URN, ARK and
/// PURL resolvers. A subdomain counts too (`www.purl.org`).
const RESOLVER_HOSTS: &[&str] = &[
    "doi.org",
    "hdl.handle.net",
    "handle.net",
    "urn.kb.se",
    "urn.fi",
    "nbn-resolving.org",
    "nbn-resolving.de",
    "persistent-identifier.nl",
    "n2t.net",
    "identifiers.org",
    "purl.org",
    "purl.oclc.org",
    "w3id.org",
    "arks.org",
];

/// Whether `url` is a resolver's: on one of [`RESOLVER_HOSTS`], or naming a national
/// bibliography number (`urn:nbn:`, as `http://urn.kb.se/resolve?urn=urn:nbn:se:...` does) in
/// its path or query. It sends a reader elsewhere, so it is never a repository's landing page.
pub(crate) fn is_resolver(url: &Url) -> bool {
    let host = url.host_str().unwrap_or_default().trim_end_matches('.');
    let on_resolver = RESOLVER_HOSTS.iter().any(|r| {
        host.eq_ignore_ascii_case(r)
            || (host.len() > r.len()
                && host.as_bytes()[host.len() - r.len() - 1] == b'.'
                && host[host.len() - r.len()..].eq_ignore_ascii_case(r))
    });
    let rest = &url[url::Position::BeforePath..url::Position::AfterQuery];
    let rest = rest.to_ascii_lowercase();
    on_resolver || rest.contains("urn:nbn:") || rest.contains("urn%3anbn%3a")
}

fn pid(value: &str) -> Option<Pid<'_>> {
    const DOI_PREFIXES: &[&str] = &[
        "doi:",
        "info:doi/",
        "https://doi.org/",
        "http://doi.org/",
        "https://dx.doi.org/",
        "http://dx.doi.org/",
    ];
    // Every spelling starts with one of these (a cheap test for the common case of none).
    if !matches!(
        value.as_bytes().first().map(u8::to_ascii_lowercase),
        Some(b'd' | b'h' | b'i' | b'1')
    ) {
        return None;
    }
    let strip = |prefixes: &[&str]| {
        prefixes
            .iter()
            .find(|p| starts_with_ignore_case(value, p))
            .map(|p| value[p.len()..].trim_start())
    };
    let doi = strip(DOI_PREFIXES).or_else(|| value.starts_with("10.").then_some(value));
    if let Some(doi) = doi.filter(|d| is_doi(d)) {
        return Some(Pid::Doi(doi));
    }
    if let Some(handle) = strip(HANDLE_SPELLINGS).filter(|h| h.contains('/') && !h.starts_with('/'))
    {
        return Some(Pid::Handle(handle));
    }
    None
}

/// `10.NNNN[.N...]/suffix` with a non-empty suffix and no whitespace.
fn is_doi(s: &str) -> bool {
    let Some((prefix, suffix)) = s.split_once('/') else {
        return false;
    };
    let Some(registrant) = prefix.strip_prefix("10.") else {
        return false;
    };
    registrant.len() >= 4
        && registrant.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && !suffix.is_empty()
        && !s.chars().any(char::is_whitespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope() -> Scope {
        Scope::from_base_url(&Url::parse("https://repo.example.edu/oai/request").unwrap()).unwrap()
    }

    /// Issue 29: a resolver's URL is never a landing page to suggest.
    #[test]
    fn resolvers_are_known_by_host_or_by_the_urn_they_resolve() {
        for (url, resolver) in [
            ("https://doi.org/10.1234/x", true),
            ("http://dx.doi.org/10.1234/x", true),
            ("https://hdl.handle.net/1234/5", true),
            (
                "http://urn.kb.se/resolve?urn=urn:nbn:se:kau:diva-2500",
                true,
            ),
            (
                "http://urn.kb.example.se/resolve?urn=urn:nbn:se:kau:diva-2500",
                true,
            ),
            ("https://nbn-resolving.org/urn:nbn:de:0001-1", true),
            ("https://n2t.net/ark:/12345/x", true),
            ("https://identifiers.org/taxonomy:9606", true),
            ("http://www.purl.org/net/x", true),
            ("https://repo.example.edu/handle/1/2", false),
            (
                "https://dataverse.example.edu/dataset.xhtml?persistentId=doi:10.1/x",
                false,
            ),
            ("https://notdoi.org/x", false),
            ("https://gallica.example.fr/ark:/12148/bpt6k1", false),
        ] {
            let parsed = Url::parse(url).unwrap();
            assert_eq!(is_resolver(&parsed), resolver, "{url}");
        }
    }

    #[track_caller]
    fn check(value: &str, expected: &str) {
        let got = match classify(value, &scope()) {
            Identifier::LandingPage(u) => format!("landing {u}"),
            Identifier::ContentFile { url, media_type } => format!("file {media_type} {url}"),
            Identifier::PersistentId(p) => format!("pid {p}"),
            Identifier::Dropped(d) => format!("drop {}", d.as_str()),
        };
        assert_eq!(got, expected, "{value:?}");
    }

    #[test]
    fn identifier_classes() {
        check(
            "https://repo.example.edu/oai/item/1",
            "landing https://repo.example.edu/oai/item/1",
        );
        check(
            "  https://repo.example.edu/oai/item/1\n",
            "landing https://repo.example.edu/oai/item/1",
        );
        check(
            "https://repo.example.edu/oai/files/a.PDF",
            "file application/pdf https://repo.example.edu/oai/files/a.PDF",
        );
        check("https://repo.example.edu/item/1", "drop out_of_scope");
        check("https://repo.example.edu/oai/../admin", "drop out_of_scope");
        check("https://elsewhere.example/oai/item/1", "drop out_of_scope");
        check("urn:nbn:de:kobv:83-opus-12345", "drop not_a_url");
        check("ISBN 90-9014980-5", "drop not_a_url");
        check("oai:repo.example.edu:123", "drop not_a_url");
        check("uva-lib:332086", "drop not_a_url");
        check("ftp://repo.example.edu/oai/x", "drop not_a_url");
        check("https://repo.example.edu/oai/a b", "drop invalid_url");
        check("https://", "drop invalid_url");
        check("http://[::1", "drop invalid_url");
    }

    /// DSpace puts the handle proxy URL (`http://hdl.handle.net/1765/315`) in
    /// dc:identifier: a persistent id, cited, never a loc. Q-24: OJS lists stored pubIds as bare
    /// DOIs (`10.1234/ABC.5`).
    #[test]
    fn persistent_identifiers_in_every_spelling() {
        for doi in [
            "doi:10.1234/ABC.5",
            "info:doi/10.1234/ABC.5",
            "10.1234/ABC.5",
            "https://doi.org/10.1234/ABC.5",
            "http://dx.doi.org/10.1234/ABC.5",
            "DOI:10.1234/ABC.5",
        ] {
            check(doi, "pid https://doi.org/10.1234/ABC.5");
        }
        for hdl in [
            "hdl:1765/315",
            "info:hdl/1765/315",
            "http://hdl.handle.net/1765/315",
        ] {
            check(hdl, "pid https://hdl.handle.net/1765/315");
        }
        check("10.12/x", "drop not_a_url");
        check("doi:10.1234/a<b>", "pid https://doi.org/10.1234/a%3Cb%3E");
    }

    /// The full-parse path of [`classify`], to compare the fast path with.
    fn classify_parsed(value: &str, scope: &Scope) -> Identifier {
        let Ok(url) = Url::parse(value) else {
            return Identifier::Dropped(Drop::InvalidUrl);
        };
        if url.as_str().len() > MAX_URL_LEN {
            return Identifier::Dropped(Drop::TooLong);
        }
        if !scope.contains(&url) {
            return Identifier::Dropped(Drop::OutOfScope);
        }
        match content_type(&url) {
            Some(media_type) => Identifier::ContentFile {
                url: url.into(),
                media_type,
            },
            None => Identifier::LandingPage(url.into()),
        }
    }

    /// The first, plainer spelling of [`is_normal_http_url`], kept to check the one-pass version.
    fn is_normal_http_url_reference(value: &str) -> bool {
        fn is_normal_ipv4(host: &str) -> bool {
            let parts: Vec<&str> = host.split('.').collect();
            parts.len() == 4
                && parts.iter().all(|p| {
                    !p.is_empty()
                        && p.len() <= 3
                        && (p.len() == 1 || !p.starts_with('0'))
                        && p.parse::<u8>().is_ok()
                })
        }
        let (rest, default_port) = match value.strip_prefix("https://") {
            Some(rest) => (rest, "443"),
            None => match value.strip_prefix("http://") {
                Some(rest) => (rest, "80"),
                None => return false,
            },
        };
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let (host, port) = match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        };
        let host_ok = host.split('.').all(|label| {
            !label.is_empty()
                && !label.starts_with("xn--")
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        }) && (is_normal_ipv4(host)
            || host.rsplit('.').next().is_some_and(|last| {
                !last.bytes().all(|b| b.is_ascii_digit()) && !last.starts_with("0x")
            }));
        let port_ok = port.is_none_or(|p| {
            !p.is_empty()
                && !p.starts_with('0')
                && p != default_port
                && p.parse::<u16>().is_ok()
                && p.bytes().all(|b| b.is_ascii_digit())
        });
        if !host_ok || !port_ok || !path.starts_with('/') {
            return false;
        }
        let (path, query) = path.split_once('?').unwrap_or((path, ""));
        path.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/".contains(&b))
            && query
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~!$&()*+,;=:@/?".contains(&b))
            && !path
                .split('/')
                .any(|segment| segment == "." || segment == "..")
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(20000))]
        /// The one-pass fast-path check answers exactly as its plainer first spelling did.
        #[test]
        fn fast_path_check_agrees_with_its_reference(
            value in "(https?|HTTP)://([a-z0-9.:x+-]|xn--|0x){0,14}(/([a-zA-Z0-9.%?/ #&'=+-]){0,14})?",
        ) {
            proptest::prop_assert_eq!(is_normal_http_url(&value), is_normal_http_url_reference(&value), "{}", value);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]
        /// The fast path claims only URLs that `url` leaves unchanged, and classifies them the
        /// same way the full parse does.
        #[test]
        fn fast_path_agrees_with_url(
            scheme in "(http|https|HTTP)",
            host in "(repo\\.example\\.edu|REPO\\.example\\.edu|1\\.2\\.3|127\\.0\\.0\\.1|10\\.0\\.0\\.256|1\\.02\\.3\\.4|xn--bcher-kva\\.example|a\\.\\.b|[a-z0-9.-]{1,12})",
            port in "(|:443|:80|:8080|:0|:99999|:08|:)",
            path in "(|/|/oai/|/oai/item/[a-zA-Z0-9._~%!$&'()*+,;=:@/ \\[\\]|-]{0,20}|/oai/\\.\\./x|/./a|/oai/f\\.pdf)",
            query in "(|\\?a=1&b=2|\\?q=%41|\\?x='y'|\\?\\{\\}|#frag|\\?a b)",
        ) {
            let value = format!("{scheme}://{host}{port}{path}{query}");
            let scope = Scope::from_base_url(&Url::parse("https://repo.example.edu/oai/request").unwrap()).unwrap();
            if is_normal_http_url(&value) {
                proptest::prop_assert_eq!(Url::parse(&value).map(String::from).ok(), Some(value.clone()));
                proptest::prop_assert_eq!(classify(&value, &scope), classify_parsed(&value, &scope));
            }
        }
    }

    proptest::proptest! {
        /// A content file's media type is found from its path's last segment's extension, as
        /// splitting the path as a string finds it.
        #[test]
        fn content_types_from_the_last_extension(path in "(/[a-zA-Z0-9.é-]{0,8}){0,4}(\\.(pdf|PDF|Pdf|tar\\.gz|gz|jpeg|xyz|))?") {
            let reference = path
                .rsplit('/')
                .next()
                .and_then(|segment| segment.rsplit_once('.'))
                .and_then(|(_, ext)| CONTENT_TYPES.iter().find(|(e, _)| ext.eq_ignore_ascii_case(e)))
                .map(|&(_, t)| t);
            proptest::prop_assert_eq!(content_type_of_path(&path), reference);
        }
    }

    /// Omeka's originals and HAL's main file are files, with or without an extension (issue
    /// 29); what only looks like them is not.
    #[test]
    fn stored_files_without_an_extension_are_content_files() {
        let scope = Scope::from_prefixes(&[Url::parse("https://h.example/").unwrap()]).unwrap();
        let check = |value: &str, expected: &str| {
            let got = match classify(value, &scope) {
                Identifier::LandingPage(_) => "landing".to_owned(),
                Identifier::ContentFile { media_type, .. } => format!("file {media_type}"),
                other => format!("{other:?}"),
            };
            assert_eq!(got, expected, "{value}");
        };
        for (value, expected) in [
            (
                "https://h.example/files/original/a87ff679a2f3e71d9181a67b7542122c",
                "file application/octet-stream",
            ),
            (
                "https://h.example/omeka/files/original/4b227777d4dd1fc61c6f884f48641d02b4d121d3",
                "file application/octet-stream",
            ),
            (
                "https://h.example/files/original/a87ff679a2f3e71d9181a67b7542122c.x_y",
                "file application/octet-stream",
            ),
            (
                "https://h.example/files/original/a87ff679a2f3e71d9181a67b7542122c.jpg",
                "file image/jpeg",
            ),
            (
                "https://h.example/hal-01821474v2/document",
                "file application/octet-stream",
            ),
            (
                "https://h.example/tel-02955615/document",
                "file application/octet-stream",
            ),
            // Not a hash, not a HAL id, not that folder: pages as before.
            ("https://h.example/files/original/about", "landing"),
            (
                "https://h.example/files/original/A87FF679A2F3E71D9181A67B7542122C",
                "landing",
            ),
            (
                "https://h.example/files/a87ff679a2f3e71d9181a67b7542122c",
                "landing",
            ),
            ("https://h.example/hal-01821474", "landing"),
            ("https://h.example/items/7/document", "landing"),
            ("https://h.example/hal-0182147/document", "landing"),
            ("https://h.example/hal-01821474v/document", "landing"),
            ("https://h.example/document", "landing"),
        ] {
            check(value, expected);
        }
    }

    #[test]
    fn fast_path_takes_common_urls_only() {
        for url in [
            "https://repo.example.edu/items/1",
            "http://h.example:8080/a/b.pdf?x=1&y=2",
            "https://h/a(1)/~x",
            "http://127.0.0.1:8080/oai/x",
        ] {
            assert!(is_normal_http_url(url), "{url}");
        }
        for url in [
            "HTTPS://h/",
            "https://H/",
            "https://h",
            "https://h:443/",
            "https://h/a/../b",
            "https://h/%7e",
            "https://u@h/",
            "https://h/a b",
            "https://1.2.3/",
            "https://h/ä",
            "https://h/x#f",
            "https://h./",
        ] {
            assert!(!is_normal_http_url(url), "{url}");
        }
    }

    #[test]
    fn urls_are_percent_encoded_once_and_bounded() {
        // SM-04: non-ASCII is encoded as UTF-8, existing escapes are kept.
        check(
            "https://repo.example.edu/oai/ä",
            "landing https://repo.example.edu/oai/%C3%A4",
        );
        check(
            "https://repo.example.edu/oai/a%20b",
            "landing https://repo.example.edu/oai/a%20b",
        );
        // SM-05: at most 2,047 characters.
        let base = "https://repo.example.edu/oai/";
        let fits = format!("{base}{}", "a".repeat(MAX_URL_LEN - base.len()));
        check(&fits, &format!("landing {fits}"));
        check(&format!("{fits}a"), "drop too_long");
    }
}
