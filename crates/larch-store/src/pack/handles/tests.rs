use super::*;
use crate::io::storage::MemDirectory;

fn chunk_bytes(seq: u32, start: u64, body: &[u8]) -> Vec<u8> {
    let mut bytes = crate::format::names::encode_chunk_header(seq, start).to_vec();
    bytes.extend_from_slice(body);
    bytes
}

/// Random reads of many chunk files through a pool smaller than their number, from several
/// threads, against the bytes each file holds; the pool never holds more than its capacity
/// (plus one entry per thread opening at that moment) and every eviction is followed by a correct
/// reopen. Randomized: the seed is printed.
#[test]
fn random_reads_through_a_small_pool_match_the_files() {
    use rand::Rng;
    let (mut rng, seed) = larch_testkit::seeded_rng("chunk_file_pool", 4);
    let mem = Arc::new(MemDirectory::new());
    let dir: Arc<dyn Directory> = mem.clone();
    let count = rng.random_range(20..60u32);
    let capacity = rng.random_range(1..8usize);
    let threads = 4;
    let pool = FilePool::new(capacity);
    let mut bodies = Vec::new();
    let mut files = Vec::new();
    for seq in 0..count {
        let body: Vec<u8> = (0..rng.random_range(1..400)).map(|_| rng.random()).collect();
        let start = 16 + u64::from(seq) * 1000;
        mem.insert(&chunk_name(seq), chunk_bytes(seq, start, &body));
        let opened = dir.open(&chunk_name(seq), false).unwrap();
        files.push(ChunkFile::new(dir.clone(), pool.clone(), (seq, start, false), opened, false));
        bodies.push(body);
        assert!(pool.entries() <= capacity, "seed {seed}");
    }
    let files = Arc::new(files);
    let bodies = Arc::new(bodies);
    let seeds: Vec<u64> = (0..threads).map(|_| rng.random()).collect();
    std::thread::scope(|scope| {
        for thread_seed in seeds {
            let (files, bodies, pool) = (files.clone(), bodies.clone(), pool.clone());
            scope.spawn(move || {
                let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(thread_seed);
                for _ in 0..3000 {
                    let i = rng.random_range(0..files.len());
                    let body = &bodies[i];
                    let at = rng.random_range(0..body.len());
                    let len = rng.random_range(0..=body.len() - at);
                    let mut buf = vec![0u8; len];
                    files[i].read_at(CHUNK_HEADER_LEN + at as u64, &mut buf).unwrap();
                    assert_eq!(buf, body[at..at + len], "seed {seed}: chunk {i}, {len} at {at}");
                    assert!(pool.entries() <= capacity + threads, "seed {seed}: {} entries", pool.entries());
                }
            });
        }
    });
    // The pool may stay over capacity until its next open when every victim was busy at the
    // last one (at most one file per thread that was opening one).
    let open = files.iter().filter(|file| file.is_open()).count();
    assert!(open <= capacity + threads, "seed {seed}: {open} open, capacity {capacity}");
    assert!(pool.opens() > u64::from(count), "seed {seed}: no file was ever reopened");
}

/// A reopen checks the header against what the layout knows, and a file gone is `MissingFile`.
#[test]
fn a_reopen_checks_the_header_and_reports_a_missing_file() {
    let mem = Arc::new(MemDirectory::new());
    let dir: Arc<dyn Directory> = mem.clone();
    let pool = FilePool::new(1);
    mem.insert("chunk.000001", chunk_bytes(1, 500, b"one"));
    mem.insert("chunk.000002", chunk_bytes(2, 900, b"two"));
    let one = ChunkFile::new(
        dir.clone(),
        pool.clone(),
        (1, 500, false),
        dir.open("chunk.000001", false).unwrap(),
        false,
    );
    let two = ChunkFile::new(
        dir.clone(),
        pool.clone(),
        (2, 900, false),
        dir.open("chunk.000002", false).unwrap(),
        false,
    );
    assert!(!one.is_open() && two.is_open(), "capacity 1: the first was closed");
    // Replaced behind the layout's back by another chunk's bytes: refused, not read.
    mem.insert("chunk.000001", chunk_bytes(1, 600, b"one"));
    assert!(matches!(one.file(), Err(StoreError::Corrupt { .. })));
    mem.insert("chunk.000001", chunk_bytes(1, 500, b"one"));
    let mut buf = [0u8; 3];
    one.read_at(CHUNK_HEADER_LEN, &mut buf).unwrap();
    assert_eq!(&buf, b"one");
    // Gone (a GC retired it): typed, naming the file.
    mem.remove("chunk.000002").unwrap();
    assert!(!two.is_open());
    match two.file() {
        Err(StoreError::MissingFile { name, .. }) => assert_eq!(name, "chunk.000002"),
        other => panic!("expected MissingFile, got {other:?}"),
    }
    // A pinned file is never closed by the pool, and refuses writes once sealed.
    let head = ChunkFile::new(
        dir.clone(),
        pool.clone(),
        (1, 500, false),
        dir.open("chunk.000001", true).unwrap(),
        true,
    );
    one.read_at(CHUNK_HEADER_LEN, &mut buf).unwrap();
    assert!(head.is_open());
    head.write_at(CHUNK_HEADER_LEN + 3, b"!").unwrap();
    head.unpin();
    assert!(!head.is_open());
    assert!(head.write_at(CHUNK_HEADER_LEN, b"x").is_err());
}
