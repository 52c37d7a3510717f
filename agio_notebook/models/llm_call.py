"""A plain ``llm_call`` function as a model: the seed's way of plugging any provider into the runner.

``await llm_call(messages=..., model=..., tools=..., **settings)`` returns a dict with ``content`` and
optionally ``tool_calls`` (OpenAI shape, or ``{"name", "arguments"}``), ``prompt_tokens`` and
``completion_tokens``; a bare string is taken as the content. Anything else fails the call with one
line naming what came back, so a wrong return type never reaches the store as garbage.
"""

from __future__ import annotations

import inspect
import json
from typing import Any, AsyncIterator, Awaitable, Callable

from ..core import ModelError
from .base import Finish, ModelChunk, TextDelta, ToolCallDelta, Usage

LLMCall = Callable[..., Awaitable[Any] | Any]


class LLMCallModel:
    """Adapts ``llm_call`` to the :class:`~agio_notebook.models.base.Model` protocol."""

    def __init__(self, llm_call: LLMCall, model: str | None = None):
        if not callable(llm_call):
            raise TypeError(f"llm_call must be a function, got {type(llm_call).__name__}")
        self.llm_call = llm_call
        self.model = model
        self.name = model or getattr(llm_call, "__name__", "llm_call")

    def __repr__(self) -> str:
        return f"LLMCallModel({self.name})"

    async def stream(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *,
                     stream: bool = True, settings: dict[str, Any] | None = None) -> AsyncIterator[ModelChunk]:
        # a copy: a function that appends to its messages must not change the run's context
        result = self.llm_call(messages=[dict(m) for m in messages], model=self.model, tools=tools or None,
                               **(settings or {}))
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, str):
            result = {"content": result}
        if not isinstance(result, dict):
            raise ModelError(f"llm_call {self.name!r} returned {type(result).__name__}; expected a dict with "
                             "'content' (and optionally 'tool_calls', 'prompt_tokens', 'completion_tokens')")
        content = result.get("content")
        if content is not None and not isinstance(content, str):
            raise ModelError(f"llm_call {self.name!r} returned content of type {type(content).__name__}; "
                             "expected a string or None")
        if content:
            yield TextDelta(content)
        calls = result.get("tool_calls") or []
        if not isinstance(calls, list):
            raise ModelError(f"llm_call {self.name!r} returned tool_calls of type {type(calls).__name__}; "
                             "expected a list")
        for index, raw in enumerate(calls):
            call_id, name, arguments = _tool_call(self.name, index, raw)
            yield ToolCallDelta(index, call_id, name, arguments)
        prompt, completion = _count(result, "prompt_tokens"), _count(result, "completion_tokens")
        if prompt is not None or completion is not None:
            yield Usage(prompt, completion, (prompt or 0) + (completion or 0))
        yield Finish("tool_calls" if calls else "stop")


def _tool_call(model: str, index: int, raw: Any) -> tuple[str, str, str]:
    """(id, name, arguments as JSON text) of one returned tool call, in either accepted shape."""
    if not isinstance(raw, dict):
        raise ModelError(f"llm_call {model!r}: tool call {index} is a {type(raw).__name__}, not a dict")
    fn = raw.get("function") if isinstance(raw.get("function"), dict) else raw
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        raise ModelError(f"llm_call {model!r}: tool call {index} has no function name")
    arguments = fn.get("arguments", {})
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    return str(raw.get("id") or f"call_{index}"), name, arguments


def _count(result: dict[str, Any], key: str) -> int | None:
    value = result.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ModelError(f"llm_call returned {key}={value!r}; expected a whole number >= 0")
    return value
