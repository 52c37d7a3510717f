"""Everything a store holds survives a trip between every pair of backends (TinyDB, SQLite, PostgreSQL) and
through both exports (JSON Lines, Parquet, loaded back with ``load_export``): sessions, runs, steps of every
attempt, events, every named journal (memory records and their vectors, feedback and proposals, a batch
with its executions and logs, a plan, and a journal no code here knows, keyed by two fields and with a
deleted document), and the workspace files beside the store. Every table is compared, and the frames
built from it; ``agio store migrate`` reports what it copied, counted the same way."""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pandas as pd
import pytest

from agio_notebook import Agent, ExecutionConfig, FunctionModel, Reply, ScriptedModel, StepRunner, frames, memory
from agio_notebook.core import StoreError
from agio_notebook.memory.store import memory_for
from agio_notebook.scheduling import Plan, PlanExecutor, batch, default_executor, executions
from agio_notebook.storage import new_repository
from agio_notebook.storage.base import iter_events
from agio_notebook.storage.contents import journal_rows, write_files
from agio_notebook.storage.export import export_jsonl, export_parquet, load_export
from agio_notebook.storage.migrate import migrate
from agio_notebook.toolkits import workspace_files
from store_backends import BACKENDS, store_url

STORES = BACKENDS  # tinydb, sqlite, postgres
EXPORTS = ("jsonl", "parquet")
PROGRESS = {"progress": lambda d: f"{d['learner']}:{d['exercise']}"}  # a journal whose owner no code here knows


def release(repo) -> None:
    """Close what the frames opened for ``repo`` (its executor's journals, its memory and index), then it."""
    from agio_notebook.memory import store as memory_store
    from agio_notebook.scheduling import executor as executor_module

    for key, ex in list(executor_module._executors.items()):
        if ex.repository is repo:
            del executor_module._executors[key]
            ex.store.close()
    held = memory_store._stores.pop(repo, None)
    if held is not None:
        held.close()
    repo.close()


@pytest.fixture
def opened():
    """Repositories a test opens, released when it ends (a test later in the run may count descriptors)."""
    repos: list = []
    yield repos
    for repo in repos:
        release(repo)


@pytest.fixture(autouse=True)
def _here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a PostgreSQL store keeps its files under ./.agio
    monkeypatch.delenv("AGIO_WORKSPACES", raising=False)


def fill(repo) -> dict[str, str]:
    """Runs with workspace writes (actions), a retry (a superseded attempt), a fork, memory with vectors of
    two models, feedback, a batch, a plan, and a journal of unknown kind with a deletion."""
    tools = workspace_files()
    model = ScriptedModel([Reply.call("write_file", path="notes/a.txt", content="first"), "Wrote it.",
                           Reply.call("write_file", path="notes/a.txt", content="second"), "Rewrote it.",
                           "Forked."])
    runner = StepRunner(Agent(model=model, tools=tools, name="writer"), repository=repo)
    first = runner.run_sync(None, "write a note")
    second = asyncio.run(runner.retry(first.run_id, from_seq=2))
    fork = asyncio.run(runner.fork(first.session_id, 1, "again, in a fork"))
    skill = memory.add_skill("notes", "Keep notes short.", repository=repo)
    exp = memory.add_experience("a long note", "split it", "it read well", "split long notes", repository=repo)
    store = memory_for(repo)
    store.put_vectors("embed-a", [(skill, [0.1, 0.2]), (exp, [0.3, 0.4])])
    store.put_vectors("embed-b", [(skill, [0.5, 0.6])])  # same record, another model: a key of two fields
    memory.add_feedback(second.run_id, -1, "too terse", correction="Wrote it, with care.", repository=repo)
    echo = Agent(model=FunctionModel(lambda m, t: "echo: " + m[-1]["content"], name="echo"), name="echo",
                 config=ExecutionConfig(enable_retry=False))
    batch(echo, ["b1", "b2", "b3"], name="trip", repository=repo).wait(60)
    plan = Plan(name="trip-plan").add("a", "task A").add("b", "then {a}", depends_on=["a"])
    PlanExecutor(echo, executor=default_executor(repo)).execute_plan(plan).wait(60)
    progress = repo.journal("progress/class-1", PROGRESS)
    progress.append([("progress", {"learner": "ana", "exercise": "e1", "passed": True}),
                     ("progress", {"learner": "ana", "exercise": "e2", "passed": False}),
                     ("progress", {"learner": "bo", "exercise": "e1", "passed": True})])
    progress.append([("progress", {"learner": "ana", "exercise": "e2", "passed": True})],  # updated in place
                    deletes=[("progress", "bo:e1")])  # and one removed: it must not come back
    progress.close()
    # typed runs: an answer, an Optional answer that is None, and a plan only (no tool run, no answer)
    answers = ScriptedModel([Reply.call("final_result", result=3), Reply.call("final_result", result=None),
                             Reply.call("final_result", result=4)])
    for query, config in (("three", None), ("none", None), ("plan", ExecutionConfig(execute_tools=False))):
        typed = Agent(model=answers, name="typed", output_type=Optional[int])
        StepRunner(typed, repository=repo, config=config).run_sync(None, query)
    return {"first": first.run_id, "second": second.run_id, "fork": fork.session_id}


def dump(repo) -> dict:
    """Every table, as comparable data (documents as stored; files as bytes or link targets)."""
    runs = sorted(repo.iter_run_dicts(), key=lambda d: d["id"])
    out = {
        "sessions": sorted((s.to_dict() for s in repo.list_sessions()), key=lambda d: d["session_id"]),
        "runs": runs,
        "steps": sorted(repo.iter_step_dicts(), key=lambda d: d["id"]),
        "events": {r["id"]: [e.to_dict() for e in iter_events(repo, r["id"])] for r in runs},
        "journals": {},
        "files": {},
    }
    for name, table, key, doc in journal_rows(repo):
        out["journals"].setdefault(name, {}).setdefault(table, {})[key] = doc
    root = getattr(repo, "files_root", None)
    if root is not None and (Path(root) / "workspaces").is_dir():
        for path in sorted((Path(root) / "workspaces").rglob("*")):
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                out["files"][rel] = ("link", os.readlink(path))
            elif path.is_file():
                out["files"][rel] = path.read_bytes()
    return out


def frames_of(repo) -> dict[str, pd.DataFrame]:
    def tidy(df: pd.DataFrame, by: list[str]) -> pd.DataFrame:
        return df.sort_values(by).reset_index(drop=True)

    return {
        "runs": tidy(frames.runs(repository=repo), ["run_id"]),
        "steps": tidy(frames.steps(repository=repo), ["step_id"]),
        "tool_calls": tidy(frames.tool_calls(repository=repo), ["tool_call_id"]),
        "actions": tidy(frames.actions(repository=repo), ["action_id"]),
        "sessions": tidy(frames.sessions(repository=repo), ["session_id"]),
        "executions": tidy(executions(repository=repo), ["execution_id"]),
        "skills": tidy(memory.skills(repository=repo), ["id"]),
        "experiences": tidy(memory.experiences(repository=repo), ["id"]),
        "feedback": tidy(memory.feedback(repository=repo), ["id"]),
        "outputs": tidy(frames.outputs(repository=repo), ["run_id"]),
    }


def check_source(data: dict, ids: dict[str, str]) -> None:
    """The source holds what fill() made, so an empty copy could never compare equal to it."""
    assert len(data["sessions"]) >= 2 + 3 + 2 and len(data["runs"]) >= 3 + 3 + 2
    assert any(s["superseded"] for s in data["steps"])
    assert any(s["session_id"] == ids["fork"] for s in data["steps"])
    assert all(data["events"][r["id"]] for r in data["runs"])
    journals = data["journals"]
    assert set(journals) >= {"memory", "executions/trip", "executions/trip-plan", "progress/class-1"}
    assert journals["progress/class-1"]["progress"] == {
        "ana:e1": {"learner": "ana", "exercise": "e1", "passed": True},
        "ana:e2": {"learner": "ana", "exercise": "e2", "passed": True}}
    vectors = journals["memory"]["vectors"]
    assert {k.split(":")[0] for k in vectors} == {"embed-a", "embed-b"} and len(vectors) == 3
    assert journals["memory"]["feedback"] and journals["memory"]["skills"] and journals["memory"]["experiences"]
    assert len(journals["executions/trip"]["executions"]) == 3 and journals["executions/trip"]["execution_logs"]
    assert journals["executions/trip-plan"]["batch"]["trip-plan"]["kind"] == "plan"
    blobs = [p for p in data["files"] if p.startswith("workspaces/blobs/")]
    assert {data["files"][p] for p in blobs} >= {b"first", b"second"}
    assert any(p.startswith("workspaces/sessions/") for p in data["files"])
    typed = {r["query"]: r for r in data["runs"] if r.get("agent_name") == "typed"}
    assert typed["three"]["output"] == 3 and typed["none"]["output"] is None and "output" not in typed["plan"]


def assert_same(source, target) -> None:
    want, got = dump(source), dump(target)
    for table in want:
        assert got[table] == want[table], f"table {table} differs"
    fa, fb = frames_of(source), frames_of(target)
    assert not fa["executions"].empty and not fa["actions"].empty and not fa["feedback"].empty
    assert len(fa["outputs"]) == 2  # the typed runs that gave an answer: 3, and None
    for name in fa:
        pd.testing.assert_frame_equal(fb[name], fa[name], check_like=True, obj=name)


@pytest.fixture(scope="module", params=STORES)
def source(request, tmp_path_factory):
    """One filled store per backend."""
    server = request.getfixturevalue("postgres_server") if request.param == "postgres" else None
    here = tmp_path_factory.mktemp(f"source-{request.param}")
    old = os.getcwd()
    os.chdir(here)
    try:
        repo = new_repository(store_url(request.param, here, server))
        ids = fill(repo)
        check_source(dump(repo), ids)
        yield request.param, repo
        release(repo)
    finally:
        os.chdir(old)


@pytest.mark.parametrize("to", STORES)
def test_migrate_between_every_pair_of_backends(source, to, tmp_path, request, opened):
    kind, repo = source
    server = request.getfixturevalue("postgres_server") if to == "postgres" else None
    url = store_url(to, tmp_path, server)
    target = new_repository(url)
    report = migrate(repo, target)
    data = dump(repo)
    assert (report.sessions, report.runs, report.steps, report.events) == (
        len(data["sessions"]), len(data["runs"]), len(data["steps"]), sum(map(len, data["events"].values())))
    assert report.journals == len(data["journals"])
    assert report.journal_records == sum(len(d) for t in data["journals"].values() for d in t.values())
    assert report.files == len(data["files"])
    try:
        assert_same(repo, target)
    finally:
        release(target)
    again = new_repository(url)
    opened.append(again)
    assert_same(repo, again)  # read back through a store opened afresh, not only the writer's view


@pytest.mark.parametrize("fmt", EXPORTS)
def test_export_and_load_back_from_every_backend(source, fmt, tmp_path, opened):
    kind, repo = source
    path = tmp_path / ("store.jsonl" if fmt == "jsonl" else "store-parquet")
    if fmt == "jsonl":
        export_jsonl(repo, path)
    else:
        counts = export_parquet(repo, path)
        assert counts["journal"] > 0 and counts["files"] > 0
    loaded = load_export(path)
    opened.append(loaded)
    assert loaded.files_root == path.with_name(path.name + ".files")
    assert_same(repo, loaded)
    assert not executions(repository=loaded).empty


@pytest.mark.parametrize("fmt", EXPORTS)
def test_an_export_migrates_into_every_backend(fmt, tmp_path, postgres_server, opened):
    src = new_repository(str(tmp_path / "src"))
    opened.append(src)
    fill(src)
    path = tmp_path / ("x.jsonl" if fmt == "jsonl" else "x-parquet")
    (export_jsonl if fmt == "jsonl" else export_parquet)(src, path)
    loaded = load_export(path)
    opened.append(loaded)
    for to in STORES:
        (tmp_path / to).mkdir()
        target = new_repository(store_url(to, tmp_path / to, postgres_server))
        opened.append(target)
        migrate(loaded, target)
        assert_same(src, target)


def test_agio_store_migrate_reports_what_it_copied(tmp_path):
    src = new_repository(str(tmp_path / "src"))
    fill(src)
    data = dump(src)
    release(src)
    env = {k: v for k, v in os.environ.items() if k != "AGIO_STORE"}
    done = subprocess.run([sys.executable, "-m", "agio_notebook", "store", "migrate", str(tmp_path / "src"),
                           f"sqlite:///{tmp_path / 'dst.db'}"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    records = sum(len(d) for t in data["journals"].values() for d in t.values())
    assert done.stdout.strip() == (
        f"copied {len(data['sessions'])} sessions, {len(data['runs'])} runs, {len(data['steps'])} steps, "
        f"{sum(map(len, data['events'].values()))} events, {records} records in {len(data['journals'])} journals "
        f"and {len(data['files'])} files to {tmp_path / 'dst.db'}")


def test_files_of_an_export_stay_inside_their_folder(tmp_path):
    """An export is data from elsewhere: a path outside the workspaces, or a write through a link it
    carries, is refused before anything is written."""
    data = base64.b64encode(b"x").decode()
    for bad in ("../escape.txt", "/etc/agio-escape", "workspaces/../../escape", "elsewhere/file"):
        with pytest.raises(StoreError, match="refused a file outside"):
            write_files(tmp_path / "root", [{"path": "workspaces/ok", "mode": 0o644, "link": None, "data": data},
                                            {"path": bad, "mode": 0o644, "link": None, "data": data}])
        assert not (tmp_path / "root" / "workspaces" / "ok").exists()
    outside = tmp_path / "outside"
    outside.mkdir()
    write_files(tmp_path / "root", [{"path": "workspaces/s/link", "mode": None, "link": str(outside), "data": None}])
    with pytest.raises(StoreError, match="is a symlink"):
        write_files(tmp_path / "root", [{"path": "workspaces/s/link/pwned", "mode": 0o644, "link": None, "data": data}])
    assert list(outside.iterdir()) == []
    write_files(tmp_path / "root", [{"path": "workspaces/s/run.sh", "mode": 0o4755, "link": None, "data": data}])
    assert (tmp_path / "root" / "workspaces" / "s" / "run.sh").stat().st_mode & 0o7777 == 0o755  # no setuid


def test_migrate_refuses_a_store_that_is_not_empty(tmp_path):
    a, b = new_repository(str(tmp_path / "a")), new_repository(str(tmp_path / "b"))
    StepRunner(Agent(model=ScriptedModel(["x"])), repository=a).run_sync(None, "q")
    StepRunner(Agent(model=ScriptedModel(["y"])), repository=b).run_sync(None, "q")
    with pytest.raises(StoreError, match="is not empty"):
        migrate(a, b)
    a.close()
    b.close()
