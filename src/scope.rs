//! The scope rule: which URLs a sitemap for a repository may list (G-03, SM-07).

use std::fmt;

use url::Url;

/// One scope prefix: scheme, host and port as parsed by `url` (lower-cased, IDNA-normalised,
/// default port implied) and a path prefix compared after dot-segments were resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Prefix {
    scheme: String,
    host: String,
    port: Option<u16>,
    path: String,
    /// The prefix as text, in the normal form `url::Url` serialises URLs to.
    text: String,
}

impl Prefix {
    fn of(url: &Url, path: &str) -> Option<Self> {
        let mut prefix = Self {
            scheme: url.scheme().to_owned(),
            host: url.host_str()?.to_owned(),
            port: url.port_or_known_default(),
            path: path.to_owned(),
            text: String::new(),
        };
        prefix.text = prefix.to_string();
        Some(prefix)
    }

    fn contains(&self, url: &Url) -> bool {
        url.scheme() == self.scheme
            && url.host_str() == Some(self.host.as_str())
            && url.port_or_known_default() == self.port
            && url.path().starts_with(&self.path)
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let default_port = match self.scheme.as_str() {
            "http" => Some(80),
            "https" => Some(443),
            _ => None,
        };
        match self.port {
            Some(port) if Some(port) != default_port => {
                write!(f, "{}://{}:{}{}", self.scheme, self.host, port, self.path)
            }
            _ => write!(f, "{}://{}{}", self.scheme, self.host, self.path),
        }
    }
}

/// The URLs a repository's sitemaps may list: one or more prefixes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scope {
    prefixes: Vec<Prefix>,
}

impl Scope {
    /// The prefixes, each as a URL text (`https://h/oai/`).
    pub fn prefixes(&self) -> Vec<String> {
        self.prefixes.iter().map(ToString::to_string).collect()
    }

    /// The prefixes as [`Scope::prefixes`] spells them, borrowed (kept in that form): for a
    /// check run once per URL, which must not allocate.
    pub(crate) fn prefix_texts(&self) -> impl Iterator<Item = &str> {
        self.prefixes.iter().map(|p| p.text.as_str())
    }

    /// The default scope of a baseURL: its scheme, host, port and the directory part of its path
    /// (up to and including the last `/`); `https://h/oai/request` gives `https://h/oai/`.
    pub fn from_base_url(base: &Url) -> Option<Self> {
        let path = base.path();
        let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
        let dir = if dir.is_empty() { "/" } else { dir };
        Some(Self {
            prefixes: vec![Prefix::of(base, dir)?],
        })
    }

    /// Scope given as explicit prefixes (`--scope`, `scope = [...]`), each taken literally.
    /// `None` when a prefix is not an absolute http(s) URL with a host.
    pub fn from_prefixes(prefixes: &[Url]) -> Option<Self> {
        let prefixes = prefixes
            .iter()
            .map(|p| {
                matches!(p.scheme(), "http" | "https")
                    .then(|| Prefix::of(p, p.path()))
                    .flatten()
            })
            .collect::<Option<Vec<_>>>()?;
        (!prefixes.is_empty()).then_some(Self { prefixes })
    }

    /// Whether a URL in the normal form `url::Url` serialises to lies inside the scope, compared
    /// as text (each prefix is kept in the same form).
    pub fn contains_normal(&self, url: &str) -> bool {
        self.prefixes.iter().any(|p| url.starts_with(&p.text))
    }

    /// Whether `url` (already parsed, so dot-segments are resolved) lies inside the scope.
    pub fn contains(&self, url: &Url) -> bool {
        self.prefixes.iter().any(|p| p.contains(url))
    }

    /// Whether every prefix lies at or below the directory of `public` (where the sitemaps are
    /// served). When not, search engines accept the sitemaps only by cross-submission (SM-08).
    pub fn is_under(&self, public: &Url) -> bool {
        match Scope::from_base_url(public) {
            Some(dir) => {
                let dir = &dir.prefixes[0];
                self.prefixes.iter().all(|p| {
                    p.scheme == dir.scheme
                        && p.host == dir.host
                        && p.port == dir.port
                        && p.path.starts_with(&dir.path)
                })
            }
            None => false,
        }
    }
}

/// Whether `url`'s host is a loopback address (`localhost`, 127.0.0.0/8, `::1`): a public URL
/// there names files no crawler can fetch.
pub(crate) fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => {
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            d == "localhost" || d.ends_with(".localhost")
        }
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => {
            ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
        None => false,
    }
}

/// Whether `url`'s host is a loopback or private address ([`is_loopback`], 10/8, 172.16/12,
/// 192.168/16, 169.254/16, `fc00::/7`): a page there is no crawler's to fetch.
pub(crate) fn is_internal(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback() || ip.is_private() || ip.is_link_local(),
        Some(url::Host::Ipv6(ip)) => {
            ip.is_loopback()
                || (ip.segments()[0] & 0xfe00) == 0xfc00
                || ip
                    .to_ipv4_mapped()
                    .is_some_and(|v4| v4.is_loopback() || v4.is_private())
        }
        _ => is_loopback(url),
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.prefixes.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    /// Issue 22: the loopback addresses a public URL must not be on.
    #[test]
    fn loopback_hosts() {
        for (url, loopback) in [
            ("http://127.0.0.1:8080/", true),
            ("http://127.3.4.5/", true),
            ("http://localhost/x/", true),
            ("http://LOCALHOST./", true),
            ("http://a.localhost/", true),
            ("http://[::1]:8080/", true),
            ("http://[::ffff:127.0.0.1]/", true),
            ("http://128.0.0.1/", false),
            ("http://localhost.example/", false),
            ("https://sitemaps.example.org/", false),
            ("http://[2001:db8::1]/", false),
        ] {
            let url = url::Url::parse(url).unwrap();
            assert_eq!(super::is_loopback(&url), loopback, "{url}");
        }
    }

    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[track_caller]
    fn check(base: &str, candidate: &str, inside: bool) {
        let scope = Scope::from_base_url(&url(base)).unwrap();
        assert_eq!(
            scope.contains(&url(candidate)),
            inside,
            "{candidate} in scope of {base} ({scope})"
        );
    }

    /// The borrowed spelling of the prefixes is the one `prefixes` gives.
    #[test]
    fn prefix_texts_spell_the_prefixes() {
        let scope = Scope::from_prefixes(&[
            url("https://h.example/a/"),
            url("http://h.example:8080/"),
            url("https://H.example:443/b/"),
        ])
        .unwrap();
        assert_eq!(
            scope.prefix_texts().collect::<Vec<_>>(),
            scope.prefixes(),
            "{scope}"
        );
    }

    #[test]
    fn googles_worked_example() {
        // G-03: the five cases of Google's 2005 post.
        check(
            "https://www.example.com/oaiserver",
            "https://www.example.com/",
            true,
        );
        check(
            "https://www.example.com/oaiserver",
            "https://www.example.com/samples.html",
            true,
        );
        check(
            "https://www.example.com/oaiserver",
            "https://www.example.com/images/",
            true,
        );
        check(
            "https://www.example.com/dataprovider/oaiserver",
            "https://www.example.com/",
            false,
        );
        check(
            "https://www.example.com/dataprovider/oaiserver",
            "https://www.example.com/samples.html",
            false,
        );
        check(
            "https://www.example.com/dataprovider/oaiserver",
            "https://www.example.com/images/",
            false,
        );
    }

    #[test]
    fn directory_host_port_and_scheme() {
        check("https://h/oai/request", "https://h/oai/item/1", true);
        check("https://h/oai/request", "https://h/oaiitem/1", false);
        check("https://h/oai/request", "https://h/oai/../admin", false);
        check("https://h/oai/request", "http://h/oai/item", false);
        check("https://h/oai/request", "https://H/oai/item", true);
        check("https://h/oai/request", "https://h:443/oai/item", true);
        check("https://h/oai/request", "https://h:8443/oai/item", false);
        check("https://h/oai/request", "https://other/oai/item", false);
        check(
            "https://bücher.example/oai",
            "https://xn--bcher-kva.example/x",
            true,
        );
        // SM-07: `/catalog/` does not cover `/catalogue/`.
        check(
            "http://example.com/catalog/sitemap.xml",
            "http://example.com/catalogue/x",
            false,
        );
        check(
            "http://example.com/catalog/sitemap.xml",
            "http://example.com/catalog/show?item=23",
            true,
        );
        // A query on the baseURL does not change its directory (OAI-04).
        check(
            "https://h/cgi/oai2?repository=x",
            "https://h/cgi/view/1",
            true,
        );
    }

    #[test]
    fn explicit_prefixes_replace_the_default() {
        let scope =
            Scope::from_prefixes(&[url("https://h/handle/"), url("https://files.h/")]).unwrap();
        assert!(scope.contains(&url("https://h/handle/1/2")));
        assert!(scope.contains(&url("https://files.h/a.pdf")));
        assert!(!scope.contains(&url("https://h/oai/")));
        assert_eq!(scope.to_string(), "https://h/handle/, https://files.h/");
        assert!(Scope::from_prefixes(&[url("ftp://h/")]).is_none());
    }

    #[test]
    fn cross_submission_needed_when_scope_is_not_under_the_public_url() {
        let scope = Scope::from_base_url(&url("https://repo.example/oai")).unwrap();
        assert!(scope.is_under(&url("https://repo.example/")));
        assert!(!scope.is_under(&url("https://repo.example/sitemaps/")));
        assert!(!scope.is_under(&url("https://bridge.example/")));
    }
}
