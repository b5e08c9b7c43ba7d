#!/usr/bin/env bash
# Runs `gamepilot demo` on game seeds 1..N (default 5) and prints how many reached the goal (`coins >= 1`)
# within the demo's 120 s, with nothing held afterwards (README.md's demo figure), and each seed's time, actions and actions/s, new
# screen -> first action p50 and reflex lateness p99 from the summary. Needs a built workspace
# and the model cache (scripts/setup-llama.sh). Arguments after N go to every `demo` (`--agent-checks`: the
# goal in words alone, the agent declaring its own checks).
set -uo pipefail
cd "$(dirname "$0")/.."
n=${1:-5}
shift || true
bin=${GAMEPILOT_BIN:-target/debug/gamepilot}
ok=0
for seed in $(seq 1 "$n"); do
  out=$("$bin" demo --game-seed "$seed" --quiet "$@" 2>&1)
  state=$(printf '%s\n' "$out" | grep "game's own state" | head -n 1)
  coins=$(printf '%s\n' "$state" | sed -n 's/.* coins \([0-9]*\).*/\1/p')
  held=$(printf '%s\n' "$state" | sed -n 's/.*held \(\[.*\]\).*/\1/p')
  stop=$(printf '%s\n' "$out" | sed -n 's/^session stopped: //p' | head -n 1)
  if [ "${coins:-0}" -ge 1 ] && [ "$held" = "[]" ]; then ok=$((ok + 1)); verdict=reached; else verdict=missed; fi
  secs=$(printf '%s\n' "$out" | sed -n 's/^ *\([0-9.]*\) s, [0-9]* actions executed.*/\1/p' | head -n 1)
  acts=$(printf '%s\n' "$out" | sed -n 's/^ *[0-9.]* s, \([0-9]*\) actions executed (\([0-9.]*\) actions\/s).*/\1 actions, \2 actions\/s/p' | head -n 1)
  first=$(printf '%s\n' "$out" | sed -n 's/.*new screen -> first action: .* p50 \([0-9]*\) ms.*/\1/p' | head -n 1)
  late=$(printf '%s\n' "$out" | sed -n 's/.*reflex: .* lateness p50 [0-9]* us p99 \([0-9]*\) us.*/\1/p' | head -n 1)
  echo "seed $seed: $verdict (stopped: ${stop:-?}; coins ${coins:-?}; held ${held:-?}; ${secs:-?} s; ${acts:-? actions}; first action p50 ${first:-?} ms; reflex lateness p99 ${late:-?} us)"
done
echo "demo: $ok of $n seeds reached the goal"
