//! The SQLite backend of [`super::Store`]: one file per repository (`store.sqlite`), in WAL mode
//! with `synchronous=NORMAL`. A crash of the process never loses a committed page; a power
//! failure may lose the last pages, never consistency, and the next run re-asks for them.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use oai_pmh::{Datestamp, Record};
use rusqlite::{Connection, OptionalExtension, params};

use super::backend::{Backend, Stopped, Visit};
use super::page::{self, Held, Incoming, Rejected, Stored};
use super::{Counts, Place, State, StoreError, decode_body, persisted};
use oai_bridge_files::published::SharedUrl;

/// Version of the tables; a store of another version is started anew.
pub(super) const SCHEMA: i64 = 5;

/// One repository's store in its SQLite file.
#[derive(Debug)]
pub(super) struct Sqlite {
    /// The connection (the tests of the SQLite layout read it).
    pub(super) conn: Connection,
    path: PathBuf,
    /// The run of the last page applied, and whether it began on an empty store: its pages
    /// are then tried without reading first ([`write_fresh`]).
    run: Option<(u64, bool)>,
    /// Whether SQLite's page cache is the larger one, for pages of records already stored
    /// ([`Sqlite::fit_cache`]).
    scattered: bool,
}

impl Sqlite {
    /// A page read, decided and written in one transaction: [`Backend::apply_page`], `fresh`
    /// when the run began on an empty store (the page is then tried unread).
    fn apply_page_in(
        &mut self,
        run: u64,
        page: &[Incoming],
        fresh: bool,
        state: &State,
        track: bool,
    ) -> Result<(), StoreError> {
        let path = &self.path;
        // Immediate: the page's writes follow its reads, and another writer waits meanwhile.
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(fail(path, "cannot begin a transaction"))?;
        let tried = match fresh {
            true => write_fresh(&tx, path, run as i64, page, track)?,
            false => None,
        };
        let decision = match tried {
            Some(decision) => decision,
            None => {
                let held = read_page(&tx, path, page)?;
                let decision = page::decide(page, held, run as i64, track);
                insert(&tx, run as i64, page, &decision.inserted)
                    .map_err(fail(path, "cannot store a record"))?;
                write_page(&tx, path, run as i64, page, &decision)?;
                decision
            }
        };
        if track {
            let counts = [decision.live, decision.deleted];
            let sql = "UPDATE tally SET live = live + ?1, deleted = deleted + ?2";
            execute_cached(&tx, path, sql, counts, "cannot count the records")?;
        }
        write_state(&tx, state).map_err(fail(path, "cannot save the checkpoint"))?;
        tx.commit().map_err(fail(path, "cannot commit a page"))
    }

    /// Where SQLite keeps its temporary files (`temp_store`), set between transactions.
    fn set_temp_store(&self, to: &str) -> Result<(), StoreError> {
        (self.conn.pragma_update(None, "temp_store", to))
            .map_err(fail(&self.path, "cannot configure"))
    }

    /// Opens (or creates) the store at `path`. A store whose tables are of another schema
    /// version, or whose state is of a format this version does not read (a newer version's,
    /// [`super::persisted::FORMAT`]), is emptied: the next harvest is a full one.
    pub(super) fn open(path: &Path) -> Result<Self, StoreError> {
        let conn = connect(path)?;
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(fail(path, "cannot read the schema version"))?;
        let unknown_format = version == SCHEMA && state_of_unknown_format(&conn, path)?;
        if unknown_format {
            tracing::warn!(
                store = %path.display(),
                "the store's state is of a format this version does not read (a newer version \
                 wrote it): starting the store anew"
            );
        }
        if version != SCHEMA || unknown_format {
            create_tables(&conn, path)?;
        }
        add_later_tables(&conn, path)?;
        Ok(Self {
            conn,
            path: path.to_owned(),
            run: None,
            scattered: false,
        })
    }

    /// Sizes SQLite's page cache for the pages to come: the larger when they update records
    /// already stored (`scattered`: an incremental run's, or a full harvest's over an earlier
    /// one), SQLite's default (2 MiB) when a first harvest fills an empty store.
    ///
    /// A page's records may be anywhere in the store (OAI-PMH sets no order on a list, and an
    /// incremental one lists what changed): with the default, fewer than a page of records'
    /// rows stayed cached on 16 KiB pages ([`super::page_size_for`]), and each changed
    /// record's page was read from the file again for each statement of the transaction that
    /// touches it: at a million records with 1% changed, 76,600 reads of 17,500 pages (1.2 GB
    /// copied), and 92,000 reads with the WAL's. Room for 16 MiB, taken only as pages are read
    /// and given back when the store closes after its run, makes that 55,700 in all. A page
    /// that fills an empty store ([`write_fresh`]) reads nothing back: the larger cache only
    /// filled up with what it wrote, 14.5 MiB of a gateway's 204 MiB peak after a first
    /// refresh of a million records.
    fn fit_cache(&mut self, scattered: bool) -> Result<(), StoreError> {
        if scattered != self.scattered {
            let kib: i64 = if scattered { 16 * 1024 } else { 2000 };
            (self.conn.pragma_update(None, "cache_size", -kib))
                .map_err(fail(&self.path, "cannot configure"))?;
            self.scattered = scattered;
        }
        Ok(())
    }

    /// The identifiers `sql` selects, given a limit of `n` as `?1`.
    fn ids(&self, sql: &str, n: usize, what: &'static str) -> Result<Vec<String>, StoreError> {
        let read = || -> rusqlite::Result<Vec<String>> {
            let mut stmt = self.conn.prepare(sql)?;
            stmt.query_map([n as i64], |r| r.get(0))?.collect()
        };
        read().map_err(fail(&self.path, what))
    }

    /// The one number `sql` selects.
    fn number(&self, sql: &str, what: &'static str) -> Result<u64, StoreError> {
        self.conn
            .query_row(sql, [], |r| r.get::<_, i64>(0))
            .map(|n| n as u64)
            .map_err(fail(&self.path, what))
    }

    /// Whether `run` began on an empty store (asked at its first page here; a run resumed by
    /// another process did not).
    fn began_empty(&mut self, run: u64) -> Result<bool, StoreError> {
        if let Some((known, empty)) = self.run
            && known == run
        {
            return Ok(empty);
        }
        let empty: bool = (self.conn)
            .query_row("SELECT NOT EXISTS (SELECT 1 FROM records)", [], |r| {
                r.get(0)
            })
            .map_err(fail(&self.path, "cannot read the records"))?;
        self.run = Some((run, empty));
        Ok(empty)
    }
}

impl Backend for Sqlite {
    /// Where the store is: its file.
    fn place(&self) -> Place {
        Place::File(self.path.clone())
    }

    /// Moves the store onto pages of `size` bytes ([`super::page_size_for`]) when it is on smaller
    /// ones, or empty: only a rebuild (`VACUUM`, outside WAL mode) changes the page size, which
    /// costs little on an empty store and once on a full one (made by an earlier version, or
    /// before the profiles were on). A store with records is not moved onto smaller pages. Best
    /// effort: when the rebuild fails (it needs room for a copy) the store stays as it was,
    /// and works as before.
    fn fit_pages(&mut self, size: i64) {
        let conn = &self.conn;
        let page_size = || conn.pragma_query_value(None, "page_size", |r| r.get::<_, i64>(0));
        let Ok(current) = page_size() else {
            return;
        };
        let empty = || {
            conn.query_row("SELECT NOT EXISTS (SELECT 1 FROM records)", [], |r| {
                r.get(0)
            })
            .unwrap_or(false)
        };
        if current == size || (current > size && !empty()) {
            return;
        }
        let rebuilt = conn
            .pragma_update(None, "journal_mode", "DELETE")
            .and_then(|()| conn.pragma_update(None, "page_size", size))
            .and_then(|()| conn.execute_batch("VACUUM"));
        let restored = conn.pragma_update(None, "journal_mode", "WAL");
        match rebuilt.and(restored) {
            Ok(()) => tracing::info!(
                store = %self.path.display(),
                from = current,
                to = page_size().unwrap_or_default(),
                "moved the store onto pages of another size"
            ),
            Err(e) => tracing::warn!(
                store = %self.path.display(),
                "cannot move the store onto {size}-byte pages, keeping it as it is: {e}"
            ),
        }
    }

    /// [`super::Store::state`] on SQLite.
    fn state(&self) -> Result<State, StoreError> {
        match state_doc(&self.conn, &self.path)? {
            None => Ok(State::default()),
            Some(doc) => serde_json::from_str(&doc).map_err(|e| StoreError::Failed {
                place: Place::File(self.path.clone()),
                what: "cannot parse the state",
                source: Box::new(e),
            }),
        }
    }

    /// [`super::Store::save_state`] on SQLite.
    fn save_state(&mut self, state: &State) -> Result<(), StoreError> {
        let tx = self
            .conn
            .transaction()
            .map_err(fail(&self.path, "cannot begin a transaction"))?;
        write_state(&tx, state).map_err(fail(&self.path, "cannot save the state"))?;
        tx.commit()
            .map_err(fail(&self.path, "cannot commit the state"))
    }

    /// [`super::Store::reset`] on SQLite.
    fn reset(&mut self, state: &State) -> Result<(), StoreError> {
        let tx = self
            .conn
            .transaction()
            .map_err(fail(&self.path, "cannot begin a transaction"))?;
        tx.execute_batch(
            "DELETE FROM records; DELETE FROM shared; DELETE FROM changes; DELETE FROM rejected;
             UPDATE tally SET live = 0, deleted = 0;",
        )
        .map_err(fail(&self.path, "cannot empty the records"))?;
        write_state(&tx, state).map_err(fail(&self.path, "cannot save the state"))?;
        tx.commit()
            .map_err(fail(&self.path, "cannot commit the reset"))
    }

    /// [`super::Store::apply_page`] on SQLite: reads the stored versions and rejections of the
    /// page's records, decides the page ([`page::decide`]), and writes the decision.
    fn apply_page(
        &mut self,
        run: u64,
        records: &[Record],
        state: &State,
        track: bool,
    ) -> Result<(), StoreError> {
        let page: Vec<Incoming> = records.iter().map(Incoming::of).collect();
        let fresh = self.began_empty(run)?;
        // SQLite journals the pages a statement changes, past 64 KiB in a temporary file, when
        // the statement may have to be undone alone: under a fresh page's savepoint, and on a
        // later run the statements that write a changed record and its change. On file,
        // that was a temporary file per page and, at a million records with 1% changed, 430 MiB
        // written to them (55,000 writes) for 190 MiB of changed pages; on a first harvest a
        // tenth more bytes written (benches/compare-RESULTS.md). Kept in memory for this
        // transaction alone, the journal is bounded by what one statement changes (under a
        // fresh page's savepoint, by what the page changes); the connection's other statements
        // keep their temporary files (sorts) on disk.
        self.fit_cache(track || !fresh)?;
        self.set_temp_store("MEMORY")?;
        let applied = self.apply_page_in(run, &page, fresh, state, track);
        // The page's own error first, if any.
        let restored = self.set_temp_store("DEFAULT");
        applied.and(restored)
    }

    /// [`super::Store::finish_run`] on SQLite.
    fn finish_run(
        &mut self,
        full: bool,
        sweep: Option<u64>,
        state: &State,
    ) -> Result<u64, StoreError> {
        let tx = self
            .conn
            .transaction()
            .map_err(fail(&self.path, "cannot begin a transaction"))?;
        let mut removed = 0;
        if let Some(run) = sweep {
            removed =
                tx.query_row(
                    "SELECT count(*) FROM records WHERE seen <> ?1 AND deleted = 0",
                    [run as i64],
                    |r| r.get::<_, i64>(0),
                )
                .map_err(fail(&self.path, "cannot count unseen records"))? as u64;
            tx.execute("DELETE FROM records WHERE seen <> ?1", [run as i64])
                .map_err(fail(&self.path, "cannot remove unseen records"))?;
            tx.execute("DELETE FROM rejected WHERE seen <> ?1", [run as i64])
                .map_err(fail(&self.path, "cannot remove unseen records"))?;
        }
        debug_assert!(full || sweep.is_none(), "only a full harvest sweeps");
        if full {
            tx.execute(
                "UPDATE tally SET (live, deleted) = (SELECT coalesce(sum(deleted = 0), 0),
                   coalesce(sum(deleted <> 0), 0) FROM records)",
                [],
            )
            .map_err(fail(&self.path, "cannot count the records"))?;
        }
        write_state(&tx, state).map_err(fail(&self.path, "cannot save the state"))?;
        tx.commit()
            .map_err(fail(&self.path, "cannot commit the end of a run"))?;
        Ok(removed)
    }

    /// [`super::Store::dirty`] on SQLite.
    fn dirty(
        &self,
        f: Visit<'_, (Record, Option<Record>)>,
    ) -> Result<Result<(), Stopped>, StoreError> {
        // Each change keeps the record's sets beside it (`now_sets`), so the publish reads this
        // small table alone: joined to `records` for them, the read took each changed record's
        // row from the big table, about 3% of a patched refresh's CPU at a million records with
        // 1% changed. A change listed by a version before the column has none (NULL): its sets
        // are read from the record's row, one by one.
        let sql = "SELECT id, now_datestamp, now_deleted, now_body, prev_live, prev_body,
               prev_datestamp, now_sets
             FROM changes";
        let mut record_sets = self
            .conn
            .prepare_cached("SELECT sets FROM records WHERE id = ?1")
            .map_err(fail(&self.path, "cannot read the changed records"))?;
        let mut stmt = self
            .conn
            .prepare(sql)
            .map_err(fail(&self.path, "cannot read the changed records"))?;
        let mut rows = stmt
            .query([])
            .map_err(fail(&self.path, "cannot read the changed records"))?;
        while let Some(row) = rows
            .next()
            .map_err(fail(&self.path, "cannot read a changed record"))?
        {
            type Read = (Record, Option<Record>, Option<String>);
            let read = |row: &rusqlite::Row<'_>| -> rusqlite::Result<Read> {
                let listed = row.get::<_, Option<String>>(7)?;
                let mut now = Record {
                    identifier: row.get(0)?,
                    datestamp: row.get::<_, Option<i64>>(1)?.map(Datestamp::unpack),
                    deleted: row.get(2)?,
                    sets: super::split_sets(listed.as_deref().unwrap_or_default()),
                    dc_identifiers: Vec::new(),
                    dc: Default::default(),
                    empty_metadata: false,
                };
                let mut before = match row.get::<_, Option<bool>>(4)?.unwrap_or(false) {
                    true => Some(Record {
                        identifier: now.identifier.clone(),
                        datestamp: row.get::<_, Option<i64>>(6)?.map(Datestamp::unpack),
                        ..Record::default()
                    }),
                    false => None,
                };
                decode_column(row, 3, &mut now)?;
                if let Some(before) = &mut before {
                    decode_column(row, 5, before)?;
                }
                Ok((now, before, listed))
            };
            let (mut now, before, listed) =
                read(row).map_err(fail(&self.path, "damaged record"))?;
            if listed.is_none() {
                let row_sets: Option<String> = (record_sets
                    .query_row([&now.identifier], |r| r.get(0)))
                .optional()
                .map_err(fail(&self.path, "cannot read the changed records"))?;
                now.sets = super::split_sets(&row_sets.unwrap_or_default());
            }
            if let Err(e) = f((now, before)) {
                return Ok(Err(e));
            }
        }
        Ok(Ok(()))
    }

    /// [`super::Store::for_each_live`] on SQLite.
    fn for_each_live(&self, f: Visit<'_, Record>) -> Result<Result<(), Stopped>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, datestamp, sets, body FROM records WHERE deleted = 0 ORDER BY id")
            .map_err(fail(&self.path, "cannot read the records"))?;
        let mut rows = stmt
            .query([])
            .map_err(fail(&self.path, "cannot read the records"))?;
        while let Some(row) = rows
            .next()
            .map_err(fail(&self.path, "cannot read a record"))?
        {
            let sets: String = row
                .get(2)
                .map_err(fail(&self.path, "cannot read a record"))?;
            let mut record = Record {
                identifier: row
                    .get(0)
                    .map_err(fail(&self.path, "cannot read a record"))?,
                datestamp: row
                    .get::<_, Option<i64>>(1)
                    .map_err(fail(&self.path, "cannot read a record"))?
                    .map(Datestamp::unpack),
                deleted: false,
                sets: super::split_sets(&sets),
                dc_identifiers: Vec::new(),
                dc: Default::default(),
                empty_metadata: false,
            };
            decode_column(row, 3, &mut record).map_err(fail(&self.path, "damaged record"))?;
            if let Err(e) = f(record) {
                return Ok(Err(e));
            }
        }
        Ok(Ok(()))
    }

    /// [`super::Store::rejected`] on SQLite.
    fn rejected(&self) -> Result<u64, StoreError> {
        self.number(
            "SELECT count(*) FROM rejected",
            "cannot count the rejected records",
        )
    }

    /// [`super::Store::rejected_examples`] on SQLite.
    fn rejected_examples(&self, n: usize) -> Result<Vec<String>, StoreError> {
        self.ids(
            "SELECT id FROM rejected ORDER BY id LIMIT ?1",
            n,
            "cannot read the rejected records",
        )
    }

    /// [`super::Store::deleted_examples`] on SQLite.
    fn deleted_examples(&self, n: usize) -> Result<Vec<String>, StoreError> {
        self.ids(
            "SELECT id FROM records WHERE deleted <> 0 ORDER BY id LIMIT ?1",
            n,
            "cannot read the deleted records",
        )
    }

    /// [`super::Store::changed`] on SQLite.
    fn changed(&self) -> Result<u64, StoreError> {
        self.number(
            "SELECT count(*) FROM changes",
            "cannot count the changed records",
        )
    }

    /// [`super::Store::shared_urls`] on SQLite.
    fn shared_urls(&self, limit: u64) -> Result<Option<HashSet<String>>, StoreError> {
        let read = || -> rusqlite::Result<Option<HashSet<String>>> {
            let mut stmt = self.conn.prepare("SELECT url FROM shared LIMIT ?1")?;
            let urls = stmt
                .query_map([limit.saturating_add(1).min(i64::MAX as u64) as i64], |r| {
                    r.get::<_, String>(0)
                })?
                .collect::<rusqlite::Result<HashSet<String>>>()?;
            Ok(Some(urls).filter(|u| u.len() as u64 <= limit))
        };
        read().map_err(fail(&self.path, "cannot read the shared URLs"))
    }

    /// [`super::Store::shared`] on SQLite.
    fn shared(&self, url: &str) -> Result<Option<SharedUrl>, StoreError> {
        self.conn
            .prepare_cached("SELECT claims FROM shared WHERE url = ?1")
            .and_then(|mut stmt| {
                stmt.query_row([url], |r| {
                    // Packed datestamps, eight little-endian bytes each.
                    let bytes: Vec<u8> = r.get(0)?;
                    Ok(SharedUrl {
                        url: url.to_owned(),
                        claims: bytes
                            .chunks_exact(8)
                            .map(|c| i64::from_le_bytes(c.try_into().expect("eight bytes")))
                            .collect(),
                    })
                })
                .optional()
            })
            .map_err(fail(&self.path, "cannot read the shared URLs"))
    }

    /// [`super::Store::published`] on SQLite.
    fn published(
        &mut self,
        state: &State,
        shared: &[SharedUrl],
        replace: bool,
    ) -> Result<(), StoreError> {
        let path = &self.path;
        let tx = self
            .conn
            .transaction()
            .map_err(fail(path, "cannot begin a transaction"))?;
        tx.execute("DELETE FROM changes", [])
            .map_err(fail(path, "cannot mark the records published"))?;
        if replace {
            tx.execute("DELETE FROM shared", [])
                .map_err(fail(path, "cannot replace the shared URLs"))?;
        }
        {
            let mut upsert = tx
                .prepare(
                    "INSERT INTO shared (url, claims) VALUES (?1, ?2)
                     ON CONFLICT (url) DO UPDATE SET claims = excluded.claims",
                )
                .map_err(fail(path, "cannot record the shared URLs"))?;
            let mut delete = tx
                .prepare("DELETE FROM shared WHERE url = ?1")
                .map_err(fail(path, "cannot record the shared URLs"))?;
            for s in shared {
                if s.claims.len() < 2 {
                    delete.execute([&s.url])
                } else {
                    let claims: Vec<u8> = s.claims.iter().flat_map(|c| c.to_le_bytes()).collect();
                    upsert.execute(params![s.url, claims])
                }
                .map_err(fail(path, "cannot record the shared URLs"))?;
            }
        }
        write_state(&tx, state).map_err(fail(path, "cannot save the state"))?;
        tx.commit().map_err(fail(path, "cannot commit the publish"))
    }

    /// [`super::Store::verify`] on SQLite.
    fn verify(&self) -> Result<(), StoreError> {
        let verdict: String = self
            .conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .map_err(fail(&self.path, "cannot check integrity"))?;
        if verdict != "ok" {
            return Err(StoreError::Failed {
                place: Place::File(self.path.clone()),
                what: "damaged",
                source: format!("integrity_check: {verdict}").into(),
            });
        }
        self.state().map(drop)
    }

    /// [`super::Store::counts`] on SQLite.
    fn counts(&self) -> Result<Counts, StoreError> {
        count_records(&self.conn, &self.path)
    }

    /// [`super::Store::live`] on SQLite.
    fn live(&self) -> Result<u64, StoreError> {
        self.number("SELECT live FROM tally", "cannot count the records")
    }

    /// [`super::Store::deleted`] on SQLite.
    fn deleted(&self) -> Result<u64, StoreError> {
        self.number("SELECT deleted FROM tally", "cannot count the records")
    }
}

/// What the store holds of `page`'s records in `tx`: their stored versions (without their
/// bodies) and their rejections ([`page::decide`]'s input).
fn read_page<'p>(
    tx: &rusqlite::Transaction<'_>,
    path: &Path,
    page: &'p [Incoming],
) -> Result<Held<&'p str>, StoreError> {
    // Without the bodies, even to track changes: a change's previous body is copied inside
    // the database ([`write_page`]), not read out and written back.
    static READ_STORED: LazyLock<String> =
        LazyLock::new(|| by_chunk("records", "deleted = 0, datestamp"));
    let stored = by_id(
        tx,
        path,
        &READ_STORED,
        page,
        "cannot read a record",
        |row| {
            Ok(Stored {
                live: row.get(1)?,
                datestamp: row.get(2)?,
                body: None,
            })
        },
    )?;
    let mut rejected = page::HashMap::default();
    // Rejections are rare: while there are none, a page has none to read.
    if any_rejected(tx, path)? {
        static READ_REJECTED: LazyLock<String> =
            LazyLock::new(|| by_chunk("rejected", "datestamp, seen"));
        let what = "cannot read the rejected records";
        rejected = by_id(tx, path, &READ_REJECTED, page, what, |row| {
            Ok(Rejected {
                datestamp: row.get(1)?,
                seen: row.get(2)?,
            })
        })?;
    }
    Ok(Held { stored, rejected })
}

/// How many identifiers one statement of [`by_id`] asks for: a page's go in chunks of this
/// many, the last one padded with NULLs (which match no row), so that one cached statement
/// serves pages of every size. One statement per chunk rather than per record: running a
/// statement costs more than the lookup it makes.
const CHUNK: usize = 64;

/// The statement that reads `columns` of `table`'s rows for a chunk of [`CHUNK`] identifiers
/// (`?1` to `?64`), each row led by its identifier's index in the chunk.
fn by_chunk(table: &str, columns: &str) -> String {
    let ids: Vec<String> = (0..CHUNK).map(|i| format!("({i}, ?{})", i + 1)).collect();
    format!(
        "WITH chunk (i, id) AS (VALUES {}) SELECT chunk.i, {columns} FROM chunk JOIN {table} t
         ON t.id = chunk.id",
        ids.join(", ")
    )
}

/// The rows `sql` ([`by_chunk`]) finds for `page`'s identifiers, made into values by `value`
/// (column 0 is the index, the columns asked for follow), keyed by the page's identifiers.
fn by_id<'p, T>(
    tx: &rusqlite::Transaction<'_>,
    path: &Path,
    sql: &str,
    page: &'p [Incoming],
    what: &'static str,
    value: impl Fn(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Result<page::HashMap<&'p str, T>, StoreError> {
    let mut statement =
        (tx.prepare_cached(sql)).map_err(fail(path, "cannot prepare the record update"))?;
    let mut found = page::HashMap::with_capacity_and_hasher(page.len(), Default::default());
    for chunk in page.chunks(CHUNK) {
        let ids = (0..CHUNK).map(|i| chunk.get(i).map(|r| r.id.as_str()));
        let read = || -> rusqlite::Result<()> {
            let mut rows = statement.query(rusqlite::params_from_iter(ids))?;
            while let Some(row) = rows.next()? {
                let id = chunk[usize::from(row.get::<_, u8>(0)?)].id.as_str();
                found.insert(id, value(row)?);
            }
            Ok(())
        };
        read().map_err(fail(path, what))?;
    }
    Ok(found)
}

/// Runs `sql` with `params` in `tx` from the statement cache, as every statement run for each
/// page is (parsing one costs more than running it); `what` names a failure.
fn execute_cached(
    tx: &rusqlite::Transaction<'_>,
    path: &Path,
    sql: &str,
    params: impl rusqlite::Params,
    what: &'static str,
) -> Result<usize, StoreError> {
    (tx.prepare_cached(sql).and_then(|mut s| s.execute(params))).map_err(fail(path, what))
}

/// Whether any record is listed as rejected (a statement run for each page, so cached).
fn any_rejected(tx: &rusqlite::Transaction<'_>, path: &Path) -> Result<bool, StoreError> {
    (tx.prepare_cached("SELECT EXISTS (SELECT 1 FROM rejected)"))
        .and_then(|mut s| s.query_row([], |r| r.get(0)))
        .map_err(fail(path, "cannot read the rejected records"))
}

/// The page of a run that began on an empty store (a first harvest), decided as if nothing
/// were stored for its records and written without reading them first: the inserts prove it
/// (an identifier stored refuses its insert). `None`, with nothing written, when the proof
/// fails (an identifier an earlier page of the run brought), or cannot be made: a rejection
/// stored, or an unreadable record, which inserts nothing. A choice of speed, not a rule: the
/// decision is [`page::decide`]'s either way.
fn write_fresh<'p>(
    tx: &rusqlite::Transaction<'_>,
    path: &Path,
    run: i64,
    page: &'p [Incoming],
    track: bool,
) -> Result<Option<page::Decision<'p>>, StoreError> {
    if any_rejected(tx, path)? || page.iter().any(|r| r.unreadable) {
        return Ok(None);
    }
    let decision = page::decide(page, Held::<&str>::default(), run, track);
    let savepoint = |sql| execute_cached(tx, path, sql, (), "cannot store a record").map(drop);
    savepoint("SAVEPOINT fresh")?;
    match insert(tx, run, page, &decision.inserted) {
        Ok(()) => savepoint("RELEASE fresh")?,
        Err(rusqlite::Error::SqliteFailure(e, _))
            if e.code == rusqlite::ErrorCode::ConstraintViolation =>
        {
            savepoint("ROLLBACK TO fresh")?;
            savepoint("RELEASE fresh")?;
            return Ok(None);
        }
        Err(e) => return Err(fail(path, "cannot store a record")(e)),
    }
    write_page(tx, path, run, page, &decision)?;
    Ok(Some(decision))
}

/// Inserts the `rows` of `page`, records new to the store, seen by `run`.
fn insert(
    tx: &rusqlite::Transaction<'_>,
    run: i64,
    page: &[Incoming],
    rows: &[usize],
) -> rusqlite::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut insert = tx.prepare_cached(
        "INSERT INTO records (id, datestamp, deleted, sets, body, seen)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for r in rows.iter().map(|&i| &page[i]) {
        insert.execute(params![r.id, r.datestamp, r.deleted, r.sets, r.body, run])?;
    }
    Ok(())
}

/// Writes `decision` of `page`, seen by `run`, in `tx`, but for its inserts ([`insert`]).
fn write_page(
    tx: &rusqlite::Transaction<'_>,
    path: &Path,
    run: i64,
    page: &[Incoming],
    decision: &page::Decision<'_>,
) -> Result<(), StoreError> {
    let prepare = |sql| {
        tx.prepare_cached(sql)
            .map_err(fail(path, "cannot prepare the record update"))
    };
    let written =
        |r: rusqlite::Result<usize>| r.map(drop).map_err(fail(path, "cannot store a record"));
    if !decision.changes.is_empty() {
        // A change: the version last published, before the first change since (NULLs for a
        // record not stored then), kept as it is when the record changed before; and the
        // record as it is now, beside it, so that the publish reads this small table alone.
        // The version stored before is copied from its row, before the row is written below.
        let mut change_new = prepare(
            "INSERT INTO changes (id, prev_live, prev_datestamp, prev_body,
               now_deleted, now_datestamp, now_body, now_sets)
             VALUES (?1, NULL, NULL, NULL, ?2, ?3, ?4, ?5)
             ON CONFLICT (id) DO UPDATE SET now_deleted = excluded.now_deleted,
               now_datestamp = excluded.now_datestamp, now_body = excluded.now_body,
               now_sets = excluded.now_sets",
        )?;
        let mut change_stored = prepare(
            "INSERT INTO changes (id, prev_live, prev_datestamp, prev_body,
               now_deleted, now_datestamp, now_body, now_sets)
             SELECT id, deleted = 0, datestamp, body, ?2, ?3, ?4, ?5 FROM records WHERE id = ?1
             ON CONFLICT (id) DO UPDATE SET now_deleted = excluded.now_deleted,
               now_datestamp = excluded.now_datestamp, now_body = excluded.now_body,
               now_sets = excluded.now_sets",
        )?;
        for change in &decision.changes {
            let now = &page[change.now];
            let statement = match change.prev {
                Some(_) => &mut change_stored,
                None => &mut change_new,
            };
            let values = params![change.id, now.deleted, now.datestamp, now.body, now.sets];
            written(statement.execute(values))?;
        }
    }
    if !decision.updated.is_empty() {
        let mut update = prepare(
            "UPDATE records SET datestamp = ?2, deleted = ?3, sets = ?4, body = ?5, seen = ?6
             WHERE id = ?1",
        )?;
        for r in decision.updated.iter().map(|&i| &page[i]) {
            written(update.execute(params![r.id, r.datestamp, r.deleted, r.sets, r.body, run]))?;
        }
    }
    if !decision.kept.is_empty() {
        let mut keep = prepare("UPDATE records SET seen = ?2 WHERE id = ?1")?;
        for id in &decision.kept {
            written(keep.execute(params![id, run]))?;
        }
    }
    if !decision.rejected.is_empty() {
        let mut reject = prepare(
            "INSERT INTO rejected (id, datestamp, seen) VALUES (?1, ?2, ?3)
             ON CONFLICT (id) DO UPDATE SET datestamp = excluded.datestamp, seen = excluded.seen",
        )?;
        for (id, r) in &decision.rejected {
            written(reject.execute(params![id, r.datestamp, r.seen]))?;
        }
    }
    if !decision.settled.is_empty() {
        let mut settle = prepare("DELETE FROM rejected WHERE id = ?1")?;
        for id in &decision.settled {
            written(settle.execute([id]))?;
        }
    }
    Ok(())
}

/// Opens the database at `path` in WAL mode, waiting for a lock rather than failing at once.
fn connect(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open(path).map_err(fail(path, "cannot open"))?;
    conn.busy_timeout(std::time::Duration::from_secs(30))
        .map_err(fail(path, "cannot configure"))?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(fail(path, "cannot switch to WAL"))?;
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(fail(path, "cannot configure"))?;
    // A page runs up to 16 cached statements (reads, savepoints, writes, the checkpoint), the
    // cache's default size: room for them all and the run's others, so none is parsed again.
    conn.set_prepared_statement_cache_capacity(32);
    // SQLite's page cache: its default until an incremental run's pages ([`Sqlite::fit_cache`]).
    Ok(conn)
}

/// Whether the saved state is of a format this version does not read ([`super::persisted::FORMAT`]).
fn state_of_unknown_format(conn: &Connection, path: &Path) -> Result<bool, StoreError> {
    let doc = state_doc(conn, path)?;
    Ok(doc.as_deref().is_some_and(persisted::of_unknown_format))
}

/// The state document saved in the database at `path`, open as `conn`, if any.
fn state_doc(conn: &Connection, path: &Path) -> Result<Option<String>, StoreError> {
    conn.query_row("SELECT doc FROM state WHERE k = 0", [], |r| r.get(0))
        .optional()
        .map_err(fail(path, "cannot read the state"))
}

/// Drops every table and creates those of [`SCHEMA`], empty, in one transaction.
fn create_tables(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    conn.execute_batch(&format!(
        "BEGIN;
         DROP TABLE IF EXISTS records;
         DROP TABLE IF EXISTS state;
         DROP TABLE IF EXISTS shared;
         DROP TABLE IF EXISTS changes;
         DROP TABLE IF EXISTS tally;
         DROP TABLE IF EXISTS rejected;
         CREATE TABLE records (
             id TEXT PRIMARY KEY NOT NULL,
             datestamp INTEGER,
             deleted INTEGER NOT NULL,
             sets TEXT NOT NULL,
             body BLOB NOT NULL,
             seen INTEGER NOT NULL
         ) WITHOUT ROWID;
         CREATE TABLE changes (
             id TEXT PRIMARY KEY NOT NULL,
             prev_live INTEGER,
             prev_datestamp INTEGER,
             prev_body BLOB,
             now_deleted INTEGER NOT NULL,
             now_datestamp INTEGER,
             now_body BLOB NOT NULL,
             now_sets TEXT
         ) WITHOUT ROWID;
         CREATE TABLE shared (
             url TEXT PRIMARY KEY NOT NULL,
             claims BLOB NOT NULL
         ) WITHOUT ROWID;
         CREATE TABLE state (k INTEGER PRIMARY KEY CHECK (k = 0), doc TEXT NOT NULL);
         CREATE TABLE tally (k INTEGER PRIMARY KEY CHECK (k = 0), live INTEGER NOT NULL,
             deleted INTEGER NOT NULL DEFAULT 0);
         INSERT INTO tally VALUES (0, 0, 0);
         PRAGMA user_version = {SCHEMA};
         COMMIT;"
    ))
    .map_err(fail(path, "cannot create the tables"))
}

/// Adds what version 5 gained after stores were made with it, without a rebuild.
fn add_later_tables(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    // Added to version 5 without a rebuild: a store made before has no rejections.
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS rejected (
             id TEXT PRIMARY KEY NOT NULL,
             datestamp INTEGER,
             seen INTEGER NOT NULL
         ) WITHOUT ROWID;",
    )
    .map_err(fail(path, "cannot create the tables"))?;
    // Added to version 5 without a rebuild: the deleted records, for their examples
    // ([`super::Store::deleted_examples`]). Partial, so it holds the tombstones alone and a write of a
    // live record does not touch it; a store made before builds it once, at its next opening.
    conn.execute_batch(
        "CREATE INDEX IF NOT EXISTS deleted_records ON records (id) WHERE deleted <> 0;",
    )
    .map_err(fail(path, "cannot create the tables"))?;
    // Added to version 5 without a rebuild: a change keeps the record's sets
    // ([`super::Store::dirty`]); one listed before has none (NULL).
    if !has_column(conn, path, "changes", "now_sets")? {
        conn.execute_batch("ALTER TABLE changes ADD COLUMN now_sets TEXT;")
            .map_err(fail(path, "cannot create the tables"))?;
    }
    // A version before the column, run on this store (a rollback), lists a change again
    // without its sets, leaving those this version wrote there, the sets of before; and it saves
    // the state without the mark this version writes ([`persisted::keeps_change_sets`]). The
    // sets listed are forgotten then, and read from the records' rows when published. The
    // state is read for it only when a change lists sets: mostly none is (a publish empties
    // the changes), and a fleet opens every store at its start.
    let listed: bool = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM changes WHERE now_sets IS NOT NULL)",
            [],
            |r| r.get(0),
        )
        .map_err(fail(path, "cannot read the changed records"))?;
    if listed && state_doc(conn, path)?.is_some_and(|doc| !persisted::keeps_change_sets(&doc)) {
        conn.execute("UPDATE changes SET now_sets = NULL", [])
            .map_err(fail(path, "cannot write the changed records"))?;
    }
    // Added to version 5 without a rebuild: a store made before counts its deleted records
    // once.
    let counts_deleted = has_column(conn, path, "tally", "deleted")?;
    if !counts_deleted {
        conn.execute_batch(
            "BEGIN;
             ALTER TABLE tally ADD COLUMN deleted INTEGER NOT NULL DEFAULT 0;
             UPDATE tally SET deleted = (SELECT count(*) FROM records WHERE deleted <> 0);
             COMMIT;",
        )
        .map_err(fail(path, "cannot create the tables"))?;
    }
    Ok(())
}

/// Whether `table` of the database at `path`, open as `conn`, has `column` (one added in place).
fn has_column(
    conn: &Connection,
    path: &Path,
    table: &str,
    column: &str,
) -> Result<bool, StoreError> {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2)",
        [table, column],
        |r| r.get(0),
    )
    .map_err(fail(path, "cannot read the schema"))
}

/// The live and deleted records of the SQLite store at `path`, open as `conn`, counted (not the
/// tally incremental runs keep).
pub(super) fn count_records(conn: &Connection, path: &Path) -> Result<Counts, StoreError> {
    conn.query_row(
        "SELECT coalesce(sum(deleted = 0), 0), coalesce(sum(deleted <> 0), 0) FROM records",
        [],
        |r| {
            Ok(Counts {
                live: r.get::<_, i64>(0)? as u64,
                deleted: r.get::<_, i64>(1)? as u64,
            })
        },
    )
    .map_err(fail(path, "cannot count the records"))
}

/// The error of `what` on the store at `path`.
pub(super) fn fail<'a>(
    path: &'a Path,
    what: &'static str,
) -> impl FnOnce(rusqlite::Error) -> StoreError + 'a {
    move |source| StoreError::Failed {
        place: Place::File(path.to_owned()),
        what,
        source: Box::new(source),
    }
}

/// Saves `state` in `tx`.
fn write_state(tx: &rusqlite::Transaction<'_>, state: &State) -> rusqlite::Result<()> {
    let doc = serde_json::to_string(state)
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    // Cached: it runs for each page.
    tx.prepare_cached(
        "INSERT INTO state (k, doc) VALUES (0, ?1) ON CONFLICT (k) DO UPDATE SET doc = excluded.doc",
    )?
    .execute([doc])?;
    Ok(())
}

/// Decodes the body in column `i` of `row` into `record`: a damaged one (or not a blob) is an
/// error naming the record.
fn decode_column(row: &rusqlite::Row<'_>, i: usize, record: &mut Record) -> rusqlite::Result<()> {
    let body = row.get_ref(i)?.as_blob_or_null()?.unwrap_or_default();
    if decode_body(body, record) {
        Ok(())
    } else {
        let id = record.identifier.clone();
        Err(rusqlite::Error::InvalidColumnType(
            i,
            id,
            rusqlite::types::Type::Blob,
        ))
    }
}
