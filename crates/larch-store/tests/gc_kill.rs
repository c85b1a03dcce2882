//! Crash safety of garbage collection, real (issue 10 point 5): a writer process (this test binary
//! re-executed with `LARCH_GC_KILL_DIR` set) commits in a loop with 4 KiB chunks, starts a GC
//! every 8 commits keeping the last 5 (`gc_start`, then `gc_finish` after every commit: the switch
//! rides on a commit, the deletion on the next), acknowledges each commit on a pipe, and is killed
//! with SIGKILL at random moments (seeded), 30 times (`LARCH_KILLS=N` for more), while this process
//! reloads and reads the store as a reader across the GCs. After each kill the store reopens with
//! every acknowledged commit, the head's tree is exactly the model, fsck is clean, the next writer's
//! open leaves no file the state does not name, and the history continues.
//!
//! A test without the libtest harness (`harness = false`): `main` is either the child writer or the
//! test, so no test can pass by returning early.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test binary

use larch_core::{CommitInfo, Hash};
use larch_store::INLINE_MAX;
use larch_store::{Repo, RepoOptions, StoreError};
use larch_testkit::seeded_rng;
use rand::Rng;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const DIR_VAR: &str = "LARCH_GC_KILL_DIR";

fn value_of(level: u64) -> Vec<u8> {
    if level.is_multiple_of(3) {
        vec![level as u8; INLINE_MAX + 44]
    } else {
        format!("v{level}").into_bytes()
    }
}

fn key(level: u64) -> String {
    format!("{level:08x}")
}

fn main() {
    match std::env::var(DIR_VAR) {
        Ok(dir) => child_writer(&dir),
        Err(_) => {
            let kills = std::env::var("LARCH_KILLS").ok().and_then(|n| n.parse().ok()).unwrap_or(30);
            let started = Instant::now();
            sigkill_during_gcs_loses_nothing_acknowledged(kills);
            eprintln!("gc_kill: {kills} kills in {:.1} s: ok", started.elapsed().as_secs_f64());
        }
    }
}

/// The writer: continues the chain from the head, one small commit at a time (a churned value
/// makes most of each block garbage later), collecting every 8 commits.
fn child_writer(dir: &str) {
    let options = RepoOptions { cache_bytes: 4 << 20, chunk_bytes: 4096, ..RepoOptions::default() };
    let mut repo = loop {
        match Repo::open_with(dir, options.clone()) {
            Err(StoreError::Locked { .. }) => std::thread::sleep(Duration::from_millis(1)),
            other => break other.unwrap(),
        }
    };
    let (mut tree, mut level, mut parents) = match repo.head() {
        Some(head) => {
            let level = repo.commit_details(&head).unwrap().info.date as u64 + 1;
            (repo.checkout(&head).unwrap(), level, vec![head])
        }
        None => (repo.empty_tree(), 0, vec![]),
    };
    let mut recent: VecDeque<Hash> = parents.iter().copied().collect();
    loop {
        tree.add(&["k", &key(level)], value_of(level)).unwrap();
        tree.add(&["churn"], format!("{level} {}", "c".repeat(300)).into_bytes()).unwrap();
        let hash = repo.commit(&tree, &parents, CommitInfo::tezos(level as i64, "gc kill test")).unwrap();
        let mut out = std::io::stdout().lock();
        writeln!(out, "ack {} {level}", hash.to_hex()).unwrap();
        out.flush().unwrap();
        drop(out);
        recent.push_back(hash);
        if recent.len() > 6 {
            recent.pop_front();
        }
        repo.gc_finish().unwrap();
        if level % 8 == 0 && !repo.gc_running() && recent.len() == 6 {
            repo.gc_start(&recent[0]).unwrap();
        }
        parents = vec![hash];
        level += 1;
    }
}

fn sigkill_during_gcs_loses_nothing_acknowledged(kills: u32) {
    let (mut rng, _) = seeded_rng("sigkill_during_gcs_loses_nothing_acknowledged", 2025);
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut acked_total: u32 = 0;
    let mut last_acked: Option<(Hash, u64)> = None;
    let mut previous_head: Option<u64> = None;
    let mut reader_checks = 0;
    let mut collected_rounds = 0;
    for round in 0..kills {
        let mut child = Command::new(&exe)
            .env(DIR_VAR, dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Meanwhile, a reader in this process follows the writer across its GCs.
        let deadline = Instant::now() + Duration::from_millis(rng.random_range(20..150));
        let mut reader = Repo::open_read_only(dir.path()).ok();
        while Instant::now() < deadline {
            match reader.as_mut() {
                Some(reader) => {
                    reader.reload().unwrap();
                    if let Some(head) = reader.head() {
                        let details = reader.commit_details(&head);
                        if let Err(e) = &details {
                            let offset =
                                reader.commit_offsets().find(|(hash, _)| **hash == head).map(|(_, o)| *o);
                            let mut offsets: Vec<u64> = reader.commit_offsets().map(|(_, o)| *o).collect();
                            offsets.sort();
                            panic!(
                                "round {round}: reader: head {head} at {offset:?}: {e}; chunks {:?}; segments {:?}; commits {:?}",
                                reader.chunk_files(),
                                reader.fsck().stats.segment_files,
                                &offsets[..offsets.len().min(5)]
                            );
                        }
                        let level = details.unwrap().info.date as u64;
                        let tree = reader.checkout(&head).unwrap();
                        let value = tree.find(&["k", &key(level)]).unwrap().unwrap();
                        assert_eq!(value.as_bytes(), &value_of(level)[..], "round {round}: reader");
                        assert_eq!(tree.length(&["k"]).unwrap(), level + 1, "round {round}: reader");
                        reader_checks += 1;
                    }
                }
                None => reader = Repo::open_read_only(dir.path()).ok(),
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        for line in BufReader::new(child.stdout.take().unwrap()).lines() {
            let line = line.unwrap();
            let mut words = line.split_whitespace();
            if words.next() == Some("ack") {
                let hash = Hash::from_hex(words.next().unwrap()).unwrap();
                let level: u64 = words.next().unwrap().parse().unwrap();
                last_acked = Some((hash, level));
                acked_total += 1;
            }
        }
        let nothing_known = last_acked.is_none() && previous_head.is_none();
        // The next writer's open cleans up; then a reader checks.
        match Repo::open(dir.path()) {
            Ok(writer) => drop(writer),
            Err(StoreError::NotAStore { .. }) if nothing_known => continue,
            Err(e) => panic!("round {round}: writer open: {e}"),
        }
        let repo = Repo::open_read_only(dir.path()).unwrap();
        let Some(head) = repo.head() else {
            assert!(nothing_known, "round {round}: the head was lost");
            continue;
        };
        let level = repo.commit_details(&head).unwrap().info.date as u64;
        let known = last_acked.map(|(_, level)| level).max(previous_head);
        if let Some(known) = known {
            assert!(level == known || level == known + 1, "round {round}: head {level}, known {known}");
        }
        if let Some((acked_hash, _)) = last_acked {
            let log = repo.log(&head).unwrap();
            assert!(log.contains(&acked_hash), "round {round}: acknowledged commit lost");
        }
        let history = repo.history(&head).unwrap();
        if !history.collected_parents.is_empty() {
            collected_rounds += 1;
        }
        let tree = repo.checkout(&head).unwrap();
        assert_eq!(tree.length(&["k"]).unwrap(), level + 1, "round {round}");
        for i in [0, level / 2, level] {
            assert_eq!(
                tree.find(&["k", &key(i)]).unwrap().unwrap().as_bytes(),
                &value_of(i)[..],
                "round {round}"
            );
        }
        let report = repo.fsck();
        assert!(report.is_clean(), "round {round}: {report}");
        // No file the state does not name: the segments the state lists and chunks from its first.
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        let segments = names.iter().filter(|name| name.starts_with("seg.")).count();
        assert_eq!(segments, report.stats.segment_files.len(), "round {round}: {names:?}");
        let chunks = names.iter().filter(|name| name.starts_with("chunk.")).count();
        assert_eq!(chunks, report.stats.chunk_files.len(), "round {round}: {names:?}");
        previous_head = Some(level);
    }
    eprintln!(
        "gc_kill: {kills} kills, {acked_total} commits acknowledged, {reader_checks} reader checks, \
         {collected_rounds} rounds on a collected store"
    );
    assert!(acked_total >= kills, "only {acked_total} commits acknowledged in {kills} rounds");
    assert!(collected_rounds > kills / 2, "GC ran in only {collected_rounds} rounds");
    assert!(reader_checks >= kills, "the concurrent reader checked only {reader_checks} states");
}
