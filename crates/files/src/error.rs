//! [`FilesError`], the files crate's one error type: what rendering refuses (nothing to
//! publish, more than one index can list) and what the file system refused the writers in
//! [`disk`](crate::disk) (a spill file, a staged file, the swap of a folder). It was
//! `RenderError` while the crate only rendered; that name stays, an alias.

use std::path::PathBuf;

use crate::sitemap::MAX_URLS;

/// Nothing to publish, more than one index can list, or a file on disk that could not be used:
/// the files crate's one error type.
///
/// ```
/// use oai_bridge_files::RenderError;
/// use oai_bridge_files::sitemap::render_index;
///
/// let error = render_index(std::iter::empty()).unwrap_err();
/// assert_eq!(error, RenderError::Empty);
/// assert_eq!(error.to_string(), "no URLs to publish");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FilesError {
    /// The schemas forbid an empty `urlset` or index (SM-15).
    #[error("no URLs to publish")]
    Empty,
    /// A single index would need more than 50,000 entries; nested indexes are not used (SM-11).
    #[error("{shards} sitemaps would be needed; one index lists at most {MAX_URLS}")]
    TooManyShards {
        /// Shards needed.
        shards: usize,
    },
    /// A temporary file of the harvest (the inventory's sorted runs, the profiles' versions,
    /// the refresh's changes) failed ([`disk::spill`](crate::disk::spill)).
    #[error("cannot {action} the harvest's temporary file(s) in {}: {source}", path.display())]
    Spill {
        /// What was being done: create, write or read.
        action: &'static str,
        /// The folder or file.
        path: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
    /// A file or folder of a publish could not be used (written, read, created, renamed,
    /// replaced; [`disk::write`](crate::disk::write)): `action` says what was being done and
    /// `path` where; `source` is the OS's error, or what made the folder unusable.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What was being done ("cannot write", "refusing to replace").
        action: &'static str,
        /// Where.
        path: PathBuf,
        /// Why.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The inventory numbers its record occurrences with 32 bits and holds text in memory with
    /// 32-bit offsets (as do the profiles' temporary files): past this it refuses more rather
    /// than wrap around.
    #[error(
        "the harvested URLs exceed {} bytes of text, more than one in-memory inventory holds",
        u32::MAX
    )]
    InventoryFull,
    /// A shard file of a profile failed ([`disk::profiles`](crate::disk::profiles)).
    #[error("cannot {action} the {profile} shard file {}: {source}", path.display())]
    ShardFile {
        /// The profile: Signmap or OCX.
        profile: &'static str,
        /// What was being done: create, write, open or read.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The temporary file of the CDIF documents failed
    /// ([`disk::profiles`](crate::disk::profiles)).
    #[error(
        "cannot {action} the temporary file of the CDIF documents (in {}): {source}",
        crate::disk::profiles::temp_dir().display()
    )]
    CdifSpill {
        /// What was being done: create, write or read.
        action: &'static str,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The published sitemap turned out not to be patchable while its shards were written (the
    /// caller renders every record instead); why ([`crate::patch::Unpatchable`]).
    #[error("the published sitemap cannot be patched: {0}")]
    Patch(String),
    /// The profiles' ledger being made is not as written; why.
    #[error("{0}")]
    Ledger(String),
    /// The URL the CDIF documents are published under cannot have file names joined onto it.
    #[error("the CDIF documents cannot be published under {0}: not a URL file names join onto")]
    Documents(url::Url),
    /// Appending to a file written as a stream ([`disk::write::FileStream`](crate::disk::write::FileStream))
    /// failed: the OS's error, as the stream, which knows no path, gives it.
    #[error("{0}")]
    Stream(std::io::Error),
}

impl FilesError {
    /// `action` on `path` failed with `source`: [`FilesError::Io`].
    pub(crate) fn io<'a, E>(
        action: &'static str,
        path: impl Into<PathBuf> + 'a,
    ) -> impl FnOnce(E) -> FilesError + 'a
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        move |source| FilesError::Io {
            action,
            path: path.into(),
            source: source.into(),
        }
    }
}

/// Equal when both are the same variant with equal fields; an OS error, which has no equality
/// of its own, by its kind and text (as `oai_pmh::HarvestErrorKind` compares its own), a
/// boxed cause by its text. For the tests, which compare what a render refused.
impl PartialEq for FilesError {
    fn eq(&self, other: &Self) -> bool {
        use FilesError as E;
        // A match on `self` alone, so that a new variant cannot be forgotten here.
        match self {
            E::Empty => matches!(other, E::Empty),
            E::TooManyShards { shards } => {
                matches!(other, E::TooManyShards { shards: s } if s == shards)
            }
            E::Spill {
                action,
                path,
                source,
            } => matches!(
                other,
                E::Spill { action: a, path: p, source: s }
                    if (a, p) == (action, path)
                        && s.kind() == source.kind()
                        && s.to_string() == source.to_string()
            ),
            E::Io {
                action,
                path,
                source,
            } => matches!(
                other,
                E::Io { action: a, path: p, source: s }
                    if (a, p) == (action, path) && s.to_string() == source.to_string()
            ),
            E::InventoryFull => matches!(other, E::InventoryFull),
            E::ShardFile {
                profile,
                action,
                path,
                source,
            } => matches!(
                other,
                E::ShardFile { profile: f, action: a, path: p, source: s }
                    if (f, a, p) == (profile, action, path)
                        && s.kind() == source.kind()
                        && s.to_string() == source.to_string()
            ),
            E::CdifSpill { action, source } => matches!(
                other,
                E::CdifSpill { action: a, source: s }
                    if a == action
                        && s.kind() == source.kind()
                        && s.to_string() == source.to_string()
            ),
            E::Patch(why) => matches!(other, E::Patch(w) if w == why),
            E::Ledger(why) => matches!(other, E::Ledger(w) if w == why),
            E::Documents(url) => matches!(other, E::Documents(u) if u == url),
            E::Stream(source) => matches!(
                other,
                E::Stream(s) if s.kind() == source.kind() && s.to_string() == source.to_string()
            ),
        }
    }
}

impl Eq for FilesError {}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts and causes the root's errors had before these moved here.
    #[test]
    fn disk_errors_keep_their_texts_and_causes() {
        let spill = FilesError::Spill {
            action: "write",
            path: PathBuf::from("/tmp/s/urls-1"),
            source: std::io::Error::other("no room"),
        };
        assert_eq!(
            spill.to_string(),
            "cannot write the harvest's temporary file(s) in /tmp/s/urls-1: no room"
        );
        let cause = std::error::Error::source(&spill).map(ToString::to_string);
        assert_eq!(cause.as_deref(), Some("no room"));
        let io = FilesError::io("cannot write", "/out/a.xml")(std::io::Error::other("denied"));
        assert_eq!(io.to_string(), "cannot write /out/a.xml: denied");
        let cause = std::error::Error::source(&io).map(ToString::to_string);
        assert_eq!(cause.as_deref(), Some("denied"));
        assert_eq!(io, FilesError::io("cannot write", "/out/a.xml")("denied"));
        assert_ne!(io, spill);
    }

    /// The profiles' errors keep the texts and causes they had in the root.
    #[test]
    fn profile_errors_keep_their_texts_and_causes() {
        let shard = FilesError::ShardFile {
            profile: "OCX",
            action: "write",
            path: PathBuf::from("/tmp/d/ocx-1.xml"),
            source: std::io::Error::other("no room"),
        };
        assert_eq!(
            shard.to_string(),
            "cannot write the OCX shard file /tmp/d/ocx-1.xml: no room"
        );
        let cause = std::error::Error::source(&shard).map(ToString::to_string);
        assert_eq!(cause.as_deref(), Some("no room"));
        let cdif = FilesError::CdifSpill {
            action: "read",
            source: std::io::Error::other("gone"),
        };
        assert_eq!(
            cdif.to_string(),
            format!(
                "cannot read the temporary file of the CDIF documents (in {}): gone",
                std::env::temp_dir().display()
            )
        );
        let cause = std::error::Error::source(&cdif).map(ToString::to_string);
        assert_eq!(cause.as_deref(), Some("gone"));
        assert_eq!(
            FilesError::InventoryFull.to_string(),
            "the harvested URLs exceed 4294967295 bytes of text, more than one in-memory \
             inventory holds"
        );
        assert_ne!(shard, cdif);
    }
}
