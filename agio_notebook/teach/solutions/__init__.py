"""Reference solutions, and wrong ones with the reason a learner should read, one module per exercise.

Each module has ``reference`` and ``WRONG``: ``[(solution, words the failing reason contains), ...]``.
The tests check that the reference passes and that every wrong solution fails for that reason.
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType


def solutions(name: str) -> ModuleType:
    """The solutions module of exercise ``name``."""
    return import_module(f"{__name__}.{name}")
