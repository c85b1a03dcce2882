//! [`IrminSource`]: an [`ObjectSource`] over an Irmin store, so that a commit's tree can be
//! browsed lazily as a larch [`Tree`] (keys are Irmin pack offsets; every load is verified).

use crate::error::IrminError;
use crate::store::{IrminCommit, IrminStore};
use larch_core::{Contents, Entry, Hash, LoadError, Node, NodeRef, ObjectKey, ObjectSource, Tree};
use std::sync::Arc;

/// Loads larch nodes and contents from an Irmin store, verifying each one's hash.
#[derive(Clone, Debug)]
pub struct IrminSource {
    store: IrminStore,
}

impl IrminSource {
    /// A source reading `store`.
    pub fn new(store: IrminStore) -> IrminSource {
        IrminSource { store }
    }
}

fn load_error(what: &'static str, key: ObjectKey, hash: &Hash, error: IrminError) -> LoadError {
    LoadError { what, key, hash: *hash, reason: Box::new(error) }
}

impl ObjectSource for IrminSource {
    fn load_node(&self, key: ObjectKey, hash: &Hash) -> Result<Arc<Node>, LoadError> {
        self.store
            .offset_of(key)
            .and_then(|offset| self.store.load_node(offset, hash))
            .map(Arc::new)
            .map_err(|e| load_error("node", key, hash, e))
    }

    fn load_contents(&self, key: ObjectKey, hash: &Hash) -> Result<Arc<Contents>, LoadError> {
        self.store
            .offset_of(key)
            .and_then(|offset| self.store.load_contents(offset, hash))
            .map(Arc::new)
            .map_err(|e| load_error("contents", key, hash, e))
    }
}

impl IrminStore {
    /// The tree of `commit` as a lazy larch tree reading this store (each node is decoded and
    /// verified when first reached).
    pub fn checkout(&self, commit: &IrminCommit) -> Tree {
        let root = Entry::Node(NodeRef::Stored { hash: commit.tree_hash, key: self.key(commit.tree_offset) });
        Tree::from_entry(root, Arc::new(IrminSource::new(self.clone())))
    }
}
