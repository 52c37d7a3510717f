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
    first_token_timeout seconds to wait for a model call's first text or tool-call chunk (the request,
                        the server's queue and prompt processing, and the client's own retries of 429/5xx
                        all fall inside it); ``None`` = no limit.
    idle_timeout        seconds of silence allowed between two chunks once the answer has started; a slow
                        model that keeps streaming is never cut off.  ``None`` = no limit.
    timeout_per_step    optional overall cap in seconds on one model call, first byte to last; ``None``
                        (the default) lets a long answer stream as long as it keeps making progress.
                        Hitting any of the three fails the run at once (a hang is not retried) and keeps
                        the text streamed so far on the failed step.
    tool_timeout        default seconds one tool call may take; a tool may set its own.
    enable_retry        retry failed tool calls (tools that allow it) and retryable model errors.
    max_retries         how many extra attempts ``enable_retry`` allows.
    stream              emit ``step_delta`` events while the model generates.
    max_cost            spend allowed in one run (USD, priced by ``agio_notebook.models.pricing``);
                        the run ends with status ``budget_exceeded`` before a model call that would exceed
                        it (``None`` = no limit).
    max_tokens          token budget of one run; the run ends with status ``budget_exceeded`` before a
                        model call that would exceed it (``None`` = no budget).
    session_wait        seconds a run waits for another run (any process) to release its session;
                        0 fails at once with a line naming the holder, ``None`` waits as long as it takes.
    model_settings      request settings for every model call of the run (``temperature``, ``max_tokens``,
                        ``tool_choice``, ``extra_body``, ...), merged over the agent's ``model_settings``.
    execute_tools       run the tools the model calls (the default); False ends the run at the first reply
                        with tool calls, which stay pending: ``runner.resume(session)`` runs them and goes on.
    max_nested_runs     nested runs (agents called as tools, at any depth) one outermost run may start; a
                        call past it is refused with a tool error the model reads. The outermost run's
                        value holds for its whole tree, as its ``max_tokens`` and ``max_cost`` do.
    """

    max_steps: int = 20
    parallel_tool_calls: bool = True
    max_parallel_tools: int = 8
    timeout_per_step: float | None = None
    tool_timeout: float | None = 30.0
    enable_retry: bool = True
    max_retries: int = 2
    stream: bool = True
    max_cost: float | None = None
    max_tokens: int | None = None
    session_wait: float | None = 0.0
    first_token_timeout: float | None = 120.0
    idle_timeout: float | None = 60.0
    model_settings: dict[str, Any] | None = None
    execute_tools: bool = True
    max_nested_runs: int = 25

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")
        if self.max_parallel_tools < 1:
            raise ValueError(f"max_parallel_tools must be >= 1, got {self.max_parallel_tools}")
        if self.max_nested_runs < 0:
            raise ValueError(f"max_nested_runs must be >= 0, got {self.max_nested_runs}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.max_cost is not None and self.max_cost < 0:
            raise ValueError(f"max_cost must be >= 0, got {self.max_cost}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1 (or None), got {self.max_tokens}")
        for name in ("timeout_per_step", "first_token_timeout", "idle_timeout"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be > 0 seconds or None, got {value!r}")
        if self.model_settings is not None and not isinstance(self.model_settings, dict):
            raise ValueError(f"model_settings must be a dict, got {type(self.model_settings).__name__}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
