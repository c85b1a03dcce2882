//! larch-core: Tezos context hashing (BLAKE2b-256, flat directories, 32-way inode tries, commits)
//! and the persistent in-memory context tree, with lazy nodes loaded through an [`ObjectSource`];
//! the in-memory repository [`MemoryRepo`] and the [`ContextRepo`] seam (checkout, commit, counters)
//! that every store implements and every driver (recorder, replayer, importers) uses. No files, no
//! threads, no printing: the crates above it do those (it only gives them [`mark_helper_thread`],
//! for the threads they start).
//!
//! ```
//! use larch_core::{CommitInfo, MemoryRepo};
//!
//! let mut repo = MemoryRepo::new();
//! let mut tree = repo.empty_tree();
//! tree.add(&["data", "version"], b"genesis".to_vec())?;
//! tree.add(&["protocol"], hex::decode("38ecdef0cd08640f318a9b055f6b0d0c9ae030913a871d9b9d86fb846317da21")?)?;
//! tree.add(&["test_chain"], vec![0u8])?;
//! let commit = repo.commit(&tree, &[], CommitInfo::tezos(1530374852, "Genesis"))?;
//! assert_eq!(commit.to_string(), "CoV8SQumiVU9saiu3FVNeDNewJaJH8yWdsGF3WLdsRr2P9S7MzCj");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod context_repo;
pub mod hash;
pub mod helper_thread;
pub mod ocaml_hash;
pub mod proof;
pub mod repo;
pub mod schema;
pub mod stack;
pub mod tree;

pub use context_repo::{BackendStats, ContextRepo, GcSummary};
pub use hash::{Hash, HashParseError};
pub use helper_thread::{is_helper_thread, lower_thread_priority, mark_helper_thread};
pub use repo::{CommitRecord, MemoryRepo, RepoError};
pub use schema::{CommitInfo, Kind};
pub use tree::fold::{Depth, Order, Walker};
pub use tree::node::{
    Contents, ContentsRef, Entry, HeldKeys, InlineValue, InodeTree, Name, Node, NodeBody, NodeRef, ObjectKey,
    SharedBytes, StoreId,
};
pub use tree::source::{LoadError, MemorySource, NoSource, ObjectSource};
pub use tree::{Released, Tree, TreeError, UndoPoint, hint_child_caches, hint_memory};
