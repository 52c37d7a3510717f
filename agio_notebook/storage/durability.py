"""One sync for many files: ``syncfs(2)`` of the filesystem a store lives on.

A group commit appends to many session files (one per run) and the index, then needs all of them on
disk. One fsync per file costs one disk flush each; ``syncfs`` writes back every dirty file of that
filesystem and flushes once. It is Linux's (glibc 2.14+); elsewhere :attr:`FilesystemSync.available`
is False and callers fsync each file. Since Linux 5.8 it reports write-back errors like fsync does.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import threading
from pathlib import Path


def _libc_syncfs():  # type: ignore[no-untyped-def]
    if not sys.platform.startswith("linux") or os.environ.get("AGIO_NO_SYNCFS"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.syncfs
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


_SYNCFS = _libc_syncfs()


class FilesystemSync:
    """``syncfs`` of the filesystem holding ``root`` (a directory fd kept open for it)."""

    def __init__(self, root: Path):
        self.root = root
        self.available = _SYNCFS is not None
        self._fd: int | None = None
        self._lock = threading.Lock()

    def __call__(self) -> None:
        with self._lock:
            if self._fd is None:
                self._fd = os.open(self.root, os.O_RDONLY)
            fd = self._fd
        syncfs(fd)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def syncfs(fd: int) -> None:
    """Everything written to ``fd``'s filesystem is on disk when this returns (raises ``OSError``)."""
    assert _SYNCFS is not None
    if _SYNCFS(fd) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"syncfs failed: {os.strerror(err)}")


_FS_IOC_GETVERSION = 0x80087601  # _IOR('v', 1, long): the inode's generation (ext4, XFS, btrfs)


def file_identity(fd: int) -> tuple[int, int]:
    """(inode, generation) of an open file. An inode number is handed out again once its file is
    deleted; its generation changes when it is, where the filesystem reports one (else 0)."""
    inode = os.fstat(fd).st_ino
    try:
        import fcntl

        generation = int.from_bytes(fcntl.ioctl(fd, _FS_IOC_GETVERSION, b"\0" * 8)[:4], sys.byteorder)
    except (OSError, ImportError):
        generation = 0
    return inode, generation
