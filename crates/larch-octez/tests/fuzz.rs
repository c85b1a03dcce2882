//! The structured mutation fuzzer (`docs/fuzzing.md`) on the Octez decoders: `block_data` and
//! whole snapshot archives. Every input gives a result or a typed error, never a panic, and no
//! allocation larger than the input justifies. Seeded: `LARCH_SEED` replays a run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use larch_testkit::fuzz::{PeakAlloc, largest_allocation, mutated};
use larch_testkit::seed::seeded_rng;

#[global_allocator]
static ALLOC: PeakAlloc = PeakAlloc;

const HEAD_HEX: &str = "ec3e6d7374d6b3f5dad65526930cdd871af1685bcbe79753a6bbe53b59696269";

fn head() -> [u8; 32] {
    larch_core::Hash::from_hex(HEAD_HEX).unwrap().0
}

#[test]
fn mutated_block_data_decodes_or_fails_typed() {
    let (mut rng, seed) = seeded_rng("fuzz block_data", 0xb10c_da7a);
    let corpus = vec![common::block_data(head()).0, common::block_data([0; 32]).0];
    let (mut ok, mut errors) = (0, 0);
    for round in 0..5000 {
        let input = mutated(&mut rng, &corpus);
        let (result, peak) = largest_allocation(|| larch_octez::block_data::decode(&input));
        assert!(peak <= 4096 + 64 * input.len(), "seed {seed} round {round}: {peak} bytes allocated");
        match result {
            Ok(_) => ok += 1,
            Err(error) => {
                errors += 1;
                assert!(error.to_string().contains("block_data"), "seed {seed} round {round}: {error}");
            }
        }
    }
    eprintln!("seed {seed}: {ok} decoded, {errors} typed errors");
    assert!(errors > 1000);
}

#[test]
fn mutated_archives_read_or_fail_typed() {
    let (mut rng, seed) = seeded_rng("fuzz octez archive", 0x0c7e_7a25);
    // A small context (two files) keeps each run short; the reader does not look inside them.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("index")).unwrap();
    std::fs::write(dir.path().join("store.control"), b"00000005 and the rest").unwrap();
    std::fs::write(dir.path().join("index/log"), [0u8; 77]).unwrap();
    let members = common::members(dir.path(), head());
    let corpus = vec![common::tar(&members)];
    let (mut ok, mut errors) = (0, 0);
    for round in 0..400 {
        let input = mutated(&mut rng, &corpus);
        let out = tempfile::tempdir().unwrap();
        let (result, peak) = largest_allocation(|| larch_octez::read_archive(input.as_slice(), out.path()));
        // The reader's own buffers: 1 MiB of input buffering, 1 MiB for writing a file.
        assert!(peak <= (3 << 20) + 64 * input.len(), "seed {seed} round {round}: {peak} bytes allocated");
        match result {
            Ok(_) => ok += 1,
            Err(error) => {
                errors += 1;
                assert!(!error.to_string().is_empty());
            }
        }
    }
    eprintln!("seed {seed}: {ok} read, {errors} typed errors");
    assert!(errors > 100);
}
