//! Regular blocks (workload page §3): protocol bookkeeping, then manager operations (transfers and
//! contract calls) until the block's operation budget is spent.

use super::GenError;
use super::dist::{GrowingZipf, Rng, ValueKind, value_size};
use super::emit::Emitter;
use super::keys::{Model, child, data, dec};
use super::params::{DELEGATE_STRIDE, GenParams};
use super::setup::{ZIPF_S, big_map_value, branch, int};

/// Share of manager operations that call a contract (the rest are transfers).
const CALL_SHARE: f64 = 0.4;
/// Share of transfers that create a new implicit account (§3: ~1%).
const NEW_ACCOUNT_SHARE: f64 = 0.01;
/// Share of transfers that first check the receiver's directory exists (`mem_tree`).
const RECEIVER_EXISTS_CHECK: f64 = 0.25;
/// Share of senders that empty their account, which is then deleted.
const EMPTIED_SHARE: f64 = 0.01;
/// Share of contract calls that copy a small big map into a new one.
const COPY_SHARE: f64 = 0.12;
/// Share of contract calls that drop a big map made by an earlier copy.
const DROP_SHARE: f64 = 0.09;
/// Shares of big map entry operations: reads, updates of existing entries, insertions; the rest
/// are removals.
const ENTRY_READ: f64 = 0.28;
const ENTRY_UPDATE: f64 = 0.04;
const ENTRY_INSERT: f64 = 0.34;
/// Removals of recent entries pick among this many of the newest.
const RECENT_ENTRIES: u64 = 50;
/// A copied big map has at most this many entries.
const COPY_MAX_ENTRIES: u64 = 300;

/// The Zipf laws of the generator, kept across blocks.
pub(crate) struct Laws {
    receivers: GrowingZipf,
    contracts: GrowingZipf,
    maps: GrowingZipf,
    delegates: GrowingZipf,
}

impl Laws {
    /// The laws with the page's exponent.
    pub(crate) fn new() -> Laws {
        Laws {
            receivers: GrowingZipf::new(ZIPF_S),
            contracts: GrowingZipf::new(ZIPF_S),
            maps: GrowingZipf::new(ZIPF_S),
            delegates: GrowingZipf::new(ZIPF_S),
        }
    }
}

/// Everything a block's content is built from.
pub(crate) struct Builder<'x, 'a> {
    /// Where operations go.
    pub(crate) out: &'x mut Emitter<'a>,
    /// The random stream.
    pub(crate) rng: &'x mut Rng,
    /// The state counters.
    pub(crate) model: &'x mut Model,
    /// The Zipf laws.
    pub(crate) laws: &'x mut Laws,
}

/// Cycle number of `level`.
pub(crate) fn cycle_of(level: u64, params: &GenParams) -> u64 {
    level / params.cycle_length
}

/// The content of regular block `level`, after its checkout.
pub(crate) fn regular_block(b: &mut Builder<'_, '_>, params: &GenParams, level: u64) -> Result<(), GenError> {
    let budget = b.rng.lognormal(params.ops_per_block as f64, 0.5).max(10);
    bookkeeping(b, params, level)?;
    let mut burst = 0;
    if level.is_multiple_of(params.cycle_length) {
        let before = b.out.context_ops;
        super::cycle::boundary(b, params, cycle_of(level, params))?;
        burst = b.out.context_ops - before;
    }
    while b.out.context_ops - burst < budget {
        manager_op(b)?;
    }
    Ok(())
}

/// Operations of an abandoned context: `budget` operations' worth of manager operations.
pub(crate) fn abandoned_content(b: &mut Builder<'_, '_>, budget: u64) -> Result<(), GenError> {
    while b.out.context_ops < budget {
        manager_op(b)?;
    }
    Ok(())
}

/// Per-block protocol keys: branches, the level's nonce, the baker's and endorsers' balances.
fn bookkeeping(b: &mut Builder<'_, '_>, params: &GenParams, level: u64) -> Result<(), GenError> {
    for key in [&b"endorsement_branch"[..], b"grand_parent_branch"] {
        b.out.find(data(&[key]))?;
        let value = branch(b.rng);
        b.out.add(data(&[key]), value)?;
    }
    let cycle = cycle_of(level, params);
    let nonce = data(&[b"cycle", &dec(cycle), b"nonces", &dec(level)]);
    b.out.mem(nonce.clone())?;
    let value = b.rng.bytes(32);
    b.out.add(nonce, value)?;
    // The nonce of the same slot one cycle back is revealed, then dropped.
    if level > params.cycle_length {
        let old = level - params.cycle_length;
        let revealed = data(&[b"cycle", &dec(cycle_of(old, params)), b"nonces", &dec(old)]);
        if b.out.mem(revealed.clone())? {
            b.out.remove(revealed)?;
        }
    }
    let endorsers = b.rng.range(4, 8);
    for _ in 0..=endorsers {
        let k = b.laws.delegates.sample(b.model.delegates, b.rng);
        let balance = child(&b.model.implicit_path(k * DELEGATE_STRIDE), b"balance");
        b.out.find(balance.clone())?;
        let value = int(b.rng);
        b.out.add(balance, value)?;
    }
    Ok(())
}

/// One manager operation: the global counter, the sender, then a transfer or a contract call.
fn manager_op(b: &mut Builder<'_, '_>) -> Result<(), GenError> {
    let counter = data(&[b"contracts", b"global_counter"]);
    b.out.mem(counter.clone())?;
    b.out.find(counter.clone())?;
    let value = int(b.rng);
    b.out.add(counter, value)?;
    let sender = b.rng.below(b.model.implicit);
    let base = b.model.implicit_path(sender);
    if !b.out.mem(child(&base, b"balance"))? {
        // An emptied (deleted) account: the operation is rejected.
        return Ok(());
    }
    if !b.out.find(child(&base, b"manager"))? {
        // First operation of an account: reveal its public key.
        let key = b.rng.bytes(33);
        b.out.add(child(&base, b"manager"), key)?;
    }
    b.out.find(child(&base, b"counter"))?;
    let value = int(b.rng);
    b.out.add(child(&base, b"counter"), value)?;
    // Fees, then the amount: the balance is read twice and written once.
    b.out.find(child(&base, b"balance"))?;
    let has_delegate = b.out.mem(child(&base, b"delegate"))?;
    b.out.find(child(&base, b"balance"))?;
    let is_delegate = sender.is_multiple_of(DELEGATE_STRIDE) && sender / DELEGATE_STRIDE < b.model.delegates;
    if !is_delegate && b.rng.chance(EMPTIED_SHARE) {
        for key in [&b"balance"[..], b"counter", b"manager"] {
            b.out.remove(child(&base, key))?;
        }
        if has_delegate {
            b.out.remove(child(&base, b"delegate"))?;
            b.out.remove(child(&base, b"delegate_desactivation"))?;
        }
    } else {
        let value = int(b.rng);
        b.out.add(child(&base, b"balance"), value)?;
    }
    if b.model.originated > 0 && b.rng.chance(CALL_SHARE) { call(b) } else { transfer(b) }
}

/// Credits an implicit account, creating it if needed.
fn transfer(b: &mut Builder<'_, '_>) -> Result<(), GenError> {
    let receiver = if b.rng.chance(NEW_ACCOUNT_SHARE) {
        b.model.implicit += 1;
        b.model.implicit - 1
    } else {
        b.laws.receivers.sample(b.model.implicit, b.rng)
    };
    let base = b.model.implicit_path(receiver);
    if b.rng.chance(RECEIVER_EXISTS_CHECK) {
        b.out.mem_tree(base.clone())?;
    }
    if b.out.mem(child(&base, b"balance"))? {
        b.out.find(child(&base, b"balance"))?;
        // The receiver's delegate gains stake.
        b.out.find(child(&base, b"delegate"))?;
    } else {
        let value = int(b.rng);
        b.out.add(child(&base, b"counter"), value)?;
    }
    let value = int(b.rng);
    b.out.add(child(&base, b"balance"), value)
}

/// Calls an originated contract: code and storage, then a few big map updates.
fn call(b: &mut Builder<'_, '_>) -> Result<(), GenError> {
    let contract = b.laws.contracts.sample(b.model.originated, b.rng);
    let base = b.model.originated_path(contract);
    if !b.out.mem_tree(base.clone())? {
        return Ok(());
    }
    b.out.find(child(&base, b"code"))?;
    b.out.find(child(&base, b"storage"))?;
    let len = value_size(b.rng, ValueKind::Storage);
    let storage = b.rng.bytes(len);
    b.out.add(child(&base, b"storage"), storage)?;
    let len_storage = child(&child(&base, b"len"), b"storage");
    b.out.find(len_storage.clone())?;
    if b.rng.chance(0.5) {
        let value = int(b.rng);
        b.out.add(len_storage, value)?;
    }
    b.out.find(child(&base, b"used_bytes"))?;
    b.out.find(child(&base, b"paid_bytes"))?;
    if b.rng.chance(0.3) {
        let value = int(b.rng);
        b.out.add(child(&base, b"used_bytes"), value)?;
    }
    if b.rng.chance(0.2) {
        let value = int(b.rng);
        b.out.add(child(&base, b"paid_bytes"), value)?;
    }
    if b.rng.chance(0.5) {
        b.out.find(child(&base, b"balance"))?;
        let value = int(b.rng);
        b.out.add(child(&base, b"balance"), value)?;
    }
    big_map_updates(b)?;
    if b.rng.chance(COPY_SHARE) {
        copy_map(b)?;
    }
    if b.rng.chance(DROP_SHARE) {
        drop_map(b)?;
    }
    Ok(())
}

/// Reads, writes and removes a few entries of one big map, then updates its size.
fn big_map_updates(b: &mut Builder<'_, '_>) -> Result<(), GenError> {
    let map = b.laws.maps.sample(b.model.maps.len() as u64, b.rng);
    let base = Model::map_path(map);
    // Reading the map's size also tells whether it exists (a copied map may be gone).
    if !b.out.find(child(&base, b"total_bytes"))? {
        return Ok(());
    }
    let count = b.rng.range(1, 5);
    let mut written = false;
    for _ in 0..count {
        let roll = b.rng.unit();
        let next = b.model.map_entries(map);
        if roll < ENTRY_READ {
            let existing = b.rng.below(next);
            b.out.find(child(&b.model.entry_path(map, existing), b"data"))?;
        } else if roll < ENTRY_READ + ENTRY_UPDATE + ENTRY_INSERT {
            let index =
                if roll < ENTRY_READ + ENTRY_UPDATE { b.rng.below(next) } else { b.model.fresh_entry(map) };
            let entry = b.model.entry_path(map, index);
            let existed = b.out.mem(child(&entry, b"data"))?;
            let value = big_map_value(b.rng);
            b.out.add(child(&entry, b"data"), value)?;
            // A new entry gets its length; an update rewrites it when the size changed.
            if !existed || b.rng.chance(0.3) {
                let value = int(b.rng);
                b.out.add(child(&entry, b"len"), value)?;
            }
            written = true;
        } else {
            // Removals favour recent entries (transient ones: offers, approvals...).
            let index = if b.rng.chance(0.6) {
                next.saturating_sub(1 + b.rng.below(RECENT_ENTRIES.min(next)))
            } else {
                b.rng.below(next)
            };
            let entry = b.model.entry_path(map, index);
            if b.out.mem(child(&entry, b"data"))? {
                b.out.remove(child(&entry, b"data"))?;
                b.out.remove(child(&entry, b"len"))?;
                written = true;
            }
        }
    }
    if written {
        let value = int(b.rng);
        b.out.add(child(&base, b"total_bytes"), value)?;
    }
    Ok(())
}

/// Copies a small big map (from the tail of the Zipf law) into a new map.
fn copy_map(b: &mut Builder<'_, '_>) -> Result<(), GenError> {
    let source = b.rng.range(b.model.setup_maps / 2, b.model.setup_maps.saturating_sub(1));
    let from = Model::map_path(source);
    let small = b.out.length(&child(&from, b"contents"))? <= COPY_MAX_ENTRIES;
    if !small || !b.out.mem_tree(from.clone())? {
        return Ok(());
    }
    let target = b.model.copy_map(source);
    if b.out.copy(from, Model::map_path(target))? {
        let value = int(b.rng);
        b.out.add(child(&Model::map_path(target), b"total_bytes"), value)?;
    }
    Ok(())
}

/// Removes, whole, a big map made by an earlier copy.
fn drop_map(b: &mut Builder<'_, '_>) -> Result<(), GenError> {
    let count = b.model.maps.len() as u64;
    if count <= b.model.setup_maps {
        return Ok(());
    }
    let map = b.rng.range(b.model.setup_maps, count - 1);
    let path = Model::map_path(map);
    if b.out.mem_tree(path.clone())? {
        b.out.remove(path)?;
    }
    Ok(())
}
