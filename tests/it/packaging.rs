//! What ships beside the binary, as shipped (issue 22): shell completions and the manual page;
//! the container image, laid out from the Dockerfile's COPY lines and run with its ENV, CMD and
//! HEALTHCHECK.

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
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_oai-bridge"));
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

#[test]
fn the_man_page_is_roff_naming_the_commands() {
    let o = run(&["man"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let page = text(&o.stdout);
    assert!(page.contains("\n.TH oai-bridge 1 "), "{page}");
    for section in [".SH NAME", ".SH SYNOPSIS", ".SH OPTIONS", ".SH SUBCOMMANDS"] {
        assert!(page.contains(section), "the page lacks {section}");
    }
    for command in ["serve", "export", "check", "completions", "man"] {
        assert!(
            page.contains(&format!("oai\\-bridge\\-{command}(1)")),
            "the page does not name {command}"
        );
    }
    // The exit codes, and not the image's hidden tool.
    assert!(
        page.contains("2 usage error, 78 bad configuration"),
        "{page}"
    );
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
