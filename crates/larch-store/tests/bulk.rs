//! The bulk writer: one commit written object by object (the way in for imports) gives the same
//! commit as `Repo::commit`, checks the shape of what it is given, and publishes nothing until its
//! commit.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_core::{CommitInfo, Hash, Kind, MemoryRepo, ObjectKey, StoreId, schema};
use larch_store::INLINE_MAX;
use larch_store::{BulkTarget, Repo, StoreError};

fn info() -> CommitInfo {
    CommitInfo::tezos(1530374852, "bulk")
}

#[test]
fn a_bulk_commit_equals_the_same_tree_committed_normally() {
    let long = vec![7u8; INLINE_MAX + 44];
    // The reference: {a: "x", b/c: long, d: long}, committed in memory.
    let mut memory = MemoryRepo::new();
    let mut tree = memory.empty_tree();
    tree.add(&["a"], b"x".to_vec()).unwrap();
    tree.add(&["b", "c"], long.clone()).unwrap();
    tree.add(&["d"], long.clone()).unwrap();
    let expected = memory.commit(&tree, &[], info()).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let mut writer = repo.bulk_writer().unwrap();
    let long_hash = schema::contents_hash(&long);
    let long_key = writer.contents(&long).unwrap();
    let b_hash = schema::flat_node_hash(1, [(&b"c"[..], Kind::Contents, long_hash)].into_iter());
    let b_key = writer.flat(&[(b"c", BulkTarget::Contents { hash: long_hash, key: long_key })]).unwrap();
    let x_hash = schema::contents_hash(b"x");
    let root_hash = schema::flat_node_hash(
        3,
        [(&b"a"[..], Kind::Contents, x_hash), (b"b", Kind::Node, b_hash), (b"d", Kind::Contents, long_hash)]
            .into_iter(),
    );
    let root_key = writer
        .flat(&[
            (b"a", BulkTarget::Inline(b"x")),
            (b"b", BulkTarget::Node { hash: b_hash, key: b_key }),
            (b"d", BulkTarget::Contents { hash: long_hash, key: long_key }),
        ])
        .unwrap();
    assert_eq!(writer.counts().objects(), 3);
    let commit = writer.commit(Some("main"), (root_hash, root_key), &[], info()).unwrap();
    assert_eq!(commit, expected);
    repo.close().unwrap();

    let repo = Repo::open_read_only(dir.path()).unwrap();
    assert_eq!(repo.head(), Some(expected));
    let tree = repo.checkout(&expected).unwrap();
    assert_eq!(tree.find(&["b", "c"]).unwrap().unwrap().as_bytes(), &long[..]);
    let report = repo.fsck();
    assert!(report.is_clean(), "{report}");
}

#[test]
fn bad_objects_are_refused_and_an_abandoned_writer_publishes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    {
        let mut writer = repo.bulk_writer().unwrap();
        let key = writer.contents(&[1; 40]).unwrap();
        let hash = Hash([1; 32]);
        let unsorted = [(&b"b"[..], BulkTarget::Inline(b"1")), (b"a", BulkTarget::Inline(b"2"))];
        assert!(matches!(writer.flat(&unsorted), Err(StoreError::BulkInput(_))));
        let twice = [(&b"a"[..], BulkTarget::Inline(b"1")), (b"a", BulkTarget::Inline(b"2"))];
        assert!(matches!(writer.flat(&twice), Err(StoreError::BulkInput(_))));
        let later = [(
            &b"a"[..],
            BulkTarget::Contents { hash, key: ObjectKey::new(key.store(), key.offset() + 1000) },
        )];
        assert!(matches!(writer.flat(&later), Err(StoreError::BulkInput(_))));
        assert!(matches!(writer.values(&[]), Err(StoreError::BulkInput(_))));
        assert!(matches!(writer.tree(10, 40, &[(0, hash, key)]), Err(StoreError::BulkInput(_))));
        assert!(matches!(
            writer.tree(1, 40, &[(3, hash, key), (3, hash, key)]),
            Err(StoreError::BulkInput(_))
        ));
        // Dropped without a commit.
    }
    assert_eq!(repo.commit_count(), 0);
    assert_eq!(repo.head(), None);
    let mut tree = repo.empty_tree();
    tree.add(&["k"], b"v".to_vec()).unwrap();
    let commit = repo.commit(&tree, &[], info()).unwrap();
    repo.close().unwrap();
    let repo = Repo::open_read_only(dir.path()).unwrap();
    assert_eq!(repo.head(), Some(commit));
    let report = repo.fsck();
    assert!(report.is_clean(), "{report}");
}

#[test]
fn a_bulk_commit_is_visible_to_readers_at_once_and_too_many_parents_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let reader = Repo::open_read_only(dir.path()).unwrap();
    let x_hash = schema::contents_hash(b"x");
    let root_hash = schema::flat_node_hash(1, [(&b"a"[..], Kind::Contents, x_hash)].into_iter());
    // 1,025 parents (absent): refused before anything is published, as `Repo::commit` refuses them.
    let parents: Vec<Hash> = (0..1025u32).map(|i| schema::contents_hash(&i.to_le_bytes())).collect();
    let mut writer = repo.bulk_writer().unwrap();
    let key = writer.flat(&[(b"a", BulkTarget::Inline(b"x"))]).unwrap();
    let error = writer.commit(Some("main"), (root_hash, key), &parents, info()).unwrap_err();
    assert!(matches!(error, StoreError::TooLarge(_)), "{error}");
    assert_eq!(repo.head(), None);
    // 1,024 absent parents are fine; under `--sync commit` the commit is durable and published
    // when `commit` returns: a reader opened before sees it after a reload, without `close`.
    let mut writer = repo.bulk_writer().unwrap();
    let key = writer.flat(&[(b"a", BulkTarget::Inline(b"x"))]).unwrap();
    let commit = writer.commit(Some("main"), (root_hash, key), &parents[..1024], info()).unwrap();
    let mut reader = reader;
    assert!(reader.reload().unwrap());
    assert_eq!(reader.head(), Some(commit));
    assert_eq!(reader.commit_details(&commit).unwrap().absent_parents.len(), 1024);
    repo.close().unwrap();
    let reopened = Repo::open_read_only(dir.path()).unwrap();
    assert_eq!(reopened.head(), Some(commit));
    assert!(reopened.fsck().is_clean());
}

/// Issue 39 item 7: the writer's keys are the store's typed keys, checked. A key of another store
/// is `OtherStoreKey`; one inside a record, or naming a record of the wrong kind (a value where a
/// directory is expected, a directory as an inode child), is `BulkInput`; a key of a record an
/// earlier bulk commit published is accepted (read back through the pack reader), and once a GC
/// collected that record it is `CollectedObject`. Nothing is written for a refused object.
#[test]
fn bulk_keys_are_typed_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    // 1 KiB chunks: the GC below collects the chunk of the first two commits.
    let options = larch_store::RepoOptions { chunk_bytes: 1024, ..larch_store::RepoOptions::default() };
    let mut repo = Repo::open_with(dir.path(), options).unwrap();
    let value = vec![9u8; INLINE_MAX + 10];
    let value_hash = schema::contents_hash(&value);
    let mut writer = repo.bulk_writer().unwrap();
    let value_key = writer.contents(&value).unwrap();
    let dir_hash = schema::flat_node_hash(1, [(&b"v"[..], Kind::Contents, value_hash)].into_iter());
    let dir_key = writer.flat(&[(b"v", BulkTarget::Contents { hash: value_hash, key: value_key })]).unwrap();
    let before = writer.bytes_written();
    let foreign = ObjectKey::new(StoreId::fresh(), value_key.offset());
    type Entries<'a> = Vec<(&'a [u8], BulkTarget<'a>)>;
    let refused: Vec<(&str, Entries<'_>)> = vec![
        ("another store", vec![(b"v", BulkTarget::Contents { hash: value_hash, key: foreign })]),
        (
            "inside a record",
            vec![(
                b"v",
                BulkTarget::Contents {
                    hash: value_hash,
                    key: ObjectKey::new(value_key.store(), value_key.offset() + 1),
                },
            )],
        ),
        ("a value as a directory", vec![(b"d", BulkTarget::Node { hash: value_hash, key: value_key })]),
        ("a directory as a value", vec![(b"v", BulkTarget::Contents { hash: dir_hash, key: dir_key })]),
    ];
    for (what, entries) in &refused {
        let error = writer.flat(entries).unwrap_err();
        match *what {
            "another store" => assert!(matches!(error, StoreError::OtherStoreKey { .. }), "{what}: {error}"),
            _ => assert!(matches!(error, StoreError::BulkInput(_)), "{what}: {error}"),
        }
    }
    let error = writer.tree(1, 40, &[(0, dir_hash, dir_key)]).unwrap_err();
    assert!(matches!(error, StoreError::BulkInput(_)), "a directory as an inode child: {error}");
    let error = writer.commit(Some("main"), (value_hash, value_key), &[], info()).unwrap_err();
    assert!(matches!(error, StoreError::BulkInput(_)), "a value as the commit's tree: {error}");
    // (`commit` consumed the writer: a new one, the same records written again.)
    let mut writer = repo.bulk_writer().unwrap();
    let value_key = writer.contents(&value).unwrap();
    let dir_key = writer.flat(&[(b"v", BulkTarget::Contents { hash: value_hash, key: value_key })]).unwrap();
    assert_eq!(writer.bytes_written(), before);
    let first = writer.commit(Some("main"), (dir_hash, dir_key), &[], info()).unwrap();
    // A second bulk commit refers to the published directory and value of the first.
    let root_hash = schema::flat_node_hash(
        2,
        [(&b"old"[..], Kind::Node, dir_hash), (b"v", Kind::Contents, value_hash)].into_iter(),
    );
    let mut writer = repo.bulk_writer().unwrap();
    let root_key = writer
        .flat(&[
            (b"old", BulkTarget::Node { hash: dir_hash, key: dir_key }),
            (b"v", BulkTarget::Contents { hash: value_hash, key: value_key }),
        ])
        .unwrap();
    let later = CommitInfo::tezos(1530374900, "bulk 2");
    let second = writer.commit(Some("main"), (root_hash, root_key), &[first], later).unwrap();
    assert!(repo.fsck().is_clean(), "{}", repo.fsck());
    // A third commit, on another tree, then a GC keeping only it: the first two's records go.
    let mut tree = repo.empty_tree();
    for i in 0..6u8 {
        tree.add(&["other", &i.to_string()], vec![i; 700]).unwrap();
    }
    let third = repo.commit(&tree, &[second], CommitInfo::tezos(1530374999, "third")).unwrap();
    // Commits roll chunks before they write: the fourth starts chunk 1, on a tree of its own.
    let mut tree = repo.empty_tree();
    tree.add(&["new"], b"n".to_vec()).unwrap();
    let fourth = repo.commit(&tree, &[third], CommitInfo::tezos(1530375000, "fourth")).unwrap();
    let report = repo.gc(&fourth).unwrap();
    assert!(report.region_bytes > 0, "{report:?}");
    let mut writer = repo.bulk_writer().unwrap();
    let error = writer.flat(&[(b"old", BulkTarget::Node { hash: dir_hash, key: dir_key })]).unwrap_err();
    assert!(matches!(error, StoreError::CollectedObject { .. }), "{error}");
    assert_eq!(writer.bytes_written(), 0, "nothing written for refused objects");
}

/// A key of an earlier bulk writer of the same handle, dropped before it published: the space its
/// records took is the next writer's, which writes other records at the same offsets. The key is
/// refused with a typed error, never taken for the record now there; a key of a writer that did
/// publish names a published record and is taken.
#[test]
fn a_key_of_a_dropped_bulk_writer_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let long = vec![3u8; INLINE_MAX + 10];
    let long_hash = schema::contents_hash(&long);
    let dropped_key = {
        let mut writer = repo.bulk_writer().unwrap();
        writer.contents(&long).unwrap()
    };
    let mut writer = repo.bulk_writer().unwrap();
    // The same offset holds a contents record of this writer now.
    let other = vec![4u8; INLINE_MAX + 10];
    let other_key = writer.contents(&other).unwrap();
    assert_eq!(other_key.offset(), dropped_key.offset());
    match writer.flat(&[(b"v", BulkTarget::Contents { hash: long_hash, key: dropped_key })]) {
        Err(StoreError::UnpublishedBulkKey { key }) => assert_eq!(key, dropped_key),
        other => panic!("expected UnpublishedBulkKey, got {other:?}"),
    }
    // The writer's own key is fine; its commit publishes it.
    let other_hash = schema::contents_hash(&other);
    let root_hash = schema::flat_node_hash(1, [(&b"v"[..], Kind::Contents, other_hash)].into_iter());
    let root_key = writer.flat(&[(b"v", BulkTarget::Contents { hash: other_hash, key: other_key })]).unwrap();
    let first = writer.commit(Some("main"), (root_hash, root_key), &[], info()).unwrap();
    // A later writer takes the published writer's keys, and still refuses the dropped one's.
    let mut writer = repo.bulk_writer().unwrap();
    let again = writer.flat(&[(b"w", BulkTarget::Contents { hash: other_hash, key: other_key })]).unwrap();
    assert!(again.offset() > other_key.offset());
    assert!(matches!(
        writer.flat(&[(b"v", BulkTarget::Contents { hash: long_hash, key: dropped_key })]),
        Err(StoreError::UnpublishedBulkKey { .. })
    ));
    drop(writer);
    assert_eq!(repo.head(), Some(first));
    repo.close().unwrap();
    let report = Repo::open_read_only(dir.path()).unwrap().fsck();
    assert!(report.is_clean(), "{report}");
}
