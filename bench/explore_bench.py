"""Explore: diff of two 500-step runs, replay of a 1,000-step session, per-run overhead of a sweep.

- diff: two runs of 500 steps each (250 tool turns, every 5th answer changed) in the TinyDB store;
  the time to build the diff and render its HTML, its DataFrame and its MIME bundle. Target < 1 s.
- replay: a 1,000-step session (100 runs of 10 steps: a question, four tool turns, an answer) recorded
  with a model that answers after ``--latency`` seconds per call (50 ms: faster than any hosted
  model), then replayed with ``ReplayModel.from_session`` into an in-memory store and into a TinyDB
  store. The ratio is recorded wall time / replay wall time. Target >= 20x.
- sweep: 100 variants of one step on a zero-latency model. A sweep is itself one batch of the
  scheduling executor (each execution forks and runs); its wall time per run against the same 100
  forks made first and run as one plain batch (``scheduling.batch.run_jobs``), and run directly by
  ``StepRunner.fork`` one after another. Target: sweep per-run time within 2x of the batch's.

    .venv/bin/python bench/explore_bench.py [--latency 0.05]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
from typing import Any

from agio_notebook import Agent, ExecutionConfig, FunctionModel, Reply, StepRunner, tool
from agio_notebook.execution import fork_session
from agio_notebook.explore import diff, sweep
from agio_notebook.scheduling.batch import run_jobs
from agio_notebook.models import ReplayModel
from agio_notebook.storage import InMemoryRepository, TinyDBRepository


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def tool_turns(turns: int, answer: str, latency: float = 0.0) -> FunctionModel:
    """Calls ``lookup`` ``turns`` times per question, then answers."""
    async def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        if latency:
            await asyncio.sleep(latency)
        done = 0
        for m in reversed(messages):
            if m["role"] == "user":
                break
            done += m["role"] == "tool"
        if done < turns:
            return Reply.call("lookup", key=f"k{done}")
        return Reply(text=answer)
    return FunctionModel(reply, name="bench")


def bench_diff(root: str) -> tuple[float, int]:
    repo = TinyDBRepository(root)
    config_steps = 260
    a = asyncio.run(StepRunner(Agent(model=tool_turns(249, "first answer")), repository=repo,
                               config=ExecutionConfig(max_steps=config_steps)).run(None, "go"))

    async def changed(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        done = sum(m["role"] == "tool" for m in messages)
        if done < 249:
            return Reply.call("lookup", key=f"k{done}" if done % 5 else f"changed{done}")
        return Reply(text="second answer")

    b = asyncio.run(StepRunner(Agent(model=FunctionModel(changed, name="bench")), repository=repo,
                               config=ExecutionConfig(max_steps=config_steps)).run(None, "go"))
    t0 = time.perf_counter()
    d = diff(a.run_id, b.run_id, repository=repo)
    d._repr_mimebundle_()
    d.frame
    elapsed = time.perf_counter() - t0
    repo.close()
    return elapsed, len(d.rows)


def bench_replay(root: str, latency: float) -> list[tuple[str, float, float]]:
    repo = TinyDBRepository(root + "/rec")
    runner = StepRunner(Agent(model=tool_turns(4, "answer", latency), tools=[lookup]), repository=repo)
    session = None
    t0 = time.perf_counter()
    for i in range(100):
        session = asyncio.run(runner.run(session, f"question {i}")).session_id
    recorded = time.perf_counter() - t0
    assert len(repo.get_steps(session)) == 1000
    rows = []
    for name, target in (("in-memory store", InMemoryRepository()), ("TinyDB store", TinyDBRepository(root + "/rep"))):
        t0 = time.perf_counter()
        replay = ReplayModel.from_session(session, repo)
        again = StepRunner(Agent(model=replay, tools=[lookup]), repository=target)

        async def all_runs() -> None:
            sid = None
            for i in range(100):
                sid = (await again.run(sid, f"question {i}")).session_id

        asyncio.run(all_runs())
        elapsed = time.perf_counter() - t0
        assert replay.replayed == 500
        rows.append((name, recorded, elapsed))
        target.close()
    repo.close()
    return rows


def bench_sweep(root: str, reps: int = 3) -> tuple[float, float, float]:
    """Median per-run seconds of ``reps`` sweeps, of ``reps`` direct loops and of ``reps`` batches of the same
    forks on the scheduling executor, alternating (a shared machine's load moves between them)."""
    repo = TinyDBRepository(root)
    model = FunctionModel(lambda m, t: "ok", name="zero")
    first = asyncio.run(StepRunner(Agent(model=model), repository=repo).run(None, "question"))
    second = asyncio.run(StepRunner(Agent(model=model), repository=repo).run(first.session_id, "again"))
    prompts = [f"variant {i}" for i in range(100)]
    runner = StepRunner(Agent(model=model), repository=repo)

    async def direct() -> None:  # the floor: the same forks and runs, one at a time, no sweep machinery
        for p in prompts:
            await runner.fork(second.session_id, 2, p)

    def batch() -> None:  # the batch executor: the same forks (made first), then one execution per variant
        forks = [fork_session(second.session_id, 2, repo) for _ in prompts]
        handle = run_jobs([(Agent(model=model), f, p) for f, p in zip(forks, prompts)], concurrency=4,
                          repository=repo)
        handle.wait()
        assert len(handle.results()) == 100

    swept, floor, batched = [], [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        result = sweep(second.session_id, at=3, agent=Agent(model=model), prompts=prompts, repository=repo,
                       monitor=False, concurrency=4)
        swept.append((time.perf_counter() - t0) / 100)
        assert len(result.frame) == 100 and set(result.frame["status"]) == {"completed"}
        t0 = time.perf_counter()
        asyncio.run(direct())
        floor.append((time.perf_counter() - t0) / 100)
        t0 = time.perf_counter()
        batch()
        batched.append((time.perf_counter() - t0) / 100)
    repo.close()
    return statistics.median(swept), statistics.median(floor), statistics.median(batched)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per recorded model call")
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="agio-explore-bench-", dir="/var/tmp")
    try:
        elapsed, rows = bench_diff(tmp + "/diff")
        print("| diff of two 500-step runs | rows | seconds | target |")
        print("|---|---:|---:|---|")
        print(f"| build + HTML + frame + bundle | {rows} | {elapsed:.3f} | < 1 s ({'met' if elapsed < 1 else 'MISSED'}) |")
        print()
        print(f"| replay of a 1,000-step session ({args.latency * 1000:.0f} ms per recorded call) "
              "| recorded s | replay s | faster | target |")
        print("|---|---:|---:|---:|---|")
        for name, recorded, replayed in bench_replay(tmp + "/replay", args.latency):
            ratio = recorded / replayed
            print(f"| into an {name} | {recorded:.2f} | {replayed:.2f} | {ratio:.1f}x | >= 20x "
                  f"({'met' if ratio >= 20 else 'MISSED'}) |")
        print()
        swept, floor, batched = bench_sweep(tmp + "/sweep")
        ratio = swept / batched
        print("| sweep of 100 variants, zero-latency model, medians of 3 | ms per run | / batch | target |")
        print("|---|---:|---:|---|")
        print(f"| direct StepRunner.fork, one at a time | {floor * 1000:.2f} | {floor / batched:.2f} | |")
        print(f"| the batch executor (scheduling.run_jobs) on the same forks | {batched * 1000:.2f} | 1.00 | |")
        print(f"| sweep() | {swept * 1000:.2f} | {ratio:.2f} | <= 2x ({'met' if ratio <= 2 else 'MISSED'}) |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
