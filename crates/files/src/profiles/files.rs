//! The files of a generation: the [`FileSink`] that receives them, whatever it is (an export's
//! staging folder, the gateway's next generation), and the numbered shards of one index, which
//! every profile writes the same way.

use std::io::Write as _;

use flate2::Compression;
use flate2::write::GzEncoder;
use oai_pmh::Datestamp;
use url::Url;

use crate::Shard;
use crate::disk::write::{FileStream, Staging};
use crate::sitemap::render_index;

use super::Profile;
use crate::FilesError;
use crate::disk::profiles::ProfileShard;

/// Receives the files of a generation.
pub trait FileSink {
    /// What storing a file fails with: the files crate's own errors (a shard's index, a
    /// profile's temporary file) convert into it, so a collector's error is its sink's.
    type Error: From<FilesError>;

    /// Stores one file.
    ///
    /// # Errors
    ///
    /// When the file cannot be stored: the sink says why.
    fn put(&mut self, name: &str, bytes: &[u8]) -> Result<(), Self::Error>;

    /// Stores one metadata document (`cdif/<hash>.jsonld`) with its record's datestamp. By
    /// default it is a file like any other; the server's sink packs them, as there is one per
    /// record.
    ///
    /// # Errors
    ///
    /// As [`FileSink::put`].
    fn put_document(
        &mut self,
        name: &str,
        bytes: &[u8],
        lastmod: Option<Datestamp>,
    ) -> Result<(), Self::Error> {
        let _ = lastmod;
        self.put(name, bytes)
    }

    /// Stores the shard `name` (uncompressed: not `.gz`) that is already written out, whole, as
    /// the file at `path`, by linking that file into place instead of writing its bytes again;
    /// `false` when this sink does not or cannot, and the caller puts the bytes. The file is
    /// not changed afterwards.
    fn link_shard(&mut self, name: &str, path: &std::path::Path) -> bool {
        let _ = (name, path);
        false
    }

    /// Stores one shard, given uncompressed; `name` ends in `.xml.gz` when the job gzips.
    /// By default the shard is stored as named (gzipped for `.gz`); the server's sink overrides
    /// this to keep the plain bytes as well, because it answers both spellings.
    ///
    /// Returns when the shard last changed, if the sink knows (the server's, from the
    /// generation before): the index lists the shard with that `lastmod` (SM-10: when the file
    /// changed), not its newest entry's, which a deleted entry does not move. `None` here.
    ///
    /// # Errors
    ///
    /// As [`FileSink::put`].
    fn put_shard(&mut self, name: &str, xml: &[u8]) -> Result<Option<Datestamp>, Self::Error> {
        if name.ends_with(".gz") {
            self.put(name, &gzip(xml))?;
        } else {
            self.put(name, xml)?;
        }
        Ok(None)
    }

    /// The name the shard just stored as `name` is listed under in its index: `name` itself,
    /// unless the sink publishes shards under names of their own. A bucket's sink names them
    /// after their content (`sitemap-1-<hash>.xml`, [`content_name`](crate::profiles::content_name)), so that a new shard
    /// never overwrites one that the index before it names: the index switches to the new
    /// shards at once, in one upload.
    ///
    /// # Errors
    ///
    /// When the sink cannot name the shard after its content (it cannot read it back).
    fn listed_name(&mut self, name: String) -> Result<String, Self::Error> {
        Ok(name)
    }

    /// Opens the shard `name` (plain `.xml` or a list, never `.gz`) to be written front to
    /// back, when this sink writes files as they come: a shard made as the files it comes from
    /// are read is then never whole in memory, nor copied again to be written. `None`: the
    /// caller gathers the bytes and puts them.
    ///
    /// # Errors
    ///
    /// When the file cannot be created.
    fn stream(&mut self, name: &str) -> Result<Option<FileStream>, Self::Error> {
        let _ = name;
        Ok(None)
    }

    /// Ends the stream this sink opened as `name` ([`FileSink::stream`]); the file's length and
    /// CRC-32. Nothing is recorded of it ([`FileSink::shard_stored`]): the caller does.
    ///
    /// # Errors
    ///
    /// When the stream cannot be flushed or the file closed.
    fn end_stream(&mut self, name: &str, stream: FileStream) -> Result<(u64, u32), Self::Error> {
        let _ = (name, stream);
        unreachable!("a sink ends only the streams it opened")
    }

    /// Reads the file ended as `name` ([`FileSink::end_stream`]) back into `buf` (its bytes
    /// from the offset returned on) and takes it out: it is not to be published as it stands.
    ///
    /// # Errors
    ///
    /// When the file cannot be read back or removed.
    fn take_back(&mut self, name: &str, buf: &mut Vec<u8>) -> Result<usize, Self::Error> {
        let _ = (name, buf);
        unreachable!("a sink takes back only the streams it opened")
    }

    /// Whether the profiles' ledger ([`super::ledger`]) is stored with the files: not by a
    /// sink whose files are never patched, as a bucket's export (its files are uploaded, and
    /// the ledger would be too).
    fn keeps_ledger(&self) -> bool {
        true
    }

    /// Whether the sink records each shard [`Shards`] stores ([`FileSink::shard_stored`]): a
    /// render from the store does, for the profiles' ledger ([`super::ledger`]).
    fn records_shards(&self) -> bool {
        false
    }

    /// A shard was stored as `name`: `len` plain bytes whose [`super::ledger::hash`] is `hash`.
    fn shard_stored(&mut self, name: &str, len: u64, hash: u64) {
        let _ = (name, len, hash);
    }
}

/// An export's staging folder ([`Staging`]): every file written into it as it comes; a shard
/// file linked rather than copied, a file streamed rather than gathered.
impl FileSink for Staging {
    type Error = FilesError;

    fn put(&mut self, name: &str, bytes: &[u8]) -> Result<(), FilesError> {
        self.write(name, bytes)
    }

    fn link_shard(&mut self, name: &str, path: &std::path::Path) -> bool {
        self.link(name, path)
    }

    fn stream(&mut self, name: &str) -> Result<Option<FileStream>, FilesError> {
        Staging::stream(self, name).map(Some)
    }

    fn end_stream(&mut self, name: &str, stream: FileStream) -> Result<(u64, u32), FilesError> {
        Staging::end_stream(self, name, stream)
    }

    fn take_back(&mut self, name: &str, buf: &mut Vec<u8>) -> Result<usize, FilesError> {
        Staging::take_back(self, name, buf)
    }
}

/// A sink that records every shard stored through it ([`FileSink::shard_stored`]), for the
/// profiles' ledger; everything else is the inner sink's.
pub struct Recording<'s, S> {
    /// The sink the files go to.
    pub inner: &'s mut S,
    /// Each shard stored, in the order stored.
    pub files: Vec<super::ledger::FileRecord>,
}

impl<'s, S: FileSink> Recording<'s, S> {
    /// A sink recording what is stored through it into `inner`.
    pub fn new(inner: &'s mut S) -> Self {
        Self {
            inner,
            files: Vec::new(),
        }
    }
}

impl<S: FileSink> FileSink for Recording<'_, S> {
    type Error = S::Error;

    fn put(&mut self, name: &str, bytes: &[u8]) -> Result<(), Self::Error> {
        self.inner.put(name, bytes)
    }

    fn put_document(
        &mut self,
        name: &str,
        bytes: &[u8],
        lastmod: Option<Datestamp>,
    ) -> Result<(), Self::Error> {
        self.inner.put_document(name, bytes, lastmod)
    }

    fn link_shard(&mut self, name: &str, path: &std::path::Path) -> bool {
        self.inner.link_shard(name, path)
    }

    fn put_shard(&mut self, name: &str, xml: &[u8]) -> Result<Option<Datestamp>, Self::Error> {
        self.inner.put_shard(name, xml)
    }

    fn listed_name(&mut self, name: String) -> Result<String, Self::Error> {
        self.inner.listed_name(name)
    }

    fn stream(&mut self, name: &str) -> Result<Option<FileStream>, Self::Error> {
        self.inner.stream(name)
    }

    fn end_stream(&mut self, name: &str, stream: FileStream) -> Result<(u64, u32), Self::Error> {
        self.inner.end_stream(name, stream)
    }

    fn take_back(&mut self, name: &str, buf: &mut Vec<u8>) -> Result<usize, Self::Error> {
        self.inner.take_back(name, buf)
    }

    fn records_shards(&self) -> bool {
        true
    }

    fn shard_stored(&mut self, name: &str, len: u64, hash: u64) {
        self.files.push(super::ledger::FileRecord {
            name: name.to_owned(),
            len,
            hash,
        });
    }
}

/// The shards of one index, named `{prefix}-{n}.{ext}` as they are written; then the index.
pub struct Shards<'a> {
    public_url: &'a Url,
    /// The profile whose shards they are; `None` for CDIF's metadata lists.
    profile: Option<Profile>,
    ext: &'a str,
    /// The shards' names, in index order.
    pub names: Vec<String>,
    /// Each shard's URL and when it last changed, in index order.
    pub entries: Vec<(String, Option<Datestamp>)>,
}

impl<'a> Shards<'a> {
    /// The shards of `profile`'s index, with extension `ext` (`xml`; the sitemap's may be
    /// `xml.gz`).
    pub fn new(public_url: &'a Url, profile: Profile, ext: &'a str) -> Self {
        Self {
            public_url,
            profile: Some(profile),
            ext,
            names: Vec::new(),
            entries: Vec::new(),
        }
    }

    /// CDIF's metadata lists (`cdif-list-{n}.jsonld`): numbered as shards are, listed by a
    /// sitemap of their own rather than an index.
    pub(crate) fn lists(public_url: &'a Url) -> Self {
        Self {
            profile: None,
            ..Self::new(public_url, Profile::CdifList, "jsonld")
        }
    }

    /// Stores the next shard.
    ///
    /// # Errors
    ///
    /// What the sink fails with.
    pub fn put<S: FileSink>(&mut self, sink: &mut S, shard: &Shard) -> Result<(), S::Error> {
        let number = self.names.len() as u32 + 1;
        self.put_numbered(sink, number, shard)
    }

    /// The name of shard `number`.
    pub(crate) fn name(&self, number: u32) -> String {
        match self.profile {
            Some(profile) => profile.shard_name(number, self.ext),
            None => Profile::list_name(number),
        }
    }

    /// Stores shard `number`.
    ///
    /// # Errors
    ///
    /// What the sink fails with.
    pub fn put_numbered<S: FileSink>(
        &mut self,
        sink: &mut S,
        number: u32,
        shard: &Shard,
    ) -> Result<(), S::Error> {
        let name = self.name(number);
        let changed = sink.put_shard(&name, &shard.bytes)?;
        if sink.records_shards() {
            let hash = super::ledger::hash(&shard.bytes);
            sink.shard_stored(&name, shard.bytes.len() as u64, hash);
        }
        self.listed(sink, name, changed.or(shard.newest))
    }

    /// Stores the next shard of a landing-page profile: a shard file written during the
    /// harvest is linked into place when the sink can, else read and put.
    pub(crate) fn put_profile<S: FileSink>(
        &mut self,
        sink: &mut S,
        shard: ProfileShard<'_>,
    ) -> Result<(), S::Error> {
        let file = match shard {
            ProfileShard::Cut(shard) => return self.put(sink, shard),
            ProfileShard::File(file) => file,
        };
        let name = self.name(self.names.len() as u32 + 1);
        // The landing-page profiles' shards are plain `.xml`, as written (never gzipped).
        debug_assert!(!name.ends_with(".gz"), "{name}");
        let changed = if sink.link_shard(&name, file.path()) {
            None
        } else {
            sink.put_shard(&name, &file.read()?)?
        };
        // Hashed as it was written (and blanked).
        if let (true, Some(hash)) = (sink.records_shards(), file.hash()) {
            sink.shard_stored(&name, file.size() as u64, hash);
        }
        self.listed(sink, name, changed.or(file.newest()))
    }

    /// Opens the next shard as a stream ([`FileSink::stream`]), when the sink streams: its name
    /// and the stream, for [`Shards::end_next`].
    pub(crate) fn open_next<S: FileSink>(
        &self,
        sink: &mut S,
    ) -> Result<Option<(String, FileStream)>, S::Error> {
        let name = self.name(self.names.len() as u32 + 1);
        let stream = sink.stream(&name)?;
        Ok(stream.map(|stream| (name, stream)))
    }

    /// Stores the next shard, streamed as `name` ([`Shards::open_next`]), whose newest entry
    /// is `newest`.
    pub(crate) fn end_next<S: FileSink>(
        &mut self,
        sink: &mut S,
        (name, stream): (String, FileStream),
        newest: Option<Datestamp>,
    ) -> Result<(), S::Error> {
        let (len, crc) = sink.end_stream(&name, stream)?;
        if sink.records_shards() {
            sink.shard_stored(&name, len, u64::from(crc));
        }
        self.listed(sink, name, newest)
    }

    /// Lists the shard stored as `name` in the index, under the name `sink` gives it.
    fn listed<S: FileSink>(
        &mut self,
        sink: &mut S,
        name: String,
        newest: Option<Datestamp>,
    ) -> Result<(), S::Error> {
        let name = sink.listed_name(name)?;
        self.entries
            .push((join(self.public_url, &name).to_string(), newest));
        self.names.push(name);
        Ok(())
    }

    /// Writes the index of the shards as `index_name`, if there is any shard; its URL.
    ///
    /// # Errors
    ///
    /// What the sink fails with; an index of more shards than one index lists
    /// ([`FilesError::TooManyShards`]).
    pub fn finish<S: FileSink>(self, sink: &mut S) -> Result<Option<Url>, S::Error> {
        if self.entries.is_empty() {
            return Ok(None);
        }
        let index_name = &self
            .profile
            .expect("the lists are listed in a sitemap, not an index")
            .index_name();
        let index = render_index(self.entries.iter().map(|(loc, d)| (loc.as_str(), *d)))?;
        sink.put(index_name, &index)?;
        Ok(Some(join(self.public_url, index_name)))
    }
}

/// Gzips a file deterministically (no name, zero mtime), so equal input gives equal bytes.
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::with_capacity(bytes.len() / 8), Compression::new(6));
    encoder
        .write_all(bytes)
        .expect("writing to memory cannot fail");
    encoder.finish().expect("writing to memory cannot fail")
}

fn join(base: &Url, name: &str) -> Url {
    base.join(name)
        .expect("a file name joins onto a directory URL")
}
