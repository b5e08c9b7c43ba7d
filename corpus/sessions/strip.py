#!/usr/bin/env python3
"""Copy a session recording into the calibration corpus in compact form: events.jsonl only (no frames/,
no report.html), with each prompt's `messages` replaced by {"stripped": true, "bytes": N}. Every other line
(loop events, decisions, observations, actions, verdicts, replies, timings, notes) is kept verbatim, so
`gamepilot replay` and `gamepilot calibrate-stuck` read the copy exactly as the original.

usage: strip.py SESSION_DIR CORPUS_DIR/NAME
"""
import json
import os
import sys

src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst, exist_ok=True)
with open(os.path.join(src, "events.jsonl")) as f, open(os.path.join(dst, "events.jsonl"), "w") as out:
    for line in f:
        if '"kind":"prompt"' in line:
            o = json.loads(line)
            o["messages"] = {"stripped": True, "bytes": len(json.dumps(o["messages"]))}
            line = json.dumps(o, separators=(",", ":")) + "\n"
        out.write(line)
