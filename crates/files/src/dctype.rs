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

// foldhash rather than std's SipHash: the tables, which the configuration fixes, are looked up
// for each new dc:type value ([`Memo`]), where SipHash's resistance to chosen keys buys nothing
// and its hashing showed in the profiles' time.
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
#[derive(Clone)]
pub struct TypeMap {
    /// Key -> its entry in `targets`.
    ids: HashMap<String, u32>,
    /// Type URL and specificity.
    targets: Vec<(String, u8)>,
}

/// In key order, not the hash map's: the same table prints the same in every process (a
/// generation records its settings by their `Debug` text, the package's `pipeline::Job::settings_key`).
impl std::fmt::Debug for TypeMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sorted: std::collections::BTreeMap<&str, &(String, u8)> = (self.ids.iter())
            .map(|(k, &i)| (k.as_str(), &self.targets[i as usize]))
            .collect();
        f.debug_map().entries(sorted).finish()
    }
}

impl Default for TypeMap {
    fn default() -> Self {
        Self::with(&[]).expect("the built-in table is valid")
    }
}

impl TypeMap {
    /// The built-in table plus `extra` (`dc:type` value or key -> schema.org type name or URL),
    /// which wins over it.
    ///
    /// # Errors
    ///
    /// A sentence naming the entry: a value with no letters or digits to match by, or a target
    /// that is neither a schema.org type name nor an http(s) URL.
    pub fn with(extra: &[(String, String)]) -> Result<Self, String> {
        let mut entries: std::collections::BTreeMap<String, (String, u8)> = BUILT_IN
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
        let mut map = Self {
            ids: HashMap::default(),
            targets: Vec::with_capacity(entries.len()),
        };
        for (k, target) in entries {
            map.ids.insert(k, map.targets.len() as u32);
            map.targets.push(target);
        }
        Ok(map)
    }

    /// The type URL for a record's `dc:type` values: the most specific match, the first of
    /// equals; `None` when no value is known.
    pub fn lookup<'a>(&self, values: impl IntoIterator<Item = &'a str>) -> Option<&str> {
        let mut k = String::new();
        let mut best = None;
        for v in values {
            self.better(&mut best, self.find(v, &mut k));
        }
        best.map(|id| self.targets[id as usize].0.as_str())
    }

    /// The entry of a value (its key made in `k`).
    fn find(&self, value: &str, k: &mut String) -> Option<u32> {
        key_into(value, k);
        self.ids.get(k).copied()
    }

    /// Makes `best` the entry `found` when it is more specific (the first of equals stays).
    fn better(&self, best: &mut Option<u32>, found: Option<u32>) {
        let rank = |id: u32| self.targets[id as usize].1;
        if let Some(found) = found
            && best.is_none_or(|b| rank(found) > rank(b))
        {
            *best = Some(found);
        }
    }
}

/// Most values a [`Memo`] remembers: a repository uses a handful; free text in `dc:type` could
/// make it a table of its own.
const MEMO_MAX: usize = 4096;

/// Looks up records' `dc:type` values in up to two tables at once (the Signmap's and OCX's),
/// remembering each value's entries: the values a repository repeats on every record are
/// reduced to their keys once instead of once per record and table, which showed in the
/// profiles' time. Gives what [`TypeMap::lookup`] gives; one memo serves one pair of tables.
#[derive(Debug)]
pub struct Memo {
    seen: crate::memo::Memo<[Option<u32>; 2]>,
    key: String,
}

impl Default for Memo {
    fn default() -> Self {
        Self {
            seen: crate::memo::Memo::new(MEMO_MAX),
            key: String::new(),
        }
    }
}

impl Memo {
    /// The type URL each of `tables` gives `values` (`None` for a table not given).
    pub fn lookup<'t, 'a>(
        &mut self,
        tables: [Option<&'t TypeMap>; 2],
        values: impl IntoIterator<Item = &'a str>,
    ) -> [Option<&'t str>; 2] {
        let mut best = [None, None];
        for v in values {
            let key = &mut self.key;
            let found = (self.seen).get(v, || tables.map(|t| t.and_then(|t| t.find(v, key))));
            for ((table, best), found) in tables.iter().zip(&mut best).zip(found) {
                if let Some(t) = table {
                    t.better(best, found);
                }
            }
        }
        [0, 1].map(|i| {
            let (table, best) = (tables[i]?, best[i]?);
            Some(table.targets[best as usize].0.as_str())
        })
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

    /// The memo answers as each table does, for values seen before and not, past its size too.
    #[test]
    fn the_memo_answers_as_the_tables_do() {
        let ocx =
            TypeMap::with(&[("Lesplan".into(), "http://oerschema.org/Lesson".into())]).unwrap();
        let built_in = TypeMap::default();
        let records: Vec<Vec<String>> = [
            &["Text", "info:eu-repo/semantics/article"][..],
            &["Lesplan"],
            &["Proefschrift", "Text"],
            &[
                "http://purl.org/coar/resource_type/c_db06",
                "Thesis",
                "Lesplan",
            ],
            &[],
            &["info:eu-repo/semantics/article", "Text"],
        ]
        .iter()
        .map(|r| r.iter().map(|v| v.to_string()).collect())
        .chain((0..MEMO_MAX + 10).map(|i| vec![format!("free text {i}"), "Text".into()]))
        .collect();
        for tables in [
            [Some(&built_in), Some(&ocx)],
            [None, Some(&ocx)],
            [Some(&built_in), None],
        ] {
            let mut memo = Memo::default();
            for _ in 0..2 {
                for values in &records {
                    let values = || values.iter().map(String::as_str);
                    let want = tables.map(|t| t.and_then(|t| t.lookup(values())));
                    assert_eq!(
                        memo.lookup(tables, values()),
                        want,
                        "{:?}",
                        values().collect::<Vec<_>>()
                    );
                }
            }
            assert_eq!(memo.seen.remembered(), MEMO_MAX);
        }
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
