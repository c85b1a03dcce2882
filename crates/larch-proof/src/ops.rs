//! Context operations on a partial tree, with Irmin's semantics (spec §3.2): what each one reads
//! (and so what a proof of it must reveal) and how it modifies directories and their inode tries.

use crate::error::VerifyError;
use crate::hash::{Kind, empty_node_hash};
use crate::model::{PInode, PNode, PValues, Resolver, build, dir_length, expand_inode};
use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;

/// Longest path an operation may take (a bound on the nesting an update can create).
pub const MAX_PATH_LEN: usize = 64;

/// A path: a list of steps (arbitrary bytes).
pub type Path = Vec<Vec<u8>>;

/// A context operation, as Octez's `Context` offers them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// The value at a path (`None` if absent or a directory). Reads the value.
    Find(Path),
    /// Whether a value is at a path (Irmin's `mem` is `find`: it reads the value).
    Mem(Path),
    /// Whether a value or a directory is at a path (reads neither).
    MemTree(Path),
    /// The entries of the directory at a path, sorted by name, with their kinds.
    List(Path),
    /// Sets the value at a path (creating directories; the old value is not read).
    Add(Path, Vec<u8>),
    /// Removes the value or directory at a path (emptied directories disappear).
    Remove(Path),
    /// Grafts the tree at `from` onto `to` (Octez `Context.copy`).
    Copy {
        /// Source path.
        from: Path,
        /// Destination path.
        to: Path,
    },
}

/// The result of one [`Op`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpResult {
    /// `Find`: the value, or `None`.
    Value(Option<Vec<u8>>),
    /// `Mem` / `MemTree`.
    Bool(bool),
    /// `List`: (name, kind) of every entry.
    List(Vec<(Vec<u8>, Kind)>),
    /// `Add` / `Remove`.
    Unit,
    /// `Copy`: whether `from` existed.
    Copied(bool),
}

impl Op {
    fn name(&self) -> &'static str {
        match self {
            Op::Find(_) => "find",
            Op::Mem(_) => "mem",
            Op::MemTree(_) => "mem_tree",
            Op::List(_) => "list",
            Op::Add(..) => "add",
            Op::Remove(_) => "remove",
            Op::Copy { .. } => "copy",
        }
    }
}

fn check_path(path: &Path) -> Result<(), VerifyError> {
    if path.len() > MAX_PATH_LEN {
        return Err(VerifyError::TooDeep { limit: MAX_PATH_LEN });
    }
    Ok(())
}

/// Runs `ops` in order on the partial tree `root`, resolving what they need through `resolver`.
pub fn run(root: &mut PNode, ops: &[Op], resolver: &mut dyn Resolver) -> Result<Vec<OpResult>, VerifyError> {
    let mut results = Vec::with_capacity(ops.len());
    for op in ops {
        let name = op.name();
        let result = match op {
            Op::Find(path) => {
                check_path(path)?;
                OpResult::Value(find(root, path, resolver, name)?)
            }
            Op::Mem(path) => {
                check_path(path)?;
                OpResult::Bool(find(root, path, resolver, name)?.is_some())
            }
            Op::MemTree(path) => {
                check_path(path)?;
                OpResult::Bool(find_tree(root, path, resolver, name)?.is_some())
            }
            Op::List(path) => {
                check_path(path)?;
                OpResult::List(list(root, path, resolver, name)?)
            }
            Op::Add(path, value) => {
                check_path(path)?;
                set_tree(root, path, PNode::Contents(value.clone()), resolver, name)?;
                OpResult::Unit
            }
            Op::Remove(path) => {
                check_path(path)?;
                remove_root(root, path, resolver, name)?;
                OpResult::Unit
            }
            Op::Copy { from, to } => {
                check_path(from)?;
                check_path(to)?;
                match find_tree(root, from, resolver, name)? {
                    None => OpResult::Copied(false),
                    Some(sub) => {
                        let empty = match &sub {
                            PNode::Dir(dir) => dir_length(dir) == 0,
                            PNode::BlindedNode(hash) => *hash == empty_node_hash(),
                            _ => false,
                        };
                        if empty {
                            remove_root(root, to, resolver, name)?;
                        } else {
                            set_tree(root, to, sub, resolver, name)?;
                        }
                        OpResult::Copied(true)
                    }
                }
            }
        };
        results.push(result);
    }
    Ok(results)
}

fn expand_node(node: &mut PNode, resolver: &mut dyn Resolver, op: &'static str) -> Result<(), VerifyError> {
    if let PNode::BlindedNode(hash) = node {
        *node = PNode::Dir(Box::new(resolver.node(op, hash)?));
    }
    Ok(())
}

/// The entry `step` of the directory whose root inode is `inode`, following (and expanding) the
/// buckets on the way.
fn lookup<'a>(
    inode: &'a mut PInode,
    step: &[u8],
    resolver: &mut dyn Resolver,
    op: &'static str,
) -> Result<Option<&'a mut PNode>, VerifyError> {
    match inode {
        PInode::Blinded(_) => Err(VerifyError::Malformed("unexpanded inode")),
        PInode::Values(values) => Ok(values.entries.get_mut(step)),
        PInode::Tree(tree) => {
            if tree.depth >= resolver.arity().max_depth {
                return Err(VerifyError::MaxDepth);
            }
            let depth = tree.depth + 1;
            match tree.children.get_mut(&resolver.arity().index(tree.depth, step)) {
                None => Ok(None),
                Some(child) => {
                    expand_inode(child, depth, resolver, op)?;
                    lookup(child, step, resolver, op)
                }
            }
        }
    }
}

/// The subtree at `path` (not expanded at its end), walking through directories.
fn walk<'a>(
    root: &'a mut PNode,
    path: &[Vec<u8>],
    resolver: &mut dyn Resolver,
    op: &'static str,
) -> Result<Option<&'a mut PNode>, VerifyError> {
    let Some((step, rest)) = path.split_first() else {
        return Ok(Some(root));
    };
    expand_node(root, resolver, op)?;
    let PNode::Dir(dir) = root else {
        // A value on the way: the path does not exist (the value is not read).
        return Ok(None);
    };
    match lookup(dir, step, resolver, op)? {
        None => Ok(None),
        Some(child) => walk(child, rest, resolver, op),
    }
}

fn find(
    root: &mut PNode,
    path: &[Vec<u8>],
    resolver: &mut dyn Resolver,
    op: &'static str,
) -> Result<Option<Vec<u8>>, VerifyError> {
    let Some(node) = walk(root, path, resolver, op)? else {
        return Ok(None);
    };
    if let PNode::BlindedContents(hash) = node {
        *node = PNode::Contents(resolver.contents(op, hash)?);
    }
    match node {
        PNode::Contents(value) => Ok(Some(value.clone())),
        _ => Ok(None),
    }
}

fn find_tree(
    root: &mut PNode,
    path: &[Vec<u8>],
    resolver: &mut dyn Resolver,
    op: &'static str,
) -> Result<Option<PNode>, VerifyError> {
    Ok(walk(root, path, resolver, op)?.map(|node| node.clone()))
}

fn kind_of(node: &PNode) -> Kind {
    match node {
        PNode::Contents(_) | PNode::BlindedContents(_) => Kind::Contents,
        PNode::BlindedNode(_) | PNode::Dir(_) => Kind::Node,
    }
}

/// Expands every blinded inode below `inode`.
fn expand_all(inode: &mut PInode, resolver: &mut dyn Resolver, op: &'static str) -> Result<(), VerifyError> {
    if let PInode::Tree(tree) = inode {
        let depth = tree.depth + 1;
        for child in tree.children.values_mut() {
            expand_inode(child, depth, resolver, op)?;
            expand_all(child, resolver, op)?;
        }
    }
    Ok(())
}

/// Moves every entry below an expanded `inode` into `out`.
fn drain_entries(inode: PInode, out: &mut BTreeMap<Vec<u8>, PNode>) {
    match inode {
        PInode::Blinded(_) => {}
        PInode::Values(values) => out.extend(values.entries),
        PInode::Tree(tree) => {
            for child in tree.children.into_values() {
                drain_entries(child, out);
            }
        }
    }
}

fn visit_entries(inode: &PInode, out: &mut Vec<(Vec<u8>, Kind)>) {
    match inode {
        PInode::Blinded(_) => {}
        PInode::Values(values) => {
            out.extend(values.entries.iter().map(|(name, child)| (name.clone(), kind_of(child))))
        }
        PInode::Tree(tree) => tree.children.values().for_each(|child| visit_entries(child, out)),
    }
}

fn list(
    root: &mut PNode,
    path: &[Vec<u8>],
    resolver: &mut dyn Resolver,
    op: &'static str,
) -> Result<Vec<(Vec<u8>, Kind)>, VerifyError> {
    let Some(node) = walk(root, path, resolver, op)? else {
        return Ok(Vec::new());
    };
    expand_node(node, resolver, op)?;
    let PNode::Dir(dir) = node else {
        return Ok(Vec::new());
    };
    expand_all(dir, resolver, op)?;
    let mut out = Vec::new();
    visit_entries(dir, &mut out);
    out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Sets the subtree at `path` (non-empty) to `new`, creating directories on the way.
fn set_tree(
    node: &mut PNode,
    path: &[Vec<u8>],
    new: PNode,
    resolver: &mut dyn Resolver,
    op: &'static str,
) -> Result<(), VerifyError> {
    let Some((step, rest)) = path.split_first() else {
        *node = new;
        return Ok(());
    };
    expand_node(node, resolver, op)?;
    if !matches!(node, PNode::Dir(_)) {
        // A value on the way (not read) or nothing: a fresh directory replaces it.
        *node = PNode::Dir(Box::new(PInode::Values(PValues { depth: 0, entries: BTreeMap::new() })));
    }
    let PNode::Dir(dir) = node else {
        return Err(VerifyError::Malformed("directory expected"));
    };
    if let Some(child) = lookup(dir, step, resolver, op)? {
        return set_tree(child, rest, new, resolver, op);
    }
    let mut child = PNode::Dir(Box::new(PInode::Values(PValues { depth: 0, entries: BTreeMap::new() })));
    set_tree(&mut child, rest, new, resolver, op)?;
    insert(dir, step, child, true, resolver, op)?;
    Ok(())
}

/// Inserts (or replaces) `step` in the inode `inode`; returns the change in length (0 or 1).
fn insert(
    inode: &mut PInode,
    step: &[u8],
    child: PNode,
    root: bool,
    resolver: &mut dyn Resolver,
    op: &'static str,
) -> Result<u64, VerifyError> {
    match inode {
        PInode::Blinded(_) => Err(VerifyError::Malformed("unexpanded inode")),
        PInode::Values(values) => {
            let delta = u64::from(values.entries.insert(step.to_vec(), child).is_none());
            if !root && values.entries.len() > resolver.arity().values_max() {
                let entries = core::mem::take(&mut values.entries);
                *inode = build(values.depth, entries, resolver.arity())?;
            }
            Ok(delta)
        }
        PInode::Tree(tree) => {
            if tree.depth >= resolver.arity().max_depth {
                return Err(VerifyError::MaxDepth);
            }
            let depth = tree.depth + 1;
            let index = resolver.arity().index(tree.depth, step);
            let delta = match tree.children.get_mut(&index) {
                None => {
                    let mut entries = BTreeMap::new();
                    entries.insert(step.to_vec(), child);
                    tree.children.insert(index, PInode::Values(PValues { depth, entries }));
                    1
                }
                Some(sub) => {
                    expand_inode(sub, depth, resolver, op)?;
                    insert(sub, step, child, false, resolver, op)?
                }
            };
            tree.length += delta;
            Ok(delta)
        }
    }
}

/// Removes `step` from the inode `inode`; returns (whether the inode became empty, entries removed).
fn delete(
    inode: &mut PInode,
    step: &[u8],
    resolver: &mut dyn Resolver,
    op: &'static str,
) -> Result<(bool, u64), VerifyError> {
    match inode {
        PInode::Blinded(_) => Err(VerifyError::Malformed("unexpanded inode")),
        PInode::Values(values) => {
            let removed = u64::from(values.entries.remove(step).is_some());
            Ok((values.entries.is_empty(), removed))
        }
        PInode::Tree(tree) => {
            if tree.depth >= resolver.arity().max_depth {
                return Err(VerifyError::MaxDepth);
            }
            let depth = tree.depth + 1;
            let index = resolver.arity().index(tree.depth, step);
            let Some(sub) = tree.children.get_mut(&index) else {
                return Ok((false, 0));
            };
            expand_inode(sub, depth, resolver, op)?;
            let (emptied, removed) = delete(sub, step, resolver, op)?;
            if emptied {
                tree.children.remove(&index);
            }
            tree.length = tree.length.saturating_sub(removed);
            if removed > 0 && tree.length <= resolver.arity().values_max() as u64 {
                // Collapse into one Values holding every entry below (needs all of them).
                if tree.length == 0 {
                    return Ok((true, removed));
                }
                let own_depth = tree.depth;
                expand_all(inode, resolver, op)?;
                let mut entries = BTreeMap::new();
                let taken = core::mem::replace(inode, PInode::Blinded(Default::default()));
                drain_entries(taken, &mut entries);
                *inode = PInode::Values(PValues { depth: own_depth, entries });
            }
            Ok((false, removed))
        }
    }
}

fn remove_root(
    root: &mut PNode,
    path: &[Vec<u8>],
    resolver: &mut dyn Resolver,
    op: &'static str,
) -> Result<(), VerifyError> {
    if remove(root, path, resolver, op)? {
        *root = PNode::Dir(Box::new(PInode::Values(PValues { depth: 0, entries: BTreeMap::new() })));
    }
    Ok(())
}

/// Removes `path` below `node`; returns whether `node` itself must go (an empty path).
fn remove(
    node: &mut PNode,
    path: &[Vec<u8>],
    resolver: &mut dyn Resolver,
    op: &'static str,
) -> Result<bool, VerifyError> {
    let Some((step, rest)) = path.split_first() else {
        return Ok(true);
    };
    expand_node(node, resolver, op)?;
    let PNode::Dir(dir) = node else {
        return Ok(false);
    };
    let gone = match lookup(dir, step, resolver, op)? {
        None => return Ok(false),
        Some(child) => {
            let gone = remove(child, rest, resolver, op)?;
            gone || matches!(child, PNode::Dir(sub) if dir_length(sub) == 0)
        }
    };
    if gone {
        let (emptied, _) = delete(dir, step, resolver, op)?;
        if emptied {
            **dir = PInode::Values(PValues { depth: 0, entries: BTreeMap::new() });
        }
    }
    Ok(false)
}
