"""Reading a chat history the way the course's offline models do."""

from __future__ import annotations

import json
import re
from typing import Any

NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def last_user(messages: list[dict[str, Any]]) -> str:
    return next((m.get("content") or "" for m in reversed(messages) if m["role"] == "user"), "")


def tool_results(messages: list[dict[str, Any]]) -> list[str]:
    """The tool results since the last user message, oldest first."""
    out: list[str] = []
    for m in reversed(messages):
        if m["role"] == "user":
            break
        if m["role"] == "tool":
            out.append(m.get("content") or "")
    return out[::-1]


def last_call(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The arguments of the latest tool call."""
    for m in reversed(messages):
        for call in m.get("tool_calls") or ():
            try:
                return json.loads(call["function"]["arguments"] or "{}")
            except ValueError:
                return {}
    return {}


def system_text(messages: list[dict[str, Any]]) -> str:
    return "\n".join(m.get("content") or "" for m in messages if m["role"] == "system")


def is_error(content: str) -> bool:
    """Tool failures reach the model as ``Error (kind): ...``."""
    return content.startswith("Error")
