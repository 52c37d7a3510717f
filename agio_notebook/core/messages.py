"""Chat messages checked once: the one home of the rules a provider enforces on a conversation.

A conversation given by a caller (``history=``, ``AgentRunner.call``), a request edited at a step-mode
pause and a reply edited there all pass through here, so an edit can never store what a provider would
refuse (a tool result answering a call that was never made, a system message in the middle, two calls
with one id). Tool calls are read in either shape people write them — the wire shape
``{"id", "type": "function", "function": {"name", "arguments"}}`` or the flat ``{"id", "name",
"arguments"}`` — with arguments as JSON text or as a value, and come out in the wire shape.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from .errors import InvalidOperationError

ROLES = ("system", "user", "assistant", "tool")
_KEYS = {"role", "content", "tool_calls", "tool_call_id", "name"}


class MessageError(InvalidOperationError, ValueError):
    """A message a provider would refuse; the text says which and why, in one line."""


def check_tool_call(raw: Any, where: str) -> dict[str, Any]:
    """One tool call in the wire shape, its arguments as JSON text."""
    if not isinstance(raw, dict):
        raise MessageError(f"{where} is a {type(raw).__name__}, not an object with an id and a function")
    fn = raw.get("function") if isinstance(raw.get("function"), dict) else raw
    call_id, name = raw.get("id"), fn.get("name")
    if not isinstance(call_id, str) or not call_id:
        raise MessageError(f"{where} needs an \"id\" (text)")
    if not isinstance(name, str) or not name:
        raise MessageError(f"{where} (id {call_id!r}) has no function name")
    arguments = fn.get("arguments", "{}")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def check_tool_calls(calls: Any, where: str) -> list[dict[str, Any]]:
    """A list of tool calls, each checked, their ids distinct (a duplicate id would answer two calls
    with one result)."""
    if not isinstance(calls, list):
        raise MessageError(f"{where}: tool_calls must be a list, got {type(calls).__name__}")
    out = [check_tool_call(c, f"{where}: tool_calls[{i}]") for i, c in enumerate(calls)]
    seen: set[str] = set()
    for call in out:
        if call["id"] in seen:
            raise MessageError(f"{where}: two tool calls share the id {call['id']!r}; each call needs its own")
        seen.add(call["id"])
    return out


def check_messages(messages: Any, *, allow_empty: bool = True) -> list[dict[str, Any]]:
    """Chat messages as a provider accepts them, in a canonical shape; the first problem as one line.

    A system message only first; content text (or null where tool calls carry the message); tool calls
    only on assistant messages; every tool message answers a call made before it and not answered yet;
    no two calls waiting for a result share an id.
    """
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise MessageError(f"messages must be a list of chat messages, got {type(messages).__name__}")
    if not messages and not allow_empty:
        raise MessageError("messages must be a non-empty list of {\"role\", \"content\"} objects")
    open_calls: set[str] = set()
    made: set[str] = set()
    out = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise MessageError(f"{where} must be an object with \"role\" and \"content\", got {type(message).__name__}")
        role = message.get("role")
        if role not in ROLES:
            raise MessageError(f"{where}: role must be one of {', '.join(ROLES)}, got {role!r}")
        if role == "system" and i != 0:
            raise MessageError(f"{where}: a system message may only come first")
        unknown = sorted(set(message) - _KEYS)
        if unknown:
            raise MessageError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}")
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise MessageError(f"{where}: content must be text or null, got {type(content).__name__}")
        clean: dict[str, Any] = {"role": role, "content": content}
        if message.get("tool_calls"):
            if role != "assistant":
                raise MessageError(f"{where}: only an assistant message has tool_calls")
            clean["tool_calls"] = check_tool_calls(message["tool_calls"], where)
            for call in clean["tool_calls"]:  # an id may come back once its call is answered (some servers
                if call["id"] in open_calls:   # number their calls the same way every turn)
                    raise MessageError(f"{where}: tool call id {call['id']!r} is still waiting for its result")
                made.add(call["id"])
                open_calls.add(call["id"])
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str):
                raise MessageError(f"{where}: a tool message needs a \"tool_call_id\" (text)")
            if call_id not in open_calls:
                why = "was already answered" if call_id in made else "was never called"
                raise MessageError(f"{where}: a tool result must answer an earlier tool call "
                                   f"(tool_call_id {call_id!r} {why})")
            open_calls.discard(call_id)
            clean["tool_call_id"] = call_id
        elif content is None and not clean.get("tool_calls"):
            raise MessageError(f"{where}: a {role} message needs content")
        if isinstance(message.get("name"), str):
            clean["name"] = message["name"]
        out.append(clean)
    return out


def check_answered(messages: Sequence[dict[str, Any]]) -> None:
    """Every tool call in ``messages`` has its result: a new user message may follow."""
    called = [c["id"] for m in messages for c in m.get("tool_calls") or ()]
    answered = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}
    missing = [c for c in called if c not in answered]
    if missing:
        raise MessageError(f"the messages end with tool calls that have no result: {', '.join(missing)}")
