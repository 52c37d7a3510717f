"""Sandbox start and call latency, and the cost of forking a session with a big workspace.

Sandbox: cold start (a new session's first call, ``1+1``: bubblewrap, the interpreter, the reply) and
warm call (``1+1`` in a live sandbox), p50 and p95, beside a bare ``python -c pass`` subprocess measured
in the same run.  Targets: warm p50 <= 10 ms; cold start <= 3x the bare subprocess.

Fork: ``fork_session`` alone (a fork copies steps, never files: its workspace is rebuilt from the
shared blobs when it is first used), then with its workspace brought to disk (what the fork's first
action waits for), for a session whose workspace holds 1,000 files / 100 MB, against one with an empty
workspace, beside ``cp -a`` of the same workspace.  Target: the fork under 10x.  ``BENCH_DIR`` picks the
filesystem: on XFS or btrfs the restore clones blocks (copy-on-write) instead of copying them.

    .venv/bin/python bench/actions_bench.py [--cold 15] [--warm 300] [--forks 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agio_notebook import Agent, ExecutionConfig, ScriptedModel, StepRunner, fork_session
from agio_notebook.models.scripted import Reply
from agio_notebook.storage import TinyDBRepository
from agio_notebook.tools.context import ToolCallContext
from agio_notebook.toolkits import python_sandbox, workspace_for
from agio_notebook.toolkits.sandbox import Sandbox, pool


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000.0


def sandbox_rows(root: Path, cold_n: int, warm_n: int) -> list[tuple[str, float, float]]:
    bare = [timed(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True)) for _ in range(cold_n)]
    cold: list[float] = []
    for i in range(cold_n + 1):
        box = Sandbox(workspace_for(f"cold-{i}", root))
        ms = timed(lambda: box.execute("1+1"))
        box.close()
        if i:  # the first one also probes whether bubblewrap works at all
            cold.append(ms)
    box = Sandbox(workspace_for("warm", root))
    box.execute("1+1")
    warm = [timed(lambda: box.execute("1+1")) for _ in range(warm_n)]
    box.close()
    return [("bare `python -c pass` subprocess", statistics.median(bare), pct(bare, 0.95)),
            ("sandbox cold start (first call)", statistics.median(cold), pct(cold, 0.95)),
            ("sandbox warm call (1+1)", statistics.median(warm), pct(warm, 0.95))]


def make_session(repo: TinyDBRepository, session: str, code: str) -> int:
    agent = Agent(model=ScriptedModel([Reply.call("run_python", code=code), Reply.say("ok")]),
                  tools=python_sandbox(), config=ExecutionConfig(tool_timeout=600))
    result = asyncio.run(StepRunner(agent, repository=repo).run(session, "make files"))
    assert all(s.status == "ok" for s in result.steps), [s.content for s in result.steps]
    return result.steps[-1].sequence


def fork_ms(repo: TinyDBRepository, session: str, at: int, n: int) -> tuple[list[float], list[float]]:
    """(fork alone, fork + its workspace brought to disk) in ms."""
    alone, total = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        forked = fork_session(session, at, repo)
        t1 = time.perf_counter()
        workspace_for(forked, repository=repo).sync(ToolCallContext(forked, None, "bench", "bench", repository=repo))
        t2 = time.perf_counter()
        alone.append((t1 - t0) * 1000.0)
        total.append((t2 - t0) * 1000.0)
    return alone, total


def copy_ms(src: Path, dest: Path, n: int) -> list[float]:
    """``cp -a`` of a directory (what the filesystem's own copy costs: reflinks where it has them)."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(["cp", "-a", str(src), str(dest)], check=True)
        times.append((time.perf_counter() - t0) * 1000.0)
        subprocess.run(["rm", "-rf", str(dest)], check=True)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cold", type=int, default=15)
    parser.add_argument("--warm", type=int, default=300)
    parser.add_argument("--forks", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        root = Path(tmp)
        os.chmod(root, 0o755)
        os.environ["AGIO_WORKSPACES"] = str(root / "ws")
        rows = sandbox_rows(root / "ws", args.cold, args.warm)
        bare = rows[0][1]
        print("\nSandbox (ms)")
        print(f"{'':36} {'p50':>8} {'p95':>8} {'p50 / bare':>11}")
        for name, p50, p95 in rows:
            print(f"{name:36} {p50:8.2f} {p95:8.2f} {p50 / bare:10.2f}x")

        repo = TinyDBRepository(root / "store")
        empty_at = make_session(repo, "empty", "1")
        big_at = make_session(repo, "big", "import os\nblock = os.urandom(100_000)\nfor i in range(1000):\n"
                                           "    os.makedirs(f'd{i % 10}', exist_ok=True)\n"
                                           "    open(f'd{i % 10}/f{i}.bin', 'wb').write(block[:99_000] + i.to_bytes(4, 'big'))")
        pool.close_all()
        empty_alone, empty = fork_ms(repo, "empty", empty_at, args.forks)
        big_alone, big = fork_ms(repo, "big", big_at, args.forks)
        floor = copy_ms(root / "ws" / "sessions" / "big", root / "copy", args.forks)
        print("\nFork (ms, p50 of %d)" % args.forks)
        print(f"{'':24} {'fork':>8} {'ratio':>7} {'fork + workspace on disk':>25} {'ratio':>7}")
        m = statistics.median
        for name, a, t in (("empty workspace", empty_alone, empty), ("1,000 files / 100 MB", big_alone, big)):
            print(f"{name:24} {m(a):8.1f} {m(a) / m(empty_alone):6.2f}x {m(t):25.1f} {m(t) / m(empty):6.2f}x")
        print(f"{'cp -a of that workspace':24} {'':8} {'':7} {m(floor):25.1f} {m(floor) / m(empty):6.2f}x")
        print(f"(restoring the big workspace: {m(big) / m(floor):.2f}x the filesystem's own cp -a of it)")
        repo.close()


if __name__ == "__main__":
    main()
