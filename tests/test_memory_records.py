"""Memory records: the retrieval's own time on the memory_read step, experiences' tags, update(df) naming
unknown ids in full, and retry with fresh memory down a chain of retries."""

from __future__ import annotations

import asyncio

import pandas as pd
import pytest

from agio_notebook import Agent, FunctionModel, StepRunner, memory
from agio_notebook.core import AgioError, StepEventType as E
from agio_notebook.memory import MemoryConfig
from agio_notebook.storage import TinyDBRepository


@pytest.fixture
def repo(tmp_path):
    return TinyDBRepository(tmp_path / "store")


def runner_and_systems(repo):
    systems: list[str | None] = []

    def answer(messages, tools):
        systems.append(messages[0]["content"] if messages[0]["role"] == "system" else None)
        return "ok"

    agent = Agent(model=FunctionModel(answer), name="tutor", system_prompt="You are a tutor.", memory=MemoryConfig())
    return StepRunner(agent, repository=repo), systems


def test_fresh_memory_follows_the_attempt_chain_three_retries_deep(repo):
    memory.add_skill("units", "Always give the unit.", scope="tutor", repository=repo)
    runner, systems = runner_and_systems(repo)
    first = asyncio.run(runner.run(None, "what unit for speed?"))
    second = asyncio.run(runner.retry(first.run_id))
    third = asyncio.run(runner.retry(second.run_id))
    fourth = asyncio.run(runner.retry(third.run_id))
    assert fourth.run.retry_of == third.run_id and third.run.retry_of == second.run_id
    memory.add_skill("units v2", "Always give the unit, in SI.", scope="tutor", repository=repo)
    assert all("SI" not in s for s in systems)
    # a retry of the retry of the retry, with fresh memory: the same as a retry of the original
    fresh = asyncio.run(runner.retry(fourth.run_id, fresh_memory=True))
    assert "SI" in systems[-1]
    reads = [e for e in fresh.events if e.type is E.MEMORY_READ]
    assert len(reads) == 1 and reads[0].payload["sequence"] == 2
    # and once more down the chain, from the fresh attempt (whose memory_read step is its own)
    memory.add_skill("units v3", "Always give the unit, in SI, with its symbol.", scope="tutor", repository=repo)
    again = asyncio.run(runner.retry(fresh.run_id, fresh_memory=True))
    assert "symbol" in systems[-1]
    assert sum(1 for e in again.events if e.type is E.MEMORY_READ) == 1
    current = repo.get_steps(first.session_id)
    assert [s.extra.get("kind") for s in current if s.extra.get("kind") == "memory_read"] == ["memory_read"]


def test_memory_read_step_stores_the_retrievals_own_time(repo):
    memory.add_skill("units", "Always give the unit.", scope="tutor", repository=repo)
    runner, _ = runner_and_systems(repo)
    result = asyncio.run(runner.run(None, "what unit for speed?"))
    step = next(s for s in repo.get_steps(result.session_id) if s.extra.get("kind") == "memory_read")
    took = step.extra["memory"]["retrieval_ms"]
    assert isinstance(took, float) and took > 0
    assert step.metrics.duration_ms == took
    run = repo.get_run(result.run_id)
    assert run.started_at <= step.extra["memory"]["retrieved_at"] <= step.created_at
    event = next(e for e in result.events if e.type is E.MEMORY_READ)
    assert event.payload["retrieval_ms"] == took


def test_experiences_have_tags_like_skills(repo):
    exp = memory.add_experience("asked for a date", lesson="call now()", tags=["time", "tools"], repository=repo)
    frame = memory.experiences(repository=repo)
    assert "tags" in frame.columns and frame.loc[0, "tags"] == ["time", "tools"]
    frame.loc[0, "tags"] = "calendar, time"
    assert memory.update(frame, repository=repo) == 1
    assert memory.experiences(repository=repo).loc[0, "tags"] == ["calendar", "time"]
    assert memory.edit(exp.id, tags=["dates"], repository=repo).tags == ["dates"]
    # tags are searchable, as a skill's are
    assert memory.search("dates", repository=repo).query("kind == 'experience'").iloc[0]["id"] == exp.id
    new = pd.DataFrame([{"id": None, "situation": "asked for a sum", "tags": "maths"}])
    assert memory.update(pd.concat([memory.experiences(repository=repo), new], ignore_index=True),
                         repository=repo) == 1
    assert sorted(map(tuple, memory.experiences(repository=repo)["tags"])) == [("dates",), ("maths",)]


def test_update_names_unknown_ids_in_full(repo):
    memory.add_skill("units", "Give units.", repository=repo)
    df = memory.skills(repository=repo)
    a, b = "abcdef12" + "0" * 24, "abcdef12" + "1" * 24  # the same 8 first characters
    bad = pd.concat([df, df.assign(id=a), df.assign(id=b)], ignore_index=True)
    with pytest.raises(AgioError) as info:
        memory.update(bad, repository=repo)
    assert a in str(info.value) and b in str(info.value)
    with pytest.raises(AgioError) as info:
        memory.update(pd.concat([df.assign(id=a), df.assign(id=a)], ignore_index=True), repository=repo)
    assert a in str(info.value)
