"""An A2A server written with pydantic's fasta2a (a second implementation of the protocol, no agio):
``python a2a_fasta2a_server.py PORT``. It answers ``upper: TEXT`` with the text in capitals, and fails a
task whose text is ``fail``."""

from __future__ import annotations

import sys
import uuid
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import uvicorn
from fasta2a import FastA2A, Worker
from fasta2a.broker import InMemoryBroker
from fasta2a.schema import Artifact, Message, Part, TaskIdParams, TaskSendParams
from fasta2a.storage import InMemoryStorage


@dataclass
class UpperWorker(Worker[list[Message]]):
    async def run_task(self, params: TaskSendParams) -> None:
        task = await self.storage.load_task(params["id"])
        task_id, context_id = task["id"], task["context_id"]
        await self.storage.update_task(task_id, state="working")
        await self.publish_status(task_id, context_id, "working")
        text = " ".join(p["text"] for m in task.get("history", []) for p in m["parts"] if "text" in p)
        if text.strip() == "fail":
            await self.storage.update_task(task_id, state="failed", new_messages=[Message(
                role="agent", parts=[Part(text="cannot shout that")], message_id=str(uuid.uuid4()))])
            return
        artifact = Artifact(artifact_id=str(uuid.uuid4()), name="answer",
                            parts=[Part(text=text.removeprefix("upper: ").upper())])
        await self.storage.update_task(task_id, state="completed", new_artifacts=[artifact])
        await self.publish_artifact(task_id, context_id, artifact)

    async def cancel_task(self, params: TaskIdParams) -> None:
        await self.storage.update_task(params["id"], state="canceled")

    def build_message_history(self, history: list[Message]) -> list[Any]:
        return list(history)

    def build_artifacts(self, result: Any) -> list[Artifact]:
        return []


def app(port: int) -> FastA2A:
    storage, broker = InMemoryStorage(), InMemoryBroker()
    worker = UpperWorker(broker=broker, storage=storage)

    @asynccontextmanager
    async def lifespan(application: FastA2A):
        async with application.task_manager:
            async with worker.run():
                yield

    return FastA2A(storage=storage, broker=broker, name="Shouter", description="Says it louder.",
                   url=f"http://127.0.0.1:{port}/", lifespan=lifespan)


if __name__ == "__main__":
    port = int(sys.argv[1])
    uvicorn.run(app(port), host="127.0.0.1", port=port, log_level="warning")
