"""Tool approval: a tool marked ``requires_approval`` waits for a human (or a policy) decision."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable


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


def policy_approver(approve: bool, reason: str | None = None) -> Approver:
    """An approver that always decides the same way (scripts, tests, batch runs)."""

    async def decide(request: ApprovalRequest) -> ApprovalDecision:
        return ApprovalDecision(approved=approve, reason=reason)

    return decide
