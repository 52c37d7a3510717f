"""A stored run as Markdown: what an MCP client (or a person in a terminal) reads of a transcript."""

from __future__ import annotations

from ..core import AgentRun, NotFoundError, Step, StepRole, mask
from ..core.conversation import is_memory_step
from ..storage.base import Repository

_LIMIT = 4000  # characters of one tool result shown; the whole result stays in the store


def run_markdown(repository: Repository, run_id: str) -> str:
    run = repository.get_run(run_id)
    if run is None:
        raise NotFoundError(f"no run {run_id!r} in the store")
    steps = [s for s in repository.get_steps(run.session_id) if s.run_id == run.id]
    return mask("\n\n".join([_head(run), *(_step(s) for s in steps if not is_memory_step(s)), _foot(run)]))


def _head(run: AgentRun) -> str:
    return (f"# Run {run.id[:8]} · {run.agent_name or 'agent'} ({run.model_name or 'model'})\n\n"
            f"session `{run.session_id}` · run `{run.id}` · {run.kind} · **{run.status.value}**")




def _step(step: Step) -> str:
    if step.role is StepRole.USER:
        return f"**User** (#{step.sequence})\n\n{_quote(step.content)}"
    if step.role is StepRole.TOOL:
        text = step.content or ""
        if len(text) > _LIMIT:
            text = text[:_LIMIT] + f"… [{len(step.content or '')} characters]"
        return f"**Tool result** `{step.name}` (#{step.sequence}, {step.status})\n\n```\n{text}\n```"
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
