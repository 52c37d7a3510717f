"""How explore runs many runs: one function, ``run_jobs``, so the batch executor can take over in one line.

Until ``agio_notebook.scheduling`` has its batch executor, jobs run on one event loop, at most
``concurrency`` at a time. ``run_coroutine`` runs a coroutine to the end from plain code or from a
notebook cell (whose loop is already running) on a worker thread with a loop of its own.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Awaitable, Callable, Coroutine, Sequence, TypeVar

T = TypeVar("T")
Job = Callable[[], Awaitable[T]]


async def run_jobs(jobs: Sequence[Job[T]], concurrency: int = 4,
                   should_start: Callable[[int], bool] | None = None) -> list[T | None]:
    """Run ``jobs`` concurrently; a job ``should_start`` refuses is not run (its result is ``None``)."""
    limit = asyncio.Semaphore(max(1, concurrency))
    results: list[T | None] = [None] * len(jobs)

    async def one(i: int) -> None:
        async with limit:
            if should_start is not None and not should_start(i):
                return
            results[i] = await jobs[i]()

    await asyncio.gather(*(one(i) for i in range(len(jobs))))
    return results


def run_coroutine(coro: Coroutine[Any, Any, T], on_wait: Callable[[], None] | None = None,
                  poll: float = 0.1) -> T:
    """Run ``coro`` to completion; with a loop already running (a notebook), on a worker thread.

    ``on_wait`` is called every ``poll`` seconds on the calling thread while waiting (a live monitor
    redraws there, in the cell that called).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        if on_wait is None:
            return asyncio.run(coro)
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:  # noqa: BLE001 - re-raised on the calling thread
            box["error"] = exc

    thread = threading.Thread(target=work, name="agio-explore", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(poll)
        if on_wait is not None:
            on_wait()
    if "error" in box:
        raise box["error"]
    return box["value"]
