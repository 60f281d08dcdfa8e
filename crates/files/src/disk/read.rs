//! Reading the last publish's files back, for a patch: a file found by its name
//! ([`PublishedFile`]), read whole ([`PublishedFile::read`]) or front to back a window at a
//! time into one buffer kept from file to file ([`Windows`]). The profiles' patch reads every
//! published file of the Signmap, OCX, CDIF's lists and the DiWoo categories, gigabytes for a
//! million records: read whole, each column's largest file (up to 50 MB) was memory the
//! process touched for the first time, and the kernel's zeroing of those pages cost more than
//! reading the files. A window of [`WINDOW`] is reused instead; the memory does not grow with
//! the files. Written here, not `std::io::BufReader`: a patch borrows entries from the buffer
//! where they lie, an entry must stay whole across a refill (carried before the next window),
//! and direct I/O needs the window aligned.

use std::fs;
use std::io::{self, Read};
use std::path::PathBuf;

use super::write::{BLOCK, DIRECT_MIN, HUGE_PAGE, compressed, read_file, set_direct};

/// A file of the last publish, as a patch finds it by its published name
/// ([`ReadShard`](crate::patch::ReadShard)).
#[derive(Debug)]
pub enum PublishedFile {
    /// On disk; a name ending in `.gz` is read uncompressed.
    Path(PathBuf),
    /// In memory: a publish a test keeps there.
    Bytes(Vec<u8>),
}

impl PublishedFile {
    /// Reads the whole file into `buf`, whose old contents it overwrites; its bytes are `buf`
    /// from the offset returned on. `None` when it cannot be read.
    pub fn read(&self, buf: &mut Vec<u8>) -> Option<usize> {
        match self {
            Self::Path(path) => read_file(path, buf),
            Self::Bytes(bytes) => {
                buf.clear();
                buf.extend_from_slice(bytes);
                Some(0)
            }
        }
    }

    /// Opens the file to be read front to back ([`Windows::start`]); its length.
    fn open(&self) -> io::Result<(Source, u64)> {
        let path = match self {
            Self::Bytes(bytes) => {
                let len = bytes.len() as u64;
                return Ok((Source::Other(Box::new(io::Cursor::new(bytes.clone()))), len));
            }
            Self::Path(path) => path,
        };
        let file = fs::File::open(path)?;
        if compressed(path) {
            let plain = flate2::read::GzDecoder::new(io::BufReader::new(file));
            return Ok((Source::Other(Box::new(plain)), u64::MAX));
        }
        let len = file.metadata()?.len();
        // As `read_whole`: large files directly, where the file system allows.
        let direct = len >= DIRECT_MIN as u64 && set_direct(&file, true).is_ok();
        Ok((Source::File { file, direct }, len))
    }
}

/// Where a window's bytes come from.
enum Source {
    /// A file, read with `O_DIRECT` when `direct`: every read is then of whole blocks, at a
    /// block-aligned offset, into a block-aligned window.
    File { file: fs::File, direct: bool },
    /// Anything else (a compressed file, bytes in memory).
    Other(Box<dyn Read + Send>),
}

/// How much of a file is read at once: a huge page. Direct I/O pins the window's pages for
/// every read, and each read is a request to the device; with windows of 1 MiB in small pages,
/// pinning them and the requests were most of the reading's CPU.
pub const WINDOW: usize = HUGE_PAGE;

/// Room kept before the window for the bytes of the window before that are still wanted (an
/// entry that runs across the window's end); grown when an entry is longer.
const CARRY: usize = 64 << 10;

/// A file read front to back a window at a time, into a buffer kept from file to file. The
/// bytes read and still kept are `bytes()[kept()..]`; the caller keeps positions into
/// [`Windows::bytes`], and [`Windows::fill`] says where they are after it.
pub struct Windows {
    /// Mapped at the first file ([`Windows::start`]).
    map: Option<memmap2::MmapMut>,
    /// Where the window starts in `map`: aligned to a huge page, after at least `carry` bytes
    /// of room; `size` bytes long ([`WINDOW`]).
    window: usize,
    carry: usize,
    size: usize,
    /// The bytes read and kept: `map[kept..end]`.
    kept: usize,
    end: usize,
    source: Option<Source>,
    /// Bytes read of the file so far.
    read: u64,
    /// Whether the file's end was read.
    eof: bool,
}

impl std::fmt::Debug for Windows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Windows")
            .field("read", &self.read)
            .field("eof", &self.eof)
            .finish_non_exhaustive()
    }
}

impl Default for Windows {
    fn default() -> Self {
        Self::new()
    }
}

/// Anonymous memory with at least `carry` bytes of room before a window of `size` aligned to a
/// huge page (advised as one: only advice, memory as usual where refused), and where the window
/// starts in it. A test's smaller window is aligned to a block only, so that the room is
/// `carry` exactly.
fn room(carry: usize, size: usize) -> io::Result<(memmap2::MmapMut, usize)> {
    let align = if size >= HUGE_PAGE { HUGE_PAGE } else { BLOCK };
    let map = memmap2::MmapMut::map_anon(carry + size + align)?;
    let base = map.as_ptr().addr();
    let window = (base + carry).next_multiple_of(align) - base;
    if align == HUGE_PAGE {
        let _ = map.advise_range(memmap2::Advice::HugePage, window, size);
    }
    Ok((map, window))
}

impl Windows {
    /// A reader with no file yet.
    pub fn new() -> Self {
        Self::with_window(WINDOW)
    }

    /// A reader with windows of `size` bytes, a multiple of 4096 (a test's, smaller than
    /// [`WINDOW`]).
    pub(crate) fn with_window(size: usize) -> Self {
        assert!(
            size > 0 && size.is_multiple_of(BLOCK),
            "a window of whole blocks"
        );
        Self {
            map: None,
            window: 0,
            carry: CARRY,
            size,
            kept: 0,
            end: 0,
            source: None,
            read: 0,
            eof: true,
        }
    }

    /// Starts reading `file` from its start, forgetting the one before; its length (as the
    /// file system gives it; `u64::MAX` for a compressed file).
    ///
    /// # Errors
    ///
    /// The OS's error when the file cannot be opened, or no memory mapped for the window.
    pub fn start(&mut self, file: &PublishedFile) -> io::Result<u64> {
        if self.map.is_none() {
            let (map, window) = room(self.carry, self.size)?;
            (self.map, self.window) = (Some(map), window);
        }
        let (source, len) = file.open()?;
        (self.source, self.read, self.eof) = (Some(source), 0, false);
        (self.kept, self.end) = (self.window, self.window);
        Ok(len)
    }

    /// The buffer up to the last byte read; what is kept of it is from [`Windows::kept`] on.
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().map_or(&[], |map| &map[..self.end])
    }

    /// Where the bytes kept start in [`Windows::bytes`].
    pub fn kept(&self) -> usize {
        self.kept
    }

    /// Whether the file was read to its end.
    pub fn eof(&self) -> bool {
        self.eof
    }

    /// Bytes read of the file so far.
    pub fn read(&self) -> u64 {
        self.read
    }

    /// Whether the file is being read with direct I/O.
    #[cfg(test)]
    fn direct(&self) -> bool {
        matches!(self.source, Some(Source::File { direct: true, .. }))
    }

    /// Reads the next window of the file, keeping the bytes from `keep` on (a position in
    /// [`Windows::bytes`]) just before it; nothing is read past the file's end. Returns where
    /// `keep` is now (a position `p` after it moved to `p - keep` past that) and where the new
    /// bytes start.
    ///
    /// # Errors
    ///
    /// The OS's error when the file cannot be read, or no memory mapped for a longer entry.
    pub fn fill(&mut self, keep: usize) -> io::Result<(usize, usize)> {
        let Some(map) = &mut self.map else {
            return Err(io::Error::other("no file started"));
        };
        let keep = keep.clamp(self.kept, self.end);
        let tail = self.end - keep;
        if tail > self.window {
            // An entry longer than the room: memory with room for it, for this file and the
            // next.
            let carry = tail.next_multiple_of(BLOCK).max(2 * self.carry);
            let (mut bigger, window) = room(carry, self.size)?;
            bigger[window - tail..window].copy_from_slice(&map[keep..self.end]);
            (*map, self.window, self.carry) = (bigger, window, carry);
        } else {
            map.copy_within(keep..self.end, self.window - tail);
        }
        (self.kept, self.end) = (self.window - tail, self.window);
        if !self.eof {
            let n = self.read_window()?;
            self.end += n;
            self.read += n as u64;
        }
        Ok((self.kept, self.window))
    }

    /// Fills the window from the file; the bytes read.
    fn read_window(&mut self) -> io::Result<usize> {
        let size = self.size;
        let (Some(map), Some(source)) = (&mut self.map, &mut self.source) else {
            self.eof = true;
            return Ok(0);
        };
        let window = &mut map[self.window..self.window + size];
        let mut n = 0;
        while n < size {
            let got = match source {
                Source::File { file, direct } => match file.read(&mut window[n..]) {
                    // Refused at the read: on without direct I/O, from where it stopped (every
                    // read before was of whole blocks).
                    Err(e) if *direct && e.kind() == io::ErrorKind::InvalidInput => {
                        *direct = false;
                        set_direct(file, false)?;
                        continue;
                    }
                    Ok(got) if *direct && got % BLOCK != 0 => {
                        // A direct read that ends off a block boundary reached the end (another
                        // would start unaligned).
                        n += got;
                        self.eof = true;
                        break;
                    }
                    read => read,
                },
                Source::Other(reader) => reader.read(&mut window[n..]),
            };
            match got {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(got) => n += got,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads `file` whole through `windows`, keeping the last `keep` bytes read each time the
    /// window is refilled.
    fn read_through(windows: &mut Windows, file: &PublishedFile, keep: usize) -> Vec<u8> {
        let len = windows.start(file).unwrap();
        let mut out = Vec::new();
        loop {
            let from = windows.bytes().len().saturating_sub(keep);
            let kept = windows.bytes()[from.max(windows.kept())..].to_vec();
            let (at, new) = windows.fill(from).unwrap();
            // What was kept is just before the new bytes.
            assert_eq!(&windows.bytes()[at..new], &kept[..]);
            out.extend_from_slice(&windows.bytes()[new..]);
            if windows.eof() {
                break;
            }
        }
        if len != u64::MAX {
            assert_eq!(windows.read(), len);
        }
        out
    }

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 % 251) as u8).collect()
    }

    /// Whether files in `dir` can be opened for direct I/O (not on tmpfs, for one).
    fn direct_io(dir: &std::path::Path) -> bool {
        use std::os::unix::fs::OpenOptionsExt;
        let path = dir.join("probe");
        fs::write(&path, [0; BLOCK]).unwrap();
        let direct = rustix::fs::OFlags::DIRECT.bits() as i32;
        fs::OpenOptions::new()
            .read(true)
            .custom_flags(direct)
            .open(&path)
            .is_ok()
    }

    #[test]
    fn files_on_disk_read_in_windows_are_their_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let direct = direct_io(dir.path());
        let mut windows = Windows::new();
        // Small (read as usual), large (directly where the file system allows), of whole
        // blocks and not (a last direct read short of a block), of whole windows, and empty.
        for len in [0, 10, BLOCK, DIRECT_MIN + 5, 3 * WINDOW, 3 * WINDOW + 4097] {
            let path = dir.path().join(format!("f{len}.xml"));
            fs::write(&path, pattern(len)).unwrap();
            let file = PublishedFile::Path(path);
            assert_eq!(read_through(&mut windows, &file, 0), pattern(len), "{len}");
            if len >= DIRECT_MIN {
                assert_eq!(windows.direct(), direct, "{len}");
            }
        }
    }

    #[test]
    fn a_file_that_refuses_direct_reads_is_read_as_usual_from_where_it_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = pattern(2 * WINDOW + 100);
        let path = dir.path().join("f.xml");
        fs::write(&path, &bytes).unwrap();
        let mut windows = Windows::with_window(BLOCK);
        windows.start(&PublishedFile::Path(path)).unwrap();
        assert_eq!(windows.direct(), direct_io(dir.path()));
        let mut read = windows.bytes()[windows.kept()..].to_vec();
        let (_, new) = windows.fill(windows.bytes().len()).unwrap();
        read.extend_from_slice(&windows.bytes()[new..]);
        // The window moved off its alignment: a direct read there is refused (EINVAL).
        windows.window += 1;
        while !windows.eof() {
            let (_, new) = windows.fill(windows.bytes().len()).unwrap();
            read.extend_from_slice(&windows.bytes()[new..]);
        }
        assert!(!windows.direct());
        assert_eq!(read, bytes);
    }

    #[test]
    fn kept_bytes_stay_before_the_new_window_and_room_grows_for_them() {
        let bytes = pattern(5 * WINDOW + 123);
        let file = PublishedFile::Bytes(bytes.clone());
        let mut windows = Windows::new();
        windows.start(&file).unwrap();
        let (_, new) = windows.fill(0).unwrap();
        assert_eq!(&windows.bytes()[new..], &bytes[..WINDOW]);
        // Keep more than the room before the window (the last): the room grows, the bytes
        // stay in order.
        for (i, keep) in [10, CARRY + 1, HUGE_PAGE + CARRY].into_iter().enumerate() {
            let from = windows.bytes().len() - keep;
            let (at, new) = windows.fill(from).unwrap();
            let read = (i + 1) * WINDOW;
            assert_eq!(&windows.bytes()[at..], &bytes[read - keep..read + WINDOW]);
            assert_eq!((windows.kept(), new - at), (at, keep));
        }
        assert_eq!(windows.read(), 4 * WINDOW as u64);
    }

    #[test]
    fn a_compressed_file_is_read_plain() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sitemap-1.xml.gz");
        let bytes = pattern(2 * WINDOW + 9);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&bytes).unwrap();
        fs::write(&path, gz.finish().unwrap()).unwrap();
        let mut windows = Windows::new();
        assert_eq!(
            read_through(&mut windows, &PublishedFile::Path(path), 7),
            bytes
        );
    }
}
