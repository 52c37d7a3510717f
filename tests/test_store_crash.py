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
    round_ = 0
    while round_ < 12 or (interrupted < 3 and round_ < 40):  # until kills have landed inside runs
        round_ += 1
        proc = subprocess.Popen([*ENGINE, str(root), "s", "loop", "100000"], stdout=subprocess.PIPE, text=True)
        first = proc.stdout.readline()
        assert first.startswith("run "), first
        # kill once a random number of steps was delivered (however fast this machine is right now),
        # then a random moment later: inside a run, a commit, a write of the journal or the index
        seen = [first]
        for _ in range(rng.randint(3, 9)):
            seen.append(proc.stdout.readline())
        time.sleep(rng.uniform(0.0, 0.01))
        os.kill(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=60)
        out = "".join(seen) + out
        reported.update(delivered(out))
        repo = check_store(root, reported)
        last_run = [line.split()[1] for line in out.splitlines() if line.startswith("run ")][-1]
        if not out.rstrip().splitlines()[-1].startswith("final"):  # killed inside that run
            assert repo.get_run(last_run).status in (RunStatus.INTERRUPTED, RunStatus.COMPLETED)
        interrupted = sum(r.status is RunStatus.INTERRUPTED for r in repo.list_runs("s"))
        repo.close()
    assert len(reported) > 40
    assert interrupted >= 3  # kills landed inside runs, and each such run is found


@pytest.mark.parametrize("kind", ["user", "call", "tool", "final"])
def test_killed_right_after_each_kind_of_step_then_resumed_and_retried(store_url, kind):
    root = store_url
    proc = subprocess.run([*ENGINE, str(root), "s", f"die:{kind}", "1"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL
    reported = delivered(proc.stdout)
    assert list(reported.values())[-1][0] == kind  # it died right after delivering that step
    repo = check_store(root, reported)
    (run,) = repo.list_runs("s")
    if kind == "final":  # the final answer is committed with the run's end: delivered means completed
        assert run.status is RunStatus.COMPLETED and run.final_text and repo.get_run(run.id).status is RunStatus.COMPLETED
    else:
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


def test_a_dead_writers_leftovers_are_settled_when_the_store_opens(tmp_path):
    """A writer killed mid-write leaves its lease naming it and, at worst, a record cut short and a run
    the index never heard of. Opening the store settles all three, so verify() finds nothing."""
    import orjson

    from agio_notebook.core import AgentRun

    repo = new_repository(tmp_path)
    runner = StepRunner(Agent(model=FunctionModel(lambda m, t: "hi")), repository=repo)
    done = asyncio.run(runner.run("s", "hello"))
    lease, journal = repo.claim_file("s"), repo.session_file("s")
    repo.close()
    assert lease.read_bytes() == b""  # a clean release empties the lease

    orphan = AgentRun(session_id="s", status=RunStatus.RUNNING)  # written to the session, never to the index
    lease.write_bytes(orjson.dumps({"pid": 2 ** 22 + 1, "host": "h", "what": "a run", "since": time.time()}))
    with journal.open("ab") as f:
        f.write(b'{"t":"runs","d":%s}\n' % orjson.dumps(orphan.to_dict()))
        f.write(b'{"t":"steps","d":{"id":"cut sh')  # the kill landed inside this write
    with (tmp_path / "index.jsonl").open("ab") as f:
        f.write(b'{"t":"runs","d":{"id":"also cut')  # or inside the index's
    ghost = journal.with_name("ghost.jsonl")  # killed inside a new session's very first write
    ghost.write_bytes(b'{"t":"session","d":{"session_id":"gh')
    ghost.with_suffix(".claim").write_bytes(lease.read_bytes())

    with pytest.warns(Warning, match="incomplete record .* it is removed") as seen:
        repo = new_repository(tmp_path)
    assert {Path(str(w.message).split(":")[0].split()[-1]).name for w in seen} >= {"s.jsonl", "index.jsonl"}
    assert repo.verify() == []
    assert journal.read_bytes().endswith(b"\n") and (tmp_path / "index.jsonl").read_bytes().endswith(b"\n")
    runs = {r.id: r for r in repo.list_runs("s")}
    assert runs[done.run_id].status is RunStatus.COMPLETED
    assert runs[orphan.id].status is RunStatus.INTERRUPTED
    assert "in process 4194305 on h" in runs[orphan.id].error
    assert lease.read_bytes() == b""  # settled once: the next open has nothing to visit
    assert ghost.read_bytes() == b"" and ghost.with_suffix(".claim").read_bytes() == b""
    repo.close()
