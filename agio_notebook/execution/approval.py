"""Tool approval: a tool marked ``requires_approval`` waits for a human (or a policy) decision."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable

import pydantic

from ..tools import Tool


@dataclass(slots=True)
class ApprovalRequest:
    tool_call_id: str
    name: str
    arguments: dict[str, Any]


@dataclass(slots=True)
class ApprovalDecision:
    approved: bool
    arguments: dict[str, Any] | None = None  # edited arguments; None keeps the model's
    reason: str | None = None


Approver = Callable[[ApprovalRequest], Awaitable[ApprovalDecision]]


def check_arguments(tool: Tool | None, arguments: Any) -> str | None:
    """Why edited arguments do not fit the tool's schema (one line), or None when they do."""
    if not isinstance(arguments, dict):
        return f"arguments must be a JSON object, got {type(arguments).__name__}"
    if tool is None:
        return None
    try:
        tool.validate(arguments)
    except pydantic.ValidationError as exc:
        parts = [f"{'.'.join(str(p) for p in e.get('loc', ())) or 'arguments'}: {e.get('msg')}"
                 for e in exc.errors()[:3]]
        return f"{tool.name} rejects these arguments: " + "; ".join(parts)
    return None


def edited_note(proposed: str, ran: str) -> str:
    """What the model reads after the result of a call the user edited before approving it."""
    return f"[Note: the user edited this call before approving it. You proposed {proposed}; it ran with {ran}.]"


def policy_approver(approve: bool, reason: str | None = None) -> Approver:
    """An approver that always decides the same way (scripts, tests, batch runs); what it says says so,
    never that a person decided."""
    said = reason or (None if approve else "refused by a policy that approves no call")

    async def decide(request: ApprovalRequest) -> ApprovalDecision:
        return ApprovalDecision(approved=approve, reason=said)

    return decide
