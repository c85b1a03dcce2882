//! The Tezos-schema stores written by Irmin 3.7.2 (`tests/data/tezos-stores`): every commit Irmin
//! recorded is found, decoded and verified, and its tree rebuilt with the same hashes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use larch_core::{Hash, MemoryRepo};
use larch_irmin::{IrminError, IrminStore, Status, build_tree, stream_tree};
use std::path::PathBuf;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

fn expected(key: &str) -> Vec<Hash> {
    let text = std::fs::read_to_string(data("tezos-stores/commits.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json[key].as_array().unwrap().iter().map(|v| Hash::from_hex(v.as_str().unwrap()).unwrap()).collect()
}

const HEAD: &str = "CoWSMPUwKZad7rCCDGzPS7yaXC9Sso73HZufsX9zdDhXWxZ5EeNy";

#[test]
fn plain_store_lists_and_verifies_all_42_commits() {
    let store = IrminStore::open(data("tezos-stores/plain")).unwrap();
    assert_eq!(store.control().version, 5);
    assert_eq!(store.control().status, Status::NoGcYet);
    let want = expected("plain");
    assert_eq!(want.len(), 42);
    assert_eq!(store.commits().unwrap(), want);
    assert_eq!(store.head().unwrap().hash.to_base58(), HEAD);
    for hash in &want {
        let commit = store.find_commit(hash).unwrap();
        assert_eq!(commit.hash, *hash);
    }
}

#[test]
fn plain_store_trees_rebuild_with_irmin_hashes() {
    let store = IrminStore::open(data("tezos-stores/plain")).unwrap();
    let mut repo = MemoryRepo::new();
    let mut previous: Option<larch_core::Tree> = None;
    let mut reused = 0;
    for hash in expected("plain") {
        let commit = store.find_commit(&hash).unwrap();
        let (tree, stats) =
            build_tree(&store, &commit, repo.source().clone(), previous.as_ref(), &mut |_| {}).unwrap();
        reused += stats.reused;
        assert_eq!(tree.hash(), commit.tree_hash);
        let made = repo.commit(&tree, &commit.parents, commit.info.clone()).unwrap();
        assert_eq!(made, hash);
        previous = Some(repo.checkout(&made).unwrap());
    }
    assert!(reused > 0, "later commits reuse unchanged subtrees of their parents");
    assert_eq!(repo.commit_count(), 42);
}

/// Every value of the head tree, read lazily through the Irmin source (each load verified).
fn leaves(tree: &larch_core::Tree, path: &mut Vec<Vec<u8>>, out: &mut Vec<(Vec<Vec<u8>>, Vec<u8>)>) {
    for (name, sub) in tree.list(path, 0, None).unwrap() {
        path.push(name.as_bytes().to_vec());
        match sub.kind() {
            larch_core::Kind::Contents => {
                out.push((path.clone(), tree.find(path).unwrap().unwrap().to_vec()))
            }
            larch_core::Kind::Node => leaves(tree, path, out),
        }
        path.pop();
    }
}

#[test]
fn lazy_checkout_reads_the_same_values_as_the_rebuilt_tree() {
    let store = IrminStore::open(data("tezos-stores/plain")).unwrap();
    let head = store.head().unwrap();
    let lazy = store.checkout(&head);
    assert_eq!(lazy.hash(), head.tree_hash);
    let (built, stats) =
        build_tree(&store, &head, larch_core::MemoryRepo::new().source().clone(), None, &mut |_| {}).unwrap();
    assert!(stats.nodes > 0 && stats.contents > 0);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    leaves(&lazy, &mut Vec::new(), &mut a);
    leaves(&built, &mut Vec::new(), &mut b);
    assert!(a.len() > 100, "{} leaves", a.len());
    // The lazy checkout lists its large directories in Irmin's bucket order, the rebuilt tree
    // (in memory, never committed) by name: the same leaves, visited in other orders.
    a.sort();
    b.sort();
    assert_eq!(a, b);
}

#[test]
fn gced_store_reads_commits_from_the_gc_point_on() {
    let store = IrminStore::open(data("tezos-stores/gced")).unwrap();
    assert!(matches!(store.control().status, Status::Gced { generation: 2, .. }));
    let want = expected("gced");
    assert_eq!(want.len(), 25);
    assert_eq!(store.commits().unwrap(), want);
    assert_eq!(store.head().unwrap().hash.to_base58(), HEAD);
    let repo = MemoryRepo::new();
    for hash in &want {
        let commit = store.find_commit(hash).unwrap();
        let (tree, _) = build_tree(&store, &commit, repo.source().clone(), None, &mut |_| {}).unwrap();
        assert_eq!(tree.hash(), commit.tree_hash);
        // The larch hash of the rebuilt commit is Irmin's (parents need not be present in memory).
        assert_eq!(larch_core::schema::commit_hash(&tree.hash(), &commit.parents, &commit.info), *hash);
    }
    // The GC commit's parent survives only as a dangling record; older ones are collected.
    let dangling = expected("gced_dangling");
    assert!(want[0] != dangling[0]);
    assert_eq!(store.find_commit(&want[0]).unwrap().parents, dangling);
    assert!(matches!(store.find_commit(&dangling[0]), Err(IrminError::CommitCollected { .. })));
    for hash in expected("plain").iter().filter(|h| !want.contains(h)) {
        match store.find_commit(hash) {
            Err(IrminError::CommitCollected { hash: h, .. }) => assert_eq!(h, *hash),
            other => panic!("collected commit {hash}: {other:?}"),
        }
    }
    let unknown = Hash::of_bytes(b"not a commit");
    assert!(matches!(store.find_commit(&unknown), Err(IrminError::UnknownCommit(h)) if h == unknown));
}

#[test]
fn lower_layer_serves_the_commits_gc_removed_from_the_upper_layer() {
    let store = IrminStore::open(data("tezos-stores/lower")).unwrap();
    assert_eq!(store.control().volume_num, 1);
    let all = expected("plain");
    assert_eq!(store.commits().unwrap(), all);
    let mut repo = MemoryRepo::new();
    let mut previous: Option<larch_core::Tree> = None;
    for hash in &all {
        let commit = store.find_commit(hash).unwrap();
        let (tree, _) =
            build_tree(&store, &commit, repo.source().clone(), previous.as_ref(), &mut |_| {}).unwrap();
        let made = repo.commit(&tree, &commit.parents, commit.info.clone()).unwrap();
        assert_eq!(made, *hash);
        previous = Some(repo.checkout(&made).unwrap());
    }
}

/// The commit index moved from `index/log` into a sorted `index/data` file (as a mirage/index
/// merge writes it: entries sorted by the 30-bit key hash, after a fan-out table): every commit
/// is still found. (No Irmin-written `data` file was available; this checks the search.)
#[test]
fn commits_are_found_in_a_merged_index_data_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    for name in ["store.control", "store.dict", "store.0.suffix", "store.branches"] {
        std::fs::copy(data("tezos-stores/plain").join(name), dir.join(name)).unwrap();
    }
    std::fs::create_dir(dir.join("index")).unwrap();
    let log = std::fs::read(data("tezos-stores/plain/index/log")).unwrap();
    let (header, entries) = log.split_at(32);
    let mut sorted: Vec<&[u8]> = entries.chunks_exact(45).collect();
    sorted.sort_by_key(|entry| larch_core::ocaml_hash::ocaml_seeded_hash(0, &entry[..32]));
    let fan: Vec<u8> = [0u64, (sorted.len() as u64 / 2) * 45].iter().flat_map(|o| o.to_be_bytes()).collect();
    let mut data_file = Vec::new();
    data_file.extend_from_slice(&((sorted.len() * 45) as u64).to_be_bytes());
    data_file.extend_from_slice(b"00000001");
    data_file.extend_from_slice(&1u64.to_be_bytes());
    data_file.extend_from_slice(&(fan.len() as u64).to_be_bytes());
    data_file.extend_from_slice(&fan);
    for entry in &sorted {
        data_file.extend_from_slice(entry);
    }
    std::fs::write(dir.join("index/data"), &data_file).unwrap();
    // An empty log: valid end offset 0.
    let mut empty_log = header.to_vec();
    empty_log[..8].copy_from_slice(&0u64.to_be_bytes());
    std::fs::write(dir.join("index/log"), &empty_log).unwrap();
    let store = IrminStore::open(dir).unwrap();
    let want = expected("plain");
    assert_eq!(store.commits().unwrap(), want);
    for hash in &want {
        assert_eq!(store.find_commit(hash).unwrap().hash, *hash);
    }
    assert!(matches!(store.find_commit(&Hash::of_bytes(b"x")), Err(IrminError::UnknownCommit(_))));
}

fn adler32(bytes: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for byte in bytes {
        a = (a + u32::from(*byte)) % 65521;
        b = (b + a) % 65521;
    }
    (b << 16) | a
}

fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &to.join(entry.file_name()));
        } else {
            std::fs::write(to.join(entry.file_name()), std::fs::read(entry.path()).unwrap()).unwrap();
        }
    }
}

/// A second, still empty volume (added by Irmin's `add_volume`, nothing archived yet: no
/// `volume.control`) is accepted; a volume the control file counts but that is missing is an error.
#[test]
fn an_empty_appendable_volume_is_accepted_and_a_missing_one_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(&data("tezos-stores/lower"), tmp.path());
    let control_path = tmp.path().join("store.control");
    let mut control = std::fs::read(&control_path).unwrap();
    // V5 payload: dict end, appendable poff, upgraded_from (1 byte), checksum (8), chunk start,
    // chunk count, volume count.
    assert_eq!(control[35], 1, "volume_num of the fixture");
    control[35] = 2;
    control[25..33].fill(0);
    let checksum = adler32(&control[8..]);
    control[25..33].copy_from_slice(&u64::from(checksum).to_be_bytes());
    std::fs::write(&control_path, &control).unwrap();
    match IrminStore::open(tmp.path()) {
        Err(IrminError::Corrupt { file, .. }) => assert!(file.ends_with("lower/volume.1"), "{file:?}"),
        other => panic!("{other:?}"),
    }
    let volume = tmp.path().join("lower/volume.1");
    std::fs::create_dir(&volume).unwrap();
    std::fs::write(volume.join("volume.data"), b"").unwrap();
    std::fs::write(volume.join("volume.mapping"), b"").unwrap();
    let store = IrminStore::open(tmp.path()).unwrap();
    assert_eq!(store.control().volume_num, 2);
    assert_eq!(store.commits().unwrap(), expected("plain"));
}

fn write_control(path: &std::path::Path, mut bytes: Vec<u8>, checksum_at: Option<usize>) {
    if let Some(at) = checksum_at {
        bytes[at..at + 8].fill(0);
        let checksum = adler32(&bytes[8..]);
        bytes[at..at + 8].copy_from_slice(&u64::from(checksum).to_be_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

/// Irmin's bytes under the older control-file versions and a chunked suffix: the plain store's
/// control file rewritten as version 3 and 4, and its suffix split into three chunks at entry
/// boundaries (as Irmin's `split` leaves them), read back identically.
#[test]
fn control_versions_3_and_4_and_a_chunked_suffix_read_the_same_store() {
    let plain = data("tezos-stores/plain");
    let original = IrminStore::open(&plain).unwrap();
    let (dict_end, suffix_end) = (original.control().dict_end_poff, original.control().appendable_chunk_poff);
    let want = expected("plain");
    let tmp = tempfile::tempdir().unwrap();

    let v3 = tmp.path().join("v3");
    copy_tree(&plain, &v3);
    let mut bytes = b"00000003".to_vec();
    bytes.extend_from_slice(&dict_end.to_be_bytes());
    bytes.extend_from_slice(&suffix_end.to_be_bytes());
    bytes.push(1); // From_v3_no_gc_yet
    write_control(&v3.join("store.control"), bytes, None);
    let store = IrminStore::open(&v3).unwrap();
    assert_eq!(store.control().version, 3);
    assert_eq!(store.commits().unwrap(), want);

    let v4 = tmp.path().join("v4");
    copy_tree(&plain, &v4);
    let mut bytes = b"00000004".to_vec();
    bytes.extend_from_slice(&dict_end.to_be_bytes());
    bytes.extend_from_slice(&suffix_end.to_be_bytes());
    bytes.push(0); // upgraded_from_v3_to_v4: false
    bytes.extend_from_slice(&[0; 8]);
    bytes.extend_from_slice(&[0, 1, 1]); // chunk_start_idx 0, chunk_num 1, No_gc_yet
    write_control(&v4.join("store.control"), bytes.clone(), Some(25));
    let store = IrminStore::open(&v4).unwrap();
    assert_eq!(store.control().version, 4);
    assert_eq!(store.commits().unwrap(), want);
    // The V4 checksum is checked too.
    let mut damaged = bytes;
    damaged[30] ^= 1;
    std::fs::write(v4.join("store.control"), damaged).unwrap();
    assert!(matches!(IrminStore::open(&v4), Err(IrminError::Checksum { .. })));

    // Three chunks, cut after the 10th and the 25th commit entries.
    let chunked = tmp.path().join("chunked");
    copy_tree(&plain, &chunked);
    let suffix = std::fs::read(plain.join("store.0.suffix")).unwrap();
    let commits = original.indexed_commits().unwrap();
    let cut = |i: usize| (commits[i].offset + u64::from(commits[i].length)) as usize;
    let (a, b) = (cut(9), cut(24));
    std::fs::write(chunked.join("store.0.suffix"), &suffix[..a]).unwrap();
    std::fs::write(chunked.join("store.1.suffix"), &suffix[a..b]).unwrap();
    // The last chunk has bytes past its valid end (an append not yet published).
    let mut last = suffix[b..suffix_end as usize].to_vec();
    last.extend_from_slice(&[0xAB; 100]);
    std::fs::write(chunked.join("store.2.suffix"), &last).unwrap();
    let mut bytes = b"00000005".to_vec();
    bytes.extend_from_slice(&dict_end.to_be_bytes());
    bytes.extend_from_slice(&(suffix_end - b as u64).to_be_bytes());
    bytes.push(0); // upgraded_from: None
    bytes.extend_from_slice(&[0; 8]);
    bytes.extend_from_slice(&[0, 3, 0, 1]); // chunk_start_idx 0, 3 chunks, no volume, No_gc_yet
    write_control(&chunked.join("store.control"), bytes, Some(25));
    let store = IrminStore::open(&chunked).unwrap();
    assert_eq!(store.control().chunk_num, 3);
    assert_eq!(store.commits().unwrap(), want);
    let mut repo = MemoryRepo::new();
    let mut previous: Option<larch_core::Tree> = None;
    for hash in &want {
        let commit = store.find_commit(hash).unwrap();
        let (tree, _) =
            build_tree(&store, &commit, repo.source().clone(), previous.as_ref(), &mut |_| {}).unwrap();
        assert_eq!(repo.commit(&tree, &commit.parents, commit.info.clone()).unwrap(), *hash);
        previous = Some(repo.checkout(hash).unwrap());
    }
}

/// A GCed layout with dead bytes, built from the plain store's bytes: the first part of the pack
/// in `store.1.prefix` (one mapping range), the rest in a suffix chunk that starts 100 bytes
/// before the suffix start offset (dead bytes, unreadable). Every commit reads back.
#[test]
fn gced_layout_with_suffix_dead_bytes() {
    let plain = data("tezos-stores/plain");
    let original = IrminStore::open(&plain).unwrap();
    let (dict_end, suffix_end) = (original.control().dict_end_poff, original.control().appendable_chunk_poff);
    let commits = original.indexed_commits().unwrap();
    let start = commits[9].offset + u64::from(commits[9].length);
    let dead = 100u64;
    let suffix = std::fs::read(plain.join("store.0.suffix")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    copy_tree(&plain, dir);
    std::fs::remove_file(dir.join("store.0.suffix")).unwrap();
    std::fs::write(dir.join("store.1.prefix"), &suffix[..start as usize]).unwrap();
    let mapping: Vec<u8> = [0u64, 0, start].iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(dir.join("store.1.mapping"), &mapping).unwrap();
    std::fs::write(dir.join("store.1.suffix"), &suffix[(start - dead) as usize..suffix_end as usize])
        .unwrap();
    let mut bytes = b"00000005".to_vec();
    bytes.extend_from_slice(&dict_end.to_be_bytes());
    bytes.extend_from_slice(&(suffix_end - start + dead).to_be_bytes());
    bytes.push(0);
    bytes.extend_from_slice(&[0; 8]);
    bytes.extend_from_slice(&[1, 1, 0, 3]); // chunk_start_idx 1, 1 chunk, no volume, Gced:
    bytes.extend_from_slice(&start.to_be_bytes()); // suffix_start_offset
    bytes.push(1); // generation
    bytes.extend_from_slice(&commits[9].offset.to_be_bytes()); // latest_gc_target_offset
    bytes.extend_from_slice(&dead.to_be_bytes()); // suffix_dead_bytes
    bytes.push(0xff); // mapping_end_poff: Some
    bytes.extend_from_slice(&(mapping.len() as u64).to_be_bytes());
    write_control(&dir.join("store.control"), bytes, Some(25));
    let store = IrminStore::open(dir).unwrap();
    assert_eq!(store.control().suffix_start(), (start, dead));
    let want = expected("plain");
    assert_eq!(store.commits().unwrap(), want);
    for hash in [want[0], want[10], want[41]] {
        let commit = store.find_commit(&hash).unwrap();
        let (tree, _) =
            build_tree(&store, &commit, MemoryRepo::new().source().clone(), None, &mut |_| {}).unwrap();
        assert_eq!(tree.hash(), commit.tree_hash);
    }
}

/// Every readable commit of the three stores streamed children first into a sink that recomputes
/// every hash from what it receives: each root hashes to the commit's tree hash.
#[test]
fn streamed_trees_arrive_children_first_with_irmin_hashes() {
    for (name, key) in [("plain", "plain"), ("gced", "gced"), ("lower", "plain")] {
        let store = IrminStore::open(data(&format!("tezos-stores/{name}"))).unwrap();
        let mut trees = 0;
        for hash in expected(key) {
            let commit = store.find_commit(&hash).unwrap();
            let mut sink = common::HashingSink::default();
            let (root, root_key, stats) = stream_tree(&store, &commit, &mut sink, &mut |_| {}).unwrap();
            assert_eq!(root, commit.tree_hash, "{name} {hash}");
            assert_eq!(sink.hashes[root_key.offset() as usize], commit.tree_hash);
            assert_eq!(root_key.offset() as usize, sink.hashes.len() - 1, "the root comes last");
            assert!(stats.nodes as usize == sink.flat + sink.values + sink.trees);
            trees += sink.trees;
        }
        assert!(trees > 0, "{name}: directories above 256 entries are inode trees");
    }
}
