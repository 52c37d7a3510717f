"""The pause view: a step-mode run waiting in its cell, with the request laid out, editors and buttons.

Buttons (and keys, handled by the JupyterLab extension while the view has focus): Continue (c),
Step (s), Edit (e: apply the changed editors), Skip (k: a tool call answered by hand) and Abort (a).
The cell awaits its run (see docs/notebook.md), so a click is heard at once. A bad edit or a second
click shows one line and changes nothing; the view closes once its pause is decided or the run ends.
In JupyterLab with the agio extension the view is one widget model (``pause_widget``); elsewhere it
is made of standard ipywidgets.
"""

from __future__ import annotations

import json
import time
from html import escape
from typing import Any, Awaitable, Callable

import ipywidgets as widgets
from ipywidgets.widgets import widget_string

from ..execution.pauses import DebugError, Pause, PauseKind
from . import frontend
from .live_view import close_tree
from .pause_widget import PauseWidget
from .shared_widgets import button_style, html_style, layout, shared

_SMALL = "font-size:11px;color:#57606a"
_MONO = "font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px"
KEYS = "keys: c continue · s step · e apply edits · k skip · a abort"
_TEXT_LIMIT = 4000


def _clip(text: str) -> str:
    return text if len(text) <= _TEXT_LIMIT else text[:_TEXT_LIMIT] + f"… [{len(text)} characters]"


def request_html(pause: Pause) -> str:
    """The request of a model call, readably: each message with its role and tokens; tools; settings."""
    request = pause.request or {}
    rows = "".join(
        f'<tr class="agio-pause-message"><td style="{_SMALL};vertical-align:top">{i}</td>'
        f'<td style="{_SMALL};vertical-align:top"><b>{escape(str(m.get("role")))}</b></td>'
        f'<td style="{_SMALL};vertical-align:top;text-align:right">{escape(str(t))}</td>'
        f'<td><pre style="{_MONO};margin:0;white-space:pre-wrap">{escape(_clip(_message_text(m)))}</pre></td></tr>'
        for i, (m, t) in enumerate(zip(request.get("messages") or (), pause.tokens)))
    estimated = any(t.estimated for t in pause.tokens)
    tools = ", ".join(
        f'<code title="{escape(json.dumps(t["function"].get("parameters") or {}))}">'
        f'{escape(t["function"]["name"])}</code>' for t in request.get("tools") or ())
    return (f'<table class="agio-pause-request" style="border-collapse:collapse">'
            f'<tr><th style="{_SMALL}">#</th><th style="{_SMALL}">role</th><th style="{_SMALL}">tokens'
            f'{" (estimated)" if estimated else ""}</th><th style="{_SMALL}">text</th></tr>{rows}</table>'
            f'<div style="{_SMALL}">model <code>{escape(str(request.get("model")))}</code> · tools: {tools or "none"}'
            f' · settings <code>{escape(json.dumps(request.get("settings") or {}))}</code></div>')


def _message_text(message: dict[str, Any]) -> str:
    from ..models.tokens import message_text

    return message_text(message)


def details_html(pause: Pause) -> str:
    if pause.kind is PauseKind.MODEL:
        return request_html(pause)
    if pause.kind is PauseKind.REPLY:
        reply = pause.reply or {}
        calls = "".join(f'<div><code>{escape(c["function"]["name"])}({escape(c["function"]["arguments"])})</code></div>'
                        for c in reply.get("tool_calls") or ())
        return (f'<pre style="{_MONO};margin:0;white-space:pre-wrap">{escape(_clip(reply.get("content") or ""))}</pre>'
                f'{calls}')
    if pause.kind is PauseKind.TOOL:
        schema = pause.tool.parameters if pause.tool is not None else {}
        return (f'<div><code>{escape(pause.name or "")}</code> with <code>{escape(pause.tool_call["arguments"])}'
                f'</code></div><div style="{_SMALL}">schema <code>{escape(json.dumps(schema))}</code></div>')
    return (f'<div style="{_SMALL}">{escape(pause.name or "")} · {escape(pause.status or "")}</div>'
            f'<pre style="{_MONO};margin:0;white-space:pre-wrap">{escape(_clip(pause.result or ""))}</pre>')


_SHARED_KINDS: dict[str, Callable[[], widgets.Widget]] = {
    "auto": lambda: layout(width="auto"),
    "full": lambda: layout(width="100%"),
    "frame": lambda: layout(border="2px solid #d4a72c", padding="4px 8px", margin="4px 0"),
    "row": layout,
    "button": button_style,
    "html": html_style,
    "editor": lambda: shared("style:editor", lambda: widget_string.TextStyle(description_width="90px")),
}


def _shared(kind: str) -> Any:
    return _SHARED_KINDS[kind]()


def warm_up() -> None:
    """Make the shared layouts and styles of both pause views (when agio loads, and again as a step-mode
    run starts, remaking any closed since), so the browser has them long before the first pause.

    Made as the run starts, they were three models the browser built just before the first pause,
    some 15 ms; which view a pause uses is not known yet then (the extension's answer may be on its way)."""
    for kind in _SHARED_KINDS:
        _shared(kind)


_EDITORS: dict[PauseKind, tuple[tuple[str, str, int], ...]] = {
    PauseKind.MODEL: (("messages", "messages JSON", 8), ("system", "system", 2), ("settings", "settings JSON", 1)),
    PauseKind.REPLY: (("reply", "reply JSON", 5),),
    PauseKind.TOOL: (("arguments", "arguments JSON", 2), ("skip", "skip result", 2)),
    PauseKind.RESULT: (("result", "result", 4),),
}
# (name, style, icon, label): the name is what a click sends and the class (agio-pause-edit); the label is what
# the button says. Edit applies what was changed in the editors and stays paused, so it says so.
_BUTTONS = (("Continue", "success", "play", "Continue"), ("Step", "info", "step-forward", "Step"),
            ("Edit", "", "check", "Apply edits"), ("Skip", "warning", "share", "Skip"),
            ("Abort", "danger", "stop", "Abort"))


def _proposed(pause: Pause) -> dict[str, str]:
    """Each editable part's text, as it will be sent unless edited."""
    if pause.kind is PauseKind.MODEL:
        messages = pause.messages
        system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
        return {"messages": json.dumps(messages, indent=1, ensure_ascii=False), "system": system or "",
                "settings": json.dumps((pause.request or {}).get("settings") or {})}
    if pause.kind is PauseKind.REPLY:
        return {"reply": json.dumps(pause.reply, indent=1, ensure_ascii=False)}
    if pause.kind is PauseKind.TOOL:
        arguments = pause.arguments if pause.arguments is not None else pause.tool_call["arguments"]
        return {"arguments": json.dumps(arguments), "skip": ""}
    return {"result": pause.result or ""}


def _editor(key: str, label: str, value: str, rows: int) -> widgets.Textarea:
    # sent when the editor loses focus (not per key): see PauseView._renew for why
    return widgets.Textarea(value=value, description=label, rows=rows, continuous_update=False,
                            layout=_shared("full"), style=_shared("editor"),
                            _dom_classes=("agio-pause-editor", f"agio-pause-edit-{key}"))


class PauseView:
    """One pause in a cell; ``note`` is shared by the run's pauses so a late click's line stays.

    Where the agio JupyterLab extension answered the kernel's hello (``frontend``), the view is one
    widget model (``PauseWidget``) and a click brings the editors' texts with it; elsewhere it is made
    of standard ipywidgets, and each editor sends its text when it loses focus.
    """

    def __init__(self, pause: Pause, note: Any, on_closed: Callable[[PauseView], None],
                 *, one_model: bool | None = None, paused_at: float | None = None):
        self.pause = pause
        self.note = note
        self._on_closed = on_closed
        self._initial = _proposed(pause)
        self.texts = dict(self._initial)  # what the editors hold now
        self._buttons = [b for b in _BUTTONS if b[0] != "Skip" or pause.kind is PauseKind.TOOL]
        # one HTML for everything read-only; a browser can tell when its title was first painted. The
        # pause sign is the buttons' icon font: a character from a fallback font (⏸) costs the browser
        # a font search the first time, some 20 ms before the view can be painted
        # and when it paused and when this view was made (later, if it waited for the extension's
        # answer), so a browser test can tell the kernel's part of the wait from the page's
        made_at = time.time()
        paused_at = made_at if paused_at is None else paused_at
        self.html = (f'<div class="agio-pause-title" elementtiming="agio-pause" '
                     f'data-agio-paused-at="{paused_at * 1000:.1f}" data-agio-made-at="{made_at * 1000:.1f}">'
                     f'<b><i class="fa fa-pause"></i> Paused</b> {escape(pause.describe())} <span style="{_SMALL}">· {KEYS}</span></div>'
                     f'{details_html(pause)}')
        self.editors: dict[str, widgets.Textarea] = {}
        self.buttons: dict[str, widgets.Button] = {}
        # clicks and edits arrive on the kernel's comm thread, maybe before the view is assigned here
        self.widget: widgets.DOMWidget | None = None
        if one_model is None:
            one_model = frontend.has_widget("AgioPauseModel")
        self.widget = self._one_model() if one_model else self._standard()
        pause._decided.add_done_callback(lambda _: self.close())

    def _one_model(self) -> PauseWidget:
        return PauseWidget(self._message, kind=self.pause.kind.value, html=self.html, layout=_shared("row"),
                           editors=self._editor_state(), buttons=[list(b) for b in self._buttons])

    def _editor_state(self) -> list[dict[str, Any]]:
        return [{"key": k, "label": label, "value": self.texts[k], "rows": rows}
                for k, label, rows in _EDITORS[self.pause.kind]]

    def _message(self, content: Any) -> None:
        """A click from the one-model view: its button, and the editors' texts at that moment."""
        if not isinstance(content, dict) or content.get("event") != "click":
            return
        name = content.get("name")
        if not any(name == b[0] for b in self._buttons):
            return
        texts = content.get("texts")
        if isinstance(texts, dict):
            self.texts.update({k: v for k, v in texts.items() if k in self.texts and isinstance(v, str)})
        self.click(name)

    def _standard(self) -> widgets.VBox:
        for key, label, rows in _EDITORS[self.pause.kind]:
            self.editors[key] = self._observed(_editor(key, label, self.texts[key], rows), key)
        for name, style, icon, label in self._buttons:
            button = widgets.Button(description=label, button_style=style, icon=icon, layout=_shared("auto"),
                                    style=_shared("button"), _dom_classes=(f"agio-pause-{name.lower()}",))
            button.on_click(lambda _, n=name: self.click(n))
            self.buttons[name] = button
        self._head = [widgets.HTML(self.html, layout=_shared("row"), style=_shared("html"))]
        self._tail = [widgets.HBox(list(self.buttons.values()), layout=_shared("row"))]
        return widgets.VBox(self._children(), layout=_shared("frame"),
                            _dom_classes=("agio-pause", f"agio-pause-{self.pause.kind.value}"))

    def _observed(self, editor: widgets.Textarea, key: str) -> widgets.Textarea:
        editor.observe(lambda change: self._renew(key, change["new"]), "value")
        return editor

    def _children(self) -> list[widgets.Widget]:
        return [*self._head, *self.editors.values(), *self._tail]

    def _renew(self, key: str, text: str) -> None:
        """Keep the new text, and put a fresh editor holding it in place of the one that sent it.

        While a cell runs, the browser sends a widget only one state update and buffers the rest until
        the kernel reports that message idle, which a kernel busy with the awaiting cell never does: a
        second edit in the same editor would never arrive. A fresh editor (a new widget) sends its own.
        """
        self.texts[key] = text
        old = self.editors[key]
        if self.widget is None or self.pause.decided or self.pause.ended:
            return
        self.editors[key] = self._observed(_editor(key, old.description, text, old.rows or 4), key)
        self.widget.children = self._children()
        old.close()

    def changes(self) -> dict[str, Any]:
        """The editors whose text differs from what the pause proposed."""
        return {k: t for k, t in self.texts.items() if k != "skip" and t != self._initial[k]}

    def click(self, name: str) -> None:
        """What a button (or its key) does; a problem is one line in the note, and nothing changes."""
        pause = self.pause
        try:
            changes = self.changes()
            if changes:
                pause.edit(**changes)
                self._initial.update(changes)
                if isinstance(self.widget, PauseWidget):
                    # a view drawn from now on (a reload, a second tab) starts from the edited text
                    self.widget.editors = self._editor_state()
            if name == "Edit":
                self._say(f"edited: {', '.join(sorted(pause.edits)) or 'nothing changed'} — Continue or Step to "
                          "go on with the edits", ok=True)
            elif name == "Continue":
                pause.cont()
            elif name == "Step":
                pause.step()
            elif name == "Skip":
                pause.skip(self.texts["skip"])
            elif name == "Abort":
                pause.abort()
        except DebugError as exc:
            self._say(str(exc), ok=False)

    def _say(self, text: str, ok: bool) -> None:
        color = "#1a7f37" if ok else "#cf222e"
        self.note.value = f'<span class="agio-pause-note" style="font-size:12px;color:{color}">{escape(text)}</span>'

    def close(self) -> None:
        self._on_closed(self)  # first, so the view is gone with the first message the browser gets
        close_tree(self.widget)


class PauseNote:
    """The run's one line under its pause views (a bad edit, a late click), shared by its pauses so
    the line stays when a view closes. Its widget is made when there is first something to say: a
    first pause then costs the browser one widget, not two."""

    def __init__(self, box: widgets.Box):
        self._box = box
        self.widget: widgets.HTML | None = None

    @property
    def value(self) -> str:
        return self.widget.value if self.widget is not None else ""

    @value.setter
    def value(self, text: str) -> None:
        if self.widget is not None:
            self.widget.value = text
        elif text:
            self.widget = widgets.HTML(text, layout=_shared("row"), style=_shared("html"))
            self._box.children = (*self._box.children, self.widget)


def show_pause(handle: Any, live: Any, pause: Pause) -> Awaitable[None] | None:
    """The debugger's handler in a cell: show ``pause`` under the live view (where approval cards go).

    Right after agio loaded, the extension's answer may still be on its way (``frontend.answer``):
    then the view is made once it came, or once it can no longer come.
    """
    paused_at = time.time()
    if frontend.answer_may_come():
        async def when_answered() -> None:
            await frontend.answer()
            _show(handle, live, pause, paused_at)

        return when_answered()
    _show(handle, live, pause, paused_at)
    return None


def _show(handle: Any, live: Any, pause: Pause, paused_at: float) -> None:
    if pause.decided or pause.ended:  # decided while the answer was awaited
        return
    box = live.approvals
    note = handle.pause_note
    if note is None:
        note = handle.pause_note = PauseNote(box)
    note.value = ""
    handle.pause_view = None

    def closed(view: PauseView) -> None:
        box.children = tuple(c for c in box.children if c is not view.widget)
        if handle.pause_view is view:
            handle.pause_view = None

    view = PauseView(pause, note, closed, paused_at=paused_at)
    handle.pause_view = view
    if not pause.decided:
        box.children = (*box.children, view.widget)
