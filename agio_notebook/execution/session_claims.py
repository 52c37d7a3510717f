"""Sessions held by runs: one run per session at a time, in this process and, through the store, across
processes (the store's claim). The runner holds a session for a run's whole life; attempts and other
short changes hold it the same way, so no run writes meanwhile."""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager, contextmanager
from typing import Any, AsyncIterator, Iterator

from ..core import SessionBusyError
from ..storage import Repository

# Sessions with a run in progress in this process: two concurrent runs in one
# session would interleave their sequences.
ACTIVE_SESSIONS: dict[str, str] = {}


CLOSING_TURNS = 8  # event-loop turns a run asks again for a session this process holds, before saying it is busy


def active_run_ids() -> set[str]:
    return set(ACTIVE_SESSIONS.values())


@asynccontextmanager
async def claimed(repository: Repository, session_id: str, wait: float | None) -> AsyncIterator[None]:
    """Hold the session for one run, in this process and through the store across processes.

    A second run meanwhile gets a clear error naming the holder, or waits up to ``wait`` seconds
    (``None``: as long as it takes) for the session to be released.
    """
    deadline = None if wait is None else time.monotonic() + wait
    turns = 0
    while True:
        held_here = session_id in ACTIVE_SESSIONS
        try:
            if held_here:
                raise SessionBusyError(f"session {session_id} already has a run in progress "
                                       f"({ACTIVE_SESSIONS[session_id]}); wait for it or cancel it")
            await off_loop(repository, repository.claim_session, session_id, "a run")
            break
        except SessionBusyError:
            # a stream of this process left a moment ago (``break`` out of ``async for``) is closed by the
            # event loop on its next turns, which lets the session go: those few turns are waited for
            turns += held_here
            if deadline is not None and time.monotonic() >= deadline and not (held_here and turns <= CLOSING_TURNS):
                raise
        await asyncio.sleep(0 if held_here and turns <= CLOSING_TURNS else 0.05)
    ACTIVE_SESSIONS[session_id] = "pending"
    try:
        yield
    finally:
        ACTIVE_SESSIONS.pop(session_id, None)
        repository.release_session(session_id)  # a store with claim files finishes it on a worker thread


async def off_loop(repository: Repository, call: Any, session_id: str, *args: Any) -> Any:
    """A store's claim call, on a worker thread when it touches files (creating a claim file waits
    for the filesystem, which a batch's other runs on this loop must not). A session this process
    released a moment ago is taken back at once, on the loop: no other process may slip in while a
    worker thread is found for the claim (a busy machine can take longer than the release lingers)."""
    if (not getattr(repository, "durable", True) or getattr(repository, "session_releasing", _never)(session_id)
            or store_calls_inline(repository, holding=False)):
        return call(session_id, *args)
    return await asyncio.to_thread(call, session_id, *args)


def store_calls_inline(repository: Repository, *, holding: bool) -> bool:
    """Whether a run makes its store calls (its claim, its commits) on its own thread, not a worker's: its
    store asks for it (``inline_when_alone``: a SQL store's call is one round trip, or one sync of its own
    log, with nothing left for a writer thread to do after it) and no other run of this process is in
    progress, so nothing waits behind the call and nothing could be grouped with it. ``holding``: the
    caller's run is already one of the runs in progress."""
    return getattr(repository, "inline_when_alone", False) and len(ACTIVE_SESSIONS) <= int(holding)


def _never(session_id: str) -> bool:
    return False


@contextmanager
def claim_session(repository: Repository, session_id: str, what: str) -> Iterator[None]:
    """Hold a session for a short synchronous change (e.g. of attempts), so no run writes meanwhile.

    Busy (a run in progress here or in another process): ``SessionBusyError`` at once, naming the holder.
    """
    if session_id in ACTIVE_SESSIONS:
        raise SessionBusyError(f"session {session_id} has a run in progress ({ACTIVE_SESSIONS[session_id]}); "
                               "wait for it or cancel it")
    repository.claim_session(session_id, what)
    ACTIVE_SESSIONS[session_id] = what
    try:
        yield
    finally:
        ACTIVE_SESSIONS.pop(session_id, None)
        repository.release_session(session_id)
