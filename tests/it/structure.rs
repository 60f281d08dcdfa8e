//! The structure of the workspace's crates, read from their own source (issue 21, point 3): in
//! each crate, the modules' imports of each other form no cycle, so that every layer can be
//! read (and changed) from the bottom up; and the root package's modules import in layers.
//! A module is a file of a crate's `src/` (`src/render/sitemap.rs` is `render::sitemap`, a
//! `mod.rs` its folder); it imports another when its code names it by a `crate::` path, in a
//! `use` or inline, and a folder's module imports its submodules; a submodule's use of its
//! ancestors does not count.
//!
//! What lies between the crates the compiler holds: a crate names only its dependencies, and
//! Cargo refuses a cycle among them (`crates/oai-pmh` cannot reach the root package). This test
//! holds what it cannot: the order of the modules inside each crate.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The `src/` folders of the workspace's crates: the root package's, then each of `crates/`.
fn crates() -> Vec<std::path::PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = vec![root.join("src")];
    let mut members: Vec<_> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|entry| entry.unwrap().path().join("src"))
        .filter(|src| src.is_dir())
        .collect();
    members.sort();
    found.extend(members);
    found
}

/// Every module of the root package, by path, with the modules it names.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    imports_in(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

/// The `.rs` files under `src`, in its folders too.
fn rust_files(src: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let mut folders = vec![src.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files
}

/// Every module of the crate whose `src/` is `src`, by path, with the modules it names.
fn imports_in(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let src = src.to_path_buf();
    let files = rust_files(&src);
    let module_of = |path: &Path| -> String {
        let relative = path.strip_prefix(&src).unwrap().with_extension("");
        let mut parts: Vec<String> = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if parts.last().is_some_and(|p| p == "mod") {
            parts.pop();
        }
        parts.join("::")
    };
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(f)).collect();
    let mut graph = BTreeMap::new();
    for file in &files {
        let module = module_of(file);
        if matches!(module.as_str(), "lib" | "main") {
            continue;
        }
        let code = own_code(&std::fs::read_to_string(file).unwrap());
        // The folder `super::` names from this module.
        let parent = match module.rsplit_once("::") {
            Some((parent, _)) if !file.ends_with("mod.rs") => parent.to_owned(),
            _ => String::new(),
        };
        let mut named = BTreeSet::new();
        for (prefix, base) in [("crate::", String::new()), ("super::", parent)] {
            for (at, _) in code.match_indices(prefix) {
                let before = code[..at].chars().next_back();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                    continue;
                }
                let path: String = code[at + prefix.len()..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                let mut segments: Vec<&str> = base.split("::").filter(|s| !s.is_empty()).collect();
                segments.extend(path.split("::").filter(|s| !s.is_empty()));
                // The longest prefix of the path that is a module.
                let Some(target) = (1..=segments.len())
                    .rev()
                    .map(|n| segments[..n].join("::"))
                    .find(|m| modules.contains(m))
                else {
                    continue;
                };
                // A submodule may use what its ancestors define (they are the folder it is a
                // part of); every other import counts.
                if !module.starts_with(&format!("{target}::")) && target != module {
                    named.insert(target);
                }
            }
        }
        // A folder's module declares, and so depends on, its submodules.
        for child in &modules {
            if child
                .strip_prefix(&format!("{module}::"))
                .is_some_and(|rest| !rest.contains("::"))
            {
                named.insert(child.clone());
            }
        }
        graph.insert(module, named);
    }
    graph
}

/// A module's own code, from its text: its tests may reach anywhere, and a comment's link is no
/// import.
fn own_code(text: &str) -> String {
    let own = [
        "#[cfg(test)]\nmod tests",
        "#[cfg(test)]\npub(crate) mod tests",
    ]
    .iter()
    .filter_map(|start| text.find(start))
    .min()
    .unwrap_or(text.len());
    text[..own]
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The strongly connected components of more than one module (Tarjan's algorithm).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    struct State<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<BTreeSet<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.graph.contains_key(w) {
                continue;
            }
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.insert(w.to_owned());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.found
}

#[test]
fn the_modules_import_each_other_in_no_cycle() {
    let graph = imports();
    assert!(graph.contains_key("pipeline") && graph.contains_key("inventory"));
    let members = crates();
    for member in ["crates/files/src", "crates/oai-pmh/src", "crates/store/src"] {
        assert!(members.iter().any(|src| src.ends_with(member)), "{member}");
    }
    for src in members {
        let graph = imports_in(&src);
        assert!(!graph.is_empty(), "{}", src.display());
        no_cycle(&graph, &src);
    }
    // The OAI-PMH crate's reader dispatches between the scanner and the quick-xml reader, so
    // that `parse` knows nothing of `scan`.
    let oai = imports_in(&Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/oai-pmh/src"));
    assert!(oai["scan"].contains("parse") && oai["read"].contains("scan"));
}

/// Fails, naming them, when the modules of `graph` (the crate at `src`) import in a cycle.
fn no_cycle(graph: &BTreeMap<String, BTreeSet<String>>, src: &Path) {
    let found = cycles(graph);
    let described: Vec<String> = found
        .iter()
        .map(|c| {
            c.iter()
                .map(|m| {
                    let names: Vec<&str> = graph[m]
                        .iter()
                        .filter(|t| c.contains(*t))
                        .map(String::as_str)
                        .collect();
                    format!("{m} -> {}", names.join(", "))
                })
                .collect::<Vec<_>>()
                .join("; ")
        })
        .collect();
    assert!(
        found.is_empty(),
        "import cycles in {}:\n{}",
        src.display(),
        described.join("\n")
    );
}

/// The check finds a cycle where there is one.
#[test]
fn a_cycle_is_found() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec!["a"]),
    ]
    .into_iter()
    .map(|(m, to)| (m.to_owned(), to.into_iter().map(str::to_owned).collect()))
    .collect();
    let found = cycles(&graph);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0], ["a", "b", "c"].map(str::to_owned).into());
}

/// The root package's layers, from the bottom: a module may import its own layer's modules and
/// those below, never one above (issue 21, point 3). Every module of `src/` is in one. The
/// OAI-PMH protocol, the files' writers (rendering) and the store, once layers here, are crates
/// of their own (`crates/oai-pmh`, `crates/files`, `crates/store`), below them all: the
/// compiler holds those.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "foundations",
        &[
            "error",
            "memory",
            "probe",
            "progress",
            "publish",
            "scope",
            "server::metrics",
            "spill",
        ],
    ),
    ("classification", &["classify", "platform", "platform::row"]),
    (
        "collecting and state",
        &["changes", "inventory", "inventory::spill"],
    ),
    // The profiles and the patch are the files crate's; here, their names at the old paths and
    // the collector's tests with this package's classifier and inventory.
    ("the profiles", &["profiles", "profiles::signposts_tests"]),
    (
        "the publish sequence",
        &[
            "advice",
            "engine",
            "incremental",
            "indexnow",
            "learn",
            "pipeline",
            "summary",
        ],
    ),
    (
        "commands",
        &[
            "bucket",
            "check",
            "cli",
            "config",
            "config::declare",
            "config::exposed",
            "config::keys",
            "export",
            "fuzzing",
            "migrate",
            "server",
            "server::fleet",
            "server::generation",
            "server::history",
            "server::http",
            "server::indexnow",
            "server::keyed",
            "server::linkset",
            "server::preflight",
            "server::prune",
            "server::refresh",
            "server::reload",
            "server::resourcesync",
            "server::scrape",
            "server::sendfile",
            "server::slots",
            "server::status",
            "settings",
        ],
    ),
    ("the shell", &["app"]),
];

#[test]
fn no_module_imports_one_above_it() {
    let graph = imports();
    let layer = |m: &str| LAYERS.iter().position(|(_, modules)| modules.contains(&m));
    let unplaced: Vec<&String> = graph.keys().filter(|m| layer(m).is_none()).collect();
    assert!(
        unplaced.is_empty(),
        "modules in no layer of LAYERS: {unplaced:?}"
    );
    let mut upward = Vec::new();
    for (m, targets) in &graph {
        for t in targets {
            if let (Some(from), Some(to)) = (layer(m), layer(t))
                && to > from
            {
                upward.push(format!(
                    "{m} ({}) imports {t} ({})",
                    LAYERS[from].0, LAYERS[to].0
                ));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports pointing up:\n{}",
        upward.join("\n")
    );
}

/// What std offers for IO beyond bytes in memory: the file system, the network, processes, the
/// environment, threads.
const IO: &[&str] = &[
    "std::fs",
    "std::net",
    "std::process",
    "std::env",
    "std::thread",
];

/// The IO paths of [`IO`] that `code` names.
fn io_named(code: &str) -> Vec<&'static str> {
    IO.iter().copied().filter(|io| code.contains(io)).collect()
}

/// The files crate's writers are pure (ARCHITECTURE.md, "Crate map"): bytes in memory, in and
/// out. Its one part that touches the file system is `disk/` (the spill folders and the
/// on-disk writers, which need rustix, tempfile and memmap2); everywhere else std is still
/// there, and this holds what the compiler cannot.
#[test]
fn the_files_crate_does_io_in_disk_alone() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/files/src");
    let disk = src.join("disk");
    assert!(
        disk.is_dir(),
        "{} is gone: say here where the IO went",
        disk.display()
    );
    let mut found = Vec::new();
    for path in rust_files(&src)
        .into_iter()
        .filter(|p| !p.starts_with(&disk))
    {
        let code = own_code(&std::fs::read_to_string(&path).unwrap());
        for io in io_named(&code) {
            found.push(format!("{} names {io}", path.display()));
        }
    }
    assert!(
        found.is_empty(),
        "IO in the files crate:\n{}",
        found.join("\n")
    );
    // The check sees IO where there is some, and not in a comment or a test.
    assert_eq!(
        io_named(&own_code(
            "use std::fs::File;\nfn f() { std::net::TcpStream::connect(\"h\"); }"
        )),
        ["std::fs", "std::net"]
    );
    assert!(
        io_named(&own_code(
            "// std::fs\nfn f() {}\n#[cfg(test)]\nmod tests {\n    use std::fs;\n}"
        ))
        .is_empty()
    );
}
