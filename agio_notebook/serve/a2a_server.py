"""The notebook's agents over the Agent2Agent protocol, with the official ``a2a-sdk`` (1.x).

Each served agent gets an agent card (``/NAME/.well-known/agent-card.json``: its name, its description,
a skill per tool, bearer auth) and a JSON-RPC endpoint (``/NAME``) handled by the SDK's request handler
over an in-memory task store: ``message/send``, ``message/stream``, ``tasks/get``, ``tasks/cancel``.

An A2A task is a run of the store: :class:`AgioExecutor` runs the agent through ``serve/runs.py`` as the
MCP server does, so the same rules hold (``access.py``: a context id continues only a session the agent
owns; the token, Host and Origin checked by ``http.py``; text masked). The A2A context id is the agio
session id, so a multi-turn conversation is one session. Each stored step, the agent's own and its nested
runs', becomes a ``working`` status update (the step as Markdown, its sequence, role and nesting path in
the metadata); the answer becomes the ``answer`` artifact and the task completes; a run that fails is a
failed task with its one line; ``tasks/cancel`` cancels the run as Stop does (its completed steps kept).
A message from an agio run carries its depth and budget left in its metadata (``execution/remote.py``):
honoured here, and what the run spent goes back in the artifact's and final status's metadata.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (AgentCapabilities, AgentCard, AgentInterface, AgentSkill, HTTPAuthSecurityScheme, Part,
                       SecurityRequirement, SecurityScheme, StringList, Task, TaskState, TaskStatus)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ..agent import Agent
from ..core import AgioError, Step, mask
from ..execution.remote import CallerLimits
from ..storage.base import Repository
from .a2a_wire import CARD_PATH, plain_metadata, whole_numbers
from .access import Access
from .host_logging import keep_host_logging
from .markdown import step_markdown
from .runs import Progress, run_agent

class AgioExecutor(AgentExecutor):
    """Runs one served agent for the SDK's request handler: a task is a run."""

    def __init__(self, access: Access, agent: Agent):
        self.access, self.agent = access, agent

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id or "", context.context_id or ""
        updater = TaskUpdater(event_queue, task_id, context_id)
        if context.current_task is None:
            history = [context.message] if context.message is not None else []
            await event_queue.enqueue_event(Task(id=task_id, context_id=context_id, history=history,
                                                 status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)))

        async def progress(step: Progress) -> None:
            text = step_markdown(Step.from_dict(step.step))
            await updater.update_status(TaskState.TASK_STATE_WORKING, updater.new_agent_message(
                [Part(text=text)], metadata={"agio": {"sequence": step.step["sequence"], "role": step.step["role"],
                                                      "path": list(step.path), "run_id": step.step.get("run_id")}}))

        try:
            limits = CallerLimits.from_meta(_metadata(context))
            repository = self.access.repository
            session = (context_id if repository.get_session(context_id) is not None
                       else self.access.new_session(self.agent, context_id))
            answer = await run_agent(self.access, self.agent, context.get_user_input(), session, limits, progress)
        except AgioError as exc:  # refused (a session not its own, too deep, bad metadata): one line
            await updater.failed(updater.new_agent_message([Part(text=mask(str(exc)))]))
            return
        meta = {"agio": answer.ids, **answer.meta}
        if answer.ok:
            await updater.add_artifact([Part(text=answer.text)], name="answer", metadata=meta, last_chunk=True)
            await updater.complete()
        else:
            await updater.update_status(TaskState.TASK_STATE_FAILED,
                                        updater.new_agent_message([Part(text=answer.text)], metadata=meta),
                                        metadata=meta)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """The SDK has cancelled ``execute`` (the run records its cancellation, steps kept): say so."""
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel(updater.new_agent_message([Part(text="cancelled by the client")]))


def _metadata(context: RequestContext) -> dict[str, Any]:
    """The message's metadata, else the request's, as plain values."""
    found = plain_metadata(context.message) if context.message is not None else {}
    return found or whole_numbers(dict(context.metadata or {}))


def agent_card(name: str, agent: Agent, url: str) -> AgentCard:
    """The card of a served agent: its description (never its instructions), a skill per tool."""
    about = " ".join((agent.description or "").split()) or f"The agio agent {name!r}."
    skills = [AgentSkill(id=t.name, name=t.name, description=" ".join((t.description or t.name).split())[:500],
                         tags=["tool"]) for t in agent.registry]
    if not skills:  # a card names at least one skill: the agent answering itself
        skills = [AgentSkill(id=name, name=name, description=about, tags=["agent"])]
    return AgentCard(
        name=name, description=about, version="1.0.0",
        supported_interfaces=[AgentInterface(protocol_binding="JSONRPC", protocol_version="1.0", url=url)],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"], default_output_modes=["text/plain"], skills=skills,
        security_schemes={"bearer": SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="bearer"))},
        security_requirements=[SecurityRequirement(schemes={"bearer": StringList()})])


def build_a2a_app(agents: Mapping[str, Agent], repository: Repository, *, expose_store: bool = False) -> Starlette:
    """One Starlette app serving every agent under ``/NAME``."""
    access = Access(agents, repository, via="a2a", expose_store=expose_store)
    routes: list[Any] = []
    with keep_host_logging():
        for name, agent in agents.items():
            card = agent_card(name, agent, f"http://127.0.0.1/{name}")
            handler = DefaultRequestHandler(agent_executor=AgioExecutor(access, agent), task_store=InMemoryTaskStore(),
                                            agent_card=card)
            routes += create_jsonrpc_routes(handler, rpc_url=f"/{name}", enable_v0_3_compat=True)
            routes.append(Route(f"/{name}{CARD_PATH}", _card_endpoint(name, agent), methods=["GET"]))
    return Starlette(routes=routes)


def _card_endpoint(name: str, agent: Agent) -> Any:
    async def card(request: Request) -> JSONResponse:
        # the URL a client reaches the agent by is the one it came in through (its Host was checked)
        base = f"{request.url.scheme}://{request.headers.get('host')}"
        return JSONResponse(agent_card_to_dict(agent_card(name, agent, f"{base}/{name}")))

    return card


def agent_urls(base: str, names: Iterable[str]) -> dict[str, str]:
    return {name: f"{base}/{name}" for name in names}
