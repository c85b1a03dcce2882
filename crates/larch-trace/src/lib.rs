//! larch-trace: trace formats (larch's own and Irmin's `IrmRepBT`), the recorder, the Tezos-like
//! generator, the replayer with hash checks, per-block statistics and summaries.

pub mod backend;
pub mod format;
pub mod r#gen;
pub mod info;
pub mod op;
pub mod record;
pub mod replay;
pub mod stats;
mod store_backend;

pub use backend::{BackendStats, ContextRepo};
pub use format::{OpSink, OpSource, TraceError, TraceFormat, convert, convert_file, open_trace};
pub use r#gen::{GenError, GenParams, GenReport, Generator};
pub use info::{TraceInfo, trace_info};
pub use op::{ContextId, Op, OpKind, Path, Scoped};
pub use record::{RecordError, RecordedTree, Recorder};
pub use replay::{ReplayError, ReplayOptions, Replayer, RunMeta, replay};
pub use stats::{Comparison, RunSummary, compare};
