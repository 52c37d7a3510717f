"""One value per event loop: for clients whose connections belong to the loop that opened them.

An async HTTP client (httpx under ``openai``) pools keep-alive connections, and each connection is bound
to the event loop it was opened on. A user reaches a model from many loops: a cell, top-level ``await``,
``run_sync`` (a new loop each time), a batch (the scheduler's thread), a Ray worker. Reusing one client
across them fails as soon as a server keeps connections alive (``Event loop is closed``, or a lock
"bound to a different event loop").

:class:`PerLoop` makes the value lazily, the first time a loop asks, and closes it on that loop when the
loop shuts down: a parked async generator is the hook, since ``asyncio.run`` (and any runner that calls
``loop.shutdown_asyncgens()``) closes every unfinished async generator before it closes the loop. A value
left behind by a loop that was closed without that step is dropped the next time a new loop asks. Loops
that never close (the daemon threads of runs and batches) or were left open have their values closed when
the process exits.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import threading
import weakref
from typing import Any, AsyncIterator, Awaitable, Callable, Generic, TypeVar

T = TypeVar("T")


class PerLoop(Generic[T]):
    """``await values.get()``: this loop's value, made by ``make()`` on first use; ``close(value)`` is
    awaited on the same loop when it shuts down (or when this object is dropped while the loop runs)."""

    def __init__(self, make: Callable[[], T], close: Callable[[T], Awaitable[Any]]):
        self._make = make
        self._close = close
        self._lock = threading.Lock()
        self._values: dict[asyncio.AbstractEventLoop, tuple[T, AsyncIterator[None]]] = {}
        _ALL.add(self)

    async def get(self) -> T:
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._values.get(loop)
            if entry is not None:
                return entry[0]
            for old in [k for k in self._values if k.is_closed()]:  # closed without shutting down its generators
                del self._values[old]
            value = self._make()
            guard = self._guard(loop, value)
            self._values[loop] = (value, guard)
        await guard.__anext__()  # runs to its ``yield`` at once: from now on the loop's shutdown closes the value
        return value

    def __len__(self) -> int:
        """How many loops hold a value now (those not yet shut down)."""
        with self._lock:
            return sum(not loop.is_closed() for loop in self._values)

    async def _guard(self, loop: asyncio.AbstractEventLoop, value: T) -> AsyncIterator[None]:
        try:
            yield
        finally:
            with self._lock:
                if self._values.get(loop, (None,))[0] is value:
                    del self._values[loop]
            await self._close(value)
            await asyncio.sleep(0)  # closed connections finish (their last callbacks) before the loop closes

    def close_open(self, timeout: float) -> None:
        """Close the values of loops that are still open (at exit: daemon threads' loops never close, and a
        loop a script left open would otherwise drop a pending close task)."""
        with self._lock:
            entries = [(loop, guard) for loop, (_, guard) in self._values.items() if not loop.is_closed()]
        futures = []
        for loop, guard in entries:
            closing = guard.aclose()  # type: ignore[attr-defined]
            try:
                if loop.is_running():
                    futures.append(asyncio.run_coroutine_threadsafe(closing, loop))
                else:
                    loop.run_until_complete(closing)
            except Exception:  # noqa: BLE001 - closed or started meanwhile: the process is exiting anyway
                closing.close()
        concurrent.futures.wait(futures, timeout)


_ALL: weakref.WeakSet[PerLoop[Any]] = weakref.WeakSet()


@atexit.register
def _close_at_exit() -> None:
    for values in list(_ALL):
        values.close_open(timeout=2.0)
