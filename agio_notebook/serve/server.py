"""The store and a set of agents as an MCP server (the official ``mcp`` SDK's ``MCPServer``).

Tools: one per agent (run it on a query, progress notified as each step is stored, the answer and the
run id returned), ``list_runs``, ``list_sessions``, ``read_transcript``, ``retry`` and ``fork``.
Resources: ``agio://runs`` (the run list) and ``agio://runs/{run_id}`` (one run's transcript).
Every run a client starts is a run of the store like any other: frames, transcripts, retry and fork see it.
"""

from __future__ import annotations

import functools
from typing import Any, AsyncIterator, Awaitable, Callable, Mapping, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent

from ..agent import Agent
from ..core import AgioError, StepEvent, StepEventType
from ..execution import StepRunner
from ..storage.base import Repository
from .markdown import run_markdown

_E = StepEventType
F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def _one_line_errors(fn: F) -> F:
    """agio's own errors (an unknown id, an agent not served) reach the client as their one line; anything
    else stays a crash the SDK reports without its text."""
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return await fn(*args, **kwargs)
        except AgioError as exc:
            raise ToolError(str(exc)) from None

    return wrapper  # type: ignore[return-value]


def build_server(agents: Mapping[str, Agent], repository: Repository, *, name: str = "agio") -> MCPServer:
    server: MCPServer = MCPServer(name, instructions="agio-notebook agents and their stored runs. Each agent "
                                                    "tool runs that agent on a query; runs can be read, retried "
                                                    "and forked.")
    for tool_name, agent in agents.items():
        server.add_tool(_one_line_errors(_agent_tool(agent, repository)), name=tool_name,
                        description=_describe(tool_name, agent))

    def served(run_id: str) -> tuple[Agent, str]:
        run = repository.get_run(run_id)
        if run is None:
            raise AgioError(f"no run {run_id!r} in the store")
        agent = agents.get(run.agent_name or "") or next(
            (a for a in agents.values() if a.name == run.agent_name), None)
        if agent is None:
            raise AgioError(f"run {run_id[:8]} was made by agent {run.agent_name!r}, which this server does not serve "
                            f"(it serves: {', '.join(agents)})")
        return agent, run.session_id

    async def list_runs(session_id: str | None = None, limit: int = 20) -> str:
        """The store's most recent runs (or one session's) as a Markdown table, newest first."""
        runs = sorted(repository.list_runs(session_id), key=lambda r: r.started_at or 0, reverse=True)[:_limit(limit)]
        rows = [f"| `{r.id}` | `{r.session_id}` | {r.agent_name or ''} | {r.status.value} | {_cell(r.query)} |"
                for r in runs]
        return "\n".join(["| run | session | agent | status | query |", "|---|---|---|---|---|", *rows])

    async def list_sessions(limit: int = 20) -> str:
        """The store's sessions (forks name their origin) as a Markdown table, newest first."""
        sessions = sorted(repository.list_sessions(), key=lambda s: s.created_at, reverse=True)[:_limit(limit)]
        rows = [f"| `{s.session_id}` | {_cell(s.title)} | {f'`{s.forked_from}` at {s.forked_at}' if s.forked_from else ''} |"
                for s in sessions]
        return "\n".join(["| session | title | forked from |", "|---|---|---|", *rows])

    async def read_transcript(run_id: str) -> str:
        """One run as Markdown: every step, tool call and result, and how it ended."""
        return run_markdown(repository, run_id)

    async def retry(run_id: str, ctx: Context, from_seq: int | None = None) -> CallToolResult:
        """Run a stored run again from step ``from_seq`` (default: its first model call); the earlier
        attempt stays, superseded."""
        agent, _ = served(run_id)
        runner = StepRunner(agent, repository=repository)
        return await _answer(runner.retry_stream(run_id, from_seq), ctx)

    async def fork(session_id: str, at: int, ctx: Context, query: str | None = None) -> CallToolResult:
        """Copy a session up to step ``at`` into a new session and continue it (with ``query``, or by
        answering its last user step)."""
        last = next(iter(sorted(repository.list_runs(session_id), key=lambda r: r.started_at or 0, reverse=True)), None)
        if last is None:
            raise AgioError(f"no session {session_id!r} with runs in the store")
        agent, _ = served(last.id)
        runner = StepRunner(agent, repository=repository)
        return await _answer(runner.fork_stream(session_id, at, query), ctx)

    for fn in (list_runs, list_sessions, read_transcript, retry, fork):
        server.add_tool(_one_line_errors(fn))

    @server.resource("agio://runs", name="runs", mime_type="text/markdown",
                     description="The store's most recent runs")
    async def runs_resource() -> str:
        return await list_runs()

    @server.resource("agio://runs/{run_id}", name="run", mime_type="text/markdown",
                     description="One run's transcript as Markdown")
    async def run_resource(run_id: str) -> str:
        return run_markdown(repository, run_id)

    return server


def _agent_tool(agent: Agent, repository: Repository) -> Callable[..., Any]:
    async def run_agent(query: str, ctx: Context, session_id: str | None = None) -> CallToolResult:
        """Run the agent on ``query``; ``session_id`` continues that conversation instead of a new one."""
        runner = StepRunner(agent, repository=repository)
        return await _answer(runner.run_stream(session_id, query), ctx)

    return run_agent


async def _answer(events: AsyncIterator[StepEvent], ctx: Context) -> CallToolResult:
    """Drive a run, notifying progress as each step is stored; its answer (or its error) and its ids."""
    steps, final = 0, None
    async for event in events:
        if event.type is _E.STEP_COMPLETED:
            steps += 1
            step = event.payload["step"]
            await ctx.report_progress(steps, None, f"step {step['sequence']} ({step['role']}) stored")
        elif event.type.is_terminal:
            final = event.payload["run"]
    assert final is not None
    ids = {"run_id": final["id"], "session_id": final["session_id"], "status": final["status"]}
    if final["status"] == "completed":
        text = final.get("final_text") or ""
        return CallToolResult(content=[TextContent(type="text", text=text)],
                              structured_content={"answer": text, **ids})
    text = f"the run ended {final['status']}: {final.get('error') or ''} (run {final['id']})".replace(":  (", " (")
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content={"error": text, **ids},
                          is_error=True)


def _describe(name: str, agent: Agent) -> str:
    about = (agent.system_prompt or "").strip().splitlines()
    tools = ", ".join(t.name for t in agent.registry) or "none"
    return (f"Run the agio agent {name!r} on a query and return its answer and run id. "
            + (f"Its instructions begin: {about[0][:200]} " if about else "") + f"Its tools: {tools}.")


def _limit(limit: Any) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise AgioError(f"limit must be a whole number >= 1, got {limit!r}")
    return min(limit, 500)


def _cell(text: str | None) -> str:
    return " ".join((text or "").split()).replace("|", "\\|")[:80]
