//! `Repo::fsck_with_progress`: the progress the check reports as it sweeps the pack from its end
//! down (what `larch fsck`'s progress bar shows), against the pack's length, and the report, the
//! same as without it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_core::CommitInfo;
use larch_store::{FsckOptions, FsckProgress, Repo};

#[test]
fn the_check_reports_its_sweep_down_to_the_whole_pack() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let mut tree = repo.empty_tree();
    let mut parents = Vec::new();
    // 40 commits of 20 values of 4 KiB each: a pack of about 2.6 MB.
    for block in 0..40u32 {
        for key in 0..20u32 {
            let value = format!("block {block} key {key} ").repeat(200).into_bytes();
            tree.add(&["data", &format!("d{}", key % 4), &format!("k{block}-{key}")], value).unwrap();
        }
        let info = CommitInfo::tezos(1_600_000_000 + i64::from(block), format!("block {block}"));
        let hash = repo.commit(&tree, &parents, info).unwrap();
        parents = vec![hash];
        tree = repo.checkout(&hash).unwrap();
    }
    let mut seen: Vec<FsckProgress> = Vec::new();
    let report = repo.fsck_with_progress(&FsckOptions::default(), &mut |progress| seen.push(progress));
    assert!(report.is_clean(), "{report}");
    let pack_bytes = report.stats.pack_bytes;
    assert!(pack_bytes > 2 << 20, "{pack_bytes}");
    // A report every 256 KiB swept (1/512 of the pack, at least 256 KiB), and one at the end.
    assert!(seen.len() >= 8 && seen.len() <= 514, "{} reports", seen.len());
    assert!(seen.iter().all(|p| p.pack_bytes == pack_bytes && p.swept_bytes <= pack_bytes));
    assert!(seen.windows(2).all(|pair| pair[0].swept_bytes <= pair[1].swept_bytes));
    assert_eq!(seen.last().map(|p| p.swept_bytes), Some(pack_bytes));
    assert!(seen[0].swept_bytes < 1 << 10, "the first report is at the pack's end: {:?}", seen[0]);
    // Reporting changes nothing of what the check finds.
    let plain = repo.fsck();
    assert_eq!(plain.problems, report.problems);
    assert_eq!(plain.stats, report.stats);
}
