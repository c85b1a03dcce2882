//! A [`TreeSink`] for tests: it recomputes every object's hash from what it is given (children by
//! their keys), checks each reference's hash against the object it names, and so checks that a
//! streamed tree arrives children first and hashes to what Irmin recorded.
#![allow(dead_code)]

use larch_core::schema::{self, Kind};
use larch_core::{Hash, ObjectKey, StoreId};
use larch_irmin::{SinkError, SinkTarget, TreeSink};

#[derive(Default)]
pub struct HashingSink {
    /// The hash of the object written under each key (key = index).
    pub hashes: Vec<Hash>,
    pub flat: usize,
    pub values: usize,
    pub trees: usize,
    /// The identity of its keys.
    pub store: Option<StoreId>,
}

impl HashingSink {
    fn check(&self, key: ObjectKey, hash: &Hash) -> Result<(), SinkError> {
        let key = key.offset_in(self.store.ok_or("no key written yet")?).ok_or("a key of another sink")?;
        match self.hashes.get(key as usize) {
            Some(known) if known == hash => Ok(()),
            Some(known) => Err(format!("key {key} holds {known}, the reference says {hash}").into()),
            None => Err(format!("key {key} not written yet").into()),
        }
    }

    fn entries(&self, entries: &[(&[u8], SinkTarget<'_>)]) -> Result<Vec<(Vec<u8>, Kind, Hash)>, SinkError> {
        entries
            .iter()
            .map(|(name, target)| {
                Ok(match *target {
                    SinkTarget::Node { hash, key } => {
                        self.check(key, &hash)?;
                        (name.to_vec(), Kind::Node, hash)
                    }
                    SinkTarget::Contents { hash, key } => {
                        self.check(key, &hash)?;
                        (name.to_vec(), Kind::Contents, hash)
                    }
                    SinkTarget::Inline(bytes) => {
                        (name.to_vec(), Kind::Contents, schema::contents_hash(bytes))
                    }
                })
            })
            .collect()
    }

    fn push(&mut self, hash: Hash) -> ObjectKey {
        self.hashes.push(hash);
        ObjectKey::new(*self.store.get_or_insert_with(StoreId::fresh), (self.hashes.len() - 1) as u64)
    }
}

impl TreeSink for HashingSink {
    fn inline_max(&self) -> usize {
        32
    }

    fn contents(&mut self, bytes: &[u8]) -> Result<ObjectKey, SinkError> {
        Ok(self.push(schema::contents_hash(bytes)))
    }

    fn flat(&mut self, entries: &[(&[u8], SinkTarget<'_>)]) -> Result<ObjectKey, SinkError> {
        let list = self.entries(entries)?;
        self.flat += 1;
        Ok(self.push(schema::flat_node_hash(list.len(), list.iter().map(|(n, k, h)| (n.as_slice(), *k, *h)))))
    }

    fn values(&mut self, entries: &[(&[u8], SinkTarget<'_>)]) -> Result<ObjectKey, SinkError> {
        let list = self.entries(entries)?;
        self.values += 1;
        Ok(self
            .push(schema::values_inode_hash(list.len(), list.iter().map(|(n, k, h)| (n.as_slice(), *k, *h)))))
    }

    fn tree(
        &mut self,
        depth: u8,
        length: u64,
        children: &[(u8, Hash, ObjectKey)],
    ) -> Result<ObjectKey, SinkError> {
        for (_, hash, key) in children {
            self.check(*key, hash)?;
        }
        self.trees += 1;
        Ok(self.push(schema::tree_inode_hash(
            depth,
            length,
            children.len(),
            children.iter().map(|(b, h, _)| (*b, *h)),
        )))
    }
}
