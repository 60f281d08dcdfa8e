//! The ledger of the profiles: a row for every live record, in the order a render from the store
//! reads them (by identifier): its DiWoo categories and, with a landing page, its entries'
//! lengths (one for each column of the collection, [`super::COLUMN_PROFILES`], which its head
//! lists), datestamp, the landing page's hash and whether its entries lost to another record's
//! of the same landing page; the claims of the URLs several records give,
//! with their categories; the counts the files were made with; and the length and hash of every
//! file published beside them. An incremental refresh merges the
//! changed records into the published files with it ([`super::merge`]) instead of reading every
//! stored record back.
//!
//! It is published as a hidden file among the files it describes ([`LEDGER`]; no route serves
//! it), so that it always goes with them: written into the same staging folder or generation,
//! swapped in with them, and gone with them. It names the sitemap published beside it (a
//! fingerprint of its recorded shards), so a patch starts only from the publish the store
//! recorded. Entries are keyed by identifier because an entry does not say which record it is
//! (a Signmap entry names its landing page, an OCX entry may only name its document).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::patch::{Unpatchable, refuse};
use crate::published::{PublishedShard, SharedUrl};

use super::Lens;

/// The ledger's file name, beside the profiles' files.
pub const LEDGER: &str = ".oai-bridge-ledger";

/// The first line of a ledger, with its format's version.
const MAGIC: &[u8] = b"oai-bridge profiles ledger 1\n";

/// What a ledger says besides its rows: the conditions of the publish and its counts.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Head {
    /// The job's settings key (the `oai-bridge` package's `Job::settings_key`): every setting
    /// that shapes the files.
    pub key: String,
    /// [`sitemap_fingerprint`] of the sitemap published with the ledger.
    pub sitemap: u64,
    /// The landing-page profiles' counts: published, no_landing_page, duplicate,
    /// ocx_published, ocx_no_type (the Signmap's `SignStats`).
    pub stats: [u64; 5],
    /// Each DiWoo category's counts: category, urls, requires_https, requires_lastmod.
    pub diwoo: Vec<[u64; 4]>,
    /// Every shard, list and sitemap stored through [`crate::profiles::files::Shards`].
    pub files: Vec<FileRecord>,
    /// The URLs several records give, with each claim's packed datestamp and categories (bits).
    pub shared: Vec<SharedClaims>,
    /// Rows that follow.
    pub rows: u64,
    /// The labels of the columns whose lengths each row carries, in order
    /// ([`super::COLUMN_PROFILES`]). A ledger written before they were listed has the three
    /// it was written with.
    #[serde(default = "first_columns")]
    pub columns: Vec<String>,
}

/// The columns of the ledgers written before their head listed them.
fn first_columns() -> Vec<String> {
    ["signmap", "ocx", "cdif"].map(String::from).to_vec()
}

/// The labels of this version's columns, as a head lists them.
pub fn columns() -> Vec<String> {
    (super::COLUMN_PROFILES.iter())
        .map(|p| p.spec().label.to_owned())
        .collect()
}

impl Head {
    /// The record of the file stored as `name`.
    pub(crate) fn file(&self, name: &str) -> Option<&FileRecord> {
        self.files.iter().find(|f| f.name == name)
    }
}

/// A URL several records give, and the claims: (packed datestamp, DiWoo categories as bits).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct SharedClaims {
    /// The URL.
    pub url: String,
    /// Each record's claim, newest first.
    pub claims: Vec<(i64, u32)>,
}

/// The URLs several records give (`shared`, the published inventory's, with each claim's
/// groups in `groups`), with their claims, in the ledger's order (by URL; claims newest first,
/// then by categories).
pub fn shared_claims(shared: &[SharedUrl], groups: &[Vec<u32>]) -> Vec<SharedClaims> {
    let mut shared: Vec<SharedClaims> = (shared.iter())
        .zip(groups)
        .map(|(s, groups)| SharedClaims {
            url: s.url.clone(),
            claims: sorted_claims(
                s.claims
                    .iter()
                    .copied()
                    .zip(groups.iter().copied())
                    .collect(),
            ),
        })
        .collect();
    shared.sort_unstable_by(|a, b| a.url.cmp(&b.url));
    shared
}

/// Claims in the ledger's order: newest first, then by categories.
pub fn sorted_claims(mut claims: Vec<(i64, u32)>) -> Vec<(i64, u32)> {
    claims.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    claims
}

/// A file as it was stored: its plain bytes' length and hash.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct FileRecord {
    /// Its name as stored (not as listed: a bucket's sink lists shards under other names).
    pub name: String,
    /// Its length, uncompressed.
    pub len: u64,
    /// [`hash`] of its uncompressed bytes.
    pub hash: u64,
}

// The hash a ledger records of a file, and of bytes given in parts: the files crate's, whose
// profiles' shard files are hashed as they are written.
pub use crate::published::{Hasher, hash};

/// Names the sitemap a ledger was published with: its shards as the store records them.
pub fn sitemap_fingerprint(shards: &[PublishedShard]) -> u64 {
    let mut text = Vec::with_capacity(shards.len() * 24);
    for s in shards {
        text.extend_from_slice(&s.number.to_le_bytes());
        text.extend_from_slice(&s.len.to_le_bytes());
        text.extend_from_slice(&s.crc.unwrap_or(0).to_le_bytes());
    }
    xxhash_rust::xxh3::xxh3_64(&text)
}

/// One record's row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Row<'a> {
    /// The record's identifier.
    pub id: &'a str,
    /// Its DiWoo categories, as bits (bit `i`: the job's `i`-th category).
    pub groups: u32,
    /// It has a landing page: the fields below are its entries'.
    pub landing: bool,
    /// Its entries lost to another record's of the same landing page.
    pub lost: bool,
    /// Another record gives the same landing page.
    pub dup: bool,
    /// Its entries' lengths by column (the CDIF document with its name's hash in front, as the
    /// collection writes them; 0 for none).
    pub lens: Lens,
    /// Its packed datestamp ([`oai_pmh::Datestamp::pack_option`]).
    pub datestamp: i64,
    /// The hash of its landing page (the one the collection tells pages apart by).
    pub hash: u128,
}

/// How many bytes `a` and `b` start with alike: 16 at a time while they match (identifiers share
/// most of theirs: writing a patch's million rows took 4.2% of its samples comparing byte by
/// byte, 3.0% this way).
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 16 <= n && a[i..i + 16] == b[i..i + 16] {
        i += 16;
    }
    i + (a[i..n].iter().zip(&b[i..n]))
        .take_while(|(x, y)| x == y)
        .count()
}

/// Rows written one after another, identifiers front-coded against the one before (a
/// repository's identifiers mostly share all but their last digits), numbers as varints.
#[derive(Clone, Debug, Default)]
pub struct Rows {
    bytes: Vec<u8>,
    last: String,
    count: u64,
}

impl Rows {
    /// No rows yet, with room for `bytes` of them (a patch's new ledger is about its old one's
    /// size: grown from nothing, the 30 MB of a million records' rows were copied at each
    /// doubling, into memory touched anew: 1,900 more page faults).
    pub(crate) fn with_capacity(bytes: usize) -> Self {
        Self {
            bytes: Vec::with_capacity(bytes),
            ..Self::default()
        }
    }

    /// Appends a row; identifiers must come in order.
    pub fn push(&mut self, row: &Row<'_>) {
        let id = row.id;
        let shared = common_prefix(self.last.as_bytes(), id.as_bytes());
        // A cut inside a character would leave a suffix that is not UTF-8.
        let shared = (0..=shared)
            .rev()
            .find(|&i| id.is_char_boundary(i))
            .unwrap_or(0);
        varint(&mut self.bytes, shared as u64);
        varint(&mut self.bytes, (id.len() - shared) as u64);
        self.bytes.extend_from_slice(&id.as_bytes()[shared..]);
        let flags = u64::from(row.landing) | u64::from(row.lost) << 1 | u64::from(row.dup) << 2;
        varint(&mut self.bytes, u64::from(row.groups) << 3 | flags);
        if row.landing {
            for len in row.lens {
                varint(&mut self.bytes, u64::from(len));
            }
            // Zigzag: a datestamp before 1970 packs negative.
            let d = row.datestamp;
            varint(&mut self.bytes, ((d << 1) ^ (d >> 63)) as u64);
            self.bytes.extend_from_slice(&row.hash.to_le_bytes());
        }
        self.last.clear();
        self.last.push_str(id);
        self.count += 1;
    }

    /// Appends `row` as a ledger had it: `encoded` ([`RowReader::encoded`]), front-coded
    /// against the row before it there, which must be the row pushed last. A patch keeps
    /// most rows as they were: copied, they are not coded again (encoding took 3% of a
    /// patch's samples at a million records).
    pub(crate) fn push_encoded(&mut self, row: &Row<'_>, encoded: &[u8]) {
        debug_assert!(*encoded == *Self::one(&self.last, row), "{row:?}");
        self.bytes.extend_from_slice(encoded);
        self.last.clear();
        self.last.push_str(row.id);
        self.count += 1;
    }

    /// `row` coded after a row of the identifier `last` (what [`Rows::push_encoded`] checks
    /// in debug builds).
    fn one(last: &str, row: &Row<'_>) -> Vec<u8> {
        let mut rows = Self {
            last: last.to_owned(),
            ..Self::default()
        };
        rows.push(row);
        rows.bytes
    }

    /// Rows pushed.
    pub(crate) fn count(&self) -> u64 {
        self.count
    }

    /// The rows' bytes, as [`RowReader`] reads them.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The ledger of these rows under `head` (whose `rows` it sets), with a hash of it all at
    /// its end.
    #[cfg(test)]
    pub fn encode(&self, head: Head) -> Vec<u8> {
        let [start, rows, end] = self.encode_parts(head);
        [&*start, &*rows, &*end].concat()
    }

    /// The ledger of these rows under `head`, in its three parts, one after another: what comes before the rows, the
    /// rows (not copied: a million records' rows are tens of megabytes), and the hash.
    pub fn encode_parts(&self, mut head: Head) -> [Cow<'_, [u8]>; 3] {
        head.rows = self.count;
        head.columns = columns();
        let json = serde_json::to_vec(&head).expect("a ledger's head serializes");
        let mut start = Vec::with_capacity(MAGIC.len() + json.len() + 1);
        start.extend_from_slice(MAGIC);
        start.extend_from_slice(&json);
        start.push(b'\n');
        let mut sum = xxhash_rust::xxh3::Xxh3Default::new();
        sum.update(&start);
        sum.update(&self.bytes);
        let end = sum.digest().to_le_bytes().to_vec();
        [
            Cow::Owned(start),
            Cow::Borrowed(&self.bytes),
            Cow::Owned(end),
        ]
    }
}

/// A ledger read back: its head, and its rows' bytes (read with [`RowReader`]).
///
/// # Errors
///
/// When `bytes` are not a ledger this version writes: its checksum, version or head do not
/// read, or its rows have other columns than this version's profiles ([`Unpatchable`]: a
/// profile was added or removed since, and every record is rendered again).
pub fn decode(bytes: &[u8]) -> Result<(Head, &[u8]), Unpatchable> {
    let Some((body, sum)) = bytes.split_last_chunk::<8>() else {
        return refuse("the profiles' ledger is cut short");
    };
    if xxhash_rust::xxh3::xxh3_64(body) != u64::from_le_bytes(*sum) {
        return refuse("the profiles' ledger is not as it was written");
    }
    let Some(rest) = body.strip_prefix(MAGIC) else {
        return refuse("the profiles' ledger is of another format");
    };
    let end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
    let head: Head = serde_json::from_slice(&rest[..end])
        .map_err(|e| Unpatchable(format!("the profiles' ledger cannot be read: {e}")))?;
    if head.columns != columns() {
        return refuse(format!(
            "the profiles' ledger has the columns {} and this version {}",
            head.columns.join(", "),
            columns().join(", ")
        ));
    }
    Ok((head, rest.get(end + 1..).unwrap_or_default()))
}

/// Reads rows front to back, the current one held ([`RowReader::row`]) until
/// [`RowReader::advance`]; identifiers must come in strictly ascending order.
#[derive(Debug)]
pub struct RowReader<'a> {
    rest: &'a [u8],
    /// The row held, as coded.
    encoded: &'a [u8],
    id: String,
    /// The row held, but its identifier (`id`).
    row: Row<'static>,
    /// A row is held.
    held: bool,
    /// Rows read.
    read: u64,
}

impl<'a> RowReader<'a> {
    /// A reader of `rows` ([`Rows::as_bytes`]), holding the first.
    ///
    /// # Errors
    ///
    /// When the first row does not read ([`Unpatchable`]).
    pub fn new(rows: &'a [u8]) -> Result<Self, Unpatchable> {
        let mut reader = Self {
            rest: rows,
            encoded: &[],
            id: String::new(),
            row: Row::default(),
            held: false,
            read: 0,
        };
        reader.advance()?;
        Ok(reader)
    }

    /// The row held, `None` past the last.
    pub fn row(&self) -> Option<Row<'_>> {
        self.held.then_some(Row {
            id: &self.id,
            ..self.row
        })
    }

    /// The row held, as its ledger codes it: against the row before it there
    /// ([`Rows::push_encoded`]).
    pub(crate) fn encoded(&self) -> &'a [u8] {
        self.encoded
    }

    /// Holds the next row.
    ///
    /// # Errors
    ///
    /// When the next row does not read ([`Unpatchable`]).
    pub fn advance(&mut self) -> Result<(), Unpatchable> {
        self.held = false;
        if self.rest.is_empty() {
            return Ok(());
        }
        let start = self.rest;
        let damaged = || Unpatchable("the profiles' ledger holds a damaged row".into());
        let shared = self.varint().ok_or_else(damaged)? as usize;
        let len = self.varint().ok_or_else(damaged)? as usize;
        let suffix = self.rest.get(..len).ok_or_else(damaged)?;
        let suffix = std::str::from_utf8(suffix).map_err(|_| damaged())?;
        if shared > self.id.len() || !self.id.is_char_boundary(shared) {
            return Err(damaged());
        }
        // Byte order, as the store reads its records: past the shared prefix, the new suffix
        // must be above the old one. Their first bytes mostly tell (the prefix is as long as
        // the identifiers share), without a call to compare the rest: 2% of a patch's
        // instructions went to comparing whole suffixes.
        let was = &self.id.as_bytes()[shared..];
        let ascending = match (suffix.as_bytes().first(), was.first()) {
            (Some(new), Some(old)) if new != old => new > old,
            _ => suffix.as_bytes() > was,
        };
        if self.read > 0 && !ascending {
            return refuse("the profiles' ledger is not in identifier order");
        }
        self.id.truncate(shared);
        self.id.push_str(suffix);
        self.rest = &self.rest[len..];
        let flags = self.varint().ok_or_else(damaged)?;
        let mut row = Row {
            groups: u32::try_from(flags >> 3).map_err(|_| damaged())?,
            landing: flags & 1 != 0,
            lost: flags & 2 != 0,
            dup: flags & 4 != 0,
            ..Row::default()
        };
        if row.landing {
            for l in &mut row.lens {
                *l = u32::try_from(self.varint().ok_or_else(damaged)?).map_err(|_| damaged())?;
            }
            let z = self.varint().ok_or_else(damaged)?;
            row.datestamp = ((z >> 1) as i64) ^ -((z & 1) as i64);
            let (hash, rest) = self.rest.split_first_chunk::<16>().ok_or_else(damaged)?;
            row.hash = u128::from_le_bytes(*hash);
            self.rest = rest;
        }
        self.row = row;
        self.encoded = &start[..start.len() - self.rest.len()];
        self.held = true;
        self.read += 1;
        Ok(())
    }

    /// The next varint: at most 10 bytes, the last without its high bit.
    #[inline]
    fn varint(&mut self) -> Option<u64> {
        // A byte alone is most of them (a prefix's and a suffix's lengths, the flags).
        let (&first, rest) = self.rest.split_first()?;
        if first < 0x80 {
            self.rest = rest;
            return Some(u64::from(first));
        }
        let mut value = u64::from(first & 0x7f);
        for (i, &b) in rest.iter().enumerate().take(9) {
            value |= u64::from(b & 0x7f) << (7 * (i + 1));
            if b < 0x80 {
                self.rest = &rest[i + 1..];
                return Some(value);
            }
        }
        None
    }
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// `ledger` with its head's JSON edited by `edit`, its checksum made again.
    fn with_head(ledger: &[u8], edit: impl Fn(&str) -> String) -> Vec<u8> {
        let body = &ledger[MAGIC.len()..ledger.len() - 8];
        let end = memchr::memchr(b'\n', body).unwrap();
        let head = edit(std::str::from_utf8(&body[..end]).unwrap());
        let mut out = [MAGIC, head.as_bytes(), &body[end..]].concat();
        let sum = xxhash_rust::xxh3::xxh3_64(&out);
        out.extend_from_slice(&sum.to_le_bytes());
        out
    }

    /// A ledger lists its rows' columns; one written before they were listed has the three of
    /// then, which are this version's; one of other columns (a profile with a column added or
    /// removed since) is refused, and the refusal names both.
    #[test]
    fn a_ledger_of_other_columns_is_refused() {
        assert_eq!(columns(), ["signmap", "ocx", "cdif"]);
        let mut rows = Rows::default();
        rows.push(&Row {
            id: "oai:r:1",
            landing: true,
            lens: [10; super::super::COLUMNS],
            ..Row::default()
        });
        let ledger = rows.encode(Head::default());
        let listed = r#","columns":["signmap","ocx","cdif"]"#;
        let text = std::str::from_utf8(&ledger).unwrap_or_default();
        assert!(String::from_utf8_lossy(&ledger).contains(listed), "{text}");

        let unlisted = with_head(&ledger, |head| head.replace(listed, ""));
        let (head, body) = decode(&unlisted).unwrap();
        assert_eq!(head.columns, columns());
        assert_eq!(RowReader::new(body).unwrap().row().unwrap().lens, [10; 3]);

        let added = with_head(&ledger, |head| {
            head.replace(r#""cdif"]"#, r#""cdif","new"]"#)
        });
        let why = decode(&added).unwrap_err().0;
        assert_eq!(
            why,
            "the profiles' ledger has the columns signmap, ocx, cdif, new and this version \
             signmap, ocx, cdif"
        );
        let removed = with_head(&ledger, |head| head.replace(r#","ocx""#, ""));
        assert!(decode(&removed).is_err());
    }

    /// Identifiers must come in strictly ascending byte order: one below, equal to or a
    /// prefix of the one before is refused, one the one before is a prefix of is read.
    #[test]
    fn rows_out_of_order_are_refused() {
        let read = |ids: &[&str]| -> Result<Vec<String>, Unpatchable> {
            let mut rows = Rows::default();
            for id in ids {
                rows.push(&Row {
                    id,
                    ..Row::default()
                });
            }
            let mut reader = RowReader::new(rows.as_bytes())?;
            let mut read = Vec::new();
            while let Some(row) = reader.row() {
                read.push(row.id.to_owned());
                reader.advance()?;
            }
            Ok(read)
        };
        let order = "the profiles' ledger is not in identifier order";
        for ids in [["oai:b", "oai:a"], ["oai:a", "oai:a"], ["oai:ab", "oai:a"]] {
            assert_eq!(read(&ids).unwrap_err().0, order, "{ids:?}");
        }
        for ids in [
            ["oai:a", "oai:ab"],
            ["oai:a", "oai:b"],
            ["oai:éa", "oai:éb"],
        ] {
            assert_eq!(read(&ids).unwrap(), ids, "{ids:?}");
        }
        // Past the shared prefix, cut back to a character boundary, the first bytes are alike
        // (é and ê both start with 0xC3): the rest compares.
        assert_eq!(read(&["oai:é", "oai:ê"]).unwrap(), ["oai:é", "oai:ê"]);
        assert_eq!(read(&["oai:ê", "oai:é"]).unwrap_err().0, order);
    }

    proptest! {
        /// Rows read back as written, whatever their identifiers share (less than 16 bytes, and
        /// more: [`common_prefix`] compares 16 at a time); a changed byte is found.
        #[test]
        fn rows_round_trip(
            mut ids in prop::collection::btree_set(
                "(oai:r:|oai:repository.example.org:|é|a)[0-9é:/]{0,24}",
                0..60,
            ),
            fields in prop::collection::vec(
                (any::<Lens>(), any::<i64>(), any::<u128>(), any::<u32>(), 0u8..8),
                60,
            ),
            flip in any::<prop::sample::Index>(),
        ) {
            let ids: Vec<String> = std::mem::take(&mut ids).into_iter().collect();
            let rows: Vec<Row<'_>> = ids
                .iter()
                .zip(&fields)
                .map(|(id, &(lens, datestamp, hash, groups, flags))| {
                    let landing = flags & 1 != 0;
                    Row {
                        id,
                        groups: groups >> 3,
                        landing,
                        lost: flags & 2 != 0,
                        dup: flags & 4 != 0,
                        // Only a row with a landing page has them.
                        lens: if landing { lens } else { [0; super::super::COLUMNS] },
                        datestamp: if landing { datestamp } else { 0 },
                        hash: if landing { hash } else { 0 },
                    }
                })
                .collect();
            let mut written = Rows::default();
            for row in &rows {
                written.push(row);
            }
            let head = Head { key: "k".into(), sitemap: 7, ..Head::default() };
            let bytes = written.encode(head.clone());
            let (read, body) = decode(&bytes).unwrap();
            prop_assert_eq!(read, Head { rows: ids.len() as u64, columns: columns(), ..head });
            let mut reader = RowReader::new(body).unwrap();
            for row in &rows {
                prop_assert_eq!(reader.row(), Some(*row));
                reader.advance().unwrap();
            }
            prop_assert!(reader.row().is_none());
            let mut damaged = bytes.clone();
            damaged[flip.index(bytes.len())] ^= 1;
            prop_assert!(decode(&damaged).is_err());
        }
    }
}
