//! A reader far behind the writer follows its rolls within its pool of descriptors (issue 40 item
//! 2): every chunk the writer rolled to since the reader's last reload enters the reader's pool as
//! soon as it is opened, so the reload needs one descriptor beyond the pool, not one per new
//! chunk. Its own test binary: the descriptor limit lowered here binds nothing else.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_core::{CommitInfo, Hash};
use larch_store::{Repo, RepoOptions, StoreError, SyncPolicy};
use rustix::process::{Resource, getrlimit, setrlimit};

/// Chunks the writer rolls to while the reader does not look.
const ROLLS: u64 = 300;
/// The pools' capacity.
const OPEN_FILES: usize = 4;
/// Descriptors the reload may open beyond those open before it.
const SPARE: u64 = 32;

fn open_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd").unwrap().count() as u64
}

fn key(i: u64) -> String {
    format!("{i:04}")
}

fn value(i: u64) -> Vec<u8> {
    format!("value {i}").into_bytes()
}

#[test]
fn a_reader_far_behind_the_writer_reloads_within_its_pool() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    // One commit per chunk: the writer rolls at every commit once the head holds a byte.
    let options = RepoOptions {
        chunk_bytes: 1,
        open_files: OPEN_FILES,
        sync: SyncPolicy::Commit,
        ..RepoOptions::default()
    };
    let mut writer = Repo::open_with(dir.path(), options.clone()).unwrap();
    let mut tree = writer.empty_tree();
    tree.add(&["k", &key(0)], value(0)).unwrap();
    let mut head: Hash = writer.commit(&tree, &[], CommitInfo::tezos(0, "c")).unwrap();
    let mut reader = Repo::open_read_only_options(dir.path(), options).unwrap();
    let chunks_before = reader.stats().chunk_files;
    for i in 1..=ROLLS {
        tree.add(&["k", &key(i)], value(i)).unwrap();
        head = writer.commit(&tree, &[head], CommitInfo::tezos(i as i64, "c")).unwrap();
    }

    // Few descriptors to spare: a reload that opened every new chunk before closing any would
    // run out (EMFILE) about `SPARE` chunks in.
    let saved = getrlimit(Resource::Nofile);
    let soft = open_fds() + SPARE;
    setrlimit(Resource::Nofile, rustix::process::Rlimit { current: Some(soft), maximum: saved.maximum })
        .unwrap();
    let reloaded = reader.reload();
    setrlimit(Resource::Nofile, saved).unwrap();
    let reloaded = match reloaded {
        Ok(changed) => changed,
        // Out of descriptors, the error names the chunk it could not open.
        Err(StoreError::OpenFile { name, op, source }) => {
            panic!("the reload ran out of descriptors: {op} of {name}: {source}")
        }
        Err(other) => panic!("the reload: {other}"),
    };
    assert!(reloaded, "the reader saw nothing new");

    let stats = reader.stats();
    assert!(stats.chunk_files >= chunks_before + ROLLS, "{chunks_before} chunks before: {stats:?}");
    assert!(stats.chunk_files_open <= OPEN_FILES as u64, "{stats:?}");
    // Old and new commits read back through the pool.
    assert_eq!(reader.head(), Some(head));
    let tree = reader.checkout(&head).unwrap();
    for i in [0, ROLLS / 2, ROLLS] {
        assert_eq!(tree.find(&["k", &key(i)]).unwrap().expect("a value").as_bytes(), value(i), "key {i}");
    }
    writer.close().unwrap();
}
