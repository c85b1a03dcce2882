//! What the inspection commands (`log`, `ls`, `cat`, `diff`, `stats`) share: opening a store
//! read-only, naming a commit, walking a path with errors that say where it went wrong.

use anyhow::{Context, anyhow, bail};
use larch_core::{Hash, Kind, Tree};
use larch_store::{DEFAULT_BRANCH, Repo, RepoOptions};
use std::path::Path;

/// Opens `store` read-only (never takes the writer lock; a store whose writer crashed or is running
/// opens at its last published commit) with a small cache: inspection reads little.
pub fn open_store(store: &Path) -> anyhow::Result<Repo> {
    if !store.exists() {
        bail!("store {} does not exist", store.display());
    }
    let lower = crate::lower::open(store, false)?;
    let options = lower.apply(RepoOptions { cache_bytes: 32 << 20, create: false, ..RepoOptions::default() });
    lower.open_read_only(store, options).with_context(|| format!("opening store {}", store.display()))
}

static LOWER: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();

/// Records the global `--lower DIR` option (once, at start).
pub fn set_lower(lower: Option<std::path::PathBuf>) {
    let _ = LOWER.set(lower);
}

/// The global `--lower DIR` option: the lower directory of a store in archive mode (`None` when
/// `--lower` is an object-storage URL: [`crate::lower`]).
pub fn lower() -> Option<std::path::PathBuf> {
    lower_raw().filter(|lower| lower.to_str().is_none_or(|text| !larch_remote::RemoteUrl::is_remote(text)))
}

/// The global `--lower` option as given: a directory or an `s3://` URL.
pub fn lower_raw() -> Option<std::path::PathBuf> {
    LOWER.get().cloned().flatten()
}

/// The commit that `name` designates: a commit hash (`Co…` or 64 hex digits), a branch name, or
/// `head` (the default branch); `None` means `head`.
pub fn resolve_commit(repo: &Repo, name: Option<&str>) -> anyhow::Result<Hash> {
    let name = name.unwrap_or("head");
    if name == "head" || name == "HEAD" {
        return repo.branch(DEFAULT_BRANCH).ok_or_else(|| {
            anyhow!(
                "the store has no head yet (branch `{DEFAULT_BRANCH}` does not exist): it holds no commit"
            )
        });
    }
    if let Some(hash) = repo.branch(name) {
        return Ok(hash);
    }
    match name.parse::<Hash>() {
        Ok(hash) if repo.contains(&hash) => Ok(hash),
        Ok(hash) => match repo.commit_details(&hash) {
            // A commit removed by garbage collection says so.
            Err(err @ larch_store::StoreError::Collected { .. }) => Err(err.into()),
            _ => bail!("unknown commit {hash}: the store has no such commit"),
        },
        Err(err) => {
            bail!(
                "{name:?} is neither a branch of the store nor a commit hash (`Co…` or 64 hex digits): {err}"
            )
        }
    }
}

/// The steps of a path written `a/b/c` (empty, `/` or `.` for the root).
pub fn parse_path(path: Option<&str>) -> Vec<String> {
    path.unwrap_or("").split('/').filter(|step| !step.is_empty() && *step != ".").map(str::to_owned).collect()
}

/// `a/b/c` for the steps of a path, `/` for the root.
pub fn show_path<S: AsRef<str>>(steps: &[S]) -> String {
    if steps.is_empty() {
        return "/".to_owned();
    }
    steps.iter().map(AsRef::as_ref).collect::<Vec<_>>().join("/")
}

/// The sub-tree at `steps` below `tree`, with an error naming the first step that is missing or
/// that goes through a value.
pub fn walk(tree: &Tree, steps: &[String]) -> anyhow::Result<Tree> {
    let mut current = tree.clone();
    for (depth, step) in steps.iter().enumerate() {
        if current.kind() == Kind::Contents {
            bail!(
                "path {} goes through a value: {} is a value, not a directory",
                show_path(steps),
                show_path(&steps[..depth])
            );
        }
        current = current
            .find_tree(&[step.as_bytes()])
            .with_context(|| format!("reading {}", show_path(&steps[..=depth])))?
            .ok_or_else(|| {
                anyhow!(
                    "no such path: {} (no entry {step:?} in {})",
                    show_path(steps),
                    show_path(&steps[..depth])
                )
            })?;
    }
    Ok(current)
}

/// A name for output: the UTF-8 text, or the hex of bytes that are not UTF-8.
pub fn show_name(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_owned(),
        Err(_) => format!("0x{}", hex::encode(bytes)),
    }
}

/// `contents` or `directory`.
pub fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Contents => "value",
        Kind::Node => "directory",
    }
}

/// The date of a commit as RFC 3339 UTC.
pub fn format_date(unix: i64) -> String {
    larch_core::schema::rfc3339_utc(unix)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_split_on_slashes() {
        assert_eq!(parse_path(Some("a/b//c/")), vec!["a", "b", "c"]);
        assert!(parse_path(Some("/")).is_empty());
        assert!(parse_path(None).is_empty());
        assert_eq!(show_path::<String>(&[]), "/");
        assert_eq!(show_path(&["a", "b"]), "a/b");
    }
}
