//! Why a replay stops: every error names where in the trace it happened.

use larch_core::{Hash, TreeError};
use larch_trace::op::{ContextId, OpKind, Path};
use std::fmt;

/// Where in the trace an operation stands, and what it is, for error messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpLocation {
    /// Block number, counting from 0 (the genesis commit ends block 0).
    pub block: u64,
    /// Index of the operation in the whole trace, counting from 0.
    pub op_index: u64,
    /// The operation's kind.
    pub kind: OpKind,
    /// A short description: the kind's name and its path(s), e.g. `find data/version`.
    pub description: String,
}

impl fmt::Display for OpLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "block {}, op {} ({})", self.block, self.op_index, self.description)
    }
}

/// Formats a path as `a/b/c`; steps that are not printable UTF-8 are written as `0x` and hex.
pub fn display_path(path: &Path) -> String {
    if path.is_empty() {
        return "/".to_string();
    }
    let mut out = String::new();
    for (i, step) in path.iter().enumerate() {
        if i > 0 {
            out.push('/');
        }
        match std::str::from_utf8(step) {
            Ok(text) if !text.is_empty() && !text.chars().any(|c| c.is_control() || c == '/') => {
                out.push_str(text)
            }
            _ => {
                out.push_str("0x");
                for byte in step.iter() {
                    out.push_str(&format!("{byte:02x}"));
                }
            }
        }
    }
    out
}

/// What a read operation's boolean means, for messages.
fn read_outcome(kind: OpKind, value: bool) -> &'static str {
    match (kind, value) {
        (OpKind::Find, true) => "found",
        (OpKind::Find, false) => "not found",
        (OpKind::Mem, true) => "contents present",
        (OpKind::Mem, false) => "no contents",
        (OpKind::MemTree, true) => "exists",
        (OpKind::MemTree, false) => "does not exist",
        (_, true) => "true",
        (_, false) => "false",
    }
}

/// Why a replay failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// A `Find`, `Mem` or `MemTree` gave another result than the recorded one.
    #[error("{at}: trace says {}, replay says {}", read_outcome(at.kind, *expected), read_outcome(at.kind, *actual))]
    ReadMismatch {
        /// The operation.
        at: Box<OpLocation>,
        /// The recorded result.
        expected: bool,
        /// The replayed result.
        actual: bool,
    },
    /// A commit produced another hash than the recorded one.
    #[error("{at}: trace says commit {expected}, replay says {actual}")]
    HashMismatch {
        /// The commit operation.
        at: Box<OpLocation>,
        /// The recorded hash.
        expected: Hash,
        /// The hash the replay computed.
        actual: Hash,
    },
    /// An operation reads a context id that was never produced or was already forgotten.
    #[error("{at}: context {id} is not defined (never produced, or already forgotten)")]
    UndefinedContext {
        /// The operation.
        at: Box<OpLocation>,
        /// The context id.
        id: ContextId,
    },
    /// A checkout or a commit parent names a recorded commit this replay did not produce (or that
    /// was already forgotten): a trace replays only from its beginning.
    #[error(
        "{at}: commit {hash} of the trace is unknown to this replay (not replayed, or already forgotten)"
    )]
    UnknownCommit {
        /// The operation.
        at: Box<OpLocation>,
        /// The recorded hash.
        hash: Hash,
    },
    /// With [`crate::replay::ReplayOptions::store_commits`]: a commit the trace has not made
    /// that the repository cannot check out either.
    #[error(
        "{at}: commit {hash} is not one this trace made, and the store cannot check it out (a trace that goes on from a store's commits needs the store it was recorded after: the same rung, seed and setup parts): {source}"
    )]
    NotInStore {
        /// The operation.
        at: Box<OpLocation>,
        /// The recorded hash.
        hash: Hash,
        /// The store's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// A `Copy` whose source does not exist.
    #[error("{at}: copy source does not exist")]
    CopySourceMissing {
        /// The operation.
        at: Box<OpLocation>,
    },
    /// A tree operation failed (e.g. a lazy node could not be loaded).
    #[error("{at}: tree error: {source}")]
    Tree {
        /// The operation.
        at: Box<OpLocation>,
        /// The tree's error.
        source: Box<TreeError>,
    },
    /// The store failed to check out or commit.
    #[error("{at}: store error: {source}")]
    Store {
        /// The operation.
        at: Box<OpLocation>,
        /// The store's error.
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// The trace reader failed.
    #[error("reading op {op_index} of the trace: {source}")]
    Trace {
        /// Index of the operation that could not be read.
        op_index: u64,
        /// The reader's error.
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// Starting or finishing a garbage collection of the replay's schedule failed.
    #[error("garbage collection after block {block}: {source}")]
    Gc {
        /// Blocks completed when it failed.
        block: u64,
        /// The store's error.
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// Waiting for the last commits to become durable (a pipelined store's publish) failed.
    #[error("making the commits up to block {block} durable: {source}")]
    Durability {
        /// Blocks completed when it failed.
        block: u64,
        /// The store's error.
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// Writing the stat file failed.
    #[error("writing the stat file: {0}")]
    StatsOutput(#[source] std::io::Error),
    /// Writing the trace of a streamed replay's regular blocks failed
    /// ([`crate::replay::replay_generated`]'s `record`).
    #[error("writing the recorded trace: {0}")]
    Record(#[source] larch_trace::TraceError),
    /// The generator of a streamed replay failed ([`crate::replay::replay_generated`]).
    #[error("generating the trace: {0}")]
    Generator(#[source] Box<crate::GenError>),
}

impl ReplayError {
    /// The operation the error is about, if it is about one.
    pub fn location(&self) -> Option<&OpLocation> {
        match self {
            ReplayError::ReadMismatch { at, .. }
            | ReplayError::HashMismatch { at, .. }
            | ReplayError::UndefinedContext { at, .. }
            | ReplayError::UnknownCommit { at, .. }
            | ReplayError::NotInStore { at, .. }
            | ReplayError::CopySourceMissing { at }
            | ReplayError::Tree { at, .. }
            | ReplayError::Store { at, .. } => Some(&**at),
            ReplayError::Trace { .. }
            | ReplayError::Gc { .. }
            | ReplayError::Durability { .. }
            | ReplayError::StatsOutput(_)
            | ReplayError::Record(_)
            | ReplayError::Generator(_) => None,
        }
    }
}
