//! Typed errors: why a proof is rejected, why bytes do not decode, why a proof cannot be encoded.

use crate::hash::{Hash, Kind};
use core::fmt;

/// Why a proof is rejected by [`verify`](crate::verify()) (or a replay cannot go on).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum VerifyError {
    /// The proof tree breaks one of Irmin's structural rules (spec §3.1).
    Malformed(&'static str),
    /// The hash rebuilt from the proof tree is not the claimed `before`.
    BeforeMismatch {
        /// The claimed hash.
        expected: Hash,
        /// The hash of the proof tree (its kind may also differ).
        computed: Hash,
    },
    /// The hash of the tree after the operations is not the claimed `after`.
    AfterMismatch {
        /// The claimed hash.
        expected: Hash,
        /// The hash the replay ended with.
        computed: Hash,
    },
    /// An operation needs a part of the tree that the proof blinds.
    Blinded {
        /// The operation (`find`, `add`, …, or `hash` when computing a hash needs it).
        op: &'static str,
        /// What is blinded: "contents", "node" or "inode".
        what: &'static str,
        /// Its hash.
        hash: Hash,
    },
    /// The proof tree or an operation nests deeper than the verifier's limits.
    TooDeep {
        /// The limit that was reached.
        limit: usize,
    },
    /// More than 32 names share their buckets down to Irmin's inode depth limit.
    MaxDepth,
    /// The proof's `version` is not the one its verifier takes: 0 for a tree proof, 1 for a stream
    /// proof, 2 for a tree proof of the binary-tree context (Octez: bit 0 marks a stream proof,
    /// bit 1 a binary-tree context).
    UnsupportedVersion(i16),
    /// A stream proof ends before the replay has read everything it needs.
    StreamTooShort {
        /// The operation that needed the object.
        op: &'static str,
        /// What it needed: "contents", "node" or "inode".
        what: &'static str,
        /// The hash it was looking for.
        hash: Hash,
    },
    /// A stream proof has elements left after the replay and the after hash.
    StreamTooLong {
        /// Elements used.
        used: usize,
        /// Elements in the stream.
        len: usize,
    },
    /// A stream element is not the object the replay was looking for.
    StreamMismatch {
        /// Position of the element in the stream.
        index: usize,
        /// Why it does not fit.
        why: &'static str,
        /// The hash the replay was looking for.
        hash: Hash,
    },
    /// A producer's source failed to load an object (production only).
    Source {
        /// What was being loaded.
        what: Kind,
        /// Its hash.
        hash: Hash,
    },
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerifyError::Malformed(why) => write!(f, "invalid proof: {why}"),
            VerifyError::BeforeMismatch { expected, computed } => {
                write!(
                    f,
                    "invalid before hash: the proof tree hashes to {computed}, the proof claims {expected}"
                )
            }
            VerifyError::AfterMismatch { expected, computed } => {
                write!(f, "invalid after hash: the replay ends with {computed}, the proof claims {expected}")
            }
            VerifyError::Blinded { op, what, hash } => {
                write!(f, "{op} is trying to read through a blinded {what} ({hash})")
            }
            VerifyError::TooDeep { limit } => write!(f, "proof or path nested deeper than the limit {limit}"),
            VerifyError::MaxDepth => {
                f.write_str("inode trie deeper than Irmin's limit (more than 32 colliding names)")
            }
            VerifyError::UnsupportedVersion(version) => {
                write!(
                    f,
                    "proof version {version} is not that of this kind of proof (tree: 0, stream: 1, binary-tree tree proof: 2)"
                )
            }
            VerifyError::StreamTooShort { op, what, hash } => {
                write!(f, "stream proof too short: {op} needs the {what} {hash} after the last element")
            }
            VerifyError::StreamTooLong { used, len } => {
                write!(f, "stream proof too long: {used} of its {len} elements used")
            }
            VerifyError::StreamMismatch { index, why, hash } => {
                write!(f, "stream element {index} does not match {hash}: {why}")
            }
            VerifyError::Source { what, hash } => {
                write!(f, "the producer's source cannot load {what:?} {hash}")
            }
        }
    }
}

impl core::error::Error for VerifyError {}

/// Why bytes are not a valid encoded proof.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ends inside a field.
    Truncated {
        /// Offset of the field.
        offset: usize,
        /// The field.
        what: &'static str,
    },
    /// A tag byte that no constructor has at this place.
    BadTag {
        /// Offset of the tag.
        offset: usize,
        /// The tag.
        tag: u8,
        /// What was being decoded.
        what: &'static str,
    },
    /// A field holds an invalid value (negative length, bad segment list, size mismatch, …).
    Invalid {
        /// Offset of the field.
        offset: usize,
        /// What is wrong.
        what: &'static str,
    },
    /// Bytes remain after the proof.
    TrailingBytes {
        /// Offset of the first extra byte.
        offset: usize,
    },
    /// The proof nests deeper than the decoder's limit.
    TooDeep {
        /// Offset where the limit was reached.
        offset: usize,
        /// The limit.
        limit: usize,
    },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated { offset, what } => {
                write!(f, "truncated input: {what} at offset {offset}")
            }
            DecodeError::BadTag { offset, tag, what } => {
                write!(f, "bad tag 0x{tag:02x} for {what} at offset {offset}")
            }
            DecodeError::Invalid { offset, what } => write!(f, "invalid {what} at offset {offset}"),
            DecodeError::TrailingBytes { offset } => write!(f, "trailing bytes from offset {offset}"),
            DecodeError::TooDeep { offset, limit } => {
                write!(f, "proof nested deeper than {limit} levels at offset {offset}")
            }
        }
    }
}

impl core::error::Error for DecodeError {}

/// Why a proof cannot be written in an encoding.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EncodeError {
    /// A step longer than 255 bytes (Octez's `Bounded.bytes 255`).
    StepTooLong {
        /// Its length.
        len: usize,
    },
    /// An extender segment ≥ 32 or a list of segments longer than 255 bytes packed.
    BadSegments,
    /// An inode index ≥ 32 or indices not strictly increasing (not representable densely).
    BadIndex {
        /// The index.
        index: u8,
    },
    /// A length above what the encoding's size fields hold.
    TooLarge {
        /// What is too large.
        what: &'static str,
    },
    /// The proof nests deeper than the encoder's limit.
    TooDeep {
        /// The limit.
        limit: usize,
    },
    /// A `Tree2` encoding was asked for a proof that is not of a binary tree (an inode without
    /// pointers, or with indices other than 0 and 1).
    NotBinary(&'static str),
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::StepTooLong { len } => {
                write!(f, "a step of {len} bytes cannot be encoded (max 255)")
            }
            EncodeError::BadSegments => f.write_str("extender segments cannot be encoded"),
            EncodeError::BadIndex { index } => write!(f, "inode index {index} cannot be encoded"),
            EncodeError::TooLarge { what } => write!(f, "{what} too large for the encoding"),
            EncodeError::TooDeep { limit } => write!(f, "proof nested deeper than {limit} levels"),
            EncodeError::NotBinary(why) => write!(f, "not a binary-tree proof: {why}"),
        }
    }
}

impl core::error::Error for EncodeError {}
