//! The seeded workload: `n` random 32-byte keys with random 32-byte values, inserted in batches,
//! then probes of random keys (half present, half absent) with the value each must return.

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// One read of the read phase: a key and the value it must have (`None`: absent).
#[derive(Clone, Debug)]
pub struct Probe {
    /// The key read.
    pub key: [u8; 32],
    /// The value expected, `None` for a key never inserted.
    pub expected: Option<[u8; 32]>,
}

/// Keys, values and probes, the same for every engine of a run (same seed).
#[derive(Debug)]
pub struct Workload {
    /// The keys, in insertion order.
    pub keys: Vec<[u8; 32]>,
    /// `values[i]` is the value of `keys[i]`.
    pub values: Vec<[u8; 32]>,
    /// The reads, in order.
    pub probes: Vec<Probe>,
}

impl Workload {
    /// Generates `keys` key/value pairs and `reads` probes from `seed`.
    pub fn generate(seed: u64, keys: usize, reads: usize) -> Workload {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let random32 = |rng: &mut ChaCha8Rng| {
            let mut bytes = [0u8; 32];
            rng.fill_bytes(&mut bytes);
            bytes
        };
        let mut all_keys = Vec::with_capacity(keys);
        let mut values = Vec::with_capacity(keys);
        for _ in 0..keys {
            all_keys.push(random32(&mut rng));
            values.push(random32(&mut rng));
        }
        let mut probes = Vec::with_capacity(reads);
        for _ in 0..reads {
            if !all_keys.is_empty() && rng.random_bool(0.5) {
                let i = rng.random_range(0..all_keys.len());
                probes.push(Probe { key: all_keys[i], expected: Some(values[i]) });
            } else {
                // A fresh random key: absent with probability 1 - n/2^256.
                probes.push(Probe { key: random32(&mut rng), expected: None });
            }
        }
        Workload { keys: all_keys, values, probes }
    }

    /// The index ranges of the batches of `batch` keys, in order.
    pub fn batches(&self, batch: usize) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
        let batch = batch.max(1);
        (0..self.keys.len()).step_by(batch).map(move |start| start..(start + batch).min(self.keys.len()))
    }
}
