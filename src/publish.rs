//! Where a publish goes: a folder or a bucket ([`Output`], the CLI's `--out`; [`BucketUrl`],
//! `[server] publish_url`). Writing a folder on disk (the staging folder swapped in as a whole,
//! direct I/O for large files) is the files crate's (`oai_bridge_files::disk::write`), named
//! here at its old paths.

use std::fmt;
use std::path::PathBuf;

use object_store::ObjectStoreScheme;
use url::Url;

pub use oai_bridge_files::disk::write::MARKER;
pub(crate) use oai_bridge_files::disk::write::{Chunk, DirectWriter, Staging, beside, write_file};

/// The URL schemes of object storage, as `object_store` reads them.
const SCHEMES: &[&str] = &[
    "s3", "s3a", "gs", "az", "azure", "abfs", "abfss", "adl", "file",
];

/// Where an export writes: a folder, replaced as a whole, or a bucket URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// A local folder.
    Folder(PathBuf),
    /// A bucket (and prefix) of object storage.
    Bucket(BucketUrl),
}

impl Output {
    /// `--out`: a bucket URL (`s3://`, `gs://`, `az://`, `file://`, ...) or a folder path.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.split_once("://") {
            Some((scheme, _)) if SCHEMES.contains(&scheme.to_ascii_lowercase().as_str()) => {
                BucketUrl::parse(text).map(Output::Bucket)
            }
            Some((scheme, _))
                if !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphanumeric()) =>
            {
                Err(format!(
                    "{text:?} is neither a folder nor object storage: the schemes are s3://, gs://, \
                 az:// (or azure://, abfs://) and file://"
                ))
            }
            _ => Ok(Output::Folder(PathBuf::from(text))),
        }
    }
}

impl From<PathBuf> for Output {
    fn from(path: PathBuf) -> Self {
        Output::Folder(path)
    }
}

impl fmt::Display for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Output::Folder(path) => write!(f, "{}", path.display()),
            Output::Bucket(url) => url.fmt(f),
        }
    }
}

/// A bucket and prefix of object storage, as a URL without credentials (they come from the
/// environment): it is shown in messages and logs as it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BucketUrl(Url);

impl BucketUrl {
    /// Parses and checks a bucket URL.
    pub fn parse(text: &str) -> Result<Self, String> {
        let url = Url::parse(text).map_err(|e| format!("{text:?} is not a URL: {e}"))?;
        if !url.username().is_empty() || url.password().is_some() || url.query().is_some() {
            return Err(format!(
                "{}://...: give no credentials or options in the URL; they are read from the \
                 environment (AWS_*, GOOGLE_*, AZURE_*)",
                url.scheme()
            ));
        }
        ObjectStoreScheme::parse(&url).map_err(|e| format!("{text:?}: {e}"))?;
        Ok(BucketUrl(url))
    }

    /// The URL.
    pub fn as_url(&self) -> &Url {
        &self.0
    }

    /// The URL as a folder: ending in `/`.
    pub fn as_folder(&self) -> BucketUrl {
        let mut url = self.0.clone();
        if !url.path().ends_with('/') {
            url.set_path(&format!("{}/", url.path()));
        }
        BucketUrl(url)
    }

    /// The folder `name` in this folder.
    pub fn join(&self, name: &str) -> BucketUrl {
        let folder = self.as_folder();
        let mut url = folder.0.clone();
        url.set_path(&format!("{}{name}/", folder.0.path()));
        BucketUrl(url)
    }
}

impl fmt::Display for BucketUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_tells_buckets_from_folders() {
        assert_eq!(
            Output::parse("out/site").unwrap(),
            Output::Folder(PathBuf::from("out/site"))
        );
        assert!(matches!(
            Output::parse("s3://bucket/prefix/").unwrap(),
            Output::Bucket(_)
        ));
        assert!(matches!(
            Output::parse("GS://bucket/p").unwrap(),
            Output::Bucket(_)
        ));
        let err = Output::parse("https://example.org/site").unwrap_err();
        assert!(err.contains("s3://"), "{err}");
        let err = Output::parse("s3://key:secret@bucket/p").unwrap_err();
        assert!(
            err.contains("environment") && !err.contains("secret"),
            "{err}"
        );
    }
}
