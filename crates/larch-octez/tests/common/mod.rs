//! Synthetic Octez snapshot archives (version 9) built around a context directory, member by
//! member as Octez's tar exporter lays them out (`docs/octez.md`). Shared with larch-cli's tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

/// The block the synthetic snapshots are of.
pub const LEVEL: i32 = 41;
/// Its timestamp (the fixture commit's date).
pub const TIMESTAMP: i64 = 1_530_376_082;
/// Its timestamp as Octez's JSON writes it.
pub const TIMESTAMP_TEXT: &str = "2018-06-30T16:28:02Z";

/// One member of an archive: name and bytes (`None`: a directory).
pub type Member = (String, Option<Vec<u8>>);

fn dynamic(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
}

/// A block header: the shell header (level, proto, predecessor, timestamp, validation passes,
/// operations hash, fitness, context) and protocol data.
pub fn header(level: i32, timestamp: i64, context: [u8; 32]) -> Vec<u8> {
    let mut out = level.to_be_bytes().to_vec();
    out.push(1); // proto level
    out.extend_from_slice(&[0x11; 32]); // predecessor
    out.extend_from_slice(&timestamp.to_be_bytes());
    out.push(4); // validation passes
    out.extend_from_slice(&[0x22; 32]); // operations hash
    let mut fitness = Vec::new();
    dynamic(&mut fitness, &[0x02]);
    dynamic(&mut fitness, &[0, 0, 0, 41]);
    dynamic(&mut out, &fitness);
    out.extend_from_slice(&context);
    out.extend_from_slice(b"protocol data: 96 bytes in Octez, opaque to the shell");
    out
}

/// `block_data` whose resulting context hash is `context`; returns it and the block header.
pub fn block_data(context: [u8; 32]) -> (Vec<u8>, Vec<u8>) {
    let header = header(LEVEL, TIMESTAMP, [0x33; 32]);
    let predecessor = header_of_predecessor();
    let mut operations = Vec::new();
    let mut first = Vec::new();
    dynamic(&mut first, b"an operation: branch, contents, signature");
    dynamic(&mut operations, &first);
    for _ in 0..3 {
        dynamic(&mut operations, &[]);
    }
    let mut out = Vec::new();
    dynamic(&mut out, &operations);
    dynamic(&mut out, &header);
    dynamic(&mut out, &predecessor);
    out.extend_from_slice(&120u32.to_be_bytes()); // predecessor max operations TTL
    out.push(0xff);
    out.extend_from_slice(&[0x44; 32]); // predecessor block metadata hash
    out.push(0x00); // no predecessor operations metadata hash
    out.extend_from_slice(&context);
    (out, header)
}

fn header_of_predecessor() -> Vec<u8> {
    header(LEVEL - 1, TIMESTAMP - 30, [0x55; 32])
}

/// The base58check block hash of a header, computed here independently (BLAKE2b-256, prefix
/// `01 34`).
pub fn block_hash(header: &[u8]) -> String {
    let digest = blake2b_simd::Params::new().hash_length(32).hash(header);
    let mut bytes = vec![1u8, 52];
    bytes.extend_from_slice(digest.as_bytes());
    bs58::encode(bytes).with_check().into_string()
}

/// `metadata.json` of the block whose header is `header`.
pub fn metadata(header: &[u8]) -> Vec<u8> {
    format!(
        "{{ \"chain_name\": \"TEZOS_MAINNET\", \"mode\": \"rolling\",\n  \"block_hash\": \"{}\", \"level\": {LEVEL},\n  \"timestamp\": \"{TIMESTAMP_TEXT}\" }}",
        block_hash(header)
    )
    .into_bytes()
}

fn context_members(dir: &Path, prefix: &str, out: &mut Vec<Member>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap()).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = format!("{prefix}/{}", entry.file_name().to_string_lossy());
        if entry.file_type().unwrap().is_dir() {
            out.push((name.clone(), None));
            context_members(&entry.path(), &name, out);
        } else {
            out.push((name, Some(std::fs::read(entry.path()).unwrap())));
        }
    }
}

/// The members of a snapshot of the context in `context_dir` whose commit is `context`, in the
/// order Octez writes them: version, block data, context, the chain's blocks and protocols,
/// metadata last.
pub fn members(context_dir: &Path, context: [u8; 32]) -> Vec<Member> {
    let (block, header) = block_data(context);
    let mut out: Vec<Member> = vec![
        ("snapshot_version.json".into(), Some(b"{ \"version\": 9 }".to_vec())),
        ("block_data".into(), Some(block)),
        ("context".into(), None),
    ];
    context_members(context_dir, "context", &mut out);
    out.push(("floating_blocks".into(), Some(vec![0xab; 3000])));
    out.push(("protocol_levels".into(), Some(vec![0x01; 40])));
    out.push(("protocols".into(), None));
    out.push(("protocols/PtParisBxoLz5gzMmn3d9WBQNoPSZakgnkMC2VNuQ3KXfUtUQeZ".into(), Some(vec![0x77; 700])));
    out.push(("cemented".into(), None));
    out.push(("metadata.json".into(), Some(metadata(&header))));
    out
}

/// A POSIX (ustar) tar of `members`.
pub fn tar(members: &[Member]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (name, bytes) in members {
        let mut header = tar::Header::new_ustar();
        header.set_mode(0o644);
        header.set_mtime(1_700_000_000);
        match bytes {
            Some(bytes) => {
                header.set_entry_type(tar::EntryType::Regular);
                header.set_size(bytes.len() as u64);
                builder.append_data(&mut header, name, bytes.as_slice()).unwrap();
            }
            None => {
                header.set_entry_type(tar::EntryType::Directory);
                header.set_size(0);
                builder.append_data(&mut header, name, std::io::empty()).unwrap();
            }
        }
    }
    builder.into_inner().unwrap()
}

/// Where each member's header and data start in `archive` (names, header offset, data offset,
/// size), read back with the tar crate.
pub fn layout(archive: &[u8]) -> Vec<(String, u64, u64, u64)> {
    let mut reader = tar::Archive::new(archive);
    reader
        .entries()
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                String::from_utf8_lossy(&e.path_bytes()).into_owned(),
                e.raw_header_position(),
                e.raw_file_position(),
                e.size(),
            )
        })
        .collect()
}

/// Writes `members` as a snapshot directory (Octez's `raw` export format) at `dir`.
pub fn write_directory(members: &[Member], dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for (name, bytes) in members {
        let path = dir.join(name);
        match bytes {
            Some(bytes) => std::fs::write(path, bytes).unwrap(),
            None => std::fs::create_dir_all(path).unwrap(),
        }
    }
}
