"""PostgresRepository: a PostgreSQL database (psycopg 3), for a team that wants its runs in one place."""

from __future__ import annotations

import functools
import hashlib
import os
import socket
import time
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from ..core import RunStatus, SessionBusyError, StoreError, scrub
from .claims import GRACE, Holder, LingeringReleases
from ..core.redact import redact_url, url_secrets
from .sql import SQLRepository, _one_line


# every change to a run, a step or a named journal is announced on this channel (``LISTEN agio_changes``):
# ``runs``, or ``journal:<name>``. No ids: a notification reaches every listener of the database, whatever
# rows their role may read (a classroom's students share one), so it says only that something changed.
NOTIFY_CHANNEL = "agio_changes"
_NOTIFY = (
    "CREATE OR REPLACE FUNCTION agio_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "IF TG_TABLE_NAME = 'agio_journal' THEN "
    "PERFORM pg_notify('agio_changes', 'journal:' || (CASE WHEN TG_OP = 'DELETE' THEN OLD.name ELSE NEW.name END)); "
    "ELSE PERFORM pg_notify('agio_changes', 'runs'); END IF; "
    "RETURN NULL; END $$",
    *(statement for table in ("agio_runs", "agio_steps", "agio_journal") for statement in (
        f"DROP TRIGGER IF EXISTS {table}_notify ON {table}",
        f"CREATE TRIGGER {table}_notify AFTER INSERT OR UPDATE OR DELETE ON {table} "
        "FOR EACH ROW EXECUTE FUNCTION agio_notify_change()")),
)


# A claim in one statement (one round trip, one transaction): try the session's lock (unless the first
# parameter says it is held already), read the row a holder that died left behind, write this holder's row
# if the lock was got, and say whether a run of the session was left ``running`` (only then is it looked at).
_CLAIM = (
    "WITH got AS (SELECT CASE WHEN %s THEN pg_try_advisory_lock(%s) ELSE TRUE END AS ok), "
    "previous AS (SELECT pid, host, what, since FROM agio_claims WHERE session_id = %s), "
    "mine AS (INSERT INTO agio_claims (session_id, pid, host, what, since) SELECT %s, %s, %s, %s, %s FROM got "
    "WHERE ok ON CONFLICT (session_id) DO UPDATE SET pid = excluded.pid, host = excluded.host, "
    "what = excluded.what, since = excluded.since) "
    "SELECT got.ok, previous.pid, previous.host, previous.what, previous.since, "
    "got.ok AND EXISTS (SELECT 1 FROM agio_runs WHERE session_id = %s AND status = %s) "
    "FROM got LEFT JOIN previous ON TRUE")
# A release in one statement: the holder's row is deleted and the lock let go. The lock may be free a moment
# before the deletion commits; a claim in that moment reads the row as a dead holder's, finds no run left
# running (the run ended before its release) and writes its own row once the deletion has committed.
_RELEASE = "WITH gone AS (DELETE FROM agio_claims WHERE session_id = %s) SELECT pg_advisory_unlock(%s)"


def _who_hint(detail: str) -> str:
    """What a refused role can do: in a classroom, only the class's members connect (``agio classroom``)."""
    if "CONNECT privilege" in detail or ("role" in detail and "does not exist" in detail):
        return (" (in a classroom each member connects as their own role: the teacher adds one with "
                "`agio classroom add-student NAME`)")
    if "no password supplied" in detail:
        return (" (in a classroom the hub gives each member's server its role in AGIO_STORE and its password in "
                "PGPASSWORD)")
    return ""


JOURNAL_WAIT_S = 10.0  # the longest an append waits for another's append to the same journal
# the longest a statement waits for a table another connection locked (``lock_timeout``): a role that may
# update a table may also LOCK it (a classroom's student, with plain SQL), which must not hang everyone else
LOCK_WAIT_S = 10.0


def _lock_key(session_id: str) -> int:
    """The advisory-lock key of a session (a stable 63-bit number)."""
    return zlib.crc32(b"agio:" + session_id.encode()) << 31 | zlib.adler32(session_id.encode())


class PostgresRepository(SQLRepository):
    """``postgresql://user:password@host:port/dbname``; the password never appears in a message."""

    placeholder = "%s"
    binary_text_order = False
    claim_grace = GRACE
    owner_from_doc = False  # a run's user is the role that wrote its row
    owner_column_type = "TEXT NOT NULL DEFAULT session_user"
    journal_conflict = "ON CONSTRAINT agio_journal_pkey"  # (name, tbl, key), or (owner, …) in a classroom

    def __init__(self, url: str, *, connect_timeout: float = 10.0):
        self.url = url
        self.root = redact_url(url)
        # local files (workspaces) of this database's sessions, in a folder of its own
        digest = hashlib.sha1(self.root.encode()).hexdigest()[:12]
        self.files_root = Path(".agio").absolute() / f"postgres-{digest}"
        self.connect_timeout = connect_timeout
        super().__init__()
        if self._query("SELECT 1 FROM agio_meta WHERE key = 'classroom'"):  # each role sees its own journals
            self.journal_scope = " AND owner = session_user"

    @functools.cached_property
    def _lingering(self) -> LingeringReleases[int]:
        """Runs' releases, by advisory-lock key (see ``_unlock_claim``); made on first use, which can
        be the recovery of interrupted runs while the store opens, under the connection's lock."""
        return LingeringReleases(lambda session_id, _key: self._unlock_now(session_id), guard=self._lock)

    def _connect(self) -> Any:
        try:
            import psycopg
        except ImportError:
            raise StoreError("a postgresql:// store needs psycopg: pip install 'agio-notebook[postgres]'") from None
        try:
            # autocommit: a read is one round trip (no BEGIN before it, no ROLLBACK after it to see later
            # commits); a write opens its transaction itself (``_begin``). Statements are prepared the first
            # time (not the sixth): a run's are the same every run, and a class that starts at once otherwise
            # has the server parse and plan them all at the same moment
            conn = psycopg.connect(self.url, connect_timeout=max(1, int(self.connect_timeout)), autocommit=True,
                                   prepare_threshold=0)
            try:
                conn.execute("SELECT set_config('lock_timeout', %s, false)", (f"{max(1, int(LOCK_WAIT_S * 1000))}ms",))
            except psycopg.Error:
                conn.close()
                raise
            return conn
        except psycopg.Error as exc:  # libpq quotes the token it could not parse: it may be the password
            detail = scrub(" ".join(str(exc).split()), url_secrets(self.url))
            raise StoreError(f"cannot connect to the PostgreSQL store at {self.root}: {detail}{_who_hint(detail)}") from None

    @contextmanager
    def _atomically(self, cur: Any, blind: bool) -> Iterator[None]:
        if not blind:
            cur.execute("BEGIN")
            yield
            self._conn.commit()
        else:  # a commit's rows travel together, in one round trip; the statements a pipeline sends before
            with self._conn.pipeline():  # its sync are one transaction (the protocol's), so no BEGIN or COMMIT
                yield

    def _begin(self, cur: Any) -> None:
        cur.execute("BEGIN")

    # a restarted server (or a dropped network) breaks the connection: the call that meets it fails with
    # one line, and the next one connects again, taking back the sessions this process had claimed
    def _ensure_connected(self) -> None:
        if not (self._conn.closed or self._conn.broken):
            return
        self._conn = self._connect()
        for session_id in sorted(self._held):
            if not self._query("SELECT pg_try_advisory_lock(%s)", (_lock_key(session_id),))[0][0]:
                self._held.discard(session_id)  # taken meanwhile by another process: its claim now

    def _check_connection(self, exc: Exception) -> None:
        if self._conn.closed or self._conn.broken:
            detail = scrub(_one_line(exc), url_secrets(self.url))
            raise StoreError(f"lost the connection to the PostgreSQL store at {self.root} (the database restarted "
                             f"or the network dropped: {detail}); what this call wrote is not confirmed, and the "
                             "next call connects again") from None

    def _check_locked(self, exc: Exception, what: str) -> None:
        import psycopg

        if isinstance(exc, psycopg.errors.LockNotAvailable):
            raise StoreError(f"the store at {self.root} stayed locked by another connection for {LOCK_WAIT_S:g} s; "
                             f"nothing was {what}: try again, and if it lasts, its administrator finds the holder "
                             "(SELECT a.usename, a.pid FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE "
                             "l.mode = 'AccessExclusiveLock') and ends it (SELECT pg_terminate_backend(pid))") from None

    def _table_columns(self, cur: Any, table: str) -> set[str]:
        cur.execute("SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attnum > 0 "
                    "AND NOT attisdropped", (table,))
        return {row[0] for row in cur.fetchall()}

    def _lock_setup(self, cur: Any) -> None:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key("setup"),))

    def _upgrade(self, cur: Any) -> None:
        super()._upgrade(cur)
        # a claim means something only while its holder's connection (and advisory lock) lives, and a server
        # that crashed has none left: its rows need no WAL, and taking or dropping one waits for no disk flush
        cur.execute("ALTER TABLE agio_claims SET UNLOGGED")
        for statement in _NOTIFY:
            cur.execute(statement)

    def _setup_hint(self, exc: Exception) -> str:
        import psycopg

        if isinstance(exc, psycopg.errors.InsufficientPrivilege):
            return (" (this role may read and write rows but not change the tables, which this version of "
                    "agio-notebook needs once: open the store once with its owner's URL, or run "
                    "`agio classroom init` again)")
        return ""

    def _is_unique_violation(self, exc: Exception) -> bool:
        import psycopg

        return isinstance(exc, psycopg.errors.UniqueViolation)

    # claims: a session-level advisory lock, which PostgreSQL drops when the holder's connection ends
    # (its process died), plus a row naming the holder. Like a claim file's lock, a run's release
    # lingers a moment (``LINGER``) and another process's claim retries a while (``claim_grace``), so
    # no other process slips in between two runs of a loop here.
    def _lock_claim(self, session_id: str, what: str) -> tuple[Holder | None, bool]:
        # a session released here a moment ago is still ours (its lock held): taken back without trying it
        taken_back = self._lingering.take_back(session_id) is not None
        ok, *previous, left = self._query(_CLAIM, (
            not taken_back, _lock_key(session_id), session_id,
            session_id, os.getpid(), socket.gethostname(), what, time.time(),
            session_id, RunStatus.RUNNING.value))[0]
        holder = Holder(*previous) if previous[0] is not None else None
        if not ok:
            raise SessionBusyError(f"session {session_id} is in use by {(holder or Holder()).describe()}; wait for "
                                   "it to finish, or let this run wait (ExecutionConfig.session_wait)")
        return (None if taken_back else holder), bool(left)

    def _unlock_claim(self, session_id: str, *, linger: bool = True) -> None:
        if linger:
            self._lingering.defer(session_id, _lock_key(session_id))
        else:
            self._unlock_now(session_id)

    def _unlock_now(self, session_id: str) -> None:
        key = _lock_key(session_id)
        try:  # one round trip: the holder's row goes with the lock (see _RELEASE)
            self._query(_RELEASE, (session_id, key))
        except StoreError:
            raise
        except Exception:  # noqa: BLE001 - the row could not go: the lock still must
            self._query("SELECT pg_advisory_unlock(%s)", (key,))
            raise

    def _finish_releases(self) -> None:
        self._lingering.close()

    def session_releasing(self, session_id: str) -> bool:
        """Released by this process a moment ago, its lock still held (a claim takes it back at once)."""
        return self._lingering.pending(session_id) is not None

    def _holder_row(self, session_id: str) -> Holder | None:
        rows = self._query("SELECT pid, host, what, since FROM agio_claims WHERE session_id = %s", (session_id,))
        return Holder(*rows[0]) if rows else None

    def session_holder(self, session_id: str) -> Holder | None:
        if session_id in self._held:
            return self._holder_row(session_id)
        key = _lock_key(session_id)
        if self._query("SELECT pg_try_advisory_lock(%s)", (key,))[0][0]:
            self._query("SELECT pg_advisory_unlock(%s)", (key,))
            return None
        return self._holder_row(session_id) or Holder()

    def _journal_lock(self, cur: Any, name: str) -> None:
        """Appends to one journal one at a time, so versions follow commit order; waited for at most
        ``JOURNAL_WAIT_S`` (a lock held elsewhere, say by a student's own SQL, is one line, never a hang).
        Asked for without waiting, again and again, so that no setting outlives the lock."""
        key, deadline, pause = _lock_key("journal:" + name), time.monotonic() + JOURNAL_WAIT_S, 0.002
        while not cur.execute("SELECT pg_try_advisory_xact_lock(%s)", (key,)).fetchone()[0]:
            if time.monotonic() >= deadline:
                raise StoreError(f"the journal {name!r} stayed locked by another connection for "
                                 f"{JOURNAL_WAIT_S:g} s; nothing was written")
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def _vacuum(self) -> None:
        with self._lock:
            self._conn.execute("VACUUM")  # outside a transaction: the connection commits each statement
