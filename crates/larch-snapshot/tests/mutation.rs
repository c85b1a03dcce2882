//! Seeded mutation test of the decoder: random edits of a snapshot's record stream, re-framed with
//! valid checksums (so they reach the record decoder, not just the CRC), and random edits of the
//! file itself. No input may panic; whatever still verifies must be the same commit.
//! Replay a failure with `LARCH_SEED=<seed>`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use larch_snapshot::{ExportOptions, SnapshotError};
use larch_store::Repo;
use larch_testkit::rand::Rng;
use larch_testkit::seeded_rng;
use std::collections::BTreeMap;

fn mutate(rng: &mut impl Rng, bytes: &mut Vec<u8>) {
    if bytes.is_empty() {
        bytes.push(rng.random());
        return;
    }
    let at = rng.random_range(0..bytes.len());
    match rng.random_range(0..7) {
        0 => bytes[at] ^= 1 << rng.random_range(0..8),
        1 => bytes[at] = rng.random(),
        2 => bytes.insert(at, rng.random()),
        3 => {
            let end = (at + rng.random_range(1..64)).min(bytes.len());
            bytes.drain(at..end);
        }
        4 => {
            let end = (at + rng.random_range(1..64)).min(bytes.len());
            let copy = bytes[at..end].to_vec();
            let to = rng.random_range(0..bytes.len());
            bytes.splice(to..to, copy);
        }
        5 => bytes.truncate(at),
        _ => {
            // A small integer where a length or reference may be.
            bytes[at] = rng.random_range(0..4);
        }
    }
}

#[test]
fn mutated_snapshots_never_panic_and_never_verify_as_another_commit() {
    let (mut rng, _seed) = seeded_rng("snapshot_mutation", 0x5eed_0012);
    let dir = tempfile::tempdir().unwrap();
    let hashes = build_store_sized(dir.path(), 60);
    let repo = Repo::open_read_only(dir.path()).unwrap();
    let mut kinds: BTreeMap<&'static str, u64> = BTreeMap::new();
    for (index, window) in [(0, 1u32 << 18), (1, 3)] {
        let file = export_bytes(&repo, None, ExportOptions { compression: Some(1), window });
        let (stream, window) = stream(&file);
        for round in 0..1500 {
            let mut mutated = stream.clone();
            for _ in 0..rng.random_range(1..4) {
                mutate(&mut rng, &mut mutated);
            }
            let forged = reframe(&mutated, window);
            match larch_snapshot::verify(&forged[..], &mut |_| {}) {
                Ok(decoded) => {
                    assert_eq!(decoded.commit, hashes[2], "round {index}/{round} verified another commit")
                }
                Err(error) => {
                    let kind = match error {
                        SnapshotError::Invalid { .. } => "invalid",
                        SnapshotError::HashMismatch { .. } => "hash mismatch",
                        SnapshotError::Truncated { .. } => "truncated",
                        SnapshotError::Corrupt { .. } => "corrupt",
                        _ => "other",
                    };
                    *kinds.entry(kind).or_default() += 1;
                }
            }
            // The file itself, mutated: checksums catch everything that changes it.
            let mut raw = file.clone();
            mutate(&mut rng, &mut raw);
            if raw != file {
                assert!(larch_snapshot::verify(&raw[..], &mut |_| {}).is_err(), "round {index}/{round}");
            }
        }
    }
    eprintln!("errors by kind: {kinds:?}");
    // The edits reach every layer of the decoder.
    for kind in ["invalid", "hash mismatch", "truncated"] {
        assert!(kinds.get(kind).copied().unwrap_or(0) > 20, "{kind}: {kinds:?}");
    }
}
