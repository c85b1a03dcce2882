//! Seeded, replayable property tests (replay a failure with `LARCH_SEED=<seed> cargo test -p
//! larch-core --test properties <name>`):
//! (a) a directory's hash and inode structure are a pure function of its entry set, whatever the
//!     insertion order and add/remove history, checked against the independent reference
//!     implementation of the spec's `partition` / `dir_hash` in `common::reference`;
//! (b) random operation sequences agree with `larch_testkit::Model` on every read, on the live tree
//!     and after commit + lazy checkout, and clones taken earlier never change.

// Test helpers outside `#[test]` functions panic on failure too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::reference::{self, Inode, Triple};
use common::{Path, bindings, load};
use larch_core::{CommitInfo, Entry, Kind, MemoryRepo, NodeBody, NodeRef, Tree};
use larch_testkit::rand::Rng;
use larch_testkit::rand::seq::SliceRandom;
use larch_testkit::{Model, Op, OpGen, TestRng, seeded_rng};
use std::collections::BTreeMap;

// ---------------------------------------------------------------------------------------------
// (a) Order and history independence of directory hashes.

/// What a directory entry is made of in these tests: a contents value, or a one-file sub-directory
/// (so that node entries carry real node hashes).
#[derive(Clone, Debug)]
enum Target {
    Contents(Vec<u8>),
    Dir(Vec<u8>),
}

fn random_name(rng: &mut TestRng) -> Vec<u8> {
    // Mixed lengths (including empty and ≥ 128 bytes) and arbitrary bytes, not only UTF-8.
    let len = match rng.random_range(0..100) {
        0 => 0,
        1..=3 => rng.random_range(120..200),
        _ => rng.random_range(1..10),
    };
    (0..len)
        .map(|_| if rng.random_bool(0.8) { rng.random_range(b'a'..=b'z') } else { rng.random() })
        .collect()
}

fn random_target(rng: &mut TestRng) -> Target {
    let value: Vec<u8> = (0..rng.random_range(0..20)).map(|_| rng.random()).collect();
    if rng.random_bool(0.2) { Target::Dir(value) } else { Target::Contents(value) }
}

fn triple(name: &[u8], target: &Target) -> Triple {
    match target {
        Target::Contents(v) => (name.to_vec(), false, reference::contents_hash(v)),
        Target::Dir(v) => {
            let sub = reference::dir_hash(&[(b"f".to_vec(), false, reference::contents_hash(v))]);
            (name.to_vec(), true, sub)
        }
    }
}

fn put(tree: &mut Tree, dir: &[u8], name: &[u8], target: &Target) {
    match target {
        Target::Contents(v) => tree.add(&[dir, name], v.clone()).unwrap(),
        Target::Dir(v) => {
            // Replace whatever was there by a directory holding exactly one file.
            tree.remove(&[dir, name]).unwrap();
            tree.add(&[dir, name, &b"f"[..]], v.clone()).unwrap();
        }
    }
}

/// Compares larch's inode trie below `node` with the reference partition, node by node.
fn compare_structure(tree: &Tree, node: &NodeRef, expected: &Inode, at: &str) -> usize {
    let node = load(tree, node);
    match (node.body(), expected) {
        (NodeBody::Values(entries), Inode::Values { hash, entries: want }) => {
            assert_eq!(node.hash().0, *hash, "{at}: Values hash");
            let names: Vec<&[u8]> = entries.iter().map(|(n, _)| n.as_bytes()).collect();
            let want: Vec<&[u8]> = want.iter().map(|(n, _, _)| &n[..]).collect();
            assert_eq!(names, want, "{at}: Values names");
            1
        }
        (NodeBody::Tree(inode), Inode::Tree { hash, depth, length, children }) => {
            assert_eq!(node.hash().0, *hash, "{at}: Tree hash");
            assert_eq!(u32::from(inode.depth), *depth, "{at}: depth");
            assert_eq!(inode.length, *length, "{at}: length");
            let indexes: Vec<u32> = inode.children.iter().map(|(i, _)| u32::from(*i)).collect();
            let want: Vec<u32> = children.iter().map(|(i, _)| *i).collect();
            assert_eq!(indexes, want, "{at}: bucket indexes");
            let mut count = 1;
            for ((index, child), (_, want)) in inode.children.iter().zip(children) {
                count += compare_structure(tree, child, want, &format!("{at}/{index}"));
            }
            count
        }
        (body, _) => panic!("{at}: larch has {body:?}, the reference {expected:?}"),
    }
}

/// Checks the directory `dir` of `tree` against the reference for the entry set `entries`.
fn check_dir(tree: &Tree, dir: &[u8], entries: &BTreeMap<Vec<u8>, Target>, at: &str) {
    let triples: Vec<Triple> = entries.iter().map(|(n, t)| triple(n, t)).collect();
    let sub = tree.find_tree(&[dir]).unwrap();
    if triples.is_empty() {
        assert!(sub.is_none(), "{at}: an emptied directory is pruned");
        return;
    }
    let sub = sub.unwrap();
    assert_eq!(sub.hash().0, reference::dir_hash(&triples), "{at}: {} entries", triples.len());
    assert_eq!(tree.length(&[dir]).unwrap(), triples.len() as u64, "{at}: length");
    let Entry::Node(root) = sub.root() else { panic!("{at}: not a directory") };
    let node = load(&sub, root);
    if triples.len() <= 256 {
        assert!(matches!(node.body(), NodeBody::Flat(_)), "{at}: ≤ 256 entries are flat");
    } else {
        compare_structure(&sub, root, &reference::partition(0, &triples), at);
    }
}

/// Numbers of `Tree` and `Values` children of the root inode of directory `dir`.
fn inner_kinds(tree: &Tree, dir: &[u8]) -> (usize, usize) {
    let sub = tree.find_tree(&[dir]).unwrap().unwrap();
    let Entry::Node(root) = sub.root() else { panic!("not a directory") };
    let root = load(&sub, root);
    let NodeBody::Tree(inode) = root.body() else { panic!("not an inode trie") };
    let trees =
        inode.children.iter().filter(|(_, c)| matches!(load(&sub, c).body(), NodeBody::Tree(_))).count();
    (trees, inode.children.len() - trees)
}

#[test]
fn directory_hash_is_independent_of_insertion_order() {
    let (mut rng, _) = seeded_rng("directory_hash_is_independent_of_insertion_order", 0x1a2b_3c4d);
    for size in [0usize, 1, 5, 32, 33, 255, 256, 257, 300, 700, 1500] {
        let mut entries = BTreeMap::new();
        while entries.len() < size {
            entries.insert(random_name(&mut rng), random_target(&mut rng));
        }
        let mut order: Vec<(&Vec<u8>, &Target)> = entries.iter().collect();
        let mut hashes = Vec::new();
        for _ in 0..3 {
            order.shuffle(&mut rng);
            let mut tree = Tree::empty();
            tree.add(&[&b"other"[..]], b"sibling".to_vec()).unwrap();
            for (name, target) in &order {
                put(&mut tree, b"d", name, target);
            }
            check_dir(&tree, b"d", &entries, &format!("size {size}"));
            hashes.push(tree.hash());
        }
        assert!(hashes.windows(2).all(|w| w[0] == w[1]), "size {size}: root hash depends on order");
    }
}

#[test]
fn directory_hash_is_independent_of_add_remove_history() {
    let (mut rng, _) = seeded_rng("directory_hash_is_independent_of_add_remove_history", 0x5eed_0002);
    let mut tree = Tree::empty();
    let mut current: BTreeMap<Vec<u8>, Target> = BTreeMap::new();
    let (mut max_len, mut crossed_up, mut crossed_down) = (0, 0, 0);
    let (mut trees_at_2000, mut values_at_1000) = (0, 0);
    // Grow to 2000 entries (depth-1 buckets above 32 become Trees), shrink to 100 (flat again),
    // grow past 256 again and shrink to zero, with overwrites and re-adds interleaved.
    for (phase, target_len) in [2000usize, 100, 400, 0].into_iter().enumerate() {
        let mut step = 0;
        while current.len() != target_len {
            step += 1;
            let before = current.len();
            let grow = current.len() < target_len;
            let roll = rng.random_range(0..100);
            if roll < 10 && !current.is_empty() {
                // Overwrite an existing entry (possibly switching contents <-> directory).
                let name = current.keys().nth(rng.random_range(0..current.len())).unwrap().clone();
                let target = random_target(&mut rng);
                put(&mut tree, b"d", &name, &target);
                current.insert(name, target);
            } else if (grow && roll < 85) || (!grow && roll >= 85) || current.is_empty() {
                let (name, target) = (random_name(&mut rng), random_target(&mut rng));
                put(&mut tree, b"d", &name, &target);
                current.insert(name, target);
            } else {
                let name = current.keys().nth(rng.random_range(0..current.len())).unwrap().clone();
                tree.remove(&[&b"d"[..], &name[..]]).unwrap();
                current.remove(&name);
            }
            let after = current.len();
            max_len = max_len.max(after);
            crossed_up += usize::from(before <= 256 && after > 256);
            crossed_down += usize::from(before > 256 && after <= 256);
            // Around the thresholds, and periodically, compare with the reference.
            if (254..=258).contains(&after) || after == 1000 || step % 101 == 0 {
                check_dir(&tree, b"d", &current, &format!("phase {phase} step {step}"));
            }
            if phase == 0 && after == 2000 {
                trees_at_2000 = inner_kinds(&tree, b"d").0;
            }
            if phase == 1 && after == 1000 {
                // Inner Trees of the 2000-entry trie have collapsed into Values as buckets shrank.
                values_at_1000 = values_at_1000.max(inner_kinds(&tree, b"d").1);
            }
        }
        check_dir(&tree, b"d", &current, &format!("end of phase {phase}"));
    }
    assert!((2000..2010).contains(&max_len), "grew to {max_len}");
    assert!(crossed_up >= 2 && crossed_down >= 2, "crossed 256: up {crossed_up}, down {crossed_down}");
    assert!(trees_at_2000 >= 30, "2000 entries: {trees_at_2000} depth-1 Trees");
    assert!(values_at_1000 > 0, "shrinking to 1000 collapses depth-1 Trees into Values");
    assert_eq!(tree.hash().0, reference::dir_hash(&[]), "everything removed: the empty root");
}

// ---------------------------------------------------------------------------------------------
// (b) Random operation sequences against the reference model.

fn apply(tree: &mut Tree, op: &Op) {
    match op {
        Op::Add(path, value) => tree.add(path, value.clone()).unwrap(),
        Op::Remove(path) => tree.remove(path).unwrap(),
        Op::Copy { from, to } => {
            let existed = tree.mem_tree(from).unwrap();
            assert_eq!(tree.copy(from, to).unwrap(), existed, "copy returns whether the source exists");
        }
        Op::AddTree { path, tree: sub } => {
            let mut graft = Tree::empty();
            for (relative, value) in &sub.values {
                graft.add(relative, value.clone()).unwrap();
            }
            tree.add_tree(path, &graft).unwrap();
        }
    }
}

/// How the directories of a tree list (`Tree::list`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Listing {
    /// A fresh checkout: every directory is stored and unmodified, in Irmin's layout order.
    Layout,
    /// A tree being edited: a directory lists by name if modified since the last commit, in
    /// layout order if not (which ones is not tracked here).
    Either,
}

/// Compares every read at `path`, with a random list window.
fn check_reads(tree: &Tree, model: &Model, path: &Path, listing: Listing, rng: &mut TestRng, at: &str) {
    let found = tree.find(path).unwrap().map(|c| c.as_bytes().to_vec());
    assert_eq!(found.as_ref(), model.find(path), "{at}: find {path:?}");
    assert_eq!(tree.mem(path).unwrap(), model.mem(path), "{at}: mem {path:?}");
    assert_eq!(tree.mem_tree(path).unwrap(), model.mem_tree(path), "{at}: mem_tree {path:?}");
    let all = model.list(path);
    assert_eq!(tree.length(path).unwrap(), all.len() as u64, "{at}: length {path:?}");
    let offset = if rng.random_bool(0.5) { 0 } else { rng.random_range(0..=all.len() + 3) };
    let length = if rng.random_bool(0.5) { None } else { Some(rng.random_range(0..40)) };
    let listed = |entries: Vec<(larch_core::Name, Tree)>| -> Vec<(Vec<u8>, bool)> {
        entries.into_iter().map(|(name, sub)| (name.to_vec(), sub.kind() == Kind::Contents)).collect()
    };
    let window = |entries: &[(Vec<u8>, bool)]| -> Vec<(Vec<u8>, bool)> {
        entries.iter().skip(offset).take(length.unwrap_or(usize::MAX)).cloned().collect()
    };
    // Sorted whatever the state.
    let sorted = listed(tree.list_sorted(path, offset, length).unwrap());
    assert_eq!(sorted, window(&all), "{at}: list_sorted {path:?} offset {offset} length {length:?}");
    // Irmin's order: the reference layout of the names, or (for an edited tree) that or sorted.
    let kinds: BTreeMap<Vec<u8>, bool> = all.iter().cloned().collect();
    let names: Vec<Vec<u8>> = all.iter().map(|(name, _)| name.clone()).collect();
    let layout: Vec<(Vec<u8>, bool)> =
        reference::list_order(&names).into_iter().map(|name| (name.clone(), kinds[&name])).collect();
    let full = listed(tree.list(path, 0, None).unwrap());
    let page = listed(tree.list(path, offset, length).unwrap());
    match listing {
        Listing::Layout => assert_eq!(full, layout, "{at}: list {path:?} in layout order"),
        Listing::Either => {
            assert!(full == layout || full == all, "{at}: list {path:?} neither layout nor sorted")
        }
    }
    assert_eq!(page, window(&full), "{at}: list {path:?} offset {offset} length {length:?}");
}

/// Compares everything: all bindings, every directory's listing and length, and the hash with the
/// reference implementation applied to the model.
fn check_all(tree: &Tree, model: &Model, listing: Listing, rng: &mut TestRng, at: &str) {
    assert_eq!(bindings(tree), model.values, "{at}: bindings");
    for dir in model.directories() {
        check_reads(tree, model, &dir, listing, rng, at);
    }
    assert_eq!(tree.hash().0, reference::model_hash(&model.values), "{at}: hash vs reference");
}

/// Names of the situations `op` runs into on `model`, for the coverage check of the run.
fn events_before(model: &Model, op: &Op) -> Vec<&'static str> {
    let contents_on_the_way = |path: &Path| (0..path.len()).any(|cut| model.mem(&path[..cut]));
    let mut events = Vec::new();
    match op {
        Op::Add(path, _) if contents_on_the_way(path) => events.push("add through contents"),
        Op::Remove(path) if !model.mem_tree(path) => events.push("remove of a missing path"),
        Op::Copy { from, .. } if model.mem_tree(from) => events.push("copy of an existing source"),
        Op::Copy { .. } => events.push("copy of a missing source"),
        Op::AddTree { tree, .. } if tree.values.is_empty() => events.push("add_tree of an empty tree"),
        _ => {}
    }
    events
}

fn random_read_path(generator: &OpGen, model: &Model, rng: &mut TestRng) -> Path {
    if model.values.is_empty() || rng.random_bool(0.4) {
        return generator.path(rng);
    }
    let key = model.values.keys().nth(rng.random_range(0..model.values.len())).unwrap();
    key[..rng.random_range(0..=key.len())].to_vec()
}

#[test]
fn random_operations_agree_with_the_model() {
    let (mut rng, _) = seeded_rng("random_operations_agree_with_the_model", 0x0b5e_55ed);
    let mut repo = MemoryRepo::new();
    let mut stats = BTreeMap::<&str, usize>::new();
    let mut snapshots: Vec<(Tree, Model, String)> = Vec::new();
    for round in 0..2 {
        let mut tree = repo.empty_tree();
        let mut model = Model::new();
        let mut parents = Vec::new();
        // Growth, then shrinking: the wide directory crosses 256 both ways.
        // (weights of add/remove/copy/add_tree, share of paths in the wide directory, steps); the
        // first two phases never touch the root path, which would wipe the wide directory.
        let phases = [([88, 2, 5, 5], 0.95, 900), ([10, 80, 5, 5], 0.95, 700), ([60, 25, 8, 7], 0.5, 700)];
        for (phase, (weights, wide_ratio, steps)) in phases.into_iter().enumerate() {
            let root_path_ratio = if phase < 2 { 0.0 } else { OpGen::default().root_path_ratio };
            let generator = OpGen { weights, wide_ratio, root_path_ratio, ..OpGen::default() };
            for step in 0..steps {
                let at = format!("round {round} phase {phase} step {step}");
                let op = generator.op(&mut rng);
                let wide_before = model.list(&generator.wide_dir).len();
                for event in events_before(&model, &op) {
                    *stats.entry(event).or_default() += 1;
                }
                let parent = match &op {
                    Op::Remove(path) if path.len() >= 2 => Some(path[..path.len() - 1].to_vec()),
                    _ => None,
                };
                let parent_existed = parent.as_ref().is_some_and(|p| model.mem_tree(p));
                apply(&mut tree, &op);
                model.apply(&op);
                if parent_existed && parent.as_ref().is_some_and(|p| !model.mem_tree(p)) {
                    *stats.entry("remove pruned an emptied directory").or_default() += 1;
                }
                let wide_after = model.list(&generator.wide_dir).len();
                *stats.entry("ops").or_default() += 1;
                if wide_before <= 256 && wide_after > 256 {
                    *stats.entry("wide dir grew past 256").or_default() += 1;
                }
                if wide_before > 256 && wide_after <= 256 {
                    *stats.entry("wide dir shrank to 256").or_default() += 1;
                }
                for _ in 0..3 {
                    let path = random_read_path(&generator, &model, &mut rng);
                    check_reads(&tree, &model, &path, Listing::Either, &mut rng, &at);
                }
                if step % 100 == 99 {
                    check_all(&tree, &model, Listing::Either, &mut rng, &at);
                    let big_dirs =
                        model.directories().into_iter().filter(|d| model.list(d).len() > 256).count();
                    if big_dirs > 1 {
                        *stats.entry("checkpoints with two dirs > 256 (copies)").or_default() += 1;
                    }
                    snapshots.push((tree.clone(), model.clone(), at.clone()));
                    if tree.kind() == Kind::Contents {
                        continue; // a contents root cannot be committed
                    }
                    let commit =
                        repo.commit(&tree, &parents, CommitInfo::tezos(step as i64, at.clone())).unwrap();
                    parents = vec![commit];
                    // Committed: the tree's directories are stored, unmodified since, and list in
                    // layout order as a checkout's do (Irmin exports a committed tree's nodes).
                    check_all(&tree, &model, Listing::Layout, &mut rng, &format!("{at} (committed)"));
                    let checked_out = repo.checkout(&commit).unwrap();
                    let loads = repo.source().node_loads();
                    for _ in 0..10 {
                        let path = random_read_path(&generator, &model, &mut rng);
                        let at = format!("{at} (checkout)");
                        check_reads(&checked_out, &model, &path, Listing::Layout, &mut rng, &at);
                    }
                    check_all(&checked_out, &model, Listing::Layout, &mut rng, &format!("{at} (checkout)"));
                    assert!(
                        model.values.is_empty() || repo.source().node_loads() > loads,
                        "{at}: lazy loads"
                    );
                    snapshots.push((checked_out.clone(), model.clone(), format!("{at} (checkout)")));
                    // Half of the time, keep working on the lazy checkout (copy-on-write of stored nodes).
                    if rng.random_bool(0.5) {
                        tree = checked_out;
                        *stats.entry("continued on a checkout").or_default() += 1;
                    }
                }
            }
        }
    }
    // Persistence: every snapshot still reads and hashes as when it was taken.
    for (tree, model, at) in &snapshots {
        assert_eq!(bindings(tree), model.values, "snapshot {at} changed");
        assert_eq!(tree.hash().0, reference::model_hash(&model.values), "snapshot {at}: hash");
    }
    eprintln!("{stats:?}, {} snapshots", snapshots.len());
    for key in [
        "wide dir grew past 256",
        "wide dir shrank to 256",
        "continued on a checkout",
        "add through contents",
        "remove pruned an emptied directory",
        "copy of a missing source",
        "copy of an existing source",
        "add_tree of an empty tree",
        "remove of a missing path",
    ] {
        assert!(stats.get(key).copied().unwrap_or(0) > 0, "the run never exercised: {key}");
    }
}

#[test]
fn clones_are_unaffected_by_later_modifications() {
    let (mut rng, _) = seeded_rng("clones_are_unaffected_by_later_modifications", 0xc10e);
    let generator = OpGen::default();
    let mut tree = Tree::empty();
    let mut model = Model::new();
    let mut clones: Vec<(Tree, BTreeMap<Path, Vec<u8>>, larch_core::Hash)> = Vec::new();
    for step in 0..1500 {
        let op = generator.op(&mut rng);
        apply(&mut tree, &op);
        model.apply(&op);
        if step % 50 == 0 {
            // Some clones hash before being stored (caches filled), some not.
            let hash = if step % 100 == 0 { tree.hash() } else { tree.clone().hash() };
            clones.push((tree.clone(), model.values.clone(), hash));
        }
    }
    for (i, (clone, values, hash)) in clones.iter().enumerate() {
        assert_eq!(&bindings(clone), values, "clone {i}");
        assert_eq!(clone.hash(), *hash, "clone {i}");
        assert_eq!(clone.hash().0, reference::model_hash(values), "clone {i} vs reference");
    }
}
