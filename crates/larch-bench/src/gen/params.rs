//! The generator's parameters (workload page §7), the scales derived from them, and the scale
//! ladder ([`Rung`]: 1x, 10x, mainnet).

use std::fmt;
use std::str::FromStr;

/// Parameters of a generated trace. [`Default`] gives the page's defaults (the 1x rung).
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
    /// The setup is committed in parts of about this many operations (0, the default: the whole
    /// setup in block 1). With parts, the setup is blocks `1..=P`, regular blocks follow at level
    /// `P + 1`, and the large directories (the contract index, the big maps) are filled one inode
    /// bucket after another, so that each part rewrites a slice of them, not all of them: what a
    /// streamed setup needs to hold memory and disk to the part's size (`docs/workload.md`).
    pub setup_part_ops: u64,
    /// With setup parts: a part is also committed once it holds this many items (accounts,
    /// contracts, big map entries, delegates: each a new directory; 0, the default: no such
    /// bound). What a part holds in memory until its commit grows with its directories more
    /// than with its operations (a big map entry is a directory of two values, an account one of
    /// four or five; a part's tree is held twice, by the generator and by the replay that
    /// streams it), so a part of big map entries is smaller in operations than one of accounts.
    pub setup_part_items: u64,
    /// Entries of the largest big map at setup; `None` (the default) derives it from `accounts`
    /// (22,000 at 20,000 accounts, growing with the square root of the scale above it).
    pub largest_map: Option<u64>,
    /// Number of delegates; `None` (the default) is 2% of `accounts`. Delegate `k` is implicit
    /// account `50 k`, so at most `accounts / 50` (and at least 2).
    pub delegates: Option<u64>,
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
            setup_part_ops: 0,
            setup_part_items: 0,
            largest_map: None,
            delegates: None,
        }
    }
}

/// Why generator parameters are refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ParamError {
    /// `accounts` is out of `100..2^32`.
    #[error("accounts must lie in 100..2^32, not {0}")]
    Accounts(u64),
    /// `ops_per_block` is below 20.
    #[error("ops-per-block must be at least 20, not {0}")]
    OpsPerBlock(u64),
    /// `cycle_length` is below 2.
    #[error("cycle-length must be at least 2, not {0}")]
    CycleLength(u64),
    /// A branch rate is outside `[0, 0.5]`.
    #[error("abandon and reorg rates must lie in [0, 0.5], not {0}")]
    Rate(f64),
    /// `setup_part_ops` is neither 0 nor at least [`MIN_SETUP_PART_OPS`].
    #[error("setup-part-ops must be 0 (one setup block) or at least {MIN_SETUP_PART_OPS}, not {0}")]
    SetupPartOps(u64),
    /// `largest_map` is outside `1..=2^31` (a map's entries are numbered with `u32`s).
    #[error("the largest big map must hold 1 to 2^31 entries, not {0}")]
    LargestMap(u64),
    /// `delegates` is outside `2..=accounts / 50`.
    #[error("delegates must lie in 2..={max} (one implicit account in 50), not {value}")]
    Delegates {
        /// The value given.
        value: u64,
        /// The most the accounts allow.
        max: u64,
    },
    /// Not a rung of the ladder.
    #[error("unknown scale {0:?}: expected 1x, 10x or mainnet")]
    UnknownRung(String),
}

/// The smallest setup part, in operations.
pub const MIN_SETUP_PART_OPS: u64 = 1000;

impl GenParams {
    /// Checks the parameters are usable.
    pub fn validate(&self) -> Result<(), ParamError> {
        if !(100..=u64::from(u32::MAX)).contains(&self.accounts) {
            return Err(ParamError::Accounts(self.accounts));
        }
        if self.ops_per_block < 20 {
            return Err(ParamError::OpsPerBlock(self.ops_per_block));
        }
        if self.cycle_length < 2 {
            return Err(ParamError::CycleLength(self.cycle_length));
        }
        for rate in [self.abandon_rate, self.reorg_rate] {
            if !(0.0..=0.5).contains(&rate) {
                return Err(ParamError::Rate(rate));
            }
        }
        if self.setup_part_ops != 0 && self.setup_part_ops < MIN_SETUP_PART_OPS {
            return Err(ParamError::SetupPartOps(self.setup_part_ops));
        }
        if let Some(largest) = self.largest_map
            && !(1..=1 << 31).contains(&largest)
        {
            return Err(ParamError::LargestMap(largest));
        }
        if let Some(value) = self.delegates {
            let max = self.accounts / DELEGATE_STRIDE;
            if value < 2 || value > max {
                return Err(ParamError::Delegates { value, max });
            }
        }
        Ok(())
    }

    /// Number of originated contracts at setup (5% of accounts).
    pub(crate) fn originated(&self) -> u64 {
        (self.accounts / 20).max(2)
    }

    /// Number of delegates (2% of accounts unless set): delegate `k` is implicit account `k * 50`.
    pub(crate) fn delegates(&self) -> u64 {
        self.delegates.unwrap_or((self.accounts / DELEGATE_STRIDE).max(2))
    }

    /// Number of big maps at setup.
    pub(crate) fn big_maps(&self) -> u64 {
        (self.accounts / 50).max(4)
    }

    /// Entries of the largest big map at setup: `largest_map` if set, else 22,000 at the default
    /// scale, proportional below it and growing with the square root of the scale above it.
    pub(crate) fn largest_map(&self) -> u64 {
        if let Some(largest) = self.largest_map {
            return largest;
        }
        let scale = self.accounts as f64 / 20_000.0;
        let factor = if scale <= 1.0 { scale } else { libm::sqrt(scale) };
        ((22_000.0 * factor) as u64).max(50)
    }

    /// Entries of big map `rank` (0 the largest) at setup: a Zipf law from [`GenParams::largest_map`].
    pub(crate) fn map_entries(&self, rank: u64) -> u64 {
        (self.largest_map() as f64 * libm::pow((rank + 1) as f64, -super::setup::ZIPF_S)) as u64 + 1
    }

    /// Operations of the setup (block 1, or its parts), roughly: accounts, contracts, big maps,
    /// delegates.
    pub fn setup_ops_estimate(&self) -> u64 {
        let entries: u64 = (0..self.big_maps()).map(|rank| self.map_entries(rank)).sum();
        self.accounts * 41 / 10
            + self.originated() * 7
            + self.big_maps() * 3
            + entries * 2
            + self.delegates() * 3
    }

    /// Directories of the context after the setup, exactly: the fixed ones (the root, `data`,
    /// `contracts`, `contracts/index`, `v1`, `votes`, `big_maps`, `big_maps/index`, `delegates`,
    /// `staking`, `staking/current`, `cycle`), one per account and stake, two per originated
    /// contract (itself and `len`) and per big map (itself and `contents`), one per big map entry
    /// and per cycle (0 to 5).
    pub fn setup_directories(&self) -> u64 {
        let entries: u64 = (0..self.big_maps()).map(|rank| self.map_entries(rank)).sum();
        12 + self.accounts + 2 * self.originated() + 2 * self.big_maps() + entries + self.delegates() + 6
    }

    /// Setup blocks the generator commits, roughly: 1 without parts (a part bounded by
    /// [`GenParams::setup_part_items`] counted as of 3 operations an item).
    pub fn setup_parts_estimate(&self) -> u64 {
        let part_ops = match self.setup_part_items {
            0 => self.setup_part_ops,
            items => self.setup_part_ops.min(items.saturating_mul(3)),
        };
        self.setup_ops_estimate().checked_div(part_ops).map_or(1, |parts| parts + 1)
    }

    /// Accounts whose balance the large burst of every fifth cycle rewrites (two writes each).
    pub(crate) fn large_burst_accounts(&self) -> u64 {
        self.accounts.min(16_000)
    }
}

/// Every `DELEGATE_STRIDE`-th implicit account is a delegate.
pub(crate) const DELEGATE_STRIDE: u64 = 50;

/// Delegates of the rungs above 1x: about as many as mainnet has (2% of their accounts would make
/// every cycle boundary, which rewrites each delegate's stake, a burst of 6 operations per delegate).
const MAINNET_DELEGATES: u64 = 3_000;

/// A rung of the scale ladder (`--scale`): the context the setup builds, from today's default to
/// a mainnet-sized one. Regular blocks have the same shape and operation mix on every rung
/// (2,000 context operations on average, the same bursts); only the context they run on grows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rung {
    /// The default context: 20,000 accounts, about 0.32 M values and 0.14 M directories, the
    /// setup in one block.
    X1,
    /// Ten times the default: 200,000 accounts and big maps ten times larger (about 3.7 M values,
    /// 1.6 M directories), 3,000 delegates as the mainnet rung, the setup streamed in parts of
    /// [`Rung::SETUP_PART_OPS`] operations.
    X10,
    /// Mainnet-sized: 10 M accounts, 500,000 originated contracts, 200,000 big maps whose largest
    /// holds 2.4 M entries (18.4 M entries in all), 3,000 delegates as on mainnet (about 82 M
    /// values and 30 M directories), streamed in parts.
    Mainnet,
}

impl Rung {
    /// Every rung, smallest first.
    pub const ALL: [Rung; 3] = [Rung::X1, Rung::X10, Rung::Mainnet];

    /// Operations per setup part of the streamed rungs.
    pub const SETUP_PART_OPS: u64 = 1 << 18;

    /// Items per setup part of the streamed rungs ([`GenParams::setup_part_items`]): 81,920,
    /// against the 131,072 big map entries of 2^18 operations (a part of accounts, ~62,000 of
    /// them, is bounded by its operations). It stays above the 65,536 nodes a part rewrites
    /// past which a pipelined store does not carry the part's tree in memory to the next block
    /// but reads it back lazily (`larch-store`'s `PipelinedRepo::checkout`): a smaller part would
    /// be carried, and its nodes kept reachable from the next parts' trees.
    pub const SETUP_PART_ITEMS: u64 = 81_920;

    /// The rung's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Rung::X1 => "1x",
            Rung::X10 => "10x",
            Rung::Mainnet => "mainnet",
        }
    }

    /// The generator's parameters of this rung, with `seed` and `blocks` regular blocks.
    pub fn params(self, seed: u64, blocks: u64) -> GenParams {
        let base = GenParams { seed, blocks, ..GenParams::default() };
        match self {
            Rung::X1 => base,
            Rung::X10 => GenParams {
                accounts: 200_000,
                largest_map: Some(220_000),
                delegates: Some(MAINNET_DELEGATES),
                setup_part_ops: Rung::SETUP_PART_OPS,
                setup_part_items: Rung::SETUP_PART_ITEMS,
                ..base
            },
            Rung::Mainnet => GenParams {
                accounts: 10_000_000,
                largest_map: Some(2_400_000),
                delegates: Some(MAINNET_DELEGATES),
                setup_part_ops: Rung::SETUP_PART_OPS,
                setup_part_items: Rung::SETUP_PART_ITEMS,
                ..base
            },
        }
    }
}

impl fmt::Display for Rung {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Rung {
    type Err = ParamError;

    fn from_str(s: &str) -> Result<Rung, ParamError> {
        Rung::ALL
            .into_iter()
            .find(|rung| rung.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| ParamError::UnknownRung(s.to_string()))
    }
}
