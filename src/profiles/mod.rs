//! The profiles: each kind of file set a job can publish beside the sitemap. They are the files
//! crate's (`oai_bridge_files::profiles`), named here at their old paths: [`Profile`], which
//! names every file a profile publishes, the settings, the Signmap's and OCX's entry writers,
//! the collectors, the CDIF documents and lists, DiWoo's categories, the ledger of what was
//! published and its patch.

pub(crate) use oai_bridge_files::disk::profiles as spill;
pub(crate) use oai_bridge_files::profiles::{
    FileName, cdif, diwoo, files, ledger, merge, ocx, record, registry, render, report, signmap,
    signposts,
};

pub(crate) use oai_bridge_files::profiles::COLUMNS;
pub use oai_bridge_files::profiles::{Profile, ProfileSettings};

#[cfg(test)]
mod signposts_tests;
