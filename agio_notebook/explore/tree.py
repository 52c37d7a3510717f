"""tree(): a session's runs, retry attempts and forks as one tree, with timelines, bars and transcripts.

A retry hangs under the run it retried; a fork (a session copied at a step) hangs under the run that
wrote that step, and carries its own runs and forks. Superseded attempts stay in the tree; the
current one is marked. Each run node has its timeline (model, tool and approval phases, in order,
sized by duration), token and latency bars scaled across the tree, and its transcript, shown when
the node is clicked (``<details>``, so it works in any HTML viewer and in the extension alike).
"""

from __future__ import annotations

from html import escape
from typing import Any

from ..core import AgentRun, Step, StepRole
from ..execution.attempts import is_current
from ..models.pricing import format_cost
from ..views import text_html
from ..storage.base import Repository
from ..storage.ids import resolve_session_id

MIME_TYPE = "application/vnd.agio.tree+json"
VERSION = 1
_TRANSCRIPT_CHARS = 2000
PHASE_COLORS = {"model": "#8250df", "tool": "#0969da", "approval": "#bf8700", "error": "#cf222e"}
STATUS_COLORS = {"completed": "#1a7f37", "running": "#0969da", "failed": "#cf222e", "cancelled": "#9a6700",
                 "max_steps": "#9a6700", "budget_exceeded": "#9a6700"}


def _clip(text: str | None, limit: int = _TRANSCRIPT_CHARS) -> str:
    text = text or ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _timeline(steps: list[Step]) -> list[dict[str, Any]]:
    phases = []
    for s in steps:
        if s.role is StepRole.ASSISTANT:
            phases.append({"kind": "model", "sequence": s.sequence, "ms": s.metrics.model_ms or 0.0,
                           "label": f"model #{s.sequence}"})
        elif s.role is StepRole.TOOL:
            if "approval" in s.extra:
                phases.append({"kind": "approval", "sequence": s.sequence, "ms": 0.0,
                               "label": f"approval {s.name}: {'yes' if s.extra['approval'].get('approved') else 'no'}"})
            phases.append({"kind": "tool" if s.status == "ok" else "error", "sequence": s.sequence,
                           "ms": s.metrics.duration_ms or 0.0, "label": f"{s.name} #{s.sequence}"})
    return phases


def _transcript(steps: list[Step]) -> list[dict[str, Any]]:
    out = []
    for s in steps:
        entry: dict[str, Any] = {"sequence": s.sequence, "role": s.role.value, "text": _clip(s.content)}
        if s.tool_calls:
            entry["calls"] = [f"{c.name}({_clip(c.arguments, 200)})" for c in s.tool_calls]
        if s.role is StepRole.TOOL:
            entry["name"], entry["status"] = s.name, s.status
        out.append(entry)
    return out


def _run_node(run: AgentRun, steps: list[Step]) -> dict[str, Any]:
    m = run.metrics
    return {"kind": "run", "id": run.id, "session_id": run.session_id, "run_kind": run.kind,
            "status": run.status.value, "attempt": run.attempt, "current": is_current(run),
            "query": _clip(run.query, 200), "model": run.model_name, "final_text": _clip(run.final_text, 300),
            "start_sequence": run.start_sequence, "end_sequence": run.end_sequence,
            "tokens": m.total_tokens, "latency_ms": m.duration_ms, "cost": m.cost,
            "timeline": _timeline(steps), "transcript": _transcript(steps), "children": []}


def _nested_nodes(repo: Repository, run_id: str, nested_of: dict[str, list[AgentRun]]) -> list[dict[str, Any]]:
    """The runs of agents that run ``run_id`` called as tools, each with its own nested runs."""
    nodes = []
    for child in sorted(nested_of.get(run_id, ()), key=lambda r: r.started_at):
        steps = [s for s in repo.get_steps(child.session_id, include_superseded=True) if s.run_id == child.id]
        node = _run_node(child, steps)
        node.update(nested=True, agent=child.agent_name, depth=child.depth)
        node["children"] = _nested_nodes(repo, child.id, nested_of)
        nodes.append(node)
    return nodes


def _session_node(repo: Repository, session_id: str, forks_of: dict[str, list[Any]], depth: int,
                  nested_of: dict[str, list[AgentRun]] | None = None) -> dict[str, Any]:
    nested_of = nested_of or {}
    session = repo.get_session(session_id)
    runs = sorted(repo.list_runs(session_id), key=lambda r: r.started_at)
    steps = repo.get_steps(session_id, include_superseded=True)
    by_run: dict[str, list[Step]] = {}
    for s in steps:
        if s.run_id:
            by_run.setdefault(s.run_id, []).append(s)
    nodes = {r.id: _run_node(r, by_run.get(r.id, [])) for r in runs}
    for run_id, node in nodes.items():  # agents called as tools hang under the run that called them
        node["children"].extend(_nested_nodes(repo, run_id, nested_of))
    roots: list[dict[str, Any]] = []
    for r in runs:
        parent = nodes.get(r.retry_of) if r.retry_of else None
        (parent["children"] if parent is not None else roots).append(nodes[r.id])
    node = {"kind": "session", "id": session_id, "forked_from": session.forked_from if session else None,
            "forked_at": session.forked_at if session else None, "title": session.title if session else None,
            "children": roots}
    if depth > 50:  # a fork chain this deep is not drawn further
        return node
    for fork in sorted(forks_of.get(session_id, []), key=lambda s: s.created_at):
        child = _session_node(repo, fork.session_id, forks_of, depth + 1, nested_of)
        # under the run (current attempt first) that wrote the step the fork was taken at
        owner = next((n for n in sorted(nodes.values(), key=lambda n: not n["current"])
                      if n["start_sequence"] is not None and n["start_sequence"] <= (fork.forked_at or 0)
                      <= (n["end_sequence"] or 0)), None)
        (owner["children"] if owner is not None else roots).append(child)
    return node


def _walk(node: dict[str, Any]) -> Any:
    yield node
    for child in node["children"]:
        yield from _walk(child)


class RunTree:
    """The tree of one session; displays as HTML (or the extension's view), ``.nodes`` for data."""

    def __init__(self, data: dict[str, Any]):
        self.data = data

    @property
    def nodes(self) -> list[dict[str, Any]]:
        return list(_walk(self.data["root"]))

    @property
    def runs(self) -> list[dict[str, Any]]:
        return [n for n in self.nodes if n["kind"] == "run"]

    def to_dict(self) -> dict[str, Any]:
        return self.data

    def _repr_html_(self) -> str:
        return to_html(self.data)

    def __repr__(self) -> str:
        return to_text(self.data)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {MIME_TYPE: self.data, "text/html": to_html(self.data), "text/plain": to_text(self.data)}


def tree(session_id: str, *, repository: Repository | None = None) -> RunTree:
    """The session's runs, retries and forks (a fork of a fork too) as a tree."""
    if repository is None:
        from ..storage import open_repository

        repository = open_repository()
    session_id = resolve_session_id(repository, session_id)  # a unique prefix of 6+ characters works too
    forks_of: dict[str, list[Any]] = {}
    for s in repository.list_sessions():
        if s.forked_from:
            forks_of.setdefault(s.forked_from, []).append(s)
    nested_of: dict[str, list[AgentRun]] = {}
    for d in repository.iter_run_dicts():
        if d.get("parent_run_id"):
            nested_of.setdefault(d["parent_run_id"], []).append(AgentRun.from_dict(d))
    root = _session_node(repository, session_id, forks_of, 0, nested_of)
    runs = [n for n in _walk(root) if n["kind"] == "run"]
    scale = {"tokens": max([n["tokens"] or 0 for n in runs] + [1]),
             "latency_ms": max([n["latency_ms"] or 0 for n in runs] + [1.0])}
    return RunTree({"version": VERSION, "session_id": session_id, "scale": scale, "root": root})


# -- renderings ------------------------------------------------------------------------------
_BOX = "font-family:var(--jp-ui-font-family,system-ui,sans-serif);font-size:13px;line-height:1.45"


def _bar(value: float | None, top: float, color: str, title: str) -> str:
    width = 0 if not value else max(2.0, 80 * value / top)
    return (f'<span class="agio-tree-bar" title="{escape(title)}" style="display:inline-block;vertical-align:middle;'
            f'height:6px;width:{width:.0f}px;background:{color};margin-right:4px"></span>')


def _timeline_html(phases: list[dict[str, Any]]) -> str:
    total = sum(p["ms"] for p in phases) or 1.0
    parts = "".join(
        f'<span class="agio-phase agio-phase-{p["kind"]}" title="{escape(p["label"])} · {p["ms"]:.0f} ms" '
        f'style="display:inline-block;height:8px;width:{max(2.0, 160 * p["ms"] / total):.0f}px;'
        f'background:{PHASE_COLORS[p["kind"]]};margin-right:1px"></span>' for p in phases)
    return f'<span class="agio-timeline" style="display:inline-block;vertical-align:middle">{parts}</span>'


def _transcript_html(entries: list[dict[str, Any]]) -> str:
    rows = []
    for e in entries:
        calls = "".join(f'<div style="font-size:12px">calls {escape(c)}</div>' for c in e.get("calls", ()))
        who = {"user": "You", "assistant": "Assistant", "tool": f"tool {e.get('name') or ''}"}.get(e["role"], e["role"])
        rows.append(f'<div class="agio-tree-step" style="margin:2px 0;padding-left:6px;border-left:2px solid '
                    f'{"#0969da" if e["role"] == "user" else "#8250df"}"><span style="font-size:11px;color:#57606a">'
                    f'#{e["sequence"]} {escape(who)}</span> <span style="white-space:pre-wrap">{escape(e["text"])}'
                    f'</span>{calls}</div>')
    return f'<div class="agio-tree-transcript" style="margin:4px 0 6px 12px">{"".join(rows)}</div>'


def _node_html(node: dict[str, Any], scale: dict[str, float]) -> str:
    children = "".join(_node_html(c, scale) for c in node["children"])
    kids = f'<ul style="list-style:none;padding-left:18px;margin:0">{children}</ul>' if children else ""
    if node["kind"] == "session":
        head = (f'<div class="agio-tree-fork" style="color:#57606a;font-size:12px">fork {escape(node["id"][:8])} '
                f'at step {node["forked_at"]}</div>' if node["forked_from"] else "")
        return f'<li class="agio-tree-session" data-session="{escape(node["id"])}">{head}{kids}</li>'
    color = STATUS_COLORS.get(node["status"], "#57606a")
    mark = ('<span class="agio-tree-current" title="current attempt" style="color:#1a7f37">★ current</span>'
            if node["current"] else '<span style="color:#57606a">superseded</span>')
    title = f"{node['run_kind']} {node['id'][:8]}" + (f" · attempt {node['attempt']}" if node["attempt"] > 1 else "")
    if node.get("nested"):  # an agent called as a tool by the run above
        title = f"↳ agent {node.get('agent') or '?'} · {title}"
        mark = ""
    summary = (f'<b>{escape(title)}</b> <span style="color:#fff;background:{color};border-radius:8px;padding:0 6px;'
               f'font-size:11px">{escape(node["status"])}</span> {mark} '
               f'<span style="color:#57606a;font-size:11px">{escape(node["model"] or "")} · '
               f'{escape(node["query"] or "")}</span><br>'
               f'{_timeline_html(node["timeline"])} '
               f'{_bar(node["tokens"], scale["tokens"], "#8250df", "tokens")}'
               f'<span style="font-size:11px">{node["tokens"] or 0} tokens</span> '
               f'{_bar(node["latency_ms"], scale["latency_ms"], "#0969da", "latency")}'
               f'<span style="font-size:11px">{(node["latency_ms"] or 0):.0f} ms · {format_cost(node["cost"])}</span>')
    commands = f"%agio replay {node['id']}" + ("" if node["current"] or node["start_sequence"] is None else
                                               f" · %agio use-attempt {node['id']} {node['attempt']}")
    hint = (f'<div class="agio-command-hint" style="font-size:11px;color:#57606a">run in a cell: '
            f'<code>{escape(commands)}</code></div>')
    return (f'<li class="agio-tree-run{" agio-tree-current-run" if node["current"] else ""}" '
            f'data-run="{escape(node["id"])}"><details><summary style="cursor:pointer">{summary}</summary>'
            f'{_transcript_html(node["transcript"])}{hint}</details>{kids}</li>')


def to_html(data: dict[str, Any]) -> str:
    legend = " ".join(f'<span style="color:{c}">■</span> {k}' for k, c in PHASE_COLORS.items())
    return text_html(f'<div class="agio-tree" style="{_BOX};border:1px solid #d0d7de;border-radius:8px;padding:6px 10px">'
            f'<div><b>agio tree</b> <span style="font-size:11px;color:#57606a">session '
            f'{escape(data["session_id"][:8])} · click a run for its transcript · {legend}</span></div>'
            f'<ul style="list-style:none;padding-left:0;margin:0">{_node_html(data["root"], data["scale"])}</ul></div>')


def to_text(data: dict[str, Any]) -> str:
    lines = [f"agio tree of session {data['session_id'][:8]}"]

    def walk(node: dict[str, Any], depth: int) -> None:
        pad = "  " * depth
        if node["kind"] == "session":
            if node["forked_from"]:
                lines.append(f"{pad}fork {node['id'][:8]} at step {node['forked_at']}")
            for c in node["children"]:
                walk(c, depth + (1 if node["forked_from"] else 0))
            return
        mark = "*" if node["current"] else " "
        if node.get("nested"):
            mark = f"↳ agent {node.get('agent')}:"
        lines.append(f"{pad}{mark} {node['run_kind']} {node['id'][:8]} [{node['status']}] attempt {node['attempt']} "
                     f"{node['tokens'] or 0} tokens {(node['latency_ms'] or 0):.0f} ms {format_cost(node['cost'])}")
        for c in node["children"]:
            walk(c, depth + 1)

    walk(data["root"], 0)
    return "\n".join(lines)
