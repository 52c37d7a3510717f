"""A stored run as Markdown: the one transcript renderer of the servers (MCP's ``read_transcript`` and run
resources, A2A's status messages), masked of the process's secrets (``core.redact.mask``).

A run that called agents as tools shows each nested run under the tool result it answered, quoted one
level deeper, as the notebook's transcript draws it inside the tool card.
"""

from __future__ import annotations

import re

from ..core import AgentRun, NotFoundError, Step, StepRole, mask
from ..core.conversation import is_memory_step
from ..execution.nested import MAX_DEPTH
from ..storage.base import Repository

_LIMIT = 4000  # characters of one tool result shown; the whole result stays in the store


def run_markdown(repository: Repository, run_id: str) -> str:
    run = repository.get_run(run_id)
    if run is None:
        raise NotFoundError(f"no run {run_id!r} in the store")
    return mask(_run(repository, run, 1, {run.id}))


def step_markdown(step: Step) -> str:
    """One stored step, as a client is told it (masked)."""
    return mask(_step(step))


def _run(repository: Repository, run: AgentRun, level: int, seen: set[str]) -> str:
    blocks = [_head(run, level)]
    for step in repository.get_steps(run.session_id):
        if step.run_id != run.id or is_memory_step(step):
            continue
        blocks.append(_step(step))
        nested = _nested(repository, step, seen) if level <= MAX_DEPTH else None
        if nested is not None:
            seen.add(nested.id)
            blocks.append(_quote(_run(repository, nested, level + 1, seen)))
    blocks.append(_foot(run))
    return "\n\n".join(blocks)


def _nested(repository: Repository, step: Step, seen: set[str]) -> AgentRun | None:
    """The nested run that answered this tool step (an agent called as a tool), if it is in the store."""
    link = step.extra.get("nested_run") if step.role is StepRole.TOOL else None
    run_id = link.get("run_id") if isinstance(link, dict) else None
    if not run_id or run_id in seen:
        return None
    return repository.get_run(run_id)


def _head(run: AgentRun, level: int) -> str:
    where = (f" · nested at depth {run.depth} under run `{run.parent_run_id}`" if run.parent_run_id else "")
    return (f"{'#' * min(level, 6)} Run {run.id[:8]} · {run.agent_name or 'agent'} ({run.model_name or 'model'})\n\n"
            f"session `{run.session_id}` · run `{run.id}` · {run.kind} · **{run.status.value}**{where}")


def _step(step: Step) -> str:
    if step.role is StepRole.USER:
        return f"**User** (#{step.sequence})\n\n{_quote(step.content)}"
    if step.role is StepRole.TOOL:
        text = step.content or ""
        if len(text) > _LIMIT:
            text = text[:_LIMIT] + f"… [{len(step.content or '')} characters]"
        fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", text)), default=0))
        return f"**Tool result** `{step.name}` (#{step.sequence}, {step.status})\n\n{fence}\n{text}\n{fence}"
    if step.role is StepRole.ASSISTANT:
        parts = [f"**Assistant** (#{step.sequence})"]
        if step.content:
            parts.append(_quote(step.content))
        parts += [f"- calls `{c.name}({c.arguments})`" for c in step.tool_calls]
        return "\n\n".join(parts)
    return f"**{step.role.value}** (#{step.sequence})\n\n{_quote(step.content)}"


def _foot(run: AgentRun) -> str:
    m = run.metrics
    line = f"{m.model_calls} model calls · {m.tool_calls} tool calls · {m.total_tokens or 0} tokens"
    return line + (f"\n\n**Error:** {run.error}" if run.error else "")


def _quote(text: str | None) -> str:
    return "\n".join(f"> {line}" for line in (text or "").splitlines()) or "> (empty)"
