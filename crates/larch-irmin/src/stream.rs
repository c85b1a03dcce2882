//! Streaming a commit's tree out of an Irmin store, children first, into a [`TreeSink`] (a larch
//! store's bulk writer): memory bounded by the depth of the tree and a bounded memo, not by its
//! size. Every object is verified as it is read.

use crate::error::{IrminError, Result};
use crate::import::MAX_NESTING;
use crate::store::{IrminCommit, IrminStore};
use larch_core::{Contents, ContentsRef, Entry, Hash, Node, NodeBody, NodeRef, ObjectKey};
use std::collections::HashMap;
use std::sync::Arc;

/// The error a sink reports (the store's own error, boxed).
pub type SinkError = Box<dyn std::error::Error + Send + Sync>;

/// The target of a directory entry given to a [`TreeSink`].
#[derive(Clone, Copy, Debug)]
pub enum SinkTarget<'a> {
    /// A sub-directory written earlier.
    Node {
        /// Its hash.
        hash: Hash,
        /// The sink's key for it.
        key: ObjectKey,
    },
    /// A small value, to be stored inside the directory record.
    Inline(&'a [u8]),
    /// A contents record written earlier.
    Contents {
        /// Its hash.
        hash: Hash,
        /// The sink's key for it.
        key: ObjectKey,
    },
}

/// Receives a tree object by object, children before their parents (the shape of larch's
/// `BulkWriter`); each method returns the key of what it wrote.
pub trait TreeSink {
    /// Values of at most this many bytes are given inline ([`SinkTarget::Inline`]).
    fn inline_max(&self) -> usize;
    /// Writes a contents record.
    fn contents(&mut self, bytes: &[u8]) -> Result<ObjectKey, SinkError>;
    /// Writes a flat directory (at most 256 entries, sorted by name).
    fn flat(&mut self, entries: &[(&[u8], SinkTarget<'_>)]) -> Result<ObjectKey, SinkError>;
    /// Writes an inode `Values` leaf (sorted by name).
    fn values(&mut self, entries: &[(&[u8], SinkTarget<'_>)]) -> Result<ObjectKey, SinkError>;
    /// Writes an inode `Tree` with its children `(bucket, hash, key)`.
    fn tree(
        &mut self,
        depth: u8,
        length: u64,
        children: &[(u8, Hash, ObjectKey)],
    ) -> Result<ObjectKey, SinkError>;
}

/// What streaming one tree read and wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// Nodes (directories and inodes) read from Irmin and written.
    pub nodes: u64,
    /// Contents values read from Irmin.
    pub contents: u64,
    /// References to an object already written (shared subtrees and values), not read again.
    pub shared: u64,
}

/// Objects remembered (Irmin offset → sink key) so that shared subtrees and values are written
/// once; past this many the memo is cleared (a later reference writes the object again: correct,
/// only larger), which bounds its memory (~40 MB).
pub const MEMO_MAX: usize = 2_000_000;

enum Resolved {
    Node(Hash, ObjectKey),
    Contents(Hash, ObjectKey),
    Inline(Arc<Contents>),
}

struct Frame {
    offset: u64,
    node: Node,
    next: usize,
    done: Vec<Resolved>,
}

fn children_count(node: &Node) -> usize {
    match node.body() {
        NodeBody::Flat(entries) | NodeBody::Values(entries) => entries.len(),
        NodeBody::Tree(tree) => tree.children.len(),
    }
}

fn sink_error(offset: u64) -> impl FnOnce(SinkError) -> IrminError {
    move |source| IrminError::Sink { offset, source }
}

/// Streams the tree of `commit` into `sink`, children first, verifying every object read; returns
/// the root's hash (the commit's tree hash) and its sink key. `progress` is called every 4,096
/// objects. Directories nested deeper than [`MAX_NESTING`] are refused.
pub fn stream_tree(
    store: &IrminStore,
    commit: &IrminCommit,
    sink: &mut dyn TreeSink,
    progress: &mut dyn FnMut(&StreamStats),
) -> Result<(Hash, ObjectKey, StreamStats)> {
    let mut stats = StreamStats::default();
    let mut nodes: HashMap<u64, ObjectKey> = HashMap::new();
    let mut contents: HashMap<u64, ObjectKey> = HashMap::new();
    let inline_max = sink.inline_max();
    let root = store.load_node(commit.tree_offset, &commit.tree_hash)?;
    stats.nodes += 1;
    let mut stack = vec![Frame { offset: commit.tree_offset, next: 0, done: Vec::new(), node: root }];
    loop {
        let Some(frame) = stack.last_mut() else {
            return Err(IrminError::corrupt(store.dir(), commit.tree_offset, "empty traversal"));
        };
        if frame.next < children_count(&frame.node) {
            let index = frame.next;
            frame.next += 1;
            // The child as the loaded node references it (a stored Irmin reference).
            let child = match frame.node.body() {
                NodeBody::Flat(entries) | NodeBody::Values(entries) => {
                    entries.get(index).map(|(_, entry)| entry.clone())
                }
                NodeBody::Tree(tree) => tree.children.get(index).map(|(_, child)| Entry::Node(child.clone())),
            };
            match child {
                Some(Entry::Contents(ContentsRef::Stored { hash, key })) => {
                    let key = store.offset_of(key)?;
                    if let Some(written) = contents.get(&key) {
                        stats.shared += 1;
                        frame.done.push(Resolved::Contents(hash, *written));
                        continue;
                    }
                    let value = Arc::new(store.load_contents(key, &hash)?);
                    stats.contents += 1;
                    if (stats.nodes + stats.contents) % 4096 == 0 {
                        progress(&stats);
                    }
                    if value.len() <= inline_max {
                        frame.done.push(Resolved::Inline(value));
                    } else {
                        let written = sink.contents(&value).map_err(sink_error(key))?;
                        if contents.len() >= MEMO_MAX {
                            contents.clear();
                        }
                        contents.insert(key, written);
                        frame.done.push(Resolved::Contents(hash, written));
                    }
                }
                Some(Entry::Node(NodeRef::Stored { hash, key })) => {
                    let key = store.offset_of(key)?;
                    if let Some(written) = nodes.get(&key) {
                        stats.shared += 1;
                        frame.done.push(Resolved::Node(hash, *written));
                        continue;
                    }
                    if stack.len() > MAX_NESTING {
                        return Err(IrminError::TooDeep { offset: key, limit: MAX_NESTING });
                    }
                    let node = store.load_node(key, &hash)?;
                    stats.nodes += 1;
                    if (stats.nodes + stats.contents) % 4096 == 0 {
                        progress(&stats);
                    }
                    stack.push(Frame { offset: key, node, next: 0, done: Vec::new() });
                }
                _ => {
                    let offset = frame.offset;
                    return Err(IrminError::corrupt(
                        store.dir(),
                        offset,
                        "a loaded node holds an in-memory child",
                    ));
                }
            }
            continue;
        }
        // Every child is written: write the node.
        let Some(frame) = stack.pop() else { break };
        let hash = frame.node.hash();
        let key = write_node(sink, &frame)?;
        if nodes.len() >= MEMO_MAX {
            nodes.clear();
        }
        nodes.insert(frame.offset, key);
        match stack.last_mut() {
            Some(parent) => parent.done.push(Resolved::Node(hash, key)),
            None => {
                progress(&stats);
                return Ok((hash, key, stats));
            }
        }
    }
    Err(IrminError::corrupt(store.dir(), commit.tree_offset, "empty traversal"))
}

fn target(resolved: &Resolved) -> SinkTarget<'_> {
    match resolved {
        Resolved::Node(hash, key) => SinkTarget::Node { hash: *hash, key: *key },
        Resolved::Contents(hash, key) => SinkTarget::Contents { hash: *hash, key: *key },
        Resolved::Inline(value) => SinkTarget::Inline(value.as_bytes()),
    }
}

fn write_node(sink: &mut dyn TreeSink, frame: &Frame) -> Result<ObjectKey> {
    match frame.node.body() {
        NodeBody::Flat(entries) | NodeBody::Values(entries) => {
            let list: Vec<(&[u8], SinkTarget<'_>)> = entries
                .iter()
                .zip(&frame.done)
                .map(|((name, _), resolved)| (name.as_bytes(), target(resolved)))
                .collect();
            let written = if matches!(frame.node.body(), NodeBody::Flat(_)) {
                sink.flat(&list)
            } else {
                sink.values(&list)
            };
            written.map_err(sink_error(frame.offset))
        }
        NodeBody::Tree(tree) => {
            let children: Vec<(u8, Hash, ObjectKey)> = tree
                .children
                .iter()
                .zip(&frame.done)
                .map(|((bucket, _), resolved)| match resolved {
                    Resolved::Node(hash, key) => Ok((*bucket, *hash, *key)),
                    _ => Err(IrminError::corrupt("", frame.offset, "inode child is not a node")),
                })
                .collect::<Result<_>>()?;
            sink.tree(tree.depth, tree.length, &children).map_err(sink_error(frame.offset))
        }
    }
}
