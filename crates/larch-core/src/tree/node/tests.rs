//! Tests of the node types (`node.rs`).

use super::*;
use crate::schema;

#[test]
fn layouts_stay_compact() {
    // A node's key cache costs what a `u64` offset did, a node stays within the allocator's
    // 112-byte size class, and references stay 48 bytes.
    assert_eq!(std::mem::size_of::<ObjectKey>(), 12);
    assert!(std::mem::size_of::<Node>() <= 112, "{}", std::mem::size_of::<Node>());
    assert_eq!(std::mem::size_of::<NodeRef>(), 48);
    assert_eq!(std::mem::size_of::<ContentsRef>(), 48);
    assert!(std::mem::size_of::<Entry>() <= 56);
    // A name holds its buffer (a thin pointer: the length is in the allocation), its place there
    // and its first eight bytes; a directory entry is 80 bytes.
    assert_eq!(std::mem::size_of::<Name>(), 24);
    assert_eq!(std::mem::size_of::<(Name, Entry)>(), 80);
    let key = ObjectKey::new(StoreId::fresh(), (7 << 40) | 5);
    assert_eq!(key.offset(), (7 << 40) | 5);
}

#[test]
fn contents_small_and_large() {
    assert!(std::mem::size_of::<Contents>() <= 64);
    for len in [0, 1, SMALL_CONTENTS, SMALL_CONTENTS + 1, 1000] {
        let bytes: Vec<u8> = (0..len).map(|i| i as u8).collect();
        let a = Contents::new(bytes.clone());
        let b = Contents::from_slice(&bytes);
        assert_eq!(a.as_bytes(), &bytes[..]);
        assert_eq!(&*b, &bytes[..]);
        assert_eq!(a.hash(), b.hash());
    }
    assert_eq!(Contents::default().as_bytes(), b"");
}

#[test]
fn shared_names_and_values_are_pieces_of_one_buffer() {
    let buffer = SharedBytes::new(b"balance\x01\x02counter");
    let name = buffer.name(0..7).unwrap();
    let value = buffer.value(7..9).unwrap();
    assert_eq!(name.as_bytes(), b"balance");
    assert_eq!(value.as_bytes(), b"\x01\x02");
    let entry = ContentsRef::Inline(value.clone());
    assert_eq!(entry.hash(), schema::contents_hash(b"\x01\x02"));
    assert_eq!(entry.hash(), ContentsRef::Mem(value.to_contents()).hash());
    assert_eq!(entry.held_bytes(), Some(&b"\x01\x02"[..]));
    assert!(!entry.hash_is_cached());
    assert_eq!(buffer.name(9..16).unwrap(), Name::from("counter"));
    assert!(buffer.value(9..17).is_none(), "a piece past the end");
    #[allow(clippy::reversed_empty_ranges)]
    let reversed = 5..4;
    assert!(buffer.name(reversed).is_none(), "a reversed piece");
    assert_eq!(buffer.value(16..16).unwrap().as_bytes(), b"");
    // Same size as the other references: an inline value costs no more than a pointer.
    assert_eq!(std::mem::size_of::<ContentsRef>(), 48);
}

#[test]
fn a_copy_for_change_remembers_its_origin_until_it_is_stored() {
    let store = StoreId::fresh();
    let original =
        Arc::new(Node::new(NodeBody::Flat(vec![(Name::from("a"), Entry::contents(b"1".to_vec()))])));
    original.set_stored_key(ObjectKey::new(store, 40));
    original.note_record_chain(ObjectKey::new(store, 40), 3);
    assert_eq!(original.record_chain(), Some(3));
    let mut copy = original.copy_for_change();
    assert!(copy.origin().is_some_and(|origin| Arc::ptr_eq(&origin, &original)));
    // The copy describes the same value until changed: same key, same chain.
    assert_eq!(copy.record_chain(), Some(3));
    if let NodeBody::Flat(entries) = copy.body_mut() {
        entries.push((Name::from("b"), Entry::contents(b"2".to_vec())));
    }
    // Changed: no key, no chain, but the origin stays (the store patches on it).
    assert_eq!((copy.stored_key(), copy.record_chain()), (None, None));
    assert!(copy.origin().is_some());
    // A chain noted for another key than the node's is not taken.
    copy.set_stored_key(ObjectKey::new(store, 90));
    copy.note_record_chain(ObjectKey::new(store, 40), 5);
    assert_eq!(copy.record_chain(), None);
    copy.note_record_chain(ObjectKey::new(store, 90), 4);
    assert_eq!(copy.record_chain(), Some(4));
    // Stored: the origin is forgotten, so that versions never chain in memory.
    assert!(copy.origin().is_none());
    assert_eq!(Arc::strong_count(&original), 1);
    // A plain clone has no origin.
    assert!(Node::clone(&original.copy_for_change()).origin().is_none());
}

#[test]
fn split_names_behave_as_names() {
    let names = Name::split(b"abcabd", &[3, 6, 6]).unwrap();
    assert_eq!(names[0].as_bytes(), b"abc");
    assert_eq!(names[1], Name::from("abd"));
    assert_eq!(names[2].as_bytes(), b"");
    assert!(names[0] < names[1] && names[2] < names[0]);
    assert_eq!(names[0], Name::new(b"abc"));
    use std::hash::BuildHasher;
    let state = std::hash::RandomState::new();
    assert_eq!(state.hash_one(&names[1]), state.hash_one(Name::from("abd")));
    assert!(Name::split(b"abc", &[2, 1]).is_none());
    assert!(Name::split(b"abc", &[4]).is_none());
}

/// A directory holding one value, stored at `offset` of `store` with its hash computed.
fn stored_dir(store: StoreId, offset: u64, value: &[u8]) -> Arc<Node> {
    let node = Node::new(NodeBody::Flat(vec![(Name::from("v"), Entry::contents(value.to_vec()))]));
    node.hash();
    node.set_stored_key(ObjectKey::new(store, offset));
    Arc::new(node)
}

/// An inode tree of one bucket holding `child`, stored at `offset` of `store` with its hash
/// computed.
fn stored_inode(store: StoreId, offset: u64, child: Arc<Node>) -> Arc<Node> {
    let node = Node::new(NodeBody::Tree(InodeTree {
        depth: 0,
        length: 1,
        children: vec![(3, NodeRef::Mem(child))],
    }));
    node.hash();
    node.set_stored_key(ObjectKey::new(store, offset));
    Arc::new(node)
}

#[test]
fn a_detached_copy_keeps_only_recent_nodes_in_memory() {
    let store = StoreId::fresh();
    let old = stored_dir(store, 100, b"old");
    let recent = stored_dir(store, 5000, b"recent");
    let unstored = Arc::new(Node::new(NodeBody::Flat(Vec::new())));
    let other_store = stored_dir(StoreId::fresh(), 6000, b"other");
    let below_from = stored_dir(store, 10, b"collected");
    let inode = stored_inode(store, 5200, stored_dir(store, 5100, b"leaf"));
    // An inode tree and a directory stored before the recent nodes, after the recent inodes.
    let older_inode = stored_inode(store, 3000, stored_dir(store, 2900, b"leaf"));
    let children = [
        ("a", old.clone()),
        ("b", recent.clone()),
        ("c", unstored),
        ("d", other_store),
        ("e", below_from),
        ("f", inode),
        ("g", older_inode),
        ("h", stored_dir(store, 3000, b"older")),
    ];
    let parent = Node::new(NodeBody::Flat(
        children
            .iter()
            .map(|(name, node)| (Name::from(*name), Entry::Node(NodeRef::Mem(node.clone()))))
            .collect(),
    ));
    let in_memory = |copy: &Node| -> Vec<bool> {
        let NodeBody::Flat(entries) = copy.body() else { panic!("not flat") };
        entries.iter().map(|(_, entry)| matches!(entry, Entry::Node(NodeRef::Mem(_)))).collect()
    };
    let held = HeldKeys { store, from: 50, recent_from: 4000, recent_inodes_from: 2000 };
    let copy = parent.detached_copy(held);
    // Old: by key; recent (a directory, an inode `Tree`): in memory; not stored, another store's,
    // or below the held range: in memory; the inode tree within the inodes' longer window: in
    // memory, the directory stored at the same position: by key.
    assert_eq!(in_memory(&copy), [false, true, true, true, true, true, true, false]);
    assert_eq!(copy.hash(), parent.hash());
    let NodeBody::Flat(entries) = copy.body() else { panic!("not flat") };
    let Some((_, Entry::Node(NodeRef::Stored { hash, key }))) = entries.first() else {
        panic!("the old directory is not referred to by key")
    };
    assert_eq!((*hash, *key), (old.hash(), ObjectKey::new(store, 100)));
    // The inodes' window no longer than the nodes': the older inode tree by key too.
    let copy = parent.detached_copy(HeldKeys { recent_inodes_from: 4000, ..held });
    assert_eq!(in_memory(&copy), [false, true, true, true, true, true, false, false]);
    // No recent window: every stored node of the range by key.
    let copy = parent.detached_copy(HeldKeys { recent_from: u64::MAX, recent_inodes_from: u64::MAX, ..held });
    assert_eq!(in_memory(&copy), [false, false, true, true, true, false, false, false]);
    assert_eq!(recent.stored_key(), Some(ObjectKey::new(store, 5000)));
    // The children referred to by key are those told to the caller (the tree's source is
    // offered them), each once.
    let mut told = Vec::new();
    let copy = parent.detached_copy_noting(held, &mut |node| told.push(node.clone()));
    assert_eq!(in_memory(&copy), [false, true, true, true, true, true, true, false]);
    let expected = [&children[0].1, &children[7].1];
    assert_eq!(told.len(), expected.len());
    assert!(told.iter().zip(expected).all(|(told, expected)| Arc::ptr_eq(told, expected)));
}

#[test]
fn names_compare_as_their_bytes() {
    use larch_testkit::rand::Rng;
    let (mut rng, seed) = larch_testkit::seeded_rng("names_compare_as_their_bytes", 0x6e61_6d65);
    // Pairs sharing a prefix of 0 to 20 bytes, then 0 to 12 more bytes each from a small alphabet
    // (so that equal bytes, prefixes and equal names are frequent), across the 8-byte steps.
    for _ in 0..200_000 {
        let prefix: Vec<u8> = (0..rng.random_range(0..=20)).map(|_| rng.random_range(0..4u8) * 85).collect();
        let mut a = prefix.clone();
        let mut b = prefix;
        a.extend((0..rng.random_range(0..=12)).map(|_| rng.random_range(0..4u8) * 85));
        b.extend((0..rng.random_range(0..=12)).map(|_| rng.random_range(0..4u8) * 85));
        assert_eq!(compare_name_bytes(&a, &b), a.cmp(&b), "seed {seed}: {a:?} {b:?}");
        assert_eq!(Name::new(&a).cmp(&Name::new(&b)), a.cmp(&b), "seed {seed}");
        // By the prefixes the names hold (zero bytes included), alone or pieces of one buffer.
        assert_eq!(Name::new(&b).cmp_bytes(&a, name_prefix(&a)), b.cmp(&a), "seed {seed}");
        assert_eq!(Name::new(&a) == Name::new(&b), a == b, "seed {seed}");
        let joined = [a.clone(), b.clone()].concat();
        let pieces = Name::split(&joined, &[a.len(), joined.len()]).unwrap();
        assert_eq!(pieces[0].cmp(&pieces[1]), a.cmp(&b), "seed {seed}");
        assert_eq!(pieces[0] == pieces[1], a == b, "seed {seed}");
        assert!(pieces[1] == Name::new(&b), "seed {seed}");
    }
}

/// The hash of `node` from the schema's one-at-a-time functions, recursively: a reference for the
/// batched hashing of `node_hash.rs` (it reads no cache the code under test sets).
fn reference_hash(node: &Node) -> Hash {
    fn entry_hash(entry: &Entry) -> Hash {
        match entry {
            Entry::Contents(ContentsRef::Stored { hash, .. }) | Entry::Node(NodeRef::Stored { hash, .. }) => {
                *hash
            }
            Entry::Contents(contents) => schema::contents_hash(contents.held_bytes().unwrap()),
            Entry::Node(NodeRef::Mem(child)) => reference_hash(child),
        }
    }
    let triples = |entries: &Entries| -> Vec<(Vec<u8>, Kind, Hash)> {
        entries.iter().map(|(name, entry)| (name.to_vec(), entry.kind(), entry_hash(entry))).collect()
    };
    match node.body() {
        NodeBody::Flat(entries) => {
            let triples = triples(entries);
            schema::flat_node_hash(triples.len(), triples.iter().map(|(n, k, h)| (&n[..], *k, *h)))
        }
        NodeBody::Values(entries) => {
            let triples = triples(entries);
            schema::values_inode_hash(triples.len(), triples.iter().map(|(n, k, h)| (&n[..], *k, *h)))
        }
        NodeBody::Tree(tree) => {
            let pointers: Vec<(u8, Hash)> = tree
                .children
                .iter()
                .map(|(index, child)| (*index, entry_hash(&Entry::Node(child.clone()))))
                .collect();
            schema::tree_inode_hash(tree.depth, tree.length, pointers.len(), pointers.into_iter())
        }
    }
}

#[test]
fn nodes_hashed_together_hash_as_each_alone() {
    // More directories than a batch holds, each with every kind of entry: values in memory
    // (uncached hash; a few too long to be batched), inline pieces of a shared buffer, stored values and directories, and an
    // in-memory sub-directory, itself holding an inode trie for some.
    let store = StoreId::fresh();
    let dirs: Vec<Arc<Node>> = (0..200u32)
        .map(|i| {
            let text = format!("v{i}-inline-{}", "x".repeat(i as usize % 150));
            let buffer = SharedBytes::new(text.as_bytes());
            let mut sub = crate::Tree::empty();
            for j in 0..(if i % 20 == 0 { 300 } else { 1 + i % 5 }) {
                sub.add(&[format!("f{j}")], format!("{i}/{j}").into_bytes()).unwrap();
            }
            let Entry::Node(sub) = sub.root().clone() else { panic!("a directory") };
            let entries = vec![
                (Name::from("d"), Entry::Node(sub)),
                (Name::from("i"), Entry::Contents(ContentsRef::Inline(buffer.value(1..text.len()).unwrap()))),
                (
                    Name::from("k"),
                    Entry::Node(NodeRef::Stored { hash: Hash([i as u8; 32]), key: ObjectKey::new(store, 8) }),
                ),
                (
                    Name::from("m"),
                    Entry::contents(vec![i as u8; if i % 50 == 0 { 5000 } else { i as usize % 300 }]),
                ),
                (
                    Name::from("s"),
                    Entry::Contents(ContentsRef::Stored {
                        hash: Hash([7; 32]),
                        key: ObjectKey::new(store, 9),
                    }),
                ),
            ];
            Arc::new(Node::new(NodeBody::Flat(entries)))
        })
        .collect();
    let expected: Vec<Hash> = dirs.iter().map(|dir| reference_hash(dir)).collect();
    Node::hash_all(&dirs);
    for (i, (dir, expected)) in dirs.iter().zip(&expected).enumerate() {
        assert_eq!(dir.cached_hash(), Some(*expected), "directory {i}");
        let NodeBody::Flat(entries) = dir.body() else { panic!("flat") };
        let Some((_, Entry::Contents(ContentsRef::Mem(value)))) = entries.get(3) else { panic!("m") };
        assert_eq!(value.hash.get(), Some(&schema::contents_hash(value.as_bytes())), "directory {i}: cached");
    }
    // And one at a time, for a node whose children are hashed already or not.
    let fresh =
        Node::new(NodeBody::Flat(vec![(Name::from("a"), Entry::Node(NodeRef::Mem(dirs[3].clone())))]));
    assert_eq!(fresh.hash(), reference_hash(&fresh));
    let unhashed =
        Arc::new(Node::new(NodeBody::Flat(vec![(Name::from("v"), Entry::contents(b"1".to_vec()))])));
    let parent = Node::new(NodeBody::Flat(vec![
        (Name::from("d"), Entry::Node(NodeRef::Mem(unhashed.clone()))),
        (Name::from("v"), Entry::contents(b"2".to_vec())),
    ]));
    assert_eq!(node_hash::hash_alone(&parent), reference_hash(&parent), "alone, its child unhashed");
    assert_eq!(unhashed.cached_hash(), Some(reference_hash(&unhashed)));
}

#[test]
fn a_tree_of_shared_copies_is_hashed_once_per_node() {
    // Each level holds the level below twice (as copies make it): 2^60 paths, 61 nodes. A walk
    // per path would never end; the hash is the chain of the schema's.
    let mut node =
        Arc::new(Node::new(NodeBody::Flat(vec![(Name::from("v"), Entry::contents(b"x".to_vec()))])));
    let mut expected =
        schema::flat_node_hash(1, [(&b"v"[..], Kind::Contents, schema::contents_hash(b"x"))].into_iter());
    for _ in 0..60 {
        let entries = vec![
            (Name::from("a"), Entry::Node(NodeRef::Mem(node.clone()))),
            (Name::from("b"), Entry::Node(NodeRef::Mem(node.clone()))),
        ];
        node = Arc::new(Node::new(NodeBody::Flat(entries)));
        expected = schema::flat_node_hash(
            2,
            [(&b"a"[..], Kind::Node, expected), (&b"b"[..], Kind::Node, expected)].into_iter(),
        );
    }
    assert_eq!(node.hash(), expected);
}

#[test]
fn a_copy_of_every_kind_of_entry_is_the_same_value() {
    // Copies hint the lines of the counts they increment first (`prefetch::copy_targets`): each
    // kind of entry, a name owning its buffer and names sharing one, and inode children.
    let store = StoreId::fresh();
    let contents = Arc::new(Contents::from_slice(b"in memory"));
    let child = stored_dir(store, 100, b"child");
    let shared = SharedBytes::new(b"abinline");
    let (Some(a), Some(b), Some(inline)) = (shared.name(0..1), shared.name(1..2), shared.value(2..8)) else {
        panic!("pieces of the shared buffer")
    };
    let stored_contents = ContentsRef::Stored { hash: Hash([7; 32]), key: ObjectKey::new(store, 7) };
    let stored_node = NodeRef::Stored { hash: Hash([8; 32]), key: ObjectKey::new(store, 8) };
    let entries = vec![
        (a, Entry::Contents(ContentsRef::Mem(contents.clone()))),
        (b, Entry::Contents(ContentsRef::Inline(inline))),
        (Name::from("c"), Entry::Contents(stored_contents)),
        (Name::from("d"), Entry::Node(NodeRef::Mem(child.clone()))),
        (Name::from("e"), Entry::Node(stored_node.clone())),
    ];
    let flat = Node::new(NodeBody::Flat(entries));
    let tree = Node::new(NodeBody::Tree(InodeTree {
        depth: 0,
        length: 300,
        children: vec![(1, NodeRef::Mem(child.clone())), (2, stored_node)],
    }));
    let in_memory_children = |node: &Node| -> usize {
        match node.body() {
            NodeBody::Flat(entries) | NodeBody::Values(entries) => {
                entries.iter().filter(|(_, entry)| matches!(entry, Entry::Node(NodeRef::Mem(_)))).count()
            }
            NodeBody::Tree(tree) => {
                tree.children.iter().filter(|(_, child)| matches!(child, NodeRef::Mem(_))).count()
            }
        }
    };
    for node in [&flat, &tree] {
        let (contents_before, child_before) = (Arc::strong_count(&contents), Arc::strong_count(&child));
        // A clone, a detached copy keeping the child (recent), one referring to it by key.
        let copies = [
            node.clone(),
            node.detached_copy(HeldKeys { store, from: 0, recent_from: 0, recent_inodes_from: 0 }),
            node.detached_copy(HeldKeys {
                store,
                from: 0,
                recent_from: u64::MAX,
                recent_inodes_from: u64::MAX,
            }),
        ];
        for copy in &copies {
            assert_eq!(copy.hash(), node.hash());
        }
        let in_memory: Vec<usize> = copies.iter().map(in_memory_children).collect();
        assert_eq!(in_memory, [1, 1, 0]);
        let per_copy = usize::from(matches!(node.body(), NodeBody::Flat(_)));
        assert_eq!(Arc::strong_count(&contents), contents_before + 3 * per_copy);
        assert_eq!(Arc::strong_count(&child), child_before + 2);
    }
}

/// An inode's children at the buckets whose bits are set in `present`.
fn children_at(present: u32) -> Vec<(u8, NodeRef)> {
    (0..32u8)
        .filter(|b| present & (1 << b) != 0)
        .map(|b| {
            let key = ObjectKey::new(StoreId::fresh(), u64::from(b));
            (b, NodeRef::Stored { hash: crate::Hash([b; 32]), key })
        })
        .collect()
}

proptest::proptest! {
    /// `find_bucket` answers as a binary search does, for any set of present buckets (`present`'s
    /// bits) and any bucket asked, present or not, including one past 31.
    #[test]
    fn find_bucket_agrees_with_a_binary_search(present: u32, bucket in 0u8..40) {
        let children = children_at(present);
        let expected = children.binary_search_by_key(&bucket, |(probe, _)| *probe);
        let tree = InodeTree { depth: 0, length: 0, children };
        proptest::prop_assert_eq!(tree.find_bucket(bucket), expected);
    }
}

#[test]
fn a_full_inode_finds_each_bucket_at_its_index() {
    let mut tree = InodeTree { depth: 0, length: 0, children: children_at(u32::MAX) };
    for b in 0..32u8 {
        assert_eq!(tree.find_bucket(b), Ok(usize::from(b)));
    }
    // Without bucket 3, bucket 5 is at 4 and 3 would go at 3.
    tree.children.remove(3);
    assert_eq!(tree.find_bucket(5), Ok(4));
    assert_eq!(tree.find_bucket(3), Err(3));
    assert_eq!(tree.find_bucket(40), Err(31));
}

/// The number of origins `node` chains in memory.
fn origin_chain(node: &Arc<Node>) -> usize {
    let mut chain = 0;
    let mut node = node.clone();
    while let Some(origin) = node.origin() {
        chain += 1;
        node = origin;
    }
    chain
}

#[test]
fn versions_never_stored_chain_their_origins_at_most_a_bound() {
    // Each version copied from the one before, all kept, none stored (OCaml trees changed again
    // and again): the chain is cut past the bound, so the oldest versions can be freed.
    let first = Arc::new(Node::new(NodeBody::Flat(vec![(Name::from("a"), Entry::contents(b"1".to_vec()))])));
    let mut versions = vec![first.clone()];
    for _ in 0..3 * MAX_UNSTORED_ORIGINS {
        let newest = Arc::new(versions[versions.len() - 1].copy_for_change());
        versions.push(newest);
    }
    let chain = origin_chain(&versions[versions.len() - 1]);
    assert!((1..=MAX_UNSTORED_ORIGINS + 1).contains(&chain), "a chain of {chain} origins");
    drop(versions.drain(1..versions.len() / 2));
    assert_eq!(Arc::strong_count(&first), 2, "the oldest versions are no one's origin any more");
    // Versions between a stored one and the newest (commits being written) keep their chain.
    let store = StoreId::fresh();
    let stored = Arc::new(Node::new(NodeBody::Flat(Vec::new())));
    stored.set_stored_key(ObjectKey::new(store, 40));
    let a = Arc::new(stored.copy_for_change());
    let b = Arc::new(a.copy_for_change());
    let c = Arc::new(b.copy_for_change());
    assert_eq!(origin_chain(&c), 3);
    assert!(c.origin().is_some_and(|origin| Arc::ptr_eq(&origin, &b)));
}
