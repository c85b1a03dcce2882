//! Helpers shared by the integration tests.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod reference;

use larch_core::{Entry, Node, NodeRef, Tree};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A path as owned steps.
pub type Path = Vec<Vec<u8>>;

/// Reads a file of `tests/data/`.
pub fn data_file(name: &str) -> String {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("cannot read {path}: {err}"))
}

/// The node a reference points to, loading it from the tree's source if it is stored.
pub fn load(tree: &Tree, node: &NodeRef) -> Arc<Node> {
    match node {
        NodeRef::Mem(node) => node.clone(),
        NodeRef::Stored { hash, key } => tree.source().load_node(*key, hash).unwrap(),
    }
}

/// Every (path, value) binding of `tree`, read through the public API only (`list`, `find`).
pub fn bindings(tree: &Tree) -> BTreeMap<Path, Vec<u8>> {
    let mut out = BTreeMap::new();
    if let Entry::Contents(_) = tree.root() {
        let empty: [&[u8]; 0] = [];
        out.insert(Vec::new(), tree.find(&empty).unwrap().unwrap().as_bytes().to_vec());
        return out;
    }
    collect(tree, &mut Vec::new(), &mut out);
    out
}

fn collect(tree: &Tree, prefix: &mut Path, out: &mut BTreeMap<Path, Vec<u8>>) {
    for (name, sub) in tree.list(prefix, 0, None).unwrap() {
        prefix.push(name.as_bytes().to_vec());
        match sub.kind() {
            larch_core::Kind::Contents => {
                let value = tree.find(prefix).unwrap().expect("listed contents must be found");
                out.insert(prefix.clone(), value.as_bytes().to_vec());
            }
            larch_core::Kind::Node => collect(tree, prefix, out),
        }
        prefix.pop();
    }
}

/// A fresh, fully in-memory tree holding `bindings`.
pub fn tree_of(bindings: &BTreeMap<Path, Vec<u8>>) -> Tree {
    let mut tree = Tree::empty();
    for (path, value) in bindings {
        tree.add(path, value.clone()).unwrap();
    }
    tree
}
