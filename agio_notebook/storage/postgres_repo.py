"""PostgresRepository: a PostgreSQL database (psycopg 3), for a team that wants its runs in one place."""

from __future__ import annotations

from typing import Any

from ..core import StoreError
from .sql import SQLRepository, redact_url


class PostgresRepository(SQLRepository):
    """``postgresql://user:password@host:port/dbname``; the password never appears in a message."""

    placeholder = "%s"

    def __init__(self, url: str, *, connect_timeout: float = 10.0):
        self.url = url
        self.root = redact_url(url)
        self.connect_timeout = connect_timeout
        super().__init__()

    def _connect(self) -> Any:
        try:
            import psycopg
        except ImportError:
            raise StoreError("a postgresql:// store needs psycopg: pip install 'agio-notebook[postgres]'") from None
        try:
            return psycopg.connect(self.url, connect_timeout=max(1, int(self.connect_timeout)))
        except psycopg.Error as exc:
            raise StoreError(f"cannot connect to the PostgreSQL store at {self.root}: "
                             f"{' '.join(str(exc).split())}") from None

    def _end_read(self) -> None:
        self._conn.rollback()
