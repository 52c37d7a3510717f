"""The Repository protocol on SQL databases: SQLite (WAL) and PostgreSQL (psycopg 3).

Documents are stored whole as JSON text, beside the few columns that queries filter and sort on, so a
step or run reads back exactly as it was written (the same dicts the TinyDB store keeps).  A commit is
one transaction; when it returns, the batch is durable (SQLite: WAL with ``synchronous=FULL``;
PostgreSQL: a committed transaction).  Both dialects share every statement except their placeholders
and connection setup: the upsert is ``INSERT … ON CONFLICT … DO UPDATE`` in both.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar

import orjson


from ..core import AgentRun, AgentSession, NotFoundError, RunStatus, SessionBusyError, Step, StepEvent, StoreError, now
from .claims import Holder
from .ids import prefix_pattern
from .damage import Damage, acknowledgements, lost_steps, report
from .layout import SCHEMA_VERSION
from .prune import prune
from .reports import Pruned, Repaired, SessionSize, StoreStats
from .sql_journal import TABLES as JOURNAL_TABLES
from .sql_journal import KeyFn, SQLJournal
from .sql_runs import REVISION, SQLRunQuery, text_column

_TABLES = (
    "CREATE TABLE IF NOT EXISTS agio_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS agio_sessions (session_id TEXT PRIMARY KEY, created_at DOUBLE PRECISION, "
    "doc TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS agio_runs (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, "
    "started_at DOUBLE PRECISION, status TEXT NOT NULL, doc TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS agio_runs_status ON agio_runs (status)",
    "CREATE INDEX IF NOT EXISTS agio_runs_session ON agio_runs (session_id, started_at)",
    # a step's doc is kept without its content; content and what the steps frame shows are columns, so
    # the frame of a million steps is read without parsing a million documents
    "CREATE TABLE IF NOT EXISTS agio_steps (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, sequence INTEGER "
    "NOT NULL, attempt INTEGER NOT NULL, superseded INTEGER NOT NULL, run_id TEXT, role TEXT, status TEXT, "
    "content TEXT, tool_calls INTEGER, tool_names TEXT, tool_call_id TEXT, name TEXT, error TEXT, "
    "created_at DOUBLE PRECISION, prompt_tokens BIGINT, completion_tokens BIGINT, total_tokens BIGINT, "
    "cached_tokens BIGINT, ttft_ms DOUBLE PRECISION, model_ms DOUBLE PRECISION, tool_ms DOUBLE PRECISION, "
    "duration_ms DOUBLE PRECISION, cost DOUBLE PRECISION, doc TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS agio_steps_session ON agio_steps (session_id, sequence, attempt)",
    # two runs may never hold one sequence of a session: the store refuses the second write
    "CREATE UNIQUE INDEX IF NOT EXISTS agio_steps_current ON agio_steps (session_id, sequence) WHERE superseded = 0",
    "CREATE TABLE IF NOT EXISTS agio_claims (session_id TEXT PRIMARY KEY, pid INTEGER, host TEXT, what TEXT, "
    "since DOUBLE PRECISION)",
    "CREATE TABLE IF NOT EXISTS agio_events (run_id TEXT NOT NULL, seq INTEGER NOT NULL, session_id TEXT NOT NULL, "
    "doc TEXT NOT NULL, PRIMARY KEY (run_id, seq))",
)


T = TypeVar("T")

def _dumps(doc: dict[str, Any]) -> str:
    return orjson.dumps(doc).decode()


def _loads(text: str) -> dict[str, Any]:
    return orjson.loads(text)


# the steps frame's columns, stored beside each step's doc (``step_columns`` reads them back)
FRAME_COLUMNS = ("session_id", "run_id", "sequence", "attempt", "superseded", "role", "status", "content",
                 "tool_calls", "tool_names", "tool_call_id", "name", "error", "created_at", "prompt_tokens",
                 "completion_tokens", "total_tokens", "cached_tokens", "ttft_ms", "model_ms", "tool_ms",
                 "duration_ms", "cost", "id")
_METRICS = FRAME_COLUMNS[14:23]
_STEP_COLUMNS = (*FRAME_COLUMNS, "doc")
_STEP_UPSERT = (f"INSERT INTO agio_steps ({', '.join(_STEP_COLUMNS)}) VALUES ({', '.join('?' * len(_STEP_COLUMNS))}) "
                "ON CONFLICT (id) DO UPDATE SET "
                + ", ".join(f"{c} = excluded.{c}" for c in _STEP_COLUMNS if c not in ("id", "session_id")))


def _step_row(step: Step) -> tuple[Any, ...]:
    doc = step.to_dict()
    content = doc["content"]
    if not (isinstance(content, str) and "\x00" in content):
        del doc["content"]  # kept in its column; a NUL (which PostgreSQL's text refuses) keeps it in the doc
    metrics = doc.get("metrics") or {}
    calls = doc.get("tool_calls") or []
    names = ",".join(c["function"]["name"] for c in calls) if calls else None
    return (step.session_id, step.run_id, step.sequence, step.attempt, int(step.superseded), doc["role"],
            doc.get("status", "ok"), text_column(content), len(calls), text_column(names), text_column(step.tool_call_id),
            text_column(step.name), text_column(step.error), step.created_at, *(metrics.get(k) for k in _METRICS), step.id,
            _dumps(doc))


def _run_for_steps(doc: Any) -> dict[str, Any] | None:
    """A run's doc as the check of lost steps reads it (id, session, steps committed); None if it has none."""
    try:
        run = _loads(doc)
    except ValueError:
        return None
    if not isinstance(run, dict) or not isinstance(run.get("id"), str) or not isinstance(run.get("session_id"), str):
        return None
    metrics = run.get("metrics")
    steps = metrics.get("steps") if isinstance(metrics, dict) else None
    if not isinstance(steps, int) or isinstance(steps, bool):
        run = {**run, "metrics": {"steps": 0}}
    return run


def _step_doc(row: tuple[Any, ...]) -> dict[str, Any]:
    """A step's doc from (doc without content, content); content with a NUL is in the doc itself."""
    doc = row[0] if isinstance(row[0], dict) else _loads(row[0])
    if "content" not in doc:
        doc["content"] = row[1]
    return doc


def _prepare(session: AgentSession | None, run: AgentRun | None, steps: Iterable[Step],
             events: Iterable[StepEvent]) -> tuple[str, AgentSession | None, AgentRun | None, list[Any], list[Any]] | None:
    """A commit's rows, and the session they belong to (None: nothing to write)."""
    step_rows = [_step_row(s) for s in steps]
    event_rows = [(e.run_id, e.seq, e.session_id, _dumps(e.to_dict())) for e in events]
    session_id = (session.session_id if session else run.session_id if run else
                  step_rows[0][0] if step_rows else event_rows[0][2] if event_rows else None)
    if session_id is None:
        return None
    return session_id, session, run, step_rows, event_rows


class SQLRepository(SQLRunQuery):
    """Shared by :class:`SQLiteRepository` and :class:`PostgresRepository`; subclasses connect."""

    placeholder = "?"
    binary_text_order = True  # text compares byte by byte (SQLite); PostgreSQL's order follows its locale
    # how long a claim retries a session another process holds before it is refused: the holder may be
    # between two runs of a loop, its release lingering (claim files retry on their own, see claims.py)
    claim_grace = 0.0
    root: str  # where the store is, for messages (a path, or a URL without its password)
    # named journals: the upsert's conflict target, and which rows a journal shows this process (a
    # classroom's PostgreSQL store keys journals by owner too, and shows each role its own: classroom/)
    journal_conflict = "(name, tbl, key)"
    journal_scope = ""
    # a claim or a commit is one round trip (PostgreSQL) or one sync of SQLite's own log, with nothing left
    # for a writer thread to do afterwards: a run alone in its process makes them on its own thread
    # (``execution.session_claims.store_calls_inline``)
    inline_when_alone = True

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._held: set[str] = set()
        self._sessions_seen: set[str] = set()  # sessions this instance knows exist (skips a statement per commit)
        self._conn = self._connect()
        with self._lock:
            self._setup()
        self.recover_interrupted()  # runs left `running` by a process that died are found on open

    # -- dialect --------------------------------------------------------------------------
    def _connect(self) -> Any:
        raise NotImplementedError

    def _sql(self, statement: str) -> str:
        return statement if self.placeholder == "?" else statement.replace("?", self.placeholder)

    def _execute(self, cur: Any, statement: str, params: Sequence[Any] = ()) -> Any:
        cur.execute(self._sql(statement), params)
        return cur

    def _executemany(self, cur: Any, statement: str, rows: list[Sequence[Any]]) -> None:
        if len(rows) == 1:
            cur.execute(self._sql(statement), rows[0])
        elif rows:
            cur.executemany(self._sql(statement), rows)

    def _query(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            self._ensure_connected()
            cur = self._conn.cursor()
            try:
                rows = self._execute(cur, statement, params).fetchall()
            except Exception as exc:
                self._check_connection(exc)
                self._check_locked(exc, "read")
                raise
            finally:
                cur.close()
            return rows

    @contextmanager
    def _transaction(self, session_id: str | None = None, *, blind: bool = False) -> Iterator[Any]:
        """A cursor whose work is committed on exit, or rolled back and reported as one StoreError line.

        ``blind``: the statements read nothing back (no rows, no row counts), so they may be pipelined."""
        with self._lock:
            self._ensure_connected()
            cur = self._conn.cursor()
            try:
                with self._atomically(cur, blind):
                    yield cur
            except Exception as exc:
                self._check_connection(exc)
                self._conn.rollback()
                self._check_locked(exc, "written")
                if session_id is not None and self._is_unique_violation(exc) and "agio_steps" in str(exc):
                    raise StoreError(f"session {session_id}: a sequence in this batch is already taken by a current "
                                     "step (another run wrote to this session); nothing was written") from None
                raise StoreError(f"cannot write to the store at {self.root}: {_one_line(exc)}") from None
            finally:
                cur.close()

    def fetch(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of a read of the caller's own, on this store's connection (``?`` placeholders): the classroom
        reads its roster and the class's exercise progress with it."""
        return self._query(statement, params)

    @contextmanager
    def _atomically(self, cur: Any, blind: bool) -> Iterator[None]:
        """The statements run inside as one transaction, committed on exit. ``blind``: they read nothing
        back (no rows, no row counts), so a dialect may send them without waiting for each answer."""
        self._begin(cur)
        yield
        self._conn.commit()

    def _begin(self, cur: Any) -> None:
        """Open the transaction a write's statements share (SQLite's driver opens one by itself)."""

    def _ensure_connected(self) -> None:
        """Connect again if the connection was lost (PostgreSQL: the server restarted); called holding the lock."""

    def _check_connection(self, exc: Exception) -> None:
        """Raise one StoreError line if ``exc`` means the connection is gone (the next call connects again)."""

    def _check_locked(self, exc: Exception, what: str) -> None:
        """Raise one StoreError line if ``exc`` means a table stayed locked by another connection too long
        (PostgreSQL: ``lock_timeout``); ``what``: what did not happen ("read", "written", "changed")."""

    def _setup(self) -> None:
        """Make or upgrade the tables, unless the store already has this shape: then nothing is changed,
        so a role that may only read and write rows (a classroom's student) opens it too."""
        if self._schema_current():
            return
        cur = self._conn.cursor()
        try:
            self._begin(cur)
            self._lock_setup(cur)
            for statement in (*_TABLES, *JOURNAL_TABLES):
                cur.execute(statement)
            self._upgrade(cur)
            self._execute(cur, "INSERT INTO agio_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
                          ("schema_version", str(SCHEMA_VERSION)))
            self._execute(cur, "INSERT INTO agio_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE "
                               "SET value = excluded.value", ("revision", str(REVISION)))
            version = self._execute(cur, "SELECT value FROM agio_meta WHERE key = ?", ("schema_version",)).fetchone()
            self._conn.commit()
        except Exception as exc:
            self._conn.rollback()
            self._check_locked(exc, "changed")
            raise StoreError(f"cannot set up the store at {self.root}: {_one_line(exc)}{self._setup_hint(exc)}") from None
        finally:
            cur.close()
        self._check_version(version[0] if version else None)

    def _schema_current(self) -> bool:
        """Whether the tables have this version's shape (read without changing anything)."""
        cur = self._conn.cursor()
        try:
            meta = dict(self._execute(cur, "SELECT key, value FROM agio_meta WHERE key IN (?, ?)",
                                      ("schema_version", "revision")).fetchall())
        except Exception:  # noqa: BLE001 - no tables yet (or none this role may read): set up
            self._conn.rollback()
            return False
        finally:
            cur.close()
        self._conn.rollback()
        if not str(meta.get("revision", "")).isdigit() or int(meta["revision"]) < REVISION:
            return False
        self._check_version(meta.get("schema_version"))
        return True

    def _check_version(self, version: Any) -> None:
        stored = int(version) if version is not None and str(version).isdigit() else None
        if stored is None or stored > SCHEMA_VERSION:
            raise StoreError(f"store {self.root} has schema version {version!r}; this "
                             f"agio-notebook reads version {SCHEMA_VERSION} (upgrade agio-notebook to open it)")
        self.schema_version = stored

    def _lock_setup(self, cur: Any) -> None:
        """Hold off other processes setting up the same store until this one commits."""

    def _upgrade(self, cur: Any) -> None:
        """What a store made by an earlier version lacks (each step does nothing where it is done)."""
        self._upgrade_runs(cur)

    def _setup_hint(self, exc: Exception) -> str:
        """What to do about a failed set-up, when there is something to say."""
        return ""

    # -- the write path ---------------------------------------------------------------------
    def commit(self, *, session: AgentSession | None = None, run: AgentRun | None = None,
               steps: Iterable[Step] = (), events: Iterable[StepEvent] = ()) -> None:
        prepared = _prepare(session, run, steps, events)
        if prepared is None:
            return
        with self._transaction(prepared[0], blind=True) as cur:
            self._write_commit(cur, *prepared)
        self._sessions_seen.add(prepared[0])

    def commit_group(self, commits: list[dict[str, Any]]) -> list[BaseException | None]:
        """Many commits in one transaction (one sync of the database); if that transaction fails, each
        commit again on its own, so one commit's failure (a taken sequence) is that commit's alone."""
        prepared = [p for p in (_prepare(c.get("session"), c.get("run"), c.get("steps", ()), c.get("events", ()))
                                for c in commits) if p is not None]
        try:
            with self._transaction(blind=True) as cur:
                for p in prepared:
                    self._write_commit(cur, *p)
        except StoreError:
            outcomes: list[BaseException | None] = []
            for c in commits:
                try:
                    self.commit(**c)
                    outcomes.append(None)
                except Exception as exc:  # noqa: BLE001 - that commit's failure
                    outcomes.append(exc)
            return outcomes
        self._sessions_seen.update(p[0] for p in prepared)
        return [None] * len(commits)

    def _write_commit(self, cur: Any, session_id: str, session: AgentSession | None, run: AgentRun | None,
                      step_rows: list[tuple[Any, ...]], event_rows: list[tuple[Any, ...]]) -> None:
        if session is not None:
            self._execute(cur, "INSERT INTO agio_sessions (session_id, created_at, doc) VALUES (?, ?, ?) "
                               "ON CONFLICT (session_id) DO UPDATE SET created_at = excluded.created_at, "
                               "doc = excluded.doc",
                          (session.session_id, session.created_at, _dumps(session.to_dict())))
        elif session_id not in self._sessions_seen:  # the first write to a session created implicitly
            implicit = AgentSession(session_id=session_id)
            self._execute(cur, "INSERT INTO agio_sessions (session_id, created_at, doc) VALUES (?, ?, ?) "
                               "ON CONFLICT (session_id) DO NOTHING",
                          (session_id, implicit.created_at, _dumps(implicit.to_dict())))
        if run is not None:
            self._execute(cur, *self._run_upsert(run, _dumps(run.to_dict())))
        self._executemany(cur, _STEP_UPSERT, step_rows)
        self._executemany(cur, "INSERT INTO agio_events (run_id, seq, session_id, doc) VALUES (?, ?, ?, ?) "
                               "ON CONFLICT (run_id, seq) DO UPDATE SET doc = excluded.doc", event_rows)

    def _is_unique_violation(self, exc: Exception) -> bool:
        raise NotImplementedError

    def delete_steps(self, session_id: str, start_seq: int) -> int:
        return self._write([("DELETE FROM agio_steps WHERE session_id = ? AND sequence >= ?",
                             (session_id, start_seq))])[0]

    # -- reads ------------------------------------------------------------------------------
    def get_session(self, session_id: str) -> AgentSession | None:
        rows = self._query("SELECT session_id, doc FROM agio_sessions WHERE session_id = ?", (session_id,))
        return self._readable("agio_sessions", rows[0], AgentSession.from_dict) if rows else None

    def list_sessions(self) -> list[AgentSession]:
        rows = self._query("SELECT session_id, doc FROM agio_sessions ORDER BY created_at")
        return [s for s in (self._readable("agio_sessions", r, AgentSession.from_dict) for r in rows) if s is not None]

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
        rows = self._query(f"SELECT doc, content, id FROM agio_steps WHERE {' AND '.join(where)} "
                           "ORDER BY sequence, attempt", params)
        self._report_lost(session_id)
        return [s for s in (self._readable_step(r, Step.from_dict) for r in rows) if s is not None]

    def _report_lost(self, session_id: str | None) -> None:
        """Steps the runs of a session (None: of every session) committed that the table no longer holds
        (rows deleted by hand, an old backup restored), reported on every read as the TinyDB store does."""
        for damage in self._lost(session_id):
            report(damage, stacklevel=5)

    def _lost(self, session_id: str | None) -> list[Damage]:
        where, params = ("WHERE session_id = ?", (session_id,)) if session_id is not None else ("", ())
        runs: dict[str, list[dict[str, Any]]] = {}
        held: dict[str, dict[Any, int]] = {}
        # each run with the steps the table holds of it, in one read (every read of steps asks this)
        for doc, count in self._query(
                f"SELECT r.doc, COALESCE(c.n, 0) FROM agio_runs r LEFT JOIN (SELECT run_id, COUNT(*) AS n "
                f"FROM agio_steps {where} GROUP BY run_id) c ON c.run_id = r.id "
                f"{where.replace('session_id', 'r.session_id')}", params * 2):
            run = _run_for_steps(doc)
            if run is None:  # a row that makes no run: the reads of runs report it
                continue
            runs.setdefault(run["session_id"], []).append(run)
            held.setdefault(run["session_id"], {})[run["id"]] = count
        if not runs:
            return []
        found = []
        for sid in sorted(runs):
            lost = lost_steps(self.root, sid, runs[sid], held.get(sid, {}))
            if lost is not None:  # was it recorded by a repair? (read only when something is short)
                recorded = self._lost_journal().tables.get("lost", {})
                lost = lost_steps(self.root, sid, runs[sid], held.get(sid, {}),
                                  {k: d.get("left") for k, d in recorded.items()})
            if lost is not None:
                found.append(lost)
        return found

    def _lost_journal(self) -> SQLJournal:
        journal = self.journal("repairs", {"lost": lambda d: d["id"]})
        journal.refresh()
        return journal

    def get_last_step(self, session_id: str) -> Step | None:
        rows = self._query("SELECT doc, content, id FROM agio_steps WHERE session_id = ? AND superseded = 0 "
                           "ORDER BY sequence DESC, attempt DESC LIMIT 1", (session_id,))
        self._report_lost(session_id)
        return self._readable_step(rows[0], Step.from_dict) if rows else None

    def get_run(self, run_id: str) -> AgentRun | None:
        rows = self._query("SELECT doc FROM agio_runs WHERE id = ?", (run_id,))
        run = self._readable_run(run_id, rows[0][0]) if rows else None
        if run is None:
            return None
        if run.status is RunStatus.RUNNING and self.recover_interrupted(run.session_id):
            return self.get_run(run_id)
        return run

    def list_runs(self, session_id: str | None = None) -> list[AgentRun]:
        found = (self._readable_run(run_id, doc) for run_id, doc in self._run_rows(session_id))
        return [run for run in found if run is not None]

    def _readable_run(self, run_id: str, doc: Any) -> AgentRun | None:
        """The run a row's document holds; a document that makes no run (damaged, or written by hand) is
        reported (``StoreDamageWarning``) and left out: it never stops a read of the others."""
        parsed = self._parsed_run(run_id, doc)
        return parsed[1] if parsed is not None else None

    def _readable(self, table: str, row: tuple[Any, Any], make: Callable[[dict[str, Any]], T]) -> T | None:
        """What a row's document makes (a session, an event); a document that makes none (damaged, or
        written by hand: a classroom's student may) is reported (``StoreDamageWarning``) and left out."""
        key, doc = row
        try:
            parsed = _loads(doc)
            if not isinstance(parsed, dict):
                raise ValueError(f"its document is {type(parsed).__name__}, not an object")
            return make(parsed)
        except Exception as exc:  # noqa: BLE001 - whatever a row holds
            self._unreadable(f"{table} {key}", " ".join(str(exc).split()) or type(exc).__name__)
            return None

    def _readable_step(self, row: tuple[Any, Any, Any], make: Callable[[dict[str, Any]], T]) -> T | None:
        """A step's row (doc, content, id) as what ``make`` makes of its document, or None, reported."""
        doc, content, step_id = row
        return self._readable("agio_steps", (step_id, doc), lambda d: make(_step_doc((d, content))))

    def _parsed_run(self, run_id: str, doc: Any) -> tuple[dict[str, Any], AgentRun] | None:
        """A row's document and the run it makes (each document parsed once), or None, reported."""
        return self._readable("agio_runs", (run_id, doc), lambda parsed: (parsed, AgentRun.from_dict(parsed)))

    def _run_rows(self, session_id: str | None) -> list[tuple[Any, ...]]:
        self.recover_interrupted(session_id)
        if session_id is None:
            return self._query("SELECT id, doc FROM agio_runs ORDER BY started_at")
        return self._query("SELECT id, doc FROM agio_runs WHERE session_id = ? ORDER BY started_at", (session_id,))

    def get_events(self, run_id: str, cursor: int = 0, limit: int = 100) -> list[StepEvent]:
        rows = self._query("SELECT seq, doc FROM agio_events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                           (run_id, cursor, limit))
        found = (self._readable("agio_events", (f"{run_id}/{seq}", doc), StepEvent.from_dict) for seq, doc in rows)
        return [e for e in found if e is not None]

    def iter_step_dicts(self, session_id: str | None = None) -> Iterator[dict[str, Any]]:
        if session_id is None:
            rows = self._query("SELECT doc, content, id FROM agio_steps")
        else:
            rows = self._query("SELECT doc, content, id FROM agio_steps WHERE session_id = ?", (session_id,))
        self._report_lost(session_id)
        for row in rows:
            doc = self._readable_step(row, lambda d: d)
            if doc is not None:
                yield doc

    def step_columns(self, session_id: str | None = None) -> dict[str, Sequence[Any]]:
        """What the steps frame shows, as columns in session and sequence order, read without parsing docs."""
        where, params = ("WHERE session_id = ?", (session_id,)) if session_id is not None else ("", ())
        rows = self._query(f"SELECT {', '.join(FRAME_COLUMNS)} FROM agio_steps {where} "
                           "ORDER BY session_id, sequence, attempt", params)
        self._report_lost(session_id)
        columns = zip(*rows) if rows else [()] * len(FRAME_COLUMNS)
        return dict(zip(FRAME_COLUMNS, columns))

    def ids_with_prefix(self, kind: str, prefix: str, limit: int = 20) -> list[str]:
        """Run or session ids starting with ``prefix``: one query (on SQLite a range of the primary key)."""
        table, column = ("agio_runs", "id") if kind == "run" else ("agio_sessions", "session_id")
        where, params = f"{column} LIKE ? ESCAPE '\\'", [prefix_pattern(prefix)]
        if self.binary_text_order:  # a range on the primary key's index (LIKE alone scans the table)
            where, params = f"{column} >= ? AND {column} < ? AND " + where, [prefix, prefix + "\U0010ffff", *params]
        rows = self._query(f"SELECT {column} FROM {table} WHERE {where} ORDER BY {column} LIMIT ?", (*params, limit))
        return [r[0] for r in rows]

    def iter_run_dicts(self, session_id: str | None = None) -> Iterator[dict[str, Any]]:
        for run_id, doc in self._run_rows(session_id):
            parsed = self._parsed_run(run_id, doc)
            if parsed is not None:
                yield parsed[0]

    # -- named journals (records other systems keep beside the sessions) --------------------------
    def journal(self, name: str, keys: dict[str, KeyFn]) -> SQLJournal:
        """The journal ``name`` (e.g. "memory", "executions/BATCH"), read and current."""
        journal = SQLJournal(self, name, keys)
        journal.refresh()
        return journal

    def journal_names(self, prefix: str = "") -> list[str]:
        rows = self._query(f"SELECT DISTINCT name FROM agio_journal WHERE name LIKE ? ESCAPE '\\'{self.journal_scope} "
                           "ORDER BY name",
                           (prefix.replace("%", r"\%").replace("_", r"\_") + "%",))
        return [r[0] for r in rows]

    def _journal_lock(self, cur: Any, name: str) -> None:
        """Serialise appends to one journal so versions follow commit order (SQLite: the write lock does)."""

    def _append_journal(self, name: str, rows: list[tuple[str, str, str | None]]) -> None:
        with self._transaction() as cur:
            self._journal_lock(cur, name)
            top = self._execute(cur, "SELECT COALESCE(MAX(version), 0) FROM agio_journal WHERE name = ?",
                                (name,)).fetchone()[0]
            self._executemany(cur, "INSERT INTO agio_journal (name, tbl, key, doc, version) VALUES (?, ?, ?, ?, ?) "
                                   f"ON CONFLICT {self.journal_conflict} DO UPDATE SET doc = excluded.doc, "
                                   "version = excluded.version",
                              [(name, table, key, doc, int(top) + i + 1) for i, (table, key, doc) in enumerate(rows)])

    # -- claims: one run per session at a time, across processes --------------------------------
    def _lock_claim(self, session_id: str, what: str) -> tuple[Holder | None, bool]:
        """Take the session's lock or raise SessionBusyError naming the holder; the dead holder it replaces,
        and whether a run may have been left ``running`` in the session (False only when known not)."""
        raise NotImplementedError

    def _unlock_claim(self, session_id: str, *, linger: bool = True) -> None:
        raise NotImplementedError

    def session_holder(self, session_id: str) -> Holder | None:
        """Who holds the session now (None: nobody)."""
        raise NotImplementedError

    def claim_session(self, session_id: str, what: str = "a run") -> None:
        """Hold ``session_id`` for one run, across processes; a claim left by a dead process is taken over
        and that process's runs become ``interrupted``."""
        deadline = time.monotonic() + self.claim_grace
        while True:
            with self._lock:
                if session_id in self._held:
                    raise SessionBusyError(f"session {session_id} is in use by another run of this process")
                try:
                    previous, left = self._lock_claim(session_id, what)
                except SessionBusyError:
                    if time.monotonic() >= deadline:
                        raise
                else:
                    self._held.add(session_id)
                    try:
                        if left:
                            self._interrupt_runs(session_id, previous)
                    except BaseException:
                        self.release_session(session_id, linger=False)
                        raise
                    return
            time.sleep(0.01)  # outside the lock: this store's other runs go on meanwhile

    def release_session(self, session_id: str, *, linger: bool = True) -> None:
        """``linger``: a run's release, which a store with claim files may finish on a worker thread."""
        with self._lock:
            if session_id in self._held:
                self._held.discard(session_id)
                self._unlock_claim(session_id, linger=linger)

    def recover_interrupted(self, session_id: str | None = None) -> list[str]:
        """Mark ``interrupted`` every run left ``running`` in a session nobody holds; returns their ids."""
        if session_id is None:
            rows = self._query("SELECT DISTINCT session_id FROM agio_runs WHERE status = ?", (RunStatus.RUNNING.value,))
        else:
            rows = self._query("SELECT DISTINCT session_id FROM agio_runs WHERE status = ? AND session_id = ?",
                               (RunStatus.RUNNING.value, session_id))
        found: list[str] = []
        for (sid,) in rows:
            with self._lock:
                if sid in self._held:
                    continue
                try:
                    previous, left = self._lock_claim(sid, "recovery of interrupted runs")
                except SessionBusyError:
                    continue  # a live run holds it
                self._held.add(sid)
                try:
                    found += self._interrupt_runs(sid, previous) if left else []
                finally:
                    self.release_session(sid, linger=False)
        return found

    def _interrupt_runs(self, session_id: str, previous: Holder | None) -> list[str]:
        """Called holding the session's claim: any run still ``running`` there has no live process."""
        rows = self._query("SELECT id, doc FROM agio_runs WHERE session_id = ? AND status = ?",
                           (session_id, RunStatus.RUNNING.value))
        who = f" ({previous.describe()})" if previous is not None else ""
        ids = []
        for run_id, doc in rows:
            run = self._readable_run(run_id, doc)
            if run is None or run.id != run_id or run.session_id != session_id:
                continue  # reported; left as it is, for whoever wrote it
            run.status = RunStatus.INTERRUPTED
            run.error = f"interrupted: the process running it stopped before the run finished{who}"
            steps = [Step.from_dict(d) for d in self.iter_step_dicts(session_id) if d.get("run_id") == run.id]
            run.ended_at = max((st.created_at for st in steps), default=now())
            self.commit(run=run)
            ids.append(run.id)
        return ids

    # -- maintenance ----------------------------------------------------------------------------
    def stats(self, top: int = 5) -> StoreStats:
        sessions = self._query("SELECT COUNT(*) FROM agio_sessions")[0][0]
        events = self._query("SELECT COUNT(*) FROM agio_events")[0][0]
        statuses = dict(self._query("SELECT status, COUNT(*) FROM agio_runs GROUP BY status"))
        sizes: dict[str, list[int]] = {}
        for sid, count, size in self._query("SELECT session_id, COUNT(*), SUM(LENGTH(doc) + COALESCE(LENGTH(content), 0)) FROM agio_steps "
                                            "GROUP BY session_id"):
            sizes[sid] = [int(count), 0, int(size or 0)]
        for sid, count, size in self._query("SELECT session_id, COUNT(*), SUM(LENGTH(doc)) FROM agio_runs "
                                            "GROUP BY session_id"):
            entry = sizes.setdefault(sid, [0, 0, 0])
            entry[1], entry[2] = int(count), entry[2] + int(size or 0)
        for sid, size in self._query("SELECT session_id, SUM(LENGTH(doc)) FROM agio_events GROUP BY session_id"):
            sizes.setdefault(sid, [0, 0, 0])[2] += int(size or 0)
        largest = sorted((SessionSize(sid, *v) for sid, v in sizes.items()), key=lambda x: -x.bytes)[:top]
        return StoreStats(int(sessions), sum(statuses.values()), sum(v[0] for v in sizes.values()), int(events),
                          sum(v[2] for v in sizes.values()), {k: int(v) for k, v in statuses.items()}, largest)

    def verify(self) -> list[Damage]:
        """Documents that do not parse (the database itself keeps its pages consistent)."""
        damage = []
        for table, key in (("agio_sessions", "session_id"), ("agio_runs", "id"), ("agio_steps", "id")):
            for ident, doc in self._query(f"SELECT {key}, doc FROM {table}"):
                try:
                    _loads(doc)
                except orjson.JSONDecodeError as exc:
                    damage.append(Damage(self.root, f"{table} {ident}: {exc}"))
        return damage + self._lost(None)

    def repair(self) -> list[Repaired]:
        """Nothing to salvage file by file (the database keeps its own pages); steps lost from a session are
        recorded as such, so reads stop warning about them (until more go missing)."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        done = []
        for lost in self._lost(None):
            self._lost_journal().append([("lost", doc) for doc in acknowledgements(lost, stamp)])
            done.append(Repaired(self.root, None, 0, (lost,)))
        return done

    def _write(self, statements: list[tuple[str, Sequence[Any]]]) -> list[int]:
        """Run statements in one transaction; how many rows each touched."""
        counts = []
        with self._transaction() as cur:
            for statement, params in statements:
                self._execute(cur, statement, params)
                counts.append(max(cur.rowcount, 0))
        return counts

    def _refuse_if_claimed(self, session_id: str) -> None:
        holder = self.session_holder(session_id) if session_id not in self._held else Holder(what="this process")
        if holder is not None:
            raise SessionBusyError(f"session {session_id} is in use by {holder.describe()}; it cannot be deleted now")

    def delete_session(self, session_id: str) -> Pruned:
        if self.get_session(session_id) is None:
            raise NotFoundError(f"no session {session_id!r} in the store at {self.root}")
        self._refuse_if_claimed(session_id)
        self._sessions_seen.discard(session_id)
        counts = self._write([("DELETE FROM agio_events WHERE session_id = ?", (session_id,)),
                              ("DELETE FROM agio_steps WHERE session_id = ?", (session_id,)),
                              ("DELETE FROM agio_runs WHERE session_id = ?", (session_id,)),
                              ("DELETE FROM agio_sessions WHERE session_id = ?", (session_id,))])
        return Pruned(counts[3], counts[2], counts[1], counts[0])

    def delete_run(self, run_id: str) -> Pruned:
        run = self.get_run(run_id)
        if run is None:
            raise NotFoundError(f"no run {run_id!r} in the store at {self.root}")
        self._refuse_if_claimed(run.session_id)
        steps = [d["id"] for d in self.iter_step_dicts(run.session_id) if d.get("run_id") == run_id]
        counts = self._write([("DELETE FROM agio_events WHERE run_id = ?", (run_id,)),
                              *(("DELETE FROM agio_steps WHERE id = ?", (sid,)) for sid in steps),
                              ("DELETE FROM agio_runs WHERE id = ?", (run_id,))])
        return Pruned(0, counts[-1], sum(counts[1:-1]), counts[0])

    def prune(self, *, superseded: bool = False, older_than: Any = None) -> Pruned:
        return prune(self, superseded=superseded, older_than=older_than, remove_superseded=self._prune_superseded)

    def _prune_superseded(self) -> Pruned:
        busy = self._held | {r.session_id for r in self.list_runs() if r.status is RunStatus.RUNNING}
        old_runs = [r for r in self.list_runs() if r.superseded_by and r.session_id not in busy]
        doomed_steps = [d["id"] for d in self.iter_step_dicts() if d.get("superseded") and d["session_id"] not in busy]
        counts = self._write([*(("DELETE FROM agio_steps WHERE id = ?", (sid,)) for sid in doomed_steps),
                              *(("DELETE FROM agio_events WHERE run_id = ?", (r.id,)) for r in old_runs),
                              *(("DELETE FROM agio_runs WHERE id = ?", (r.id,)) for r in old_runs)])
        n = len(doomed_steps)
        return Pruned(0, len(old_runs), sum(counts[:n]), sum(counts[n:n + len(old_runs)]))

    def compact(self, min_lines: int = 1) -> list[Any]:
        """Give freed space back (VACUUM); nothing is ever skipped."""
        self._vacuum()
        return []

    def _vacuum(self) -> None:
        raise NotImplementedError

    def _finish_releases(self) -> None:
        """Finish every release still lingering (see ``_unlock_claim``), before the connection closes."""

    def close(self) -> None:
        with self._lock:
            for session_id in list(self._held):
                self.release_session(session_id, linger=False)
            self._finish_releases()
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001 - closing anyway
                pass


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
