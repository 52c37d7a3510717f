"""The TinyDB store's run query: its runs in SQLite, by the columns a page filters and orders on.

The store's ``index.jsonl`` holds every run's summary; filtering and sorting those for each page would cost
a pass over every run. This index answers a page with an indexed query: the first page of 100,000 runs
reads a page of rows, not 100,000 (``bench/runs_panel_bench.py``).

It is two databases queried as one. The *snapshot* (schema ``snap``) holds the runs and sessions the run
index journal held up to some byte: the store's ``index.runs.sqlite`` attached read-only, or one built in
memory. The *overlay* (schema ``main``, in memory) holds what the journal said after that byte: each run
or session written or deleted since hides the snapshot's row of it. Which byte, and whether the snapshot
still matches the files, is :mod:`.run_index_file`'s and :mod:`.run_index_follow`'s business; this module
only stores rows and answers queries.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any, Iterable

import orjson

from .run_query import COLUMNS, FACETS, RunFilter, facets_of, run_values, where_clause

Doc = dict[str, Any]

_TABLES = (
    "CREATE TABLE {s}.runs (id TEXT PRIMARY KEY, session_id TEXT, started_at REAL NOT NULL, status TEXT, agent TEXT, "
    "notebook TEXT, owner TEXT, search TEXT)",
    # a table of their own: a text filter reads every run's row, and a document is most of its bytes
    "CREATE TABLE {s}.docs (id TEXT PRIMARY KEY, doc BLOB NOT NULL)",
    "CREATE TABLE {s}.sessions (id TEXT PRIMARY KEY, file TEXT)",
)
_INDEXES = (
    "CREATE INDEX {s}.runs_started ON runs (started_at, id)",
    "CREATE INDEX {s}.runs_status ON runs (status, started_at, id)",
    "CREATE INDEX {s}.runs_agent ON runs (agent, started_at, id)",
    "CREATE INDEX {s}.runs_notebook ON runs (notebook, started_at, id)",
    "CREATE INDEX {s}.runs_owner ON runs (owner, started_at, id)",
    "CREATE INDEX {s}.runs_session ON runs (session_id, started_at, id)",
)
_RUN = f"({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"
_ORDER = "ORDER BY started_at DESC, id DESC"


class SnapshotUnreadable(Exception):
    """SQLite could not read the attached snapshot (a damaged or cut file): it is to be rebuilt."""


def create(db: sqlite3.Connection, schema: str, runs: Iterable[Doc], sessions: Iterable[Doc]) -> None:
    """The tables of ``schema``, filled with ``runs`` and ``sessions`` (index records); the indexes are made
    after the rows (one sort each, not a tree grown row by row)."""
    for statement in _TABLES:
        db.execute(statement.format(s=schema))
    runs = list(runs)
    db.executemany(f"INSERT OR REPLACE INTO {schema}.runs {_RUN}", map(run_values, runs))
    db.executemany(f"INSERT OR REPLACE INTO {schema}.docs VALUES (?, ?)", ((d["id"], orjson.dumps(d)) for d in runs))
    db.executemany(f"INSERT OR REPLACE INTO {schema}.sessions VALUES (?, ?)",
                   ((d["session_id"], d.get("file")) for d in sessions))
    for statement in _INDEXES:
        db.execute(statement.format(s=schema))


class RunIndex:
    """A snapshot and an overlay of runs and sessions, queried as one; ``apply`` is a journal's feed."""

    def __init__(self, snapshot: str | None = None, runs: Iterable[Doc] = (), sessions: Iterable[Doc] = ()):
        """``snapshot``: the URI of an SQLite file to attach read-only; None: one in memory, holding ``runs``
        and ``sessions`` (index records)."""
        self._db = sqlite3.connect(":memory:", check_same_thread=False, uri=True, isolation_level=None)
        self._lock = threading.Lock()
        create(self._db, "main", (), ())
        self._db.execute("CREATE TABLE main.hidden (id TEXT PRIMARY KEY)")  # runs the overlay speaks for
        self._db.execute("CREATE TABLE main.hidden_sessions (id TEXT PRIMARY KEY)")
        try:
            self._db.execute("ATTACH DATABASE ? AS snap", (snapshot or ":memory:",))
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise SnapshotUnreadable(str(exc)) from None
        self._db.execute("PRAGMA snap.cache_size = -65536")  # up to 64 MiB of its pages kept: a text filter reads them all
        if snapshot is None:
            self._db.execute("BEGIN")
            create(self._db, "snap", runs, sessions)
            self._db.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- the overlay ----------------------------------------------------------------------------
    def apply(self, table: str, key: str, doc: Doc | None) -> None:
        """A run or session record the journal holds after the snapshot: written (``doc``) or deleted (None)."""
        with self._lock:
            if table == "runs":
                self._db.execute("INSERT OR IGNORE INTO main.hidden VALUES (?)", (key,))
                if doc is None:
                    self._db.execute("DELETE FROM main.runs WHERE id = ?", (key,))
                    self._db.execute("DELETE FROM main.docs WHERE id = ?", (key,))
                else:
                    self._db.execute(f"INSERT OR REPLACE INTO main.runs {_RUN}", run_values(doc))
                    self._db.execute("INSERT OR REPLACE INTO main.docs VALUES (?, ?)", (key, orjson.dumps(doc)))
            elif table == "sessions":
                self._db.execute("INSERT OR IGNORE INTO main.hidden_sessions VALUES (?)", (key,))
                if doc is None:
                    self._db.execute("DELETE FROM main.sessions WHERE id = ?", (key,))
                else:
                    self._db.execute("INSERT OR REPLACE INTO main.sessions VALUES (?, ?)", (key, doc.get("file")))

    def merge_into(self, path: Path) -> None:
        """Write the overlay into ``path``: a copy of this index's snapshot file, or an empty one (an unfinished
        temp file: no rollback journal, no sync; the caller syncs it before it takes the snapshot's name)."""
        with self._lock:
            self._db.execute("ATTACH DATABASE ? AS dest", (str(path),))
            try:
                self._db.execute("PRAGMA dest.journal_mode = OFF")
                self._db.execute("PRAGMA dest.synchronous = OFF")
                self._db.execute("BEGIN")
                for table in ("runs", "docs"):
                    self._db.execute(f"DELETE FROM dest.{table} WHERE id IN (SELECT id FROM main.hidden)")
                    self._db.execute(f"INSERT INTO dest.{table} SELECT * FROM main.{table}")
                self._db.execute("DELETE FROM dest.sessions WHERE id IN (SELECT id FROM main.hidden_sessions)")
                self._db.execute("INSERT INTO dest.sessions SELECT * FROM main.sessions")
                self._db.execute("COMMIT")
            finally:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                self._db.execute("DETACH DATABASE dest")

    # -- queries --------------------------------------------------------------------------------
    def _rows(self, sql: str, params: Iterable[Any]) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._db.execute(sql, tuple(params)).fetchall()
            except sqlite3.DatabaseError as exc:  # our own statements are right: the file is not
                raise SnapshotUnreadable(str(exc)) from None

    def read_snapshot(self, sql: str) -> list[tuple[Any, ...]]:
        """Rows of a query of the snapshot alone (what :mod:`.run_index_file` keeps there beside the runs)."""
        return self._rows(sql, ())

    def page(self, where: RunFilter, limit: int, cursor: str | None) -> list[Doc]:
        """Up to ``limit`` runs matching ``where`` after ``cursor``, newest first: two indexed reads, merged."""
        clause, params = where_clause(where, cursor)
        hide = f"{' AND' if clause else ' WHERE'} id NOT IN (SELECT id FROM main.hidden)"
        ids = [r[1] for r in self._rows(f"SELECT started_at, id FROM snap.runs{clause}{hide} UNION ALL "
                                        f"SELECT started_at, id FROM main.runs{clause} {_ORDER} LIMIT ?",
                                        (*params, *params, limit))]
        marks = ", ".join("?" * len(ids))
        docs = dict(self._rows(f"SELECT id, doc FROM main.docs WHERE id IN ({marks})", ids))  # the overlay's first
        rest = [i for i in ids if i not in docs]
        if rest:
            docs.update(self._rows(f"SELECT id, doc FROM snap.docs WHERE id IN ({', '.join('?' * len(rest))})", rest))
        try:
            found = [orjson.loads(docs[i]) for i in ids]
        except (KeyError, orjson.JSONDecodeError) as exc:  # a row without its document, or not one
            raise SnapshotUnreadable(f"a run's document is missing or damaged ({exc!r})") from None
        if any(not isinstance(d, dict) or d.get("id") != i for d, i in zip(found, ids)):
            raise SnapshotUnreadable("a run's document is not that run's")
        return found

    def facets(self, limit: int) -> dict[str, list[str]]:
        """The first ``limit`` values of each filter, sorted: in the snapshot, one indexed look per value (not a
        pass over every run), each kept if a run the overlay does not hide has it; then the overlay's."""
        found: dict[str, set[str]] = {}
        for name, column in FACETS.items():
            values: list[str] = []
            last: str | None = None
            while len(values) < limit:
                after = "IS NOT NULL" if last is None else "> ?"
                row = self._rows(f"SELECT {column} FROM snap.runs WHERE {column} {after} ORDER BY {column} LIMIT 1",
                                 () if last is None else (last,))
                if not row:
                    break
                last = row[0][0]
                if self._rows(f"SELECT 1 FROM snap.runs WHERE {column} = ? AND id NOT IN (SELECT id FROM main.hidden) "
                              "LIMIT 1", (last,)):
                    values.append(last)  # type: ignore[arg-type]
            values += [r[0] for r in self._rows(f"SELECT DISTINCT {column} FROM main.runs WHERE {column} IS NOT NULL",
                                                ())]
            found[name] = set(sorted(set(values))[:limit])
        return facets_of(found, limit)

    def running_sessions(self, session_id: str | None = None) -> set[str]:
        """Sessions with a run whose record says ``running`` (of ``session_id`` only, if given)."""
        only = "" if session_id is None else " AND session_id = ?"
        args = () if session_id is None else (session_id,)
        rows = self._rows(f"SELECT session_id FROM snap.runs WHERE status = 'running'{only} AND id NOT IN "
                          f"(SELECT id FROM main.hidden) UNION SELECT session_id FROM main.runs WHERE status = "
                          f"'running'{only}", (*args, *args))
        return {r[0] for r in rows}

    def session_files(self) -> set[str]:
        """The session files the index names (``file`` of each session record)."""
        rows = self._rows("SELECT file FROM snap.sessions WHERE id NOT IN (SELECT id FROM main.hidden_sessions) "
                          "UNION SELECT file FROM main.sessions", ())
        return {r[0] for r in rows if r[0]}
