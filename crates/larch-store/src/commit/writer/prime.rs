//! The records a commit primes the cache with: the last ones written (the upper levels of the
//! tree, written last) within a budget of cache weight.
//!
//! A record is kept as what it takes to make its decoded node (the written node and where its
//! entries' targets went, or an inner inode's children positions), and the node is made only for
//! the records still within the budget once the commit is published. A pipelined writer's budget
//! is 1/1024 of the cache (about a tenth of a regular block's records): making every record's
//! decoded copy, then dropping most of them at once, was ~10% of the commit thread's time on the
//! default replay.

use super::Loc;
use crate::pack::reader::{entries_weight, node_weight, tree_weight};
use larch_core::{Entry, Hash, InodeTree, Node, NodeBody, NodeRef, ObjectKey, StoreId};
use std::collections::VecDeque;
use std::sync::Arc;

/// A record just written, decoded, to prime the cache with.
pub(crate) struct PrimedRecord {
    /// Where it was written.
    pub offset: u64,
    /// The node, its children as stored references.
    pub node: Arc<Node>,
    /// Its patch chain length (0 for a full record).
    pub chain: u8,
    /// Its cache weight ([`node_weight`]), computed once.
    pub weight: u32,
}

/// How a kept record's decoded node is made.
pub(super) enum Decoded {
    /// The written node itself: its children are already stored references of this store or
    /// inline values (`Encoder::primes_as_is`).
    AsIs(Arc<Node>),
    /// A directory or `Values` inode: the written node's names, each with where its target went
    /// (one per entry, in order).
    Entries(Arc<Node>, Vec<Loc>),
    /// A `Tree` inode: its children's buckets, hashes and positions.
    Tree { depth: u8, length: u64, children: Vec<(u8, (Hash, u64))> },
}

impl Decoded {
    /// The cache weight ([`node_weight`]) of the node this makes.
    fn weight(&self) -> u32 {
        match self {
            Decoded::AsIs(node) => node_weight(node),
            Decoded::Entries(node, locs) => match node.body() {
                NodeBody::Flat(entries) | NodeBody::Values(entries) => {
                    entries_weight(entries.iter().zip(locs).map(|((name, _), loc)| {
                        let value = match loc {
                            Loc::Inline(contents) => Some(contents),
                            Loc::Node(..) | Loc::Contents(..) => None,
                        };
                        (name.len(), value)
                    }))
                }
                // Never kept so (the encoder keeps an inner inode as `Tree`): no node is made.
                NodeBody::Tree(_) => 0,
            },
            Decoded::Tree { children, .. } => tree_weight(children.len()),
        }
    }
}

/// A record kept until the commit's end.
struct Pending {
    offset: u64,
    hash: Hash,
    chain: u8,
    /// The cache weight of the node `decoded` makes.
    weight: u32,
    decoded: Decoded,
}

/// The last records written within a budget of cache weight.
pub(crate) struct PrimeQueue {
    pending: VecDeque<Pending>,
    weight: u64,
    budget: u64,
}

impl PrimeQueue {
    /// An empty queue keeping at most `budget` bytes of cache weight.
    pub(super) fn new(budget: u64) -> PrimeQueue {
        PrimeQueue { pending: VecDeque::new(), weight: 0, budget }
    }

    /// Keeps the record of hash `hash` written at `offset` with patch chain length `chain`, whose
    /// decoded node `decoded` makes; drops the oldest records beyond the budget.
    pub(super) fn push(&mut self, (offset, chain): (u64, u8), hash: Hash, decoded: Decoded) {
        let weight = decoded.weight();
        self.weight += u64::from(weight);
        self.pending.push_back(Pending { offset, hash, chain, weight, decoded });
        while self.weight > self.budget {
            let Some(dropped) = self.pending.pop_front() else { break };
            self.weight = self.weight.saturating_sub(u64::from(dropped.weight));
        }
    }

    /// The records kept, decoded, their children positions in `store`, in the order written.
    pub(crate) fn finish(self, store: StoreId) -> Vec<PrimedRecord> {
        self.pending
            .into_iter()
            .filter_map(|Pending { offset, hash, chain, weight, decoded }| {
                let node = match decoded {
                    Decoded::AsIs(node) => node,
                    Decoded::Entries(node, locs) => {
                        Arc::new(stored_node(entries_body(&node, locs, store)?, hash, store, offset))
                    }
                    Decoded::Tree { depth, length, children } => {
                        let children = children
                            .into_iter()
                            .map(|(bucket, (hash, at))| {
                                (bucket, NodeRef::Stored { hash, key: ObjectKey::new(store, at) })
                            })
                            .collect();
                        let body = NodeBody::Tree(InodeTree { depth, length, children });
                        Arc::new(stored_node(body, hash, store, offset))
                    }
                };
                debug_assert_eq!(weight, node_weight(&node), "the weight of the record at {offset}");
                Some(PrimedRecord { offset, node, chain, weight })
            })
            .collect()
    }
}

/// The body of `node` (a directory or `Values` inode) with each entry's target where `locs` says
/// it went; `None` for an inner inode (which the encoder keeps as [`Decoded::Tree`], never so).
fn entries_body(node: &Node, locs: Vec<Loc>, store: StoreId) -> Option<NodeBody> {
    let (NodeBody::Flat(entries) | NodeBody::Values(entries)) = node.body() else {
        return None;
    };
    let stored = entries
        .iter()
        .zip(locs)
        .map(|((name, _), loc)| {
            let target = match loc {
                Loc::Node(hash, offset) => {
                    Entry::Node(NodeRef::Stored { hash, key: ObjectKey::new(store, offset) })
                }
                Loc::Contents(hash, offset) => Entry::Contents(larch_core::ContentsRef::Stored {
                    hash,
                    key: ObjectKey::new(store, offset),
                }),
                Loc::Inline(contents) => Entry::Contents(contents),
            };
            (name.clone(), target)
        })
        .collect();
    Some(match node.body() {
        NodeBody::Flat(_) => NodeBody::Flat(stored),
        _ => NodeBody::Values(stored),
    })
}

/// `body`, of hash `hash`, as the node stored at `offset` of `store`.
fn stored_node(body: NodeBody, hash: Hash, store: StoreId, offset: u64) -> Node {
    let node = Node::with_hash(body, hash);
    node.set_stored_key(ObjectKey::new(store, offset));
    node
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::codec::INLINE_MAX;
    use larch_core::{ContentsRef, Name, SharedBytes};

    /// A directory (`Flat`, or `Values` when `leaf`) of `n` entries and where each went: a large
    /// value (written as its own record), a sub-directory, then small values (inline), every other
    /// one held in a shared buffer as a decoded node holds it.
    fn directory(n: usize, leaf: bool) -> (Arc<Node>, Vec<Loc>) {
        let mut entries = Vec::new();
        let mut locs = Vec::new();
        let buffer = SharedBytes::new(b"shared");
        for i in 0..n {
            let name = Name::new(format!("entry{i:03}").as_bytes());
            let (entry, loc) = match i {
                0 => (Entry::contents(vec![7; INLINE_MAX + 1000]), Loc::Contents(Hash([1; 32]), 4096)),
                1 => {
                    let child = Arc::new(Node::new(NodeBody::Flat(Vec::new())));
                    (Entry::Node(NodeRef::Mem(child)), Loc::Node(Hash([2; 32]), 8192))
                }
                _ => {
                    let contents = match i % 2 {
                        0 => ContentsRef::Mem(Arc::new(larch_core::Contents::new(vec![i as u8; 3]))),
                        _ => ContentsRef::Inline(buffer.value(0..i.min(6)).expect("within the buffer")),
                    };
                    (Entry::Contents(contents.clone()), Loc::Inline(contents))
                }
            };
            entries.push((name, entry));
            locs.push(loc);
        }
        let body = if leaf { NodeBody::Values(entries) } else { NodeBody::Flat(entries) };
        (Arc::new(Node::new(body)), locs)
    }

    #[test]
    fn a_kept_record_weighs_what_its_decoded_node_weighs_and_only_the_last_fit() {
        let store = StoreId::fresh();
        let (node, locs) = directory(6, false);
        let weight = Decoded::Entries(node.clone(), locs).weight();
        // The large value is a stored reference in the decoded node: it does not weigh there.
        assert!(weight < node_weight(&node), "{weight} against {}", node_weight(&node));

        // Room for two such records: of four pushed, the last two are kept, in order.
        let mut queue = PrimeQueue::new(2 * u64::from(weight) + 10);
        for i in 0..4u64 {
            let (node, locs) = directory(6, i % 2 == 1);
            queue.push((1000 + i, i as u8), Hash([i as u8; 32]), Decoded::Entries(node, locs));
        }
        let kept = queue.finish(store);
        assert_eq!(
            kept.iter().map(|record| (record.offset, record.chain)).collect::<Vec<_>>(),
            [(1002, 2), (1003, 3)]
        );
        for record in &kept {
            assert_eq!(record.weight, node_weight(&record.node), "at {}", record.offset);
            assert_eq!(record.node.stored_offset_in(store), Some(record.offset));
            assert_eq!(record.node.hash(), Hash([(record.offset - 1000) as u8; 32]));
            let entries = match (record.offset, record.node.body()) {
                (1002, NodeBody::Flat(entries)) | (1003, NodeBody::Values(entries)) => entries,
                _ => panic!("the record at {} changed kind", record.offset),
            };
            assert_eq!(entries.len(), 6);
            match &entries[0].1 {
                Entry::Contents(ContentsRef::Stored { key, .. }) => {
                    assert_eq!(key.offset_in(store), Some(4096))
                }
                _ => panic!("the large value is not a stored reference"),
            }
            match &entries[1].1 {
                Entry::Node(NodeRef::Stored { hash, key }) => {
                    assert_eq!((*hash, key.offset_in(store)), (Hash([2; 32]), Some(8192)));
                }
                _ => panic!("the sub-directory is not a stored reference"),
            }
            assert!(matches!(&entries[2].1, Entry::Contents(ContentsRef::Mem(c)) if c.as_bytes() == [2; 3]));
            assert!(
                matches!(&entries[3].1, Entry::Contents(ContentsRef::Inline(v)) if v.as_bytes() == b"sha")
            );
        }
    }

    #[test]
    fn inner_inodes_and_nodes_kept_as_they_are_are_primed_too() {
        let store = StoreId::fresh();
        let children = vec![(3, (Hash([3; 32]), 100)), (9, (Hash([9; 32]), 200))];
        let as_is = Arc::new(Node::new(NodeBody::Flat(Vec::new())));
        let mut queue = PrimeQueue::new(1 << 20);
        queue.push((300, 1), Hash([5; 32]), Decoded::Tree { depth: 2, length: 70, children });
        queue.push((400, 0), Hash([6; 32]), Decoded::AsIs(as_is.clone()));
        let kept = queue.finish(store);
        assert_eq!(kept.len(), 2);
        let NodeBody::Tree(tree) = kept[0].node.body() else { panic!("not an inner inode") };
        assert_eq!((tree.depth, tree.length, kept[0].weight), (2, 70, node_weight(&kept[0].node)));
        let positions: Vec<_> = tree
            .children
            .iter()
            .map(|(bucket, child)| match child {
                NodeRef::Stored { hash, key } => (*bucket, *hash, key.offset_in(store)),
                NodeRef::Mem(_) => panic!("a child in memory"),
            })
            .collect();
        assert_eq!(positions, [(3, Hash([3; 32]), Some(100)), (9, Hash([9; 32]), Some(200))]);
        assert_eq!(kept[0].node.stored_offset_in(store), Some(300));
        assert!(Arc::ptr_eq(&kept[1].node, &as_is), "a node kept as it is was copied");
        assert_eq!(kept[1].weight, node_weight(&as_is));
    }

    #[test]
    fn a_record_heavier_than_the_budget_is_not_kept() {
        let (node, locs) = directory(6, false);
        let weight = Decoded::Entries(node.clone(), locs).weight();
        let mut queue = PrimeQueue::new(u64::from(weight) - 1);
        let (node, locs) = directory(6, false);
        queue.push((1000, 0), Hash([0; 32]), Decoded::Entries(node, locs));
        assert!(queue.finish(StoreId::fresh()).is_empty());
    }
}
