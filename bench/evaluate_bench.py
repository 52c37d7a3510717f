"""evaluate(): throughput against the scheduler's ideal, and the statistics on 100,000 rows.

1. 1,000 samples x 3 epochs (3,000 runs) of an offline model that answers in one call after LATENCY
   seconds, at concurrency 64, on the in-memory repository: the ideal is 64 / LATENCY runs per second.
   Printed: evaluate() whole (runs, scoring, storing the evaluation) and a plain batch() of the same
   3,000 prompts, each as runs/s and as a fraction of the ideal (goal for evaluate >= 0.8).
2. The statistics of an evaluation of 100,000 rows (2 variants x 16,667 samples x 3 epochs, 0/1
   scores): the summary (clustered errors, cluster bootstrap), the paired comparison (paired bootstrap,
   McNemar) and the changed samples; target <= 1 s in all.

    .venv/bin/python bench/evaluate_bench.py [--samples 1000] [--epochs 3] [--latency 0.1] [--rows 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import time

from agio_notebook import Agent, FunctionModel
from agio_notebook.explore import evaluate
from agio_notebook.explore.evaluate import Evaluation
from agio_notebook.scheduling import batch
from agio_notebook.storage import InMemoryRepository

CONCURRENCY = 64


def agent(latency: float) -> Agent:
    async def answer(messages, tools):
        await asyncio.sleep(latency)
        return messages[-1]["content"].split()[-1]

    return Agent(model=FunctionModel(answer, name="offline"), name="offline")


def throughput(samples: int, epochs: int, latency: float) -> dict[str, float]:
    data = [{"id": f"s{i}", "question": f"Repeat {i}", "answer": str(i)} for i in range(samples)]
    ideal = CONCURRENCY / latency
    runs = samples * epochs

    def correct(run, sample):
        return run.final_text == sample["answer"]

    t = time.perf_counter()
    ev = evaluate(agent(latency), data, [correct], epochs=epochs, prompt="{question}", concurrency=CONCURRENCY,
                  repository=InMemoryRepository())
    eval_s = time.perf_counter() - t
    assert (ev.frame["score_correct"] == 1).all()
    prompts = [f"Repeat {i}" for i in range(samples) for _ in range(epochs)]
    t = time.perf_counter()
    h = batch(agent(latency), prompts, concurrency=CONCURRENCY, repository=InMemoryRepository()).wait()
    batch_s = time.perf_counter() - t
    assert h.metrics()["completed"] == runs
    return {"runs": runs, "ideal": ideal, "eval_rate": runs / eval_s, "batch_rate": runs / batch_s,
            "eval_s": eval_s, "batch_s": batch_s}


def synthetic(rows: int, epochs: int = 3) -> Evaluation:
    """An evaluation document of ``rows`` rows: 2 variants, 0/1 scores, B right more often than A."""
    rng = random.Random(1)
    samples = rows // (2 * epochs)
    doc_rows = []
    for variant, p in (("a", 0.6), ("b", 0.7)):
        for s in range(samples):
            ease = rng.random()
            for e in range(1, epochs + 1):
                score = float(rng.random() < (p + ease) / 2)
                doc_rows.append({"variant": variant, "sample": f"s{s}", "epoch": e, "status": "completed",
                                 "run_id": f"{variant}{s}-{e}", "session_id": f"{variant}{s}-{e}", "final_text": "x",
                                 "latency_ms": 1.0, "total_tokens": 10, "cost": None, "error": None,
                                 "scores": {"correct": score}, "judge_runs": {}})
    doc = {"id": "synthetic", "created_at": 0.0, "seed": 0, "confidence": 0.95, "resamples": 2000,
           "prompt": "{q}", "epochs": epochs, "samples": [f"s{s}" for s in range(samples)], "scorers": ["correct"],
           "dataset_fingerprint": "", "variants": [{"label": "a"}, {"label": "b"}], "rows": doc_rows}
    return Evaluation(doc, InMemoryRepository())


def statistics(rows: int) -> dict[str, float]:
    import scipy.special  # noqa: F401 - imported once per process, not per evaluation: not timed

    ev = synthetic(rows)
    t = time.perf_counter()
    summary = ev.summary
    summary_s = time.perf_counter() - t
    t = time.perf_counter()
    cmp = ev.compare("a", "b")
    comparison = cmp.summary
    changed = cmp.changed()
    compare_s = time.perf_counter() - t
    assert len(summary) == 2 and comparison["difference"].iloc[0] > 0 and len(changed) > 0
    return {"rows": len(ev.rows), "summary_s": summary_s, "compare_s": compare_s, "total_s": summary_s + compare_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--rows", type=int, default=100_000)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}; {os.cpu_count()} cores\n")
    r = throughput(args.samples, args.epochs, args.latency)
    print(f"1. {args.samples:,} samples x {args.epochs} epochs = {r['runs']:,} runs, {args.latency * 1000:.0f} ms per "
          f"model call, concurrency {CONCURRENCY}, in memory; ideal {r['ideal']:.0f} runs/s")
    print(f"   {'':<44}{'wall s':>8}{'runs/s':>9}{'of ideal':>10}")
    print(f"   {'evaluate() (runs, scoring, storing)':<44}{r['eval_s']:>8.2f}{r['eval_rate']:>9.1f}"
          f"{r['eval_rate'] / r['ideal']:>10.2f}")
    print(f"   {'batch() of the same 3,000 prompts':<44}{r['batch_s']:>8.2f}{r['batch_rate']:>9.1f}"
          f"{r['batch_rate'] / r['ideal']:>10.2f}")
    print(f"   evaluate / batch: {r['eval_rate'] / r['batch_rate']:.2f}   (goal: evaluate >= 0.8 of the ideal)\n")
    s = statistics(args.rows)
    print(f"2. statistics on {s['rows']:,} rows (2 variants x {s['rows'] // 6:,} samples x 3 epochs, 0/1 scores)")
    print(f"   summary (clustered se, cluster bootstrap, 2 variants) {s['summary_s'] * 1000:8.0f} ms")
    print(f"   paired comparison and changed samples               {s['compare_s'] * 1000:8.0f} ms")
    print(f"   total                                                {s['total_s'] * 1000:8.0f} ms   (target <= 1000 ms)")


if __name__ == "__main__":
    main()
