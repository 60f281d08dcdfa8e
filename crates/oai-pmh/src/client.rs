//! The only reqwest user: one request with timeouts, retries as its [`RetryPolicy`] decides
//! (backoff with jitter, `Retry-After` in both forms), POST when a GET is refused as too long,
//! gzip and deflate (zlib-wrapped or raw, labelled or not) decoded, and a cap on the decompressed
//! body size. It re-sends exactly the same request, which OAI-PMH makes safe (OAI-25).

use std::io::Read;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use flate2::read::{DeflateDecoder, MultiGzDecoder, ZlibDecoder};
use reqwest::StatusCode;
use reqwest::header::{
    ACCEPT, ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_TYPE, HeaderMap, HeaderValue, RETRY_AFTER,
};

use super::politeness::Politeness;
use super::retry::{Failure, Retries, RetryPolicy, Wait};
use super::{HarvestErrorKind, HarvestSettings, OaiRequest};

/// Counters of what the client did, for summaries and metrics.
#[derive(Debug, Default)]
pub struct ClientStats {
    /// Requests sent, retries included.
    pub requests: AtomicU64,
    /// Attempts that were retried.
    pub retries: AtomicU64,
    /// Waits imposed by a `Retry-After` header.
    pub retry_after_waits: AtomicU64,
    /// Bytes received, after decompression.
    pub bytes: AtomicU64,
    /// Bodies that were gzip without a `Content-Encoding` saying so, decoded by their magic
    /// bytes (OAI-35).
    pub unlabelled_gzip: AtomicU64,
    /// The latest time (seconds since the Unix epoch) a `Retry-After` asked the client to wait
    /// until, uncapped; 0 when none did. A caller harvesting on a schedule waits until then.
    pub retry_not_before: AtomicU64,
    /// Responses by HTTP status code (requests without one: `requests` less their sum).
    statuses: std::sync::Mutex<std::collections::BTreeMap<u16, u64>>,
}

impl ClientStats {
    /// When the upstream last asked to be left alone until, if that is still ahead.
    pub fn retry_not_before(&self) -> Option<SystemTime> {
        let secs = self.retry_not_before.load(Ordering::Relaxed);
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
        (secs > 0 && at > SystemTime::now()).then_some(at)
    }

    /// Responses received so far, by HTTP status code, in the order of the codes.
    pub fn statuses(&self) -> Vec<(u16, u64)> {
        let statuses = self.statuses.lock().unwrap_or_else(|e| e.into_inner());
        statuses.iter().map(|(&code, &n)| (code, n)).collect()
    }

    fn responded(&self, status: StatusCode) {
        let mut statuses = self.statuses.lock().unwrap_or_else(|e| e.into_inner());
        *statuses.entry(status.as_u16()).or_default() += 1;
    }
}

/// A reusable body buffer; its bytes are not worth printing.
#[derive(Default)]
struct Spare(std::sync::Mutex<Vec<u8>>);

impl std::fmt::Debug for Spare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Spare")
    }
}

/// An HTTP client for one upstream.
#[derive(Debug)]
pub struct Client {
    http: reqwest::Client,
    /// The same, following no redirect, for POSTs ([`Client::post`] follows them).
    http_post: reqwest::Client,
    settings: HarvestSettings,
    /// How requests are retried, from `settings`.
    retry: RetryPolicy,
    /// The body buffer of the last page, kept for the next: a page is about the same size as
    /// the one before, and allocating it afresh makes the kernel fault its pages in again (a
    /// tenth of a harvest's CPU on some machines).
    spare: Spare,
    /// Requests whose GET URL is at least this long go as POST: the shortest one the upstream
    /// refused with 414 URI Too Long (OAI-06). `usize::MAX` until one is; shorter requests stay
    /// GETs, which proxies log and cache.
    post_from: AtomicUsize,
    /// Spaces requests to one host by the politeness delay: this client's own, or one shared
    /// with other clients ([`Client::with_politeness`]).
    politeness: std::sync::Arc<Politeness>,
    /// What this client has done so far.
    pub stats: ClientStats,
}

/// Why one attempt failed, and whether another may succeed.
enum Attempt {
    /// Try again after the backoff delay, or after `wait` when the server said so.
    Retry {
        wait: Option<Duration>,
        cause: HarvestErrorKind,
    },
    /// Give up now.
    Fail(HarvestErrorKind),
}

impl Attempt {
    /// An attempt that failed with `failure`, retried as the policy judges it; `wait` is the
    /// upstream's `Retry-After`, if it said one.
    fn failed(failure: Failure<'_>, wait: Option<Duration>, cause: HarvestErrorKind) -> Self {
        Self::judged(RetryPolicy::retryable(&failure), wait, cause)
    }

    /// An attempt that failed, retried or not as `retry` says.
    fn judged(retry: bool, wait: Option<Duration>, cause: HarvestErrorKind) -> Self {
        if retry {
            Self::Retry { wait, cause }
        } else {
            Self::Fail(cause)
        }
    }
}

impl Client {
    /// Builds a client: rustls, the configured timeouts and `User-Agent`. reqwest decodes gzip
    /// that says so; the client itself the rest: deflate, which reqwest takes zlib-wrapped only,
    /// and gzip without a `Content-Encoding`.
    ///
    /// # Errors
    ///
    /// reqwest's error when its client cannot be built (the TLS backend does not start); no
    /// request is sent.
    pub fn new(settings: HarvestSettings) -> Result<Self, reqwest::Error> {
        Self::with_politeness(settings, std::sync::Arc::default())
    }

    /// A client whose politeness delay is counted with `politeness`'s other clients: clients
    /// for many repositories share one, so that requests to one host are spaced whichever
    /// repository sends them.
    ///
    /// # Errors
    ///
    /// As [`Client::new`].
    pub fn with_politeness(
        settings: HarvestSettings,
        politeness: std::sync::Arc<Politeness>,
    ) -> Result<Self, reqwest::Error> {
        let builder = || {
            reqwest::Client::builder()
                .user_agent(settings.user_agent.clone())
                .connect_timeout(settings.connect_timeout)
                .timeout(settings.request_timeout)
                .gzip(true)
        };
        let http = builder()
            .redirect(reqwest::redirect::Policy::custom(same_host_redirects))
            .build()?;
        let http_post = builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Self {
            http,
            http_post,
            retry: RetryPolicy::of(&settings),
            settings,
            spare: Spare::default(),
            post_from: AtomicUsize::new(usize::MAX),
            politeness,
            stats: ClientStats::default(),
        })
    }

    /// The settings this client was built with.
    pub fn settings(&self) -> &HarvestSettings {
        &self.settings
    }

    /// How this client's requests, and the lists harvested with it, are retried.
    pub(crate) fn retry(&self) -> &RetryPolicy {
        &self.retry
    }

    /// Sends `request` and reads the body with `read`, retrying what the [`RetryPolicy`] finds
    /// transient (network errors, 5xx, 429, cut or garbled bodies) as often and after the waits
    /// it says, never past `deadline`.
    ///
    /// It goes as a GET, unless the upstream refused a GET at least as long with 414 URI Too
    /// Long: then as a POST of the same arguments, as every repository must take (OAI-06). A
    /// GET refused so is sent again at once as a POST, without counting as a failed attempt.
    ///
    /// # Errors
    ///
    /// [`HarvestErrorKind::Request`] or [`HarvestErrorKind::Status`] when the last attempt had no
    /// usable answer, `read`'s error (with the attempts made) when the body still cannot be
    /// read after the retries, [`HarvestErrorKind::TooLarge`] for a body over the cap,
    /// [`HarvestErrorKind::TooSlow`] for one that drips, and [`HarvestErrorKind::Deadline`]
    /// when `deadline` passes.
    pub async fn fetch<T>(
        &self,
        request: &OaiRequest,
        deadline: Option<Instant>,
        read: impl Fn(&[u8]) -> Result<T, HarvestErrorKind>,
    ) -> Result<T, HarvestErrorKind> {
        let url = request.url();
        let mut retries = self.retry.retries();
        loop {
            let attempt = retries.attempt();
            self.stats.requests.fetch_add(1, Ordering::Relaxed);
            let post = url.len() >= self.post_from.load(Ordering::Relaxed);
            let send = if post {
                self.attempt(request.base(), Some(request.form()), true)
            } else {
                self.attempt(url, None, true)
            };
            let outcome = match self.within_deadline(deadline, send).await? {
                Ok((StatusCode::URI_TOO_LONG, body)) if !post => {
                    self.post_from_now_on(url, body);
                    continue;
                }
                // Some servers send OAI errors with a 4xx/5xx status (OAI-32): the body decides.
                Ok((status, body)) => match read(&body) {
                    Ok(value) => {
                        self.recycle(body);
                        return Ok(value);
                    }
                    Err(e) if status.is_success() => {
                        let retry = RetryPolicy::retryable(&Failure::Parse(&e));
                        Attempt::judged(retry, None, e.fetched(attempt))
                    }
                    // A 4xx/5xx whose body is no OAI-PMH answer: the status is the news.
                    Err(_) => {
                        Attempt::failed(Failure::Status(status), None, status_kind(status, attempt))
                    }
                },
                Err(outcome) => outcome,
            };
            let (wait, cause) = match outcome {
                Attempt::Fail(kind) => return Err(kind),
                Attempt::Retry { wait, cause } => (wait, cause),
            };
            self.wait_to_retry(&mut retries, wait, cause, url, deadline)
                .await?;
        }
    }

    /// The output of `send`, unless `deadline` passes first.
    async fn within_deadline<F: std::future::Future>(
        &self,
        deadline: Option<Instant>,
        send: F,
    ) -> Result<F::Output, HarvestErrorKind> {
        match deadline {
            Some(at) => match tokio::time::timeout_at(at.into(), send).await {
                Ok(result) => Ok(result),
                Err(_) => Err(self.deadline_passed()),
            },
            None => Ok(send.await),
        }
    }

    /// The error of a harvest that ran past its deadline.
    fn deadline_passed(&self) -> HarvestErrorKind {
        HarvestErrorKind::Deadline {
            limit: self.settings.deadline.unwrap_or_default(),
        }
    }

    /// Sends requests as long as `url` (answered 414 URI Too Long with `body`) as POSTs.
    fn post_from_now_on(&self, url: &str, body: Vec<u8>) {
        // A proxy's or server's limit on the URL, which a long resumption token passes: not a
        // failure, and no reason to wait but the politeness delay (the next attempt's turn).
        self.recycle(body);
        self.post_from.fetch_min(url.len(), Ordering::Relaxed);
        tracing::warn!(
            url,
            length = url.len(),
            "414 URI Too Long: sending the same arguments as POST (OAI-06)"
        );
    }

    /// Waits as `retries` says (after the upstream's `wait`, if any); `Err` if no attempt is left.
    async fn wait_to_retry(
        &self,
        retries: &mut Retries<'_>,
        wait: Option<Duration>,
        cause: HarvestErrorKind,
        url: &str,
        deadline: Option<Instant>,
    ) -> Result<(), HarvestErrorKind> {
        let attempt = retries.attempt();
        if let Some(wait) = wait {
            // Remembered uncapped, also when no attempt is left: the next harvest waits.
            let until = SystemTime::now() + wait;
            let secs = until
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() + u64::from(d.subsec_nanos() > 0));
            self.stats
                .retry_not_before
                .fetch_max(secs, Ordering::Relaxed);
        }
        let Some(delay) = retries.next(wait, fastrand::f64()) else {
            return Err(with_attempts(cause, attempt));
        };
        let told = matches!(delay, Wait::RetryAfter(_));
        if told {
            self.stats.retry_after_waits.fetch_add(1, Ordering::Relaxed);
        }
        let delay = delay.duration();
        if let Some(deadline) = deadline
            && Instant::now() + delay > deadline
        {
            return Err(self.deadline_passed());
        }
        let warning = retry_warning(attempt, self.retry.max_attempts, &cause, delay, told);
        tracing::warn!(url, attempt, delay = ?delay, "{warning}");
        self.stats.retries.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(delay).await;
        Ok(())
    }

    /// One GET of a small resource that is not OAI-PMH (a host's robots.txt): its status and
    /// body, within the same timeouts and body cap; no retries.
    ///
    /// # Errors
    ///
    /// [`HarvestErrorKind::Request`] when no response came, [`HarvestErrorKind::Status`] for
    /// 429 or 503 (flow control), [`HarvestErrorKind::TooLarge`] for a body over the cap and
    /// [`HarvestErrorKind::TooSlow`] for one that drips; any other status is an answer.
    pub async fn get_once(&self, url: &str) -> Result<(u16, Vec<u8>), HarvestErrorKind> {
        self.stats.requests.fetch_add(1, Ordering::Relaxed);
        match self.attempt(url, None, false).await {
            Ok((status, body)) => Ok((status.as_u16(), body)),
            Err(Attempt::Retry { cause, .. } | Attempt::Fail(cause)) => Err(cause),
        }
    }

    /// One request: a GET of `url`, or with a `form`, a POST of it to `url`, its turn taken
    /// after the politeness delay of `url`'s host; an `oai` request (to the upstream) carries
    /// the extra headers. The status and the whole decoded body when it is worth reading, or
    /// why not.
    async fn attempt(
        &self,
        url: &str,
        form: Option<&str>,
        oai: bool,
    ) -> Result<(StatusCode, Vec<u8>), Attempt> {
        // Held until the body is read: the next request to the host counts from its end.
        let _turn = self
            .politeness
            .turn(url, self.settings.politeness_delay)
            .await;
        let extra =
            (oai && !self.settings.headers.is_empty()).then(|| self.settings.headers.to_map());
        let response = match form {
            None => {
                let get = self.http.get(url);
                send(match extra {
                    Some(headers) => get.headers(headers),
                    None => get,
                })
                .await?
            }
            Some(form) => self.post(url, form, extra).await?,
        };
        let status = response.status();
        self.stats.responded(status);
        if RetryPolicy::is_flow_control(status) {
            // Flow control (OAI-33): wait as told, whatever the body says.
            let wait = retry_after(response.headers(), SystemTime::now());
            return Err(Attempt::failed(
                Failure::FlowControl,
                wait,
                HarvestErrorKind::Status {
                    status: status.as_u16(),
                    attempts: 1,
                },
            ));
        }
        // reqwest has taken off a `gzip` it decoded; what is left is for `decode`.
        let label = response.headers().get(CONTENT_ENCODING).cloned();
        let body = self.read_body(response).await?;
        let body = self.decoded(body, label.as_ref())?;
        self.stats
            .bytes
            .fetch_add(body.len() as u64, Ordering::Relaxed);
        Ok((status, body))
    }

    /// The body of `response`, read into the spare buffer: refused past `max_body_bytes` (by
    /// its announced length before a byte is read) and when it arrives slower than the minimum
    /// transfer rate; a body cut off is a failed attempt.
    async fn read_body(&self, mut response: reqwest::Response) -> Result<Vec<u8>, Attempt> {
        let limit = self.settings.max_body_bytes;
        if response.content_length().is_some_and(|len| len > limit) {
            return Err(too_large(limit));
        }
        let mut body = std::mem::take(&mut *self.spare.0.lock().unwrap_or_else(|e| e.into_inner()));
        body.clear();
        body.reserve(response.content_length().unwrap_or(64 * 1024).min(limit) as usize);
        let mut pace = Pace::new(
            self.settings.min_transfer_bytes_per_sec,
            self.settings.min_transfer_window,
        );
        let too_slow = |slow: Slow, received: usize| {
            Attempt::failed(
                Failure::TooSlow,
                None,
                HarvestErrorKind::TooSlow {
                    observed: slow.observed,
                    window: self.settings.min_transfer_window,
                    received: received as u64,
                    min: self.settings.min_transfer_bytes_per_sec,
                },
            )
        };
        loop {
            // A window that ends before the next chunk is judged then, so a body that stops
            // altogether fails at the end of its window, not at the request timeout.
            let next = match pace.window_end() {
                None => response.chunk().await,
                Some(end) => match tokio::time::timeout_at(end.into(), response.chunk()).await {
                    Ok(next) => next,
                    Err(_) => {
                        pace.window_over(Instant::now())
                            .map_err(|slow| too_slow(slow, body.len()))?;
                        continue;
                    }
                },
            };
            match next {
                Ok(Some(chunk)) => {
                    if body.len() as u64 + chunk.len() as u64 > limit {
                        return Err(too_large(limit));
                    }
                    body.extend_from_slice(&chunk);
                    pace.arrived(chunk.len(), Instant::now())
                        .map_err(|slow| too_slow(slow, body.len()))?;
                }
                Ok(None) => return Ok(body),
                Err(e) => {
                    return Err(Attempt::failed(Failure::BodyCut, None, request_kind(&e, 1)));
                }
            }
        }
    }

    /// `body` decoded when its `Content-Encoding` (`label`) or its first bytes say it is
    /// compressed ([`Coding::of`]), within `max_body_bytes`; as it is otherwise.
    fn decoded(&self, body: Vec<u8>, label: Option<&HeaderValue>) -> Result<Vec<u8>, Attempt> {
        let Some(coding) = Coding::of(label, &body) else {
            return Ok(body);
        };
        let limit = self.settings.max_body_bytes;
        let decoded = decode(&body, coding, limit).map_err(|e| match e {
            DecodeError::TooLarge => too_large(limit),
            // Most likely cut or garbled on the way, as reqwest's own decoding errors are.
            DecodeError::Corrupt(e) => Attempt::failed(
                Failure::Corrupt,
                None,
                HarvestErrorKind::Request {
                    attempts: 1,
                    message: format!("cannot decode the {} body: {e}", coding.name()),
                },
            ),
        })?;
        self.recycle(body);
        if coding == (Coding::Gzip { labelled: false }) {
            self.stats.unlabelled_gzip.fetch_add(1, Ordering::Relaxed);
        }
        Ok(decoded)
    }

    /// Keeps `body`'s allocation for the next page (bounded: one buffer, at most 64 MiB).
    fn recycle(&self, body: Vec<u8>) {
        if body.capacity() <= 64 * 1024 * 1024 {
            *self.spare.0.lock().unwrap_or_else(|e| e.into_inner()) = body;
        }
    }
}

/// The attempt of a body larger than `limit` (`max_body_bytes`): not retried.
fn too_large(limit: u64) -> Attempt {
    Attempt::failed(
        Failure::TooLarge,
        None,
        HarvestErrorKind::TooLarge { limit },
    )
}

/// The slowest a body may arrive ([`HarvestSettings::min_transfer_bytes_per_sec`]): on
/// average at least `min` bytes a second over each `window`, the first starting at the first
/// byte of the body. The wait for that byte is the server's thinking time, which the request
/// timeout bounds; a body that ends before a window does is never judged, however slow.
/// Bytes are counted as reqwest hands them over (a labelled gzip body inflated).
#[derive(Debug)]
struct Pace {
    /// Bytes a second; 0 for no minimum.
    min: u64,
    window: Duration,
    /// When the window under way started: `None` before the first byte.
    start: Option<Instant>,
    /// Bytes received in the window under way.
    bytes: u64,
}

/// A window over which a body came slower than the minimum.
#[derive(Debug, PartialEq, Eq)]
struct Slow {
    /// Bytes a second over it, rounded down.
    observed: u64,
}

impl Pace {
    fn new(min: u64, window: Duration) -> Self {
        Self {
            min: if window.is_zero() { 0 } else { min },
            window,
            start: None,
            bytes: 0,
        }
    }

    /// When the window under way ends, to be judged then if no byte comes before: `None`
    /// before the first byte, with no minimum, or with a window past any clock.
    fn window_end(&self) -> Option<Instant> {
        self.start
            .filter(|_| self.min > 0)
            .and_then(|start| start.checked_add(self.window))
    }

    /// `n` bytes arrived at `now`; `Err` when they close a window that was too slow, them
    /// included.
    fn arrived(&mut self, n: usize, now: Instant) -> Result<(), Slow> {
        if self.min == 0 {
            return Ok(());
        }
        self.bytes = self.bytes.saturating_add(n as u64);
        match self.start {
            None => self.start = Some(now),
            Some(start) if now.duration_since(start) >= self.window => self.window_over(now)?,
            Some(_) => {}
        }
        Ok(())
    }

    /// The window under way ended at `now` (at or past its end): `Err` when it was too slow,
    /// else the next window starts.
    fn window_over(&mut self, now: Instant) -> Result<(), Slow> {
        let Some(start) = self.start else {
            return Ok(());
        };
        let elapsed = now.duration_since(start).max(self.window).as_millis();
        if u128::from(self.bytes) * 1000 < u128::from(self.min) * elapsed {
            let observed = u128::from(self.bytes) * 1000 / elapsed.max(1);
            return Err(Slow {
                observed: u64::try_from(observed).unwrap_or(u64::MAX),
            });
        }
        self.start = Some(now);
        self.bytes = 0;
        Ok(())
    }
}

/// gzip's magic bytes (RFC 1952 §2.3.1).
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// A compression the client undoes itself, after reqwest (which decodes a body labelled `gzip`
/// and takes the label off).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Coding {
    /// gzip (RFC 1952), possibly of several members, as a `.gz` file may be. `labelled` is false
    /// for a body that says nothing and starts with gzip's magic bytes: a static `.xml.gz`, a
    /// misconfigured proxy (OAI-35); else it is a spelling reqwest leaves (`x-gzip`, `GZIP`).
    Gzip {
        /// Whether `Content-Encoding` said so.
        labelled: bool,
    },
    /// `Content-Encoding: deflate`: zlib-wrapped (RFC 1950), as HTTP defines it, or raw
    /// (RFC 1951), as old IIS and some PHP stacks send it (OAI-35).
    Deflate,
}

impl Coding {
    /// The coding of a body labelled `label` (its `Content-Encoding`, if any) that starts with
    /// `head`; `None` when the body is to be read as it is. A coding never asked for (`br`, a
    /// stack of two) is left as it is, to fail as the unreadable body it is.
    fn of(label: Option<&HeaderValue>, head: &[u8]) -> Option<Self> {
        let label = label.map_or(&b""[..], |v| v.as_bytes()).trim_ascii();
        if label.is_empty() || label.eq_ignore_ascii_case(b"identity") {
            head.starts_with(&GZIP_MAGIC)
                .then_some(Self::Gzip { labelled: false })
        } else if label.eq_ignore_ascii_case(b"deflate") {
            Some(Self::Deflate)
        } else if label.eq_ignore_ascii_case(b"gzip") || label.eq_ignore_ascii_case(b"x-gzip") {
            Some(Self::Gzip { labelled: true })
        } else {
            None
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Gzip { .. } => "gzip",
            Self::Deflate => "deflate",
        }
    }
}

/// Why a compressed body could not be decoded.
#[derive(Debug)]
enum DecodeError {
    /// It inflates past the body cap.
    TooLarge,
    /// It is not what its coding says, or cut short.
    Corrupt(std::io::Error),
}

/// `raw` decoded as `coding`, at most `limit` bytes of it: a bomb is stopped at the cap, never
/// inflated further.
fn decode(raw: &[u8], coding: Coding, limit: u64) -> Result<Vec<u8>, DecodeError> {
    match coding {
        Coding::Gzip { .. } => read_capped(MultiGzDecoder::new(raw), raw.len(), limit),
        Coding::Deflate if is_zlib(raw) => read_capped(ZlibDecoder::new(raw), raw.len(), limit),
        Coding::Deflate => read_capped(DeflateDecoder::new(raw), raw.len(), limit),
    }
}

/// Whether `data` starts with a zlib header (RFC 1950 §2.2): compression method 8 (deflate),
/// a window of at most 32 KiB, and a check value that makes the first two bytes, big-endian, a
/// multiple of 31. Raw deflate never starts so from a real encoder: its first block would have
/// to be a stored, non-final one with its padding bits set.
fn is_zlib(data: &[u8]) -> bool {
    match data {
        [cmf, flg, ..] => {
            cmf & 0x0f == 8 && cmf >> 4 <= 7 && u16::from_be_bytes([*cmf, *flg]) % 31 == 0
        }
        _ => false,
    }
}

/// Reads `decoder` to its end, or to one byte past `limit`, which makes it too large.
fn read_capped(decoder: impl Read, raw_len: usize, limit: u64) -> Result<Vec<u8>, DecodeError> {
    let cap = usize::try_from(limit).unwrap_or(usize::MAX);
    // Markup inflates about fivefold; the guess saves most of the regrowth.
    let mut body = Vec::with_capacity(raw_len.saturating_mul(5).min(cap));
    decoder
        .take(limit.saturating_add(1))
        .read_to_end(&mut body)
        .map_err(DecodeError::Corrupt)?;
    if body.len() as u64 > limit {
        return Err(DecodeError::TooLarge);
    }
    Ok(body)
}

/// The warning of attempt `attempt` of `max` (at least one is made) that failed with `cause`
/// and is tried again after `delay`, which the upstream's `Retry-After` set when `told`:
/// `attempt 3 of 5 failed: HTTP status 500; retrying in 8.4 s`. The cause is the attempt's
/// own, not the error's (which counts the attempts when they run out).
fn retry_warning(
    attempt: u32,
    max: u32,
    cause: &HarvestErrorKind,
    delay: Duration,
    told: bool,
) -> String {
    format!(
        "attempt {attempt} of {} failed: {}; retrying in {}{}",
        max.max(1),
        cause.attempt_text(),
        Delay(delay),
        if told { " (as Retry-After asks)" } else { "" }
    )
}

/// A wait as an operator reads it: milliseconds under a second, tenths of a second under ten,
/// whole seconds above.
struct Delay(Duration);

impl std::fmt::Display for Delay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = self.0;
        if d < Duration::from_secs(1) {
            write!(f, "{} ms", d.as_millis())
        } else if d < Duration::from_secs(10) {
            write!(f, "{:.1} s", d.as_secs_f64())
        } else {
            write!(f, "{} s", d.as_secs_f64().round())
        }
    }
}

fn status_kind(status: StatusCode, attempts: u32) -> HarvestErrorKind {
    HarvestErrorKind::Status {
        status: status.as_u16(),
        attempts,
    }
}

/// Sends `request` with the headers every request carries.
async fn send(request: reqwest::RequestBuilder) -> Result<reqwest::Response, Attempt> {
    request
        .header(ACCEPT, "text/xml, application/xml;q=0.9, */*;q=0.5")
        // Set here, not by reqwest, which would offer only the gzip it decodes (OAI-35).
        .header(ACCEPT_ENCODING, "gzip, deflate")
        .send()
        .await
        .map_err(|e| {
            let failure = if e.is_redirect() {
                Failure::Redirect
            } else {
                Failure::Request
            };
            Attempt::failed(failure, None, request_kind(&e, 1))
        })
}

impl Client {
    /// A POST of `form` to `url`, following redirects as a GET is followed (the same host, at
    /// most [`MAX_REDIRECTS`]) but with the POST again: reqwest turns a POST redirected by 301,
    /// 302 or 303 into a GET without its arguments, which an OAI-PMH server answers `badVerb`.
    async fn post(
        &self,
        url: &str,
        form: &str,
        extra: Option<HeaderMap>,
    ) -> Result<reqwest::Response, Attempt> {
        let fail = |failure: Failure<'_>, message: String| {
            Attempt::failed(
                failure,
                None,
                HarvestErrorKind::Request {
                    attempts: 1,
                    message,
                },
            )
        };
        let first =
            reqwest::Url::parse(url).map_err(|e| fail(Failure::BadUrl, format!("{url}: {e}")))?;
        let mut target = first.clone();
        for _ in 0..=MAX_REDIRECTS {
            // Redirects are followed on the same host only, so the extra headers stay there.
            let mut post = self.http_post.post(target.clone());
            if let Some(extra) = &extra {
                post = post.headers(extra.clone());
            }
            let response = send(
                post.header(CONTENT_TYPE, "application/x-www-form-urlencoded")
                    .body(form.to_owned()),
            )
            .await?;
            let next = (response.status().is_redirection())
                .then(|| response.headers().get(reqwest::header::LOCATION))
                .flatten()
                .and_then(|to| to.to_str().ok())
                .and_then(|to| target.join(to).ok());
            let Some(next) = next else {
                return Ok(response);
            };
            if !same_host(&first, &next) {
                return Err(fail(Failure::Redirect, elsewhere(&first, &next)));
            }
            target = next;
        }
        Err(fail(Failure::Redirect, too_many_redirects()))
    }
}

/// Most redirects followed for one request.
const MAX_REDIRECTS: usize = 5;

/// Why a request that redirected more than [`MAX_REDIRECTS`] times failed.
fn too_many_redirects() -> String {
    format!("more than {MAX_REDIRECTS} redirects (a redirect loop?)")
}

/// Why a redirect from `first` to another host, `next`, was not followed.
fn elsewhere(first: &reqwest::Url, next: &reqwest::Url) -> String {
    format!(
        "redirected from {first} to another host, {next}; if the repository moved, configure that baseURL"
    )
}

/// Whether a redirect from the request to `first` may go to `next`: the same host, http may
/// become https ([`same_host_redirects`]).
fn same_host(first: &reqwest::Url, next: &reqwest::Url) -> bool {
    next.host_str() == first.host_str()
        && (next.scheme() == first.scheme()
            || (first.scheme() == "http" && next.scheme() == "https"))
        && (next.port_or_known_default() == first.port_or_known_default()
            || next.scheme() != first.scheme())
}

/// Redirects are followed on the same host only (http may become https), at most
/// [`MAX_REDIRECTS`] of them: the politeness and the trust the caller gave are the
/// baseURL's host's, and a redirect elsewhere (a moved repository, a captive portal, an
/// open redirect) needs the operator's decision.
fn same_host_redirects(attempt: reqwest::redirect::Attempt<'_>) -> reqwest::redirect::Action {
    let Some(first) = attempt.previous().first() else {
        return attempt.follow();
    };
    let next = attempt.url();
    if attempt.previous().len() > MAX_REDIRECTS {
        attempt.error(too_many_redirects())
    } else if !same_host(first, next) {
        let message = elsewhere(first, next);
        attempt.error(message)
    } else {
        attempt.follow()
    }
}

fn request_kind(e: &reqwest::Error, attempts: u32) -> HarvestErrorKind {
    // reqwest's Display is terse ("error sending request"); the chain says why.
    let mut message = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    HarvestErrorKind::Request { attempts, message }
}

fn with_attempts(kind: HarvestErrorKind, n: u32) -> HarvestErrorKind {
    match kind {
        HarvestErrorKind::Request { message, .. } => HarvestErrorKind::Request {
            attempts: n,
            message,
        },
        HarvestErrorKind::Status { status, .. } => HarvestErrorKind::Status {
            status,
            attempts: n,
        },
        HarvestErrorKind::Parse { source, .. } => HarvestErrorKind::Parse {
            attempts: n,
            source,
        },
        other => other,
    }
}

/// `Retry-After` as a duration from `now`: delta-seconds or an HTTP-date (RFC 9110 §10.2.3).
/// `None` when absent or unreadable (then the backoff applies).
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    parse_retry_after(value, now)
}

/// Parses a `Retry-After` value; a date in the past means "now".
pub(crate) fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 22: each retry warning says which attempt of how many failed, and why, in the
    /// attempt's own words (not "after 1 attempt(s)").
    #[test]
    fn retry_warnings_count_the_attempts() {
        let status = HarvestErrorKind::Status {
            status: 500,
            attempts: 1,
        };
        let reset = HarvestErrorKind::Request {
            attempts: 1,
            message: "connection reset".into(),
        };
        let check = |attempt, cause, delay: u64, told, expected: &str| {
            let delay = Duration::from_millis(delay);
            assert_eq!(retry_warning(attempt, 5, cause, delay, told), expected);
        };
        check(
            1,
            &status,
            2_500,
            false,
            "attempt 1 of 5 failed: HTTP status 500; retrying in 2.5 s",
        );
        check(
            3,
            &reset,
            8_000,
            false,
            "attempt 3 of 5 failed: connection reset; retrying in 8.0 s",
        );
        check(
            4,
            &status,
            120_400,
            true,
            "attempt 4 of 5 failed: HTTP status 500; retrying in 120 s (as Retry-After asks)",
        );
        check(
            2,
            &status,
            15,
            false,
            "attempt 2 of 5 failed: HTTP status 500; retrying in 15 ms",
        );
        let parse = HarvestErrorKind::Parse {
            attempts: 1,
            source: Box::new(HarvestErrorKind::Truncated { len: 10 }),
        };
        assert_eq!(
            retry_warning(1, 0, &parse, Duration::ZERO, false),
            "attempt 1 of 1 failed: response is truncated after 10 bytes; retrying in 0 ms"
        );
    }

    /// Issue 22: a body is judged over whole windows from its first byte: one that keeps the
    /// rate on average passes, bursts and pauses included; one that drips or stops fails at
    /// the end of its window, with the rate it came at.
    #[test]
    fn the_pace_is_judged_over_whole_windows_from_the_first_byte() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let window = Duration::from_secs(2);
        // No window before the first byte, however long it takes to come.
        let mut pace = Pace::new(1000, window);
        assert_eq!(pace.window_end(), None);
        assert_eq!(pace.arrived(10, at(60_000)), Ok(()));
        assert_eq!(pace.window_end(), Some(at(62_000)));
        // 2 000 bytes in the first 2 s, in a burst after a pause: at the rate.
        assert_eq!(pace.arrived(1990, at(61_900)), Ok(()));
        assert_eq!(pace.window_over(at(62_000)), Ok(()));
        assert_eq!(pace.window_end(), Some(at(64_000)));
        // A drip: 40 bytes in the next window fails when it ends, with or without a byte.
        let mut stalled = Pace::new(1000, window);
        stalled.arrived(1, at(0)).unwrap();
        stalled.arrived(39, at(1_000)).unwrap();
        let mut dripping = Pace::new(1000, window);
        dripping.arrived(1, at(0)).unwrap();
        dripping.arrived(38, at(1_000)).unwrap();
        assert_eq!(stalled.window_over(at(2_000)), Err(Slow { observed: 20 }));
        assert_eq!(dripping.arrived(1, at(2_000)), Err(Slow { observed: 20 }));
        // A byte late past the window counts its whole span.
        let mut late = Pace::new(1000, window);
        late.arrived(1, at(0)).unwrap();
        assert_eq!(late.arrived(1999, at(4_000)), Err(Slow { observed: 500 }));
        // A body that ends within a window is never judged.
        let mut short = Pace::new(1000, window);
        short.arrived(5, at(0)).unwrap();
        short.arrived(5, at(1_999)).unwrap();
        // A window past any clock is never timed (nor a panic).
        let mut endless = Pace::new(1000, Duration::MAX);
        endless.arrived(1, at(0)).unwrap();
        assert_eq!(endless.window_end(), None);
        assert_eq!(endless.arrived(1, at(100_000)), Ok(()));
        // No minimum, or no window: nothing is judged, nothing is timed.
        for mut off in [Pace::new(0, window), Pace::new(1000, Duration::ZERO)] {
            off.arrived(1, at(0)).unwrap();
            assert_eq!(off.window_end(), None);
            assert_eq!(off.arrived(1, at(100_000)), Ok(()));
        }
    }

    #[test]
    fn retry_after_in_both_forms() {
        // OAI-33: delta-seconds and HTTP-date; anything else falls back to backoff.
        let now = httpdate::parse_http_date("Wed, 21 Oct 2026 07:27:00 GMT").unwrap();
        assert_eq!(parse_retry_after("2", now), Some(Duration::from_secs(2)));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2026 07:28:00 GMT", now),
            Some(Duration::from_secs(60))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2026 07:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
    }

    /// OAI-35: what the client decodes itself, by `Content-Encoding` and the first bytes.
    #[test]
    fn codings_by_label_and_magic_bytes() {
        let check = |label: Option<&str>, head: &[u8], expected: Option<Coding>| {
            let value = label.map(|l| HeaderValue::from_str(l).unwrap());
            assert_eq!(Coding::of(value.as_ref(), head), expected, "{label:?}");
        };
        let gzip = [0x1f, 0x8b, 8, 0];
        let unlabelled = Some(Coding::Gzip { labelled: false });
        check(None, b"<?xml version", None);
        check(None, b"", None);
        check(None, &gzip, unlabelled);
        check(Some("identity"), &gzip, unlabelled);
        check(Some("identity"), b"<OAI-PMH", None);
        check(Some("deflate"), b"\x78\x9c", Some(Coding::Deflate));
        check(Some("Deflate"), b"\x4b\x02", Some(Coding::Deflate));
        let labelled = Some(Coding::Gzip { labelled: true });
        check(Some("x-gzip"), &gzip, labelled);
        check(Some("GZIP"), &gzip, labelled);
        // Never asked for: left as it is, to fail to parse.
        check(Some("br"), &gzip, None);
        check(Some("gzip, br"), &gzip, None);
    }

    fn compressed<W: std::io::Write>(mut encoder: W, text: &[u8]) -> W {
        encoder.write_all(text).unwrap();
        encoder
    }

    /// OAI-35: gzip of one member or two, zlib-wrapped and raw deflate all give the text back.
    #[test]
    fn every_coding_decodes_to_the_text() {
        use flate2::Compression;
        use flate2::write::{DeflateEncoder, GzEncoder, ZlibEncoder};
        let text = "<record>oai:test:1 é</record>\n".repeat(200);
        let text = text.as_bytes();
        let gzip = |t: &[u8]| {
            let encoder = compressed(GzEncoder::new(Vec::new(), Compression::default()), t);
            encoder.finish().unwrap()
        };
        let mut two_members = gzip(&text[..100]);
        two_members.extend(gzip(&text[100..]));
        for level in [0, 1, 6, 9] {
            let level = Compression::new(level);
            let zlib = compressed(ZlibEncoder::new(Vec::new(), level), text);
            let raw = compressed(DeflateEncoder::new(Vec::new(), level), text);
            let zlib = zlib.finish().unwrap();
            let raw = raw.finish().unwrap();
            assert!(is_zlib(&zlib), "{level:?}");
            assert!(!is_zlib(&raw), "{level:?}");
            for (coding, body) in [(Coding::Deflate, &zlib), (Coding::Deflate, &raw)] {
                assert_eq!(decode(body, coding, 1 << 20).unwrap(), text, "{level:?}");
            }
        }
        for labelled in [true, false] {
            let coding = Coding::Gzip { labelled };
            assert_eq!(decode(&gzip(text), coding, 1 << 20).unwrap(), text);
            assert_eq!(decode(&two_members, coding, 1 << 20).unwrap(), text);
        }
        // An empty body compressed is empty; too short for a zlib header is raw.
        let empty = compressed(DeflateEncoder::new(Vec::new(), Compression::default()), b"");
        assert_eq!(
            decode(&empty.finish().unwrap(), Coding::Deflate, 10).unwrap(),
            b""
        );
        assert!(!is_zlib(b"\x78"));
    }

    /// The cap counts decoded bytes and stops the decoder one byte past it (the "gzip and
    /// entity bombs" hardening); a stream that is not what it says is an error.
    #[test]
    fn decoding_stops_at_the_cap_and_refuses_garbage() {
        use flate2::Compression;
        use flate2::write::{DeflateEncoder, ZlibEncoder};
        let spaces = vec![b' '; 1 << 20];
        let level = Compression::best();
        let bombs = [
            compressed(ZlibEncoder::new(Vec::new(), level), &spaces).finish(),
            compressed(DeflateEncoder::new(Vec::new(), level), &spaces).finish(),
        ];
        for bomb in bombs {
            let bomb = bomb.unwrap();
            assert!(matches!(
                decode(&bomb, Coding::Deflate, (1 << 20) - 1),
                Err(DecodeError::TooLarge)
            ));
            assert_eq!(
                decode(&bomb, Coding::Deflate, 1 << 20).unwrap().len(),
                1 << 20
            );
        }
        let garbage = b"\xff\xfe<not compressed at all>";
        assert!(matches!(
            decode(garbage, Coding::Deflate, 1 << 20),
            Err(DecodeError::Corrupt(_))
        ));
        let mut not_gzip = GZIP_MAGIC.to_vec();
        not_gzip.extend_from_slice(b"<OAI-PMH>");
        assert!(matches!(
            decode(&not_gzip, Coding::Gzip { labelled: false }, 1 << 20),
            Err(DecodeError::Corrupt(_))
        ));
    }
}
