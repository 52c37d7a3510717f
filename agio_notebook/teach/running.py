"""Running a scenario: one run in the check's store, and a call of the learner's code that cannot escape."""

from __future__ import annotations

import copy
from typing import Any, Callable

from ..agent import Agent
from ..core import ExecutionConfig
from ..execution import RunResult, StepRunner
from ..models import FunctionModel
from ..storage.base import Repository
from .exercise import Scenario, Trial
from .guard import DEFAULT_CAP, Watch, call_guarded, explain

# a scenario never waits long: a learner's loop or tool that hangs fails its scenario, not the notebook
DEFAULT_CONFIG = ExecutionConfig(max_steps=8, tool_timeout=DEFAULT_CAP + 2, first_token_timeout=DEFAULT_CAP + 2,
                                 enable_retry=False)


class SolutionError(Exception):
    """The learner's code raised; the message says where and what (``trial``: the run it raised on)."""

    trial: Trial | None = None


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


def trial_of(result: RunResult, repository: Repository, watch: Watch | None = None, value: Any = None) -> Trial:
    return Trial(result.run, list(result.steps), list(result.events), value, repository, watch=watch or Watch())


async def run_agent(agent: Agent, scenario: Scenario, repository: Repository, query: str | None = None,
                    watch: Watch | None = None) -> Trial:
    """One run of ``agent`` on ``query`` (default: the scenario's), in a session of its own."""
    runner = StepRunner(agent, config=scenario.config or DEFAULT_CONFIG, repository=repository)
    return trial_of(await runner.run(None, scenario.query if query is None else query), repository, watch)


async def call_solution(fn: Callable[..., Any], *args: Any, what: str = "function", watch: Watch | None = None,
                        cap: float = DEFAULT_CAP) -> Any:
    """Call the learner's (sync or async) code in a thread it can be abandoned in; what it raises, or its
    overrunning ``cap``, becomes a :class:`SolutionError` whose message names the cause."""
    try:
        return await call_guarded(fn, *args, what=what, watch=watch, cap=cap)
    except Exception as exc:  # noqa: BLE001 - the learner's code: a failed scenario, not a traceback
        raise SolutionError(explain(exc, what)) from None
