"""Stored requests: rebuild the exact request of a model call from the store, and redact errors.

Each assistant step carries ``extra["request"]``: the model's name, the settings, the tool schemas,
whether it streamed, and its messages *by reference*: the system prompt, how many messages there were
and their chained SHA-256 (see :mod:`agio_notebook.models.request`). The messages themselves are the
steps before it, already stored, so a step's request costs the same bytes whatever the session's
length. :func:`request_of` puts the full request back together and checks it against the digest.
"""

from __future__ import annotations

from typing import Any

from ..core import AgioError, NotFoundError, Step, scrub
from ..models.request import build_request, messages_digest
from ..storage.base import Repository


def redact_for(model: Any, text: str) -> str:
    """``text`` without the model's own secrets (its ``redact``) or anything shaped like a credential."""
    redact = getattr(model, "redact", None)
    if callable(redact):
        text = redact(text)
    return scrub(text) or text


def request_of(repository: Repository, step: Step) -> dict[str, Any]:
    """The exact request that produced assistant ``step``: ``{"model", "messages", "tools", "settings",
    "stream"}``, rebuilt from the steps it was sent and verified against the stored digest."""
    stored = step.extra.get("request")
    if not stored:
        raise NotFoundError(f"step {step.sequence} of session {step.session_id} has no stored request")
    ref = stored["messages"]
    messages: list[dict[str, Any]] = []
    if ref.get("system") is not None:
        messages.append({"role": "system", "content": ref["system"]})
    # a memory_read step is not a message: its text is part of the stored system prompt
    messages.extend(s.to_message() for s in _context_at(repository, step) if s.extra.get("kind") != "memory_read")
    if len(messages) != ref["count"] or messages_digest(messages) != ref["sha256"]:
        raise AgioError(f"cannot rebuild the request of step {step.sequence} of session {step.session_id}: "
                        f"the stored steps before it no longer match what was sent ({len(messages)} messages "
                        f"found, {ref['count']} sent)")
    return build_request(stored["model"], messages, stored.get("tools") or (), stored.get("settings"),
                         stored.get("stream", True))


def _context_at(repository: Repository, step: Step) -> list[Step]:
    """For each sequence before ``step``, the attempt that was current when ``step`` was made: the latest
    one created no later than it (a retry's attempts are created after the ones they supersede)."""
    every = repository.get_steps(step.session_id, 1, step.sequence - 1, include_superseded=True)
    chosen: dict[int, Step] = {}
    for s in every:
        if s.created_at > step.created_at or s.id == step.id:
            continue
        best = chosen.get(s.sequence)
        if best is None or (s.created_at, s.attempt) >= (best.created_at, best.attempt):
            chosen[s.sequence] = s
    return [chosen[q] for q in sorted(chosen)]
