//! The replica manifest's decoder under the structured mutation fuzzer (`docs/fuzzing.md`):
//! mutated manifests, with their length field and digest recomputed half the time so that the
//! mutations reach the fields behind the checksum, never panic, never allocate more than their
//! size justifies, and a manifest that decodes encodes back to the same bytes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_core::Hash;
use larch_remote::manifest::{Manifest, Piece, PiecedFile};
use larch_remote::sums::digest;
use larch_testkit::fuzz::{PeakAlloc, largest_allocation, mutated};
use larch_testkit::seeded_rng;
use rand::Rng;

#[global_allocator]
static ALLOC: PeakAlloc = PeakAlloc;

fn seeds() -> Vec<Vec<u8>> {
    let pieces = |len: u64, cut: u64| {
        vec![Piece { from: 0, to: cut, generation: 3 }, Piece { from: cut, to: len, generation: 9 }]
    };
    let manifest = Manifest {
        generation: 9,
        published_ms: 1_800_000_000_000,
        store: [7; 16],
        store_generation: 120,
        lineage: 0,
        pack_end: 90_000,
        index_end: 16 + 44 * 10,
        first_chunk: 2,
        head_chunk: 5,
        head: Some(Hash([0x42; 32])),
        slot: (0..150u8).collect(),
        confirm: [1; 20],
        files: vec![
            PiecedFile { name: "commits".into(), len: 456, pieces: pieces(456, 236) },
            PiecedFile { name: "chunk.000005".into(), len: 9000, pieces: pieces(9000, 4000) },
            PiecedFile { name: "seg.000001".into(), len: 300, pieces: pieces(300, 1) },
        ],
    };
    let empty =
        Manifest { files: vec![manifest.files[0].clone()], head: None, slot: Vec::new(), ..manifest.clone() };
    vec![manifest.encode(), empty.encode()]
}

/// Sets the length field and the digest to match the bytes.
fn reseal(bytes: &mut [u8]) {
    if bytes.len() < 48 {
        return;
    }
    let body = bytes.len() - 32;
    let len = bytes.len() as u32;
    bytes[12..16].copy_from_slice(&len.to_le_bytes());
    let sum = digest(&bytes[..body]);
    bytes[body..].copy_from_slice(&sum);
}

#[test]
fn mutated_manifests_are_refused_or_decoded_without_panics_or_large_allocations() {
    let seeds = seeds();
    let (mut rng, _) = seeded_rng("fuzz_manifest", 0x3a11_f357);
    let (mut decoded, mut refused) = (0, 0);
    for _ in 0..20_000 {
        let mut input = mutated(&mut rng, &seeds);
        if rng.random_bool(0.5) {
            reseal(&mut input);
        }
        let (result, peak) = largest_allocation(|| Manifest::decode(&input));
        assert!(peak <= 4096 + 64 * input.len(), "{peak} bytes allocated for {}", hex::encode(&input));
        match result {
            Ok(manifest) => {
                decoded += 1;
                assert_eq!(manifest.encode(), input, "decoded bytes encode back");
            }
            Err(_) => refused += 1,
        }
    }
    println!("fuzz_manifest: {decoded} decoded, {refused} refused");
    assert!(decoded > 0 && refused > 0);
}
