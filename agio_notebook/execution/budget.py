"""The cost budget: end a run *before* a model call that would exceed ``ExecutionConfig.max_cost``.

(``max_tokens`` is checked beside it by the executor, ``StepExecutor._over_budget``.) The next call's
prompt is estimated from what is known: the previous call's prompt and completion (the new prompt
contains both) plus about 4 characters per token of what was added since, and priced by
``agio_notebook.models.pricing``. Only the prompt is estimated (a completion's length is not known in
advance), so a run stops at the first call whose prompt alone would break the budget, and its spend
never passes the budget by more than one completion.
"""

from __future__ import annotations

from typing import Any

from ..core import ExecutionConfig, RunMetrics
from ..models.pricing import cost_of


def _chars(messages: list[dict[str, Any]]) -> int:
    n = 0
    for m in messages:
        n += len(m.get("content") or "") + 16
        for call in m.get("tool_calls") or ():
            fn = call.get("function") or {}
            n += len(fn.get("name") or "") + len(fn.get("arguments") or "")
    return n


class Budget:
    """Tracks one run's spend against its config; ``check`` says why the next call may not happen."""

    __slots__ = ("config", "model_name", "_seen", "_last_tokens")

    def __init__(self, config: ExecutionConfig, model_name: str | None):
        self.config = config
        self.model_name = model_name
        self._seen = 0  # messages already counted in _last_tokens
        self._last_tokens = 0

    @property
    def active(self) -> bool:
        return self.config.max_cost is not None

    def called(self, messages: list[dict[str, Any]], prompt_tokens: int | None, completion_tokens: int | None) -> None:
        """A model call happened with ``messages`` and used these tokens."""
        self._seen = len(messages)
        self._last_tokens = (prompt_tokens or 0) + (completion_tokens or 0)

    def estimate_prompt(self, messages: list[dict[str, Any]]) -> int:
        return self._last_tokens + _chars(messages[self._seen:]) // 4

    def check(self, metrics: RunMetrics, messages: list[dict[str, Any]]) -> str | None:
        config = self.config
        if not self.active:
            return None
        prompt = self.estimate_prompt(messages)
        if config.max_cost is not None:
            if metrics.cost is None:
                return f"max_cost is set but the price of model {self.model_name!r} is unknown"
            next_cost = cost_of(self.model_name, prompt, 0)
            if next_cost is None:
                return f"max_cost is set but the price of model {self.model_name!r} is unknown"
            if metrics.cost + next_cost > config.max_cost:
                return (f"max_cost (${config.max_cost:g}) would be exceeded: ${metrics.cost:.6f} spent, "
                        f"next prompt ~${next_cost:.6f}")
        return None
