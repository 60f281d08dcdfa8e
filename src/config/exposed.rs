//! A configuration file that holds a secret and that other users can read: the warning that
//! names the file and the secrets' keys (never their values), said when the file is read.

use std::path::Path;

/// The keys of `table` (a configuration file, or an included one) whose values are secrets,
/// as errors name them: `[server] admin_token`, `[state] url` when it holds a password, the
/// `headers` of `[harvest]` and of each `[repository.harvest]` (an `Authorization` is the
/// usual one), and each `[repository.indexnow] key`.
pub(crate) fn secrets_in(table: &toml::Table) -> Vec<String> {
    let mut keys = Vec::new();
    let at = |section: &str, key: &str| table.get(section)?.as_table()?.get(key).cloned();
    if at("server", "admin_token").is_some() {
        keys.push("[server] admin_token".to_owned());
    }
    let url = at("state", "url");
    let url = url.as_ref().and_then(toml::Value::as_str);
    if url.is_some_and(holds_password) {
        keys.push("[state] url (its password)".to_owned());
    }
    if at("harvest", "headers").is_some_and(|h| has_entries(&h)) {
        keys.push("[harvest] headers".to_owned());
    }
    let repositories = table.get("repository").and_then(toml::Value::as_array);
    for (i, repo) in repositories.into_iter().flatten().enumerate() {
        let Some(repo) = repo.as_table() else {
            continue;
        };
        let name = match repo.get("name").and_then(toml::Value::as_str) {
            Some(name) => format!("{name:?}"),
            None => format!("#{}", i + 1),
        };
        let of = |section: &str, key: &str| repo.get(section)?.as_table()?.get(key).cloned();
        if of("harvest", "headers").is_some_and(|h| has_entries(&h)) {
            keys.push(format!(
                "[[repository]] {name} [repository.harvest] headers"
            ));
        }
        if of("indexnow", "key").is_some() {
            keys.push(format!("[[repository]] {name} [repository.indexnow] key"));
        }
    }
    keys
}

/// Whether a `[state] url` carries a password: `postgres://user:password@host/db`, or a
/// `password=` setting in its query.
fn holds_password(url: &str) -> bool {
    url::Url::parse(url)
        .is_ok_and(|u| u.password().is_some() || u.query_pairs().any(|(k, _)| k == "password"))
}

fn has_entries(value: &toml::Value) -> bool {
    value.as_table().is_some_and(|t| !t.is_empty())
}

/// The warning for the file at `path`, which holds `table`: `None` when it holds no secret,
/// or when only its owner can read it (no read bit for group or others).
pub(crate) fn warning(path: &Path, table: &toml::Table) -> Option<String> {
    let mode = mode(path)?;
    if mode & 0o044 == 0 {
        return None;
    }
    let keys = secrets_in(table);
    if keys.is_empty() {
        return None;
    }
    Some(format!(
        "{}: other users can read this file (mode {:04o}) and it holds secrets: {}; make it \
         readable by the gateway's user alone (chmod 600), or move them out of it \
         (admin_token_file, password_file, the environment: see docs/security.md)",
        path.display(),
        mode & 0o7777,
        keys.join(", ")
    ))
}

#[cfg(unix)]
fn mode(path: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt as _;
    Some(std::fs::metadata(path).ok()?.permissions().mode())
}

#[cfg(not(unix))]
fn mode(_: &Path) -> Option<u32> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, want: &[&str]) {
        let table: toml::Table = toml::from_str(text).unwrap();
        assert_eq!(secrets_in(&table), want, "{text}");
    }

    #[test]
    fn the_secrets_a_file_holds_are_named_by_their_keys() {
        check("[server]\nlisten = \"127.0.0.1:1\"\n", &[]);
        check("[server]\nadmin_token = \"t\"\n", &["[server] admin_token"]);
        check("[server]\nadmin_token_file = \"t\"\n", &[]);
        check("[state]\nurl = \"postgres://u@h/d\"\n", &[]);
        check(
            "[state]\nurl = \"postgres://u:p@h/d\"\n",
            &["[state] url (its password)"],
        );
        check(
            "[state]\nurl = \"postgres://u@h/d?password=p\"\n",
            &["[state] url (its password)"],
        );
        check("[harvest.headers]\n", &[]);
        check(
            "[harvest.headers]\nAuthorization = \"Bearer x\"\n",
            &["[harvest] headers"],
        );
        check(
            "[[repository]]\nname = \"a\"\n[repository.harvest.headers]\nX-Key = \"k\"\n\
             [[repository]]\n[repository.indexnow]\nkey = \"k\"\n",
            &[
                "[[repository]] \"a\" [repository.harvest] headers",
                "[[repository]] #2 [repository.indexnow] key",
            ],
        );
    }

    #[cfg(unix)]
    #[test]
    fn only_a_file_others_can_read_is_warned_about() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bridge.toml");
        let text = "[server]\nadmin_token = \"0123456789abcdef-ZQX\"\n";
        std::fs::write(&path, text).unwrap();
        let table: toml::Table = toml::from_str(text).unwrap();
        for (mode, warned) in [(0o600, false), (0o640, true), (0o604, true), (0o400, false)] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let warning = warning(&path, &table);
            assert_eq!(warning.is_some(), warned, "{mode:o}: {warning:?}");
            if let Some(w) = warning {
                assert!(w.contains("[server] admin_token"), "{w}");
                assert!(w.contains(&path.display().to_string()), "{w}");
                assert!(!w.contains("ZQX"), "{w}");
            }
        }
    }
}
