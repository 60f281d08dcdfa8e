//! What the entries of one record are written from, shared by the landing-page profiles'
//! collector ([`super::signposts`]) and each profile's writer of one entry
//! (its column's writer, `signmap::write_column`, `ocx::write_column`, `cdif::write_column`): the record's
//! identifiers as the profiles read them, its `GetRecord` URL, and what its entries share; and
//! what the collector counted.

use oai_pmh::{OaiRequest, Record, push_query_value, push_query_value_str};
use url::Url;

use crate::identifier::{Class, Pid};
use crate::sitemap::escape;

/// Most `item` links one entry carries; a record with more files lists the first ones, so that
/// one entry can never outgrow a shard.
pub(crate) const MAX_ITEMS: usize = 50;

/// What the landing-page profiles' collector counted, by outcome: the Signmap's entries and
/// records left out (which CDIF's documents share), and OCX's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SignStats {
    /// Entries published.
    pub published: u64,
    /// Live records without a landing page inside the scope (not published).
    pub no_landing_page: u64,
    /// Live records whose landing page another, newer record already has (published once).
    pub duplicate: u64,
    /// OCX entries published.
    pub ocx_published: u64,
    /// Records with a landing page but no OCX type (`ocx_no_type`), not in the OCX sitemap.
    pub ocx_no_type: u64,
}

/// A record's `GetRecord` URL is `{before}{percent-encoded identifier}{after}`.
#[derive(Debug)]
pub(crate) struct GetRecord {
    before: String,
    after: String,
    /// `before` and `after` escaped for XML (the `&`s).
    xml: (String, String),
    /// The last identifier written up to its last `:`, and that part percent-encoded: an
    /// identifier that starts the same has only the rest encoded. A repository's identifiers
    /// mostly share all but what follows the last colon (`oai:repo.org:` + a number); one whose
    /// local part holds colons too (`oai:h:10.1/x:v2`) just finds it less often. Encoding all
    /// of each was a twentieth of writing a Signmap entry.
    shared: (String, Vec<u8>),
}

impl GetRecord {
    /// Spelled by [`OaiRequest`] itself, around a marker that percent-encoding leaves alone.
    pub(crate) fn new(base: &Url) -> Self {
        const MARK: &str = "IDENTIFIER";
        let url = OaiRequest::new(
            base,
            &[
                ("verb", "GetRecord"),
                ("identifier", MARK),
                ("metadataPrefix", "oai_dc"),
            ],
        )
        .into_url();
        let at = url.rfind(MARK).expect("the marker was just written");
        let (before, after) = (&url[..at], &url[at + MARK.len()..]);
        Self {
            xml: (escape(before).into_owned(), escape(after).into_owned()),
            before: before.to_owned(),
            after: after.to_owned(),
            shared: (String::new(), Vec::new()),
        }
    }

    /// The URL for `id`.
    pub(crate) fn url(&self, id: &str) -> String {
        let mut url = self.before.clone();
        push_query_value_str(&mut url, id);
        url.push_str(&self.after);
        url
    }

    /// Appends the URL for `id`, escaped for XML (percent-encoding leaves nothing to escape in
    /// the identifier: it encodes each byte on its own, so its parts can be encoded apart).
    pub(crate) fn write_xml(&mut self, bytes: &mut Vec<u8>, id: &str) {
        bytes.extend_from_slice(self.xml.0.as_bytes());
        let (prefix, encoded) = &mut self.shared;
        let rest = match id.strip_prefix(prefix.as_str()) {
            Some(rest) if !prefix.is_empty() => rest,
            _ => {
                let end = id.rfind(':').map_or(0, |colon| colon + 1);
                prefix.clear();
                prefix.push_str(&id[..end]);
                encoded.clear();
                push_query_value(encoded, prefix);
                &id[end..]
            }
        };
        bytes.extend_from_slice(encoded);
        push_query_value(bytes, rest);
        bytes.extend_from_slice(self.xml.1.as_bytes());
    }
}

/// What the columns' writers ([`super::Column`]) keep from one record to the next.
#[derive(Debug, Default)]
pub(crate) struct Writers {
    /// The `GetRecord` URL around the percent-encoded identifier (none for a Static
    /// Repository without an http(s) baseURL).
    pub(crate) get_record: Option<GetRecord>,
    /// Scratch text: a name and a teaser written out.
    pub(crate) name: String,
    pub(crate) teaser: String,
}

/// What one record's identifiers are to the profiles (found without allocating: there is one
/// for every record).
#[derive(Debug)]
pub(crate) struct Classified<'a> {
    classes: &'a [Class<'a>],
    /// The landing page: the first identifier classed as one.
    pub(crate) landing: Option<&'a str>,
    /// The first persistent identifier.
    pub(crate) cite_as: Option<&'a Pid<'a>>,
}

impl<'a> Classified<'a> {
    pub(crate) fn of(classes: &'a [Class<'a>]) -> Self {
        let mut found = Self {
            classes,
            landing: None,
            cite_as: None,
        };
        for class in classes {
            match class {
                Class::LandingPage(url) if found.landing.is_none() => {
                    found.landing = Some(url);
                }
                Class::PersistentId(pid) if found.cite_as.is_none() => {
                    found.cite_as = Some(pid);
                }
                _ => {}
            }
        }
        found
    }

    /// Content files, with their media types, at most [`MAX_ITEMS`].
    pub(crate) fn items(&self) -> impl Iterator<Item = (&'a str, &'static str)> + use<'a> {
        let classes: &'a [Class<'a>] = self.classes;
        classes
            .iter()
            .filter_map(|class| match class {
                Class::ContentFile { url, media_type } => Some((url.as_ref(), *media_type)),
                _ => None,
            })
            .take(MAX_ITEMS)
    }

    /// The first image among the content files: OCX's `ocx:image`.
    pub(crate) fn image(&self) -> Option<&'a str> {
        self.items()
            .find(|(_, t)| t.starts_with("image/"))
            .map(|(url, _)| url)
    }
}

/// What the entries of one live record with a landing page share, spelled out once for every
/// profile; borrowed, so that nothing is copied per record. Each profile's module writes its
/// entry from it (`signmap::write_column`, `ocx::write_column`, `cdif::write_column`).
pub(crate) struct Shared<'r> {
    pub(crate) record: &'r Record,
    pub(crate) found: &'r Classified<'r>,
    pub(crate) landing: &'r str,
    pub(crate) lastmod: Option<&'r str>,
    /// The URL of the record's CDIF document, when the documents are published one by one.
    pub(crate) document: Option<&'r str>,
    /// For the Signmap and CDIF: the persistent identifier's resolver URL, the license URL and
    /// the schema.org type.
    pub(crate) cite_as: Option<&'r str>,
    pub(crate) license: Option<&'r str>,
    pub(crate) kind: Option<&'r str>,
    /// Its OCX type, when OCX is on and the record has one (or OCX's default).
    pub(crate) ocx_kind: Option<&'r str>,
    /// The key part of its CDIF document's name, in hex, when CDIF's documents are made.
    pub(crate) document_key: Option<&'r str>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `GetRecord` link is spelled as `OaiRequest` spells it, after an existing query too
    /// (OAI-04), and escaped in the XML; it carries both arguments GetRecord requires,
    /// identifier and metadataPrefix (OAI-02).
    #[test]
    fn the_describedby_link_is_the_get_record_request() {
        for base in ["https://h/oai/request", "https://h/oai/request?repo=a&x=1"] {
            let base = Url::parse(base).unwrap();
            let mut get_record = GetRecord::new(&base);
            // One writer for identifiers that share what comes before their last colon, and
            // for others: the same URLs as each encoded whole.
            for id in [
                "oai:h:a b/é&<",
                "oai:h:a b/é&<:2",
                "oai:h:a b/é&<:3",
                "oai:h:1",
                "oai:h:",
                "oai:h:",
                "no-colon&",
                "oai:h:2",
                "oai:other:2",
                ":",
                "",
            ] {
                let expected = OaiRequest::new(
                    &base,
                    &[
                        ("verb", "GetRecord"),
                        ("identifier", id),
                        ("metadataPrefix", "oai_dc"),
                    ],
                )
                .into_url();
                assert_eq!(get_record.url(id), expected);
                let mut xml = Vec::new();
                get_record.write_xml(&mut xml, id);
                assert_eq!(String::from_utf8(xml).unwrap(), escape(&expected), "{id}");
            }
        }
    }
}
