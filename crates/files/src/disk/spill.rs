//! A harvest's temporary files, apart from what is in them: the folder they go in (beside the
//! output or in the state folder, named after the process so that the next run removes what a
//! crashed one left), the memory a harvest holds before it writes sorted runs there, and the
//! bytes written, for the summary.
//!
//! The `oai-bridge` package's URL inventory spills sorted runs here; its profiles' shard files
//! go in a folder of the same kind.
//!
//! In the gateway, the refreshes running at once share one [`Pool`] (`[server]
//! memory_budget_bytes`, `spill_max_bytes`): each collector of a refresh holds a [`Share`] of
//! the pool's memory, and the refreshes' spill files count against its cap on disk. Every
//! spill, the gateway's or an export's, stops short of filling its file system
//! (`free_space`).

use crate::FilesError;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

/// Memory the URL inventory holds before it writes a sorted run to disk, by default: a million
/// records of the harvest benchmark fit (about 160 MiB at the resolving peak), so the common
/// repository never spills, and a harvest of any size stays within a few hundred MiB.
pub const DEFAULT_MEMORY_BUDGET: u64 = 192 << 20;

/// The least memory a refresh should be left when every refresh the gateway may run at once
/// holds its share of `[server] memory_budget_bytes`: below it, a large repository spills runs
/// so small that merging them takes more than one pass (a warning at start, not an error: the
/// tests spill with a few bytes).
pub const MIN_REFRESH_MEMORY: u64 = 16 << 20;

/// The name of every spill folder starts so; the process id and a random part follow.
pub const PREFIX: &str = ".oai-bridge-spill-";

/// Where a harvest spills, and how much memory it holds first.
#[derive(Clone, Debug)]
pub struct Budget {
    /// The folder spill folders are made in.
    pub(crate) parent: PathBuf,
    /// Bytes of memory a sort holds before it spills a run.
    pub memory: u64,
    /// Bytes on disk so far, shared with whoever reports them.
    pub meter: Meter,
    /// Bytes of memory its collectors hold now ([`Share`]s), shared likewise.
    pub(crate) held: Meter,
    /// In the gateway: the refresh's account with the pool the refreshes share.
    pub(crate) account: Option<Arc<Account>>,
}

impl Budget {
    /// The budget of `memory` bytes, spilling into `parent`.
    pub fn new(parent: PathBuf, memory: u64) -> Self {
        Self {
            parent,
            memory: memory.max(1),
            meter: Meter::default(),
            held: Meter::default(),
            account: None,
        }
    }

    /// The budget of a refresh holding `account` with the gateway's pool: its memory and its
    /// spill count there too, and the pool decides when it spills.
    pub fn within(mut self, account: &Arc<Account>) -> Self {
        self.meter = account.spill.clone();
        self.held = account.memory.clone();
        self.account = Some(Arc::clone(account));
        self
    }

    fn pool(&self) -> Option<&Pool> {
        self.account.as_ref().map(|a| &a.pool)
    }
}

impl Default for Budget {
    /// The default budget, spilling into the system's temporary folder: for a harvest that
    /// names no folder (tests, `check`).
    fn default() -> Self {
        Self::new(std::env::temp_dir(), DEFAULT_MEMORY_BUDGET)
    }
}

/// An amount held now and the most it held, counted into a total too (a refresh's into the
/// gateway's): cheap to clone, shared by the writers and whoever reports it.
#[derive(Clone, Debug, Default)]
pub struct Meter(Arc<Level>);

#[derive(Debug, Default)]
struct Level {
    now: AtomicU64,
    peak: AtomicU64,
    /// The meter this one counts into as well.
    total: Option<Meter>,
}

impl Meter {
    /// A meter that counts into `total` as well.
    fn part_of(total: &Meter) -> Self {
        Self(Arc::new(Level {
            total: Some(total.clone()),
            ..Level::default()
        }))
    }

    fn add(&self, bytes: u64) {
        let now = self.0.now.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.0.peak.fetch_max(now, Ordering::Relaxed);
        if let Some(total) = &self.0.total {
            total.add(bytes);
        }
    }

    fn remove(&self, bytes: u64) {
        self.0.now.fetch_sub(bytes, Ordering::Relaxed);
        if let Some(total) = &self.0.total {
            total.remove(bytes);
        }
    }

    /// What it holds now.
    pub(crate) fn now(&self) -> u64 {
        self.0.now.load(Ordering::Relaxed)
    }

    /// The most it held at once.
    pub fn peak(&self) -> u64 {
        self.0.peak.load(Ordering::Relaxed)
    }
}

/// The limits the gateway's refreshes share, as configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolLimits {
    /// Bytes of memory every refresh's collectors hold together at most (`[server]
    /// memory_budget_bytes`).
    pub memory: u64,
    /// Bytes one refresh's URL inventory holds at most, the landing-page profiles' versions a
    /// quarter of it more (`[harvest] memory_budget_bytes`).
    pub per_refresh: u64,
    /// Bytes the refreshes' spill files take on disk together at most (`[server]
    /// spill_max_bytes`); `None`: as much as the file system has free, less its reserve.
    pub spill_max: Option<u64>,
}

/// The memory and the spill space the gateway's running refreshes share. Each collector of a
/// refresh (its URL inventory, its profiles' versions) holds a [`Share`]: it may hold up to its
/// own cap as long as the refreshes together stay within the pool; when they would not, it
/// spills, but never below its fair part (its cap scaled down so that every collector's fits
/// the pool), so a refresh that starts while another holds the whole pool gets its part, and
/// the other spills down to its own at its next record. The newcomer waits for that spill
/// before it grows past what is left ([`Share::allows`]), so that together they stay within
/// the pool. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Pool(Arc<PoolInner>);

#[derive(Debug)]
struct PoolInner {
    memory_budget: AtomicU64,
    per_refresh: AtomicU64,
    /// 0: no cap.
    spill_max: AtomicU64,
    /// What the collectors hold now, and the most.
    memory: Meter,
    /// What the refreshes' spill files take on disk now, and the most.
    spill: Meter,
    /// The caps of the collectors holding a share now, summed.
    caps: AtomicU64,
    /// The refreshes running, as their accounts.
    accounts: Mutex<Vec<Weak<Account>>>,
    /// Signalled when a collector gives memory back, for those waiting for room
    /// ([`Share::allows`]); the mutex guards no data, only the wait against a missed signal.
    room: (Mutex<()>, Condvar),
}

/// What one running refresh holds, reported by repository: its collectors' memory and its
/// spill files, each counted into the pool's too. Alive while the refresh runs.
#[derive(Debug)]
pub struct Account {
    /// The repository.
    pub(crate) name: String,
    /// Its collectors' memory now, and the most.
    pub memory: Meter,
    /// Its spill files' bytes on disk now, and the most.
    pub spill: Meter,
    /// The caps of its collectors' shares, summed: its fair part of the pool follows.
    caps: AtomicU64,
    pool: Pool,
}

impl Account {
    /// What one refresh's URL inventory holds at most, as the pool is configured now.
    pub fn per_refresh(&self) -> u64 {
        self.pool.limits().per_refresh
    }
}

/// A running refresh's figures, as [`Pool::running`] reads them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Usage {
    /// The repository.
    pub name: String,
    /// Bytes of memory its collectors hold now.
    pub memory: u64,
    /// Bytes its spill files take on disk now.
    pub spill: u64,
}

impl Pool {
    /// A pool of `limits`.
    pub fn new(limits: PoolLimits) -> Self {
        let pool = Self(Arc::new(PoolInner {
            memory_budget: AtomicU64::new(0),
            per_refresh: AtomicU64::new(0),
            spill_max: AtomicU64::new(0),
            memory: Meter::default(),
            spill: Meter::default(),
            caps: AtomicU64::new(0),
            accounts: Mutex::default(),
            room: (Mutex::new(()), Condvar::new()),
        }));
        pool.configure(limits);
        pool
    }

    /// Takes `limits` from now on (a reload): the running refreshes' collectors follow at
    /// their next record, their caps at the next refresh.
    pub fn configure(&self, limits: PoolLimits) {
        let p = &self.0;
        p.memory_budget
            .store(limits.memory.max(1), Ordering::Relaxed);
        p.per_refresh
            .store(limits.per_refresh.max(1), Ordering::Relaxed);
        p.spill_max
            .store(limits.spill_max.map_or(0, |m| m.max(1)), Ordering::Relaxed);
    }

    /// The limits it holds to.
    pub fn limits(&self) -> PoolLimits {
        let p = &self.0;
        PoolLimits {
            memory: p.memory_budget.load(Ordering::Relaxed),
            per_refresh: p.per_refresh.load(Ordering::Relaxed),
            spill_max: Some(p.spill_max.load(Ordering::Relaxed)).filter(|&m| m > 0),
        }
    }

    /// Opens the account of a refresh of repository `name`, listed until it is dropped.
    pub fn account(&self, name: &str) -> Arc<Account> {
        let account = Arc::new(Account {
            name: name.to_owned(),
            memory: Meter::part_of(&self.0.memory),
            spill: Meter::part_of(&self.0.spill),
            caps: AtomicU64::new(0),
            pool: self.clone(),
        });
        let mut accounts = self.0.accounts.lock().unwrap_or_else(|e| e.into_inner());
        accounts.retain(|a| a.strong_count() > 0);
        accounts.push(Arc::downgrade(&account));
        account
    }

    /// The refreshes running, in the order they started, with what each holds now.
    pub fn running(&self) -> Vec<Usage> {
        let accounts = self.0.accounts.lock().unwrap_or_else(|e| e.into_inner());
        (accounts.iter())
            .filter_map(Weak::upgrade)
            .map(|a| Usage {
                name: a.name.clone(),
                memory: a.memory.now(),
                spill: a.spill.now(),
            })
            .collect()
    }

    /// Bytes of memory the refreshes' collectors hold now, together.
    pub fn memory(&self) -> u64 {
        self.0.memory.now()
    }

    /// Bytes the refreshes' spill files take on disk now, together.
    pub fn spill(&self) -> u64 {
        self.0.spill.now()
    }

    /// Collectors whose caps sum to `cap` may hold this much of the pool when every collector
    /// holds its part: `cap`, scaled down when the caps together pass the budget.
    fn fair(&self, cap: u64) -> u64 {
        let budget = self.0.memory_budget.load(Ordering::Relaxed);
        let caps = self.0.caps.load(Ordering::Relaxed).max(1);
        if caps <= budget {
            cap
        } else {
            (u128::from(cap) * u128::from(budget) / u128::from(caps)) as u64
        }
    }

    /// Waits, at most [`ROOM_WAIT`], while the refreshes' collectors hold more than the budget
    /// together and `account`'s refresh holds no more than its fair part: then another
    /// refresh's collector holds more than its own part, and spills at its next record. A
    /// refresh over its own part does not wait: its own collectors spill on its own thread.
    /// Whether there is room now; without `patience`, it says so without waiting.
    fn wait_for_room(&self, account: &Account, patience: bool) -> bool {
        let budget = || self.0.memory_budget.load(Ordering::Relaxed);
        let crowded = || {
            let own = account.memory.now();
            self.memory() > budget() && own <= self.fair(account.caps.load(Ordering::Relaxed))
        };
        if !crowded() {
            return true;
        }
        if !patience {
            return false;
        }
        let deadline = Instant::now() + ROOM_WAIT;
        let (lock, signal) = &self.0.room;
        let mut guard = lock.lock().unwrap_or_else(|e| e.into_inner());
        while crowded() {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                tracing::debug!(
                    held = self.memory(),
                    budget = budget(),
                    "a refresh takes its part of the memory budget before another has spilled"
                );
                return false;
            };
            guard = (signal.wait_timeout(guard, left))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }

    /// Wakes the collectors waiting for room: one gave memory back.
    fn gave_back(&self) {
        let (lock, signal) = &self.0.room;
        drop(lock.lock().unwrap_or_else(|e| e.into_inner()));
        signal.notify_all();
    }
}

/// The longest a collector waits for another refresh's to spill down to its fair part before
/// it takes its own anyway. A spill is written in a second or two; a refresh that holds its
/// memory without adding to it (rendering) gives it back only at its end, and a harvest
/// stalled longer risks its resumption token.
const ROOM_WAIT: Duration = Duration::from_secs(10);

/// Bytes a share's memory may grow before the pool hears of it: the pool is exact to this
/// much per collector, and a record costs a comparison, not an atomic write.
const SHARE_STEP: u64 = 64 << 10;

/// One collector's memory: within its cap and, in the gateway, within what the pool leaves it
/// ([`Pool`]). It counts what the collector says it holds into the harvest's meter (and the
/// pool's); dropped, it gives it back.
#[derive(Debug)]
pub struct Share {
    cap: u64,
    /// Bytes counted into `held` now.
    counted: u64,
    /// Bytes its memory may grow before it is counted: [`SHARE_STEP`], less for a small cap.
    step: u64,
    held: Meter,
    /// In the gateway: the refresh's account with the pool.
    account: Option<Arc<Account>>,
    /// It waited [`ROOM_WAIT`] for room in vain, and waits no more until there is room: the
    /// refresh over its part holds its memory without adding to it (it renders, or its
    /// upstream is slow), and a wait at every record would stall this harvest.
    waited_out: bool,
}

impl Share {
    /// A share of `budget` capped at `cap` bytes.
    pub fn new(budget: &Budget, cap: u64) -> Self {
        let cap = cap.max(1);
        let account = budget.account.clone();
        if let Some(account) = &account {
            account.caps.fetch_add(cap, Ordering::Relaxed);
            account.pool.0.caps.fetch_add(cap, Ordering::Relaxed);
        }
        Self {
            cap,
            counted: 0,
            step: (cap / 64).clamp(1, SHARE_STEP),
            held: budget.held.clone(),
            account,
            waited_out: false,
        }
    }

    /// Its cap: what it may hold when the pool has room.
    pub fn cap(&self) -> u64 {
        self.cap
    }

    /// Whether the collector may hold `bytes` (which it counts): within its cap, and within
    /// what the other collectors of the pool leave, or its fair part of the pool when that is
    /// more. When it holds its fair part while another refresh's collector, over its own part,
    /// still holds the rest (it spills at its next record), it waits for that spill first, so
    /// that the refreshes together stay within the budget.
    pub fn allows(&mut self, bytes: u64) -> bool {
        self.count(bytes);
        if bytes > self.limit() {
            return false;
        }
        if let Some(account) = &self.account {
            self.waited_out = !account.pool.wait_for_room(account, !self.waited_out);
        }
        true
    }

    /// Counts `bytes` as what the collector holds now.
    pub fn count(&mut self, bytes: u64) {
        if bytes < self.counted {
            self.held.remove(self.counted - bytes);
            self.counted = bytes;
            if let Some(account) = &self.account {
                account.pool.gave_back();
            }
        } else if bytes - self.counted >= self.step {
            self.held.add(bytes - self.counted);
            self.counted = bytes;
        }
    }

    /// What it may hold now: its cap; in a pool, less when the others hold the rest, but never
    /// less than its fair part, its cap scaled by the pool over every collector's cap.
    pub fn limit(&self) -> u64 {
        let Some(pool) = self.account.as_ref().map(|a| &a.pool) else {
            return self.cap;
        };
        let budget = pool.0.memory_budget.load(Ordering::Relaxed);
        let fair = pool.fair(self.cap);
        let others = pool.memory().saturating_sub(self.counted);
        let left = budget.saturating_sub(others);
        self.cap.min(fair.max(left)).max(1)
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        self.held.remove(self.counted);
        if let Some(account) = &self.account {
            account.caps.fetch_sub(self.cap, Ordering::Relaxed);
            account.pool.0.caps.fetch_sub(self.cap, Ordering::Relaxed);
            account.pool.gave_back();
        }
    }
}

/// Bytes a spill file may grow between two looks at the limits on spill space (the pool's cap,
/// the file system's free space).
const LOOK_EVERY: u64 = 4 << 20;

/// The free space a spill leaves its file system: 5% of it, at most 1 GiB, for the state
/// store, the generations and the system, which a full disk would fail too.
pub(crate) fn reserve(size: u64) -> u64 {
    (size / 20).min(1 << 30)
}

/// A file system's room for spills: the bytes free, its size, and what a spill leaves free.
#[derive(Clone, Copy, Debug)]
pub struct Room {
    /// Bytes free to an unprivileged process.
    pub free: u64,
    /// The file system's size.
    pub size: u64,
    /// What a spill leaves free on it: 5% of its size, at most 1 GiB (`reserve`).
    pub keep: u64,
}

impl Room {
    /// The room on the file system of `path`.
    ///
    /// # Errors
    ///
    /// The OS's error when the file system's figures cannot be read (`statvfs`).
    pub fn of(path: &Path) -> std::io::Result<Self> {
        let (free, size) = free_space(path)?;
        Ok(Self {
            free,
            size,
            keep: reserve(size),
        })
    }

    /// Whether a spill there stops at once: less is free than it leaves.
    pub fn short(&self) -> bool {
        self.free < self.keep
    }
}

/// The bytes free to an unprivileged process on the file system of `path`, and its size.
pub(crate) fn free_space(path: &Path) -> std::io::Result<(u64, u64)> {
    let s = rustix::fs::statvfs(path)?;
    let block = s.f_frsize.max(1);
    Ok((
        s.f_bavail.saturating_mul(block),
        s.f_blocks.saturating_mul(block),
    ))
}

/// What a spill may take on disk: the pool's cap, and its file system's free space less the
/// reserve. Checked as it starts and every [`LOOK_EVERY`] bytes of a file.
#[derive(Clone, Debug)]
struct Limit {
    /// The pool, when there is a cap.
    pool: Option<Pool>,
    /// The repository, for the error.
    repository: Option<String>,
}

impl Limit {
    fn of(budget: &Budget) -> Self {
        Self {
            pool: budget.pool().cloned(),
            repository: budget.account.as_ref().map(|a| a.name.clone()),
        }
    }

    /// Whether the refreshes' spill files together (the pool's meter, which every refresh's
    /// counts into) stay within the cap, and whether the file system of `path` has room left;
    /// `Err` says which limit the spill would pass.
    fn check(&self, path: &Path) -> Result<(), std::io::Error> {
        let of = || {
            self.repository
                .as_ref()
                .map_or_else(String::new, |r| format!(" (repository {r})"))
        };
        if let Some(pool) = &self.pool
            && let Some(max) = pool.limits().spill_max
        {
            let now = pool.spill();
            if now > max {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::StorageFull,
                    format!(
                        "the refreshes' spill files would take {now} bytes, more than [server] \
                         spill_max_bytes = {max}{}; the generation being served stays",
                        of()
                    ),
                ));
            }
        }
        // Not knowing the free space (an unusual file system) stops nothing.
        if let Ok(room) = Room::of(path)
            && room.short()
        {
            let Room { free, size, keep } = room;
            return Err(std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                format!(
                    "only {free} bytes are free on its file system ({size} bytes); a spill \
                     stops {keep} bytes short of full, so that what else is written there \
                     (the state, the output) has room{}",
                    of()
                ),
            ));
        }
        Ok(())
    }
}

/// A spill folder: made in its parent on first use, removed with what is in it when it and the
/// last file made in it ([`Run`]) are dropped.
/// Its name holds the process id, so that a run that finds one of a process that no longer
/// exists (a crash, a kill) removes it (`remove_abandoned`).
#[derive(Debug)]
pub struct Folder {
    parent: PathBuf,
    dir: Option<Arc<tempfile::TempDir>>,
    meter: Meter,
    limit: Limit,
    /// Files made so far, for their names.
    files: u32,
}

impl Folder {
    /// A folder in `budget`'s parent, counted on its meter; nothing is made yet.
    pub fn new(budget: &Budget) -> Self {
        Self {
            parent: budget.parent.clone(),
            dir: None,
            meter: budget.meter.clone(),
            limit: Limit::of(budget),
            files: 0,
        }
    }

    fn path(&mut self) -> Result<&Path, FilesError> {
        if self.dir.is_none() {
            remove_abandoned(&self.parent);
            // Room for it, before the first byte.
            (self.limit.check(&self.parent)).map_err(|source| FilesError::Spill {
                action: "create a folder for",
                path: self.parent.clone(),
                source,
            })?;
            let dir = tempfile::Builder::new()
                .prefix(&format!("{PREFIX}{}-", std::process::id()))
                .tempdir_in(&self.parent)
                .map_err(|source| FilesError::Spill {
                    action: "create a folder for",
                    path: self.parent.clone(),
                    source,
                })?;
            self.dir = Some(Arc::new(dir));
        }
        Ok(self.dir.as_ref().expect("made above").path())
    }

    /// A new file named after `what`, to write.
    ///
    /// # Errors
    ///
    /// [`FilesError::Spill`] when the folder or the file cannot be made, or the limits on spill
    /// space leave no room for it.
    pub fn create(&mut self, what: &str) -> Result<RunWriter, FilesError> {
        self.files += 1;
        let name = format!("{what}-{}", self.files);
        let path = self.path()?.join(name);
        let file = File::create(&path).map_err(|source| FilesError::Spill {
            action: "create",
            path: path.clone(),
            source,
        })?;
        Ok(RunWriter {
            out: BufWriter::with_capacity(WRITE_BUFFER, file),
            path,
            bytes: 0,
            look_at: LOOK_EVERY,
            counted: Counted {
                meter: self.meter.clone(),
                bytes: 0,
            },
            limit: self.limit.clone(),
            folder: self.dir.clone().expect("made above"),
        })
    }
}

/// Removes the spill folders in `parent` whose process no longer runs; what cannot be removed
/// stays (another run tries again).
pub(crate) fn remove_abandoned(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<i32>().ok())
        else {
            continue;
        };
        if !running(pid) {
            let path = entry.path();
            match std::fs::remove_dir_all(&path) {
                Ok(()) => {
                    tracing::info!(path = %path.display(), "removed an abandoned spill folder")
                }
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "cannot remove an abandoned spill folder")
                }
            }
        }
    }
}

/// Whether process `pid` exists (a process of another user counts as running).
fn running(pid: i32) -> bool {
    if pid == std::process::id() as i32 {
        return true;
    }
    let Some(pid) = rustix::process::Pid::from_raw(pid) else {
        return false;
    };
    match rustix::process::test_kill_process(pid) {
        Ok(()) => true,
        Err(e) => e != rustix::io::Errno::SRCH,
    }
}

/// Buffer of each file written.
const WRITE_BUFFER: usize = 256 << 10;
/// Buffer of each run read in a merge: many runs are read at once.
pub(crate) const READ_BUFFER: usize = 64 << 10;

/// Bytes of a spill file counted on a meter: given back when dropped.
#[derive(Debug)]
struct Counted {
    meter: Meter,
    bytes: u64,
}

impl Counted {
    /// Counts the file as `bytes` long.
    fn to(&mut self, bytes: u64) {
        self.meter.add(bytes - self.bytes);
        self.bytes = bytes;
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.meter.remove(self.bytes);
    }
}

/// A spill file being written: records of bytes and integers, read back by [`RunReader`].
/// Counted on its meter as it grows (every `LOOK_EVERY` bytes, when the limits on spill
/// space are looked at too); dropped unfinished, it is counted no more.
#[derive(Debug)]
pub struct RunWriter {
    out: BufWriter<File>,
    path: PathBuf,
    bytes: u64,
    /// When `bytes` reaches it, the file is counted and the limits looked at.
    look_at: u64,
    counted: Counted,
    limit: Limit,
    folder: Arc<tempfile::TempDir>,
}

impl RunWriter {
    /// Appends `bytes`.
    ///
    /// # Errors
    ///
    /// [`FilesError::Spill`] when the write fails or the file passes a limit on spill space.
    pub fn bytes(&mut self, bytes: &[u8]) -> Result<(), FilesError> {
        self.bytes += bytes.len() as u64;
        self.out
            .write_all(bytes)
            .map_err(|source| FilesError::Spill {
                action: "write",
                path: self.path.clone(),
                source,
            })?;
        if self.bytes >= self.look_at {
            self.look()?;
        }
        Ok(())
    }

    /// Counts what is written so far, and fails when that passes a limit on spill space.
    fn look(&mut self) -> Result<(), FilesError> {
        self.look_at = self.bytes + LOOK_EVERY;
        self.counted.to(self.bytes);
        (self.limit.check(&self.path)).map_err(|source| FilesError::Spill {
            action: "write",
            path: self.path.clone(),
            source,
        })
    }

    /// Appends `n`, seven bits a byte (LEB128): the run's lengths and numbers are mostly small.
    ///
    /// # Errors
    ///
    /// As [`RunWriter::bytes`].
    pub fn varint(&mut self, mut n: u64) -> Result<(), FilesError> {
        let mut buf = [0u8; 10];
        let mut len = 0;
        loop {
            let low = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                buf[len] = low;
                len += 1;
                break;
            }
            buf[len] = low | 0x80;
            len += 1;
        }
        self.bytes(&buf[..len])
    }

    /// Appends `n` as eight bytes.
    ///
    /// # Errors
    ///
    /// As [`RunWriter::bytes`].
    pub fn fixed(&mut self, n: u64) -> Result<(), FilesError> {
        self.bytes(&n.to_le_bytes())
    }

    /// The file, written out, to read.
    ///
    /// # Errors
    ///
    /// [`FilesError::Spill`] when the last bytes cannot be written or the file passes a limit
    /// on spill space.
    pub fn finish(mut self) -> Result<Run, FilesError> {
        self.look()?;
        let Self {
            out,
            path,
            counted,
            folder,
            ..
        } = self;
        out.into_inner()
            .map_err(|e| FilesError::Spill {
                action: "write",
                path: path.clone(),
                source: e.into_error(),
            })?
            .sync_data()
            .ok();
        Ok(Run {
            path,
            _counted: counted,
            _folder: folder,
        })
    }
}

/// A spill file written: removed when dropped (and its folder with the last of them).
#[derive(Debug)]
pub struct Run {
    path: PathBuf,
    /// Its bytes on the meter, given back when it is dropped.
    _counted: Counted,
    /// The folder stays as long as a file in it.
    _folder: Arc<tempfile::TempDir>,
}

impl Run {
    /// A reader from its start.
    ///
    /// # Errors
    ///
    /// [`FilesError::Spill`] when the file cannot be opened.
    pub fn read(&self) -> Result<RunReader, FilesError> {
        let file = File::open(&self.path).map_err(|source| FilesError::Spill {
            action: "read",
            path: self.path.clone(),
            source,
        })?;
        Ok(RunReader {
            input: BufReader::with_capacity(READ_BUFFER, file),
            path: self.path.clone(),
        })
    }

    /// Its bytes.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> u64 {
        self._counted.bytes
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Reads a spill file front to back, as [`RunWriter`] wrote it.
#[derive(Debug)]
pub struct RunReader {
    input: BufReader<File>,
    path: PathBuf,
}

impl RunReader {
    fn error(&self, source: std::io::Error) -> FilesError {
        FilesError::Spill {
            action: "read",
            path: self.path.clone(),
            source,
        }
    }

    /// The next varint; `None` at the end of the file (not inside a record).
    ///
    /// # Errors
    ///
    /// [`FilesError::Spill`] when the read fails, or the file ends inside the varint or holds
    /// one past 64 bits.
    pub fn varint_or_end(&mut self) -> Result<Option<u64>, FilesError> {
        let mut n = 0u64;
        let mut shift = 0;
        loop {
            let mut byte = [0u8; 1];
            match self.input.read(&mut byte) {
                Ok(0) if shift == 0 => return Ok(None),
                Ok(0) => return Err(self.error(std::io::ErrorKind::UnexpectedEof.into())),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.error(e)),
            }
            n |= u64::from(byte[0] & 0x7f) << shift;
            if byte[0] & 0x80 == 0 {
                return Ok(Some(n));
            }
            shift += 7;
            if shift > 63 {
                return Err(self.error(std::io::Error::other("a varint past 64 bits")));
            }
        }
    }

    /// The next varint, inside a record.
    ///
    /// # Errors
    ///
    /// [`FilesError::Spill`] when the read fails, or the file ends before the varint or inside
    /// it, or holds one past 64 bits.
    pub fn varint(&mut self) -> Result<u64, FilesError> {
        self.varint_or_end()?
            .ok_or_else(|| self.error(std::io::ErrorKind::UnexpectedEof.into()))
    }

    /// The next eight-byte number; `None` at the end of the file (not inside a record).
    ///
    /// # Errors
    ///
    /// [`FilesError::Spill`] when the read fails.
    pub fn fixed_or_end(&mut self) -> Result<Option<u64>, FilesError> {
        let mut bytes = [0u8; 8];
        match self.input.read_exact(&mut bytes) {
            Ok(()) => Ok(Some(u64::from_le_bytes(bytes))),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
            Err(e) => Err(self.error(e)),
        }
    }

    /// The next eight-byte number.
    ///
    /// # Errors
    ///
    /// [`FilesError::Spill`] when the read fails or the file ends before eight bytes (its
    /// source's kind is then `UnexpectedEof`).
    pub fn fixed(&mut self) -> Result<u64, FilesError> {
        let mut bytes = [0u8; 8];
        self.exact(&mut bytes)?;
        Ok(u64::from_le_bytes(bytes))
    }

    /// Fills `into`.
    ///
    /// # Errors
    ///
    /// [`FilesError::Spill`] when the read fails or the file ends first (its source's kind is
    /// then `UnexpectedEof`, what a reader that meets the end between records looks for).
    pub fn exact(&mut self, into: &mut [u8]) -> Result<(), FilesError> {
        self.input.read_exact(into).map_err(|e| self.error(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Numbers and bytes read back as written; the files go when dropped, and the meter keeps
    /// the most they held.
    #[test]
    fn runs_read_back_and_are_removed() {
        let parent = tempfile::tempdir().unwrap();
        let budget = Budget::new(parent.path().to_owned(), 1);
        let mut folder = Folder::new(&budget);
        let mut w = folder.create("test").unwrap();
        for n in [0, 1, 127, 128, 300, u64::MAX] {
            w.varint(n).unwrap();
        }
        w.fixed(42).unwrap();
        w.bytes(b"abc").unwrap();
        let run = w.finish().unwrap();
        assert_eq!(budget.meter.peak(), run.bytes());
        let mut r = run.read().unwrap();
        for n in [0, 1, 127, 128, 300, u64::MAX] {
            assert_eq!(r.varint().unwrap(), n);
        }
        assert_eq!(r.fixed().unwrap(), 42);
        let mut abc = [0u8; 3];
        r.exact(&mut abc).unwrap();
        assert_eq!(&abc, b"abc");
        assert_eq!(r.varint_or_end().unwrap(), None);
        let path = run.path.clone();
        drop(r);
        drop(run);
        assert!(!path.exists());
        drop(folder);
        assert_eq!(std::fs::read_dir(parent.path()).unwrap().count(), 0);
    }

    /// A spill folder of a process that is gone is removed by the next run; one of a running
    /// process stays.
    #[test]
    fn abandoned_folders_are_removed() {
        let parent = tempfile::tempdir().unwrap();
        // Process ids past the kernel's largest (4,194,304) never run.
        let gone = parent.path().join(format!("{PREFIX}999999999-x"));
        let ours = parent
            .path()
            .join(format!("{PREFIX}{}-y", std::process::id()));
        let other = parent.path().join(".oai-bridge-shards-z");
        for dir in [&gone, &ours, &other] {
            std::fs::create_dir(dir).unwrap();
            std::fs::write(dir.join("urls-1"), b"x").unwrap();
        }
        remove_abandoned(parent.path());
        assert!(!gone.exists());
        assert!(ours.exists() && other.exists());
    }

    /// A budget of 1,000 bytes counted in `account`.
    fn within(account: &Arc<Account>) -> Budget {
        Budget::new(std::env::temp_dir(), 1000).within(account)
    }

    fn pool(memory: u64, spill_max: Option<u64>) -> Pool {
        Pool::new(PoolLimits {
            memory,
            per_refresh: memory,
            spill_max,
        })
    }

    /// Without a pool a share holds up to its cap, and counts what it holds into its meter.
    #[test]
    fn a_share_alone_holds_its_cap() {
        let budget = Budget::new(std::env::temp_dir(), 100);
        let mut share = Share::new(&budget, 100);
        assert!(share.allows(100));
        assert_eq!(budget.held.now(), 100);
        assert!(!share.allows(101));
        share.count(0);
        assert_eq!((budget.held.now(), budget.held.peak()), (0, 101));
        share.count(40);
        drop(share);
        assert_eq!(budget.held.now(), 0);
    }

    /// Issue 30: two refreshes' collectors share a pool of 1,000 bytes. The first alone may
    /// take it all; once the second holds a share too, each is sure of its fair part (500),
    /// and the first spills down when it holds more than the second leaves it. The second
    /// waits for that spill before it goes on, so that the two stay within the pool. The
    /// pool's meter and each refresh's account say what they hold.
    #[test]
    fn collectors_share_the_pool_and_each_keeps_its_part() {
        let pool = pool(1000, None);
        let (a, b) = (pool.account("a"), pool.account("b"));
        let mut first = Share::new(&within(&a), 1000);
        assert!(first.allows(900), "alone, it may take the pool");
        let mut second = Share::new(&within(&b), 1000);
        assert_eq!(
            second.limit(),
            500,
            "the first leaves 100, but the fair part is 500"
        );
        let waiting = std::thread::spawn(move || (second.allows(400), second));
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            !waiting.is_finished(),
            "the second waits while the first holds more than its part"
        );
        assert!(!first.allows(910), "only 600 are left to it: it spills");
        first.count(0);
        let (allowed, mut second) = waiting.join().unwrap();
        assert!(allowed, "the first's spill lets the second go on");
        assert_eq!(pool.memory(), 400);
        assert!(first.allows(550));
        assert!(second.allows(450));
        assert!(!second.allows(501));
        second.count(450);
        assert_eq!(pool.memory(), 1000);
        let running = pool.running();
        assert_eq!(
            running,
            [
                Usage {
                    name: "a".into(),
                    memory: 550,
                    spill: 0
                },
                Usage {
                    name: "b".into(),
                    memory: 450,
                    spill: 0
                },
            ]
        );
        drop(first);
        drop(a);
        assert_eq!(second.limit(), 1000, "a refresh that ended leaves the pool");
        assert_eq!(pool.running().len(), 1);
        assert_eq!((pool.memory(), b.memory.peak()), (450, 501));
    }

    /// A refresh that holds more than its own part of the pool does not wait for room: its
    /// own collectors give memory back on its own thread, not while it waits.
    #[test]
    fn a_refresh_over_its_part_never_waits_for_itself() {
        let pool = pool(1000, None);
        let (a, b) = (pool.account("a"), pool.account("b"));
        let mut urls = Share::new(&within(&a), 1000);
        assert!(urls.allows(900));
        let mut other = Share::new(&within(&b), 1000);
        other.count(200);
        let mut versions = Share::new(&within(&a), 250);
        let asked = Instant::now();
        assert!(versions.allows(10), "within its fair part (111)");
        assert!(
            asked.elapsed() < ROOM_WAIT / 2,
            "it went on at once: its refresh, not the other, is over its part"
        );
        assert!(
            !urls.allows(900),
            "the refresh's URLs spill at their next record"
        );
    }

    /// A pool larger than every collector's cap never holds one back.
    #[test]
    fn a_pool_above_the_caps_binds_nothing() {
        let pool = pool(10_000, None);
        let account = pool.account("a");
        let budget = within(&account);
        let mut shares: Vec<Share> = (0..5).map(|_| Share::new(&budget, 1000)).collect();
        for share in &mut shares {
            assert!(share.allows(1000));
            assert!(!share.allows(1001));
        }
    }

    /// Issue 30: past `[server] spill_max_bytes` a spill file fails, naming the cap and the
    /// repository; what it had counted is given back, and the folder goes.
    #[test]
    fn the_spill_cap_fails_the_file_that_would_pass_it() {
        let parent = tempfile::tempdir().unwrap();
        let pool = pool(1, Some(10));
        let account = pool.account("big");
        let budget = Budget::new(parent.path().to_owned(), 1).within(&account);
        let mut folder = Folder::new(&budget);
        let mut w = folder.create("urls").unwrap();
        w.bytes(&[7; 10]).unwrap();
        let small = w.finish().unwrap();
        assert_eq!((pool.spill(), account.spill.now()), (10, 10));
        let mut w = folder.create("urls").unwrap();
        w.bytes(b"x").unwrap();
        let e = w.finish().unwrap_err();
        let FilesError::Spill { source, .. } = &e else {
            panic!("not a spill file's error: {e}")
        };
        assert_eq!(source.kind(), std::io::ErrorKind::StorageFull);
        let message = e.to_string();
        let said = [
            "spill_max_bytes = 10",
            "repository big",
            "urls-2",
            "11 bytes",
        ];
        assert!(said.iter().all(|s| message.contains(s)), "{message}");
        assert_eq!(pool.spill(), 10);
        drop(small);
        drop(folder);
        assert_eq!((pool.spill(), account.spill.peak()), (0, 11));
        assert_eq!(std::fs::read_dir(parent.path()).unwrap().count(), 0);
    }

    /// The free space a spill leaves: 5% of a small file system, 1 GiB of a large one.
    #[test]
    fn the_reserve_of_free_space() {
        assert_eq!(reserve(2 << 30), (2 << 30) / 20);
        assert_eq!(reserve(1 << 40), 1 << 30);
        let (free, size) = free_space(&std::env::temp_dir()).unwrap();
        assert!(free <= size && size > 0);
    }
}
