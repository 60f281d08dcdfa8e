//! Several gateways, one fleet: with a shared state database (`[state] url`), every gateway may
//! serve every repository, but each repository is refreshed by one gateway at a time, which
//! claims it with a lease in `oai_bridge_refreshes` (migration 2 of the PostgreSQL store):
//!
//! - a claim is granted when nobody holds the repository (no lease, or one past its end) and it
//!   is due (its last refresh, whoever made it, is an interval old, or the refresh is asked
//!   for); else the answer says until when it is busy, or since when it is fresh;
//! - the holder renews its lease every third of `lease_secs` while the refresh runs, and stops
//!   the refresh when it cannot (another gateway may have it by then); a gateway killed
//!   mid-refresh renews nothing, and once its lease ends another claims the repository and
//!   continues the harvest from the checkpoint stored with the records;
//! - the holder records the generation it made (id and manifest) only while it holds the lease,
//!   and releases it; the others see the new generation ([`Fleet::generations`]) and make the
//!   same one from the bucket it was published to (`refresh::follow`, with
//!   [`super::generation::import`]), so every gateway answers with the same bytes, ETags and
//!   `Last-Modified`.
//!
//! Leases are fenced (migration 3): each granted claim takes a fencing token from the sequence
//! `oai_bridge_fence`, greater than any before it. The holder's renewals, release and recorded
//! generation count only with its token; the generation it makes and the bucket's manifest carry
//! it; before a generation is made current (its indexes, robots.txt and manifest in the bucket,
//! then here) the holder checks that its token is still the lease's ([`Lease::check`]), so a
//! holder that stalled past its lease (a pause, a partition) publishes nothing current, and a
//! follower never takes a generation of an older token than the one it serves.
//!
//! The leases run on the gateway's runtime with an asynchronous client of their own (one
//! connection per gateway, opened again when it breaks), apart from the stores' connections.

use crate::error::Error;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::store::StateUrl;

/// What a claim on a repository's refresh got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Claim {
    /// This gateway holds the lease: it refreshes the repository now.
    Granted {
        /// The lease's fencing token.
        fence: i64,
    },
    /// Another gateway holds it until then.
    Busy {
        /// The end of its lease.
        until: SystemTime,
    },
    /// The repository was refreshed then (by whichever gateway), less than an interval ago.
    Fresh {
        /// When that refresh ended.
        since: SystemTime,
    },
}

/// What the fleet's database records of one repository, as the follow loop reads it every
/// few seconds: the lease and the generation the fleet serves.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Recorded {
    /// The repository.
    pub(crate) repository: String,
    /// The gateway holding a live lease on its refresh, if one does.
    pub(crate) holder: Option<String>,
    /// The token of its last granted claim (the live lease's, when there is one).
    pub(crate) fence: Option<i64>,
    /// The generation recorded, its token and when it was recorded.
    pub(crate) generation: Option<String>,
    /// The token of the lease it was made under.
    pub(crate) generation_fence: Option<i64>,
    /// When it was recorded.
    pub(crate) refreshed_at: Option<SystemTime>,
    /// How many generations were recorded so far.
    pub(crate) published: i64,
}

/// This gateway's side of the fleet.
pub(crate) struct Fleet {
    config: tokio_postgres::Config,
    /// The URL's TLS settings, as the stores connect with them.
    tls: tokio_postgres_rustls::MakeRustlsConnect,
    url: String,
    client: tokio::sync::Mutex<Option<Arc<tokio_postgres::Client>>>,
    /// How long a connection attempt may take, handshakes included.
    connect_bound: Duration,
    /// Who this gateway is in the leases: host name, process id and a random part.
    pub(crate) holder: String,
    /// How long a lease lasts unrenewed.
    pub(crate) lease: Duration,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (f.debug_struct("Fleet"))
            .field("url", &self.url)
            .field("holder", &self.holder)
            .field("lease", &self.lease)
            .finish()
    }
}

impl Fleet {
    /// The fleet of the database at `url`; connects at its first use.
    pub(crate) fn new(url: &StateUrl, lease: Duration) -> Fleet {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_else(|_| "gateway".to_owned());
        Fleet {
            config: url.async_config(),
            tls: url.tls(),
            url: url.redacted(),
            client: tokio::sync::Mutex::new(None),
            connect_bound: url.connect_bound(),
            holder: format!("{host}:{}:{:08x}", std::process::id(), fastrand::u32(..)),
            lease,
        }
    }

    /// The connection, opened (again) when there is none or it broke.
    async fn client(&self) -> Result<Arc<tokio_postgres::Client>, Error> {
        let mut slot = self.client.lock().await;
        if let Some(client) = slot.as_ref().filter(|c| !c.is_closed()) {
            return Ok(Arc::clone(client));
        }
        // tokio-postgres's `connect_timeout` bounds the TCP connect only: a server that accepts
        // and never answers the handshake would hold this lock, and every lease, for ever.
        let (client, connection) =
            tokio::time::timeout(self.connect_bound, (self.config).connect(self.tls.clone()))
                .await
                .map_err(|_| {
                    Error::Fleet {
            url: self.url.clone(),
            what: "connect",
            source: format!(
                "no answer to the connection's handshake within {:?} (the URL's connect_timeout)",
                self.connect_bound
            )
            .into(),
        }
                })?
                .map_err(self.failed("connect"))?;
        let url = self.url.clone();
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::warn!(fleet = url, "the fleet's connection ended: {e}");
            }
        });
        let client = Arc::new(client);
        *slot = Some(Arc::clone(&client));
        Ok(client)
    }

    fn failed(&self, what: &'static str) -> impl FnOnce(tokio_postgres::Error) -> Error {
        let url = self.url.clone();
        move |source| Error::Fleet {
            url,
            what,
            source: Box::new(source),
        }
    }

    /// Claims the refresh of `repository`, due every `interval`; `asked` (an operator asked for
    /// it now) claims it however fresh it is, but never from a live lease.
    pub(crate) async fn claim(
        &self,
        repository: &str,
        interval: Duration,
        asked: bool,
    ) -> Result<Claim, Error> {
        let client = self.client().await?;
        let granted = client
            .query_opt(
                crate::store::LEASE_CLAIM,
                &[
                    &repository,
                    &self.holder,
                    &self.lease.as_secs_f64(),
                    &asked,
                    &interval.as_secs_f64(),
                ],
            )
            .await
            .map_err(self.failed("claim a refresh"))?;
        if let Some(granted) = granted {
            return Ok(Claim::Granted {
                fence: granted.get(0),
            });
        }
        let row = client
            .query_one(
                "SELECT expires_at > now(),
                   extract(epoch FROM expires_at)::float8,
                   extract(epoch FROM refreshed_at)::float8
                 FROM oai_bridge_refreshes WHERE repository = $1",
                &[&repository],
            )
            .await
            .map_err(self.failed("read a claim"))?;
        let at = |secs: Option<f64>| {
            SystemTime::UNIX_EPOCH + Duration::from_secs_f64(secs.unwrap_or(0.0).max(0.0))
        };
        Ok(match row.get::<_, Option<bool>>(0) {
            Some(true) => Claim::Busy {
                until: at(row.get(1)),
            },
            _ => Claim::Fresh {
                since: at(row.get(2)),
            },
        })
    }

    /// Renews this gateway's lease of token `fence` on `repository`; `false` when it holds
    /// none any more.
    pub(crate) async fn renew(&self, repository: &str, fence: i64) -> Result<bool, Error> {
        let client = self.client().await?;
        let renewed = client
            .execute(
                "UPDATE oai_bridge_refreshes SET expires_at = now() + make_interval(secs => $3)
                 WHERE repository = $1 AND holder = $2 AND fence = $4 AND expires_at > now()",
                &[&repository, &self.holder, &self.lease.as_secs_f64(), &fence],
            )
            .await
            .map_err(self.failed("renew a claim"))?;
        Ok(renewed == 1)
    }

    /// Gives up this gateway's lease of token `fence` on `repository` (its refresh failed);
    /// changes nothing when a later claim has it.
    pub(crate) async fn release(&self, repository: &str, fence: i64) -> Result<(), Error> {
        let client = self.client().await?;
        client
            .execute(
                "UPDATE oai_bridge_refreshes SET holder = NULL, expires_at = NULL
                 WHERE repository = $1 AND holder = $2 AND fence = $3",
                &[&repository, &self.holder, &fence],
            )
            .await
            .map_err(self.failed("release a claim"))?;
        Ok(())
    }

    /// Records the generation `id` (its `manifest.json`) this gateway made of `repository`
    /// under the lease of token `fence`, and releases the lease, if it still holds it; `false`
    /// when it does not (another gateway's generation will be recorded instead).
    pub(crate) async fn published(
        &self,
        repository: &str,
        fence: i64,
        id: &str,
        manifest: &[u8],
    ) -> Result<bool, Error> {
        let client = self.client().await?;
        let recorded = client
            .execute(
                "UPDATE oai_bridge_refreshes SET holder = NULL, expires_at = NULL,
                   refreshed_at = now(), generation = $3, manifest = $4,
                   generation_fence = $5, published = published + 1
                 WHERE repository = $1 AND holder = $2 AND fence = $5 AND expires_at > now()",
                &[&repository, &self.holder, &id, &manifest, &fence],
            )
            .await
            .map_err(self.failed("record a generation"))?;
        Ok(recorded == 1)
    }

    /// Whether this gateway still holds `repository`'s lease of token `fence`, live; when it
    /// does not, why, in words ("lost the lease: fence 41 was superseded by 42 (holder X)").
    pub(crate) async fn holds(&self, repository: &str, fence: i64) -> Result<(), String> {
        // A database that does not answer within a lease cannot vouch for one.
        let row = tokio::time::timeout(self.lease, async {
            let client = self.client().await?;
            client
                .query_opt(
                    "SELECT holder, fence, coalesce(expires_at > now(), false)
                     FROM oai_bridge_refreshes WHERE repository = $1",
                    &[&repository],
                )
                .await
                .map_err(self.failed("check a claim"))
        })
        .await
        .map_err(|_| format!("no answer within {:?}", self.lease))
        .and_then(|row| row.map_err(|e| e.to_string()))
        .map_err(|e| format!("lost the lease: fence {fence} cannot be checked: {e}"))?;
        let (holder, now, live) = match &row {
            Some(r) => (
                r.get::<_, Option<String>>(0),
                r.get::<_, Option<i64>>(1),
                r.get::<_, bool>(2),
            ),
            None => (None, None, false),
        };
        match (now, holder) {
            (Some(now), Some(holder)) if now == fence && holder == self.holder && live => Ok(()),
            (Some(now), holder) if now != fence => Err(format!(
                "lost the lease: fence {fence} was superseded by {now} (holder {})",
                holder.as_deref().unwrap_or("none now")
            )),
            _ => Err(format!(
                "lost the lease: fence {fence} ended, unrenewed for {:?}",
                self.lease
            )),
        }
    }

    /// What is recorded of every repository: its lease and its generation.
    pub(crate) async fn generations(&self) -> Result<Vec<Recorded>, Error> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT repository, CASE WHEN expires_at > now() THEN holder END, fence,
                   generation, generation_fence,
                   extract(epoch FROM refreshed_at)::float8, published
                 FROM oai_bridge_refreshes",
                &[],
            )
            .await
            .map_err(self.failed("read the generations"))?;
        let at = |secs: Option<f64>| {
            secs.map(|s| SystemTime::UNIX_EPOCH + Duration::from_secs_f64(s.max(0.0)))
        };
        Ok(rows
            .iter()
            .map(|r| Recorded {
                repository: r.get(0),
                holder: r.get(1),
                fence: r.get(2),
                generation: r.get(3),
                generation_fence: r.get(4),
                refreshed_at: at(r.get(5)),
                published: r.get(6),
            })
            .collect())
    }

    /// The generation recorded for `repository`: its id, manifest and the token it was
    /// made under (`None` before fenced leases).
    pub(crate) async fn manifest(
        &self,
        repository: &str,
    ) -> Result<Option<(String, Vec<u8>, Option<i64>)>, Error> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT generation, manifest, generation_fence FROM oai_bridge_refreshes
                 WHERE repository = $1 AND generation IS NOT NULL",
                &[&repository],
            )
            .await
            .map_err(self.failed("read a generation"))?;
        Ok(row.map(|r| (r.get(0), r.get(1), r.get(2))))
    }
}

/// What a gateway knows of a repository's place in the fleet, from its last look
/// ([`Fleet::generations`], every few seconds): shown on the status page and in the metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FleetView {
    /// The gateway holding a live lease on its refresh, if one does.
    pub holder: Option<String>,
    /// The token of the last lease granted.
    pub fence: Option<i64>,
    /// The token of the generation the fleet records.
    pub generation_fence: Option<i64>,
    /// Generations recorded that this gateway does not serve yet (0: it serves the last).
    pub behind: u64,
    /// When the generation recorded that this gateway does not serve yet was recorded.
    pub behind_since: Option<SystemTime>,
    /// How many generations were recorded when this gateway last served the one recorded.
    pub(crate) caught_up_at: Option<i64>,
}

impl FleetView {
    /// The view after reading `recorded`, for a gateway serving the generation `serving`.
    pub(crate) fn next(&self, recorded: &Recorded, serving: Option<&str>) -> FleetView {
        let current = recorded.generation.is_some() && recorded.generation.as_deref() == serving;
        let caught_up_at = match current {
            true => Some(recorded.published),
            false => self.caught_up_at,
        };
        let behind = match (&recorded.generation, current) {
            (None, _) | (_, true) => 0,
            (Some(_), false) => {
                caught_up_at.map_or(1, |at| recorded.published.saturating_sub(at).max(1) as u64)
            }
        };
        FleetView {
            holder: recorded.holder.clone(),
            fence: recorded.fence,
            generation_fence: recorded.generation_fence,
            behind,
            behind_since: (behind > 0).then_some(recorded.refreshed_at).flatten(),
            caught_up_at,
        }
    }
}

/// A granted lease, as a refresh carries it to its publish (on the refresh's own thread and
/// runtime): its checks run on the gateway's runtime, where the fleet's connection lives.
#[derive(Clone, Debug)]
pub(crate) struct Lease {
    fleet: Arc<Fleet>,
    repository: String,
    /// Its fencing token.
    pub(crate) fence: i64,
    runtime: tokio::runtime::Handle,
}

impl Lease {
    /// The lease of token `fence` on `repository`, checked on the current runtime.
    pub(crate) fn new(fleet: Arc<Fleet>, repository: &str, fence: i64) -> Lease {
        Lease {
            fleet,
            repository: repository.to_owned(),
            fence,
            runtime: tokio::runtime::Handle::current(),
        }
    }

    /// Whether it is still held ([`Fleet::holds`]); else why, in words.
    pub(crate) async fn check(&self) -> Result<(), String> {
        let lease = self.clone();
        let checked = (self.runtime)
            .spawn(async move { lease.fleet.holds(&lease.repository, lease.fence).await });
        checked
            .await
            .unwrap_or_else(|e| Err(format!("lost the lease: its check failed: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(generation: Option<&str>, published: i64, secs: u64) -> Recorded {
        Recorded {
            repository: "r".into(),
            holder: None,
            fence: Some(7),
            generation: generation.map(str::to_owned),
            generation_fence: Some(7),
            refreshed_at: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs)),
            published,
        }
    }

    /// The lag counts the generations recorded since the one this gateway last served, and
    /// the time since the one it does not serve yet was recorded.
    #[test]
    fn a_follower_counts_the_generations_it_is_behind() {
        let start = FleetView::default();
        // Nothing recorded yet: nothing to be behind.
        assert_eq!(start.next(&recorded(None, 0, 0), None).behind, 0);
        // Serving the generation recorded: caught up, at the third generation.
        let caught = start.next(&recorded(Some("g3"), 3, 100), Some("g3"));
        assert_eq!((caught.behind, caught.behind_since), (0, None));
        // Two generations later, still serving g3.
        let behind = caught.next(&recorded(Some("g5"), 5, 200), Some("g3"));
        assert_eq!(behind.behind, 2);
        assert_eq!(
            behind.behind_since,
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(200))
        );
        // A gateway that never served the recorded one (just started) is one behind.
        assert_eq!(start.next(&recorded(Some("g5"), 5, 200), None).behind, 1);
        assert_eq!(
            start.next(&recorded(Some("g5"), 5, 200), Some("g1")).behind,
            1
        );
        // Then catches up.
        assert_eq!(
            behind
                .next(&recorded(Some("g5"), 5, 200), Some("g5"))
                .behind,
            0
        );
    }

    /// The fleet's connection gives up on a server that accepts and never answers, instead of
    /// holding its lock (and every lease) for ever.
    #[tokio::test]
    async fn the_fleet_gives_up_on_a_server_that_never_answers() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let url = StateUrl::parse(&format!(
            "postgres://bridge@127.0.0.1:{port}/db?connect_timeout=1"
        ))
        .unwrap();
        let fleet = Fleet::new(&url, Duration::from_secs(60));
        let started = std::time::Instant::now();
        let e = (fleet.claim("r", Duration::from_secs(60), false))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        assert!(
            e.contains("cannot connect: no answer to the connection's handshake within 1s"),
            "{e}"
        );
        drop(listener);
    }
}
