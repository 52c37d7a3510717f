"""Pruning, the same on every backend: sessions idle since a date, and superseded attempts.

Each backend deletes in its own way (a journal rewritten, rows deleted, dicts emptied); which sessions
are stale, how a busy one is skipped and what a call must ask for are decided here once.
"""

from __future__ import annotations

from datetime import date, datetime, timezone
from typing import Any, Callable

from ..core import InvalidOperationError, SessionBusyError
from .reports import Pruned


def to_timestamp(when: datetime | date | str | float | int) -> float:
    """A cutoff as a POSIX timestamp: a datetime (naive means UTC), a date, an ISO string or a number."""
    if isinstance(when, (int, float)):
        return float(when)
    if isinstance(when, str):
        try:
            when = datetime.fromisoformat(when)
        except ValueError:
            raise InvalidOperationError(f"not a date: {when!r} (use YYYY-MM-DD or an ISO date and time)") from None
    if isinstance(when, datetime):
        return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()
    return datetime(when.year, when.month, when.day, tzinfo=timezone.utc).timestamp()


def stale_sessions(repository: Any, cutoff: float) -> list[str]:
    """Sessions whose last activity (created, or a run started or ended) is before ``cutoff``."""
    last = {s.session_id: s.created_at for s in repository.list_sessions()}
    for d in repository.iter_run_dicts():
        sid = d["session_id"]
        last[sid] = max(last.get(sid, 0.0), d.get("ended_at") or d.get("started_at") or 0.0)
    return sorted(sid for sid, when in last.items() if when < cutoff)


def prune(repository: Any, *, superseded: bool, older_than: Any,
          remove_superseded: Callable[[], Pruned]) -> Pruned:
    """``Repository.prune`` for every backend: ``remove_superseded`` is the backend's own deletion of
    superseded steps and replaced runs (skipping sessions a live run holds); a busy stale session stays."""
    if not superseded and older_than is None:
        raise InvalidOperationError("prune what? pass superseded=True and/or older_than=<date>")
    total = Pruned()
    if older_than is not None:
        for session_id in stale_sessions(repository, to_timestamp(older_than)):
            try:
                total += repository.delete_session(session_id)
            except SessionBusyError:
                continue
    if superseded:
        total += remove_superseded()
    return total
