//! Recovery of a store that does not open (`larch recover`): what survives in its files, which
//! commits the pack still holds, and the plan of a control file that names them ([`plan`]), with
//! the rebuild of a lost layout from chunk and segment headers ([`rebuild`]).
//!
//! May import: every folder below it ([`crate::gc`], [`crate::switch`], [`crate::commit`],
//! [`crate::pack`], [`crate::io`], [`crate::format`]) and [`crate::options`], [`crate::error`].

pub mod plan;
pub mod rebuild;
