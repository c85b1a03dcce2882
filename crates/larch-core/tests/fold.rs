//! `Tree::walk`, Octez's `fold ?depth ~order`: directories before their entries, Irmin's depth
//! rules, Irmin's listing order (`Tree::list`) or sorted. The OCaml bindings' tests compare it
//! with `larch ls` on a store as well (ocaml/test/test_larch.ml).

// Test helpers outside `#[test]` functions panic on failure too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_core::{CommitInfo, Depth, MemoryRepo, Order, Tree};

fn committed() -> Tree {
    let mut repo = MemoryRepo::new();
    let mut tree = repo.empty_tree();
    for i in 0..100 {
        tree.add(&["big", &format!("k{i}")], format!("{i}").into_bytes()).unwrap();
    }
    tree.add(&["a", "b", "c"], b"deep".to_vec()).unwrap();
    tree.add(&["top"], b"t".to_vec()).unwrap();
    let commit = repo.commit(&tree, &[], CommitInfo::tezos(0, "fold")).unwrap();
    repo.checkout(&commit).unwrap()
}

fn walk(tree: &Tree, path: &[&str], depth: Option<Depth>, order: Order) -> Vec<String> {
    tree.walk(path, depth, order)
        .unwrap()
        .map(|item| {
            let (path, _) = item.unwrap();
            let steps: Vec<String> =
                path.iter().map(|n| String::from_utf8_lossy(n.as_bytes()).into_owned()).collect();
            steps.join("/")
        })
        .collect()
}

fn names(entries: Vec<(larch_core::Name, Tree)>, prefix: &str) -> Vec<String> {
    entries.into_iter().map(|(n, _)| format!("{prefix}{}", String::from_utf8_lossy(n.as_bytes()))).collect()
}

#[test]
fn one_level_is_the_listing_in_both_orders() {
    let tree = committed();
    let layout = names(tree.list(&["big"], 0, None).unwrap(), "");
    let sorted = names(tree.list_sorted(&["big"], 0, None).unwrap(), "");
    assert_ne!(layout, sorted, "100 entries: Irmin's layout order is not the sorted one");
    assert_eq!(walk(&tree, &["big"], Some(Depth::Eq(1)), Order::Undefined), layout);
    assert_eq!(walk(&tree, &["big"], Some(Depth::Eq(1)), Order::Sorted), sorted);
}

#[test]
fn depth_rules_are_irmins() {
    let tree = committed();
    let all = walk(&tree, &[] as &[&str], None, Order::Sorted);
    // Pre-order: the root, then `a`, `a/b`, `a/b/c`, `big`, its 100 values, `top`.
    assert_eq!(all.len(), 1 + 3 + 1 + 100 + 1);
    assert_eq!(&all[..5], ["", "a", "a/b", "a/b/c", "big"]);
    assert_eq!(all.last().map(String::as_str), Some("top"));
    let at = |depth| walk(&tree, &[] as &[&str], Some(depth), Order::Sorted);
    assert_eq!(at(Depth::Eq(0)), [""]);
    assert_eq!(at(Depth::Eq(1)), ["a", "big", "top"]);
    assert_eq!(at(Depth::Eq(3)), ["a/b/c"]);
    assert_eq!(at(Depth::Le(1)), ["", "a", "big", "top"]);
    // Irmin's `Lt n`: a directory at depth n - 1 is reported but not entered.
    assert_eq!(at(Depth::Lt(2)), ["", "a", "big", "top"]);
    assert_eq!(at(Depth::Lt(1)), [""]);
    assert_eq!(at(Depth::Ge(2)).len(), 2 + 100);
    assert_eq!(at(Depth::Gt(2)), ["a/b/c"]);
    assert!(at(Depth::Gt(3)).is_empty());
}

#[test]
fn missing_paths_and_values() {
    let tree = committed();
    assert!(walk(&tree, &["nothing"], None, Order::Undefined).is_empty());
    assert_eq!(walk(&tree, &["top"], None, Order::Undefined), [""]);
    assert!(walk(&tree, &["top"], Some(Depth::Gt(0)), Order::Undefined).is_empty());
}
