//! The profiles' files of one render, written after the sitemap's: the landing-page profiles'
//! (Signmap, OCX, CDIF), from the records collected ([`Resolved`]) or from the published files
//! patched with the changed records ([`ProfilePatch`]), then the DiWoo categories'. The one
//! place a render names the profiles: the caller writes the sitemap, hands its DiWoo writer
//! here, and announces what comes back. A new profile's files are written here.

use std::borrow::Cow;

use oai_pmh::Datestamp;
use url::Url;

use super::cdif;
use super::diwoo::{self, DiwooStats};
use super::files::FileSink;
use super::merge::{self, Patched, ProfilePatch};
use super::registry::Indexes;
use super::signposts::Resolved;
use super::{Profile, ProfileSettings};
use crate::patch::Unpatchable;
use crate::{FilesError, Limits};

/// Where a render takes the landing-page profiles' entries from.
#[derive(Clone, Copy, Debug)]
pub enum LandingSource<'a> {
    /// The records harvested, collected and resolved; `None` when no profile collected them.
    Collected(Option<&'a Resolved>),
    /// The published files and the records changed since ([`ProfilePatch`]).
    Patched(&'a ProfilePatch),
}

/// What the profiles' files of a render are.
#[derive(Debug)]
pub struct Written {
    /// The indexes the landing-page profiles wrote.
    pub indexes: Indexes,
    /// Each DiWoo category's counts, in the categories' order.
    pub diwoo: Vec<DiwooStats>,
    /// The profiles' patch, when it made the landing-page profiles' files.
    pub patched: Option<Patched>,
}

impl Written {
    /// The indexes robots.txt announces to JSON-LD crawlers alone (`User-agent: CDIF1.0`):
    /// CDIF's sitemap and its lists' sitemap.
    pub fn jsonld_indexes(&self) -> impl Iterator<Item = &Url> {
        (self.indexes.cdif.iter()).chain(self.indexes.cdif_lists.iter().map(|(url, _)| url))
    }
}

/// Writes the profiles' files that `settings` ask for into `sink`, after the sitemap's, under
/// `public_url` and within `limits`: the landing-page profiles' from `landing`, then the DiWoo
/// categories' (`categories`, in order) through `diwoo`. `diwoo` has the entries the sitemap's
/// shards fed it while they were written; when they did not (`inventory`, the published URLs
/// in URL order with their lastmod and groups), the categories are filled from the inventory;
/// a patch merges each category's changed URLs into its published files instead. The indexes
/// every crawler is told of (the Signmap's, OCX's, then each category's) are appended to
/// `indexes`, in robots.txt's order.
///
/// # Errors
///
/// What the sink fails with; an entry `inventory` fails to read; a patch that finds the
/// published files not as the ledger recorded them ([`Unpatchable`], after which the caller
/// renders every record); a temporary file that cannot be read.
#[allow(clippy::too_many_arguments)] // One render's parts, each used once; a struct of them would be built for one call.
pub fn render<'u, S, E>(
    settings: &ProfileSettings,
    public_url: &Url,
    limits: Limits,
    landing: LandingSource<'_>,
    (mut diwoo, categories): (diwoo::Writer<'_>, &[u8]),
    inventory: Option<impl IntoIterator<Item = Result<(Cow<'u, str>, Option<Datestamp>, u32), E>>>,
    sink: &mut S,
    indexes: &mut Vec<Url>,
) -> Result<Written, E>
where
    S: FileSink,
    E: From<S::Error> + From<FilesError> + From<Unpatchable>,
{
    let (written, patched) = match landing {
        LandingSource::Patched(patch) => {
            let patched = patch.write_landing::<_, E>(public_url, limits, settings, sink)?;
            let written = Indexes {
                signmap: patched.signmap_index.clone(),
                ocx: patched.ocx_index.clone(),
                cdif: None,
                cdif_lists: patched.cdif_lists.clone(),
            };
            (written, Some(patched))
        }
        LandingSource::Collected(resolved) => (
            collected(settings, public_url, limits, resolved, sink)?,
            None,
        ),
    };
    indexes.extend(written.signmap.iter().chain(&written.ocx).cloned());
    let mut adjust = None;
    match (landing, inventory) {
        (LandingSource::Patched(patch), _) => {
            adjust = Some(patch.write_diwoo::<_, E>(categories, &mut diwoo, sink)?);
        }
        (LandingSource::Collected(_), Some(urls)) => diwoo.add_all(sink, urls)?,
        (LandingSource::Collected(_), None) => {}
    }
    let mut stats = diwoo.finish(sink, indexes)?;
    if let Some(adjust) = &adjust {
        stats = merge::diwoo_counts(stats, adjust);
    }
    Ok(Written {
        indexes: written,
        diwoo: stats,
        patched,
    })
}

/// The landing-page profiles' files from the entries collected: the Signmap's and OCX's shards
/// and indexes, CDIF's documents and lists with their sitemaps.
fn collected<S: FileSink>(
    settings: &ProfileSettings,
    public_url: &Url,
    limits: Limits,
    resolved: Option<&Resolved>,
    sink: &mut S,
) -> Result<Indexes, S::Error> {
    let Some(resolved) = resolved else {
        return Ok(Indexes::default());
    };
    let publish = |on: bool, profile, sink: &mut S| match on {
        true => resolved.publish(profile, public_url, sink),
        false => Ok(None),
    };
    let signmap = publish(
        settings.signmap && !resolved.is_empty(),
        Profile::Signmap,
        sink,
    )?;
    let ocx = publish(
        settings.ocx.is_some() && resolved.has_ocx(),
        Profile::Ocx,
        sink,
    )?;
    let mut cdif = cdif::Published::default();
    if settings.cdif || settings.cdif_list {
        // One pass over the documents for both forms: each on its own, and in lists.
        let mut writer = cdif::Writer::new(public_url, limits, settings.cdif, settings.cdif_list);
        resolved.for_each_cdif_document(|doc| writer.add(sink, doc))?;
        cdif = writer.finish(sink)?;
    }
    Ok(Indexes {
        signmap,
        ocx,
        cdif: cdif.index,
        cdif_lists: cdif.lists,
    })
}
