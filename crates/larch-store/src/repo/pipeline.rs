//! A writer that commits on a second thread (`larch replay --pipeline`): the caller hashes a
//! block's tree and goes on with the next block while a commit thread encodes, writes, syncs and
//! publishes it. See `docs/store.md`, *Pipelined commits*.

use crate::error::{Result, StoreError};
use crate::repo::Repo;
use larch_core::{BackendStats, CommitInfo, ContextRepo, GcSummary, Hash, Tree, schema};
use std::collections::VecDeque;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

/// A commit that rewrote at least this many nodes is checked out from the store, not from
/// memory (the default trace's setup block writes ~347,000 objects, its large bursts ~16,000).
const MEMORY_CHECKOUT_MAX_DIRTY: usize = 1 << 16;

/// Whether the commit of `tree` rewrites at least [`MEMORY_CHECKOUT_MAX_DIRTY`] nodes: by the
/// edits' count since its checkout ([`Tree::dirty_bound`], which hashing keeps: a tree the caller
/// hashed, a generator reading its hash before the commit, `Context.hash`, may have no unhashed
/// node left to count, or only those of its last edits), or counted exactly among its nodes not
/// hashed yet. The bound may overcount (several edits of one node); a commit it calls huge is
/// only waited for.
fn rewrote_many(tree: &Tree) -> bool {
    tree.dirty_bound().is_some_and(|bound| bound >= MEMORY_CHECKOUT_MAX_DIRTY)
        || !tree.dirty_subtrees(MEMORY_CHECKOUT_MAX_DIRTY).is_empty()
}

/// After a commit that rewrote at least this many nodes (by [`Tree::dirty_bound`]; a large burst
/// of the generated workload rewrites about 40,000, a regular block one or two thousand), the tree carried into the next
/// blocks gives back its stored nodes once that commit is written ([`Tree::release_stored`]).
const RELEASE_MIN_DIRTY: usize = 1 << 14;

/// The most commits a [`PipelinedRepo`] keeps in flight.
pub const PIPELINE_MAX_DEPTH: usize = 16;

/// A commit handed to the commit thread.
struct Job {
    tree: Tree,
    parents: Vec<Hash>,
    info: CommitInfo,
    /// The hash returned to the caller: computed by it ([`PipelinedRepo::commit`]), or the one it
    /// expects ([`PipelinedRepo::commit_expected`]).
    hash: Hash,
    /// Whether `hash` is the caller's expectation (a mismatch is then the caller's, not a bug).
    expected: bool,
}

/// What the commit thread reports after a job.
struct Done {
    result: Result<()>,
    stats: BackendStats,
    gc_running: bool,
}

/// A [`Repo`] writer whose commits run on a commit thread, one at a time, in order.
///
/// [`PipelinedRepo::commit`] checks the commit, hashes the tree on the calling thread (the hash
/// it returns is the commit's), waits until fewer than the pipeline's *depth* commits are in
/// flight, and hands the tree to the commit thread, which runs [`Repo::commit`] (encode, write,
/// sync and publish under the store's sync policy). So when `commit` returns, every commit but the
/// last *depth* ones (this one included) is written and, under `SyncPolicy::Commit`, durable: with
/// depth 1 ([`PipelinedRepo::new`]), the commit before it; [`PipelinedRepo::wait_durable`] waits
/// for all. A checkout of the last commit handed over is served from memory (its tree as
/// committed), so the next block starts at once; after a commit that rewrote many nodes (a
/// large burst), the tree handed over once it is written refers to that commit's nodes by key
/// again ([`Tree::release_stored`]), so that they are not kept in memory for hundreds of blocks.
/// A failure on the commit thread is returned by
/// the next call (then [`StoreError::Poisoned`]), and nothing after it is committed (the commits
/// queued behind it are dropped).
///
/// The store's read counters ([`ContextRepo::stats`]) are live; its write counters and size are
/// those sampled after the last finished commit. Everything else (garbage collection, checkout of
/// older commits, closing) waits for the commits in flight first.
pub struct PipelinedRepo {
    repo: Arc<Mutex<Repo>>,
    /// The writer's object source (its reading ahead told of each new tree).
    source: Arc<crate::pack::reader::PackSource>,
    jobs: Option<SyncSender<Job>>,
    done: Receiver<Done>,
    thread: Option<JoinHandle<()>>,
    /// The hashes of the commits handed over and not reported done yet, oldest first.
    pending: VecDeque<Hash>,
    /// At most this many commits are in flight.
    depth: usize,
    /// The last commit handed over, with its tree.
    last: Option<(Hash, Tree)>,
    /// A commit of at least [`RELEASE_MIN_DIRTY`] rewritten nodes, carried in memory: once it is
    /// written, the next commit's tree gives back the stored nodes it holds.
    release_after: Option<Hash>,
    /// Carried trees given back so far ([`PipelinedRepo::releases`]).
    releases: u64,
    empty: Tree,
    stats: BackendStats,
    gc_running: bool,
    /// A GC was started whose end was not reported yet.
    gc_unreported: bool,
    failed: bool,
}

impl std::fmt::Debug for PipelinedRepo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipelinedRepo")
            .field("in_flight", &self.pending.len())
            .field("last", &self.last.as_ref().map(|(hash, _)| hash))
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

fn lock(repo: &Mutex<Repo>) -> MutexGuard<'_, Repo> {
    repo.lock().unwrap_or_else(PoisonError::into_inner)
}

impl PipelinedRepo {
    /// Wraps the writer `repo`, starting its commit thread, with one commit in flight at most:
    /// when [`commit`](PipelinedRepo::commit) returns, the commit before it is done.
    pub fn new(repo: Repo) -> Result<PipelinedRepo> {
        PipelinedRepo::with_depth(repo, 1)
    }

    /// This writer, keeping in memory the nodes written in the last `bytes` of the pack when a
    /// carried tree copies their parent for a change (default
    /// `RECENT_IN_MEMORY`; 0: every node the store holds is then referred to by key).
    /// More bytes: fewer reads of recent nodes, more memory.
    pub fn with_recent_in_memory(self, bytes: u64) -> PipelinedRepo {
        lock(&self.repo).source.reader.set_recent_window(bytes);
        self
    }

    /// This writer, keeping in memory the inode trees (the inner nodes of directories above 256
    /// entries) written in the last `bytes` of the pack as well (default
    /// `RECENT_INODES_IN_MEMORY`; 0: only those of
    /// [`with_recent_in_memory`](PipelinedRepo::with_recent_in_memory)).
    pub fn with_recent_inodes_in_memory(self, bytes: u64) -> PipelinedRepo {
        lock(&self.repo).source.reader.set_recent_inodes_window(bytes);
        self
    }

    /// Wraps the writer `repo`, starting its commit thread, with at most `depth` commits in
    /// flight (at least 1, at most [`PIPELINE_MAX_DEPTH`]; other values are brought within): when
    /// [`commit`](PipelinedRepo::commit) returns, every commit but the last `depth` (this one
    /// included) is done. A deeper pipeline lets the caller run ahead of a commit thread that
    /// is slower for a few blocks; each commit in flight holds its tree in memory.
    pub fn with_depth(mut repo: Repo, depth: usize) -> Result<PipelinedRepo> {
        let depth = depth.clamp(1, PIPELINE_MAX_DEPTH);
        repo.check_writable()?;
        repo.source.reader.set_detach(true);
        repo.source.reader.set_recent_window(crate::options::RECENT_IN_MEMORY);
        repo.source.reader.set_recent_inodes_window(crate::options::RECENT_INODES_IN_MEMORY);
        repo.prime_fraction = crate::repo::PIPELINED_PRIME_FRACTION;
        let empty = repo.empty_tree();
        let stats = ContextRepo::stats(&repo);
        let gc_running = repo.gc_running();
        let source = repo.source.clone();
        let repo = Arc::new(Mutex::new(repo));
        let (jobs, receive_jobs) = sync_channel::<Job>(depth);
        let (send_done, done) = sync_channel::<Done>(depth);
        let shared = repo.clone();
        let thread = std::thread::Builder::new()
            .name("larch-commit".into())
            .spawn(move || {
                // After a failure, the commits queued behind it are not made.
                let mut failed = false;
                while let Ok(job) = receive_jobs.recv() {
                    let mut repo = lock(&shared);
                    let result = if failed {
                        Err(StoreError::Poisoned)
                    } else {
                        repo.commit(&job.tree, &job.parents, job.info)
                    };
                    let result = result.and_then(|actual| {
                        if actual == job.hash {
                            Ok(())
                        } else if job.expected {
                            Err(StoreError::UnexpectedCommit { expected: job.hash, actual })
                        } else {
                            Err(StoreError::CommitMismatch { expected: job.hash, actual })
                        }
                    });
                    failed |= result.is_err();
                    let stats = ContextRepo::stats(&*repo);
                    let gc_running = repo.gc_running();
                    drop(repo);
                    drop(job.tree);
                    if send_done.send(Done { result, stats, gc_running }).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| StoreError::io(crate::FileKind::Pack, 0, "start the commit thread", e))?;
        Ok(PipelinedRepo {
            repo,
            source,
            jobs: Some(jobs),
            done,
            thread: Some(thread),
            pending: VecDeque::with_capacity(depth),
            depth,
            last: None,
            release_after: None,
            releases: 0,
            empty,
            stats,
            gc_running,
            gc_unreported: gc_running,
            failed: false,
        })
    }

    /// Waits for the commits in flight, if any. A failure is returned once; after it, every call
    /// returns [`StoreError::Poisoned`].
    fn settle(&mut self) -> Result<()> {
        self.settle_to(0)
    }

    /// Waits for the oldest commits in flight until at most `most` are.
    fn settle_to(&mut self, most: usize) -> Result<()> {
        while self.pending.len() > most {
            let done = self.done.recv().ok();
            self.take(done)?;
        }
        if self.failed { Err(StoreError::Poisoned) } else { Ok(()) }
    }

    /// Takes the results of the commits in flight that are already done (without waiting): a
    /// failure is returned now rather than after a checkout served from memory.
    fn poll(&mut self) -> Result<()> {
        while !self.pending.is_empty() {
            match self.done.try_recv() {
                Ok(done) => self.take(Some(done))?,
                Err(std::sync::mpsc::TryRecvError::Empty) => break,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => self.take(None)?,
            }
        }
        if self.failed { Err(StoreError::Poisoned) } else { Ok(()) }
    }

    /// Adopts what the commit thread reported about the oldest commit in flight (nothing: it is
    /// gone, and so are the others).
    fn take(&mut self, done: Option<Done>) -> Result<()> {
        self.pending.pop_front();
        let Some(done) = done else {
            self.pending.clear();
            self.failed = true;
            self.last = None;
            return Err(StoreError::Poisoned);
        };
        self.stats = done.stats;
        self.gc_running = done.gc_running;
        if let Err(e) = done.result {
            self.failed = true;
            self.last = None;
            return Err(e);
        }
        Ok(())
    }

    /// The repository, once the commits in flight are done.
    fn settled(&mut self) -> Result<MutexGuard<'_, Repo>> {
        self.settle()?;
        Ok(lock(&self.repo))
    }

    /// Checks `tree` and `parents`, hashes the tree here, waits for the commit before, and hands
    /// this one to the commit thread; returns the commit hash. See [`PipelinedRepo`] for what is
    /// done when it returns.
    pub fn commit(&mut self, tree: &Tree, parents: &[Hash], info: CommitInfo) -> Result<Hash> {
        self.submit(tree, parents, info, None)
    }

    /// [`PipelinedRepo::commit`] for a caller that knows the commit's hash: returns `expected`
    /// without hashing the tree; the commit thread hashes it while the caller goes on, and a
    /// different hash fails the next call with [`StoreError::UnexpectedCommit`] (nothing after it
    /// is committed). A checkout of `expected` is served from memory meanwhile, as for `commit`.
    pub fn commit_expected(
        &mut self,
        tree: &Tree,
        parents: &[Hash],
        info: CommitInfo,
        expected: &Hash,
    ) -> Result<Hash> {
        self.submit(tree, parents, info, Some(*expected))
    }

    /// [`PipelinedRepo::commit`] (`expected` `None`) and [`PipelinedRepo::commit_expected`].
    fn submit(
        &mut self,
        tree: &Tree,
        parents: &[Hash],
        info: CommitInfo,
        expected: Option<Hash>,
    ) -> Result<Hash> {
        if self.failed {
            return Err(StoreError::Poisoned);
        }
        self.source.prefetch().new_tree();
        // A tree this large (a setup block, an import) is not served from memory afterwards (its
        // nodes would stay reachable from the next blocks' trees until each is copied again), so
        // its commit is waited for here.
        let huge = rewrote_many(tree);
        let hash = match expected {
            Some(expected) => expected,
            None => schema::commit_hash(&crate::commit::hashing::tree_hash(tree), parents, &info),
        };
        // Room for this commit: the oldest in flight are waited for.
        self.settle_to(self.depth - 1)?;
        // Parents in flight are checked by the commit thread, in order; any other parent must be
        // in the store, checked once the commits in flight are done.
        if self.pending.is_empty() || !parents.iter().all(|parent| self.pending.contains(parent)) {
            self.settled()?.check_commit(tree, parents, false)?;
        } else {
            crate::repo::check_commit_shape(tree, parents)?;
        }
        let released = self.release_carried(tree)?;
        let tree = released.as_ref().unwrap_or(tree);
        if !huge && tree.dirty_bound().is_some_and(|bound| bound >= RELEASE_MIN_DIRTY) {
            self.release_after = Some(hash);
        }
        let kept = (!huge).then(|| (hash, tree.clone()));
        // The tree of the commit before is freed here, where its nodes were allocated: freeing
        // them on the commit thread measured 3-7% more CPU time and 11-16 MiB more peak RSS (the
        // allocator's pages freed from another thread are reclaimed late).
        self.last = kept;
        let job =
            Job { tree: tree.clone(), parents: parents.to_vec(), info, hash, expected: expected.is_some() };
        let sent = self.jobs.as_ref().is_some_and(|jobs| jobs.send(job).is_ok());
        if sent {
            self.pending.push_back(hash);
            if huge {
                // Nothing can overlap it (the next checkout reads the store): its cost is this
                // block's, not the next one's.
                self.settle()?;
            }
            Ok(hash)
        } else {
            self.failed = true;
            self.last = None;
            Err(StoreError::Poisoned)
        }
    }

    /// `tree` with its stored nodes referred to by key ([`Tree::release_stored`]; but those of
    /// the last [`PipelinedRepo::with_recent_in_memory`] bytes, and not keeping the inode trees
    /// of [`PipelinedRepo::with_recent_inodes_in_memory`]) when a large commit carried in
    /// memory ([`PipelinedRepo::release_after`]) is written: the commits in
    /// flight are waited for first (regular blocks, a few milliseconds), since the release
    /// copies the nodes above those it gives back. The copies are committed and carried, not the
    /// caller's nodes: a caller that goes on from its own tree instead of a checkout has those
    /// written again by its next commit. `None`: nothing to do.
    fn release_carried(&mut self, tree: &Tree) -> Result<Option<Tree>> {
        let Some(after) = self.release_after else { return Ok(None) };
        if self.pending.contains(&after) {
            return Ok(None);
        }
        self.release_after = None;
        self.settle()?;
        let Some(held) = larch_core::ObjectSource::held_keys(&*self.source) else { return Ok(None) };
        // The inode trees the large commit wrote are given back too, whatever their window:
        // kept, each would be copied above the leaves given back (on the mainnet rung, the
        // burst's thousands of inner inodes: +23 MiB of RSS at the release, held on).
        let held = larch_core::HeldKeys { recent_inodes_from: u64::MAX, ..held };
        self.releases += 1;
        Ok(Some(tree.release_stored(held).0))
    }

    /// The store's reader (its cache), for tests.
    #[cfg(test)]
    pub(crate) fn reader(&self) -> &crate::pack::reader::PackReader {
        &self.source.reader
    }

    /// How many times a large commit's carried tree was given back once written (see
    /// `docs/store.md`, *Pipelined commits*): for tests and diagnostics.
    pub fn releases(&self) -> u64 {
        self.releases
    }

    /// The tree of commit `hash`: from memory for the last commit handed over (done or not; unless
    /// it rewrote more than 65,536 nodes), else from the store once the commits in flight are done.
    pub fn checkout(&mut self, hash: &Hash) -> Result<Tree> {
        self.poll()?;
        self.source.prefetch().new_tree();
        if let Some((last, tree)) = &self.last
            && last == hash
            && !self.failed
        {
            // Its modified nodes are the commit's: the next commit counts its own edits.
            let mut tree = tree.clone();
            tree.forget_dirty();
            return Ok(tree);
        }
        self.settled()?.checkout(hash)
    }

    /// Waits until every commit returned so far is written and durable as the store's sync
    /// policy makes it ([`Repo::wait_durable`]).
    pub fn wait_durable(&mut self) -> Result<()> {
        self.settled()?.wait_durable()
    }

    /// Runs `f` on the repository once the commits in flight are done.
    pub fn with_repo<T>(&mut self, f: impl FnOnce(&mut Repo) -> T) -> Result<T> {
        Ok(f(&mut *self.settled()?))
    }

    /// Waits for the commits in flight, stops the commit thread and returns the repository (to
    /// close it, or to go on without the pipeline). Returns the failure of a commit in flight if
    /// one failed; after a failure already returned by an earlier call, the repository is returned
    /// (its own state says what it can still do: a failed publish poisons it).
    pub fn into_inner(mut self) -> Result<Repo> {
        let reported = self.failed;
        let settled = self.settle();
        self.stop();
        let repo = self.repo.clone();
        // Dropping `self` drops its own reference; the commit thread's is gone with it.
        drop(self);
        if !reported {
            settled?;
        }
        match Arc::try_unwrap(repo) {
            Ok(mutex) => {
                let mut repo = mutex.into_inner().unwrap_or_else(PoisonError::into_inner);
                repo.source.reader.set_detach(false);
                repo.source.reader.set_recent_window(0);
                repo.source.reader.set_recent_inodes_window(0);
                repo.prime_fraction = crate::repo::PRIME_FRACTION;
                Ok(repo)
            }
            Err(_) => Err(StoreError::Poisoned),
        }
    }

    fn stop(&mut self) {
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for PipelinedRepo {
    fn drop(&mut self) {
        let _ = self.settle();
        self.stop();
    }
}

impl ContextRepo for PipelinedRepo {
    type Error = StoreError;

    fn empty_tree(&self) -> Tree {
        self.empty.clone()
    }

    fn checkout(&mut self, commit: &Hash) -> Result<Tree> {
        PipelinedRepo::checkout(self, commit)
    }

    fn commit(&mut self, tree: &Tree, parents: &[Hash], info: CommitInfo) -> Result<Hash> {
        PipelinedRepo::commit(self, tree, parents, info)
    }

    fn commit_expected(
        &mut self,
        tree: &Tree,
        parents: &[Hash],
        info: CommitInfo,
        expected: &Hash,
    ) -> Result<Hash> {
        PipelinedRepo::commit_expected(self, tree, parents, info, expected)
    }

    fn wait_durable(&mut self) -> Result<()> {
        PipelinedRepo::wait_durable(self)
    }

    fn unexpected_commit(error: &StoreError) -> Option<(Hash, Hash)> {
        match error {
            StoreError::UnexpectedCommit { expected, actual } => Some((*expected, *actual)),
            _ => None,
        }
    }

    /// The read side's counters as they are now (the caller's reads, the commit thread's and
    /// those read ahead); the written objects and the store's size as sampled after the last
    /// finished commit (up to the pipeline's depth of commits behind).
    fn stats(&self) -> BackendStats {
        with_live_reads(&self.source, self.stats)
    }

    fn gc_start(&mut self, commit: &Hash) -> Result<bool> {
        let started = ContextRepo::gc_start(&mut *self.settled()?, commit);
        self.gc_running = lock(&self.repo).gc_running();
        self.gc_unreported |= matches!(started, Ok(true));
        started
    }

    /// As sampled after the last finished commit or GC call.
    fn gc_running(&self) -> bool {
        self.gc_running
    }

    /// Without `wait`: nothing to do when no GC was started since the last report; while a
    /// commit is in flight and the GC was still running after the last commit, nothing is done
    /// either (it finishes at a later call); else the commits in flight are waited for first.
    fn gc_finish(&mut self, wait: bool) -> Result<Option<GcSummary>> {
        if !wait && (!self.gc_unreported || (!self.pending.is_empty() && self.gc_running)) {
            return Ok(None);
        }
        let finished = ContextRepo::gc_finish(&mut *self.settled()?, wait);
        self.gc_running = lock(&self.repo).gc_running();
        if matches!(finished, Ok(Some(_))) {
            self.gc_unreported = self.gc_running;
        }
        finished
    }
}

/// `stats` with the read side's counters of `source` as they are now: cache hits and misses, the
/// cache's memory and the nodes read ahead.
fn with_live_reads(source: &crate::pack::reader::PackSource, stats: BackendStats) -> BackendStats {
    let counters = &source.reader.counters;
    let load = |counter: &std::sync::atomic::AtomicU64| counter.load(std::sync::atomic::Ordering::Relaxed);
    BackendStats {
        cache_hits: Some(load(&counters.hits)),
        cache_misses: Some(load(&counters.misses)),
        cache_bytes: Some(source.reader.cache_usage().0),
        objects_read_ahead: Some(load(&source.prefetch().nodes_read)),
        ..stats
    }
}
