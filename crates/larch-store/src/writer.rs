//! Encoding a commit: every node without a stored key (new or modified since it was loaded) becomes
//! a record, children first, into one buffer that the commit appends in a single write.

use crate::codec::{self, EncodedTarget, INLINE_MAX, RecordKind};
use crate::error::{Result, StoreError};
use larch_core::{ContentsRef, Entry, Hash, Node, NodeBody, NodeRef, ObjectSource, TreeError};
use std::collections::HashMap;
use std::sync::Arc;

/// Where an entry's target went.
enum Loc {
    Node(Hash, u64),
    Inline,
    Contents(Hash, u64),
}

/// Counts of what one commit wrote, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteCounts {
    /// Contents records.
    pub contents: u64,
    /// Flat directory records.
    pub flat: u64,
    /// `Values` inode records.
    pub values: u64,
    /// `Tree` inode records.
    pub tree: u64,
    /// Contents stored inline in the records written.
    pub inline: u64,
}

impl WriteCounts {
    /// Records written (commits excluded).
    pub fn objects(&self) -> u64 {
        self.contents + self.flat + self.values + self.tree
    }
}

/// Appends the records of the dirty part of a tree to `buf`, which will be written at `base`.
pub(crate) struct Encoder<'a> {
    buf: &'a mut Vec<u8>,
    scratch: Vec<u8>,
    base: u64,
    pending_nodes: HashMap<usize, u64>,
    pending_contents: HashMap<usize, u64>,
    /// Nodes written, with their offsets: marked stored once the commit is published.
    pub marks: Vec<(Arc<Node>, u64)>,
    /// The tree's own source when it is not this store's: everything is re-encoded, loading lazy
    /// parts from it, and recorded keys are ignored.
    foreign: Option<&'a dyn ObjectSource>,
    /// What was written.
    pub counts: WriteCounts,
}

impl<'a> Encoder<'a> {
    /// An encoder appending to `buf` (cleared), to be written at pack offset `base`.
    pub fn new(buf: &'a mut Vec<u8>, base: u64, foreign: Option<&'a dyn ObjectSource>) -> Encoder<'a> {
        buf.clear();
        Encoder {
            buf,
            scratch: Vec::new(),
            base,
            pending_nodes: HashMap::new(),
            pending_contents: HashMap::new(),
            marks: Vec::new(),
            foreign,
            counts: WriteCounts::default(),
        }
    }

    /// The pack offset of the next record.
    pub fn next_offset(&self) -> u64 {
        self.base + self.buf.len() as u64
    }

    /// Appends a framed record whose body was built by `fill` (given the record's offset).
    pub fn record(&mut self, kind: RecordKind, fill: impl FnOnce(&mut Vec<u8>, u64)) -> u64 {
        let offset = self.next_offset();
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        fill(&mut scratch, offset);
        codec::frame(self.buf, kind, &scratch);
        self.scratch = scratch;
        offset
    }

    /// Writes whatever `node` needs, returning its hash and offset.
    pub fn node(&mut self, node: &NodeRef) -> Result<(Hash, u64)> {
        match node {
            NodeRef::Stored { hash, key } => match self.foreign {
                None => Ok((*hash, *key)),
                Some(source) => {
                    let loaded = source.load_node(*key, hash).map_err(|e| StoreError::Tree(TreeError::from(e)))?;
                    self.encode_node(&loaded)
                }
            },
            NodeRef::Mem(node) => self.encode_node(node),
        }
    }

    fn contents_record(&mut self, bytes: &[u8]) -> u64 {
        self.counts.contents += 1;
        self.record(RecordKind::Contents, |out, _| out.extend_from_slice(bytes))
    }

    fn entry(&mut self, entry: &Entry) -> Result<Loc> {
        Ok(match entry {
            Entry::Node(node) => {
                let (hash, offset) = self.node(node)?;
                Loc::Node(hash, offset)
            }
            Entry::Contents(ContentsRef::Mem(contents)) if contents.len() <= INLINE_MAX => Loc::Inline,
            Entry::Contents(ContentsRef::Mem(contents)) => {
                let id = Arc::as_ptr(contents) as usize;
                let offset = match self.pending_contents.get(&id) {
                    Some(offset) => *offset,
                    None => {
                        let offset = self.contents_record(contents.as_bytes());
                        self.pending_contents.insert(id, offset);
                        offset
                    }
                };
                Loc::Contents(contents.hash(), offset)
            }
            Entry::Contents(ContentsRef::Stored { hash, key }) => match self.foreign {
                None => Loc::Contents(*hash, *key),
                Some(source) => {
                    let loaded =
                        source.load_contents(*key, hash).map_err(|e| StoreError::Tree(TreeError::from(e)))?;
                    if loaded.len() <= INLINE_MAX {
                        Loc::Inline
                    } else {
                        Loc::Contents(*hash, self.contents_record(loaded.as_bytes()))
                    }
                }
            },
        })
    }

    fn encode_node(&mut self, node: &Arc<Node>) -> Result<(Hash, u64)> {
        let hash = node.hash();
        if self.foreign.is_none()
            && let Some(key) = node.stored_key()
        {
            return Ok((hash, key));
        }
        let id = Arc::as_ptr(node) as usize;
        if let Some(offset) = self.pending_nodes.get(&id) {
            return Ok((hash, *offset));
        }
        let offset = match node.body() {
            NodeBody::Flat(entries) | NodeBody::Values(entries) => {
                let locs = entries.iter().map(|(_, entry)| self.entry(entry)).collect::<Result<Vec<_>>>()?;
                // Inline values of foreign stored contents must be loaded again for their bytes.
                let mut inline_bytes: Vec<Option<Arc<larch_core::Contents>>> = Vec::new();
                if self.foreign.is_some() {
                    for ((_, entry), loc) in entries.iter().zip(&locs) {
                        inline_bytes.push(match (entry, loc, self.foreign) {
                            (Entry::Contents(ContentsRef::Stored { hash, key }), Loc::Inline, Some(source)) => {
                                Some(source.load_contents(*key, hash).map_err(|e| StoreError::Tree(e.into()))?)
                            }
                            _ => None,
                        });
                    }
                }
                let kind = if matches!(node.body(), NodeBody::Flat(_)) {
                    self.counts.flat += 1;
                    RecordKind::Flat
                } else {
                    self.counts.values += 1;
                    RecordKind::Values
                };
                let mut inline = 0;
                let offset = self.record(kind, |out, offset| {
                    larch_core::schema::write_leb128(out, entries.len() as u64);
                    for (i, ((name, entry), loc)) in entries.iter().zip(&locs).enumerate() {
                        let target = match loc {
                            Loc::Node(hash, child) => EncodedTarget::Node(*hash, *child),
                            Loc::Contents(hash, child) => EncodedTarget::Contents(*hash, *child),
                            Loc::Inline => {
                                inline += 1;
                                match (entry, inline_bytes.get(i)) {
                                    (Entry::Contents(ContentsRef::Mem(contents)), _) => {
                                        EncodedTarget::Inline(contents.as_bytes())
                                    }
                                    (_, Some(Some(contents))) => EncodedTarget::Inline(contents.as_bytes()),
                                    _ => EncodedTarget::Inline(&[]),
                                }
                            }
                        };
                        codec::encode_entry(out, offset, name.as_bytes(), &target);
                    }
                });
                self.counts.inline += inline;
                offset
            }
            NodeBody::Tree(tree) => {
                let children = tree
                    .children
                    .iter()
                    .map(|(bucket, child)| Ok((*bucket, self.node(child)?)))
                    .collect::<Result<Vec<_>>>()?;
                self.counts.tree += 1;
                self.record(RecordKind::Tree, |out, offset| {
                    codec::encode_tree_head(out, tree.depth, tree.length, children.len());
                    for (bucket, (hash, child)) in &children {
                        codec::encode_tree_child(out, offset, *bucket, hash, *child);
                    }
                })
            }
        };
        self.pending_nodes.insert(id, offset);
        self.marks.push((node.clone(), offset));
        Ok((hash, offset))
    }
}
