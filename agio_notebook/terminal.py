"""A readable one-line-per-event rendering of the event stream, for terminals and logs."""

from __future__ import annotations

import json
from typing import Any, TextIO

from .core import StepEvent, StepEventType

_E = StepEventType


def _short(text: Any, limit: int = 200) -> str:
    s = text if isinstance(text, str) else json.dumps(text, default=str)
    s = s.replace("\n", " ")
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _metrics(m: dict[str, Any]) -> str:
    parts = []
    if m.get("total_tokens") is not None:
        parts.append(f"{m['total_tokens']} tok")
    elif m.get("model_ms") is not None:
        parts.append("tokens unknown")
    if m.get("ttft_ms") is not None:
        parts.append(f"ttft {m['ttft_ms']:.1f} ms")
    if m.get("duration_ms") is not None:
        parts.append(f"{m['duration_ms']:.1f} ms")
    return ", ".join(parts)


def _tokens(run_metrics: dict[str, Any]) -> str:
    total = run_metrics.get("total_tokens")
    return "tokens unknown" if total is None else f"{total} tokens"


class EventPrinter:
    """Prints events as they come; text deltas are written inline as they stream."""

    def __init__(self, out: TextIO):
        self.out = out
        self._in_text = False

    def _line(self, text: str) -> None:
        if self._in_text:
            self.out.write("\n")
            self._in_text = False
        self.out.write(text + "\n")
        self.out.flush()

    def __call__(self, event: StepEvent) -> None:
        p, t = event.payload, event.type
        if t is _E.STEP_DELTA:
            if "content" in p:
                if not self._in_text:
                    self.out.write("  assistant> ")
                    self._in_text = True
                self.out.write(p["content"])
                self.out.flush()
            return
        if t is _E.RUN_STARTED:
            run = p["run"]
            extra = f" attempt {run['attempt']} (retry of {run['retry_of'][:8]})" if run.get("retry_of") else ""
            self._line(f"▶ run {event.run_id[:8]} [{run['kind']}]{extra} in session {event.session_id[:8]}")
        elif t is _E.STEP_COMPLETED:
            step = p["step"]
            role, seq = step["role"], step["sequence"]
            if role == "user":
                self._line(f"  #{seq} user> {_short(step['content'])}")
            elif role == "assistant":
                if self._in_text:
                    self._line(f"  #{seq} ({_metrics(step['metrics'])})")
                elif step.get("content"):
                    self._line(f"  #{seq} assistant> {_short(step['content'])} ({_metrics(step['metrics'])})")
                else:
                    calls = ", ".join(c["function"]["name"] for c in step["tool_calls"])
                    self._line(f"  #{seq} assistant calls {calls} ({_metrics(step['metrics'])})")
            else:
                self._line(f"  #{seq} tool {step.get('name')} [{step['status']}]> {_short(step['content'])}")
        elif t is _E.TOOL_CALL_STARTED:
            self._line(f"    ⚙ {p['name']}({_short(p['arguments'], 120)})")
        elif t is _E.TOOL_CALL_COMPLETED:
            self._line(f"    ✓ {p['name']} → {_short(p['content'], 120)} ({p['duration_ms']:.1f} ms)")
        elif t is _E.TOOL_CALL_FAILED:
            self._line(f"    ✗ {p['name']} [{p['error_type']}] {_short(p['error'], 160)}")
        elif t is _E.APPROVAL_REQUESTED:
            self._line(f"    ? approval needed for {p['name']}({_short(p['arguments'], 120)})")
        elif t is _E.APPROVAL_RESOLVED:
            self._line(f"    {'approved' if p['approved'] else 'rejected'}: {p['name']}")
        elif t is _E.METRICS:
            run = p["run"]
            self._line(f"    · turn #{p['sequence']}: {_metrics(p['step'])}; run so far "
                       f"{run['model_calls']} model calls, {run['tool_calls']} tool calls, {_tokens(run)}")
        elif t.is_terminal:
            run = p["run"]
            m = run["metrics"]
            tail = f": {run['error']}" if run.get("error") and t is not _E.RUN_COMPLETED else ""
            self._line(f"■ {run['status']}{tail} — {m['steps']} steps, {m['model_calls']} model calls, "
                       f"{m['tool_calls']} tool calls ({m['tool_errors']} errors), {_tokens(m)}, "
                       f"{m['duration_ms']:.1f} ms")
