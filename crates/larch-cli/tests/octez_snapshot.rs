//! `larch import octez-snapshot`: synthetic Octez snapshot archives (version 9) built around the
//! one-commit stores Irmin wrote, and around larch's own exports; bad archives leave nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../larch-octez/tests/common/mod.rs"]
mod octez;

use larch_core::Hash;
use larch_store::Repo;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const HEAD: &str = "CoWSMPUwKZad7rCCDGzPS7yaXC9Sso73HZufsX9zdDhXWxZ5EeNy";
const LVL17: &str = "CoV7L2tq8ubfzXVCohvehyiPQzmvmXinDjxAyEfa2EvQTzdGFW6V";

fn data() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../larch-irmin/tests/data")
}

fn larch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_larch")).args(args).output().unwrap()
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn hash(text: &str) -> [u8; 32] {
    text.parse::<Hash>().unwrap().0
}

fn names(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

fn write_archive(dir: &Path, context: &Path, commit: [u8; 32]) -> PathBuf {
    let path = dir.join("snapshot.rolling");
    std::fs::write(&path, octez::tar(&octez::members(context, commit))).unwrap();
    path
}

/// Imports `archive` into `dir/new`: the output, and whether it succeeded.
fn import(dir: &Path, archive: &Path) -> Output {
    larch(&["import", "octez-snapshot", s(archive), s(&dir.join("new"))])
}

#[test]
fn a_snapshot_of_the_irmin_context_imports_with_its_hash() {
    let tmp = tempfile::tempdir().unwrap();
    let archive = write_archive(tmp.path(), &data().join("one-commit/plain-head"), hash(HEAD));
    let out = import(tmp.path(), &archive);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let (_, header) = octez::block_data(hash(HEAD));
    for expected in
        ["version 9", "chain TEZOS_MAINNET", "mode rolling", "at level 41", HEAD, &octez::block_hash(&header)]
    {
        assert!(text.contains(expected), "{expected}: {text}");
    }
    let repo = Repo::open_read_only(tmp.path().join("new")).unwrap();
    assert_eq!(repo.head().unwrap().to_base58(), HEAD);
    assert!(repo.fsck().is_clean());
    // Nothing left beside the new store: the context's files were removed.
    assert_eq!(names(tmp.path()), ["new", "snapshot.rolling"]);
}

#[test]
fn a_snapshot_reads_from_standard_input() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes = octez::tar(&octez::members(&data().join("one-commit/plain-lvl17"), hash(LVL17)));
    let mut child = Command::new(env!("CARGO_BIN_EXE_larch"))
        .args(["import", "octez-snapshot", "-", s(&tmp.path().join("new"))])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(Repo::open_read_only(tmp.path().join("new")).unwrap().head().unwrap().to_base58(), LVL17);
}

#[test]
fn a_snapshot_directory_imports_in_place() {
    let tmp = tempfile::tempdir().unwrap();
    let raw = tmp.path().join("raw");
    octez::write_directory(&octez::members(&data().join("one-commit/plain-head"), hash(HEAD)), &raw);
    let out = import(tmp.path(), &raw);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("chain TEZOS_MAINNET"));
    assert_eq!(Repo::open_read_only(tmp.path().join("new")).unwrap().head().unwrap().to_base58(), HEAD);
    // Read in place: the snapshot directory is left as it was.
    assert_eq!(names(&raw.join("context")), names(&data().join("one-commit/plain-head")));
    assert_eq!(names(tmp.path()), ["new", "raw"]);
}

#[test]
fn larch_exports_make_snapshots_octez_contexts_import_from() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("larch");
    let out = larch(&["import", "irmin", s(&data().join("tezos-stores/plain")), s(&store), "--all"]);
    assert!(out.status.success());
    let context = tmp.path().join("context");
    let out = larch(&["export", "irmin", s(&store), s(&context), "--commit", LVL17]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let dir = tmp.path().join("snap");
    std::fs::create_dir(&dir).unwrap();
    let archive = write_archive(&dir, &context, hash(LVL17));
    let out = import(&dir, &archive);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(Repo::open_read_only(dir.join("new")).unwrap().head().unwrap().to_base58(), LVL17);
}

/// A failed import: exit status 2, `needle` in the error, and nothing left but the archive.
fn fails(dir: &Path, archive: &Path, needle: &str) {
    let out = import(dir, archive);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(needle), "{needle}: {err}");
    assert_eq!(names(dir), [archive.file_name().unwrap().to_string_lossy().into_owned()]);
}

#[test]
fn a_context_that_is_not_the_block_data_s_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    // The block data records lvl17's context; the archive holds the head's.
    let archive = write_archive(tmp.path(), &data().join("one-commit/plain-head"), hash(LVL17));
    fails(tmp.path(), &archive, "block data records context");
}

#[test]
fn a_corrupted_context_is_refused_and_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let context = tmp.path().join("ctx");
    // A writable copy of the fixture: its members as the archive would hold them.
    octez::write_directory(&octez::members(&data().join("one-commit/plain-head"), hash(HEAD)), &context);
    let context = context.join("context");
    // The last byte of the prefix's first entry: the value of `test_chain` (35 bytes, the
    // mapping's first record), which the commit's root directory holds.
    let prefix = context.join("store.1.prefix");
    let mut bytes = std::fs::read(&prefix).unwrap();
    bytes[34] ^= 0x01;
    std::fs::write(&prefix, &bytes).unwrap();
    let dir = tmp.path().join("snap");
    std::fs::create_dir(&dir).unwrap();
    let archive = write_archive(&dir, &context, hash(HEAD));
    fails(&dir, &archive, "contents at pack offset 153");
}

#[test]
fn bad_archives_are_refused_and_leave_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let context = data().join("one-commit/plain-head");
    let mut members = octez::members(&context, hash(HEAD));
    members[0].1 = Some(b"{\"version\": 8}".to_vec());
    let archive = tmp.path().join("snapshot.rolling");
    std::fs::write(&archive, octez::tar(&members)).unwrap();
    fails(tmp.path(), &archive, "snapshot version 8: larch reads Octez snapshots of version 9 only");
    let bytes = octez::tar(&octez::members(&context, hash(HEAD)));
    std::fs::write(&archive, &bytes[..bytes.len() / 2]).unwrap();
    fails(tmp.path(), &archive, "context/");
    let members: Vec<_> =
        octez::members(&context, hash(HEAD)).into_iter().filter(|(name, _)| name != "block_data").collect();
    std::fs::write(&archive, octez::tar(&members)).unwrap();
    fails(tmp.path(), &archive, "\"block_data\" is missing");
    // An existing target is refused before anything is read.
    std::fs::write(&archive, &bytes).unwrap();
    std::fs::create_dir(tmp.path().join("new")).unwrap();
    let out = import(tmp.path(), &archive);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
}
