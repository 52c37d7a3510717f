"""``asyncio.run`` for the library's sync entry points, without its hidden cost.

On the main thread ``asyncio.run`` installs a SIGINT handler bound to the main task, and reading that
handler back (twice per run) makes the standard library format ``repr()`` of the task, which holds its
result: a whole :class:`RunResult` with every step, formatted and thrown away on each ``run_sync``
(a quarter of a short offline run's time). The result travels in a box whose repr is constant.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class _Box:
    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def __repr__(self) -> str:
        return "<result>"


async def _boxed(coro: Coroutine[Any, Any, T]) -> _Box:
    return _Box(await coro)


def run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on a new event loop of this thread, as ``asyncio.run`` does, and return its result."""
    return asyncio.run(_boxed(coro)).value
