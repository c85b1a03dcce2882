//! Walking a tree as Octez's `Context.fold ?depth ~order` does (Irmin's `Tree.fold` with its
//! `tree` callback, `~uniq:`False`): every sub-tree of the folded tree, directories before their
//! entries (pre-order), each with its path relative to the folded tree, filtered and cut by a
//! depth constraint. `Order::Undefined` lists each directory in Irmin's order (`Tree::list`,
//! docs/list-order.md); `Order::Sorted` by name bytes.

use super::node::Name;
use super::{Tree, TreeError};
use crate::schema::Kind;

/// A depth constraint of a fold (Irmin's `` `Eq | `Le | `Lt | `Ge | `Gt ``); the folded tree is at
/// depth 0, its entries at depth 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Depth {
    /// Only the sub-trees at exactly this depth.
    Eq(u32),
    /// The sub-trees at this depth or less.
    Le(u32),
    /// The sub-trees at less than this depth.
    Lt(u32),
    /// The sub-trees at this depth or more.
    Ge(u32),
    /// The sub-trees at more than this depth.
    Gt(u32),
}

/// The order in which a fold visits the entries of a directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// By name bytes.
    Sorted,
    /// Irmin's listing order (`Tree::list`): what Irmin's `` `Undefined `` gives.
    Undefined,
}

/// What to do at a directory met at depth `d`: (report it, walk its entries). Irmin 3.7.2's
/// rules, including its `Lt` quirk (a directory at depth `n - 1` is reported and not entered).
fn node_rule(depth: Option<Depth>, d: u32) -> (bool, bool) {
    match depth {
        None => (true, true),
        Some(Depth::Eq(n)) => (d >= n, d < n),
        Some(Depth::Le(n)) => (true, d < n),
        Some(Depth::Lt(n)) => (true, d + 1 < n),
        Some(Depth::Ge(n)) => (d >= n, true),
        Some(Depth::Gt(n)) => (d > n, true),
    }
}

/// Whether a contents value at depth `d` (an entry of a directory at depth `d - 1`) is reported.
fn contents_rule(depth: Option<Depth>, d: u32) -> bool {
    match depth {
        None => true,
        Some(Depth::Eq(n)) => d == n,
        Some(Depth::Le(n)) => d <= n,
        Some(Depth::Lt(n)) => d < n,
        Some(Depth::Ge(n)) => d >= n,
        Some(Depth::Gt(n)) => d > n,
    }
}

/// A directory being walked: its path, depth and the entries still to visit (reversed, so that
/// the next one is popped from the end).
struct Frame {
    path: Vec<Name>,
    depth: u32,
    entries: Vec<(Name, Tree)>,
}

/// The sub-trees of a fold, one at a time: an iterator of `(path, tree)`, paths relative to the
/// folded tree. Loads each directory's listing when it enters it.
pub struct Walker {
    depth: Option<Depth>,
    order: Order,
    /// The folded tree itself, until it is visited.
    start: Option<Tree>,
    stack: Vec<Frame>,
}

impl Walker {
    fn enter(&mut self, path: Vec<Name>, depth: u32, tree: &Tree) -> Result<(), TreeError> {
        let none: [&[u8]; 0] = [];
        let mut entries = match self.order {
            Order::Sorted => tree.list_sorted(&none, 0, None)?,
            Order::Undefined => tree.list(&none, 0, None)?,
        };
        entries.reverse();
        self.stack.push(Frame { path, depth, entries });
        Ok(())
    }

    /// Visits `tree` at `path` and `depth`: whether to report it, after entering it if it is a
    /// directory to walk.
    fn visit(&mut self, path: &[Name], depth: u32, tree: &Tree) -> Result<bool, TreeError> {
        match tree.kind() {
            Kind::Contents => Ok(contents_rule(self.depth, depth)),
            Kind::Node => {
                let (report, walk) = node_rule(self.depth, depth);
                if walk {
                    self.enter(path.to_vec(), depth, tree)?;
                }
                Ok(report)
            }
        }
    }

    fn step(&mut self) -> Result<Option<(Vec<Name>, Tree)>, TreeError> {
        if let Some(tree) = self.start.take()
            && self.visit(&[], 0, &tree)?
        {
            return Ok(Some((Vec::new(), tree)));
        }
        loop {
            let Some(frame) = self.stack.last_mut() else {
                return Ok(None);
            };
            let Some((name, tree)) = frame.entries.pop() else {
                self.stack.pop();
                continue;
            };
            let depth = frame.depth + 1;
            let mut path = frame.path.clone();
            path.push(name);
            if self.visit(&path, depth, &tree)? {
                return Ok(Some((path, tree)));
            }
        }
    }
}

impl Iterator for Walker {
    type Item = Result<(Vec<Name>, Tree), TreeError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.step() {
            Ok(Some(item)) => Some(Ok(item)),
            Ok(None) => None,
            Err(err) => {
                // An error ends the walk.
                self.stack.clear();
                self.start = None;
                Some(Err(err))
            }
        }
    }
}

impl Tree {
    /// Octez's `Tree.fold ?depth tree path ~order`: the sub-trees of the tree at `path` (none when
    /// the path is absent), directories before their entries, filtered by `depth`, each with its
    /// path relative to the tree at `path`.
    pub fn walk<P: AsRef<[u8]>>(
        &self,
        path: &[P],
        depth: Option<Depth>,
        order: Order,
    ) -> Result<Walker, TreeError> {
        let start = self.find_tree(path)?;
        Ok(Walker { depth, order, start, stack: Vec::new() })
    }
}
