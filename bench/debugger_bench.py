"""Step mode's cost: a run in step mode whose breakpoints never fire against a normal run, and the
browser's pause-to-view and click-to-resume times.

Engine time per turn (one model call and its tool call, stored) is measured on the same scripted agent,
normal and in step mode with breakpoints that never fire (a named tool it never calls, a step number it
never reaches, a predicate that says no), alternating, several rounds; the median per turn is reported
with the ratio (target: at most 1.1x). The browser's times are the ones ``tests/test_debugger_browser.py``
measured in a real JupyterLab (written to ``test-output/debugger_timings.json``; target under 100 ms each).

    .venv/bin/python bench/debugger_bench.py [--turns 40] [--rounds 7] [--store DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from agio_notebook import Agent, ExecutionConfig, Reply, ScriptedModel, StepRunner, tool
from agio_notebook.storage import InMemoryRepository, TinyDBRepository

ROOT = Path(__file__).resolve().parent.parent


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def agent(turns: int) -> Agent:
    replies = [Reply.call("add", _id=f"c{i}", a=i, b=1) for i in range(turns)] + ["done"]
    return Agent(model=ScriptedModel(replies), tools=[add], config=ExecutionConfig(max_steps=turns + 1))


async def normal(turns: int, repo) -> float:
    runner = StepRunner(agent(turns), repository=repo)
    t0 = time.perf_counter()
    result = await runner.run(None, "count")
    assert result.status.value == "completed", result.error
    return (time.perf_counter() - t0) / (turns + 1)


async def stepping(turns: int, repo) -> float:
    runner = StepRunner(agent(turns), repository=repo)
    t0 = time.perf_counter()
    debug = runner.debug(None, "count", breakpoints=["tool:never", 10_000, lambda pause: False])
    async for _ in debug:
        raise AssertionError("a breakpoint fired")
    assert debug.result.status.value == "completed", debug.result.error
    return (time.perf_counter() - t0) / (turns + 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--store", choices=("memory", "tinydb"), default="tinydb")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        make = (lambda n: TinyDBRepository(f"{tmp}/{n}")) if args.store == "tinydb" else (lambda n: InMemoryRepository())
        plain, step = [], []
        for i in range(args.rounds):  # alternate, so a busy machine slows both alike
            plain.append(asyncio.run(normal(args.turns, make(f"n{i}"))))
            step.append(asyncio.run(stepping(args.turns, make(f"s{i}"))))
    p, s = statistics.median(plain), statistics.median(step)
    print(f"engine time per turn ({args.turns} tool turns + answer, {args.store} store, median of {args.rounds})")
    print(f"{'normal run':<34}{p * 1000:>10.3f} ms")
    print(f"{'step mode, no breakpoint fires':<34}{s * 1000:>10.3f} ms")
    print(f"{'ratio (target <= 1.10)':<34}{s / p:>10.3f}x")
    timings = ROOT / "test-output" / "debugger_timings.json"
    print()
    if not timings.exists():
        print("browser: no measurements yet (run tests/test_debugger_browser.py)")
        return
    # pause to view is measured until the view was painted; runs recorded before that measured until inserted
    runs = [r for r in json.loads(timings.read_text()).get("runs", []) if r.get("view") == "painted"]
    build = next((ROOT / "agio_notebook" / "labextension" / "static").glob("remoteEntry.*.js"), None)
    this_build = [r for r in runs if build is not None and r.get("extension") == build.name]
    if this_build:  # the extension as built now, not earlier builds' figures
        runs = this_build
    loads = [r["load_1m"] for r in runs if "load_1m" in r]
    first = [r["pause_to_view_ms"][0] for r in runs if r.get("pause_to_view_ms")]
    later = [ms for r in runs for ms in r.get("pause_to_view_ms", [])[1:]]
    resume = [ms for r in runs for ms in r.get("click_to_resume_ms", [])]
    which = f"the {len(runs)} runs with this extension build" if this_build else f"the last {len(runs)} runs"
    load = f"; load average {min(loads):.1f} – {max(loads):.1f}" if loads else ""
    print(f"browser (real JupyterLab, chromium; {which} of tests/test_debugger_browser.py{load};"
          " pause to view: until painted)")
    made = [r for r in runs if r.get("made_to_view_ms")]  # runs that also say when the kernel made the view
    first_made = [r["made_to_view_ms"][0] for r in made]
    first_wait = [r["pause_to_view_ms"][0] - r["made_to_view_ms"][0] for r in made]
    for label, values in (("pause to view, first of the page", first), ("pause to view, later pauses", later),
                          ("click or key to resume", resume)):
        if values:
            over = sum(v >= 100 for v in values)
            print(f"{label:<34}{min(values):>7.1f} – {max(values):.1f} ms, median {statistics.median(values):.1f} ms, "
                  f"{over} of {len(values)} at 100 ms or more (target: none)")
    if made:
        print(f"of the first pause's time ({len(made)} runs): the kernel waiting for the extension's answer "
              f"{min(first_wait):.1f} – {max(first_wait):.1f} ms (median {statistics.median(first_wait):.1f}); "
              f"the page, from the view made to painted, {min(first_made):.1f} – {max(first_made):.1f} ms "
              f"(median {statistics.median(first_made):.1f})")

if __name__ == "__main__":
    main()
