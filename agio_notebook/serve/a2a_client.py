"""A remote Agent2Agent agent as a tool: ``a2a_agent(url, headers=)``, through the official ``a2a-sdk`` client.

The agent card is read when the tool is made (its name and description become the tool's; a card that
cannot be had or read is one line then). Each call sends the model's ``query`` as a new task and follows
it by streaming:

- inside a run, the remote task shows in the calling cell as a nested card under the tool call: a nested
  run named after the remote agent whose steps are the task's status messages and whose end is the task's;
- the final artifact (or a direct reply message) is the tool's result;
- Stop (the run cancelled) cancels the remote task, and so does the call's ``timeout``, which the nested
  card names; the tool result then says the task was cancelled;
- a remote agent that is down, refuses the token, fails its task or asks for input is one tool-result
  line the model reads (``A2AError``);
- the calling run's depth and outermost budget go along in the message's metadata, and what an agio
  server reports its runs spent comes back against the run's tree (``execution/remote.py``), so an agent
  calling itself over A2A stops at the depth limit.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from typing import Any

import httpx
import pydantic

from ..core import AgentRun, AgioError, RunStatus, Step, StepEvent, StepEventType, StepRole, mask
from ..execution.nested import Scope, current_scope, forward
from ..execution.remote import RemoteCall, remote_call
from ..tools import Tool
from ..tools.context import get_call
from ..tools.mcp import one_line, register_header_secrets
from .a2a_wire import CARD_PATH, ZonedTimestamps, plain_metadata

_E = StepEventType
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class A2AError(AgioError):
    """A remote A2A agent could not be reached, refused, or ended its task without an answer."""


def a2a_agent(url: str, *, headers: dict[str, str] | None = None, name: str | None = None,
              description: str | None = None, timeout: float = 300.0, connect_timeout: float = 10.0) -> Tool:
    """The A2A agent at ``url`` (where its card is, under ``/.well-known/agent-card.json``) as a tool.

    ``headers`` go with every request (e.g. ``{"Authorization": "Bearer …"}``: masked wherever they could
    show); ``timeout`` bounds each call, after which the remote task is cancelled; ``connect_timeout``
    bounds reaching the server (and reading the card now).
    """
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise A2AError(f"a2a_agent needs the agent's http(s) URL, got {url!r}")
    for value, what in ((timeout, "timeout"), (connect_timeout, "connect_timeout")):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise A2AError(f"a2a_agent: {what} must be a number of seconds > 0, got {value!r}")
    headers = dict(headers or {})
    register_header_secrets(headers)
    card = fetch_card(url.rstrip("/"), headers, connect_timeout)
    tool_name = name if name is not None else re.sub(r"[^A-Za-z0-9_-]+", "_", card.name).strip("_")[:64] or "a2a_agent"
    if not isinstance(tool_name, str) or not _TOOL_NAME.match(tool_name):
        raise A2AError(f"a2a_agent: {tool_name!r} cannot be a tool name (letters, digits, _ and -, at most 64)")
    remote = RemoteAgent(url.rstrip("/"), card, headers, float(timeout), float(connect_timeout), tool_name)
    about = description or " ".join(card.description.split()) or f"The A2A agent {card.name!r}."
    skills = ", ".join(s.name for s in card.skills)
    args = pydantic.create_model(f"{tool_name}_arguments", __config__=pydantic.ConfigDict(extra="forbid"),
                                 query=(str, pydantic.Field(description="what to ask the agent")))
    return Tool(name=tool_name, description=f"{about[:800]}" + (f" Its skills: {skills}." if skills else ""),
                parameters={"type": "object", "required": ["query"], "properties": {
                    "query": {"type": "string", "description": "what to ask the agent"}}},
                function=remote, is_async=True, validate=lambda a: dict(args.model_validate(a).__dict__),
                timeout=timeout + connect_timeout + 15.0)  # the call's own timeout answers first, clearly


def fetch_card(url: str, headers: dict[str, str], timeout: float) -> Any:
    """The agent card at ``url``, read and checked now; one line for whatever is wrong with it."""
    from a2a.client.card_resolver import parse_agent_card
    from google.protobuf.json_format import ParseError

    where = url + CARD_PATH
    try:
        response = httpx.get(where, headers=headers, timeout=timeout, follow_redirects=False)
    except httpx.TimeoutException:
        raise A2AError(f"A2A agent at {url}: no agent card within {timeout:g}s") from None
    except httpx.HTTPError as exc:
        raise A2AError(f"A2A agent at {url} is unreachable: {_one_line(exc)}") from None
    if response.status_code in (401, 403):
        raise A2AError(f"A2A agent at {url} refused the request ({response.status_code}): a missing or wrong token")
    if response.status_code != 200:
        raise A2AError(f"A2A agent at {url}: no agent card at {where} (HTTP {response.status_code})")
    try:
        card = parse_agent_card(response.json())
    except (ValueError, ParseError) as exc:
        raise A2AError(f"A2A agent at {url}: its agent card cannot be read ({_one_line(exc)})") from None
    if not card.name or not card.supported_interfaces:
        missing = "a name" if not card.name else "an interface URL"
        raise A2AError(f"A2A agent at {url}: its agent card has no {missing}")
    return card


class RemoteAgent:
    """The function of an ``a2a_agent`` tool: one call is one remote task, followed to its end."""

    needs_scope = True  # it sees its run: the nested card, the depth and budget that go along

    def __init__(self, url: str, card: Any, headers: dict[str, str], timeout: float, connect_timeout: float,
                 name: str):
        self.url, self.card, self.headers = url, card, headers
        self.timeout, self.connect_timeout, self.name = timeout, connect_timeout, name

    def __repr__(self) -> str:  # never the headers
        return f"RemoteAgent({self.card.name!r} at {self.url})"

    async def __call__(self, query: str) -> str:
        from a2a.types import Message, Part, Role

        card = NestedCard.open(self, query)
        message = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text=query)])
        with remote_call() as budget:  # what the calling run lends this call of its budget, until it ends
            if budget.meta:
                message.metadata.update(budget.meta)
            follow = _Follow(self, card)
            await self._send(message, follow, card)
            return follow.answer(card, budget)

    async def _send(self, message: Any, follow: _Follow, card: NestedCard) -> None:
        from a2a.client import ClientConfig, ClientFactory
        from a2a.types import SendMessageRequest

        async with httpx.AsyncClient(headers=self.headers, timeout=httpx.Timeout(self.connect_timeout, read=None),
                                     follow_redirects=False, transport=ZonedTimestamps()) as http:
            client = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(self.card)
            try:
                async with asyncio.timeout(self.timeout):
                    async for event in client.send_message(SendMessageRequest(message=message)):
                        follow.see(event)
                    await follow.poll(client)
            except TimeoutError:
                cancelled = await follow.cancel(client)
                line = (f"A2A agent {self.card.name!r} gave no answer within {self.timeout:g}s (the a2a_agent "
                        f"timeout); its task was {'cancelled' if cancelled else 'left running: cancelling it failed'}")
                card.end(RunStatus.FAILED, line)
                raise A2AError(line) from None
            except asyncio.CancelledError:
                await follow.cancel(client)  # Stop: the remote task stops too
                card.end(RunStatus.CANCELLED, "cancelled")
                raise
            except Exception as exc:  # noqa: BLE001 - whatever the transport raises is one line for the model
                line = f"A2A agent {self.card.name!r} at {self.url} failed: {_one_line(exc)}"
                card.end(RunStatus.FAILED, line)
                raise A2AError(line) from None


class _Follow:
    """What one remote task said: its id, status messages (to the nested card), answer, end, spend."""

    def __init__(self, remote: RemoteAgent, card: NestedCard):
        self.remote, self.card = remote, card
        self.task_id: str | None = None
        self.state: Any = None
        self.texts: list[str] = []
        self.last_status: str = ""
        self.meta: dict[str, Any] = {}

    def see(self, event: Any) -> None:
        from a2a.helpers import get_artifact_text, get_message_text

        if event.HasField("message"):  # a direct reply, no task
            self.texts.append(get_message_text(event.message))
            self.state = "message"
            self._meta(event.message)
            return
        if event.HasField("task"):
            self.see_task(event.task)
        elif event.HasField("status_update"):
            update = event.status_update
            self.task_id = update.task_id or self.task_id
            self.state = update.status.state
            self._meta(update)
            if update.status.HasField("message"):
                text = get_message_text(update.status.message)
                self._meta(update.status.message)
                if text:
                    self.last_status = text
                    self.card.step(text)
        elif event.HasField("artifact_update"):
            self.task_id = event.artifact_update.task_id or self.task_id
            self.texts.append(get_artifact_text(event.artifact_update.artifact))
            self._meta(event.artifact_update.artifact)

    def see_task(self, task: Any) -> None:
        """A whole task (the first event of a stream, or a poll's answer): its state, and its artifacts
        once it has ended."""
        from a2a.helpers import get_artifact_text, get_message_text

        self.task_id, self.state = task.id, task.status.state
        if task.status.HasField("message"):
            self.last_status = get_message_text(task.status.message) or self.last_status
        if self.ended:
            self.texts = [get_artifact_text(a) for a in task.artifacts] or self.texts
            for artifact in task.artifacts:
                self._meta(artifact)

    @property
    def ended(self) -> bool:
        from a2a.types import TaskState

        return self.state == "message" or self.state in (
            TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED,
            TaskState.TASK_STATE_REJECTED, TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED)

    async def poll(self, client: Any) -> None:
        """A server that answered without streaming the task to its end: ask for it until it ends."""
        from a2a.types import GetTaskRequest

        while not self.ended and self.task_id is not None:
            await asyncio.sleep(0.2)
            self.see_task(await client.get_task(GetTaskRequest(id=self.task_id)))

    def _meta(self, holder: Any) -> None:
        self.meta.update(plain_metadata(holder))

    async def cancel(self, client: Any) -> bool:
        """Cancel the remote task (bounded: a caller that stops must not hang on a server that does not)."""
        from a2a.types import CancelTaskRequest

        if self.task_id is None:
            return False
        try:
            async with asyncio.timeout(self.remote.connect_timeout):
                await asyncio.shield(client.cancel_task(CancelTaskRequest(id=self.task_id)))
            return True
        except Exception:  # noqa: BLE001 - the caller's outcome stands; the line says the cancel failed
            return False

    def answer(self, card: NestedCard, budget: RemoteCall) -> str:
        from a2a.types import TaskState

        budget.answered(self.meta)
        name = self.remote.card.name
        text = "\n".join(t for t in self.texts if t)
        if self.state in ("message", TaskState.TASK_STATE_COMPLETED):
            card.end(RunStatus.COMPLETED, None, text)
            return text
        state = TaskState.Name(self.state).removeprefix("TASK_STATE_").lower() if isinstance(self.state, int) else "unknown"
        if self.state in (TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED):
            line = f"A2A agent {name!r} asks for {state.replace('_required', '')}, which a tool call cannot give"
        elif self.state is None:
            line = f"A2A agent {name!r} ended the stream without a task"
        else:
            why = f": {self.last_status}" if self.last_status else ""
            line = f"A2A agent {name!r} (task {(self.task_id or '')[:8]}) ended {state}{why}"
        card.end(RunStatus.FAILED, line)
        raise A2AError(" ".join(mask(line).split()))


class NestedCard:
    """The remote task as a nested run in the calling cell: events forwarded into the calling run's stream
    (never stored: the remote agent's own store keeps its run; the tool step keeps the answer)."""

    def __init__(self, scope: Scope | None, tool_call_id: str, run: AgentRun):
        self.scope, self.tool_call_id, self.run = scope, tool_call_id, run
        self.seq = 0
        self.sequence = 1

    @classmethod
    def open(cls, remote: RemoteAgent, query: str) -> NestedCard:
        scope, call = current_scope.get(), get_call()
        run = AgentRun(session_id=f"a2a:{remote.url}", query=query, agent_name=remote.card.name,
                       model_name=f"A2A {remote.url} (time limit {remote.timeout:g}s)")
        card = cls(scope if call is not None else None, call.tool_call_id if call is not None else "", run)
        card._emit(_E.RUN_STARTED, {"run": run.to_dict()})
        card.step_user(query)
        return card

    def step_user(self, text: str) -> None:
        self._step(StepRole.USER, text)

    def step(self, text: str) -> None:
        self._step(StepRole.ASSISTANT, text)

    def _step(self, role: StepRole, text: str) -> None:
        step = Step(session_id=self.run.session_id, run_id=self.run.id, sequence=self.sequence, role=role,
                    content=mask(text))
        self.sequence += 1
        self.run.metrics.steps += 1
        self._emit(_E.STEP_COMPLETED, {"step": step.to_dict()})

    def end(self, status: RunStatus, error: str | None, text: str | None = None) -> None:
        if self.run.status.is_terminal:
            return
        self.run.status, self.run.error, self.run.final_text = status, error, text
        kind = {RunStatus.COMPLETED: _E.RUN_COMPLETED, RunStatus.CANCELLED: _E.RUN_CANCELLED}.get(status, _E.RUN_FAILED)
        self._emit(kind, {"run": mask(self.run.to_dict())})

    def _emit(self, kind: StepEventType, payload: dict[str, Any]) -> None:
        if self.scope is None:
            return
        self.seq += 1
        event = StepEvent(kind, self.run.id, self.run.session_id, self.seq, payload)
        forward(self.scope, self.tool_call_id, self.run.id, event)


def _one_line(exc: BaseException) -> str:
    return mask(one_line(exc))
