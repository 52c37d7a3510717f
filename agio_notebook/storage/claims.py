"""Session claims across processes: a lease file beside the session's journal, held with ``flock``.

A run holds ``sessions/<session>.claim`` locked (``flock``) for as long as it runs; the file names
the holder (pid, host, what it runs, since when). The kernel drops the lock when the holder dies
(kill -9, kernel restart), so a dead holder's claim is simply taken over by the next claimer, and
a run still marked ``running`` in an unclaimed session is known to be interrupted.
"""

from __future__ import annotations

import concurrent.futures
import fcntl
import os
import socket
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Generic, TypeVar

import orjson

from ..core import SessionBusyError

# a prober (``holder``) takes the lock for microseconds; a claimer retries this long before
# concluding that a run holds it
GRACE = 0.2
LINGER = 0.1
_HOST = socket.gethostname()
Handle = TypeVar("Handle")


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


def _read_raw(fd: int) -> bytes:
    try:
        return os.pread(fd, 4096, 0)
    except OSError:
        return b""


def _parse(raw: bytes) -> Holder:
    try:
        d = orjson.loads(raw) if raw.strip() else {}
    except orjson.JSONDecodeError:
        d = {}
    if not isinstance(d, dict):
        d = {}
    return Holder(d.get("pid"), d.get("host"), d.get("what"), d.get("since"))


def _read(fd: int) -> Holder:
    return _parse(_read_raw(fd))


class LingeringReleases(Generic[Handle]):
    """Releases that wait ``LINGER`` on a worker thread before they are finished, by session id.

    A claim of the same session meanwhile (this process's next run of a loop) takes the pending
    release back, lock and all (``take_back``), so another process never slips in between two runs
    that follow one another here. ``finish(session_id, handle)`` drops the lock for good.

    ``guard``: a lock the finish needs anyway (a database connection's). The check that a release is
    still pending and its finish then happen under it in one piece. Without one, the check is under
    this object's own lock and the finish outside it: a claim file's finish waits for the filesystem,
    which claims of other sessions need not.
    """

    def __init__(self, finish: Callable[[str, Handle], None], *, guard: threading.RLock | None = None) -> None:
        self._finish = finish
        self._guard = guard
        self._lock = guard or threading.Lock()
        self._pending: dict[str, tuple[object, Handle]] = {}  # session id -> (this release, handle)
        self._worker: concurrent.futures.ThreadPoolExecutor | None = None

    def defer(self, session_id: str, handle: Handle) -> None:
        """Finish this release in ``LINGER`` seconds, unless the session is claimed here again first."""
        release = object()  # a handle (a file descriptor) can be released, taken back and released again
        with self._lock:
            self._pending[session_id] = (release, handle)
            if self._worker is None:
                self._worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="agio-claims")
            worker = self._worker
        try:
            worker.submit(self._finish_later, session_id, release, time.monotonic() + LINGER)
        except RuntimeError:  # interpreter shutting down: no new threads, finish here
            self._finish_later(session_id, release, 0.0)

    def take_back(self, session_id: str) -> Handle | None:
        """The session's pending release, withdrawn (still locked, ours again), or None."""
        with self._lock:
            pending = self._pending.pop(session_id, None)
        return None if pending is None else pending[1]

    def pending(self, session_id: str) -> Handle | None:
        """The handle of the session's pending release (None: nothing pending)."""
        pending = self._pending.get(session_id)
        return None if pending is None else pending[1]

    def _finish_later(self, session_id: str, release: object, not_before: float) -> None:
        delay = not_before - time.monotonic()
        if delay > 0:
            time.sleep(delay)  # releases are queued in the order they were made: deadlines in order
        with self._lock:
            pending = self._pending.get(session_id)
            if pending is None or pending[0] is not release:
                return  # claimed again meanwhile, or finished by flush()
            del self._pending[session_id]
            handle = pending[1]
            if self._guard is not None:
                self._finish(session_id, handle)
                return
        self._finish(session_id, handle)

    def flush(self) -> None:
        """Finish every pending release now, on this thread."""
        with self._lock:
            pending = list(self._pending.items())
            self._pending.clear()
        for session_id, (_, handle) in pending:
            self._finish(session_id, handle)

    def close(self) -> None:
        """Finish every pending release and let the worker thread go."""
        self.flush()
        with self._lock:
            worker, self._worker = self._worker, None
        if worker is not None:
            worker.shutdown(wait=False)


class ClaimFiles:
    """The claims this process holds, by session id (one open, locked file descriptor each).

    A release is immediate for this process (``holds`` is False at once) and finished later (see
    :class:`LingeringReleases`): emptying the lease and closing the file wait for the filesystem,
    which the run that just ended (and the event loop it ran on) need not. The lock lingers well
    inside another process's ``GRACE``.
    """

    def __init__(self) -> None:
        self._held: dict[str, int] = {}
        self._releasing = LingeringReleases(self._finish_release)

    def claim(self, session_id: str, path: Path, what: str) -> Holder | None:
        """Take the claim or raise :class:`SessionBusyError` naming the holder.

        Returns the previous lease when it names a holder that died without releasing it.
        """
        fd = self._releasing.take_back(session_id)
        if fd is not None:  # released by this process a moment ago: still locked, still ours
            self._write_lease(fd, what, b"-")
            self._held[session_id] = fd
            return None
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + GRACE
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
        raw = _read_raw(fd)
        previous = _parse(raw)
        self._write_lease(fd, what, raw)
        self._held[session_id] = fd
        return previous if previous.pid is not None else None

    @staticmethod
    def _write_lease(fd: int, what: str, old: bytes) -> None:
        lease = {"pid": os.getpid(), "host": _HOST, "what": what, "since": time.time()}
        if old:  # a new or cleanly released lease is empty already
            os.ftruncate(fd, 0)
        os.pwrite(fd, orjson.dumps(lease), 0)

    def release(self, session_id: str, *, linger: bool = True) -> None:
        """Give the claim up (``linger=False``: the lease is empty and the file closed on return)."""
        fd = self._held.pop(session_id, None)
        if fd is None:
            return
        if linger:
            self._releasing.defer(session_id, fd)
        else:
            self._finish_release(session_id, fd)

    @staticmethod
    def _finish_release(session_id: str, fd: int) -> None:
        try:
            os.ftruncate(fd, 0)  # an empty lease: released cleanly, nobody died holding it
        finally:
            os.close(fd)  # closing drops the flock

    def releasing(self, session_id: str) -> bool:
        """Released by this process, the file not yet closed (nobody holds it)."""
        return self._releasing.pending(session_id) is not None

    def flush(self) -> None:
        """Finish every pending release now, on this thread."""
        self._releasing.flush()

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
        self.flush()
