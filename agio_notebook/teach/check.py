"""``check(exercise, solution)``: every scenario run offline, in a throwaway store, and judged.

A solution that raises fails its scenario with the reason; it never stops the check.
"""

from __future__ import annotations

from typing import Any

from ..agent import Agent
from ..core import RunStatus
from ..explore.runner import run_coroutine
from ..storage import InMemoryRepository
from ..storage.base import Repository
from .catalog import exercise as exercise_named
from .exercise import Exercise, Scenario, Trial
from .kinds import as_solution
from .report import CheckResult, ScenarioResult, Transcript
from .running import SolutionError, call_solution, run_agent, scenario_model


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
        try:
            trial.value = await call_solution(solution, trial, what="scorer")
        except SolutionError as exc:
            exc.trial = trial  # the run the scorer failed on is shown with the reason
            raise
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
        reason, trial = str(exc), exc.trial or trial
    except Exception as exc:  # noqa: BLE001 - whatever a solution made the scenario do: a reason, not a traceback
        reason = f"this scenario could not run: {type(exc).__name__}: {exc}".splitlines()[0][:300]
    finally:
        repository.close()
    return ScenarioResult.of(scenario, reason, trial)


def _run_failure(trial: Trial) -> str | None:
    """A run that failed never passes, whatever the expectations say: the engine's error is the reason."""
    if trial.run is not None and trial.run.status is RunStatus.FAILED:
        return f"the run failed: {trial.run.error}"
    return None


def check(exercise: Exercise | str, solution: Any, *, strict: bool = False,
          transcript: Transcript | None = None) -> CheckResult:
    """Run every scenario of ``exercise`` (or the course's exercise of that name) with ``solution``; the
    result shows as a table.

    The solution's kind is checked first (:class:`~agio_notebook.teach.kinds.WrongKindError`, one line).
    ``strict`` raises ``AssertionError`` with the summary when a scenario fails (for nbgrader and
    otter-grader). ``transcript`` renders a failing run's events inline (the notebook's transcript).
    """
    if isinstance(exercise, str):
        exercise = exercise_named(exercise)
    if not isinstance(exercise, Exercise):
        raise TypeError(f"check() needs an Exercise or an exercise's name first (e.g. 'tool_docstring'), "
                        f"got {type(exercise).__name__}")
    normalised = as_solution(exercise.kind, solution, exercise.name, exercise.asks_for, exercise.arity,
                             exercise.tool_name)

    async def all_scenarios() -> list[ScenarioResult]:
        return [await judge(exercise, normalised, s) for s in exercise.scenarios]

    result = CheckResult(exercise.name, run_coroutine(all_scenarios()), transcript)
    if strict and not result.passed:
        raise AssertionError(result.summary())
    return result
