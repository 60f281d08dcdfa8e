//! The record of what was published, from which the next publish is patched rather than
//! rendered whole: each shard as written ([`PublishedShard`]), the sitemap as a whole
//! ([`PublishedSitemap`]), and the URLs several records publish ([`SharedUrl`]); the hash a
//! profiles' ledger records of each file ([`hash`], [`Hasher`]).

use oai_pmh::Datestamp;

use crate::Shard;
use crate::counts::Stats;

/// One shard of the published sitemap, as recorded at the publish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublishedShard {
    /// Its number: `sitemap-{number}.{ext}`.
    pub number: u32,
    /// Its length, uncompressed.
    pub len: u64,
    /// URLs in it.
    pub urls: u64,
    /// Its newest lastmod ([`Datestamp::pack`]).
    pub newest: Option<i64>,
    /// The CRC-32 of its uncompressed bytes: a patch reads only around the URLs that change,
    /// so the shard read must be byte for byte the one written. `None` in a state recorded
    /// before checksums were; such a sitemap is rendered whole once.
    pub crc: Option<u32>,
}

impl PublishedShard {
    /// The record of a shard as rendered.
    pub fn of(number: u32, shard: &Shard) -> Self {
        Self {
            number,
            len: shard.bytes.len() as u64,
            urls: shard.urls as u64,
            newest: shard.newest.map(Datestamp::pack),
            crc: Some(crc32fast::hash(&shard.bytes)),
        }
    }
}

/// The sitemap as last published: what a patch starts from. Everything a whole render depends
/// on besides the records is here, so that a patch is made only under the same conditions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublishedSitemap {
    /// Where its files are: the export folder, or the gateway's generation.
    pub place: String,
    /// The shards' extension: `xml` or `xml.gz`.
    pub ext: String,
    /// The landing rule its URLs were classified with (the gateway's `Landing::key`: the
    /// scope's text under Google's rule, as stores made before platforms recorded it).
    pub scope: String,
    /// The limits its shards were split with.
    pub max_urls: usize,
    /// The byte limit its shards were split with.
    pub max_bytes: usize,
    /// Its shards, in layout order.
    pub shards: Vec<PublishedShard>,
    /// The counts of what it publishes.
    pub stats: Stats,
}

/// A URL that several records publish (or one record twice).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedUrl {
    /// The URL.
    pub url: String,
    /// The datestamp of each record that publishes it, newest first ([`Datestamp::pack`]ed,
    /// `i64::MIN` for none): one per claim, so that when the newest leaves, the next is known.
    /// Fewer than two: no longer shared (none: no longer published).
    pub claims: Vec<i64>,
}

impl SharedUrl {
    /// Its lastmod: the newest datestamp among the records that publish it.
    pub fn newest(&self) -> Option<Datestamp> {
        self.claims
            .first()
            .copied()
            .and_then(Datestamp::unpack_option)
    }

    /// Adds a claim with datestamp `d`.
    pub fn claim(&mut self, d: Option<Datestamp>) {
        let d = Datestamp::pack_option(d);
        let at = self.claims.partition_point(|&c| c > d);
        self.claims.insert(at, d);
    }

    /// Takes back a claim with datestamp `d`; false when there is none.
    pub fn release(&mut self, d: Option<Datestamp>) -> bool {
        let d = Datestamp::pack_option(d);
        let at = self.claims.partition_point(|&c| c > d);
        let found = self.claims.get(at) == Some(&d);
        if found {
            self.claims.remove(at);
        }
        found
    }
}

/// The hash a ledger records of a file: its CRC-32, as the store records the sitemap's shards
/// (a patch checks every byte it reads of the published files; crc32fast runs on the CPU's
/// carry-less multiplication, where XXH3 as built ran at a third of its speed and took a sixth
/// of a patch).
pub fn hash(bytes: &[u8]) -> u64 {
    u64::from(crc32fast::hash(bytes))
}

/// [`hash`] of `len` bytes whose `hash` was known, after some ranges of them were overwritten:
/// each change is the range's offset, its old bytes and its new ones (as many). Only the
/// changed bytes are read: CRC-32 without its two inversions is linear, so the hash moves by
/// that CRC of old XOR new, carried to the end of the bytes as if zeros followed (what
/// `crc32fast`'s `combine` does to a CRC). A shard file that blanks out a few entries after
/// it was written is hashed again this way rather than read back whole.
///
/// # Panics
///
/// When a change's old and new bytes differ in length, or it reaches past `len`.
pub fn rehash<'a>(
    hash: u64,
    len: u64,
    changes: impl IntoIterator<Item = (u64, &'a [u8], &'a [u8])>,
) -> u64 {
    let mut crc = hash as u32;
    let (mut diff, mut zeros) = (Vec::new(), Vec::new());
    for (at, old, new) in changes {
        assert_eq!(old.len(), new.len(), "a change keeps its length");
        let n = old.len() as u64;
        let after = len.checked_sub(at + n).expect("a change within the bytes");
        diff.clear();
        diff.extend(old.iter().zip(new).map(|(o, n)| o ^ n));
        zeros.clear();
        zeros.resize(diff.len(), 0);
        // The CRC's linear part: the CRC of the bytes less that of as many zeros.
        let linear = crc32fast::hash(&diff) ^ crc32fast::hash(&zeros);
        let mut moved = crc32fast::Hasher::new_with_initial_len(linear, n);
        moved.combine(&crc32fast::Hasher::new_with_initial_len(0, after));
        crc ^= moved.finalize();
    }
    u64::from(crc)
}

/// The same hash, of bytes given in parts.
#[derive(Debug, Default)]
pub struct Hasher(crc32fast::Hasher);

impl Hasher {
    /// The hash of no bytes yet.
    pub fn new() -> Self {
        Self(crc32fast::Hasher::new())
    }

    /// Adds `bytes`.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The hash of the bytes added, as [`hash`] has it.
    pub fn finish(self) -> u64 {
        u64::from(self.0.finalize())
    }
}

#[cfg(test)]
mod rehash_tests {
    use proptest::prelude::*;

    use super::{hash, rehash};

    proptest! {
        #[test]
        fn a_rehash_is_the_hash_of_the_changed_bytes(
            bytes in proptest::collection::vec(any::<u8>(), 1..2000),
            cuts in proptest::collection::vec((any::<prop::sample::Index>(), 0usize..40, any::<u8>()), 0..6),
        ) {
            // Ranges that do not overlap, in order, each overwritten with one byte repeated.
            let mut ranges: Vec<(usize, usize, u8)> = cuts
                .iter()
                .map(|(at, n, fill)| {
                    let at = at.index(bytes.len());
                    (at, (*n).min(bytes.len() - at), *fill)
                })
                .collect();
            ranges.sort();
            let mut end = 0;
            ranges.retain(|&(at, n, _)| {
                let keep = at >= end;
                end = end.max(at + n);
                keep
            });
            let mut changed = bytes.clone();
            let olds: Vec<Vec<u8>> = ranges.iter().map(|&(at, n, _)| bytes[at..at + n].to_vec()).collect();
            let news: Vec<Vec<u8>> = ranges.iter().map(|&(_, n, fill)| vec![fill; n]).collect();
            for (&(at, n, _), new) in ranges.iter().zip(&news) {
                changed[at..at + n].copy_from_slice(new);
            }
            let changes = ranges
                .iter()
                .zip(olds.iter().zip(&news))
                .map(|(&(at, ..), (old, new))| (at as u64, old.as_slice(), new.as_slice()));
            prop_assert_eq!(
                rehash(hash(&bytes), bytes.len() as u64, changes),
                hash(&changed)
            );
        }
    }
}
