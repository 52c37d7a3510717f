"""SQLiteRepository: one SQLite file in WAL mode, for a long-lived personal store of millions of steps."""

from __future__ import annotations

import importlib.util
import os
import sqlite3
import subprocess
import sys
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

    # below this many steps the whole-store frame is read here; above, a reader process pays for itself
    arrow_threshold = 100_000

    def step_columns(self, session_id: str | None = None) -> dict[str, Sequence[Any]]:
        """The frame's columns; a large whole-store frame read into Arrow by a child process.

        A million rows through ``sqlite3`` cost a Python tuple each and an object per value. With the
        ``sqlite`` extra, a child process reads them in C through the ADBC driver (its own SQLite
        library must not share this process with ``sqlite3``: see ``sqlite_arrow``) into an in-memory
        file this process maps back; pandas takes the Arrow columns as they are.
        """
        if session_id is not None or not hasattr(os, "memfd_create") \
                or importlib.util.find_spec("adbc_driver_sqlite") is None \
                or self._query("SELECT COUNT(*) FROM agio_steps")[0][0] < self.arrow_threshold:
            return super().step_columns(session_id)
        import pyarrow as pa

        reader = Path(__file__).with_name("sqlite_arrow.py")
        fd = os.memfd_create("agio-frame")  # memory only: no disk, no size limit of a mounted tmpfs
        try:
            proc = subprocess.run([sys.executable, str(reader), str(self.path), ", ".join(FRAME_COLUMNS),
                                   f"/proc/self/fd/{fd}"], pass_fds=(fd,), capture_output=True, text=True)
            if proc.returncode != 0:
                lines = proc.stderr.strip().splitlines()
                raise StoreError(f"cannot read the SQLite store at {self.path}: "
                                 f"{lines[-1] if lines else f'the reader exited with {proc.returncode}'}")
            # the columns stay in that memory, uncopied (the mapping lives as long as they do)
            table = pa.ipc.open_stream(pa.memory_map(f"/proc/self/fd/{fd}")).read_all()
        finally:
            os.close(fd)
        return {name: table.column(name) for name in FRAME_COLUMNS}

    def _is_unique_violation(self, exc: Exception) -> bool:
        return isinstance(exc, sqlite3.IntegrityError)

    def _table_columns(self, cur: Any, table: str) -> set[str]:
        return {row[1] for row in cur.execute(f"PRAGMA table_info({table})").fetchall()}

    # claims: a lease file per session beside the database, held with flock (as the TinyDB store does)
    def _claim_file(self, session_id: str) -> Path:
        self.claims_dir.mkdir(exist_ok=True)
        return self.claims_dir / session_file_name(session_id).replace(".jsonl", ".claim")

    def _lock_claim(self, session_id: str, what: str) -> tuple[Holder | None, bool]:
        return self._claims.claim(session_id, self._claim_file(session_id), what), True

    def _unlock_claim(self, session_id: str, *, linger: bool = True) -> None:
        self._claims.release(session_id, linger=linger)

    def _finish_releases(self) -> None:
        self._claims.flush()  # releases still pending on the worker thread are finished now

    def session_releasing(self, session_id: str) -> bool:
        """Released by this process a moment ago, its lock still held (a claim takes it back at once)."""
        return self._claims.releasing(session_id)

    def session_holder(self, session_id: str) -> Holder | None:
        if self._claims.releasing(session_id):
            return None
        return ClaimFiles.holder(self._claim_file(session_id))

    def _vacuum(self) -> None:
        with self._lock:
            self._conn.execute("VACUUM")
