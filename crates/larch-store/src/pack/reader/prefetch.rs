//! Reading a large directory's sub-directories ahead, on a thread of its own, while many of them
//! are being read cold.
//!
//! A Tezos cycle's end rewrites thousands of accounts spread over the inode leaves of one huge
//! directory (`contracts/index`), most of them not read for hundreds of blocks: the reading
//! thread then spends most of its time reading and decoding them one by one while the other core
//! idles. A tree tells its source the inode leaf each such sub-directory was found in
//! ([`larch_core::ObjectSource::load_node_among`]). Once more than [`STORM_MISSES`] of these
//! loads missed the cache since the store's last checkout or pipelined commit (a count older
//! than [`STORM_WINDOW`] starts again at its next miss; the loads of all the store's trees count
//! together), a leaf in which a second sub-directory misses (another than its first miss of the
//! count, whether that one came before the storm or during it) has its other stored
//! sub-directories read into the cache by the prefetching thread, where the reading thread then
//! finds them: in the pack's order, the records within 64 KiB of each other with one read call
//! (`PackReader::read_ahead`; a leaf's sub-directories written by the same commit lie side by
//! side). Each leaf is handed over once per count. A regular block misses at most about 1,100 of
//! them (the default replay), a large burst about 16,000.
//!
//! Why the second miss: where a storm needs most of a leaf (the default replay's large burst
//! rewrites 16,000 of 21,000 accounts, ~15 of each leaf's ~20), nearly every leaf has missed
//! once before the storm is declared, and its next miss hands it over as the first one would
//! have. Where it needs one account of a leaf (the same burst among the mainnet rung's 10 M
//! accounts), reading the leaf ahead at its first miss read up to ~19 directories for nothing,
//! which filled the cache with them and counted as misses; two misses in one leaf are then rare,
//! and so is reading ahead.
//!
//! A leaf is known by its smallest name (a leaf's stored keys change as the block rewrites its
//! sub-directories, its names do not; two leaves of different directories with the same
//! smallest name count as one, which at worst reads one ahead early).
//!
//! Leaves still waiting when a new tree starts (the storm's block is over) are dropped unread: with
//! ten times the default's accounts, the thread went on reading a cycle's leaves for dozens of
//! blocks after it, and a reading thread used none of those nodes.

use larch_core::{Entry, Hash, Name, NodeRef, StoreId};
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hasher};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Mutex, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};

use crate::pack::reader::PackSource;

/// Misses of sub-directories found in inode leaves since the last checkout (or pipelined commit), past
/// which the leaves of further misses are read ahead.
pub(crate) const STORM_MISSES: u32 = 2048;
/// A count started longer ago than this starts again from zero at the next miss (a tree read for a
/// long time without a checkout; a fixed window, not a sliding one: a storm that straddles its end
/// counts again from zero).
const STORM_WINDOW: Duration = Duration::from_secs(1);
/// Leaves waiting for the prefetching thread at most; past it a leaf is not read ahead.
const LEAVES_WAITING: usize = 4096;
/// Leaves remembered (missed once, or handed over) at most in a count: past it they are
/// forgotten, and a leaf missed once then needs two more misses to be handed over.
const LEAVES_REMEMBERED: usize = 1 << 17;
/// The capacity for leaves kept from one count to the next.
const LEAVES_KEPT_CAPACITY: usize = 4096;
/// What [`Prefetcher::leaves`] holds for a leaf handed over (not an offset: offsets are those of
/// records, below the pack's end).
const HANDED_OVER: u64 = u64::MAX;

/// The prefetching thread's priority (nice, on Linux): it yields the CPU to the threads whose work
/// the reading thread waits for (the trace reader of a replay, the commit thread) when they
/// compete for it.
const PREFETCH_NICE: i32 = 19;

/// One leaf's stored sub-directories to read ahead.
pub(crate) struct Batch {
    /// The count it was handed over in ([`Prefetcher::count`]): once that count has ended, the
    /// batch is dropped unread.
    pub(crate) count: u64,
    /// `(offset, hash)` of each sub-directory.
    pub(crate) nodes: Vec<(u64, Hash)>,
}

/// The detector of cold-read storms and the channel to the prefetching thread (started at the
/// first storm).
pub(crate) struct Prefetcher {
    source: Weak<PackSource>,
    /// The current count's number: how many trees were started ([`Prefetcher::new_tree`]).
    pub(crate) count: AtomicU64,
    /// When this prefetcher was made: the origin of `window_start`.
    created: Instant,
    /// The start of the current count, in milliseconds since `created`.
    window_start: AtomicU64,
    /// [`STORM_WINDOW`] in milliseconds (longer in tests that must not depend on the machine's
    /// speed: [`Prefetcher::set_storm_window`]).
    window_ms: AtomicU64,
    /// Misses counted since `window_start`.
    misses: AtomicU32,
    /// The leaves in which a sub-directory missed in the current count, by [`leaf_key`]: the
    /// offset of the first one that missed, or [`HANDED_OVER`].
    leaves: Mutex<HashMap<u64, u64>>,
    pub(crate) sender: OnceLock<Option<SyncSender<Batch>>>,
    /// Leaves handed to the thread.
    pub leaves_sent: AtomicU64,
    /// Sub-directories the thread read into the cache.
    pub nodes_read: AtomicU64,
    /// Leaves the thread is done with (read or dropped).
    pub leaves_done: AtomicU64,
    /// Leaves the thread dropped unread: their count had ended (the storm's block is over).
    pub leaves_dropped: AtomicU64,
}

impl std::fmt::Debug for Prefetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prefetcher")
            .field("leaves_sent", &self.leaves_sent.load(Ordering::Relaxed))
            .field("nodes_read", &self.nodes_read.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Prefetcher {
    /// A prefetcher reading into `source`'s cache.
    pub fn new(source: Weak<PackSource>) -> Prefetcher {
        Prefetcher {
            source,
            count: AtomicU64::new(0),
            created: Instant::now(),
            window_start: AtomicU64::new(0),
            window_ms: AtomicU64::new(u64::try_from(STORM_WINDOW.as_millis()).unwrap_or(u64::MAX)),
            misses: AtomicU32::new(0),
            leaves: Mutex::new(HashMap::new()),
            sender: OnceLock::new(),
            leaves_sent: AtomicU64::new(0),
            nodes_read: AtomicU64::new(0),
            leaves_done: AtomicU64::new(0),
            leaves_dropped: AtomicU64::new(0),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.created.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// A tree was checked out, or handed to a pipelined writer's commit (the caller's next block
    /// starts): misses are counted from zero. A plain `Repo::commit` does not reset the count (a
    /// pipelined writer calls it on its commit thread, in the middle of the next block).
    pub fn new_tree(&self) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.restart(self.now_ms());
    }

    /// Sets the window after which a count starts again (a test's misses may take longer than
    /// [`STORM_WINDOW`] on a busy machine).
    #[cfg(test)]
    pub(crate) fn set_storm_window(&self, window: Duration) {
        self.window_ms.store(u64::try_from(window.as_millis()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    fn restart(&self, now_ms: u64) {
        self.window_start.store(now_ms, Ordering::Relaxed);
        if self.misses.swap(0, Ordering::Relaxed) > 0 {
            let mut leaves = self.leaves.lock().unwrap_or_else(PoisonError::into_inner);
            leaves.clear();
            // What a storm's leaves took is given back (a regular block remembers ~1,000).
            leaves.shrink_to(LEAVES_KEPT_CAPACITY);
        }
    }

    /// Counts a miss of a sub-directory found in an inode leaf: whether the misses are a storm.
    fn storm(&self) -> bool {
        let now = self.now_ms();
        let window = self.window_ms.load(Ordering::Relaxed);
        if now.saturating_sub(self.window_start.load(Ordering::Relaxed)) > window {
            self.restart(now);
        }
        self.misses.fetch_add(1, Ordering::Relaxed).saturating_add(1) > STORM_MISSES
    }

    /// Notes that the sub-directory at `missed`, found in the inode leaf `leaf` of store `store`,
    /// missed the cache; during a storm, once another sub-directory of the leaf missed in the
    /// same count, hands the leaf's other stored sub-directories to the prefetching thread (once
    /// per leaf).
    pub fn missed(&self, missed: u64, leaf: &[(Name, Entry)], store: StoreId) {
        let storm = self.storm();
        let Some(key) = leaf_key(leaf) else { return };
        let first = {
            let mut leaves = self.leaves.lock().unwrap_or_else(PoisonError::into_inner);
            match leaves.get(&key).copied() {
                // The leaf's first miss (or the same sub-directory again): remembered only.
                None => {
                    if leaves.len() >= LEAVES_REMEMBERED {
                        leaves.clear();
                    }
                    leaves.insert(key, missed);
                    return;
                }
                Some(first) if first == missed || first == HANDED_OVER || !storm => return,
                Some(first) => {
                    leaves.insert(key, HANDED_OVER);
                    first
                }
            }
        };
        let stored = |(_, entry): &(Name, Entry)| match entry {
            Entry::Node(NodeRef::Stored { hash, key }) => key.offset_in(store).map(|offset| (offset, *hash)),
            _ => None,
        };
        let nodes: Vec<_> = leaf
            .iter()
            .filter_map(stored)
            .filter(|(offset, _)| *offset != missed && *offset != first)
            .collect();
        if nodes.is_empty() {
            return;
        }
        let Some(sender) = self.sender.get_or_init(|| self.spawn()) else { return };
        match sender.try_send(Batch { count: self.count.load(Ordering::Relaxed), nodes }) {
            Ok(()) => {
                self.leaves_sent.fetch_add(1, Ordering::Relaxed);
            }
            // A full queue: this leaf is read by the reading thread as it needs it.
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {}
        }
    }

    /// Starts the prefetching thread (`None` if it cannot be started: then nothing is read ahead).
    fn spawn(&self) -> Option<SyncSender<Batch>> {
        let (sender, receiver) = sync_channel::<Batch>(LEAVES_WAITING);
        let source = self.source.clone();
        std::thread::Builder::new()
            .name("larch-prefetch".into())
            .spawn(move || prefetch_loop(&source, &receiver))
            .ok()
            .map(|_| sender)
    }
}

/// The key a leaf is remembered by: a hash of its smallest name (`None` for no entries).
fn leaf_key(leaf: &[(Name, Entry)]) -> Option<u64> {
    let smallest = leaf.iter().map(|(name, _)| name.as_bytes()).min()?;
    let mut hasher = DefaultHasher::new();
    hasher.write(smallest);
    Some(hasher.finish())
}

/// Reads the batches into the cache until the source is dropped (its sender with it). A read that
/// fails is left to the reading thread, which meets the error itself if it needs the node.
fn prefetch_loop(source: &Weak<PackSource>, receiver: &Receiver<Batch>) {
    crate::io::priority::lower_priority(PREFETCH_NICE);
    for batch in receiver {
        let Some(source) = source.upgrade() else { return };
        let prefetch = source.prefetch();
        if batch.count != prefetch.count.load(Ordering::Relaxed) {
            prefetch.leaves_dropped.fetch_add(1, Ordering::Relaxed);
            prefetch.leaves_done.fetch_add(1, Ordering::Release);
            continue;
        }
        // In the pack's order, nearby records with one read call (`PackReader::read_ahead`).
        let mut nodes = batch.nodes;
        nodes.retain(|(offset, _)| !source.reader.is_cached(*offset));
        nodes.sort_unstable_by_key(|(offset, _)| *offset);
        let read = source.reader.read_ahead(&nodes);
        prefetch.nodes_read.fetch_add(read, Ordering::Relaxed);
        prefetch.leaves_done.fetch_add(1, Ordering::Release);
    }
}
