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
Only filesystems whose ``flock`` is their own do this (``native_flock``): on NFS and SMB the kernel
emulates ``flock`` with byte-range locks, which a process loses when it closes any descriptor of the
file (a reader's), so there the lock stays on a file beside the journal.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

from ..core import StoreError
from ..core.mounts import Mount, mounts


class LockTimeout(StoreError):
    pass


# filesystems whose flock(2) is a lock of their own, kept by the open file (not emulated by byte-range
# locks, as on NFS, SMB and many FUSE filesystems)
NATIVE_FLOCK = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "zfs", "f2fs", "overlay", "jfs",
                          "reiserfs", "bcachefs", "apfs", "hfs"})
_native: dict[int, bool] = {}


def filesystem_type(table: list[Mount], device: int, path: str) -> str | None:
    """The type of the filesystem holding ``path`` on ``device``: the mount with that device number,
    else the mount point that is the longest prefix of ``path`` (a btrfs subvolume's device is its own)."""
    numbers = f"{os.major(device)}:{os.minor(device)}"
    by_device = next((m.kind for m in table if m.device == numbers), None)
    under = [m for m in table if path == m.point or path.startswith(m.point.rstrip("/") + "/")]
    return by_device or (max(under, key=lambda m: len(m.point)).kind if under else None)


def native_flock(directory: Path) -> bool:
    """Whether ``flock`` is the filesystem's own where ``directory`` (or its nearest existing parent)
    lives: a journal is then locked on the file itself."""
    path = Path(os.path.abspath(directory))
    while not path.exists() and path != path.parent:
        path = path.parent
    device = os.stat(path).st_dev
    if device not in _native:
        if sys.platform == "darwin":
            _native[device] = True  # BSD flock: always the filesystem's own
        else:
            _native[device] = filesystem_type(mounts(), device, str(path.resolve())) in NATIVE_FLOCK
    return _native[device]


class FileLock:
    def __init__(self, path: Path, timeout: float = 10.0, *, on_file: bool = False):
        self.file = Path(path)
        self.on_file = on_file
        self.path = self.file if on_file else Path(str(path) + ".lock")  # the file that is locked
        self.timeout = timeout
        self._fd: int | None = None
        self._depth = 0
        self._threads = threading.RLock()

    def __enter__(self) -> FileLock:
        self._acquire(create=True)
        return self

    @contextlib.contextmanager
    def existing(self) -> Iterator[bool]:
        """Hold the lock only if the file is there: for a reader, a compaction or a delete, which must
        not make the file by locking it. Yields whether the file is there (False: nothing to do)."""
        try:
            self._acquire(create=False)
        except FileNotFoundError:
            yield False
            return
        try:
            yield self.on_file or self.file.exists()  # (a lock beside the file is there either way)
        finally:
            self.__exit__()

    def _acquire(self, *, create: bool) -> None:
        if not self._threads.acquire(timeout=self.timeout):
            raise LockTimeout(f"{self.path} is held by another thread for more than {self.timeout:g}s")
        try:
            if self._depth == 0:
                self._lock_file(create)
        except BaseException:
            self._threads.release()
            raise
        self._depth += 1

    def _open(self, create: bool) -> int:
        if not self.on_file:
            return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return os.open(self.path, os.O_RDONLY | (os.O_CREAT if create else 0), 0o644)

    def _lock_file(self, create: bool) -> None:
        deadline = time.monotonic() + self.timeout
        delay = 0.001
        while True:
            if self._fd is None:
                self._fd = self._open(create)
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
