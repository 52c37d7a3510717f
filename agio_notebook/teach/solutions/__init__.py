"""Reference solutions, one module per exercise: ``SOURCE``, the cell a learner could have written (shown by
``exercise(NAME).solution()`` and put into the graders' assignments), and ``ENTRY``, the name it defines.

``solutions(NAME).reference`` is that cell run, so what is shown is what the tests check. The wrong
solutions each exercise must reject live in the tests (``tests/test_exercises_battery.py``).
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType
from typing import Any

_run: dict[str, Any] = {}


def solutions(name: str) -> ModuleType:
    """The solutions module of exercise ``name``."""
    return import_module(f"{__name__}.{name}")


def reference(name: str) -> Any:
    """The reference solution of exercise ``name``: its ``SOURCE`` run once, its ``ENTRY`` taken."""
    if name not in _run:
        module = solutions(name)
        namespace: dict[str, Any] = {"__name__": f"agio_reference_{name}"}
        exec(compile(module.SOURCE, f"<reference solution of {name}>", "exec"), namespace)  # noqa: S102 - our own code
        _run[name] = namespace[module.ENTRY]
    return _run[name]


def source(name: str) -> str:
    return solutions(name).SOURCE.strip("\n")
