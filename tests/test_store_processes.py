"""Crash consistency under SIGKILL, concurrent writers in separate processes, a lock held elsewhere."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agio_notebook import Agent, ScriptedModel, StepRunner
from agio_notebook.core import RunStatus, Step, StepRole
from agio_notebook.storage import TinyDBRepository
from agio_notebook.storage.locking import LockTimeout

WRITER = [sys.executable, str(Path(__file__).with_name("store_writer.py"))]


def test_sigkill_at_random_moments_never_loses_a_reported_step_or_tears_a_file(tmp_path):
    root = tmp_path / "store"
    rng = random.Random(7)
    reported: set[str] = set()
    for round_ in range(30):
        proc = subprocess.Popen([*WRITER, str(root), "victim", "100000", f"r{round_}", str(round_ * 100000)],
                                stdout=subprocess.PIPE,
                                text=True)
        # let it start (imports) and then write for a random while
        first = proc.stdout.readline()
        assert first, "writer produced nothing"
        reported.add(first.strip())
        time.sleep(rng.uniform(0.0, 0.08))
        os.kill(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        reported.update(line for line in out.splitlines() if line and len(line) == 32)
        repo = TinyDBRepository(root)  # always opens
        stored = {s.id for s in repo.get_steps("victim", include_superseded=True)}
        missing = reported - stored
        assert not missing, f"round {round_}: {len(missing)} reported steps lost"
        for path in root.rglob("*.jsonl"):
            data = path.read_bytes()
            # no torn file: every line but an unterminated tail parses (the tail is repaired on next write)
            for line in data.split(b"\n")[:-1]:
                if line.strip():
                    __import__("json").loads(line)
        repo.close()
    assert len(reported) > 30


def test_two_processes_on_the_same_and_different_sessions_lose_nothing(tmp_path):
    root = tmp_path / "store"
    TinyDBRepository(root)
    n = 150
    procs = [subprocess.Popen([*WRITER, str(root), session, str(n), tag, str(base)], stdout=subprocess.PIPE, text=True)
             for session, tag, base in [("shared", "a", 0), ("shared", "b", n), ("own-a", "c", 0), ("own-b", "d", 0)]]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    repo = TinyDBRepository(root)
    shared = repo.get_steps("shared")
    assert len(shared) == 2 * n
    assert {s.id for s in shared} == set(outs[0].split()) | set(outs[1].split())
    assert len(repo.get_steps("own-a")) == n and len(repo.get_steps("own-b")) == n
    assert sorted(s.session_id for s in repo.list_sessions()) == ["own-a", "own-b", "shared"]


HOLD_LOCK = ("import fcntl, sys, time\n"
             "f = open(sys.argv[1], 'a')\n"
             "fcntl.flock(f, fcntl.LOCK_EX)\n"
             "print('held', flush=True)\n"
             "time.sleep(60)\n")


def test_a_store_locked_by_another_process_fails_the_run_clearly_and_loses_nothing(tmp_path):
    root = tmp_path / "store"
    repo = TinyDBRepository(root, lock_timeout=0.3)
    runner = StepRunner(Agent(model=ScriptedModel(["first answer", "third answer"])), repository=repo)
    assert runner.run_sync("s", "one").status is RunStatus.COMPLETED
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(repo.session_file('s'))],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        blocked = runner.run_sync("s", "two")
        assert blocked.status is RunStatus.FAILED
        assert "is locked by another process" in blocked.error and repo.session_file("s").name in blocked.error
        assert "\n" not in blocked.error
        with pytest.raises(LockTimeout, match="locked by another process"):
            repo.commit(steps=[Step(session_id="s", run_id="x", sequence=9, role=StepRole.USER, content="x")])
    finally:
        holder.kill()
        holder.wait()
    # the lock is gone: the session goes on where it was, the first run intact
    assert runner.run_sync("s", "three").status is RunStatus.COMPLETED
    steps = TinyDBRepository(root).get_steps("s")
    assert [(s.sequence, s.content) for s in steps] == [(1, "one"), (2, "first answer"), (3, "three"),
                                                          (4, "third answer")]
