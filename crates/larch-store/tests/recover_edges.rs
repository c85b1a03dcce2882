//! `larch recover` at its edges (issue 39): a plan applied after a writer published meanwhile is
//! refused instead of rewriting the store to the stale plan (item 4).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use larch_core::{CommitInfo, Hash};
use larch_store::testing::fault::FaultController;
use larch_store::testing::plan_recovery_files;
use larch_store::testing::storage::StoreFiles;
use larch_store::{Repo, RepoOptions, StoreError, plan_recovery};

fn info(n: i64) -> CommitInfo {
    CommitInfo::tezos(1530374852 + 30 * n, format!("lvl {n}"))
}

/// With the writer `repo`, adds `n` commits after `hashes` (a chain), closes it.
fn commit_more(mut repo: Repo, hashes: &mut Vec<Hash>, n: usize) {
    let mut tree = match hashes.last() {
        Some(head) => repo.checkout(head).unwrap(),
        None => repo.empty_tree(),
    };
    for _ in 0..n {
        let i = hashes.len();
        tree.add(&["k", &format!("{i:04}")], format!("v{i}").into_bytes()).unwrap();
        let parents: Vec<Hash> = hashes.last().copied().into_iter().collect();
        hashes.push(repo.commit(&tree, &parents, info(i as i64)).unwrap());
    }
    repo.close().unwrap();
}

fn assert_holds(repo: &Repo, hashes: &[Hash]) {
    assert_eq!(repo.head(), hashes.last().copied());
    assert_eq!(repo.commit_count(), hashes.len());
    for hash in hashes {
        repo.checkout(hash).unwrap();
    }
    assert!(repo.fsck().is_clean(), "{}", repo.fsck());
}

/// Item 4 on disk: `recover` plans (no lock), a writer opens, publishes three commits and closes,
/// then `--apply` runs. Before the fix it rewrote the index and both slots from the plan, dropping
/// the three acknowledged commits; now it is refused with `StalePlan`, writes nothing, and a new
/// plan keeps them.
#[test]
fn a_plan_made_before_a_writer_published_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut hashes = Vec::new();
    commit_more(Repo::open(dir.path()).unwrap(), &mut hashes, 4);
    let plan = plan_recovery(dir.path()).unwrap();
    assert_eq!(plan.chosen.as_ref().map(|found| found.hash), hashes.last().copied());
    commit_more(Repo::open(dir.path()).unwrap(), &mut hashes, 3);
    let control = std::fs::read(dir.path().join("control")).unwrap();
    let index = std::fs::read(dir.path().join("commits")).unwrap();
    let error = plan.apply().unwrap_err();
    assert!(matches!(error, StoreError::StalePlan { .. }), "{error}");
    assert!(error.to_string().contains("larch recover"), "{error}");
    assert_eq!(std::fs::read(dir.path().join("control")).unwrap(), control, "refused, yet control changed");
    assert_eq!(std::fs::read(dir.path().join("commits")).unwrap(), index, "refused, yet the index changed");
    assert_holds(&Repo::open(dir.path()).unwrap(), &hashes);
    let plan = plan_recovery(dir.path()).unwrap();
    assert_eq!(plan.chosen.as_ref().map(|found| found.hash), hashes.last().copied());
    plan.apply().unwrap();
    assert_holds(&Repo::open(dir.path()).unwrap(), &hashes);
}

/// A plan made while a writer is open and publishing: applying it while the writer holds the lock
/// is refused (`Locked`), and after the writer closed (having published more) it is stale.
#[test]
fn a_plan_made_beside_a_live_writer_never_applies() {
    let dir = tempfile::tempdir().unwrap();
    let mut hashes = Vec::new();
    commit_more(Repo::open(dir.path()).unwrap(), &mut hashes, 2);
    let mut writer = Repo::open(dir.path()).unwrap();
    let plan = plan_recovery(dir.path()).unwrap();
    let mut tree = writer.checkout(hashes.last().unwrap()).unwrap();
    tree.add(&["live"], b"1".to_vec()).unwrap();
    hashes.push(writer.commit(&tree, &[*hashes.last().unwrap()], info(99)).unwrap());
    assert!(matches!(plan.apply(), Err(StoreError::Locked { .. })));
    writer.close().unwrap();
    assert!(matches!(plan.apply(), Err(StoreError::StalePlan { .. })));
    assert_holds(&Repo::open(dir.path()).unwrap(), &hashes);
}

/// Item 4 through the fault-injecting storage (`plan_recovery_files`, `apply_to`: the same check
/// without the directory lock), the writer publishing between plan and apply.
#[test]
fn a_stale_plan_is_refused_on_any_storage() {
    let controller = FaultController::new();
    let files = || -> StoreFiles { controller.files() };
    let options = || RepoOptions { cache_bytes: 1 << 20, ..RepoOptions::default() };
    let mut hashes = Vec::new();
    commit_more(Repo::open_files(files(), true, options(), None).unwrap(), &mut hashes, 3);
    let plan = plan_recovery_files(files()).unwrap();
    commit_more(Repo::open_files(files(), true, options(), None).unwrap(), &mut hashes, 2);
    assert!(matches!(plan.apply_to(&files()), Err(StoreError::StalePlan { .. })));
    assert_holds(&Repo::open_files(files(), false, options(), None).unwrap(), &hashes);
    // Planned again, the plan applies and keeps all five.
    plan_recovery_files(files()).unwrap().apply_to(&files()).unwrap();
    assert_holds(&Repo::open_files(files(), true, options(), None).unwrap(), &hashes);
}
