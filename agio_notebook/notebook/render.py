"""Static renderings of a RunView: escaped HTML (GitHub, nbviewer, VS Code) and plain text.

Every piece of model output or tool output goes through ``html.escape``; the markup uses inline
styles only and no script, so it survives sanitisers and cannot run anything.
"""

from __future__ import annotations

import json
import re
from html import escape

import nh3

from ..models.pricing import format_cost
from ..views import counted, seconds, text_html
from .debug_marks import card_marks_html, marks_text, step_marks_html
from .phase import phase
from .view_model import RunView, StepView, ToolCard

STATUS_COLORS = {"completed": "#1a7f37", "running": "#0969da", "failed": "#cf222e", "cancelled": "#9a6700",
                 "max_steps": "#9a6700", "pending": "#57606a", "ok": "#1a7f37", "error": "#cf222e",
                 "rejected": "#9a6700", "awaiting_approval": "#8250df", "interrupted": "#9a6700", "paused": "#8250df"}

_BOX = "font-family:var(--jp-ui-font-family,system-ui,sans-serif);font-size:13px;line-height:1.45"
_MONO = "font-family:var(--jp-code-font-family,ui-monospace,monospace);font-size:12px"


def pretty_json(raw: str | None) -> str:
    """Arguments and JSON results indented when they parse; as they are otherwise."""
    if raw is None:
        return ""
    try:
        parsed = json.loads(raw)
    except (ValueError, TypeError):
        return raw
    # objects and lists are indented; scalars stay exactly as written ("2.0" stays "2.0")
    return json.dumps(parsed, indent=2, ensure_ascii=False) if isinstance(parsed, (dict, list)) else raw


def metrics_line(m: dict, *, run: bool = False) -> str:
    parts = []
    if run:  # a step is any stored step; max_steps counts model calls, so both are said
        parts.append(counted(m.get("steps") or 0, "step") + f" ({counted(m.get('model_calls') or 0, 'model call')})")
        outcomes = [f"{m[k]} {word}" for k, word in (("tool_errors", "failed"), ("tool_unfinished", "not finished"))
                    if m.get(k)]
        parts.append(counted(m.get("tool_calls") or 0, "tool call") + (f" ({', '.join(outcomes)})" if outcomes else ""))
    if m.get("total_tokens") is not None:
        tokens = f"{m['total_tokens']} tokens"
        if m.get("prompt_tokens") is not None and m.get("completion_tokens") is not None:
            tokens += f" ({m['prompt_tokens']} in / {m['completion_tokens']} out)"
        parts.append(tokens)
    elif m.get("model_calls") or m.get("model_ms") is not None:  # the server sent no usage: unknown, not 0
        parts.append("tokens unknown")
    if m.get("ttft_ms") is not None:
        parts.append(f"TTFT {m['ttft_ms']:.0f} ms")
    if m.get("model_ms"):
        parts.append(f"model {m['model_ms']:.0f} ms")
    if m.get("tool_ms"):
        parts.append(f"tools {m['tool_ms']:.0f} ms")
    if m.get("paused_ms"):  # step mode: waiting at pauses, its own figure
        parts.append(f"paused {seconds(m['paused_ms'])}")
    if m.get("duration_ms"):
        parts.append(f"total {m['duration_ms']:.0f} ms")
    if "cost" in m and (m.get("model_calls") if run else m.get("total_tokens") is not None):
        # unknown shows as unknown, never $0; a run that made no model call (failed before one) says nothing
        parts.append(f"cost {format_cost(m['cost'])}")
    if m.get("reused_calls"):
        parts.append(f"{m['reused_calls']} calls ({m.get('reused_tokens', 0)} tokens) reused from the record")
    return " · ".join(parts)


def _badge(status: str) -> str:
    color = STATUS_COLORS.get(status, "#57606a")
    return (f'<span class="agio-status" style="color:#fff;background:{color};border-radius:8px;padding:0 6px;'
            f'font-size:11px">{escape(status)}</span>')


_BASE64 = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")
_TABLE_TAGS = {"table", "thead", "tbody", "tfoot", "tr", "th", "td", "caption", "div", "span", "br", "p", "b", "i"}


def displays_html(displays: list[dict]) -> str:
    """Figures as <img> from base64 (checked to be base64) and tables through an HTML sanitizer (nh3):
    the sandbox's HTML is untrusted, so only table markup survives, with no attribute but spans."""
    parts = []
    for d in displays:
        data = d.get("data")
        if not isinstance(data, str):
            continue
        if d.get("mime") == "image/png" and _BASE64.match(data):
            parts.append(f'<img class="agio-display-image" style="max-width:100%;display:block;margin:4px 0" '
                         f'src="data:image/png;base64,{data}" alt="figure">')
        elif d.get("mime") == "text/html":
            clean = nh3.clean(data, tags=_TABLE_TAGS, attributes={"td": {"colspan", "rowspan"},
                                                                  "th": {"colspan", "rowspan"}})
            parts.append(f'<div class="agio-display-html" style="overflow:auto;margin:4px 0">{clean}</div>')
    return "".join(parts)


def _isolation(card: ToolCard) -> str:
    if not card.isolation:
        return ""
    return f' <span class="agio-isolation" style="color:#57606a;font-size:11px">· sandbox: {escape(card.isolation)}</span>'


def card_html(card: ToolCard) -> str:
    duration = f" · {card.duration_ms:.0f} ms" if card.duration_ms is not None else ""
    if card.replayed:
        duration += ' · <span class="agio-replayed" title="not run again: the recorded result">replayed</span>'
    body = (f'<div style="color:#57606a;font-size:11px">arguments</div>'
            f'<pre class="agio-tool-args" style="{_MONO};margin:2px 0;white-space:pre-wrap">'
            f'{escape(pretty_json(card.arguments))}</pre>')
    if card.result is not None:
        body += (f'<div style="color:#57606a;font-size:11px">result</div>'
                 f'<pre class="agio-tool-result" style="{_MONO};margin:2px 0;white-space:pre-wrap">'
                 f'{escape(pretty_json(card.result))}</pre>')
    if card.diff:
        body += (f'<div style="color:#57606a;font-size:11px">diff</div>'
                 f'<pre class="agio-tool-diff" style="{_MONO};margin:2px 0;white-space:pre-wrap">'
                 f'{escape(card.diff)}</pre>')
    if card.error is not None:
        body += (f'<pre class="agio-tool-error" style="{_MONO};margin:2px 0;color:#cf222e;white-space:pre-wrap">'
                 f'{escape(card.error_type or "error")}: {escape(card.error)}</pre>')
    if card.nested is not None:
        body += nested_run_html(card.nested)
    return (f'<details class="agio-tool-card agio-tool-{escape(card.status)}" '
            f'style="border:1px solid #d0d7de;border-radius:6px;margin:4px 0 4px 12px;padding:2px 8px">'
            f'<summary><span class="agio-tool-label" style="color:#57606a;font-size:11px">tool</span> '
            f'<b>{escape(card.name)}</b> {_badge(card.status)}{duration}{_isolation(card)}</summary>'
            f'{body}</details>{card_marks_html(card)}'
            + (f'<div class="agio-displays" style="margin:0 0 4px 12px">{displays_html(card.displays)}</div>'
               if card.displays else ""))


def nested_run_html(view: RunView) -> str:
    """The run of an agent called as a tool, inside its tool card: its steps and cards, at any depth."""
    steps = "".join(step_html(s, bool(view.handoffs)) for s in view.conversation())
    line = escape(metrics_line(view.counted_metrics(), run=True))
    error = (f'<div class="agio-error" style="color:#cf222e">{escape(view.error)}</div>'
             if view.error and view.status not in ("completed", "running") else "")
    return (f'<details open class="agio-nested-run" data-agio-run="{escape(view.run_id or "")}" '
            f'style="border-left:2px dashed #8250df;margin:4px 0;padding:2px 0 2px 8px">'
            f'<summary style="font-size:12px">agent <b class="agio-nested-agent">{escape(view.agent_name or "?")}</b> '
            f'{_badge(view.status)} <span style="color:#57606a;font-size:11px">run '
            f'{escape((view.run_id or "")[:8])}</span></summary>{steps}{error}'
            f'<div class="agio-metrics" style="font-size:11px;color:#57606a">{line}</div></details>')


def handoff_html(view: RunView) -> str:
    """Who holds the conversation after handoffs (empty without one)."""
    if not view.handoffs:
        return ""
    chain = " → ".join([view.handoffs[0]["from"], *(h["to"] for h in view.handoffs)])
    return (f'<div class="agio-handoff" style="font-size:12px;color:#8250df">handed off: {escape(chain)}</div>')


ROLE_COLORS = {"user": "#0969da", "memory": "#9a6700", "assistant": "#8250df"}


def role_color(role: str) -> str:
    """The colour of a step's left border: users blue, the assistant (and any other role) purple,
    memory amber."""
    return ROLE_COLORS.get(role, ROLE_COLORS["assistant"])


def memory_card_html(memory: dict) -> str:
    """The memory_read card: what was retrieved, collapsed; the exact injected text inside."""
    items = memory.get("items") or []
    skills = sum(1 for i in items if i.get("kind") == "skill")
    rows = "".join(
        f'<li class="agio-memory-item agio-memory-{escape(str(i.get("kind")))}">'
        f'<b>{escape(str(i.get("kind")))}</b> '
        + (escape(str(i.get("name") or "")) + ": " + escape(str(i.get("text") or "")) if i.get("kind") == "skill"
           else escape(str(i.get("situation") or "")) + " — " + escape(str(i.get("lesson") or "")))
        + f' <span style="color:#57606a;font-size:11px">{escape(str(i.get("id", ""))[:8])}</span></li>'
        for i in items)
    return (f'<details class="agio-memory-card" style="border:1px solid #d0d7de;border-radius:6px;margin:4px 0;'
            f'padding:2px 8px"><summary><b>Memory</b> · {counted(skills, "skill")}, '
            f'{counted(len(items) - skills, "experience")} · {escape(str(memory.get("mode", "")))}</summary><ul style="margin:2px 0">{rows}</ul>'
            f'<div style="color:#57606a;font-size:11px">added to the system prompt</div>'
            f'<pre class="agio-memory-text" style="{_MONO};margin:2px 0;white-space:pre-wrap">'
            f'{escape(str(memory.get("text") or ""))}</pre></details>')


def step_label(step: StepView, tip: str, agents: bool = False) -> str:
    """``#3 Assistant · attempt 2 · <metrics>`` as escaped HTML, the same live and saved; with ``agents`` (the
    run was handed off) a model step says which agent made it: ``#5 Assistant (planner)``."""
    who = {"user": "You", "memory": "Memory"}.get(step.role, "Assistant")
    if agents and step.agent and step.role == "assistant":
        who += f" ({escape(step.agent)})"
    return (f"#{step.sequence} {who}"
            + (f" · attempt {step.attempt}" if step.attempt > 1 else "")
            + (" · superseded" if step.superseded else "")
            + (" · stopped: partial answer" if step.status == "cancelled" else "")
            + (f' · <span class="agio-metrics">{escape(tip)}</span>' if tip and step.role == "assistant" else ""))


def step_html(step: StepView, agents: bool = False) -> str:
    css = f"agio-step agio-step-{escape(step.role)}" + (" agio-superseded" if step.superseded else "")
    style = f"margin:4px 0;padding:4px 8px;border-left:3px solid {role_color(step.role)}"
    if step.superseded:
        style += ";opacity:.55;text-decoration:line-through"
    tip = metrics_line(step.metrics)
    head = f'<div style="font-size:11px;color:#57606a" title="{escape(tip)}">{step_label(step, tip, agents)}</div>'
    text = f'<div style="white-space:pre-wrap">{escape(step.text)}</div>' if step.text else ""
    memory = memory_card_html(step.memory) if step.memory else ""
    return (f'<div class="{css}" style="{style}">{head}{text}{step_marks_html(step)}{memory}'
            f'{"".join(card_html(c) for c in step.tool_cards)}</div>')


def header_html(view: RunView) -> str:
    title = "Run" if view.kind == "run" else view.kind.capitalize()
    extra = ""
    if view.retry_of:
        extra += f" · attempt {view.attempt}, retry of {escape(view.retry_of[:8])}"
    if view.superseded_by:
        extra += f' · <span class="agio-superseded">superseded by {escape(view.superseded_by[:8])}</span>'
    origin = ""
    if view.forked_from:
        origin = (f'<div class="agio-fork-origin" style="font-size:11px;color:#57606a">forked from session '
                  f'{escape(view.forked_from[:8])} at step {view.forked_at}</div>')
    ids = f"{escape((view.run_id or '')[:8])} · session {escape((view.session_id or '')[:8])}"
    return (f'<div class="agio-header" style="display:flex;gap:8px;align-items:center">'
            f'<b>agio {title}</b> {_badge(view.status)}<span style="color:#57606a;font-size:11px">{ids}'
            f'{extra}</span></div>{origin}{handoff_html(view)}')


def output_html(view: RunView) -> str:
    """A typed agent's answer, under the conversation: its type and its value as JSON."""
    if not view.answered:
        return ""
    return (f'<div class="agio-output" style="margin:4px 0;padding:4px 8px;border-left:3px solid #1a7f37">'
            f'<div style="font-size:11px;color:#57606a">Output · {escape(view.output_type or "")}</div>'
            f'<pre style="margin:0;white-space:pre-wrap">{escape(json.dumps(view.output, indent=1, ensure_ascii=False))}'
            f'</pre></div>')


def footer_html(view: RunView) -> str:
    error = (f'<div class="agio-error" style="color:#cf222e">{escape(view.error)}</div>'
             if view.error and view.status != "completed" and view.error != view.status else "")
    line = escape(metrics_line(view.counted_metrics(), run=True))
    now = phase(view)
    if now is not None:  # the run goes on: what it is doing first, then the metrics so far
        so_far = f" · {line}" if view.run_metrics.get("model_calls") else ""
        line = f'<span class="agio-phase">{escape(now)}</span>{so_far}'
    return (f'{error}<div class="agio-metrics" style="font-size:11px;color:#57606a;border-top:1px solid #d0d7de;'
            f'margin-top:4px;padding-top:2px">{line}</div>')


def to_html(view: RunView, extra: str = "") -> str:
    """The whole run; ``extra`` is markup placed under the footer (already escaped by its maker)."""
    steps = "".join(step_html(s, bool(view.handoffs)) for s in view.conversation())
    return text_html(f'<div class="agio-run" data-agio-run="{escape(view.run_id or "")}" style="{_BOX};'
                     f'border:1px solid #d0d7de;border-radius:8px;padding:6px 10px">'
                     f'{header_html(view)}{steps}{output_html(view)}{footer_html(view)}{extra}</div>')  # "$5" is text, not math


def to_text(view: RunView) -> str:
    lines = _text_lines(view)
    return "\n".join(lines)


def _text_lines(view: RunView) -> list[str]:
    lines = [f"agio {view.kind} {(view.run_id or '')[:8]} [{view.status}]"
             + (f" attempt {view.attempt} (retry of {view.retry_of[:8]})" if view.retry_of else "")]
    if view.forked_from:
        lines.append(f"  forked from session {view.forked_from[:8]} at step {view.forked_at}")
    for step in view.conversation():
        mark = (" (superseded)" if step.superseded else "") + (" (stopped: partial)" if step.status == "cancelled" else "")
        who = "user" if step.role == "user" else "assistant" + (f" ({step.agent})" if view.handoffs and step.agent else "")
        if step.memory:
            lines.append(f"#{step.sequence} memory: " + ", ".join(
                f"{i.get('kind')} {str(i.get('id', ''))[:8]}" for i in step.memory.get("items") or []))
        if step.text:
            lines.append(f"#{step.sequence} {who}{mark}: {step.text}")
        lines.extend(marks_text(step))
        for card in step.tool_cards:
            outcome = (card.result if card.status == "ok" else f"{card.error_type or card.status}: {card.error}"
                       if card.error is not None else "")
            lines.append(f"  -> {card.name}({card.arguments}) [{card.status}]"
                         + (f" [sandbox: {card.isolation}]" if card.isolation else "") + f" {outcome}")
            shown = [d.get("mime") for d in card.displays]
            if shown:
                lines.append(f"     [{shown.count('image/png')} figure(s), {shown.count('text/html')} table(s) shown]")
            if card.nested is not None:  # the nested run of an agent tool, indented under its call
                lines.extend(f"     | {line}" for line in _text_lines(card.nested))
    if view.handoffs:
        lines.append("handed off: " + " → ".join([view.handoffs[0]["from"], *(h["to"] for h in view.handoffs)]))
    if view.answered:
        lines.append(f"output ({view.output_type}): {json.dumps(view.output, ensure_ascii=False)}")
    if view.error and view.status != "completed":
        lines.append(f"error: {view.error}")
    lines.append(metrics_line(view.counted_metrics(), run=True))
    return lines
