"""Chunk-level model doubles for engine tests: each reply is an exact list of protocol chunks."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agio_notebook.core import ModelError
from agio_notebook.models.base import Finish, TextDelta, ToolCallDelta, Usage
from agio_notebook.tools import tool


def text(*pieces: str, prompt: int = 10, completion: int | None = None) -> list[Any]:
    return [*(TextDelta(p) for p in pieces), Usage(prompt, completion or len(pieces), None), Finish("stop")]


def calls(*specs: tuple[str, Any], split: bool = False) -> list[Any]:
    """Tool calls; ``split`` sends each call's arguments in two pieces, as real providers do."""
    chunks: list[Any] = []
    for i, (name, args) in enumerate(specs):
        raw = args if isinstance(args, str) else json.dumps(args)
        if split and len(raw) > 2:
            chunks += [ToolCallDelta(i, f"call_{name}_{i}", name, raw[:2]), ToolCallDelta(i, None, None, raw[2:])]
        else:
            chunks.append(ToolCallDelta(i, f"call_{name}_{i}", name, raw))
    return [*chunks, Usage(12, 5, 17), Finish("tool_calls")]


class ChunkModel:
    """Replays ``replies`` (lists of chunks, or exceptions to raise) and records the messages it saw."""

    name = "chunks"

    def __init__(self, replies: list[Any], delay: float = 0.0):
        self.replies = list(replies)
        self.seen: list[list[dict[str, Any]]] = []
        self.delay = delay

    async def stream(self, messages, tools, *, stream=True):
        self.seen.append([dict(m) for m in messages])
        if not self.replies:
            raise ModelError("ChunkModel has no replies left")
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        for chunk in reply:
            if self.delay:
                await asyncio.sleep(self.delay)
            yield chunk


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def nap(seconds: float) -> str:
    """Sleep, then say so."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


async def cancel_when(stream, ready=lambda events: bool(events), while_running=None):
    """Consume ``stream`` in a task; once ``ready(events)``, optionally await ``while_running(events)``,
    then cancel the task. Returns the events seen; the stream must end in CancelledError."""
    events: list = []

    async def consume():
        async for e in stream:
            events.append(e)

    task = asyncio.create_task(consume())
    while not ready(events):
        await asyncio.sleep(0.01)
    if while_running is not None:
        await while_running(events)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        return events
    raise AssertionError("the stream did not end with CancelledError")


def tool_started(events) -> bool:
    from agio_notebook.core import StepEventType
    return any(e.type is StepEventType.TOOL_CALL_STARTED for e in events)


def commits_of(repo, monkeypatch) -> list[list[str]]:
    """The commits ``repo`` is asked to make, from here on: each one's steps, by role (a group's in one list)."""
    commits: list[list[str]] = []
    for name in ("commit", "commit_group"):
        real = getattr(repo, name)

        def spy(*args, _real=real, **kwargs):
            group = args[0] if args else [kwargs]
            commits.append([s.role.value for c in group for s in c.get("steps", ())])
            return _real(*args, **kwargs)

        monkeypatch.setattr(repo, name, spy)
    return commits
