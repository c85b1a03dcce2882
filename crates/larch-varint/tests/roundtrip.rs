//! Property tests: every `u64` round-trips through every encoder and decoder, and the decoders
//! agree with each other on arbitrary bytes.

use larch_varint::{Decoder, MAX_LEN, decode, decode_relaxed, encode, encoded_len, write};
use proptest::prelude::*;

/// Values spread over every encoded length, not only the large ones a uniform draw favours.
fn any_value() -> impl Strategy<Value = u64> {
    (any::<u64>(), 0u32..64).prop_map(|(value, shift)| value >> shift)
}

/// What a byte-at-a-time decoder makes of `bytes`: the value and the bytes it took.
fn stream(bytes: &[u8]) -> Result<(u64, usize), larch_varint::Error> {
    let mut decoder = Decoder::new();
    for (index, byte) in bytes.iter().enumerate() {
        if let Some(value) = decoder.push(*byte)? {
            return Ok((value, index + 1));
        }
    }
    Err(larch_varint::Error::Truncated)
}

proptest! {
    #[test]
    fn values_round_trip(value in any_value(), tail in proptest::collection::vec(any::<u8>(), 0..4)) {
        let mut bytes = Vec::new();
        encode(&mut bytes, value);
        prop_assert_eq!(bytes.len(), encoded_len(value));
        let mut buf = [0u8; MAX_LEN];
        let len = write(&mut buf, value);
        prop_assert_eq!(&buf[..len], &bytes[..]);
        let encoded = bytes.len();
        bytes.extend_from_slice(&tail);
        prop_assert_eq!(decode(&bytes), Ok((value, encoded)));
        prop_assert_eq!(decode_relaxed(&bytes, MAX_LEN), Ok((value, encoded)));
        prop_assert_eq!(stream(&bytes), Ok((value, encoded)));
    }

    #[test]
    fn decoders_agree_and_strict_means_canonical(bytes in proptest::collection::vec(any::<u8>(), 0..14)) {
        let strict = decode(&bytes);
        prop_assert_eq!(stream(&bytes), strict);
        match strict {
            Ok((value, len)) => {
                let mut again = Vec::new();
                encode(&mut again, value);
                prop_assert_eq!(&again[..], &bytes[..len]);
                prop_assert_eq!(decode_relaxed(&bytes, MAX_LEN), Ok((value, len)));
            }
            Err(larch_varint::Error::NonMinimal) => {
                // The relaxed reading has the same value as the shortest form of it.
                let (value, _) = decode_relaxed(&bytes, MAX_LEN).unwrap();
                let mut short = Vec::new();
                encode(&mut short, value);
                prop_assert_eq!(decode(&short), Ok((value, short.len())));
            }
            Err(err) => prop_assert_eq!(decode_relaxed(&bytes, MAX_LEN), Err(err)),
        }
    }
}
