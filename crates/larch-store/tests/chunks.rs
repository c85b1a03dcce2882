//! The chunked pack on disk (format 3, `docs/format.md` §3): the writer rolls to a new chunk file
//! at the start of a commit once the head holds `chunk_bytes`; every chunk's header names its
//! sequence number and the global offset where the previous one ends; readers in another handle
//! follow rolls on `reload`; a writer removes chunks a crashed roll left unpublished; recovery,
//! scan, fsck and stats work across chunks; a format-2 store is continued in chunk 1.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::{contents_of, info, random_op};
use larch_core::Hash;
use larch_store::{Repo, RepoOptions, StoreError, SyncPolicy, plan_recovery};
use larch_testkit::{Model, seeded_rng};
use std::path::Path;

fn options(chunk_bytes: u64) -> RepoOptions {
    RepoOptions { chunk_bytes, cache_bytes: 1 << 20, ..RepoOptions::default() }
}

/// The chunk files of `dir` with their header fields (seq, start), by name.
fn chunk_headers(dir: &Path) -> Vec<(String, u64, u64, u64)> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("chunk."))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let bytes = std::fs::read(dir.join(&name)).unwrap();
            assert_eq!(&bytes[..16], b"LARCHCHK\x03\0\0\0\0\0\0\0", "{name}");
            let seq = u64::from_le_bytes(bytes[16..24].try_into().unwrap());
            let start = u64::from_le_bytes(bytes[24..32].try_into().unwrap());
            (name, seq, start, bytes.len() as u64 - 32)
        })
        .collect()
}

/// Commits `blocks` random blocks; returns the commits with their models.
fn commit_blocks(repo: &mut Repo, blocks: u64, seed_name: &str) -> Vec<(Hash, Model)> {
    let (mut rng, seed) = seeded_rng(seed_name, 11);
    eprintln!("{seed_name}: seed {seed}");
    let mut tree = repo.empty_tree();
    let mut model = Model::new();
    let mut out: Vec<(Hash, Model)> = Vec::new();
    for block in 0..blocks {
        for _ in 0..30 {
            random_op(&mut rng, &mut tree, &mut model);
        }
        let parents: Vec<Hash> = out.last().map(|(hash, _)| *hash).into_iter().collect();
        let hash = repo.commit(&tree, &parents, info(block)).unwrap();
        out.push((hash, model.clone()));
    }
    out
}

#[test]
fn a_writer_rolls_chunks_and_a_reader_follows_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open_with(dir.path(), options(4096)).unwrap();
    let mut tree = repo.empty_tree();
    tree.add(&["first"], b"1".to_vec()).unwrap();
    let first = repo.commit(&tree, &[], info(0)).unwrap();
    let mut reader = Repo::open_read_only(dir.path()).unwrap();
    assert_eq!(reader.head(), Some(first));
    let (mut rng, seed) = seeded_rng("chunk_reader_follows", 5);
    let mut model = Model::new();
    model.values.insert(vec![b"first".to_vec()], b"1".to_vec());
    let mut parent = first;
    for block in 1..40 {
        for _ in 0..40 {
            random_op(&mut rng, &mut tree, &mut model);
        }
        parent = repo.commit(&tree, &[parent], info(block)).unwrap();
        // The reader sees the new commit, whatever chunk it went to.
        assert!(reader.reload().unwrap(), "seed {seed}, block {block}");
        assert_eq!(reader.head(), Some(parent));
        assert_eq!(
            contents_of(&reader.checkout(&parent).unwrap()),
            model.values,
            "seed {seed}, block {block}"
        );
    }
    let stats = repo.stats();
    assert!(stats.chunk_files >= 5, "seed {seed}: {stats:?}");
    assert_eq!(stats.chunk_files, stats.chunk_rolls + 1);
    assert_eq!(reader.stats().chunk_files, stats.chunk_files);
    repo.close().unwrap();

    // The headers chain: chunk i+1 starts where chunk i's records end; each holds its range.
    let headers = chunk_headers(dir.path());
    assert_eq!(headers.len() as u64, stats.chunk_files);
    let files = reader.chunk_files();
    for (i, (name, seq, start, data)) in headers.iter().enumerate() {
        assert_eq!(*seq, i as u64, "{name}");
        assert_eq!((&files[i].0, files[i].1), (name, *start));
        if let Some(next) = headers.get(i + 1) {
            assert_eq!(start + data, next.2, "{name}: records up to the next chunk's start");
            assert!(*data >= 4096, "{name}: rolled before it was full ({data} bytes)");
        }
    }
    assert_eq!(headers[0].2, 16);
    assert_eq!(files.last().unwrap().2, reader.stats().pack_bytes);

    // Reopened, everything reads back; fsck and scan walk every chunk.
    let repo = Repo::open_read_only(dir.path()).unwrap();
    assert_eq!(contents_of(&repo.checkout(&parent).unwrap()), model.values);
    let report = repo.fsck();
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.stats.chunk_files.len(), headers.len());
    assert!(report.to_string().contains(&format!("chunks: {} files", headers.len())), "{report}");
    let scan = repo.scan().unwrap();
    assert_eq!(scan.commits, 40);
    let scanned: u64 = scan.by_kind.values().map(|kind| kind.bytes).sum();
    assert_eq!(scanned + 16, scan.pack_bytes, "every record of every chunk framed");
}

#[test]
fn a_commit_larger_than_a_chunk_makes_a_larger_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open_with(dir.path(), options(4096)).unwrap();
    let mut tree = repo.empty_tree();
    for i in 0..200 {
        tree.add(&["big", &format!("{i:04}")], vec![i as u8; 100]).unwrap();
    }
    let first = repo.commit(&tree, &[], info(0)).unwrap();
    tree.add(&["small"], b"x".to_vec()).unwrap();
    let second = repo.commit(&tree, &[first], info(1)).unwrap();
    repo.close().unwrap();
    let headers = chunk_headers(dir.path());
    assert_eq!(headers.len(), 2, "{headers:?}");
    assert!(headers[0].3 > 20_000, "the first commit stayed whole in chunk 0: {headers:?}");
    let repo = Repo::open_read_only(dir.path()).unwrap();
    assert_eq!(
        repo.checkout(&second).unwrap().find(&["big", "0199"]).unwrap().unwrap().as_bytes(),
        &[199; 100]
    );
    assert!(repo.fsck().is_clean());
}

#[test]
fn a_chunk_left_by_an_unpublished_roll_is_removed_by_the_next_writer() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open_with(dir.path(), options(1024)).unwrap();
    let commits = commit_blocks(&mut repo, 6, "orphan_chunks");
    repo.close().unwrap();
    let headers = chunk_headers(dir.path());
    let next = headers.len();
    // A roll that crashed before its publish: the next chunk file exists, named by no slot.
    let orphan = dir.path().join(format!("chunk.{next:06}"));
    std::fs::copy(dir.path().join(&headers[0].0), &orphan).unwrap();
    let reader = Repo::open_read_only(dir.path()).unwrap();
    assert_eq!(reader.head(), Some(commits[5].0));
    assert!(orphan.exists(), "a reader never removes anything");
    drop(reader);
    let mut repo = Repo::open_with(dir.path(), options(1024)).unwrap();
    assert!(!orphan.exists(), "the writer removes the orphan chunk");
    // The next roll creates that chunk again, properly.
    let mut tree = repo.checkout(&commits[5].0).unwrap();
    tree.add(&["after"], vec![7; 2000]).unwrap();
    let after = repo.commit(&tree, &[commits[5].0], info(100)).unwrap();
    tree.add(&["after2"], vec![8; 10]).unwrap();
    let after2 = repo.commit(&tree, &[after], info(101)).unwrap();
    repo.close().unwrap();
    let headers = chunk_headers(dir.path());
    assert!(headers.len() > next, "{headers:?}");
    assert_eq!(headers[next].1, next as u64);
    let repo = Repo::open_read_only(dir.path()).unwrap();
    assert_eq!(repo.head(), Some(after2));
    assert!(repo.fsck().is_clean());
}

#[test]
fn a_missing_or_altered_chunk_is_reported_not_read_as_something_else() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open_with(dir.path(), options(1024)).unwrap();
    commit_blocks(&mut repo, 5, "altered_chunks");
    repo.close().unwrap();
    let headers = chunk_headers(dir.path());
    assert!(headers.len() >= 3);
    let victim = dir.path().join(&headers[1].0);
    let original = std::fs::read(&victim).unwrap();
    // A header whose start disagrees with where chunk 0 ends.
    let mut shifted = original.clone();
    shifted[24] ^= 0x01;
    std::fs::write(&victim, &shifted).unwrap();
    let error = Repo::open_read_only(dir.path()).unwrap_err();
    assert!(matches!(error, StoreError::NeedsRecovery { .. }), "{error}");
    // Another chunk's bytes under this name.
    std::fs::write(&victim, std::fs::read(dir.path().join(&headers[2].0)).unwrap()).unwrap();
    let error = Repo::open_read_only(dir.path()).unwrap_err();
    assert!(error.to_string().contains(&headers[1].0), "{error}");
    std::fs::remove_file(&victim).unwrap();
    let error = Repo::open_read_only(dir.path()).unwrap_err();
    assert!(error.to_string().contains("missing chunk file"), "{error}");
    std::fs::write(&victim, &original).unwrap();
    assert!(Repo::open_read_only(dir.path()).unwrap().fsck().is_clean());
}

#[test]
fn recovery_scans_every_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open_with(dir.path(), options(1024)).unwrap();
    let commits = commit_blocks(&mut repo, 8, "recover_chunks");
    repo.close().unwrap();
    assert!(chunk_headers(dir.path()).len() >= 6);
    // The control file is lost.
    std::fs::remove_file(dir.path().join("control")).unwrap();
    let plan = plan_recovery(dir.path()).unwrap();
    assert_eq!(
        plan.found.iter().map(|found| found.hash).collect::<Vec<_>>(),
        commits.iter().map(|c| c.0).collect::<Vec<_>>()
    );
    assert_eq!(plan.chosen.as_ref().map(|found| found.hash), Some(commits[7].0));
    plan.apply().unwrap();
    let mut repo = Repo::open_with(dir.path(), options(1024)).unwrap();
    assert_eq!(repo.head(), Some(commits[7].0));
    for (hash, model) in &commits {
        assert_eq!(contents_of(&repo.checkout(hash).unwrap()), model.values);
    }
    // The recovered writer rolls on from the recovered head chunk.
    let mut tree = repo.checkout(&commits[7].0).unwrap();
    tree.add(&["more"], vec![1; 3000]).unwrap();
    let more = repo.commit(&tree, &[commits[7].0], info(50)).unwrap();
    repo.close().unwrap();
    let repo = Repo::open_read_only(dir.path()).unwrap();
    assert_eq!(repo.head(), Some(more));
    assert!(repo.fsck().is_clean());
}

#[test]
fn every_sync_policy_rolls_and_publishes_the_chunks_it_names() {
    for sync in [SyncPolicy::Never, SyncPolicy::Every(3), SyncPolicy::Commit] {
        let dir = tempfile::tempdir().unwrap();
        let mut repo = Repo::open_with(dir.path(), RepoOptions { sync, ..options(1024) }).unwrap();
        let commits = commit_blocks(&mut repo, 7, "sync_policies_roll");
        repo.close().unwrap();
        let repo = Repo::open_read_only(dir.path()).unwrap();
        assert_eq!(repo.head(), Some(commits[6].0), "{sync}");
        assert!(repo.chunk_files().len() >= 5, "{sync}");
        assert!(repo.fsck().is_clean(), "{sync}");
    }
}

#[test]
fn a_reader_of_a_format_2_store_follows_the_writer_into_chunk_1() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/format-v2");
    let dir = tempfile::tempdir().unwrap();
    for name in ["control", "pack", "commits"] {
        std::fs::copy(fixture.join(name), dir.path().join(name)).unwrap();
    }
    let mut reader = Repo::open_read_only(dir.path()).unwrap();
    let head = reader.head().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let mut tree = repo.checkout(&head).unwrap();
    tree.add(&["new"], vec![3; 100]).unwrap();
    let next = repo.commit(&tree, &[head], info(9)).unwrap();
    assert!(reader.reload().unwrap());
    assert_eq!(reader.head(), Some(next));
    assert_eq!(reader.checkout(&next).unwrap().find(&["new"]).unwrap().unwrap().as_bytes(), &[3; 100]);
    assert_eq!(reader.chunk_files().len(), 2);
    drop(repo);
    assert!(reader.fsck().is_clean());
}

/// The bulk writer (imports) rolls like a commit: each bulk commit starting on a full head chunk
/// goes to a new chunk, and its keys (global offsets) read back across chunks.
#[test]
fn bulk_commits_roll_chunks_and_read_back() {
    use larch_core::{CommitInfo, Kind, schema};
    use larch_store::BulkTarget;
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open_with(dir.path(), options(1024)).unwrap();
    let mut parents = Vec::new();
    let mut previous: Option<(Hash, larch_core::ObjectKey)> = None;
    for round in 0..6u8 {
        let value = vec![round; 1500];
        let value_hash = schema::contents_hash(&value);
        let mut writer = repo.bulk_writer().unwrap();
        let key = writer.contents(&value).unwrap();
        // The root holds this round's value and the previous round's value (an older chunk).
        let mut entries = vec![(b"now".as_slice(), BulkTarget::Contents { hash: value_hash, key })];
        let mut hashed = vec![(b"now".as_slice(), Kind::Contents, value_hash)];
        if let Some((hash, key)) = previous {
            entries.insert(0, (b"before".as_slice(), BulkTarget::Contents { hash, key }));
            hashed.insert(0, (b"before".as_slice(), Kind::Contents, hash));
        }
        let root_hash = schema::flat_node_hash(entries.len(), hashed.into_iter());
        let root_key = writer.flat(&entries).unwrap();
        let info = CommitInfo::tezos(1_600_000_000 + i64::from(round), "bulk");
        let commit = writer.commit(Some("main"), (root_hash, root_key), &parents, info).unwrap();
        parents = vec![commit];
        previous = Some((value_hash, key));
    }
    assert_eq!(repo.stats().chunk_files, 6, "one chunk per bulk commit");
    repo.close().unwrap();
    let repo = Repo::open_read_only(dir.path()).unwrap();
    let tree = repo.checkout(&parents[0]).unwrap();
    assert_eq!(tree.find(&["now"]).unwrap().unwrap().as_bytes(), &[5u8; 1500][..]);
    assert_eq!(tree.find(&["before"]).unwrap().unwrap().as_bytes(), &[4u8; 1500][..]);
    assert!(repo.fsck().is_clean());
}

/// The fault backend's directory (used by `crash_sim.rs`): a creation or removal survives a power
/// loss only once the directory was synced; a process crash keeps both; seeded partial losses
/// keep an unsynced creation for some seeds and lose it for others.
#[test]
fn the_fault_directory_loses_unsynced_creations_and_removals() {
    use larch_store::testing::fault::{FaultController, Survival};
    let has = |controller: &FaultController, name: &str| controller.names().iter().any(|n| n == name);
    let controller = FaultController::new();
    let files = controller.files();
    let chunk = files.dir.create("chunk.000000").unwrap();
    chunk.write_at(0, b"abc").unwrap();
    chunk.sync().unwrap();
    assert!(!has(&controller.restart(Survival::Durable), "chunk.000000"), "creation not yet durable");
    assert!(has(&controller.restart(Survival::Written), "chunk.000000"));
    files.dir.sync().unwrap();
    let rebooted = controller.restart(Survival::Durable);
    assert!(has(&rebooted, "chunk.000000"));
    assert_eq!(rebooted.written("chunk.000000"), b"abc");
    files.dir.remove("chunk.000000").unwrap();
    assert!(files.dir.open("chunk.000000", false).is_err());
    assert!(has(&controller.restart(Survival::Durable), "chunk.000000"), "removal not yet durable");
    assert!(!has(&controller.restart(Survival::Written), "chunk.000000"));
    files.dir.sync().unwrap();
    assert!(!has(&controller.restart(Survival::Durable), "chunk.000000"));
    files.dir.create("chunk.000001").unwrap();
    let kept =
        (0..32).filter(|seed| has(&controller.restart(Survival::Pages(*seed)), "chunk.000001")).count();
    assert!(kept > 0 && kept < 32, "kept in {kept} of 32 seeded power losses");
    // `control` and `commits` always exist.
    assert!(has(&controller.restart(Survival::Durable), "control"));
    assert!(has(&controller.restart(Survival::Durable), "commits"));
}

/// Sealed chunks are opened lazily behind a pool of `open_files` descriptors (issue 39 item 11):
/// with a pool of 2 and about 40 chunks, every commit read back at random from four threads of a
/// reader (pread, and through memory maps) and of the writer matches the model while files are
/// evicted and reopened all the time, across the writer's rolls and the reader's reloads.
/// Randomized: the seed is printed.
#[test]
fn random_reads_through_a_pool_of_two_files_match_the_model() {
    use rand::Rng;
    let dir = tempfile::tempdir().unwrap();
    let small = RepoOptions { open_files: 2, cache_bytes: 64 << 10, ..options(4096) };
    let mut repo = Repo::open_with(dir.path(), small.clone()).unwrap();
    let mut commits = commit_blocks(&mut repo, 40, "pool_of_two");
    let (mut rng, seed) = seeded_rng("pool_of_two_reads", 23);
    for mmap in [false, true] {
        let mut reader =
            Repo::open_read_only_options(dir.path(), RepoOptions { mmap, ..small.clone() }).unwrap();
        let stats = reader.stats();
        assert!(stats.chunk_files >= 20, "seed {seed}: {stats:?}");
        assert!(stats.chunk_files_open <= 2, "seed {seed}: {stats:?}");
        let seeds: Vec<u64> = (0..4).map(|_| rng.random()).collect();
        let (reader_ref, commits_ref) = (&reader, &commits);
        std::thread::scope(|scope| {
            for thread_seed in seeds {
                scope.spawn(move || {
                    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(thread_seed);
                    for _ in 0..40 {
                        let (hash, model) = &commits_ref[rng.random_range(0..commits_ref.len())];
                        let tree = reader_ref.checkout(hash).unwrap();
                        assert_eq!(contents_of(&tree), model.values, "seed {seed}, mmap {mmap}");
                    }
                });
            }
        });
        let stats = reader.stats();
        assert!(stats.chunk_files_open <= 2 + 4, "seed {seed}: {stats:?}");
        assert!(stats.chunk_file_opens > stats.chunk_files, "seed {seed}: nothing reopened: {stats:?}");
        // The writer rolls on; the reader follows and reads old and new commits alike.
        let mut tree = repo.checkout(&commits.last().unwrap().0).unwrap();
        let mut model = commits.last().unwrap().1.clone();
        for block in 0..10 {
            for _ in 0..30 {
                random_op(&mut rng, &mut tree, &mut model);
            }
            let parent = commits.last().unwrap().0;
            let hash = repo.commit(&tree, &[parent], info(100 + block)).unwrap();
            commits.push((hash, model.clone()));
        }
        assert!(reader.reload().unwrap());
        for _ in 0..30 {
            let (hash, model) = &commits[rng.random_range(0..commits.len())];
            assert_eq!(contents_of(&reader.checkout(hash).unwrap()), model.values, "seed {seed}");
            let (hash, model) = &commits[rng.random_range(0..commits.len())];
            assert_eq!(contents_of(&repo.checkout(hash).unwrap()), model.values, "seed {seed}");
        }
        assert!(repo.stats().chunk_files_open <= 2, "seed {seed}: {:?}", repo.stats());
    }
    repo.close().unwrap();
    assert!(Repo::open_read_only_options(dir.path(), small).unwrap().fsck().is_clean());
}
