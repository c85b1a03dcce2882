//! Seeded randomness for tests: every random test prints its seed and replays from `LARCH_SEED`.

use rand::SeedableRng;

/// The RNG every randomized test uses: deterministic from its seed.
pub type TestRng = rand_chacha::ChaCha8Rng;

/// An RNG for the test `name`: seeded from the environment variable `LARCH_SEED` when set, else
/// from `default_seed`. The seed is printed, so a failure can be replayed with
/// `LARCH_SEED=<seed> cargo test <name>`.
pub fn seeded_rng(name: &str, default_seed: u64) -> (TestRng, u64) {
    let seed = std::env::var("LARCH_SEED").ok().and_then(|text| text.parse().ok()).unwrap_or(default_seed);
    eprintln!("{name}: seed {seed} (replay with LARCH_SEED={seed})");
    (TestRng::seed_from_u64(seed), seed)
}
