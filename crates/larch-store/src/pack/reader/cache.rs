//! The reader's cache of decoded objects: its items (a node or contents with its weight, patch
//! chain and hash prefix), their weights, and the evictions collected for the graveyard.

use larch_core::{Contents, Hash, Node, NodeBody};
use quick_cache::Weighter;
use std::sync::Arc;

#[derive(Clone)]
pub(super) enum CachedObject {
    Node(Arc<Node>),
    Contents(Arc<Contents>),
}

#[derive(Clone)]
pub(super) struct CacheItem {
    pub(super) object: CachedObject,
    pub(super) weight: u32,
    /// For nodes: the patch chain length of the record (0 for a full record).
    pub(super) chain: u8,
    /// For nodes: the first 8 bytes of the node's hash, checked against the reference on a hit.
    /// Kept here, next to the cache's own entry, so that a hit does not read the node's hash (a
    /// cache line of its own, one more memory access per hit, which the lookups rarely need).
    pub(super) hash_prefix: u64,
}

/// The first 8 bytes of `hash`, as an integer.
pub(super) fn hash_prefix(hash: &Hash) -> u64 {
    let bytes = hash.as_bytes();
    let mut prefix = [0u8; 8];
    prefix.copy_from_slice(bytes.get(..8).unwrap_or(&[0; 8]));
    u64::from_le_bytes(prefix)
}

#[derive(Clone)]
pub(super) struct ItemWeight;

/// The cache's evictions, collected during an insert (instead of dropped under the shard's lock)
/// and handed to the reader's [`Graveyard`](crate::pack::graveyard::Graveyard) after it.
#[derive(Clone, Default)]
pub(super) struct Evictions;

impl quick_cache::Lifecycle<u64, CacheItem> for Evictions {
    type RequestState = Vec<CacheItem>;

    fn begin_request(&self) -> Vec<CacheItem> {
        Vec::new()
    }

    fn on_evict(&self, evicted: &mut Vec<CacheItem>, _offset: u64, item: CacheItem) {
        evicted.push(item);
    }
}

pub(super) type ObjectCache =
    quick_cache::sync::Cache<u64, CacheItem, ItemWeight, quick_cache::DefaultHashBuilder, Evictions>;

impl Weighter<u64, CacheItem> for ItemWeight {
    fn weight(&self, _key: &u64, item: &CacheItem) -> u64 {
        u64::from(item.weight)
    }
}

/// An estimate of the heap bytes a decoded node holds.
pub(crate) fn node_weight(node: &Node) -> u32 {
    body_weight(node.body())
}

/// The bytes of one entry of a decoded directory (its name's handle and its target).
const ENTRY_BYTES: usize = std::mem::size_of::<(larch_core::Name, larch_core::Entry)>();

/// An estimate of the heap bytes a decoded node body holds.
fn body_weight(body: &NodeBody) -> u32 {
    match body {
        NodeBody::Flat(entries) | NodeBody::Values(entries) => {
            entries_weight(entries.iter().map(|(name, entry)| {
                let value = match entry {
                    larch_core::Entry::Contents(contents) => Some(contents),
                    larch_core::Entry::Node(_) => None,
                };
                (name.len(), value)
            }))
        }
        NodeBody::Tree(tree) => tree_weight(tree.children.len()),
    }
}

/// The weight of a decoded inner inode of `children` children.
pub(crate) fn tree_weight(children: usize) -> u32 {
    weight_of(children * 56)
}

/// The weight of a decoded directory or `Values` inode whose entries have names of these lengths
/// and these targets (`None`, or a value known by a stored reference, weighs nothing more than the
/// entry: its bytes are not in the node).
pub(crate) fn entries_weight<'a>(
    entries: impl Iterator<Item = (usize, Option<&'a larch_core::ContentsRef>)>,
) -> u32 {
    weight_of(
        entries
            .map(|(name_len, value)| {
                let inline = match value {
                    Some(larch_core::ContentsRef::Mem(c)) => 56 + c.len(),
                    // A piece of the buffer the node's names are in.
                    Some(larch_core::ContentsRef::Inline(v)) => v.as_bytes().len(),
                    _ => 0,
                };
                ENTRY_BYTES + name_len + inline
            })
            .sum(),
    )
}

/// The weight of a node whose body holds `bytes` on the heap.
fn weight_of(bytes: usize) -> u32 {
    u32::try_from(bytes + 120).unwrap_or(u32::MAX)
}

/// The share of the cache's budget for the items read more than once (quick_cache's "hot" part;
/// the rest holds the items new to the cache, a node just read or written). quick_cache's default
/// (0.97) leaves 3% to the new ones: a node the flat-key benchmark reads then rewrites 32 commits
/// later was evicted before its second read. At one half, the flat-key benchmark misses 12% less
/// (1.87M → 1.63M at 1M keys) and the default replay is unchanged (1.40M misses either way;
/// docs/benchmarks.md at c117370, "Issue 11, tenth round").
const CACHE_HOT_SHARE: f64 = 0.5;

/// A cache of `cache_bytes` expected to hold about `items` items, with [`CACHE_HOT_SHARE`].
pub(super) fn new_cache(items: usize, cache_bytes: u64) -> ObjectCache {
    let cache_bytes = cache_bytes.max(1);
    let mut options = quick_cache::OptionsBuilder::new();
    options.estimated_items_capacity(items).weight_capacity(cache_bytes).hot_allocation(CACHE_HOT_SHARE);
    match options.build() {
        Ok(options) => ObjectCache::with_options(options, ItemWeight, Default::default(), Evictions),
        // Fails only when a setting is missing (both are set): quick_cache's defaults then.
        Err(_) => ObjectCache::with(items, cache_bytes, ItemWeight, Default::default(), Evictions),
    }
}
