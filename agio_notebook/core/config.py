"""ExecutionConfig: every field here is read by the engine and has a test showing its effect."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(slots=True)
class ExecutionConfig:
    """How a run executes.

    max_steps           model calls allowed in one run; then the run ends with status ``max_steps``.
    parallel_tool_calls run the tool calls of one model turn concurrently (else one after another).
    max_parallel_tools  cap on tool calls running at once when parallel.
    timeout_per_step    seconds one model call may take (first chunk to last); ``None`` = no limit.
    tool_timeout        default seconds one tool call may take; a tool may set its own.
    enable_retry        retry failed tool calls (tools that allow it) and retryable model errors.
    max_retries         how many extra attempts ``enable_retry`` allows.
    stream              emit ``step_delta`` events while the model generates.
    session_wait        seconds a run waits for another run (any process) to release its session;
                        0 fails at once with a line naming the holder, ``None`` waits as long as it takes.
    """

    max_steps: int = 20
    parallel_tool_calls: bool = True
    max_parallel_tools: int = 8
    timeout_per_step: float | None = 120.0
    tool_timeout: float | None = 30.0
    enable_retry: bool = True
    max_retries: int = 2
    stream: bool = True
    session_wait: float | None = 0.0

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")
        if self.max_parallel_tools < 1:
            raise ValueError(f"max_parallel_tools must be >= 1, got {self.max_parallel_tools}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
