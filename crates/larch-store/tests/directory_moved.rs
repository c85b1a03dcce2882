//! The store directory renamed under a running writer, and another directory put at its old path
//! (issue 39 item 6): the writer acts on the directory it locked, through its descriptor. Its rolls
//! create their chunks there, its GC's segment and unlinks (on its own thread and on the background
//! unlink thread) land there, and its publishes go on; nothing is created in or removed from the
//! directory now at the old path, even files named like the store's.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_core::{CommitInfo, Hash};
use larch_store::{GcPolicy, Repo, RepoOptions};
use std::collections::BTreeMap;
use std::path::Path;

fn value(i: u64) -> Vec<u8> {
    format!("value {i:05}; ").repeat(30).into_bytes()
}

/// Every file of `dir` with its bytes.
fn contents(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            (entry.file_name().to_string_lossy().into_owned(), std::fs::read(entry.path()).unwrap())
        })
        .collect()
}

fn names(dir: &Path, prefix: &str) -> Vec<String> {
    contents(dir).into_keys().filter(|name| name.starts_with(prefix)).collect()
}

fn commit(repo: &mut Repo, hashes: &mut Vec<Hash>, i: u64) {
    let mut tree = match hashes.last() {
        Some(head) => repo.checkout(head).unwrap(),
        None => repo.empty_tree(),
    };
    tree.add(&["k", &format!("{i:05}")], value(i)).unwrap();
    let parents: Vec<Hash> = hashes.last().copied().into_iter().collect();
    hashes.push(repo.commit(&tree, &parents, CommitInfo::tezos(i as i64, "c")).unwrap());
}

#[test]
fn a_writer_keeps_acting_on_the_directory_it_locked_after_a_rename() {
    let root = tempfile::tempdir().unwrap();
    let path = root.path().join("store");
    let moved = root.path().join("moved");
    // One chunk per commit: every commit rolls (creates a chunk file).
    let options = RepoOptions { chunk_bytes: 1, ..RepoOptions::default() };
    let mut repo = Repo::open_with(&path, options).unwrap();
    // Its GCs copy and retire chunks (every chunk here is mostly live: they would stay in place).
    repo.set_gc_policy(GcPolicy { keep_in_place_percent: 0, ..GcPolicy::default() });
    let mut hashes = Vec::new();
    for i in 0..6 {
        commit(&mut repo, &mut hashes, i);
    }
    let chunks_before = names(&path, "chunk.");

    // The store directory moves away; an impostor takes its path, holding files named like the
    // store's (which a GC would retire, and the next rolls would create).
    std::fs::rename(&path, &moved).unwrap();
    std::fs::create_dir(&path).unwrap();
    for name in chunks_before.iter().chain(["control".to_string(), "chunk.000020".to_string()].iter()) {
        std::fs::write(path.join(name), format!("not the store's {name}")).unwrap();
    }
    let impostor = contents(&path);

    // More commits (each rolls), a GC that unlinks on the writer's thread, then one whose retired
    // files the background unlink thread removes, then more commits and a close.
    for i in 6..12 {
        commit(&mut repo, &mut hashes, i);
    }
    let report = repo.gc(&hashes[9]).unwrap();
    assert!(report.chunks_removed > 0, "{report:?}");
    repo.gc_start(&hashes[11]).unwrap();
    let mut i = 12;
    while repo.gc_running() {
        commit(&mut repo, &mut hashes, i);
        i += 1;
        assert!(i < 10_000, "the GC never finished");
    }
    for _ in 0..3 {
        commit(&mut repo, &mut hashes, i);
        i += 1;
    }
    let head = *hashes.last().unwrap();
    repo.close().unwrap();

    // Nothing was created in, changed in, or removed from the impostor.
    assert_eq!(contents(&path), impostor, "the directory at the old path was touched");
    // The locked directory has the new chunks and the segment, not the retired chunks.
    let chunks_after = names(&moved, "chunk.");
    assert!(!chunks_after.contains(&chunks_before[1]), "{chunks_after:?}");
    assert!(chunks_after.iter().any(|name| !chunks_before.contains(name)), "{chunks_after:?}");
    assert!(!names(&moved, "seg.").is_empty(), "no segment in the locked directory");
    // And it is the whole store: every kept commit readable, fsck clean.
    let reader = Repo::open_read_only(&moved).unwrap();
    assert_eq!(reader.head(), Some(head));
    let tree = reader.checkout(&head).unwrap();
    for k in 0..i {
        assert_eq!(tree.find(&["k", &format!("{k:05}")]).unwrap().unwrap().as_bytes(), value(k), "key {k}");
    }
    let report = reader.fsck();
    assert!(report.is_clean(), "{report}");
    eprintln!("{} chunk files before the move, {} after the GCs", chunks_before.len(), chunks_after.len());
}
