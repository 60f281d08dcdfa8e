//! Each repository's last refreshes, for the status page: kept in memory and in a small JSON
//! Lines file in the repository's state folder, so a restart keeps them. Losing the file loses
//! nothing else: a refresh never fails because its history cannot be written (it warns). The
//! file is written on a blocking thread: a refresh ends on the runtime that answers requests.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::render::sitemap::escape;

/// Refreshes kept, in memory and in the file.
pub(crate) const KEEP: usize = 20;

/// The file in the repository's state folder.
pub(crate) const FILE: &str = "history.jsonl";

/// Longest error kept, in bytes.
const ERROR_BYTES: usize = 300;

/// One refresh that ended (one interrupted by shutdown is not one).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Entry {
    /// When it ended, in Unix seconds.
    pub(crate) ended: u64,
    /// `full` or `incremental`; empty when the harvest did not complete.
    #[serde(default)]
    pub(crate) kind: String,
    /// How long it took, in seconds.
    pub(crate) seconds: f64,
    /// Records the harvest received (changed or new, deletions included), once it completed.
    #[serde(default)]
    pub(crate) received: Option<u64>,
    /// URLs the sitemap published, when the refresh succeeded.
    #[serde(default)]
    pub(crate) urls: Option<u64>,
    /// Why it failed (the error's first line, shortened); `None`: it succeeded.
    #[serde(default)]
    pub(crate) error: Option<String>,
    /// The most memory its collectors held at once (the URL inventory, the profiles' record
    /// versions), in bytes, when they held any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) memory: Option<u64>,
    /// The most its spill files took on disk at once, in bytes, when it spilled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) spilled: Option<u64>,
}

impl Entry {
    /// A refresh that started at `started` and ended now.
    pub(crate) fn ended_now(started: SystemTime) -> Self {
        let now = SystemTime::now();
        Entry {
            ended: oai_pmh::unix_secs(now).max(0) as u64,
            seconds: now
                .duration_since(started)
                .unwrap_or_default()
                .as_secs_f64(),
            ..Entry::default()
        }
    }

    /// The same refresh, whose collectors held at most `memory` bytes and whose spill files
    /// took at most `spilled` bytes on disk (0: none).
    pub(crate) fn held(self, memory: u64, spilled: u64) -> Self {
        Entry {
            memory: Some(memory).filter(|&m| m > 0),
            spilled: Some(spilled).filter(|&s| s > 0),
            ..self
        }
    }

    /// The same refresh, failed with `error` (its first line, at most [`ERROR_BYTES`]).
    pub(crate) fn failed(mut self, error: &str) -> Self {
        let line = error.lines().next().unwrap_or_default().trim();
        let mut short = line.to_owned();
        if short.len() > ERROR_BYTES {
            let end = (0..=ERROR_BYTES)
                .rev()
                .find(|&i| line.is_char_boundary(i))
                .unwrap_or(0);
            short = format!("{}…", &line[..end]);
        }
        self.error = Some(short);
        self
    }
}

/// A repository's last refreshes.
#[derive(Debug)]
pub(crate) struct History {
    path: PathBuf,
    /// In memory, for the status page; never held while the file is written.
    entries: Mutex<Kept>,
    /// The version of the text the file holds. Its lock is taken on the blocking thread that
    /// writes, so writes come one at a time (they share a temporary file) and a write that comes
    /// late never replaces a newer text.
    written: Arc<Mutex<u64>>,
    /// What the running refresh's harvest did, once it completed: its kind and the records it
    /// received (set on the refresh's thread, taken when the refresh ends).
    harvest: Mutex<Option<(&'static str, u64)>>,
}

impl History {
    /// The history kept in the state folder `dir` (none yet: empty). Lines that cannot be read
    /// are skipped.
    pub(crate) fn load(dir: &Path) -> Self {
        let path = dir.join(FILE);
        let entries = match std::fs::read_to_string(&path) {
            Ok(text) => {
                let mut entries: VecDeque<Entry> = text
                    .lines()
                    .filter_map(|line| serde_json::from_str(line).ok())
                    .collect();
                while entries.len() > KEEP {
                    entries.pop_front();
                }
                entries
            }
            Err(e) => {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(path = %path.display(), "cannot read the refresh history: {e}");
                }
                VecDeque::new()
            }
        };
        History {
            path,
            entries: Mutex::new(Kept {
                entries,
                version: 0,
            }),
            written: Arc::default(),
            harvest: Mutex::new(None),
        }
    }

    /// Notes what the running refresh's harvest did: `kind`, `received` records.
    pub(crate) fn harvested(&self, kind: &'static str, received: u64) {
        *self.harvest.lock().unwrap_or_else(|e| e.into_inner()) = Some((kind, received));
    }

    /// Forgets what an earlier refresh's harvest did, as a refresh starts.
    pub(crate) fn start(&self) {
        self.harvest
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
    }

    /// Adds the refresh that ended, with what its harvest did, and writes the file on a
    /// blocking thread (a warning if it cannot be written: the history is not worth a failed
    /// refresh).
    pub(crate) async fn record(&self, mut entry: Entry) {
        if let Some((kind, received)) = self
            .harvest
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            entry.kind = kind.to_owned();
            entry.received = Some(received);
        }
        let (text, version) = {
            let mut kept = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            kept.entries.push_back(entry);
            while kept.entries.len() > KEEP {
                kept.entries.pop_front();
            }
            let mut text = String::new();
            for e in kept.entries.iter() {
                text.push_str(&serde_json::to_string(e).expect("an entry serialises"));
                text.push('\n');
            }
            kept.version += 1;
            (text, kept.version)
        };
        let (path, written) = (self.path.clone(), Arc::clone(&self.written));
        let wrote = tokio::task::spawn_blocking(move || {
            let mut holds = written.lock().unwrap_or_else(|e| e.into_inner());
            if *holds > version {
                return Ok(());
            }
            write_atomically(&path, text.as_bytes())?;
            *holds = version;
            Ok(())
        })
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e)));
        if let Err(e) = wrote {
            tracing::warn!(
                path = %self.path.display(),
                "cannot write the refresh history (the status page keeps it until a restart): {e}"
            );
        }
    }

    /// The refreshes kept, oldest first.
    pub(crate) fn entries(&self) -> Vec<Entry> {
        (self
            .entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entries
            .iter())
        .cloned()
        .collect()
    }
}

/// The refreshes kept in memory, and how many texts of them were made for the file.
#[derive(Debug)]
struct Kept {
    entries: VecDeque<Entry>,
    version: u64,
}

/// Replaces `path` with `bytes` by a rename, so that a crash leaves the old file or the new.
pub(super) fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// Width and height of the chart, in CSS pixels.
const CHART: (f64, f64) = (320.0, 80.0);

/// An inline SVG chart of the URLs published after each refresh, oldest left: a line through
/// the successful refreshes, a red mark at the foot for each failed one. `None` when no refresh
/// is kept. Every text in it is escaped.
pub(crate) fn chart(entries: &[Entry]) -> Option<String> {
    if entries.is_empty() {
        return None;
    }
    let (w, h) = CHART;
    let (pad_x, pad_top, pad_bottom) = (6.0, 14.0, 14.0);
    let urls: Vec<u64> = entries.iter().filter_map(|e| e.urls).collect();
    let (low, high) = (
        urls.iter().copied().min().unwrap_or(0),
        urls.iter().copied().max().unwrap_or(0),
    );
    let x = |i: usize| {
        if entries.len() == 1 {
            w / 2.0
        } else {
            pad_x + (w - 2.0 * pad_x) * i as f64 / (entries.len() - 1) as f64
        }
    };
    let y = |n: u64| {
        let span = (high - low).max(1) as f64;
        let share = if high == low {
            0.5
        } else {
            (n - low) as f64 / span
        };
        pad_top + (h - pad_top - pad_bottom) * (1.0 - share)
    };
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"URLs published after each of the last \
         {} refreshes\">",
        entries.len()
    );
    let _ = write!(
        svg,
        "<rect width=\"{w}\" height=\"{h}\" fill=\"#fafafa\" stroke=\"#ddd\"/>\
         <text x=\"{pad_x}\" y=\"10\" font-size=\"9\" fill=\"#555\">{high} URLs</text>"
    );
    if low != high {
        let _ = write!(
            svg,
            "<text x=\"{pad_x}\" y=\"{}\" font-size=\"9\" fill=\"#555\">{low}</text>",
            h - 3.0
        );
    }
    let points: Vec<String> = (entries.iter().enumerate())
        .filter_map(|(i, e)| e.urls.map(|n| format!("{:.1},{:.1}", x(i), y(n))))
        .collect();
    if points.len() > 1 {
        let _ = write!(
            svg,
            "<polyline fill=\"none\" stroke=\"#0a6\" stroke-width=\"1.5\" points=\"{}\"/>",
            points.join(" ")
        );
    }
    for (i, e) in entries.iter().enumerate() {
        let when = httpdate::fmt_http_date(SystemTime::UNIX_EPOCH + Duration::from_secs(e.ended));
        match (e.urls, &e.error) {
            (Some(n), None) => {
                let _ = write!(
                    svg,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"#0a6\"><title>{}: {n} URLs \
                     ({})</title></circle>",
                    x(i),
                    y(n),
                    escape(&when),
                    escape(if e.kind.is_empty() {
                        "refresh"
                    } else {
                        &e.kind
                    }),
                );
            }
            _ => {
                let _ = write!(
                    svg,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"#c00\"><title>{}: failed: \
                     {}</title></circle>",
                    x(i),
                    h - pad_bottom + 6.0,
                    escape(&when),
                    escape(e.error.as_deref().unwrap_or("")),
                );
            }
        }
    }
    svg.push_str("</svg>");
    Some(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(ended: u64, urls: u64) -> Entry {
        Entry {
            ended,
            kind: "incremental".into(),
            seconds: 1.5,
            received: Some(3),
            urls: Some(urls),
            error: None,
            memory: None,
            spilled: None,
        }
    }

    /// The history survives a restart, keeps the last [`KEEP`], and skips a line it cannot
    /// read (a file cut by a crash of an older version, say).
    #[tokio::test]
    async fn the_last_refreshes_are_kept_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let history = History::load(dir.path());
        assert!(history.entries().is_empty());
        history.start();
        history.harvested("full", 320);
        history.record(ok(1, 456)).await;
        for i in 2..=(KEEP as u64 + 5) {
            (history.record(Entry::default().failed("request failed\ncaused by: timeout"))).await;
            history.record(ok(i, 456 + i)).await;
        }
        let mut text = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
        assert_eq!(text.lines().count(), KEEP);
        text.push_str("{not json\n");
        std::fs::write(dir.path().join(FILE), text).unwrap();

        let again = History::load(dir.path());
        let entries = again.entries();
        assert_eq!(entries.len(), KEEP);
        assert_eq!(entries, history.entries());
        let last = entries.last().unwrap();
        assert_eq!(
            (last.urls, last.kind.as_str()),
            (Some(456 + KEEP as u64 + 5), "incremental")
        );
        assert_eq!(entries[0].error.as_deref(), Some("request failed"));
        // What the harvest did goes with the refresh that follows, once.
        let first = History::load(tempfile::tempdir().unwrap().path());
        first.harvested("full", 320);
        first.record(Entry::default()).await;
        first.record(Entry::default()).await;
        let e = first.entries();
        assert_eq!((e[0].kind.as_str(), e[0].received), ("full", Some(320)));
        assert_eq!((e[1].kind.as_str(), e[1].received), ("", None));
    }

    /// A history that cannot be written is kept in memory, and recording it does not fail.
    #[tokio::test]
    async fn an_unwritable_history_only_warns() {
        let history = History::load(Path::new("/nonexistent/oai-bridge/history"));
        history.record(ok(1, 10)).await;
        assert_eq!(history.entries().len(), 1);
    }

    /// The chart draws a point per successful refresh on one line, a red mark per failure, and
    /// escapes what it shows.
    #[test]
    fn the_chart_shows_urls_over_time_and_failures() {
        assert_eq!(chart(&[]), None);
        let entries = [
            ok(1_000, 400),
            Entry::default().failed("HTTP status 500 <b>oops</b>"),
            ok(2_000, 456),
        ];
        let svg = chart(&entries).unwrap();
        assert!(svg.starts_with("<svg class=\"chart\""), "{svg}");
        assert!(svg.ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert_eq!(svg.matches("fill=\"#0a6\"").count(), 2);
        assert_eq!(svg.matches("fill=\"#c00\"").count(), 1);
        assert!(svg.contains("456 URLs</text>") && svg.contains(">400</text>"));
        assert!(svg.contains("failed: HTTP status 500 &lt;b&gt;oops&lt;/b&gt;"));
        assert!(!svg.contains("<b>"));
        // One refresh: a point, no line.
        let one = chart(&entries[..1]).unwrap();
        assert!(!one.contains("<polyline") && one.contains("<circle"));
    }
}
