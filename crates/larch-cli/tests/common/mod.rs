//! Helpers shared by the CLI's integration tests: run the `larch` binary, read its output.
#![allow(dead_code, clippy::unwrap_used)] // each test binary uses a part of them

use std::path::Path;
use std::process::{Command, Output};

/// Runs the `larch` binary built for these tests with `args`.
pub fn larch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_larch")).args(args).output().unwrap()
}

/// Output bytes as text (lossy).
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A path as `&str` (test paths are UTF-8).
pub fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}
