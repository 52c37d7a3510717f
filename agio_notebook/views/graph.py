"""Graphviz layouts as data: node boxes and edge curves the extension draws, and a PNG for viewers.

``dot -Tjson`` places the nodes and routes the edges; the positions (points, y downwards) go into a
view's MIME bundle, so JupyterLab's extension draws the picture itself (untrusted notebooks show no
SVG output). ``dot -Tpng`` is the picture for every other viewer.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from typing import Any, TypedDict


class GraphLayout(TypedDict):
    width: float
    height: float
    nodes: dict[str, dict[str, float]]  # node name -> x, y (centre), w, h
    edges: list[dict[str, Any]]  # tail, head, points (cubic Bézier: start then 3 per segment), arrow (tip)
    clusters: list[dict[str, Any]]  # boxes around groups of nodes: label, x, y (top left), w, h


def _dot(dot_source: str, fmt: str, timeout: float) -> bytes:
    exe = shutil.which("dot")
    if exe is None:
        raise RuntimeError("Graphviz is not installed (the `dot` program lays out graphs; apt install graphviz)")
    done = subprocess.run([exe, f"-T{fmt}"], input=dot_source.encode(), capture_output=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"dot failed: {done.stderr.decode(errors='replace')[:200]}")
    return done.stdout


def _point(text: str, height: float) -> list[float]:
    x, y = text.split(",")[:2]
    return [round(float(x), 1), round(height - float(y), 1)]


def graph_layout(dot_source: str, timeout: float = 30.0) -> GraphLayout:
    """Where ``dot`` puts each node and edge of ``dot_source`` (points, origin top left)."""
    laid = json.loads(_dot(dot_source, "json", timeout))
    _, _, width, height = (float(v) for v in laid["bb"].split(","))
    objects = laid.get("objects") or []
    nodes, clusters = {}, []
    for obj in objects:
        if str(obj.get("name", "")).startswith("cluster") and "bb" in obj:
            x0, y0, x1, y1 = (float(v) for v in obj["bb"].split(","))
            clusters.append({"label": obj.get("label", ""), "x": round(x0, 1), "y": round(height - y1, 1),
                             "w": round(x1 - x0, 1), "h": round(y1 - y0, 1)})
        elif "pos" in obj:
            x, y = _point(obj["pos"], height)
            nodes[obj["name"]] = {"x": x, "y": y, "w": round(float(obj["width"]) * 72, 1),
                                  "h": round(float(obj["height"]) * 72, 1)}
    edges = []
    for edge in laid.get("edges") or []:
        parts = edge.get("pos", "").split()
        arrow = [_point(p[2:], height) for p in parts if p.startswith("e,")]
        points = [_point(p, height) for p in parts if not p.startswith(("e,", "s,"))]
        edges.append({"tail": objects[edge["tail"]]["name"], "head": objects[edge["head"]]["name"],
                      "points": points, "arrow": arrow[0] if arrow else None})
    return {"width": round(width, 1), "height": round(height, 1), "nodes": nodes, "edges": edges,
            "clusters": clusters}


def graph_png(dot_source: str, timeout: float = 30.0) -> str:
    """The drawing as base64 PNG (what a notebook's ``image/png`` output holds)."""
    return base64.b64encode(_dot(dot_source, "png", timeout)).decode("ascii")
