//! The GC's live set as runs of contiguous records (docs/gc-design.md §4): a store whose region is
//! almost wholly live (one large setup block, then small blocks elsewhere in the tree) yields a
//! live set of few runs, whose heap is a small fraction of a list of its records, and the GC
//! copies exactly the live records such a list holds: its copied bytes and records equal the sums
//! over the records listed (read back from the runs' framing and checked against the mark's own
//! count), every kept commit reads the same after it, and fsck is clean.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{contents_of, info};
use larch_core::Hash;
use larch_store::{GcPolicy, INLINE_MAX, Repo, RepoOptions};

#[test]
fn a_contiguous_live_region_is_few_runs_and_collects_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let options = RepoOptions { chunk_bytes: 64 << 10, ..RepoOptions::default() };
    let mut repo = Repo::open_with(dir.path(), options).unwrap();
    repo.set_gc_policy(GcPolicy { keep_in_place_percent: 0, slice_percent: 0, ..GcPolicy::default() });
    let mut tree = repo.empty_tree();
    let mut commits: Vec<Hash> = Vec::new();
    // The setup: many values (one commit, so one chunk), all still live at the GC commit.
    for i in 0..20_000 {
        let path =
            vec![b"cold".to_vec(), format!("k{:03}", i % 211).into_bytes(), format!("v{i}").into_bytes()];
        tree.add(&path, format!("cold value {i} {}", "c".repeat(INLINE_MAX + i % 70)).into_bytes()).unwrap();
    }
    commits.push(repo.commit(&tree, &[], info(0)).unwrap());
    // Small blocks elsewhere: their old versions are the region's garbage.
    for n in 1..40u64 {
        for j in 0..5 {
            let path = vec![b"hot".to_vec(), format!("h{}", (n * 5 + j) % 23).into_bytes()];
            tree.add(&path, format!("hot {n} {j} {}", "h".repeat(80)).into_bytes()).unwrap();
        }
        commits.push(repo.commit(&tree, &[*commits.last().unwrap()], info(n)).unwrap());
        tree = repo.checkout(commits.last().unwrap()).unwrap();
    }
    let keep = commits[30];
    let keep_from = *repo.commit_offsets().find(|(hash, _)| **hash == keep).unwrap().1;
    // The GC's region ends at the start of the chunk holding the GC commit.
    let mut chunk_starts: Vec<u64> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.file_name().unwrap().to_string_lossy().starts_with("chunk."))
        .map(|path| {
            let bytes = std::fs::read(path).unwrap();
            u64::from_le_bytes(bytes[24..32].try_into().unwrap())
        })
        .collect();
    chunk_starts.sort_unstable();
    let region_end = *chunk_starts.iter().filter(|start| **start <= keep_from).max().unwrap();
    assert!(region_end > 16, "the setup's chunk lies below the GC commit's chunk");

    let mark = repo.gc_mark(&keep, region_end, None).unwrap();
    let records = mark.live.len();
    assert!(records > 20_000, "{records} live records");
    assert_eq!(mark.runs.record_count(), records as u64);
    assert_eq!(mark.runs.bytes(), mark.live_bytes);
    assert_eq!(mark.live.iter().map(|(_, len)| u64::from(*len)).sum::<u64>(), mark.live_bytes);
    let runs = mark.runs.run_count();
    let list_bytes = records * std::mem::size_of::<(u64, u32)>();
    eprintln!(
        "{records} live records, {} bytes, in {runs} runs: {} heap bytes, a list of records {list_bytes}",
        mark.live_bytes,
        mark.heap_bytes()
    );
    assert!(runs * 50 < records, "{runs} runs for {records} records");
    assert!(mark.heap_bytes() * 20 < list_bytes, "{} heap bytes", mark.heap_bytes());

    let before: Vec<_> =
        commits[30..].iter().map(|hash| contents_of(&repo.checkout(hash).unwrap())).collect();
    let report = repo.gc(&keep).unwrap();
    assert!(report.complete);
    assert_eq!(report.copied_bytes, mark.live_bytes, "the GC copies the records the list holds");
    assert_eq!(report.live_records, records as u64);
    let after: Vec<_> = commits[30..].iter().map(|hash| contents_of(&repo.checkout(hash).unwrap())).collect();
    assert_eq!(before, after);
    let fsck = repo.fsck();
    assert!(fsck.is_clean(), "{fsck}");
    drop(repo);
    let repo = Repo::open_read_only(dir.path()).unwrap();
    assert!(repo.fsck().is_clean());
    let reopened: Vec<_> =
        commits[30..].iter().map(|hash| contents_of(&repo.checkout(hash).unwrap())).collect();
    assert_eq!(before, reopened);
}
