//! robots.txt: allow everything and announce every index with an absolute `Sitemap:` line
//! (SM-18, RFC 9309).

/// Renders robots.txt announcing `sitemaps` (absolute URLs), one `Sitemap:` line each.
pub fn render_robots<'a>(sitemaps: impl IntoIterator<Item = &'a str>) -> String {
    let mut out = String::from("# Written by oai-bridge.\nUser-agent: *\nDisallow:\n\n");
    push_sitemaps(&mut out, sitemaps);
    out
}

/// One `Sitemap:` line per URL.
fn push_sitemaps<'a>(out: &mut String, sitemaps: impl IntoIterator<Item = &'a str>) {
    for url in sitemaps {
        out.push_str("Sitemap: ");
        out.push_str(url);
        out.push('\n');
    }
}

/// The robots.txt group for CDIF-aware harvesters (CDIF "Find metadata"): their user agent, and
/// the CDIF sitemaps, whose locations are JSON-LD documents (or lists of them) rather than HTML
/// pages.
pub fn render_cdif_group<'a>(cdif_sitemaps: impl IntoIterator<Item = &'a str>) -> String {
    let mut out = format!("\nUser-agent: {}\nDisallow:\n", super::cdif::USER_AGENT);
    push_sitemaps(&mut out, cdif_sitemaps);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sitemap_lines_are_absolute() {
        let text = render_robots(["https://h/sitemaps/sitemap.xml"]);
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
