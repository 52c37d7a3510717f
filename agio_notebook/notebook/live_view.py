"""LiveView: the run as ipywidgets while it streams, built from the event stream only.

Updates are coalesced: events only mark the view dirty, and the widgets are written at most
``max_rate`` times a second (plus once at the end). Streaming text goes into fixed-size segments, so
an update resends at most one segment (~2 kB), never the whole growing answer: bytes on the wire stay
linear in the answer's length. All text is escaped before it becomes HTML.
"""

from __future__ import annotations

import time
from html import escape
from typing import Any, Callable

import ipywidgets as widgets

from ..core import StepEvent, StepEventType, mask
from .shared_widgets import button_style, html, html_style, layout
from .render import (ROLE_COLORS, card_html, footer_html, header_html, memory_card_html, metrics_line, role_color,
                     step_label)
from .view_model import RunView, StepView

SEGMENT_CHARS = 2000
_E = StepEventType


def _step_layout(role: str) -> widgets.Layout:
    return layout(border_left=f"3px solid {role_color(role)}", padding="2px 8px", margin="3px 0")


def _run_layout() -> widgets.Layout:
    return layout(border="1px solid #d0d7de", padding="4px 10px")


def _flat_layout() -> widgets.Layout:
    return layout(margin="0")


def _cards_layout() -> widgets.Layout:
    return layout(margin="0 0 0 12px")


def _auto_layout() -> widgets.Layout:
    return layout(width="auto")


def warm_up() -> None:
    """Make the layouts and styles runs share when agio loads, so a notebook's first run sends the
    browser only its own widgets: the browser builds widgets one after another, and a first step-mode
    pause waits behind every one sent before it."""
    for make in (layout, html_style, button_style, _run_layout, _auto_layout, _flat_layout, _cards_layout):
        make()
    for role in ROLE_COLORS:
        _step_layout(role)


class _StepBlock:
    """Widgets of one step: a label, text segments, tool cards."""

    def __init__(self, step: StepView, counter: list[int]):
        self.step = step
        self.counter = counter
        self.label = html()
        self.segments: list[widgets.HTML] = []
        self.raw: list[str] = []
        self.flushed_chars = 0
        self.cards: dict[str, widgets.HTML] = {}
        self.card_state: dict[str, tuple] = {}
        self.text_box = widgets.VBox(layout=_flat_layout())
        self.card_box = widgets.VBox(layout=_cards_layout())
        self.box = widgets.VBox([self.label, self.text_box, self.card_box],
                                layout=_step_layout(step.role))
        self.box.add_class("agio-step")
        self.box.add_class(f"agio-step-{step.role}")

    def sync(self) -> None:
        step = self.step
        counter = self.counter
        tip = metrics_line(step.metrics) if step.role == "assistant" else ""
        _write(self.label, f'<span style="font-size:11px;color:#57606a">{step_label(step, tip)}</span>', counter)
        text = step.text
        if len(text) < self.flushed_chars:  # the completed step replaced the streamed text
            self.segments.clear()
            self.raw.clear()
            self.text_box.children = ()
            self.flushed_chars = 0
        pos = self.flushed_chars
        while pos < len(text):
            if not self.raw or len(self.raw[-1]) >= SEGMENT_CHARS:
                seg = html(layout=_flat_layout())
                seg.add_class("agio-text")
                self.segments.append(seg)
                self.raw.append("")
                self.text_box.children = (*self.text_box.children, seg)
                self.counter[0] += 1
            piece = text[pos:pos + SEGMENT_CHARS - len(self.raw[-1])]
            self.raw[-1] += piece
            pos += len(piece)
            _write(self.segments[-1], f'<span style="white-space:pre-wrap">{escape(self.raw[-1])}</span>', counter)
        self.flushed_chars = pos
        if step.memory is not None and "memory" not in self.cards:
            self.cards["memory"] = html(memory_card_html(step.memory))
            self.card_box.children = (*self.card_box.children, self.cards["memory"])
            self.counter[0] += 1
        for card in step.tool_cards:
            state = (card.status, card.result, card.error, card.arguments, len(card.displays), card.diff,
                     card.changes)
            if self.card_state.get(card.tool_call_id) == state:
                continue
            self.card_state[card.tool_call_id] = state
            widget = self.cards.get(card.tool_call_id)
            if widget is None:
                widget = self.cards[card.tool_call_id] = html()
                self.card_box.children = (*self.card_box.children, widget)
            _write(widget, card_html(card).replace("<details ", "<details open ", 1)
                   if card.status in ("running", "awaiting_approval") else card_html(card), counter)


class LiveView:
    """Feed it events; it redraws at most ``max_rate`` times a second. ``updates`` counts widget writes."""

    def __init__(self, *, max_rate: float = 20.0, clock: Callable[[], float] = time.monotonic,
                 on_stop: Callable[[], None] | None = None, stop_hint: str | None = None):
        self.view = RunView()
        self.min_interval = 1.0 / max_rate
        self.clock = clock
        self.counter = [0]
        self.flushes = 0
        self._last_flush = float("-inf")
        self._dirty = False
        self.header = html()
        self.footer = html()
        self.steps_box = widgets.VBox(layout=layout())
        self._blocks: dict[int, _StepBlock] = {}
        self.approvals = widgets.VBox(layout=layout())  # approval cards appear here while a tool waits for a decision
        children: list[widgets.Widget] = [self.header, self.steps_box, self.footer, self.approvals]
        if on_stop is not None:
            stop = widgets.Button(description="Stop", icon="stop", button_style="warning",
                                  layout=_auto_layout(), style=button_style())
            stop.on_click(lambda _: self._stop(stop, on_stop))
            children.append(stop)
            if stop_hint:  # ipykernel 6: the click waits behind the cell; the interrupt does not
                stop.tooltip = stop_hint
                hint = html(f'<span class="agio-stop-hint" style="font-size:11px;color:#57606a">'
                                    f'{escape(stop_hint)}</span>')
                children.append(hint)
        self.widget = widgets.VBox(children, layout=_run_layout())
        self.widget.add_class("agio-run")

    @staticmethod
    def _stop(button: widgets.Button, on_stop: Callable[[], None]) -> None:
        button.disabled, button.description = True, "Stopping…"
        on_stop()

    @property
    def updates(self) -> int:
        return self.counter[0]

    def feed(self, event: StepEvent | dict[str, Any]) -> bool:
        """Apply an event; flush if the interval has passed or the run ended. Returns whether it flushed.

        What the view shows is masked like every renderer (a tool may echo a key of this process)."""
        self.view.apply(mask(event.to_dict() if isinstance(event, StepEvent) else event))
        self._dirty = True
        kind = event.type if isinstance(event, StepEvent) else _E(event["type"])
        if kind.is_terminal or self.clock() - self._last_flush >= self.min_interval:
            self.flush()
            return True
        return False

    def flush_if_due(self) -> None:
        """For a timer: write pending changes once the interval has passed (streams that pause)."""
        if self._dirty and self.clock() - self._last_flush >= self.min_interval:
            self.flush()

    def flush(self) -> None:
        if not self._dirty:
            return
        self._dirty = False
        self._last_flush = self.clock()
        self.flushes += 1
        view = self.view
        with self.widget.hold_sync():
            _write(self.header, header_html(view), self.counter)
            new_blocks = False
            for step in view.conversation():
                block = self._blocks.get(step.sequence)
                if block is None or block.step is not step:
                    block = self._blocks[step.sequence] = _StepBlock(step, self.counter)
                    new_blocks = True
                block.sync()
            if new_blocks:
                self.steps_box.children = tuple(self._blocks[s.sequence].box for s in view.conversation())
                self.counter[0] += 1
            _write(self.footer, footer_html(view), self.counter)

    def close(self) -> None:
        close_tree(self.widget)


def _write(widget: widgets.HTML, value: str, counter: list[int]) -> None:
    """Set a widget's HTML only when it changed (each write is a comm message), counting writes."""
    if widget.value != value:
        widget.value = value
        counter[0] += 1


def close_tree(widget: widgets.Widget) -> None:
    """Close a widget and its descendants (their comms); unlike ``Widget.close_all`` it spares the rest."""
    for child in getattr(widget, "children", ()):
        close_tree(child)
    widget.close()
