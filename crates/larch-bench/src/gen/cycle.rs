//! Cycle boundaries (workload page §5): cycle data five cycles ahead, removal of the cycle six
//! behind, the stake snapshot (a subtree copy) and its expiry, and the bursts of writes.

use super::GenError;
use super::block::Builder;
use super::keys::{Model, child, data, dec};
use super::params::GenParams;
use super::setup::{int, write_cycle};

/// Every `LARGE_BURST_PERIOD`-th cycle the burst is large.
pub(crate) const LARGE_BURST_PERIOD: u64 = 5;

/// The cycle-boundary work of the first block of cycle `c`.
pub(crate) fn boundary(b: &mut Builder<'_, '_>, params: &GenParams, c: u64) -> Result<(), GenError> {
    write_cycle(b.out, b.rng, c + 5)?;
    if c >= 6 {
        let old = Model::cycle_path(c - 6);
        if b.out.mem_tree(old.clone())? {
            b.out.remove(old)?;
        }
    }
    let current = data(&[b"staking", b"current"]);
    b.out.copy(current, data(&[b"staking", b"snapshot", &dec(c)]))?;
    if c >= 6 {
        let old = data(&[b"staking", b"snapshot", &dec(c - 6)]);
        if b.out.mem_tree(old.clone())? {
            b.out.remove(old)?;
        }
    }
    for k in 0..b.model.delegates {
        let stake = b.model.stake_path(k);
        for key in [&b"frozen_deposits"[..], b"staking_balance"] {
            b.out.find(child(&stake, key))?;
            let value = int(b.rng);
            b.out.add(child(&stake, key), value)?;
        }
        let balance = child(&b.model.implicit_path(Model::delegate_account(k)), b"balance");
        b.out.find(balance.clone())?;
        let value = int(b.rng);
        b.out.add(balance, value)?;
    }
    if c.is_multiple_of(LARGE_BURST_PERIOD) {
        large_burst(b, params)?;
    }
    Ok(())
}

/// Rewards paid to a window of accounts: two writes each, over 30,000 at the default scale.
fn large_burst(b: &mut Builder<'_, '_>, params: &GenParams) -> Result<(), GenError> {
    let accounts = b.model.implicit;
    let start = b.rng.below(accounts);
    for t in 0..params.large_burst_accounts().min(accounts) {
        let base = b.model.implicit_path((start + t) % accounts);
        if b.out.find(child(&base, b"balance"))? {
            let value = int(b.rng);
            b.out.add(child(&base, b"balance"), value)?;
            let value = int(b.rng);
            b.out.add(child(&base, b"staking_pseudotokens"), value)?;
        }
    }
    Ok(())
}
