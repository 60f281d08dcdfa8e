//! What one refresh changed of the published landing pages: each URL created, updated (its
//! lastmod changed) or deleted, with its lastmod, and when the gateway saw it. ResourceSync's
//! Change Lists ([`crate::server::resourcesync`]) and IndexNow's pings are made of it.
//!
//! Two ways to the same set. A patched refresh knows the URLs its changed records take out of
//! the sitemap and put into it ([`from_patch`]); a whole render knows nothing of the publish
//! before, so the previous generation's sitemap and the new one are compared ([`diff`]): both
//! list every URL once, sorted by its bytes in every shard and across the shards in the order
//! of their first URLs (the stable layout's ranges, [`crate::render::sitemap::Layout`]), so one
//! merge of the two streams is exact, O(n), and holds one shard of each in memory.
//!
//! Memory stays bounded at any number of changes: past [`HELD_BYTES`] they are written to a
//! spill file ([`crate::spill`]) and read back from there.

use std::cmp::Ordering;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use oai_pmh::Datestamp;

use crate::error::Error;
use crate::spill::{Budget, Folder, Run, RunReader, RunWriter};

/// Bytes of changes held in memory before they go to a spill file: some 50,000 changes, a 5%
/// refresh of a million records.
const HELD_BYTES: usize = 8 << 20;

/// What happened to a landing page, as ResourceSync's `rs:md change` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    /// Published now, not before.
    Created,
    /// Published before and now, with another lastmod.
    Updated,
    /// Published before, not now.
    Deleted,
}

impl Kind {
    /// Every kind, in the order of [`Kind::index`].
    pub(crate) const ALL: [Kind; 3] = [Kind::Created, Kind::Updated, Kind::Deleted];

    /// The value of ResourceSync's `rs:md change` (and of the metrics' label).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Created => "created",
            Kind::Updated => "updated",
            Kind::Deleted => "deleted",
        }
    }

    /// Its place in [`Kind::ALL`] (and in a spill file).
    pub(crate) fn index(self) -> usize {
        match self {
            Kind::Created => 0,
            Kind::Updated => 1,
            Kind::Deleted => 2,
        }
    }
}

/// One landing page's change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Change {
    /// The landing page, as published.
    pub(crate) url: String,
    /// What happened to it.
    pub(crate) kind: Kind,
    /// Its lastmod: the datestamp published now (created, updated), or the one it was last
    /// published with (deleted).
    pub(crate) lastmod: Option<Datestamp>,
}

impl Change {
    fn bytes(&self) -> usize {
        self.url.len() + std::mem::size_of::<Change>()
    }
}

/// One refresh's changes, in URL order, each URL at most once.
#[derive(Debug)]
pub(crate) struct Changes {
    /// When the gateway saw them: the refresh's generation was made then.
    pub(crate) seen: SystemTime,
    /// A first harvest: every page is new, and none is a change a consumer is told of (it
    /// reads the Resource List instead); such changes hold nothing.
    pub(crate) baseline: bool,
    counts: [u64; 3],
    held: Held,
}

#[derive(Debug)]
enum Held {
    Memory(Vec<Change>),
    Spilled(Run),
}

impl Changes {
    /// The changes of a first harvest: none.
    pub(crate) fn baseline(seen: SystemTime) -> Self {
        Self {
            seen,
            baseline: true,
            counts: [0; 3],
            held: Held::Memory(Vec::new()),
        }
    }

    /// How many there are.
    pub(crate) fn len(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// How many are of `kind`.
    pub(crate) fn count(&self, kind: Kind) -> u64 {
        self.counts[kind.index()]
    }

    /// The changes, in URL order; read from their spill file when they were many (a read
    /// error ends the iteration with it).
    pub(crate) fn iter(&self) -> Result<Iter<'_>, Error> {
        Ok(match &self.held {
            Held::Memory(changes) => Iter::Memory(changes.iter()),
            Held::Spilled(run) => Iter::Spilled(Some(run.read()?)),
        })
    }
}

/// The changes of [`Changes::iter`].
pub(crate) enum Iter<'a> {
    Memory(std::slice::Iter<'a, Change>),
    Spilled(Option<RunReader>),
}

impl Iterator for Iter<'_> {
    type Item = Result<Change, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Memory(changes) => changes.next().cloned().map(Ok),
            Iter::Spilled(reader) => {
                let read = read_change(reader.as_mut()?).transpose();
                if !matches!(read, Some(Ok(_))) {
                    *reader = None;
                }
                read
            }
        }
    }
}

fn read_change(r: &mut RunReader) -> Result<Option<Change>, Error> {
    let Some(kind) = r.varint_or_end()? else {
        return Ok(None);
    };
    let kind = Kind::ALL[(kind as usize).min(2)];
    let lastmod = Datestamp::unpack_option(r.fixed()? as i64);
    let mut url = vec![0; r.varint()? as usize];
    r.exact(&mut url)?;
    let url =
        String::from_utf8(url).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into());
    Ok(Some(Change { url, kind, lastmod }))
}

fn write_change(w: &mut RunWriter, c: &Change) -> Result<(), Error> {
    w.varint(c.kind.index() as u64)?;
    w.fixed(Datestamp::pack_option(c.lastmod) as u64)?;
    w.varint(c.url.len() as u64)?;
    Ok(w.bytes(c.url.as_bytes())?)
}

/// Gathers one refresh's changes, pushed in URL order: in memory, then in a spill file of
/// `budget`'s folder once they pass [`HELD_BYTES`].
pub(crate) struct Recorder {
    folder: Folder,
    held: Vec<Change>,
    held_bytes: usize,
    limit: usize,
    spilled: Option<RunWriter>,
    counts: [u64; 3],
}

impl Recorder {
    /// A recorder spilling into `budget`'s folder.
    pub(crate) fn new(budget: &Budget) -> Self {
        Self::holding(budget, HELD_BYTES)
    }

    fn holding(budget: &Budget, limit: usize) -> Self {
        Self {
            folder: Folder::new(budget),
            held: Vec::new(),
            held_bytes: 0,
            limit,
            spilled: None,
            counts: [0; 3],
        }
    }

    /// Adds `change`, which comes after every change pushed before it.
    pub(crate) fn push(&mut self, change: Change) -> Result<(), Error> {
        self.counts[change.kind.index()] += 1;
        if let Some(w) = &mut self.spilled {
            return write_change(w, &change);
        }
        self.held_bytes += change.bytes();
        self.held.push(change);
        if self.held_bytes > self.limit {
            let mut w = self.folder.create("changes")?;
            for c in self.held.drain(..) {
                write_change(&mut w, &c)?;
            }
            self.held = Vec::new();
            self.spilled = Some(w);
        }
        Ok(())
    }

    /// The changes pushed, seen at `seen`.
    pub(crate) fn finish(self, seen: SystemTime) -> Result<Changes, Error> {
        let held = match self.spilled {
            Some(w) => Held::Spilled(w.finish()?),
            None => Held::Memory(self.held),
        };
        Ok(Changes {
            seen,
            baseline: false,
            counts: self.counts,
            held,
        })
    }
}

/// The change from `before` (what was published, in URL order) to `after` (what is, likewise),
/// pushed into `recorder` in URL order: each URL only in `after` created, only in `before`
/// deleted, in both with another lastmod updated. Either stream's error stops the merge.
pub(crate) fn diff<S: AsRef<str> + Into<String>>(
    before: impl IntoIterator<Item = Result<(S, Option<Datestamp>), Error>>,
    after: impl IntoIterator<Item = Result<(S, Option<Datestamp>), Error>>,
    recorder: &mut Recorder,
) -> Result<(), Error> {
    let mut before = before.into_iter();
    let mut after = after.into_iter();
    let mut old = before.next().transpose()?;
    let mut new = after.next().transpose()?;
    loop {
        let order = match (&old, &new) {
            (None, None) => return Ok(()),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some((o, _)), Some((n, _))) => o.as_ref().cmp(n.as_ref()),
        };
        match order {
            Ordering::Less => {
                let (url, lastmod) = old.take().expect("compared");
                recorder.push(Change {
                    url: url.into(),
                    kind: Kind::Deleted,
                    lastmod,
                })?;
                old = before.next().transpose()?;
            }
            Ordering::Greater => {
                let (url, lastmod) = new.take().expect("compared");
                recorder.push(Change {
                    url: url.into(),
                    kind: Kind::Created,
                    lastmod,
                })?;
                new = after.next().transpose()?;
            }
            Ordering::Equal => {
                let (_, was) = old.take().expect("compared");
                let (url, lastmod) = new.take().expect("compared");
                if was != lastmod {
                    recorder.push(Change {
                        url: url.into(),
                        kind: Kind::Updated,
                        lastmod,
                    })?;
                }
                old = before.next().transpose()?;
                new = after.next().transpose()?;
            }
        }
    }
}

/// The changes of a patched refresh: `removed` (the URLs its changed records took out of the
/// sitemap, with the lastmod they were published with) and `added` (those they put in, with
/// their lastmod now), each sorted by URL and each URL at most once in each. A URL in both is
/// updated when its lastmod changed, and no change otherwise (a record harvested again as it
/// was).
pub(crate) fn from_sorted<'a>(
    removed: &'a [(String, Option<Datestamp>)],
    added: &'a [(String, Option<Datestamp>)],
    recorder: &mut Recorder,
) -> Result<(), Error> {
    let entries =
        |list: &'a [(String, Option<Datestamp>)]| list.iter().map(|(u, d)| Ok::<_, Error>((u, *d)));
    diff(entries(removed), entries(added), recorder)
}

/// The URLs and lastmods of a generation's plain sitemap shards (`paths`, in any order), in
/// URL order: the shards read one at a time, in the order of their first URLs. An entry out of
/// order is an error, so a layout that broke the promise [`diff`] relies on is never taken for
/// changes.
pub(crate) fn published(
    paths: Vec<PathBuf>,
) -> Result<impl Iterator<Item = Result<(String, Option<Datestamp>), Error>>, Error> {
    let mut firsts = Vec::with_capacity(paths.len());
    for path in paths {
        let first = first_url(&path)?;
        firsts.push((first, path));
    }
    // A shard without entries is never written; one that is sorts first and yields nothing.
    firsts.sort();
    let mut shards = firsts.into_iter().map(|(_, path)| path);
    let mut entries: std::vec::IntoIter<(String, Option<Datestamp>)> = Vec::new().into_iter();
    let mut current = PathBuf::new();
    let mut last: Option<String> = None;
    let mut failed = false;
    Ok(std::iter::from_fn(move || {
        if failed {
            return None;
        }
        loop {
            if let Some((url, lastmod)) = entries.next() {
                if last.as_deref().is_some_and(|l| l >= url.as_str()) {
                    failed = true;
                    return Some(Err(Error::Unordered {
                        path: current.clone(),
                        url,
                    }));
                }
                last = Some(url.clone());
                return Some(Ok((url, lastmod)));
            }
            current = shards.next()?;
            match read_shard(&current) {
                Ok(read) => entries = read.into_iter(),
                Err(e) => {
                    failed = true;
                    return Some(Err(e));
                }
            }
        }
    }))
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    Error::io("cannot read the sitemap shard", path)
}

/// The first URL of a shard, from its first kilobytes.
fn first_url(path: &Path) -> Result<String, Error> {
    use std::io::Read;
    let mut head = Vec::with_capacity(8192);
    let file = std::fs::File::open(path).map_err(io_error(path))?;
    // An entry is at most a 2,047-character URL escaped (a few times longer) and a lastmod.
    file.take(16 * 1024)
        .read_to_end(&mut head)
        .map_err(io_error(path))?;
    Ok(loc_of(&head).unwrap_or_default())
}

/// The text of the first `<loc>` in `bytes`, unescaped.
fn loc_of(bytes: &[u8]) -> Option<String> {
    let start = memchr::memmem::find(bytes, b"<loc>")? + 5;
    let len = memchr::memchr(b'<', &bytes[start..])?;
    let text = std::str::from_utf8(&bytes[start..start + len]).ok()?;
    Some(quick_xml::escape::unescape(text).ok()?.into_owned())
}

/// Every entry of one plain sitemap shard, as written ([`crate::render::sitemap::write_url`]).
fn read_shard(path: &Path) -> Result<Vec<(String, Option<Datestamp>)>, Error> {
    let bytes = std::fs::read(path).map_err(io_error(path))?;
    let entries = crate::render::sitemap::entries(&bytes)
        .map(|entry| {
            let url = loc_of(entry).unwrap_or_default();
            let lastmod = memchr::memmem::find(entry, b"<lastmod>").and_then(|at| {
                let rest = &entry[at + 9..];
                let len = memchr::memchr(b'<', rest)?;
                Datestamp::parse(std::str::from_utf8(&rest[..len]).ok()?)
            });
            (url, lastmod)
        })
        .collect();
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(text: &str) -> Option<Datestamp> {
        Datestamp::parse(text)
    }

    fn urls(list: &[(&str, &str)]) -> Vec<(String, Option<Datestamp>)> {
        list.iter().map(|(u, t)| (u.to_string(), d(t))).collect()
    }

    fn all(changes: &Changes) -> Vec<(String, Kind)> {
        (changes.iter().unwrap())
            .map(|c| c.map(|c| (c.url, c.kind)).unwrap())
            .collect()
    }

    /// The changes from `before` to `after`, held up to `limit` bytes; spilled into the system's
    /// temporary folder past it (the file goes with the changes).
    fn recorded(limit: usize, before: &[(&str, &str)], after: &[(&str, &str)]) -> Changes {
        let budget = Budget::new(std::env::temp_dir(), 1);
        let mut recorder = Recorder::holding(&budget, limit);
        let (mut before, mut after) = (urls(before), urls(after));
        before.sort();
        after.sort();
        from_sorted(&before, &after, &mut recorder).unwrap();
        recorder.finish(SystemTime::UNIX_EPOCH).unwrap()
    }

    #[test]
    fn a_patch_gives_created_updated_and_deleted_in_url_order() {
        let before = [
            ("https://h/b", "2020-01-01"),
            ("https://h/a", "2020-01-01"),
            ("https://h/c", "2020-01-01"),
        ];
        let after = [
            ("https://h/d", "2021-01-01"),
            ("https://h/b", "2021-01-01"),
            ("https://h/c", "2020-01-01"),
        ];
        for limit in [usize::MAX, 0] {
            let changes = recorded(limit, &before, &after);
            assert_eq!(
                all(&changes),
                [
                    ("https://h/a".to_owned(), Kind::Deleted),
                    ("https://h/b".to_owned(), Kind::Updated),
                    ("https://h/d".to_owned(), Kind::Created),
                ],
                "held up to {limit} bytes"
            );
            assert_eq!((changes.len(), changes.count(Kind::Updated)), (3, 1));
            // A record harvested again as it was is no change.
            assert!(!all(&changes).iter().any(|(u, _)| u == "https://h/c"));
        }
    }

    #[test]
    fn many_changes_spill_and_read_back_as_held() {
        let after: Vec<(String, String)> = (0..2000)
            .map(|i| (format!("https://h/{i:05}"), "2021-01-01".to_owned()))
            .collect();
        let after: Vec<(&str, &str)> = after
            .iter()
            .map(|(u, t)| (u.as_str(), t.as_str()))
            .collect();
        let spilled = recorded(1000, &[], &after);
        assert!(matches!(spilled.held, Held::Spilled(_)));
        let held = recorded(usize::MAX, &[], &after);
        assert_eq!(all(&spilled), all(&held));
        let first = spilled.iter().unwrap().next().unwrap().unwrap();
        assert_eq!(first.lastmod, d("2021-01-01"));
    }

    #[test]
    fn shards_are_read_in_the_order_of_their_first_urls() {
        let dir = tempfile::tempdir().unwrap();
        let shard = |name: &str, urls: &[&str]| {
            let mut bytes = Vec::new();
            bytes.extend_from_slice(crate::render::sitemap::XML_DECL.as_bytes());
            bytes.extend_from_slice(crate::render::sitemap::URLSET_OPEN.as_bytes());
            let mut date = String::new();
            for u in urls {
                crate::render::sitemap::write_url(&mut bytes, u, d("2020-02-02"), &mut date);
            }
            bytes.extend_from_slice(crate::render::sitemap::URLSET_CLOSE.as_bytes());
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            path
        };
        let paths = vec![
            shard("sitemap-1.xml", &["https://h/m?a=1&b=2", "https://h/z"]),
            shard("sitemap-2.xml", &["https://h/a", "https://h/c"]),
        ];
        let read: Vec<String> = published(paths.clone())
            .unwrap()
            .map(|r| r.unwrap().0)
            .collect();
        assert_eq!(
            read,
            [
                "https://h/a",
                "https://h/c",
                "https://h/m?a=1&b=2",
                "https://h/z"
            ]
        );
        let out_of_order = vec![shard("sitemap-3.xml", &["https://h/b", "https://h/a"])];
        let read: Vec<_> = published(out_of_order).unwrap().collect();
        assert!(
            matches!(read.last(), Some(Err(Error::Unordered { .. }))),
            "{read:?}"
        );
    }
}
