"""SQLiteRepository: one SQLite file in WAL mode, for a long-lived personal store of millions of steps."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any, Sequence

from ..core import StoreError
from .claims import ClaimFiles, Holder
from .layout import session_file_name
from .sql import FRAME_COLUMNS, SQLRepository


class SQLiteRepository(SQLRepository):
    """``sqlite:///relative.db`` or ``sqlite:////absolute/path.db``; several kernels may share the file.

    WAL lets readers run beside a writer; ``synchronous=FULL`` fsyncs every commit, so a commit that
    returned survives a crash; ``lock_timeout`` is how long a writer waits for another process's write.
    """

    def __init__(self, path: str | os.PathLike[str], *, lock_timeout: float = 10.0):
        self.path = Path(path).expanduser()
        self.root = str(self.path)
        self.lock_timeout = lock_timeout
        self.claims_dir = self.path.with_name(self.path.name + ".claims")
        self.files_root = self.path.with_name(self.path.name + ".files")  # workspaces and other local files
        self._claims = ClaimFiles()
        super().__init__()

    def _connect(self) -> Any:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=self.lock_timeout, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            return conn
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the SQLite store at {self.path}: {exc}") from None

    def step_columns(self, session_id: str | None = None) -> dict[str, Sequence[Any]]:
        """The whole store's frame columns read straight into Arrow when the ``sqlite`` extra is there.

        A million rows through ``sqlite3`` cost a Python tuple each and a value object per column;
        the ADBC driver reads them in C (3x faster), and pandas takes the Arrow columns as they are.
        One session's frame is small, so it keeps the shared connection.
        """
        if session_id is not None:
            return super().step_columns(session_id)
        try:
            import adbc_driver_sqlite.dbapi as adbc
            from adbc_driver_sqlite import StatementOptions
        except ImportError:
            return super().step_columns(session_id)
        try:
            with adbc.connect(str(self.path)) as conn, conn.cursor() as cur:
                # one batch: the driver infers each column's type from the batch it reads, so a column
                # whose first thousand values are NULL (a cost, an error) would not type the rest
                cur.adbc_statement.set_options(**{StatementOptions.BATCH_ROWS.value: str(2 ** 30)})
                cur.execute(f"SELECT {', '.join(FRAME_COLUMNS)} FROM agio_steps ORDER BY session_id, sequence, attempt")
                table = cur.fetch_arrow_table()
        except Exception as exc:  # noqa: BLE001 - the driver's own error classes: one clear line
            raise StoreError(f"cannot read the SQLite store at {self.path}: {exc}") from None
        return {name: table.column(name) for name in FRAME_COLUMNS}

    def _is_unique_violation(self, exc: Exception) -> bool:
        return isinstance(exc, sqlite3.IntegrityError)

    # claims: a lease file per session beside the database, held with flock (as the TinyDB store does)
    def _claim_file(self, session_id: str) -> Path:
        self.claims_dir.mkdir(exist_ok=True)
        return self.claims_dir / session_file_name(session_id).replace(".jsonl", ".claim")

    def _lock_claim(self, session_id: str, what: str) -> Holder | None:
        return self._claims.claim(session_id, self._claim_file(session_id), what)

    def _unlock_claim(self, session_id: str) -> None:
        self._claims.release(session_id)

    def session_holder(self, session_id: str) -> Holder | None:
        return ClaimFiles.holder(self._claim_file(session_id))

    def _vacuum(self) -> None:
        with self._lock:
            self._conn.execute("VACUUM")
