//! Format stability: a small store written by format version 2 (`tests/data/format-v2`, made by the
//! example `write_format_fixture`) opens, reads back exactly what built it, and passes fsck; a
//! writer continues it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use larch_core::{CommitInfo, Hash, schema};
use larch_store::{RecordKind, Repo};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/format-v2")
}

/// The values of each commit, as the example wrote them.
fn expected(level: u32) -> BTreeMap<Vec<String>, Vec<u8>> {
    let mut values = BTreeMap::new();
    let path = |steps: &[&str]| steps.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    values.insert(path(&["data", "version"]), b"genesis".to_vec());
    if level < 2 {
        values.insert(path(&["00ff"]), vec![9u8; 33]);
    }
    if level >= 1 {
        for i in 0..300u32 {
            values.insert(
                path(&["big", &format!("{:08x}", i.wrapping_mul(2654435761))]),
                i.to_le_bytes().to_vec(),
            );
        }
    }
    if level >= 2 {
        values.insert(path(&["big", "00000000"]), b"changed".to_vec());
        values.insert(path(&["contracts", "index", "deadbeef", "balance"]), vec![7u8; 100]);
    }
    values
}

fn contents(repo: &Repo, commit: &Hash) -> BTreeMap<Vec<String>, Vec<u8>> {
    let tree = repo.checkout(commit).unwrap();
    let mut out = BTreeMap::new();
    let mut stack = vec![(Vec::<String>::new(), tree)];
    while let Some((path, tree)) = stack.pop() {
        let empty: [&str; 0] = [];
        for (name, child) in tree.list(&empty, 0, None).unwrap() {
            let mut child_path = path.clone();
            child_path.push(String::from_utf8(name.as_bytes().to_vec()).unwrap());
            match child.find(&empty).unwrap() {
                Some(value) => {
                    out.insert(child_path, value.as_bytes().to_vec());
                }
                None => stack.push((child_path, child)),
            }
        }
    }
    out
}

#[test]
fn the_format_2_fixture_opens_reads_back_and_is_clean() {
    let repo = Repo::open_read_only(fixture()).unwrap();
    let head = repo.head().unwrap();
    let log = repo.log(&head).unwrap();
    assert_eq!(log.len(), 3);
    let infos = [(1530374852, "Genesis"), (1530374882, "lvl 1"), (1530374912, "lvl 2")];
    for (level, commit) in log.iter().rev().enumerate() {
        assert_eq!(contents(&repo, commit), expected(level as u32), "commit {level}");
        // The stored hash is the one the tree and the commit info give (recomputed, not stored).
        let details = repo.commit_details(commit).unwrap();
        let (date, message) = infos[level];
        assert_eq!(details.info, CommitInfo::tezos(date, message));
        assert_eq!(repo.checkout(commit).unwrap().hash(), details.tree_hash);
        assert_eq!(schema::commit_hash(&details.tree_hash, &details.parents, &details.info), *commit);
    }
    assert_eq!(repo.branch("side"), Some(log[1]));
    let report = repo.fsck();
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.stats.commits, 3);
    assert!(report.stats.by_kind.get(&RecordKind::PatchTree).is_some_and(|kind| kind.count >= 1), "{report}");
}

#[test]
fn a_writer_continues_a_copy_of_the_fixture() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["control", "pack", "commits"] {
        std::fs::copy(fixture().join(name), dir.path().join(name)).unwrap();
    }
    let pack_before = std::fs::read(dir.path().join("pack")).unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let head = repo.head().unwrap();
    let mut tree = repo.checkout(&head).unwrap();
    tree.add(&["data", "version"], b"next".to_vec()).unwrap();
    let next = repo.commit(&tree, &[head], CommitInfo::tezos(1530374942, "lvl 3")).unwrap();
    repo.close().unwrap();
    // Format 3: the format-2 `pack` is chunk 0 and never written again; the new commit went to
    // chunk 1, which starts where the pack's published records end; the control slots are now
    // layout 3 (version 3 at bytes 8..12 of the newest).
    assert_eq!(std::fs::read(dir.path().join("pack")).unwrap(), pack_before);
    let chunk = std::fs::read(dir.path().join("chunk.000001")).unwrap();
    assert_eq!(&chunk[..12], b"LARCHCHK\x03\0\0\0");
    assert_eq!(u64::from_le_bytes(chunk[16..24].try_into().unwrap()), 1);
    let chunk_start = u64::from_le_bytes(chunk[24..32].try_into().unwrap());
    assert!(chunk_start >= 16 && chunk_start <= pack_before.len() as u64, "{chunk_start}");
    let control = std::fs::read(dir.path().join("control")).unwrap();
    let decoded = larch_store_control_version(&control);
    assert!(decoded.contains(&3), "{decoded:?}");
    let repo = Repo::open_read_only(dir.path()).unwrap();
    assert_eq!(repo.head(), Some(next));
    assert_eq!(
        repo.chunk_files().iter().map(|(name, ..)| name.as_str()).collect::<Vec<_>>(),
        ["pack", "chunk.000001"]
    );
    let mut values = expected(2);
    values.insert(vec!["data".into(), "version".into()], b"next".to_vec());
    assert_eq!(contents(&repo, &next), values);
    assert!(repo.fsck().is_clean());
}

/// The versions of the two control slots (bytes 8..12 of each 4 KiB page).
fn larch_store_control_version(control: &[u8]) -> Vec<u32> {
    [0usize, 4096].iter().map(|at| u32::from_le_bytes(control[at + 8..at + 12].try_into().unwrap())).collect()
}
