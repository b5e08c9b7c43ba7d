#!/usr/bin/env bash
# The main job: installs what it needs, builds gamepilot, and runs the demo (the practice game on a virtual
# display, played by the agent with a small local model started by gamepilot). Extra args go to `demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
scripts/install-deps.sh
scripts/setup-llama.sh
scripts/setup-ocr.sh
cargo build --release --workspace --bins --quiet
exec target/release/gamepilot demo "$@"
