use super::*;
use crate::format::names::decode_chunk_header;
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

/// What a layout asks its files for ([`Storage::will_need`]), by file name.
type Advice = Arc<std::sync::Mutex<Vec<(String, u64, u64)>>>;

/// A file that records the advice it is given.
#[derive(Debug)]
struct AdvisedFile {
    name: String,
    inner: Arc<dyn Storage>,
    advice: Advice,
}

impl Storage for AdvisedFile {
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
    fn will_need(&self, offset: u64, len: u64) {
        self.advice.lock().unwrap().push((self.name.clone(), offset, len));
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.inner.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.inner.write_at(offset, data)
    }
    fn sync(&self) -> io::Result<()> {
        self.inner.sync()
    }
}

/// A directory in memory whose files record the advice they are given; opening the file named
/// `fail_open` fails as a process out of descriptors does.
#[derive(Debug, Default)]
struct AdvisedDirectory {
    inner: MemDirectory,
    advice: Advice,
    fail_open: std::sync::Mutex<Option<String>>,
}

impl AdvisedDirectory {
    fn wrap(&self, name: &str, inner: Arc<dyn Storage>) -> Arc<dyn Storage> {
        Arc::new(AdvisedFile { name: name.to_string(), inner, advice: self.advice.clone() })
    }
}

impl Directory for AdvisedDirectory {
    fn create(&self, name: &str) -> io::Result<Arc<dyn Storage>> {
        Ok(self.wrap(name, self.inner.create(name)?))
    }
    fn open(&self, name: &str, writable: bool) -> io::Result<Arc<dyn Storage>> {
        if self.fail_open.lock().unwrap().as_deref() == Some(name) {
            return Err(io::Error::from_raw_os_error(24)); // EMFILE
        }
        Ok(self.wrap(name, self.inner.open(name, writable)?))
    }
    fn list(&self) -> io::Result<Vec<String>> {
        self.inner.list()
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        self.inner.remove(name)
    }
    fn sync(&self) -> io::Result<()> {
        self.inner.sync()
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        self.inner.rename(from, to)
    }
}

/// A range asked for across chunk ends reaches every chunk it covers, each for its own part.
#[test]
fn will_need_asks_each_chunk_a_range_covers_for_its_part() {
    let advised = Arc::new(AdvisedDirectory::default());
    let advice = advised.advice.clone();
    let dir: Arc<dyn Directory> = advised;
    Layout::create_first(&dir).unwrap();
    let layout = Layout::open(dir.clone(), (0, 0), 16, 16, true, FilePool::new(3)).unwrap();
    // Chunk 0 holds [16, 1000), chunk 1 [1000, 2000), chunk 2 [2000, 2500).
    layout.write_at(16, &[7u8; 984]).unwrap();
    layout.roll(1000).unwrap();
    layout.write_at(1000, &[8u8; 1000]).unwrap();
    layout.roll(2000).unwrap();
    layout.write_at(2000, &[9u8; 500]).unwrap();
    layout.sync().unwrap();
    advice.lock().unwrap().clear();
    layout.will_need(900, 1_400);
    let asked = advice.lock().unwrap().clone();
    let position = |start: u64, global: u64| CHUNK_HEADER_LEN + (global - start);
    assert_eq!(
        asked,
        vec![
            ("chunk.000000".to_string(), position(16, 900), 100),
            ("chunk.000001".to_string(), position(1000, 1000), 1000),
            ("chunk.000002".to_string(), position(2000, 2000), 300),
        ]
    );
    // Below the pack, nothing is asked.
    advice.lock().unwrap().clear();
    layout.will_need(0, 10);
    assert!(advice.lock().unwrap().is_empty());
}

/// Recovery's look at the chunk files present stops at a missing or unfinished chunk, never at one
/// it could not open: that is the system's failure, and it is returned, naming the file.
#[test]
fn discover_returns_a_chunk_it_cannot_open_rather_than_stop_before_it() {
    let advised = Arc::new(AdvisedDirectory::default());
    let dir: Arc<dyn Directory> = advised.clone();
    Layout::create_first(&dir).unwrap();
    let layout = Layout::open(dir.clone(), (0, 0), 16, 16, true, FilePool::new(3)).unwrap();
    for (start, len) in [(16u64, 984usize), (1000, 1000), (2000, 500)] {
        if start > 16 {
            layout.roll(start).unwrap();
        }
        layout.write_at(start, &vec![1u8; len]).unwrap();
    }
    layout.sync().unwrap();
    drop(layout);
    assert_eq!(Layout::discover(dir.clone()).unwrap().head().0, 2, "all three chunks");
    *advised.fail_open.lock().unwrap() = Some("chunk.000001".to_string());
    match Layout::discover(dir.clone()) {
        Err(StoreError::OpenFile { name, op: "open", .. }) => assert_eq!(name, "chunk.000001"),
        Err(other) => panic!("another error: {other}"),
        Ok(found) => panic!("a layout ending at chunk {} instead of an error", found.head().0),
    }
    // A chunk that is not there (a crashed roll's, removed) ends the pack, as before.
    *advised.fail_open.lock().unwrap() = None;
    dir.remove("chunk.000002").unwrap();
    assert_eq!(Layout::discover(dir).unwrap().head().0, 1);
}
