//! The `oai-bridge` binary: parses the command line, installs logging, dispatches.

use std::process::ExitCode;

use clap::Parser;
use oai_bridge::cli::{Cli, Command, LogFormat};
use tracing_subscriber::EnvFilter;

/// Caps glibc's malloc at two arenas. By default glibc gives each thread that allocates under
/// contention an arena of its own and keeps it once grown: under load (benches/load), where
/// every worker thread of `serve` allocates while a refresh builds the next generation, what
/// the process held after each swap crept up (307, 305, 312, then 370 MiB); with two arenas it
/// stays flat, and throughput is unchanged. mimalloc was tried too: flat as well, but a
/// harvest of a million records then peaked 20-70% higher. `MALLOC_ARENA_MAX` in the
/// environment still wins.
#[allow(unsafe_code)]
fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: `mallopt` only sets a malloc parameter; it is called first in `main`, before
        // any other thread exists.
        unsafe { libc::mallopt(libc::M_ARENA_MAX, 2) };
    }
}

fn main() -> ExitCode {
    tune_allocator();
    let cli = Cli::parse();
    let level = match (cli.quiet, cli.verbose) {
        (true, _) => "warn",
        (false, 0) => "info",
        (false, 1) => "debug",
        (false, _) => "trace",
    };
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("oai_bridge={level},warn")));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    match cli.log_format {
        LogFormat::Text => builder.with_target(false).init(),
        LogFormat::Json => builder.json().init(),
    }
    // `export` harvests one page after another: one thread does it without cross-thread
    // wake-ups. `serve` answers requests on every core.
    let runtime = match &cli.command {
        Command::Export(_) | Command::Check(_) => tokio::runtime::Builder::new_current_thread(),
        Command::Serve(_) => tokio::runtime::Builder::new_multi_thread(),
    }
    .enable_all()
    .build();
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        match &cli.command {
            Command::Export(args) => oai_bridge::app::run_export(args).await,
            Command::Serve(args) => oai_bridge::app::run_serve(args).await,
            Command::Check(args) => oai_bridge::app::run_check(args).await,
        }
    })
}
