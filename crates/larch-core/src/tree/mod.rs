//! The context tree: a persistent, structurally shared value with the operations a Tezos node
//! performs (spec §6 semantics). Cloning is O(1); a modification copies only the path it touches
//! (and nothing at all where the path is not shared).

pub(crate) mod dir;
mod dirty;
pub mod fold;
mod key;
pub mod node;
mod prefetch;
mod release;
pub mod source;
mod undo;

pub use prefetch::{hint_child_caches, hint_memory};
pub use release::Released;
pub use undo::UndoPoint;

use crate::hash::Hash;
use crate::schema::Kind;
use node::{Contents, ContentsRef, Entry, Name, Node, NodeRef};
use source::{LoadError, NoSource, ObjectSource};
use std::sync::{Arc, OnceLock};

/// Why a tree operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TreeError {
    /// A lazy node or contents could not be loaded from the tree's source.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// More than 32 names collide on every bucket down to Irmin's depth limit (`Max_depth`).
    #[error(
        "inode trie deeper than Irmin's limit: more than 32 names share their buckets down to depth {depth}"
    )]
    MaxDepth {
        /// The depth at which an index was needed.
        depth: u8,
    },
    /// A loaded node has a shape a directory cannot have.
    #[error("malformed node: {0}")]
    Malformed(&'static str),
}

/// A tree: a directory (possibly empty) or a contents value, with the source its lazy parts load
/// from. Clones share everything; modifications through `&mut self` copy on write.
#[derive(Clone, Debug)]
pub struct Tree {
    root: Entry,
    source: Arc<dyn ObjectSource>,
    /// At least the number of modified (dirty) nodes this tree holds, counted as the edits make
    /// them (see [`Tree::dirty_bound`]); `None` when unknown.
    dirty_bound: Option<usize>,
}

thread_local! {
    /// Nodes made dirty on this thread: counted where the edits copy, modify or create a node,
    /// read by [`Tree::update`] before and after an edit.
    static MADE_DIRTY: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Counts `count` nodes made dirty by the edit running on this thread.
pub(crate) fn note_dirty(count: usize) {
    MADE_DIRTY.with(|made| made.set(made.get().wrapping_add(count)));
}

fn made_dirty() -> usize {
    MADE_DIRTY.with(std::cell::Cell::get)
}

/// What is known of the dirty nodes below `root`: none below a stored or hashed node (a hashed
/// node's descendants are hashed), unknown below a modified one.
fn dirty_bound_of(root: &Entry) -> Option<usize> {
    match root {
        Entry::Contents(_) | Entry::Node(NodeRef::Stored { .. }) => Some(0),
        Entry::Node(NodeRef::Mem(node)) => node.cached_hash().map(|_| 0),
    }
}

fn no_source() -> Arc<dyn ObjectSource> {
    static SOURCE: OnceLock<Arc<dyn ObjectSource>> = OnceLock::new();
    SOURCE.get_or_init(|| Arc::new(NoSource)).clone()
}

fn empty_node() -> Entry {
    Entry::Node(NodeRef::Mem(Arc::new(Node::empty())))
}

impl Default for Tree {
    fn default() -> Tree {
        Tree::empty()
    }
}

impl Tree {
    /// The empty directory, entirely in memory.
    pub fn empty() -> Tree {
        Tree { root: empty_node(), source: no_source(), dirty_bound: Some(1) }
    }

    /// The empty directory, whose later grafts may come from `source`.
    pub fn empty_with_source(source: Arc<dyn ObjectSource>) -> Tree {
        Tree { root: empty_node(), source, dirty_bound: Some(1) }
    }

    /// A tree rooted at `root`, loading lazy parts from `source`.
    pub fn from_entry(root: Entry, source: Arc<dyn ObjectSource>) -> Tree {
        let dirty_bound = dirty_bound_of(&root);
        Tree { root, source, dirty_bound }
    }

    /// A contents tree holding `value`.
    pub fn of_contents(value: impl Into<Box<[u8]>>) -> Tree {
        Tree { root: Entry::contents(value), source: no_source(), dirty_bound: Some(0) }
    }

    /// At least the number of modified nodes (in memory, hash not computed) this tree holds, if
    /// known: counted by the edits since the tree was checked out or built as they make nodes
    /// dirty (a node loaded, copied, or hashed and changed; a node already modified and held by
    /// this tree alone is not counted again), an overestimate (a node copied again because another
    /// tree shares it counts again, so does one an edit then drops; a hashed tree keeps its
    /// count). `None` for a tree built
    /// from an in-memory entry whose hash is not computed ([`Tree::from_entry`]). Lets a writer
    /// tell a small commit from a huge one without walking the tree
    /// ([`Tree::dirty_subtrees`] counts exactly).
    pub fn dirty_bound(&self) -> Option<usize> {
        self.dirty_bound
    }

    /// Forgets the count of [`dirty_bound`](Tree::dirty_bound): the nodes modified so far are
    /// committed or being committed, and later edits count from zero. For a writer handing out
    /// the tree of a commit it is still making: its nodes are hashed by that commit before any
    /// later commit of this tree looks at them.
    pub fn forget_dirty(&mut self) {
        self.dirty_bound = Some(0);
    }

    /// The root entry.
    pub fn root(&self) -> &Entry {
        &self.root
    }

    /// The source lazy parts load from.
    pub fn source(&self) -> &Arc<dyn ObjectSource> {
        &self.source
    }

    /// Contents or directory.
    pub fn kind(&self) -> Kind {
        self.root.kind()
    }

    /// The Tezos hash of the tree (a directory's node hash, or a contents hash); computes the
    /// hashes of modified nodes bottom-up and caches them.
    pub fn hash(&self) -> Hash {
        self.root.hash()
    }

    /// When this tree has at least `min_dirty` modified nodes whose hashes are not computed yet:
    /// independent subtrees covering most of them (a few hundred), to be hashed from several threads
    /// (`Node::hash` on each, in any order) before [`Tree::hash`] hashes the few nodes above them.
    /// Empty otherwise. The hashes are the same however they are computed.
    pub fn dirty_subtrees(&self, min_dirty: usize) -> Vec<Arc<Node>> {
        if self.dirty_bound.is_some_and(|bound| bound < min_dirty) {
            // Fewer, by the edits' count: no need to walk the tree.
            return Vec::new();
        }
        match &self.root {
            Entry::Node(NodeRef::Mem(root)) => dirty::subtrees(root, min_dirty),
            _ => Vec::new(),
        }
    }

    /// Whether this is a directory with no entries.
    pub fn is_empty(&self) -> Result<bool, TreeError> {
        match &self.root {
            Entry::Contents(_) => Ok(false),
            Entry::Node(node) => Ok(dir::load(node, &*self.source)?.length() == 0),
        }
    }

    /// The entry at `path`, if any.
    fn entry_at<P: AsRef<[u8]>>(&self, path: &[P]) -> Result<Option<Entry>, TreeError> {
        self.entry_at_with(path, |entry| Ok(entry.cloned()))
    }

    /// `f` of the entry at `path` (`None` if there is none), the entry borrowed where it is: a
    /// walk down the path clones no entry.
    fn entry_at_with<P: AsRef<[u8]>, R>(
        &self,
        path: &[P],
        f: impl FnOnce(Option<&Entry>) -> Result<R, TreeError>,
    ) -> Result<R, TreeError> {
        let Some((last, steps)) = path.split_last() else {
            return f(Some(&self.root));
        };
        let Entry::Node(root) = &self.root else {
            return f(None);
        };
        let source = &*self.source;
        let mut node = dir::load(root, source)?;
        for step in steps {
            dir::check_dir(&node)?;
            let child = dir::find_with(&node, step.as_ref(), source, |entry, leaf| match entry {
                // A sub-directory of a large directory is loaded knowing the others of its leaf.
                Some(Entry::Node(NodeRef::Stored { hash, key })) if !leaf.is_empty() => {
                    Ok(Some(source.load_node_among(*key, hash, leaf)?))
                }
                Some(Entry::Node(child)) => dir::load(child, source).map(Some),
                _ => Ok(None),
            })?;
            match child {
                Some(child) => node = child,
                None => return f(None),
            }
        }
        dir::check_dir(&node)?;
        dir::find_with(&node, last.as_ref(), source, |entry, _| f(entry))
    }

    fn load_contents(&self, contents: &ContentsRef) -> Result<Arc<Contents>, TreeError> {
        match contents {
            ContentsRef::Mem(contents) => Ok(contents.clone()),
            ContentsRef::Inline(value) => Ok(value.to_contents()),
            ContentsRef::Stored { hash, key } => Ok(self.source.load_contents(*key, hash)?),
        }
    }

    /// The contents at `path` (`None` if absent or a directory).
    pub fn find<P: AsRef<[u8]>>(&self, path: &[P]) -> Result<Option<Arc<Contents>>, TreeError> {
        self.entry_at_with(path, |entry| match entry {
            Some(Entry::Contents(contents)) => self.load_contents(contents).map(Some),
            _ => Ok(None),
        })
    }

    /// The sub-tree (directory or contents) at `path`.
    pub fn find_tree<P: AsRef<[u8]>>(&self, path: &[P]) -> Result<Option<Tree>, TreeError> {
        // A sub-tree's modified nodes are counted by this tree; its own count (which grafting it
        // would add to another tree) is known only when it has none.
        Ok(self.entry_at(path)?.map(|root| Tree::from_entry(root, self.source.clone())))
    }

    /// Whether `path` holds contents.
    pub fn mem<P: AsRef<[u8]>>(&self, path: &[P]) -> Result<bool, TreeError> {
        self.entry_at_with(path, |entry| Ok(matches!(entry, Some(Entry::Contents(_)))))
    }

    /// Whether `path` holds contents or a directory.
    pub fn mem_tree<P: AsRef<[u8]>>(&self, path: &[P]) -> Result<bool, TreeError> {
        self.entry_at_with(path, |entry| Ok(entry.is_some()))
    }

    /// Sets the contents at `path` to `value`, creating missing directories and replacing any
    /// contents standing on the way by a directory. An empty path makes the whole tree contents.
    pub fn add<P: AsRef<[u8]>>(&mut self, path: &[P], value: impl Into<Box<[u8]>>) -> Result<(), TreeError> {
        self.update(path, Some(Entry::contents(value)))
    }

    /// Removes the contents or sub-tree at `path`; directories emptied by it disappear,
    /// recursively. Removing what is not there changes nothing; an empty path empties the tree.
    pub fn remove<P: AsRef<[u8]>>(&mut self, path: &[P]) -> Result<(), TreeError> {
        if !path.is_empty() && !self.mem_tree(path)? {
            return Ok(());
        }
        self.update(path, None)
    }

    /// Grafts `tree` at `path` (an empty directory removes the binding instead). Both trees must
    /// load from the same source (or `tree` be fully in memory).
    pub fn add_tree<P: AsRef<[u8]>>(&mut self, path: &[P], tree: &Tree) -> Result<(), TreeError> {
        // The grafted tree's modified nodes become this tree's (counted twice if they were already
        // this tree's: an overestimate; unknown if the grafted tree's count is).
        self.graft(path, tree, tree.dirty_bound)
    }

    /// [`add_tree`](Tree::add_tree) of `tree`, counting `grafted` more modified nodes.
    fn graft<P: AsRef<[u8]>>(
        &mut self,
        path: &[P],
        tree: &Tree,
        grafted: Option<usize>,
    ) -> Result<(), TreeError> {
        if tree.is_empty()? {
            return self.remove(path);
        }
        let result = self.update(path, Some(tree.root.clone()));
        self.dirty_bound = self.dirty_bound.zip(grafted).map(|(own, grafted)| own.saturating_add(grafted));
        result
    }

    /// Tezos `Context.copy`: grafts the sub-tree at `from` onto `to`. Returns `false`, changing
    /// nothing, when `from` does not exist.
    pub fn copy<P: AsRef<[u8]>, Q: AsRef<[u8]>>(&mut self, from: &[P], to: &[Q]) -> Result<bool, TreeError> {
        match self.find_tree(from)? {
            Some(sub) => {
                // A part of this tree: its modified nodes are counted already.
                self.graft(to, &sub, Some(0))?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// The entries of the directory at `path` in Irmin's order (Octez's `Context.list ?offset
    /// ?length`), skipping `offset` and returning at most `length` of them (all when `None`): a
    /// page is the slice `[offset, offset + length)` of the full listing. Empty for contents or a
    /// missing path.
    ///
    /// Irmin's order: a directory read from a commit and not modified since lists in the order of
    /// its inode layout (at most 32 entries: by name bytes; more: 32 buckets in index order, bucket
    /// `i` at depth `d` holding the names whose seeded OCaml hash at seed `d` is `i` modulo 32,
    /// each listed by the same rule one level deeper); a directory modified in memory and not
    /// committed since lists by name bytes. A page of a large stored directory loads the inodes on
    /// its way, not the whole directory. See docs/list-order.md.
    pub fn list<P: AsRef<[u8]>>(
        &self,
        path: &[P],
        offset: usize,
        length: Option<usize>,
    ) -> Result<Vec<(Name, Tree)>, TreeError> {
        self.list_in(path, offset, length, true)
    }

    /// The entries of the directory at `path` sorted by name bytes whatever the directory's state
    /// (Octez's `fold ~order:`Sorted`), paged as [`list`](Tree::list).
    pub fn list_sorted<P: AsRef<[u8]>>(
        &self,
        path: &[P],
        offset: usize,
        length: Option<usize>,
    ) -> Result<Vec<(Name, Tree)>, TreeError> {
        self.list_in(path, offset, length, false)
    }

    /// [`list`](Tree::list) (`irmin_order`) or [`list_sorted`](Tree::list_sorted).
    fn list_in<P: AsRef<[u8]>>(
        &self,
        path: &[P],
        offset: usize,
        length: Option<usize>,
        irmin_order: bool,
    ) -> Result<Vec<(Name, Tree)>, TreeError> {
        let Some(Entry::Node(node_ref)) = self.entry_at(path)? else {
            return Ok(Vec::new());
        };
        let node = dir::load(&node_ref, &*self.source)?;
        dir::check_dir(&node)?;
        let length = length.unwrap_or(usize::MAX);
        let entries = if irmin_order && dir::lists_by_layout(&node_ref) {
            dir::page_by_layout(&node, offset, length, &*self.source)?
        } else {
            dir::page_by_name(&node, offset, length, &*self.source)?
        };
        Ok(entries
            .into_iter()
            .map(|(name, root)| (name, Tree::from_entry(root, self.source.clone())))
            .collect())
    }

    /// Number of entries of the directory at `path` (0 for contents or a missing path).
    pub fn length<P: AsRef<[u8]>>(&self, path: &[P]) -> Result<u64, TreeError> {
        match self.entry_at(path)? {
            Some(Entry::Node(node)) => Ok(dir::load(&node, &*self.source)?.length()),
            _ => Ok(0),
        }
    }

    fn update<P: AsRef<[u8]>>(&mut self, path: &[P], new: Option<Entry>) -> Result<(), TreeError> {
        // Counted whether the edit succeeds or not (a failed edit may have copied nodes already).
        let before = made_dirty();
        let result = self.update_counted(path, new);
        let made = made_dirty().wrapping_sub(before);
        self.dirty_bound = self.dirty_bound.map(|bound| bound.saturating_add(made));
        result
    }

    fn update_counted<P: AsRef<[u8]>>(&mut self, path: &[P], new: Option<Entry>) -> Result<(), TreeError> {
        if path.is_empty() {
            // The new root's modified nodes: known for a graft (add_tree counts them), none for
            // contents or an empty directory (one node).
            note_dirty(1);
            self.root = new.unwrap_or_else(empty_node);
            return Ok(());
        }
        if matches!(self.root, Entry::Contents(_)) {
            if new.is_none() {
                return Ok(());
            }
            self.root = empty_node();
            note_dirty(1);
        }
        let Entry::Node(root) = &mut self.root else {
            return Ok(());
        };
        let source = &*self.source;
        let node = dir::node_mut(root, source)?;
        dir::check_dir(node)?;
        set_path(node, path, new, source)
    }
}

/// Sets (or removes) the entry at `path` below the directory `node`, creating or pruning the
/// directories on the way.
fn set_path<P: AsRef<[u8]>>(
    node: &mut Node,
    path: &[P],
    new: Option<Entry>,
    source: &dyn ObjectSource,
) -> Result<(), TreeError> {
    let Some((first, rest)) = path.split_first() else {
        return Ok(());
    };
    let name = first.as_ref();
    if rest.is_empty() {
        return dir::set(node, name, new, source);
    }
    let emptied = match dir::entry_mut(node, name, source)? {
        Some(Entry::Node(child)) => {
            let child = dir::node_mut(child, source)?;
            dir::check_dir(child)?;
            crate::stack::guarded(|| set_path(child, rest, new, source))?;
            child.length() == 0
        }
        _ => {
            // Missing, or contents in the way: a removal has nothing to do; an addition builds a
            // fresh directory that replaces whatever stood there.
            if new.is_none() {
                return Ok(());
            }
            let mut child = Node::empty();
            note_dirty(1);
            crate::stack::guarded(|| set_path(&mut child, rest, new, source))?;
            return dir::set(node, name, Some(Entry::Node(NodeRef::Mem(Arc::new(child)))), source);
        }
    };
    if emptied {
        dir::set(node, name, None, source)?;
    }
    Ok(())
}
