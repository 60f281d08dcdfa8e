//! The OCX sitemap: its configuration and entries are the files crate's (named here at this
//! path, `oai_bridge_files::profiles::ocx`); here, what a generation says of it.

pub use oai_bridge_files::profiles::ocx::*;

use serde::{Deserialize, Serialize};
use url::Url;

use super::Profile;
use super::report::{self, Piece, ProfileCounts, Report};

/// What a generation's OCX sitemap holds.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct OcxSummary {
    /// Absolute URL of the OCX index.
    pub index_url: String,
    /// Entries published.
    pub published: u64,
    /// Records with a landing page whose type maps to no OCX type.
    pub no_type: u64,
    /// Live records without a landing page inside the scope.
    pub no_landing_page: u64,
}

impl OcxSummary {
    /// What it left out, by reason.
    fn drops(&self) -> [(&'static str, u64); 2] {
        [
            ("ocx_no_type", self.no_type),
            ("no_landing_page", self.no_landing_page),
        ]
    }
}

impl Report for OcxSummary {
    fn counts(&self) -> Vec<ProfileCounts> {
        vec![ProfileCounts::new(
            Profile::Ocx,
            self.published,
            &self.drops(),
        )]
    }

    fn export_lines(&self) -> Vec<(String, String)> {
        report::one_index_lines("OCX", &self.index_url, self.published, &self.drops())
    }

    fn status_line(&self, _: &Url) -> Vec<Piece> {
        report::one_index_status("OCX", &self.index_url, self.published, &self.drops())
    }

    fn indexes(&self, _: &Url) -> Vec<String> {
        vec![self.index_url.clone()]
    }
}
