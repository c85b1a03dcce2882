//! larch-irmin: reads stores written by Irmin 3.x's irmin-pack with the Tezos schema (the context
//! directory of an Octez node) and turns their commits into larch trees, verifying every hash.
//!
//! A store is only read, never written; [`write_one_commit`] writes a new one-commit store (the
//! context directory of an Octez snapshot) from a larch tree (`docs/octez.md`). Supported: `store.control` versions 3 to 5, chunked
//! suffix files, the prefix and mapping left by Irmin's GC, the lower layer's volumes,
//! `store.dict`, and the commit index (`index/`, mirage/index). The byte formats are described in
//! `docs/irmin-import.md`. Every read is bounded by the file it reads and checked: a corrupted
//! store gives an [`IrminError`] naming the file and offset, never a panic.
//!
//! ```no_run
//! use larch_irmin::IrminStore;
//! let store = IrminStore::open("context")?;
//! let head = store.head()?;
//! let tree = store.checkout(&head);
//! assert_eq!(tree.hash(), head.tree_hash);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod bytes;
pub mod control;
mod dict;
pub mod entry;
pub mod error;
pub mod export;
pub mod import;
pub mod index;
mod layout;
mod source;
mod store;
pub mod stream;

pub use control::{Control, Status};
pub use error::{IrminError, Result};
pub use export::{ExportCommit, ExportParent, ExportStats, write_one_commit, write_one_commit_with_progress};
pub use import::{BuildStats, MAX_NESTING, build_tree};
pub use index::IndexEntry;
pub use source::IrminSource;
pub use store::{IrminCommit, IrminStore, ReadStats};
pub use stream::{SinkError, SinkTarget, StreamStats, TreeSink, stream_tree};
