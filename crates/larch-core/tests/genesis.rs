//! The Tezos mainnet genesis context (spec §9.5 V16 and §10.1), built with the tree API: the final
//! commit hash is the real chain's; the intermediate hashes and byte counts are those of §10.1.

// Test helpers outside `#[test]` functions panic on failure too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::load;
use larch_core::schema::{self, write_commit_pre_image, write_flat_pre_image};
use larch_core::{CommitInfo, Entry, Hash, MemoryRepo, NodeBody, Tree};

const PROTOCOL: &str = "38ecdef0cd08640f318a9b055f6b0d0c9ae030913a871d9b9d86fb846317da21";

fn genesis_tree(repo: &MemoryRepo) -> Tree {
    let mut tree = repo.empty_tree();
    tree.add(&["data", "version"], b"genesis".to_vec()).unwrap();
    tree.add(&["protocol"], hex::decode(PROTOCOL).unwrap()).unwrap();
    tree.add(&["test_chain"], vec![0u8]).unwrap();
    tree
}

fn flat_pre_image(tree: &Tree) -> Vec<u8> {
    let Entry::Node(root) = tree.root() else { panic!("not a directory") };
    let node = load(tree, root);
    let NodeBody::Flat(entries) = node.body() else { panic!("small directories are flat") };
    let mut out = Vec::new();
    write_flat_pre_image(
        &mut out,
        entries.len(),
        entries.iter().map(|(n, e)| (n.as_bytes(), e.kind(), e.hash())),
    );
    out
}

#[test]
fn mainnet_genesis_context_hash() {
    let mut repo = MemoryRepo::new();
    let tree = genesis_tree(&repo);

    // 1. Contents.
    let contents = [
        (&["data", "version"][..], 15, "91a3d9792ab535f0f2e984b15137cbabfd77e2a6964315cf004950a867c2d774"),
        (&["protocol"][..], 40, "e1edc08dd6381425c13b303f2eae51e2c8e57eb2d6ab88616258d2472fc44683"),
        (&["test_chain"][..], 9, "7a31b1c8e3af61756b336bcfc3b0c292c89b40cc8a5080ba99c45463d110ce8b"),
    ];
    for (path, pre_len, hash) in contents {
        let value = tree.find(path).unwrap().unwrap();
        assert_eq!(schema::contents_pre_image(&value).len(), pre_len, "{path:?}");
        assert_eq!(tree.find_tree(path).unwrap().unwrap().hash().to_hex(), hash, "{path:?}");
    }

    // 2. data/ : one entry, 64-byte pre-image.
    let data = tree.find_tree(&["data"]).unwrap().unwrap();
    let data_pre = flat_pre_image(&data);
    assert_eq!(data_pre.len(), 64);
    assert_eq!(&data_pre[..16], &hex::decode("0000000000000001ff00000000000000").unwrap()[..]);
    assert_eq!(data.hash().to_hex(), "1aa20d77e3ca289630287c51eac79df39ab00bbafe72b55d6131013bf57fb4dc");
    assert_eq!(Hash::of_bytes(&data_pre), data.hash());

    // 3. Root: three entries sorted "data" < "protocol" < "test_chain", 177 bytes.
    let root_pre = flat_pre_image(&tree);
    assert_eq!(root_pre.len(), 177);
    assert_eq!(&root_pre[..8], &3u64.to_be_bytes());
    assert_eq!(&root_pre[8..21], &hex::decode("00000000000000000464617461").unwrap()[..]);
    assert_eq!(tree.hash().to_hex(), "940d07190d7d141d8d534beff66086a1ab7142b1ac16c20be337b07405fbfe4e");

    // 4. Commit: 84 bytes.
    let info = CommitInfo::tezos(1_530_374_852, "Genesis");
    let mut commit_pre = Vec::new();
    write_commit_pre_image(&mut commit_pre, &tree.hash(), &[], &info);
    assert_eq!(commit_pre.len(), 84);
    assert_eq!(&commit_pre[48..56], &hex::decode("000000005b37aac4").unwrap()[..], "date 1530374852");
    let commit = repo.commit(&tree, &[], info).unwrap();
    assert_eq!(Hash::of_bytes(&commit_pre), commit);
    assert_eq!(commit.to_hex(), "3fdf8e76abec28f333dca1964e86404e455f5fc7838012558d9e43e23937ea88");

    // 5. The real chain's value.
    assert_eq!(commit.to_string(), "CoV8SQumiVU9saiu3FVNeDNewJaJH8yWdsGF3WLdsRr2P9S7MzCj");

    // The checked-out (lazy) context reads back the same values and hash.
    let checked_out = repo.checkout(&commit).unwrap();
    assert_eq!(checked_out.hash(), tree.hash());
    assert_eq!(&**checked_out.find(&["data", "version"]).unwrap().unwrap(), b"genesis");
    assert_eq!(hex::encode(&**checked_out.find(&["protocol"]).unwrap().unwrap()), PROTOCOL);
    assert!(repo.source().node_loads() > 0);
}

#[test]
fn genesis_hash_does_not_depend_on_insertion_order() {
    let repo = MemoryRepo::new();
    let mut tree = repo.empty_tree();
    tree.add(&["test_chain"], vec![0u8]).unwrap();
    tree.add(&["data", "version"], b"placeholder".to_vec()).unwrap();
    tree.add(&["protocol"], hex::decode(PROTOCOL).unwrap()).unwrap();
    tree.add(&["data", "version"], b"genesis".to_vec()).unwrap();
    assert_eq!(tree.hash(), genesis_tree(&repo).hash());
}
