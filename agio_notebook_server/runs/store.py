"""The store the Runs panel shows, as the Jupyter server sees it.

It is found the way a kernel finds it: ``AGIO_STORE`` (which the server's kernels inherit), else ``.agio``
in the server's root directory. It is opened only once it exists (the panel never makes an empty store),
read on one worker thread of its own (the server's event loop never waits on a disk or a database), and
every failure is one line: no store yet, a store that is locked or damaged, a database that is down.

The server's event loop never imports the engine. As the server starts, ``warm`` has the worker thread import
it, open the store and ask the panel's first page once, so the panel's first request finds all of it done;
one that comes sooner waits for no more than that work (the store's open reads little: see the TinyDB
store's run query index, ``agio_notebook/storage/run_index_follow.py``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)

# a reader of the panel waits this long for a lock another process holds, then says so in one line
LOCK_TIMEOUT = 2.0
QUERY_CHARS = 160  # of a run's query, shown in its row


class PanelError(Exception):
    """One line for the panel; ``status`` is the HTTP status it is sent with."""

    def __init__(self, message: str, status: int = 503):
        super().__init__(message)
        self.status = status


class PanelStore:
    def __init__(self, root_dir: str | os.PathLike[str], target: str | None = None):
        self.root_dir = Path(root_dir).expanduser().resolve()
        self.target = target if target is not None else (os.environ.get("AGIO_STORE") or None)
        self._repository: Any = None
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="agio-panel")
        self._met: list[str] = []  # damage the warming met, told with the next answer

    # -- where --------------------------------------------------------------------------------
    @property
    def kind(self) -> str:
        target = self.target or ""
        if target.startswith(("postgresql://", "postgres://")):
            return "postgres"
        return "sqlite" if target.startswith("sqlite://") else "tinydb"

    @property
    def path(self) -> Path | None:
        """The directory (TinyDB) or file (SQLite) of a store on disk; None for a database server."""
        if self.kind == "postgres":
            return None
        if self.kind == "sqlite":
            return self._resolve(self.target[len("sqlite:///"):])  # type: ignore[index]
        return self._resolve(self.target or ".agio")

    def _resolve(self, path: str) -> Path:
        p = Path(path).expanduser()
        return p if p.is_absolute() else self.root_dir / p

    @property
    def where(self) -> str:
        """The store as messages name it (a database URL without its password)."""
        if self.kind == "postgres":
            from agio_notebook.core.redact import redact_url

            return redact_url(self.target or "")
        path = self.path
        assert path is not None
        try:
            return str(path.relative_to(self.root_dir)) or "."
        except ValueError:
            return str(path)

    def exists(self) -> bool:
        if self.kind == "postgres":
            return True  # a connection says whether it is there
        path = self.path
        assert path is not None
        return path.is_file() if self.kind == "sqlite" else (path / "meta.json").is_file()

    def none_yet(self) -> str:
        return (f"no agio store yet at {self.where}: run a %%agio cell (or set AGIO_STORE before starting "
                "JupyterLab) and its runs appear here")

    # -- reading -----------------------------------------------------------------------------
    def repository(self) -> Any:
        """The open repository (opened on first use, on the worker thread)."""
        if self._repository is None:
            if not self.exists():
                raise PanelError(self.none_yet(), 404)
            from agio_notebook.storage import new_repository
            from agio_notebook.storage.sqlite_repo import SQLiteRepository
            from agio_notebook.storage.tinydb_repo import TinyDBRepository

            if self.kind == "tinydb":
                self._repository = TinyDBRepository(self.path, lock_timeout=LOCK_TIMEOUT)
            elif self.kind == "sqlite":
                self._repository = SQLiteRepository(self.path, lock_timeout=LOCK_TIMEOUT)  # type: ignore[arg-type]
            else:
                self._repository = new_repository(self.target)
        return self._repository

    def warm(self) -> None:
        """Open the store and ask the panel's first questions on the worker thread, now (the server starts)."""
        self._worker.submit(self._warm)

    def _warm(self) -> None:
        if not self.exists():
            return
        try:
            from agio_notebook.storage import RunFilter

            self._met = self._guarded(lambda: (self.repository().query_runs(RunFilter(), 50),
                                               self.repository().run_facets()))[1]
        except Exception:  # noqa: BLE001 - the panel's own request meets it again, and says it in one line
            log.debug("agio panel: the store could not be opened ahead of the panel", exc_info=True)

    async def call(self, fn: Callable[[], T]) -> tuple[T, list[str]]:
        """``fn()`` on the worker thread: its result and the damage it met (one line each)."""
        return await asyncio.get_running_loop().run_in_executor(self._worker, self._guarded, fn)

    def _guarded(self, fn: Callable[[], T]) -> tuple[T, list[str]]:
        from agio_notebook.core import AgioError, NotFoundError
        from agio_notebook.storage import StoreDamageWarning

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", StoreDamageWarning)
            try:
                result = fn()
            except PanelError:
                raise
            except NotFoundError as exc:
                raise PanelError(_line(exc), 404) from None
            except AgioError as exc:
                if self._repository is not None and self.kind != "postgres" and not self.exists():
                    self.close()  # the store was deleted under us: start over when it is back
                raise PanelError(_line(exc), 400 if _is_usage(exc) else 503) from None
            except Exception as exc:  # noqa: BLE001 - a store fault the engine did not word: still one line
                raise PanelError(f"cannot read the store at {self.where}: {_line(exc)}") from None
        damage = [_line(w.message) for w in caught if issubclass(w.category, StoreDamageWarning)]
        met, self._met = self._met, []
        return result, list(dict.fromkeys(met + damage))

    def close(self) -> None:
        if self._repository is not None:
            try:
                self._repository.close()
            finally:
                self._repository = None

    def shutdown(self) -> None:
        self._worker.submit(self.close).result(timeout=30)
        self._worker.shutdown(wait=False)


def _line(value: Any) -> str:
    return " ".join(str(value).split())


def _is_usage(exc: Exception) -> bool:
    from agio_notebook.core import InvalidOperationError, SessionBusyError

    return isinstance(exc, InvalidOperationError) and not isinstance(exc, SessionBusyError)
