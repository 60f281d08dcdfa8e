//! What a publish counts: the reasons something was not published ([`Drop`]) and the counts
//! of what was seen and published ([`Stats`]), as summaries, metrics and the store keep them;
//! and which record occurrences a newer version of their record replaced ([`Superseded`]).

/// Why an identifier, URL or record was not published. Every drop is counted under one of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Drop {
    /// An http(s) URL outside the scope.
    OutOfScope,
    /// Not a URL at all: ISBN, URN, citation text, `oai:` identifier...
    NotAUrl,
    /// Looks like an http(s) URL but does not parse, or holds whitespace.
    InvalidUrl,
    /// Longer than 2,047 characters once percent-encoded.
    TooLong,
    /// A DOI or Handle: cited, never a `<loc>`.
    PersistentId,
    /// The same URL came from another record (or twice from one); published once.
    Duplicate,
    /// A record with `status="deleted"`.
    Deleted,
    /// A live record none of whose identifiers could be published.
    NoUrl,
    /// A live record sent with an empty `<metadata/>` (Q-35: B2SHARE): it cannot be read, so it
    /// is rejected, and is no deletion either: the version stored before stays published (I-06).
    EmptyMetadata,
    /// DSpace: a value spelled as a Handle (`hdl:`, `info:hdl/`, the proxy's URL) whose
    /// `prefix/suffix` does not parse, so no landing page can be made of it.
    InvalidHandle,
    /// EPrints: a `dc:relation` that is no URL (nor a DOI).
    RelationNotAUrl,
    /// A landing-page template filled with a record's value gives no valid URL.
    TemplateInvalidUrl,
    /// The site's robots.txt disallows the URL for a major crawler (Googlebot, Bingbot): a
    /// sitemap listing it gets an error in the search console.
    RobotsDisallowed,
    /// A content file of a repository set to `content_files = false`.
    ContentFileLeftOut,
}

impl Drop {
    /// Every reason, in report order (new reasons go at the end: a store keeps the counts in
    /// this order). [`Drop::PER_IDENTIFIER`] lists those that apply to single values.
    pub const ALL: [Drop; 14] = [
        Drop::OutOfScope,
        Drop::NotAUrl,
        Drop::InvalidUrl,
        Drop::TooLong,
        Drop::PersistentId,
        Drop::Duplicate,
        Drop::Deleted,
        Drop::NoUrl,
        Drop::EmptyMetadata,
        Drop::InvalidHandle,
        Drop::RelationNotAUrl,
        Drop::TemplateInvalidUrl,
        Drop::RobotsDisallowed,
        Drop::ContentFileLeftOut,
    ];

    /// The reasons that apply to single values of a record (not to a record or a URL as a
    /// whole), in the order an inventory entry counts them.
    pub const PER_IDENTIFIER: [Drop; 10] = [
        Drop::OutOfScope,
        Drop::NotAUrl,
        Drop::InvalidUrl,
        Drop::TooLong,
        Drop::PersistentId,
        Drop::InvalidHandle,
        Drop::RelationNotAUrl,
        Drop::TemplateInvalidUrl,
        Drop::RobotsDisallowed,
        Drop::ContentFileLeftOut,
    ];

    /// Where the reason is in [`Drop::ALL`]: its slot in [`Stats::drops`].
    pub fn index(self) -> usize {
        Drop::ALL.iter().position(|r| *r == self).unwrap_or(0)
    }

    /// The stable name used in summaries, logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Drop::OutOfScope => "out_of_scope",
            Drop::NotAUrl => "not_a_url",
            Drop::InvalidUrl => "invalid_url",
            Drop::TooLong => "too_long",
            Drop::PersistentId => "persistent_id",
            Drop::Duplicate => "duplicate",
            Drop::Deleted => "deleted",
            Drop::NoUrl => "no_url",
            Drop::EmptyMetadata => "empty_metadata",
            Drop::InvalidHandle => "invalid_handle",
            Drop::RelationNotAUrl => "relation_not_a_url",
            Drop::TemplateInvalidUrl => "template_invalid_url",
            Drop::RobotsDisallowed => "robots_disallowed",
            Drop::ContentFileLeftOut => "content_file_left_out",
        }
    }

    /// The reason named `name` ([`Drop::as_str`]), if it is one.
    pub fn named(name: &str) -> Option<Drop> {
        Drop::ALL.into_iter().find(|r| r.as_str() == name)
    }

    /// What the reason means, in words, for people: the one text the status page, `check` and
    /// `export`'s summary show beside the code.
    pub fn meaning(self) -> &'static str {
        match self {
            Drop::OutOfScope => {
                "an http(s) URL outside the scope (the baseURL's directory, or the configured \
                 scope): crawlers accept a sitemap's URLs only under it. Many of them usually \
                 mean the landing pages are elsewhere: oai-bridge check suggests a scope"
            }
            Drop::NotAUrl => {
                "not a URL (an ISBN, a URN, citation text, a local or oai: identifier): \
                 rightly not a <loc>"
            }
            Drop::InvalidUrl => {
                "looks like an http(s) URL but does not parse, or holds whitespace: the \
                 upstream writes broken URLs"
            }
            Drop::TooLong => "a URL longer than 2,047 characters, more than a sitemap allows",
            Drop::PersistentId => {
                "a DOI or Handle, not a URL of this repository: rightly not a <loc> (a \
                 Signmap cites it as cite-as)"
            }
            Drop::Duplicate => {
                "a URL another record (or the same one twice) gives too: published once, \
                 with the newest datestamp"
            }
            Drop::Deleted => "a record marked deleted by the upstream: it publishes nothing",
            Drop::NoUrl => {
                "a live record none of whose values gave a URL to publish: its landing page \
                 is not in dc:identifier. Many of them: set platform or landing_template"
            }
            Drop::EmptyMetadata => {
                "a live record sent with an empty <metadata/>: rejected (no deletion); a \
                 version read before stays published"
            }
            Drop::InvalidHandle => {
                "a value spelled as a Handle whose prefix/suffix does not parse, so no \
                 landing page can be made of it"
            }
            Drop::RelationNotAUrl => "an EPrints dc:relation that is neither a URL nor a DOI",
            Drop::TemplateInvalidUrl => {
                "the landing_template filled with a record's value gives no valid URL"
            }
            Drop::RobotsDisallowed => {
                "the site's robots.txt disallows it for Googlebot or Bingbot: a sitemap listing \
                 it would be reported as an error, so it is left out (allow it in robots.txt to \
                 publish it)"
            }
            Drop::ContentFileLeftOut => {
                "a content file, left out as the repository's content_files = false says: the \
                 landing pages alone are listed"
            }
        }
    }

    /// Whether the reason is expected in a healthy repository (nothing to do), as against one
    /// that, when it counts many, asks for a setting or a word to the upstream.
    pub fn expected(self) -> bool {
        matches!(
            self,
            Drop::NotAUrl
                | Drop::PersistentId
                | Drop::Duplicate
                | Drop::Deleted
                | Drop::ContentFileLeftOut
        )
    }

    /// The reason in a line of text: `persistent_id: (expected) a DOI or Handle, ...`, as
    /// `check` and `export` print it.
    pub fn explained(self) -> String {
        let expected = if self.expected() { "(expected) " } else { "" };
        format!("{}: {expected}{}", self.as_str(), self.meaning())
    }
}

/// Counts of what was seen and why things were not published.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Record occurrences read (repeats across pages or sets included).
    pub records_seen: u64,
    /// Distinct records (by header identifier) after resolving repeats.
    pub records: u64,
    /// Distinct records whose newest version is deleted.
    pub deleted: u64,
    /// URLs published.
    pub urls: u64,
    /// Drops by reason, indexed like [`Drop::ALL`].
    pub drops: [u64; Drop::ALL.len()],
}

impl Stats {
    /// The count for one reason.
    pub fn dropped(&self, reason: Drop) -> u64 {
        self.drops[reason.index()]
    }

    /// Sets the count for one reason: one counted outside the inventory (records rejected for
    /// empty metadata, Q-35).
    pub fn set_dropped(&mut self, reason: Drop, count: u64) {
        self.drops[reason.index()] = count;
    }

    /// Sets the records whose newest version is deleted to `deleted`, counted outside the
    /// inventory: a store's records are read live, and its deleted ones counted
    /// (the store's `Store::deleted`). They count among the records (seen once each) and as
    /// the `deleted` drop, as in a harvest's inventory.
    pub fn set_deleted(&mut self, deleted: u64) {
        self.records_seen = self.records_seen.saturating_sub(self.deleted) + deleted;
        self.records = self.records.saturating_sub(self.deleted) + deleted;
        self.deleted = deleted;
        self.set_dropped(Drop::Deleted, deleted);
    }

    /// Counts one more of `reason`.
    pub fn drop(&mut self, reason: Drop) {
        self.drops[reason.index()] += 1;
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &Stats) {
        self.combine(other, u64::wrapping_add);
    }

    /// Takes `other`'s counts from these (they must be part of them).
    pub fn remove(&mut self, other: &Stats) {
        self.combine(other, u64::wrapping_sub);
    }

    fn combine(&mut self, other: &Stats, op: fn(u64, u64) -> u64) {
        self.records_seen = op(self.records_seen, other.records_seen);
        self.records = op(self.records, other.records);
        self.deleted = op(self.deleted, other.deleted);
        self.urls = op(self.urls, other.urls);
        for (mine, theirs) in self.drops.iter_mut().zip(other.drops) {
            *mine = op(*mine, theirs);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 22: every reason has its words and round-trips by name; a DOI reads as expected,
    /// not as an alarm.
    #[test]
    fn every_reason_says_what_it_means() {
        for reason in Drop::ALL {
            assert_eq!(Drop::named(reason.as_str()), Some(reason));
            assert!(reason.meaning().len() > 20, "{reason:?}");
        }
        assert_eq!(Drop::named("landing_page"), None);
        assert!(Drop::PersistentId.meaning().contains("rightly not a <loc>"));
        assert!(Drop::PersistentId.expected() && Drop::Deleted.expected());
        assert!(!Drop::OutOfScope.expected() && !Drop::NoUrl.expected());
    }
}

/// The record occurrences, by the order they were added, that a newer version of the same
/// record replaces (OAI-38).
#[derive(Clone, Debug)]
pub struct Superseded {
    bits: Vec<u64>,
    len: usize,
}

impl Superseded {
    /// Of `len` occurrences, those whose bit is set in `bits` (occurrence `i` is bit `i % 64`
    /// of word `i / 64`).
    pub fn new(bits: Vec<u64>, len: usize) -> Self {
        Self { bits, len }
    }

    /// Whether occurrence `i` (counted from 0 in the order added) lost to a newer version.
    pub fn contains(&self, i: usize) -> bool {
        self.bits
            .get(i / 64)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    /// The number of occurrences it covers.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it covers no occurrence.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}
