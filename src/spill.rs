//! A harvest's temporary files: the spill folders, the memory a harvest holds before it writes
//! sorted runs there, and the pool the gateway's refreshes share. They are the files crate's
//! (`oai_bridge_files::disk::spill`), named here at their old paths.

pub(crate) use oai_bridge_files::disk::spill::*;
