"""Group commit: durable commits made on a writer thread, concurrent ones sharing one sync.

A run's commit used to be a blocking call on the event loop that runs it: while one run's fsync
waited for the disk, every other run on that loop (a batch of 64) waited too, and the syncs went one
after another. Here a run hands its commit to the store's writer thread and awaits it; the loop
keeps serving other runs. The writer takes everything handed in since its last sync as one group
and makes it durable together (``commit_group``: one sync for all, see ``TinyDBRepository``), then
resolves each commit's future. A run still goes on (and announces the step) only once its own
commit is durable: the promise "durable before announced" is unchanged.

The time a run spends waiting for the store is measured (:class:`StoreWait`), so a timeout can
measure the run's own work rather than the disk's.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextvars
import threading
import time
import weakref
from typing import Any

Commit = dict[str, Any]  # the keyword arguments of Repository.commit
CHECKPOINT_WHEN_IDLE = 1.0  # seconds without commits before the writer checkpoints the store's log
CHECKPOINT_EVERY = 5.0  # and at least this often while it is busy
# who waits for a commit: a thread (a concurrent future), or a task (its loop and an asyncio future)
Waiter = concurrent.futures.Future | tuple[asyncio.AbstractEventLoop, asyncio.Future]


class StoreWait:
    """Seconds spent waiting for durable commits, the wait in progress included."""

    __slots__ = ("total", "since")

    def __init__(self) -> None:
        self.total = 0.0
        self.since: float | None = None

    def elapsed(self) -> float:
        since = self.since
        return self.total + (time.monotonic() - since if since is not None else 0.0)

    def begin(self) -> None:
        self.since = time.monotonic()

    def end(self) -> None:
        if self.since is not None:
            self.total += time.monotonic() - self.since
            self.since = None


store_wait: contextvars.ContextVar[StoreWait | None] = contextvars.ContextVar("agio_store_wait", default=None)


class GroupCommitter:
    """The writer thread of one repository. ``submit(**commit)`` returns a future resolved once durable."""

    def __init__(self, repository: Any):
        self._repository = weakref.ref(repository)  # the registry's key: no strong reference back to it
        self._pending: list[tuple[Commit, Waiter]] = []
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._writing = False  # a group is being written
        self.groups = 0  # syncs made (figures for the benchmark)
        self.commits = 0

    def submit(self, commit: Commit) -> concurrent.futures.Future[None]:
        """For a thread: a future resolved once the commit is durable."""
        fut: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._enqueue(commit, fut)
        return fut

    def submit_async(self, commit: Commit) -> asyncio.Future[None]:
        """For a task on the running loop: an asyncio future resolved once the commit is durable.

        A group's commits are settled on their loop with one wake-up, not one per commit: each
        wake-up costs the writer a hand-over of the GIL while the loop is busy with other runs.
        """
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self._enqueue(commit, (loop, fut))
        return fut

    def idle(self) -> bool:
        """Nothing handed in and nothing being written: a commit made elsewhere now overtakes nobody's."""
        with self._cond:
            return not self._pending and not self._writing

    def _enqueue(self, commit: Commit, waiter: Waiter) -> None:
        with self._cond:
            self._pending.append((commit, waiter))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="agio-store-writer", daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        written = False  # groups written since the last checkpoint
        checkpointed = time.monotonic()
        while True:
            with self._cond:
                while not self._pending:
                    notified = self._cond.wait(timeout=CHECKPOINT_WHEN_IDLE if written else 30.0)
                    if self._pending:
                        break
                    if not notified and written:
                        break  # idle for a moment after writing: checkpoint, outside the lock
                    if not notified:
                        self._thread = None  # idle: the thread ends, the next submit starts another
                        return
                group, self._pending = self._pending, []
                self._writing = bool(group)
            if group:
                try:
                    self._write(group)
                finally:
                    with self._cond:
                        self._writing = False
                written = True
            if not group or time.monotonic() - checkpointed >= CHECKPOINT_EVERY:
                if self._checkpoint():
                    written, checkpointed = False, time.monotonic()

    def _checkpoint(self) -> bool:
        """While nobody waits: bring what the store's write-ahead log covers to its files on disk.
        False when that failed (the log still holds it all; tried again after the next idle moment)."""
        checkpoint = getattr(self._repository(), "checkpoint", None)
        if checkpoint is not None:
            try:
                checkpoint()
            except Exception:  # noqa: BLE001
                return False
        return True

    def _write(self, group: list[tuple[Commit, Waiter]]) -> None:
        commits = [c for c, _ in group]
        repository = self._repository()
        group_commit = getattr(repository, "commit_group", None)
        if repository is None:
            outcomes: list[BaseException | None] = [RuntimeError("the store was closed")] * len(commits)
        elif group_commit is not None:
            try:
                outcomes = group_commit(commits)
            except BaseException as exc:  # noqa: BLE001 - every waiter hears it
                outcomes = [exc] * len(commits)
        else:  # a store without group commit: one commit after another, still off the event loop
            outcomes = []
            for c in commits:
                try:
                    repository.commit(**c)
                    outcomes.append(None)
                except BaseException as exc:  # noqa: BLE001
                    outcomes.append(exc)
        self.groups += 1
        self.commits += len(commits)
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future, BaseException | None]]] = {}
        for (_, waiter), outcome in zip(group, outcomes):
            if isinstance(waiter, tuple):
                by_loop.setdefault(waiter[0], []).append((waiter[1], outcome))
            elif outcome is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(outcome)
        for loop, settled in by_loop.items():
            try:
                loop.call_soon_threadsafe(_settle, settled)
            except RuntimeError:  # the loop is closed: nobody is waiting any more
                pass

    def drain(self) -> None:
        """Write what is pending now, on the calling thread (at interpreter exit)."""
        with self._cond:
            group, self._pending = self._pending, []
        if group:
            self._write(group)


def _settle(settled: list[tuple[asyncio.Future, BaseException | None]]) -> None:
    """On the waiters' loop: resolve each future of a group (a cancelled waiter is skipped)."""
    for fut, outcome in settled:
        if fut.done():
            continue
        if outcome is None:
            fut.set_result(None)
        else:
            fut.set_exception(outcome)


_committers: "weakref.WeakKeyDictionary[Any, GroupCommitter]" = weakref.WeakKeyDictionary()
_lock = threading.Lock()


enabled = True  # False: every commit is made inline by the run that needs it (the benchmark's "before")


def committer_for(repository: Any) -> GroupCommitter | None:
    """The repository's writer; None for a store without disk I/O (its commit costs a few dict writes)."""
    if not enabled or not getattr(repository, "durable", True):
        return None
    with _lock:
        try:
            committer = _committers.get(repository)
            if committer is None:
                committer = _committers[repository] = GroupCommitter(repository)
        except TypeError:  # a store object that cannot be weakly referenced commits inline
            return None
        return committer


@atexit.register
def _drain_all() -> None:
    for committer in list(_committers.values()):
        try:
            committer.drain()
        except Exception:  # noqa: BLE001 - exiting anyway
            pass
