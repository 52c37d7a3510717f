"""Exercise on memory: what a first run teaches is stored, so a second run, in a new session, does better."""

from __future__ import annotations

import random
import re
from typing import Any

from ...agent import Agent
from ...core.conversation import is_memory_step
from ...models import FunctionModel, Reply
from ...storage.base import Repository
from ...tools import Tool, tool
from ..exercise import Exercise, Scenario, Trial, judged
from ..guard import scratch_store
from ..reading import Scope, read, scope_of
from ..running import run_agent
from ..values import temperatures
from .messages import last_user, system_text, tool_results

CITIES = ["Oslo", "Lima", "Quito", "Perth", "Cairo", "Dublin", "Hanoi", "Nairobi", "Bergen", "Porto", "Denver",
          "Lyon"]
_UNITS = {"celsius": ["celsius", "centigrade", "°c", "º c", "degrees c", "metric", "metric units"],
          "fahrenheit": ["fahrenheit", "°f", "º f", "degrees f", "imperial", "imperial units"]}
_TOPIC = {"weather", "forecast", "forecasts", "forecasting", "temperature", "temperatures", "city", "cities",
          "tomorrow", "today", "degrees", "unit", "units", "place", "places", "location", "locations", "report",
          "reports", "question", "questions", "answer", "answers", "reply", "replies", "user", "users", "coat",
          "trip", "week", "day", "days", "convert", "converting", "give", "giving"}


def lessons(system: str) -> list[str]:
    """What the forecaster reads in the memory block of its prompt: each skill's text and each
    experience's lesson (not its situation, action or outcome)."""
    read_: list[str] = []
    for line in system.splitlines():
        skill = re.match(r"^- .*?\[skill [^\]]+\]: (.*)$", line)
        if skill:
            read_.append(skill.group(1))
            continue
        lesson = re.search(r"\bLesson: (.*)$", line) if line.startswith("- [experience") else None
        if lesson:
            read_.append(lesson.group(1))
    return read_


def unit_for(texts: list[str], city: str) -> tuple[str, str]:
    """``("C" | "F", why)``: the unit the forecaster answers in for ``city`` after reading ``texts``; the
    last sentence about units that applies to this city wins; without one it answers in Fahrenheit."""
    unit, why = "F", ""
    seen_rule = False
    for text in texts:
        for s in read(text, _UNITS):
            celsius, fahrenheit = s.said("celsius"), s.said("fahrenheit")
            if celsius is None and fahrenheit is None:
                continue
            seen_rule = True
            scope: Scope = scope_of(s, topic=_TOPIC, cases=CITIES, ignore=[w for ws in _UNITS.values() for w in ws])
            if not scope.applies_to(city):
                why = (f"the forecaster read your lesson ({s.text!r}) as a rule {scope.describe()}; this forecast is "
                       f"for {city}: say it for every forecast")
                continue
            if celsius and fahrenheit:  # "convert Fahrenheit to Celsius": the unit converted to
                celsius = _target(s.tokens) != "fahrenheit"
            if celsius or (fahrenheit is False and celsius is None):
                unit, why = "C", ""
            else:
                unit, why = "F", f"the forecaster read your lesson ({s.text!r}) as: answer in Fahrenheit"
    if not seen_rule:
        shown = "; ".join(repr(t) for t in texts)
        why = (f"your lesson ({shown}) does not say which unit to answer in" if texts else
               "the memory it retrieved has no lesson: the forecaster reads an experience's lesson (or a skill's "
               "text), not its situation or outcome")
    return unit, why


def _target(tokens: list[str]) -> str:
    """Of two units in one sentence, the one converted to ("to", "into", "in", "as" before it), else the
    last one named."""
    words = {"celsius": {"celsius", "centigrade", "°c", "° c", "ºc", "º c", "metric"},
             "fahrenheit": {"fahrenheit", "°f", "° f", "ºf", "º f", "imperial"}}
    found = [(i, u) for i, t in enumerate(tokens) for u, forms in words.items() if t in forms]
    for i, unit in found:
        if set(tokens[max(0, i - 2):i]) & {"to", "into", "in", "as"}:
            return unit
    return found[-1][1] if found else "celsius"


def forecast_tool(table: dict[str, str]) -> Tool:
    def forecast(city: str) -> str:
        """Tomorrow's forecast for a city, in Fahrenheit and Celsius."""
        return table[city]
    return tool(forecast)


def forecaster_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    """Answers in Fahrenheit, unless a lesson in its memory tells it to use Celsius for this city (see
    :func:`unit_for`)."""
    query = last_user(messages)
    city = next((c for c in CITIES if re.search(rf"\b{c}\b", query)), "Oslo")
    results = tool_results(messages)
    if not results:
        return Reply.call("forecast", city=city)
    found = {u: f"{v:g}°{u}" for v, u in temperatures(results[-1])}
    unit, _ = unit_for(lessons(system_text(messages)), city)
    return f"Tomorrow in {city}: {found.get(unit, results[-1])}."


def forecaster(table: dict[str, str]) -> Agent:
    return Agent(model=FunctionModel(forecaster_model), tools=[forecast_tool(table)], name="forecaster")


async def drive(learn: Any, scenario: Scenario, repository: Repository) -> Trial:
    """The first run, then ``learn(run_id, repository)``, then the second run (a new session) is judged."""
    table = scenario.data["table"]
    first = await run_agent(forecaster(table), scenario, repository, scenario.data["first"], watch=learn.watch)
    scratch = scratch_store()
    await learn(first.run.id, repository)
    second = await run_agent(forecaster(table), scenario, repository, watch=learn.watch)
    second.value = first
    second.context["wrote_elsewhere"] = bool(scratch) and _has_memory(scratch)
    return second


def _has_memory(root: str) -> bool:
    from ...storage import open_repository

    return "memory" in open_repository(root).journal_names("memory")


def _memory_text(trial: Trial) -> str:
    return " ".join(s.content or "" for s in trial.steps if is_memory_step(s))


def _better(city: str, celsius: float) -> Any:
    def why(trial: Trial) -> str | None:
        memory = _memory_text(trial)
        if not memory:
            if trial.context.get("wrote_elsewhere"):
                return ("learn() stored its lesson in the default store, not in the repository it was given: pass "
                        "repository=repository to memory.add_experience (or add_skill)")
            return ("the second run retrieved no memory: in learn(), store an experience with "
                    "agio_notebook.memory.add_experience(situation, lesson=..., repository=repository), its "
                    "situation in words the next question shares (e.g. 'weather forecast')")
        said = temperatures(trial.final_text)
        if said == [(celsius, "C")]:
            return None
        unit, reading = unit_for(lessons(memory), city)
        if reading:
            return reading
        return f"the second run saw your memory but answered {trial.final_text!r}, not {celsius:g}°C"
    return why


def _scenarios(rng: random.Random) -> list[Scenario]:
    first, same, other, variant = rng.sample(CITIES, 4)
    table = {}
    for city in (first, other, variant):
        c = rng.randrange(-6, 31)
        table[city] = f"{round(c * 9 / 5 + 32)}°F ({c}°C), {rng.choice(['windy', 'cloudy', 'sunny', 'rain'])}"
    celsius = {city: temperatures(report)[1][0] for city, report in table.items()}
    ask = f"What's the weather forecast for {first}?"

    def scenario(name: str, city: str, query: str, variant_: bool = False) -> Scenario:
        return Scenario(name, query, data={"first": ask, "table": table}, variant=variant_,
                        describe=f"after the {first} run and learn(): {query!r} should be answered in °C "
                                 f"({celsius[city]:g}°C)",
                        expect=[judged(_better(city, celsius[city]), "answers in °C")])

    return [scenario("same city", first, ask),
            scenario("another city", other, f"What's the weather forecast for {other}?"),
            scenario("asked another way", variant, f"Tomorrow's weather forecast for {variant}, please: will I need a "
                                                   "coat?", variant_=True)]


MEMORY_SECOND_RUN = Exercise(
    name="memory_second_run", title="Use memory so a second run does better", kind="function", arity=2,
    asks_for="a function learn(run_id, repository)", minutes=15, drive=drive,
    instructions="""
The forecaster answers in Fahrenheit; the user wanted Celsius. Write `learn(run_id, repository)`, called
after that first run, that stores what the agent should do next time in memory
(`agio_notebook.memory.add_experience` or `add_skill`, with `repository=repository`). Memory is retrieved
into the system prompt before a run's first model call, so a **second run, in a new session**, should
answer in Celsius, for any city.

**What the forecaster reads.** The lesson of each experience retrieved (`lesson=`), or a skill's text,
sentence by sentence: which unit to answer in. It understands *not* and *never*, the opposite unit, and
limits: a rule for one city is for that city only. Retrieval matches words, so the situation should be
described the way the next question is asked. The cities change at every check, and one question is
asked in a way these instructions do not show.
""",
    hints=["`memory.add_experience(situation, action, outcome, lesson, repository=repository)`.",
           "Retrieval matches words: describe the situation the way the next question will be asked "
           "('a weather forecast').",
           "The lesson is what the model reads: 'Answer weather forecasts in Celsius.'"],
    starter='''from agio_notebook import memory
from agio_notebook.exercises import check, exercise

def learn(run_id, repository):
    ...  # store what the agent should do next time

check(exercise("memory_second_run"), learn)''',
    scenarios=_scenarios)
