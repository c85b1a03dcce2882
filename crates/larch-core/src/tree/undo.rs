//! Undoing one change of a tree: what a change at a path replaces, captured before the change
//! ([`Tree::undo_point`]), and the change undone on the changed tree or a copy of it
//! ([`Tree::undo`]). The tree undone is the tree before the change: same value, same hash, and its
//! directories on the path get back the stored keys they had (so that they list in Irmin's
//! order again, docs/list-order.md, and a commit does not write them again).
//!
//! It lets a caller that keeps every version of a tree, as OCaml contexts stay values after a
//! change (docs/ocaml.md), change the newest version in place and keep the older one as "the new
//! one with this change undone", rather than copying the path of every change.

use super::node::{Entry, NodeRef};
use super::{Tree, TreeError, dir, dirty_bound_of};
use crate::hash::Hash;
use crate::tree::node::ObjectKey;

/// What a change at a path replaces: the entry at the path (or at the first step of it that is
/// missing or holds contents, which the change replaces by a directory), and the stored identity
/// (hash and key) of each directory on the way. Cheap to keep: the entry is a reference.
#[derive(Clone, Debug)]
pub struct UndoPoint {
    /// The number of steps of the path whose entry `old` is; 0: the whole tree.
    at: usize,
    /// The entry there before the change (`None`: none).
    old: Option<Entry>,
    /// For the directory at each prefix `path[..i]` (`i < at`), its hash and stored key if it had
    /// both (a directory read from a store and not modified since).
    dirs: Vec<Option<(Hash, ObjectKey)>>,
}

/// The stored identity of a directory reference: its hash and key when it has both.
fn stored_identity(node: &NodeRef) -> Option<(Hash, ObjectKey)> {
    match node {
        NodeRef::Stored { hash, key } => Some((*hash, *key)),
        NodeRef::Mem(node) => node.cached_hash().zip(node.stored_key()),
    }
}

impl Tree {
    /// What a change at `path` (an `add`, `add_tree`, `remove` or the target of a `copy`) would
    /// replace, to undo it later with [`undo`](Tree::undo). Reads the path as a `find` does
    /// (loading what it crosses); changes nothing.
    pub fn undo_point<P: AsRef<[u8]>>(&self, path: &[P]) -> Result<UndoPoint, TreeError> {
        let whole = || UndoPoint { at: 0, old: Some(self.root.clone()), dirs: Vec::new() };
        let Some((last, steps)) = path.split_last() else {
            return Ok(whole());
        };
        let Entry::Node(root) = &self.root else {
            // Contents at the root: any change but a removal replaces the whole tree.
            return Ok(whole());
        };
        let source = &*self.source;
        let mut dirs = vec![stored_identity(root)];
        let mut node = dir::load(root, source)?;
        for (i, step) in steps.iter().enumerate() {
            dir::check_dir(&node)?;
            let found = dir::find_with(&node, step.as_ref(), source, |entry, _| match entry {
                Some(Entry::Node(child)) => Ok(Ok((stored_identity(child), dir::load(child, source)?))),
                other => Ok(Err(other.cloned())),
            })?;
            match found {
                Ok((identity, child)) => {
                    dirs.push(identity);
                    node = child;
                }
                // Missing or contents: a change creates the directories from here on.
                Err(old) => return Ok(UndoPoint { at: i + 1, old, dirs }),
            }
        }
        dir::check_dir(&node)?;
        let old = dir::find_with(&node, last.as_ref(), source, |entry, _| Ok(entry.cloned()))?;
        Ok(UndoPoint { at: path.len(), old, dirs })
    }

    /// Undoes the change at `path` that `point` was captured before ([`undo_point`](Tree::undo_point)
    /// on the tree before the change, with the same `path`): on the changed tree (or an equal one),
    /// makes the tree before the change. Directories on the path that were stored get their keys
    /// back once their hash is checked to be the one they had (which computes the hashes of the
    /// path). A `point` captured for another path or tree gives some other tree, never a wrong key.
    pub fn undo<P: AsRef<[u8]>>(&mut self, path: &[P], point: &UndoPoint) -> Result<(), TreeError> {
        let prefix = path.get(..point.at).unwrap_or(path);
        match &point.old {
            Some(entry) => {
                self.update(prefix, Some(entry.clone()))?;
                let grafted = dirty_bound_of(entry);
                self.dirty_bound = self.dirty_bound.zip(grafted).map(|(own, more)| own.saturating_add(more));
            }
            None => self.update(prefix, None)?,
        }
        self.restore_keys(path, &point.dirs)
    }

    /// Gives the directory at each prefix `path[..i]` the key of `dirs[i]` if it is in memory
    /// without a key and has that hash.
    fn restore_keys<P: AsRef<[u8]>>(
        &self,
        path: &[P],
        dirs: &[Option<(Hash, ObjectKey)>],
    ) -> Result<(), TreeError> {
        let Entry::Node(NodeRef::Mem(root)) = &self.root else {
            return Ok(());
        };
        let source = &*self.source;
        let mut node = root.clone();
        for (i, identity) in dirs.iter().enumerate() {
            if let Some((hash, key)) = identity
                && node.stored_key().is_none()
                && node.hash() == *hash
            {
                node.set_stored_key(*key);
            }
            let Some(step) = path.get(i) else { break };
            if i + 1 == dirs.len() {
                break;
            }
            dir::check_dir(&node)?;
            let next = dir::find_with(&node, step.as_ref(), source, |entry, _| match entry {
                Some(Entry::Node(NodeRef::Mem(child))) => Ok(Some(child.clone())),
                _ => Ok(None),
            })?;
            match next {
                Some(child) => node = child,
                None => break,
            }
        }
        Ok(())
    }
}
