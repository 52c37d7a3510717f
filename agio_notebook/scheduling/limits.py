"""Rate limits shared per endpoint, and which failures are worth another attempt.

A limit counts model calls (requests per minute) and tokens (per minute) in a sliding 60-second
window. Every batch that names the same endpoint shares one limiter, so two batches against one
provider together stay under its quota. The limiter wraps the agent's model, so it counts each
model call of a run, not each run.
"""

from __future__ import annotations

import asyncio
import math
import numbers
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, AsyncIterator

from ..core import ModelError
from ..models.base import Usage
from .errors import SchedulingError


@dataclass(frozen=True, slots=True)
class RateLimit:
    """``rpm`` model calls and ``tpm`` tokens per ``period`` seconds (60), shared by ``endpoint``.

    ``endpoint=None`` means the agent's model name.
    """

    rpm: float | None = None
    tpm: float | None = None
    endpoint: str | None = None
    period: float = 60.0

    def __post_init__(self) -> None:
        for name in ("rpm", "tpm", "period"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Real)
                                      or not math.isfinite(value)):
                raise SchedulingError(f"rate limit {name} must be a number, got {value!r} "
                                      f"(a {type(value).__name__})")
        if self.period is None or self.period <= 0:
            raise SchedulingError(f"rate limit period must be a positive number of seconds, got {self.period!r}")
        if self.endpoint is not None and not isinstance(self.endpoint, str):
            raise SchedulingError(f"rate limit endpoint must be a string, got {self.endpoint!r}")
        for name in ("rpm", "tpm"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise SchedulingError(f"rate limit {name}={value!r} would never let a request through; "
                                      "use a positive number, or None for no limit")
        if self.rpm is None and self.tpm is None:
            raise SchedulingError("a RateLimit needs rpm or tpm (or pass rate_limit=None for no limit)")


class Limiter:
    """A sliding-window limiter; one per endpoint, used only on the scheduler loop.

    Tokens are known only after a call, so each call in flight reserves the average seen so far
    (the very first call runs alone until it reports its usage).
    """

    def __init__(self, limit: RateLimit):
        self.limit = limit
        self._calls: deque[float] = deque()
        self._tokens: deque[tuple[float, int]] = deque()
        self._token_sum = 0
        self._reserved = 0.0
        self._in_flight = 0
        self._seen_calls = 0
        self._seen_tokens = 0

    def _trim(self, t: float) -> None:
        horizon = t - self.limit.period
        while self._calls and self._calls[0] <= horizon:
            self._calls.popleft()
        while self._tokens and self._tokens[0][0] <= horizon:
            self._token_sum -= self._tokens.popleft()[1]

    @property
    def estimate(self) -> float:
        return self._seen_tokens / self._seen_calls if self._seen_calls else 0.0

    def _delay(self, t: float) -> float:
        self._trim(t)
        limit, delay = self.limit, 0.0
        if limit.rpm is not None and len(self._calls) >= limit.rpm:
            delay = self._calls[0] + limit.period - t
        if limit.tpm is not None:
            if not self._seen_calls and self._in_flight:
                return max(delay, 0.01)  # learn what a call costs before letting more through
            committed = self._token_sum + self._reserved
            if committed > 0 and committed + self.estimate > limit.tpm:
                if not self._tokens:
                    return max(delay, 0.01)  # only reservations: wait for those calls to report
                excess, acc = committed + self.estimate - limit.tpm, 0
                wait = 0.01
                for ts, n in self._tokens:
                    acc += n
                    wait = ts + limit.period - t
                    if acc >= excess:
                        break
                delay = max(delay, wait)
        return max(delay, 0.0)

    async def acquire(self) -> float:
        """Wait for room; returns the tokens reserved for this call (give them back with ``spend``)."""
        while (delay := self._delay(time.monotonic())) > 0:
            await asyncio.sleep(min(delay, 1.0) + 0.001)
        self._calls.append(time.monotonic())
        reserved = self.estimate
        self._reserved += reserved
        self._in_flight += 1
        return reserved

    def spend(self, tokens: int, reserved: float) -> None:
        """A call ended having used ``tokens``: its reservation becomes what it really used."""
        self._reserved -= reserved
        self._in_flight -= 1
        self._seen_calls += 1
        self._seen_tokens += tokens
        if tokens:
            self._tokens.append((time.monotonic(), tokens))
            self._token_sum += tokens


_limiters: dict[str, Limiter] = {}


def limiter_for(limit: RateLimit, endpoint: str) -> Limiter:
    """The shared limiter of ``endpoint`` (the first limit given for it is kept)."""
    lim = _limiters.get(endpoint)
    if lim is None:
        lim = _limiters[endpoint] = Limiter(limit)
    return lim


class LimitedModel:
    """The agent's model behind a shared limiter: acquire before each call, spend its tokens after."""

    def __init__(self, model: Any, limiter: Limiter):
        self.inner = model
        self.limiter = limiter
        self.name = getattr(model, "name", type(model).__name__)

    async def stream(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *,
                     stream: bool = True) -> AsyncIterator[Any]:
        reserved = await self.limiter.acquire()
        used = 0
        try:
            async for chunk in self.inner.stream(messages, tools, stream=stream):
                if isinstance(chunk, Usage):
                    used = chunk.total_tokens or (chunk.prompt_tokens or 0) + (chunk.completion_tokens or 0)
                yield chunk
        finally:
            self.limiter.spend(used, reserved)


def is_retryable(error: BaseException | None) -> bool:
    """Errors that can succeed on a second try: provider errors marked retryable, time-outs, lost workers."""
    if error is None:
        return False
    if isinstance(error, ModelError):
        return error.retryable
    return isinstance(error, (TimeoutError, ConnectionError)) or getattr(error, "retryable", False) is True


def backoff(attempt: int, base: float, cap: float = 60.0) -> float:
    """Seconds before attempt ``attempt + 1``: base, 2*base, 4*base... capped."""
    return min(base * 2 ** max(attempt - 1, 0), cap)
