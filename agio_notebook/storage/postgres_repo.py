"""PostgresRepository: a PostgreSQL database (psycopg 3), for a team that wants its runs in one place."""

from __future__ import annotations

import hashlib
import os
import socket
import time
import zlib
from pathlib import Path
from typing import Any

from ..core import SessionBusyError, StoreError, scrub
from .claims import Holder
from ..core.redact import redact_url, url_secrets
from .sql import SQLRepository


def _lock_key(session_id: str) -> int:
    """The advisory-lock key of a session (a stable 63-bit number)."""
    return zlib.crc32(b"agio:" + session_id.encode()) << 31 | zlib.adler32(session_id.encode())


class PostgresRepository(SQLRepository):
    """``postgresql://user:password@host:port/dbname``; the password never appears in a message."""

    placeholder = "%s"
    binary_text_order = False

    def __init__(self, url: str, *, connect_timeout: float = 10.0):
        self.url = url
        self.root = redact_url(url)
        # local files (workspaces) of this database's sessions, in a folder of its own
        digest = hashlib.sha1(self.root.encode()).hexdigest()[:12]
        self.files_root = Path(".agio").absolute() / f"postgres-{digest}"
        self.connect_timeout = connect_timeout
        super().__init__()

    def _connect(self) -> Any:
        try:
            import psycopg
        except ImportError:
            raise StoreError("a postgresql:// store needs psycopg: pip install 'agio-notebook[postgres]'") from None
        try:
            return psycopg.connect(self.url, connect_timeout=max(1, int(self.connect_timeout)))
        except psycopg.Error as exc:  # libpq quotes the token it could not parse: it may be the password
            detail = scrub(" ".join(str(exc).split()), url_secrets(self.url))
            raise StoreError(f"cannot connect to the PostgreSQL store at {self.root}: {detail}") from None

    def _end_read(self) -> None:
        self._conn.rollback()

    def _is_unique_violation(self, exc: Exception) -> bool:
        import psycopg

        return isinstance(exc, psycopg.errors.UniqueViolation)

    # claims: a session-level advisory lock, which PostgreSQL drops when the holder's connection ends
    # (its process died), plus a row naming the holder
    def _lock_claim(self, session_id: str, what: str) -> Holder | None:
        got = self._query("SELECT pg_try_advisory_lock(%s)", (_lock_key(session_id),))[0][0]
        if not got:
            holder = self._holder_row(session_id) or Holder()
            raise SessionBusyError(f"session {session_id} is in use by {holder.describe()}; wait for it to finish, "
                                   "or let this run wait (ExecutionConfig.session_wait)")
        previous = self._holder_row(session_id)  # a row left behind: its holder died without releasing
        self._write([("INSERT INTO agio_claims (session_id, pid, host, what, since) VALUES (?, ?, ?, ?, ?) "
                      "ON CONFLICT (session_id) DO UPDATE SET pid = excluded.pid, host = excluded.host, "
                      "what = excluded.what, since = excluded.since",
                      (session_id, os.getpid(), socket.gethostname(), what, time.time()))])
        return previous

    def _unlock_claim(self, session_id: str, *, linger: bool = True) -> None:
        try:
            self._write([("DELETE FROM agio_claims WHERE session_id = ?", (session_id,))])
        finally:
            self._query("SELECT pg_advisory_unlock(%s)", (_lock_key(session_id),))

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
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key("journal:" + name),))

    def _vacuum(self) -> None:
        with self._lock:
            self._conn.commit()
            self._conn.autocommit = True
            try:
                self._conn.execute("VACUUM")
            finally:
                self._conn.autocommit = False
