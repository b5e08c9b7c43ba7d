#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what it needs, then format, lints and structural checks, one
# test build, the unit, Xvfb and real llama-server tests, small eval and demo gates, and the requirement trace.
# Prints the time of every step. The model host's build runs beside the Rust build; nothing is read from
# outside the repository and the caches it fills (~/.cache/gamepilot, target/).
# For the few-minute inner loop while developing, see scripts/check.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
export CARGO_TERM_COLOR=never
# A clean build gains nothing from incremental state; it only costs time and disk.
export CARGO_INCREMENTAL=0
target="${CARGO_TARGET_DIR:-target}"
logs="$target/test-logs"

suite_start=$SECONDS
step_times=()
current_step=""
setup_pid=""
kill_tree() {
    local child
    for child in $(pgrep -P "$1" 2>/dev/null); do kill_tree "$child"; done
    kill "$1" 2>/dev/null || true
}
print_times() {
    local status=$?
    # A step failed while the model host was still building: do not leave the build behind.
    [ -n "$setup_pid" ] && kill_tree "$setup_pid"
    [ -n "$current_step" ] && step_times+=("$(printf '%-26s %5d s  (failed)' "$current_step" $((SECONDS - step_start)))")
    echo "== step times"
    printf '  %s\n' "${step_times[@]}"
    printf '  %-26s %5d s\n' "total" $((SECONDS - suite_start))
    return $status
}
trap print_times EXIT
# step NAME COMMAND...: runs one step, named, and records how long it took.
step() {
    current_step=$1
    shift
    echo "== $current_step"
    step_start=$SECONDS
    "$@"
    step_times+=("$(printf '%-26s %5d s' "$current_step" $((SECONDS - step_start)))")
    current_step=""
}

step "system packages" scripts/install-deps.sh
mkdir -p "$logs"
step "OCR models" scripts/setup-ocr.sh

# llama.cpp's build (minutes of C++) and the model downloads run beside the Rust build, a little below it in
# priority so the Rust steps, which gate everything after them, keep the cores they ask for. (It stays in this
# shell's session: the scheduler weighs nice values only within one session's group.)
setup_start=$SECONDS
nice -n 5 scripts/setup-llama.sh >"$logs/setup-llama.log" 2>&1 &
setup_pid=$!
wait_for_model_host() {
    local pid=$setup_pid
    setup_pid=""
    if ! wait "$pid"; then
        tail -n 40 "$logs/setup-llama.log" >&2
        echo "setup-llama.sh failed (log: $logs/setup-llama.log)" >&2
        return 1
    fi
    grep '^\[setup-llama\]' "$logs/setup-llama.log" || true
    echo "model host setup took $((SECONDS - setup_start)) s in all (beside the Rust build)"
}

step "fmt" cargo fmt --all -- --check
step "clippy" cargo clippy --workspace --all-targets --quiet -- -D warnings
step "xtask lint" cargo xtask lint
if command -v cargo-nextest >/dev/null 2>&1; then
    # One build of every test target and binary (the binaries are what the end-to-end tests run).
    step "test build" cargo nextest run --workspace --no-run --cargo-quiet
    step "model host setup (wait)" wait_for_model_host
    # Scheduling (parallelism, retries, the real-model group, a hung test's limit): .config/nextest.toml.
    step "tests" cargo nextest run --workspace --no-fail-fast --cargo-quiet
    step "doc tests" cargo test --workspace --doc --quiet
else
    step "test build" cargo test --workspace --no-run --quiet
    step "model host setup (wait)" wait_for_model_host
    step "tests" cargo test --workspace --no-fail-fast -- --test-threads 2
fi

# Decisions with the default local model: a fixed tenth of the labelled decision points, gated under a
# floor set from measurement (docs/models.md); then the demo over a few game seeds (printed, not gated:
# `scripts/demo-seeds.sh 5` gives the figure docs/models.md reports).
bin="$target/debug/gamepilot"
# What a user builds (no dev-dependencies, so no test features): it holds neither the fault hooks nor the
# scripted model host, and the steps below run it.
step "shipping build" cargo build -p gamepilot --bin gamepilot --quiet
step "no test hooks shipped" bash -c '! grep -a -q -e GAMEPILOT_FAULT -e scripted-host-conn "$0"' "$bin"
step "eval gate" "$bin" eval --every 19 --min-accuracy "${GAMEPILOT_EVAL_FLOOR:-0.2}" --out "$target/eval-ci.json"
step "demo over seeds" env GAMEPILOT_BIN="$bin" scripts/demo-seeds.sh "${GAMEPILOT_DEMO_SEEDS:-2}"
# Goals in words alone (no sensor file, no goal check) on the practice game and real Debian games, each
# judged outside gamepilot; printed as k of N, not gated (the closing notes carry the figures).
step "goal in words alone" env GAMEPILOT_BIN="$bin" scripts/demo-seeds.sh 1 --agent-checks
# CI plays a subset of the real-game suite (a GTK menu bar's board chooser, an arcade game's key-driven
# menu, a move by an arrow key, and the practice game); `scripts/real-games.sh` alone plays all of it.
step "real games, goal in words" env GAMEPILOT_BIN="$bin" \
    GAMEPILOT_REAL_GAMES="${GAMEPILOT_REAL_GAMES:-arena,mines,fifteen,ltris,cube}" \
    GAMEPILOT_REAL_GAMES_BUDGET_S="${GAMEPILOT_REAL_GAMES_BUDGET_S:-60}" scripts/real-games.sh
step "trace" bash -c 'cargo xtask trace | tail -n 1'
