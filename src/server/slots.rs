//! Refresh slots: at most `max_concurrent_refreshes` refreshes run at once across the gateway,
//! and at most `per_host_concurrency` against one upstream host (a URL's host and port; a
//! Static Repository file has none and counts against the first limit only).
//!
//! A refresh takes its slot before it starts and holds it until it ends, both limits at once:
//! one that waits for its host never holds a gateway-wide slot that another host's refresh
//! could use. Waiters are served first come, first served among those that fit; the limits
//! may change while refreshes run (a reload), and a lower limit is reached as running
//! refreshes end.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use oai_pmh::HostKey;
use tokio::sync::oneshot;

use crate::config::FleetSettings;

/// The gateway's refresh slots.
#[derive(Debug)]
pub(crate) struct Slots {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    max: usize,
    per_host: usize,
    running: usize,
    /// Refreshes running per host; a host with none is not kept.
    hosts: HashMap<HostKey, usize>,
    /// Refreshes waiting, in arrival order. None of them fits while they wait: every change
    /// that frees room grants those that now fit ([`State::grant`]).
    queue: VecDeque<Waiter>,
    /// The most refreshes that ran at once.
    peak: usize,
}

#[derive(Debug)]
struct Waiter {
    host: Option<HostKey>,
    grant: oneshot::Sender<Slot>,
}

/// A refresh's slot: held while it runs, given back when dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    slots: Arc<Slots>,
    host: Option<HostKey>,
    /// Counted in the state; a slot that could not be handed over is not (its counts are
    /// taken back under the lock that made it).
    armed: bool,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.armed {
            let mut state = self.slots.lock();
            state.release(self.host.as_ref());
            state.grant(&self.slots);
        }
    }
}

/// How many refreshes run and wait, for the status page.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotCounts {
    /// Refreshes running.
    pub running: usize,
    /// Refreshes waiting for a slot.
    pub waiting: usize,
    /// The most refreshes that ran at once since the start.
    pub peak: usize,
    /// `max_concurrent_refreshes`.
    pub max: usize,
    /// `per_host_concurrency`.
    pub per_host: usize,
}

impl State {
    fn fits(&self, host: Option<&HostKey>) -> bool {
        self.running < self.max
            && host.is_none_or(|h| self.hosts.get(h).copied().unwrap_or(0) < self.per_host)
    }

    fn take(&mut self, host: Option<&HostKey>) {
        self.running += 1;
        self.peak = self.peak.max(self.running);
        if let Some(h) = host {
            *self.hosts.entry(h.clone()).or_default() += 1;
        }
    }

    fn release(&mut self, host: Option<&HostKey>) {
        self.running = self.running.saturating_sub(1);
        if let Some(h) = host
            && let Some(n) = self.hosts.get_mut(h)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.hosts.remove(h);
            }
        }
    }

    /// Hands a slot of `slots` (whose state this is, locked) to each waiter that fits now, in
    /// arrival order; forgets those that gave up. A linear pass: the queue is at most the
    /// repositories, and it runs when a refresh ends, not per request.
    fn grant(&mut self, slots: &Arc<Slots>) {
        let queue = std::mem::take(&mut self.queue);
        for w in queue {
            if w.grant.is_closed() {
                continue;
            }
            if !self.fits(w.host.as_ref()) {
                self.queue.push_back(w);
                continue;
            }
            self.take(w.host.as_ref());
            let slot = slots.slot(w.host);
            if let Err(mut slot) = w.grant.send(slot) {
                // Gone as it was granted: taken back here, under the lock its drop would take.
                slot.armed = false;
                self.release(slot.host.as_ref());
            }
        }
    }
}

impl Slots {
    /// Slots under `fleet`'s limits.
    pub(crate) fn new(fleet: &FleetSettings) -> Arc<Slots> {
        Arc::new(Slots {
            state: Mutex::new(State {
                max: fleet.max_concurrent_refreshes.max(1),
                per_host: fleet.per_host_concurrency.max(1),
                running: 0,
                hosts: HashMap::new(),
                queue: VecDeque::new(),
                peak: 0,
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for a slot for a refresh of an upstream on `host` (`None`: a file). Cancel-safe:
    /// a waiter dropped before its turn leaves the queue, and a slot granted to it as it was
    /// dropped is given back.
    pub(crate) async fn acquire(self: &Arc<Self>, host: Option<HostKey>) -> Slot {
        loop {
            let granted = {
                let mut state = self.lock();
                if state.fits(host.as_ref()) {
                    state.take(host.as_ref());
                    return self.slot(host);
                }
                let (tx, rx) = oneshot::channel();
                state.queue.push_back(Waiter {
                    host: host.clone(),
                    grant: tx,
                });
                rx
            };
            // A slot granted to a waiter dropped before it read it is given back by the
            // slot's own drop, in the channel.
            if let Ok(slot) = granted.await {
                return slot;
            }
        }
    }

    fn slot(self: &Arc<Self>, host: Option<HostKey>) -> Slot {
        Slot {
            slots: Arc::clone(self),
            host,
            armed: true,
        }
    }

    /// Takes `fleet`'s limits from now on (a reload): a higher one lets waiters start at once,
    /// a lower one is reached as running refreshes end.
    pub(crate) fn resize(self: &Arc<Self>, fleet: &FleetSettings) {
        let mut state = self.lock();
        state.max = fleet.max_concurrent_refreshes.max(1);
        state.per_host = fleet.per_host_concurrency.max(1);
        state.grant(self);
    }

    /// How many refreshes run and wait.
    pub(crate) fn counts(&self) -> SlotCounts {
        let state = self.lock();
        SlotCounts {
            running: state.running,
            waiting: state.queue.iter().filter(|w| !w.grant.is_closed()).count(),
            peak: state.peak,
            max: state.max,
            per_host: state.per_host,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn host(n: u8) -> Option<HostKey> {
        HostKey::of(&url::Url::parse(&format!("http://127.0.0.{n}:8080/oai")).unwrap())
    }

    fn fleet(max: usize, per_host: usize) -> FleetSettings {
        FleetSettings {
            max_concurrent_refreshes: max,
            per_host_concurrency: per_host,
            start_spread: Duration::ZERO,
        }
    }

    /// Polls `f` once: whether it is ready.
    fn ready<F: std::future::Future>(f: std::pin::Pin<&mut F>) -> Option<F::Output> {
        let waker = std::task::Waker::noop();
        match f.poll(&mut std::task::Context::from_waker(waker)) {
            std::task::Poll::Ready(v) => Some(v),
            std::task::Poll::Pending => None,
        }
    }

    #[test]
    fn both_limits_hold_and_a_waiter_for_a_busy_host_takes_no_slot() {
        let slots = Slots::new(&fleet(2, 1));
        let a1 = ready(std::pin::pin!(slots.acquire(host(2)))).unwrap();
        // Another refresh of host 2 waits; it holds no gateway-wide slot meanwhile.
        let mut a2 = std::pin::pin!(slots.acquire(host(2)));
        assert!(ready(a2.as_mut()).is_none());
        let b = ready(std::pin::pin!(slots.acquire(host(3)))).unwrap();
        // Two running: a file waits too.
        let mut file = std::pin::pin!(slots.acquire(None));
        assert!(ready(file.as_mut()).is_none());
        assert_eq!((slots.counts().running, slots.counts().waiting), (2, 2));
        // Host 2's refresh ends: the next of host 2 came first, and takes the slot.
        drop(a1);
        let a2 = ready(a2.as_mut()).unwrap();
        assert!(ready(file.as_mut()).is_none());
        drop(b);
        let file = ready(file.as_mut()).unwrap();
        assert_eq!(slots.counts().running, 2);
        drop((a2, file));
        assert_eq!(
            slots.counts(),
            SlotCounts {
                running: 0,
                waiting: 0,
                peak: 2,
                max: 2,
                per_host: 1
            }
        );
    }

    #[test]
    fn a_waiter_that_gives_up_leaves_nothing_behind() {
        let slots = Slots::new(&fleet(1, 1));
        let first = ready(std::pin::pin!(slots.acquire(host(2)))).unwrap();
        {
            let mut gone = std::pin::pin!(slots.acquire(host(3)));
            assert!(ready(gone.as_mut()).is_none());
        }
        drop(first);
        assert_eq!((slots.counts().running, slots.counts().waiting), (0, 0));
        // Granted and then dropped before it was polled again: given back.
        let first = ready(std::pin::pin!(slots.acquire(host(2)))).unwrap();
        {
            let mut granted = std::pin::pin!(slots.acquire(host(3)));
            assert!(ready(granted.as_mut()).is_none());
            drop(first);
            assert_eq!(slots.counts().running, 1);
        }
        assert_eq!(slots.counts().running, 0);
    }

    #[test]
    fn a_higher_limit_lets_waiters_start() {
        let slots = Slots::new(&fleet(1, 1));
        let a = ready(std::pin::pin!(slots.acquire(host(2)))).unwrap();
        let mut b = std::pin::pin!(slots.acquire(host(3)));
        assert!(ready(b.as_mut()).is_none());
        slots.resize(&fleet(2, 1));
        let b = ready(b.as_mut()).unwrap();
        assert_eq!(slots.counts().running, 2);
        drop((a, b));
    }
}
