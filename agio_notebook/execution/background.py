"""A daemon thread with its own asyncio loop, for work that must outlive the code that starts it.

ipykernel 7 runs cells as anyio tasks, and asyncio tasks a cell creates stall once the cell finishes;
plain scripts have no running loop at all. Runs started from a notebook and the scheduler's batches
each execute on such a loop (one per purpose, started on first use; a daemon thread never blocks exit).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Callable, Coroutine, TypeVar

T = TypeVar("T")


class BackgroundLoop:
    def __init__(self, name: str):
        self.name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop, started on first use."""
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def serve() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                self._thread = threading.Thread(target=serve, name=self.name, daemon=True)
                self._thread.start()
                ready.wait()
                self._loop = loop
            return self._loop

    def on_loop(self) -> bool:
        return self._thread is not None and threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``coro`` on the loop; cancelling the returned future cancels the task."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop())

    def call(self, fn: Callable[[], T], timeout: float | None = 30.0) -> T:
        """Run ``fn`` on the loop and return its result (directly when already there)."""
        if self.on_loop():
            return fn()

        async def wrapper() -> T:
            return fn()

        return self.submit(wrapper()).result(timeout)
