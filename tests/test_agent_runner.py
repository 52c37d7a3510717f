"""The seed's AgentRunner (call, run, add_feedback) over the engine, memory and trace; correction feedback;
RunResult.feedback; functions that default to the current store."""

from __future__ import annotations

import asyncio
import inspect
import os

import pandas as pd
import pytest

import agio_notebook
from agio_notebook import Agent, FunctionModel, Reply, StepRunner, memory, tool
from agio_notebook.agent_runner import AgentConfig, AgentRunner, CallResult
from agio_notebook.core import InvalidOperationError, ModelError, NotFoundError, RunStatus, StepEventType
from agio_notebook.execution import fork_session
from agio_notebook.models import ReplayModel
from agio_notebook.models.llm_call import LLMCallModel
from agio_notebook.storage import TinyDBRepository

calls: list[dict] = []


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    calls.append({"a": a, "b": b})
    return a + b


async def llm(messages, model, tools, **settings):
    """A seed-style llm_call: adds with the tool, then answers with the tool's result."""
    if messages[-1]["role"] == "tool":
        return {"content": f"The sum is {messages[-1]['content']}.", "prompt_tokens": 30, "completion_tokens": 5}
    return {"content": "", "tool_calls": [{"id": "c1", "type": "function",
                                           "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}],
            "prompt_tokens": 20, "completion_tokens": 7, "model_seen": model}


@pytest.fixture
def repo(tmp_path):
    calls.clear()
    return TinyDBRepository(tmp_path / "store")


def test_the_seeds_names_and_parameters_are_there():
    init = inspect.signature(AgentRunner)
    assert list(init.parameters) == ["trace_store", "memory_store", "state_store", "tool_registry", "llm_call", "config"]
    assert list(inspect.signature(AgentRunner.call).parameters)[:5] == ["self", "messages", "model", "tools", "uid"]
    assert list(inspect.signature(AgentRunner.run).parameters)[:11] == [
        "self", "task", "messages", "system_prompt", "model", "tools", "agent_type", "uid", "max_iterations",
        "enable_memory", "auto_execute_tools"]
    assert list(inspect.signature(AgentRunner.add_feedback).parameters) == [
        "self", "trace_id", "target_step_id", "feedback_type", "content", "extract_experience"]
    assert agio_notebook.AgentRunner is AgentRunner and agio_notebook.CallResult is CallResult


def test_call_is_one_traced_model_call_whose_tool_calls_are_returned_not_run(repo):
    seen = []

    async def spy(messages, model, tools, **settings):
        seen.append((messages, model, tools, settings))
        return await llm(messages, model, tools)

    runner = AgentRunner(trace_store=repo, tool_registry=[add], llm_call=spy)
    history = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello"},
               {"role": "assistant", "content": "Hi."}, {"role": "user", "content": "2 + 3?"}]
    result = asyncio.run(runner.call(history, model="gpt-4o-mini", tools=["add"], uid="ada", temperature=0))
    assert result.tool_calls[0]["function"]["name"] == "add" and calls == []  # returned, not run
    assert result.tokens == {"prompt": 20, "completion": 7}
    messages, model, tools, settings = seen[0]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert model == "gpt-4o-mini" and tools[0]["function"]["name"] == "add" and settings == {"temperature": 0}
    run = repo.get_run(result.trace_id)
    assert run.status is RunStatus.COMPLETED and run.model_name == "gpt-4o-mini"
    steps = repo.get_steps(run.session_id)
    assert [s.role.value for s in steps] == ["user", "assistant", "user", "assistant"]
    assert [s.run_id for s in steps] == [None, None, run.id, run.id]  # the history opens the session
    assert run.metrics.model_calls == 1 and steps[2].parent_ids == [steps[1].id]
    assert steps[-1].id == result.step_id and steps[-1].extra["request"]["settings"] == {"temperature": 0}
    metadata = repo.get_session(run.session_id).metadata
    assert metadata["uid"] == "ada" and metadata["owner"]["agent"] == run.agent_name  # the agent that made it


@pytest.mark.parametrize("messages, says", [
    ([], "end with a user message"),
    ([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}], "end with a user message"),
    ([{"role": "robot", "content": "a"}], "got 'robot'"),
    ([{"role": "user", "content": 3}], "content must be text"),
    ("hello", "must be a list"),
    ([{"role": "user", "content": "a"}, {"role": "system", "content": "late"}], "only come first"),
    ([{"role": "tool", "tool_call_id": "x", "content": "1"}, {"role": "user", "content": "a"}], "never called"),
    ([{"role": "assistant", "content": None, "tool_calls": [{"id": "x", "function": {"name": "add"}}]},
      {"role": "user", "content": "a"}], "have no result"),
])
def test_bad_messages_are_one_line_and_store_nothing(repo, messages, says):
    runner = AgentRunner(trace_store=repo, llm_call=llm)
    with pytest.raises(InvalidOperationError, match=says):
        asyncio.run(runner.call(messages))
    assert repo.list_runs() == []


@pytest.mark.parametrize("returned, says", [
    (42, "returned int"), ({"content": 5}, "content of type int"), ({"tool_calls": "add"}, "tool_calls of type str"),
    ({"tool_calls": [{"id": "x"}]}, "no function name"), ({"content": "x", "prompt_tokens": "many"}, "prompt_tokens"),
])
def test_a_wrong_llm_call_reply_fails_the_call_in_one_line_and_is_stored_failed(repo, returned, says):
    async def wrong(messages, model, tools, **settings):
        return returned

    runner = AgentRunner(trace_store=repo, llm_call=wrong)
    with pytest.raises(ModelError, match=says):
        asyncio.run(runner.call([{"role": "user", "content": "hi"}]))
    (run,) = repo.list_runs()
    assert run.status is RunStatus.FAILED and says.split()[0] in run.error


def test_run_streams_the_loop_with_memory_tools_and_the_trace(repo):
    memory.add_skill("sums", "To add numbers, use the add tool.", scope="calculator", repository=repo)
    runner = AgentRunner(trace_store=repo, tool_registry=[add], llm_call=llm,
                         config=AgentConfig(agent_type="calculator"))

    async def go():
        return [e async for e in runner.run("Add the numbers 2 and 3.", tools=["add"], system_prompt="You add.")]

    events = asyncio.run(go())
    types = [e.type for e in events]
    assert types[0] is StepEventType.RUN_STARTED and types[-1] is StepEventType.RUN_COMPLETED
    assert StepEventType.MEMORY_READ in types and calls == [{"a": 2, "b": 3}]
    run = repo.get_run(events[-1].run_id)
    assert run.final_text == "The sum is 5." and run.agent_name == "calculator"
    steps = repo.get_steps(run.session_id)
    assert steps[1].extra["kind"] == "memory_read" and "use the add tool" in steps[1].content
    assert steps[2].extra["request"]["messages"]["system"].startswith("You add.")
    assert steps[3].parent_ids == [steps[2].id]  # the tool result follows its model call in the trace


def test_run_options_max_iterations_memory_off_and_tools_left_pending(repo):
    memory.add_skill("sums", "To add numbers, use the add tool.", repository=repo)
    runner = AgentRunner(trace_store=repo, tool_registry=[add], llm_call=llm)

    async def last(**kw):
        return [e async for e in runner.run("Add the numbers 2 and 3.", tools=["add"], **kw)][-1]

    capped = asyncio.run(last(max_iterations=1))
    assert capped.type is StepEventType.RUN_MAX_STEPS
    quiet = asyncio.run(last(enable_memory=False))
    assert not any(s.extra.get("kind") == "memory_read" for s in repo.get_steps(quiet.session_id))
    calls.clear()
    paused = asyncio.run(last(auto_execute_tools=False))
    assert paused.type is StepEventType.RUN_COMPLETED and calls == []
    session = paused.session_id
    assert repo.get_steps(session)[-1].tool_calls  # the call is pending ...
    agent = Agent(model=LLMCallModel(llm), tools=[add])
    resumed = asyncio.run(StepRunner(agent, repository=repo).resume(session))  # ... and a resume runs it
    assert calls == [{"a": 2, "b": 3}] and resumed.final_text == "The sum is 5."


def test_run_continues_a_given_conversation(repo):
    runner = AgentRunner(trace_store=repo, llm_call=lambda **kw: {"content": str(len(kw["messages"]))})

    async def go():
        return [e async for e in runner.run("and now?", messages=[
            {"role": "system", "content": "Count."}, {"role": "user", "content": "one"},
            {"role": "assistant", "content": "1"}])][-1]

    end = asyncio.run(go())
    assert repo.get_run(end.run_id).final_text == "4"  # system, user, assistant, the task


def test_unknown_tool_names_and_wrong_types_are_one_line(repo):
    runner = AgentRunner(trace_store=repo, tool_registry=[add], llm_call=llm)
    with pytest.raises(NotFoundError, match="no tool 'mul'.*it has: add"):
        asyncio.run(runner.call([{"role": "user", "content": "x"}], tools=["mul"]))
    with pytest.raises(TypeError, match="model must be"):
        asyncio.run(runner.call([{"role": "user", "content": "x"}], model=3))
    with pytest.raises(TypeError, match="llm_call must be"):
        AgentRunner(trace_store=repo, llm_call="gpt")
    with pytest.raises(InvalidOperationError, match="one store"):
        AgentRunner(trace_store=repo, state_store=TinyDBRepository(repo.root.parent / "other"))
    assert repo.list_runs() == []


@pytest.mark.parametrize("kind, rating, lesson", [
    ("positive", 1, "Always show the sum."), ("negative", -1, "Never guess."),
    ("correction", -1, "The right answer is: 6"),
])
def test_add_feedback_extracts_an_experience_into_memory(repo, kind, rating, lesson):
    runner = AgentRunner(trace_store=repo, tool_registry=[add], llm_call=llm)
    result = asyncio.run(runner.call([{"role": "user", "content": "2 + 3?"}]))
    content = {"positive": "Always show the sum.", "negative": "Never guess.", "correction": "6"}[kind]
    exp_id = asyncio.run(runner.add_feedback(result.trace_id, result.step_id, kind, content))
    (exp,) = memory.experiences(repository=repo).itertuples()
    assert exp.id == exp_id and exp.rating == rating and exp.lesson.startswith(lesson)
    item = memory.feedback(repository=repo).iloc[0]
    assert item.step_id == result.step_id
    assert (item.correction == "6") if kind == "correction" else pd.isna(item.correction)
    assert asyncio.run(runner.add_feedback(result.trace_id, result.step_id, kind, content,
                                           extract_experience=False)) is None
    assert len(memory.experiences(repository=repo)) == 1


def test_add_feedback_bad_input_is_one_line_and_stores_nothing(repo):
    runner = AgentRunner(trace_store=repo, llm_call=llm)
    result = asyncio.run(runner.call([{"role": "user", "content": "2 + 3?"}]))
    with pytest.raises(NotFoundError, match="no run"):
        asyncio.run(runner.add_feedback("nope", result.step_id, "positive", "x"))
    with pytest.raises(NotFoundError, match="has no step"):
        asyncio.run(runner.add_feedback(result.trace_id, "nope", "positive", "x"))
    with pytest.raises(InvalidOperationError, match="positive, negative or correction"):
        asyncio.run(runner.add_feedback(result.trace_id, result.step_id, "meh", "x"))
    assert memory.feedback(repository=repo).empty and memory.experiences(repository=repo).empty


def test_a_separate_memory_store_is_read_and_written(repo, tmp_path):
    other = TinyDBRepository(tmp_path / "memory")
    memory.add_skill("sums", "Answer sums with digits.", repository=other)
    runner = AgentRunner(trace_store=repo, memory_store=other, llm_call=lambda **kw: {"content": "5"})

    async def go():
        return [e async for e in runner.run("What are the sums of 2 and 3?")][-1]

    end = asyncio.run(go())
    steps = repo.get_steps(end.session_id)
    assert "Answer sums with digits." in steps[1].content
    asyncio.run(runner.add_feedback(end.run_id, steps[-1].id, "correction", "five"))
    assert len(memory.experiences(repository=other)) == 1 and memory.experiences(repository=repo).empty


def test_correction_feedback_from_a_run_result(repo):
    agent = Agent(model=FunctionModel(lambda m, t: "It is 186282 miles/s."), name="tutor")
    result = asyncio.run(StepRunner(agent, repository=repo).run(None, "Speed of light?"))
    proposal = result.feedback(-1, "use SI units", correction="299792 km/s")
    assert proposal.status == "proposed"
    assert proposal.experience["lesson"] == "The right answer is: 299792 km/s (use SI units)"
    with pytest.raises(Exception, match="rate it -1"):
        result.feedback(+1, correction="299792 km/s")
    with pytest.raises(Exception, match="right answer as text"):
        result.feedback(-1, correction="  ")
    assert len(memory.feedback(repository=repo)) == 1
    item = result.feedback(1, "good", propose=False)
    assert item.rating == 1 and item.correction is None


def test_the_model_extractor_is_told_the_correction(repo):
    prompts = []

    def extract(messages, tools):
        prompts.append(messages[-1]["content"])
        return '{"situation": "light", "lesson": "Say 299792 km/s."}'

    agent = Agent(model=FunctionModel(lambda m, t: "186282 miles/s"), name="tutor",
                  memory=memory.MemoryConfig(extractor=FunctionModel(extract)))
    result = asyncio.run(StepRunner(agent, repository=repo).run(None, "Speed of light?"))
    result.feedback(-1, correction="299792 km/s")
    assert "Correction (the right answer; the lesson must teach it): 299792 km/s" in prompts[0]


def test_functions_that_take_a_repository_default_to_the_current_store(tmp_path, monkeypatch):
    monkeypatch.setenv("AGIO_STORE", str(tmp_path / "default"))
    agent = Agent(model=FunctionModel(lambda m, t: Reply.say("hello")))
    from agio_notebook.storage import open_repository

    result = asyncio.run(StepRunner(agent).run(None, "hi"))
    assert ReplayModel.from_run(result.run_id).calls and ReplayModel.from_session(result.session_id).calls
    fork = fork_session(result.session_id, 1)
    assert open_repository().get_session(fork).forked_from == result.session_id
    from agio_notebook.explore.scoring import ScoredRun, score_runs

    assert ScoredRun.load(result.run_id).run.id == result.run_id
    assert score_runs([result.run_id], [lambda run: 1.0], save=False)
    from agio_notebook.models import export_cassette

    assert export_cassette(tmp_path / "c.json", run_id=result.run_id).exists()
    assert os.environ["AGIO_STORE"].endswith("default")


def test_correction_from_the_magic_and_the_notebook_handle(tmp_path, capsys):
    from agio_notebook.notebook.commands import COMMANDS
    from agio_notebook.notebook.controller import Controller

    c = Controller(store=str(tmp_path / "store"))
    agent = Agent(model=FunctionModel(lambda m, t: "186282 miles/s"), name="tutor")
    handle = c.run_query("Speed of light?", agent=agent)
    COMMANDS["feedback"].handler(c, COMMANDS["feedback"].parse(
        [handle.run_id, "-1", "SI", "units", "--correction", "299792 km/s"]))
    assert "feedback -1 stored" in capsys.readouterr().out
    (proposal,) = memory.proposals(repository=c.repository).itertuples()
    assert proposal.experience["lesson"] == "The right answer is: 299792 km/s (SI units)"
    assert handle.feedback(-1, correction="300000 km/s").experience["lesson"] == "The right answer is: 300000 km/s"
    with pytest.raises(Exception, match="rate it -1"):
        COMMANDS["feedback"].handler(c, COMMANDS["feedback"].parse([handle.run_id, "+1", "--correction", "x"]))
    assert len(memory.feedback(repository=c.repository)) == 2


def test_attempts_default_to_the_current_store(tmp_path, monkeypatch):
    from agio_notebook.execution import attempts_of, use_attempt

    monkeypatch.setenv("AGIO_STORE", str(tmp_path / "default"))
    runner = StepRunner(Agent(model=FunctionModel(lambda m, t: "first")))
    first = asyncio.run(runner.run(None, "hi"))
    second = asyncio.run(StepRunner(Agent(model=FunctionModel(lambda m, t: "second"))).retry(first.run_id))
    assert [a.current for a in attempts_of(first.run_id)] == [False, True]
    assert use_attempt(first.run_id, 1).id == first.run_id
    assert [a.current for a in attempts_of(second.run_id[:8])] == [True, False]
    with pytest.raises(InvalidOperationError, match="whole number"):
        use_attempt(first.run_id, "2")
