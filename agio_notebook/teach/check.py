"""``check(exercise, solution)``: every scenario run offline, in a throwaway store, and judged.

Scenario values are drawn from a seed (new at every check, shown in the result, ``seed=`` repeats it).
The scenarios run one after another (at once for an exercise whose scenarios wait on purpose), each with
its own store, and the learner's code runs in threads that are abandoned when a call overruns its cap:
a solution that hangs fails within its cap, not the notebook's patience, and the scenarios after it are
not run. A solution that raises fails its scenario with the reason; it never stops the check. A
problem that would fail every scenario for one reason (a wrong kind or signature) is said once.
"""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass
from typing import Any

from ..agent import Agent
from ..core import RunStatus
from ..explore.runner import run_coroutine
from ..storage import InMemoryRepository
from ..storage.base import Repository
from .catalog import exercise as exercise_named
from .exercise import Exercise, Scenario, Trial
from .guard import HUNG, Watch, environment, sandboxed
from .kinds import WrongKindError, as_solution, guarded_agent, guarded_model, guarded_tool
from .progress import record as keep
from .report import CheckResult, ScenarioResult, Transcript
from .running import SolutionError, call_solution, run_agent, scenario_model

SCENARIO_DEADLINE = 20.0  # seconds one scenario may take in all, whatever its calls do


@dataclass
class Learner:
    """The learner's solution in one scenario: normalised for its kind (``solution``), as given
    (``raw``), and called through :meth:`__call__`, guarded and capped, what went wrong noted in ``watch``."""

    solution: Any
    raw: Any
    watch: Watch
    cap: float
    what: str = "function"

    async def __call__(self, *args: Any, what: str | None = None) -> Any:
        return await call_solution(self.solution, *args, what=what or self.what, watch=self.watch, cap=self.cap)


def agent_for(exercise: Exercise, learner: Learner, scenario: Scenario) -> Agent:
    """The agent a scenario runs: the solution in its place, the scenario's model and tools around it."""
    name, solution, watch, cap = exercise.name, learner.solution, learner.watch, learner.cap
    if exercise.kind == "agent":
        return guarded_agent(solution, watch, cap)
    if exercise.kind == "model":
        return Agent(model=guarded_model(solution, watch, cap), tools=list(scenario.tools),
                     system_prompt=scenario.system_prompt, name=name)
    if exercise.kind == "prompt":
        return Agent(model=scenario_model(scenario), tools=list(scenario.tools), system_prompt=solution, name=name)
    tools = list(scenario.tools)
    if exercise.kind == "tool":
        tools.append(guarded_tool(solution, watch, cap))
    return Agent(model=scenario_model(scenario), tools=tools, system_prompt=scenario.system_prompt, name=name)


async def default_drive(exercise: Exercise, learner: Learner, scenario: Scenario, repository: Repository) -> Trial:
    trial = await run_agent(agent_for(exercise, learner, scenario), scenario, repository, watch=learner.watch)
    trial.context["solution"] = learner.solution
    if exercise.kind == "scorer":  # the run is the scenario's; the score is the learner's
        try:
            trial.value = await learner(trial, what="scorer")
        except SolutionError as exc:
            exc.trial = trial  # the run the scorer failed on is shown with the reason
            raise
    return trial


async def judge(exercise: Exercise, learner: Learner, scenario: Scenario) -> ScenarioResult:
    repository = InMemoryRepository()
    trial: Trial | None = None
    from_code = False
    try:
        async with asyncio.timeout(SCENARIO_DEADLINE):
            if scenario.setup is not None:
                scenario.setup(repository)
            if exercise.drive is not None:
                trial = await exercise.drive(learner, scenario, repository)
            else:
                trial = await default_drive(exercise, learner, scenario, repository)
            reason = learner.watch.incidents[0] if learner.watch.incidents else None
            from_code = reason is not None
            reason = reason or (None if scenario.judges_failure else _run_failure(trial))
            for expectation in scenario.expect:
                if reason is not None:
                    break
                reason = await expectation.failure(trial)
            if reason is None and scenario.probe is not None:
                reason = await scenario.probe(trial, learner)
    except SolutionError as exc:
        trial = exc.trial or trial
        reason, from_code = (learner.watch.incidents or [str(exc)])[0], True
    except TimeoutError:
        reason = f"this scenario took longer than {SCENARIO_DEADLINE:g} s in all and was stopped"
    except Exception as exc:  # noqa: BLE001 - whatever a solution made the scenario do: a reason, not a traceback
        reason = f"this scenario could not run: {type(exc).__name__}: {exc}".splitlines()[0][:300]
    finally:
        repository.close()
    return ScenarioResult.of(scenario, reason, trial, from_code=from_code)


def _run_failure(trial: Trial) -> str | None:
    """A run that failed never passes, whatever the expectations say: the engine's error is the reason."""
    if trial.run is not None and trial.run.status is RunStatus.FAILED:
        return f"the run failed: {trial.run.error}"
    return None


def new_seed() -> int:
    return 1000 + secrets.randbelow(99000)


def prepare(exercise: Exercise, solution: Any) -> tuple[Any, str | None]:
    """The solution normalised for the exercise's kind, or the one line that says why it cannot be."""
    try:
        normalised = as_solution(exercise.kind, solution, exercise.name, exercise.asks_for, exercise.arity,
                                 exercise.tool_name)
    except WrongKindError as exc:
        return None, str(exc)
    if exercise.preflight is not None:
        problem = exercise.preflight(normalised)
        if problem:
            return None, problem
    return normalised, None


def check(exercise: Exercise | str, solution: Any, *, seed: int | None = None, strict: bool = False,
          transcript: Transcript | None = None, record: bool = True,
          repository: Repository | None = None) -> CheckResult:
    """Run every scenario of ``exercise`` (or the course's exercise of that name) with ``solution``; the
    result shows as a table.

    ``seed`` draws the scenarios' values (default: a new one, shown in the result). A solution of the
    wrong kind or signature fails with one line (``result.problem``) before anything runs. ``strict``
    raises ``AssertionError`` with the summary when a scenario fails. ``transcript`` renders a failing
    run's events inline. With ``record`` the check is kept in the store's progress journal
    (``repository``, default the default store).
    """
    if isinstance(exercise, str):
        exercise = exercise_named(exercise)
    if not isinstance(exercise, Exercise):
        raise TypeError(f"check() needs an Exercise or an exercise's name first (e.g. 'tool_docstring'), "
                        f"got {type(exercise).__name__}")
    seed = new_seed() if seed is None else int(seed)
    normalised, problem = prepare(exercise, solution)
    scenarios: list[ScenarioResult] = []
    if problem is None:
        drawn = exercise.draw(seed)

        async def all_scenarios() -> list[ScenarioResult]:
            learners = [Learner(normalised, solution, Watch(), exercise.time_limit, exercise.asks_for_what)
                        for _ in drawn]
            if exercise.concurrent:
                return list(await asyncio.gather(*(judge(exercise, lr, s) for lr, s in zip(learners, drawn))))
            done: list[ScenarioResult] = []
            for learner, scenario in zip(learners, drawn):
                hung = next((r for r in done if r.hung), None)
                if hung is not None:  # the same code would hang again: said once, the check ends in time
                    done.append(ScenarioResult.of(scenario, hung.reason, None, from_code=True))
                    continue
                done.append(await judge(exercise, learner, scenario))
                done[-1].hung = any(HUNG in line for line in learner.watch.incidents)
            return done

        values = exercise.environment(exercise.rng(seed)) if exercise.environment is not None else {}
        with sandboxed(), environment(values):
            scenarios = run_coroutine(all_scenarios())
        problem = _one_cause(scenarios)
    result = CheckResult(exercise.name, scenarios, transcript, seed=seed, problem=problem)
    if record:
        keep(result, solution, repository)
    if strict and not result.passed:
        raise AssertionError(result.summary())
    return result


def _one_cause(scenarios: list[ScenarioResult]) -> str | None:
    """The learner's code failed every scenario for the same reason (raised the same error, hung):
    said once, above the table."""
    reasons = {s.reason for s in scenarios}
    if scenarios and all(not s.passed and s.from_code for s in scenarios) and len(reasons) == 1:
        return reasons.pop()
    return None
