//! Checks of a store's integrity: [`fsck`] (every reachable record decoded, every hash recomputed,
//! every pointer followed, a full report rather than the first error) and [`scan`] (a walk of
//! every record of the pack, counted by kind), and [`control`] (the control file's slots and
//! confirmation record).
//!
//! May import: every folder below it and [`crate::options`], [`crate::error`].

pub mod control;
pub(crate) mod frontier;
pub mod fsck;
pub mod scan;
