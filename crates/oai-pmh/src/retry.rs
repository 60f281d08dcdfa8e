//! Every retry decision in one place: which failures of a request are worth another attempt, how
//! long to wait before it (exponential backoff with a cap and jitter, or the upstream's
//! `Retry-After` up to a maximum), when to give up, how often a list is started again after
//! `badResumptionToken`, and when a call may go after the upstream's `Retry-After`.
//!
//! [`RetryPolicy`] is built from the [`HarvestSettings`] the caller fills; [`crate::Client`] asks it, and so does the paging loop
//! ([`crate::harvest`]). The decisions are pure: the client draws the jitter and keeps
//! the clock.

use std::time::Duration;

use reqwest::StatusCode;

use super::{HarvestErrorKind, HarvestSettings};

/// Restarts of a list after `badResumptionToken` (an expired or unknown token, OAI-27) before
/// the harvest fails.
pub const MAX_RESTARTS: u32 = 3;

/// How requests to an upstream are retried: attempts, backoff, `Retry-After`, list restarts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts per request, the first one included; at least one is made.
    pub max_attempts: u32,
    /// Wait before the first retry that the upstream did not time; it doubles with each such
    /// retry, up to [`RetryPolicy::backoff_max`], and jitter adds up to as much again.
    pub backoff_initial: Duration,
    /// Longest backoff before jitter.
    pub backoff_max: Duration,
    /// Longest wait a `Retry-After` may impose on the next attempt; a longer one is cut to this
    /// (and remembered whole, for the next harvest).
    pub retry_after_max: Duration,
    /// Restarts of a list after `badResumptionToken` ([`MAX_RESTARTS`]).
    pub max_restarts: u32,
}

/// A failed attempt, as the policy tells whether another one may succeed.
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum Failure<'a> {
    /// `503 Service Unavailable` or `429 Too Many Requests`: flow control (OAI-33), whatever
    /// the body says.
    FlowControl,
    /// A response with status `status` (not a success) whose body is no OAI-PMH answer.
    Status(StatusCode),
    /// A successful response whose body does not parse.
    Parse(&'a HarvestErrorKind),
    /// The request failed on the way: connection, timeout, TLS.
    Request,
    /// The connection broke while the body was read.
    BodyCut,
    /// A compressed body that does not decode: most likely cut or garbled on the way.
    Corrupt,
    /// A body over the size cap.
    TooLarge,
    /// A body slower than the minimum transfer rate: a server dripping its answer, which
    /// drips again (issue 22).
    TooSlow,
    /// A redirect loop, or a redirect to another host.
    Redirect,
    /// A URL that cannot be requested.
    BadUrl,
}

/// What to wait for before the next attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    /// The upstream's `Retry-After`, capped at [`RetryPolicy::retry_after_max`].
    RetryAfter(Duration),
    /// The backoff, with jitter.
    Backoff(Duration),
}

impl Wait {
    /// How long.
    pub(crate) fn duration(self) -> Duration {
        match self {
            Self::RetryAfter(d) | Self::Backoff(d) => d,
        }
    }
}

impl RetryPolicy {
    /// The policy of `settings`, with [`MAX_RESTARTS`].
    pub fn of(settings: &HarvestSettings) -> Self {
        Self {
            max_attempts: settings.max_attempts,
            backoff_initial: settings.backoff_initial,
            backoff_max: settings.backoff_max,
            retry_after_max: settings.retry_after_max,
            max_restarts: MAX_RESTARTS,
        }
    }

    /// Writes the policy's attempts, backoff and `Retry-After` cap into `settings`, which a
    /// client is built from (the restarts are no setting).
    pub fn apply(&self, settings: &mut HarvestSettings) {
        settings.max_attempts = self.max_attempts;
        settings.backoff_initial = self.backoff_initial;
        settings.backoff_max = self.backoff_max;
        settings.retry_after_max = self.retry_after_max;
    }

    /// The policy for an operator waiting for the answer (a diagnosis): each request is tried twice
    /// at most, with short waits: backoff at most 2 s, `Retry-After` at most 30 s.
    pub fn interactive(self) -> Self {
        let backoff_max = self.backoff_max.min(Duration::from_secs(2));
        Self {
            max_attempts: self.max_attempts.min(2),
            backoff_initial: self.backoff_initial.min(backoff_max),
            backoff_max,
            retry_after_max: self.retry_after_max.min(Duration::from_secs(30)),
            ..self
        }
    }

    /// Whether another attempt may succeed after `failure`. Transient, and retried: the
    /// upstream's flow control (503, 429, with or without `Retry-After`, OAI-33), a server error
    /// (a 500 from a resumption, a proxy's 502 or 504) and 408, a request that failed on the way
    /// (connection refused or reset, DNS, timeout), and a body cut short or garbled. Not
    /// transient, and failed at once, since asking again gets the same answer and only delays
    /// the error: a client error (401, 403, 404, 410, ...), a 5xx that names a lasting state
    /// (501 Not Implemented, 505 HTTP Version Not Supported, 511 Network Authentication
    /// Required: a captive portal), a successful response whose body is no OAI-PMH (a login or
    /// maintenance page served with 200) or is wrong the same way every time (not well-formed,
    /// invalid), a body over the cap or slower than the minimum rate (a drip: another attempt
    /// would hold the harvest another window and drip again), and a redirect loop or one
    /// elsewhere.
    pub(crate) fn retryable(failure: &Failure<'_>) -> bool {
        match failure {
            Failure::FlowControl | Failure::Request | Failure::BodyCut | Failure::Corrupt => true,
            Failure::Status(status) => {
                (status.is_server_error()
                    && !matches!(
                        *status,
                        StatusCode::NOT_IMPLEMENTED
                            | StatusCode::HTTP_VERSION_NOT_SUPPORTED
                            | StatusCode::NETWORK_AUTHENTICATION_REQUIRED
                    ))
                    || *status == StatusCode::REQUEST_TIMEOUT
            }
            Failure::Parse(error) => error.is_transient(),
            Failure::TooLarge | Failure::TooSlow | Failure::Redirect | Failure::BadUrl => false,
        }
    }

    /// Whether a status is the upstream's flow control (OAI-33): wait as told, whatever the
    /// body says.
    pub(crate) fn is_flow_control(status: StatusCode) -> bool {
        status == StatusCode::SERVICE_UNAVAILABLE || status == StatusCode::TOO_MANY_REQUESTS
    }

    /// Whether attempt `attempt` (1-based) that failed, retryably, was the last one.
    pub(crate) fn gives_up(&self, attempt: u32) -> bool {
        attempt >= self.max_attempts.max(1)
    }

    /// The backoff before the `n`th retry that the upstream did not time (1-based), before
    /// jitter: [`RetryPolicy::backoff_initial`] first, then doubling, at most
    /// [`RetryPolicy::backoff_max`] (the first wait is the initial one even when it is longer).
    pub(crate) fn backoff(&self, n: u32) -> Duration {
        if n <= 1 {
            return self.backoff_initial;
        }
        let doubled = self
            .backoff_initial
            .saturating_mul(1u32.checked_shl(n - 1).unwrap_or(u32::MAX));
        doubled.min(self.backoff_max)
    }

    /// The wait before the next attempt: `retry_after` (the upstream's `Retry-After`) capped at
    /// [`RetryPolicy::retry_after_max`] when there is one, else the `n`th backoff with `jitter`
    /// (in `[0, 1)`) of it again added.
    pub(crate) fn wait(&self, retry_after: Option<Duration>, n: u32, jitter: f64) -> Wait {
        match retry_after {
            Some(wait) => Wait::RetryAfter(wait.min(self.retry_after_max)),
            None => {
                let base = self.backoff(n);
                Wait::Backoff(base.saturating_add(base.mul_f64(jitter.clamp(0.0, 1.0))))
            }
        }
    }

    /// The retries of one request under this policy.
    pub(crate) fn retries(&self) -> Retries<'_> {
        Retries {
            policy: self,
            attempt: 1,
            backoffs: 0,
        }
    }

    /// Whether a list answered `badResumptionToken` after `restarts` restarts is started again.
    pub(crate) fn restarts_list(&self, restarts: u32) -> bool {
        restarts < self.max_restarts
    }
}

/// The retries of one request: which attempt is under way, and how many backoffs were waited.
#[derive(Debug)]
pub(crate) struct Retries<'p> {
    policy: &'p RetryPolicy,
    attempt: u32,
    backoffs: u32,
}

impl Retries<'_> {
    /// The attempt under way, 1-based.
    pub(crate) fn attempt(&self) -> u32 {
        self.attempt
    }

    /// After the attempt under way failed retryably, with the upstream's `retry_after` if it
    /// said one: the wait before the next attempt, which is then under way, or `None` when that
    /// was the last attempt. `jitter`, in `[0, 1)`, is drawn by the caller.
    pub(crate) fn next(&mut self, retry_after: Option<Duration>, jitter: f64) -> Option<Wait> {
        if self.policy.gives_up(self.attempt) {
            return None;
        }
        let wait = self
            .policy
            .wait(retry_after, self.backoffs.saturating_add(1), jitter);
        if matches!(wait, Wait::Backoff(_)) {
            self.backoffs += 1;
        }
        self.attempt += 1;
        Some(wait)
    }
}

/// When a call planned at `due` may go: not before the time the upstream asked to be left
/// alone until (`Retry-After`, remembered across harvests), even when that is past the
/// schedule.
pub fn not_before<T: Ord>(due: T, retry_not_before: Option<T>) -> T {
    match retry_not_before {
        Some(at) => due.max(at),
        None => due,
    }
}

/// The time a call at `now` must still wait for, when the upstream asked not to be called
/// before it (`Retry-After`).
pub fn pending<T: Ord>(retry_not_before: Option<T>, now: T) -> Option<T> {
    retry_not_before.filter(|at| *at > now)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn policy() -> RetryPolicy {
        RetryPolicy::of(&HarvestSettings::default())
    }

    #[test]
    fn the_policy_is_the_settings() {
        let p = policy();
        assert_eq!(p.max_attempts, 5);
        assert_eq!((p.backoff_initial, p.backoff_max), (secs(2), secs(120)));
        assert_eq!(p.retry_after_max, secs(3600));
        assert_eq!(p.max_restarts, MAX_RESTARTS);
        let mut settings = HarvestSettings::default();
        RetryPolicy {
            max_attempts: 9,
            backoff_initial: secs(1),
            backoff_max: secs(8),
            retry_after_max: secs(7),
            max_restarts: 0,
        }
        .apply(&mut settings);
        assert_eq!(settings.max_attempts, 9);
        assert_eq!(
            (settings.backoff_initial, settings.backoff_max),
            (secs(1), secs(8))
        );
        assert_eq!(settings.retry_after_max, secs(7));
    }

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let p = policy();
        let delays: Vec<u64> = (1..=9).map(|n| p.backoff(n).as_secs()).collect();
        assert_eq!(delays, [2, 4, 8, 16, 32, 64, 120, 120, 120]);
        // Far out, no overflow.
        assert_eq!(p.backoff(40), secs(120));
        assert_eq!(p.backoff(u32::MAX), secs(120));
        // A first wait longer than the cap is waited once, then the cap.
        let odd = RetryPolicy {
            backoff_initial: secs(10),
            backoff_max: secs(3),
            ..p.clone()
        };
        assert_eq!((odd.backoff(1), odd.backoff(2)), (secs(10), secs(3)));
        let none = RetryPolicy {
            backoff_initial: Duration::ZERO,
            ..p
        };
        assert_eq!(none.backoff(5), Duration::ZERO);
    }

    #[test]
    fn jitter_adds_up_to_the_backoff_again() {
        let p = policy();
        assert_eq!(p.wait(None, 3, 0.0), Wait::Backoff(secs(8)));
        assert_eq!(p.wait(None, 3, 0.5), Wait::Backoff(secs(12)));
        assert_eq!(p.wait(None, 9, 0.25), Wait::Backoff(secs(150)));
        assert!(p.wait(None, 1, 0.999).duration() < secs(4));
        // Out of range, it is held within it.
        assert_eq!(p.wait(None, 1, 7.0), Wait::Backoff(secs(4)));
    }

    #[test]
    fn retry_after_is_honoured_up_to_its_cap() {
        let p = RetryPolicy {
            retry_after_max: secs(30),
            ..policy()
        };
        assert_eq!(p.wait(Some(secs(5)), 1, 0.9), Wait::RetryAfter(secs(5)));
        assert_eq!(p.wait(Some(secs(3600)), 1, 0.0), Wait::RetryAfter(secs(30)));
        assert_eq!(
            p.wait(Some(Duration::ZERO), 4, 0.5),
            Wait::RetryAfter(Duration::ZERO)
        );
    }

    #[test]
    fn retries_give_up_after_the_last_attempt() {
        let p = RetryPolicy {
            max_attempts: 4,
            ..policy()
        };
        let mut r = p.retries();
        assert_eq!(r.attempt(), 1);
        assert_eq!(r.next(None, 0.0), Some(Wait::Backoff(secs(2))));
        assert_eq!(r.attempt(), 2);
        // A wait the upstream timed leaves the backoff where it was.
        assert_eq!(r.next(Some(secs(9)), 0.0), Some(Wait::RetryAfter(secs(9))));
        assert_eq!(r.next(None, 0.0), Some(Wait::Backoff(secs(4))));
        assert_eq!(r.attempt(), 4);
        assert_eq!(r.next(None, 0.0), None);
        assert_eq!(r.next(Some(secs(1)), 0.0), None);
        assert_eq!(r.attempt(), 4);
        // One attempt is always made, none repeated, whatever the setting says.
        for max_attempts in [0, 1] {
            let once = RetryPolicy {
                max_attempts,
                ..policy()
            };
            assert!(once.gives_up(1));
            assert_eq!(once.retries().next(None, 0.0), None);
        }
    }

    #[test]
    fn an_operator_waits_briefly() {
        let p = policy().interactive();
        assert_eq!(p.max_attempts, 2);
        assert_eq!((p.backoff_initial, p.backoff_max), (secs(2), secs(2)));
        assert_eq!(p.retry_after_max, secs(30));
        assert_eq!(p.max_restarts, MAX_RESTARTS);
        // Shorter settings are kept; the first wait never exceeds the cap.
        let short = RetryPolicy {
            max_attempts: 1,
            backoff_initial: secs(5),
            backoff_max: Duration::from_millis(500),
            retry_after_max: secs(3),
            max_restarts: 1,
        }
        .interactive();
        assert_eq!(short.max_attempts, 1);
        assert_eq!(short.backoff_initial, Duration::from_millis(500));
        assert_eq!(short.backoff_max, Duration::from_millis(500));
        assert_eq!(short.retry_after_max, secs(3));
        assert_eq!(short.max_restarts, 1);
    }

    #[test]
    fn what_is_retried() {
        let retried = |f: Failure<'_>| RetryPolicy::retryable(&f);
        assert!(retried(Failure::FlowControl));
        assert!(retried(Failure::Request));
        assert!(retried(Failure::BodyCut));
        assert!(retried(Failure::Corrupt));
        for status in [500, 502, 503, 504, 408] {
            assert!(retried(Failure::Status(
                StatusCode::from_u16(status).unwrap()
            )));
        }
        for status in [400, 401, 403, 404, 410, 422, 501, 505, 511] {
            assert!(!retried(Failure::Status(
                StatusCode::from_u16(status).unwrap()
            )));
        }
        let cut = HarvestErrorKind::Truncated { len: 10 };
        let proxy_page = HarvestErrorKind::NotOai {
            what: "an HTML page".into(),
        };
        let malformed = HarvestErrorKind::Xml {
            offset: 3,
            message: "no".into(),
        };
        assert!(retried(Failure::Parse(&cut)));
        // Issue 22: a login or maintenance page served with 200 comes back the same.
        assert!(!retried(Failure::Parse(&proxy_page)));
        assert!(!retried(Failure::Parse(&malformed)));
        assert!(!retried(Failure::Parse(&HarvestErrorKind::Invalid(
            "x".into()
        ))));
        assert!(!retried(Failure::TooLarge));
        assert!(!retried(Failure::TooSlow));
        assert!(!retried(Failure::Redirect));
        assert!(!retried(Failure::BadUrl));
        assert!(RetryPolicy::is_flow_control(
            StatusCode::SERVICE_UNAVAILABLE
        ));
        assert!(RetryPolicy::is_flow_control(StatusCode::TOO_MANY_REQUESTS));
        assert!(!RetryPolicy::is_flow_control(
            StatusCode::INTERNAL_SERVER_ERROR
        ));
    }

    #[test]
    fn lists_are_restarted_a_few_times() {
        let p = policy();
        let restarts: Vec<bool> = (0..5).map(|n| p.restarts_list(n)).collect();
        assert_eq!(restarts, [true, true, true, false, false]);
    }

    #[test]
    fn retry_after_wins_over_the_schedule() {
        assert_eq!(not_before(10, Some(20)), 20);
        assert_eq!(not_before(30, Some(20)), 30);
        assert_eq!(not_before(30, None), 30);
        assert_eq!(pending(Some(20), 10), Some(20));
        assert_eq!(pending(Some(20), 20), None);
        assert_eq!(pending(None::<i64>, 20), None);
    }
}
