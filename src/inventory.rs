//! The harvested URL inventory: each record's publishable URLs, kept compactly until the harvest
//! ends, then resolved into sitemap entries: the newest version of each record wins (OAI-38),
//! deleted records publish nothing, and each URL is listed once (SM-16), in sorted order so the
//! same records always give the same files.
//!
//! Strings live in one arena and records are 32-byte entries, so a million records cost about
//! as much memory as their URL text; nothing else of a record is kept. Past its memory budget
//! the inventory writes what it holds to disk as sorted runs and merges them at the end
//! ([`spill`]), so a harvest of any size resolves in the same memory, into the same entries.

mod spill;

use std::borrow::Cow;
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};

use oai_pmh::{Datestamp, Record};

use crate::classify::{self, Class, Drop};
use crate::error::Error;
use crate::platform::Landing;
use crate::scope::Scope;
use crate::spill::{Budget, Run, Share};
use oai_bridge_files::FilesError;

/// Most examples [`DropSamples`] keeps of each reason.
pub(crate) const SAMPLES_PER_REASON: usize = 3;

/// Longest value an example keeps, in bytes (a `too_long` URL has more than 2,047).
const SAMPLE_VALUE_BYTES: usize = 160;

/// One example of something not published: the record it came from (none for a URL published
/// once for several records, `duplicate`) and the value itself (none for a reason about a
/// whole record: `deleted`, `no_url`, `empty_metadata`; none too when a platform's landing rule
/// classified the values, which it does not keep).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DropSample {
    /// The record's OAI identifier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<String>,
    /// The `dc:identifier` value (or URL), cut at 160 bytes with `…`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// A few examples of what was not published, per reason: the first [`SAMPLES_PER_REASON`] met
/// in the harvest (a version a newer one replaced included), so memory stays fixed however
/// large the repository.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DropSamples {
    by_reason: [Vec<DropSample>; Drop::ALL.len()],
}

impl DropSamples {
    /// Whether another example of `reason` is kept: ask before copying one.
    pub(crate) fn wants(&self, reason: Drop) -> bool {
        self.by_reason[index(reason)].len() < SAMPLES_PER_REASON
    }

    /// Keeps an example of `reason`, unless there are enough.
    pub(crate) fn note(&mut self, reason: Drop, record: Option<&str>, value: Option<&str>) {
        if !self.wants(reason) {
            return;
        }
        let value = value.map(|v| {
            let v = v.trim();
            if v.len() <= SAMPLE_VALUE_BYTES {
                v.to_owned()
            } else {
                let end = (0..=SAMPLE_VALUE_BYTES)
                    .rev()
                    .find(|&i| v.is_char_boundary(i))
                    .unwrap_or(0);
                format!("{}…", &v[..end])
            }
        });
        self.by_reason[index(reason)].push(DropSample {
            record: record.map(str::to_owned),
            value,
        });
    }

    /// Forgets the examples of `reason`.
    pub(crate) fn forget(&mut self, reason: Drop) {
        self.by_reason[index(reason)].clear();
    }

    /// The examples of `reason`.
    pub fn of(&self, reason: Drop) -> &[DropSample] {
        &self.by_reason[index(reason)]
    }

    /// The examples by reason name ([`Drop::as_str`]), the reasons without any left out: as a
    /// summary keeps them.
    pub fn by_name(&self) -> std::collections::BTreeMap<String, Vec<DropSample>> {
        (Drop::ALL.iter())
            .filter(|r| !self.of(**r).is_empty())
            .map(|r| (r.as_str().to_owned(), self.of(*r).to_vec()))
            .collect()
    }
}

// The counts moved to the files crate with the published sitemap that holds them; named here
// for the callers of before.
pub(crate) use oai_bridge_files::counts::Stats;
// Which occurrences lost to a newer version: the files crate's, which resolves the profiles'
// versions with it.
pub(crate) use oai_bridge_files::counts::Superseded;

/// What one live record adds to the counts of an inventory that holds it alone among records
/// publishing other URLs, and its publishable URLs in order, a URL it lists twice twice (a
/// whole render counts each listing as a claim): the same classification and caps as
/// [`Inventory::add`], so that a sitemap patched record by record ([`crate::patch`]) counts as
/// a whole render would.
pub(crate) fn contribution(record: &Record, landing: &Landing) -> (Vec<String>, Stats) {
    let mut stats = Stats {
        records_seen: 1,
        records: 1,
        ..Stats::default()
    };
    let mut urls: Vec<String> = Vec::new();
    let mut drops = [0u8; IDENTIFIER_DROPS];
    let mut classes = crate::platform::Classes::new();
    let values: Vec<Result<Cow<'_, str>, Drop>> = if landing.is_generic() {
        record
            .dc_identifiers
            .iter()
            .map(|value| classify::publishable(value, landing.scope()))
            .collect()
    } else {
        landing.classes(record, &mut classes);
        classes
            .iter()
            .map(|c| c.publishable().map(Cow::Borrowed))
            .collect()
    };
    for value in values {
        match value {
            Ok(url) => {
                if urls.len() == usize::from(u16::MAX) {
                    break;
                }
                urls.push(url.into_owned());
            }
            Err(reason) => {
                if let Some(i) = identifier_slot(reason) {
                    drops[i] = drops[i].saturating_add(1);
                }
            }
        }
    }
    for (reason, n) in Drop::PER_IDENTIFIER.iter().zip(drops) {
        stats.drops[index(*reason)] = u64::from(n);
    }
    if urls.is_empty() {
        stats.drop(Drop::NoUrl);
    }
    urls.sort_unstable();
    let repeats = urls.windows(2).filter(|w| w[0] == w[1]).count();
    stats.drops[index(Drop::Duplicate)] = repeats as u64;
    stats.urls = (urls.len() - repeats) as u64;
    (urls, stats)
}

pub(crate) fn index(reason: Drop) -> usize {
    reason.index()
}

/// Where an entry counts `reason`, if it applies to single values ([`Drop::PER_IDENTIFIER`]).
fn identifier_slot(reason: Drop) -> Option<usize> {
    Drop::PER_IDENTIFIER.iter().position(|r| *r == reason)
}

/// One record occurrence. The datestamp is packed (`secs * 2 + day flag`, `i64::MIN` for none).
#[derive(Clone, Copy, Debug)]
struct Entry {
    id_hash: u64,
    datestamp: i64,
    url_start: u32,
    url_count: u16,
    deleted: bool,
    /// The groups (DiWoo categories) this occurrence is in, a bit each ([`Inventory::add`]).
    groups: u32,
    /// Values not published, by reason ([`Drop::PER_IDENTIFIER`]), counted only if this
    /// version wins; saturating, as no real record has 255 of one kind.
    drops: [u8; IDENTIFIER_DROPS],
}

/// Reasons that apply to single values.
const IDENTIFIER_DROPS: usize = Drop::PER_IDENTIFIER.len();

/// A string in the arena.
#[derive(Clone, Copy, Debug)]
struct Span {
    start: u32,
    len: u32,
}

/// Records as they arrive, for one harvest.
#[derive(Debug)]
pub struct Inventory {
    scope: Scope,
    collected: Collected,
    /// Where it spills, and the memory it holds first.
    budget: Budget,
    /// The memory it holds, within the budget (and in the gateway, the refreshes' pool).
    share: Share,
    /// The runs spilled so far; `None` while everything fits in memory.
    spilled: Option<spill::Spilled>,
    /// Occurrences and URLs in the runs spilled so far.
    spilled_occurrences: u32,
    spilled_urls: u64,
}

/// What an inventory has collected: apart from its scope, so that the URLs of a record can be
/// classified against the scope as they are added.
#[derive(Debug, Default)]
struct Collected {
    arena: String,
    entries: Vec<Entry>,
    urls: Vec<Span>,
    /// Length of the prefix that every URL in the arena shares (0 before the first).
    common: usize,
    stats: Stats,
    samples: DropSamples,
}

impl Inventory {
    /// An empty inventory whose URLs must lie inside `scope`.
    pub fn new(scope: Scope) -> Self {
        Self::with_budget(scope, Budget::default())
    }

    /// An empty inventory whose URLs must lie inside `scope`, which spills sorted runs to
    /// `budget`'s folder once it holds more than its memory.
    pub(crate) fn with_budget(scope: Scope, budget: Budget) -> Self {
        Self {
            scope,
            collected: Collected::default(),
            share: Share::new(&budget, budget.memory),
            budget,
            spilled: None,
            spilled_occurrences: 0,
            spilled_urls: 0,
        }
    }

    /// The scope URLs are checked against.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// Record occurrences so far.
    pub fn records_seen(&self) -> u64 {
        self.collected.stats.records_seen
    }

    /// URLs kept so far, before duplicates are removed.
    pub fn urls_kept(&self) -> u64 {
        self.spilled_urls + self.collected.urls.len() as u64
    }

    /// What counts the bytes it spills to disk.
    pub(crate) fn meter(&self) -> crate::spill::Meter {
        self.budget.meter.clone()
    }

    /// Spills what it holds when that is past the budget, or past what the refreshes' pool
    /// leaves it.
    fn keep_within_budget(&mut self) -> Result<(), Error> {
        if self.share.allows(self.collected.memory()) {
            return Ok(());
        }
        let spilled = (self.spilled).get_or_insert_with(|| spill::Spilled::new(&self.budget));
        spilled.spill(&self.collected, self.spilled_occurrences)?;
        let c = &mut self.collected;
        self.spilled_occurrences = (self.spilled_occurrences)
            .checked_add(u32::try_from(c.entries.len()).map_err(|_| FilesError::InventoryFull)?)
            .ok_or(FilesError::InventoryFull)?;
        self.spilled_urls += c.urls.len() as u64;
        // The memory is used again: cleared, not freed; unless the pool holds it to less than
        // its cap, when the other refreshes need it.
        if self.share.limit() < self.share.cap() {
            c.arena = String::new();
            c.entries = Vec::new();
            c.urls = Vec::new();
        } else {
            c.arena.clear();
            c.entries.clear();
            c.urls.clear();
        }
        c.common = 0;
        self.share.count(0);
        Ok(())
    }

    /// Adds one record occurrence: classifies its identifiers and keeps the publishable URLs.
    /// `groups` has a bit set for each group of records it is in (the DiWoo categories whose
    /// sets hold it, [`Published::iter_grouped`]); 0 when there are none.
    pub fn add(&mut self, record: &Record, groups: u32) -> Result<(), Error> {
        let scope = &self.scope;
        let urls = record
            .dc_identifiers
            .iter()
            .map(|value| classify::publishable(value, scope));
        self.collected
            .add(record, urls, Some(&record.dc_identifiers), groups)?;
        self.keep_within_budget()
    }

    /// [`Inventory::add`] of a record whose values are classified already: `classes` as the
    /// landing rule gives them ([`crate::platform::Landing::classes`]: one per `dc:identifier`
    /// under Google's rule, a platform's landing page first under another); a deleted record
    /// has none.
    pub fn add_classified(
        &mut self,
        record: &Record,
        classes: &[Class<'_>],
        groups: u32,
    ) -> Result<(), Error> {
        self.add_classes(record, classes, None, groups)
    }

    /// [`Inventory::add_classified`], with the values the classes were made of, one each in
    /// the same order, when that is so (Google's rule; a platform's rule puts a landing page
    /// first): the examples of drops then show the values.
    pub(crate) fn add_classes(
        &mut self,
        record: &Record,
        classes: &[Class<'_>],
        values: Option<&[String]>,
        groups: u32,
    ) -> Result<(), Error> {
        let urls = classes.iter().map(|c| c.publishable().map(Cow::Borrowed));
        self.collected.add(record, urls, values, groups)?;
        self.keep_within_budget()
    }

    /// Resolves repeats and duplicates into the sorted list of URLs to publish.
    ///
    /// # Panics
    ///
    /// When the inventory spilled to disk and its runs cannot be read back: [`Inventory::resolve`]
    /// says so as an error.
    pub fn finish(self) -> Published {
        self.resolve()
            .expect("the inventory's runs are read back")
            .0
    }

    /// [`Inventory::finish`], and which record occurrences a newer version replaced: for the
    /// landing-page profiles, which saw the same occurrences in the same order, so that one
    /// rule decides the winning version of a record for every file.
    ///
    /// # Panics
    ///
    /// As [`Inventory::finish`].
    pub fn finish_with_superseded(self) -> (Published, Superseded) {
        self.resolve().expect("the inventory's runs are read back")
    }

    /// [`Inventory::finish_with_superseded`], an error when its runs on disk fail.
    pub(crate) fn resolve(self) -> Result<(Published, Superseded), Error> {
        let Some(spilled) = self.spilled else {
            let (mut published, superseded) = self.collected.finish();
            // The URLs stay in memory until the render has read them.
            let mut share = self.share;
            share.count(published.memory());
            published.share = Some(share);
            return Ok((published, superseded));
        };
        let mut c = self.collected;
        // What is still in memory is the last run.
        let mut spilled = spilled;
        spilled.spill(&c, self.spilled_occurrences)?;
        let occurrences = self.spilled_occurrences as usize + c.entries.len();
        let (run, (shared, shared_groups), superseded) =
            spilled.finish(occurrences, &mut c.stats, &mut c.samples)?;
        let published = Published {
            urls: Urls::Spilled(run),
            share: None,
            stats: c.stats,
            shared,
            shared_groups,
            samples: Some(c.samples),
        };
        Ok((published, superseded))
    }
}

impl Collected {
    /// The memory it holds, and will hold to resolve: the text, the occurrences, and for each
    /// URL its span and its sort item.
    fn memory(&self) -> u64 {
        (self.arena.len()
            + self.entries.len() * size_of::<Entry>()
            + self.urls.len() * (size_of::<Span>() + size_of::<Item>())) as u64
    }

    /// Adds one record occurrence with its identifiers classified: `urls` has one item for
    /// each, not read for a deleted record (which publishes nothing); `values`, when known, the
    /// values they were classified from, in the same order (for the examples of drops).
    fn add<'a>(
        &mut self,
        record: &Record,
        urls: impl Iterator<Item = Result<Cow<'a, str>, Drop>>,
        values: Option<&[String]>,
        groups: u32,
    ) -> Result<(), Error> {
        self.stats.records_seen += 1;
        let url_start = u32::try_from(self.urls.len()).map_err(|_| FilesError::InventoryFull)?;
        let mut url_count = 0u16;
        let mut drops = [0u8; IDENTIFIER_DROPS];
        let samples = &mut self.samples;
        let mut count = |reason: Drop, at: usize| {
            if let Some(i) = identifier_slot(reason) {
                drops[i] = drops[i].saturating_add(1);
            }
            if samples.wants(reason) {
                let value = values.and_then(|v| v.get(at)).map(String::as_str);
                samples.note(reason, Some(&record.identifier), value);
            }
        };
        if record.deleted {
            count(Drop::Deleted, usize::MAX);
        }
        for (at, url) in urls.enumerate().filter(|_| !record.deleted) {
            match url {
                Ok(url) => {
                    if url_count == u16::MAX {
                        break;
                    }
                    let start =
                        u32::try_from(self.arena.len()).map_err(|_| FilesError::InventoryFull)?;
                    self.common = match self.urls.first() {
                        None => url.len(),
                        Some(first) => {
                            let first =
                                &self.arena.as_bytes()[first.start as usize..][..self.common];
                            first
                                .iter()
                                .zip(url.as_bytes())
                                .take_while(|(a, b)| a == b)
                                .count()
                        }
                    };
                    self.arena.push_str(&url);
                    u32::try_from(self.arena.len()).map_err(|_| FilesError::InventoryFull)?;
                    self.urls.push(Span {
                        start,
                        len: url.len() as u32,
                    });
                    url_count += 1;
                }
                Err(reason) => count(reason, at),
            }
        }
        if url_count == 0 && !record.deleted {
            count(Drop::NoUrl, usize::MAX);
        }
        let hasher = BuildHasherDefault::<DefaultHasher>::default();
        self.entries.push(Entry {
            id_hash: hasher.hash_one(record.identifier.as_str()),
            datestamp: Datestamp::pack_option(record.datestamp),
            url_start,
            url_count,
            deleted: record.deleted,
            groups,
            drops,
        });
        Ok(())
    }

    fn finish(self) -> (Published, Superseded) {
        let Collected {
            arena,
            entries,
            urls,
            common,
            mut stats,
            mut samples,
        } = self;
        let superseded = superseded(&entries);
        let mut items = Vec::with_capacity(urls.len());
        for (i, winner) in entries.iter().enumerate() {
            if superseded.contains(i) {
                continue;
            }
            stats.records += 1;
            for (reason, n) in Drop::PER_IDENTIFIER.iter().zip(winner.drops) {
                stats.drops[index(*reason)] += u64::from(n);
            }
            if winner.deleted {
                stats.drop(Drop::Deleted);
                stats.deleted += 1;
            } else if winner.url_count == 0 {
                stats.drop(Drop::NoUrl);
            }
            let spans = &urls[winner.url_start as usize..][..usize::from(winner.url_count)];
            items.extend(spans.iter().map(|&span| Item {
                key: key(&arena, span, common),
                span,
                datestamp: winner.datestamp,
                groups: winner.groups,
            }));
        }
        drop(entries);
        drop(urls);
        // Each URL once; the newest datestamp among its records is its lastmod (SM-16).
        sort_items(&mut items, &arena, common);
        let text = |s: Span| &arena.as_bytes()[s.start as usize..][..s.len as usize];
        // Items of one URL sort newest first: the one kept carries the URL's lastmod.
        let mut shared: Vec<(Span, Vec<i64>, Vec<u32>)> = Vec::new();
        items.dedup_by(|later, kept| {
            // Equal keys and lengths within the key's reach are equal texts, unread.
            let same = later.key == kept.key
                && later.span.len == kept.span.len
                && (later.span.len as usize <= common + KEY_BYTES
                    || text(later.span) == text(kept.span));
            if same {
                stats.drop(Drop::Duplicate);
                if samples.wants(Drop::Duplicate) {
                    let url = &arena[kept.span.start as usize..][..kept.span.len as usize];
                    samples.note(Drop::Duplicate, None, Some(url));
                }
                match shared.last_mut() {
                    Some(last) if text(last.0) == text(kept.span) => {
                        last.1.push(later.datestamp);
                        last.2.push(later.groups);
                    }
                    // The kept claim's own groups, before the others' join them.
                    _ => shared.push((
                        kept.span,
                        vec![kept.datestamp, later.datestamp],
                        vec![kept.groups, later.groups],
                    )),
                }
                // The URL is in every group of a record that publishes it.
                kept.groups |= later.groups;
            }
            same
        });
        stats.urls = items.len() as u64;
        let (shared, shared_groups) = shared
            .into_iter()
            .map(|(s, claims, groups)| {
                let url = arena[s.start as usize..][..s.len as usize].to_owned();
                (SharedUrl { url, claims }, groups)
            })
            .unzip();
        let published = Published {
            urls: Urls::Memory { arena, items },
            share: None,
            stats,
            shared,
            shared_groups,
            samples: Some(samples),
        };
        (published, superseded)
    }
}

/// Bytes of a URL, after the prefix all URLs share, that [`Item::key`] holds.
const KEY_BYTES: usize = 16;

/// A URL to sort: its text's first [`KEY_BYTES`] after the common prefix, big-endian and padded
/// with zeros, decide most comparisons without reading the arena.
#[derive(Clone, Copy, Debug)]
struct Item {
    key: Key,
    span: Span,
    datestamp: i64,
    /// The groups of the records that publish it ([`Published::iter_grouped`]).
    groups: u32,
}

/// A [`KEY_BYTES`]-byte sort key as two words, high first: ordered as a `u128` would be, but
/// 8-byte aligned, so that an [`Item`] takes 40 bytes rather than 48.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key(u64, u64);

/// The sort key of a URL whose first `common` bytes every URL shares. Keys order like the texts
/// (a shorter text's padding is zeros); equal keys need the whole texts compared.
fn key(arena: &str, span: Span, common: usize) -> Key {
    let text = &arena.as_bytes()[span.start as usize..][..span.len as usize];
    let rest = text.get(common..).unwrap_or_default();
    let mut bytes = [0u8; KEY_BYTES];
    let n = rest.len().min(KEY_BYTES);
    bytes[..n].copy_from_slice(&rest[..n]);
    let value = u128::from_be_bytes(bytes);
    Key((value >> 64) as u64, value as u64)
}

/// Sorts by text, and for equal texts newest first. The keys sort almost everything; only runs
/// of equal keys compare their texts.
fn sort_items(items: &mut [Item], arena: &str, common: usize) {
    let text = |s: Span| &arena.as_bytes()[s.start as usize..][..s.len as usize];
    items.sort_unstable_by_key(|item| item.key);
    for run in items.chunk_by_mut(|a, b| a.key == b.key) {
        if run.len() > 1 {
            run.sort_unstable_by(|a, b| {
                text(a.span)[common..]
                    .cmp(&text(b.span)[common..])
                    .then(b.datestamp.cmp(&a.datestamp))
            });
        }
    }
}

/// The entries that a newer version of the same record replaces: the newest datestamp per
/// record wins, on a tie the later occurrence (OAI-38).
fn superseded(entries: &[Entry]) -> Superseded {
    let mut superseded = vec![0u64; entries.len().div_ceil(64)];
    let mut ids: Vec<(u64, u32)> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| (e.id_hash, i as u32))
        .collect();
    ids.sort_unstable();
    for group in ids.chunk_by(|a, b| a.0 == b.0) {
        if group.len() > 1 {
            let winner = group
                .iter()
                .map(|&(_, i)| (entries[i as usize].datestamp, i))
                .max()
                .map_or(0, |(_, i)| i);
            for &(_, i) in group {
                if i != winner {
                    superseded[i as usize / 64] |= 1 << (i % 64);
                }
            }
        }
    }
    Superseded::new(superseded, entries.len())
}

/// The resolved inventory: sorted, distinct URLs with their lastmod.
#[derive(Debug)]
pub struct Published {
    urls: Urls,
    /// The memory its URLs hold, while they are in memory.
    share: Option<Share>,
    /// Final counts.
    pub stats: Stats,
    /// URLs that more than one record publishes (or one record twice), each once, with the
    /// datestamp of each claim: what patching a change to one of them into the published
    /// sitemap needs to know ([`crate::patch`]).
    pub shared: Vec<SharedUrl>,
    /// The groups of each claim of each shared URL, as `shared[i].claims` (the profiles'
    /// ledger keeps them: [`crate::profiles::ledger`]); empty for a patched sitemap.
    pub shared_groups: Vec<Vec<u32>>,
    /// A few examples of each reason not to publish; `None` for a patched sitemap, which
    /// reads only the records that changed ([`Published::counted`]).
    pub samples: Option<DropSamples>,
}

/// Where the published URLs are.
#[derive(Debug)]
enum Urls {
    /// In memory: the text, and the items in order.
    Memory { arena: String, items: Vec<Item> },
    /// In a file of the spill folder, in order ([`spill::PublishedReader`]).
    Spilled(Run),
}

/// One published URL, its lastmod and its groups ([`Published::iter_grouped`]).
pub(crate) type PublishedUrl<'a> = (Cow<'a, str>, Option<Datestamp>, u32);

/// The published URLs in order, read from memory or from disk ([`Published::entries`]).
#[derive(Debug)]
pub struct Entries<'a>(EntriesFrom<'a>);

#[derive(Debug)]
enum EntriesFrom<'a> {
    /// From memory: the URLs' text, and the items still to go.
    Memory {
        arena: &'a str,
        items: std::slice::Iter<'a, Item>,
    },
    /// From the file of a spilled inventory.
    Spilled(spill::PublishedReader),
}

impl<'a> Iterator for Entries<'a> {
    type Item = Result<PublishedUrl<'a>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            EntriesFrom::Memory { arena, items } => items.next().map(|item| {
                let s = item.span;
                Ok((
                    Cow::Borrowed(&arena[s.start as usize..][..s.len as usize]),
                    Datestamp::unpack_option(item.datestamp),
                    item.groups,
                ))
            }),
            EntriesFrom::Spilled(reader) => reader.next().transpose().map(|r| {
                r.map(|(url, d, groups)| (Cow::Owned(url), Datestamp::unpack_option(d), groups))
            }),
        }
    }
}

/// The URLs several records publish, and the groups of each claim ([`Published::shared`],
/// [`Published::shared_groups`]).
type Shared = (Vec<SharedUrl>, Vec<Vec<u32>>);

pub(crate) use oai_bridge_files::published::SharedUrl;

impl Published {
    /// The counts of URLs published elsewhere, without the URLs: what a patched sitemap
    /// ([`crate::patch`]) holds.
    pub fn counted(stats: Stats) -> Self {
        Self {
            urls: Urls::Memory {
                arena: String::new(),
                items: Vec::new(),
            },
            share: None,
            stats,
            shared: Vec::new(),
            shared_groups: Vec::new(),
            samples: None,
        }
    }

    /// Number of URLs.
    pub fn len(&self) -> usize {
        self.stats.urls as usize
    }

    /// Whether there is nothing to publish.
    pub fn is_empty(&self) -> bool {
        self.stats.urls == 0
    }

    /// The URLs in order, with their lastmod and groups (group `g`, 0-31 as given to
    /// [`Inventory::add`], is bit `1 << g`), from memory or, for an inventory that spilled,
    /// from its file on disk. A URL's lastmod is the newest datestamp among all records that
    /// publish it, in a group or not (the page is the same page).
    pub fn entries(&self) -> Result<Entries<'_>, Error> {
        Ok(Entries(match &self.urls {
            Urls::Memory { arena, items } => EntriesFrom::Memory {
                arena,
                items: items.iter(),
            },
            Urls::Spilled(run) => EntriesFrom::Spilled(spill::PublishedReader::new(run)?),
        }))
    }

    /// The memory its URLs hold: their text and their entries, when in memory.
    fn memory(&self) -> u64 {
        match &self.urls {
            Urls::Memory { arena, items } => (arena.len() + items.len() * size_of::<Item>()) as u64,
            Urls::Spilled(_) => 0,
        }
    }

    /// Whether its URLs are in a file on disk rather than in memory.
    pub fn spilled(&self) -> bool {
        matches!(self.urls, Urls::Spilled(_))
    }

    /// The URLs in order, with their lastmod, of an inventory resolved in memory.
    ///
    /// # Panics
    ///
    /// On an inventory that spilled to disk ([`Published::spilled`]), whose URLs
    /// [`Published::entries`] reads.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Option<Datestamp>)> + '_ {
        self.iter_all().map(|(url, lastmod, _)| (url, lastmod))
    }

    /// The URLs in at least one group, in order, each with its lastmod and its groups as bits,
    /// of an inventory resolved in memory (see [`Published::entries`]).
    ///
    /// # Panics
    ///
    /// As [`Published::iter`].
    pub fn iter_grouped(&self) -> impl Iterator<Item = (&str, Option<Datestamp>, u32)> + '_ {
        self.iter_all().filter(|&(.., groups)| groups != 0)
    }

    fn iter_all(&self) -> impl Iterator<Item = (&str, Option<Datestamp>, u32)> + '_ {
        let Urls::Memory { arena, items } = &self.urls else {
            panic!("the URLs of a spilled inventory are read with `entries`");
        };
        items.iter().map(move |item| {
            let s = item.span;
            (
                &arena[s.start as usize..][..s.len as usize],
                Datestamp::unpack_option(item.datestamp),
                item.groups,
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use url::Url;

    fn record(id: &str, date: &str, ids: &[&str]) -> Record {
        Record {
            identifier: id.to_owned(),
            datestamp: Datestamp::parse(date),
            deleted: false,
            sets: vec![],
            dc_identifiers: ids.iter().map(|s| s.to_string()).collect(),
            dc: Default::default(),
            empty_metadata: false,
        }
    }

    fn resolve(records: &[Record]) -> Published {
        let scope = Scope::from_base_url(&Url::parse("https://h/oai").unwrap()).unwrap();
        let mut inventory = Inventory::new(scope);
        for r in records {
            inventory.add(r, 0).unwrap();
        }
        inventory.finish()
    }

    /// Issue 22: a few examples of each reason, collected as records are added: the record
    /// and the value (the URL for a duplicate, the record alone for one deleted or without a
    /// URL), at most [`SAMPLES_PER_REASON`] each, long values cut.
    #[test]
    fn drops_keep_a_few_examples() {
        let mut records = vec![
            record(
                "oai:h:1",
                "2021-01-01",
                &["https://h/1", "doi:10.1234/a", "ISBN 1"],
            ),
            record("oai:h:2", "2021-01-01", &["https://h/1", "urn:nbn:x"]),
            Record {
                deleted: true,
                ..record("oai:h:3", "2021-01-01", &[])
            },
            record(
                "oai:h:4",
                "2021-01-01",
                &[&format!("https://h/{}", "x".repeat(3000))],
            ),
        ];
        for i in 5..12 {
            records.push(record(
                &format!("oai:h:{i}"),
                "2021-01-01",
                &[&format!("hdl:1/{i}")],
            ));
        }
        let p = resolve(&records);
        let samples = p.samples.as_ref().expect("a whole inventory has examples");
        let example = |record: &str, value: Option<&str>| DropSample {
            record: Some(record.to_owned()),
            value: value.map(str::to_owned),
        };
        assert_eq!(
            samples.of(Drop::PersistentId),
            [
                example("oai:h:1", Some("doi:10.1234/a")),
                example("oai:h:5", Some("hdl:1/5")),
                example("oai:h:6", Some("hdl:1/6")),
            ]
        );
        assert_eq!(p.stats.dropped(Drop::PersistentId), 8);
        assert_eq!(
            samples.of(Drop::NotAUrl),
            [
                example("oai:h:1", Some("ISBN 1")),
                example("oai:h:2", Some("urn:nbn:x"))
            ]
        );
        assert_eq!(samples.of(Drop::Deleted), [example("oai:h:3", None)]);
        assert_eq!(
            samples.of(Drop::NoUrl),
            [
                example("oai:h:4", None),
                example("oai:h:5", None),
                example("oai:h:6", None)
            ]
        );
        assert_eq!(
            samples.of(Drop::Duplicate),
            [DropSample {
                record: None,
                value: Some("https://h/1".into())
            }]
        );
        let long = samples.of(Drop::TooLong)[0].value.clone().unwrap();
        assert!(
            long.starts_with("https://h/xxx") && long.ends_with('…'),
            "{long}"
        );
        assert_eq!(long.len(), SAMPLE_VALUE_BYTES + '…'.len_utf8());
        assert!(samples.of(Drop::OutOfScope).is_empty());
        assert_eq!(
            samples.by_name().keys().collect::<Vec<_>>(),
            [
                "deleted",
                "duplicate",
                "no_url",
                "not_a_url",
                "persistent_id",
                "too_long"
            ]
        );
        // A patched sitemap's counts come without examples.
        assert_eq!(Published::counted(Stats::default()).samples, None);
    }

    fn listing(p: &Published) -> Vec<String> {
        p.iter()
            .map(|(u, d)| format!("{u} {}", d.map(|d| d.to_string()).unwrap_or_default()))
            .collect()
    }

    #[test]
    fn newest_version_wins_and_urls_are_listed_once() {
        let deleted = Record {
            deleted: true,
            ..record("oai:h:3", "2021-01-01", &[])
        };
        let p = resolve(&[
            record(
                "oai:h:1",
                "2020-01-01",
                &["https://h/a", "doi:10.1234/x", "ISBN 1"],
            ),
            record(
                "oai:h:2",
                "2020-06-01T10:00:00Z",
                &["https://h/b", "https://h/a", "https://other/x"],
            ),
            record("oai:h:3", "2020-01-01", &["https://h/c"]),
            deleted,
            // oai:h:1 again, newer, with a different URL (OAI-38).
            record("oai:h:1", "2022-01-01", &["https://h/d"]),
            record("oai:h:4", "2020-01-01", &["urn:nbn:x"]),
        ]);
        assert_eq!(
            listing(&p),
            [
                "https://h/a 2020-06-01T10:00:00Z",
                "https://h/b 2020-06-01T10:00:00Z",
                "https://h/d 2022-01-01"
            ]
        );
        let s = &p.stats;
        assert_eq!((s.records_seen, s.records, s.deleted, s.urls), (6, 4, 1, 3));
        // The superseded version of oai:h:1 (with its DOI and ISBN) is not counted.
        assert_eq!(s.dropped(Drop::PersistentId), 0);
        assert_eq!(s.dropped(Drop::NotAUrl), 1);
        assert_eq!(s.dropped(Drop::OutOfScope), 1);
        assert_eq!(s.dropped(Drop::Deleted), 1);
        assert_eq!(s.dropped(Drop::NoUrl), 1);
        assert_eq!(s.dropped(Drop::Duplicate), 0);
    }

    #[test]
    fn the_same_url_from_two_records_is_one_entry() {
        let p = resolve(&[
            record("a", "2020-01-01", &["https://h/x"]),
            record("b", "2021-01-01", &["https://h/x"]),
        ]);
        assert_eq!(listing(&p), ["https://h/x 2021-01-01"]);
        assert_eq!(p.stats.dropped(Drop::Duplicate), 1);
    }

    type Everything = (
        Vec<(String, Option<Datestamp>, u32)>,
        Stats,
        Vec<SharedUrl>,
        Option<DropSamples>,
        Vec<bool>,
        bool,
    );

    /// Everything a resolved inventory says, in comparable form: each URL with its lastmod
    /// and groups in order, the counts, the shared URLs, the examples and which occurrences
    /// lost.
    fn everything(inventory: Inventory) -> Everything {
        let (p, superseded) = inventory.resolve().unwrap();
        let urls = (p.entries().unwrap())
            .map(|e| e.map(|(u, d, g)| (u.into_owned(), d, g)))
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let lost = (0..superseded.len())
            .map(|i| superseded.contains(i))
            .collect();
        let spilled = p.spilled();
        (urls, p.stats, p.shared, p.samples, lost, spilled)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

        /// Issue 30: an inventory that spills sorted runs to disk (here after every few
        /// records, so that a harvest makes dozens of runs, and past 64 merges them in passes)
        /// resolves to exactly what the in-memory one does: the same URLs with the same
        /// lastmods and groups in the same order, the same counts, shared URLs, examples and
        /// superseded occurrences; through repeats of a record (newer, older, as old), deleted
        /// versions, URLs several records list, and values that are not published.
        #[test]
        fn a_spilled_inventory_resolves_as_the_in_memory_one(
            occurrences in proptest::collection::vec(
                (0u8..40, 0u8..6, proptest::bool::weighted(0.15), 0u32..4,
                 proptest::collection::vec(0u8..60, 0..4)),
                0..400,
            ),
            budget in 1u64..4096,
        ) {
            let scope = Scope::from_base_url(&Url::parse("https://h/oai").unwrap()).unwrap();
            let records: Vec<(Record, u32)> = occurrences
                .iter()
                .map(|(id, day, deleted, groups, values)| {
                    let values: Vec<String> = values
                        .iter()
                        .map(|v| match v % 6 {
                            // Out of scope, a persistent identifier, and mostly landing pages.
                            0 => format!("https://other/{v}"),
                            1 => format!("doi:10.1/{v}"),
                            _ => format!("https://h/{}/{v}", "p".repeat(usize::from(v % 5) * 7)),
                        })
                        .collect();
                    let date = if *day == 0 { String::new() } else { format!("2021-01-0{day}") };
                    let mut r = record(&format!("oai:h:{id}"), &date, &[]);
                    r.dc_identifiers = values;
                    r.deleted = *deleted;
                    (r, *groups)
                })
                .collect();
            let dir = tempfile::tempdir().unwrap();
            let mut memory = Inventory::new(scope.clone());
            let mut spilling =
                Inventory::with_budget(scope, Budget::new(dir.path().to_owned(), budget));
            for (r, groups) in &records {
                memory.add(r, *groups).unwrap();
                spilling.add(r, *groups).unwrap();
            }
            let spills = spilling.spilled.is_some();
            let (m, s) = (everything(memory), everything(spilling));
            proptest::prop_assert!(!m.5);
            proptest::prop_assert_eq!(s.5, spills);
            proptest::prop_assert_eq!(&m.0, &s.0);
            proptest::prop_assert_eq!(&m.1, &s.1);
            proptest::prop_assert_eq!(&m.2, &s.2);
            proptest::prop_assert_eq!(&m.3, &s.3);
            proptest::prop_assert_eq!(&m.4, &s.4);
            // Every spill file is gone with the inventory.
            proptest::prop_assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        }
    }
}
