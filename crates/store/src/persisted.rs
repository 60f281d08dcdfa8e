//! The state document's disk format, owned by the store: the JSON the `state` table holds is
//! made of these types alone, converted to and from the domain types they mirror ([`State`],
//! the sitemap's [`Layout`], the published shards and their counts), so that a change to a
//! type another module owns changes no store on disk: it stops compiling here instead, until
//! its conversion says what the disk keeps.
//!
//! The document carries its format version ([`FORMAT`]); earlier versions wrote none, which
//! reads as format 1, the format of now. Fields are only ever added, with a default for the
//! documents written before (then the format stays). A change that older versions would read
//! wrong takes a new format number; a document of a format this version does not know is not
//! read ([`StoreError::UnknownFormat`]), and [`crate::Store::open`] starts such a store anew, as
//! it does a store whose tables are of another version.
//!
//! The store's own records of a harvest ([`Complete`], [`Run`], [`super::Checkpoint`], ...) are the
//! store's types already and are kept as they are.

use serde::{Deserialize, Serialize};

use super::{
    Complete, HeldShrink, LearnedRule, RobotsCopy, Run, SelectiveRefused, ShortList, State,
    StoreError,
};
use oai_bridge_files::counts::Drop;
use oai_bridge_files::counts::Stats;
use oai_bridge_files::published::{PublishedShard, PublishedSitemap};
use oai_bridge_files::sitemap::Layout;

/// The state document's format version, written in its `format` field.
pub(crate) const FORMAT: u32 = 1;

/// How many drop counts format 1 was first written with (the reasons up to
/// `template_invalid_url`).
const FORMAT_1_DROPS: usize = 12;

/// The format of a document without a `format` field: what versions before it wrote.
fn first_format() -> u32 {
    1
}

/// The format of state document `doc`, read without the rest: `None` when it is not JSON.
pub(crate) fn format_of(doc: &str) -> Option<u32> {
    #[derive(Deserialize)]
    struct Head {
        #[serde(default = "first_format")]
        format: u32,
    }
    serde_json::from_str::<Head>(doc).ok().map(|h| h.format)
}

/// Whether state document `doc` is of a format this version does not read ([`FORMAT`]): a newer
/// version wrote it, and the store starts anew (or a copy refuses it). A document that is no
/// JSON at all is not taken for a newer one: reading it fails instead.
pub(crate) fn of_unknown_format(doc: &str) -> bool {
    format_of(doc).is_some_and(|f| !(1..=FORMAT).contains(&f))
}

/// [`State`] on disk. The fields keep [`State`]'s names and order, which earlier versions wrote.
#[derive(Debug, Serialize, Deserialize)]
pub struct StoredState {
    /// [`FORMAT`] when written; 1 when absent.
    #[serde(default = "first_format")]
    format: u32,
    source: String,
    sets: Vec<String>,
    fields: u16,
    #[serde(default)]
    bounds: (Option<i64>, Option<i64>),
    complete: Option<Complete>,
    last_full: Option<i64>,
    run: Option<Run>,
    runs: u64,
    retry_not_before: Option<i64>,
    published_urls: Option<u64>,
    held_shrink: Option<HeldShrink>,
    #[serde(default)]
    short_list: Option<ShortList>,
    #[serde(default)]
    selective_refused: Option<SelectiveRefused>,
    #[serde(default)]
    layout: StoredLayout,
    #[serde(default)]
    sitemap: Option<StoredSitemap>,
    /// Absent in a state recorded before learning was, and left out when nothing was learned
    /// (so such a state is written as before; earlier versions ignore the field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    learned: Option<LearnedRule>,
    /// Absent in a state recorded before robots.txt copies were kept, and when none is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    robots: Vec<RobotsCopy>,
    /// Written by the versions whose changes keep the records' sets (the SQLite store's
    /// `changes.now_sets`); absent when a version before saved the state, which it does with
    /// each page, listing changes without their sets ([`keeps_change_sets`]).
    #[serde(default)]
    changes_keep_sets: bool,
}

/// Whether state document `doc` was saved by a version whose changes keep the records' sets:
/// when not, one before them ran on the store since, and the sets its changes hold may be old.
pub(crate) fn keeps_change_sets(doc: &str) -> bool {
    #[derive(Deserialize)]
    struct Mark {
        #[serde(default)]
        changes_keep_sets: bool,
    }
    serde_json::from_str::<Mark>(doc).is_ok_and(|m| m.changes_keep_sets)
}

/// [`Layout`] on disk.
#[derive(Debug, Default, Serialize, Deserialize)]
struct StoredLayout {
    /// `(first URL, shard number)` of each range.
    ranges: Vec<(String, u32)>,
}

/// [`PublishedSitemap`] on disk.
#[derive(Debug, Serialize, Deserialize)]
struct StoredSitemap {
    place: String,
    ext: String,
    scope: String,
    max_urls: usize,
    max_bytes: usize,
    shards: Vec<StoredShard>,
    stats: StoredStats,
}

/// [`PublishedShard`] on disk.
#[derive(Debug, Serialize, Deserialize)]
struct StoredShard {
    number: u32,
    len: u64,
    urls: u64,
    newest: Option<i64>,
    /// Absent in a state recorded before checksums were.
    #[serde(default)]
    crc: Option<u32>,
}

/// [`Stats`] on disk.
#[derive(Debug, Serialize, Deserialize)]
struct StoredStats {
    records_seen: u64,
    records: u64,
    deleted: u64,
    urls: u64,
    /// Indexed like [`Drop::ALL`]; one saved by a version that knew fewer reasons (they are only
    /// ever added at the end) is shorter, and reads with zeros for the reasons added since.
    drops: Vec<u64>,
}

impl From<State> for StoredState {
    fn from(state: State) -> Self {
        // Taken apart field by field: a field added to the state does not compile until it is
        // placed here.
        let State {
            source,
            sets,
            fields,
            bounds,
            complete,
            last_full,
            run,
            runs,
            retry_not_before,
            published_urls,
            held_shrink,
            short_list,
            selective_refused,
            layout,
            sitemap,
            learned,
            robots,
        } = state;
        Self {
            format: FORMAT,
            source,
            sets,
            fields,
            bounds,
            complete,
            last_full,
            run,
            runs,
            retry_not_before,
            published_urls,
            held_shrink,
            short_list,
            selective_refused,
            layout: layout.into(),
            sitemap: sitemap.map(Into::into),
            learned,
            robots,
            changes_keep_sets: true,
        }
    }
}

impl TryFrom<StoredState> for State {
    type Error = StoreError;

    fn try_from(stored: StoredState) -> Result<Self, StoreError> {
        let StoredState {
            format,
            source,
            sets,
            fields,
            bounds,
            complete,
            last_full,
            run,
            runs,
            retry_not_before,
            published_urls,
            held_shrink,
            short_list,
            selective_refused,
            layout,
            sitemap,
            learned,
            robots,
            // The SQLite store's to read, at its opening.
            changes_keep_sets: _,
        } = stored;
        if !(1..=FORMAT).contains(&format) {
            return Err(StoreError::UnknownFormat(format));
        }
        Ok(Self {
            source,
            sets,
            fields,
            bounds,
            complete,
            last_full,
            run,
            runs,
            retry_not_before,
            published_urls,
            held_shrink,
            short_list,
            selective_refused,
            layout: layout.into(),
            sitemap: sitemap.map(TryInto::try_into).transpose()?,
            learned,
            robots,
        })
    }
}

impl From<Layout> for StoredLayout {
    fn from(layout: Layout) -> Self {
        let Layout { ranges } = layout;
        Self { ranges }
    }
}

impl From<StoredLayout> for Layout {
    fn from(stored: StoredLayout) -> Self {
        let StoredLayout { ranges } = stored;
        Self { ranges }
    }
}

impl From<PublishedSitemap> for StoredSitemap {
    fn from(sitemap: PublishedSitemap) -> Self {
        let PublishedSitemap {
            place,
            ext,
            scope,
            max_urls,
            max_bytes,
            shards,
            stats,
        } = sitemap;
        Self {
            place,
            ext,
            scope,
            max_urls,
            max_bytes,
            shards: shards.into_iter().map(Into::into).collect(),
            stats: stats.into(),
        }
    }
}

impl TryFrom<StoredSitemap> for PublishedSitemap {
    type Error = StoreError;

    fn try_from(stored: StoredSitemap) -> Result<Self, StoreError> {
        let StoredSitemap {
            place,
            ext,
            scope,
            max_urls,
            max_bytes,
            shards,
            stats,
        } = stored;
        Ok(Self {
            place,
            ext,
            scope,
            max_urls,
            max_bytes,
            shards: shards.into_iter().map(Into::into).collect(),
            stats: stats.try_into()?,
        })
    }
}

impl From<PublishedShard> for StoredShard {
    fn from(shard: PublishedShard) -> Self {
        let PublishedShard {
            number,
            len,
            urls,
            newest,
            crc,
        } = shard;
        Self {
            number,
            len,
            urls,
            newest,
            crc,
        }
    }
}

impl From<StoredShard> for PublishedShard {
    fn from(stored: StoredShard) -> Self {
        let StoredShard {
            number,
            len,
            urls,
            newest,
            crc,
        } = stored;
        Self {
            number,
            len,
            urls,
            newest,
            crc,
        }
    }
}

impl From<Stats> for StoredStats {
    fn from(stats: Stats) -> Self {
        let Stats {
            records_seen,
            records,
            deleted,
            urls,
            drops,
        } = stats;
        // Trailing zeros left out: a reason added since a version (robots_disallowed) that
        // counted nothing keeps the document as that version wrote it, and readable by it.
        let mut drops = drops.to_vec();
        while drops.len() > FORMAT_1_DROPS && drops.last() == Some(&0) {
            drops.pop();
        }
        Self {
            records_seen,
            records,
            deleted,
            urls,
            drops,
        }
    }
}

impl TryFrom<StoredStats> for Stats {
    type Error = StoreError;

    fn try_from(stored: StoredStats) -> Result<Self, StoreError> {
        let StoredStats {
            records_seen,
            records,
            deleted,
            urls,
            drops: saved,
        } = stored;
        let mut drops = [0; Drop::ALL.len()];
        drops
            .get_mut(..saved.len())
            .ok_or(StoreError::TooManyDrops(saved.len()))?
            .copy_from_slice(&saved);
        Ok(Self {
            records_seen,
            records,
            deleted,
            urls,
            drops,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats_of(doc: &str) -> Result<Stats, String> {
        let stored: StoredStats = serde_json::from_str(doc).map_err(|e| e.to_string())?;
        Stats::try_from(stored).map_err(|e| e.to_string())
    }

    #[test]
    fn counts_saved_with_fewer_drop_reasons_are_read_with_zeros_for_the_new_ones() {
        let saved =
            r#"{"records_seen":3,"records":3,"deleted":0,"urls":2,"drops":[1,2,3,4,5,6,7,8]}"#;
        let stats = stats_of(saved).unwrap();
        assert_eq!(stats.drops[..8], [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(stats.dropped(Drop::EmptyMetadata), 0);
        let again = stats_of(&serde_json::to_string(&StoredStats::from(stats.clone())).unwrap());
        assert_eq!(again.unwrap(), stats);
        let too_many = saved.replace("8]", &format!("8{}]", ",0".repeat(Drop::ALL.len())));
        let refused = stats_of(&too_many).unwrap_err();
        assert!(refused.contains("drop counts"), "{refused}");
    }

    #[test]
    fn the_format_is_read_from_the_head_alone() {
        assert_eq!(format_of(r#"{"source":"x","format":7}"#), Some(7));
        assert_eq!(format_of(r#"{"source":"x"}"#), Some(1));
        assert_eq!(format_of("{"), None);
    }
}
