//! The Tezos-like trace generator (`tezos-like/v1`, `docs/workload.md`): genesis
//! exactly as on mainnet, the setup block, then regular blocks with the page's operation mix, Zipf
//! skew, value sizes, cycles (copies, removals, bursts) and branches (abandoned contexts, short
//! reorganisations), deterministic from the seed and streamed operation by operation.
//!
//! The generator runs its own operations on an in-memory [`larch_core::Tree`] to record real read
//! results and commit hashes. It keeps only the current context, and the tree of the previous
//! commit only while a coming reorganisation needs it, so its memory is the live state, not the
//! history (about 230 MB for the default trace). [`Generator::run_streamed`] goes on from a
//! store's lazily loaded tree after each commit instead, and holds no tree during the setup
//! nor within a regular block but an abandoned context (the sink's tree is read instead): with the setup in parts ([`GenParams::setup_part_ops`])
//! its memory is the sink's part and the store's cache, whatever the context's size (the scale
//! ladder's large rungs, [`Rung`]).
//!
//! The trace, block by block (files of this module by concern):
//! - block 0, `setup.rs`: the mainnet genesis operations, exactly; context 0 is the empty tree.
//! - block 1, `setup.rs`: the whole initial state in one block: accounts, originated contracts,
//!   big maps with Zipf-distributed sizes, delegates and their stake, cycles 0-5, singletons.
//! - regular blocks, `block.rs`: branches and the level's nonce, baker and endorser balances, then
//!   manager operations (transfers; contract calls with big map reads, writes and removals, copies
//!   of small maps, drops of copied maps) until a log-normal budget (mean `ops_per_block`, sigma
//!   0.5) is spent. Receivers, contracts, maps and bakers follow Zipf laws (s = 1.1), senders are
//!   uniform; values follow the §4 sizes (`dist.rs`).
//! - cycle boundaries, `cycle.rs`: cycle `c+5` data, removal of cycle `c-6`, the stake snapshot
//!   (`copy`) and its expiry, a burst over the delegates, and every fifth cycle a large burst.
//! - branches, this file: an abandoned extra context before some blocks; short reorganisations
//!   that check out the head's parent and commit a sibling of the head, which becomes the head.
//!
//! Scopes (`emit.rs`, and the commit of this file): writes consume their input context (`Forget`) and
//! produce a `Keep` one; reads keep theirs; the last operation of an abandoned context and every
//! committed context are `Forget`. Plans are drawn two blocks ahead, so a commit hash is `Keep`
//! exactly when the next block checks it out, and a parent hash exactly when the next block is a
//! reorganisation that checks that parent out again.
//!
//! Layout note: the page puts per-delegate stake under `data/staking/<pkh>/…` and snapshots
//! `data/staking/current`; both hold here with the stake at `data/staking/current/<pkh>/…`.
//!
//! ```
//! use larch_bench::{GenParams, Generator};
//!
//! let params = GenParams { blocks: 3, accounts: 200, ops_per_block: 50, ..GenParams::default() };
//! let mut ops = Vec::new();
//! let report = Generator::new(params)?.run(
//!     &mut |op| {
//!         ops.push(op);
//!         Ok::<(), std::io::Error>(())
//!     },
//!     &mut |_done, _total| {},
//! )?;
//! assert_eq!(report.blocks, 5);
//! # Ok::<(), larch_bench::GenError>(())
//! ```

mod block;
mod cycle;
mod dist;
mod emit;
mod keys;
mod params;
mod report;
mod setup;

pub use dist::{SIZE_BUCKETS, size_bucket};
pub use emit::BlockKind;
pub use params::{GenParams, MIN_SETUP_PART_OPS, ParamError, Rung};
pub use report::GenReport;
pub use setup::{GENESIS_DATE, GENESIS_PROTOCOL};

use block::{Builder, Laws};
use dist::Rng;
use emit::Emitter;
use keys::Model;
use larch_core::schema::commit_hash;
use larch_core::{CommitInfo, Hash, Tree, TreeError};
use larch_trace::op::{ContextId, Op, Scoped};

/// Why generation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GenError {
    /// The parameters are out of range.
    #[error("invalid generator parameters: {0}")]
    Params(#[from] ParamError),
    /// A tree operation failed (cannot happen on the in-memory tree, but is not hidden).
    #[error(transparent)]
    Tree(#[from] TreeError),
    /// A broken invariant of the generator itself (a bug).
    #[error("generator bug: {0}")]
    Internal(&'static str),
    /// The sink refused an operation.
    #[error("writing the trace: {0}")]
    Sink(Box<dyn std::error::Error + Send + Sync + 'static>),
}

/// The generator. Build it with [`Generator::new`], then [`Generator::run`] it once.
#[derive(Debug)]
pub struct Generator {
    params: GenParams,
}

/// A commit the generator may still check out.
#[derive(Clone)]
struct Committed {
    hash: Hash,
    level: u64,
    tree: Tree,
    model: Model,
}

/// How the next block is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Plan {
    /// On the head.
    Normal,
    /// On the head, after an extra context on the head is built and abandoned.
    Abandon,
    /// On the head's parent: a sibling of the head, which it replaces.
    Reorg,
}

/// The setup's parts: commits a part once it holds `part_ops` operations or `part_items` items.
struct SetupParts {
    /// Operations per part (0: no parts).
    part_ops: u64,
    /// With parts: items per part at most ([`GenParams::setup_part_items`]; 0: no bound).
    part_items: u64,
    /// Items of the current part: checkpoints passed since its start.
    items: u64,
    /// Level of the last commit (genesis, then each part).
    level: u64,
    /// Its hash: the next part's parent.
    parent: Hash,
}

impl SetupParts {
    /// Called after each item of the setup: commits the current context as the next setup part
    /// when it holds `part_ops` operations or `part_items` items, and checks the part out again
    /// (from the sink's store, if it gives its tree).
    fn split(
        &mut self,
        out: &mut Emitter<'_>,
        blocks: &mut u64,
        progress: &mut dyn FnMut(u64, u64),
        total: u64,
    ) -> Result<(), GenError> {
        self.items += 1;
        let full = out.context_ops >= self.part_ops || (self.part_items > 0 && self.items >= self.part_items);
        if self.part_ops == 0 || !full {
            return Ok(());
        }
        self.items = 0;
        let level = self.level + 1;
        let info = CommitInfo::tezos(date(level), format!("lvl {level}, {} ops", out.context_ops));
        let hash = commit_hash(&out.tree_hash()?, &[self.parent], &info);
        // The part is checked out next; its parent is never used again.
        out.commit(Scoped::Keep(hash), info.date, info.message, vec![Scoped::Forget(self.parent)])?;
        *blocks += 1;
        progress(*blocks, total.max(*blocks + 1));
        let tree = out.committed_tree(&hash, BlockKind::SetupPart)?;
        out.checkout(Scoped::Keep(hash), tree)?;
        self.level = level;
        self.parent = hash;
        Ok(())
    }
}

/// Counters of the run, for the report.
#[derive(Default)]
struct Tally {
    blocks: u64,
    abandoned: u64,
    reorgs: u64,
    cycles: u64,
    large_bursts: u64,
}

impl Generator {
    /// A generator for `params`, after checking them.
    pub fn new(params: GenParams) -> Result<Generator, GenError> {
        params.validate()?;
        Ok(Generator { params })
    }

    /// The parameters.
    pub fn params(&self) -> &GenParams {
        &self.params
    }

    /// Generates the whole trace into `sink`, one operation at a time, calling
    /// `progress(blocks done, blocks total)` after each commit; returns the report.
    pub fn run<E>(
        self,
        sink: &mut dyn FnMut(Op) -> Result<(), E>,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<GenReport, GenError>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    {
        let mut wrapped = |op: Op| sink(op).map_err(|e| GenError::Sink(e.into()));
        let mut out = Emitter::new(&mut wrapped, None, None);
        Run::new(&self.params).go(&mut out, progress)
    }

    /// As [`Generator::run`], into a sink that commits into a store: after each commit passed to
    /// `sink`, `reload(hash, kind)` (`kind` tells a setup part, the end of the setup and regular
    /// blocks apart) may give the tree of that commit as the store holds it (loaded
    /// lazily), which the generator then goes on from instead of its own in-memory tree; and
    /// `context(id)` may give the sink's own tree of context `id` as the operations passed so far
    /// left it (a clone sharing its nodes, which the generator drops before the next operation).
    /// With it, the generator holds no tree of its own during the setup, nor within a regular
    /// block once its checkout is passed on (but for an abandoned context): the sink alone
    /// applies the operations, and the read results and commit hashes are computed on the sink's
    /// tree (a setup part's tree, a large burst's rewritten directories are held once, not
    /// twice): then `reload` must give the tree of every commit but a setup part's (the generator
    /// has none of its own to go on from; a [`GenError::Internal`] otherwise), and the hashes are
    /// the sink's, checked against [`Generator::run`]'s by the tests, not by a streamed run. With a store's lazy trees and
    /// [`GenParams::setup_part_ops`], the generator's memory is bounded by a setup part and the
    /// store's cache, not by the context's size; the operations and hashes are the same as
    /// [`Generator::run`]'s (each tree has the same contents).
    pub fn run_streamed<E>(
        self,
        sink: &mut dyn FnMut(Op) -> Result<(), E>,
        reload: &mut ReloadFn<'_, E>,
        context: &mut ContextFn<'_, E>,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<GenReport, GenError>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    {
        let mut wrapped = |op: Op| sink(op).map_err(|e| GenError::Sink(e.into()));
        let mut reloaded = |hash: &Hash, kind| reload(hash, kind).map_err(|e| GenError::Sink(e.into()));
        let mut sink_tree = |id: ContextId| context(id).map_err(|e| GenError::Sink(e.into()));
        let mut out = Emitter::new(&mut wrapped, Some(&mut reloaded), Some(&mut sink_tree));
        Run::new(&self.params).go(&mut out, progress)
    }

    /// Generates the whole trace in memory: its operations and the report (for tests and small
    /// traces; [`Generator::run`] streams).
    pub fn collect(self) -> Result<(Vec<Op>, GenReport), GenError> {
        let mut ops = Vec::new();
        let report = self.run(
            &mut |op| {
                ops.push(op);
                Ok::<(), std::convert::Infallible>(())
            },
            &mut |_, _| {},
        )?;
        Ok((ops, report))
    }
}

/// The callback of [`Generator::run_streamed`] that gives the tree of a commit just made.
pub type ReloadFn<'a, E> = dyn FnMut(&Hash, BlockKind) -> Result<Option<Tree>, E> + 'a;

/// The callback of [`Generator::run_streamed`] that gives the sink's tree of a context.
pub type ContextFn<'a, E> = dyn FnMut(ContextId) -> Result<Option<Tree>, E> + 'a;

/// The state of one run.
struct Run<'p> {
    params: &'p GenParams,
    rng: Rng,
    laws: Laws,
    tally: Tally,
}

fn date(level: u64) -> i64 {
    GENESIS_DATE.saturating_add(30i64.saturating_mul(i64::try_from(level).unwrap_or(i64::MAX / 64)))
}

fn scoped(hash: Hash, keep: bool) -> Scoped<Hash> {
    if keep { Scoped::Keep(hash) } else { Scoped::Forget(hash) }
}

impl<'p> Run<'p> {
    fn new(params: &'p GenParams) -> Run<'p> {
        Run { params, rng: Rng::new(params.seed), laws: Laws::new(), tally: Tally::default() }
    }

    fn total_blocks(&self) -> u64 {
        self.params.blocks + 1 + self.params.setup_parts_estimate()
    }

    /// Commits the current context of `out` at `level` with `parent`; the next block's plan decides
    /// whether the new hash (checked out next) or the parent (checked out by a reorganisation) is
    /// kept.
    fn commit(
        &mut self,
        out: &mut Emitter<'_>,
        level: u64,
        message: String,
        parent: Option<Hash>,
        next: Option<Plan>,
    ) -> Result<Hash, GenError> {
        let parents: Vec<Hash> = parent.into_iter().collect();
        let info = CommitInfo::tezos(date(level), message);
        let hash = commit_hash(&out.tree_hash()?, &parents, &info);
        let keep_hash = matches!(next, Some(Plan::Normal | Plan::Abandon));
        let keep_parent = next == Some(Plan::Reorg);
        let parents = parents.into_iter().map(|p| scoped(p, keep_parent)).collect();
        out.commit(scoped(hash, keep_hash), info.date, info.message, parents)?;
        self.tally.blocks += 1;
        Ok(hash)
    }

    /// Draws the plan of regular block `index` (`None` past the last block).
    fn draw_plan(&mut self, index: u64) -> Option<Plan> {
        if index >= self.params.blocks {
            return None;
        }
        let x = self.rng.unit();
        // The first regular block is built on the setup block, never a sibling of it.
        if index > 0 && x < self.params.reorg_rate {
            Some(Plan::Reorg)
        } else if x < self.params.reorg_rate + self.params.abandon_rate {
            Some(Plan::Abandon)
        } else {
            Some(Plan::Normal)
        }
    }

    fn go(
        mut self,
        out: &mut Emitter<'_>,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<GenReport, GenError> {
        let total = self.total_blocks();
        setup::genesis(out)?;
        let genesis = self.commit(out, 0, "Genesis".to_string(), None, Some(Plan::Normal))?;
        progress(self.tally.blocks, total);

        let genesis_tree = out.committed_tree(&genesis, BlockKind::Genesis)?;
        out.checkout(Scoped::Keep(genesis), genesis_tree)?;
        // The setup only adds: a streamed run leaves its tree to the sink.
        out.share_sink_tree()?;
        let mut model = Model::new(self.params.seed);
        let setup_dirs;
        let mut parts = SetupParts {
            part_ops: self.params.setup_part_ops,
            part_items: self.params.setup_part_items,
            items: 0,
            level: 0,
            parent: genesis,
        };
        {
            let tally = &mut self.tally;
            let mut checkpoint =
                |out: &mut Emitter<'_>| parts.split(out, &mut tally.blocks, &mut *progress, total);
            setup_dirs = setup::setup(out, &mut self.rng, &mut model, self.params, &mut checkpoint)?;
        }
        // Every add of genesis and setup makes a new value but the setup's `data/version`.
        let setup_values = out.counts.ops[emit::kind_index(larch_trace::op::OpKind::Add)].saturating_sub(1);
        // Plans are drawn two blocks ahead: a block's commit scopes its hash by the next plan, and a
        // block keeps its base only when the next block is a reorganisation that needs it again.
        let mut plan = self.draw_plan(0);
        let mut next = self.draw_plan(1);
        let level = parts.level + 1;
        let message = format!("lvl {level}, {} ops", out.context_ops);
        let hash = self.commit(out, level, message, Some(parts.parent), plan)?;
        progress(self.tally.blocks, total);
        let mut head =
            Committed { hash, level, tree: out.committed_tree(&hash, BlockKind::SetupEnd)?, model };
        let mut parent: Option<Committed> = None;

        for index in 0..self.params.blocks {
            let current = plan.unwrap_or(Plan::Normal);
            let kept = parent.take();
            let base = if current == Plan::Reorg {
                self.tally.reorgs += 1;
                // The previous block kept its base exactly because this plan was drawn.
                kept.ok_or(GenError::Internal("reorganisation without a kept parent"))?
            } else {
                head
            };
            if current == Plan::Abandon {
                self.abandoned_context(out, &base)?;
            }
            // Keep the base (sharing its tree) only if the next block checks it out again.
            let (base_hash, base_level, tree, mut model) = if next == Some(Plan::Reorg) {
                let kept = base.clone();
                parent = Some(base);
                (kept.hash, kept.level, kept.tree, kept.model)
            } else {
                (base.hash, base.level, base.tree, base.model)
            };
            out.checkout(Scoped::Keep(base_hash), tree)?;
            // A streamed run applies the block once, to the sink's tree (until its commit).
            out.share_sink_tree()?;
            let level = base_level + 1;
            if level % self.params.cycle_length == 0 {
                self.tally.cycles += 1;
                if (level / self.params.cycle_length).is_multiple_of(cycle::LARGE_BURST_PERIOD) {
                    self.tally.large_bursts += 1;
                }
            }
            let mut builder = Builder { out, rng: &mut self.rng, model: &mut model, laws: &mut self.laws };
            block::regular_block(&mut builder, self.params, level)?;
            let message = format!("lvl {level}, {} ops", out.context_ops);
            let hash = self.commit(out, level, message, Some(base_hash), next)?;
            progress(self.tally.blocks, total);
            head = Committed { hash, level, tree: out.committed_tree(&hash, BlockKind::Regular)?, model };
            plan = next;
            next = self.draw_plan(index + 2);
        }
        let parts = report::ReportParts {
            setup_blocks: parts.level + 1,
            setup_values,
            setup_dirs,
            blocks: self.tally.blocks,
            final_level: head.level,
            abandoned: self.tally.abandoned,
            reorgs: self.tally.reorgs,
            cycles: self.tally.cycles,
            large_bursts: self.tally.large_bursts,
            final_commit: head.hash,
        };
        report::build(self.params, parts, &out.counts, &head.tree, &head.model)
    }

    /// An extra context on `base`, built with a few hundred operations and dropped.
    fn abandoned_context(&mut self, out: &mut Emitter<'_>, base: &Committed) -> Result<(), GenError> {
        self.tally.abandoned += 1;
        out.checkout(Scoped::Keep(base.hash), base.tree.clone())?;
        let mut model = base.model.clone();
        let budget = self.rng.range(100, 400);
        let mut builder = Builder { out, rng: &mut self.rng, model: &mut model, laws: &mut self.laws };
        block::abandoned_content(&mut builder, budget)?;
        out.abandon()
    }
}
