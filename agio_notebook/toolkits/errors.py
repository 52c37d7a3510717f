"""Errors of the built-in actions: each is one line, shown to the model as the tool's error result."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from ..core import AgioError


class ActionError(AgioError):
    """An action was refused or failed (blocked path, blocked address, limit reached, timeout)."""


class IsolationUnavailable(ActionError):
    """No OS isolation can be had here; the sandbox refuses unless a weaker level was chosen."""



def check_positive(limits: Any, zero_ok: tuple[str, ...] = ()) -> None:
    """Every numeric field of a limits dataclass must be positive (or zero, for ``zero_ok``)."""
    for f in fields(limits):
        value = getattr(limits, f.name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if value < 0 or (value == 0 and f.name not in zero_ok):
                raise ActionError(f"{type(limits).__name__}.{f.name} must be "
                                  f"{'zero or more' if f.name in zero_ok else 'positive'}, got {value!r}")
