"""Feedback -> proposed experience, reviewed by the user before it enters memory.

The extractor sees the feedback and its run's trace (query, each step, tool calls and results).
Offline it is a template (no model); otherwise a model (the agent's, or a configured one, e.g. a
FunctionModel) is asked for a JSON object with the experience's fields. Nothing is added to memory
until the user accepts, unless the agent's MemoryConfig says ``auto_accept``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import re
from dataclasses import replace
from typing import Any, Awaitable, TypeVar

from ..core import AgioError, AgentRun, InvalidOperationError, NotFoundError, Step, StepRole, now
from ..core.blocking import run_blocking
from ..core.conversation import is_memory_step
from ..models.base import Model, TextDelta
from ..storage.base import Repository
from .records import Experience, Feedback, Proposal, from_doc, to_doc
from .store import MemoryStore

FIELDS = ("situation", "action", "outcome", "lesson")
T = TypeVar("T")

INSTRUCTIONS = ("You turn a user's feedback on an agent run into a reusable experience for the agent's "
                "memory. Reply with one JSON object with the string fields situation (when this applies), "
                "action (what the agent did), outcome (what happened, per the feedback) and lesson (what to "
                "do next time). No other text.")


def run_sync(coro: Awaitable[T]) -> T:
    """Await ``coro`` from sync code, also inside a running loop (a notebook cell): in a thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return run_blocking(coro)  # type: ignore[arg-type]
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(run_blocking, coro).result()  # type: ignore[arg-type]


def trace_text(run: AgentRun, steps: list[Step]) -> str:
    """The run as short lines: what the extractor reads."""
    lines = [f"Query: {run.query}"]
    for s in steps:
        if is_memory_step(s):
            lines.append(f"#{s.sequence} memory: {len(s.extra.get('memory', {}).get('items', []))} item(s)")
        elif s.role is StepRole.ASSISTANT:
            calls = ", ".join(f"{c.name}({c.arguments})" for c in s.tool_calls)
            lines.append(f"#{s.sequence} assistant: " + (s.content or "") + (f" [calls {calls}]" if calls else ""))
        elif s.role is StepRole.TOOL:
            lines.append(f"#{s.sequence} tool {s.name} -> {s.status}: {(s.content or '')[:300]}")
        elif s.role is StepRole.USER:
            lines.append(f"#{s.sequence} user: {s.content}")
    return "\n".join(lines)


def template_experience(feedback: Feedback, run: AgentRun, steps: list[Step]) -> dict[str, Any]:
    """The offline extractor: the run's query, what it did and the user's words, no model needed.

    Without a comment the lesson still says what was done, for which question: a lesson a later run can
    act on (``When asked '...', calling weather(...) then answering from its result was rated good``),
    never a bare "do the same again"."""
    calls = [f"{c.name}({c.arguments})" for s in steps if s.role is StepRole.ASSISTANT for c in s.tool_calls]
    answer = (run.final_text or "").strip()
    action = ("called " + ", ".join(calls) + "; " if calls else "") + (f"answered: {answer[:200]}" if answer else "")
    verdict = "good" if feedback.rating > 0 else "wrong"
    comment = feedback.comment.strip()
    lesson = comment or _lesson_from(run, calls, answer, feedback.rating > 0)
    outcome = f"The user rated this {verdict}" + (f": {comment}" if comment else ".")
    if feedback.correction:
        lesson = f"The right answer is: {feedback.correction}" + (f" ({comment})" if comment else "")
        outcome = f"The user corrected it: the right answer is {feedback.correction}"
    return {"situation": run.query or "", "action": action, "outcome": outcome, "lesson": lesson}


def _lesson_from(run: AgentRun, calls: list[str], answer: str, good: bool) -> str:
    """A lesson from what the run did, for a rating that came without words."""
    asked = f"When asked {_clip(run.query or '', 80)!r}, "
    if good:
        did = (f"calling {', '.join(calls[:4])}{' …' if len(calls) > 4 else ''} and answering from the results"
               if calls else f"answering {_clip(answer, 80)!r}")
        return f"{asked}{did} was rated good: answer that way."
    said = f"the answer {_clip(answer, 80)!r}" if answer else "the run"
    tools = f" (after {', '.join(calls[:4])})" if calls else ""
    return f"{asked}{said}{tools} was rated wrong: do not answer that way; check the facts it rests on."


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


async def model_experience(model: Model, feedback: Feedback, run: AgentRun, steps: list[Step]) -> dict[str, Any]:
    rating = "+1 (good)" if feedback.rating > 0 else "-1 (bad)"
    where = f" on step #{feedback.sequence}" if feedback.sequence is not None else ""
    correction = (f"\nCorrection (the right answer; the lesson must teach it): {feedback.correction}"
                  if feedback.correction else "")
    messages = [{"role": "system", "content": INSTRUCTIONS},
                {"role": "user", "content": f"Feedback{where}: {rating}. Comment: {feedback.comment or '(none)'}"
                                            f"{correction}\n\nTrace:\n{trace_text(run, steps)}"}]
    parts = [chunk.text async for chunk in model.stream(messages, [], stream=False) if isinstance(chunk, TextDelta)]
    text = "".join(parts)
    match = re.search(r"\{.*\}", text, re.S)
    try:
        data = json.loads(match.group(0)) if match else None
    except ValueError:
        data = None
    if not isinstance(data, dict) or not data.get("situation"):
        raise AgioError(f"the extractor model {getattr(model, 'name', model)!r} did not reply with a JSON "
                        f"experience (situation, action, outcome, lesson): {text[:120]!r}")
    return {f: str(data.get(f) or "") for f in FIELDS}


def propose(store: MemoryStore, repository: Repository, feedback_id: str, *, extractor: Model | None = None,
            scope: str | None = None, auto_accept: bool = False) -> Proposal:
    """Turn a feedback item into a proposed experience (accepted at once only with ``auto_accept``)."""
    feedback_id = store.resolve("feedback", feedback_id, ("feedback",))
    doc = store.get("feedback", feedback_id)
    if doc is None:
        raise NotFoundError(f"no feedback {feedback_id!r}")
    item = from_doc(Feedback, doc)
    run = repository.get_run(item.run_id)
    if run is None:
        raise NotFoundError(f"the run {item.run_id!r} of feedback {feedback_id[:8]} is no longer in the store")
    steps = [s for s in repository.get_steps(run.session_id) if s.run_id == run.id]
    if extractor is None:
        fields_, name = template_experience(item, run, steps), "template"
    else:
        fields_ = run_sync(model_experience(extractor, item, run, steps))
        name = getattr(extractor, "name", type(extractor).__name__)
    experience = {**fields_, "scope": scope or run.agent_name or "global", "source_run": run.id,
                  "source_step": item.step_id, "rating": item.rating}
    proposal = Proposal(feedback_id=item.id, run_id=run.id, experience=experience, extractor=name)
    store.put("proposals", [proposal])
    if auto_accept:
        accept(store, proposal.id)
        return store.proposal(proposal.id)
    return proposal


def accept(store: MemoryStore, proposal_id: str, **edits: Any) -> Experience:
    """Accept a proposal (with optional edits to its fields): the experience enters memory."""
    proposal = store.proposal(proposal_id)
    if proposal.status != "proposed":
        raise InvalidOperationError(f"proposal {proposal_id[:8]} is already {proposal.status}")
    allowed = set(Experience.EDITABLE)
    bad = sorted(set(edits) - allowed)
    if bad:
        raise AgioError(f"cannot set {', '.join(bad)} on an experience; fields: {', '.join(Experience.EDITABLE)}")
    experience = Experience(**{**proposal.experience, **{k: v for k, v in edits.items() if v is not None}})
    done = replace(proposal, status="accepted", experience=to_doc(experience), experience_id=experience.id,
                   reviewed_at=now())
    store.put_many([("experiences", to_doc(experience)), ("proposals", to_doc(done))])
    return experience


def reject(store: MemoryStore, proposal_id: str) -> Proposal:
    proposal = store.proposal(proposal_id)
    if proposal.status != "proposed":
        raise InvalidOperationError(f"proposal {proposal_id[:8]} is already {proposal.status}")
    done = replace(proposal, status="rejected", reviewed_at=now())
    store.put("proposals", [done])
    return done
