//! The crate's errors: [`HarvestErrorKind`], everything that can go wrong (a request, a body
//! that is no OAI-PMH answer, the paging loop's guards), and [`HarvestError`], one of them with
//! the request, page and resumption token it happened at.
//!
//! The parsers and [`Client::fetch`](crate::Client::fetch) know no page: they return the kind
//! alone; the harvest adds where. An OAI-PMH `<error>` that a repository answers is data, not a
//! Rust error ([`OaiError`](crate::OaiError)): the caller decides what it means
//! ([`SmallAnswer::Errors`](crate::SmallAnswer::Errors)), and the harvest turns one into
//! [`HarvestErrorKind::Oai`].

use std::fmt;
use std::time::Duration;

use crate::parse::MAX_DEPTH;

/// A harvest that did not reach the end of its list: what went wrong ([`HarvestErrorKind`]) and
/// where it stopped; when the upstream answered something that is no OAI-PMH answer (a status,
/// a page that does not parse), with a hint to ask the caller's
/// [`diagnose_command`](crate::HarvestSettings::diagnose_command) what it answers.
///
/// ```
/// use oai_pmh::{HarvestError, HarvestErrorKind};
///
/// let error = HarvestError {
///     url: "https://repo.example/oai?verb=ListRecords&resumptionToken=p2".into(),
///     page: 2,
///     token: Some("p2".into()),
///     kind: HarvestErrorKind::Status { status: 503, attempts: 5 },
///     diagnose_command: None,
/// };
/// assert_eq!(
///     error.to_string(),
///     "HTTP status 503 after 5 attempt(s)\n  while requesting \
///      https://repo.example/oai?verb=ListRecords&resumptionToken=p2 \
///      (ListRecords page 2, resumptionToken \"p2\")"
/// );
/// assert!(matches!(error.kind, HarvestErrorKind::Status { status: 503, .. }));
/// ```
#[derive(Debug)]
pub struct HarvestError {
    /// The request URL (or file path) that failed.
    pub url: String,
    /// Page number within the list, 1-based; 0 for `Identify`.
    pub page: u64,
    /// The resumption token that was sent, if any.
    pub token: Option<String>,
    /// What went wrong.
    pub kind: HarvestErrorKind,
    /// The command the hint names
    /// ([`HarvestSettings::diagnose_command`](crate::HarvestSettings::diagnose_command)); `None`
    /// for no hint.
    pub diagnose_command: Option<Box<str>>,
}

impl std::error::Error for HarvestError {}

impl fmt::Display for HarvestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.located())?;
        let no_oai_answer =
            matches!(self.kind, HarvestErrorKind::Status { .. }) || self.kind.is_parse();
        if let Some(command) = self.diagnose_command.as_deref().filter(|_| no_oai_answer) {
            write!(
                f,
                "\n  hint: run `{command} {}` to see what the repository answers",
                Shell(base_of(&self.url))
            )?;
        }
        Ok(())
    }
}

impl HarvestError {
    /// What went wrong and where, without the hint: for the diagnosis the hint suggests.
    pub fn located(&self) -> String {
        format!(
            "{}\n  while requesting {}{}",
            self.kind,
            self.url,
            Where(self.page, self.token.as_deref())
        )
    }
}

/// The baseURL of a request URL that [`OaiRequest`](crate::OaiRequest) made (its arguments start
/// with `verb`, and every `=` in their values is percent-encoded); a file path as it is.
fn base_of(url: &str) -> &str {
    ["?verb=", "&verb="]
        .iter()
        .filter_map(|args| url.rfind(args))
        .max()
        .map_or(url, |end| &url[..end])
}

/// A word for a shell command line: as it is when it has nothing a shell reads, else quoted.
struct Shell<'a>(&'a str);

impl fmt::Display for Shell<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plain = |c: char| c.is_ascii_alphanumeric() || "/:._~%+=,@-".contains(c);
        if !self.0.is_empty() && self.0.chars().all(plain) {
            f.write_str(self.0)
        } else {
            write!(f, "'{}'", self.0.replace('\'', r"'\''"))
        }
    }
}

struct Where<'a>(u64, Option<&'a str>);

impl fmt::Display for Where<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.0, self.1) {
            (0, _) => f.write_str(" (Identify)"),
            (page, Some(token)) => {
                write!(f, " (ListRecords page {page}, resumptionToken {token:?})")
            }
            (page, None) => write!(f, " (ListRecords page {page})"),
        }
    }
}

/// Everything that can go wrong in this crate, each with what an operator needs to act on it:
/// the cause of a [`HarvestError`], and what [`Client::fetch`](crate::Client::fetch),
/// [`Client::get_once`](crate::Client::get_once) and the parsers
/// ([`parse_list_records`](crate::parse_list_records), [`parse_identify`](crate::parse_identify),
/// ...) return.
///
/// A body that cannot be read as OAI-PMH is one of [`NotOai`](Self::NotOai),
/// [`Truncated`](Self::Truncated), [`Xml`](Self::Xml), [`TooDeep`](Self::TooDeep) and
/// [`Invalid`](Self::Invalid) as a parser returns it, and the same inside
/// [`Parse`](Self::Parse) once fetched, with the count of attempts
/// ([`is_parse`](Self::is_parse) tells either).
///
/// ```
/// use oai_pmh::{HarvestErrorKind, parse_list_records};
///
/// let body = b"<!DOCTYPE html><html><head><title>Login</title></head><body></body></html>";
/// let error = parse_list_records(body).unwrap_err();
/// assert_eq!(error.to_string(), "not an OAI-PMH response: an HTML page titled \"Login\"");
/// assert!(matches!(error, HarvestErrorKind::NotOai { .. }) && error.is_parse());
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HarvestErrorKind {
    /// No response: connection refused or reset, DNS, timeout, a cut body.
    #[error("request failed after {attempts} attempt(s): {message}")]
    Request {
        /// Attempts made.
        attempts: u32,
        /// The last cause.
        message: String,
    },
    /// An HTTP status that is not an OAI-PMH answer.
    #[error("HTTP status {status} after {attempts} attempt(s)")]
    Status {
        /// The last status.
        status: u16,
        /// Attempts made.
        attempts: u32,
    },
    /// The body is larger than `max_body_bytes`.
    #[error("response body exceeds the limit of {limit} bytes (harvest.max_body_bytes)")]
    TooLarge {
        /// The limit.
        limit: u64,
    },
    /// The body is not a usable OAI-PMH response.
    #[error("{source} (after {attempts} attempt(s))")]
    Parse {
        /// Attempts made.
        attempts: u32,
        /// Why it could not be read: [`NotOai`](Self::NotOai), [`Truncated`](Self::Truncated),
        /// [`Xml`](Self::Xml), [`TooDeep`](Self::TooDeep) or [`Invalid`](Self::Invalid).
        source: Box<HarvestErrorKind>,
    },
    /// Well-formed or not, the body is not an OAI-PMH document (an HTML page, JSON, ...).
    #[error("not an OAI-PMH response: {what}")]
    NotOai {
        /// What came back instead, e.g. `an HTML page titled "Login"`.
        what: String,
    },
    /// The body ends in the middle of the document (a cut connection).
    #[error("response is truncated after {len} bytes")]
    Truncated {
        /// Bytes received.
        len: usize,
    },
    /// Not well-formed XML.
    #[error("XML is not well-formed at byte {offset}: {message}")]
    Xml {
        /// Byte offset in the body.
        offset: u64,
        /// What the XML parser said.
        message: String,
    },
    /// Elements nested deeper than any OAI-PMH response needs.
    #[error("elements nested more than {MAX_DEPTH} deep at byte {offset}")]
    TooDeep {
        /// Byte offset.
        offset: u64,
    },
    /// A required part is missing or wrong (e.g. `Identify` without `granularity`).
    #[error("{0}")]
    Invalid(String),
    /// The repository answered with an OAI-PMH error.
    #[error("the repository answered OAI-PMH error {code}: {message:?}{}", oai_hint(.code))]
    Oai {
        /// The error code, e.g. `badResumptionToken`.
        code: String,
        /// The server's message.
        message: String,
    },
    /// The server sent a token it had sent before: the list would never end (OAI-28).
    #[error(
        "the repository sent resumptionToken {token:?} a second time; stopping to avoid an endless loop"
    )]
    TokenLoop {
        /// The repeated token.
        token: String,
    },
    /// Too many pages in a row held no records (OAI-29).
    #[error("{count} pages in a row held no records (harvest.max_empty_pages); stopping")]
    EmptyPages {
        /// Empty pages seen in a row.
        count: u32,
    },
    /// The body arrived slower than `harvest.min_transfer_bytes_per_sec` over a whole
    /// `harvest.min_transfer_window_secs`: a server dripping its answer. Not retried: a server
    /// that drips (overloaded, throttling, or hostile) drips again, and each attempt would hold
    /// the harvest another window; the next harvest tries again.
    #[error(
        "the body arrived at {observed} bytes/s over {} s ({received} bytes in all), slower than \
         the minimum of {min} bytes/s (harvest.min_transfer_bytes_per_sec, averaged over \
         harvest.min_transfer_window_secs); a server dripping its answer is not retried",
        window.as_secs()
    )]
    TooSlow {
        /// Bytes a second over the window that failed, rounded down.
        observed: u64,
        /// The window (`harvest.min_transfer_window_secs`).
        window: Duration,
        /// Body bytes received in all.
        received: u64,
        /// The minimum, bytes a second.
        min: u64,
    },
    /// The harvest ran past `harvest.deadline_secs`.
    #[error("the harvest deadline of {limit:?} (harvest.deadline_secs) has passed")]
    Deadline {
        /// The configured limit.
        limit: Duration,
    },
    /// `Identify` names a protocol version other than 2.0.
    #[error("the repository speaks OAI-PMH {0:?}; only 2.0 is supported")]
    UnsupportedProtocol(String),
    /// A local Static Repository file could not be read.
    #[error("cannot read the file: {0}")]
    File(#[source] std::io::Error),
}

impl HarvestErrorKind {
    /// Whether the body could not be read as OAI-PMH: [`Parse`](Self::Parse), or one of the
    /// variants it wraps as a parser returns it.
    pub fn is_parse(&self) -> bool {
        matches!(
            self,
            Self::Parse { .. }
                | Self::NotOai { .. }
                | Self::Truncated { .. }
                | Self::Xml { .. }
                | Self::TooDeep { .. }
                | Self::Invalid(_)
        )
    }

    /// Whether fetching the same URL again may help, for a body that could not be read: one
    /// cut short on the way, as opposed to a document that is wrong the same way every time. A
    /// page that is no OAI-PMH (a login page, a "site is down" page served with 200, JSON) is
    /// not: it is what the server serves at that URL until someone changes it, and retrying it
    /// only delays the error (issue 22). A proxy's passing error page comes with a 5xx status,
    /// which is retried by its status.
    pub(crate) fn is_transient(&self) -> bool {
        match self {
            Self::Truncated { .. } => true,
            Self::Parse { source, .. } => source.is_transient(),
            _ => false,
        }
    }

    /// A body that could not be read (`self`, from a parser), fetched in `attempts` attempts.
    pub(crate) fn fetched(self, attempts: u32) -> Self {
        match self {
            Self::Parse { source, .. } => Self::Parse { attempts, source },
            source => Self::Parse {
                attempts,
                source: Box::new(source),
            },
        }
    }

    /// What one attempt met, without the count of attempts the error's own text carries: the
    /// cause a retry warning names before it says which attempt that was.
    pub(crate) fn attempt_text(&self) -> String {
        match self {
            Self::Request { message, .. } => message.clone(),
            Self::Status { status, .. } => format!("HTTP status {status}"),
            Self::Parse { source, .. } => source.to_string(),
            other => other.to_string(),
        }
    }
}

/// Equal when both are the same variant with equal fields; the [`std::io::Error`] of
/// [`File`](HarvestErrorKind::File), which has no equality of its own, by its kind and text. For
/// comparing what two parsers made of a body.
impl PartialEq for HarvestErrorKind {
    fn eq(&self, other: &Self) -> bool {
        use HarvestErrorKind as K;
        // A match on `self` alone, so that a new variant cannot be forgotten here.
        match self {
            K::Request { attempts, message } => matches!(
                other,
                K::Request { attempts: a, message: m } if (a, m) == (attempts, message)
            ),
            K::Status { status, attempts } => matches!(
                other,
                K::Status { status: s, attempts: a } if (s, a) == (status, attempts)
            ),
            K::TooLarge { limit } => matches!(other, K::TooLarge { limit: l } if l == limit),
            K::Parse { attempts, source } => matches!(
                other,
                K::Parse { attempts: a, source: s } if (a, s) == (attempts, source)
            ),
            K::NotOai { what } => matches!(other, K::NotOai { what: w } if w == what),
            K::Truncated { len } => matches!(other, K::Truncated { len: l } if l == len),
            K::Xml { offset, message } => matches!(
                other,
                K::Xml { offset: o, message: m } if (o, m) == (offset, message)
            ),
            K::TooDeep { offset } => matches!(other, K::TooDeep { offset: o } if o == offset),
            K::Invalid(message) => matches!(other, K::Invalid(m) if m == message),
            K::Oai { code, message } => matches!(
                other,
                K::Oai { code: c, message: m } if (c, m) == (code, message)
            ),
            K::TokenLoop { token } => matches!(other, K::TokenLoop { token: t } if t == token),
            K::EmptyPages { count } => matches!(other, K::EmptyPages { count: c } if c == count),
            K::TooSlow {
                observed,
                window,
                received,
                min,
            } => matches!(
                other,
                K::TooSlow { observed: o, window: w, received: r, min: m }
                    if (o, w, r, m) == (observed, window, received, min)
            ),
            K::Deadline { limit } => matches!(other, K::Deadline { limit: l } if l == limit),
            K::UnsupportedProtocol(version) => {
                matches!(other, K::UnsupportedProtocol(v) if v == version)
            }
            K::File(e) => matches!(
                other,
                K::File(o) if o.kind() == e.kind() && o.to_string() == e.to_string()
            ),
        }
    }
}

fn oai_hint(code: &str) -> &'static str {
    match code {
        "cannotDisseminateFormat" => {
            " (every OAI-PMH repository must offer oai_dc; check the baseURL)"
        }
        "noSetHierarchy" => " (the repository has no sets; remove --set)",
        "badResumptionToken" => " (the token expired or is invalid; the list was not finished)",
        "badArgument" => {
            " (check --from/--until/--set against the repository's granularity and sets)"
        }
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 22: an answer that is no OAI-PMH names the request and hints at `check` on the
    /// baseURL (its own query kept, quoted for a shell); other errors give no such hint.
    #[test]
    fn an_answer_that_is_no_oai_pmh_hints_at_check() {
        let error = |url: &str, kind| HarvestError {
            url: url.to_owned(),
            page: 2,
            token: Some("t=1".to_owned()),
            kind,
            diagnose_command: Some("oai-bridge check".into()),
        };
        let status = || HarvestErrorKind::Status {
            status: 403,
            attempts: 1,
        };
        let text = error(
            "https://h/oai?verb=ListRecords&resumptionToken=t%3D1",
            status(),
        )
        .to_string();
        assert_eq!(
            text,
            "HTTP status 403 after 1 attempt(s)\n  while requesting \
             https://h/oai?verb=ListRecords&resumptionToken=t%3D1 \
             (ListRecords page 2, resumptionToken \"t=1\")\n  hint: run \
             `oai-bridge check https://h/oai` to see what the repository answers"
        );
        let page = HarvestErrorKind::Parse {
            attempts: 1,
            source: Box::new(HarvestErrorKind::NotOai {
                what: "an HTML page titled \"Login\"".into(),
            }),
        };
        let text = error("https://h/oai?repository=X&verb=Identify", page).to_string();
        assert!(
            text.ends_with(
                "`oai-bridge check 'https://h/oai?repository=X'` to see what the repository answers"
            ),
            "{text}"
        );
        let file = error("/srv/static.xml", status()).to_string();
        assert!(
            file.contains("`oai-bridge check /srv/static.xml`"),
            "{file}"
        );
        let deadline = error(
            "https://h/oai?verb=Identify",
            HarvestErrorKind::Deadline {
                limit: Duration::from_secs(1),
            },
        );
        assert!(!deadline.to_string().contains("hint"), "{deadline}");
        // A caller that names no command gets no hint.
        let quiet = HarvestError {
            diagnose_command: None,
            ..error("https://h/oai?verb=Identify", status())
        };
        assert!(!quiet.to_string().contains("hint"), "{quiet}");
        assert_eq!(
            error("https://h/oai?verb=Identify", status()).located(),
            "HTTP status 403 after 1 attempt(s)\n  while requesting https://h/oai?verb=Identify \
             (ListRecords page 2, resumptionToken \"t=1\")"
        );
    }
}
