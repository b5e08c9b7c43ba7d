#!/usr/bin/env bash
# The real-game goal suite: `gamepilot run --goal "…"` alone (no sensor file, no goal check: the agent
# declares what it watches) with the default local model, on Debian games with menus of different kinds
# (GTK menu bars and their board-size choosers, dialogs, an SDL arcade game's key-driven menu, games moved
# by clicks and by arrow keys), each on its own Xvfb + openbox. Each goal is judged outside gamepilot —
# by the game's window size, its pixels read with xwd, its status bar read with tesseract, or its dialogs
# as the X server lists them while the run goes (scripts/judge.py) — never by the agent's sensors.
# Prints one line per goal (verdict, seconds, actions, model calls) and "k of N" for the real games (the
# practice game's line is apart).
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
practice=""

# width_of WINDOW_ID DISPLAY: the window's width in pixels.
width_of() { xwininfo -display "$2" -id "$1" 2>/dev/null | sed -n 's/^ *Width: //p'; }
height_of() { xwininfo -display "$2" -id "$1" 2>/dev/null | sed -n 's/^ *Height: //p'; }

# popups_shown DISPLAY: how many override-redirect windows (menus, tooltips) are on screen.
popups_shown() {
  local n=0 c
  for c in $(xwininfo -display "$1" -root -children 2>/dev/null | awk '/^ +0x/ { print $1 }'); do
    xwininfo -display "$1" -id "$c" 2>/dev/null | grep -q 'Override Redirect State: yes' \
      && xwininfo -display "$1" -id "$c" 2>/dev/null | grep -q 'IsViewable' && n=$((n + 1))
  done
  echo "$n"
}

# watch_dialogs PID DISPLAY FILE: every half second, one line with how many visible windows named like a
# dialog (an "About" box, a "configuration" dialog) the game has, until killed.
watch_dialogs() {
  while sleep 0.5; do
    DISPLAY=$2 xdotool search --onlyvisible --pid "$1" --name 'About|configuration|Custom' 2>/dev/null | wc -l
  done >"$3"
}

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
    before_w=$(width_of "$win" "$d"); before_h=$(height_of "$win" "$d"); before_popups=$(popups_shown "$d")
    before_pixels="$out_dir/$name.before"
    dialogs="$out_dir/$name.dialogs"
    python3 scripts/judge.py snap "$d" "$win" "$before_pixels"
    watch_dialogs "$game" "$d" "$dialogs" &
    local watcher=$!
    rm -rf "$out_dir/$name.rec"
    timeout --signal=INT $((budget + 60)) "$bin" run --display "$d" --window "$win" --goal "$goal" \
      --session-budget-s "$budget" --max-actions 30 --unattended \
      --record "$out_dir/$name.rec" >"$out_dir/$name.log" 2>&1
    rc=$?
    sleep 0.6
    kill "$watcher" 2>/dev/null
    wait "$watcher" 2>/dev/null
    judged_pid=$game
    if "$judge" "$win" "$d" >"$out_dir/$name.judge" 2>&1; then verdict=reached; fi
  fi
  local took=$((SECONDS - start)) stop actions calls direct
  stop=$(sed -n 's/^session stopped: //p' "$out_dir/$name.log" 2>/dev/null | head -n 1)
  actions=$(sed -n 's/^ *[0-9.]* s, \([0-9]*\) actions executed.*/\1/p' "$out_dir/$name.log" 2>/dev/null | head -n 1)
  calls=$(sed -n 's/^ *tactical: \([0-9]*\) calls, \([0-9]*\) actions grounded.*/\1/p' "$out_dir/$name.log" 2>/dev/null | head -n 1)
  direct=$(sed -n 's/^ *tactical: [0-9]* calls, \([0-9]*\) actions grounded.*/\1/p' "$out_dir/$name.log" 2>/dev/null | head -n 1)
  passes=$(sed -n 's/^ *deliberative passes: \([0-9]*\).*/\1/p' "$out_dir/$name.log" 2>/dev/null | head -n 1)
  local line
  line=$(printf '%-13s %-66s %-8s %4d s %3s actions %3s calls (%s without) %2s plans  (exit %d; %s)' "$name" \
    "\"$goal\"" "$verdict" "$took" "${actions:-?}" "${calls:-?}" "${direct:-?}" "${passes:-?}" "$rc" "${stop:-?}")
  echo "$line"
  if [ "$name" = arena ]; then
    practice="$line"
  else
    total=$((total + 1))
    [ "$verdict" = reached ] && ok=$((ok + 1))
  fi
  kill "$game" "$wm" 2>/dev/null
  sleep 0.3
  kill "$xvfb" 2>/dev/null
  wait "$game" "$wm" "$xvfb" 2>/dev/null
}

# Judges: each is called with WINDOW DISPLAY once the run has stopped.
arena_state="$out_dir/arena.state"
arena_started() { tail -n 1 "$arena_state" 2>/dev/null | grep -q '"screen":"play"'; }
board_wider() { [ "$(width_of "$1" "$2")" -gt $((before_w + 100)) ]; }
board_changed() { [ "$(height_of "$1" "$2")" != "$before_h" ] || [ "$(width_of "$1" "$2")" != "$before_w" ]; }
# None of the game's menus or dialogs open (they would count as a changed board), the same size, and a
# new board of thin lines: at least a fiftieth of the window's pixels differ from before the run.
only_the_window() {
  [ "$(DISPLAY=$2 xdotool search --onlyvisible --pid "$judged_pid" 2>/dev/null | wc -l)" -le 1 ] \
    && [ "$(popups_shown "$2")" -le "$before_popups" ]
}
lines_redrawn() { only_the_window "$@" && python3 scripts/judge.py changed "$2" "$1" "$before_pixels" 0.02; }
# sgt-pegs' Octagon board: the Cross with a peg added at each of its four inner corners (measured: those
# four places change by 35-39 %, the whole window by 5 %, a peg moved on the Cross by 0 % there).
pegs_octagon() {
  only_the_window "$@" && python3 scripts/judge.py regions "$2" "$1" "$before_pixels" 0.15 \
    37 61 38 41 188 61 38 41 37 205 38 41 188 205 38 41
}
# A move made: the puzzle's status bar counts at least one ("Moves: 1").
moved() {
  local n
  n=$(python3 scripts/judge.py status "$2" "$1" Moves) || return 1
  [ "$n" -ge 1 ]
}
# A dialog was seen while the run went (more matching windows than before it: the search also counts
# the game's main window, so the count starts at 1), and the count is back to that at the end; the board
# is the size it was.
dialog_opened_and_closed() {
  local first
  first=$(head -n 1 "$dialogs")
  awk -v f="$first" '$1 > f { seen = 1 } END { exit !seen }' "$dialogs" \
    && [ "$(tail -n 1 "$dialogs")" = "$first" ] \
    && [ "$(width_of "$1" "$2")" = "$before_w" ] && [ "$(height_of "$1" "$2")" = "$before_h" ]
}
# ltris (SDL, a key-driven arcade menu): in play once its menu's blue "LTris" title is gone (xwd pixels).
ltris_started() {
  local blue
  blue=$(python3 scripts/judge.py fraction "$2" "$1" blue 150 30 360 130) || return 1
  awk -v f="$blue" 'BEGIN { exit !(f < 0.02) }'
}

rm -f "$arena_state"
play arena "Start a game from the menu" arena_started \
  "$arena_bin" --seed 3 --state-file "$arena_state"
# Choose a board size or level from a GTK menu bar's chooser.
play mines "Switch to the 16x16 board with 40 mines using the Type menu" board_wider \
  env MINES_DEFAULT=9x9n10 /usr/games/sgt-mines
play net "Choose the 9x9 board from the Type menu" board_changed \
  env NET_DEFAULT=5x5 /usr/games/sgt-net
play fifteen "Choose the 3x3 puzzle from the Type menu" board_changed \
  /usr/games/sgt-fifteen
play pegs "Choose the Octagon board from the Type menu" pegs_octagon \
  /usr/games/sgt-pegs
# Start a game: an arcade game's key-driven menu, a puzzle's Game menu.
play ltris "Start a new game" ltris_started /usr/games/ltris
play untangle "Start a new game from the Game menu" lines_redrawn \
  /usr/games/sgt-untangle
# Make a first move: by a click, by a click on the board's edge, by an arrow key.
play fifteen-move "Make a first move: slide a tile next to the empty space into it" moved \
  /usr/games/sgt-fifteen
play flip "Make a first move: click any square of the grid" moved /usr/games/sgt-flip
play sixteen "Make a first move: shift a row or a column with an arrow around the grid" moved \
  /usr/games/sgt-sixteen
play cube "Make a first move: roll the cube with an arrow key" moved /usr/games/sgt-cube
# Open a dialog and come back; answer a dialog.
play mines-about "Open the About box from the Help menu, then close it" dialog_opened_and_closed \
  env MINES_DEFAULT=9x9n10 /usr/games/sgt-mines
play net-custom "Open the Custom dialog from the Type menu, then cancel it" dialog_opened_and_closed \
  env NET_DEFAULT=5x5 /usr/games/sgt-net
[ -n "$practice" ] && echo "practice game: $practice"
echo "real games: $ok of $total goals reached (goal in words alone, default model, ${budget} s each)"
