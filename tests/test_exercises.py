"""Exercises that check themselves: every exercise's reference passes, every wrong solution fails with the
reason a learner needs; wrong kinds, raising solutions and strict mode."""

from __future__ import annotations

import asyncio

import pytest

from agio_notebook import Agent, Reply, tool
from agio_notebook.exercises import (EXERCISES, CheckResult, Exercise, Scenario, UnknownExerciseError, WrongKindError,
                                     check, exercise, exercises, expect)
from agio_notebook.scoring import regex
from agio_notebook.teach.solutions import solutions

WRONG = [(name, i) for name in EXERCISES for i in range(len(solutions(name).WRONG))]


def test_the_course_has_at_least_eight_exercises_each_with_two_wrong_solutions() -> None:
    assert len(EXERCISES) >= 8
    assert {"tool_docstring", "tool_errors", "function_model", "stopping_rule", "write_scorer", "pass_evaluation",
            "memory_second_run", "fork_compare_choose", "edit_tool_call", "delegate_to_agent"} <= set(EXERCISES)
    for name in EXERCISES:
        assert len(solutions(name).WRONG) >= 2, name
    assert list(exercises()["name"]) == list(EXERCISES)
    assert len(exercise("pass_evaluation").scenarios) == 20


@pytest.mark.parametrize("name", list(EXERCISES))
def test_reference_solution_passes(name: str) -> None:
    result = check(exercise(name), solutions(name).reference)
    assert result.passed, result.summary()
    assert all(s.passed and s.reason is None for s in result.scenarios)
    assert result.summary().startswith(f"exercise {name}: all {len(result.scenarios)} scenarios passed")


@pytest.mark.parametrize(("name", "index"), WRONG)
def test_wrong_solution_fails_with_the_reason_the_learner_needs(name: str, index: int) -> None:
    solution, reason = solutions(name).WRONG[index]
    result = check(exercise(name), solution)
    assert not result.passed
    assert any(reason in (s.reason or "") for s in result.failed), result.summary()
    assert reason in result.summary()
    for failed in result.failed:  # every failing row names why, and shows its run inline when there is one
        assert failed.reason
        if failed.events:
            html = result._repr_html_()
            assert "agio-run" in html and "transcript of" in html


def test_strict_raises_assertion_error_with_the_summary_and_passes_silently() -> None:
    wrong, reason = solutions("stopping_rule").WRONG[0]
    with pytest.raises(AssertionError) as raised:
        check(exercise("stopping_rule"), wrong, strict=True)
    assert str(raised.value) == check(exercise("stopping_rule"), wrong).summary()
    assert reason in str(raised.value)
    assert check(exercise("stopping_rule"), solutions("stopping_rule").reference, strict=True).passed


@pytest.mark.parametrize(("name", "solution", "message"), [
    ("tool_docstring", "def convert_currency(amount, currency): ...",
     "exercise 'tool_docstring' asks for a tool convert_currency(amount, currency); got a str"),
    ("tool_errors", tool(lambda city: city, name="weather_of"),
     "exercise 'tool_errors' asks for a tool named city_weather; yours is named weather_of"),
    ("function_model", lambda messages: "hi", "that does not take (messages, tools)"),
    ("pass_evaluation", "Use the calculator.", "exercise 'pass_evaluation' asks for an Agent; got a str"),
    ("write_scorer", 1.0, "asks for a scorer fn(run) returning 0..1; got a float"),
    ("fork_compare_choose", lambda session_id: None, "that does not take 3 arguments"),
    ("memory_second_run", None, "asks for a function learn(run_id, repository); got None"),
    ("edit_tool_call", lambda pause, more: None, "asks for a function steer(pause); got a function that does not"),
    ("delegate_to_agent", Agent(model=lambda m, t: "hi"),
     "asks for a model function fn(messages, tools); got an Agent"),
])
def test_a_solution_of_the_wrong_kind_is_one_clear_line(name: str, solution: object, message: str) -> None:
    with pytest.raises(WrongKindError) as raised:
        check(exercise(name), solution)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)
    assert isinstance(raised.value, TypeError)


def test_a_solution_that_raises_is_a_failed_scenario_not_a_traceback() -> None:
    def convert_currency(amount: float, currency: str) -> str:
        """Convert US dollars to another currency.

        Args:
            currency: a three-letter ISO code such as 'EUR'.
        """
        raise RuntimeError("not written yet")

    result = check(exercise("tool_docstring"), convert_currency)  # a tool's exception is a tool result
    assert not result.passed and "RuntimeError: not written yet" in result.failed[0].reason

    def scorer(run):
        raise ZeroDivisionError("oops")

    result = check(exercise("write_scorer"), scorer)
    assert [s.reason for s in result.scenarios] == ["your scorer raised ZeroDivisionError: oops"] * 4
    assert all(s.events and s.run_id for s in result.scenarios)  # the runs it raised on are shown

    def model(messages, tools):
        raise KeyError("content")

    result = check(exercise("function_model"), model)
    assert all(s.reason == "the run failed: model 'model' failed: KeyError: 'content'" for s in result.scenarios)

    async def choose(session_id, candidates, repository):
        return {"not": "a run id"}

    result = check(exercise("fork_compare_choose"), choose)
    assert all(s.reason.startswith("choose() returned {'not': 'a run id'}, not the id of a run in the store")
               for s in result.scenarios)

    async def drive(solution, scenario, repository):  # a scenario that breaks for any other reason
        raise RuntimeError("the store went away")

    ex = Exercise("broken", "Broken", "function", "Anything.", [Scenario("s")], drive=drive)
    assert check(ex, print).failed[0].reason == "this scenario could not run: RuntimeError: the store went away"


def test_result_is_usable_from_python_and_renders_a_table() -> None:
    result = check(exercise("tool_errors"), solutions("tool_errors").WRONG[0][0])
    assert isinstance(result, CheckResult)
    assert [s.passed for s in result.scenarios] == [True, False, False]
    assert result["misspelt"].status == "completed" and result["misspelt"].run_id
    assert "I could not get the weather" in result["misspelt"].final_text
    with pytest.raises(KeyError, match="they are: known city, misspelt, misspelt again"):
        result["nope"]
    html = result._repr_html_()
    assert html.count('class="agio-exercise-row"') == 3 and html.count('data-passed="false"') == 2
    assert html.count("<details open>") == 2  # the failing runs' transcripts, inline
    assert "city_weather" in html and "Error (exception): KeyError" in html
    assert "%agio retry" not in html and "%agio fork" not in html  # those runs are not in the learner's store


def test_model_and_tool_output_is_escaped_in_the_table() -> None:
    def model(messages, tools):
        return "<img src=x onerror=alert(1)>"

    result = check(exercise("function_model"), model)
    html = result._repr_html_()
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_hints_come_one_at_a_time_then_say_there_are_no_more() -> None:
    ex = Exercise("h", "hints", "prompt", "Write a prompt.", [Scenario("s", "q", model=lambda m, t: "ok")],
                  hints=["first", "second"])
    assert ex.hint() == "(1/2) first"
    assert ex.hint() == "(2/2) second"
    assert ex.hint().startswith("No more hints for h (2 given)")
    assert ex.hint()._repr_markdown_().startswith("**Hint.**")


def test_unknown_exercise_lists_them() -> None:
    with pytest.raises(UnknownExerciseError, match=r"no exercise 'nope'; the exercises are: tool_docstring, "):
        exercise("nope")


def test_an_exercise_of_your_own_with_scorers_and_predicates() -> None:
    """Teachers write exercises too: a prompt exercise over a function model, a scorer and a predicate."""
    def polite(messages, tools):
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        return Reply.say("Dear user, hello." if "polite" in system else "hello")

    ex = Exercise("polite", "Be polite", "prompt", "Write a system prompt that makes the model polite.", [
        Scenario("greets", "hi", model=polite, expect=[
            expect(regex("^Dear"), "the answer does not start with 'Dear': ask for politeness"),
            expect(lambda t: len(t.steps) == 2, lambda t: f"expected 2 steps, got {len(t.steps)}")])])
    assert check(ex, "Be polite.").passed
    failed = check(ex, "Be brief.")
    assert failed.failed[0].reason == "the answer does not start with 'Dear': ask for politeness"


def test_check_works_inside_a_running_event_loop() -> None:
    async def in_a_cell() -> bool:
        return check(exercise("function_model"), solutions("function_model").reference).passed

    assert asyncio.run(in_a_cell())


def test_check_takes_an_exercise_or_its_name() -> None:
    assert check("function_model", solutions("function_model").reference).passed
    with pytest.raises(UnknownExerciseError, match=r"^no exercise 'nope'; the exercises are: "):
        check("nope", lambda messages, tools: "hi")
    with pytest.raises(TypeError, match=r"check\(\) needs an Exercise or an exercise's name first"):
        check(42, lambda: None)  # type: ignore[arg-type]


def test_a_scenario_writes_nothing_to_the_learners_store(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AGIO_STORE", str(tmp_path / "store"))
    assert check(exercise("memory_second_run"), solutions("memory_second_run").reference).passed
    assert not (tmp_path / "store").exists() and not (tmp_path / ".agio").exists()


def test_an_agent_solution_is_run_as_given() -> None:
    agent = solutions("pass_evaluation").reference
    assert isinstance(agent, Agent)
    result = check(exercise("pass_evaluation"), agent)
    assert result.passed and len(result.scenarios) == 20


def test_a_recorded_run_replays_as_a_scenarios_model_check_after_check() -> None:
    from agio_notebook import ScriptedModel, StepRunner
    from agio_notebook.exercises import weather
    from agio_notebook.models import ReplayModel
    from agio_notebook.storage import InMemoryRepository

    recorded = InMemoryRepository()
    script = ScriptedModel([Reply.call("weather", city="Paris"), "It is 18°C and sunny in Paris."])
    run = StepRunner(Agent(model=script, tools=[weather]), repository=recorded).run_sync(None, "Weather in Paris?")
    ex = Exercise("graded", "Score a recorded run", "scorer", "Score the recorded run 1.0.", [
        Scenario("recorded", "Weather in Paris?", model=ReplayModel.from_run(run.run_id, recorded), tools=[weather],
                 expect=[expect(lambda t: t.value == 1.0, lambda t: f"scored {t.value}")])])
    reference = solutions("write_scorer").reference
    for _ in range(2):  # the same exercise object, checked twice
        result = check(ex, reference)
        assert result.passed, result.summary()
        assert result["recorded"].final_text == "It is 18°C and sunny in Paris."
    assert check(ex, solutions("write_scorer").WRONG[0][0]).passed  # that wrong scorer is right on this run
    assert check(ex, lambda r: 0.0).failed[0].reason == "scored 0.0"


def test_a_key_a_solution_leaks_never_reaches_the_table(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-agio-test-DO-NOT-LEAK-0123456789")

    def city_weather(city: str) -> str:
        """Today's weather in a city."""
        import os
        raise ValueError(f"no city {city}; key {os.environ['OPENAI_API_KEY']}")

    result = check(exercise("tool_errors"), city_weather)
    assert not result.passed
    shown = result._repr_html_() + result._text_transcript(result.failed[0])
    assert "DO-NOT-LEAK" not in shown and "***" in shown


def test_a_loop_that_never_stops_or_a_tool_that_hangs_fails_its_scenario_not_the_notebook() -> None:
    import time

    from agio_notebook import ExecutionConfig

    def calls_forever(messages, tools):
        return Reply.call("wait", seconds=0)

    def calls_a_long_wait(messages, tools):
        return Reply.call("wait", seconds=2)

    never_ends = expect(lambda t: t.run.status.value == "completed",
                        lambda t: f"{t.run.status.value} after {t.run.metrics.model_calls} model calls")
    ex = Exercise("loops", "Loops", "tool", "Write wait(seconds).", [
        Scenario("default cap", "go", model=calls_forever, expect=[never_ends]),
        Scenario("hangs", "go", model=calls_a_long_wait, config=ExecutionConfig(max_steps=1, tool_timeout=0.3),
                 expect=[expect(lambda t: t.tool_results[0][1] == "ok", lambda t: t.tool_results[0][2])])])

    def wait(seconds: float) -> str:
        """Wait."""
        time.sleep(seconds)
        return "done"

    started = time.monotonic()
    result = check(ex, tool(lambda seconds: "done", name="wait"))
    assert result["default cap"].reason == "max_steps after 8 model calls"
    result = check(ex, wait)
    assert "timeout" in result["hangs"].reason.lower()
    assert result["default cap"].reason == "max_steps after 8 model calls"
    assert time.monotonic() - started < 30


def test_a_scenarios_setup_prepares_the_checks_store_first() -> None:
    from agio_notebook import memory

    def echo_memory(messages, tools):
        return "remembered" if "Speak French" in messages[0].get("content", "") else "forgot"

    ex = Exercise("setup", "Setup", "prompt", "Anything.", [
        Scenario("with a skill", "greet me", model=echo_memory,
                 setup=lambda repo: memory.add_skill("greeting", "Speak French when you greet me.", repository=repo),
                 expect=[expect(lambda t: t.final_text == "remembered", lambda t: t.final_text)]),
        Scenario("without", "greet me", model=echo_memory,
                 expect=[expect(lambda t: t.final_text == "remembered", lambda t: t.final_text)])])
    result = check(ex, "You greet people.")
    assert [s.passed for s in result.scenarios] == [True, False] and result["without"].reason == "forgot"


def test_the_step_debugger_and_compose_exercises_sit_where_their_tutorials_do() -> None:
    order = list(EXERCISES)
    assert order.index("edit_tool_call") == order.index("function_model") + 1
    assert order[-1] == "delegate_to_agent"


def test_edit_tool_call_runs_in_step_mode_and_keeps_the_edit_in_the_stored_step() -> None:
    """The check calls steer() at every pause, and judges the tool step the run stored: the arguments the
    model proposed beside the ones sent."""
    import json

    seen: list[str] = []

    def steer(pause):
        seen.append(pause.kind.value)
        solutions("edit_tool_call").reference(pause)

    result = check(exercise("edit_tool_call"), steer)
    assert result.passed, result.summary()
    assert seen == ["model", "tool", "model"] * 2  # two scenarios, each paused before both model calls and add
    tool_step = next(s for s in result["19 + 23"].steps if s.role.value == "tool")
    edited = tool_step.extra["edited"]["arguments"]
    assert json.loads(edited["proposed"]) == {"a": 19, "b": 22} and json.loads(edited["sent"]) == {"a": 19, "b": 23}
    assert result["19 + 23"].final_text == "The sum is 42."

    async def async_steer(pause):  # a coroutine works as well
        solutions("edit_tool_call").reference(pause)

    assert check(exercise("edit_tool_call"), async_steer).passed
    aborted = check(exercise("edit_tool_call"), solutions("edit_tool_call").WRONG[-1][0])
    assert all(s.status == "cancelled" and s.events for s in aborted.scenarios)  # the aborted runs are shown


def test_delegate_to_agent_needs_the_researchers_nested_run() -> None:
    """The planner's answer counts only if the researcher really ran: a nested run, stored and linked."""
    from agio_notebook.storage import InMemoryRepository
    from agio_notebook.teach.check import agent_for
    from agio_notebook.teach.course.compose import NOTES, nested_runs
    from agio_notebook.teach.kinds import as_solution
    from agio_notebook.teach.running import run_agent

    ex = exercise("delegate_to_agent")
    scenario = ex.scenarios[0]
    repository = InMemoryRepository()
    model = as_solution("model", solutions("delegate_to_agent").reference, ex.name)
    trial = asyncio.run(run_agent(agent_for(ex, model, scenario), scenario, repository))
    (nested,) = nested_runs(trial)
    assert nested.parent_run_id == trial.run.id and nested.depth == 1 and nested.status.value == "completed"
    assert nested.final_text == NOTES["owls"] == trial.final_text
    repository.close()

    @tool(name="researcher")
    def fake_researcher(query: str) -> str:
        """Looks facts up."""
        return NOTES["owls"]  # the right text, but no agent ran

    faked = Exercise("faked", "Faked", "model", "Delegate.",
                     [Scenario("owls", scenario.query, tools=[fake_researcher], expect=scenario.expect)])
    result = check(faked, solutions("delegate_to_agent").reference)
    assert result.failed[0].reason == "the researcher's nested run did not complete (never stored)"
