"""The Runs panel's server side without a browser: loading it imports no engine; every store fault is one
line (a damaged TinyDB store, a file that is not a SQLite database, a SQLite store another process holds
locked, a bad filter, an unknown run) while damage met on the way is reported beside what could be read; and
the push channel on PostgreSQL says the database went away, then that it is back, when it restarts."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import time

import pytest

from agio_notebook.core import AgentRun, RunStatus
from agio_notebook.storage import new_repository
from agio_notebook_server.runs import views
from agio_notebook_server.runs.changes import ChangeFeed
from agio_notebook_server.runs.store import LOCK_TIMEOUT, PanelError, PanelStore
from store_backends import running_postgres


def ask(store: PanelStore, view, *args, **params):
    return asyncio.run(store.call(lambda: view(store, *args, **params)))


def test_loading_the_extension_imports_no_engine():
    code = ("import sys, agio_notebook_server, agio_notebook_server.runs; "
            "print(sorted(m for m in sys.modules if m == 'agio_notebook' or m.startswith('agio_notebook.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr


def test_no_store_yet_is_a_state_not_an_error_and_nothing_is_made(tmp_path):
    store = PanelStore(tmp_path)
    info, damage = ask(store, views.status)
    assert info["state"] == "none" and info["message"].startswith("no agio store yet at .agio: run a %%agio cell")
    with pytest.raises(PanelError, match="no agio store yet") as caught:
        ask(store, views.runs_page)
    assert caught.value.status == 404 and not (tmp_path / ".agio").exists()


def _filled(target: str) -> str:
    repo = new_repository(target)
    run = AgentRun(session_id="s1", query="hello", agent_name="a", status=RunStatus.COMPLETED)
    repo.commit(run=run)
    repo.close()
    return run.id


def test_the_store_is_opened_as_the_server_starts_and_damage_met_then_is_told_with_the_first_answer(tmp_path):
    run_id = _filled(str(tmp_path / ".agio"))
    with open(tmp_path / ".agio" / "index.jsonl", "ab") as f:
        f.write(b"this is not a record\n")
    store = PanelStore(tmp_path)
    store.warm()
    store._worker.submit(lambda: None).result(timeout=60)  # the warming done (one worker, in order)
    assert store._repository is not None
    page, damage = ask(store, views.runs_page)
    assert [r["id"] for r in page["runs"]] == [run_id]
    assert len(damage) == 1 and "unreadable record" in damage[0] and "index.jsonl" in damage[0]
    assert ask(store, views.runs_page)[1] == []  # told once, as a read that meets it tells it
    store.shutdown()
    PanelStore(tmp_path / "nothing here").warm()  # no store: nothing is made, nothing is said


def test_bad_input_is_one_line_with_a_status(tmp_path):
    run_id = _filled(str(tmp_path / ".agio"))
    store = PanelStore(tmp_path)
    page, damage = ask(store, views.runs_page, agent="a")
    assert [r["id"] for r in page["runs"]] == [run_id] and damage == []
    for params, status, line in (({"status": "done"}, 400, "no run status 'done'"),
                                 ({"limit": "9999"}, 400, "a page of runs holds 1 to 500 runs"),
                                 ({"limit": "ten"}, 400, "limit is a number of runs"),
                                 ({"cursor": "garbage"}, 400, "is not a cursor of a page of runs")):
        with pytest.raises(PanelError, match=line) as caught:
            ask(store, views.runs_page, **params)
        assert caught.value.status == status and "\n" not in str(caught.value)
    with pytest.raises(PanelError, match="no run 'nope123'") as caught:
        ask(store, views.transcript, "nope123")
    assert caught.value.status == 404
    transcript, _ = ask(store, views.transcript, run_id[:8])  # a prefix, as shown
    assert transcript["run"]["id"] == run_id and transcript["data"]["run"]["query"] == "hello"


def test_a_damaged_tinydb_store_is_one_line_or_its_readable_runs_with_the_damage(tmp_path):
    run_id = _filled(str(tmp_path / ".agio"))
    session_file = next((tmp_path / ".agio" / "sessions").glob("*.jsonl"))
    with session_file.open("ab") as f:
        f.write(b"this is not a record\n")
    store = PanelStore(tmp_path)
    transcript, damage = ask(store, views.transcript, run_id)
    assert transcript["run"]["id"] == run_id
    assert len(damage) == 1 and "unreadable record" in damage[0] and session_file.name in damage[0]
    store.shutdown()
    (tmp_path / ".agio" / "meta.json").write_text("{ not json")
    store = PanelStore(tmp_path)
    with pytest.raises(PanelError, match=r"store metadata .*meta.json is unreadable") as caught:
        ask(store, views.runs_page)
    assert caught.value.status == 503 and "\n" not in str(caught.value)


def test_a_file_that_is_not_a_sqlite_database_is_one_line(tmp_path):
    (tmp_path / "agio.db").write_bytes(b"not a database, " * 100)
    store = PanelStore(tmp_path, f"sqlite:///{tmp_path / 'agio.db'}")
    with pytest.raises(PanelError, match="file is not a database") as caught:
        ask(store, views.runs_page)
    assert "\n" not in str(caught.value)


def test_a_sqlite_store_another_process_holds_locked_is_one_line_soon(tmp_path):
    db = tmp_path / "agio.db"
    _filled(f"sqlite:///{db}")
    holder = subprocess.Popen([sys.executable, "-c", f"""
import sqlite3, sys, time
conn = sqlite3.connect({str(db)!r}, isolation_level=None)
conn.execute("PRAGMA locking_mode=EXCLUSIVE")
conn.execute("BEGIN EXCLUSIVE")
conn.execute("UPDATE agio_meta SET value = value")
print("holding", flush=True)
time.sleep(120)
"""], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        store = PanelStore(tmp_path, f"sqlite:///{db}")
        started = time.monotonic()
        with pytest.raises(PanelError, match="database is locked") as caught:
            ask(store, views.runs_page)
        waited = time.monotonic() - started
        assert "\n" not in str(caught.value) and waited < LOCK_TIMEOUT * 5, waited
    finally:
        holder.kill()
        holder.wait()
    page, _ = ask(store, views.runs_page)  # the lock gone, the same panel reads
    assert len(page["runs"]) == 1


def test_a_tinydb_store_whose_index_another_process_holds_locked_is_one_line_soon(tmp_path):
    _filled(str(tmp_path / ".agio"))
    index = tmp_path / ".agio" / "index.jsonl"
    index.write_bytes(b"")  # as a crash between a session file and the index leaves it: the panel's read repairs it
    holder = subprocess.Popen([sys.executable, "-c", f"""
import fcntl, time
f = open({str(index)!r}, "ab")
fcntl.flock(f, fcntl.LOCK_EX)
print("holding", flush=True)
time.sleep(120)
"""], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        store = PanelStore(tmp_path)
        started = time.monotonic()
        with pytest.raises(PanelError, match="is locked by another process") as caught:
            ask(store, views.runs_page)
        assert "\n" not in str(caught.value) and time.monotonic() - started < LOCK_TIMEOUT * 5
    finally:
        holder.kill()
        holder.wait()
    page, _ = ask(store, views.runs_page)  # the lock gone, the same panel reads (and the index is whole again)
    assert [r["query"] for r in page["runs"]] == ["hello"]


def test_the_push_channel_says_the_database_went_away_and_came_back():
    async def follow(pg, url):
        store = PanelStore(".", url)
        feed = ChangeFeed(store)
        heard: asyncio.Queue = asyncio.Queue()
        feed.subscribe(heard.put_nowait)

        async def next_message(predicate, timeout=60.0):
            deadline = time.monotonic() + timeout
            while True:
                message = await asyncio.wait_for(heard.get(), max(0.1, deadline - time.monotonic()))
                if predicate(message):
                    return message

        await asyncio.sleep(0.5)  # listening
        repo = new_repository(url)
        repo.commit(run=AgentRun(session_id="s", query="one"))
        assert (await next_message(lambda m: m["type"] == "changed"))["runs"] is None
        repo.close()
        await asyncio.get_running_loop().run_in_executor(None, pg.pause)
        down = await next_message(lambda m: m["type"] == "store")
        assert down["state"] == "down" and "cannot be reached" in down["message"] and "agio-secret" not in down["message"]
        await asyncio.get_running_loop().run_in_executor(None, pg.resume)
        assert (await next_message(lambda m: m["type"] == "store"))["state"] == "ok"
        await next_message(lambda m: m["type"] == "changed")  # what was missed is read again
        repo = new_repository(url)
        repo.journal("progress", {}).append([("attempts", {"id": "1", "exercise": "e", "passed": True})])
        assert (await next_message(lambda m: m["type"] == "changed" and m["journals"]))["journals"] == ["progress"]
        repo.close()
        await feed.close()

    with running_postgres() as pg:
        url = pg.new_database()
        new_repository(url).close()
        asyncio.run(follow(pg, url))


def test_a_runs_notebook_names_no_home_folder_and_the_panel_still_opens_it(tmp_path, monkeypatch):
    from agio_notebook.core.origin import current_notebook

    home = tmp_path / "home" / "alice"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("JPY_SESSION_NAME", str(home / "course" / "quickstart.ipynb"))
    assert current_notebook() == "~/course/quickstart.ipynb"  # what saved transcripts carry
    assert AgentRun(session_id="s").notebook == "~/course/quickstart.ipynb"
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "elsewhere.ipynb"))
    assert current_notebook() == str(tmp_path / "elsewhere.ipynb")
    assert views.notebook_path(PanelStore(home), "~/course/quickstart.ipynb") == "course/quickstart.ipynb"
    assert views.notebook_path(PanelStore(home), str(tmp_path / "elsewhere.ipynb")) is None  # outside the root
    assert views.notebook_path(PanelStore(home), "lesson.ipynb") == "lesson.ipynb"


def test_bad_input_on_a_postgresql_store_is_a_400_and_a_damaged_row_is_told_beside_the_others(postgres_server, tmp_path):
    """Input PostgreSQL cannot even be asked (a NUL in an id, a cursor's or a filter's), a limit that is not
    ASCII digits or has thousands of them: each a 400 in one line, never 'cannot read the store' (503)."""
    import base64

    import orjson
    import psycopg

    url = postgres_server.new_database()
    run_id = _filled(url)
    store = PanelStore(tmp_path, target=url)
    nul_cursor = base64.urlsafe_b64encode(orjson.dumps([1.0, "a\x00b"])).decode().rstrip("=")
    for view, args, params, line in (
            (views.runs_page, (), {"limit": "\u00b2"}, "limit is a number of runs, got '\u00b2'"),
            (views.runs_page, (), {"limit": "9" * 5000}, "limit is a number of runs, got '99999999999999999999'..."),
            (views.runs_page, (), {"cursor": nul_cursor}, "is not a cursor of a page of runs"),
            (views.runs_page, (), {"text": "a\x00b"}, "the text filter cannot hold a NUL character"),
            (views.transcript, ("abc\x00def",), {}, "a run id cannot hold a NUL character"),
            (views.tree, ("abc\x00def",), {}, "a session id cannot hold a NUL character"),
            (views.diff, (), {"a": run_id, "b": "x\x00"}, "a run id cannot hold a NUL character")):
        with pytest.raises(PanelError, match=line) as caught:
            ask(store, view, *args, **params)
        assert caught.value.status == 400 and "\n" not in str(caught.value), (view, params, caught.value)
    with pytest.raises(PanelError, match="no run 'nope123'") as caught:
        ask(store, views.transcript, "nope123")
    assert caught.value.status == 404
    with psycopg.connect(url, autocommit=True) as conn:  # a row written by hand, whose document is not JSON
        conn.execute("INSERT INTO agio_runs (id, session_id, started_at, status, doc) VALUES ('evil', 's', 4e9, "
                     "'completed', 'oops')")
    page, damage = ask(store, views.runs_page)
    assert [r["id"] for r in page["runs"]] == [run_id]
    assert len(damage) == 1 and "agio_runs evil (written by " in damage[0] and "unreadable, left out" in damage[0]
    store.shutdown()
