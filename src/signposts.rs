//! The records of the landing-page profiles (Signmap, OCX): for each record, its landing page and
//! what describes it (for the Signmap the Signposting links, SP-01..SP-09; for OCX its type,
//! name, teaser and image), collected as pages arrive and resolved like the URL inventory (the
//! newest version of a record wins; deleted records publish nothing).
//!
//! Per record only what the profiles need is kept, in one text arena: the header identifier (for
//! the `describedby` GetRecord URL, spelled out at render time), the landing page, content files,
//! the persistent identifier, a license URL, the schema.org type and, with OCX, the OCX type,
//! title, teaser and image.

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};

use url::Url;

use crate::classify::{self, Identifier};
use crate::config::OcxConfig;
use crate::datestamp::Datestamp;
use crate::dctype::TypeMap;
use crate::inventory::InventoryFull;
use crate::oai::harvest::request_url;
use crate::oai::parse::{DcElement, Record};
use crate::render::ocx;
use crate::render::signmap::{Entry, Link, media_type};
use crate::scope::Scope;

/// Profile of the `describedby` link to a record's oai_dc metadata.
pub const OAI_DC_PROFILE: &str = "http://www.openarchives.org/OAI/2.0/oai_dc/";
/// Most `item` links one entry carries; a record with more files lists the first ones, so that
/// one entry can never outgrow a shard.
pub const MAX_ITEMS: usize = 50;

#[derive(Clone, Copy, Debug)]
struct Span {
    start: u32,
    len: u32,
}

#[derive(Clone, Copy, Debug)]
enum Rel {
    Item(&'static str),
    CiteAs,
    License,
    Type,
}

#[derive(Clone, Copy, Debug)]
struct StoredLink {
    rel: Rel,
    href: Span,
}

#[derive(Clone, Copy, Debug)]
struct Version {
    id_hash: u64,
    seq: u32,
    datestamp: i64,
    deleted: bool,
    id: Span,
    landing: Option<Span>,
    links_start: u32,
    links_len: u16,
    ocx: Option<OcxFields>,
    /// The CDIF document: offset and length in the spill file.
    cdif: Option<(u64, u32)>,
}

/// What an OCX entry holds besides its landing page.
#[derive(Clone, Copy, Debug)]
struct OcxFields {
    kind: Option<Span>,
    name: Option<Span>,
    teaser: Option<Span>,
    image: Option<Span>,
}

/// Counts of the Signmap, by outcome.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SignStats {
    /// Entries published.
    pub published: u64,
    /// Live records without a landing page inside the scope (not published).
    pub no_landing_page: u64,
    /// Live records whose landing page another, newer record already has (published once).
    pub duplicate: u64,
    /// OCX entries published.
    pub ocx_published: u64,
    /// Records with a landing page but no OCX type (`ocx_no_type`), not in the OCX sitemap.
    pub ocx_no_type: u64,
}

/// Collects the Signmap's records during a harvest.
#[derive(Debug)]
pub struct Signposts {
    scope: Scope,
    types: TypeMap,
    ocx: Option<OcxConfig>,
    metadata_base: Option<Url>,
    /// CDIF documents, written as records arrive (they are too large to keep in memory).
    cdif: Option<Spill>,
    arena: String,
    /// Texts that recur from a small table (schema.org and OCX type URLs), stored once.
    interned: HashMap<String, Span>,
    versions: Vec<Version>,
    links: Vec<StoredLink>,
}

/// An append-only temporary file of CDIF documents.
#[derive(Debug)]
struct Spill {
    out: std::io::BufWriter<std::fs::File>,
    len: u64,
}

/// Appends `text` to the arena.
fn push(arena: &mut String, text: &str) -> Result<Span, InventoryFull> {
    let start = u32::try_from(arena.len()).map_err(|_| InventoryFull)?;
    arena.push_str(text);
    u32::try_from(arena.len()).map_err(|_| InventoryFull)?;
    Ok(Span {
        start,
        len: text.len() as u32,
    })
}

/// [`push`] for a text from a configured table: stored the first time only (a million records
/// repeated a handful of type URLs, 65 MB of the arena). Only for texts pushed once a record
/// has its landing page, so that no later truncation drops them. Free of `self`, so that the
/// table the text comes from can stay borrowed.
fn intern(
    arena: &mut String,
    interned: &mut HashMap<String, Span>,
    text: &str,
) -> Result<Span, InventoryFull> {
    if let Some(span) = interned.get(text) {
        return Ok(*span);
    }
    let span = push(arena, text)?;
    interned.insert(text.to_owned(), span);
    Ok(span)
}

impl Signposts {
    /// An empty collection for landing pages inside `scope`; with `ocx`, the OCX fields too.
    /// `metadata_base` is the OAI-PMH baseURL for the GetRecord links (none for a Static
    /// Repository without an http(s) baseURL).
    pub fn new(
        scope: Scope,
        types: TypeMap,
        ocx: Option<OcxConfig>,
        metadata_base: Option<Url>,
    ) -> Self {
        Self {
            scope,
            types,
            ocx,
            metadata_base,
            cdif: None,
            arena: String::new(),
            interned: HashMap::new(),
            versions: Vec::new(),
            links: Vec::new(),
        }
    }

    /// Also make each record's CDIF document, spilled to a temporary file.
    pub fn with_cdif(mut self) -> std::io::Result<Self> {
        self.cdif = Some(Spill {
            out: std::io::BufWriter::with_capacity(1 << 20, tempfile::tempfile()?),
            len: 0,
        });
        Ok(self)
    }

    /// The `GetRecord` URL of a record.
    fn get_record(&self, id: &str) -> Option<String> {
        let base = self.metadata_base.as_ref()?;
        Some(request_url(
            base,
            &[
                ("verb", "GetRecord"),
                ("identifier", id),
                ("metadataPrefix", "oai_dc"),
            ],
        ))
    }

    fn push(&mut self, text: &str) -> Result<Span, InventoryFull> {
        push(&mut self.arena, text)
    }

    /// Adds one record occurrence (its extended fields must have been read).
    pub fn add(&mut self, record: &Record) -> Result<(), CollectError> {
        let hasher = BuildHasherDefault::<DefaultHasher>::default();
        let seq = u32::try_from(self.versions.len()).map_err(|_| InventoryFull)?;
        let links_start = u32::try_from(self.links.len()).map_err(|_| InventoryFull)?;
        let id = self.push(&record.identifier)?;
        let after_id = self.arena.len();
        let mut landing = None;
        let mut cite_as = false;
        let mut items = 0;
        let mut image: Option<Span> = None;
        if !record.deleted {
            for value in &record.dc_identifiers {
                match classify::classify(value, &self.scope) {
                    Identifier::LandingPage(url) if landing.is_none() => {
                        landing = Some(self.push(&url)?);
                    }
                    Identifier::ContentFile { url, media_type } if items < MAX_ITEMS => {
                        items += 1;
                        let href = self.push(&url)?;
                        if image.is_none() && media_type.starts_with("image/") {
                            image = Some(href);
                        }
                        self.links.push(StoredLink {
                            rel: Rel::Item(media_type),
                            href,
                        });
                    }
                    Identifier::PersistentId(url) if !cite_as => {
                        cite_as = true;
                        let href = self.push(&url)?;
                        self.links.push(StoredLink {
                            rel: Rel::CiteAs,
                            href,
                        });
                    }
                    _ => {}
                }
            }
        }
        // Every profile publishes a record only with its landing page: keep nothing else of one
        // without (the links and texts stored while looking for it are dropped again).
        if landing.is_none() {
            self.links.truncate(links_start as usize);
            self.arena.truncate(after_id);
        } else {
            if let Some(license) = record.dc_values(DcElement::Rights).find_map(license_url) {
                let href = self.push(&license)?;
                self.links.push(StoredLink {
                    rel: Rel::License,
                    href,
                });
            }
            if let Some(t) = self.types.lookup(record.dc_values(DcElement::Type)) {
                let href = intern(&mut self.arena, &mut self.interned, t)?;
                self.links.push(StoredLink {
                    rel: Rel::Type,
                    href,
                });
            }
        }
        let ocx = match &self.ocx {
            Some(config) if !record.deleted && landing.is_some() => {
                let kind = config
                    .types
                    .lookup(record.dc_values(DcElement::Type))
                    .or(config.default_type.as_deref())
                    .map(|k| intern(&mut self.arena, &mut self.interned, k))
                    .transpose()?;
                let name = record
                    .dc_values(DcElement::Title)
                    .next()
                    .map(|t| ocx::teaser(t, usize::MAX));
                let teaser = record
                    .dc_values(DcElement::Description)
                    .next()
                    .map(|d| ocx::teaser(d, config.teaser_chars));
                Some(OcxFields {
                    kind,
                    name: name.map(|n| self.push(&n)).transpose()?,
                    teaser: teaser.map(|t| self.push(&t)).transpose()?,
                    image,
                })
            }
            _ => None,
        };
        let cdif = match landing {
            Some(landing) if !record.deleted && self.cdif.is_some() => {
                let text = |s: Span| &self.arena[s.start as usize..][..s.len as usize];
                let stored = &self.links[links_start as usize..];
                let link = |want: fn(&Rel) -> bool| {
                    stored.iter().find(|l| want(&l.rel)).map(|l| text(l.href))
                };
                let metadata = self.get_record(&record.identifier);
                let values = |e| record.dc_values(e).collect::<Vec<_>>();
                let doc = crate::render::cdif::document(&crate::render::cdif::Fields {
                    url: text(landing),
                    kind: link(|r| matches!(r, Rel::Type)),
                    titles: values(DcElement::Title),
                    descriptions: values(DcElement::Description),
                    creators: values(DcElement::Creator),
                    dates: values(DcElement::Date),
                    subjects: values(DcElement::Subject),
                    publishers: values(DcElement::Publisher),
                    languages: values(DcElement::Language),
                    license: link(|r| matches!(r, Rel::License)),
                    identifier: link(|r| matches!(r, Rel::CiteAs)),
                    metadata: metadata.as_deref(),
                });
                let spill = self.cdif.as_mut().expect("checked above");
                let at = spill.len;
                std::io::Write::write_all(&mut spill.out, doc.as_bytes())?;
                spill.len += doc.len() as u64;
                Some((at, u32::try_from(doc.len()).map_err(|_| InventoryFull)?))
            }
            _ => None,
        };
        let links_len = u16::try_from(self.links.len() - links_start as usize).unwrap_or(u16::MAX);
        self.versions.push(Version {
            id_hash: hasher.hash_one(record.identifier.as_str()),
            seq,
            datestamp: record.datestamp.map_or(i64::MIN, Datestamp::pack),
            deleted: record.deleted,
            id,
            landing,
            links_start,
            links_len,
            ocx,
            cdif,
        });
        Ok(())
    }

    /// Resolves the newest version of each record and orders the entries by landing page.
    /// `metadata_base` is the OAI-PMH baseURL for the `describedby` GetRecord links (none for a
    /// Static Repository without an http(s) baseURL).
    pub fn finish(mut self) -> Result<Resolved, CollectError> {
        let metadata_base = self.metadata_base.take();
        let cdif = match self.cdif.take() {
            Some(spill) => Some(spill.out.into_inner().map_err(|e| e.into_error())?),
            None => None,
        };
        let mut stats = SignStats::default();
        // Newest version first within each record; the later occurrence wins a tie.
        self.versions.sort_unstable_by(|a, b| {
            (a.id_hash, b.datestamp, b.seq).cmp(&(b.id_hash, a.datestamp, a.seq))
        });
        let arena = &self.arena;
        let text = |s: Span| &arena[s.start as usize..][..s.len as usize];
        // The winners are kept in place (a second list of a million versions was 120 MB).
        let mut winners = std::mem::take(&mut self.versions);
        let mut last: Option<(u64, &str)> = None;
        winners.retain(|v| {
            let id = text(v.id);
            // Hash collisions between different identifiers are told apart by the text.
            if last.is_some_and(|(h, i)| h == v.id_hash && i == id) {
                return false;
            }
            last = Some((v.id_hash, id));
            if v.deleted {
                return false;
            }
            if v.landing.is_none() {
                stats.no_landing_page += 1;
                return false;
            }
            true
        });
        let landing = |v: &Version| text(v.landing.expect("winners have a landing page"));
        winners.sort_unstable_by(|a, b| {
            landing(a)
                .cmp(landing(b))
                .then(b.datestamp.cmp(&a.datestamp))
        });
        let before = winners.len();
        winners.dedup_by(|later, kept| landing(later) == landing(kept));
        stats.duplicate = (before - winners.len()) as u64;
        stats.published = winners.len() as u64;
        if self.ocx.is_some() {
            let typed = winners
                .iter()
                .filter(|v| v.ocx.is_some_and(|o| o.kind.is_some()))
                .count() as u64;
            stats.ocx_published = typed;
            stats.ocx_no_type = stats.published - typed;
        }
        Ok(Resolved {
            cdif,
            ocx: self.ocx,
            arena: self.arena,
            links: self.links,
            winners,
            metadata_base,
            stats,
        })
    }
}

/// Why a record could not be collected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CollectError {
    /// The in-memory table is full.
    #[error(transparent)]
    Full(#[from] InventoryFull),
    /// The temporary file of CDIF documents failed.
    #[error("cannot write the temporary file of CDIF documents: {0}")]
    Spill(#[from] std::io::Error),
}

/// The file name of a record's CDIF document: a hash of its header identifier, so that the URL
/// stays the same from one harvest to the next.
pub fn cdif_name(identifier: &str) -> String {
    use sha2::{Digest, Sha256};
    let hex: String = Sha256::digest(identifier.as_bytes())[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("cdif/{hex}.jsonld")
}

/// A `dc:rights` value that is a license URL (`https://creativecommons.org/licenses/by/4.0/`),
/// in normal form; rights statements in words are not links.
fn license_url(value: &str) -> Option<String> {
    let lower = value.get(..8)?.to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) || value.contains(' ') {
        return None;
    }
    Url::parse(value)
        .ok()
        .filter(|u| u.host_str().is_some())
        .map(String::from)
}

/// The Signmap's entries, resolved and sorted.
#[derive(Debug)]
pub struct Resolved {
    cdif: Option<std::fs::File>,
    ocx: Option<OcxConfig>,
    arena: String,
    links: Vec<StoredLink>,
    winners: Vec<Version>,
    metadata_base: Option<Url>,
    /// Counts by outcome.
    pub stats: SignStats,
}

impl Resolved {
    /// No entry to publish.
    pub fn is_empty(&self) -> bool {
        self.winners.is_empty()
    }

    /// The OCX entries (records with an OCX type), in order of their landing pages. With
    /// `documents` (the public URL the CDIF documents are published under), `ocx:loc` points at
    /// each record's JSON-LD, with `ocx:format` JSON-LD (and no `ocx:xpath`, which is for HTML).
    pub fn ocx_entries<'a>(
        &'a self,
        documents: Option<&'a Url>,
    ) -> impl Iterator<Item = ocx::Entry<'a>> {
        let text = |s: Span| &self.arena[s.start as usize..][..s.len as usize];
        let config = self.ocx.as_ref();
        self.winners.iter().filter_map(move |v| {
            let fields = v.ocx?;
            let config = config?;
            let meta = documents
                .filter(|_| v.cdif.is_some())
                .and_then(|base| base.join(&cdif_name(text(v.id))).ok())
                .map(|u| Cow::Owned(u.into()));
            if meta.is_some() {
                return Some(ocx::Entry {
                    loc: text(v.landing?),
                    lastmod: (v.datestamp != i64::MIN).then(|| Datestamp::unpack(v.datestamp)),
                    kind: text(fields.kind?),
                    format: Some("JSON-LD"),
                    meta,
                    xpath: None,
                    name: fields.name.map(text),
                    teaser: fields.teaser.map(text),
                    image: fields.image.map(text),
                });
            }
            Some(ocx::Entry {
                meta: None,
                loc: text(v.landing?),
                lastmod: (v.datestamp != i64::MIN).then(|| Datestamp::unpack(v.datestamp)),
                kind: text(fields.kind?),
                format: config.format.as_deref(),
                xpath: config.xpath.as_deref(),
                name: fields.name.map(text),
                teaser: fields.teaser.map(text),
                image: fields.image.map(text),
            })
        })
    }

    /// The CDIF documents: for each record that has one, in landing-page order, its file name
    /// (`cdif/{hash}.jsonld`, stable for a record identifier), lastmod and bytes.
    pub fn cdif_documents(
        &self,
    ) -> impl Iterator<Item = std::io::Result<(String, Option<Datestamp>, Vec<u8>)>> + '_ {
        use std::os::unix::fs::FileExt;
        let text = |s: Span| &self.arena[s.start as usize..][..s.len as usize];
        self.winners.iter().filter_map(move |v| {
            let (at, len) = v.cdif?;
            let file = self.cdif.as_ref()?;
            let mut bytes = vec![0; len as usize];
            Some(file.read_exact_at(&mut bytes, at).map(|()| {
                let lastmod = (v.datestamp != i64::MIN).then(|| Datestamp::unpack(v.datestamp));
                (cdif_name(text(v.id)), lastmod, bytes)
            }))
        })
    }

    /// With OCX: is there any OCX entry.
    pub fn has_ocx(&self) -> bool {
        self.stats.ocx_published > 0
    }

    /// The entries, in order of their landing pages. With `documents` (the public URL the CDIF
    /// documents are published under), each entry also links its JSON-LD as `describedby`.
    pub fn entries<'a>(&'a self, documents: Option<&'a Url>) -> impl Iterator<Item = Entry<'a>> {
        let text = |s: Span| &self.arena[s.start as usize..][..s.len as usize];
        self.winners.iter().map(move |v| {
            let mut links = Vec::with_capacity(v.links_len as usize + 2);
            if let Some(base) = documents.filter(|_| v.cdif.is_some())
                && let Ok(url) = base.join(&cdif_name(text(v.id)))
            {
                links.push(Link {
                    rel: "describedby",
                    href: Cow::Owned(url.into()),
                    media_type: Some("application/ld+json"),
                    profile: None,
                });
            }
            if let Some(base) = &self.metadata_base {
                let href = request_url(
                    base,
                    &[
                        ("verb", "GetRecord"),
                        ("identifier", text(v.id)),
                        ("metadataPrefix", "oai_dc"),
                    ],
                );
                links.push(Link {
                    rel: "describedby",
                    href: Cow::Owned(href),
                    media_type: Some("application/xml"),
                    profile: Some(OAI_DC_PROFILE),
                });
            }
            let stored = &self.links[v.links_start as usize..][..v.links_len as usize];
            for link in stored {
                let href = Cow::Borrowed(text(link.href));
                let (rel, media) = match link.rel {
                    Rel::Item(t) => ("item", media_type(t)),
                    Rel::CiteAs => ("cite-as", None),
                    Rel::License => ("license", None),
                    Rel::Type => ("type", None),
                };
                links.push(Link {
                    rel,
                    href,
                    media_type: media,
                    profile: None,
                });
            }
            Entry {
                loc: text(v.landing.expect("winners have a landing page")),
                lastmod: (v.datestamp != i64::MIN).then(|| Datestamp::unpack(v.datestamp)),
                links,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, date: &str, ids: &[&str], dc: &[(DcElement, &str)]) -> Record {
        Record {
            identifier: id.to_owned(),
            datestamp: Datestamp::parse(date),
            deleted: false,
            sets: vec![],
            dc_identifiers: ids.iter().map(|s| s.to_string()).collect(),
            dc: dc.iter().map(|(e, v)| (*e, v.to_string())).collect(),
        }
    }

    fn entries(r: &Resolved) -> Vec<(String, Vec<(String, String)>)> {
        r.entries(None)
            .map(|e| {
                let links = e
                    .links
                    .iter()
                    .map(|l| (l.rel.to_owned(), l.href.to_string()))
                    .collect();
                (e.loc.to_owned(), links)
            })
            .collect()
    }

    #[test]
    fn a_record_becomes_a_landing_page_with_its_links() {
        let base = Url::parse("https://h/oai/request").unwrap();
        let scope = Scope::from_base_url(&base).unwrap();
        let mut s = Signposts::new(scope, TypeMap::default(), None, Some(base));
        s.add(&record(
            "oai:h:1",
            "2024-05-01",
            &[
                "https://h/oai/files/1.pdf",
                "doi:10.1234/ABC",
                "https://h/oai/record/1",
                "https://elsewhere/x",
            ],
            &[
                (DcElement::Rights, "All rights reserved"),
                (
                    DcElement::Rights,
                    "https://creativecommons.org/licenses/by/4.0/",
                ),
                (DcElement::Type, "info:eu-repo/semantics/doctoralThesis"),
            ],
        ))
        .unwrap();
        // Only a PDF: no landing page, not published.
        s.add(&record(
            "oai:h:2",
            "2024-05-01",
            &["https://h/oai/files/2.pdf"],
            &[],
        ))
        .unwrap();
        let r = s.finish().unwrap();
        assert_eq!(r.stats.no_landing_page, 1);
        assert_eq!(r.stats.published, 1);
        let e = entries(&r);
        assert_eq!(e[0].0, "https://h/oai/record/1");
        let links: Vec<(&str, &str)> = e[0]
            .1
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        assert_eq!(
            links,
            [
                (
                    "describedby",
                    "https://h/oai/request?verb=GetRecord&identifier=oai%3Ah%3A1&metadataPrefix=oai_dc"
                ),
                ("item", "https://h/oai/files/1.pdf"),
                ("cite-as", "https://doi.org/10.1234/ABC"),
                ("license", "https://creativecommons.org/licenses/by/4.0/"),
                ("type", "https://schema.org/Thesis"),
            ]
        );
    }

    /// OCX: the type from the table or the default; without either the record is counted as
    /// `ocx_no_type` (it stays in the Signmap); the teaser is cut; an image file is the image.
    #[test]
    fn ocx_fields_and_types() {
        let scope = Scope::from_base_url(&Url::parse("https://h/oai").unwrap()).unwrap();
        let config = OcxConfig {
            types: TypeMap::with(&[("Lesplan".into(), "http://oerschema.org/Lesson".into())])
                .unwrap(),
            teaser_chars: 20,
            ..OcxConfig::default()
        };
        let mut s = Signposts::new(
            scope.clone(),
            TypeMap::default(),
            Some(config.clone()),
            None,
        );
        s.add(&record(
            "a",
            "2024-01-01",
            &["https://h/a", "https://h/a/cover.jpg"],
            &[
                (DcElement::Type, "Lesplan"),
                (DcElement::Title, "Getijden"),
                (
                    DcElement::Description,
                    "Een les over eb en vloed aan de kust",
                ),
            ],
        ))
        .unwrap();
        s.add(&record(
            "b",
            "2024-01-01",
            &["https://h/b"],
            &[(DcElement::Type, "Proefschrift")],
        ))
        .unwrap();
        let r = s.finish().unwrap();
        assert_eq!(
            (
                r.stats.published,
                r.stats.ocx_published,
                r.stats.ocx_no_type
            ),
            (2, 1, 1)
        );
        let e: Vec<_> = r.ocx_entries(None).collect();
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].kind, "http://oerschema.org/Lesson");
        assert_eq!(e[0].name, Some("Getijden"));
        assert_eq!(e[0].teaser, Some("Een les over eb en…"));
        assert_eq!(e[0].image, Some("https://h/a/cover.jpg"));

        // With a default type, the second record is published too.
        let mut s = Signposts::new(
            scope,
            TypeMap::default(),
            Some(OcxConfig {
                default_type: Some("https://schema.org/CreativeWork".into()),
                ..config
            }),
            None,
        );
        s.add(&record(
            "b",
            "2024-01-01",
            &["https://h/b"],
            &[(DcElement::Type, "Proefschrift")],
        ))
        .unwrap();
        let r = s.finish().unwrap();
        assert_eq!(
            r.ocx_entries(None).next().unwrap().kind,
            "https://schema.org/CreativeWork"
        );
    }

    #[test]
    fn the_newest_version_wins_and_deleted_records_publish_nothing() {
        let scope = Scope::from_base_url(&Url::parse("https://h/oai").unwrap()).unwrap();
        let mut s = Signposts::new(scope, TypeMap::default(), None, None);
        s.add(&record("a", "2024-01-01", &["https://h/old"], &[]))
            .unwrap();
        s.add(&record("a", "2024-02-01", &["https://h/new"], &[]))
            .unwrap();
        let mut gone = record("b", "2024-03-01", &[], &[]);
        gone.deleted = true;
        s.add(&record("b", "2024-01-01", &["https://h/b"], &[]))
            .unwrap();
        s.add(&gone).unwrap();
        // Two records with one landing page: listed once.
        s.add(&record("c", "2024-01-01", &["https://h/shared"], &[]))
            .unwrap();
        s.add(&record("d", "2024-01-02", &["https://h/shared"], &[]))
            .unwrap();
        let r = s.finish().unwrap();
        let locs: Vec<String> = entries(&r).into_iter().map(|e| e.0).collect();
        assert_eq!(locs, ["https://h/new", "https://h/shared"]);
        assert_eq!(r.stats.duplicate, 1);
        assert!(
            entries(&r).iter().all(|e| e.1.is_empty()),
            "no describedby without a base"
        );
    }
}
