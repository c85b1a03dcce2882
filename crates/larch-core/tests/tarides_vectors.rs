//! The Tarides data sets (tarides/tezos-context-hash `data/`, MIT, Copyright 2021 Tarides): 100
//! directories given as (name, kind, child hash) with the hash Irmin computed, and 100 values of
//! OCaml's `Hashtbl.seeded_hash`.

// Test helpers outside `#[test]` functions panic on failure too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::reference;
use common::{data_file, load};
use larch_core::schema::{self, Kind};
use larch_core::{
    Contents, ContentsRef, Entry, Hash, LoadError, Name, Node, NodeBody, NodeRef, ObjectKey, ObjectSource,
    Tree,
};
use serde::Deserialize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Directory {
    hash: String,
    bindings: Vec<Binding>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Binding {
    name: String,
    kind: String,
    hash: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OcamlHash {
    s: String,
    seed: u32,
    ocaml_hash: u32,
}

fn directories() -> Vec<Directory> {
    serde_json::from_str(&data_file("tarides-nodes.json")).unwrap()
}

/// Sorted (name, kind, hash) triples of a directory.
fn triples(dir: &Directory) -> Vec<(Vec<u8>, Kind, Hash)> {
    let mut out: Vec<_> = dir
        .bindings
        .iter()
        .map(|b| {
            let kind = match b.kind.as_str() {
                "Tree" => Kind::Node,
                "Contents" => Kind::Contents,
                other => panic!("unknown kind {other:?}"),
            };
            (b.name.as_bytes().to_vec(), kind, Hash::from_base58(&b.hash).unwrap())
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn hundred_directories_via_schema_functions_and_reference() {
    let dirs = directories();
    assert_eq!(dirs.len(), 100);
    let mut checked = 0;
    for (i, dir) in dirs.iter().enumerate() {
        let entries = triples(dir);
        assert!((5..=247).contains(&entries.len()), "directory {i}: {} entries", entries.len());
        let expected = Hash::from_base58(&dir.hash).unwrap();
        // Names are unique, so sorting defines one order.
        assert!(entries.windows(2).all(|w| w[0].0 < w[1].0), "directory {i}: duplicate names");
        let hash = schema::flat_node_hash(entries.len(), entries.iter().map(|(n, k, h)| (&n[..], *k, *h)));
        assert_eq!(hash, expected, "directory {i}: schema::flat_node_hash");
        let mut pre = Vec::new();
        schema::write_flat_pre_image(
            &mut pre,
            entries.len(),
            entries.iter().map(|(n, k, h)| (&n[..], *k, *h)),
        );
        assert_eq!(Hash::of_bytes(&pre), expected, "directory {i}: flat pre-image");
        let triples: Vec<reference::Triple> =
            entries.iter().map(|(n, k, h)| (n.clone(), *k == Kind::Node, h.0)).collect();
        assert_eq!(reference::dir_hash(&triples), expected.0, "directory {i}: reference implementation");
        checked += 1;
    }
    assert_eq!(checked, 100);
}

/// A source that knows every object only by its reference: it serves, for any key, a one-entry
/// placeholder node carrying the requested hash (enough for `add_tree` to see a non-empty
/// directory), and counts loads. Contents are never loaded.
#[derive(Debug, Default)]
struct PlaceholderSource {
    node_loads: AtomicU64,
}

impl ObjectSource for PlaceholderSource {
    fn load_node(&self, _key: ObjectKey, hash: &Hash) -> Result<Arc<Node>, LoadError> {
        self.node_loads.fetch_add(1, Ordering::Relaxed);
        let body = NodeBody::Flat(vec![(Name::from("placeholder"), Entry::contents(b"x".to_vec()))]);
        Ok(Arc::new(Node::with_hash(body, *hash)))
    }
    fn load_contents(&self, key: ObjectKey, hash: &Hash) -> Result<Arc<Contents>, LoadError> {
        Err(LoadError {
            what: "contents",
            key,
            hash: *hash,
            reason: "placeholder source holds no contents".into(),
        })
    }
}

/// The identity of the keys the placeholder source is handed.
static PLACEHOLDER_STORE: std::sync::LazyLock<larch_core::StoreId> =
    std::sync::LazyLock::new(larch_core::StoreId::fresh);

fn stored_entry(kind: Kind, hash: Hash, key: ObjectKey) -> Entry {
    match kind {
        Kind::Node => Entry::Node(NodeRef::Stored { hash, key }),
        Kind::Contents => Entry::Contents(ContentsRef::Stored { hash, key }),
    }
}

#[test]
fn hundred_directories_via_trees_of_lazy_children() {
    let source = Arc::new(PlaceholderSource::default());
    let dyn_source = source.clone() as Arc<dyn ObjectSource>;
    for (i, dir) in directories().iter().enumerate() {
        let expected = Hash::from_base58(&dir.hash).unwrap();
        let entries = triples(dir);

        // A node assembled directly from lazy references.
        let body: Vec<(Name, Entry)> = entries
            .iter()
            .enumerate()
            .map(|(key, (name, kind, hash))| {
                (Name::new(name), stored_entry(*kind, *hash, ObjectKey::new(*PLACEHOLDER_STORE, key as u64)))
            })
            .collect();
        let direct = Tree::from_entry(
            Entry::Node(NodeRef::Mem(Arc::new(Node::new(NodeBody::Flat(body))))),
            dyn_source.clone(),
        );
        assert_eq!(direct.hash(), expected, "directory {i}: node of lazy references");

        // The same directory grafted entry by entry with `add_tree`, in reverse order.
        let loads_before = source.node_loads.load(Ordering::Relaxed);
        let mut grafted = Tree::empty_with_source(dyn_source.clone());
        for (key, (name, kind, hash)) in entries.iter().enumerate().rev() {
            let child = Tree::from_entry(
                stored_entry(*kind, *hash, ObjectKey::new(*PLACEHOLDER_STORE, key as u64)),
                dyn_source.clone(),
            );
            grafted.add_tree(&[name], &child).unwrap();
        }
        assert_eq!(grafted.hash(), expected, "directory {i}: grafted lazy children");
        let node_count = entries.iter().filter(|(_, kind, _)| *kind == Kind::Node).count() as u64;
        let loads = source.node_loads.load(Ordering::Relaxed) - loads_before;
        // Hashing never loads a child; only add_tree's emptiness check may look at a grafted node.
        assert!(loads <= node_count, "directory {i}: {loads} loads for {node_count} sub-directories");
        assert_eq!(grafted.length(&[] as &[&[u8]]).unwrap(), entries.len() as u64);
        let Entry::Node(root) = grafted.root() else { panic!("root is a directory") };
        assert!(
            matches!(load(&grafted, root).body(), NodeBody::Flat(_)),
            "directory {i}: ≤ 256 entries stay flat"
        );
    }
}

#[test]
fn hundred_ocaml_seeded_hashes() {
    let cases: Vec<OcamlHash> = serde_json::from_str(&data_file("tarides-ocaml-hash.json")).unwrap();
    assert_eq!(cases.len(), 100);
    for case in &cases {
        let ours = larch_core::ocaml_hash::ocaml_seeded_hash(case.seed, case.s.as_bytes());
        assert_eq!(ours, case.ocaml_hash, "seed {} string {:?}", case.seed, case.s);
        assert_eq!(reference::ocaml_hash(case.seed, case.s.as_bytes()), case.ocaml_hash, "reference");
    }
    assert!(cases.iter().any(|case| case.seed >= 1 << 29), "seeds go up to 2^30");
}
