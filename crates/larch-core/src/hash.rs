//! The 32-byte BLAKE2b-256 hash that names every object, with its hex and base58check (`Co…`) forms.

use std::fmt;
use std::str::FromStr;

/// Number of bytes in a [`Hash`](struct@Hash).
pub const HASH_LEN: usize = 32;

/// The two version bytes Tezos prepends to a context hash before base58check encoding (`Co…`).
pub const CONTEXT_HASH_PREFIX: [u8; 2] = [0x4f, 0xc7];

/// A BLAKE2b-256 digest: the name of a contents value, a directory, an inode or a commit.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Hash(pub [u8; HASH_LEN]);

/// A hasher for maps keyed by [`Hash`](struct@Hash) (or by any BLAKE2b digest): the key's first
/// 8 bytes, already uniform, are its hash.
#[derive(Default, Clone, Copy, Debug)]
pub struct PrefixHasher(u64);

impl std::hash::Hasher for PrefixHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for (i, byte) in bytes.iter().take(8).enumerate() {
            self.0 ^= u64::from(*byte) << (8 * i);
        }
    }
    fn write_usize(&mut self, _: usize) {}
}

/// The `HashMap` hasher builder of [`PrefixHasher`].
pub type BuildPrefixHasher = std::hash::BuildHasherDefault<PrefixHasher>;

/// Why a string or byte slice is not a valid [`Hash`](struct@Hash).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HashParseError {
    /// The input decodes to the wrong number of bytes.
    #[error("a hash has {expected} bytes, got {actual}")]
    BadLength {
        /// Bytes a valid input decodes to.
        expected: usize,
        /// Bytes this input decodes to.
        actual: usize,
    },
    /// A character outside the hex alphabet.
    #[error("invalid hex character {character:?} at position {position}")]
    BadHex {
        /// The offending character.
        character: char,
        /// Its index in the input.
        position: usize,
    },
    /// A character outside the base58 (Bitcoin) alphabet.
    #[error("invalid base58 character {character:?} at position {position}")]
    BadBase58 {
        /// The offending character.
        character: char,
        /// Its index in the input.
        position: usize,
    },
    /// The 4-byte double-SHA-256 checksum does not match.
    #[error("base58check checksum mismatch: computed {computed:02x?}, found {found:02x?}")]
    BadChecksum {
        /// Checksum of the payload.
        computed: [u8; 4],
        /// Checksum carried by the input.
        found: [u8; 4],
    },
    /// The version prefix is not the context-hash prefix `4f c7`.
    #[error("not a context hash: prefix {found:02x?}, expected 4f c7")]
    BadPrefix {
        /// The first two decoded bytes.
        found: [u8; 2],
    },
    /// Base58 input decodes to too few bytes to hold a prefix and checksum.
    #[error("base58check input too short ({0} bytes decoded)")]
    TooShort(usize),
}

impl Hash {
    /// Hashes `bytes` with BLAKE2b, digest length 32 (not BLAKE2b-512 truncated).
    pub fn of_bytes(bytes: &[u8]) -> Hash {
        Hash::from_digest(blake2b_params().hash(bytes))
    }

    pub(crate) fn from_digest(digest: blake2b_simd::Hash) -> Hash {
        let mut out = [0u8; HASH_LEN];
        out.copy_from_slice(digest.as_bytes());
        Hash(out)
    }

    /// The raw 32 bytes.
    pub fn as_bytes(&self) -> &[u8; HASH_LEN] {
        &self.0
    }

    /// Builds a hash from exactly 32 bytes.
    pub fn from_slice(bytes: &[u8]) -> Result<Hash, HashParseError> {
        let array: [u8; HASH_LEN] = bytes
            .try_into()
            .map_err(|_| HashParseError::BadLength { expected: HASH_LEN, actual: bytes.len() })?;
        Ok(Hash(array))
    }

    /// Lower-case hex of the 32 raw bytes (64 characters).
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Parses 64 hex characters (either case).
    pub fn from_hex(text: &str) -> Result<Hash, HashParseError> {
        if text.len() != 2 * HASH_LEN {
            return Err(HashParseError::BadLength { expected: HASH_LEN, actual: text.len() / 2 });
        }
        let mut out = [0u8; HASH_LEN];
        hex::decode_to_slice(text, &mut out).map_err(|err| match err {
            hex::FromHexError::InvalidHexCharacter { c, index } => {
                HashParseError::BadHex { character: c, position: index }
            }
            _ => HashParseError::BadLength { expected: HASH_LEN, actual: text.len() / 2 },
        })?;
        Ok(Hash(out))
    }

    /// The Tezos display form: base58check of `4f c7 ‖ hash` (52 characters starting with `Co`).
    pub fn to_base58(&self) -> String {
        let mut payload = [0u8; 2 + HASH_LEN];
        payload[..2].copy_from_slice(&CONTEXT_HASH_PREFIX);
        payload[2..].copy_from_slice(&self.0);
        bs58::encode(payload).with_check().into_string()
    }

    /// Parses the `Co…` form, checking alphabet, checksum, prefix and length.
    pub fn from_base58(text: &str) -> Result<Hash, HashParseError> {
        let decoded = bs58::decode(text).with_check(None).into_vec().map_err(|err| match err {
            bs58::decode::Error::InvalidCharacter { character, index } => {
                HashParseError::BadBase58 { character, position: index }
            }
            bs58::decode::Error::NonAsciiCharacter { index } => HashParseError::BadBase58 {
                character: text[index..].chars().next().unwrap_or('?'),
                position: index,
            },
            bs58::decode::Error::InvalidChecksum { checksum, expected_checksum } => {
                HashParseError::BadChecksum { computed: expected_checksum, found: checksum }
            }
            _ => HashParseError::TooShort(0),
        })?;
        let (prefix, body) = match decoded.split_first_chunk::<2>() {
            Some(split) => split,
            None => return Err(HashParseError::TooShort(decoded.len())),
        };
        if *prefix != CONTEXT_HASH_PREFIX {
            return Err(HashParseError::BadPrefix { found: *prefix });
        }
        Hash::from_slice(body)
    }
}

/// BLAKE2b parameters with a 32-byte digest.
pub(crate) fn blake2b_params() -> blake2b_simd::Params {
    let mut params = blake2b_simd::Params::new();
    params.hash_length(HASH_LEN);
    params
}

impl fmt::Display for Hash {
    /// Displays the `Co…` base58check form, as Tezos and Irmin print it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_base58())
    }
}

impl fmt::Debug for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Hash({})", self.to_hex())
    }
}

impl FromStr for Hash {
    type Err = HashParseError;

    /// Accepts either 64 hex characters or the `Co…` base58check form.
    fn from_str(text: &str) -> Result<Hash, HashParseError> {
        if text.len() == 2 * HASH_LEN && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            Hash::from_hex(text)
        } else {
            Hash::from_base58(text)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GENESIS: &str = "CoV8SQumiVU9saiu3FVNeDNewJaJH8yWdsGF3WLdsRr2P9S7MzCj";
    const GENESIS_HEX: &str = "3fdf8e76abec28f333dca1964e86404e455f5fc7838012558d9e43e23937ea88";

    #[test]
    fn base58_and_hex_round_trip_genesis() {
        let hash = Hash::from_hex(GENESIS_HEX).unwrap();
        assert_eq!(hash.to_base58(), GENESIS);
        assert_eq!(Hash::from_base58(GENESIS).unwrap(), hash);
        assert_eq!(GENESIS.parse::<Hash>().unwrap(), hash);
        assert_eq!(GENESIS_HEX.parse::<Hash>().unwrap(), hash);
        assert_eq!(hash.to_hex(), GENESIS_HEX);
    }

    #[test]
    fn blake2b_has_digest_length_32_not_truncated_512() {
        // The empty directory pre-image is eight zero bytes (spec §4.1).
        let hash = Hash::of_bytes(&[0u8; 8]);
        assert_eq!(hash.to_hex(), "81e47a19e6b29b0a65b9591762ce5143ed30d0261e5d24a3201752506b20f15c");
    }

    #[test]
    fn rejects_bad_inputs_with_typed_errors() {
        assert!(matches!(Hash::from_hex("00"), Err(HashParseError::BadLength { actual: 1, .. })));
        let bad_hex = format!("zz{}", &GENESIS_HEX[2..]);
        assert!(matches!(Hash::from_hex(&bad_hex), Err(HashParseError::BadHex { position: 0, .. })));
        // Flip one character: checksum fails.
        let mut flipped = GENESIS.to_string();
        flipped.replace_range(10..11, if &GENESIS[10..11] == "a" { "b" } else { "a" });
        assert!(matches!(Hash::from_base58(&flipped), Err(HashParseError::BadChecksum { .. })));
        // '0' is not in the base58 alphabet.
        let bad_char = format!("C0{}", &GENESIS[2..]);
        assert!(matches!(
            Hash::from_base58(&bad_char),
            Err(HashParseError::BadBase58 { character: '0', position: 1 })
        ));
        // A valid base58check string with another prefix (a block hash prefix 01 34).
        let mut other = vec![0x01, 0x34];
        other.extend_from_slice(&[7u8; 32]);
        let block_like = bs58::encode(other).with_check().into_string();
        assert!(matches!(
            Hash::from_base58(&block_like),
            Err(HashParseError::BadPrefix { found: [0x01, 0x34] })
        ));
        // Right prefix, wrong length.
        let mut short = vec![0x4f, 0xc7];
        short.extend_from_slice(&[7u8; 20]);
        let short = bs58::encode(short).with_check().into_string();
        assert!(matches!(
            Hash::from_base58(&short),
            Err(HashParseError::BadLength { expected: 32, actual: 20 })
        ));
        assert!(Hash::from_base58("").is_err());
    }
}
