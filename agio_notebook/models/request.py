"""The request of a model call: canonical, stored with its step, and fingerprinted for replay.

A request is ``{"model", "messages", "tools", "settings", "stream"}``: what the engine hands the model,
never a header or key. The OpenAI-compatible provider turns it into its wire body by fixed rules
(:meth:`OpenAIModel.body`), so the request alone replays the call.

The fingerprint is a SHA-256 over messages, tools and settings in canonical JSON (sorted keys, no
spaces). ``content`` is the same without the settings. Both leave out the model's name, so the same request sent to another model, or to a model
replaying a recording, has the same fingerprint. Messages are hashed as a chain (one link per message),
so the engine extends a running digest by the new messages of each turn instead of rehashing the
history: :class:`MessageChain`.
"""

from __future__ import annotations

import hashlib
import orjson
from typing import Any, Mapping, Sequence

_EMPTY = hashlib.sha256(b"").hexdigest()


def canonical_json(value: Any) -> str:
    """One spelling per value: sorted keys, no spaces, non-ASCII kept (orjson: the engine calls this per turn)."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _link(previous: str, message: Mapping[str, Any]) -> str:
    return hashlib.sha256(f"{previous}\n{canonical_json(message)}".encode()).hexdigest()


class MessageChain:
    """A running digest of a growing message list: :meth:`update` hashes only messages not seen yet."""

    __slots__ = ("count", "digest")

    def __init__(self) -> None:
        self.count = 0
        self.digest = _EMPTY

    def update(self, messages: Sequence[Mapping[str, Any]]) -> str:
        if len(messages) < self.count:  # not the same list grown: start over
            self.count, self.digest = 0, _EMPTY
        digest = self.digest
        for message in messages[self.count:]:
            digest = _link(digest, message)
        self.count, self.digest = len(messages), digest
        return digest


def messages_digest(messages: Sequence[Mapping[str, Any]]) -> str:
    return MessageChain().update(messages)


def fingerprint_parts(messages_sha256: str, tools: Sequence[Mapping[str, Any]] | str,
                      settings: Mapping[str, Any] | None) -> str:
    """The fingerprint from a messages digest, tools (or their digest) and settings."""
    tools_sha = tools if isinstance(tools, str) else tools_digest(tools)
    body = canonical_json({"messages": messages_sha256, "tools": tools_sha, "settings": dict(settings or {})})
    return hashlib.sha256(body.encode()).hexdigest()


def tools_digest(tools: Sequence[Mapping[str, Any]]) -> str:
    return hashlib.sha256(canonical_json(list(tools)).encode()).hexdigest()


def build_request(model: str, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] = (),
                  settings: Mapping[str, Any] | None = None, stream: bool = True) -> dict[str, Any]:
    """The canonical request of one model call."""
    return {"model": model, "messages": [dict(m) for m in messages], "tools": [dict(t) for t in tools],
            "settings": dict(settings or {}), "stream": stream}


def content_fingerprint(request: Mapping[str, Any]) -> str:
    """Messages and tools only, without settings: what a model replaying a recording with settings of its
    own matches on (stored beside the fingerprint as ``content``)."""
    return fingerprint_parts(messages_digest(request.get("messages") or ()), request.get("tools") or (), None)


def request_fingerprint(request: Mapping[str, Any]) -> str:
    """A stable id of what a model was asked: equal requests (up to key order) give equal fingerprints."""
    return fingerprint_parts(messages_digest(request.get("messages") or ()), request.get("tools") or (),
                             request.get("settings"))


def stored_request(model: str, messages: Sequence[Mapping[str, Any]], messages_sha256: str,
                   settings: Mapping[str, Any], tools: Sequence[Mapping[str, Any]], tools_sha256: str, stream: bool,
                   *, inline: bool = False) -> dict[str, Any]:
    """What is stored with a model call's step: its request with the messages *by reference* (the system
    prompt, how many, their chained digest), or ``inline`` where they are not the stored steps (an edit at
    a step-mode pause). The one place that shapes it: the executor and the debugger both call it."""
    first = messages[0] if messages else None
    system = first.get("content") if first is not None and first.get("role") == "system" else None
    ref: dict[str, Any] = {"system": system, "count": len(messages), "sha256": messages_sha256}
    if inline:
        ref["inline"] = list(messages)
    return {"model": model, "settings": settings, "tools": tools, "stream": stream, "messages": ref,
            "fingerprint": fingerprint_parts(messages_sha256, tools_sha256, settings),
            "content": fingerprint_parts(messages_sha256, tools_sha256, None)}
