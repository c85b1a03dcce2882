//! The mark phase of garbage collection (issue 10, docs/gc-design.md §4) against an independent
//! brute force: stores built by the ordinary writer from seeded random workloads (small trees,
//! inode tries, long values in contents records, many small rewrites so that patches and patch
//! chains appear, abandoned branches before and after the GC commit); for a chosen GC commit `K`
//! and region end, the live set `Repo::gc_mark` computes must equal the records reached by
//! checking out every kept commit (record offset ≥ `K`) and walking its whole tree through the
//! public API, plus the bases of every reached patch (and their bases), found by reading the pack
//! file's bytes with a parser written here.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{info, leb, random_op, reached_offsets};
use larch_core::{Entry, Hash, NodeRef, Tree};
use larch_store::INLINE_MAX;
use larch_store::{Repo, StoreError};
use larch_testkit::{Model, TestRng, seeded_rng};
use rand::Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The record at `offset` of the raw pack: its length with framing, and its base if a patch
/// (kinds 6 and 7 start their body with the base pointer: a 32-byte hash and `back`).
fn parse_record(pack: &[u8], offset: u64) -> (u64, Option<u64>) {
    let at = offset as usize;
    let kind = pack[at];
    let (body_len, len_len) = leb(pack, at + 1);
    let total = 1 + len_len as u64 + body_len + 4;
    let base = matches!(kind, 6 | 7).then(|| {
        let (back, _) = leb(pack, at + 1 + len_len + 32);
        offset - back
    });
    (total, base)
}

/// The pack's bytes indexed by global offset, assembled from the chunk files (each a 32-byte
/// header: magic, version, reserved, seq, start; then the records of [start, next start)).
fn pack_image(dir: &Path) -> Vec<u8> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.starts_with("chunk."))
        .collect();
    names.sort();
    let mut image = vec![0u8; 16];
    for name in names {
        let bytes = std::fs::read(dir.join(&name)).unwrap();
        let start = u64::from_le_bytes(bytes[24..32].try_into().unwrap()) as usize;
        assert_eq!(start, image.len(), "{name} continues the previous chunk");
        image.extend_from_slice(&bytes[32..]);
    }
    image
}

/// The brute-force live set of `[16, region_end)`: offset → (length, reached as a base only).
fn brute_force(repo: &Repo, dir: &Path, kept: (u64, u64), region_end: u64) -> BTreeMap<u64, (u64, bool)> {
    let kept: Vec<Hash> = repo
        .commit_offsets()
        .filter(|(_, offset)| (kept.0..=kept.1).contains(*offset))
        .map(|(h, _)| *h)
        .collect();
    let mut reached = BTreeSet::new();
    for commit in &kept {
        reached_offsets(&repo.checkout(commit).unwrap(), &mut reached);
    }
    let pack = pack_image(dir);
    let mut bases = BTreeSet::new();
    for &offset in &reached {
        let mut at = offset;
        while let (_, Some(base)) = parse_record(&pack, at) {
            if !bases.insert(base) {
                break;
            }
            at = base;
        }
    }
    reached
        .iter()
        .map(|offset| (*offset, false))
        .chain(bases.iter().filter(|base| !reached.contains(base)).map(|base| (*base, true)))
        .filter(|(offset, _)| *offset < region_end)
        .map(|(offset, base_only)| (offset, (parse_record(&pack, offset).0, base_only)))
        .collect()
}

/// Rewrites one or two values in each of a few 12–40-entry directories: most rewritten nodes
/// become patches of their previous version, and chains form.
fn small_rewrites(rng: &mut TestRng, tree: &mut Tree, model: &mut Model) {
    for dir in 0..rng.random_range(1..4u32) {
        for _ in 0..rng.random_range(1..3) {
            let path = vec![
                b"hot".to_vec(),
                format!("d{dir}").into_bytes(),
                format!("k{:02}", rng.random_range(0..(12 + 10 * dir))).into_bytes(),
            ];
            let value =
                format!("v{}-{}", rng.random::<u32>(), "x".repeat(rng.random_range(0..2 * INLINE_MAX)))
                    .into_bytes();
            tree.add(&path, value.clone()).unwrap();
            model.add(&path, value);
        }
    }
}

/// A store of `blocks` commits on `main`, with an abandoned branch every few blocks (a commit on
/// an older block's tree, with unique values, that `main` does not continue); returns the main
/// commits and the abandoned ones, in order.
fn build_store(rng: &mut TestRng, dir: &Path, blocks: u64) -> (Vec<Hash>, Vec<Hash>) {
    let mut repo = Repo::open(dir).unwrap();
    let mut tree = repo.empty_tree();
    let mut model = Model::new();
    let mut main = Vec::new();
    let mut abandoned = Vec::new();
    for n in 0..blocks {
        for _ in 0..rng.random_range(1..12) {
            random_op(rng, &mut tree, &mut model);
        }
        small_rewrites(rng, &mut tree, &mut model);
        let parents: Vec<Hash> = main.last().copied().into_iter().collect();
        let commit = repo.commit(&tree, &parents, info(n)).unwrap();
        main.push(commit);
        if n % 5 == 3 {
            // Branch off an older block with unique long values, then leave the branch.
            let from = main[rng.random_range(0..main.len())];
            let mut side = repo.checkout(&from).unwrap();
            for i in 0..rng.random_range(1..6) {
                let value = format!("abandoned {n} {i} {}", "y".repeat(INLINE_MAX)).into_bytes();
                side.add(&["side", &format!("s{i}")], value).unwrap();
            }
            small_rewrites(rng, &mut side, &mut Model::new());
            abandoned.push(repo.commit(&side, &[from], info(n)).unwrap());
        }
        // Reopen now and then: the writer's cache then forgets, and later commits point to older
        // records again.
        if n % 17 == 16 {
            repo.close().unwrap();
            repo = Repo::open(dir).unwrap();
            tree = repo.checkout(&commit).unwrap();
        }
    }
    repo.close().unwrap();
    (main, abandoned)
}

fn offset_of(repo: &Repo, commit: &Hash) -> u64 {
    *repo.commit_offsets().find(|(hash, _)| *hash == commit).unwrap().1
}

#[test]
fn the_live_set_equals_a_brute_force_reachability() {
    let (mut rng, _seed) = seeded_rng("the_live_set_equals_a_brute_force_reachability", 0x6c61_7263_6d61);
    let (mut live_total, mut dead_total, mut base_only_total) = (0u64, 0u64, 0u64);
    for store in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let blocks = rng.random_range(25..60);
        let (main, abandoned) = build_store(&mut rng, dir.path(), blocks);
        let repo = Repo::open_read_only(dir.path()).unwrap();
        let pack_end = repo.stats().pack_bytes;
        let mut commits: Vec<(u64, Hash)> = repo.commit_offsets().map(|(h, o)| (*o, *h)).collect();
        commits.sort();
        for trial in 0..6 {
            // K: any commit (main or abandoned, first and last included); region end: K, or
            // anywhere below it, a record boundary or not.
            let (keep_from, commit) = match trial {
                0 => commits[0],
                1 => commits[commits.len() - 1],
                _ => commits[rng.random_range(0..commits.len())],
            };
            let region_end = match trial % 3 {
                0 => keep_from,
                1 => rng.random_range(16..=keep_from),
                _ => 16 + (keep_from - 16) / 2,
            };
            // The roots: up to the head, or (odd trials) up to a later commit, as a GC started
            // when that commit was the head would see them.
            let later: Vec<&(u64, Hash)> =
                commits.iter().filter(|(offset, _)| *offset >= keep_from).collect();
            let (until_offset, until) = if trial % 2 == 1 {
                let (offset, hash) = later[rng.random_range(0..later.len())];
                (*offset, Some(*hash))
            } else {
                (u64::MAX, None)
            };
            let mark = repo.gc_mark(&commit, region_end, until.as_ref()).unwrap();
            let expected = brute_force(&repo, dir.path(), (keep_from, until_offset), region_end);
            let got: BTreeMap<u64, (u64, bool)> = mark
                .live
                .iter()
                .map(|(offset, len)| {
                    (*offset, (u64::from(*len), mark.base_only.binary_search(offset).is_ok()))
                })
                .collect();
            if got != expected {
                let extra: Vec<_> = got.iter().filter(|(o, v)| expected.get(o) != Some(v)).take(10).collect();
                let missing: Vec<_> =
                    expected.iter().filter(|(o, v)| got.get(o) != Some(v)).take(10).collect();
                panic!(
                    "store {store} trial {trial}: K {keep_from}, region end {region_end}: \
                     {} live, {} expected; wrong or extra {extra:?}; missing or different {missing:?}",
                    got.len(),
                    expected.len()
                );
            }
            assert_eq!(mark.live_bytes, expected.values().map(|(len, _)| len).sum::<u64>());
            if until.is_none() {
                assert_eq!(mark.window_bytes, pack_end - keep_from);
            }
            assert!(mark.live.windows(2).all(|pair| pair[0].0 + u64::from(pair[0].1) <= pair[1].0));
            live_total += mark.live_bytes;
            dead_total += region_end.saturating_sub(16).saturating_sub(mark.live_bytes);
            base_only_total += mark.base_only_bytes;
        }
        assert!(!main.is_empty() && !abandoned.is_empty());
    }
    // The workloads exercised every case: live and dead records in regions, and base-only ones.
    assert!(
        live_total > 0 && dead_total > 0 && base_only_total > 0,
        "{live_total} {dead_total} {base_only_total}"
    );
}

/// The offset of the directory record at `path` in `commit`'s tree.
fn dir_offset(repo: &Repo, commit: &Hash, path: &[&str]) -> u64 {
    match repo.checkout(commit).unwrap().find_tree(path).unwrap().unwrap().root() {
        Entry::Node(NodeRef::Stored { key, .. }) => key.offset(),
        other => panic!("not a stored directory: {other:?}"),
    }
}

#[test]
fn abandoned_branches_before_the_gc_commit_are_dropped_and_after_it_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let mut tree = repo.empty_tree();
    for i in 0..20 {
        tree.add(&["data", &format!("k{i}")], format!("value {i} {}", "z".repeat(INLINE_MAX)).into_bytes())
            .unwrap();
    }
    tree.add(
        &["old", "x"],
        format!("old value, a record of its own {}", "o".repeat(INLINE_MAX)).into_bytes(),
    )
    .unwrap();
    let c0 = repo.commit(&tree, &[], info(0)).unwrap();
    // Before K: a branch with a unique subtree, abandoned.
    let mut side = repo.checkout(&c0).unwrap();
    side.add(&["gone", "y"], b"only on the abandoned branch before the GC commit".to_vec()).unwrap();
    let before = repo.commit(&side, &[c0], info(1)).unwrap();
    // Main drops `old`, then K.
    tree.remove(&["old"]).unwrap();
    tree.add(&["data", "k1"], b"changed".to_vec()).unwrap();
    let c1 = repo.commit(&tree, &[c0], info(1)).unwrap();
    tree.add(&["data", "k2"], b"changed".to_vec()).unwrap();
    let k = repo.commit(&tree, &[c1], info(2)).unwrap();
    // After K: a branch from c0 (still holding `old`), abandoned.
    let mut late = repo.checkout(&c0).unwrap();
    late.add(&["late"], b"l".to_vec()).unwrap();
    repo.commit(&late, &[c0], info(3)).unwrap();
    tree.add(&["data", "k3"], b"changed".to_vec()).unwrap();
    repo.commit(&tree, &[k], info(3)).unwrap();
    repo.close().unwrap();

    let repo = Repo::open_read_only(dir.path()).unwrap();
    let keep_from = offset_of(&repo, &k);
    let mark = repo.gc_mark(&k, keep_from, None).unwrap();
    let old = dir_offset(&repo, &c0, &["old"]);
    let gone = dir_offset(&repo, &before, &["gone"]);
    assert!(old < keep_from && gone < keep_from);
    assert!(mark.is_live(old), "`old` is reached by the branch committed after K");
    assert!(!mark.is_live(gone), "`gone` is reached only by a branch abandoned before K");
    assert!(!mark.is_live(offset_of(&repo, &c0)), "commit records in the region are never live");
    assert!(mark.is_live(dir_offset(&repo, &k, &["data"])) || dir_offset(&repo, &k, &["data"]) >= keep_from);
}

#[test]
fn refusals() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let mut tree = repo.empty_tree();
    tree.add(&["a"], b"1".to_vec()).unwrap();
    let c0 = repo.commit(&tree, &[], info(0)).unwrap();
    tree.add(&["a"], b"2".to_vec()).unwrap();
    let c1 = repo.commit(&tree, &[c0], info(1)).unwrap();
    let k = offset_of(&repo, &c1);
    assert!(matches!(repo.gc_mark(&Hash([7; 32]), 16, None), Err(StoreError::GcRefused(_))));
    assert!(matches!(repo.gc_mark(&c1, k + 1, None), Err(StoreError::GcRefused(_))));
    assert!(matches!(repo.gc_mark(&c1, 15, None), Err(StoreError::GcRefused(_))));
    let mark = repo.gc_mark(&c1, k, None).unwrap();
    // A commit's own records precede its commit record: c1's root directory (holding an inline
    // value) is the one live record below K; c0's tree and commit are not.
    let root = match repo.checkout(&c1).unwrap().root() {
        Entry::Node(NodeRef::Stored { key, .. }) => key.offset(),
        other => panic!("{other:?}"),
    };
    assert_eq!(mark.live.iter().map(|(offset, _)| *offset).collect::<Vec<_>>(), vec![root]);
    assert!(root < k);
}

/// A damaged byte anywhere in the pack makes the mark fail with a typed error naming the pack (or
/// succeed, when the byte lies in a record the mark does not read), never panic.
#[test]
fn damaged_records_give_typed_errors() {
    let (mut rng, _seed) = seeded_rng("damaged_records_give_typed_errors", 0xdead);
    let dir = tempfile::tempdir().unwrap();
    let (main, _) = build_store(&mut rng, dir.path(), 12);
    // The test stores fit in one chunk: file position = global offset + 16 (its 32-byte header).
    let pack_path = dir.path().join("chunk.000000");
    let good = std::fs::read(&pack_path).unwrap();
    assert!(!dir.path().join("chunk.000001").exists(), "the test store should fit in one chunk");
    let keep = main[main.len() / 2];
    let (mut failed, mut passed) = (0, 0);
    for position in (32..good.len()).step_by(31) {
        let mut bad = good.clone();
        bad[position] ^= 1 << rng.random_range(0..8);
        std::fs::write(&pack_path, &bad).unwrap();
        let repo = Repo::open_read_only(dir.path()).unwrap();
        let keep_from = offset_of(&repo, &keep);
        match repo.gc_mark(&keep, keep_from / 2 + 8, None) {
            Ok(_) => passed += 1,
            Err(StoreError::Corrupt { file: larch_store::FileKind::Pack, .. }) => failed += 1,
            Err(other) => panic!("byte {position}: untyped or unexpected error {other}"),
        }
    }
    std::fs::write(&pack_path, &good).unwrap();
    assert!(failed > 0 && passed > 0, "{failed} failed, {passed} passed");
}

/// A GC of many slices marks once (docs/gc-design.md §6): over all its slices, its traversal
/// visits each record below the GC commit that the kept commits reach exactly once (counted
/// against the brute force above), the later slices take the first one's live set, and the
/// segment list never fills. Before, every slice marked the whole region again (seven marks of
/// the 10x rung's live set), and once the list was full each slice merged the newest segment and
/// copied no chunk: slices without end, a full mark each.
#[test]
fn a_sliced_gc_visits_each_reached_record_once() {
    let (mut rng, seed) = seeded_rng("a_sliced_gc_visits_each_reached_record_once", 0x005c_1ce5);
    let dir = tempfile::tempdir().unwrap();
    let options = larch_store::RepoOptions { chunk_bytes: 4 << 10, ..larch_store::RepoOptions::default() };
    let mut repo = Repo::open_with(dir.path(), options.clone()).unwrap();
    let mut tree = repo.empty_tree();
    let mut model = Model::new();
    let mut main: Vec<(Hash, Model)> = Vec::new();
    for n in 0..60 {
        for _ in 0..rng.random_range(4..16) {
            random_op(&mut rng, &mut tree, &mut model);
        }
        small_rewrites(&mut rng, &mut tree, &mut model);
        let parents: Vec<Hash> = main.last().map(|(hash, _)| *hash).into_iter().collect();
        let commit = repo.commit(&tree, &parents, info(n)).unwrap();
        main.push((commit, model.clone()));
        tree = repo.checkout(&commit).unwrap();
    }
    let keep = 40;
    let keep_from = offset_of(&repo, &main[keep].0);
    // Every record below the GC commit that the kept commits reach, with the patch bases.
    let reached = brute_force(&repo, dir.path(), (keep_from, u64::MAX), keep_from);
    let chunks = repo.chunk_files().len();
    // One chunk a slice (the smallest budget): more chunks than the segment list has slots.
    repo.set_gc_policy(larch_store::GcPolicy {
        slice_percent: 1,
        slice_min_bytes: 1,
        min_garbage_percent: 101,
        deep_growth_percent: 1_000_000,
        deep_every: 0,
        ..larch_store::GcPolicy::default()
    });
    let (mut reports, mut polls) = (Vec::new(), 0u32);
    repo.gc_start(&main[keep].0).unwrap();
    while !reports.last().is_some_and(|report: &larch_store::GcReport| report.complete) {
        if let Some(report) = repo.gc_finish().unwrap() {
            assert!(repo.segment_files().len() <= 8, "seed {seed}: segments {:?}", repo.segment_files());
            reports.push(report);
        }
        polls += 1;
        assert!(reports.len() <= chunks && polls < 100_000, "seed {seed}: the slices never end");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let visited: u64 = reports.iter().map(|report| report.mark_records).sum();
    let marks: Vec<u32> = reports.iter().map(|report| report.marks).collect();
    println!("seed {seed}: {chunks} chunks, {} slices, marks {marks:?}, {visited} visited", reports.len());
    assert!(reports.len() >= 3, "seed {seed}: {} slices only", reports.len());
    assert_eq!(marks.iter().sum::<u32>(), 1, "seed {seed}: marks per slice {marks:?}");
    assert_eq!(visited, reached.len() as u64, "seed {seed}: records visited against records reached");
    // What the GC kept is what it had to.
    for (i, (hash, model)) in main.iter().enumerate() {
        match repo.checkout(hash) {
            Ok(tree) => {
                assert!(i >= keep, "seed {seed}: commit {i} survived");
                assert_eq!(common::contents_of(&tree), model.values, "seed {seed}: commit {i}");
            }
            Err(StoreError::Collected { .. }) => assert!(i < keep, "seed {seed}: commit {i} collected"),
            Err(e) => panic!("seed {seed}: commit {i}: {e}"),
        }
    }
    let report = repo.fsck();
    assert!(report.is_clean(), "seed {seed}: {report}");
}
