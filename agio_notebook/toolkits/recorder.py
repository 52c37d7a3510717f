"""ContextGraphRecorder: every action an agent takes becomes a record linked to the step that asked.

The seed's context graph: a node per action (start, then completion or failure), with its timing,
input and output, hanging off the tool call and the assistant step that requested it.  Inside a run
the records go onto the current tool call (``tools.context``): the engine stores them with the tool
step and announces them as ``action_started`` / ``action_completed`` / ``action_failed`` events, and
``agio_notebook.actions()`` reads them back as a DataFrame.  Outside a run they stay in ``records``.
"""

from __future__ import annotations

import time
from typing import Any

from ..core import new_id, now, scrub
from ..tools.context import ToolCallContext, get_call


class ContextGraphRecorder:
    """Records actions; ``records`` keeps those made outside any run (e.g. a tool called by hand)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self._open: dict[str, tuple[dict[str, Any], float]] = {}

    def record_action_start(self, session_id: str | None, action_type: str, action_data: dict[str, Any],
                            name: str | None = None) -> str:
        """A node for an action about to run; returns its id."""
        call = get_call()
        action_id = new_id()
        record: dict[str, Any] = {
            "action_id": action_id, "kind": action_type, "name": name or action_type,
            "session_id": session_id or (call.session_id if call else None),
            "run_id": call.run_id if call else None,
            "tool_call_id": call.tool_call_id if call else None,
            "step_sequence": call.step_sequence if call else None,
            "result_sequence": call.result_sequence if call else None,
            "started_at": now(), "ended_at": None, "duration_ms": None, "status": "running",
            "input": action_data, "output": None, "error": None,
        }
        self._open[action_id] = (record, time.perf_counter())
        return action_id

    def _close(self, action_id: str, status: str, **fields: Any) -> dict[str, Any]:
        record, t0 = self._open.pop(action_id)
        record.update(fields, status=status, ended_at=now(), duration_ms=(time.perf_counter() - t0) * 1000.0)
        call: ToolCallContext | None = get_call()
        (call.actions if call is not None else self.records).append(record)
        return record

    def record_action_complete(self, action_node_id: str, result: dict[str, Any]) -> dict[str, Any]:
        """The action finished; ``result`` is its output (stdout, diff, URL and status, screenshot...)."""
        return self._close(action_node_id, "ok", output=result)

    def record_action_failure(self, action_node_id: str, error: str,
                              result: dict[str, Any] | None = None) -> dict[str, Any]:
        """The action failed (blocked, timed out, crashed); ``error`` is the one line the model sees."""
        return self._close(action_node_id, "error", error=scrub(error), output=result)


default_recorder = ContextGraphRecorder()
