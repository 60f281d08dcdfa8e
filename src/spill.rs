//! A harvest's temporary files, apart from what is in them: the folder they go in (beside the
//! output or in the state folder, named after the process so that the next run removes what a
//! crashed one left), the memory a harvest holds before it writes sorted runs there, and the
//! bytes written, for the summary.
//!
//! The URL inventory spills sorted runs here ([`crate::inventory`]); the profiles' shard files
//! go in a folder of the same kind ([`crate::profiles::signposts`]).

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Memory the URL inventory holds before it writes a sorted run to disk, by default: a million
/// records of the harvest benchmark fit (about 160 MiB at the resolving peak), so the common
/// repository never spills, and a harvest of any size stays within a few hundred MiB.
pub(crate) const DEFAULT_MEMORY_BUDGET: u64 = 192 << 20;

/// The name of every spill folder starts so; the process id and a random part follow.
const PREFIX: &str = ".oai-bridge-spill-";

/// Why a temporary file of the harvest failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
#[error("cannot {action} the harvest's temporary file(s) in {}: {source}", path.display())]
pub struct SpillError {
    /// What was being done: create, write or read.
    pub action: &'static str,
    /// The folder or file.
    pub path: PathBuf,
    /// Why it failed.
    pub source: std::io::Error,
}

/// Where a harvest spills, and how much memory it holds first.
#[derive(Clone, Debug)]
pub(crate) struct Budget {
    /// The folder spill folders are made in.
    pub(crate) parent: PathBuf,
    /// Bytes of memory a sort holds before it spills a run.
    pub(crate) memory: u64,
    /// Bytes on disk so far, shared with whoever reports them.
    pub(crate) meter: Meter,
}

impl Budget {
    /// The budget of `memory` bytes, spilling into `parent`.
    pub(crate) fn new(parent: PathBuf, memory: u64) -> Self {
        Self {
            parent,
            memory: memory.max(1),
            meter: Meter::default(),
        }
    }
}

impl Default for Budget {
    /// The default budget, spilling into the system's temporary folder: for a harvest that
    /// names no folder (tests, `check`).
    fn default() -> Self {
        Self::new(std::env::temp_dir(), DEFAULT_MEMORY_BUDGET)
    }
}

/// The bytes a harvest's spill files hold now, and the most they held: cheap to clone, shared
/// by the writers and the summary.
#[derive(Clone, Debug, Default)]
pub(crate) struct Meter(Arc<(AtomicU64, AtomicU64)>);

impl Meter {
    fn add(&self, bytes: u64) {
        let now = self.0.0.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.0.1.fetch_max(now, Ordering::Relaxed);
    }

    fn remove(&self, bytes: u64) {
        self.0.0.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// The most bytes the spill files held at once.
    pub(crate) fn peak(&self) -> u64 {
        self.0.1.load(Ordering::Relaxed)
    }
}

/// A spill folder: made in its parent on first use, removed with what is in it when it and the
/// last file made in it ([`Run`]) are dropped.
/// Its name holds the process id, so that a run that finds one of a process that no longer
/// exists (a crash, a kill) removes it ([`remove_abandoned`]).
#[derive(Debug)]
pub(crate) struct Folder {
    parent: PathBuf,
    dir: Option<Arc<tempfile::TempDir>>,
    meter: Meter,
    /// Files made so far, for their names.
    files: u32,
}

impl Folder {
    /// A folder in `budget`'s parent, counted on its meter; nothing is made yet.
    pub(crate) fn new(budget: &Budget) -> Self {
        Self {
            parent: budget.parent.clone(),
            dir: None,
            meter: budget.meter.clone(),
            files: 0,
        }
    }

    fn path(&mut self) -> Result<&Path, SpillError> {
        if self.dir.is_none() {
            remove_abandoned(&self.parent);
            let dir = tempfile::Builder::new()
                .prefix(&format!("{PREFIX}{}-", std::process::id()))
                .tempdir_in(&self.parent)
                .map_err(|source| SpillError {
                    action: "create a folder for",
                    path: self.parent.clone(),
                    source,
                })?;
            self.dir = Some(Arc::new(dir));
        }
        Ok(self.dir.as_ref().expect("made above").path())
    }

    /// A new file named after `what`, to write.
    pub(crate) fn create(&mut self, what: &str) -> Result<RunWriter, SpillError> {
        self.files += 1;
        let name = format!("{what}-{}", self.files);
        let path = self.path()?.join(name);
        let file = File::create(&path).map_err(|source| SpillError {
            action: "create",
            path: path.clone(),
            source,
        })?;
        Ok(RunWriter {
            out: BufWriter::with_capacity(WRITE_BUFFER, file),
            path,
            bytes: 0,
            meter: self.meter.clone(),
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

/// A spill file being written: records of bytes and integers, read back by [`RunReader`].
#[derive(Debug)]
pub(crate) struct RunWriter {
    out: BufWriter<File>,
    path: PathBuf,
    bytes: u64,
    meter: Meter,
    folder: Arc<tempfile::TempDir>,
}

impl RunWriter {
    /// Appends `bytes`.
    pub(crate) fn bytes(&mut self, bytes: &[u8]) -> Result<(), SpillError> {
        self.bytes += bytes.len() as u64;
        self.out.write_all(bytes).map_err(|source| SpillError {
            action: "write",
            path: self.path.clone(),
            source,
        })
    }

    /// Appends `n`, seven bits a byte (LEB128): the run's lengths and numbers are mostly small.
    pub(crate) fn varint(&mut self, mut n: u64) -> Result<(), SpillError> {
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
    pub(crate) fn fixed(&mut self, n: u64) -> Result<(), SpillError> {
        self.bytes(&n.to_le_bytes())
    }

    /// The file, written out, to read.
    pub(crate) fn finish(self) -> Result<Run, SpillError> {
        let Self {
            out,
            path,
            bytes,
            meter,
            folder,
        } = self;
        out.into_inner()
            .map_err(|e| SpillError {
                action: "write",
                path: path.clone(),
                source: e.into_error(),
            })?
            .sync_data()
            .ok();
        meter.add(bytes);
        Ok(Run {
            path,
            bytes,
            meter,
            _folder: folder,
        })
    }
}

/// A spill file written: removed when dropped (and its folder with the last of them).
#[derive(Debug)]
pub(crate) struct Run {
    path: PathBuf,
    bytes: u64,
    meter: Meter,
    /// The folder stays as long as a file in it.
    _folder: Arc<tempfile::TempDir>,
}

impl Run {
    /// A reader from its start.
    pub(crate) fn read(&self) -> Result<RunReader, SpillError> {
        let file = File::open(&self.path).map_err(|source| SpillError {
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
        self.bytes
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        self.meter.remove(self.bytes);
    }
}

/// Reads a spill file front to back, as [`RunWriter`] wrote it.
#[derive(Debug)]
pub(crate) struct RunReader {
    input: BufReader<File>,
    path: PathBuf,
}

impl RunReader {
    fn error(&self, source: std::io::Error) -> SpillError {
        SpillError {
            action: "read",
            path: self.path.clone(),
            source,
        }
    }

    /// The next varint; `None` at the end of the file (not inside a record).
    pub(crate) fn varint_or_end(&mut self) -> Result<Option<u64>, SpillError> {
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
    pub(crate) fn varint(&mut self) -> Result<u64, SpillError> {
        self.varint_or_end()?
            .ok_or_else(|| self.error(std::io::ErrorKind::UnexpectedEof.into()))
    }

    /// The next eight-byte number; `None` at the end of the file (not inside a record).
    pub(crate) fn fixed_or_end(&mut self) -> Result<Option<u64>, SpillError> {
        let mut bytes = [0u8; 8];
        match self.input.read_exact(&mut bytes) {
            Ok(()) => Ok(Some(u64::from_le_bytes(bytes))),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
            Err(e) => Err(self.error(e)),
        }
    }

    /// The next eight-byte number.
    pub(crate) fn fixed(&mut self) -> Result<u64, SpillError> {
        let mut bytes = [0u8; 8];
        self.exact(&mut bytes)?;
        Ok(u64::from_le_bytes(bytes))
    }

    /// Fills `into`.
    pub(crate) fn exact(&mut self, into: &mut [u8]) -> Result<(), SpillError> {
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
}
