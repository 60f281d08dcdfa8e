//! One `ListRecords` body -> a page: the hand-written scanner ([`super::scan`]) takes the
//! common pages, the quick-xml reader ([`super::parse`]) whatever it declines, and stays the
//! reference. Apart from both, so that the scanner builds on the reader's model and the reader
//! knows nothing of the scanner.

use super::HarvestErrorKind;
use super::parse::{Fields, ListPage, answered, parse_with_quick_xml, prepared};
use super::scan;

/// Parses a `ListRecords` response, or an OAI Static Repository file (whose records are read the
/// same way), or an error response of any verb.
///
/// # Errors
///
/// The [`HarvestErrorKind`] of a body that cannot be read: not OAI-PMH
/// ([`HarvestErrorKind::NotOai`]), cut short ([`HarvestErrorKind::Truncated`]), not
/// well-formed ([`HarvestErrorKind::Xml`]), nested too deep ([`HarvestErrorKind::TooDeep`]), or
/// holding neither a `ListRecords` element nor an OAI-PMH error ([`HarvestErrorKind::Invalid`]).
/// An OAI-PMH error response is an answer: its errors are in [`ListPage::errors`].
pub fn parse_list_records(body: &[u8]) -> Result<ListPage, HarvestErrorKind> {
    parse_list_records_with(body, Fields::default())
}

/// [`parse_list_records`], reading `fields` of each record.
///
/// # Errors
///
/// As [`parse_list_records`].
pub fn parse_list_records_with(body: &[u8], fields: Fields) -> Result<ListPage, HarvestErrorKind> {
    // The hand-written scanner takes the common pages; whatever it declines, the quick-xml reader
    // reads (or rejects) as the reference.
    prepared(body, |text, quirks| {
        match scan::scan_list_records(text, quirks, fields) {
            Some(page) => Ok(page),
            None => parse_with_quick_xml(text, quirks, body.len(), fields),
        }
    })?
    .and_then(answered)
}

/// The fast path alone: `None` when it declines the body (or [`super::parse::prepare`] refuses
/// it).
#[doc(hidden)]
pub(crate) fn parse_list_records_fast(body: &[u8], fields: Fields) -> Option<ListPage> {
    prepared(body, |text, quirks| {
        scan::scan_list_records(text, quirks, fields)
    })
    .ok()
    .flatten()
    .and_then(|page| answered(page).ok())
}
