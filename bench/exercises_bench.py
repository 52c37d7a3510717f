"""How long ``check()`` takes, per exercise, and how fast a hanging solution is given up.

For each course exercise: ``check()`` of its reference solution, ``--runs`` times with new seeds, p50 and
max (wall time, in this process: what a learner waits for in a cell). Then, per exercise, a solution that
hangs (a sleep, an endless loop, ``input()``, a wait that never ends): the check must fail within the
solution's cap + 1 s, however many scenarios the exercise has. The endpoint exercise waits on purpose (its
scenarios are time limits of 2 s on a local server); a nbgrader cell has 30 s.

    .venv/bin/python bench/exercises_bench.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

from agio_notebook.exercises import EXERCISES, check, exercise
from agio_notebook.teach.solutions import reference

HANGS = {  # exercise -> a solution that never returns, in a way a learner writes one
    "tool_docstring": ("sleep", 'def solution(amount: float, currency: str) -> str:\n'
                       '    """Convert US dollars to another currency.\n\n    Args:\n'
                       '        currency: a three-letter ISO code.\n    """\n    time.sleep(600)'),
    "function_model": ("endless loop", "def solution(messages, tools):\n    while True:\n        pass"),
    "edit_tool_call": ("input()", "def solution(pause):\n    input('b? ')"),
    "stopping_rule": ("sleep", "def solution(messages, tools):\n    time.sleep(600)"),
    "fork_compare_choose": ("await forever", "async def solution(s, c, r):\n    await asyncio.sleep(3600)"),
    "write_scorer": ("endless loop", "def solution(run):\n    while True:\n        time.sleep(0.01)"),
    "pass_evaluation": ("a tool that sleeps", "def _slow(expression: str) -> str:\n    '''Multiply.'''\n"
                        "    time.sleep(600)\n"
                        "solution = Agent(model=literal_model(), tools=[tool(_slow, name='calculator')],\n"
                        "                 system_prompt='Use the calculator. Reply with only the number.')"),
    "memory_second_run": ("blocking in async", "async def solution(run_id, repository):\n    time.sleep(600)"),
    "tool_errors": ("input()", "def solution(city: str) -> str:\n    return input('city? ')"),
    "delegate_to_agent": ("event never set", "def solution(messages, tools):\n    threading.Event().wait()"),
    "endpoint_settings": ("sleep", "def solution(base_url):\n    time.sleep(600)"),
}


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def hanging(name: str) -> object:
    namespace: dict = {}
    exec("import asyncio, threading, time\nfrom agio_notebook import Agent, tool\n"  # noqa: S102 - the bench's own code
         "from agio_notebook.exercises import literal_model\n" + HANGS[name][1], namespace)
    return namespace["solution"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    os.environ["AGIO_STORE"] = tempfile.mkdtemp(prefix="agio-exercises-bench-")
    print(f"check() per exercise, {args.runs} runs each (new seeds), and a hanging solution per exercise; "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    print(f"{'exercise':22} {'scen.':>5} {'p50 ms':>8} {'max ms':>8} │ {'hanging solution':20} {'cap s':>5} "
          f"{'took s':>6} {'≤ cap+1':>7}")
    worst = 0.0
    ok = True
    for name in EXERCISES:
        ex = exercise(name)
        runs = args.runs if name != "endpoint_settings" else max(2, args.runs // 3)
        times = []
        for seed in range(runs):
            started = time.perf_counter()
            result = check(name, reference(name), seed=1000 + seed, record=False)
            times.append((time.perf_counter() - started) * 1000)
            if not result.passed:
                print(f"  {name}: the reference failed at seed {1000 + seed}: {result.summary()}", file=sys.stderr)
                ok = False
        started = time.perf_counter()
        hung = check(name, hanging(name), record=False)
        took = time.perf_counter() - started
        said = "did not return within" in hung.summary() or "called input()" in hung.summary()
        within = took <= ex.time_limit + 1.0 and not hung.passed and said
        ok &= within
        worst = max(worst, took - ex.time_limit)
        print(f"{name:22} {ex.count:>5} {statistics.median(times):>8.0f} {max(times):>8.0f} │ "
              f"{HANGS[name][0]:20} {ex.time_limit:>5g} {took:>6.2f} {'yes' if within else 'NO':>7}")
    print(f"a hanging solution took at most {worst:+.2f} s beyond its cap")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
