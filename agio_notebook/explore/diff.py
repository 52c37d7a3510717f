"""Diff two runs, attempts or branches: steps aligned side by side, with what changed and what it cost.

Steps are aligned by their shape (role and tool names) with ``difflib``, so an inserted tool turn
shifts nothing after it. A retry is shown with the steps it shares with the run it retried (the
conversation before its first step, back to where that run began), so the shared steps line up as
``same``. Each pair carries word-level text highlights, tool argument and result differences, what the
model was set up with when it differs (system prompt, model, settings, tools: from the request stored with
each model step), and tokens, latency and cost per side with their deltas. The same data is a DataFrame
(``.frame``), escaped HTML (``_repr_html_``) and a JSON MIME bundle the JupyterLab extension draws
(``application/vnd.agio.diff+json``).
"""

from __future__ import annotations

import difflib
import os
import json
import re
from dataclasses import dataclass, field
from html import escape
from itertools import zip_longest
from typing import Any

import pandas as pd

from ..core import AgentRun, AgioError, Step, StepRole
from ..execution.fork import attempt_steps
from ..execution.retry import attempt_family
from ..models.pricing import format_cost
from ..views import text_html
from ..storage.base import Repository
from ..storage.ids import resolve_run_or_session

MIME_TYPE = "application/vnd.agio.diff+json"
VERSION = 1
_WORDS = re.compile(r"\s+|[^\s]+")
_MAX_TEXT = 4000  # characters of each text highlighted word by word; the rest is compared whole


class DiffError(AgioError):
    """Two things that cannot be diffed (e.g. from different stores)."""


@dataclass
class Side:
    """One side of a diff: what it is, where it lives, and its steps in order."""

    ref: str
    kind: str  # run | session
    label: str
    repository: Repository
    steps: list[Step]
    run: AgentRun | None = None
    calls: dict[str, tuple[str, str]] = field(default_factory=dict)  # tool_call_id -> (name, arguments)

    def own(self) -> list[Step]:
        """The steps this side wrote (a run's shared steps are its earlier attempt's)."""
        return self.steps if self.run is None else [s for s in self.steps if s.run_id == self.ref]

    def totals(self) -> dict[str, Any]:
        own = self.own()
        tokens = sum(s.metrics.total_tokens or 0 for s in own if s.role is StepRole.ASSISTANT)
        latency = sum(s.metrics.duration_ms or 0.0 for s in own)
        costs = [s.metrics.cost for s in own if s.role is StepRole.ASSISTANT]
        cost = None if any(c is None for c in costs) else sum(costs)
        return {"ref": self.ref, "kind": self.kind, "label": self.label, "steps": len(own),
                "tokens": tokens, "latency_ms": latency, "cost": cost,
                "final_text": next((s.content for s in reversed(own)
                                    if s.role is StepRole.ASSISTANT and s.content), None)}


def _store_key(repo: Repository) -> Any:
    root = getattr(repo, "root", None) or getattr(repo, "path", None)
    return os.path.abspath(root) if root is not None else id(repo)


def _resolve(ref: Any, repository: Repository | None) -> Side:
    if isinstance(ref, tuple) and len(ref) == 2:
        repository, ref = ref
    ref = getattr(ref, "run_id", None) or getattr(ref, "id", None) or ref
    if repository is None:
        raise DiffError("diff needs a repository (pass repository=, or (repository, id) pairs)")
    if not isinstance(ref, str):
        raise DiffError(f"diff compares run or session ids, got {type(ref).__name__}")
    kind, ref = resolve_run_or_session(repository, ref)  # a unique prefix of 6+ characters works too
    run = repository.get_run(ref) if kind == "run" else None
    if run is not None:
        steps = run_steps(repository, run)
        label = f"{run.kind} {ref[:8]}" + (f" · attempt {run.attempt}" if run.attempt > 1 else "")
        label += f" · {run.model_name}" if run.model_name else ""
        side = Side(ref, "run", label, repository, steps, run)
    else:
        side = Side(ref, "session", f"session {ref[:8]}", repository, repository.get_steps(ref))
    for s in side.steps:
        for c in s.tool_calls:
            side.calls[c.id] = (c.name, c.arguments)
    return side


def run_steps(repository: Repository, run: AgentRun) -> list[Step]:
    """A run's steps; for a retry, led by the steps it shares with the attempts before it (from where the
    first attempt began), as the retry saw them, so a run and its retry line up."""
    own = [s for s in repository.get_steps(run.session_id, include_superseded=True) if s.run_id == run.id]
    starts = [r.start_sequence for r in attempt_family(repository, run) if r.start_sequence is not None]
    if run.start_sequence is None or not starts or min(starts) >= run.start_sequence:
        return own
    first = min(starts)
    shared = [s for s in attempt_steps(repository, run.id) if first <= s.sequence < run.start_sequence]
    return shared + own


def setup_of(step: Step | None) -> dict[str, Any] | None:
    """What a model step was asked with, from its stored request: system prompt, model, settings, tools."""
    request = (step.extra.get("request") if step is not None else None) or {}
    if not request:
        return None
    messages = request.get("messages") or {}
    system = messages.get("system")
    inline = messages.get("inline")
    if inline is not None:  # edited in step mode: what was sent
        system = next((m.get("content") for m in inline if m.get("role") == "system"), None)
    return {"system prompt": system, "model": request.get("model"),
            "settings": dict(request.get("settings") or {}),
            "tools": sorted((t.get("function") or {}).get("name") or "" for t in request.get("tools") or ())}


def setup_changes(a: dict[str, Any] | None, b: dict[str, Any] | None) -> list[dict[str, Any]]:
    """``{"name", "a", "b"}`` for each part of the setup that differs (settings key by key)."""
    if a is None or b is None:
        return []
    changes = [{"name": key, "a": a[key], "b": b[key]} for key in ("system prompt", "model") if a[key] != b[key]]
    for c in changes:
        if c["name"] == "system prompt":  # word by word, as step texts are
            c["text_a"], c["text_b"] = text_ops(c["a"] or "", c["b"] or "")
    sa, sb = a["settings"], b["settings"]
    changes += [{"name": f"settings.{k}", "a": sa.get(k), "b": sb.get(k)} for k in sorted(set(sa) | set(sb))
                if sa.get(k) != sb.get(k)]
    if a["tools"] != b["tools"]:
        changes.append({"name": "tools", "a": a["tools"], "b": b["tools"]})
    return changes


def _shape(step: Step) -> tuple[Any, ...]:
    return (step.role.value, tuple(c.name for c in step.tool_calls), step.name)


def align(a: list[Step], b: list[Step]) -> list[tuple[Step | None, Step | None]]:
    """Step pairs: matching shapes paired, replaced runs paired in order, the rest one-sided."""
    matcher = difflib.SequenceMatcher(None, [_shape(s) for s in a], [_shape(s) for s in b], autojunk=False)
    pairs: list[tuple[Step | None, Step | None]] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal" or tag == "replace":
            pairs.extend(zip_longest(a[i1:i2], b[j1:j2]))
        elif tag == "delete":
            pairs.extend((s, None) for s in a[i1:i2])
        else:
            pairs.extend((None, s) for s in b[j1:j2])
    return pairs


def text_ops(a: str, b: str) -> tuple[list[list[str]], list[list[str]]]:
    """Word-level highlights: ``[[op, text], ...]`` per side, op one of equal | delete | insert."""
    if a == b:
        return ([["equal", a]] if a else []), ([["equal", b]] if b else [])
    if len(a) > _MAX_TEXT or len(b) > _MAX_TEXT:
        return [["delete", a]], [["insert", b]]
    wa, wb = _WORDS.findall(a), _WORDS.findall(b)
    left: list[list[str]] = []
    right: list[list[str]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, wa, wb, autojunk=False).get_opcodes():
        if tag == "equal":
            left.append(["equal", "".join(wa[i1:i2])])
            right.append(["equal", "".join(wb[j1:j2])])
        else:
            if i2 > i1:
                left.append(["delete", "".join(wa[i1:i2])])
            if j2 > j1:
                right.append(["insert", "".join(wb[j1:j2])])
    return left, right


def _parse(raw: str | None) -> Any:
    try:
        return json.loads(raw) if raw else {}
    except (TypeError, ValueError):
        return raw


def argument_changes(a: str | None, b: str | None) -> list[dict[str, Any]]:
    """Per argument: ``{"name", "a", "b"}`` for each one that differs (missing is ``None``)."""
    pa, pb = _parse(a), _parse(b)
    if not isinstance(pa, dict) or not isinstance(pb, dict):
        return [] if pa == pb else [{"name": "(arguments)", "a": pa, "b": pb}]
    return [{"name": k, "a": pa.get(k), "b": pb.get(k)} for k in sorted(set(pa) | set(pb))
            if pa.get(k) != pb.get(k)]


def _step_info(step: Step | None, side: Side) -> dict[str, Any] | None:
    if step is None:
        return None
    m = step.metrics
    info: dict[str, Any] = {"sequence": step.sequence, "role": step.role.value, "status": step.status,
                            "attempt": step.attempt, "text": step.content or "",
                            "tokens": m.total_tokens, "latency_ms": m.duration_ms,
                            "cost": m.cost if step.role is StepRole.ASSISTANT else None,
                            "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in step.tool_calls],
                            "setup": setup_of(step) if step.role is StepRole.ASSISTANT else None}
    if step.role is StepRole.TOOL:
        name, arguments = side.calls.get(step.tool_call_id or "", (step.name or "", None))
        info["tool"] = {"name": name, "arguments": arguments, "result": step.content, "error": step.error}
        nested = (step.extra.get("nested_run") or {}).get("run_id")
        if nested:  # an agent called as a tool: its run, compared in turn
            info["nested_run"] = nested
    return info


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a


def _row(pa: Step | None, pb: Step | None, a: Side, b: Side) -> dict[str, Any]:
    ia, ib = _step_info(pa, a), _step_info(pb, b)
    if ia is None or ib is None:
        status = "only_a" if ib is None else "only_b"
        ops_a = [["delete", ia["text"]]] if ia and ia["text"] else []
        ops_b = [["insert", ib["text"]]] if ib and ib["text"] else []
        return {"status": status, "a": ia, "b": ib, "text_a": ops_a, "text_b": ops_b, "arguments": [], "setup": [],
                "result_changed": False, "tokens_delta": None, "latency_delta_ms": None, "cost_delta": None}
    ops_a, ops_b = text_ops(ia["text"], ib["text"])
    arguments: list[dict[str, Any]] = []
    for ca, cb in zip_longest(ia["tool_calls"], ib["tool_calls"]):
        if ca and cb and ca["name"] == cb["name"]:
            arguments += [{"tool": ca["name"], **c} for c in argument_changes(ca["arguments"], cb["arguments"])]
        elif ca != cb:
            arguments.append({"tool": (ca or cb)["name"], "name": "(call)", "a": ca and ca["name"],
                              "b": cb and cb["name"]})
    if "tool" in ia and "tool" in ib:
        arguments += [{"tool": ia["tool"]["name"], **c}
                      for c in argument_changes(ia["tool"]["arguments"], ib["tool"]["arguments"])]
    result_changed = ("tool" in ia and "tool" in ib
                      and (ia["tool"]["result"], ia["tool"]["error"]) != (ib["tool"]["result"], ib["tool"]["error"]))
    setup = setup_changes(ia["setup"], ib["setup"])
    same = (ia["text"] == ib["text"] and not arguments and not result_changed and not setup
            and ia["status"] == ib["status"])
    nested = None
    if ia.get("nested_run") and ib.get("nested_run") and ia["nested_run"] != ib["nested_run"]:
        nested = RunDiff(_resolve(ia["nested_run"], a.repository), _resolve(ib["nested_run"], b.repository)).to_dict()
        same = same and all(r["status"] == "same" for r in nested["rows"])
    return {"status": "same" if same else "changed", "a": ia, "b": ib, "text_a": ops_a, "text_b": ops_b,
            "arguments": arguments, "setup": setup, "result_changed": result_changed, "nested": nested,
            "tokens_delta": _delta(ia["tokens"], ib["tokens"]),
            "latency_delta_ms": _delta(ia["latency_ms"], ib["latency_ms"]),
            "cost_delta": _delta(ia["cost"], ib["cost"])}


class RunDiff:
    """The comparison of two sides; displays as HTML (or the extension's view), ``.frame`` for data."""

    def __init__(self, a: Side, b: Side):
        self.a, self.b = a, b
        self.rows = [_row(pa, pb, a, b) for pa, pb in align(a.steps, b.steps)]

    @property
    def changed(self) -> int:
        return sum(r["status"] != "same" for r in self.rows)

    def to_dict(self) -> dict[str, Any]:
        ta, tb = self.a.totals(), self.b.totals()
        # where the two setups first differ (a fork's copied steps share theirs), shown above the table
        setup = next((r["setup"] for r in self.rows if r["setup"]), [])
        return {"version": VERSION, "a": ta, "b": tb, "rows": self.rows, "setup": setup,
                "delta": {"tokens": tb["tokens"] - ta["tokens"], "latency_ms": tb["latency_ms"] - ta["latency_ms"],
                          "cost": _delta(ta["cost"], tb["cost"])}}

    @property
    def frame(self) -> pd.DataFrame:
        """One row per step pair: sequences, roles, texts, what changed, and the numbers of both sides."""
        def col(side: str, key: str) -> list[Any]:
            return [(r[side] or {}).get(key) for r in self.rows]

        def num(values: list[Any], dtype: str) -> pd.Series:
            if dtype == "Int64":
                return pd.Series(values, dtype="Int64")
            return pd.Series([float("nan") if v is None else v for v in values], dtype="float64")

        data: dict[str, Any] = {"status": pd.Categorical([r["status"] for r in self.rows],
                                                         categories=["same", "changed", "only_a", "only_b"])}
        for s in ("a", "b"):
            data[f"sequence_{s}"] = num(col(s, "sequence"), "Int64")
            data[f"role_{s}"] = pd.Series(col(s, "role"), dtype="string")
            data[f"text_{s}"] = pd.Series(col(s, "text"), dtype="string")
        data["arguments_changed"] = pd.Series([", ".join(f"{c['tool']}.{c['name']}" for c in r["arguments"]) or None
                                               for r in self.rows], dtype="string")
        data["setup_changed"] = pd.Series([", ".join(c["name"] for c in r["setup"]) or None for r in self.rows],
                                          dtype="string")
        data["result_changed"] = pd.Series([r["result_changed"] for r in self.rows], dtype="bool")
        for key, dtype in (("tokens", "Int64"), ("latency_ms", "float64"), ("cost", "float64")):
            data[f"{key}_a"] = num(col("a", key), dtype)
            data[f"{key}_b"] = num(col("b", key), dtype)
        data["tokens_delta"] = num([r["tokens_delta"] for r in self.rows], "Int64")
        data["latency_delta_ms"] = num([r["latency_delta_ms"] for r in self.rows], "float64")
        data["cost_delta"] = num([r["cost_delta"] for r in self.rows], "float64")
        return pd.DataFrame(data)

    # -- display ---------------------------------------------------------------------
    def _repr_html_(self) -> str:
        return to_html(self.to_dict())

    def __repr__(self) -> str:
        return to_text(self.to_dict())

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        data = self.to_dict()
        return {MIME_TYPE: data, "text/html": to_html(data), "text/plain": to_text(data)}


def diff(a: Any, b: Any, *, repository: Repository | None = None) -> RunDiff:
    """Compare two runs, attempts (runs of a retry) or branches (sessions, e.g. a fork and its origin).

    ``a`` and ``b`` are ids (or ``RunResult``s) in ``repository``, or ``(repository, id)`` pairs; both
    must live in the same store.
    """
    if repository is None and not (isinstance(a, tuple) and isinstance(b, tuple)):
        from ..storage import open_repository

        repository = open_repository()
    ra = a[0] if isinstance(a, tuple) and len(a) == 2 else repository
    rb = b[0] if isinstance(b, tuple) and len(b) == 2 else repository
    if ra is not None and rb is not None and ra is not rb and _store_key(ra) != _store_key(rb):
        raise DiffError(f"cannot diff runs from different stores ({_store_key(ra)} and {_store_key(rb)}); "
                        "export one into the other first")
    return RunDiff(_resolve(a, ra), _resolve(b, rb))


# -- renderings ------------------------------------------------------------------------------
_BOX = "font-family:var(--jp-ui-font-family,system-ui,sans-serif);font-size:13px;line-height:1.45"
_CELL = "vertical-align:top;padding:4px 8px;border-top:1px solid #d0d7de;width:50%"
_OPS = {"equal": "", "delete": "background:#ffebe9;text-decoration:line-through",
        "insert": "background:#dafbe1"}
_ROW_BG = {"same": "", "changed": "background:#fff8c5", "only_a": "background:#ffebe9", "only_b": "background:#dafbe1"}


def _fmt_num(v: float | None, unit: str = "") -> str:
    return "–" if v is None else (f"{v:.0f}{unit}" if unit else f"{v:g}")


def _fmt_delta(v: float | None, unit: str = "", cost: bool = False) -> str:
    if v is None:
        return "unknown" if cost else "–"
    if cost:
        return ("+" if v > 0 else "−" if v < 0 else "±") + format_cost(abs(v))
    return f"{v:+.0f}{unit}"


def _ops_html(ops: list[list[str]]) -> str:
    return "".join(f'<span class="agio-diff-{op}" style="{_OPS[op]}">{escape(text)}</span>'
                   if op != "equal" else escape(text) for op, text in ops)


def _side_html(info: dict[str, Any] | None, ops: list[list[str]]) -> str:
    if info is None:
        return '<span style="color:#57606a">—</span>'
    head = (f'<div style="font-size:11px;color:#57606a">#{info["sequence"]} {escape(info["role"])}'
            f' · {_fmt_num(info["tokens"])} tokens · {_fmt_num(info["latency_ms"], " ms")}'
            + (f' · {format_cost(info["cost"])}' if info["role"] == "assistant" else "") + "</div>")
    body = f'<div style="white-space:pre-wrap">{_ops_html(ops)}</div>' if ops else ""
    for call in info["tool_calls"]:
        body += f'<div style="font-size:12px">calls {escape(call["name"])}({escape(call["arguments"] or "")})</div>'
    if "tool" in info:
        t = info["tool"]
        body += (f'<div style="font-size:12px">tool {escape(t["name"])} → '
                 f'{escape((t["result"] or "") if not t["error"] else "error: " + t["error"])}</div>')
    return head + body


def _changes_html(row: dict[str, Any]) -> str:
    items = [f'{escape(c["tool"])}.{escape(c["name"])}: <span style="{_OPS["delete"]}">{escape(json.dumps(c["a"]))}'
             f'</span> → <span style="{_OPS["insert"]}">{escape(json.dumps(c["b"]))}</span>' for c in row["arguments"]]
    items += [escape(_setup_line(c)) for c in row.get("setup") or ()]
    if row["result_changed"]:
        items.append("tool result differs")
    deltas = []
    if row["tokens_delta"]:
        deltas.append(f'{_fmt_delta(row["tokens_delta"])} tokens')
    if row["latency_delta_ms"]:
        deltas.append(_fmt_delta(row["latency_delta_ms"], " ms"))
    if row["a"] and row["b"] and row["a"]["role"] == "assistant":
        deltas.append(_fmt_delta(row["cost_delta"], cost=True))
    text = "; ".join(items)
    if deltas:
        text += (" · " if text else "") + " · ".join(deltas)
    return f'<div class="agio-diff-changes" style="font-size:11px;color:#57606a">{text}</div>' if text else ""


def _setup_line(change: dict[str, Any]) -> str:
    """One difference of setup, short: a system prompt is named (the header shows it word by word)."""
    if change["name"] == "system prompt":
        return "system prompt differs"
    return f'{change["name"]}: {json.dumps(change["a"])} → {json.dumps(change["b"])}'


def _setup_html(changes: list[dict[str, Any]]) -> str:
    """The setup differences of the two sides' first model calls, above the table."""
    items = []
    for c in changes:
        if c["name"] == "system prompt":
            items.append(f'<div>system prompt: A <span style="white-space:pre-wrap">{_ops_html(c["text_a"])}</span>'
                         f' · B <span style="white-space:pre-wrap">{_ops_html(c["text_b"])}</span></div>')
        else:
            items.append(f"<div>{escape(_setup_line(c))}</div>")
    return f'<div class="agio-diff-setup" style="font-size:12px">{"".join(items)}</div>' if items else ""


def to_html(data: dict[str, Any]) -> str:
    """The side-by-side table as self-contained, escaped HTML (inline styles, no script)."""
    a, b, d = data["a"], data["b"], data["delta"]
    head = (f'<tr><th style="{_CELL};text-align:left">A: {escape(a["label"])}</th>'
            f'<th style="{_CELL};text-align:left">B: {escape(b["label"])}</th></tr>')
    rows = []
    for r in data["rows"]:
        rows.append(f'<tr class="agio-diff-row agio-diff-{r["status"]}" style="{_ROW_BG[r["status"]]}">'
                    f'<td style="{_CELL}">{_side_html(r["a"], r["text_a"])}</td>'
                    f'<td style="{_CELL}">{_side_html(r["b"], r["text_b"])}{_changes_html(r)}</td></tr>')
        if r.get("nested"):  # the nested runs of an agent tool, compared inside the row
            rows.append(f'<tr class="agio-diff-nested"><td colspan="2" style="{_CELL};padding-left:18px">'
                        f'{to_html(r["nested"])}</td></tr>')
    changed = sum(r["status"] != "same" for r in data["rows"])
    summary = (f'{changed} of {len(data["rows"])} step pairs differ · tokens {a["tokens"]} → {b["tokens"]} '
               f'({_fmt_delta(d["tokens"])}) · latency {a["latency_ms"]:.0f} → {b["latency_ms"]:.0f} ms '
               f'({_fmt_delta(d["latency_ms"], " ms")}) · cost {format_cost(a["cost"])} → {format_cost(b["cost"])} '
               f'({_fmt_delta(d["cost"], cost=True)})')
    return text_html(f'<div class="agio-diff" style="{_BOX};border:1px solid #d0d7de;border-radius:8px;padding:6px 10px">'
            f'<div><b>agio diff</b> <span class="agio-diff-summary" style="font-size:11px;color:#57606a">'
            f'{escape(summary)}</span></div>{_setup_html(data.get("setup") or [])}'
            f'<table style="border-collapse:collapse;width:100%">{head}{"".join(rows)}</table></div>')


def to_text(data: dict[str, Any]) -> str:
    a, b, d = data["a"], data["b"], data["delta"]
    lines = [f"agio diff  A: {a['label']}  B: {b['label']}",
             f"tokens {a['tokens']} -> {b['tokens']} ({_fmt_delta(d['tokens'])}), cost {format_cost(a['cost'])} -> "
             f"{format_cost(b['cost'])}"]
    for c in data.get("setup") or ():
        if c["name"] == "system prompt":
            lines.append(f"setup: system prompt {c['a']!r} -> {c['b']!r}")
        else:
            lines.append(f"setup: {_setup_line(c).replace(' → ', ' -> ')}")
    marks = {"same": " ", "changed": "~", "only_a": "-", "only_b": "+"}
    for r in data["rows"]:
        side = r["a"] or r["b"]
        text_a = (r["a"] or {}).get("text", "")
        text_b = (r["b"] or {}).get("text", "")
        line = f"{marks[r['status']]} #{side['sequence']} {side['role']}: "
        line += text_a[:60] if r["status"] in ("same", "only_a") else (
            f"{text_a[:40]!r} -> {text_b[:40]!r}" if r["status"] == "changed" else text_b[:60])
        lines.append(line)
        if r.get("nested"):
            lines.extend(f"    | {nested}" for nested in to_text(r["nested"]).splitlines())
    return "\n".join(lines)
