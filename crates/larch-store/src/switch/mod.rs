//! The commit switch (`docs/store.md`): the only code that writes the control file. Reading it,
//! writing a slot and its confirmation, loading and repairing the commit index
//! ([`control_file`]), and the thread that publishes switches under the pipelined sync policy
//! ([`publisher`]). When to publish is the writer's decision ([`crate::Repo`]).
//!
//! May import: [`crate::commit`], [`crate::pack`], [`crate::io`], [`crate::format`],
//! [`crate::options`] and [`crate::error`].

pub mod control_file;
pub mod publisher;
