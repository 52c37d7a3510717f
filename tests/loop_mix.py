"""One OpenAIModel called from every event loop a script reaches, against a keep-alive server (LiteLLM's
proxy on uvicorn): ``run_sync`` twice, ``asyncio.run`` of ``await runner.run``, a batch on the
scheduler's thread, two threads with loops of their own at once, a call cancelled while its request is
in flight (then the same loop and a new one again), a run's LLM judge (``run_coroutine``), and Ray workers.

``python tests/loop_mix.py BASE_URL KEY MODEL [--ray]`` prints one JSON line per call
(``{"where", "status", "text", "error"}``) and then ``{"clients": n}`` (the model's clients alive
at the end); tests/test_provider_loops.py runs it and reads its stderr too.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading

import pandas as pd

from agio_notebook import Agent, ExecutionConfig, StepRunner
from agio_notebook.explore.runner import run_coroutine
from agio_notebook.models import OpenAIModel
from agio_notebook.scheduling import batch
from agio_notebook.storage import InMemoryRepository

_printing = threading.Lock()


def report(where: str, status: str, text: str | None = None, error: str | None = None) -> None:
    text, error = (None if pd.isna(v) else v for v in (text, error))
    with _printing:  # threads report at once: one line each, never two run together
        print(json.dumps({"where": where, "status": status, "text": text, "error": error}), flush=True)


def result(where: str, res) -> None:
    report(where, res.status.value, res.final_text, res.error)


def main(base_url: str, key: str, model_name: str, ray: bool) -> None:
    sent = threading.Event()

    def client():
        """A factory (one client per loop) whose HTTP client says when a request leaves."""
        from openai import AsyncOpenAI, DefaultAsyncHttpxClient

        async def on_request(request) -> None:
            sent.set()

        return AsyncOpenAI(api_key=key, base_url=base_url, max_retries=0,
                           http_client=DefaultAsyncHttpxClient(event_hooks={"request": [on_request]}))

    repo = InMemoryRepository()
    config = ExecutionConfig(enable_retry=False)
    model = OpenAIModel(model_name, base_url=base_url, api_key=key, settings={"extra_body": {"mock_response": "pong"}})
    agent = Agent(model=model, name="loops", config=config)
    runner = StepRunner(agent, repository=repo)

    result("run_sync 1", runner.run_sync(None, "one"))
    result("run_sync 2", runner.run_sync(None, "two"))
    result("asyncio.run(await runner.run)", asyncio.run(runner.run(None, "three")))

    handle = batch(agent, ["b1", "b2", "b3"], repository=repo, concurrency=2).wait(120)
    for row in handle.results().itertuples():
        report(f"batch item {row.Index}", row.status, row.final_text, row.error)
    result("run_sync after the batch", runner.run_sync(None, "four"))

    def in_thread(n: int) -> None:
        result(f"thread {n}", asyncio.run(runner.run(None, f"thread {n}")))

    threads = [threading.Thread(target=in_thread, args=(n,)) for n in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)

    # a call cancelled while its request is in flight (what a kernel interrupt does), on a loop that goes on
    slow = OpenAIModel(model_name, client=client, settings={"extra_body": {"mock_response": "late", "mock_delay": 30}})
    fast = StepRunner(Agent(model=slow, name="cancelled", config=config,
                            model_settings={"extra_body": {"mock_response": "after the cancel", "mock_delay": 0}}),
                      repository=repo)
    slow_runner = StepRunner(Agent(model=slow, name="cancelled", config=config), repository=repo)

    async def cancel_then_call():
        task = asyncio.create_task(slow_runner.run(None, "never answered"))
        deadline = asyncio.get_running_loop().time() + 20
        while not sent.is_set() and not task.done() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        task.cancel()
        try:
            res = await task
            report("cancelled call", res.status.value, res.final_text, res.error)
        except asyncio.CancelledError:
            report("cancelled call", "cancelled")
        return await fast.run(None, "same loop, after the cancel")

    result("same loop after a cancel", asyncio.run(cancel_then_call()))
    result("new loop after a cancel", fast.run_sync(None, "new loop"))

    # an LLM judge's coroutine, run from plain code and from a thread the way a notebook cell does it
    result("run_coroutine", run_coroutine(runner.run(None, "judge")))
    result("run_coroutine with a waiter", run_coroutine(runner.run(None, "judge 2"), on_wait=lambda: None))

    if ray:
        handle = batch(agent, ["r1", "r2"], repository=repo, backend="ray", name="loops-ray").wait(300)
        for row in handle.results().itertuples():
            report(f"ray item {row.Index}", row.status, row.final_text, row.error)
        result("run_sync after Ray", runner.run_sync(None, "five"))
    print(json.dumps({"clients": len(model._clients)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], "--ray" in sys.argv[4:])
