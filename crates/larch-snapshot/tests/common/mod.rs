//! Shared helpers: a store with the shapes a snapshot must carry, and access to the record stream
//! of a snapshot (to forge one with valid checksums).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use larch_core::{CommitInfo, Hash, Tree};
use larch_snapshot::format::{FRAME_HEADER_LEN, FrameWriter, HEADER_LEN};
use larch_snapshot::{ExportOptions, Progress};
use larch_store::Repo;
use std::path::Path;

pub fn info(n: i64) -> CommitInfo {
    CommitInfo::tezos(1530374852 + 30 * n, format!("lvl {n}"))
}

fn fill(tree: &mut Tree, level: u32, contracts: u32) {
    // A large directory (an inode tree two levels deep), with hex names (packed) and others.
    for i in 0..contracts {
        let key = format!("{:040x}", u64::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        tree.add(&["contracts", "index", &key, "balance"], (i * 7 + level).to_le_bytes().to_vec()).unwrap();
        if i % 5 == 0 {
            tree.add(&["contracts", "index", &key, "counter"], format!("{}", i + level).into_bytes())
                .unwrap();
        }
    }
    // A directory of 300 entries (just above the flat limit), names not hex.
    for i in 0..300u32 {
        tree.add(&["big_maps", &format!("key-{i}")], vec![0u8; (i % 40) as usize]).unwrap();
    }
    // Large values repeated (written once) and identical subtrees in several places.
    let script = vec![0xab; 400];
    for i in 0..12u32 {
        let dir = format!("contract-{i}");
        tree.add(&["scripts", &dir, "code"], script.clone()).unwrap();
        tree.add(&["scripts", &dir, "storage"], b"Unit".to_vec()).unwrap();
        tree.add(&["scripts", &dir, "meta", "ok"], vec![1]).unwrap();
    }
    tree.add(&["data", "level"], level.to_le_bytes().to_vec()).unwrap();
    tree.add(&["data", "empty"], Vec::new()).unwrap();
    tree.add(&["data", "long"], vec![level as u8; 5000]).unwrap();
}

/// A store of three commits; returns their hashes (the last is the head).
pub fn build_store(dir: &Path) -> Vec<Hash> {
    build_store_sized(dir, 1500)
}

/// [`build_store`] with `contracts` entries in the large directory.
pub fn build_store_sized(dir: &Path, contracts: u32) -> Vec<Hash> {
    let mut repo = Repo::open(dir).unwrap();
    let mut hashes: Vec<Hash> = Vec::new();
    let mut tree = repo.empty_tree();
    for level in 0..3u32 {
        fill(&mut tree, level, contracts);
        let parents: Vec<Hash> = hashes.last().copied().into_iter().collect();
        hashes.push(repo.commit(&tree, &parents, info(i64::from(level))).unwrap());
        tree = repo.checkout(hashes.last().unwrap()).unwrap();
    }
    repo.close().unwrap();
    hashes
}

pub fn export_bytes(repo: &Repo, commit: Option<Hash>, options: ExportOptions) -> Vec<u8> {
    let mut out = Vec::new();
    larch_snapshot::export(repo, commit, &mut out, options, &mut |_: Progress| {}).unwrap();
    out
}

/// One frame of a snapshot file: where it starts, and its record-stream bytes.
pub struct Frame {
    pub offset: usize,
    pub len: usize,
    pub raw: Vec<u8>,
}

/// The frames of a snapshot file (a well-formed one).
pub fn frames(file: &[u8]) -> Vec<Frame> {
    let mut out = Vec::new();
    let mut at = HEADER_LEN;
    while at < file.len() {
        let head = &file[at..at + FRAME_HEADER_LEN];
        let raw_len = u32::from_le_bytes(head[1..5].try_into().unwrap()) as usize;
        let stored_len = u32::from_le_bytes(head[5..9].try_into().unwrap()) as usize;
        let body = &file[at + FRAME_HEADER_LEN..at + FRAME_HEADER_LEN + stored_len];
        let raw = if head[0] == 0 {
            body.to_vec()
        } else {
            let mut out = Vec::new();
            let mut inflate = flate2::Decompress::new(false);
            out.reserve(raw_len);
            inflate.decompress_vec(body, &mut out, flate2::FlushDecompress::Finish).unwrap();
            out
        };
        assert_eq!(raw.len(), raw_len);
        let len = FRAME_HEADER_LEN + stored_len + 4;
        out.push(Frame { offset: at, len, raw });
        at += len;
    }
    out
}

/// The record stream of a snapshot file and its window.
pub fn stream(file: &[u8]) -> (Vec<u8>, u32) {
    let window = u32::from_le_bytes(file[12..16].try_into().unwrap());
    (frames(file).into_iter().flat_map(|frame| frame.raw).collect(), window)
}

/// A snapshot file carrying `stream`, with valid checksums (frames stored, not deflated).
pub fn reframe(stream: &[u8], window: u32) -> Vec<u8> {
    let mut writer = FrameWriter::new(Vec::new(), window, None).unwrap();
    writer.write(stream).unwrap();
    writer.finish().unwrap().0
}

/// Where `needle` first occurs in `haystack`.
pub fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}
