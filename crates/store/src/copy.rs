//! A SQLite store copied as it is into a repository's rows in PostgreSQL (`oai-bridge
//! migrate-state`): every table the two backends share (records, changes, shared URLs,
//! rejections, the counts and the state document), row for row, in one transaction of the
//! database, read and written in batches so that a store of millions of records is never held
//! in memory.
//!
//! The store's own writes ([`super::Store::apply_page`], [`super::Store::published`]) decide
//! what they write (the `newer` rule, change tracking, the counts): a copy must not decide
//! anything, so it writes the rows it reads, with the same `unnest` statements the PostgreSQL
//! store writes a page with. The SQLite file is opened for queries alone and read in one
//! transaction: what is copied is one consistent moment of the store, and the file is never
//! written.
//!
//! The copy is checked before it is committed: the rows the transaction wrote are counted, table
//! by table, and its state document compared with the SQLite store's; a copy that differs is
//! rolled back, so the database keeps what it held (the rows `--replace` would have replaced
//! among them). While it copies a repository, `migrate-state` holds the repository's lease in
//! `oai_bridge_refreshes`, as a gateway of a fleet holds it while it refreshes
//! (the gateway's `server::fleet`): no gateway starts a refresh of it meanwhile. A copy made releases
//! it as not fresh, so the next gateway claims the repository at once and continues
//! incrementally from the copied state.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use postgres::{Client, GenericClient, Transaction};
use rusqlite::{Connection, OpenFlags, OptionalExtension};

use super::pg::{self, Doing, Failure};
use super::sqlite::fail;
use super::{Counts, Place, State, StateUrl, Store, StoreError, persisted, sqlite};

/// How long the lease `migrate-state` takes on a repository it copies lasts unrenewed: it is
/// renewed every third of it while the copy runs, so a migration killed mid-copy holds the
/// repository from the gateways this long at most.
const LEASE: Duration = Duration::from_secs(60);

/// Most rows in one batch written.
const BATCH_ROWS: usize = 1000;

/// Most bytes (bodies and identifiers) in one batch written, whichever limit comes first: a
/// thousand records with the profiles' fields are a few megabytes.
const BATCH_BYTES: usize = 8 << 20;

/// What a store holds, as counted (or, for the counts incremental runs keep, as kept).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Survey {
    /// Live and deleted records, counted.
    pub records: Counts,
    /// Live and deleted records as the store keeps them ([`super::Store::live`]).
    pub tally: Counts,
    /// Records changed since the last publish.
    pub changed: u64,
    /// URLs several records publish.
    pub shared: u64,
    /// Rejected records.
    pub rejected: u64,
    /// The state.
    pub state: State,
}

impl Survey {
    /// What differs between this survey and `other` (empty: nothing), each as `what: this,
    /// other`.
    pub fn differences(&self, other: &Survey) -> Vec<String> {
        let mut found = Vec::new();
        let pairs = [
            ("live records", self.records.live, other.records.live),
            (
                "deleted records",
                self.records.deleted,
                other.records.deleted,
            ),
            ("live count kept", self.tally.live, other.tally.live),
            (
                "deleted count kept",
                self.tally.deleted,
                other.tally.deleted,
            ),
            ("changed records", self.changed, other.changed),
            ("shared URLs", self.shared, other.shared),
            ("rejected records", self.rejected, other.rejected),
        ];
        for (what, a, b) in pairs {
            if a != b {
                found.push(format!("{what}: {a}, {b}"));
            }
        }
        if self.state != other.state {
            found.push("the state".to_owned());
        }
        found
    }
}

/// A SQLite store, opened to be read only.
pub struct SqliteSource {
    conn: Connection,
    path: PathBuf,
    /// The store has the table of rejections (added to schema 5 later).
    has_rejected: bool,
    /// The store's counts keep the deleted records (added to schema 5 later).
    counts_deleted: bool,
}

impl SqliteSource {
    /// Opens the store at `path` to be read only. A store of another schema version, or whose state
    /// is of a format this version does not read, is refused: this version would start it
    /// anew ([`super::Store::open`]), so there is nothing to copy.
    pub fn open(path: &Path) -> Result<SqliteSource, StoreError> {
        // Not SQLite's read-only mode: on a store in WAL mode it makes the `-wal` and `-shm`
        // files beside it and, unable to remove them, leaves them there. A connection that may
        // write but is held to queries (`query_only`) removes them when it closes, as the
        // store's own do; a missing file is an error, never a new store.
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(fail(path, "cannot open"))?;
        conn.busy_timeout(std::time::Duration::from_secs(30))
            .map_err(fail(path, "cannot configure"))?;
        conn.pragma_update(None, "query_only", true)
            .map_err(fail(path, "cannot configure"))?;
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(fail(path, "cannot read the schema version"))?;
        if version != sqlite::SCHEMA {
            return Err(StoreError::Failed {
                place: Place::File(path.to_owned()),
                what: "cannot be copied",
                source: format!(
                    "its tables are of schema version {version}, this version of oai-bridge \
                     reads version {}: it would start the store anew (a full harvest), so there \
                     is nothing to copy",
                    sqlite::SCHEMA
                )
                .into(),
            });
        }
        let exists = |sql: &str| -> Result<bool, StoreError> {
            conn.query_row(sql, [], |r| r.get(0))
                .map_err(fail(path, "cannot read the schema"))
        };
        let has_rejected =
            exists("SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE name = 'rejected')")?;
        let counts_deleted = exists(
            "SELECT EXISTS (SELECT 1 FROM pragma_table_info('tally') WHERE name = 'deleted')",
        )?;
        let source = SqliteSource {
            conn,
            path: path.to_owned(),
            has_rejected,
            counts_deleted,
        };
        let doc = source.doc()?;
        if doc.as_deref().is_some_and(persisted::of_unknown_format) {
            return Err(StoreError::Failed {
                place: source.place(),
                what: "cannot be copied",
                source: "its state is of a format this version does not read (a newer version \
                         wrote it): run the version that wrote it"
                    .into(),
            });
        }
        Ok(source)
    }

    /// The store's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn place(&self) -> Place {
        Place::File(self.path.clone())
    }

    /// The state document, as saved.
    fn doc(&self) -> Result<Option<String>, StoreError> {
        self.conn
            .query_row("SELECT doc FROM state WHERE k = 0", [], |r| r.get(0))
            .optional()
            .map_err(fail(&self.path, "cannot read the state"))
    }

    /// What the store holds.
    pub fn survey(&self) -> Result<Survey, StoreError> {
        let path = &self.path;
        let number = |sql: &str| -> Result<u64, StoreError> {
            self.conn
                .query_row(sql, [], |r| r.get::<_, i64>(0))
                .map(|n| n as u64)
                .map_err(fail(path, "cannot count the records"))
        };
        let records = sqlite::count_records(&self.conn, path)?;
        let tally = Counts {
            live: number("SELECT coalesce((SELECT live FROM tally), 0)")?,
            // A store made before the deleted records were counted counts them at its next
            // opening ([`super::Store::open`]): the same number.
            deleted: if self.counts_deleted {
                number("SELECT coalesce((SELECT deleted FROM tally), 0)")?
            } else {
                records.deleted
            },
        };
        let state = match self.doc()? {
            None => State::default(),
            Some(doc) => serde_json::from_str(&doc).map_err(|e| StoreError::Failed {
                place: self.place(),
                what: "cannot parse the state",
                source: Box::new(e),
            })?,
        };
        Ok(Survey {
            records,
            tally,
            changed: number("SELECT count(*) FROM changes")?,
            shared: number("SELECT count(*) FROM shared")?,
            rejected: if self.has_rejected {
                number("SELECT count(*) FROM rejected")?
            } else {
                0
            },
            state,
        })
    }

    /// Copies the store into `repository`'s rows of the database `client` is connected to
    /// (its schema migrated), in one transaction of each: the SQLite store is read as it is at
    /// one moment; the database's rows are all written or none. Rows the database holds for
    /// the repository already are replaced with `replace`, else the copy is refused. What the
    /// transaction wrote is counted and compared with the SQLite store before it is committed:
    /// a difference rolls it back. `holder` is the lease the caller holds on the repository
    /// ([`Database::copy`]), checked (and locked against a claim) before the commit. Returns
    /// what was copied.
    fn copy_into(
        &self,
        client: &mut Client,
        place: &Place,
        repository: &str,
        replace: bool,
        holder: &str,
    ) -> Result<Survey, StoreError> {
        let at = |failure: Failure| StoreError::Failed {
            place: place.clone(),
            what: failure.what,
            source: failure.source,
        };
        // One moment of the SQLite store: a read transaction, ended when dropped.
        let read = self
            .conn
            .unchecked_transaction()
            .map_err(fail(&self.path, "cannot begin a transaction"))?;
        let survey = self.survey()?;
        let doc = self.doc()?;
        let mut tx = client
            .transaction()
            .doing("cannot begin a transaction")
            .map_err(at)?;
        let found = occupied(&mut tx, repository).map_err(at)?;
        if found.rows {
            if !replace {
                return Err(StoreError::Occupied(place.clone()));
            }
            pg::empty(&mut tx, repository, true).map_err(at)?;
        }
        let written = self.write(&mut tx, repository, &survey, doc.as_deref());
        match written {
            Ok(()) => {}
            Err(Fault::Sqlite(e)) => return Err(e),
            Err(Fault::Postgres(f)) => return Err(at(f)),
        }
        #[cfg(test)]
        tests::AFTER_WRITE.with(|sql| -> Result<(), StoreError> {
            if let Some(sql) = sql.borrow().as_deref() {
                tx.batch_execute(sql).doing("test hook").map_err(at)?;
            }
            Ok(())
        })?;
        let (written, written_doc) = written_survey(&mut tx, repository).map_err(at)?;
        let mut differences = survey.differences(&written);
        if written_doc != doc {
            differences.push("the state document's text".to_owned());
        }
        if !differences.is_empty() {
            // Dropped, the transaction rolls back: nothing of the copy is left.
            drop(tx);
            return Err(StoreError::Mismatch {
                place: place.clone(),
                path: self.path.clone(),
                differences,
            });
        }
        // The lease still this copy's, and held so until the commit: a claim waits for it.
        // Live now, not when the transaction began (`now()`).
        let lease: Option<(Option<String>, bool)> = tx
            .query_opt(
                "SELECT holder, coalesce(expires_at > statement_timestamp(), false)
                 FROM oai_bridge_refreshes
                 WHERE repository = $1 FOR UPDATE",
                &[&repository],
            )
            .doing("cannot read the repository's lease")
            .map_err(at)?
            .map(|r| (r.get(0), r.get(1)));
        match lease {
            Some((Some(h), true)) if h == holder => {}
            Some((Some(h), true)) => {
                return Err(StoreError::Leased {
                    place: place.clone(),
                    holder: h,
                });
            }
            _ => return Err(StoreError::LeaseLost(place.clone())),
        }
        tx.commit().doing("cannot commit the copy").map_err(at)?;
        drop(read);
        Ok(survey)
    }

    /// Writes every row of the store into `tx`, as `repository`'s.
    fn write(
        &self,
        tx: &mut Transaction<'_>,
        repository: &str,
        survey: &Survey,
        doc: Option<&str>,
    ) -> Result<(), Fault> {
        let live = survey.tally.live as i64;
        let deleted = survey.tally.deleted as i64;
        tx.execute(
            "INSERT INTO oai_bridge_tally (repository, live, deleted) VALUES ($1, $2, $3)
             ON CONFLICT (repository) DO UPDATE SET live = excluded.live,
               deleted = excluded.deleted",
            &[&repository, &live, &deleted],
        )
        .doing("cannot copy the counts")?;
        if let Some(doc) = doc {
            tx.execute(pg::SAVE_STATE, &[&repository, &doc])
                .doing("cannot copy the state")?;
        }
        self.records(tx, repository)?;
        self.changes(tx, repository)?;
        self.shared(tx, repository)?;
        if self.has_rejected {
            self.rejected(tx, repository)?;
        }
        Ok(())
    }

    /// Copies the records.
    fn records(&self, tx: &mut Transaction<'_>, repository: &str) -> Result<(), Fault> {
        type Row = (String, Option<i64>, bool, String, Vec<u8>, i64);
        let insert = tx
            .prepare(
                "INSERT INTO oai_bridge_records (repository, id, datestamp, deleted, sets, body,
                   seen)
                 SELECT $1, * FROM unnest($2::text[], $3::int8[], $4::bool[], $5::text[],
                   $6::bytea[], $7::int8[])",
            )
            .doing("cannot prepare the copy")?;
        self.batches(
            "SELECT id, datestamp, deleted, sets, body, seen FROM records ORDER BY id",
            "cannot read the records",
            |r| -> rusqlite::Result<Row> {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                ))
            },
            |r| r.0.len() + r.3.len() + r.4.len(),
            |rows: &[Row]| {
                let ids: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
                let datestamps: Vec<Option<i64>> = rows.iter().map(|r| r.1).collect();
                let deleted: Vec<bool> = rows.iter().map(|r| r.2).collect();
                let sets: Vec<&str> = rows.iter().map(|r| r.3.as_str()).collect();
                let bodies: Vec<&[u8]> = rows.iter().map(|r| r.4.as_slice()).collect();
                let seen: Vec<i64> = rows.iter().map(|r| r.5).collect();
                tx.execute(
                    &insert,
                    &[
                        &repository,
                        &ids,
                        &datestamps,
                        &deleted,
                        &sets,
                        &bodies,
                        &seen,
                    ],
                )
                .doing("cannot copy the records")
                .map(drop)
            },
        )
    }

    /// Copies the changes since the last publish.
    fn changes(&self, tx: &mut Transaction<'_>, repository: &str) -> Result<(), Fault> {
        type Row = (
            String,
            Option<bool>,
            Option<i64>,
            Option<Vec<u8>>,
            bool,
            Option<i64>,
            Vec<u8>,
            Option<String>,
        );
        let insert = tx
            .prepare(
                "INSERT INTO oai_bridge_changes (repository, id, prev_live, prev_datestamp,
                   prev_body, now_deleted, now_datestamp, now_body, now_sets)
                 SELECT $1, * FROM unnest($2::text[], $3::bool[], $4::int8[], $5::bytea[],
                   $6::bool[], $7::int8[], $8::bytea[], $9::text[])",
            )
            .doing("cannot prepare the copy")?;
        // A store this version has not opened yet has no sets with its changes (NULL: read
        // from the records' rows when published).
        let keeps_sets: bool = (self.conn)
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM pragma_table_info('changes')
                   WHERE name = 'now_sets')",
                [],
                |r| r.get(0),
            )
            .map_err(fail(&self.path, "cannot read the schema"))?;
        let sql = match keeps_sets {
            true => {
                "SELECT id, prev_live, prev_datestamp, prev_body, now_deleted, now_datestamp,
                   now_body, now_sets
                 FROM changes ORDER BY id"
            }
            false => {
                "SELECT id, prev_live, prev_datestamp, prev_body, now_deleted, now_datestamp,
                   now_body, NULL
                 FROM changes ORDER BY id"
            }
        };
        self.batches(
            sql,
            "cannot read the changed records",
            |r| -> rusqlite::Result<Row> {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                    r.get(7)?,
                ))
            },
            |r| r.0.len() + r.3.as_ref().map_or(0, Vec::len) + r.6.len(),
            |rows: &[Row]| {
                let ids: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
                let prev_live: Vec<Option<bool>> = rows.iter().map(|r| r.1).collect();
                let prev_datestamp: Vec<Option<i64>> = rows.iter().map(|r| r.2).collect();
                let prev_body: Vec<Option<&[u8]>> = rows.iter().map(|r| r.3.as_deref()).collect();
                let now_deleted: Vec<bool> = rows.iter().map(|r| r.4).collect();
                let now_datestamp: Vec<Option<i64>> = rows.iter().map(|r| r.5).collect();
                let now_body: Vec<&[u8]> = rows.iter().map(|r| r.6.as_slice()).collect();
                let now_sets: Vec<Option<&str>> = rows.iter().map(|r| r.7.as_deref()).collect();
                tx.execute(
                    &insert,
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
                .doing("cannot copy the changed records")
                .map(drop)
            },
        )
    }

    /// Copies the shared URLs.
    fn shared(&self, tx: &mut Transaction<'_>, repository: &str) -> Result<(), Fault> {
        type Row = (String, Vec<u8>);
        let insert = tx
            .prepare(
                "INSERT INTO oai_bridge_shared (repository, url, claims)
                 SELECT $1, * FROM unnest($2::text[], $3::bytea[])",
            )
            .doing("cannot prepare the copy")?;
        self.batches(
            "SELECT url, claims FROM shared ORDER BY url",
            "cannot read the shared URLs",
            |r| -> rusqlite::Result<Row> { Ok((r.get(0)?, r.get(1)?)) },
            |r| r.0.len() + r.1.len(),
            |rows: &[Row]| {
                let urls: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
                let claims: Vec<&[u8]> = rows.iter().map(|r| r.1.as_slice()).collect();
                tx.execute(&insert, &[&repository, &urls, &claims])
                    .doing("cannot copy the shared URLs")
                    .map(drop)
            },
        )
    }

    /// Copies the rejected records.
    fn rejected(&self, tx: &mut Transaction<'_>, repository: &str) -> Result<(), Fault> {
        type Row = (String, Option<i64>, i64);
        let insert = tx
            .prepare(
                "INSERT INTO oai_bridge_rejected (repository, id, datestamp, seen)
                 SELECT $1, * FROM unnest($2::text[], $3::int8[], $4::int8[])",
            )
            .doing("cannot prepare the copy")?;
        self.batches(
            "SELECT id, datestamp, seen FROM rejected ORDER BY id",
            "cannot read the rejected records",
            |r| -> rusqlite::Result<Row> { Ok((r.get(0)?, r.get(1)?, r.get(2)?)) },
            |r| r.0.len(),
            |rows: &[Row]| {
                let ids: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
                let datestamps: Vec<Option<i64>> = rows.iter().map(|r| r.1).collect();
                let seen: Vec<i64> = rows.iter().map(|r| r.2).collect();
                tx.execute(&insert, &[&repository, &ids, &datestamps, &seen])
                    .doing("cannot copy the rejected records")
                    .map(drop)
            },
        )
    }

    /// Reads the rows `sql` selects, each made by `row`, and hands them to `write` in
    /// batches of at most [`BATCH_ROWS`] rows and about [`BATCH_BYTES`] bytes (`size`).
    fn batches<Row>(
        &self,
        sql: &str,
        what: &'static str,
        row: impl Fn(&rusqlite::Row<'_>) -> rusqlite::Result<Row>,
        size: impl Fn(&Row) -> usize,
        mut write: impl FnMut(&[Row]) -> Result<(), Failure>,
    ) -> Result<(), Fault> {
        let path = &self.path;
        let mut stmt = self.conn.prepare(sql).map_err(fail(path, what))?;
        let mut rows = stmt.query([]).map_err(fail(path, what))?;
        let mut batch = Vec::with_capacity(BATCH_ROWS);
        let mut bytes = 0;
        while let Some(r) = rows.next().map_err(fail(path, what))? {
            let r = row(r).map_err(fail(path, what))?;
            bytes += size(&r);
            batch.push(r);
            if batch.len() == BATCH_ROWS || bytes >= BATCH_BYTES {
                write(&batch)?;
                batch.clear();
                bytes = 0;
            }
        }
        if !batch.is_empty() {
            write(&batch)?;
        }
        Ok(())
    }
}

/// A failure of a copy, on either side.
enum Fault {
    /// Reading the SQLite store.
    Sqlite(StoreError),
    /// Writing the database.
    Postgres(Failure),
}

impl From<StoreError> for Fault {
    fn from(e: StoreError) -> Fault {
        Fault::Sqlite(e)
    }
}

impl From<Failure> for Fault {
    fn from(f: Failure) -> Fault {
        Fault::Postgres(f)
    }
}

/// What the database holds of a repository.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Occupied {
    /// Rows of its store: records, changes, shared URLs, rejections, a state, or counts other
    /// than nothing (a store opened and never written holds counts of zero alone).
    pub rows: bool,
    /// The gateway that holds a live lease on it (a fleet's, `oai_bridge_refreshes`).
    pub lease: Option<String>,
}

/// What the database `client` is connected to holds of `repository`; read only, so it answers
/// for a database whose schema is not (or not wholly) made too.
fn occupied(client: &mut impl GenericClient, repository: &str) -> Result<Occupied, Failure> {
    let mut table = |name: &str| -> Result<bool, Failure> {
        Ok(client
            .query_one("SELECT to_regclass($1) IS NOT NULL", &[&name])
            .doing("cannot read the schema")?
            .get(0))
    };
    let has_store = table("oai_bridge_state")?;
    let has_fleet = table("oai_bridge_refreshes")?;
    let mut found = Occupied::default();
    if has_store {
        found.rows = client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM oai_bridge_records WHERE repository = $1)
                   OR EXISTS (SELECT 1 FROM oai_bridge_state WHERE repository = $1)
                   OR EXISTS (SELECT 1 FROM oai_bridge_changes WHERE repository = $1)
                   OR EXISTS (SELECT 1 FROM oai_bridge_shared WHERE repository = $1)
                   OR EXISTS (SELECT 1 FROM oai_bridge_rejected WHERE repository = $1)
                   OR EXISTS (SELECT 1 FROM oai_bridge_tally
                              WHERE repository = $1 AND (live <> 0 OR deleted <> 0))",
                &[&repository],
            )
            .doing("cannot read the repository's rows")?
            .get(0);
    }
    if has_fleet {
        found.lease = client
            .query_opt(
                "SELECT holder FROM oai_bridge_refreshes
                 WHERE repository = $1 AND holder IS NOT NULL AND expires_at > now()",
                &[&repository],
            )
            .doing("cannot read the repository's lease")?
            .map(|r| r.get(0));
    }
    Ok(found)
}

/// What `tx` holds of `repository`, counted as [`SqliteSource::survey`] counts a SQLite store,
/// and its state document as saved: what a copy wrote, read before it is committed.
fn written_survey(
    tx: &mut Transaction<'_>,
    repository: &str,
) -> Result<(Survey, Option<String>), Failure> {
    let mut number = |sql: &str| -> Result<u64, Failure> {
        let n: i64 = tx
            .query_one(sql, &[&repository])
            .doing("cannot count what was copied")?
            .get(0);
        Ok(n as u64)
    };
    let records = Counts {
        live: number(
            "SELECT count(*) FROM oai_bridge_records WHERE repository = $1 AND NOT deleted",
        )?,
        deleted: number(
            "SELECT count(*) FROM oai_bridge_records WHERE repository = $1 AND deleted",
        )?,
    };
    let tally = Counts {
        live: number(
            "SELECT coalesce((SELECT live FROM oai_bridge_tally WHERE repository = $1), 0)",
        )?,
        deleted: number(
            "SELECT coalesce((SELECT deleted FROM oai_bridge_tally WHERE repository = $1), 0)",
        )?,
    };
    let changed = number("SELECT count(*) FROM oai_bridge_changes WHERE repository = $1")?;
    let shared = number("SELECT count(*) FROM oai_bridge_shared WHERE repository = $1")?;
    let rejected = number("SELECT count(*) FROM oai_bridge_rejected WHERE repository = $1")?;
    let doc: Option<String> = tx
        .query_opt(
            "SELECT doc FROM oai_bridge_state WHERE repository = $1",
            &[&repository],
        )
        .doing("cannot read the state copied")?
        .map(|r| r.get(0));
    let state = match &doc {
        None => State::default(),
        Some(doc) => serde_json::from_str(doc).map_err(|e| Failure {
            what: "cannot parse the state copied",
            source: Box::new(e),
        })?,
    };
    let survey = Survey {
        records,
        tally,
        changed,
        shared,
        rejected,
        state,
    };
    Ok((survey, doc))
}

/// Renews a lease on a repository every third of its length, on a connection of its own, until
/// stopped: the copy's connection is busy with the copy.
struct Renewer {
    stop: mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Renewer {
    fn start(
        url: &StateUrl,
        place: &Place,
        repository: &str,
        holder: &str,
        lease: Duration,
    ) -> Result<Renewer, StoreError> {
        let (stop, stopped) = mpsc::channel::<()>();
        let (url, repository, holder) = (url.clone(), repository.to_owned(), holder.to_owned());
        let (place, failed) = (place.clone(), place.clone());
        let thread = std::thread::Builder::new()
            .name(format!("lease-{repository}"))
            .spawn(move || {
                let mut client: Option<Client> = None;
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(lease / 3) {
                    if client.as_ref().is_none_or(Client::is_closed) {
                        client = url.connect().ok();
                    }
                    let Some(c) = client.as_mut() else {
                        tracing::warn!("state store {place}: cannot connect to renew the lease");
                        continue;
                    };
                    match c.execute(
                        pg::LEASE_RENEW,
                        &[&repository, &holder, &lease.as_secs_f64()],
                    ) {
                        Ok(1) => {}
                        // Ended: the copy is rolled back before its commit (`LeaseLost`).
                        Ok(_) => return,
                        Err(e) => {
                            tracing::warn!("state store {place}: cannot renew the lease: {e}")
                        }
                    }
                }
            })
            .map_err(|e| StoreError::Failed {
                place: failed,
                what: "cannot start the thread that renews the lease",
                source: Box::new(e),
            })?;
        Ok(Renewer { stop, thread })
    }

    /// Stops renewing (a renewal under way ends first).
    fn stop(self) {
        drop(self.stop);
        let _ = self.thread.join();
    }
}

/// A connection to the database stores are copied into.
pub struct Database {
    client: Client,
    url: StateUrl,
    /// Who holds the leases this migration takes: `migrate-state:{host}:{process id}`.
    holder: String,
    /// How long they last unrenewed ([`LEASE`]).
    lease: Duration,
}

impl Database {
    /// Connects to the database at `url`, on the caller's thread (not one of a tokio
    /// runtime's), and applies the schema's migrations; with `read_only`, only reads its
    /// schema's version, refusing a newer one, and changes nothing.
    pub fn connect(url: &StateUrl, read_only: bool) -> Result<Database, StoreError> {
        let failed = |f: Failure| StoreError::Database {
            url: url.redacted(),
            what: f.what,
            source: f.source,
        };
        let mut client = url.connect().map_err(failed)?;
        if read_only {
            pg::schema_version(&mut client).map_err(failed)?;
        } else {
            pg::migrate(&mut client).map_err(failed)?;
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_else(|_| "localhost".to_owned());
        Ok(Database {
            client,
            url: url.clone(),
            holder: format!("migrate-state:{host}:{}", std::process::id()),
            lease: LEASE,
        })
    }

    /// The database.
    pub fn url(&self) -> &StateUrl {
        &self.url
    }

    /// What the database holds of `repository`.
    pub fn occupied(&mut self, repository: &str) -> Result<Occupied, StoreError> {
        occupied(&mut self.client, repository).map_err(|f| self.error(repository, f))
    }

    /// Shared URLs the database holds for `repository` (which [`super::Store`] does not count).
    fn shared(&mut self, repository: &str) -> Result<u64, StoreError> {
        let n: i64 = self
            .client
            .query_one(
                "SELECT count(*) FROM oai_bridge_shared WHERE repository = $1",
                &[&repository],
            )
            .doing("cannot count the shared URLs")
            .map_err(|f| self.error(repository, f))?
            .get(0);
        Ok(n as u64)
    }

    /// Copies `source` into `repository`'s rows (`SqliteSource::copy_into`), holding the
    /// repository's lease meanwhile: taken first (refused while another holds a live one),
    /// renewed while the copy runs, released after it. A copy committed releases it as not
    /// fresh (`refreshed_at` unset), so a gateway claims the repository at once and continues
    /// from the copy; one that failed leaves `refreshed_at` as it was. Once committed, the copy
    /// is read back through [`Store`] and compared again ([`StoreError::ReadBack`] reports a
    /// difference; nothing is removed).
    pub fn copy(
        &mut self,
        source: &SqliteSource,
        repository: &str,
        replace: bool,
    ) -> Result<Survey, StoreError> {
        let place = self.place(repository);
        self.claim(repository)?;
        let copied = Renewer::start(&self.url, &place, repository, &self.holder, self.lease)
            .and_then(|renewer| {
                let copied = source
                    .copy_into(&mut self.client, &place, repository, replace, &self.holder)
                    .and_then(|survey| self.read_back(source, repository, survey));
                renewer.stop();
                copied
            });
        // Committed when it succeeded or only its read-back differs; any other failure leaves
        // `refreshed_at` as it was.
        let committed = matches!(copied, Ok(_) | Err(StoreError::ReadBack { .. }));
        if let Err(f) = self.release(repository, committed) {
            tracing::warn!(
                "{}",
                self.error(repository, f).to_string()
                    + " (the lease ends by itself within a minute)"
            );
        }
        copied
    }

    /// Takes the lease on `repository` for this migration, however fresh it is, never from a
    /// live lease.
    fn claim(&mut self, repository: &str) -> Result<(), StoreError> {
        let granted = self
            .client
            .query_opt(
                pg::LEASE_CLAIM,
                &[
                    &repository,
                    &self.holder,
                    &self.lease.as_secs_f64(),
                    &true,
                    &0.0f64,
                ],
            )
            .doing("cannot take the repository's lease")
            .map_err(|f| self.error(repository, f))?;
        if granted.is_some() {
            return Ok(());
        }
        let holder = self.occupied(repository)?.lease;
        Err(StoreError::Leased {
            place: self.place(repository),
            // Ended since: the lease was live a moment ago.
            holder: holder.unwrap_or_else(|| "another process".to_owned()),
        })
    }

    /// Releases this migration's lease on `repository`; `copied`, as not fresh.
    fn release(&mut self, repository: &str, copied: bool) -> Result<(), Failure> {
        let sql = if copied {
            "UPDATE oai_bridge_refreshes SET holder = NULL, expires_at = NULL, refreshed_at = NULL
             WHERE repository = $1 AND holder = $2"
        } else {
            pg::LEASE_RELEASE
        };
        self.client
            .execute(sql, &[&repository, &self.holder])
            .doing("cannot release the repository's lease")
            .map(drop)
    }

    /// The copy of `source` into `repository`, committed, read back through the PostgreSQL
    /// store and compared with `copied` (what the SQLite store held).
    fn read_back(
        &mut self,
        source: &SqliteSource,
        repository: &str,
        copied: Survey,
    ) -> Result<Survey, StoreError> {
        let store = Store::open_postgres(&self.url, repository)?;
        let read = Survey {
            records: store.counts()?,
            tally: Counts {
                live: store.live()?,
                deleted: store.deleted()?,
            },
            changed: store.changed()?,
            shared: self.shared(repository)?,
            rejected: store.rejected()?,
            state: store.state()?,
        };
        let differences = copied.differences(&read);
        if !differences.is_empty() {
            return Err(StoreError::ReadBack {
                place: self.place(repository),
                path: source.path().to_owned(),
                differences,
            });
        }
        Ok(copied)
    }

    fn place(&self, repository: &str) -> Place {
        Place::Postgres {
            url: self.url.redacted(),
            repository: repository.to_owned(),
        }
    }

    fn error(&self, repository: &str, f: Failure) -> StoreError {
        StoreError::Failed {
            place: self.place(repository),
            what: f.what,
            source: f.source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    std::thread_local! {
        /// SQL a copy runs in its transaction once it wrote its rows, before it compares them
        /// with the SQLite store: a test's way to make a copy that differs.
        pub(super) static AFTER_WRITE: std::cell::RefCell<Option<String>> =
            const { std::cell::RefCell::new(None) };
    }

    use crate::Store;
    use crate::pg::testdb::TestDb;
    use oai_bridge_files::published::SharedUrl;
    use oai_pmh::Datestamp;
    use oai_pmh::{DcElement, Record};

    fn record(i: usize, date: &str) -> Record {
        Record {
            identifier: format!("oai:x:{i:05}"),
            datestamp: Datestamp::parse(date),
            sets: vec!["a".into(), "b:c".into()],
            dc_identifiers: vec![format!("https://h/{i}")],
            dc: [(DcElement::Title, "Tïtle")].into_iter().collect(),
            ..Record::default()
        }
    }

    /// Everything a store answers, to compare two stores by.
    #[allow(clippy::type_complexity)]
    fn everything(
        s: &Store,
    ) -> (
        Vec<Record>,
        Vec<(Record, Option<Record>)>,
        (Counts, u64, u64, u64, u64),
        (Vec<String>, Vec<String>),
        Option<SharedUrl>,
        State,
    ) {
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
            (
                s.counts().unwrap(),
                s.live().unwrap(),
                s.deleted().unwrap(),
                s.changed().unwrap(),
                s.rejected().unwrap(),
            ),
            (
                s.deleted_examples(1000).unwrap(),
                s.rejected_examples(1000).unwrap(),
            ),
            s.shared("https://h/shared").unwrap(),
            s.state().unwrap(),
        )
    }

    /// Every row of every table of a store, column by column, in key order.
    #[derive(Debug, PartialEq)]
    #[allow(clippy::type_complexity)]
    struct Tables {
        records: Vec<(String, Option<i64>, bool, String, Vec<u8>, i64)>,
        changes: Vec<(
            String,
            Option<bool>,
            Option<i64>,
            Option<Vec<u8>>,
            bool,
            Option<i64>,
            Vec<u8>,
            Option<String>,
        )>,
        shared: Vec<(String, Vec<u8>)>,
        rejected: Vec<(String, Option<i64>, i64)>,
        state: Option<String>,
        tally: (i64, i64),
    }

    const RECORDS: &str = "SELECT id, datestamp, deleted, sets, body, seen FROM {t}records";
    const CHANGES: &str = "SELECT id, prev_live, prev_datestamp, prev_body, now_deleted, \
                           now_datestamp, now_body, now_sets FROM {t}changes";
    const SHARED: &str = "SELECT url, claims FROM {t}shared";
    const REJECTED: &str = "SELECT id, datestamp, seen FROM {t}rejected";

    /// The rows of the SQLite store at `path`.
    fn sqlite_tables(path: &Path) -> Tables {
        // Not SQLite's read-only mode, which leaves a WAL store's `-wal` and `-shm` behind.
        let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE).unwrap();
        conn.pragma_update(None, "query_only", true).unwrap();
        let sql = |q: &str, key: &str| format!("{} ORDER BY {key}", q.replace("{t}", ""));
        fn all<T>(
            conn: &Connection,
            sql: &str,
            row: impl Fn(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
        ) -> Vec<T> {
            let mut stmt = conn.prepare(sql).unwrap();
            stmt.query_map([], row)
                .unwrap()
                .map(Result::unwrap)
                .collect()
        }
        Tables {
            records: all(&conn, &sql(RECORDS, "id"), |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                ))
            }),
            changes: all(&conn, &sql(CHANGES, "id"), |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                    r.get(7)?,
                ))
            }),
            shared: all(&conn, &sql(SHARED, "url"), |r| Ok((r.get(0)?, r.get(1)?))),
            rejected: all(&conn, &sql(REJECTED, "id"), |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            }),
            state: conn
                .query_row("SELECT doc FROM state", [], |r| r.get(0))
                .optional()
                .unwrap(),
            tally: conn
                .query_row("SELECT live, deleted FROM tally", [], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .unwrap(),
        }
    }

    /// The rows of `repository` in the database of `client`.
    fn pg_tables(client: &mut Client, repository: &str) -> Tables {
        let mut all = |q: &str, key: &str| {
            let sql = format!(
                "{} WHERE repository = $1 ORDER BY {key}",
                q.replace("{t}", "oai_bridge_")
            );
            client.query(&sql, &[&repository]).unwrap()
        };
        let records = all(RECORDS, "id")
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5)))
            .collect();
        let changes = all(CHANGES, "id")
            .iter()
            .map(|r| {
                (
                    r.get(0),
                    r.get(1),
                    r.get(2),
                    r.get(3),
                    r.get(4),
                    r.get(5),
                    r.get(6),
                    r.get(7),
                )
            })
            .collect();
        let shared = all(SHARED, "url")
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        let rejected = all(REJECTED, "id")
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect();
        let state = client
            .query_opt(
                "SELECT doc FROM oai_bridge_state WHERE repository = $1",
                &[&repository],
            )
            .unwrap()
            .map(|r| r.get(0));
        let tally = client
            .query_opt(
                "SELECT live, deleted FROM oai_bridge_tally WHERE repository = $1",
                &[&repository],
            )
            .unwrap()
            .map_or((0, 0), |r| (r.get(0), r.get(1)));
        Tables {
            records,
            changes,
            shared,
            rejected,
            state,
            tally,
        }
    }

    /// The lease row of `repository`: holder, live, refreshed (`refreshed_at` set), generation.
    fn lease(
        client: &mut Client,
        repository: &str,
    ) -> Option<(Option<String>, bool, bool, Option<String>)> {
        client
            .query_opt(
                "SELECT holder, coalesce(expires_at > now(), false), refreshed_at IS NOT NULL,
                   generation
                 FROM oai_bridge_refreshes WHERE repository = $1",
                &[&repository],
            )
            .unwrap()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
    }

    /// A gateway's claim on `repository`, due every hour, as the gateway's `server::fleet` makes it.
    fn gateway_claims(client: &mut Client, repository: &str) -> bool {
        client
            .query_opt(
                pg::LEASE_CLAIM,
                &[&repository, &"gw-2", &60.0f64, &false, &3600.0f64],
            )
            .unwrap()
            .is_some()
    }

    /// A SQLite store with more records than a batch, deletions (with their datestamps),
    /// records of two runs, changes since a publish, several shared URLs, rejections and a
    /// state.
    fn filled(path: &Path) -> Store {
        let mut store = Store::open(path).unwrap();
        let doc = include_str!("../../../fixtures/store/state-v1.json");
        let mut state: State = serde_json::from_str(doc).unwrap();
        state.runs = 2;
        let page: Vec<Record> = (0..2500).map(|i| record(i, "2024-05-01")).collect();
        store.apply_page(1, &page, &state, false).unwrap();
        store.finish_run(true, Some(1), &state).unwrap();
        let shared: Vec<SharedUrl> = (0..3)
            .map(|n| SharedUrl {
                url: format!("https://h/shared/{n}"),
                claims: vec![n, n + 1, n + 2],
            })
            .chain([SharedUrl {
                url: "https://h/shared".into(),
                claims: vec![1, 2, 3],
            }])
            .collect();
        store.published(&state, &shared, true).unwrap();
        let mut gone = record(7, "2024-05-02");
        gone.deleted = true;
        let empty = Record {
            empty_metadata: true,
            dc: Default::default(),
            dc_identifiers: Vec::new(),
            ..record(9, "2024-05-02")
        };
        let page = [
            gone,
            record(8, "2024-05-02"),
            record(3000, "2024-05-02"),
            empty,
        ];
        store.apply_page(2, &page, &state, true).unwrap();
        store
    }

    /// A store copied into the database holds its every row, column for column, and answers
    /// every question as the SQLite store does; the SQLite file is not changed; a second copy
    /// is refused, then replaces with `replace`; another repository's rows stay as they are.
    #[test]
    fn a_copied_store_answers_as_the_sqlite_store() {
        let Some(db) = TestDb::create("a_copied_store_answers_as_the_sqlite_store") else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.sqlite");
        let sqlite = filled(&path);
        let want = everything(&sqlite);
        drop(sqlite);
        let rows = sqlite_tables(&path);
        assert_eq!(want.2.0.live, 2500, "2501 records, one deleted");
        // What the comparison of rows must cover.
        assert!(
            rows.records.iter().any(|r| r.2 && r.1.is_some()),
            "a datestamped deletion"
        );
        let runs: std::collections::BTreeSet<i64> = rows.records.iter().map(|r| r.5).collect();
        assert_eq!(runs.len(), 2, "records seen in two runs");
        assert_eq!(rows.shared.len(), 4, "shared URLs");
        assert!(
            rows.rejected.len() == 1 && rows.rejected[0].1.is_some() && rows.rejected[0].2 == 2,
            "a rejection with its datestamp and run: {:?}",
            rows.rejected
        );
        assert_eq!(rows.changes.len(), 3);
        assert!(rows.state.is_some());
        let bytes = std::fs::read(&path).unwrap();
        let files = |dir: &Path| -> Vec<String> {
            let mut names: Vec<String> = (std::fs::read_dir(dir).unwrap())
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            names.sort();
            names
        };
        let before = files(dir.path());

        let mut other = Store::open_postgres(&db.url, "other").unwrap();
        other
            .apply_page(1, &[record(1, "2020-01-01")], &State::default(), false)
            .unwrap();
        let mut client = db.client();
        let others = pg_tables(&mut client, "other");
        let source = SqliteSource::open(&path).unwrap();
        let mut database = Database::connect(&db.url, false).unwrap();
        assert_eq!(database.occupied("r").unwrap(), Occupied::default());
        let survey = database.copy(&source, "r", false).unwrap();
        assert_eq!(survey, source.survey().unwrap());
        assert_eq!((survey.changed, survey.shared, survey.rejected), (3, 4, 1));
        assert_eq!(pg_tables(&mut client, "r"), rows);
        let copied = Store::open_postgres(&db.url, "r").unwrap();
        assert_eq!(everything(&copied), want);
        assert!(database.occupied("r").unwrap().rows);

        let e = database.copy(&source, "r", false).unwrap_err();
        assert!(matches!(&e, StoreError::Occupied(_)), "{e}");
        assert!(e.to_string().contains("(repository \"r\")"), "{e}");
        // Replaced: the rows a gateway wrote since are gone, the copy's back.
        let mut moved_on = copied;
        moved_on
            .apply_page(3, &[record(5000, "2024-06-01")], &want.5, true)
            .unwrap();
        drop(moved_on);
        assert_ne!(pg_tables(&mut client, "r"), rows);
        database.copy(&source, "r", true).unwrap();
        assert_eq!(pg_tables(&mut client, "r"), rows);
        assert_eq!(
            everything(&Store::open_postgres(&db.url, "r").unwrap()),
            want
        );
        assert_eq!(
            pg_tables(&mut client, "other"),
            others,
            "another repository's rows"
        );
        drop(source);
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "the SQLite file");
        assert_eq!(files(dir.path()), before, "no file beside it");
    }

    /// A copy holds the repository's lease while it copies (taken before, in a transaction of
    /// its own) and releases it after, as not fresh: a gateway's claim is granted at once,
    /// however recently the repository was refreshed before, and the recorded generation
    /// stays. A copy refused releases it as it was. A live lease held by someone else refuses
    /// the copy, even a replacement, and is left as it is.
    #[test]
    fn a_copy_holds_the_lease_and_releases_it_not_fresh() {
        let Some(db) = TestDb::create("a_copy_holds_the_lease_and_releases_it_not_fresh") else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.sqlite");
        drop(filled(&path));
        let source = SqliteSource::open(&path).unwrap();
        let mut database = Database::connect(&db.url, false).unwrap();
        let mut client = db.client();
        // A repository a gateway refreshed a moment ago.
        client
            .execute(
                "INSERT INTO oai_bridge_refreshes (repository, refreshed_at, generation)
                 VALUES ('r', now(), 'g1')",
                &[],
            )
            .unwrap();
        assert!(!gateway_claims(&mut client, "r"), "fresh");
        // What the copy's transaction sees of the lease, kept with the copy.
        AFTER_WRITE.with(|hook| {
            *hook.borrow_mut() = Some(
                "CREATE TABLE lease_seen AS SELECT holder, expires_at > now() AS live
                 FROM oai_bridge_refreshes WHERE repository = 'r'"
                    .to_owned(),
            )
        });
        let copied = database.copy(&source, "r", false);
        AFTER_WRITE.with(|hook| hook.borrow_mut().take());
        copied.unwrap();
        let seen = client
            .query_one("SELECT holder, live FROM lease_seen", &[])
            .unwrap();
        let holder: String = seen.get(0);
        assert_eq!(holder, database.holder);
        assert!(holder.starts_with("migrate-state:"), "{holder}");
        assert!(seen.get::<_, bool>(1), "live while copying");
        assert_eq!(
            lease(&mut client, "r"),
            Some((None, false, false, Some("g1".to_owned()))),
            "free, not fresh, the generation kept"
        );
        assert!(gateway_claims(&mut client, "r"), "claimed at once after");

        // Held by the gateway now: refused, replacement or not, its lease untouched.
        for replace in [false, true] {
            let e = database.copy(&source, "r", replace).unwrap_err();
            assert!(
                matches!(&e, StoreError::Leased { holder, .. } if holder == "gw-2"),
                "{e}"
            );
            assert!(e.to_string().contains("\"gw-2\" holds a live lease"), "{e}");
            let (holder, live, ..) = lease(&mut client, "r").unwrap();
            assert_eq!((holder.as_deref(), live), (Some("gw-2"), true));
        }

        // Refused otherwise (the rows are there): released, its refresh time as it was.
        client
            .execute(
                "UPDATE oai_bridge_refreshes SET holder = NULL, expires_at = NULL,
                   refreshed_at = now() WHERE repository = 'r'",
                &[],
            )
            .unwrap();
        let e = database.copy(&source, "r", false).unwrap_err();
        assert!(matches!(&e, StoreError::Occupied(_)), "{e}");
        assert_eq!(
            lease(&mut client, "r"),
            Some((None, false, true, Some("g1".to_owned())))
        );
        // A repository nobody claimed before: a free row after, not fresh.
        database.copy(&source, "new", false).unwrap();
        assert_eq!(lease(&mut client, "new"), Some((None, false, false, None)));
    }

    /// A copy that outlasts its lease renews it, and commits; one whose lease is another's by
    /// the time it would commit is rolled back.
    #[test]
    fn a_long_copy_renews_its_lease() {
        let Some(db) = TestDb::create("a_long_copy_renews_its_lease") else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.sqlite");
        drop(filled(&path));
        let source = SqliteSource::open(&path).unwrap();
        let mut database = Database::connect(&db.url, false).unwrap();
        database.lease = Duration::from_millis(1500);
        let mut client = db.client();
        AFTER_WRITE.with(|hook| *hook.borrow_mut() = Some("SELECT pg_sleep(3)".to_owned()));
        let copied = database.copy(&source, "r", false);
        AFTER_WRITE.with(|hook| hook.borrow_mut().take());
        copied.unwrap();
        assert_eq!(lease(&mut client, "r"), Some((None, false, false, None)));

        // Taken over meanwhile (as a gateway would once the lease ended unrenewed).
        AFTER_WRITE.with(|hook| {
            *hook.borrow_mut() = Some(
                "UPDATE oai_bridge_refreshes SET holder = 'gw-3',
                   expires_at = now() + interval '1 minute' WHERE repository = 'q'"
                    .to_owned(),
            )
        });
        let copied = database.copy(&source, "q", false);
        AFTER_WRITE.with(|hook| hook.borrow_mut().take());
        let e = copied.unwrap_err();
        assert!(
            matches!(&e, StoreError::Leased { holder, .. } if holder == "gw-3"),
            "{e}"
        );
        assert_eq!(database.occupied("q").unwrap(), Occupied::default());
    }

    /// A copy whose rows, written, differ from the SQLite store (made so by a test's statement
    /// in its transaction) is rolled back: nothing of it is visible, the rows it was to
    /// replace are kept, its lease is released as it was; the error names what differs.
    #[test]
    fn a_copy_that_differs_is_rolled_back() {
        let Some(db) = TestDb::create("a_copy_that_differs_is_rolled_back") else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.sqlite");
        drop(filled(&path));
        let source = SqliteSource::open(&path).unwrap();
        let mut database = Database::connect(&db.url, false).unwrap();
        let mut client = db.client();
        database.copy(&source, "r", false).unwrap();
        let mut store = Store::open_postgres(&db.url, "r").unwrap();
        let state = store.state().unwrap();
        store
            .apply_page(3, &[record(5000, "2024-06-01")], &state, true)
            .unwrap();
        drop(store);
        client
            .execute(
                "UPDATE oai_bridge_refreshes SET refreshed_at = now() WHERE repository = 'r'",
                &[],
            )
            .unwrap();
        let kept = pg_tables(&mut client, "r");
        for (sabotage, differs) in [
            (
                "DELETE FROM oai_bridge_shared WHERE repository = 'r' AND url = 'https://h/shared'",
                "shared URLs: 4, 3",
            ),
            (
                "UPDATE oai_bridge_records SET deleted = true WHERE repository = 'r'
                   AND id = 'oai:x:00001'",
                "live records: 2500, 2499; deleted records: 1, 2",
            ),
            (
                "UPDATE oai_bridge_state SET doc = doc || ' ' WHERE repository = 'r'",
                "the state document's text",
            ),
        ] {
            for (repository, replace) in [("r", true), ("fresh", false)] {
                let sql = sabotage.replace("'r'", &format!("'{repository}'"));
                AFTER_WRITE.with(|hook| *hook.borrow_mut() = Some(sql));
                let copied = database.copy(&source, repository, replace);
                AFTER_WRITE.with(|hook| hook.borrow_mut().take());
                let e = copied.unwrap_err();
                assert!(matches!(&e, StoreError::Mismatch { .. }), "{e}");
                let text = e.to_string();
                assert!(
                    text.contains(&format!(": {differs}; it was rolled back")),
                    "{text}"
                );
            }
            assert_eq!(
                pg_tables(&mut client, "r"),
                kept,
                "the rows replaced are kept"
            );
            assert_eq!(database.occupied("fresh").unwrap(), Occupied::default());
            assert_eq!(
                lease(&mut client, "r").map(|l| (l.0, l.1, l.2)),
                Some((None, false, true)),
                "released as it was"
            );
        }
    }

    /// A database without the schema yet is read without a change in a dry run: no rows, no
    /// table made.
    #[test]
    fn a_read_only_connection_makes_no_table() {
        let Some(db) = TestDb::create("a_read_only_connection_makes_no_table") else {
            return;
        };
        let mut database = Database::connect(&db.url, true).unwrap();
        assert_eq!(database.occupied("r").unwrap(), Occupied::default());
        let tables: i64 = (db.client())
            .query_one(
                "SELECT count(*) FROM information_schema.tables WHERE table_name LIKE 'oai_bridge_%'",
                &[],
            )
            .unwrap()
            .get(0);
        assert_eq!(tables, 0);
    }

    /// A store of another schema version is not copied: this version would start it anew.
    #[test]
    fn a_store_of_another_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.sqlite");
        drop(Store::open(&path).unwrap());
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", 4).unwrap();
        drop(conn);
        let e = SqliteSource::open(&path).err().unwrap().to_string();
        assert!(e.contains("schema version 4"), "{e}");
        let e = SqliteSource::open(&dir.path().join("none.sqlite"))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("none.sqlite: cannot open"), "{e}");
    }

    /// Each difference between two surveys is named, with both values.
    #[test]
    fn differences_name_what_differs() {
        let a = Survey {
            records: Counts {
                live: 3,
                deleted: 1,
            },
            tally: Counts {
                live: 3,
                deleted: 1,
            },
            changed: 2,
            shared: 1,
            rejected: 0,
            state: State::default(),
        };
        assert!(a.differences(&a.clone()).is_empty());
        let b = Survey {
            records: Counts {
                live: 2,
                deleted: 1,
            },
            rejected: 4,
            state: State {
                runs: 3,
                ..State::default()
            },
            ..a.clone()
        };
        assert_eq!(
            a.differences(&b),
            ["live records: 3, 2", "rejected records: 0, 4", "the state"]
        );
    }
}
