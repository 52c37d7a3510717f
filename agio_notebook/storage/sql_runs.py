"""The run query on the SQL stores: the columns it filters on, kept beside each run's document.

``agio_runs`` keeps, beside ``doc``, the run's agent, notebook, user (``owner``) and the lower-cased text
the text filter looks in (``search``), each indexed with ``started_at`` so a page of the newest runs
matching a filter is an index range, whatever the store's size. A store made before these columns
existed gets them, filled from its documents, the first time a role that may change its tables opens it
(the store's ``revision`` in ``agio_meta`` says which shape it has).

The user of a run is what its process said on SQLite; on PostgreSQL it is the database role that wrote
the row (the ``owner`` column's default, ``session_user``: the role that logged in, whatever it SET ROLE
to), which a process cannot claim otherwise.
"""

from __future__ import annotations

import functools
from typing import Any

import orjson

from ..core import AgentRun
from .damage import Damage, report
from .run_query import (FACETS, UNREADABLE, Recheck, RunFilter, RunPage, check_limit, facets_of, page_of, run_row,
                        where_clause, with_live_totals)

# the shape of the tables within a schema version: 2 adds the run query's columns (additive: a store at
# revision 2 still reads with a version that knows revision 1)
REVISION = 2

_INDEXES = (
    "CREATE INDEX IF NOT EXISTS agio_runs_started ON agio_runs (started_at, id)",
    "CREATE INDEX IF NOT EXISTS agio_runs_status_started ON agio_runs (status, started_at, id)",
    "CREATE INDEX IF NOT EXISTS agio_runs_agent ON agio_runs (agent, started_at, id)",
    "CREATE INDEX IF NOT EXISTS agio_runs_notebook ON agio_runs (notebook, started_at, id)",
    "CREATE INDEX IF NOT EXISTS agio_runs_owner ON agio_runs (owner, started_at, id)",
    "CREATE INDEX IF NOT EXISTS agio_steps_run ON agio_steps (run_id)",  # a running run's totals so far
)


def _live(doc: dict[str, Any], steps: int, tokens: int | None) -> dict[str, Any]:
    """``with_live_totals``, or the doc as it is when its metrics are not a run's (the page reports it)."""
    try:
        return with_live_totals(doc, steps, tokens)
    except (TypeError, ValueError):
        return doc


def query_columns(run: AgentRun) -> tuple[Any, ...]:
    """(agent, notebook, search, owner) of a run, as the run upsert writes them."""
    row = run_row(run.to_dict())
    return text_column(row["agent"]), text_column(row["notebook"]), text_column(row["search"]), row["owner"]


def text_column(value: str | None) -> str | None:
    """A text column's value: a query, model or tool output may hold NUL characters, which PostgreSQL's text
    cannot; the column (what frames show and filters search) has U+FFFD for them, the document keeps the
    text as it was."""
    return value.replace("\x00", "\ufffd") if value and "\x00" in value else value


class SQLRunQuery:
    """Mixed into ``SQLRepository``: the run query's columns, their upgrade, and the query itself."""

    # SQLite: a run's user is the one its document names; PostgreSQL: the role that wrote the row
    owner_from_doc = True
    owner_column_type = "TEXT"

    _query: Any
    _execute: Any
    _executemany: Any

    @functools.cached_property
    def _recheck(self) -> Recheck:
        return Recheck()

    def _table_columns(self, cur: Any, table: str) -> set[str]:
        raise NotImplementedError

    def _upgrade_runs(self, cur: Any) -> None:
        """Add the query's columns and indexes to a store that lacks them, filled from each run's doc."""
        have = self._table_columns(cur, "agio_runs")
        for name, kind in (("agent", "TEXT"), ("notebook", "TEXT"), ("search", "TEXT"),
                           ("owner", self.owner_column_type)):
            if name not in have:
                cur.execute(f"ALTER TABLE agio_runs ADD COLUMN {name} {kind}")
        for statement in _INDEXES:
            cur.execute(statement)
        rows = self._execute(cur, "SELECT id, doc FROM agio_runs WHERE search IS NULL").fetchall()
        if self.owner_from_doc:
            updates = [(*query_columns(AgentRun.from_dict(orjson.loads(doc))), run_id) for run_id, doc in rows]
            self._executemany(cur, "UPDATE agio_runs SET agent = ?, notebook = ?, search = ?, owner = ? WHERE id = ?",
                              updates)
        else:
            updates = [(*query_columns(AgentRun.from_dict(orjson.loads(doc)))[:3], run_id) for run_id, doc in rows]
            self._executemany(cur, "UPDATE agio_runs SET agent = ?, notebook = ?, search = ? WHERE id = ?", updates)

    def _run_upsert(self, run: AgentRun, doc: str) -> tuple[str, tuple[Any, ...]]:
        """The statement and parameters that store a run (its row is updated in place when it exists)."""
        agent, notebook, search, owner = query_columns(run)
        columns = ["id", "session_id", "started_at", "status", "agent", "notebook", "search", "doc"]
        params: list[Any] = [run.id, run.session_id, run.started_at, run.status.value, agent, notebook, search, doc]
        if self.owner_from_doc:
            columns.append("owner")
            params.append(owner)
        updated = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in ("id", "session_id", "started_at"))
        return (f"INSERT INTO agio_runs ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) "
                f"ON CONFLICT (id) DO UPDATE SET {updated}", tuple(params))

    def _page_docs(self, where: RunFilter, limit: int, cursor: str | None) -> list[dict[str, Any]]:
        """The docs of up to ``limit`` rows in page order; a row whose document does not parse as an object
        keeps its place as a placeholder (``UNREADABLE``), which the page reports and leaves out."""
        clause, params = where_clause(where, cursor)
        rows = self._query(f"SELECT id, started_at, doc, owner FROM agio_runs{clause} ORDER BY started_at DESC, "
                           "id DESC LIMIT ?", (*params, limit))
        docs = []
        for run_id, started_at, doc, owner in rows:
            try:
                parsed = orjson.loads(doc)
                if not isinstance(parsed, dict):
                    raise ValueError(f"its document is {type(parsed).__name__}, not an object")
            except ValueError as exc:  # orjson's JSONDecodeError is a ValueError
                parsed = {UNREADABLE: " ".join(str(exc).split())}
            # the row's own key: where the next page starts, whatever the document says
            parsed["id"], parsed["started_at"] = run_id, started_at
            if owner is not None:
                parsed["user"] = owner
            docs.append(parsed)
        return docs

    def _damaged_run(self, doc: dict[str, Any], why: str) -> None:
        """A run's row that makes no run: reported (``StoreDamageWarning``), never in the way of the others."""
        by = f" (written by {doc['user']})" if isinstance(doc.get("user"), str) else ""
        self._unreadable(f"agio_runs {doc.get('id')}{by}", why)

    def _unreadable(self, what: str, why: str) -> None:
        """A row that makes nothing it should (a run, a session, a step...): reported, then left out."""
        report(Damage(self.root, f"{what}: unreadable, left out ({why[:200]})"), stacklevel=5)

    def query_runs(self, where: RunFilter = RunFilter(), limit: int = 50, cursor: str | None = None) -> RunPage:
        """A page of runs, newest first, filtered and ordered by the database (``storage/run_query.py``)."""
        limit = check_limit(limit)
        docs = self._page_docs(where, limit + 1, cursor)
        running = self._recheck.due(d["session_id"] for d in docs[:limit]
                                    if d.get("status") == "running" and isinstance(d.get("session_id"), str))
        if running and any([self.recover_interrupted(sid) for sid in running]):  # type: ignore[attr-defined]
            docs = self._page_docs(where, limit + 1, cursor)  # runs whose process died, settled just now
        going = [d["id"] for d in docs[:limit] if d.get("status") == "running"]
        if going:  # their totals so far, from the steps committed (one grouped read for the page)
            marks = ", ".join("?" * len(going))
            totals = {run_id: (n, tokens) for run_id, n, tokens in self._query(
                f"SELECT run_id, COUNT(*), SUM(total_tokens) FROM agio_steps WHERE run_id IN ({marks}) "
                "AND superseded = 0 GROUP BY run_id", going)}
            docs = [_live(d, *totals[d["id"]]) if d["id"] in totals else d for d in docs]
        return page_of(docs, limit, self._damaged_run)

    def run_facets(self, limit: int = 100) -> dict[str, list[str]]:
        """The values each filter of the run query can take, sorted: one indexed look per value (each the
        smallest after the last), not a pass over every run as ``SELECT DISTINCT`` makes."""
        found = {}
        for name, column in FACETS.items():
            rows = self._query(f"WITH RECURSIVE v(x) AS (SELECT MIN({column}) FROM agio_runs UNION ALL SELECT "
                               f"(SELECT MIN({column}) FROM agio_runs WHERE {column} > v.x) FROM v WHERE v.x IS NOT "
                               f"NULL) SELECT x FROM v WHERE x IS NOT NULL LIMIT ?", (limit,))
            found[name] = {r[0] for r in rows}
        return facets_of(found, limit)
