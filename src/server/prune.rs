//! `oai-bridge prune`: removes the state of repositories no longer configured. A reload (or a
//! restart) stops serving a removed repository but keeps its folder, so that putting it back
//! serves its last generation at once and harvests incrementally; pruning is the operator's
//! decision, taken after the reload that removed it.
//!
//! A gateway still serving a repository the file no longer names (the file was edited, the
//! reload not yet done) must keep its state: each running gateway holds the lock on
//! `{state_dir}/gateway.lock` and lists what it serves in `{state_dir}/serving` (written at its
//! start and at each reload). Prune takes the lock while it works: when it cannot, a gateway
//! runs, and the repositories it lists are kept. The lock goes with the process, so a gateway
//! that died holds nothing back.
//!
//! The lock is exclusive: two gateways on one state directory would harvest into the same
//! stores and replace each other's generations, so a second one is refused ([`Hold::take`]).
//! Whoever holds it writes who it is into the file ([`Holder`]: the command, its process id,
//! the host), so that the one refused can name it; a prune or `migrate-state` holding it is
//! waited for, as before.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

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

/// How long a gateway waits for a lock held by a process that said nothing of itself, or
/// something it cannot trust (its own process id: a gateway of this process not yet dropped),
/// before it gives up: a holder writes its record at once.
const GRACE: Duration = Duration::from_secs(2);

/// The state directory is another gateway's: [`Hold::take`] refused it.
#[derive(Debug)]
pub(crate) struct InUse {
    /// The lock file.
    pub(crate) lock: PathBuf,
    /// Who holds it, when it said so and still runs.
    pub(crate) holder: Option<Holder>,
}

impl Hold {
    /// Takes the lock of `state_dir`, exclusively. Held by another running gateway (as the
    /// record in the lock file says), it is refused at once; held by a prune or a
    /// `migrate-state`, it is waited for (said in the log); held by a process that wrote
    /// nothing (an older oai-bridge), it is refused after [`GRACE`]. When the file cannot be
    /// opened or locked at all, the gateway still serves, and says that a prune could remove
    /// the state of what it serves.
    pub(crate) fn take(state_dir: &Path) -> Result<Self, InUse> {
        Self::take_within(state_dir, GRACE)
    }

    /// [`Hold::take`], giving a holder that said nothing `grace` to go.
    fn take_within(state_dir: &Path, grace: Duration) -> Result<Self, InUse> {
        let lock = state_dir.join(LOCK);
        let unlocked = |e: &dyn std::fmt::Display| {
            tracing::warn!(
                "cannot lock {}: {e}; `oai-bridge prune` will not know what this gateway serves",
                lock.display()
            );
            Self { _file: None }
        };
        let file = match open_lock(state_dir) {
            Ok(file) => file,
            Err(e) => return Ok(unlocked(&e)),
        };
        let start = Instant::now();
        loop {
            match flock(&file, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => {
                    Holder::me("serve").record(&file, &lock);
                    return Ok(Self { _file: Some(file) });
                }
                Err(rustix::io::Errno::WOULDBLOCK) => {}
                Err(e) => return Ok(unlocked(&e)),
            }
            let holder = Holder::read(&lock).filter(Holder::running);
            match holder {
                Some(h) if h.command == "serve" && !h.is_me() => {
                    return Err(InUse {
                        lock,
                        holder: Some(h),
                    });
                }
                Some(h) if h.command != "serve" => {
                    tracing::warn!(
                        "{} is held by {h}: waiting until it is done",
                        lock.display()
                    );
                    if let Err(e) = flock(&file, FlockOperation::LockExclusive) {
                        return Ok(unlocked(&e));
                    }
                    Holder::me("serve").record(&file, &lock);
                    return Ok(Self { _file: Some(file) });
                }
                holder if start.elapsed() >= grace => return Err(InUse { lock, holder }),
                _ => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }
}

/// Who holds a state directory's lock, as it wrote it into the lock file when it took it: a
/// line each, `command=serve`, `pid=1234`, `host=...`, `since=` (seconds since the epoch).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Holder {
    /// `serve`, `prune` or `migrate-state`.
    pub(crate) command: String,
    /// Its process id.
    pub(crate) pid: u32,
    /// The host it runs on (its process id means nothing elsewhere).
    pub(crate) host: String,
    /// When it took the lock, in seconds since the epoch.
    pub(crate) since: u64,
}

impl Holder {
    /// This process, running `command`.
    pub(crate) fn me(command: &str) -> Self {
        Self {
            command: command.to_owned(),
            pid: std::process::id(),
            host: host_name(),
            since: SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        }
    }

    /// The record in the lock file `lock`, when it holds one.
    pub(crate) fn read(lock: &Path) -> Option<Self> {
        Self::parse(&std::fs::read_to_string(lock).ok()?)
    }

    fn parse(text: &str) -> Option<Self> {
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix('='))
                .map(str::trim)
        };
        Some(Self {
            command: field("command")?.to_owned(),
            pid: field("pid")?.parse().ok()?,
            host: field("host").unwrap_or_default().to_owned(),
            since: field("since").and_then(|s| s.parse().ok()).unwrap_or(0),
        })
    }

    fn text(&self) -> String {
        format!(
            "command={}\npid={}\nhost={}\nsince={}\n",
            self.command, self.pid, self.host, self.since
        )
    }

    /// Writes this record into the lock file `file` (named `lock`), which this process holds:
    /// a failure only warns (the next one refused cannot name this process, that is all).
    pub(crate) fn record(&self, file: &File, lock: &Path) {
        use std::io::Write as _;
        let written = file.set_len(0).and_then(|()| {
            let mut file = file;
            std::io::Seek::rewind(&mut file)?;
            file.write_all(self.text().as_bytes())
        });
        if let Err(e) = written {
            tracing::warn!("cannot write who holds {}: {e}", lock.display());
        }
    }

    /// Whether the process may still run: on another host there is no telling, so yes.
    pub(crate) fn running(&self) -> bool {
        if self.host != host_name() {
            return true;
        }
        let Some(pid) = i32::try_from(self.pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        else {
            return false;
        };
        match rustix::process::test_kill_process(pid) {
            Ok(()) | Err(rustix::io::Errno::PERM) => true,
            Err(_) => false,
        }
    }

    /// Whether the record is this process's own.
    fn is_me(&self) -> bool {
        self.pid == std::process::id() && self.host == host_name()
    }
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`oai-bridge {}`, process {}", self.command, self.pid)?;
        if !self.host.is_empty() {
            write!(f, " on {}", self.host)?;
        }
        if self.since > 0 {
            let since = SystemTime::UNIX_EPOCH + Duration::from_secs(self.since);
            write!(f, ", since {}", httpdate::fmt_http_date(since))?;
        }
        Ok(())
    }
}

/// This host's name, as the kernel has it (empty where there is no `/proc`).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default()
}

/// Whether a process holds `state_dir`'s lock now, and who when its record says (and it still
/// runs): `None` when none does, or no gateway ever ran there. Writes nothing; takes the lock
/// for a moment when it is free (a gateway starting then waits that moment out). Exclusively,
/// so that it sees a gateway of a version before this one too, which held the lock shared.
pub(crate) fn held(state_dir: &Path) -> Option<Option<Holder>> {
    let lock = state_dir.join(LOCK);
    let file = File::open(&lock).ok()?;
    match flock(&file, FlockOperation::NonBlockingLockExclusive) {
        Err(rustix::io::Errno::WOULDBLOCK) => Some(Holder::read(&lock).filter(Holder::running)),
        _ => None,
    }
}

/// Holds `state_dir`'s lock exclusively, as a prune does, when a gateway has ever run there
/// (the lock file exists; it is not made), recording `command` as its holder when the file can
/// be written: `Ok(None)` when none has; an error of kind [`std::io::ErrorKind::WouldBlock`]
/// while one runs. Released when the file is dropped.
pub(crate) fn hold_if_idle(state_dir: &Path, command: &str) -> std::io::Result<Option<File>> {
    let lock = state_dir.join(LOCK);
    let open = |write: bool| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(write)
            .open(&lock)
    };
    let (file, writable) = match open(true) {
        Ok(file) => (file, true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(_) => match open(false) {
            Ok(file) => (file, false),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        },
    };
    flock(&file, FlockOperation::NonBlockingLockExclusive)?;
    if writable {
        Holder::me(command).record(&file, &lock);
    }
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
        Ok(()) => {
            Holder::me("prune").record(&lock, &state_dir.join(LOCK));
            Vec::new()
        }
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

    /// A second gateway on a state directory is refused at once, naming the lock's holder
    /// (another running process's `serve`); a record whose process is gone says nothing, and
    /// is refused after the grace; a prune holding the lock is waited for; the lock and its
    /// record go to whoever takes it next.
    #[test]
    fn a_second_gateway_is_refused_and_a_prune_is_waited_for() {
        let state = tempfile::tempdir().unwrap();
        let root = state.path();
        let lock = root.join(LOCK);
        let first = Hold::take(root).unwrap();
        let mine = Holder::read(&lock).unwrap();
        assert_eq!(
            (mine.command.as_str(), mine.pid),
            ("serve", std::process::id())
        );
        assert!(mine.running());
        let file = first._file.as_ref().unwrap();

        // The holder another process, still running: refused at once, whatever the grace.
        let mut other = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let gateway = Holder {
            pid: other.id(),
            ..Holder::me("serve")
        };
        gateway.record(file, &lock);
        let asked = Instant::now();
        let refused = Hold::take_within(root, Duration::from_secs(60)).unwrap_err();
        assert!(asked.elapsed() < Duration::from_secs(5), "refused at once");
        assert_eq!(refused.lock, lock);
        assert_eq!(refused.holder.as_ref(), Some(&gateway));
        let named = gateway.to_string();
        assert!(
            named.starts_with(&format!("`oai-bridge serve`, process {}", other.id())),
            "{named}"
        );

        // That process gone, the record says nothing true: refused after the grace.
        other.kill().unwrap();
        other.wait().unwrap();
        assert!(!gateway.running());
        let asked = Instant::now();
        let refused = Hold::take_within(root, Duration::from_millis(300)).unwrap_err();
        assert!(asked.elapsed() >= Duration::from_millis(300));
        assert_eq!(refused.holder, None);

        // A prune's hold is waited for, however long the grace is short.
        Holder::me("prune").record(file, &lock);
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            drop(first);
        });
        let asked = Instant::now();
        let second = Hold::take_within(root, Duration::ZERO).unwrap();
        assert!(asked.elapsed() >= Duration::from_millis(250));
        release.join().unwrap();
        assert_eq!(Holder::read(&lock).unwrap().command, "serve");
        drop(second);
        assert!(
            Hold::take_within(root, Duration::ZERO).is_ok(),
            "free again"
        );
    }

    /// `held` (for `serve --check-config`) sees who holds the lock, a gateway of an earlier
    /// version too (a shared lock, no record), and takes nothing it keeps.
    #[test]
    fn who_holds_the_lock_is_seen_without_keeping_it() {
        let state = tempfile::tempdir().unwrap();
        let root = state.path();
        assert!(held(root).is_none(), "no gateway ever ran");
        let hold = Hold::take(root).unwrap();
        let holder = held(root).unwrap().unwrap();
        assert_eq!(
            (holder.command.as_str(), holder.pid),
            ("serve", std::process::id())
        );
        drop(hold);
        assert!(held(root).is_none(), "the gateway stopped");
        // An earlier version's gateway: shared, and no record of itself.
        std::fs::write(root.join(LOCK), "").unwrap();
        let old = File::open(root.join(LOCK)).unwrap();
        flock(&old, FlockOperation::LockShared).unwrap();
        assert_eq!(held(root), Some(None));
        drop(old);
        assert!(held(root).is_none());
        assert!(
            Hold::take_within(root, Duration::ZERO).is_ok(),
            "held nothing"
        );
    }

    #[test]
    fn a_holders_record_reads_back() {
        let h = Holder {
            command: "migrate-state".to_owned(),
            pid: 4242,
            host: "sidecar-1".to_owned(),
            since: 1_700_000_000,
        };
        assert_eq!(Holder::parse(&h.text()), Some(h.clone()));
        assert_eq!(
            h.to_string(),
            "`oai-bridge migrate-state`, process 4242 on sidecar-1, since Tue, 14 Nov 2023 \
             22:13:20 GMT"
        );
        assert_eq!(Holder::parse(""), None, "an older gateway's empty file");
        assert!(h.running(), "another host: no telling, so it may run");
    }

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
        let hold = Hold::take(root).unwrap();
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
