//! Progress bars with ETA for long runs, hidden when stderr is not a terminal.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

/// A progress bar over `total` blocks labelled `what` (a counter without ETA when the total is
/// unknown); invisible unless stderr is a terminal.
pub fn blocks_bar(what: &str, total: Option<u64>) -> ProgressBar {
    labelled(
        what,
        total,
        "{prefix:>10} [{elapsed_precise}] {wide_bar} {pos}/{len} blocks ({per_sec}, ETA {eta})",
        "{prefix:>10} [{elapsed_precise}] {pos} blocks ({per_sec})",
    )
}

/// A progress bar over `total` bytes labelled `what` (a length the work may change as it learns
/// it, with [`ProgressBar::set_length`]); invisible unless stderr is a terminal.
pub fn bytes_bar(what: &str, total: u64) -> ProgressBar {
    let template =
        "{prefix:>10} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec}, ETA {eta})";
    labelled(what, Some(total), template, template)
}

/// A progress bar of bytes (over `total` bytes when known) labelled `what`, with a message for
/// the work's own count ([`ProgressBar::set_message`]); invisible unless stderr is a terminal.
pub fn bytes_with_message(what: &str, total: Option<u64>) -> ProgressBar {
    labelled(
        what,
        total,
        "{prefix:>10} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec}) {msg}",
        "{prefix:>10} [{elapsed_precise}] {bytes} ({bytes_per_sec}) {msg}",
    )
}

/// A bar labelled `what` over `total` (drawn with `with_total`), or a counter (drawn with
/// `without_total`) when the total is unknown; invisible unless stderr is a terminal.
fn labelled(what: &str, total: Option<u64>, with_total: &str, without_total: &str) -> ProgressBar {
    let bar = on_terminal(match total {
        Some(total) => ProgressBar::new(total),
        None => ProgressBar::no_length(),
    });
    let template = if total.is_some() { with_total } else { without_total };
    bar.set_style(ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()));
    bar.set_prefix(what.to_string());
    bar
}

/// `bar`, drawn on stderr if it is a terminal and hidden otherwise.
pub(crate) fn on_terminal(bar: ProgressBar) -> ProgressBar {
    if std::io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::stderr());
    } else {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar
}
