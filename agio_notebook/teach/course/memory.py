"""Exercise on memory: what a first run teaches is stored, so a second run does better."""

from __future__ import annotations

from typing import Any

from ...agent import Agent
from ...core.conversation import is_memory_step
from ...models import FunctionModel, Reply
from ...storage.base import Repository
from ...tools import tool
from ..exercise import Exercise, Scenario, Trial, expect
from ..running import call_solution, run_agent
from .messages import last_user, system_text, tool_results

FORECASTS = {"Oslo": "50°F (10°C), windy", "Lima": "68°F (20°C), cloudy"}


@tool
def forecast(city: str) -> str:
    """Tomorrow's forecast for a city, in Fahrenheit and Celsius."""
    return FORECASTS[city]


def forecaster_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    """Answers in Fahrenheit, unless its system prompt (where memory is retrieved) mentions Celsius."""
    city = next((c for c in FORECASTS if c in last_user(messages)), "Oslo")
    results = tool_results(messages)
    if not results:
        return Reply.call("forecast", city=city)
    fahrenheit, celsius = results[-1].split(" (")[0], results[-1].split("(")[1].split(")")[0]
    unit = celsius if "celsius" in system_text(messages).lower() else fahrenheit
    return f"Tomorrow in {city}: {unit}."


def forecaster() -> Agent:
    return Agent(model=FunctionModel(forecaster_model), tools=[forecast], name="forecaster")


async def drive(learn: Any, scenario: Scenario, repository: Repository) -> Trial:
    """The first run, then ``learn(run_id, repository)``, then the second run (a new session) is judged."""
    first = await run_agent(forecaster(), scenario, repository, scenario.data["first"])
    await call_solution(learn, first.run.id, repository, what="learn()")
    second = await run_agent(forecaster(), scenario, repository)
    second.value = first
    return second


def _memory_text(trial: Trial) -> str:
    return " ".join(s.content or "" for s in trial.steps if is_memory_step(s))


def _why_no_memory(trial: Trial) -> str:
    return ("the second run retrieved no memory: in learn(), store an experience with "
            "agio_notebook.memory.add_experience(situation, lesson=..., repository=repository), its situation in "
            "words the next question shares (e.g. 'weather forecast')")


def _why_still_fahrenheit(trial: Trial) -> str:
    return (f"the second run saw your memory but still answered {trial.final_text!r}: the lesson must say what to "
            "do next time (answer in Celsius)")


def _second_run(name: str, second: str) -> Scenario:
    return Scenario(name, second, data={"first": "What's the weather forecast for Oslo?"},
                    describe=f"after the Oslo run and learn(): {second!r} should be answered in °C",
                    expect=[expect(lambda t: bool(_memory_text(t)), _why_no_memory, name="memory retrieved"),
                            expect(lambda t: "°C" in t.final_text, _why_still_fahrenheit, name="answers in °C")])


MEMORY_SECOND_RUN = Exercise(
    name="memory_second_run", title="Use memory so a second run does better", kind="function", arity=2,
    asks_for="a function learn(run_id, repository)", minutes=15, drive=drive,
    instructions="""
The forecaster answers in Fahrenheit; the user wanted Celsius. Write `learn(run_id, repository)`, called
after that first run, that stores what the agent should do next time in memory
(`agio_notebook.memory.add_experience` or `add_skill`, with `repository=repository`). Memory is retrieved
into the system prompt before a run's first model call, so a **second run, in a new session**, should
answer in Celsius.
""",
    hints=["`memory.add_experience(situation, action, outcome, lesson, repository=repository)`.",
           "Retrieval matches words: describe the situation the way the next question will be asked.",
           "The lesson is what the model reads: 'Answer weather forecasts in Celsius.'"],
    starter='''from agio_notebook import memory
from agio_notebook.exercises import check, exercise

def learn(run_id, repository):
    ...  # store what the agent should do next time

check(exercise("memory_second_run"), learn)''',
    scenarios=[_second_run("same city", "What's the weather forecast for Oslo?"),
               _second_run("another city", "What's the weather forecast for Lima?")])
