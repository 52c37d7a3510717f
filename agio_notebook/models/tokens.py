"""Token counts of chat messages: exact for OpenAI models, an estimate for every other model.

OpenAI's encodings come from ``bpe-openai``, which embeds them (``tiktoken`` downloads them on first
use, which fails offline). A message costs its role, content, name and tool calls plus the chat
format's few tokens around each message. Any other model is estimated at about four characters a
token, on the high side, so a budget that trusts the estimate stops early rather than late.
Budgets (``execution.budget``) and anything that shows per-message counts use this one module.
"""

from __future__ import annotations

import math
import warnings
from functools import lru_cache
from typing import Any, Sequence

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
    return len(encoding.encode(text, disallowed_special=())), True


def _message_text(message: dict[str, Any]) -> list[str]:
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


def count_tokens(messages: Sequence[dict[str, Any]], model_name: str | None) -> tuple[list[int], bool]:
    """Tokens of each chat message (as the OpenAI chat API counts them) and whether the counts are exact.

    A whole prompt costs ``sum(counts) + REPLY_PRIMING``. Without an encoding for the model each
    message is estimated (about four characters a token, plus the message's overhead).
    """
    encoding = encoding_for(model_name)
    counts = []
    for message in messages:
        parts = _message_text(message)
        if encoding is None:
            counts.append(estimate_text("".join(parts)) + _ESTIMATED_OVERHEAD_CHARS // CHARS_PER_TOKEN)
            continue
        n = PER_MESSAGE + sum(len(encoding.encode(p, disallowed_special=())) for p in parts)
        counts.append(n + (PER_NAME if message.get("name") else 0))
    return counts, encoding is not None


def prompt_tokens(messages: Sequence[dict[str, Any]], model_name: str | None) -> tuple[int, bool]:
    """Tokens of a whole prompt of ``messages`` (the reply's priming included) and whether exact."""
    counts, exact = count_tokens(messages, model_name)
    return sum(counts) + REPLY_PRIMING, exact
