//! Writing results to stdout without panicking when the reader goes away (`larch … | head`).

use std::fmt::Display;
use std::io::Write;

/// Writes `value` to stdout and flushes; a closed pipe comes back as an `io::Error` of kind
/// `BrokenPipe`, which `main` treats as a normal end.
pub fn emit(value: impl Display) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    write!(out, "{value}")?;
    out.flush()
}

/// [`emit`] followed by a newline.
pub fn emit_line(value: impl Display) -> std::io::Result<()> {
    emit(format_args!("{value}\n"))
}
