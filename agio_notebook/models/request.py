"""The exact request of a model call, as a fingerprint: what replay and reuse match on.

A request is the messages, the tool schemas and the model settings. The executor stores, on each
assistant step, the fingerprint of the request that produced it (``step.extra["request"]``); the
messages themselves are not copied, since they are the session's earlier steps (storing them again
per call would grow a session's store with the square of its length). Canonical JSON (sorted keys)
makes equal requests hash equal whatever the dict order.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

_SETTING_ATTRS = ("temperature", "top_p", "max_tokens", "seed", "extra_body")


def canonical(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str)


def digest(value: Any) -> str:
    return hashlib.sha256(canonical(value)).hexdigest()[:32]


def model_settings(model: Any) -> dict[str, Any]:
    """The settings that change what a model answers: its name and sampling parameters."""
    settings: dict[str, Any] = {"model": getattr(model, "name", type(model).__name__)}
    for attr in _SETTING_ATTRS:
        value = getattr(model, attr, None)
        if value is not None and not callable(value):
            settings[attr] = value
    settings.update(getattr(model, "settings", None) or {})
    return settings


class Fingerprinter:
    """Content fingerprints (messages and tools) of a growing message list, in time proportional to what
    was added since the last call: a chain ``h_i = sha256(h_{i-1} + message_i)``, so a turn never rehashes
    the history (the engine's cost per turn stays flat however long the session)."""

    __slots__ = ("_messages", "_n", "_last", "_chain", "_tools", "_tools_digest")

    def __init__(self) -> None:
        self._messages: list[dict[str, Any]] | None = None
        self._n = 0
        self._last: dict[str, Any] | None = None
        self._chain = b""
        self._tools: list[dict[str, Any]] | None = None
        self._tools_digest = b""

    def content(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        if tools is not self._tools:
            self._tools, self._tools_digest = tools, hashlib.sha256(canonical(tools)).digest()
        n = self._n
        if messages is not self._messages or len(messages) < n or (n and messages[n - 1] is not self._last):
            self._messages, n, self._chain = messages, 0, b""  # another list, or changed: start over
        chain = self._chain
        for message in messages[n:]:
            chain = hashlib.sha256(chain + canonical(message)).digest()
        self._chain, self._n, self._last = chain, len(messages), messages[-1] if messages else None
        return hashlib.sha256(chain + self._tools_digest).hexdigest()[:32]


def content_fingerprint(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    """Messages and tools only: what a replay matches on (the replaying model has its own settings)."""
    return Fingerprinter().content(messages, tools)


def request_record(messages: list[dict[str, Any]], tools: list[dict[str, Any]], settings: dict[str, Any],
                   fingerprinter: Fingerprinter | None = None) -> dict[str, Any]:
    """What an assistant step keeps of its request (``step.extra["request"]``)."""
    content = (fingerprinter or Fingerprinter()).content(messages, tools)
    system = messages[0]["content"] if messages and messages[0].get("role") == "system" else None
    record: dict[str, Any] = {"fingerprint": request_key(content, settings), "content": content,
                              "messages": len(messages), "settings": settings}
    if system is not None:
        record["system"] = system
    return record


def request_key(content: str, settings: dict[str, Any]) -> str:
    """The full fingerprint (content and settings): what reuse matches on."""
    return digest({"content": content, "settings": settings})
