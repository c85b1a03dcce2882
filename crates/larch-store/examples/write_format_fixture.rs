//! Writes the small store checked in as `tests/data/format-v2/` (test `format_fixture`): three
//! commits on `main` and a branch `side`, with inline and large contents, a hex-named directory, a
//! directory large enough to be an inode tree, and a rewrite stored as a patch. Deterministic.
//!
//! `cargo run --release -p larch-store --example write_format_fixture -- DIR` (DIR must not exist).
//!
//! Since format 3 (chunked pack) this writes the same commits in format 3 (`chunk.000000` instead
//! of `pack`, layout-3 control slots): the checked-in format-2 fixture was written by the format-2
//! build and is kept as it is (it is the compatibility test's input).

use larch_core::CommitInfo;
use larch_store::{Repo, RepoOptions, SyncPolicy};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args().nth(1).ok_or("usage: write_format_fixture DIR")?;
    if std::path::Path::new(&dir).exists() {
        return Err(format!("{dir} exists").into());
    }
    let mut repo = Repo::open_with(&dir, RepoOptions { sync: SyncPolicy::Commit, ..RepoOptions::default() })?;
    let mut tree = repo.empty_tree();
    tree.add(&["data", "version"], b"genesis".to_vec())?;
    tree.add(&["00ff"], vec![9u8; 33])?;
    let first = repo.commit(&tree, &[], CommitInfo::tezos(1530374852, "Genesis"))?;
    for i in 0..300u32 {
        tree.add(&["big", &format!("{:08x}", i.wrapping_mul(2654435761))], i.to_le_bytes().to_vec())?;
    }
    let second = repo.commit(&tree, &[first], CommitInfo::tezos(1530374882, "lvl 1"))?;
    repo.set_branch("side", &second)?;
    let mut tree = repo.checkout(&second)?;
    tree.add(&["big", "00000000"], b"changed".to_vec())?;
    tree.remove(&["00ff"])?;
    tree.add(&["contracts", "index", "deadbeef", "balance"], vec![7u8; 100])?;
    let third = repo.commit(&tree, &[second], CommitInfo::tezos(1530374912, "lvl 2"))?;
    repo.close()?;
    println!("{first}\n{second}\n{third}");
    Ok(())
}
