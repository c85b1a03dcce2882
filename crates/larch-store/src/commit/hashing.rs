//! Hashing a commit's tree on two threads when it is large: the dirty subtrees `larch-core` cuts
//! out ([`Tree::dirty_subtrees`]) are shared between the committing thread and one helper, taking
//! them sixteen at a time from a common counter (each part hashed level by level, its pre-images
//! batched: [`Node::hash_all`]); the few nodes above them are hashed last, on the committing thread.
//! The hashes are those of [`Tree::hash`] alone (each node's hash is computed once, from the same
//! pre-image, whichever thread computes it).

use larch_core::{Hash, Node, Tree};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Below this many dirty nodes, a tree is hashed on the committing thread only: starting a thread
/// (~50 µs) and cutting the work must be paid by the hashing saved. A regular block of the default
/// trace rewrites ~1,000 nodes, a large burst ~16,000 directories.
pub(crate) const PARALLEL_MIN_DIRTY: usize = 1024;

/// Subtrees a thread takes at a time, hashed together (their pre-images batched level by level,
/// [`Node::hash_all`]): a few hundred subtrees are then shared in a few dozen parts.
const SUBTREES_PER_TAKE: usize = 16;

/// The hash of `tree`, its dirty subtrees hashed on two threads when there are enough of them.
pub(crate) fn tree_hash(tree: &Tree) -> Hash {
    let work = tree.dirty_subtrees(PARALLEL_MIN_DIRTY);
    if !work.is_empty() {
        let next = AtomicUsize::new(0);
        let run = || {
            loop {
                let start = next.fetch_add(SUBTREES_PER_TAKE, Ordering::Relaxed);
                let Some(part) = work.get(start..).filter(|part| !part.is_empty()) else { break };
                Node::hash_all(part.get(..SUBTREES_PER_TAKE).unwrap_or(part));
            }
        };
        std::thread::scope(|scope| {
            // If the system refuses the helper thread, the committing thread does it all.
            let _helper = std::thread::Builder::new().name("larch-hash".into()).spawn_scoped(scope, run);
            run();
        });
    }
    tree.hash()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn build(dirs: usize) -> Tree {
        let mut tree = Tree::empty();
        for d in 0..dirs {
            for v in ["balance", "counter"] {
                let path = ["data".to_string(), format!("g{}", d % 5), format!("acct{d}"), v.to_string()];
                tree.add(&path, format!("{d}:{v}").into_bytes()).unwrap();
            }
        }
        tree
    }

    #[test]
    fn two_threads_give_the_serial_hashes() {
        for dirs in [10, 2000, 6000] {
            let parallel = build(dirs);
            let serial = build(dirs);
            assert_eq!(parallel.dirty_subtrees(PARALLEL_MIN_DIRTY).is_empty(), dirs < 1000, "{dirs}");
            assert_eq!(tree_hash(&parallel), serial.hash(), "{dirs} directories");
            // And after a change of a few paths (a small dirty part again).
            let (mut parallel, mut serial) = (parallel, serial);
            for tree in [&mut parallel, &mut serial] {
                tree.add(&["data", "g1", "acct1", "balance"], b"changed".to_vec()).unwrap();
                tree.remove(&["data", "g2", "acct2"]).unwrap();
            }
            assert_eq!(tree_hash(&parallel), serial.hash(), "{dirs} directories, changed");
        }
    }
}
