//! Big stored files reach the socket with sendfile(2), from the page cache, as nginx sends them.
//!
//! Why (issue 30, measured in benches/serve with a 50,000-URL shard, 629,687 bytes gzipped):
//! the body already reached the socket in one `writev` per response, head and body together,
//! and the client made the same system calls for ours as for nginx's (77 `read`s of 8 KiB and
//! 76 `ioctl`s per response, for both). The difference was the copies. A `writev` copies the
//! body into fresh socket buffers on the server's core (about 50 µs of the server's 118 µs per
//! response against nginx's 62-77 µs in all), and the client then copies those buffers out,
//! cold in its cache: its `_copy_to_iter` took about 65 µs per response against 26 µs for
//! nginx's, whose `sendfile` hands the socket the same page-cache pages for every response,
//! pages that stay warm in the client's cache. Loopback is where this shows (over a network the
//! client's copy is from its own receive buffers either way), and loopback is where the
//! benchmark and many reverse proxies run.
//!
//! hyper writes bodies through [`hyper::rt::Write`] and knows nothing of files, so the decision
//! is made one level down: [`FileBodies::read`] keeps the file it read a big body from open and
//! registers the body's memory, and [`Connection`], the socket hyper writes to, sends any slice
//! that lies in a registered body with `sendfile` from that file at the same offset instead of
//! copying it. The bytes are the same because a generation's files are never written after
//! it is published (ARCHITECTURE.md's serve invariants); whatever is not registered (heads,
//! small files, HTTP/2's frames, which h2 copies into buffers of its own) is written as before.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, IoSlice, Read};
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use rustix::net::{SendAncillaryBuffer, SendFlags};
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

/// Files from this size up are sent with `sendfile`: below it the copy costs less than the
/// registration and the extra system call for the head.
pub(crate) const MIN_BYTES: usize = 64 * 1024;

/// The bodies that may be sent from their files, by the address of their first byte. An entry
/// lives exactly as long as its body's memory ([`Owner`]'s `Drop` removes it before the memory
/// is freed), so an address found here is always the registered body's and never a later
/// allocation's at the same place.
///
/// Each entry keeps its file open, and the cache may hold thousands of big files (256 MiB of
/// 64 KiB ones is 4,096), so the entries are bounded by `max_open`: past it a big body is kept
/// as a small one is, and copied when sent. Connections need descriptors too.
#[derive(Debug, Clone)]
pub(crate) struct FileBodies {
    registered: Arc<Mutex<BTreeMap<usize, Registered>>>,
    max_open: usize,
}

/// A registered body: its length and the file its bytes were read from.
#[derive(Debug)]
struct Registered {
    len: usize,
    file: Arc<File>,
}

impl FileBodies {
    /// Registered bodies keep at most a quarter of the process's open-file limit open, after
    /// raising its soft limit to the hard one (as nginx's `worker_rlimit_nofile` and Go's
    /// runtime do: the soft limit is often 1,024 where the hard one is far higher).
    pub(crate) fn new() -> Self {
        use rustix::process::{Resource, getrlimit, setrlimit};
        let mut limit = getrlimit(Resource::Nofile);
        if limit.current != limit.maximum {
            let raised = rustix::process::Rlimit {
                current: limit.maximum,
                ..limit
            };
            if setrlimit(Resource::Nofile, raised).is_ok() {
                limit = getrlimit(Resource::Nofile);
            }
        }
        // `None` is unlimited; a quarter of a million files is more than any cache holds.
        let open = limit.current.unwrap_or(1 << 20);
        Self::with_max_open(usize::try_from(open / 4).unwrap_or(usize::MAX))
    }

    fn with_max_open(max_open: usize) -> Self {
        Self {
            registered: Arc::default(),
            max_open,
        }
    }

    /// The bytes of the file at `path`; from [`MIN_BYTES`] up, registered with the file kept
    /// open, so that [`Connection`] sends them from the file. Blocking: call it off the runtime.
    pub(crate) fn read(&self, path: &Path) -> io::Result<Bytes> {
        let mut file = File::open(path)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        if bytes.len() < MIN_BYTES {
            return Ok(Bytes::from(bytes));
        }
        let mut registered = self.lock();
        if registered.len() >= self.max_open {
            return Ok(Bytes::from(bytes));
        }
        registered.insert(
            bytes.as_ptr() as usize,
            Registered {
                len: bytes.len(),
                file: Arc::new(file),
            },
        );
        drop(registered);
        Ok(Bytes::from_owner(Owner {
            bytes,
            bodies: self.clone(),
        }))
    }

    /// The file and offset `slice` was read from, when it lies within a registered body.
    /// Slices shorter than [`MIN_BYTES`] (heads, small files, the end of a big body that a
    /// short write left) are not looked up: copied, they cost less than the lock, which every
    /// connection's writes share.
    fn find(&self, slice: &[u8]) -> Option<(Arc<File>, u64)> {
        if slice.len() < MIN_BYTES {
            return None;
        }
        let at = slice.as_ptr() as usize;
        let map = self.lock();
        let (start, body) = map.range(..=at).next_back()?;
        let offset = at - start;
        (offset + slice.len() <= body.len).then(|| (Arc::clone(&body.file), offset as u64))
    }

    /// Bodies registered now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<usize, Registered>> {
        // The map is consistent after any panic: each change is one insert or one remove.
        self.registered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Owns a registered body's memory and unregisters it when the last [`Bytes`] of it is dropped.
struct Owner {
    bytes: Vec<u8>,
    bodies: FileBodies,
}

impl AsRef<[u8]> for Owner {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        self.bodies.lock().remove(&(self.bytes.as_ptr() as usize));
    }
}

/// A TCP connection whose writes send registered bodies ([`FileBodies`]) with `sendfile`.
#[derive(Debug)]
pub(crate) struct Connection {
    tcp: TcpStream,
    bodies: FileBodies,
}

impl Connection {
    /// `tcp`, sending the bodies registered in `bodies` from their files.
    pub(crate) fn new(tcp: TcpStream, bodies: FileBodies) -> Self {
        Self { tcp, bodies }
    }

    /// Runs the non-blocking `write` when the socket is writable, as tokio's own writes do.
    fn poll_io(
        &self,
        cx: &mut Context<'_>,
        mut write: impl FnMut() -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.tcp.poll_write_ready(cx))?;
            match self.tcp.try_io(Interest::WRITABLE, &mut write) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                done => return Poll::Ready(done),
            }
        }
    }
}

impl AsyncRead for Connection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        // Empty slices in front would make the head's write below write nothing, forever.
        let bufs = &bufs[bufs.iter().take_while(|b| b.is_empty()).count()..];
        let found = bufs
            .iter()
            .enumerate()
            .find_map(|(i, buf)| self.bodies.find(buf).map(|f| (i, f)));
        match found {
            None => Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs),
            // What comes before the body (the head), with MSG_MORE, so that it leaves in one
            // segment with the body's start rather than in a small one of its own (nginx's
            // `tcp_nopush`); hyper writes the rest next.
            Some((i, _)) if i > 0 => self.poll_io(cx, || {
                let flags = SendFlags::MORE | SendFlags::NOSIGNAL;
                let mut control = SendAncillaryBuffer::default();
                Ok(rustix::net::sendmsg(
                    &self.tcp,
                    &bufs[..i],
                    &mut control,
                    flags,
                )?)
            }),
            Some((_, (file, offset))) => {
                let len = bufs[0].len();
                let sent = ready!(self.poll_io(cx, || {
                    let mut at = offset;
                    Ok(rustix::fs::sendfile(&self.tcp, &*file, Some(&mut at), len)?)
                }))?;
                if sent == 0 {
                    // The file ended early (cut short by hand): the bytes in memory are the
                    // ones its ETag names, so they are written instead.
                    return Pin::new(&mut self.tcp).poll_write(cx, &bufs[0]);
                }
                Poll::Ready(Ok(sent))
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Bytes that differ at every offset, so that a wrong offset shows.
    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    #[test]
    fn big_bodies_are_registered_while_alive_and_small_ones_never() {
        let dir = tempfile::tempdir().unwrap();
        let bodies = FileBodies::with_max_open(4);
        let small = dir.path().join("small");
        std::fs::write(&small, pattern(MIN_BYTES - 1)).unwrap();
        let read = bodies.read(&small).unwrap();
        assert_eq!(read, pattern(MIN_BYTES - 1));
        assert_eq!(bodies.len(), 0);
        assert!(bodies.find(&read).is_none());

        let big = dir.path().join("big");
        std::fs::write(&big, pattern(3 * MIN_BYTES)).unwrap();
        let read = bodies.read(&big).unwrap();
        assert_eq!(read, pattern(3 * MIN_BYTES));
        assert_eq!(bodies.find(&read).map(|(_, at)| at), Some(0));
        assert_eq!(bodies.find(&read[1000..]).map(|(_, at)| at), Some(1000));
        assert!(bodies.find(&read[..0]).is_none());
        assert!(bodies.find(&pattern(10)).is_none());
        let clone = read.slice(5..);
        drop(read);
        assert_eq!(bodies.len(), 1, "a clone keeps the body registered");
        drop(clone);
        assert_eq!(bodies.len(), 0);
    }

    #[test]
    fn past_max_open_big_bodies_are_kept_unregistered() {
        let dir = tempfile::tempdir().unwrap();
        let bodies = FileBodies::with_max_open(2);
        let big = dir.path().join("big");
        std::fs::write(&big, pattern(MIN_BYTES)).unwrap();
        let kept: Vec<Bytes> = (0..3).map(|_| bodies.read(&big).unwrap()).collect();
        assert_eq!(bodies.len(), 2);
        assert!(kept.iter().all(|b| *b == pattern(MIN_BYTES)));
        assert!(
            bodies.find(&kept[2]).is_none(),
            "the third is copied when sent"
        );
        drop(kept);
        assert_eq!(bodies.len(), 0);
        bodies.read(&big).unwrap();
        assert_eq!(bodies.len(), 0, "dropped at once: nothing holds it");
    }

    /// What the client reads is what it would read from a plain socket: head, then the body
    /// from the file, from any offset hyper resumes at, with bytes before and after it.
    #[tokio::test]
    async fn what_is_sent_from_the_file_is_the_body() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shard.xml.gz");
        let expected_body = pattern(5 * MIN_BYTES + 17);
        std::fs::write(&path, &expected_body).unwrap();
        let bodies = FileBodies::with_max_open(4);
        let body = bodies.read(&path).unwrap();

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::spawn(async move {
            let mut tcp = TcpStream::connect(addr).await.unwrap();
            let mut all = Vec::new();
            tcp.read_to_end(&mut all).await.unwrap();
            all
        });
        let (tcp, _) = listener.accept().await.unwrap();
        let mut conn = Connection::new(tcp, bodies.clone());
        let head = b"HTTP/1.1 200 OK\r\n\r\n";
        // Head and body in one vectored write, as hyper queues them; then the body again
        // from an offset, then a plain tail.
        let mut parts = [Bytes::from_static(head), body.clone(), body.slice(12_345..)];
        for part in &mut parts {
            while !part.is_empty() {
                let n = conn.write(part).await.unwrap();
                bytes::Buf::advance(part, n);
            }
        }
        let mut vectored = [&head[..], &body[..]];
        let mut left = head.len() + body.len();
        while left > 0 {
            let slices: Vec<_> = vectored.iter().map(|s| IoSlice::new(s)).collect();
            let mut n = conn.write_vectored(&slices).await.unwrap();
            left -= n;
            for s in &mut vectored {
                let take = n.min(s.len());
                *s = &s[take..];
                n -= take;
            }
        }
        conn.write_all(b"tail").await.unwrap();
        conn.shutdown().await.unwrap();
        drop(conn);

        let mut expected = head.to_vec();
        expected.extend_from_slice(&expected_body);
        expected.extend_from_slice(&expected_body[12_345..]);
        expected.extend_from_slice(head);
        expected.extend_from_slice(&expected_body);
        expected.extend_from_slice(b"tail");
        let got = client.await.unwrap();
        assert_eq!(got.len(), expected.len());
        assert!(
            got == expected,
            "the bytes read differ from the bytes written"
        );
    }
}
