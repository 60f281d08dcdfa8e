//! Harvest progress for people: a live line on a terminal, periodic log lines otherwise.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// Reports pages, records and URLs as a harvest goes.
#[derive(Debug)]
pub(crate) struct Progress {
    bar: Option<ProgressBar>,
    started: Instant,
    last_log: Instant,
    silent: bool,
}

impl Progress {
    /// A live progress line on stderr when stderr is a terminal and `enabled`; log lines else.
    pub(crate) fn new(enabled: bool) -> Self {
        let bar = (enabled && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
                    .expect("valid template"),
            );
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        let now = Instant::now();
        Self {
            bar,
            started: now,
            last_log: now,
            silent: false,
        }
    }

    /// No live line and no periodic log lines: the server's refreshes, which log one line per
    /// harvest at info (and one per page at debug, from the harvester).
    pub(crate) fn silent() -> Self {
        Self {
            silent: true,
            ..Self::new(false)
        }
    }

    /// Called after each page.
    pub(crate) fn page(&mut self, page: u64, records: u64, urls: u64, expected: Option<u64>) {
        let elapsed = self.started.elapsed().as_secs_f64().max(0.001);
        let rate = records as f64 / elapsed;
        let of = expected.map(|n| format!(" of ~{n}")).unwrap_or_default();
        let message =
            format!("page {page}, {records} records{of}, {urls} URLs kept, {rate:.0} records/s");
        match &self.bar {
            Some(bar) => bar.set_message(message),
            None if !self.silent && self.last_log.elapsed() >= Duration::from_secs(5) => {
                self.last_log = Instant::now();
                tracing::info!("{message}");
            }
            None => {}
        }
    }

    /// Removes the live line.
    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
