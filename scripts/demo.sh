#!/usr/bin/env bash
# The main job: installs what it needs, builds gamepilot, and runs the demo (the practice game on a virtual
# display, played by the agent with a small local model started by gamepilot). Extra args go to `demo`.
# On a first run llama.cpp's build and the model downloads run beside gamepilot's own build.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
scripts/install-deps.sh
scripts/setup-ocr.sh
target="${CARGO_TARGET_DIR:-target}"
mkdir -p "$target"
log="$target/setup-llama.log"
echo "demo: setting up llama-server and the models beside the build (log: $log)"
# A little below the Rust build in priority, in this shell's session (the scheduler weighs nice values only
# within one session's group); stopped if the build fails.
nice -n 5 scripts/setup-llama.sh >"$log" 2>&1 &
setup=$!
trap 'kill "$setup" 2>/dev/null || true' EXIT
# The debug profile, as CI's demo gate runs it: minutes less to build than release on 2 cores, and the
# demo reaches its goal with it (docs/testing.md).
cargo build --workspace --bins --quiet
if ! wait "$setup"; then
    tail -n 40 "$log" >&2
    echo "demo: scripts/setup-llama.sh failed (log: $log)" >&2
    exit 1
fi
trap - EXIT
grep '^\[setup-llama\]' "$log" | tail -n 3
exec "$target/debug/gamepilot" demo "$@"
