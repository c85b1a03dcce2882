//! Test support for larch: seeded random generators that print their seed, random tree
//! operations, and the reference model.

pub mod fuzz;
pub mod model;
pub mod ops;
pub mod seed;

pub use model::Model;
pub use ops::{Op, OpGen};
pub use seed::{TestRng, seeded_rng};

/// The `rand` crate the generators use, re-exported so tests name the same trait versions.
pub use rand;
