#!/usr/bin/env python3
"""Judges a real game's state from outside gamepilot: the game window's pixels read with `xwd`
(x11-apps) and its status bar read with the `tesseract` command — never gamepilot's capture, OCR or
sensors. scripts/real-games.sh uses it to say whether a goal was reached.

Usage:
  judge.py fraction DISPLAY WINDOW COLOUR [X Y W H]
      the fraction (0..1) of the window's pixels (or a region's) whose colour is COLOUR: brown (a warm
      paper texture) or blue (deep saturated blue); prints it with three decimals.
  judge.py snap DISPLAY WINDOW FILE
      saves the window's pixels (and size) to FILE, for `changed` to compare with later.
  judge.py changed DISPLAY WINDOW FILE MIN_FRACTION
      exit 0 when the window has the size it had at `snap` and at least MIN_FRACTION of its pixels
      differ from then; prints the fraction.
  judge.py regions DISPLAY WINDOW FILE MIN_FRACTION X Y W H [X Y W H ...]
      exit 0 when the window has the size it had at `snap` and, in every region given, at least
      MIN_FRACTION of the pixels differ from then (a board whose changes are known places: sgt-pegs'
      Octagon adds four corner pegs to the Cross); prints each region's fraction.
  judge.py status DISPLAY WINDOW WORD
      reads the window's bottom strip (a puzzle's status bar: "Moves: 3") with tesseract and prints the
      number after WORD; exit 1 when there is none.
Exit 2 when the window cannot be read.
"""
import pickle
import re
import struct
import subprocess
import sys
import tempfile


def read_xwd(display, window):
    """The window's pixels as (rows of (r, g, b) bytes..., width, height)."""
    raw = subprocess.run(
        ["xwd", "-silent", "-display", display, "-id", window],
        check=True,
        capture_output=True,
        timeout=20,
    ).stdout
    fields = struct.unpack(">25I", raw[:100])
    header_size, _version, _fmt, depth, width, height = fields[:6]
    byte_order, bits_per_pixel, bytes_per_line = fields[7], fields[11], fields[12]
    ncolors = fields[19]
    if depth < 24 or bits_per_pixel != 32:
        raise ValueError(f"depth {depth}, {bits_per_pixel} bits a pixel: only 24/32 is read")
    data = raw[header_size + 12 * ncolors :]
    rows = []
    for row in range(height):
        line = data[row * bytes_per_line : row * bytes_per_line + width * 4]
        # LSBFirst (0): B G R X in memory; MSBFirst: X R G B.
        if byte_order == 0:
            rgb = bytes(b for i in range(0, len(line), 4) for b in (line[i + 2], line[i + 1], line[i]))
        else:
            rgb = bytes(b for i in range(0, len(line), 4) for b in (line[i + 1], line[i + 2], line[i + 3]))
        rows.append(rgb)
    return rows, width, height


def matches(colour, r, g, b):
    if colour == "brown":
        return 90 <= r <= 230 and r > g > b and r - b >= 40
    if colour == "blue":
        return b >= 140 and r <= 80 and g <= 80
    raise ValueError(f"unknown colour {colour!r}")


def fraction(display, window, colour, region=None):
    rows, width, height = read_xwd(display, window)
    x, y, w, h = region if region else (0, 0, width, height)
    total = hit = 0
    for row in range(max(0, y), min(height, y + h), 2):
        line = rows[row]
        for col in range(max(0, x), min(width, x + w), 2):
            r, g, b = line[col * 3 : col * 3 + 3]
            total += 1
            hit += matches(colour, r, g, b)
    print(f"{hit / total if total else 0.0:.3f}")
    return 0


def snap(display, window, path):
    rows, width, height = read_xwd(display, window)
    with open(path, "wb") as f:
        pickle.dump((width, height, rows), f)
    return 0


def snapped_and_now(display, window, path):
    """The window's pixels at `snap` and now, with its width and height; `None` (said) when its size
    changed since."""
    with open(path, "rb") as f:
        width, height, before = pickle.load(f)
    rows, w, h = read_xwd(display, window)
    if (w, h) != (width, height):
        print(f"size {width}x{height} -> {w}x{h}")
        return None
    return before, rows, w, h


def changed(display, window, path, min_fraction):
    both = snapped_and_now(display, window, path)
    if both is None:
        return 1
    before, rows, _, _ = both
    differ = total = 0
    for a, b in zip(before, rows):
        for i in range(0, len(a), 6):
            total += 1
            differ += a[i : i + 3] != b[i : i + 3]
    f = differ / total if total else 0.0
    print(f"{f:.3f}")
    return 0 if f >= min_fraction else 1


def regions_changed(display, window, path, min_fraction, boxes):
    both = snapped_and_now(display, window, path)
    if both is None:
        return 1
    before, rows, w, h = both
    fractions = []
    for x, y, bw, bh in boxes:
        differ = total = 0
        for row in range(y, min(y + bh, h)):
            a, b = before[row], rows[row]
            for col in range(x, min(x + bw, w)):
                total += 1
                differ += a[3 * col : 3 * col + 3] != b[3 * col : 3 * col + 3]
        fractions.append(differ / total if total else 0.0)
    print(" ".join(f"{f:.3f}" for f in fractions))
    return 0 if all(f >= min_fraction for f in fractions) else 1


def status(display, window, word):
    rows, width, height = read_xwd(display, window)
    strip = rows[max(0, height - 28) :]
    scale = 3
    with tempfile.NamedTemporaryFile(suffix=".ppm") as img:
        img.write(f"P6 {width * scale} {len(strip) * scale} 255\n".encode())
        for line in strip:
            wide = bytes(b for i in range(0, len(line), 3) for _ in range(scale) for b in line[i : i + 3])
            img.write(wide * scale)
        img.flush()
        text = subprocess.run(
            ["tesseract", img.name, "stdout", "--psm", "7"],
            check=True,
            capture_output=True,
            timeout=30,
            text=True,
        ).stdout
    m = re.search(re.escape(word) + r"\s*[:;]?\s*(\d+)", text, re.IGNORECASE)
    if not m:
        print(f"no '{word}' number in {text.strip()!r}")
        return 1
    print(m.group(1))
    return 0


def main():
    args = sys.argv[1:]
    try:
        if len(args) in (4, 8) and args[0] == "fraction":
            region = tuple(int(v) for v in args[4:8]) if len(args) == 8 else None
            return fraction(args[1], args[2], args[3], region)
        if len(args) == 4 and args[0] == "snap":
            return snap(*args[1:4])
        if len(args) == 5 and args[0] == "changed":
            return changed(args[1], args[2], args[3], float(args[4]))
        if len(args) >= 9 and (len(args) - 5) % 4 == 0 and args[0] == "regions":
            values = [int(v) for v in args[5:]]
            boxes = [tuple(values[i : i + 4]) for i in range(0, len(values), 4)]
            return regions_changed(args[1], args[2], args[3], float(args[4]), boxes)
        if len(args) == 4 and args[0] == "status":
            return status(*args[1:4])
    except (subprocess.SubprocessError, ValueError, struct.error, OSError) as e:
        print(f"judge: cannot read window: {e}", file=sys.stderr)
        return 2
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
