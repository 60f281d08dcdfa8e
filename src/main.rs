//! The `oai-bridge` binary: parses the command line, installs logging, dispatches.

use std::process::ExitCode;

use clap::Parser;
use oai_bridge::{Cli, Command, LogFormat};
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    oai_bridge::limit_arenas();
    // Learning from the web (and robots.txt) as OAI_BRIDGE_LEARN and the resolvers' variables say.
    oai_bridge::Resolvers::use_environment();
    let cli = Cli::parse();
    // What prints a file or asks one URL needs neither logging nor a runtime.
    match &cli.command {
        Command::Completions(args) => return oai_bridge::run_completions(args),
        Command::Man => return oai_bridge::run_man(),
        Command::Probe(args) => return oai_bridge::run_probe(args),
        Command::Export(_)
        | Command::Check(_)
        | Command::Serve(_)
        | Command::Prune(_)
        | Command::MigrateState(_) => {}
    }
    // `-q` is for cron: only what failed is said.
    let level = match (cli.quiet, cli.verbose) {
        (true, _) => "error",
        (false, 0) => "info",
        (false, 1) => "debug",
        (false, _) => "trace",
    };
    // The bridge's own targets and the OAI-PMH crate's (its client's retries and the quirks it
    // tolerated) at the chosen level; every other crate's warnings.
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("oai_bridge={level},oai_pmh={level},warn")));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    match cli.log_format {
        LogFormat::Text => builder.with_target(false).init(),
        LogFormat::Json => builder.json().init(),
    }
    // `prune` removes folders: no runtime. Nor has `migrate-state`, whose database client
    // blocks on a runtime of its own.
    match &cli.command {
        Command::Prune(args) => return oai_bridge::run_prune(args),
        Command::MigrateState(args) => return oai_bridge::run_migrate_state(args),
        _ => {}
    }
    // `export` harvests one page after another: one thread does it without cross-thread
    // wake-ups. `serve` answers requests on every core.
    let runtime = match &cli.command {
        Command::Serve(_) => tokio::runtime::Builder::new_multi_thread(),
        _ => tokio::runtime::Builder::new_current_thread(),
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
            Command::Export(args) => oai_bridge::run_export(args, cli.quiet).await,
            Command::Serve(args) => oai_bridge::run_serve(args).await,
            Command::Check(args) => oai_bridge::run_check(args).await,
            Command::Completions(_)
            | Command::Man
            | Command::Probe(_)
            | Command::Prune(_)
            | Command::MigrateState(_) => unreachable!("answered before the runtime starts"),
        }
    })
}
