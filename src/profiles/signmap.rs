//! The Signmap: its entries are written by the files crate's writer (named here at this path,
//! `oai_bridge_files::profiles::signmap`); here, what a generation says of it.

pub(crate) use oai_bridge_files::profiles::signmap::*;

use serde::{Deserialize, Serialize};
use url::Url;

use super::Profile;
use super::report::{Piece, ProfileCounts, Report};

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
    fn not_published(&self) -> String {
        format!(
            "not published: no_landing_page {}, duplicate {}",
            self.no_landing_page, self.duplicate
        )
    }
}

impl Report for SignmapSummary {
    fn counts(&self) -> Vec<ProfileCounts> {
        let drops = [
            ("no_landing_page", self.no_landing_page),
            ("duplicate", self.duplicate),
        ];
        vec![ProfileCounts::new(Profile::Signmap, self.published, &drops)]
    }

    fn export_lines(&self) -> Vec<(String, String)> {
        let what = format!("{} records; {}", self.published, self.not_published());
        vec![
            ("Signmap".into(), what),
            ("Signmap index".into(), self.index_url.clone()),
        ]
    }

    fn status_line(&self, _: &Url) -> Vec<Piece> {
        vec![
            Piece::Link("Signmap", self.index_url.clone()),
            Piece::Text(format!(
                ": {} entries; {}",
                self.published,
                self.not_published()
            )),
        ]
    }

    fn indexes(&self, _: &Url) -> Vec<String> {
        vec![self.index_url.clone()]
    }
}
