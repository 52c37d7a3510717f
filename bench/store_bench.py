"""The TinyDB store as it grows: durable append latency, frame build time, open time.

For 1k, 10k and 100k steps already stored across 1,000 sessions: the latency of one durable
commit (a step and its event, fsynced — what the engine does per checkpoint), median and p95; the
time to build the 100k-row ``steps()`` frame; the time to open the store. Also the append latency at
the 10th and the 1,000th step of one session. Each on disk and on tmpfs (/dev/shm), beside the floor:
a bare append of the same bytes to a file plus fsync, measured in the same run (fsync on disk varies
a lot between runs, so disk figures are read as ratios to that floor).

    .venv/bin/python bench/store_bench.py [--sizes 1000 10000 100000] [--appends 300]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import orjson

from agio_notebook import frames
from agio_notebook.core import AgentSession, Step, StepEvent, StepEventType, StepMetrics, StepRole
from agio_notebook.storage import TinyDBRepository
from agio_notebook.storage.journal import Journal
from agio_notebook.storage.layout import INDEX_KEYS, SESSION_KEYS

SESSIONS = 1000
DISK_DIR = os.environ.get("BENCH_DISK_DIR", "/var/tmp")


def make_step(session_id: str, seq: int) -> Step:
    role = StepRole.USER if seq % 2 else StepRole.ASSISTANT
    return Step(session_id=session_id, run_id="r" * 32, sequence=seq, role=role, content="x" * 400,
                metrics=StepMetrics(prompt_tokens=100, completion_tokens=50, total_tokens=150, ttft_ms=12.5,
                                    model_ms=80.0, duration_ms=80.0))


def make_event(step: Step) -> StepEvent:
    return StepEvent(StepEventType.STEP_COMPLETED, step.run_id or "", step.session_id, step.sequence,
                     {"step": step.to_dict()})


def fill(root: str, total: int) -> list[str]:
    """``total`` steps across SESSIONS sessions, written in bulk (one write per session file)."""
    TinyDBRepository(root).close()
    per = max(1, total // SESSIONS)
    ids = [f"s{i:04d}" for i in range(SESSIONS)]
    sessions = []
    for sid in ids:
        session = AgentSession(session_id=sid)
        sessions.append(("sessions", {**session.to_dict(), "file": f"{sid}.jsonl"}))
        records = [("session", session.to_dict())]
        for seq in range(1, per + 1):
            step = make_step(sid, seq)
            records += [("steps", step.to_dict()), ("events", make_event(step).to_dict())]
        journal = Journal(_path(root, sid), SESSION_KEYS)
        journal.append(records)
        journal.close()
    index = Journal(_path(root, None), INDEX_KEYS)
    index.append(sessions)
    index.close()
    return ids


def _path(root: str, sid: str | None) -> Path:
    return Path(root) / "index.jsonl" if sid is None else Path(root) / "sessions" / f"{sid}.jsonl"


def append_latencies(repo: TinyDBRepository, ids: list[str], n: int) -> list[float]:
    """Durable commits (step + event) round robin over 20 sessions; ms each."""
    chosen = ids[:: max(1, len(ids) // 20)][:20]
    next_seq = {sid: (repo.get_last_step(sid).sequence if repo.get_last_step(sid) else 0) + 1 for sid in chosen}
    out = []
    for i in range(n):
        sid = chosen[i % len(chosen)]
        step = make_step(sid, next_seq[sid])
        next_seq[sid] += 1
        t0 = time.perf_counter()
        repo.commit(steps=[step], events=[make_event(step)])
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def floor_latencies(directory: str, n: int) -> list[float]:
    """The same bytes appended to a plain file and fsynced: the least a durable append can cost."""
    step = make_step("floor", 1)
    data = (b'{"t":"steps","d":' + orjson.dumps(step.to_dict()) + b"}\n"
            + b'{"t":"events","d":' + orjson.dumps(make_event(step).to_dict()) + b"}\n")
    path = os.path.join(directory, "floor.bin")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    out = []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            os.write(fd, data)
            os.fsync(fd)
            out.append((time.perf_counter() - t0) * 1e3)
    finally:
        os.close(fd)
    return out


def p95(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=20)[-1]


def one_session_growth(root: str, steps: int = 1000, samples: int = 31) -> tuple[float, float]:
    """Median latency of a session's 10th step and of its ~1,000th, sampled alternately.

    Disk fsync drifts over seconds, so the two are measured interleaved: a fresh session's 10th
    step, then the next step of one long session (centred on its 1,000th), ``samples`` times.
    """
    repo = TinyDBRepository(root)

    def timed(step: Step) -> float:
        t0 = time.perf_counter()
        repo.commit(steps=[step], events=[make_event(step)])
        return (time.perf_counter() - t0) * 1e3

    first_long = steps - samples // 2
    for seq in range(1, first_long):
        timed(make_step("long", seq))
    at10, at_long = [], []
    for i in range(samples):
        short = f"short-{i}"
        for seq in range(1, 10):
            timed(make_step(short, seq))
        at10.append(timed(make_step(short, 10)))
        at_long.append(timed(make_step("long", first_long + i)))
    repo.close()
    return statistics.median(at10), statistics.median(at_long)


def bench_medium(label: str, base: str, sizes: list[int], appends: int) -> list[str]:
    rows = []
    floor = floor_latencies(tempfile.mkdtemp(dir=base), appends)
    f_med = statistics.median(floor)
    rows.append(f"{label:<6} {'floor: append+fsync':<26} {'':>8} {f_med:8.3f} {p95(floor):8.3f} {'1.00':>6}"
                f" {'':>9} {'':>9}")
    for size in sizes:
        root = tempfile.mkdtemp(prefix="agio_store_bench_", dir=base)
        try:
            ids = fill(root, size)
            t0 = time.perf_counter()
            repo = TinyDBRepository(root)
            repo.list_runs()
            open_s = time.perf_counter() - t0
            lat = append_latencies(repo, ids, appends)
            frame_s = float("nan")
            if size == max(sizes):
                t0 = time.perf_counter()
                df = frames.steps(repository=TinyDBRepository(root))
                frame_s = time.perf_counter() - t0
                assert len(df) >= size, len(df)
            repo.close()
            med = statistics.median(lat)
            rows.append(f"{label:<6} {'durable append':<26} {size:>8} {med:8.3f} {p95(lat):8.3f} {med / f_med:6.2f}"
                        f" {open_s:9.3f} {frame_s:9.3f}")
        finally:
            shutil.rmtree(root, ignore_errors=True)
    root = tempfile.mkdtemp(prefix="agio_store_bench_", dir=base)
    try:
        at10, at1000 = one_session_growth(root)
        rows.append(f"{label:<6} {'one session: 10th step':<26} {'':>8} {at10:8.3f}")
        rows.append(f"{label:<6} {'one session: 1000th step':<26} {'':>8} {at1000:8.3f} {'':>8} {at1000 / at10:6.2f}"
                    "  (ratio to the 10th)")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    ap.add_argument("--appends", type=int, default=300)
    args = ap.parse_args()
    print(f"steps already stored across {SESSIONS} sessions; each append = one step + its event, fsynced")
    header = (f"{'medium':<6} {'what':<26} {'stored':>8} {'median':>8} {'p95':>8} {'×floor':>6} "
              f"{'open (s)':>9} {'frame (s)':>9}")
    rows = []
    for label, base in (("tmpfs", "/dev/shm"), ("disk", DISK_DIR)):
        rows += bench_medium(label, base, args.sizes, args.appends)
    print(header)
    print("-" * len(header))
    for r in rows:
        print(r)
    print("\nms per append; 'frame' = building agio_notebook.steps() over the largest store")


if __name__ == "__main__":
    main()
