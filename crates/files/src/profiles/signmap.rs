//! Signmaps: sitemaps whose `<url>` entries carry Signposting links as `<rs:ln>` (SP-01..SP-14).
//! One entry per scholarly object: `<loc>` is its landing page, `<lastmod>` its datestamp, then
//! the links, as children of `<url>` after them (the Signmap's own example and the sitemap schema
//! agree on that place; the Signmap prose that puts them inside `<loc>` cannot validate, SP-04).
//! No `rs:md`: a Signmap is not a ResourceSync Resource List (SP-12).

use crate::sitemap::{push_escaped, write_url_open};
use oai_pmh::{DcElement, Fields};
use serde::{Deserialize, Serialize};
use url::Url;

use super::record::{GetRecord, Shared, SignStats, Writers};
use super::registry::{self, Indexes, ProfileSummary};
use super::report::{self, Piece, ProfileCounts, Report};
use super::{Audience, Column, ColumnKind, Feed, Profile, ProfileSettings, Spec, SummarySpec};

/// The Signmap, as the profiles' list knows it ([`super::Spec`]): `signmap.xml`, one entry per
/// record's landing page, to every crawler; its links come from `dc:type` and `dc:rights`.
pub const SPEC: Spec = Spec {
    label: "signmap",
    prefix: "signmap",
    audience: Audience::AllCrawlers,
    feed: Feed::Records,
    fields: Fields::of(&[DcElement::Type, DcElement::Rights]),
    summary: Some(SummarySpec {
        field: "signmap",
        list: false,
        load: registry::load::<SignmapSummary>,
        from_render: Some(SignmapSummary::of),
    }),
    column: Some(Column {
        name: "Signmap",
        kind: ColumnKind::Urlset { open: URLSET_OPEN },
        write: write_column,
    }),
};

/// The ResourceSync namespace of `rs:ln` (SP-02).
#[cfg(test)]
pub const RS_NS: &str = "http://www.openarchives.org/rs/terms/";

/// The root's start tag, with the ResourceSync namespace (SP-02).
pub const URLSET_OPEN: &str = "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" \
                               xmlns:rs=\"http://www.openarchives.org/rs/terms/\">\n";

/// Profile of the `describedby` link to a record's oai_dc metadata.
pub const OAI_DC_PROFILE: &str = "http://www.openarchives.org/OAI/2.0/oai_dc/";

/// The media type of the `describedby` link to a record's `GetRecord` response (with
/// [`OAI_DC_PROFILE`] as its profile, SP-07).
pub const XML: &str = "application/xml";

/// The relations a landing page's Signposting `Link` header may carry (the Signmap's, and the
/// link to its linkset), all of them unless a repository's `signposting_header` names fewer.
pub const HEADER_RELATIONS: [&str; 6] = [
    "cite-as",
    "describedby",
    "type",
    "license",
    "item",
    "linkset",
];

/// The media type of the `describedby` link to a record's CDIF document.
pub const JSON_LD: &str = "application/ld+json";

/// Appends the start of one typed link (SP-03), up to the opening quote of its `href`: the
/// caller writes the href, escaped, then [`link_end`]. For hrefs spelled out piece by piece
/// (the `GetRecord` URL); [`write_link`] writes a whole one.
pub fn link_start(bytes: &mut Vec<u8>, rel: &str) {
    bytes.extend_from_slice(b"<rs:ln rel=\"");
    bytes.extend_from_slice(rel.as_bytes());
    bytes.extend_from_slice(b"\" href=\"");
}

/// Closes a link begun with [`link_start`]: its media type (without parameters) and the profile
/// URI of a generic media type such as `application/xml` (SP-07). Both are the bridge's own
/// ([`XML`], [`JSON_LD`], [`OAI_DC_PROFILE`], and the media
/// types of the `oai-bridge` package's table of file extensions), written as they are: a test
/// holds each a valid `rs:ln` type free of characters to escape, which spares checking them in
/// every entry.
pub fn link_end(
    bytes: &mut Vec<u8>,
    media_type: Option<&'static str>,
    profile: Option<&'static str>,
) {
    if let Some(t) = media_type {
        bytes.extend_from_slice(b"\" type=\"");
        bytes.extend_from_slice(t.as_bytes());
    }
    if let Some(p) = profile {
        bytes.extend_from_slice(b"\" profile=\"");
        bytes.extend_from_slice(p.as_bytes());
    }
    bytes.extend_from_slice(b"\"/>");
}

/// Appends one typed link (SP-03) to an entry: after its `<loc>` and `<lastmod>`, inside
/// `<url>` (SP-04). `href` is absolute; `media_type` and `profile` as [`link_end`] takes them.
pub fn write_link(
    bytes: &mut Vec<u8>,
    rel: &str,
    href: &str,
    media_type: Option<&'static str>,
    profile: Option<&'static str>,
) {
    link_start(bytes, rel);
    push_escaped(bytes, href);
    link_end(bytes, media_type, profile);
}

/// Writes a record's Signmap `<url>` into `bytes`, from what its entries share: its links to
/// the CDIF document, the oai_dc record (when there is a `GetRecord` URL), the content files,
/// the persistent identifier, the license and the type. Every record with a landing page has
/// one: the Signmap's [`super::Column`] writer.
pub(crate) fn write_column(
    bytes: &mut Vec<u8>,
    shared: &Shared<'_>,
    _: &ProfileSettings,
    writers: &mut Writers,
) -> bool {
    write_record(bytes, shared, writers.get_record.as_mut());
    true
}

/// [`write_column`], with the `GetRecord` URL's writer.
#[inline]
fn write_record(bytes: &mut Vec<u8>, shared: &Shared<'_>, get_record: Option<&mut GetRecord>) {
    bytes.clear();
    write_url_open(bytes, shared.landing, shared.lastmod);
    if let Some(url) = shared.document {
        write_link(
            bytes,
            "describedby",
            url,
            Some(JSON_LD),
            Some(super::cdif::PROFILE),
        );
    }
    if let Some(get_record) = get_record {
        link_start(bytes, "describedby");
        get_record.write_xml(bytes, &shared.record.identifier);
        link_end(bytes, Some(XML), Some(OAI_DC_PROFILE));
    }
    for (url, media_type) in shared.found.items() {
        write_link(bytes, "item", url, Some(media_type), None);
    }
    if let Some(url) = shared.cite_as {
        write_link(bytes, "cite-as", url, None, None);
    }
    if let Some(url) = shared.license {
        write_link(bytes, "license", url, None, None);
    }
    if let Some(url) = shared.kind {
        write_link(bytes, "type", url, None, None);
    }
    bytes.extend_from_slice(b"</url>\n");
}

/// A media type as `rs:ln type` accepts it: `type/subtype` of RFC 6838 name characters (dots
/// and `+` included: `application/vnd.datacite.datacite+xml`), parameters cut off (SP-11).
pub fn rs_ln_type(value: &str) -> Option<&str> {
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

/// What a generation's Signmap holds.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct SignmapSummary {
    /// Absolute URL of the Signmap index.
    pub index_url: String,
    /// Entries published.
    pub published: u64,
    /// Live records without a landing page inside the scope.
    pub no_landing_page: u64,
    /// Records whose landing page a newer record has.
    pub duplicate: u64,
}

impl SignmapSummary {
    /// What the Signmap published, as the collector counted it, when the render wrote its
    /// index.
    fn of(indexes: &Indexes, stats: &SignStats) -> Option<ProfileSummary> {
        let index_url = indexes.get(Profile::Signmap)?;
        Some(ProfileSummary::new(SignmapSummary {
            index_url: index_url.to_string(),
            published: stats.published,
            no_landing_page: stats.no_landing_page,
            duplicate: stats.duplicate,
        }))
    }

    /// What it left out, by reason.
    fn drops(&self) -> [(&'static str, u64); 2] {
        [
            ("no_landing_page", self.no_landing_page),
            ("duplicate", self.duplicate),
        ]
    }
}

impl Report for SignmapSummary {
    fn profile(&self) -> Profile {
        Profile::Signmap
    }

    fn counts(&self) -> Vec<ProfileCounts> {
        vec![ProfileCounts::new(
            Profile::Signmap,
            self.published,
            &self.drops(),
        )]
    }

    fn export_lines(&self) -> Vec<(String, String)> {
        report::one_index_lines("Signmap", &self.index_url, self.published, &self.drops())
    }

    fn status_line(&self, _: &Url) -> Vec<Piece> {
        report::one_index_status("Signmap", &self.index_url, self.published, &self.drops())
    }

    fn indexes(&self, _: &Url) -> Vec<String> {
        vec![self.index_url.clone()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SP-02, SP-03, SP-04: the namespace on the root, links after loc and lastmod, escaped
    /// (SM-12: extension elements after the sitemap's own).
    #[test]
    fn links_follow_loc_and_lastmod() {
        let mut entry = Vec::new();
        let mut date = String::new();
        let lastmod = oai_pmh::Datestamp::parse("2024-05-01");
        crate::sitemap::write_url_open(
            &mut entry,
            "https://h/r/1",
            crate::sitemap::lastmod_text(lastmod, &mut date),
        );
        write_link(
            &mut entry,
            "describedby",
            "https://h/oai?verb=GetRecord&identifier=oai:h:1&metadataPrefix=oai_dc",
            Some("application/xml"),
            Some("http://www.openarchives.org/OAI/2.0/oai_dc/"),
        );
        write_link(&mut entry, "cite-as", "https://doi.org/10.1/x", None, None);
        entry.extend_from_slice(b"</url>\n");
        let text = format!(
            "{}{URLSET_OPEN}{}</urlset>\n",
            crate::sitemap::XML_DECL,
            String::from_utf8(entry).unwrap()
        );
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

    /// SP-11: dotted vendor types and `+` suffixes pass; parameters are cut; junk is refused.
    #[test]
    fn media_types() {
        assert_eq!(rs_ln_type("application/pdf"), Some("application/pdf"));
        assert_eq!(
            rs_ln_type("application/vnd.datacite.datacite+xml"),
            Some("application/vnd.datacite.datacite+xml")
        );
        assert_eq!(rs_ln_type("text/xml; charset=utf-8"), Some("text/xml"));
        assert_eq!(rs_ln_type("PDF"), None);
        assert_eq!(rs_ln_type("application/"), None);
        assert_eq!(rs_ln_type("1 page"), None);
    }
}
