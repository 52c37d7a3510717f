"""The scheduler's one-line errors."""

from __future__ import annotations

from ..core import AgioError


class SchedulingError(AgioError, ValueError):
    """A batch, plan or execution request that cannot be accepted as given (bad input, bad state)."""
