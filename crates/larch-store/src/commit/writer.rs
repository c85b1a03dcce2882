//! Encoding a commit: every node without a stored key (new or modified since it was loaded) becomes
//! a record, children first, into one buffer that the commit appends in a single write. A very
//! large commit (a setup block) writes its buffer past the published end whenever it reaches
//! [`FLUSH_BYTES`], so that its memory stays bounded; nothing is published before the commit's end.

use crate::error::{Result, StoreError};
use crate::format::codec::{self, INLINE_MAX, RecordKind};
use crate::format::patch::{self, EntryChange};
use crate::io::storage::Storage;
use crate::pack::reader::PackReader;
use larch_core::{
    Contents, ContentsRef, Entry, Hash, Name, Node, NodeBody, NodeRef, ObjectKey, ObjectSource, StoreId,
    TreeError,
};
use std::collections::HashMap;
use std::sync::Arc;

/// Encoded bytes a commit holds in memory before writing them past the published end.
pub(crate) const FLUSH_BYTES: usize = 8 << 20;

/// The late roots a commit notes ([`Encoder::late_roots`]) grow by a quarter instead of doubling
/// once they hold this many: a large commit's vector then overshoots its roots by a quarter at most.
const LATE_ROOTS_DOUBLING_LIMIT: usize = 1 << 16;

pub(crate) mod prime;
pub(crate) mod tables;
use prime::Decoded;
pub(crate) use prime::PrimeQueue;
pub(crate) use tables::EncoderTables;

/// Where an entry's target went.
enum Loc {
    Node(Hash, u64),
    /// A value written inline: a [`ContentsRef::Mem`] or [`ContentsRef::Inline`].
    Inline(ContentsRef),
    Contents(Hash, u64),
}

impl Loc {
    /// The bytes of an inline value.
    fn inline_bytes(&self) -> Option<&[u8]> {
        match self {
            Loc::Inline(contents) => contents.held_bytes(),
            _ => None,
        }
    }
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
    /// Node records written as patches of an earlier version (counted in their kind too).
    pub patches: u64,
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
    /// Where full buffers go (the pack), and how many bytes were already written there.
    sink: Option<&'a dyn Storage>,
    /// Bytes of this commit already written past the published end (before `buf`).
    pub flushed: u64,
    /// Nodes and contents written by address, and the nodes to mark stored.
    pub tables: EncoderTables,
    /// The records written to prime the cache with once the commit is published, so that the next
    /// checkout finds them: only the last ones (the upper levels of the tree, written last) within
    /// the priming budget are kept (more would be evicted from the cache at once, after costing
    /// memory until the commit's end), decoded once it is published ([`PrimeQueue::finish`]).
    pub records: PrimeQueue,
    /// This store's reader, to load the earlier versions (bases) of rewritten nodes; `None` when
    /// no patch records are written.
    reader: Option<&'a PackReader>,
    /// The tree's own source: the parts of the tree known by a key of another store (another
    /// repository's or store's tree, or nodes another store recorded its key on) are loaded from
    /// it and written again.
    source: &'a dyn ObjectSource,
    /// This store's identity: only its keys are positions in this pack.
    store: StoreId,
    /// Nodes and contents of other stores copied by this commit, by their key there (two maps: a
    /// source may number nodes and contents apart): each is copied once, however many references
    /// to it the tree holds.
    copied: HashMap<ObjectKey, (Hash, u64)>,
    copied_contents: HashMap<ObjectKey, (Hash, u64)>,
    /// What was written.
    pub counts: WriteCounts,
    /// While a GC runs: existing records this commit points to below this offset (the GC commit's)
    /// are *late roots* (docs/gc-design.md §4), collected in `late_roots`; 0 when no GC runs.
    late_below: u64,
    /// The late roots found (with repetitions).
    pub late_roots: Vec<u64>,
    /// Keys below this offset (collected space: the GC segments) are checked to be mapped before
    /// they are written: a pointer to a collected object is refused.
    mapped_from: u64,
    layout: Option<&'a crate::pack::layout::Layout>,
}

impl<'a> Encoder<'a> {
    /// An encoder appending to `buf` (cleared) and filling `tables` (empty), to be written at pack
    /// offset `base` of the store `store`; with a `sink`, a buffer that reaches [`FLUSH_BYTES`] is
    /// written there early. At most `prime_budget` bytes of decoded records are kept to prime the
    /// cache. Lazy parts of the tree that are not this store's load from `source`, the tree's
    /// source.
    pub fn new(
        buf: &'a mut Vec<u8>,
        (base, store): (u64, StoreId),
        sink: Option<&'a dyn Storage>,
        source: &'a dyn ObjectSource,
        reader: Option<&'a PackReader>,
        prime_budget: u64,
        tables: EncoderTables,
    ) -> Encoder<'a> {
        buf.clear();
        Encoder {
            buf,
            scratch: Vec::new(),
            base,
            sink,
            flushed: 0,
            tables,
            records: PrimeQueue::new(prime_budget),
            reader,
            source,
            store,
            copied: HashMap::new(),
            copied_contents: HashMap::new(),
            counts: WriteCounts::default(),
            late_below: 0,
            late_roots: Vec::new(),
            mapped_from: 0,
            layout: None,
        }
    }

    /// Guards this commit's pointers to existing records against garbage collection: keys below
    /// `mapped_from` must resolve in `layout` (else [`StoreError::CollectedObject`], nothing
    /// written), and keys below `late_below` are recorded as late roots of a running GC.
    pub fn guard_gc(&mut self, layout: &'a crate::pack::layout::Layout, mapped_from: u64, late_below: u64) {
        self.layout = Some(layout);
        self.mapped_from = mapped_from;
        self.late_below = late_below;
    }

    /// The pack offset of the next record.
    pub fn next_offset(&self) -> u64 {
        self.base + self.flushed + self.buf.len() as u64
    }

    /// Writes the buffer past the published end when it has grown past [`FLUSH_BYTES`]. The
    /// records stay unpublished (and ignored by readers and by recovery) until the commit's end.
    fn flush_if_large(&mut self) -> Result<()> {
        let Some(sink) = self.sink else { return Ok(()) };
        if self.buf.len() < FLUSH_BYTES {
            return Ok(());
        }
        let at = self.base + self.flushed;
        sink.write_at(at, self.buf).map_err(|e| StoreError::io(crate::FileKind::Pack, at, "write", e))?;
        self.flushed += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    /// Appends a framed record whose body was built by `fill` (given the record's offset); a body
    /// over [`MAX_BODY_LEN`](codec::MAX_BODY_LEN) is refused with [`StoreError::TooLarge`] (no
    /// reader would accept it), and nothing of it is appended.
    pub fn record(&mut self, kind: RecordKind, fill: impl FnOnce(&mut Vec<u8>, u64)) -> Result<u64> {
        let offset = self.next_offset();
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        fill(&mut scratch, offset);
        let too_large = check_body_len(kind, scratch.len() as u64);
        if too_large.is_ok() {
            codec::frame(self.buf, kind, &scratch);
        }
        self.scratch = scratch;
        too_large.map(|()| offset)
    }

    /// Writes whatever `node` needs, returning its hash and offset. `base` is the stored node at
    /// the same place in the parent commit's tree, if any: a rewritten node may be written as a
    /// patch of it.
    pub fn node(&mut self, node: &NodeRef, base: Option<(Hash, u64)>) -> Result<(Hash, u64)> {
        self.node_at(node, base, None)
    }

    /// [`Encoder::node`] for a node in the position `inode_parent` says: a directory (`None`) or
    /// an inner inode below a `Tree` inode of that depth.
    fn node_at(
        &mut self,
        node: &NodeRef,
        base: Option<(Hash, u64)>,
        inode_parent: Option<u8>,
    ) -> Result<(Hash, u64)> {
        // One level of the tree per call: the recursion is guarded (a path may be any depth).
        let written = larch_core::stack::guarded(|| self.node_inner(node, base, inode_parent))?;
        self.flush_if_large()?;
        Ok(written)
    }

    fn node_inner(
        &mut self,
        node: &NodeRef,
        base: Option<(Hash, u64)>,
        inode_parent: Option<u8>,
    ) -> Result<(Hash, u64)> {
        match node {
            NodeRef::Stored { hash, key } => match key.offset_in(self.store) {
                Some(offset) => self.own_key(*hash, offset),
                None => {
                    // Another store's position: copy the node (once), loading it from the tree's
                    // source.
                    if let Some(written) = self.copied.get(key) {
                        return Ok(*written);
                    }
                    let loaded = self
                        .source
                        .load_node(*key, hash)
                        .map_err(|e| StoreError::Tree(TreeError::from(e)))?;
                    let written = self.encode_node(&loaded, None, inode_parent)?;
                    self.copied.insert(*key, written);
                    Ok(written)
                }
            },
            NodeRef::Mem(node) => self.encode_node(node, base, inode_parent),
        }
    }

    /// The base node, loaded, with its chain length (a failure only means no patch).
    fn load_base(&self, base: Option<(Hash, u64)>) -> Option<Base> {
        let (hash, offset) = base?;
        let reader = self.reader?;
        let (node, chain) = reader.node_chained(offset, &hash, patch::MAX_CHAIN).ok()?;
        Some(Base { hash, offset, node, chain })
    }

    /// The version `node` was copied from ([`Node::origin`]) as a base, if it is a record of this
    /// store that can still be read, with a known chain length, and holds no contents value in
    /// memory that is written as a record of its own (whose position it would not know: a value
    /// unchanged since then would be written again). A failure only means no patch from it.
    fn origin_base(&self, node: &Node) -> Option<Base> {
        self.reader?;
        let origin = node.origin()?;
        let offset = origin.stored_offset_in(self.store)?;
        let chain = origin.record_chain()?;
        let hash = origin.cached_hash()?;
        if offset < codec::PACK_HEADER_LEN || offset >= self.base {
            return None;
        }
        if offset < self.mapped_from && self.layout.is_some_and(|layout| layout.resolve(offset).is_err()) {
            return None;
        }
        let values_in_memory = match origin.body() {
            NodeBody::Flat(entries) | NodeBody::Values(entries) => entries.iter().any(|(_, entry)| {
                matches!(entry, Entry::Contents(ContentsRef::Mem(contents)) if contents.len() > INLINE_MAX)
            }),
            NodeBody::Tree(_) => false,
        };
        if values_in_memory {
            return None;
        }
        Some(Base { hash, offset, node: origin, chain })
    }

    /// A position of this store that the tree refers to: it must point into the published pack
    /// (anything else is refused rather than written).
    fn own_key(&mut self, hash: Hash, key: u64) -> Result<(Hash, u64)> {
        if key < codec::PACK_HEADER_LEN || key >= self.base {
            return Err(StoreError::ForeignReference { key, hash });
        }
        self.note_existing(key)?;
        Ok((hash, key))
    }

    /// A pointer to the existing record `key` is about to be written (a child or a patch base).
    fn note_existing(&mut self, key: u64) -> Result<()> {
        if key < self.mapped_from
            && let Some(layout) = self.layout
        {
            layout.resolve(key)?;
        }
        if key < self.late_below {
            // A large commit during a GC (a burst rewriting a 10 M-entry directory) notes hundreds of
            // thousands: past `LATE_ROOTS_DOUBLING_LIMIT` the vector grows by a quarter, not twice.
            if self.late_roots.len() == self.late_roots.capacity()
                && self.late_roots.capacity() >= LATE_ROOTS_DOUBLING_LIMIT
            {
                self.late_roots.reserve_exact(self.late_roots.capacity() / 4);
            }
            self.late_roots.push(key);
        }
        Ok(())
    }

    fn contents_record(&mut self, bytes: &[u8]) -> Result<u64> {
        // Checked before the value is copied: a value over the limit is never buffered.
        check_body_len(RecordKind::Contents, bytes.len() as u64)?;
        self.counts.contents += 1;
        self.record(RecordKind::Contents, |out, _| out.extend_from_slice(bytes))
    }

    fn entry(&mut self, entry: &Entry, base: Option<(Hash, u64)>) -> Result<Loc> {
        Ok(match entry {
            Entry::Node(node) => {
                let (hash, offset) = self.node(node, base)?;
                Loc::Node(hash, offset)
            }
            Entry::Contents(contents @ ContentsRef::Mem(value)) if value.len() <= INLINE_MAX => {
                Loc::Inline(contents.clone())
            }
            Entry::Contents(contents @ ContentsRef::Inline(value))
                if value.as_bytes().len() <= INLINE_MAX =>
            {
                Loc::Inline(contents.clone())
            }
            Entry::Contents(ContentsRef::Inline(value)) => {
                // Not from a record of this format (whose inline values are at most INLINE_MAX
                // bytes): written as a contents record of its own.
                let offset = self.contents_record(value.as_bytes())?;
                Loc::Contents(value.hash(), offset)
            }
            Entry::Contents(ContentsRef::Mem(contents)) => {
                let id = Arc::as_ptr(contents) as usize;
                let offset = match self.tables.pending_contents.get(&id) {
                    Some(offset) => *offset,
                    None => {
                        let offset = self.contents_record(contents.as_bytes())?;
                        self.tables.pending_contents.insert(id, offset);
                        offset
                    }
                };
                Loc::Contents(contents.hash(), offset)
            }
            Entry::Contents(ContentsRef::Stored { hash, key }) => match key.offset_in(self.store) {
                Some(offset) => {
                    let (hash, key) = self.own_key(*hash, offset)?;
                    Loc::Contents(hash, key)
                }
                None => {
                    let loaded = self
                        .source
                        .load_contents(*key, hash)
                        .map_err(|e| StoreError::Tree(TreeError::from(e)))?;
                    if loaded.len() <= INLINE_MAX {
                        Loc::Inline(ContentsRef::Mem(loaded))
                    } else if let Some((hash, offset)) = self.copied_contents.get(key) {
                        Loc::Contents(*hash, *offset)
                    } else {
                        let offset = self.contents_record(loaded.as_bytes())?;
                        self.copied_contents.insert(*key, (*hash, offset));
                        Loc::Contents(*hash, offset)
                    }
                }
            },
        })
    }

    /// Whether `node`, about to be written as a new record of this store, can prime the cache as it
    /// is, instead of a decoded copy: it is what decoding its record would give. It must not have
    /// a stored key yet (it gets this store's key once the commit is published), and each of its
    /// children must be a stored reference into this store or an inline contents value. An
    /// in-memory child node would keep an in-memory subtree alive, out of the cache's weight
    /// (each tree checked out of the cache would then chain to the previous commits' written
    /// nodes); a contents value written as its own record would be written again by the next
    /// commit that rewrites the node, since contents carry no stored key.
    fn primes_as_is(&self, node: &Node) -> bool {
        let store = self.store;
        let own = |key: &ObjectKey| key.offset_in(store).is_some();
        node.stored_key().is_none()
            && match node.body() {
                NodeBody::Flat(entries) | NodeBody::Values(entries) => {
                    entries.iter().all(|(_, entry)| match entry {
                        Entry::Node(NodeRef::Stored { key, .. })
                        | Entry::Contents(ContentsRef::Stored { key, .. }) => own(key),
                        Entry::Node(NodeRef::Mem(_)) => false,
                        Entry::Contents(ContentsRef::Mem(contents)) => contents.len() <= INLINE_MAX,
                        Entry::Contents(ContentsRef::Inline(value)) => value.as_bytes().len() <= INLINE_MAX,
                    })
                }
                NodeBody::Tree(tree) => tree.children.iter().all(|(_, child)| match child {
                    NodeRef::Stored { key, .. } => own(key),
                    NodeRef::Mem(_) => false,
                }),
            }
    }

    fn encode_node(
        &mut self,
        node: &Arc<Node>,
        base: Option<(Hash, u64)>,
        inode_parent: Option<u8>,
    ) -> Result<(Hash, u64)> {
        check_shape(node, inode_parent)?;
        let hash = node.hash();
        if let Some(offset) = node.stored_offset_in(self.store) {
            return self.own_key(hash, offset);
        }
        let id = Arc::as_ptr(node) as usize;
        if let Some(offset) = self.tables.pending_nodes.get(&id) {
            return Ok((hash, *offset));
        }
        if let Some((base_hash, base_offset)) = base
            && base_hash == hash
        {
            // Modified, then changed back: the parent's version is this very value.
            return self.unchanged(node, id, hash, (base_offset, None));
        }
        // The version the node was copied from, if it remembers it (no lookup), else the one the
        // parent's base holds at its place.
        let base = match self.origin_base(node) {
            Some(origin) if origin.hash == hash => {
                return self.unchanged(node, id, hash, (origin.offset, Some(origin.chain)));
            }
            Some(origin) => Some(origin),
            None => self.load_base(base),
        };
        larch_core::hint_child_caches(node.body());
        let (offset, chain) = match node.body() {
            NodeBody::Flat(entries) | NodeBody::Values(entries) => {
                let base_entries = match (node.body(), base.as_ref().map(|b| b.node.body())) {
                    (NodeBody::Flat(_), Some(NodeBody::Flat(list)))
                    | (NodeBody::Values(_), Some(NodeBody::Values(list))) => Some(list),
                    _ => None,
                };
                let store = self.store;
                // The base's entry named `name`, if any.
                let base_entry = |name: &Name| -> Option<&Entry> {
                    let list = base_entries?;
                    let index = list.binary_search_by(|(probe, _)| probe.cmp(name)).ok()?;
                    list.get(index).map(|(_, entry)| entry)
                };
                let child_base = |name: &Name| -> Option<(Hash, u64)> {
                    match base_entry(name) {
                        Some(Entry::Node(child)) => stored_position(child, store),
                        _ => None,
                    }
                };
                // Only a dirty child node (in memory, without a stored key) is encoded, and only it
                // needs its base: looking the base up for every entry would cost a binary search
                // of the base's names per entry, most of them unchanged.
                // A value in memory that the base holds already (a tree kept across commits, as a
                // pipelined writer's: the value was written by an earlier commit) is pointed at.
                let base_contents = |name: &Name, contents: &Contents| -> Option<Entry> {
                    match base_entry(name) {
                        Some(stored @ Entry::Contents(ContentsRef::Stored { hash, key }))
                            if *hash == contents.hash() && key.offset_in(store).is_some() =>
                        {
                            Some(stored.clone())
                        }
                        _ => None,
                    }
                };
                let locs = entries
                    .iter()
                    .map(|(name, entry)| {
                        let child = match entry {
                            Entry::Node(NodeRef::Mem(child)) if child.stored_offset_in(store).is_none() => {
                                child_base(name)
                            }
                            Entry::Contents(ContentsRef::Mem(contents)) if contents.len() > INLINE_MAX => {
                                if let Some(stored) = base_contents(name, contents) {
                                    return self.entry(&stored, None);
                                }
                                None
                            }
                            _ => None,
                        };
                        self.entry(entry, child)
                    })
                    .collect::<Result<Vec<_>>>()?;
                let kind = if matches!(node.body(), NodeBody::Flat(_)) {
                    self.counts.flat += 1;
                    RecordKind::Flat
                } else {
                    self.counts.values += 1;
                    RecordKind::Values
                };
                self.counts.inline += locs.iter().filter(|loc| matches!(loc, Loc::Inline(_))).count() as u64;
                let changes = match (&base, base_entries) {
                    (Some(base), Some(list))
                        if patch::entries_patch_allowed(
                            matches!(node.body(), NodeBody::Flat(_)),
                            entries.len(),
                            base.chain,
                            self.base.saturating_sub(base.offset),
                        ) =>
                    {
                        entry_changes(entries, &locs, list, self.store)
                            .filter(|changes| changes.len() * 2 <= entries.len())
                    }
                    _ => None,
                };
                let written = match (&base, changes) {
                    (Some(base), Some(changes)) => {
                        self.counts.patches += 1;
                        let head = (base.hash, base.offset);
                        self.note_existing(base.offset)?;
                        let chain = base.chain + 1;
                        let offset = self.record(RecordKind::PatchEntries, |out, offset| {
                            patch::encode_head(out, offset, head, chain);
                            let list: Vec<EntryChange<'_>> = changes
                                .iter()
                                .map(|change| match change {
                                    Change::Set(i) => {
                                        let name =
                                            entries.get(*i).map_or(&[][..], |(name, _)| name.as_bytes());
                                        EntryChange::Set(name, target_of(locs.get(*i)))
                                    }
                                    Change::Remove(name) => EntryChange::Remove(name.as_bytes()),
                                })
                                .collect();
                            patch::encode_entries(out, offset, &list);
                        })?;
                        (offset, chain)
                    }
                    _ => {
                        let offset = self.record(kind, |out, offset| {
                            larch_varint::encode(out, entries.len() as u64);
                            for ((name, _), loc) in entries.iter().zip(&locs) {
                                codec::encode_entry(out, offset, name.as_bytes(), &target_of(Some(loc)));
                            }
                        })?;
                        (offset, 0)
                    }
                };
                let decoded = if self.primes_as_is(node) {
                    Decoded::AsIs(node.clone())
                } else {
                    Decoded::Entries(node.clone(), locs)
                };
                self.records.push(written, hash, decoded);
                written
            }
            NodeBody::Tree(tree) => {
                let base_tree = match base.as_ref().map(|b| b.node.body()) {
                    Some(NodeBody::Tree(base_tree)) if base_tree.depth == tree.depth => Some(base_tree),
                    _ => None,
                };
                let base_children = base_tree.map(|base_tree| &base_tree.children);
                let store = self.store;
                let child_base = |bucket: u8| -> Option<(Hash, u64)> {
                    let base_tree = base_tree?;
                    let index = base_tree.find_bucket(bucket).ok()?;
                    base_tree.children.get(index).and_then(|(_, child)| stored_position(child, store))
                };
                // As for entries: only a dirty child needs its base (a binary search of the base's
                // children, cold in memory, per child was ~5% of a flat-key benchmark's CPU).
                let children = tree
                    .children
                    .iter()
                    .map(|(bucket, child)| {
                        let base = match child {
                            NodeRef::Mem(node) if node.stored_offset_in(store).is_none() => {
                                child_base(*bucket)
                            }
                            _ => None,
                        };
                        Ok((*bucket, self.node_at(child, base, Some(tree.depth))?))
                    })
                    .collect::<Result<Vec<_>>>()?;
                self.counts.tree += 1;
                let changes = match (&base, base_children) {
                    (Some(base), Some(list)) if base.chain < patch::MAX_CHAIN => {
                        Some(bucket_changes(&children, list, store))
                            .filter(|changes| changes.len() * 2 <= children.len())
                    }
                    _ => None,
                };
                let written = match (&base, changes) {
                    (Some(base), Some(changes)) => {
                        self.counts.patches += 1;
                        let head = (base.hash, base.offset);
                        self.note_existing(base.offset)?;
                        let chain = base.chain + 1;
                        let offset = self.record(RecordKind::PatchTree, |out, offset| {
                            patch::encode_head(out, offset, head, chain);
                            patch::encode_tree(out, offset, tree.length, &changes);
                        })?;
                        (offset, chain)
                    }
                    _ => {
                        let offset = self.record(RecordKind::Tree, |out, offset| {
                            codec::encode_tree_head(out, tree.depth, tree.length, children.len());
                            for (bucket, (hash, child)) in &children {
                                codec::encode_tree_child(out, offset, *bucket, hash, *child);
                            }
                        })?;
                        (offset, 0)
                    }
                };
                let decoded = if self.primes_as_is(node) {
                    Decoded::AsIs(node.clone())
                } else {
                    Decoded::Tree { depth: tree.depth, length: tree.length, children }
                };
                self.records.push(written, hash, decoded);
                written
            }
        };
        self.written(node, id, hash, (offset, chain))
    }

    /// Records that `node` (at address `id`, of hash `hash`) was written at `offset`, a record of
    /// patch chain length `chain`.
    fn written(
        &mut self,
        node: &Arc<Node>,
        id: usize,
        hash: Hash,
        (offset, chain): (u64, u8),
    ) -> Result<(Hash, u64)> {
        self.tables.pending_nodes.insert(id, offset);
        self.tables.marks.push((node.clone(), offset, Some(chain)));
        Ok((hash, offset))
    }

    /// Points at the stored record `offset` (of chain length `chain`, if known) for `node` (at
    /// address `id`, of hash `hash`), which holds the same value: copied for a change and
    /// changed back. The node is marked stored there like a written one, so that it is referred
    /// to by key from then on (a node left without a key would stay in memory in every later
    /// tree, its origin with it, and each parent patched on a version holding it would list it
    /// as changed).
    fn unchanged(
        &mut self,
        node: &Arc<Node>,
        id: usize,
        hash: Hash,
        (offset, chain): (u64, Option<u8>),
    ) -> Result<(Hash, u64)> {
        let at = self.own_key(hash, offset)?;
        self.tables.pending_nodes.insert(id, offset);
        self.tables.marks.push((node.clone(), offset, chain));
        Ok(at)
    }
}

mod diff;
use diff::{Change, bucket_changes, entry_changes, stored_position, target_of};

/// Refuses a node that cannot stand where it is: a directory must be flat or an inode root (depth
/// 0), an inner inode below a `Tree` at depth `d` a `Values` leaf or a `Tree` at `d + 1`. (The
/// tree's own operations only build such nodes; a part copied from another source is checked, so
/// that a malformed source cannot make the copy endless.)
fn check_shape(node: &Node, inode_parent: Option<u8>) -> Result<()> {
    let fits = match (inode_parent, node.body()) {
        (None, NodeBody::Flat(_)) => true,
        (None, NodeBody::Tree(tree)) => tree.depth == 0,
        (Some(_), NodeBody::Values(_)) => true,
        (Some(depth), NodeBody::Tree(tree)) => u16::from(tree.depth) == u16::from(depth) + 1,
        _ => false,
    };
    if fits {
        Ok(())
    } else {
        Err(StoreError::Tree(TreeError::Malformed(
            "a node of the wrong shape or depth for its place in the tree",
        )))
    }
}

/// Refuses a record body of `len` bytes over the format's limit.
pub(crate) fn check_body_len(kind: RecordKind, len: u64) -> Result<()> {
    if len > codec::MAX_BODY_LEN {
        return Err(StoreError::TooLarge(format!(
            "a {} record of {len} bytes (at most {} are allowed); nothing was written",
            kind.name(),
            codec::MAX_BODY_LEN
        )));
    }
    Ok(())
}

/// A loaded base: the stored version a rewritten node may be written as a patch of.
struct Base {
    hash: Hash,
    offset: u64,
    node: Arc<Node>,
    chain: u8,
}
