//! The replayer on the persistent pack store: a generated trace replays with every hash checked, the
//! store's counters reach the summary, and the store is fsck-clean afterwards.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_bench::replay::{ReplayOptions, RunMeta, replay};
use larch_bench::{GenParams, Generator};
use larch_store::Repo;

#[test]
fn a_generated_trace_replays_into_the_pack_store_with_hashes_checked() {
    let params = GenParams { blocks: 12, accounts: 300, ops_per_block: 60, ..GenParams::default() };
    let (ops, report) = Generator::new(params).unwrap().collect().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let summary = replay(
        &mut repo,
        ops.into_iter().map(Ok::<_, std::convert::Infallible>),
        &ReplayOptions::default(),
        &RunMeta::default(),
        None,
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(summary.blocks, report.blocks);
    assert_eq!(summary.commits_checked, report.blocks);
    assert!(summary.store_size_bytes.unwrap() > 0);
    assert!(summary.objects_written.unwrap() > 0);
    assert_eq!(repo.head(), Some(report.final_commit));
    repo.close().unwrap();
    assert!(larch_store::fsck(dir.path()).unwrap().is_clean());
}
