"""The scheduler: throughput against the ideal, overhead per execution, Ray against local, and a peer.

1. Throughput. A latency-bound fake model (every call sleeps LATENCY, 2 calls per run: a tool call,
   then the answer), RUNS runs at CONCURRENCY. The ideal is CONCURRENCY / (2 * LATENCY) runs per
   second; the table shows the measured rate and its ratio to the ideal (target >= 0.9).
2. Overhead per execution, with a zero-latency model (1 call per run): a batch at concurrency 1
   against the same runs made one after another by ``StepRunner.run``, same store. The difference,
   per run, is what the scheduler adds (records, logs, queue, loop hop). Target <= 1 ms.
3. Ray against local: the same zero-latency batch on a local Ray (``--ray``; skipped when Ray is
   not installed), overhead per execution against the local backend.
4. A peer: the same latency-bound batch through LangGraph's ``abatch`` with ``max_concurrency``
   (from the ``bench`` extra; skipped when LangGraph is not installed).
5. Group commit on disk: the throughput batch on a TinyDB store on disk (the filesystem is printed;
   tmpfs is refused), with commits made inline on the scheduler loop (the old path: group commit
   switched off) and through the store's writer thread (group commit), and on the in-memory
   repository. Per row: runs/s, fraction of the ideal (target >= 0.6 with group commit), syncs per
   run (fsync, fdatasync and syncfs calls), the scheduler loop's longest stalls (p99 and max of how late a
   2 ms sleep wakes up), the ratio against the in-memory repository, and CPU per run (of it, in the
   kernel: on a shared virtual disk that part varies from run to run). Before each row the bench
   writes back what is dirty and waits until the disk has been idle for 2 s (printed: how long
   that took), so a row does not pay for the files the row before it wrote. A last row runs the
   group-commit batch again right after the first row's store is deleted: on a filesystem that keeps
   freed inodes out of reuse for a while (ext4 without a journal: 60 s, 360 s while the inode's
   table block is dirty) every new session file steps over them, and that row shows the cost.

Stores live in --dir (default: a temporary directory on disk; pass /dev/shm for tmpfs).

    python bench/scheduling.py                 # everything but Ray
    python bench/scheduling.py --ray           # with the Ray rows
    python bench/scheduling.py --quick         # 200 runs instead of 1,000
    python bench/scheduling.py --group-commit  # only table 5
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import os
import shutil
import subprocess
import sys
import threading
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agio_notebook import Agent, ExecutionConfig, FunctionModel, StepRunner  # noqa: E402
from agio_notebook.models.scripted import Reply  # noqa: E402
from agio_notebook.scheduling import Executor, batch  # noqa: E402
from agio_notebook.scheduling import loop as sched_loop  # noqa: E402
from agio_notebook.storage import InMemoryRepository, TinyDBRepository, durability, group_commit  # noqa: E402


async def lookup(key: str) -> str:
    """A trivial tool: the run's first model call asks for it."""
    return key.upper()


def latency_agent(latency: float) -> Agent:
    async def reply(messages: list[dict[str, Any]], tools: Any) -> Reply | str:
        await asyncio.sleep(latency)
        if messages[-1]["role"] == "user":
            return Reply.call("lookup", key="x")
        return "done"

    return Agent(model=FunctionModel(reply, name="fake-latency"), tools=[lookup], name="bench",
                 config=ExecutionConfig(enable_retry=False, stream=False))


def zero_agent() -> Agent:
    return Agent(model=FunctionModel(lambda m, t: "done", name="fake-zero"), name="bench-zero",
                 config=ExecutionConfig(enable_retry=False, stream=False))


def fresh_repo(base: Path, name: str) -> TinyDBRepository:
    path = base / name
    shutil.rmtree(path, ignore_errors=True)
    return TinyDBRepository(path)


def throughput(base: Path | None, runs: int, concurrency: int, latency: float) -> dict[str, Any]:
    """``base=None``: an in-memory repository (no store cost at all: the scheduler's own ceiling)."""
    repo = fresh_repo(base, "throughput") if base is not None else InMemoryRepository()
    ex = Executor(repo, max_concurrency=concurrency)
    inputs = [f"q{i}" for i in range(runs)]
    t0 = time.perf_counter()
    h = batch(latency_agent(latency), inputs, concurrency=concurrency, executor=ex).wait()
    wall = time.perf_counter() - t0
    m = h.metrics()
    assert m["completed"] == runs, m
    ideal = concurrency / (2 * latency)
    return {"runs": runs, "wall_s": wall, "rate": runs / wall, "ideal": ideal, "ratio": runs / wall / ideal}


def direct_runs(repo: TinyDBRepository, n: int) -> float:
    runner = StepRunner(zero_agent(), repository=repo)

    async def go() -> None:
        for i in range(n):
            result = await runner.run(None, f"q{i}")
            assert result.final_text == "done"

    t0 = time.perf_counter()
    asyncio.run(go())
    return time.perf_counter() - t0


def batch_runs(repo: TinyDBRepository, n: int, backend: str | None = None) -> float:
    ex = None if backend == "ray" else Executor(repo, max_concurrency=1)
    t0 = time.perf_counter()
    h = batch(zero_agent(), [f"q{i}" for i in range(n)], concurrency=1, executor=ex, repository=repo,
              backend=backend).wait()
    wall = time.perf_counter() - t0
    assert h.metrics()["completed"] == n, h.metrics()
    return wall


def overhead(base: Path, n: int, reps: int = 3) -> dict[str, float]:
    """Best of ``reps`` for each side, alternating, so a busy neighbour hurts both alike."""
    direct, batched = [], []
    for r in range(reps):
        direct.append(direct_runs(fresh_repo(base, f"direct{r}"), n))
        batched.append(batch_runs(fresh_repo(base, f"batch{r}"), n))
    d, b = min(direct), min(batched)
    return {"direct_ms": d / n * 1000, "batch_ms": b / n * 1000, "overhead_ms": (b - d) / n * 1000}


def ray_overhead(base: Path, n: int) -> dict[str, float] | None:
    if importlib.util.find_spec("ray") is None:
        return None
    from agio_notebook.scheduling.ray_backend import ensure_ray

    ensure_ray()
    batch_runs(fresh_repo(base, "ray-warm"), 10, backend="ray")  # workers started, code imported
    local = batch_runs(fresh_repo(base, "ray-local"), n)
    ray = batch_runs(fresh_repo(base, "ray-ray"), n, backend="ray")
    return {"local_ms": local / n * 1000, "ray_ms": ray / n * 1000, "overhead_ms": (ray - local) / n * 1000}


def langgraph_abatch(runs: int, concurrency: int, latency: float) -> dict[str, Any] | None:
    if importlib.util.find_spec("langgraph") is None:
        return None
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    class State(TypedDict):
        query: str
        calls: int
        answer: str

    async def model(state: State) -> dict[str, Any]:
        await asyncio.sleep(latency)
        return {"calls": state.get("calls", 0) + 1}

    async def tool(state: State) -> dict[str, Any]:
        return {"answer": (await lookup("x"))}

    async def final(state: State) -> dict[str, Any]:
        await asyncio.sleep(latency)
        return {"calls": state["calls"] + 1, "answer": "done"}

    g = StateGraph(State)
    g.add_node("model", model)
    g.add_node("tool", tool)
    g.add_node("final", final)
    g.add_edge(START, "model")
    g.add_edge("model", "tool")
    g.add_edge("tool", "final")
    g.add_edge("final", END)
    app = g.compile()
    t0 = time.perf_counter()
    out = asyncio.run(app.abatch([{"query": f"q{i}", "calls": 0, "answer": ""} for i in range(runs)],
                                 config={"max_concurrency": concurrency}))
    wall = time.perf_counter() - t0
    assert len(out) == runs and all(o["calls"] == 2 and o["answer"] == "done" for o in out)
    ideal = concurrency / (2 * latency)
    return {"runs": runs, "wall_s": wall, "rate": runs / wall, "ideal": ideal, "ratio": runs / wall / ideal}


def filesystem(path: Path) -> str:
    """The type of the filesystem holding ``path`` (as ``df -T`` reports it)."""
    out = subprocess.run(["df", "-T", str(path)], capture_output=True, text=True).stdout.splitlines()
    fs = out[-1].split()[1] if len(out) > 1 else "unknown"
    dev = os.stat(path).st_dev
    block = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}").resolve().name
    journal = Path("/sys/fs/ext4") / block / "journal_task"
    if fs == "ext4" and journal.exists() and journal.read_text().strip() == "<none>":
        return "ext4 without a journal"  # freed inodes stay out of reuse for a while: see the last row
    return fs


class SyncCounter:
    """Counts fsync, fdatasync and syncfs calls while installed (each is one wait for the disk)."""

    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    def __enter__(self) -> SyncCounter:
        self._fsync, self._fdatasync, self._syncfs = os.fsync, os.fdatasync, durability.syncfs

        def counted(fn: Any) -> Any:
            def call(fd: int) -> None:
                with self._lock:
                    self.calls += 1
                fn(fd)
            return call

        os.fsync, os.fdatasync = counted(self._fsync), counted(self._fdatasync)
        durability.syncfs = counted(self._syncfs)
        return self

    def __exit__(self, *exc: Any) -> None:
        os.fsync, os.fdatasync, durability.syncfs = self._fsync, self._fdatasync, self._syncfs


def _busy_ms(stat: Path) -> int:
    """Milliseconds the block device has spent doing I/O since boot (``io_ticks`` in its stat file)."""
    return int(stat.read_text().split()[9])


def settle_disk(path: Path, quiet: float = 2.0, limit: float = 60.0) -> float:
    """Write back what is dirty, then wait until the disk holding ``path`` has been idle for ``quiet``
    seconds (at most ``limit``). A row then measures its own writes, not the write-back and the
    discards of the files an earlier row (or an earlier run of this bench) made and deleted: on a
    virtual disk mounted with ``discard`` those took the group-commit row from 0.70 of the ideal to
    0.40 when it ran right after them. Returns the seconds waited."""
    t0 = time.monotonic()
    os.sync()
    dev = os.stat(path).st_dev
    stat = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}/stat")
    if not stat.exists():
        return time.monotonic() - t0
    busy, quiet_since = _busy_ms(stat), time.monotonic()
    while time.monotonic() - t0 < limit and time.monotonic() - quiet_since < quiet:
        time.sleep(0.25)
        now = _busy_ms(stat)
        if now - busy > 5:  # busy more than 2% of the last quarter second
            quiet_since = time.monotonic()
        busy = now
    return time.monotonic() - t0


def loop_stalls(stop: threading.Event, lags: list[float], tick: float = 0.002) -> Any:
    """On the scheduler loop: how late each ``tick`` sleep wakes up (a stall of the loop)."""
    async def watch() -> None:
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            t = loop.time()
            await asyncio.sleep(tick)
            lags.append(loop.time() - t - tick)
    return sched_loop.submit(watch())


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def grouped_batch(repo: Any, runs: int, concurrency: int, latency: float, *, grouped: bool) -> dict[str, Any]:
    group_commit.enabled = grouped
    try:
        ex = Executor(repo, max_concurrency=concurrency)
        agent = latency_agent(latency)
        batch(agent, ["warm"], executor=ex).wait()  # imports and first-file costs out of the figures
        stop, lags = threading.Event(), []
        watcher = loop_stalls(stop, lags)
        with SyncCounter() as syncs:
            t0, c0 = time.perf_counter(), os.times()
            h = batch(agent, [f"q{i}" for i in range(runs)], concurrency=concurrency, executor=ex).wait()
            c1 = os.times()
            wall, cpu, sys_cpu = time.perf_counter() - t0, c1.user + c1.system - c0.user - c0.system, c1.system - c0.system
        stop.set()
        watcher.result(10)
        assert h.metrics()["completed"] == runs, h.metrics()
    finally:
        group_commit.enabled = True
    ideal = concurrency / (2 * latency)
    return {"rate": runs / wall, "ratio": runs / wall / ideal, "syncs": syncs.calls / runs, "cpu_ms": cpu / runs * 1000, "sys_ms": sys_cpu / runs * 1000,
            "p99_ms": percentile(lags, 0.99) * 1000, "max_ms": max(lags, default=0.0) * 1000}


def group_commit_table(base: Path, runs: int) -> None:
    fs = filesystem(base)
    print(f"5. group commit: {runs} runs, 100 ms per model call, 2 calls per run, concurrency 64, ideal 320 runs/s")
    print(f"   store in {base} on {fs} · load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if fs in ("tmpfs", "ramfs"):
        print("   refused: the store is on tmpfs; pass --dir on a disk")
        return
    removed: list[int] = []

    def delete_inline_store() -> None:
        removed.append(sum(len(files) for _, _, files in os.walk(base / "inline")))
        shutil.rmtree(base / "inline")

    rows = [("TinyDB on disk, commits inline (before)", None, lambda: fresh_repo(base, "inline"), False),
            ("TinyDB on disk, group commit + log (after)", None, lambda: fresh_repo(base, "grouped"), True),
            ("in-memory repository", None, InMemoryRepository, True),
            ("the same, right after a store was deleted", delete_inline_store,
             lambda: fresh_repo(base, "grouped-after-deletion"), True)]
    results = []
    for label, before, make, grouped in rows:
        if before is not None:
            before()
        settled = settle_disk(base)
        repo = make()
        result = grouped_batch(repo, runs, 64, 0.1, grouped=grouped)
        root = getattr(repo, "root", None)  # files a run leaves: each new one is an inode to allocate
        files = sum(len(names) for _, _, names in os.walk(root)) if root is not None else 0
        results.append((label, {**result, "settled_s": settled, "files": files / runs}))
        repo.close()  # each row alone: the last row's store is not left in memory for this one
        del repo
        gc.collect()
    memory = results[2][1]["rate"]
    print(f"   {'store':<42}{'runs/s':>8}{'of ideal':>9}{'syncs/run':>10}{'stall p99':>10}{'stall max':>10}"
          f"{'vs memory':>10}{'cpu/run':>9}{'of it sys':>10}{'files/run':>10}{'disk idle after':>16}")
    for label, r in results:
        print(f"   {label:<42}{r['rate']:>8.1f}{r['ratio']:>9.2f}{r['syncs']:>10.2f}{r['p99_ms']:>8.1f}ms"
              f"{r['max_ms']:>8.1f}ms{r['rate'] / memory:>10.2f}{r['cpu_ms']:>7.1f}ms{r['sys_ms']:>8.1f}ms"
              f"{r['files']:>10.2f}{r['settled_s']:>15.1f}s")
    print(f"   last row: the first row's store ({removed[0]:,} files) deleted just before it; on ext4 without a"
          " journal every new file then steps over the inodes freed in the last 60-360 s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=None, help="where the stores go (default: a temp dir on disk)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--ray", action="store_true", help="also measure the Ray backend")
    ap.add_argument("--group-commit", action="store_true", help="only the group commit table (5)")
    args = ap.parse_args()
    runs = 200 if args.quick else 1000
    base = Path(args.dir or tempfile.mkdtemp(prefix="agio-sched-bench-", dir="/var/tmp"))
    base.mkdir(parents=True, exist_ok=True)
    print(f"stores in {base} · {os.cpu_count()} cores · python {sys.version.split()[0]}\n")
    if args.group_commit:
        group_commit_table(base, runs)
        shutil.rmtree(base, ignore_errors=True) if args.dir is None else None
        return

    print("1. throughput, 100 ms per model call, 2 calls per run, concurrency 64")
    print(f"   {'engine':<34}{'runs':>6}{'wall s':>9}{'runs/s':>9}{'ideal':>8}{'ratio':>7}")
    for label, where in ((f"agio batch, TinyDB in {base}", base), ("agio batch, in-memory repository", None)):
        t = throughput(where, runs, 64, 0.1)
        print(f"   {label[:34]:<34}{t['runs']:>6}{t['wall_s']:>9.2f}{t['rate']:>9.1f}{t['ideal']:>8.0f}{t['ratio']:>7.2f}")
    peer = langgraph_abatch(runs, 64, 0.1)
    if peer is None:
        print("   langgraph abatch: not installed (pip install -e '.[bench]')")
    else:
        print(f"   {'langgraph abatch (no store)':<34}{peer['runs']:>6}{peer['wall_s']:>9.2f}{peer['rate']:>9.1f}"
              f"{peer['ideal']:>8.0f}{peer['ratio']:>7.2f}")

    n = 100 if args.quick else 300
    o = overhead(base, n)
    print(f"\n2. scheduler overhead, zero-latency model, {n} runs, best of 3")
    print(f"   StepRunner.run one after another: {o['direct_ms']:.2f} ms/run")
    print(f"   batch at concurrency 1:            {o['batch_ms']:.2f} ms/run")
    print(f"   overhead per execution:            {o['overhead_ms']:.2f} ms (target <= 1 ms)")

    if args.ray:
        r = ray_overhead(base, 50 if args.quick else 100)
        print("\n3. Ray against local, zero-latency model, concurrency 1")
        if r is None:
            print("   ray: not installed (pip install -e '.[ray]')")
        else:
            print(f"   local {r['local_ms']:.2f} ms/run · ray {r['ray_ms']:.2f} ms/run · "
                  f"ray overhead {r['overhead_ms']:.2f} ms/execution ({r['ray_ms'] / r['local_ms']:.1f}x)")
    print()
    group_commit_table(base, runs)
    shutil.rmtree(base, ignore_errors=True) if args.dir is None else None


if __name__ == "__main__":
    main()
