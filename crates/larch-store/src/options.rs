//! Options and reports of a [`crate::Repo`]: the sync policy, open options, counters, commit details.

use larch_core::{CommitInfo, Hash};

/// Default byte budget of the decoded-object cache. 152 MiB (was 128) since commits prime the
/// cache with their upper levels only (`repo.rs`, `PRIME_FRACTION`), which lowered the peak RSS of
/// the default trace by ~50 MiB: part of it buys a higher hit ratio (80.1% → 81.1%, 5% fewer
/// misses) at a peak RSS still below the one of 128 MiB with full priming (254 against 258 MiB).
pub const DEFAULT_CACHE_BYTES: u64 = 152 << 20;

/// Under a [`crate::PipelinedRepo`], the nodes written in this many last bytes of the pack stay
/// in the carried tree's memory when their parent is copied for a change (older ones are referred
/// to by key, [`larch_core::Node::detached_copy`]). They are the nodes the next blocks read most:
/// referred to by key, each was read from the pack again (a patch and its base, decoded and
/// cached) soon after it was written. 1 MiB (a dozen regular blocks' records): the default replay
/// 1.10–1.16× faster than with none (one build, alternated runs), peak RSS +20 MiB; 2 and 4 MiB
/// were no faster and held 12–35 MiB more (docs/benchmarks.md at c117370, "Issue 11, eighth round").
pub const RECENT_IN_MEMORY: u64 = 1 << 20;

/// Under a [`crate::PipelinedRepo`], the inode trees (the roots and inner inodes of directories
/// above 256 entries) written in this many last bytes of the pack stay in the carried tree's
/// memory as well. There are few of them (one per 32 to 256 entries below) but each is read
/// again soon: the flat-key benchmark's 8,448 inode trees are reread every ~9 batches on average
/// (~3.5 MiB of pack; 16 MiB covers nearly every gap, 4 MiB two thirds of them), and were 613k of
/// its 1.63M cache misses (the pipelined writer primes the cache with few of the records it
/// writes). 16 MiB: flat keys 1.09× (median of 7 pairs; misses 1.63M → 0.88M, peak RSS +25–35
/// MiB), the default replay at the same CPU time, its misses 3.5% fewer (docs/benchmarks.md at c117370,
/// "Issue 11, twentieth round").
pub const RECENT_INODES_IN_MEMORY: u64 = 16 << 20;

/// When a commit is made durable and published (docs/store.md, *Promises per sync policy*).
///
/// Readers in other processes see only published commits, and a published commit is always
/// durable (two `fdatasync`s: the pack, then the control file). A commit that is not published yet
/// is *staged*: the writer's own handle sees it, nobody else does, and a crash of any kind returns
/// the store to the last publish (`larch recover` can find staged commits in the pack's tail).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SyncPolicy {
    /// Publish only at [`crate::Repo::flush`], [`crate::Repo::close`] or when the writer is dropped.
    Never,
    /// Publish every commit (the default): a commit that returned is durable and visible to readers.
    #[default]
    Commit,
    /// Publish every `n`-th commit (and at flush, close, drop).
    Every(u32),
    /// Publish every commit, on a publisher thread (`--sync pipelined`): a commit returns once
    /// its records are written and it is staged (this handle sees it), while its two syncs and
    /// the switch run beside the caller's next block. At most one commit is in flight: when a
    /// commit returns, every commit before it is durable and published, and
    /// [`crate::Repo::wait_durable`] (or `flush`, `close`) waits for the last one. A process crash
    /// or a power loss keeps every commit but the last one returned before
    /// [`crate::Repo::wait_durable`]; a failed publish poisons the handle, and the next commit,
    /// `wait_durable` or `flush` returns its error.
    Pipelined,
}

/// A sync policy that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("invalid sync policy {0:?}: expected `never`, `commit`, `pipelined` or `every N` (N ≥ 1)")]
pub struct SyncPolicyParseError(String);

impl std::str::FromStr for SyncPolicy {
    type Err = SyncPolicyParseError;

    /// Parses `never`, `commit`, `pipelined`, `every N` or `every:N` (the CLI's `--sync`).
    fn from_str(text: &str) -> Result<SyncPolicy, SyncPolicyParseError> {
        let fail = || SyncPolicyParseError(text.to_string());
        match text.trim() {
            "never" => Ok(SyncPolicy::Never),
            "commit" => Ok(SyncPolicy::Commit),
            "pipelined" => Ok(SyncPolicy::Pipelined),
            other => {
                let n = other.strip_prefix("every").ok_or_else(fail)?;
                let n = n.trim_start_matches([' ', ':', '=']).parse::<u32>().map_err(|_| fail())?;
                if n == 0 { Err(fail()) } else { Ok(SyncPolicy::Every(n)) }
            }
        }
    }
}

impl std::fmt::Display for SyncPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SyncPolicy::Never => f.write_str("never"),
            SyncPolicy::Commit => f.write_str("commit"),
            SyncPolicy::Every(n) => write!(f, "every {n}"),
            SyncPolicy::Pipelined => f.write_str("pipelined"),
        }
    }
}

/// How to open a store.
#[derive(Clone, Debug)]
pub struct RepoOptions {
    /// The writer rolls to a new chunk file at the start of a commit once the head chunk holds
    /// this many bytes ([`DEFAULT_CHUNK_BYTES`]; `docs/store.md`).
    pub chunk_bytes: u64,
    /// Durability policy of commits.
    pub sync: SyncPolicy,
    /// Byte budget of the decoded-object cache.
    pub cache_bytes: u64,
    /// Create the store when absent (writers only).
    pub create: bool,
    /// Read the pack through memory maps instead of positioned reads (docs/store.md, *Reads and
    /// the cache*).
    pub mmap: bool,
    /// With `mmap`: the bytes of the maps' pages that reads may keep resident in the process
    /// ([`DEFAULT_MMAP_BUDGET`]); past it, the least recently read maps release their pages
    /// (`MADV_DONTNEED`; the page cache keeps them). Reads are charged by the 2 MiB block, the
    /// largest folio the kernel maps per fault.
    pub mmap_budget: u64,
    /// Write rewritten directories and inodes as patches of their previous version when smaller
    /// (docs/format.md §3.7). Readers always understand patches.
    pub patches: bool,
    /// Verify the full hash of every node and contents value loaded (a BLAKE2b of each record
    /// read, and a full comparison on cache hits), so that a pack altered behind the store's back
    /// is reported as corruption on read, not only by fsck. Off by default: the checksums of
    /// records already catch accidental damage.
    pub verify_on_load: bool,
    /// Archive mode: the lower directory (another disk) that sealed chunk files move to
    /// ([`crate::Repo::archive`], `docs/store.md` *Archive mode*). A chunk file is looked up in the
    /// store directory, else here. A store whose chunks have moved (its control slot carries the
    /// archive flag) cannot be opened without it ([`crate::StoreError::NeedsLower`]).
    pub lower: Option<std::path::PathBuf>,
    /// The most sealed chunk files this handle keeps open at once ([`DEFAULT_OPEN_FILES`]). Chunk
    /// files are opened when first read and closed again by a clock (an approximation of least
    /// recently used first), so a handle
    /// needs this many descriptors (plus the writer's head, `control`, `commits`, the lock and at
    /// most 8 GC segments) whatever the store's size (`docs/store.md` *Descriptors*).
    pub open_files: usize,
}

/// Default of [`RepoOptions::open_files`]: 192 chunk files (3 GiB of 16 MiB chunks). A replay of
/// the mainnet-sized rung (~350 chunk files) then stays under 256 descriptors in all, a running
/// GC's files included, and reopens 40-60% fewer chunks than with 128 (docs/benchmarks.md); a
/// writer, a reader and a server in one process stay below the common limit of 1,024.
pub const DEFAULT_OPEN_FILES: usize = 192;

/// Default of [`RepoOptions::mmap_budget`]: 64 MiB of mapped pages (32 blocks of 2 MiB).
pub const DEFAULT_MMAP_BUDGET: u64 = 64 << 20;

/// Default of [`RepoOptions::chunk_bytes`]: 16 MiB (`docs/gc-design.md` §3.2).
pub const DEFAULT_CHUNK_BYTES: u64 = 16 << 20;

impl Default for RepoOptions {
    fn default() -> RepoOptions {
        RepoOptions {
            sync: SyncPolicy::Commit,
            cache_bytes: DEFAULT_CACHE_BYTES,
            create: true,
            mmap: false,
            mmap_budget: DEFAULT_MMAP_BUDGET,
            patches: true,
            verify_on_load: false,
            chunk_bytes: DEFAULT_CHUNK_BYTES,
            lower: None,
            open_files: DEFAULT_OPEN_FILES,
        }
    }
}

/// Counters a caller may sample (e.g. per block).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreStats {
    /// Chunk files of the pack's layout.
    pub chunk_files: u64,
    /// Sealed chunk files this handle holds open now (at most [`RepoOptions::open_files`], plus
    /// one per thread opening one at that moment).
    pub chunk_files_open: u64,
    /// Chunk files opened so far (first opens and reopens after their descriptor was closed).
    pub chunk_file_opens: u64,
    /// With [`RepoOptions::mmap`]: the bytes the maps' reads are charged for now, at most
    /// [`RepoOptions::mmap_budget`] after each read but for the 2 MiB blocks of reads in flight on
    /// other threads; about an upper bound of the maps' resident pages.
    pub mapped_bytes: u64,
    /// With [`RepoOptions::mmap`]: maps whose pages were released to keep within the budget.
    pub map_releases: u64,
    /// Reads of a read-only handle that found a chunk file gone (a writer's GC retired it since
    /// the handle's last reload) and were answered through the newer published layout.
    pub layout_refreshes: u64,
    /// Chunks this handle rolled to.
    pub chunk_rolls: u64,
    /// File lengths looked up on disk by [`crate::Repo::disk_bytes`] (sealed chunk files once
    /// each, the others at every call).
    pub disk_lookups: u64,
    /// Object loads served by the cache.
    pub cache_hits: u64,
    /// Object loads that read the pack.
    pub cache_misses: u64,
    /// Estimated bytes held by the cache.
    pub cache_bytes: u64,
    /// Objects held by the cache.
    pub cache_entries: u64,
    /// Records read from the pack.
    pub records_read: u64,
    /// Directories read into the cache ahead of their use, during storms of cold reads (the
    /// store's reading-ahead thread; included in `records_read` and `cache_misses`).
    pub nodes_read_ahead: u64,
    /// Bytes of records read from the pack.
    pub bytes_read: u64,
    /// Bytes appended to the pack and the index by this handle.
    pub bytes_written: u64,
    /// Object records written by this handle (commits excluded).
    pub objects_written: u64,
    /// Commit records written by this handle.
    pub commits_written: u64,
    /// `fdatasync`/`fsync` calls made by this handle (two per publish).
    pub syncs: u64,
    /// Published pack length (the store's size, with the small index and control files).
    pub pack_bytes: u64,
    /// Published index length.
    pub index_bytes: u64,
    /// Commits in the store.
    pub commit_count: u64,
}

/// What a commit records, as read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitDetails {
    /// The commit hash.
    pub hash: Hash,
    /// Offset of the commit record in the pack.
    pub offset: u64,
    /// Hash of the root tree.
    pub tree_hash: Hash,
    /// Parent commits, in commit order.
    pub parents: Vec<Hash>,
    /// The parents absent from this store (recorded by hash only), a subset of `parents`.
    pub absent_parents: Vec<Hash>,
    /// Date, author, message.
    pub info: CommitInfo,
}

#[cfg(test)]
mod tests {
    use super::SyncPolicy;

    #[test]
    fn sync_policies_parse_and_print() {
        for (text, policy) in [
            ("never", SyncPolicy::Never),
            ("pipelined", SyncPolicy::Pipelined),
            ("commit", SyncPolicy::Commit),
            ("every 10", SyncPolicy::Every(10)),
            ("every:3", SyncPolicy::Every(3)),
        ] {
            assert_eq!(text.parse::<SyncPolicy>().unwrap(), policy);
        }
        assert_eq!(SyncPolicy::Every(7).to_string().parse::<SyncPolicy>().unwrap(), SyncPolicy::Every(7));
        for bad in ["", "always", "every 0", "every x", "every"] {
            assert!(bad.parse::<SyncPolicy>().is_err(), "{bad}");
        }
    }
}
