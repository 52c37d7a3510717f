"""A run's metrics as a person reads them: ``result.metrics`` shows a small table (HTML) and one line
(text) in a notebook, instead of a dataclass with ``ttft_ms=0.05011500002183311``.

The line is the transcript footer's (``render.metrics_line``); the table spells the same figures out,
one per row. ``RunMetrics`` itself stays plain data (``.to_dict()``, ``.ttft_ms``).
"""

from __future__ import annotations

from html import escape
from typing import Any

from ..core import RunMetrics
from ..models.pricing import format_cost
from ..views import counted, text_html
from .render import metrics_line


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f} ms"


def metrics_rows(m: RunMetrics) -> list[tuple[str, str]]:
    """(figure, value) pairs, in the order the footer says them."""
    tokens = ("unknown (the model reported no usage)" if m.total_tokens is None
              else f"{m.total_tokens} ({m.prompt_tokens} in / {m.completion_tokens} out)")
    rows = [("steps", f"{m.steps} ({counted(m.model_calls, 'model call')})"),
            ("tool calls", f"{m.tool_calls}" + (f" ({m.tool_errors} failed)" if m.tool_errors else "")),
            ("tokens", tokens),
            ("time to first token", _ms(m.ttft_ms)),
            ("model time", _ms(m.model_ms)),
            ("tool time", _ms(m.tool_ms))]
    if m.paused_ms:
        rows.append(("paused", f"{m.paused_ms / 1000:.1f} s"))
    rows += [("total", _ms(m.duration_ms)), ("cost", format_cost(m.cost))]
    if m.reused_calls:
        rows.append(("reused from the record", f"{counted(m.reused_calls, 'call')} ({m.reused_tokens} tokens)"))
    return rows


def metrics_html(m: RunMetrics) -> str:
    body = "".join(f'<tr><th style="text-align:left;font-weight:normal;color:#57606a;padding:0 12px 0 0">'
                   f'{escape(k)}</th><td style="text-align:left">{escape(v)}</td></tr>' for k, v in metrics_rows(m))
    return text_html(f'<table class="agio-run-metrics" style="font-size:12px">{body}</table>')


def metrics_text(m: RunMetrics) -> str:
    return "agio run metrics: " + metrics_line(m.to_dict(), run=True)


def install(shell: Any) -> None:
    """``RunMetrics`` values display as the table (HTML) and the line (text) in this kernel."""
    formatters = shell.display_formatter.formatters
    formatters["text/html"].for_type(RunMetrics, metrics_html)
    formatters["text/plain"].for_type(RunMetrics, lambda m, p, cycle: p.text(metrics_text(m)))
