"""The ``memory_read`` step: retrieval before a run's first model call, recorded in the trace.

The step lists exactly what went into the prompt (ids, kinds, scores and the injected text); its
``content`` is the block appended to the system prompt, so a retry or resume that keeps the step
sends the model the same memory (see ``context.steps_to_messages``).
"""

from __future__ import annotations

import time
from typing import Any

from ..agent import Agent
from ..core import Step, StepMetrics, StepRole, now
from ..core.conversation import MEMORY_READ, is_memory_step
from ..memory.retrieval import MemoryConfig, format_block, retrieve
from ..memory.store import existing_memory
from ..storage.base import Repository
from .recorder import RunRecorder


def memory_config(agent: Agent) -> MemoryConfig:
    config = getattr(agent, "memory", None)
    return config if isinstance(config, MemoryConfig) else MemoryConfig()


def set_system_prompt(messages: list[dict[str, Any]], system_prompt: str | None, block: str | None) -> None:
    """Make ``messages[0]`` the agent's system prompt plus ``block`` (replacing any inherited memory)."""
    content = f"{system_prompt}\n\n{block}" if system_prompt and block else (system_prompt or block)
    has_system = bool(messages) and messages[0]["role"] == "system"
    if content is None:
        if has_system:
            del messages[0]
    elif has_system:
        messages[0] = {"role": "system", "content": content}
    else:
        messages.insert(0, {"role": "system", "content": content})


def read_memory(agent: Agent, repository: Repository, query: str, rec: RunRecorder) -> Step | None:
    """Retrieve for ``query``; returns the memory_read step (not yet recorded), or None when nothing fits.

    Also sets the run's system prompt: the agent's own plus what was retrieved, nothing inherited.
    """
    config = memory_config(agent)
    store = (config.store or existing_memory(repository)) if config.enabled else None
    got = None
    started_at, t0 = now(), time.perf_counter()
    if store is not None:
        got = retrieve(store, query, scope=config.scope or agent.name, skills=config.skills,
                       experiences=config.experiences, embeddings=config.embeddings, min_score=config.min_score)
    if not got:
        set_system_prompt(rec.messages, rec.instructions, None)
        return None
    block = format_block(got)
    set_system_prompt(rec.messages, rec.instructions, block)
    items = got.items()  # each record with its kind, score, and the retriever(s) that found it
    store.count_use(got.records)
    took_ms = (time.perf_counter() - t0) * 1000.0  # the retrieval's own time, not the run's
    run = rec.run
    return Step(session_id=run.session_id, run_id=run.id, sequence=rec.next_sequence(), role=StepRole.SYSTEM,
                content=block, metrics=StepMetrics(duration_ms=took_ms),
                extra={"kind": MEMORY_READ, "memory": {
                    "query": query, "scope": got.scope, "mode": got.mode, "embeddings": got.embeddings, "items": items,
                    "retrieved_at": started_at, "retrieval_ms": took_ms}})


def memory_event_payload(step: Step) -> dict[str, Any]:
    """What the ``memory_read`` event carries: the step's sequence and id, and exactly what went in."""
    return {"sequence": step.sequence, "step_id": step.id, "text": step.content, **step.extra["memory"]}


def memory_read_sequence(repository: Repository, run_id: str) -> int | None:
    """Where a run's current memory_read step sits (a retry from there retrieves afresh).

    A retry keeps the memory_read step of the attempt it retried (or writes its own, with fresh memory),
    so the step is looked for under the run and every attempt it retried, back to the original.
    """
    run = repository.get_run(run_id)
    if run is None:
        return None
    session_id = run.session_id
    chain: set[str] = set()
    while run is not None and run.id not in chain:
        chain.add(run.id)
        run = repository.get_run(run.retry_of) if run.retry_of else None
    return next((s.sequence for s in repository.get_steps(session_id)
                 if s.run_id in chain and is_memory_step(s)), None)
