//! Harvesting through the store: a refresh asks the upstream only for what changed since the last
//! complete harvest, applies every page to the store with its checkpoint, continues an
//! interrupted harvest where it stopped, and renders from the store's records. The gateway does
//! this for every repository; `export --state DIR` does it too.
//!
//! Which harvest a run makes:
//! - an interrupted run is continued: from its checkpoint's token while the upstream still knows
//!   it, else from the newest datestamp it applied (see [`oai::harvest_resumable`]);
//! - a full harvest when there was no complete one, when the store followed another source or
//!   held fewer oai_dc fields than the job needs, after a publish held back by the shrink guard,
//!   and every `full_interval` when the repository does not keep deletions (`deletedRecord` `no`
//!   or `transient`, OAI-39): records it does not see are removed, only once it completes (I-06);
//! - else an incremental one: `from` = the `responseDate` of the last complete harvest (the
//!   server's clock) minus one granularity unit, in the repository's granularity (OAI-17, OAI-18).

use std::ops::ControlFlow;
use std::time::{Duration, SystemTime};

use crate::datestamp::{Datestamp, Granularity};
use crate::oai::{self, Client, Resume};
use crate::pipeline::{self, Harvested, Job, PipelineError};
use crate::progress::Progress;
use crate::render::sitemap::Layout;
use crate::store::{Checkpoint, Complete, HeldShrink, Run, State, Store, StoreError};

/// How a repository is refreshed through its store.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// How often a full harvest finds deletions in a repository that does not report them.
    pub full_interval: Duration,
    /// The largest share of the published URLs one harvest may remove without confirmation.
    pub shrink_guard: f64,
    /// Publish a shrink that the guard holds back.
    pub accept_shrink: bool,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            full_interval: Duration::from_secs(7 * 86_400),
            shrink_guard: 0.5,
            accept_shrink: false,
        }
    }
}

/// What kind of harvest a run made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The whole list; deletions found by absence.
    Full,
    /// Changes since the last complete harvest.
    Incremental,
}

impl Kind {
    /// `full` or `incremental`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Full => "full",
            Kind::Incremental => "incremental",
        }
    }
}

/// What a run did to the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunSummary {
    /// Full or incremental.
    pub kind: Kind,
    /// The `from` sent, when incremental.
    pub from: Option<String>,
    /// The run continued an interrupted one (that many times).
    pub resumed: u32,
    /// Live records removed because a complete full harvest did not see them.
    pub removed: u64,
    /// Live records in the store afterwards.
    pub live: u64,
}

/// Harvests `job` into `store` and collects the store's records for rendering. Fails, with the
/// store consistent and its checkpoint saved, when the harvest does not complete.
pub async fn harvest(
    client: &Client,
    job: &Job,
    store: &mut Store,
    policy: &Policy,
    progress: &mut Progress,
) -> Result<(Harvested, RunSummary), PipelineError> {
    let now = unix(SystemTime::now());
    let mut state = store.state()?;
    if let Some(t) = state.retry_not_before.filter(|t| *t > now) {
        return Err(PipelineError::NotBefore(
            SystemTime::UNIX_EPOCH + Duration::from_secs(t as u64),
        ));
    }
    let source = job.request.source.to_string();
    let fields = job.request.fields;
    let bounds = (
        job.request.from.map(Datestamp::pack),
        job.request.until.map(Datestamp::pack),
    );
    let follows = state.source == source
        && state.sets == job.request.sets
        && state.bounds == bounds
        && oai::parse::Fields::from_bits(state.fields).covers(fields);
    if !follows {
        if !state.source.is_empty() {
            tracing::info!(
                store = %store.path().display(),
                "the store followed another source, sets or date bounds, or held fewer fields; harvesting in full"
            );
        }
        state = State {
            source,
            sets: job.request.sets.clone(),
            fields: fields.bits(),
            bounds,
            runs: state.runs,
            retry_not_before: state.retry_not_before,
            published_urls: state.published_urls,
            held_shrink: state.held_shrink,
            ..State::default()
        };
        store.reset(&state)?;
    }

    let mut run = match state.run.take() {
        Some(mut run) => {
            run.resumed += 1;
            tracing::info!(
                run = run.id,
                full = run.full,
                pages = run.pages,
                token = run.checkpoint.as_ref().map(|c| c.token.as_str()),
                "continuing an interrupted harvest"
            );
            run
        }
        None => plan(&state, policy, now),
    };
    state.runs = state.runs.max(run.id);
    state.run = Some(run.clone());
    store.save_state(&state)?;

    let mut request = job.request.clone();
    // A configured lower bound still holds for an incremental harvest.
    request.from = run.from.map(Datestamp::unpack).max(job.request.from);
    let resume = run.checkpoint.as_ref().map(|c| Resume {
        set: c.set.clone(),
        token: c.token.clone(),
        page: c.page,
        newest: c.newest.map(Datestamp::unpack),
        ordered: c.ordered,
    });
    let mut failure: Option<StoreError> = None;
    let result = oai::harvest_resumable(client, &request, resume.as_ref(), |event| {
        if run.response_date.is_none() {
            run.response_date = event.response_date.map(str::to_owned);
        }
        run.pages += 1;
        run.records += event.records.len() as u64;
        run.checkpoint = event.next.map(|r| Checkpoint {
            set: r.set,
            token: r.token,
            page: r.page,
            newest: r.newest.map(Datestamp::pack),
            ordered: r.ordered,
        });
        state.run = Some(run.clone());
        if let Err(e) = store.apply_page(run.id, &event.records, &state) {
            failure = Some(e);
            return ControlFlow::Break(());
        }
        progress.page(event.page, run.records, 0, event.complete_list_size);
        ControlFlow::Continue(())
    })
    .await;
    progress.finish();
    if let Some(t) = client.stats.retry_not_before() {
        state.retry_not_before = Some(unix(t));
        store.save_state(&state)?;
    }
    let report = result?;
    if let Some(e) = failure {
        return Err(e.into());
    }

    let identify = &report.identify;
    state.complete = run
        .response_date
        .clone()
        .or_else(|| report.first_response_date.clone())
        .map(|response_date| Complete {
            response_date,
            granularity: identify.granularity.as_str().to_owned(),
            deleted_record: identify.deleted_record.clone(),
        });
    if run.full {
        state.last_full = Some(now);
    }
    state.run = None;
    let removed = store.finish_run(run.full.then_some(run.id), &state)?;
    let live = store.counts()?.live;
    let summary = RunSummary {
        kind: if run.full {
            Kind::Full
        } else {
            Kind::Incremental
        },
        from: request
            .from
            .map(|f| f.in_granularity(identify.granularity, false)),
        resumed: run.resumed,
        removed,
        live,
    };
    tracing::info!(
        kind = summary.kind.as_str(),
        from = summary.from,
        pages = run.pages,
        records = run.records,
        removed,
        live,
        "harvest complete; store updated"
    );
    let harvested = pipeline::collect_stored(job, store, report)?;
    Ok((harvested, summary))
}

/// The next run when none is under way.
fn plan(state: &State, policy: &Policy, now: i64) -> Run {
    let id = state.runs + 1;
    let full_due = |c: &Complete| {
        c.deleted_record != "persistent"
            && state
                .last_full
                .is_none_or(|t| now.saturating_sub(t) >= policy.full_interval.as_secs() as i64)
    };
    let from = state
        .complete
        .as_ref()
        .filter(|c| !full_due(c) && state.held_shrink.is_none())
        .and_then(|c| {
            let granularity = Granularity::parse(&c.granularity).unwrap_or_default();
            Datestamp::parse(&c.response_date).map(|d| d.minus_unit(granularity))
        });
    Run {
        id,
        full: from.is_none(),
        from: from.map(Datestamp::pack),
        response_date: None,
        checkpoint: None,
        pages: 0,
        records: 0,
        resumed: 0,
    }
}

/// The shrink guard (I-07): `Err` when publishing `urls` would remove more than the policy's
/// share of the URLs published last, unless the operator accepts it or the previous complete
/// harvest already showed the same shrink. A held shrink makes the next run a full harvest,
/// which either brings the URLs back or confirms their removal.
pub fn guard_shrink(store: &mut Store, urls: u64, policy: &Policy) -> Result<(), PipelineError> {
    let mut state = store.state()?;
    let Some(published) = state.published_urls.filter(|p| *p > 0) else {
        return Ok(());
    };
    let floor = published as f64 * (1.0 - policy.shrink_guard);
    if (urls as f64) >= floor {
        return Ok(());
    }
    if policy.accept_shrink {
        tracing::warn!(
            published,
            urls,
            "publishing a shrink: accepted by the operator"
        );
        return Ok(());
    }
    if let Some(held) = &state.held_shrink {
        tracing::warn!(
            published,
            urls,
            first_held = held.harvested,
            "publishing a shrink: a second complete harvest confirmed it"
        );
        return Ok(());
    }
    state.held_shrink = Some(HeldShrink {
        published,
        harvested: urls,
        since: unix(SystemTime::now()),
    });
    // The next run harvests in full, to confirm or undo the shrink.
    state.complete = None;
    store.save_state(&state)?;
    Err(PipelineError::ShrinkHeld {
        published,
        harvested: urls,
        share: policy.shrink_guard,
    })
}

/// Records a publish of `urls` URLs in `layout`; a held shrink is settled.
pub fn published(store: &mut Store, urls: u64, layout: Layout) -> Result<(), StoreError> {
    let mut state = store.state()?;
    state.published_urls = Some(urls);
    state.held_shrink = None;
    state.layout = layout;
    store.save_state(&state)
}

fn unix(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn complete(deleted_record: &str) -> Option<Complete> {
        Some(Complete {
            response_date: "2024-06-01T12:00:00Z".into(),
            granularity: "YYYY-MM-DD".into(),
            deleted_record: deleted_record.into(),
        })
    }

    #[test]
    fn plans() {
        let policy = Policy::default();
        let now = 1_800_000_000;
        // No complete harvest: full.
        let run = plan(&State::default(), &policy, now);
        assert!(run.full && run.from.is_none() && run.id == 1);
        // OAI-18: incremental, one day of overlap before the server's responseDate.
        let state = State {
            complete: complete("persistent"),
            runs: 4,
            ..State::default()
        };
        let run = plan(&state, &policy, now);
        assert!(!run.full && run.id == 5);
        assert_eq!(
            Datestamp::unpack(run.from.unwrap()).to_string(),
            "2024-05-31"
        );
        // OAI-39: deletedRecord=no needs a full harvest every interval.
        let state = State {
            complete: complete("no"),
            last_full: Some(now - 8 * 86_400),
            ..State::default()
        };
        assert!(plan(&state, &policy, now).full);
        let state = State {
            last_full: Some(now - 86_400),
            ..state
        };
        assert!(!plan(&state, &policy, now).full);
        // A held shrink is confirmed or undone by a full harvest.
        let state = State {
            held_shrink: Some(HeldShrink {
                published: 10,
                harvested: 1,
                since: now,
            }),
            ..state
        };
        assert!(plan(&state, &policy, now).full);
    }

    #[test]
    fn the_shrink_guard_holds_once_then_accepts_a_confirmation() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join(crate::store::FILE)).unwrap();
        let policy = Policy::default();
        // Nothing published yet: anything goes.
        guard_shrink(&mut store, 1, &policy).unwrap();
        published(&mut store, 100, Layout::default()).unwrap();
        guard_shrink(&mut store, 50, &policy).unwrap();
        let err = guard_shrink(&mut store, 49, &policy).unwrap_err();
        assert!(matches!(
            err,
            PipelineError::ShrinkHeld {
                published: 100,
                harvested: 49,
                ..
            }
        ));
        assert!(store.state().unwrap().held_shrink.is_some());
        // The next complete harvest shows the same: confirmed.
        guard_shrink(&mut store, 40, &policy).unwrap();
        published(&mut store, 40, Layout::default()).unwrap();
        assert_eq!(store.state().unwrap().held_shrink, None);
        // The operator's override.
        let accept = Policy {
            accept_shrink: true,
            ..policy
        };
        guard_shrink(&mut store, 0, &accept).unwrap();
    }
}
