//! `oai-bridge prune`: removes the state of repositories no longer configured. A reload (or a
//! restart) stops serving a removed repository but keeps its folder, so that putting it back
//! serves its last generation at once and harvests incrementally; pruning is the operator's
//! decision, taken after the reload that removed it.

use std::path::{Path, PathBuf};

/// The folders of `state_dir` that hold a repository's state (a store or a generation pointer)
/// and are named after no repository in `configured`, sorted.
pub(crate) fn unconfigured(state_dir: &Path, configured: &[&str]) -> std::io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(state_dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let is_repository = entry.file_type()?.is_dir()
            && (entry.path().join(crate::store::FILE).exists()
                || entry.path().join("current").exists());
        if is_repository && !name.to_str().is_some_and(|n| configured.contains(&n)) {
            found.push(entry.path());
        }
    }
    found.sort();
    Ok(found)
}

/// Removes the state of the repositories in `state_dir` that `configured` does not name
/// ([`unconfigured`]), or with `dry_run` only finds it; the folders, in order, and what
/// removing each gave.
pub(crate) fn prune(
    state_dir: &Path,
    configured: &[&str],
    dry_run: bool,
) -> std::io::Result<Vec<(PathBuf, std::io::Result<()>)>> {
    Ok(unconfigured(state_dir, configured)?
        .into_iter()
        .map(|dir| {
            let removed = if dry_run {
                Ok(())
            } else {
                std::fs::remove_dir_all(&dir)
            };
            (dir, removed)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_state_of_repositories_not_configured_goes() {
        let state = tempfile::tempdir().unwrap();
        let root = state.path();
        for (dir, file) in [
            ("kept", crate::store::FILE),
            ("gone", crate::store::FILE),
            ("gone-too", "current"),
            ("not-ours", "notes.txt"),
        ] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
            std::fs::write(root.join(dir).join(file), "x").unwrap();
        }
        std::fs::write(root.join("robots.txt.modified"), "x").unwrap();
        let found = unconfigured(root, &["kept"]).unwrap();
        assert_eq!(found, [root.join("gone"), root.join("gone-too")]);

        let dry = prune(root, &["kept"], true).unwrap();
        assert_eq!(dry.len(), 2);
        assert!(root.join("gone").exists(), "a dry run removes nothing");
        let done = prune(root, &["kept"], false).unwrap();
        assert!(done.iter().all(|(_, r)| r.is_ok()));
        for (dir, there) in [
            ("kept", true),
            ("gone", false),
            ("gone-too", false),
            ("not-ours", true),
            ("robots.txt.modified", true),
        ] {
            assert_eq!(root.join(dir).exists(), there, "{dir}");
        }
    }
}
