//! What a run published, in the one form its presenters read: `export --json`, the gateway's
//! generation manifest (from which its status page and metrics are made). `export`'s text
//! summary reads `export::ExportSummary`, made from the same outcome, as it says more (the
//! quirks tolerated, the store's counts).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::profiles::registry::ProfileSummary;
use crate::profiles::report::ProfileCounts;

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
    /// What each profile beside the sitemap published (Signmap, OCX, CDIF, each DiWoo
    /// category), in that order; a manifest holds them as a field each (`signmap`, `ocx`,
    /// `cdif`, `diwoo`).
    #[serde(flatten, with = "crate::profiles::registry::stored")]
    pub profiles: Vec<ProfileSummary>,
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
            profiles: built.profiles.clone(),
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

impl Summary {
    /// Each profile's counts besides the sitemap's, from which the metrics are set: the
    /// Signmap, OCX, CDIF's documents and lists (the same documents), each DiWoo category.
    pub(crate) fn profile_counts(&self) -> Vec<ProfileCounts> {
        (self.profiles.iter())
            .flat_map(|p| p.report().counts())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profiles::Profile;

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
            profiles: profiles(),
            ..Summary::default()
        };
        let counts = |profile, entries, drops: &[(&'static str, u64)]| ProfileCounts {
            profile,
            entries,
            drops: drops.to_vec(),
        };
        assert_eq!(
            summary.profile_counts(),
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
        assert!(Summary::default().profile_counts().is_empty());
    }

    /// A Signmap, CDIF's lists and a DiWoo category, as a generation's summary holds them.
    fn profiles() -> Vec<ProfileSummary> {
        use crate::profiles::cdif::CdifSummary;
        use crate::profiles::signmap::SignmapSummary;
        vec![
            ProfileSummary::new(SignmapSummary {
                index_url: "https://p.example/signmap.xml".into(),
                published: 7,
                no_landing_page: 2,
                duplicate: 1,
            }),
            ProfileSummary::new(CdifSummary {
                index_url: None,
                lists_index_url: Some("https://p.example/cdif-list-sitemap.xml".into()),
                lists: 1,
                documents: 7,
                no_landing_page: 2,
            }),
            ProfileSummary::new(crate::pipeline::DiwooStats {
                category: 14,
                urls: 3,
                requires_https: 4,
                requires_lastmod: 0,
            }),
        ]
    }

    /// The profiles are held as a list, but a manifest keeps a field each, as manifests
    /// written before the list did: one of those loads into the same list, and the list is
    /// written back in that form.
    #[test]
    fn a_manifest_holds_a_field_per_profile() {
        let written_before = r#"{"source":"s","pages":1,"records_seen":7,"records":7,"deleted":0,
            "urls":7,"drops":{},"shards":1,"build_ms":5,"index_url":"u",
            "signmap":{"index_url":"https://p.example/signmap.xml","published":7,
                       "no_landing_page":2,"duplicate":1},
            "ocx":null,
            "cdif":{"index_url":null,"lists_index_url":"https://p.example/cdif-list-sitemap.xml",
                    "lists":1,"documents":7,"no_landing_page":2},
            "diwoo":[{"category":14,"urls":3,"requires_https":4,"requires_lastmod":0}],
            "harvest":"full"}"#;
        let summary: Summary = serde_json::from_str(written_before).unwrap();
        assert_eq!(summary.profiles, profiles());
        assert_eq!(summary.harvest, "full");

        let json: serde_json::Value = serde_json::to_value(&summary).unwrap();
        let before: serde_json::Value = serde_json::from_str(written_before).unwrap();
        for field in ["signmap", "ocx", "cdif", "diwoo"] {
            assert_eq!(json[field], before[field], "{field}");
        }
        assert_eq!(serde_json::from_value::<Summary>(json).unwrap(), summary);

        let none: Summary = serde_json::from_str(
            r#"{"source":"s","pages":0,"records_seen":0,"records":0,"deleted":0,"urls":0,
               "drops":{},"shards":0,"build_ms":0,"index_url":"u"}"#,
        )
        .unwrap();
        assert!(none.profiles.is_empty());
    }
}
