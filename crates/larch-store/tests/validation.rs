//! Decoders validate what the checksums cannot (issue 9, point 5): records altered *with* a valid
//! checksum (as a crafted store would be) are refused on read or reported by fsck: unsorted
//! directory entries, an impossible `Tree` length, bytes 8-31 of a patch's base hash, a contents
//! value whose hash disagrees (on read, in the verifying mode), a commit index claiming more
//! commits than the pack can hold.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{contents_of, info};
use larch_core::Hash;
use larch_store::INLINE_MAX;
use larch_store::testing::codec::RecordKind;
use larch_store::testing::storage::{Storage, StoreFiles};
use larch_store::{Repo, RepoOptions};
use std::sync::Arc;

/// A record of the pack: offset, kind, where its body starts and its length.
#[derive(Clone, Copy, Debug)]
struct Record {
    offset: usize,
    kind: RecordKind,
    body: usize,
    len: usize,
}

fn records(pack: &[u8]) -> Vec<Record> {
    let mut out = Vec::new();
    let mut at = 16;
    while at < pack.len() {
        let kind = RecordKind::from_byte(pack[at]).unwrap();
        let (mut len, mut shift, mut pos) = (0usize, 0, at + 1);
        loop {
            let byte = pack[pos];
            len |= usize::from(byte & 0x7f) << shift;
            pos += 1;
            shift += 7;
            if byte & 0x80 == 0 {
                break;
            }
        }
        out.push(Record { offset: at, kind, body: pos, len });
        at = pos + len + 4;
    }
    out
}

/// Recomputes the checksum of `record` after its body was altered.
fn fix_crc(pack: &mut [u8], record: Record) {
    let end = record.body + record.len;
    let crc = crc32fast::hash(&pack[record.offset..end]);
    pack[end..end + 4].copy_from_slice(&crc.to_le_bytes());
}

struct Images {
    control: Vec<u8>,
    pack: Vec<u8>,
    index: Vec<u8>,
}

impl Images {
    fn files(&self) -> StoreFiles {
        StoreFiles::memory_with_pack(self.control.clone(), self.pack.clone(), self.index.clone())
    }

    fn open(&self, verify_on_load: bool) -> Repo {
        let options = RepoOptions { verify_on_load, ..RepoOptions::default() };
        Repo::open_files(self.files(), false, options, None).unwrap()
    }
}

/// A store of two commits: a flat directory, a 300-entry directory (inode trie), long values
/// (contents records), and a second commit rewriting part of it (patch records).
fn build() -> (Images, Vec<Hash>) {
    let files = StoreFiles::memory();
    let mut repo = Repo::open_files(files.clone(), true, RepoOptions::default(), None).unwrap();
    let mut tree = repo.empty_tree();
    for i in 0..300 {
        tree.add(&["big", &format!("n{i:03}")], format!("v{i}").into_bytes()).unwrap();
    }
    for i in 0..8 {
        tree.add(&["flat", &format!("k{i}")], vec![i as u8; INLINE_MAX + 8]).unwrap();
    }
    let first = repo.commit(&tree, &[], info(1)).unwrap();
    tree.add(&["flat", "k3"], b"changed".to_vec()).unwrap();
    tree.add(&["big", "n007"], b"changed".to_vec()).unwrap();
    let second = repo.commit(&tree, &[first], info(2)).unwrap();
    let snapshot = |storage: &Arc<dyn Storage>| storage.read_all().unwrap();
    let images = Images {
        control: snapshot(&files.control),
        pack: files.pack_image().unwrap(),
        index: snapshot(&files.index),
    };
    (images, vec![first, second])
}

/// Reads every commit's whole tree: the first error, if any.
fn read_all(repo: &Repo, commits: &[Hash]) -> Result<(), String> {
    for commit in commits {
        let tree = repo.checkout(commit).map_err(|e| e.to_string())?;
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| contents_of(&tree)));
        if result.is_err() {
            return Err("a load failed".into());
        }
    }
    Ok(())
}

#[test]
fn the_untouched_store_reads_and_checks_clean_in_both_modes() {
    let (images, commits) = build();
    for verify in [false, true] {
        let repo = images.open(verify);
        read_all(&repo, &commits).unwrap();
        assert!(repo.fsck().is_clean());
    }
}

#[test]
fn unsorted_directory_entries_are_refused_on_decode() {
    let (mut images, commits) = build();
    // The flat directory "flat" of the first commit: 8 entries "k0".."k7", each a contents
    // pointer of the same shape (tag, len, name, hash, back). Swap the names of k0 and k1.
    let record = records(&images.pack)
        .into_iter()
        .find(|r| {
            r.kind == RecordKind::Flat && images.pack[r.body..r.body + r.len].windows(2).any(|w| w == b"k0")
        })
        .unwrap();
    let body = &mut images.pack[record.body..record.body + record.len];
    let k0 = body.windows(2).position(|w| w == b"k0").unwrap();
    let k1 = body.windows(2).position(|w| w == b"k1").unwrap();
    body[k0 + 1] = b'1';
    body[k1 + 1] = b'0';
    fix_crc(&mut images.pack, record);
    let repo = images.open(false);
    let error = read_all(&repo, &commits[..1]).unwrap_err();
    assert!(error.contains("load"), "{error}");
    let tree = repo.checkout(&commits[0]).unwrap();
    let error = tree.find(&["flat", "k2"]).unwrap_err().to_string();
    assert!(error.contains("not sorted"), "{error}");
    let report = repo.fsck();
    assert!(!report.is_clean());
    assert!(report.problems.iter().any(|p| p.what.contains("not sorted")), "{report}");
}

#[test]
fn an_impossible_inode_length_is_refused_on_decode() {
    let (mut images, commits) = build();
    // The root inode of "big" (depth 0, 300 entries): its length says 200.
    let record = records(&images.pack)
        .into_iter()
        .find(|r| r.kind == RecordKind::Tree && images.pack[r.body] == 0)
        .unwrap();
    // depth byte, then length 300 as LEB128 (0xac 0x02) → 200 (0xc8 0x01).
    assert_eq!(&images.pack[record.body + 1..record.body + 3], &[0xac, 0x02]);
    images.pack[record.body + 1] = 0xc8;
    images.pack[record.body + 2] = 0x01;
    fix_crc(&mut images.pack, record);
    let repo = images.open(false);
    let tree = repo.checkout(&commits[0]).unwrap();
    let error = tree.find(&["big", "n001"]).unwrap_err().to_string();
    assert!(error.contains("inode tree at depth 0 with 200 entries"), "{error}");
    assert!(!repo.fsck().is_clean());
}

#[test]
fn fsck_checks_all_32_bytes_of_a_patch_base_hash() {
    let (mut images, _) = build();
    let patch = records(&images.pack)
        .into_iter()
        .find(|r| matches!(r.kind, RecordKind::PatchEntries | RecordKind::PatchTree))
        .expect("the second commit writes patches");
    // Byte 20 of the base hash (the first 32 bytes of the body).
    images.pack[patch.body + 20] ^= 0x40;
    fix_crc(&mut images.pack, patch);
    let report = images.open(false).fsck();
    assert!(!report.is_clean(), "{report}");
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.offset as usize == patch.offset || p.parent == Some(patch.offset as u64)),
        "{report}"
    );
}

#[test]
fn altered_contents_are_detected_on_read_in_verifying_mode() {
    let (mut images, commits) = build();
    // A contents record (a value of "flat", longer than the inline threshold): one byte changed, checksum fixed.
    let record = records(&images.pack).into_iter().find(|r| r.kind == RecordKind::Contents).unwrap();
    images.pack[record.body] ^= 0xff;
    fix_crc(&mut images.pack, record);
    // The default mode trusts references (the checksum is valid): fsck names the damage.
    let report = images.open(false).fsck();
    assert!(report.problems.iter().any(|p| p.what.contains("contents hash")), "{report}");
    // The verifying mode refuses the value on read.
    let repo = images.open(true);
    let tree = repo.checkout(&commits[0]).unwrap();
    let mut refused = 0;
    for i in 0..8 {
        if let Err(error) = tree.find(&["flat", &format!("k{i}")]) {
            assert!(error.to_string().contains("hash"), "{error}");
            refused += 1;
        }
    }
    assert_eq!(refused, 1);
}

// A control file claiming more commits than the pack can hold: tests/durability.rs
// (a_crafted_control_claiming_a_huge_index_is_refused_before_reading_it).

#[test]
fn a_pack_truncated_under_an_open_reader_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let mut tree = repo.empty_tree();
    for i in 0..50 {
        tree.add(&["d", &format!("k{i}")], vec![i as u8; INLINE_MAX + 8]).unwrap();
    }
    let commit = repo.commit(&tree, &[], info(1)).unwrap();
    repo.close().unwrap();
    // The default reader (positioned reads): opened, then the pack is cut behind its back.
    let reader = Repo::open_read_only(dir.path()).unwrap();
    let tree = reader.checkout(&commit).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join("chunk.000000"))
        .unwrap()
        .set_len(100)
        .unwrap();
    let error = tree.find(&["d", "k7"]).unwrap_err().to_string();
    assert!(error.contains("shorter than published"), "{error}");
    assert!(!error.contains("failed to fill whole buffer"), "{error}");
}

#[test]
fn an_inode_at_the_wrong_depth_is_refused_on_read() {
    let (mut images, commits) = build();
    // The root inode of "big" (depth 0) claims depth 1: as a directory it is refused, not
    // searched with the wrong bucket function.
    let record = records(&images.pack)
        .into_iter()
        .find(|r| r.kind == RecordKind::Tree && images.pack[r.body] == 0)
        .unwrap();
    images.pack[record.body] = 1;
    fix_crc(&mut images.pack, record);
    let repo = images.open(false);
    let tree = repo.checkout(&commits[0]).unwrap();
    let error = tree.find(&["big", "n001"]).unwrap_err().to_string();
    assert!(error.contains("inner inode used as a directory"), "{error}");
    let mut tree = tree;
    assert!(tree.add(&["big", "n001"], b"x".to_vec()).is_err());
    assert!(!repo.fsck().is_clean());
}

/// The report of `fsck` with a frontier of 2 records in memory (the rest spilled to a temporary
/// file) is the report with the default frontier, problems and statistics alike.
fn same_report_when_spilled(repo: &Repo) -> larch_store::FsckReport {
    let report = repo.fsck();
    let dir = tempfile::tempdir().unwrap();
    let options = larch_store::FsckOptions { max_pending: 2, spill_dir: dir.path().to_path_buf() };
    let spilled = repo.fsck_with(&options);
    assert_eq!(report.stats.spilled_pending, 0, "{report}");
    assert!(spilled.stats.spilled_pending > 0, "{spilled}");
    assert_eq!(spilled.problems, report.problems);
    assert_eq!(spilled.absent_parents, report.absent_parents);
    let mut stats = spilled.stats.clone();
    (stats.peak_pending, stats.spilled_pending) = (report.stats.peak_pending, 0);
    assert_eq!(stats, report.stats);
    // The temporary file has no name: nothing is left in the directory.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    report
}

#[test]
fn fsck_with_a_spilled_frontier_finds_the_same_problems() {
    let (images, _) = build();
    assert!(same_report_when_spilled(&images.open(false)).is_clean());
    // A patch's base hash altered (byte 20), then a contents value altered: each found both ways.
    let (mut images, _) = build();
    let patch = records(&images.pack)
        .into_iter()
        .find(|r| matches!(r.kind, RecordKind::PatchEntries | RecordKind::PatchTree))
        .expect("the second commit writes patches");
    images.pack[patch.body + 20] ^= 0x40;
    fix_crc(&mut images.pack, patch);
    assert!(!same_report_when_spilled(&images.open(false)).is_clean());
    let (mut images, _) = build();
    let record = records(&images.pack).into_iter().find(|r| r.kind == RecordKind::Contents).unwrap();
    images.pack[record.body] ^= 0xff;
    fix_crc(&mut images.pack, record);
    let report = same_report_when_spilled(&images.open(false));
    assert!(report.problems.iter().any(|p| p.what.contains("contents hash")), "{report}");
}
