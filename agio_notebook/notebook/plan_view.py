"""The live DAG of a plan in its cell: one node per task, coloured by state, laid out by Graphviz.

The layout is Graphviz's ``dot`` (through the ``graphviz`` package); without the ``dot`` program the
view falls back to the tasks listed in dependency order. The widget is redrawn when a task changes
state (at most a few times a second); when the plan ends the cell keeps a static bundle
(``application/vnd.agio.plan+json`` with ``text/html`` and ``text/plain``) and no widget. The bundle
carries dot's layout, which the extension draws; its HTML is a plain list (sanitisers strip SVG).
"""

from __future__ import annotations

import threading
import time
from html import escape
from typing import Any

import ipywidgets as widgets

from ..scheduling import PlanHandle
from ..views import graph_layout, text_html
from .live_output import LiveOutput
from .worker import capture_parent, restore_parent

MIME_TYPE = "application/vnd.agio.plan+json"
MIN_INTERVAL_S = 0.2
FILL = {"pending": "#eaeef2", "running": "#ddf4ff", "reflecting": "#fff8c5", "completed": "#dafbe1",
        "failed": "#ffebe9", "cancelled": "#f6f8fa"}


def _digraph(handle: PlanHandle) -> Any:
    import graphviz

    g = graphviz.Digraph(graph_attr={"rankdir": "LR", "bgcolor": "transparent"},
                         node_attr={"shape": "box", "style": "rounded,filled", "fontname": "Helvetica",
                                    "fontsize": "11"})
    text = graphviz.nohtml  # task names and errors may come from a model: never DOT's HTML-like labels
    for name, st in handle.tasks.items():
        label = f"{name}\n{st.status}" + (f" (attempt {st.attempts})" if st.attempts > 1 else "")
        g.node(text(name), label=text(label), fillcolor=FILL.get(st.status, "#ffffff"),
               tooltip=text(st.error or st.status), id=text(f"agio-task-{name}"))
    for a, b in handle.edges():
        g.edge(text(a), text(b))
    return g


def dag_svg(handle: PlanHandle) -> str | None:
    """The plan as an SVG (task name, state and attempts on each node); None when Graphviz is missing."""
    try:
        import graphviz
    except ImportError:
        return None
    try:
        return _digraph(handle).pipe(format="svg", encoding="utf-8")
    except (graphviz.ExecutableNotFound, graphviz.CalledProcessError):
        return None


def dag_layout(handle: PlanHandle) -> dict[str, Any] | None:
    """Where dot puts each task (node names are task names); None when Graphviz is missing."""
    try:
        return dict(graph_layout(_digraph(handle).source))
    except (ImportError, RuntimeError):
        return None


def _list_html(handle: PlanHandle) -> str:
    """The tasks in order, each with its state as a coloured chip and what it waits for."""
    depends = {a: [] for a in handle.tasks}
    for a, b in handle.edges():
        depends.setdefault(b, []).append(a)
    rows = []
    for n, st in handle.tasks.items():
        after = f' <span style="color:#57606a">after {escape(", ".join(depends.get(n) or []))}</span>' \
            if depends.get(n) else ""
        rows.append(f'<li class="agio-task agio-task-{escape(st.status)}" style="margin:2px 0">'
                    f'<span style="background:{FILL.get(st.status, "#ffffff")};border:1px solid #d0d7de;'
                    f'border-radius:4px;padding:0 6px;margin-right:6px">{escape(st.status)}</span><b>{escape(n)}</b>'
                    + (f" (attempt {st.attempts})" if st.attempts > 1 else "") + after + "</li>")
    return f'<ol style="margin:4px 0;padding-left:22px">{"".join(rows)}</ol>'


def plan_html(handle: PlanHandle, drawing: bool = False) -> str:
    """The plan as HTML: with the SVG drawing for the live widget (never sanitised), else a plain list."""
    svg = dag_svg(handle) if drawing else None
    body = svg[svg.index("<svg"):] if svg else _list_html(handle)
    why = (f'<div class="agio-plan-error" style="color:#cf222e">task {escape(handle.failed_task)} failed: '
           f'{escape(handle.error or "")}</div>' if handle.failed_task else "")
    return text_html(f'<div class="agio-plan" style="font-family:sans-serif"><div><b>plan {escape(handle.name)}</b> · '
                     f'{escape(handle.status)}</div>{body}{why}</div>')


def plan_text(handle: PlanHandle) -> str:
    return repr(handle) + "".join(f"\n  {n}: {st.status}" for n, st in handle.tasks.items())


def plan_bundle(handle: PlanHandle) -> dict[str, Any]:
    data = {**handle.to_dict(), "layout": dag_layout(handle)}
    return {MIME_TYPE: data, "text/html": plan_html(handle), "text/plain": plan_text(handle)}


def show(handle: PlanHandle, shell: Any) -> None:
    """Display ``handle``: a live DAG while it runs (saved as a snapshot), then the static bundle."""
    from IPython.display import display

    if handle.done:
        display(plan_bundle(handle), raw=True)
        return
    view = widgets.HTML(plan_html(handle, drawing=True))
    view.add_class("agio-plan-live")
    output = LiveOutput(view)
    parent = capture_parent(shell)
    output.show(plan_bundle(handle))
    lock = threading.Lock()
    last = [0.0]

    def redraw() -> None:  # on the scheduler loop, when a task changes state
        with lock:
            if handle.ended_at is not None:
                restore_parent(shell, parent)
                output.finish(plan_bundle(handle))
                view.close()
                return
            if time.monotonic() - last[0] >= MIN_INTERVAL_S:
                last[0] = time.monotonic()
                view.value = plan_html(handle, drawing=True)
                output.snapshot(lambda: plan_bundle(handle))

    handle.on_change(redraw)
    if handle.ended_at is not None:  # it ended while we were drawing
        redraw()
