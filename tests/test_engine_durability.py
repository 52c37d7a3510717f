"""A completed step is on disk (visible to a second store instance) before the engine goes on."""

from __future__ import annotations

import asyncio

from agio_notebook import Agent, StepRunner, tool
from agio_notebook.storage import new_repository

from engine_support import ChunkModel, calls, commits_of, text


def test_steps_are_durable_before_tools_and_before_next_model_call(store_url):
    path = store_url  # on every backend
    observed: dict[str, list[str]] = {}

    @tool
    def look(label: str) -> str:
        """Record what a second reader of the store sees while this tool runs."""
        other = new_repository(path)
        observed[label] = [s.role.value for s in other.get_steps("s")]
        other.close()
        return "seen"

    class Peeking(ChunkModel):
        async def stream(self, messages, tools, *, stream=True):
            if len(self.seen) == 1:
                other = new_repository(path)
                observed["second model call"] = [s.role.value for s in other.get_steps("s")]
                other.close()
            async for chunk in super().stream(messages, tools, stream=stream):
                yield chunk

    repo = new_repository(path)
    runner = StepRunner(Agent(model=Peeking([calls(("look", {"label": "tool"})), text("done")]), tools=[look]),
                        repository=repo)
    result = asyncio.run(runner.run("s", "go"))
    repo.close()
    assert result.final_text == "done"
    assert observed["tool"] == ["user", "assistant"]
    assert observed["second model call"] == ["user", "assistant", "tool"]
    reopened = new_repository(path)
    assert [s.role.value for s in reopened.get_steps("s")] == ["user", "assistant", "tool", "assistant"]
    assert reopened.get_run(result.run_id).status.value == "completed"
    assert [e.type for e in reopened.get_events(result.run_id, 0, 1000)][-1].value == "run_completed"


def test_every_step_completed_is_on_disk_when_delivered(store_url):
    """User, assistant-with-calls, tool and final answer: a second reader sees each one at its event."""
    from agio_notebook.core import StepEventType

    path = store_url  # on every backend

    @tool
    def noop() -> str:
        """Do nothing."""
        return "ok"

    repo = new_repository(path)
    runner = StepRunner(Agent(model=ChunkModel([calls(("noop", {})), text("the end")]), tools=[noop]),
                        repository=repo)
    seen: list[tuple[str, bool]] = []

    async def consume():
        async for event in runner.run_stream("s", "go"):
            if event.type is StepEventType.STEP_COMPLETED:
                step = event.payload["step"]
                other = new_repository(path)
                stored = {s.id: s.to_dict() for s in other.get_steps("s")}
                other.close()
                seen.append((step["role"], stored.get(step["id"]) == step))

    asyncio.run(consume())
    repo.close()
    assert seen == [("user", True), ("assistant", True), ("tool", True), ("assistant", True)]


def test_a_final_answer_is_made_durable_with_the_runs_end_in_one_commit(store_url, monkeypatch):
    """A question answered at once costs two commits (the start, then the answer with the run's end), and
    the answer's events come after that commit, in order, with its hook before the run's end."""
    from agio_notebook import AgentHook
    from agio_notebook.core import StepEventType as E

    repo = new_repository(store_url)
    commits = commits_of(repo, monkeypatch)
    calls: list[str] = []

    class Order(AgentHook):
        async def on_step_end(self, run, step):
            calls.append(f"step {step.role.value}")

        async def on_run_end(self, run):
            calls.append("run end")

    seen_on_disk = []

    async def watch():
        runner = StepRunner(Agent(model=ChunkModel([text("forty-two")])), hooks=[Order()], repository=repo)
        events = []
        async for event in runner.run_stream("s", "the answer?"):
            if event.type is E.STEP_COMPLETED and event.payload["step"]["role"] == "assistant":
                other = new_repository(store_url)
                seen_on_disk.append([s.content for s in other.get_steps("s")])
                status = other.get_run(event.run_id).status.value
                other.close()
                seen_on_disk.append(status)
            events.append(event.type)
        return events

    events = asyncio.run(watch())
    monkeypatch.undo()
    repo.close()
    assert commits == [["user"], ["assistant"]], commits  # was three: the answer had a commit of its own
    assert seen_on_disk == [["the answer?", "forty-two"], "completed"]
    assert events[-3:] == [E.STEP_COMPLETED, E.METRICS, E.RUN_COMPLETED]
    assert calls == ["step user", "step assistant", "run end"]
