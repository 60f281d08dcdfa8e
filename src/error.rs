//! How an error is told to an operator: its message and each of its sources.

/// An error and its sources, one per line; a source whose text the message already holds is
/// left out.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let line = s.to_string();
        if !text.contains(&line) {
            text.push_str("\n  caused by: ");
            text.push_str(&line);
        }
        source = s.source();
    }
    text
}
