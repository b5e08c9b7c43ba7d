#!/usr/bin/env python3
"""Write corpus/decisions.json: one decision point per labelled click target of
corpus/labels.json — each named button, menu-bar item and puzzle-grid cell — with the goal a tactical
call is given there and the box a right click lands in. Rerun after labels.json changes:
    python3 scripts/make-decisions.py
"""
import json
import os

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus")


def kind_of(frame, label):
    if frame.startswith("arena-shop"):
        return "dialog"
    if frame.startswith("arena-play"):
        return "play"
    if frame.startswith("arena"):
        return "menu"
    if label in ("Game", "Type", "Help"):
        return "menu_bar"
    return "puzzle"


def main():
    labels = json.load(open(os.path.join(ROOT, "labels.json")))["frames"]
    points = []
    for frame in sorted(labels):
        f = labels[frame]
        stem = frame.rsplit(".", 1)[0]
        for c in f.get("clickables", []):
            points.append({
                "id": f"{stem}/{c['label']}",
                "frame": frame,
                "kind": kind_of(frame, c["label"]),
                "goal": f"Click \"{c['label']}\".",
                "accept": c["bbox"],
            })
        for g in f.get("grids", []):
            ox, oy = g["origin"]
            px, py = g["pitch"]
            cw, ch = g["cell"]
            for row in range(g["rows"]):
                for col in range(g["cols"]):
                    points.append({
                        "id": f"{stem}/cell {col},{row}",
                        "frame": frame,
                        "kind": "puzzle",
                        "goal": f"Click the grid cell in row {row + 1}, column {col + 1} "
                                f"(counted from the top left) of the {g['rows']}x{g['cols']} grid.",
                        "accept": [ox + col * px, oy + row * py, cw, ch],
                    })
    with open(os.path.join(ROOT, "decisions.json"), "w") as out:
        json.dump({"version": 1, "points": points}, out, indent=1)
        out.write("\n")
    print(f"{len(points)} decision points")


if __name__ == "__main__":
    main()
