"""A background thread with its own asyncio loop, where runs execute.

ipykernel 7 runs cells as anyio tasks, and asyncio tasks a cell creates stall once the cell
finishes; nest_asyncio is archived and breaks there. A thread with its own loop keeps a run going
(and its widgets updating) whether or not the cell that started it is still executing. Output from
the thread is attributed to the right cell by restoring that cell's parent header in the thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Coroutine

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def worker_loop() -> asyncio.AbstractEventLoop:
    """The process's run loop, started on first use (a daemon thread: it never blocks exit)."""
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def serve() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            threading.Thread(target=serve, name="agio-runs", daemon=True).start()
            ready.wait()
            _loop = loop
        return _loop


def submit(coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
    """Run ``coro`` on the worker loop; cancelling the returned future cancels the task."""
    return asyncio.run_coroutine_threadsafe(coro, worker_loop())


def clicks_reach_a_busy_cell() -> bool:
    """Whether a widget click reaches the kernel while a cell still awaits (ipykernel 7 and later)."""
    try:
        from ipykernel import __version__
    except ImportError:
        return False
    return int(__version__.split(".")[0]) >= 7


def capture_parent(shell: Any) -> Any:
    """The parent header of the message being handled now (the cell, or a widget click)."""
    for owner in (shell, getattr(shell, "kernel", None)):
        get = getattr(owner, "get_parent", None)
        if callable(get):
            try:
                return get()
            except TypeError:  # ipykernel 6: get_parent(channel)
                return get("shell")
    return getattr(getattr(shell, "kernel", None), "_parent_header", None)


def restore_parent(shell: Any, parent: Any) -> None:
    """Make output sent from this thread belong to ``parent`` (see ``capture_parent``)."""
    if parent is None or shell is None:
        return
    setter = getattr(shell, "set_parent", None)
    if callable(setter):
        setter(parent)
