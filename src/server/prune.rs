//! `oai-bridge prune`: removes the state of repositories no longer configured. A reload (or a
//! restart) stops serving a removed repository but keeps its folder, so that putting it back
//! serves its last generation at once and harvests incrementally; pruning is the operator's
//! decision, taken after the reload that removed it.
//!
//! A gateway still serving a repository the file no longer names (the file was edited, the
//! reload not yet done) must keep its state: each running gateway holds a shared lock on
//! `{state_dir}/gateway.lock` and lists what it serves in `{state_dir}/serving` (written at its
//! start and at each reload). Prune takes the lock exclusively while it works: when it cannot,
//! a gateway runs, and the repositories it lists are kept. The lock goes with the process, so
//! a gateway that died holds nothing back.

use std::fs::File;
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, flock};

/// The lock each running gateway holds, shared, for its lifetime.
const LOCK: &str = "gateway.lock";
/// The names of the repositories the running gateways serve, a line each.
const SERVING: &str = "serving";

/// A running gateway's hold on its state directory ([`LOCK`]); released when dropped.
#[derive(Debug)]
pub(crate) struct Hold {
    /// The locked file: the lock lasts as long as it is open.
    _file: Option<File>,
}

impl Hold {
    /// Takes the shared lock of `state_dir` (waiting while a prune runs). Without it the gateway
    /// still serves, and says that a prune could remove the state of what it serves.
    pub(crate) fn take(state_dir: &Path) -> Self {
        let held = open_lock(state_dir).and_then(|f| {
            flock(&f, FlockOperation::LockShared)?;
            Ok(f)
        });
        match held {
            Ok(f) => Self { _file: Some(f) },
            Err(e) => {
                tracing::warn!(
                    "cannot lock {}: {e}; `oai-bridge prune` will not know what this gateway \
                     serves",
                    state_dir.join(LOCK).display()
                );
                Self { _file: None }
            }
        }
    }
}

/// Holds `state_dir`'s lock exclusively, as a prune does, when a gateway has ever run there
/// (the lock file exists; it is not made): `Ok(None)` when none has; an error of kind
/// [`std::io::ErrorKind::WouldBlock`] while one runs. Released when the file is dropped.
pub(crate) fn hold_if_idle(state_dir: &Path) -> std::io::Result<Option<File>> {
    let file = match File::open(state_dir.join(LOCK)) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    flock(&file, FlockOperation::NonBlockingLockExclusive)?;
    Ok(Some(file))
}

fn open_lock(state_dir: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(state_dir.join(LOCK))
}

/// Lists `names` as what a gateway serves from `state_dir` ([`SERVING`]), replacing the list;
/// a failure only warns (prune then keeps what the list named before).
pub(crate) fn record_serving<'a>(state_dir: &Path, names: impl IntoIterator<Item = &'a str>) {
    let text: String = names.into_iter().map(|n| format!("{n}\n")).collect();
    if let Err(e) = super::history::write_atomically(&state_dir.join(SERVING), text.as_bytes()) {
        tracing::warn!("cannot write {}: {e}", state_dir.join(SERVING).display());
    }
}

/// The folders of `state_dir` that hold a repository's state (a store or a generation pointer)
/// and are named after no repository in `configured`, sorted.
pub(crate) fn unconfigured(state_dir: &Path, configured: &[&str]) -> std::io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(state_dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let is_repository = entry.file_type()?.is_dir()
            && (entry.path().join(crate::store::FILE).exists()
                || entry.path().join("current").exists());
        if is_repository && !name.to_str().is_some_and(|n| configured.contains(&n)) {
            found.push(entry.path());
        }
    }
    found.sort();
    Ok(found)
}

/// What became of a folder [`prune`] found.
#[derive(Debug)]
pub(crate) enum Pruned {
    /// Removed.
    Removed,
    /// A dry run: it would be removed.
    WouldRemove,
    /// Kept: a running gateway still serves it (its reload is still to come).
    StillServed,
    /// Removing it failed.
    Failed(std::io::Error),
}

/// Removes the state of the repositories in `state_dir` that `configured` does not name
/// ([`unconfigured`]) and no running gateway serves, or with `dry_run` only finds it; the
/// folders, in order, and what became of each.
pub(crate) fn prune(
    state_dir: &Path,
    configured: &[&str],
    dry_run: bool,
) -> std::io::Result<Vec<(PathBuf, Pruned)>> {
    // Held until the end, so that no gateway starts serving what is being removed.
    let lock = open_lock(state_dir)?;
    let served: Vec<String> = match flock(&lock, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Vec::new(),
        Err(rustix::io::Errno::WOULDBLOCK) => std::fs::read_to_string(state_dir.join(SERVING))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect(),
        Err(e) => return Err(e.into()),
    };
    Ok(unconfigured(state_dir, configured)?
        .into_iter()
        .map(|dir| {
            let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            let outcome = if served.iter().any(|s| s == name) {
                Pruned::StillServed
            } else if dry_run {
                Pruned::WouldRemove
            } else {
                match std::fs::remove_dir_all(&dir) {
                    Ok(()) => Pruned::Removed,
                    Err(e) => Pruned::Failed(e),
                }
            };
            (dir, outcome)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_state_of_repositories_not_configured_goes() {
        let state = tempfile::tempdir().unwrap();
        let root = state.path();
        for (dir, file) in [
            ("kept", crate::store::FILE),
            ("gone", crate::store::FILE),
            ("gone-too", "current"),
            ("not-ours", "notes.txt"),
        ] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
            std::fs::write(root.join(dir).join(file), "x").unwrap();
        }
        std::fs::write(root.join("robots.txt.modified"), "x").unwrap();
        let found = unconfigured(root, &["kept"]).unwrap();
        assert_eq!(found, [root.join("gone"), root.join("gone-too")]);

        let dry = prune(root, &["kept"], true).unwrap();
        assert_eq!(dry.len(), 2);
        assert!(dry.iter().all(|(_, p)| matches!(p, Pruned::WouldRemove)));
        assert!(root.join("gone").exists(), "a dry run removes nothing");

        // A running gateway that still serves "gone" (its reload is to come) keeps it; the list
        // of a gateway that no longer runs counts for nothing.
        let hold = Hold::take(root);
        record_serving(root, ["kept", "gone"]);
        let done = prune(root, &["kept"], false).unwrap();
        assert!(matches!(done[0], (ref d, Pruned::StillServed) if *d == root.join("gone")));
        assert!(matches!(done[1].1, Pruned::Removed));
        assert!(root.join("gone").exists());
        drop(hold);
        let done = prune(root, &["kept"], false).unwrap();
        assert_eq!(done.len(), 1);
        assert!(matches!(done[0].1, Pruned::Removed));
        for (dir, there) in [
            ("kept", true),
            ("gone", false),
            ("gone-too", false),
            ("not-ours", true),
            ("robots.txt.modified", true),
        ] {
            assert_eq!(root.join(dir).exists(), there, "{dir}");
        }
    }
}
