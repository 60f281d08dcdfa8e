//! What a profile says of what it published in a generation, wherever it is shown: the
//! [`Report`] each profile's module implements for its part of the summary
//! (`signmap::SignmapSummary`, `ocx::OcxSummary`, `cdif::CdifSummary`, `diwoo::DiwooStats`).
//! The list of those parts is [`super::registry`]; how a profile's part is made and kept, its
//! spec's [`super::SummarySpec`].

use std::fmt::Debug;

use url::Url;

use super::Profile;

/// What a profile's part of a generation's summary says, wherever it is shown. The texts are
/// the profile's own; the presenters only lay them out (the status page escapes and links). A
/// manifest holds the part as it serializes (`registry::stored`), and its spec reads it back
/// (`SummarySpec::load`).
pub trait Report: erased_serde::Serialize + Debug + Send + Sync {
    /// The profile whose part it is (its spec names the part's field in a manifest).
    fn profile(&self) -> Profile;

    /// Its entries and what it did not publish, by reason, for the metrics: one per profile
    /// it is (CDIF's documents and lists are two).
    fn counts(&self) -> Vec<ProfileCounts>;

    /// Its lines in `export`'s text summary: a label and what it says.
    fn export_lines(&self) -> Vec<(String, String)>;

    /// Its line on the status page; `public_url` is the repository's.
    fn status_line(&self, public_url: &Url) -> Vec<Piece>;

    /// The indexes it announces to every crawler (robots.txt's `Sitemap:` lines); `public_url`
    /// is the repository's.
    fn indexes(&self, public_url: &Url) -> Vec<String>;

    /// The indexes it announces to JSON-LD crawlers alone (`User-agent: CDIF1.0`).
    fn jsonld_indexes(&self) -> Vec<String> {
        Vec::new()
    }
}

// A part serializes as its type does, through the trait: `dyn Report` is `serde::Serialize`.
// (erased-serde: a generic method cannot be called through `dyn`, and writing the parts
// through `serde_json::Value` instead would sort their fields.)
erased_serde::serialize_trait_object!(Report);

/// A piece of a status line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    /// Text.
    Text(String),
    /// A link: its text and where it goes.
    Link(&'static str, String),
}

/// What one profile of a generation published: its entries, and what it did not publish, by
/// reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileCounts {
    /// The profile.
    pub profile: Profile,
    /// Entries published.
    pub entries: u64,
    /// What it did not publish, by reason.
    pub drops: Vec<(&'static str, u64)>,
}

impl ProfileCounts {
    /// `profile`'s `entries`, and what it did not publish, `drops`.
    pub(crate) fn new(profile: Profile, entries: u64, drops: &[(&'static str, u64)]) -> Self {
        ProfileCounts {
            profile,
            entries,
            drops: drops.to_vec(),
        }
    }
}

/// What a profile left out, by reason, as its lines say it: `not published: a 1, b 2`.
pub(crate) fn not_published(drops: &[(&str, u64)]) -> String {
    let each: Vec<String> = drops
        .iter()
        .map(|(reason, n)| format!("{reason} {n}"))
        .collect();
    format!("not published: {}", each.join(", "))
}

/// `export`'s lines of a profile whose entries one index lists (the Signmap, OCX): `name`,
/// its `published` entries and `drops`, and its index.
pub(crate) fn one_index_lines(
    name: &str,
    index_url: &str,
    published: u64,
    drops: &[(&str, u64)],
) -> Vec<(String, String)> {
    let what = format!("{published} records; {}", not_published(drops));
    vec![
        (name.into(), what),
        (format!("{name} index"), index_url.into()),
    ]
}

/// The status line of a profile whose entries one index lists: its name linking the index,
/// its `published` entries and `drops`.
pub(crate) fn one_index_status(
    name: &'static str,
    index_url: &str,
    published: u64,
    drops: &[(&str, u64)],
) -> Vec<Piece> {
    let what = format!(": {published} entries; {}", not_published(drops));
    vec![Piece::Link(name, index_url.into()), Piece::Text(what)]
}
