//! DiWoo (the Dutch Woo's sitemaps): a sitemap per Woo information category, of the URLs of the
//! records in the sets mapped to it. DiWoo reads only https locations, and every entry needs a
//! lastmod.

use std::borrow::Cow;

use oai_pmh::{Datestamp, Fields};
use serde::{Deserialize, Serialize};
use url::Url;

use crate::Limits;
use crate::sitemap::{URLSET_OPEN, Urlsets, write_url};

use super::files::{FileSink, Shards};
use super::registry;
use super::report::{self, Piece, ProfileCounts, Report};
use super::{Audience, Feed, Profile, Spec, SummarySpec};

/// A DiWoo category, as the profiles' list knows it ([`super::Spec`]): the label and names are
/// followed by the category's three digits (`diwoo-infocat014`, `diwoo-infocat014-1.xml`, the
/// index `sitemapindex-diwoo-infocat014.xml`); the inventory's URLs, to every crawler; a
/// manifest holds the categories' parts in a list, `diwoo`.
pub const SPEC: Spec = Spec {
    label: "diwoo-infocat",
    prefix: "diwoo-infocat",
    audience: Audience::AllCrawlers,
    feed: Feed::Inventory,
    fields: Fields::of(&[]),
    summary: Some(SummarySpec {
        field: "diwoo",
        list: true,
        load: registry::load::<DiwooStats>,
        from_render: None,
    }),
    column: None,
};

/// Highest Woo information category (the DiWoo table has 17).
pub const CATEGORIES: u8 = 17;

/// One DiWoo category: the records of its sets, a group of the inventory.
#[derive(Debug)]
pub struct Category {
    /// The Woo information category, 1-17.
    pub number: u8,
    /// The sets whose records it holds.
    pub sets: Vec<String>,
}

impl Category {
    /// A record in set `s` is in the category: `s` is one of the category's sets or below one
    /// (`a:b` is in `a`).
    pub(crate) fn holds(&self, s: &str) -> bool {
        self.sets.iter().any(|c| {
            s == c || (s.starts_with(c.as_str()) && s.as_bytes().get(c.len()) == Some(&b':'))
        })
    }
}

/// The categories (bits, as the inventory's groups: bit `i` is `categories[i]`) of a record in
/// `sets`.
pub fn groups(categories: &[Category], sets: &[String]) -> u32 {
    sets.iter()
        .fold(0, |groups, set| groups | set_groups(categories, set))
}

/// The categories (bits) a record in set `set` is in.
pub fn set_groups(categories: &[Category], set: &str) -> u32 {
    (categories.iter().enumerate())
        .filter(|(_, c)| c.holds(set))
        .fold(0u32, |g, (i, _)| g | 1 << i)
}

/// The categories of a mapping of sets to categories (`setSpec -> category`), in ascending order,
/// each with its sets; an error names a category outside the table.
///
/// # Errors
///
/// A category outside 1-17, named in the message.
pub fn categories(mapping: &[(String, u8)]) -> Result<Vec<Category>, String> {
    let mut categories: Vec<Category> = Vec::new();
    for (set, number) in mapping {
        // A category is a bit of the inventory's groups; the table has 17.
        if !(1..=CATEGORIES).contains(number) {
            return Err(format!(
                "set {set:?} is mapped to DiWoo category {number}; the Woo information \
                 categories are 1-{CATEGORIES}"
            ));
        }
        match categories.iter_mut().find(|c| c.number == *number) {
            Some(c) => c.sets.push(set.clone()),
            None => categories.push(Category {
                number: *number,
                sets: vec![set.clone()],
            }),
        }
    }
    categories.sort_by_key(|c| c.number);
    Ok(categories)
}

/// The DiWoo categories' shards and indexes, filled side by side (`categories[g]` is group `g`
/// of the inventory), each URL's entry written once for all its categories. DiWoo reads only
/// https locations, and every entry needs a lastmod: other URLs are counted, not published.
/// The shards of different categories reach the sink interleaved (with the sitemap's, when
/// taken from them), the indexes last, and up to one shard per category is in memory at once
/// (a few MB each for URLs of usual length; `max_bytes` each at most).
pub struct Writer<'a> {
    /// Each category's splitter, files and counts.
    outputs: Vec<(Urlsets<'a>, Shards<'a>, DiwooStats)>,
}

impl<'a> Writer<'a> {
    /// The writers of `categories`, their files named under `public_url`.
    pub fn new(public_url: &'a Url, limits: Limits, categories: &[u8]) -> Self {
        debug_assert!(categories.len() <= 32, "a category is one of 32 group bits");
        let outputs = categories
            .iter()
            .map(|&category| {
                (
                    Urlsets::new(URLSET_OPEN, limits),
                    Shards::new(public_url, Profile::Diwoo(category), "xml"),
                    DiwooStats {
                        category,
                        ..DiwooStats::default()
                    },
                )
            })
            .collect();
        Self { outputs }
    }

    /// One URL of the `groups` given, as its sitemap entry (`<url>` to the line feed, as
    /// [`write_url`] writes it) with its lastmod.
    ///
    /// # Errors
    ///
    /// What the sink fails with, storing a shard the entry closes.
    pub fn add<S: FileSink>(
        &mut self,
        sink: &mut S,
        entry: &[u8],
        lastmod: Option<Datestamp>,
        groups: u32,
    ) -> Result<(), S::Error> {
        if groups == 0 {
            return Ok(());
        }
        let https = entry.starts_with(b"<url><loc>https://");
        for (g, (urlsets, shards, stats)) in self.outputs.iter_mut().enumerate() {
            if groups & 1 << g == 0 {
                continue;
            }
            if !https {
                stats.requires_https += 1;
            } else if lastmod.is_none() {
                stats.requires_lastmod += 1;
            } else {
                stats.urls += 1;
                urlsets.push(
                    |bytes| {
                        bytes.extend_from_slice(entry);
                        lastmod
                    },
                    |shard| shards.put(sink, shard),
                )?;
            }
        }
        Ok(())
    }

    /// The categories written, in order.
    pub(crate) fn categories(&self) -> Vec<u8> {
        (self.outputs.iter())
            .map(|(.., stats)| stats.category)
            .collect()
    }

    /// Whether no category is published: [`Writer::add_all`] has nothing to do.
    pub fn is_empty(&self) -> bool {
        self.outputs.is_empty()
    }

    /// Every grouped URL of the published inventory (`urls`, in URL order, each with its
    /// lastmod and groups), in one pass (when the sitemap's shards were not all written: a
    /// patch).
    ///
    /// # Errors
    ///
    /// An entry that `urls` fails to read, or what the sink fails with.
    pub fn add_all<'u, S, E>(
        &mut self,
        sink: &mut S,
        urls: impl IntoIterator<Item = Result<(Cow<'u, str>, Option<Datestamp>, u32), E>>,
    ) -> Result<(), E>
    where
        S: FileSink,
        E: From<S::Error>,
    {
        if self.outputs.is_empty() {
            return Ok(());
        }
        let mut entry = Vec::with_capacity(512);
        let mut date = String::with_capacity(32);
        for url in urls {
            let (url, lastmod, groups) = url?;
            if groups == 0 {
                continue;
            }
            entry.clear();
            write_url(&mut entry, &url, lastmod, &mut date);
            self.add(sink, &entry, lastmod, groups)?;
        }
        Ok(())
    }

    /// The last shards and the indexes (their URLs go to `indexes`); the counts.
    ///
    /// # Errors
    ///
    /// What the sink fails with, storing the last shards or the indexes.
    pub fn finish<S: FileSink>(
        self,
        sink: &mut S,
        indexes: &mut Vec<Url>,
    ) -> Result<Vec<DiwooStats>, S::Error> {
        let mut stats = Vec::with_capacity(self.outputs.len());
        for (urlsets, mut shards, counts) in self.outputs {
            urlsets.finish(|shard| shards.put(sink, shard))?;
            indexes.extend(shards.finish(sink)?);
            stats.push(counts);
        }
        Ok(stats)
    }
}

/// What one DiWoo category published, as a manifest holds it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiwooStats {
    /// The Woo information category, 1-17.
    pub category: u8,
    /// URLs published.
    pub urls: u64,
    /// URLs not published because they are not https (`diwoo_requires_https`).
    pub requires_https: u64,
    /// URLs not published because their record has no datestamp (`diwoo_requires_lastmod`).
    pub requires_lastmod: u64,
}

impl DiwooStats {
    /// The category's index, under `public_url`.
    fn index_url(&self, public_url: &Url) -> String {
        format!("{public_url}{}", Profile::Diwoo(self.category).index_name())
    }

    /// What it left out, by reason.
    fn drops(&self) -> [(&'static str, u64); 2] {
        [
            ("diwoo_requires_https", self.requires_https),
            ("diwoo_requires_lastmod", self.requires_lastmod),
        ]
    }
}

impl Report for DiwooStats {
    fn profile(&self) -> Profile {
        Profile::Diwoo(self.category)
    }

    fn counts(&self) -> Vec<ProfileCounts> {
        let profile = Profile::Diwoo(self.category);
        vec![ProfileCounts::new(profile, self.urls, &self.drops())]
    }

    fn export_lines(&self) -> Vec<(String, String)> {
        let what = format!(
            "{} URLs in {}; {}",
            self.urls,
            Profile::Diwoo(self.category).index_name(),
            report::not_published(&self.drops())
        );
        vec![(format!("DiWoo cat. {:03}", self.category), what)]
    }

    fn status_line(&self, public_url: &Url) -> Vec<Piece> {
        vec![
            Piece::Link("DiWoo", self.index_url(public_url)),
            Piece::Text(format!(
                " category {:03}: {} URLs; {}",
                self.category,
                self.urls,
                report::not_published(&self.drops())
            )),
        ]
    }

    /// Announced when it holds URLs: a category without any has no index.
    fn indexes(&self, public_url: &Url) -> Vec<String> {
        (self.urls > 0)
            .then(|| self.index_url(public_url))
            .into_iter()
            .collect()
    }
}
