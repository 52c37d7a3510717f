"""The Runs panel's question to a store of 100,000 runs: a page of the newest runs, filtered by the store.

For each backend (TinyDB files, SQLite, PostgreSQL on loopback, started here as in the tests) the store is
filled with N runs (1,000 sessions, 10 agents, 20 notebooks, 1% failed, a rare word in 0.5% of the
queries), then one page of 50 is asked through ``Repository.query_runs``: unfiltered, the next page (a
cursor), by agent, by status (failed), by notebook, by text (the rare word), median of 20 after a first
ask. Beside it the way it was done before: every run read (``list_runs``), filtered and sorted in Python.
TinyDB's first ask builds its in-memory index (``storage/run_index.py``): "open + first page" times a new
repository on the filled store (reading its run index, building the query's index, one page). Last, what the
Runs panel waits for: the first page over HTTP from a real Jupyter server on the store (goal: <= 200 ms).

    .venv/bin/python bench/runs_panel_bench.py [--runs 100000] [--backends tinydb sqlite postgres]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

from agio_notebook.core import AgentRun, RunStatus
from agio_notebook.storage import RunFilter, new_repository

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

PAGE = 50
ASKS = 20


def make_runs(n: int) -> list[AgentRun]:
    runs = []
    for i in range(n):
        query = f"question {i} about {'zanzibar' if i % 200 == 7 else 'the weather'}"
        runs.append(AgentRun(session_id=f"session-{i % 1000}", query=query, agent_name=f"agent{i % 10}",
                             status=RunStatus.FAILED if i % 100 == 3 else RunStatus.COMPLETED,
                             notebook=f"lesson{i % 20}.ipynb", final_text=f"answer {i}", started_at=1.7e9 + i,
                             ended_at=1.7e9 + i + 0.5))
    return runs


def fill(repo, runs: list[AgentRun]) -> None:
    group = getattr(repo, "commit_group", None)
    for start in range(0, len(runs), 1000):
        chunk = [{"run": r} for r in runs[start:start + 1000]]
        if group is not None:
            group(chunk)
        else:
            for commit in chunk:
                repo.commit(**commit)


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000.0


def median_ms(fn) -> float:
    fn()  # warm: caches, the index, the statement
    return statistics.median(timed(fn) for _ in range(ASKS))


def in_python(repo, where: RunFilter) -> list[AgentRun]:
    """Before the query: every run read, then filtered and sorted here."""
    runs = [r for r in repo.list_runs() if where.matches(r.to_dict())]
    runs.sort(key=lambda r: (r.started_at, r.id), reverse=True)
    return runs[:PAGE]


CASES = [("newest", RunFilter()), ("by agent", RunFilter(agent="agent3")), ("failed", RunFilter(status="failed")),
         ("by notebook", RunFilter(notebook="lesson7.ipynb")), ("text 'zanzibar'", RunFilter(text="zanzibar"))]


def from_server(target: str, workdir: str) -> tuple[float, float]:
    """The panel's first page over HTTP from a real Jupyter server on the store: the first ask (the server opens
    the store then) and the median of ASKS after it, in ms."""
    import urllib.request
    from pathlib import Path

    from lab_support import running_lab

    root = Path(workdir) / "served"
    root.mkdir(exist_ok=True)
    env = {**os.environ, "AGIO_STORE": target}
    with running_lab(root, env) as (base, token):
        url = f"{base}/agio/api/runs?limit={PAGE}&token={token}"
        cold = timed(lambda: urllib.request.urlopen(url).read())
        return cold, median_ms(lambda: urllib.request.urlopen(url).read())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--backends", nargs="+", default=["tinydb", "sqlite", "postgres"])
    args = ap.parse_args()
    runs = make_runs(args.runs)
    print("load average (1, 5, 15 min) at the start: " + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    print(f"{args.runs:,} runs, pages of {PAGE}, median of {ASKS} asks (ms)\n")
    print(f"{'backend':<9} {'page':<17} {'query_runs':>11} {'in Python':>10} {'ratio':>7}")
    for backend in args.backends:
        workdir = tempfile.mkdtemp(prefix="agio_runsbench_")
        server = None
        try:
            if backend == "postgres":
                from store_backends import running_postgres

                server = running_postgres()
                target = server.__enter__().new_database()
            elif backend == "sqlite":
                target = f"sqlite:///{workdir}/agio.db"
            else:
                target = os.path.join(workdir, "store")
            repo = new_repository(target)
            t0 = time.perf_counter()
            fill(repo, runs)
            filled = time.perf_counter() - t0
            repo.close()
            fresh = new_repository(target)
            cold = timed(lambda: fresh.query_runs(limit=PAGE))
            fresh.close()
            repo = new_repository(target)
            for name, where in CASES:
                page = repo.query_runs(where, limit=PAGE)
                assert [r.id for r in page.runs] == [r.id for r in in_python(repo, where)], (backend, name)
                fast = median_ms(lambda: repo.query_runs(where, limit=PAGE))
                slow = median_ms(lambda: in_python(repo, where)) if name in ("newest", "text 'zanzibar'") else None
                ratio = f"{slow / fast:6.0f}x" if slow else ""
                print(f"{backend:<9} {name:<17} {fast:11.2f} {slow if slow else '':>10.6} {ratio:>7}", flush=True)
            second = repo.query_runs(limit=PAGE).next_cursor
            print(f"{backend:<9} {'next page':<17} {median_ms(lambda: repo.query_runs(limit=PAGE, cursor=second)):11.2f}")
            print(f"{backend:<9} {'open + 1st page':<17} {cold:11.1f}   (filled in {filled:.1f} s)", flush=True)
            repo.close()
            served_cold, served = from_server(target, workdir)
            print(f"{backend:<9} {'server: 1st page':<17} {served:11.1f}   (its first ask, the store opened: "
                  f"{served_cold:.0f} ms)\n", flush=True)
        finally:
            if server is not None:
                server.__exit__(None, None, None)
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
