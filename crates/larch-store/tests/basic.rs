//! Round trips, readers, locking, branches, log, incremental writes.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use larch_core::{CommitInfo, Hash, MemoryRepo, Tree};
use larch_store::INLINE_MAX;
use larch_store::{Repo, RepoOptions, StoreError, SyncPolicy};

fn info(n: i64) -> CommitInfo {
    CommitInfo::tezos(1530374852 + 30 * n, format!("lvl {n}"))
}

#[test]
fn genesis_hash_round_trips_through_disk() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let mut tree = repo.empty_tree();
    tree.add(&["data", "version"], b"genesis".to_vec()).unwrap();
    let protocol = hex::decode("38ecdef0cd08640f318a9b055f6b0d0c9ae030913a871d9b9d86fb846317da21").unwrap();
    tree.add(&["protocol"], protocol.clone()).unwrap();
    tree.add(&["test_chain"], vec![0u8]).unwrap();
    let commit = repo.commit(&tree, &[], CommitInfo::tezos(1530374852, "Genesis")).unwrap();
    assert_eq!(commit.to_string(), "CoV8SQumiVU9saiu3FVNeDNewJaJH8yWdsGF3WLdsRr2P9S7MzCj");
    assert_eq!(repo.head(), Some(commit));
    repo.close().unwrap();

    let repo = Repo::open(dir.path()).unwrap();
    assert_eq!(repo.head(), Some(commit));
    let tree = repo.checkout(&commit).unwrap();
    assert_eq!(tree.find(&["protocol"]).unwrap().unwrap().as_bytes(), &protocol[..]);
    assert_eq!(tree.find(&["data", "version"]).unwrap().unwrap().as_bytes(), b"genesis");
    let details = repo.commit_details(&commit).unwrap();
    assert_eq!(details.info, CommitInfo::tezos(1530374852, "Genesis"));
    assert!(details.parents.is_empty());
    let report = repo.fsck();
    assert!(report.is_clean(), "{report}");
}

#[test]
fn second_writer_is_refused_and_readers_reload() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = Repo::open(dir.path()).unwrap();
    assert!(matches!(Repo::open(dir.path()), Err(StoreError::Locked { .. })));
    let mut tree = writer.empty_tree();
    tree.add(&["a"], b"1".to_vec()).unwrap();
    let first = writer.commit(&tree, &[], info(1)).unwrap();

    let mut reader = Repo::open_read_only(dir.path()).unwrap();
    assert!(reader.contains(&first));
    assert!(matches!(reader.commit(&reader.empty_tree(), &[], info(0)), Err(StoreError::ReadOnly)));

    let mut tree = writer.checkout(&first).unwrap();
    tree.add(&["b"], vec![7; 100]).unwrap();
    let second = writer.commit(&tree, &[first], info(2)).unwrap();
    assert!(!reader.contains(&second));
    assert_eq!(reader.head(), Some(first));
    assert!(reader.reload().unwrap());
    assert!(!reader.reload().unwrap());
    assert_eq!(reader.head(), Some(second));
    let seen = reader.checkout(&second).unwrap();
    assert_eq!(seen.find(&["b"]).unwrap().unwrap().as_bytes(), &[7; 100][..]);
    assert_eq!(reader.log(&second).unwrap(), vec![second, first]);
    drop(writer);
    // The lock is released with the handle.
    let writer = Repo::open(dir.path()).unwrap();
    assert_eq!(writer.commit_count(), 2);
}

#[test]
fn a_commit_writes_only_new_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo =
        Repo::open_with(dir.path(), RepoOptions { sync: SyncPolicy::Never, ..Default::default() }).unwrap();
    let mut tree = repo.empty_tree();
    for i in 0..2000u32 {
        tree.add(&["data", "big", &format!("{:08x}", i * 7919)], i.to_le_bytes().to_vec()).unwrap();
        tree.add(&["data", "small", &format!("k{}", i % 50)], vec![1; INLINE_MAX + 8]).unwrap();
    }
    let first = repo.commit(&tree, &[], info(1)).unwrap();
    let written_first = repo.last_write();
    assert!(written_first.tree > 0 && written_first.values > 0, "{written_first:?}");
    // Same tree object, one more change: only the path to it is new.
    tree.add(&["data", "big", "00000000"], b"changed".to_vec()).unwrap();
    let second = repo.commit(&tree, &[first], info(2)).unwrap();
    let written = repo.last_write();
    assert!(written.objects() <= 5, "second commit wrote {written:?}");
    // Through a checkout as well.
    let mut tree = repo.checkout(&second).unwrap();
    tree.add(&["data", "small", "k3"], b"x".to_vec()).unwrap();
    let third = repo.commit(&tree, &[second], info(3)).unwrap();
    assert!(repo.last_write().objects() <= 3, "{:?}", repo.last_write());
    // The nodes just written were put in the cache: the checkout read no node from the pack.
    let stats = repo.stats();
    assert!(stats.cache_hits > 0 && stats.cache_misses == 0, "{stats:?}");
    let tree = repo.checkout(&third).unwrap();
    assert_eq!(tree.length(&["data", "big"]).unwrap(), 2000);
    assert_eq!(tree.find(&["data", "big", "00000000"]).unwrap().unwrap().as_bytes(), b"changed");
    assert_eq!(tree.find(&["data", "small", "k3"]).unwrap().unwrap().as_bytes(), b"x");
    assert_eq!(tree.find(&["data", "small", "k4"]).unwrap().unwrap().as_bytes(), &[1; INLINE_MAX + 8][..]);
    let report = repo.fsck();
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.stats.commits, 3);
    assert!(report.stats.hex_names >= 2000);
    assert_eq!(report.stats.largest_directories.first().map(|d| d.0), Some(2000));
}

#[test]
fn committing_a_tree_of_another_repository_copies_it() {
    let mut memory = MemoryRepo::new();
    let mut tree = memory.empty_tree();
    for i in 0..300 {
        tree.add(&["dir", &format!("n{i}")], vec![i as u8; 1 + i % 70]).unwrap();
    }
    let in_memory = memory.commit(&tree, &[], info(1)).unwrap();
    let lazy = memory.checkout(&in_memory).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let on_disk = repo.commit(&lazy, &[], info(1)).unwrap();
    assert_eq!(on_disk, in_memory);
    drop(repo);
    let repo = Repo::open_read_only(dir.path()).unwrap();
    let tree = repo.checkout(&on_disk).unwrap();
    for i in 0..300 {
        assert_eq!(
            tree.find(&["dir", &format!("n{i}")]).unwrap().unwrap().as_bytes(),
            &vec![i as u8; 1 + i % 70][..]
        );
    }
    assert!(repo.fsck().is_clean());
}

#[test]
fn branches_move_atomically_and_errors_are_typed() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let mut tree = repo.empty_tree();
    tree.add(&["x"], b"1".to_vec()).unwrap();
    let a = repo.commit_on(Some("test"), &tree, &[], info(1)).unwrap();
    assert_eq!(repo.branches(), vec![("test".to_string(), a)]);
    repo.set_branch("main", &a).unwrap();
    assert!(matches!(repo.set_branch("", &a), Err(StoreError::InvalidBranchName(_))));
    assert!(matches!(repo.remove_branch("nope"), Err(StoreError::UnknownBranch(_))));
    repo.remove_branch("test").unwrap();
    let unknown = Hash([9; 32]);
    assert!(matches!(repo.checkout(&unknown), Err(StoreError::UnknownCommit(h)) if h == unknown));
    assert!(matches!(repo.commit(&tree, &[unknown], info(2)), Err(StoreError::UnknownParent(_))));
    assert!(matches!(
        repo.commit(&Tree::of_contents(b"v".to_vec()), &[], info(2)),
        Err(StoreError::RootIsContents)
    ));
    // The same commit twice is stored once.
    let again = repo.commit(&tree, &[], info(1)).unwrap();
    assert_eq!(again, a);
    assert_eq!(repo.commit_count(), 1);
    drop(repo);
    let repo = Repo::open_read_only(dir.path()).unwrap();
    assert_eq!(repo.branches(), vec![("main".to_string(), a)]);
}

#[test]
fn paths_that_are_not_stores() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(Repo::open_read_only(dir.path()), Err(StoreError::NotAStore { .. })));
    let file = dir.path().join("file");
    std::fs::write(&file, b"hello").unwrap();
    assert!(matches!(Repo::open(&file), Err(StoreError::NotAStore { .. })));
    std::fs::write(dir.path().join("control"), b"hello world, not a store").unwrap();
    assert!(matches!(Repo::open_read_only(dir.path()), Err(StoreError::NotAStore { .. })));
    let missing = dir.path().join("missing");
    let options = RepoOptions { create: false, ..Default::default() };
    assert!(matches!(Repo::open_with(&missing, options), Err(StoreError::NotAStore { .. })));
}

#[test]
fn the_cache_stays_within_its_budget() {
    let dir = tempfile::tempdir().unwrap();
    let budget = 256 << 10;
    let options = RepoOptions { sync: SyncPolicy::Never, cache_bytes: budget, ..RepoOptions::default() };
    let mut repo = Repo::open_with(dir.path(), options).unwrap();
    let mut tree = repo.empty_tree();
    for i in 0..5000u32 {
        tree.add(&["d", &format!("{:04}", i % 97), &format!("{i:08x}")], vec![3; 40]).unwrap();
    }
    let commit = repo.commit(&tree, &[], info(1)).unwrap();
    let tree = repo.checkout(&commit).unwrap();
    for i in 0..5000u32 {
        assert!(tree.mem(&["d", &format!("{:04}", i % 97), &format!("{i:08x}")]).unwrap());
    }
    let stats = repo.stats();
    assert!(stats.cache_bytes <= budget, "{stats:?}");
    assert!(stats.cache_misses > 0 && stats.cache_hits > 0, "{stats:?}");
    assert!(stats.bytes_read > 0 && stats.records_read > 0);
    assert_eq!(stats.commit_count, 1);
}

#[test]
fn golden_pack_bytes_of_genesis() {
    // Guards the format: a change of these bytes is a format change (docs/format.md).
    let files = larch_store::testing::storage::StoreFiles::memory();
    let mut repo = Repo::open_files(files.clone(), true, RepoOptions::default(), None).unwrap();
    let mut tree = repo.empty_tree();
    tree.add(&["data", "version"], b"genesis".to_vec()).unwrap();
    tree.add(&["test_chain"], vec![0u8]).unwrap();
    // 260 bytes: above the writer's inline threshold (256), a contents record of its own.
    tree.add(&["00ff"], vec![9u8; 260]).unwrap();
    repo.commit(&tree, &[], CommitInfo::tezos(1530374852, "Genesis")).unwrap();
    // New stores write chunk 0: its 32-byte header (docs/format.md §3), then the records, whose
    // global offsets start at 16 as in a format-2 pack (same bytes after the header).
    let chunk = files.dir.open("chunk.000000", false).unwrap().read_all().unwrap();
    let header = concat!("4c4152434843484b", "03000000", "00000000", "0000000000000000", "1000000000000000");
    assert_eq!(hex::encode(&chunk[..32]), header);
    assert_eq!(hex::encode(&chunk[32..]), GOLDEN_PACK[32..]);
    // The same store seen as one format-2 image: exactly the format-2 golden bytes.
    assert_eq!(hex::encode(files.pack_image().unwrap()), GOLDEN_PACK);
}

/// Header; contents record (260 × 0x09); flat `data` {version: inline "genesis"}; flat root
/// {00ff (hex name): contents pointer, data: node pointer, test_chain: inline 00}; commit.
const GOLDEN_PACK: &str = concat!(
    "4c4152434850414b02000000000000000184020909090909090909090909090909090909090909090909090909090909",
    "090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909",
    "090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909",
    "090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909",
    "090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909",
    "0909090909090909090909090909090909090909090909090909090909090909090909090909097375d3e30212010107",
    "76657273696f6e0767656e657369736d800310025c03060200ff335ebe75b8e9b715ad98019262820179ad3fed99f671",
    "88b6209e1649663d40efa3020004646174611aa20d77e3ca289630287c51eac79df39ab00bbafe72b55d6131013bf57f",
    "b4dc18010a746573745f636861696e010053a10db805385566933568097c53f66db0d7cda4ffd4b5dfb19e668f1d243d",
    "d7d562f4eaeb986200c4aa375b000000000554657a6f730747656e65736973a450c041",
);

#[test]
fn a_reference_outside_the_store_is_refused() {
    use larch_core::{Entry, Name, NodeBody, NodeRef};
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let mut tree = repo.empty_tree();
    tree.add(&["a"], b"1".to_vec()).unwrap();
    let first = repo.commit(&tree, &[], info(1)).unwrap();
    // A root holding a key of this store past the published end (no tree can hold one: it is
    // forged here from the store's identity).
    let Entry::Node(NodeRef::Stored { key: root_key, .. }) = repo.checkout(&first).unwrap().root().clone()
    else {
        panic!("checkout is lazy")
    };
    let stray_key = larch_core::ObjectKey::new(root_key.store(), 1 << 40);
    let stray = Entry::Node(NodeRef::Stored { hash: Hash([1; 32]), key: stray_key });
    let root = larch_core::Node::new(NodeBody::Flat(vec![(Name::from("z"), stray)]));
    let bad = Tree::from_entry(Entry::Node(NodeRef::Mem(std::sync::Arc::new(root))), repo.source());
    let error = repo.commit(&bad, &[first], info(2)).unwrap_err();
    assert!(matches!(error, StoreError::ForeignReference { key, .. } if key == 1 << 40), "{error}");
    assert_eq!(repo.head(), Some(first));
    assert_eq!(repo.commit_count(), 1);
    // A key of another store that the tree's source cannot load: refused too, nothing written.
    let other = larch_core::ObjectKey::new(larch_core::StoreId::fresh(), 100);
    let stray = Entry::Node(NodeRef::Stored { hash: Hash([1; 32]), key: other });
    let root = larch_core::Node::new(NodeBody::Flat(vec![(Name::from("z"), stray)]));
    let bad = Tree::from_entry(Entry::Node(NodeRef::Mem(std::sync::Arc::new(root))), repo.source());
    let error = repo.commit(&bad, &[first], info(3)).unwrap_err();
    assert!(matches!(error, StoreError::Tree(_)), "{error}");
    assert!(error.to_string().contains("another store"), "{error}");
    assert_eq!(repo.head(), Some(first));
    assert_eq!(repo.commit_count(), 1);
    drop(repo);
    assert!(larch_store::fsck(dir.path()).unwrap().is_clean());
}

#[test]
fn handles_and_errors_cross_threads() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<StoreError>();
    assert_send_sync::<Repo>();
    assert_send_sync::<larch_store::FsckReport>();
}

#[test]
fn rewritten_inodes_are_patches_with_bounded_chains() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo =
        Repo::open_with(dir.path(), RepoOptions { sync: SyncPolicy::Never, ..Default::default() }).unwrap();
    let mut tree = repo.empty_tree();
    for i in 0..3000u32 {
        tree.add(&["big", &format!("{:08x}", i.wrapping_mul(2654435761))], vec![7; 8]).unwrap();
    }
    let mut head = repo.commit(&tree, &[], info(0)).unwrap();
    let full = repo.stats().pack_bytes;
    // 40 commits each changing one entry of the same inode path: every rewrite after the first
    // is a patch, and every 9th is a full record again (chains of at most 8 patches).
    for level in 1..=40u32 {
        let mut tree = repo.checkout(&head).unwrap();
        tree.add(&["big", &format!("{:08x}", 0u32)], level.to_le_bytes().to_vec()).unwrap();
        let before = repo.stats().pack_bytes;
        head = repo.commit(&tree, &[head], info(i64::from(level))).unwrap();
        let written = repo.last_write();
        // Levels 1-8 patch the first full version, level 9 writes in full again, and so on.
        assert_eq!(written.patches >= 1, level % 9 != 0, "level {level}: {written:?}");
        assert!(repo.stats().pack_bytes - before < full / 20, "level {level}: a rewrite cost a large share");
    }
    // Read back through a fresh handle (no cache): every version, through its chain of patches.
    drop(repo);
    let reader = Repo::open_read_only_with(dir.path(), 1 << 20).unwrap();
    for (depth, commit) in reader.log(&head).unwrap().iter().enumerate() {
        let tree = reader.checkout(commit).unwrap();
        assert_eq!(tree.length(&["big"]).unwrap(), 3000);
        // "00000000" is one of the 3000 names (i = 0); the first commit holds its original value.
        let expected = if depth < 40 { (40 - depth as u32).to_le_bytes().to_vec() } else { vec![7; 8] };
        let found =
            tree.find(&["big", "00000000"]).unwrap().map(|v| v.as_bytes().to_vec()).unwrap_or_default();
        assert_eq!(found, expected, "commit {depth} back");
    }
    let report = reader.fsck();
    assert!(report.is_clean(), "{report}");
    let patches = report.stats.by_kind.get(&larch_store::RecordKind::PatchTree).map_or(0, |k| k.count);
    assert!(patches >= 30, "{report}");
}

#[test]
fn a_changed_node_is_patched_on_the_version_it_was_copied_from_without_reading_it_again() {
    // A cache of one byte keeps nothing: a base looked up at commit would be read from the pack.
    let dir = tempfile::tempdir().unwrap();
    let options = RepoOptions { sync: SyncPolicy::Never, cache_bytes: 1, ..Default::default() };
    let mut repo = Repo::open_with(dir.path(), options).unwrap();
    let mut tree = repo.empty_tree();
    // Flat directories (inode `Tree`s are not remembered: their bases are looked up).
    for i in 0..20u32 {
        for j in 0..20u32 {
            tree.add(&["a", &format!("b{i}"), &format!("k{j}")], vec![7; 8]).unwrap();
        }
    }
    let mut head = repo.commit(&tree, &[], info(0)).unwrap();
    for level in 1..=3u32 {
        let mut tree = repo.checkout(&head).unwrap();
        // Copying each node on the way for the change reads it (the cache keeps nothing)...
        tree.add(&["a", "b3", "k5"], level.to_le_bytes().to_vec()).unwrap();
        tree.add(&["a", "b7", "k1"], level.to_le_bytes().to_vec()).unwrap();
        let read_before = repo.stats().records_read;
        head = repo.commit(&tree, &[head], info(i64::from(level))).unwrap();
        // ...and the commit writes them as patches on those copies' origins (`a`, `b3`, `b7`; the
        // root has too few entries for a patch): it reads only the parent's commit record (where
        // the root's base is), none of the bases.
        let written = repo.last_write();
        assert!(written.patches >= 3, "level {level}: {written:?}");
        let read = repo.stats().records_read - read_before;
        assert_eq!(read, 1, "level {level}: the commit read {read} records");
    }
    drop(repo);
    let reader = Repo::open_read_only_with(dir.path(), 1 << 20).unwrap();
    let tree = reader.checkout(&head).unwrap();
    assert_eq!(tree.find(&["a", "b3", "k5"]).unwrap().unwrap().as_bytes(), &3u32.to_le_bytes()[..]);
    assert_eq!(tree.find(&["a", "b7", "k1"]).unwrap().unwrap().as_bytes(), &3u32.to_le_bytes()[..]);
    assert_eq!(tree.find(&["a", "b7", "k2"]).unwrap().unwrap().as_bytes(), &[7; 8][..]);
    assert_eq!(tree.length(&["a"]).unwrap(), 20);
    let report = reader.fsck();
    assert!(report.is_clean(), "{report}");
}

/// The in-memory child `name` of the in-memory directory `node` (a flat directory).
fn mem_child(node: &larch_core::Node, name: &str) -> std::sync::Arc<larch_core::Node> {
    let larch_core::NodeBody::Flat(entries) = node.body() else { panic!("not a flat directory") };
    match entries.iter().find(|(probe, _)| probe.as_bytes() == name.as_bytes()) {
        Some((_, larch_core::Entry::Node(larch_core::NodeRef::Mem(child)))) => child.clone(),
        other => panic!("{name}: {other:?}"),
    }
}

#[test]
fn a_directory_changed_back_is_marked_stored_at_the_record_it_was_copied_from() {
    let dir = tempfile::tempdir().unwrap();
    let options = RepoOptions { sync: SyncPolicy::Never, ..Default::default() };
    let mut repo = Repo::open_with(dir.path(), options).unwrap();
    let mut tree = repo.empty_tree();
    for j in 0..6u32 {
        tree.add(&["a", &format!("k{j}")], vec![7; 8]).unwrap();
    }
    tree.add(&["b"], b"1".to_vec()).unwrap();
    let first = repo.commit(&tree, &[], info(0)).unwrap();
    let larch_core::Entry::Node(larch_core::NodeRef::Mem(root)) = tree.root() else { panic!("root") };
    let stored_a = mem_child(root, "a").stored_key().unwrap();
    let mut tree = repo.checkout(&first).unwrap();
    // `a` is copied for a change and changed back; `b` changes.
    tree.add(&["a", "k3"], vec![9; 8]).unwrap();
    tree.add(&["a", "k3"], vec![7; 8]).unwrap();
    tree.add(&["b"], b"2".to_vec()).unwrap();
    let written_before = repo.stats().objects_written;
    let second = repo.commit(&tree, &[first], info(1)).unwrap();
    // `b`'s value is inline: the root alone is written.
    assert_eq!(repo.stats().objects_written - written_before, 1);
    // The copy of `a` now has the key of the record it equals (without the mark it stayed keyless,
    // and a tree carried forward kept it, and the version it was copied from, in memory).
    let larch_core::Entry::Node(larch_core::NodeRef::Mem(root)) = tree.root() else { panic!("root") };
    let a = mem_child(root, "a");
    assert_eq!(a.stored_key(), Some(stored_a));
    assert!(a.origin().is_none());
    assert_eq!(repo.checkout(&second).unwrap().find(&["a", "k3"]).unwrap().unwrap().as_bytes(), &[7; 8][..]);
}
