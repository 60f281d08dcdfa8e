//! The profiles: each kind of file set a job can publish beside the sitemap. What is pure about
//! them lives in the files crate (`oai_bridge_files::profiles`, named here at its old paths):
//! [`Profile`], which names every file a profile publishes, the settings, and the Signmap's and
//! OCX's entry writers. Here, what a harvest makes of them: the collectors, the CDIF documents
//! and lists, DiWoo's categories, the ledger of what was published and its patch.
//!
//! What the landing-page profiles (Signmap, OCX, CDIF) share per record, its landing page,
//! links and texts, is worked out once for all of them by [`signposts`].

pub(crate) mod cdif;
pub(crate) mod diwoo;
pub(crate) mod files;
pub(crate) mod ledger;
pub(crate) mod merge;
pub(crate) mod ocx;
pub(crate) mod registry;
pub(crate) mod report;
pub(crate) mod signmap;
pub(crate) mod signposts;
// The profiles' temporary files and which version of a record's entries wins: the files
// crate's, named here at their old paths.
pub(crate) use oai_bridge_files::disk::profiles as spill;
use oai_bridge_files::profiles::versions;

pub use oai_bridge_files::profiles::ProfileSettings;
pub(crate) use oai_bridge_files::profiles::{FileName, Profile};
