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

use serde_json::{Map, Value, json};

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

/// The JSON-LD document, compact (one line).
pub fn document(f: &Fields<'_>) -> String {
    let mut doc = Map::new();
    doc.insert("@context".into(), json!("https://schema.org/"));
    let kind = f
        .kind
        .and_then(|k| k.strip_prefix(crate::dctype::SCHEMA_ORG))
        .unwrap_or("CreativeWork");
    doc.insert("@type".into(), json!(kind));
    doc.insert("@id".into(), json!(f.url));
    doc.insert("url".into(), json!(f.url));
    if let Some(name) = f.titles.first() {
        doc.insert("name".into(), json!(name));
    }
    if let Some(d) = f.descriptions.first() {
        doc.insert("description".into(), json!(d));
    }
    if !f.creators.is_empty() {
        let people: Vec<Value> = f
            .creators
            .iter()
            .map(|c| json!({"@type": "Person", "name": c}))
            .collect();
        doc.insert("creator".into(), Value::Array(people));
    }
    if let Some(date) = f.dates.iter().find_map(|d| date(d)) {
        doc.insert("datePublished".into(), json!(date));
    }
    if !f.subjects.is_empty() {
        doc.insert("keywords".into(), json!(f.subjects));
    }
    if let Some(p) = f.publishers.first() {
        doc.insert(
            "publisher".into(),
            json!({"@type": "Organization", "name": p}),
        );
    }
    match f.languages.as_slice() {
        [] => {}
        [one] => {
            doc.insert("inLanguage".into(), json!(one));
        }
        many => {
            doc.insert("inLanguage".into(), json!(many));
        }
    }
    if let Some(l) = f.license {
        doc.insert("license".into(), json!(l));
    }
    if let Some(id) = f.identifier {
        doc.insert("identifier".into(), json!(id));
    }
    if let Some(m) = f.metadata {
        doc.insert(
            "subjectOf".into(),
            json!({
                "@type": "DataDownload",
                "contentUrl": m,
                "encodingFormat": "application/xml",
                "description": "the OAI-PMH oai_dc record"
            }),
        );
    }
    Value::Object(doc).to_string()
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
