"""Feedback on a run, and the experience the agent's extractor proposes from it.

Shared by ``RunResult.feedback``, the notebook's feedback buttons and ``%agio feedback``, and ``AgentRunner``.
"""

from __future__ import annotations

from typing import Any

from ..agent import Agent
from ..core import InvalidOperationError
from ..memory import extractor, ratings
from ..memory.records import Feedback, Proposal
from ..memory.retrieval import MemoryConfig
from ..memory.store import memory_for
from ..storage.base import Repository
from .memory_read import memory_config


def extractor_for(agent: Agent) -> Any:
    """The model the agent's MemoryConfig names: None (template), "agent" (its own model) or a Model."""
    chosen = memory_config(agent).extractor
    return agent.model if chosen == "agent" else chosen


def feedback_and_proposal(repository: Repository, run_id: str, rating: Any, comment: str = "", *,
                          step: int | str | None = None, propose: bool = True, agent: Agent | None = None,
                          memory: MemoryConfig | None = None, correction: str | None = None,
                          auto_accept: bool | None = None) -> tuple[Feedback, Proposal | None]:
    """Store the feedback; with ``propose``, an experience is proposed (accepted at once when the agent's
    MemoryConfig, or ``auto_accept``, says so). Both go to the memory the agent's MemoryConfig reads, or
    ``memory`` where there is no agent (its extractor cannot then be "agent")."""
    config = memory_config(agent) if agent is not None else memory or MemoryConfig()
    if agent is None and config.extractor == "agent":
        raise InvalidOperationError('extractor="agent" needs the agent whose model extracts the experience')
    store = config.store or memory_for(repository)
    item = ratings.add_feedback(store, repository, run_id, rating, comment, step, correction)
    if not propose:
        return item, None
    run = repository.get_run(run_id)
    scope = config.scope or (run.agent_name if run is not None else None) or (agent.name if agent else None)
    accept = config.auto_accept if auto_accept is None else auto_accept
    proposal = extractor.propose(store, repository, item.id, extractor=extractor_for(agent) if agent else config.extractor,
                                 scope=scope, auto_accept=accept)
    return item, proposal
