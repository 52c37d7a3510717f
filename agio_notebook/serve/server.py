"""The store and a set of agents as an MCP server (the official ``mcp`` SDK's ``MCPServer``).

Tools: one per agent (run it on a query, or continue one of its sessions; progress notified as each step of
it or of a run nested in it is stored; the answer and the run id returned), ``list_runs``,
``list_sessions``, ``read_transcript``, ``retry`` and ``fork``. Resources: ``agio://runs`` (the run list)
and ``agio://runs/{run_id}`` (one run's transcript). What a client may reach is ``access.py``'s rules: the
served agents' own sessions and runs. A call from another agio run carries its depth and budget in
``_meta`` (``execution/remote.py``): honoured here, and what the run spent goes back in the result's
``_meta``. Every run a client starts is a run of the store like any other.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any, Awaitable, Callable, Mapping, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, TextContent

from ..agent import Agent
from ..core import AgioError, mask
from ..execution.remote import CallerLimits
from ..storage.base import Repository
from .access import Access
from .host_logging import keep_host_logging
from .markdown import run_markdown
from .runs import Answer, Progress, drive, run_agent, runner_for

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def _one_line_errors(fn: F) -> F:
    """agio's own errors (an unknown id, a session the agent does not own, a call too deep) reach the
    client as their one line; anything else stays a crash the SDK reports without its text."""
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return await fn(*args, **kwargs)
        except AgioError as exc:
            raise ToolError(mask(str(exc))) from None

    return wrapper  # type: ignore[return-value]


def build_server(agents: Mapping[str, Agent], repository: Repository, *, name: str = "agio",
                 expose_store: bool = False) -> MCPServer:
    access = Access(agents, repository, via="mcp", expose_store=expose_store)
    with keep_host_logging():
        server: MCPServer = MCPServer(name, instructions="agio-notebook agents and their stored runs. Each agent "
                                                        "tool runs that agent on a query; its runs can be read, "
                                                        "retried and forked.")
    for tool_name, agent in agents.items():
        server.add_tool(_one_line_errors(_agent_tool(access, agent)), name=tool_name,
                        description=describe(tool_name, agent))

    async def list_runs(session_id: str | None = None, limit: int = 20, cursor: str | None = None) -> str:
        """The served agents' most recent runs (or one session's) as a Markdown table, newest first;
        ``cursor`` (given under the table) shows the next page."""
        page = await asyncio.to_thread(access.runs_page, session_id, limit, cursor)
        rows = [f"| `{r.id}` | `{r.session_id}` | {r.agent_name or ''} | {r.status.value} | {_cell(r.query)} |"
                for r in page.runs]
        more = [f"\nMore: `list_runs(cursor=\"{page.next_cursor}\")`"] if page.next_cursor else []
        return mask("\n".join(["| run | session | agent | status | query |", "|---|---|---|---|---|", *rows, *more]))

    async def list_sessions(limit: int = 20) -> str:
        """The served agents' sessions (forks name their origin) as a Markdown table, newest first."""
        sessions = await asyncio.to_thread(access.sessions, limit)
        rows = [f"| `{s.session_id}` | {_cell(s.title)} | {f'`{s.forked_from}` at {s.forked_at}' if s.forked_from else ''} |"
                for s in sessions]
        return mask("\n".join(["| session | title | forked from |", "|---|---|---|", *rows]))

    async def read_transcript(run_id: str) -> str:
        """One run as Markdown: every step, tool call and result (runs of agents it called as tools
        nested under their calls), and how it ended."""
        return await asyncio.to_thread(_transcript, access, run_id)

    async def retry(run_id: str, ctx: Context, from_seq: int | None = None) -> CallToolResult:
        """Run a stored run of a served agent again from step ``from_seq`` (default: its first model call);
        the earlier attempt stays, superseded."""
        agent, run = await asyncio.to_thread(access.run_to_redo, run_id)
        runner = runner_for(access, agent, CallerLimits.from_meta(_meta(ctx)))
        return _result(await drive(runner.retry_stream(run.id, from_seq), _progress(ctx)))

    async def fork(session_id: str, at: int, ctx: Context, query: str | None = None) -> CallToolResult:
        """Copy a served agent's session up to step ``at`` into a new session and continue it (with
        ``query``, or by answering its last user step)."""
        agent, source = await asyncio.to_thread(access.session_to_fork, session_id)
        runner = runner_for(access, agent, CallerLimits.from_meta(_meta(ctx)))
        return _result(await drive(runner.fork_stream(source, at, query), _progress(ctx)))

    for fn in (list_runs, list_sessions, read_transcript, retry, fork):
        server.add_tool(_one_line_errors(fn))

    @server.resource("agio://runs", name="runs", mime_type="text/markdown",
                     description="The served agents' most recent runs")
    async def runs_resource() -> str:
        return await list_runs()

    @server.resource("agio://runs/{run_id}", name="run", mime_type="text/markdown",
                     description="One run's transcript as Markdown")
    async def run_resource(run_id: str) -> str:
        try:
            return await asyncio.to_thread(_transcript, access, run_id)
        except AgioError as exc:  # one line for the client, as for the tools
            raise ResourceNotFoundError(mask(str(exc))) from None

    return server


def http_app(server: MCPServer) -> Any:
    """The server's streamable HTTP app; Host and Origin are checked in front of it (``http.py``), on every
    bind, so the SDK's own check (on loopback binds only) is left off: one rule, in one place."""
    return server.streamable_http_app(
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))


def _agent_tool(access: Access, agent: Agent) -> Callable[..., Any]:
    async def run(query: str, ctx: Context, session_id: str | None = None) -> CallToolResult:
        """Run the agent on ``query``; ``session_id`` continues one of its conversations instead of a new one."""
        limits = CallerLimits.from_meta(_meta(ctx))
        return _result(await run_agent(access, agent, query, session_id, limits, _progress(ctx)))

    return run


def _transcript(access: Access, run_id: str) -> str:
    return run_markdown(access.repository, access.visible_run(run_id).id)


def _meta(ctx: Context) -> Any:
    return ctx.request_context.meta


def _progress(ctx: Context) -> Callable[[Progress], Awaitable[None]]:
    count = 0

    async def report(progress: Progress) -> None:
        nonlocal count
        count += 1
        await ctx.report_progress(count, None, progress.message)

    return report


def _result(answer: Answer) -> CallToolResult:
    key = "answer" if answer.ok else "error"
    return CallToolResult(content=[TextContent(type="text", text=answer.text)],
                          structured_content={key: answer.text, **answer.ids}, is_error=not answer.ok,
                          **{"_meta": answer.meta or None})


def describe(name: str, agent: Agent) -> str:
    """What a client is told of an agent: its ``description`` (never its instructions) and its tools."""
    about = " ".join((agent.description or "").split())
    tools = ", ".join(t.name for t in agent.registry) or "none"
    return (f"Run the agio agent {name!r} on a query and return its answer and run id. "
            + (f"{about[:500]} " if about else "") + f"Its tools: {tools}.")


def _cell(text: str | None) -> str:
    return " ".join((text or "").split()).replace("|", "\\|")[:80]
