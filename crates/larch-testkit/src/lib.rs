//! Test support for larch: seeded random generators that print their seed, and the reference model.

pub mod model;
pub mod seed;

pub use model::Model;
pub use seed::{TestRng, seeded_rng};
