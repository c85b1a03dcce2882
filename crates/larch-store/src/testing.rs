//! Test support behind the `fault-injection` feature, never in production builds: the storage
//! seam and its in-memory and fault-injecting backends, the pack layout and segment files, and the
//! decoders the fuzz tests drive. Not part of the stable API.

pub use crate::format::{codec, control, index, names, patch};
pub use crate::gc::mark::{GcMark, MarkBounds};
pub use crate::io::{fault, layered, storage};
pub use crate::options::{RECENT_IN_MEMORY, RECENT_INODES_IN_MEMORY};
pub use crate::pack::{layout, segment};
pub use crate::recovery::plan::plan_recovery_files;
