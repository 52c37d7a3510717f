"""The teacher's view of a class: who passed which exercise, after how many attempts, and why the others
fail; each student's latest runs.

Exercise results are what ``check()`` keeps in the store (``agio_notebook.teach.progress``): one record per
checked attempt, with the exercise, its seed, whether it passed, the reasons it failed, when, and a hash of
the solution. On a classroom's PostgreSQL store each record's user
is the role that wrote it and the teacher's role reads every student's (row-level security lets a student
read only their own); elsewhere the records are one person's. ``progress()`` is the frame, and
``dashboard()`` what the class dashboard of the Runs panel shows.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from typing import Any, Iterable

import orjson
import pandas as pd

from ..core.origin import current_user
from ..storage import RunFilter, current_store
from ..storage.base import Repository
from ..storage.damage import Damage, report
from ..teach.progress import JOURNAL, KEYS
from .roles import read_roster
COLUMNS = ("user", "exercise", "passed", "attempts", "last_reason", "last_time")


def attempts(repository: Repository | None = None) -> list[dict[str, Any]]:
    """Every checked attempt: {user, exercise, passed, reasons, time, seed, solution}, oldest first."""
    repo = current_store(repository)
    roster = read_roster(repo)
    if roster is not None:  # every role's records, as far as this role may read them
        rows: Iterable[tuple[str, Any]] = (
            (owner, _record(repo, owner, key, doc)) for owner, key, doc in
            repo.fetch("SELECT owner, key, doc FROM agio_journal WHERE name = ? AND doc IS NOT NULL",  # type: ignore[attr-defined]
                       (JOURNAL,)))
    else:
        journal = repo.journal(JOURNAL, KEYS)
        me = current_user()
        rows = [(doc.get("user") or me, doc) for table in journal.tables.values() for doc in table.values()
                if isinstance(doc, dict)]
    found = [_attempt(user, doc) for user, doc in rows if doc is not None]
    return sorted((a for a in found if a is not None), key=lambda a: a["time"])


def _record(repo: Any, owner: str, key: str, doc: Any) -> dict[str, Any] | None:
    """One exercise record as its row holds it; one that is not a record (damaged, or written by hand with
    plain SQL) is reported (``StoreDamageWarning``) and left out, never in the way of the class's others."""
    try:
        parsed = orjson.loads(doc)
        if not isinstance(parsed, dict):
            raise ValueError(f"a {type(parsed).__name__}, not an object")
        time = parsed.get("time")
        if time is not None and _seconds(time) is None:
            raise ValueError(f"its time {str(time)[:40]!r} is no time a record can have")
    except ValueError as exc:  # orjson's JSONDecodeError is a ValueError
        report(Damage(repo.root, f"the {JOURNAL} record {key!r} of {owner}: unreadable, left out "
                                 f"({' '.join(str(exc).split())[:200]})"), stacklevel=4)
        return None
    return parsed


def _attempt(user: str | None, doc: dict[str, Any]) -> dict[str, Any] | None:
    exercise = doc.get("exercise")
    if not isinstance(exercise, str) or not isinstance(doc.get("passed"), bool):
        return None  # not an exercise result
    return {"user": user, "exercise": exercise, "passed": doc["passed"], "reasons": _reasons(doc.get("reasons")),
            "time": _seconds(doc.get("time")) or 0.0, "seed": doc.get("seed"), "solution": doc.get("solution")}


def _reasons(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [] if value is None else [value]
    out = []
    for item in items:
        if isinstance(item, dict):
            item = item.get("reason") or item.get("why") or item.get("message") or ""
        text = " ".join(str(item).split())
        if text:
            out.append(text)
    return out


# the times a record may have: from 1970 to the last a frame's timestamps hold (the year 2262)
_LATEST = pd.Timestamp.max.timestamp() - 1


def _seconds(value: Any) -> float | None:
    """A record's time in seconds since 1970; 0.0 when it has none; None when it is no time (out of range)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        try:
            stamp = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
            seconds = (stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.timezone.utc)).timestamp()
        except (ValueError, OverflowError):
            return 0.0
    else:
        return 0.0
    return seconds if 0.0 <= seconds <= _LATEST else None


def summarize(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (user, exercise): passed (in any attempt), attempts, the reason of the latest failing
    attempt if the latest attempt failed, and when the latest attempt was."""
    by_cell: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for a in found:
        by_cell[(a["user"] or "", a["exercise"])].append(a)
    rows = []
    for (user, exercise), tries in sorted(by_cell.items()):
        last = tries[-1]
        rows.append({"user": user, "exercise": exercise, "passed": any(t["passed"] for t in tries),
                     "attempts": len(tries), "last_reason": None if last["passed"] else (last["reasons"] or ["failed"])[0],
                     "last_time": last["time"]})
    return rows


def failing(found: list[dict[str, Any]], top: int = 3) -> dict[str, list[dict[str, Any]]]:
    """For each exercise, its most common failing reasons: how many failed attempts gave each (an attempt whose
    scenarios fail for one reason counts once), and by how many students."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    who: dict[tuple[str, str], set[str]] = defaultdict(set)
    for a in found:
        if not a["passed"]:
            for reason in dict.fromkeys(a["reasons"] or ["failed"]):  # an attempt counts once per reason
                counts[a["exercise"]][reason] += 1
                who[(a["exercise"], reason)].add(a["user"] or "")
    return {exercise: [{"reason": r, "count": n, "students": len(who[(exercise, r)])}
                       for r, n in sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[:top]]
            for exercise, c in sorted(counts.items())}


def progress(repository: Repository | None = None) -> pd.DataFrame:
    """Student × exercise: ``user``, ``exercise``, ``passed``, ``attempts``, ``last_reason``, ``last_time``."""
    rows = summarize(attempts(repository))
    frame = pd.DataFrame({c: [r[c] for r in rows] for c in COLUMNS})
    frame["user"] = frame["user"].astype("string")
    frame["exercise"] = frame["exercise"].astype("string")
    frame["passed"] = frame["passed"].astype("boolean")
    frame["attempts"] = frame["attempts"].astype("Int64")
    frame["last_reason"] = frame["last_reason"].astype("string")
    frame["last_time"] = pd.to_datetime(frame["last_time"], unit="s", utc=True)
    return frame


def failing_reasons(repository: Repository | None = None, top: int = 3) -> pd.DataFrame:
    """For each exercise its most common failing reasons: ``exercise``, ``reason``, ``count``, ``students``."""
    rows = [{"exercise": e, **r} for e, reasons in failing(attempts(repository), top).items() for r in reasons]
    return pd.DataFrame({c: [r[c] for r in rows] for c in ("exercise", "reason", "count", "students")})


def dashboard(repository: Repository | None = None, runs_per_student: int = 5) -> dict[str, Any]:
    """What the class dashboard shows, as data: the students (the roster, or whoever has records), the
    exercises, a cell per student and exercise, the failing reasons, and each student's latest runs."""
    repo = current_store(repository)
    found = attempts(repo)
    roster = read_roster(repo)
    students = list(roster.students) if roster is not None else sorted({a["user"] or "" for a in found})
    extra = sorted({a["user"] for a in found if a["user"] and a["user"] not in students})
    students += extra  # a teacher's own tries, a former student's kept rows
    latest = {s: repo.query_runs(RunFilter(user=s), limit=runs_per_student).runs for s in students}
    return {"teacher": roster.teacher if roster is not None else None, "students": students,
            "exercises": sorted({a["exercise"] for a in found}), "cells": summarize(found),
            "failing": failing(found), "latest_runs": latest}
