//! The `/metrics` scrape: what the gateway keeps ([`Metrics`]), and what is read from the
//! repositories being served as the scrape comes: their settings and schedules, and the gauges
//! of those summed under `repository="_other"` ([`metrics`]'s bound), from their state.

use std::collections::HashMap;
use std::time::SystemTime;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::Gateway;
use super::generation::Generation;
use super::metrics::{
    self, DropLabels, Metrics, OTHER, PlatformLabels, ProfileDropLabels, ProfileLabels, RepoLabels,
};
use crate::classify::Drop;
use crate::spill::Room;
use crate::summary::Summary;

/// The OpenMetrics text of `gateway`'s `/metrics`: what is kept here, and what is read from
/// the repositories being served as the scrape comes (their settings and schedules), so it
/// follows a reload at once and a removed repository leaves no series behind. `room`: the state
/// directory's file system's, asked by the caller off the runtime ([`Gateway::state_dir_room`]).
pub(crate) fn scrape(gateway: &Gateway, room: Option<Room>) -> String {
    let mut registry = Registry::with_prefix("oai_bridge");
    let interval = Family::<RepoLabels, Gauge>::default();
    registry.register(
        "refresh_interval_seconds",
        "refresh_interval_secs of the repository: time() - last_success_timestamp_seconds \
         over N of it is N refreshes missed",
        interval.clone(),
    );
    let attempt = Family::<RepoLabels, Gauge>::default();
    registry.register(
        "last_attempt_timestamp_seconds",
        "Unix time the last refresh started, successful or not (absent before the first)",
        attempt.clone(),
    );
    let memory = Family::<RepoLabels, Gauge>::default();
    registry.register(
        "refresh_memory_bytes",
        "Bytes of memory the repository's running refresh holds in its collectors (the URL \
         inventory, the landing-page profiles' records) now, within [server] \
         memory_budget_bytes; 0 when none runs",
        memory.clone(),
    );
    let spill = Family::<RepoLabels, Gauge>::default();
    registry.register(
        "refresh_spill_bytes",
        "Bytes the repository's running refresh's spill files (sorted runs past its memory) \
         take on disk now; 0 when none runs",
        spill.clone(),
    );
    let running = gateway.pool.running();
    // (memory, spill) of the refresh of `name` running now.
    let held = |name: &str| {
        (running.iter().filter(|u| u.name == name))
            .fold((0, 0), |(m, s), u| (m + u.memory, s + u.spill))
    };
    let bytes = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let mut other_held = (0, 0);
    let repos = gateway.repos();
    let mut aggregated = Vec::new();
    for r in &repos {
        let (m, s) = held(&r.name);
        if !gateway.metrics.own(&r.name) {
            aggregated.push(r.as_ref());
            other_held = (other_held.0 + m, other_held.1 + s);
            continue;
        }
        let labels = metrics::repo(&r.name);
        memory.get_or_create(&labels).set(bytes(m));
        spill.get_or_create(&labels).set(bytes(s));
        let seconds = r.setup().config.refresh_interval.as_secs();
        interval
            .get_or_create(&labels)
            .set(i64::try_from(seconds).unwrap_or(i64::MAX));
        if let Some(started) = r.status().last_attempt {
            attempt
                .get_or_create(&labels)
                .set(oai_pmh::unix_secs(started));
        }
    }
    aggregate(&gateway.metrics, &aggregated, &interval, &attempt);
    if !aggregated.is_empty() {
        let other = metrics::repo(OTHER);
        memory.get_or_create(&other).set(bytes(other_held.0));
        spill.get_or_create(&other).set(bytes(other_held.1));
    }
    pool_gauges(gateway, &mut registry, room);
    fleet_gauges(gateway, &repos, &mut registry);
    changelist_gauges(gateway, &repos, &mut registry);
    // The fleet's refresh slots ([harvest] max_concurrent_refreshes): a queue that keeps
    // growing means the limit is too low for the repositories' intervals.
    let slots = gateway.refresh_slots();
    for (name, help, value) in [
        ("refreshes_running", "Refreshes running now", slots.running),
        (
            "refreshes_waiting",
            "Refreshes due but waiting for a slot (max_concurrent_refreshes, \
             per_host_concurrency)",
            slots.waiting,
        ),
        (
            "refreshes_max_concurrent",
            "max_concurrent_refreshes, as configured",
            slots.max,
        ),
    ] {
        let gauge = Gauge::<i64>::default();
        gauge.set(i64::try_from(value).unwrap_or(i64::MAX));
        registry.register(name, help, gauge);
    }
    let mut out = String::new();
    use prometheus_client::encoding::text::{encode_eof, encode_registry};
    encode_registry(&mut out, &gateway.metrics.registry)
        .and_then(|()| encode_registry(&mut out, &registry))
        .and_then(|()| encode_eof(&mut out))
        .expect("writing to a String cannot fail");
    out
}

/// Registers what each repository's ResourceSync Change Lists hold, read from the generation
/// served: their entries, the start of the period they cover and when the newest change was
/// seen. The repositories beyond the bound are summed under `_other` (the start: the earliest;
/// the newest: the latest).
fn changelist_gauges(
    gateway: &Gateway,
    repos: &[std::sync::Arc<super::Repo>],
    registry: &mut Registry,
) {
    let entries = Family::<RepoLabels, Gauge>::default();
    registry.register(
        "changelist_entries",
        "Changes (created, updated, deleted landing pages) the repository's ResourceSync \
         Change Lists hold, within changelist_days",
        entries.clone(),
    );
    let from = Family::<RepoLabels, Gauge>::default();
    registry.register(
        "changelist_from_timestamp_seconds",
        "Unix time from which the repository's Change Lists hold every change: a consumer \
         that synced before it reads the Resource List again",
        from.clone(),
    );
    let newest = Family::<RepoLabels, Gauge>::default();
    registry.register(
        "changelist_last_change_timestamp_seconds",
        "Unix time the newest change the Change Lists hold was seen (absent when they hold none)",
        newest.clone(),
    );
    let secs = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let mut other: Option<super::generation::ChangeListStats> = None;
    for r in repos {
        let Some(stats) = r.current().and_then(|g| g.changelist_stats()) else {
            continue;
        };
        if !gateway.metrics.own(&r.name) {
            let o = other.get_or_insert(super::generation::ChangeListStats {
                from: stats.from,
                ..Default::default()
            });
            o.entries += stats.entries;
            o.from = o.from.min(stats.from);
            o.newest = o.newest.max(stats.newest);
            continue;
        }
        let labels = metrics::repo(&r.name);
        entries.get_or_create(&labels).set(secs(stats.entries));
        from.get_or_create(&labels).set(secs(stats.from));
        if let Some(n) = stats.newest {
            newest.get_or_create(&labels).set(secs(n));
        }
    }
    if let Some(o) = other {
        let labels = metrics::repo(OTHER);
        entries.get_or_create(&labels).set(secs(o.entries));
        from.get_or_create(&labels).set(secs(o.from));
        if let Some(n) = o.newest {
            newest.get_or_create(&labels).set(secs(n));
        }
    }
}

/// Registers each repository's place in the fleet (its lease, this gateway's lag) and its last
/// upload to the bucket, from what the gateway learnt (the fleet read every few seconds, its
/// own uploads): no query per scrape. The repositories beyond the bound are summed under
/// `_other` (the lag and the token: their greatest).
fn fleet_gauges(gateway: &Gateway, repos: &[std::sync::Arc<super::Repo>], registry: &mut Registry) {
    let statuses: Vec<(String, super::RepoStatus)> = (repos.iter())
        .map(|r| (gateway.metrics.label(&r.name), r.status()))
        .collect();
    let gauge = |registry: &mut Registry, name: &str, help: &str| {
        let family = Family::<RepoLabels, Gauge>::default();
        registry.register(name, help, family.clone());
        family
    };
    let set = |family: &Family<RepoLabels, Gauge>, label: &str, value: i64, sum: bool| {
        let gauge = family.get_or_create(&metrics::repo(label));
        match sum {
            true => gauge.inc_by(value),
            false => gauge.set(gauge.get().max(value)),
        };
    };
    let clamp = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    if gateway.fleet.is_some() {
        let held = gauge(
            registry,
            "fleet_lease_held_here",
            "1 while this gateway holds the fleet's lease on the repository's refresh (the \
             instance label names the holder); summed under _other",
        );
        let fence = gauge(
            registry,
            "fleet_lease_fence",
            "The fencing token of the last lease granted on the repository's refresh (it only \
             grows); the greatest under _other",
        );
        let behind = gauge(
            registry,
            "fleet_generations_behind",
            "Generations the fleet recorded that this gateway does not serve yet; summed under \
             _other",
        );
        let lag = gauge(
            registry,
            "fleet_lag_seconds",
            "Seconds since the generation the fleet recorded, which this gateway does not serve \
             yet, was recorded; 0 when it serves it; the greatest under _other",
        );
        let holder = gateway.fleet.as_ref().map(|f| f.holder.as_str());
        let now = SystemTime::now();
        for (label, status) in &statuses {
            let Some(view) = &status.fleet else {
                continue;
            };
            let here = view.holder.is_some() && view.holder.as_deref() == holder;
            set(&held, label, i64::from(here), true);
            set(&fence, label, view.fence.unwrap_or(0), false);
            set(&behind, label, clamp(view.behind), true);
            let since = (view.behind_since)
                .and_then(|at| now.duration_since(at).ok())
                .map_or(0, |d| clamp(d.as_secs()));
            set(&lag, label, since, false);
        }
    }
    if statuses.iter().any(|(_, s)| s.last_upload.is_some()) {
        let files = Family::<UploadLabels, Gauge>::default();
        registry.register(
            "bucket_last_upload_files",
            "Files of the repository's last upload to the bucket: sent, unchanged (in the \
             bucket already), retired (no index names them, kept for their grace period)",
            files.clone(),
        );
        let bytes = gauge(
            registry,
            "bucket_last_upload_bytes",
            "Bytes the repository's last upload to the bucket sent",
        );
        let failed = gauge(
            registry,
            "bucket_last_upload_failed",
            "1 when the repository's last upload to the bucket failed (the status page says \
             why); summed under _other",
        );
        for (label, status) in &statuses {
            let Some(upload) = &status.last_upload else {
                continue;
            };
            let u = &upload.uploaded;
            for (files_were, n) in [
                ("sent", u.uploaded),
                ("unchanged", u.files.saturating_sub(u.uploaded)),
                ("retired", u.retired),
            ] {
                (files.get_or_create(&UploadLabels {
                    repository: label.clone(),
                    files: files_were,
                }))
                .inc_by(clamp(n));
            }
            set(&bytes, label, clamp(u.uploaded_bytes), true);
            set(&failed, label, i64::from(upload.error.is_some()), true);
        }
    }
    if statuses.iter().any(|(_, s)| s.indexnow.is_some()) {
        let pending = gauge(
            registry,
            "indexnow_pending_urls",
            "Changed landing pages in the repository's IndexNow outbox, not yet acknowledged \
             by the engine; summed under _other",
        );
        let stopped = gauge(
            registry,
            "indexnow_stopped",
            "1 while an IndexNow engine's refusal (403, 422, ...) stops the repository's pings \
             (the status page says why); summed under _other",
        );
        for (label, status) in &statuses {
            let Some(p) = &status.indexnow else {
                continue;
            };
            set(&pending, label, clamp(p.pending.1), true);
            set(&stopped, label, i64::from(p.stopped.is_some()), true);
        }
    }
}

/// Labels of `oai_bridge_bucket_last_upload_files`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UploadLabels {
    /// `[[repository]] name`, or `_other`.
    repository: String,
    /// `sent`, `unchanged` or `retired`.
    files: &'static str,
}

/// Registers the gateway-wide gauges of memory and spill space: what the running refreshes
/// hold together, the limits they are held to, and what the machine gives (the memory the
/// process may use, the state directory's free space: `room`).
fn pool_gauges(gateway: &Gateway, registry: &mut Registry, room: Option<Room>) {
    let pool = &gateway.pool;
    let limits = pool.limits();
    let free = room.map(|room| (room.free, room.size));
    let gauges = [
        (
            "memory_budget_bytes",
            "[server] memory_budget_bytes: the memory the running refreshes' collectors hold \
             together at most before they spill",
            Some(limits.memory),
        ),
        (
            "refresh_memory_budget_bytes",
            "[harvest] memory_budget_bytes: the memory one refresh's URL inventory holds at most \
             (its profiles' records a quarter of it more)",
            Some(limits.per_refresh),
        ),
        (
            "refreshes_memory_bytes",
            "Bytes of memory the running refreshes' collectors hold now, together",
            Some(pool.memory()),
        ),
        (
            "refreshes_spill_bytes",
            "Bytes the running refreshes' spill files take on disk now, together",
            Some(pool.spill()),
        ),
        (
            "spill_max_bytes",
            "[server] spill_max_bytes: the most the refreshes' spill files take together (absent: \
             no cap but the state directory's free space)",
            limits.spill_max,
        ),
        (
            "state_dir_free_bytes",
            "Bytes free on the file system of [server] state_dir, where the refreshes spill and \
             write their generations",
            free.map(|(free, _)| free),
        ),
        (
            "state_dir_size_bytes",
            "Bytes of the file system of [server] state_dir",
            free.map(|(_, size)| size),
        ),
        (
            "memory_limit_bytes",
            "The memory the process may use, as its cgroup (memory.max) or the machine (MemTotal) \
             said at the start",
            gateway.machine.as_ref().map(|m| m.bytes),
        ),
    ];
    for (name, help, value) in gauges {
        if let Some(value) = value {
            let gauge = Gauge::<i64>::default();
            gauge.set(i64::try_from(value).unwrap_or(i64::MAX));
            registry.register(name, help, gauge);
        }
    }
}

/// Sets the `_other` gauges from the state of the `aggregated` repositories, and the
/// scrape's own `interval` and `attempt` families: sums of what adds up (records, URLs,
/// what was not published, profile entries), the number on each platform, the worst case
/// of a state (not serving if one does not, stale, a shrink held or a short list if one
/// has), the longest build, and the last success, last attempt and interval of the most
/// overdue one, so that each alert of `docs/alerts.yml` fires for `_other` when it would
/// fire for one of them.
fn aggregate(
    m: &Metrics,
    aggregated: &[&super::Repo],
    interval: &Family<RepoLabels, Gauge>,
    attempt: &Family<RepoLabels, Gauge>,
) {
    let other = metrics::repo(OTHER);
    m.aggregated
        .set(i64::try_from(aggregated.len()).unwrap_or(i64::MAX));
    let mut sums: HashMap<GenerationSeries, i64> = HashMap::new();
    let (mut serving, mut stale, mut shrink_held, mut short_list) = (1, 0, 0, 0);
    let mut longest_build: Option<f64> = None;
    // (overdue, in intervals; last success; interval), of the most overdue repository.
    let mut overdue: Option<(f64, i64, u64)> = None;
    let mut oldest_attempt: Option<i64> = None;
    let now = oai_pmh::unix_secs(SystemTime::now());
    for r in aggregated {
        let status = r.status();
        let current = r.current();
        if let Some(g) = &current {
            generation_series(&g.summary, |series, n| {
                *sums.entry(series).or_default() += n
            });
            let build = g.summary.build_ms as f64 / 1000.0;
            longest_build = Some(longest_build.map_or(build, |b: f64| b.max(build)));
        }
        serving = serving.min(i64::from(current.is_some()));
        stale = stale.max(i64::from(current.is_some() && status.last_error.is_some()));
        shrink_held = shrink_held.max(i64::from(status.held_shrink.is_some()));
        short_list = short_list.max(i64::from(status.short_list.is_some()));
        let every = r.setup().config.refresh_interval.as_secs().max(1);
        if let Some(t) = status.last_success.map(oai_pmh::unix_secs) {
            let late = (now - t) as f64 / every as f64;
            if overdue.is_none_or(|(most, _, _)| late > most) {
                overdue = Some((late, t, every));
            }
        }
        if let Some(t) = status.last_attempt.map(oai_pmh::unix_secs) {
            oldest_attempt = Some(oldest_attempt.map_or(t, |o| o.min(t)));
        }
    }
    let mut before = m.other_series.lock().unwrap_or_else(|e| e.into_inner());
    let families = [
        (&m.serving, Some(serving)),
        (&m.stale, Some(stale)),
        (&m.shrink_held, Some(shrink_held)),
        (&m.short_list, Some(short_list)),
        (&m.last_success, overdue.map(|(_, t, _)| t)),
    ];
    for (family, value) in families {
        match value.filter(|_| !aggregated.is_empty()) {
            Some(v) => {
                family.get_or_create(&other).set(v);
            }
            None => {
                family.remove(&other);
            }
        }
    }
    match longest_build {
        Some(b) => {
            m.last_duration.get_or_create(&other).set(b);
        }
        None => {
            m.last_duration.remove(&other);
        }
    }
    if !sums.contains_key(&GenerationSeries::Records) {
        m.records.remove(&other);
        m.urls.remove(&other);
    }
    if let Some((_, _, every)) = overdue {
        interval
            .get_or_create(&other)
            .set(i64::try_from(every).unwrap_or(i64::MAX));
    }
    if let Some(t) = oldest_attempt {
        attempt.get_or_create(&other).set(t);
    }
    let (mut platform, mut entries, mut dropped) = (Vec::new(), Vec::new(), Vec::new());
    for reason in Drop::ALL {
        let labels = DropLabels {
            repository: OTHER.to_owned(),
            reason: reason.as_str().to_owned(),
        };
        if aggregated.is_empty() {
            m.dropped.remove(&labels);
        } else {
            let n = sums.remove(&GenerationSeries::Dropped(reason.as_str()));
            m.dropped.get_or_create(&labels).set(n.unwrap_or(0));
        }
    }
    for (series, n) in sums {
        let repository = OTHER.to_owned();
        match series {
            GenerationSeries::Records => {
                m.records.get_or_create(&other).set(n);
            }
            GenerationSeries::Urls => {
                m.urls.get_or_create(&other).set(n);
            }
            GenerationSeries::Dropped(_) => {}
            GenerationSeries::Platform(platform_name) => platform.push((
                PlatformLabels {
                    repository,
                    platform: platform_name,
                },
                n,
            )),
            GenerationSeries::ProfileEntries(profile) => {
                entries.push((
                    ProfileLabels {
                        repository,
                        profile,
                    },
                    n,
                ));
            }
            GenerationSeries::ProfileDropped(profile, reason) => dropped.push((
                ProfileDropLabels {
                    repository,
                    profile,
                    reason,
                },
                n,
            )),
        }
    }
    replace(&m.platform, platform, &mut before.platform);
    replace(&m.profile_entries, entries, &mut before.profile_entries);
    replace(&m.profile_dropped, dropped, &mut before.profile_dropped);
}

/// Sets `values` in `family`, and removes the series `before` named that `values` does not;
/// `before` becomes the labels of `values`.
fn replace<L>(family: &Family<L, Gauge>, values: Vec<(L, i64)>, before: &mut Vec<L>)
where
    L: Clone + std::hash::Hash + Eq + EncodeLabelSet + std::fmt::Debug,
{
    for old in before.iter() {
        if !values.iter().any(|(l, _)| l == old) {
            family.remove(old);
        }
    }
    before.clear();
    for (labels, n) in values {
        family.get_or_create(&labels).set(n);
        before.push(labels);
    }
}

/// A gauge a served generation sets, beside the repository's label.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(crate) enum GenerationSeries {
    /// `oai_bridge_records`.
    Records,
    /// `oai_bridge_urls_published`.
    Urls,
    /// `oai_bridge_identifiers_dropped`, by reason.
    Dropped(&'static str),
    /// `oai_bridge_platform`, by platform.
    Platform(String),
    /// `oai_bridge_profile_entries`, by profile.
    ProfileEntries(String),
    /// `oai_bridge_profile_records_dropped`, by profile and reason.
    ProfileDropped(String, &'static str),
}

/// Each gauge the generation summed up in `s` sets, with its value, handed to `set`: one
/// mapping for a repository's own series and for the `_other` sums.
pub(crate) fn generation_series(s: &Summary, mut set: impl FnMut(GenerationSeries, i64)) {
    set(GenerationSeries::Records, s.records as i64);
    set(GenerationSeries::Urls, s.urls as i64);
    // 1 for the platform in effect, 0 for the others (so a change of platform shows).
    let current = s.platform.split(' ').next().unwrap_or_default();
    // The built-in platforms always (a dashboard's series stay), and an operator's row in
    // effect.
    let mut names: Vec<&str> = crate::platform::Platform::builtin_names().collect();
    if !names.contains(&current) {
        names.push(current);
    }
    for platform in names {
        set(
            GenerationSeries::Platform(platform.to_owned()),
            i64::from(platform == current),
        );
    }
    for reason in Drop::ALL {
        let n = s.drops.get(reason.as_str()).copied().unwrap_or(0);
        set(GenerationSeries::Dropped(reason.as_str()), n as i64);
    }
    for counts in s.profile_counts() {
        let name = counts.profile.label();
        set(
            GenerationSeries::ProfileEntries(name.clone()),
            counts.entries as i64,
        );
        for (reason, n) in counts.drops {
            set(
                GenerationSeries::ProfileDropped(name.clone(), reason),
                n as i64,
            );
        }
    }
}

/// Sets the per-generation gauges of a repository with series of its own from `generation`.
pub(crate) fn record_generation(m: &Metrics, name: &str, generation: &Generation) {
    if !m.own(name) {
        return;
    }
    let labels = metrics::repo(name);
    let repository = || name.to_owned();
    generation_series(&generation.summary, |series, n| {
        let _previous = match series {
            GenerationSeries::Records => m.records.get_or_create(&labels).set(n),
            GenerationSeries::Urls => m.urls.get_or_create(&labels).set(n),
            GenerationSeries::Dropped(reason) => m
                .dropped
                .get_or_create(&DropLabels {
                    repository: repository(),
                    reason: reason.to_owned(),
                })
                .set(n),
            GenerationSeries::Platform(platform) => m
                .platform
                .get_or_create(&PlatformLabels {
                    repository: repository(),
                    platform,
                })
                .set(n),
            GenerationSeries::ProfileEntries(profile) => m
                .profile_entries
                .get_or_create(&ProfileLabels {
                    repository: repository(),
                    profile,
                })
                .set(n),
            GenerationSeries::ProfileDropped(profile, reason) => m
                .profile_dropped
                .get_or_create(&ProfileDropLabels {
                    repository: repository(),
                    profile,
                    reason,
                })
                .set(n),
        };
    });
    m.stale.get_or_create(&labels).set(0);
    m.serving.get_or_create(&labels).set(1);
    m.last_success
        .get_or_create(&labels)
        .set(oai_pmh::unix_secs(generation.created));
}
