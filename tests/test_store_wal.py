"""The TinyDB store's write-ahead log: a group commit is durable once its log record is synced.

A machine that stops keeps only what was synced. These tests make that state for real files: a writer
process (the engine, eight sessions at once, through group commit) is killed with SIGKILL, then every
store file it appended to is cut back (or zero-filled) as a lost page cache would leave it. Opening
the store must bring back every step whose event was delivered. The same state opened without the
log's replay loses them, so the tests can fail.
"""

from __future__ import annotations

import contextlib
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest

from agio_notebook.core import Step, StepRole
from agio_notebook.storage import TinyDBRepository, group_commit, wal

WRITER = r'''
import asyncio, sys
from agio_notebook import Agent, ExecutionConfig, FunctionModel, Reply, StepRunner, tool
from agio_notebook.core import StepEventType
from agio_notebook.storage import TinyDBRepository, group_commit

group_commit.CHECKPOINT_WHEN_IDLE = 1e9  # no checkpoint: only the log makes a commit durable

@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b

def reply(messages, tools):
    return Reply.call("add", a=len(messages), b=1) if messages[-1]["role"] == "user" else "done"

async def session(runner, name):
    for i in range(10_000):
        async for event in runner.run_stream(name, f"q{i}"):
            if event.type is StepEventType.STEP_COMPLETED:
                print(name, event.payload["step"]["id"], flush=True)

async def main():
    runner = StepRunner(Agent(model=FunctionModel(reply), tools=[add], config=ExecutionConfig(enable_retry=False)),
                        repository=TinyDBRepository(sys.argv[1]))
    await asyncio.gather(*(session(runner, f"s{i}") for i in range(8)))

asyncio.run(main())
'''


def written_then_killed(root: Path, steps: int) -> dict[str, set[str]]:
    """Run the writer until ``steps`` step events were delivered, SIGKILL it; session -> delivered ids."""
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(root)], stdout=subprocess.PIPE, text=True)
    delivered: dict[str, set[str]] = {}
    try:
        for _ in range(steps):
            line = proc.stdout.readline()
            assert line, "the writer ended early"
            name, step_id = line.split()
            delivered.setdefault(name, set()).add(step_id)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
    return delivered


def lose_page_cache(root: Path, before: dict[Path, int], rng: random.Random) -> int:
    """Cut every file appended to since ``before`` back to a random length no shorter than it was then
    (a new file may vanish), zero-filling the lost part of some: what a machine that stopped may leave
    of writes that were never synced. Returns how many files lost something."""
    cut = 0
    for path in [root / "index.jsonl", *sorted((root / "sessions").glob("*.jsonl"))]:
        size, was = path.stat().st_size, before.get(path, 0)
        if size == was:
            continue
        cut += 1
        if was == 0 and rng.random() < 0.5:
            path.unlink()  # its directory entry never reached the disk
            continue
        keep = rng.randint(was, size - 1)
        with open(path, "r+b") as f:
            f.truncate(keep)
            if rng.random() < 0.3:
                f.seek(keep)
                f.write(b"\0" * (size - keep))  # the size reached the disk, the data did not
    return cut


def as_if_restarted(root: Path) -> None:
    """The machine stopped and started again: the logs left behind are of an earlier boot."""
    for log in (root / "wal").glob("*.log"):
        log.rename(log.with_name("0" * 32 + log.name[len(wal.BOOT):]))


def stored_ids(root: Path, sessions) -> dict[str, set[str]]:
    repo = TinyDBRepository(root)
    try:
        return {name: {s.id for s in repo.get_steps(name, include_superseded=True)} for name in sessions}
    finally:
        repo.close()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_after_a_stop_of_the_machine_every_delivered_step_comes_back_from_the_log(tmp_path, seed):
    root = tmp_path / "store"
    TinyDBRepository(root).close()
    before = {p: p.stat().st_size for p in root.rglob("*.jsonl")}
    delivered = written_then_killed(root, 60 + 20 * seed)
    logs = list((root / "wal").glob("*.log"))
    assert len(logs) == 1  # the killed writer's, never checkpointed
    assert lose_page_cache(root, before, random.Random(seed)) >= 3
    as_if_restarted(root)
    without_log = tmp_path / "without-log"
    shutil.copytree(root, without_log)
    shutil.rmtree(without_log / "wal")

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        stored = stored_ids(root, delivered)
    # the one damage a replay leaves: the tail of an append the kill cut before it was logged (never
    # reported durable), which the next writer removes
    ours = [w for w in seen if not issubclass(w.category, ResourceWarning)]  # not another test's garbage
    assert all("ends with an incomplete record" in str(w.message) for w in ours), [str(w.message) for w in ours]
    for name, ids in delivered.items():
        assert ids <= stored[name], f"{name}: {len(ids - stored[name])} delivered steps lost"
    assert not list((root / "wal").glob("*.log"))  # replayed, synced, removed
    repo = TinyDBRepository(root)
    assert repo.verify() == []
    repo.close()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the cut files are damaged, as expected without the log
        lost = stored_ids(without_log, delivered)
    assert any(not ids <= lost[name] for name, ids in delivered.items()), "the simulated stop lost nothing"


def record_syncs(monkeypatch, calls: list[str], names=("fsync", "fdatasync", "syncfs"), label: str | None = None):
    """Note each call of the named syncs in ``calls`` (its name, or ``label``), then make it."""
    from agio_notebook.storage import durability

    for name in names:
        module = durability if name == "syncfs" else os
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda fd, real=real, name=name: (calls.append(label or name), real(fd))[1])


def _group(repo: TinyDBRepository, sessions: list[str], content: str) -> None:
    steps = [Step(session_id=s, run_id="r", sequence=len(repo.get_steps(s)) + 1, role=StepRole.USER,
                  content=content) for s in sessions]
    assert repo.commit_group([{"steps": [step]} for step in steps]) == [None] * len(steps)


def test_one_log_sync_per_group_and_the_store_files_synced_only_at_checkpoints(tmp_path, monkeypatch):
    calls: list[str] = []
    record_syncs(monkeypatch, calls)
    repo = TinyDBRepository(tmp_path / "store")
    _group(repo, ["a", "b", "c"], "first")  # creates the log (its zeros are fsynced once)
    calls.clear()
    for i in range(5):
        _group(repo, ["a", "b", "c", f"new{i}"], f"group {i}")
    assert calls == ["fdatasync"] * 5  # one per group, whatever the number of files
    calls.clear()
    repo.checkpoint()
    assert calls[0] in ("syncfs", "fsync") and calls[-1] == "fdatasync"  # the files, then the log starts over
    calls.clear()
    repo.checkpoint()  # nothing new: nothing to do
    assert calls == []
    repo.close()
    assert not list((tmp_path / "store" / "wal").glob("*.log"))


def test_the_log_grows_as_it_fills_then_checkpoints_and_starts_over_and_nothing_is_lost(tmp_path, monkeypatch):
    monkeypatch.setattr(wal, "FIRST_SIZE", 2048)
    monkeypatch.setattr(wal, "LOG_SIZE", 8192)
    root = tmp_path / "store"
    repo = TinyDBRepository(root)
    sizes = []
    for i in range(40):
        _group(repo, ["a", "b"], f"step {i} " + "x" * 200)
        sizes.append(repo._wal._size)
    assert sizes[0] == 2048 and 4096 in sizes and sizes[-1] == 8192
    assert repo._wal.checkpoints >= 2
    (log,) = (root / "wal").glob("*.log")
    assert log.stat().st_size == 8192
    assert [s.content[:7] for s in repo.get_steps("a")][-1] == "step 39"
    repo.close()


def test_the_writer_checkpoints_once_idle(tmp_path, monkeypatch):
    monkeypatch.setattr(group_commit, "CHECKPOINT_WHEN_IDLE", 0.05)
    repo = TinyDBRepository(tmp_path / "store")
    committer = group_commit.committer_for(repo)
    step = Step(session_id="s", run_id="r", sequence=1, role=StepRole.USER, content="hi")
    committer.submit({"steps": [step]}).result(30)
    done = threading.Event()
    checkpoint = repo.checkpoint

    def watched() -> None:
        checkpoint()
        done.set()

    monkeypatch.setattr(repo, "checkpoint", watched)
    committer.submit({"steps": [Step(session_id="s", run_id="r", sequence=2, role=StepRole.USER,
                                     content="again")]}).result(30)
    assert done.wait(30)
    assert repo._wal.checkpoints >= 1 and repo._wal._cursor <= wal._HEADER.size
    repo.close()


def test_a_live_writers_log_is_left_alone_and_a_dead_ones_is_removed_after_a_checkpoint(tmp_path):
    root = tmp_path / "store"
    live = TinyDBRepository(root)
    _group(live, ["a"], "live")
    (live_log,) = (root / "wal").glob("*.log")
    delivered = written_then_killed(root, 10)
    assert len(list((root / "wal").glob("*.log"))) == 2
    other = TinyDBRepository(root)  # replays the dead writer's log only (nothing is missing: a no-op)
    assert list((root / "wal").glob("*.log")) == [live_log]
    assert all(ids <= {s.id for s in other.get_steps(name, include_superseded=True)} for name, ids in delivered.items())
    other.close()
    live.close()
    assert not list((root / "wal").glob("*.log"))


def test_replay_never_writes_over_a_file_rewritten_since_or_brings_back_a_deleted_one(tmp_path):
    root = tmp_path / "store"
    repo = TinyDBRepository(root)
    for i in range(8):  # the sessions exist, on disk, before the writer appends to them
        repo.commit(steps=[Step(session_id=f"s{i}", run_id="r", sequence=1, role=StepRole.USER, content="hi")])
    repo.close()
    written_then_killed(root, 60)
    (log,) = (root / "wal").glob("*.log")
    records = list(wal.records(log.read_bytes()))
    sessions = sorted({name for name, *_ in records if name.startswith("sessions/")})
    assert len(sessions) >= 2 and not [o for n, o, *_ in records if n in sessions[:2] and o == 0]
    rewritten, deleted = root / sessions[0], root / sessions[1]
    # after the kill: one session file rewritten (a new inode, shorter), another deleted
    first_line = rewritten.read_bytes().split(b"\n")[0] + b"\n"
    replacement = rewritten.with_name(rewritten.name + ".new")
    replacement.write_bytes(first_line)
    os.replace(replacement, rewritten)
    deleted.unlink()
    as_if_restarted(root)  # (from this boot, a dead log is synced, never replayed)
    TinyDBRepository(root).close()
    assert rewritten.read_bytes() == first_line
    assert not deleted.exists()


def test_a_record_cut_short_ends_the_log(tmp_path):
    root = tmp_path / "store"
    TinyDBRepository(root).close()
    written_then_killed(root, 30)
    (log,) = (root / "wal").glob("*.log")
    raw = bytearray(log.read_bytes())
    records = list(wal.records(bytes(raw)))
    assert len(records) >= 4
    # flip a byte inside the third record's data: it and everything after it are not replayed
    pos = 0
    for _ in range(2):
        *_, name_len, data_len = wal._HEADER.unpack_from(raw, pos)
        pos += wal._HEADER.size + name_len + data_len
    raw[pos + wal._HEADER.size + 3] ^= 0xFF
    assert len(list(wal.records(bytes(raw)))) == 2


def test_a_forked_child_writes_its_own_log_not_its_parents(tmp_path):
    root = tmp_path / "store"
    repo = TinyDBRepository(root)
    _group(repo, ["parent"], "before the fork")
    (parent_log,) = (root / "wal").glob("*.log")
    pid = os.fork()
    if pid == 0:  # the child: commit through the inherited repository, then leave without cleanup
        try:
            _group(repo, ["child"], "from the child")
            os._exit(0 if len(list((root / "wal").glob("*.log"))) == 2 else 3)
        except BaseException:  # noqa: BLE001
            os._exit(4)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    _group(repo, ["parent"], "after the fork")
    records = [name for name, *_ in wal.records(parent_log.read_bytes())]
    assert not any("child" in name for name in records)  # the parent's log holds only the parent's appends
    repo.close()
    reopened = TinyDBRepository(root)  # the child's log (its process is gone) is replayed: a no-op
    assert [s.content for s in reopened.get_steps("child")] == ["from the child"]
    assert not list((root / "wal").glob("*.log"))
    reopened.close()


KILLED = r'''
import os, signal, sys
from agio_notebook.core import Step, StepRole
from agio_notebook.storage import TinyDBRepository

def group(repo, sid, seq, content):
    step = Step(session_id=sid, run_id="r", sequence=seq, role=StepRole.USER, content=content)
    assert repo.commit_group([{"steps": [step]}]) == [None]

root = sys.argv[1]
repo = TinyDBRepository(root)
''' + "{code}" + r'''
os.kill(os.getpid(), signal.SIGKILL)
'''


def killed_after(root: Path, code: str) -> str:
    """Run ``code`` (with ``repo`` and ``group`` at hand) in a process that then kills itself; its output."""
    proc = subprocess.run([sys.executable, "-c", KILLED.replace("{code}", code), str(root)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    return proc.stdout


@contextlib.contextmanager
def writer_living_on(root: Path, code: str):
    """A process that runs ``code`` (as :func:`killed_after`) and lives on, its log in use, until the
    block ends; then it kills itself."""
    go = root.parent / f"go-{secrets.token_hex(4)}"
    wait = f"print('written', flush=True)\nimport time\nwhile not os.path.exists({str(go)!r}):\n    time.sleep(0.02)"
    writer = subprocess.Popen([sys.executable, "-c", KILLED.replace("{code}", code + "\n" + wait), str(root)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "written"
        yield
    finally:
        go.touch()
        writer.wait(60)
    assert writer.returncode == -signal.SIGKILL


def test_a_file_rewritten_into_a_reused_inode_number_is_never_written_into_by_replay(tmp_path):
    """ext4 hands a freed inode number to the next new file: compactions soon reuse one, and the old
    file's records must not go into the new file (the inode's generation tells them apart)."""
    root = tmp_path / "store"
    TinyDBRepository(root).close()
    killed_after(root, '''
p = repo.session_file("s")
seen = {}
for i in range(1, 60):
    group(repo, "s", i, f"step {i} " + "x" * 40)
    seen.setdefault(os.stat(p).st_ino, i)
    repo.compact()
    if os.stat(p).st_ino in seen:
        break
''')
    session = root / "sessions" / "s.jsonl"
    before = session.read_bytes()
    as_if_restarted(root)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        repo = TinyDBRepository(root)
        assert len(repo.get_steps("s")) >= 2 and repo.verify() == []
        repo.close()
    assert session.read_bytes() == before


def test_replay_after_a_kill_syncs_what_the_log_covered_before_removing_it(tmp_path, monkeypatch):
    """Killed, not stopped: nothing is missing, but the appends may be only in the page cache."""
    root = tmp_path / "store"
    TinyDBRepository(root).close()
    killed_after(root, 'for i in range(1, 4):\n    group(repo, "s", i, f"resolved {i}")')
    (log,) = (root / "wal").glob("*.log")
    order: list[str] = []
    record_syncs(monkeypatch, order, label="sync")
    real_unlink = Path.unlink
    monkeypatch.setattr(Path, "unlink", lambda self, *a, **k: (order.append("unlink " + self.name),
                                                               real_unlink(self, *a, **k))[1])
    repo = TinyDBRepository(root)
    assert not log.exists() and f"unlink {log.name}" in order
    assert "sync" in order[:order.index(f"unlink {log.name}")]
    assert [s.content for s in repo.get_steps("s")] == ["resolved 1", "resolved 2", "resolved 3"]
    repo.close()


def test_a_log_whose_process_dies_during_a_checkpoint_is_kept(tmp_path):
    """A checkpoint removes only the dead logs it found before its sync: a process that commits during
    the sync and dies keeps its log (the sync need not have covered its appends)."""
    root = tmp_path / "store"
    repo = TinyDBRepository(root)
    if not repo._syncfs.available:
        pytest.skip("checkpoints here fsync each file; no dead log is removed by them")
    _group(repo, ["mine"], "mine")
    real = repo._syncfs

    class SyncDuringWhichAnotherDies:
        available = True

        def __call__(self) -> None:
            real()
            killed_after(root, 'group(repo, "theirs", 1, "resolved during the sync")')

        def close(self) -> None:
            real.close()

    repo._syncfs = SyncDuringWhichAnotherDies()
    repo.checkpoint()
    assert len(list((root / "wal").glob("*.log"))) == 2  # ours, and the one that died during the sync
    repo._syncfs = real
    repo.close()
    reopened = TinyDBRepository(root)
    assert [s.content for s in reopened.get_steps("theirs")] == ["resolved during the sync"]
    assert not list((root / "wal").glob("*.log"))
    reopened.close()


def test_a_session_deleted_after_a_writer_was_killed_does_not_come_back(tmp_path):
    root = tmp_path / "store"
    TinyDBRepository(root).close()
    killed_after(root, 'for i in range(1, 4):\n    group(repo, "s", i, f"step {i}")')
    repo = TinyDBRepository(root)  # replays (nothing missing) and removes the dead log
    repo.delete_session("s")
    repo.close()
    again = TinyDBRepository(root)
    assert again.get_session("s") is None and again.get_steps("s") == []
    again.close()


def test_a_session_deleted_by_the_process_that_wrote_it_does_not_come_back_after_a_stop(tmp_path):
    root = tmp_path / "store"
    TinyDBRepository(root).close()
    killed_after(root, '''
for i in range(1, 4):
    group(repo, "s", i, f"step {i}")
repo.delete_session("s")  # its log is checkpointed first: no record of "s" is left to replay
group(repo, "other", 1, "after the delete")
''')
    (log,) = (root / "wal").glob("*.log")
    assert not [r for r in wal.records(log.read_bytes()) if r.name == "sessions/s.jsonl"]
    repo = TinyDBRepository(root)
    assert repo.get_steps("s") == [] and [s.content for s in repo.get_steps("other")] == ["after the delete"]
    repo.close()


def test_a_forked_child_that_closes_the_store_leaves_its_parents_log_alone(tmp_path):
    root = tmp_path / "store"
    repo = TinyDBRepository(root)
    _group(repo, ["parent"], "before the fork")
    (parent_log,) = (root / "wal").glob("*.log")
    pid = os.fork()
    if pid == 0:
        repo.close()  # as the child's interpreter exit would
        os._exit(0)
    os.waitpid(pid, 0)
    assert parent_log.exists() and list(wal.records(parent_log.read_bytes()))
    _group(repo, ["parent"], "after the fork")
    assert [r.name for r in wal.records(parent_log.read_bytes())].count("sessions/parent.jsonl") == 2
    repo.close()


def test_opening_and_closing_a_store_leaves_no_descriptor_open(tmp_path):
    root = tmp_path / "store"
    TinyDBRepository(root).close()
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        TinyDBRepository(root).close()
    assert len(os.listdir("/proc/self/fd")) == before


def test_a_session_deleted_while_its_writer_lives_stays_deleted_when_the_writer_is_killed(tmp_path):
    """The writer's log still holds the session's first append when it is killed: from this boot the
    page cache is whole, so the log is synced and removed, never replayed."""
    root = tmp_path / "store"
    TinyDBRepository(root).close()
    with writer_living_on(root, 'group(repo, "s", 1, "secret")'):
        repo = TinyDBRepository(root)
        repo.delete_session("s")
        repo.close()
    again = TinyDBRepository(root)
    assert again.get_session("s") is None and again.get_steps("s") == []
    again.close()


def test_after_a_stop_the_last_file_made_under_a_name_is_the_one_restored(tmp_path):
    """P1 writes s and lives on; s is deleted; P3 makes s again; the machine stops (both logs left, and
    s's directory entry lost): the replay restores P3's s, not P1's deleted one."""
    root = tmp_path / "store"
    TinyDBRepository(root).close()
    with writer_living_on(root, 'group(repo, "s", 1, "OLD deleted")'):
        repo = TinyDBRepository(root)
        repo.delete_session("s")
        repo.close()
        killed_after(root, 'group(repo, "s", 1, "NEW 1")\ngroup(repo, "s", 2, "NEW 2")')
    assert len(list((root / "wal").glob("*.log"))) == 2
    (root / "sessions" / "s.jsonl").unlink()  # its directory entry never reached the disk
    as_if_restarted(root)
    again = TinyDBRepository(root)
    assert [s.content for s in again.get_steps("s")] == ["NEW 1", "NEW 2"]
    again.close()


def test_without_inode_generations_a_group_is_synced_without_the_log(tmp_path, monkeypatch):
    """Where the filesystem reports no generation (overlayfs, tmpfs), a replay could not tell a file
    from the next one given its inode number: those groups are made durable the way they were before."""
    from agio_notebook.storage import journal

    monkeypatch.setattr(journal, "file_identity", lambda fd: (os.fstat(fd).st_ino, 0))
    calls: list[str] = []
    record_syncs(monkeypatch, calls, names=("syncfs", "fsync"))
    repo = TinyDBRepository(tmp_path / "store")
    _group(repo, ["a", "b"], "no generation here")
    assert calls and not (tmp_path / "store" / "wal").exists()
    assert [s.content for s in repo.get_steps("a")] == ["no generation here"]
    repo.close()


def test_a_store_this_process_may_only_read_still_opens(tmp_path):
    root = tmp_path / "store"
    repo = TinyDBRepository(root)
    repo.commit(steps=[Step(session_id="s", run_id="r", sequence=1, role=StepRole.USER, content="hi")])
    repo.close()
    killed_after(root, 'group(repo, "s", 2, "logged")')  # a dead log is waiting
    for path in [root, *root.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            if os.geteuid() == 0:  # root may write anyway: make the lock file fail as a read-only mount would
                import agio_notebook.storage.tinydb_repo as tinydb_repo

                class ReadOnly(tinydb_repo.FileLock):
                    def __enter__(self):
                        raise PermissionError(13, "Permission denied")
                real_lock = tinydb_repo.FileLock
                tinydb_repo.FileLock = ReadOnly
                try:
                    repo = TinyDBRepository(root)
                finally:
                    tinydb_repo.FileLock = real_lock
            else:
                repo = TinyDBRepository(root)
            assert [s.content for s in repo.get_steps("s")] == ["hi", "logged"]
        assert any("were not replayed" in str(w.message) for w in seen)
    finally:
        for path in [root, *root.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)


def test_a_file_replay_cannot_write_keeps_the_logs_for_later_and_says_so(tmp_path, monkeypatch):
    root = tmp_path / "store"
    TinyDBRepository(root).close()
    before = {p: p.stat().st_size for p in root.rglob("*.jsonl")}
    delivered = written_then_killed(root, 30)
    lose_page_cache(root, before, random.Random(7))
    as_if_restarted(root)
    real = wal._write_all

    def refused(fd, data, offset):
        if os.readlink(f"/proc/self/fd/{fd}").endswith("index.jsonl"):
            raise PermissionError(13, "Permission denied")
        return real(fd, data, offset)

    monkeypatch.setattr(wal, "_write_all", refused)
    with pytest.warns(UserWarning, match="could not be replayed into index.jsonl"):
        TinyDBRepository(root).close()
    (log,) = (root / "wal").glob("*.log")
    dead = wal.DeadLogs(root)
    assert len(dead.logs) == 1  # kept, and not held by the process that tried
    dead.release()
    monkeypatch.setattr(wal, "_write_all", real)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stored = stored_ids(root, delivered)  # a process that may write replays it all
    assert all(ids <= stored[name] for name, ids in delivered.items()) and not log.exists()


def test_a_log_that_cannot_grow_makes_the_files_durable_instead(tmp_path, monkeypatch):
    monkeypatch.setattr(wal, "FIRST_SIZE", 2048)
    first_size = wal.WriteAheadLog._grow

    def full_disk(self, size):
        if self._size:
            raise OSError(28, "No space left on device")
        first_size(self, size)

    monkeypatch.setattr(wal.WriteAheadLog, "_grow", full_disk)
    repo = TinyDBRepository(tmp_path / "store")
    for i in range(20):
        _group(repo, ["a", "b"], f"step {i} " + "x" * 300)  # every group succeeds
    assert repo._wal.checkpoints >= 5 and len(repo.get_steps("a")) == 20
    repo.close()


def test_a_store_dropped_without_close_leaves_a_log_the_next_opener_syncs_and_removes(tmp_path):
    import gc

    root = tmp_path / "store"
    repo = TinyDBRepository(root)
    _group(repo, ["s"], "dropped")
    (log,) = (root / "wal").glob("*.log")
    wal_of_repo = repo._wal
    del repo
    wal_of_repo = None  # noqa: F841 - the last reference
    gc.collect()
    dead = wal.DeadLogs(root)
    assert len(dead.logs) == 1  # its descriptor (and lock) went with it
    dead.release()
    again = TinyDBRepository(root)
    assert not log.exists() and [s.content for s in again.get_steps("s")] == ["dropped"]
    again.close()
