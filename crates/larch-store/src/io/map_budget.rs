//! A bound on the memory that reads through memory maps keep resident in the process
//! (`RepoOptions::mmap_budget`, docs/store.md *Reads and the cache*).
//!
//! A page of a shared file mapping that a read touched stays mapped, and counts in the process's
//! resident set (`RssFile`), until the map is unmapped or its pages are released: without a bound,
//! a process reading a store far larger than its memory through maps grows with the page cache it
//! touches (3.3–3.7 GiB of `RssFile` on the mainnet rung). The kernel maps a whole page-cache folio
//! per fault (up to 2 MiB on x86-64; a file written in large pieces is cached in large folios), so
//! reads are charged by the 2 MiB-aligned block ([`MAP_BLOCK`]) they touch: a folio is naturally
//! aligned, never larger than a block, so what a read maps lies in the blocks charged for it, and
//! the bytes charged bound the bytes resident.
//!
//! Each map ([`MappedFile`]) marks the blocks its reads touched in a bitmap and charges the new
//! ones to the handle's [`MapBudget`]. Once the charge passes the budget, the least recently read
//! maps release their pages (`MADV_DONTNEED`: for a shared read-only file mapping this drops only
//! the process's page-table entries; the data stays in the page cache and a later read faults it
//! back in) until the charge is at most half the budget. A map that is unmapped (its chunk file's
//! descriptor closed by the pool, or a growing file remapped) gives its charge back.
//!
//! The accounting is exact with respect to the bitmaps; against the kernel it errs on the safe
//! side, but for one case: a read that marked a block just before a release cleared it, and touches
//! it just after the release's `MADV_DONTNEED`, leaves that block resident uncharged until the map's
//! next release (at most one block per concurrent reader at a time).

use memmap2::Mmap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// Reads through maps are charged by blocks of this many bytes: the largest folio of the page
/// cache on x86-64 (2 MiB, a PMD), which bounds what one fault maps (see the module documentation).
pub const MAP_BLOCK: u64 = 2 << 20;

/// The memory-map budget of one handle: the bytes its maps' reads may keep resident (see the module
/// documentation). Shared by the maps of the handle's directory.
pub struct MapBudget {
    limit: u64,
    /// Bytes charged by the live maps (the sum of their charges).
    charged: AtomicU64,
    /// Advanced at every newly charged block: the maps' `last_use` stamps.
    clock: AtomicU64,
    /// Releases made (maps whose pages were released to keep within the budget).
    releases: AtomicU64,
    /// Every map made under this budget (dead ones are pruned as the list grows and at releases).
    maps: Mutex<Vec<Weak<MappedFile>>>,
}

impl fmt::Debug for MapBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MapBudget")
            .field("limit", &self.limit)
            .field("charged", &self.charged())
            .field("releases", &self.releases())
            .finish()
    }
}

impl MapBudget {
    /// A budget of `limit` bytes (at least one block of 2 MiB, the unit reads are charged by).
    pub fn new(limit: u64) -> Arc<MapBudget> {
        Arc::new(MapBudget {
            limit: limit.max(MAP_BLOCK),
            charged: AtomicU64::new(0),
            clock: AtomicU64::new(0),
            releases: AtomicU64::new(0),
            maps: Mutex::new(Vec::new()),
        })
    }

    /// The budget in bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes charged now: an upper bound of the pages the maps hold resident (but see the module
    /// documentation).
    pub fn charged(&self) -> u64 {
        self.charged.load(Ordering::Relaxed)
    }

    /// Maps whose pages were released so far to keep within the budget.
    pub fn releases(&self) -> u64 {
        self.releases.load(Ordering::Relaxed)
    }

    /// Makes `map` a map under this budget.
    pub(crate) fn register(&self, map: &Arc<MappedFile>) {
        let mut maps = self.maps.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // Pruned when the list has doubled since its last pruning (maps come and go with the pool's
        // descriptors): amortized constant work per map.
        if maps.len() >= 64 && maps.len().is_power_of_two() {
            maps.retain(|map| map.strong_count() > 0);
        }
        maps.push(Arc::downgrade(map));
    }

    /// Releases the least recently read maps until at most half the budget is charged. Releases
    /// hold the list's lock throughout (a few `madvise` calls), so they never overlap: a thread
    /// over the budget while another releases waits for that release to end, then releases what
    /// is still over. It never leaves the charge over the budget because another thread was
    /// releasing (which may be descheduled meanwhile, its bits cleared and its charge not yet
    /// taken off), so the charge passes the budget only by the blocks of the reads in flight on
    /// other threads. Nothing here waits for another lock (`register` takes only this one).
    fn release(&self) {
        let mut maps = self.maps.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if self.charged() <= self.limit {
            // Another thread released meanwhile.
            return;
        }
        maps.retain(|map| map.strong_count() > 0);
        let mut live: Vec<Arc<MappedFile>> = maps.iter().filter_map(Weak::upgrade).collect();
        live.sort_by_key(|map| map.last_use.load(Ordering::Relaxed));
        for map in live {
            if self.charged() <= self.limit / 2 {
                break;
            }
            if map.charged.load(Ordering::Relaxed) > 0 {
                map.release();
                self.releases.fetch_add(1, Ordering::Relaxed);
            }
        }
        drop(maps);
    }

    /// Takes `bytes` off the charge.
    fn refund(&self, bytes: u64) {
        if bytes > 0 {
            self.charged.fetch_sub(bytes, Ordering::Relaxed);
        }
    }
}

/// A shared read-only memory map of a file, whose reads are charged to a [`MapBudget`].
pub(crate) struct MappedFile {
    map: Mmap,
    /// One bit per [`MAP_BLOCK`] of the map: touched by a read since the map's last release.
    blocks: Box<[AtomicU64]>,
    /// Bytes charged for the set bits.
    charged: AtomicU64,
    /// The budget's clock at this map's last read.
    last_use: AtomicU64,
    budget: Arc<MapBudget>,
}

impl fmt::Debug for MappedFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MappedFile")
            .field("len", &self.map.len())
            .field("charged", &self.charged.load(Ordering::Relaxed))
            .finish()
    }
}

impl MappedFile {
    /// `map`, charged to `budget` (and registered with it).
    pub(crate) fn new(map: Mmap, budget: Arc<MapBudget>) -> Arc<MappedFile> {
        let blocks = (map.len() as u64).div_ceil(MAP_BLOCK).div_ceil(64);
        let blocks = (0..blocks).map(|_| AtomicU64::new(0)).collect();
        let mapped = Arc::new(MappedFile {
            map,
            blocks,
            charged: AtomicU64::new(0),
            last_use: AtomicU64::new(0),
            budget: budget.clone(),
        });
        budget.register(&mapped);
        mapped
    }

    /// The mapped bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// Charges a read of the mapped bytes `start..end` (not empty), releasing the least recently
    /// read maps if that takes the budget past its limit.
    pub(crate) fn note_read(&self, start: usize, end: usize) {
        let now = self.budget.clock.load(Ordering::Relaxed);
        if self.last_use.load(Ordering::Relaxed) != now {
            self.last_use.store(now, Ordering::Relaxed);
        }
        let (first, last) = (start as u64 / MAP_BLOCK, (end.max(start + 1) as u64 - 1) / MAP_BLOCK);
        let mut new = false;
        for block in first..=last {
            let bit = 1u64 << (block % 64);
            let Some(word) = usize::try_from(block / 64).ok().and_then(|i| self.blocks.get(i)) else {
                continue;
            };
            if word.load(Ordering::Relaxed) & bit != 0 {
                continue;
            }
            // Charged before its bit is set: a release on another thread clears only bits whose
            // charge is counted, so the counts never go below what the set bits hold.
            self.charged.fetch_add(MAP_BLOCK, Ordering::Relaxed);
            self.budget.charged.fetch_add(MAP_BLOCK, Ordering::Relaxed);
            if word.fetch_or(bit, Ordering::Relaxed) & bit == 0 {
                new = true;
            } else {
                // Another reader marked it first and was charged for it.
                self.charged.fetch_sub(MAP_BLOCK, Ordering::Relaxed);
                self.budget.refund(MAP_BLOCK);
            }
        }
        if !new {
            return;
        }
        let charged = self.budget.charged.load(Ordering::Relaxed);
        self.last_use.store(self.budget.clock.fetch_add(1, Ordering::Relaxed) + 1, Ordering::Relaxed);
        if charged > self.budget.limit {
            self.budget.release();
        }
    }

    /// Releases the map's pages from the process and its charge from the budget.
    fn release(&self) {
        // The bits first, then the pages: a read that marks a block in between is charged for a
        // page that the release then drops (an overcharge until the next release).
        let taken: Vec<u64> = self.blocks.iter().map(|word| word.swap(0, Ordering::Relaxed)).collect();
        let cleared: u64 = taken.iter().map(|bits| u64::from(bits.count_ones()) * MAP_BLOCK).sum();
        self.charged.fetch_sub(cleared, Ordering::Relaxed);
        self.budget.refund(cleared);
        // SAFETY: the map is a shared read-only mapping of a file. `MADV_DONTNEED` on such a map
        // only drops this process's page-table entries: a later access faults the same bytes back
        // in from the page cache (the file is never truncated below a length the store published,
        // and the map reads only below a length the file had), so a concurrent reader sees the
        // same bytes.
        let advised = unsafe { self.map.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
        if advised.is_err() {
            // The pages stay mapped (a locked map): charged again, blocks marked again.
            // Charged before the bits are set, as in `note_read`; the blocks another reader
            // marked meanwhile (and was charged for) are refunded.
            for (word, bits) in self.blocks.iter().zip(taken) {
                let bytes = u64::from(bits.count_ones()) * MAP_BLOCK;
                self.charged.fetch_add(bytes, Ordering::Relaxed);
                self.budget.charged.fetch_add(bytes, Ordering::Relaxed);
                let twice = bits & word.fetch_or(bits, Ordering::Relaxed);
                let bytes = u64::from(twice.count_ones()) * MAP_BLOCK;
                self.charged.fetch_sub(bytes, Ordering::Relaxed);
                self.budget.refund(bytes);
            }
        }
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        // The map is unmapped with `self.map`: its pages leave the process.
        self.budget.refund(self.charged.load(Ordering::Relaxed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A map of a file of `len` bytes under `budget`.
    fn mapped(dir: &std::path::Path, name: &str, len: u64, budget: &Arc<MapBudget>) -> Arc<MappedFile> {
        let path = dir.join(name);
        let file = std::fs::File::create(&path).and_then(|f| f.set_len(len).map(|()| f));
        let file = file.and_then(|_| std::fs::File::open(&path)).expect("file");
        // SAFETY: a read-only shared map of a file of this test's own, never truncated.
        let map = unsafe { memmap2::MmapOptions::new().len(len as usize).map(&file) }.expect("map");
        MappedFile::new(map, budget.clone())
    }

    #[test]
    fn reads_are_charged_by_block_and_released_least_recently_used_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        let budget = MapBudget::new(4 * MAP_BLOCK);
        let a = mapped(dir.path(), "a", 8 * MAP_BLOCK, &budget);
        let b = mapped(dir.path(), "b", 8 * MAP_BLOCK, &budget);
        let block = MAP_BLOCK as usize;
        // Two reads in block 0, one across blocks 1 and 2: three blocks.
        a.note_read(0, 100);
        a.note_read(200, 300);
        a.note_read(2 * block - 10, 2 * block + 10);
        assert_eq!(budget.charged(), 3 * MAP_BLOCK);
        b.note_read(5 * block, 5 * block + 1);
        assert_eq!(budget.charged(), 4 * MAP_BLOCK);
        assert_eq!(budget.releases(), 0);
        // A fifth block: over the budget. `b` (read less recently) is released first, which
        // leaves 3 blocks, over half the budget: `a` goes too.
        a.note_read(3 * block, 3 * block + 1);
        assert_eq!(budget.releases(), 2);
        assert_eq!(budget.charged(), 0);
        b.note_read(6 * block, 6 * block + 1);
        assert_eq!(budget.charged(), MAP_BLOCK);
        // The bytes read back are the file's (zeros) after a release.
        assert!(a.bytes().iter().take(4096).all(|&byte| byte == 0));
        // A dropped map gives its charge back.
        drop(b);
        assert_eq!(budget.charged(), 0);
        a.note_read(0, 1);
        assert_eq!(budget.charged(), MAP_BLOCK);
        drop(a);
        assert_eq!(budget.charged(), 0);
    }

    #[test]
    fn the_least_recently_read_map_is_released_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        let budget = MapBudget::new(4 * MAP_BLOCK);
        let old = mapped(dir.path(), "old", 4 * MAP_BLOCK, &budget);
        let new = mapped(dir.path(), "new", 4 * MAP_BLOCK, &budget);
        let block = MAP_BLOCK as usize;
        for at in 0..3 {
            new.note_read(at * block, at * block + 1);
        }
        old.note_read(0, 1);
        assert_eq!(budget.charged(), 4 * MAP_BLOCK);
        // A fifth block, read through `old`: `new`, read less recently, is released, which brings
        // the charge down to half the budget; `old` keeps its pages.
        old.note_read(block, block + 1);
        assert_eq!(new.charged.load(Ordering::Relaxed), 0, "the least recently read map is released");
        assert_eq!(old.charged.load(Ordering::Relaxed), 2 * MAP_BLOCK, "the one just read is kept");
        assert_eq!(budget.charged(), 2 * MAP_BLOCK);
        assert_eq!(budget.releases(), 1);
    }
}
