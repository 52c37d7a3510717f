"""Own stores: a notebook (a tutorial) that keeps its runs, memory and workspaces apart from every other.

``%agio config --own-store NAME`` points the kernel at ``<default store>.NAME``, a TinyDB store beside the
default one (``.agio`` -> ``.agio.quickstart``): the magics and the Python API (frames, memory, runners
with no repository) all use it, so a stray write in one tutorial never reaches another's runs or
prompts. ``%agio runs --every-store`` lists the runs of the default store and of every own store beside
it, in one table with a ``store`` column.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from .. import frames
from ..core import InvalidOperationError
from ..storage import InMemoryRepository, open_repository
from ..storage.layout import store_root

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
DEFAULT = "(default)"


def own_store(base: str, name: str) -> Path:
    """Where the own store ``name`` of the default store ``base`` (its path: ``.agio`` unless configured) lives."""
    if not _NAME.match(name):
        raise InvalidOperationError(f"an own store's name is letters, digits, '-' and '_' (up to 64), got {name!r}")
    if base is not None and "://" in base:
        raise InvalidOperationError(f"own stores sit beside a TinyDB store directory, not {base.split('://')[0]}:// "
                                    "(use --store with a URL of its own)")
    root = store_root(base)
    return root.with_name(f"{root.name}.{name}")


def every_store(base: str) -> list[tuple[str, Path]]:
    """(name, path) of the default store and of each own store beside it that exists, default first."""
    root = store_root(base)
    found = [(DEFAULT, root)] if root.is_dir() else []
    parent = root.parent if str(root.parent) else Path(".")
    found += sorted((p.name[len(root.name) + 1:], p) for p in parent.glob(f"{root.name}.*")
                    if p.is_dir() and _NAME.match(p.name[len(root.name) + 1:]) and (p / "meta.json").exists())
    return found


def every_run(base: str) -> pd.DataFrame:
    """``frames.runs()`` of every store of :func:`every_store`, one table, a ``store`` column first."""
    parts = []
    for name, path in every_store(base):
        runs = frames.runs(repository=open_repository(path))
        runs.insert(0, "store", pd.Series([name] * len(runs), dtype="string"))
        parts.append(runs)
    if not parts:  # no store yet: the columns, no rows (and no store made just to list nothing)
        empty = frames.runs(repository=InMemoryRepository())
        empty.insert(0, "store", pd.Series(dtype="string"))
        return empty
    return pd.concat(parts, ignore_index=True).sort_values("started_at", kind="stable", ignore_index=True)
