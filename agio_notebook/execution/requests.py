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
from ..core.conversation import current_at, is_memory_step
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
    messages = [m for m, _, _ in context_of(repository, step)]
    return build_request(stored["model"], messages, stored.get("tools") or (), stored.get("settings"),
                         stored.get("stream", True))


def context_of(repository: Repository, step: Step) -> list[tuple[dict[str, Any], int | None, bool]]:
    """The messages model step ``step`` was sent, each with the sequence of the step it came from (None
    for the system prompt) and whether it was edited in step mode; verified against the stored digest."""
    stored = step.extra.get("request")
    if not stored:
        raise NotFoundError(f"step {step.sequence} of session {step.session_id} has no stored request")
    ref = stored["messages"]
    triples: list[tuple[dict[str, Any], int | None, bool]] = []
    if ref.get("system") is not None and "inline" not in ref:
        triples.append(({"role": "system", "content": ref["system"]}, None, False))
    # a memory_read step is not a message: its text is part of the stored system prompt
    earlier = current_at(repository.get_steps(step.session_id, 1, step.sequence - 1, include_superseded=True), step)
    triples.extend((s.to_message(), s.sequence, False) for s in earlier if not is_memory_step(s))
    if "inline" in ref:  # edited in step mode: what was sent is stored whole; origins where unchanged
        triples = _match_origins(ref["inline"], stored.get("edited", {}).get("proposed", {}).get("messages"),
                                 triples)
    messages = [m for m, _, _ in triples]
    if len(messages) != ref["count"] or messages_digest(messages) != ref["sha256"]:
        raise AgioError(f"cannot rebuild the request of step {step.sequence} of session {step.session_id}: "
                        f"the stored steps before it no longer match what was sent ({len(messages)} messages "
                        f"found, {ref['count']} sent)")
    return triples


def _match_origins(sent: list[dict[str, Any]], proposed: list[dict[str, Any]] | None,
                   steps: list[tuple[dict[str, Any], int | None, bool]]
                   ) -> list[tuple[dict[str, Any], int | None, bool]]:
    """Each sent message with the origin of the proposed message it equals (in order); others are edited.

    ``steps`` are the stored messages before the call; the proposed list is them behind its system prompt.
    """
    proposed = list(proposed or ())
    offset = len(proposed) - len(steps)  # 1 when the proposal began with a system prompt
    out, start = [], 0
    for message in sent:
        found = next((k for k in range(start, len(proposed)) if proposed[k] == message), None)
        if found is None:
            out.append((message, None, True))
        else:
            out.append((message, steps[found - offset][1] if found >= offset else None, False))
            start = found + 1
    return out



