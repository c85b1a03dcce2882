//! OCaml's `Hashtbl.seeded_hash` on a string: the bucket function of Irmin's inode tries (the
//! implementation is `larch-proof`'s, which a light client embeds; the vectors are checked here).

// One implementation serves the tree and the proof verifier: the no_std `larch-proof` crate's.
pub use larch_proof::hash::{INODE_BUCKETS, inode_index, ocaml_seeded_hash};

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
