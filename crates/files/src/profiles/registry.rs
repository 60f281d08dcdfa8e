//! What each profile beside the sitemap published in a generation, in the one list its
//! presenters iterate: the summary (`export --json`, the gateway's manifest), `export`'s text
//! summary, the status page, the metrics and the indexes the gateway's robots.txt announces.
//! Each profile's module holds its own part and what it says of it ([`super::report::Report`]);
//! a new profile registers here: a [`ProfileSummary`] variant, its arm in
//! [`ProfileSummary::report`], its part in [`ProfileSummary::of`] and its field in the
//! manifest's form ([`stored`]).

use url::Url;

use super::cdif::CdifSummary;
use super::diwoo::DiwooStats;
use super::ocx::OcxSummary;
use super::record::SignStats;
use super::report::Report;
use super::signmap::SignmapSummary;

/// What one profile published in a generation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProfileSummary {
    /// The Signmap.
    Signmap(SignmapSummary),
    /// The OCX sitemap.
    Ocx(OcxSummary),
    /// CDIF's documents and lists.
    Cdif(CdifSummary),
    /// One DiWoo category.
    Diwoo(DiwooStats),
}

impl ProfileSummary {
    /// What the profile says of itself.
    pub fn report(&self) -> &dyn Report {
        match self {
            ProfileSummary::Signmap(s) => s,
            ProfileSummary::Ocx(s) => s,
            ProfileSummary::Cdif(s) => s,
            ProfileSummary::Diwoo(s) => s,
        }
    }

    /// The profiles a render published, in the order they are shown (Signmap, OCX, CDIF, each
    /// DiWoo category): `landing` the landing-page profiles' counts (none when none is on),
    /// with the indexes they wrote, and DiWoo's categories.
    pub fn of(landing: Option<&SignStats>, indexes: Indexes, diwoo: Vec<DiwooStats>) -> Vec<Self> {
        let mut all = Vec::new();
        if let Some(stats) = landing {
            let signmap = indexes.signmap.map(|url| SignmapSummary::of(&url, stats));
            let ocx = indexes.ocx.map(|url| OcxSummary::of(&url, stats));
            let cdif = CdifSummary::of(indexes.cdif.as_ref(), indexes.cdif_lists.as_ref(), stats);
            all.extend(signmap.map(ProfileSummary::Signmap));
            all.extend(ocx.map(ProfileSummary::Ocx));
            all.extend(cdif.map(ProfileSummary::Cdif));
        }
        all.extend(diwoo.into_iter().map(ProfileSummary::Diwoo));
        all
    }
}

/// The indexes a render wrote for the landing-page profiles.
#[derive(Clone, Debug, Default)]
pub struct Indexes {
    /// The Signmap's.
    pub signmap: Option<Url>,
    /// OCX's.
    pub ocx: Option<Url>,
    /// The CDIF sitemap's, when the documents are published one by one.
    pub cdif: Option<Url>,
    /// The CDIF lists' sitemap's, and the number of lists.
    pub cdif_lists: Option<(Url, usize)>,
}

/// The `oai-bridge` package's `Summary::profiles` in a manifest: a field per profile (`signmap`, `ocx`,
/// `cdif`, `diwoo`), as manifests held them before the list, through the manifest's own types
/// where the in-memory one is the pipeline's (DiWoo's): a change to it changes no manifest on
/// disk, it stops compiling here instead.
pub mod stored {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::{CdifSummary, DiwooStats, OcxSummary, ProfileSummary, SignmapSummary};

    /// The profiles' fields of a manifest.
    #[derive(Default, Serialize, Deserialize)]
    struct Stored {
        #[serde(default)]
        signmap: Option<SignmapSummary>,
        #[serde(default)]
        ocx: Option<OcxSummary>,
        #[serde(default)]
        cdif: Option<CdifSummary>,
        #[serde(default)]
        diwoo: Vec<StoredDiwoo>,
    }

    /// One DiWoo category's counts, as manifests hold them.
    #[derive(Serialize, Deserialize)]
    struct StoredDiwoo {
        category: u8,
        urls: u64,
        requires_https: u64,
        requires_lastmod: u64,
    }

    /// The profiles' summaries as a manifest holds them.
    ///
    /// # Errors
    ///
    /// As the serializer's.
    pub fn serialize<S: Serializer>(profiles: &[ProfileSummary], s: S) -> Result<S::Ok, S::Error> {
        let mut stored = Stored::default();
        for p in profiles {
            match p {
                ProfileSummary::Signmap(m) => stored.signmap = Some(m.clone()),
                ProfileSummary::Ocx(o) => stored.ocx = Some(o.clone()),
                ProfileSummary::Cdif(c) => stored.cdif = Some(c.clone()),
                ProfileSummary::Diwoo(d) => {
                    let DiwooStats {
                        category,
                        urls,
                        requires_https,
                        requires_lastmod,
                    } = *d;
                    stored.diwoo.push(StoredDiwoo {
                        category,
                        urls,
                        requires_https,
                        requires_lastmod,
                    });
                }
            }
        }
        stored.serialize(s)
    }

    /// The profiles' summaries from a manifest.
    ///
    /// # Errors
    ///
    /// As the deserializer's: not a manifest's summaries.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ProfileSummary>, D::Error> {
        let stored = Stored::deserialize(d)?;
        let diwoo = stored.diwoo.into_iter().map(|s| {
            ProfileSummary::Diwoo(DiwooStats {
                category: s.category,
                urls: s.urls,
                requires_https: s.requires_https,
                requires_lastmod: s.requires_lastmod,
            })
        });
        Ok((stored.signmap.map(ProfileSummary::Signmap).into_iter())
            .chain(stored.ocx.map(ProfileSummary::Ocx))
            .chain(stored.cdif.map(ProfileSummary::Cdif))
            .chain(diwoo)
            .collect())
    }
}
