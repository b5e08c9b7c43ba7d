#!/usr/bin/env python3
"""A scripted stand-in for the model host, used to record calibration sessions of the no-progress
thresholds (FR-LOOP-005, docs/stuck-thresholds.md) in which progress really happens: it answers gamepilot's
OpenAI-compatible calls with a fixed policy instead of a language model. Everything else in such a session
is real (gamepilot run, the practice game under Xvfb, capture, OCR, sensors, executor, verification).

usage: scripted-host.py PORT POLICY [SEED]
  POLICY wander    click Play, then hold movement keys in a pseudo-random walk (collects coins)
         wall      click Play, then keep walking left (into the arena's wall: stasis while acting)
         dither    click Play, then alternate two short taps (a repeating cycle)
         sweep     click Play, then sweep the field below the spawn point row by row (collects coins)
"""
import json
import random
import re
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

PORT = int(sys.argv[1])
POLICY = sys.argv[2]
RNG = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
STATE = {"tactical": 0}

def plan(user, schema):
    """Start the game while the menu shows, then collect coins toward the goal's own check."""
    try:
        offered = schema["properties"]["subgoals"]["items"]["properties"]["postcondition"]["enum"]
    except (KeyError, TypeError):
        offered = ["in_play", "collected"]
    coins = [p for p in offered if p.startswith("coins >=")] or [p for p in offered if p != "in_play"]
    collect = {"description": "Walk around and collect coins", "postcondition": coins[-1]}
    obs = user.split("Current observation")[-1]
    if "PRACTICE ARENA" in obs or "nothing observed yet" in obs:
        start = {"description": "Click Play to start the game", "postcondition": "in_play"}
        return {"subgoals": [start, collect]}
    return {"subgoals": [collect]}


def tool_names(schema):
    return {alt["properties"]["action"].get("const") for alt in schema.get("anyOf", [])}


def allowed_marks(schema):
    for alt in schema.get("anyOf", []):
        if alt["properties"]["action"].get("const") == "click_mark":
            return set(alt["properties"]["mark"].get("enum", []))
    return set()


def tactical(user, schema):
    STATE["tactical"] += 1
    names = tool_names(schema)
    obs = user.split("Current observation")[-1]
    if "PRACTICE ARENA" in obs:
        # the menu: the Play button is the topmost rect (its label is not always read while hovered)
        # `[N] rect ["label"] at X,Y` (the box centre)
        rects = [(int(m.group(1)), int(m.group(3)), int(m.group(4)), m.group(2) or "")
                 for m in re.finditer(r'\[(\d+)\] rect(?: "([^"]*)")? at (\d+),(\d+)', obs)]
        if rects:
            labelled = [r for r in rects if "Play" in r[3]]
            mark, x, y, _ = labelled[0] if labelled else min(rects, key=lambda r: r[2])
            if mark in allowed_marks(schema):
                return {"action": "click_mark", "mark": mark}
            if "click" in names:
                return {"action": "click", "x": x, "y": y, "button": "left"}
    if POLICY == "wall":
        return {"action": "hold_key", "key": "a", "duration_ms": 2500}
    if POLICY == "sweep":
        # rows 1600 px wide, 70 px apart, below the spawn point: about one coin every 20 s
        k = STATE["sweep"] = STATE.get("sweep", -1) + 1
        if k == 0:
            return {"action": "hold_key", "key": "a", "duration_ms": 4000}
        if k % 2 == 1:
            return {"action": "hold_key", "key": "s", "duration_ms": 350}
        return {"action": "hold_key", "key": "d" if (k // 2) % 2 == 1 else "a", "duration_ms": 8000}
    if POLICY == "dither":
        return {"action": "key", "key": "q" if STATE["tactical"] % 2 else "e"}
    key = RNG.choice(["w", "a", "s", "d", "w", "d"])
    return {"action": "hold_key", "key": key, "duration_ms": RNG.choice([600, 900, 1200, 1800])}


class Host(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/health":
            self.reply(200, {"status": "ok"})
        elif self.path == "/props":
            self.reply(200, {"modalities": {"vision": False}, "default_generation_settings": {"n_ctx": 8192}})
        else:
            self.reply(404, {"error": "not found"})

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        req = json.loads(self.rfile.read(n) or b"{}")
        msgs = req.get("messages", [])
        system = msgs[0]["content"] if msgs else ""
        user = msgs[-1]["content"] if msgs else ""
        if isinstance(user, list):
            user = " ".join(p.get("text", "") for p in user if isinstance(p, dict))
        schema = (req.get("response_format") or {}).get("json_schema", {}).get("schema", {})
        if "deliberative planner" in system:
            time.sleep(2.0)  # a plan takes a model a while; an instant one would replan in a busy loop
            out = plan(user, schema)
        else:
            time.sleep(0.3)
            out = tactical(user, schema)
        self.reply(200, {
            "choices": [{"message": {"role": "assistant", "content": json.dumps(out)}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(user) // 4, "completion_tokens": 20},
        })


HTTPServer(("127.0.0.1", PORT), Host).serve_forever()
