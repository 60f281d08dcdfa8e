//! Writing a publish's files on disk. An export's folder: every file is written into a
//! staging folder beside the target, and the staging folder replaces the target in one step
//! only after everything was written ([`Staging`]); until then, the target is exactly as it
//! was. Large files, an export's and a gateway's generation's, bypass the page cache where the
//! file system allows ([`DirectWriter`], [`write_file`], [`read_whole`]). Named `write` for
//! what it does: where a publish goes (a folder or a bucket, the CLI's `--out`) is the
//! `oai-bridge` package's `publish` module.

use std::fs;
use std::io::{self, Seek, Write};
use std::path::{Path, PathBuf};

use crate::FilesError;

/// Marks a folder as written by `oai-bridge export`, so that a later export may replace it. A
/// non-empty folder without it is never replaced: `--out ~` must not wipe a home directory.
pub const MARKER: &str = ".oai-bridge-export";

/// A folder being filled beside its target. Dropped without [`Staging::commit`], it is removed
/// and the target is untouched.
#[derive(Debug)]
pub struct Staging {
    dir: tempfile::TempDir,
    target: PathBuf,
    bytes: u64,
    /// The direct writers' buffer, from one file to the next.
    aligned: Option<Chunk>,
    /// The streams' buffers ([`Staging::stream`]), from one file to the next.
    chunks: Vec<Chunk>,
}

impl Staging {
    /// Creates the staging folder next to `target` (same file system, so the swap is a rename).
    /// Fails up front when `target` exists, is not empty and was not written by the bridge.
    ///
    /// # Errors
    ///
    /// [`FilesError::Io`] when the parent or the staging folder cannot be made, or `target` is
    /// a folder that is not empty and was not written by the bridge (`refusing to replace`).
    pub fn new(target: &Path) -> Result<Self, FilesError> {
        let parent = beside(target);
        fs::create_dir_all(&parent).map_err(FilesError::io("cannot create", &parent))?;
        check_replaceable(target)?;
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let dir = tempfile::Builder::new()
            .prefix(&format!(".{name}.staging-"))
            .tempdir_in(&parent)
            .map_err(FilesError::io("cannot create a staging folder in", &parent))?;
        set_mode(dir.path(), 0o755)
            .map_err(FilesError::io("cannot set permissions of", dir.path()))?;
        Ok(Self {
            dir,
            target: target.to_owned(),
            bytes: 0,
            aligned: None,
            chunks: Vec::new(),
        })
    }

    /// Writes one file into the staging folder. Large files bypass the page cache where the
    /// file system allows ([`DirectWriter`]); the rest are written as usual.
    ///
    /// # Errors
    ///
    /// [`FilesError::Io`] when its folder or the file cannot be made or written.
    pub fn write(&mut self, name: &str, bytes: &[u8]) -> Result<(), FilesError> {
        let path = self.dir.path().join(name);
        // Names may hold one folder level (`cdif/<hash>.jsonld`).
        if let Some(parent) = path
            .parent()
            .filter(|p| *p != self.dir.path() && !p.exists())
        {
            fs::create_dir_all(parent).map_err(FilesError::io("cannot create", parent))?;
            set_mode(parent, 0o755).map_err(FilesError::io("cannot set permissions of", parent))?;
        }
        write_file(&path, bytes, &mut self.aligned, false)
            .map_err(FilesError::io("cannot write", &path))?;
        self.bytes += bytes.len() as u64;
        Ok(())
    }

    /// Puts the file at `from` into the staging folder as `name` by a hard link, its bytes
    /// written once for both; `false` when it cannot be linked (another file system, a file
    /// system without hard links), and nothing was done.
    pub fn link(&mut self, name: &str, from: &Path) -> bool {
        let to = self.dir.path().join(name);
        match fs::metadata(from).and_then(|meta| fs::hard_link(from, &to).map(|()| meta.len())) {
            Ok(len) => {
                self.bytes += len;
                true
            }
            Err(e) => {
                tracing::debug!(from = %from.display(), to = %to.display(), error = %e, "not linked: copied");
                false
            }
        }
    }

    /// Opens `name` in the staging folder to be written front to back ([`FileStream`]), with
    /// direct I/O as [`Staging::write`] writes large files: a file made as it fills is never
    /// whole in memory, nor copied once more into the writer's chunk.
    ///
    /// # Errors
    ///
    /// [`FilesError::Io`] when the file cannot be made.
    pub fn stream(&mut self, name: &str) -> Result<FileStream, FilesError> {
        let path = self.dir.path().join(name);
        let chunk = self.chunks.pop();
        let mut writer = DirectWriter::create(&path, true, chunk)
            .map_err(FilesError::io("cannot write", &path))?;
        writer.hasher = Some(crc32fast::Hasher::new());
        Ok(FileStream { writer })
    }

    /// Ends a stream of [`Staging::stream`]: its length and CRC-32.
    ///
    /// # Errors
    ///
    /// [`FilesError::Io`] when the stream's last bytes cannot be written.
    pub fn end_stream(&mut self, name: &str, stream: FileStream) -> Result<(u64, u32), FilesError> {
        let path = self.dir.path().join(name);
        let (len, crc) = (stream.writer.len(), stream.writer.crc());
        let (_, chunk) = stream
            .writer
            .finish()
            .map_err(FilesError::io("cannot write", &path))?;
        // A few streams are open at once (one per profile); their chunks are kept for the next.
        if self.chunks.len() < 4 {
            self.chunks.push(chunk);
        }
        self.bytes += len;
        Ok((len, crc))
    }

    /// Reads the file ended by [`Staging::end_stream`] back into `buf` (its bytes from the
    /// offset returned on) and takes it out of the staging folder.
    ///
    /// # Errors
    ///
    /// [`FilesError::Io`] when the file cannot be read or removed.
    pub fn take_back(&mut self, name: &str, buf: &mut Vec<u8>) -> Result<usize, FilesError> {
        let path = self.dir.path().join(name);
        let start = read_whole(&path, buf).map_err(FilesError::io("cannot read", &path))?;
        fs::remove_file(&path).map_err(FilesError::io("cannot remove", &path))?;
        self.bytes = self.bytes.saturating_sub((buf.len() - start) as u64);
        Ok(start)
    }

    /// The staging folder.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Makes the staged files durable, then puts the staging folder in the target's place: an
    /// atomic exchange where the file system supports it, else two renames.
    ///
    /// # Errors
    ///
    /// [`FilesError::Io`] when the marker cannot be written, a sync or a rename fails, the
    /// target was replaced meanwhile by a folder the bridge did not write, or the previous
    /// export cannot be removed.
    pub fn commit(mut self) -> Result<(), FilesError> {
        self.write(MARKER, b"This folder is written by oai-bridge export and replaced as a whole by the next export.\n")?;
        // One syncfs for every file and folder written (a CDIF export holds a file per record,
        // too many to fsync one by one).
        let dir = self.dir.path();
        fs::File::open(dir)
            .and_then(|f| rustix::fs::syncfs(&f).map_err(std::io::Error::from))
            .map_err(FilesError::io("cannot sync", dir))?;
        let staged = self.dir.keep();
        let target = self.target;
        if target.exists() {
            check_replaceable(&target)?;
            let exchanged = rustix::fs::renameat_with(
                rustix::fs::CWD,
                &staged,
                rustix::fs::CWD,
                &target,
                rustix::fs::RenameFlags::EXCHANGE,
            );
            match exchanged {
                // `staged` now holds the previous generation.
                Ok(()) => fs::remove_dir_all(&staged)
                    .map_err(FilesError::io("cannot remove the previous export", &staged))?,
                Err(_) => {
                    let old = staged.with_extension("previous");
                    fs::rename(&target, &old)
                        .map_err(FilesError::io("cannot move aside", &target))?;
                    fs::rename(&staged, &target).map_err(FilesError::io(
                        "cannot rename the staging folder to",
                        &target,
                    ))?;
                    fs::remove_dir_all(&old)
                        .map_err(FilesError::io("cannot remove the previous export", &old))?;
                }
            }
        } else {
            fs::rename(&staged, &target).map_err(FilesError::io(
                "cannot rename the staging folder to",
                &target,
            ))?;
        }
        if let Some(parent) = target.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::File::open(parent)
                .and_then(|f| f.sync_all())
                .map_err(FilesError::io("cannot sync", parent))?;
        }
        Ok(())
    }
}

/// Files from this size on are written directly (a shard is up to 50 MB).
pub const DIRECT_MIN: usize = 1 << 20;

/// Creates (or truncates) the file at `path` with `bytes`; with `sync`, makes it durable. Files
/// from [`DIRECT_MIN`] on bypass the page cache where the file system allows ([`DirectWriter`],
/// in `room`, which keeps its chunk for the next large file); the rest are written as usual.
///
/// # Errors
///
/// The OS's error when the file cannot be created, written or synced.
pub fn write_file(
    path: &Path,
    bytes: &[u8],
    room: &mut Option<Chunk>,
    sync: bool,
) -> io::Result<()> {
    let file = if bytes.len() < DIRECT_MIN {
        let mut file = fs::File::create(path)?;
        file.write_all(bytes)?;
        file
    } else {
        let mut out = DirectWriter::create(path, true, room.take())?;
        out.write_all(bytes)?;
        let (file, chunk) = out.finish()?;
        *room = Some(chunk);
        file
    };
    if sync {
        file.sync_all()?;
    }
    Ok(())
}

/// Alignment of buffer, offset and length that direct I/O requires (a page covers every
/// logical block size in use).
pub(crate) const BLOCK: usize = 4096;

/// A new file written front to back with `O_DIRECT`: the device reads the bytes from a
/// block-aligned buffer (reused from file to file), so they are neither copied into the page
/// cache nor kept there. Every file is synced before the swap anyway, so the page cache would
/// only cost CPU: copying 140 MB of shards into it was a tenth of an export, and for the
/// Signmap's and OCX's shards, written as they fill (a gigabyte for a million records), the
/// largest part of the system time. The bytes are written a chunk (2 MiB) at a time;
/// [`DirectWriter::finish`] writes the last block padded and cuts the file back to its length.
/// Where the file system refuses direct I/O (tmpfs on older kernels, some network file
/// systems), at the open or at a write, the file is written as usual.
pub struct DirectWriter {
    file: fs::File,
    direct: bool,
    buf: Chunk,
    /// Bytes in the chunk.
    len: usize,
    /// Bytes written to the file.
    written: u64,
    /// The CRC-32 of the bytes given, when asked for ([`Staging::stream`]): of the chunk's
    /// first `hashed` bytes and those written before.
    hasher: Option<crc32fast::Hasher>,
    hashed: usize,
}

/// How many bytes are hashed at a time just after they were copied or read: few enough that they
/// are still in the core's own cache. A [`DirectWriter`] hashes its chunk so (folded in a whole
/// chunk at a time, the CRC read the chunk back from the shared cache and was a tenth of a
/// profiles' patch), and a patch the published files it reads.
pub(crate) const HASH_STRETCH: usize = 32 * 1024;

/// A file of the staging folder written front to back ([`Staging::stream`]).
pub struct FileStream {
    writer: DirectWriter,
}

impl FileStream {
    /// Appends `bytes`.
    ///
    /// # Errors
    ///
    /// The OS's error when a chunk cannot be written.
    pub fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.writer.write_all(bytes)
    }
}

impl std::fmt::Debug for FileStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.writer.fmt(f)
    }
}

/// How much a [`DirectWriter`] gathers before it writes: its whole huge page ([`Chunk`]), which
/// is touched whole either way. A megabyte at a time, the writes of a profiles' patch (2.9 GB
/// at a million records) and the device's notifications for them were twice as many, and
/// their system calls 88 of a run's 1,318 samples; 46 now.
const CHUNK: usize = HUGE_PAGE;

/// A transparent huge page's size (x86-64's, and what arm64 has with 4 KiB pages).
pub(crate) const HUGE_PAGE: usize = 2 << 20;

/// The room a [`DirectWriter`] gathers a chunk in: anonymous memory mapped for it, the chunk at
/// the start of a stretch aligned to a huge page and advised to the kernel as one. Direct I/O
/// pins the chunk's pages for every write and hands them to the device one segment each: for
/// the megabyte chunks of then, one huge page instead of 256 small ones took 0.13 CPU-s off an
/// export of a million records with the XML profiles (2.84 -> 2.71 s, medians of six alternated
/// runs; a little of it user time, fewer TLB misses in filling the chunk) and 0.06 s off the
/// plain export. Without huge pages
/// (`never`), it is memory as usual. Reused from writer to writer ([`DirectWriter::finish`]), so
/// mapped a few times per export.
pub struct Chunk {
    map: memmap2::MmapMut,
    /// Where the aligned chunk starts in `map`.
    start: usize,
}

impl Chunk {
    fn new() -> io::Result<Self> {
        // Room to align a whole huge page.
        let map = memmap2::MmapMut::map_anon(2 * HUGE_PAGE)?;
        let start = (HUGE_PAGE - map.as_ptr().addr() % HUGE_PAGE) % HUGE_PAGE;
        // Only advice: refused (no huge pages), it is memory as usual. Where the kernel
        // compacts memory for advised huge pages (`defrag`), the first write into the chunk
        // may wait for it, once per chunk.
        let _ = map.advise_range(memmap2::Advice::HugePage, start, HUGE_PAGE);
        Ok(Self { map, start })
    }

    fn bytes(&self) -> &[u8] {
        &self.map[self.start..self.start + CHUNK]
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.map[self.start..self.start + CHUNK]
    }
}

/// Not its bytes.
impl std::fmt::Debug for Chunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chunk").finish_non_exhaustive()
    }
}

/// Not its buffer, two megabytes.
impl std::fmt::Debug for DirectWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectWriter")
            .field("file", &self.file)
            .field("direct", &self.direct)
            .field("pending", &self.len)
            .field("written", &self.written)
            .finish()
    }
}

impl DirectWriter {
    /// Creates (or truncates) the file at `path`, to be written directly when `direct` (else
    /// as usual); `buf` is room to reuse, from an earlier writer's [`DirectWriter::finish`].
    ///
    /// # Errors
    ///
    /// The OS's error when the file cannot be opened, or a new chunk cannot be mapped.
    pub fn create(path: &Path, direct: bool, buf: Option<Chunk>) -> io::Result<Self> {
        use std::os::unix::fs::OpenOptionsExt;
        let open = |flags: rustix::fs::OFlags| {
            fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .custom_flags(flags.bits() as i32)
                .open(path)
        };
        let tried = direct.then(|| open(rustix::fs::OFlags::DIRECT));
        let (file, direct) = match tried {
            Some(Ok(file)) => (file, true),
            _ => (open(rustix::fs::OFlags::empty())?, false),
        };
        let buf = match buf {
            Some(buf) => buf,
            None => Chunk::new()?,
        };
        Ok(Self {
            file,
            direct,
            buf,
            len: 0,
            written: 0,
            hasher: None,
            hashed: 0,
        })
    }

    /// Bytes given so far.
    fn len(&self) -> u64 {
        self.written + self.len as u64
    }

    /// The CRC-32 of the bytes given so far (call before [`DirectWriter::finish`], which gives
    /// the chunk back).
    fn crc(&self) -> u32 {
        let mut hasher = self.hasher.clone().unwrap_or_default();
        hasher.update(&self.buf.bytes()[self.hashed..self.len]);
        hasher.finalize()
    }

    /// Folds the chunk's bytes not yet hashed into the CRC, when one is asked for.
    fn hash_chunk(&mut self) {
        if let Some(hasher) = &mut self.hasher {
            hasher.update(&self.buf.bytes()[self.hashed..self.len]);
            self.hashed = self.len;
        }
    }

    /// Appends `bytes`.
    ///
    /// # Errors
    ///
    /// The OS's error when a full chunk cannot be written.
    pub fn write_all(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            let mut n = (CHUNK - self.len).min(bytes.len());
            if self.hasher.is_some() {
                // No more than the stretch's rest, hashed next while in the cache.
                n = n.min(HASH_STRETCH - (self.len - self.hashed));
            }
            let at = self.len;
            self.buf.bytes_mut()[at..at + n].copy_from_slice(&bytes[..n]);
            self.len += n;
            bytes = &bytes[n..];
            if self.len - self.hashed == HASH_STRETCH || self.len == CHUNK {
                self.hash_chunk();
            }
            if self.len == CHUNK {
                self.write_chunk(CHUNK)?;
            }
        }
        Ok(())
    }

    /// Writes the first `len` bytes of the chunk (whole blocks when direct) and empties it.
    fn write_chunk(&mut self, len: usize) -> io::Result<()> {
        let chunk = &self.buf.bytes()[..len];
        let mut result = self.file.write_all(chunk);
        if self.direct && result.is_err() {
            // Refused at the write: on without direct I/O, from the end of the chunks written
            // (what a write that failed part-way left is cut off).
            self.direct = false;
            set_direct(&self.file, false)?;
            self.file.set_len(self.written)?;
            self.file.seek(io::SeekFrom::Start(self.written))?;
            result = self.file.write_all(chunk);
        }
        result?;
        self.written += len as u64;
        self.len = 0;
        self.hashed = 0;
        Ok(())
    }

    /// Writes what is left; the file, and the buffer for the next writer.
    ///
    /// # Errors
    ///
    /// The OS's error when the last chunk cannot be written or the file cut to its length.
    pub fn finish(mut self) -> io::Result<(fs::File, Chunk)> {
        let len = self.len;
        if len > 0 {
            let padded = if self.direct {
                len.next_multiple_of(BLOCK)
            } else {
                len
            };
            self.buf.bytes_mut()[len..padded].fill(0);
            let end = self.written + len as u64;
            self.write_chunk(padded)?;
            if padded != len {
                self.file.set_len(end)?;
            }
        }
        Ok((self.file, self.buf))
    }
}

/// The folder a staging folder for `target` is made in: its parent (the current folder for a
/// bare name).
pub fn beside(target: &Path) -> PathBuf {
    match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    }
}

/// Reads the whole file at `path` into `buf`, whose old contents it overwrites; the file's
/// bytes are `buf` from the offset returned on. Large files are read directly, as
/// [`Staging::write`] writes them, into a stretch of `buf` aligned as direct I/O requires: a
/// patch reads every shard it rewrites once, and copying them through the page cache cost
/// several times the reading itself. Where the file system refuses direct I/O the file is read
/// as usual.
///
/// # Errors
///
/// The OS's error when the file cannot be opened or read.
pub fn read_whole(path: &Path, buf: &mut Vec<u8>) -> io::Result<usize> {
    use std::io::Read;
    let mut file = fs::File::open(path)?;
    let len = usize::try_from(file.metadata()?.len()).map_err(io::Error::other)?;
    if len >= DIRECT_MIN {
        if let Ok(start) = read_direct(&file, len, buf) {
            return Ok(start);
        }
        // Refused (or the file changed): read again from the start, as usual.
        set_direct(&file, false)?;
        file.rewind()?;
    }
    buf.clear();
    file.read_to_end(buf)?;
    Ok(0)
}

/// Reads a published shard's file into `buf` (a [`ReadShard`](crate::patch::ReadShard) for a
/// folder of them), uncompressed when its name ends in `.gz`.
pub fn read_file(path: &Path, buf: &mut Vec<u8>) -> Option<usize> {
    use std::io::Read;
    if compressed(path) {
        buf.clear();
        let file = fs::File::open(path).ok()?;
        flate2::read::GzDecoder::new(io::BufReader::new(file))
            .read_to_end(buf)
            .ok()?;
        return Some(0);
    }
    read_whole(path, buf).ok()
}

/// Whether a published file's name says it is compressed (`sitemap-3.xml.gz`): its plain bytes
/// are read through gzip.
pub(crate) fn compressed(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "gz")
}

/// Turns direct I/O on or off for an open file.
pub(crate) fn set_direct(file: &fs::File, on: bool) -> io::Result<()> {
    use rustix::fs::OFlags;
    let flags = rustix::fs::fcntl_getfl(file)?;
    let flags = if on {
        flags | OFlags::DIRECT
    } else {
        flags - OFlags::DIRECT
    };
    Ok(rustix::fs::fcntl_setfl(file, flags)?)
}

/// Reads the `len` bytes of `file`, from its start, with `O_DIRECT` (turned on here) into an
/// aligned stretch of `buf` ([`aligned_window`]), and cuts `buf` after them.
fn read_direct(file: &fs::File, len: usize, buf: &mut Vec<u8>) -> io::Result<usize> {
    use std::io::Read;
    set_direct(file, true)?;
    let mut file = file;
    // One block more than the file, to see that it did not grow since its length was read.
    let room = len.next_multiple_of(BLOCK) + BLOCK;
    let (start, aligned) = aligned_window(buf, room);
    let mut read = 0;
    loop {
        match file.read(&mut aligned[read..]) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        // A read that ends off a block boundary reached the end of the file (another read
        // would start unaligned, which some file systems refuse).
        if read == room || read % BLOCK != 0 {
            break;
        }
    }
    if read != len {
        return Err(io::Error::other("the file changed while it was read"));
    }
    buf.truncate(start + len);
    Ok(start)
}

/// `len` bytes of `buf` starting at a block boundary, and where they start. `buf` grows as
/// needed and otherwise keeps its length, so that its room is zeroed once, not for each file.
fn aligned_window(buf: &mut Vec<u8>, len: usize) -> (usize, &mut [u8]) {
    if buf.len() < len + BLOCK {
        buf.resize(len + BLOCK, 0);
    }
    let start = (BLOCK - buf.as_ptr().addr() % BLOCK) % BLOCK;
    (start, &mut buf[start..start + len])
}

fn check_replaceable(target: &Path) -> Result<(), FilesError> {
    match fs::read_dir(target) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(FilesError::Io {
            action: "cannot read",
            path: target.to_owned(),
            source: e.into(),
        }),
        Ok(mut entries) => {
            if entries.next().is_none() || target.join(MARKER).exists() {
                Ok(())
            } else {
                Err(FilesError::Io {
                    action: "refusing to replace",
                    path: target.to_owned(),
                    source: format!(
                        "the folder is not empty and was not written by oai-bridge export (no {MARKER}); choose an empty or new folder"
                    )
                    .into(),
                })
            }
        }
    }
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(_: &Path, _: u32) -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_replaces_the_whole_folder_and_drop_leaves_it() {
        let root = tempfile::tempdir().unwrap();
        let out = root.path().join("out");
        let mut first = Staging::new(&out).unwrap();
        first.write("a.txt", b"1").unwrap();
        first.write("old.txt", b"x").unwrap();
        first.commit().unwrap();
        assert_eq!(fs::read(out.join("a.txt")).unwrap(), b"1");

        let mut abandoned = Staging::new(&out).unwrap();
        abandoned.write("a.txt", b"2").unwrap();
        drop(abandoned);
        assert_eq!(fs::read(out.join("a.txt")).unwrap(), b"1");

        let mut second = Staging::new(&out).unwrap();
        second.write("a.txt", b"3").unwrap();
        second.commit().unwrap();
        assert_eq!(fs::read(out.join("a.txt")).unwrap(), b"3");
        assert!(!out.join("old.txt").exists());
        // No staging folders are left behind.
        assert_eq!(fs::read_dir(root.path()).unwrap().count(), 1);
    }

    /// A file written piece by piece is what was given, whatever the pieces' lengths (across
    /// chunks, ending off a block), with the buffer reused by the next file; in the system's
    /// temporary folder and in /dev/shm, which may refuse direct I/O.
    #[test]
    fn a_direct_writer_writes_exactly_what_it_is_given() {
        let dirs = [
            Some(tempfile::tempdir().unwrap()),
            tempfile::tempdir_in("/dev/shm").ok(),
        ];
        for dir in dirs.iter().flatten() {
            let mut buf = None;
            for (n, total, direct) in [
                (1usize, CHUNK * 2 + 4_321, true),
                (2, 10, true),
                (3, 0, true),
                (4, CHUNK, true),
                (5, CHUNK + 3, false),
            ] {
                let path = dir.path().join(format!("f{n}"));
                let bytes: Vec<u8> = (0..total).map(|i| (i % 241) as u8).collect();
                let mut out = DirectWriter::create(&path, direct, buf).unwrap();
                let mut rest = &bytes[..];
                let mut piece = 1;
                while !rest.is_empty() {
                    let n = piece.min(rest.len());
                    out.write_all(&rest[..n]).unwrap();
                    rest = &rest[n..];
                    piece = piece * 3 + 7;
                }
                buf = Some(out.finish().unwrap().1);
                assert_eq!(
                    fs::read(&path).unwrap(),
                    bytes,
                    "{} {total}",
                    dir.path().display()
                );
            }
        }
    }

    /// A direct write the file system refuses (here: from a buffer off a block boundary, which
    /// ext4 and XFS refuse; others take it) is done again without direct I/O, and the file holds
    /// what was given either way.
    #[test]
    fn a_refused_direct_write_goes_on_without() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut out = DirectWriter::create(&path, true, None).unwrap();
        if !out.direct {
            // No direct I/O on this file system at all: nothing to refuse.
            return;
        }
        // Hashed too, as a stream is: the chunk written again is not hashed again.
        out.hasher = Some(crc32fast::Hasher::new());
        let bytes: Vec<u8> = (0..CHUNK * 2 + 5_000).map(|i| (i % 239) as u8).collect();
        out.write_all(&bytes[..CHUNK]).unwrap();
        out.buf.start += 1;
        out.write_all(&bytes[CHUNK..]).unwrap();
        assert_eq!(out.crc(), crc32fast::hash(&bytes));
        out.finish().unwrap();
        assert_eq!(fs::read(&path).unwrap(), bytes);
    }

    /// A stream's CRC-32, hashed a stretch at a time as the pieces come, is that of its bytes
    /// whatever the pieces: bytes or whole stretches, across chunks, ending anywhere.
    #[test]
    fn a_stream_hashes_what_it_is_given_in_any_pieces() {
        let root = tempfile::tempdir().unwrap();
        let mut staging = Staging::new(&root.path().join("out")).unwrap();
        let bytes: Vec<u8> = (0..CHUNK * 2 + 3 * HASH_STRETCH + 77)
            .map(|i| (i % 251) as u8)
            .collect();
        let pieces: [&[usize]; 4] = [
            &[1, 2, 3, 4_093],
            &[HASH_STRETCH - 1, 2, HASH_STRETCH],
            &[CHUNK - 5, 11],
            &[bytes.len()],
        ];
        for (n, sizes) in pieces.iter().enumerate() {
            for end in [HASH_STRETCH / 2, HASH_STRETCH + 9, CHUNK + 1, bytes.len()] {
                let name = format!("{n}-{end}");
                let mut stream = staging.stream(&name).unwrap();
                let mut at = 0;
                for &size in sizes.iter().cycle() {
                    let to = (at + size).min(end);
                    stream.write(&bytes[at..to]).unwrap();
                    at = to;
                    if at == end {
                        break;
                    }
                }
                let (len, crc) = staging.end_stream(&name, stream).unwrap();
                assert_eq!(
                    (len, crc),
                    (end as u64, crc32fast::hash(&bytes[..end])),
                    "{name}"
                );
            }
        }
    }

    #[test]
    fn large_files_are_written_and_read_exactly() {
        // Above the direct-write threshold, with a length that is no multiple of a block: the
        // padding is cut off again, and a reused buffer leaves nothing of a longer file behind.
        let root = tempfile::tempdir().unwrap();
        let out = root.path().join("out");
        let mut staging = Staging::new(&out).unwrap();
        let long: Vec<u8> = (0..DIRECT_MIN * 2 + 12_345)
            .map(|i| (i % 251) as u8)
            .collect();
        let short: Vec<u8> = (0..DIRECT_MIN + 7).map(|i| (i % 13) as u8 + b'a').collect();
        staging.write("long.xml", &long).unwrap();
        staging.write("short.xml", &short).unwrap();
        staging.write("small.txt", b"x").unwrap();
        assert_eq!(staging.bytes(), (long.len() + short.len() + 1) as u64);
        staging.commit().unwrap();
        assert_eq!(fs::read(out.join("long.xml")).unwrap(), long);
        assert_eq!(fs::read(out.join("short.xml")).unwrap(), short);
        assert_eq!(fs::read(out.join("small.txt")).unwrap(), b"x");
        // Read back (directly where the file system allows) into one buffer: each file whole,
        // nothing of a longer one before it.
        let mut buf = Vec::new();
        for (name, bytes) in [
            ("long.xml", &long[..]),
            ("short.xml", &short),
            ("small.txt", b"x"),
        ] {
            let start = read_whole(&out.join(name), &mut buf).unwrap();
            assert_eq!(&buf[start..], bytes, "{name}");
        }
        assert!(read_whole(&out.join("missing.xml"), &mut buf).is_err());
    }

    #[test]
    fn a_foreign_folder_is_never_replaced() {
        let root = tempfile::tempdir().unwrap();
        fs::write(root.path().join("precious.txt"), b"keep").unwrap();
        let e = Staging::new(root.path()).unwrap_err();
        assert!(e.to_string().contains("not written by oai-bridge"), "{e}");
    }
}
