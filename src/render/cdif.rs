//! CDIF: each record's metadata as schema.org JSON-LD crosswalked from oai_dc (Content-Type
//! `application/ld+json; profile="CDIF1.0"`), and the sitemap that lists those documents, which
//! robots.txt announces under `User-agent: CDIF1.0`.
//!
//! | schema.org | from |
//! |---|---|
//! | `@type` | `dc:type` through [`crate::dctype`] (default `CreativeWork`) |
//! | `@id`, `url` | the landing page |
//! | `name` | the first `dc:title` |
//! | `description` | the first `dc:description` |
//! | `creator` | every `dc:creator`, as `Person` with a `name` |
//! | `datePublished` | the first `dc:date` that starts with a year (`YYYY`, `YYYY-MM`, `YYYY-MM-DD`) |
//! | `keywords` | every `dc:subject` |
//! | `publisher` | the first `dc:publisher`, as `Organization` |
//! | `inLanguage` | every `dc:language` |
//! | `license` | the first `dc:rights` that is a URL |
//! | `identifier` | the DOI or Handle, as its resolver URL |
//! | `subjectOf` | the oai_dc record (`GetRecord`), as `DataDownload` with `encodingFormat` |

use serde::Serialize;

/// Content-Type of one CDIF document.
pub const CONTENT_TYPE: &str = "application/ld+json; profile=\"CDIF1.0\"";
/// The user agent CDIF-aware harvesters read robots.txt as.
pub const USER_AGENT: &str = "CDIF1.0";

/// What one document is made of.
#[derive(Clone, Debug, Default)]
pub struct Fields<'a> {
    /// The landing page.
    pub url: &'a str,
    /// schema.org type URL (`https://schema.org/Thesis`).
    pub kind: Option<&'a str>,
    /// `dc:title`s.
    pub titles: Vec<&'a str>,
    /// `dc:description`s.
    pub descriptions: Vec<&'a str>,
    /// `dc:creator`s.
    pub creators: Vec<&'a str>,
    /// `dc:date`s.
    pub dates: Vec<&'a str>,
    /// `dc:subject`s.
    pub subjects: Vec<&'a str>,
    /// `dc:publisher`s.
    pub publishers: Vec<&'a str>,
    /// `dc:language`s.
    pub languages: Vec<&'a str>,
    /// License URL.
    pub license: Option<&'a str>,
    /// Persistent identifier as a resolver URL.
    pub identifier: Option<&'a str>,
    /// The record's `GetRecord` URL.
    pub metadata: Option<&'a str>,
}

/// The JSON-LD document, compact (one line), its keys in a fixed order. Serialised from borrowed
/// structs: no intermediate map per record.
pub fn document(f: &Fields<'_>) -> String {
    #[derive(Serialize)]
    struct Named<'a> {
        #[serde(rename = "@type")]
        kind: &'static str,
        name: &'a str,
    }
    #[derive(Serialize)]
    struct Download<'a> {
        #[serde(rename = "@type")]
        kind: &'static str,
        #[serde(rename = "contentUrl")]
        content_url: &'a str,
        #[serde(rename = "encodingFormat")]
        encoding_format: &'static str,
        description: &'static str,
    }
    #[derive(Serialize)]
    #[serde(untagged)]
    enum OneOrMany<'a> {
        One(&'a str),
        Many(&'a [&'a str]),
    }
    #[derive(Serialize)]
    struct Doc<'a> {
        #[serde(rename = "@context")]
        context: &'static str,
        #[serde(rename = "@type")]
        kind: &'a str,
        #[serde(rename = "@id")]
        id: &'a str,
        url: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        name: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        description: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        creator: Vec<Named<'a>>,
        #[serde(rename = "datePublished", skip_serializing_if = "Option::is_none")]
        date_published: Option<&'a str>,
        #[serde(skip_serializing_if = "<[_]>::is_empty")]
        keywords: &'a [&'a str],
        #[serde(skip_serializing_if = "Option::is_none")]
        publisher: Option<Named<'a>>,
        #[serde(rename = "inLanguage", skip_serializing_if = "Option::is_none")]
        in_language: Option<OneOrMany<'a>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        license: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        identifier: Option<&'a str>,
        #[serde(rename = "subjectOf", skip_serializing_if = "Option::is_none")]
        subject_of: Option<Download<'a>>,
    }
    let doc = Doc {
        context: "https://schema.org/",
        kind: f
            .kind
            .and_then(|k| k.strip_prefix(crate::dctype::SCHEMA_ORG))
            .unwrap_or("CreativeWork"),
        id: f.url,
        url: f.url,
        name: f.titles.first().copied(),
        description: f.descriptions.first().copied(),
        creator: f
            .creators
            .iter()
            .map(|c| Named {
                kind: "Person",
                name: c,
            })
            .collect(),
        date_published: f.dates.iter().find_map(|d| date(d)),
        keywords: &f.subjects,
        publisher: f.publishers.first().map(|p| Named {
            kind: "Organization",
            name: p,
        }),
        in_language: match f.languages.as_slice() {
            [] => None,
            [one] => Some(OneOrMany::One(one)),
            many => Some(OneOrMany::Many(many)),
        },
        license: f.license,
        identifier: f.identifier,
        subject_of: f.metadata.map(|m| Download {
            kind: "DataDownload",
            content_url: m,
            encoding_format: "application/xml",
            description: "the OAI-PMH oai_dc record",
        }),
    };
    serde_json::to_string(&doc).expect("serialising borrowed strings cannot fail")
}

/// A `dc:date` as schema.org `Date` when it starts with `YYYY`, `YYYY-MM` or `YYYY-MM-DD`.
fn date(value: &str) -> Option<&str> {
    let v = value.trim();
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    for len in [10, 7, 4] {
        if let Some(prefix) = v.get(..len) {
            let ok = match len {
                10 => digits(&prefix[..4]) && digits(&prefix[5..7]) && digits(&prefix[8..]),
                7 => digits(&prefix[..4]) && digits(&prefix[5..]),
                _ => digits(prefix),
            } && (len == 4 || prefix.as_bytes()[4] == b'-')
                && (len != 10 || prefix.as_bytes()[7] == b'-');
            if ok && v.as_bytes().get(len).is_none_or(|b| !b.is_ascii_digit()) {
                return Some(prefix);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn the_crosswalk() {
        let doc = document(&Fields {
            url: "https://h/r/1",
            kind: Some("https://schema.org/Thesis"),
            titles: vec!["Tides & waves \"quoted\""],
            descriptions: vec!["About <tides>."],
            creators: vec!["Müller, A.", "Jansen, B."],
            dates: vec!["n.d.", "2021-06-30T00:00:00Z"],
            subjects: vec!["tides", "coasts"],
            publishers: vec!["Northbridge University"],
            languages: vec!["en"],
            license: Some("https://creativecommons.org/licenses/by/4.0/"),
            identifier: Some("https://doi.org/10.1/x"),
            metadata: Some(
                "https://h/oai?verb=GetRecord&identifier=oai%3Ah%3A1&metadataPrefix=oai_dc",
            ),
        });
        let v: Value = serde_json::from_str(&doc).unwrap();
        assert_eq!(v["@context"], "https://schema.org/");
        assert_eq!(v["@type"], "Thesis");
        assert_eq!(v["@id"], "https://h/r/1");
        assert_eq!(v["url"], "https://h/r/1");
        assert_eq!(v["name"], "Tides & waves \"quoted\"");
        assert_eq!(v["description"], "About <tides>.");
        assert_eq!(v["creator"][1]["name"], "Jansen, B.");
        assert_eq!(v["creator"][0]["@type"], "Person");
        assert_eq!(v["datePublished"], "2021-06-30");
        assert_eq!(v["keywords"], json!(["tides", "coasts"]));
        assert_eq!(v["publisher"]["name"], "Northbridge University");
        assert_eq!(v["inLanguage"], "en");
        assert_eq!(v["license"], "https://creativecommons.org/licenses/by/4.0/");
        assert_eq!(v["identifier"], "https://doi.org/10.1/x");
        assert_eq!(v["subjectOf"]["encodingFormat"], "application/xml");
        assert!(
            doc.starts_with("{\"@context\":\"https://schema.org/\",\"@type\":\"Thesis\",\"@id\":")
        );
    }

    #[test]
    fn minimal_documents_and_dates() {
        let v: Value = serde_json::from_str(&document(&Fields {
            url: "https://h/r/2",
            ..Fields::default()
        }))
        .unwrap();
        assert_eq!(v["@type"], "CreativeWork");
        assert!(v.get("name").is_none() && v.get("datePublished").is_none());
        assert_eq!(date("2020"), Some("2020"));
        assert_eq!(date("2020-05"), Some("2020-05"));
        assert_eq!(date("2020-05-06"), Some("2020-05-06"));
        assert_eq!(date("20201"), None);
        assert_eq!(date("May 2020"), None);
        assert_eq!(date("2020-5-6"), Some("2020"));
    }
}
