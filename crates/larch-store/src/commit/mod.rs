//! Turning a tree into pack records: the encoder and its tables ([`writer`]: records, patches
//! against a node's previous version, inline contents) and the parallel hash of a tree about to be
//! committed ([`hashing`]), and the keys of a tree committed again ([`existing`]). Appends bytes;
//! never publishes them.
//!
//! May import: [`crate::pack`], [`crate::io`], [`crate::format`], [`crate::options`] and
//! [`crate::error`].

pub(crate) mod existing;
pub mod hashing;
pub mod writer;
