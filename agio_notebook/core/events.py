"""The event stream: the single source of truth of a run.

Store, live view, hooks and transcript are all folds over these events.
Wire shape: ``{"type", "run_id", "session_id", "seq", "ts", "payload"}``;
``docs/streaming-protocol.md`` documents each type, its payload and the
ordering guarantees.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from .step import now


class StepEventType(str, Enum):
    RUN_STARTED = "run_started"
    STEP_DELTA = "step_delta"
    STEP_COMPLETED = "step_completed"
    TOOL_CALL_STARTED = "tool_call_started"
    TOOL_CALL_COMPLETED = "tool_call_completed"
    TOOL_CALL_FAILED = "tool_call_failed"
    APPROVAL_REQUESTED = "approval_requested"
    APPROVAL_RESOLVED = "approval_resolved"
    METRICS = "metrics"
    RUN_COMPLETED = "run_completed"
    RUN_FAILED = "run_failed"
    RUN_CANCELLED = "run_cancelled"
    RUN_MAX_STEPS = "run_max_steps"
    RUN_BUDGET_EXCEEDED = "run_budget_exceeded"
    MEMORY_READ = "memory_read"
    # step mode (execution/debug.py): the loop waits at a pause point, then goes on (with any edits)
    RUN_PAUSED = "run_paused"
    RUN_RESUMED = "run_resumed"
    # built-in actions (agio_notebook.toolkits): one started + one completed/failed per action
    ACTION_STARTED = "action_started"
    ACTION_COMPLETED = "action_completed"
    ACTION_FAILED = "action_failed"
    # an event of a run nested in this one (an agent called as a tool), tagged with its path
    NESTED = "nested"
    # the conversation moved to another agent (a handoff)
    HANDOFF = "handoff"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_EVENTS


TERMINAL_EVENTS = frozenset({StepEventType.RUN_COMPLETED, StepEventType.RUN_FAILED,
                             StepEventType.RUN_CANCELLED, StepEventType.RUN_MAX_STEPS,
                             StepEventType.RUN_BUDGET_EXCEEDED})

# Deltas are transient: the completed step carries the full text, so the store
# keeps every event except these (a 20k-token answer would otherwise be 20k rows).
# Nested events are copies: each nested run stores its own events under its own run id.
TRANSIENT_EVENTS = frozenset({StepEventType.STEP_DELTA, StepEventType.NESTED})


@dataclass(slots=True)
class StepEvent:
    """One event of a run. ``seq`` numbers a run's events from 1, in emission order."""

    type: StepEventType
    run_id: str
    session_id: str
    seq: int
    payload: dict[str, Any] = field(default_factory=dict)
    ts: float = field(default_factory=now)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type.value, "run_id": self.run_id, "session_id": self.session_id,
                "seq": self.seq, "ts": self.ts, "payload": self.payload}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StepEvent:
        return cls(type=StepEventType(d["type"]), run_id=d["run_id"], session_id=d["session_id"],
                   seq=d["seq"], ts=d["ts"], payload=d.get("payload") or {})
