//! Signmaps: sitemaps whose `<url>` entries carry Signposting links as `<rs:ln>` (SP-01..SP-14).
//! One entry per scholarly object: `<loc>` is its landing page, `<lastmod>` its datestamp, then
//! the links, as children of `<url>` after them (the Signmap's own example and the sitemap schema
//! agree on that place; the Signmap prose that puts them inside `<loc>` cannot validate, SP-04).
//! No `rs:md`: a Signmap is not a ResourceSync Resource List (SP-12).

use std::borrow::Cow;

use super::sitemap::{Limits, Shard, escape, render_urlsets, write_url_start};
use crate::datestamp::Datestamp;

/// The ResourceSync namespace of `rs:ln` (SP-02).
pub const RS_NS: &str = "http://www.openarchives.org/rs/terms/";

const URLSET_OPEN: &str = "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" \
                           xmlns:rs=\"http://www.openarchives.org/rs/terms/\">\n";

/// One typed link (SP-03): `href` absolute, `media_type` without parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link<'a> {
    /// Relation type: `describedby`, `item`, `cite-as`, `license`, `type`.
    pub rel: &'static str,
    /// Absolute http(s) URL of the target (owned when spelled out for this entry).
    pub href: Cow<'a, str>,
    /// Media type of the target, when known exactly.
    pub media_type: Option<&'a str>,
    /// Profile URI of the media type (for generic types such as `application/xml`, SP-07).
    pub profile: Option<&'a str>,
}

/// One scholarly object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry<'a> {
    /// The landing page.
    pub loc: &'a str,
    /// The record's datestamp.
    pub lastmod: Option<Datestamp>,
    /// Its links, in output order.
    pub links: Vec<Link<'a>>,
}

/// Splits entries (sorted by `loc`) into Signmap shards within `limits`, counting the links'
/// bytes too (SP-14), and hands each to `emit` as soon as it is full.
pub fn render_signmaps<'a, E>(
    entries: impl IntoIterator<Item = Entry<'a>>,
    limits: Limits,
    emit: impl FnMut(&Shard) -> Result<(), E>,
) -> Result<usize, E> {
    let mut date = String::with_capacity(32);
    render_urlsets(
        entries,
        URLSET_OPEN,
        limits,
        |bytes, entry| {
            write_url_start(bytes, entry.loc, entry.lastmod, &mut date);
            for link in &entry.links {
                bytes.extend_from_slice(b"<rs:ln rel=\"");
                bytes.extend_from_slice(link.rel.as_bytes());
                bytes.extend_from_slice(b"\" href=\"");
                bytes.extend_from_slice(escape(&link.href).as_bytes());
                if let Some(t) = link.media_type {
                    bytes.extend_from_slice(b"\" type=\"");
                    bytes.extend_from_slice(escape(t).as_bytes());
                }
                if let Some(p) = link.profile {
                    bytes.extend_from_slice(b"\" profile=\"");
                    bytes.extend_from_slice(escape(p).as_bytes());
                }
                bytes.extend_from_slice(b"\"/>");
            }
            bytes.extend_from_slice(b"</url>\n");
            entry.lastmod
        },
        emit,
    )
}

/// A media type as `rs:ln type` accepts it: `type/subtype` of RFC 6838 name characters (dots
/// and `+` included: `application/vnd.datacite.datacite+xml`), parameters cut off (SP-11).
pub fn media_type(value: &str) -> Option<&str> {
    let value = value.split(';').next().unwrap_or("").trim();
    let (top, sub) = value.split_once('/')?;
    let name = |s: &str| {
        !s.is_empty()
            && s.len() <= 127
            && s.as_bytes()[0].is_ascii_alphanumeric()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    (name(top) && name(sub)).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(entries: Vec<Entry<'_>>, limits: Limits) -> Vec<Shard> {
        let mut out = Vec::new();
        render_signmaps(entries, limits, |s| {
            out.push(s.clone());
            Ok::<_, ()>(())
        })
        .unwrap();
        out
    }

    /// SP-02, SP-03, SP-04: the namespace on the root, links after loc and lastmod, escaped.
    #[test]
    fn links_follow_loc_and_lastmod() {
        let entry = Entry {
            loc: "https://h/r/1",
            lastmod: Datestamp::parse("2024-05-01"),
            links: vec![
                Link {
                    rel: "describedby",
                    href: "https://h/oai?verb=GetRecord&identifier=oai:h:1&metadataPrefix=oai_dc"
                        .into(),
                    media_type: Some("application/xml"),
                    profile: Some("http://www.openarchives.org/OAI/2.0/oai_dc/"),
                },
                Link {
                    rel: "cite-as",
                    href: "https://doi.org/10.1/x".into(),
                    media_type: None,
                    profile: None,
                },
            ],
        };
        let shards = render(vec![entry], Limits::default());
        let text = String::from_utf8(shards[0].bytes.clone()).unwrap();
        assert!(text.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" xmlns:rs=\"http://www.openarchives.org/rs/terms/\">\n"));
        assert!(text.contains(
            "<url><loc>https://h/r/1</loc><lastmod>2024-05-01</lastmod><rs:ln rel=\"describedby\" \
             href=\"https://h/oai?verb=GetRecord&amp;identifier=oai:h:1&amp;metadataPrefix=oai_dc\" \
             type=\"application/xml\" profile=\"http://www.openarchives.org/OAI/2.0/oai_dc/\"/>\
             <rs:ln rel=\"cite-as\" href=\"https://doi.org/10.1/x\"/></url>\n"
        ));
        assert!(!text.contains("rs:md"), "SP-12");
        // A real parser reads back what was written.
        let doc = roxmltree::Document::parse(&text).unwrap();
        let hrefs: Vec<&str> = doc
            .descendants()
            .filter(|n| n.tag_name().name() == "ln" && n.tag_name().namespace() == Some(RS_NS))
            .filter_map(|n| n.attribute("href"))
            .collect();
        assert_eq!(
            hrefs,
            [
                "https://h/oai?verb=GetRecord&identifier=oai:h:1&metadataPrefix=oai_dc",
                "https://doi.org/10.1/x"
            ]
        );
    }

    /// SP-14: links count toward the byte limit.
    #[test]
    fn shards_split_on_bytes_counting_links() {
        let hrefs: Vec<String> = (0..40)
            .map(|i| format!("https://h/files/{i:04}.pdf"))
            .collect();
        let entries: Vec<Entry<'_>> = (0..100)
            .map(|_| Entry {
                loc: "https://h/r/x",
                lastmod: None,
                links: hrefs
                    .iter()
                    .map(|h| Link {
                        rel: "item",
                        href: h.into(),
                        media_type: Some("application/pdf"),
                        profile: None,
                    })
                    .collect(),
            })
            .collect();
        let limits = Limits {
            max_urls: 50_000,
            max_bytes: 64 * 1024,
        };
        let shards = render(entries, limits);
        assert!(shards.len() > 1);
        assert!(shards.iter().all(|s| s.bytes.len() <= limits.max_bytes));
        assert_eq!(shards.iter().map(|s| s.urls).sum::<usize>(), 100);
    }

    /// SP-11: dotted vendor types and `+` suffixes pass; parameters are cut; junk is refused.
    #[test]
    fn media_types() {
        assert_eq!(media_type("application/pdf"), Some("application/pdf"));
        assert_eq!(
            media_type("application/vnd.datacite.datacite+xml"),
            Some("application/vnd.datacite.datacite+xml")
        );
        assert_eq!(media_type("text/xml; charset=utf-8"), Some("text/xml"));
        assert_eq!(media_type("PDF"), None);
        assert_eq!(media_type("application/"), None);
        assert_eq!(media_type("1 page"), None);
    }
}
