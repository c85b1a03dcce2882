//! Archive mode with a lower layer (`docs/store.md` *Archive mode*, `docs/gc-design.md` §10):
//! `Repo::archive` moves sealed chunk files below the chunk of a commit to the lower directory;
//! every commit still reads back equal to the model, through the writer, readers opened before
//! the move and readers opened after it; the upper directory keeps only `control`, `commits` and
//! the chunks from the commit's on; a store once archived refuses to open without its lower
//! directory; what a crash leaves at each step of a move opens and is cleaned up by the writer.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::{commit_blocks, contents_of, info};
use larch_core::Hash;
use larch_store::{Repo, RepoOptions, StoreError};
use larch_testkit::{Model, seeded_rng};
use std::path::Path;

fn options(lower: Option<&Path>) -> RepoOptions {
    RepoOptions {
        chunk_bytes: 4096,
        cache_bytes: 1 << 16,
        lower: lower.map(Path::to_path_buf),
        ..RepoOptions::default()
    }
}

fn reader(dir: &Path, lower: Option<&Path>) -> larch_store::Result<Repo> {
    Repo::open_read_only_options(dir, options(lower))
}

/// The file names of `dir`, sorted, without the identity files of archive mode (`larch-id` in the
/// store directory, `larch-lower` in the lower one: `tests/archive_identity.rs`).
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name != "larch-id" && name != "larch-lower")
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
}

fn chunk(seq: u32) -> String {
    format!("chunk.{seq:06}")
}

/// Every commit of `commits` reads back through `repo` equal to its model.
fn check_all(repo: &Repo, commits: &[(Hash, Model)], what: &str) {
    for (i, (hash, model)) in commits.iter().enumerate() {
        let tree = repo.checkout(hash).unwrap_or_else(|e| panic!("{what}: commit {i}: {e}"));
        assert_eq!(contents_of(&tree), model.values, "{what}: commit {i}");
    }
}

/// The chunk (sequence number) holding commit `hash`'s record, from the handle's chunk files.
fn chunk_of(repo: &Repo, hash: &Hash) -> u32 {
    let offset = repo.commit_details(hash).unwrap().offset;
    let files = repo.chunk_files();
    files.iter().position(|(_, start, end)| *start <= offset && offset < *end).unwrap() as u32
}

#[test]
fn sealed_chunks_move_to_the_lower_directory_and_every_commit_reads_back() {
    let upper = tempfile::tempdir().unwrap();
    let lower_root = tempfile::tempdir().unwrap();
    let lower = lower_root.path().join("lower");
    let (dir, low) = (upper.path(), lower.as_path());
    let mut repo = Repo::open_with(dir, options(Some(low))).unwrap();
    let mut commits = commit_blocks(&mut repo, 40, "archive_moves", None);
    let chunks_before = repo.chunk_files().len() as u32;
    assert!(chunks_before >= 6, "{chunks_before} chunks");
    assert!(!repo.is_archived());
    // Readers opened before the move, with and without the lower directory.
    let early_with = reader(dir, Some(low)).unwrap();
    let early_without = reader(dir, None).unwrap();

    let target = commits[30].0;
    let commit_chunk = chunk_of(&repo, &target);
    assert!(commit_chunk >= 3, "commit 30 is in chunk {commit_chunk}");
    let sizes: u64 =
        (0..commit_chunk).map(|seq| std::fs::metadata(dir.join(chunk(seq))).unwrap().len()).sum();
    let report = repo.archive(&target).unwrap();
    eprintln!("{report:?}");
    assert_eq!(report.commit_chunk, commit_chunk);
    assert_eq!(report.chunks_moved, u64::from(commit_chunk));
    assert_eq!(report.bytes_moved, sizes);
    assert_eq!(report.chunks_already_lower, 0);
    assert!(report.flag_published);
    assert!(repo.is_archived());
    assert_eq!(report.upper_chunks, u64::from(chunks_before - commit_chunk));

    // The upper directory: control, commits, the chunks from the commit's on; the lower one: the
    // chunks below it, complete (byte for byte what the store reads), no `.tmp`.
    let mut expected_upper = vec!["commits".to_string(), "control".to_string()];
    expected_upper.extend((commit_chunk..chunks_before).map(chunk));
    expected_upper.sort();
    assert_eq!(names(dir), expected_upper);
    assert_eq!(names(low), (0..commit_chunk).map(chunk).collect::<Vec<_>>());
    // The identities: the store's, and the lower directory's marker naming it.
    let id = std::fs::read_to_string(dir.join("larch-id")).unwrap();
    let marker = std::fs::read_to_string(low.join("larch-lower")).unwrap();
    assert_eq!(id.strip_prefix("larch store "), marker.strip_prefix("larch lower "), "{id} {marker}");
    let lower_bytes: u64 =
        names(low).iter().map(|name| std::fs::metadata(low.join(name)).unwrap().len()).sum();
    assert_eq!(lower_bytes, sizes);

    // Every commit reads back: the writer (which reopened the moved chunks), the readers opened
    // before the move (their descriptors of the upper copies stay valid), a reader opened now.
    check_all(&repo, &commits, "writer after the move");
    check_all(&early_with, &commits, "reader opened before the move (with lower)");
    check_all(&early_without, &commits, "reader opened before the move (without lower)");
    let late = reader(dir, Some(low)).unwrap();
    check_all(&late, &commits, "reader opened after the move");
    assert!(late.is_archived());
    let fsck = late.fsck();
    assert!(fsck.is_clean(), "{fsck}");
    let fsck = repo.fsck();
    assert!(fsck.is_clean(), "{fsck}");

    // The writer goes on; the early reader follows the new chunks on reload.
    let last = commits.last().cloned();
    commits.extend(commit_blocks(&mut repo, 20, "archive_moves_more", last));
    let mut early_with = early_with;
    assert!(early_with.reload().unwrap());
    check_all(&early_with, &commits, "early reader after reload");
    drop((early_without, late));

    // Again at the same commit: nothing to do; at a later one: the chunks in between.
    let again = repo.archive(&target).unwrap();
    assert_eq!((again.chunks_moved, again.chunks_already_lower), (0, u64::from(commit_chunk)));
    assert!(!again.flag_published);
    let later = commits[55].0;
    let later_chunk = chunk_of(&repo, &later);
    assert!(later_chunk > commit_chunk);
    let more = repo.archive(&later).unwrap();
    assert_eq!(more.chunks_moved, u64::from(later_chunk - commit_chunk));
    assert_eq!(names(low), (0..later_chunk).map(chunk).collect::<Vec<_>>());
    // The writer reopened the moved chunks at once; the reader does at its next reload of a new
    // state: no descriptor of an unlinked upper copy is left (their space is returned to the file
    // system, not held until the handles close).
    let last = commits.last().cloned();
    commits.extend(commit_blocks(&mut repo, 1, "archive_moves_one_more", last));
    assert!(early_with.reload().unwrap());
    let deleted: Vec<String> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .map(|target| target.display().to_string())
        .filter(|target| target.starts_with(&dir.display().to_string()) && target.ends_with("(deleted)"))
        .collect();
    assert!(deleted.is_empty(), "{deleted:?}");
    check_all(&repo, &commits, "writer after the second move");
    check_all(&early_with, &commits, "early reader after the second move");
    drop(early_with);
    let head = commits.last().unwrap().0;
    repo.close().unwrap();

    // Reopened without the lower directory: a typed error naming the store and `--lower`.
    for error in [Repo::open_with(dir, options(None)).unwrap_err(), reader(dir, None).unwrap_err()] {
        assert!(matches!(&error, StoreError::NeedsLower { path } if path == dir), "{error}");
        let text = error.to_string();
        assert!(text.contains("--lower") && text.contains(&dir.display().to_string()), "{text}");
    }
    // With it: every commit, fsck clean; the writer continues.
    let reopened = reader(dir, Some(low)).unwrap();
    assert_eq!(reopened.head(), Some(head));
    check_all(&reopened, &commits, "reader reopened with lower");
    assert!(reopened.fsck().is_clean());
    drop(reopened);
    let mut repo = Repo::open_with(dir, options(Some(low))).unwrap();
    let last = commits.last().cloned();
    commits.extend(commit_blocks(&mut repo, 5, "archive_moves_after_reopen", last));
    check_all(&repo, &commits, "writer reopened with lower");
    repo.close().unwrap();

    // A chunk missing from both directories: the error names both paths.
    std::fs::remove_file(low.join(chunk(1))).unwrap();
    let text = reader(dir, Some(low)).unwrap_err().to_string();
    assert!(text.contains(&chunk(1)), "{text}");
    assert!(text.contains(&dir.display().to_string()) && text.contains(&low.display().to_string()), "{text}");
}

#[test]
fn archive_refuses_a_reader_a_store_without_lower_and_an_unknown_commit() {
    let upper = tempfile::tempdir().unwrap();
    let lower = tempfile::tempdir().unwrap();
    let (dir, low) = (upper.path(), lower.path());
    let mut plain = Repo::open_with(dir, options(None)).unwrap();
    let commits = commit_blocks(&mut plain, 12, "archive_refusals", None);
    let target = commits[10].0;
    assert!(matches!(plain.archive(&target), Err(StoreError::ArchiveRefused(_))));
    plain.close().unwrap();

    let mut repo = Repo::open_with(dir, options(Some(low))).unwrap();
    assert!(matches!(repo.archive(&Hash([7; 32])), Err(StoreError::UnknownCommit(_))));
    let mut read_only = reader(dir, Some(low)).unwrap();
    assert!(matches!(read_only.archive(&target), Err(StoreError::ReadOnly)));
    // The first commit is in chunk 0: nothing below it, nothing moves, no flag.
    let report = repo.archive(&commits[0].0).unwrap();
    assert_eq!((report.commit_chunk, report.chunks_moved, report.flag_published), (0, 0, false));
    assert!(names(low).is_empty());
    repo.close().unwrap();
    // Not archived: opens without the lower directory.
    check_all(&reader(dir, None).unwrap(), &commits, "never archived");
    // The lower directory may not be the store directory.
    let error = Repo::open_with(dir, options(Some(dir))).unwrap_err();
    assert!(matches!(error, StoreError::ArchiveRefused(_)), "{error}");
}

/// Builds an archived store (commits, then a move below commit 20), closed. Returns the commits
/// and the chunk of commit 20.
fn archived_store(dir: &Path, low: &Path, name: &str) -> (Vec<(Hash, Model)>, u32) {
    let mut repo = Repo::open_with(dir, options(Some(low))).unwrap();
    let commits = commit_blocks(&mut repo, 30, name, None);
    let report = repo.archive(&commits[20].0).unwrap();
    assert!(report.chunks_moved >= 3, "{report:?}");
    repo.close().unwrap();
    (commits, report.commit_chunk)
}

/// After a simulated crash: readers open (before any cleanup), the writer opens and cleans up,
/// every commit reads back, fsck is clean, and a new move completes the archive.
/// `kept`: the chunk whose upper copy the writer's open must keep (`Some((seq, true))`) or
/// remove (`Some((seq, false))`).
fn check_recovers(
    dir: &Path,
    low: &Path,
    commits: &[(Hash, Model)],
    commit_chunk: u32,
    kept: Option<(u32, bool)>,
    what: &str,
) {
    check_all(&reader(dir, Some(low)).unwrap(), commits, &format!("{what}: reader before cleanup"));
    let mut repo = Repo::open_with(dir, options(Some(low))).unwrap();
    for name in names(low) {
        assert!(!name.ends_with(".tmp"), "{what}: {name} left in the lower directory");
    }
    if let Some((seq, kept)) = kept {
        assert_eq!(dir.join(chunk(seq)).exists(), kept, "{what}: upper copy of {} after open", chunk(seq));
    }
    check_all(&repo, commits, &format!("{what}: writer after cleanup"));
    assert!(repo.fsck().is_clean(), "{what}");
    repo.archive(&commits[20].0).unwrap();
    assert_eq!(names(low), (0..commit_chunk).map(chunk).collect::<Vec<_>>(), "{what}");
    for seq in 0..commit_chunk {
        assert!(!dir.join(chunk(seq)).exists(), "{what}: upper copy of {} left", chunk(seq));
    }
    repo.close().unwrap();
    let repo = reader(dir, Some(low)).unwrap();
    check_all(&repo, commits, &format!("{what}: reopened"));
    assert!(repo.fsck().is_clean(), "{what}");
}

#[test]
fn a_crash_at_each_step_of_a_move_opens_and_is_cleaned_up() {
    // Each step of moving chunk `k` (the last one moved), as the files would be left by a crash
    // right after it: the upper copy is always there until the last step.
    for step in ["copy started", "copy synced", "renamed", "lower directory synced", "unlinked"] {
        let upper = tempfile::tempdir().unwrap();
        let lower = tempfile::tempdir().unwrap();
        let (dir, low) = (upper.path(), lower.path());
        let (commits, commit_chunk) = archived_store(dir, low, &format!("archive_crash_{step}"));
        let k = commit_chunk - 1;
        let moved = std::fs::read(low.join(chunk(k))).unwrap();
        let tmp = low.join(format!("{}.tmp", chunk(k)));
        let kept = match step {
            "copy started" => {
                // A torn copy under the temporary name; the upper copy intact.
                std::fs::write(dir.join(chunk(k)), &moved).unwrap();
                std::fs::remove_file(low.join(chunk(k))).unwrap();
                std::fs::write(&tmp, &moved[..moved.len() / 2]).unwrap();
                Some((k, true))
            }
            "copy synced" => {
                std::fs::write(dir.join(chunk(k)), &moved).unwrap();
                std::fs::rename(low.join(chunk(k)), &tmp).unwrap();
                Some((k, true))
            }
            "renamed" | "lower directory synced" => {
                // Both copies complete.
                std::fs::write(dir.join(chunk(k)), &moved).unwrap();
                Some((k, false))
            }
            _ => None,
        };
        check_recovers(dir, low, &commits, commit_chunk, kept, step);
    }
}

#[test]
fn cleanup_keeps_an_upper_copy_whose_lower_copy_differs_and_a_store_never_archived() {
    let upper = tempfile::tempdir().unwrap();
    let lower = tempfile::tempdir().unwrap();
    let (dir, low) = (upper.path(), lower.path());
    let (commits, commit_chunk) = archived_store(dir, low, "archive_cleanup_differs");
    // A lower copy shorter than the upper one (never produced by a move; damage): the upper copy
    // is kept, reads use it, and the next move replaces the lower copy.
    let k = commit_chunk - 1;
    let moved = std::fs::read(low.join(chunk(k))).unwrap();
    std::fs::write(dir.join(chunk(k)), &moved).unwrap();
    std::fs::write(low.join(chunk(k)), &moved[..moved.len() - 1]).unwrap();
    drop(Repo::open_with(dir, options(Some(low))).unwrap());
    assert!(dir.join(chunk(k)).exists(), "an upper copy whose lower copy differs is kept");
    check_recovers(dir, low, &commits, commit_chunk, Some((k, true)), "lower copy differs");
    assert_eq!(std::fs::read(low.join(chunk(k))).unwrap(), moved);

    // A store without the archive flag: its lower `.tmp` files go, its upper chunks stay.
    let upper = tempfile::tempdir().unwrap();
    let lower = tempfile::tempdir().unwrap();
    let (dir, low) = (upper.path(), lower.path());
    let mut repo = Repo::open_with(dir, options(None)).unwrap();
    let commits = commit_blocks(&mut repo, 12, "archive_cleanup_plain", None);
    repo.close().unwrap();
    std::fs::write(low.join(format!("{}.tmp", chunk(0))), b"partial").unwrap();
    std::fs::copy(dir.join(chunk(0)), low.join(chunk(0))).unwrap();
    drop(Repo::open_with(dir, options(Some(low))).unwrap());
    assert_eq!(names(low), vec![chunk(0)]);
    assert!(dir.join(chunk(0)).exists(), "no flag: the upper copy is kept");
    check_all(&reader(dir, None).unwrap(), &commits, "never archived, reopened without lower");
}

/// A format-2 store's `pack` (chunk 0, `tests/data/format-v2`) moves like any sealed chunk, under
/// its own name, and the store reads back the same through its lower directory.
#[test]
fn a_format_2_pack_moves_as_chunk_0() {
    let upper = tempfile::tempdir().unwrap();
    let lower = tempfile::tempdir().unwrap();
    let (dir, low) = (upper.path(), lower.path());
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/format-v2");
    for name in ["control", "pack", "commits"] {
        std::fs::copy(fixture.join(name), dir.join(name)).unwrap();
    }
    let pack = std::fs::read(dir.join("pack")).unwrap();
    let mut repo = Repo::open_with(dir, options(Some(low))).unwrap();
    let head = repo.head().unwrap();
    let mut tree = repo.checkout(&head).unwrap();
    tree.add(&["data", "version"], b"next".to_vec()).unwrap();
    let next = repo.commit(&tree, &[head], info(3)).unwrap();
    let log = repo.log(&next).unwrap();
    assert_eq!(log.len(), 4);
    let before: Vec<_> = log.iter().map(|commit| contents_of(&repo.checkout(commit).unwrap())).collect();
    let report = repo.archive(&next).unwrap();
    assert_eq!((report.commit_chunk, report.chunks_moved), (1, 1));
    assert_eq!(report.bytes_moved, pack.len() as u64);
    assert_eq!(names(low), ["pack"]);
    assert_eq!(std::fs::read(low.join("pack")).unwrap(), pack);
    assert_eq!(names(dir), ["chunk.000001", "commits", "control"]);
    repo.close().unwrap();
    // Both copies (a move cut before its unlink): the writer's open removes the upper one.
    std::fs::write(dir.join("pack"), &pack).unwrap();
    drop(Repo::open_with(dir, options(Some(low))).unwrap());
    assert!(!dir.join("pack").exists());
    let repo = reader(dir, Some(low)).unwrap();
    for (commit, contents) in log.iter().zip(&before) {
        assert_eq!(&contents_of(&repo.checkout(commit).unwrap()), contents);
    }
    assert!(repo.fsck().is_clean());
    assert!(matches!(reader(dir, None), Err(StoreError::NeedsLower { .. })));
}

/// Readers on other threads, opening fresh handles (which find each chunk in whichever directory
/// holds it at that instant) and reloading an old one, read every commit equal to its model while
/// the writer moves chunks a few at a time.
#[test]
fn readers_on_other_threads_read_throughout_the_moves() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let upper = tempfile::tempdir().unwrap();
    let lower = tempfile::tempdir().unwrap();
    let (dir, low) = (upper.path().to_path_buf(), lower.path().to_path_buf());
    let mut repo = Repo::open_with(&dir, options(Some(&low))).unwrap();
    let commits = Arc::new(commit_blocks(&mut repo, 40, "archive_concurrent", None));
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..2u64)
        .map(|t| {
            let (dir, low, commits, stop) = (dir.clone(), low.clone(), commits.clone(), stop.clone());
            std::thread::spawn(move || {
                let (mut rng, seed) = seeded_rng(&format!("archive_concurrent_reader_{t}"), 31 + t);
                let mut old = reader(&dir, Some(&low)).unwrap();
                let mut rounds = 0u64;
                while !stop.load(Ordering::Relaxed) || rounds < 3 {
                    let fresh = reader(&dir, Some(&low)).unwrap_or_else(|e| panic!("seed {seed}: open: {e}"));
                    old.reload().unwrap_or_else(|e| panic!("seed {seed}: reload: {e}"));
                    for handle in [&fresh, &old] {
                        let i = rand::Rng::random_range(&mut rng, 0..commits.len());
                        let (hash, model) = &commits[i];
                        let tree =
                            handle.checkout(hash).unwrap_or_else(|e| panic!("seed {seed}: commit {i}: {e}"));
                        assert_eq!(contents_of(&tree), model.values, "seed {seed}: commit {i}");
                    }
                    rounds += 1;
                }
                rounds
            })
        })
        .collect();
    for i in (4..40).step_by(4) {
        repo.archive(&commits[i].0).unwrap();
        // A publish, so that the old handles reload onto something new.
        repo.set_branch(&format!("at-{i}"), &commits[i].0).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        let rounds = thread.join().unwrap();
        eprintln!("reader rounds: {rounds}");
        assert!(rounds >= 3);
    }
    assert!(names(&low).len() >= 5, "{:?}", names(&low));
    check_all(&repo, &commits, "writer after the moves");
}

/// The archive clean-up never runs on a fallback open (issue 39): the newest slot is valid but
/// names a pack end its chunk does not reach and was never confirmed, so the writer stands on the
/// older slot; the upper copy of a moved chunk (both copies complete, as a crash after the rename
/// leaves them) is left by that open, and removed by the next one, which stands on the newest slot.
#[test]
fn the_archive_clean_up_does_not_run_on_a_fallback_open() {
    use larch_store::testing::control::{CONFIRM_AT, ControlFileState, FLAG_ARCHIVE, PAGE, encode_confirm};
    let upper = tempfile::tempdir().unwrap();
    let lower = tempfile::tempdir().unwrap();
    let (dir, low) = (upper.path(), lower.path());
    let (commits, commit_chunk) = archived_store(dir, low, "archive_fallback");
    // Two more publishes: both slots carry the archive flag.
    let mut repo = Repo::open_with(dir, options(Some(low))).unwrap();
    let mut tree = repo.checkout(&commits.last().unwrap().0).unwrap();
    let mut extra = vec![commits.last().unwrap().0];
    for i in 0..2u64 {
        tree.add(&["extra", &i.to_string()], vec![i as u8; 10]).unwrap();
        extra.push(repo.commit(&tree, &[*extra.last().unwrap()], info(100 + i)).unwrap());
    }
    repo.close().unwrap();
    let k = commit_chunk - 1;
    std::fs::copy(low.join(chunk(k)), dir.join(chunk(k))).unwrap();
    let mut bytes = std::fs::read(dir.join("control")).unwrap();
    let decoded = ControlFileState::decode(&bytes).unwrap();
    let newest = decoded.newest().unwrap();
    let older = decoded.state(1 - newest).unwrap().clone();
    assert!(older.flags & FLAG_ARCHIVE != 0 && older.head_chunk > k, "the older slot alone would clean up");
    let mut ahead = decoded.state(newest).unwrap().clone();
    ahead.generation = older.generation + 1;
    ahead.pack_end += 1 << 20;
    let page = newest * PAGE as usize;
    bytes[page..page + PAGE as usize].fill(0);
    let encoded = ahead.encode().unwrap();
    bytes[page..page + encoded.len()].copy_from_slice(&encoded);
    bytes[CONFIRM_AT as usize..].copy_from_slice(&encode_confirm(older.generation));
    std::fs::write(dir.join("control"), &bytes).unwrap();
    let repo = Repo::open_with(dir, options(Some(low))).unwrap();
    assert!(dir.join(chunk(k)).exists(), "a fallback open removed the upper copy of {}", chunk(k));
    assert_eq!(repo.head(), older.branches.get("main").map(|(hash, _)| *hash), "on the older slot");
    assert!(extra.contains(&repo.head().unwrap()));
    let kept = &commits;
    check_all(&repo, kept, "fallback open");
    repo.close().unwrap();
    let repo = Repo::open_with(dir, options(Some(low))).unwrap();
    assert!(!dir.join(chunk(k)).exists(), "the next open cleans up");
    check_all(&repo, kept, "next open");
    assert!(repo.fsck().is_clean(), "{}", repo.fsck());
}
