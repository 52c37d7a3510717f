"""What a model call costs: prices from the maintained ``genai-prices`` package, plus a user table.

Prices are per prompt, completion and cached prompt token. A model neither table knows has an
*unknown* cost (``None``), never 0: a total that silently counts unknown calls as free would lie.
The user table wins, so local or fine-tuned models can be priced (``set_prices``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping

from ..core import AgioError

log = logging.getLogger("agio_notebook.pricing")

_FIELDS = ("prompt", "completion", "cached")


class PricingError(AgioError, ValueError):
    """A price table entry that cannot be used."""


@dataclass(frozen=True, slots=True)
class Price:
    """USD per one million tokens. ``cached`` defaults to the prompt price."""

    prompt: float
    completion: float
    cached: float | None = None

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> float:
        cached = min(max(cached_tokens, 0), prompt_tokens)
        cached_price = self.prompt if self.cached is None else self.cached
        return ((prompt_tokens - cached) * self.prompt + cached * cached_price
                + completion_tokens * self.completion) / 1_000_000


def _price(model: str, entry: Any) -> Price:
    if isinstance(entry, Price):
        return entry
    if not isinstance(entry, Mapping):
        raise PricingError(f"price for {model!r} must be a dict like {{'prompt': 0.15, 'completion': 0.6}} "
                           f"(USD per 1M tokens), got {type(entry).__name__}")
    unknown = sorted(set(entry) - set(_FIELDS))
    if unknown:
        raise PricingError(f"price for {model!r} has unknown field(s) {', '.join(unknown)}; "
                           f"use {', '.join(_FIELDS)} (USD per 1M tokens)")
    missing = [f for f in ("prompt", "completion") if f not in entry]
    if missing:
        raise PricingError(f"price for {model!r} lacks {' and '.join(missing)} (USD per 1M tokens)")
    values = {}
    for f in _FIELDS:
        v = entry.get(f)
        if v is None and f == "cached":
            continue
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
            raise PricingError(f"price {f!r} for {model!r} must be a number >= 0, got {v!r}")
        values[f] = float(v)
    return Price(**values)


_overrides: dict[str, Price] = {}
_warned: set[str] = set()


def set_prices(table: Mapping[str, Any] | None, *, replace: bool = False) -> None:
    """Add (or with ``replace`` set exactly) the user's prices: ``{"model": {"prompt": p, "completion": c,
    "cached": k}}`` in USD per 1M tokens. The whole table is checked before anything changes."""
    parsed = {str(model): _price(str(model), entry) for model, entry in (table or {}).items()}
    if replace:
        _overrides.clear()
    _overrides.update(parsed)
    _known_price.cache_clear()
    _warned.difference_update(parsed)


def prices() -> dict[str, Price]:
    """The user's table as it stands."""
    return dict(_overrides)


@lru_cache(maxsize=4096)
def _known_price(model: str) -> bool:
    """Whether genai-prices knows ``model`` (a miss is cheap to repeat, a hit is not: cache both)."""
    return _package_cost(model, 1000, 0, 0) is not None


def _package_cost(model: str, prompt: int, completion: int, cached: int) -> float | None:
    try:
        from genai_prices import Usage, calc_price
    except ImportError:  # pragma: no cover - a declared dependency; without it prices are unknown
        return None
    try:
        result = calc_price(Usage(input_tokens=prompt, output_tokens=completion,
                                  cache_read_tokens=cached or None), model_ref=model)
    except (LookupError, ValueError):
        return None
    return float(result.total_price)


@lru_cache(maxsize=65536)
def _cost(model: str, prompt: int, completion: int, cached: int) -> float | None:
    return _package_cost(model, prompt, completion, cached)


def cost_of(model_name: str | None, prompt_tokens: int | None, completion_tokens: int | None,
            cached_tokens: int | None = 0) -> float | None:
    """USD for one model call, or ``None`` when no price for ``model_name`` is known."""
    if not model_name:
        return None
    prompt, completion, cached = prompt_tokens or 0, completion_tokens or 0, min(cached_tokens or 0,
                                                                                  prompt_tokens or 0)
    own = _overrides.get(model_name)
    if own is not None:
        return own.cost(prompt, completion, cached)
    if not _known_price(model_name):
        if model_name not in _warned:
            _warned.add(model_name)
            log.info(unknown_price_message(model_name))
        return None
    return _cost(model_name, prompt, completion, cached)


def unknown_price_message(model_name: str) -> str:
    return (f"no price known for model {model_name!r}: its cost shows as unknown; add it with "
            f"set_prices({{{model_name!r}: {{'prompt': ..., 'completion': ...}}}}) (USD per 1M tokens)")


def check_priced(model_name: str) -> None:
    """Raise one clear line when no table prices ``model_name`` (e.g. before a sweep with ``max_cost``)."""
    if not is_priced(model_name):
        raise PricingError(unknown_price_message(model_name))


def is_priced(model_name: str | None) -> bool:
    return bool(model_name) and (model_name in _overrides or _known_price(model_name))


def format_cost(cost: float | None) -> str:
    """``$0.0012`` or ``unknown``: how every view shows a cost."""
    if cost is None or cost != cost:  # None or NaN
        return "unknown"
    if cost == 0:
        return "$0"
    return f"${cost:.4f}" if cost < 1 else f"${cost:,.2f}"
