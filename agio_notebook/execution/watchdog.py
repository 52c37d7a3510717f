"""Watchdog: the three time limits of one streaming model call, on one lazily moved timer.

- first token: from the request until the first text or tool-call chunk;
- idle: silence while waiting for the next chunk once the answer has started (time the consumer
  spends between chunks does not count);
- overall: an optional cap on the whole call.

Slow models that keep streaming are never cut off by the first two. One timer serves all three: each
chunk only notes the time, and when the timer fires early (the deadline moved) it sets itself again,
so a 20,000-chunk answer costs no timer churn. On expiry it cancels the waiting task, and the caller
turns that cancel into one non-retryable :class:`ModelError`: a hang is reported once, never
multiplied by retries.
"""

from __future__ import annotations

import asyncio

from ..core import ModelError


class Watchdog:
    __slots__ = ("_limits", "_name", "_loop", "_task", "_start", "_last", "_handle", "waiting", "expired")

    def __init__(self, first_token: float | None, idle: float | None, overall: float | None, name: str):
        self._limits = (first_token, idle, overall)
        self._name = name
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self._start = self._loop.time()
        self._last: float | None = None  # when the current wait began, once the answer has started
        self._handle: asyncio.TimerHandle | None = None
        self.expired: str | None = None
        self.waiting = False
        self._arm()

    def begin_wait(self) -> None:
        """About to wait for the model's next chunk: idle time counts from here."""
        if self.expired is not None:  # expired while the consumer held the stream
            raise self.error()
        if self._last is not None:
            self._last = self._loop.time()
        self.waiting = True

    def _deadline(self) -> tuple[float, str] | None:
        first, idle, overall = self._limits
        options = []
        if overall is not None:
            options.append((self._start + overall, "overall"))
        if self._last is None:
            if first is not None:
                options.append((self._start + first, "first"))
        elif idle is not None:
            options.append((self._last + idle, "idle"))
        return min(options) if options else None

    def _arm(self) -> None:
        deadline = self._deadline()
        self._handle = self._loop.call_at(deadline[0], self._fire) if deadline is not None else None

    def _fire(self) -> None:
        deadline = self._deadline()
        if deadline is None:
            self._handle = None
            return
        at, kind = deadline
        now = self._loop.time()
        if now < at or (kind == "idle" and not self.waiting):
            # the deadline moved since the timer was set, or the consumer (not the model) is busy
            self._handle = self._loop.call_at(max(at, now + 0.01), self._fire)
            return
        self.expired = kind
        self._handle = None
        if self.waiting and self._task is not None:
            self._task.cancel()

    def started(self) -> None:
        """The first text or tool-call chunk arrived: from now on the idle limit applies."""
        self._last = self._loop.time()
        if self._handle is not None:
            self._handle.cancel()
        self._arm()

    def error(self) -> ModelError:
        first, idle, overall = self._limits
        if self.expired == "first":
            message = f"model {self._name!r} sent nothing within first_token_timeout={first:g}s"
        elif self.expired == "idle":
            message = f"model {self._name!r} stopped streaming: no chunk for idle_timeout={idle:g}s"
        else:
            message = f"model call exceeded timeout_per_step={overall:g}s"
        return ModelError(message, retryable=False)

    def raise_if_expired(self) -> None:
        """Inside ``except CancelledError``: our own cancel becomes the timeout error; others pass."""
        if self.expired is not None and self._task is not None and self._task.uncancel() == 0:
            raise self.error() from None

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
