//! larch-store: the persistent store of larch. An append-only pack of objects that point at their
//! children by offset and carry their hashes (a rewritten directory or inode is usually stored as a
//! patch of its previous version), a commit index, and a control file that atomically publishes
//! each commit; lazy reads through a byte-bounded cache of decoded nodes; one writer and many
//! readers; an integrity checker. The format is specified in `docs/format.md`, the commit protocol
//! in `docs/store.md`.
//!
//! ```
//! use larch_core::CommitInfo;
//! use larch_store::Repo;
//!
//! let dir = tempfile::tempdir()?;
//! let mut repo = Repo::open(dir.path())?;
//! let mut tree = repo.empty_tree();
//! tree.add(&["data", "version"], b"genesis".to_vec())?;
//! let commit = repo.commit(&tree, &[], CommitInfo::tezos(1530374852, "Genesis"))?;
//! repo.close()?;
//! let reader = Repo::open_read_only(dir.path())?;
//! let tree = reader.checkout(&commit)?;
//! assert_eq!(tree.find(&["data", "version"])?.unwrap().as_bytes(), b"genesis");
//! assert!(reader.fsck().is_clean());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod codec;
pub mod control;
pub mod error;
#[cfg(feature = "fault-injection")]
pub mod fault;
pub mod fsck;
pub mod index;
mod open;
mod options;
mod pack;
pub mod patch;
mod recover;
mod repo;
pub mod storage;
mod switch;
mod writer;

pub use error::{FileKind, Result, StoreError};
pub use fsck::{FsckReport, FsckStats, KindStats, Problem, fsck};
pub use options::{CommitDetails, RepoOptions, StoreStats, SyncPolicy, SyncPolicyParseError};
pub use pack::{DEFAULT_CACHE_BYTES, PackSource};
pub use recover::{FoundCommit, RecoveryPlan, plan_recovery, plan_recovery_files};
pub use repo::{DEFAULT_BRANCH, Repo};
pub use storage::{FileStorage, MemStorage, Storage, StoreFiles};
pub use writer::WriteCounts;
