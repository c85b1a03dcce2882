//! Crash safety, real: a writer process (this test binary re-executed with `LARCH_KILL_TEST_DIR`
//! set) commits in a loop, acknowledging each commit on a pipe, and is killed with SIGKILL at random
//! moments (seeded), 50 times (`LARCH_KILLS=N` for more), while this process reloads and reads the
//! store as a reader. After each kill the store reopens with every acknowledged commit, the head's
//! tree is exactly the model, fsck is clean, and the next writer continues the history.
//!
//! A test without the libtest harness (`harness = false`): `main` is either the child writer or the
//! test, so no test can pass by returning early.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test binary

use larch_core::{CommitInfo, Hash};
use larch_store::INLINE_MAX;
use larch_store::{Repo, RepoOptions, StoreError, SyncPolicy};
use larch_testkit::seeded_rng;
use rand::Rng;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const DIR_VAR: &str = "LARCH_KILL_TEST_DIR";
const SYNC_VAR: &str = "LARCH_KILL_TEST_SYNC";
/// Set to a depth: the writer commits through a `PipelinedRepo` of that depth (a commit is
/// acknowledged once that many later commits returned: it is then durable).
const PIPELINE_VAR: &str = "LARCH_KILL_TEST_PIPELINE";

/// Commits per publish under `sync`.
fn publish_every(sync: SyncPolicy) -> u64 {
    match sync {
        SyncPolicy::Every(n) => u64::from(n),
        _ => 1,
    }
}

fn value_of(level: u64) -> Vec<u8> {
    // Alternately inline and large contents.
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
        Ok(dir) => {
            let sync = std::env::var(SYNC_VAR).ok().and_then(|text| text.parse().ok()).unwrap_or_default();
            if let Some(depth) = std::env::var(PIPELINE_VAR).ok().and_then(|text| text.parse().ok()) {
                child_pipelined_writer(&dir, depth)
            } else {
                child_writer(&dir, sync)
            }
        }
        Err(_) => {
            let kills = std::env::var("LARCH_KILLS").ok().and_then(|n| n.parse().ok()).unwrap_or(50);
            let started = Instant::now();
            sigkill_at_random_moments_loses_nothing_acknowledged(kills, SyncPolicy::Commit, 0);
            // Staged commits: the writer acknowledges only the published ones (every 3rd).
            sigkill_at_random_moments_loses_nothing_acknowledged(
                (kills / 2).max(10),
                SyncPolicy::Every(3),
                0,
            );
            // Commits on a commit thread, each durable once the next one returned, or with up
            // to 4 commits in flight.
            for depth in [1, 4] {
                sigkill_at_random_moments_loses_nothing_acknowledged(
                    (kills / 2).max(10),
                    SyncPolicy::Commit,
                    depth,
                );
            }
            deleting_the_lock_file_lets_no_second_writer_in();
            eprintln!("crash_kill: {kills} kills in {:.1} s: ok", started.elapsed().as_secs_f64());
        }
    }
}

/// The writer: continues the chain from the head, one tiny commit at a time, acknowledging on
/// stdout each commit that is published (every commit under `commit`, every n-th under `every n`).
fn child_writer(dir: &str, sync: SyncPolicy) {
    // The writer reads through a memory map; the checking reader below uses positioned reads.
    // Chunks of 4 KiB: the writer rolls to a new chunk file every few commits, so kills land in
    // rolls and the reader follows new chunks on reload.
    let options =
        RepoOptions { sync, cache_bytes: 4 << 20, mmap: true, chunk_bytes: 4096, ..RepoOptions::default() };
    let every = publish_every(sync);
    let mut since_open = 0;
    let mut repo = open_writer(dir, &options);
    let (mut tree, mut level, mut parents) = resume(&repo);
    loop {
        tree.add(&["k", &key(level)], value_of(level)).unwrap();
        let hash = repo.commit(&tree, &parents, CommitInfo::tezos(level as i64, "kill test")).unwrap();
        since_open += 1;
        if since_open % every == 0 {
            let mut out = std::io::stdout().lock();
            writeln!(out, "ack {} {level}", hash.to_hex()).unwrap();
            out.flush().unwrap();
        }
        parents = vec![hash];
        level += 1;
    }
}

/// Opens the writer, waiting while the killed one's lock goes away.
fn open_writer(dir: &str, options: &RepoOptions) -> Repo {
    loop {
        match Repo::open_with(dir, options.clone()) {
            Err(StoreError::Locked { .. }) => std::thread::sleep(Duration::from_millis(1)),
            other => break other.unwrap(),
        }
    }
}

/// Where the chain continues: the head's tree, the next level, the head as parent.
fn resume(repo: &Repo) -> (larch_core::Tree, u64, Vec<Hash>) {
    match repo.head() {
        Some(head) => {
            let level = repo.commit_details(&head).unwrap().info.date as u64 + 1;
            (repo.checkout(&head).unwrap(), level, vec![head])
        }
        None => (repo.empty_tree(), 0, vec![]),
    }
}

/// The pipelined writer: as [`child_writer`] through a `PipelinedRepo` of `depth`, carrying its
/// tree from commit to commit; when commit `n` returns, commit `n - depth` is durable and
/// acknowledged.
fn child_pipelined_writer(dir: &str, depth: usize) {
    let options = RepoOptions { cache_bytes: 4 << 20, chunk_bytes: 4096, ..RepoOptions::default() };
    let repo = open_writer(dir, &options);
    let (mut tree, mut level, mut parents) = resume(&repo);
    let mut repo = larch_store::PipelinedRepo::with_depth(repo, depth).unwrap();
    let mut in_flight = std::collections::VecDeque::new();
    loop {
        tree.add(&["k", &key(level)], value_of(level)).unwrap();
        let hash = repo.commit(&tree, &parents, CommitInfo::tezos(level as i64, "kill test")).unwrap();
        in_flight.push_back((hash, level));
        while in_flight.len() > depth {
            let Some((done, done_level)) = in_flight.pop_front() else { break };
            let mut out = std::io::stdout().lock();
            writeln!(out, "ack {} {done_level}", done.to_hex()).unwrap();
            out.flush().unwrap();
        }
        tree = repo.checkout(&hash).unwrap();
        parents = vec![hash];
        level += 1;
    }
}

/// `pipeline`: 0 for a plain writer, else the depth of its `PipelinedRepo`.
fn sigkill_at_random_moments_loses_nothing_acknowledged(kills: u32, sync: SyncPolicy, pipeline: usize) {
    let (mut rng, _) = seeded_rng("sigkill_at_random_moments_loses_nothing_acknowledged", 2024);
    let every = publish_every(sync);
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut acked_total: u32 = 0;
    let mut last_acked: Option<(Hash, u64)> = None;
    let mut previous_head: Option<u64> = None;
    let mut reader_checks = 0;
    for round in 0..kills {
        let mut child = Command::new(&exe)
            .env(DIR_VAR, dir.path())
            .env(SYNC_VAR, sync.to_string())
            .envs((pipeline > 0).then(|| (PIPELINE_VAR, pipeline.to_string())))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Meanwhile, a reader in this process follows the writer: every state it reloads is whole.
        let deadline = Instant::now() + Duration::from_millis(rng.random_range(5..60));
        let mut reader = Repo::open_read_only(dir.path()).ok();
        while Instant::now() < deadline {
            match reader.as_mut() {
                Some(reader) => {
                    reader.reload().unwrap();
                    if let Some(head) = reader.head() {
                        let level = reader.commit_details(&head).unwrap().info.date as u64;
                        let tree = reader.checkout(&head).unwrap();
                        assert!(
                            tree.find(&["k", &key(level + 1)]).unwrap().is_none(),
                            "round {round}: reader"
                        );
                        let value = tree.find(&["k", &key(level)]).unwrap().unwrap();
                        assert_eq!(value.as_bytes(), &value_of(level)[..], "round {round}: reader");
                        reader_checks += 1;
                    }
                }
                None => reader = Repo::open_read_only(dir.path()).ok(),
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let mut lines = Vec::new();
        for line in BufReader::new(child.stdout.take().unwrap()).lines() {
            let line = line.unwrap();
            lines.push(line.clone());
            // Only "ack" lines count.
            let mut words = line.split_whitespace().skip_while(|word| *word != "ack");
            if words.next() == Some("ack") {
                let hash = Hash::from_hex(words.next().unwrap()).unwrap();
                let level: u64 = words.next().unwrap().parse().unwrap();
                last_acked = Some((hash, level));
                acked_total += 1;
            }
        }
        let nothing_known = last_acked.is_none() && previous_head.is_none();
        let repo = match Repo::open_read_only(dir.path()) {
            Ok(repo) => repo,
            // Killed before the store was first published.
            Err(StoreError::NotAStore { .. }) if nothing_known => continue,
            Err(e) => panic!("round {round}: {e}"),
        };
        let Some(head) = repo.head() else {
            assert!(nothing_known, "round {round}: the head was lost");
            continue;
        };
        let level = repo.commit_details(&head).unwrap().info.date as u64;
        // The head is the newest commit known to be published (acknowledged, or seen at the end
        // of the previous round), or the publish in flight when killed (staged commits between
        // publishes are lost: they were not acknowledged).
        // A pipelined writer acknowledges a commit once `pipeline` more returned: those may be
        // durable too, and one more in flight.
        let known = last_acked.map(|(_, level)| level).max(previous_head);
        let ahead = pipeline as u64 + 1;
        match known {
            None if pipeline > 0 => {
                assert!(level < ahead, "round {round}: head {level}, nothing acknowledged")
            }
            None => assert_eq!(level + 1, every, "round {round}"),
            Some(known) => {
                let allowed = if pipeline > 0 {
                    (known..=known + ahead).contains(&level)
                } else {
                    level == known || level == known + every
                };
                assert!(
                    allowed,
                    "round {round}: head {level}, known {known}: {:?}",
                    &lines[lines.len().saturating_sub(3)..]
                )
            }
        }
        if let Some((acked_hash, _)) = last_acked {
            assert!(
                repo.log(&head).unwrap().contains(&acked_hash),
                "round {round}: acknowledged commit lost"
            );
        }
        let log = repo.log(&head).unwrap();
        assert_eq!(log.len() as u64, level + 1, "round {round}");
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
        previous_head = Some(level);
    }
    eprintln!(
        "sync {sync}{}: {kills} kills, {acked_total} commits acknowledged, {reader_checks} reader checks",
        if pipeline > 0 { format!(", pipelined, depth {pipeline}") } else { String::new() }
    );
    // Every round gives the writer time for a few commits (each published one acknowledged).
    assert!(
        u64::from(acked_total) * every >= u64::from(kills),
        "only {acked_total} commits acknowledged in {kills} rounds"
    );
    assert!(reader_checks >= kills, "the concurrent reader checked only {reader_checks} states");
    // A last writer continues the history.
    let mut repo = Repo::open(dir.path()).unwrap();
    // The writers rolled through several chunk files (the reader followed them). How many
    // depends on how fast the killed writers ran on this machine, so only a few are required.
    let chunks = repo.chunk_files().len();
    eprintln!("sync {sync}: {chunks} chunk files");
    assert!(chunks >= 4, "only {chunks} chunk files");
    let head = repo.head().unwrap();
    let mut tree = repo.checkout(&head).unwrap();
    tree.add(&["done"], b"1".to_vec()).unwrap();
    let last = repo.commit(&tree, &[head], CommitInfo::tezos(0, "end")).unwrap();
    assert_eq!(repo.head(), Some(last));
}

/// A writer process runs; the `lock` file (format 1's lock; format 2 locks the directory) is deleted
/// under it; a second writer in this process is still refused, the first goes on committing, and
/// after it is killed the store holds every commit it acknowledged.
fn deleting_the_lock_file_lets_no_second_writer_in() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("lock"), b"").unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(&exe)
        .env(DIR_VAR, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut acked = Vec::new();
    let mut next_ack = |acked: &mut Vec<Hash>| {
        let line = lines.next().unwrap().unwrap();
        let hash = line.split_whitespace().nth(1).unwrap();
        acked.push(Hash::from_hex(hash).unwrap());
    };
    next_ack(&mut acked);
    std::fs::remove_file(dir.path().join("lock")).unwrap();
    for _ in 0..3 {
        assert!(matches!(Repo::open(dir.path()), Err(StoreError::Locked { .. })), "a second writer got in");
        next_ack(&mut acked);
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let repo = Repo::open(dir.path()).unwrap();
    let log = repo.log(&repo.head().unwrap()).unwrap();
    for hash in &acked {
        assert!(log.contains(hash), "acknowledged commit {hash} lost");
    }
    assert!(repo.fsck().is_clean());
    eprintln!(
        "crash_kill: the second writer was refused while the first ran ({} commits acknowledged)",
        acked.len()
    );
}
