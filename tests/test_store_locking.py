"""A journal is locked on the file itself: a session is two files, and the lock holds across a
compaction's rename and a delete (a writer waiting on the old file ends up on the file the name has
now, and nobody writes between the rename and the release)."""

from __future__ import annotations

import threading

import pytest

from agio_notebook import Agent, ScriptedModel, StepRunner
from agio_notebook.storage import TinyDBRepository
from agio_notebook.storage import journal as journal_module
from agio_notebook.storage.journal import Journal
from agio_notebook.storage.locking import FileLock, LockTimeout

KEYS = {"notes": lambda d: d["id"]}


def note(i: int | str) -> tuple[str, dict]:
    return ("notes", {"id": str(i)})


def in_thread(call) -> tuple[threading.Thread, threading.Event]:
    """Run ``call`` on a thread; the event is set once it has returned."""
    done = threading.Event()

    def run() -> None:
        call()
        done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, done


def test_a_run_in_a_new_session_makes_two_files(tmp_path):
    repo = TinyDBRepository(tmp_path / "store")
    runner = StepRunner(Agent(model=ScriptedModel(["hi"])), repository=repo)
    assert runner.run_sync("s1", "hello").status.value == "completed"
    repo.close()
    assert sorted(p.name for p in (tmp_path / "store" / "sessions").iterdir()) == ["s1.claim", "s1.jsonl"]


def test_a_writer_waiting_through_a_compaction_appends_to_the_new_file(tmp_path):
    path = tmp_path / "j.jsonl"
    first, second = Journal(path, KEYS, 10.0), Journal(path, KEYS, 10.0)
    first.append([note(1), note(2)])
    with first.lock:
        thread, done = in_thread(lambda: second.append([note("waited")]))
        assert not done.wait(0.2)  # the other writer waits for the lock
        old_inode = path.stat().st_ino
        assert first.compact()
        assert path.stat().st_ino != old_inode  # replaced by rename
        # the new file is locked before it takes the name: nobody writes between rename and release
        with pytest.raises(LockTimeout, match="locked by another process"):
            with FileLock(path, 0.2, on_file=True):
                pass
        first.append([note(3)])
        assert not done.is_set()
    thread.join(10)
    assert done.is_set()
    fresh = Journal(path, KEYS)
    fresh.refresh()
    assert list(fresh.tables["notes"]) == ["1", "2", "3", "waited"]
    for journal in (first, second, fresh):
        journal.close()


def test_a_writer_waiting_through_a_delete_makes_the_file_anew(tmp_path):
    path = tmp_path / "j.jsonl"
    first, second = Journal(path, KEYS, 10.0), Journal(path, KEYS, 10.0)
    first.append([note(1)])
    with first.lock:
        thread, done = in_thread(lambda: second.append([note("after")]))
        assert not done.wait(0.2)
        path.unlink()
    thread.join(10)
    assert done.is_set()
    fresh = Journal(path, KEYS)
    fresh.refresh()
    assert list(fresh.tables["notes"]) == ["after"]
    for journal in (first, second, fresh):
        journal.close()


def test_a_journal_made_by_taking_its_lock_still_syncs_its_directory(tmp_path, monkeypatch):
    synced = []
    monkeypatch.setattr(journal_module, "fsync_dir", lambda p: synced.append(p))
    path = tmp_path / "j.jsonl"
    journal = Journal(path, KEYS)
    with journal.lock:  # the lock makes the file: its directory entry is not durable yet
        assert path.exists() and journal.lock.created
        journal.append([note(1)])
    assert synced == [tmp_path]
    journal.append([note(2)])
    assert synced == [tmp_path]  # once
    journal.close()


def test_a_lock_on_the_file_itself_does_not_pass_unless_held(tmp_path):
    lock = FileLock(tmp_path / "j.jsonl", on_file=True)
    with pytest.raises(RuntimeError, match="held lock"):
        lock.adopt(0)
