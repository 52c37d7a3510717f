"""Feedback from the notebook: store it, then let the agent's extractor propose an experience."""

from __future__ import annotations

from typing import Any

from .. import memory
from ..agent import Agent
from ..execution.memory_read import memory_config
from ..memory.records import Feedback, Proposal
from ..storage.base import Repository


def extractor_for(agent: Agent) -> Any:
    """The model the agent's MemoryConfig names: None (template), "agent" (its own model) or a Model."""
    chosen = memory_config(agent).extractor
    return agent.model if chosen == "agent" else chosen


def feedback_and_proposal(repository: Repository, run_id: str, rating: Any, comment: str = "", *,
                          step: int | str | None = None, propose: bool = True,
                          agent: Agent) -> tuple[Feedback, Proposal | None]:
    item = memory.add_feedback(run_id, rating, comment, step=step, repository=repository)
    if not propose:
        return item, None
    config = memory_config(agent)
    run = repository.get_run(run_id)
    scope = config.scope or (run.agent_name if run is not None else None) or agent.name
    proposal = memory.propose(item.id, extractor=extractor_for(agent), scope=scope,
                              auto_accept=config.auto_accept, repository=repository)
    return item, proposal


def describe(proposal: Proposal) -> str:
    """One short paragraph for the cell: what was proposed and how to review it."""
    e = proposal.experience
    head = ("experience accepted into memory (auto-accept)" if proposal.status == "accepted" else
            f"proposed experience {proposal.id}; review it with `%agio memory accept {proposal.id}` "
            f"(edit with --lesson ...) or `%agio memory reject {proposal.id}`")
    return f"agio: {head}\n  situation: {e['situation']}\n  lesson: {e['lesson']}"
