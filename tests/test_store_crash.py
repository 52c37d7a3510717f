"""The engine killed with SIGKILL: every step whose step_completed was delivered is on disk, the killed
run shows up `interrupted`, and it can be resumed and retried."""

from __future__ import annotations

import asyncio
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from agio_notebook import Agent, FunctionModel, Reply, StepRunner, frames, tool
from agio_notebook.core import RunStatus
from agio_notebook.storage import new_repository

ENGINE = [sys.executable, str(Path(__file__).with_name("engine_writer.py"))]


def delivered(out: str) -> dict[str, tuple[str, int]]:
    """step id -> (kind, sequence) for every step_completed the writer printed."""
    found = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] in ("user", "call", "tool", "final"):
            found[parts[1]] = (parts[0], int(parts[2]))
    return found


def check_store(root: str, reported: dict[str, tuple[str, int]]):
    repo = new_repository(root)  # always opens
    stored = {s.id: s for s in repo.get_steps("s", include_superseded=True)}
    missing = set(reported) - set(stored)
    assert not missing, f"{len(missing)} delivered steps are not on disk: {[reported[m] for m in missing]}"
    current = Counter(s.sequence for s in repo.get_steps("s"))
    assert not [seq for seq, n in current.items() if n > 1], "two current steps share a sequence"
    assert len(frames.steps("s", repository=repo)) == len(stored)  # frames always build
    frames.runs(repository=repo)
    assert repo.verify() == []
    assert not [r for r in repo.list_runs("s") if r.status is RunStatus.RUNNING]
    return repo


def test_sigkill_at_random_moments_loses_no_delivered_step(store_url):
    root = store_url
    rng = random.Random(11)
    reported: dict[str, tuple[str, int]] = {}
    interrupted = 0
    for round_ in range(12):
        proc = subprocess.Popen([*ENGINE, str(root), "s", "loop", "100000"], stdout=subprocess.PIPE, text=True)
        first = proc.stdout.readline()
        assert first.startswith("run "), first
        time.sleep(rng.uniform(0.0, 0.15))
        os.kill(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=60)
        out = first + out
        reported.update(delivered(out))
        repo = check_store(root, reported)
        last_run = [line.split()[1] for line in out.splitlines() if line.startswith("run ")][-1]
        if not out.rstrip().splitlines()[-1].startswith("final"):  # killed inside that run
            assert repo.get_run(last_run).status in (RunStatus.INTERRUPTED, RunStatus.COMPLETED)
        interrupted = sum(r.status is RunStatus.INTERRUPTED for r in repo.list_runs("s"))
        repo.close()
    assert len(reported) > 40
    assert interrupted >= 3  # most kills land inside a run, and each such run is found


@pytest.mark.parametrize("kind", ["user", "call", "tool", "final"])
def test_killed_right_after_each_kind_of_step_then_resumed_and_retried(store_url, kind):
    root = store_url
    proc = subprocess.run([*ENGINE, str(root), "s", f"die:{kind}", "1"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL
    reported = delivered(proc.stdout)
    assert list(reported.values())[-1][0] == kind  # it died right after delivering that step
    repo = check_store(root, reported)
    (run,) = repo.list_runs("s")
    assert run.status is RunStatus.INTERRUPTED  # found when the store was opened, nobody asked
    assert re.search(r"^interrupted: .* \(a run in process \d+ on \S+ since ", run.error), run.error
    assert repo.get_run(run.id).status is RunStatus.INTERRUPTED

    @tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    def reply(messages, tools):
        return Reply.call("add", a=1, b=2) if messages[-1]["role"] == "user" else "resumed answer"

    runner = StepRunner(Agent(model=FunctionModel(reply), tools=[add]), repository=repo)
    if kind == "final":  # it had answered: nothing to resume, but it can be retried
        with pytest.raises(Exception, match="already ends with an answer"):
            asyncio.run(runner.resume("s"))
    else:
        resumed = asyncio.run(runner.resume("s"))
        assert resumed.status is RunStatus.COMPLETED and resumed.final_text == "resumed answer"
    retried = asyncio.run(runner.retry(run.id, from_seq=1))  # from its user step: regenerate the rest
    assert retried.status is RunStatus.COMPLETED and retried.run.retry_of == run.id
    assert repo.get_run(run.id).superseded_by == retried.run_id
    assert repo.verify() == []
