"""Tool and ToolResult: what the engine runs and what the model sees back."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(slots=True)
class ToolResult:
    """The outcome of one tool call. ``content`` is what the model sees on its next turn."""

    tool_call_id: str
    name: str
    content: str
    status: str = "ok"  # ok | error | rejected
    error: str | None = None
    error_type: str | None = None  # unknown_tool | invalid_json | invalid_arguments | exception | timeout | rejected
    duration_ms: float = 0.0
    attempts: int = 1
    arguments: dict[str, Any] | None = None
    actions: list[dict[str, Any]] = field(default_factory=list)  # action records (see tools/context.py)
    step_extra: dict[str, Any] = field(default_factory=dict)  # stored on the tool step's ``extra``


def to_content(value: Any) -> str:
    """Tool return value -> text for the model: strings as is, everything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str, ensure_ascii=False)


@dataclass(slots=True)
class Tool:
    """A function the model may call.

    ``timeout`` None uses ``ExecutionConfig.tool_timeout``. ``retries`` is how many extra attempts the
    tool allows after an exception or timeout (0: never retried — a tool opts in, since a retry of a
    non-idempotent tool may repeat its effect). ``requires_approval`` pauses the run for a decision.
    ``side_effects`` with ``on_replay`` says what a replay, retry or fork does with a call recorded
    before: replay its recorded result, ask for confirmation (approval), or block it.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    function: Callable[..., Any]
    is_async: bool
    validate: Callable[[dict[str, Any]], dict[str, Any]]
    timeout: float | None = None
    retries: int = 0
    requires_approval: bool = False
    close: Callable[[], None] | None = None  # releases what the tool holds (a browser); see Agent.close
    side_effects: bool = False  # its calls change the world: a replay, retry or fork does not simply rerun them
    on_replay: str = "record"  # for recorded side-effect calls: "record" (replay the result) | "confirm" | "block"
    takes_context: bool = False  # the function's first parameter is a RunContext, passed by the engine
    _schema: dict[str, Any] | None = field(default=None, repr=False)

    def schema(self) -> dict[str, Any]:
        """The OpenAI function-tool schema."""
        if self._schema is None:
            self._schema = {"type": "function", "function": {
                "name": self.name, "description": self.description, "parameters": self.parameters}}
        return self._schema

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Still callable as the plain function, so decorated tools stay testable."""
        return self.function(*args, **kwargs)
