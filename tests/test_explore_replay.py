"""ReplayModel: a stored run, session or cassette replays offline, matched on the exact request."""

from __future__ import annotations

import json

import pytest

from agio_notebook import Agent, Reply, ScriptedModel, StepRunner, tool
from agio_notebook.core import NotFoundError, RunStatus
from agio_notebook.models import ReplayMismatchError, ReplayModel, export_cassette
from agio_notebook.models.replay import message_diff
from agio_notebook.storage import InMemoryRepository
from agio_notebook.testing import agio_cassette, agio_store  # noqa: F401 - fixtures
from explore_support import go, repo

CALLS = {"weather": 0}


@tool
def weather(city: str) -> str:
    """Current weather of a city."""
    CALLS["weather"] += 1
    return {"Paris": "sunny, 21C", "Oslo": "rain, 9C"}.get(city, "unknown")


def record(repo, queries=("Weather in Paris?",), system="Be brief."):
    model = ScriptedModel([Reply.call("weather", city="Paris"), "Paris is sunny, 21C.",
                           Reply.call("weather", city="Oslo"), "Oslo has rain."])
    runner = StepRunner(Agent(model=model, tools=[weather], system_prompt=system), repository=repo)
    session = None
    results = []
    for q in queries:
        results.append(go(runner.run(session, q)))
        session = results[-1].session_id
    return results


def test_replay_round_trip_from_run(repo):
    original = record(repo)[0]
    replay = ReplayModel.from_run(original.run_id, repo)
    runner = StepRunner(Agent(model=replay, tools=[weather], system_prompt="Be brief."),
                        repository=InMemoryRepository())
    again = go(runner.run(None, "Weather in Paris?"))
    assert again.status is RunStatus.COMPLETED
    assert again.final_text == original.final_text == "Paris is sunny, 21C."
    assert replay.replayed == 2
    got = [(s.role.value, s.content, [c.name for c in s.tool_calls]) for s in again.steps]
    want = [(s.role.value, s.content, [c.name for c in s.tool_calls]) for s in original.steps]
    assert got == want
    # the requests of the replay equal the recorded ones, exactly
    assert ([s.extra["request"]["fingerprint"] for s in again.steps if "request" in s.extra]
            == [s.extra["request"]["fingerprint"] for s in original.steps if "request" in s.extra])
    assert again.metrics.cost == 0.0  # a replay spends nothing


def test_replay_session_of_two_runs(repo):
    first, second = record(repo, ("Weather in Paris?", "And Oslo?"))
    replay = ReplayModel.from_session(first.session_id, repo)
    runner = StepRunner(Agent(model=replay, tools=[weather], system_prompt="Be brief."),
                        repository=InMemoryRepository())
    a = go(runner.run("s", "Weather in Paris?"))
    b = go(runner.run("s", "And Oslo?"))
    assert (a.final_text, b.final_text) == (first.final_text, second.final_text)


def test_mismatch_names_first_differing_message(repo):
    original = record(repo)[0]
    replay = ReplayModel.from_run(original.run_id, repo)
    runner = StepRunner(Agent(model=replay, tools=[weather], system_prompt="Be brief."),
                        repository=InMemoryRepository())
    result = go(runner.run(None, "Weather in Lyon?"))
    assert result.status is RunStatus.FAILED
    assert "\n" not in result.error
    assert result.error.startswith("replay: no recorded request matches call 1: message 2 (user) differs in content")
    assert "Paris" in result.error and "Lyon" in result.error


def test_mismatch_on_changed_system_prompt_and_tool_result(repo):
    original = record(repo)[0]
    runner = StepRunner(Agent(model=ReplayModel.from_run(original.run_id, repo), tools=[weather],
                              system_prompt="Be verbose."), repository=InMemoryRepository())
    result = go(runner.run(None, "Weather in Paris?"))
    assert "message 1 (system) differs in content" in result.error

    @tool(name="weather")
    def other_weather(city: str) -> str:
        """Current weather of a city."""
        return "snow"

    runner = StepRunner(Agent(model=ReplayModel.from_run(original.run_id, repo), tools=[other_weather],
                              system_prompt="Be brief."), repository=InMemoryRepository())
    result = go(runner.run(None, "Weather in Paris?"))
    assert result.error.startswith("replay: no recorded request matches call 2: message 4 (tool) differs")
    assert "snow" in result.error and "sunny" in result.error


def test_strict_false_replays_in_order(repo):
    original = record(repo)[0]
    replay = ReplayModel.from_run(original.run_id, repo, strict=False)
    runner = StepRunner(Agent(model=replay, tools=[weather], system_prompt="Be brief."),
                        repository=InMemoryRepository())
    result = go(runner.run(None, "Weather in Lyon?"))
    assert result.status is RunStatus.COMPLETED
    assert result.final_text == "Paris is sunny, 21C."


def test_cassette_round_trip_and_bad_files(repo, tmp_path):
    original = record(repo)[0]
    path = export_cassette(tmp_path / "weather.json", repo, run_id=original.run_id)
    data = json.loads(path.read_text())
    assert data["version"] == 1 and data["runs"] == [original.run_id]
    replay = ReplayModel.from_cassette(path)
    runner = StepRunner(Agent(model=replay, tools=[weather], system_prompt="Be brief."),
                        repository=InMemoryRepository())
    assert go(runner.run(None, "Weather in Paris?")).final_text == "Paris is sunny, 21C."
    with pytest.raises(NotFoundError, match="no cassette file"):
        ReplayModel.from_cassette(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(Exception, match="is not valid JSON"):
        ReplayModel.from_cassette(tmp_path / "bad.json")
    with pytest.raises(NotFoundError, match="no run"):
        ReplayModel.from_run("nope", repo)


def test_message_diff_on_lengths():
    a = [{"role": "user", "content": "hi"}]
    b = a + [{"role": "assistant", "content": "hello"}]
    assert message_diff(a, b) == "message 2 (assistant) is only in the got request: 'hello'"


CASSETTE = "cassettes/weather_paris.json"


@pytest.mark.agio_cassette(CASSETTE)
def test_recorded_session_as_offline_regression_test(agio_cassette, agio_store):
    """The documented pattern: the cassette under tests/cassettes replays with no model and no network."""
    CALLS["weather"] = 0
    runner = StepRunner(Agent(model=agio_cassette, tools=[weather], system_prompt="Be brief."),
                        repository=agio_store)
    result = go(runner.run(None, "Weather in Paris?"))
    assert result.final_text == "Paris is sunny, 21C."
    assert CALLS["weather"] == 1  # the tool (no side effects) really ran; only the model was replayed


def test_replay_mismatch_error_type():
    assert issubclass(ReplayMismatchError, Exception)


def test_recording_without_requests_is_one_line(repo):
    original = record(repo)[0]
    steps = repo.get_steps(original.session_id)
    for s in steps:
        s.extra.pop("request", None)
    repo.commit(steps=steps)
    with pytest.raises(NotFoundError, match=r"^step 2 of session \w+ was recorded without its request; record the run"):
        ReplayModel.from_run(original.run_id, repo)


def test_a_second_conversation_does_not_continue_the_first(repo):
    first, second = record(repo, ("Weather in Paris?", "And Oslo?"))
    replay = ReplayModel.from_session(first.session_id, repo)
    runner = StepRunner(Agent(model=replay, tools=[weather], system_prompt="Be brief."),
                        repository=InMemoryRepository())
    assert go(runner.run("one", "Weather in Paris?")).status is RunStatus.COMPLETED
    # a new session asking the second question first is not the recorded conversation
    other = go(runner.run("two", "And Oslo?"))
    assert other.status is RunStatus.FAILED and "message 2 (user) differs in content" in other.error


def test_match_settings_compares_the_recorded_settings(repo):
    model = ScriptedModel(["Cold answer."])
    original = go(StepRunner(Agent(model=model, model_settings={"temperature": 0}), repository=repo).run(None, "q"))

    def replay_with(settings, match):
        replay = ReplayModel.from_run(original.run_id, repo, match_settings=match)
        return go(StepRunner(Agent(model=replay, model_settings=settings), repository=InMemoryRepository()
                             ).run(None, "q"))

    assert replay_with({"temperature": 0}, True).final_text == "Cold answer."
    hot = replay_with({"temperature": 1}, True)
    assert hot.status is RunStatus.FAILED
    assert hot.error == ('replay: call 1 matches the recorded messages and tools but not the settings: '
                         'recorded {"temperature": 0}, got {"temperature": 1}')
    assert replay_with({"temperature": 1}, False).final_text == "Cold answer."  # off by default
