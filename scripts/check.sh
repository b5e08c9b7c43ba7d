#!/usr/bin/env bash
# The inner loop while developing (a few minutes once target/ is warm): format, lints, structural checks and
# every crate's unit and logic tests. Not the end-to-end Xvfb and real-model tests, the eval or the demo:
# scripts/test.sh runs the whole suite, as CI does, before anything lands.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
export CARGO_TERM_COLOR=never
start=$SECONDS
# Some unit tests read real frames through the pinned OCR models (seconds, idempotent).
scripts/setup-ocr.sh >/dev/null
echo "== fmt";        cargo fmt --all -- --check
echo "== clippy";     cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "== xtask lint"; cargo xtask lint
echo "== unit and logic tests"
if command -v cargo-nextest >/dev/null 2>&1; then
    cargo nextest run --workspace --lib --bins --no-fail-fast --cargo-quiet
else
    cargo test --workspace --lib --bins --no-fail-fast --quiet
fi
echo "== check.sh passed in $((SECONDS - start)) s"
