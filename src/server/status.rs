//! The status page at `/`, for people: per repository, what is served, how the last refresh
//! went, and when the next one is due.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use super::generation::{Generation, Summary};
use super::{Gateway, Repo, RepoStatus};
use crate::pipeline::human_duration;

/// Renders the status page.
pub(crate) fn render(gateway: &Gateway) -> String {
    let now = SystemTime::now();
    let mut out = String::new();
    head(&mut out, gateway, now);
    for repo in &gateway.repos() {
        row(&mut out, repo, now);
    }
    out.push_str(
        "</table>\n<p><a href=\"metrics\">metrics</a> · <a href=\"healthz\">healthz</a> · \
         <a href=\"readyz\">readyz</a></p>\n</body>\n</html>\n",
    );
    out
}

/// The page up to the table's first row: the style, what the gateway is, the column heads.
fn head(out: &mut String, gateway: &Gateway, now: SystemTime) {
    out.push_str(concat!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
        "<title>oai-bridge</title>\n<style>body{font-family:system-ui,sans-serif;margin:2em}",
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3em .6em;",
        "text-align:left;vertical-align:top}.bad{color:#a00}.ok{color:#070}",
        "pre{white-space:pre-wrap;margin:0}</style>\n</head>\n<body>\n",
        "<h1>oai-bridge</h1>\n"
    ));
    let _ = writeln!(
        out,
        "<p>OAI-PMH to sitemaps gateway {}. Public URL <a href=\"{url}\">{url}</a>; \
         <a href=\"{robots}\">robots.txt</a> lists every sitemap index. \
         Up for {}.</p>",
        env!("CARGO_PKG_VERSION"),
        human_duration(now.duration_since(gateway.started).unwrap_or_default()),
        url = escape(gateway.public_url.as_str()),
        robots = escape(&format!("{}robots.txt", gateway.public_url)),
    );
    let reload_error = gateway
        .reload_error
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    if let Some(error) = reload_error {
        let _ = writeln!(
            out,
            "<p class=\"bad\">The last reload of the configuration failed; the running \
             configuration stays:</p>\n<pre class=\"bad\">{}</pre>",
            escape(&error)
        );
    }
    out.push_str(
        "<table>\n<tr><th>repository</th><th>serving</th><th>records</th><th>URLs published</th>\
         <th>not published</th><th>shards</th><th>last success</th><th>last attempt</th>\
         <th>next refresh</th></tr>\n",
    );
}

/// One repository's row of the table.
fn row(out: &mut String, repo: &Repo, now: SystemTime) {
    let status = repo.status();
    let generation = repo.current();
    repository_cell(out, repo, generation.as_deref());
    match (&generation, &status.last_error) {
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
    match &generation {
        Some(g) => summary_cells(out, &g.summary, repo),
        None => out.push_str("<td></td><td></td><td></td><td></td>"),
    }
    refresh_cells(out, &status, now);
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
        "<tr><td><b>{}</b><br><small>{}</small>{platform}</td>",
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
    let _ = write!(
        out,
        "<td>{} ({} deleted){}{why_full}</td><td>{}",
        s.records,
        s.deleted,
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
            .map(|(reason, n)| format!("{} {n}", escape(reason)))
            .collect::<Vec<_>>()
            .join("<br>")
    };
    let _ = write!(out, "</td><td>{drops}</td><td>{}</td>", s.shards);
}

/// What each profile published beside the sitemap (Signmap, OCX, CDIF, DiWoo), a line each.
fn profiles(out: &mut String, s: &Summary, repo: &Repo) {
    if let Some(m) = &s.signmap {
        let _ = write!(
            out,
            "<br><a href=\"{}\">Signmap</a>: {} entries; not published: \
             no_landing_page {}, duplicate {}",
            escape(&m.index_url),
            m.published,
            m.no_landing_page,
            m.duplicate
        );
    }
    if let Some(o) = &s.ocx {
        let _ = write!(
            out,
            "<br><a href=\"{}\">OCX</a>: {} entries; not published: ocx_no_type {}, \
             no_landing_page {}",
            escape(&o.index_url),
            o.published,
            o.no_type,
            o.no_landing_page
        );
    }
    if let Some(c) = &s.cdif {
        let name = match &c.index_url {
            Some(url) => format!("<a href=\"{}\">CDIF</a>", escape(url)),
            None => "CDIF".to_owned(),
        };
        let lists = c.lists_index_url.as_ref().map_or_else(String::new, |url| {
            format!(" in <a href=\"{}\">lists</a>: {}", escape(url), c.lists)
        });
        let _ = write!(
            out,
            "<br>{name}: {} JSON-LD documents{lists}; not published: \
             no_landing_page {}",
            c.documents, c.no_landing_page
        );
    }
    for d in &s.diwoo {
        let _ = write!(
            out,
            "<br><a href=\"{}{}\">DiWoo</a> category {:03}: {} URLs; not \
             published: diwoo_requires_https {}, diwoo_requires_lastmod {}",
            escape(repo.setup().job.public_url.as_str()),
            crate::profiles::Profile::Diwoo(d.category).index_name(),
            d.category,
            d.urls,
            d.requires_https,
            d.requires_lastmod
        );
    }
}

/// The refresh cells: last success, last attempt (with what holds the repository back, and
/// the last failure), next refresh.
fn refresh_cells(out: &mut String, status: &RepoStatus, now: SystemTime) {
    let when = |t: Option<SystemTime>| t.map_or_else(|| "never".to_owned(), |t| ago(now, t));
    let _ = write!(
        out,
        "<td>{}</td><td>{}",
        when(status.last_success),
        when(status.last_attempt)
    );
    if status.refreshing {
        out.push_str("<br><i>refreshing now</i>");
    }
    notices(out, status, now);
    if let Some(e) = &status.last_error {
        let _ = write!(
            out,
            "<br><span class=\"bad\">failed ({} in a row):</span><pre>{}</pre>",
            status.failures,
            escape(e)
        );
    }
    let next = match (status.refreshing, status.next_refresh) {
        (true, _) => "running".to_owned(),
        (false, Some(t)) => ago(now, t),
        (false, None) => "not scheduled".to_owned(),
    };
    let _ = writeln!(out, "</td><td>{next}</td></tr>");
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
    use super::escape;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }
}
