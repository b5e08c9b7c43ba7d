#!/usr/bin/env bash
# Goals in words on real games: `gamepilot run --goal "…"` alone (no sensor file, no goal check: the agent
# declares what it watches) with the default local model, on Debian games with menus of different kinds
# (GTK menu bars choosing a board size, an SDL arcade game's key-driven menu), each on its own Xvfb +
# openbox. Each goal is judged outside gamepilot — by the game's own state file, its window's size, or
# its pixels read with xwd (scripts/pixel-fraction.py) — never by the agent's sensors. Prints one line per goal and "k of N".
# Needs a built workspace (debug by default; GAMEPILOT_BIN to choose) and scripts/setup-llama.sh's cache.
# GAMEPILOT_REAL_GAMES=name,name picks goals; GAMEPILOT_REAL_GAMES_BUDGET_S bounds each run (default 120).
set -uo pipefail
cd "$(dirname "$0")/.."
bin=${GAMEPILOT_BIN:-target/debug/gamepilot}
arena_bin=$(dirname "$bin")/practice-arena
budget=${GAMEPILOT_REAL_GAMES_BUDGET_S:-120}
only=${GAMEPILOT_REAL_GAMES:-}
out_dir=${GAMEPILOT_REAL_GAMES_OUT:-target/real-games}
mkdir -p "$out_dir"
display_num=71
ok=0
total=0

# width_of WINDOW_ID DISPLAY: the window's width in pixels.
width_of() { xwininfo -display "$2" -id "$1" 2>/dev/null | sed -n 's/^ *Width: //p'; }
height_of() { xwininfo -display "$2" -id "$1" 2>/dev/null | sed -n 's/^ *Height: //p'; }

# play NAME GOAL JUDGE COMMAND...: start the game on a fresh display, run the agent on its window, judge.
play() {
  local name=$1 goal=$2 judge=$3
  shift 3
  if [ -n "$only" ] && [[ ",$only," != *",$name,"* ]]; then return; fi
  display_num=$((display_num + 1))
  local d=":$display_num"
  Xvfb "$d" -screen 0 1280x800x24 -nolisten tcp >/dev/null 2>&1 &
  local xvfb=$!
  for _ in $(seq 50); do xdpyinfo -display "$d" >/dev/null 2>&1 && break; sleep 0.1; done
  DISPLAY=$d openbox >/dev/null 2>&1 &
  local wm=$!
  sleep 0.5
  DISPLAY=$d "$@" >"$out_dir/$name.game.log" 2>&1 &
  local game=$!
  local win=""
  for _ in $(seq 100); do
    win=$(DISPLAY=$d xdotool search --onlyvisible --pid "$game" 2>/dev/null | head -n 1)
    [ -n "$win" ] && break
    sleep 0.1
  done
  sleep 1
  local start=$SECONDS verdict=missed rc=0
  if [ -z "$win" ]; then
    verdict="no window"
  else
    before_w=$(width_of "$win" "$d"); before_h=$(height_of "$win" "$d")
    rm -rf "$out_dir/$name.rec"
    timeout --signal=INT $((budget + 60)) "$bin" run --display "$d" --window "$win" --goal "$goal" \
      --session-budget-s "$budget" --max-actions 30 --unattended \
      --record "$out_dir/$name.rec" >"$out_dir/$name.log" 2>&1
    rc=$?
    if "$judge" "$win" "$d"; then verdict=reached; ok=$((ok + 1)); fi
  fi
  total=$((total + 1))
  local stop
  stop=$(sed -n 's/^session stopped: //p' "$out_dir/$name.log" 2>/dev/null | head -n 1)
  printf '%-10s %-58s %-8s %4d s  (exit %d; stopped: %s)\n' "$name" "\"$goal\"" "$verdict" \
    $((SECONDS - start)) "$rc" "${stop:-?}"
  kill "$game" "$wm" 2>/dev/null
  sleep 0.3
  kill "$xvfb" 2>/dev/null
  wait "$game" "$wm" "$xvfb" 2>/dev/null
}

arena_state="$out_dir/arena.state"
arena_started() { tail -n 1 "$arena_state" 2>/dev/null | grep -q '"screen":"play"'; }
board_wider() { [ "$(width_of "$1" "$2")" -gt $((before_w + 100)) ]; }
board_changed() { [ "$(height_of "$1" "$2")" != "$before_h" ] || [ "$(width_of "$1" "$2")" != "$before_w" ]; }

# ltris (SDL, a key-driven arcade menu): in play once its menu's blue "LTris" title is gone (xwd pixels).
ltris_started() {
  local blue
  blue=$(python3 scripts/pixel-fraction.py "$2" "$1" blue 150 30 360 130) || return 1
  awk -v f="$blue" 'BEGIN { exit !(f < 0.02) }'
}

rm -f "$arena_state"
play arena "Start a game from the menu" arena_started \
  "$arena_bin" --seed 3 --state-file "$arena_state"
play mines "Switch to the 16x16 board with 40 mines using the Type menu" board_wider \
  env MINES_DEFAULT=9x9n10 /usr/games/sgt-mines
play net "Choose the 9x9 board from the Type menu" board_changed \
  env NET_DEFAULT=5x5 /usr/games/sgt-net
play fifteen "Choose the 3x3 puzzle from the Type menu" board_changed \
  /usr/games/sgt-fifteen
play ltris "Start a new game" ltris_started /usr/games/ltris
echo "real games: $ok of $total goals reached (goal in words alone, default model, ${budget} s each)"
