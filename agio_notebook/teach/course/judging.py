"""Exercises on judging runs: write a scorer, and make an agent pass a 20-row evaluation."""

from __future__ import annotations

import operator
import re
from typing import Any

from ...models import FunctionModel, Reply, ScriptedModel
from ...explore.scoring import exact
from ...tools import tool
from ..exercise import Exercise, Scenario, Trial, expect
from .messages import NUMBER, last_user, system_text, tool_results
from .tools import WEATHER

_OPS = {"*": operator.mul, "+": operator.add, "-": operator.sub, "/": operator.truediv}
_EXPRESSION = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*([*+/-])\s*(-?\d+(?:\.\d+)?)\s*$")


@tool
def calculator(expression: str) -> str:
    """Compute one arithmetic operation exactly.

    Args:
        expression: two numbers and an operator, e.g. '17 * 23' (one of + - * /).
    """
    found = _EXPRESSION.match(expression)
    if found is None:
        raise ValueError(f"cannot compute {expression!r}: write two numbers and one of + - * /, e.g. '17 * 23'")
    value = _OPS[found.group(2)](float(found.group(1)), float(found.group(3)))
    return str(int(value)) if value == int(value) else f"{value:.6g}"


@tool
def weather(city: str) -> str:
    """Today's weather in a city."""
    return WEATHER[city]


def _scored_run(name: str, city: str, script: list[Any], expected: float, describe: str) -> Scenario:
    def why(trial: Trial) -> str:
        value = trial.value
        if not isinstance(value, (bool, int, float)):
            return f"your scorer returned {value!r} ({type(value).__name__}); return a number or a bool"
        return f"your scorer gave {float(value):g} to a run that should score {expected:g}: {describe}"

    return Scenario(name, f"What's the weather in {city}?", model=ScriptedModel(script), tools=[weather],
                    describe=describe,
                    expect=[expect(lambda t: isinstance(t.value, (bool, int, float)) and float(t.value) == expected,
                                   why, name=f"scores {expected:g}")])


WRITE_SCORER = Exercise(
    name="write_scorer", title="Write a scorer", kind="scorer", asks_for="a scorer fn(run) returning 0..1",
    minutes=15,
    instructions="""
A scorer is a function of a finished run (`run.final_text`, `run.steps`, `run.tool_path`) that
returns a number. Write one that gives **1.0** only when the agent called `weather` and its answer
repeats the temperature the tool returned, and **0.0** otherwise — a right-looking guess without the
tool, or a temperature the tool did not say, must score 0. It is checked on four recorded runs.
""",
    hints=["`run.tool_path` lists the tools called; the tool's result is the content of a step with role 'tool'.",
           "`re.findall(r'-?\\d+°C', text)` finds temperatures.",
           "Score 1.0 when the tool was called and every temperature in its result appears in run.final_text."],
    starter='''import re
from agio_notebook import StepRole
from agio_notebook.exercises import check, exercise

def repeats_the_tool(run):
    return 1.0 if re.search(r"\\d+°C", run.final_text) else 0.0  # not enough: a guess scores too

check(exercise("write_scorer"), repeats_the_tool)''',
    scenarios=[
        _scored_run("good answer", "Paris", [Reply.call("weather", city="Paris"), "It is 18°C and sunny in Paris."],
                    1.0, "it called weather (18°C) and said 18°C"),
        _scored_run("a guess", "Paris", ["It is 18°C in Paris, I think."], 0.0,
                    "the agent answered without calling weather, so its 18°C is a guess"),
        _scored_run("wrong number", "Paris", [Reply.call("weather", city="Paris"), "It is 25°C in Paris."], 0.0,
                    "weather said 18°C but the agent answered 25°C"),
        _scored_run("another city", "Tokyo", [Reply.call("weather", city="Tokyo"), "Tokyo: 22°C, rain."], 1.0,
                    "it called weather (22°C) and said 22°C"),
    ])


def literal_model() -> FunctionModel:
    """The model of the evaluation exercise. It does what its system prompt says, literally: it uses the
    calculator only when the prompt names it (and the agent has it), otherwise it estimates to the nearest
    ten; it replies with only the number when the prompt says "only the number"."""
    def literal(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        system = system_text(messages).lower()
        results = tool_results(messages)
        if results:
            value = results[-1]
        else:
            a, b = (float(n) for n in NUMBER.findall(last_user(messages))[:2])
            if "calculator" in system and any(t["function"]["name"] == "calculator" for t in tools):
                return Reply.call("calculator", expression=f"{a:g} * {b:g}")
            value = f"{round(a * b, -1):.0f}"
        return value if "only the number" in system else f"The answer is {value}."

    return FunctionModel(literal, name="literal")


ROWS = [(17, 23), (12, 34), (45, 67), (89, 12), (23, 19), (56, 78), (31, 29), (14, 53), (66, 21), (38, 47),
        (71, 13), (25, 37), (93, 17), (44, 26), (58, 39), (62, 18), (27, 81), (36, 73), (49, 52), (83, 44)]


def _why_row(expected: str) -> Any:
    def why(trial: Trial) -> str:
        said = f"expected exactly {expected!r}, got {trial.final_text!r}"
        if "calculator" not in trial.tool_path:
            return said + ": the agent estimated without the calculator (give it the tool and tell it to use it)"
        return said + ": tell the agent to reply with only the number"
    return why


def _row(i: int, a: int, b: int) -> Scenario:
    expected = str(a * b)
    return Scenario(f"row {i}", f"What is {a} × {b}?", describe=f"{a} × {b} = {expected}",
                    expect=[expect(exact(expected), _why_row(expected))])


PASS_EVALUATION = Exercise(
    name="pass_evaluation", title="Make an agent pass a 20-row evaluation", kind="agent", asks_for="an Agent",
    minutes=15,
    instructions="""
An evaluation runs an agent on many inputs and scores each answer. Here, 20 multiplications are scored
with `scoring.exact`: the answer must be exactly the number. Build an `Agent` on `literal_model()` —
a model that does what its system prompt says, literally — with the tools and the system prompt that make
all 20 rows pass.
""",
    hints=["Run one row yourself and read the transcript: what does the model answer?",
           "The model only uses a tool the agent has and the prompt names: add `calculator` to `tools=`.",
           "The prompt must also ask for *only the number*."],
    starter='''from agio_notebook import Agent
from agio_notebook.exercises import calculator, check, exercise, literal_model

agent = Agent(model=literal_model(), tools=[], system_prompt="You are good at arithmetic.")
check(exercise("pass_evaluation"), agent)''',
    scenarios=[_row(i, a, b) for i, (a, b) in enumerate(ROWS, 1)])
