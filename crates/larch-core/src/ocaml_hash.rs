//! OCaml's `Hashtbl.seeded_hash` on a string: the bucket function of Irmin's inode tries.

/// Buckets per inode `Tree` in the Tezos configuration.
pub const INODE_BUCKETS: u32 = 32;

#[inline]
fn mix(mut h: u32, mut w: u32) -> u32 {
    w = w.wrapping_mul(0xcc9e_2d51);
    w = w.rotate_left(15);
    w = w.wrapping_mul(0x1b87_3593);
    h ^= w;
    h = h.rotate_left(13);
    h.wrapping_mul(5).wrapping_add(0xe654_6b64)
}

/// `Hashtbl.seeded_hash seed s` for a string `s`: MurmurHash3-style, 30-bit result (spec §4.2.2).
pub fn ocaml_seeded_hash(seed: u32, s: &[u8]) -> u32 {
    let mut h = seed;
    let mut blocks = s.chunks_exact(4);
    for block in &mut blocks {
        let word = u32::from_le_bytes([block[0], block[1], block[2], block[3]]);
        h = mix(h, word);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        let mut word = 0u32;
        for (i, byte) in tail.iter().enumerate() {
            word |= u32::from(*byte) << (8 * i);
        }
        h = mix(h, word);
    }
    // Truncation to 32 bits is what the OCaml runtime does with the length.
    h ^= s.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h & 0x3fff_ffff
}

/// The bucket (0..32) of `name` in an inode `Tree` at `depth`.
#[inline]
pub fn inode_index(depth: u8, name: &[u8]) -> u8 {
    (ocaml_seeded_hash(u32::from(depth), name) % INODE_BUCKETS) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn irmin_child_ordering_vectors() {
        assert_eq!(inode_index(1, b"a"), 23);
        assert_eq!(inode_index(2, b"b"), 2);
        assert_eq!(inode_index(42, b"foo"), 10);
    }

    #[test]
    fn ocaml_runtime_vectors_v13b() {
        let cases: [(u32, &[u8], u32); 10] = [
            (0, b"", 0),
            (0, b"a", 721_651_713),
            (0, b"contracts", 194_970_128),
            (0, b"index", 399_475_415),
            (1, b"tz1KqTpEZ7Yob7QbPE4Hy4Wo8fHG8LhKxZSx", 883_477_039),
            (3, b"0123", 554_642_943),
            (4, b"01234", 366_557_728),
            (5, b"012345", 232_678_831),
            (6, b"0123456", 905_952_946),
            (9, &[0xff, 0x00, 0x80], 925_669_089),
        ];
        for (seed, name, expected) in cases {
            assert_eq!(ocaml_seeded_hash(seed, name), expected, "seed {seed} name {name:?}");
        }
    }
}
