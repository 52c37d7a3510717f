"""``check(exercise, solution)``: every scenario run offline, in a throwaway store, and judged.

A solution that raises fails its scenario with the reason; it never stops the check.
"""

from __future__ import annotations

import copy
import inspect
from typing import Any, Callable

from ..agent import Agent
from ..core import ExecutionConfig, RunStatus
from ..execution import RunResult, StepRunner
from ..explore.runner import run_coroutine
from ..models import FunctionModel
from ..storage import InMemoryRepository
from ..storage.base import Repository
from .exercise import Exercise, Scenario, Trial
from .kinds import as_solution
from .report import CheckResult, ScenarioResult, Transcript

# a scenario never waits long: a learner's loop or tool that hangs fails its scenario, not the notebook
DEFAULT_CONFIG = ExecutionConfig(max_steps=8, tool_timeout=10.0, first_token_timeout=30.0, enable_retry=False)


class SolutionError(Exception):
    """The learner's code raised; the message says where and what."""


def scenario_model(scenario: Scenario) -> Any:
    """The scenario's model, fresh for this run: a copy, so a script or a recording starts again on every
    check (a plain function becomes a FunctionModel)."""
    model = scenario.model
    if callable(model) and not hasattr(model, "stream"):
        return FunctionModel(model)
    try:
        return copy.deepcopy(model)
    except Exception:  # noqa: BLE001 - a model holding a client cannot be copied; it keeps its own state
        return model


def trial_of(result: RunResult, repository: Repository, value: Any = None) -> Trial:
    return Trial(result.run, list(result.steps), list(result.events), value, repository)


async def run_agent(agent: Agent, scenario: Scenario, repository: Repository, query: str | None = None) -> Trial:
    """One run of ``agent`` on ``query`` (default: the scenario's), in a session of its own."""
    runner = StepRunner(agent, config=scenario.config or DEFAULT_CONFIG, repository=repository)
    return trial_of(await runner.run(None, scenario.query if query is None else query), repository)


async def call_solution(fn: Callable[..., Any], *args: Any, what: str = "function") -> Any:
    """Call the learner's (sync or async) code; what it raises becomes a :class:`SolutionError`."""
    try:
        value = fn(*args)
        if inspect.isawaitable(value):
            value = await value
    except Exception as exc:  # noqa: BLE001 - the learner's code: a failed scenario, not a traceback
        raise SolutionError(f"your {what} raised {type(exc).__name__}: {exc}".splitlines()[0][:300]) from None
    return value


def agent_for(exercise: Exercise, solution: Any, scenario: Scenario) -> Agent:
    """The agent a scenario runs: the solution in its place, the scenario's model and tools around it."""
    name = exercise.name
    if exercise.kind == "agent":
        return solution
    if exercise.kind == "model":
        return Agent(model=solution, tools=list(scenario.tools), system_prompt=scenario.system_prompt, name=name)
    if exercise.kind == "prompt":
        return Agent(model=scenario_model(scenario), tools=list(scenario.tools), system_prompt=solution, name=name)
    tools = [*scenario.tools, solution] if exercise.kind == "tool" else list(scenario.tools)
    return Agent(model=scenario_model(scenario), tools=tools, system_prompt=scenario.system_prompt, name=name)


async def default_drive(exercise: Exercise, solution: Any, scenario: Scenario, repository: Repository) -> Trial:
    trial = await run_agent(agent_for(exercise, solution, scenario), scenario, repository)
    if exercise.kind == "scorer":  # the run is the scenario's; the score is the learner's
        trial.value = await call_solution(solution, trial, what="scorer")
    return trial


async def judge(exercise: Exercise, solution: Any, scenario: Scenario) -> ScenarioResult:
    repository = InMemoryRepository()
    trial: Trial | None = None
    try:
        if scenario.setup is not None:
            scenario.setup(repository)
        if exercise.drive is not None:
            trial = await exercise.drive(solution, scenario, repository)
        else:
            trial = await default_drive(exercise, solution, scenario, repository)
        reason = _run_failure(trial)
        for expectation in scenario.expect:
            if reason is not None:
                break
            reason = await expectation.failure(trial)
    except SolutionError as exc:
        reason = str(exc)
    finally:
        repository.close()
    return ScenarioResult.of(scenario, reason, trial)


def _run_failure(trial: Trial) -> str | None:
    """A run that failed never passes, whatever the expectations say: the engine's error is the reason."""
    if trial.run is not None and trial.run.status is RunStatus.FAILED:
        return f"the run failed: {trial.run.error}"
    return None


def check(exercise: Exercise, solution: Any, *, strict: bool = False,
          transcript: Transcript | None = None) -> CheckResult:
    """Run every scenario of ``exercise`` with ``solution``; the result shows as a table.

    The solution's kind is checked first (:class:`~agio_notebook.teach.kinds.WrongKindError`, one line).
    ``strict`` raises ``AssertionError`` with the summary when a scenario fails (for nbgrader and
    otter-grader). ``transcript`` renders a failing run's events inline (the notebook's transcript).
    """
    if not isinstance(exercise, Exercise):
        raise TypeError(f"check() needs an Exercise first (e.g. exercise('tool_docstring')), "
                        f"got {type(exercise).__name__}")
    normalised = as_solution(exercise.kind, solution, exercise.name, exercise.asks_for, exercise.arity,
                             exercise.tool_name)

    async def all_scenarios() -> list[ScenarioResult]:
        return [await judge(exercise, normalised, s) for s in exercise.scenarios]

    result = CheckResult(exercise.name, run_coroutine(all_scenarios()), transcript)
    if strict and not result.passed:
        raise AssertionError(result.summary())
    return result
