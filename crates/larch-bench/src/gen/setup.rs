//! Block 0 (the mainnet genesis, exactly) and block 1 (the setup block: the whole initial state at
//! the `accounts` scale), workload page §2.

use super::GenError;
use super::dist::{Rng, ValueKind, value_size};
use super::emit::Emitter;
use super::keys::{Model, child, data};
use super::params::GenParams;
use larch_core::ocaml_hash::{INODE_BUCKETS, inode_index};
use larch_trace::op::Path;

/// Called by the setup between two of its items (an account, a contract, a big map entry…):
/// commits a setup part when one is due ([`GenParams::setup_part_ops`]).
pub(crate) type Checkpoint<'c> = &'c mut dyn FnMut(&mut Emitter<'_>) -> Result<(), GenError>;

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
/// `checkpoint` runs between items; with setup parts, the large directories are filled in
/// inode-bucket order ([`bucket_order`]). Returns the number of directories after the setup.
pub(crate) fn setup(
    out: &mut Emitter<'_>,
    rng: &mut Rng,
    model: &mut Model,
    params: &GenParams,
    checkpoint: Checkpoint<'_>,
) -> Result<u64, GenError> {
    out.find(data(&[b"version"]))?;
    out.add(data(&[b"version"]), b"tezos-like/v1".to_vec())?;
    singletons(out, rng)?;
    model.delegates = params.delegates();
    let parts = params.setup_part_ops > 0;
    if parts {
        // The contract index in bucket order, implicit and originated accounts together.
        let implicit = bucket_order(params.accounts, |i| model.implicit_id(i));
        let originated = bucket_order(params.originated(), |j| model.originated_id(j));
        for group in 0..BUCKET_GROUPS {
            for i in implicit.of(group) {
                implicit_account(out, rng, model, i)?;
                checkpoint(out)?;
            }
            for j in originated.of(group) {
                originated_contract(out, rng, model, j)?;
                checkpoint(out)?;
            }
        }
    } else {
        for i in 0..params.accounts {
            implicit_account(out, rng, model, i)?;
        }
        for j in 0..params.originated() {
            originated_contract(out, rng, model, j)?;
        }
    }
    model.implicit = params.accounts;
    model.originated = params.originated();
    big_maps(out, rng, model, params, checkpoint)?;
    for k in 0..model.delegates {
        let pkh = model.pkh(Model::delegate_account(k));
        out.add(data(&[b"delegates", &pkh]), b"inited".to_vec())?;
        let stake = model.stake_path(k);
        out.add(child(&stake, b"staking_balance"), int(rng))?;
        out.add(child(&stake, b"frozen_deposits"), int(rng))?;
        checkpoint(out)?;
    }
    for c in 0..=5 {
        write_cycle(out, rng, c)?;
    }
    Ok(params.setup_directories())
}

/// The indices `0..n` sorted by the inode buckets of their names at depths 0 and 1 (a
/// counting sort, stable): a directory filled in this order is filled one second-level subtree
/// after another, so that a setup part rewrites only the few subtrees it fills. Four bytes per
/// index while the setup fills the directory.
pub(crate) struct BucketOrder {
    /// First index of each group in `order` (groups `b0 * 32 + b1`), and the end.
    starts: Vec<usize>,
    order: Vec<u32>,
}

/// Groups of [`BucketOrder`]: buckets at depth 0 times buckets at depth 1.
pub(crate) const BUCKET_GROUPS: usize = INODE_BUCKETS as usize * INODE_BUCKETS as usize;

impl BucketOrder {
    /// The indices of group `group`, in increasing order.
    pub(crate) fn of(&self, group: usize) -> impl Iterator<Item = u64> + '_ {
        let range =
            self.starts.get(group).copied().unwrap_or(0)..self.starts.get(group + 1).copied().unwrap_or(0);
        self.order.get(range).unwrap_or(&[]).iter().map(|&i| u64::from(i))
    }
}

/// The bucket order of the names `name(0..n)` (`n` below 2^32, as `accounts` is).
pub(crate) fn bucket_order(n: u64, name: impl Fn(u64) -> Vec<u8>) -> BucketOrder {
    let group = |i: u64| {
        let name = name(i);
        usize::from(inode_index(0, &name)) * INODE_BUCKETS as usize + usize::from(inode_index(1, &name))
    };
    let groups: Vec<u16> = (0..n).map(|i| group(i) as u16).collect();
    let mut starts = vec![0usize; BUCKET_GROUPS + 1];
    for g in &groups {
        starts[usize::from(*g) + 1] += 1;
    }
    for g in 0..BUCKET_GROUPS {
        starts[g + 1] += starts[g];
    }
    let mut next = starts.clone();
    let mut order = vec![0u32; groups.len()];
    for (i, g) in groups.iter().enumerate() {
        let slot = &mut next[usize::from(*g)];
        order[*slot] = i as u32;
        *slot += 1;
    }
    BucketOrder { starts, order }
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
    checkpoint: Checkpoint<'_>,
) -> Result<(), GenError> {
    let parts = params.setup_part_ops > 0;
    for rank in 0..params.big_maps() {
        let entries = params.map_entries(rank);
        let m = model.new_map(entries);
        let base = Model::map_path(m);
        let key_type = rng_len(rng, 8, 40);
        out.add(child(&base, b"key_type"), rng.bytes(key_type))?;
        let value_type = rng_len(rng, 8, 80);
        out.add(child(&base, b"value_type"), rng.bytes(value_type))?;
        out.add(child(&base, b"total_bytes"), int(rng))?;
        let mut entry = |out: &mut Emitter<'_>, rng: &mut Rng, i: u64| -> Result<(), GenError> {
            let entry = model.entry_path(m, i);
            out.add(child(&entry, b"data"), big_map_value(rng))?;
            out.add(child(&entry, b"len"), int(rng))?;
            checkpoint(out)
        };
        if parts && entries > u64::from(INODE_BUCKETS) {
            let order = bucket_order(entries, |i| model.entry_key(m, i));
            for group in 0..BUCKET_GROUPS {
                for i in order.of(group) {
                    entry(out, rng, i)?;
                }
            }
        } else {
            for i in 0..entries {
                entry(out, rng, i)?;
            }
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
