#!/usr/bin/env bash
# Installs the system packages gamepilot needs (idempotent): X servers for tests and the demo, the window
# manager, tesseract with English data, clang for bindgen, cmake for llama.cpp, fonts, a real game corpus.
set -euo pipefail
PACKAGES=(
  xvfb xserver-xephyr openbox x11-utils x11-apps x11-xserver-utils xdotool xinput
  tesseract-ocr tesseract-ocr-eng libtesseract-dev libleptonica-dev
  clang libclang-dev cmake pkg-config build-essential
  fonts-dejavu-core sgt-puzzles ltris curl unzip python3-pip
  at-spi2-core dbus-daemon dbus
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "install-deps: all system packages present"
fi
if ! command -v cargo >/dev/null 2>&1; then
  [ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
fi
command -v cargo >/dev/null 2>&1 || { echo "install-deps: a Rust toolchain (cargo ≥ 1.80) is required; install rustup" >&2; exit 1; }
