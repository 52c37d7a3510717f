"""Exercises on tools: a docstring the model can use, and errors that help the model recover."""

from __future__ import annotations

import difflib
import re
from typing import Any

from ...models import Reply
from ...explore.scoring import called_before_answer, regex
from ..exercise import Exercise, Scenario, Trial, expect
from .messages import NUMBER, is_error, last_call, last_user, tool_results

RATES = {"EUR": 0.92, "GBP": 0.79, "JPY": 151.0}
_CURRENCY_WORDS = {"euro": "EUR", "pound": "GBP", "yen": "JPY"}
_WHAT_IT_DOES = re.compile(r"convert|currenc|exchange|dollar", re.I)
_CODES = re.compile(r"\b(ISO|code|codes)\b|'EUR'|\"EUR\"|\bEUR\b", re.I)


def docstring_reader(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    """A model that knows a tool only by its schema: the description says what it does, and each
    argument's description says what to pass (without one, it passes the currency as the user wrote it)."""
    results = tool_results(messages)
    if results:
        return f"The conversion failed: {results[-1]}" if is_error(results[-1]) else f"That is {results[-1]}."
    query = last_user(messages)
    usable = [t["function"] for t in tools
              if t["function"].get("description", "") != t["function"]["name"]
              and _WHAT_IT_DOES.search(t["function"].get("description", ""))]
    if not usable:
        return "I have no tool whose description says it converts currencies."
    spec = usable[0]
    amount = NUMBER.search(query)
    word = next((w for w in re.findall(r"[a-z]+", query.lower()) if w.rstrip("s") in _CURRENCY_WORDS), "euros")
    described = spec["parameters"].get("properties", {}).get("currency", {}).get("description", "")
    currency = _CURRENCY_WORDS[word.rstrip("s")] if _CODES.search(described) else word
    return Reply.call(spec["name"], amount=float(amount.group()) if amount else 0.0, currency=currency)


def _why_converted(expected: str) -> Any:
    def why(trial: Trial) -> str:
        args = trial.tool_arguments[0] if trial.tool_arguments else {}
        answer = trial.tool_results[0][2] if trial.tool_results else ""
        if args.get("currency") not in RATES:
            return (f"the model passed currency={args.get('currency')!r}, not a currency code: describe each "
                    "argument in the docstring (Args: currency: a three-letter ISO code such as 'EUR')")
        return (f"the model called convert_currency({args}) and the tool answered {answer!r}, which lacks "
                f"{expected}: convert with RATES (1 US dollar is RATES[currency])")
    return why


_NOT_CALLED = ("the model did not call convert_currency: a tool's description is its docstring's first line, "
               "and this one does not say what the tool does (e.g. 'Convert US dollars to another currency.')")


def _converts(name: str, query: str, expected: str) -> Scenario:
    return Scenario(name, query, model=docstring_reader, describe=f"{query} (expects {expected})", expect=[
        expect(called_before_answer("convert_currency"), _NOT_CALLED),
        expect(regex(re.escape(expected)), _why_converted(expected), name="answer")])


TOOL_DOCSTRING = Exercise(
    name="tool_docstring", title="Write a tool whose docstring the model can use", kind="tool",
    asks_for="a tool convert_currency(amount, currency)", tool_name="convert_currency", minutes=10,
    instructions="""
A model never sees your code: it sees the tool's **name, description and argument descriptions**,
which `@tool` builds from the signature and the docstring. Write `convert_currency(amount: float,
currency: str)` that converts US dollars with the rates in `RATES` (`{'EUR': 0.92, 'GBP': 0.79,
'JPY': 151.0}`), and a docstring that tells the model what the tool does and what to pass as
`currency`. The model in this exercise reads only the schema, like a real one.
""",
    hints=["Print `tool(convert_currency).schema()` to see exactly what the model sees.",
           "The first line of the docstring becomes the description; say it converts US dollars.",
           "Add an `Args:` section: `currency: a three-letter ISO 4217 code such as 'EUR'.`"],
    starter='''from agio_notebook.exercises import RATES, check, exercise

def convert_currency(amount: float, currency: str) -> str:
    # write a docstring the model can use
    return f"{amount * RATES[currency]:.2f} {currency}"

check(exercise("tool_docstring"), convert_currency)''',
    scenarios=[_converts("euros", "How much is 100 US dollars in euros?", "92"),
               _converts("yen", "Convert 10 dollars to yen, please.", "1510")])


WEATHER = {"Paris": "18°C and sunny", "Tokyo": "22°C with rain", "Oslo": "6°C and windy", "Lima": "20°C, cloudy"}


def recovering_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    """Asks for the city as the user spelt it; after an error it retries once with a city the error
    names that looks like it, else gives up and says why."""
    asked = re.search(r"in ([A-Za-z]+)", last_user(messages))
    city = asked.group(1) if asked else ""
    results = tool_results(messages)
    if not results:
        return Reply.call("city_weather", city=city)
    content = results[-1]
    called = last_call(messages).get("city", city)
    if not is_error(content):
        return f"The weather in {called}: {content}"
    known = [w for w in re.findall(r"[A-Z][a-z]+", content) if w != city]
    close = difflib.get_close_matches(city, known, n=1, cutoff=0.6)
    if len(results) >= 2 or not close:
        return f"I could not get the weather: {content}"
    return Reply.call("city_weather", city=close[0])


def _why_recovered(asked: str, expected: str) -> Any:
    def why(trial: Trial) -> str:
        results = trial.tool_results
        if not results:
            return "the model never called city_weather: keep the tool's name and its argument city"
        status, content = results[0][1], results[0][2]
        if status == "ok" and expected not in content:
            return (f"city_weather({asked!r}) returned {content!r} instead of raising an error, so the model took "
                    "it as the answer: raise an error (e.g. ValueError) for a city you do not know")
        if status != "ok" and len(results) == 1:
            return (f"the error the model saw, {content!r}, gives it nothing to correct the spelling with: "
                    "name the cities you know in the error message")
        return f"the model answered {trial.final_text!r}, without {expected!r}"
    return why


def _weather(name: str, asked: str, expected: str) -> Scenario:
    return Scenario(name, f"What's the weather in {asked}?", model=recovering_model,
                    describe=f"the user asks for {asked!r} (expects {expected})",
                    expect=[expect(regex(re.escape(expected)), _why_recovered(asked, expected), name="answer")])


TOOL_ERRORS = Exercise(
    name="tool_errors", title="Make a tool's errors help the model recover", kind="tool",
    asks_for="a tool city_weather(city)", tool_name="city_weather", minutes=10,
    instructions="""
Every exception a tool raises becomes a tool result the model reads (`Error (exception): ...`).
Write `city_weather(city: str)` that returns `WEATHER[city]` for a city it knows (`WEATHER` has Paris,
Tokyo, Oslo and Lima), and raises an error the model can act on when it does not: users misspell
cities, and the model in this exercise retries once if the error gives it something to go on.
""",
    hints=["Returning a string like 'unknown' is not an error: the model takes it as the answer.",
           "`KeyError: 'Pariss'` tells the model nothing new. What would you want to read?",
           "Raise `ValueError(f\"unknown city {city!r}; I know {', '.join(WEATHER)}\")`."],
    starter='''from agio_notebook.exercises import WEATHER, check, exercise

def city_weather(city: str) -> str:
    """Today's weather in a city."""
    return WEATHER[city]  # make the error help the model

check(exercise("tool_errors"), city_weather)''',
    scenarios=[_weather("known city", "Oslo", "6°C"), _weather("misspelt", "Pariss", "18°C"),
               _weather("misspelt again", "Tokio", "22°C")])
