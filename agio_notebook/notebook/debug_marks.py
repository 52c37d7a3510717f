"""Step mode in the transcript: where the run paused, what was edited, and what each model call saw.

The same marks live (widgets), in the static HTML fallback and in text; the JupyterLab extension draws
them from the same data (``labextension/src/debugger.ts``). All text is escaped.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from ..execution.seen import seen_by_call
from ..storage.base import Repository
from ..views import counted, seconds
from .view_model import RunView, StepView, ToolCard

_SMALL = "font-size:11px;color:#57606a"
_MONO = "font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px"
_EDITED = ('<span class="agio-edited" title="{title}" style="font-size:11px;color:#9a6700;border:1px solid #d4a72c;'
           'border-radius:8px;padding:0 5px">edited</span>')


def seen_payload(repository: Repository, run_id: str) -> dict[str, Any]:
    """What every model call of the run saw, for the bundle: each distinct message once, and per call
    (its step number) the positions of its messages, so a long session does not repeat its history, and
    its prompt's total beside what the model reported (``totals``)."""
    rows: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    calls: dict[str, list[int]] = {}
    totals: dict[str, dict[str, Any]] = {}
    for sequence, (messages, total) in seen_by_call(repository, run_id).items():
        totals[str(sequence)] = total
        positions = []
        for row in messages:
            row = {k: v for k, v in row.items() if k != "position"}
            key = json.dumps(row, sort_keys=True)
            if key not in index:
                index[key] = len(rows)
                rows.append(row)
            positions.append(index[key])
        calls[str(sequence)] = positions
    return {"messages": rows, "calls": calls, "totals": totals}


def attach_seen(view: RunView, seen: dict[str, Any] | None) -> None:
    """Give each model step of ``view`` the messages it saw (from a bundle's ``seen``)."""
    if not seen:
        return
    rows = seen.get("messages") or []
    for step in view.steps:
        positions = (seen.get("calls") or {}).get(str(step.sequence))
        if positions is not None and step.role == "assistant":
            step.seen = [rows[i] for i in positions if 0 <= i < len(rows)]
            step.seen_total = (seen.get("totals") or {}).get(str(step.sequence))


def _pause_line(pause: dict[str, Any]) -> str:
    from .phase import pause_place

    action = pause.get("action") or "waiting"
    took = f", {seconds(pause['paused_ms'])}" if isinstance(pause.get("paused_ms"), (int, float)) else ""
    edited = f" · edited {', '.join(pause['edited'])}" if pause.get("edited") else ""
    return f"paused {pause_place(pause)} → {action}{took}{edited}"


# the pause sign drawn with two borders, like the extension's icon: no font needed, survives sanitisers
_PAUSE_ICON = ('<span class="agio-pause-icon" aria-hidden="true" style="display:inline-block;width:2px;height:8px;'
               'border-left:3px solid currentColor;border-right:3px solid currentColor;margin-right:4px;'
               'vertical-align:-1px"></span>')


def _pause_mark(pause: dict[str, Any]) -> str:
    return f'<div class="agio-pause-mark" style="{_SMALL}">{_PAUSE_ICON}{escape(_pause_line(pause))}</div>'


def _edited_title(edited: dict[str, Any]) -> str:
    parts = []
    for key, value in edited.items():
        if key == "request":
            parts.append("request: " + ", ".join(value.get("fields") or ()))
        elif key == "skipped":
            parts.append("skipped: the result was typed by hand")
        elif isinstance(value, dict) and "proposed" in value:
            proposed = value["proposed"]
            shown = proposed if isinstance(proposed, str) else json.dumps(proposed)
            parts.append(f"{key}: proposed {shown[:200]}")
        else:
            parts.append(key)
    return "; ".join(parts)


def step_marks_html(step: StepView) -> str:
    """Under a model step: its pauses, an ``edited`` badge, and "What the model saw" (collapsed)."""
    out = ""
    if step.edited:
        out += _EDITED.format(title=escape(_edited_title(step.edited)))
    for pause in step.pauses:
        out += _pause_mark(pause)
    if step.seen:
        out += seen_html(step.seen, step.seen_total)
    return out


def card_marks_html(card: ToolCard) -> str:
    out = ""
    if card.edited:
        out += _EDITED.format(title=escape(_edited_title(card.edited)))
    for pause in card.pauses:
        out += _pause_mark(pause)
    return out


def seen_summary(rows: list[dict[str, Any]], total: dict[str, Any] | None) -> str:
    """The disclosure's line: messages, the prompt's tokens as the budget counts them (the chat format and
    the reply's priming included), and what the model reported where that differs."""
    if total is None:  # a bundle saved before totals were kept: the messages' sum
        total = {"prompt_tokens": sum(int(r.get("tokens") or 0) for r in rows),
                 "estimated": any(r.get("tokens_estimated") for r in rows)}
    est = total.get("estimated")
    line = (f"What the model saw · {counted(len(rows), 'message')} · "
            f"{'~' if est else ''}{total['prompt_tokens']} tokens{' (estimated)' if est else ''}")
    if total.get("differs"):
        line += f" · the model reported {total['reported']}"
    return line


def seen_html(rows: list[dict[str, Any]], total: dict[str, Any] | None = None) -> str:
    """"What the model saw" as a disclosure: one row per message, role, tokens, the step it came from."""
    body = "".join(
        f'<tr class="agio-seen-row{" agio-seen-edited" if r.get("edited") else ""}">'
        f'<td style="{_SMALL}">{escape(str(r.get("role")))}</td>'
        f'<td style="{_SMALL};text-align:right">{"~" if r.get("tokens_estimated") else ""}{int(r.get("tokens") or 0)}</td>'
        f'<td style="{_SMALL}">{"#" + str(r["step"]) if r.get("step") is not None else ""}'
        f'{" edited" if r.get("edited") else ""}</td>'
        f'<td><pre style="{_MONO};margin:0;white-space:pre-wrap">{escape(str(r.get("text") or ""))}</pre></td></tr>'
        for r in rows)
    return (f'<details class="agio-seen" style="margin:2px 0"><summary style="{_SMALL}">'
            f'{escape(seen_summary(rows, total))}</summary><table style="border-collapse:collapse">{body}</table></details>')


def marks_text(step: StepView) -> list[str]:
    lines = [f"   {_pause_line(p)}" for p in step.pauses]
    if step.edited:
        lines.append(f"   [edited] {_edited_title(step.edited)}")
    for card in step.tool_cards:
        lines.extend(f"     {_pause_line(p)}" for p in card.pauses)
        if card.edited:
            lines.append(f"     [edited] {_edited_title(card.edited)}")
    return lines
