//! The storage seam: every byte larch reads or writes goes through [`storage::Storage`] (one file)
//! and [`storage::Directory`] (a directory of them), with on-disk and in-memory backends, the
//! layered directory of archive mode (an upper directory over a lower one), directories on disk
//! (created durably; the identities of a store and of its lower directory), and, behind the
//! `fault-injection` feature, a backend that injects faults and models power loss for tests.
//!
//! May import: [`crate::format`] and [`crate::error`].

pub mod classify;
pub mod dirs;
pub mod disk;
#[cfg(feature = "fault-injection")]
pub mod fault;
pub mod layered;
pub mod map_budget;
pub mod priority;
pub mod staging;
pub mod storage;
pub mod usage;
