"""A lock between processes (and threads) on a store file, cheap enough to take per commit.

``fcntl.flock`` on a file that stays open: taking it is a system call, not an open/close pair (a
third of a commit's time with a lock library that reopens the file each time). POSIX only.

A journal is locked on the file itself (``on_file``), not on a ``<file>.lock`` beside it: one file
per journal rather than two, so a session costs the filesystem one inode fewer (file creation is
what a batch of new sessions pays most for on a disk that just freed thousands of inodes; see
docs/benchmarks.md). A file is replaced by rename (a compaction) or deleted while others wait for
its lock, so whoever takes the lock checks that the path still names the file it locked, and locks
what the path names now if not. Whoever replaces the file locks the new one before it takes the
name (``atomic_write`` with ``lock``), so the lock passes to the new file and no writer slips in.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path

from ..core import StoreError


class LockTimeout(StoreError):
    pass


class FileLock:
    def __init__(self, path: Path, timeout: float = 10.0, *, on_file: bool = False):
        self.file = Path(path)
        self.on_file = on_file
        self.path = self.file if on_file else Path(str(path) + ".lock")  # the file that is locked
        self.timeout = timeout
        self.created = False  # taking the lock made the file (its directory entry is not yet synced)
        self._fd: int | None = None
        self._depth = 0
        self._threads = threading.RLock()

    def __enter__(self) -> FileLock:
        if not self._threads.acquire(timeout=self.timeout):
            raise LockTimeout(f"{self.path} is held by another thread for more than {self.timeout:g}s")
        try:
            if self._depth == 0:
                self._lock_file()
        except BaseException:
            self._threads.release()
            raise
        self._depth += 1
        return self

    def _open(self) -> int:
        if not self.on_file:
            return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        while True:
            try:
                return os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                pass
            try:
                fd = os.open(self.path, os.O_RDONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                continue  # made by another writer a moment ago
            self.created = True
            return fd

    def _lock_file(self) -> None:
        deadline = time.monotonic() + self.timeout
        delay = 0.001
        while True:
            if self._fd is None:
                self._fd = self._open()
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockTimeout(f"store file {self.file} is locked by another process (waited "
                                      f"{self.timeout:g}s); is another kernel stuck writing?") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
                continue
            if not self.on_file or self._names_locked_file():
                return
            # replaced or deleted while we waited: what we locked is no longer the file
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def _names_locked_file(self) -> bool:
        try:
            named = os.stat(self.path)
        except FileNotFoundError:
            return False
        locked = os.fstat(self._fd)
        return (named.st_ino, named.st_dev) == (locked.st_ino, locked.st_dev)

    def adopt(self, fd: int) -> None:
        """Hold the lock by ``fd`` from now on: a file, already locked by ``fd``, that has replaced the
        one this lock held (see ``atomic_write``). Closing the old file's descriptor frees whoever
        waits for it; each finds that the path names another file now, and waits for that one."""
        if not self.on_file or self._depth == 0:
            raise RuntimeError("only a held lock on the file itself passes to the file that replaces it")
        if self._fd is not None:
            os.close(self._fd)
        self._fd = fd

    @property
    def depth(self) -> int:
        """How deeply the owning thread holds the lock (0: not held by this object)."""
        return self._depth

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        self._threads.release()

    def close(self) -> None:
        if self._fd is not None and self._depth == 0:
            os.close(self._fd)
            self._fd = None
