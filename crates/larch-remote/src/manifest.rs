//! The replica manifest (`PREFIX/manifest`, `docs/object-storage.md` *Read replicas*): what a
//! read replica needs to serve every commit up to a writer's published head, written by the
//! writer ([`crate::publish`]) after everything it names is verified in the bucket, read by
//! replicas ([`crate::replica`]).
//!
//! It names the store (identity), the published state (a control file image holding only that
//! state), and the files a reader opens that are not archived chunk objects: the commit index
//! `commits`, the head chunk, and sealed chunks and GC segments not archived yet, each as a list of
//! *pieces*, immutable objects `tail.<file>.<from>-<to>.g<generation>` holding the file's bytes
//! `[from, to)`. Every other chunk the state names is the archived object `chunk.<seq>`.
//!
//! Bytes (little-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 8 | magic `LARCHMAN` |
//! | 4 | version, `1` |
//! | 4 | total length of the manifest, digest included |
//! | 8 | manifest generation (1, 2, ...: +1 per manifest the writer publishes) |
//! | 8 | when the writer published it, Unix milliseconds |
//! | 16 | the store's identity (`larch-id`) |
//! | 8 | the control slot's generation |
//! | 8 | its lineage |
//! | 8 | `pack_end` |
//! | 8 | `index_end` |
//! | 4 | `first_chunk` |
//! | 4 | `head_chunk` |
//! | 1 | `1` if the state has a head commit (branch `main`), else `0` |
//! | 32 | the head commit's hash (zeros without one) |
//! | 4 | slot length `s` (at most 4,096) |
//! | `s` | the control image's slot 0 record |
//! | 20 | the control image's confirmation record |
//! | 4 | file count `n` (at most 65,536) |
//! | per file | `u16` name length, name (ASCII), `u64` length published, `u32` piece count `p` (1..=1,024), `p` × (`u64` from, `u64` to, `u64` object generation) |
//! | 32 | BLAKE2b-256 of every byte above |
//!
//! A file's pieces are contiguous and cover `[0, length)` in order, each non-empty. The decoder
//! checks every bound before it allocates and reports what is wrong as a [`ManifestError`].

use crate::sums::digest;
use larch_core::Hash;

/// The manifest's object name, under the prefix.
pub const MANIFEST_OBJECT: &str = "manifest";

/// The prefix of piece objects' names.
pub const PIECE_PREFIX: &str = "tail.";

const MAGIC: &[u8; 8] = b"LARCHMAN";
const VERSION: u32 = 1;
const DIGEST: usize = 32;
/// Control file geometry (`docs/format.md` §2): slot pages of 4 KiB, the confirmation at 8192.
const SLOT_MAX: usize = 4096;
const CONFIRM_AT: usize = 8192;
const CONFIRM_LEN: usize = 20;
const MAX_FILES: u32 = 1 << 16;
const MAX_PIECES: u32 = 1024;

/// One piece of a file: its bytes `[from, to)` are the object [`Piece::object`] names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// First byte of the file it holds.
    pub from: u64,
    /// End (exclusive).
    pub to: u64,
    /// The manifest generation that wrote it (its name is unique by it).
    pub generation: u64,
}

impl Piece {
    /// The name of the object holding the piece of `file`.
    pub fn object(&self, file: &str) -> String {
        format!("{PIECE_PREFIX}{file}.{}-{}.g{:06}", self.from, self.to, self.generation)
    }

    /// Its length in bytes.
    pub fn len(&self) -> u64 {
        self.to - self.from
    }

    /// Whether it holds no byte (never, in a decoded manifest).
    pub fn is_empty(&self) -> bool {
        self.to == self.from
    }
}

/// A file a replica reads from pieces rather than from an archived object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PiecedFile {
    /// Its name in the store (`commits`, `chunk.<seq>`, `seg.<gen>`).
    pub name: String,
    /// The bytes published: the pieces cover `[0, len)`.
    pub len: u64,
    /// The pieces, in order.
    pub pieces: Vec<Piece>,
}

/// A decoded manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// The manifest's generation.
    pub generation: u64,
    /// When the writer published it (Unix milliseconds, the writer's clock).
    pub published_ms: u64,
    /// The store's identity.
    pub store: [u8; 16],
    /// The published control slot's generation.
    pub store_generation: u64,
    /// Its lineage.
    pub lineage: u64,
    /// The published end of the pack.
    pub pack_end: u64,
    /// The published length of the commit index.
    pub index_end: u64,
    /// The oldest live chunk.
    pub first_chunk: u32,
    /// The head chunk.
    pub head_chunk: u32,
    /// The head commit (branch `main`).
    pub head: Option<Hash>,
    /// The control image's slot record.
    pub slot: Vec<u8>,
    /// The control image's confirmation record.
    pub confirm: [u8; CONFIRM_LEN],
    /// The files read from pieces.
    pub files: Vec<PiecedFile>,
}

/// Why bytes are not a manifest.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// Fewer bytes than a field at `at` needs.
    #[error("the manifest is cut short: {len} bytes, a field at {at} needs {needed}")]
    Short {
        /// Where the field starts.
        at: usize,
        /// The bytes it needs.
        needed: usize,
        /// The bytes there are.
        len: usize,
    },
    /// The first 8 bytes are not `LARCHMAN`.
    #[error("not a larch manifest (magic {found:02x?})")]
    Magic {
        /// The bytes found.
        found: Vec<u8>,
    },
    /// A version this build does not read.
    #[error("manifest version {found} is not read by this build (it reads version {VERSION})")]
    Version {
        /// The version found.
        found: u32,
    },
    /// The length field does not match the bytes.
    #[error("the manifest says it is {declared} bytes long, {actual} were read")]
    Length {
        /// The length field.
        declared: u64,
        /// The bytes read.
        actual: usize,
    },
    /// The digest does not match: damaged.
    #[error("the manifest's checksum does not match its bytes")]
    Checksum,
    /// A field holds a value it may not.
    #[error("malformed manifest at byte {at}: {reason}")]
    Malformed {
        /// Where.
        at: usize,
        /// What is wrong.
        reason: String,
    },
}

impl Manifest {
    /// The control file image (8,212 bytes) holding only the published state.
    pub fn control_image(&self) -> Vec<u8> {
        let mut image = vec![0u8; CONFIRM_AT + CONFIRM_LEN];
        if let Some(slot) = image.get_mut(..self.slot.len()) {
            slot.copy_from_slice(&self.slot);
        }
        if let Some(confirm) = image.get_mut(CONFIRM_AT..) {
            confirm.copy_from_slice(&self.confirm);
        }
        image
    }

    /// Splits a control image into the slot record (its trailing zeros dropped) and the
    /// confirmation; `None` when it is not an image of one slot.
    pub fn split_image(image: &[u8]) -> Option<(Vec<u8>, [u8; CONFIRM_LEN])> {
        if image.len() != CONFIRM_AT + CONFIRM_LEN || image.get(SLOT_MAX..CONFIRM_AT)?.iter().any(|b| *b != 0)
        {
            return None;
        }
        let page = image.get(..SLOT_MAX)?;
        let used = page.iter().rposition(|b| *b != 0).map_or(0, |last| last + 1);
        Some((page.get(..used)?.to_vec(), image.get(CONFIRM_AT..)?.try_into().ok()?))
    }

    /// The pieced file `name`.
    pub fn file(&self, name: &str) -> Option<&PiecedFile> {
        self.files.iter().find(|file| file.name == name)
    }

    /// Every piece object it names.
    pub fn objects(&self) -> Vec<String> {
        self.files.iter().flat_map(|file| file.pieces.iter().map(|piece| piece.object(&file.name))).collect()
    }

    /// The encoded bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(256 + self.slot.len() + 64 * self.files.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes()); // the length, set below
        for value in [self.generation, self.published_ms] {
            out.extend_from_slice(&value.to_le_bytes());
        }
        out.extend_from_slice(&self.store);
        for value in [self.store_generation, self.lineage, self.pack_end, self.index_end] {
            out.extend_from_slice(&value.to_le_bytes());
        }
        out.extend_from_slice(&self.first_chunk.to_le_bytes());
        out.extend_from_slice(&self.head_chunk.to_le_bytes());
        out.push(u8::from(self.head.is_some()));
        out.extend_from_slice(&self.head.map_or([0; 32], |hash| hash.0));
        out.extend_from_slice(&(self.slot.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.slot);
        out.extend_from_slice(&self.confirm);
        out.extend_from_slice(&(self.files.len() as u32).to_le_bytes());
        for file in &self.files {
            out.extend_from_slice(&(file.name.len() as u16).to_le_bytes());
            out.extend_from_slice(file.name.as_bytes());
            out.extend_from_slice(&file.len.to_le_bytes());
            out.extend_from_slice(&(file.pieces.len() as u32).to_le_bytes());
            for piece in &file.pieces {
                for value in [piece.from, piece.to, piece.generation] {
                    out.extend_from_slice(&value.to_le_bytes());
                }
            }
        }
        let total = (out.len() + DIGEST) as u32;
        if let Some(len) = out.get_mut(12..16) {
            len.copy_from_slice(&total.to_le_bytes());
        }
        let sum = digest(&out);
        out.extend_from_slice(&sum);
        out
    }

    /// Decodes [`Manifest::encode`]'s bytes, checking every field.
    pub fn decode(bytes: &[u8]) -> Result<Manifest, ManifestError> {
        let mut r = Reader { bytes, at: 0 };
        let magic = r.take(8)?;
        if magic != MAGIC {
            return Err(ManifestError::Magic { found: magic.to_vec() });
        }
        let version = r.u32()?;
        if version != VERSION {
            return Err(ManifestError::Version { found: version });
        }
        let declared = r.u32()?;
        if declared as usize != bytes.len() {
            return Err(ManifestError::Length { declared: u64::from(declared), actual: bytes.len() });
        }
        let body = bytes.len().checked_sub(DIGEST).ok_or(ManifestError::Short {
            at: 0,
            needed: DIGEST,
            len: bytes.len(),
        })?;
        let (content, sum) = bytes.split_at(body);
        if digest(content) != sum {
            return Err(ManifestError::Checksum);
        }
        let mut r = Reader { bytes: content, at: r.at };
        let generation = r.u64()?;
        let published_ms = r.u64()?;
        let store: [u8; 16] = r.array()?;
        let store_generation = r.u64()?;
        let lineage = r.u64()?;
        let pack_end = r.u64()?;
        let index_end = r.u64()?;
        let first_chunk = r.u32()?;
        let head_chunk = r.u32()?;
        let at = r.at;
        let has_head = match r.u8()? {
            0 => false,
            1 => true,
            other => return Err(r.malformed(at, format!("head flag {other}, not 0 or 1"))),
        };
        let hash: [u8; 32] = r.array()?;
        if !has_head && hash != [0; 32] {
            return Err(r.malformed(at, "a head hash without the head flag".into()));
        }
        let head = has_head.then_some(Hash(hash));
        if first_chunk > head_chunk {
            return Err(
                r.malformed(at, format!("first chunk {first_chunk} above the head chunk {head_chunk}"))
            );
        }
        let at = r.at;
        let slot_len = r.u32()? as usize;
        if slot_len > SLOT_MAX {
            return Err(r.malformed(at, format!("a control slot of {slot_len} bytes (at most {SLOT_MAX})")));
        }
        let slot = r.take(slot_len)?.to_vec();
        let confirm: [u8; CONFIRM_LEN] = r.array()?;
        let at = r.at;
        let count = r.u32()?;
        if count > MAX_FILES {
            return Err(r.malformed(at, format!("{count} files (at most {MAX_FILES})")));
        }
        let mut files: Vec<PiecedFile> = Vec::new();
        for _ in 0..count {
            let at = r.at;
            let name_len = r.u16()? as usize;
            let name = std::str::from_utf8(r.take(name_len)?)
                .ok()
                .filter(|name| is_file_name(name))
                .map(str::to_string);
            let name = name.ok_or_else(|| {
                r.malformed(at, "a file name that is not commits, chunk.<seq> or seg.<gen>".into())
            })?;
            if files.iter().any(|file| file.name == name) {
                return Err(r.malformed(at, format!("{name} named twice")));
            }
            let len = r.u64()?;
            let at = r.at;
            let pieces = r.u32()?;
            if pieces == 0 || pieces > MAX_PIECES {
                return Err(r.malformed(at, format!("{name}: {pieces} pieces (1 to {MAX_PIECES})")));
            }
            let mut list = Vec::new();
            let mut end = 0;
            for _ in 0..pieces {
                let at = r.at;
                let piece = Piece { from: r.u64()?, to: r.u64()?, generation: r.u64()? };
                if piece.from != end || piece.to <= piece.from {
                    return Err(r.malformed(
                        at,
                        format!("{name}: piece {}..{} does not follow byte {end}", piece.from, piece.to),
                    ));
                }
                end = piece.to;
                list.push(piece);
            }
            if end != len {
                return Err(r.malformed(at, format!("{name}: pieces end at {end}, the file at {len}")));
            }
            if name == "commits" && len != index_end {
                return Err(
                    r.malformed(at, format!("the commit index published up to {len}, not {index_end}"))
                );
            }
            files.push(PiecedFile { name, len, pieces: list });
        }
        if r.at != content.len() {
            return Err(r.malformed(r.at, format!("{} bytes after the last file", content.len() - r.at)));
        }
        Ok(Manifest {
            generation,
            published_ms,
            store,
            store_generation,
            lineage,
            pack_end,
            index_end,
            first_chunk,
            head_chunk,
            head,
            slot,
            confirm,
            files,
        })
    }
}

/// Whether `name` may be a pieced file's: `commits`, a chunk's or a segment's name.
fn is_file_name(name: &str) -> bool {
    if name == "commits" {
        return true;
    }
    let digits = name.strip_prefix("chunk.").or_else(|| name.strip_prefix("seg."));
    digits.is_some_and(|d| d.len() >= 6 && d.len() <= 20 && d.bytes().all(|b| b.is_ascii_digit()))
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], ManifestError> {
        let short = ManifestError::Short { at: self.at, needed: n, len: self.bytes.len() };
        let end = self.at.checked_add(n).ok_or(short.clone())?;
        let out = self.bytes.get(self.at..end).ok_or(short)?;
        self.at = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], ManifestError> {
        let at = self.at;
        self.take(N)?.try_into().map_err(|_| self.malformed(at, "a field of the wrong size".into()))
    }

    fn u8(&mut self) -> Result<u8, ManifestError> {
        Ok(self.array::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16, ManifestError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, ManifestError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, ManifestError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn malformed(&self, at: usize, reason: String) -> ManifestError {
        ManifestError::Malformed { at, reason }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        Manifest {
            generation: 7,
            published_ms: 1_800_000_000_000,
            store: [0x5a; 16],
            store_generation: 42,
            lineage: 0,
            pack_end: 5000,
            index_end: 16 + 44 * 3,
            first_chunk: 0,
            head_chunk: 2,
            head: Some(Hash([0xab; 32])),
            slot: vec![1, 2, 3, 4],
            confirm: [9; CONFIRM_LEN],
            files: vec![
                PiecedFile {
                    name: "commits".into(),
                    len: 148,
                    pieces: vec![
                        Piece { from: 0, to: 104, generation: 5 },
                        Piece { from: 104, to: 148, generation: 7 },
                    ],
                },
                PiecedFile {
                    name: "chunk.000002".into(),
                    len: 900,
                    pieces: vec![Piece { from: 0, to: 900, generation: 7 }],
                },
            ],
        }
    }

    #[test]
    fn a_manifest_round_trips_and_names_its_objects() {
        let manifest = sample();
        let bytes = manifest.encode();
        assert_eq!(Manifest::decode(&bytes), Ok(manifest.clone()));
        assert_eq!(
            manifest.objects(),
            ["tail.commits.0-104.g000005", "tail.commits.104-148.g000007", "tail.chunk.000002.0-900.g000007"]
        );
        let image = manifest.control_image();
        assert_eq!(image.len(), 8212);
        assert_eq!(Manifest::split_image(&image), Some((vec![1, 2, 3, 4], [9; CONFIRM_LEN])));
    }

    #[test]
    fn a_damaged_short_or_foreign_manifest_is_refused_with_a_typed_error() {
        let bytes = sample().encode();
        // Every single-bit flip is refused (most by the checksum), and no cut is accepted.
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x10;
            assert!(Manifest::decode(&damaged).is_err(), "flip at {at}");
        }
        for len in 0..bytes.len() {
            assert!(Manifest::decode(&bytes[..len]).is_err(), "cut at {len}");
        }
        let mut flipped = bytes.clone();
        flipped[100] ^= 1;
        assert_eq!(Manifest::decode(&flipped), Err(ManifestError::Checksum));
        assert!(matches!(Manifest::decode(&bytes[..5]), Err(ManifestError::Short { at: 0, needed: 8, .. })));
        assert!(matches!(
            Manifest::decode(&bytes[..bytes.len() - 1]),
            Err(ManifestError::Length { actual, .. }) if actual == bytes.len() - 1
        ));
        let mut version = bytes.clone();
        version[8] = 2;
        assert_eq!(Manifest::decode(&version), Err(ManifestError::Version { found: 2 }));
        assert!(matches!(Manifest::decode(b"LARCHSUM...."), Err(ManifestError::Magic { .. })));
        // Well checksummed but with pieces that leave a hole: malformed, never trusted.
        let mut holed = sample();
        holed.files[0].pieces[1].from = 110;
        assert!(matches!(Manifest::decode(&holed.encode()), Err(ManifestError::Malformed { .. })));
        let mut named = sample();
        named.files[1].name = "../control".into();
        assert!(matches!(Manifest::decode(&named.encode()), Err(ManifestError::Malformed { .. })));
    }
}
