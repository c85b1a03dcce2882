//! Corrupted copies of the Irmin-written stores: bad control versions, checksums, truncations of
//! every file and seeded random bit flips give typed errors, never panics; whatever still reads
//! back is verified to be exactly what Irmin wrote.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use larch_core::{Hash, MemoryRepo, Tree};
use larch_irmin::{IrminError, IrminStore, build_tree, stream_tree};
use larch_testkit::seed::seeded_rng;
use rand::Rng;
use std::path::{Path, PathBuf};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

fn expected(key: &str) -> Vec<Hash> {
    let text = std::fs::read_to_string(data("tezos-stores/commits.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json[key].as_array().unwrap().iter().map(|v| Hash::from_hex(v.as_str().unwrap()).unwrap()).collect()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
            let mut perms = std::fs::metadata(&target).unwrap().permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perms.set_readonly(false);
            std::fs::set_permissions(&target, perms).unwrap();
        }
    }
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            files(&entry.path(), out);
        } else {
            out.push(entry.path());
        }
    }
    out.sort();
}

/// Opens the store and converts every readable commit (each on the previous one's tree); returns
/// the commits read back. Every object is verified on the way.
fn read_everything(dir: &Path) -> Result<Vec<Hash>, IrminError> {
    let store = IrminStore::open(dir)?;
    let repo = MemoryRepo::new();
    let mut previous: Option<Tree> = None;
    let commits = store.commits()?;
    for hash in &commits {
        let commit = store.find_commit(hash)?;
        let (tree, _) = build_tree(&store, &commit, repo.source().clone(), previous.as_ref(), &mut |_| {})?;
        assert_eq!(tree.hash(), commit.tree_hash);
        previous = Some(tree);
    }
    // The head once more, streamed children first (the import's way for a commit without parent).
    let head = store.head()?;
    let (root, _, _) = stream_tree(&store, &head, &mut common::HashingSink::default(), &mut |_| {})?;
    assert_eq!(root, head.tree_hash);
    Ok(commits)
}

/// What a run on a damaged copy may return: an error, or commits Irmin wrote, verified.
fn check_outcome(outcome: Result<Vec<Hash>, IrminError>, all: &[Hash], context: &str) -> bool {
    match outcome {
        Ok(commits) => {
            for hash in &commits {
                assert!(all.contains(hash), "{context}: read back a commit Irmin never wrote: {hash}");
            }
            false
        }
        Err(error) => {
            // Typed and printable, naming a file or an offset.
            let text = error.to_string();
            assert!(!text.is_empty(), "{context}");
            true
        }
    }
}

#[test]
fn pristine_copies_read_back_completely() {
    for (name, key) in [("plain", "plain"), ("gced", "gced"), ("lower", "plain")] {
        assert_eq!(read_everything(&data(&format!("tezos-stores/{name}"))).unwrap(), expected(key), "{name}");
    }
    // The one-commit stores of Irmin's `create_one_commit_store` (an Octez snapshot's context).
    let plain = expected("plain");
    for (name, index) in [("plain-head", plain.len() - 1), ("plain-lvl17", 17)] {
        assert_eq!(
            read_everything(&data(&format!("one-commit/{name}"))).unwrap(),
            vec![plain[index]],
            "{name}"
        );
    }
}

#[test]
fn bad_control_versions_are_typed_errors() {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&data("tezos-stores/plain"), tmp.path());
    let control = tmp.path().join("store.control");
    let original = std::fs::read(&control).unwrap();
    for version in [&b"00000002"[..], b"00000006", b"0000000x", b"\0\0\0\0\0\0\0\0"] {
        let mut bytes = original.clone();
        bytes[..8].copy_from_slice(version);
        std::fs::write(&control, &bytes).unwrap();
        match IrminStore::open(tmp.path()) {
            Err(IrminError::UnsupportedVersion { file, .. }) => assert_eq!(file, control),
            other => panic!("version {version:?}: {other:?}"),
        }
    }
    // A payload byte changed: the Adler-32 checksum catches it.
    let mut bytes = original.clone();
    bytes[12] ^= 0x01;
    std::fs::write(&control, &bytes).unwrap();
    assert!(matches!(IrminStore::open(tmp.path()), Err(IrminError::Checksum { .. })));
    // Larger than Irmin allows.
    let mut bytes = original.clone();
    bytes.resize(5000, 0);
    std::fs::write(&control, &bytes).unwrap();
    assert!(matches!(IrminStore::open(tmp.path()), Err(IrminError::Corrupt { offset: 0, .. })));
}

#[test]
fn a_flipped_contents_byte_is_a_hash_mismatch_naming_file_and_offset() {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&data("tezos-stores/plain"), tmp.path());
    let (offset, len) = {
        let store = IrminStore::open(tmp.path()).unwrap();
        let head = store.head().unwrap();
        let root = store.load_node(head.tree_offset, &head.tree_hash).unwrap();
        let larch_core::NodeBody::Flat(entries) = root.body() else { panic!("root is flat") };
        let (key, hash) = entries
            .iter()
            .find_map(|(_, entry)| match entry {
                larch_core::Entry::Contents(larch_core::ContentsRef::Stored { key, hash }) => {
                    Some((store.offset_of(*key).unwrap(), *hash))
                }
                _ => None,
            })
            .expect("a value at the root");
        (key, store.load_contents(key, &hash).unwrap().len() as u64)
    };
    assert!(len > 0 && len < 128);
    let suffix = tmp.path().join("store.0.suffix");
    let mut bytes = std::fs::read(&suffix).unwrap();
    // hash (32) + kind (1) + one-byte length + value: flip the value's last byte.
    bytes[(offset + 33 + len) as usize] ^= 0x40;
    std::fs::write(&suffix, &bytes).unwrap();
    let store = IrminStore::open(tmp.path()).unwrap();
    let head = store.head().unwrap();
    match build_tree(&store, &head, MemoryRepo::new().source().clone(), None, &mut |_| {}) {
        Err(IrminError::HashMismatch { what: "contents", file, offset: at, .. }) => {
            assert_eq!(file, suffix);
            assert_eq!(at, offset);
        }
        other => panic!("{:?}", other.map(|(tree, _)| tree.hash())),
    }
}

#[test]
fn truncating_any_file_gives_a_typed_error() {
    for (name, key) in [
        ("tezos-stores/plain", "plain"),
        ("tezos-stores/gced", "gced"),
        ("tezos-stores/lower", "plain"),
        ("one-commit/plain-head", "plain"),
        ("one-commit/plain-lvl17", "plain"),
    ] {
        let all = expected(key);
        let tmp = tempfile::tempdir().unwrap();
        copy_dir(&data(name), tmp.path());
        let mut list = Vec::new();
        files(tmp.path(), &mut list);
        for file in list {
            let original = std::fs::read(&file).unwrap();
            let unused = file.ends_with("store.branches") || original.is_empty();
            for cut in [0, original.len() / 2, original.len().saturating_sub(1)] {
                if cut == original.len() {
                    continue;
                }
                std::fs::write(&file, &original[..cut]).unwrap();
                let context = format!("{name}: {} cut at {cut}", file.display());
                let failed = check_outcome(read_everything(tmp.path()), &all, &context);
                assert!(failed || unused, "{context}: no error");
            }
            std::fs::write(&file, &original).unwrap();
        }
    }
}

#[test]
fn seeded_bit_flips_never_panic_and_never_yield_wrong_commits() {
    let (mut rng, seed) = seeded_rng("seeded_bit_flips", 0x1e7e_1a2c);
    let stores = [
        ("tezos-stores/plain", "plain"),
        ("tezos-stores/gced", "gced"),
        ("tezos-stores/lower", "plain"),
        ("one-commit/plain-head", "plain"),
        ("one-commit/plain-lvl17", "plain"),
    ];
    let tmp = tempfile::tempdir().unwrap();
    let mut lists = Vec::new();
    for (name, _) in stores {
        let dir = tmp.path().join(name);
        copy_dir(&data(name), &dir);
        let mut list = Vec::new();
        files(&dir, &mut list);
        lists.push((dir, list));
    }
    let (mut errors, mut survived) = (0, 0);
    for round in 0..300 {
        let which = rng.random_range(0..stores.len());
        let (dir, list) = &lists[which];
        let all = expected(stores[which].1);
        let file = &list[rng.random_range(0..list.len())];
        let original = std::fs::read(file).unwrap();
        if original.is_empty() {
            continue;
        }
        let mut bytes = original.clone();
        // Half the flips hit the first 64 bytes (headers), where most structure lives.
        let at = if rng.random_bool(0.5) {
            rng.random_range(0..bytes.len().min(64))
        } else {
            rng.random_range(0..bytes.len())
        };
        bytes[at] ^= 1 << rng.random_range(0..8);
        std::fs::write(file, &bytes).unwrap();
        let context = format!("seed {seed} round {round}: {} byte {at}", file.display());
        if check_outcome(read_everything(dir), &all, &context) {
            errors += 1;
        } else {
            survived += 1;
        }
        std::fs::write(file, &original).unwrap();
    }
    eprintln!("seed {seed}: {errors} flips detected, {survived} harmless (unused bytes)");
    assert!(errors > survived, "most flips land in checked bytes");
}
