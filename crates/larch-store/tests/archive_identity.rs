//! The identity of a lower directory (issue 39 item 1, `docs/format.md` §3.1): a lower directory
//! names the store it serves (`larch-lower`, written when a writer first uses it); another store's
//! directory, or a lower directory that serves another store, is refused at open with
//! `StoreError::ForeignLower` and left untouched; the writer's open removes files above the head
//! and unnamed files from the store directory only; the clean-up after a cut move compares the
//! whole content of both copies, not only their length and header.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::{commit_blocks, contents_of};
use larch_core::Hash;
use larch_store::{Repo, RepoOptions, StoreError};
use larch_testkit::Model;
use std::collections::BTreeMap;
use std::path::Path;

fn options(lower: Option<&Path>) -> RepoOptions {
    RepoOptions {
        chunk_bytes: 4096,
        cache_bytes: 1 << 16,
        lower: lower.map(Path::to_path_buf),
        ..RepoOptions::default()
    }
}

fn chunk(seq: u32) -> String {
    format!("chunk.{seq:06}")
}

/// Every file of `dir` with its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            (entry.file_name().to_string_lossy().into_owned(), std::fs::read(entry.path()).unwrap())
        })
        .collect()
}

/// A new store at `dir` with `blocks` random blocks; returns every commit with its model.
fn store(dir: &Path, lower: Option<&Path>, blocks: u64, name: &str) -> Vec<(Hash, Model)> {
    let mut repo = Repo::open_with(dir, options(lower)).unwrap();
    let out = commit_blocks(&mut repo, blocks, name, None);
    repo.close().unwrap();
    out
}

/// The store at `dir` reads every commit of `commits` and passes fsck.
fn intact(dir: &Path, lower: Option<&Path>, commits: &[(Hash, Model)], what: &str) {
    let repo = Repo::open_read_only_options(dir, options(lower)).unwrap();
    for (i, (hash, model)) in commits.iter().enumerate() {
        let tree = repo.checkout(hash).unwrap_or_else(|e| panic!("{what}: commit {i}: {e}"));
        assert_eq!(contents_of(&tree), model.values, "{what}: commit {i}");
    }
    let report = repo.fsck();
    assert!(report.is_clean(), "{what}: {report}");
}

fn assert_foreign(result: larch_store::Result<Repo>, what: &str) {
    match result {
        Err(error @ StoreError::ForeignLower { .. }) => eprintln!("{what}: {error}"),
        Err(other) => panic!("{what}: expected ForeignLower, got {other}"),
        Ok(_) => panic!("{what}: opened"),
    }
}

/// The reproduction: store B opened with store A's directory as its lower directory. A
/// writer (and a reader) of B is refused, and A keeps every file, byte for byte.
#[test]
fn another_stores_directory_is_refused_as_lower_and_left_intact() {
    let root = tempfile::tempdir().unwrap();
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    let commits_a = store(&a, None, 12, "identity_a");
    store(&b, None, 1, "identity_b");
    let before = files(&a);
    assert!(before.contains_key(&chunk(1)), "store A has two chunks: {:?}", before.keys());
    assert_foreign(Repo::open_with(&b, options(Some(&a))), "writer of B over A");
    assert_foreign(Repo::open_read_only_options(&b, options(Some(&a))), "reader of B over A");
    assert_eq!(files(&a), before, "store A was touched");
    assert!(!b.join("larch-id").exists(), "a refused open gave B an identity");
    intact(&a, None, &commits_a, "store A");
}

/// A lower directory serves one store: the second store that names it is refused (writer and
/// reader), and the first one still reads everything through it.
#[test]
fn a_lower_directory_shared_by_two_stores_is_refused_for_the_second() {
    let root = tempfile::tempdir().unwrap();
    let (a, b, low) = (root.path().join("a"), root.path().join("b"), root.path().join("lower"));
    let commits_a = store(&a, Some(&low), 20, "identity_shared_a");
    let mut repo = Repo::open_with(&a, options(Some(&low))).unwrap();
    let report = repo.archive(&commits_a[15].0).unwrap();
    assert!(report.chunks_moved >= 2, "{report:?}");
    repo.close().unwrap();
    let lower_before = files(&low);
    // B: a new store and an existing one.
    assert_foreign(Repo::open_with(&b, options(Some(&low))), "new store B over A's lower");
    store(&b, None, 3, "identity_shared_b");
    assert_foreign(Repo::open_with(&b, options(Some(&low))), "writer of B over A's lower");
    assert_foreign(Repo::open_read_only_options(&b, options(Some(&low))), "reader of B over A's lower");
    assert_eq!(files(&low), lower_before, "A's lower directory was touched");
    intact(&a, Some(&low), &commits_a, "store A");
    // A marker that is not one (damage) is refused too, not replaced.
    let other = root.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("larch-lower"), b"garbage").unwrap();
    let error = Repo::open_with(&a, options(Some(&other))).unwrap_err();
    assert!(error.to_string().contains("larch-lower"), "{error}");
    assert_eq!(std::fs::read(other.join("larch-lower")).unwrap(), b"garbage");
}

/// In an adopted lower directory, files the store's state does not name (a chunk above the head)
/// are never removed by the writer's open: orphans go from the store directory only.
#[test]
fn orphans_are_removed_from_the_store_directory_only() {
    let root = tempfile::tempdir().unwrap();
    let (a, low) = (root.path().join("a"), root.path().join("lower"));
    let commits = store(&a, Some(&low), 12, "identity_orphans");
    let head = Repo::open_read_only(&a).unwrap().chunk_files().len() as u32;
    let (above, below) = (chunk(head + 3), chunk(head + 4));
    std::fs::write(low.join(&above), b"not ours to remove").unwrap();
    std::fs::write(a.join(&below), b"an orphan of a roll").unwrap();
    drop(Repo::open_with(&a, options(Some(&low))).unwrap());
    assert!(low.join(&above).exists(), "the open removed {above} from the lower directory");
    assert!(!a.join(&below).exists(), "the open kept the orphan {below} of the store directory");
    intact(&a, Some(&low), &commits, "store");
}

/// A lower copy of the same length and header whose bytes differ further on is not a complete
/// copy: the writer's open keeps the upper copy (and the next move replaces the lower one).
#[test]
fn a_lower_copy_differing_after_its_header_is_not_the_same_copy() {
    let root = tempfile::tempdir().unwrap();
    let (a, low) = (root.path().join("a"), root.path().join("lower"));
    let commits = store(&a, Some(&low), 20, "identity_same_copy");
    let mut repo = Repo::open_with(&a, options(Some(&low))).unwrap();
    let report = repo.archive(&commits[15].0).unwrap();
    repo.close().unwrap();
    let k = report.commit_chunk - 1;
    let moved = std::fs::read(low.join(chunk(k))).unwrap();
    assert!(moved.len() > 100, "{} bytes", moved.len());
    // A cut move: the upper copy is back; the lower copy differs in one byte past the header.
    std::fs::write(a.join(chunk(k)), &moved).unwrap();
    let mut damaged = moved.clone();
    let at = moved.len() - 10;
    damaged[at] ^= 0x40;
    std::fs::write(low.join(chunk(k)), &damaged).unwrap();
    let mut repo = Repo::open_with(&a, options(Some(&low))).unwrap();
    assert_eq!(std::fs::read(a.join(chunk(k))).unwrap(), moved, "the upper copy was removed");
    assert!(repo.fsck().is_clean());
    repo.archive(&commits[15].0).unwrap();
    repo.close().unwrap();
    assert_eq!(std::fs::read(low.join(chunk(k))).unwrap(), moved, "the next move replaces the copy");
    assert!(!a.join(chunk(k)).exists());
    intact(&a, Some(&low), &commits, "store");
    // Both copies equal: the upper one goes.
    std::fs::write(a.join(chunk(k)), &moved).unwrap();
    drop(Repo::open_with(&a, options(Some(&low))).unwrap());
    assert!(!a.join(chunk(k)).exists(), "an upper copy equal to its lower copy is kept");
}

/// A lower directory without a marker that holds only chunk files (archive mode before markers)
/// is adopted; one holding anything else is refused.
#[test]
fn a_lower_directory_without_a_marker_is_adopted_only_if_it_holds_only_chunk_files() {
    let root = tempfile::tempdir().unwrap();
    let (a, low) = (root.path().join("a"), root.path().join("lower"));
    let commits = store(&a, Some(&low), 20, "identity_legacy");
    let mut repo = Repo::open_with(&a, options(Some(&low))).unwrap();
    repo.archive(&commits[15].0).unwrap();
    repo.close().unwrap();
    // As if written before markers existed.
    std::fs::remove_file(low.join("larch-lower")).unwrap();
    std::fs::remove_file(a.join("larch-id")).unwrap();
    intact(&a, Some(&low), &commits, "legacy, reader");
    drop(Repo::open_with(&a, options(Some(&low))).unwrap());
    assert!(low.join("larch-lower").exists() && a.join("larch-id").exists());
    intact(&a, Some(&low), &commits, "adopted");
    let other = root.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("notes.txt"), b"mine").unwrap();
    assert_foreign(Repo::open_with(&a, options(Some(&other))), "a directory of other files");
    assert_eq!(std::fs::read(other.join("notes.txt")).unwrap(), b"mine");
}
