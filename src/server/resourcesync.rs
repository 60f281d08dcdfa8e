//! ResourceSync (ANSI/NISO Z39.99-2017) for each repository: what a synchronising aggregator
//! reads to keep a copy of the landing pages, deletions included (which OAI-PMH loses when a
//! repository keeps none).
//!
//! - The Change Lists are files of the generation (`changelist-{n}.xml`, and
//!   `changelist-index.xml` when there are several): one entry per landing page each refresh
//!   created, updated or deleted ([`crate::changes`]), `datetime` when the gateway saw it,
//!   in forward chronological order. Each refresh carries the previous generation's lists
//!   forward (hard-linked when unchanged, as shards are), appends its changes to the last one
//!   (a new one once it is full, within the sitemap limits), and retires what is older than
//!   `changelist_days`, oldest first. Being files of the generation, they survive a restart,
//!   go up to the bucket and reach a fleet's followers with the rest, with nothing of their
//!   own to keep in step.
//! - The Capability List, the Resource List (an index of one list per sitemap shard when there
//!   are several) and the gateway's Source Description are made as they are asked for, from
//!   the generation served: a Resource List is the sitemap shard's bytes under ResourceSync's
//!   head, so it costs no refresh time and no disk.

use std::time::SystemTime;

use bytes::Bytes;
use url::Url;

use super::generation::{ChangeListFile, Generation, Writer};
use crate::changes::{Change, Changes};
use crate::error::Error;
use crate::render::FilesError;
use crate::render::sitemap::{self, Limits};

/// ResourceSync's namespace.
const RS: &str = "http://www.openarchives.org/rs/terms/";
/// A `urlset` with ResourceSync's namespace.
const URLSET_OPEN: &str = "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" \
    xmlns:rs=\"http://www.openarchives.org/rs/terms/\">\n";
/// A `sitemapindex` with ResourceSync's namespace.
const INDEX_OPEN: &str = "<sitemapindex xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" \
    xmlns:rs=\"http://www.openarchives.org/rs/terms/\">\n";
const INDEX_CLOSE: &str = "</sitemapindex>\n";

/// The Capability List of a repository.
pub(crate) const CAPABILITY_LIST: &str = "capabilitylist.xml";
/// Its Resource List (or Resource List Index).
pub(crate) const RESOURCE_LIST: &str = "resourcelist.xml";
/// The Change List Index, when there is more than one Change List.
pub(crate) const CHANGE_LIST_INDEX: &str = "changelist-index.xml";
/// The gateway's Source Description, at the root of its public URL.
pub(crate) const SOURCE_DESCRIPTION: &str = ".well-known/resourcesync";

/// A ResourceSync document of a repository, by its file name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Document {
    /// `capabilitylist.xml`.
    CapabilityList,
    /// `resourcelist.xml`: the list, or its index when the sitemap has several shards.
    ResourceList,
    /// `resourcelist-{n}.xml`: the list of sitemap shard `n`.
    ResourceListShard(u32),
    /// `changelist-{n}.xml` or `changelist-index.xml`: a file of the generation.
    Change,
}

impl Document {
    /// The document `name` names, if any.
    pub(crate) fn parse(name: &str) -> Option<Document> {
        match name {
            CAPABILITY_LIST => return Some(Document::CapabilityList),
            RESOURCE_LIST => return Some(Document::ResourceList),
            CHANGE_LIST_INDEX => return Some(Document::Change),
            _ => {}
        }
        let number = |prefix: &str| {
            let n = name.strip_prefix(prefix)?.strip_suffix(".xml")?;
            let plain =
                !n.is_empty() && !n.starts_with('0') && n.bytes().all(|b| b.is_ascii_digit());
            plain.then(|| n.parse::<u32>().ok()).flatten()
        };
        if let Some(n) = number("resourcelist-") {
            return Some(Document::ResourceListShard(n));
        }
        number("changelist-").map(|_| Document::Change)
    }
}

/// The name of Change List `number`.
pub(crate) fn changelist_name(number: u32) -> String {
    format!("changelist-{number}.xml")
}

/// A W3C datetime in UTC, to the second, of seconds since the Unix epoch.
fn datetime(secs: u64) -> String {
    oai_pmh::Datestamp::from_unix(secs as i64).to_string()
}

fn secs(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `<rs:ln rel="up">` to the repository's Capability List, and the `rs:md` line `md`.
fn head(open: &str, public_url: &Url, md: &str) -> String {
    let up = sitemap::escape(public_url.as_str());
    format!(
        "{}{open}<rs:ln rel=\"up\" href=\"{up}{CAPABILITY_LIST}\"/>\n{md}\n",
        sitemap::XML_DECL
    )
}

/// The `rs:md` of a Change List.
fn changelist_md(list: &ChangeListFile) -> String {
    let until = (list.until)
        .map(|u| format!(" until=\"{}\"", datetime(u)))
        .unwrap_or_default();
    format!(
        "<rs:md capability=\"changelist\" from=\"{}\"{until}/>",
        datetime(list.from)
    )
}

/// One Change List entry.
fn write_change(out: &mut Vec<u8>, change: &Change, seen: &str, date: &mut String) {
    let lastmod = sitemap::lastmod_text(change.lastmod, date);
    sitemap::write_url_open(out, &change.url, lastmod);
    out.extend_from_slice(b"<rs:md change=\"");
    out.extend_from_slice(change.kind.as_str().as_bytes());
    out.extend_from_slice(b"\" datetime=\"");
    out.extend_from_slice(seen.as_bytes());
    out.extend_from_slice(b"\"/></url>\n");
}

/// The entries of a Change List file: each `<url>` to its line feed.
fn entries(file: &[u8]) -> impl Iterator<Item = &[u8]> {
    const END: &[u8] = b"</url>\n";
    let start = memchr::memmem::find(file, b"<url>").unwrap_or(file.len());
    let body = &file[start..];
    let mut at = 0;
    memchr::memmem::find_iter(body, END).map(move |end| {
        let entry = &body[at..end + END.len()];
        at = end + END.len();
        entry
    })
}

/// When an entry was seen (its `datetime`), in seconds since the Unix epoch.
fn entry_seen(entry: &[u8]) -> Option<u64> {
    let at = memchr::memmem::find(entry, b"datetime=\"")? + 10;
    let len = memchr::memchr(b'"', &entry[at..])?;
    let text = std::str::from_utf8(&entry[at..at + len]).ok()?;
    u64::try_from(oai_pmh::Datestamp::parse(text)?.unix()).ok()
}

/// A Change List being filled: its entries' bytes.
struct Open {
    list: ChangeListFile,
    body: Vec<u8>,
    /// Whether it differs from the previous generation's file of its number.
    changed: bool,
}

/// Writes `writer`'s Change Lists: the previous generation's, with entries older than `days`
/// retired and `changes` appended, each list within `limits`; records them on the writer.
/// With `days` 0 the repository keeps none.
pub(crate) fn write_changelists(
    writer: &mut Writer<'_>,
    previous: Option<&Generation>,
    changes: &Changes,
    days: u32,
    limits: Limits,
    public_url: &Url,
) -> Result<(), Error> {
    if days == 0 {
        return Ok(());
    }
    let now = secs(changes.seen);
    let cutoff = now.saturating_sub(u64::from(days) * 86_400);
    let mut lists: Vec<ChangeListFile> =
        previous.map(|p| p.changelists.clone()).unwrap_or_default();
    // Changes that could not be known (a comparison that failed) break the history: it starts
    // again, and a consumer reads the Resource List again.
    if changes.baseline && previous.is_some() && !lists.is_empty() {
        tracing::warn!("the refresh's changes are unknown: the Change Lists start again");
        lists.clear();
    }
    let next_number = lists.iter().map(|l| l.number).max().unwrap_or(0) + 1;
    // Whole lists closed before the cutoff go; the last one never does (it is open).
    lists.retain(|l| l.until.is_none_or(|u| u >= cutoff));
    if lists.is_empty() {
        lists.push(ChangeListFile {
            number: next_number,
            from: now,
            until: None,
            entries: 0,
            bytes: 0,
            oldest: None,
            newest: None,
        });
    }
    let read_previous = |list: &ChangeListFile| -> Result<Vec<u8>, Error> {
        let previous = previous.expect("a list carried forward has a previous generation");
        let name = changelist_name(list.number);
        let meta = previous
            .file(&name)
            .map(|(_, m)| m)
            .ok_or_else(|| super::generation::missing(&previous.dir.join(&name)))?;
        super::generation::read(&previous.path(meta))
    };
    let last = lists.len() - 1;
    let mut written: Vec<ChangeListFile> = Vec::with_capacity(lists.len() + 1);
    let mut open: Option<Open> = None;
    for (i, mut list) in lists.into_iter().enumerate() {
        let expiring = list.oldest.is_some_and(|o| o < cutoff);
        let carried = list.entries > 0 || list.from != now;
        if !expiring && i < last {
            // Unchanged: taken as it is.
            if !writer.link_previous(&changelist_name(list.number))? {
                let bytes = read_previous(&list)?;
                writer.put_derived(&changelist_name(list.number), &bytes)?;
            }
            written.push(list);
            continue;
        }
        let mut body = Vec::new();
        if carried && list.entries > 0 {
            let bytes = read_previous(&list)?;
            let (mut entries_kept, mut oldest) = (0, None);
            for entry in entries(&bytes) {
                let seen = entry_seen(entry).unwrap_or(now);
                if seen < cutoff {
                    continue;
                }
                oldest = oldest.or(Some(seen));
                entries_kept += 1;
                body.extend_from_slice(entry);
            }
            list.entries = entries_kept;
            list.oldest = oldest;
            list.newest = list.newest.filter(|_| entries_kept > 0);
        }
        if expiring {
            list.from = list.from.max(cutoff);
        }
        list.bytes = body.len() as u64;
        let changed = expiring || !carried;
        if i < last {
            finish(
                writer,
                Open {
                    list,
                    body,
                    changed,
                },
                public_url,
                &mut written,
            )?;
        } else {
            open = Some(Open {
                list,
                body,
                changed,
            });
        }
    }
    let mut open = open.expect("the last list is open");
    let seen = datetime(now);
    let (mut entry, mut date) = (Vec::new(), String::new());
    let frame = head(URLSET_OPEN, public_url, &changelist_md(&open.list)).len()
        + " until=\"0000-00-00T00:00:00Z\"".len()
        + sitemap::URLSET_CLOSE.len();
    let mut number = written
        .iter()
        .chain([&open.list])
        .map(|l| l.number)
        .max()
        .unwrap_or(0);
    for change in changes.iter().map_err(spill_error)? {
        let change = change.map_err(spill_error)?;
        entry.clear();
        write_change(&mut entry, &change, &seen, &mut date);
        let full = open.list.entries as usize >= limits.max_urls
            || frame + open.body.len() + entry.len() > limits.max_bytes;
        if full && open.list.entries > 0 {
            open.list.until = Some(now);
            finish(writer, open, public_url, &mut written)?;
            number += 1;
            open = Open {
                list: ChangeListFile {
                    number,
                    from: now,
                    until: None,
                    entries: 0,
                    bytes: 0,
                    oldest: None,
                    newest: None,
                },
                body: Vec::new(),
                changed: true,
            };
        }
        open.body.extend_from_slice(&entry);
        open.list.entries += 1;
        open.list.oldest = open.list.oldest.or(Some(now));
        open.list.newest = Some(now);
        open.changed = true;
    }
    open.list.bytes = open.body.len() as u64;
    finish(writer, open, public_url, &mut written)?;
    if written.len() > 1 {
        writer.put_derived(CHANGE_LIST_INDEX, &changelist_index(&written, public_url))?;
    }
    writer.set_changelists(written);
    Ok(())
}

/// A failure of the changes' spill file ([`FilesError::Spill`]), said as what the Change Lists were
/// being made from.
fn spill_error(e: Error) -> Error {
    let path = match &e {
        Error::Files(FilesError::Spill { path, .. }) => path.clone(),
        _ => std::path::PathBuf::new(),
    };
    Error::Io {
        action: "cannot read the refresh's changes from",
        path,
        source: Box::new(e),
    }
}

/// Writes a Change List, or links it from the previous generation when it did not change.
fn finish(
    writer: &mut Writer<'_>,
    open: Open,
    public_url: &Url,
    written: &mut Vec<ChangeListFile>,
) -> Result<(), Error> {
    let name = changelist_name(open.list.number);
    if open.changed || !writer.link_previous(&name)? {
        let mut bytes = head(URLSET_OPEN, public_url, &changelist_md(&open.list)).into_bytes();
        bytes.extend_from_slice(&open.body);
        bytes.extend_from_slice(sitemap::URLSET_CLOSE.as_bytes());
        writer.put_derived(&name, &bytes)?;
    }
    written.push(open.list);
    Ok(())
}

/// The Change List Index of `lists` (oldest first).
fn changelist_index(lists: &[ChangeListFile], public_url: &Url) -> Vec<u8> {
    let first = lists.first().map_or(0, |l| l.from);
    let md = format!(
        "<rs:md capability=\"changelist\" from=\"{}\"/>",
        datetime(first)
    );
    let mut out = head(INDEX_OPEN, public_url, &md);
    let base = sitemap::escape(public_url.as_str());
    for list in lists {
        let until = (list.until)
            .map(|u| format!(" until=\"{}\"", datetime(u)))
            .unwrap_or_default();
        out.push_str(&format!(
            "<sitemap><loc>{base}{}</loc><rs:md from=\"{}\"{until}/></sitemap>\n",
            changelist_name(list.number),
            datetime(list.from)
        ));
    }
    out.push_str(INDEX_CLOSE);
    out.into_bytes()
}

/// The Change List a consumer starts from: the index when there are several, else the one.
fn changelist_entry(generation: &Generation) -> Option<String> {
    match generation.changelists.as_slice() {
        [] => None,
        [one] => Some(changelist_name(one.number)),
        _ => Some(CHANGE_LIST_INDEX.to_owned()),
    }
}

/// The repository's Capability List: its Resource List and, when it keeps them, its Change
/// Lists; `up` to the gateway's Source Description.
pub(crate) fn capability_list(generation: &Generation, public_url: &Url, gateway: &Url) -> Bytes {
    let up = sitemap::escape(gateway.as_str());
    let base = sitemap::escape(public_url.as_str());
    let mut out = format!(
        "{}{URLSET_OPEN}<rs:ln rel=\"up\" href=\"{up}{SOURCE_DESCRIPTION}\"/>\n\
         <rs:md capability=\"capabilitylist\"/>\n\
         <url><loc>{base}{RESOURCE_LIST}</loc><rs:md capability=\"resourcelist\"/></url>\n",
        sitemap::XML_DECL
    );
    if let Some(name) = changelist_entry(generation) {
        out.push_str(&format!(
            "<url><loc>{base}{name}</loc><rs:md capability=\"changelist\"/></url>\n"
        ));
    }
    out.push_str(sitemap::URLSET_CLOSE);
    Bytes::from(out)
}

/// The gateway's Source Description: each repository's Capability List (the public URLs of
/// the repositories that publish ResourceSync).
pub(crate) fn source_description<'a>(repositories: impl Iterator<Item = &'a Url>) -> Bytes {
    let mut out = format!(
        "{}{URLSET_OPEN}<rs:md capability=\"description\"/>\n",
        sitemap::XML_DECL
    );
    for url in repositories {
        out.push_str(&format!(
            "<url><loc>{}{CAPABILITY_LIST}</loc><rs:md capability=\"capabilitylist\"/></url>\n",
            sitemap::escape(url.as_str())
        ));
    }
    out.push_str(sitemap::URLSET_CLOSE);
    Bytes::from(out)
}

/// The sitemap shards of `generation` in the order its index lists them (by number), each as
/// `(number, file name)`.
pub(crate) fn sitemap_shards(generation: &Generation) -> Vec<(u32, String)> {
    use crate::profiles::{FileName, Profile};
    let mut shards: Vec<(u32, String)> = (generation.files().iter())
        .filter(|f| f.name.ends_with(".xml"))
        .filter_map(|f| match FileName::parse(&f.name) {
            Some(FileName::Shard(Profile::Sitemap, n)) => Some((n, f.name.clone())),
            _ => None,
        })
        .collect();
    shards.sort();
    shards
}

/// The `rs:md` of a Resource List made when `generation` was.
fn resourcelist_md(generation: &Generation) -> String {
    let at = datetime(secs(generation.created));
    format!("<rs:md capability=\"resourcelist\" at=\"{at}\" completed=\"{at}\"/>")
}

/// The Resource List Index of a generation whose sitemap has several shards.
pub(crate) fn resourcelist_index(generation: &Generation, public_url: &Url) -> Bytes {
    let mut out = head(INDEX_OPEN, public_url, &resourcelist_md(generation));
    let base = sitemap::escape(public_url.as_str());
    for (n, _) in sitemap_shards(generation) {
        out.push_str(&format!(
            "<sitemap><loc>{base}resourcelist-{n}.xml</loc></sitemap>\n"
        ));
    }
    out.push_str(INDEX_CLOSE);
    Bytes::from(out)
}

/// A Resource List: the sitemap shard `shard` (its bytes as written) under ResourceSync's
/// head; its entries are the shard's, byte for byte.
pub(crate) fn resourcelist(generation: &Generation, public_url: &Url, shard: &[u8]) -> Bytes {
    let frame = sitemap::XML_DECL.len() + sitemap::URLSET_OPEN.len();
    let mut out = head(URLSET_OPEN, public_url, &resourcelist_md(generation)).into_bytes();
    out.extend_from_slice(shard.get(frame..).unwrap_or_default());
    Bytes::from(out)
}

/// The strong ETag of a document made from `generation` (and `part`, a file's own hash).
pub(crate) fn etag(generation: &Generation, what: &str, part: &str) -> hyper::header::HeaderValue {
    let hash =
        super::generation::content_hash(format!("{RS}{}{what}{part}", generation.id).as_bytes());
    super::generation::etag_header(&hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Changes go into the open list; a list with nothing new is linked from the previous
    /// generation; entries older than `changelist_days` are retired, the list then starting at
    /// the cutoff.
    #[test]
    fn changes_are_appended_carried_forward_and_retired_after_their_days() {
        use std::time::Duration;

        use crate::changes::{Kind, Recorder};
        use crate::spill::Budget;

        const DAY: u64 = 86_400;
        let t0 = 1_700_000_000;
        let dir = tempfile::tempdir().unwrap();
        let url = Url::parse("https://g.example/r/").unwrap();
        let at = |secs: u64| SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
        let changes_at = |secs: u64, urls: &[&str]| {
            let mut r = Recorder::new(&Budget::new(std::env::temp_dir(), 1 << 20));
            for u in urls {
                let url = u.to_string();
                r.push(Change {
                    url,
                    kind: Kind::Created,
                    lastmod: None,
                })
                .unwrap();
            }
            r.finish(at(secs)).unwrap()
        };
        let next = |previous: Option<&Generation>, changes: &Changes| {
            let mut w = Writer::new(dir.path(), previous).unwrap();
            write_changelists(&mut w, previous, changes, 30, Limits::default(), &url).unwrap();
            w.commit(super::super::generation::Summary::default())
                .unwrap()
        };
        let listed = |g: &Generation| {
            let bytes = std::fs::read(g.dir.join("changelist-1.xml")).unwrap();
            let text = String::from_utf8(bytes).unwrap();
            let locs: Vec<String> = (text.split("<loc>").skip(1))
                .map(|s| s.split("</loc>").next().unwrap().to_owned())
                .collect();
            (locs, text)
        };
        let g1 = next(None, &Changes::baseline(at(t0)));
        assert_eq!((g1.changelists.len(), g1.changelists[0].from), (1, t0));
        assert!(listed(&g1).0.is_empty());
        let g2 = next(Some(&g1), &changes_at(t0 + DAY, &["https://h/a"]));
        let g3 = next(Some(&g2), &changes_at(t0 + 20 * DAY, &["https://h/b"]));
        assert_eq!(listed(&g3).0, ["https://h/a", "https://h/b"]);
        assert_eq!(g3.changelist_stats().unwrap().newest, Some(t0 + 20 * DAY));
        // Thirty-two days after the first change: it is retired, the second kept.
        let g4 = next(Some(&g3), &changes_at(t0 + 32 * DAY, &[]));
        let (locs, text) = listed(&g4);
        assert_eq!(locs, ["https://h/b"]);
        assert_eq!(g4.changelists[0].from, t0 + 2 * DAY);
        assert!(
            text.contains(&format!("from=\"{}\"", datetime(t0 + 2 * DAY))),
            "{text}"
        );
        // Nothing new, nothing expiring: the same file, linked.
        let g5 = next(Some(&g4), &changes_at(t0 + 33 * DAY, &[]));
        use std::os::unix::fs::MetadataExt as _;
        let inode = |g: &Generation| {
            std::fs::metadata(g.dir.join("changelist-1.xml"))
                .unwrap()
                .ino()
        };
        assert_eq!(inode(&g4), inode(&g5));
        assert_eq!(g5.changelists, g4.changelists);
    }

    #[test]
    fn names_are_parsed_exactly() {
        assert_eq!(
            Document::parse("capabilitylist.xml"),
            Some(Document::CapabilityList)
        );
        assert_eq!(
            Document::parse("resourcelist.xml"),
            Some(Document::ResourceList)
        );
        assert_eq!(
            Document::parse("resourcelist-12.xml"),
            Some(Document::ResourceListShard(12))
        );
        assert_eq!(Document::parse("changelist-3.xml"), Some(Document::Change));
        assert_eq!(
            Document::parse("changelist-index.xml"),
            Some(Document::Change)
        );
        for name in [
            "resourcelist-0.xml",
            "resourcelist-01.xml",
            "changelist-.xml",
            "changelist-3.xml.gz",
            "resourcelist-1",
        ] {
            assert_eq!(Document::parse(name), None, "{name}");
        }
    }

    #[test]
    fn entries_and_their_times_read_back() {
        let change = Change {
            url: "https://h/a?b=1&c=2".into(),
            kind: crate::changes::Kind::Deleted,
            lastmod: oai_pmh::Datestamp::parse("2020-01-02"),
        };
        let mut file = head(
            URLSET_OPEN,
            &Url::parse("https://g/r/").unwrap(),
            "<rs:md capability=\"changelist\" from=\"2020-01-01T00:00:00Z\"/>",
        )
        .into_bytes();
        let mut date = String::new();
        write_change(&mut file, &change, &datetime(86_400), &mut date);
        write_change(&mut file, &change, &datetime(2 * 86_400), &mut date);
        file.extend_from_slice(sitemap::URLSET_CLOSE.as_bytes());
        let seen: Vec<Option<u64>> = entries(&file).map(entry_seen).collect();
        assert_eq!(seen, [Some(86_400), Some(2 * 86_400)]);
        let text = String::from_utf8(file).unwrap();
        assert!(text.contains("<url><loc>https://h/a?b=1&amp;c=2</loc><lastmod>2020-01-02</lastmod><rs:md change=\"deleted\" datetime=\"1970-01-02T00:00:00Z\"/></url>\n"), "{text}");
    }
}
