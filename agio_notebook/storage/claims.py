"""Session claims across processes: a lease file beside the session's journal, held with ``flock``.

A run holds ``sessions/<session>.claim`` locked (``flock``) for as long as it runs; the file names
the holder (pid, host, what it runs, since when). The kernel drops the lock when the holder dies
(kill -9, kernel restart), so a dead holder's claim is simply taken over by the next claimer, and
a run still marked ``running`` in an unclaimed session is known to be interrupted.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import orjson

from ..core import SessionBusyError

# a prober (``holder``) takes the lock for microseconds; a claimer retries this long before
# concluding that a run holds it
_GRACE = 0.2


@dataclass(frozen=True)
class Holder:
    """Who holds (or last held) a session, from its lease file."""

    pid: int | None = None
    host: str | None = None
    what: str | None = None
    since: float | None = None

    def describe(self) -> str:
        if self.pid is None:
            return "another process"
        since = (datetime.fromtimestamp(self.since, timezone.utc).strftime(" since %H:%M:%S UTC")
                 if self.since else "")
        what = f"{self.what} " if self.what else ""
        return f"{what}in process {self.pid} on {self.host}{since}"


def _read(fd: int) -> Holder:
    try:
        raw = os.pread(fd, 4096, 0)
        d = orjson.loads(raw) if raw.strip() else {}
    except (OSError, orjson.JSONDecodeError):
        d = {}
    return Holder(d.get("pid"), d.get("host"), d.get("what"), d.get("since"))


class ClaimFiles:
    """The claims this process holds, by session id (one open, locked file descriptor each)."""

    def __init__(self) -> None:
        self._held: dict[str, int] = {}

    def claim(self, session_id: str, path: Path, what: str) -> Holder | None:
        """Take the claim or raise :class:`SessionBusyError` naming the holder.

        Returns the previous lease when it names a holder that died without releasing it.
        """
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + _GRACE
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = _read(fd)
                    os.close(fd)
                    raise SessionBusyError(f"session {session_id} is in use by {holder.describe()}; wait for it "
                                           "to finish, or let this run wait (ExecutionConfig.session_wait)") from None
                time.sleep(0.01)
        previous = _read(fd)
        lease = {"pid": os.getpid(), "host": socket.gethostname(), "what": what, "since": time.time()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, orjson.dumps(lease), 0)
        self._held[session_id] = fd
        return previous if previous.pid is not None else None

    def release(self, session_id: str) -> None:
        fd = self._held.pop(session_id, None)
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)  # an empty lease: released cleanly, nobody died holding it
        finally:
            os.close(fd)  # closing drops the flock

    def holds(self, session_id: str) -> bool:
        return session_id in self._held

    @staticmethod
    def holder(path: Path) -> Holder | None:
        """The live holder of a claim file, or None when nobody holds it."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return _read(fd)
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def release_all(self) -> None:
        for session_id in list(self._held):
            self.release(session_id)
