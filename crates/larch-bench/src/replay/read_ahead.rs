//! Reading a trace's operations ahead (`larch replay TRACE --read-ahead-ops N`): the paths of the
//! next `N` operations are walked by a pool of threads on the tree of the latest checkout (a
//! `find`'s value read too: past 256 bytes it is a record of its own), so that the nodes they
//! reach are in the store's cache when the replay applies them, and the disk reads of several
//! walks are in flight at once instead of one after another.
//!
//! A replay whose context is far larger than its memory waits on one disk read at a time: each
//! walk needs a node to find the next, and the operations come one after another
//! (docs/benchmarks.md, *Mainnet rung under a 2 GiB cgroup*). A node validating a block knows its
//! operations before it applies them; a trace file's replay knows them too. The walkers read on
//! the latest checkout's tree, a snapshot that the replay's copy-on-write edits do not change, so
//! a walk never sees a half-applied operation: a node the block rewrites before its walk is read
//! in its committed version (wasted), the others are the ones the replay will need. A walk's
//! result and errors are ignored: the replay meets any error itself. A path whose operation the
//! replay has already applied is skipped. The walkers end with the replay.

use larch_core::Tree;
use larch_trace::op::{Op, Path};
use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

/// How far and with how many threads a replay reads ahead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadAhead {
    /// Operations read ahead of the one applied (at least 1).
    pub ops: usize,
    /// Threads walking their paths, each with one disk read in flight at most (at least 1).
    pub threads: usize,
}

/// What the walkers did (the stat file's end line, the replay's summary).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReadAheadCounts {
    /// Paths walked on a checkout's tree.
    pub walked: u64,
    /// Paths skipped: their operation was taken by the replay before a walker reached them, no
    /// checkout had happened yet (the first block is built on the empty tree), no walker thread
    /// could be started, or they were still queued at the end.
    pub skipped: u64,
}

/// Jobs handed to a walker at once at most (one channel message, one look at the tree).
const JOBS_AT_ONCE: usize = 32;

/// The walkers' priority (nice, on Linux).
const WALKER_NICE: i32 = 19;

/// A path to walk, with the index of the operation it belongs to.
struct Job {
    op_index: u64,
    path: Path,
    /// Whether the operation reads the value at the path (a `find`): its contents are loaded too,
    /// not only the directories on the way.
    value: bool,
}

/// What the replay's thread and the walkers share.
#[derive(Default)]
struct Shared {
    /// The tree of the latest checkout (`None` before the first).
    tree: Mutex<Option<Tree>>,
    /// The index of the first operation the replay has not taken yet.
    applied: AtomicU64,
    walked: AtomicU64,
    skipped: AtomicU64,
}

impl Shared {
    fn tree(&self) -> Option<Tree> {
        self.tree.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// One walker's loop: walks the jobs it is sent until its channel closes.
    fn work(&self, jobs: &Receiver<Vec<Job>>) {
        // A walker yields the CPU to the replay, the trace reader and the commit thread: it only
        // helps with the time they leave idle (waiting for the disk).
        larch_core::mark_helper_thread();
        larch_core::lower_thread_priority(WALKER_NICE);
        for batch in jobs {
            let tree = self.tree();
            for job in batch {
                match &tree {
                    Some(tree) if job.op_index >= self.applied.load(Ordering::Relaxed) => {
                        // Errors are the replay's to meet when it applies the operation.
                        if job.value {
                            let _ = tree.find(&job.path.steps());
                        } else {
                            let _ = tree.mem_tree(&job.path.steps());
                        }
                        self.walked.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {
                        self.skipped.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
    }
}

/// The walking threads and the operations read ahead of the replay. The replay's thread hands
/// the walkers batches of paths over channels of their own, in turn, so that it does not contend
/// with them for a queue's lock (a walker runs at the lowest priority and may be preempted at any
/// point); the only lock they share is the latest tree's, taken once a batch and at checkouts.
pub(super) struct Walkers {
    shared: Arc<Shared>,
    senders: Vec<Sender<Vec<Job>>>,
    threads: Vec<JoinHandle<()>>,
    /// Jobs not yet handed over.
    pending: Vec<Job>,
    /// Jobs handed over at once: [`JOBS_AT_ONCE`], fewer where the window would not give each
    /// walker two batches.
    batch: usize,
    /// The walker the next batch goes to.
    turn: usize,
    /// The hashes of the paths queued lately (forgotten by [`RECENT_PATHS`] at a time): a path
    /// queued again (a `find` then an `add` of the same key, a hot account) is walked once (a
    /// path whose hash collides with a recent one is not walked, which only costs its read).
    /// Each with whether a later `find` of it needs no walk: a `find` read its value, or a write
    /// (`add`, `remove`, a `copy`'s paths) replaced it, so that a `find` reads it from the replay's
    /// own tree. A `find` after a `mem` or `mem_tree` of the same path is walked again, for the
    /// value.
    recent: HashMap<u64, bool>,
    /// The hasher of [`Walkers::recent`].
    hasher: RandomState,
}

/// The paths [`Walkers::recent`] holds before it starts again.
const RECENT_PATHS: usize = 4096;

impl Walkers {
    /// Starts `config.threads` walkers (fewer if a thread cannot be started: none reads ahead
    /// then, which only costs the time it would have saved).
    pub(super) fn start(config: ReadAhead) -> Walkers {
        let shared = Arc::new(Shared::default());
        let mut senders = Vec::new();
        let mut threads = Vec::new();
        for i in 0..config.threads.max(1) {
            let (sender, receiver) = channel();
            let worker = shared.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("larch-ahead-{i}"))
                .spawn(move || worker.work(&receiver));
            if let Ok(thread) = spawned {
                senders.push(sender);
                threads.push(thread);
            }
        }
        let batch = JOBS_AT_ONCE.min((config.ops / (2 * config.threads.max(1))).max(1));
        Walkers {
            shared,
            senders,
            threads,
            pending: Vec::new(),
            batch,
            turn: 0,
            recent: HashMap::new(),
            hasher: RandomState::new(),
        }
    }

    /// Queues the paths `op` reads or writes, as the operation at `op_index`.
    pub(super) fn queue(&mut self, op_index: u64, op: &Op) {
        let paths: [Option<&Path>; 2] = match op {
            Op::Find { path, .. }
            | Op::Mem { path, .. }
            | Op::MemTree { path, .. }
            | Op::Add { path, .. }
            | Op::Remove { path, .. } => [Some(path), None],
            Op::Copy { from, to, .. } => [Some(from), Some(to)],
            Op::Checkout { .. } | Op::Commit { .. } => [None, None],
        };
        let value = matches!(op, Op::Find { .. });
        let covers_value = !matches!(op, Op::Mem { .. } | Op::MemTree { .. });
        for path in paths.into_iter().flatten() {
            if self.recent.len() >= RECENT_PATHS {
                self.recent.clear();
            }
            let walk = match self.recent.entry(self.hasher.hash_one(path)) {
                Entry::Vacant(entry) => {
                    entry.insert(covers_value);
                    true
                }
                Entry::Occupied(mut entry) => {
                    let covered = *entry.get();
                    *entry.get_mut() = covered || covers_value;
                    value && !covered
                }
            };
            if walk {
                self.pending.push(Job { op_index, path: path.clone(), value });
            }
        }
        if self.pending.len() >= self.batch {
            self.hand_over();
        }
    }

    /// Hands the pending jobs to the next walker.
    fn hand_over(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let batch = std::mem::replace(&mut self.pending, Vec::with_capacity(self.batch));
        let count = batch.len() as u64;
        let sent = match self.senders.get(self.turn % self.senders.len().max(1)) {
            Some(sender) => sender.send(batch).is_ok(),
            None => false,
        };
        if !sent {
            self.shared.skipped.fetch_add(count, Ordering::Relaxed);
        }
        self.turn = self.turn.wrapping_add(1);
    }

    /// The replay has taken every operation before `op_index`: their paths are skipped.
    pub(super) fn applying(&self, op_index: u64) {
        self.shared.applied.store(op_index, Ordering::Relaxed);
    }

    /// Walks the paths handed over from now on on `tree`; the pending ones are handed over.
    pub(super) fn set_tree(&mut self, tree: Tree) {
        let previous = self.shared.tree.lock().unwrap_or_else(PoisonError::into_inner).replace(tree);
        // The previous checkout's tree is dropped outside the lock.
        drop(previous);
        self.hand_over();
    }

    /// What the walkers did so far.
    pub(super) fn counts(&self) -> ReadAheadCounts {
        ReadAheadCounts {
            walked: self.shared.walked.load(Ordering::Relaxed),
            skipped: self.shared.skipped.load(Ordering::Relaxed),
        }
    }

    /// Stops the walkers (what they were not handed yet is skipped) and waits for them.
    pub(super) fn finish(mut self) -> ReadAheadCounts {
        self.stop();
        self.counts()
    }

    fn stop(&mut self) {
        self.shared.skipped.fetch_add(self.pending.len() as u64, Ordering::Relaxed);
        self.pending.clear();
        // Every operation is taken: what the walkers still hold is skipped, not walked.
        self.shared.applied.store(u64::MAX, Ordering::Relaxed);
        self.senders.clear();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
        self.shared.tree.lock().unwrap_or_else(PoisonError::into_inner).take();
    }
}

/// The trace's operations, read [`ReadAhead::ops`] ahead of the replay, each one's paths queued
/// for the walkers as it is read; without a [`ReadAhead`], the operations as they come.
pub(super) struct Ahead<I: Iterator> {
    source: I,
    /// The source returned its end or an error: nothing more is read from it.
    done: bool,
    buffer: VecDeque<I::Item>,
    walkers: Option<Walkers>,
    /// [`ReadAhead::ops`].
    window: usize,
    /// The index of the next operation read from the source.
    read: u64,
    /// The index of the next operation handed to the replay.
    handed: u64,
}

impl<I, E> Ahead<I>
where
    I: Iterator<Item = Result<Op, E>>,
{
    /// Reads `source` ahead as `config` says (walkers started), or not at all.
    pub(super) fn new(source: I, config: Option<ReadAhead>) -> Ahead<I> {
        Ahead {
            source,
            done: false,
            buffer: VecDeque::new(),
            walkers: config.map(Walkers::start),
            window: config.map_or(0, |config| config.ops.max(1)),
            read: 0,
            handed: 0,
        }
    }

    /// Whether walkers read ahead (a [`ReadAhead`] was given).
    pub(super) fn reads_ahead(&self) -> bool {
        self.walkers.is_some()
    }

    /// The tree of the latest checkout: the walks of the paths queued from now on are on it.
    pub(super) fn set_tree(&mut self, tree: Tree) {
        if let Some(walkers) = &mut self.walkers {
            walkers.set_tree(tree);
        }
    }

    /// Stops the walkers; what they did, if there were any.
    pub(super) fn finish(&mut self) -> Option<ReadAheadCounts> {
        self.walkers.take().map(Walkers::finish)
    }
}

impl<I, E> Iterator for Ahead<I>
where
    I: Iterator<Item = Result<Op, E>>,
{
    type Item = Result<Op, E>;

    fn next(&mut self) -> Option<Self::Item> {
        let Some(walkers) = &mut self.walkers else {
            return self.source.next();
        };
        while !self.done && self.buffer.len() < self.window {
            match self.source.next() {
                Some(Ok(op)) => {
                    walkers.queue(self.read, &op);
                    self.read += 1;
                    self.buffer.push_back(Ok(op));
                }
                Some(Err(err)) => {
                    self.buffer.push_back(Err(err));
                    self.done = true;
                }
                None => self.done = true,
            }
        }
        let item = self.buffer.pop_front()?;
        self.handed += 1;
        // The replay applies this operation now: its paths and earlier ones are not walked.
        walkers.applying(self.handed);
        Some(item)
    }
}

impl Drop for Walkers {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use larch_core::CommitInfo;
    use larch_trace::op::Scoped;
    use std::time::{Duration, Instant};

    /// `index/<i>/balance`: 3,000 accounts in one large directory (an inode tree).
    fn account(i: u64) -> Path {
        Path::from_steps([b"index".to_vec(), format!("{i:06}").into_bytes(), b"balance".to_vec()])
    }

    fn find(path: Path, op_index: u64) -> Op {
        Op::Find { path, found: true, input: Scoped::Keep(op_index) }
    }

    /// Account `i`'s balance, `len` bytes long (at least 8): records of their own past 256 bytes,
    /// inline in their directory's record up to it.
    fn balance(i: u64, len: usize) -> Vec<u8> {
        let mut value = i.to_be_bytes().to_vec();
        value.resize(len.max(8), 0);
        value
    }

    /// A store holding the accounts with balances of `len` bytes, reopened with its cache empty,
    /// and its head.
    fn cold_store(dir: &std::path::Path, len: usize) -> (larch_store::Repo, larch_core::Hash) {
        let mut repo = larch_store::Repo::open(dir).expect("open");
        let mut tree = repo.empty_tree();
        for i in 0..3_000 {
            tree.add(&account(i).steps(), balance(i, len)).expect("add");
        }
        let head = repo.commit(&tree, &[], CommitInfo::tezos(1, "accounts")).expect("commit");
        repo.close().expect("close");
        (larch_store::Repo::open(dir).expect("reopen"), head)
    }

    /// `threads` walkers on the head of a cold store with balances of `len` bytes (kept in the
    /// returned directory).
    fn walkers_on_a_cold_store(
        threads: usize,
        len: usize,
    ) -> (tempfile::TempDir, larch_store::Repo, larch_core::Hash, Walkers) {
        let dir = tempfile::tempdir().expect("tempdir");
        let (repo, head) = cold_store(dir.path(), len);
        let mut walkers = Walkers::start(ReadAhead { ops: 1_000, threads });
        walkers.set_tree(repo.checkout(&head).expect("checkout"));
        (dir, repo, head, walkers)
    }

    fn wait_for(walkers: &Walkers, done: u64) -> ReadAheadCounts {
        let start = Instant::now();
        loop {
            let counts = walkers.counts();
            if counts.walked + counts.skipped >= done || start.elapsed() > Duration::from_secs(60) {
                return counts;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn the_walked_paths_are_read_without_a_miss_afterwards() {
        let (_dir, repo, head, mut walkers) = walkers_on_a_cold_store(4, 8);
        for i in 0..500 {
            walkers.queue(i, &find(account(i), i));
        }
        walkers.hand_over();
        let counts = wait_for(&walkers, 500);
        assert_eq!(counts, ReadAheadCounts { walked: 500, skipped: 0 });
        // A tree of its own, as the replay's: the nodes the walkers loaded are in the cache.
        let tree = repo.checkout(&head).expect("checkout");
        let misses = repo.stats().cache_misses;
        for i in 0..500 {
            let value = tree.find(&account(i).steps()).expect("find").expect("present");
            assert_eq!(value.as_ref().as_ref(), i.to_be_bytes());
        }
        assert_eq!(repo.stats().cache_misses, misses, "walked paths miss nothing");
        // The accounts not walked do miss: the check above could fail.
        let _ = tree.find(&account(2_999).steps()).expect("find");
        assert!(repo.stats().cache_misses > misses);
        assert_eq!(walkers.finish(), counts);
    }

    #[test]
    fn a_find_reads_its_value_ahead_and_a_mem_does_not() {
        // Balances of 300 bytes: each a record of its own, which only a read of the value loads.
        let (_dir, repo, head, mut walkers) = walkers_on_a_cold_store(3, 300);
        let mem = |i: u64| Op::Mem { path: account(i), found: true, input: Scoped::Keep(i) };
        for i in 0..100 {
            walkers.queue(i, &find(account(i), i));
            walkers.queue(100 + i, &mem(100 + i));
        }
        // A `find` after a `mem` of the same path: walked again, for its value; a `find` after a
        // `find` or an `add` of its path is not (the replay reads an added value from its tree).
        walkers.queue(200, &mem(200));
        walkers.queue(201, &find(account(200), 201));
        walkers.queue(202, &find(account(200), 202));
        let add = |i: u64| Op::Add {
            path: account(i),
            value: vec![1],
            input: Scoped::Forget(i),
            out: Scoped::Keep(i),
        };
        walkers.queue(203, &add(201));
        walkers.queue(204, &find(account(201), 204));
        walkers.hand_over();
        assert_eq!(wait_for(&walkers, 203), ReadAheadCounts { walked: 203, skipped: 0 });
        let tree = repo.checkout(&head).expect("checkout");
        let misses = repo.stats().cache_misses;
        for i in (0..100).chain([200]) {
            let value = tree.find(&account(i).steps()).expect("find").expect("present");
            assert_eq!(value.as_ref().as_ref(), balance(i, 300));
        }
        assert_eq!(repo.stats().cache_misses, misses, "the values of walked finds miss nothing");
        for i in 100..110 {
            let _ = tree.find(&account(i).steps()).expect("find");
        }
        assert_eq!(repo.stats().cache_misses, misses + 10, "a mem's walk leaves the value unread");
        // The threads joined, the counts are final: no walk more than those.
        assert_eq!(walkers.finish(), ReadAheadCounts { walked: 203, skipped: 0 });
    }

    #[test]
    fn paths_of_operations_already_taken_and_repeated_paths_are_not_walked() {
        let (_dir, repo, head, mut walkers) = walkers_on_a_cold_store(2, 8);
        walkers.applying(100);
        for i in 0..100 {
            walkers.queue(i, &find(account(i), i));
        }
        walkers.hand_over();
        assert_eq!(wait_for(&walkers, 100), ReadAheadCounts { walked: 0, skipped: 100 });
        // A find then an add of the same key: one walk.
        let add =
            Op::Add { path: account(100), value: vec![1], input: Scoped::Forget(0), out: Scoped::Keep(1) };
        walkers.queue(100, &find(account(100), 100));
        walkers.queue(101, &add);
        walkers.hand_over();
        assert_eq!(wait_for(&walkers, 101), ReadAheadCounts { walked: 1, skipped: 100 });
        let misses = repo.stats().cache_misses;
        let _ = repo.checkout(&head).expect("checkout").find(&account(0).steps()).expect("find");
        assert!(repo.stats().cache_misses > misses, "skipped paths were not read");
        assert_eq!(walkers.finish(), ReadAheadCounts { walked: 1, skipped: 100 });
    }

    #[test]
    fn operations_come_out_in_order_up_to_and_with_the_source_error() {
        #[derive(Debug, PartialEq)]
        struct Broken(u32);
        let ops: Vec<Result<Op, Broken>> = (0..50u64)
            .map(|i| Ok(find(account(i), i)))
            .chain([Err(Broken(7))])
            .chain((50..60u64).map(|i| Ok(find(account(i), i))))
            .collect();
        let expected: Vec<String> = ops.iter().take(51).map(|item| format!("{item:?}")).collect();
        for window in [1, 3, 64] {
            let source = ops.iter().map(|item| match item {
                Ok(op) => Ok(op.clone()),
                Err(Broken(code)) => Err(Broken(*code)),
            });
            let mut ahead = Ahead::new(source, Some(ReadAhead { ops: window, threads: 1 }));
            let mut got = Vec::new();
            for item in ahead.by_ref() {
                let stop = item.is_err();
                got.push(format!("{item:?}"));
                if stop {
                    break;
                }
            }
            assert_eq!(got, expected, "window {window}");
            let counts = ahead.finish().expect("walkers were started");
            // No checkout's tree was given: every queued path is skipped, none walked.
            assert_eq!(counts, ReadAheadCounts { walked: 0, skipped: 50 }, "window {window}");
        }
    }
}
