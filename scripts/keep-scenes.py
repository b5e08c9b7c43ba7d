#!/usr/bin/env python3
"""Keeps a recorded run's screens for `gamepilot bench model --scenes`: from each recording folder (or
events.jsonl) given, its `session_start` line and its `session_input` lines, gzipped, as
corpus/scenes/NAME.jsonl.gz (NAME: the folder's name less `.rec`). The session's effects, the frames and
the report stay behind: the scene benchmark replays the inputs through today's session, which composes
its own prompts. Usage: scripts/keep-scenes.py target/real-games/net.rec [...]"""
import gzip
import json
import os
import sys

KEPT = {"session_start", "session_input"}


def main(paths):
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus", "scenes")
    os.makedirs(root, exist_ok=True)
    for path in paths:
        events = os.path.join(path, "events.jsonl") if os.path.isdir(path) else path
        name = os.path.basename(os.path.normpath(path if os.path.isdir(path) else os.path.dirname(path)))
        name = name[: -len(".rec")] if name.endswith(".rec") else name
        kept = []
        with open(events, encoding="utf-8") as f:
            for line in f:
                if line.strip() and json.loads(line).get("kind") in KEPT:
                    kept.append(line if line.endswith("\n") else line + "\n")
        if not kept or json.loads(kept[0]).get("kind") != "session_start":
            sys.exit(f"{events}: no session_start line first; not a session recording")
        out = os.path.join(root, f"{name}.jsonl.gz")
        # mtime 0: the same inputs give the same bytes.
        with open(out, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
            gz.write("".join(kept).encode("utf-8"))
        print(f"{out}: {len(kept) - 1} inputs, {os.path.getsize(out)} bytes")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
