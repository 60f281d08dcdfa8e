//! What a run published, in the one form its presenters read: `export --json`, the gateway's
//! generation manifest (from which its status page and metrics are made). `export`'s text
//! summary reads `export::ExportSummary`, made from the same outcome, as it says more (the
//! quirks tolerated, the store's counts).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::profiles::Profile;

/// What a generation's harvest found, for the status page and metrics.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Summary {
    /// The upstream (baseURL or file).
    pub source: String,
    /// `ListRecords` pages read.
    pub pages: u64,
    /// Record occurrences read.
    pub records_seen: u64,
    /// Distinct records (through the store: its live and deleted records).
    pub records: u64,
    /// Distinct records whose newest version is deleted (through the store: the store's).
    pub deleted: u64,
    /// URLs published.
    pub urls: u64,
    /// Identifiers not published, by reason (`Drop::as_str`).
    pub drops: BTreeMap<String, u64>,
    /// Shards in the index.
    pub shards: u64,
    /// Wall time of the harvest and rendering, in milliseconds.
    pub build_ms: u64,
    /// Absolute URL of the sitemap index.
    pub index_url: String,
    /// The Signmap, when the repository has one.
    #[serde(default)]
    pub signmap: Option<SignmapSummary>,
    /// The OCX sitemap, when the repository has one.
    #[serde(default)]
    pub ocx: Option<OcxSummary>,
    /// The CDIF documents, when the repository has them.
    #[serde(default)]
    pub cdif: Option<CdifSummary>,
    /// The DiWoo categories, when the repository maps sets to them.
    #[serde(default, with = "stored_diwoo")]
    pub diwoo: Vec<crate::pipeline::DiwooStats>,
    /// The harvest that made it: `full`, or `incremental from <date>`, and the records it
    /// received.
    #[serde(default)]
    pub harvest: String,
    /// Why that harvest was a full one.
    #[serde(default)]
    pub full_reason: Option<crate::incremental::FullReason>,
    /// The settings it was made under ([`crate::pipeline::Job::settings_key`]); empty in a
    /// generation from before it was recorded.
    #[serde(default)]
    pub settings: String,
    /// The platform in effect and why (`dspace (detected: ...)`); empty in a generation from
    /// before platforms.
    #[serde(default)]
    pub platform: String,
    /// Where the records' landing pages came from, in words.
    #[serde(default)]
    pub landing_rule: String,
    /// Whether `deleted` counts the deleted records: false in a generation the gateway made
    /// before it counted its store's (it said 0 whatever the store held, and `records` was
    /// the live records alone).
    #[serde(default)]
    pub deleted_counted: bool,
    /// A few examples of what was not published, by reason (up to 3 each, the first met): the
    /// record and the value. Empty in a generation from before they were kept.
    #[serde(default)]
    pub drop_examples: BTreeMap<String, Vec<crate::inventory::DropSample>>,
    /// Where the examples come from when not from this generation's own harvest: a refresh
    /// that patched the sitemap read only the changed records, so the gateway keeps those of
    /// the last whole render, made at this time (Unix seconds). `None`: from this one.
    #[serde(default)]
    pub drop_examples_from: Option<u64>,
    /// The scope's prefixes (where the landing pages may be); empty in a generation from before
    /// it was recorded.
    #[serde(default)]
    pub scope: Vec<String>,
    /// The most bytes the harvest's temporary files took on disk at once: sorted runs when its
    /// inventory outgrew its memory budget, the landing-page profiles' record occurrences (left
    /// out when there were none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub spill_bytes: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Summary {
    /// The summary of the generation `built` from `source` by the harvest `run` (none: without
    /// a store), in `elapsed`, under `settings` ([`crate::pipeline::Job::settings_key`]).
    pub fn new(
        source: &oai_pmh::Source,
        built: &crate::pipeline::Built,
        run: Option<&crate::incremental::RunSummary>,
        elapsed: std::time::Duration,
        settings: &str,
    ) -> Self {
        let stats = &built.stats;
        Summary {
            source: source.to_string(),
            pages: built.report.pages,
            records_seen: stats.records_seen,
            records: stats.records,
            deleted: stats.deleted,
            urls: stats.urls,
            drops: crate::classify::Drop::ALL
                .iter()
                .filter(|r| stats.dropped(**r) > 0)
                .map(|r| (r.as_str().to_owned(), stats.dropped(*r)))
                .collect(),
            shards: built.shards.len() as u64,
            build_ms: elapsed.as_millis() as u64,
            index_url: built.index_url.to_string(),
            signmap: built.signmap.as_ref().map(|(s, url)| SignmapSummary {
                index_url: url.to_string(),
                published: s.published,
                no_landing_page: s.no_landing_page,
                duplicate: s.duplicate,
            }),
            ocx: built.ocx.as_ref().map(|(s, url)| OcxSummary {
                index_url: url.to_string(),
                published: s.ocx_published,
                no_type: s.ocx_no_type,
                no_landing_page: s.no_landing_page,
            }),
            cdif: built
                .landing
                .as_ref()
                .filter(|_| built.cdif_index.is_some() || built.cdif_lists.is_some())
                .map(|s| CdifSummary {
                    index_url: built.cdif_index.as_ref().map(url::Url::to_string),
                    lists_index_url: built.cdif_lists.as_ref().map(|(url, _)| url.to_string()),
                    lists: built.cdif_lists.as_ref().map_or(0, |&(_, n)| n as u64),
                    documents: s.published,
                    no_landing_page: s.no_landing_page,
                }),
            diwoo: built.diwoo.clone(),
            harvest: match run {
                Some(run) => format!(
                    "{}: {} records received, {} of them deleted",
                    run.kind_text(),
                    run.received,
                    run.received_deleted
                ),
                None => format!(
                    "full, without a store: {} records received, {} distinct records deleted",
                    stats.records_seen, stats.deleted
                ),
            },
            full_reason: run.and_then(|run| run.full_reason.clone()),
            settings: settings.to_owned(),
            platform: built.platform.detected().to_string(),
            landing_rule: built.platform.rule_text(),
            deleted_counted: true,
            drop_examples: built
                .samples
                .as_ref()
                .map(crate::inventory::DropSamples::by_name)
                .unwrap_or_default(),
            drop_examples_from: None,
            scope: built.platform.scope().prefixes(),
            spill_bytes: built.spill_bytes,
        }
    }

    /// Whether the scope is outside the directory of `public_url`, so that search engines take
    /// the sitemaps only by cross-submission (a `Sitemap:` line in the robots.txt of the
    /// repository's host): [`crate::scope::Scope::is_under`], the test `export`'s note makes.
    /// `None` when the scope is not recorded.
    pub(crate) fn needs_cross_submission(&self, public_url: &url::Url) -> Option<bool> {
        let prefixes: Vec<url::Url> = (self.scope.iter())
            .map(|p| url::Url::parse(p))
            .collect::<Result<_, _>>()
            .ok()?;
        let scope = crate::scope::Scope::from_prefixes(&prefixes)?;
        Some(!scope.is_under(public_url))
    }

    /// Takes the examples of `previous`, a generation made at `made`, for a summary of a
    /// patched sitemap, which has none of its own: those of the reasons still counted, dated
    /// by the whole render that collected them.
    pub(crate) fn keep_examples(&mut self, previous: &Summary, made: std::time::SystemTime) {
        if !self.drop_examples.is_empty() || previous.drop_examples.is_empty() {
            return;
        }
        self.drop_examples = (previous.drop_examples.iter())
            .filter(|(reason, _)| self.drops.contains_key(*reason))
            .map(|(reason, examples)| (reason.clone(), examples.clone()))
            .collect();
        self.drop_examples_from = previous.drop_examples_from.or_else(|| {
            made.duration_since(std::time::SystemTime::UNIX_EPOCH)
                .ok()
                .map(|d| d.as_secs())
        });
    }
}

/// What one profile of a generation published: its entries, and what it did not publish, by
/// reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ProfileCounts {
    /// The profile.
    pub(crate) profile: Profile,
    /// Entries published.
    pub(crate) entries: u64,
    /// What it did not publish, by reason.
    pub(crate) drops: Vec<(&'static str, u64)>,
}

impl Summary {
    /// Each profile's counts besides the sitemap's: the Signmap, CDIF's documents and lists
    /// (the same documents), OCX, each DiWoo category. The metrics read them from here.
    pub(crate) fn profiles(&self) -> Vec<ProfileCounts> {
        let counts = |profile, entries, drops: &[(&'static str, u64)]| ProfileCounts {
            profile,
            entries,
            drops: drops.to_vec(),
        };
        let mut all = Vec::new();
        if let Some(s) = &self.signmap {
            let drops = [
                ("no_landing_page", s.no_landing_page),
                ("duplicate", s.duplicate),
            ];
            all.push(counts(Profile::Signmap, s.published, &drops));
        }
        if let Some(c) = &self.cdif {
            let drops = [("no_landing_page", c.no_landing_page)];
            if c.index_url.is_some() {
                all.push(counts(Profile::Cdif, c.documents, &drops));
            }
            if c.lists_index_url.is_some() {
                all.push(counts(Profile::CdifList, c.documents, &drops));
            }
        }
        if let Some(o) = &self.ocx {
            let drops = [
                ("ocx_no_type", o.no_type),
                ("no_landing_page", o.no_landing_page),
            ];
            all.push(counts(Profile::Ocx, o.published, &drops));
        }
        for d in &self.diwoo {
            let drops = [
                ("diwoo_requires_https", d.requires_https),
                ("diwoo_requires_lastmod", d.requires_lastmod),
            ];
            all.push(counts(Profile::Diwoo(d.category), d.urls, &drops));
        }
        all
    }
}

/// What a generation's CDIF documents are.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct CdifSummary {
    /// Absolute URL of the CDIF sitemap index, when the documents are published one by one.
    pub index_url: Option<String>,
    /// Absolute URL of the index of the CDIF lists' sitemap, when there are lists.
    #[serde(default)]
    pub lists_index_url: Option<String>,
    /// Metadata lists (`ItemList`s) published.
    #[serde(default)]
    pub lists: u64,
    /// Documents published.
    pub documents: u64,
    /// Live records without a landing page inside the scope (no document).
    pub no_landing_page: u64,
}

/// What a generation's OCX sitemap holds.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct OcxSummary {
    /// Absolute URL of the OCX index.
    pub index_url: String,
    /// Entries published.
    pub published: u64,
    /// Records with a landing page whose type maps to no OCX type.
    pub no_type: u64,
    /// Live records without a landing page inside the scope.
    pub no_landing_page: u64,
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

/// [`Summary::diwoo`] in a manifest, through the manifest's own type: a change to the pipeline's
/// [`crate::pipeline::DiwooStats`] changes no manifest on disk, it stops compiling here instead.
mod stored_diwoo {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::pipeline::DiwooStats;

    /// One DiWoo category's counts, as manifests hold them.
    #[derive(Serialize, Deserialize)]
    struct StoredDiwoo {
        category: u8,
        urls: u64,
        requires_https: u64,
        requires_lastmod: u64,
    }

    pub(super) fn serialize<S: Serializer>(diwoo: &[DiwooStats], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(diwoo.iter().map(|d| {
            let DiwooStats {
                category,
                urls,
                requires_https,
                requires_lastmod,
            } = *d;
            StoredDiwoo {
                category,
                urls,
                requires_https,
                requires_lastmod,
            }
        }))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<DiwooStats>, D::Error> {
        let stored = Vec::<StoredDiwoo>::deserialize(d)?;
        Ok(stored
            .into_iter()
            .map(|s| DiwooStats {
                category: s.category,
                urls: s.urls,
                requires_https: s.requires_https,
                requires_lastmod: s.requires_lastmod,
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A manifest written before the examples, the scope and the counted deleted records
    /// loads, without them; one written now keeps them.
    #[test]
    fn manifests_old_and_new_load() {
        let old: Summary = serde_json::from_str(
            r#"{"source":"s","pages":1,"records_seen":307,"records":307,"deleted":0,"urls":456,
               "drops":{"persistent_id":216},"shards":1,"build_ms":5,"index_url":"u"}"#,
        )
        .unwrap();
        assert!(!old.deleted_counted);
        assert!(old.drop_examples.is_empty() && old.scope.is_empty());
        assert_eq!(old.drop_examples_from, None);
        let public = url::Url::parse("https://maps.example/r/").unwrap();
        assert_eq!(old.needs_cross_submission(&public), None);

        let example = crate::inventory::DropSample {
            record: Some("oai:h:1".into()),
            value: Some("doi:10.1234/a".into()),
        };
        let new = Summary {
            deleted_counted: true,
            drop_examples: [("persistent_id".to_owned(), vec![example])].into(),
            scope: vec!["https://repo.example/".into()],
            ..old
        };
        let json = serde_json::to_string(&new).unwrap();
        assert!(json.contains(r#""persistent_id":[{"record":"oai:h:1","value":"doi:10.1234/a"}]"#));
        assert_eq!(serde_json::from_str::<Summary>(&json).unwrap(), new);
    }

    /// Issue 22: cross-submission is needed exactly when export's note says so: when the scope
    /// is not under the public URL's directory.
    #[test]
    fn cross_submission_when_the_scope_is_not_under_the_public_url() {
        let summary = |scope: &[&str]| Summary {
            scope: scope.iter().map(|s| s.to_string()).collect(),
            ..Summary::default()
        };
        let url = |u: &str| url::Url::parse(u).unwrap();
        let repo = summary(&["https://repo.example/"]);
        assert_eq!(
            repo.needs_cross_submission(&url("https://maps.example/r/")),
            Some(true)
        );
        assert_eq!(
            repo.needs_cross_submission(&url("https://repo.example/")),
            Some(false)
        );
        assert_eq!(
            summary(&["https://repo.example/items/"])
                .needs_cross_submission(&url("https://repo.example/sitemaps/")),
            Some(true)
        );
        assert_eq!(
            summary(&["https://repo.example/items/", "https://repo.example/docs/"])
                .needs_cross_submission(&url("https://repo.example/")),
            Some(false)
        );
    }

    /// A patched sitemap's summary takes the examples of the generation before, of the reasons
    /// still counted, dated by the whole render that made them; a later patch keeps that date.
    #[test]
    fn a_patch_keeps_the_examples_of_the_last_whole_render() {
        let example = |r: &str| crate::inventory::DropSample {
            record: Some(r.into()),
            value: None,
        };
        let whole = Summary {
            drops: [("deleted".to_owned(), 2), ("no_url".to_owned(), 1)].into(),
            drop_examples: [
                ("deleted".to_owned(), vec![example("a"), example("b")]),
                ("no_url".to_owned(), vec![example("c")]),
            ]
            .into(),
            ..Summary::default()
        };
        let made = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000);
        let mut patched = Summary {
            drops: [("deleted".to_owned(), 3)].into(),
            ..Summary::default()
        };
        patched.keep_examples(&whole, made);
        assert_eq!(
            patched.drop_examples,
            [("deleted".to_owned(), vec![example("a"), example("b")])].into()
        );
        assert_eq!(patched.drop_examples_from, Some(1_000));
        let mut again = Summary {
            drops: patched.drops.clone(),
            ..Summary::default()
        };
        again.keep_examples(&patched, made + std::time::Duration::from_secs(60));
        assert_eq!(again.drop_examples_from, Some(1_000));
        assert_eq!(again.drop_examples, patched.drop_examples);
    }

    /// Each profile of a generation is counted once, with its own reasons; CDIF's two forms
    /// count the same documents.
    #[test]
    fn each_profile_is_counted_with_its_reasons() {
        let summary = Summary {
            signmap: Some(SignmapSummary {
                index_url: "https://p.example/signmap.xml".into(),
                published: 7,
                no_landing_page: 2,
                duplicate: 1,
            }),
            cdif: Some(CdifSummary {
                index_url: None,
                lists_index_url: Some("https://p.example/cdif-list-sitemap.xml".into()),
                lists: 1,
                documents: 7,
                no_landing_page: 2,
            }),
            diwoo: vec![crate::pipeline::DiwooStats {
                category: 14,
                urls: 3,
                requires_https: 4,
                requires_lastmod: 0,
            }],
            ..Summary::default()
        };
        let counts = |profile, entries, drops: &[(&'static str, u64)]| ProfileCounts {
            profile,
            entries,
            drops: drops.to_vec(),
        };
        assert_eq!(
            summary.profiles(),
            [
                counts(
                    Profile::Signmap,
                    7,
                    &[("no_landing_page", 2), ("duplicate", 1)]
                ),
                counts(Profile::CdifList, 7, &[("no_landing_page", 2)]),
                counts(
                    Profile::Diwoo(14),
                    3,
                    &[("diwoo_requires_https", 4), ("diwoo_requires_lastmod", 0)]
                ),
            ]
        );
        assert!(Summary::default().profiles().is_empty());
    }
}
