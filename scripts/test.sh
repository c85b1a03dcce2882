#!/usr/bin/env bash
# The test command of the README: every test of the workspace, in release mode (the property, crash
# and replay tests do real work), then a short replay smoke run of the larch binary.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --release --locked
