//! `oai-bridge migrate-state`: moves the SQLite stores of a state folder into a PostgreSQL
//! database (`[state] url`), for a gateway (or a fleet) that moves onto one.
//!
//! The stores are found as the commands that made them lay them out: a gateway's state
//! directory holds a folder per repository, `{state_dir}/{name}/store.sqlite`, the store of
//! repository `name`; an export's `--state` folder holds one store, `{dir}/store.sqlite`, whose
//! name is the one `export --state-url` would give it (`--repository`, the configured
//! repository that harvests the same source, or else the source as it reads; two configured
//! repositories of that source are an error asking for `--repository`).
//!
//! Each repository is copied in one transaction ([`crate::store::copy`]) under its fleet lease,
//! compared with the SQLite store before the commit (a difference rolls it back), and once
//! committed read back through the PostgreSQL store as a last check that only reports. A
//! repository that fails (refused, unreadable, a mismatch) does not stop the others: each is
//! its own transaction, so what failed left nothing of its copy behind, and a rerun of the
//! failed ones (`--repository`) is safe. The SQLite files are only read, never changed.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::store::copy::{Database, SqliteSource, Survey};
use crate::store::{FILE, Place, State, StateUrl, StoreError};

/// What to move, and where.
#[derive(Clone, Debug)]
pub(crate) struct MigrateOptions {
    /// A gateway's state directory, or an export's state folder.
    pub(crate) state: PathBuf,
    /// The database.
    pub(crate) url: StateUrl,
    /// Only these repositories (empty: every store found); for an export's state folder, the
    /// name of its store.
    pub(crate) repositories: Vec<String>,
    /// The configured repositories, by name, with their source as it reads: an export's store
    /// that follows one of them takes its name. `None` without a configuration file.
    pub(crate) configured: Option<Vec<(String, String)>>,
    /// Replace the rows a repository already has in the database.
    pub(crate) replace: bool,
    /// Report what would be copied; write nothing.
    pub(crate) dry_run: bool,
}

/// A store found in the state folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Found {
    /// The repository's name: its folder's in a gateway's state directory; `None` for an
    /// export's store, named once its state is read ([`export_name`]).
    pub(crate) name: Option<String>,
    /// The store's file.
    pub(crate) path: PathBuf,
}

/// What became of one repository.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// The repository (an export's store that could not be named: its file).
    pub(crate) name: String,
    /// How the name was chosen, or what else is worth saying of it (a folder that is no
    /// configured repository), for people.
    pub(crate) note: Option<String>,
    /// What was done, or why not.
    pub(crate) result: Result<Done, Error>,
}

/// A repository done.
#[derive(Debug)]
pub(crate) enum Done {
    /// Copied and verified.
    Copied {
        /// What was copied.
        survey: Survey,
        /// How long the copy and its verification took.
        elapsed: Duration,
    },
    /// A dry run: what would be copied.
    WouldCopy {
        /// What the SQLite store holds.
        survey: Survey,
        /// The database holds rows of the repository, which the copy would replace.
        replaces: bool,
    },
}

/// Every repository's outcome, in the order they were taken.
#[derive(Debug, Default)]
pub(crate) struct Totals {
    /// Repositories copied (or, in a dry run, that would be).
    pub(crate) done: usize,
    /// Records (rows, live and deleted) copied, or that would be.
    pub(crate) records: u64,
    /// The repositories that failed, leaving nothing of their copy.
    pub(crate) failed: Vec<String>,
    /// The repositories copied whose copy, committed, read back otherwise than the SQLite
    /// store through the PostgreSQL store ([`StoreError::ReadBack`]): left as committed.
    pub(crate) unverified: Vec<String>,
    /// How long it all took.
    pub(crate) elapsed: Duration,
}

/// A store's error as `migrate-state` tells it: a copy refused (rows there, a live lease) says
/// what to do about it ([`Error::Occupied`], [`Error::Leased`]).
fn refused(e: StoreError) -> Error {
    match e {
        StoreError::Occupied(place) => Error::Occupied(place),
        StoreError::Leased { place, holder } => Error::Leased { place, holder },
        e => Error::Store(e),
    }
}

/// The stores under `dir`: `dir/store.sqlite` alone when there is one (an export's state
/// folder), else each `dir/NAME/store.sqlite` (a gateway's state directory), in name order;
/// with `only`, those repositories alone, each of which must be found.
pub(crate) fn find(dir: &Path, only: &[String]) -> Result<Vec<Found>, Error> {
    let unreadable = |e: std::io::Error| Error::io("cannot read the state folder", dir)(e);
    let top = dir.join(FILE);
    if top.is_file() {
        return Ok(vec![Found {
            name: None,
            path: top,
        }]);
    }
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(unreadable)? {
        let entry = entry.map_err(unreadable)?;
        let path = entry.path().join(FILE);
        // `is_dir` follows a symbolic link: a repository's folder may be one.
        if !entry.path().is_dir() || !path.is_file() {
            continue;
        }
        // A repository's name is text; a folder whose name is not cannot be one.
        let Ok(name) = entry.file_name().into_string() else {
            tracing::warn!("{}: not a repository's name, skipped", path.display());
            continue;
        };
        if only.is_empty() || only.contains(&name) {
            found.push(Found {
                name: Some(name),
                path,
            });
        }
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(missing) = only
        .iter()
        .find(|n| !found.iter().any(|f| f.name.as_ref() == Some(*n)))
    {
        return Err(Error::UnknownRepository {
            path: dir.to_owned(),
            name: missing.clone(),
        });
    }
    if found.is_empty() {
        return Err(Error::NoStores {
            path: dir.to_owned(),
        });
    }
    Ok(found)
}

/// The gateway lock of `dir`, held, when a gateway ever ran there; an error while one runs.
fn idle(dir: &Path) -> Result<Option<std::fs::File>, Error> {
    crate::server::prune::hold_if_idle(dir, "migrate-state").map_err(|e| {
        if e.kind() == std::io::ErrorKind::WouldBlock {
            Error::GatewayRuns {
                path: dir.to_owned(),
            }
        } else {
            Error::io("cannot read the state folder", dir)(e)
        }
    })
}

/// The name of an export's store, as `export --state-url` names the repository it exports
/// (`crate::app::export_options`): the one `--repository` given; else the configured repository
/// that harvests the store's `source` (an export of a `[[repository]]`); else the source as it
/// reads (an export of `--base-url` alone). With the name, how it was chosen, for people. Two
/// configured repositories of that source are an error: either may have made the store.
pub(crate) fn export_name(
    given: &[String],
    configured: &[(String, String)],
    source: &str,
) -> Result<(String, String), String> {
    match given {
        [one] => return Ok((one.clone(), "named by --repository".to_owned())),
        [] => {}
        _ => {
            return Err(
                "an export's state folder holds one store: give one --repository, the name it \
                 takes in the database"
                    .to_owned(),
            );
        }
    }
    if source.is_empty() {
        return Err(
            "the store has never been harvested into (its state names no source): give \
             --repository, the name it takes in the database"
                .to_owned(),
        );
    }
    let same: Vec<&str> = (configured.iter())
        .filter(|(_, s)| s == source)
        .map(|(name, _)| name.as_str())
        .collect();
    match same.as_slice() {
        [] => Ok((
            source.to_owned(),
            "named after its source URL, as export --state-url names it without --repository"
                .to_owned(),
        )),
        [name] => Ok((
            (*name).to_owned(),
            format!("named after [[repository]] {name} in the config, which harvests its source"),
        )),
        several => Err(format!(
            "the store harvested {source}, which several [[repository]] of the config harvest \
             ({}): give --repository NAME, the name it takes in the database (the \
             repository's, or {source} for an export of --base-url)",
            several.join(", ")
        )),
    }
}

/// Moves (or, with `dry_run`, surveys) every store `options` names into the database, telling
/// `report` each repository's outcome as it comes. Blocking: call it outside an async runtime,
/// or from a thread of its own (the database's client blocks on a runtime of its own). An error
/// is one before any repository: the state folder, or the database.
pub(crate) fn migrate(
    options: &MigrateOptions,
    mut report: impl FnMut(&Outcome),
) -> Result<Totals, Error> {
    let started = Instant::now();
    let found = find(&options.state, &options.repositories)?;
    // Held to the end: a gateway that starts meanwhile waits, as it waits for a prune.
    let _idle = idle(&options.state)?;
    let mut database = Database::connect(&options.url, options.dry_run).map_err(refused)?;
    let mut totals = Totals::default();
    for store in found {
        let outcome = one(options, &mut database, &store);
        match &outcome.result {
            Ok(Done::Copied { survey, .. } | Done::WouldCopy { survey, .. }) => {
                totals.done += 1;
                totals.records += survey.records.live + survey.records.deleted;
            }
            Err(Error::Store(StoreError::ReadBack { .. })) => {
                totals.unverified.push(outcome.name.clone());
            }
            Err(_) => totals.failed.push(outcome.name.clone()),
        }
        report(&outcome);
    }
    totals.elapsed = started.elapsed();
    Ok(totals)
}

/// Moves (or surveys) one store.
fn one(options: &MigrateOptions, database: &mut Database, found: &Found) -> Outcome {
    let started = Instant::now();
    let source = match SqliteSource::open(&found.path) {
        Ok(source) => source,
        Err(e) => {
            return Outcome {
                name: found
                    .name
                    .clone()
                    .unwrap_or_else(|| found.path.display().to_string()),
                note: None,
                result: Err(refused(e)),
            };
        }
    };
    let configured = options.configured.as_deref();
    let named = match &found.name {
        // A folder of a gateway's state directory: its name, said when the config has no
        // repository of that name (copied all the same).
        Some(name) => Ok((
            name.clone(),
            configured
                .filter(|c| !c.iter().any(|(n, _)| n == name))
                .map(|_| {
                    "not a [[repository]] of the config: copied all the same, under its \
                     folder's name"
                        .to_owned()
                }),
        )),
        None => source.survey().map_err(refused).and_then(|s| {
            export_name(
                &options.repositories,
                configured.unwrap_or_default(),
                &s.state.source,
            )
            .map(|(name, how)| (name, Some(how)))
            .map_err(|message| Error::StoreName {
                path: found.path.clone(),
                message,
            })
        }),
    };
    let (name, note) = match named {
        Ok(named) => named,
        Err(e) => {
            return Outcome {
                name: found.path.display().to_string(),
                note: None,
                result: Err(e),
            };
        }
    };
    let result = if options.dry_run {
        survey(options, &source, database, &name)
    } else {
        copy(options, &source, database, &name).map(|survey| Done::Copied {
            survey,
            elapsed: started.elapsed(),
        })
    };
    Outcome { name, note, result }
}

/// What a copy of `source` into `name` would do, changing nothing: refused as the copy would
/// be.
fn survey(
    options: &MigrateOptions,
    source: &SqliteSource,
    database: &mut Database,
    name: &str,
) -> Result<Done, Error> {
    let survey = source.survey().map_err(refused)?;
    let occupied = database.occupied(name).map_err(refused)?;
    let url = database.url().redacted();
    let place = || Place::Postgres {
        url: url.clone(),
        repository: name.to_owned(),
    };
    if let Some(holder) = occupied.lease {
        return Err(Error::Leased {
            place: place(),
            holder,
        });
    }
    if occupied.rows && !options.replace {
        return Err(Error::Occupied(place()));
    }
    Ok(Done::WouldCopy {
        survey,
        replaces: occupied.rows,
    })
}

/// Copies `source` into the repository `name`: compared with the SQLite store before it is
/// committed, and read back through the PostgreSQL store after ([`Database::copy`]).
fn copy(
    options: &MigrateOptions,
    source: &SqliteSource,
    database: &mut Database,
    name: &str,
) -> Result<Survey, Error> {
    database
        .copy(source, name, options.replace)
        .map_err(refused)
}

/// A short account of a store's state, for people: its last complete harvest, a harvest under
/// way, what was published.
pub(crate) fn describe(state: &State) -> String {
    if *state == State::default() {
        return "empty".to_owned();
    }
    let mut parts = Vec::new();
    match &state.complete {
        Some(c) if c.static_repository => parts.push("harvested (a Static Repository)".to_owned()),
        Some(c) => parts.push(format!("harvested up to {}", c.response_date)),
        None => parts.push("no complete harvest".to_owned()),
    }
    if let Some(run) = &state.run {
        let kind = if run.full { "a full" } else { "an incremental" };
        parts.push(format!(
            "{kind} harvest under way ({} pages, {} records applied)",
            run.pages, run.records
        ));
    }
    parts.push(counted(state.runs, "run"));
    if let Some(urls) = state.published_urls {
        let shards = state.sitemap.as_ref().map_or(0, |s| s.shards.len());
        parts.push(format!(
            "{} published in {}",
            counted(urls, "URL"),
            counted(shards as u64, "shard")
        ));
    }
    if state.held_shrink.is_some() {
        parts.push("a shrink held back".to_owned());
    }
    parts.join(", ")
}

/// `n` things, `thing` in the plural (`thing` and an `s`) unless one.
pub(crate) fn counted(n: u64, thing: &str) -> String {
    counted_as(n, thing, &format!("{thing}s"))
}

/// `n` things, `one` when one, else `many`.
pub(crate) fn counted_as(n: u64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, b"").unwrap();
    }

    /// A gateway's state directory: a store per repository folder, in name order; folders
    /// without a store (a repository whose store is in a database, the generations) are not
    /// repositories to move. An export's state folder: its one store.
    #[test]
    fn stores_are_found_as_serve_and_export_lay_them_out() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for name in ["b", "a", "c d"] {
            touch(&root.join(name).join(FILE));
        }
        touch(&root.join("pg-only").join("current"));
        touch(&root.join("gateway.lock"));
        let names = |found: Vec<Found>| -> Vec<Option<String>> {
            found.into_iter().map(|f| f.name).collect()
        };
        let some = |n: &str| Some(n.to_owned());
        assert_eq!(
            names(find(root, &[]).unwrap()),
            [some("a"), some("b"), some("c d")]
        );
        assert_eq!(
            names(find(root, &["c d".into(), "a".into()]).unwrap()),
            [some("a"), some("c d")]
        );
        let e = find(root, &["a".into(), "zz".into()]).unwrap_err();
        assert!(matches!(&e, Error::UnknownRepository { name, .. } if name == "zz"));
        assert_eq!(find(root, &[]).unwrap()[0].path, root.join("a").join(FILE));

        let export = root.join("a");
        assert_eq!(
            find(&export, &[]).unwrap(),
            [Found {
                name: None,
                path: export.join(FILE)
            }]
        );
        let empty = root.join("pg-only");
        assert!(matches!(find(&empty, &[]), Err(Error::NoStores { .. })));
        assert!(matches!(
            find(&root.join("nowhere"), &[]),
            Err(Error::Io {
                action: "cannot read the state folder",
                ..
            })
        ));
    }

    /// A state directory a gateway runs on (it holds the lock, shared) is not moved.
    #[test]
    fn a_state_directory_a_gateway_runs_on_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert!(idle(dir.path()).unwrap().is_none(), "no gateway ever ran");
        assert!(!dir.path().join("gateway.lock").exists(), "no lock made");
        let gateway = crate::server::prune::Hold::take(dir.path()).unwrap();
        let e = idle(dir.path()).unwrap_err();
        assert!(matches!(e, Error::GatewayRuns { .. }), "{e}");
        drop(gateway);
        assert!(idle(dir.path()).unwrap().is_some(), "the gateway stopped");
    }

    /// An export's store takes the name `export --state-url` would give its repository (the
    /// names compared with export's own: `app`'s
    /// `migrate_state_names_an_exports_store_as_export_does`), and says how it was named.
    #[test]
    fn an_exports_store_is_named_as_export_names_it() {
        let configured = [
            ("a".to_owned(), "https://a.example/oai".to_owned()),
            ("b".to_owned(), "https://b.example/oai".to_owned()),
        ];
        let name = |given: &[String], configured: &[(String, String)], source: &str| {
            export_name(given, configured, source).map(|(name, _)| name)
        };
        let given = ["mine".to_owned()];
        assert_eq!(
            export_name(&given, &configured, "https://a.example/oai").unwrap(),
            ("mine".to_owned(), "named by --repository".to_owned())
        );
        assert_eq!(
            name(&[], &configured, "https://b.example/oai").unwrap(),
            "b"
        );
        assert_eq!(
            name(&[], &configured, "https://c.example/oai").unwrap(),
            "https://c.example/oai"
        );
        // Two configured repositories of one source: either may have made the store.
        let twice = [
            configured[0].clone(),
            ("a2".into(), configured[0].1.clone()),
        ];
        let e = name(&[], &twice, "https://a.example/oai").unwrap_err();
        assert!(e.contains("(a, a2): give --repository NAME"), "{e}");
        assert_eq!(
            name(&["a2".to_owned()], &twice, "https://a.example/oai").unwrap(),
            "a2"
        );
        assert!(name(&[], &[], "").unwrap_err().contains("--repository"));
        let two = ["x".to_owned(), "y".to_owned()];
        assert!(
            name(&two, &[], "s")
                .unwrap_err()
                .contains("one --repository")
        );
    }

    /// A repository's folder that is a symbolic link to one is a repository's folder.
    #[cfg(unix)]
    #[test]
    fn a_repository_folder_may_be_a_symbolic_link() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        touch(&dir.path().join("a").join(FILE));
        touch(&elsewhere.path().join("b").join(FILE));
        std::os::unix::fs::symlink(elsewhere.path().join("b"), dir.path().join("b")).unwrap();
        let found = find(dir.path(), &[]).unwrap();
        let names: Vec<_> = found.iter().map(|f| f.name.as_deref().unwrap()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(found[1].path, dir.path().join("b").join(FILE));
    }

    #[test]
    fn a_state_is_described_in_a_line() {
        assert_eq!(describe(&State::default()), "empty");
        let doc = include_str!("../fixtures/store/state-v1.json");
        let state: State = serde_json::from_str(doc).unwrap();
        let text = describe(&state);
        assert!(text.contains("456 URLs published in 5 shards"), "{text}");
        let running = State {
            run: Some(crate::store::Run {
                full: true,
                pages: 3,
                records: 300,
                ..Default::default()
            }),
            runs: 1,
            ..State::default()
        };
        assert_eq!(
            describe(&running),
            "no complete harvest, a full harvest under way (3 pages, 300 records applied), 1 run"
        );
    }
}
