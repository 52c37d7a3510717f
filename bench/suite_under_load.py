"""The whole test suite, several times in a row from a fresh clone, with other work on the machine.

Clones the current commit into a temporary folder (``TMPDIR`` kept private to this run), sets it up
once (``scripts/setup.sh --browser``, not timed), then starts the neighbours a user's machine has:
a JupyterLab serving the quickstart, chromium with that notebook open (reloaded every minute), a
batch of agio runs on a TinyDB store on disk (one after another, for as long as the suite runs), and
``--burners`` CPU-bound processes. Then it runs the README's test command (``scripts/test.sh``)
``--runs`` times in a row and prints, per run: passed, failed, wall time, and the load average seen
(sampled every 10 s). The table also goes to ``test-output/suite_under_load.json``.

    python3 bench/suite_under_load.py [--runs 3] [--burners 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

BATCH_LOOP = """
import asyncio, sys, tempfile
from agio_notebook import Agent, ExecutionConfig, FunctionModel, Reply
from agio_notebook.scheduling import Executor, batch
from agio_notebook.storage import TinyDBRepository

async def lookup(key: str) -> str:
    return key.upper()

async def reply(messages, tools):
    await asyncio.sleep(0.05)
    return Reply.call("lookup", key="x") if messages[-1]["role"] == "user" else "done"

agent = Agent(model=FunctionModel(reply, name="neighbour"), tools=[lookup], name="neighbour",
              config=ExecutionConfig(enable_retry=False, stream=False))
while True:
    with tempfile.TemporaryDirectory(dir=sys.argv[1]) as d:
        repo = TinyDBRepository(d)
        batch(agent, [f"q{i}" for i in range(300)], concurrency=16, executor=Executor(repo, max_concurrency=16)).wait()
        repo.close()
"""

BROWSER = """
import sys, time
from playwright.sync_api import sync_playwright
url = sys.argv[1]
with sync_playwright() as pw:
    browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
    page = browser.new_page()
    while True:
        page.goto(url, timeout=120000)
        time.sleep(60)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, server: subprocess.Popen[bytes], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"JupyterLab exited ({server.returncode}) before it answered")
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"JupyterLab did not answer at {url}")


class LoadSampler:
    """The 1-minute load average every 10 s, while running."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(10):
            self.samples.append(os.getloadavg()[0])

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()


def summary(output: str) -> tuple[int, int]:
    """(passed, failed + errors) from pytest's last line."""
    tail = output.strip().splitlines()[-1] if output.strip() else ""
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|error|errors)", tail)}
    return counts.get("passed", 0), counts.get("failed", 0) + counts.get("error", 0) + counts.get("errors", 0)


def keep_debugger_timings(clone: Path, keep: int = 40) -> None:
    """Add the pause timings the clone's browser test measured under load to this checkout's
    ``test-output/debugger_timings.json``, which bench/debugger_bench.py reports (the clone is deleted)."""
    ours = ROOT / "test-output" / "debugger_timings.json"
    try:
        theirs = json.loads((clone / "test-output" / "debugger_timings.json").read_text())["runs"]
    except (OSError, ValueError, KeyError):
        return
    try:
        runs = json.loads(ours.read_text())["runs"]
    except (OSError, ValueError, KeyError):
        runs = []
    seen = {r.get("measured_at") for r in runs}
    runs += [{**r, "in_suite_under_load": True} for r in theirs if r.get("measured_at") not in seen]
    ours.write_text(json.dumps({"runs": sorted(runs, key=lambda r: r.get("measured_at", 0))[-keep:]}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--burners", type=int, default=3, help="CPU-bound processes beside the suite")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="agio-under-load-", dir="/var/tmp"))
    clone, private_tmp = work / "clone", work / "tmp"
    private_tmp.mkdir(mode=0o700)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, check=True).stdout.strip()
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    env = {**os.environ, "TMPDIR": str(private_tmp), "CI": "true"}
    print(f"commit {commit}, clone in {clone}; setting up (not timed)", flush=True)
    subprocess.run(["scripts/setup.sh", "--browser"], cwd=clone, env=env, check=True, stdout=subprocess.DEVNULL)
    python = str(clone / ".venv" / "bin" / "python")

    neighbours: list[subprocess.Popen[bytes]] = []
    port, token = free_port(), secrets.token_hex(16)
    lab_env = {**env, "AGIO_STORE": str(work / "lab-store")}
    as_root = ["--allow-root"] if os.geteuid() == 0 else []
    lab = subprocess.Popen(
        [str(clone / ".venv" / "bin" / "jupyter"), "lab", "--no-browser", *as_root, f"--port={port}", "--ip=127.0.0.1",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={clone / 'notebooks'}"],
        env=lab_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    neighbours.append(lab)
    wait_http(f"http://127.0.0.1:{port}/lab?token={token}", lab)
    neighbours.append(subprocess.Popen([python, "-c", BROWSER, f"http://127.0.0.1:{port}/lab/tree/quickstart.ipynb"
                                        f"?token={token}"], env=env, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, start_new_session=True))
    neighbours.append(subprocess.Popen([python, "-c", BATCH_LOOP, str(work)], env={**env, "PYTHONPATH": str(clone)},
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
    for _ in range(args.burners):
        neighbours.append(subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True))

    rows = []
    try:
        for i in range(1, args.runs + 1):
            print(f"run {i} of {args.runs} ...", flush=True)
            with LoadSampler() as load:
                t0 = time.monotonic()
                done = subprocess.run(["scripts/test.sh", "-q"], cwd=clone, env=env, capture_output=True, text=True)
                wall = time.monotonic() - t0
            passed, failed = summary(done.stdout)
            (ROOT / "test-output").mkdir(exist_ok=True)
            (ROOT / "test-output" / f"suite_under_load_run{i}.log").write_text(done.stdout[-20000:] + done.stderr[-5000:])
            samples = load.samples or [os.getloadavg()[0]]
            rows.append({"run": i, "passed": passed, "failed": failed, "exit": done.returncode, "wall_s": round(wall),
                         "load_min": min(samples), "load_mean": round(sum(samples) / len(samples), 1),
                         "load_max": max(samples)})
            print(f"   {rows[-1]}", flush=True)
            keep_debugger_timings(clone)
    finally:
        for p in neighbours:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for p in neighbours:
            p.wait()

    print(f"\nthe whole suite {args.runs}x from a fresh clone of {commit}, beside JupyterLab, chromium, "
          f"a batch and {args.burners} CPU burners, on {os.cpu_count()} cores")
    print(f"   {'run':>3} {'passed':>7} {'failed':>7} {'exit':>5} {'wall':>9} {'load min/mean/max':>20}")
    for r in rows:
        print(f"   {r['run']:>3} {r['passed']:>7} {r['failed']:>7} {r['exit']:>5} {r['wall_s'] // 60:>5}m{r['wall_s'] % 60:02d}s"
              f" {r['load_min']:>8.1f}/{r['load_mean']:.1f}/{r['load_max']:.1f}")
    (ROOT / "test-output" / "suite_under_load.json").write_text(json.dumps({"commit": commit, "runs": rows}, indent=1))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
