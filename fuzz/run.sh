#!/usr/bin/env bash
# Build and run a fuzz target without cargo-fuzz (same flags cargo-fuzz uses), for SECONDS seconds.
# Usage: fuzz/run.sh [SECONDS] [TARGET]   (TARGET: parse_check_eval (default) or ocr_prep;
# needs a nightly toolchain: rustup toolchain install nightly)
# Crashes are written to fuzz/artifacts/; add each as a string to FUZZ_REGRESSIONS in
# crates/logic/sensor/src/tests.rs so `cargo test` keeps checking it.
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-300}"
bin="${2:-parse_check_eval}"
target="$(rustc -vV | sed -n 's/^host: //p')"
export CARGO_TARGET_DIR="$PWD/target"
RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks" \
  cargo +nightly build --release --target "$target" --bin "$bin"
mkdir -p corpus corpus-ocr_prep artifacts
if [ "$bin" = ocr_prep ]; then
  "./target/$target/release/$bin" corpus-ocr_prep -max_len=4096 \
    -max_total_time="$secs" -artifact_prefix=artifacts/ -print_final_stats=1
  exit
fi
"./target/$target/release/$bin" corpus seeds -dict=sensors.dict -max_len=512 \
  -max_total_time="$secs" -artifact_prefix=artifacts/ -print_final_stats=1
