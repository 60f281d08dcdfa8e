//! What would stop `serve` from starting on a configuration, found before it starts: the state
//! directory unusable, a file the configuration names missing, a listener's port taken, another
//! gateway on the state directory. `serve --check-config` reports all of it ([`check`]);
//! `serve` stops at the first it meets, with exit 78, as for any configuration error (a restart
//! would not mend it). The messages name the key and say what to do.

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::path::Path;

use oai_pmh::Source;

use crate::config::{Config, listener_flags, repository_on_port_message};

use super::prune;
use crate::error::Error;

/// What [`check`] found.
#[derive(Debug, Default)]
pub(crate) struct Findings {
    /// What would stop the start, a sentence each, naming its key.
    pub(crate) problems: Vec<String>,
    /// What would not, but is likely wrong: a listener on the port of a repository's own
    /// baseURL on this host, free for now.
    pub(crate) warnings: Vec<String>,
    /// What is worth knowing: a gateway running on the state directory now (its ports, then,
    /// are taken to be its own).
    pub(crate) notes: Vec<String>,
}

/// Everything that would stop `serve` from starting on `config` now, and what is likely wrong
/// with its listeners; leaves nothing behind (a folder is tried with a temporary file, removed
/// at once; a listener's port by binding it, not listening on it, so two checks at once do
/// not fail each other). A gateway running on the state
/// directory is a note, not a problem: `--check-config` is run beside the gateway a reload will
/// give the file to, whose ports are then in use.
pub(crate) fn check(config: &Config) -> Findings {
    let mut found = Findings {
        problems: before_binding(config),
        ..Findings::default()
    };
    let state_dir = &config.server.state_dir;
    // A gateway (or a process that does not say: an earlier version's gateway); a prune or a
    // `migrate-state` holding the lock is done soon, and a gateway waits for it.
    let running = prune::held(state_dir)
        .filter(|holder| holder.as_ref().is_none_or(|h| h.command == "serve"));
    // `before_binding` said it as a problem; here it is a note.
    if let Some(holder) = &running {
        found
            .problems
            .retain(|p| !p.contains("another gateway runs on it"));
        found.notes.push(format!(
            "a gateway runs on [server] state_dir {} ({}): `serve` would be refused until it \
             stops; a reload (SIGHUP, POST /-/reload) gives it this file (if it is another \
             configuration's, give this one a state_dir of its own)",
            state_dir.display(),
            match holder {
                Some(h) => h.to_string(),
                None => format!("{} is held", state_dir.join("gateway.lock").display()),
            }
        ));
    }
    let machine = resources(config, crate::memory::limit().as_ref());
    found.warnings.extend(machine.warnings);
    found.notes.extend(machine.notes);
    for (key, addr) in listeners(config) {
        match try_bind(addr) {
            Err(e) if e.kind() == ErrorKind::AddrInUse && running.is_some() => {
                found.notes.push(format!(
                    "{key} {addr} is in use, presumably by the gateway running on this \
                     state_dir: a restart frees it (a reload keeps the listeners)"
                ));
            }
            Err(e) => found.problems.push(bind_problem(config, key, addr, &e)),
            Ok(()) => found.warnings.extend(port_warning(config, key, addr)),
        }
    }
    found
}

/// What stops the start before the listeners are bound: the state directory (and a `file://`
/// publish folder) that cannot be made or written in, a Static Repository file that cannot be
/// read, another gateway on the state directory.
pub(crate) fn before_binding(config: &Config) -> Vec<String> {
    let mut problems = Vec::new();
    let state_dir = &config.server.state_dir;
    problems.extend(folder_problem("[server] state_dir", state_dir));
    if let Some(url) = &config.server.publish_url
        && url.as_url().scheme() == "file"
        && let Ok(path) = url.as_url().to_file_path()
    {
        problems.extend(folder_problem("[server] publish_url", &path));
    }
    for r in &config.repositories {
        if let Source::File(path) = &r.source {
            let readable = std::fs::File::open(path).and_then(|f| {
                if f.metadata()?.is_file() {
                    Ok(())
                } else {
                    Err(std::io::Error::other("not a file"))
                }
            });
            if let Err(e) = readable {
                problems.push(format!(
                    "{}: [[repository]] {:?} base_url: cannot read the Static Repository file \
                     {}: {e}",
                    r.file,
                    r.name,
                    path.display()
                ));
            }
        }
    }
    if let Some(Some(holder)) = prune::held(state_dir)
        && holder.command == "serve"
    {
        problems.push(
            Error::StateDirInUse {
                state_dir: state_dir.clone(),
                lock: state_dir.join("gateway.lock"),
                holder: Some(holder.to_string()),
            }
            .to_string(),
        );
    }
    problems
}

/// The folder `key` names: one that exists must be a folder this process can write in; one
/// that does not, the nearest folder above it must be (so it can be made).
fn folder_problem(key: &str, dir: &Path) -> Option<String> {
    let writable = |dir: &Path| {
        tempfile::Builder::new()
            .prefix(".oai-bridge-check-")
            .tempfile_in(dir)
            .map(drop)
    };
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => Some(format!("{key} {}: not a folder", dir.display())),
        Ok(_) => (writable(dir).err())
            .map(|e| format!("{key} {}: cannot write in it: {e}", dir.display())),
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
            let above = dir
                .ancestors()
                .skip(1)
                .map(|a| {
                    if a.as_os_str().is_empty() {
                        Path::new(".")
                    } else {
                        a
                    }
                })
                .find(|a| a.exists())?;
            if !above.is_dir() {
                return Some(format!(
                    "{key} {}: cannot be made: {} is not a folder",
                    dir.display(),
                    above.display()
                ));
            }
            writable(above).err().map(|e| {
                format!(
                    "{key} {}: cannot be made: cannot write in {}: {e}",
                    dir.display(),
                    above.display()
                )
            })
        }
        Err(e) => Some(format!("{key} {}: {e}", dir.display())),
    }
}

/// What the machine gives the refreshes, said before they need it: the memory the process may
/// use (`machine`, [`crate::memory::limit`]) against `[server] memory_budget_bytes` and
/// `cache_bytes`, and the free space of the state directory's file system, where the refreshes
/// spill, against `[server] spill_max_bytes`. The figures are notes; a limit the configuration
/// would pass, a warning. `serve` logs them at start, `--check-config` prints them.
pub(crate) fn resources(config: &Config, machine: Option<&crate::memory::Limit>) -> Findings {
    use crate::pipeline::human_bytes as b;
    let mut found = Findings::default();
    let limits = config.pool_limits();
    let cache = config.server.cache_bytes;
    let how = match config.server.memory_budget {
        Some(_) => "[server] memory_budget_bytes".to_owned(),
        None => format!(
            "[server] memory_budget_bytes by default: max_concurrent_refreshes ({}) times \
             [harvest] memory_budget_bytes",
            config.fleet.max_concurrent_refreshes
        ),
    };
    found.notes.push(format!(
        "memory: the refreshes running at once hold at most {} together in their collectors \
         ({how}), each at most {} ([harvest] memory_budget_bytes; the landing-page profiles' \
         records a quarter of it more), before they spill to disk; the byte cache at most {} \
         (cache_bytes){}",
        b(limits.memory),
        b(limits.per_refresh),
        b(cache),
        machine.map_or_else(String::new, |m| format!(
            "; this process may use {} ({})",
            b(m.bytes),
            m.source
        ))
    ));
    if let Some(m) = machine
        && limits.memory.saturating_add(cache) > m.bytes
    {
        found.warnings.push(format!(
            "the refreshes' memory budget ({}, {how}) and the byte cache ({}, [server] \
             cache_bytes) add up to more than {} gives this process ({}): refreshes running at \
             once can run the gateway out of memory before their budget makes them spill; \
             lower [server] memory_budget_bytes or cache_bytes (and leave room for what each \
             refresh holds besides its collectors: docs/performance.md)",
            b(limits.memory),
            b(cache),
            m.source,
            b(m.bytes)
        ));
    }
    let state_dir = &config.server.state_dir;
    // A state directory not made yet: the file system of the folder it will be made in.
    let existing = (state_dir.ancestors())
        .map(|a| {
            if a.as_os_str().is_empty() {
                Path::new(".")
            } else {
                a
            }
        })
        .find(|a| a.exists())
        .unwrap_or(state_dir);
    if let Ok(room) = crate::spill::Room::of(existing) {
        let crate::spill::Room { free, size, keep } = room;
        found.notes.push(format!(
            "spill: the refreshes' temporary files go in each repository's folder under \
             [server] state_dir {}, whose file system has {} free of {}; a spill stops {} short \
             of full{}",
            state_dir.display(),
            b(free),
            b(size),
            b(keep),
            match limits.spill_max {
                Some(max) => format!(", and at {} together ([server] spill_max_bytes)", b(max)),
                None => " (no [server] spill_max_bytes)".to_owned(),
            }
        ));
        if room.short() {
            found.warnings.push(format!(
                "the file system of [server] state_dir {} has only {} free, less than the {} a \
                 spill leaves: a refresh that spills fails at once; free some space",
                state_dir.display(),
                b(free),
                b(keep)
            ));
        } else if let Some(max) = limits.spill_max
            && max > free - keep
        {
            found.warnings.push(format!(
                "[server] spill_max_bytes ({}) is more than the file system of [server] \
                 state_dir {} has free ({}, less the {} a spill leaves): the disk, not the cap, \
                 would stop a large refresh's spill",
                b(max),
                state_dir.display(),
                b(free),
                b(keep)
            ));
        }
    }
    found
}

/// The listeners of `config`, with their keys.
fn listeners(config: &Config) -> Vec<(&'static str, SocketAddr)> {
    let mut listeners = vec![("[server] listen", config.server.listen)];
    listeners.extend((config.server.admin_listen).map(|admin| ("[server] admin_listen", admin)));
    listeners
}

/// Binds `addr` as the gateway would (`SO_REUSEADDR`) without listening on it: taken by a
/// listening socket, it fails as the gateway's bind would.
fn try_bind(addr: SocketAddr) -> std::io::Result<()> {
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)
}

/// Why the listener `key` cannot be bound at `addr` (error `e`), and what to do: for a port in
/// use that is a configured repository's own on this host (a DSpace's Tomcat on
/// 127.0.0.1:8080, the gateway's default), that.
pub(crate) fn bind_problem(
    config: &Config,
    key: &str,
    addr: SocketAddr,
    e: &std::io::Error,
) -> String {
    let flags = listener_flags(key);
    match e.kind() {
        ErrorKind::AddrInUse => match config.repository_on_port(addr) {
            Some(repo) => format!(
                "{key} {addr} is in use, and it {}",
                repository_on_port_message(key, addr, repo)
            ),
            None => format!(
                "{key} {addr} is in use by another process: stop it, or set {key} ({flags}) to \
                 a free port"
            ),
        },
        ErrorKind::AddrNotAvailable => format!(
            "{key} {addr}: no interface of this host has the address {} ({e}); set {key} \
             ({flags}) to one of its addresses, 127.0.0.1 behind a reverse proxy on this host",
            addr.ip()
        ),
        ErrorKind::PermissionDenied => format!(
            "{key} {addr}: not allowed to listen on port {} ({e}): a port below 1024 needs \
             privileges the gateway does not have; take a port above it and let the reverse \
             proxy forward to it",
            addr.port()
        ),
        _ => format!("{key} {addr}: cannot listen: {e}"),
    }
}

/// The warning of a listener `key` at `addr` that is free, but the port of a repository's own
/// baseURL on this host: when that repository starts, one of the two cannot listen.
pub(crate) fn port_warning(config: &Config, key: &str, addr: SocketAddr) -> Option<String> {
    let repo = config.repository_on_port(addr)?;
    Some(format!(
        "{key} {addr} {}",
        repository_on_port_message(key, addr, repo)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str, dir: &Path) -> Config {
        Config::parse(text, "bridge.toml", dir).unwrap()
    }

    /// Issue 30: the machine's limits are said before they are hit: the memory the refreshes
    /// and the cache may take against what the process may use, the spill cap against the
    /// state directory's free space; the figures as notes either way.
    #[test]
    fn the_machines_limits_are_said_at_start() {
        let root = tempfile::tempdir().unwrap();
        let text = |server: &str| {
            format!(
                "[server]\nstate_dir = \"{}\"\n{server}[[repository]]\nname = \"a\"\n\
                 base_url = \"https://a.example/oai\"\n",
                root.path().join("state").display()
            )
        };
        let machine = |mib: u64| crate::memory::Limit {
            bytes: mib << 20,
            source: "the test's machine".to_owned(),
        };
        // The default budget: 4 refreshes x 192 MiB, and the 256 MiB cache.
        let defaults = config(&text(""), root.path());
        let found = resources(&defaults, Some(&machine(64 << 10)));
        assert!(found.warnings.is_empty(), "{:?}", found.warnings);
        let notes = found.notes.join("\n");
        for said in [
            "memory: the refreshes running at once hold at most 768.0 MiB together",
            "max_concurrent_refreshes (4) times [harvest] memory_budget_bytes",
            "each at most 192.0 MiB",
            "this process may use 64.0 GiB (the test's machine)",
            "spill: the refreshes' temporary files go in each repository's folder",
            "(no [server] spill_max_bytes)",
        ] {
            assert!(notes.contains(said), "{said}: {notes}");
        }
        let small = resources(&defaults, Some(&machine(1000)));
        assert_eq!(small.warnings.len(), 1, "{:?}", small.warnings);
        assert!(
            small.warnings[0]
                .contains("add up to more than the test's machine gives this process (1000.0 MiB)"),
            "{}",
            small.warnings[0]
        );
        let capped = config(
            &text("memory_budget_bytes = 536870912\nspill_max_bytes = 1125899906842624\n"),
            root.path(),
        );
        let found = resources(&capped, Some(&machine(1000)));
        assert_eq!(found.warnings.len(), 1, "{:?}", found.warnings);
        assert!(
            found.warnings[0].starts_with("[server] spill_max_bytes (1.0 PiB) is more than"),
            "{}",
            found.warnings[0]
        );
        assert!(found.notes[0].contains(
            "at most 512.0 MiB together in their collectors ([server] memory_budget_bytes)"
        ));
        assert!(found.notes[1].contains("and at 1.0 PiB together ([server] spill_max_bytes)"));
    }

    /// The state directory: one that exists must be writable, one that does not must be
    /// makeable; a file is no folder.
    #[test]
    fn the_state_directory_must_be_usable() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path();
        assert_eq!(folder_problem("[server] state_dir", dir), None);
        assert_eq!(folder_problem("k", &dir.join("new/deeper")), None);
        std::fs::write(dir.join("file"), "x").unwrap();
        let p = folder_problem("[server] state_dir", &dir.join("file")).unwrap();
        assert!(p.ends_with("file: not a folder"), "{p}");
        let p = folder_problem("[server] state_dir", &dir.join("file/state")).unwrap();
        assert!(
            p.contains("cannot be made:") && p.ends_with("is not a folder"),
            "{p}"
        );
        assert_eq!(
            std::fs::read_dir(dir).unwrap().count(),
            1,
            "nothing left behind"
        );
    }

    /// A Static Repository file that is missing, or a folder, stops the start, naming the
    /// repository, the key and the path; one that exists does not.
    #[test]
    fn a_static_repository_file_must_be_readable() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path();
        std::fs::write(dir.join("here.xml"), "<Repository/>").unwrap();
        std::fs::create_dir(dir.join("folder.xml")).unwrap();
        let text = format!(
            "[server]\nstate_dir = \"state\"\n\
             [[repository]]\nname = \"here\"\nbase_url = \"here.xml\"\n\
             [[repository]]\nname = \"gone\"\nbase_url = \"gone.xml\"\n\
             [[repository]]\nname = \"folder\"\nbase_url = \"file://{}\"\n",
            dir.join("folder.xml").display()
        );
        let problems = before_binding(&config(&text, dir));
        assert_eq!(problems.len(), 2, "{problems:#?}");
        assert!(
            problems[0].starts_with(&format!(
                "bridge.toml: [[repository]] \"gone\" base_url: cannot read the Static \
                 Repository file {}: ",
                dir.join("gone.xml").display()
            )),
            "{}",
            problems[0]
        );
        assert!(
            problems[1].contains("\"folder\" base_url"),
            "{}",
            problems[1]
        );
        assert!(!dir.join("state").exists(), "a check makes nothing");
    }

    /// A port in use names the key; when it is a configured repository's own on this host, it
    /// says so and what to set; a port free but a repository's is a warning.
    #[test]
    fn a_port_in_use_names_its_key_and_the_repository_on_it() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let root = tempfile::tempdir().unwrap();
        let text = |base: &str| {
            format!(
                "[server]\nlisten = \"127.0.0.1:{port}\"\nadmin_listen = \"127.0.0.1:0\"\n\
                 state_dir = \"state\"\n[[repository]]\nname = \"dspace\"\nbase_url = \"{base}\"\n"
            )
        };
        let plain = config(&text("https://dspace.example.edu/oai"), root.path());
        let found = check(&plain);
        assert_eq!(
            found.problems,
            [format!(
                "[server] listen 127.0.0.1:{port} is in use by another process: stop it, or set \
                 [server] listen (OAI_BRIDGE_LISTEN, --listen) to a free port"
            )]
        );
        let tomcat = config(
            &text(&format!("http://localhost:{port}/server/oai/request")),
            root.path(),
        );
        let found = check(&tomcat);
        assert_eq!(found.problems.len(), 1, "{found:#?}");
        assert!(
            found.problems[0].starts_with(&format!(
                "[server] listen 127.0.0.1:{port} is in use, and it is the port of \
                 [[repository]] \"dspace\"'s baseURL http://localhost:{port}/server/oai/request"
            )),
            "{}",
            found.problems[0]
        );
        assert!(
            found.problems[0].contains("Set [server] listen"),
            "{found:#?}"
        );
        assert!(found.warnings.is_empty(), "{found:#?}");
        // Free, the same port is a warning.
        drop(taken);
        let found = check(&tomcat);
        assert!(found.problems.is_empty(), "{found:#?}");
        assert_eq!(found.warnings.len(), 1, "{found:#?}");
        assert!(
            found.warnings[0]
                .starts_with(&format!("[server] listen 127.0.0.1:{port} is the port of")),
            "{found:#?}"
        );
    }
}
