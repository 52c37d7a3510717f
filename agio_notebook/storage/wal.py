"""A write-ahead log: a group of appends to many store files made durable by one small sync.

A group commit appends to many files (one session file per run, and the index). Making them durable
file by file costs a flush each; ``syncfs`` costs one flush but writes back everything dirty on the
filesystem, so its time depends on what else was written there (tens of milliseconds on a disk busy
with other files). Here each group's appends are also copied into this process's log, a file written
in place, and only the log is synced (``fdatasync``): its cost depends on the group alone.

The store files are brought to disk later, all at once, by a checkpoint (``syncfs``, or each file's
fsync where that is missing): when the log is full, when the writer has been idle for a moment or
busy for a few seconds, before a session file is deleted, and when the store is closed. After a
checkpoint the log starts over.

If the machine stops before a checkpoint, the next process to open the store replays the logs of
processes that are gone (a log's ``flock`` is held while its process lives) that were written before
the machine last started (a log of this boot was left by a killed process: its appends are all in
the page cache, so the log is only synced and removed). Each record's bytes go back where its file
lacks them. A file is known by its inode and the inode's generation, so a file rewritten since (a
compaction) or deleted and made again is never written into with another file's records. Replay
only fills what is missing: bytes past a file's end, or zeros (a size that reached the disk before
its data). It never writes over other data, and never past a gap.

Log layout: records one after another from the start; each is a header (``_HEADER``: magic,
generation of the log, checksum, offset, inode, inode generation, time written, path length,
payload length), the file's path relative to the store, and the bytes appended. A checkpoint increments the log's
generation: records of an older one, or a bad checksum, end the log.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import struct
import threading
import time
import weakref
import zlib
from pathlib import Path
from typing import Callable, Iterable, NamedTuple

from .damage import Damage, report
from .durability import file_identity
from .journal import fsync_dir

_MAGIC = b"AGWL"
# magic, log generation, crc32, offset, inode, inode generation, time written (ns), path length, payload length
_HEADER = struct.Struct("<4sIIQQIQHI")
# A log is written with zeros before use and then overwritten in place, so a sync of it never changes
# its size. It starts small (a process's first commit pays little) and doubles as it fills, up to
# LOG_SIZE; a full log is checkpointed and starts over.
FIRST_SIZE = 256 * 1024
LOG_SIZE = 8 * 1024 * 1024

Identity = tuple[int, int]  # (inode, generation) of a store file


def _boot_id() -> str:
    """This boot of the machine (Linux); "" where unknown. A log from this boot was left by a process
    that died while the machine kept running: its appends are all in the page cache."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", "")
    except OSError:
        return ""


BOOT = _boot_id()


def _this_boot(log: Path) -> bool:
    return bool(BOOT) and log.name.startswith(BOOT + "-")
Append = tuple[Path, int, Identity, bytes]  # file, offset, identity, bytes


class Record(NamedTuple):
    name: str  # the file's path relative to the store
    offset: int
    identity: Identity
    written_ns: int  # wall clock: which of two files of one name was made last
    data: bytes


def _pack(generation: int, name: bytes, offset: int, identity: Identity, written_ns: int, data: bytes) -> bytes:
    inode, inode_generation = identity
    fields = struct.pack("<QQIQ", offset, inode, inode_generation, written_ns)
    crc = zlib.crc32(data, zlib.crc32(name, zlib.crc32(fields)))
    return _HEADER.pack(_MAGIC, generation, crc, offset, inode, inode_generation, written_ns, len(name),
                        len(data)) + name + data


def _record(generation: int, root: Path, append: Append, written_ns: int) -> bytes:
    path, offset, identity, data = append
    return _pack(generation, str(path.relative_to(root)).encode(), offset, identity, written_ns, data)


def records(raw: bytes) -> Iterable[Record]:
    """The valid records of a log, in order: those of its first generation, up to the first bad one."""
    pos, generation = 0, None
    while pos + _HEADER.size <= len(raw):
        magic, gen, _crc, offset, inode, inode_gen, written_ns, name_len, data_len = _HEADER.unpack_from(raw, pos)
        end = pos + _HEADER.size + name_len + data_len
        if magic != _MAGIC or (generation is not None and gen != generation) or end > len(raw):
            return
        name = raw[pos + _HEADER.size:pos + _HEADER.size + name_len]
        data = raw[pos + _HEADER.size + name_len:end]
        if _pack(gen, name, offset, (inode, inode_gen), written_ns, data) != raw[pos:end]:
            return  # a record cut short by the stop: it was never reported durable
        generation = gen
        if name_len:  # an empty name marks a checkpoint: nothing to replay
            yield Record(name.decode(), offset, (inode, inode_gen), written_ns, data)
        pos = end


class WriteAheadLog:
    """This process's log for one store (``<store>/wal/<boot id>-<pid>-<random>.log``), made on first use.

    ``make_durable(files)`` brings the given store files to disk (a checkpoint's work: ``syncfs``, or
    each file's fsync)."""

    def __init__(self, root: Path, make_durable: Callable[[list[Path]], None]):
        self.root = root
        self._make_durable = make_durable
        self._dir = root / "wal"
        self._fd: int | None = None
        self._path: Path | None = None
        self._pid = 0  # the process that opened the log (a forked child opens its own)
        self._generation = 1
        self._cursor = 0
        self._size = 0  # bytes of the log written with zeros (and synced)
        self._touched: dict[Path, None] = {}  # files appended since the last checkpoint (ordered set)
        self._finalizer: weakref.finalize | None = None
        self._lock = threading.Lock()
        self.syncs = 0  # the log's fdatasyncs (figures for the benchmark)
        self.checkpoints = 0

    def _leave_inherited(self) -> None:
        """In a forked child: let go of the parent's log without touching it (its lock stays the parent's)."""
        if self._fd is not None and self._pid != os.getpid():
            if self._finalizer is not None:
                self._finalizer.detach()
            os.close(self._fd)
            self._fd = self._path = None
            self._cursor, self._size, self._generation = 0, 0, 1
            self._touched.clear()

    def _open(self) -> int:
        self._leave_inherited()
        if self._fd is None:
            if not self._dir.is_dir():
                self._dir.mkdir(exist_ok=True)
                fsync_dir(self.root)  # the folder itself survives a stop
            while True:
                path = self._dir / f"{BOOT or 'boot'}-{os.getpid()}-{secrets.token_hex(4)}.log"
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
                fcntl.flock(fd, fcntl.LOCK_EX)  # held while this process lives: replayers leave it alone
                try:
                    if os.stat(path).st_ino == os.fstat(fd).st_ino:
                        break
                except FileNotFoundError:
                    pass
                os.close(fd)  # a replayer took it for a dead process's (empty) log before the lock: again
            self._fd, self._path, self._size, self._pid = fd, path, 0, os.getpid()
            # dropped without close(): the descriptor goes, so the log is a dead one the next opener syncs
            self._finalizer = weakref.finalize(self, _close_quietly, fd)
            self._grow(min(FIRST_SIZE, LOG_SIZE))
            fsync_dir(self._dir)
        return self._fd

    def _grow(self, size: int) -> None:
        """Zeros up to ``size``, synced: later syncs of the log then write data only."""
        assert self._fd is not None
        _write_all(self._fd, b"\0" * (size - self._size), self._size)
        os.fsync(self._fd)
        self._size = size

    def log(self, appends: list[Append]) -> None:
        """Make ``appends`` (already written to their files) durable: one write and one fdatasync.

        On a filesystem without inode generations (overlayfs, tmpfs) a replay could not tell a file
        from the next one given its inode number: there the files themselves are synced instead."""
        if not appends:
            return
        if not all(generation for _, _, (_, generation), _ in appends):
            self._make_durable(list(dict.fromkeys(path for path, *_ in appends)))
            return
        with self._lock:
            fd = self._open()
            for path, *_ in appends:
                self._touched[path] = None
            now = time.time_ns()
            data = b"".join(_record(self._generation, self.root, a, now) for a in appends)
            try:
                if self._cursor + len(data) > self._size and self._size < LOG_SIZE:
                    self._grow(min(LOG_SIZE, max(2 * self._size, self._cursor + len(data))))
                if self._cursor + len(data) <= self._size:
                    _write_all(fd, data, self._cursor)
                    os.fdatasync(fd)
                    self.syncs += 1
                    self._cursor += len(data)
                    return
            except OSError:
                pass  # the log cannot take it (a full disk, a size limit): the files are synced instead
            self._checkpoint_locked()  # the files themselves are synced, this group's too; the log starts over

    def checkpoint(self) -> None:
        """Bring every file appended since the last checkpoint to disk; the log starts over."""
        with self._lock:
            self._leave_inherited()
            if self._touched:
                self._checkpoint_locked()

    def _checkpoint_locked(self) -> None:
        self._make_durable(list(self._touched))
        self._touched.clear()
        self._generation += 1
        # a header of the new generation at the start: what follows it (the old records) is not replayed
        assert self._fd is not None
        marker = _pack(self._generation, b"", 0, (0, 0), 0, b"")
        os.pwrite(self._fd, marker, 0)
        os.fdatasync(self._fd)
        self._cursor = len(marker)
        self.checkpoints += 1

    def close(self) -> None:
        """Checkpoint and remove the log (a store closed cleanly leaves none)."""
        with self._lock:
            self._leave_inherited()
            if self._fd is None:
                return
            if self._touched:
                self._checkpoint_locked()
            assert self._path is not None
            self._path.unlink(missing_ok=True)
            if self._finalizer is not None:
                self._finalizer.detach()
            os.close(self._fd)
            self._fd = self._path = None


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


class DeadLogs:
    """The logs of processes that are gone, each opened and locked (no other process takes them then).

    Taken before a ``syncfs`` (then :meth:`remove` once it returned: what they cover was in the page
    cache, and is on disk now) or to :func:`replay` them. A process that dies after the lookup keeps
    its log for the next one."""

    def __init__(self, root: Path):
        self.root = root
        self.logs: list[tuple[Path, int]] = []
        try:
            names = sorted((root / "wal").iterdir())
        except FileNotFoundError:
            return
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
            self.logs.append((path, fd))

    def records(self) -> list[tuple[bool, Record]]:
        """Every valid record of these logs, log by log, in the order written, each with whether its
        log is of this boot: such a log was left by a process that died while the machine ran on, so
        every append it covers is in the page cache (and a session deleted since must stay deleted)."""
        out: list[tuple[bool, Record]] = []
        for path, fd in self.logs:
            this_boot = _this_boot(path)
            out.extend((this_boot, r) for r in records(os.pread(fd, os.fstat(fd).st_size, 0)))
        return out

    def this_boot_only(self) -> DeadLogs:
        """Keep only the logs of this boot (a checkpoint's sync covers them; older ones need a replay)."""
        for _, fd in [log for log in self.logs if not _this_boot(log[0])]:
            os.close(fd)
        self.logs = [log for log in self.logs if _this_boot(log[0])]
        return self

    def remove(self) -> None:
        for path, fd in self.logs:
            path.unlink(missing_ok=True)
            os.close(fd)
        if self.logs:
            fsync_dir(self.root / "wal")
        self.logs = []

    def release(self) -> None:
        """Leave them for later (their locks go with the closed descriptors)."""
        for _, fd in self.logs:
            os.close(fd)
        self.logs = []


def has_logs(root: Path) -> bool:
    try:
        return any(p.suffix == ".log" for p in (root / "wal").iterdir())
    except OSError:
        return False


def replay(root: Path, make_durable: Callable[[list[Path]], None]) -> int:
    """Replay the logs of processes that are gone, make their files durable, remove the logs.

    Run before anything else writes to the store (on open, under the store's ``wal.lock``). Returns
    the records whose bytes had to be put back. Only logs of an earlier boot are replayed: a process
    killed while the machine ran on left every append in the page cache, which is synced before its
    log goes.
    """
    dead = DeadLogs(root)
    if not dead.logs:
        return 0
    try:
        by_name: dict[str, list[Record]] = {}  # what to replay: the records of earlier boots' logs
        named: dict[str, None] = {}  # every file the logs name: synced before they go
        for this_boot, record in dead.records():
            named[record.name] = None
            if not this_boot:
                by_name.setdefault(record.name, []).append(record)
        restored, failed = 0, []
        for name, found in by_name.items():
            try:
                restored += _replay_file(root / name, found)
            except OSError as exc:  # this file cannot be written here: the logs stay for a process that can
                failed.append(f"{name} ({exc.strerror or exc})")
        make_durable([root / name for name in named if (root / name).exists()])
        if failed:
            report(Damage(root / "wal", "write-ahead logs of processes that are gone could not be replayed into "
                                        f"{', '.join(failed)}; they are kept for a process that may write there"))
            return restored
        dead.remove()
        return restored
    finally:
        dead.release()  # (after remove(): nothing left to release)


def _replay_file(target: Path, found: list[Record]) -> int:
    """Put back what ``target`` lacks of its records; how many records had to be."""
    current = _identity_of(target)
    if current is None:  # lost with its directory entry (or deleted): made again only from its start
        starts = [r for r in found if r.offset == 0]
        if not starts:
            return 0
        current = max(starts, key=lambda r: r.written_ns).identity  # the last file of that name made
    mine = sorted((r for r in found if r.identity == current), key=lambda r: r.offset)
    return sum(_restore(target, r) for r in mine)


def _identity_of(path: Path) -> Identity | None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        return file_identity(fd)
    finally:
        os.close(fd)


def _restore(target: Path, record: Record) -> bool:
    """Put a record's bytes back where its file lacks them (past its end, or zeros); whether it did.
    The file is opened for writing only when something is missing."""
    try:
        with open(target, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if record.offset > size:
                return False  # a gap before it: the file was cut since, not by the stop
            f.seek(record.offset)
            there = f.read(len(record.data))
    except FileNotFoundError:
        there = b""
    if there == record.data:
        return False
    if any(have and have != want for have, want in zip(there, record.data)):
        return False  # other data: never written over
    fd = os.open(target, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        _write_all(fd, record.data, record.offset)
    finally:
        os.close(fd)
    return True


def _write_all(fd: int, data: bytes, offset: int) -> None:
    """``pwrite`` until all of ``data`` is written (a short write is retried; a full disk raises)."""
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        if n == 0:
            raise OSError(28, "No space left on device")
        view, offset = view[n:], offset + n
