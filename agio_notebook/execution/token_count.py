"""Token counts per message, for showing a paused request.

One import point (:func:`count_tokens`) so another tokenizer can take over: when ``bpe_openai`` (OpenAI's
encodings, embedded, offline) is installed and knows the model, the count is that model's; otherwise
(scripted, function and unknown models) it is an estimate (about four characters a token) and says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Mapping


@dataclass(frozen=True, slots=True)
class TokenCount:
    tokens: int
    estimated: bool  # True: characters / 4, not a tokenizer's count

    def __str__(self) -> str:
        return f"~{self.tokens}" if self.estimated else str(self.tokens)


@lru_cache(maxsize=32)
def _encoder(model: str | None) -> Callable[[str], int] | None:
    """The model's own tokenizer, when ``bpe_openai`` knows the model; else None (estimate)."""
    if not model:
        return None
    try:  # optional: OpenAI's encodings, embedded, offline
        import bpe_openai  # type: ignore[import-not-found]

        encoding = bpe_openai.encoding_for_model(model.rsplit("/", 1)[-1])
    except Exception:  # noqa: BLE001 - not installed, or a model it does not know: estimate
        return None
    return lambda text: len(encoding.encode(text))


def count_tokens(text: str | None, model: str | None = None) -> TokenCount:
    """Tokens in ``text`` for ``model``: its tokenizer's count where it has one, else an estimate marked as such."""
    text = text or ""
    encode = _encoder(model)
    if encode is not None:
        try:
            return TokenCount(encode(text), False)
        except Exception:  # noqa: BLE001 - e.g. text with special tokens: estimate rather than fail a view
            pass
    return TokenCount((len(text) + 3) // 4, True)


def message_text(message: Mapping[str, Any]) -> str:
    """What of a chat message is sent as text: its content and its tool calls' names and arguments."""
    content = message.get("content")
    parts = [content if isinstance(content, str) else json.dumps(content) if content is not None else ""]
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        parts.append(f"{fn.get('name', '')}({fn.get('arguments', '')})")
    return "\n".join(p for p in parts if p)


def message_tokens(message: Mapping[str, Any], model: str | None = None) -> TokenCount:
    return count_tokens(message_text(message), model)
