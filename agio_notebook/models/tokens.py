"""Token counts of chat messages: exact for OpenAI models, an estimate for every other model.

OpenAI's encodings come from ``bpe-openai``, which embeds them (``tiktoken`` downloads them on first
use, which fails offline). A message costs its role, content, name and tool calls plus the chat
format's few tokens around each message. Any other model is estimated at about four characters a
token, on the high side, so a budget that trusts the estimate stops early rather than late.
This is the one token counter: budgets (``execution.budget``), the offline models' reported usage, the
step debugger's pause view and "what the model saw" (``context()``) all count with it, so the numbers a
learner sees are the numbers a budget counts.
"""

from __future__ import annotations

import json
import math
import warnings
from functools import lru_cache
from typing import Any, Mapping, NamedTuple, Sequence

PER_MESSAGE = 3  # OpenAI's chat format: <|start|>role<|message|> … <|end|>
PER_NAME = 1
REPLY_PRIMING = 3  # <|start|>assistant<|message|>, which every reply is primed with
CHARS_PER_TOKEN = 4
_ESTIMATED_OVERHEAD_CHARS = 16  # role and the format around a message, for models without an encoding

# OpenAI's chat and embedding model families, by name prefix (longest first where they overlap)
_FAMILIES = (("gpt-4o", "o200k_base"), ("gpt-4.1", "o200k_base"), ("gpt-4.5", "o200k_base"),
             ("gpt-5", "o200k_base"), ("o1", "o200k_base"), ("o3", "o200k_base"), ("o4", "o200k_base"),
             ("chatgpt-4o", "o200k_base"), ("gpt-4", "cl100k_base"), ("gpt-3.5", "cl100k_base"),
             ("gpt-35", "cl100k_base"), ("text-embedding-3", "cl100k_base"))


@lru_cache(maxsize=None)
def _encoding_by_name(name: str) -> Any:
    with warnings.catch_warnings():  # its loader uses a deprecated importlib call; not the user's concern
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai

        return bpe_openai.get_encoding(name)


@lru_cache(maxsize=256)
def encoding_name(model_name: str | None) -> str | None:
    """The OpenAI encoding of ``model_name`` (``openai/gpt-4o`` and dated names included), or None.

    Decided from the name alone, so a model of another family never pays for loading the tokenizer.
    """
    if not model_name:
        return None
    base = model_name.rsplit("/", 1)[-1].lower()
    return next((enc for prefix, enc in _FAMILIES if base.startswith(prefix)), None)


def encoding_for(model_name: str | None) -> Any:
    """The tokenizer of ``model_name`` (loaded once per process), or None where it has none here."""
    name = encoding_name(model_name)
    if name is None:
        return None
    try:
        return _encoding_by_name(name)
    except ImportError:  # an install without bpe-openai estimates every model
        return None


def estimate_text(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def count_text(text: str, model_name: str | None) -> tuple[int, bool]:
    """Tokens of ``text`` and whether the count is exact."""
    encoding = encoding_for(model_name)
    if encoding is None:
        return estimate_text(text), False
    return len(encoding.encode_ordinary(text)), True


class TokenCount(NamedTuple):
    """A count and whether it is only an estimate (about four characters a token)."""

    tokens: int
    estimated: bool

    def __str__(self) -> str:
        return f"~{self.tokens}" if self.estimated else str(self.tokens)


def _message_text(message: Mapping[str, Any]) -> list[str]:
    parts = [str(message.get("role") or "")]
    content = message.get("content")
    if isinstance(content, list):  # content parts: their text counts (images are priced apart)
        parts += [str(p.get("text") or "") for p in content if isinstance(p, dict)]
    elif content:
        parts.append(str(content))
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        parts += [str(fn.get("name") or ""), str(fn.get("arguments") or "")]
    if message.get("tool_call_id"):
        parts.append(str(message["tool_call_id"]))
    return parts


def _characters(message: Mapping[str, Any]) -> int:
    """How many characters :func:`_message_text` would give, without making its strings (the estimate's
    fast path: a budget estimates every message it has not seen before each model call)."""
    content = message.get("content")
    n = len(message.get("role") or "")
    if isinstance(content, str):
        n += len(content)
    elif isinstance(content, list):
        n += sum(len(str(p.get("text") or "")) for p in content if isinstance(p, dict))
    elif content:
        n += len(str(content))
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        n += len(str(fn.get("name") or "")) + len(str(fn.get("arguments") or ""))
    call_id = message.get("tool_call_id")
    return n + (len(str(call_id)) if call_id else 0)


def count_tokens(messages: Sequence[Mapping[str, Any]], model_name: str | None) -> tuple[list[int], bool]:
    """Tokens of each chat message (as the OpenAI chat API counts them) and whether the counts are exact.

    A whole prompt costs ``sum(counts) + REPLY_PRIMING``. Without an encoding for the model each
    message is estimated (about four characters a token, plus the message's overhead).
    """
    encoding = encoding_for(model_name)
    if encoding is None:  # about four characters a token: ceil(characters / 4), and the message's overhead
        overhead, per = _ESTIMATED_OVERHEAD_CHARS // CHARS_PER_TOKEN, CHARS_PER_TOKEN
        return [-(-_characters(m) // per) + overhead for m in messages], False
    encode = encoding.encode_ordinary  # special-token text counts as text, and it is the encoder's fast path
    return [PER_MESSAGE + sum(len(encode(p)) for p in _message_text(m) if p) + (PER_NAME if m.get("name") else 0)
            for m in messages], True


def prompt_tokens(messages: Sequence[Mapping[str, Any]], model_name: str | None) -> tuple[int, bool]:
    """Tokens of a whole prompt of ``messages`` (the reply's priming included) and whether exact."""
    counts, exact = count_tokens(messages, model_name)
    return sum(counts) + REPLY_PRIMING, exact


def message_counts(messages: Sequence[Mapping[str, Any]], model_name: str | None) -> list[TokenCount]:
    """One :class:`TokenCount` per message (each with the chat format's overhead around it); a prompt of
    them costs their sum plus :data:`REPLY_PRIMING` (see :func:`prompt_total`)."""
    counts, exact = count_tokens(messages, model_name)
    new, estimated = tuple.__new__, not exact
    return [new(TokenCount, (n, estimated)) for n in counts]


def prompt_total(counts: Sequence[TokenCount]) -> TokenCount:
    """What a prompt of messages with these counts costs: their sum and the reply's priming."""
    return TokenCount(sum(c.tokens for c in counts) + REPLY_PRIMING, any(c.estimated for c in counts))


def completion_tokens(text: str | None, calls: Sequence[tuple[str, str]], model_name: str | None) -> int:
    """Tokens of a reply: its text and each tool call's name and arguments (what an offline model reports
    as its completion, counted like everything else)."""
    total = count_text(text, model_name)[0] if text else 0
    return total + sum(count_text(name, model_name)[0] + count_text(args, model_name)[0] for name, args in calls)


class PromptCounter:
    """A conversation's prompt tokens as it grows, counting only the messages not counted before (what
    the offline models report as their usage, so a scripted run's tokens agree with its budget).

    A message counts as counted only while it is the very object counted, at the same place: a new
    conversation (a model reused by the next run), or a message replaced (a system prompt with memory, a
    request edited in step mode, which copies it) is counted afresh, whatever its length. A message dict
    changed in place is not seen: the engine never does that."""

    __slots__ = ("model_name", "_counted", "_total")

    def __init__(self, model_name: str | None) -> None:
        self.model_name = model_name
        self._counted: list[Mapping[str, Any]] = []
        self._total = 0

    def count(self, messages: Sequence[Mapping[str, Any]]) -> int:
        counted = self._counted
        if len(messages) < len(counted) or any(a is not b for a, b in zip(messages, counted)):
            counted.clear()
            self._total = 0
        new = messages[len(counted):]
        if new:
            self._total += sum(count_tokens(new, self.model_name)[0])
            counted.extend(new)
        return self._total + REPLY_PRIMING


def message_text(message: Mapping[str, Any]) -> str:
    """What of a chat message a person reads: its content and its tool calls' names and arguments."""
    content = message.get("content")
    parts = [content if isinstance(content, str) else json.dumps(content) if content is not None else ""]
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        parts.append(f"{fn.get('name', '')}({fn.get('arguments', '')})")
    return "\n".join(p for p in parts if p)
