//! The Signmap: its entries are written by the files crate's writer (named here at this path,
//! `oai_bridge_files::profiles::signmap`); here, what a generation says of it.

pub(crate) use oai_bridge_files::profiles::signmap::*;

use serde::{Deserialize, Serialize};
use url::Url;

use super::Profile;
use super::report::{self, Piece, ProfileCounts, Report};

/// What a generation's Signmap holds.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct SignmapSummary {
    /// Absolute URL of the Signmap index.
    pub index_url: String,
    /// Entries published.
    pub published: u64,
    /// Live records without a landing page inside the scope.
    pub no_landing_page: u64,
    /// Records whose landing page a newer record has.
    pub duplicate: u64,
}

impl SignmapSummary {
    /// What it left out, by reason.
    fn drops(&self) -> [(&'static str, u64); 2] {
        [
            ("no_landing_page", self.no_landing_page),
            ("duplicate", self.duplicate),
        ]
    }
}

impl Report for SignmapSummary {
    fn counts(&self) -> Vec<ProfileCounts> {
        vec![ProfileCounts::new(
            Profile::Signmap,
            self.published,
            &self.drops(),
        )]
    }

    fn export_lines(&self) -> Vec<(String, String)> {
        report::one_index_lines("Signmap", &self.index_url, self.published, &self.drops())
    }

    fn status_line(&self, _: &Url) -> Vec<Piece> {
        report::one_index_status("Signmap", &self.index_url, self.published, &self.drops())
    }

    fn indexes(&self, _: &Url) -> Vec<String> {
        vec![self.index_url.clone()]
    }
}
