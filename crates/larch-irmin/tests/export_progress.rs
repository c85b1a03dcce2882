//! `write_one_commit_with_progress`: the progress it reports while it writes a one-commit
//! irmin-pack store, against the statistics it returns; a callback that reads the statistics
//! changes nothing of the store written (the CLI's tests compare the output with Irmin's own).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_core::{CommitInfo, Entry, NoSource, Tree, schema};
use larch_irmin::{ExportCommit, ExportStats, write_one_commit, write_one_commit_with_progress};
use std::sync::Arc;

/// A tree of 150,000 values over 300 directories: more than two progress steps of objects.
fn tree() -> Tree {
    let mut tree = Tree::empty();
    for dir in 0..300u32 {
        for key in 0..500u32 {
            tree.add(
                &["d", &format!("{dir:03}"), &format!("k{key:03}")],
                format!("v {dir} {key}").into_bytes(),
            )
            .unwrap();
        }
    }
    tree
}

#[test]
fn progress_is_reported_as_the_export_goes_and_does_not_change_what_it_writes() {
    let tree = tree();
    let Entry::Node(root) = tree.root() else { panic!("the root is a directory") };
    let info = CommitInfo::tezos(1_700_000_000, "progress".to_string());
    let commit =
        ExportCommit { hash: schema::commit_hash(&tree.hash(), &[], &info), parents: Vec::new(), info };
    let dir = tempfile::tempdir().unwrap();
    let (with, without) = (dir.path().join("with"), dir.path().join("without"));
    std::fs::create_dir(&with).unwrap();
    std::fs::create_dir(&without).unwrap();
    let mut seen: Vec<ExportStats> = Vec::new();
    let stats = write_one_commit_with_progress(Arc::new(NoSource), root, &commit, &with, &mut |s| {
        seen.push(s.clone())
    })
    .unwrap();
    let objects = stats.contents + stats.roots + stats.inodes;
    // Every 65,536 objects: the contents are 150,000 distinct values, so at least two reports.
    assert_eq!(seen.len() as u64, objects / (1 << 16), "{stats:?}");
    assert!(seen.len() >= 2);
    for (i, report) in seen.iter().enumerate() {
        assert_eq!(report.contents + report.roots + report.inodes, (i as u64 + 1) << 16, "{report:?}");
        assert!(report.prefix_bytes > 0 && report.prefix_bytes < stats.prefix_bytes, "{report:?}");
        assert!(report.dict_steps <= stats.dict_steps && report.dict_bytes <= stats.dict_bytes, "{report:?}");
    }
    assert!(seen.windows(2).all(|pair| pair[0].prefix_bytes < pair[1].prefix_bytes));
    assert_eq!(write_one_commit(Arc::new(NoSource), root, &commit, &without).unwrap(), stats);
    for file in ["store.1.prefix", "store.dict", "store.control", "index/log"] {
        assert_eq!(
            std::fs::read(with.join(file)).unwrap(),
            std::fs::read(without.join(file)).unwrap(),
            "{file} differs"
        );
    }
}
