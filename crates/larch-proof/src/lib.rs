//! larch-proof: Merkle proofs of the Tezos context, as Irmin's `Tree.produce_proof` /
//! `Tree.verify_proof` make and check them and Octez ships them (`Merkle_proof_encoding`).
//!
//! A verifier a light client can embed: `no_std` + `alloc`, depending only on BLAKE2b (and on
//! `larch-varint`, the workspace's LEB128, itself `no_std` without dependencies). It holds
//! - the proof tree ([`Proof`], [`Tree`], [`InodeTree`]: `Tree32`, spec `merkle-proofs.md` §1);
//! - [`verify()`]: rebuild the hashes bottom-up, check `before`, replay the [`Op`]s on the partial
//!   tree (a blinded part they need is [`VerifyError::Blinded`]), check `after`;
//! - Octez's [`encoding::v1`] and [`encoding::v2`] binary forms (read and write, strict);
//! - proofs of the binary-tree context (Octez's `Tree2`): [`verify_tree2`] and the
//!   [`encoding::tree2`] forms;
//! - [`produce()`]: the same replay over a [`Source`] that loads what the operations read, which
//!   gives the proof in Irmin's shape (`larch-core` provides the source for its trees);
//! - stream proofs ([`stream`]: [`produce_stream`], [`verify_stream`], Octez's V1/V2 stream
//!   encodings in [`encoding::stream`]): the objects read, in order, checked as they are consumed;
//! - with the `json` feature (default, needs `std`): Irmin's repr JSON form ([`json`]).
//!
//! ```
//! use larch_proof::hash::{contents_hash, flat_node_hash};
//! use larch_proof::{encoding, verify, Kind, KindedHash, Op, OpResult, Proof, Tree};
//! # fn main() -> Result<(), Box<dyn core::error::Error>> {
//! // The proof of `find ["c"]` in the directory {c -> "gamma", d -> "delta"}: `d` stays blinded.
//! let d = contents_hash(b"delta");
//! let root = flat_node_hash(2, [(&b"c"[..], Kind::Contents, contents_hash(b"gamma")), (&b"d"[..], Kind::Contents, d)].into_iter());
//! let state = Tree::Node(vec![(b"c".to_vec(), Tree::Contents(b"gamma".to_vec())), (b"d".to_vec(), Tree::BlindedContents(d))]);
//! let hash = KindedHash { kind: Kind::Node, hash: root };
//! let bytes = encoding::v2::encode(&Proof { version: 0, before: hash, after: hash, state })?;
//! // What a light client does with the bytes and the hash it trusts:
//! let proof = encoding::v2::decode(&bytes)?;
//! assert_eq!(proof.before.hash, root);
//! let verified = verify(&proof, &[Op::Find(vec![b"c".to_vec()])])?;
//! assert_eq!(verified.results, vec![OpResult::Value(Some(b"gamma".to_vec()))]);
//! assert!(verify(&proof, &[Op::Find(vec![b"d".to_vec()])]).is_err()); // blinded
//! # Ok(()) }
//! ```
#![no_std]

extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod encoding;
pub mod error;
pub mod hash;
#[cfg(feature = "json")]
pub mod json;
pub mod model;
pub mod ops;
pub mod stream;
pub mod types;
pub mod verify;

pub use error::{DecodeError, EncodeError, VerifyError};
pub use hash::{Arity, Hash, Kind};
pub use ops::{Op, OpResult, Path};
pub use stream::{
    Elt, ProducedStream, STREAM_VERSION, StreamProof, VerifiedStream, produce_stream, produce_stream_with,
    stable_trie, verify_stream, verify_stream_with,
};
pub use types::{Entries, Extender, Inode, InodeTree, KindedHash, Proof, Stats, Tree};
pub use verify::{
    Context, Produced, Source, TREE_VERSION, TREE2_VERSION, Verified, produce, produce_with, verify,
    verify_tree2, verify_tree2_with, verify_with,
};
