"""Budgets: end a run *before* a model call that would break ``max_tokens`` or ``max_cost``.

Both budgets trust one estimate of the next call. Its prompt is what the model reported for the last
call (that prompt and its completion, which the next prompt contains) plus the tokens of every message
added since (tool results, above all), counted by ``models.tokens``: exactly for OpenAI models, about
four characters a token otherwise; and never less than the last prompt grew by the turn before (a
model's own overhead per turn). Before the first call the whole context is counted. Its completion
is guessed as long as the last one. A run stops at the first call whose estimate would break a budget,
so what it spends passes the budget by at most that call's completion (and the estimate's error, which
is on the high side for models without a tokenizer).

The estimate is made with the tokenizer and prices of the model about to be called, so after a handoff
the budget counts with the agent that holds the session (:meth:`Budget.switched` starts its count afresh).
The same estimate is what a nested run reserves from its outermost run's budget (``nested.Tree``).
"""

from __future__ import annotations

from typing import Any

from ..core import ExecutionConfig, RunMetrics
from ..models.pricing import cost_of
from ..models.tokens import count_tokens, prompt_tokens


class Budget:
    """Tracks one run's spend against its config; ``check`` says why the next call may not happen."""

    __slots__ = ("config", "_seen", "_last_prompt", "_last_completion", "_growth")

    def __init__(self, config: ExecutionConfig):
        self.config = config
        self._seen = 0  # messages already inside the last call's reported usage
        self._last_prompt: int | None = None  # the last call's prompt and completion; None: none reported yet
        self._last_completion = 0
        self._growth = 0  # how much the last reported prompt grew over the one before

    @property
    def active(self) -> bool:
        return self.config.max_cost is not None or self.config.max_tokens is not None

    def switched(self) -> None:
        """Another model answers from now on (a handoff): the next estimate counts the whole context with
        its tokenizer, not growth over what the last model reported."""
        self._seen, self._last_prompt, self._last_completion, self._growth = 0, None, 0, 0

    def called(self, messages: list[dict[str, Any]], prompt: int | None, completion: int | None) -> None:
        """A model call happened; ``messages`` now end with its reply, which used these tokens."""
        if prompt is None and completion is None:  # no usage reported: count everything next time
            self._seen, self._last_prompt, self._last_completion, self._growth = 0, None, 0, 0
            return
        before = None if self._last_prompt is None else self._last_prompt - self._last_completion
        self._growth = max((prompt or 0) - before, 0) if before is not None else 0
        self._seen = len(messages)
        self._last_prompt = (prompt or 0) + (completion or 0)
        self._last_completion = completion or 0

    def estimate(self, messages: list[dict[str, Any]], model_name: str | None) -> tuple[int, int]:
        """(prompt, completion) tokens the next call of ``model_name`` is expected to use."""
        if self._last_prompt is None:
            return prompt_tokens(messages, model_name)[0], self._last_completion
        added = sum(count_tokens(messages[self._seen:], model_name)[0])
        # a model's own overhead per turn shows in how its prompts grew: never guess less than that
        grown = self._last_prompt - self._last_completion + self._growth
        return max(self._last_prompt + added, grown), self._last_completion

    def check(self, metrics: RunMetrics, estimate: tuple[int, int], model_name: str | None) -> str | None:
        """Why the next call (of ``estimate`` tokens) may not be made under this run's own limits, or None."""
        config = self.config
        if not self.active:
            return None
        prompt, completion = estimate
        if config.max_tokens is not None:
            used = metrics.total_tokens or 0
            if used >= config.max_tokens or used + prompt + completion > config.max_tokens:
                return (f"token budget max_tokens={config.max_tokens} would be exceeded by the next model call "
                        f"({used} used, about {prompt + completion} more needed)")
        if config.max_cost is not None:
            next_cost = cost_of(model_name, prompt, completion) if metrics.cost is not None else None
            if next_cost is None:
                return f"max_cost is set but the price of model {model_name!r} is unknown"
            if metrics.cost + next_cost > config.max_cost:
                return (f"max_cost (${config.max_cost:g}) would be exceeded: ${metrics.cost:.6f} spent, "
                        f"next call ~${next_cost:.6f}")
        return None
