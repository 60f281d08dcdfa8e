//! robots.txt: allow everything and announce every index with an absolute `Sitemap:` line
//! (SM-18, RFC 9309).

/// The user agent CDIF-aware harvesters read robots.txt as (CDIF "Find metadata"); the CDIF
/// profile's, kept here because robots.txt writes its group.
pub(crate) const CDIF_USER_AGENT: &str = "CDIF1.0";

/// What robots.txt announces for one repository, as absolute URLs: its indexes for every
/// crawler, and its CDIF sitemaps (CDIF "Find metadata"), whose locations are JSON-LD documents
/// (or lists of them) rather than HTML pages.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Announced<S> {
    /// The sitemap index, then the Signmap, OCX and DiWoo indexes.
    pub indexes: Vec<S>,
    /// The CDIF sitemaps' indexes: of the documents, of the lists.
    pub cdif: Vec<S>,
}

/// Renders robots.txt for `repos` (one, for an export; every one a gateway serves): a
/// `Sitemap:` line for each index of each, then a `User-agent: CDIF1.0` group for each that has
/// CDIF sitemaps.
pub fn render_robots<S: AsRef<str>>(repos: &[Announced<S>]) -> String {
    let mut out = String::from("# Written by oai-bridge.\nUser-agent: *\nDisallow:\n\n");
    for repo in repos {
        push_sitemaps(&mut out, &repo.indexes);
    }
    for repo in repos.iter().filter(|r| !r.cdif.is_empty()) {
        out.push_str("\nUser-agent: ");
        out.push_str(CDIF_USER_AGENT);
        out.push_str("\nDisallow:\n");
        push_sitemaps(&mut out, &repo.cdif);
    }
    out
}

/// One `Sitemap:` line per URL.
fn push_sitemaps<S: AsRef<str>>(out: &mut String, sitemaps: &[S]) {
    for url in sitemaps {
        out.push_str("Sitemap: ");
        out.push_str(url.as_ref());
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sitemap_lines_are_absolute() {
        let text = render_robots(&[Announced {
            indexes: vec!["https://h/sitemaps/sitemap.xml"],
            cdif: vec![],
        }]);
        assert_eq!(
            text,
            "# Written by oai-bridge.\nUser-agent: *\nDisallow:\n\nSitemap: https://h/sitemaps/sitemap.xml\n"
        );
        assert!(
            text.lines()
                .filter(|l| l.starts_with("Sitemap:"))
                .all(|l| l.starts_with("Sitemap: https://"))
        );
    }
}
