//! Random tree operations for model-based tests: paths drawn from a small alphabet (so that
//! collisions, contents standing in the way and pruning of emptied directories happen often), plus
//! an optional "wide" directory whose names come from a large set, so it grows past 256 entries
//! (an inode trie) and can shrink back.

use crate::model::{Model, Path};
use rand::Rng;

/// One operation on a context tree, with the operands a test replays on both the tree under test
/// and the [`Model`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// `add path value`.
    Add(Path, Vec<u8>),
    /// `remove path`.
    Remove(Path),
    /// `copy from to` (Tezos `Context.copy`: a missing source changes nothing).
    Copy {
        /// Source path.
        from: Path,
        /// Destination path.
        to: Path,
    },
    /// `add_tree path tree` with a freshly built tree (an empty one removes `path`).
    AddTree {
        /// Where the tree is grafted.
        path: Path,
        /// The grafted tree, as bindings relative to `path` (a binding at the empty relative path
        /// makes the grafted tree a contents value).
        tree: Model,
    },
}

/// Settings of the random operation generator. All fields are public so tests can tune them
/// between phases (for example a growth phase, then a shrinking phase).
#[derive(Clone, Debug)]
pub struct OpGen {
    /// Steps ordinary paths are made of.
    pub alphabet: Vec<Vec<u8>>,
    /// Maximum number of steps of an ordinary path (at least 1).
    pub max_depth: usize,
    /// Probability that a path is the empty path (the root).
    pub root_path_ratio: f64,
    /// The directory that receives many entries (none when `wide_names` is 0).
    pub wide_dir: Path,
    /// Number of distinct names available in the wide directory (`w0`, `w1`, ...).
    pub wide_names: u32,
    /// Probability that a path points into the wide directory.
    pub wide_ratio: f64,
    /// Relative weights of add, remove, copy and add_tree.
    pub weights: [u32; 4],
    /// Values are 0..=`max_value_len` bytes long (with a few longer ones when it is above 32).
    pub max_value_len: usize,
}

impl Default for OpGen {
    /// Four one-letter steps, depth up to 3, a wide directory `["w"]` of 600 names.
    fn default() -> OpGen {
        OpGen {
            alphabet: [b"a", b"b", b"c", b"d"].iter().map(|step| step.to_vec()).collect(),
            max_depth: 3,
            root_path_ratio: 0.003,
            wide_dir: vec![b"w".to_vec()],
            wide_names: 600,
            wide_ratio: 0.5,
            weights: [60, 25, 8, 7],
            max_value_len: 48,
        }
    }
}

impl OpGen {
    /// A random path: usually 1..=`max_depth` alphabet steps, sometimes a name in the wide
    /// directory (itself sometimes followed by one more step), rarely the empty path.
    pub fn path(&self, rng: &mut impl Rng) -> Path {
        if rng.random_bool(self.root_path_ratio) {
            return Vec::new();
        }
        if self.wide_names > 0 && rng.random_bool(self.wide_ratio) {
            let mut path = self.wide_dir.clone();
            path.push(format!("w{}", rng.random_range(0..self.wide_names)).into_bytes());
            if rng.random_bool(0.05) {
                path.push(self.step(rng));
            }
            return path;
        }
        let depth = rng.random_range(1..=self.max_depth.max(1));
        (0..depth).map(|_| self.step(rng)).collect()
    }

    fn step(&self, rng: &mut impl Rng) -> Vec<u8> {
        match self.alphabet.len() {
            0 => b"x".to_vec(),
            len => self.alphabet[rng.random_range(0..len)].clone(),
        }
    }

    /// A random value; lengths cross 32 bytes (where stores start to keep contents out of line).
    pub fn value(&self, rng: &mut impl Rng) -> Vec<u8> {
        let len = if self.max_value_len > 32 && rng.random_bool(0.1) {
            rng.random_range(33..=self.max_value_len.max(33) * 4)
        } else {
            rng.random_range(0..=self.max_value_len)
        };
        (0..len).map(|_| rng.random::<u8>()).collect()
    }

    /// A small random tree to graft: empty (15%), a contents value (15%), else 1 to 4 bindings
    /// one or two steps deep.
    pub fn subtree(&self, rng: &mut impl Rng) -> Model {
        let mut tree = Model::new();
        let roll = rng.random_range(0..100);
        if roll < 15 {
            return tree;
        }
        if roll < 30 {
            tree.add(&[], self.value(rng));
            return tree;
        }
        for _ in 0..rng.random_range(1..=4) {
            let depth = rng.random_range(1..=2);
            let path: Path = (0..depth).map(|_| self.step(rng)).collect();
            tree.add(&path, self.value(rng));
        }
        tree
    }

    /// A random operation, chosen by `weights`.
    pub fn op(&self, rng: &mut impl Rng) -> Op {
        let total: u32 = self.weights.iter().sum();
        let mut roll = rng.random_range(0..total.max(1));
        let mut choice = 0;
        for (index, weight) in self.weights.iter().enumerate() {
            if roll < *weight {
                choice = index;
                break;
            }
            roll -= weight;
        }
        match choice {
            0 => Op::Add(self.path(rng), self.value(rng)),
            1 => Op::Remove(self.path(rng)),
            2 => Op::Copy { from: self.path(rng), to: self.path(rng) },
            _ => Op::AddTree { path: self.path(rng), tree: self.subtree(rng) },
        }
    }
}

impl Model {
    /// Grafts `tree` (bindings relative to `path`) at `path`; an empty `tree` removes `path`.
    pub fn add_tree(&mut self, path: &[Vec<u8>], tree: &Model) {
        if tree.values.is_empty() {
            self.remove(path);
            return;
        }
        let mut grafted = Model::new();
        for (relative, value) in &tree.values {
            let mut full = path.to_vec();
            full.extend_from_slice(relative);
            grafted.values.insert(full, value.clone());
        }
        // Clear what stands at or above `path`, then insert the new bindings.
        self.add(path, Vec::new());
        self.values.remove(path);
        self.values.extend(grafted.values);
    }

    /// Applies `op`.
    pub fn apply(&mut self, op: &Op) {
        match op {
            Op::Add(path, value) => self.add(path, value.clone()),
            Op::Remove(path) => self.remove(path),
            Op::Copy { from, to } => self.copy(from, to),
            Op::AddTree { path, tree } => self.add_tree(path, tree),
        }
    }

    /// Every directory path: the root and each proper prefix of a binding's path.
    pub fn directories(&self) -> std::collections::BTreeSet<Path> {
        let mut out = std::collections::BTreeSet::new();
        out.insert(Vec::new());
        for path in self.values.keys() {
            for cut in 1..path.len() {
                out.insert(path[..cut].to_vec());
            }
        }
        out
    }
}
