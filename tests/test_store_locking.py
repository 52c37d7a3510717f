"""A journal is locked on the file itself: a session is two files, and the lock holds across a
compaction's rename and a delete (a writer waiting on the old file ends up on the file the name has
now, and nobody writes between the rename and the release)."""

from __future__ import annotations

import os
import threading

import pytest

from agio_notebook import Agent, ScriptedModel, StepRunner
from agio_notebook.storage import TinyDBRepository
from agio_notebook.storage import journal as journal_module
from agio_notebook.storage.journal import Journal
from agio_notebook.core.mounts import parse_mountinfo
from agio_notebook.storage import locking
from agio_notebook.storage.locking import FileLock, LockTimeout, filesystem_type, native_flock
from agio_notebook.storage.tinydb_repo import read_table_fast

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
    assert native_flock(tmp_path)
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


def test_whoever_writes_a_journals_first_bytes_syncs_its_directory(tmp_path, monkeypatch):
    synced = []
    monkeypatch.setattr(journal_module, "fsync_dir", lambda p: synced.append(p))
    path = tmp_path / "j.jsonl"
    journal = Journal(path, KEYS)
    with journal.lock:  # the lock makes the file: its directory entry is not durable yet
        assert path.exists()
        journal.append([note(1)])
    assert synced == [tmp_path]
    journal.append([note(2)])
    assert synced == [tmp_path]  # once
    # a file made by another's lock (which wrote nothing): the first to write in it syncs the directory
    other_path = tmp_path / "k.jsonl"
    with FileLock(other_path, on_file=True):
        pass
    writer = Journal(other_path, KEYS)
    writer.append([note(1)])
    assert synced == [tmp_path, tmp_path]
    for j in (journal, writer):
        j.close()


def test_readers_compaction_and_delete_never_make_a_missing_journal(tmp_path):
    repo = TinyDBRepository(tmp_path / "store")
    runner = StepRunner(Agent(model=ScriptedModel(["hi"] * 40)), repository=repo)
    for i in range(33):  # enough lines that closing the store compacts the journal
        runner.run_sync("s", f"q{i}")
    other = TinyDBRepository(tmp_path / "store")
    other.delete_session("s")
    other.close()
    repo.close()  # compacts what it had open: the deleted journal stays deleted
    assert sorted(p.name for p in (tmp_path / "store" / "sessions").iterdir()) == ["s.claim"]
    assert TinyDBRepository(tmp_path / "store").stats().sessions == 0

    path = tmp_path / "j.jsonl"
    journal = Journal(path, KEYS)
    assert journal.compact() and not path.exists()
    with journal.lock.existing() as present:
        assert not present
    assert not path.exists()
    assert read_table_fast(path, "steps") == []
    journal.close()


NFS_AND_EXT4 = (
    "36 25 8:1 / / rw,relatime - ext4 /dev/vda1 rw\n"
    "80 36 0:53 / /home/shared rw,relatime - nfs4 server:/export rw,vers=4.2\n"
    "81 36 0:54 / /mnt/with\\040space rw - tmpfs tmpfs rw\n")


def test_the_filesystem_type_comes_from_the_device_or_the_longest_mount_point():
    table = parse_mountinfo(NFS_AND_EXT4)
    assert filesystem_type(table, os.makedev(0, 53), "/anything") == "nfs4"
    assert filesystem_type(table, os.makedev(8, 1), "/home/me") == "ext4"
    # a device the table does not list (a btrfs subvolume): the mount point decides
    assert filesystem_type(table, os.makedev(0, 99), "/home/shared/course") == "nfs4"
    assert filesystem_type(table, os.makedev(0, 99), "/home/sharedx") == "ext4"
    assert filesystem_type(table, os.makedev(0, 99), "/mnt/with space/x") == "tmpfs"


def test_where_flock_is_emulated_the_lock_stays_beside_the_journal(tmp_path, monkeypatch):
    assert native_flock(tmp_path)  # this checkout's temp dir: a local filesystem
    monkeypatch.setattr(locking, "_native", {os.stat(tmp_path).st_dev: False})  # as on NFS
    path = tmp_path / "j.jsonl"
    first, second = Journal(path, KEYS, 0.3), Journal(path, KEYS, 0.3)
    first.append([note(1)])
    assert (tmp_path / "j.jsonl.lock").exists()
    with first.lock:
        with pytest.raises(LockTimeout, match="locked by another process"):
            second.append([note(2)])
    second.append([note(2)])
    assert first.compact()  # the lock beside the file stays through the rename
    second.append([note(3)])
    first.refresh()
    assert list(first.tables["notes"]) == ["1", "2", "3"]
    with first.lock.existing() as present:
        assert present
    path.unlink()
    with first.lock.existing() as present:
        assert not present  # the journal is gone, though its lock file is there
    for j in (first, second):
        j.close()


def test_a_lock_on_the_file_itself_does_not_pass_unless_held(tmp_path):
    lock = FileLock(tmp_path / "j.jsonl", on_file=True)
    with pytest.raises(RuntimeError, match="held lock"):
        lock.adopt(0)
