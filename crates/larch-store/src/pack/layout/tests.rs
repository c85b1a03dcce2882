use super::*;
use crate::io::storage::MemDirectory;

/// Golden bytes of a chunk header (docs/format.md §3). A change here is a format change.
#[test]
fn golden_bytes_of_a_chunk_header() {
    let header = encode_chunk_header(3, 0x0102_0304_0506);
    let hex: String = header.iter().map(|byte| format!("{byte:02x}")).collect();
    assert_eq!(
        hex,
        concat!(
            "4c4152434843484b", // magic LARCHCHK
            "03000000",         // version 3
            "00000000",         // reserved
            "0300000000000000", // seq 3
            "0605040302010000", // start
        )
    );
    assert_eq!(decode_chunk_header(&header, "chunk.000003").unwrap(), (3, 0x0102_0304_0506));
    for byte in 0..16 {
        let mut bad = header;
        bad[byte] ^= 0x40;
        assert!(decode_chunk_header(&bad, "x").is_err(), "byte {byte}");
    }
    assert!(decode_chunk_header(&header[..20], "x").is_err());
}

#[test]
fn chunk_names_round_trip_and_others_are_refused() {
    assert_eq!(chunk_name(7), "chunk.000007");
    assert_eq!(chunk_name(1_234_567), "chunk.1234567");
    for seq in [0, 7, 999_999, 1_000_000, u32::MAX] {
        assert_eq!(parse_chunk_name(&chunk_name(seq)), Some(seq));
    }
    for name in ["chunk.7", "chunk.0000007", "chunk.00000a", "pack", "chunk.", "chunk.-00001"] {
        assert_eq!(parse_chunk_name(name), None, "{name}");
    }
}

/// A layout over random chunk boundaries reads every global offset as a model flat pack does,
/// across chunk ends; an offset below the first chunk is `Unmapped`.
#[test]
fn reads_match_a_flat_model_across_rolls() {
    use rand::Rng;
    let (mut rng, seed) = larch_testkit::seeded_rng("layout_reads", 1);
    let dir: Arc<dyn Directory> = Arc::new(MemDirectory::new());
    Layout::create_first(&dir).unwrap();
    let layout = Layout::open(dir.clone(), (0, 0), 16, 16, true, FilePool::new(3)).unwrap();
    let mut model = vec![0u8; 16];
    for _ in 0..40 {
        if rng.random_bool(0.3) {
            layout.roll(model.len() as u64).unwrap();
        }
        let data: Vec<u8> = (0..rng.random_range(1..300)).map(|_| rng.random()).collect();
        layout.write_at(model.len() as u64, &data).unwrap();
        model.extend_from_slice(&data);
    }
    layout.sync().unwrap();
    assert_eq!(layout.len().unwrap(), model.len() as u64, "seed {seed}");
    for _ in 0..500 {
        let at = rng.random_range(16..model.len());
        let len = rng.random_range(0..=(model.len() - at).min(700));
        let mut buf = vec![0u8; len];
        layout.read(at as u64, &mut buf).unwrap();
        assert_eq!(buf, model[at..at + len], "seed {seed}: read {len} at {at}");
    }
    assert!(matches!(layout.read(3, &mut [0u8; 4]), Err(StoreError::Unmapped { offset: 3 })));
    assert!(matches!(layout.resolve(15), Err(StoreError::Unmapped { offset: 15 })));
    // Every chunk start resolves to position 32 of its own file; its end is the next start.
    let files = layout.chunk_files(model.len() as u64);
    for (i, (name, start, end)) in files.iter().enumerate().filter(|(_, (_, start, end))| start < end) {
        let (_, position, extent_end) = layout.resolve(*start).unwrap();
        assert_eq!(position, 32, "{name}");
        if i + 1 < files.len() {
            assert_eq!(extent_end, *end, "{name}");
        }
    }
    assert_eq!(layout.flatten().unwrap()[16..], model[16..]);
    // Reopened from its published state, and discovered from the files alone.
    let (head, head_start) = layout.head();
    let reopened =
        Layout::open(dir.clone(), (0, head), head_start, model.len() as u64, false, FilePool::new(2))
            .unwrap();
    assert_eq!(reopened.flatten().unwrap(), layout.flatten().unwrap());
    assert_eq!(Layout::discover(dir.clone()).unwrap().chunk_count(), layout.chunk_count());
    // A published end past the head's file is refused.
    assert!(
        Layout::open(dir, (0, head), head_start, model.len() as u64 + 1, false, FilePool::new(2)).is_err()
    );
    // Writes below the head are refused.
    if head > 0 {
        assert!(layout.write_at(16, b"x").is_err());
    }
}
