"""A batch's options, checked and put in their one form before anything is stored or queued.

Every check raises one :class:`SchedulingError` line naming the option, what was given and what to
write instead. A value that got into the queue unchecked (``priority=None``) would break the queue's
ordering for every other batch; a refused batch must leave nothing behind.

What is accepted, and why:

- whole numbers (``concurrency``, ``retries``, token budgets) are ``int``; a string such as ``"4"`` is
  refused (Python callers write ``4``; the ``%agio batch`` magic converts its flags itself), so is a
  bool and a float;
- ``priority`` is any finite real number (``0.5`` sorts between 0 and 1); ``None`` and names such as
  ``"high"`` are refused;
- seconds and dollars (``timeout``, ``retry_delay``, ``batch_max_cost``) are finite real numbers;
- ``rate_limit`` is a :class:`RateLimit`, or a dict of ``rpm``/``tpm``/``endpoint``, or ``{"rps": n}``
  (``n`` model calls in any one-second window). A bare number is refused: it does not say per what.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from .errors import SchedulingError
from .limits import RateLimit


def _kind(value: Any) -> str:
    return f"{value!r} (a {type(value).__name__})"


def whole(name: str, value: Any, *, minimum: int, optional: bool = False) -> int | None:
    """An ``int`` of at least ``minimum`` (None allowed when ``optional``)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        hint = f"; write {name}={value.strip()}" if isinstance(value, str) and value.strip().isdigit() else ""
        raise SchedulingError(f"{name} must be a whole number >= {minimum}, got {_kind(value)}{hint}")
    if value < minimum:
        raise SchedulingError(f"{name} must be at least {minimum}, got {value}")
    return int(value)


def real(name: str, value: Any, *, positive: bool = False, optional: bool = False, what: str = "") -> float | None:
    """A finite real number (> 0 when ``positive``, else >= 0); None allowed when ``optional``."""
    if value is None and optional:
        return None
    what = what or ("a number > 0" if positive else "a number >= 0")
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise SchedulingError(f"{name} must be {what}, got {_kind(value)}")
    if value < 0 or (positive and value == 0):
        raise SchedulingError(f"{name} must be {what}, got {value!r}")
    return value  # type: ignore[return-value]


def priority(value: Any) -> float:
    """Higher runs first; any finite number."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise SchedulingError(f"priority must be a number (higher runs first, default 0), got {_kind(value)}")
    return value  # type: ignore[return-value]


_RATE_KEYS = ("rpm", "tpm", "rps", "endpoint", "period")


def rate_limit(value: Any) -> RateLimit | None:
    """A :class:`RateLimit` from the forms a user writes (see the module's docstring)."""
    if value is None or isinstance(value, RateLimit):
        return value
    if isinstance(value, bool) or isinstance(value, numbers.Real):
        raise SchedulingError(f"rate_limit={value!r} does not say per what: write rate_limit={{'rpm': {value!r}}} "
                              f"(model calls per minute) or {{'rps': {value!r}}} (per second)")
    if not isinstance(value, dict):
        raise SchedulingError(f"rate_limit must be a RateLimit or a dict such as {{'rpm': 600}}, got {_kind(value)}")
    unknown = sorted(str(k) for k in value if k not in _RATE_KEYS)
    if unknown:
        raise SchedulingError(f"rate_limit has unknown key {unknown[0]!r}; use rpm, tpm, rps, endpoint")
    limits = dict(value)
    if "rps" in limits:
        if limits.get("rpm") is not None or limits.get("tpm") is not None or "period" in limits:
            raise SchedulingError("rate_limit: give rps alone (calls per second), or rpm and tpm (per minute)")
        limits["rpm"], limits["period"] = limits.pop("rps"), 1.0
    endpoint = limits.get("endpoint")
    if endpoint is not None and not isinstance(endpoint, str):
        raise SchedulingError(f"rate_limit endpoint must be a string (a name shared by batches), got {_kind(endpoint)}")
    return RateLimit(**limits)


def name(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise SchedulingError(f"name must be a non-empty string, got {_kind(value)}")
    return value


def prompt(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise SchedulingError(f"prompt must be a string template such as 'Summarise: {{text}}', got {_kind(value)}")
    return value
