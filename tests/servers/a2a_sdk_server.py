"""An A2A server written with the official a2a-sdk alone (no agio), for agio's A2A client to call:
``python a2a_sdk_server.py PORT [TOKEN]``. What it does depends on the query:

- ``echo TEXT``: two status messages, then the artifact ``echo: TEXT``;
- ``fail``: a failed task with a reason;
- ``forever``: works until it is cancelled, then writes the task id to ``$A2A_CANCELLED_LOG``;
- ``ask``: asks for input (a state a tool call cannot answer);
- ``meta``: answers with the metadata its message carried (as JSON).

``/bad`` serves a card that is not an agent card, ``/slow`` a card after 5 seconds.
With a TOKEN, every request must carry ``Authorization: Bearer TOKEN``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part, Task, TaskState,
                       TaskStatus)
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route


class EchoExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id, context.context_id
        await event_queue.enqueue_event(Task(id=task_id, context_id=context_id, history=[context.message],
                                             status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)))
        updater = TaskUpdater(event_queue, task_id, context_id)
        query = context.get_user_input()
        await updater.start_work(updater.new_agent_message([Part(text=f"reading {query!r}")]))
        if query == "fail":
            await updater.failed(updater.new_agent_message([Part(text="the archive is closed today")]))
        elif query == "ask":
            await updater.requires_input(updater.new_agent_message([Part(text="which archive?")]))
        elif query == "forever":
            try:
                while True:
                    await updater.update_status(TaskState.TASK_STATE_WORKING,
                                                updater.new_agent_message([Part(text="still working")]))
                    await asyncio.sleep(0.2)
            except asyncio.CancelledError:
                with open(os.environ["A2A_CANCELLED_LOG"], "a") as log:
                    log.write(task_id + "\n")
                raise
        else:
            if query == "meta":
                text = json.dumps(MessageToDict(context.message.metadata))
            else:
                await updater.update_status(TaskState.TASK_STATE_WORKING,
                                            updater.new_agent_message([Part(text="writing the answer")]))
                text = f"echo: {query.removeprefix('echo ')}"
            await updater.add_artifact([Part(text=text)], name="answer", last_chunk=True)
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def card(port: int) -> AgentCard:
    return AgentCard(name="Echo Archive", description="Echoes what it is asked, slowly.", version="1.0.0",
                     supported_interfaces=[AgentInterface(protocol_binding="JSONRPC", protocol_version="1.0",
                                                          url=f"http://127.0.0.1:{port}/")],
                     capabilities=AgentCapabilities(streaming=True), default_input_modes=["text/plain"],
                     default_output_modes=["text/plain"],
                     skills=[AgentSkill(id="echo", name="echo", description="echo text", tags=["echo"])])


def app(port: int, token: str | None) -> Starlette:
    handler = DefaultRequestHandler(agent_executor=EchoExecutor(), task_store=InMemoryTaskStore(),
                                    agent_card=card(port))

    async def bad_card(request):
        return JSONResponse({"name": 42, "skills": "none", "supportedInterfaces": "nowhere"})

    async def slow_card(request):
        await asyncio.sleep(5)
        return JSONResponse({})

    routes = [*create_agent_card_routes(card(port)), *create_jsonrpc_routes(handler, rpc_url="/"),
              Route("/bad/.well-known/agent-card.json", bad_card), Route("/slow/.well-known/agent-card.json", slow_card)]
    inner = Starlette(routes=routes)

    async def guarded(scope, receive, send):
        if token and scope["type"] == "http":
            given = dict(scope["headers"]).get(b"authorization", b"").decode()
            if given != f"Bearer {token}":
                await PlainTextResponse("no", status_code=401)(scope, receive, send)
                return
        await inner(scope, receive, send)

    return guarded


if __name__ == "__main__":
    port = int(sys.argv[1])
    uvicorn.run(app(port, sys.argv[2] if len(sys.argv) > 2 else None), host="127.0.0.1", port=port,
                log_level="warning")
