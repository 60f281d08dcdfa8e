//! A local OAI-PMH repository for the integration tests: `Identify` and `ListRecords` (oai_dc)
//! over loopback, with real resumption-token paging, a log of every request, and faults that can
//! be injected per request or per page.
//!
//! The HTTP/1.1 side is written by hand on purpose: the faults need byte-level control (a body
//! cut short under a larger `Content-Length`, a connection closed without an answer, a body
//! delimited only by closing the connection) that a proper server library exists to prevent.
//! It reads a request head up to `\r\n\r\n`, answers with `Content-Length` and keeps the
//! connection alive; that is all the harvester needs.
//!
//! ```ignore
//! let server = TestServer::builder(numbered(12)).page_size(5).start();
//! server.fault_on_page(2, Fault::Unavailable(RetryAfter::Seconds(1)));
//! // ... harvest server.base_url() ...
//! let seen = server.list_requests(); // raw query, time received, page, what was answered
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant, SystemTime};

use percent_encoding::percent_decode_str;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use url::Url;

/// Path of the OAI-PMH endpoint on the test server.
const PATH: &str = "/oai";
/// The same endpoint under another path, as a load balancer's mirror (OAI-34).
const MIRROR_PATH: &str = "/mirror/oai";
/// The same endpoint where EPrints has its OAI-PMH script.
pub(crate) const EPRINTS_PATH: &str = "/cgi/oai2";
/// Longest request head accepted.
const MAX_HEAD: usize = 64 * 1024;

/// One record of the test repository.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TestRecord {
    /// Header identifier.
    pub identifier: String,
    /// Header datestamp, written as given (`YYYY-MM-DD` or `YYYY-MM-DDThh:mm:ssZ`).
    pub datestamp: String,
    /// `status="deleted"`. A deleted record carries no metadata, unless it has `dc:identifier`s:
    /// then they are sent anyway, as some servers do (OAI-39, bad input).
    pub deleted: bool,
    /// `setSpec`s.
    pub sets: Vec<String>,
    /// `dc:identifier` values.
    pub dc_identifiers: Vec<String>,
    /// `dc:relation` values, written after the identifiers.
    pub relations: Vec<String>,
    /// `dc:type` values, written after the relations.
    pub types: Vec<String>,
    /// `dc:title`.
    pub title: String,
    /// Sent with an empty `<metadata/>` instead, as B2SHARE did (Q-35).
    pub empty_metadata: bool,
}

impl TestRecord {
    /// A live record without sets, identifiers or title.
    pub(crate) fn new(identifier: &str, datestamp: &str) -> Self {
        Self {
            identifier: identifier.to_owned(),
            datestamp: datestamp.to_owned(),
            deleted: false,
            sets: Vec::new(),
            dc_identifiers: Vec::new(),
            relations: Vec::new(),
            types: Vec::new(),
            title: String::new(),
            empty_metadata: false,
        }
    }

    /// Adds a `dc:identifier`.
    pub(crate) fn url(mut self, value: &str) -> Self {
        self.dc_identifiers.push(value.to_owned());
        self
    }

    /// Adds a `dc:relation`.
    pub(crate) fn relation(mut self, value: &str) -> Self {
        self.relations.push(value.to_owned());
        self
    }

    /// Adds a `dc:type`.
    pub(crate) fn kind(mut self, value: &str) -> Self {
        self.types.push(value.to_owned());
        self
    }

    /// Adds a `setSpec`.
    pub(crate) fn set(mut self, spec: &str) -> Self {
        self.sets.push(spec.to_owned());
        self
    }

    /// Sets the `dc:title`.
    pub(crate) fn title(mut self, title: &str) -> Self {
        self.title = title.to_owned();
        self
    }

    /// Marks the record deleted.
    pub(crate) fn deleted(mut self) -> Self {
        self.deleted = true;
        self
    }

    /// Sends the record with an empty `<metadata/>` (Q-35).
    pub(crate) fn empty_metadata(mut self) -> Self {
        self.empty_metadata = true;
        self
    }
}

/// `n` live records `oai:test:1..=n`, datestamps `2024-05-01` onwards (day granularity), each
/// with the landing page `https://repo.example/record/<i>` and a title.
pub(crate) fn numbered(n: usize) -> Vec<TestRecord> {
    (1..=n)
        .map(|i| {
            TestRecord::new(
                &format!("oai:test:{i}"),
                &format!("2024-05-{:02}", (i - 1) % 28 + 1),
            )
            .url(&format!("https://repo.example/record/{i}"))
            .title(&format!("Record {i}"))
        })
        .collect()
}

/// The datestamp granularity the repository declares and enforces on `from`/`until` (OAI-17).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Granularity {
    /// `YYYY-MM-DD`; a `from`/`until` with a time is answered with `badArgument`.
    Day,
    /// `YYYY-MM-DDThh:mm:ssZ`; both forms are accepted.
    Seconds,
}

/// How the last page of a list that took more than one page ends (OAI-21).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FinalToken {
    /// `<resumptionToken completeListSize=".." cursor=".."/>`, as the spec requires.
    Empty,
    /// A token element holding only whitespace.
    Whitespace,
    /// No token element at all (Q-05).
    Missing,
}

/// What a `503`/`429` says in `Retry-After`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RetryAfter {
    /// Delta-seconds.
    Seconds(u64),
    /// An HTTP-date at least this far ahead, rounded up to a whole second. The value sent is in
    /// the request log ([`Seen::retry_after`]).
    Date(Duration),
    /// This text, e.g. `soon`.
    Raw(String),
    /// No header.
    Missing,
}

/// A deviation the server commits instead of (or on top of) its normal answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    /// `503 Service Unavailable` (OAI-33).
    Unavailable(RetryAfter),
    /// `429 Too Many Requests` (Q-31).
    TooManyRequests(RetryAfter),
    /// This status with a short plain-text body, e.g. 500 (Q-07).
    Status(u16),
    /// Read the request, then close the connection without a word.
    DropConnection,
    /// Wait this long, then answer normally.
    Delay(Duration),
    /// Announce the whole body in `Content-Length`, send 70% of it, close (OAI-50).
    TruncateBody,
    /// The normal answer without `Content-Length`, delimited by closing the connection.
    NoContentLength,
    /// A 200 whose body is this OAI-PMH error instead of the answer (OAI-30).
    OaiError {
        /// The error code; any string, standard or not.
        code: String,
        /// The message.
        message: String,
    },
    /// The page, but carrying the resumption token of the request again (on a first request,
    /// a token that leads back to the same page): the same token forever (OAI-28, Q-02).
    TokenLoop,
    /// A `200 text/html` page, like a proxy's maintenance page (OAI-07, Q-13).
    HtmlPage,
    /// The page with a raw U+001A and `&#xFFFE;` in the first title (OAI-46, Q-08). The title
    /// also holds a raw TAB, LF and CR and `&#x9;`, which are legal and must stay.
    IllegalChars,
    /// The normal answer after a UTF-8 BOM (OAI-48).
    Bom,
    /// The normal answer with `https://` spellings of the OAI, oai_dc and DC namespaces (OAI-43).
    HttpsNamespaces,
    /// No records, but a fresh token that leads to this same page again (OAI-29).
    EmptyPage,
    /// This body, `200 text/xml`, whatever was asked.
    Body(String),
    /// These bytes as the body (which need not be UTF-8), `200 text/xml`.
    Bytes(Vec<u8>),
    /// The normal answer, one byte at a time with this pause between bytes.
    SlowDrip(Duration),
    /// Announce the whole body in `Content-Length`, send half of it, then nothing more until
    /// the client hangs up: a server stalled mid-answer.
    Stall,
    /// A `200 text/xml` body that never ends (chunked, an endless stream of whitespace after
    /// the start of a page).
    Endless,
    /// `Content-Encoding: gzip` with a small body that inflates to 32 MiB of spaces.
    GzipBomb,
    /// `302 Found` to this location (relative or absolute).
    Redirect(String),
    /// `302 Found` to the same request at the mirror path `/mirror/oai` on the same host
    /// (OAI-34); the mirror answers as `/oai` does.
    RedirectToMirror,
    /// The normal answer, compressed this way (OAI-35).
    Compressed(Compression),
    /// The normal answer with this `Content-Type` instead of `text/xml` (OAI-07, Q-12).
    ContentType(&'static str),
    /// `414 URI Too Long` to a `GET`; a `POST` of the same arguments gets the normal answer
    /// (OAI-06).
    UriTooLong,
    /// The normal answer with every OAI-PMH element in the `oai:` prefix (OAI-44, Q-15).
    Prefixed,
    /// The page's records and an empty resumption token, as if it were the last page, while
    /// `completeListSize` still tells the whole list (Q-04: OJS 3.3.0 miscounting).
    PrematureEnd,
}

/// How a [`Fault::Compressed`] answer is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Compression {
    /// gzip, with `Content-Encoding: gzip`.
    Gzip,
    /// zlib-wrapped deflate (RFC 1950), with `Content-Encoding: deflate`, as HTTP means it.
    Zlib,
    /// Raw deflate (RFC 1951) under `Content-Encoding: deflate`, as some servers send it.
    RawDeflate,
    /// gzip without a `Content-Encoding` header.
    UnlabelledGzip,
}

impl Fault {
    /// An OAI-PMH error answer.
    pub(crate) fn oai(code: &str, message: &str) -> Self {
        Fault::OaiError {
            code: code.to_owned(),
            message: message.to_owned(),
        }
    }

    /// `badResumptionToken`: the token expired (OAI-27).
    pub(crate) fn bad_resumption_token() -> Self {
        Fault::oai(
            "badResumptionToken",
            "The value of the resumptionToken argument is invalid or expired.",
        )
    }
}

/// Which requests a fault applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Trigger {
    /// The n-th request the server receives (1-based, `Identify` included).
    Request(usize),
    /// Requests for this `ListRecords` page of any list (1 = the request without a token).
    Page(u64),
    /// Every request.
    Any,
}

#[derive(Clone, Debug)]
struct Rule {
    trigger: Trigger,
    /// Applications left; `None` for no limit.
    remaining: Option<u32>,
    fault: Fault,
}

/// One request as the server saw it, and what it answered.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    /// 1-based position among all requests.
    pub n: usize,
    /// `GET` or `POST`.
    pub method: String,
    /// The request target exactly as received: path and raw query.
    pub target: String,
    /// The raw (still percent-encoded) query: the URL's for `GET`, the body for `POST`.
    pub query: String,
    /// When the request head was complete.
    pub at: Instant,
    /// The same moment on the wall clock, to compare with an HTTP-date.
    pub wall: SystemTime,
    /// The `User-Agent` header.
    pub user_agent: Option<String>,
    /// The `Accept` header.
    pub accept: Option<String>,
    /// The `Accept-Encoding` header.
    pub accept_encoding: Option<String>,
    /// The `verb` argument.
    pub verb: Option<String>,
    /// The `ListRecords` page asked for: 1 without a token, else the page the token leads to.
    pub page: Option<u64>,
    /// The fault applied, if any.
    pub fault: Option<Fault>,
    /// Status answered; 0 when the connection was dropped.
    pub status: u16,
    /// `Retry-After` answered.
    pub retry_after: Option<String>,
    /// Non-empty resumption token answered.
    pub token: Option<String>,
}

impl Seen {
    /// The decoded arguments in order (`+` as space, then percent-decoding, as servers do).
    pub(crate) fn args(&self) -> Vec<(String, String)> {
        decode_query(&self.query)
    }

    /// The decoded value of one argument.
    pub(crate) fn arg(&self, key: &str) -> Option<String> {
        self.args()
            .into_iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }
}

/// Builds a [`TestServer`].
#[derive(Clone, Debug)]
pub(crate) struct Builder {
    records: Vec<TestRecord>,
    page_size: usize,
    granularity: Granularity,
    final_token: FinalToken,
    pad_tokens: bool,
    claimed_size: Option<u64>,
    response_date: String,
    identify_base_url: Option<String>,
    deleted_record: &'static str,
    robots: Option<String>,
    refuse_from: Option<u16>,
    pages: Option<String>,
}

impl Builder {
    /// Records per page (default 5).
    pub(crate) fn page_size(mut self, n: usize) -> Self {
        self.page_size = n.max(1);
        self
    }

    /// The granularity `Identify` declares and `from`/`until` must use (default day).
    pub(crate) fn granularity(mut self, granularity: Granularity) -> Self {
        self.granularity = granularity;
        self
    }

    /// How the last page of a multi-page list ends (default [`FinalToken::Empty`]).
    pub(crate) fn final_token(mut self, final_token: FinalToken) -> Self {
        self.final_token = final_token;
        self
    }

    /// Pretty-prints tokens with newlines and indentation around them, which must be trimmed
    /// (OAI-23, Q-20).
    pub(crate) fn pad_tokens(mut self) -> Self {
        self.pad_tokens = true;
        self
    }

    /// Claims this `completeListSize` and `cursor="0"` on every token, whatever the truth
    /// (OAI-22: hints only).
    pub(crate) fn claim_complete_list_size(mut self, n: u64) -> Self {
        self.claimed_size = Some(n);
        self
    }

    /// The `baseURL` `Identify` states (default: the server's real one).
    pub(crate) fn identify_base_url(mut self, url: &str) -> Self {
        self.identify_base_url = Some(url.to_owned());
        self
    }

    /// The `responseDate` of every answer (default `2024-06-01T12:00:00Z`, so bodies are
    /// reproducible).
    pub(crate) fn response_date(mut self, date: &str) -> Self {
        self.response_date = date.to_owned();
        self
    }

    /// Serves `/robots.txt` with this text (404 without).
    pub(crate) fn robots(mut self, text: &str) -> Self {
        self.robots = Some(text.to_owned());
        self
    }

    /// What `Identify` says of deletions: `no`, `transient` or `persistent` (the default).
    pub(crate) fn deleted_record(mut self, policy: &'static str) -> Self {
        self.deleted_record = policy;
        self
    }

    /// Answers every `ListRecords` request that carries `from` or `until` with this HTTP status
    /// and a plain-text body, as repositories with broken selective harvesting do (OAI-53; Zenodo
    /// answered 422 to some date windows, Q-26).
    pub(crate) fn refuse_from(mut self, status: u16) -> Self {
        self.refuse_from = Some(status);
        self
    }

    /// Answers 200 with a small HTML page for every path under `prefix` (landing pages).
    pub(crate) fn pages(mut self, prefix: &str) -> Self {
        self.pages = Some(prefix.to_owned());
        self
    }

    /// Binds `127.0.0.1:0` and serves. The port is bound before this returns, so requests can
    /// be sent at once. Must be called inside a tokio runtime.
    pub(crate) fn start(self) -> TestServer {
        let std_listener =
            std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        std_listener
            .set_nonblocking(true)
            .expect("make the listener non-blocking");
        let addr = std_listener.local_addr().expect("the bound address");
        let listener = TcpListener::from_std(std_listener).expect("hand the listener to tokio");
        let base_url = format!("http://{addr}{PATH}");
        let mut repo = self;
        let records = RwLock::new(std::mem::take(&mut repo.records));
        let response_date = RwLock::new(repo.response_date.clone());
        let shared = Arc::new(Shared {
            base_url,
            repo,
            records,
            response_date,
            robots_status: Mutex::new(None),
            state: Mutex::new(State::default()),
        });
        let task = tokio::spawn(accept_loop(listener, Arc::clone(&shared)));
        TestServer { shared, task }
    }
}

/// A running test repository. Dropping it stops the server and every connection.
#[derive(Debug)]
pub(crate) struct TestServer {
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TestServer {
    /// A builder for a repository holding `records`, in this order.
    pub(crate) fn builder(records: Vec<TestRecord>) -> Builder {
        Builder {
            records,
            page_size: 5,
            granularity: Granularity::Day,
            final_token: FinalToken::Empty,
            pad_tokens: false,
            claimed_size: None,
            response_date: "2024-06-01T12:00:00Z".to_owned(),
            identify_base_url: None,
            deleted_record: "persistent",
            robots: None,
            refuse_from: None,
            pages: None,
        }
    }

    /// A repository with the default settings.
    pub(crate) fn start(records: Vec<TestRecord>) -> TestServer {
        Self::builder(records).start()
    }

    /// The baseURL, `http://127.0.0.1:<port>/oai`.
    pub(crate) fn url(&self) -> String {
        self.shared.base_url.clone()
    }

    /// The baseURL, parsed.
    pub(crate) fn base_url(&self) -> Url {
        Url::parse(&self.shared.base_url).expect("the server's URL parses")
    }

    /// Every request so far, in order of arrival.
    pub(crate) fn requests(&self) -> Vec<Seen> {
        self.shared.state().log.clone()
    }

    /// The `ListRecords` requests so far.
    pub(crate) fn list_requests(&self) -> Vec<Seen> {
        self.requests()
            .into_iter()
            .filter(|s| s.verb.as_deref() == Some("ListRecords"))
            .collect()
    }

    /// The requests for one `ListRecords` page (retries included), of any list.
    pub(crate) fn page_requests(&self, page: u64) -> Vec<Seen> {
        self.list_requests()
            .into_iter()
            .filter(|s| s.page == Some(page))
            .collect()
    }

    /// Applies `fault` once, to the n-th request received (1-based; `Identify` is usually 1).
    pub(crate) fn fault_on_request(&self, n: usize, fault: Fault) {
        self.add_rule(Trigger::Request(n), Some(1), fault);
    }

    /// Applies `fault` once, to the first request for `ListRecords` page `page` (1-based).
    pub(crate) fn fault_on_page(&self, page: u64, fault: Fault) {
        self.add_rule(Trigger::Page(page), Some(1), fault);
    }

    /// Applies `fault` to the next `times` requests for page `page`, retries included.
    pub(crate) fn fault_on_page_times(&self, page: u64, times: u32, fault: Fault) {
        self.add_rule(Trigger::Page(page), Some(times), fault);
    }

    /// Applies `fault` to every request for page `page`.
    pub(crate) fn fault_on_page_always(&self, page: u64, fault: Fault) {
        self.add_rule(Trigger::Page(page), None, fault);
    }

    /// Applies `fault` to every request, `Identify` included.
    pub(crate) fn fault_always(&self, fault: Fault) {
        self.add_rule(Trigger::Any, None, fault);
    }

    /// Replaces the records: lists started from now on see the new ones.
    pub(crate) fn set_records(&self, records: Vec<TestRecord>) {
        *self
            .shared
            .records
            .write()
            .unwrap_or_else(|e| e.into_inner()) = records;
    }

    /// Sets the server's clock (`responseDate` of every later response).
    pub(crate) fn set_response_date(&self, date: &str) {
        *self
            .shared
            .response_date
            .write()
            .unwrap_or_else(|e| e.into_inner()) = date.to_owned();
    }

    /// Has `/robots.txt` answer `status` from now on (`None`: its text again).
    pub(crate) fn set_robots_status(&self, status: Option<u16>) {
        *self
            .shared
            .robots_status
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = status;
    }

    /// Forgets every fault not yet applied.
    pub(crate) fn clear_faults(&self) {
        self.shared.state().rules.clear();
    }

    fn add_rule(&self, trigger: Trigger, remaining: Option<u32>, fault: Fault) {
        self.shared.state().rules.push(Rule {
            trigger,
            remaining,
            fault,
        });
    }
}

#[derive(Debug)]
struct Shared {
    base_url: String,
    repo: Builder,
    /// The records, apart from the builder so that a test can change the repository.
    records: RwLock<Vec<TestRecord>>,
    /// The server's clock as `responseDate` says it; a test moves it on.
    response_date: RwLock<String>,
    /// A status `/robots.txt` answers instead of its text (a site down for a while).
    robots_status: Mutex<Option<u16>>,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    log: Vec<Seen>,
    rules: Vec<Rule>,
    /// Each list started by a first request: the indices of its records.
    lists: Vec<Vec<usize>>,
    /// Token -> (list, page it leads to).
    tokens: HashMap<String, (usize, u64)>,
    issued: usize,
}

impl State {
    /// The first rule that applies, used up by one.
    fn take_fault(&mut self, n: usize, page: Option<u64>) -> Option<Fault> {
        let rule = self.rules.iter_mut().find(|r| {
            r.remaining != Some(0)
                && match r.trigger {
                    Trigger::Request(k) => k == n,
                    Trigger::Page(p) => page == Some(p),
                    Trigger::Any => true,
                }
        })?;
        if let Some(left) = &mut rule.remaining {
            *left -= 1;
        }
        Some(rule.fault.clone())
    }

    /// A new opaque token leading to `page` of `list`. Tokens hold `=`, `|`, `/`, `+` and a space,
    /// so only one exact percent-encoding brings them back intact (OAI-05).
    fn issue(&mut self, list: usize, page: u64) -> String {
        self.issued += 1;
        let token = format!("p={page}|k/{}+y z", self.issued);
        self.tokens.insert(token.clone(), (list, page));
        token
    }
}

/// How a `ListRecords` page is bent by a fault.
enum PageMode {
    Normal,
    Empty,
    Loop(Option<String>),
    IllegalChars,
    PrematureEnd,
}

/// One parsed request head (and body, for `POST`).
struct Request {
    method: String,
    target: String,
    path: String,
    query: String,
    user_agent: Option<String>,
    accept: Option<String>,
    accept_encoding: Option<String>,
    close: bool,
}

enum Delivery {
    Whole,
    Truncated,
    CloseDelimited,
    Drop,
    /// With `Content-Length`, a byte at a time, pausing between bytes.
    Drip(Duration),
    /// Chunked, never finished.
    Endless,
    /// With `Content-Length`, half the body, then silence until the client hangs up.
    Stall,
}

struct Reply {
    status: u16,
    content_type: &'static str,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
    delivery: Delivery,
    delay: Duration,
}

impl Reply {
    fn new(status: u16, content_type: &'static str, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status,
            content_type,
            headers: Vec::new(),
            body: body.into(),
            delivery: Delivery::Whole,
            delay: Duration::ZERO,
        }
    }

    fn xml(body: impl Into<Vec<u8>>) -> Self {
        Self::new(200, "text/xml; charset=utf-8", body)
    }
}

type OaiResult<T> = Result<T, (&'static str, String)>;

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn records(&self) -> RwLockReadGuard<'_, Vec<TestRecord>> {
        self.records
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Decides the answer to one request and logs it. Never awaits: the lock is not held
    /// across IO.
    fn answer(&self, request: &Request, at: Instant, wall: SystemTime) -> Reply {
        let mut state = self.state();
        let n = state.log.len() + 1;
        let args = decode_query(&request.query);
        let verb = args
            .iter()
            .find(|(k, _)| k == "verb")
            .map(|(_, v)| v.clone());
        let page = (is_oai_path(&request.path) && verb.as_deref() == Some("ListRecords"))
            .then(|| match args.iter().find(|(k, _)| k == "resumptionToken") {
                Some((_, token)) => state.tokens.get(token).map(|&(_, page)| page),
                None => Some(1),
            })
            .flatten();
        let fault = state.take_fault(n, page);
        let mut issued = None;
        let reply = self.reply(&mut state, request, &args, fault.as_ref(), &mut issued);
        let retry_after = reply
            .headers
            .iter()
            .find(|(k, _)| *k == "Retry-After")
            .map(|(_, v)| v.clone());
        let status = match reply.delivery {
            Delivery::Drop => 0,
            _ => reply.status,
        };
        state.log.push(Seen {
            n,
            method: request.method.clone(),
            target: request.target.clone(),
            query: request.query.clone(),
            at,
            wall,
            user_agent: request.user_agent.clone(),
            accept: request.accept.clone(),
            accept_encoding: request.accept_encoding.clone(),
            verb,
            page,
            fault,
            status,
            retry_after,
            token: issued,
        });
        reply
    }

    fn reply(
        &self,
        state: &mut State,
        request: &Request,
        args: &[(String, String)],
        fault: Option<&Fault>,
        issued: &mut Option<String>,
    ) -> Reply {
        match fault {
            Some(Fault::Unavailable(retry_after)) => return flow_control(503, retry_after),
            Some(Fault::TooManyRequests(retry_after)) => return flow_control(429, retry_after),
            Some(Fault::Status(status)) => {
                return Reply::new(*status, "text/plain", reason(*status));
            }
            Some(Fault::DropConnection) => {
                let mut reply = Reply::new(0, "text/plain", "");
                reply.delivery = Delivery::Drop;
                return reply;
            }
            Some(Fault::HtmlPage) => {
                return Reply::new(
                    200,
                    "text/html; charset=utf-8",
                    "<!DOCTYPE html>\n<html><head><title>Scheduled maintenance</title></head>\
                     <body><h1>Back soon</h1><p>The repository is being upgraded.</p></body></html>\n",
                );
            }
            Some(Fault::Body(body)) => return Reply::xml(body.clone()),
            Some(Fault::Bytes(body)) => return Reply::xml(body.clone()),
            Some(Fault::Endless) => {
                let mut reply = Reply::xml(
                    "<?xml version=\"1.0\"?>\n<OAI-PMH xmlns=\"http://www.openarchives.org/OAI/2.0/\">",
                );
                reply.delivery = Delivery::Endless;
                return reply;
            }
            Some(Fault::GzipBomb) => {
                // Made once, at the fastest level, and 32 times the client's cap in these
                // tests (1 MiB) rather than 200 MB: compressing 200 MB in a debug build took
                // long enough, on a loaded machine, to time the request out before the bomb
                // was sent (the client's cap is what is tested, not the server's speed).
                static BOMB: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
                let bomb = BOMB.get_or_init(|| {
                    let mut gz =
                        flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                    let spaces = vec![b' '; 1 << 20];
                    for _ in 0..32 {
                        std::io::Write::write_all(&mut gz, &spaces).expect("in memory");
                    }
                    gz.finish().expect("in memory")
                });
                let mut reply = Reply::xml(bomb.clone());
                reply.headers.push(("Content-Encoding", "gzip".to_owned()));
                return reply;
            }
            Some(Fault::Redirect(location)) => {
                let mut reply = Reply::new(302, "text/plain", "Found");
                reply.headers.push(("Location", location.clone()));
                return reply;
            }
            Some(Fault::RedirectToMirror) => {
                let mut reply = Reply::new(302, "text/plain", "Found");
                reply
                    .headers
                    .push(("Location", format!("{MIRROR_PATH}?{}", request.query)));
                return reply;
            }
            Some(Fault::UriTooLong) if request.method == "GET" => {
                return Reply::new(414, "text/plain", reason(414));
            }
            _ => {}
        }
        if let Some(status) = self.repo.refuse_from {
            let selective = args.iter().any(|(k, _)| k == "from" || k == "until");
            if selective && args.iter().any(|(k, v)| k == "verb" && v == "ListRecords") {
                return Reply::new(status, "text/plain", reason(status));
            }
        }
        if request.path == "/robots.txt" {
            let status = *self.robots_status.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(status) = status {
                return Reply::new(status, "text/plain", reason(status));
            }
            return match &self.repo.robots {
                Some(text) => Reply::new(200, "text/plain", text.clone()),
                None => Reply::new(404, "text/plain", "Not Found"),
            };
        }
        if let Some(prefix) = &self.repo.pages
            && request.path.starts_with(prefix.as_str())
        {
            return Reply::new(200, "text/html", "<!DOCTYPE html><title>A record</title>");
        }
        if !is_oai_path(&request.path) {
            return Reply::new(404, "text/plain", "Not Found");
        }
        let mode = match fault {
            Some(Fault::EmptyPage) => PageMode::Empty,
            Some(Fault::TokenLoop) => PageMode::Loop(
                args.iter()
                    .find(|(k, _)| k == "resumptionToken")
                    .map(|(_, v)| v.clone()),
            ),
            Some(Fault::IllegalChars) => PageMode::IllegalChars,
            Some(Fault::PrematureEnd) => PageMode::PrematureEnd,
            _ => PageMode::Normal,
        };
        let body = match fault {
            Some(Fault::OaiError { code, message }) => self.error_doc(args, code, message),
            _ => self.oai(state, args, &mode, issued),
        };
        let mut body = body.into_bytes();
        let mut reply = match fault {
            Some(Fault::Bom) => {
                body.splice(0..0, *b"\xEF\xBB\xBF");
                Reply::xml(body)
            }
            Some(Fault::HttpsNamespaces) => {
                let mut text = String::from_utf8(body).expect("the server writes UTF-8");
                for ns in [
                    "www.openarchives.org/OAI/2.0/",
                    "www.openarchives.org/OAI/2.0/oai_dc/",
                    "purl.org/dc/elements/1.1/",
                ] {
                    text = text.replace(&format!("\"http://{ns}\""), &format!("\"https://{ns}\""));
                }
                Reply::xml(text)
            }
            Some(Fault::Prefixed) => {
                let text = String::from_utf8(body).expect("the server writes UTF-8");
                Reply::xml(prefixed(&text))
            }
            Some(Fault::Compressed(compression)) => {
                let mut reply = Reply::xml(compress(&body, *compression));
                let label = match compression {
                    Compression::Gzip => Some("gzip"),
                    Compression::Zlib | Compression::RawDeflate => Some("deflate"),
                    Compression::UnlabelledGzip => None,
                };
                if let Some(label) = label {
                    reply.headers.push(("Content-Encoding", label.to_owned()));
                }
                reply
            }
            Some(Fault::ContentType(content_type)) => Reply::new(200, content_type, body),
            _ => Reply::xml(body),
        };
        match fault {
            Some(Fault::Delay(delay)) => reply.delay = *delay,
            Some(Fault::SlowDrip(pause)) => reply.delivery = Delivery::Drip(*pause),
            Some(Fault::Stall) => reply.delivery = Delivery::Stall,
            Some(Fault::TruncateBody) => reply.delivery = Delivery::Truncated,
            Some(Fault::NoContentLength) => reply.delivery = Delivery::CloseDelimited,
            _ => {}
        }
        reply
    }

    /// The OAI-PMH answer to `args`: a response or an error document.
    fn oai(
        &self,
        state: &mut State,
        args: &[(String, String)],
        mode: &PageMode,
        issued: &mut Option<String>,
    ) -> String {
        let mut keys: Vec<&str> = args.iter().map(|(k, _)| k.as_str()).collect();
        keys.sort_unstable();
        if keys.windows(2).any(|w| w[0] == w[1]) {
            return self.error_doc(args, "badArgument", "repeated argument");
        }
        let verb = args
            .iter()
            .find(|(k, _)| k == "verb")
            .map(|(_, v)| v.as_str());
        let result = match verb {
            Some("Identify") if args.len() == 1 => Ok(self.identify()),
            Some("Identify") => Err(("badArgument", "Identify takes no arguments".to_owned())),
            Some("ListRecords") => self.list_records(state, args, mode).map(|(xml, token)| {
                *issued = token;
                xml
            }),
            Some("ListMetadataFormats") => Ok("  <ListMetadataFormats>\n    <metadataFormat>\
                 <metadataPrefix>oai_dc</metadataPrefix>\
                 <schema>http://www.openarchives.org/OAI/2.0/oai_dc.xsd</schema>\
                 <metadataNamespace>http://www.openarchives.org/OAI/2.0/oai_dc/</metadataNamespace>\
                 </metadataFormat>\n  </ListMetadataFormats>"
                .to_owned()),
            Some("ListSets") => {
                let mut specs: Vec<String> = self
                    .records()
                    .iter()
                    .flat_map(|r| r.sets.clone())
                    .collect();
                specs.sort();
                specs.dedup();
                if specs.is_empty() {
                    Err((
                        "noSetHierarchy",
                        "the test repository has no sets".to_owned(),
                    ))
                } else {
                    let sets: String = specs
                        .iter()
                        .map(|s| {
                            format!(
                                "    <set><setSpec>{}</setSpec><setName>Set {}</setName></set>\n",
                                esc(s),
                                esc(s)
                            )
                        })
                        .collect();
                    Ok(format!("  <ListSets>\n{sets}  </ListSets>"))
                }
            }
            Some(_) | None => Err((
                "badVerb",
                "the test repository serves only Identify, ListMetadataFormats, ListSets and ListRecords"
                    .to_owned(),
            )),
        };
        match result {
            Ok(xml) => self.envelope(args, &xml),
            Err((code, message)) => self.error_doc(args, code, &message),
        }
    }

    fn identify(&self) -> String {
        let repo = &self.repo;
        let base = repo
            .identify_base_url
            .clone()
            .unwrap_or_else(|| self.base_url.clone());
        let records = self.records();
        let earliest = records
            .iter()
            .map(|r| r.datestamp.as_str())
            .min()
            .unwrap_or("2000-01-01");
        let granularity = match repo.granularity {
            Granularity::Day => "YYYY-MM-DD",
            Granularity::Seconds => "YYYY-MM-DDThh:mm:ssZ",
        };
        format!(
            "  <Identify>\n    <repositoryName>oai-bridge test repository</repositoryName>\n    \
             <baseURL>{}</baseURL>\n    <protocolVersion>2.0</protocolVersion>\n    \
             <adminEmail>admin@repo.example</adminEmail>\n    \
             <earliestDatestamp>{}</earliestDatestamp>\n    \
             <deletedRecord>{}</deletedRecord>\n    \
             <granularity>{granularity}</granularity>\n  </Identify>",
            esc(&base),
            esc(earliest),
            repo.deleted_record
        )
    }

    fn list_records(
        &self,
        state: &mut State,
        args: &[(String, String)],
        mode: &PageMode,
    ) -> OaiResult<(String, Option<String>)> {
        let arg = |key: &str| args.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
        let (list, page) = match arg("resumptionToken") {
            Some(token) => {
                if args.len() != 2 {
                    // OAI-03: the token carries the whole context.
                    return Err((
                        "badArgument",
                        "resumptionToken is an exclusive argument".to_owned(),
                    ));
                }
                *state.tokens.get(token).ok_or_else(|| {
                    (
                        "badResumptionToken",
                        format!("unknown resumptionToken {token:?}"),
                    )
                })?
            }
            None => (self.start_list(state, args)?, 1),
        };
        let ids = state.lists[list].clone();
        let size = self.repo.page_size;
        let pages = ids.len().div_ceil(size).max(1) as u64;
        let start = ((page - 1) as usize * size).min(ids.len());
        let end = (start + size).min(ids.len());
        let (on_page, next) = match mode {
            PageMode::Empty => (&ids[..0], Some(state.issue(list, page))),
            PageMode::Loop(sent) => (
                &ids[start..end],
                Some(sent.clone().unwrap_or_else(|| state.issue(list, page))),
            ),
            PageMode::Normal | PageMode::IllegalChars => (
                &ids[start..end],
                (page < pages).then(|| state.issue(list, page + 1)),
            ),
            PageMode::PrematureEnd => (&ids[start..end], None),
        };
        let mut xml = String::from("  <ListRecords>\n");
        let mut illegal = matches!(mode, PageMode::IllegalChars);
        let records = self.records();
        for &i in on_page {
            let record = &records[i];
            let with_metadata = !record.deleted || !record.dc_identifiers.is_empty();
            xml.push_str(&record_xml(record, illegal && with_metadata));
            illegal &= !with_metadata;
        }
        let (complete, cursor) = match self.repo.claimed_size {
            Some(claimed) => (claimed, 0),
            None => (ids.len() as u64, start),
        };
        let attrs = format!("completeListSize=\"{complete}\" cursor=\"{cursor}\"");
        match &next {
            Some(token) if self.repo.pad_tokens => xml.push_str(&format!(
                "    <resumptionToken {attrs}>\n      {}\n    </resumptionToken>\n",
                esc(token)
            )),
            Some(token) => xml.push_str(&format!(
                "    <resumptionToken {attrs}>{}</resumptionToken>\n",
                esc(token)
            )),
            None if pages > 1 => match self.repo.final_token {
                FinalToken::Empty => xml.push_str(&format!("    <resumptionToken {attrs}/>\n")),
                FinalToken::Whitespace => xml.push_str(&format!(
                    "    <resumptionToken {attrs}>\n      \n    </resumptionToken>\n"
                )),
                FinalToken::Missing => {}
            },
            None => {}
        }
        xml.push_str("  </ListRecords>");
        Ok((xml, next))
    }

    /// Checks the arguments of a first `ListRecords` request and snapshots the matching records
    /// as a new list.
    fn start_list(&self, state: &mut State, args: &[(String, String)]) -> OaiResult<usize> {
        let arg = |key: &str| args.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
        if let Some((k, _)) = args.iter().find(|(k, _)| {
            !matches!(
                k.as_str(),
                "verb" | "metadataPrefix" | "set" | "from" | "until"
            )
        }) {
            return Err(("badArgument", format!("illegal argument {k:?}")));
        }
        match arg("metadataPrefix") {
            None => return Err(("badArgument", "metadataPrefix is required".to_owned())),
            Some("oai_dc") => {}
            Some(other) => {
                return Err((
                    "cannotDisseminateFormat",
                    format!("metadataPrefix {other:?} is not supported"),
                ));
            }
        }
        let from = arg("from").map(|v| self.bound(v, false)).transpose()?;
        let until = arg("until").map(|v| self.bound(v, true)).transpose()?;
        if let (Some((f, f_day)), Some((u, u_day))) = (from, until) {
            if f_day != u_day {
                return Err((
                    "badArgument",
                    "from and until have different granularities".to_owned(),
                ));
            }
            if f > u {
                return Err(("badArgument", "from is after until".to_owned()));
            }
        }
        let set = arg("set");
        let records = self.records();
        if set.is_some() && records.iter().all(|r| r.sets.is_empty()) {
            return Err((
                "noSetHierarchy",
                "this repository does not support sets".to_owned(),
            ));
        }
        let matching: Vec<usize> = (0..records.len())
            .filter(|&i| {
                let r = &records[i];
                let in_set = set.is_none_or(|s| {
                    r.sets
                        .iter()
                        .any(|spec| spec == s || spec.starts_with(&format!("{s}:")))
                });
                let at = date_key(&r.datestamp, false).map(|(k, _)| k);
                in_set
                    && from.is_none_or(|(f, _)| at.is_some_and(|a| a >= f))
                    && until.is_none_or(|(u, _)| at.is_some_and(|a| a <= u))
            })
            .collect();
        if matching.is_empty() {
            return Err((
                "noRecordsMatch",
                "The combination of the values of the from, until, set and metadataPrefix \
                 arguments results in an empty list."
                    .to_owned(),
            ));
        }
        state.lists.push(matching);
        Ok(state.lists.len() - 1)
    }

    /// A `from`/`until` value as a comparable key and whether it was a day, or `badArgument`
    /// when it is malformed or finer than the repository's granularity (OAI-17).
    fn bound(&self, value: &str, end: bool) -> OaiResult<((u32, u32, u32, u32), bool)> {
        let (key, day) = date_key(value, end)
            .ok_or_else(|| ("badArgument", format!("{value:?} is not a UTC datestamp")))?;
        if !day && self.repo.granularity == Granularity::Day {
            return Err((
                "badArgument",
                format!("{value:?} is finer than the repository's granularity YYYY-MM-DD"),
            ));
        }
        Ok((key, day))
    }

    fn envelope(&self, args: &[(String, String)], inner: &str) -> String {
        let attrs: String = args
            .iter()
            .map(|(k, v)| format!(" {}=\"{}\"", esc(k), esc(v)))
            .collect();
        self.document(&attrs, inner)
    }

    fn error_doc(&self, args: &[(String, String)], code: &str, message: &str) -> String {
        let inner = format!("  <error code=\"{}\">{}</error>", esc(code), esc(message));
        if matches!(code, "badVerb" | "badArgument") {
            // OAI-11: no attributes on the request element for these two.
            self.document("", &inner)
        } else {
            self.envelope(args, &inner)
        }
    }

    fn document(&self, request_attrs: &str, inner: &str) -> String {
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <OAI-PMH xmlns=\"http://www.openarchives.org/OAI/2.0/\" \
             xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" \
             xsi:schemaLocation=\"http://www.openarchives.org/OAI/2.0/ http://www.openarchives.org/OAI/2.0/OAI-PMH.xsd\">\n  \
             <responseDate>{}</responseDate>\n  <request{request_attrs}>{}</request>\n{inner}\n</OAI-PMH>\n",
            esc(&self.response_date.read().unwrap_or_else(|e| e.into_inner())),
            esc(&self.base_url),
        )
    }
}

fn record_xml(record: &TestRecord, illegal_chars: bool) -> String {
    let status = if record.deleted {
        " status=\"deleted\""
    } else {
        ""
    };
    let mut xml = format!(
        "    <record>\n      <header{status}>\n        <identifier>{}</identifier>\n        \
         <datestamp>{}</datestamp>\n",
        esc(&record.identifier),
        esc(&record.datestamp)
    );
    for set in &record.sets {
        xml.push_str(&format!("        <setSpec>{}</setSpec>\n", esc(set)));
    }
    xml.push_str("      </header>\n");
    if record.empty_metadata {
        xml.push_str("      <metadata/>\n");
    } else if !record.deleted || !record.dc_identifiers.is_empty() {
        let mut title = esc(&record.title);
        if illegal_chars {
            // Two illegal characters (raw U+001A, a reference to U+FFFE) between legal ones that
            // must survive: raw TAB, LF, CR and a reference to TAB.
            title.push_str(" \u{1A}sub\ttab\nlf\rcr&#x9;ref&#xFFFE;end");
        }
        xml.push_str(
            "      <metadata>\n        <oai_dc:dc xmlns:oai_dc=\"http://www.openarchives.org/OAI/2.0/oai_dc/\" \
             xmlns:dc=\"http://purl.org/dc/elements/1.1/\">\n",
        );
        xml.push_str(&format!("          <dc:title>{title}</dc:title>\n"));
        for id in &record.dc_identifiers {
            xml.push_str(&format!(
                "          <dc:identifier>{}</dc:identifier>\n",
                esc(id)
            ));
        }
        for relation in &record.relations {
            xml.push_str(&format!(
                "          <dc:relation>{}</dc:relation>\n",
                esc(relation)
            ));
        }
        for kind in &record.types {
            xml.push_str(&format!("          <dc:type>{}</dc:type>\n", esc(kind)));
        }
        xml.push_str("        </oai_dc:dc>\n      </metadata>\n");
    }
    xml.push_str("    </record>\n");
    xml
}

/// Whether `path` is the OAI-PMH endpoint (or its mirror).
fn is_oai_path(path: &str) -> bool {
    path == PATH || path == MIRROR_PATH || path == EPRINTS_PATH
}

/// The elements of the OAI-PMH namespace the server writes.
const OAI_ELEMENTS: [&str; 28] = [
    "OAI-PMH",
    "responseDate",
    "request",
    "error",
    "Identify",
    "repositoryName",
    "baseURL",
    "protocolVersion",
    "adminEmail",
    "earliestDatestamp",
    "deletedRecord",
    "granularity",
    "ListRecords",
    "record",
    "header",
    "identifier",
    "datestamp",
    "setSpec",
    "metadata",
    "resumptionToken",
    "ListMetadataFormats",
    "metadataFormat",
    "metadataPrefix",
    "schema",
    "metadataNamespace",
    "ListSets",
    "set",
    "setName",
];

/// `doc` with the OAI-PMH namespace bound to the prefix `oai` instead of the default namespace,
/// and every element of it so prefixed (`<oai:ListRecords>`, as OpenAIRE and pycsw write).
fn prefixed(doc: &str) -> String {
    let mut text = doc.replace(
        "<OAI-PMH xmlns=\"http://www.openarchives.org/OAI/2.0/\"",
        "<OAI-PMH xmlns:oai=\"http://www.openarchives.org/OAI/2.0/\"",
    );
    for name in OAI_ELEMENTS {
        for (open, end) in [("<", ">"), ("<", " "), ("<", "/"), ("</", ">")] {
            text = text.replace(
                &format!("{open}{name}{end}"),
                &format!("{open}oai:{name}{end}"),
            );
        }
    }
    text
}

/// `body` compressed as `compression` says.
fn compress(body: &[u8], compression: Compression) -> Vec<u8> {
    use std::io::Write;
    let level = flate2::Compression::default();
    match compression {
        Compression::Gzip | Compression::UnlabelledGzip => {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), level);
            gz.write_all(body).expect("in memory");
            gz.finish().expect("in memory")
        }
        Compression::Zlib => {
            let mut z = flate2::write::ZlibEncoder::new(Vec::new(), level);
            z.write_all(body).expect("in memory");
            z.finish().expect("in memory")
        }
        Compression::RawDeflate => {
            let mut d = flate2::write::DeflateEncoder::new(Vec::new(), level);
            d.write_all(body).expect("in memory");
            d.finish().expect("in memory")
        }
    }
}

fn flow_control(status: u16, retry_after: &RetryAfter) -> Reply {
    let mut reply = Reply::new(status, "text/plain", reason(status));
    let value = match retry_after {
        RetryAfter::Seconds(secs) => Some(secs.to_string()),
        RetryAfter::Date(ahead) => {
            let at = SystemTime::now() + *ahead;
            // Round up to a whole second, so the date is never earlier than `ahead` from now.
            let since = at
                .duration_since(SystemTime::UNIX_EPOCH)
                .expect("after 1970");
            let whole = Duration::from_secs(since.as_secs() + u64::from(since.subsec_nanos() > 0));
            Some(httpdate::fmt_http_date(SystemTime::UNIX_EPOCH + whole))
        }
        RetryAfter::Raw(text) => Some(text.clone()),
        RetryAfter::Missing => None,
    };
    if let Some(value) = value {
        reply.headers.push(("Retry-After", value));
    }
    reply
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        414 => "URI Too Long",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Unknown",
    }
}

/// XML-escapes text and attribute values.
fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Decodes a query as a typical OAI-PMH server does: `+` is a space, then percent-decoding.
/// A client that sends a `+` unencoded, or encodes twice, gets a different token back.
fn decode_query(query: &str) -> Vec<(String, String)> {
    let decode = |s: &str| {
        percent_decode_str(&s.replace('+', " "))
            .decode_utf8_lossy()
            .into_owned()
    };
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// `YYYY-MM-DD` or `YYYY-MM-DDThh:mm:ssZ` as `((year, month, day, second of day), is_day)`. A day
/// counts from its first second, or up to its last when `end` (inclusive `until`, OAI-17).
fn date_key(text: &str, end: bool) -> Option<((u32, u32, u32, u32), bool)> {
    let num = |s: &str| -> Option<u32> {
        s.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    let b = text.trim();
    let (date, time) = match b.len() {
        10 => (b, None),
        20 if &b[10..11] == "T" && b.ends_with('Z') => (&b[..10], Some(&b[11..19])),
        _ => return None,
    };
    if &date[4..5] != "-" || &date[7..8] != "-" {
        return None;
    }
    let (y, m, d) = (num(&date[..4])?, num(&date[5..7])?, num(&date[8..10])?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let secs = match time {
        None if end => 86_399,
        None => 0,
        Some(t) => {
            if &t[2..3] != ":" || &t[5..6] != ":" {
                return None;
            }
            let (h, mi, s) = (num(&t[..2])?, num(&t[3..5])?, num(&t[6..8])?);
            if h > 23 || mi > 59 || s > 60 {
                return None;
            }
            h * 3600 + mi * 60 + s
        }
    };
    Some(((y, m, d, secs), time.is_none()))
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    // Connections live in this set: aborting this task (when the server is dropped) drops the
    // set, which aborts them all.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    let _ = stream.set_nodelay(true);
                    connections.spawn(serve_connection(stream, Arc::clone(&shared)));
                }
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Serves requests on one connection until either side closes it or a fault ends it.
async fn serve_connection(mut stream: TcpStream, shared: Arc<Shared>) {
    let mut buf = Vec::new();
    loop {
        let Some(head_len) = read_head(&mut stream, &mut buf).await else {
            return;
        };
        let (at, wall) = (Instant::now(), SystemTime::now());
        let head = String::from_utf8_lossy(&buf[..head_len]).into_owned();
        buf.drain(..head_len + 4);
        let Some((mut request, body_len)) = parse_head(&head) else {
            let _ = write_reply(
                &mut stream,
                &Reply::new(400, "text/plain", "Bad Request"),
                false,
            )
            .await;
            return;
        };
        while buf.len() < body_len {
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body: Vec<u8> = buf.drain(..body_len).collect();
        if request.method == "POST" {
            request.query = String::from_utf8_lossy(&body).into_owned();
        } else if request.method != "GET" {
            let reply = Reply::new(405, "text/plain", "Method Not Allowed");
            if write_reply(&mut stream, &reply, !request.close)
                .await
                .is_err()
                || request.close
            {
                return;
            }
            continue;
        }
        let reply = shared.answer(&request, at, wall);
        if !reply.delay.is_zero() {
            tokio::time::sleep(reply.delay).await;
        }
        let keep_alive = !request.close && matches!(reply.delivery, Delivery::Whole);
        if write_reply(&mut stream, &reply, keep_alive).await.is_err() || !keep_alive {
            let _ = stream.shutdown().await;
            return;
        }
    }
}

/// Reads until `buf` holds a complete request head; returns its length without the blank line.
async fn read_head(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<usize> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            return Some(end);
        }
        if buf.len() > MAX_HEAD {
            return None;
        }
        let mut chunk = [0u8; 4096];
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// The request line and the headers that matter; the body length.
fn parse_head(head: &str) -> Option<(Request, usize)> {
    let mut lines = head.split("\r\n");
    let mut parts = lines.next()?.split(' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    if !version.starts_with("HTTP/1.") {
        return None;
    }
    let mut user_agent = None;
    let (mut accept, mut accept_encoding) = (None, None);
    let mut close = version == "HTTP/1.0";
    let mut body_len = 0;
    for line in lines {
        let (name, value) = line.split_once(':')?;
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "user-agent" => user_agent = Some(value.to_owned()),
            "accept" => accept = Some(value.to_owned()),
            "accept-encoding" => accept_encoding = Some(value.to_owned()),
            "connection" => close = value.eq_ignore_ascii_case("close"),
            "content-length" => body_len = value.parse().ok()?,
            _ => {}
        }
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    Some((
        Request {
            method: method.to_owned(),
            target: target.to_owned(),
            path: path.to_owned(),
            query: query.to_owned(),
            user_agent,
            accept,
            accept_encoding,
            close,
        },
        body_len,
    ))
}

async fn write_reply(
    stream: &mut TcpStream,
    reply: &Reply,
    keep_alive: bool,
) -> std::io::Result<()> {
    if matches!(reply.delivery, Delivery::Drop) {
        return Ok(());
    }
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\n",
        reply.status,
        reason(reply.status),
        reply.content_type
    );
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Delivery::Drip(pause) = reply.delivery {
        head.push_str(&format!(
            "Content-Length: {}\r\nConnection: close\r\n\r\n",
            reply.body.len()
        ));
        stream.write_all(head.as_bytes()).await?;
        for b in &reply.body {
            stream.write_all(std::slice::from_ref(b)).await?;
            stream.flush().await?;
            tokio::time::sleep(pause).await;
        }
        return Ok(());
    }
    if let Delivery::Stall = reply.delivery {
        head.push_str(&format!(
            "Content-Length: {}\r\nConnection: close\r\n\r\n",
            reply.body.len()
        ));
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(&reply.body[..reply.body.len() / 2]);
        stream.write_all(&bytes).await?;
        stream.flush().await?;
        // Until the client hangs up (a read of nothing), or sends anything at all.
        let mut byte = [0u8; 1];
        let _ = stream.read(&mut byte).await;
        return Ok(());
    }
    if let Delivery::Endless = reply.delivery {
        head.push_str("Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
        stream.write_all(head.as_bytes()).await?;
        let first = format!("{:x}\r\n", reply.body.len());
        stream.write_all(first.as_bytes()).await?;
        stream.write_all(&reply.body).await?;
        stream.write_all(b"\r\n").await?;
        let chunk = vec![b' '; 64 * 1024];
        let frame = format!("{:x}\r\n", chunk.len());
        // Until the client hangs up.
        loop {
            stream.write_all(frame.as_bytes()).await?;
            stream.write_all(&chunk).await?;
            stream.write_all(b"\r\n").await?;
        }
    }
    let body: &[u8] = match reply.delivery {
        Delivery::Drip(_) | Delivery::Endless | Delivery::Stall => unreachable!("written above"),
        Delivery::Whole => {
            head.push_str(&format!(
                "Content-Length: {}\r\nConnection: {}\r\n",
                reply.body.len(),
                if keep_alive { "keep-alive" } else { "close" }
            ));
            &reply.body
        }
        Delivery::Truncated => {
            head.push_str(&format!(
                "Content-Length: {}\r\nConnection: close\r\n",
                reply.body.len()
            ));
            &reply.body[..reply.body.len() * 7 / 10]
        }
        Delivery::CloseDelimited => {
            head.push_str("Connection: close\r\n");
            &reply.body
        }
        Delivery::Drop => &[],
    };
    head.push_str("\r\n");
    // One write: head and body in separate small segments would wait on delayed ACKs.
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    stream.write_all(&bytes).await?;
    stream.flush().await
}
