"""The live batch monitor in a cell, and the static summary that replaces it when the batch ends.

While the batch runs: a progress bar with ETA, counts by status, throughput, error rate, tokens and
cost, a small latency histogram, the last errors, and a Cancel button. The monitor is redrawn a few
times a second from the batch's figures (never per item, so a 5,000-item batch costs the same).
When the batch ends, the cell's output becomes a MIME bundle (``application/vnd.agio.batch+json``
with ``text/html`` and ``text/plain``), so a saved notebook shows the summary without a kernel or a
widget. Every string that came from a model or an error is escaped.
"""

from __future__ import annotations

import asyncio
import threading
from html import escape
from typing import Any

import ipywidgets as widgets

from ..core import InvalidOperationError, new_id
from ..scheduling import BatchHandle
from .transcript import _mask_secrets
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


def _histogram_svg(bins: list[dict[str, float]]) -> str:
    if not bins:
        return '<span style="color:#57606a">no completed item yet</span>'
    top = max(b["count"] for b in bins) or 1
    w, h = 12, 36
    bars = "".join(
        f'<rect x="{i * (w + 2)}" y="{h - max(1, round(h * b["count"] / top))}" width="{w}" '
        f'height="{max(1, round(h * b["count"] / top))}" fill="#0969da">'
        f'<title>{b["start_ms"]:.0f}–{b["end_ms"]:.0f} ms: {b["count"]}</title></rect>'
        for i, b in enumerate(bins))
    return (f'<svg class="agio-batch-hist" width="{len(bins) * (w + 2)}" height="{h}" role="img" '
            f'aria-label="latency histogram">{bars}</svg>'
            f'<span style="font-size:11px;color:#57606a;margin-left:6px">{bins[0]["start_ms"]:.0f}–'
            f'{bins[-1]["end_ms"]:.0f} ms</span>')


def summary_data(handle: BatchHandle) -> dict[str, Any]:
    """The bundle's JSON: the batch's figures, the histogram instead of every latency."""
    m = handle.metrics()
    data = {k: v for k, v in m.items() if k != "latencies_ms"}
    data["histogram"] = histogram(m["latencies_ms"])
    data["last_errors"] = [{"item": i, "error": e} for i, e in m["last_errors"]]
    data["name"] = handle.name
    data["status"] = handle.status
    return data


def stats_html(d: dict[str, Any]) -> str:
    counts = " · ".join(f'<span class="agio-count-{k}" style="color:{_COLORS[k]}">{d[k]} {k.replace("_", " ")}</span>'
                        for k in ("completed", "running", "queued", "failed", "timed_out", "cancelled"))
    cost = "unknown" if d.get("cost") is None else f"${d['cost']:.4f}"
    eta = "" if d["status"] != "running" else f" · ETA {_duration(d.get('eta_s'))}"
    avg = "" if d.get("avg_ms") is None else f" · avg {d['avg_ms']:.0f} ms"
    return (f'<div class="agio-batch-counts">{counts}</div>'
            f'<div class="agio-batch-figures" style="font-size:12px;color:#57606a">'
            f'{d["throughput_per_s"]:.2f} items/s · error rate {d["error_rate"]:.0%} · tokens {d["tokens"]:,} · '
            f'cost {cost}{avg} · elapsed {_duration(d["elapsed_s"])}{eta}</div>')


def errors_html(d: dict[str, Any]) -> str:
    if not d["last_errors"]:
        return ""
    items = "".join(f'<li><b>item {e["item"]}</b>: {escape(str(e["error"]))[:300]}</li>' for e in d["last_errors"])
    return f'<div class="agio-batch-errors" style="font-size:12px">last errors<ul style="margin:2px 0">{items}</ul></div>'


def summary_html(d: dict[str, Any]) -> str:
    pct = 100.0 * d["done"] / d["total"] if d["total"] else 100.0
    return (f'<div class="agio-batch" style="font-family:sans-serif;border:1px solid #d0d7de;border-radius:6px;'
            f'padding:6px 10px">'
            f'<div><b>batch {escape(d["name"])}</b> · {escape(d["status"])} · {d["done"]}/{d["total"]} done</div>'
            f'<div style="background:#eaeef2;height:8px;border-radius:4px;margin:4px 0">'
            f'<div class="agio-batch-bar" style="width:{pct:.1f}%;background:#1a7f37;height:8px;border-radius:4px">'
            f'</div></div>{stats_html(d)}<div style="margin-top:4px">{_histogram_svg(d["histogram"])}</div>'
            f'{errors_html(d)}</div>')


def summary_text(d: dict[str, Any]) -> str:
    cost = "unknown" if d.get("cost") is None else f"${d['cost']:.4f}"
    lines = [f"batch {d['name']} {d['status']}: {d['done']}/{d['total']} done — {d['completed']} completed, "
             f"{d['failed']} failed, {d['timed_out']} timed out, {d['cancelled']} cancelled; "
             f"{d['throughput_per_s']:.2f} items/s, error rate {d['error_rate']:.0%}, tokens {d['tokens']}, cost {cost}"]
    lines += [f"  item {e['item']}: {e['error']}" for e in d["last_errors"]]
    return "\n".join(lines)


def summary_bundle(handle: BatchHandle) -> dict[str, Any]:
    d = _mask_secrets(summary_data(handle))  # errors come from providers, which echo keys
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

    def refresh(self) -> None:
        d = summary_data(self.handle)
        with self.widget.hold_sync():
            self.progress.max = max(d["total"], 1)
            self.progress.value = d["done"]
            eta = "" if d["status"] != "running" else f" · ETA {_duration(d.get('eta_s'))}"
            self.label.value = f'<span class="agio-batch-progress">{d["done"]}/{d["total"]}{eta}</span>'
            self.stats.value = stats_html(d)
            self.hist.value = _histogram_svg(d["histogram"])
            self.errors.value = errors_html(d)
        self.refreshes += 1

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
    """Display ``handle`` in the current cell: live while it runs, then its static summary."""
    from IPython.display import display

    if handle.done:
        display(summary_bundle(handle), raw=True)
        return None
    monitor = BatchMonitor(handle)
    display_id = new_id()
    parent = capture_parent(shell)
    display(monitor.widget, display_id=display_id)
    _shown[handle.name] = _msg_id(parent)

    finished = threading.Event()

    def finish() -> None:  # on the scheduler loop, before the batch's waiters (a foreground cell) wake
        from IPython.display import update_display

        finished.set()
        restore_parent(shell, parent)
        update_display(summary_bundle(handle), display_id=display_id, raw=True)
        monitor.close()

    async def tick() -> None:
        restore_parent(shell, parent)
        while not finished.is_set():
            monitor.refresh()
            await asyncio.sleep(REFRESH_S)

    submit(tick())
    handle.on_finish(finish)
    return monitor
