//! The operations a trace records: the context API of a Tezos node, with every read result and
//! commit hash, and Irmin's context-id scoping (`Keep`: used again later; `Forget`: last use).
//! Both trace formats (larch's own and Irmin's `IrmRepBT`) carry exactly this model, so
//! conversion between them is lossless.

use larch_core::Hash;

pub use crate::path::{MAX_PATH_BYTES, MAX_PATH_STEPS, Path, StepIter, StepSlices};

/// Identifies a context (an immutable tree value) within one trace.
pub type ContextId = u64;

/// A value tagged with whether the trace refers to it again (Irmin's `scope`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scoped<T> {
    /// Referred to again later in the trace.
    Keep(T),
    /// This is its last occurrence: a replayer may drop it.
    Forget(T),
}

impl<T: Copy> Scoped<T> {
    /// The value.
    pub fn value(&self) -> T {
        match self {
            Scoped::Keep(value) | Scoped::Forget(value) => *value,
        }
    }

    /// Whether this is the last occurrence.
    pub fn is_forget(&self) -> bool {
        matches!(self, Scoped::Forget(_))
    }
}

/// One operation of a trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Open a recorded commit and bind its tree to `out`.
    Checkout {
        /// The commit, as recorded by the application that made the trace.
        commit: Scoped<Hash>,
        /// The context it becomes.
        out: Scoped<ContextId>,
    },
    /// Set the contents at `path` in `input`, giving `out`.
    Add {
        /// Where.
        path: Path,
        /// The new contents.
        value: Vec<u8>,
        /// Context read.
        input: Scoped<ContextId>,
        /// Context produced.
        out: Scoped<ContextId>,
    },
    /// Remove the contents or sub-tree at `path`.
    Remove {
        /// Where.
        path: Path,
        /// Context read.
        input: Scoped<ContextId>,
        /// Context produced.
        out: Scoped<ContextId>,
    },
    /// Graft the sub-tree at `from` onto `to` (Tezos `Context.copy`).
    Copy {
        /// Source path (must exist).
        from: Path,
        /// Destination path.
        to: Path,
        /// Context read.
        input: Scoped<ContextId>,
        /// Context produced.
        out: Scoped<ContextId>,
    },
    /// Read the contents at `path`; `found` is the recorded result.
    Find {
        /// Where.
        path: Path,
        /// Whether contents were found when recorded.
        found: bool,
        /// Context read.
        input: Scoped<ContextId>,
    },
    /// Whether `path` holds contents; `found` is the recorded result.
    Mem {
        /// Where.
        path: Path,
        /// The recorded result.
        found: bool,
        /// Context read.
        input: Scoped<ContextId>,
    },
    /// Whether `path` holds contents or a directory; `found` is the recorded result.
    MemTree {
        /// Where.
        path: Path,
        /// The recorded result.
        found: bool,
        /// Context read.
        input: Scoped<ContextId>,
    },
    /// Commit the tree of `input`; ends a block.
    Commit {
        /// The commit hash the recording produced.
        hash: Scoped<Hash>,
        /// Unix seconds.
        date: i64,
        /// Commit message (the author is always `Tezos`).
        message: String,
        /// Parent commits as recorded.
        parents: Vec<Scoped<Hash>>,
        /// The context committed.
        input: Scoped<ContextId>,
    },
}

/// The kinds of [`Op`], for counting and statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    /// [`Op::Checkout`].
    Checkout,
    /// [`Op::Add`].
    Add,
    /// [`Op::Remove`].
    Remove,
    /// [`Op::Copy`].
    Copy,
    /// [`Op::Find`].
    Find,
    /// [`Op::Mem`].
    Mem,
    /// [`Op::MemTree`].
    MemTree,
    /// [`Op::Commit`].
    Commit,
}

impl OpKind {
    /// Every kind, in a fixed order.
    pub const ALL: [OpKind; 8] = [
        OpKind::Checkout,
        OpKind::Add,
        OpKind::Remove,
        OpKind::Copy,
        OpKind::Find,
        OpKind::Mem,
        OpKind::MemTree,
        OpKind::Commit,
    ];

    /// Lower-case name as printed in reports (`mem_tree` with an underscore).
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Checkout => "checkout",
            OpKind::Add => "add",
            OpKind::Remove => "remove",
            OpKind::Copy => "copy",
            OpKind::Find => "find",
            OpKind::Mem => "mem",
            OpKind::MemTree => "mem_tree",
            OpKind::Commit => "commit",
        }
    }
}

impl Op {
    /// The kind of this operation.
    pub fn kind(&self) -> OpKind {
        match self {
            Op::Checkout { .. } => OpKind::Checkout,
            Op::Add { .. } => OpKind::Add,
            Op::Remove { .. } => OpKind::Remove,
            Op::Copy { .. } => OpKind::Copy,
            Op::Find { .. } => OpKind::Find,
            Op::Mem { .. } => OpKind::Mem,
            Op::MemTree { .. } => OpKind::MemTree,
            Op::Commit { .. } => OpKind::Commit,
        }
    }

    /// Why a trace writer refuses this operation's paths: one above [`MAX_PATH_BYTES`] or
    /// [`MAX_PATH_STEPS`] (no reader would take it back).
    pub fn path_too_large(&self) -> Option<&'static str> {
        self.paths().find_map(|path| {
            if path.byte_len() > MAX_PATH_BYTES {
                Some("a path holds more than 1 MiB")
            } else if path.len() > MAX_PATH_STEPS {
                Some("a path has more than 131,072 steps")
            } else {
                None
            }
        })
    }

    /// The paths this operation names: none (checkout, commit), one, or two (copy: from, to).
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        let (first, second) = match self {
            Op::Checkout { .. } | Op::Commit { .. } => (None, None),
            Op::Copy { from, to, .. } => (Some(from), Some(to)),
            Op::Add { path, .. }
            | Op::Remove { path, .. }
            | Op::Find { path, .. }
            | Op::Mem { path, .. }
            | Op::MemTree { path, .. } => (Some(path), None),
        };
        first.into_iter().chain(second)
    }
}
