//! The order of `Tree::list` (Irmin's, docs/list-order.md), checked against data from outside
//! larch:
//! - Irmin 3.7.2's own inode layouts of the 257- and 1000-entry directories
//!   (`tests/data/irmin-3.7.2-vectors.json`, `inode_dump`): Irmin lists a stored directory by
//!   walking its inodes, so the walk of its dump is its listing;
//! - the expected listings of generated directories of up to 20,000 entries (three inode levels
//!   below the root) and of binary names, computed by the project's shared Python reference
//!   (`tests/data/list-order-reference.json`, `scripts/list_order_reference.py`).
//!
//! Irmin's listings of a real Irmin-written store (`irmin-3.7.2-list-order.json`) are checked in
//! larch-irmin's tests and through `larch ls` in larch-cli's.

// Test helpers outside `#[test]` functions panic on failure too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::data_file;
use larch_core::{CommitInfo, MemoryRepo, Tree};
use serde_json::Value;

/// The names of the directory at `path`, as `list` gives them (`offset`, `length`).
fn listed(tree: &Tree, path: &[&[u8]], offset: usize, length: Option<usize>) -> Vec<Vec<u8>> {
    tree.list(path, offset, length).unwrap().into_iter().map(|(name, _)| name.to_vec()).collect()
}

fn sorted_listed(tree: &Tree, path: &[&[u8]], offset: usize, length: Option<usize>) -> Vec<Vec<u8>> {
    tree.list_sorted(path, offset, length).unwrap().into_iter().map(|(name, _)| name.to_vec()).collect()
}

/// A tree holding `names` below `dir` (each name's value is itself), committed; with its checkout.
fn committed(repo: &mut MemoryRepo, dir: &[u8], names: &[Vec<u8>]) -> (Tree, Tree) {
    let mut tree = repo.empty_tree();
    for name in names {
        tree.add(&[dir, name.as_slice()], name.clone()).unwrap();
    }
    // Some other directory beside it, so that the root is not the directory itself.
    tree.add(&[b"other".as_slice(), b"x".as_slice()], b"1".to_vec()).unwrap();
    let commit = repo.commit(&tree, &[], CommitInfo::tezos(0, "list order")).unwrap();
    let checkout = repo.checkout(&commit).unwrap();
    (tree, checkout)
}

/// Pages to ask of a listing of `n` entries: every size, offsets at the ends and at `boundaries`
/// (where buckets start), past the end, and empty ones.
fn pages(n: usize, boundaries: &[usize]) -> Vec<(usize, Option<usize>)> {
    let mut pages = vec![(0, None), (0, Some(0)), (0, Some(1)), (0, Some(n)), (n, None), (n, Some(3))];
    pages.extend([(n.saturating_sub(1), Some(1)), (n + 5, Some(2)), (1, Some(n)), (n / 2, Some(17))]);
    for &at in boundaries {
        for offset in [at.saturating_sub(1), at, at + 1] {
            pages.extend([(offset, Some(1)), (offset, Some(33)), (offset, None)]);
        }
    }
    pages
}

/// Checks the full listing and every page of the directory `dir` of `tree` against `want`.
fn check_pages(tree: &Tree, dir: &[u8], want: &[Vec<u8>], boundaries: &[usize], what: &str) {
    let path = [dir];
    assert_eq!(tree.length(&path).unwrap(), want.len() as u64, "{what}: length");
    assert_eq!(listed(tree, &path, 0, None), want, "{what}: full listing");
    for (offset, length) in pages(want.len(), boundaries) {
        let slice: Vec<Vec<u8>> =
            want.iter().skip(offset).take(length.unwrap_or(usize::MAX)).cloned().collect();
        assert_eq!(listed(tree, &path, offset, length), slice, "{what}: page {offset} {length:?}");
    }
}

fn walk_dump(inode: &Value, out: &mut Vec<Vec<u8>>, starts: &mut Vec<usize>) {
    if let Some(values) = inode.get("values") {
        starts.push(out.len());
        for value in values.as_array().unwrap() {
            out.push(hex::decode(value["name_hex"].as_str().unwrap()).unwrap());
        }
    } else {
        for pointer in inode["pointers"].as_array().unwrap() {
            walk_dump(&pointer["tree"], out, starts);
        }
    }
}

#[test]
fn stored_large_directories_list_in_the_order_of_irmins_own_inode_layout() {
    let file: Value = serde_json::from_str(&data_file("irmin-3.7.2-vectors.json")).unwrap();
    let mut checked = 0;
    for case in file["cases"].as_array().unwrap() {
        let commit = &case["commits"][0];
        let Some(dump) = commit["expected"].get("inode_dump") else { continue };
        // The rule of these cases: `for i in 0..n: path [str(i)] -> str(i)`.
        assert!(commit["rule"].as_str().unwrap().starts_with("flat: for i in 0.."), "{}", case["name"]);
        let n = commit["entry_count"].as_u64().unwrap() as usize;
        let names: Vec<Vec<u8>> = (0..n).map(|i| i.to_string().into_bytes()).collect();
        let (mut irmin_order, mut starts) = (Vec::new(), Vec::new());
        walk_dump(&dump["concrete"], &mut irmin_order, &mut starts);
        assert_eq!(irmin_order.len(), n);
        let mut repo = MemoryRepo::new();
        let (tree, checkout) = committed(&mut repo, b"dir", &names);
        let what = case["name"].as_str().unwrap();
        check_pages(&checkout, b"dir", &irmin_order, &starts, &format!("{what} (checkout)"));
        // The tree just committed: its nodes are the stored ones.
        check_pages(&tree, b"dir", &irmin_order, &[], &format!("{what} (committed tree)"));
        checked += 1;
    }
    assert_eq!(checked, 2, "the 257- and 1000-entry dumps");
}

/// The directories of `list-order-reference.json`: name, names in Irmin's order.
fn reference_directories() -> Vec<(String, Vec<Vec<u8>>)> {
    let file: Value = serde_json::from_str(&data_file("list-order-reference.json")).unwrap();
    file["directories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|dir| {
            let order: Vec<Vec<u8>> = match (dir.get("order"), dir.get("order_hex")) {
                (Some(order), _) => order
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|n| n.as_str().unwrap().as_bytes().to_vec())
                    .collect(),
                (None, Some(hex)) => hex
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|n| hex::decode(n.as_str().unwrap()).unwrap())
                    .collect(),
                (None, None) => panic!("a directory without its order"),
            };
            assert_eq!(order.len() as u64, dir["count"].as_u64().unwrap());
            (dir["name"].as_str().unwrap().to_owned(), order)
        })
        .collect()
}

#[test]
fn stored_directories_list_as_the_reference_computes() {
    for (name, order) in reference_directories() {
        let mut repo = MemoryRepo::new();
        let (tree, checkout) = committed(&mut repo, b"dir", &order);
        // Page offsets at a few hundred places through the listing.
        let step = (order.len() / 200).max(1);
        let boundaries: Vec<usize> = (0..order.len()).step_by(step).collect();
        check_pages(&checkout, b"dir", &order, &boundaries, &format!("{name} (checkout)"));
        check_pages(&tree, b"dir", &order, &[], &format!("{name} (committed tree)"));
        // By name, whatever the state.
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(sorted_listed(&checkout, &[b"dir"], 0, None), sorted, "{name}: list_sorted");
        assert_eq!(
            sorted_listed(&checkout, &[b"dir"], 7, Some(40)),
            sorted.iter().skip(7).take(40).cloned().collect::<Vec<_>>()
        );
        // The same names never committed: by name.
        let mut fresh = Tree::empty();
        for n in &order {
            fresh.add(&[b"dir".as_slice(), n.as_slice()], b"v".to_vec()).unwrap();
        }
        assert_eq!(listed(&fresh, &[b"dir"], 0, None), sorted, "{name}: in memory");
    }
}

#[test]
fn a_directory_modified_in_memory_lists_by_name_until_committed() {
    let order = reference_directories().into_iter().find(|(name, _)| name == "hex_2000").unwrap().1;
    let mut sorted = order.clone();
    sorted.sort();
    let mut repo = MemoryRepo::new();
    let (_, checkout) = committed(&mut repo, b"dir", &order);
    let dir = [b"dir".as_slice()];
    let new_name = b"zz-new".to_vec();
    let with_new = {
        let mut names = sorted.clone();
        names.push(new_name.clone());
        names.sort();
        names
    };
    // One added: by name.
    let mut tree = checkout.clone();
    tree.add(&[b"dir".as_slice(), &new_name], b"1".to_vec()).unwrap();
    assert_eq!(listed(&tree, &dir, 0, None), with_new);
    assert_eq!(listed(&tree, &dir, 1990, Some(20)), with_new[1990..].to_vec());
    // Added and removed again: the same names, modified all the same (Irmin: `add_one_then_remove_it`).
    tree.remove(&[b"dir".as_slice(), &new_name]).unwrap();
    assert_eq!(listed(&tree, &dir, 0, None), sorted);
    // The checkout it came from is unchanged.
    assert_eq!(listed(&checkout, &dir, 0, None), order);
    // The first listed removed: by name.
    let mut tree = checkout.clone();
    tree.remove(&[b"dir".as_slice(), &order[0]]).unwrap();
    assert_eq!(
        listed(&tree, &dir, 0, None),
        sorted.iter().filter(|n| **n != order[0]).cloned().collect::<Vec<_>>()
    );
    // Committed again: in the layout of the new set.
    let commit = repo.commit(&tree, &[], CommitInfo::tezos(1, "removed")).unwrap();
    let relisted = listed(&repo.checkout(&commit).unwrap(), &dir, 0, None);
    let mut relisted_sorted = relisted.clone();
    relisted_sorted.sort();
    assert_eq!(relisted_sorted, sorted[..].iter().filter(|n| **n != order[0]).cloned().collect::<Vec<_>>());
    assert_ne!(relisted, relisted_sorted, "a stored directory of 1,999 entries is not listed by name");
    assert_eq!(listed(&tree, &dir, 0, None), relisted, "the committed tree lists as its checkout");
}

#[test]
fn a_change_below_a_subdirectory_modifies_its_ancestors_only() {
    // `/dir` holds 40 subdirectories of 40 entries each: all listed in layout order once stored.
    let mut repo = MemoryRepo::new();
    let mut tree = repo.empty_tree();
    let subs: Vec<Vec<u8>> = (0..40).map(|i| format!("sub{i}").into_bytes()).collect();
    let leaves: Vec<Vec<u8>> = (0..40).map(|i| format!("leaf{i}").into_bytes()).collect();
    for sub in &subs {
        for leaf in &leaves {
            tree.add(&[b"dir".as_slice(), sub, leaf], b"v".to_vec()).unwrap();
        }
    }
    let commit = repo.commit(&tree, &[], CommitInfo::tezos(0, "subs")).unwrap();
    let checkout = repo.checkout(&commit).unwrap();
    let layout_of_subs = listed(&checkout, &[b"dir"], 0, None);
    let layout_of_leaves = listed(&checkout, &[b"dir", b"sub0"], 0, None);
    let sorted = |names: &[Vec<u8>]| {
        let mut names = names.to_vec();
        names.sort();
        names
    };
    assert_ne!(layout_of_subs, sorted(&layout_of_subs), "40 entries: bucket order");
    assert_ne!(layout_of_leaves, sorted(&layout_of_leaves));
    // A value added below `sub0`: `dir` and `sub0` are modified (by name), `sub1` is not.
    let mut changed = checkout.clone();
    changed.add(&[b"dir".as_slice(), b"sub0", b"leaf0"], b"changed".to_vec()).unwrap();
    assert_eq!(listed(&changed, &[b"dir"], 0, None), sorted(&layout_of_subs));
    assert_eq!(listed(&changed, &[b"dir", b"sub0"], 0, None), sorted(&layout_of_leaves));
    assert_eq!(listed(&changed, &[b"dir", b"sub1"], 0, None), listed(&checkout, &[b"dir", b"sub1"], 0, None));
    // A stored sub-tree grafted elsewhere keeps its layout order; its new parent is modified.
    changed.copy(&[b"dir".as_slice(), b"sub1"], &[b"copy".as_slice()]).unwrap();
    assert_eq!(listed(&changed, &[b"copy"], 0, None), listed(&checkout, &[b"dir", b"sub1"], 0, None));
    // `Tree::hash` is not a commit: still by name.
    let _ = changed.hash();
    assert_eq!(listed(&changed, &[b"dir"], 0, None), sorted(&layout_of_subs));
    // `length` agrees whatever the state.
    assert_eq!(changed.length(&[b"dir"]).unwrap(), 40);
    assert_eq!(changed.length(&[b"dir".as_slice(), b"sub0"]).unwrap(), 40);
}

#[test]
fn a_page_of_a_large_stored_directory_loads_the_inodes_on_its_way_only() {
    let order = reference_directories().into_iter().find(|(name, _)| name == "decimal_20000").unwrap().1;
    let mut repo = MemoryRepo::new();
    let (_, checkout) = committed(&mut repo, b"dir", &order);
    let dir = [b"dir".as_slice()];
    let before = repo.source().node_loads();
    assert_eq!(listed(&checkout, &dir, 12_345, Some(10)), order[12_345..12_355].to_vec());
    let page_loads = repo.source().node_loads() - before;
    let before = repo.source().node_loads();
    assert_eq!(listed(&checkout, &dir, 0, None).len(), 20_000);
    let full_loads = repo.source().node_loads() - before;
    // The page: the path to the directory, its root inode, the root's 32 children (their lengths
    // tell which to skip), then at most 32 children at each level below on the way.
    assert!(page_loads <= 2 + 32 * 3, "a page loaded {page_loads} inodes");
    assert!(full_loads > 1000, "the whole listing loaded {full_loads} inodes");
}
