//! The property the page readers' fuzz target checks, here because it compares two readers that
//! are private to this crate. It panics when the property fails, which is what a fuzzer looks for.

use crate::parse::{self, Fields};
use crate::read::parse_list_records_fast;

/// The page readers: never panic; when the fast path accepts a body, the reference reader reads
/// the same page from it. Identify and the small answers never panic either.
pub fn check_list_records(data: &[u8]) {
    let fast = parse_list_records_fast(data, Fields::ALL);
    let reference = parse::parse_list_records_reference(data, Fields::ALL);
    if let Some(page) = fast {
        assert_eq!(
            reference.as_ref(),
            Ok(&page),
            "the fast path read a page the reference reads otherwise"
        );
    }
    // `parse_list_records` is the fast path, else the reference: both ran above.
    let _ = parse::parse_identify(data);
    let _ = parse::parse_sets(data);
    let _ = parse::parse_metadata_formats(data);
}
