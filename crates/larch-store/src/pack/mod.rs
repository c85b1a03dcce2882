//! The pack: one offset space laid over chunk files and GC segment files ([`layout`],
//! [`segment`]; chunk files opened lazily behind a bounded set of descriptors, [`handles`]), read through [`reader::PackReader`] with its byte-bounded cache of decoded nodes,
//! the prefetcher that reads ahead of a checkout ([`reader::prefetch`]), and the graveyard that drops
//! evicted nodes on a helper thread ([`graveyard`]); also the reading ahead of the GC's sweep from
//! its end down ([`read_ahead`]).
//!
//! May import: [`crate::io`], [`crate::format`], [`crate::options`] and [`crate::error`].

pub mod graveyard;
pub mod handles;
pub mod layout;
pub mod read_ahead;
pub mod reader;
pub mod segment;
