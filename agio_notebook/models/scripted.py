"""Offline models: ScriptedModel (a list of replies) and FunctionModel (your function decides).

They drive the whole loop — streaming, tool calls, usage — with no network, which is what tests,
tutorials and teaching need.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import re
import secrets
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Iterable

from ..core import InvalidOperationError, ModelError
from .base import Finish, ModelChunk, TextDelta, ToolCallDelta, Usage
from .tokens import PromptCounter, completion_tokens, count_text

_WORDS = re.compile(r"\S+\s*|\s+")


@dataclass(slots=True)
class ToolCallSpec:
    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    @property
    def raw_arguments(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass(slots=True)
class Reply:
    """One model reply: text and/or tool calls, optional usage and simulated timing.

    ``Reply.text("hi")``, ``Reply.call("add", a=1, b=2)``, ``Reply.calls(call("a"), call("b"))``.
    ``delay`` (seconds before the first chunk: the time to first token) and ``tokens_per_second``
    override the model's latency for this reply.
    """

    text: str | None = None
    tool_calls: list[ToolCallSpec] = field(default_factory=list)
    usage: Usage | None = None
    delay: float | None = None
    tokens_per_second: float | None = None

    @classmethod
    def say(cls, text: str, **kw: Any) -> Reply:
        return cls(text=text, **kw)

    @classmethod
    def call(cls, name: str, /, _text: str | None = None, _id: str | None = None, **arguments: Any) -> Reply:
        return cls(text=_text, tool_calls=[ToolCallSpec(name, arguments, _id)])

    @classmethod
    def calls(cls, *specs: ToolCallSpec, text: str | None = None) -> Reply:
        return cls(text=text, tool_calls=list(specs))


def call(name: str, /, _id: str | None = None, **arguments: Any) -> ToolCallSpec:
    """A tool call for :meth:`Reply.calls`; pass arguments as keywords."""
    return ToolCallSpec(name, arguments, _id)


def _tokens(text: str) -> list[str]:
    return _WORDS.findall(text)


def _as_reply(value: Any) -> Reply:
    if isinstance(value, Reply):
        return value
    if isinstance(value, str):
        return Reply(text=value)
    if isinstance(value, ToolCallSpec):
        return Reply(tool_calls=[value])
    raise TypeError(f"a reply must be a str, Reply or ToolCallSpec, got {type(value).__name__}")


def reply_chunks(reply: Reply, chunk_size: int, prompt_tokens: int, call_prefix: str = "call", *,
                 stream: bool = True, model_name: str | None = None) -> Iterable[ModelChunk]:
    """A reply as the chunks a streaming provider would send (without ``stream``, the text in one piece);
    its usage counted by the one token counter (:mod:`.tokens`), as the budget counts."""
    calls = [(s.name, s.raw_arguments) for s in reply.tool_calls]
    completion = completion_tokens(reply.text, calls, model_name)
    if reply.text:
        words = _tokens(reply.text)
        if not stream:
            chunk_size = len(words)
        for i in range(0, len(words), chunk_size):
            yield TextDelta("".join(words[i:i + chunk_size]))
    for index, (spec, (_, raw)) in enumerate(zip(reply.tool_calls, calls)):
        call_id = spec.id or f"{call_prefix}_{index}"
        if len(raw) > 16:  # arguments arrive in pieces, as from real providers
            half = len(raw) // 2
            yield ToolCallDelta(index, call_id, spec.name, raw[:half])
            yield ToolCallDelta(index, None, None, raw[half:])
        else:
            yield ToolCallDelta(index, call_id, spec.name, raw)
    usage = reply.usage or Usage(prompt_tokens, completion, prompt_tokens + completion)
    yield usage
    yield Finish("tool_calls" if reply.tool_calls else "stop")


@dataclass(frozen=True, slots=True)
class Latency:
    """Simulated model timing, so offline runs stream and measure like a real endpoint: wait ``ttft``
    seconds before the first chunk, then emit ``tokens_per_second`` (``None``: no pacing)."""

    ttft: float = 0.0
    tokens_per_second: float | None = None

    def __post_init__(self) -> None:
        if self.ttft < 0 or (self.tokens_per_second is not None and self.tokens_per_second <= 0):
            raise InvalidOperationError(f"latency: ttft must be >= 0 and tokens_per_second > 0 (got ttft={self.ttft}, "
                                        f"tokens_per_second={self.tokens_per_second})")

    def for_reply(self, reply: Reply) -> Latency:
        return Latency(self.ttft if reply.delay is None else reply.delay,
                       reply.tokens_per_second or self.tokens_per_second)

    async def pace(self, chunks: Iterable[ModelChunk] | AsyncIterator[ModelChunk | str]
                   ) -> AsyncIterator[ModelChunk | str]:
        """Yield ``chunks`` on this schedule: deadlines from the start, so sleeps do not add up drift."""
        loop = asyncio.get_running_loop()
        if self.ttft:
            await asyncio.sleep(self.ttft)
        start, tokens = loop.time(), 0
        items = chunks if hasattr(chunks, "__aiter__") else _aiter(chunks)
        async for chunk in items:  # type: ignore[union-attr]
            if self.tokens_per_second and tokens:
                wait = start + tokens / self.tokens_per_second - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
            tokens += _chunk_tokens(chunk)
            yield chunk


async def _aiter(items: Iterable[ModelChunk]) -> AsyncIterator[ModelChunk]:
    for item in items:
        yield item


def _chunk_tokens(chunk: Any) -> int:
    if isinstance(chunk, str):
        return len(_tokens(chunk))
    if isinstance(chunk, TextDelta):
        return len(_tokens(chunk.text))
    if isinstance(chunk, ToolCallDelta):
        return 1 + len(chunk.arguments or "") // 4
    return 0


class ScriptedModel:
    """Replies from a script, streamed in chunks of ``chunk_size`` words, with token usage.

    ``calls`` records (a reference to) the messages of each call and their count then; use
    :meth:`messages_of` to see exactly what call ``i`` was sent.
    """

    def __init__(self, replies: Iterable[str | Reply | ToolCallSpec], *, chunk_size: int = 1,
                 name: str = "scripted", loop: bool = False, ttft: float = 0.0,
                 tokens_per_second: float | None = None):
        self.replies = [_as_reply(r) for r in replies]
        self.latency = Latency(ttft, tokens_per_second)
        self.chunk_size = max(1, chunk_size)
        self.name = name
        self.loop = loop
        self.calls: list[tuple[list[dict[str, Any]], int]] = []
        self._next = 0
        self._counter = PromptCounter(self.name)
        self._token = secrets.token_hex(3)

    def __repr__(self) -> str:
        return f"ScriptedModel({len(self.replies)} replies, name={self.name!r})"

    def reset(self) -> None:
        self._next = 0
        self.calls.clear()
        self._counter = PromptCounter(self.name)

    def messages_of(self, i: int) -> list[dict[str, Any]]:
        messages, n = self.calls[i]
        return messages[:n]

    async def stream(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *,
                     stream: bool = True, settings: dict[str, Any] | None = None) -> AsyncIterator[ModelChunk]:
        if self._next >= len(self.replies):
            if not self.loop or not self.replies:
                raise ModelError(f"ScriptedModel ran out of replies after {self._next} calls")
            self._next = 0
        reply = self.replies[self._next]
        self._next += 1
        self.calls.append((messages, len(messages)))
        chunks = reply_chunks(reply, self.chunk_size, self._counter.count(messages),
                              f"call_{self._token}{len(self.calls)}", stream=stream, model_name=self.name)
        async for chunk in self.latency.for_reply(reply).pace(chunks):
            yield chunk  # type: ignore[misc]


class FunctionModel:
    """``fn(messages, tools)`` decides each reply: return a str, a Reply, a ToolCallSpec, or be an async
    generator yielding str pieces / chunks for custom streaming. Sync or async. A ``fn`` with a ``settings``
    parameter is also given the call's settings (e.g. a typed agent's ``response_format``). ``ttft`` and
    ``tokens_per_second`` simulate latency (a returned ``Reply`` may override them)."""

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None, chunk_size: int = 1,
                 ttft: float = 0.0, tokens_per_second: float | None = None):
        self.fn = fn
        try:
            self._wants_settings = "settings" in inspect.signature(fn).parameters
        except (TypeError, ValueError):  # a callable without a signature to read
            self._wants_settings = False
        self.latency = Latency(ttft, tokens_per_second)
        self.name = name or getattr(fn, "__name__", "function")
        self.chunk_size = max(1, chunk_size)
        self._counter = PromptCounter(self.name)
        self._n = 0
        self._token = secrets.token_hex(3)

    def __repr__(self) -> str:
        return f"FunctionModel({self.name})"

    async def stream(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *,
                     stream: bool = True, settings: dict[str, Any] | None = None) -> AsyncIterator[ModelChunk]:
        prompt = self._counter.count(messages)
        extra = {"settings": copy.deepcopy(settings or {})} if self._wants_settings else {}  # the agent's stay its own
        if inspect.isasyncgenfunction(self.fn):
            completion, saw_usage = 0, False
            async for item in self.latency.pace(self.fn(messages, tools, **extra)):
                if isinstance(item, str):
                    completion += count_text(item, self.name)[0]
                    yield TextDelta(item)
                else:
                    saw_usage = saw_usage or isinstance(item, Usage)
                    yield item
            if not saw_usage:
                yield Usage(prompt, completion, prompt + completion)
            return
        value = self.fn(messages, tools, **extra)
        if inspect.isawaitable(value):
            value = await value
        self._n += 1
        reply = _as_reply(value)
        chunks = reply_chunks(reply, self.chunk_size, prompt, f"call_{self._token}{self._n}", stream=stream,
                              model_name=self.name)
        async for chunk in self.latency.for_reply(reply).pace(chunks):
            yield chunk  # type: ignore[misc]
