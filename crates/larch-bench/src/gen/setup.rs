//! Block 0 (the mainnet genesis, exactly) and block 1 (the setup block: the whole initial state at
//! the `accounts` scale), workload page §2.

use super::GenError;
use super::dist::{Rng, ValueKind, value_size};
use super::emit::Emitter;
use super::keys::{Model, child, data};
use super::params::GenParams;
use larch_trace::op::Path;

/// The mainnet genesis protocol hash (raw bytes of `Ps9mPmXaRzmzk35gbAYNCAw6UXdE2qoABTHbN2oEEc1qM7CwT9P`).
pub const GENESIS_PROTOCOL: [u8; 32] = [
    0x38, 0xec, 0xde, 0xf0, 0xcd, 0x08, 0x64, 0x0f, 0x31, 0x8a, 0x9b, 0x05, 0x5f, 0x6b, 0x0d, 0x0c, 0x9a,
    0xe0, 0x30, 0x91, 0x3a, 0x87, 0x1d, 0x9b, 0x9d, 0x86, 0xfb, 0x84, 0x63, 0x17, 0xda, 0x21,
];

/// Date of the genesis commit; block `level` is dated `GENESIS_DATE + 30 * level`.
pub const GENESIS_DATE: i64 = 1_530_374_852;

/// Exponent of the Zipf laws (receivers, contracts, big maps, map sizes).
pub(crate) const ZIPF_S: f64 = 1.1;

/// The operations of the mainnet genesis block, before its commit.
pub(crate) fn genesis(out: &mut Emitter<'_>) -> Result<(), GenError> {
    out.find(data(&[b"version"]))?;
    out.add(data(&[b"version"]), b"genesis".to_vec())?;
    out.find(data(&[b"sandbox_parameter"]))?;
    out.add(Path::from_steps([b"protocol"]), GENESIS_PROTOCOL.to_vec())?;
    out.add(Path::from_steps([b"test_chain"]), vec![0])
}

/// A zarith-like integer value.
pub(crate) fn int(rng: &mut Rng) -> Vec<u8> {
    let len = value_size(rng, ValueKind::Int);
    rng.bytes(len)
}

/// A block-hash-and-level value (branches): 36 bytes.
pub(crate) fn branch(rng: &mut Rng) -> Vec<u8> {
    rng.bytes(36)
}

/// Writes the per-cycle data of cycle `c`: seed, stake distribution (10-50 KB) and total stake.
pub(crate) fn write_cycle(out: &mut Emitter<'_>, rng: &mut Rng, c: u64) -> Result<(), GenError> {
    let base = Model::cycle_path(c);
    out.add(child(&base, b"random_seed"), rng.bytes(32))?;
    let size = rng.range(10 * 1024, 50 * 1024) as usize;
    out.add(child(&base, b"selected_stake_distribution"), rng.bytes(size))?;
    out.add(child(&base, b"total_active_stake"), int(rng))
}

/// The setup block's operations: accounts, contracts, big maps, delegates, cycles, singletons.
pub(crate) fn setup(
    out: &mut Emitter<'_>,
    rng: &mut Rng,
    model: &mut Model,
    params: &GenParams,
) -> Result<(), GenError> {
    out.find(data(&[b"version"]))?;
    out.add(data(&[b"version"]), b"tezos-like/v1".to_vec())?;
    singletons(out, rng)?;
    model.delegates = params.delegates();
    for i in 0..params.accounts {
        implicit_account(out, rng, model, i)?;
    }
    model.implicit = params.accounts;
    for j in 0..params.originated() {
        originated_contract(out, rng, model, j)?;
    }
    model.originated = params.originated();
    big_maps(out, rng, model, params)?;
    for k in 0..model.delegates {
        let pkh = model.pkh(Model::delegate_account(k));
        out.add(data(&[b"delegates", &pkh]), b"inited".to_vec())?;
        let stake = model.stake_path(k);
        out.add(child(&stake, b"staking_balance"), int(rng))?;
        out.add(child(&stake, b"frozen_deposits"), int(rng))?;
    }
    for c in 0..=5 {
        write_cycle(out, rng, c)?;
    }
    Ok(())
}

fn singletons(out: &mut Emitter<'_>, rng: &mut Rng) -> Result<(), GenError> {
    out.add(data(&[b"contracts", b"global_counter"]), rng.bytes(5))?;
    out.add(data(&[b"v1", b"constants"]), rng.bytes(420))?;
    out.add(data(&[b"v1", b"cycle_eras"]), rng.bytes(21))?;
    out.add(data(&[b"first_level_of_protocol"]), rng.bytes(4))?;
    out.add(data(&[b"votes", b"current_period"]), rng.bytes(13))?;
    out.add(data(&[b"endorsement_branch"]), branch(rng))?;
    out.add(data(&[b"grand_parent_branch"]), branch(rng))
}

/// A manager key: a revealed public key (33 bytes) or a public key hash (21 bytes).
pub(crate) fn manager(rng: &mut Rng) -> Vec<u8> {
    let len = if rng.chance(0.4) { 33 } else { 21 };
    rng.bytes(len)
}

fn implicit_account(out: &mut Emitter<'_>, rng: &mut Rng, model: &Model, i: u64) -> Result<(), GenError> {
    let base = model.implicit_path(i);
    out.add(child(&base, b"balance"), int(rng))?;
    out.add(child(&base, b"counter"), int(rng))?;
    out.add(child(&base, b"manager"), manager(rng))?;
    let is_delegate = i.is_multiple_of(super::params::DELEGATE_STRIDE)
        && i / super::params::DELEGATE_STRIDE < model.delegates;
    if is_delegate || rng.chance(0.55) {
        let delegate = if is_delegate { i } else { Model::delegate_account(rng.below(model.delegates)) };
        out.add(child(&base, b"delegate"), model.pkh(delegate)[..].to_vec())?;
        out.add(child(&base, b"delegate_desactivation"), rng.bytes(4))?;
    }
    Ok(())
}

fn originated_contract(out: &mut Emitter<'_>, rng: &mut Rng, model: &Model, j: u64) -> Result<(), GenError> {
    let base = model.originated_path(j);
    out.add(child(&base, b"balance"), int(rng))?;
    let code_len = rng.log_uniform(100, 30 * 1024) as usize;
    out.add(child(&base, b"code"), rng.bytes(code_len))?;
    let storage_len = value_size(rng, ValueKind::Storage);
    out.add(child(&base, b"storage"), rng.bytes(storage_len))?;
    out.add(child(&base, b"used_bytes"), int(rng))?;
    out.add(child(&base, b"paid_bytes"), int(rng))?;
    let len: Path = child(&base, b"len");
    out.add(child(&len, b"code"), int(rng))?;
    out.add(child(&len, b"storage"), int(rng))
}

fn big_maps(
    out: &mut Emitter<'_>,
    rng: &mut Rng,
    model: &mut Model,
    params: &GenParams,
) -> Result<(), GenError> {
    let largest = params.largest_map() as f64;
    for rank in 0..params.big_maps() {
        let entries = (largest * libm::pow((rank + 1) as f64, -ZIPF_S)) as u64 + 1;
        let m = model.new_map(entries);
        let base = Model::map_path(m);
        let key_type = rng_len(rng, 8, 40);
        out.add(child(&base, b"key_type"), rng.bytes(key_type))?;
        let value_type = rng_len(rng, 8, 80);
        out.add(child(&base, b"value_type"), rng.bytes(value_type))?;
        out.add(child(&base, b"total_bytes"), int(rng))?;
        for i in 0..entries {
            let entry = model.entry_path(m, i);
            out.add(child(&entry, b"data"), big_map_value(rng))?;
            out.add(child(&entry, b"len"), int(rng))?;
        }
    }
    model.setup_maps = params.big_maps();
    Ok(())
}

fn rng_len(rng: &mut Rng, lo: u64, hi: u64) -> usize {
    rng.range(lo, hi) as usize
}

/// A big map value.
pub(crate) fn big_map_value(rng: &mut Rng) -> Vec<u8> {
    let len = value_size(rng, ValueKind::BigMapData);
    rng.bytes(len)
}
