"""The Repository protocol behaves the same on TinyDB files, SQLite and a real PostgreSQL server: writes,
reads, attempts, events, the engine's runs, retry, fork and resume, frames, crashes, two processes,
migration between any two backends, and one clear line for bad stores."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from agio_notebook import Agent, StepRunner, fork_session, frames
from agio_notebook.core import (AgentRun, AgentSession, RunStatus, SessionBusyError, Step, StepEvent, StepEventType,
                                StepRole, StoreError)
from agio_notebook.storage import new_repository, open_repository
from agio_notebook.storage.migrate import migrate
from engine_support import ChunkModel, add, calls, text
from lab_support import free_port
from store_backends import BACKENDS, store_url as make_store_url, wait_for

WRITER = [sys.executable, str(Path(__file__).with_name("store_url_writer.py"))]


def _step(session: str, seq: int, **kw) -> Step:
    return Step(session_id=session, run_id="r1", sequence=seq, role=StepRole.USER, content=f"step {seq}", **kw)


def test_round_trip_upsert_attempts_and_reopen(store_url):
    repo = new_repository(store_url)
    session = AgentSession(session_id="s1", title="first", metadata={"k": [1, 2]})
    run = AgentRun(session_id="s1", query="hello")
    steps = [_step("s1", i) for i in range(1, 6)]
    events = [StepEvent(StepEventType.STEP_COMPLETED, run.id, "s1", seq=i, payload={"n": i}) for i in range(1, 251)]
    repo.commit(session=session, run=run, steps=steps, events=events)
    steps[4].content = "replaced"
    old = steps[3]
    old.superseded = True
    retry = _step("s1", 4, attempt=2)
    run.status = RunStatus.COMPLETED
    repo.commit(run=run, steps=[steps[4], old, retry])
    repo.commit(steps=[_step("s2", 1)])  # a session created implicitly
    repo.close()

    repo = new_repository(store_url)  # everything is read back from the store itself
    assert repo.get_session("s1").to_dict() == session.to_dict()
    assert repo.get_session("s2") is not None and repo.get_session("nope") is None
    assert [s.session_id for s in repo.list_sessions()] == ["s1", "s2"]
    visible = repo.get_steps("s1")
    assert [(s.sequence, s.attempt) for s in visible] == [(1, 1), (2, 1), (3, 1), (4, 2), (5, 1)]
    assert visible[-1].content == "replaced"
    everything = repo.get_steps("s1", include_superseded=True)
    assert [(s.sequence, s.attempt) for s in everything] == [(1, 1), (2, 1), (3, 1), (4, 1), (4, 2), (5, 1)]
    assert [s.sequence for s in repo.get_steps("s1", 2, 4)] == [2, 3, 4]
    assert repo.get_last_step("s1").content == "replaced"
    assert repo.get_run(run.id).status is RunStatus.COMPLETED
    assert [r.id for r in repo.list_runs("s1")] == [run.id] and repo.list_runs("s2") == []
    page, cursor, seen = [], 0, []
    while page := repo.get_events(run.id, cursor, 100):
        seen += [e.seq for e in page]
        cursor = page[-1].seq
    assert seen == list(range(1, 251))
    assert repo.get_events(run.id, 0, 1)[0].payload == {"n": 1}
    assert len(list(repo.iter_step_dicts())) == 7 and len(list(repo.iter_step_dicts("s2"))) == 1
    assert repo.delete_steps("s1", 4) == 3
    assert [s.sequence for s in repo.get_steps("s1", include_superseded=True)] == [1, 2, 3]
    repo.close()


def _go(coro):
    return asyncio.run(coro)


def _conversation(repo):
    """A run with a tool, a retry of its answer, a fork, a cancelled run resumed: the engine end to end."""
    agent = Agent(model=ChunkModel([calls(("add", {"a": 2, "b": 3})), text("it is 5")]), tools=[add])
    first = _go(StepRunner(agent, repository=repo).run("conv", "what is 2+3?"))
    again = Agent(model=ChunkModel([text("five")]), tools=[add])
    retry = _go(StepRunner(again, repository=repo).retry(first.run_id, from_seq=4))
    fork = fork_session("conv", 3, repo)
    cont = Agent(model=ChunkModel([text("forked answer")]), tools=[add])
    forked = _go(StepRunner(cont, repository=repo).resume(fork))
    return first, retry, fork, forked


def test_the_engine_behaves_the_same_on_every_backend(tmp_path, request):
    outcomes = {}
    for backend in BACKENDS:
        server = request.getfixturevalue("postgres_server") if backend == "postgres" else None
        repo = new_repository(make_store_url(backend, tmp_path / backend, server))
        first, retry, fork, forked = _conversation(repo)
        assert retry.status is RunStatus.COMPLETED and forked.final_text == "forked answer"
        assert repo.get_run(first.run_id).superseded_by == retry.run_id
        steps = frames.steps(repository=repo)
        runs = frames.runs(repository=repo)
        outcomes[backend] = (
            sorted((r.session_id == "conv", r.sequence, r.attempt, r.role, r.content, bool(r.superseded))
                   for r in steps.itertuples()),
            sorted((r.kind, r.status, r.final_text) for r in runs.itertuples()),
            [(s.sequence, s.content) for s in repo.get_steps(fork)],
            list(steps.dtypes.astype(str)),
        )
        repo.close()
    assert outcomes["sqlite"] == outcomes["tinydb"] == outcomes["postgres"]


def test_a_killed_writer_never_loses_a_reported_step(store_url):
    reported: set[str] = set()
    for round_ in range(4):
        proc = subprocess.Popen([*WRITER, store_url, "victim", "100000", f"r{round_}"], stdout=subprocess.PIPE,
                                text=True)
        for _ in range(20 + 10 * round_):  # wait until it has reported some steps, then kill it mid-write
            line = proc.stdout.readline()
            assert line, "writer produced nothing"
            reported.add(line.strip())
        os.kill(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        reported.update(line for line in out.splitlines() if len(line) == 32)
        repo = new_repository(store_url)  # the store always opens
        stored = {s.id for s in repo.get_steps("victim", include_superseded=True)}
        assert not reported - stored, f"round {round_}: reported steps lost"
        frames.steps(repository=repo)  # and frames always build
        repo.close()


def test_two_processes_share_a_store_and_lose_nothing(store_url):
    new_repository(store_url).close()
    n = 60
    procs = [subprocess.Popen([*WRITER, store_url, session, str(n), tag], stdout=subprocess.PIPE, text=True)
             for session, tag in [("own-a", "a"), ("own-b", "b")]]
    outs = [p.communicate(timeout=180)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    repo = new_repository(store_url)
    for session, out in zip(("own-a", "own-b"), outs):
        stored = repo.get_steps(session)
        assert {s.id for s in stored} == set(out.split()) and [s.sequence for s in stored] == list(range(1, n + 1))
    repo.close()


@pytest.mark.parametrize("source", BACKENDS)
@pytest.mark.parametrize("target", BACKENDS)
def test_migrate_between_any_two_backends_loses_nothing(source, target, tmp_path, request):
    def url(backend, where):
        server = request.getfixturevalue("postgres_server") if backend == "postgres" else None
        return make_store_url(backend, tmp_path / where, server)

    src = new_repository(url(source, "src"))
    _conversation(src)
    dst = new_repository(url(target, "dst"))
    report = migrate(src, dst)
    assert report.sessions == 2 and report.runs == 3
    for frame in (frames.steps, frames.runs, frames.tool_calls, frames.sessions, frames.run_metrics):
        a = frame(repository=src).sort_values(frame(repository=src).columns[0]).reset_index(drop=True)
        b = frame(repository=dst).sort_values(frame(repository=dst).columns[0]).reset_index(drop=True)
        pd.testing.assert_frame_equal(a, b, check_like=True)
    for run in src.list_runs():
        assert [e.to_dict() for e in src.get_events(run.id, 0, 10_000)] == \
               [e.to_dict() for e in dst.get_events(run.id, 0, 10_000)]
    with pytest.raises(StoreError, match="not empty.*merge"):
        migrate(src, dst)
    assert migrate(src, dst, merge=True).steps == report.steps
    assert len(list(dst.iter_step_dicts())) == len(list(src.iter_step_dicts()))


def test_text_with_nul_characters_is_stored_on_every_backend_and_migrates(store_url, tmp_path):
    """A query, a tool's output and a reply may hold NUL characters (PostgreSQL's text cannot): every backend
    stores them and gives them back as they were, and a store holding them migrates to every other."""
    from agio_notebook import Reply, ScriptedModel, tool

    @tool
    def blob() -> str:
        """Some binary data."""
        return "binary\x00data"

    repo = new_repository(store_url)
    agent = Agent(model=ScriptedModel([Reply.call("blob"), "it says \x00"]), tools=[blob])
    result = StepRunner(agent, repository=repo).run_sync(None, "read\x00this")
    assert result.status is RunStatus.COMPLETED, result.error
    expected = ["read\x00this", None, "binary\x00data", "it says \x00"]
    assert [s.content for s in repo.get_steps(result.session_id)] == expected
    assert repo.get_run(result.run_id).query == "read\x00this"
    shown = frames.steps(result.session_id, repository=repo)["content"].fillna("-")  # a SQL column: U+FFFD
    assert [c.replace("\x00", "\ufffd") for c in shown] == ["read\ufffdthis", "-", "binary\ufffddata", "it says \ufffd"]
    dst = new_repository(str(tmp_path / "copy"))
    migrate(repo, dst)
    assert [s.content for s in dst.get_steps(result.session_id)] == expected
    dst.close()
    repo.close()


def test_a_merge_into_a_store_holding_the_journals_reports_no_damage(tmp_path):
    import warnings

    from agio_notebook.storage import StoreDamageWarning

    src = new_repository(str(tmp_path / "src"))
    journal = src.journal("progress/c", {"progress": lambda d: d["who"]})
    journal.append([("progress", {"who": f"s{i}", "done": i}) for i in range(30)])
    journal.close()
    dst = new_repository(str(tmp_path / "dst"))
    migrate(src, dst)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        migrate(src, dst, merge=True)
    assert [w for w in caught if issubclass(w.category, StoreDamageWarning)] == []
    dst.close()
    reopened = new_repository(str(tmp_path / "dst")).journal("progress/c", {"progress": lambda d: d["who"]})
    assert reopened.tables["progress"] == {f"s{i}": {"who": f"s{i}", "done": i} for i in range(30)}
    reopened.close()
    src.close()


def test_bad_store_urls_get_one_clear_line(tmp_path, postgres_server):
    with pytest.raises(StoreError, match="unknown store URL scheme 'mongodb'"):
        open_repository("mongodb://127.0.0.1/agio")
    with pytest.raises(StoreError, match="sqlite:///relative.db"):
        open_repository("sqlite://")
    refused = f"postgresql://agio:hunter2@127.0.0.1:{free_port()}/agio"
    with pytest.raises(StoreError, match="cannot connect to the PostgreSQL store") as info:
        new_repository(refused)
    assert "hunter2" not in str(info.value) and "***" in str(info.value)
    assert "\n" not in str(info.value)
    # libpq quotes a token it cannot parse, and a password can also sit in the query string
    for url, secret in ((f"postgresql://agio:s3cr%et@127.0.0.1:{free_port()}/agio", "s3cr%et"),
                        (f"postgresql://agio@127.0.0.1:{free_port()}/agio?password=hunter2&port=x", "hunter2")):
        with pytest.raises(StoreError) as info:
            new_repository(url)
        assert secret not in str(info.value) and "cannot connect to the PostgreSQL store" in str(info.value)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_schema_from_a_newer_version_is_refused(backend, tmp_path, request):
    server = request.getfixturevalue("postgres_server") if backend == "postgres" else None
    url = make_store_url(backend, tmp_path, server)
    repo = new_repository(url)
    cur = repo._conn.cursor()
    cur.execute(repo._sql("UPDATE agio_meta SET value = ? WHERE key = 'schema_version'"), ("99",))
    repo._conn.commit()
    repo.close()
    with pytest.raises(StoreError, match="schema version '?99'?.*upgrade agio-notebook"):
        new_repository(url)


ENGINE = [sys.executable, str(Path(__file__).with_name("engine_writer.py"))]


def test_two_processes_running_the_engine_in_one_session(store_url, tmp_path):
    """The second gets one clear line naming the holder, or waits when asked; sequences stay unique."""
    release = tmp_path / "release"  # the first's tools wait for it: a run in progress, however busy the machine
    first = subprocess.Popen([*ENGINE, store_url, "shared", f"hold:{release}", "12", "120"], stdout=subprocess.PIPE,
                             text=True)
    try:
        assert first.stdout.readline().startswith("run "), "the first process did not start a run"
        refused = subprocess.run([*ENGINE, store_url, "shared", "slow", "1", "0"], capture_output=True, text=True,
                                 timeout=120)
        assert refused.returncode == 3, refused.stdout + refused.stderr
        line = refused.stdout.strip()
        assert line.startswith("busy session shared is in use by a run in process "), line
        assert f"process {first.pid} on " in line and "\n" not in line
        release.touch()
        waiter = subprocess.run([*ENGINE, store_url, "shared", "slow", "2", "120"], capture_output=True, text=True,
                                timeout=240)
        assert waiter.returncode == 0, waiter.stdout + waiter.stderr
    finally:
        out, _ = first.communicate(timeout=120)
    assert first.returncode == 0
    repo = new_repository(store_url)
    steps = repo.get_steps("shared")
    assert [s.sequence for s in steps] == list(range(1, len(steps) + 1))  # no duplicate, no gap
    assert len(steps) == 14 * 4  # fourteen runs of user, call, tool, final
    assert {r.status for r in repo.list_runs("shared")} == {RunStatus.COMPLETED}
    repo.close()


def test_a_released_claim_lingers_for_this_process_and_holds_others_off(store_url, monkeypatch):
    """On every backend, a run's release lingers a moment: this process sees the session free and takes
    it back at once (the next run of a loop), while another holder keeps being refused, so it never
    slips in between two runs. Once the release is done, or the store closed, the other gets it.

    The linger is stretched to 3 s here, so a busy machine's pauses between two lines cannot outlast it."""
    monkeypatch.setattr("agio_notebook.storage.claims.LINGER", 3.0)
    here, other = new_repository(store_url), new_repository(store_url)  # two holders, as two processes
    here.claim_session("s")
    here.release_session("s")  # a run's release: lingering
    assert here.session_holder("s") is None  # free here at once
    assert other.session_holder("s") is not None  # still held for everyone else
    here.claim_session("s")  # the next run here takes it back, never unlocked in between
    with pytest.raises(SessionBusyError, match=f"in use by a run in process {os.getpid()} on "):
        other.claim_session("s")  # it retried past the linger, and was still refused
    here.release_session("s")
    wait_for(lambda: other.session_holder("s") is None)  # the lingering release finished
    other.claim_session("s")
    other.release_session("s")
    other.close()  # finishes its lingering release before it goes
    assert here.session_holder("s") is None
    here.claim_session("s")
    here.release_session("s", linger=False)
    here.close()


def test_postgres_claims_are_kept_without_wal_and_an_older_store_gets_there_when_its_owner_opens_it(postgres_server):
    """A claim lives only as long as its holder's connection: its row is written without WAL, so taking and
    dropping a session waits for no disk flush. A store made before keeps a logged table until its owner
    opens it with a version that upgrades it."""
    import psycopg

    url = postgres_server.new_database()

    def persistence() -> str:
        with psycopg.connect(url, autocommit=True) as conn:
            return conn.execute("SELECT relpersistence FROM pg_class WHERE relname = 'agio_claims'").fetchone()[0]

    new_repository(url).close()
    assert persistence() == "u"
    with psycopg.connect(url, autocommit=True) as conn:  # as an older version left it
        conn.execute("ALTER TABLE agio_claims SET LOGGED")
        conn.execute("UPDATE agio_meta SET value = '1' WHERE key = 'revision'")
    assert persistence() == "p"
    repo = new_repository(url)
    assert persistence() == "u"
    repo.claim_session("s")
    assert repo.session_holder("s") is not None
    repo.release_session("s", linger=False)
    assert repo.session_holder("s") is None
    repo.close()


def test_a_run_killed_mid_way_is_interrupted_then_resumed(store_url):
    died = subprocess.run([*ENGINE, store_url, "s", "die:tool", "1"], capture_output=True, text=True, timeout=120)
    assert died.returncode == -signal.SIGKILL
    repo = new_repository(store_url)  # found on open, without asking
    (run,) = repo.list_runs("s")
    assert run.status is RunStatus.INTERRUPTED and "interrupted" in run.error
    from engine_support import ChunkModel as _Chunks

    resumed = _go(StepRunner(Agent(model=_Chunks([text("answer after the crash")]), tools=[add]),
                             repository=repo).resume("s"))
    assert resumed.status is RunStatus.COMPLETED and resumed.final_text == "answer after the crash"
    assert frames.runs(repository=repo).status.tolist().count("interrupted") == 1
    repo.close()


def test_agio_store_migrate_from_the_command_line(tmp_path, postgres_server):
    src, dst = str(tmp_path / "tiny"), postgres_server.new_database()
    repo = new_repository(src)
    first, *_ = _conversation(repo)
    repo.close()
    agio = [sys.executable, "-m", "agio_notebook"]
    done = subprocess.run([*agio, "store", "migrate", src, dst], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "copied 2 sessions, 3 runs" in done.stdout and "agio-secret" not in done.stdout + done.stderr
    again = subprocess.run([*agio, "store", "migrate", src, dst], capture_output=True, text=True, timeout=120)
    assert again.returncode == 1 and again.stderr.count("\n") == 1 and "not empty" in again.stderr
    assert new_repository(dst).get_run(first.run_id).final_text == first.final_text
    merged = subprocess.run([*agio, "store", "migrate", "--merge", src, dst], capture_output=True, text=True,
                            timeout=120)  # the option before the operands, as after them
    assert merged.returncode == 0, merged.stderr
    for missing, says in ((str(tmp_path / "typo"), f"no store at {tmp_path / 'typo'}"),
                          (f"sqlite:///{tmp_path / 'typo.db'}", f"no SQLite store at sqlite:///{tmp_path / 'typo.db'}")):
        refused = subprocess.run([*agio, "store", "migrate", missing, dst, "--merge"], capture_output=True,
                                 text=True, timeout=120)
        assert refused.returncode == 1 and refused.stderr == f"agio: {says} to migrate from\n"
        assert not (tmp_path / "typo").exists() and not (tmp_path / "typo.db").exists()
    extra = subprocess.run([*agio, "store", "migrate", src, dst, "third"], capture_output=True, text=True, timeout=120)
    assert extra.returncode == 2 and "unrecognized arguments: third" in extra.stderr
    stats = subprocess.run([*agio, "--store", dst, "store", "stats"], capture_output=True, text=True, timeout=120)
    assert "sessions 2" in stats.stdout and "runs     3" in stats.stdout


def test_maintenance_says_the_same_on_every_backend(store_url, tmp_path):
    """stats, prune, delete, verify, compact and export through `agio store`, on each backend."""
    from test_store_maintenance import OLD, add_runs, retried_session

    repo = new_repository(store_url)
    for n in range(6):
        add_runs(repo, f"s{n}", 5, when=OLD if n < 2 else None)
    retried_session(repo, "retried")
    repo.close()

    def agio(*args):
        done = subprocess.run([sys.executable, "-m", "agio_notebook", "--store", store_url, *args],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert agio("store", "stats").splitlines()[:3] == ["sessions 7", "runs     32 (completed 32)", "steps    127"]
    assert "0 problem(s) found" in agio("store", "verify")
    assert agio("store", "prune", "--superseded").strip().startswith("removed 0 sessions, 1 runs, 3 steps")
    assert agio("store", "prune", "--older-than", "2021-01-01").strip().startswith("removed 2 sessions, 10 runs, 40 steps")
    run_id = new_repository(store_url).list_runs("s3")[0].id
    assert agio("store", "delete", "--run", run_id).strip().startswith("removed 0 sessions, 1 runs, 4 steps")
    assert agio("store", "delete", "--session", "s4").strip().startswith("removed 1 sessions, 5 runs, 20 steps")
    agio("store", "compact")
    assert "exported" in agio("store", "export", str(tmp_path / "out"))
    fresh = new_repository(store_url)
    assert sorted(s.session_id for s in fresh.list_sessions()) == ["retried", "s2", "s3", "s5"]
    assert len(fresh.get_steps("s3")) == 16 and fresh.get_run(run_id) is None
    import pyarrow.parquet as pq

    assert pq.read_table(tmp_path / "out" / "steps.parquet").num_rows == len(list(fresh.iter_step_dicts()))
