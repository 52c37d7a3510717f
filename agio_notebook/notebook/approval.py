"""The approval card: a tool call waiting for a person's decision, in the running cell's output.

Approve or reject; the arguments are editable, checked against the tool's schema before the call runs
(a bad edit is one line on the card, which stays open).

Its arguments editor is renewed after each edit it sends. While a cell runs, the browser sends a
widget only one state update and holds the rest until the kernel reports that message idle, which a
kernel busy with an awaiting cell never does: a second edit in the same editor would never arrive,
and the first would run. A fresh editor (a new widget) sends its own. The editor sends when it loses
focus (a click on Approve included), not per key. The step debugger's pause view does the same
(``pause_view.PauseView._renew``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
from html import escape
from typing import Any

import ipywidgets as widgets

from ..execution import ApprovalDecision, ApprovalRequest
from ..execution.approval import check_arguments
from ..tools import Tool
from .live_view import close_tree

_ERROR = "<span style='color:#cf222e'>{}</span>"


class ApprovalCard:
    """One request's card; ``decided`` gets the decision (from the kernel's comm handling thread)."""

    def __init__(self, request: ApprovalRequest, tool: Tool | None):
        self.request = request
        self.tool = tool
        self.decided: concurrent.futures.Future[ApprovalDecision] = concurrent.futures.Future()
        self.text = json.dumps(request.arguments, indent=2)  # what the editor holds now
        self.editor = self._editor()
        approve = widgets.Button(description="Approve", button_style="success")
        reject = widgets.Button(description="Reject", button_style="danger")
        approve.on_click(lambda _: self.approve())
        reject.on_click(lambda _: self.reject())
        self.note = widgets.HTML()
        title = widgets.HTML(f"<b>Approve tool call</b> <code>{escape(request.name)}</code>?")
        self.widget = widgets.VBox([title, self.editor, widgets.HBox([approve, reject]), self.note],
                                   _dom_classes=("agio-approval",))

    def _editor(self) -> widgets.Textarea:
        editor = widgets.Textarea(value=self.text, continuous_update=False, _dom_classes=("agio-approval-arguments",),
                                  layout=widgets.Layout(width="100%", height="80px"))
        editor.observe(self._edited, "value")
        return editor

    def _edited(self, change: dict[str, Any]) -> None:
        """Keep the new text, and put a fresh editor holding it in place of the one that sent it."""
        self.text = change["new"]
        if self.decided.done():
            return
        old, self.editor = self.editor, self._editor()
        self.widget.children = tuple(self.editor if c is old else c for c in self.widget.children)
        old.close()

    def approve(self) -> None:
        try:
            edited = json.loads(self.text)
        except ValueError as exc:
            self.note.value = _ERROR.format(escape(f"arguments are not valid JSON: {exc}"))
            return
        problem = check_arguments(self.tool, edited)
        if problem is not None:  # the card stays open: fix the arguments, or reject
            self.note.value = _ERROR.format(escape(problem))
            return
        if not self.decided.done():
            self.decided.set_result(ApprovalDecision(True, edited if edited != self.request.arguments else None))

    def reject(self) -> None:
        if not self.decided.done():
            self.decided.set_result(ApprovalDecision(False, reason="rejected by the user"))


async def ask(handle: Any, live: Any, request: ApprovalRequest) -> ApprovalDecision:
    """The run's approver in a cell: a card under the live view until a person decides."""
    card = ApprovalCard(request, handle.agent.registry.get(request.name) if handle.agent else None)
    live.approvals.children = (*live.approvals.children, card.widget)
    handle.approval_pending.set()
    try:
        return await asyncio.wrap_future(card.decided)
    finally:
        handle.approval_pending.clear()
        live.approvals.children = tuple(c for c in live.approvals.children if c is not card.widget)
        close_tree(card.widget)
