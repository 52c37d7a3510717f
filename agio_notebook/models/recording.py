"""A recording: the model replies and tool results of earlier attempts, for replay, retry and fork.

Two uses:
- *reuse*: a model call whose exact request (messages, tools, settings) was made before is answered
  from the record instead of the model — a cache keyed by the request, never by position;
- *side effects*: a recorded call of a ``@tool(side_effects=True)`` tool is replayed from the record,
  sent for confirmation or blocked (the tool's ``on_replay``), instead of simply running again.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import orjson

from ..core import Step, StepRole


def reuse_key(request: Mapping[str, Any]) -> str | None:
    """What reuse matches on: the request's fingerprint (messages, tools, settings) and the model's name
    (the fingerprint leaves the name out, and an answer of one model is no answer of another)."""
    fingerprint = request.get("fingerprint")
    return f"{request.get('model')}\n{fingerprint}" if fingerprint else None


def _args_key(name: str, arguments: str | None) -> tuple[str, str]:
    try:
        parsed = orjson.loads(arguments or "{}")
        return name, orjson.dumps(parsed, option=orjson.OPT_SORT_KEYS).decode()
    except orjson.JSONDecodeError:
        return name, arguments or ""


@dataclass
class Recording:
    """Recorded steps indexed for lookups; each recorded answer is used at most once."""

    reuse: bool = False
    replies: dict[str, deque[Step]] = field(default_factory=lambda: defaultdict(deque))
    tool_results: dict[tuple[str, str], deque[Step]] = field(default_factory=lambda: defaultdict(deque))

    @classmethod
    def from_steps(cls, steps: Iterable[Step], *, reuse: bool = False) -> Recording:
        rec = cls(reuse=reuse)
        steps = sorted(steps, key=lambda s: (s.created_at, s.sequence))
        calls: dict[str, tuple[str, str]] = {}
        for step in steps:
            if step.role is StepRole.ASSISTANT:
                key = reuse_key(step.extra.get("request") or {})
                if key is not None and not step.extra.get("reused"):
                    rec.replies[key].append(step)
                for call in step.tool_calls:
                    calls[call.id] = _args_key(call.name, call.arguments)
        for step in steps:
            if step.role is StepRole.TOOL and step.tool_call_id in calls and step.status == "ok":
                rec.tool_results[calls[step.tool_call_id]].append(step)
        return rec

    def take_reply(self, key: str | None) -> Step | None:
        queue = self.replies.get(key) if key is not None else None
        return queue.popleft() if queue else None

    def take_tool_result(self, name: str, arguments: str | None) -> Step | None:
        queue = self.tool_results.get(_args_key(name, arguments))
        return queue.popleft() if queue else None

    def has_tool_result(self, name: str, arguments: str | None) -> bool:
        return bool(self.tool_results.get(_args_key(name, arguments)))
