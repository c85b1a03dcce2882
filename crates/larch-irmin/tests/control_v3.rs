//! Version-3 control files written by Irmin 3.3/3.4 (`tests/data/pack`), decoded and normalised
//! as Irmin upgrades them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_irmin::{Control, Status};
use std::path::PathBuf;

fn control(name: &str) -> Control {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/pack").join(name).join("store.control");
    Control::decode(&std::fs::read(&path).unwrap(), &path).unwrap()
}

#[test]
fn version_3_minimal_and_always() {
    let minimal = control("version_3_minimal");
    assert_eq!(
        minimal,
        Control {
            version: 3,
            dict_end_poff: 24,
            appendable_chunk_poff: 164,
            chunk_start_idx: 0,
            chunk_num: 1,
            volume_num: 0,
            status: Status::NoGcYet
        }
    );
    assert_eq!(control("version_3_always").status, Status::UsedNonMinimalIndexing);
}

#[test]
fn version_3_gced_upgrades_like_irmin() {
    let gced = control("version_3_minimal_gced");
    assert_eq!(gced.appendable_chunk_poff, 42);
    assert_eq!(gced.chunk_start_idx, 1);
    assert_eq!(
        gced.status,
        Status::Gced {
            suffix_start_offset: 122,
            generation: 1,
            latest_gc_target_offset: 122,
            suffix_dead_bytes: 0,
            mapping_end_poff: None
        }
    );
    assert_eq!(gced.suffix_start(), (122, 0));
}

/// These stores use 20-byte SHA-1 hashes: opening them as Tezos stores fails with a typed error
/// (their index entries are 33 bytes, not 45), not with garbage or a panic.
#[test]
fn sha1_stores_are_refused_with_a_typed_error() {
    for name in ["version_3_minimal", "version_3_always", "version_3_minimal_gced"] {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/pack").join(name);
        match larch_irmin::IrminStore::open(&dir) {
            Err(larch_irmin::IrminError::Corrupt { file, .. }) => {
                assert!(file.ends_with("index/log"), "{file:?}")
            }
            other => panic!("{name}: {other:?}"),
        }
    }
}
