"""The Repository protocol on SQL databases: SQLite (WAL) and PostgreSQL (psycopg 3).

Documents are stored whole as JSON text, beside the few columns that queries filter and sort on, so a
step or run reads back exactly as it was written (the same dicts the TinyDB store keeps).  A commit is
one transaction; when it returns, the batch is durable (SQLite: WAL with ``synchronous=FULL``;
PostgreSQL: a committed transaction).  Both dialects share every statement except their placeholders
and connection setup: the upsert is ``INSERT … ON CONFLICT … DO UPDATE`` in both.
"""

from __future__ import annotations

import re
import threading
from typing import Any, Iterable, Iterator, Sequence

import orjson

from ..core import AgentRun, AgentSession, Step, StepEvent, StoreError
from .layout import SCHEMA_VERSION

_TABLES = (
    "CREATE TABLE IF NOT EXISTS agio_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS agio_sessions (session_id TEXT PRIMARY KEY, created_at DOUBLE PRECISION, "
    "doc TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS agio_runs (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, "
    "started_at DOUBLE PRECISION, doc TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS agio_runs_session ON agio_runs (session_id, started_at)",
    "CREATE TABLE IF NOT EXISTS agio_steps (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, sequence INTEGER "
    "NOT NULL, attempt INTEGER NOT NULL, superseded INTEGER NOT NULL, doc TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS agio_steps_session ON agio_steps (session_id, sequence, attempt)",
    "CREATE TABLE IF NOT EXISTS agio_events (run_id TEXT NOT NULL, seq INTEGER NOT NULL, session_id TEXT NOT NULL, "
    "doc TEXT NOT NULL, PRIMARY KEY (run_id, seq))",
)


def _dumps(doc: dict[str, Any]) -> str:
    return orjson.dumps(doc).decode()


def _loads(text: str) -> dict[str, Any]:
    return orjson.loads(text)


class SQLRepository:
    """Shared by :class:`SQLiteRepository` and :class:`PostgresRepository`; subclasses connect."""

    placeholder = "?"
    root: str  # where the store is, for messages (a path, or a URL without its password)

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._conn = self._connect()
        with self._lock:
            self._setup()

    # -- dialect --------------------------------------------------------------------------
    def _connect(self) -> Any:
        raise NotImplementedError

    def _sql(self, statement: str) -> str:
        return statement if self.placeholder == "?" else statement.replace("?", self.placeholder)

    def _execute(self, cur: Any, statement: str, params: Sequence[Any] = ()) -> Any:
        cur.execute(self._sql(statement), params)
        return cur

    def _executemany(self, cur: Any, statement: str, rows: list[Sequence[Any]]) -> None:
        if rows:
            cur.executemany(self._sql(statement), rows)

    def _query(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            cur = self._conn.cursor()
            try:
                rows = self._execute(cur, statement, params).fetchall()
            finally:
                cur.close()
            self._end_read()
            return rows

    def _end_read(self) -> None:
        """Close the read transaction a query opened (PostgreSQL), so the next read sees new commits."""

    def _setup(self) -> None:
        cur = self._conn.cursor()
        try:
            for statement in _TABLES:
                cur.execute(statement)
            self._execute(cur, "INSERT INTO agio_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
                          ("schema_version", str(SCHEMA_VERSION)))
            version = self._execute(cur, "SELECT value FROM agio_meta WHERE key = ?", ("schema_version",)).fetchone()
            self._conn.commit()
        except Exception as exc:
            self._conn.rollback()
            raise StoreError(f"cannot set up the store at {self.root}: {_one_line(exc)}") from None
        finally:
            cur.close()
        stored = int(version[0]) if version and str(version[0]).isdigit() else None
        if stored is None or stored > SCHEMA_VERSION:
            raise StoreError(f"store {self.root} has schema version {version[0] if version else None!r}; this "
                             f"agio-notebook reads version {SCHEMA_VERSION} (upgrade agio-notebook to open it)")
        self.schema_version = stored

    # -- the write path ---------------------------------------------------------------------
    def commit(self, *, session: AgentSession | None = None, run: AgentRun | None = None,
               steps: Iterable[Step] = (), events: Iterable[StepEvent] = ()) -> None:
        step_rows = [(s.id, s.session_id, s.sequence, s.attempt, int(s.superseded), _dumps(s.to_dict()))
                     for s in steps]
        event_rows = [(e.run_id, e.seq, e.session_id, _dumps(e.to_dict())) for e in events]
        session_id = (session.session_id if session else run.session_id if run else
                      step_rows[0][1] if step_rows else event_rows[0][2] if event_rows else None)
        if session_id is None:
            return
        with self._lock:
            cur = self._conn.cursor()
            try:
                if session is not None:
                    self._execute(cur, "INSERT INTO agio_sessions (session_id, created_at, doc) VALUES (?, ?, ?) "
                                       "ON CONFLICT (session_id) DO UPDATE SET created_at = excluded.created_at, "
                                       "doc = excluded.doc",
                                  (session.session_id, session.created_at, _dumps(session.to_dict())))
                else:  # the first write to a session created implicitly
                    implicit = AgentSession(session_id=session_id)
                    self._execute(cur, "INSERT INTO agio_sessions (session_id, created_at, doc) VALUES (?, ?, ?) "
                                       "ON CONFLICT (session_id) DO NOTHING",
                                  (session_id, implicit.created_at, _dumps(implicit.to_dict())))
                if run is not None:
                    self._execute(cur, "INSERT INTO agio_runs (id, session_id, started_at, doc) VALUES (?, ?, ?, ?) "
                                       "ON CONFLICT (id) DO UPDATE SET doc = excluded.doc",
                                  (run.id, run.session_id, run.started_at, _dumps(run.to_dict())))
                self._executemany(cur, "INSERT INTO agio_steps (id, session_id, sequence, attempt, superseded, doc) "
                                       "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
                                       "sequence = excluded.sequence, attempt = excluded.attempt, "
                                       "superseded = excluded.superseded, doc = excluded.doc", step_rows)
                self._executemany(cur, "INSERT INTO agio_events (run_id, seq, session_id, doc) VALUES (?, ?, ?, ?) "
                                       "ON CONFLICT (run_id, seq) DO UPDATE SET doc = excluded.doc", event_rows)
                self._conn.commit()
            except Exception as exc:
                self._conn.rollback()
                raise StoreError(f"cannot write to the store at {self.root}: {_one_line(exc)}") from None
            finally:
                cur.close()

    def delete_steps(self, session_id: str, start_seq: int) -> int:
        with self._lock:
            cur = self._conn.cursor()
            try:
                self._execute(cur, "DELETE FROM agio_steps WHERE session_id = ? AND sequence >= ?",
                              (session_id, start_seq))
                count = cur.rowcount
                self._conn.commit()
            except Exception as exc:
                self._conn.rollback()
                raise StoreError(f"cannot write to the store at {self.root}: {_one_line(exc)}") from None
            finally:
                cur.close()
            return count

    # -- reads ------------------------------------------------------------------------------
    def get_session(self, session_id: str) -> AgentSession | None:
        rows = self._query("SELECT doc FROM agio_sessions WHERE session_id = ?", (session_id,))
        return AgentSession.from_dict(_loads(rows[0][0])) if rows else None

    def list_sessions(self) -> list[AgentSession]:
        rows = self._query("SELECT doc FROM agio_sessions ORDER BY created_at")
        return [AgentSession.from_dict(_loads(r[0])) for r in rows]

    def get_steps(self, session_id: str, start_seq: int | None = None, end_seq: int | None = None,
                  *, include_superseded: bool = False) -> list[Step]:
        where, params = ["session_id = ?"], [session_id]
        if not include_superseded:
            where.append("superseded = 0")
        if start_seq is not None:
            where.append("sequence >= ?")
            params.append(start_seq)
        if end_seq is not None:
            where.append("sequence <= ?")
            params.append(end_seq)
        rows = self._query(f"SELECT doc FROM agio_steps WHERE {' AND '.join(where)} ORDER BY sequence, attempt",
                           params)
        return [Step.from_dict(_loads(r[0])) for r in rows]

    def get_last_step(self, session_id: str) -> Step | None:
        rows = self._query("SELECT doc FROM agio_steps WHERE session_id = ? AND superseded = 0 "
                           "ORDER BY sequence DESC, attempt DESC LIMIT 1", (session_id,))
        return Step.from_dict(_loads(rows[0][0])) if rows else None

    def get_run(self, run_id: str) -> AgentRun | None:
        rows = self._query("SELECT doc FROM agio_runs WHERE id = ?", (run_id,))
        return AgentRun.from_dict(_loads(rows[0][0])) if rows else None

    def list_runs(self, session_id: str | None = None) -> list[AgentRun]:
        return [AgentRun.from_dict(d) for d in self.iter_run_dicts(session_id)]

    def get_events(self, run_id: str, cursor: int = 0, limit: int = 100) -> list[StepEvent]:
        rows = self._query("SELECT doc FROM agio_events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                           (run_id, cursor, limit))
        return [StepEvent.from_dict(_loads(r[0])) for r in rows]

    def iter_step_dicts(self, session_id: str | None = None) -> Iterator[dict[str, Any]]:
        if session_id is None:
            rows = self._query("SELECT doc FROM agio_steps")
        else:
            rows = self._query("SELECT doc FROM agio_steps WHERE session_id = ?", (session_id,))
        for row in rows:
            yield _loads(row[0])

    def iter_run_dicts(self, session_id: str | None = None) -> Iterator[dict[str, Any]]:
        if session_id is None:
            rows = self._query("SELECT doc FROM agio_runs ORDER BY started_at")
        else:
            rows = self._query("SELECT doc FROM agio_runs WHERE session_id = ? ORDER BY started_at", (session_id,))
        for row in rows:
            yield _loads(row[0])

    def close(self) -> None:
        with self._lock:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001 - closing anyway
                pass


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def redact_url(url: str) -> str:
    """A database URL without its password, for messages."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)
