//! `larch import irmin`: the Irmin 3.7.2 stores of `crates/larch-irmin/tests/data/tezos-stores`
//! imported into new larch stores whose commit hashes are Irmin's.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_core::Hash;
use larch_store::Repo;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const HEAD: &str = "CoWSMPUwKZad7rCCDGzPS7yaXC9Sso73HZufsX9zdDhXWxZ5EeNy";

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../larch-irmin/tests/data/tezos-stores")
}

fn expected(key: &str) -> Vec<Hash> {
    let text = std::fs::read_to_string(fixtures().join("commits.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json[key].as_array().unwrap().iter().map(|v| Hash::from_hex(v.as_str().unwrap()).unwrap()).collect()
}

fn larch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_larch")).args(args).output().unwrap()
}

fn import(store: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["import", "irmin", store.to_str().unwrap(), out.to_str().unwrap()];
    args.extend_from_slice(extra);
    larch(&args)
}

fn fsck_clean(store: &Path) {
    let out = larch(&["fsck", store.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
}

/// Nothing but `keep` in `dir`: a failed import leaves no store and no staging directory.
fn only(dir: &Path, keep: &[&str]) {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, keep.iter().map(|s| s.to_string()).collect::<Vec<_>>());
}

#[test]
fn all_commits_of_the_plain_store_keep_their_hashes() {
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("imported");
    let out = import(&fixtures().join("plain"), &out_dir, &["--all"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("imported 42 commit(s)") && text.contains("objects/s"), "{text}");
    let repo = Repo::open_read_only(&out_dir).unwrap();
    assert_eq!(repo.commit_count(), 42);
    for hash in expected("plain") {
        let details = repo.commit_details(&hash).unwrap();
        assert_eq!(repo.checkout(&hash).unwrap().hash(), details.tree_hash);
    }
    assert_eq!(repo.head().unwrap().to_base58(), HEAD);
    drop(repo);
    fsck_clean(&out_dir);
}

#[test]
fn default_imports_the_newest_commit_with_absent_parents() {
    let tmp = tempfile::tempdir().unwrap();
    for name in ["plain", "gced", "lower"] {
        let out_dir = tmp.path().join(name);
        let out = import(&fixtures().join(name), &out_dir, &[]);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let repo = Repo::open_read_only(&out_dir).unwrap();
        assert_eq!(repo.commit_count(), 1);
        assert_eq!(repo.head().unwrap().to_base58(), HEAD);
        drop(repo);
        fsck_clean(&out_dir);
    }
}

#[test]
fn the_lower_layer_serves_commits_the_gc_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let first = expected("plain")[0];
    let out_dir = tmp.path().join("old");
    let out = import(&fixtures().join("lower"), &out_dir, &["--commit", &first.to_hex()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(Repo::open_read_only(&out_dir).unwrap().contains(&first));
    // The same commit is gone from the store without a lower layer: a typed error, no store left.
    let failed = tmp.path().join("failed");
    let out = import(&fixtures().join("gced"), &failed, &["--commit", &first.to_base58()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("collected by Irmin's GC"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    only(tmp.path(), &["old"]);
}

#[test]
fn a_corrupted_store_fails_and_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let irmin = tmp.path().join("irmin");
    std::fs::create_dir(&irmin).unwrap();
    for entry in std::fs::read_dir(fixtures().join("plain")).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), irmin.join(entry.file_name())).unwrap();
        }
    }
    std::fs::create_dir(irmin.join("index")).unwrap();
    std::fs::copy(fixtures().join("plain/index/log"), irmin.join("index/log")).unwrap();
    let suffix = irmin.join("store.0.suffix");
    let mut bytes = std::fs::read(&suffix).unwrap();
    let middle = bytes.len() / 2;
    for byte in &mut bytes[middle..middle + 64] {
        *byte ^= 0x55;
    }
    std::fs::write(&suffix, &bytes).unwrap();
    let out = import(&irmin, &tmp.path().join("new"), &["--all"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("store.0.suffix"), "{stderr}");
    only(tmp.path(), &["irmin"]);
    // An existing target is refused, untouched.
    std::fs::create_dir(tmp.path().join("exists")).unwrap();
    let out = import(&fixtures().join("plain"), &tmp.path().join("exists"), &[]);
    assert_eq!(out.status.code(), Some(2));
    only(tmp.path(), &["exists", "irmin"]);
}

/// The id of a process that has exited.
fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// Imports killed midway left their build directories (issue 44; `NAME.importing-PID` as earlier
/// versions named them, `.NAME.importing-PID` now): the next import into the same target removes
/// both, says so, and leaves only the new store.
#[test]
fn an_import_removes_the_build_directories_of_imports_that_died() {
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("imported");
    let stale = [
        tmp.path().join(format!(".imported.importing-{}", dead_pid())),
        tmp.path().join(format!("imported.importing-{}", dead_pid())),
    ];
    for dir in &stale {
        std::fs::create_dir(dir).unwrap();
        std::fs::write(dir.join("commits"), b"partial").unwrap();
    }
    let out = import(&fixtures().join("plain"), &out_dir, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    for dir in &stale {
        assert!(text.contains(&format!("removed {}", dir.display())), "{text}");
    }
    only(tmp.path(), &["imported"]);
    fsck_clean(&out_dir);
}
