"""A lock between processes (and threads) on ``<file>.lock``, cheap enough to take per commit.

``fcntl.flock`` on a lock file that stays open: taking it is a system call, not an open/close
pair (a third of a commit's time with a lock library that reopens the file each time). POSIX only.
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
    def __init__(self, path: Path, timeout: float = 10.0):
        self.path = Path(str(path) + ".lock")
        self.timeout = timeout
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

    def _lock_file(self) -> None:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + self.timeout
        delay = 0.001
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockTimeout(f"store file {str(self.path)[:-5]} is locked by another process (waited "
                                      f"{self.timeout:g}s); is another kernel stuck writing?") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)

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
