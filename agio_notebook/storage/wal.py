"""A write-ahead log: a group of appends to many store files made durable by one small sync.

A group commit appends to many files (one session file per run, and the index). Making them durable
file by file costs a flush each; ``syncfs`` costs one flush but writes back everything dirty on the
filesystem, so its time depends on what else was written there (tens of milliseconds on a disk busy
with other files). Here each group's appends are also copied into this process's log, a file written
in place, and only the log is synced (``fdatasync``): its cost depends on the group alone.

The store files are brought to disk later, all at once, by a checkpoint (``syncfs``, or each file's
fsync where that is missing): when the log is full, when the writer has been idle for a moment, and
when the store is closed. After a checkpoint the log starts over.

If the machine stops before a checkpoint, the next process to open the store replays the logs of
processes that are gone (a log's ``flock`` is held while its process lives): each record's bytes go
back where they were appended, where the file lacks them. A record whose file was replaced since
(another inode: a compaction) or deleted (a gap before the record) is left alone: what it held was
made durable by the rewrite, or deleted on purpose.

Log layout: records one after another from the start; each is a header (``_HEADER``: magic,
generation, checksum, offset, inode, path length, payload length), the file's path relative to the
store, and the bytes appended. A checkpoint increments the generation: records of an older one, or
a bad checksum, end the log.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import struct
import threading
import zlib
from pathlib import Path
from typing import Callable, Iterable

from .journal import fsync_dir

_MAGIC = b"AGWL"
_HEADER = struct.Struct("<4sIIQQHI")  # magic, generation, crc32, offset, inode, path length, payload length
# A log is written with zeros before use and then overwritten in place, so a sync of it never changes
# its size. It starts small (a process's first commit pays little) and doubles as it fills, up to
# LOG_SIZE; a full log is checkpointed and starts over.
FIRST_SIZE = 256 * 1024
LOG_SIZE = 8 * 1024 * 1024

Append = tuple[Path, int, int, bytes]  # file, offset, inode, bytes


def _pack(generation: int, name: bytes, offset: int, inode: int, data: bytes) -> bytes:
    crc = zlib.crc32(data, zlib.crc32(name, zlib.crc32(struct.pack("<QQ", offset, inode))))
    return _HEADER.pack(_MAGIC, generation, crc, offset, inode, len(name), len(data)) + name + data


def _record(generation: int, root: Path, append: Append) -> bytes:
    path, offset, inode, data = append
    return _pack(generation, str(path.relative_to(root)).encode(), offset, inode, data)


def _records(raw: bytes) -> Iterable[tuple[str, int, int, bytes]]:
    """The valid records of one generation, in order: (relative path, offset, inode, bytes)."""
    pos, generation = 0, None
    while pos + _HEADER.size <= len(raw):
        magic, gen, _crc, offset, inode, name_len, data_len = _HEADER.unpack_from(raw, pos)
        end = pos + _HEADER.size + name_len + data_len
        if magic != _MAGIC or (generation is not None and gen != generation) or end > len(raw):
            return
        name = raw[pos + _HEADER.size:pos + _HEADER.size + name_len]
        data = raw[pos + _HEADER.size + name_len:end]
        if _pack(gen, name, offset, inode, data) != raw[pos:end]:
            return  # a record cut short by the crash: it was never reported durable
        generation = gen
        if name_len:  # an empty name marks a checkpoint: nothing to replay
            yield name.decode(), offset, inode, data
        pos = end


class WriteAheadLog:
    """This process's log for one store (``<store>/wal/<pid>-<random>.log``), created on first use."""

    def __init__(self, root: Path, checkpoint: Callable[[list[Path]], None]):
        self.root = root
        self._checkpoint_files = checkpoint  # makes the given store files durable (syncfs or fsyncs)
        self._dir = root / "wal"
        self._fd: int | None = None
        self._path: Path | None = None
        self._generation = 1
        self._cursor = 0
        self._size = 0  # bytes of the log written with zeros (and synced)
        self._pid = 0  # the process that opened the log (a forked child opens its own)
        self._touched: dict[Path, None] = {}  # files appended since the last checkpoint (ordered set)
        self._lock = threading.Lock()
        self.syncs = 0  # the log's fdatasyncs (figures for the benchmark)
        self.checkpoints = 0

    def _open(self) -> int:
        if self._fd is not None and self._pid != os.getpid():
            os.close(self._fd)  # the parent's log (its lock stays with the parent): this process needs its own
            self._fd = self._path = None
            self._cursor, self._generation = 0, 1
        if self._fd is None:
            self._dir.mkdir(exist_ok=True)
            while True:
                path = self._dir / f"{os.getpid()}-{secrets.token_hex(4)}.log"
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
                fcntl.flock(fd, fcntl.LOCK_EX)  # held while this process lives: replayers leave it alone
                try:
                    if os.stat(path).st_ino == os.fstat(fd).st_ino:
                        break
                except FileNotFoundError:
                    pass
                os.close(fd)  # a replayer took it for a dead process's (empty) log before the lock: again
            self._fd, self._path, self._size, self._pid = fd, path, 0, os.getpid()
            self._grow(min(FIRST_SIZE, LOG_SIZE))
            fsync_dir(self._dir)
        return self._fd

    def _grow(self, size: int) -> None:
        """Zeros up to ``size``, synced: later syncs of the log then write data only."""
        assert self._fd is not None
        os.pwrite(self._fd, b"\0" * (size - self._size), self._size)
        os.fsync(self._fd)
        self._size = size

    def log(self, appends: list[Append]) -> None:
        """Make ``appends`` (already written to their files) durable: one write and one fdatasync."""
        if not appends:
            return
        with self._lock:
            fd = self._open()
            for path, *_ in appends:
                self._touched[path] = None
            data = b"".join(_record(self._generation, self.root, a) for a in appends)
            if self._cursor + len(data) > self._size and self._size < LOG_SIZE:
                self._grow(min(LOG_SIZE, max(2 * self._size, self._cursor + len(data))))
            if self._cursor + len(data) > self._size:
                self._checkpoint_locked()  # the log is full: the files themselves are synced, this group's too
                return
            os.pwrite(fd, data, self._cursor)
            os.fdatasync(fd)
            self.syncs += 1
            self._cursor += len(data)

    def checkpoint(self) -> None:
        """Bring every file appended since the last checkpoint to disk; the log starts over."""
        with self._lock:
            if self._touched:
                self._checkpoint_locked()

    def _checkpoint_locked(self) -> None:
        self._checkpoint_files(list(self._touched))
        self._touched.clear()
        self._generation += 1
        # a header of the new generation at the start: what follows it (the old records) is not replayed
        assert self._fd is not None
        marker = _pack(self._generation, b"", 0, 0, b"")
        os.pwrite(self._fd, marker, 0)
        os.fdatasync(self._fd)
        self._cursor = len(marker)
        self.checkpoints += 1

    def close(self) -> None:
        """Checkpoint and remove the log (a store closed cleanly leaves none)."""
        with self._lock:
            if self._fd is None:
                return
            if self._touched:
                self._checkpoint_locked()
            assert self._path is not None
            self._path.unlink(missing_ok=True)
            os.close(self._fd)
            self._fd = self._path = None


def _dead_logs(root: Path) -> list[tuple[Path, int]]:
    """The logs whose process is gone, each opened and locked (so no other replayer takes it)."""
    try:
        names = sorted((root / "wal").iterdir())
    except FileNotFoundError:
        return []
    dead: list[tuple[Path, int]] = []
    for path in names:
        if path.suffix != ".log":
            continue
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)  # its process is alive
            continue
        dead.append((path, fd))
    return dead


def _remove(root: Path, dead: list[tuple[Path, int]]) -> None:
    for path, fd in dead:
        path.unlink(missing_ok=True)
        os.close(fd)
    if dead:
        fsync_dir(root / "wal")


def forget_dead_logs(root: Path) -> None:
    """Remove the logs of processes that are gone, once everything they covered is on disk (after a
    ``syncfs``: a process that was killed left its appends in the page cache, and they are written now)."""
    _remove(root, _dead_logs(root))


def replay_dead_logs(root: Path) -> int:
    """Replay the logs of processes that are gone, then remove them; returns the records replayed.

    Run before anything else writes to the store (on open). A record's bytes are written only where
    the file lacks them (see :func:`_restore`). Each file replayed is fsynced before its log is removed.
    """
    dead = _dead_logs(root)
    records: list[tuple[str, int, int, bytes]] = []
    for _, fd in dead:
        with os.fdopen(os.dup(fd), "rb") as f:
            records.extend(_records(f.read()))
    replayed = 0
    touched: set[Path] = set()
    recreated: set[Path] = set()
    for name, offset, inode, data in sorted(records, key=lambda r: (r[0], r[1])):
        target = root / name
        if _restore(target, offset, inode, data, recreated):
            replayed += 1
            touched.add(target)
    for target in touched:
        fd = os.open(target, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    for directory in {t.parent for t in touched}:
        fsync_dir(directory)
    _remove(root, dead)
    return replayed


def _restore(target: Path, offset: int, inode: int, data: bytes, recreated: set[Path]) -> bool:
    """Write a record's bytes back where its file lacks them; whether anything was written."""
    try:
        st = os.stat(target)
    except FileNotFoundError:
        if offset != 0:
            return False  # deleted on purpose (a gap no log holds): not brought back
        recreated.add(target)  # created after the last checkpoint, and its directory entry was lost
        st = None
    if st is not None and st.st_ino != inode and target not in recreated:
        return False  # replaced since (a compaction): the rewrite made what it held durable
    size = st.st_size if st is not None else 0
    if offset > size:
        return False  # a gap before it: the file was cut or rewritten since, not lost by the crash
    fd = os.open(target, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if os.pread(fd, len(data), offset) == data:
            return False  # already there
        os.pwrite(fd, data, offset)
    finally:
        os.close(fd)
    return True
