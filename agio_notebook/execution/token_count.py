"""Token counts per message, for showing a paused request and what a model call saw.

Counted by :mod:`agio_notebook.models.tokens`: exact where the model has an OpenAI encoding (``bpe-openai``,
offline), otherwise an estimate (about four characters a token) that says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

from ..models.tokens import count_text


@dataclass(frozen=True, slots=True)
class TokenCount:
    tokens: int
    estimated: bool  # True: characters / 4, not a tokenizer's count

    def __str__(self) -> str:
        return f"~{self.tokens}" if self.estimated else str(self.tokens)


def count_tokens(text: str | None, model: str | None = None) -> TokenCount:
    """Tokens in ``text`` for ``model``: its tokenizer's count where it has one, else an estimate marked as such.

    The tokenizer is the budgets' (:mod:`agio_notebook.models.tokens`), chosen from the model's name, so a
    scripted or function model never loads one."""
    tokens, exact = count_text(text or "", model)
    return TokenCount(tokens, not exact)


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
