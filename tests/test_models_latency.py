"""Simulated latency of the offline models, measured by the engine's own metrics (TTFT, model time)."""

from __future__ import annotations

import asyncio
import time

import pytest

from agio_notebook import Agent, FunctionModel, Reply, ScriptedModel, StepRunner
from agio_notebook.core import InvalidOperationError
from agio_notebook.models import Latency
from agio_notebook.storage import TinyDBRepository

WORDS = " ".join(f"w{i}" for i in range(20))  # 20 tokens


def run(tmp_path, model):
    runner = StepRunner(Agent(model=model), repository=TinyDBRepository(tmp_path / "store"))
    arrivals: list[float] = []

    async def go():
        async for event in runner.run_stream("s", "hi"):
            if event.type.value == "step_delta":
                arrivals.append(time.perf_counter())
    t0 = time.perf_counter()
    asyncio.run(go())
    run = runner.repository.list_runs()[-1]
    return run.metrics, [a - t0 for a in arrivals]


def test_scripted_model_waits_for_the_first_token_then_streams_at_the_rate(tmp_path):
    metrics, arrivals = run(tmp_path, ScriptedModel([WORDS], ttft=0.3, tokens_per_second=50))
    assert metrics.ttft_ms >= 290, metrics
    # 19 more tokens at 50/s after the first: at least 0.38 s of streaming
    assert metrics.model_ms >= 290 + 370, metrics
    assert arrivals[-1] - arrivals[0] >= 0.37 and len(arrivals) == 20
    assert metrics.model_ms < 5000  # paced by deadlines: no runaway drift even on a busy machine


def test_a_reply_overrides_the_models_latency(tmp_path):
    model = ScriptedModel([Reply(WORDS, delay=0.05, tokens_per_second=1000)], ttft=2.0, tokens_per_second=2)
    metrics, _ = run(tmp_path, model)
    assert 40 <= metrics.ttft_ms < 1500 and metrics.model_ms < 1500, metrics


def test_function_model_latency_for_returned_and_streamed_replies(tmp_path):
    metrics, _ = run(tmp_path, FunctionModel(lambda m, t: WORDS, ttft=0.2, tokens_per_second=100))
    assert metrics.ttft_ms >= 190 and metrics.model_ms >= 190 + 180, metrics

    async def gen(messages, tools):
        for i in range(10):
            yield f"g{i} "
    metrics, arrivals = run(tmp_path / "gen", FunctionModel(gen, ttft=0.1, tokens_per_second=50))
    assert metrics.ttft_ms >= 90 and arrivals[-1] - arrivals[0] >= 0.17, (metrics, arrivals)


def test_no_latency_by_default_and_bad_values_are_refused(tmp_path):
    metrics, _ = run(tmp_path, ScriptedModel([WORDS]))
    assert metrics.ttft_ms < 200
    with pytest.raises(InvalidOperationError, match="tokens_per_second"):
        Latency(0.1, 0)
    with pytest.raises(InvalidOperationError):
        ScriptedModel(["x"], ttft=-1)
