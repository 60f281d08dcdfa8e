//! What a state backend implements: the calls [`super::Store`] hands to it. Each backend reads
//! and writes its own tables; what a harvested page does to them is decided once, for all, by
//! [`super::page::decide`], and the state document is `persisted.rs`'s JSON on every backend.

use std::collections::HashSet;

use oai_bridge_files::published::SharedUrl;
use oai_pmh::Record;

use super::{Counts, Place, State, StoreError};

/// A caller stopped a reading ([`Backend::dirty`], [`Backend::for_each_live`]): the caller
/// keeps its own error ([`super::Store::dirty`]).
#[derive(Debug)]
pub(crate) struct Stopped;

/// A reading's callback: `Err(Stopped)` stops it.
pub(crate) type Visit<'f, T> = &'f mut dyn FnMut(T) -> Result<(), Stopped>;

/// One repository's store on a backend (SQLite's file, PostgreSQL's rows). Every method means
/// what [`super::Store`]'s of the same name says, the same on every backend (the
/// differential tests hold them to it). `Any`, so that the tests of a backend's tables reach it.
pub(crate) trait Backend: std::any::Any + std::fmt::Debug + Send {
    /// Where the store is, as errors and logs name it.
    fn place(&self) -> Place;

    /// [`super::Store::fit_pages`]: a backend whose pages are its own does nothing.
    fn fit_pages(&mut self, _size: i64) {}

    /// [`super::Store::state`].
    fn state(&self) -> Result<State, StoreError>;

    /// [`super::Store::save_state`].
    fn save_state(&mut self, state: &State) -> Result<(), StoreError>;

    /// [`super::Store::reset`].
    fn reset(&mut self, state: &State) -> Result<(), StoreError>;

    /// [`super::Store::apply_page`]: reads what the store holds of the page's records
    /// ([`super::page::Held`]), decides the page with [`super::page::decide`], and writes the
    /// decision with the page's checkpoint, in one transaction.
    fn apply_page(
        &mut self,
        run: u64,
        records: &[Record],
        state: &State,
        track: bool,
    ) -> Result<(), StoreError>;

    /// [`super::Store::finish_run`].
    fn finish_run(
        &mut self,
        full: bool,
        sweep: Option<u64>,
        state: &State,
    ) -> Result<u64, StoreError>;

    /// [`super::Store::dirty`], each change handed to `f` as (now, before).
    fn dirty(
        &self,
        f: Visit<'_, (Record, Option<Record>)>,
    ) -> Result<Result<(), Stopped>, StoreError>;

    /// [`super::Store::for_each_live`].
    fn for_each_live(&self, f: Visit<'_, Record>) -> Result<Result<(), Stopped>, StoreError>;

    /// [`super::Store::rejected`].
    fn rejected(&self) -> Result<u64, StoreError>;

    /// [`super::Store::rejected_examples`].
    fn rejected_examples(&self, n: usize) -> Result<Vec<String>, StoreError>;

    /// [`super::Store::deleted_examples`].
    fn deleted_examples(&self, n: usize) -> Result<Vec<String>, StoreError>;

    /// [`super::Store::changed`].
    fn changed(&self) -> Result<u64, StoreError>;

    /// [`super::Store::shared_urls`].
    fn shared_urls(&self, limit: u64) -> Result<Option<HashSet<String>>, StoreError>;

    /// [`super::Store::shared`].
    fn shared(&self, url: &str) -> Result<Option<SharedUrl>, StoreError>;

    /// [`super::Store::published`].
    fn published(
        &mut self,
        state: &State,
        shared: &[SharedUrl],
        replace: bool,
    ) -> Result<(), StoreError>;

    /// [`super::Store::verify`].
    fn verify(&self) -> Result<(), StoreError>;

    /// [`super::Store::counts`].
    fn counts(&self) -> Result<Counts, StoreError>;

    /// [`super::Store::live`].
    fn live(&self) -> Result<u64, StoreError>;

    /// [`super::Store::deleted`].
    fn deleted(&self) -> Result<u64, StoreError>;
}
