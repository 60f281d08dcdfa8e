//! The decisions of a harvested page, pure: which version of each record the store keeps,
//! which records are rejected, what changed since the last publish and how the counts move.
//! Both backends read what they hold of the page's records, call [`decide`], and write the
//! [`Decision`] with their own statements: the rules live here alone.

use std::borrow::Borrow;
use std::collections::hash_map::Entry;
use std::hash::Hash;

// foldhash rather than std's SipHash: looked up for every record of every page, keyed by the
// upstream's identifiers but never exposed to it, where SipHash's resistance to chosen keys buys
// nothing.
pub(crate) use foldhash::HashMap;

use oai_pmh::{Datestamp, Record};

use super::encode_body;

/// A record of a page as the backends write it: its datestamp packed ([`Datestamp::pack`]), its
/// sets as one text, its body encoded (empty for a deletion or an unreadable record).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Incoming {
    pub(crate) id: String,
    pub(crate) datestamp: Option<i64>,
    pub(crate) deleted: bool,
    /// Its metadata was empty ([`Record::unreadable`]): nothing of it is stored.
    pub(crate) unreadable: bool,
    pub(crate) sets: String,
    pub(crate) body: Vec<u8>,
}

impl Incoming {
    /// `r` as the backends write it.
    pub(crate) fn of(r: &Record) -> Self {
        let unreadable = r.unreadable();
        let mut body = Vec::new();
        if !unreadable && !r.deleted {
            encode_body(r, &mut body);
        }
        Self {
            id: r.identifier.clone(),
            datestamp: r.datestamp.map(Datestamp::pack),
            deleted: r.deleted,
            unreadable,
            sets: r.sets.join("\n"),
            body,
        }
    }
}

/// A record stored before the page, as the page reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Stored {
    pub(crate) live: bool,
    pub(crate) datestamp: Option<i64>,
    /// Its body, for a change's previous version, when the backend reads it out to track
    /// changes (PostgreSQL; SQLite copies it inside the database): `None` otherwise, and the
    /// change's body is then empty.
    pub(crate) body: Option<Vec<u8>>,
}

/// What the store holds of a page's records, read before the page is decided: other
/// identifiers may be there too, and are ignored. Keyed by `K`, the identifiers as the backend
/// has them: read out of PostgreSQL (`String`), or borrowed from the page (`&str`, SQLite).
#[derive(Clone, Debug)]
pub(crate) struct Held<K = String> {
    /// Their stored versions.
    pub(crate) stored: HashMap<K, Stored>,
    /// Their rejections.
    pub(crate) rejected: HashMap<K, Rejected>,
}

impl<K> Default for Held<K> {
    fn default() -> Self {
        Self {
            stored: HashMap::default(),
            rejected: HashMap::default(),
        }
    }
}

/// A record listed as rejected: the datestamp of its unreadable version, and the run that saw
/// it last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rejected {
    pub(crate) datestamp: Option<i64>,
    pub(crate) seen: i64,
}

/// A change to list ([`super::Store::dirty`]): the version stored before the page, if any
/// (live, datestamp, body), and the page's record it is now. The changes' table keeps the
/// version of an earlier change, if it holds one (the version last published).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Change<'p> {
    pub(crate) id: &'p str,
    pub(crate) prev: Option<(bool, Option<i64>, Vec<u8>)>,
    pub(crate) now: usize,
}

/// What a page does to the store: plain data, which each backend writes with its statements.
/// Records are named by their index in the page, in page order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Decision<'p> {
    /// Records new to the store, to insert as the page has them.
    pub(crate) inserted: Vec<usize>,
    /// Records that replace the version stored before the page.
    pub(crate) updated: Vec<usize>,
    /// Records stored before and not replaced: marked seen by the run, kept as they are.
    pub(crate) kept: Vec<&'p str>,
    /// Rejections to write (new or replacing the one stored).
    pub(crate) rejected: Vec<(&'p str, Rejected)>,
    /// Rejections stored before that a readable version settled: to delete.
    pub(crate) settled: Vec<&'p str>,
    /// Changes to list (with `track`).
    pub(crate) changes: Vec<Change<'p>>,
    /// How the live count moves (with `track`).
    pub(crate) live: i64,
    /// How the deleted count moves (with `track`).
    pub(crate) deleted: i64,
}

/// The `newer` rule: a version dated `at` replaces one dated `stored` unless both are dated and
/// it is older (OAI-38): a missing datestamp on either side counts as newer, and of equal
/// datestamps the incoming one wins.
pub(crate) fn newer(at: Option<i64>, stored: Option<i64>) -> bool {
    at.is_none() || stored.is_none() || at >= stored
}

/// A record of the page as the decision goes: what is stored for it after the records before.
#[derive(Clone, Copy)]
struct Slot {
    live: bool,
    datestamp: Option<i64>,
    /// It was stored before the page.
    before: bool,
    /// The record of the page that replaced it, if one did.
    replaced: Option<usize>,
}

/// A rejection as the decision goes.
#[derive(Clone, Copy)]
struct Rejection {
    now: Option<Rejected>,
    /// It was stored before the page.
    before: bool,
    /// The page changed it.
    touched: bool,
}

/// Decides `page`, seen by `run`, given what the store holds of its records (`held`), listing
/// changes and counting with `track` (an incremental run). The page's records apply in turn,
/// as the upstream sent them:
///
/// - a readable record replaces the stored version when [`newer`] than it, else marks it seen;
/// - an unreadable record (empty metadata) marks the stored version seen, and is listed as
///   rejected unless older than the stored version; a rejection keeps the newer datestamp;
/// - a readable record not older than a rejection settles it (whether it wins or not);
/// - with `track`, a replaced record lists a change from the version stored before the page,
///   and moves the live and deleted counts.
pub(crate) fn decide<'p, K>(
    page: &'p [Incoming],
    held: Held<K>,
    run: i64,
    track: bool,
) -> Decision<'p>
where
    K: Borrow<str> + Hash + Eq,
{
    let mut deciding = Deciding::new(page.len(), held);
    for (i, r) in page.iter().enumerate() {
        let at = deciding.of(&r.id);
        if r.unreadable {
            deciding.ids[at].reject(r, run);
        } else {
            deciding.apply(at, i, r, track);
        }
    }
    deciding.finish()
}

/// A page being decided, record after record.
struct Deciding<'p, K> {
    /// The page's identifiers, each once, in the order of their first record, with what the
    /// page made of each so far.
    ids: Vec<Decided<'p>>,
    /// The index in `ids` of each identifier: the one lookup of a record.
    index: HashMap<&'p str, usize>,
    /// The stored versions, whose bodies a change takes.
    stored: HashMap<K, Stored>,
    /// The rejections stored before the page.
    rejected: HashMap<K, Rejected>,
    decision: Decision<'p>,
}

/// An identifier of the page as the decision goes.
struct Decided<'p> {
    id: &'p str,
    /// What is stored for it after the records before, if anything.
    slot: Option<Slot>,
    /// Its rejection, if it has one or had one.
    rejection: Option<Rejection>,
    /// The index in `decision.changes` of its change, if it has one.
    change: Option<usize>,
}

impl<'p> Decided<'p> {
    /// An unreadable record `r`: rejected unless older than the version stored, a repeat that
    /// the newest one wins anyway.
    fn reject(&mut self, r: &'p Incoming, run: i64) {
        let at = r.datestamp;
        let stored_at = self.slot.as_ref().and_then(|s| s.datestamp);
        if matches!((at, stored_at), (Some(a), Some(s)) if a < s) {
            return;
        }
        let entry = self.rejection.get_or_insert(Rejection {
            now: None,
            before: false,
            touched: false,
        });
        let datestamp = match entry.now {
            Some(was) if !newer(at, was.datestamp) => was.datestamp,
            _ => at,
        };
        entry.now = Some(Rejected {
            datestamp,
            seen: run,
        });
        entry.touched = true;
    }
}

impl<'p, K> Deciding<'p, K>
where
    K: Borrow<str> + Hash + Eq,
{
    /// Starts on a page of `len` records with what is stored of its records.
    fn new(len: usize, held: Held<K>) -> Self {
        let Held { stored, rejected } = held;
        Self {
            ids: Vec::with_capacity(len),
            index: HashMap::with_capacity_and_hasher(len, Default::default()),
            stored,
            rejected,
            decision: Decision::default(),
        }
    }

    /// The index in `ids` of `id`, added with what is stored for it at its first record.
    fn of(&mut self, id: &'p str) -> usize {
        match self.index.entry(id) {
            Entry::Occupied(e) => *e.get(),
            Entry::Vacant(e) => {
                let slot = self.stored.get(id).map(|s| Slot {
                    live: s.live,
                    datestamp: s.datestamp,
                    before: true,
                    replaced: None,
                });
                let rejection = self.rejected.get(id).map(|was| Rejection {
                    now: Some(*was),
                    before: true,
                    touched: false,
                });
                e.insert(self.ids.len());
                self.ids.push(Decided {
                    id,
                    slot,
                    rejection,
                    change: None,
                });
                self.ids.len() - 1
            }
        }
    }

    /// A readable record `r`, the `i`th of the page, of the identifier at `at` in `ids`:
    /// settles a rejection it is not older than, and replaces the version stored when newer.
    fn apply(&mut self, at: usize, i: usize, r: &'p Incoming, track: bool) {
        let this = &mut self.ids[at];
        let (id, datestamp) = (this.id, r.datestamp);
        if let Some(entry) = &mut this.rejection
            && let Some(was) = entry.now
            && newer(datestamp, was.datestamp)
        {
            entry.now = None;
            entry.touched = true;
        }
        let slot = this.slot;
        if slot.is_some_and(|s| !newer(datestamp, s.datestamp)) {
            return;
        }
        let d = &mut self.decision;
        if track {
            let (was_live, was_deleted) = slot.map_or((false, false), |s| (s.live, !s.live));
            d.live += i64::from(!r.deleted) - i64::from(was_live);
            d.deleted += i64::from(r.deleted) - i64::from(was_deleted);
            match this.change {
                Some(c) => d.changes[c].now = i,
                None => {
                    // The first change of the page: the slot is the version stored before it.
                    let prev = slot.map(|s| {
                        let body = self.stored.get_mut(id).and_then(|s| s.body.take());
                        (s.live, s.datestamp, body.unwrap_or_default())
                    });
                    this.change = Some(d.changes.len());
                    d.changes.push(Change { id, prev, now: i });
                }
            }
        }
        let before = slot.is_some_and(|s| s.before);
        this.slot = Some(Slot {
            live: !r.deleted,
            datestamp,
            before,
            replaced: Some(i),
        });
    }

    /// The decision: what each identifier of the page came to.
    fn finish(mut self) -> Decision<'p> {
        let d = &mut self.decision;
        for Decided {
            id,
            slot,
            rejection,
            ..
        } in &self.ids
        {
            match slot {
                Some(Slot {
                    replaced: Some(i),
                    before,
                    ..
                }) => match before {
                    true => d.updated.push(*i),
                    false => d.inserted.push(*i),
                },
                Some(Slot { before: true, .. }) => d.kept.push(id),
                _ => {}
            }
            match rejection {
                Some(Rejection {
                    now: Some(r),
                    touched: true,
                    ..
                }) => d.rejected.push((id, *r)),
                Some(Rejection {
                    now: None,
                    before: true,
                    touched: true,
                }) => d.settled.push(id),
                _ => {}
            }
        }
        d.inserted.sort_unstable();
        d.updated.sort_unstable();
        self.decision
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A readable, live record: its body is its identifier and datestamp.
    fn live(id: &str, at: Option<i64>) -> Incoming {
        Incoming {
            id: id.to_owned(),
            datestamp: at,
            sets: "s".to_owned(),
            body: format!("{id}@{at:?}").into_bytes(),
            ..Incoming::default()
        }
    }

    fn gone(id: &str, at: Option<i64>) -> Incoming {
        Incoming {
            deleted: true,
            body: Vec::new(),
            ..live(id, at)
        }
    }

    fn unreadable(id: &str, at: Option<i64>) -> Incoming {
        Incoming {
            unreadable: true,
            body: Vec::new(),
            ..live(id, at)
        }
    }

    /// What the store holds before the page: (id, live, datestamp); bodies as [`live`]'s.
    type Rows = &'static [(&'static str, bool, Option<i64>)];

    struct Case {
        what: &'static str,
        stored: Rows,
        /// (id, datestamp, seen).
        rejected: &'static [(&'static str, Option<i64>, i64)],
        page: Vec<Incoming>,
        track: bool,
        want: Decision<'static>,
    }

    fn prev(id: &str, live: bool, at: Option<i64>) -> Option<(bool, Option<i64>, Vec<u8>)> {
        let body = if live {
            format!("{id}@{at:?}").into_bytes()
        } else {
            Vec::new()
        };
        Some((live, at, body))
    }

    fn change(
        id: &'static str,
        prev: Option<(bool, Option<i64>, Vec<u8>)>,
        now: usize,
    ) -> Change<'static> {
        Change { id, prev, now }
    }

    const RUN: i64 = 7;

    fn reject(at: Option<i64>) -> Rejected {
        Rejected {
            datestamp: at,
            seen: RUN,
        }
    }

    fn cases() -> Vec<Case> {
        let none = Decision::default();
        vec![
            Case {
                what: "a new record is inserted, a change from nothing, one more live record",
                stored: &[],
                rejected: &[],
                page: vec![live("a", Some(5))],
                track: true,
                want: Decision {
                    inserted: vec![0],
                    changes: vec![change("a", None, 0)],
                    live: 1,
                    ..none.clone()
                },
            },
            Case {
                what: "without tracking, no change is listed and nothing is counted",
                stored: &[("b", true, Some(4))],
                rejected: &[],
                page: vec![live("a", Some(5)), gone("b", Some(5))],
                track: false,
                want: Decision {
                    inserted: vec![0],
                    updated: vec![1],
                    ..none.clone()
                },
            },
            Case {
                what: "a newer version replaces the stored one, listed from it",
                stored: &[("a", true, Some(4))],
                rejected: &[],
                page: vec![live("a", Some(5))],
                track: true,
                want: Decision {
                    updated: vec![0],
                    changes: vec![change("a", prev("a", true, Some(4)), 0)],
                    ..none.clone()
                },
            },
            Case {
                what: "of equal datestamps, the incoming version wins",
                stored: &[("a", true, Some(5))],
                rejected: &[],
                page: vec![live("a", Some(5))],
                track: true,
                want: Decision {
                    updated: vec![0],
                    changes: vec![change("a", prev("a", true, Some(5)), 0)],
                    ..none.clone()
                },
            },
            Case {
                what: "an older version marks the stored one seen and changes nothing",
                stored: &[("a", true, Some(5))],
                rejected: &[],
                page: vec![gone("a", Some(4))],
                track: true,
                want: Decision {
                    kept: vec!["a"],
                    ..none.clone()
                },
            },
            Case {
                what: "a missing datestamp, incoming or stored, counts as newer",
                stored: &[("a", true, Some(5)), ("b", true, None)],
                rejected: &[],
                page: vec![live("a", None), live("b", Some(1))],
                track: true,
                want: Decision {
                    updated: vec![0, 1],
                    changes: vec![
                        change("a", prev("a", true, Some(5)), 0),
                        change("b", prev("b", true, None), 1),
                    ],
                    ..none.clone()
                },
            },
            Case {
                what: "a deletion moves a live record to the deleted ones, a revival back",
                stored: &[("a", true, Some(4)), ("b", false, Some(4))],
                rejected: &[],
                page: vec![gone("a", Some(5)), live("b", Some(5)), gone("c", Some(5))],
                track: true,
                want: Decision {
                    inserted: vec![2],
                    updated: vec![0, 1],
                    changes: vec![
                        change("a", prev("a", true, Some(4)), 0),
                        change("b", prev("b", false, Some(4)), 1),
                        change("c", None, 2),
                    ],
                    live: 0,
                    deleted: 1,
                    ..none.clone()
                },
            },
            Case {
                what: "an unreadable record is rejected and stores nothing",
                stored: &[],
                rejected: &[],
                page: vec![unreadable("a", Some(5))],
                track: true,
                want: Decision {
                    rejected: vec![("a", reject(Some(5)))],
                    ..none.clone()
                },
            },
            Case {
                what: "an unreadable record keeps the stored version seen and is rejected, \
                       unless older than the stored version",
                stored: &[
                    ("a", true, Some(4)),
                    ("b", true, Some(6)),
                    ("c", true, Some(5)),
                ],
                rejected: &[],
                page: vec![
                    unreadable("a", Some(5)),
                    unreadable("b", Some(5)),
                    unreadable("c", None),
                ],
                track: true,
                want: Decision {
                    kept: vec!["a", "b", "c"],
                    rejected: vec![("a", reject(Some(5))), ("c", reject(None))],
                    ..none.clone()
                },
            },
            Case {
                what: "a rejection keeps the newer datestamp, seen by the run",
                stored: &[],
                rejected: &[("a", Some(6), 1), ("b", Some(4), 1), ("c", None, 1)],
                page: vec![
                    unreadable("a", Some(5)),
                    unreadable("b", Some(5)),
                    unreadable("c", Some(5)),
                ],
                track: true,
                want: Decision {
                    rejected: vec![
                        ("a", reject(Some(6))),
                        ("b", reject(Some(5))),
                        ("c", reject(Some(5))),
                    ],
                    ..none.clone()
                },
            },
            Case {
                what: "a readable version not older than a rejection settles it, winning or \
                       not; an older one leaves it",
                stored: &[("a", true, Some(9))],
                rejected: &[("a", Some(5), 1), ("b", Some(5), 1), ("c", Some(5), 1)],
                page: vec![live("a", Some(5)), live("b", Some(6)), live("c", Some(4))],
                track: false,
                want: Decision {
                    inserted: vec![1, 2],
                    kept: vec!["a"],
                    settled: vec!["a", "b"],
                    ..none.clone()
                },
            },
            Case {
                what: "a record twice: the newer wins, an older repeat marks it seen, the \
                       change is from the version before the page",
                stored: &[("a", true, Some(4))],
                rejected: &[],
                page: vec![
                    live("a", Some(6)),
                    live("a", Some(5)),
                    live("c", Some(1)),
                    live("c", Some(2)),
                ],
                track: true,
                want: Decision {
                    inserted: vec![3],
                    updated: vec![0],
                    changes: vec![
                        change("a", prev("a", true, Some(4)), 0),
                        change("c", None, 3),
                    ],
                    live: 1,
                    ..none.clone()
                },
            },
            Case {
                what: "a record twice: each version counted against the one before it",
                stored: &[("a", true, Some(4))],
                rejected: &[],
                page: vec![gone("a", Some(5)), live("a", Some(6)), gone("a", Some(7))],
                track: true,
                want: Decision {
                    updated: vec![2],
                    changes: vec![change("a", prev("a", true, Some(4)), 2)],
                    live: -1,
                    deleted: 1,
                    ..none.clone()
                },
            },
            Case {
                what: "within a page, a rejection is settled by a later readable version and \
                       a readable version is rejected by a later unreadable one, not an older",
                stored: &[],
                rejected: &[],
                page: vec![
                    unreadable("a", Some(5)),
                    live("a", Some(5)),
                    live("b", Some(5)),
                    unreadable("b", Some(6)),
                    live("c", Some(5)),
                    unreadable("c", Some(4)),
                ],
                track: false,
                want: Decision {
                    inserted: vec![1, 2, 4],
                    rejected: vec![("b", reject(Some(6)))],
                    ..none.clone()
                },
            },
            Case {
                what: "a rejection settled and rejected again within the page is written",
                stored: &[],
                rejected: &[("a", Some(5), 1)],
                page: vec![live("a", Some(5)), unreadable("a", Some(6))],
                track: false,
                want: Decision {
                    inserted: vec![0],
                    rejected: vec![("a", reject(Some(6)))],
                    ..none.clone()
                },
            },
        ]
    }

    #[test]
    fn each_rule_decides_its_case() {
        for case in cases() {
            let stored = (case.stored.iter())
                .map(|&(id, live, at)| {
                    let body = if live {
                        format!("{id}@{at:?}").into_bytes()
                    } else {
                        Vec::new()
                    };
                    let s = Stored {
                        live,
                        datestamp: at,
                        body: case.track.then_some(body),
                    };
                    (id.to_owned(), s)
                })
                .collect();
            let rejected = (case.rejected.iter())
                .map(|&(id, datestamp, seen)| (id.to_owned(), Rejected { datestamp, seen }))
                .collect();
            let got = decide(&case.page, Held { stored, rejected }, RUN, case.track);
            assert_eq!(got, case.want, "{}", case.what);
        }
    }

    /// Identifiers the store holds that the page does not name are not the page's business.
    #[test]
    fn records_the_page_does_not_name_are_left_alone() {
        let stored = [("z".to_owned(), Stored::default())].into_iter().collect();
        let rejected = [("y".to_owned(), reject(None))].into_iter().collect();
        let page = [live("a", Some(1))];
        let got = decide(&page, Held { stored, rejected }, RUN, false);
        assert_eq!(
            got,
            Decision {
                inserted: vec![0],
                ..Decision::default()
            }
        );
    }
}
