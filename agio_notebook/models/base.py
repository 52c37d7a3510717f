"""The model protocol: one streaming call per step.

A model turns chat messages (+ tool schemas) into an async stream of chunks:
text deltas, tool-call deltas (OpenAI style: pieces keyed by ``index``),
usage, and a finish reason.  Every provider and every test double speaks it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, AsyncIterator, Protocol, runtime_checkable


@dataclass(slots=True)
class TextDelta:
    text: str


@dataclass(slots=True)
class ToolCallDelta:
    """A piece of tool call ``index``: id and name usually come first, arguments in pieces."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(slots=True)
class Usage:
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None


@dataclass(slots=True)
class Finish:
    reason: str  # "stop" | "tool_calls" | "length" | ...


ModelChunk = TextDelta | ToolCallDelta | Usage | Finish


@runtime_checkable
class Model(Protocol):
    """What the engine needs of a model."""

    name: str

    def stream(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *,
               stream: bool = True) -> AsyncIterator[ModelChunk]:
        """Yield the reply to ``messages`` as chunks.

        ``tools`` are OpenAI function-tool schemas.  With ``stream=False`` the
        provider may produce the whole reply at once (still yielded as chunks).
        Raise :class:`agio_notebook.core.ModelError` on provider failure.  When an agent or run has
        model settings (``temperature``, ``max_tokens``, ``tool_choice``, ``extra_body``...), the engine
        passes them as ``settings=`` too; a model that takes no settings may leave the keyword out.
        """
        ...
