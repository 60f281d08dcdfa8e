//! The profiles: each kind of file set a job can publish beside the sitemap. Each profile's
//! module declares what it is, its [`Spec`] (label, file names, robots.txt's audience, what its
//! entries are written from, the fields they read, its part of a summary), and it registers in
//! [`Profile::spec`] and the `REGISTERED` table; from
//! the specs, [`Profile`] names every file a profile publishes (formatted and parsed here only,
//! [`FileName`]). [`ProfileSettings`] are the settings a repository turns them on with. Each
//! profile's module holds its entries and what a generation says of it (its
//! [`report::Report`]): the Signmap ([`signmap`]), OCX ([`ocx`]), CDIF's documents and lists
//! ([`cdif`]) and DiWoo's categories ([`diwoo`]); [`registry`] lists them for the summary, the
//! status page and the metrics.
//!
//! A harvest's records are collected for the landing-page profiles (Signmap, OCX, CDIF) by
//! [`signposts`], which works out once per record what they share; which version of a
//! record's entries wins is [`versions`]'s, over runs on disk. The files go to a
//! [`files::FileSink`], whatever it is (an export's staging folder, the gateway's next
//! generation, a bucket's upload); a render writes every profile's files in one place,
//! [`render`]. What was published is recorded in the profiles' ledger ([`ledger`]), with which
//! a refresh patches them ([`merge`]) instead of rendering every record again.
//!
//! The collector's tests that need a harvest's classifier and URL inventory are the
//! `oai-bridge` package's (`src/profiles/signposts_tests.rs`): `cargo test -p oai-bridge-files`
//! does not run them; `cargo test` at the workspace's root does.

pub mod cdif;
pub mod diwoo;
pub mod files;
pub mod ledger;
pub mod merge;
pub mod ocx;
pub mod record;
pub mod registry;
pub mod render;
pub mod report;
pub mod signmap;
pub mod signposts;
pub mod versions;

use oai_pmh::Fields;

/// A kind of file set a job publishes: the sitemap itself, or a profile beside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Profile {
    /// The sitemap of the records' landing pages and content files.
    Sitemap,
    /// The Signmap: each landing page with its Signposting links.
    Signmap,
    /// The OCX sitemap: each landing page with its type, title and teaser.
    Ocx,
    /// CDIF: a JSON-LD document per record, listed in a sitemap of its own.
    Cdif,
    /// CDIF's metadata lists: the same documents in `ItemList`s, listed in a sitemap.
    CdifList,
    /// A DiWoo sitemap: the URLs of one Woo information category (1-17).
    Diwoo(u8),
}

/// The profiles a repository publishes beside its sitemap, each with its settings: the
/// `[[repository]]` keys `signmap`, `cdif`, `cdif_list` and `diwoo`, and its `[repository.ocx]`
/// section (and the flags of the same names).
#[derive(Clone, Debug, Default)]
pub struct ProfileSettings {
    /// Also publish a Signmap.
    pub signmap: bool,
    /// Also publish an OCX sitemap, so configured.
    pub ocx: Option<ocx::OcxConfig>,
    /// Also publish each record's CDIF JSON-LD document and the CDIF sitemap.
    pub cdif: bool,
    /// Also publish CDIF's metadata lists (`ItemList`s of the same documents) and their sitemap.
    pub cdif_list: bool,
    /// DiWoo: setSpec -> Woo information category (1-17), an index per category.
    pub diwoo: Vec<(String, u8)>,
}

impl ProfileSettings {
    /// The profiles on, in robots.txt order: the sitemap, Signmap, OCX, the DiWoo categories in
    /// ascending order, then CDIF's documents and lists (which robots.txt announces to their own
    /// user agent, [`Audience::Cdif`]).
    pub fn profiles(&self) -> Vec<Profile> {
        let mut all = vec![Profile::Sitemap];
        if self.signmap {
            all.push(Profile::Signmap);
        }
        if self.ocx.is_some() {
            all.push(Profile::Ocx);
        }
        let categories: std::collections::BTreeSet<u8> =
            self.diwoo.iter().map(|(_, n)| *n).collect();
        all.extend(categories.into_iter().map(Profile::Diwoo));
        if self.cdif {
            all.push(Profile::Cdif);
        }
        if self.cdif_list {
            all.push(Profile::CdifList);
        }
        all
    }

    /// The Dublin Core elements the profiles on write from, besides the identifiers.
    pub fn fields(&self) -> Fields {
        (self.profiles().into_iter()).fold(Fields::default(), |f, p| f.with(p.fields()))
    }

    /// Whether a profile that describes each record's landing page is on (Signmap, OCX, CDIF):
    /// the records are then collected for them (`profiles::signposts`).
    pub fn describes_records(&self) -> bool {
        self.profiles().into_iter().any(Profile::describes_records)
    }

    /// Whether only the plain sitemap is published.
    pub fn sitemap_only(&self) -> bool {
        self.profiles() == [Profile::Sitemap]
    }
}

/// What a profile is, for everything that iterates the profiles (file names, robots.txt, the
/// harvest's fields, the metrics): declared once, in the profile's own module (`signmap::SPEC`;
/// the sitemap's, which has no module of its own, is here), and registered in
/// [`Profile::spec`] and the `REGISTERED` table.
#[derive(Debug)]
pub struct Spec {
    /// Its name in metrics and logs (`signmap`); a DiWoo category's is followed by its number.
    pub label: &'static str,
    /// What its files' names start with: the index is `{prefix}.xml`, shard n
    /// `{prefix}-{n}.xml` (a DiWoo category's prefix is followed by its number, and its index
    /// is `sitemapindex-{prefix}{number}.xml`). No prefix followed by `-` may start another
    /// profile's, so that a name is read back as one profile's only (a test holds it).
    pub prefix: &'static str,
    /// Which crawlers robots.txt announces its index to.
    pub audience: Audience,
    /// What its entries are written from.
    pub feed: Feed,
    /// The Dublin Core elements its entries are written from, besides the identifiers.
    pub fields: Fields,
    /// How its part of a generation's summary is made and kept, when it has one (the sitemap's
    /// is the summary itself; CDIF's lists share CDIF's part). A spec made from another with
    /// `..OTHER` inherits this too: say `summary: None` unless it has a part of its own.
    pub summary: Option<SummarySpec>,
    /// For a profile fed by the records: its column of the collection, when it writes an entry
    /// of its own for each record (CDIF's lists read CDIF's). As with `summary`, a spec made
    /// with `..OTHER` must say `column: None` unless it has one of its own.
    pub column: Option<Column>,
}

/// A column of the records' collection ([`signposts`]): the entry a profile fed by the records
/// writes of each live record with a landing page. The collection keeps each column's entries
/// in its own files, the ledger ([`ledger`]) one length a record for each, and a patch
/// ([`merge`]) merges the changed records' entries into each column's published files. The
/// columns are the registered profiles' that have one, in the registered order ([`COLUMNS`]).
#[derive(Debug)]
pub struct Column {
    /// Its name in the collection's files and errors (`Signmap`).
    pub name: &'static str,
    /// What its entries are, and how they are published.
    pub kind: ColumnKind,
    /// Writes a record's entry into the buffer (cleared first), with the settings of the
    /// profiles on; `false` when the record has none in this profile (an OCX entry needs an
    /// OCX type).
    #[allow(clippy::type_complexity)]
    pub(crate) write:
        fn(&mut Vec<u8>, &record::Shared<'_>, &ProfileSettings, &mut record::Writers) -> bool,
}

/// What a column's entries are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnKind {
    /// `<url>` entries of `urlset`s opened by `open`: written into shard files as they come,
    /// published as they stand or cut again, patched by merging entries into the shards.
    Urlset {
        /// The `urlset`'s start tag, with the profile's namespaces.
        open: &'static str,
    },
    /// JSON-LD documents, each with its name's key in front: published one by one and in
    /// lists ([`cdif`]); a patch merges them into the lists only.
    Documents,
}

/// How a profile's part of a generation's summary ([`registry::ProfileSummary`]) is made and
/// kept in a manifest ([`registry::stored`]). The part's type is the manifest's format: fields
/// are added with `#[serde(default)]`, never renamed, so that manifests written before still
/// load.
#[derive(Debug)]
pub struct SummarySpec {
    /// Its field in a manifest (`signmap`): one part or `null`, or a list of parts. One
    /// profile's only (a test holds it), and none of the manifest's own fields (`source`,
    /// `urls`...), which the manifest would read first.
    pub field: &'static str,
    /// Whether the field holds a list of parts (a DiWoo category's each).
    pub list: bool,
    /// Its part from the field (or an item of its list): [`registry::load`] for a part held
    /// as its type serializes.
    pub load: fn(serde_json::Value) -> Result<registry::ProfileSummary, serde_json::Error>,
    /// Its part from what a render of the records wrote (the indexes, and the collector's
    /// counts), or `None` when it is not fed by the records (DiWoo's parts come from its
    /// writer).
    pub from_render:
        Option<fn(&registry::Indexes, &record::SignStats) -> Option<registry::ProfileSummary>>,
}

/// Which crawlers robots.txt announces a profile's index to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Audience {
    /// Every crawler: the index lists pages.
    AllCrawlers,
    /// CDIF's crawlers alone (`User-agent: CDIF1.0`): the index lists JSON-LD documents, or
    /// lists of them.
    Cdif,
}

/// What a profile's entries are written from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feed {
    /// The URLs published, from the URL inventory (the sitemap, DiWoo).
    Inventory,
    /// Each record's landing page and what describes it, collected as the records arrive
    /// ([`signposts`]).
    Records,
}

/// The sitemap's spec: the published URLs, to every crawler.
const SITEMAP: Spec = Spec {
    label: "sitemap",
    prefix: "sitemap",
    audience: Audience::AllCrawlers,
    feed: Feed::Inventory,
    fields: Fields::of(&[]),
    summary: None,
    column: None,
};

/// What a DiWoo category's index name starts with, before its prefix and number.
const DIWOO_INDEX: &str = "sitemapindex-";

/// What a file name of a published profile is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileName {
    /// The profile's index (`signmap.xml`).
    Index(Profile),
    /// Shard `n` of the index (`signmap-3.xml`, `sitemap-2.xml.gz`).
    Shard(Profile, u32),
    /// CDIF metadata list `n` (`cdif-list-4.jsonld`), listed by [`Profile::CdifList`]'s shards.
    List(u32),
    /// A record's CDIF document (`cdif/00ff00ff00ff00ff.jsonld`), by its key
    /// ([`Profile::document_name`]), listed by [`Profile::Cdif`]'s shards.
    Document(u64),
}

impl Profile {
    /// Every kind of profile, in the order their parts of a summary are shown and kept, and
    /// their indexes announced (`REGISTERED`; DiWoo's categories share a spec and stand there
    /// as one, the first: only its spec is to be read).
    pub(crate) fn registered() -> impl Iterator<Item = Profile> {
        REGISTERED.into_iter()
    }

    /// What it is: the [`Spec`] its module declares. A profile registers with its arm here
    /// (the compiler asks for it) and its row in `REGISTERED`; its setting turns it on in
    /// [`ProfileSettings::profiles`]. The name tests go through every profile the settings can
    /// turn on, so a missing row fails them when its names do not vary.
    pub const fn spec(self) -> &'static Spec {
        match self {
            Profile::Sitemap => &SITEMAP,
            Profile::Signmap => &signmap::SPEC,
            Profile::Ocx => &ocx::SPEC,
            Profile::Cdif => &cdif::SPEC,
            Profile::CdifList => &cdif::LIST_SPEC,
            Profile::Diwoo(_) => &diwoo::SPEC,
        }
    }

    /// Its name in metrics and logs: `sitemap`, `signmap`, `ocx`, `cdif`, `cdif_list`,
    /// `diwoo-infocat014`.
    pub fn label(self) -> String {
        self.numbered(self.spec().label)
    }

    /// `base` (its spec's label or prefix), followed by a DiWoo category's three digits.
    fn numbered(self, base: &str) -> String {
        match self {
            Profile::Diwoo(category) => format!("{base}{category:03}"),
            _ => base.to_owned(),
        }
    }

    /// Whether robots.txt announces it to CDIF's user agent rather than to every crawler: its
    /// locations are JSON-LD documents (or lists of them), not pages.
    pub fn for_cdif(self) -> bool {
        self.spec().audience == Audience::Cdif
    }

    /// Whether it describes each record's landing page, so that the records are collected for
    /// it as they arrive ([`signposts`]), rather than listing the inventory's URLs.
    pub fn describes_records(self) -> bool {
        self.spec().feed == Feed::Records
    }

    /// The name of its index: `sitemap.xml`, `signmap.xml`, `ocx.xml`, `cdif-sitemap.xml`,
    /// `cdif-list-sitemap.xml`, `sitemapindex-diwoo-infocat014.xml`.
    pub fn index_name(self) -> String {
        match self {
            Profile::Diwoo(_) => format!("{DIWOO_INDEX}{}.xml", self.shard_prefix()),
            _ => format!("{}.xml", self.spec().prefix),
        }
    }

    /// What its shards' names start with, before `-{n}.xml`.
    pub fn shard_prefix(self) -> String {
        self.numbered(self.spec().prefix)
    }

    /// The name of shard `n` (from 1) with extension `ext` (`xml`; the sitemap's may be
    /// `xml.gz`).
    pub fn shard_name(self, n: u32, ext: &str) -> String {
        format!("{}-{n}.{ext}", self.shard_prefix())
    }

    /// The name of CDIF metadata list `n` (from 1).
    pub fn list_name(n: u32) -> String {
        format!("{CDIF_LIST_PREFIX}-{n}.jsonld")
    }

    /// The name of the CDIF document whose key is `key`: `cdif/`, the key in 16 lower-case hex
    /// digits, `.jsonld` (`cdif/00ff00ff00ff00ff.jsonld`). A record's key is the first 64 bits
    /// of its identifier's SHA-256, so its document keeps its URL from one harvest to the next.
    pub fn document_name(key: u64) -> String {
        format!(
            "{DOCUMENT_DIR}{key:0width$x}{DOCUMENT_EXT}",
            width = DOCUMENT_KEY_LEN
        )
    }

    /// The Dublin Core elements it writes from, besides the identifiers.
    pub fn fields(self) -> Fields {
        self.spec().fields
    }
}

/// Every kind of profile, a row each, in the order their parts of a summary are shown and kept
/// in a manifest: with its arm in [`Profile::spec`], a profile's registration. DiWoo's
/// categories share a spec and stand here as one, the first.
const REGISTERED: [Profile; 6] = [
    Profile::Sitemap,
    Profile::Signmap,
    Profile::Ocx,
    Profile::Cdif,
    Profile::CdifList,
    Profile::Diwoo(1),
];

/// How many columns the records' collection has: one for each registered profile with a
/// [`Column`].
pub const COLUMNS: usize = {
    let mut n = 0;
    let mut i = 0;
    while i < REGISTERED.len() {
        if REGISTERED[i].spec().column.is_some() {
            n += 1;
        }
        i += 1;
    }
    n
};

/// The profiles of the columns, in order: the registered profiles with a [`Column`].
pub const COLUMN_PROFILES: [Profile; COLUMNS] = {
    let mut out = [Profile::Sitemap; COLUMNS];
    let (mut n, mut i) = (0, 0);
    while i < REGISTERED.len() {
        if REGISTERED[i].spec().column.is_some() {
            out[n] = REGISTERED[i];
            n += 1;
        }
        i += 1;
    }
    out
};

/// The columns, in order: each of [`COLUMN_PROFILES`]'s [`Column`].
pub const COLUMN_SPECS: [&Column; COLUMNS] = {
    // Filled below; a constant array needs a value to start from.
    const UNSET: Column = Column {
        name: "",
        kind: ColumnKind::Documents,
        write: |_, _, _, _| false,
    };
    let mut out = [&UNSET; COLUMNS];
    let mut c = 0;
    while c < COLUMNS {
        out[c] = match &COLUMN_PROFILES[c].spec().column {
            Some(column) => column,
            None => panic!("a column's profile has a column"),
        };
        c += 1;
    }
    out
};

/// A record's entries' lengths, one for each column ([`COLUMN_PROFILES`]; 0 for none).
pub type Lens = [u32; COLUMNS];

impl Profile {
    /// Its column of the records' collection; `None` for a profile without one.
    pub const fn column_index(self) -> Option<usize> {
        let mut c = 0;
        while c < COLUMNS {
            // Specs are told apart by their labels (each spec's is its own; DiWoo's categories
            // share one spec, which has no column).
            if same_text(COLUMN_PROFILES[c].spec().label, self.spec().label) {
                return Some(c);
            }
            c += 1;
        }
        None
    }

    /// What its column's entries are, for a profile with a column.
    pub fn column_kind(self) -> Option<ColumnKind> {
        self.spec().column.as_ref().map(|c| c.kind)
    }

    /// Its [`Column`] and that column's number, for a profile registered with one.
    ///
    /// # Panics
    ///
    /// When it has none: the callers name a profile that does.
    pub(crate) const fn column(self) -> (usize, &'static Column) {
        match (self.column_index(), &self.spec().column) {
            (Some(c), Some(column)) => (c, column),
            _ => panic!("the profile has no column of the records' collection"),
        }
    }
}

/// Whether two texts are the same (`==` is not for constants).
const fn same_text(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The registered profiles whose file names do not vary (all but DiWoo's categories): names
/// are parsed by their specs' prefixes.
fn named() -> impl Iterator<Item = Profile> {
    Profile::registered().filter(|p| !matches!(p, Profile::Diwoo(_)))
}

/// What CDIF's metadata lists' names start with (`cdif-list-1.jsonld`).
pub const CDIF_LIST_PREFIX: &str = "cdif-list";

/// The folder of the CDIF documents ([`Profile::document_name`]), which a collector writing
/// many names joins with the key and [`DOCUMENT_EXT`] itself.
pub(crate) const DOCUMENT_DIR: &str = "cdif/";
/// The extension of a CDIF document's name.
pub(crate) const DOCUMENT_EXT: &str = ".jsonld";
/// The hex digits of a CDIF document's key in its name.
pub(crate) const DOCUMENT_KEY_LEN: usize = 16;

/// The name of a shard after its content: `sitemap-1.xml` -> `sitemap-1-<16 hex>.xml`, from
/// the first 16 hex digits of `hash`.
pub fn content_name(name: &str, hash: &str) -> String {
    let (stem, ext) = name.split_once('.').unwrap_or((name, ""));
    let short = &hash[..16.min(hash.len())];
    if ext.is_empty() {
        format!("{stem}-{short}")
    } else {
        format!("{stem}-{short}.{ext}")
    }
}

impl FileName {
    /// Reads a published file's name: an index, a shard (`.xml`, or `.xml.gz` for the sitemap
    /// and its kin, which a gateway serves both ways), a CDIF list or a CDIF document (its key
    /// in lower-case hex only); `None` for any other name.
    /// Numbers are positive decimals without leading zeros, DiWoo categories three digits. A
    /// shard or list named after its content, as published to object storage
    /// (`sitemap-2-3fa2c91b0d4e5a67.xml`, [`content_name`]), is the same shard.
    pub fn parse(name: &str) -> Option<FileName> {
        if let Some(hex) = name
            .strip_prefix(DOCUMENT_DIR)
            .and_then(|rest| rest.strip_suffix(DOCUMENT_EXT))
        {
            let lower_hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
            return (hex.len() == DOCUMENT_KEY_LEN && hex.bytes().all(lower_hex))
                .then(|| u64::from_str_radix(hex, 16).ok())
                .flatten()
                .map(FileName::Document);
        }
        if let Some(n) = name
            .strip_prefix(CDIF_LIST_PREFIX)
            .and_then(|rest| rest.strip_prefix('-')?.strip_suffix(".jsonld"))
        {
            return number(n).map(FileName::List);
        }
        if let Some(category) = name
            .strip_prefix(DIWOO_INDEX)
            .and_then(|rest| rest.strip_prefix(diwoo::SPEC.prefix))
            .and_then(|rest| rest.strip_suffix(".xml"))
        {
            return self::category(category).map(|c| FileName::Index(Profile::Diwoo(c)));
        }
        // Read without allocating: the gateway parses the name of every request.
        let fixed = name
            .strip_suffix(".xml")
            .and_then(|stem| named().find(|p| stem == p.spec().prefix));
        if let Some(p) = fixed {
            return Some(FileName::Index(p));
        }
        let (profile, rest) = match name.strip_prefix(diwoo::SPEC.prefix) {
            Some(rest) => {
                let (category, rest) = rest.split_at_checked(3)?;
                (
                    Profile::Diwoo(self::category(category)?),
                    rest.strip_prefix('-')?,
                )
            }
            None => named()
                .find_map(|p| Some((p, name.strip_prefix(p.spec().prefix)?.strip_prefix('-')?)))?,
        };
        let n = rest
            .strip_suffix(".xml.gz")
            .or_else(|| rest.strip_suffix(".xml"))?;
        number(n).map(|n| FileName::Shard(profile, n))
    }
}

/// A positive decimal without leading zeros.
fn number(n: &str) -> Option<u32> {
    // A content name's hash after the number: `-` and 16 lowercase hex digits.
    let n = match n.split_once('-') {
        Some((n, hash))
            if hash.len() == 16
                && hash
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) =>
        {
            n
        }
        Some(_) => return None,
        None => n,
    };
    let digits = !n.is_empty() && !n.starts_with('0') && n.bytes().all(|b| b.is_ascii_digit());
    digits.then(|| n.parse().ok()).flatten()
}

/// A DiWoo category as its three digits (`014`).
fn category(n: &str) -> Option<u8> {
    (n.len() == 3 && n.bytes().all(|b| b.is_ascii_digit()))
        .then(|| n.parse().ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every profile the settings can turn on (DiWoo's categories 1, 14 and 17 of them). Every
    /// field is named, so a new profile's setting does not compile until it is on here too.
    fn every_profile() -> Vec<Profile> {
        ProfileSettings {
            signmap: true,
            ocx: Some(ocx::OcxConfig::default()),
            cdif: true,
            cdif_list: true,
            diwoo: vec![("a".into(), 1), ("b".into(), 14), ("c".into(), 17)],
        }
        .profiles()
    }

    /// Each registered part of a summary has a manifest field of its own: a spec made from
    /// another (`..SPEC`) that kept its summary would write the field twice, and count its
    /// part twice.
    #[test]
    fn every_summary_field_is_one_profiles() {
        let fields: Vec<&str> = Profile::registered()
            .filter_map(|p| Some(p.spec().summary.as_ref()?.field))
            .collect();
        let unique: std::collections::BTreeSet<&str> = fields.iter().copied().collect();
        assert_eq!(unique.len(), fields.len(), "{fields:?}");
        assert_eq!(fields, ["signmap", "ocx", "cdif", "diwoo"]);
    }

    /// The collection's columns are the registered profiles with a [`Column`], in the
    /// registered order, each fed by the records; a profile's column number is its place among
    /// them, and their names (which name their files in the collection's folder) differ.
    #[test]
    fn the_columns_follow_the_registered_profiles() {
        assert_eq!(
            COLUMN_PROFILES,
            [Profile::Signmap, Profile::Ocx, Profile::Cdif]
        );
        for (c, p) in COLUMN_PROFILES.into_iter().enumerate() {
            assert_eq!(p.column_index(), Some(c));
            assert_eq!(p.column().0, c);
            assert_eq!(COLUMN_SPECS[c].name, p.column().1.name, "{p:?}");
            assert!(p.describes_records(), "{p:?}");
        }
        for p in every_profile()
            .into_iter()
            .filter(|p| !COLUMN_PROFILES.contains(p))
        {
            assert_eq!(p.column_index(), None, "{p:?}");
        }
        let names: std::collections::BTreeSet<String> = (COLUMN_PROFILES.iter())
            .map(|p| p.column().1.name.to_ascii_lowercase())
            .collect();
        assert_eq!(names.len(), COLUMNS);
    }

    /// A name is read back as one profile's only: no profile's prefix and `-` starts another's
    /// prefix (which `FileName::parse`, trying the prefixes in turn, would then read wrongly).
    #[test]
    fn no_profile_prefix_starts_another() {
        let profiles = every_profile();
        assert_eq!(profiles.len(), 8);
        for a in &profiles {
            for b in profiles
                .iter()
                .filter(|b| b.spec().prefix != a.spec().prefix)
            {
                let (a, b) = (a.spec().prefix, b.spec().prefix);
                assert!(!b.starts_with(&format!("{a}-")), "{a} starts {b}");
            }
        }
    }

    #[test]
    fn every_name_a_profile_formats_parses_back_to_it() {
        for p in every_profile() {
            assert_eq!(FileName::parse(&p.index_name()), Some(FileName::Index(p)));
            for n in [1, 9, 10, 4711] {
                assert_eq!(
                    FileName::parse(&p.shard_name(n, "xml")),
                    Some(FileName::Shard(p, n)),
                    "{p:?} {n}"
                );
                assert_eq!(
                    FileName::parse(&p.shard_name(n, "xml.gz")),
                    Some(FileName::Shard(p, n))
                );
            }
        }
        assert_eq!(
            FileName::parse(&Profile::list_name(12)),
            Some(FileName::List(12))
        );
        for key in [0, 0xff, 0x00ff_00ff_00ff_00ff, u64::MAX] {
            let name = Profile::document_name(key);
            assert_eq!(
                FileName::parse(&name),
                Some(FileName::Document(key)),
                "{name}"
            );
        }
        assert_eq!(Profile::document_name(0xff), "cdif/00000000000000ff.jsonld");
        // Named after their content, as in a bucket.
        let hash = "0123456789abcdef";
        for (name, parsed) in [
            (
                content_name("sitemap-3.xml.gz", hash),
                FileName::Shard(Profile::Sitemap, 3),
            ),
            (
                content_name(&Profile::Diwoo(14).shard_name(2, "xml"), hash),
                FileName::Shard(Profile::Diwoo(14), 2),
            ),
            (
                content_name(&Profile::list_name(5), hash),
                FileName::List(5),
            ),
        ] {
            assert_eq!(FileName::parse(&name), Some(parsed), "{name}");
        }
    }

    /// What the harvest reads follows from the profiles on: nothing beyond the identifiers for
    /// the sitemap and DiWoo, the union of each profile's fields otherwise.
    #[test]
    fn the_profiles_on_decide_the_fields_read() {
        use oai_pmh::DcElement::*;
        let plain = ProfileSettings::default();
        assert!(plain.sitemap_only() && !plain.describes_records());
        assert_eq!(plain.fields(), Fields::default());
        let diwoo = ProfileSettings {
            diwoo: vec![("a".into(), 1)],
            ..ProfileSettings::default()
        };
        assert!(!diwoo.sitemap_only() && !diwoo.describes_records());
        assert_eq!(diwoo.fields(), Fields::default());
        let signmap = ProfileSettings {
            signmap: true,
            ..ProfileSettings::default()
        };
        assert_eq!(signmap.fields(), Fields::of(&[Type, Rights]));
        let lists = ProfileSettings {
            cdif_list: true,
            ..ProfileSettings::default()
        };
        assert!(lists.describes_records());
        assert_eq!(lists.fields(), Profile::Cdif.fields());
        let both = ProfileSettings {
            signmap: true,
            ocx: Some(ocx::OcxConfig::default()),
            ..ProfileSettings::default()
        };
        assert_eq!(
            both.fields(),
            Fields::of(&[Type, Rights, Title, Description])
        );
    }

    #[test]
    fn other_names_are_not_profile_files() {
        for name in [
            "",
            "robots.txt",
            "sitemap-0.xml",
            "sitemap-01.xml",
            "sitemap-.xml",
            "sitemap-1.json",
            "sitemap-1.xml.gz.gz",
            "sitemap-x.xml",
            "signmap.xml.gz",
            "sitemapindex-diwoo-infocat14.xml",
            "diwoo-infocat014.xml",
            "diwoo-infocat0145-1.xml",
            "diwoo-infocat01a-1.xml",
            "cdif-list-0.jsonld",
            "cdif-list-1.xml",
            "cdif-sitemap-1.jsonld",
            "other-1.xml",
            "sitemap-99999999999.xml",
            "sitemap-1-0123456789ABCDEF.xml",
            "sitemap-1-0123456789abcde.xml",
            "sitemap-1-0123456789abcdef0.xml",
            "sitemap-1-x123456789abcdef.xml",
            "sitemap--0123456789abcdef.xml",
            "cdif/00000000000000FF.jsonld",
            "cdif/0000000000000ff.jsonld",
            "cdif/000000000000000ff.jsonld",
            "cdif/00000000000000fg.jsonld",
            "cdif/+0000000000000ff.jsonld",
            "cdif/00000000000000ff.json",
        ] {
            assert_eq!(FileName::parse(name), None, "{name:?}");
        }
    }
}
