"""The trace graph of a run: its steps as nodes, parent ids as edges, laid out by Graphviz ``dot``.

A model step points to the tool steps it asked for; every tool step of a parallel batch points to
the next model step; ``memory_read`` points to the first model step. Steps outside the run that its
first steps follow (the retried run's memory, the previous answer) appear as context nodes, so a
retry shows where it branched. Superseded attempts stay, drawn dashed. The actions a tool step
performed (``extra["actions"]``: code run, files written, pages fetched) hang off that step.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any, Iterable

import pandas as pd

from ..core import NotFoundError, run_tree
from ..core.conversation import MEMORY_READ, is_memory_step
from ..storage.base import Repository
from ..storage.ids import resolve_run_id
from ..views import counted, graph_layout, graph_png

MIME_TYPE = "application/vnd.agio.trace+json"

KIND_STYLE = {"user": ("#ddf4ff", "#0969da"), MEMORY_READ: ("#fff8c5", "#9a6700"),
              "model": ("#fbefff", "#8250df"), "tool": ("#dafbe1", "#1a7f37"), "context": ("#f6f8fa", "#8c959f"),
              "action": ("#fff1e5", "#bc4c00")}


def step_kind(step: dict[str, Any]) -> str:
    if is_memory_step(step):
        return MEMORY_READ
    return {"assistant": "model", "user": "user", "tool": "tool"}.get(step["role"], step["role"])


def _label(step: dict[str, Any], kind: str, agent: str | None = None) -> str:
    head = f"#{step['sequence']}" + (f" (attempt {step.get('attempt', 1)})" if step.get("attempt", 1) > 1 else "")
    if kind == MEMORY_READ:
        items = ((step.get("extra") or {}).get("memory") or {}).get("items") or []
        return f"{head} memory: {len(items)} item(s)"
    if kind == "tool":
        return f"{head} tool {step.get('name') or ''} [{step.get('status', 'ok')}]"
    if kind == "model":
        calls = [c["function"]["name"] for c in step.get("tool_calls") or ()]
        text = (step.get("content") or "").strip().replace("\n", " ")
        body = f"calls {', '.join(calls)}" if calls else (text[:32] + ("…" if len(text) > 32 else ""))
        return f"{head} {agent or 'model'}: {body}"  # the agent that made it: after a handoff, another
    text = (step.get("content") or "").strip().replace("\n", " ")
    return f"{head} {kind}: {text[:32]}" + ("…" if len(text) > 32 else "")


@dataclass
class Trace:
    """``nodes`` (one row per step) and ``edges`` (parent -> child); displays as an SVG drawing."""

    run_id: str
    nodes: pd.DataFrame
    edges: pd.DataFrame
    agents: dict[str, str] = field(default_factory=dict)  # run id -> agent name, for nested runs' boxes

    def dot_source(self) -> str:
        lines = ["digraph trace {", '  rankdir=TB; node [shape=box, style="rounded,filled", fontname="Helvetica",'
                 ' fontsize=10]; edge [color="#8c959f"];']
        q = _dot_escape  # ids and labels come from the store: quoted and escaped, never DOT markup
        nested = {r: a for r, a in self.agents.items() if r != self.run_id}
        for row in self.nodes.itertuples():
            kind = row.kind if row.kind in KIND_STYLE else "context"
            fill, line = KIND_STYLE[kind]
            style = "rounded,filled,dashed" if row.superseded or kind == "context" else "rounded,filled"
            node = (f'"{q(row.id)}" [label="{q(row.label)}", fillcolor="{fill}", color="{line}", '
                    f'style="{style}", id="step-{q(row.id)}", class="agio-node agio-node-{kind}"];')
            if row.run_id in nested:  # a nested run's steps sit in a box named after its agent
                node = (f'subgraph "cluster_{q(row.run_id)}" {{ label="agent {q(nested[row.run_id])}"; '
                        f'style=dashed; color="#8250df"; {node} }}')
            lines.append(f"  {node}")
        for row in self.edges.itertuples():
            lines.append(f'  "{q(row.source)}" -> "{q(row.target)}";')
        lines.append("}")
        return "\n".join(lines)

    def svg(self) -> str:
        """The drawing, laid out by Graphviz (Debian package ``graphviz``)."""
        return render_svg(self.dot_source())

    def data(self) -> dict[str, Any]:
        """The bundle's JSON: nodes (id, kind, label, status, superseded), edges, and dot's layout."""
        nodes = [{"id": str(r.id), "kind": r.kind if r.kind in KIND_STYLE else "context", "label": str(r.label),
                  "status": str(r.status), "superseded": bool(r.superseded)} for r in self.nodes.itertuples()]
        edges = [[str(r.source), str(r.target)] for r in self.edges.itertuples()]
        return {"run_id": self.run_id, "nodes": nodes, "edges": edges, "layout": graph_layout(self.dot_source())}

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """The extension draws the graph from the data (untrusted notebooks show no SVG); PNG elsewhere."""
        text = (f"agio trace of run {self.run_id[:8]}: {counted(len(self.nodes), 'step')}, "
                f"{counted(len(self.edges), 'edge')}")
        try:
            return {MIME_TYPE: self.data(), "image/png": graph_png(self.dot_source()), "text/plain": text}
        except RuntimeError as exc:
            return {"text/plain": f"{text} ({exc})"}

    def __repr__(self) -> str:
        return (f"<agio trace of run {self.run_id[:8]}: {counted(len(self.nodes), 'step')}, "
                f"{counted(len(self.edges), 'edge')}>")


def _dot_escape(text: object) -> str:
    return str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def render_svg(dot: str, timeout: float = 30.0) -> str:
    exe = shutil.which("dot")
    if exe is None:
        raise RuntimeError("Graphviz is not installed (the `dot` program draws the trace; apt install graphviz)")
    done = subprocess.run([exe, "-Tsvg"], input=dot.encode(), capture_output=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"dot failed: {done.stderr.decode(errors='replace')[:200]}")
    svg = done.stdout.decode()
    return svg[svg.index("<svg"):]  # drop the XML prolog and doctype: the drawing embeds in HTML as is


def holders(steps: list[dict[str, Any]], agent: str | None) -> dict[str, str | None]:
    """Step id -> the agent that held the conversation when it was made. ``agent`` answered the run; a
    handoff (a tool step with ``extra["handoff"]``) moves the conversation from one agent to the next."""
    handed = [d["extra"]["handoff"] for d in steps if d["role"] == "tool" and (d.get("extra") or {}).get("handoff")
              and d.get("status", "ok") == "ok" and not d.get("superseded")]
    holder = handed[0]["from"] if handed else agent
    out: dict[str, str | None] = {}
    for d in steps:
        out[d["id"]] = holder
        if d["role"] == "tool" and d.get("status", "ok") == "ok" and (d.get("extra") or {}).get("handoff"):
            holder = d["extra"]["handoff"]["to"]
    return out


def build_trace(run_id: str, steps: Iterable[dict[str, Any]], context: dict[str, dict[str, Any]],
                agent: str | None = None) -> Trace:
    """Nodes and edges from step dicts of the run (all attempts), with its outside parents from ``context``;
    ``agent`` (the agent that answered the run) names its model steps."""
    own = sorted(steps, key=lambda d: (d["sequence"], d.get("attempt", 1)))
    made_by = holders(own, agent)
    ids = {d["id"] for d in own}
    outside = []
    for d in own:
        for p in d.get("parent_ids") or ():
            if p not in ids and p in context and all(o["id"] != p for o in outside):
                outside.append(context[p])
    rows = []
    for d, is_context in [*((o, True) for o in outside), *((d, False) for d in own)]:
        kind = step_kind(d)
        rows.append({"id": d["id"], "sequence": d["sequence"], "attempt": d.get("attempt", 1),
                     "kind": "context" if is_context else kind, "role": d["role"],
                     "label": _label(d, kind, made_by.get(d["id"])),
                     "status": d.get("status", "ok"), "superseded": bool(d.get("superseded")),
                     "run_id": d.get("run_id"), "parent_ids": list(d.get("parent_ids") or ())})
    known = {r["id"] for r in rows}
    edges = [(p, d["id"]) for d in own for p in d.get("parent_ids") or () if p in known]
    for d in own:  # actions link to the tool step that performed them
        for a in (d.get("extra") or {}).get("actions") or ():
            if not isinstance(a, dict) or not a.get("action_id"):
                continue
            rows.append({"id": a["action_id"], "sequence": d["sequence"], "attempt": d.get("attempt", 1),
                         "kind": "action", "role": "action",
                         "label": f"action {a.get('kind', '')}: {a.get('name', '')} [{a.get('status', '')}]",
                         "status": a.get("status", ""), "superseded": bool(d.get("superseded")),
                         "run_id": d.get("run_id"), "parent_ids": [d["id"]]})
            edges.append((d["id"], a["action_id"]))
    nodes = pd.DataFrame(rows, columns=["id", "sequence", "attempt", "kind", "role", "label", "status", "superseded",
                                        "run_id", "parent_ids"])
    nodes = nodes.astype({"sequence": "Int64", "attempt": "Int64", "superseded": "bool"})
    return Trace(run_id, nodes, pd.DataFrame(edges, columns=["source", "target"], dtype="string"))


def nest(trace: Trace, runs: list[dict[str, Any]], steps: Iterable[dict[str, Any]]) -> Trace:
    """Add the runs nested in ``trace``'s run (agents called as tools): their steps, an edge from the
    asking model step to each nested run's first step, and one from its answer to the outer tool step."""
    steps = list(steps)
    extra = [build_trace(r["id"], [d for d in steps if d.get("run_id") == r["id"]], {}, r.get("agent_name"))
             for r in runs]
    nodes = pd.concat([trace.nodes, *(t.nodes for t in extra)], ignore_index=True)
    links = []
    for r in runs:
        own = sorted((d for d in steps if d.get("run_id") == r["id"]), key=lambda d: d["sequence"])
        if not own:
            continue
        if r.get("parent_step_id"):
            links.append((r["parent_step_id"], own[0]["id"]))
        answer = next((d for d in reversed(own) if d["role"] == "assistant"), own[-1])
        for d in steps:
            if ((d.get("extra") or {}).get("nested_run") or {}).get("run_id") == r["id"] and d["role"] == "tool":
                links.append((answer["id"], d["id"]))
    edges = pd.concat([trace.edges, *(t.edges for t in extra),
                       pd.DataFrame(links, columns=["source", "target"], dtype="string")], ignore_index=True)
    return Trace(trace.run_id, nodes, edges, {r["id"]: r.get("agent_name") or "?" for r in runs})


def trace(run_id: str, *, nested: bool = True, repository: Repository | None = None) -> Trace:
    """The trace graph of a stored run (``.nodes``, ``.edges``; shows as a drawing in a notebook).

    ``nested`` (default) adds the runs of agents it called as tools, each in a box named after its agent.
    """
    if repository is None:
        from ..storage import open_repository

        repository = open_repository()
    run_id = resolve_run_id(repository, run_id)  # a unique prefix of 6+ characters works too
    run = repository.get_run(run_id)
    if run is None:
        raise NotFoundError(f"no run {run_id!r} in the store")
    all_steps = [s.to_dict() for s in repository.get_steps(run.session_id, include_superseded=True)]
    own = [d for d in all_steps if d.get("run_id") == run_id]
    graph = build_trace(run_id, own, {d["id"]: d for d in all_steps}, run.agent_name)
    runs = run_tree(repository.iter_run_dicts(), run_id)[1:] if nested else []
    if not runs:
        return graph
    inner = [s.to_dict() for sid in dict.fromkeys(r["session_id"] for r in runs)
             for s in repository.get_steps(sid, include_superseded=True)]
    return nest(graph, runs, [*own, *inner])


def trace_from_events(run_id: str, events: Iterable[dict[str, Any]]) -> Trace:
    """The same graph from a transcript's events (what a saved notebook keeps)."""
    steps: dict[str, dict[str, Any]] = {}
    runs: dict[str, dict[str, Any]] = {}
    for e in events:
        if e.get("type") == "nested":  # a nested run's event: its steps join the graph
            e = e["payload"]["event"]
        if str(e.get("type", "")).startswith("run_") and (e.get("payload") or {}).get("run"):
            runs[e["run_id"]] = e["payload"]["run"]
        if e.get("type") == "step_completed":
            step = e["payload"]["step"]
            steps[step["id"]] = step
    own = [d for d in steps.values() if d.get("run_id") == run_id]
    graph = build_trace(run_id, own, steps, runs.get(run_id, {}).get("agent_name"))
    nested = [r for r in runs.values() if r.get("id") and r["id"] != run_id]
    return nest(graph, nested, steps.values()) if nested else graph


