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
//! The leases run on the gateway's runtime with an asynchronous client of their own (one
//! connection per gateway, opened again when it breaks), apart from the stores' connections.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::store::StateUrl;

/// What a claim on a repository's refresh got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Claim {
    /// This gateway holds the lease: it refreshes the repository now.
    Granted,
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

/// A failure of the fleet's database, naming it (without its password) and what was being done.
#[derive(Debug, thiserror::Error)]
#[error("fleet state {url}: cannot {what}: {source}")]
pub(crate) struct FleetError {
    url: String,
    what: &'static str,
    source: tokio_postgres::Error,
}

/// This gateway's side of the fleet.
pub(crate) struct Fleet {
    config: tokio_postgres::Config,
    /// The URL's TLS settings, as the stores connect with them.
    tls: tokio_postgres_rustls::MakeRustlsConnect,
    url: String,
    client: tokio::sync::Mutex<Option<Arc<tokio_postgres::Client>>>,
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
            holder: format!("{host}:{}:{:08x}", std::process::id(), fastrand::u32(..)),
            lease,
        }
    }

    /// The connection, opened (again) when there is none or it broke.
    async fn client(&self) -> Result<Arc<tokio_postgres::Client>, FleetError> {
        let mut slot = self.client.lock().await;
        if let Some(client) = slot.as_ref().filter(|c| !c.is_closed()) {
            return Ok(Arc::clone(client));
        }
        let (client, connection) = (self.config)
            .connect(self.tls.clone())
            .await
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

    fn failed(&self, what: &'static str) -> impl FnOnce(tokio_postgres::Error) -> FleetError {
        let url = self.url.clone();
        move |source| FleetError { url, what, source }
    }

    /// Claims the refresh of `repository`, due every `interval`; `asked` (an operator asked for
    /// it now) claims it however fresh it is, but never from a live lease.
    pub(crate) async fn claim(
        &self,
        repository: &str,
        interval: Duration,
        asked: bool,
    ) -> Result<Claim, FleetError> {
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
        if granted.is_some() {
            return Ok(Claim::Granted);
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

    /// Renews this gateway's lease on `repository`; `false` when it holds none any more.
    pub(crate) async fn renew(&self, repository: &str) -> Result<bool, FleetError> {
        let client = self.client().await?;
        let renewed = client
            .execute(
                crate::store::LEASE_RENEW,
                &[&repository, &self.holder, &self.lease.as_secs_f64()],
            )
            .await
            .map_err(self.failed("renew a claim"))?;
        Ok(renewed == 1)
    }

    /// Gives up this gateway's lease on `repository` (its refresh failed).
    pub(crate) async fn release(&self, repository: &str) -> Result<(), FleetError> {
        let client = self.client().await?;
        client
            .execute(crate::store::LEASE_RELEASE, &[&repository, &self.holder])
            .await
            .map_err(self.failed("release a claim"))?;
        Ok(())
    }

    /// Records the generation `id` (its `manifest.json`) this gateway made of `repository`, and
    /// releases the lease, if it still holds it; `false` when it does not (another gateway's
    /// generation will be recorded instead).
    pub(crate) async fn published(
        &self,
        repository: &str,
        id: &str,
        manifest: &[u8],
    ) -> Result<bool, FleetError> {
        let client = self.client().await?;
        let recorded = client
            .execute(
                "UPDATE oai_bridge_refreshes SET holder = NULL, expires_at = NULL,
                   refreshed_at = now(), generation = $3, manifest = $4
                 WHERE repository = $1 AND holder = $2 AND expires_at > now()",
                &[&repository, &self.holder, &id, &manifest],
            )
            .await
            .map_err(self.failed("record a generation"))?;
        Ok(recorded == 1)
    }

    /// The generation recorded for each repository that has one: (repository, id).
    pub(crate) async fn generations(&self) -> Result<Vec<(String, String)>, FleetError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT repository, generation FROM oai_bridge_refreshes
                 WHERE generation IS NOT NULL",
                &[],
            )
            .await
            .map_err(self.failed("read the generations"))?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// The generation recorded for `repository`: its id and manifest.
    pub(crate) async fn manifest(
        &self,
        repository: &str,
    ) -> Result<Option<(String, Vec<u8>)>, FleetError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT generation, manifest FROM oai_bridge_refreshes
                 WHERE repository = $1 AND generation IS NOT NULL",
                &[&repository],
            )
            .await
            .map_err(self.failed("read a generation"))?;
        Ok(row.map(|r| (r.get(0), r.get(1))))
    }
}
