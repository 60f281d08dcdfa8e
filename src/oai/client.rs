//! The only reqwest user: one request with timeouts, retries with backoff and jitter, `Retry-After`
//! in both forms, and a cap on the (decompressed) body size. It re-sends exactly the same URL,
//! which OAI-PMH makes safe (OAI-25).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use backon::{BackoffBuilder, ExponentialBuilder};
use reqwest::StatusCode;
use reqwest::header::{HeaderMap, RETRY_AFTER};

use super::parse::ParseError;
use super::{HarvestErrorKind, HarvestSettings};

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
    /// The latest time (seconds since the Unix epoch) a `Retry-After` asked the client to wait
    /// until, uncapped; 0 when none did. The server schedules its next refresh after it.
    pub retry_not_before: AtomicU64,
}

impl ClientStats {
    /// When the upstream last asked to be left alone until, if that is still ahead.
    pub fn retry_not_before(&self) -> Option<SystemTime> {
        let secs = self.retry_not_before.load(Ordering::Relaxed);
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
        (secs > 0 && at > SystemTime::now()).then_some(at)
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
    settings: HarvestSettings,
    /// The body buffer of the last page, kept for the next: a page is about the same size as
    /// the one before, and allocating it afresh makes the kernel fault its pages in again (a
    /// tenth of a harvest's CPU on some machines).
    spare: Spare,
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

impl Client {
    /// Builds a client: rustls, gzip and deflate, the configured timeouts and `User-Agent`.
    pub fn new(settings: HarvestSettings) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder()
            .user_agent(settings.user_agent.clone())
            .connect_timeout(settings.connect_timeout)
            .timeout(settings.request_timeout)
            .gzip(true)
            .deflate(true)
            .redirect(reqwest::redirect::Policy::custom(same_host_redirects))
            .build()?;
        Ok(Self {
            http,
            settings,
            spare: Spare::default(),
            stats: ClientStats::default(),
        })
    }

    /// The settings this client was built with.
    pub fn settings(&self) -> &HarvestSettings {
        &self.settings
    }

    /// GETs `url` and reads the body with `read`, retrying transient failures (network errors,
    /// 5xx, 429, cut or garbled bodies) up to `max_attempts`, never past `deadline`.
    pub async fn fetch<T>(
        &self,
        url: &str,
        deadline: Option<Instant>,
        read: impl Fn(&[u8]) -> Result<T, ParseError>,
    ) -> Result<T, HarvestErrorKind> {
        let mut backoff = ExponentialBuilder::new()
            .with_jitter()
            .with_min_delay(self.settings.backoff_initial)
            .with_max_delay(self.settings.backoff_max)
            .without_max_times()
            .build();
        let max = self.settings.max_attempts.max(1);
        let mut attempt = 1;
        loop {
            self.stats.requests.fetch_add(1, Ordering::Relaxed);
            let attempt_result = match deadline {
                Some(at) => match tokio::time::timeout_at(at.into(), self.attempt(url)).await {
                    Ok(result) => result,
                    Err(_) => {
                        return Err(HarvestErrorKind::Deadline {
                            limit: self.settings.deadline.unwrap_or_default(),
                        });
                    }
                },
                None => self.attempt(url).await,
            };
            let outcome = match attempt_result {
                // Some servers send OAI errors with a 4xx/5xx status (OAI-32): the body decides.
                Ok((status, body)) => match read(&body) {
                    Ok(value) => {
                        self.recycle(body);
                        return Ok(value);
                    }
                    Err(e) if status.is_success() && e.is_transient() => Attempt::Retry {
                        wait: None,
                        cause: parse_kind(e, attempt),
                    },
                    Err(e) if status.is_success() => Attempt::Fail(parse_kind(e, attempt)),
                    // A 4xx/5xx whose body is no OAI-PMH answer: the status is the news.
                    Err(_) if status.is_server_error() || status == StatusCode::REQUEST_TIMEOUT => {
                        Attempt::Retry {
                            wait: None,
                            cause: status_kind(status, attempt),
                        }
                    }
                    Err(_) => Attempt::Fail(status_kind(status, attempt)),
                },
                Err(outcome) => outcome,
            };
            let (wait, cause) = match outcome {
                Attempt::Fail(kind) => return Err(kind),
                Attempt::Retry { wait, cause } => (wait, cause),
            };
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
            if attempt >= max {
                return Err(with_attempts(cause, attempt));
            }
            let delay = match wait {
                Some(wait) => {
                    self.stats.retry_after_waits.fetch_add(1, Ordering::Relaxed);
                    wait.min(self.settings.retry_after_max)
                }
                None => backoff.next().unwrap_or(self.settings.backoff_max),
            };
            if let Some(deadline) = deadline
                && Instant::now() + delay > deadline
            {
                return Err(HarvestErrorKind::Deadline {
                    limit: self.settings.deadline.unwrap_or_default(),
                });
            }
            tracing::warn!(url, attempt, delay = ?delay, "retrying: {cause}");
            self.stats.retries.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    /// One GET: the status and the whole body when it is worth reading, or why not.
    /// One GET of a small resource that is not OAI-PMH (a host's robots.txt): its status and
    /// body, within the same timeouts and body cap; no retries.
    pub async fn get_once(&self, url: &str) -> Result<(u16, Vec<u8>), HarvestErrorKind> {
        self.stats.requests.fetch_add(1, Ordering::Relaxed);
        match self.attempt(url).await {
            Ok((status, body)) => Ok((status.as_u16(), body)),
            Err(Attempt::Retry { cause, .. } | Attempt::Fail(cause)) => Err(cause),
        }
    }

    async fn attempt(&self, url: &str) -> Result<(StatusCode, Vec<u8>), Attempt> {
        let response = self
            .http
            .get(url)
            .header(
                reqwest::header::ACCEPT,
                "text/xml, application/xml;q=0.9, */*;q=0.5",
            )
            .send()
            .await
            .map_err(|e| {
                if e.is_redirect() {
                    // A redirect loop or one to another host does not mend itself.
                    Attempt::Fail(request_kind(&e, 1))
                } else {
                    Attempt::Retry {
                        wait: None,
                        cause: request_kind(&e, 1),
                    }
                }
            })?;
        let status = response.status();
        if status == StatusCode::SERVICE_UNAVAILABLE || status == StatusCode::TOO_MANY_REQUESTS {
            // Flow control (OAI-33): wait as told, whatever the body says.
            let wait = retry_after(response.headers(), SystemTime::now());
            return Err(Attempt::Retry {
                wait,
                cause: HarvestErrorKind::Status {
                    status: status.as_u16(),
                    attempts: 1,
                },
            });
        }
        let mut response = response;
        let limit = self.settings.max_body_bytes;
        if response.content_length().is_some_and(|len| len > limit) {
            return Err(Attempt::Fail(HarvestErrorKind::TooLarge { limit }));
        }
        let mut body = std::mem::take(&mut *self.spare.0.lock().unwrap_or_else(|e| e.into_inner()));
        body.clear();
        body.reserve(response.content_length().unwrap_or(64 * 1024).min(limit) as usize);
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if body.len() as u64 + chunk.len() as u64 > limit {
                        return Err(Attempt::Fail(HarvestErrorKind::TooLarge { limit }));
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => {
                    return Err(Attempt::Retry {
                        wait: None,
                        cause: request_kind(&e, 1),
                    });
                }
            }
        }
        self.stats
            .bytes
            .fetch_add(body.len() as u64, Ordering::Relaxed);
        Ok((status, body))
    }

    /// Keeps `body`'s allocation for the next page (bounded: one buffer, at most 64 MiB).
    fn recycle(&self, body: Vec<u8>) {
        if body.capacity() <= 64 * 1024 * 1024 {
            *self.spare.0.lock().unwrap_or_else(|e| e.into_inner()) = body;
        }
    }
}

fn status_kind(status: StatusCode, attempts: u32) -> HarvestErrorKind {
    HarvestErrorKind::Status {
        status: status.as_u16(),
        attempts,
    }
}

fn parse_kind(source: ParseError, attempts: u32) -> HarvestErrorKind {
    HarvestErrorKind::Parse { attempts, source }
}

/// Most redirects followed for one request.
const MAX_REDIRECTS: usize = 5;

/// Redirects are followed on the same host only (http may become https), at most
/// [`MAX_REDIRECTS`] of them: the scope, the politeness and the trust the operator configured are
/// the baseURL's host's, and a redirect elsewhere (a moved repository, a captive portal, an
/// open redirect) needs the operator's decision.
fn same_host_redirects(attempt: reqwest::redirect::Attempt<'_>) -> reqwest::redirect::Action {
    let Some(first) = attempt.previous().first() else {
        return attempt.follow();
    };
    let next = attempt.url();
    let same_host = next.host_str() == first.host_str()
        && (next.scheme() == first.scheme()
            || (first.scheme() == "http" && next.scheme() == "https"))
        && (next.port_or_known_default() == first.port_or_known_default()
            || next.scheme() != first.scheme());
    if attempt.previous().len() > MAX_REDIRECTS {
        let message = format!("more than {MAX_REDIRECTS} redirects (a redirect loop?)");
        attempt.error(message)
    } else if !same_host {
        let message = format!(
            "redirected from {first} to another host, {next}; if the repository moved, configure that baseURL"
        );
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
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    parse_retry_after(value, now)
}

/// Parses a `Retry-After` value; a date in the past means "now".
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
