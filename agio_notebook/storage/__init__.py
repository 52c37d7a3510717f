"""Storage: the Repository protocol, an in-memory repository and the TinyDB store."""

from __future__ import annotations

import os
from pathlib import Path

from .base import Repository, iter_events
from .damage import Damage, StoreDamageWarning
from .reports import Pruned, Repaired, SessionSize, StoreStats
from .journal import JournalStorage
from .layout import store_root
from .memory import InMemoryRepository
from .tinydb_repo import TinyDBRepository

_open: dict[Path, TinyDBRepository] = {}


def open_repository(path: str | os.PathLike[str] | None = None) -> TinyDBRepository:
    """The process-wide repository for a store path (default: ``AGIO_STORE`` or ``./.agio``).

    One instance per path, so the engine, frames and magics share caches and file handles.
    """
    key = store_root(path).absolute()
    repo = _open.get(key)
    if repo is None:
        repo = _open[key] = TinyDBRepository(key)
    return repo


__all__ = ["Damage", "InMemoryRepository", "JournalStorage", "Pruned", "Repaired", "Repository", "SessionSize",
           "StoreDamageWarning", "StoreStats", "TinyDBRepository", "iter_events", "open_repository", "store_root"]
