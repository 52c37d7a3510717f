"""``run_coroutine``: a coroutine run to the end from plain code or from a notebook cell.

A cell's loop is already running, so there the coroutine runs on a worker thread with a loop of its
own (scorers are coroutines: an LLM judge awaits its model). Sweeps run their runs on the
scheduling executor; this is for the work around them.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable, Coroutine, TypeVar

from ..core.blocking import run_blocking

T = TypeVar("T")


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
            return run_blocking(coro)
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = run_blocking(coro)
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
