//! The emitter: runs each operation on the current context tree (so that every read result and
//! commit hash in the trace is the real one), assigns context ids, scopes them, counts, and passes
//! the operations to the sink.
//!
//! Scoping. Contexts form one chain per block: every write consumes its input (`Forget`) and
//! produces the next context (`Keep`); reads use the current context (`Keep`). The last operation of
//! an abandoned context is not known until the context is dropped, so the emitter holds back one
//! operation and rewrites its scopes to `Forget` when the context is abandoned.

use super::GenError;
use super::dist::{SIZE_BUCKETS, size_bucket};
use larch_core::{Hash, Tree};
use larch_trace::op::{ContextId, Op, OpKind, Path, Scoped};

/// Counters over everything emitted.
#[derive(Clone, Debug, Default)]
pub(crate) struct Counts {
    /// Operations per kind, in the order of [`OpKind::ALL`].
    pub(crate) ops: [u64; 8],
    /// Added values per size bucket of [`SIZE_BUCKETS`].
    pub(crate) sizes: [u64; SIZE_BUCKETS.len()],
    /// `find` and `mem` that found nothing.
    pub(crate) misses: u64,
    /// Largest number of operations in one block's committed context.
    pub(crate) max_block_ops: u64,
}

pub(crate) fn kind_index(kind: OpKind) -> usize {
    OpKind::ALL.iter().position(|k| *k == kind).unwrap_or(0)
}

/// The sink the emitter writes to.
pub(crate) type Sink<'a> = &'a mut dyn FnMut(Op) -> Result<(), GenError>;

/// Gives the tree of a commit the sink has just made, when the sink has one that is cheaper to
/// hold than the generator's own (a store's, loaded lazily): `None` keeps the generator's.
pub(crate) type Reload<'a> = &'a mut dyn FnMut(&Hash, BlockKind) -> Result<Option<Tree>, GenError>;

/// Gives the sink's own tree of a context (a streamed replay's), as the operations passed to the
/// sink so far left it: a clone sharing its nodes, dropped before the next operation. `None` when
/// the sink holds none.
pub(crate) type SinkTree<'a> = &'a mut dyn FnMut(ContextId) -> Result<Option<Tree>, GenError>;

/// What a commit of the generator is (told to a streamed run's sink with the commit's hash).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockKind {
    /// Block 0.
    Genesis,
    /// A part of the setup that more parts follow.
    SetupPart,
    /// The last (or only) block of the setup: regular blocks follow.
    SetupEnd,
    /// A regular block.
    Regular,
}

/// Runs and records operations on the current context.
pub(crate) struct Emitter<'a> {
    sink: Sink<'a>,
    reload: Option<Reload<'a>>,
    sink_tree: Option<SinkTree<'a>>,
    /// Whether the current context's tree is the sink's ([`Emitter::share_sink_tree`]): writes
    /// are left to the sink, reads and hashes go through its tree, and `tree` stays empty.
    shared: bool,
    /// The tree of the current context (empty while `shared`).
    tree: Tree,
    ctx: ContextId,
    next_ctx: ContextId,
    pending: Option<Op>,
    /// Counters.
    pub(crate) counts: Counts,
    /// Operations on the current context since its checkout.
    pub(crate) context_ops: u64,
}

impl<'a> Emitter<'a> {
    /// Starts at context 0, the empty tree (the genesis context of Irmin's replay).
    pub(crate) fn new(
        sink: Sink<'a>,
        reload: Option<Reload<'a>>,
        sink_tree: Option<SinkTree<'a>>,
    ) -> Emitter<'a> {
        Emitter {
            sink,
            reload,
            sink_tree,
            shared: false,
            tree: Tree::empty(),
            ctx: 0,
            next_ctx: 1,
            pending: None,
            counts: Counts::default(),
            context_ops: 0,
        }
    }

    fn flush(&mut self) -> Result<(), GenError> {
        match self.pending.take() {
            Some(op) => (self.sink)(op),
            None => Ok(()),
        }
    }

    fn push(&mut self, op: Op) -> Result<(), GenError> {
        if let Some(slot) = self.counts.ops.get_mut(kind_index(op.kind())) {
            *slot += 1;
        }
        self.context_ops += 1;
        let previous = self.pending.replace(op);
        match previous {
            Some(op) => (self.sink)(op),
            None => Ok(()),
        }
    }

    /// The current context, read without consuming it.
    fn read_input(&self) -> Scoped<ContextId> {
        Scoped::Keep(self.ctx)
    }

    /// Consumes the current context and allocates the next: `(input, out)`.
    fn advance(&mut self) -> (Scoped<ContextId>, Scoped<ContextId>) {
        let input = Scoped::Forget(self.ctx);
        self.ctx = self.next_ctx;
        self.next_ctx += 1;
        (input, Scoped::Keep(self.ctx))
    }

    /// The sink's tree of the current context, once the operations held back are passed on.
    fn sink_context(&mut self) -> Result<Option<Tree>, GenError> {
        self.flush()?;
        let ctx = self.ctx;
        match self.sink_tree.as_mut() {
            Some(sink_tree) => sink_tree(ctx),
            None => Ok(None),
        }
    }

    /// From now until the next commit that is not a setup part's ([`Emitter::committed_tree`]
    /// of a kind other than [`BlockKind::SetupPart`]: the end of the setup, or of a regular
    /// block), holds no tree of its own when the sink gives its tree of the current context:
    /// writes are applied by the sink only, reads and commit hashes are computed on the sink's
    /// tree. A setup part's tree, or a regular block's rewritten directories (a large burst's
    /// 16,000), are then held once, by the sink, instead of twice, and loaded and hashed once.
    /// Returns whether it shares. The operations are the same either way; only abandoned
    /// contexts need the generator's own tree (their last operation is held back, not passed on
    /// before a read): they are built before the block's checkout, before sharing starts.
    pub(crate) fn share_sink_tree(&mut self) -> Result<bool, GenError> {
        if self.sink_context()?.is_none() {
            return Ok(false);
        }
        self.tree = Tree::empty();
        self.shared = true;
        Ok(true)
    }

    /// `read` on the current context's tree: the generator's own, or the sink's while shared.
    fn read<T>(
        &mut self,
        read: impl FnOnce(&Tree) -> Result<T, larch_core::TreeError>,
    ) -> Result<T, GenError> {
        if !self.shared {
            return Ok(read(&self.tree)?);
        }
        let tree = self
            .sink_context()?
            .ok_or(GenError::Internal("the sink holds no tree of the current context"))?;
        Ok(read(&tree)?)
    }

    /// The hash of the current context's tree (before its commit).
    pub(crate) fn tree_hash(&mut self) -> Result<Hash, GenError> {
        self.read(|tree| Ok(tree.hash()))
    }

    /// Entries of the directory at `path` in the current context.
    pub(crate) fn length(&mut self, path: &Path) -> Result<u64, GenError> {
        self.read(|tree| tree.length(&path.steps()))
    }

    /// `find path`; returns whether contents were found.
    pub(crate) fn find(&mut self, path: Path) -> Result<bool, GenError> {
        let found = self.read(|tree| Ok(tree.find(&path.steps())?.is_some()))?;
        if !found {
            self.counts.misses += 1;
        }
        let input = self.read_input();
        self.push(Op::Find { path, found, input })?;
        Ok(found)
    }

    /// `mem path`; returns whether contents are there.
    pub(crate) fn mem(&mut self, path: Path) -> Result<bool, GenError> {
        let found = self.read(|tree| tree.mem(&path.steps()))?;
        if !found {
            self.counts.misses += 1;
        }
        let input = self.read_input();
        self.push(Op::Mem { path, found, input })?;
        Ok(found)
    }

    /// `mem_tree path`; returns whether anything is there.
    pub(crate) fn mem_tree(&mut self, path: Path) -> Result<bool, GenError> {
        let found = self.read(|tree| tree.mem_tree(&path.steps()))?;
        let input = self.read_input();
        self.push(Op::MemTree { path, found, input })?;
        Ok(found)
    }

    /// `add path value`.
    pub(crate) fn add(&mut self, path: Path, value: Vec<u8>) -> Result<(), GenError> {
        if !self.shared {
            self.tree.add(&path.steps(), value.as_slice())?;
        }
        if let Some(slot) = self.counts.sizes.get_mut(size_bucket(value.len())) {
            *slot += 1;
        }
        let (input, out) = self.advance();
        self.push(Op::Add { path, value, input, out })
    }

    /// `remove path`.
    pub(crate) fn remove(&mut self, path: Path) -> Result<(), GenError> {
        if !self.shared {
            self.tree.remove(&path.steps())?;
        }
        let (input, out) = self.advance();
        self.push(Op::Remove { path, input, out })
    }

    /// `copy from to`, emitted only when `from` exists; returns whether it did.
    pub(crate) fn copy(&mut self, from: Path, to: Path) -> Result<bool, GenError> {
        let copied = if self.shared {
            self.read(|tree| Ok(tree.find_tree(&from.steps())?.is_some()))?
        } else {
            self.tree.copy(&from.steps(), &to.steps())?
        };
        if !copied {
            return Ok(false);
        }
        let (input, out) = self.advance();
        self.push(Op::Copy { from, to, input, out })?;
        Ok(true)
    }

    /// `checkout commit`, binding `tree` (the commit's tree) to a new context.
    pub(crate) fn checkout(&mut self, commit: Scoped<Hash>, tree: Tree) -> Result<(), GenError> {
        self.flush()?;
        if !self.shared {
            self.tree = tree;
        }
        self.ctx = self.next_ctx;
        self.next_ctx += 1;
        self.context_ops = 0;
        self.counts.ops[kind_index(OpKind::Checkout)] += 1;
        (self.sink)(Op::Checkout { commit, out: Scoped::Keep(self.ctx) })
    }

    /// Drops the current context without committing it: its last operation becomes its last use.
    pub(crate) fn abandon(&mut self) -> Result<(), GenError> {
        if self.shared {
            // Reads passed the held-back operation on already.
            return Err(GenError::Internal("an abandoned context while sharing the sink's tree"));
        }
        if let Some(op) = self.pending.as_mut() {
            match op {
                Op::Find { input, .. } | Op::Mem { input, .. } | Op::MemTree { input, .. } => {
                    *input = Scoped::Forget(input.value());
                }
                Op::Add { out, .. } | Op::Remove { out, .. } | Op::Copy { out, .. } => {
                    *out = Scoped::Forget(out.value());
                }
                Op::Checkout { out, .. } => *out = Scoped::Forget(out.value()),
                Op::Commit { .. } => {}
            }
        }
        self.flush()
    }

    /// Commits the current context (its last use). The caller computed `hash` with
    /// [`Emitter::tree_hash`]; `message` is built from the number of operations.
    pub(crate) fn commit(
        &mut self,
        hash: Scoped<Hash>,
        date: i64,
        message: String,
        parents: Vec<Scoped<Hash>>,
    ) -> Result<(), GenError> {
        self.flush()?;
        self.counts.ops[kind_index(OpKind::Commit)] += 1;
        self.counts.max_block_ops = self.counts.max_block_ops.max(self.context_ops);
        let input = Scoped::Forget(self.ctx);
        (self.sink)(Op::Commit { hash, date, message, parents, input })
    }

    /// The tree of commit `hash`, just committed from the current context: the sink's (a store's)
    /// when it gives one, else the current tree itself. The current tree is left empty. While
    /// the sink's tree is shared, a setup part's is not needed (an empty tree: the next part is
    /// read through the sink's tree again), and any other commit ends the sharing with the
    /// sink's tree of the commit.
    pub(crate) fn committed_tree(&mut self, hash: &Hash, kind: BlockKind) -> Result<Tree, GenError> {
        let own = std::mem::take(&mut self.tree);
        let given = match self.reload.as_mut() {
            Some(reload) => reload(hash, kind)?,
            None => None,
        };
        if !self.shared {
            return Ok(given.unwrap_or(own));
        }
        if kind == BlockKind::SetupPart {
            return Ok(Tree::empty());
        }
        self.shared = false;
        given.ok_or(GenError::Internal("the sink gave no tree of the commit ending a shared setup"))
    }
}
