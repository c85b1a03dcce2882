//! larch-octez: reads Octez snapshot archives (format version 9, the only one current Octez
//! writes and reads): a POSIX tar holding `snapshot_version.json`, `metadata.json`, `block_data`,
//! the `context/` directory (a one-commit irmin-pack store, which `larch-irmin` imports) and the
//! chain's block and protocol data (skipped). The archive is streamed once; only the context's
//! own files reach the disk. Byte layouts: `docs/octez.md`.
//!
//! ```no_run
//! let dir = std::path::Path::new("context-files");
//! let snapshot = larch_octez::read_archive(std::fs::File::open("mainnet.rolling")?, dir)?;
//! println!("{} level {}: context {}", snapshot.metadata.chain_name, snapshot.block.level,
//!          snapshot.block.resulting_context_hash);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod archive;
pub mod block_data;
pub mod error;
pub mod metadata;

pub use archive::{SUPPORTED_VERSION, Snapshot, read_archive, read_directory};
pub use block_data::BlockData;
pub use error::{OctezError, Result};
pub use metadata::Metadata;
