//! larch-trace: traces of context operations. The op model ([`Op`], contexts, scopes), the two trace
//! formats (larch's own, `docs/trace-format.md`, and Irmin's replayable `IrmRepBT`), conversion
//! between them, the [`Recorder`] that records what a client does to a [`larch_core::ContextRepo`],
//! and `trace info` (operations per kind, blocks, value sizes, largest directories).
//!
//! It depends on `larch-core` alone: a tool that only reads or writes traces does not build the
//! storage engine. The generator, the replayer and the statistics live in `larch-bench`.

pub mod format;
pub mod info;
pub mod op;
mod path;
pub mod record;

pub use format::{OpSink, OpSource, TraceError, TraceFormat, convert, convert_file, open_trace};
pub use info::{TraceInfo, trace_info};
pub use op::{ContextId, Op, OpKind, Path, Scoped};
pub use record::{RecordError, RecordedTree, Recorder};
