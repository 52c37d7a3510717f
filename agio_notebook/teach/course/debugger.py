"""Exercise on the step debugger: stop before a tool call, fix the arguments a model got wrong, go on."""

from __future__ import annotations

import json
import random
import re
from typing import Any

from ...agent import Agent
from ...core import ExecutionConfig, RunStatus, StepRole
from ...execution import StepRunner
from ...models import Reply
from ...storage.base import Repository
from ..exercise import Exercise, Scenario, Trial, judged
from ..running import SolutionError, scenario_model, trial_of
from ..values import numbers, same
from .loop import add

BREAKPOINTS = ("model", "tool")


def slipping_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    """Reads the second number of the question one too small, and answers with whatever add returned."""
    last = messages[-1]
    if last["role"] == "tool":
        return f"The sum is {last['content'].split()[0]}."
    a, b = (int(n) for n in re.findall(r"-?\d+", last["content"] or "")[:2])
    return Reply.call("add", a=a, b=b - 1)


async def drive(steer: Any, scenario: Scenario, repository: Repository) -> Trial:
    """The run in step mode, ``steer(pause)`` called at every pause (model calls and tool calls); a pause it
    leaves undecided continues. ``steer`` is the learner's function, guarded (see ``check.Learner``)."""
    agent = Agent(model=scenario_model(scenario), tools=list(scenario.tools), name="adder")
    debug = StepRunner(agent, config=scenario.config, repository=repository).debug(
        None, scenario.query, breakpoints=list(BREAKPOINTS))
    failure: SolutionError | None = None
    async for pause in debug:
        if failure is None:
            try:
                await steer(pause)
            except SolutionError as exc:
                failure = exc  # the run ends here, cancelled, and is shown with the reason
        if pause.decided:
            continue
        if failure is not None:
            pause.abort()
        else:
            pause.cont()
    trial = trial_of(debug.result, repository, getattr(steer, "watch", None))
    if failure is not None:
        failure.trial = trial
        raise failure
    return trial


def _tool_steps(trial: Trial) -> list[Any]:
    return [s for s in trial.steps if s.role is StepRole.TOOL]


def _edited(step: Any) -> dict[str, Any]:
    return step.extra.get("edited") or {}


def _sent(step: Any) -> dict[str, Any]:
    try:
        return json.loads(_edited(step).get("arguments", {}).get("sent") or "{}")
    except ValueError:
        return {}


def _request_edited(trial: Trial) -> bool:
    return any((s.extra.get("request") or {}).get("edited") for s in trial.steps if s.role is StepRole.ASSISTANT)


def _fixed(a: int, b: int) -> Any:
    def why(trial: Trial) -> str | None:
        tools = _tool_steps(trial)
        if trial.run is not None and trial.run.status is RunStatus.CANCELLED:
            return "your steer() aborted the run: fix the tool call's arguments and let the run go on"
        if _request_edited(trial):
            return ("you changed what the model saw (a request edit at a model pause); leave the question as asked "
                    "and fix the tool call's arguments at the tool pause")
        if not tools:
            return "the run called no tool"
        if len(tools) > 1:
            return f"the run called add {len(tools)} times; fix the one call the model makes"
        if _edited(tools[0]).get("skipped"):
            return ("you answered the add call by hand with skip(): the tool never ran; fix its arguments with "
                    "pause.edit(arguments=...) and let it run")
        if not _edited(tools[0]).get("arguments"):
            return (f"the model answered {trial.final_text!r}, not {a + b}: add ran with the arguments the model "
                    f"proposed; at the tool pause (pause.kind.value == 'tool') fix pause.arguments with "
                    "pause.edit(arguments=...)")
        sent = _sent(tools[0])
        if sent != {"a": a, "b": b}:
            return (f"add ran with {sent}, not {{'a': {a}, 'b': {b}}}: the model read the second number one too "
                    "small, so send b + 1 and keep a")
        result = numbers(tools[0].content or "")
        if tools[0].status != "ok" or not result or not same(result[0], a + b):
            return f"add ran with {sent} but returned {tools[0].content!r}"
        if trial.run is None or trial.run.status is not RunStatus.COMPLETED:
            return f"the run did not complete ({trial.run.status.value if trial.run else 'no run'})"
        if not any(same(n, a + b) for n in numbers(trial.final_text)):
            return f"the model answered {trial.final_text!r}, without {a + b}"
        return None
    return why


def _slips(a: int, b: int, variant: bool = False) -> Scenario:
    return Scenario(f"{a} + {b}", f"What is {a} + {b}?", model=slipping_model, tools=[add], variant=variant,
                    config=ExecutionConfig(max_steps=4, tool_timeout=5.0, first_token_timeout=5.0,
                                           enable_retry=False),
                    describe=f"the model calls add(a={a}, b={b - 1}); expects add(a={a}, b={b}) to run, then {a + b}",
                    expect=[judged(_fixed(a, b), "fixes the tool call")])


def _scenarios(rng: random.Random) -> list[Scenario]:
    return [_slips(rng.randrange(2, 10), rng.randrange(2, 10)), _slips(rng.randrange(11, 99), rng.randrange(11, 99)),
            _slips(rng.randrange(100, 500), -rng.randrange(2, 50), variant=True)]


EDIT_TOOL_CALL = Exercise(
    name="edit_tool_call", title="Stop before a tool call and fix its arguments", kind="function",
    asks_for="a function steer(pause)", arity=1, minutes=15, drive=drive,
    instructions="""
This model has a slip: it reads the second number of the question one too small, so for *What is
2 + 3?* it calls `add(a=2, b=2)` and answers 4. You cannot change the model; you can stop its loop.
Write `steer(pause)`: the check runs the agent in step mode and calls it at every pause, before each
model call (`pause.kind.value == "model"`) and before each tool call (`"tool"`). At the tool pause, read
what the model proposed (`pause.arguments`) and fix it with `pause.edit(arguments=...)`, so `add` runs
with the right numbers. Leave the question alone, and let the tool run (no `skip`). A pause you leave
undecided continues. The numbers change at every check, and one question has a negative number.
""",
    hints=["`pause.kind.value` says where the run stands; do nothing at the 'model' pauses.",
           "At the 'tool' pause, `pause.arguments` is `{'a': 2, 'b': 2}`: the model proposed it.",
           "`pause.edit(arguments={'a': pause.arguments['a'], 'b': pause.arguments['b'] + 1})`"],
    starter='''from agio_notebook.exercises import check, exercise

def steer(pause):
    print(pause.describe())
    ...  # at the tool pause, fix the arguments the model proposed

check(exercise("edit_tool_call"), steer)''',
    scenarios=_scenarios)
