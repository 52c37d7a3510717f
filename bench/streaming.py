"""Streaming throughput: a 20,000-token answer through the runner into the live view's update path.

No kernel: the LiveView's widgets are created and written exactly as in a notebook (the comm layer
has no frontend to talk to), so the count of widget writes is what a kernel would send. Reports
tokens per second through the engine alone and through engine + view, and how many view updates
were produced against the coalescing bound (20 a second of run time, plus the final flush).

    .venv/bin/python bench/streaming.py [--tokens 20000] [--chunk 1]
"""

from __future__ import annotations

import argparse
import asyncio
import time

from agio_notebook import Agent, StepRunner
from agio_notebook.core import StepEventType
from agio_notebook.models import ScriptedModel
from agio_notebook.notebook.live_view import LiveView
from agio_notebook.storage import InMemoryRepository, TinyDBRepository


def answer(tokens: int) -> str:
    return " ".join(f"w{i}" for i in range(tokens))


async def through_engine(text: str, chunk: int, repo) -> tuple[float, int]:
    runner = StepRunner(Agent(model=ScriptedModel([text], chunk_size=chunk)), repository=repo)
    deltas = 0
    t0 = time.perf_counter()
    async for event in runner.run_stream(None, "stream"):
        if event.type is StepEventType.STEP_DELTA:
            deltas += 1
    return time.perf_counter() - t0, deltas


async def through_view(text: str, chunk: int, repo) -> tuple[float, int, LiveView, int]:
    runner = StepRunner(Agent(model=ScriptedModel([text], chunk_size=chunk)), repository=repo)
    live = LiveView()
    deltas = 0
    t0 = time.perf_counter()
    async for event in runner.run_stream(None, "stream"):
        deltas += event.type is StepEventType.STEP_DELTA
        live.feed(event)
    live.flush()
    return time.perf_counter() - t0, deltas, live, len(live.view.conversation()[-1].text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=20_000)
    ap.add_argument("--chunk", type=int, default=1, help="tokens per streamed chunk")
    ap.add_argument("--store", default=None, help="a TinyDB store directory (default: in-memory)")
    args = ap.parse_args()
    text = answer(args.tokens)
    make_repo = (lambda: TinyDBRepository(args.store)) if args.store else InMemoryRepository
    engine_s, deltas = asyncio.run(through_engine(text, args.chunk, make_repo()))
    view_s, _, live, shown = asyncio.run(through_view(text, args.chunk, make_repo()))
    bound = 20 * view_s + 2
    print(f"answer: {args.tokens} tokens in {deltas} deltas ({len(text)} characters), store: "
          f"{'TinyDB' if args.store else 'in-memory'}")
    print(f"{'path':<28} {'seconds':>8} {'tokens/s':>10} {'view flushes':>13} {'widget writes':>14} {'bound':>6}")
    print(f"{'engine only':<28} {engine_s:8.3f} {args.tokens / engine_s:10.0f} {'-':>13} {'-':>14} {'-':>6}")
    print(f"{'engine + live view':<28} {view_s:8.3f} {args.tokens / view_s:10.0f} {live.flushes:>13} "
          f"{live.updates:>14} {bound:6.0f}")
    assert shown == len(text), "the view must end with the whole answer"
    verdict = "PASS" if live.flushes <= bound else "FAIL"
    print(f"\n{verdict}: {live.flushes} view flushes for {deltas} deltas (bound: 20/s of run time + 2)")


if __name__ == "__main__":
    main()
