"""Model settings: the request parameters of a model call, set per agent and per run or cell.

They are plain JSON-able dicts so they can be stored with every step's request and compared. Keys are
the chat-completions parameters every OpenAI-compatible server understands; ``extra_body`` carries
whatever one server needs beyond them (e.g. vLLM's ``top_k``, Ollama's ``options``). Headers are not a
setting: they may hold credentials, and requests are stored.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from ..core import AgioError

KNOWN_SETTINGS = frozenset({
    "temperature", "top_p", "max_tokens", "max_completion_tokens", "tool_choice", "parallel_tool_calls",
    "stop", "seed", "presence_penalty", "frequency_penalty", "logit_bias", "response_format",
    "reasoning_effort", "verbosity", "service_tier", "logprobs", "top_logprobs", "metadata", "store", "user",
    "extra_body",
})  # not "n": one answer per call is what a step is


class SettingsError(AgioError, ValueError):
    """Model settings that cannot be sent (unknown key, not JSON)."""


def check_settings(settings: Mapping[str, Any] | None, where: str = "model_settings") -> dict[str, Any]:
    """A validated copy of ``settings``: known keys only, JSON values, ``extra_body`` a dict."""
    if settings is None:
        return {}
    if not isinstance(settings, Mapping):
        raise SettingsError(f"{where} must be a dict, got {type(settings).__name__}")
    unknown = sorted(set(settings) - KNOWN_SETTINGS)
    if unknown:
        raise SettingsError(f"{where}: unknown setting(s) {', '.join(map(repr, unknown))}; known: "
                            f"{', '.join(sorted(KNOWN_SETTINGS))} (put server-specific ones in extra_body)")
    extra = settings.get("extra_body")
    if extra is not None and not isinstance(extra, Mapping):
        raise SettingsError(f"{where}: extra_body must be a dict, got {type(extra).__name__}")
    try:
        return json.loads(json.dumps(dict(settings)))
    except (TypeError, ValueError) as exc:
        raise SettingsError(f"{where}: settings must be JSON values ({exc})") from None


def merge_settings(*layers: Mapping[str, Any] | None) -> dict[str, Any]:
    """Later layers win key by key; ``extra_body`` dicts merge one level deep; a ``None`` value removes."""
    merged: dict[str, Any] = {}
    for layer in layers:
        for key, value in (layer or {}).items():
            if key == "extra_body" and isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
                value = {**merged[key], **value}
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
    return merged


def parse_settings(text: str, where: str = "--settings") -> dict[str, Any]:
    """Settings written as a JSON object, e.g. ``{"temperature": 0, "max_tokens": 200}``."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SettingsError(f"{where}: not a JSON object ({exc.msg} at column {exc.colno})") from None
    if not isinstance(value, dict):
        raise SettingsError(f"{where}: expected a JSON object such as '{{\"temperature\": 0}}'")
    return check_settings(value, where)
