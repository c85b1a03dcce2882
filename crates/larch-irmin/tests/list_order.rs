//! Irmin's own listings of the head of an Irmin-written store (`tests/data/irmin-3.7.2-list-order.json`:
//! Irmin 3.7.2's `Tree.list ?offset ?length` and `Tree.length` on 7 directories of 3 to 462 entries
//! of `tezos-stores/plain`, every page, and its order after changes in memory) against larch's
//! `Tree::list` on the same commit: read lazily from the Irmin store, and rebuilt and committed in
//! a larch repository.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_core::{CommitInfo, Kind, MemoryRepo, Tree};
use larch_irmin::{IrminStore, build_tree};
use serde_json::Value;
use std::path::PathBuf;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

/// A page as Irmin answered it: offset and length (`None`: not passed), names.
type Page = (Option<usize>, Option<usize>, Vec<Vec<u8>>);

/// One directory of the vector file.
struct Case {
    path: Vec<Vec<u8>>,
    hash_hex: String,
    length: u64,
    full: Vec<Vec<u8>>,
    pages: Vec<Page>,
    /// `order_of_modified_in_memory_tree`: what Irmin's order became after each change.
    modified: serde_json::Map<String, Value>,
}

fn names(value: &Value) -> Vec<Vec<u8>> {
    value.as_array().unwrap().iter().map(|n| n.as_str().unwrap().as_bytes().to_vec()).collect()
}

fn cases() -> (String, Vec<Case>) {
    let text = std::fs::read_to_string(data("irmin-3.7.2-list-order.json")).unwrap();
    let file: Value = serde_json::from_str(&text).unwrap();
    let cases = file["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|case| {
            assert_eq!(case["kind"], "node");
            let path = case["path"].as_str().unwrap();
            let path: Vec<Vec<u8>> = path
                .split('/')
                .filter(|step| !step.is_empty())
                .map(|step| step.as_bytes().to_vec())
                .collect();
            let pages = case["pages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|page| {
                    let offset = page["offset"].as_u64().map(|o| o as usize);
                    let length = page["length"].as_u64().map(|l| l as usize);
                    (offset, length, names(&page["names"]))
                })
                .collect();
            Case {
                path,
                hash_hex: case["hash_hex"].as_str().unwrap().to_owned(),
                length: case["length"].as_u64().unwrap(),
                full: names(&case["full"]),
                pages,
                modified: case["order_of_modified_in_memory_tree"].as_object().unwrap().clone(),
            }
        })
        .collect();
    (file["commit"].as_str().unwrap().to_owned(), cases)
}

fn listed(tree: &Tree, path: &[Vec<u8>], offset: usize, length: Option<usize>) -> Vec<Vec<u8>> {
    tree.list(path, offset, length).unwrap().into_iter().map(|(name, _)| name.to_vec()).collect()
}

/// Every directory of the file, in full and page by page, as Irmin listed it.
fn check_as_irmin(tree: &Tree, cases: &[Case], what: &str) -> usize {
    let mut pages = 0;
    for case in cases {
        let at = format!(
            "{what}: /{}",
            case.path.iter().map(|s| String::from_utf8_lossy(s)).collect::<Vec<_>>().join("/")
        );
        let dir = tree.find_tree(&case.path).unwrap().unwrap();
        assert_eq!(hex::encode(dir.hash().0), case.hash_hex, "{at}: hash");
        assert_eq!(tree.length(&case.path).unwrap(), case.length, "{at}: length");
        assert_eq!(listed(tree, &case.path, 0, None), case.full, "{at}: full listing");
        for (offset, length, names) in &case.pages {
            let got = listed(tree, &case.path, offset.unwrap_or(0), *length);
            assert_eq!(&got, names, "{at}: page offset {offset:?} length {length:?}");
            pages += 1;
        }
    }
    pages
}

#[test]
fn the_head_of_an_irmin_store_lists_as_irmin_lists_it() {
    let (commit, cases) = cases();
    assert_eq!(cases.len(), 7);
    assert!(
        cases.iter().any(|c| c.full.len() > 32 && c.full.windows(2).any(|w| w[0] > w[1])),
        "bucket orders"
    );
    for store in ["plain", "gced"] {
        let store = IrminStore::open(data("tezos-stores").join(store)).unwrap();
        let head = store.head().unwrap();
        assert_eq!(head.hash.to_base58(), commit);
        // Read lazily from the Irmin store itself.
        let lazy = store.checkout(&head);
        let pages = check_as_irmin(&lazy, &cases, "lazy checkout of the Irmin store");
        assert!(pages >= 7 * 14, "{pages} pages");
    }
    // Rebuilt in memory, then committed to a larch repository: the committed tree and its
    // checkout list as Irmin does.
    let store = IrminStore::open(data("tezos-stores/plain")).unwrap();
    let head = store.head().unwrap();
    let mut repo = MemoryRepo::new();
    let (built, _) = build_tree(&store, &head, repo.source().clone(), None, &mut |_| {}).unwrap();
    // (Without its parents, which the repository does not hold: the same tree.)
    let made = repo.commit(&built, &[], head.info.clone()).unwrap();
    assert_eq!(repo.commit_record(&made).unwrap().tree_hash, head.tree_hash);
    check_as_irmin(&built, &cases, "rebuilt tree, committed");
    check_as_irmin(&repo.checkout(&made).unwrap(), &cases, "larch checkout");
}

fn sorted(mut names: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    names.sort();
    names
}

/// The order Irmin reported after a change: `"sorted"` or `"sorted (= bucket order)"` (the same
/// for a directory of at most 32 entries).
fn irmin_sorted(case: &Case, change: &str) -> bool {
    let said = case.modified[change].as_str().unwrap();
    said == "sorted" || said == "sorted (= bucket order)"
}

#[test]
fn after_changes_in_memory_irmin_and_larch_list_by_name() {
    let (_, cases) = cases();
    let store = IrminStore::open(data("tezos-stores/plain")).unwrap();
    let head = store.head().unwrap();
    let checkout = store.checkout(&head);
    for case in &cases {
        let at = String::from_utf8_lossy(&case.path.join(&b'/')).into_owned();
        let path = &case.path;
        let child = |name: &[u8]| {
            let mut p = path.clone();
            p.push(name.to_vec());
            p
        };
        // One added.
        assert!(irmin_sorted(case, "add_one"), "{at}");
        let mut tree = checkout.clone();
        tree.add(&child(b"zzzz-added"), b"1".to_vec()).unwrap();
        let mut with = case.full.clone();
        with.push(b"zzzz-added".to_vec());
        assert_eq!(listed(&tree, path, 0, None), sorted(with), "{at}: add_one");
        // Added, then removed: the same names, by name all the same.
        assert!(irmin_sorted(case, "add_one_then_remove_it"), "{at}");
        tree.remove(&child(b"zzzz-added")).unwrap();
        assert_eq!(listed(&tree, path, 0, None), sorted(case.full.clone()), "{at}: add_one_then_remove_it");
        // The first listed removed.
        assert!(irmin_sorted(case, "remove_first"), "{at}");
        let mut tree = checkout.clone();
        tree.remove(&child(&case.full[0])).unwrap();
        assert_eq!(listed(&tree, path, 0, None), sorted(case.full[1..].to_vec()), "{at}: remove_first");
        // A value added below the first sub-directory listed (where there is one).
        assert!(irmin_sorted(case, "add_below_first_subdirectory"), "{at}");
        let first_dir =
            checkout.list(path, 0, None).unwrap().into_iter().find(|(_, t)| t.kind() == Kind::Node);
        if let Some((name, _)) = first_dir {
            let mut tree = checkout.clone();
            let mut below = child(&name);
            below.push(b"zzzz-added".to_vec());
            tree.add(&below, b"1".to_vec()).unwrap();
            assert_eq!(
                listed(&tree, path, 0, None),
                sorted(case.full.clone()),
                "{at}: add_below_first_subdirectory"
            );
        }
        // A sorted fold without caching leaves a stored directory in bucket order (Irmin:
        // `~cache:false`, "bucket -> bucket"); larch keeps no cached map (Irmin's `~cache:true`
        // makes later listings sorted: docs/list-order.md).
        let said = case.modified["unmodified_fresh_then_fold_sorted_cache_false"].as_str().unwrap();
        let sorted_fold: Vec<Vec<u8>> =
            checkout.list_sorted(path, 0, None).unwrap().into_iter().map(|(n, _)| n.to_vec()).collect();
        assert_eq!(sorted_fold, sorted(case.full.clone()), "{at}: a sorted fold is sorted");
        assert!(said == "bucket -> bucket" || said.starts_with("sorted (= bucket order)"), "{at}: {said}");
        assert_eq!(listed(&checkout, path, 0, None), case.full, "{at}: after a sorted fold");
    }
    // Committed, the changed tree lists in the layout of its new names again.
    let mut repo = MemoryRepo::new();
    let (mut built, _) = build_tree(&store, &head, repo.source().clone(), None, &mut |_| {}).unwrap();
    let big = cases.iter().max_by_key(|c| c.full.len()).unwrap();
    let mut removed = big.path.clone();
    removed.push(big.full[0].clone());
    built.remove(&removed).unwrap();
    assert_eq!(listed(&built, &big.path, 0, None), sorted(big.full[1..].to_vec()));
    let made = repo.commit(&built, &[], CommitInfo::tezos(0, "removed one")).unwrap();
    let relisted = listed(&repo.checkout(&made).unwrap(), &big.path, 0, None);
    assert_eq!(sorted(relisted.clone()), sorted(big.full[1..].to_vec()));
    assert_ne!(relisted, sorted(relisted.clone()), "{} entries: bucket order", relisted.len());
    assert_eq!(listed(&built, &big.path, 0, None), relisted, "the committed tree lists as its checkout");
}
