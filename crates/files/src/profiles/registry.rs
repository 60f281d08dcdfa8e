//! What each profile beside the sitemap published in a generation, in the one list its
//! presenters iterate: the summary (`export --json`, the gateway's manifest), `export`'s text
//! summary, the status page, the metrics and the indexes the gateway's robots.txt announces.
//! Each profile's module holds its own part and what it says of it ([`super::report::Report`]),
//! and says in its [`super::Spec`] how its part is made and kept ([`super::SummarySpec`]): this
//! module names no profile; it goes through the registered profiles' specs.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use url::Url;

use super::record::SignStats;
use super::report::Report;
use super::{Audience, Profile, SummarySpec};

/// What one profile published in a generation: its part of the summary, as its module made it.
#[derive(Clone)]
pub struct ProfileSummary(Arc<dyn Report>);

impl ProfileSummary {
    /// A profile's part of the summary.
    pub fn new(part: impl Report + 'static) -> Self {
        ProfileSummary(Arc::new(part))
    }

    /// What the profile says of itself.
    pub fn report(&self) -> &dyn Report {
        &*self.0
    }

    /// Which profile it is (CDIF's documents and lists share one part, [`Profile::Cdif`]'s).
    pub fn profile(&self) -> Profile {
        self.0.profile()
    }

    /// The profiles a render published, in the registered order (the profiles' table,
    /// the order a manifest keeps them in, so that a generation shows them alike before and
    /// after a restart): `landing` the landing-page profiles' counts (none when none is on),
    /// with the indexes they wrote, and `from_writers` the parts the profiles not fed by the
    /// records made themselves (DiWoo's categories, in their order).
    pub fn of(
        landing: Option<&SignStats>,
        indexes: &Indexes,
        from_writers: impl IntoIterator<Item = ProfileSummary>,
    ) -> Vec<Self> {
        let made = |stats| {
            Profile::registered()
                .filter_map(|p| p.spec().summary.as_ref()?.from_render)
                .filter_map(move |from_render| from_render(indexes, stats))
        };
        let mut all: Vec<Self> = (landing.into_iter().flat_map(made))
            .chain(from_writers)
            .collect();
        // Stable: a profile's parts (DiWoo's categories) keep their order.
        all.sort_by_key(|part| {
            let field = part.summary_spec().map(|s| s.field);
            stored::specs().position(|s| Some(s.field) == field)
        });
        all
    }

    /// How its profile's part is made and kept, which every registered profile with a part
    /// has.
    fn summary_spec(&self) -> Option<&'static SummarySpec> {
        self.profile().spec().summary.as_ref()
    }
}

impl fmt::Debug for ProfileSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Two parts are equal when they are the same profile's and a manifest holds them alike (a
/// part that does not serialize equals none).
impl PartialEq for ProfileSummary {
    fn eq(&self, other: &Self) -> bool {
        let held = |p: &Self| serde_json::to_value(&*p.0);
        self.profile() == other.profile()
            && matches!((held(self), held(other)), (Ok(a), Ok(b)) if a == b)
    }
}

impl Eq for ProfileSummary {}

/// Reads a profile's part of a summary from a manifest's field, for a profile whose part is
/// held as its type serializes ([`SummarySpec::load`]).
///
/// # Errors
///
/// When the field does not hold such a part.
pub fn load<T: Report + DeserializeOwned + 'static>(
    field: serde_json::Value,
) -> Result<ProfileSummary, serde_json::Error> {
    serde_json::from_value::<T>(field).map(ProfileSummary::new)
}

/// The indexes a render wrote for the landing-page profiles, by profile, each with the number
/// of files it lists when its profile counts them (CDIF's lists).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Indexes {
    written: BTreeMap<Profile, (Url, usize)>,
}

impl Indexes {
    /// Records `profile`'s index, when it wrote one.
    pub fn add(&mut self, profile: Profile, index: Option<Url>) {
        if let Some(url) = index {
            self.written.insert(profile, (url, 0));
        }
    }

    /// Records `profile`'s index and the number of files it lists (CDIF's lists).
    pub fn add_counted(&mut self, profile: Profile, index: Url, files: usize) {
        self.written.insert(profile, (index, files));
    }

    /// `profile`'s index, when it wrote one.
    pub fn get(&self, profile: Profile) -> Option<&Url> {
        self.written.get(&profile).map(|(url, _)| url)
    }

    /// `profile`'s index and the number of files it lists, when it wrote one and counted them.
    pub fn counted(&self, profile: Profile) -> Option<(&Url, usize)> {
        self.written.get(&profile).map(|(url, files)| (url, *files))
    }

    /// The indexes robots.txt announces to `audience`, in the registered order.
    pub fn for_audience(&self, audience: Audience) -> impl Iterator<Item = &Url> {
        (Profile::registered())
            .filter(move |p| p.spec().audience == audience)
            .filter_map(|p| self.get(p))
    }
}

/// The `oai-bridge` package's `Summary::profiles` in a manifest: a field per registered profile
/// with a part ([`SummarySpec::field`]: `signmap`, `ocx`, `cdif`, `diwoo`), in the registered
/// order, each holding its part or `null` (or a list of parts, for DiWoo's categories), as
/// manifests held them before the list.
pub mod stored {
    use serde::de::Error as _;
    use serde::ser::SerializeMap;
    use serde::{Deserialize, Deserializer, Serializer};
    use serde_json::Value;

    use super::{Profile, ProfileSummary, SummarySpec};

    /// The registered profiles' summary specs, in order.
    pub(super) fn specs() -> impl Iterator<Item = &'static SummarySpec> {
        Profile::registered().filter_map(|p| p.spec().summary.as_ref())
    }

    /// The profiles' summaries as a manifest holds them.
    ///
    /// # Errors
    ///
    /// As the serializer's.
    pub fn serialize<S: Serializer>(profiles: &[ProfileSummary], s: S) -> Result<S::Ok, S::Error> {
        debug_assert!(
            profiles.iter().all(|p| p.summary_spec().is_some()),
            "a part of a profile with no summary spec would not be kept: {profiles:?}"
        );
        let mut map = s.serialize_map(None)?;
        for spec in specs() {
            let mut parts = (profiles.iter())
                .filter(|p| p.summary_spec().is_some_and(|s| s.field == spec.field))
                .map(|p| p.report());
            if spec.list {
                map.serialize_entry(spec.field, &parts.collect::<Vec<_>>())?;
            } else {
                map.serialize_entry(spec.field, &parts.next())?;
                debug_assert!(parts.next().is_none(), "two parts for `{}`", spec.field);
            }
        }
        map.end()
    }

    /// The profiles' summaries from a manifest: its fields not those of a registered profile's
    /// part are left to the manifest.
    ///
    /// # Errors
    ///
    /// As the deserializer's; a field that does not hold its profile's part, named.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ProfileSummary>, D::Error> {
        let mut fields = std::collections::BTreeMap::<String, Value>::deserialize(d)?;
        let mut all = Vec::new();
        for spec in specs() {
            let parts = match fields.remove(spec.field) {
                None | Some(Value::Null) => continue,
                Some(Value::Array(list)) if spec.list => list,
                Some(one) if !spec.list => vec![one],
                Some(_) => {
                    let why = format!("`{}` is not a list of its profile's parts", spec.field);
                    return Err(D::Error::custom(why));
                }
            };
            for part in parts {
                let part = (spec.load)(part)
                    .map_err(|e| D::Error::custom(format!("`{}`: {e}", spec.field)))?;
                all.push(part);
            }
        }
        Ok(all)
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    use super::*;
    use crate::profiles::diwoo::DiwooStats;
    use crate::profiles::signmap::SignmapSummary;

    /// A manifest's profiles, as `Summary` flattens them into its fields.
    #[derive(Debug, Serialize, Deserialize)]
    struct Manifest {
        source: String,
        #[serde(flatten, with = "stored")]
        profiles: Vec<ProfileSummary>,
    }

    /// A Signmap and a DiWoo category.
    fn parts() -> Vec<ProfileSummary> {
        let signmap = SignmapSummary {
            index_url: "https://p.example/signmap.xml".into(),
            published: 7,
            no_landing_page: 2,
            duplicate: 1,
        };
        let diwoo = DiwooStats {
            category: 14,
            urls: 3,
            requires_https: 4,
            requires_lastmod: 0,
        };
        vec![ProfileSummary::new(signmap), ProfileSummary::new(diwoo)]
    }

    /// The fields come in the registered order, each part's in its type's order, the parts
    /// not published as `null` (or an empty list), as manifests written before the list hold
    /// them; and they load back.
    #[test]
    fn a_manifest_keeps_the_fields_it_always_had() {
        let manifest = Manifest {
            source: "s".into(),
            profiles: parts(),
        };
        let json = serde_json::to_string(&manifest).unwrap();
        assert_eq!(
            json,
            r#"{"source":"s","signmap":{"index_url":"https://p.example/signmap.xml","published":7,"no_landing_page":2,"duplicate":1},"ocx":null,"cdif":null,"diwoo":[{"category":14,"urls":3,"requires_https":4,"requires_lastmod":0}]}"#
        );
        let back: Manifest = serde_json::from_str(&json).unwrap();
        assert_eq!(back.profiles, parts());
        assert_eq!(back.source, "s");
    }

    /// A field that does not hold its profile's part is refused, named.
    #[test]
    fn a_part_that_does_not_load_is_named() {
        let bad = r#"{"source":"s","signmap":{"index_url":3}}"#;
        let e = serde_json::from_str::<Manifest>(bad)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`signmap`"), "{e}");
        let bad = r#"{"source":"s","diwoo":{"category":1}}"#;
        let e = serde_json::from_str::<Manifest>(bad)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`diwoo` is not a list"), "{e}");
    }

    /// The parts a render's counts make follow the registered order, whatever the indexes'
    /// order, and a profile that wrote no index has none.
    #[test]
    fn parts_are_made_in_the_registered_order() {
        let url = |name: &str| Url::parse(&format!("https://p.example/{name}")).ok();
        let mut indexes = Indexes::default();
        let lists = url("cdif-list-sitemap.xml").unwrap();
        indexes.add_counted(Profile::CdifList, lists, 2);
        indexes.add(Profile::Signmap, url("signmap.xml"));
        indexes.add(Profile::Ocx, None);
        let stats = SignStats {
            published: 5,
            ..SignStats::default()
        };
        let made = ProfileSummary::of(Some(&stats), &indexes, parts().split_off(1));
        let profiles: Vec<Profile> = made.iter().map(ProfileSummary::profile).collect();
        assert_eq!(
            profiles,
            [Profile::Signmap, Profile::Cdif, Profile::Diwoo(14)]
        );
        let lines = made[1].report().export_lines();
        assert!(
            lines[0].1.starts_with("5 documents in 2 ItemList"),
            "{lines:?}"
        );
        let announced: Vec<&str> = indexes
            .for_audience(Audience::AllCrawlers)
            .map(Url::as_str)
            .collect();
        assert_eq!(announced, ["https://p.example/signmap.xml"]);
        let jsonld: Vec<&str> = indexes
            .for_audience(Audience::Cdif)
            .map(Url::as_str)
            .collect();
        assert_eq!(jsonld, ["https://p.example/cdif-list-sitemap.xml"]);
    }

    /// A part a writer made takes its spec's place among the parts a render made, as a
    /// manifest would read them back.
    #[test]
    fn a_writers_part_takes_its_registered_place() {
        let mut indexes = Indexes::default();
        let lists = Url::parse("https://p.example/cdif-list-sitemap.xml").unwrap();
        indexes.add_counted(Profile::CdifList, lists, 1);
        let [signmap, diwoo] = <[ProfileSummary; 2]>::try_from(parts()).unwrap();
        let made = ProfileSummary::of(Some(&SignStats::default()), &indexes, [diwoo, signmap]);
        let profiles: Vec<Profile> = made.iter().map(ProfileSummary::profile).collect();
        assert_eq!(
            profiles,
            [Profile::Signmap, Profile::Cdif, Profile::Diwoo(14)]
        );
    }
}
