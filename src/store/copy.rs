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

use std::path::{Path, PathBuf};

use postgres::{Client, GenericClient, Transaction};
use rusqlite::{Connection, OpenFlags, OptionalExtension};

use super::pg::{self, Doing, Failure};
use super::{Counts, Place, State, StateUrl, StoreError, persisted, sqlite};

/// Most rows in one batch written.
const BATCH_ROWS: usize = 1000;

/// Most bytes (bodies and identifiers) in one batch written, whichever limit comes first: a
/// thousand records with the profiles' fields are a few megabytes.
const BATCH_BYTES: usize = 8 << 20;

/// What a store holds, as counted (or, for the counts incremental runs keep, as kept).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Survey {
    /// Live and deleted records, counted.
    pub(crate) records: Counts,
    /// Live and deleted records as the store keeps them ([`super::Store::live`]).
    pub(crate) tally: Counts,
    /// Records changed since the last publish.
    pub(crate) changed: u64,
    /// URLs several records publish.
    pub(crate) shared: u64,
    /// Rejected records.
    pub(crate) rejected: u64,
    /// The state.
    pub(crate) state: State,
}

impl Survey {
    /// What differs between this survey and `other` (empty: nothing), each as `what: this,
    /// other`.
    pub(crate) fn differences(&self, other: &Survey) -> Vec<String> {
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

/// Why a copy was not made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CopyError {
    /// Reading the SQLite store or writing the database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The database already holds rows of the repository, and they were not to be replaced.
    #[error("state store {0}: already holds rows of this repository")]
    Occupied(Place),
    /// A gateway of a fleet holds a live lease on the repository: it is refreshing it now.
    #[error("state store {place}: a gateway ({holder}) is refreshing this repository now")]
    Leased {
        /// The repository's store in the database.
        place: Place,
        /// The gateway that holds the lease.
        holder: String,
    },
}

/// A SQLite store, opened to be read only.
pub(crate) struct SqliteSource {
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
    pub(crate) fn open(path: &Path) -> Result<SqliteSource, StoreError> {
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
            return Err(StoreError {
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
        let format = doc.as_deref().and_then(persisted::format_of);
        if format.is_some_and(|f| !(1..=persisted::FORMAT).contains(&f)) {
            return Err(StoreError {
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
    pub(crate) fn path(&self) -> &Path {
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
    pub(crate) fn survey(&self) -> Result<Survey, StoreError> {
        let path = &self.path;
        let number = |sql: &str| -> Result<u64, StoreError> {
            self.conn
                .query_row(sql, [], |r| r.get::<_, i64>(0))
                .map(|n| n as u64)
                .map_err(fail(path, "cannot count the records"))
        };
        let records = self
            .conn
            .query_row(
                "SELECT coalesce(sum(deleted = 0), 0), coalesce(sum(deleted <> 0), 0) FROM records",
                [],
                |r| {
                    Ok(Counts {
                        live: r.get::<_, i64>(0)? as u64,
                        deleted: r.get::<_, i64>(1)? as u64,
                    })
                },
            )
            .map_err(fail(path, "cannot count the records"))?;
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
            Some(doc) => serde_json::from_str(&doc).map_err(|e| StoreError {
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
    /// the repository already are replaced with `replace`, else the copy is refused; so is a
    /// repository a gateway is refreshing now, either way. Returns what was copied.
    pub(crate) fn copy_into(
        &self,
        client: &mut Client,
        url: &StateUrl,
        repository: &str,
        replace: bool,
    ) -> Result<Survey, CopyError> {
        let place = Place::Postgres {
            url: url.redacted(),
            repository: repository.to_owned(),
        };
        let at = |failure: Failure| StoreError {
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
        if let Some(holder) = found.lease {
            return Err(CopyError::Leased { place, holder });
        }
        if found.rows {
            if !replace {
                return Err(CopyError::Occupied(place));
            }
            pg::empty(&mut tx, repository, true).map_err(at)?;
        }
        let written = self.write(&mut tx, repository, &survey, doc.as_deref());
        match written {
            Ok(()) => {}
            Err(Fault::Sqlite(e)) => return Err(e.into()),
            Err(Fault::Postgres(f)) => return Err(at(f).into()),
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
        );
        let insert = tx
            .prepare(
                "INSERT INTO oai_bridge_changes (repository, id, prev_live, prev_datestamp,
                   prev_body, now_deleted, now_datestamp, now_body)
                 SELECT $1, * FROM unnest($2::text[], $3::bool[], $4::int8[], $5::bytea[],
                   $6::bool[], $7::int8[], $8::bytea[])",
            )
            .doing("cannot prepare the copy")?;
        self.batches(
            "SELECT id, prev_live, prev_datestamp, prev_body, now_deleted, now_datestamp,
               now_body
             FROM changes ORDER BY id",
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
pub(crate) struct Occupied {
    /// Rows of its store: records, changes, shared URLs, rejections, a state, or counts other
    /// than nothing (a store opened and never written holds counts of zero alone).
    pub(crate) rows: bool,
    /// The gateway that holds a live lease on it (a fleet's, `oai_bridge_refreshes`).
    pub(crate) lease: Option<String>,
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

/// A connection to the database stores are copied into.
pub(crate) struct Database {
    client: Client,
    url: StateUrl,
}

/// A failure to reach or prepare the database, naming it without its password.
#[derive(Debug, thiserror::Error)]
#[error("state database {url}: {what}: {source}")]
pub(crate) struct DatabaseError {
    /// The database's URL without its password.
    pub(crate) url: String,
    /// What was being done.
    pub(crate) what: &'static str,
    /// Why it failed.
    #[source]
    pub(crate) source: Box<dyn std::error::Error + Send + Sync>,
}

impl Database {
    /// Connects to the database at `url`, on the caller's thread (not one of a tokio
    /// runtime's), and applies the schema's migrations; with `read_only`, only reads its
    /// schema's version, refusing a newer one, and changes nothing.
    pub(crate) fn connect(url: &StateUrl, read_only: bool) -> Result<Database, DatabaseError> {
        let failed = |f: Failure| DatabaseError {
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
        Ok(Database {
            client,
            url: url.clone(),
        })
    }

    /// The database.
    pub(crate) fn url(&self) -> &StateUrl {
        &self.url
    }

    /// What the database holds of `repository`.
    pub(crate) fn occupied(&mut self, repository: &str) -> Result<Occupied, StoreError> {
        occupied(&mut self.client, repository).map_err(|f| self.error(repository, f))
    }

    /// Shared URLs the database holds for `repository` (which [`super::Store`] does not count).
    pub(crate) fn shared(&mut self, repository: &str) -> Result<u64, StoreError> {
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

    /// Copies `source` into `repository`'s rows ([`SqliteSource::copy_into`]).
    pub(crate) fn copy(
        &mut self,
        source: &SqliteSource,
        repository: &str,
        replace: bool,
    ) -> Result<Survey, CopyError> {
        source.copy_into(&mut self.client, &self.url, repository, replace)
    }

    /// Removes every row of `repository`'s store, its counts too, in one transaction: what a
    /// copy that did not read back as written leaves.
    pub(crate) fn remove(&mut self, repository: &str) -> Result<(), StoreError> {
        let removed = (|| {
            let mut tx = (self.client.transaction()).doing("cannot begin a transaction")?;
            pg::empty(&mut tx, repository, true)?;
            tx.execute(
                "DELETE FROM oai_bridge_tally WHERE repository = $1",
                &[&repository],
            )
            .doing("cannot empty the records")?;
            tx.commit().doing("cannot commit the removal")
        })();
        removed.map_err(|f| self.error(repository, f))
    }

    fn error(&self, repository: &str, f: Failure) -> StoreError {
        StoreError {
            place: Place::Postgres {
                url: self.url.redacted(),
                repository: repository.to_owned(),
            },
            what: f.what,
            source: f.source,
        }
    }
}

/// The error of `what` on the SQLite store at `path`.
fn fail<'a>(path: &'a Path, what: &'static str) -> impl FnOnce(rusqlite::Error) -> StoreError + 'a {
    move |source| StoreError {
        place: Place::File(path.to_owned()),
        what,
        source: Box::new(source),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::datestamp::Datestamp;
    use crate::inventory::SharedUrl;
    use crate::oai::parse::{DcElement, Record};
    use crate::store::Store;
    use crate::store::pg::testdb::TestDb;

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

    /// A SQLite store with more records than a batch, deletions, changes since a publish,
    /// shared URLs, rejections and a state.
    fn filled(path: &Path) -> Store {
        let mut store = Store::open(path).unwrap();
        let doc = include_str!("../../fixtures/store/state-v1.json");
        let mut state: State = serde_json::from_str(doc).unwrap();
        state.runs = 2;
        let page: Vec<Record> = (0..2500).map(|i| record(i, "2024-05-01")).collect();
        store.apply_page(1, &page, &state, false).unwrap();
        store.finish_run(true, Some(1), &state).unwrap();
        let shared = SharedUrl {
            url: "https://h/shared".into(),
            claims: vec![1, 2, 3],
        };
        store.published(&state, &[shared], true).unwrap();
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

    /// A store copied into the database answers every question as the SQLite store does, and
    /// the SQLite file is not changed; a second copy is refused, then replaces with `replace`;
    /// another repository's rows stay as they are.
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
        assert_eq!(want.2.0.live, 2500, "2501 records, one deleted");
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
        let source = SqliteSource::open(&path).unwrap();
        let mut database = Database::connect(&db.url, false).unwrap();
        assert_eq!(database.occupied("r").unwrap(), Occupied::default());
        let survey = database.copy(&source, "r", false).unwrap();
        assert_eq!(survey, source.survey().unwrap());
        assert_eq!((survey.changed, survey.shared, survey.rejected), (3, 1, 1));
        let copied = Store::open_postgres(&db.url, "r").unwrap();
        assert_eq!(everything(&copied), want);
        assert_eq!(database.shared("r").unwrap(), 1);
        assert!(database.occupied("r").unwrap().rows);

        let e = database.copy(&source, "r", false).unwrap_err();
        assert!(matches!(&e, CopyError::Occupied(_)), "{e}");
        assert!(e.to_string().contains("(repository \"r\")"), "{e}");
        // Replaced: the rows a gateway wrote since are gone, the copy's back.
        let mut moved_on = copied;
        moved_on
            .apply_page(3, &[record(5000, "2024-06-01")], &want.5, true)
            .unwrap();
        drop(moved_on);
        database.copy(&source, "r", true).unwrap();
        assert_eq!(
            everything(&Store::open_postgres(&db.url, "r").unwrap()),
            want
        );
        assert_eq!(other.counts().unwrap().live, 1, "another repository's rows");
        database.remove("r").unwrap();
        assert_eq!(database.occupied("r").unwrap(), Occupied::default());
        assert_eq!(other.counts().unwrap().live, 1, "another repository's rows");
        database.copy(&source, "r", false).unwrap();
        drop(source);
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "the SQLite file");
        assert_eq!(files(dir.path()), before, "no file beside it");

        // A live lease (a gateway refreshing it) refuses even a replacement.
        db.client()
            .execute(
                "INSERT INTO oai_bridge_refreshes (repository, holder, expires_at)
                 VALUES ('r', 'gw-1', now() + interval '1 minute')",
                &[],
            )
            .unwrap();
        let source = SqliteSource::open(&path).unwrap();
        let e = database.copy(&source, "r", true).unwrap_err();
        assert!(
            matches!(&e, CopyError::Leased { holder, .. } if holder == "gw-1"),
            "{e}"
        );
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
