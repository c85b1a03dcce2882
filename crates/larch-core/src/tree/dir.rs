//! One directory at a time: lookup, insertion and removal of a single name in a flat directory or
//! an inode trie, keeping the trie canonical (a pure function of the entry set, spec §4.2.1).

use super::TreeError;
use super::node::{Entries, Entry, InodeTree, Name, Node, NodeBody, NodeRef, name_prefix};
use super::source::ObjectSource;
use crate::ocaml_hash::{INODE_BUCKETS, inode_index};
use crate::schema::{INODE_MAX_DEPTH, INODE_VALUES_MAX, STABLE_HASH_MAX};
use std::sync::Arc;

/// The node a reference points to, loading it if it is stored.
pub(crate) fn load(node: &NodeRef, source: &dyn ObjectSource) -> Result<Arc<Node>, TreeError> {
    match node {
        NodeRef::Mem(node) => Ok(node.clone()),
        NodeRef::Stored { hash, key } => Ok(source.load_node(*key, hash)?),
    }
}

/// The inode behind `node`, a child of an inode `Tree` ([`ObjectSource::load_inode`] when stored).
pub(crate) fn load_inode(node: &NodeRef, source: &dyn ObjectSource) -> Result<Arc<Node>, TreeError> {
    match node {
        NodeRef::Mem(node) => Ok(node.clone()),
        NodeRef::Stored { hash, key } => Ok(source.load_inode(*key, hash)?),
    }
}

/// A uniquely owned, mutable node behind `node`: a stored node is loaded and copied, a shared
/// in-memory node is copied (copy-on-write), an unshared one is used in place.
pub(crate) fn node_mut<'a>(
    node: &'a mut NodeRef,
    source: &dyn ObjectSource,
) -> Result<&'a mut Node, TreeError> {
    node_mut_as(node, source, false)
}

/// [`node_mut`] for a child of an inode `Tree`: a stored one is loaded with
/// [`ObjectSource::load_inode`].
fn inode_mut<'a>(node: &'a mut NodeRef, source: &dyn ObjectSource) -> Result<&'a mut Node, TreeError> {
    node_mut_as(node, source, true)
}

/// [`node_mut`], loading a stored node as an inode when `inode`.
fn node_mut_as<'a>(
    node: &'a mut NodeRef,
    source: &dyn ObjectSource,
    inode: bool,
) -> Result<&'a mut Node, TreeError> {
    // The node is (or becomes) modified: copied, or modified in place. Counted only when this
    // makes a node dirty (a load, a copy, or a hashed node changed in place): a node already
    // modified and held by this tree alone is not counted again, so that the bound stays close
    // to the dirty nodes a block makes, not to its edits' path lengths (seven times more on the
    // default replay, and a bound over the parallel-hashing threshold walked the tree at most
    // commits).
    let newly_dirty = match node {
        NodeRef::Stored { .. } => true,
        NodeRef::Mem(arc) => arc.cached_hash().is_some() || Arc::get_mut(arc).is_none(),
    };
    if newly_dirty {
        super::note_dirty(1);
    }
    let origins = source.keeps_origins();
    if let NodeRef::Stored { hash, key } = node {
        let loaded = if inode { source.load_inode(*key, hash)? } else { source.load_node(*key, hash)? };
        // A directory or an inode leaf loaded for a change is remembered (the store's base lookup
        // missed some of them: 2 MiB more store on the default replay without); an inode `Tree`
        // is not: no smaller store for it, and the loaded versions it kept alive made the
        // flat-key benchmark 12% slower (docs/benchmarks.md at c117370, "Issue 11, seventh round").
        let remember = origins && !matches!(loaded.body(), NodeBody::Tree(_));
        let copy = if remember { loaded.copy_for_change() } else { Node::clone(&loaded) };
        *node = NodeRef::Mem(Arc::new(copy));
    }
    match node {
        NodeRef::Mem(arc) => {
            // A shared node is copied; the copy refers by key to the children its store holds,
            // which the store may keep in its cache (the copy no longer does).
            if Arc::get_mut(arc).is_none() {
                let copy = match source.held_keys() {
                    Some(held) => arc.detached_copy_noting(held, &mut |child| source.offer_detached(child)),
                    None => Node::clone(arc),
                };
                if origins {
                    copy.set_origin(arc.origin_for_copy());
                }
                *arc = Arc::new(copy);
            }
            Arc::get_mut(arc).ok_or(TreeError::Malformed("a node copied for a change is shared"))
        }
        NodeRef::Stored { .. } => Err(TreeError::Malformed("stored node not replaced after load")),
    }
}

/// Checks that `child`, reached from a `Tree` inode at `parent_depth`, is an inner inode of the
/// next depth: a `Values` leaf or a `Tree` at `parent_depth + 1`. Every walk down an inode trie
/// checks it, so that a stored trie (whose depths a crafted store chooses) is at most
/// `INODE_MAX_DEPTH` levels deep and every walk through it ends.
fn check_child(parent_depth: u8, child: &Node) -> Result<(), TreeError> {
    match child.body() {
        NodeBody::Values(_) => Ok(()),
        NodeBody::Tree(sub) if u16::from(sub.depth) == u16::from(parent_depth) + 1 => Ok(()),
        NodeBody::Tree(_) => Err(TreeError::Malformed("an inner inode at the wrong depth")),
        NodeBody::Flat(_) => Err(TreeError::Malformed("a flat directory used as an inner inode")),
    }
}

/// Checks that `node`, reached as a directory, is one: flat, or the root (depth 0) of an inode trie.
pub(crate) fn check_dir(node: &Node) -> Result<(), TreeError> {
    match node.body() {
        NodeBody::Flat(_) => Ok(()),
        NodeBody::Tree(tree) if tree.depth == 0 => Ok(()),
        NodeBody::Tree(_) => Err(TreeError::Malformed("an inner inode used as a directory")),
        NodeBody::Values(_) => Err(TreeError::Malformed("an inode leaf used as a directory")),
    }
}

fn search(entries: &Entries, name: &[u8]) -> Result<usize, usize> {
    // The entries of a node just read (often by the prefetching thread, on the other core) are
    // not in this core's cache: a binary search would wait for each probe's line in turn.
    let prefix = name_prefix(name);
    super::prefetch::search_probes(entries);
    entries.binary_search_by(|(probe, _)| probe.cmp_bytes(name, prefix))
}

/// `f` of the entry named `name` in the directory `node` (`None` if absent), the entry borrowed
/// from the node that holds it (a walk down a path then clones no entry on the way), and of the
/// entries of the inode leaf it is in when `node` is a large directory (empty otherwise).
pub(crate) fn find_with<R>(
    node: &Node,
    name: &[u8],
    source: &dyn ObjectSource,
    f: impl FnOnce(Option<&Entry>, &[(Name, Entry)]) -> Result<R, TreeError>,
) -> Result<R, TreeError> {
    match node.body() {
        NodeBody::Flat(entries) => {
            f(search(entries, name).ok().and_then(|i| entries.get(i)).map(|(_, entry)| entry), &[])
        }
        NodeBody::Values(entries) => {
            f(search(entries, name).ok().and_then(|i| entries.get(i)).map(|(_, entry)| entry), entries)
        }
        NodeBody::Tree(tree) => {
            let index = inode_index(tree.depth, name);
            let Some((_, child)) = tree.find_bucket(index).ok().and_then(|i| tree.children.get(i)) else {
                return f(None, &[]);
            };
            let child = load_inode(child, source)?;
            check_child(tree.depth, &child)?;
            find_with(&child, name, source, f)
        }
    }
}

/// A mutable reference to the existing entry named `name` (copying the inode path to it).
pub(crate) fn entry_mut<'a>(
    node: &'a mut Node,
    name: &[u8],
    source: &dyn ObjectSource,
) -> Result<Option<&'a mut Entry>, TreeError> {
    match node.body_mut() {
        NodeBody::Flat(entries) | NodeBody::Values(entries) => match search(entries, name) {
            Ok(i) => Ok(entries.get_mut(i).map(|(_, entry)| entry)),
            Err(_) => Ok(None),
        },
        NodeBody::Tree(tree) => {
            let index = inode_index(tree.depth, name);
            let Ok(position) = tree.find_bucket(index) else {
                return Ok(None);
            };
            let Some((_, child)) = tree.children.get_mut(position) else {
                return Ok(None);
            };
            let depth = tree.depth;
            let child = inode_mut(child, source)?;
            check_child(depth, child)?;
            entry_mut(child, name, source)
        }
    }
}

/// Sets (`Some`) or removes (`None`) the entry `name` of the directory `node`, converting between
/// the flat form (≤ 256 entries) and the inode trie (above) as the count crosses 256.
pub(crate) fn set(
    node: &mut Node,
    name: &[u8],
    new: Option<Entry>,
    source: &dyn ObjectSource,
) -> Result<(), TreeError> {
    let body = node.body_mut();
    let replacement = match body {
        NodeBody::Flat(entries) => {
            set_in_entries(entries, name, new);
            if entries.len() > STABLE_HASH_MAX { Some(build(0, std::mem::take(entries))?) } else { None }
        }
        NodeBody::Tree(tree) => {
            set_in_tree(tree, name, new, source)?;
            if tree.length <= STABLE_HASH_MAX as u64 {
                let mut all = Vec::with_capacity(tree.length as usize);
                collect_tree(tree, source, &mut all)?;
                all.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
                Some(NodeBody::Flat(all))
            } else {
                None
            }
        }
        NodeBody::Values(_) => return Err(TreeError::Malformed("an inode leaf used as a directory")),
    };
    if let Some(replacement) = replacement {
        *body = replacement;
    }
    Ok(())
}

/// A directory of fewer entries than this grows by exactly one entry at a time (see
/// [`set_in_entries`]); larger ones double.
const EXACT_GROWTH_MAX: usize = 16;

/// Sets or removes `name` in sorted entries; returns the change in length (-1, 0 or 1).
fn set_in_entries(entries: &mut Entries, name: &[u8], new: Option<Entry>) -> i64 {
    match (search(entries, name), new) {
        (Ok(i), Some(entry)) => {
            if let Some(slot) = entries.get_mut(i) {
                slot.1 = entry;
            }
            0
        }
        (Ok(i), None) => {
            entries.remove(i);
            -1
        }
        (Err(i), Some(entry)) => {
            if entries.len() == entries.capacity() && entries.len() < EXACT_GROWTH_MAX {
                // A small directory (an account) grows by the one entry: doubling would leave
                // room unused in each of the thousands of accounts a Tezos cycle's end gives a
                // new entry (a few MiB less memory on the default replay).
                entries.reserve_exact(1);
            }
            entries.insert(i, (Name::new(name), entry));
            1
        }
        (Err(_), None) => 0,
    }
}

fn set_in_tree(
    tree: &mut InodeTree,
    name: &[u8],
    new: Option<Entry>,
    source: &dyn ObjectSource,
) -> Result<(), TreeError> {
    let index = inode_index(tree.depth, name);
    let position = match tree.find_bucket(index) {
        Ok(position) => position,
        Err(position) => {
            if let Some(entry) = new {
                let leaf = Node::new(NodeBody::Values(vec![(Name::new(name), entry)]));
                super::note_dirty(1);
                tree.children.insert(position, (index, NodeRef::Mem(Arc::new(leaf))));
                tree.length += 1;
            }
            return Ok(());
        }
    };
    let child_depth = tree.depth + 1;
    let Some((_, child)) = tree.children.get_mut(position) else {
        return Ok(());
    };
    let child = inode_mut(child, source)?;
    check_child(tree.depth, child)?;
    let before = child.length();
    let body = child.body_mut();
    let replacement = match body {
        NodeBody::Values(entries) => {
            set_in_entries(entries, name, new);
            if entries.len() > INODE_VALUES_MAX {
                Some(build(child_depth, std::mem::take(entries))?)
            } else {
                None
            }
        }
        NodeBody::Tree(sub) => {
            set_in_tree(sub, name, new, source)?;
            if sub.length <= INODE_VALUES_MAX as u64 {
                let mut all = Vec::with_capacity(sub.length as usize);
                collect_tree(sub, source, &mut all)?;
                all.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
                Some(NodeBody::Values(all))
            } else {
                None
            }
        }
        NodeBody::Flat(_) => return Err(TreeError::Malformed("a flat directory used as an inner inode")),
    };
    if let Some(replacement) = replacement {
        *body = replacement;
    }
    let after = child.length();
    if after == 0 {
        tree.children.remove(position);
    }
    // Saturating: the lengths of a stored trie are what its records claim.
    tree.length = tree.length.saturating_add(after).saturating_sub(before);
    Ok(())
}

/// The canonical inode for `entries` (sorted by name) at `depth`: `Values` when at most 32 entries
/// below the root, otherwise a `Tree` whose buckets are built recursively.
pub(crate) fn build(depth: u8, entries: Entries) -> Result<NodeBody, TreeError> {
    if depth > 0 && entries.len() <= INODE_VALUES_MAX {
        return Ok(NodeBody::Values(entries));
    }
    if depth >= INODE_MAX_DEPTH {
        return Err(TreeError::MaxDepth { depth });
    }
    let length = entries.len() as u64;
    let mut buckets: Vec<Entries> = (0..32).map(|_| Vec::new()).collect();
    for (name, entry) in entries {
        let index = usize::from(inode_index(depth, &name));
        if let Some(bucket) = buckets.get_mut(index) {
            bucket.push((name, entry));
        }
    }
    let mut children = Vec::new();
    for (index, bucket) in buckets.into_iter().enumerate() {
        if !bucket.is_empty() {
            let child = Node::new(build(depth + 1, bucket)?);
            super::note_dirty(1);
            children.push((index as u8, NodeRef::Mem(Arc::new(child))));
        }
    }
    Ok(NodeBody::Tree(InodeTree { depth, length, children }))
}

/// Appends every entry below `tree` (in bucket order, not sorted), loading stored inodes.
pub(crate) fn collect_tree(
    tree: &InodeTree,
    source: &dyn ObjectSource,
    out: &mut Entries,
) -> Result<(), TreeError> {
    for (_, child) in &tree.children {
        let child = load_inode(child, source)?;
        check_child(tree.depth, &child)?;
        match child.body() {
            NodeBody::Values(entries) | NodeBody::Flat(entries) => out.extend(entries.iter().cloned()),
            NodeBody::Tree(sub) => collect_tree(sub, source, out)?,
        }
    }
    Ok(())
}

/// Whether Irmin lists the directory `node` in the order of its inode layout
/// ([`page_by_layout`]) rather than by name ([`page_by_name`]): a directory read from a commit and
/// not modified since (stored, or in memory with the key its store wrote it at: a committed tree
/// keeps its nodes, and a change forgets the key, `Node::body_mut`). Irmin's `Tree.list` walks
/// such a node's stored inodes, and turns a modified one into a map sorted by name
/// (docs/list-order.md).
pub(crate) fn lists_by_layout(node: &NodeRef) -> bool {
    match node {
        NodeRef::Stored { .. } => true,
        NodeRef::Mem(node) => node.stored_key().is_some(),
    }
}

/// The entries `offset..offset + length` of the directory `node` in the order of the inode layout
/// Irmin gives its entries: with at most 32 entries by name; with more, bucket by bucket (index
/// `0..32` of [`inode_index`] at depth 0), each bucket listed by the same rule one level deeper. A
/// large directory's trie is walked as it is, whole buckets skipped by their lengths (a page loads
/// the inodes on its way, not the directory); a flat one (at most 256 entries) holds no buckets,
/// and its order is computed from its names, as the layout is a function of them.
pub(crate) fn page_by_layout(
    node: &Node,
    offset: usize,
    length: usize,
    source: &dyn ObjectSource,
) -> Result<Entries, TreeError> {
    match node.body() {
        NodeBody::Flat(entries) | NodeBody::Values(entries) => {
            if entries.len() <= INODE_VALUES_MAX {
                // One leaf: by name.
                return Ok(entries.iter().skip(offset).take(length).cloned().collect());
            }
            if offset >= entries.len() || length == 0 {
                return Ok(Vec::new());
            }
            let mut positions = Vec::with_capacity(entries.len());
            let all: Vec<usize> = (0..entries.len()).collect();
            layout_positions(entries, &all, 0, &mut positions)?;
            Ok(positions.iter().skip(offset).take(length).filter_map(|&i| entries.get(i).cloned()).collect())
        }
        NodeBody::Tree(tree) => {
            let mut out = Vec::with_capacity(length.min(1 << 12));
            let mut skip = u64::try_from(offset).unwrap_or(u64::MAX);
            let mut want = length;
            page_tree(tree, source, &mut skip, &mut want, &mut out)?;
            Ok(out)
        }
    }
}

/// Appends to `out` the positions `within` of `entries` (sorted by name, as `entries` are) in the
/// order of the inode Irmin builds for them at `depth`: as they are when a leaf holds them (at most
/// 32), otherwise bucket by bucket. The same shape as [`build`], which it must agree with.
fn layout_positions(
    entries: &Entries,
    within: &[usize],
    depth: u8,
    out: &mut Vec<usize>,
) -> Result<(), TreeError> {
    if within.len() <= INODE_VALUES_MAX {
        out.extend_from_slice(within);
        return Ok(());
    }
    if depth >= INODE_MAX_DEPTH {
        return Err(TreeError::MaxDepth { depth });
    }
    let mut buckets: Vec<Vec<usize>> = (0..INODE_BUCKETS).map(|_| Vec::new()).collect();
    for &i in within {
        if let Some((name, _)) = entries.get(i)
            && let Some(bucket) = buckets.get_mut(usize::from(inode_index(depth, name)))
        {
            bucket.push(i);
        }
    }
    for bucket in &buckets {
        layout_positions(entries, bucket, depth + 1, out)?;
    }
    Ok(())
}

/// Appends to `out` at most `*want` entries below `tree` in layout order, after skipping `*skip`
/// of them; a child wholly within the skipped part is skipped by its length, without a look at its
/// entries or its own children. Decrements both counts by what it skips and takes.
fn page_tree(
    tree: &InodeTree,
    source: &dyn ObjectSource,
    skip: &mut u64,
    want: &mut usize,
    out: &mut Entries,
) -> Result<(), TreeError> {
    for (_, child) in &tree.children {
        if *want == 0 {
            break;
        }
        let child = load_inode(child, source)?;
        check_child(tree.depth, &child)?;
        let length = child.length();
        if *skip >= length {
            *skip -= length;
            continue;
        }
        match child.body() {
            NodeBody::Values(entries) | NodeBody::Flat(entries) => {
                // `*skip` < the leaf's length, its entry count.
                let from = usize::try_from(*skip).unwrap_or(usize::MAX);
                *skip = 0;
                let before = out.len();
                out.extend(entries.iter().skip(from).take(*want).cloned());
                *want -= out.len() - before;
            }
            NodeBody::Tree(sub) => page_tree(sub, source, skip, want, out)?,
        }
    }
    Ok(())
}

/// The entries `offset..offset + length` of the directory `node` sorted by name bytes (as Irmin
/// lists a directory modified in memory). A large directory's entries are all gathered (a sorted
/// page depends on every name), but only the page is sorted.
pub(crate) fn page_by_name(
    node: &Node,
    offset: usize,
    length: usize,
    source: &dyn ObjectSource,
) -> Result<Entries, TreeError> {
    match node.body() {
        NodeBody::Flat(entries) | NodeBody::Values(entries) => {
            Ok(entries.iter().skip(offset).take(length).cloned().collect())
        }
        NodeBody::Tree(tree) => {
            if u64::try_from(offset).unwrap_or(u64::MAX) >= tree.length || length == 0 {
                // The length a stored inode claims: at worst an empty page of a lying record.
                return Ok(Vec::new());
            }
            // The length a stored inode claims only sizes the first allocation, within reason.
            let mut all = Vec::with_capacity(usize::try_from(tree.length.min(1 << 16)).unwrap_or(0));
            collect_tree(tree, source, &mut all)?;
            Ok(sorted_page(all, offset, length))
        }
    }
}

/// All entries of the directory `node`, sorted by name.
pub(crate) fn entries(node: &Node, source: &dyn ObjectSource) -> Result<Entries, TreeError> {
    page_by_name(node, 0, usize::MAX, source)
}

/// The entries `offset..offset + length` of `all` (unique names, in any order) once sorted by
/// name: the page is selected, then only it is sorted.
fn sorted_page(mut all: Entries, offset: usize, length: usize) -> Entries {
    let by_name = |(a, _): &(Name, Entry), (b, _): &(Name, Entry)| a.cmp(b);
    if offset >= all.len() {
        return Vec::new();
    }
    if offset > 0 {
        // Everything before `offset` is then before the page.
        all.select_nth_unstable_by(offset, by_name);
    }
    let mut page = all.split_off(offset);
    if length < page.len() {
        page.select_nth_unstable_by(length, by_name);
        page.truncate(length);
    }
    page.sort_unstable_by(by_name);
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(byte: u8) -> Entry {
        Entry::contents(vec![byte])
    }

    #[test]
    fn a_small_directory_grows_by_one_entry_a_large_one_doubles() {
        let mut entries: Entries = Vec::new();
        for i in 0..EXACT_GROWTH_MAX as u8 {
            assert_eq!(set_in_entries(&mut entries, format!("n{i:02}").as_bytes(), Some(value(i))), 1);
            assert_eq!(entries.capacity(), entries.len(), "{} entries", entries.len());
        }
        // The next insert into a full vector of EXACT_GROWTH_MAX entries doubles it: room for the
        // following ones without a reallocation each.
        let i = EXACT_GROWTH_MAX as u8;
        set_in_entries(&mut entries, format!("n{i:02}").as_bytes(), Some(value(i)));
        assert!(entries.capacity() >= 2 * EXACT_GROWTH_MAX, "capacity {} after one more", entries.capacity());
        for i in EXACT_GROWTH_MAX as u8 + 1..2 * EXACT_GROWTH_MAX as u8 {
            set_in_entries(&mut entries, format!("n{i:02}").as_bytes(), Some(value(i)));
        }
        // Sorted, each once.
        let names: Vec<&[u8]> = entries.iter().map(|(name, _)| name.as_bytes()).collect();
        assert!(names.windows(2).all(|pair| pair[0] < pair[1]));
        assert_eq!(names.len(), 2 * EXACT_GROWTH_MAX);
    }

    /// The layout order of a trie, walked whole.
    fn walk(body: &NodeBody, out: &mut Vec<Vec<u8>>) {
        match body {
            NodeBody::Flat(entries) | NodeBody::Values(entries) => {
                out.extend(entries.iter().map(|(name, _)| name.to_vec()));
            }
            NodeBody::Tree(tree) => {
                for (_, child) in &tree.children {
                    let NodeRef::Mem(child) = child else { panic!("a built trie is in memory") };
                    walk(child.body(), out);
                }
            }
        }
    }

    fn sorted_entries(names: &[Vec<u8>]) -> Entries {
        let mut entries: Entries = names.iter().map(|name| (Name::new(name), value(0))).collect();
        entries.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
        entries.dedup_by(|(a, _), (b, _)| a == b);
        entries
    }

    fn names_of(entries: &Entries) -> Vec<Vec<u8>> {
        entries.iter().map(|(name, _)| name.to_vec()).collect()
    }

    #[test]
    fn the_layout_computed_from_names_is_the_order_of_the_trie_built_from_them() {
        // A flat directory's order (computed from its names) and a trie's (walked) are two code
        // paths for one rule: the trie `build` makes for the same names, walked, must agree, and a
        // page of the walk must be its slice. Sizes on both sides of 32 and 256.
        let (mut rng, _) = larch_testkit::seeded_rng("layout_from_names_matches_the_trie", 0x1157_0cde);
        use larch_testkit::rand::Rng;
        let source = super::super::source::NoSource;
        for round in 0..60 {
            let n = match round % 6 {
                0 => rng.random_range(1..=32),
                1 => 33,
                2 => rng.random_range(33..=256),
                3 => 256,
                4 => 257,
                _ => rng.random_range(257..3000),
            };
            let names: Vec<Vec<u8>> = (0..n)
                .map(|_| {
                    let len = rng.random_range(1..12);
                    (0..len).map(|_| rng.random::<u8>()).collect()
                })
                .collect();
            let entries = sorted_entries(&names);
            let all: Vec<usize> = (0..entries.len()).collect();
            let mut positions = Vec::new();
            layout_positions(&entries, &all, 0, &mut positions).unwrap();
            let from_names: Vec<Vec<u8>> = positions.iter().map(|&i| entries[i].0.to_vec()).collect();
            if entries.len() <= INODE_VALUES_MAX {
                // Irmin's root inode is then one leaf (`build` makes tries of large directories only).
                assert_eq!(from_names, names_of(&entries), "a directory of at most 32 entries lists by name");
                continue;
            }
            let trie = build(0, entries.clone()).unwrap();
            let mut walked = Vec::new();
            walk(&trie, &mut walked);
            assert_eq!(from_names, walked, "round {round}: {} names", entries.len());
            // Pages: of the flat form (by names) and of the trie (walked, buckets skipped).
            let flat = Node::new(NodeBody::Flat(entries.clone()));
            let tree = Node::new(trie);
            for _ in 0..8 {
                let offset = rng.random_range(0..=entries.len() + 2);
                let length = rng.random_range(0..80);
                let want: Vec<Vec<u8>> = walked.iter().skip(offset).take(length).cloned().collect();
                let of_tree = names_of(&page_by_layout(&tree, offset, length, &source).unwrap());
                assert_eq!(of_tree, want, "round {round}: trie page {offset}+{length}");
                if entries.len() <= STABLE_HASH_MAX {
                    let of_flat = names_of(&page_by_layout(&flat, offset, length, &source).unwrap());
                    assert_eq!(of_flat, want, "round {round}: flat page {offset}+{length}");
                }
                let sorted: Vec<Vec<u8>> = names_of(&entries).into_iter().skip(offset).take(length).collect();
                assert_eq!(names_of(&page_by_name(&tree, offset, length, &source).unwrap()), sorted);
            }
        }
    }

    #[test]
    fn a_sorted_page_is_the_slice_of_the_sorted_entries() {
        let (mut rng, _) = larch_testkit::seeded_rng("sorted_page_is_a_slice", 0x5047_ed00);
        use larch_testkit::rand::Rng;
        for _ in 0..200 {
            let n = rng.random_range(0..100);
            let names: Vec<Vec<u8>> = (0..n).map(|_| vec![rng.random::<u8>(), rng.random::<u8>()]).collect();
            let entries = sorted_entries(&names);
            let mut shuffled = entries.clone();
            for i in (1..shuffled.len()).rev() {
                shuffled.swap(i, rng.random_range(0..=i));
            }
            let offset = rng.random_range(0..=n + 2);
            let length = if rng.random_bool(0.2) { usize::MAX } else { rng.random_range(0..40) };
            let want: Vec<Vec<u8>> = names_of(&entries).into_iter().skip(offset).take(length).collect();
            assert_eq!(
                names_of(&sorted_page(shuffled, offset, length)),
                want,
                "{n} names, {offset}+{length}"
            );
        }
    }

    #[test]
    fn names_colliding_down_to_the_depth_limit_are_refused_not_listed() {
        // 33 copies of positions of one name: every bucket at every depth holds all of them.
        let entries = sorted_entries(&[b"x".to_vec()]);
        let within = vec![0usize; 33];
        let mut out = Vec::new();
        assert!(matches!(
            layout_positions(&entries, &within, 0, &mut out),
            Err(TreeError::MaxDepth { depth: INODE_MAX_DEPTH })
        ));
    }

    #[test]
    fn a_search_finds_every_entry_and_the_place_of_every_absent_one() {
        // Sizes on both sides of the hints' bounds (`prefetch::search_probes`).
        for n in [0usize, 1, 4, 5, 39, 40, 41, 64, 256] {
            let mut entries: Entries = Vec::new();
            for i in 0..n {
                set_in_entries(&mut entries, format!("k{:04}", 2 * i + 1).as_bytes(), Some(value(1)));
            }
            for i in 0..n {
                assert_eq!(search(&entries, format!("k{:04}", 2 * i + 1).as_bytes()), Ok(i), "{n} entries");
                assert_eq!(search(&entries, format!("k{:04}", 2 * i).as_bytes()), Err(i), "{n} entries");
            }
            assert_eq!(search(&entries, b"z"), Err(n));
        }
    }
}
