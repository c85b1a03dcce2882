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
/// inode-bucket order ([`BucketOrder`]). Returns the number of directories after the setup.
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
        let mut implicit = BucketOrder::new(params.accounts, |i| model.implicit_id(i));
        let mut originated = BucketOrder::new(params.originated(), |j| model.originated_id(j));
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
/// after another, so that a setup part rewrites only the few subtrees it fills. The order is
/// computed a window of groups at a time ([`ORDER_WINDOW`] indices at most, in a few scans of
/// the names), so that it holds a few MiB whatever `n` (the whole order of the mainnet rung's 10 M
/// accounts held 40 MiB, 60 while it was built).
pub(crate) struct BucketOrder<F> {
    n: u64,
    name: F,
    /// Groups per window (a power of two dividing [`BUCKET_GROUPS`]).
    window: usize,
    /// The first group of the window loaded (`usize::MAX`: none yet).
    first: usize,
    /// First index of each group of the window in `order` (relative to `first`), and the end.
    starts: Vec<usize>,
    order: Vec<u32>,
}

/// Groups of [`BucketOrder`]: buckets at depth 0 times buckets at depth 1.
pub(crate) const BUCKET_GROUPS: usize = INODE_BUCKETS as usize * INODE_BUCKETS as usize;

/// Indices a [`BucketOrder`] window holds, about (groups are not all the same size): windows
/// are as many as needed, a power of two, for `n / windows` to stay below it.
pub(crate) const ORDER_WINDOW: u64 = 1 << 21;

impl<F: Fn(u64) -> Vec<u8>> BucketOrder<F> {
    /// The bucket order of the names `name(0..n)` (`n` below 2^32, as `accounts` is), computed
    /// as its groups are asked for.
    pub(crate) fn new(n: u64, name: F) -> BucketOrder<F> {
        BucketOrder::with_window(n, name, ORDER_WINDOW)
    }

    /// [`BucketOrder::new`] with windows of about `indices` indices.
    fn with_window(n: u64, name: F, indices: u64) -> BucketOrder<F> {
        let windows = n.div_ceil(indices.max(1)).max(1).next_power_of_two().min(BUCKET_GROUPS as u64);
        let window = BUCKET_GROUPS / usize::try_from(windows).unwrap_or(BUCKET_GROUPS);
        BucketOrder {
            n,
            name,
            window: window.max(1),
            first: usize::MAX,
            starts: Vec::new(),
            order: Vec::new(),
        }
    }

    fn group(&self, i: u64) -> usize {
        let name = (self.name)(i);
        usize::from(inode_index(0, &name)) * INODE_BUCKETS as usize + usize::from(inode_index(1, &name))
    }

    /// Loads the window starting at group `first`: one scan of the names.
    fn load(&mut self, first: usize) {
        let window = first..first + self.window;
        let members: Vec<(u16, u32)> = (0..self.n)
            .filter_map(|i| {
                let g = self.group(i);
                window.contains(&g).then(|| ((g - first) as u16, i as u32))
            })
            .collect();
        let mut starts = vec![0usize; self.window + 1];
        for (g, _) in &members {
            starts[usize::from(*g) + 1] += 1;
        }
        for g in 0..self.window {
            starts[g + 1] += starts[g];
        }
        let mut next = starts.clone();
        let mut order = vec![0u32; members.len()];
        for (g, i) in &members {
            let slot = &mut next[usize::from(*g)];
            order[*slot] = *i;
            *slot += 1;
        }
        self.first = first;
        self.starts = starts;
        self.order = order;
    }

    /// The indices of group `group`, in increasing order (groups are best asked for in order:
    /// each new window scans the names again).
    pub(crate) fn of(&mut self, group: usize) -> impl Iterator<Item = u64> + '_ {
        let first = group - group % self.window;
        if first != self.first {
            self.load(first);
        }
        let local = group - first;
        let range =
            self.starts.get(local).copied().unwrap_or(0)..self.starts.get(local + 1).copied().unwrap_or(0);
        self.order.get(range).unwrap_or(&[]).iter().map(|&i| u64::from(i))
    }

    /// Indices held now (tests).
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.order.len()
    }
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
            let mut order = BucketOrder::new(entries, |i| model.entry_key(m, i));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The order of `n` names, group by group, and the most indices held at once.
    fn walk(n: u64, indices: u64) -> (Vec<u64>, usize) {
        let model = Model::new(3);
        let mut order = BucketOrder::with_window(n, |i| model.implicit_id(i), indices);
        let mut all = Vec::new();
        let mut held = 0;
        for group in 0..BUCKET_GROUPS {
            all.extend(order.of(group));
            held = held.max(order.held());
        }
        (all, held)
    }

    #[test]
    fn windows_give_the_whole_order_in_bounded_memory() {
        let n = 20_000;
        let (whole, held_whole) = walk(n, u64::MAX);
        assert_eq!(held_whole, n as usize);
        // A permutation of 0..n, grouped by bucket and increasing within a group.
        let mut sorted = whole.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..n).collect::<Vec<_>>());
        let model = Model::new(3);
        let group = |i: u64| {
            let name = model.implicit_id(i);
            (inode_index(0, &name), inode_index(1, &name), i)
        };
        assert!(whole.windows(2).all(|w| group(w[0]) < group(w[1])));
        // Windows of ~2,500 indices: 8 windows, the same order, an eighth of it held at most
        // (groups are not all the same size: a few percent more).
        let (windowed, held) = walk(n, 2_500);
        assert_eq!(windowed, whole);
        assert!(held <= 2_800, "held {held}");
    }
}
