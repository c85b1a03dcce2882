//! Hashing a node together with its in-memory descendants that have no hash yet, level by level
//! from the deepest one up, several pre-images at a time: BLAKE2b computes four independent
//! hashes at once in the lanes of a SIMD register (`blake2b_simd::many`, AVX2), at about half the
//! cost of four hashes one after the other (1.8× on one-block inputs, 2.0× on longer ones). The
//! nodes of one level, and the contents values of a batch of them, are independent by
//! construction; the hashes are those of the schema alone, whichever order computes them.

use super::{ContentsRef, Entry, Node, NodeBody, NodeRef};
use crate::hash::{Hash, blake2b_params};
use crate::schema;
use blake2b_simd::many::{HashManyJob, hash_many};
use std::cell::RefCell;
use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

/// Nodes hashed in one batch: enough to fill the SIMD lanes with pre-images of similar lengths,
/// few enough that a batch's pre-images stay in the CPU's caches (a few hundred KiB at most for
/// typical directories). 8, 16 and 256 ran as fast on the default replay.
const BATCH_NODES: usize = 64;

/// Pre-images handed to BLAKE2b at once (a bounded array of jobs, not one per input).
const JOBS_AT_ONCE: usize = 32;

/// Contents values longer than this are hashed alone, not copied into a batch's buffer (they
/// are rare: contract code and storage; a copy would cost more than the lanes save).
const BATCHED_CONTENTS_MAX: usize = 4096;

/// A thread's scratch buffers are kept up to this many bytes each.
const KEEP_SCRATCH_BYTES: usize = 1 << 20;

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Computes and caches the hashes of `roots` and of their in-memory descendants that lack one.
pub(super) fn hash_all(roots: &[&Node]) {
    with_scratch(|scratch| {
        let levels = unhashed_levels(roots, &mut scratch.seen);
        for level in levels.iter().rev() {
            for batch in level.chunks(BATCH_NODES) {
                hash_batch(batch, scratch);
            }
        }
    });
}

/// The hash of `node` computed alone, from the cached hashes of its children (computing those
/// it lacks).
pub(super) fn hash_alone(node: &Node) -> Hash {
    with_scratch(|scratch| {
        gather_contents(&[node], scratch);
        let Scratch { contents_hashes, pre_images, .. } = scratch;
        pre_images.clear();
        write_pre_image(node, &mut contents_hashes.iter().copied(), &mut pre_images.bytes);
        Hash::of_bytes(&pre_images.bytes)
    })
}

/// Runs `f` on this thread's scratch buffers (fresh ones if they are in use: a hash computed
/// while another is, for a node shared with a level not hashed yet), trimmed afterwards.
fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut scratch) => {
            let result = f(&mut scratch);
            scratch.trim();
            result
        }
        Err(_) => f(&mut Scratch::default()),
    })
}

/// The nodes of `roots` without a cached hash and, level by level below them, the in-memory
/// nodes without one, each once (a node shared by several parents, as a copy makes, is listed at
/// the first level reaching it: without that, a tree of copies of copies would be walked once per
/// path, exponentially many times).
fn unhashed_levels<'a>(roots: &[&'a Node], seen: &mut AddressSet) -> Vec<Vec<&'a Node>> {
    seen.clear();
    let mut next: Vec<&'a Node> = Vec::new();
    for &root in roots {
        if root.hash.get().is_none() && seen.insert(std::ptr::from_ref(root) as usize) {
            next.push(root);
        }
    }
    let mut levels = Vec::new();
    while !next.is_empty() {
        let mut below = Vec::new();
        for &node in &next {
            let mut visit = |child: &'a NodeRef| {
                if let NodeRef::Mem(child) = child {
                    // A node held once has one parent here: only shared ones need the set.
                    if child.hash.get().is_none()
                        && (std::sync::Arc::strong_count(child) == 1
                            || seen.insert(std::ptr::from_ref::<Node>(child) as usize))
                    {
                        below.push(&**child);
                    }
                }
            };
            node.body.for_each_child(&mut visit);
        }
        levels.push(std::mem::replace(&mut next, below));
    }
    levels
}

/// Hashes of addresses: the address itself, its alignment bits shifted out and the rest spread
/// (a pointer set lookup per node listed costs a multiplication, not SipHash).
#[derive(Default)]
struct PointerHasher(u64);

impl Hasher for PointerHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0 << 8 | u64::from(*byte)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_usize(&mut self, value: usize) {
        self.0 = ((value as u64) >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A set of addresses.
type AddressSet = HashSet<usize, BuildHasherDefault<PointerHasher>>;

/// Buffers reused from batch to batch, and from call to call on one thread.
#[derive(Default)]
struct Scratch {
    /// The nodes met more than once while listing levels.
    seen: AddressSet,
    /// The hash of each contents entry of the batch's `Flat` and `Values` nodes, in order.
    contents_hashes: Vec<Hash>,
    /// The places in `contents_hashes` of the hashes `contents_inputs` computes, in order.
    pending: Vec<usize>,
    contents_inputs: Inputs,
    pre_images: Inputs,
    computed: Vec<Hash>,
}

impl Scratch {
    /// Gives back the memory of buffers that a large batch grew.
    fn trim(&mut self) {
        for bytes in [&mut self.contents_inputs.bytes, &mut self.pre_images.bytes] {
            if bytes.capacity() > KEEP_SCRATCH_BYTES {
                *bytes = Vec::new();
            }
        }
        if self.seen.capacity() > KEEP_SCRATCH_BYTES / 8 {
            self.seen = AddressSet::default();
        }
    }
}

/// Byte strings laid end to end, hashed together.
#[derive(Default)]
struct Inputs {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Inputs {
    fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }

    /// Ends the input begun after the previous one.
    fn end_input(&mut self) {
        self.ends.push(self.bytes.len());
    }

    /// Appends the hash of each input, in order, to `out`.
    fn hash_all(&self, out: &mut Vec<Hash>) {
        let params = blake2b_params();
        let mut jobs: Vec<HashManyJob<'_>> = Vec::with_capacity(self.ends.len().min(JOBS_AT_ONCE));
        let mut start = 0;
        for ends in self.ends.chunks(JOBS_AT_ONCE) {
            jobs.clear();
            for &end in ends {
                jobs.push(HashManyJob::new(&params, self.bytes.get(start..end).unwrap_or_default()));
                start = end;
            }
            hash_many(jobs.iter_mut());
            out.extend(jobs.iter().map(|job| Hash::from_digest(job.to_hash())));
        }
    }
}

/// Fills `contents_hashes` with the hash of each contents entry of `nodes`: known ones (cached
/// or stored) as they are, the others computed (several at a time).
fn gather_contents(nodes: &[&Node], scratch: &mut Scratch) {
    let Scratch { contents_hashes, pending, contents_inputs, computed, .. } = scratch;
    contents_hashes.clear();
    pending.clear();
    contents_inputs.clear();
    for node in nodes {
        let (NodeBody::Flat(entries) | NodeBody::Values(entries)) = &node.body else { continue };
        for (_, entry) in entries {
            let Entry::Contents(contents) = entry else { continue };
            let bytes = match contents {
                ContentsRef::Stored { hash, .. } => {
                    contents_hashes.push(*hash);
                    continue;
                }
                ContentsRef::Mem(value) => match value.hash.get() {
                    Some(hash) => {
                        contents_hashes.push(*hash);
                        continue;
                    }
                    None => value.as_bytes(),
                },
                ContentsRef::Inline(value) => value.as_bytes(),
            };
            if bytes.len() > BATCHED_CONTENTS_MAX {
                contents_hashes.push(schema::contents_hash(bytes));
                continue;
            }
            pending.push(contents_hashes.len());
            contents_hashes.push(Hash::default());
            contents_inputs.bytes.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
            contents_inputs.bytes.extend_from_slice(bytes);
            contents_inputs.end_input();
        }
    }
    computed.clear();
    contents_inputs.hash_all(computed);
    for (&slot, hash) in pending.iter().zip(computed.iter()) {
        if let Some(place) = contents_hashes.get_mut(slot) {
            *place = *hash;
        }
    }
}

/// Hashes the nodes of `batch` (whose in-memory children all have a hash, except when shared
/// with a level not yet hashed: those compute theirs when asked) and caches the results, with
/// those of the in-memory values they hold.
fn hash_batch(batch: &[&Node], scratch: &mut Scratch) {
    gather_contents(batch, scratch);
    let Scratch { contents_hashes, pre_images, computed, .. } = scratch;
    pre_images.clear();
    let mut hashes = contents_hashes.iter().copied();
    for node in batch {
        write_pre_image(node, &mut hashes, &mut pre_images.bytes);
        pre_images.end_input();
    }
    computed.clear();
    pre_images.hash_all(computed);
    for (node, hash) in batch.iter().zip(computed.iter()) {
        let _ = node.hash.set(*hash);
    }
}

/// Writes the pre-image of `node`, taking the hashes of its contents entries from
/// `contents_hashes` in order (and caching those of its in-memory values).
fn write_pre_image(node: &Node, contents_hashes: &mut impl Iterator<Item = Hash>, out: &mut Vec<u8>) {
    let mut entry_hash = |entry: &Entry| match entry {
        Entry::Contents(contents) => {
            let hash = contents_hashes.next().unwrap_or_default();
            if let ContentsRef::Mem(value) = contents {
                let _ = value.hash.set(hash);
            }
            hash
        }
        Entry::Node(child) => child.hash(),
    };
    match &node.body {
        NodeBody::Flat(entries) => schema::write_flat_pre_image(
            out,
            entries.len(),
            entries.iter().map(|(name, entry)| (name.as_bytes(), entry.kind(), entry_hash(entry))),
        ),
        NodeBody::Values(entries) => schema::write_values_pre_image(
            out,
            entries.len(),
            entries.iter().map(|(name, entry)| (name.as_bytes(), entry.kind(), entry_hash(entry))),
        ),
        NodeBody::Tree(tree) => schema::write_tree_pre_image(
            out,
            tree.depth,
            tree.length,
            tree.children.len(),
            tree.children.iter().map(|(index, child)| (*index, child.hash())),
        ),
    }
}
