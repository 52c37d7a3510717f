"""Typing an id back: what resolving an 8-character prefix costs beside a full id, as a store grows.

For stores of N runs (one session each) on TinyDB (a directory) and SQLite (a file), the median time of
``resolve_run_id`` and ``resolve_session_id`` given the full id (one ``get_run``/``get_session``) and
given its first 8 characters (the backend's ``ids_with_prefix``: the TinyDB index, one ``LIKE`` query),
and the ratio. A prefix must cost the same order as a full id at every size.

    .venv/bin/python bench/id_prefix_bench.py [--sizes 1000 10000] [--lookups 200]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from agio_notebook.core import AgentRun, AgentSession, RunStatus
from agio_notebook.storage import new_repository
from agio_notebook.storage.ids import resolve_run_id, resolve_session_id


def fill(repo, n: int) -> list[AgentRun]:
    runs = []
    for _ in range(n):
        session = AgentSession()
        run = AgentRun(session_id=session.session_id, query="q", status=RunStatus.COMPLETED)
        repo.commit(session=session, run=run)
        runs.append(run)
    return runs


def median_ms(fn, args: list[str]) -> float:
    times = []
    for a in args:
        t0 = time.perf_counter()
        fn(a)
        times.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--lookups", type=int, default=200)
    args = parser.parse_args()
    print(f"{'backend':<8} {'runs':>7} {'kind':<8} {'full id ms':>11} {'8-char ms':>10} {'ratio':>6}")
    for backend in ("tinydb", "sqlite"):
        for n in args.sizes:
            with tempfile.TemporaryDirectory() as tmp:
                target = str(Path(tmp) / "store") if backend == "tinydb" else f"sqlite:///{tmp}/store.db"
                repo = new_repository(target)
                runs = fill(repo, n)
                picked = random.sample(runs, min(args.lookups, n))
                for kind, resolve, key in (("run", resolve_run_id, lambda r: r.id),
                                           ("session", resolve_session_id, lambda r: r.session_id)):
                    full = median_ms(lambda i: resolve(repo, i), [key(r) for r in picked])
                    short = median_ms(lambda i: resolve(repo, i), [key(r)[:8] for r in picked])
                    print(f"{backend:<8} {n:>7} {kind:<8} {full:>11.3f} {short:>10.3f} {short / full:>6.1f}")
                repo.close()


if __name__ == "__main__":
    main()
