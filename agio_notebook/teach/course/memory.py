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
from ..reading import STOPWORDS, Scope, parts, read, scope_of, tokens
from ..running import run_agent
from ..values import temperatures
from .messages import last_user, system_text, tool_results
from .plain import condition, stance

CITIES = ["Oslo", "Lima", "Quito", "Perth", "Cairo", "Dublin", "Hanoi", "Nairobi", "Bergen", "Porto", "Denver",
          "Lyon"]
_UNITS = {"celsius": ["celsius", "centigrade", "°c", "º c", "degrees c", "metric", "metric units"],
          "fahrenheit": ["fahrenheit", "°f", "º f", "degrees f", "imperial", "imperial units"]}
_TOPIC = {"weather", "forecast", "forecasts", "forecasting", "temperature", "temperatures", "city", "cities",
          "tomorrow", "today", "degrees", "unit", "units", "place", "places", "location", "locations", "report",
          "reports", "question", "questions", "answer", "answers", "reply", "replies", "user", "users", "coat",
          "trip", "week", "day", "days", "convert", "converting", "give", "giving"}
_UNIT_WORDS = {w for forms in _UNITS.values() for form in forms for w in form.split()} | {"degrees", "degree"}


def lessons(system: str, question: str | None = None) -> list[str]:
    """What the forecaster reads in the memory block of its prompt: each skill's text and each
    experience's lesson (not its situation, action or outcome); with ``question``, only those that share
    a word with it (an experience's situation, a skill's name or text): retrieval matches words."""
    return [text for text, matches in _memories(system, question) if matches]


def _memories(system: str, question: str | None) -> list[tuple[str, bool]]:
    asked = _words(question) if question is not None else None
    out: list[tuple[str, bool]] = []
    for line in system.splitlines():
        skill = re.match(r"^- (.*?) \[skill [^\]]+\]: (.*)$", line)
        if skill:
            out.append((skill.group(2), asked is None or bool(asked & _words(skill.group(1) + " " + skill.group(2)))))
            continue
        lesson = re.search(r"\bLesson: (.*)$", line) if line.startswith("- [experience") else None
        if lesson:
            situation = re.search(r"Situation: (.*?)(?: Action: | Outcome: | Lesson: )", line)
            out.append((lesson.group(1), asked is None or bool(asked & _words(situation.group(1) if situation else ""))))
    return out


def unmatched(system: str, question: str) -> list[str]:
    """The situations (or skills) retrieved for ``question`` that share no word with it."""
    found = []
    for line in system.splitlines():
        situation = re.search(r"Situation: (.*?)(?: Action: | Outcome: | Lesson: |$)", line)
        skill = re.match(r"^- (.*?) \[skill [^\]]+\]: (.*)$", line)
        text = situation.group(1) if situation else (skill.group(1) + ": " + skill.group(2) if skill else None)
        if text is not None and not (_words(question) & _words(text)):
            found.append(text.rstrip("."))
    return found


def _words(text: str) -> set[str]:
    """The content words of ``text``, singular ("forecasts" is "forecast")."""
    return {w[:-1] if w.endswith("s") and len(w) > 3 else w for w in tokens(text)
            if w.isalpha() and w not in STOPWORDS and w not in _FILLER}


_FILLER = {"what's", "whats", "please", "will", "need", "question", "questions", "for", "tomorrow's"}


def unit_for(texts: list[str], city: str) -> tuple[str, str]:
    """``("C" | "F", why)``: the unit the forecaster answers in for ``city`` after reading ``texts``; in
    each text the last plain instruction about units that applies to this city wins (clause by clause:
    "answer in Celsius, then convert to Fahrenheit" ends in Fahrenheit); texts that disagree leave it
    unsure, and without a rule it answers in Fahrenheit."""
    unit, why = "F", ""
    seen_rule = False
    said_by: dict[str, str] = {}
    for text in texts:
        own: str | None = None
        for s in read(text, _UNITS):
            if s.said("celsius") is None and s.said("fahrenheit") is None:
                continue
            seen_rule = True
            scope: Scope = scope_of(s, topic=_TOPIC, cases=CITIES, ignore=[w for ws in _UNITS.values() for w in ws])
            if not scope.applies_to(city):
                why = (f"the forecaster read your lesson ({s.text!r}) as a rule {scope.describe()}; this forecast is "
                       f"for {city}: say it for every forecast")
                continue
            limit = condition(s, topic=_TOPIC | _UNIT_WORDS, cases=CITIES)
            if limit is not None:
                why = (f"the forecaster did not follow your lesson ({s.text!r}): it is {limit.describe()}; say it "
                       "for every forecast")
                continue
            for part in parts(s):
                celsius, fahrenheit = part.said("celsius"), part.said("fahrenheit")
                if celsius is None and fahrenheit is None:
                    continue
                reservation = stance(part.tokens, s.text)
                if reservation is not None and reservation.kind == "wrong":  # "answering in Celsius was a mistake"
                    celsius = None if celsius is None else not celsius
                    fahrenheit = None if fahrenheit is None else not fahrenheit
                elif reservation is not None:
                    why = (f"the forecaster did not follow your lesson ({s.text!r}): it is {reservation.describe()}; "
                           "say what to do, plainly")
                    continue
                if celsius and fahrenheit:  # "convert Fahrenheit to Celsius": the unit converted to
                    celsius = _target(part.tokens) != "fahrenheit"
                if celsius or (fahrenheit is False and celsius is None):
                    own, unit, why = "C", "C", ""
                else:
                    own, unit, why = "F", "F", f"the forecaster read your lesson ({s.text!r}) as: answer in Fahrenheit"
        if own is not None:
            said_by.setdefault(own, text)
    if len(said_by) > 1:
        return "F", (f"your memory says both Celsius ({said_by['C']!r}) and Fahrenheit ({said_by['F']!r}): the "
                     "forecaster cannot tell which holds, so it answers as before; keep one lesson")
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
    unit, _ = unit_for(lessons(system_text(messages), query), city)
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
        question = trial.query or ""
        if not lessons(memory, question):
            far = unmatched(memory, question)
            if far:
                return (f"the memory retrieved ({far[0]!r}) shares no word with the question ({question!r}), so "
                        "the forecaster did not take it as about this question: retrieval matches words; describe "
                        "the situation the way the question is asked (e.g. 'a weather forecast')")
        unit, reading = unit_for(lessons(memory, question), city)
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
limits: a rule for one city is for that city only, and one under a condition it cannot check (*if*,
*unless*, *on Mondays*) is not followed; it follows a plain instruction, not what someone once wanted or
another user wants, and what a lesson says to do next (*then convert ...*) it does. Two lessons that
disagree leave it unsure. Retrieval matches words, so the situation should be described the way the next
question is asked: a memory that shares no word with the question is not taken as about it. The cities change at every check, and one question is
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
