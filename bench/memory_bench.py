"""Memory as it grows: retrieval latency, the cost of adding one experience, and what retrieval adds
to a run's start.

For 1k, 10k and 100k stored experiences (synthetic text over a 5,000-word Zipf vocabulary, all in
one agent's scope, each carrying its vector of the local embedding model): retrieval p50/p95, hybrid
(the default: BM25 and the local model's vectors) and BM25 alone (top 3 skills + top 3 experiences,
200 queries of 4-6 words), the durable add of one experience p50/p95 (its embedding, journal append
+ fsync, incremental index updates), the time to open the store and bring the derived lexical index up
from nothing, and to load the vectors into the vector index. Then the local model's cold load (a fresh
process) and its embedding throughput, and the run-start cost: a one-turn run with memory (10k
experiences) against the same run with memory off.

    .venv/bin/python bench/memory_bench.py [--sizes 1000 10000 100000] [--queries 200] [--adds 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from agio_notebook import Agent, FunctionModel, StepRunner
from agio_notebook.memory import MemoryConfig
from agio_notebook.memory.local_model import LocalEmbeddings, installed
from agio_notebook.memory.records import Experience, to_doc
from agio_notebook.memory.retrieval import retrieve
from agio_notebook.memory.store import _KEYS, MemoryStore
from agio_notebook.memory.vectors import encode
from agio_notebook.storage import TinyDBRepository
from agio_notebook.storage.journal import Journal

DISK_DIR = os.environ.get("BENCH_DISK_DIR", "/var/tmp")
SCOPE = "bench"


def vocabulary(n: int = 5000) -> tuple[list[str], list[float]]:
    rng = random.Random(7)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = sorted({"".join(rng.choice(letters) for _ in range(rng.randint(4, 9))) for _ in range(n * 2)})[:n]
    weights = [1.0 / (rank + 1) for rank in range(n)]
    return words, weights


def sentence(rng: random.Random, words: list[str], weights: list[float], k: int) -> str:
    return " ".join(rng.choices(words, weights, k=k))


def experience(rng: random.Random, words: list[str], weights: list[float]) -> Experience:
    return Experience(situation=sentence(rng, words, weights, 10), action=sentence(rng, words, weights, 8),
                      outcome=sentence(rng, words, weights, 6), lesson=sentence(rng, words, weights, 8), scope=SCOPE)


def fill(root: Path, n: int, words: list[str], weights: list[float]) -> float:
    """``n`` experiences, each with its vector (as ``store.add`` writes them); returns the seconds spent
    embedding them (in batches: what a model change costs, once)."""
    rng = random.Random(n)
    docs = [to_doc(experience(rng, words, weights)) for _ in range(n)]
    embed_s = 0.0
    if installed():
        model = LocalEmbeddings()
        t = time.perf_counter()
        for start in range(0, n, 4096):
            chunk = docs[start:start + 4096]
            vecs = model.embed([Experience(**d).search_text() for d in chunk])
            for d, v in zip(chunk, vecs):
                d["vector"] = encode(model, v)
        embed_s = time.perf_counter() - t
    journal = Journal(root / "memory.jsonl", _KEYS)
    journal.append([("experiences", d) for d in docs])
    journal.close()
    return embed_s


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))]


def bench_size(n: int, queries: int, adds: int, words: list[str], weights: list[float]) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="agio-membench-", dir=DISK_DIR))
    try:
        embed_s = fill(root, n, words, weights)
        os.sync()
        t0 = time.perf_counter()
        store = MemoryStore(root)
        store.index.flush()  # the index built from nothing (it is derived from the journal)
        open_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        hybrid = store.vector_index() is not None  # the vectors, read from the records into the index
        vectors_s = time.perf_counter() - t0
        os.sync()  # let the index's writes settle, so they do not land in the first fsyncs measured
        rng = random.Random(1)
        lat, lat_bm25 = [], []
        for _ in range(queries):
            q = sentence(rng, words, weights, rng.randint(4, 6))
            t = time.perf_counter()
            got = retrieve(store, q, scope=SCOPE, skills=3, experiences=3)
            lat.append((time.perf_counter() - t) * 1000)
            assert got.experiences, "every query should find something"
            assert got.mode == ("hybrid" if hybrid else "bm25")
            t = time.perf_counter()
            retrieve(store, q, scope=SCOPE, skills=3, experiences=3, embeddings=False)
            lat_bm25.append((time.perf_counter() - t) * 1000)
        add = []
        for _ in range(adds):
            exp = experience(rng, words, weights)
            t = time.perf_counter()
            store.add(exp)
            add.append((time.perf_counter() - t) * 1000)
        store.index.flush()
        after_add = []  # the next query also writes the queued record into the index
        for _ in range(max(10, adds // 10)):
            store.add(experience(rng, words, weights))
            q = sentence(rng, words, weights, 5)
            t = time.perf_counter()
            retrieve(store, q, scope=SCOPE, skills=3, experiences=3)
            after_add.append((time.perf_counter() - t) * 1000)
        floor = fsync_floor(root, adds)
        store.close()
        return {"n": n, "ret_p50": statistics.median(lat), "ret_p95": pct(lat, 0.95),
                "bm25_p50": statistics.median(lat_bm25), "hybrid": hybrid,
                "add_p50": statistics.median(add), "add_p95": pct(add, 0.95), "open_s": open_s,
                "vectors_s": vectors_s, "embed_s": embed_s,
                "after_add_p50": statistics.median(after_add), "floor": floor}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def fsync_floor(root: Path, n: int) -> float:
    """A bare append of a record-sized line plus fsync on the same disk: the floor under any durable add."""
    out = []
    with open(root / "floor.bin", "ab") as f:
        for _ in range(n):
            t = time.perf_counter()
            f.write(b"x" * 600 + b"\n")
            f.flush()
            os.fsync(f.fileno())
            out.append((time.perf_counter() - t) * 1000)
    return statistics.median(out)


def bench_run_start(n: int, runs: int, words: list[str], weights: list[float]) -> tuple[float, float]:
    root = Path(tempfile.mkdtemp(prefix="agio-membench-run-", dir=DISK_DIR))
    try:
        fill(root, n, words, weights)
        repo = TinyDBRepository(root)
        rng = random.Random(3)

        def timed(memory: MemoryConfig) -> float:
            agent = Agent(model=FunctionModel(lambda m, t: "ok"), name=SCOPE, memory=memory)
            runner = StepRunner(agent, repository=repo)
            asyncio.run(runner.run(None, "warm up"))  # opens the store and its index once
            out = []
            for _ in range(runs):
                q = sentence(rng, words, weights, 5)
                t = time.perf_counter()
                asyncio.run(runner.run(None, q))
                out.append((time.perf_counter() - t) * 1000)
            return statistics.median(out)

        without = timed(MemoryConfig(enabled=False))
        with_memory = timed(MemoryConfig())
        repo.close()
        return without, with_memory
    finally:
        shutil.rmtree(root, ignore_errors=True)


def model_load() -> tuple[float, float]:
    """(seconds to import and load the local model in a fresh process, seconds for its first embedding)."""
    import subprocess
    import sys

    code = ("import time; t = time.perf_counter(); from agio_notebook.memory.local_model import LocalEmbeddings, _model; "
            "_model(256); a = time.perf_counter() - t; t = time.perf_counter(); LocalEmbeddings().embed(['warm']); "
            "print(a, time.perf_counter() - t)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), float(out[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--adds", type=int, default=200)
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    words, weights = vocabulary()
    import tantivy

    model = LocalEmbeddings().label if installed() else "not installed: BM25 only"
    print(f"store on {DISK_DIR}; BM25 by Tantivy {getattr(tantivy, '__version__', '')}; local model {model}\n")
    if installed():
        load_s, first_s = model_load()
        print(f"local model: import and load in a fresh process {load_s * 1000:.0f} ms, first embedding "
              f"{first_s * 1000:.1f} ms\n")
    print(f"{'experiences':>11} | {'hybrid p50':>10} | {'p95':>8} | {'BM25 p50':>8} | {'add p50':>8} | {'p95':>8} | "
          f"{'fsync floor':>11} | {'query after add':>15} | {'index from nothing':>18} | {'vectors loaded':>14} | "
          f"{'embedded':>12}")
    print("-" * 160)
    rows = [bench_size(n, args.queries, args.adds, words, weights) for n in args.sizes]
    for r in rows:
        rate = f"{r['n'] / r['embed_s']:>8,.0f} /s" if r["embed_s"] else "–"
        print(f"{r['n']:>11,} | {r['ret_p50']:>7.2f} ms | {r['ret_p95']:>5.2f} ms | {r['bm25_p50']:>5.2f} ms | "
              f"{r['add_p50']:>5.2f} ms | {r['add_p95']:>5.2f} ms | {r['floor']:>8.2f} ms | "
              f"{r['after_add_p50']:>12.2f} ms | {r['open_s']:>16.2f} s | {r['vectors_s']:>12.2f} s | {rate:>12}")
    first, last = rows[0], rows[-1]
    print(f"\nadd p50 at {last['n']:,} / at {first['n']:,}: {last['add_p50'] / first['add_p50']:.2f}x  "
          f"(target <= 1.5x; as a multiple of the fsync floor: {first['add_p50'] / first['floor']:.2f} -> "
          f"{last['add_p50'] / last['floor']:.2f}); add p50 at {last['n']:,}: {last['add_p50']:.2f} ms (target <= 5 ms); "
          f"{'hybrid' if last['hybrid'] else 'BM25'} retrieval p50 at {last['n']:,}: {last['ret_p50']:.2f} ms (target <= 20 ms)")
    without, with_memory = bench_run_start(10000, args.runs, words, weights)
    print(f"\none-turn run, median of {args.runs}: memory off {without:.2f} ms · memory on (10k experiences) "
          f"{with_memory:.2f} ms · retrieval adds {with_memory - without:.2f} ms "
          f"({with_memory / without:.2f}x)")


if __name__ == "__main__":
    main()
