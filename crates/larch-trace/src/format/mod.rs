//! Trace files: Irmin's replayable trace (`IrmRepBT` version 0) and larch's own format
//! (`docs/trace-format.md`), both carrying exactly the operations of [`crate::op::Op`], so that
//! conversion between them is lossless.
//!
//! Readers are iterators of `Result<Op, TraceError>` over any [`Read`] (streaming, bounded memory);
//! writers implement [`OpSink`] over any [`Write`]. [`open_trace`] sniffs the magic of a file and
//! returns a reader for either format; [`convert`] and [`convert_file`] translate between formats.
//!
//! ```
//! use larch_trace::format::{IrminReader, IrminWriter, OpSink};
//!
//! let bytes = std::fs::read("tests/data/tezos_actions_1commit.repr")?;
//! let mut reader = IrminReader::new(&bytes[..])?;
//! let ops: Vec<_> = reader.by_ref().collect::<Result<_, _>>()?;
//! assert_eq!(ops.len(), 6);
//! assert_eq!(reader.truncated_tail(), Some(296));
//! let mut writer = IrminWriter::new(Vec::new())?;
//! for op in &ops {
//!     writer.write_op(op)?;
//! }
//! assert_eq!(writer.into_inner()?, bytes[..296]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod bytes;
mod error;
mod irmin;
mod larch;
mod larch_record;
mod prefetch;

pub use bytes::MAX_FRAME;
pub use error::TraceError;
pub use irmin::{IRMIN_MAGIC, IRMIN_VERSION, IrminReader, IrminWriter, encode_row};
pub use larch::{LARCH_MAGIC, LARCH_VERSION, LarchReader, LarchWriter, MAX_HEADER, Metadata};
pub use prefetch::{PrefetchSource, prefetch};

use crate::op::Op;
use std::fmt;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// The trace formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TraceFormat {
    /// Irmin's replayable trace, magic `IrmRepBT`, version 0.
    Irmin,
    /// larch's own format, magic `LARCHTRC`.
    Larch,
}

impl TraceFormat {
    /// The short name used on the command line: `irmin` or `larch`.
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Irmin => "irmin",
            TraceFormat::Larch => "larch",
        }
    }

    /// The format whose magic `bytes` starts with.
    pub fn sniff(bytes: &[u8]) -> Option<TraceFormat> {
        if bytes.starts_with(&IRMIN_MAGIC) {
            Some(TraceFormat::Irmin)
        } else if bytes.starts_with(&LARCH_MAGIC) {
            Some(TraceFormat::Larch)
        } else {
            None
        }
    }
}

impl fmt::Display for TraceFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TraceFormat::Irmin => "IrmRepBT",
            TraceFormat::Larch => "larch trace",
        })
    }
}

/// The error of parsing a [`TraceFormat`] name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown trace format {0:?}: expected irmin or larch")]
pub struct UnknownFormat(pub String);

impl std::str::FromStr for TraceFormat {
    type Err = UnknownFormat;

    /// Accepts `irmin` (or `irmrepbt`) and `larch`, in any case.
    fn from_str(text: &str) -> Result<TraceFormat, UnknownFormat> {
        match text.to_ascii_lowercase().as_str() {
            "irmin" | "irmrepbt" => Ok(TraceFormat::Irmin),
            "larch" => Ok(TraceFormat::Larch),
            _ => Err(UnknownFormat(text.to_owned())),
        }
    }
}

/// A trace reader: the operations in order, then `None` (after the first error, `None` too).
pub trait OpSource: Iterator<Item = Result<Op, TraceError>> {
    /// The format being read.
    fn format(&self) -> TraceFormat;
    /// The header metadata (always empty for Irmin traces).
    fn metadata(&self) -> &[(String, String)];
    /// For Irmin traces: where an incomplete last frame starts, if the trace ended inside one.
    fn truncated_tail(&self) -> Option<u64>;
    /// Operations read so far.
    fn ops_read(&self) -> u64;
    /// Bytes consumed so far.
    fn offset(&self) -> u64;
}

/// Where operations go: a trace writer, or an in-memory list.
pub trait OpSink {
    /// Appends `op`.
    fn write_op(&mut self, op: &Op) -> Result<(), TraceError>;
    /// Completes the trace (a larch trace gets its end-of-trace record) and flushes. Calling it
    /// again does nothing; writing after it fails with [`TraceError::Finished`].
    fn finish(&mut self) -> Result<(), TraceError>;
    /// Operations written so far.
    fn ops_written(&self) -> u64;
    /// Bytes written so far (including those buffered in the writer).
    fn bytes_written(&self) -> u64;
}

impl OpSink for Vec<Op> {
    fn write_op(&mut self, op: &Op) -> Result<(), TraceError> {
        self.push(op.clone());
        Ok(())
    }

    fn finish(&mut self) -> Result<(), TraceError> {
        Ok(())
    }

    fn ops_written(&self) -> u64 {
        self.len() as u64
    }

    fn bytes_written(&self) -> u64 {
        0
    }
}

impl<S: OpSink + ?Sized> OpSink for Box<S> {
    fn write_op(&mut self, op: &Op) -> Result<(), TraceError> {
        (**self).write_op(op)
    }

    fn finish(&mut self) -> Result<(), TraceError> {
        (**self).finish()
    }

    fn ops_written(&self) -> u64 {
        (**self).ops_written()
    }

    fn bytes_written(&self) -> u64 {
        (**self).bytes_written()
    }
}

impl<S: OpSink + ?Sized> OpSink for &mut S {
    fn write_op(&mut self, op: &Op) -> Result<(), TraceError> {
        (**self).write_op(op)
    }

    fn finish(&mut self) -> Result<(), TraceError> {
        (**self).finish()
    }

    fn ops_written(&self) -> u64 {
        (**self).ops_written()
    }

    fn bytes_written(&self) -> u64 {
        (**self).bytes_written()
    }
}

/// A boxed reader of either format.
pub type BoxedSource = Box<dyn OpSource + Send>;

/// A boxed writer of either format.
pub type BoxedSink = Box<dyn OpSink + Send>;

/// Opens a reader for the trace in `inner`, whichever its format (sniffed from the magic).
pub fn open_reader<R: Read + Send + 'static>(mut inner: R) -> Result<BoxedSource, TraceError> {
    let mut magic = [0u8; 8];
    let mut got = 0;
    while let Some(rest) = magic.get_mut(got..) {
        match inner.read(rest) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(source) => return Err(TraceError::Io { offset: got as u64, source }),
        }
        if got == magic.len() {
            break;
        }
    }
    let found = magic.get(..got).unwrap_or(&[]).to_vec();
    // A proper prefix of a magic is a truncated header of that format; no byte at all is neither.
    let prefix_of = |magic: &[u8]| !found.is_empty() && magic.starts_with(&found);
    let format = TraceFormat::sniff(&found)
        .or_else(|| prefix_of(&IRMIN_MAGIC).then_some(TraceFormat::Irmin))
        .or_else(|| prefix_of(&LARCH_MAGIC).then_some(TraceFormat::Larch));
    let inner = std::io::Cursor::new(found.clone()).chain(inner);
    match format {
        Some(TraceFormat::Irmin) => Ok(Box::new(IrminReader::new(inner)?)),
        Some(TraceFormat::Larch) => Ok(Box::new(LarchReader::new(inner)?)),
        None => Err(TraceError::BadMagic { found, expected: "IrmRepBT or LARCHTRC" }),
    }
}

/// A reader that attaches its file to every error.
struct FileSource {
    inner: BoxedSource,
    path: PathBuf,
}

impl Iterator for FileSource {
    type Item = Result<Op, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next().map(|item| item.map_err(|err| err.in_file(&self.path)))
    }
}

impl OpSource for FileSource {
    fn format(&self) -> TraceFormat {
        self.inner.format()
    }

    fn metadata(&self) -> &[(String, String)] {
        self.inner.metadata()
    }

    fn truncated_tail(&self) -> Option<u64> {
        self.inner.truncated_tail()
    }

    fn ops_read(&self) -> u64 {
        self.inner.ops_read()
    }

    fn offset(&self) -> u64 {
        self.inner.offset()
    }
}

/// Opens the trace file at `path`, whichever its format; its errors name the file.
pub fn open_trace(path: &Path) -> Result<BoxedSource, TraceError> {
    let file = File::open(path).map_err(|source| TraceError::Open { path: path.to_path_buf(), source })?;
    let inner = open_reader(file).map_err(|err| err.in_file(path))?;
    Ok(Box::new(FileSource { inner, path: path.to_path_buf() }))
}

/// A writer of `format` over `inner`; `metadata` goes into larch headers (Irmin traces have none).
pub fn writer_for<W: Write + Send + 'static>(
    format: TraceFormat,
    inner: W,
    metadata: &[(String, String)],
) -> Result<BoxedSink, TraceError> {
    Ok(match format {
        TraceFormat::Irmin => Box::new(IrminWriter::new(inner)?),
        TraceFormat::Larch => Box::new(LarchWriter::new(inner, metadata)?),
    })
}

/// Creates (or truncates) the trace file `path` and returns a buffered writer of `format`.
pub fn create_trace(
    path: &Path,
    format: TraceFormat,
    metadata: &[(String, String)],
) -> Result<BoxedSink, TraceError> {
    let file = File::create(path).map_err(|source| TraceError::Open { path: path.to_path_buf(), source })?;
    writer_for(format, BufWriter::with_capacity(1 << 20, file), metadata).map_err(|err| err.in_file(path))
}

/// What a conversion did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvertStats {
    /// Format of the input.
    pub input_format: TraceFormat,
    /// Format of the output.
    pub output_format: TraceFormat,
    /// Operations converted.
    pub ops: u64,
    /// Commits (blocks) among them.
    pub commits: u64,
    /// Bytes of input consumed.
    pub bytes_in: u64,
    /// Bytes of output written.
    pub bytes_out: u64,
    /// Where the input's incomplete last frame starts, if any (it is not converted).
    pub truncated_tail: Option<u64>,
}

impl fmt::Display for ConvertStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "converted {} ops ({} commits) from {} ({} bytes) to {} ({} bytes, ratio {:.3})",
            self.ops,
            self.commits,
            self.input_format,
            self.bytes_in,
            self.output_format,
            self.bytes_out,
            if self.bytes_in == 0 { 0.0 } else { self.bytes_out as f64 / self.bytes_in as f64 },
        )?;
        if let Some(offset) = self.truncated_tail {
            write!(f, "; input ended inside a frame at offset {offset} (ignored, as Irmin does)")?;
        }
        Ok(())
    }
}

/// Copies every operation of `input` to `output` and finishes it, mapping read and write errors
/// through the two functions.
fn pump(
    input: &mut dyn OpSource,
    output: &mut dyn OpSink,
    output_format: TraceFormat,
    read_err: &dyn Fn(TraceError) -> TraceError,
    write_err: &dyn Fn(TraceError) -> TraceError,
) -> Result<ConvertStats, TraceError> {
    let mut commits = 0;
    for op in &mut *input {
        let op = op.map_err(read_err)?;
        commits += u64::from(matches!(op, Op::Commit { .. }));
        output.write_op(&op).map_err(write_err)?;
    }
    output.finish().map_err(write_err)?;
    Ok(ConvertStats {
        input_format: input.format(),
        output_format,
        ops: output.ops_written(),
        commits,
        bytes_in: input.offset(),
        bytes_out: output.bytes_written(),
        truncated_tail: input.truncated_tail(),
    })
}

/// Converts the trace read by `input` into `format`, written to `output`; larch output carries the
/// input's metadata. An Irmin input's truncated tail is dropped (and reported).
pub fn convert<W: Write>(
    input: &mut dyn OpSource,
    format: TraceFormat,
    output: W,
) -> Result<ConvertStats, TraceError> {
    let same = |err| err;
    match format {
        TraceFormat::Irmin => pump(input, &mut IrminWriter::new(output)?, format, &same, &same),
        TraceFormat::Larch => {
            let metadata = input.metadata().to_vec();
            pump(input, &mut LarchWriter::new(output, &metadata)?, format, &same, &same)
        }
    }
}

/// Converts the trace file `input` (either format) into the file `output` in `format`.
pub fn convert_file(input: &Path, output: &Path, format: TraceFormat) -> Result<ConvertStats, TraceError> {
    let mut source = open_trace(input)?;
    let metadata = source.metadata().to_vec();
    let mut sink = create_trace(output, format, &metadata)?;
    pump(&mut *source, &mut *sink, format, &|err| err.in_file(input), &|err| err.in_file(output))
}
