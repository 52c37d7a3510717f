"""Models and helpers for scheduler tests: latency-bound fakes that record when and how often they ran."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from typing import Any

import pytest

from agio_notebook import Agent, ExecutionConfig, FunctionModel
from agio_notebook.core import ModelError
from agio_notebook.scheduling import Executor
from agio_notebook.storage import TinyDBRepository


class Probe:
    """Shared record of model calls: start times per query, calls in flight, the peak of those."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0
        self.calls: Counter[str] = Counter()
        self.starts: list[tuple[float, str]] = []


def query_of(messages: list[dict[str, Any]]) -> str:
    return next(m["content"] for m in messages if m["role"] == "user")


def slow_agent(probe: Probe, delay: float = 0.05, *, name: str = "slow", fail_first: int = 0,
               retryable: bool = True, config: ExecutionConfig | None = None) -> Agent:
    """Answers ``echo: <query>`` after ``delay`` seconds; the first ``fail_first`` calls per query fail."""

    async def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        q = query_of(messages)
        with probe.lock:
            probe.calls[q] += 1
            n = probe.calls[q]
            probe.in_flight += 1
            probe.peak = max(probe.peak, probe.in_flight)
            probe.starts.append((time.monotonic(), q))
        try:
            await asyncio.sleep(delay)
            if n <= fail_first:
                raise ModelError(f"provider overloaded (call {n})", retryable=retryable, status_code=503)
            return f"echo: {q}"
        finally:
            with probe.lock:
                probe.in_flight -= 1

    return Agent(model=FunctionModel(reply, name=f"{name}-model"), name=name,
                 config=config or ExecutionConfig(enable_retry=False))


def wait_until(predicate, timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)


@pytest.fixture
def repo(tmp_path):
    """A TinyDB store that gives up on a held lock after a second (a stuck test fails, it does not hang)."""
    r = TinyDBRepository(tmp_path / "store", lock_timeout=1.0)
    yield r
    r.close()


@pytest.fixture
def ex(repo):
    """An executor of its own on ``repo`` (not the process-wide default)."""
    return Executor(repo, max_concurrency=64)
