//! The generator's model of the chain state and the keys it names. The model holds only counters
//! (accounts, contracts, big maps and their entry counters): each key is a pure function of the seed
//! and an index, and whether a key exists is always read from the context tree itself, so the model
//! stays small, cheap to snapshot (for abandoned contexts and reorganisations) and never has to be
//! exact.

use larch_trace::op::Path;

/// SplitMix64's finaliser: a bijective 64-bit mixer.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `bytes` pseudo-random bytes, as lowercase hex, derived from `(seed, family, index)`.
fn push_hex(out: &mut Vec<u8>, seed: u64, family: u64, index: u64, bytes: usize) {
    let mut state = mix(seed ^ mix(family.wrapping_mul(0x1000_0000_01b3) ^ mix(index)));
    let mut left = bytes;
    while left > 0 {
        state = mix(state);
        for byte in state.to_le_bytes().iter().take(left.min(8)) {
            out.push(HEX[usize::from(byte >> 4)]);
            out.push(HEX[usize::from(byte & 15)]);
        }
        left = left.saturating_sub(8);
    }
}

/// Key families (the `family` of [`push_hex`]).
const IMPLICIT: u64 = 1;
const ORIGINATED: u64 = 2;
const MAP_ENTRY: u64 = 3;

/// Path-building helpers and the state counters.
#[derive(Clone, Debug)]
pub(crate) struct Model {
    seed: u64,
    /// Implicit account indices allocated so far (`0..implicit`).
    pub(crate) implicit: u64,
    /// Originated contracts (`0..originated`).
    pub(crate) originated: u64,
    /// Number of delegates (implicit accounts `k * 50`).
    pub(crate) delegates: u64,
    /// Big maps: per map id, the key family of its entries and the next entry index.
    pub(crate) maps: Vec<MapInfo>,
    /// Maps created at setup (only later copies are ever removed whole).
    pub(crate) setup_maps: u64,
}

/// What the model knows of one big map.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MapInfo {
    /// Entry keys are `entry_key(family, i)`; a copy shares its source's family.
    pub(crate) family: u64,
    /// Entries `0..next` may exist.
    pub(crate) next: u64,
}

/// `data` followed by `steps`.
pub(crate) fn data(steps: &[&[u8]]) -> Path {
    // Each step's length takes a byte below 128 bytes; a longer one grows the path once.
    let bytes = 5 + steps.iter().map(|step| step.len() + 1).sum::<usize>();
    let mut path = Path::with_capacity(bytes);
    path.push(b"data");
    for step in steps {
        path.push(step);
    }
    path
}

/// `path` extended with `step`.
pub(crate) fn child(path: &Path, step: &[u8]) -> Path {
    path.child(step)
}

/// Decimal bytes of `n`.
pub(crate) fn dec(n: u64) -> Vec<u8> {
    n.to_string().into_bytes()
}

impl Model {
    /// An empty model for `seed`.
    pub(crate) fn new(seed: u64) -> Model {
        Model { seed, implicit: 0, originated: 0, delegates: 0, maps: Vec::new(), setup_maps: 0 }
    }

    /// The 44-hex contract id of implicit account `i` (tag 00, ed25519 tag 00, 20-byte hash).
    pub(crate) fn implicit_id(&self, i: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(44);
        out.extend_from_slice(b"0000");
        push_hex(&mut out, self.seed, IMPLICIT, i, 20);
        out
    }

    /// The 42-hex public key hash of implicit account `i` (as delegates are indexed).
    pub(crate) fn pkh(&self, i: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(42);
        out.extend_from_slice(b"00");
        push_hex(&mut out, self.seed, IMPLICIT, i, 20);
        out
    }

    /// The 44-hex contract id of originated contract `j` (tag 01, 20-byte hash, padding 00).
    pub(crate) fn originated_id(&self, j: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(44);
        out.extend_from_slice(b"01");
        push_hex(&mut out, self.seed, ORIGINATED, j, 20);
        out.extend_from_slice(b"00");
        out
    }

    /// `data/contracts/index/<implicit i>`.
    pub(crate) fn implicit_path(&self, i: u64) -> Path {
        data(&[b"contracts", b"index", &self.implicit_id(i)])
    }

    /// `data/contracts/index/<originated j>`.
    pub(crate) fn originated_path(&self, j: u64) -> Path {
        data(&[b"contracts", b"index", &self.originated_id(j)])
    }

    /// Implicit account index of delegate `k`.
    pub(crate) fn delegate_account(k: u64) -> u64 {
        k * super::params::DELEGATE_STRIDE
    }

    /// `data/staking/current/<pkh of delegate k>`.
    pub(crate) fn stake_path(&self, k: u64) -> Path {
        data(&[b"staking", b"current", &self.pkh(Model::delegate_account(k))])
    }

    /// `data/big_maps/index/<m>`.
    pub(crate) fn map_path(m: u64) -> Path {
        data(&[b"big_maps", b"index", &dec(m)])
    }

    /// `data/big_maps/index/<m>/contents/<64 hex>` for entry `i` of map `m`.
    pub(crate) fn entry_path(&self, m: u64, i: u64) -> Path {
        data(&[b"big_maps", b"index", &dec(m), b"contents", &self.entry_key(m, i)])
    }

    /// The 64-hex key of entry `i` of map `m` (the last step of [`Model::entry_path`]).
    pub(crate) fn entry_key(&self, m: u64, i: u64) -> Vec<u8> {
        let family = self.maps.get(m as usize).map_or(m, |info| info.family);
        let mut key = Vec::with_capacity(64);
        push_hex(&mut key, self.seed, MAP_ENTRY.wrapping_add(family << 8), i, 32);
        key
    }

    /// `data/cycle/<c>`.
    pub(crate) fn cycle_path(c: u64) -> Path {
        data(&[b"cycle", &dec(c)])
    }

    /// Adds a big map with `entries` entries of its own family; returns its id.
    pub(crate) fn new_map(&mut self, entries: u64) -> u64 {
        let id = self.maps.len() as u64;
        self.maps.push(MapInfo { family: id, next: entries });
        id
    }

    /// Adds a big map copied from `source`; returns its id.
    pub(crate) fn copy_map(&mut self, source: u64) -> u64 {
        let id = self.maps.len() as u64;
        let info = self.maps.get(source as usize).copied().unwrap_or(MapInfo { family: id, next: 0 });
        self.maps.push(info);
        id
    }

    /// Allocates a fresh entry index in map `m`.
    pub(crate) fn fresh_entry(&mut self, m: u64) -> u64 {
        match self.maps.get_mut(m as usize) {
            Some(info) => {
                info.next += 1;
                info.next - 1
            }
            None => 0,
        }
    }

    /// Entry indices `0..n` of map `m` may exist.
    pub(crate) fn map_entries(&self, m: u64) -> u64 {
        self.maps.get(m as usize).map_or(0, |info| info.next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_tezos_shapes() {
        let model = Model::new(9);
        let id = model.implicit_id(5);
        assert_eq!(id.len(), 44);
        assert!(id.starts_with(b"0000"));
        assert_eq!(model.pkh(5).len(), 42);
        assert_eq!(&model.pkh(5)[2..], &id[4..]);
        let o = model.originated_id(5);
        assert_eq!(o.len(), 44);
        assert!(o.starts_with(b"01") && o.ends_with(b"00"));
        assert_ne!(model.implicit_id(5), model.implicit_id(6));
        assert_ne!(Model::new(10).implicit_id(5), id);
        assert!(id.iter().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    }

    #[test]
    fn copies_share_entry_keys() {
        let mut model = Model::new(1);
        let a = model.new_map(10);
        let b = model.copy_map(a);
        assert_eq!(model.entry_path(a, 3).last(), model.entry_path(b, 3).last());
        assert_eq!(model.map_entries(b), 10);
        assert_eq!(model.fresh_entry(b), 10);
        assert_eq!(model.map_entries(a), 10);
        assert_eq!(model.entry_path(a, 3).steps()[..4], Model::map_path(a).steps()[..]);
    }
}
