#!/usr/bin/env python3
"""A pixel check written outside gamepilot: the fraction of a window's pixels (or of a region of it)
whose colour lies in a range, read from `xwd` (x11-apps), not from gamepilot's capture or sensors.

Usage: pixel-fraction.py DISPLAY WINDOW COLOUR [X Y W H]
COLOUR: brown (a warm paper texture: red > green > blue, red 90..230, red - blue >= 40) or
        blue (deep saturated blue: blue >= 140, red and green <= 80).
Prints the fraction (0..1) with three decimals; exit 2 when the window cannot be read.
"""
import struct
import subprocess
import sys


def read_xwd(display, window):
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
    start = header_size + 12 * ncolors
    return raw[start:], width, height, bytes_per_line, byte_order


def matches(colour, r, g, b):
    if colour == "brown":
        return 90 <= r <= 230 and r > g > b and r - b >= 40
    if colour == "blue":
        return b >= 140 and r <= 80 and g <= 80
    raise ValueError(f"unknown colour {colour!r}")


def main():
    if len(sys.argv) not in (4, 8):
        print(__doc__, file=sys.stderr)
        return 2
    display, window, colour = sys.argv[1:4]
    try:
        data, width, height, stride, byte_order = read_xwd(display, window)
    except (subprocess.SubprocessError, ValueError, struct.error, OSError) as e:
        print(f"pixel-fraction: cannot read window {window}: {e}", file=sys.stderr)
        return 2
    x, y, w, h = (int(v) for v in sys.argv[4:8]) if len(sys.argv) == 8 else (0, 0, width, height)
    x0, y0 = max(0, x), max(0, y)
    x1, y1 = min(width, x + w), min(height, y + h)
    total = hit = 0
    for row in range(y0, y1, 2):
        line = data[row * stride : (row + 1) * stride]
        for col in range(x0, x1, 2):
            px = line[col * 4 : col * 4 + 4]
            if len(px) < 4:
                continue
            # LSBFirst (0): B G R X in memory; MSBFirst: X R G B.
            b, g, r = (px[0], px[1], px[2]) if byte_order == 0 else (px[3], px[2], px[1])
            total += 1
            hit += matches(colour, r, g, b)
    print(f"{hit / total if total else 0.0:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
