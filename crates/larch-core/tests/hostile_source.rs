//! A source whose nodes are not a well-formed trie (as a crafted store could serve): every walk
//! down an inode trie checks the depth of each inner inode, so a self-referencing "trie" is a typed
//! error, not an endless recursion.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_core::{
    Contents, Entry, Hash, InodeTree, LoadError, Node, NodeBody, NodeRef, ObjectKey, ObjectSource, StoreId,
    Tree, TreeError,
};
use std::sync::Arc;

/// Serves, for every key, a depth-0 inode whose 32 buckets all point at that same key.
#[derive(Debug)]
struct Loop;

impl ObjectSource for Loop {
    fn load_node(&self, key: ObjectKey, hash: &Hash) -> Result<Arc<Node>, LoadError> {
        let child = NodeRef::Stored { hash: *hash, key };
        let children = (0..32).map(|bucket| (bucket, child.clone())).collect();
        let body = NodeBody::Tree(InodeTree { depth: 0, length: 300, children });
        Ok(Arc::new(Node::with_hash(body, *hash)))
    }
    fn load_contents(&self, key: ObjectKey, hash: &Hash) -> Result<Arc<Contents>, LoadError> {
        Err(LoadError { what: "contents", key, hash: *hash, reason: "no contents".into() })
    }
}

#[test]
fn a_self_referencing_trie_is_malformed_for_every_walk() {
    let store = StoreId::fresh();
    let root = Entry::Node(NodeRef::Stored { hash: Hash([1; 32]), key: ObjectKey::new(store, 7) });
    let mut tree = Tree::from_entry(root, Arc::new(Loop));
    let malformed = |result: Result<(), TreeError>| {
        assert!(matches!(result, Err(TreeError::Malformed(_))), "{result:?}");
    };
    malformed(tree.find(&["x"]).map(|_| ()));
    malformed(tree.list(&[] as &[&str], 0, None).map(|_| ()));
    malformed(tree.add(&["x"], b"v".to_vec()));
    malformed(tree.remove(&["x", "y"]));
}

#[test]
fn copying_a_self_referencing_trie_into_a_repository_fails() {
    let store = StoreId::fresh();
    let root = Entry::Node(NodeRef::Stored { hash: Hash([1; 32]), key: ObjectKey::new(store, 7) });
    let tree = Tree::from_entry(root, Arc::new(Loop));
    let mut repo = larch_core::MemoryRepo::new();
    let error = repo.commit(&tree, &[], larch_core::CommitInfo::tezos(0, "loop")).unwrap_err();
    assert!(error.to_string().contains("wrong shape or depth"), "{error}");
    assert_eq!(repo.commit_count(), 0);
}
