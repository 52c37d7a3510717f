"""What every built-in action shares: finding its session's workspace and recording itself."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from ..tools.context import ToolCallContext, get_call
from .errors import ActionError
from .recorder import ContextGraphRecorder, default_recorder
from .workspace import Workspace, workspace_for

MANUAL_SESSION = "manual"  # the session of a tool called by hand, outside any run


def current_workspace(root: Path | None) -> tuple[ToolCallContext | None, Workspace, str | None]:
    """The call's context, its session's workspace (synced with the session's history) and why it was
    restored, if it was."""
    ctx = get_call()
    session_id = ctx.session_id if ctx is not None else MANUAL_SESSION
    ws = workspace_for(session_id, root, ctx.repository if ctx is not None else None)
    restored = ws.sync(ctx)
    return ctx, ws, restored


class Action:
    """One recorded action; ``output`` is filled by the tool, ``fail`` turns it into a failure."""

    def __init__(self, recorder: ContextGraphRecorder, action_id: str):
        self.recorder = recorder
        self.action_id = action_id
        self.output: dict[str, Any] = {}


@contextmanager
def recorded(kind: str, name: str, data: dict[str, Any], recorder: ContextGraphRecorder | None = None,
             session_id: str | None = None) -> Iterator[Action]:
    """Record an action around its body: completion with ``output``, or failure with the error's line."""
    rec = recorder or default_recorder
    action = Action(rec, rec.record_action_start(session_id, kind, data, name=name))
    try:
        yield action
    except ActionError as exc:
        rec.record_action_failure(action.action_id, str(exc), action.output or None)
        raise
    except Exception as exc:  # noqa: BLE001 - recorded, then the engine turns it into an error result
        rec.record_action_failure(action.action_id, f"{type(exc).__name__}: {exc}", action.output or None)
        raise
    rec.record_action_complete(action.action_id, action.output)
