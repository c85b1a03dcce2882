//! The generator's parameters (workload page §7) and the scales derived from them.

use super::GenError;

/// Parameters of a generated trace. [`Default`] gives the page's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct GenParams {
    /// Regular blocks after genesis and the setup block (`--blocks`, default 3,000).
    pub blocks: u64,
    /// Everything derives from it (`--seed`, default 0).
    pub seed: u64,
    /// Implicit accounts created by the setup block (`--accounts`, default 20,000).
    pub accounts: u64,
    /// Mean context operations per regular block (`--ops-per-block`, default 2,000).
    pub ops_per_block: u64,
    /// Blocks per cycle (`--cycle-length`, default 256).
    pub cycle_length: u64,
    /// Share of blocks preceded by an abandoned extra context (default 0.005, §6).
    pub abandon_rate: f64,
    /// Share of blocks that are short reorganisations (default 0.001, §6).
    pub reorg_rate: f64,
}

impl Default for GenParams {
    fn default() -> GenParams {
        GenParams {
            blocks: 3000,
            seed: 0,
            accounts: 20_000,
            ops_per_block: 2000,
            cycle_length: 256,
            abandon_rate: 0.005,
            reorg_rate: 0.001,
        }
    }
}

impl GenParams {
    /// Checks the parameters are usable.
    pub fn validate(&self) -> Result<(), GenError> {
        let bad = |what: &str| Err(GenError::Params(what.to_string()));
        if self.accounts < 100 {
            return bad("accounts must be at least 100");
        }
        if self.accounts > u64::from(u32::MAX) {
            return bad("accounts must be below 2^32");
        }
        if self.ops_per_block < 20 {
            return bad("ops-per-block must be at least 20");
        }
        if self.cycle_length < 2 {
            return bad("cycle-length must be at least 2");
        }
        let rate_ok = |rate: f64| (0.0..=0.5).contains(&rate);
        if !rate_ok(self.abandon_rate) || !rate_ok(self.reorg_rate) {
            return bad("abandon and reorg rates must lie in [0, 0.5]");
        }
        Ok(())
    }

    /// Number of originated contracts at setup (5% of accounts).
    pub(crate) fn originated(&self) -> u64 {
        (self.accounts / 20).max(2)
    }

    /// Number of delegates (2% of accounts): delegate `k` is implicit account `k * 50`.
    pub(crate) fn delegates(&self) -> u64 {
        (self.accounts / DELEGATE_STRIDE).max(2)
    }

    /// Number of big maps at setup.
    pub(crate) fn big_maps(&self) -> u64 {
        (self.accounts / 50).max(4)
    }

    /// Entries of the largest big map at setup: 22,000 at the default scale, proportional below
    /// it and growing with the square root of the scale above it (so that a mainnet-sized run,
    /// 100 times the accounts, holds about 1.6 million big map entries rather than 16 million).
    pub(crate) fn largest_map(&self) -> u64 {
        let scale = self.accounts as f64 / 20_000.0;
        let factor = if scale <= 1.0 { scale } else { libm::sqrt(scale) };
        ((22_000.0 * factor) as u64).max(50)
    }

    /// Accounts whose balance the large burst of every fifth cycle rewrites (two writes each).
    pub(crate) fn large_burst_accounts(&self) -> u64 {
        self.accounts.min(16_000)
    }
}

/// Every `DELEGATE_STRIDE`-th implicit account is a delegate.
pub(crate) const DELEGATE_STRIDE: u64 = 50;
