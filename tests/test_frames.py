"""DataFrames from a real store: contents, real dtypes, attempts side by side."""

from __future__ import annotations

import asyncio

import pandas as pd
import pytest

from agio_notebook import Agent, StepRunner, fork_session, frames, tool
from agio_notebook.storage import TinyDBRepository, new_repository
from store_backends import BACKENDS, store_url as make_store_url

from engine_support import ChunkModel, calls, text


@tool
def divide(a: float, b: float) -> float:
    """Divide a by b."""
    return a / b


@pytest.fixture(scope="module", params=BACKENDS)
def store(request, tmp_path_factory):
    """The same history on each backend: TinyDB files, SQLite, PostgreSQL."""
    server = request.getfixturevalue("postgres_server") if request.param == "postgres" else None
    repo = new_repository(make_store_url(request.param, tmp_path_factory.mktemp("frames"), server))
    runner = StepRunner(Agent(model=ChunkModel([calls(("divide", {"a": 1, "b": 0}), ("divide", {"a": 6, "b": 3})),
                                                 text("one failed, 6/3 is 2")]), tools=[divide]), repository=repo)
    first = asyncio.run(runner.run("s1", "divide things"))
    retry = StepRunner(Agent(model=ChunkModel([text("second attempt")]), tools=[divide]), repository=repo)
    second = asyncio.run(retry.retry(first.run_id, from_seq=5))
    fork = fork_session("s1", 4, repo)
    return repo, first, second, fork


def test_steps_frame_dtypes_and_attempts(store):
    repo, first, second, _ = store
    df = frames.steps("s1", repository=repo)
    assert list(df["sequence"]) == [1, 2, 3, 4, 5, 5]
    assert list(df["attempt"]) == [1, 1, 1, 1, 1, 2]
    assert list(df["superseded"]) == [False, False, False, False, True, False]
    assert isinstance(df["role"].dtype, pd.CategoricalDtype) and isinstance(df["status"].dtype, pd.CategoricalDtype)
    assert str(df["created_at"].dtype) == "datetime64[ns, UTC]"
    assert str(df["total_tokens"].dtype) == "Int64" and df["model_ms"].dtype == "float64"
    assert df.loc[df.role == "assistant", "total_tokens"].notna().all()
    assert df.loc[df.role == "user", "total_tokens"].isna().all()
    assert list(df.loc[df.role == "tool", "status"]) == ["error", "ok"]
    only_second = frames.steps(run_id=second.run_id, repository=repo)
    assert list(only_second["content"]) == ["second attempt"]
    by_role = df.groupby("role", observed=True)["duration_ms"].sum()
    assert by_role["assistant"] > 0


def test_runs_and_metrics_frames(store):
    repo, first, second, _ = store
    df = frames.runs(repository=repo)
    assert list(df["run_id"]) == [first.run_id, second.run_id]
    assert list(df["kind"]) == ["run", "retry"] and list(df["attempt"]) == [1, 2]
    assert df.loc[0, "superseded_by"] == second.run_id and df.loc[1, "retry_of"] == first.run_id
    assert list(df["status"]) == ["completed", "completed"]
    assert str(df["started_at"].dtype) == "datetime64[ns, UTC]" and str(df["tool_errors"].dtype) == "Int64"
    assert df.loc[0, "tool_calls"] == 2 and df.loc[0, "tool_errors"] == 1
    m = frames.run_metrics(repository=repo)
    assert m.index.name == "run_id" and m.loc[first.run_id, "model_calls"] == 2


def test_tool_calls_frame_joins_results(store):
    repo, first, _, _ = store
    df = frames.tool_calls("s1", repository=repo)
    assert list(df["name"]) == ["divide", "divide"]
    assert list(df["status"]) == ["error", "ok"]
    assert "ZeroDivisionError" in df.loc[0, "error"] and df.loc[1, "result"] == "2.0"
    assert list(df["result_sequence"]) == [3, 4] and (df["duration_ms"] >= 0).all()


def test_sessions_frame_shows_fork_origin(store):
    repo, _, _, fork = store
    df = frames.sessions(repository=repo).set_index("session_id")
    assert df.loc[fork, "forked_from"] == "s1" and df.loc[fork, "forked_at"] == 4
    assert df.loc["s1", "runs"] == 2 and df.loc[fork, "runs"] == 0
    assert len(frames.steps(fork, repository=repo)) == 4


def test_top_level_reexports():
    import agio_notebook
    assert agio_notebook.steps is frames.steps and agio_notebook.runs is frames.runs


def test_an_unreadable_session_is_skipped_with_a_warning_naming_it(tmp_path):
    from agio_notebook.core import Step, StepRole
    repo = TinyDBRepository(tmp_path / "store")
    for sid in ("good", "bad"):
        repo.commit(steps=[Step(session_id=sid, run_id="r", sequence=1, role=StepRole.USER, content=sid)])
    path = repo.session_file("bad")
    path.write_bytes(path.read_bytes().replace(b'"content":"bad"', b'"content":"bad'))
    with pytest.warns(UserWarning, match="bad.jsonl"):
        df = frames.steps(repository=TinyDBRepository(tmp_path / "store"))
    assert list(df["content"]) == ["good"]


def test_sqlite_whole_store_frame_types_columns_that_start_empty(tmp_path):
    """A large SQLite store's whole-store frame is read through Arrow, which types a column from the
    values it reads: a cost or an error that is missing for the first thousands of steps still comes
    through, and the frame equals the one read row by row."""
    from agio_notebook.core import Step, StepMetrics, StepRole

    repo = new_repository(f"sqlite:///{tmp_path}/agio.db")
    repo.arrow_threshold = 0  # a large store's path, on a small store
    quiet = [Step(session_id="a", run_id="r", sequence=n, role=StepRole.USER, content=f"q{n}")
             for n in range(1, 3001)]
    loud = Step(session_id="b", run_id="r", sequence=1, role=StepRole.ASSISTANT, content="late", error="boom",
                metrics=StepMetrics(model_ms=12, total_tokens=7, cost=0.25))
    repo.commit(steps=[*quiet, loud])
    whole = frames.steps(repository=repo)
    assert len(whole) == 3001 and list(whole["session_id"].iloc[[0, -1]]) == ["a", "b"]
    last = whole.iloc[-1]
    assert (last["error"], last["cost"], last["model_ms"], last["total_tokens"]) == ("boom", 0.25, 12.0, 7)
    assert whole["cost"].iloc[:-1].isna().all() and whole["error"].iloc[:-1].isna().all()
    one = frames.steps("b", repository=repo)  # the per-session read goes through sqlite3: same frame
    pd.testing.assert_frame_equal(whole.iloc[[-1]].reset_index(drop=True), one)
    repo.arrow_threshold = 10 ** 9
    pd.testing.assert_frame_equal(frames.steps(repository=repo), whole)
    repo.close()


def test_the_sqlite_arrow_read_leaves_the_store_and_its_later_commits_intact(tmp_path):
    """The Arrow reader links a SQLite library of its own, so it reads in a child process: in this one
    it would drop the store's locks and could checkpoint the WAL away under the open connection."""
    import subprocess
    import sys

    from agio_notebook.core import Step, StepRole

    db = tmp_path / "agio.db"
    repo = new_repository(f"sqlite:///{db}")
    repo.arrow_threshold = 0
    repo.commit(steps=[Step(session_id="a", run_id="r", sequence=1, role=StepRole.USER, content="one")])
    assert len(frames.steps(repository=repo)) == 1
    repo.commit(steps=[Step(session_id="a", run_id="r", sequence=2, role=StepRole.USER, content="two")])
    assert list(frames.steps(repository=repo)["content"]) == ["one", "two"]
    count = "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT COUNT(*) FROM agio_steps').fetchone()[0])"
    seen = subprocess.run([sys.executable, "-c", count, str(db)], capture_output=True, text=True, check=True)
    assert seen.stdout.strip() == "2" and db.with_name("agio.db-wal").exists()
    assert repo.verify() == []
    repo.close()


def test_a_failing_sqlite_arrow_read_is_one_line(tmp_path, monkeypatch):
    from agio_notebook.core import Step, StepRole, StoreError
    from agio_notebook.storage import sqlite_repo

    repo = new_repository(f"sqlite:///{tmp_path}/agio.db")
    repo.arrow_threshold = 0
    repo.commit(steps=[Step(session_id="a", run_id="r", sequence=1, role=StepRole.USER, content="one")])
    monkeypatch.setattr(sqlite_repo, "FRAME_COLUMNS", ("nonsense_column",))
    with pytest.raises(StoreError, match=r"^cannot read the SQLite store at .*agio\.db: \S.*nonsense_column") as err:
        frames.steps(repository=repo)
    assert "\n" not in str(err.value)
    repo.close()
