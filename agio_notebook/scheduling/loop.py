"""The scheduler's own thread and event loop.

Batches outlive the cell that starts them, and plain scripts have no loop at all: one background loop
serves both. Every executor call from another thread goes through :func:`call` or :func:`submit`.
"""

from __future__ import annotations

from ..execution.background import BackgroundLoop

_SCHEDULER = BackgroundLoop("agio-scheduler")

scheduler_loop = _SCHEDULER.loop
on_loop = _SCHEDULER.on_loop
submit = _SCHEDULER.submit
call = _SCHEDULER.call
