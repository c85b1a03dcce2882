//! The bytes on disk, as `docs/format.md` specifies them: pack records and their patches, the
//! control file's slots, the commit index's entries, and the names and headers of chunk and
//! segment files. Pure functions over byte slices: no files, no threads.
//!
//! May import: [`crate::error`] and `larch-core` only.

pub mod codec;
pub mod control;
pub mod index;
pub mod names;
pub mod patch;
pub mod published;
