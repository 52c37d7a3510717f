"""Steps: the stored unit of a session.

A stored Step *is* the chat message (role, content, tool_calls, tool_call_id,
name), so context is rebuilt from the store without conversion.  Everything
else on a step (metrics, attempt bookkeeping) rides beside the message.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


def new_id() -> str:
    """A random 32-hex id; uuid4 is plenty and needs no coordination between kernels."""
    return uuid.uuid4().hex


def now() -> float:
    """Wall-clock seconds since the epoch (UTC); frames turn it into timestamps."""
    return time.time()


class StepRole(str, Enum):
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    SYSTEM = "system"


@dataclass(slots=True)
class ToolCall:
    """One function call requested by the model (OpenAI wire shape, arguments kept as raw JSON text)."""

    id: str
    name: str
    arguments: str = "{}"

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ToolCall:
        fn = d.get("function") or {}
        return cls(id=d["id"], name=fn.get("name", ""), arguments=fn.get("arguments") or "{}")


@dataclass(slots=True)
class StepMetrics:
    """Per-step numbers. Durations in milliseconds; tokens as reported by the model."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    ttft_ms: float | None = None
    model_ms: float | None = None
    tool_ms: float | None = None
    duration_ms: float | None = None
    cached_tokens: int | None = None  # of prompt_tokens, read from the provider's cache
    cost: float | None = None  # of this model call; None when no price is known

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__ if getattr(self, k) is not None}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> StepMetrics:
        if not d:
            return cls()
        if d.keys() <= _METRIC_FIELDS:  # what this version wrote (a store read per step of every run's context)
            return cls(**d)
        return cls(**{k: v for k, v in d.items() if k in _METRIC_FIELDS})


_METRIC_FIELDS = frozenset(StepMetrics.__slots__)
_ROLES = {r.value: r for r in StepRole}


@dataclass(slots=True)
class Step:
    """One message of a session, numbered by a session-wide ``sequence`` starting at 1.

    ``status`` is "ok" for normal steps; tool steps may be "error" or "rejected".
    ``attempt`` counts retries of the same position; a retried step keeps its
    record and gets ``superseded=True`` so it never enters context again.
    """

    session_id: str
    run_id: str | None
    sequence: int
    role: StepRole
    content: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    status: str = "ok"
    error: str | None = None
    metrics: StepMetrics = field(default_factory=StepMetrics)
    attempt: int = 1
    superseded: bool = False
    id: str = field(default_factory=new_id)
    created_at: float = field(default_factory=now)
    extra: dict[str, Any] = field(default_factory=dict)
    # the trace graph: the steps this one follows (model -> its tools -> next model; memory_read -> model)
    parent_ids: list[str] = field(default_factory=list)

    # -- the chat message view -------------------------------------------------
    def to_message(self) -> dict[str, Any]:
        """The OpenAI-style chat message this step stands for."""
        msg: dict[str, Any] = {"role": self.role.value, "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.tool_call_id is not None:
            msg["tool_call_id"] = self.tool_call_id
        if self.name is not None and self.role is StepRole.TOOL:
            msg["name"] = self.name
        return msg

    def is_user_step(self) -> bool:
        return self.role is StepRole.USER

    def has_tool_calls(self) -> bool:
        return bool(self.tool_calls)

    # -- serialisation -----------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "id": self.id,
            "session_id": self.session_id,
            "run_id": self.run_id,
            "sequence": self.sequence,
            "role": self.role.value,
            "content": self.content,
            "tool_calls": [c.to_dict() for c in self.tool_calls],
            "tool_call_id": self.tool_call_id,
            "name": self.name,
            "status": self.status,
            "error": self.error,
            "metrics": self.metrics.to_dict(),
            "attempt": self.attempt,
            "superseded": self.superseded,
            "created_at": self.created_at,
            "parent_ids": list(self.parent_ids),
        }
        if self.extra:
            d["extra"] = self.extra
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Step:
        return cls(
            id=d["id"],
            session_id=d["session_id"],
            run_id=d.get("run_id"),
            sequence=d["sequence"],
            role=_ROLES.get(d["role"]) or StepRole(d["role"]),
            content=d.get("content"),
            tool_calls=[ToolCall.from_dict(c) for c in d.get("tool_calls") or ()],
            tool_call_id=d.get("tool_call_id"),
            name=d.get("name"),
            status=d.get("status", "ok"),
            error=d.get("error"),
            metrics=StepMetrics.from_dict(d.get("metrics")),
            attempt=d.get("attempt", 1),
            superseded=d.get("superseded", False),
            created_at=d.get("created_at", 0.0),
            extra=d.get("extra") or {},
            parent_ids=list(d.get("parent_ids") or ()),
        )
