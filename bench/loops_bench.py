"""One OpenAIModel across event loops against LiteLLM's proxy (uvicorn, keep-alive), side by side in one run.

- one loop: every call awaited on one loop (the client and its connection stay warm);
- alternating: ``run_sync`` (a new loop each time), ``asyncio.run(await runner.run)`` (a new loop) and a
  batch item (the scheduler's loop), in turn: a client per loop, made on the loop's first call;
- a new loop per call: ``run_sync`` only, the worst case (a client and a connection every call);
- one client shared by every loop (what ``OpenAIModel`` did before): how many calls fail;
- the same one loop and new-loop-per-call rows with an offline model: what a new loop costs without HTTP.

Then the cost of a per-loop client on its own: making it (with the shared TLS context, and without it as
the HTTP library would) and its first call on a new loop against a warm call.

Needs ``.venv-litellm`` (scripts/setup.sh). ``python bench/loops_bench.py [CALLS]``.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from litellm_proxy import MASTER_KEY, MODEL, LiteLLMProxy  # noqa: E402

from agio_notebook import Agent, ExecutionConfig, FunctionModel, StepRunner  # noqa: E402
from agio_notebook.models import OpenAIModel  # noqa: E402
from agio_notebook.scheduling import batch  # noqa: E402
from agio_notebook.storage import InMemoryRepository  # noqa: E402

CALLS = int(sys.argv[1]) if len(sys.argv) > 1 else 60


LOOPS: list[asyncio.AbstractEventLoop] = []


def one_loop(runner: StepRunner) -> Callable[[int], bool]:
    """Every call on one loop that stays open (the way a notebook's worker loop does)."""
    loop = asyncio.new_event_loop()
    LOOPS.append(loop)
    return lambda i: loop.run_until_complete(runner.run(None, f"q{i}")).status.value == "completed"


def alternating(runner: StepRunner, agent: Agent, repo: InMemoryRepository) -> Callable[[int], bool]:
    kinds = [
        lambda i: runner.run_sync(None, f"s{i}").status.value == "completed",
        lambda i: asyncio.run(runner.run(None, f"a{i}")).status.value == "completed",
        lambda i: batch(agent, [f"b{i}"], repository=repo).wait(60).results()["status"].tolist() == ["completed"],
    ]
    return lambda i: kinds[i % 3](i)


def new_loop_each(runner: StepRunner) -> Callable[[int], bool]:
    return lambda i: runner.run_sync(None, f"n{i}").status.value == "completed"


def shared_client(base_url: str) -> Callable[[int], bool]:
    """The old way: one AsyncOpenAI for every loop (a call on a new loop each time)."""
    from openai import AsyncOpenAI

    client = AsyncOpenAI(api_key=MASTER_KEY, base_url=base_url, max_retries=0)

    async def call() -> bool:
        try:
            stream = await client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}],
                                                          stream=True, extra_body={"mock_response": "pong"})
            async with stream:
                return "pong" == "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        except Exception:  # noqa: BLE001 - counted as a failed call
            return False

    return lambda i: asyncio.run(call())


def interleaved(scenarios: dict[str, Callable[[int], bool]]) -> dict[str, list[tuple[float, bool]]]:
    """One call of each scenario in turn, CALLS times: the machine's noise falls on all of them alike."""
    out: dict[str, list[tuple[float, bool]]] = {name: [] for name in scenarios}
    for i in range(CALLS):
        for name, call in scenarios.items():
            t0 = time.perf_counter()
            ok = call(i)
            out[name].append(((time.perf_counter() - t0) * 1000.0, ok))
    return out


def client_costs(model: OpenAIModel) -> dict[str, float]:
    from openai import AsyncOpenAI

    n = 50
    t0 = time.perf_counter()
    for _ in range(n):
        model._loop_client()
    shared = (time.perf_counter() - t0) * 1000.0 / n
    t0 = time.perf_counter()
    for _ in range(n // 5):
        AsyncOpenAI(api_key=MASTER_KEY, base_url="http://127.0.0.1:9/v1")
    own = (time.perf_counter() - t0) * 1000.0 / (n // 5)
    return {"client (shared TLS context)": shared, "client (its own TLS context)": own}


def first_and_warm(model: OpenAIModel, rounds: int = 20) -> tuple[list[float], list[float]]:
    """A model call's time on a loop's first call (new client, new connection) and on its second."""
    first, warm = [], []

    async def two() -> None:
        for bucket in (first, warm):
            t0 = time.perf_counter()
            async for _ in model.stream([{"role": "user", "content": "hi"}], []):
                pass
            bucket.append((time.perf_counter() - t0) * 1000.0)

    for _ in range(rounds):
        asyncio.run(two())
    return first, warm


def row(name: str, samples: list[tuple[float, bool]], base: float | None) -> str:
    ms = sorted(t for t, _ in samples)
    errors = sum(not ok for _, ok in samples)
    mean = statistics.fmean(ms)
    p95 = ms[min(len(ms) - 1, int(0.95 * len(ms)))]
    ratio = f"{mean / base:.2f}x" if base else "1.00x"
    return f"| {name} | {len(ms)} | {errors} | {mean:.1f} | {statistics.median(ms):.1f} | {p95:.1f} | {ratio} |"


def main() -> None:
    proxy = LiteLLMProxy(Path(tempfile.mkdtemp(prefix="agio-loops-"))).start()
    try:
        model = OpenAIModel(MODEL, base_url=proxy.base_url, api_key=MASTER_KEY, max_retries=0,
                            settings={"extra_body": {"mock_response": "pong"}})
        agent = Agent(model=model, name="loops", config=ExecutionConfig(enable_retry=False))
        repo = InMemoryRepository()
        runner = StepRunner(agent, repository=repo)
        one_loop(runner)  # warm-up: imports, the proxy's first requests
        offline = StepRunner(Agent(model=FunctionModel(lambda m, t: "pong"), name="offline"), repository=repo)
        scenarios = {
            "one loop (keep-alive)": one_loop(runner),
            "alternating run_sync / await / batch": alternating(runner, agent, repo),
            "a new loop per call (run_sync)": new_loop_each(runner),
            "one client shared by every loop (before)": shared_client(proxy.base_url),
            "offline model, one loop": one_loop(offline),
            "offline model, a new loop per call": new_loop_each(offline),
        }
        for name, call in scenarios.items():  # warm-up: imports, the proxy's first requests
            call(-1)
        results = interleaved(scenarios)
        base = statistics.fmean(t for t, _ in results["one loop (keep-alive)"])
        print(f"LiteLLM proxy (uvicorn, keep-alive), {CALLS} calls per row, rows interleaved call by call, "
              "whole runs (engine + HTTP)\n")
        print("| how the model is called | calls | errors | mean ms | p50 ms | p95 ms | vs one loop |")
        print("|---|---|---|---|---|---|---|")
        for name, samples in results.items():
            print(row(name, samples, base))
        costs = client_costs(model)
        first, warm = first_and_warm(model)
        print("\nThe cost of a client per loop\n")
        print("| what | ms |")
        print("|---|---|")
        for name, ms in costs.items():
            print(f"| making a {name} | {ms:.2f} |")
        print(f"| a model call, the loop's first (new client, new connection), p50 | {statistics.median(first):.2f} |")
        print(f"| a model call, the loop's second (warm), p50 | {statistics.median(warm):.2f} |")
        print(f"| added by a new loop, p50 | {statistics.median(first) - statistics.median(warm):.2f} |")
        def paired(a: str, b: str) -> float:  # call by call (interleaved): the machine's noise cancels
            return statistics.median(x - y for (x, _), (y, _) in zip(results[a], results[b]))

        http = paired("a new loop per call (run_sync)", "one loop (keep-alive)")
        bare = paired("offline model, a new loop per call", "offline model, one loop")
        print(f"| a new loop per call against one loop, paired median: endpoint {http:.2f}, offline {bare:.2f}; "
              f"the endpoint's share | {http - bare:.2f} |")
    finally:
        for loop in LOOPS:  # as asyncio.run ends a loop: its clients close with it
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
        proxy.stop()


if __name__ == "__main__":
    main()
