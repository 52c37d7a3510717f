"""Two processes running the engine in one session: a claim through the store keeps them apart."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from agio_notebook import Agent, ExecutionConfig, ScriptedModel, StepRunner
from agio_notebook.core import RunStatus, SessionBusyError
from agio_notebook.storage import TinyDBRepository
from agio_notebook.storage.claims import LINGER, ClaimFiles, LingeringReleases

import pytest

ENGINE = [sys.executable, str(Path(__file__).with_name("engine_writer.py"))]


def wait_for(predicate, timeout=60.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def check_consistent(repo: TinyDBRepository, session: str) -> None:
    steps = repo.get_steps(session)
    dupes = [seq for seq, n in Counter(s.sequence for s in steps).items() if n > 1]
    assert not dupes, f"duplicate sequences: {dupes}"
    calls = {c.id for s in steps for c in s.tool_calls}
    results = {s.tool_call_id for s in steps if s.role.value == "tool"}
    assert calls == results  # every tool call has its result: the context is valid for OpenAI-style APIs
    assert repo.verify() == []


def test_second_process_gets_one_clear_line_naming_the_holder(tmp_path):
    root = tmp_path / "store"
    release = tmp_path / "release"  # the holder's tool waits for it: a run in progress however slow the start
    holder = subprocess.Popen([*ENGINE, str(root), "s", f"hold:{release}", "6"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().startswith("run ")
        second = subprocess.run([*ENGINE, str(root), "s", "loop", "1"], capture_output=True, text=True, timeout=60)
        assert second.returncode == 3, second.stderr
        (line,) = second.stdout.splitlines()
        assert line.startswith(f"busy session s is in use by a run in process {holder.pid} on "
                               f"{socket.gethostname()} since ")
        # the holder is named in the lease beside the session's journal
        lease = json.loads((root / "sessions" / "s.claim").read_text())
        assert lease["pid"] == holder.pid and lease["host"] == socket.gethostname()
    finally:
        release.touch()
        holder.wait(timeout=120)
    assert holder.returncode == 0
    repo = TinyDBRepository(root)
    assert [r.status for r in repo.list_runs("s")] == [RunStatus.COMPLETED] * 6
    check_consistent(repo, "s")


def test_two_processes_that_wait_take_turns_without_duplicate_sequences(tmp_path):
    root = tmp_path / "store"
    procs = [subprocess.Popen([*ENGINE, str(root), "s", mode, "5", "120"], stdout=subprocess.PIPE, text=True)
             for mode in ("slow", "slow")]
    outs = [p.communicate(timeout=180)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert not any("busy" in out for out in outs)
    repo = TinyDBRepository(root)
    runs = repo.list_runs("s")
    assert len(runs) == 10 and all(r.status is RunStatus.COMPLETED for r in runs)
    assert len(repo.get_steps("s")) == 40
    check_consistent(repo, "s")
    # the runs never overlapped: each one's steps form one block of sequences
    for run in runs:
        seqs = [s.sequence for s in repo.get_steps("s") if s.run_id == run.id]
        assert seqs == list(range(seqs[0], seqs[0] + 4))


def test_a_dead_holders_claim_is_taken_over_and_its_run_interrupted(tmp_path):
    root = tmp_path / "store"
    dead = subprocess.run([*ENGINE, str(root), "s", "die:call", "1"], capture_output=True, text=True, timeout=60)
    assert dead.returncode == -signal.SIGKILL
    lease = json.loads((root / "sessions" / "s.claim").read_text())  # its lease is still there
    repo = TinyDBRepository(root)
    runner = StepRunner(Agent(model=ScriptedModel(["after the crash"])), repository=repo)
    result = runner.run_sync("s", "again")
    assert result.status is RunStatus.COMPLETED
    (old,) = [r for r in repo.list_runs("s") if r.id != result.run_id]
    assert old.status is RunStatus.INTERRUPTED and f"process {lease['pid']} on {lease['host']}" in old.error
    assert repo.session_holder("s") is None  # released after the run
    check_consistent(repo, "s")


def test_in_process_holder_and_session_wait(tmp_path):
    """A claim held by this process's store handle blocks another handle; session_wait waits it out."""
    root = tmp_path / "store"
    other = TinyDBRepository(root)
    other.claim_session("s", "a test")
    repo = TinyDBRepository(root)
    runner = StepRunner(Agent(model=ScriptedModel(["one", "two"])), repository=repo)
    with pytest.raises(SessionBusyError, match=r"session s is in use by a test in process \d+"):
        runner.run_sync("s", "blocked")
    assert repo.get_steps("s") == []  # nothing was written
    import threading

    threading.Timer(0.5, other.release_session, ("s",)).start()
    waiting = StepRunner(Agent(model=ScriptedModel(["waited"])), repository=repo,
                         config=ExecutionConfig(session_wait=30))
    assert waiting.run_sync("s", "waits").final_text == "waited"
    wait_for(lambda: repo.session_holder("s") is None, what="release")


def test_a_runs_release_lingers_so_the_next_run_here_takes_the_lock_over(tmp_path):
    """A run's release is finished on a worker thread a moment later: this process sees the session
    free at once, another process still finds it locked until then, and a run that follows here
    takes the same locked file over, so no other process slips in between two runs of a loop."""
    root = tmp_path / "store"
    repo = TinyDBRepository(root)
    runner = StepRunner(Agent(model=ScriptedModel(["one", "two"])), repository=repo)
    assert runner.run_sync("s", "first").status is RunStatus.COMPLETED
    lease_file = repo.claim_file("s")
    assert not repo._claims.holds("s") and repo.session_holder("s") is None  # free here at once
    assert ClaimFiles.holder(lease_file) is not None  # still locked for everyone else: lingering
    fd = repo._claims._releasing.pending("s")
    assert runner.run_sync("s", "second").status is RunStatus.COMPLETED
    assert fd is not None and repo._claims._releasing.pending("s") == fd  # the same file, never unlocked between the runs
    wait_for(lambda: ClaimFiles.holder(lease_file) is None, timeout=10, what="the lingering release")
    assert lease_file.read_bytes() == b""  # a clean release empties the lease
    assert [r.status for r in repo.list_runs("s")] == [RunStatus.COMPLETED] * 2


def test_close_finishes_releases_still_lingering(tmp_path):
    repo = TinyDBRepository(tmp_path / "store")
    runner = StepRunner(Agent(model=ScriptedModel(["one"])), repository=repo)
    runner.run_sync("s", "first")
    lease_file = repo.claim_file("s")
    repo.close()
    assert ClaimFiles.holder(lease_file) is None and lease_file.read_bytes() == b""


def test_a_release_taken_back_and_made_again_lingers_its_full_time():
    """The same handle (a file descriptor) released, taken back by the next run, then released again:
    the first release's timer must not finish the second one early."""
    finished: list[tuple[str, int, float]] = []
    releases = LingeringReleases(lambda session_id, fd: finished.append((session_id, fd, time.monotonic())))
    releases.defer("s", 7)
    assert releases.take_back("s") == 7 and releases.pending("s") is None
    time.sleep(LINGER / 2)  # the first release's timer is half run
    second = time.monotonic()
    releases.defer("s", 7)
    wait_for(lambda: finished, timeout=10, what="the second release")
    assert [(s, fd) for s, fd, _ in finished] == [("s", 7)]
    assert finished[0][2] >= second + LINGER  # finished by its own timer, not the first one's
    releases.defer("t", 8)
    releases.close()  # what is pending is finished at once
    assert [fd for _, fd, _ in finished] == [7, 8] and releases.pending("t") is None


def test_a_stream_left_with_break_lets_its_session_go_for_the_next_run(tmp_path):
    """``break`` out of ``async for`` leaves the stream to be closed by the event loop a moment later: the next
    run in that session waits that moment (not ``session_wait``), and the one left is stored cancelled. A run
    really in progress here still makes the next one busy, in one line."""
    import asyncio

    repo = TinyDBRepository(str(tmp_path / "store"))
    agent = Agent(model=ScriptedModel(["one two three"], loop=True, ttft=0.05))
    runner = StepRunner(agent, repository=repo)

    async def scenario():
        async for _ in runner.run_stream("s", "first"):
            break
        second = await runner.run("s", "second")
        slow = StepRunner(Agent(model=ScriptedModel(["slow"], ttft=0.5)), repository=repo)
        running = asyncio.ensure_future(slow.run("s", "third"))
        await asyncio.sleep(0.05)  # the third is waiting for its model
        started = time.monotonic()
        with pytest.raises(SessionBusyError, match="already has a run in progress"):
            await runner.run("s", "fourth")
        waited = time.monotonic() - started
        return second, await running, waited

    second, third, waited = asyncio.run(scenario())
    assert second.status is RunStatus.COMPLETED and third.status is RunStatus.COMPLETED
    assert waited < 0.2  # at once (session_wait=0), not after the third's 0.5 s
    statuses = {r.query: r.status for r in repo.list_runs("s")}
    assert statuses == {"first": RunStatus.CANCELLED, "second": RunStatus.COMPLETED, "third": RunStatus.COMPLETED}
    repo.close()
