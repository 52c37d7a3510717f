"""The SQL stores as they grow: durable append latency from 1k to 1M stored steps, and the 1M-row
``steps()`` frame on SQLite.

For each size the store is filled in bulk to that many steps across 1,000 sessions, then one durable
commit (a step and its event, what the engine does per checkpoint) is timed 200 times into a
session (median and p95).  The 1M-row frame is built twice, side by side: from ``sqlite3`` rows, and
through Arrow (the ``sqlite`` extra's ADBC driver in a reader process, what ``frames.steps()`` uses for
a large store when it is installed).  SQLite is a file on disk (WAL, synchronous=FULL); PostgreSQL is Debian's
server on loopback, started here as in the tests.  Targets: append latency at 1M within 1.5x of 1k on
each; the 1M-row steps() frame on SQLite in under 10 s.

    .venv/bin/python bench/sql_store_bench.py [--sizes 1000 10000 100000 1000000] [--backends sqlite postgres]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

from agio_notebook import frames
from agio_notebook.core import Step, StepEvent, StepEventType, StepMetrics, StepRole
from agio_notebook.storage import PostgresRepository, SQLiteRepository
from agio_notebook.storage.sql import _STEP_UPSERT, SQLRepository, _step_row

SESSIONS = 1000
DISK_DIR = os.environ.get("BENCH_DISK_DIR", "/var/tmp")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))


def make_step(session_id: str, seq: int) -> Step:
    role = StepRole.USER if seq % 2 else StepRole.ASSISTANT
    return Step(session_id=session_id, run_id="r" * 32, sequence=seq, role=role, content="x" * 400,
                metrics=StepMetrics(prompt_tokens=100, completion_tokens=50, total_tokens=150, ttft_ms=12.5,
                                    model_ms=80.0, duration_ms=80.0))


def bulk_fill(repo, start: int, stop: int) -> None:
    """Steps number ``start`` .. ``stop - 1`` of the store, spread over SESSIONS sessions, in big batches."""
    cur = repo._conn.cursor()
    batch = []
    for n in range(start, stop):
        sid, seq = f"s{n % SESSIONS:04d}", 1_000_000 + n // SESSIONS
        batch.append(_step_row(make_step(sid, seq)))
        if len(batch) == 20_000 or n == stop - 1:
            cur.executemany(repo._sql(_STEP_UPSERT), batch)
            repo._conn.commit()
            batch = []
    cur.close()


def settle(repo) -> None:
    """After a bulk fill: let the database finish its own work (statistics, checkpoint) before timing."""
    if isinstance(repo, PostgresRepository):
        repo._conn.autocommit = True
        repo._conn.execute("VACUUM ANALYZE")
        repo._conn.execute("CHECKPOINT")
        repo._conn.autocommit = False
    else:
        repo._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        repo._conn.execute("ANALYZE")


def append_latency(repo, label: str, n: int = 200) -> tuple[float, float]:
    times = []
    for i in range(n):
        step = make_step(f"probe-{label}", i + 1)
        event = StepEvent(StepEventType.STEP_COMPLETED, "r" * 32, step.session_id, i + 1, {"step": step.to_dict()})
        t0 = time.perf_counter()
        repo.commit(steps=[step], events=[event])
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.95 * n) - 1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000, 1_000_000])
    ap.add_argument("--backends", nargs="+", default=["sqlite", "postgres"])
    args = ap.parse_args()
    rows: dict[str, list[tuple[int, float, float]]] = {}
    frame_s = None
    for backend in args.backends:
        workdir = tempfile.mkdtemp(prefix="agio_sqlbench_", dir=DISK_DIR)
        server_context = None
        try:
            if backend == "sqlite":
                repo = SQLiteRepository(os.path.join(workdir, "agio.db"))
            else:
                from store_backends import running_postgres

                server_context = running_postgres()
                repo = PostgresRepository(server_context.__enter__().new_database())
            stored = 0
            for size in sorted(args.sizes):
                t0 = time.perf_counter()
                bulk_fill(repo, stored, size)
                settle(repo)
                fill_s = time.perf_counter() - t0
                stored = size
                p50, p95 = append_latency(repo, f"{backend}-{size}")
                rows.setdefault(backend, []).append((size, p50, p95))
                print(f"{backend:<9} {size:>9,} steps  append p50 {p50:7.3f} ms  p95 {p95:7.3f} ms  "
                      f"(filled in {fill_s:.1f} s)", flush=True)
            if backend == "sqlite":  # the same frame read row by row through sqlite3, then through Arrow
                t0 = time.perf_counter()
                by_rows = frames._steps_frame(SQLRepository.step_columns(repo))
                rows_s = time.perf_counter() - t0
                t0 = time.perf_counter()
                frame = frames.steps(repository=repo)
                frame_s = time.perf_counter() - t0
                assert frame.equals(by_rows)
                print(f"sqlite    steps() frame of {len(frame):,} rows: {frame_s:.2f} s through Arrow, "
                      f"{rows_s:.2f} s through sqlite3 rows ({rows_s / frame_s:.1f}x)", flush=True)
            repo.close()
        finally:
            if server_context is not None:
                server_context.__exit__(None, None, None)
            shutil.rmtree(workdir, ignore_errors=True)
    print("\ntargets")
    for backend, measured in rows.items():
        (lo, lo50, _), (hi, hi50, _) = measured[0], measured[-1]
        ratio = hi50 / lo50
        print(f"  {'PASS' if ratio <= 1.5 else 'FAIL'}  {backend}: append p50 at {hi:,} / at {lo:,}: {ratio:.2f} "
              "(target <= 1.5)")
    if frame_s is not None:
        print(f"  {'PASS' if frame_s < 10 else 'FAIL'}  sqlite: steps() frame of {max(args.sizes):,} rows: "
              f"{frame_s:.2f} s (target < 10 s)")


if __name__ == "__main__":
    main()
