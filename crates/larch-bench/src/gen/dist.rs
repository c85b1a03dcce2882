//! Randomness, portably: a seeded ChaCha stream, uniform integers and floats built from its raw
//! 64-bit words, Zipf and log-normal laws computed with `libm` (a pure-Rust libm, so the same bits
//! on every platform), and the value-size law of the workload page (§4).

use rand_chacha::ChaCha12Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};

/// The generator's random stream: every decision draws from it, in a fixed order.
pub(crate) struct Rng(ChaCha12Rng);

impl Rng {
    /// The stream for `seed`.
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(ChaCha12Rng::seed_from_u64(seed))
    }

    /// A raw 64-bit word.
    pub(crate) fn u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `0..n` (0 when `n` is 0), by the multiply-shift reduction.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi` (`lo` when `hi < lo`).
    pub(crate) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo { lo } else { lo + self.below(hi - lo + 1) }
    }

    /// Uniform in `[0, 1)`, with 53 random bits.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p`.
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// A standard normal variate (Box-Muller).
    pub(crate) fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.unit();
        let u2 = self.unit();
        libm::sqrt(-2.0 * libm::log(u1)) * libm::cos(2.0 * std::f64::consts::PI * u2)
    }

    /// A log-normal count with the given mean and log-space standard deviation.
    pub(crate) fn lognormal(&mut self, mean: f64, sigma: f64) -> u64 {
        let x = mean * libm::exp(sigma * self.normal() - sigma * sigma / 2.0);
        libm::round(x).max(0.0) as u64
    }

    /// Log-uniform in `lo..=hi`.
    pub(crate) fn log_uniform(&mut self, lo: u64, hi: u64) -> u64 {
        let (a, b) = (libm::log(lo.max(1) as f64), libm::log(hi.max(lo).max(1) as f64));
        let x = libm::exp(a + (b - a) * self.unit());
        (libm::floor(x) as u64).clamp(lo, hi.max(lo))
    }

    /// `len` random bytes.
    pub(crate) fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        self.0.fill_bytes(&mut out);
        out
    }
}

/// A Zipf law on ranks `0..n` with exponent `s` (rank 0 the most likely), sampled by
/// rejection-inversion (Hörmann & Derflinger), as in `rand_distr` but with portable math.
#[derive(Clone, Debug)]
pub(crate) struct Zipf {
    n: u64,
    s: f64,
    t: f64,
    q: f64,
}

impl Zipf {
    /// The law on `0..n` (`n` at least 1) with exponent `s` (not 1).
    pub(crate) fn new(n: u64, s: f64) -> Zipf {
        let n = n.max(1);
        let q = 1.0 / (1.0 - s);
        let t = (libm::pow(n as f64, 1.0 - s) - s) * q;
        Zipf { n, s, t, q }
    }

    /// Number of ranks.
    pub(crate) fn n(&self) -> u64 {
        self.n
    }

    fn inv_cdf(&self, p: f64) -> f64 {
        let pt = p * self.t;
        if pt <= 1.0 { pt } else { libm::pow(pt * (1.0 - self.s) + self.s, self.q) }
    }

    /// A rank in `0..n`.
    pub(crate) fn sample(&self, rng: &mut Rng) -> u64 {
        loop {
            let inv_b = self.inv_cdf(rng.unit());
            let x = libm::floor(inv_b + 1.0);
            let mut ratio = libm::pow(x, -self.s);
            if x > 1.0 {
                ratio *= libm::pow(inv_b, self.s);
            }
            if rng.unit() < ratio {
                return ((x as u64).max(1) - 1).min(self.n - 1);
            }
        }
    }
}

/// A Zipf law over a population that grows: rebuilt when the size changes.
#[derive(Clone, Debug)]
pub(crate) struct GrowingZipf {
    s: f64,
    law: Zipf,
}

impl GrowingZipf {
    /// Exponent `s`, initially over one rank.
    pub(crate) fn new(s: f64) -> GrowingZipf {
        GrowingZipf { s, law: Zipf::new(1, s) }
    }

    /// A rank in `0..n`.
    pub(crate) fn sample(&mut self, n: u64, rng: &mut Rng) -> u64 {
        if self.law.n() != n.max(1) {
            self.law = Zipf::new(n, self.s);
        }
        self.law.sample(rng)
    }
}

/// The value-size buckets of the workload page (§4): inclusive upper bounds, labels and the
/// mainnet shares in percent.
pub const SIZE_BUCKETS: [(usize, &str, f64); 11] = [
    (1, "1", 0.7),
    (3, "2-3", 29.7),
    (7, "4-7", 48.5),
    (15, "8-15", 1.4),
    (31, "16-31", 3.9),
    (64, "32-64", 5.3),
    (128, "65-128", 9.4),
    (256, "129-256", 0.7),
    (512, "257-512", 0.2),
    (4096, "513 B - 4 KB", 0.2),
    (usize::MAX, "> 4 KB", 0.01),
];

/// Index in [`SIZE_BUCKETS`] of a value of `len` bytes (0 bytes counts with 1).
pub fn size_bucket(len: usize) -> usize {
    SIZE_BUCKETS.iter().position(|(max, _, _)| len <= *max).unwrap_or(SIZE_BUCKETS.len() - 1)
}

/// Lower bound of bucket `index`.
fn bucket_min(index: usize) -> usize {
    match index.checked_sub(1).and_then(|i| SIZE_BUCKETS.get(i)) {
        Some((max, _, _)) => max + 1,
        None => 1,
    }
}

/// Upper bound used when drawing in bucket `index` (the open last bucket stops at 256 KB).
fn bucket_max(index: usize) -> usize {
    match SIZE_BUCKETS.get(index) {
        Some((usize::MAX, _, _)) | None => 256 * 1024,
        Some((max, _, _)) => *max,
    }
}

/// Draws a size from the buckets `range` of the table, weighted by their shares, uniform within
/// the bucket (log-uniform for the wide last two).
fn draw_in(rng: &mut Rng, range: std::ops::Range<usize>) -> usize {
    let total: f64 = SIZE_BUCKETS.get(range.clone()).map_or(0.0, |b| b.iter().map(|(_, _, w)| w).sum());
    let mut x = rng.unit() * total;
    let mut chosen = range.start;
    for index in range.clone() {
        let weight = SIZE_BUCKETS.get(index).map_or(0.0, |(_, _, w)| *w);
        chosen = index;
        if x < weight {
            break;
        }
        x -= weight;
    }
    let (lo, hi) = (bucket_min(chosen), bucket_max(chosen));
    if chosen + 2 >= SIZE_BUCKETS.len() {
        rng.log_uniform(lo as u64, hi as u64) as usize
    } else {
        rng.range(lo as u64, hi as u64) as usize
    }
}

/// What kind of value is being written; each kind has its own size law, chosen so that the whole
/// trace follows the table of §4.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ValueKind {
    /// A zarith-encoded integer (balance, counter, length...): the part of the table under 16 B.
    Int,
    /// A big map value (a Micheline expression): the whole table, leaning to the larger part.
    BigMapData,
    /// A contract's storage: the part of the table from 16 B up, at most 5 KB.
    Storage,
}

/// Number of buckets under 16 bytes.
const SMALL_BUCKETS: usize = 4;
/// Share of big map values drawn from the part of the table at or above 16 bytes.
const BIG_MAP_LARGE_SHARE: f64 = 1.0;
/// Weights of the buckets from 16 bytes up (16-31 ... 513 B - 4 KB) for big map values: they
/// supply most of the 65-128 bucket of the whole context.
const BIG_MAP_LARGE_WEIGHTS: [f64; 6] = [9.0, 9.0, 28.0, 1.5, 0.5, 0.5];

/// Draws bucket `SMALL_BUCKETS + i` with weight `weights[i]`, then a size within it.
fn draw_weighted(rng: &mut Rng, weights: &[f64]) -> usize {
    let total: f64 = weights.iter().sum();
    let mut x = rng.unit() * total;
    let mut chosen = SMALL_BUCKETS;
    for (i, weight) in weights.iter().enumerate() {
        chosen = SMALL_BUCKETS + i;
        if x < *weight {
            break;
        }
        x -= weight;
    }
    rng.range(bucket_min(chosen) as u64, bucket_max(chosen) as u64) as usize
}

/// A size for a value of kind `kind`.
pub(crate) fn value_size(rng: &mut Rng, kind: ValueKind) -> usize {
    match kind {
        ValueKind::Int => draw_in(rng, 0..SMALL_BUCKETS),
        ValueKind::BigMapData => {
            if rng.chance(BIG_MAP_LARGE_SHARE) {
                draw_weighted(rng, &BIG_MAP_LARGE_WEIGHTS)
            } else {
                draw_in(rng, 0..SMALL_BUCKETS)
            }
        }
        ValueKind::Storage => draw_in(rng, SMALL_BUCKETS..SIZE_BUCKETS.len() - 1).min(5 * 1024),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_sizes() {
        assert_eq!(size_bucket(0), 0);
        assert_eq!(size_bucket(1), 0);
        assert_eq!(size_bucket(2), 1);
        assert_eq!(size_bucket(64), 5);
        assert_eq!(size_bucket(65), 6);
        assert_eq!(size_bucket(4096), 9);
        assert_eq!(size_bucket(4097), 10);
        for index in 0..SIZE_BUCKETS.len() {
            assert_eq!(size_bucket(bucket_min(index)), index);
            assert_eq!(size_bucket(bucket_max(index)), index);
        }
    }

    #[test]
    fn zipf_is_skewed_and_in_range() {
        let mut rng = Rng::new(7);
        let law = Zipf::new(1000, 1.1);
        let mut counts = vec![0u64; 1000];
        for _ in 0..100_000 {
            let r = law.sample(&mut rng) as usize;
            counts[r] += 1;
        }
        // P(rank 0) = 1 / H(1000, 1.1) ~ 0.17; rank 1 about 2^-1.1 of it.
        assert!((14_000..20_000).contains(&counts[0]), "rank 0: {}", counts[0]);
        let ratio = counts[1] as f64 / counts[0] as f64;
        assert!((0.40..0.53).contains(&ratio), "ratio {ratio}");
        assert!(counts[500..].iter().sum::<u64>() > 0);
    }

    #[test]
    fn lognormal_mean() {
        let mut rng = Rng::new(3);
        let n = 20_000;
        let sum: u64 = (0..n).map(|_| rng.lognormal(2000.0, 0.5)).sum();
        let mean = sum as f64 / n as f64;
        assert!((1900.0..2100.0).contains(&mean), "mean {mean}");
    }

    #[test]
    fn sizes_by_kind() {
        let mut rng = Rng::new(5);
        for _ in 0..10_000 {
            assert!((1..=15).contains(&value_size(&mut rng, ValueKind::Int)));
            assert!((16..=5 * 1024).contains(&value_size(&mut rng, ValueKind::Storage)));
            assert!((1..=4096).contains(&value_size(&mut rng, ValueKind::BigMapData)));
        }
    }
}
