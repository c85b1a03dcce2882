//! The README's quickstart for the on-disk store: create a store, commit two versions of a tree,
//! read them back as a reader, check the store.
//!
//! ```sh
//! cargo run --release -p larch-store --example quickstart            # in a temporary directory
//! cargo run --release -p larch-store --example quickstart -- /tmp/qs # keep the store, then e.g.
//! larch log /tmp/qs; larch ls /tmp/qs data; larch fsck /tmp/qs
//! ```

use larch_core::CommitInfo;
use larch_store::{Repo, RepoOptions, SyncPolicy};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The store directory: the first argument (it must be new or empty), else a temporary one.
    let temp = tempfile::tempdir()?;
    let path = std::env::args_os().nth(1).map_or_else(|| temp.path().join("store"), Into::into);

    // Open the store as its one writer (created when absent). Under `SyncPolicy::Commit`, the
    // default, a commit that returned is durable and visible to readers in other processes.
    let options = RepoOptions { sync: SyncPolicy::Commit, ..RepoOptions::default() };
    let mut repo = Repo::open_with(&path, options)?;

    // A tree maps paths to byte values. This one is the Tezos mainnet genesis context, so its
    // commit hash is the one Tezos computed.
    let mut tree = repo.empty_tree();
    tree.add(&["data", "version"], b"genesis".to_vec())?;
    let protocol = hex::decode("38ecdef0cd08640f318a9b055f6b0d0c9ae030913a871d9b9d86fb846317da21")?;
    tree.add(&["protocol"], protocol)?;
    tree.add(&["test_chain"], vec![0u8])?;
    let genesis = repo.commit(&tree, &[], CommitInfo::tezos(1530374852, "Genesis"))?;
    assert_eq!(genesis.to_string(), "CoV8SQumiVU9saiu3FVNeDNewJaJH8yWdsGF3WLdsRr2P9S7MzCj");

    // The next version: check out the parent (read lazily from disk), change it, commit on top.
    let account = ["data", "contracts", "index", "0000e7670f32038107a59a2b9cfefae36ea21f5aa63c", "balance"];
    let mut tree = repo.checkout(&genesis)?;
    tree.add(&account, b"1000000".to_vec())?;
    tree.remove(&["test_chain"])?;
    let block1 = repo.commit(&tree, &[genesis], CommitInfo::tezos(1530374882, "block 1"))?;
    assert_eq!(repo.head(), Some(block1)); // `commit` moves the branch `main`
    repo.close()?; // publishes anything staged, syncs, releases the writer's lock

    // A reader takes no lock: it may run in another process while a writer commits (`reload`
    // shows it the new commits). Every commit stays readable.
    let reader = Repo::open_read_only(&path)?;
    let head = reader.head().ok_or("the store has no head")?;
    let now = reader.checkout(&head)?;
    let balance = now.find(&account)?.ok_or("no balance")?;
    assert_eq!(balance.as_bytes(), b"1000000");
    assert!(!now.mem(&["test_chain"])? && reader.checkout(&genesis)?.mem(&["test_chain"])?);
    assert_eq!(reader.log(&head)?, vec![block1, genesis]);

    let report = reader.fsck(); // the integrity check: every commit, object, hash and offset
    assert!(report.is_clean(), "{:?}", report.problems);
    println!("store {}: head {head}, {} commits, fsck clean", path.display(), reader.commit_count());
    Ok(())
}
