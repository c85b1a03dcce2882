//! The reference model of a context: a plain `BTreeMap` from path to value, with the tree semantics
//! of spec §6 (adding through contents replaces it, removing prunes empty directories).

use std::collections::BTreeMap;

/// A path: its steps as byte strings.
pub type Path = Vec<Vec<u8>>;

/// A trivially correct context: the set of (path, value) bindings of contents.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Model {
    /// Every contents binding, by full path.
    pub values: BTreeMap<Path, Vec<u8>>,
}

fn starts_with(path: &Path, prefix: &[Vec<u8>]) -> bool {
    path.len() >= prefix.len() && path.iter().zip(prefix).all(|(a, b)| a == b)
}

impl Model {
    /// An empty model.
    pub fn new() -> Model {
        Model::default()
    }

    /// The value at `path`, if contents.
    pub fn find(&self, path: &[Vec<u8>]) -> Option<&Vec<u8>> {
        self.values.get(path)
    }

    /// Whether `path` is contents.
    pub fn mem(&self, path: &[Vec<u8>]) -> bool {
        self.values.contains_key(path)
    }

    /// Whether `path` is contents or a (necessarily non-empty) directory; the root always exists.
    pub fn mem_tree(&self, path: &[Vec<u8>]) -> bool {
        path.is_empty()
            || self.values.range(path.to_vec()..).next().is_some_and(|(key, _)| starts_with(key, path))
    }

    /// Sets `path` to `value`: drops any contents on a proper prefix of `path` and anything below it.
    pub fn add(&mut self, path: &[Vec<u8>], value: Vec<u8>) {
        for cut in 0..path.len() {
            self.values.remove(&path[..cut]);
        }
        self.remove_below(path);
        self.values.insert(path.to_vec(), value);
    }

    fn remove_below(&mut self, path: &[Vec<u8>]) {
        let doomed: Vec<Path> = self
            .values
            .range(path.to_vec()..)
            .take_while(|(key, _)| starts_with(key, path))
            .map(|(key, _)| key.clone())
            .collect();
        for key in doomed {
            self.values.remove(&key);
        }
    }

    /// Removes the contents or sub-tree at `path`.
    pub fn remove(&mut self, path: &[Vec<u8>]) {
        self.remove_below(path);
    }

    /// Grafts the sub-tree at `from` onto `to` (a missing or empty source removes `to`).
    pub fn copy(&mut self, from: &[Vec<u8>], to: &[Vec<u8>]) {
        let moved: Vec<(Path, Vec<u8>)> = self
            .values
            .range(from.to_vec()..)
            .take_while(|(key, _)| starts_with(key, from))
            .map(|(key, value)| {
                let mut target = to.to_vec();
                target.extend_from_slice(&key[from.len()..]);
                (target, value.clone())
            })
            .collect();
        if moved.is_empty() {
            return;
        }
        for cut in 0..to.len() {
            self.values.remove(&to[..cut]);
        }
        self.remove_below(to);
        self.values.extend(moved);
    }

    /// Sorted names directly below the directory `path`, each with whether it is contents.
    pub fn list(&self, path: &[Vec<u8>]) -> Vec<(Vec<u8>, bool)> {
        let mut out: Vec<(Vec<u8>, bool)> = Vec::new();
        for (key, _) in self.values.range(path.to_vec()..).take_while(|(key, _)| starts_with(key, path)) {
            if let Some(step) = key.get(path.len()) {
                let is_contents = key.len() == path.len() + 1;
                if out.last().map(|(name, _)| name) != Some(step) {
                    out.push((step.clone(), is_contents));
                }
            }
        }
        out
    }
}
