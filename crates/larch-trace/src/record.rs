//! The recorder: wraps a [`ContextRepo`] so that what an application does through the context API
//! is executed on real trees and recorded, with its real results and commit hashes, into an
//! [`OpSink`] (a trace writer of either format, or a `Vec<Op>`).
//!
//! Contexts are [`RecordedTree`] handles. Each handle names one context id; a modification changes
//! the handle in place to a new context (id allocated by the recorder), exactly as a Tezos node
//! rebinds its context value. Scopes (Irmin's `Keep`/`Forget`) are recorded as follows:
//!
//! - an input context consumed by a modification or a commit is `Forget` when no other handle (clone)
//!   still names it, since it can never be referred to again; otherwise `Keep`;
//! - every other occurrence, where the recorder cannot know the future (a read's input, a produced
//!   context, any commit hash, checked out or produced or parent), is `Keep`.
//!
//! A replayer is therefore correct on a recorded trace; it merely keeps some contexts and commit
//! hashes longer than strictly necessary.
//!
//! ```
//! use larch_core::MemoryRepo;
//! use larch_trace::record::Recorder;
//!
//! let mut recorder = Recorder::new(MemoryRepo::new(), Vec::new());
//! let mut tree = recorder.genesis();
//! tree.add(&["data", "version"], b"genesis")?;
//! let hash = recorder.commit(tree, &[], 1530374852, "Genesis")?;
//! let (_repo, ops) = recorder.finish()?;
//! assert_eq!(ops.len(), 2);
//! # let _ = hash;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::format::{OpSink, TraceError};
use crate::op::{ContextId, Op, Path, Scoped};
use larch_core::ContextRepo;
use larch_core::{CommitInfo, Hash, Tree, TreeError};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// Why a recorded operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The repository failed (checkout of an unknown commit, commit of a contents root, …).
    #[error("repository operation failed")]
    Repo(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The tree operation failed.
    #[error("tree operation failed")]
    Tree(#[from] TreeError),
    /// Writing the trace failed.
    #[error("writing the trace failed")]
    Trace(#[from] TraceError),
    /// [`Recorder::finish`] was called while tree handles are still alive.
    #[error("{0} recorded tree handle(s) still alive")]
    HandlesAlive(usize),
}

/// What the recorder and its tree handles share.
struct Shared<W> {
    sink: W,
    next_id: ContextId,
    /// Live handles per context id.
    handles: HashMap<ContextId, usize>,
}

impl<W: OpSink> Shared<W> {
    fn acquire(&mut self, id: ContextId) {
        *self.handles.entry(id).or_insert(0) += 1;
    }

    fn release(&mut self, id: ContextId) {
        if let Some(count) = self.handles.get_mut(&id) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.handles.remove(&id);
            }
        }
    }

    /// Scope of `id` consumed by its handle: `Forget` if that handle is the only one.
    fn consumed(&self, id: ContextId) -> Scoped<ContextId> {
        if self.handles.get(&id).copied().unwrap_or(0) <= 1 { Scoped::Forget(id) } else { Scoped::Keep(id) }
    }

    fn fresh(&mut self) -> ContextId {
        let id = self.next_id;
        self.next_id += 1;
        id
    }
}

/// Records the context operations of an application. See the module documentation.
pub struct Recorder<R: ContextRepo, W: OpSink> {
    repo: R,
    shared: Rc<RefCell<Shared<W>>>,
}

/// A context being recorded: a real tree and the context id it has in the trace. Cloning gives a
/// second handle to the same context. After an error the handle may hold a change the trace lacks:
/// discard it.
pub struct RecordedTree<W: OpSink> {
    tree: Tree,
    id: ContextId,
    shared: Rc<RefCell<Shared<W>>>,
}

fn to_path<P: AsRef<[u8]>>(path: &[P]) -> Path {
    Path::from_steps(path)
}

impl<R: ContextRepo, W: OpSink> Recorder<R, W> {
    /// A recorder over `repo`, writing to `sink`. Context id 0 is the genesis (empty) context.
    pub fn new(repo: R, sink: W) -> Recorder<R, W> {
        let shared = Shared { sink, next_id: 1, handles: HashMap::new() };
        Recorder { repo, shared: Rc::new(RefCell::new(shared)) }
    }

    /// The repository.
    pub fn repo(&self) -> &R {
        &self.repo
    }

    /// A handle to the genesis context (id 0, the empty tree); records nothing.
    pub fn genesis(&mut self) -> RecordedTree<W> {
        self.shared.borrow_mut().acquire(0);
        RecordedTree { tree: self.repo.empty_tree(), id: 0, shared: self.shared.clone() }
    }

    /// Checks out `commit` and records a `Checkout` to a new context.
    pub fn checkout(&mut self, commit: &Hash) -> Result<RecordedTree<W>, RecordError> {
        let tree = self.repo.checkout(commit).map_err(|err| RecordError::Repo(Box::new(err)))?;
        let mut shared = self.shared.borrow_mut();
        let id = shared.fresh();
        shared.sink.write_op(&Op::Checkout { commit: Scoped::Keep(*commit), out: Scoped::Keep(id) })?;
        shared.acquire(id);
        drop(shared);
        Ok(RecordedTree { tree, id, shared: self.shared.clone() })
    }

    /// Commits `tree` with `parents`, `date` (Unix seconds) and `message` (author `Tezos`), and
    /// records the `Commit` with the hash produced, which it returns. Consumes the handle.
    pub fn commit(
        &mut self,
        tree: RecordedTree<W>,
        parents: &[Hash],
        date: i64,
        message: &str,
    ) -> Result<Hash, RecordError> {
        let hash = self
            .repo
            .commit(&tree.tree, parents, CommitInfo::tezos(date, message))
            .map_err(|err| RecordError::Repo(Box::new(err)))?;
        let mut shared = self.shared.borrow_mut();
        let input = shared.consumed(tree.id);
        shared.sink.write_op(&Op::Commit {
            hash: Scoped::Keep(hash),
            date,
            message: message.to_owned(),
            parents: parents.iter().map(|parent| Scoped::Keep(*parent)).collect(),
            input,
        })?;
        drop(shared);
        drop(tree);
        Ok(hash)
    }

    /// Finishes the sink and returns the repository and the sink. Every tree handle must have been
    /// dropped (or committed) first.
    pub fn finish(self) -> Result<(R, W), RecordError> {
        let shared =
            Rc::try_unwrap(self.shared).map_err(|rc| RecordError::HandlesAlive(Rc::strong_count(&rc) - 1))?;
        let mut shared = shared.into_inner();
        shared.sink.finish()?;
        Ok((self.repo, shared.sink))
    }
}

impl<W: OpSink> Clone for RecordedTree<W> {
    fn clone(&self) -> RecordedTree<W> {
        self.shared.borrow_mut().acquire(self.id);
        RecordedTree { tree: self.tree.clone(), id: self.id, shared: self.shared.clone() }
    }
}

impl<W: OpSink> Drop for RecordedTree<W> {
    fn drop(&mut self) {
        if let Ok(mut shared) = self.shared.try_borrow_mut() {
            shared.release(self.id);
        }
    }
}

impl<W: OpSink> RecordedTree<W> {
    /// The context id of this handle in the trace.
    pub fn id(&self) -> ContextId {
        self.id
    }

    /// The real tree.
    pub fn tree(&self) -> &Tree {
        &self.tree
    }

    /// Records a modification: `make` builds the op from (input, output); this handle moves to the
    /// new context.
    fn modified(
        &mut self,
        make: impl FnOnce(Scoped<ContextId>, Scoped<ContextId>) -> Op,
    ) -> Result<(), RecordError> {
        let mut shared = self.shared.borrow_mut();
        let input = shared.consumed(self.id);
        let out = shared.fresh();
        shared.sink.write_op(&make(input, Scoped::Keep(out)))?;
        shared.release(self.id);
        shared.acquire(out);
        self.id = out;
        Ok(())
    }

    /// Sets the contents at `path`; records `Add`.
    pub fn add<P: AsRef<[u8]>>(&mut self, path: &[P], value: &[u8]) -> Result<(), RecordError> {
        self.tree.add(path, value.to_vec())?;
        self.modified(|input, out| Op::Add { path: to_path(path), value: value.to_vec(), input, out })
    }

    /// Removes the contents or sub-tree at `path`; records `Remove`.
    pub fn remove<P: AsRef<[u8]>>(&mut self, path: &[P]) -> Result<(), RecordError> {
        self.tree.remove(path)?;
        self.modified(|input, out| Op::Remove { path: to_path(path), input, out })
    }

    /// Grafts the sub-tree at `from` onto `to` and records `Copy`. When `from` does not exist,
    /// returns `false` and records nothing (as Tezos' `copy` returns no new context).
    pub fn copy<P: AsRef<[u8]>, Q: AsRef<[u8]>>(
        &mut self,
        from: &[P],
        to: &[Q],
    ) -> Result<bool, RecordError> {
        if !self.tree.copy(from, to)? {
            return Ok(false);
        }
        self.modified(|input, out| Op::Copy { from: to_path(from), to: to_path(to), input, out })?;
        Ok(true)
    }

    fn read(&self, make: impl FnOnce(Scoped<ContextId>) -> Op) -> Result<(), RecordError> {
        self.shared.borrow_mut().sink.write_op(&make(Scoped::Keep(self.id)))?;
        Ok(())
    }

    /// The contents at `path`; records `Find` with whether it was found.
    pub fn find<P: AsRef<[u8]>>(&self, path: &[P]) -> Result<Option<Vec<u8>>, RecordError> {
        let value = self.tree.find(path)?.map(|contents| contents.as_bytes().to_vec());
        self.read(|input| Op::Find { path: to_path(path), found: value.is_some(), input })?;
        Ok(value)
    }

    /// Whether `path` holds contents; records `Mem`.
    pub fn mem<P: AsRef<[u8]>>(&self, path: &[P]) -> Result<bool, RecordError> {
        let found = self.tree.mem(path)?;
        self.read(|input| Op::Mem { path: to_path(path), found, input })?;
        Ok(found)
    }

    /// Whether `path` holds contents or a directory; records `MemTree`.
    pub fn mem_tree<P: AsRef<[u8]>>(&self, path: &[P]) -> Result<bool, RecordError> {
        let found = self.tree.mem_tree(path)?;
        self.read(|input| Op::MemTree { path: to_path(path), found, input })?;
        Ok(found)
    }
}
