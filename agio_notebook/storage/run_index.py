"""The TinyDB store's run query: an SQLite table in memory, kept current from the store's run index.

The store's ``index.jsonl`` already holds every run's summary in memory (``Journal.tables["runs"]``);
filtering and sorting those dicts for each page would cost a pass over every run. This index follows
that journal through its ``on_change`` feed (a replay, another process's appends, a compaction's
reload) and answers a page with an indexed query: the first page of 100,000 runs reads a page of rows,
not 100,000 (``bench/runs_panel_bench.py``). It is derived data, built on the first query of a process
and never written to disk, so it can never disagree with the files.
"""

from __future__ import annotations

import sqlite3
import threading
from typing import Any, Callable, Iterable

from .run_query import COLUMNS, FACETS, RunFilter, facets_of, run_values, where_clause
_SCHEMA = (
    "CREATE TABLE runs (id TEXT PRIMARY KEY, session_id TEXT, started_at REAL NOT NULL, status TEXT, agent TEXT, "
    "notebook TEXT, owner TEXT, search TEXT)",
    "CREATE INDEX runs_started ON runs (started_at, id)",
    "CREATE INDEX runs_status ON runs (status, started_at, id)",
    "CREATE INDEX runs_agent ON runs (agent, started_at, id)",
    "CREATE INDEX runs_notebook ON runs (notebook, started_at, id)",
    "CREATE INDEX runs_owner ON runs (owner, started_at, id)",
    "CREATE INDEX runs_session ON runs (session_id, started_at, id)",
)
_UPSERT = f"INSERT OR REPLACE INTO runs ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"


class RunIndex:
    """Run rows by the columns a page filters and orders on; ``on_change`` is a journal's feed."""

    def __init__(self, docs: Iterable[dict[str, Any]] = ()):
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._lock = threading.Lock()
        self._db.execute(_SCHEMA[0])
        self._db.executemany(_UPSERT, map(run_values, docs))
        for statement in _SCHEMA[1:]:  # indexes made after the rows: one sort each, not a tree grown row by row
            self._db.execute(statement)

    def follow(self, previous: Callable[[str, str, Any], None] | None) -> Callable[[str, str, Any], None]:
        """A journal ``on_change`` that keeps this index current, then calls ``previous`` (if any)."""
        def on_change(table: str, key: str, doc: dict[str, Any] | None) -> None:
            with self._lock:
                if table == "":  # the journal forgot everything (reloaded): so does the index
                    self._db.execute("DELETE FROM runs")
                elif table == "runs":
                    if doc is None:
                        self._db.execute("DELETE FROM runs WHERE id = ?", (key,))
                    else:
                        self._db.execute(_UPSERT, run_values(doc))
            if previous is not None:
                previous(table, key, doc)
        return on_change

    def page_ids(self, where: RunFilter, limit: int, cursor: str | None) -> list[str]:
        """Ids of up to ``limit`` runs matching ``where`` after ``cursor``, newest first."""
        clause, params = where_clause(where, cursor)
        with self._lock:
            rows = self._db.execute(f"SELECT id FROM runs{clause} ORDER BY started_at DESC, id DESC LIMIT ?",
                                    (*params, limit)).fetchall()
        return [r[0] for r in rows]

    def facets(self, limit: int) -> dict[str, list[str]]:
        found: dict[str, set[str]] = {}
        with self._lock:
            for name, column in FACETS.items():
                rows = self._db.execute(f"SELECT DISTINCT {column} FROM runs WHERE {column} IS NOT NULL "
                                        f"ORDER BY {column} LIMIT ?", (limit,)).fetchall()
                found[name] = {r[0] for r in rows}
        return facets_of(found, limit)
