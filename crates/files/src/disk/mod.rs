//! The crate's one part that touches the file system: the spill folders a harvest's temporary
//! files go in, with the memory and disk they may take ([`spill`]), the profiles' temporary
//! files in them (shard files, the CDIF documents' file, their reader: [`profiles`]), and the
//! writers a publish puts its files on disk with: a staging folder swapped in as a whole,
//! direct I/O for large files, files streamed front to back ([`mod@write`]). What the files
//! hold is the rest of the crate's (bytes in memory); these only write and read them back.
//!
//! Errors: [`FilesError::Spill`](crate::FilesError::Spill) for a spill file,
//! [`FilesError::Io`](crate::FilesError::Io) for a file or folder of a publish,
//! [`FilesError::ShardFile`](crate::FilesError::ShardFile) and
//! [`FilesError::CdifSpill`](crate::FilesError::CdifSpill) for the profiles' files.

pub mod profiles;
pub mod read;
pub mod spill;
pub mod write;
