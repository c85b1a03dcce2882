//! Edge cases of the tree API and of hashing: extreme values and names, deep paths, the root path,
//! contents in the way, no-op removals and copies, and list windows past the end. Expected hashes
//! come from the independent reference implementation in `common::reference`.

// Test helpers outside `#[test]` functions panic on failure too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::reference::{self, Triple};
use larch_core::{CommitInfo, Kind, MemoryRepo, Tree};

const ROOT: &[&[u8]] = &[];

fn contents_triple(name: &[u8], value: &[u8]) -> Triple {
    (name.to_vec(), false, reference::contents_hash(value))
}

#[test]
fn empty_value_and_values_up_to_70_kb() {
    let mut repo = MemoryRepo::new();
    let mut tree = repo.empty_tree();
    let sizes = [0usize, 1, 31, 32, 33, 127, 128, 4096, 65_535, 65_536, 70 * 1024];
    let value = |n: usize| (0..n).map(|k| (k * 7 % 251) as u8).collect::<Vec<u8>>();
    let mut triples = Vec::new();
    for n in sizes {
        let name = format!("v{n}");
        tree.add(&[&name], value(n)).unwrap();
        assert_eq!(tree.find(&[&name]).unwrap().unwrap().len(), n);
        triples.push(contents_triple(name.as_bytes(), &value(n)));
    }
    // The empty value hashes like the empty directory (same pre-image, spec §8.5) but stays contents.
    let empty = tree.find_tree(&["v0"]).unwrap().unwrap();
    assert_eq!(empty.kind(), Kind::Contents);
    assert_eq!(empty.hash(), Tree::empty().hash());
    assert!(tree.mem(&["v0"]).unwrap());
    assert_eq!(tree.hash().0, reference::dir_hash(&triples));
    let commit = repo.commit(&tree, &[], CommitInfo::tezos(0, "")).unwrap();
    let back = repo.checkout(&commit).unwrap();
    for n in sizes {
        assert_eq!(&**back.find(&[format!("v{n}")]).unwrap().unwrap(), &value(n)[..], "size {n}");
    }
    assert!(repo.source().contents_loads() > 0, "large values are loaded lazily");
}

#[test]
fn names_of_0_127_128_and_300_bytes_and_non_utf8() {
    let names: Vec<Vec<u8>> = vec![
        Vec::new(),
        vec![b'n'; 127],
        vec![b'n'; 128],
        vec![b'n'; 300],
        vec![0xff, 0xfe, 0x00],
        vec![0x80],
        vec![0xc3],
        b"\x00".to_vec(),
    ];
    let mut tree = Tree::empty();
    let mut triples = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let value = format!("{i}").into_bytes();
        tree.add(&[name], value.clone()).unwrap();
        triples.push(contents_triple(name, &value));
    }
    for (i, name) in names.iter().enumerate() {
        assert_eq!(&**tree.find(&[name]).unwrap().unwrap(), format!("{i}").as_bytes(), "name {name:?}");
    }
    assert_eq!(tree.hash().0, reference::dir_hash(&triples));
    // Listing is bytewise: the empty name first, 0xff last.
    let listed: Vec<Vec<u8>> =
        tree.list(ROOT, 0, None).unwrap().into_iter().map(|(n, _)| n.to_vec()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(listed, sorted);
    assert_eq!(listed[0], Vec::<u8>::new());
    assert_eq!(listed.last().unwrap(), &vec![0xff, 0xfe, 0x00]);
    // A 300-byte name needs a two-byte LEB128 length in the flat pre-image: `ac 02`.
    let pre = reference::flat_pre_image(&[contents_triple(&[b'n'; 300], b"3")]);
    assert_eq!(&pre[16..18], &[0xac, 0x02]);
    let mut single = Tree::empty();
    single.add(&[vec![b'n'; 300]], b"3".to_vec()).unwrap();
    assert_eq!(single.hash().0, reference::blake(&pre));
}

#[test]
fn paths_20_levels_deep() {
    let path: Vec<String> = (0..20).map(|i| format!("level{i}")).collect();
    let mut tree = Tree::empty();
    tree.add(&path, b"bottom".to_vec()).unwrap();
    let mut expected = reference::contents_hash(b"bottom");
    let mut is_node = false;
    for step in path.iter().rev() {
        expected = reference::dir_hash(&[(step.as_bytes().to_vec(), is_node, expected)]);
        is_node = true;
    }
    assert_eq!(tree.hash().0, expected);
    assert!(tree.mem(&path).unwrap());
    assert!(tree.mem_tree(&path[..10]).unwrap());
    assert!(!tree.mem(&path[..10]).unwrap());
    // Removing the leaf prunes all 20 directories.
    tree.remove(&path).unwrap();
    assert!(tree.is_empty().unwrap());
    assert_eq!(tree.hash(), Tree::empty().hash());
}

#[test]
fn remove_of_the_root_path_empties_the_tree() {
    let mut tree = Tree::empty();
    tree.add(&["a", "b"], b"1".to_vec()).unwrap();
    tree.add(&["c"], b"2".to_vec()).unwrap();
    let before = tree.clone();
    tree.remove(ROOT).unwrap();
    assert!(tree.is_empty().unwrap());
    assert_eq!(tree.hash().0, reference::dir_hash(&[]));
    assert_eq!(tree.length(ROOT).unwrap(), 0);
    assert_eq!(before.length(ROOT).unwrap(), 2, "the clone is untouched");
    // On a contents root too.
    let mut contents = Tree::of_contents(b"x".to_vec());
    contents.remove(ROOT).unwrap();
    assert_eq!(contents.kind(), Kind::Node);
    assert!(contents.is_empty().unwrap());
}

#[test]
fn add_through_contents_replaces_it_with_a_directory() {
    let mut tree = Tree::empty();
    tree.add(&["a"], b"file".to_vec()).unwrap();
    tree.add(&["a", "b", "c"], b"deep".to_vec()).unwrap();
    assert!(!tree.mem(&["a"]).unwrap());
    assert!(tree.mem_tree(&["a"]).unwrap());
    assert_eq!(&**tree.find(&["a", "b", "c"]).unwrap().unwrap(), b"deep");
    let b = reference::dir_hash(&[contents_triple(b"c", b"deep")]);
    let a = reference::dir_hash(&[(b"b".to_vec(), true, b)]);
    assert_eq!(tree.hash().0, reference::dir_hash(&[(b"a".to_vec(), true, a)]));
    // A contents root is replaced too.
    let mut root = Tree::of_contents(b"x".to_vec());
    root.add(&["k"], b"v".to_vec()).unwrap();
    assert_eq!(root.hash().0, reference::dir_hash(&[contents_triple(b"k", b"v")]));
    // And `add` at the root path makes the whole tree contents.
    tree.add(ROOT, b"whole".to_vec()).unwrap();
    assert_eq!(tree.kind(), Kind::Contents);
    assert_eq!(tree.hash().0, reference::contents_hash(b"whole"));
}

#[test]
fn remove_of_a_missing_path_is_a_no_op() {
    let mut tree = Tree::empty();
    tree.add(&["a", "b"], b"1".to_vec()).unwrap();
    tree.add(&["c"], b"2".to_vec()).unwrap();
    let hash = tree.hash();
    for missing in [&["x"][..], &["a", "x"], &["a", "b", "c"], &["c", "d"], &["a", "b", "c", "d"]] {
        tree.remove(missing).unwrap();
        assert_eq!(tree.hash(), hash, "remove {missing:?}");
        assert_eq!(tree.length(ROOT).unwrap(), 2);
    }
    // Removing the only entry of a sub-directory prunes it.
    tree.remove(&["a", "b"]).unwrap();
    assert!(!tree.mem_tree(&["a"]).unwrap());
    assert_eq!(tree.hash().0, reference::dir_hash(&[contents_triple(b"c", b"2")]));
}

#[test]
fn add_tree_of_an_empty_tree_removes() {
    let mut tree = Tree::empty();
    tree.add(&["a", "b"], b"1".to_vec()).unwrap();
    tree.add(&["c"], b"2".to_vec()).unwrap();
    tree.add_tree(&["a", "b"], &Tree::empty()).unwrap();
    assert!(!tree.mem_tree(&["a"]).unwrap(), "emptied parent is pruned");
    assert_eq!(tree.hash().0, reference::dir_hash(&[contents_triple(b"c", b"2")]));
    // At a missing path: nothing happens, no empty directory appears.
    let hash = tree.hash();
    tree.add_tree(&["new", "dir"], &Tree::empty()).unwrap();
    assert_eq!(tree.hash(), hash);
    assert!(!tree.mem_tree(&["new"]).unwrap());
}

#[test]
fn copy_of_a_missing_source_returns_false() {
    let mut tree = Tree::empty();
    tree.add(&["a", "b"], b"1".to_vec()).unwrap();
    let hash = tree.hash();
    assert!(!tree.copy(&["missing"], &["a"]).unwrap());
    assert!(!tree.copy(&["a", "b", "c"], &["z"]).unwrap(), "through contents");
    assert_eq!(tree.hash(), hash);
    assert!(tree.copy(&["a"], &["z"]).unwrap());
    assert_eq!(
        tree.find_tree(&["z"]).unwrap().unwrap().hash(),
        tree.find_tree(&["a"]).unwrap().unwrap().hash()
    );
}

#[test]
fn list_offset_and_length_beyond_the_end() {
    let mut tree = Tree::empty();
    let names: Vec<String> = (0..300).map(|i| format!("{i:03}")).collect();
    for name in &names {
        tree.add(&["big", name.as_str()], name.clone().into_bytes()).unwrap();
    }
    tree.add(&["small", "x"], b"1".to_vec()).unwrap();
    let list = |path: &[&str], offset, length| -> Vec<String> {
        tree.list(path, offset, length)
            .unwrap()
            .into_iter()
            .map(|(name, _)| String::from_utf8(name.to_vec()).unwrap())
            .collect()
    };
    assert_eq!(list(&["big"], 0, None), names, "inode directories list sorted");
    assert_eq!(list(&["big"], 290, Some(50)), names[290..].to_vec());
    assert_eq!(list(&["big"], 300, None), Vec::<String>::new());
    assert_eq!(list(&["big"], 1000, Some(5)), Vec::<String>::new());
    assert_eq!(list(&["big"], 5, Some(0)), Vec::<String>::new());
    assert_eq!(list(&["small"], 1, Some(10)), Vec::<String>::new());
    assert_eq!(list(&["small"], 0, Some(10)), vec!["x".to_string()]);
    assert_eq!(list(&["small", "x"], 0, None), Vec::<String>::new(), "contents list as empty");
    assert_eq!(list(&["missing"], 0, None), Vec::<String>::new());
    assert_eq!(tree.length(&["big"]).unwrap(), 300);
    assert_eq!(tree.length(&["small", "x"]).unwrap(), 0);
}

#[test]
fn contents_hash_of_every_length_up_to_300() {
    // Crosses the one-block fast path of `schema::contents_hash` (pre-images up to 128 bytes)
    // and several block boundaries of the streaming path.
    for len in 0..=300usize {
        let value: Vec<u8> = (0..len).map(|k| (k * 13 + len) as u8).collect();
        let expected = reference::contents_hash(&value);
        assert_eq!(larch_core::schema::contents_hash(&value).0, expected, "length {len}");
        assert_eq!(Tree::of_contents(value.clone()).hash().0, expected, "length {len} (tree)");
        let pre = larch_core::schema::contents_pre_image(&value);
        assert_eq!(reference::blake(&pre), expected, "length {len} (pre-image)");
    }
}
