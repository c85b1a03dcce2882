//! Progress bars with ETA for long runs, hidden when stderr is not a terminal.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

/// A progress bar over `total` blocks labelled `what` (a counter without ETA when the total is
/// unknown); invisible unless stderr is a terminal.
pub fn blocks_bar(what: &str, total: Option<u64>) -> ProgressBar {
    let bar = match total {
        Some(total) => ProgressBar::new(total),
        None => ProgressBar::no_length(),
    };
    if std::io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::stderr());
    } else {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    let template = if total.is_some() {
        "{prefix:>10} [{elapsed_precise}] {wide_bar} {pos}/{len} blocks ({per_sec}, ETA {eta})"
    } else {
        "{prefix:>10} [{elapsed_precise}] {pos} blocks ({per_sec})"
    };
    let style = ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_prefix(what.to_string());
    bar
}
