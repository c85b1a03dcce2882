#!/usr/bin/env bash
# The test command of the README: every test of the workspace, in release mode (the property, crash
# and replay tests do real work; the larch binary's own tests replay generated traces end to end).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --release --locked
