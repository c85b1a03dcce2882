//! Model-based test: random operations and commits (with branching) mirrored into a `BTreeMap`
//! model per commit, compared after each commit, after reopening, and by a reader; then fsck.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::{contents_of, info, random_op};
use larch_core::Hash;
use larch_store::{Repo, RepoOptions, SyncPolicy};
use larch_testkit::{Model, seeded_rng};
use rand::Rng;
use std::collections::HashMap;

#[test]
fn random_histories_match_the_model() {
    let (mut rng, _seed) = seeded_rng("random_histories_match_the_model", 0x5eed_0001);
    let dir = tempfile::tempdir().unwrap();
    // The writer reads through a memory map (readers use positioned reads by default).
    let options =
        RepoOptions { sync: SyncPolicy::Every(3), cache_bytes: 64 << 10, mmap: true, ..Default::default() };
    let mut repo = Repo::open_with(dir.path(), options.clone()).unwrap();
    let mut models: HashMap<Hash, Model> = HashMap::new();
    let mut history: Vec<Hash> = Vec::new();
    let mut patches = 0;
    for block in 0..40u64 {
        let (mut tree, mut model, parents) = match (history.is_empty(), rng.random_range(0..5)) {
            (true, _) => (repo.empty_tree(), Model::new(), vec![]),
            // Sometimes fork from an older commit.
            (false, 0) => {
                let parent = history[rng.random_range(0..history.len())];
                (repo.checkout(&parent).unwrap(), models[&parent].clone(), vec![parent])
            }
            (false, _) => {
                let parent = *history.last().unwrap();
                (repo.checkout(&parent).unwrap(), models[&parent].clone(), vec![parent])
            }
        };
        for _ in 0..rng.random_range(1..40) {
            random_op(&mut rng, &mut tree, &mut model);
        }
        let hash = repo.commit(&tree, &parents, info(block)).unwrap();
        patches += repo.last_write().patches;
        assert_eq!(contents_of(&repo.checkout(&hash).unwrap()), model.values, "block {block}");
        if !history.contains(&hash) {
            history.push(hash);
        }
        models.insert(hash, model);
    }
    assert!(patches > 0, "no commit wrote a patch record");
    let head = *history.last().unwrap();
    assert_eq!(repo.head(), Some(head));
    assert!(repo.stats().cache_hits > 0);
    repo.close().unwrap();

    let reader = Repo::open_read_only(dir.path()).unwrap();
    let mut repo = Repo::open_with(dir.path(), options).unwrap();
    for (hash, model) in &models {
        assert_eq!(&contents_of(&reader.checkout(hash).unwrap()), &model.values);
    }
    let report = reader.fsck();
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.stats.commits as usize, models.len());
    // The reopened writer continues the history.
    let mut tree = repo.checkout(&head).unwrap();
    tree.add(&["after", "reopen"], b"yes".to_vec()).unwrap();
    let next = repo.commit(&tree, &[head], info(99)).unwrap();
    assert_eq!(repo.log(&next).unwrap().first(), Some(&next));
    assert!(repo.log(&next).unwrap().contains(&head));
}
