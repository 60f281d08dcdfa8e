//! The status page at `/`, for people: per repository, what is served, how the last refresh
//! went, and when the next one is due; under it, what was not published and why (in words, with
//! examples), what its public URL needs, and its last refreshes.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::generation::{Generation, Summary};
use super::{Gateway, Repo, RepoStatus, history};
use crate::classify::Drop;
use crate::pipeline::{human_bytes, human_duration};
use crate::profiles::Profile;
use crate::profiles::report::Piece;
use crate::spill::{Room, Usage};

/// Rows of the status page shown at a time: a fleet of thousands of repositories is paged, so
/// that the page answers quickly and stays readable.
pub(crate) const PAGE_ROWS: usize = 100;

/// Repositories with a problem linked from the summary; beyond them, a link to the view of
/// those only.
const PROBLEMS_LISTED: usize = 20;

/// What the status page shows: one page of the repositories' rows, filtered by name and to
/// those with a problem. Read from the query (`?page=N&q=NAME&show=problems`); a parameter
/// that cannot be read is left out, so a bad link shows the first page rather than an error.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct View {
    /// The page, from 1.
    page: usize,
    /// Only the repositories whose name contains this, ignoring case; empty: all.
    q: String,
    /// Only the repositories with a problem.
    problems: bool,
}

impl View {
    /// The view a request's query asks for.
    pub(crate) fn parse(query: Option<&str>) -> Self {
        let mut view = Self::default();
        for (key, value) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
            match &*key {
                "page" => view.page = value.parse().unwrap_or(0),
                "q" => view.q = value.trim().to_owned(),
                "show" => view.problems = value == "problems",
                _ => {}
            }
        }
        view
    }

    /// The query of this view's page `page` (from 1), for a link: the filters kept.
    fn link(&self, page: usize) -> String {
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        if !self.q.is_empty() {
            query.append_pair("q", &self.q);
        }
        if self.problems {
            query.append_pair("show", "problems");
        }
        if page > 1 {
            query.append_pair("page", &page.to_string());
        }
        let query = query.finish();
        if query.is_empty() {
            // The status page itself: a link to "?" keeps the path, with or without a prefix.
            "?".to_owned()
        } else {
            format!("?{query}")
        }
    }

    /// Whether `name` passes the name filter.
    fn matches(&self, name: &str) -> bool {
        self.q.is_empty() || name.to_lowercase().contains(&self.q.to_lowercase())
    }
}

/// Renders the status page, every repository on it when they fit on one page.
#[cfg(test)]
pub(crate) fn render(gateway: &Gateway) -> String {
    let room = crate::spill::Room::of(&gateway.server.state_dir).ok();
    render_view(gateway, &View::default(), room)
}

/// Renders the status page as `view` asks: the summary over every repository, then the rows
/// of one page of those the filters keep. `room`: the state directory's file system's, asked
/// by the caller off the runtime ([`Gateway::state_dir_room`]).
pub(crate) fn render_view(gateway: &Gateway, view: &View, room: Option<Room>) -> String {
    let now = SystemTime::now();
    let mut out = String::new();
    let repos = gateway.repos();
    // Each repository's status and generation read once, so that the summary, its row and its
    // details agree even when a refresh swaps a generation in meanwhile.
    let seen: Vec<(RepoStatus, Option<Arc<Generation>>)> =
        repos.iter().map(|r| (r.status(), r.current())).collect();
    let states: Vec<State> = (seen.iter())
        .map(|(status, generation)| State::of(status, generation.is_some()))
        .collect();
    let mut kept: Vec<usize> = (0..repos.len())
        .filter(|&i| view.matches(&repos[i].name))
        .filter(|&i| !view.problems || states[i].problem().is_some())
        .collect();
    // The repository named exactly first, so that `?q=NAME` has its row on the first page
    // however many other names contain it.
    kept.sort_by_key(|&i| !repos[i].name.eq_ignore_ascii_case(&view.q));
    let pages = kept.len().div_ceil(PAGE_ROWS).max(1);
    // A page that does not exist (0, or past the last) is the first.
    let page = if (1..=pages).contains(&view.page) {
        view.page
    } else {
        1
    };
    let shown = &kept[(page - 1) * PAGE_ROWS..kept.len().min(page * PAGE_ROWS)];
    let running = gateway.pool.running();
    head(&mut out, gateway, &running, now, room);
    summary(&mut out, &repos, &states, shown);
    find_form(&mut out, view);
    pager(&mut out, view, page, pages, kept.len(), repos.len());
    table_head(&mut out);
    for &i in shown {
        let (repo, (status, generation), state) = (&repos[i], &seen[i], &states[i]);
        let held = running.iter().find(|u| u.name == repo.name);
        row(&mut out, repo, status, generation.as_deref(), held, now);
        details(
            &mut out,
            repo,
            generation.as_deref(),
            state.problem().is_some(),
        );
    }
    if shown.is_empty() {
        out.push_str("<tr><td colspan=\"9\">No repository matches.</td></tr>\n");
    }
    out.push_str("</table>\n");
    if pages > 1 {
        pager(&mut out, view, page, pages, kept.len(), repos.len());
    }
    out.push_str(
        "<p><a href=\"metrics\">metrics</a> · <a href=\"healthz\">healthz</a> · \
         <a href=\"readyz\">readyz</a></p>\n</body>\n</html>\n",
    );
    out
}

/// The form that finds a repository by name and keeps only those with a problem: a GET of the
/// page itself, no script.
fn find_form(out: &mut String, view: &View) {
    let _ = writeln!(
        out,
        "<form method=\"get\" id=\"find\"><label>Repository name <input type=\"search\" \
         name=\"q\" value=\"{}\"></label> <label><input type=\"checkbox\" name=\"show\" \
         value=\"problems\"{}> with a problem only</label> <button>Find</button></form>",
        escape(&view.q),
        if view.problems { " checked" } else { "" }
    );
}

/// Which rows the page shows, of how many, and links to the first, previous, next and last
/// pages of the same view.
fn pager(out: &mut String, view: &View, page: usize, pages: usize, kept: usize, all: usize) {
    let first = if kept == 0 {
        0
    } else {
        (page - 1) * PAGE_ROWS + 1
    };
    let last = kept.min(page * PAGE_ROWS);
    let mut filters = Vec::new();
    if !view.q.is_empty() {
        filters.push(format!(
            "whose name contains \u{201c}{}\u{201d}",
            escape(&view.q)
        ));
    }
    if view.problems {
        filters.push("with a problem".to_owned());
    }
    let of = if filters.is_empty() {
        format!("{all}")
    } else {
        format!("{kept} {} (of {all})", filters.join(" and "))
    };
    let _ = write!(
        out,
        "<p class=\"pager\">Rows {first}\u{2013}{last} of {of}; page {page} of {pages}."
    );
    let link =
        |to: usize, text: &str| format!(" <a href=\"{}\">{text}</a>", escape(&view.link(to)));
    if page > 1 {
        out.push_str(&link(1, "first"));
        out.push_str(&link(page - 1, "previous"));
    }
    if page < pages {
        out.push_str(&link(page + 1, "next"));
        out.push_str(&link(pages, "last"));
    }
    if !filters.is_empty() {
        out.push_str(" <a href=\"?\">all repositories</a>");
    }
    out.push_str("</p>\n");
}

/// Where a repository stands, for the summary above the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Serving {
    /// A generation, and the last refresh succeeded.
    Fresh,
    /// A generation, and the last refresh failed: the older one serves.
    Stale,
    /// No generation, and a refresh failed: its files answer 503.
    Nothing,
    /// No generation, no refresh ended yet: the first is scheduled, waits for a slot or runs.
    Waiting,
}

/// A repository's state as the summary counts it.
#[derive(Debug)]
struct State {
    serving: Serving,
    /// The shrink guard holds a publish back.
    shrink_held: bool,
    /// An IndexNow engine refused the pings (403, 422, ...).
    pings_stopped: bool,
}

impl State {
    fn of(status: &RepoStatus, serving: bool) -> Self {
        let serving = match (serving, status.last_error.is_some()) {
            (true, false) => Serving::Fresh,
            (true, true) => Serving::Stale,
            (false, true) => Serving::Nothing,
            (false, false) => Serving::Waiting,
        };
        Self {
            serving,
            shrink_held: status.held_shrink.is_some(),
            pings_stopped: (status.indexnow.as_ref()).is_some_and(|p| p.stopped.is_some()),
        }
    }

    /// What is wrong with the repository, in a few words; `None` when nothing is (waiting for
    /// a first refresh is no problem).
    fn problem(&self) -> Option<&'static str> {
        match (self.serving, self.shrink_held) {
            (Serving::Nothing, _) => Some("nothing served, the last refresh failed"),
            (Serving::Stale, _) => Some("stale, the last refresh failed"),
            (_, true) => Some("shrink held back"),
            _ if self.pings_stopped => Some("IndexNow pings stopped"),
            _ => None,
        }
    }
}

/// The anchor of a repository's row.
fn anchor(repo: &Repo) -> String {
    format!("repo-{}", repo.name)
}

/// Above the table: how many repositories serve fresh, stale, nothing yet, or wait for a first
/// refresh; and links to the rows of those with a problem, so that one among hundreds is found
/// without scrolling: to the row on this page when it is among the `shown`, else to the view
/// that finds it by name. The first [`PROBLEMS_LISTED`] only, then a link to the view of all of
/// them, so that a fleet where an upstream host is down does not list thousands here.
fn summary(out: &mut String, repos: &[Arc<Repo>], states: &[State], shown: &[usize]) {
    let count = |s: Serving| states.iter().filter(|st| st.serving == s).count();
    // Red only when there are some.
    let bad = |n: usize| if n > 0 { " class=\"bad\"" } else { "" };
    let (stale, nothing) = (count(Serving::Stale), count(Serving::Nothing));
    let _ = writeln!(
        out,
        "<p id=\"summary\"><b>{} {}:</b> <span class=\"ok\">{} fresh</span>, \
         <span{}>{stale} stale (the last refresh failed)</span>, <span{}>{nothing} \
         nothing yet (a refresh failed)</span>, {} waiting for a first refresh.</p>",
        repos.len(),
        if repos.len() == 1 {
            "repository"
        } else {
            "repositories"
        },
        count(Serving::Fresh),
        bad(stale),
        bad(nothing),
        count(Serving::Waiting),
    );
    let problems: Vec<(usize, &str)> = (states.iter().enumerate())
        .filter_map(|(i, state)| Some((i, state.problem()?)))
        .collect();
    if problems.is_empty() {
        out.push_str("<p class=\"ok\" id=\"problems\">No repository has a problem.</p>\n");
        return;
    }
    let listed: Vec<String> = (problems.iter().take(PROBLEMS_LISTED))
        .map(|&(i, problem)| {
            let repo = &repos[i];
            let page = if shown.contains(&i) {
                String::new()
            } else {
                View {
                    q: repo.name.clone(),
                    ..View::default()
                }
                .link(1)
            };
            format!(
                "<li><a href=\"{}#{}\">{}</a>: {problem}</li>",
                escape(&page),
                escape(&anchor(repo)),
                escape(&repo.name)
            )
        })
        .collect();
    let more = match problems.len().checked_sub(PROBLEMS_LISTED) {
        Some(more) if more > 0 => format!(
            "<li>and {more} more: <a href=\"{}\">the repositories with a problem</a></li>",
            escape(
                &View {
                    problems: true,
                    ..View::default()
                }
                .link(1)
            )
        ),
        _ => String::new(),
    };
    let _ = writeln!(
        out,
        "<div id=\"problems\"><p class=\"bad\"><b>{} with a problem:</b></p><ul>{}{more}</ul></div>",
        problems.len(),
        listed.concat()
    );
}

/// The page up to the summary: the style, what the gateway is, its refreshes (those `running`
/// with what they hold).
fn head(
    out: &mut String,
    gateway: &Gateway,
    running: &[Usage],
    now: SystemTime,
    room: Option<Room>,
) {
    out.push_str(concat!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
        "<title>oai-bridge</title>\n<style>body{font-family:system-ui,sans-serif;margin:2em}",
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3em .6em;",
        "text-align:left;vertical-align:top}.bad{color:#a00}.ok{color:#070}",
        // An error is one long word as often as not (a URL, a token): it may break anywhere,
        // or it would widen its column and push the others off the screen.
        "pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:0}.error{overflow-wrap:anywhere}",
        ".warn{background:#fff4e0;border:1px solid #e0a040;",
        "padding:.4em .8em;margin:.5em 0}tr.more>td{background:#fcfcfc;border-top:none}",
        "dl{margin:.3em 0}dt{margin-top:.4em}dd{margin-left:1.5em}code{font-size:90%}",
        "td.drops{white-space:nowrap}small{color:#444}details{margin:.4em 0}summary{cursor:pointer}",
        ".history td,.history th{font-size:90%;padding:.1em .5em}</style>\n</head>\n<body>\n",
        "<h1>oai-bridge</h1>\n"
    ));
    let _ = writeln!(
        out,
        "<p>OAI-PMH to sitemaps gateway {}. Public URL <code>{url}</code>; \
         <a href=\"{robots}\">robots.txt</a> lists every sitemap index. \
         Up for {}.</p>",
        env!("CARGO_PKG_VERSION"),
        human_duration(now.duration_since(gateway.started).unwrap_or_default()),
        url = escape(gateway.public_url.as_str()),
        robots = escape(&format!("{}robots.txt", gateway.public_url)),
    );
    let slots = gateway.refresh_slots();
    let _ = writeln!(
        out,
        "<p>Refreshes: {} running, {} waiting for a slot (at most {} at a time, {} per upstream \
         host; most at once so far: {}).</p>",
        slots.running, slots.waiting, slots.max, slots.per_host, slots.peak
    );
    memory(out, gateway, running, room);
    // Where the settings came from, as `serve --check-config` says it.
    let sources = gateway.sources.lines();
    if !sources.is_empty() {
        out.push_str(
            "<details><summary>Where the settings came from at the start</summary>\n<ul>\n",
        );
        for line in &sources {
            let _ = writeln!(out, "<li><code>{}</code></li>", escape(line));
        }
        out.push_str("</ul>\n<p>The others are their defaults.</p>\n</details>\n");
    }
    // What the log said at start, and `serve --check-config`.
    if let Some(warning) =
        crate::config::public_url_warning(gateway.server.public_url.as_ref(), &gateway.public_url)
    {
        let _ = writeln!(
            out,
            "<p class=\"warn\"><b>Warning:</b> {}.</p>",
            escape(&warning)
        );
    }
    let reload_error = gateway
        .reload_error
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    if let Some(error) = reload_error {
        out.push_str(
            "<p class=\"bad\">The last reload of the configuration failed; the running \
             configuration stays:</p>\n",
        );
        error_text(out, &error);
        out.push('\n');
    }
}

/// What the running refreshes hold, in memory and on disk, against the limits they are held to
/// and what the machine gives (`room`: the state directory's file system's).
fn memory(out: &mut String, gateway: &Gateway, running: &[Usage], room: Option<Room>) {
    let pool = &gateway.pool;
    let limits = pool.limits();
    let machine = gateway.machine.as_ref().map_or_else(String::new, |m| {
        format!(
            "; the process may use {} (<span title=\"{}\">the machine's or its cgroup's \
             limit</span>)",
            human_bytes(m.bytes),
            escape(&m.source)
        )
    });
    let _ = write!(
        out,
        "<p id=\"memory\">Memory: the running refreshes hold {} of {} (memory_budget_bytes; \
         each at most {}){machine}. Spill: {} on disk",
        human_bytes(pool.memory()),
        human_bytes(limits.memory),
        human_bytes(limits.per_refresh),
        human_bytes(pool.spill()),
    );
    match limits.spill_max {
        Some(max) => {
            let _ = write!(out, " of {} (spill_max_bytes)", human_bytes(max));
        }
        None => out.push_str(" (no spill_max_bytes)"),
    }
    if let Some(room) = room {
        let _ = write!(
            out,
            "; <span{}>{} free on the state directory's file system</span> (a spill stops {} \
             short of full)",
            if room.short() { " class=\"bad\"" } else { "" },
            human_bytes(room.free),
            human_bytes(room.keep)
        );
    }
    out.push('.');
    if !running.is_empty() {
        let each: Vec<String> = (running.iter())
            .map(|u| {
                format!(
                    "{}: {} in memory, {} spilled",
                    escape(&u.name),
                    human_bytes(u.memory),
                    human_bytes(u.spill)
                )
            })
            .collect();
        let _ = write!(out, " <small>{}</small>", each.join("; "));
    }
    out.push_str("</p>\n");
}

/// The table's column heads.
fn table_head(out: &mut String) {
    out.push_str(
        "<table>\n<tr><th>repository</th><th>serving</th><th>records</th><th>URLs published</th>\
         <th>not published</th><th>shards</th><th>last success</th><th>last attempt</th>\
         <th>next refresh</th></tr>\n",
    );
}

/// One repository's row of the table.
fn row(
    out: &mut String,
    repo: &Repo,
    status: &RepoStatus,
    generation: Option<&Generation>,
    held: Option<&Usage>,
    now: SystemTime,
) {
    repository_cell(out, repo, generation);
    match (generation, &status.last_error) {
        (None, _) => out.push_str("<td class=\"bad\">nothing yet (503)</td>"),
        (Some(g), Some(_)) => {
            let _ = write!(
                out,
                "<td class=\"bad\"><a href=\"{}\">index</a>: stale, the last refresh failed</td>",
                escape(&g.summary.index_url)
            );
        }
        (Some(g), None) => {
            let _ = write!(
                out,
                "<td class=\"ok\"><a href=\"{}\">index</a>: fresh</td>",
                escape(&g.summary.index_url)
            );
        }
    }
    match generation {
        Some(g) => summary_cells(out, &g.summary, repo),
        None => out.push_str("<td></td><td></td><td></td><td></td>"),
    }
    refresh_cells(out, status, held, now);
}

/// The repository's name, its upstream, and the platform in effect and why (what decides where
/// the landing pages come from).
fn repository_cell(out: &mut String, repo: &Repo, generation: Option<&Generation>) {
    let platform = generation
        .filter(|g| !g.summary.platform.is_empty())
        .map_or_else(String::new, |g| {
            format!(
                "<br><small title=\"{}\">platform: {}</small>",
                escape(&g.summary.landing_rule),
                escape(&g.summary.platform)
            )
        });
    let _ = write!(
        out,
        "<tr id=\"{}\"><td><b>{}</b><br><small>{}</small>{platform}</td>",
        escape(&anchor(repo)),
        escape(&repo.name),
        escape(&repo.setup().job.request.source.to_string())
    );
}

/// The served generation's cells: records (with the last harvest and why it was full), URLs
/// published (the sitemap's and each profile's), what was not published, shards.
fn summary_cells(out: &mut String, s: &Summary, repo: &Repo) {
    let why_full = s.full_reason.as_ref().map_or_else(String::new, |reason| {
        format!(
            "<br><small{}>why full: {}</small>",
            if reason.routine() {
                ""
            } else {
                " class=\"bad\""
            },
            escape(&reason.to_string())
        )
    });
    let records = records(s);
    let _ = write!(
        out,
        "<td>{records}{}{why_full}</td><td>{}",
        if s.harvest.is_empty() {
            String::new()
        } else {
            format!("<br><small>last harvest: {}</small>", escape(&s.harvest))
        },
        s.urls,
    );
    profiles(out, s, repo);
    let drops = if s.drops.is_empty() {
        "none".to_owned()
    } else {
        s.drops
            .iter()
            .map(|(reason, n)| {
                let drop = Drop::named(reason);
                let title = drop.map_or("", Drop::meaning);
                let mark = match verdict(drop) {
                    "" => String::new(),
                    v => format!(" {v}"),
                };
                format!(
                    "<span title=\"{}\">{} {n}</span>{mark}",
                    escape(title),
                    escape(reason)
                )
            })
            .collect::<Vec<_>>()
            .join("<br>")
    };
    let _ = write!(
        out,
        "</td><td class=\"drops\">{drops}</td><td>{}</td>",
        s.shards
    );
}

/// The records of a generation: distinct records, live and deleted, as `export` counts them
/// (through the store, its tombstones count as deleted records). A generation made before the
/// gateway counted its deleted records says so instead of claiming none.
fn records(s: &Summary) -> String {
    if s.deleted_counted {
        format!(
            "{} records: {} live, {} deleted",
            s.records,
            s.records.saturating_sub(s.deleted),
            s.deleted
        )
    } else {
        format!(
            "{} live records<br><small>deleted records not counted: a generation made by an \
             earlier version; the next refresh counts them</small>",
            s.records
        )
    }
}

/// What each profile published beside the sitemap (Signmap, OCX, CDIF, DiWoo), a line each,
/// in its own words ([`crate::profiles::report::Report::status_line`]); under the Signmap's,
/// what the Signposting made from it answered (the gateway's, not the profile's).
fn profiles(out: &mut String, s: &Summary, repo: &Repo) {
    let public_url = &repo.setup().job.public_url;
    for profile in &s.profiles {
        out.push_str("<br>");
        for piece in profile.report().status_line(public_url) {
            match piece {
                Piece::Text(text) => out.push_str(&escape(&text)),
                Piece::Link(text, href) => {
                    let _ = write!(out, "<a href=\"{}\">{}</a>", escape(&href), escape(text));
                }
            }
        }
        if profile.profile() == Profile::Signmap {
            signposting(out, &repo.signposting.now());
        }
    }
}

/// What the Signposting made from the Signmap answered since the gateway started.
fn signposting(out: &mut String, a: &super::linkset::AnsweredNow) {
    let Some(last) = a.last else {
        out.push_str("<br>Signposting: not asked yet");
        return;
    };
    let _ = write!(
        out,
        "<br>Signposting: {} linksets ({} asked for pages not listed), {} Link headers ({}), \
         last asked {} ago",
        a.linksets.0 + a.linksets.1,
        a.linksets.1,
        a.headers.0 + a.headers.1,
        a.headers.1,
        human_duration(SystemTime::now().duration_since(last).unwrap_or_default())
    );
    if !a.unknown.is_empty() {
        out.push_str("; pages asked for that are not listed, newest last:");
        for page in &a.unknown {
            let _ = write!(out, " <code>{}</code>", escape(page));
        }
    }
}

/// The row under a repository's: what to do about its public URL, what was not published and
/// why (in words, with examples), and its last refreshes with a chart of the URLs published.
/// Both collapsed, unless `open` (the repository has a problem): with hundreds of repositories
/// the page stays one line per repository.
fn details(out: &mut String, repo: &Repo, generation: Option<&Generation>, open: bool) {
    let entries = repo.history.entries();
    let _ = write!(out, "<tr class=\"more\"><td colspan=\"9\">");
    if let Some(g) = generation {
        cross_submission(out, repo, &g.summary);
        not_published(out, &g.summary, open);
        changelists(out, repo, g, SystemTime::now());
    }
    refreshes(out, &entries, open);
    out.push_str("</td></tr>\n");
}

/// What the repository's ResourceSync Change Lists hold: how many changes, since when, and
/// how long ago the newest was seen (a synchronising aggregator reads them).
fn changelists(out: &mut String, repo: &Repo, g: &Generation, now: SystemTime) {
    let Some(stats) = g.changelist_stats() else {
        return;
    };
    let at = |secs: u64| SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
    let newest = stats.newest.map_or_else(
        || "none kept".to_owned(),
        |n| format!("the newest seen {}", ago(now, at(n)).replace("<br>", " ")),
    );
    let capabilities = format!(
        "{}{}",
        repo.served().job.public_url,
        super::resourcesync::CAPABILITY_LIST
    );
    let _ = write!(
        out,
        "<p class=\"changelists\"><b>ResourceSync:</b> {} change{} in {} Change List{} since {}; \
         {newest} (<a href=\"{}\">Capability List</a>)</p>",
        stats.entries,
        if stats.entries == 1 { "" } else { "s" },
        stats.lists,
        if stats.lists == 1 { "" } else { "s" },
        httpdate::fmt_http_date(at(stats.from)),
        escape(&capabilities),
    );
}

/// A warning when the scope is not under the repository's public URL: crawlers then take the
/// sitemaps only through a `Sitemap:` line in the robots.txt of the repository's host.
fn cross_submission(out: &mut String, repo: &Repo, s: &Summary) {
    let served = repo.served();
    let public = &served.job.public_url;
    if s.needs_cross_submission(public) != Some(true) {
        return;
    }
    let _ = write!(
        out,
        "<p class=\"warn\"><b>Cross-submission needed:</b> the scope {} is not under the public \
         URL {}, so search engines accept these sitemaps only when the repository's host \
         announces them: add <code>Sitemap: {}</code> to {}/robots.txt.</p>",
        escape(&s.scope.join(", ")),
        escape(public.as_str()),
        escape(&s.index_url),
        escape(&s.scope.first().map_or_else(String::new, |p| {
            url::Url::parse(p)
                .map(|u| u.origin().ascii_serialization())
                .unwrap_or_default()
        })),
    );
}

/// Each reason something was not published: its count, what it means and whether that is
/// expected, and a few examples (record, and value when known); collapsed unless `open`.
fn not_published(out: &mut String, s: &Summary, open: bool) {
    if s.drops.is_empty() {
        return;
    }
    let _ = write!(
        out,
        "<details class=\"drops\"{}><summary><b>Not published, and why</b>{}</summary><dl>",
        if open { " open" } else { "" },
        match s.drop_examples_from {
            Some(t) => format!(
                " <small>(examples from the whole render of {}: later refreshes patched the \
                 sitemap with the changed records only)</small>",
                httpdate::fmt_http_date(SystemTime::UNIX_EPOCH + Duration::from_secs(t))
            ),
            None => String::new(),
        }
    );
    for (reason, n) in &s.drops {
        let drop = Drop::named(reason);
        let verdict = verdict(drop);
        let _ = write!(
            out,
            "<dt><code>{}</code> {n} {verdict}</dt><dd>{}",
            escape(reason),
            escape(drop.map_or("", Drop::meaning))
        );
        match s.drop_examples.get(reason) {
            Some(examples) if !examples.is_empty() => {
                let shown: Vec<String> = (examples.iter())
                    .map(|e| match (&e.record, &e.value) {
                        (Some(r), Some(v)) => {
                            format!("<code>{}</code> in {}", escape(v), escape(r))
                        }
                        (Some(r), None) => escape(r),
                        (None, Some(v)) => format!("<code>{}</code>", escape(v)),
                        (None, None) => String::new(),
                    })
                    .collect();
                let _ = write!(out, "<br><small>e.g. {}</small>", shown.join("; "));
            }
            _ => out.push_str("<br><small>no examples kept</small>"),
        }
        out.push_str("</dd>");
    }
    out.push_str("</dl></details>");
}

/// The last refreshes: a chart of the URLs published, and a table of each; collapsed unless
/// `open`.
fn refreshes(out: &mut String, entries: &[history::Entry], open: bool) {
    let Some(svg) = history::chart(entries) else {
        out.push_str("<p><small>no refresh recorded yet</small></p>");
        return;
    };
    let failed = entries.iter().filter(|e| e.error.is_some()).count();
    let _ = write!(
        out,
        "<details class=\"history\"{}><summary><b>{}</b> ({failed} failed): URLs \
         published after each, oldest left</summary>{svg}<table><tr><th>ended</th><th>kind</th>\
         <th>took</th><th>records received</th><th>URLs published</th><th>memory, spilled \
         (most)</th><th>result</th></tr>",
        if open { " open" } else { "" },
        match entries.len() {
            1 => "The last refresh".to_owned(),
            n => format!("The last {n} refreshes"),
        }
    );
    for e in entries.iter().rev() {
        let when = httpdate::fmt_http_date(SystemTime::UNIX_EPOCH + Duration::from_secs(e.ended));
        let result = match &e.error {
            None => "<span class=\"ok\">ok</span>".to_owned(),
            Some(error) => {
                let mut text = String::from("<span class=\"bad\">failed:</span>");
                error_text(&mut text, error);
                text
            }
        };
        let held = match (e.memory, e.spilled) {
            (None, None) => "—".to_owned(),
            (memory, spilled) => format!(
                "{}, {}",
                human_bytes(memory.unwrap_or(0)),
                human_bytes(spilled.unwrap_or(0))
            ),
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{held}</td>\
             <td>{result}</td></tr>",
            escape(&when),
            if e.kind.is_empty() {
                "—".to_owned()
            } else {
                escape(&e.kind)
            },
            human_duration(Duration::try_from_secs_f64(e.seconds).unwrap_or_default()),
            e.received.map_or_else(|| "—".to_owned(), |n| n.to_string()),
            e.urls.map_or_else(|| "—".to_owned(), |n| n.to_string()),
        );
    }
    out.push_str("</table></details>");
}

/// The refresh cells: last success, last attempt (with what the running refresh holds, what
/// holds the repository back, and the last failure), next refresh.
fn refresh_cells(out: &mut String, status: &RepoStatus, held: Option<&Usage>, now: SystemTime) {
    let when = |t: Option<SystemTime>| t.map_or_else(|| "never".to_owned(), |t| ago(now, t));
    let _ = write!(
        out,
        "<td>{}</td><td>{}",
        when(status.last_success),
        when(status.last_attempt)
    );
    if status.refreshing {
        out.push_str("<br><i>refreshing now</i>");
        if let Some(u) = held {
            let _ = write!(
                out,
                "<br><small class=\"held\">holds {} in memory, {} spilled to disk</small>",
                human_bytes(u.memory),
                human_bytes(u.spill)
            );
        }
    } else if status.waiting_for_slot {
        out.push_str("<br><i>due, waiting for a slot</i>");
    }
    notices(out, status, now);
    fleet_notes(out, status, now);
    indexnow_notes(out, status, now);
    if let Some(e) = &status.last_error {
        let _ = write!(
            out,
            "<br><span class=\"bad\">failed ({} in a row):</span>",
            status.failures,
        );
        error_text(out, e);
    }
    let next = match (status.refreshing, status.next_refresh) {
        (true, _) => "running".to_owned(),
        (false, _) if status.waiting_for_slot => "waiting for a slot".to_owned(),
        (false, Some(t)) => ago(now, t),
        (false, None) => "not scheduled".to_owned(),
    };
    let _ = writeln!(out, "</td><td>{next}</td></tr>");
}

/// The repository's place in the fleet (the lease, its token, how far this gateway is behind
/// the generation recorded) and its last upload to the bucket.
fn fleet_notes(out: &mut String, status: &RepoStatus, now: SystemTime) {
    // Short, inside the cell's line: the time without its date.
    let ago = |t: SystemTime| {
        let took = now.duration_since(t).unwrap_or_default();
        format!("{} ago", human_duration(took))
    };
    if let Some(view) = &status.fleet {
        let fence = view
            .fence
            .map_or_else(String::new, |f| format!(" (fence {f})"));
        let lease = match &view.holder {
            Some(holder) => format!("held by {}{fence}", escape(holder)),
            None => format!("free{}", fence.replace("(fence", "(last fence")),
        };
        let _ = write!(out, "<br><small>lease: {lease}");
        match view.behind {
            0 => out.push_str("; serving the fleet's generation"),
            n => {
                let since = view
                    .behind_since
                    .map_or_else(String::new, |t| format!(", recorded {}", ago(t)));
                let _ = write!(
                    out,
                    "; <span class=\"bad\">behind by {n} generation{}{since}</span>",
                    if n == 1 { "" } else { "s" }
                );
            }
        }
        out.push_str("</small>");
    }
    if let Some(u) = &status.last_upload {
        let _ = write!(out, "<br><small>last upload {}: ", ago(u.at));
        match &u.error {
            Some(e) => {
                out.push_str("<span class=\"bad\">failed</span>");
                error_text(out, e);
            }
            None => {
                let n = &u.uploaded;
                let _ = write!(
                    out,
                    "{} files sent ({}), {} unchanged, {} retired, {} deleted",
                    n.uploaded,
                    human_bytes(n.uploaded_bytes),
                    n.files.saturating_sub(n.uploaded),
                    n.retired,
                    n.deleted
                );
            }
        }
        out.push_str("</small>");
    }
}

/// The repository's IndexNow pings: the engine, what waits in the outbox, the last batches and
/// their answers, a retry, a stop and why. Never the key.
fn indexnow_notes(out: &mut String, status: &RepoStatus, now: SystemTime) {
    let Some(p) = &status.indexnow else {
        return;
    };
    let ago = |t: SystemTime| {
        let took = now.duration_since(t).unwrap_or_default();
        format!("{} ago", human_duration(took))
    };
    let _ = write!(
        out,
        "<br><small>IndexNow (key set) to {}: {} batch{} ({} pages) waiting",
        escape(&p.endpoint),
        p.pending.0,
        if p.pending.0 == 1 { "" } else { "es" },
        p.pending.1
    );
    if let Some((at, q)) = &p.queued {
        let _ = write!(out, "; last refresh queued {} pages {}", q.urls, ago(*at));
        if q.outside > 0 {
            let _ = write!(
                out,
                ", left out {} outside the key file's location",
                q.outside
            );
        }
    }
    for s in &p.sent {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(s.at.max(0) as u64);
        let _ = write!(
            out,
            "<br>batch {} ({}: {} created, {} updated, {} deleted): {} after {} tr{}, {}",
            s.seq,
            escape(&s.host),
            s.counts.created,
            s.counts.updated,
            s.counts.deleted,
            s.status,
            s.tries,
            if s.tries == 1 { "y" } else { "ies" },
            ago(at)
        );
    }
    if let Some(note) = &p.note {
        let _ = write!(out, "<br>{}", escape(note));
    }
    if let Some((tries, next, said)) = &p.retrying {
        let wait = next.duration_since(now).unwrap_or_default();
        let _ = write!(
            out,
            "<br><span class=\"bad\">retrying</span> after {tries} tr{} (next in {}): {}",
            if *tries == 1 { "y" } else { "ies" },
            human_duration(wait),
            escape(said)
        );
    }
    out.push_str("</small>");
    if let Some(why) = &p.stopped {
        out.push_str(
            "<br><span class=\"bad\">IndexNow pings stopped</span> until \
             [repository.indexnow] changes or the gateway restarts:",
        );
        error_text(out, why);
    }
    if let Some(e) = &p.error {
        out.push_str("<br><span class=\"bad\">IndexNow outbox:</span>");
        error_text(out, e);
    }
}

/// What the guards hold back: a shrink, a list that ended short, refused selective harvesting.
fn notices(out: &mut String, status: &RepoStatus, now: SystemTime) {
    if let Some(h) = &status.held_shrink {
        let _ = write!(
            out,
            "<br><span class=\"bad\">shrink held back:</span> a harvest would publish {} \
             URLs where {} are published; the next full harvest publishes it if it shows \
             the same (or restart with --accept-shrink)",
            h.harvested, h.published
        );
    }
    if let Some(l) = &status.short_list {
        let _ = write!(
            out,
            "<br><span class=\"bad\">list ended short:</span> the last full harvest's list{} \
             ended after {} of the {} records it announced (completeListSize; so for {}); \
             its records are published, none removed for missing from it; the next \
             refresh harvests in full (unless it ended at the same place twice)",
            l.set
                .as_ref()
                .map(|set| format!(" (set {})", escape(set)))
                .unwrap_or_default(),
            l.delivered,
            l.announced,
            human_duration(
                now.duration_since(
                    SystemTime::UNIX_EPOCH + Duration::from_secs(l.since.max(0) as u64)
                )
                .unwrap_or_default()
            )
        );
    }
    if let Some(r) = &status.selective_refused {
        let _ = write!(
            out,
            "<br><span class=\"bad\">selective harvesting refused:</span> {} to {}; \
             refreshes harvest in full until the full-harvest interval has passed",
            escape(&r.answer),
            escape(&r.url)
        );
    }
}

/// Characters of an error shown before it is cut short.
const ERROR_SHOWN: usize = 300;

/// An error, breaking anywhere (the style's `pre`); one longer than [`ERROR_SHOWN`] characters
/// cut short there, the whole of it one click away, so that a long error neither widens its
/// column nor makes its row a page long.
fn error_text(out: &mut String, error: &str) {
    let chars = error.chars().count();
    if chars <= ERROR_SHOWN {
        let _ = write!(out, "<pre class=\"error\">{}</pre>", escape(error));
        return;
    }
    let shown: String = error.chars().take(ERROR_SHOWN).collect();
    let _ = write!(
        out,
        "<pre class=\"error\">{}…</pre><details class=\"error\"><summary>the whole error \
         ({chars} characters)</summary><pre>{}</pre></details>",
        escape(&shown),
        escape(error)
    );
}

/// "3 min ago" or "in 2 h" plus the UTC time.
fn ago(now: SystemTime, t: SystemTime) -> String {
    let date = httpdate::fmt_http_date(t);
    match now.duration_since(t) {
        Ok(d) => format!("{} ago<br><small>{date}</small>", human_duration(d)),
        Err(e) => format!(
            "in {}<br><small>{date}</small>",
            human_duration(e.duration())
        ),
    }
}

/// Whether a reason not to publish is expected, as the page marks it; nothing for a reason this
/// version does not know (from a newer generation's manifest).
fn verdict(drop: Option<Drop>) -> &'static str {
    match drop {
        Some(d) if d.expected() => "<span class=\"ok\">expected</span>",
        Some(_) => "<span class=\"bad\">check if many</span>",
        None => "",
    }
}

/// Escapes text for HTML content and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{ERROR_SHOWN, PAGE_ROWS, PROBLEMS_LISTED, Summary, View, escape, records};

    /// A gateway of `n` repositories named `j0000`, `j0001`... (none refreshed), its state in
    /// `state`.
    fn fleet(n: usize, state: &std::path::Path) -> crate::server::Gateway {
        let mut text = format!("[server]\nstate_dir = {:?}\n", state.display().to_string());
        for i in 0..n {
            text.push_str(&format!(
                "[[repository]]\nname = \"j{i:04}\"\nbase_url = \"j{i:04}.xml\"\n"
            ));
        }
        let config = crate::Config::parse(&text, "bridge.toml", state).unwrap();
        let public = url::Url::parse("https://maps.example/").unwrap();
        crate::server::Gateway::new(&config, public).unwrap()
    }

    /// Issue 30: what each running refresh holds, in memory and spilled, is on its row and in
    /// the head of the page, and in /metrics: a series each for the repositories with series of
    /// their own, the others summed under `_other`; the pool's totals and limits beside. A
    /// refresh that ended holds nothing.
    #[test]
    fn running_refreshes_show_their_memory_and_spill() {
        let state = tempfile::tempdir().unwrap();
        let mut text = format!(
            "[server]\nstate_dir = {:?}\nmetrics_repository_series = 1\n\
             memory_budget_bytes = 1048576\nspill_max_bytes = 1073741824\n",
            state.path().display().to_string()
        );
        for name in ["a", "b", "c"] {
            text.push_str(&format!(
                "[[repository]]\nname = \"{name}\"\nbase_url = \"{name}.xml\"\n"
            ));
        }
        let config = crate::Config::parse(&text, "bridge.toml", state.path()).unwrap();
        let public = url::Url::parse("https://maps.example/").unwrap();
        let gateway = crate::server::Gateway::new(&config, public).unwrap();
        let spill_dir = tempfile::tempdir().unwrap();
        let mut refreshes = Vec::new();
        for (name, memory, spilled) in [("a", 1000, 300), ("b", 2000, 0), ("c", 4000, 500)] {
            let account = gateway.pool.account(name);
            let budget =
                crate::spill::Budget::new(spill_dir.path().to_owned(), 64).within(&account);
            let mut share = crate::spill::Share::new(&budget, 64);
            share.count(memory);
            let mut folder = crate::spill::Folder::new(&budget);
            let run = (spilled > 0).then(|| {
                let mut w = folder.create("urls").unwrap();
                w.bytes(&vec![0; spilled]).unwrap();
                w.finish().unwrap()
            });
            gateway.repo(name).unwrap().update(|s| s.refreshing = true);
            refreshes.push((account, share, folder, run));
        }
        let page = super::render(&gateway);
        for said in [
            "Memory: the running refreshes hold 6.8 KiB of 1.0 MiB (memory_budget_bytes; each \
             at most 192.0 MiB)",
            "Spill: 800 B on disk of 1.0 GiB (spill_max_bytes)",
            "a: 1000 B in memory, 300 B spilled; b: 2.0 KiB in memory, 0 B spilled",
            "holds 3.9 KiB in memory, 500 B spilled to disk",
        ] {
            assert!(page.contains(said), "{said}: {page}");
        }
        let metrics = |want: &[&str]| {
            let room = crate::spill::Room::of(&gateway.server.state_dir).ok();
            let text = crate::server::scrape::scrape(&gateway, room);
            for line in want {
                assert!(text.contains(&format!("\n{line}\n")), "{line}: {text}");
            }
        };
        metrics(&[
            "oai_bridge_refresh_memory_bytes{repository=\"a\"} 1000",
            "oai_bridge_refresh_memory_bytes{repository=\"_other\"} 6000",
            "oai_bridge_refresh_spill_bytes{repository=\"a\"} 300",
            "oai_bridge_refresh_spill_bytes{repository=\"_other\"} 500",
            "oai_bridge_refreshes_memory_bytes 7000",
            "oai_bridge_refreshes_spill_bytes 800",
            "oai_bridge_memory_budget_bytes 1048576",
            "oai_bridge_refresh_memory_budget_bytes 201326592",
            "oai_bridge_spill_max_bytes 1073741824",
        ]);
        drop(refreshes);
        metrics(&[
            "oai_bridge_refresh_memory_bytes{repository=\"a\"} 0",
            "oai_bridge_refresh_spill_bytes{repository=\"_other\"} 0",
            "oai_bridge_refreshes_memory_bytes 0",
            "oai_bridge_refreshes_spill_bytes 0",
        ]);
    }

    /// The names of the rows a page shows, in order.
    fn rows(page: &str) -> Vec<&str> {
        page.split("<tr id=\"repo-")
            .skip(1)
            .map(|rest| &rest[..rest.find('"').unwrap()])
            .collect()
    }

    /// The page `query` asks for.
    fn page(gateway: &crate::server::Gateway, query: &str) -> String {
        let room = crate::spill::Room::of(&gateway.server.state_dir).ok();
        super::render_view(gateway, &View::parse(Some(query)), room)
    }

    /// Issue 30: a fleet's rows come a page at a time, with links between the pages; the
    /// summary counts every repository whatever the page; a page that does not exist, or a
    /// parameter that cannot be read, shows the first page.
    #[test]
    fn the_rows_come_a_page_at_a_time() {
        let state = tempfile::tempdir().unwrap();
        let gateway = fleet(2 * PAGE_ROWS + 5, state.path());
        let first = page(&gateway, "");
        let names = rows(&first);
        assert_eq!(names.len(), PAGE_ROWS);
        assert_eq!((names[0], names[PAGE_ROWS - 1]), ("j0000", "j0099"));
        assert!(first.contains("<b>205 repositories:</b>"), "{first}");
        assert!(
            first.contains("Rows 1\u{2013}100 of 205; page 1 of 3."),
            "{first}"
        );
        assert!(first.contains("<a href=\"?page=2\">next</a>"), "{first}");
        assert!(first.contains("<a href=\"?page=3\">last</a>"), "{first}");
        assert!(!first.contains(">previous</a>"), "{first}");

        let third = page(&gateway, "page=3");
        assert_eq!(rows(&third), ["j0200", "j0201", "j0202", "j0203", "j0204"]);
        assert!(third.contains("<b>205 repositories:</b>"), "{third}");
        assert!(
            third.contains("<a href=\"?page=2\">previous</a>"),
            "{third}"
        );
        assert!(third.contains("<a href=\"?\">first</a>"), "{third}");
        assert!(!third.contains(">next</a>"), "{third}");

        for bad in [
            "page=0", "page=4", "page=-1", "page=x", "page=", "page=1e3", "show=x",
        ] {
            assert_eq!(rows(&page(&gateway, bad)), names, "{bad}");
        }
        // The default view is the first page.
        assert_eq!(super::render(&gateway), first);
    }

    /// Issue 30: `?q=` finds repositories by a part of their name, ignoring case, the one of
    /// that very name first; the form shows what was asked, escaped, and the links between the
    /// pages keep it, encoded.
    #[test]
    fn a_repository_is_found_by_name() {
        let state = tempfile::tempdir().unwrap();
        let gateway = fleet(2 * PAGE_ROWS + 5, state.path());
        let found = page(&gateway, "q=J011");
        assert_eq!(
            rows(&found),
            [
                "j0110", "j0111", "j0112", "j0113", "j0114", "j0115", "j0116", "j0117", "j0118",
                "j0119"
            ]
        );
        assert!(found.contains("name=\"q\" value=\"J011\""), "{found}");
        assert!(found.contains("<b>205 repositories:</b>"), "{found}");
        assert!(
            found.contains(
                "Rows 1\u{2013}10 of 10 whose name contains \u{201c}J011\u{201d} (of 205)"
            ),
            "{found}"
        );
        // The exact name first, then the others in the configuration's order.
        assert_eq!(rows(&page(&gateway, "q=j001"))[..2], ["j0010", "j0011"]);
        assert_eq!(rows(&page(&gateway, "q=j0012"))[..], ["j0012"]);
        let many = page(&gateway, "q=j0");
        assert_eq!(rows(&many).len(), PAGE_ROWS);
        assert!(
            many.contains("<a href=\"?q=j0&amp;page=2\">next</a>"),
            "{many}"
        );
        let none = page(&gateway, "q=nothing");
        assert!(rows(&none).is_empty());
        assert!(none.contains("No repository matches."), "{none}");

        // What was asked is escaped in the form, and encoded (then escaped) in the links.
        let odd = "<b>\"&'x y";
        let query = format!(
            "q={}",
            url::form_urlencoded::byte_serialize(odd.as_bytes()).collect::<String>()
        );
        let asked = page(&gateway, &query);
        assert!(
            asked.contains("value=\"&lt;b&gt;&quot;&amp;&#39;x y\""),
            "{asked}"
        );
        assert!(!asked.contains("<b>\""), "{asked}");
        assert_eq!(
            View::parse(Some(&query)).link(2),
            "?q=%3Cb%3E%22%26%27x+y&page=2"
        );
        assert_eq!(
            escape(&View::parse(Some(&query)).link(2)),
            "?q=%3Cb%3E%22%26%27x+y&amp;page=2"
        );
    }

    /// Issue 33: a repository's row shows its lease (holder, token), how far this gateway is
    /// behind the fleet's generation, and its last upload, or why that failed.
    #[test]
    fn a_row_shows_the_lease_the_lag_and_the_last_upload() {
        let state = tempfile::tempdir().unwrap();
        let gateway = fleet(2, state.path());
        let repos = gateway.repos();
        let recorded = std::time::SystemTime::now() - std::time::Duration::from_secs(90);
        {
            let mut s = repos[0].status.lock().unwrap();
            s.fleet = Some(super::super::fleet::FleetView {
                holder: Some("gw<2>:77:0a".into()),
                fence: Some(42),
                generation_fence: Some(41),
                behind: 3,
                behind_since: Some(recorded),
                ..Default::default()
            });
            s.last_upload = Some(super::super::LastUpload {
                at: recorded,
                uploaded: crate::bucket::Uploaded {
                    files: 10,
                    bytes: 5000,
                    uploaded: 4,
                    uploaded_bytes: 2048,
                    deleted: 1,
                    retired: 2,
                },
                error: None,
            });
        }
        {
            let mut s = repos[1].status.lock().unwrap();
            s.fleet = Some(super::super::fleet::FleetView {
                fence: Some(42),
                ..Default::default()
            });
            s.last_upload = Some(super::super::LastUpload {
                at: recorded,
                uploaded: crate::bucket::Uploaded::default(),
                error: Some("lost the lease: fence 41 was superseded by 42".into()),
            });
        }
        let html = page(&gateway, "");
        assert!(
            html.contains(
                "lease: held by gw&lt;2&gt;:77:0a (fence 42); <span class=\"bad\">behind by 3 \
                 generations, recorded 1 min "
            ),
            "{html}"
        );
        assert!(
            html.contains(
                "s ago: 4 files sent (2.0 KiB), 6 unchanged, 2 retired, \
                 1 deleted</small>"
            ),
            "{html}"
        );
        assert!(
            html.contains("lease: free (last fence 42); serving the fleet's generation"),
            "{html}"
        );
        assert!(
            html.contains(
                "<span class=\"bad\">failed</span><pre class=\"error\">lost the lease: fence 41 \
                 was superseded by 42</pre>"
            ),
            "{html}"
        );
    }

    /// Issue 30: `?show=problems` keeps the repositories with a problem; the summary lists the
    /// first of them, linked to their rows (on this page, or found by name), and links to the
    /// view of all of them beyond that.
    #[test]
    fn the_problems_are_a_view_of_their_own() {
        let state = tempfile::tempdir().unwrap();
        let gateway = fleet(2 * PAGE_ROWS + 5, state.path());
        let repos = gateway.repos();
        let broken: Vec<usize> = (0..repos.len()).step_by(7).collect();
        for &i in &broken {
            repos[i].status.lock().unwrap().last_error = Some("HTTP 500".to_owned());
        }
        let first = page(&gateway, "");
        assert!(
            first.contains(&format!("<b>{} with a problem:</b>", broken.len())),
            "{first}"
        );
        // On this page: the row's anchor; further on: found by name.
        assert!(first.contains("<li><a href=\"#repo-j0007\">j0007</a>: nothing served"));
        let listed: Vec<&str> = first.matches("<li><a href=").collect();
        assert_eq!(listed.len(), PROBLEMS_LISTED, "{first}");
        assert!(
            first.contains(&format!(
                "<li>and {} more: <a href=\"?show=problems\">the repositories with a problem</a></li>",
                broken.len() - PROBLEMS_LISTED
            )),
            "{first}"
        );
        let later = page(&gateway, "page=3");
        assert!(
            later.contains("<li><a href=\"?q=j0007#repo-j0007\">j0007</a>: nothing served"),
            "{later}"
        );
        // The link reaches the row.
        assert_eq!(rows(&page(&gateway, "q=j0007")), ["j0007"]);

        let problems = page(&gateway, "show=problems");
        let names: Vec<String> = broken.iter().map(|i| format!("j{i:04}")).collect();
        assert_eq!(rows(&problems), names);
        assert!(
            problems.contains("name=\"show\" value=\"problems\" checked"),
            "{problems}"
        );
        // Both filters at once, and a page of them.
        assert_eq!(
            rows(&page(&gateway, "show=problems&q=j01")),
            [
                "j0105", "j0112", "j0119", "j0126", "j0133", "j0140", "j0147", "j0154", "j0161",
                "j0168", "j0175", "j0182", "j0189", "j0196"
            ]
        );
        assert!(rows(&page(&gateway, "show=problems&q=j01&page=2")).len() == 14);
    }

    /// The `<pre class="error">` blocks of `page` that show without a click (not in a
    /// `<details>`), their text.
    fn shown_errors(page: &str) -> Vec<&str> {
        let mut shown = Vec::new();
        let mut rest = page;
        while let Some(at) = rest.find("<pre class=\"error\">") {
            let text = &rest[at + "<pre class=\"error\">".len()..];
            let end = text.find("</pre>").unwrap();
            shown.push(&text[..end]);
            rest = &text[end..];
        }
        shown
    }

    /// A long error (one unbroken word, as a URL with its resumption token) may break
    /// anywhere, and shows its first characters only, the whole of it in a `<details>`: it
    /// neither widens its column off the screen nor makes the row a page long. A short one is
    /// shown whole.
    #[test]
    fn a_long_error_breaks_anywhere_and_is_cut_short() {
        let state = tempfile::tempdir().unwrap();
        let text = format!(
            "[server]\nstate_dir = {:?}\n[[repository]]\nname = \"r\"\nbase_url = \"r.xml\"\n\
             [[repository]]\nname = \"s\"\nbase_url = \"s.xml\"\n",
            state.path().display().to_string()
        );
        let config = crate::Config::parse(&text, "bridge.toml", state.path()).unwrap();
        let public = url::Url::parse("https://maps.example/").unwrap();
        let gateway = crate::server::Gateway::new(&config, public).unwrap();
        let long = format!(
            "cannot harvest https://dspace.example.edu/server/oai/request?verb=ListRecords&\
             resumptionToken={}: HTTP 500",
            "x".repeat(2000)
        );
        let short = "cannot read s.xml: No such file or directory";
        let repos = gateway.repos();
        repos[0].status.lock().unwrap().last_error = Some(long.clone());
        repos[1].status.lock().unwrap().last_error = Some(short.to_owned());
        *gateway.reload_error.lock().unwrap() = Some(long.replace("x", "y"));
        let page = super::render(&gateway);

        // The style lets an error break anywhere.
        assert!(
            page.contains("pre{white-space:pre-wrap;overflow-wrap:anywhere;"),
            "{page}"
        );
        let shown = shown_errors(&page);
        assert_eq!(shown.len(), 3, "{shown:?}");
        for text in &shown {
            let text = text.replace("&amp;", "&");
            assert!(text.chars().count() <= ERROR_SHOWN + 1, "{text}");
        }
        let cut: String = long.chars().take(ERROR_SHOWN).collect();
        assert!(
            shown.contains(&format!("{}…", escape(&cut)).as_str()),
            "{shown:?}"
        );
        assert!(shown.contains(&short), "{shown:?}");
        // The whole of each long error, a click away; none of the short one.
        for whole in [&long, &long.replace("x", "y")] {
            assert!(
                page.contains(&format!(
                    "<summary>the whole error ({} characters)</summary><pre>{}</pre></details>",
                    whole.chars().count(),
                    escape(whole)
                )),
                "{page}"
            );
        }
        assert_eq!(page.matches("the whole error (").count(), 2, "{page}");
    }

    /// Issue 22: live and deleted records as `export` says them ("320 distinct, 13 deleted");
    /// a manifest from before the deleted records were counted (it said "307 (0 deleted)")
    /// does not claim none.
    #[test]
    fn records_read_as_live_and_deleted() {
        let s = Summary {
            records: 320,
            deleted: 13,
            deleted_counted: true,
            ..Summary::default()
        };
        assert_eq!(records(&s), "320 records: 307 live, 13 deleted");
        let old: Summary = serde_json::from_str(
            r#"{"source":"s","pages":1,"records_seen":307,"records":307,"deleted":0,"urls":456,
               "drops":{"persistent_id":216},"shards":1,"build_ms":5,"index_url":"u"}"#,
        )
        .unwrap();
        let text = records(&old);
        assert!(text.starts_with("307 live records<br>"), "{text}");
        assert!(text.contains("deleted records not counted"), "{text}");
    }

    #[test]
    fn escapes_markup() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }
}
