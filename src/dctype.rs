//! `dc:type` -> a schema.org type, shared by the profiles that need one: the Signmap's
//! `rel="type"` link, OCX's `ocx:type` and the CDIF JSON-LD `@type`.
//!
//! Repositories fill `dc:type` from several vocabularies at once: the DCMI Type Vocabulary
//! (`Text`, `Dataset`, `StillImage`), the OpenAIRE/DRIVER `info:eu-repo/semantics/...` terms,
//! COAR resource type URIs and labels, and free text in the local language. Each value is
//! reduced to a key (the last path segment of a URI, lower case, letters and digits only) and
//! looked up; a record takes the most specific type any of its values maps to (`Thesis` beats
//! `CreativeWork`, which `Text` maps to). COAR URIs are matched by their code
//! (`http://purl.org/coar/resource_type/c_6501` -> `c6501`).

// foldhash rather than std's SipHash: every record is looked up twice (Signmap and OCX) in a
// table the configuration fixes, where SipHash's resistance to chosen keys buys nothing and its
// hashing showed in the profiles' time.
use foldhash::HashMap;

/// The schema.org vocabulary prefix of the types returned.
pub const SCHEMA_ORG: &str = "https://schema.org/";

/// Built-in table: key -> (schema.org type, specificity). Keys are reduced as [`key`] does.
const BUILT_IN: &[(&str, &str, u8)] = &[
    // DCMI Type Vocabulary
    ("text", "CreativeWork", 1),
    ("collection", "Collection", 2),
    ("dataset", "Dataset", 3),
    ("event", "Event", 2),
    ("image", "ImageObject", 2),
    ("stillimage", "ImageObject", 3),
    ("movingimage", "VideoObject", 3),
    ("sound", "AudioObject", 3),
    ("software", "SoftwareSourceCode", 3),
    ("interactiveresource", "WebApplication", 2),
    ("physicalobject", "Thing", 1),
    ("service", "Service", 2),
    // info:eu-repo/semantics (OpenAIRE, DRIVER) and COAR labels
    ("article", "ScholarlyArticle", 3),
    ("journalarticle", "ScholarlyArticle", 3),
    ("researcharticle", "ScholarlyArticle", 3),
    ("contributiontojournal", "ScholarlyArticle", 3),
    ("preprint", "ScholarlyArticle", 3),
    ("submittedversion", "ScholarlyArticle", 2),
    ("conferenceobject", "ScholarlyArticle", 3),
    ("conferencepaper", "ScholarlyArticle", 3),
    ("conferenceproceedings", "Book", 3),
    ("book", "Book", 3),
    ("bookpart", "Chapter", 3),
    ("bookchapter", "Chapter", 3),
    ("chapter", "Chapter", 3),
    ("doctoralthesis", "Thesis", 4),
    ("masterthesis", "Thesis", 4),
    ("mastersthesis", "Thesis", 4),
    ("bachelorthesis", "Thesis", 4),
    ("thesis", "Thesis", 4),
    ("dissertation", "Thesis", 4),
    ("report", "Report", 3),
    ("technicalreport", "Report", 3),
    ("researchreport", "Report", 3),
    ("workingpaper", "Report", 3),
    ("review", "Review", 3),
    ("bookreview", "Review", 3),
    ("lecture", "LearningResource", 3),
    ("learningobject", "LearningResource", 3),
    ("coursematerial", "LearningResource", 3),
    ("map", "Map", 3),
    ("musicalnotation", "SheetMusic", 3),
    ("video", "VideoObject", 3),
    ("audio", "AudioObject", 3),
    ("photograph", "Photograph", 3),
    ("poster", "Poster", 3),
    ("presentation", "PresentationDigitalDocument", 3),
    ("patent", "CreativeWork", 2),
    ("other", "CreativeWork", 0),
    // COAR resource type URIs (http://purl.org/coar/resource_type/c_...), by their code
    ("c18cf", "CreativeWork", 1),
    ("c6501", "ScholarlyArticle", 3),
    ("c2df8fbb1", "ScholarlyArticle", 3),
    ("c816b", "ScholarlyArticle", 3),
    ("c5794", "ScholarlyArticle", 3),
    ("cf744", "Book", 3),
    ("c2f33", "Book", 3),
    ("c3248", "Chapter", 3),
    ("c46ec", "Thesis", 4),
    ("cdb06", "Thesis", 4),
    ("cbdcc", "Thesis", 4),
    ("c7a1f", "Thesis", 4),
    ("c93fc", "Report", 3),
    ("c18gh", "Report", 3),
    ("c18ws", "Report", 3),
    ("c8042", "Report", 3),
    ("cefa0", "Review", 3),
    ("cba08", "Review", 3),
    ("cddb1", "Dataset", 3),
    ("cc513", "ImageObject", 3),
    ("c12cd", "Map", 3),
    ("c8a7e", "VideoObject", 3),
    ("c5ce6", "SoftwareSourceCode", 3),
    ("c6670", "Poster", 3),
];

/// A `dc:type` table: the built-in one, with a repository's own entries on top.
#[derive(Clone, Debug)]
pub struct TypeMap {
    entries: HashMap<String, (String, u8)>,
}

impl Default for TypeMap {
    fn default() -> Self {
        Self::with(&[]).expect("the built-in table is valid")
    }
}

impl TypeMap {
    /// The built-in table plus `extra` (`dc:type` value or key -> schema.org type name or URL),
    /// which wins over it. Fails on a target that is neither a type name nor an http(s) URL.
    pub fn with(extra: &[(String, String)]) -> Result<Self, String> {
        let mut entries: HashMap<String, (String, u8)> = BUILT_IN
            .iter()
            .map(|(k, v, rank)| ((*k).to_owned(), (format!("{SCHEMA_ORG}{v}"), *rank)))
            .collect();
        for (from, to) in extra {
            let k = key(from);
            if k.is_empty() {
                return Err(format!(
                    "{from:?} has no letters or digits to match dc:type by"
                ));
            }
            let target = if to.starts_with("https://") || to.starts_with("http://") {
                to.clone()
            } else if !to.is_empty() && to.bytes().all(|b| b.is_ascii_alphanumeric()) {
                format!("{SCHEMA_ORG}{to}")
            } else {
                return Err(format!(
                    "{to:?} is neither a schema.org type name (e.g. ScholarlyArticle) nor a URL"
                ));
            };
            // The repository's own entries are the most specific of all.
            entries.insert(k, (target, u8::MAX));
        }
        Ok(Self { entries })
    }

    /// The type URL for a record's `dc:type` values: the most specific match, the first of
    /// equals; `None` when no value is known.
    pub fn lookup<'a>(&self, values: impl IntoIterator<Item = &'a str>) -> Option<&str> {
        let mut best: Option<&(String, u8)> = None;
        let mut k = String::new();
        for v in values {
            key_into(v, &mut k);
            if let Some(found) = self.entries.get(&k)
                && best.is_none_or(|b| found.1 > b.1)
            {
                best = Some(found);
            }
        }
        best.map(|(url, _)| url.as_str())
    }
}

/// The lookup key of a `dc:type` value: the last segment of a URI or `info:` term, lower case,
/// letters and digits only (`info:eu-repo/semantics/doctoralThesis` -> `doctoralthesis`,
/// `Journal Article` -> `journalarticle`).
pub fn key(value: &str) -> String {
    let mut k = String::new();
    key_into(value, &mut k);
    k
}

/// [`key`] into `k`, which is cleared first: one buffer serves every value of a lookup.
fn key_into(value: &str, k: &mut String) {
    let value = value.trim().trim_end_matches('/');
    let last = value.rsplit(['/', '#']).next().unwrap_or(value);
    k.clear();
    k.extend(
        last.bytes()
            .filter(u8::is_ascii_alphanumeric)
            .map(|b| char::from(b.to_ascii_lowercase())),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vocabularies_map_to_schema_org() {
        let m = TypeMap::default();
        let t = |v: &[&str]| {
            m.lookup(v.iter().copied())
                .map(|u| u.trim_start_matches(SCHEMA_ORG).to_owned())
        };
        assert_eq!(
            t(&["info:eu-repo/semantics/doctoralThesis"]).as_deref(),
            Some("Thesis")
        );
        assert_eq!(t(&["Journal Article"]).as_deref(), Some("ScholarlyArticle"));
        assert_eq!(t(&["Dataset"]).as_deref(), Some("Dataset"));
        assert_eq!(
            t(&["http://purl.org/coar/resource_type/c_db06", "Thesis"]).as_deref(),
            Some("Thesis")
        );
        // The most specific wins, whatever the order.
        assert_eq!(
            t(&["Text", "info:eu-repo/semantics/article"]).as_deref(),
            Some("ScholarlyArticle")
        );
        assert_eq!(t(&["Text"]).as_deref(), Some("CreativeWork"));
        assert_eq!(t(&["Proefschrift"]), None);
        assert_eq!(t(&[]), None);
    }

    #[test]
    fn a_repository_table_wins_and_is_checked() {
        let m = TypeMap::with(&[
            ("Proefschrift".into(), "Thesis".into()),
            ("Text".into(), "https://w3id.org/kim/hcrt/text".into()),
        ])
        .unwrap();
        assert_eq!(
            m.lookup(["proefschrift"]),
            Some("https://schema.org/Thesis")
        );
        assert_eq!(
            m.lookup(["Text", "article"]),
            Some("https://w3id.org/kim/hcrt/text")
        );
        assert!(TypeMap::with(&[("x".into(), "not a type".into())]).is_err());
        assert!(TypeMap::with(&[("--".into(), "Thesis".into())]).is_err());
    }
}
