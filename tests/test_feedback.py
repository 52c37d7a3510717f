"""Feedback -> proposed experience -> reviewed -> retrieved by the next run in scope."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import agio_notebook
from agio_notebook import Agent, FunctionModel, Reply, StepRunner, memory, tool
from agio_notebook.core import AgioError, InvalidOperationError, NotFoundError
from agio_notebook.memory import MemoryConfig
from agio_notebook.notebook.commands import COMMANDS
from agio_notebook.notebook.controller import Controller
from agio_notebook.storage import TinyDBRepository


@pytest.fixture
def repo(tmp_path):
    return TinyDBRepository(tmp_path / "store")


@tool
def convert(value: float, unit: str) -> str:
    """Convert a speed to a unit."""
    return f"{value} {unit}"


def tutor(seen: list):
    """Answers in miles unless its prompt carries a lesson about kilometres."""

    def reply(messages, tools):
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        seen.append(system)
        if messages[-1]["role"] == "tool":
            return f"It is {messages[-1]['content']}."
        unit = "km/s" if "kilometres" in system else "miles/s"
        return Reply.call("convert", value=299792 if unit == "km/s" else 186282, unit=unit)

    return Agent(model=FunctionModel(reply), tools=[convert], name="tutor", system_prompt="You teach physics.")


def test_feedback_proposal_accept_and_the_next_run_gets_it_right(repo):
    seen: list[str] = []
    runner = StepRunner(tutor(seen), repository=repo)
    first = asyncio.run(runner.run(None, "What is the speed of light?"))
    assert "miles" in first.final_text
    item = memory.add_feedback(first.run_id, -1, "Use kilometres per second for speeds.", step=3, repository=repo)
    assert item.sequence == 3 and item.step_id == repo.get_steps(first.session_id)[2].id
    frame = agio_notebook.feedback(repository=repo)
    assert frame.loc[0, "rating"] == -1 and frame.loc[0, "comment"].startswith("Use kilometres")
    proposal = memory.propose(item.id, scope="tutor", repository=repo)
    assert proposal.status == "proposed" and proposal.extractor == "template"
    assert proposal.experience["situation"] == "What is the speed of light?"
    assert "convert" in proposal.experience["action"] and proposal.experience["rating"] == -1
    # nothing entered memory before the review
    assert memory.experiences(repository=repo).empty
    second = asyncio.run(runner.run(None, "What is the speed of light?"))
    assert "miles" in second.final_text
    exp = memory.accept(proposal.id, lesson="Give the speed of light in kilometres per second.", repository=repo)
    assert exp.source_run == first.run_id and exp.scope == "tutor"
    assert memory.proposals(repository=repo).loc[0, "status"] == "accepted"
    third = asyncio.run(runner.run(None, "What is the speed of light?"))
    assert "km/s" in third.final_text
    assert "Give the speed of light in kilometres per second." in seen[-2]
    with pytest.raises(InvalidOperationError, match="already accepted"):
        memory.accept(proposal.id, repository=repo)


def test_a_function_model_extractor_and_reject(repo):
    seen: list[str] = []
    first = asyncio.run(StepRunner(tutor(seen), repository=repo).run(None, "speed of light?"))
    prompts = []

    def extract(messages, tools):
        prompts.append(messages[-1]["content"])
        return json.dumps({"situation": "speed questions", "action": "answered in miles",
                           "outcome": "user wanted km", "lesson": "use kilometres"})

    item = memory.add_feedback(first.run_id, "down", "wrong unit", repository=repo)
    proposal = memory.propose(item.id, extractor=FunctionModel(extract, name="extractor"), repository=repo)
    assert proposal.extractor == "extractor" and proposal.experience["lesson"] == "use kilometres"
    assert "Feedback: -1 (bad). Comment: wrong unit" in prompts[0] and "tool convert -> ok" in prompts[0]
    memory.reject(proposal.id, repository=repo)
    assert memory.experiences(repository=repo).empty
    # a model that does not answer JSON: one clear error, no proposal stored
    with pytest.raises(AgioError, match="did not reply with a JSON experience"):
        memory.propose(item.id, extractor=FunctionModel(lambda m, t: "no idea"), repository=repo)
    assert len(memory.proposals(repository=repo)) == 1


def test_auto_accept_only_when_configured(repo, tmp_path):
    c = Controller(store=str(tmp_path / "store"))
    agent = tutor([])
    handle = c.run_query("speed of light?", agent=agent)
    proposal = handle.feedback(-1, "use kilometres")
    assert proposal.status == "proposed" and memory.experiences(repository=c.repository).empty
    agent.memory = MemoryConfig(auto_accept=True)
    handle = c.run_query("speed of light again?", agent=agent)
    proposal = handle.feedback(+1, "good")
    assert proposal.status == "accepted"
    assert len(memory.experiences("tutor", repository=c.repository)) == 1


def test_bad_feedback_is_one_line_and_stores_nothing(repo, tmp_path, capsys):
    c = Controller(store=str(tmp_path / "store"))
    handle = c.run_query("speed of light?", agent=tutor([]))
    journal = Path(c.repository.root) / "memory.jsonl"
    before = journal.read_bytes() if journal.exists() else b""
    with pytest.raises(NotFoundError, match="no run 'nope' in the store"):
        COMMANDS["feedback"].handler(c, COMMANDS["feedback"].parse(["nope", "+1"]))
    with pytest.raises(AgioError, match=r"a rating is \+1 or -1"):
        COMMANDS["feedback"].handler(c, COMMANDS["feedback"].parse([handle.run_id, "5"]))
    with pytest.raises(NotFoundError, match="has no step 99"):
        handle.feedback(1, step=99)
    assert (journal.read_bytes() if journal.exists() else b"") == before
    COMMANDS["feedback"].handler(c, COMMANDS["feedback"].parse([handle.run_id, "-1", "use", "kilometres"]))
    out = capsys.readouterr().out
    assert "feedback -1 stored" in out and "%agio memory accept" in out
    pid = memory.proposals(repository=c.repository).loc[0, "id"]
    COMMANDS["memory"].handler(c, COMMANDS["memory"].parse(["accept", pid, "--lesson", "Use km/s."]))
    assert memory.experiences(repository=c.repository).loc[0, "lesson"] == "Use km/s."
    df = COMMANDS["memory"].handler(c, COMMANDS["memory"].parse(["experiences"]))
    assert len(df) == 1
    COMMANDS["memory"].handler(c, COMMANDS["memory"].parse(["add-skill", "units", "Always", "give", "units",
                                                             "--scope", "tutor"]))
    assert memory.skills("tutor", repository=c.repository).loc[0, "text"] == "Always give units"


def test_the_agents_own_model_as_extractor(tmp_path):
    def model(messages, tools):
        if messages[0]["content"].startswith("You turn a user's feedback"):  # asked to extract
            return json.dumps({"situation": "questions about light", "action": "used miles",
                               "outcome": "wrong unit", "lesson": "use kilometres"})
        return "186282 miles/s"

    agent = Agent(model=FunctionModel(model), name="tutor", memory=MemoryConfig(extractor="agent"))
    c = Controller(store=str(tmp_path / "store"))
    handle = c.run_query("speed of light?", agent=agent)
    proposal = handle.feedback(-1, "wrong unit")
    assert proposal.extractor == agent.model.name and proposal.experience["lesson"] == "use kilometres"
    assert proposal.experience["scope"] == "tutor" and proposal.status == "proposed"


def test_a_rating_without_words_proposes_a_lesson_with_content(repo, capsys):
    """👍/👎 under a transcript insert `%agio feedback RUN +1|-1`: the proposed lesson names the question and
    what the run did, never a bare "do the same again", and the cell says how to add the reason."""
    runner = StepRunner(tutor([]), repository=repo)
    run = asyncio.run(runner.run(None, "What is the speed of light?"))
    good = memory.propose(memory.add_feedback(run.run_id, +1, repository=repo).id, repository=repo)
    lesson = good.experience["lesson"]
    assert "'What is the speed of light?'" in lesson and "convert(" in lesson and "rated good" in lesson
    bad = memory.propose(memory.add_feedback(run.run_id, -1, repository=repo).id, repository=repo)
    lesson = bad.experience["lesson"]
    assert "'What is the speed of light?'" in lesson and repr(run.final_text) in lesson and "rated wrong" in lesson
    for words in ("Do the same again", "Do not answer this way again"):
        assert words not in good.experience["lesson"] + bad.experience["lesson"]
    # with words, the words are the lesson
    said = memory.propose(memory.add_feedback(run.run_id, -1, "Use km/s.", repository=repo).id, repository=repo)
    assert said.experience["lesson"] == "Use km/s."
    c = Controller(store=str(repo.root))
    COMMANDS["feedback"].handler(c, COMMANDS["feedback"].parse([run.run_id[:8], "-1"]))
    assert "add your words at the end of the %agio feedback line" in capsys.readouterr().out
    COMMANDS["feedback"].handler(c, COMMANDS["feedback"].parse([run.run_id[:8], "-1", "too", "slow"]))
    assert "add your words" not in capsys.readouterr().out
