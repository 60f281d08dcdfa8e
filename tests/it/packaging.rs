//! What ships beside the binary, as shipped (issue 22): shell completions and the manual page;
//! the container image, laid out from the Dockerfile's COPY lines and run with its ENV, CMD and
//! HEALTHCHECK; the systemd unit's system-call filter, expanded as systemd 252 expands it and
//! installed with seccomp around the real gateway through a refresh of the sample.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `oai-bridge` from the crate root, with no setting leaking in from the environment.
fn bridge() -> Command {
    let mut cmd = crate::golden::bridge();
    cmd.current_dir(root());
    for var in [
        "OAI_BRIDGE_CONFIG",
        "OAI_BRIDGE_LISTEN",
        "OAI_BRIDGE_PUBLIC_URL",
        "OAI_BRIDGE_STATE_DIR",
        "OAI_BRIDGE_USER_AGENT",
        "OAI_BRIDGE_LOG_FORMAT",
        "OAI_BRIDGE_ADMIN_TOKEN",
        "RUST_LOG",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

fn run(args: &[&str]) -> Output {
    bridge()
        .args(args)
        .output()
        .expect("the oai-bridge binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

// ---------------------------------------------------------------------------------------------
// Completions and the manual page

#[test]
fn completions_name_every_command_and_flag() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let o = run(&["completions", shell]);
        assert_eq!(o.status.code(), Some(0), "{shell}: {}", text(&o.stderr));
        let script = text(&o.stdout);
        for word in [
            "serve",
            "export",
            "check",
            "completions",
            "man",
            "public-url",
            "base-url",
        ] {
            assert!(script.contains(word), "{shell} completions lack {word:?}");
        }
    }
    let bash = text(&run(&["completions", "bash"]).stdout);
    assert!(
        bash.contains("complete -F _oai__bridge") && bash.trim_end().ends_with("fi"),
        "{bash}"
    );
    let o = run(&["completions", "tcsh"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
}

/// What bash offers for the words `words` (the last one being completed), with the script of
/// `oai-bridge completions bash` sourced.
fn bash_completes(words: &[&str]) -> Vec<String> {
    let script = text(&run(&["completions", "bash"]).stdout);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("oai-bridge.bash");
    std::fs::write(&path, script).unwrap();
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let cword = words.len() - 1;
    let (previous, current) = (words[cword - 1], words[cword]);
    let program = format!(
        "source \"$1\"; COMP_WORDS=({}); COMP_CWORD={cword}; COMP_LINE=\"${{COMP_WORDS[*]}}\"; \
         COMP_POINT=${{#COMP_LINE}}; _oai__bridge oai-bridge '{current}' '{previous}'; \
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        quoted.join(" ")
    );
    let o = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &program, "bash"])
        .arg(&path)
        .output()
        .expect("bash runs");
    assert!(o.status.success(), "{program}: {}", text(&o.stderr));
    text(&o.stdout).lines().map(str::to_owned).collect()
}

/// Bash completes the options of a subcommand (clap_complete's labels for a hyphenated name
/// did not match, clap-rs/clap#6421), and never offers the hidden `probe`.
#[test]
fn bash_completes_each_subcommands_options() {
    let serve = bash_completes(&["oai-bridge", "serve", "--"]);
    for flag in [
        "--listen",
        "--admin-listen",
        "--check-config",
        "--log-format",
    ] {
        assert!(
            serve.iter().any(|w| w == flag),
            "serve: {serve:?} lacks {flag}"
        );
    }
    let export = bash_completes(&["oai-bridge", "export", "--o"]);
    assert_eq!(export, ["--out", "--ocx"], "export --o");
    let prune = bash_completes(&["oai-bridge", "prune", "--"]);
    assert!(prune.iter().any(|w| w == "--dry-run"), "{prune:?}");
    let top = bash_completes(&["oai-bridge", ""]);
    for command in ["serve", "export", "check", "prune", "completions", "man"] {
        assert!(top.iter().any(|w| w == command), "{top:?} lacks {command}");
    }
    assert!(!top.iter().any(|w| w == "probe"), "{top:?}");
}

/// No completion script mentions the image's hidden `probe`, which clap_complete lists unless
/// it is left out of the command it is given.
#[test]
fn completions_leave_the_hidden_probe_out() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = text(&run(&["completions", shell]).stdout);
        assert!(!script.contains("probe"), "{shell} completions offer probe");
        assert!(script.contains("prune"), "{shell} completions lack prune");
    }
}

#[test]
fn the_man_page_is_roff_naming_the_commands() {
    let o = run(&["man"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let page = text(&o.stdout);
    assert!(page.contains("\n.TH oai-bridge 1 "), "{page}");
    for section in [".SH NAME", ".SH SYNOPSIS", ".SH OPTIONS", ".SH COMMANDS"] {
        assert!(page.contains(section), "the page lacks {section}");
    }
    // One page: no other page referred to (none is generated), none appended.
    assert_eq!(page.matches("\n.TH ").count(), 1, "{page}");
    assert!(!page.contains("(1)"), "{page}");
    // Each command's own section holds its options.
    let plain = page.replace("\\-", "-");
    let section = |command: &str| -> &str {
        let start = plain
            .find(&format!(".SS \"oai-bridge {command}\"\n"))
            .unwrap_or_else(|| panic!("the page has no section for {command}"));
        let rest = &plain[start + 4..];
        let end = rest.find("\n.SS ").or_else(|| rest.find("\n.SH ")).unwrap();
        &rest[..end]
    };
    for (command, flags) in [
        (
            "serve",
            &["--admin-listen", "--listen", "--check-config"][..],
        ),
        ("export", &["--out", "--public-url", "--base-url"][..]),
        ("check", &["--fetch", "--json"][..]),
        ("prune", &["--dry-run", "--state-dir"][..]),
        (
            "completions",
            &["SHELL", "The shell to complete for", "powershell"][..],
        ),
        ("man", &["--help"][..]),
    ] {
        let text = section(command);
        for flag in flags {
            assert!(
                text.contains(flag),
                "{command}'s section lacks {flag}: {text}"
            );
        }
    }
    assert!(!section("serve").contains("--dry-run"));
    // The exit codes, and not the image's hidden tool.
    let exit = page
        .split(".SH \"EXIT STATUS\"\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no EXIT STATUS: {page}"));
    for want in [
        "0 success; 1 failure",
        "2 usage error; 78 bad configuration (EX_CONFIG), also when serve cannot start on it",
        "port in use",
        "another gateway on its state_dir",
        "RestartPreventExitStatus=78",
    ] {
        assert!(exit.contains(want), "EXIT STATUS lacks {want:?}: {exit}");
    }
    assert!(!page.contains("probe"), "{page}");
}

// ---------------------------------------------------------------------------------------------
// A gateway process

/// A running `oai-bridge serve`, killed when dropped, so a failed assertion leaves none behind.
struct Gateway {
    child: Child,
    /// `http://127.0.0.1:PORT/`, from its first line.
    base: String,
}

impl Gateway {
    /// Spawns `cmd`, a `serve` on port 0, and reads where it serves; its exit status when it
    /// stops before saying so.
    fn start(mut cmd: Command) -> Result<Gateway, ExitStatus> {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the oai-bridge binary starts");
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let Some(base) = first.trim().strip_prefix("oai-bridge serving on ") else {
            return Err(child.wait().unwrap());
        };
        Ok(Gateway {
            base: base.to_owned(),
            child,
        })
    }

    /// Waits until the gateway serves the sample's index (its first refresh is done), or stops:
    /// then its exit status.
    fn served(&mut self) -> Result<(), ExitStatus> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Err(status);
            }
            let index = format!("{}sample/sitemap.xml", self.base);
            if probe(&index).status.success() {
                return Ok(());
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the sample is served within 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `oai-bridge probe URL`.
fn probe(url: &str) -> Output {
    run(&["probe", "--timeout", "5", url])
}

// ---------------------------------------------------------------------------------------------
// The container image

/// The final stage of the Dockerfile, each instruction on one line (continuations joined,
/// comments dropped), as (INSTRUCTION, rest).
fn final_stage(dockerfile: &str) -> Vec<(String, String)> {
    let mut joined = Vec::new();
    let mut line = String::new();
    for raw in dockerfile.lines() {
        if line.is_empty() && (raw.trim_start().starts_with('#') || raw.trim().is_empty()) {
            continue;
        }
        match raw.strip_suffix('\\') {
            Some(part) => line.push_str(part),
            None => {
                line.push_str(raw);
                joined.push(std::mem::take(&mut line));
            }
        }
    }
    let from = joined.iter().rposition(|l| l.starts_with("FROM ")).unwrap();
    joined[from + 1..]
        .iter()
        .map(|l| {
            let (word, rest) = l.split_once(' ').unwrap();
            (word.to_owned(), rest.trim().to_owned())
        })
        .collect()
}

/// A JSON-array (exec form) instruction's words.
fn exec_form(rest: &str) -> Vec<String> {
    serde_json::from_str(rest).unwrap_or_else(|e| panic!("{rest:?} is not an exec form: {e}"))
}

/// Issue 22: the image's default command served nothing: the shipped bridge.toml names the
/// sample as a path beside it, which the image lacked. The image's files are laid out here from
/// its COPY lines, and the binary runs there as the image runs it (ENV, CMD, HEALTHCHECK).
#[test]
fn the_image_serves_its_default_configuration_and_answers_its_health_check() {
    let dockerfile = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
    let stage = final_stage(&dockerfile);
    let all = |word: &str| -> Vec<&String> {
        let found = stage.iter().filter(|(w, _)| w == word);
        found.map(|(_, r)| r).collect()
    };
    let one = |word: &str| {
        let found = all(word);
        assert_eq!(found.len(), 1, "one {word} in the final stage");
        found[0].clone()
    };

    // The image's files from the build context, at their places under `image`.
    let tmp = tempfile::tempdir().unwrap();
    let image = tmp.path().join("image");
    for rest in all("COPY").into_iter().filter(|r| !r.starts_with("--from")) {
        let words: Vec<&str> = rest.split_whitespace().collect();
        let [source, dest] = words[..] else {
            panic!("COPY {rest}: one source, one destination")
        };
        let dest = image.join(dest.trim_start_matches('/'));
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(root().join(source), &dest).unwrap_or_else(|e| panic!("COPY {rest}: {e}"));
    }
    // The licence ships with the binary.
    let licence = image.join("usr/share/doc/oai-bridge/LICENSE");
    assert_eq!(
        std::fs::read(&licence).unwrap_or_default(),
        std::fs::read(root().join("LICENSE")).unwrap(),
        "the image carries LICENSE at {}",
        licence.display()
    );

    let mut env: BTreeMap<String, String> = BTreeMap::new();
    for rest in all("ENV") {
        for pair in rest.split_whitespace() {
            let (k, v) = pair.split_once('=').unwrap();
            env.insert(k.to_owned(), v.to_owned());
        }
    }
    let entrypoint = exec_form(&one("ENTRYPOINT"));
    let cmd = exec_form(&one("CMD"));
    let config_at = cmd.iter().position(|w| w == "--config").unwrap() + 1;
    let config = image.join(cmd[config_at].trim_start_matches('/'));
    assert!(
        config.is_file(),
        "the image lacks its CMD's {}",
        cmd[config_at]
    );

    // Every file the configuration names, relative to its folder, is in the image.
    let toml: toml::Table = std::fs::read_to_string(&config).unwrap().parse().unwrap();
    for repo in toml["repository"].as_array().unwrap() {
        let base_url = repo["base_url"].as_str().unwrap();
        if !base_url.contains("://") {
            let path = config.parent().unwrap().join(base_url);
            assert!(
                path.is_file(),
                "the image lacks {base_url}, named by bridge.toml"
            );
        }
    }
    // Its relative state_dir would be under /etc, not writable by the image's user: the
    // environment puts the state in the volume.
    let volume = one("VOLUME");
    assert_eq!(env.get("OAI_BRIDGE_STATE_DIR"), Some(&volume));

    // The image's command, in the laid-out image (its working folder, so that nothing resolves
    // against the crate root), on a free port and with a state folder of its own.
    let mut args = cmd.clone();
    args[config_at] = config.display().to_string();
    let mut serve = bridge();
    serve
        .args(&args)
        .envs(&env)
        .env("OAI_BRIDGE_LISTEN", "127.0.0.1:0")
        .env("OAI_BRIDGE_ADMIN_LISTEN", "127.0.0.1:0")
        .env("OAI_BRIDGE_STATE_DIR", tmp.path().join("state"))
        .current_dir(&image);
    let mut gateway = Gateway::start(serve).expect("the image's command starts");
    gateway
        .served()
        .expect("the image's command serves the sample");

    // The health check: the entrypoint's binary asking the listening port's /healthz.
    let check = one("HEALTHCHECK");
    let (_, check) = check.split_once("CMD ").expect("HEALTHCHECK ... CMD [...]");
    let check = exec_form(check);
    assert_eq!(check[0], entrypoint[0]);
    let port = env["OAI_BRIDGE_LISTEN"].rsplit(':').next().unwrap();
    let url = format!("http://127.0.0.1:{port}/healthz");
    assert_eq!(check.last(), Some(&url));
    let here = format!("{}healthz", gateway.base);
    let mut args: Vec<&str> = check[1..].iter().map(String::as_str).collect();
    *args.last_mut().unwrap() = &here;
    let o = run(&args);
    assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));

    // And it says no when the answer is not 2xx, or there is none.
    let o = probe(&format!("{}no-such-file", gateway.base));
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains(": 404"), "{}", text(&o.stderr));
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_port = closed.local_addr().unwrap().port();
    drop(closed);
    let o = probe(&format!("http://127.0.0.1:{closed_port}/healthz"));
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("cannot connect"),
        "{}",
        text(&o.stderr)
    );
}

// ---------------------------------------------------------------------------------------------
// The README

/// Issue 22: the README's first commands stay the two that set up (run the sample, run the
/// tests); it says how to install the binary before any command calls it `oai-bridge`, and
/// that a C compiler is needed; it stays short.
#[test]
fn the_readme_installs_before_it_calls_oai_bridge() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    assert!(readme.len() < 15_000, "README.md is {} bytes", readme.len());
    let first_block = readme.split("```sh\n").nth(1).unwrap();
    let first_block = first_block.split("```").next().unwrap();
    assert_eq!(first_block, "cargo run --release -- serve\ncargo test\n");
    let install = readme
        .find("`cargo install --path .`")
        .expect("an install step");
    let first_call = readme.find("`oai-bridge ").unwrap();
    let first_block_call = readme.find("\noai-bridge ").unwrap();
    assert!(install < first_call && install < first_block_call);
    assert!(readme.contains("C compiler"));
}

// ---------------------------------------------------------------------------------------------
// The shipped configuration

/// Issue 22: bridge.toml's head said `oai-bridge export --out DIR` exported the sample, which
/// fails (no configuration read, no public URL). Every command its head gives runs as given
/// from the crate root (`serve` as `serve --check-config`), DIR a new folder.
#[test]
fn the_commands_bridge_toml_gives_work_as_given() {
    let shipped = std::fs::read_to_string(root().join("bridge.toml")).unwrap();
    let head = shipped.lines().take_while(|l| l.starts_with('#'));
    let commands: Vec<&str> = head
        .filter_map(|l| l.split('`').nth(1))
        .filter(|c| c.starts_with("oai-bridge "))
        .collect();
    assert_eq!(commands.len(), 2, "{commands:?}");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    for command in commands {
        let mut args: Vec<String> = command
            .split_whitespace()
            .skip(1)
            .map(String::from)
            .collect();
        if args == ["serve"] {
            args.push("--check-config".to_owned());
        }
        for arg in &mut args {
            if arg == "DIR" {
                *arg = out.display().to_string();
            }
        }
        // Free ports: `--check-config` binds the listeners' (8080 and 8081 may be taken).
        let o = (bridge().args(&args))
            .env("OAI_BRIDGE_LISTEN", "127.0.0.1:0")
            .env("OAI_BRIDGE_ADMIN_LISTEN", "127.0.0.1:0")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{command}: {}", text(&o.stderr));
    }
    assert!(out.join("sitemap.xml").is_file());
}

// ---------------------------------------------------------------------------------------------
// A static export's hidden file

/// Issue 22: an export's folder holds one hidden file, the marker by which the next export
/// knows the folder is its own; a web server would publish it. docs/deployment.md says what it
/// is and how to keep a web server from serving it.
#[test]
fn the_marker_is_an_exports_only_hidden_file_and_is_documented() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("sitemaps");
    let o = bridge()
        .args(["export", "--config", "bridge.toml", "--no-progress", "-q"])
        .args(["--public-url", "https://repository.northbridge.example/"])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let hidden = |dir: &std::path::Path| -> Vec<String> {
        let names = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name());
        let names = names.map(|n| n.to_string_lossy().into_owned());
        names.filter(|n| n.starts_with('.')).collect()
    };
    assert_eq!(hidden(&out), [oai_bridge::MARKER]);
    assert!(
        hidden(tmp.path()).is_empty(),
        "nothing hidden is left beside --out"
    );

    let docs = std::fs::read_to_string(root().join("docs/deployment.md")).unwrap();
    for needle in [
        format!("`{}` is how the next export knows", oai_bridge::MARKER),
        "Do not delete it".to_owned(),
        "location ~ /\\.(?!well-known/) { return 404; }".to_owned(),
        "RedirectMatch 404 \"/\\.(?!well-known/)\"".to_owned(),
    ] {
        assert!(
            docs.contains(&needle),
            "docs/deployment.md lacks {needle:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The systemd unit

/// The values of `key` in the unit's `[Service]` section, in order.
fn service_values(unit: &str, key: &str) -> Vec<String> {
    let mut in_service = false;
    let mut values = Vec::new();
    for line in unit.lines().map(str::trim) {
        if line.starts_with('[') {
            in_service = line == "[Service]";
        } else if in_service
            && let Some((k, v)) = line.split_once('=')
            && k == key
        {
            values.push(v.to_owned());
        }
    }
    values
}

fn unit() -> String {
    std::fs::read_to_string(root().join("deploy/oai-bridge.service")).unwrap()
}

/// systemd 252's system-call groups (`systemd-analyze syscall-filter`, kept in fixtures/).
fn groups() -> BTreeMap<String, Vec<String>> {
    let text = std::fs::read_to_string(root().join("fixtures/systemd/syscall-groups.txt")).unwrap();
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current = None;
    for line in text.lines() {
        if line.starts_with('@') {
            current = Some(line.trim().to_owned());
            groups.insert(line.trim().to_owned(), Vec::new());
        } else if line.trim().is_empty() || line.trim_start().starts_with('#') {
            if line.trim().is_empty() {
                current = None;
            }
        } else if let Some(group) = &current {
            groups.get_mut(group).unwrap().push(line.trim().to_owned());
        }
    }
    groups
}

/// A name or a group, expanded to system calls.
fn expand(item: &str, groups: &BTreeMap<String, Vec<String>>, out: &mut Vec<String>) {
    if item.starts_with('@') {
        let members = groups
            .get(item)
            .unwrap_or_else(|| panic!("no group {item} in systemd 252"));
        for member in members {
            expand(member, groups, out);
        }
    } else {
        out.push(item.to_owned());
    }
}

/// The system calls an allow-list `SystemCallFilter=` sequence lets through, as systemd.exec(5)
/// says: the first assignment, an allow list, sets the default action (refusal); each later one
/// adds its calls, or removes them when it starts with `~`; the empty string resets. The calls
/// for exiting, execve, time and sleeping (`@default`) are always allowed.
fn allowed(filters: &[String]) -> std::collections::BTreeSet<String> {
    let groups = groups();
    let mut allowed = std::collections::BTreeSet::new();
    let mut calls = Vec::new();
    expand("@default", &groups, &mut calls);
    allowed.extend(calls);
    for (i, filter) in filters.iter().enumerate() {
        if filter.is_empty() {
            allowed.clear();
            continue;
        }
        let (deny, list) = match filter.strip_prefix('~') {
            Some(list) => (true, list),
            None => (false, filter.as_str()),
        };
        assert!(
            i > 0 || !deny,
            "the unit's first SystemCallFilter= is an allow list"
        );
        let mut calls = Vec::new();
        for item in list.split_whitespace() {
            expand(item.split(':').next().unwrap(), &groups, &mut calls);
        }
        for call in calls {
            if deny {
                allowed.remove(&call);
            } else {
                allowed.insert(call);
            }
        }
    }
    allowed
}

/// The filter lines the unit had before issue 22: setpriority, which every refresh calls, was
/// refused by killing the gateway (SIGSYS, exit 159), and Restart=on-failure looped it.
const FILTER_BEFORE_22: [&str; 2] = ["@system-service", "~@privileged @resources"];

/// Issue 22: what the unit's filter lets through, read from the unit: the refresh's
/// setpriority (src/server/refresh.rs lowers its thread's priority); a refused call fails with
/// EPERM instead of killing the gateway; SIGHUP reloads.
#[test]
fn the_units_filter_lets_the_refresh_lower_its_priority() {
    let refresh = std::fs::read_to_string(root().join("src/server/refresh.rs")).unwrap();
    assert!(refresh.contains("setpriority_process"));
    let unit = unit();
    let filters = service_values(&unit, "SystemCallFilter");
    assert!(allowed(&filters).contains("setpriority"), "{filters:?}");
    // The semantics above are those that refused it before.
    let before = FILTER_BEFORE_22.map(String::from);
    assert!(!allowed(&before).contains("setpriority"));
    assert!(allowed(&before).contains("openat"));
    assert!(!allowed(&before).contains("mount"));

    assert_eq!(service_values(&unit, "SystemCallErrorNumber"), ["EPERM"]);
    assert_eq!(
        service_values(&unit, "ExecReload"),
        ["/bin/kill -HUP $MAINPID"]
    );
}

/// The real gateway under the unit's filter, installed with seccomp before exec (as systemd
/// does, with no_new_privs), through its first refresh of the sample, where the refresh thread
/// calls setpriority. Stricter than the unit: a refused call kills here instead of failing with
/// EPERM, so the gateway calls nothing outside the allow list. The filter before issue 22,
/// which differs from it by setpriority alone, kills the gateway with SIGSYS, as it did in the
/// field; with the unit's EPERM it would have served (the refresh goes on at its priority).
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn the_gateway_refreshes_under_the_units_system_call_filter() {
    use std::os::unix::process::ExitStatusExt as _;

    use seccompiler::SeccompAction;

    let now = allowed(&service_values(&unit(), "SystemCallFilter"));
    let before = allowed(&FILTER_BEFORE_22.map(String::from));
    let added: Vec<&String> = now.difference(&before).collect();
    assert_eq!(added, ["setpriority"]);
    assert!(before.is_subset(&now));

    let serve = |calls: &std::collections::BTreeSet<String>, refused: SeccompAction| {
        let mut calls = calls.clone();
        // Run as root (as CI runs), SQLite hands its journal and WAL files to the database's
        // owner with fchown (in @privileged: refused by the unit); it asks geteuid first and
        // does not when it is not root, and the unit's DynamicUser never is.
        if rustix::process::geteuid().is_root() {
            calls.insert("fchown".to_owned());
        }
        let state = tempfile::tempdir().unwrap();
        let mut cmd = bridge();
        cmd.args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
        ])
        .arg("--state-dir")
        .arg(state.path());
        under_filter(&mut cmd, &calls, refused);
        Gateway::start(cmd).and_then(|mut g| g.served())
    };

    serve(&now, SeccompAction::KillProcess)
        .expect("the gateway serves the sample under the unit's filter");
    let status = serve(&before, SeccompAction::KillProcess)
        .expect_err("the filter before issue 22 stops the gateway");
    assert_eq!(status.signal(), Some(libc::SIGSYS), "{status}");
    serve(&before, SeccompAction::Errno(libc::EPERM as u32))
        .expect("a refused setpriority that fails with EPERM is no harm");
}

/// Has `cmd` install, between fork and exec, a seccomp filter that allows `calls` (x86_64
/// names) and meets any other with `refused`.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[allow(unsafe_code)]
fn under_filter(
    cmd: &mut Command,
    calls: &std::collections::BTreeSet<String>,
    refused: seccompiler::SeccompAction,
) {
    use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};
    use std::os::unix::process::CommandExt as _;

    let numbers =
        std::fs::read_to_string(root().join("fixtures/systemd/syscalls-x86_64.txt")).unwrap();
    let numbers: BTreeMap<&str, i64> = numbers
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (name, nr) = l.split_once(' ').unwrap();
            (name, nr.parse().unwrap())
        })
        .collect();
    // Names of other architectures (clock_gettime64, ...) are skipped, as systemd skips them.
    let rules = calls
        .iter()
        .filter_map(|call| numbers.get(call.as_str()))
        .map(|&nr| (nr, Vec::new()))
        .collect();
    let filter =
        SeccompFilter::new(rules, refused, SeccompAction::Allow, TargetArch::x86_64).unwrap();
    let program: BpfProgram = filter.try_into().unwrap();
    // SAFETY: between fork and exec the closure calls only prctl and seccomp (apply_filter) on
    // a program built before the fork, and allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            seccompiler::apply_filter(&program).map_err(|_| std::io::Error::last_os_error())
        });
    }
}
