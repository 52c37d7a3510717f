"""Where a synchronous tool runs: on the process's tool threads, kept from one run to the next.

``asyncio.to_thread`` runs a call on its event loop's default executor, and ``run_sync`` makes a new loop
for every run: each run of a script started a thread for its first synchronous tool call, and waited at
its end for every thread of that executor, a timed-out call's still running one included. The tool
threads outlive the loops; a call carries the caller's context (the tool call's scope) as
``to_thread`` does.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import threading
from typing import Any, Callable, TypeVar

T = TypeVar("T")

MAX_TOOL_THREADS = 32  # calls at once; a call that never returns keeps its thread
_pool: concurrent.futures.ThreadPoolExecutor | None = None
_lock = threading.Lock()


def _threads() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(MAX_TOOL_THREADS, thread_name_prefix="agio-tool")
        return _pool


async def in_tool_thread(function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``await asyncio.to_thread(function, ...)``, on the tool threads."""
    call = functools.partial(contextvars.copy_context().run, function, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_threads(), call)
