//! Tests of the control file's slots and confirmation.
use super::*;

fn state() -> ControlState {
    let mut state =
        ControlState { generation: 7, pack_end: 1234, index_end: 60, index_synced: 16, ..Default::default() };
    state.branches.insert("main".into(), (Hash([3; 32]), 99));
    state
}

#[test]
fn branch_names_outside_1_to_255_bytes_are_refused() {
    for len in [0usize, 256, 300] {
        let mut state = state();
        state.branches.insert("x".repeat(len), (Hash([5; 32]), 100));
        let bytes = state.encode().unwrap();
        let error = ControlState::decode(&bytes, 0).unwrap_err();
        assert!(error.to_string().contains(&format!("a branch name of {len} bytes")), "{error}");
    }
    let mut state = state();
    state.branches.insert("x".repeat(255), (Hash([5; 32]), 100));
    assert_eq!(ControlState::decode(&state.encode().unwrap(), 0).unwrap(), state);
}

#[test]
fn round_trip_and_every_bit_flip_is_detected() {
    let state = state();
    let bytes = state.encode().unwrap();
    assert_eq!(ControlState::decode(&bytes, 0).unwrap(), state);
    for bit in 0..bytes.len() * 8 {
        let mut flipped = bytes.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        assert!(ControlState::decode(&flipped, 0).is_err(), "bit {bit} undetected");
    }
    assert!(ControlState::decode(&bytes[..bytes.len() - 1], 0).is_err());
}

#[test]
fn the_newest_valid_slot_wins_and_readers_wait_for_the_confirmation() {
    let mut older = state();
    older.generation = 6;
    let newer = state();
    let mut file = vec![0u8; CONTROL_LEN as usize];
    file[..older.encode().unwrap().len()].copy_from_slice(&older.encode().unwrap());
    let at = PAGE as usize;
    file[at..at + newer.encode().unwrap().len()].copy_from_slice(&newer.encode().unwrap());
    file[CONFIRM_AT as usize..].copy_from_slice(&encode_confirm(6));
    let decoded = ControlFileState::decode(&file).unwrap();
    assert_eq!(decoded.newest(), Some(1));
    assert_eq!(decoded.visible(), Some(0), "not yet confirmed");
    file[CONFIRM_AT as usize..].copy_from_slice(&encode_confirm(7));
    assert_eq!(ControlFileState::decode(&file).unwrap().visible(), Some(1));
    // A torn newer slot: the older one is used.
    file[at + 20] ^= 0xff;
    let decoded = ControlFileState::decode(&file).unwrap();
    assert!(matches!(decoded.slots[1], Slot::Damaged(_)));
    assert_eq!((decoded.newest(), decoded.visible()), (Some(0), Some(0)));
    // Another version is refused when the slot's checksum holds (a store of another format);
    // a flipped version bit fails the checksum: the slot is damaged, not of another version.
    let mut flipped = file.clone();
    flipped[8] ^= 1 << 3;
    let decoded = ControlFileState::decode(&flipped).unwrap();
    assert!(matches!(decoded.slots[0], Slot::Damaged(_)));
    let mut other = newer.clone().encode().unwrap();
    other[8] = 9;
    let len = other.len();
    let crc = crc32fast::hash(&other[..len - 4]);
    other[len - 4..].copy_from_slice(&crc.to_le_bytes());
    file[at..at + len].copy_from_slice(&other);
    assert!(matches!(
        ControlFileState::decode(&file),
        Err(StoreError::UnknownVersion { file: FileKind::Control, found: 9, .. })
    ));
}

/// Golden bytes of a layout-3 slot and of a confirmation (docs/format.md §2; checksums
/// computed independently with Python's `zlib.crc32`). A change here is a format change.
#[test]
fn golden_bytes_of_a_slot_and_a_confirmation() {
    let mut state = ControlState {
        generation: 5,
        pack_end: 0x1234,
        index_end: 104,
        index_synced: 60,
        head_chunk: 2,
        head_start: 0x1000,
        ..Default::default()
    };
    state.branches.insert("main".into(), (Hash([0xab; 32]), 0x1000));
    let expected = concat!(
        "4c4152434843544c", // magic LARCHCTL
        "03000000",         // version 3
        "96000000",         // length 150
        "0500000000000000", // generation 5
        "3412000000000000", // pack_end 0x1234
        "6800000000000000", // index_end 104
        "3c00000000000000", // index_synced 60
        "0000000000000000", // gc_generation 0
        "0000000000000000", // keep_from 0
        "1000000000000000", // index_keep_from 16
        "00000000",         // first_chunk 0
        "02000000",         // head_chunk 2
        "0010000000000000", // head_start 0x1000
        "00000000",         // flags
        "00000000",         // no segments
        "01000000",         // one branch
        "0400",             // name length 4
        "6d61696e",         // "main"
        "abababababababababababababababababababababababababababababababab",
        "0010000000000000", // commit record at 0x1000
        "243d0858",         // crc32 of the 146 bytes before
    );
    let encoded = state.encode().unwrap();
    assert_eq!(hex_of(&encoded), expected);
    assert_eq!(hex_of(&encode_confirm(5)), "4c41524348434e460500000000000000bdc11bcc");
    // In a file: slot 1 holds it; slot 0 is empty; the confirmation is at 8192.
    let mut file = vec![0u8; CONTROL_LEN as usize];
    file[PAGE as usize..PAGE as usize + encoded.len()].copy_from_slice(&encoded);
    file[CONFIRM_AT as usize..].copy_from_slice(&encode_confirm(5));
    let decoded = ControlFileState::decode(&file).unwrap();
    assert_eq!(decoded.slots, [Slot::Empty, Slot::Valid(state)]);
    assert_eq!((decoded.newest(), decoded.visible(), decoded.confirmed), (Some(1), Some(1), Some(5)));
}

/// A format-2 slot (the golden bytes of format 2) still decodes: one chunk (the `pack`), chunk
/// 0 starting at 16, nothing collected.
#[test]
fn a_format_2_slot_decodes_with_the_layout_of_a_single_pack() {
    let bytes = concat!(
        "4c4152434843544c02000000660000000500000000000000341200000000000068000000000000003c00000000000000",
        "0100000004006d61696eabababababababababababababababababababababababababababababababab",
        "0010000000000000562b73fa",
    );
    let bytes: Vec<u8> =
        (0..bytes.len() / 2).map(|i| u8::from_str_radix(&bytes[2 * i..2 * i + 2], 16).unwrap()).collect();
    let state = ControlState::decode(&bytes, 0).unwrap();
    let mut expected = ControlState {
        generation: 5,
        pack_end: 0x1234,
        index_end: 104,
        index_synced: 60,
        ..Default::default()
    };
    expected.branches.insert("main".into(), (Hash([0xab; 32]), 0x1000));
    assert_eq!(state, expected);
    assert_eq!(
        (state.first_chunk, state.head_chunk, state.head_start, state.index_keep_from),
        (0, 0, 16, 16)
    );
}

/// The archive flag (bit 0 at offset 88) is accepted and round-trips; other bits are refused
/// (`layout_fields_out_of_range_are_refused`).
#[test]
fn the_archive_flag_round_trips_at_offset_88() {
    let archived = ControlState { flags: FLAG_ARCHIVE, ..state() };
    let bytes = archived.encode().unwrap();
    assert_eq!(hex_of(&bytes[88..92]), "01000000");
    assert_eq!(ControlState::decode(&bytes, 0).unwrap(), archived);
    let plain = state().encode().unwrap();
    assert_eq!(hex_of(&plain[88..92]), "00000000");
}

/// A lineage (issue 39 item 5): flag bit 1 at offset 88 and a `u64` after the branches, before
/// the checksum; lineage 0 writes neither (the bytes of earlier builds). A flag without a
/// lineage, or a lineage of 0 under the flag, is damage.
#[test]
fn the_lineage_follows_the_branches_under_flag_bit_1() {
    let rewound = ControlState { lineage: 3, flags: FLAG_ARCHIVE, ..state() };
    let bytes = rewound.encode().unwrap();
    let plain = ControlState { flags: FLAG_ARCHIVE, ..state() }.encode().unwrap();
    assert_eq!(bytes.len(), plain.len() + 8);
    assert_eq!(hex_of(&bytes[88..92]), "03000000");
    assert_eq!(hex_of(&bytes[plain.len() - 4..plain.len() + 4]), "0300000000000000");
    assert_eq!(bytes[..12], plain[..12]);
    assert_eq!(u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize, plain.len() + 8);
    assert_eq!(bytes[16..88], plain[16..88]);
    assert_eq!(bytes[92..plain.len() - 4], plain[92..plain.len() - 4]);
    assert_eq!(ControlState::decode(&bytes, 0).unwrap(), rewound);
    // The flag passed in `flags` is ignored: the lineage decides.
    let stray = ControlState { flags: FLAG_LINEAGE, ..state() };
    assert_eq!(stray.encode().unwrap(), state().encode().unwrap());
    // The flag without the field, and the field 0 under the flag.
    let reframe = |mut body: Vec<u8>| {
        let total = (body.len() + 4) as u32;
        body[12..16].copy_from_slice(&total.to_le_bytes());
        let crc = crc32fast::hash(&body);
        body.extend_from_slice(&crc.to_le_bytes());
        body
    };
    let mut flag_only = plain[..plain.len() - 4].to_vec();
    flag_only[88] |= FLAG_LINEAGE as u8;
    assert!(ControlState::decode(&reframe(flag_only.clone()), 0).is_err());
    flag_only.extend_from_slice(&0u64.to_le_bytes());
    assert!(ControlState::decode(&reframe(flag_only), 0).is_err());
}

/// The layout-3 fields are validated: values a store without GC cannot have are refused.
#[test]
fn layout_fields_out_of_range_are_refused() {
    let good = state();
    assert!(ControlState::decode(&good.encode().unwrap(), 0).is_ok());
    let bad = [
        ControlState { flags: 4, ..good.clone() },
        ControlState { flags: 0x8000_0001, ..good.clone() },
        ControlState { first_chunk: 3, head_chunk: 2, ..good.clone() },
        ControlState { head_start: 8, ..good.clone() },
        ControlState { head_start: good.pack_end + 1, ..good.clone() },
        ControlState { keep_from: 100, ..good.clone() },
        ControlState { index_keep_from: 17, ..good.clone() },
        ControlState { index_keep_from: good.index_end + 44, ..good.clone() },
        ControlState {
            gc_generation: 1,
            keep_from: 200,
            index_keep_from: 60,
            segments: vec![SegmentRef {
                generation: 1,
                range_start: 16,
                range_end: 16,
                file_len: 0,
                footer_crc: 0,
            }],
            ..good.clone()
        },
    ];
    for state in bad {
        let bytes = state.encode().unwrap();
        assert!(ControlState::decode(&bytes, 0).is_err(), "{state:?}");
    }
    let collected = ControlState {
        gc_generation: 1,
        keep_from: 200,
        index_keep_from: 60,
        segments: vec![SegmentRef {
            generation: 1,
            range_start: 16,
            range_end: 100,
            file_len: 500,
            footer_crc: 9,
        }],
        head_start: 200,
        ..good.clone()
    };
    assert_eq!(ControlState::decode(&collected.encode().unwrap(), 0).unwrap(), collected);
    let too_many = ControlState { segments: vec![collected.segments[0]; MAX_SEGMENTS + 1], ..collected };
    assert!(too_many.encode().is_err());
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Structured mutations of a valid control file (bit flips, byte runs, truncations, lengths
/// and counts set to extremes): decoding never panics, and a slot that still decodes as valid
/// is one of the two written states (a mutation never forges a third state with a valid CRC, at
/// this number of tries).
#[test]
fn mutated_control_files_never_panic_nor_forge_a_state() {
    use rand::Rng;
    let (mut rng, _) = larch_testkit::seeded_rng("mutated_control_files", 9);
    let newer = state();
    let mut older = state();
    older.generation = 6;
    older.branches.insert("side".into(), (Hash([4; 32]), 50));
    let mut file = vec![0u8; CONTROL_LEN as usize];
    let (a, b) = (older.encode().unwrap(), newer.encode().unwrap());
    file[..a.len()].copy_from_slice(&a);
    file[PAGE as usize..PAGE as usize + b.len()].copy_from_slice(&b);
    file[CONFIRM_AT as usize..].copy_from_slice(&encode_confirm(7));
    for _ in 0..20_000 {
        let mut bytes = file.clone();
        for _ in 0..rng.random_range(1..4) {
            let base = if rng.random_bool(0.5) { 0 } else { PAGE as usize };
            let at = base + rng.random_range(0..160);
            match rng.random_range(0..4) {
                0 => bytes[at] ^= 1 << rng.random_range(0..8),
                1 => bytes[at] = rng.random(),
                2 => bytes[base + 12..base + 16].copy_from_slice(&rng.random::<u32>().to_le_bytes()),
                _ => bytes[base + 48..base + 52].copy_from_slice(&u32::MAX.to_le_bytes()),
            }
        }
        if rng.random_bool(0.1) {
            bytes.truncate(rng.random_range(0..bytes.len()));
        }
        if let Ok(decoded) = ControlFileState::decode(&bytes) {
            for slot in &decoded.slots {
                if let Slot::Valid(found) = slot {
                    assert!(found == &older || found == &newer, "forged {found:?}");
                }
            }
        }
    }
}

#[test]
fn an_entry_keeps_a_run_of_chunks_in_place_and_decodes_only_below_the_first_live_chunk() {
    let good = state();
    // An entry of one chunk is byte for byte the entry of earlier builds.
    let one = SegmentRef::kept_chunks_entry(0, 1, 16, 100, 132).unwrap();
    assert_eq!(one, SegmentRef::kept_chunk_entry(0, 16, 100, 132));
    assert_eq!(
        (one.kept_chunks(), one.describe(), one.file_names()),
        (Some(0..1), "chunk.000000".into(), vec!["chunk.000000".to_string()])
    );
    let four = SegmentRef::kept_chunks_entry(2, 4, 16, 400, 132).unwrap();
    assert_eq!(four.generation, KEPT_CHUNK_BIT | (3 << 32) | 2);
    assert_eq!(four.kept_chunks(), Some(2..6));
    assert_eq!(four.kept_chunk(), Some(2));
    assert_eq!(four.describe(), "chunk.000002 to chunk.000005 (4 chunks)");
    assert_eq!(four.file_names().len(), 4);
    assert_eq!(four.file_names()[3], "chunk.000005");
    assert!(SegmentRef::kept_chunks_entry(2, 0, 16, 400, 132).is_none(), "no chunk");
    assert!(SegmentRef::kept_chunks_entry(u32::MAX, 2, 16, 400, 132).is_none(), "past the last number");
    assert!(
        SegmentRef::kept_chunks_entry(0, (1 << 31) + 1, 16, 400, 132).is_none(),
        "a count bits 32-62 cannot hold"
    );
    let collected = |first_chunk: u32, entry: SegmentRef| ControlState {
        gc_generation: 1,
        keep_from: 500,
        index_keep_from: 60,
        segments: vec![entry],
        first_chunk,
        head_chunk: 9,
        head_start: 400,
        pack_end: 1234,
        ..good.clone()
    };
    // Its chunks lie below the first live chunk: 6 is the first number it does not keep.
    let state = collected(6, four);
    let bytes = state.encode().unwrap();
    assert_eq!(ControlState::decode(&bytes, 0).unwrap(), state);
    // A slot keeping a run is version 4 (refused by builds that cannot read the run), one keeping
    // a single chunk version 3, as before; either version with the other kind is damaged.
    assert_eq!(bytes[8..12], SLOT_VERSION_KEPT_RUN.to_le_bytes());
    let single = collected(6, one);
    let single_bytes = single.encode().unwrap();
    assert_eq!(single_bytes[8..12], SLOT_VERSION.to_le_bytes());
    assert_eq!(ControlState::decode(&single_bytes, 0).unwrap(), single);
    // The slot `bytes` with its version field set to `version`, its checksum made good again.
    let with_version = |bytes: &[u8], version: u32| {
        let mut forged = bytes.to_vec();
        forged[8..12].copy_from_slice(&version.to_le_bytes());
        let total = forged.len();
        let crc = crc32fast::hash(&forged[..total - 4]);
        forged[total - 4..].copy_from_slice(&crc.to_le_bytes());
        forged
    };
    for (slot, version) in [(&bytes, SLOT_VERSION), (&single_bytes, SLOT_VERSION_KEPT_RUN)] {
        let error = ControlState::decode(&with_version(slot, version), 0).unwrap_err();
        assert!(error.to_string().contains("does not fit"), "version {version}: {error}");
    }
    // A version above 4 in a well-framed slot: an unknown version, not damage.
    let mut page = with_version(&bytes, 5);
    page.resize(PAGE as usize, 0);
    assert!(matches!(decode_slot(&page, 0), Err(StoreError::UnknownVersion { found: 5, .. })));
    for first_chunk in [2, 5] {
        let bytes = collected(first_chunk, four).encode().unwrap();
        let error = ControlState::decode(&bytes, 0).unwrap_err();
        assert!(error.to_string().contains("a chunk kept in place"), "first chunk {first_chunk}: {error}");
    }
    // A footer CRC is refused as before.
    let bytes = collected(6, SegmentRef { footer_crc: 1, ..four }).encode().unwrap();
    assert!(ControlState::decode(&bytes, 0).is_err());
}
