"""The live batch monitor in a cell, and the static summary that replaces it when the batch ends.

While the batch runs: a progress bar with ETA, counts by status, throughput, error rate, tokens and
cost, a small latency histogram, the last errors, and a Cancel button. The monitor is redrawn a few
times a second from the batch's figures (never per item, so a 5,000-item batch costs the same).
When the batch ends, the cell's output becomes a MIME bundle (``application/vnd.agio.batch+json``
with ``text/html`` and ``text/plain``), so a saved notebook shows the summary without a kernel or a
widget; a notebook saved while it runs keeps a snapshot of that summary instead of the monitor
(``live_output``). After Cancel every view says so: the cancelled state, counts by status, the rate of
completed items only, the cost known so far. Every string that came from a model or an error is escaped.
"""

from __future__ import annotations

import asyncio
import threading
from html import escape
from typing import Any

import ipywidgets as widgets

from ..core import InvalidOperationError, mask
from ..scheduling import BatchHandle
from ..views import text_html
from .live_output import LiveOutput
from .worker import capture_parent, restore_parent, submit

MIME_TYPE = "application/vnd.agio.batch+json"
REFRESH_S = 0.25
_COLORS = {"completed": "#1a7f37", "failed": "#cf222e", "timed_out": "#bc4c00", "cancelled": "#57606a",
           "running": "#0969da", "queued": "#8c959f"}


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = max(seconds, 0.0)
    if seconds < 60:
        return f"{seconds:.1f}s"
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s" if m < 60 else f"{m // 60}h{m % 60:02d}m"


def histogram(latencies_ms: list[float], bins: int = 12) -> list[dict[str, float]]:
    """Latency bins (start, end, count), equal width between the fastest and the slowest item."""
    if not latencies_ms:
        return []
    lo, hi = min(latencies_ms), max(latencies_ms)
    width = (hi - lo) / bins or 1.0
    counts = [0] * bins
    for v in latencies_ms:
        counts[min(int((v - lo) / width), bins - 1)] += 1
    return [{"start_ms": lo + i * width, "end_ms": lo + (i + 1) * width, "count": c} for i, c in enumerate(counts)]


def histogram_html(bins: list[dict[str, float]]) -> str:
    """The latency histogram as CSS bars (sanitisers strip SVG), each bar's range and count in its title."""
    if not bins:
        return '<span class="agio-batch-hist-empty" style="color:#57606a">no completed item yet</span>'
    top = max(b["count"] for b in bins) or 1
    bars = "".join(
        f'<span class="agio-batch-bin" title="{b["start_ms"]:.0f} to {b["end_ms"]:.0f} ms: {b["count"]} item(s)" '
        f'style="display:inline-block;vertical-align:bottom;width:12px;margin-right:2px;background:#0969da;'
        f'height:{max(1, round(36 * b["count"] / top))}px"></span>'
        for b in bins)
    return (f'<div class="agio-batch-hist" role="img" aria-label="latency histogram of completed items" '
            f'style="display:flex;align-items:flex-end;gap:8px;font-size:11px;color:#57606a">'
            f'<span style="display:inline-block;height:36px;line-height:36px;white-space:nowrap">latency</span>'
            f'<span style="display:inline-block;height:36px;white-space:nowrap">{bars}</span>'
            f'<span class="agio-batch-hist-range" style="white-space:nowrap">from {bins[0]["start_ms"]:.0f} ms '
            f'to {bins[-1]["end_ms"]:.0f} ms</span></div>')


def _cost_so_far(records: list[Any]) -> float | None:
    """Dollars spent by the items that used tokens; unknown when any of them has no price."""
    spent = [r for r in records if r.total_tokens > 0 or r.cost]
    if not spent or any(r.cost is None for r in spent):
        return None
    return float(sum(r.cost for r in spent))


def summary_data(handle: BatchHandle) -> dict[str, Any]:
    """The bundle's JSON: the batch's figures, the histogram instead of every latency.

    ``completed_per_s`` counts completed items only (cancelled ones end fast and say nothing of speed);
    ``cost`` is what the items that ran have cost so far, None (unknown) when one of them has no price.
    """
    records = handle.records()
    m = handle.metrics()
    data = {k: v for k, v in m.items() if k != "latencies_ms"}
    data["histogram"] = histogram(m["latencies_ms"])
    data["last_errors"] = [{"item": i, "error": e} for i, e in m["last_errors"]]
    data["name"] = handle.name
    data["status"] = handle.status
    data["completed_per_s"] = m["completed"] / m["elapsed_s"] if m["elapsed_s"] else 0.0
    data["cost"] = _cost_so_far(records)
    return data


def _cost_label(d: dict[str, Any]) -> str:
    if d.get("cost") is None:
        return "unknown"
    return f"${d['cost']:.4f}" + ("" if d["status"] == "finished" else " so far")


COUNTED = ("completed", "failed", "timed_out", "cancelled", "running", "queued")


def stats_html(d: dict[str, Any]) -> str:
    counts = " · ".join(f'<span class="agio-count-{k}" style="color:{_COLORS[k]}">{d[k]} {k.replace("_", " ")}</span>'
                        for k in COUNTED if d[k] or k in ("completed", "failed", "cancelled"))
    eta = "" if d["status"] != "running" else f" · ETA {_duration(d.get('eta_s'))}"
    avg = "" if d.get("avg_ms") is None else f" · avg {d['avg_ms']:.0f} ms"
    return (f'<div class="agio-batch-counts">{counts}</div>'
            f'<div class="agio-batch-figures" style="font-size:12px;color:#57606a">'
            f'{d["completed_per_s"]:.2f} completed/s · error rate {d["error_rate"]:.0%} · tokens {d["tokens"]:,} · '
            f'cost {_cost_label(d)}{avg} · elapsed {_duration(d["elapsed_s"])}{eta}</div>')


def errors_html(d: dict[str, Any]) -> str:
    if not d["last_errors"]:
        return ""
    items = "".join(f'<li><b>item {e["item"]}</b>: {escape(str(e["error"]))[:300]}</li>' for e in d["last_errors"])
    return f'<div class="agio-batch-errors" style="font-size:12px">last errors<ul style="margin:2px 0">{items}</ul></div>'


def bar_html(d: dict[str, Any]) -> str:
    """One bar, a segment per status: a cancelled batch is mostly grey, never a full green bar."""
    total = d["total"] or 1
    segments = "".join(
        f'<div class="agio-batch-bar agio-batch-bar-{k}" title="{d[k]} {k.replace("_", " ")}" '
        f'style="width:{100.0 * d[k] / total:.1f}%;background:{_COLORS[k]};height:8px"></div>'
        for k in ("completed", "failed", "timed_out", "cancelled") if d[k])
    return (f'<div style="background:#eaeef2;height:8px;border-radius:4px;margin:4px 0;display:flex;'
            f'overflow:hidden">{segments}</div>')


def summary_html(d: dict[str, Any]) -> str:
    return text_html(
        f'<div class="agio-batch" style="font-family:sans-serif;border:1px solid #d0d7de;border-radius:6px;'
        f'padding:6px 10px">'
        f'<div><b>batch {escape(d["name"])}</b> · {escape(d["status"])} · {d["completed"]}/{d["total"]} completed</div>'
        f'{bar_html(d)}{stats_html(d)}<div style="margin-top:4px">{histogram_html(d["histogram"])}</div>'
        f'{errors_html(d)}</div>')


def summary_text(d: dict[str, Any]) -> str:
    lines = [f"batch {d['name']} {d['status']}: {d['completed']}/{d['total']} completed — "
             f"{d['failed']} failed, {d['timed_out']} timed out, {d['cancelled']} cancelled; "
             f"{d['completed_per_s']:.2f} completed/s, error rate {d['error_rate']:.0%}, tokens {d['tokens']}, "
             f"cost {_cost_label(d)}"]
    lines += [f"  item {e['item']}: {e['error']}" for e in d["last_errors"]]
    return "\n".join(lines)


def summary_bundle(handle: BatchHandle, data: dict[str, Any] | None = None) -> dict[str, Any]:
    """The static summary; ``data``: the batch's figures if just read (``summary_data``), else read now."""
    d = mask(summary_data(handle) if data is None else data)  # errors come from providers, which echo keys
    return {MIME_TYPE: d, "text/html": summary_html(d), "text/plain": summary_text(d)}


class BatchMonitor:
    """The widgets of a running batch; ``refresh`` redraws them from the batch's figures."""

    def __init__(self, handle: BatchHandle):
        self.handle = handle
        self.progress = widgets.IntProgress(min=0, max=1, value=0, bar_style="info",
                                            layout=widgets.Layout(width="60%"))
        self.label = widgets.HTML()
        self.stats = widgets.HTML()
        self.hist = widgets.HTML()
        self.errors = widgets.HTML()
        self.cancel_button = widgets.Button(description="Cancel", icon="stop", button_style="warning")
        self.note = widgets.HTML()
        self.cancel_button.on_click(self._on_cancel)
        self.widget = widgets.VBox([widgets.HBox([self.progress, self.label, self.cancel_button]), self.stats,
                                    self.hist, self.errors, self.note])
        self.widget.add_class("agio-batch-monitor")
        self.refreshes = 0
        self.refresh()

    def _on_cancel(self, _: Any) -> None:
        try:
            n = self.handle.cancel()
            self.note.value = f'<span class="agio-batch-note">cancelling: {n} unfinished item(s) stopped</span>'
        except InvalidOperationError as exc:
            self.note.value = f'<span class="agio-batch-note">{escape(str(exc))}</span>'
        self.cancel_button.disabled = True

    def refresh(self) -> dict[str, Any]:
        """Redraw from the batch's figures; the figures drawn."""
        d = summary_data(self.handle)
        with self.widget.hold_sync():
            self.progress.max = max(d["total"], 1)
            self.progress.value = d["done"]
            eta = "" if d["status"] != "running" else f" · ETA {_duration(d.get('eta_s'))}"
            self.label.value = f'<span class="agio-batch-progress">{d["done"]}/{d["total"]}{eta}</span>'
            self.stats.value = stats_html(d)
            self.hist.value = histogram_html(d["histogram"])
            if d["cancelled"] or d["failures"]:
                self.progress.bar_style = "warning"
            self.errors.value = errors_html(d)
        self.refreshes += 1
        return d

    def close(self) -> None:
        for w in (self.progress, self.label, self.stats, self.hist, self.errors, self.cancel_button, self.note):
            w.close()
        for box in self.widget.children:
            box.close()
        self.widget.close()


_shown: dict[str, str | None] = {}  # batch name -> the cell that shows its monitor


def _msg_id(parent: Any) -> str | None:
    return (parent or {}).get("header", {}).get("msg_id") if isinstance(parent, dict) else None


def display_handle(handle: BatchHandle, shell: Any) -> None:
    """IPython's display of a batch handle: its monitor, unless this very cell already shows it."""
    if _shown.get(handle.name) is not None and _shown.get(handle.name) == _msg_id(capture_parent(shell)):
        return
    show(handle, shell)


def show(handle: BatchHandle, shell: Any) -> BatchMonitor | None:
    """Display ``handle`` in the current cell: live while it runs (saved as a snapshot), then its static summary."""
    from IPython.display import display

    if handle.done:
        display(summary_bundle(handle), raw=True)
        return None
    monitor = BatchMonitor(handle)
    output = LiveOutput(monitor.widget)
    parent = capture_parent(shell)
    output.show(summary_bundle(handle))
    _shown[handle.name] = _msg_id(parent)

    finished = threading.Event()

    def finish() -> None:  # on the scheduler loop, before the batch's waiters (a foreground cell) wake
        finished.set()
        restore_parent(shell, parent)
        output.finish(summary_bundle(handle))
        monitor.close()

    async def tick() -> None:
        restore_parent(shell, parent)
        while not finished.is_set():
            figures = monitor.refresh()
            output.snapshot(lambda: summary_bundle(handle, figures))  # the figures just drawn, not read again
            await asyncio.sleep(REFRESH_S)

    submit(tick())
    handle.on_finish(finish)
    return monitor
