//! Garbage collection's engine (`docs/gc-design.md`): the mark phase over the pack ([`mark`],
//! [`children`], [`roots`]) and its live set ([`live`]), the compaction policy choosing which segments to rewrite
//! ([`policy`]), the worker thread copying live records into a new segment ([`worker`]), the
//! state of a run and what it leaves behind ([`run`]), and archive mode's moves of sealed chunks to
//! a lower directory ([`archive`]). The writer drives it and publishes its result
//! ([`crate::Repo::gc`]).
//!
//! May import: [`crate::switch`], [`crate::commit`], [`crate::pack`], [`crate::io`],
//! [`crate::format`], [`crate::options`] and [`crate::error`].

pub mod archive;
pub mod children;
pub mod late_roots;
pub mod live;
pub mod mark;
pub mod policy;
pub mod report;
pub mod roots;
pub mod run;
pub mod worker;
