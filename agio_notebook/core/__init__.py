"""Plain data of agio_notebook: steps, runs, sessions, events, config. No I/O."""

from .config import ExecutionConfig
from .errors import (AgioError, AmbiguousIdError, InvalidOperationError, ModelError, NotFoundError, SessionBusyError,
                     StoreError)
from .events import TERMINAL_EVENTS, TRANSIENT_EVENTS, StepEvent, StepEventType
from .redact import mask, scrub
from .run import AgentRun, AgentSession, RunMetrics, RunStatus, gave_answer, run_tree
from .step import Step, StepMetrics, StepRole, ToolCall, new_id, now

__all__ = [
    "mask",
    "AgentRun", "AgentSession", "AgioError", "AmbiguousIdError", "ExecutionConfig", "InvalidOperationError",
    "ModelError", "NotFoundError", "RunMetrics", "RunStatus", "SessionBusyError", "Step", "StepEvent", "StepEventType",
    "StepMetrics", "StepRole", "StoreError", "TERMINAL_EVENTS", "TRANSIENT_EVENTS", "ToolCall", "new_id", "now",
    "gave_answer", "run_tree", "scrub",
]
