//! larch-trace: trace formats (larch's own and Irmin's `IrmRepBT`), the recorder, the Tezos-like
//! generator, the replayer with hash checks, per-block statistics and summaries.

pub mod backend;
pub mod op;

pub use backend::ContextRepo;
pub use op::{ContextId, Op, OpKind, Path, Scoped};
