//! An OAI-PMH 2.0 harvester: talking to a repository (or reading an OAI Static Repository file)
//! and turning its responses into records.
//!
//! - [`Client`]: one request with timeouts, retries ([`RetryPolicy`]: backoff with jitter,
//!   `Retry-After`), a politeness delay per host ([`Politeness`]), a body cap, a minimum
//!   transfer rate, deflate and unannounced gzip decoded, POST after `414 URI Too Long`.
//! - [`harvest`] and [`harvest_resumable`]: the paging loop (`Identify`, then `ListRecords` per
//!   set, following resumption tokens), with loop and empty-page guards, checkpoints to resume
//!   from ([`Resume`]), and a list started again after `badResumptionToken`; Static Repository
//!   files, local or served at the baseURL, as one page.
//! - [`parse_list_records`]: one `ListRecords` body -> [`ListPage`] (a fast scanner for ordinary
//!   pages, a streaming XML reader for the rest); [`parse_identify`], [`parse_sets`],
//!   [`parse_metadata_formats`] for the other verbs. Parsing is pure, tolerant of what servers
//!   send (a BOM, characters XML forbids, `https://` namespaces, Windows-1252 bytes; counted in
//!   [`Quirks`]), and never loads DTDs or entities.
//! - [`HarvestErrorKind`]: everything that can go wrong, in one enum, as the parsers and the
//!   client return it; [`HarvestError`] is one with where a harvest stopped (the request, page
//!   and resumption token).
//! - [`Datestamp`]: OAI datestamps in both granularities, and the offsets and fractions servers
//!   write instead, read as UTC; ordering; W3C-datetime output.
//!
//! Records carry their header, their `dc:identifier`s and only the other Dublin Core elements
//! the caller asks for ([`Fields`]). What a caller does with them is its own business: this
//! crate knows nothing of what is made of the records.
//!
//! # Examples
//!
//! Reading one `ListRecords` page:
//!
//! ```
//! use oai_pmh::{DcElement, Fields, parse_list_records_with};
//!
//! let body = br#"<?xml version="1.0" encoding="UTF-8"?>
//! <OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/">
//!   <responseDate>2024-05-01T12:00:00Z</responseDate>
//!   <request verb="ListRecords" metadataPrefix="oai_dc">https://repo.example/oai</request>
//!   <ListRecords>
//!     <record>
//!       <header>
//!         <identifier>oai:repo.example:1</identifier>
//!         <datestamp>2024-04-30</datestamp>
//!         <setSpec>articles</setSpec>
//!       </header>
//!       <metadata>
//!         <oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/"
//!                    xmlns:dc="http://purl.org/dc/elements/1.1/">
//!           <dc:title>On harvesting</dc:title>
//!           <dc:identifier>https://repo.example/item/1</dc:identifier>
//!         </oai_dc:dc>
//!       </metadata>
//!     </record>
//!     <resumptionToken completeListSize="2">page-2</resumptionToken>
//!   </ListRecords>
//! </OAI-PMH>"#;
//!
//! let page = parse_list_records_with(body, Fields::of(&[DcElement::Title]))?;
//! let record = &page.records[0];
//! assert_eq!(record.identifier, "oai:repo.example:1");
//! assert_eq!(record.datestamp.unwrap().to_string(), "2024-04-30");
//! assert_eq!(record.sets, ["articles"]);
//! assert_eq!(record.dc_identifiers, ["https://repo.example/item/1"]);
//! assert_eq!(record.dc.of(DcElement::Title).collect::<Vec<_>>(), ["On harvesting"]);
//! let token = page.token.unwrap();
//! assert_eq!((token.value.as_str(), token.complete_list_size), ("page-2", Some(2)));
//! # Ok::<(), oai_pmh::HarvestErrorKind>(())
//! ```
//!
//! Building a request: the arguments are percent-encoded once, after the baseURL's own query:
//!
//! ```
//! use oai_pmh::OaiRequest;
//! use url::Url;
//!
//! let base = Url::parse("https://repo.example/oai?repository=a")?;
//! let request = OaiRequest::new(&base, &[("verb", "ListRecords"), ("resumptionToken", "a b+c")]);
//! assert_eq!(
//!     request.url(),
//!     "https://repo.example/oai?repository=a&verb=ListRecords&resumptionToken=a%20b%2Bc"
//! );
//! # Ok::<(), url::ParseError>(())
//! ```
//!
//! Harvesting a whole repository (not run here: it needs a server):
//!
//! ```no_run
//! use oai_pmh::{Client, Fields, HarvestRequest, HarvestSettings, Source, harvest};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::new(HarvestSettings {
//!     user_agent: "my-harvester/1.0 (mailto:admin@example.org)".into(),
//!     ..HarvestSettings::default()
//! })?;
//! let request = HarvestRequest {
//!     source: Source::parse("https://repo.example/oai")?,
//!     sets: Vec::new(),
//!     from: None,
//!     until: None,
//!     fields: Fields::default(),
//! };
//! let report = harvest(&client, &request, |page| {
//!     for record in &page.records {
//!         println!("{} {:?}", record.identifier, record.dc_identifiers);
//!     }
//! })
//! .await?;
//! println!("{} records in {} pages", report.records, report.pages);
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]
// Every public fallible function says when it fails, in a `# Errors` section.
#![warn(clippy::missing_errors_doc)]

/// The README's example, compiled as a doctest so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

mod client;
mod datestamp;
mod error;
#[doc(hidden)]
pub mod fuzzing;
mod harvest;
mod parse;
mod politeness;
mod read;
mod retry;
mod scan;

use std::fmt;
use std::time::Duration;

pub use client::{Client, ClientStats};
pub use datestamp::{Datestamp, Granularity, unix_secs};
pub use error::{HarvestError, HarvestErrorKind};
pub use harvest::{
    HarvestReport, HarvestRequest, MAX_RESTARTS, PageEvent, Resume, Source, harvest,
    harvest_resumable, push_query_value, push_query_value_str, read_static_file,
};
pub use parse::{
    DcElement, DcValues, Fields, Identify, IdentifyOutcome, ListPage, OaiError, Quirks, Record,
    SetsPage, SmallAnswer, Token, parse_identify, parse_metadata_formats, parse_sets,
};
pub use politeness::{HostKey, Politeness};
pub use read::{parse_list_records, parse_list_records_with};
pub use retry::{RetryPolicy, not_before, pending};
use url::Url;

/// One OAI-PMH request: a baseURL and the protocol's arguments. It goes as a GET of
/// [`url`](Self::url), or, to a server that refused a GET that long (414 URI Too Long), as a
/// POST of the same arguments to the baseURL (OAI-06); [`Client::fetch`] decides which.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OaiRequest {
    /// The baseURL, then each argument percent-encoded once, after `?`, or after `&` when the
    /// baseURL has a query of its own (OAI-04, OAI-05).
    url: String,
    /// Where the baseURL ends in `url`.
    base_end: usize,
}

impl OaiRequest {
    /// The request of `args` (name, value), in that order, to the repository at `base`.
    pub fn new(base: &Url, args: &[(&str, &str)]) -> Self {
        let mut url = base.as_str().to_owned();
        let mut sep = if base.query().is_some_and(|q| !q.is_empty()) {
            '&'
        } else {
            '?'
        };
        if base.query() == Some("") {
            url.pop();
            sep = '?';
        }
        let base_end = url.len();
        for (key, value) in args {
            url.push(sep);
            url.push_str(key);
            url.push('=');
            harvest::push_query_value_str(&mut url, value);
            sep = '&';
        }
        Self { url, base_end }
    }

    /// The GET URL; also what errors and logs name, whichever way the request went.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Where a POST goes: the baseURL, with its own query, if any.
    pub(crate) fn base(&self) -> &str {
        &self.url[..self.base_end]
    }

    /// The arguments as a POST body (`application/x-www-form-urlencoded`): as the URL has them.
    pub(crate) fn form(&self) -> &str {
        self.url.get(self.base_end + 1..).unwrap_or_default()
    }

    /// The GET URL, owned.
    pub fn into_url(self) -> String {
        self.url
    }
}

/// How the harvester treats the upstream: timeouts, retries, flow control, limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HarvestSettings {
    /// `User-Agent` sent with every request; it should name a contact (OAI-52).
    pub user_agent: String,
    /// Timeout for one request, from sending it to the end of its body.
    pub request_timeout: Duration,
    /// Timeout for establishing a connection.
    pub connect_timeout: Duration,
    /// Attempts per request (the first one included) before the harvest fails.
    pub max_attempts: u32,
    /// First backoff delay after a failed attempt; it doubles, with jitter.
    pub backoff_initial: Duration,
    /// Longest backoff delay.
    pub backoff_max: Duration,
    /// Longest wait a `Retry-After` header may impose; longer values are cut to this.
    pub retry_after_max: Duration,
    /// Pause between consecutive requests to the same upstream host (its host and port), by
    /// whichever repository: clients made with one [`Politeness`] share it
    /// ([`Client::with_politeness`]).
    pub politeness_delay: Duration,
    /// Limit for a whole harvest; `None` for no limit.
    pub deadline: Option<Duration>,
    /// Largest response body accepted, after decompression.
    pub max_body_bytes: u64,
    /// Consecutive pages without records (but with a token) tolerated before failing (OAI-29).
    pub max_empty_pages: u32,
    /// Slowest body accepted, in bytes a second on average over each
    /// [`min_transfer_window`](Self::min_transfer_window) from its first byte, as curl's
    /// `--speed-limit`; 0 for no minimum. A body slower than that fails its request, which is
    /// not retried.
    pub min_transfer_bytes_per_sec: u64,
    /// The span over which [`min_transfer_bytes_per_sec`](Self::min_transfer_bytes_per_sec) is
    /// averaged, as curl's `--speed-time`; at least a second. The wait for the first byte is no
    /// part of it: a repository may think for a long while before it answers (DSpace takes 20
    /// seconds and more before a large `ListRecords` page), which `request_timeout` bounds.
    pub min_transfer_window: Duration,
    /// Extra headers sent with every OAI-PMH request (a token an upstream requires), never
    /// logged or shown.
    pub headers: RequestHeaders,
    /// A command that shows what a repository answers, named with the baseURL in the error of
    /// an answer that is no OAI-PMH answer (an HTTP status, a page that does not parse):
    /// ``hint: run `{command} {baseURL}` to see what the repository answers``. `None`, the
    /// default, for no hint.
    pub diagnose_command: Option<String>,
}

/// Extra request headers (a token an upstream requires): sent with every OAI-PMH request to the
/// upstream ([`Client::fetch`]), and only there (not with [`Client::get_once`], whose URL may be
/// on another host; redirects are followed on the same host only). Their values are secrets: `Debug` prints
/// the names only, and each value is marked sensitive (HTTP/2 never indexes it).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct RequestHeaders(Vec<(reqwest::header::HeaderName, reqwest::header::HeaderValue)>);

impl RequestHeaders {
    /// Headers that the client sets itself or that would break the request.
    const RESERVED: [&str; 7] = [
        "host",
        "user-agent",
        "content-length",
        "transfer-encoding",
        "connection",
        "accept-encoding",
        "content-type",
    ];

    /// Checked headers from `name = value` pairs; an error names the header, never its value.
    ///
    /// # Errors
    ///
    /// A sentence naming the header (never its value) that is not a valid name or value, or
    /// that the client sets itself.
    pub fn parse<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<RequestHeaders, String> {
        use reqwest::header::{HeaderName, HeaderValue};
        let mut headers = Vec::new();
        for (name, value) in pairs {
            let header = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("{name:?} is not a header name"))?;
            if Self::RESERVED.contains(&header.as_str()) {
                return Err(format!(
                    "{name:?} is set by the client itself{}",
                    if header.as_str() == "user-agent" {
                        ": use user_agent"
                    } else {
                        ""
                    }
                ));
            }
            let mut value = HeaderValue::from_str(value)
                .map_err(|_| format!("the value of {name:?} is not a valid header value"))?;
            value.set_sensitive(true);
            headers.push((header, value));
        }
        Ok(RequestHeaders(headers))
    }

    /// These headers with `over`'s on top: a header both name is `over`'s.
    pub fn merged(&self, over: &RequestHeaders) -> RequestHeaders {
        let mut headers: Vec<_> = (self.0.iter())
            .filter(|(name, _)| !over.0.iter().any(|(n, _)| n == name))
            .cloned()
            .collect();
        headers.extend(over.0.iter().cloned());
        RequestHeaders(headers)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// As a header map, for a request.
    pub fn to_map(&self) -> reqwest::header::HeaderMap {
        self.0.iter().cloned().collect()
    }
}

impl fmt::Debug for RequestHeaders {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(name, _)| (name.as_str(), "***")))
            .finish()
    }
}

/// Default `User-Agent`: this crate and its version. A harvester should send one of its own,
/// naming a contact (OAI-52).
const DEFAULT_USER_AGENT: &str = concat!("oai-pmh/", env!("CARGO_PKG_VERSION"));

impl Default for HarvestSettings {
    fn default() -> Self {
        Self {
            user_agent: DEFAULT_USER_AGENT.to_owned(),
            request_timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(20),
            max_attempts: 5,
            backoff_initial: Duration::from_secs(2),
            backoff_max: Duration::from_secs(120),
            retry_after_max: Duration::from_secs(3600),
            politeness_delay: Duration::ZERO,
            deadline: None,
            max_body_bytes: 64 * 1024 * 1024,
            max_empty_pages: 10,
            min_transfer_bytes_per_sec: DEFAULT_MIN_TRANSFER_BYTES_PER_SEC,
            min_transfer_window: DEFAULT_MIN_TRANSFER_WINDOW,
            headers: RequestHeaders::default(),
            diagnose_command: None,
        }
    }
}

/// Default [`HarvestSettings::min_transfer_bytes_per_sec`]: 1 KiB a second. A repository that
/// answers at all sends a page at tens of KiB a second or more; under 1 KiB a second, the
/// default 64 MiB page would take 18 hours.
pub(crate) const DEFAULT_MIN_TRANSFER_BYTES_PER_SEC: u64 = 1024;

/// Default [`HarvestSettings::min_transfer_window`]: 30 seconds, long enough that a pause of a
/// server that streams a page as it reads its database passes, short enough that a drip fails
/// within a quarter of the default request timeout.
pub(crate) const DEFAULT_MIN_TRANSFER_WINDOW: Duration = Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;

    /// OAI-06: a POST goes to the baseURL, its own query kept (Q-32's `?repository=X`), with the
    /// arguments as the GET URL has them.
    #[test]
    fn a_request_splits_into_post_target_and_form() {
        let check = |base: &str, url: &str, target: &str, form: &str| {
            let request = OaiRequest::new(
                &Url::parse(base).unwrap(),
                &[("verb", "ListRecords"), ("resumptionToken", "a b+c")],
            );
            assert_eq!(
                (request.url(), request.base(), request.form()),
                (url, target, form),
                "{base}"
            );
        };
        let form = "verb=ListRecords&resumptionToken=a%20b%2Bc";
        check(
            "https://h/oai",
            &format!("https://h/oai?{form}"),
            "https://h/oai",
            form,
        );
        check(
            "https://h/oai?",
            &format!("https://h/oai?{form}"),
            "https://h/oai",
            form,
        );
        check(
            "https://h/oai?repository=X",
            &format!("https://h/oai?repository=X&{form}"),
            "https://h/oai?repository=X",
            form,
        );
        let bare = OaiRequest::new(&Url::parse("https://h/oai").unwrap(), &[]);
        assert_eq!(
            (bare.url(), bare.base(), bare.form()),
            ("https://h/oai", "https://h/oai", "")
        );
    }
}
