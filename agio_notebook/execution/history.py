"""Chat messages given by a caller (a seeded conversation) checked and turned into steps.

The stored step *is* the chat message, so a conversation that began elsewhere becomes steps of the
session before its first run: retry, fork, frames and transcripts then see it like any other.
Shapes are checked before anything is stored; a wrong one is one line naming the message.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from ..core import InvalidOperationError, Step, StepRole, ToolCall

_ROLES = {"user": StepRole.USER, "assistant": StepRole.ASSISTANT, "tool": StepRole.TOOL}


def split_system(messages: Sequence[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """The leading system message's text (the run's system prompt) and the rest, all checked."""
    messages = check_messages(messages)
    if messages and messages[0]["role"] == "system":
        return messages[0].get("content"), messages[1:]
    return None, messages


def check_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each message a dict with a known role and text content; tool results answer a call made before."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InvalidOperationError(f"messages must be a list of chat messages, got {type(messages).__name__}")
    called: set[str] = set()
    for i, msg in enumerate(messages):
        where = f"message {i}"
        if not isinstance(msg, dict):
            raise InvalidOperationError(f"{where} is a {type(msg).__name__}, not a dict with role and content")
        role = msg.get("role")
        if role == "system":
            if i != 0:
                raise InvalidOperationError(f"{where}: a system message may only come first")
        elif role not in _ROLES:
            raise InvalidOperationError(f"{where}: role {role!r} is not one of system, user, assistant, tool")
        content = msg.get("content")
        if content is not None and not isinstance(content, str):
            raise InvalidOperationError(f"{where}: content must be text, got {type(content).__name__}")
        for call in msg.get("tool_calls") or ():
            called.add(_tool_call(where, call).id)
        if role == "tool" and msg.get("tool_call_id") not in called:
            raise InvalidOperationError(f"{where}: a tool result must answer an earlier tool call "
                                        f"(tool_call_id {msg.get('tool_call_id')!r} was never called)")
    return list(messages)


def check_answered(messages: Sequence[dict[str, Any]]) -> None:
    """Every tool call in ``messages`` has its result: a new user message may follow."""
    called = [c["id"] for m in messages for c in m.get("tool_calls") or ()]
    answered = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}
    missing = [c for c in called if c not in answered]
    if missing:
        raise InvalidOperationError(f"the messages end with tool calls that have no result: {', '.join(missing)}")


def history_steps(messages: Sequence[dict[str, Any]], session_id: str) -> list[Step]:
    """Checked (non-system) messages as a session's opening steps, 1, 2, …, each following the last."""
    steps: list[Step] = []
    for sequence, msg in enumerate(messages, 1):
        steps.append(Step(session_id=session_id, run_id=None, sequence=sequence, role=_ROLES[msg["role"]],
                          content=msg.get("content"),
                          tool_calls=[_tool_call("message", c) for c in msg.get("tool_calls") or ()],
                          tool_call_id=msg.get("tool_call_id"), name=msg.get("name"),
                          parent_ids=[steps[-1].id] if steps else []))
    return steps


def _tool_call(where: str, raw: Any) -> ToolCall:
    if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
        raise InvalidOperationError(f"{where}: each tool call needs an id and a function")
    fn = raw.get("function") if isinstance(raw.get("function"), dict) else raw
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidOperationError(f"{where}: tool call {raw['id']!r} has no function name")
    arguments = fn.get("arguments", "{}")
    return ToolCall(id=raw["id"], name=name, arguments=arguments if isinstance(arguments, str) else json.dumps(arguments))
