//! The politeness delay, counted per upstream host: consecutive requests to one host are spaced
//! by the delay, whichever repository (and whichever of the clients sharing one [`Politeness`])
//! sends them.
//!
//! A host is a URL's host and port ([`HostKey`]): hundreds of journals on one OJS server are one
//! host, and so are their delays. A client made with [`Client::new`](crate::Client::new) has a
//! pacer of its own; clients made with [`Client::with_politeness`](crate::Client::with_politeness)
//! and one `Politeness` space their requests to a host together.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use url::Url;

/// An upstream host: the URL's host and port (the scheme's default when it names none).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostKey {
    host: String,
    port: u16,
}

impl HostKey {
    /// The host of `url`; `None` for a URL without a host.
    pub fn of(url: &Url) -> Option<HostKey> {
        Some(HostKey {
            host: url.host_str()?.to_ascii_lowercase(),
            port: url.port_or_known_default().unwrap_or(0),
        })
    }
}

impl std::fmt::Display for HostKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// The next moment each host may be sent a request.
#[derive(Debug, Default)]
pub struct Politeness {
    hosts: Mutex<HashMap<HostKey, Spacing>>,
}

/// One host's spacing.
#[derive(Clone, Copy, Debug)]
struct Spacing {
    /// When the latest request to the host started.
    last_start: Instant,
    /// When the latest request to the host ended (`None` while the first is in flight).
    last_end: Option<Instant>,
}

/// A request under way: when it is dropped (answered, failed or abandoned), its end is recorded,
/// from which the next request to its host counts the delay.
#[derive(Debug)]
pub(crate) struct Turn {
    pacer: Option<(Arc<Politeness>, HostKey)>,
}

impl Drop for Turn {
    fn drop(&mut self) {
        if let Some((pacer, host)) = self.pacer.take() {
            let mut hosts = pacer.hosts.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(s) = hosts.get_mut(&host) {
                let now = Instant::now();
                s.last_end = Some(s.last_end.map_or(now, |end| end.max(now)));
            }
        }
    }
}

impl Politeness {
    /// Waits until a request to `url`'s host may start, `delay` after the latest request to
    /// that host started and after the latest one ended, and takes its turn. With no delay (or
    /// no host) there is nothing to wait for.
    ///
    /// The start is reserved before the wait, so two requests waiting for one host start
    /// `delay` apart, not together (`per_host_concurrency` above 1).
    pub(crate) async fn turn(self: &Arc<Self>, url: &str, delay: Duration) -> Turn {
        let host = (!delay.is_zero())
            .then(|| Url::parse(url).ok().as_ref().and_then(HostKey::of))
            .flatten();
        let Some(host) = host else {
            return Turn { pacer: None };
        };
        let start = {
            let mut hosts = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            let start = match hosts.get(&host) {
                None => now,
                Some(s) => {
                    let after_start = s.last_start + delay;
                    let after_end = s.last_end.map_or(now, |end| end + delay);
                    now.max(after_start).max(after_end)
                }
            };
            let last_end = hosts.get(&host).and_then(|s| s.last_end);
            hosts.insert(
                host.clone(),
                Spacing {
                    last_start: start,
                    last_end,
                },
            );
            start
        };
        tokio::time::sleep_until(start).await;
        Turn {
            pacer: Some((Arc::clone(self), host)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_is_its_name_and_port() {
        let key = |u: &str| HostKey::of(&Url::parse(u).unwrap()).unwrap().to_string();
        assert_eq!(
            key("https://Journals.example.org/a/oai"),
            "journals.example.org:443"
        );
        assert_eq!(
            key("http://journals.example.org:8080/b"),
            "journals.example.org:8080"
        );
        assert_eq!(key("http://127.0.0.2/x"), "127.0.0.2:80");
    }

    /// Requests to one host from two clients sharing the pacer are spaced by the delay, from
    /// the end of the one before; another host is not held up. (On tokio's paused clock: the
    /// figures are the pacer's, not a loaded machine's.)
    #[tokio::test(start_paused = true)]
    async fn requests_to_one_host_are_spaced_across_clients() {
        let pacer = Arc::new(Politeness::default());
        let delay = Duration::from_millis(200);
        let first = pacer.turn("http://h.example/a/oai", delay).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(first);
        let ended = Instant::now();
        let other = pacer.turn("http://other.example/oai", delay).await;
        assert!(ended.elapsed() < delay, "another host waits for nothing");
        drop(other);
        let second = pacer.turn("http://h.example/b/oai", delay).await;
        assert!(ended.elapsed() >= delay, "{:?}", ended.elapsed());
        drop(second);
        // No delay: no wait.
        let now = Instant::now();
        let _ = pacer.turn("http://h.example/b/oai", Duration::ZERO).await;
        assert!(now.elapsed() < delay);
    }

    /// Two requests waiting for one host at once start a delay apart.
    #[tokio::test(start_paused = true)]
    async fn waiting_requests_start_a_delay_apart() {
        let pacer = Arc::new(Politeness::default());
        let delay = Duration::from_millis(150);
        let t0 = Instant::now();
        let a = async {
            let turn = pacer.turn("http://h.example/a", delay).await;
            (Instant::now(), turn)
        };
        let b = async {
            let turn = pacer.turn("http://h.example/b", delay).await;
            (Instant::now(), turn)
        };
        let ((at_a, _a), (at_b, _b)) = tokio::join!(a, b);
        let gap = if at_b > at_a {
            at_b - at_a
        } else {
            at_a - at_b
        };
        assert!(gap >= delay, "{gap:?}");
        assert!(t0.elapsed() >= delay);
    }
}
