"""The TinyDB store's run query snapshot on disk (``index.runs.sqlite``, ``storage/run_index_file.py``): a new
process answers its pages from it and the run index journal's tail, without reading the whole journal, and
its pages are always those of the journal: after appends by another process, a compaction (which carries the
snapshot along), a rewrite that does not, a copy of the store edited elsewhere, a truncated, damaged or
deleted snapshot (one line, then rebuilt), a writer killed while writing one, damage or zeros in the
journal's tail (reported by every process, never written into a snapshot), a directory that refuses it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from tinydb import Query, TinyDB

from agio_notebook.core import AgentRun, RunStatus
from agio_notebook.storage import JournalStorage, RunFilter, StoreDamageWarning, TinyDBRepository
from agio_notebook.storage import run_index_file, run_index_follow
from agio_notebook.storage.journal import Journal
from agio_notebook.storage.layout import INDEX_KEYS
from agio_notebook.storage.run_index_file import NAME
from agio_notebook.storage.run_query import newest_first

WHERES = [RunFilter(), RunFilter(agent="agent1"), RunFilter(status="failed"), RunFilter(status="cancelled"),
          RunFilter(notebook="nb2.ipynb"), RunFilter(text="WEATHER 1"), RunFilter(session_id="s2")]


def _run(i: int, **kw) -> AgentRun:
    fields = dict(session_id=f"s{i % 3}", query=f"Question {i} about the Weather", agent_name=f"agent{i % 2}",
                  status=RunStatus.FAILED if i % 10 == 3 else RunStatus.COMPLETED, started_at=1000.0 + i,
                  notebook=f"nb{i % 4}.ipynb", user="me", final_text=f"answer {i}")
    fields.update(kw)
    return AgentRun(**fields)


def _filled(root: Path, n: int) -> list[AgentRun]:
    """A store of ``n`` runs, closed: its run index compacted, with a snapshot beside it."""
    runs = [_run(i) for i in range(n)]
    repo = TinyDBRepository(root)
    repo.commit_group([{"run": r} for r in runs])
    repo.compact()
    repo.close()
    assert (root / NAME).exists()
    return runs


def _truth(root: Path, where: RunFilter = RunFilter()) -> list[str]:
    """The run ids a page should show, read from the journal itself."""
    journal = Journal(root / "index.jsonl", INDEX_KEYS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StoreDamageWarning)
        journal.refresh()
    journal.close()
    runs = journal.tables.get("runs", {})
    return [r.id for r in newest_first(runs.values(), where, len(runs) + 1, None).runs]


def _ids(repo: TinyDBRepository, where: RunFilter = RunFilter()) -> list[str]:
    """Every page of ``where``, seven runs a page."""
    seen, cursor = [], None
    while True:
        page = repo.query_runs(where, limit=7, cursor=cursor)
        seen += [r.id for r in page.runs]
        if page.next_cursor is None:
            return seen
        cursor = page.next_cursor


def _agrees(repo: TinyDBRepository, root: Path) -> None:
    for where in WHERES:
        assert _ids(repo, where) == _truth(root, where), where


def _read_whole(repo: TinyDBRepository) -> bool:
    """Whether the repository has read the whole run index journal."""
    return repo._index.loaded


def _stamp(root: Path):
    snapshot = run_index_file.load(root)
    assert snapshot is not None
    snapshot.close()
    return snapshot.stamp


def _quiet_open(root: Path) -> tuple[TinyDBRepository, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StoreDamageWarning)
        repo = TinyDBRepository(root)
        _agrees(repo, root)
    return repo, [str(w.message) for w in caught if issubclass(w.category, StoreDamageWarning)]


def test_a_new_process_answers_from_the_snapshot_and_the_journals_tail(tmp_path):
    root = tmp_path / "store"
    runs = _filled(root, 70)
    writer = TinyDBRepository(root)
    for i in range(70, 75):
        writer.commit(run=_run(i))
    writer.commit(run=_run(4, status=RunStatus.CANCELLED, final_text="changed after the snapshot"))
    reader = TinyDBRepository(root)
    _agrees(reader, root)
    assert reader.run_facets()["status"] == ["cancelled", "completed", "failed"]
    assert not _read_whole(reader)
    writer.delete_run(runs[6].id)  # after the reader follows: its next page drops it
    writer.commit(run=_run(75))
    _agrees(reader, root)
    assert runs[6].id not in _ids(reader) and not _read_whole(reader)
    reader.close()
    writer.close()


def test_a_compaction_by_another_process_carries_the_snapshot_along(tmp_path):
    root = tmp_path / "store"
    runs = _filled(root, 70)
    reader = TinyDBRepository(root)
    _agrees(reader, root)
    before = _stamp(root)
    other = TinyDBRepository(root)
    for i in range(70, 80):
        other.commit(run=_run(i))
    other.commit(run=_run(5, status=RunStatus.CANCELLED))
    other.delete_run(runs[8].id)
    other.compact()
    other.close()
    after = _stamp(root)
    assert (after.inode, after.offset) != (before.inode, before.offset)
    assert after.offset == (root / "index.jsonl").stat().st_size  # it matches the compacted file, whole
    _agrees(reader, root)  # the reader follows the new file: the snapshot carried along, not a rebuild
    assert not _read_whole(reader)
    fresh, damage = _quiet_open(root)
    assert damage == [] and not _read_whole(fresh)
    fresh.close()
    reader.close()


def test_a_rewrite_that_does_not_bring_the_snapshot_along_is_never_taken_for_it(tmp_path):
    root = tmp_path / "store"
    runs = _filled(root, 70)
    reader = TinyDBRepository(root)
    _agrees(reader, root)
    db = TinyDB(root / "index.jsonl", storage=JournalStorage)  # TinyDB's own API rewrites the file
    db.table("runs").update({"status": "cancelled"}, Query().id == runs[10].id)
    db.close()
    assert _truth(root, RunFilter(status="cancelled")) == [runs[10].id]
    fresh, damage = _quiet_open(root)
    assert damage == [] and _read_whole(fresh)  # rebuilt from the journal
    _agrees(reader, root)  # the reader sees another file under the name: the new snapshot, and its tail
    assert not _read_whole(reader)
    fresh.close()
    reader.close()


def test_a_copy_of_the_store_edited_elsewhere_is_read_as_it_is(tmp_path):
    root, copy = tmp_path / "store", tmp_path / "copy"
    _filled(root, 300)  # a run index of ~200 KB: more than the digested head and tail
    shutil.copytree(root, copy)
    journal = copy / "index.jsonl"
    data = bytearray(journal.read_bytes())
    at = data.index(b'"status":"completed"', len(data) // 2)  # a run in the middle, edited in place
    data[at:at + 20] = b'"status":"cancelled"'
    with open(journal, "r+b") as f:
        f.write(data)
    assert len(_truth(copy, RunFilter(status="cancelled"))) == 1
    for store in (copy, root):
        repo, damage = _quiet_open(store)
        assert damage == []
        repo.close()
    repo = TinyDBRepository(root)
    assert not _read_whole(repo) and repo.query_runs(RunFilter(status="cancelled")).runs == []
    repo.close()


@pytest.mark.parametrize("damage", ["truncated", "not a database", "pages overwritten"])
def test_a_damaged_snapshot_is_one_line_then_rebuilt(tmp_path, damage):
    root = tmp_path / "store"
    _filled(root, 300)
    path = root / NAME
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[:len(data) // 2])
    elif damage == "not a database":
        path.write_bytes(b"not a database, " * 1000)
    else:
        with open(path, "r+b") as f:  # the header and the stamp intact, pages of runs and documents garbled
            for start in range(8192, len(data) - 16384, 8192):
                f.seek(start)
                f.write(os.urandom(1024))
    repo, lines = _quiet_open(root)
    assert len(lines) == 1 and "\n" not in lines[0], lines
    assert NAME in lines[0] and "could not be read" in lines[0] and "rebuilt from index.jsonl" in lines[0]
    repo.close()
    again, lines = _quiet_open(root)
    assert lines == [] and not _read_whole(again)
    again.close()


def test_a_deleted_snapshot_is_rebuilt_without_a_word(tmp_path):
    root = tmp_path / "store"
    _filled(root, 70)
    (root / NAME).unlink()
    repo, lines = _quiet_open(root)
    assert lines == [] and (root / NAME).exists()
    repo.close()
    again, _ = _quiet_open(root)
    assert not _read_whole(again)
    again.close()


KILLED_WRITING = """
import os, signal, sys
from agio_notebook.core import AgentRun
from agio_notebook.storage import TinyDBRepository, run_index_file

def killed(root, tmp):  # the temp file written, not yet given the snapshot's name
    print(tmp, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)

run_index_file._install = killed
repo = TinyDBRepository(sys.argv[1])
if sys.argv[2] == "read":
    repo.query_runs()
else:
    for i in range(3):
        repo.commit(run=AgentRun(session_id="late", query=f"late {i}", started_at=5000.0 + i))
    repo.compact()
"""


@pytest.mark.parametrize("when", ["read", "compact"])
def test_a_writer_killed_while_writing_a_snapshot_leaves_the_last_one_or_none(tmp_path, when):
    root = tmp_path / "store"
    _filled(root, 70)
    if when == "read":
        (root / NAME).unlink()
    before = None if when == "read" else _stamp(root)
    done = subprocess.run([sys.executable, "-c", KILLED_WRITING, str(root), when], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    left = Path(done.stdout.strip())
    assert left.exists() and left.parent == root
    if when == "read":
        assert not (root / NAME).exists()
    else:
        assert _stamp(root) == before  # the last one, whole: it no longer matches the compacted journal
    repo, lines = _quiet_open(root)
    assert lines == [] and len(_truth(root)) == (70 if when == "read" else 73)
    repo.close()
    assert left.exists()  # another writer's temp file is left alone while it may still be writing...
    os.utime(left, (time.time() - 3600, time.time() - 3600))
    (root / NAME).unlink()
    repo, _ = _quiet_open(root)  # ... and removed once it is old
    repo.close()
    assert not left.exists()


@pytest.mark.parametrize("bad", [b"this is not a record\n", b"\0" * 64 + b"\n"])
def test_damage_or_zeros_in_the_journals_tail_are_read_by_every_process_never_written_into_a_snapshot(
        tmp_path, monkeypatch, bad):
    monkeypatch.setattr(run_index_follow, "REWRITE_AFTER", 0)
    monkeypatch.setattr(run_index_follow, "REWRITE_ON_CLOSE", 0)
    root = tmp_path / "store"
    _filled(root, 70)
    with open(root / "index.jsonl", "ab") as f:
        f.write(bad)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StoreDamageWarning)
        writer = TinyDBRepository(root)
        writer.commit(run=_run(70))
        writer.close()
    before = _stamp(root)
    for _ in range(2):
        repo, lines = _quiet_open(root)
        repo.close()
        assert _stamp(root) == before
        if bad.startswith(b"this"):
            assert len(lines) == 1 and "unreadable record" in lines[0] and "index.jsonl" in lines[0], lines
        else:
            assert lines == []


def test_a_snapshot_is_written_again_once_the_tail_is_long_and_the_next_process_starts_from_it(tmp_path,
                                                                                                monkeypatch):
    monkeypatch.setattr(run_index_follow, "REWRITE_AFTER", 1)
    root = tmp_path / "store"
    _filled(root, 70)
    reader = TinyDBRepository(root)
    _agrees(reader, root)
    writer = TinyDBRepository(root)
    writer.commit(run=_run(70))
    writer.commit(run=_run(1, status=RunStatus.CANCELLED))
    _agrees(reader, root)
    assert _stamp(root).offset == (root / "index.jsonl").stat().st_size
    fresh, lines = _quiet_open(root)
    assert lines == [] and not _read_whole(fresh)
    for repo in (fresh, reader, writer):
        repo.close()


def test_a_directory_that_refuses_the_snapshot_leaves_the_pages_right(tmp_path, monkeypatch):
    root = tmp_path / "store"
    _filled(root, 70)
    (root / NAME).unlink()

    def refused(root: Path) -> Path:
        raise PermissionError(13, "Permission denied", str(root))

    monkeypatch.setattr(run_index_file, "_temp", refused)
    repo, lines = _quiet_open(root)
    writer = TinyDBRepository(root)
    writer.commit(run=_run(70))
    _agrees(repo, root)
    assert lines == [] and not (root / NAME).exists()
    repo.close()
    writer.close()


def test_a_close_compacts_the_run_index_once_its_lines_are_a_tenth_of_its_records(tmp_path):
    root = tmp_path / "store"
    _filled(root, 700)  # 700 runs and 3 sessions, compacted

    def lines() -> int:
        return len((root / "index.jsonl").read_bytes().splitlines())

    repo = TinyDBRepository(root)
    repo.commit_group([{"run": _run(i)} for i in range(700, 765)])
    repo.close()
    assert lines() == 1 + 65  # more than 64 lines, fewer than a tenth of 768 records: left as it is
    repo = TinyDBRepository(root)
    repo.commit_group([{"run": _run(i)} for i in range(765, 780)])
    _agrees(repo, root)
    repo.close()
    assert lines() == 1 and not _read_whole(fresh := TinyDBRepository(root))  # compacted, its snapshot along
    _agrees(fresh, root)
    fresh.close()
