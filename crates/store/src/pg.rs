//! The PostgreSQL backend of [`super::Store`] (`[state] url`): one database holds the stores of
//! every repository, each table's primary key led by the repository's name, so that several
//! gateways (or a gateway and its exports) share one place for their state.
//!
//! The schema is versioned: `oai_bridge_schema` lists the migrations applied ([`MIGRATIONS`]),
//! and each opening applies those missing in one transaction under an advisory lock, so
//! gateways that start at once do not race. A database whose schema is newer than this version
//! knows is refused, never changed.
//!
//! The store's methods are synchronous and are called from inside tokio runtimes, where the
//! `postgres` client (which blocks on a runtime of its own) must not run. So each store owns a
//! worker thread that owns the connection: a method sends it a job and waits for the answer.
//! Reading every record streams them back in batches, asked for one ahead so that the database
//! reads the next while the caller renders this one; the caller's callback runs on its own
//! thread.
//!
//! A page is a few statements, never a round trip per record: the page's stored versions are
//! read at once, the `newer` rule and the change tracking are decided here exactly as the SQLite
//! store decides them, record after record, and the outcome is written with arrays
//! (`unnest`).
//!
//! Every connection goes through rustls with the URL's `sslmode`, `sslrootcert`, `sslcert` and
//! `sslkey` (libpq's meanings; the default for a host that is not loopback is `require`): see
//! [`super::tls`].

use std::collections::{HashMap, HashSet};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use oai_pmh::{Datestamp, Record};
use postgres::config::Host;
use postgres::{Client, Statement};

use super::backend::{Backend, Stopped, Visit};
use super::page::{self, Held, Incoming, Rejected, Stored};
use super::tls::Tls;
use super::{Counts, Place, State, StoreError, decode_body, persisted};
use oai_bridge_files::published::SharedUrl;

/// The schema's migrations, in order: version `n` is `MIGRATIONS[n - 1]`. Never edit one that
/// was released; add the next.
const MIGRATIONS: &[&str] = &[
    // 1: the tables of the SQLite store's schema 5, each led by the repository's name. Text
    // keys sort byte-wise (`COLLATE "C"`), as SQLite sorts them: records are rendered in
    // identifier order, and the sitemap's layout depends on it.
    r#"
    CREATE TABLE oai_bridge_records (
        repository TEXT COLLATE "C" NOT NULL,
        id TEXT COLLATE "C" NOT NULL,
        datestamp BIGINT,
        deleted BOOLEAN NOT NULL,
        sets TEXT NOT NULL,
        body BYTEA NOT NULL,
        seen BIGINT NOT NULL,
        PRIMARY KEY (repository, id)
    );
    CREATE INDEX oai_bridge_records_deleted ON oai_bridge_records (repository, id) WHERE deleted;
    CREATE TABLE oai_bridge_changes (
        repository TEXT COLLATE "C" NOT NULL,
        id TEXT COLLATE "C" NOT NULL,
        prev_live BOOLEAN,
        prev_datestamp BIGINT,
        prev_body BYTEA,
        now_deleted BOOLEAN NOT NULL,
        now_datestamp BIGINT,
        now_body BYTEA NOT NULL,
        PRIMARY KEY (repository, id)
    );
    CREATE TABLE oai_bridge_shared (
        repository TEXT COLLATE "C" NOT NULL,
        url TEXT COLLATE "C" NOT NULL,
        claims BYTEA NOT NULL,
        PRIMARY KEY (repository, url)
    );
    CREATE TABLE oai_bridge_rejected (
        repository TEXT COLLATE "C" NOT NULL,
        id TEXT COLLATE "C" NOT NULL,
        datestamp BIGINT,
        seen BIGINT NOT NULL,
        PRIMARY KEY (repository, id)
    );
    CREATE TABLE oai_bridge_state (
        repository TEXT COLLATE "C" NOT NULL PRIMARY KEY,
        doc TEXT NOT NULL
    );
    CREATE TABLE oai_bridge_tally (
        repository TEXT COLLATE "C" NOT NULL PRIMARY KEY,
        live BIGINT NOT NULL,
        deleted BIGINT NOT NULL
    );
    "#,
    // 2: the gateways of a fleet (the gateway's `server::fleet`): who refreshes each repository now
    // (a lease: `holder` until `expires_at`), when its last refresh ended, and the generation it
    // published, with its manifest, which the other gateways make again from the bucket.
    r#"
    CREATE TABLE oai_bridge_refreshes (
        repository TEXT COLLATE "C" NOT NULL PRIMARY KEY,
        holder TEXT,
        expires_at TIMESTAMPTZ,
        refreshed_at TIMESTAMPTZ,
        generation TEXT,
        manifest BYTEA
    );
    "#,
    // 3: fenced leases: each granted claim takes a number of `oai_bridge_fence` that only grows
    // (`fence`), which the holder's renewals, release and recorded generation must match, and
    // which the generation it published carries (`generation_fence`), as do its manifests;
    // `published` counts the generations recorded, for the followers' lag.
    r#"
    CREATE SEQUENCE oai_bridge_fence;
    ALTER TABLE oai_bridge_refreshes
        ADD COLUMN fence BIGINT,
        ADD COLUMN generation_fence BIGINT,
        ADD COLUMN published BIGINT NOT NULL DEFAULT 0;
    "#,
    // 4: a change keeps the record's sets beside it, so that the publish reads the changes
    // alone (`Conn::changes_after`); one listed before has none (NULL), and its sets are read
    // from the record. (A gateway of a version before refuses the schema, so none lists
    // changes without them after.)
    r#"
    ALTER TABLE oai_bridge_changes ADD COLUMN now_sets TEXT;
    "#,
];

/// The key of the advisory lock that migrations hold ("oaibrdg1").
const MIGRATION_LOCK: i64 = 0x6f61_6962_7264_6731;

/// Rows per batch read back ([`Postgres::for_each_live`], [`Postgres::dirty`]).
const BATCH: i64 = 1000;

/// How long a connection attempt may take when the URL says nothing (`connect_timeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A PostgreSQL database's URL (`postgres://` or `postgresql://`), read and checked, with its
/// TLS settings. It holds the password, if any: it shows (`Debug`, [`StateUrl::redacted`])
/// without it.
#[derive(Clone)]
pub struct StateUrl {
    text: String,
    config: std::sync::Arc<postgres::Config>,
    /// The URL without the TLS settings, which tokio-postgres does not read.
    rest: String,
    tls: Tls,
    /// The password given beside the URL (`[state] password_file`), which `rest` lacks.
    password: Option<String>,
}

impl StateUrl {
    /// Reads `text`, and the certificate files its TLS settings name; the error never repeats
    /// the URL (it may hold a password).
    pub fn parse(text: &str) -> Result<StateUrl, String> {
        let scheme = text.split_once("://").map(|(s, _)| s);
        if !matches!(scheme, Some("postgres" | "postgresql")) {
            return Err(
                "is not a PostgreSQL URL: give postgres://user:password@host:port/database".into(),
            );
        }
        let (rest, tls) = Tls::split(text);
        let mut config: postgres::Config = rest
            .parse()
            .map_err(|e| format!("is not a PostgreSQL URL that can be read: {e}"))?;
        if config.get_hosts().is_empty() {
            return Err("names no host: give postgres://user@host:port/database".into());
        }
        let tls = Tls::new(&tls, config.get_hosts())?;
        config.ssl_mode(tls.wire());
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("oai-bridge");
        }
        Ok(StateUrl {
            text: text.to_owned(),
            config: std::sync::Arc::new(config),
            rest,
            tls,
            password: None,
        })
    }

    /// This URL with `password`, given beside it (`[state] password_file`); `Err` when the
    /// URL holds a password of its own.
    pub fn with_password(&self, password: &str) -> Result<StateUrl, String> {
        if self.config.get_password().is_some() {
            return Err("the [state] url holds a password too: give it in one place".into());
        }
        let mut url = self.clone();
        std::sync::Arc::make_mut(&mut url.config).password(password);
        url.password = Some(password.to_owned());
        Ok(url)
    }

    /// Whether the URL carries a password (of its own or given beside it).
    pub fn has_password(&self) -> bool {
        self.config.get_password().is_some()
    }

    /// What is valid in the URL but unsafe (cleartext, or a certificate nobody checks, to a
    /// host that is not loopback), a sentence for the start's warnings.
    pub fn warning(&self) -> Option<String> {
        (self.tls.warning()).map(|w| format!("{}: {w}", self.redacted()))
    }

    /// The URL without its password, nor any setting but user, hosts, ports and database:
    /// `postgres://user@host:port/database`, for errors and logs.
    pub fn redacted(&self) -> String {
        let c = &self.config;
        let ports = c.get_ports();
        let hosts: Vec<String> = (c.get_hosts().iter().enumerate())
            .map(|(i, host)| {
                let mut shown = match host {
                    Host::Tcp(name) if name.contains(':') => format!("[{name}]"),
                    Host::Tcp(name) => name.clone(),
                    Host::Unix(path) => percent_encoding::utf8_percent_encode(
                        &path.display().to_string(),
                        percent_encoding::NON_ALPHANUMERIC,
                    )
                    .to_string(),
                };
                if let Some(port) = ports.get(i).or(ports.first()) {
                    shown.push_str(&format!(":{port}"));
                }
                shown
            })
            .collect();
        let user = c.get_user().map(|u| format!("{u}@")).unwrap_or_default();
        let db = c.get_dbname().unwrap_or_default();
        format!("postgres://{user}{}/{db}", hosts.join(","))
    }
}

impl StateUrl {
    /// The connection settings for an asynchronous client (the gateway's leases), with the
    /// same defaults as the store's.
    pub fn async_config(&self) -> tokio_postgres::Config {
        let mut config: tokio_postgres::Config =
            (self.rest.parse()).expect("the URL was read by the same parser in StateUrl::parse");
        config.ssl_mode(self.tls.wire());
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("oai-bridge");
        }
        if let Some(password) = &self.password {
            config.password(password);
        }
        config
    }

    /// How long a whole connection attempt may take, handshakes included: the URL's
    /// `connect_timeout` (10 s when it gives none) for each of its hosts.
    pub fn connect_bound(&self) -> Duration {
        let each = self.config.get_connect_timeout().copied();
        let hosts = self.config.get_hosts().len().max(1) as u32;
        each.unwrap_or(CONNECT_TIMEOUT).saturating_mul(hosts)
    }

    /// The TLS connector of every connection to the database.
    pub fn tls(&self) -> tokio_postgres_rustls::MakeRustlsConnect {
        self.tls.connector()
    }

    /// A connection of its own to the database, on the caller's thread (which must not be one
    /// of a tokio runtime's: the client blocks on a runtime of its own).
    pub(super) fn connect(&self) -> Result<Client, Failure> {
        connect(&self.config, &self.tls)
    }
}

/// A connection to the database `config` names; a failure of TLS says the TLS settings too.
fn connect(config: &postgres::Config, tls: &Tls) -> Result<Client, Failure> {
    config.connect(tls.connector()).map_err(|e| Failure {
        what: "cannot connect",
        source: match tls.explain(&e) {
            Some(explained) => explained.into(),
            None => with_server_message(e),
        },
    })
}

/// PostgreSQL's error with the server's message in its own text: `postgres::Error` says only
/// "db error" and keeps the message (a refused password, a missing database) in its source,
/// which a log line of the error alone drops.
fn with_server_message(e: postgres::Error) -> Box<dyn std::error::Error + Send + Sync> {
    match e.as_db_error() {
        Some(db) => format!("{e}: {db}").into(),
        None => Box::new(e),
    }
}

impl std::fmt::Debug for StateUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StateUrl({})", self.redacted())
    }
}

impl PartialEq for StateUrl {
    fn eq(&self, other: &StateUrl) -> bool {
        self.text == other.text && self.password == other.password
    }
}

impl Eq for StateUrl {}

/// A failure in the worker: what was being done, and why.
pub(super) struct Failure {
    /// What was being done.
    pub(super) what: &'static str,
    /// PostgreSQL's error, or why what was read cannot be used.
    pub(super) source: Box<dyn std::error::Error + Send + Sync>,
}

/// Names what was being done when a PostgreSQL call failed.
pub(super) trait Doing<T> {
    /// The error, as a [`Failure`] of `what`.
    fn doing(self, what: &'static str) -> Result<T, Failure>;
}

impl<T> Doing<T> for Result<T, postgres::Error> {
    fn doing(self, what: &'static str) -> Result<T, Failure> {
        self.map_err(|e| Failure {
            what,
            source: with_server_message(e),
        })
    }
}

/// A job for the worker thread.
type Job = Box<dyn FnOnce(&mut Conn) + Send>;

/// The worker's side: the connection, its prepared statements, and whose store it is.
struct Conn {
    client: Client,
    statements: HashMap<&'static str, Statement>,
    repository: String,
}

/// One repository's store in a PostgreSQL database.
pub(super) struct Postgres {
    /// The worker's queue; `None` once dropped.
    jobs: Option<mpsc::Sender<Job>>,
    /// The worker, joined on drop so that the connection is closed when the store is.
    thread: Option<JoinHandle<()>>,
    place: Place,
}

impl std::fmt::Debug for Postgres {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Postgres({})", self.place)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A row of the records, read back: identifier, datestamp, sets, body.
type LiveRow = (String, Option<i64>, String, Vec<u8>);

/// A row of the changes, read back: identifier, datestamp, deleted, body; the version
/// published: live, body, datestamp; and the record's sets now (`None` until they are read
/// from the record's row: [`Conn::changes_after`]).
type ChangeRow = (
    String,
    Option<i64>,
    bool,
    Vec<u8>,
    Option<bool>,
    Option<Vec<u8>>,
    Option<i64>,
    Option<String>,
);

impl Postgres {
    /// Connects on a worker thread of its own, applies the migrations, and opens
    /// `repository`'s store (started anew when its state is of a format this version does not
    /// read).
    pub(super) fn open(url: &super::StateUrl, repository: &str) -> Result<Self, StoreError> {
        let store = Self::connected(url, repository)?;
        let unknown_format = store.call(|c| c.open_repository())?;
        if unknown_format {
            tracing::warn!(
                store = %store.place,
                "the store's state is of a format this version does not read (a newer version \
                 wrote it): starting the store anew"
            );
        }
        Ok(store)
    }

    /// What the stores of `repositories` remember ([`super::Store::state`]), read in one query
    /// on one connection: a gateway of thousands of repositories starts without a connection
    /// for each. A repository with no state saved is left out, and so is one whose state is of
    /// a format this version does not read: [`Postgres::open`] starts its store anew, so it
    /// remembers nothing. Errors name the first repository, whose store opened first before.
    pub(super) fn states(
        url: &super::StateUrl,
        repositories: Vec<String>,
    ) -> Result<HashMap<String, State>, StoreError> {
        let Some(first) = repositories.first().cloned() else {
            return Ok(HashMap::new());
        };
        let store = Self::connected(url, &first)?;
        let docs = store.call(move |c| {
            let stmt = c.prepared(
                "SELECT repository, doc FROM oai_bridge_state WHERE repository = ANY($1)",
            )?;
            let rows = (c.client.query(&stmt, &[&repositories])).doing("cannot read the state")?;
            Ok(rows
                .into_iter()
                .map(|r| (r.get::<_, String>(0), r.get::<_, String>(1)))
                .collect::<Vec<_>>())
        })?;
        (docs
            .into_iter()
            .filter(|(_, doc)| !persisted::of_unknown_format(doc)))
        .map(|(repository, doc)| {
            let state = serde_json::from_str(&doc).map_err(|e| StoreError::Failed {
                place: Place::Postgres {
                    url: url.redacted(),
                    repository: repository.clone(),
                },
                what: "cannot parse the state",
                source: Box::new(e),
            })?;
            Ok((repository, state))
        })
        .collect()
    }

    /// Connects on a worker thread of its own and applies the migrations; errors name
    /// `repository`'s store.
    fn connected(url: &super::StateUrl, repository: &str) -> Result<Self, StoreError> {
        let place = Place::Postgres {
            url: url.redacted(),
            repository: repository.to_owned(),
        };
        let (jobs, queue) = mpsc::channel::<Job>();
        let (ready, connected) = mpsc::sync_channel::<Result<(), Failure>>(1);
        let config = std::sync::Arc::clone(&url.config);
        let tls = url.tls.clone();
        let name = repository.to_owned();
        let thread = std::thread::Builder::new()
            .name(format!("store-{repository}"))
            .spawn(move || {
                let client = match connect(&config, &tls) {
                    Ok(client) => client,
                    Err(e) => {
                        let _ = ready.send(Err(e));
                        return;
                    }
                };
                let mut conn = Conn {
                    client,
                    statements: HashMap::new(),
                    repository: name,
                };
                let _ = ready.send(Ok(()));
                while let Ok(job) = queue.recv() {
                    job(&mut conn);
                }
            })
            .map_err(|e| StoreError::Failed {
                place: place.clone(),
                what: "cannot start its thread",
                source: Box::new(e),
            })?;
        let store = Postgres {
            jobs: Some(jobs),
            thread: Some(thread),
            place,
        };
        // The client's `connect_timeout` bounds the TCP connect only: a server that accepts and
        // never answers the startup (or TLS) handshake would hold this caller for ever.
        let bound = url.connect_bound();
        match connected.recv_timeout(bound) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(store.error(e)),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let mut store = store;
                // Not joined: the worker ends on its own once its connect gives up or
                // returns, finding its queue closed.
                drop(store.thread.take());
                return Err(store.error(Failure {
                    what: "cannot connect",
                    source: format!(
                        "no answer to the connection's handshake within {bound:?} \
                         (the URL's connect_timeout)"
                    )
                    .into(),
                }));
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => return Err(store.stopped()),
        }
        store.call(|c| c.migrate())?;
        Ok(store)
    }

    fn error(&self, failure: Failure) -> StoreError {
        StoreError::Failed {
            place: self.place.clone(),
            what: failure.what,
            source: failure.source,
        }
    }

    fn stopped(&self) -> StoreError {
        StoreError::Failed {
            place: self.place.clone(),
            what: "its connection's thread stopped",
            source: "the worker ended (a panic, or the connection was lost)".into(),
        }
    }

    /// Sends `job` to the worker; its answer comes on the channel returned.
    fn send<R: Send + 'static>(
        &self,
        job: impl FnOnce(&mut Conn) -> Result<R, Failure> + Send + 'static,
    ) -> Result<mpsc::Receiver<Result<R, Failure>>, StoreError> {
        let (answer, answered) = mpsc::sync_channel(1);
        let sent = (self.jobs.as_ref()).map(|jobs| {
            jobs.send(Box::new(move |conn: &mut Conn| {
                let _ = answer.send(job(conn));
            }))
        });
        match sent {
            Some(Ok(())) => Ok(answered),
            _ => Err(self.stopped()),
        }
    }

    /// The answer to a job sent.
    fn answer<R>(&self, answered: &mpsc::Receiver<Result<R, Failure>>) -> Result<R, StoreError> {
        match answered.recv() {
            Ok(result) => result.map_err(|e| self.error(e)),
            Err(_) => Err(self.stopped()),
        }
    }

    /// Runs `job` on the worker and waits for its answer.
    fn call<R: Send + 'static>(
        &self,
        job: impl FnOnce(&mut Conn) -> Result<R, Failure> + Send + 'static,
    ) -> Result<R, StoreError> {
        let answered = self.send(job)?;
        self.answer(&answered)
    }

    /// `state` as the store keeps it.
    fn doc(&self, state: &State) -> Result<String, StoreError> {
        serde_json::to_string(state).map_err(|e| StoreError::Failed {
            place: self.place.clone(),
            what: "cannot save the state",
            source: Box::new(e),
        })
    }

    /// Reads rows in batches of [`BATCH`] by key (`read`: those after the key given), asking
    /// for the next batch before handing this one's rows, made into items by `make` (`None`:
    /// damaged), to `f`; stops at `f`'s first error.
    fn batches<Row: Send + 'static, Item, E>(
        &self,
        read: fn(&mut Conn, Option<String>) -> Result<Vec<Row>, Failure>,
        key: impl Fn(&Row) -> String,
        make: impl Fn(Row) -> Option<Item>,
        mut f: impl FnMut(Item) -> Result<(), E>,
    ) -> Result<Result<(), E>, StoreError> {
        let mut pending = Some(self.send(move |c| read(c, None))?);
        while let Some(answered) = pending.take() {
            let rows = self.answer(&answered)?;
            if rows.len() as i64 == BATCH
                && let Some(last) = rows.last()
            {
                let after = key(last);
                pending = Some(self.send(move |c| read(c, Some(after)))?);
            }
            for row in rows {
                let id = key(&row);
                let Some(item) = make(row) else {
                    return Err(StoreError::Failed {
                        place: self.place.clone(),
                        what: "damaged record",
                        source: format!("the body of {id:?} cannot be read").into(),
                    });
                };
                if let Err(e) = f(item) {
                    return Ok(Err(e));
                }
            }
        }
        Ok(Ok(()))
    }

    /// The identifiers `sql` selects, given the repository as `$1` and a limit of `n` as `$2`.
    fn ids(
        &self,
        sql: &'static str,
        n: usize,
        what: &'static str,
    ) -> Result<Vec<String>, StoreError> {
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        self.call(move |c| {
            let stmt = c.prepared(sql)?;
            let rows = c.client.query(&stmt, &[&c.repository, &n]).doing(what)?;
            Ok(rows.iter().map(|r| r.get(0)).collect())
        })
    }

    /// The one number `sql` selects, given the repository as `$1`.
    fn number(&self, sql: &'static str, what: &'static str) -> Result<u64, StoreError> {
        self.call(move |c| {
            let stmt = c.prepared(sql)?;
            let row = c.client.query_one(&stmt, &[&c.repository]).doing(what)?;
            Ok(row.get::<_, i64>(0) as u64)
        })
    }
}

impl Backend for Postgres {
    /// Where the store is.
    fn place(&self) -> Place {
        self.place.clone()
    }

    /// [`super::Store::state`] on PostgreSQL.
    fn state(&self) -> Result<State, StoreError> {
        let doc = self.call(|c| c.state_doc())?;
        match doc {
            None => Ok(State::default()),
            Some(doc) => serde_json::from_str(&doc).map_err(|e| StoreError::Failed {
                place: self.place.clone(),
                what: "cannot parse the state",
                source: Box::new(e),
            }),
        }
    }

    /// [`super::Store::save_state`] on PostgreSQL.
    fn save_state(&mut self, state: &State) -> Result<(), StoreError> {
        let doc = self.doc(state)?;
        self.call(move |c| {
            let save = c.prepared(SAVE_STATE)?;
            let repository = c.repository.clone();
            (c.client.execute(&save, &[&repository, &doc]))
                .doing("cannot save the state")
                .map(drop)
        })
    }

    /// [`super::Store::reset`] on PostgreSQL: this repository's rows alone.
    fn reset(&mut self, state: &State) -> Result<(), StoreError> {
        let doc = self.doc(state)?;
        self.call(move |c| {
            let save = c.prepared(SAVE_STATE)?;
            let repository = c.repository.clone();
            let mut tx = c.client.transaction().doing("cannot begin a transaction")?;
            empty(&mut tx, &repository, false)?;
            (tx.execute(&save, &[&repository, &doc])).doing("cannot save the state")?;
            tx.commit().doing("cannot commit the reset")
        })
    }

    /// [`super::Store::apply_page`] on PostgreSQL: the page's records are made ready here,
    /// written by the worker in a few statements.
    fn apply_page(
        &mut self,
        run: u64,
        records: &[Record],
        state: &State,
        track: bool,
    ) -> Result<(), StoreError> {
        let page: Vec<Incoming> = records.iter().map(Incoming::of).collect();
        let doc = self.doc(state)?;
        self.call(move |c| c.apply_page(run as i64, page, &doc, track))
    }

    /// [`super::Store::finish_run`] on PostgreSQL.
    fn finish_run(
        &mut self,
        full: bool,
        sweep: Option<u64>,
        state: &State,
    ) -> Result<u64, StoreError> {
        debug_assert!(full || sweep.is_none(), "only a full harvest sweeps");
        let doc = self.doc(state)?;
        self.call(move |c| {
            let save = c.prepared(SAVE_STATE)?;
            let repository = c.repository.clone();
            let mut tx = c.client.transaction().doing("cannot begin a transaction")?;
            let mut removed = 0;
            if let Some(run) = sweep {
                let run = run as i64;
                removed = tx
                    .query_one(
                        "SELECT count(*) FROM oai_bridge_records
                         WHERE repository = $1 AND seen <> $2 AND NOT deleted",
                        &[&repository, &run],
                    )
                    .doing("cannot count unseen records")?
                    .get::<_, i64>(0) as u64;
                for table in ["oai_bridge_records", "oai_bridge_rejected"] {
                    tx.execute(
                        &format!("DELETE FROM {table} WHERE repository = $1 AND seen <> $2"),
                        &[&repository, &run],
                    )
                    .doing("cannot remove unseen records")?;
                }
            }
            if full {
                tx.execute(
                    "UPDATE oai_bridge_tally SET (live, deleted) = (
                       SELECT count(*) FILTER (WHERE NOT deleted), count(*) FILTER (WHERE deleted)
                       FROM oai_bridge_records WHERE repository = $1)
                     WHERE repository = $1",
                    &[&repository],
                )
                .doing("cannot count the records")?;
            }
            (tx.execute(&save, &[&repository, &doc])).doing("cannot save the state")?;
            tx.commit().doing("cannot commit the end of a run")?;
            Ok(removed)
        })
    }

    /// [`super::Store::dirty`] on PostgreSQL: in identifier order.
    fn dirty(
        &self,
        f: Visit<'_, (Record, Option<Record>)>,
    ) -> Result<Result<(), Stopped>, StoreError> {
        self.batches(
            |c, after| c.changes_after(after),
            |row: &ChangeRow| row.0.clone(),
            |(id, datestamp, deleted, body, prev_live, prev_body, prev_datestamp, sets)| {
                let mut now = Record {
                    identifier: id,
                    datestamp: datestamp.map(Datestamp::unpack),
                    deleted,
                    sets: super::split_sets(sets.as_deref().unwrap_or_default()),
                    ..Record::default()
                };
                let mut before = match prev_live.unwrap_or(false) {
                    true => Some(Record {
                        identifier: now.identifier.clone(),
                        datestamp: prev_datestamp.map(Datestamp::unpack),
                        ..Record::default()
                    }),
                    false => None,
                };
                let whole = decode_body(&body, &mut now)
                    && before
                        .as_mut()
                        .is_none_or(|b| decode_body(prev_body.as_deref().unwrap_or(&[]), b));
                whole.then_some((now, before))
            },
            f,
        )
    }

    /// [`super::Store::for_each_live`] on PostgreSQL.
    fn for_each_live(&self, f: Visit<'_, Record>) -> Result<Result<(), Stopped>, StoreError> {
        self.batches(
            |c, after| c.live_after(after),
            |row: &LiveRow| row.0.clone(),
            |(id, datestamp, sets, body)| {
                let mut record = Record {
                    identifier: id,
                    datestamp: datestamp.map(Datestamp::unpack),
                    deleted: false,
                    sets: super::split_sets(&sets),
                    ..Record::default()
                };
                decode_body(&body, &mut record).then_some(record)
            },
            f,
        )
    }

    /// [`super::Store::rejected`] on PostgreSQL.
    fn rejected(&self) -> Result<u64, StoreError> {
        self.number(
            "SELECT count(*) FROM oai_bridge_rejected WHERE repository = $1",
            "cannot count the rejected records",
        )
    }

    /// [`super::Store::rejected_examples`] on PostgreSQL.
    fn rejected_examples(&self, n: usize) -> Result<Vec<String>, StoreError> {
        self.ids(
            "SELECT id FROM oai_bridge_rejected WHERE repository = $1 ORDER BY id LIMIT $2",
            n,
            "cannot read the rejected records",
        )
    }

    /// [`super::Store::deleted_examples`] on PostgreSQL: from the partial index of deleted
    /// records.
    fn deleted_examples(&self, n: usize) -> Result<Vec<String>, StoreError> {
        self.ids(
            "SELECT id FROM oai_bridge_records WHERE repository = $1 AND deleted
             ORDER BY id LIMIT $2",
            n,
            "cannot read the deleted records",
        )
    }

    /// [`super::Store::changed`] on PostgreSQL.
    fn changed(&self) -> Result<u64, StoreError> {
        self.number(
            "SELECT count(*) FROM oai_bridge_changes WHERE repository = $1",
            "cannot count the changed records",
        )
    }

    /// [`super::Store::shared_urls`] on PostgreSQL.
    fn shared_urls(&self, limit: u64) -> Result<Option<HashSet<String>>, StoreError> {
        let asked = limit.saturating_add(1).min(i64::MAX as u64) as i64;
        self.call(move |c| {
            let stmt =
                c.prepared("SELECT url FROM oai_bridge_shared WHERE repository = $1 LIMIT $2")?;
            let rows = (c.client.query(&stmt, &[&c.repository, &asked]))
                .doing("cannot read the shared URLs")?;
            let urls: HashSet<String> = rows.iter().map(|r| r.get(0)).collect();
            Ok(Some(urls).filter(|u| u.len() as u64 <= limit))
        })
    }

    /// [`super::Store::shared`] on PostgreSQL.
    fn shared(&self, url: &str) -> Result<Option<SharedUrl>, StoreError> {
        let url = url.to_owned();
        self.call(move |c| {
            let stmt = c.prepared(
                "SELECT claims FROM oai_bridge_shared WHERE repository = $1 AND url = $2",
            )?;
            let row = (c.client.query_opt(&stmt, &[&c.repository, &url]))
                .doing("cannot read the shared URLs")?;
            Ok(row.map(|row| {
                // Packed datestamps, eight little-endian bytes each.
                let bytes: Vec<u8> = row.get(0);
                SharedUrl {
                    url,
                    claims: bytes
                        .chunks_exact(8)
                        .map(|c| i64::from_le_bytes(c.try_into().expect("eight bytes")))
                        .collect(),
                }
            }))
        })
    }

    /// [`super::Store::published`] on PostgreSQL.
    fn published(
        &mut self,
        state: &State,
        shared: &[SharedUrl],
        replace: bool,
    ) -> Result<(), StoreError> {
        // The last word on a URL wins, as the SQLite store's statements in turn.
        let mut last: HashMap<&str, &SharedUrl> = HashMap::new();
        for s in shared {
            last.insert(&s.url, s);
        }
        let (mut urls, mut claims, mut gone) = (Vec::new(), Vec::new(), Vec::new());
        for (url, s) in last {
            if s.claims.len() < 2 {
                gone.push(url.to_owned());
            } else {
                urls.push(url.to_owned());
                claims.push(
                    (s.claims.iter())
                        .flat_map(|c| c.to_le_bytes())
                        .collect::<Vec<u8>>(),
                );
            }
        }
        let doc = self.doc(state)?;
        self.call(move |c| {
            let save = c.prepared(SAVE_STATE)?;
            let upsert = c.prepared(
                "INSERT INTO oai_bridge_shared (repository, url, claims)
                 SELECT $1, * FROM unnest($2::text[], $3::bytea[])
                 ON CONFLICT (repository, url) DO UPDATE SET claims = excluded.claims",
            )?;
            let delete = c.prepared(
                "DELETE FROM oai_bridge_shared WHERE repository = $1 AND url = ANY($2)",
            )?;
            let repository = c.repository.clone();
            let mut tx = c.client.transaction().doing("cannot begin a transaction")?;
            tx.execute(
                "DELETE FROM oai_bridge_changes WHERE repository = $1",
                &[&repository],
            )
            .doing("cannot mark the records published")?;
            if replace {
                tx.execute(
                    "DELETE FROM oai_bridge_shared WHERE repository = $1",
                    &[&repository],
                )
                .doing("cannot replace the shared URLs")?;
            }
            if !urls.is_empty() {
                (tx.execute(&upsert, &[&repository, &urls, &claims]))
                    .doing("cannot record the shared URLs")?;
            }
            if !gone.is_empty() {
                (tx.execute(&delete, &[&repository, &gone]))
                    .doing("cannot record the shared URLs")?;
            }
            (tx.execute(&save, &[&repository, &doc])).doing("cannot save the state")?;
            tx.commit().doing("cannot commit the publish")
        })
    }

    /// [`super::Store::verify`] on PostgreSQL: the database answers, and the state parses
    /// (PostgreSQL checks its own pages).
    fn verify(&self) -> Result<(), StoreError> {
        self.call(|c| {
            (c.client.simple_query("SELECT 1"))
                .doing("cannot query the database")
                .map(drop)
        })?;
        self.state().map(drop)
    }

    /// [`super::Store::counts`] on PostgreSQL.
    fn counts(&self) -> Result<Counts, StoreError> {
        self.call(|c| {
            let stmt = c.prepared(
                "SELECT count(*) FILTER (WHERE NOT deleted), count(*) FILTER (WHERE deleted)
                 FROM oai_bridge_records WHERE repository = $1",
            )?;
            let row =
                (c.client.query_one(&stmt, &[&c.repository])).doing("cannot count the records")?;
            Ok(Counts {
                live: row.get::<_, i64>(0) as u64,
                deleted: row.get::<_, i64>(1) as u64,
            })
        })
    }

    /// [`super::Store::live`] on PostgreSQL.
    fn live(&self) -> Result<u64, StoreError> {
        self.number(
            "SELECT coalesce((SELECT live FROM oai_bridge_tally WHERE repository = $1), 0)",
            "cannot count the records",
        )
    }

    /// [`super::Store::deleted`] on PostgreSQL.
    fn deleted(&self) -> Result<u64, StoreError> {
        self.number(
            "SELECT coalesce((SELECT deleted FROM oai_bridge_tally WHERE repository = $1), 0)",
            "cannot count the records",
        )
    }
}

/// Claims the lease on a repository's refresh (`oai_bridge_refreshes`, a fleet's): `$1` the
/// repository, `$2` the holder, `$3` the lease's length in seconds, `$4` claimed however fresh
/// the repository is, `$5` the interval (seconds) after its last refresh it is due. Granted (a
/// row returned) when nobody holds a live lease on it and it is due (or `$4`); never from a
/// live lease. The gateways of a fleet claim with it (the gateway's `server::fleet`), and so does
/// `migrate-state` while it copies a repository ([`super::copy`]).
/// The row returned holds the lease's fencing token (`fence`), taken from `oai_bridge_fence`: a
/// later claim always has a greater one.
pub const LEASE_CLAIM: &str =
    "INSERT INTO oai_bridge_refreshes (repository, holder, expires_at, fence)
     VALUES ($1, $2, now() + make_interval(secs => $3), nextval('oai_bridge_fence'))
     ON CONFLICT (repository) DO UPDATE
       SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at, fence = EXCLUDED.fence
       WHERE (oai_bridge_refreshes.expires_at IS NULL
              OR oai_bridge_refreshes.expires_at <= now())
         AND ($4 OR oai_bridge_refreshes.refreshed_at IS NULL
              OR oai_bridge_refreshes.refreshed_at <= now() - make_interval(secs => $5))
     RETURNING fence";

/// Renews `$2`'s live lease on `$1` for `$3` seconds more; no row changed when it holds none.
pub(crate) const LEASE_RENEW: &str =
    "UPDATE oai_bridge_refreshes SET expires_at = now() + make_interval(secs => $3)
     WHERE repository = $1 AND holder = $2 AND expires_at > now()";

/// Gives up `$2`'s lease on `$1`, leaving when the repository was last refreshed as it was.
pub(crate) const LEASE_RELEASE: &str =
    "UPDATE oai_bridge_refreshes SET holder = NULL, expires_at = NULL
     WHERE repository = $1 AND holder = $2";

/// Saves a repository's state document (`$1`, `$2`).
pub(super) const SAVE_STATE: &str = "INSERT INTO oai_bridge_state (repository, doc) VALUES ($1, $2)
     ON CONFLICT (repository) DO UPDATE SET doc = excluded.doc";

/// Removes `repository`'s records, changes, shared URLs and rejections, and zeroes its counts;
/// with `state`, its state too.
pub(super) fn empty(
    tx: &mut postgres::Transaction<'_>,
    repository: &str,
    state: bool,
) -> Result<(), Failure> {
    let mut tables = vec![
        "oai_bridge_records",
        "oai_bridge_changes",
        "oai_bridge_shared",
        "oai_bridge_rejected",
    ];
    if state {
        tables.push("oai_bridge_state");
    }
    for table in tables {
        tx.execute(
            &format!("DELETE FROM {table} WHERE repository = $1"),
            &[&repository],
        )
        .doing("cannot empty the records")?;
    }
    tx.execute(
        "UPDATE oai_bridge_tally SET live = 0, deleted = 0 WHERE repository = $1",
        &[&repository],
    )
    .doing("cannot empty the records")?;
    Ok(())
}

impl Conn {
    /// The statement of `sql`, prepared once per connection.
    fn prepared(&mut self, sql: &'static str) -> Result<Statement, Failure> {
        if let Some(stmt) = self.statements.get(sql) {
            return Ok(stmt.clone());
        }
        let stmt = self.client.prepare(sql).doing("cannot prepare a query")?;
        self.statements.insert(sql, stmt.clone());
        Ok(stmt)
    }

    /// [`migrate`] on this connection.
    fn migrate(&mut self) -> Result<(), Failure> {
        migrate(&mut self.client)
    }

    /// Makes the repository's counts, and starts its store anew when its state is of a format
    /// this version does not read; whether it did.
    fn open_repository(&mut self) -> Result<bool, Failure> {
        let repository = self.repository.clone();
        let mut tx = self
            .client
            .transaction()
            .doing("cannot begin a transaction")?;
        tx.execute(
            "INSERT INTO oai_bridge_tally (repository, live, deleted) VALUES ($1, 0, 0)
             ON CONFLICT (repository) DO NOTHING",
            &[&repository],
        )
        .doing("cannot create the store")?;
        let doc: Option<String> = tx
            .query_opt(
                "SELECT doc FROM oai_bridge_state WHERE repository = $1",
                &[&repository],
            )
            .doing("cannot read the state")?
            .map(|r| r.get(0));
        let unknown = doc.as_deref().is_some_and(persisted::of_unknown_format);
        if unknown {
            empty(&mut tx, &repository, true)?;
        }
        tx.commit().doing("cannot commit the store's opening")?;
        Ok(unknown)
    }

    /// The saved state, as saved.
    fn state_doc(&mut self) -> Result<Option<String>, Failure> {
        let stmt = self.prepared("SELECT doc FROM oai_bridge_state WHERE repository = $1")?;
        let row =
            (self.client.query_opt(&stmt, &[&self.repository])).doing("cannot read the state")?;
        Ok(row.map(|r| r.get(0)))
    }

    /// Up to [`BATCH`] live records after `after`, in identifier order.
    fn live_after(&mut self, after: Option<String>) -> Result<Vec<LiveRow>, Failure> {
        let rows = match after {
            None => {
                let stmt = self.prepared(
                    "SELECT id, datestamp, sets, body FROM oai_bridge_records
                     WHERE repository = $1 AND NOT deleted ORDER BY id LIMIT $2",
                )?;
                self.client.query(&stmt, &[&self.repository, &BATCH])
            }
            Some(after) => {
                let stmt = self.prepared(
                    "SELECT id, datestamp, sets, body FROM oai_bridge_records
                     WHERE repository = $1 AND NOT deleted AND id > $3 ORDER BY id LIMIT $2",
                )?;
                self.client
                    .query(&stmt, &[&self.repository, &BATCH, &after])
            }
        }
        .doing("cannot read the records")?;
        Ok(rows
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
            .collect())
    }

    /// Up to [`BATCH`] changes after `after`, in identifier order.
    fn changes_after(&mut self, after: Option<String>) -> Result<Vec<ChangeRow>, Failure> {
        // Each change keeps the record's sets beside it (`now_sets`, migration 4), so this reads
        // the changes alone, not each changed record's row too.
        macro_rules! changes {
            ($after:literal) => {
                concat!(
                    "SELECT id, now_datestamp, now_deleted, now_body, prev_live, prev_body,
                       prev_datestamp, now_sets FROM oai_bridge_changes WHERE repository = $1 ",
                    $after,
                    " ORDER BY id LIMIT $2"
                )
            };
        }
        let sql = match after.is_some() {
            false => changes!(""),
            true => changes!("AND id > $3"),
        };
        let stmt = self.prepared(sql)?;
        let rows = match &after {
            None => self.client.query(&stmt, &[&self.repository, &BATCH]),
            Some(after) => self.client.query(&stmt, &[&self.repository, &BATCH, after]),
        }
        .doing("cannot read the changed records")?;
        let mut read: Vec<ChangeRow> = (rows.iter())
            .map(|r| {
                let (id, datestamp, deleted, body) = (r.get(0), r.get(1), r.get(2), r.get(3));
                (
                    id,
                    datestamp,
                    deleted,
                    body,
                    r.get(4),
                    r.get(5),
                    r.get(6),
                    r.get(7),
                )
            })
            .collect();
        // A change listed before the column has no sets: the records' rows are read for those.
        let unlisted: Vec<&str> = (read.iter())
            .filter(|r| r.7.is_none())
            .map(|r| r.0.as_str())
            .collect();
        if !unlisted.is_empty() {
            let stmt = self.prepared(
                "SELECT id, sets FROM oai_bridge_records WHERE repository = $1 AND id = ANY($2)",
            )?;
            let found = (self.client.query(&stmt, &[&self.repository, &unlisted]))
                .doing("cannot read the changed records")?;
            let found: HashMap<String, String> =
                found.iter().map(|r| (r.get(0), r.get(1))).collect();
            for row in read.iter_mut().filter(|r| r.7.is_none()) {
                row.7 = Some(found.get(&row.0).cloned().unwrap_or_default());
            }
        }
        Ok(read)
    }

    /// Applies a page in one transaction: reads the stored versions and rejections of its
    /// records, decides the page ([`page::decide`]), and writes the decision with a statement
    /// per table.
    fn apply_page(
        &mut self,
        run: i64,
        page: Vec<Incoming>,
        doc: &str,
        track: bool,
    ) -> Result<(), Failure> {
        let read_stored = self.prepared(if track {
            "SELECT id, deleted, datestamp, body FROM oai_bridge_records
             WHERE repository = $1 AND id = ANY($2)"
        } else {
            "SELECT id, deleted, datestamp, NULL::bytea FROM oai_bridge_records
             WHERE repository = $1 AND id = ANY($2)"
        })?;
        let read_rejected = self.prepared(
            "SELECT id, datestamp, seen FROM oai_bridge_rejected
             WHERE repository = $1 AND id = ANY($2)",
        )?;
        let statements = PageStatements::prepare(self)?;
        let repository = self.repository.clone();
        let ids: Vec<&str> = {
            let mut seen = HashSet::new();
            (page.iter())
                .map(|r| r.id.as_str())
                .filter(|id| seen.insert(*id))
                .collect()
        };
        let mut tx = self
            .client
            .transaction()
            .doing("cannot begin a transaction")?;
        let stored: page::HashMap<String, Stored> = tx
            .query(&read_stored, &[&repository, &ids])
            .doing("cannot read a record")?
            .iter()
            .map(|row| {
                let deleted: bool = row.get(1);
                let stored = Stored {
                    live: !deleted,
                    datestamp: row.get(2),
                    body: row.get(3),
                };
                (row.get(0), stored)
            })
            .collect();
        let rejected: page::HashMap<String, Rejected> = tx
            .query(&read_rejected, &[&repository, &ids])
            .doing("cannot read the rejected records")?
            .iter()
            .map(|row| {
                let r = Rejected {
                    datestamp: row.get(1),
                    seen: row.get(2),
                };
                (row.get(0), r)
            })
            .collect();
        let decision = page::decide(&page, Held { stored, rejected }, run, track);
        statements.write(&mut tx, &repository, run, &page, &decision)?;
        if track && (decision.live, decision.deleted) != (0, 0) {
            tx.execute(
                "UPDATE oai_bridge_tally SET live = live + $2, deleted = deleted + $3
                 WHERE repository = $1",
                &[&repository, &decision.live, &decision.deleted],
            )
            .doing("cannot count the records")?;
        }
        (tx.execute(&statements.save, &[&repository, &doc])).doing("cannot save the checkpoint")?;
        tx.commit().doing("cannot commit a page")
    }
}

/// The statements that write a page's [`page::Decision`], prepared on the connection.
struct PageStatements {
    insert: Statement,
    update: Statement,
    keep: Statement,
    reject: Statement,
    settle: Statement,
    track_change: Statement,
    save: Statement,
}

impl PageStatements {
    /// Prepares them on `c` (once per connection: [`Conn::prepared`]).
    fn prepare(c: &mut Conn) -> Result<Self, Failure> {
        // New records are inserted and stored ones updated, each with its own statement: the
        // page's stored versions were read in this transaction, and one writer at a time
        // holds a repository's store (the gateway's lock, the fleet's lease). Should another
        // write it all the same (an export naming a gateway's repository), the page fails: an
        // insert on the key, an update on the rows it missed; it never overwrites. An
        // `INSERT ... ON CONFLICT DO UPDATE` of every row costs the server about twice a plain
        // insert on a full refresh (benches/postgres).
        let insert = c.prepared(
            "INSERT INTO oai_bridge_records (repository, id, datestamp, deleted, sets, body, seen)
             SELECT $1, id, datestamp, deleted, sets, body, $7
             FROM unnest($2::text[], $3::int8[], $4::bool[], $5::text[], $6::bytea[])
               AS p (id, datestamp, deleted, sets, body)",
        )?;
        let update = c.prepared(
            "UPDATE oai_bridge_records AS r SET datestamp = p.datestamp, deleted = p.deleted,
               sets = p.sets, body = p.body, seen = $7
             FROM unnest($2::text[], $3::int8[], $4::bool[], $5::text[], $6::bytea[])
               AS p (id, datestamp, deleted, sets, body)
             WHERE r.repository = $1 AND r.id = p.id",
        )?;
        let keep = c.prepared(
            "UPDATE oai_bridge_records SET seen = $3 WHERE repository = $1 AND id = ANY($2)",
        )?;
        let reject = c.prepared(
            "INSERT INTO oai_bridge_rejected (repository, id, datestamp, seen)
             SELECT $1, * FROM unnest($2::text[], $3::int8[], $4::int8[])
             ON CONFLICT (repository, id) DO UPDATE SET datestamp = excluded.datestamp,
               seen = excluded.seen",
        )?;
        let settle =
            c.prepared("DELETE FROM oai_bridge_rejected WHERE repository = $1 AND id = ANY($2)")?;
        // A change keeps the version of an earlier one: the version last published.
        let track_change = c.prepared(
            "INSERT INTO oai_bridge_changes (repository, id, prev_live, prev_datestamp,
               prev_body, now_deleted, now_datestamp, now_body, now_sets)
             SELECT $1, * FROM unnest($2::text[], $3::bool[], $4::int8[], $5::bytea[],
               $6::bool[], $7::int8[], $8::bytea[], $9::text[])
             ON CONFLICT (repository, id) DO UPDATE SET now_deleted = excluded.now_deleted,
               now_datestamp = excluded.now_datestamp, now_body = excluded.now_body,
               now_sets = excluded.now_sets",
        )?;
        let save = c.prepared(SAVE_STATE)?;
        Ok(Self {
            insert,
            update,
            keep,
            reject,
            settle,
            track_change,
            save,
        })
    }

    /// Writes `decision` of `page`, seen by `run`, in `tx`.
    fn write(
        &self,
        tx: &mut postgres::Transaction<'_>,
        repository: &str,
        run: i64,
        page: &[Incoming],
        decision: &page::Decision<'_>,
    ) -> Result<(), Failure> {
        for (rows, statement) in [
            (&decision.inserted, &self.insert),
            (&decision.updated, &self.update),
        ] {
            if rows.is_empty() {
                continue;
            }
            let rows = || rows.iter().map(|&i| &page[i]);
            let ids: Vec<&str> = rows().map(|r| r.id.as_str()).collect();
            let datestamps: Vec<Option<i64>> = rows().map(|r| r.datestamp).collect();
            let deleted: Vec<bool> = rows().map(|r| r.deleted).collect();
            let sets: Vec<&str> = rows().map(|r| r.sets.as_str()).collect();
            let bodies: Vec<&[u8]> = rows().map(|r| r.body.as_slice()).collect();
            let params: [&(dyn postgres::types::ToSql + Sync); 7] = [
                &repository,
                &ids,
                &datestamps,
                &deleted,
                &sets,
                &bodies,
                &run,
            ];
            let written = (tx.execute(statement, &params)).doing("cannot store a record")?;
            // An update that misses a row read above: another writer removed it meanwhile.
            if written != ids.len() as u64 {
                return Err(Failure {
                    what: "cannot store a record",
                    source: format!(
                        "{} of the page's {} stored records were no longer there: another \
                         process writes this repository's store",
                        ids.len() as u64 - written,
                        ids.len()
                    )
                    .into(),
                });
            }
        }
        let kept = &decision.kept;
        if !kept.is_empty() {
            (tx.execute(&self.keep, &[&repository, kept, &run])).doing("cannot store a record")?;
        }
        if !decision.rejected.is_empty() {
            let ids: Vec<&str> = decision.rejected.iter().map(|(id, _)| *id).collect();
            let datestamps: Vec<Option<i64>> = (decision.rejected.iter())
                .map(|(_, r)| r.datestamp)
                .collect();
            let seen: Vec<i64> = decision.rejected.iter().map(|(_, r)| r.seen).collect();
            (tx.execute(&self.reject, &[&repository, &ids, &datestamps, &seen]))
                .doing("cannot store a record")?;
        }
        let settled = &decision.settled;
        if !settled.is_empty() {
            (tx.execute(&self.settle, &[&repository, settled])).doing("cannot store a record")?;
        }
        if !decision.changes.is_empty() {
            self.write_changes(tx, repository, page, &decision.changes)?;
        }
        Ok(())
    }

    /// Lists `changes` of `page` in `tx`.
    fn write_changes(
        &self,
        tx: &mut postgres::Transaction<'_>,
        repository: &str,
        page: &[Incoming],
        changes: &[page::Change<'_>],
    ) -> Result<(), Failure> {
        let ids: Vec<&str> = changes.iter().map(|c| c.id).collect();
        let prev = || changes.iter().map(|c| c.prev.as_ref());
        let prev_live: Vec<Option<bool>> = prev().map(|p| p.map(|p| p.0)).collect();
        let prev_datestamp: Vec<Option<i64>> = prev().map(|p| p.and_then(|p| p.1)).collect();
        let prev_body: Vec<Option<&[u8]>> = prev().map(|p| p.map(|p| p.2.as_slice())).collect();
        let now = || changes.iter().map(|c| &page[c.now]);
        let now_deleted: Vec<bool> = now().map(|r| r.deleted).collect();
        let now_datestamp: Vec<Option<i64>> = now().map(|r| r.datestamp).collect();
        let now_body: Vec<&[u8]> = now().map(|r| r.body.as_slice()).collect();
        let now_sets: Vec<&str> = now().map(|r| r.sets.as_str()).collect();
        tx.execute(
            &self.track_change,
            &[
                &repository,
                &ids,
                &prev_live,
                &prev_datestamp,
                &prev_body,
                &now_deleted,
                &now_datestamp,
                &now_body,
                &now_sets,
            ],
        )
        .doing("cannot store a record")?;
        Ok(())
    }
}

/// Applies the migrations the database lacks, in one transaction under an advisory lock;
/// refuses a database whose schema is newer than [`MIGRATIONS`].
pub(super) fn migrate(client: &mut Client) -> Result<(), Failure> {
    let known = MIGRATIONS.len() as i32;
    let mut tx = client.transaction().doing("cannot begin a transaction")?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .doing("cannot lock the schema")?;
    // Created only when missing: a schema created beforehand needs no CREATE privilege.
    let exists: bool = tx
        .query_one("SELECT to_regclass('oai_bridge_schema') IS NOT NULL", &[])
        .doing("cannot read the schema version")?
        .get(0);
    if !exists {
        tx.batch_execute(
            "CREATE TABLE oai_bridge_schema (
                 version INT PRIMARY KEY,
                 applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
             )",
        )
        .doing("cannot create the schema's table")?;
    }
    let version: i32 = tx
        .query_one(
            "SELECT coalesce(max(version), 0) FROM oai_bridge_schema",
            &[],
        )
        .doing("cannot read the schema version")?
        .get(0);
    if version > known {
        return Err(newer_schema(version));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version.max(0) as usize) {
        let to = i as i32 + 1;
        tx.batch_execute(sql)
            .doing("cannot apply a migration of the schema")?;
        tx.execute(
            "INSERT INTO oai_bridge_schema (version) VALUES ($1)",
            &[&to],
        )
        .doing("cannot record a migration of the schema")?;
        tracing::info!(version = to, "applied a migration of the state schema");
    }
    tx.commit().doing("cannot commit the schema's migrations")
}

/// The schema version of the database (0: none yet), read without a change; a version newer
/// than [`MIGRATIONS`] is refused as [`migrate`] refuses it.
pub(super) fn schema_version(client: &mut Client) -> Result<i32, Failure> {
    let exists: bool = client
        .query_one("SELECT to_regclass('oai_bridge_schema') IS NOT NULL", &[])
        .doing("cannot read the schema version")?
        .get(0);
    if !exists {
        return Ok(0);
    }
    let version: i32 = client
        .query_one(
            "SELECT coalesce(max(version), 0) FROM oai_bridge_schema",
            &[],
        )
        .doing("cannot read the schema version")?
        .get(0);
    if version > MIGRATIONS.len() as i32 {
        return Err(newer_schema(version));
    }
    Ok(version)
}

/// The refusal of a database whose schema is `version`, newer than [`MIGRATIONS`].
fn newer_schema(version: i32) -> Failure {
    let known = MIGRATIONS.len();
    Failure {
        what: "the database's schema is newer than this version of oai-bridge knows",
        source: format!(
            "the database's schema is version {version} (oai_bridge_schema), this version of \
             oai-bridge knows versions up to {known}: run a newer oai-bridge (the database is \
             left as it is)"
        )
        .into(),
    }
}

#[cfg(test)]
pub(crate) mod testdb {
    //! A database of its own for a test, on the server `OAI_BRIDGE_TEST_POSTGRES` names.

    /// A test's database, dropped at the end.
    pub(crate) struct TestDb {
        admin: String,
        name: String,
        /// Its URL.
        pub(crate) url: super::StateUrl,
    }

    impl TestDb {
        /// A new database; `None` (the test is skipped, and says so) when
        /// `OAI_BRIDGE_TEST_POSTGRES` is unset, except on CI (`CI` set), which must test it.
        pub(crate) fn create(test: &str) -> Option<TestDb> {
            let Some(admin) = std::env::var("OAI_BRIDGE_TEST_POSTGRES")
                .ok()
                .filter(|v| !v.is_empty())
            else {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "CI must test the PostgreSQL store: set OAI_BRIDGE_TEST_POSTGRES \
                     (.ci/postgres.sh starts a server)"
                );
                eprintln!("skipped: {test} on PostgreSQL (OAI_BRIDGE_TEST_POSTGRES is unset)");
                return None;
            };
            let name = format!("t_{}_{:x}", std::process::id(), fastrand::u64(..));
            let mut client = postgres::Client::connect(&admin, postgres::NoTls).unwrap();
            client
                .batch_execute(&format!("CREATE DATABASE {name}"))
                .unwrap();
            let mut url = url::Url::parse(&admin).unwrap();
            url.set_path(&format!("/{name}"));
            Some(TestDb {
                url: super::StateUrl::parse(url.as_str()).unwrap(),
                admin,
                name,
            })
        }

        /// A client of the database, for what a test does beside the store.
        pub(crate) fn client(&self) -> postgres::Client {
            self.url.config.connect(postgres::NoTls).unwrap()
        }
    }

    impl Drop for TestDb {
        fn drop(&mut self) {
            if let Ok(mut client) = postgres::Client::connect(&self.admin, postgres::NoTls) {
                let _ = client.batch_execute(&format!(
                    "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                    self.name
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testdb::TestDb;
    use super::*;
    use crate::Store;
    use postgres::config::SslMode;

    /// A server that accepts connections and never says a word, as a database stuck in its
    /// startup; held open while the test runs.
    fn silent_server() -> (std::net::TcpListener, u16) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        (listener, port)
    }

    /// tokio-postgres's `connect_timeout` bounds the TCP connect only: a server that accepts
    /// and never answers the handshake is given up on after the same bound, naming it.
    #[test]
    fn a_server_that_never_answers_the_handshake_is_given_up_on() {
        let (_server, port) = silent_server();
        let url = StateUrl::parse(&format!(
            "postgres://bridge@127.0.0.1:{port}/db?connect_timeout=1"
        ))
        .unwrap();
        assert_eq!(url.connect_bound(), Duration::from_secs(1));
        let started = std::time::Instant::now();
        let e = Store::open_postgres(&url, "a").unwrap_err().to_string();
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        assert!(
            e.contains("no answer to the connection's handshake within 1s")
                && e.contains(&format!("127.0.0.1:{port}")),
            "{e}"
        );
    }

    /// docs/operations.md says how many migrations this version knows (an older binary refuses
    /// a database with more): the number is this.
    #[test]
    fn the_operations_guide_counts_the_migrations() {
        let said = format!("`store::pg::MIGRATIONS`, now {}", MIGRATIONS.len());
        let guide = include_str!("../../../docs/operations.md");
        assert!(guide.contains(&said), "docs/operations.md lacks {said:?}");
    }

    /// The URL is shown without its password, whatever the form; it is refused when it is no
    /// PostgreSQL URL or its TLS settings are wrong, the error never repeating it.
    #[test]
    fn a_state_url_shows_without_its_password() {
        let url = StateUrl::parse("postgres://bridge:s3cret@db.example:5433/oai?sslmode=disable")
            .unwrap();
        assert_eq!(url.redacted(), "postgres://bridge@db.example:5433/oai");
        assert!(!format!("{url:?}").contains("s3cret"), "{url:?}");
        let url = StateUrl::parse("postgresql://bridge@h/oai?password=s3cret").unwrap();
        assert_eq!(url.redacted(), "postgres://bridge@h:5432/oai");
        let refused = [
            "mysql://bridge:s3cret@h/oai",
            "host=h password=s3cret",
            "postgres://bridge:s3cret@h/oai?sslmode=allow",
            "postgres://bridge:s3cret@h/oai?sslmode=verify-full&sslrootcert=/nonexistent",
            "postgres://bridge:s3cret@h:notaport/oai",
        ];
        for text in refused {
            let e = StateUrl::parse(text).unwrap_err();
            assert!(!e.contains("s3cret"), "{text}: {e}");
        }
        // The TLS settings are read here, not by tokio-postgres, which knows none but sslmode.
        let url = StateUrl::parse("postgres://h/oai?sslmode=require&connect_timeout=3").unwrap();
        assert_eq!(url.async_config().get_ssl_mode(), SslMode::Require);
        assert_eq!(
            url.config.get_connect_timeout(),
            Some(&Duration::from_secs(3))
        );
        let url = StateUrl::parse("postgres://h/oai?sslmode=verify-ca").unwrap_or_else(|e| {
            // The system's trust store is where verify-ca looks without sslrootcert.
            assert!(e.contains("trust store"), "{e}");
            StateUrl::parse("postgres://h/oai?sslmode=require").unwrap()
        });
        assert_eq!(url.config.get_ssl_mode(), SslMode::Require);
        assert_eq!(
            StateUrl::parse("postgres://a:b@h/d").unwrap(),
            StateUrl::parse("postgres://a:b@h/d").unwrap()
        );
    }

    /// An unreachable server's error names the store by its URL without the password.
    #[test]
    fn an_unreachable_database_is_named_without_its_password() {
        // A port nothing listens on: bound, then let go.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url =
            StateUrl::parse(&format!("postgres://bridge:s3cret@127.0.0.1:{port}/oai")).unwrap();
        let e = Store::open_postgres(&url, "sample")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(&format!(
                "state store postgres://bridge@127.0.0.1:{port}/oai (repository \"sample\"): cannot connect: "
            )),
            "{e}"
        );
        assert!(!e.contains("s3cret"), "{e}");
    }

    fn schema_versions(db: &TestDb) -> Vec<i32> {
        (db.client())
            .query(
                "SELECT version FROM oai_bridge_schema ORDER BY version",
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    }

    /// A new database gets every migration once; opening again (another repository, the same
    /// one, or many stores at once) applies none; a database whose schema is newer than this
    /// version knows is refused, naming both versions, and left as it is.
    #[test]
    fn migrations_are_applied_once_and_a_newer_schema_is_refused() {
        let Some(db) = TestDb::create("migrations_are_applied_once_and_a_newer_schema_is_refused")
        else {
            return;
        };
        let known = MIGRATIONS.len() as i32;
        let mut store = Store::open_postgres(&db.url, "a").unwrap();
        assert_eq!(schema_versions(&db), (1..=known).collect::<Vec<_>>());
        let tables: i64 = (db.client())
            .query_one(
                "SELECT count(*) FROM information_schema.tables WHERE table_name LIKE 'oai_bridge_%'",
                &[],
            )
            .unwrap()
            .get(0);
        assert_eq!(
            tables, 8,
            "six tables of the store, the fleet's and the schema's"
        );
        let record = Record {
            identifier: "oai:x:1".into(),
            dc_identifiers: vec!["https://h/1".into()],
            ..Record::default()
        };
        store
            .apply_page(1, std::slice::from_ref(&record), &State::default(), false)
            .unwrap();
        drop(store);
        // Stores opening at once, as a gateway's repositories do: the lock orders them.
        let opened: Vec<_> = (0..6)
            .map(|i| {
                let url = db.url.clone();
                std::thread::spawn(move || {
                    Store::open_postgres(&url, &format!("r{}", i % 3)).map(drop)
                })
            })
            .collect();
        for o in opened {
            o.join().unwrap().unwrap();
        }
        let store = Store::open_postgres(&db.url, "a").unwrap();
        assert_eq!(schema_versions(&db), (1..=known).collect::<Vec<_>>());
        assert_eq!(store.counts().unwrap().live, 1, "the records stay");
        drop(store);

        (db.client())
            .execute(
                "INSERT INTO oai_bridge_schema (version) VALUES ($1)",
                &[&(known + 1)],
            )
            .unwrap();
        let e = Store::open_postgres(&db.url, "a").unwrap_err().to_string();
        assert!(
            e.contains(&format!("version {}", known + 1))
                && e.contains(&format!("versions up to {known}")),
            "{e}"
        );
        let kept: i64 = (db.client())
            .query_one("SELECT count(*) FROM oai_bridge_records", &[])
            .unwrap()
            .get(0);
        assert_eq!(kept, 1, "a newer schema is left as it is");
    }

    /// One database holds several repositories' stores: each sees its own records, counts,
    /// changes, shared URLs, rejections and state; a reset, or a store started anew for a state
    /// it cannot read, empties its own alone.
    #[test]
    fn the_repositories_of_one_database_do_not_see_each_other() {
        let Some(db) = TestDb::create("the_repositories_of_one_database_do_not_see_each_other")
        else {
            return;
        };
        let mut a = Store::open_postgres(&db.url, "a").unwrap();
        let mut b = Store::open_postgres(&db.url, "b").unwrap();
        let rec = |id: &str, url: &str| Record {
            identifier: id.into(),
            datestamp: Datestamp::parse("2024-05-01"),
            dc_identifiers: vec![url.into()],
            ..Record::default()
        };
        let state_a = State {
            source: "https://a/oai".into(),
            ..State::default()
        };
        a.apply_page(
            1,
            &[rec("oai:1", "https://a/1"), rec("oai:2", "https://a/2")],
            &state_a,
            true,
        )
        .unwrap();
        let empty = Record {
            empty_metadata: true,
            ..rec("oai:9", "")
        };
        a.apply_page(1, &[empty], &state_a, true).unwrap();
        b.apply_page(7, &[rec("oai:1", "https://b/1")], &State::default(), false)
            .unwrap();
        let shared = SharedUrl {
            url: "https://a/s".into(),
            claims: vec![1, 2],
        };
        a.published(&state_a, std::slice::from_ref(&shared), true)
            .unwrap();
        a.apply_page(2, &[rec("oai:3", "https://a/3")], &state_a, true)
            .unwrap();
        assert_eq!((a.counts().unwrap().live, b.counts().unwrap().live), (3, 1));
        assert_eq!((a.live().unwrap(), b.live().unwrap()), (3, 0));
        assert_eq!((a.changed().unwrap(), b.changed().unwrap()), (1, 0));
        assert_eq!((a.rejected().unwrap(), b.rejected().unwrap()), (1, 0));
        assert_eq!(b.shared("https://a/s").unwrap(), None);
        assert_eq!(a.shared("https://a/s").unwrap(), Some(shared));
        assert_eq!(b.state().unwrap(), State::default());
        assert_eq!(a.state().unwrap(), state_a);
        // A full run of b that saw nothing sweeps b's records alone.
        assert_eq!(b.finish_run(true, Some(8), &State::default()).unwrap(), 1);
        assert_eq!((a.counts().unwrap().live, b.counts().unwrap().live), (3, 0));
        b.apply_page(9, &[rec("oai:1", "https://b/1")], &State::default(), false)
            .unwrap();
        a.reset(&State::default()).unwrap();
        assert_eq!((a.counts().unwrap().live, b.counts().unwrap().live), (0, 1));
        assert_eq!(a.rejected().unwrap() + a.changed().unwrap(), 0);
        // A state a newer version wrote starts that repository's store anew, not the other's.
        a.apply_page(3, &[rec("oai:1", "https://a/1")], &state_a, false)
            .unwrap();
        drop(b);
        (db.client())
            .execute(
                "UPDATE oai_bridge_state SET doc = '{\"format\": 99}' WHERE repository = 'b'",
                &[],
            )
            .unwrap();
        let b = Store::open_postgres(&db.url, "b").unwrap();
        assert_eq!(b.counts().unwrap().live, 0);
        assert_eq!(b.state().unwrap(), State::default());
        assert_eq!(a.counts().unwrap().live, 1);
        assert_eq!(a.state().unwrap(), state_a);
    }

    /// The states of many repositories are read in one query, as each one's store reads its
    /// own: a repository with none saved, or with one a newer version wrote, remembers nothing;
    /// a state that is no JSON fails, naming its repository.
    #[test]
    fn the_states_of_many_repositories_are_read_at_once() {
        let Some(db) = TestDb::create("the_states_of_many_repositories_are_read_at_once") else {
            return;
        };
        let names = |n: &[&str]| n.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(
            Store::postgres_states(&db.url, names(&["a"]))
                .unwrap()
                .is_empty(),
            "a new database: its tables are made first"
        );
        let state = |source: &str| State {
            source: source.into(),
            retry_not_before: Some(1_700_000_000),
            ..State::default()
        };
        for name in ["a", "b", "newer"] {
            let mut store = Store::open_postgres(&db.url, name).unwrap();
            store.save_state(&state(name)).unwrap();
        }
        (db.client())
            .execute(
                "UPDATE oai_bridge_state SET doc = '{\"format\": 99}' WHERE repository = 'newer'",
                &[],
            )
            .unwrap();
        let read = Store::postgres_states(&db.url, names(&["a", "b", "newer", "never"])).unwrap();
        assert_eq!(read.len(), 2, "{read:?}");
        for name in ["a", "b"] {
            let one = Store::open_postgres(&db.url, name)
                .unwrap()
                .state()
                .unwrap();
            assert_eq!((&read[name], &one), (&state(name), &state(name)));
        }
        assert!(
            Store::postgres_states(&db.url, names(&["b"]))
                .unwrap()
                .contains_key("b")
        );

        (db.client())
            .execute(
                "UPDATE oai_bridge_state SET doc = 'not json' WHERE repository = 'b'",
                &[],
            )
            .unwrap();
        let e = Store::postgres_states(&db.url, names(&["a", "b"])).unwrap_err();
        assert!(
            matches!(
                e,
                StoreError::Failed {
                    what: "cannot parse the state",
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("repository \"b\""), "{e}");
    }

    /// Random pages (repeats within a page and across pages, older versions, deletions,
    /// unreadable records, full and incremental runs, publishes) leave the PostgreSQL store
    /// exactly as they leave the SQLite store: both write `page::decide`'s decisions, each
    /// with its own reads and statements.
    #[test]
    fn the_postgresql_store_decides_as_the_sqlite_store_does() {
        let Some(db) = TestDb::create("the_postgresql_store_decides_as_the_sqlite_store_does")
        else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let mut sqlite = Store::open(&dir.path().join("s.sqlite")).unwrap();
        let mut pg = Store::open_postgres(&db.url, "r").unwrap();
        let mut rng = fastrand::Rng::with_seed(23);
        let state = State::default();
        for run in 1..=12u64 {
            let full = run % 4 == 1;
            for _ in 0..3 {
                // Up to past two of the SQLite store's read chunks (sqlite.rs, CHUNK).
                let page: Vec<Record> = (0..rng.usize(0..150))
                    .map(|_| {
                        let id = format!("oai:x:{}", rng.u8(..30));
                        let day = rng.u8(1..20);
                        let mut r = Record {
                            identifier: id.clone(),
                            datestamp: if rng.u8(..10) == 0 {
                                None
                            } else {
                                Datestamp::parse(&format!("2024-05-{day:02}"))
                            },
                            deleted: rng.u8(..6) == 0,
                            sets: vec![format!("s{}", rng.u8(..3))],
                            dc_identifiers: vec![format!("https://h/{id}/{day}")],
                            ..Record::default()
                        };
                        if r.deleted {
                            r.dc_identifiers.clear();
                        } else if rng.u8(..8) == 0 {
                            r.empty_metadata = true;
                            r.dc_identifiers.clear();
                        }
                        r
                    })
                    .collect();
                sqlite.apply_page(run, &page, &state, !full).unwrap();
                pg.apply_page(run, &page, &state, !full).unwrap();
            }
            if full {
                let a = sqlite.finish_run(true, Some(run), &state).unwrap();
                let b = pg.finish_run(true, Some(run), &state).unwrap();
                assert_eq!(a, b, "run {run}: removed");
            }
            let all = |s: &Store| {
                let mut live = Vec::new();
                s.for_each_live(|r| {
                    live.push(r);
                    Ok::<_, ()>(())
                })
                .unwrap()
                .unwrap();
                let mut dirty = Vec::new();
                s.dirty(|now, before| {
                    dirty.push((now, before));
                    Ok::<_, ()>(())
                })
                .unwrap()
                .unwrap();
                dirty.sort_by(|a, b| a.0.identifier.cmp(&b.0.identifier));
                (
                    live,
                    dirty,
                    s.counts().unwrap(),
                    (s.live().unwrap(), s.deleted().unwrap()),
                    (s.rejected().unwrap(), s.rejected_examples(100).unwrap()),
                    s.deleted_examples(100).unwrap(),
                    s.changed().unwrap(),
                )
            };
            assert_eq!(all(&sqlite), all(&pg), "run {run}");
            if run % 3 == 0 {
                sqlite.published(&state, &[], true).unwrap();
                pg.published(&state, &[], true).unwrap();
            }
        }
    }
}
