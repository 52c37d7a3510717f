"""One page of runs, newest first, filtered by the store: what the Runs panel and ``list_runs`` ask.

``Repository.query_runs(RunFilter(...), limit, cursor)`` answers on every backend with the same meaning:
runs ordered by (``started_at``, ``id``) descending, those matching every filter given, at most ``limit``,
and a cursor for the next page (keyset paging: a page never repeats or skips a run when new runs arrive
at the top meanwhile). The SQL stores filter and order in the database on indexed columns; the TinyDB
store in an index kept in memory beside its run index (:mod:`.run_index`); the in-memory store in Python.

The text filter is a case-insensitive substring of the run's query or final answer, compared on text
lower-cased by Python on every backend (a column kept for it), so all backends agree on every script.
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import orjson

from ..core import AgentRun, InvalidOperationError, RunStatus
from .ids import prefix_pattern

MAX_PAGE = 500
_RUNNING = RunStatus.RUNNING.value
_STATUSES = [s.value for s in RunStatus]


@dataclass(frozen=True)
class RunFilter:
    """Which runs: each field given must match exactly (``text``: a substring of the query or answer).

    ``user`` is the run's user: the database role that wrote it on PostgreSQL, otherwise the user its
    process ran for (``core.origin.current_user``). ``notebook`` is the notebook's path as its kernel was told.
    """

    agent: str | None = None
    status: str | None = None
    notebook: str | None = None
    user: str | None = None
    text: str | None = None
    session_id: str | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and not isinstance(value, str):
                raise InvalidOperationError(f"the {f.name} filter of runs is text, got {type(value).__name__}")
            if isinstance(value, str) and not value.strip():
                object.__setattr__(self, f.name, None)  # an empty box filters nothing
        if isinstance(self.status, RunStatus):
            object.__setattr__(self, "status", self.status.value)
        if self.status is not None and self.status not in _STATUSES:
            raise InvalidOperationError(f"no run status {self.status!r}: one of {', '.join(_STATUSES)}")

    @property
    def needle(self) -> str | None:
        """The text filter as it is compared: lower-cased."""
        return self.text.strip().lower() if self.text else None

    def columns(self) -> list[tuple[str, str]]:
        """(column, value) of each exact filter given, named as the SQL stores' columns."""
        pairs = (("agent", self.agent), ("status", self.status), ("notebook", self.notebook), ("owner", self.user),
                 ("session_id", self.session_id))
        return [(column, value) for column, value in pairs if value is not None]

    def matches(self, doc: dict[str, Any]) -> bool:
        """The same test in Python (the in-memory store)."""
        row = run_row(doc)
        if any(row[column] != value for column, value in self.columns()):
            return False
        return self.needle is None or self.needle in row["search"]


@dataclass(frozen=True)
class RunPage:
    """A page of runs, newest first; ``next_cursor`` (None: this was the last page) asks for the next."""

    runs: list[AgentRun]
    next_cursor: str | None = None


# the columns a run is filtered and ordered by (``owner``: its user; ``search``: what ``text`` looks in)
COLUMNS = ("id", "session_id", "started_at", "status", "agent", "notebook", "owner", "search")


def run_values(doc: dict[str, Any]) -> tuple[Any, ...]:
    """A run's ``COLUMNS``, from its stored document (a tuple: the TinyDB index makes 100,000 at once)."""
    return (doc["id"], doc.get("session_id"), float(doc.get("started_at") or 0.0), doc.get("status", _RUNNING),
            doc.get("agent_name"), doc.get("notebook"), doc.get("user"),
            f"{doc.get('query') or ''}\n{doc.get('final_text') or ''}".lower())


def run_row(doc: dict[str, Any]) -> dict[str, Any]:
    """A run's ``COLUMNS`` by name."""
    return dict(zip(COLUMNS, run_values(doc)))


def where_clause(where: RunFilter, cursor: str | None) -> tuple[str, list[Any]]:
    """``WHERE …`` and its parameters for a filter and a cursor (shared by every SQL run query)."""
    clauses, params = [], []
    for column, value in where.columns():
        clauses.append(f"{column} = ?")
        params.append(value)
    if where.needle is not None:
        clauses.append("search LIKE ? ESCAPE '\\'")
        params.append("%" + prefix_pattern(where.needle))  # a substring: %needle%
    if cursor is not None:
        started_at, run_id = decode_cursor(cursor)
        clauses.append("(started_at < ? OR (started_at = ? AND id < ?))")
        params += [started_at, started_at, run_id]
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


def check_limit(limit: Any) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidOperationError(f"a page of runs holds 1 to {MAX_PAGE} runs, got {limit!r}")
    return limit


def encode_cursor(run: dict[str, Any]) -> str:
    """Where the next page starts: after this run (its ``started_at`` and ``id``)."""
    key = orjson.dumps([float(run.get("started_at") or 0.0), run["id"]])
    return base64.urlsafe_b64encode(key).decode().rstrip("=")


def decode_cursor(cursor: Any) -> tuple[float, str]:
    """(started_at, id) of the run a page ends with; one clear line for anything else."""
    try:
        text = cursor + "=" * (-len(cursor) % 4)
        started_at, run_id = orjson.loads(base64.urlsafe_b64decode(text.encode()))
        if isinstance(started_at, bool) or not isinstance(started_at, (int, float)) or not isinstance(run_id, str) \
                or "\x00" in run_id:  # no store holds an id with a NUL (PostgreSQL's text cannot)
            raise ValueError
        return float(started_at), run_id
    except (TypeError, ValueError, binascii.Error, orjson.JSONDecodeError):
        raise InvalidOperationError(f"{cursor!r} is not a cursor of a page of runs (pass the next_cursor a page "
                                    "returned)") from None


def after_cursor(row: dict[str, Any], cursor: tuple[float, str] | None) -> bool:
    """Whether ``row`` comes after the cursor, newest first."""
    return cursor is None or (row["started_at"], row["id"]) < cursor


class Recheck:
    """Which of some sessions are due a look for runs left ``running`` by a process that died: each at most every
    ``every`` seconds. A page read many times a second (a live panel over a class of thirty running at once)
    otherwise tries every running session's claim at each read; a dead run is found within ``every`` seconds."""

    def __init__(self, every: float = 5.0):
        self.every = every
        self._last: dict[str, float] = {}

    def due(self, session_ids: Any) -> list[str]:
        now = time.monotonic()
        due = [s for s in sorted(set(session_ids)) if now - self._last.get(s, float("-inf")) >= self.every]
        if len(self._last) > 10_000:  # forget old looks rather than grow without end
            self._last.clear()
        self._last.update((s, now) for s in due)
        return due


def with_live_totals(doc: dict[str, Any], steps: int, tokens: int | None) -> dict[str, Any]:
    """A running run's document with the totals of the steps it has committed so far (the stored run
    document is written when the run starts and ends; its steps as they complete)."""
    metrics = dict(doc.get("metrics") or {})
    metrics["steps"] = max(int(metrics.get("steps") or 0), steps)
    if tokens is not None:
        metrics["total_tokens"] = max(int(metrics.get("total_tokens") or 0), tokens)
    return {**doc, "metrics": metrics}


# the key of a placeholder doc for a row whose document could not be read at all: it keeps the row's place
# (its ``id`` and ``started_at``) in a page, so the next page starts after it, and says why
UNREADABLE = "\x00unreadable"


def page_of(docs: list[dict[str, Any]], limit: int,
            damaged: Callable[[dict[str, Any], str], None] | None = None) -> RunPage:
    """A page from up to ``limit + 1`` docs in page order (one more than asked: there is a next page).
    ``damaged(doc, why)``: a doc that makes no run is told to it and left out (None: it raises)."""
    shown = docs[:limit]
    cursor = encode_cursor(shown[-1]) if len(docs) > limit and shown else None
    if damaged is None:
        return RunPage([AgentRun.from_dict(d) for d in shown], cursor)
    runs = []
    for doc in shown:
        try:
            if UNREADABLE in doc:
                raise ValueError(doc[UNREADABLE])
            runs.append(AgentRun.from_dict(doc))
        except Exception as exc:  # noqa: BLE001 - whatever a row's document holds, the page goes on
            damaged(doc, " ".join(str(exc).split()) or type(exc).__name__)
    return RunPage(runs, cursor)


def newest_first(docs: Any, where: RunFilter, limit: int, cursor: str | None) -> RunPage:
    """A page filtered and ordered in Python: the in-memory store's way (everything is in memory)."""
    start = decode_cursor(cursor) if cursor is not None else None
    rows = [(run_row(d), d) for d in docs]
    picked = [d for row, d in rows if after_cursor(row, start) and where.matches(d)]
    picked.sort(key=lambda d: (float(d.get("started_at") or 0.0), d["id"]), reverse=True)
    return page_of(picked[:limit + 1], limit)


def facets_of(values: dict[str, set[str]], limit: int) -> dict[str, list[str]]:
    return {name: sorted(v for v in found if v)[:limit] for name, found in values.items()}


# each filter a panel offers choices for, and the column (of ``run_row``) it reads
FACETS = {"agent": "agent", "status": "status", "notebook": "notebook", "user": "owner"}
