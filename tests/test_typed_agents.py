"""Typed agents: outputs of a type, validated and retried; dependencies handed to tools and prompts, never
stored; per-call settings; and the short path (``agent.run_sync``, ``await agent.run``, ``agent.run_stream``)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
from typing import Literal

from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

import pydantic
import pytest

import agio_notebook
from agio_notebook import Agent, FunctionModel, Reply, ScriptedModel, StepRunner, tool
from agio_notebook.core import RunStatus, StepRole
from agio_notebook.storage import open_repository
from agio_notebook.tools.context import RunContext
from agio_notebook.tools.output import FINAL_RESULT
from explore_support import go


class Weather(pydantic.BaseModel):
    city: str
    celsius: float
    sky: Literal["clear", "cloudy", "rain"]


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Person(TypedDict):
    name: str
    age: int


@pytest.fixture
def repo(tmp_path):
    r = open_repository(str(tmp_path / "store"))
    yield r
    r.close()


@pytest.mark.parametrize("output_type,arguments,expected", [
    (Weather, {"city": "Oslo", "celsius": 4.5, "sky": "rain"}, Weather(city="Oslo", celsius=4.5, sky="rain")),
    (Point, {"x": 1, "y": 2}, Point(1, 2)),
    (Person, {"name": "Ada", "age": 36}, {"name": "Ada", "age": 36}),
    (list[Point], {"result": [{"x": 1, "y": 2}, {"x": 3, "y": 4}]}, [Point(1, 2), Point(3, 4)]),
    (int, {"result": 42}, 42),
], ids=["pydantic", "dataclass", "typeddict", "list", "int"])
def test_a_typed_answer_comes_back_as_its_type_and_is_stored(repo, output_type, arguments, expected):
    model = ScriptedModel([Reply.call(FINAL_RESULT, **arguments)])
    agent = Agent(model=model, output_type=output_type, name="typed")
    result = go(StepRunner(agent, repository=repo).run(None, "answer"))
    assert result.status is RunStatus.COMPLETED, result.error
    assert result.output == expected and type(result.output) is type(expected)
    # asked for the shape: the final_result tool carries the type's schema
    schema = next(t for t in agent.registry.schemas() if t["function"]["name"] == FINAL_RESULT)
    assert schema["function"]["parameters"]["type"] == "object"
    stored = repo.get_run(result.run_id)
    assert stored.output == json.loads(json.dumps(result.run.output)) and stored.output_type
    assert json.loads(stored.final_text) == stored.output  # the text of a typed answer is its JSON
    frame = agio_notebook.outputs(agent="typed", repository=repo)
    assert list(frame["run_id"]) == [result.run_id]
    if isinstance(stored.output, dict):  # one column per field
        for key, value in stored.output.items():
            assert frame[key].iloc[0] == value


def test_a_wrong_answer_goes_back_with_its_reason_and_retries_are_bounded(repo):
    model = ScriptedModel([Reply.call(FINAL_RESULT, city="Oslo", celsius="warm", sky="rain"),
                           Reply.call(FINAL_RESULT, city="Oslo", celsius=4, sky="snow"),
                           Reply.call(FINAL_RESULT, city="Oslo", celsius=4, sky="clear")])
    agent = Agent(model=model, output_type=Weather, output_retries=2)
    result = go(StepRunner(agent, repository=repo).run(None, "weather?"))
    assert result.status is RunStatus.COMPLETED and result.output == Weather(city="Oslo", celsius=4, sky="clear")
    refusals = [s for s in result.steps if s.role is StepRole.TOOL and s.status != "ok"]
    assert len(refusals) == 2
    assert "celsius" in refusals[0].content and "sky" in refusals[1].content  # the model reads why
    # the model saw its refusals before its third try
    assert any("sky" in (m.get("content") or "") for m in model.messages_of(2) if m["role"] == "tool")
    stubborn = Agent(model=ScriptedModel([Reply.call(FINAL_RESULT, city=1)], loop=True), output_type=Weather,
                     output_retries=1)
    failed = go(StepRunner(stubborn, repository=repo).run(None, "weather?"))
    assert failed.status is RunStatus.FAILED and "no answer of type Weather after 2 tries" in failed.error
    assert failed.metrics.model_calls == 2


def test_a_text_answer_is_read_as_json_or_sent_back(repo):
    model = ScriptedModel(["It is rainy in Oslo.", '```json\n{"city": "Oslo", "celsius": 5, "sky": "rain"}\n```'])
    agent = Agent(model=model, output_type=Weather)
    result = go(StepRunner(agent, repository=repo).run(None, "weather?"))
    assert result.status is RunStatus.COMPLETED and result.output.celsius == 5
    asked = [s for s in result.steps if s.role is StepRole.USER and s.extra.get("kind") == "output_retry"]
    assert len(asked) == 1 and FINAL_RESULT in asked[0].content


def test_bad_output_types_and_settings_are_one_line():
    with pytest.raises(TypeError, match="output_type .* cannot describe an answer"):
        Agent(model=ScriptedModel(["x"]), output_type=object())
    with pytest.raises(ValueError, match="output_retries"):
        Agent(model=ScriptedModel(["x"]), output_type=int, output_retries=-1)

    @tool
    def final_result(x: int) -> int:
        """Clash."""
        return x

    with pytest.raises(ValueError, match="may not be named 'final_result'"):
        Agent(model=ScriptedModel(["x"]), tools=[final_result], output_type=int)


@dataclasses.dataclass
class Shop:
    owner: str
    prices: dict[str, float]
    connection_secret: str = "not-for-the-store-4711"


def test_deps_reach_tools_and_the_system_prompt_and_are_never_stored(repo, tmp_path):
    @tool
    def price(ctx: RunContext[Shop], item: str) -> float:
        """The price of an item in the shop."""
        return ctx.deps.prices[item]

    def instructions(ctx: RunContext[Shop]) -> str:
        return f"You work for {ctx.deps.owner}."

    assert "ctx" not in price.parameters["properties"]  # the model never sees it
    model = ScriptedModel([Reply.call("price", item="tea"), "Tea costs 3.5."])
    agent = Agent(model=model, tools=[price], system_prompt=instructions, deps_type=Shop)
    shop = Shop("Ada", {"tea": 3.5})
    result = go(StepRunner(agent, repository=repo).run(None, "tea?", deps=shop))
    assert result.status is RunStatus.COMPLETED
    assert [s.content for s in result.steps if s.role is StepRole.TOOL] == ["3.5"]
    assert model.messages_of(0)[0] == {"role": "system", "content": "You work for Ada."}
    assert repo.get_run(result.run_id).deps_type == "Shop"
    stored = "\n".join(p.read_text(errors="replace") for p in (tmp_path / "store").rglob("*") if p.is_file())
    assert "not-for-the-store-4711" not in stored
    # the wrong deps, or none, are one line before anything is stored
    runs_before = len(repo.list_runs())
    with pytest.raises(TypeError, match="takes deps of type Shop, got dict"):
        go(StepRunner(agent, repository=repo).run(None, "tea?", deps={"owner": "x"}))
    with pytest.raises(ValueError, match="needs deps of type Shop"):
        go(StepRunner(agent, repository=repo).run(None, "tea?"))
    assert len(repo.list_runs()) == runs_before


def test_retry_fork_and_resume_take_the_deps_of_the_call_that_asks(repo):
    @tool
    def whose(ctx: RunContext[Shop]) -> str:
        """Whose shop this is."""
        return ctx.deps.owner

    agent = Agent(model=ScriptedModel([Reply.call("whose"), "done"], loop=True), tools=[whose], deps_type=Shop)
    runner = StepRunner(agent, repository=repo)
    first = go(runner.run(None, "whose?", deps=Shop("Ada", {})))
    again = go(runner.retry(first.run_id, deps=Shop("Bob", {})))
    forked = go(runner.fork(first.session_id, at=1, deps=Shop("Cy", {})))

    def owners(result):
        return [s.content for s in result.steps if s.name == "whose"]

    assert owners(first) == ["Ada"] and owners(again) == ["Bob"] and owners(forked) == ["Cy"]


def test_a_settings_hook_sets_one_calls_settings_and_it_is_stored(repo):
    seen = []

    async def fn(messages, tools, **_):
        return "ok"

    class Recorder(FunctionModel):
        async def stream(self, messages, tools, *, stream=True, settings=None):
            seen.append(dict(settings or {}))
            async for chunk in super().stream(messages, tools, stream=stream, settings=settings):
                yield chunk

    def per_turn(ctx: RunContext[None], messages):
        return {"extra_body": {"turn": ctx.step, "messages": len(messages)}}

    agent = Agent(model=Recorder(lambda m, t: "ok"), model_settings={"temperature": 0}, settings_hook=per_turn)
    result = go(StepRunner(agent, repository=repo).run(None, "hi"))
    assert seen == [{"temperature": 0, "extra_body": {"turn": 1, "messages": 1}}]
    assert result.steps[-1].extra["request"]["settings"] == seen[0]


def test_the_short_path_runs_in_the_default_store(tmp_path, monkeypatch):
    monkeypatch.setenv("AGIO_STORE", str(tmp_path / "default"))
    agent = Agent(model=ScriptedModel(["hello"], loop=True), name="short")
    first = agent.run_sync("hi")
    assert first.status is RunStatus.COMPLETED and first.final_text == "hello"
    second = agent.run_sync("again", session=first.session_id)
    assert second.session_id == first.session_id

    async def both():
        result = await agent.run("and again")
        events = [e.type.value async for e in agent.run_stream("streamed")]
        return result, events

    result, events = asyncio.run(both())
    assert result.final_text == "hello" and events[0] == "run_started" and events[-1] == "run_completed"
    assert len(open_repository(str(tmp_path / "default")).list_runs()) == 4
    typed = Agent(model=ScriptedModel([Reply.call(FINAL_RESULT, x=1, y=2)]), output_type=Point)
    assert typed.run_sync("where?").output == Point(1, 2)


def test_fork_with_another_agent_or_system_prompt_is_one_call(repo):
    agent = Agent(model=ScriptedModel(["first answer", "second answer"], loop=True), system_prompt="Be brief.")
    runner = StepRunner(agent, repository=repo)
    first = go(runner.run(None, "hi"))
    other = agent.with_instructions("Be thorough.")
    forked = go(runner.fork(first.session_id, at=1, agent=other))
    assert forked.status is RunStatus.COMPLETED
    assert forked.steps[-1].extra["request"]["messages"]["system"] == "Be thorough."
    assert first.steps[-1].extra["request"]["messages"]["system"] == "Be brief."


def test_the_transcript_shows_the_typed_answer(repo):
    from agio_notebook.notebook.transcript import bundle_for_run

    model = ScriptedModel([Reply.call(FINAL_RESULT, city="Oslo", celsius=4.5, sky="rain")])
    result = go(StepRunner(Agent(model=model, output_type=Weather), repository=repo).run(None, "weather?"))
    bundle = bundle_for_run(repo, result.run_id)
    assert 'output (Weather): {"city": "Oslo", "celsius": 4.5, "sky": "rain"}' in bundle["text/plain"]
    assert 'class="agio-output"' in bundle["text/html"] and "Output · Weather" in bundle["text/html"]
    assert bundle["application/vnd.agio.run+json"]["run"]["output"] == {"city": "Oslo", "celsius": 4.5, "sky": "rain"}


@pytest.mark.parametrize("arguments,error_type,reason", [
    ('{"city": "Oslo", "celsius": 4', "invalid_json", "not valid JSON"),
    ('["Oslo", 4, "rain"]', "invalid_arguments", "must be a JSON object, got list"),
    ('{"city": "Oslo", "celsius": "warm", "sky": "rain"}', "invalid_arguments", "celsius"),
], ids=["malformed", "not-an-object", "does-not-fit"])
def test_a_refused_answer_is_the_same_alone_or_beside_another_tool(repo, arguments, error_type, reason):
    """A ``final_result`` call alone is answered without the tool executor; beside another call it goes
    through it: the model reads the same refusal either way, and the next valid answer is the output."""
    from agio_notebook.models.scripted import ToolCallSpec

    @tool
    def noop() -> str:
        """Nothing."""
        return "done"

    def refusals(replies):
        agent = Agent(model=ScriptedModel([*replies, Reply.call(FINAL_RESULT, city="Oslo", celsius=4, sky="clear")]),
                      output_type=Weather, tools=[noop])
        result = go(StepRunner(agent, repository=repo).run(None, "weather?"))
        assert result.status is RunStatus.COMPLETED and result.output == Weather(city="Oslo", celsius=4, sky="clear")
        stored = repo.get_run(result.run_id)
        assert stored.output == {"city": "Oslo", "celsius": 4.0, "sky": "clear"}  # the later, valid answer's
        return [(s.content, s.status, s.error) for s in result.steps
                if s.role is StepRole.TOOL and s.name == FINAL_RESULT and s.status != "ok"]

    bad = ToolCallSpec(FINAL_RESULT, arguments, "bad")
    alone = refusals([Reply.calls(bad)])
    beside = refusals([Reply.calls(bad, ToolCallSpec("noop", {}, "other"))])
    assert alone == beside and len(alone) == 1
    content, status, error = alone[0]
    assert status == "error" and reason in error and content == f"Error ({error_type}): {error}"


def test_the_first_answer_that_fits_wins_within_a_turn(repo):
    from agio_notebook.models.scripted import ToolCallSpec

    turn = Reply.calls(ToolCallSpec(FINAL_RESULT, {"city": "Oslo", "celsius": "warm", "sky": "rain"}, "a"),
                       ToolCallSpec(FINAL_RESULT, {"city": "Bergen", "celsius": 9, "sky": "rain"}, "b"),
                       ToolCallSpec(FINAL_RESULT, {"city": "Tromsø", "celsius": 1, "sky": "clear"}, "c"))
    agent = Agent(model=ScriptedModel([turn]), output_type=Weather)
    result = go(StepRunner(agent, repository=repo).run(None, "weather?"))
    assert result.status is RunStatus.COMPLETED and result.output.city == "Bergen"
    assert [s.status for s in result.steps if s.role is StepRole.TOOL] == ["error", "ok", "ok"]
    assert result.metrics.model_calls == 1


def test_a_resumed_typed_answer_left_unanswered_completes_without_asking_again(repo):
    """A run stopped after the model's ``final_result`` call was stored, before its answer: resuming
    answers the dangling call, and a fitting answer ends the run (the model is not asked again)."""
    from agio_notebook.core import AgentSession, Step, ToolCall

    session = AgentSession()
    sid = session.session_id
    user = Step(session_id=sid, run_id=None, sequence=1, role=StepRole.USER, content="weather?")
    asked = Step(session_id=sid, run_id=None, sequence=2, role=StepRole.ASSISTANT, content=None,
                 tool_calls=[ToolCall("c1", FINAL_RESULT, json.dumps({"city": "Oslo", "celsius": 3, "sky": "rain"}))])
    repo.commit(session=session, steps=[user, asked])
    never = ScriptedModel([])  # asking the model again would fail the run: it has no replies
    result = go(StepRunner(Agent(model=never, output_type=Weather), repository=repo).resume(sid))
    assert result.status is RunStatus.COMPLETED, result.error
    assert result.output == Weather(city="Oslo", celsius=3, sky="rain") and result.metrics.model_calls == 0
    assert [s.role.value for s in repo.get_steps(sid)] == ["user", "assistant", "tool"]


# -- answers that only look like no answer, and answers given elsewhere --------------------------------------

def test_an_optional_answer_of_none_ends_the_run(repo):
    """``None`` fits ``Optional[Weather]``: it is the run's answer (not "no answer yet"), once."""
    from typing import Optional

    for reply in (Reply.call(FINAL_RESULT, result=None), Reply.say("null")):
        model = ScriptedModel([reply, Reply.say("never asked")])
        result = go(StepRunner(Agent(model=model, output_type=Optional[Weather]), repository=repo).run(None, "?"))
        assert result.status is RunStatus.COMPLETED and result.output is None and result.metrics.model_calls == 1
        stored = repo.get_run(result.run_id)
        assert stored.output is None and stored.output_type == "Optional[Weather]" and stored.final_text == "null"


def test_a_typed_run_without_an_answer_has_no_output(repo):
    """A failed typed run's output is None, never its last words (which only look like an answer)."""
    agent = Agent(model=ScriptedModel(["nope"] * 3), output_type=Weather, output_retries=1)
    result = go(StepRunner(agent, repository=repo).run(None, "weather?"))
    assert result.status is RunStatus.FAILED and result.output is None and result.final_text == "nope"
    assert agio_notebook.outputs(repository=repo).empty


class Signup(pydantic.BaseModel):
    first_name: str = pydantic.Field(alias="firstName")
    cents: int

    @pydantic.field_validator("cents", mode="before")
    @classmethod
    def _from_dollars(cls, value):  # not idempotent: validating the stored form again would multiply again
        return int(round(float(value) * 100))

    @pydantic.computed_field
    @property
    def label(self) -> str:
        return f"{self.first_name}: {self.cents}"


def test_the_output_is_the_value_as_validated_and_the_stored_json_reads_back(repo):
    agent = Agent(model=ScriptedModel([Reply.call(FINAL_RESULT, firstName="Ada", cents=3.5)]), output_type=Signup)
    result = go(StepRunner(agent, repository=repo).run(None, "sign up"))
    assert result.output == Signup(firstName="Ada", cents=3.5) and result.output.cents == 350
    stored = repo.get_run(result.run_id)
    assert stored.output == {"first_name": "Ada", "cents": 350}  # by the fields' names, no computed field
    from agio_notebook.execution.result import output_of

    assert output_of(stored, None, agent).cents == 350  # a cell's handle reads the run back: validated once


class Renamed(pydantic.BaseModel):
    shown: str = pydantic.Field(serialization_alias="shownAs")
    read: str = pydantic.Field(validation_alias="readAs")


def test_every_kind_of_alias_reads_back_after_a_restart(repo, monkeypatch):
    from agio_notebook.execution import recorder
    from agio_notebook.execution.result import output_of

    agent = Agent(model=ScriptedModel([Reply.call(FINAL_RESULT, shown="a", readAs="b")]), output_type=Renamed)
    result = go(StepRunner(agent, repository=repo).run(None, "?"))
    assert result.output == Renamed(shown="a", readAs="b")
    monkeypatch.setattr(recorder, "_RECENT_ANSWERS", type(recorder._RECENT_ANSWERS)())  # a new process
    assert output_of(repo.get_run(result.run_id), None, agent) == Renamed(shown="a", readAs="b")


def test_an_answer_of_none_is_shown_and_listed_and_a_cancelled_run_has_none(repo):
    from typing import Optional

    from agio_notebook import AgentHook
    from agio_notebook.notebook.render import to_html
    from agio_notebook.notebook.view_model import fold

    agent = Agent(model=ScriptedModel([Reply.call(FINAL_RESULT, result=None)]), output_type=Optional[Weather])
    result = go(StepRunner(agent, repository=repo).run(None, "?"))
    stored = repo.get_run(result.run_id)
    assert stored.to_dict()["output"] is None and stored.answered
    frame = agio_notebook.outputs(repository=repo)
    assert list(frame["output"]) == [None] and frame["output_type"].iloc[0] == "Optional[Weather]"
    html = to_html(fold([e.to_dict() for e in result.events], None))
    assert "Output · Optional[Weather]" in html and ">null</pre>" in html

    class Slow(AgentHook):
        async def on_tool_end(self, run, result):
            await asyncio.sleep(10)  # cancelled here: after the answer was given, before the run's end

    async def cancelled():
        typed = Agent(model=ScriptedModel([Reply.call(FINAL_RESULT, city="Oslo", celsius=1, sky="rain")]),
                      output_type=Weather, name="slow")
        task = asyncio.ensure_future(StepRunner(typed, hooks=[Slow()], repository=repo).run(None, "?"))
        await asyncio.sleep(0.2)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass

    asyncio.run(cancelled())
    run = next(r for r in repo.list_runs() if r.agent_name == "slow")
    assert run.status is RunStatus.CANCELLED and run.output is None and not run.answered
    assert "slow" not in set(agio_notebook.outputs(repository=repo)["agent"])


class Other(pydantic.BaseModel):
    code: int


def test_the_output_is_of_the_agent_that_answered(repo):
    """A fork or retry by another typed agent, and a handoff to a typed agent: the answer is that agent's type,
    and the run says so (``output_type``)."""
    asker = Agent(model=ScriptedModel([Reply.call(FINAL_RESULT, city="Oslo", celsius=1, sky="rain")]),
                  output_type=Weather, name="asker")
    runner = StepRunner(asker, repository=repo)
    first = go(runner.run(None, "weather?"))
    other = Agent(model=ScriptedModel([Reply.call(FINAL_RESULT, code=7)] * 2), output_type=Other, name="other")
    forked = go(runner.fork(first.session_id, at=1, agent=other))
    assert forked.output == Other(code=7) and repo.get_run(forked.run_id).output_type == "Other"
    retried = go(runner.retry(first.run_id, agent=other))
    assert retried.output == Other(code=7)
    coder = Agent(model=ScriptedModel([Reply.call(FINAL_RESULT, code=9)]), output_type=Other, name="coder")
    triage = Agent(model=ScriptedModel([Reply.call("transfer_to_coder")]), handoffs=[coder], name="triage")
    handed = go(StepRunner(triage, repository=repo).run(None, "a code?"))
    assert handed.output == Other(code=9)
    stored = repo.get_run(handed.run_id)
    assert stored.output_type == "Other" and stored.agent_name == "coder"
    frame = agio_notebook.outputs(repository=repo)
    assert frame.set_index("run_id").loc[handed.run_id[:8] if frame["run_id"].str.len().max() == 8
                                         else handed.run_id, "output_type"] == "Other"


def test_a_typed_answer_given_with_words_is_the_answer_its_callers_get(repo):
    """Words beside the ``final_result`` call do not replace the answer: the run's text is the answer's JSON,
    and an agent calling this one as a tool gets it."""
    quote = Agent(model=ScriptedModel([Reply.call(FINAL_RESULT, _text="Here it is.", city="Oslo", celsius=2,
                                                  sky="clear")], loop=True),
                  output_type=Weather, name="forecaster", description="Gives the weather.")
    alone = go(StepRunner(quote, repository=repo).run(None, "weather?"))
    assert json.loads(alone.final_text) == {"city": "Oslo", "celsius": 2.0, "sky": "clear"}
    outer = Agent(model=ScriptedModel([Reply.call("forecaster", query="Oslo?"), "done"]), tools=[quote])
    result = go(StepRunner(outer, repository=repo).run(None, "ask the forecaster"))
    tool_step = next(s for s in result.steps if s.name == "forecaster")
    assert json.loads(tool_step.content) == {"city": "Oslo", "celsius": 2.0, "sky": "clear"}


def test_an_agent_called_as_a_tool_runs_with_its_callers_deps(repo):
    seen = []

    @tool
    def owner(ctx: RunContext[Shop]) -> str:
        """Who owns the shop."""
        seen.append(ctx.deps)
        return ctx.deps.owner

    inner = Agent(model=ScriptedModel([Reply.call("owner"), "Ada owns it"]), tools=[owner], deps_type=Shop,
                  name="clerk", description="Knows the shop.", system_prompt=lambda ctx: f"Work for {ctx.deps.owner}.")
    outer = Agent(model=ScriptedModel([Reply.call("clerk", query="owner?"), "done"]), tools=[inner], deps_type=Shop)
    result = go(StepRunner(outer, repository=repo).run(None, "who?", deps=Shop("Ada", {})))
    assert result.status is RunStatus.COMPLETED and seen == [Shop("Ada", {})]
    nested = [r for r in repo.list_runs() if r.agent_name == "clerk"]
    assert nested and nested[0].deps_type == "Shop" and nested[0].status is RunStatus.COMPLETED


def test_a_resumed_answer_that_sat_beside_another_tool_completes(repo):
    from agio_notebook import ExecutionConfig
    from agio_notebook.models.scripted import call

    @tool
    def price(item: str) -> float:
        """A price."""
        return 3.5

    turn = Reply.calls(call("price", item="tea"), call(FINAL_RESULT, city="Oslo", celsius=3, sky="rain"))
    stopped = Agent(model=ScriptedModel([turn]), tools=[price], output_type=Weather,
                    config=ExecutionConfig(execute_tools=False))
    first = go(StepRunner(stopped, repository=repo).run(None, "weather?"))
    never = Agent(model=ScriptedModel([]), tools=[price], output_type=Weather)  # asking again would fail
    result = go(StepRunner(never, repository=repo).resume(first.session_id))
    assert result.status is RunStatus.COMPLETED, result.error
    assert result.output == Weather(city="Oslo", celsius=3, sky="rain") and result.metrics.model_calls == 0


def test_a_second_fitting_answer_in_a_turn_says_it_was_not_used(repo):
    from agio_notebook.models.scripted import call

    turn = Reply.calls(call(FINAL_RESULT, city="Oslo", celsius=1, sky="rain"),
                       call(FINAL_RESULT, city="Bergen", celsius=9, sky="rain"))
    result = go(StepRunner(Agent(model=ScriptedModel([turn]), output_type=Weather), repository=repo).run(None, "?"))
    assert result.output.city == "Oslo"
    assert [s.content for s in result.steps if s.role is StepRole.TOOL] == [
        "Final result accepted.", "A final result was already accepted in this turn; this one was not used."]


def test_text_answers_in_a_fence_anywhere_or_a_dict_with_a_result_key(repo):
    from agio_notebook.tools.output import OutputError, OutputSpec

    number = OutputSpec(int)
    assert [number.from_text(t) for t in ("7", '{"result": 7}', "```json\n7\n```", "Here it is:\n```JSON\n7\n```",
                                          "```\n7\n```")] == [7] * 5
    assert OutputSpec(dict[str, int]).from_text('{"result": 5}') == {"result": 5}  # a dict that has the key
    for wrong in ("seven", "```\nseven\n```", '{"result": "seven"}'):
        with pytest.raises(OutputError):
            number.from_text(wrong)
    class Quote(pydantic.BaseModel):
        item: str
        price: float

    quote = OutputSpec(Quote)
    answers = ['Worked out with:\n```python\nprice = 3.5\n```\nAnswer:\n```json\n{"item": "tea", "price": 3.5}\n```',
               'The format is:\n```json\n{"item": "<name>"}\n```\nAnswer:\n```json\n{"item": "tea", "price": 3.5}\n```',
               '~~~json\n{"item": "tea", "price": 3.5}\n~~~', '{"item": "tea", "price": 3.5}\nHope this helps!',
               'An example:\n```json\n{"item": "coffee", "price": 1}\n```\nThe answer:\n```\n{"item": "tea", "price": 3.5}\n```']
    assert [quote.from_text(t) for t in answers] == [Quote(item="tea", price=3.5)] * len(answers)
    with pytest.raises(OutputError, match="price: Field required"):  # the last block's reason, not the first's
        quote.from_text('```json\n{"price": "x"}\n```\nso:\n```json\n{"item": "tea"}\n```')
    with pytest.raises(OutputError, match="not free text"):
        quote.from_text("```python\nprice = 3.5\n```")


def test_optional_deps_and_the_deps_of_agents_handed_to_are_checked_first(repo):
    from typing import Optional

    maybe = Agent(model=ScriptedModel(["ok"], loop=True), deps_type=Optional[Shop])
    assert go(StepRunner(maybe, repository=repo).run(None, "?")).status is RunStatus.COMPLETED  # None fits
    with pytest.raises(TypeError, match=r"takes deps of type Optional\[Shop\], got int"):
        go(StepRunner(maybe, repository=repo).run(None, "?", deps=3))
    for wanted in (Optional[dict[str, float]], dict[str, float] | None, Optional[list[str]]):  # parameterised
        maybe = Agent(model=ScriptedModel(["ok"], loop=True), deps_type=wanted)
        assert go(StepRunner(maybe, repository=repo).run(None, "?")).status is RunStatus.COMPLETED
        with pytest.raises(TypeError, match="takes deps of type"):
            go(StepRunner(maybe, repository=repo).run(None, "?", deps=3))
    prices = Agent(model=ScriptedModel(["ok"], loop=True), deps_type=dict[str, float])
    assert go(StepRunner(prices, repository=repo).run(None, "?", deps={"tea": 3.5})).status is RunStatus.COMPLETED
    with pytest.raises(ValueError, match=r"needs deps of type dict\[str, float\]"):
        go(StepRunner(prices, repository=repo).run(None, "?"))
    clerk = Agent(model=ScriptedModel(["ok"]), deps_type=Shop, name="clerk")
    triage = Agent(model=ScriptedModel([Reply.call("transfer_to_clerk")]), handoffs=[clerk], name="triage")
    before = len(repo.list_runs())
    with pytest.raises(ValueError, match="agent 'clerk' needs deps of type Shop"):
        go(StepRunner(triage, repository=repo).run(None, "help"))
    assert len(repo.list_runs()) == before


def test_a_type_is_named_as_written_literal_values_untouched():
    from typing import Optional

    from agio_notebook.tools.output import type_name

    assert [type_name(t) for t in (Weather, Optional[Weather], list[Point], Literal["a.b.c", "x"], dict[str, int])] == [
        "Weather", "Optional[Weather]", "list[Point]", "Literal['a.b.c', 'x']", "dict[str, int]"]


def test_outputs_say_which_attempt_is_current(repo):
    agent = Agent(model=ScriptedModel([Reply.call(FINAL_RESULT, city="Oslo", celsius=1, sky="rain"),
                                       Reply.call(FINAL_RESULT, city="Oslo", celsius=2, sky="rain")]),
                  output_type=Weather)
    runner = StepRunner(agent, repository=repo)
    first = go(runner.run(None, "?"))
    second = go(runner.retry(first.run_id))
    frame = agio_notebook.outputs(repository=repo).set_index("celsius")
    assert frame.loc[1.0, "current"] == False and frame.loc[2.0, "current"] == True  # noqa: E712
    assert frame.loc[2.0, "run_id"] in (second.run_id, second.run_id[:8])


def test_a_none_answer_keeps_the_frames_fields_and_exports_tell_answers_from_none(repo, tmp_path):
    """A ``None`` answer among others leaves ``outputs()`` one column per field; through a Parquet export
    (a column for every run) a run that gave no answer still gave none."""
    from typing import Optional

    from agio_notebook.storage.export import export_parquet, load_export

    maybe = Agent(model=ScriptedModel([Reply.call(FINAL_RESULT, result={"city": "Oslo", "celsius": 1, "sky": "rain"}),
                                       Reply.call(FINAL_RESULT, result=None)]), output_type=Optional[Weather])
    runner = StepRunner(maybe, repository=repo)
    go(runner.run(None, "first?"))
    go(runner.run(None, "second?"))
    go(StepRunner(Agent(model=ScriptedModel(["plain"])), repository=repo).run(None, "untyped"))
    frame = agio_notebook.outputs(repository=repo)
    assert list(frame["city"].fillna("-")) == ["Oslo", "-"] and len(frame) == 2
    export_parquet(repo, tmp_path / "parquet")
    loaded = load_export(tmp_path / "parquet")
    assert len(agio_notebook.outputs(repository=loaded)) == 2
    plain = next(r for r in loaded.list_runs() if r.query == "untyped")
    assert not plain.answered and "output" not in plain.to_dict()


KILLED_AFTER_THE_ANSWER = """
import os, sys
import pydantic
from agio_notebook import Agent, Reply, ScriptedModel, StepRunner, tool
from agio_notebook.execution.hooks import AgentHook
from agio_notebook.models import call
from agio_notebook.storage import open_repository

class Quote(pydantic.BaseModel):
    item: str
    price: float

@tool
def note(text: str) -> str:
    \"\"\"Take a note.\"\"\"
    return "noted"

class Die(AgentHook):  # the turn's results are durable; the run's end is not yet written
    async def on_step_end(self, run, step):
        if step.name == "note":
            os._exit(9)

model = ScriptedModel([Reply.calls(call("final_result", item="oops"), call("final_result", item="tea", price=3.5),
                                   call("note", text="x"))])
agent = Agent(model=model, tools=[note], output_type=Quote)
StepRunner(agent, hooks=[Die()], repository=open_repository(sys.argv[1])).run_sync("s", "How much is tea?")
"""


def test_a_typed_answer_accepted_by_a_run_killed_before_its_end_is_given_by_the_resume(tmp_path):
    """The model answered (beside another tool) and the process died before the run's end was written: a
    resume completes with the answer the store holds (the first call that fit), asking the model nothing;
    once completed, the session ends with its answer and another resume, or a fork without a query, is refused."""
    import subprocess
    import sys

    from agio_notebook.core import InvalidOperationError

    script = tmp_path / "killed.py"
    script.write_text(KILLED_AFTER_THE_ANSWER)
    store = tmp_path / "store"
    assert subprocess.run([sys.executable, str(script), str(store)], timeout=120).returncode == 9
    repo = open_repository(str(store))
    (killed,) = repo.list_runs("s")
    assert killed.status is RunStatus.INTERRUPTED and killed.output is None
    model = ScriptedModel([Reply.call(FINAL_RESULT, item="coffee", price=9.0)])
    runner = StepRunner(Agent(model=model, output_type=Quote), repository=repo)
    resumed = go(runner.resume("s"))
    assert resumed.status is RunStatus.COMPLETED and resumed.output == Quote(item="tea", price=3.5)
    assert model.calls == [] and repo.get_run(resumed.run_id).output == {"item": "tea", "price": 3.5}
    steps = len(repo.get_steps("s"))
    for again in (lambda: go(runner.resume("s")), lambda: go(runner.fork("s", steps))):
        with pytest.raises(InvalidOperationError, match="already ends with an answer"):
            again()
    assert len(repo.get_steps("s")) == steps and len(repo.list_sessions()) == 1 and model.calls == []
    repo.close()


def test_a_completed_typed_session_is_not_resumed_or_forked_without_a_query(repo):
    model = ScriptedModel([Reply.call(FINAL_RESULT, item="tea", price=3.5), Reply.call(FINAL_RESULT, item="x", price=1)])
    runner = StepRunner(Agent(model=model, output_type=Quote), repository=repo)
    done = go(runner.run(None, "How much is tea?"))
    assert [s.role for s in done.steps][-2:] == [StepRole.ASSISTANT, StepRole.TOOL]
    from agio_notebook.core import InvalidOperationError

    for again in (lambda: go(runner.resume(done.session_id)), lambda: go(runner.fork(done.session_id, 3))):
        with pytest.raises(InvalidOperationError, match=r"already ends with an answer \(step 2\)"):
            again()
    assert len(model.calls) == 1 and len(repo.list_sessions()) == 1
    forked = go(runner.fork(done.session_id, 3, "And coffee?"))  # with a query, it goes on
    assert forked.output.item == "x"


class Quote(pydantic.BaseModel):
    item: str
    price: float


@pytest.mark.parametrize("output_type,text,expected", [
    (Weather, '{"city": "Oslo", "celsius": 4.5, "sky": "rain"}', Weather(city="Oslo", celsius=4.5, sky="rain")),
    (Point, '{"x": 1, "y": 2}', Point(1, 2)),
    (list[Point], '{"result": [{"x": 1, "y": 2}]}', [Point(1, 2)]),
    (int, '{"result": 42}', 42),
    (int, "42", 42),
], ids=["pydantic", "dataclass", "list", "int", "bare-int"])
def test_native_output_asks_with_the_schema_and_reads_the_replys_json(repo, output_type, text, expected):
    model = ScriptedModel([text])
    agent = Agent(model=model, output_type=output_type, output_mode="native", name="native")
    result = go(StepRunner(agent, repository=repo).run(None, "answer"))
    assert result.status is RunStatus.COMPLETED, result.error
    assert result.output == expected and type(result.output) is type(expected)
    assert FINAL_RESULT not in agent.registry.names()  # asked by the request, not by a tool
    reply = result.steps[-1]
    request = reply.extra["request"]
    assert request["tools"] == []
    asked = request["settings"]["response_format"]
    tool_schema = Agent(model=model, output_type=output_type).output.tool.parameters  # the same schema either way
    assert asked["type"] == "json_schema" and asked["json_schema"]["schema"] == tool_schema
    assert asked["json_schema"]["schema"]["type"] == "object"  # providers want an object at the top
    stored = repo.get_run(result.run_id)
    assert stored.output == json.loads(json.dumps(result.run.output)) and json.loads(stored.final_text) == stored.output


def test_native_output_sends_a_wrong_answer_back_with_its_reason_and_bounds_the_tries(repo):
    model = ScriptedModel(["It is rainy.", '{"city": "Oslo", "celsius": "warm", "sky": "rain"}',
                           '{"city": "Oslo", "celsius": 4, "sky": "clear"}'])
    agent = Agent(model=model, output_type=Weather, output_mode="native", output_retries=2)
    result = go(StepRunner(agent, repository=repo).run(None, "weather?"))
    assert result.status is RunStatus.COMPLETED and result.output == Weather(city="Oslo", celsius=4, sky="clear")
    asked = [s.content for s in result.steps if s.role is StepRole.USER and s.extra.get("kind") == "output_retry"]
    assert asked == ["the answer must be the JSON of Weather, not free text. Answer with the JSON of Weather only.",
                     "the answer does not fit Weather: celsius: Input should be a valid number, unable to parse "
                     "string as a number. Answer with the JSON of Weather only."]
    assert model.messages_of(2)[-1] == {"role": "user", "content": asked[1]}  # the model read why before its third try
    stubborn = Agent(model=ScriptedModel(['{"city": 1}'], loop=True), output_type=Weather, output_mode="native",
                     output_retries=1)
    failed = go(StepRunner(stubborn, repository=repo).run(None, "weather?"))
    assert failed.status is RunStatus.FAILED and failed.output is None
    assert failed.error.startswith("no answer of type Weather after 2 tries; the last: the answer does not fit")
    assert failed.metrics.model_calls == 2


def test_native_output_calls_tools_first_and_a_made_up_final_result_is_no_answer(repo):
    model = ScriptedModel([Reply.call("lookup", city="Oslo"),
                           Reply.call(FINAL_RESULT, city="Oslo", celsius=1, sky="rain"),
                           '{"city": "Oslo", "celsius": 3, "sky": "cloudy"}'])

    @tool
    def lookup(city: str) -> str:
        """The weather of a city."""
        return "3 degrees, cloudy"

    agent = Agent(model=model, tools=[lookup], output_type=Weather, output_mode="native")
    result = go(StepRunner(agent, repository=repo).run(None, "weather?"))
    assert result.status is RunStatus.COMPLETED and result.output == Weather(city="Oslo", celsius=3, sky="cloudy")
    made_up = [s for s in result.steps if s.role is StepRole.TOOL and s.name == FINAL_RESULT]
    assert len(made_up) == 1 and made_up[0].status == "error" and "no tool named 'final_result'" in made_up[0].content
    assert [t["function"]["name"] for t in result.steps[1].extra["request"]["tools"]] == ["lookup"]


def test_an_output_mode_that_is_not_one_or_has_no_type_is_one_line():
    with pytest.raises(ValueError, match=r"^agent 'a': output_mode must be one of 'tool', 'native', got 'json'$"):
        Agent(model=ScriptedModel(["x"]), output_type=int, output_mode="json", name="a")
    for no_type in (None, str):
        with pytest.raises(ValueError, match=r"^agent 'a': output_mode='native' asks for a typed answer"):
            Agent(model=ScriptedModel(["x"]), output_type=no_type, output_mode="native", name="a")

    @tool
    def final_result(x: int) -> int:
        """Would pass for the answer's call."""
        return x

    with pytest.raises(ValueError, match="may not be named 'final_result'"):
        Agent(model=ScriptedModel(["x"]), tools=[final_result], output_type=int, output_mode="native")


def test_the_agents_own_response_format_wins_over_native_outputs(repo):
    mine = {"type": "json_schema", "json_schema": {"name": "mine", "schema": {"type": "object"}}}
    agent = Agent(model=ScriptedModel(['{"city": "Oslo", "celsius": 4, "sky": "clear"}']), output_type=Weather,
                  output_mode="native", model_settings={"response_format": mine})
    result = go(StepRunner(agent, repository=repo).run(None, "weather?"))
    assert result.status is RunStatus.COMPLETED
    assert result.steps[-1].extra["request"]["settings"]["response_format"] == mine


def test_a_handoff_asks_as_the_agent_that_answers_asks(repo):
    """A tool-mode agent hands off to a native one, and back the other way: each call's request asks as its
    agent does (the schema as ``response_format``, or the ``final_result`` tool), never both."""
    native = Agent(model=ScriptedModel(['{"code": 9}']), output_type=Other, output_mode="native", name="native")
    triage = Agent(model=ScriptedModel([Reply.call("transfer_to_native")]), handoffs=[native], output_type=Weather,
                   name="triage")
    handed = go(StepRunner(triage, repository=repo).run(None, "a code?"))
    assert handed.status is RunStatus.COMPLETED and handed.output == Other(code=9)
    first, last = [s.extra["request"] for s in handed.steps if s.role is StepRole.ASSISTANT]
    assert "response_format" not in first["settings"]
    assert FINAL_RESULT in [t["function"]["name"] for t in first["tools"]]
    assert last["settings"]["response_format"]["json_schema"]["name"] == "Other" and last["tools"] == []
    tool_mode = Agent(model=ScriptedModel([Reply.call(FINAL_RESULT, city="Oslo", celsius=1, sky="rain")]),
                      output_type=Weather, name="tooled")
    back = Agent(model=ScriptedModel([Reply.call("transfer_to_tooled")]), handoffs=[tool_mode], output_type=Other,
                 output_mode="native", name="back")
    returned = go(StepRunner(back, repository=repo).run(None, "weather?"))
    assert returned.status is RunStatus.COMPLETED and returned.output == Weather(city="Oslo", celsius=1, sky="rain")
    first, last = [s.extra["request"] for s in returned.steps if s.role is StepRole.ASSISTANT]
    assert first["settings"]["response_format"]["json_schema"]["name"] == "Other"
    assert "response_format" not in last["settings"]
    assert [t["function"]["name"] for t in last["tools"]] == [FINAL_RESULT]


class Filters(pydantic.BaseModel):
    lang: str = "en"
    limit: int = 10


@pytest.mark.parametrize("output_type,reply,expected", [
    (Filters | None, '{"result": {"lang": "fr", "limit": 3}}', Filters(lang="fr", limit=3)),
    (Quote | Filters, '{"result": {"item": "tea", "price": 2}}', Quote(item="tea", price=2)),
    (dict[str, int], '{"result": {"a": 1}}', {"a": 1}),
    (dict[str, int], '{"result": 5}', {"result": 5}),  # not an answer unwrapped: the dict that has the key
], ids=["optional-with-defaults", "union", "dict", "dict-with-the-key"])
def test_a_wrapped_answer_is_read_as_the_schema_asks_it(repo, output_type, reply, expected):
    """A type that is not an object is asked for as {"result": ...}: that is read as the answer first, so a
    type that would also take the wrapper itself (all defaults, a dict) does not swallow it."""
    for mode in ("native", "tool"):  # a tool-mode agent reads a text answer the same way
        agent = Agent(model=ScriptedModel([reply]), output_type=output_type, output_mode=mode)
        result = go(StepRunner(agent, repository=repo).run(None, "answer"))
        assert result.status is RunStatus.COMPLETED and result.output == expected, mode


@pytest.mark.parametrize("output_type,reply,reason", [
    (list[Quote], '{"result": [{"item": "tea"}]}', "the answer does not fit list[Quote]: 0.price: Field required"),
    (Quote | None, '{"result": {"item": "tea"}}', "the answer does not fit Quote | None: price: Field required"),
    (Quote, '{"item": "tea", "price": 2,}',
     "the answer is not valid JSON: Expecting property name enclosed in double quotes at line 1 column 28"),
    (Quote, '{"item": "tea", "price": 2', "the answer is not valid JSON: Expecting ',' delimiter at line 1 column 27"),
    (Quote, "  ", "the answer was empty (it must be Quote)"),
    (Quote, "It costs 2.", "the answer must be the JSON of Quote, not free text"),
], ids=["inner-list-field", "optional-field", "trailing-comma", "cut-off", "empty", "words"])
def test_the_model_reads_why_its_native_answer_was_refused(repo, output_type, reply, reason):
    agent = Agent(model=ScriptedModel([reply]), output_type=output_type, output_mode="native", output_retries=0)
    result = go(StepRunner(agent, repository=repo).run(None, "answer"))
    assert result.status is RunStatus.FAILED
    assert result.error == f"no answer of type {agent.output.name} after 1 try; the last: {reason}"
    told = result.steps[-1]
    assert told.role is StepRole.USER and told.content == f"{reason}. {agent.output.ask}"
    assert agent.output.ask == ('Answer with the JSON {"result": <the ' + agent.output.name + '>} only.'
                                if agent.output.wrapped else f"Answer with the JSON of {agent.output.name} only.")


class Score(pydantic.BaseModel):
    result: int


def test_a_field_named_result_keeps_its_name_in_the_reason(repo):
    for mode, reply in (("native", '{"result": "high"}'), ("tool", Reply.call(FINAL_RESULT, result="high"))):
        agent = Agent(model=ScriptedModel([reply]), output_type=Score, output_mode=mode, output_retries=0)
        result = go(StepRunner(agent, repository=repo).run(None, "score?"))
        assert result.error.startswith("no answer of type Score after 1 try; the last: the answer does not fit "
                                       "Score: result: Input should be a valid integer"), mode


def test_a_failed_native_run_resumes_and_the_model_reads_why(repo):
    model = ScriptedModel(['{"item": "tea"}', '{"item": "tea", "price": 2}'])
    agent = Agent(model=model, output_type=Quote, output_mode="native", output_retries=0)
    runner = StepRunner(agent, repository=repo)
    failed = go(runner.run(None, "price?"))
    assert failed.status is RunStatus.FAILED and failed.output is None
    resumed = go(runner.resume(failed.session_id))
    assert resumed.status is RunStatus.COMPLETED and resumed.output == Quote(item="tea", price=2)
    assert model.messages_of(1)[-1]["content"].startswith("the answer does not fit Quote: price: Field required")


@pytest.mark.parametrize("mode", ["native", "tool"])
@pytest.mark.parametrize("arguments,why", [
    ({"result": 2 ** 70}, "it cannot be stored as JSON"),
    ({"result": float("nan")}, "NaN and Infinity are not numbers JSON holds"),
    ({"result": float("inf")}, "NaN and Infinity are not numbers JSON holds"),
], ids=["past-64-bits", "nan", "infinity"])
def test_an_answer_the_store_cannot_hold_goes_back_to_the_model(repo, mode, arguments, why):
    """Python's JSON writes NaN and Infinity, the store's does not, nor integers past 64 bits: such an answer
    is refused with the reason and the model asked again, never accepted and then lost."""
    output_type = float if isinstance(arguments["result"], float) else int
    first = (json.dumps(arguments) if mode == "native" else Reply.call(FINAL_RESULT, **arguments))
    second = '{"result": 7}' if mode == "native" else Reply.call(FINAL_RESULT, result=7)
    agent = Agent(model=ScriptedModel([first, second]), output_type=output_type, output_mode=mode)
    result = go(StepRunner(agent, repository=repo).run(None, "n?"))
    assert result.status is RunStatus.COMPLETED and result.output == 7 and repo.get_run(result.run_id).output == 7
    refused = [s for s in result.steps if (s.role is StepRole.TOOL and s.status != "ok")
               or s.extra.get("kind") == "output_retry"]
    assert len(refused) == 1 and why in refused[0].content


class Node(pydantic.BaseModel):
    name: str
    children: list[Node] = []


@pytest.mark.parametrize("mode", ["native", "tool"])
def test_a_recursive_type_is_an_answer(repo, mode):
    tree = {"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}]}
    reply = json.dumps(tree) if mode == "native" else Reply.call(FINAL_RESULT, **tree)
    agent = Agent(model=ScriptedModel([reply]), output_type=Node, output_mode=mode)
    result = go(StepRunner(agent, repository=repo).run(None, "tree?"))
    assert result.status is RunStatus.COMPLETED and result.output == Node.model_validate(tree)
    schema = agent.output.tool.parameters  # what the request carries either way
    assert schema["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}  # a reference to the top
    assert set(schema["$defs"]) == {"Node"}
    assert schema["$defs"]["Node"]["properties"]["name"] == {"title": "Name", "type": "string"}


def test_a_bad_output_mode_is_named_with_or_without_a_type():
    for mode in (None, 1, "Native", True):
        for output_type in (None, int):
            with pytest.raises(ValueError, match=r"output_mode must be one of 'tool', 'native', got "):
                Agent(model=ScriptedModel(["x"]), output_type=output_type, output_mode=mode)


def test_a_function_model_that_asks_for_settings_sees_the_schema_it_must_answer(repo):
    seen = []

    def answer(messages, tools, settings):
        seen.append(settings)
        schema = settings["response_format"]["json_schema"]["schema"]
        return json.dumps({name: ("tea" if spec["type"] == "string" else 2.5)
                           for name, spec in schema["properties"].items()})

    agent = Agent(model=FunctionModel(answer), output_type=Quote, output_mode="native")
    result = go(StepRunner(agent, repository=repo).run(None, "price?"))
    assert result.status is RunStatus.COMPLETED and result.output == Quote(item="tea", price=2.5)
    assert seen[0]["response_format"]["json_schema"]["name"] == "Quote"
    plain = Agent(model=FunctionModel(lambda messages, tools: "hi"))  # two parameters: called as before
    assert go(StepRunner(plain, repository=repo).run(None, "x")).final_text == "hi"


class Event(pydantic.BaseModel, strict=True):
    when: datetime.datetime


def test_one_rule_reads_an_answer_given_as_text_as_a_call_or_from_the_store(repo, monkeypatch):
    """A strict type, whose datetime JSON gives as an ISO string: taken alike as the reply's JSON and as
    final_result's arguments, and a stored answer reads back as the type (pydantic's JSON mode, every time)."""
    from agio_notebook.execution import recorder
    from agio_notebook.execution.result import output_of

    when = datetime.datetime(2026, 1, 1)
    for mode, reply in (("native", '{"when": "2026-01-01T00:00:00"}'),
                        ("tool", Reply.call(FINAL_RESULT, when="2026-01-01T00:00:00"))):
        agent = Agent(model=ScriptedModel([reply]), output_type=Event, output_mode=mode, output_retries=0)
        result = go(StepRunner(agent, repository=repo).run(None, "when?"))
        assert result.status is RunStatus.COMPLETED and result.output == Event(when=when), (mode, result.error)
        monkeypatch.setattr(recorder, "_RECENT_ANSWERS", type(recorder._RECENT_ANSWERS)())  # a restarted kernel
        assert output_of(repo.get_run(result.run_id), None, agent) == Event(when=when)
    wrong = Agent(model=ScriptedModel(['{"when": 5}']), output_type=Event, output_mode="native", output_retries=0)
    refused = go(StepRunner(wrong, repository=repo).run(None, "when?"))
    assert refused.error.startswith("no answer of type Event after 1 try; the last: the answer does not fit Event: "
                                    "when: Input should be")


def test_a_native_answer_is_read_without_running_tools(repo):
    from agio_notebook.core import ExecutionConfig

    agent = Agent(model=ScriptedModel(['{"item": "tea", "price": 2}']), output_type=Quote, output_mode="native")
    result = go(StepRunner(agent, repository=repo, config=ExecutionConfig(execute_tools=False)).run(None, "price?"))
    assert result.status is RunStatus.COMPLETED and result.output == Quote(item="tea", price=2)
    assert result.run.final_text == '{"item": "tea", "price": 2.0}'  # its JSON, as json.dumps writes it


def test_a_function_model_that_changes_its_settings_leaves_the_agents_alone(repo):
    def rude(messages, tools, settings):
        settings["response_format"]["json_schema"]["schema"]["properties"].clear()
        return '{"item": "tea", "price": 2}'

    agent = Agent(model=FunctionModel(rude), output_type=Quote, output_mode="native")
    for _ in range(2):
        assert go(StepRunner(agent, repository=repo).run(None, "price?")).output == Quote(item="tea", price=2)
    assert set(agent.output.settings["response_format"]["json_schema"]["schema"]["properties"]) == {"item", "price"}
