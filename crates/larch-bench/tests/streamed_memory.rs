//! A streamed setup holds each part's tree once: the generator reads and hashes the replay's
//! tree of its context instead of applying the setup's operations to a tree of its own. Measured
//! with a counting allocator (this file's only test, so that no other test allocates meanwhile):
//! the setup's peak heap with the replay's tree shared against the same run where the generator
//! keeps its own tree (its context callback answering `None`), with the same operations and
//! commits as the in-memory generator.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_bench::replay::{ReplayError, ReplayOptions, Replayer};
use larch_bench::{GenError, GenParams, Generator};
use larch_core::Hash;
use larch_store::{Repo, RepoOptions};
use larch_trace::op::Op;
use std::cell::RefCell;
use std::hash::{DefaultHasher, Hasher};
use std::sync::atomic::Ordering;

#[path = "common/counting.rs"]
mod counting;
use counting::{LIVE, PEAK};

/// A setup in parts of about 8,000 accounts, no regular block.
fn params() -> GenParams {
    GenParams {
        seed: 5,
        blocks: 0,
        accounts: 40_000,
        largest_map: Some(20_000),
        delegates: Some(50),
        setup_part_ops: 40_000,
        setup_part_items: 0,
        ..GenParams::default()
    }
}

/// Digest of an operation, folded into `digest` (the operations are not kept: they would
/// count in the peak).
fn fold(digest: &mut DefaultHasher, op: &Op) {
    digest.write(format!("{op:?}").as_bytes());
}

/// Streams the setup into a new store with a 1 MiB cache, sharing the replay's tree with the
/// generator when `share`; returns the peak heap above the start, the commits and the digest of
/// the operations.
fn streamed_setup(share: bool) -> (usize, Vec<Hash>, u64) {
    let dir = tempfile::tempdir().unwrap();
    let options = RepoOptions { cache_bytes: 1 << 20, ..RepoOptions::default() };
    let mut repo = Repo::open_with(dir.path(), options).unwrap();
    let mut commits = Vec::new();
    let mut digest = DefaultHasher::new();
    let start = LIVE.load(Ordering::Relaxed);
    PEAK.store(start, Ordering::Relaxed);
    {
        let replayer = RefCell::new(Replayer::new(&mut repo, ReplayOptions::default()));
        Generator::new(params())
            .unwrap()
            .run_streamed(
                &mut |op| {
                    fold(&mut digest, &op);
                    if let Op::Commit { hash, .. } = &op {
                        commits.push(hash.value());
                    }
                    replayer.borrow_mut().apply(op).map(|_| ())
                },
                &mut |_, _| {
                    let mut replayer = replayer.borrow_mut();
                    let real = replayer
                        .last_commit()
                        .ok_or_else(|| ReplayError::Generator(Box::new(GenError::Internal("no commit"))))?;
                    replayer.checkout_tree(&real).map(Some)
                },
                &mut |id| Ok::<_, ReplayError>(if share { replayer.borrow().context_tree(id) } else { None }),
                &mut |_, _| {},
            )
            .unwrap();
    }
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(start);
    repo.close().unwrap();
    (peak, commits, digest.finish())
}

#[test]
fn a_streamed_setup_holds_each_parts_tree_once() {
    let (ops, report) = Generator::new(params()).unwrap().collect().unwrap();
    assert!(report.setup_blocks >= 5, "{} setup parts", report.setup_blocks);
    let mut digest = DefaultHasher::new();
    let mut commits = Vec::new();
    for op in &ops {
        fold(&mut digest, op);
        if let Op::Commit { hash, .. } = op {
            commits.push(hash.value());
        }
    }
    drop(ops);
    let (own_peak, own_commits, own_digest) = streamed_setup(false);
    let (shared_peak, shared_commits, shared_digest) = streamed_setup(true);
    println!(
        "setup's peak heap: generator's own tree {own_peak} bytes, the replay's shared {shared_peak} bytes"
    );
    // The same operations and commits, whichever tree the generator reads.
    assert_eq!(own_commits, commits);
    assert_eq!(shared_commits, commits);
    assert_eq!(own_digest, digest.finish());
    assert_eq!(shared_digest, own_digest);
    // A part's tree held once instead of twice: the peak falls by more than a quarter (by 35%
    // when this test was written; the rest is the replay's part, the commit's encoding and the
    // generator's model).
    assert!(
        shared_peak * 4 < own_peak * 3,
        "peak heap {shared_peak} bytes shared against {own_peak} with the generator's own tree"
    );
}
