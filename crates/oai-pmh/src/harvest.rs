//! The paging loop: `Identify`, then `ListRecords` (oai_dc) per set, following resumption tokens
//! until the list ends, with loop and empty-page guards. Hands records to the caller one page at
//! a time, so memory is bounded by the page, not the repository.

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Instant;

use url::Url;

use super::parse::{self, Identify, IdentifyOutcome, ListPage, Quirks, Record};
use super::{Client, HarvestError, HarvestErrorKind, OaiRequest};
use crate::datestamp::Datestamp;

/// Where the records come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// An OAI-PMH baseURL (which may also turn out to serve a Static Repository file).
    Oai(Url),
    /// A local OAI Static Repository file.
    File(PathBuf),
}

impl Source {
    /// Reads a baseURL as a user gives it: an http(s) URL, or else a local path (`file://` allowed).
    ///
    /// # Errors
    ///
    /// A sentence naming `value` when it is an http(s) URL that does not parse, has a fragment,
    /// or carries `verb=` (the harvester adds the OAI-PMH arguments itself), or a URL of
    /// another scheme.
    pub fn parse(value: &str) -> Result<Self, String> {
        let lower = value.to_ascii_lowercase();
        if lower.starts_with("http://") || lower.starts_with("https://") {
            let url =
                Url::parse(value).map_err(|e| format!("{value:?} is not a valid URL: {e}"))?;
            if url.fragment().is_some() {
                return Err(format!(
                    "{value:?}: a baseURL cannot have a fragment (#...)"
                ));
            }
            if url.query_pairs().any(|(k, _)| k == "verb") {
                return Err(format!(
                    "{value:?}: give the baseURL without verb=...; the harvester adds the OAI-PMH arguments itself"
                ));
            }
            return Ok(Source::Oai(url));
        }
        if let Some(path) = value.strip_prefix("file://") {
            return Ok(Source::File(PathBuf::from(path)));
        }
        if lower.contains("://") {
            return Err(format!(
                "{value:?}: only http(s) baseURLs and local Static Repository files are supported"
            ));
        }
        Ok(Source::File(PathBuf::from(value)))
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Oai(url) => f.write_str(url.as_str()),
            Source::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// What to harvest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HarvestRequest {
    /// The upstream.
    pub source: Source,
    /// Sets to harvest, each as its own list; empty for the whole repository.
    pub sets: Vec<String>,
    /// Lower datestamp bound, inclusive.
    pub from: Option<Datestamp>,
    /// Upper datestamp bound, inclusive.
    pub until: Option<Datestamp>,
    /// What to read of each record.
    pub fields: parse::Fields,
}

/// Where a harvest starts: at a checkpoint of an earlier, interrupted one. Lists of sets before
/// `set` in [`HarvestRequest::sets`] are taken as done; the list of `set` continues at `token`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resume {
    /// The set whose list was interrupted (`None`: the whole repository).
    pub set: Option<String>,
    /// The last resumption token received and not yet followed.
    pub token: String,
    /// The page number it leads to.
    pub page: u64,
    /// The newest datestamp delivered by the list so far.
    pub newest: Option<Datestamp>,
    /// Whether the list delivered its records in datestamp order so far.
    pub ordered: bool,
}

/// Restarts of a list after `badResumptionToken` (an expired or unknown token, OAI-27) before
/// the harvest fails: the [`crate::RetryPolicy`]'s.
pub use super::retry::MAX_RESTARTS;

/// One page of records, handed to the caller as soon as it is parsed.
#[derive(Debug)]
pub struct PageEvent<'a> {
    /// The repository's `Identify` (for a Static Repository, the file's).
    pub identify: &'a Identify,
    /// Page number within the current list, 1-based.
    pub page: u64,
    /// The set being harvested, if any.
    pub set: Option<&'a str>,
    /// The page's records.
    pub records: Vec<Record>,
    /// The server's `completeListSize` hint, if any.
    pub complete_list_size: Option<u64>,
    /// Where the list continues: the checkpoint to save once the page is applied; `None` when
    /// the page ended its list.
    pub next: Option<Resume>,
    /// The page's `responseDate` (the server's clock).
    pub response_date: Option<&'a str>,
}

/// What a complete harvest saw.
#[derive(Clone, Debug, Default)]
pub struct HarvestReport {
    /// The repository's `Identify`.
    pub identify: Identify,
    /// The upstream was an OAI Static Repository.
    pub is_static: bool,
    /// Pages read (a Static Repository counts as one).
    pub pages: u64,
    /// Records read, deleted ones and repeats included.
    pub records: u64,
    /// `responseDate` of the first `ListRecords` response (the server's clock; OAI-10).
    pub first_response_date: Option<String>,
    /// Lists restarted after `badResumptionToken` (OAI-27).
    pub restarts: u32,
    /// Tolerated deviations, summed over all bodies.
    pub quirks: Quirks,
}

/// Appends `value` percent-encoded as an OAI-PMH argument value to `out`: only RFC 3986
/// unreserved characters are left, so tokens with `+ / = | &` or spaces arrive intact (OAI-05)
/// and the result needs no escaping in XML. Written by hand, a run of unreserved bytes at a
/// time: the percent-encoding crate's encoder hands out a piece per escaped byte, and a caller
/// may write an identifier this way for every record (`oai:repo:123` is five pieces).
pub fn push_query_value(out: &mut Vec<u8>, value: &str) {
    let unreserved = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~');
    let mut rest = value.as_bytes();
    while let Some(at) = rest.iter().position(|&b| !unreserved(b)) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(percent_encoding::percent_encode_byte(rest[at]).as_bytes());
        rest = &rest[at + 1..];
    }
    out.extend_from_slice(rest);
}

/// [`push_query_value`] onto a `String`.
pub fn push_query_value_str(out: &mut String, value: &str) {
    let mut bytes = std::mem::take(out).into_bytes();
    push_query_value(&mut bytes, value);
    *out = String::from_utf8(bytes).expect("percent-encoding writes ASCII");
}

/// Harvests every record of `request` and hands them to `on_page` a page at a time. Returns only
/// when every list reached its end; anything else is an error naming the URL, page and token.
///
/// # Errors
///
/// A [`HarvestError`] naming the request, page and resumption token where the harvest
/// stopped: the client's errors after its retries, an OAI-PMH error response other than
/// `noRecordsMatch`, a page that cannot be read, a resumption-token loop or too many empty
/// pages.
pub async fn harvest(
    client: &Client,
    request: &HarvestRequest,
    mut on_page: impl FnMut(PageEvent<'_>),
) -> Result<HarvestReport, HarvestError> {
    harvest_resumable(client, request, None, |event| {
        on_page(event);
        ControlFlow::Continue(())
    })
    .await
}

/// [`harvest`], starting at `resume` when given, and stopping early (with `Ok`) when `on_page`
/// breaks; the caller then knows why.
///
/// A list answered with `badResumptionToken` (the token expired, or a resumed token is no longer
/// known) is started again, as often as the client's [`crate::RetryPolicy`] says
/// ([`MAX_RESTARTS`] times), with nothing lost: from the newest
/// datestamp it delivered minus one granularity unit when it delivered in datestamp order so far,
/// else from the request's own `from` (records are not ordered by datestamp in general, OAI-24).
///
/// # Errors
///
/// As [`harvest`]; a `badResumptionToken` is an error only after [`MAX_RESTARTS`] restarts.
pub async fn harvest_resumable(
    client: &Client,
    request: &HarvestRequest,
    resume: Option<&Resume>,
    on_page: impl FnMut(PageEvent<'_>) -> ControlFlow<()>,
) -> Result<HarvestReport, HarvestError> {
    let result = resumable(client, request, resume, on_page).await;
    result.map_err(|e| HarvestError {
        diagnose_command: client.settings().diagnose_command.as_deref().map(Box::from),
        ..e
    })
}

/// [`harvest_resumable`], its errors without the hint.
async fn resumable(
    client: &Client,
    request: &HarvestRequest,
    resume: Option<&Resume>,
    mut on_page: impl FnMut(PageEvent<'_>) -> ControlFlow<()>,
) -> Result<HarvestReport, HarvestError> {
    let settings = client.settings();
    let deadline = settings.deadline.map(|d| Instant::now() + d);
    let mut report = HarvestReport::default();
    let base = match &request.source {
        Source::File(path) => {
            let (identify, page) =
                read_static_file(path, settings.max_body_bytes, request.fields).await?;
            let _ = emit_static(request, &mut report, identify, page, &mut on_page);
            return Ok(report);
        }
        Source::Oai(base) => base,
    };

    let mut gzip_warning = UnlabelledGzipWarning::new(client);
    let identify = match identify(client, request, base, deadline, &mut gzip_warning).await? {
        Identified::Oai(identify) => identify,
        Identified::Static(identify, page) => {
            let _ = emit_static(request, &mut report, identify, page, &mut on_page);
            return Ok(report);
        }
    };
    let granularity = identify.granularity;
    report.identify = identify;

    let mut sets: Vec<Option<&str>> = if request.sets.is_empty() {
        vec![None]
    } else {
        request.sets.iter().map(|s| Some(s.as_str())).collect()
    };
    if let Some(r) = resume {
        // The lists before the interrupted one are done; an unknown set restarts them all.
        if let Some(i) = sets.iter().position(|s| *s == r.set.as_deref()) {
            sets.drain(..i);
        }
    }
    let lists = Lists {
        client,
        request,
        base,
        deadline,
        granularity,
        until: request.until.map(|d| d.in_granularity(granularity, true)),
    };
    for set in sets {
        let resumed = resume.filter(|r| r.set.as_deref() == set);
        let flow = harvest_list(
            &lists,
            set,
            resumed,
            &mut report,
            &mut gzip_warning,
            &mut on_page,
        )
        .await?;
        if flow.is_break() {
            return Ok(report);
        }
    }
    log_quirks(&report.quirks, base.as_str());
    Ok(report)
}

/// What `Identify` at a baseURL answered: a repository, or a Static Repository with its records.
enum Identified {
    Oai(Identify),
    Static(Identify, ListPage),
}

/// Asks `base` for `Identify` and checks the answer ([`check_identify`]).
async fn identify(
    client: &Client,
    request: &HarvestRequest,
    base: &Url,
    deadline: Option<Instant>,
    gzip_warning: &mut UnlabelledGzipWarning,
) -> Result<Identified, HarvestError> {
    let call = OaiRequest::new(base, &[("verb", "Identify")]);
    let url = call.url();
    let outcome = client
        .fetch(&call, deadline, |body| {
            Ok(match parse::parse_identify(body)? {
                IdentifyOutcome::Static(identify) => (
                    IdentifyOutcome::Static(identify),
                    Some(super::read::parse_list_records_with(body, request.fields)?),
                ),
                other => (other, None),
            })
        })
        .await;
    gzip_warning.check(client, url);
    let outcome = outcome.map_err(|kind| HarvestError {
        url: url.to_owned(),
        page: 0,
        token: None,
        kind,
        diagnose_command: None,
    })?;
    let identify = match outcome {
        (IdentifyOutcome::Identify(identify), _) => identify,
        (IdentifyOutcome::Static(identify), Some(page)) => {
            return Ok(Identified::Static(identify, page));
        }
        (IdentifyOutcome::Errors(errors), _) => {
            let first = errors.into_iter().next().unwrap_or(parse::OaiError {
                code: String::new(),
                message: String::new(),
            });
            let kind = HarvestErrorKind::Oai {
                code: first.code,
                message: first.message,
            };
            return Err(HarvestError {
                url: url.to_owned(),
                page: 0,
                token: None,
                kind,
                diagnose_command: None,
            });
        }
        (IdentifyOutcome::Static(_), None) => {
            unreachable!("a static repository is parsed with its records")
        }
    };
    check_identify(&identify, base, url)?;
    Ok(Identified::Oai(identify))
}

/// What every list of one harvest of a baseURL shares.
struct Lists<'a> {
    client: &'a Client,
    request: &'a HarvestRequest,
    base: &'a Url,
    deadline: Option<Instant>,
    granularity: crate::datestamp::Granularity,
    /// The request's `until`, in the repository's granularity.
    until: Option<String>,
}

/// Harvests the list of `set`, from where `resumed` left it; `Break` when `on_page` broke.
async fn harvest_list(
    lists: &Lists<'_>,
    set: Option<&str>,
    resumed: Option<&Resume>,
    report: &mut HarvestReport,
    gzip_warning: &mut UnlabelledGzipWarning,
    on_page: &mut impl FnMut(PageEvent<'_>) -> ControlFlow<()>,
) -> Result<ControlFlow<()>, HarvestError> {
    let (client, settings) = (lists.client, lists.client.settings());
    let mut cursor = Cursor::new(lists.request.from, resumed);
    loop {
        let call = cursor.request(lists, set);
        let url = call.url();
        // Every ListRecords request follows another request (Identify at least): the client
        // waits the politeness delay after it (OAI-52), counted per host.
        let fail = |kind| HarvestError {
            url: url.to_owned(),
            page: cursor.page_no,
            token: cursor.token.clone(),
            kind,
            diagnose_command: None,
        };
        let page = fetch_page(lists, &call).await;
        gzip_warning.check(client, url);
        let page = page.map_err(fail)?;
        report.quirks.add(&page.quirks);
        if report.first_response_date.is_none() {
            report.first_response_date = page.response_date.clone();
        }
        if let Some(error) = page.errors.first() {
            match cursor.answer(error, client, report.restarts, url) {
                Ok(Answer::EndOfList) => break,
                Ok(Answer::Restart) => {
                    cursor.restart(lists, report, url);
                    continue;
                }
                Err(kind) => return Err(fail(kind)),
            }
        }
        cursor.delivered.track(&page.records);
        let next = page
            .token
            .as_ref()
            .map(|t| t.value.clone())
            .filter(|t| !t.is_empty());
        let empty = page.records.is_empty() && next.is_some();
        cursor
            .guards
            .page(empty, settings.max_empty_pages)
            .map_err(fail)?;
        report.pages += 1;
        report.records += page.records.len() as u64;
        tracing::debug!(
            url,
            page = cursor.page_no,
            records = page.records.len(),
            "page harvested"
        );
        if let Some(next) = &next {
            cursor.guards.token(next).map_err(fail)?;
        }
        let flow = on_page(PageEvent {
            identify: &report.identify,
            page: cursor.page_no,
            set,
            records: page.records,
            complete_list_size: page.token.and_then(|t| t.complete_list_size),
            next: next.as_ref().map(|t| cursor.resume_at(set, t)),
            response_date: page.response_date.as_deref(),
        });
        if flow.is_break() {
            return Ok(flow);
        }
        match next {
            Some(next) => cursor.token = Some(next),
            None => break,
        }
        cursor.page_no += 1;
    }
    Ok(ControlFlow::Continue(()))
}

/// Fetches one `ListRecords` page, forgetting datestamps ahead of the clock.
async fn fetch_page(lists: &Lists<'_>, call: &OaiRequest) -> Result<ListPage, HarvestErrorKind> {
    lists
        .client
        .fetch(call, lists.deadline, |body| {
            let mut page = super::read::parse_list_records_with(body, lists.request.fields)?;
            page.forget_future_datestamps(
                crate::datestamp::unix_secs(std::time::SystemTime::now()),
            );
            Ok(page)
        })
        .await
}

/// Where one list stands: the token to send, the page it leads to, what it delivered so far.
struct Cursor {
    token: Option<String>,
    /// The `from` of the list's first request.
    from: Option<Datestamp>,
    delivered: Delivered,
    guards: Guards,
    page_no: u64,
}

impl Cursor {
    /// A list from its start at `from`, or from where `resumed` left it.
    fn new(from: Option<Datestamp>, resumed: Option<&Resume>) -> Self {
        Self {
            token: resumed.map(|r| r.token.clone()),
            from,
            delivered: Delivered {
                newest: resumed.and_then(|r| r.newest),
                ordered: resumed.is_none_or(|r| r.ordered),
            },
            guards: Guards {
                seen_tokens: HashSet::new(),
                empty_run: 0,
            },
            page_no: resumed.map_or(1, |r| r.page),
        }
    }

    /// The list's next request, for `set`.
    fn request(&self, lists: &Lists<'_>, set: Option<&str>) -> OaiRequest {
        match &self.token {
            // A follow-up carries only the verb and the token (OAI-03).
            Some(t) => OaiRequest::new(
                lists.base,
                &[("verb", "ListRecords"), ("resumptionToken", t)],
            ),
            None => {
                let from = self
                    .from
                    .map(|d| d.in_granularity(lists.granularity, false));
                let mut args = vec![("verb", "ListRecords"), ("metadataPrefix", "oai_dc")];
                args.extend(set.map(|s| ("set", s)));
                args.extend(from.as_deref().map(|f| ("from", f)));
                args.extend(lists.until.as_deref().map(|u| ("until", u)));
                OaiRequest::new(lists.base, &args)
            }
        }
    }

    /// Starts the list again after `url` answered `badResumptionToken` (OAI-27).
    fn restart(&mut self, lists: &Lists<'_>, report: &mut HarvestReport, url: &str) {
        let granularity = lists.granularity;
        report.restarts += 1;
        let Delivered { newest, ordered } = self.delivered;
        self.from = restart_from(lists.request.from, newest, ordered, granularity);
        tracing::warn!(
            url,
            page = self.page_no,
            from = self.from.map(|f| f.in_granularity(granularity, false)),
            restart = report.restarts,
            "badResumptionToken: the token expired or is unknown; starting the list again (OAI-27)"
        );
        self.token = None;
        self.guards.seen_tokens.clear();
        self.guards.empty_run = 0;
        self.page_no = 1;
    }

    /// What an OAI-PMH `error` answering the list's request at `url` means for the list.
    fn answer(
        &self,
        error: &parse::OaiError,
        client: &Client,
        restarts: u32,
        url: &str,
    ) -> Result<Answer, HarvestErrorKind> {
        if error.code == "noRecordsMatch" {
            if self.page_no > 1 {
                // A token whose follow-up matches nothing: the list is over (OAI-29).
                tracing::warn!(
                    url,
                    "noRecordsMatch answering a resumptionToken; taking it as the end of the list"
                );
            }
            return Ok(Answer::EndOfList);
        }
        if error.code == "badResumptionToken"
            && self.token.is_some()
            && client.retry().restarts_list(restarts)
        {
            return Ok(Answer::Restart);
        }
        Err(HarvestErrorKind::Oai {
            code: error.code.clone(),
            message: error.message.clone(),
        })
    }

    /// The checkpoint of the page just read, whose list continues at `token` in `set`.
    fn resume_at(&self, set: Option<&str>, token: &str) -> Resume {
        Resume {
            set: set.map(str::to_owned),
            token: token.to_owned(),
            page: self.page_no + 1,
            newest: self.delivered.newest,
            ordered: self.delivered.ordered,
        }
    }
}

/// What an OAI-PMH error answering a list's request means, when it is no failure.
enum Answer {
    /// `noRecordsMatch`: the list is over.
    EndOfList,
    /// `badResumptionToken`: the list starts again ([`Cursor::restart`]).
    Restart,
}

/// A list's guards against a server that never ends it: runs of empty pages, repeated tokens.
struct Guards {
    seen_tokens: HashSet<String>,
    /// Pages in a row without records that still led on.
    empty_run: u32,
}

impl Guards {
    /// Counts a page, `empty` when it had no records but led on; `Err` past `max` in a row.
    fn page(&mut self, empty: bool, max: u32) -> Result<(), HarvestErrorKind> {
        if empty {
            self.empty_run += 1;
            if self.empty_run > max {
                return Err(HarvestErrorKind::EmptyPages {
                    count: self.empty_run,
                });
            }
        } else {
            self.empty_run = 0;
        }
        Ok(())
    }

    /// Notes the list's `next` token; `Err` when the list sent it before (a loop).
    fn token(&mut self, next: &str) -> Result<(), HarvestErrorKind> {
        if !self.seen_tokens.insert(next.to_owned()) {
            return Err(HarvestErrorKind::TokenLoop {
                token: next.to_owned(),
            });
        }
        Ok(())
    }
}

/// What a list delivered so far: its newest datestamp, and whether in datestamp order.
#[derive(Clone, Copy)]
struct Delivered {
    newest: Option<Datestamp>,
    ordered: bool,
}

impl Delivered {
    /// Follows the datestamps of a page's `records`.
    fn track(&mut self, records: &[Record]) {
        for r in records {
            if let Some(d) = r.datestamp {
                self.ordered &= self.newest.is_none_or(|n| d >= n);
                self.newest = self.newest.max(Some(d));
            }
        }
    }
}

/// Warns once per harvest, naming the first URL, that the server sends gzip bodies without
/// saying so (OAI-35); the client decodes them by their magic bytes and counts them in
/// [`ClientStats::unlabelled_gzip`](super::client::ClientStats::unlabelled_gzip).
struct UnlabelledGzipWarning {
    /// The count before the last request; `None` once the warning is out.
    seen: Option<u64>,
}

impl UnlabelledGzipWarning {
    fn new(client: &Client) -> Self {
        Self {
            seen: Some(client.stats.unlabelled_gzip.load(Ordering::Relaxed)),
        }
    }

    /// Warns if the request of `url`, just answered, was such a body and none before was.
    fn check(&mut self, client: &Client, url: &str) {
        let Some(seen) = self.seen else {
            return;
        };
        let now = client.stats.unlabelled_gzip.load(Ordering::Relaxed);
        if now > seen {
            tracing::warn!(
                url,
                "the server sends gzip without Content-Encoding: gzip (a static .xml.gz, a \
                 misconfigured proxy?); decoded by its magic bytes (OAI-35)"
            );
            self.seen = None;
        }
    }
}

/// Where a list starts again after its token was refused: one granularity unit before the newest
/// datestamp it delivered when it delivered in order (later records cannot be older), else where
/// it started. Never before the request's own `from`.
fn restart_from(
    from: Option<Datestamp>,
    newest: Option<Datestamp>,
    ordered: bool,
    granularity: crate::datestamp::Granularity,
) -> Option<Datestamp> {
    match newest {
        Some(n) if ordered => Some(n.minus_unit(granularity)).max(from),
        _ => from,
    }
}

/// Protocol checks on `Identify` (OAI-12, OAI-13, OAI-15): fatal only for a version other than 2.0.
fn check_identify(identify: &Identify, base: &Url, url: &str) -> Result<(), HarvestError> {
    if !identify.protocol_version.is_empty() && identify.protocol_version != "2.0" {
        let kind = HarvestErrorKind::UnsupportedProtocol(identify.protocol_version.clone());
        return Err(HarvestError {
            url: url.to_owned(),
            page: 0,
            token: None,
            kind,
            diagnose_command: None,
        });
    }
    if let Some(text) = &identify.granularity_unknown {
        tracing::warn!(
            granularity = text.as_str(),
            "Identify names an unknown granularity; using YYYY-MM-DD"
        );
    }
    if !identify.base_url.is_empty() && identify.base_url != base.as_str() {
        tracing::warn!(
            configured = base.as_str(),
            identify = identify.base_url.as_str(),
            "Identify's baseURL differs from the configured one; keeping the configured URL"
        );
    }
    Ok(())
}

/// Reads a local Static Repository file whole: its Identify and its oai_dc records as one page.
///
/// # Errors
///
/// A [`HarvestError`] naming the file when it cannot be read, is larger than `limit`
/// bytes, or is not an OAI Static Repository.
pub async fn read_static_file(
    path: &PathBuf,
    limit: u64,
    fields: parse::Fields,
) -> Result<(Identify, ListPage), HarvestError> {
    let fail = |kind| HarvestError {
        url: path.display().to_string(),
        page: 1,
        token: None,
        kind,
        diagnose_command: None,
    };
    let len = tokio::fs::metadata(path)
        .await
        .map_err(|e| fail(HarvestErrorKind::File(e)))?
        .len();
    if len > limit {
        return Err(fail(HarvestErrorKind::TooLarge { limit }));
    }
    let body = tokio::fs::read(path)
        .await
        .map_err(|e| fail(HarvestErrorKind::File(e)))?;
    let parsed = parse::parse_identify(&body)
        .and_then(|identify| {
            Ok((
                identify,
                super::read::parse_list_records_with(&body, fields)?,
            ))
        })
        .map_err(|e| fail(e.fetched(1)))?;
    match parsed {
        (IdentifyOutcome::Static(identify), page) => Ok((identify, page)),
        (IdentifyOutcome::Identify(_) | IdentifyOutcome::Errors(_), _) => {
            let what = "an OAI-PMH response, not an OAI Static Repository file".to_owned();
            Err(fail(HarvestErrorKind::NotOai { what }.fetched(1)))
        }
    }
}

/// A Static Repository is one page: sets and dates are applied here, as its gateway would.
fn emit_static(
    request: &HarvestRequest,
    report: &mut HarvestReport,
    identify: Identify,
    mut page: ListPage,
    on_page: &mut impl FnMut(PageEvent<'_>) -> ControlFlow<()>,
) -> ControlFlow<()> {
    let wanted = |r: &Record| {
        (request.sets.is_empty()
            || r.sets.iter().any(|s| {
                request
                    .sets
                    .iter()
                    .any(|w| s == w || s.starts_with(&format!("{w}:")))
            }))
            && request
                .from
                .is_none_or(|f| r.datestamp.is_some_and(|d| d.unix() >= f.unix()))
            && request
                .until
                .is_none_or(|u| r.datestamp.is_some_and(|d| d.unix() <= u.last_second()))
    };
    page.records.retain(wanted);
    page.forget_future_datestamps(crate::datestamp::unix_secs(std::time::SystemTime::now()));
    let records = page.records;
    report.identify = identify;
    report.is_static = true;
    report.pages = 1;
    report.records = records.len() as u64;
    report.first_response_date = page.response_date;
    report.quirks = page.quirks;
    log_quirks(&report.quirks, &request.source.to_string());
    on_page(PageEvent {
        identify: &report.identify,
        page: 1,
        set: None,
        records,
        complete_list_size: None,
        next: None,
        response_date: report.first_response_date.as_deref(),
    })
}

fn log_quirks(quirks: &Quirks, source: &str) {
    if quirks.illegal_chars_removed > 0 {
        tracing::warn!(
            source,
            count = quirks.illegal_chars_removed,
            "removed characters that XML 1.0 forbids (OAI-46)"
        );
    }
    if quirks.https_namespaces > 0 {
        tracing::warn!(
            source,
            elements = quirks.https_namespaces,
            "accepted https:// spellings of the OAI/oai_dc/DC namespaces (OAI-43)"
        );
    }
    if quirks.no_namespace {
        tracing::warn!(source, "the responses carry no OAI-PMH namespace (Q-19)");
    }
    if quirks.leading_whitespace {
        tracing::warn!(source, "whitespace before the XML declaration (OAI-48)");
    }
    if quirks.future_datestamps > 0 {
        tracing::warn!(
            source,
            records = quirks.future_datestamps,
            "datestamps more than a day ahead of the clock: read as none (Q-36)"
        );
    }
    if quirks.windows_1252_bytes > 0 {
        tracing::warn!(
            source,
            bytes = quirks.windows_1252_bytes,
            "read bytes that are not UTF-8 as Windows-1252 (OAI-47)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// OAI-05: every byte but RFC 3986's unreserved characters is percent-encoded, as the
    /// percent-encoding crate does with that set.
    #[test]
    fn push_query_value_leaves_only_unreserved_characters() {
        use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
        const UNRESERVED_KEPT: &AsciiSet = &NON_ALPHANUMERIC
            .remove(b'-')
            .remove(b'.')
            .remove(b'_')
            .remove(b'~');
        // Every ASCII character, and multi-byte ones, in one value.
        let mut value: String = (0u8..128).map(char::from).collect();
        value.push_str("é€😀 oai:repo:1/a+b=c");
        let mut out = String::from("x=");
        push_query_value_str(&mut out, &value);
        assert_eq!(
            out,
            format!("x={}", utf8_percent_encode(&value, UNRESERVED_KEPT))
        );
    }

    /// The GET URL of a request, as [`OaiRequest::url`] spells it.
    fn request_url(base: &Url, args: &[(&str, &str)]) -> String {
        OaiRequest::new(base, args).into_url()
    }

    #[test]
    fn arguments_are_encoded_once_and_appended_to_an_existing_query() {
        // OAI-04 and OAI-05; Q-32: a baseURL with a query of its own (dbs.hab.de's
        // `?repository=X`) gets the OAI-PMH arguments after `&`.
        let base = Url::parse("https://h/oai?repository=X").unwrap();
        assert_eq!(
            request_url(&base, &[("verb", "Identify")]),
            "https://h/oai?repository=X&verb=Identify"
        );
        let base = Url::parse("https://h/oai").unwrap();
        assert_eq!(
            request_url(
                &base,
                &[
                    ("verb", "ListRecords"),
                    ("resumptionToken", "a+b/c=d&e f%|760571")
                ]
            ),
            "https://h/oai?verb=ListRecords&resumptionToken=a%2Bb%2Fc%3Dd%26e%20f%25%7C760571"
        );
        let base = Url::parse("https://h/oai?").unwrap();
        assert_eq!(
            request_url(&base, &[("verb", "Identify")]),
            "https://h/oai?verb=Identify"
        );
    }

    /// G-01: the harvester takes a baseURL, to which it adds `verb=...` itself; a
    /// request URL (one carrying `verb=`) is refused.
    #[test]
    fn sources() {
        assert_eq!(
            Source::parse("https://h/oai").unwrap(),
            Source::Oai(Url::parse("https://h/oai").unwrap())
        );
        assert_eq!(
            Source::parse("fixtures/x.xml").unwrap(),
            Source::File(PathBuf::from("fixtures/x.xml"))
        );
        assert!(
            Source::parse("https://h/oai?verb=Identify")
                .unwrap_err()
                .contains("without verb")
        );
        assert!(Source::parse("https://h/oai#x").is_err());
        assert!(Source::parse("ftp://h/x").is_err());
    }
}
