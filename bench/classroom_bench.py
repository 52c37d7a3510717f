"""A class of 30 at once on one PostgreSQL store, and what the teacher's Runs panel sees of it.

A class is made (`agio classroom init`: 30 students and a teacher, row-level security on) on a PostgreSQL
server started here as in the tests. Each student is a process of its own connected as its own role, running
short turns (a query, a tool call, an answer: four steps, four durable commits, the last with the run's end;
the model offline, answering after 250 ms as a quick hosted one would). The students start their turns at
the same instant, as a class told to run a cell does; the first turns' p99 and the later turns' are shown
apart too. A turn's overhead is its time less the model's and the tool's: what
the engine and the store add. First one student alone, then all 30 at once: p50 and p99 side by side (goal: 30
at once within 2x of one alone). Meanwhile the teacher's Jupyter server (the
extension that serves the Runs panel, connected as the teacher's role) pushes its updates to a websocket
client that reads the panel's first page at each one, as the panel does: for every step a student's run
committed, the time from its commit to the page showing it (goal: p99 <= 1 s).

    .venv/bin/python bench/classroom_bench.py [--students 30] [--turns 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def student(url: str, turns: int, model_s: float, spread: float = 0.0) -> None:
    """One student's process: ``turns`` runs; prints each turn's overhead and each step's commit time.

    ``spread``: each model call takes ``model_s`` times a factor drawn evenly from 1 ± spread (seeded by the
    student), as a hosted model's latency varies; 0 is a fixed latency, which keeps the class in lockstep."""
    import random
    import zlib

    from agio_notebook import Agent, AgentHook, FunctionModel, Reply, StepRunner, tool
    from agio_notebook.storage import new_repository

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    draw = random.Random(zlib.crc32(url.encode()))

    asked: list[float] = []  # when each model call began

    def reply(messages, tools):
        asked.append(time.time())
        answer = Reply.call("add", a=2, b=3) if messages[-1]["role"] == "user" else Reply.say("five")
        answer.delay = model_s * (1 + spread * (2 * draw.random() - 1))
        return answer

    class Commits(AgentHook):
        timing = False

        async def on_step_end(self, run, step):  # called once the step is durable (committed)
            if self.timing:
                print(json.dumps({"step": [run.id, run.metrics.steps, time.time()]}), flush=True)

    repo = new_repository(url)
    commits = Commits()
    model = FunctionModel(reply, ttft=model_s)  # a model that takes this long to answer, offline
    runner = StepRunner(Agent(name="student", model=model, tools=[add]), hooks=[commits], repository=repo)
    runner.run_sync(None, "warm up")
    print(json.dumps({"ready": True}), flush=True)
    sys.stdin.readline()  # all start together
    commits.timing = True
    for i in range(turns):
        began, calls = time.time(), len(asked)
        m = runner.run_sync(None, f"turn {i}: what is 2 + 3?").run.metrics
        if i == 0:  # the first turn, and its stretch before the model was first asked
            print(json.dumps({"first": [began, asked[calls]]}), flush=True)
        # the engine's and the store's own time in the turn: all of it but the model's and the tool's
        print(json.dumps({"turn_ms": [i, m.duration_ms - m.model_ms - m.tool_ms]}), flush=True)
    print(json.dumps({"done": True}), flush=True)
    sys.stdin.readline()  # the class ends together: no student's exit overlaps another's measured turns
    repo.close()


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


def round_trips(url: str, pause_s: float, n: int = 20) -> tuple[float, float]:
    """This machine's PostgreSQL round trip (``SELECT 1``), p50 ms: back to back, and after a pause as long as
    a model call (a lone student's connection sits idle that long before each commit). On a virtual machine
    that lets idle processes go cold, the second can be a hundred times the first: it is most of what one
    student alone measures, so it is printed beside the results."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT 1")
        times = {0.0: [], pause_s: []}
        for _ in range(n):
            for pause, found in times.items():
                time.sleep(pause)
                t0 = time.perf_counter()
                conn.execute("SELECT 1").fetchone()
                found.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(times[0.0]), statistics.median(times[pause_s])


def cpu_busy() -> tuple[float, float]:
    """The machine's CPU time so far (busy, all), in seconds over all cores, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + fields[4]  # idle and iowait
    return (sum(fields) - idle) / tick, sum(fields) / tick


class CpuSampler:
    """How busy the machine's cores were in a window: /proc/stat read every few milliseconds meanwhile."""

    def __init__(self) -> None:
        import threading

        self.samples: list[tuple[float, float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.samples.append((time.time(), *cpu_busy()))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def busy(self, start: float, end: float) -> float | None:
        """The fraction of all cores' time that was busy from ``start`` to ``end`` (None: too short to tell)."""
        inside = [s for s in self.samples if start <= s[0] <= end]
        if len(inside) < 2:
            return None
        (_, b0, t0), (_, b1, t1) = inside[0], inside[-1]
        return (b1 - b0) / (t1 - t0) if t1 > t0 else None


def run_students(urls: list[str], turns: int, model_s: float, spread: float, env: dict[str, str],
                 on_line=None) -> dict[str, list]:
    procs = [subprocess.Popen([sys.executable, __file__, "--student", url, "--turns", str(turns),
                               "--model-ms", str(model_s * 1000), "--spread", str(spread)], env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for url in urls]
    for p in procs:
        assert json.loads(p.stdout.readline()) == {"ready": True}
    sampler = CpuSampler()
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    found: dict[str, list] = {"turn_ms": [], "step": [], "done": [], "first": [], "cpu": [sampler]}
    import threading

    def read(p, finished):
        for line in p.stdout:
            item = json.loads(line)
            for k, v in item.items():
                found[k].append(v)
                if on_line is not None and k == "step":
                    on_line(v)
                if k == "done":
                    finished.set()

    finished = [threading.Event() for _ in procs]
    readers = [threading.Thread(target=read, args=(p, f)) for p, f in zip(procs, finished)]
    for r in readers:
        r.start()
    for f in finished:  # a process's exit (its interpreter's teardown) is not part of a class: all end together
        assert f.wait(600), "a student did not finish its turns"
    sampler.stop()
    for p in procs:
        p.stdin.write("exit\n")
        p.stdin.flush()
    for p in procs:
        assert p.wait(600) == 0
    for r in readers:
        r.join()
    return found


async def follow_panel(base: str, token: str, pending: dict, seen: list, stop: asyncio.Event) -> None:
    """The panel's part: at each update, read the first page; each committed step it shows, timed."""
    from tornado.httpclient import AsyncHTTPClient
    from tornado.websocket import websocket_connect

    client = AsyncHTTPClient()
    ws = await websocket_connect(base.replace("http", "ws", 1) + f"/agio/api/updates?token={token}")
    while not stop.is_set():
        try:
            message = json.loads(await asyncio.wait_for(ws.read_message(), 0.5))
        except asyncio.TimeoutError:
            continue
        if message.get("type") != "changed":
            continue
        page = json.loads((await client.fetch(f"{base}/agio/api/runs?limit=100&token={token}")).body)
        now = time.time()
        for row in page["runs"]:
            for k in range(1, row["steps"] + 1):
                committed = pending.pop((row["id"], k), None)
                if committed is not None:
                    seen.append(now - committed)
    ws.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--students", type=int, default=30)
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--model-ms", type=float, default=250.0, help="each model call's simulated latency")
    ap.add_argument("--spread", type=float, default=0.0,
                    help="each model call's latency varies evenly within ± this fraction (0: fixed, in lockstep)")
    ap.add_argument("--student", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    model_s = args.model_ms / 1000.0
    if args.student:
        return student(args.student, args.turns, model_s, args.spread)

    from agio_notebook.classroom import init
    from agio_notebook.classroom.admin import Secrets
    from lab_support import running_lab
    from store_backends import running_postgres

    names = [f"s{i:02d}" for i in range(args.students)]
    with tempfile.TemporaryDirectory() as tmp, running_postgres() as pg:
        admin = pg.new_database()
        init(admin, "teacher", names, Path(tmp) / "secrets.json")
        book = Secrets.load(Path(tmp) / "secrets.json")
        urls = {n: book.url_for(n).replace(f"{n}@", f"{n}:{book.passwords[n]}@", 1) for n in [*names, "teacher"]}
        env = {k: v for k, v in os.environ.items() if k != "AGIO_STORE"}
        warm_ms, cold_ms = round_trips(admin, model_s)
        alone = [ms for _, ms in run_students([urls[names[0]]], args.turns, model_s, args.spread, env)["turn_ms"]]

        root = Path(tmp) / "teacher"
        root.mkdir()
        pending: dict = {}
        seen: list[float] = []
        with running_lab(root, {**env, "AGIO_STORE": urls["teacher"]}) as (base, token):
            import urllib.request

            urllib.request.urlopen(f"{base}/agio/api/runs?token={token}").read()  # the server opens the store

            async def together():
                stop = asyncio.Event()
                panel = asyncio.create_task(follow_panel(base, token, pending, seen, stop))
                await asyncio.sleep(1.0)
                loop = asyncio.get_running_loop()

                def committed(step):
                    run_id, n, at = step
                    loop.call_soon_threadsafe(pending.__setitem__, (run_id, n), at)

                found = await loop.run_in_executor(None, run_students, [urls[n] for n in names], args.turns, model_s,
                                                   args.spread, env, committed)
                await asyncio.sleep(2.0)  # the last updates
                stop.set()
                await panel
                return found

            crowd = asyncio.run(together())
    together_ms = [ms for _, ms in crowd["turn_ms"]]
    first = [ms for i, ms in crowd["turn_ms"] if i == 0]
    later = [ms for i, ms in crowd["turn_ms"] if i > 0]
    print("load average (1, 5, 15 min) at the end: " + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    a50, a99, c50, c99 = pct(alone, 50), pct(alone, 99), pct(together_ms, 50), pct(together_ms, 99)
    print(f"engine and store time per turn (a query, a tool call, an answer: 4 steps, 4 durable commits; the model's "
          f"{args.model_ms:.0f} ms per call" + (f" ± {args.spread:.0%}" if args.spread else ", fixed") +
          f", and the tool's time left out), {args.turns} turns per student")
    print(f"a PostgreSQL round trip here, p50: {warm_ms:.2f} ms back to back, {cold_ms:.2f} ms after "
          f"{args.model_ms:.0f} ms idle")
    print(f"{'':<24} {'p50 ms':>8} {'p99 ms':>8}")
    print(f"{'1 student alone':<24} {a50:8.1f} {a99:8.1f}")
    print(f"{f'{args.students} students at once':<24} {c50:8.1f} {c99:8.1f}")
    print(f"{'ratio':<24} {c50 / a50:7.2f}x {c99 / a99:7.2f}x   (goal: within 2x)")
    print(f"{'  their first turns':<24} {pct(first, 50):8.1f} {pct(first, 99):8.1f}   (all {args.students} at the same instant)")
    print(f"{'  their later turns':<24} {pct(later, 50):8.1f} {pct(later, 99):8.1f}")
    # the class's opening: from the first student's start to the last one's first model call
    window = (min(b for b, _ in crowd["first"]), max(e for _, e in crowd["first"]))
    busy = crowd["cpu"][0].busy(*window)
    if busy is not None:
        print(f"  from the first turns' start to the last one's model call ({(window[1] - window[0]) * 1000:.0f} ms),"
              f" this machine's {os.cpu_count()} cores were {busy:.0%} busy")
    steps = len(crowd["step"])
    print(f"\ncommit to the teacher's panel: {len(seen)} of {steps} committed steps seen "
          f"({len(pending)} superseded by a newer page before a read)")
    if seen:
        print(f"  p50 {pct(seen, 50) * 1000:.0f} ms   p99 {pct(seen, 99) * 1000:.0f} ms   max {max(seen) * 1000:.0f} ms"
              f"   (goal: p99 <= 1000 ms)")


if __name__ == "__main__":
    main()
