"""What the model saw: the exact messages one stored model call received, one row per message.

Rebuilt from the store (the steps before the call, checked against the digest stored with the call; a
request edited in step mode is stored whole), so it works for any stored run: retried, forked, resumed.
"""

from __future__ import annotations

from typing import Any

from ..core import NotFoundError, Step, StepRole
from ..storage.base import Repository
from .requests import context_of
from ..models.tokens import TokenCount, message_counts, message_text, prompt_total


def model_call_step(repository: Repository, run_id: str, step: int) -> Step:
    """The assistant step ``step`` (its sequence) of run ``run_id``; a clear error naming the choices."""
    run = repository.get_run(run_id)
    if run is None:
        raise NotFoundError(f"no run {run_id!r} in the store")
    if isinstance(step, bool) or not isinstance(step, int):
        raise TypeError(f"step must be a step number (int), got {type(step).__name__}")
    mine = [s for s in repository.get_steps(run.session_id, include_superseded=True) if s.run_id == run_id]
    calls = [s for s in mine if s.role is StepRole.ASSISTANT]
    found = next((s for s in calls if s.sequence == step), None)
    if found is None:
        numbers = ", ".join(str(s.sequence) for s in calls) or "none"
        other = next((s for s in mine if s.sequence == step), None)
        what = f"step {step} is a {other.role.value} step" if other is not None else f"run {run_id[:8]} has no step {step}"
        raise NotFoundError(f"{what}; its model calls are steps {numbers}")
    return found


def seen_rows(repository: Repository, run_id: str, step: int) -> list[dict[str, Any]]:
    """One dict per message model call ``step`` of ``run_id`` received: position, role, text, tokens (the
    message with the chat format around it, counted as the budget counts), tokens_estimated, step (where
    the message came from; None for the system prompt) and edited."""
    return _rows(repository, model_call_step(repository, run_id, step))


def seen_total(repository: Repository, run_id: str, step: int) -> dict[str, Any]:
    """The prompt of model call ``step`` as counted (:func:`prompt_total`: its messages and the reply's
    priming) beside what the model reported (``usage.prompt_tokens``; None when it reported nothing), and
    whether they differ."""
    call = model_call_step(repository, run_id, step)
    return _total(_rows(repository, call), call)


def _total(rows: list[dict[str, Any]], call: Step) -> dict[str, Any]:
    total = prompt_total([TokenCount(r["tokens"], r["tokens_estimated"]) for r in rows])
    reported = call.metrics.prompt_tokens
    return {"prompt_tokens": total.tokens, "estimated": total.estimated, "reported": reported,
            "differs": reported is not None and reported != total.tokens}


def _rows(repository: Repository, call: Step) -> list[dict[str, Any]]:
    model = (call.extra.get("request") or {}).get("model")
    context = context_of(repository, call)
    counts = message_counts([m for m, _, _ in context], model)
    rows = []
    for position, ((message, origin, edited), count) in enumerate(zip(context, counts)):
        row = {"position": position, "role": message.get("role"), "text": message_text(message),
               "tokens": count.tokens, "tokens_estimated": count.estimated, "step": origin, "edited": edited}
        if message.get("tool_call_id"):
            row["tool_call_id"] = message["tool_call_id"]
        rows.append(row)
    return rows


def seen_by_call(repository: Repository, run_id: str) -> dict[int, tuple[list[dict[str, Any]], dict[str, Any]]]:
    """Every model call of the run (by its step number) with what it saw and its prompt's total (see
    :func:`seen_total`); calls whose request cannot be rebuilt (stored before requests were kept) are left out."""
    run = repository.get_run(run_id)
    if run is None:
        return {}
    out: dict[int, tuple[list[dict[str, Any]], dict[str, Any]]] = {}
    for s in repository.get_steps(run.session_id, include_superseded=True):
        if s.run_id == run_id and s.role is StepRole.ASSISTANT and s.extra.get("request"):
            try:
                rows = _rows(repository, s)
            except Exception:  # noqa: BLE001 - a transcript shows what it can
                continue
            out[s.sequence] = (rows, _total(rows, s))
    return out
