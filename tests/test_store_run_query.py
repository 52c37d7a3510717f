"""Pages of runs, newest first, filtered by the store (``Repository.query_runs``), the same on TinyDB files,
SQLite, PostgreSQL and in memory: every filter, keyset paging that neither repeats nor skips when runs
arrive meanwhile, runs written by another process, runs whose process died, stores made before the
query's columns existed, and one clear line for bad input."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agio_notebook.core import AgentRun, InvalidOperationError, RunStatus, StoreError
from agio_notebook.storage import InMemoryRepository, RunFilter, new_repository
from store_backends import BACKENDS, store_url as make_store_url, wait_for

ENGINE = [sys.executable, str(Path(__file__).with_name("engine_writer.py"))]


@pytest.fixture(params=[*BACKENDS, "memory"])
def repo(request, tmp_path):
    """An empty repository of each backend, in memory too."""
    if request.param == "memory":
        yield InMemoryRepository()
        return
    server = request.getfixturevalue("postgres_server") if request.param == "postgres" else None
    repository = new_repository(make_store_url(request.param, tmp_path, server))
    yield repository
    repository.close()


def _run(i: int, **kw) -> AgentRun:
    fields = dict(session_id=f"s{i % 3}", query=f"Question {i} about the Weather", agent_name=f"agent{i % 2}",
                  status=RunStatus.COMPLETED, started_at=1000.0 + i, notebook=f"nb{i % 4}.ipynb", user="me",
                  final_text=f"answer {i}")
    fields.update(kw)
    return AgentRun(**fields)


def _queries(page) -> list[str]:
    return [r.query for r in page.runs]


def _all_pages(repo, where=RunFilter(), limit=3) -> list[str]:
    seen, cursor = [], None
    while True:
        page = repo.query_runs(where, limit=limit, cursor=cursor)
        seen += _queries(page)
        if page.next_cursor is None:
            return seen
        cursor = page.next_cursor


def test_pages_are_newest_first_and_every_filter_is_applied_by_the_store(repo):
    runs = [_run(i) for i in range(12)]
    for run in runs:
        repo.commit(run=run)
    repo.commit(run=_run(12, status=RunStatus.FAILED, query="Tools: 100%_done? C:\\temp", final_text=None))
    everything = _all_pages(repo)
    assert everything[0] == "Tools: 100%_done? C:\\temp" and len(everything) == 13
    assert everything[1:] == [f"Question {i} about the Weather" for i in range(11, -1, -1)]
    first = repo.query_runs(limit=5)
    assert len(first.runs) == 5 and first.next_cursor is not None
    assert repo.query_runs(limit=13).next_cursor is None  # exactly everything: no next page

    def ids(**where) -> list[int]:
        return sorted(int(q.split()[1]) for q in _all_pages(repo, RunFilter(**where)) if q.startswith("Question"))

    assert ids(agent="agent1") == [1, 3, 5, 7, 9, 11]
    assert ids(notebook="nb2.ipynb") == [2, 6, 10]
    assert ids(session_id="s0") == [0, 3, 6, 9]
    assert ids(agent="agent0", notebook="nb0.ipynb") == [0, 4, 8]
    assert ids(status="completed") == list(range(12)) and ids(status="failed") == []
    assert _all_pages(repo, RunFilter(status="failed")) == ["Tools: 100%_done? C:\\temp"]
    assert ids(user="me") == list(range(12)) or repo.__class__.__name__ == "PostgresRepository"
    assert ids(agent="nobody") == [] and ids(notebook="nb2") == []  # exact, not a prefix
    # text: a case-insensitive substring of the query or of the answer; % _ and \ are plain characters
    assert ids(text="WEATHER") == list(range(12))
    assert ids(text="answer 1") == [1, 10, 11] and ids(text="question 1 ABOUT") == [1]
    assert _all_pages(repo, RunFilter(text="100%_d")) == ["Tools: 100%_done? C:\\temp"]
    assert _all_pages(repo, RunFilter(text="100%%")) == [] and _all_pages(repo, RunFilter(text="1_0")) == []
    assert _all_pages(repo, RunFilter(text="c:\\TEMP")) == ["Tools: 100%_done? C:\\temp"]
    assert ids(text="  ") == list(range(12))  # an empty box filters nothing
    facets = repo.run_facets()
    assert facets["agent"] == ["agent0", "agent1"] and facets["status"] == ["completed", "failed"]
    assert facets["notebook"] == ["nb0.ipynb", "nb1.ipynb", "nb2.ipynb", "nb3.ipynb"]
    assert len(facets["user"]) == 1
    assert repo.run_facets(limit=2)["notebook"] == ["nb0.ipynb", "nb1.ipynb"]


def test_a_page_never_repeats_or_skips_a_run_when_runs_arrive_or_change_meanwhile(repo):
    for i in range(10):
        repo.commit(run=_run(i))
    first = repo.query_runs(limit=4)
    assert _queries(first) == [f"Question {i} about the Weather" for i in (9, 8, 7, 6)]
    repo.commit(run=_run(20))  # newer: it belongs before the first page, not on the second
    repo.commit(run=_run(5, status=RunStatus.FAILED))  # a second run started with run 5: ordered by id
    second = repo.query_runs(limit=4, cursor=first.next_cursor)
    numbers = [int(q.split()[1]) for q in _queries(second)]
    assert numbers == [5, 5, 4, 3]  # nothing of the first page again, nothing newer
    # runs sharing one start time are ordered by id, and paging walks through all of them exactly once
    for n in range(7):
        repo.commit(run=_run(99, started_at=5000.0, query=f"tie {n}"))
    ties = [q for q in _all_pages(repo, limit=2) if q.startswith("tie")]
    assert sorted(ties) == [f"tie {n}" for n in range(7)]


def test_an_updated_run_is_found_by_its_new_status_and_answer(repo):
    run = _run(1, status=RunStatus.RUNNING, final_text=None)
    repo.commit(run=run)
    assert _all_pages(repo, RunFilter(text="the final word")) == []
    run.status, run.final_text = RunStatus.COMPLETED, "The final word"
    repo.commit(run=run)
    assert [r.id for r in repo.query_runs(RunFilter(text="the final word")).runs] == [run.id]
    assert repo.query_runs(RunFilter(status="completed")).runs[0].final_text == "The final word"


def test_bad_input_is_one_clear_line_and_changes_nothing(repo):
    repo.commit(run=_run(1))
    with pytest.raises(InvalidOperationError, match="no run status 'done': one of running, completed"):
        RunFilter(status="done")
    with pytest.raises(InvalidOperationError, match="agent filter of runs is text, got int"):
        RunFilter(agent=3)
    for limit in (0, -1, 501, 2.5, True, "10"):
        with pytest.raises(InvalidOperationError, match="a page of runs holds 1 to 500 runs"):
            repo.query_runs(limit=limit)
    for cursor in ("not a cursor", "", "WzFd", 12):
        with pytest.raises(InvalidOperationError, match="is not a cursor of a page of runs"):
            repo.query_runs(cursor=cursor)
    assert len(repo.query_runs().runs) == 1


def test_runs_another_process_writes_are_found_by_an_open_repository(store_url):
    repo = new_repository(store_url)
    assert repo.query_runs().runs == []
    subprocess.run([*ENGINE, store_url, "other", "plain", "2"], check=True, capture_output=True, timeout=120)
    page = repo.query_runs(RunFilter(status="completed"))
    assert sorted(r.query for r in page.runs) == ["query 0", "query 1"]
    assert {r.session_id for r in page.runs} == {"other"}
    assert repo.query_runs(RunFilter(text="QUERY 1")).runs[0].metrics.steps > 0
    repo.close()


def test_a_run_whose_process_died_shows_interrupted_in_its_page(store_url):
    repo = new_repository(store_url)
    repo.query_runs()  # the index exists before the other process writes
    died = subprocess.run([*ENGINE, store_url, "s", "die:tool", "1"], capture_output=True, text=True, timeout=120)
    assert died.returncode == -signal.SIGKILL
    # PostgreSQL ends the dead client's session (and its claim) a moment after the process: the page looks
    # again within a few seconds (storage.run_query.Recheck)
    wait_for(lambda: repo.query_runs().runs[0].status is RunStatus.INTERRUPTED, timeout=30)
    (run,) = repo.query_runs().runs
    assert run.query == "query 0" and repo.query_runs(RunFilter(status="running")).runs == []
    repo.close()


def test_a_run_still_going_shows_the_steps_it_committed_so_far(store_url, tmp_path):
    hold = tmp_path / "go-on"
    writer = subprocess.Popen([*ENGINE, store_url, "s", f"hold:{hold}", "1"], stdout=subprocess.PIPE, text=True)
    try:
        while not writer.stdout.readline().startswith("call "):  # the assistant's tool call is committed
            pass
        repo = new_repository(store_url)
        (run,) = repo.query_runs().runs
        assert run.status is RunStatus.RUNNING and run.metrics.steps == 2  # the question and the tool call
        assert run.metrics.total_tokens is None or run.metrics.total_tokens >= 0
        hold.touch()
        assert writer.wait(120) == 0
        (run,) = repo.query_runs().runs
        assert run.status is RunStatus.COMPLETED and run.metrics.steps == 4
        repo.close()
    finally:
        hold.touch()
        writer.wait(120)


def test_tinydb_index_follows_a_compaction_by_another_process(tmp_path):
    store = str(tmp_path / "store")
    repo = new_repository(store)
    for i in range(5):
        repo.commit(run=_run(i))
    assert len(repo.query_runs().runs) == 5
    other = new_repository(store)
    other.commit(run=_run(7, agent_name="late"))
    other.compact()  # the index file is rewritten: this process reloads it and its query index
    other.close()
    assert [r.agent_name for r in repo.query_runs(limit=2).runs] == ["late", "agent0"]
    assert [r.agent_name for r in repo.query_runs(RunFilter(agent="late")).runs] == ["late"]
    repo.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_store_made_before_the_query_columns_existed_is_upgraded_on_open(backend, tmp_path, request):
    from agio_notebook.storage import sql

    server = request.getfixturevalue("postgres_server") if backend == "postgres" else None
    url = make_store_url(backend, tmp_path, server)
    if backend == "sqlite":
        import sqlite3

        conn = sqlite3.connect(url[len("sqlite:///"):])
    else:
        import psycopg

        conn = psycopg.connect(url)
    mark = "?" if backend == "sqlite" else "%s"
    for statement in (*sql._TABLES, *sql.JOURNAL_TABLES):
        conn.execute(statement)
    conn.execute(f"INSERT INTO agio_meta (key, value) VALUES ({mark}, {mark})", ("schema_version", "1"))
    old = _run(3, agent_name="veteran", notebook="old.ipynb")
    conn.execute(f"INSERT INTO agio_runs (id, session_id, started_at, status, doc) VALUES ({mark}, {mark}, {mark}, "
                 f"{mark}, {mark})", (old.id, old.session_id, old.started_at, "completed", sql._dumps(old.to_dict())))
    conn.commit()
    conn.close()
    repo = new_repository(url)
    repo.commit(run=_run(4))
    assert [r.id for r in repo.query_runs(RunFilter(agent="veteran")).runs] == [old.id]
    assert [r.id for r in repo.query_runs(RunFilter(text="question 3", notebook="old.ipynb")).runs] == [old.id]
    assert "veteran" in repo.run_facets()["agent"]
    repo.close()
    new_repository(url).close()  # opened again: nothing left to upgrade


def test_on_postgresql_a_runs_user_is_the_role_that_wrote_it(postgres_server):
    import psycopg

    url = postgres_server.new_database()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS runq_bob")
        conn.execute("CREATE ROLE runq_bob LOGIN PASSWORD 'bob-pw'")
    repo = new_repository(url)  # makes the tables as their owner, agio
    repo.commit(run=_run(1, user="claimed-by-process"))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO runq_bob")
    bob = new_repository(url.replace("agio:agio-secret", "runq_bob:bob-pw"))  # current tables: no DDL needed
    bob.commit(run=_run(2, user="mallory"))  # what a process says of itself does not count here
    assert {r.query: r.user for r in repo.query_runs().runs} == {
        "Question 1 about the Weather": "agio", "Question 2 about the Weather": "runq_bob"}
    assert [r.query for r in repo.query_runs(RunFilter(user="runq_bob")).runs] == ["Question 2 about the Weather"]
    assert repo.query_runs(RunFilter(user="mallory")).runs == []
    assert repo.run_facets()["user"] == ["agio", "runq_bob"]
    bob.close()
    repo.close()


def test_a_role_that_may_not_change_the_tables_gets_one_line_on_a_store_needing_an_upgrade(postgres_server):
    import psycopg

    url = postgres_server.new_database()
    repo = new_repository(url)
    repo.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS runq_carol")
        conn.execute("CREATE ROLE runq_carol LOGIN PASSWORD 'carol-pw'")
        conn.execute("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO runq_carol")
        conn.execute("UPDATE agio_meta SET value = '1' WHERE key = 'revision'")  # as an older version left it
    with pytest.raises(StoreError) as caught:
        new_repository(url.replace("agio:agio-secret", "runq_carol:carol-pw"))
    line = str(caught.value)
    assert "\n" not in line and "carol-pw" not in line
    assert "permission denied" in line and "open the store once with its owner's URL" in line
    new_repository(url).close()  # its owner upgrades it
    new_repository(url.replace("agio:agio-secret", "runq_carol:carol-pw")).close()
