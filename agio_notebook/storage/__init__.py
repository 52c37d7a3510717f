"""Storage: the Repository protocol, an in-memory repository, the TinyDB store (the default), and
SQLite and PostgreSQL stores chosen by URL."""

from __future__ import annotations

import os

from ..core import StoreError
from .base import Repository, iter_events
from .damage import Damage, StoreDamageWarning
from .reports import Pruned, Repaired, SessionSize, StoreStats
from .journal import JournalStorage
from .layout import store_root
from .memory import InMemoryRepository
from .run_query import RunFilter, RunPage
from .tinydb_repo import TinyDBRepository

_open: dict[object, Repository] = {}


def _from_url(url: str) -> Repository:
    scheme = url.split("://", 1)[0].lower()
    if scheme == "sqlite":
        from .sqlite_repo import SQLiteRepository

        path = url[len("sqlite:///"):] if url.startswith("sqlite:///") else ""
        if not path:
            raise StoreError(f"a SQLite store URL names a file: sqlite:///relative.db or sqlite:////absolute.db, "
                             f"got {url!r}")
        return SQLiteRepository(path)
    if scheme in ("postgresql", "postgres"):
        from .postgres_repo import PostgresRepository

        return PostgresRepository(url)
    raise StoreError(f"unknown store URL scheme {scheme!r}: use a directory path (TinyDB), sqlite:///FILE or "
                     "postgresql://…")


def new_repository(target: str | os.PathLike[str] | None = None) -> Repository:
    """A new repository instance for a store path or URL (``open_repository`` shares one per store)."""
    if target is None:
        target = os.environ.get("AGIO_STORE") or None
    if isinstance(target, str) and "://" in target:
        return _from_url(target)
    return TinyDBRepository(store_root(target))


def open_repository(target: str | os.PathLike[str] | None = None) -> Repository:
    """The process-wide repository for a store (default: ``AGIO_STORE`` or ``./.agio``).

    A path is a TinyDB store directory; ``sqlite:///file.db`` and ``postgresql://…`` choose the SQL
    backends.  One instance per store, so the engine, frames and magics share caches and connections.
    """
    if target is None:
        target = os.environ.get("AGIO_STORE") or None
    if isinstance(target, str) and "://" in target:
        repo = _open.get(target)
        if repo is None:
            repo = _open[target] = _from_url(target)
        return repo
    key = store_root(target).absolute()
    repo = _open.get(key)
    if repo is None:
        repo = _open[key] = TinyDBRepository(key)
    return repo


def existing_store(target: str | os.PathLike[str] | None = None) -> Repository:
    """``open_repository`` for a store that must already exist: a missing directory or SQLite file, or a
    database that cannot be reached, is one clear error instead of a new empty store."""
    if target is None:
        target = os.environ.get("AGIO_STORE") or None
    missing = missing_store(target)
    if missing is not None:
        raise StoreError(missing if missing.startswith("no SQLite") else f"{missing} (run an agent there first, or "
                                                                           "pass --store)")
    return open_repository(target)


def missing_store(target: str | os.PathLike[str] | None) -> str | None:
    """Why ``target`` holds no store yet (a directory or SQLite file that is not there), or None: opening it
    would make an empty one. A database URL is taken as there (connecting says otherwise)."""
    if isinstance(target, str) and target.startswith("sqlite:///"):
        path = os.path.expanduser(target[len("sqlite:///"):])
        return None if os.path.isfile(path) else f"no SQLite store at {target}"
    if not (isinstance(target, str) and "://" in target) and not store_root(target).is_dir():
        return f"no store at {store_root(target)}"
    return None


def current_store(repository: Repository | None = None) -> Repository:
    """``repository``, or the process-wide default store: what every function taking one defaults to."""
    return repository if repository is not None else open_repository()


def __getattr__(name: str) -> object:
    # the SQL backends load on first use (psycopg is an optional extra)
    if name == "SQLiteRepository":
        from .sqlite_repo import SQLiteRepository

        return SQLiteRepository
    if name == "PostgresRepository":
        from .postgres_repo import PostgresRepository

        return PostgresRepository
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Damage", "InMemoryRepository", "JournalStorage", "PostgresRepository", "Pruned", "Repaired", "Repository", "RunFilter", "RunPage",
           "SQLiteRepository", "SessionSize", "StoreDamageWarning", "StoreStats", "TinyDBRepository", "current_store",
           "existing_store", "missing_store", "iter_events",
           "new_repository", "open_repository", "store_root"]
