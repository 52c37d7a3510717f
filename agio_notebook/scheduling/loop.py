"""The scheduler's own thread and event loop.

Batches outlive the cell that starts them (ipykernel 7 stalls asyncio tasks a finished cell created),
and plain scripts have no loop at all: one daemon thread with its own loop serves both. Every
executor call from another thread goes through :func:`call` or :func:`submit`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Callable, Coroutine, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def scheduler_loop() -> asyncio.AbstractEventLoop:
    """The process's scheduler loop, started on first use (a daemon thread never blocks exit)."""
    global _loop, _thread
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def serve() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            _thread = threading.Thread(target=serve, name="agio-scheduler", daemon=True)
            _thread.start()
            ready.wait()
            _loop = loop
        return _loop


def on_loop() -> bool:
    return _thread is not None and threading.current_thread() is _thread


def submit(coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """Run ``coro`` on the scheduler loop."""
    return asyncio.run_coroutine_threadsafe(coro, scheduler_loop())


def call(fn: Callable[[], T], timeout: float | None = 30.0) -> T:
    """Run ``fn`` on the scheduler loop and return its result (directly when already there)."""
    if on_loop():
        return fn()

    async def wrapper() -> T:
        return fn()

    return submit(wrapper()).result(timeout)
