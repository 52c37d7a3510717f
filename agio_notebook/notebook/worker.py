"""Where a notebook's runs execute: a background loop of their own (``execution.background``).

nest_asyncio is archived and breaks on ipykernel 7; a thread with its own loop keeps a run going (and
its widgets updating) whether or not the cell that started it is still executing. Output from the
thread is attributed to the right cell by restoring that cell's parent header in the thread.
"""

from __future__ import annotations

from typing import Any

from ..execution.background import BackgroundLoop

_RUNS = BackgroundLoop("agio-runs")

worker_loop = _RUNS.loop
submit = _RUNS.submit


def clicks_reach_a_busy_cell() -> bool:
    """Whether a widget click reaches the kernel while a cell still awaits (ipykernel 7 and later)."""
    try:
        from ipykernel import __version__
    except ImportError:
        return False
    return int(__version__.split(".")[0]) >= 7


def awaits_on_asyncio(shell: Any) -> bool:
    """Top-level ``await`` is on (``%autoawait``) and runs on asyncio, as in ipykernel: a cell may then
    await its run or batch, and the kernel hears clicks meanwhile."""
    from IPython.core.async_helpers import _asyncio_runner

    return bool(getattr(shell, "autoawait", False)) and getattr(shell, "loop_runner", None) is _asyncio_runner


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
