"""Exercises that check themselves, the machinery: seeds and variants, one line for a solution of the wrong
kind or signature, raising and hanging solutions, the result table, hints and the reference, the course's
order, custom exercises. (Each exercise's battery of wrong and right solutions: test_exercises_battery.py.)"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nbformat
import pytest

from agio_notebook import Agent, Reply, tool
from agio_notebook.exercises import (EXERCISES, Exercise, Scenario, UnknownExerciseError, check,
                                     exercise, exercises, expect)
from agio_notebook.scoring import regex
from agio_notebook.teach.guard import DEFAULT_CAP
from agio_notebook.teach.solutions import reference

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def own_store(tmp_path, monkeypatch):
    monkeypatch.setenv("AGIO_STORE", str(tmp_path / "store"))


def test_exercises_list_in_the_order_the_course_teaches_them() -> None:
    """The catalog's order is the course index's: each tutorial's exercise, in tutorial order."""
    index = nbformat.read(ROOT / "notebooks" / "course.ipynb", as_version=4).cells[0].source
    taught: list[str] = []
    for row in index.splitlines():
        named = [n for n in EXERCISES if f"`{n}`" in row.split("|")[3]] if row.count("|") > 4 else []
        taught += [n for n in named if n not in taught]
    listed = list(exercises()["name"])
    assert listed == list(EXERCISES)
    assert [n for n in listed if n in taught] == taught, (listed, taught)
    assert listed[:3] == ["tool_docstring", "function_model", "edit_tool_call"]
    assert listed[-2:] == ["delegate_to_agent", "endpoint_settings"]
    assert set(exercises().columns) >= {"name", "title", "asks_for", "scenarios", "minutes"}


def test_values_come_from_a_seed_shown_in_the_result_and_repeated_by_it() -> None:
    first = check("function_model", reference("function_model"))
    assert first.seed is not None and f"(seed {first.seed})" in first.summary()
    assert f"check(..., seed={first.seed})" in first._repr_html_()
    again = check("function_model", reference("function_model"), seed=first.seed)
    assert [s.description for s in again.scenarios] == [s.description for s in first.scenarios]
    other = check("function_model", reference("function_model"), seed=first.seed + 1)
    assert [s.description for s in other.scenarios] != [s.description for s in first.scenarios]
    draws = {tuple(s.describe + repr(s.data) for s in exercise(name).draw(seed)) for name in EXERCISES
             for seed in range(5)}
    assert len(draws) == 5 * len(EXERCISES)  # every exercise draws new values from each seed


def test_every_exercise_runs_a_variant_its_instructions_do_not_show() -> None:
    for name, ex in EXERCISES.items():
        variants = [s for s in ex.draw(7) if s.variant]
        assert variants, name
        for s in variants:
            assert s.query not in ex.instructions and s.describe not in ex.instructions
    result = check("tool_errors", reference("tool_errors"), seed=7)
    assert "(unseen variant)" in result._repr_html_()


@pytest.mark.parametrize(("name", "solution", "message"), [
    ("tool_docstring", "def convert_currency(amount, currency): ...",
     "exercise 'tool_docstring' asks for a tool convert_currency(amount, currency); got a str"),
    ("function_model", lambda messages: "hi", "that takes (messages), not (messages, tools)"),
    ("pass_evaluation", "Use the calculator.", "exercise 'pass_evaluation' asks for an Agent; got a str"),
    ("write_scorer", 1.0, "asks for a scorer fn(run) returning 0..1; got a float"),
    ("fork_compare_choose", lambda session_id: None, "that takes (session_id), not 3 arguments"),
    ("memory_second_run", None, "asks for a function learn(run_id, repository); got None"),
    ("edit_tool_call", lambda pause, more: None, "that takes (pause, more), not 1 argument"),
    ("delegate_to_agent", Agent(model=lambda m, t: "hi"), "asks for a model function fn(messages, tools); got an Agent"),
    ("tool_errors", lambda town: town, "the model calls city_weather(city=...), but your city_weather takes (town)"),
    ("tool_docstring", lambda amount, currency, rate: 1,
     "your convert_currency also needs rate, which the model never passes"),
    ("pass_evaluation", Agent(model=lambda m, t: "391"), "not literal_model()"),
    ("endpoint_settings", lambda: None, "that takes (), not 1 argument"),
])
def test_a_solution_of_the_wrong_kind_or_signature_is_one_line_before_anything_runs(name, solution, message) -> None:
    result = check(exercise(name), solution)
    assert not result.passed and result.scenarios == [] and result.score == 0
    assert message in result.problem and "\n" not in result.problem
    assert result.summary() == f"exercise {name} (seed {result.seed}): not run: {result.problem}"
    assert "agio-exercise-problem" in result._repr_html_()
    with pytest.raises(AssertionError, match="not run"):
        check(exercise(name), solution, strict=True)


def test_a_solutions_name_does_not_matter_in_any_exercise() -> None:
    """Any name is accepted, the same way everywhere: a tool is offered under the name the model calls."""
    @tool(name="weather_of")
    def lookup(city: str) -> str:
        """Today's weather in a city."""
        return reference("tool_errors")(city)

    assert check("tool_errors", lookup, seed=3).passed
    renamed = reference("function_model")
    assert check("function_model", lambda messages, tools: renamed(messages, tools), seed=3).passed


def test_a_wrong_signature_is_said_once_not_as_every_scenarios_teaching_reason() -> None:
    def city_weather(town: str) -> str:
        """Today's weather in a city."""
        raise ValueError(f"unknown city {town!r}; I know Paris, Tokyo, Oslo, Lima")

    result = check("tool_errors", city_weather)
    assert result.problem.startswith("the model calls city_weather(city=...), but your city_weather takes (town)")
    assert "name the cities" not in result.summary()


def test_one_error_every_scenario_fails_on_is_said_once_above_the_table() -> None:
    async def choose(session_id, candidates, repository):
        from agio_notebook import StepRunner
        result = StepRunner(next(iter(candidates.values())), repository=repository).fork(session_id, 1)
        return result.run_id  # a coroutine: await forgotten

    result = check("fork_compare_choose", choose)
    assert result.problem.startswith("your choose() called an async function without `await`")
    assert result.summary().splitlines()[0].endswith(result.problem)
    assert all(line.endswith(": failed") for line in result.summary().splitlines()[1:])
    assert "'coroutine' object" in result.problem


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
    assert result.problem == "your scorer raised ZeroDivisionError: oops"
    assert all(s.events and s.run_id for s in result.scenarios)  # the runs it raised on are shown

    def model(messages, tools):
        raise KeyError("content")

    result = check(exercise("function_model"), model)
    assert result.problem == "your model function raised KeyError: 'content'"

    async def drive(solution, scenario, repository):  # a scenario that breaks for any other reason
        raise RuntimeError("the store went away")

    ex = Exercise("broken", "Broken", "function", "Anything.", [Scenario("s")], drive=drive)
    assert check(ex, print).failed[0].reason == "this scenario could not run: RuntimeError: the store went away"


def test_the_table_shows_failing_rows_with_one_transcript_open_and_folds_the_passing_ones() -> None:
    from agio_notebook.exercises import calculator, literal_model

    agent = Agent(model=literal_model(), tools=[calculator], system_prompt="Use the calculator for every product.")
    result = check("pass_evaluation", agent, seed=5)
    assert len(result.failed) == 21
    html = result._repr_html_()
    assert html.count("<details open>") == 1 and html.count("<summary>transcript of") == 21
    assert html.count('data-passed="false"') == 21
    assert "does not say that the reply is the number alone" in html
    half = Agent(model=literal_model(), tools=[calculator],
                 system_prompt="Use the calculator only for multiplications. Reply with only the number.")
    mixed = check("pass_evaluation", half, seed=5)
    assert mixed.passed  # "for multiplications" is every question here
    wrong = check("tool_errors", lambda city: __import__("agio_notebook.exercises").exercises.WEATHER[city], seed=2)
    html = wrong._repr_html_()
    assert html.count('class="agio-exercise-row"') == 4 and html.count("<details open>") == 1
    assert "%agio retry" not in html and "%agio fork" not in html  # those runs are not in the learner's store
    passing = check("pass_evaluation", reference("pass_evaluation"), seed=5)._repr_html_()
    assert "✓ 21 other scenarios passed" in passing and 'data-passed="true"' not in passing


def test_model_and_tool_output_is_escaped_in_the_table() -> None:
    def model(messages, tools):
        return "<img src=x onerror=alert(1)>"

    html = check(exercise("function_model"), model)._repr_html_()
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_hints_come_one_at_a_time_then_the_reference_on_request() -> None:
    ex = Exercise("h", "hints", "prompt", "Write a prompt.", [Scenario("s", "q", model=lambda m, t: "ok")],
                  hints=["first", "second"])
    assert ex.hint() == "(1/2) first"
    assert ex.hint() == "(2/2) second"
    assert ex.hint().startswith("No more hints for h (2 given)")
    assert ex.hint()._repr_markdown_().startswith("**Hint.**")
    course = exercise("stopping_rule")
    course._hints_given = len(course.hints)
    try:
        last = course.hint()
        assert "here is the reference solution" in last and reference_source("stopping_rule") in last
    finally:
        course._hints_given = 0
    shown = exercise("stopping_rule").solution()
    assert shown == reference_source("stopping_rule") and shown._repr_markdown_().startswith("```python\n")
    namespace: dict = {}
    exec(shown, namespace)  # the shown reference runs as a cell and passes
    assert check("stopping_rule", namespace["searcher"]).passed


def reference_source(name: str) -> str:
    from agio_notebook.teach.solutions import source
    return source(name)


def test_the_reference_is_never_shown_unasked() -> None:
    for name, ex in EXERCISES.items():
        text = ex.markdown() + ex.starter + "".join(ex.hints)
        body = [line for line in reference_source(name).splitlines() if line.strip() and not line.startswith(
            ("from ", "import ", "def ", "async def ", "    return Reply.call"))]
        assert not all(line in text for line in body), name


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
        return check(exercise("function_model"), reference("function_model")).passed

    assert asyncio.run(in_a_cell())


def test_check_takes_an_exercise_or_its_name() -> None:
    assert check("function_model", reference("function_model")).passed
    with pytest.raises(UnknownExerciseError, match=r"^no exercise 'nope'; the exercises are: "):
        check("nope", lambda messages, tools: "hi")
    with pytest.raises(TypeError, match=r"check\(\) needs an Exercise or an exercise's name first"):
        check(42, lambda: None)  # type: ignore[arg-type]


def test_a_scenario_writes_nothing_to_the_learners_store(tmp_path, monkeypatch) -> None:
    """Not the runs, and not what a solution writes without repository=: only the progress record."""
    from agio_notebook import memory

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AGIO_STORE", str(tmp_path / "store"))

    def learn(run_id, repository):
        memory.add_experience("a weather forecast", lesson="Answer weather forecasts in Celsius.")

    from agio_notebook.storage import new_repository

    result = check("memory_second_run", learn)
    assert "stored its lesson in the default store" in result.summary()
    assert check("memory_second_run", reference("memory_second_run"), record=False).passed
    store = new_repository(str(tmp_path / "store"))
    assert store.list_sessions() == [] and store.journal_names() == ["exercises"]  # the progress record only
    assert not (tmp_path / ".agio").exists()


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
    for _ in range(2):  # the same exercise object, checked twice
        result = check(ex, reference("write_scorer"))
        assert result.passed, result.summary()
        assert result["recorded"].final_text == "It is 18°C and sunny in Paris."
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


HANGING = {
    "a tool that sleeps": ("tool_errors", "def solution(city: str) -> str:\n    time.sleep(30)\n    return 'x'"),
    "a tool that asks for input()": ("tool_errors", "def solution(city: str) -> str:\n    return input('city? ')"),
    "a model that loops forever": ("function_model", "def solution(messages, tools):\n    while True:\n        pass"),
    "a model waiting on an event": ("function_model",
                                    "def solution(messages, tools):\n    threading.Event().wait()"),
    "an async function that blocks": ("memory_second_run",
                                      "async def solution(run_id, repository):\n    time.sleep(30)"),
    "a scorer that awaits forever": ("write_scorer",
                                     "async def solution(run):\n    await asyncio.sleep(3600)"),
}


@pytest.mark.parametrize("label", list(HANGING))
def test_learner_code_that_hangs_fails_its_scenario_within_its_cap(label: str) -> None:
    name, code = HANGING[label]
    namespace: dict = {}
    exec("import asyncio, threading, time\n" + code, namespace)
    started = time.monotonic()
    result = check(name, namespace["solution"])
    took = time.monotonic() - started
    assert not result.passed
    assert ("did not return within" in result.summary()) or ("called input()" in result.summary()), result.summary()
    assert took < DEFAULT_CAP + 6, took  # the cap, and the check's own setup on a busy machine (bench: cap + 1 s)


def test_a_hanging_solution_ends_a_script_in_time_too(tmp_path) -> None:
    """From a plain script: the check returns after the cap and the interpreter exits, the abandoned thread
    never joined."""
    script = tmp_path / "hang.py"
    script.write_text(textwrap.dedent("""
        import json, time
        from agio_notebook.exercises import check

        def city_weather(city: str) -> str:
            time.sleep(600)

        started = time.monotonic()
        result = check("tool_errors", city_weather, record=False)
        print(json.dumps({"took": time.monotonic() - started, "summary": result.summary()}))
    """))
    started = time.monotonic()
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "AGIO_STORE": str(tmp_path / "store")})
    whole = time.monotonic() - started
    assert out.returncode == 0, out.stderr
    shown = json.loads(out.stdout.strip().splitlines()[-1])
    assert "did not return within" in shown["summary"] and shown["took"] < DEFAULT_CAP + 6
    assert whole < 60 and "Traceback" not in out.stderr


def test_input_is_given_back_after_a_check() -> None:
    import builtins

    before = builtins.input
    check("tool_errors", lambda city: input(), record=False)
    assert builtins.input is before


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


def test_edit_tool_call_runs_in_step_mode_and_keeps_the_edit_in_the_stored_step() -> None:
    """The check calls steer() at every pause, and judges the tool step the run stored: the arguments the
    model proposed beside the ones sent."""
    seen: list[str] = []

    def steer(pause):
        seen.append(pause.kind.value)
        reference("edit_tool_call")(pause)

    result = check(exercise("edit_tool_call"), steer, seed=1)
    assert result.passed, result.summary()
    assert seen == ["model", "tool", "model"] * 3  # three scenarios, each paused before both model calls and add
    scenario = result.scenarios[1]
    a, b = (int(n) for n in scenario.name.split(" + "))
    tool_step = next(s for s in scenario.steps if s.role.value == "tool")
    edited = tool_step.extra["edited"]["arguments"]
    assert json.loads(edited["proposed"]) == {"a": a, "b": b - 1} and json.loads(edited["sent"]) == {"a": a, "b": b}
    assert scenario.final_text == f"The sum is {a + b}."


def test_delegate_to_agent_needs_the_researchers_nested_run() -> None:
    """The planner's answer counts only if the researcher really ran: a nested run, stored and linked."""
    from agio_notebook.teach.course.compose import FACTS, nested_runs

    ex = exercise("delegate_to_agent")
    scenario = ex.draw(4)[0]
    seen: list = []
    judge = scenario.expect[0].test

    def spy(trial):
        seen.append(nested_runs(trial))
        return judge(trial)

    mine = Exercise("spy", "Spy", "model", "Delegate.", [Scenario(scenario.name, scenario.query, tools=scenario.tools,
                                                                  expect=[expect(spy, "no")])])
    assert check(mine, reference("delegate_to_agent")).passed
    (nested,) = seen[0]
    assert nested.depth == 1 and nested.status.value == "completed" and nested.parent_run_id

    @tool(name="researcher")
    def fake_researcher(query: str) -> str:
        """Looks facts up."""
        return FACTS[scenario.name][1].format(n=260)  # the right kind of text, but no agent ran

    faked = Exercise("faked", "Faked", "model", "Delegate.",
                     [Scenario(scenario.name, scenario.query, tools=[fake_researcher], expect=scenario.expect)])
    result = check(faked, reference("delegate_to_agent"))
    assert result.failed[0].reason == "the researcher's nested run did not complete (never stored)"


@pytest.mark.parametrize("name", list(EXERCISES))
def test_each_starter_runs_as_given_and_shows_what_is_left_to_do(name: str, capsys) -> None:
    """The cell %agio exercise inserts: the right kind and signature, unsolved, its check a table of reasons."""
    namespace: dict = {}
    exec(EXERCISES[name].starter.replace("check(exercise(", "result = check(exercise("), namespace)
    result = namespace["result"]
    assert not result.passed and result.failed, name
    assert not (result.problem or "").startswith(("exercise ", "the model calls")), result.problem  # kind, signature
    assert all(s.reason for s in result.failed)


def test_course_export_says_what_is_wrong_in_one_line(tmp_path, capsys) -> None:
    from agio_notebook.cli import main
    from agio_notebook.exercises import points

    assert main(["course", "export", "--nbgrader", str(tmp_path / "nb"), "--exercises", "nope"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("agio: no exercise 'nope'; the exercises are: tool_docstring") and err.count("\n") == 1
    assert not (tmp_path / "nb").exists()  # checked before anything is written
    assert main(["course", "export"]) == 1 and "--nbgrader DIR and/or --otter DIR" in capsys.readouterr().err
    (tmp_path / "file").write_text("in the way")
    assert main(["course", "export", "--otter", str(tmp_path / "file" / "otter")]) == 1
    assert capsys.readouterr().err.startswith(f"agio: cannot write the assignment in {tmp_path / 'file' / 'otter'}")
    assert main(["course", "export", "--otter", str(tmp_path / "ot"), "--points", "0"]) == 1
    assert main(["course", "export", "--otter", str(tmp_path / "ot"), "--exercises", "stopping_rule"]) == 0
    assert (tmp_path / "ot" / "agio.ipynb").exists()
    with pytest.raises(ValueError, match=r"^points\(\) needs max > 0"):
        points("stopping_rule", reference("stopping_rule"), 0)
