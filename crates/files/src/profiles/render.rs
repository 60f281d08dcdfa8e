//! The profiles' files of one render, written after the sitemap's: the landing-page profiles'
//! (Signmap, OCX, CDIF), from the records collected ([`Resolved`]) or from the published files
//! patched with the changed records ([`ProfilePatch`]), then the DiWoo categories'. The caller
//! writes the sitemap (feeding the DiWoo writer as its shards are written), hands its DiWoo
//! writer here, and announces what comes back; a new profile's files are written here.

use std::borrow::Cow;

use oai_pmh::Datestamp;
use url::Url;

use super::cdif;
use super::diwoo::{self, DiwooStats};
use super::files::FileSink;
use super::merge::{self, Patched, ProfilePatch};
use super::registry::Indexes;
use super::signposts::Resolved;
use super::{Audience, ColumnKind, ProfileSettings};
use crate::patch::Unpatchable;
use crate::{FilesError, Limits};

/// Where a render takes the profiles' entries from.
#[derive(Debug)]
pub enum Source<'a, I> {
    /// The records harvested: the landing-page profiles' entries collected and resolved
    /// (`None` when no profile collected them), and, when the sitemap's shards did not feed the
    /// DiWoo categories as they were written, the published URLs to fill them from (in URL
    /// order, with their lastmod and groups).
    Collected {
        /// The landing-page profiles' entries.
        resolved: Option<&'a Resolved>,
        /// The inventory's URLs, for the DiWoo categories.
        inventory: Option<I>,
    },
    /// The published files and the records changed since ([`ProfilePatch`]): each file merged
    /// with the changes, the DiWoo categories' too.
    Patched(&'a ProfilePatch),
}

/// What the profiles' files of a render are.
#[derive(Debug)]
pub struct ProfileFiles {
    /// The indexes every crawler is told of, in robots.txt's order after the sitemap's: the
    /// Signmap's, OCX's, then each DiWoo category's.
    pub announced: Vec<Url>,
    /// The indexes the landing-page profiles wrote.
    pub indexes: Indexes,
    /// Each DiWoo category's counts, in the categories' order.
    pub diwoo: Vec<DiwooStats>,
    /// The profiles' patch, when it made the landing-page profiles' files.
    pub patched: Option<Patched>,
}

impl ProfileFiles {
    /// The indexes robots.txt announces to JSON-LD crawlers alone (`User-agent: CDIF1.0`):
    /// CDIF's sitemap and its lists' sitemap.
    pub fn jsonld_indexes(&self) -> impl Iterator<Item = &Url> {
        self.indexes.for_audience(Audience::Cdif)
    }
}

/// Writes the profiles' files that `settings` ask for into `sink`, after the sitemap's, under
/// `public_url` and within `limits`, from `source`: the landing-page profiles', then the DiWoo
/// categories' through `diwoo`, which holds the entries the sitemap's shards fed it while they
/// were written.
///
/// # Errors
///
/// What the sink fails with; an entry the inventory fails to read; a patch that finds the
/// published files not as the ledger recorded them ([`Unpatchable`], after which the caller
/// renders every record); a temporary file that cannot be read.
pub fn render<'u, S, E, I>(
    settings: &ProfileSettings,
    (public_url, limits): (&Url, Limits),
    source: Source<'_, I>,
    mut diwoo: diwoo::Writer<'_>,
    sink: &mut S,
) -> Result<ProfileFiles, E>
where
    S: FileSink,
    E: From<S::Error> + From<FilesError> + From<Unpatchable>,
    I: IntoIterator<Item = Result<(Cow<'u, str>, Option<Datestamp>, u32), E>>,
{
    let (indexes, patched, adjust) = match source {
        Source::Patched(patch) => {
            let patched = patch.write_landing::<_, E>(public_url, limits, settings, sink)?;
            let indexes = patched.indexes.clone();
            let adjust = patch.write_diwoo::<_, E>(&diwoo.categories(), &mut diwoo, sink)?;
            (indexes, Some(patched), Some(adjust))
        }
        Source::Collected {
            resolved,
            inventory,
        } => {
            let indexes = collected(settings, (public_url, limits), resolved, sink)?;
            if let Some(urls) = inventory {
                diwoo.add_all(sink, urls)?;
            }
            (indexes, None, None)
        }
    };
    let mut announced: Vec<Url> = indexes
        .for_audience(Audience::AllCrawlers)
        .cloned()
        .collect();
    let mut stats = diwoo.finish(sink, &mut announced)?;
    if let Some(adjust) = &adjust {
        stats = merge::diwoo_counts(stats, adjust);
    }
    Ok(ProfileFiles {
        announced,
        indexes,
        diwoo: stats,
        patched,
    })
}

/// The landing-page profiles' files from the entries collected: the Signmap's and OCX's shards
/// and indexes, CDIF's documents and lists with their sitemaps.
fn collected<S: FileSink>(
    settings: &ProfileSettings,
    (public_url, limits): (&Url, Limits),
    resolved: Option<&Resolved>,
    sink: &mut S,
) -> Result<Indexes, S::Error> {
    let Some(resolved) = resolved else {
        return Ok(Indexes::default());
    };
    let mut indexes = Indexes::default();
    // Each column of shards whose profile is on (an index only when it has an entry).
    for profile in settings.profiles() {
        if let Some(ColumnKind::Urlset { .. }) = profile.column_kind() {
            indexes.add(profile, resolved.publish(profile, public_url, sink)?);
        }
    }
    if settings.cdif || settings.cdif_list {
        // One pass over the documents for both forms: each on its own, and in lists.
        let mut writer = cdif::Writer::new(public_url, limits, settings.cdif, settings.cdif_list);
        resolved.for_each_cdif_document(|doc| writer.add(sink, doc))?;
        writer.finish(sink, &mut indexes)?;
    }
    Ok(indexes)
}
