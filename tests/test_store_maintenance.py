"""`agio store ...` on a store with 10k steps: stats, export (JSON Lines, Parquet round-trips into the same
frames), prune, delete, compact; everything stays readable with TinyDB."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import pytest
from tinydb import TinyDB

from agio_notebook import Agent, Reply, ScriptedModel, StepRunner, frames, tool
from agio_notebook.core import AgentRun, AgentSession, NotFoundError, RunStatus, Step, StepRole, ToolCall
from agio_notebook.storage import InMemoryRepository, JournalStorage, TinyDBRepository
from agio_notebook.storage.export import export_jsonl, export_parquet, load_export

OLD = datetime(2020, 1, 1, tzinfo=timezone.utc).timestamp()
SESSIONS, RUNS_PER_SESSION = 100, 25  # x 4 steps = 10,000 steps


def add_runs(repo, session_id: str, count: int, when: float | None = None) -> None:
    """``count`` completed runs of 4 steps (user, tool call, tool result, answer), one commit each."""
    seq = 0
    session = AgentSession(session_id=session_id, **({"created_at": when} if when else {}))
    for i in range(count):
        run = AgentRun(session_id=session_id, query=f"q{i}", status=RunStatus.COMPLETED, agent_name="a",
                       model_name="m", start_sequence=seq + 1, end_sequence=seq + 4, final_text=f"a{i}")
        if when:
            run.started_at = run.ended_at = when + i
        else:
            run.ended_at = run.started_at + 1
        call = ToolCall(id=f"c{i}", name="add", arguments='{"a": 1, "b": 2}')
        steps = [Step(session_id=session_id, run_id=run.id, sequence=seq + 1, role=StepRole.USER, content=f"q{i}"),
                 Step(session_id=session_id, run_id=run.id, sequence=seq + 2, role=StepRole.ASSISTANT,
                      tool_calls=[call]),
                 Step(session_id=session_id, run_id=run.id, sequence=seq + 3, role=StepRole.TOOL, content="3",
                      tool_call_id=call.id, name="add"),
                 Step(session_id=session_id, run_id=run.id, sequence=seq + 4, role=StepRole.ASSISTANT,
                      content=f"a{i}")]
        run.metrics.steps = 4
        repo.commit(session=session if i == 0 else None, run=run, steps=steps)
        seq += 4


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def retried_session(repo, session_id: str) -> tuple[str, str]:
    """A session with a run and its retry (superseded steps), through the engine."""
    model = ScriptedModel([Reply.call("add", a=1, b=2), "first", Reply.call("add", a=1, b=2), "second"])
    runner = StepRunner(Agent(model=model, tools=[add]), repository=repo)
    first = runner.run_sync(session_id, "q").run_id
    import asyncio

    second = asyncio.run(runner.retry(first)).run_id
    return first, second


@pytest.fixture(scope="module")
def big_store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("big") / "store"
    repo = TinyDBRepository(root)
    for n in range(SESSIONS):
        add_runs(repo, f"s{n:03d}", RUNS_PER_SESSION, when=OLD if n < 10 else None)
    retried_session(repo, "retried")
    repo.close()
    return root


@pytest.fixture
def store(big_store, tmp_path) -> Path:
    import shutil

    root = tmp_path / "store"
    shutil.copytree(big_store, root)
    return root


def agio(*args, store):
    return subprocess.run([sys.executable, "-m", "agio_notebook", "--store", str(store), *args],
                          capture_output=True, text=True, timeout=300)


def tinydb_counts(root: Path) -> dict[str, int]:
    """Steps per session file, read with the tinydb package (through the store's Storage class)."""
    out = {}
    for path in sorted((root / "sessions").glob("*.jsonl")):
        db = TinyDB(path, storage=JournalStorage)
        out[path.stem] = len(db.table("steps").all())
        db.close()
    return out


def same_frames(a, b) -> None:
    for build in (frames.steps, frames.runs, frames.tool_calls):
        pd.testing.assert_frame_equal(build(repository=a), build(repository=b))
    sa = frames.sessions(repository=a).sort_values("session_id").reset_index(drop=True)
    sb = frames.sessions(repository=b).sort_values("session_id").reset_index(drop=True)
    pd.testing.assert_frame_equal(sa, sb)


def test_stats_on_10k_steps(store):
    res = agio("store", "stats", "--top", "3", store=store)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == f"sessions {SESSIONS + 1}"
    assert lines[1].startswith(f"runs     {SESSIONS * RUNS_PER_SESSION + 2} (completed {SESSIONS * RUNS_PER_SESSION + 2})")
    assert lines[2] == f"steps    {SESSIONS * RUNS_PER_SESSION * 4 + 7}"
    assert lines[4] == f"bytes    {sum(p.stat().st_size for p in store.rglob('*') if p.is_file())}"
    assert lines[5] == "largest sessions:" and len(lines) == 9
    stats = TinyDBRepository(store).stats()
    assert stats.steps == 10_007 and stats.largest[0].steps == 100


def test_parquet_and_jsonl_exports_round_trip_into_the_same_frames(store, tmp_path):
    res = agio("store", "export", str(tmp_path / "parquet"), store=store)
    assert res.returncode == 0, res.stderr
    assert "10007 steps" in res.stdout
    assert sorted(p.name for p in (tmp_path / "parquet").iterdir()) == [
        "events.parquet", "files.parquet", "journal.parquet", "runs.parquet", "sessions.parquet", "steps.parquet"]
    assert len(pd.read_parquet(tmp_path / "parquet" / "steps.parquet")) == 10_007  # plain Parquet for sharing
    repo = TinyDBRepository(store)
    same_frames(load_export(tmp_path / "parquet"), repo)
    res = agio("store", "export", str(tmp_path / "all.jsonl"), store=store)
    assert res.returncode == 0 and "records" in res.stdout
    same_frames(load_export(tmp_path / "all.jsonl"), repo)
    # one session only, from Python
    assert export_parquet(repo, tmp_path / "one", "retried")["steps"] == 7
    assert export_jsonl(repo, tmp_path / "one.jsonl", "retried") > 7


def test_an_integer_past_64_bits_is_exported_to_parquet_exactly(tmp_path):
    repo = TinyDBRepository(str(tmp_path / "store"))
    big = Agent(model=ScriptedModel([Reply.call("final_result", result=2**63 + 5)]), output_type=int)
    result = StepRunner(big, repository=repo).run_sync(None, "a big number?")
    assert result.output == 2**63 + 5
    export_parquet(repo, tmp_path / "parquet")
    assert load_export(tmp_path / "parquet").get_run(result.run_id).output == 2**63 + 5
    repo.close()


def test_prune_superseded_and_old_sessions(store):
    repo = TinyDBRepository(store)
    before = frames.steps(repository=repo)
    assert before.superseded.sum() == 3
    res = agio("store", "prune", "--superseded", store=store)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "removed 0 sessions, 1 runs, 3 steps, 10 events"
    after = frames.steps(repository=TinyDBRepository(store))
    assert after.superseded.sum() == 0 and len(after) == len(before) - 3
    assert len(frames.runs("retried", repository=TinyDBRepository(store))) == 1
    res = agio("store", "prune", "--older-than", "2021-01-01", store=store)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("removed 10 sessions, 250 runs, 1000 steps")
    fresh = TinyDBRepository(store)
    assert len(fresh.list_sessions()) == SESSIONS - 10 + 1
    assert fresh.get_session("s000") is None and fresh.get_session("s010") is not None
    counts = tinydb_counts(store)  # readable with TinyDB after prune
    assert len(counts) == SESSIONS - 10 + 1 and counts["s010"] == 100 and counts["retried"] == 4
    assert fresh.verify() == []


def test_delete_a_session_and_a_run(store):
    repo = TinyDBRepository(store)
    run_id = repo.list_runs("s050")[3].id
    res = agio("store", "delete", "--run", run_id, store=store)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "removed 0 sessions, 1 runs, 4 steps, 0 events"
    fresh = TinyDBRepository(store)
    assert fresh.get_run(run_id) is None and len(fresh.get_steps("s050")) == 96
    res = agio("store", "delete", "--session", "s051", store=store)
    assert res.stdout.strip() == "removed 1 sessions, 25 runs, 100 steps, 0 events"
    fresh = TinyDBRepository(store)
    assert fresh.get_session("s051") is None and fresh.get_steps("s051") == []
    assert not (store / "sessions" / "s051.jsonl").exists()
    assert "s051" not in set(frames.runs(repository=fresh).session_id)
    bad = agio("store", "delete", "--session", "nope", store=store)
    assert bad.returncode == 1 and bad.stderr.strip() == f"agio: no session 'nope' in the store at {store}"
    both = agio("store", "delete", store=store)
    assert both.returncode == 1 and "exactly one of --session or --run" in both.stderr
    assert tinydb_counts(store)["s050"] == 96


def test_compact_keeps_everything_readable_with_tinydb(store):
    before = tinydb_counts(store)
    frame = frames.steps(repository=TinyDBRepository(store))
    res = agio("store", "compact", store=store)
    assert res.returncode == 0 and res.stdout.strip() == "compacted"
    for path in (store / "sessions").glob("*.jsonl"):
        assert path.read_bytes().count(b"\n") == 1  # one snapshot line each
    assert tinydb_counts(store) == before
    pd.testing.assert_frame_equal(frames.steps(repository=TinyDBRepository(store)), frame)
    assert agio("store", "verify", store=store).returncode == 0


def test_a_session_in_use_is_not_deleted(tmp_path):
    repo = TinyDBRepository(tmp_path / "store")
    add_runs(repo, "busy", 1)
    other = TinyDBRepository(tmp_path / "store")
    other.claim_session("busy", "a run")
    res = agio("store", "delete", "--session", "busy", store=tmp_path / "store")
    assert res.returncode == 1 and "session busy is in use by a run in process" in res.stderr
    assert len(repo.get_steps("busy")) == 4
    other.release_session("busy")
    res = agio("store", "prune", "--older-than", "last tuesday", store=tmp_path / "store")
    assert res.returncode == 1 and res.stderr == "agio: not a date: 'last tuesday' (use YYYY-MM-DD or an ISO date and time)\n"
    res = agio("store", "prune", store=tmp_path / "store")
    assert res.returncode == 1 and res.stderr.count("\n") == 1 and "--superseded and/or --older-than" in res.stderr
    assert len(TinyDBRepository(tmp_path / "store").get_steps("busy")) == 4


def test_in_memory_repository_speaks_the_same_maintenance_protocol():
    repo = InMemoryRepository()
    add_runs(repo, "old", 2, when=OLD)
    add_runs(repo, "new", 3)
    first, _ = retried_session(repo, "r")
    assert repo.stats().steps == 8 + 12 + 7
    assert repo.prune(superseded=True).steps == 3
    assert repo.prune(older_than="2021-01-01").sessions == 1
    assert repo.delete_run(repo.list_runs("new")[0].id).steps == 4
    assert repo.delete_session("new").steps == 8
    with pytest.raises(NotFoundError):
        repo.delete_session("new")
    assert repo.verify() == [] and repo.repair() == []
