"""Exercises on tools: a docstring the model can use, and errors that help the model recover."""

from __future__ import annotations

import difflib
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ...models import Reply
from ..exercise import Exercise, Scenario, Trial, judged
from ..kinds import takes_arguments
from ..reading import clause_at, clauses, negated_at, read
from ..values import amounts, has_word, numbers, same, temperatures, words
from .messages import is_error, last_call, last_user, tool_results
from .plain import condition, stance

RATES = {"EUR": 0.92, "GBP": 0.79, "JPY": 151.0}
NAMES = {"EUR": "euros", "GBP": "British pounds", "JPY": "yen"}
_CODES = {"EUR", "GBP", "JPY", "USD", "CHF", "CAD", "AUD", "CNY", "SEK", "NOK", "DKK", "INR"}
_ASKED = {"euro": "EUR", "euros": "EUR", "eur": "EUR", "pound": "GBP", "pounds": "GBP", "sterling": "GBP",
          "gbp": "GBP", "yen": "JPY", "jpy": "JPY", "franc": "CHF", "francs": "CHF", "chf": "CHF", "krona": "SEK",
          "kronor": "SEK", "sek": "SEK"}

# what the docstring reader understands (see reading.py for negation and exclusivity)
_CONCEPTS = {
    "convert": ["convert", "converts", "converting", "conversion", "converted", "converter", "exchange", "exchanges",
                "change", "changes", "turn", "turns", "translate", "translates", "calculate", "calculates",
                "compute", "computes", "how much"],
    "usd": ["us dollars", "us dollar", "u s dollars", "usd", "dollars", "dollar", "american dollars"],
    "other": ["another currency", "other currency", "other currencies", "foreign currency", "foreign currencies",
              "target currency", "a currency", "any currency", "euros", "euro", "yen", "pounds", "eur", "gbp",
              "jpy", "currencies", "currency", "money"],
    "code": ["code", "codes", "iso", "three letter", "three letters", "3 letter", "abbreviation"],
    "name": ["name", "names", "word", "words", "spelled out", "written out"],
    "target": ["target", "to convert to", "convert to", "converted to", "into", "wanted", "desired", "result",
               "destination"],
    "source": ["source", "to convert from", "convert from", "converted from", "original", "of the amount"],
}


@dataclass
class Reading:
    """How the docstring reader understood a tool: will it use it for dollars -> another currency, how it
    passes ``currency``, and the codes it was told are the only ones (``only``)."""

    uses: bool
    why_not: str = ""
    codes: bool = False
    only: set[str] = field(default_factory=set)
    excluded: set[str] = field(default_factory=set)  # "except yen"
    form: str = ""  # how a code is written when the description says: "lower case", "two letters"
    cents: bool = False  # amount described in cents


def _direction(text: str, where: str) -> str | None:
    """"usd->other", "other->usd" or None, from "from X", "to X", "X to Y" in ``text``."""
    toks = re.findall(r"[a-z$]+", text.lower().replace("u.s.", "us"))
    usd = {"dollar", "dollars", "usd", "$"}
    other = {"euro", "euros", "yen", "pounds", "eur", "gbp", "jpy", "currency", "currencies", "foreign"}
    verdict = None
    for i, t in enumerate(toks):
        before = toks[i - 1] if i else ""
        before2 = toks[i - 2] if i > 1 else ""
        markers = {before, before2}
        if t in usd and "in" in markers and {"amount", "amounts", "sum", "money", "price", "value"} & set(toks[:i]):
            verdict = "usd->other"  # "an amount in US dollars": what is converted
            continue
        if t in usd and markers & {"to", "into"} and not markers & {"from", "of"}:
            return "other->usd"
        if t in usd and markers & {"from", "of"}:
            verdict = "usd->other"
        if t in other and markers & {"from"}:
            return "other->usd"
        if t in other and markers & {"to", "into"}:
            verdict = verdict or "usd->other"
    if where == "amount" and verdict is None:
        if any(t in usd for t in toks):
            return "usd->other"
        if any(t in other for t in toks):
            return "other->usd"
    return verdict


def read_converter(spec: dict[str, Any]) -> Reading:
    """The docstring reader's understanding of one tool schema (``{"name", "description", "parameters"}``)."""
    description = spec.get("description", "") or ""
    if description == spec.get("name"):
        description = ""
    props = (spec.get("parameters") or {}).get("properties", {})
    amount_doc = props.get("amount", {}).get("description", "") or ""
    currency_doc = props.get("currency", {}).get("description", "") or ""
    said = read(description, _CONCEPTS)
    converts = [m for s in said for m in s.mentions if m.concept == "convert"]
    money = [m for s in said for m in s.mentions if m.concept in ("usd", "other")]
    if not description:
        return Reading(False, "the tool has no description (its docstring's first line): the model does not know "
                              "what it does")
    if not any(m.stated for m in converts) or not money:
        said_not = any(not m.positive for m in converts)
        return Reading(False, f"its description, {description!r}, "
                              f"{'says it does not convert' if said_not else 'does not say that it converts'} money")
    refused = _not_plain(description, said)
    if refused:
        return Reading(False, refused)
    directions = {_direction(s.text, "description") for s in said if any(m.concept == "convert" and m.stated
                                                                       for m in s.mentions)}
    directions |= {_direction(amount_doc, "amount")}
    currency = read(currency_doc, _CONCEPTS)
    role = {m.concept for s in currency for m in s.mentions if m.positive and m.concept in ("target", "source")}
    if "source" in role:
        directions.add("other->usd")
    if "target" in role:
        directions.add("usd->other")
    directions.discard(None)
    if "other->usd" in directions:
        return Reading(False, "your docstring says the tool converts into US dollars (or that currency is what "
                              "is converted from); the question is US dollars to another currency")
    if not directions:
        return Reading(False, "your docstring does not say which way the tool converts: from US dollars to the "
                              "currency given as currency")
    only = _named_targets(description)
    code_said = [s.said("code") for s in currency if s.said("code") is not None]
    examples = [c for c in re.findall(r"\b[A-Z]{3}\b", currency_doc) if c in _CODES]
    exclusive_examples: set[str] = set()
    for s in currency:
        found = {c for c in re.findall(r"\b[A-Z]{3}\b", s.text) if c in _CODES}
        if found and s.exclusive and s.said("code") is None:
            exclusive_examples |= found
    codes = (any(code_said) or (bool(examples) and not code_said)) and not any(
        s.said("name") for s in currency)
    if code_said and not any(code_said):
        codes = False
    excluded = {code for s in said if (limit := condition(s, topic=_MONEY)) is not None
                for code in (_NAMED.get(w) for w in limit.words) if code}
    return Reading(True, codes=codes, only=exclusive_examples | only, excluded=excluded, form=_code_form(currency_doc),
                   cents=any(s.said("cents") for s in read(amount_doc, {"cents": ["cent", "cents", "penny", "pennies"]})))


# the words a rule about converting money may name without limiting it ("for any amount")
_MONEY = {"amount", "amounts", "money", "sum", "sums", "price", "prices", "value", "values", "currency", "currencies",
          "dollar", "dollars", "us", "usd", "conversion", "conversions", "rate", "rates", "exchange", "euros", "euro",
          "yen", "pounds", "code", "codes", "tool", "result", "results", "question", "questions", "request",
          "requests", "another", "foreign", "target", "given", "convert", "converting", "into", "to", "payment",
          "travel", "travellers", "travelers", "trip", "trips", "shopping", "customers", "people", "anyone"}
_OTHER_DOLLARS = re.compile(r"\b(canadian|australian|singapore|singaporean|hong kong|new zealand|nz|taiwan|taiwanese|"
                            r"jamaican|bahamian|barbadian|fijian|liberian|namibian|zimbabwean|caribbean|guyanese|brunei|"
                            r"belize|cad|aud|hkd|sgd|nzd)\s+dollars?\b", re.I)


def _not_plain(description: str, said: list[Any]) -> str:
    """Why the docstring reader does not take the description as what the tool does, or "": a sentence
    about converting that is limited, past, hypothetical, about another tool, asked, or called broken; a
    tool said to be broken; or one that converts some other dollars, or not US dollars."""
    for s in said:
        converts = any(m.concept == "convert" and m.stated for m in s.mentions)
        for clause in clauses(s.tokens):
            reservation = stance(clause, s.text)
            if reservation is not None and (converts or reservation.kind == "broken"):
                return (f"its description, {s.text!r}, is {reservation.describe()}: the model uses a tool whose "
                        "description says plainly what it does")
        if not converts:
            continue
        limit = condition(s, topic=_MONEY)
        if limit is not None and not (limit.kind == "exception" and any(w in _NAMED for w in limit.words)):
            return (f"its description, {s.text!r}, limits the tool ({limit.describe()}): the model cannot tell "
                    "when it holds, so it does not use it")
        other = _OTHER_DOLLARS.search(s.text)
        if other:
            return (f"its description says the tool converts {other.group(0)}, not US dollars: the question is US "
                    "dollars to another currency")
        usd = [m.positive for m in s.mentions if m.concept == "usd"]
        if usd and not any(usd):
            return (f"its description, {s.text!r}, says the tool does not convert US dollars: the question is US "
                    "dollars to another currency")
    return ""


def _code_form(currency_doc: str) -> str:
    """How the currency's description says to write a code, when not as three capital letters: "lower case"
    ('eur'), "two letters" ('EU'); "" for the usual form."""
    text = currency_doc.lower().replace("-", " ")
    quoted = re.findall(r"['\"`]([A-Za-z]{2,3})['\"`]", currency_doc)
    if re.search(r"\b(two|2) letters?\b", text) or (quoted and all(len(q) == 2 for q in quoted)):
        return "two letters"
    if re.search(r"\blower ?case\b|\bsmall letters\b", text) or (quoted and all(q.islower() for q in quoted)):
        return "lower case"
    return ""


def _written(code: str, form: str) -> str:
    return code[:2] if form == "two letters" else code.lower() if form == "lower case" else code


_GENERIC = {"another", "other", "any", "foreign", "a", "target", "currencies", "currency", "whichever", "many"}
_NAMED = {"euro": "EUR", "euros": "EUR", "eur": "EUR", "pound": "GBP", "pounds": "GBP", "gbp": "GBP",
          "sterling": "GBP", "yen": "JPY", "jpy": "JPY"}


def _named_targets(description: str) -> set[str]:
    """The currencies a description limits the tool to ("Convert US dollars to euros."): those it names
    after "to"/"into", when it names no currency in general ("another currency") there."""
    toks = re.findall(r"[a-z]+", description.lower())
    named: set[str] = set()
    for i, t in enumerate(toks):
        if t in ("to", "into"):
            after = toks[i + 1:i + 6]
            if any(w in _GENERIC for w in after[:2]):
                return set()
            named |= {_NAMED[w] for w in after if w in _NAMED}
    return named


def _target(query: str) -> tuple[str, str]:
    """(ISO code, the word the user wrote) of the currency a question asks for."""
    for w in words(query):
        if w in _ASKED:
            return _ASKED[w], w
    return "EUR", "euros"


def docstring_reader(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    """A model that knows a tool only by its schema, read sentence by sentence (see :func:`read_converter`):
    it uses a tool whose description says it converts US dollars to another currency, and passes
    ``currency`` as a code only when the argument's description says so."""
    results = tool_results(messages)
    if results:
        return f"The conversion failed: {results[-1]}" if is_error(results[-1]) else f"That is {results[-1]}."
    query = last_user(messages)
    code, word = _target(query)
    readings = [(t["function"], read_converter(t["function"])) for t in tools]
    usable = [(spec, r) for spec, r in readings if r.uses]
    if not usable:
        return f"I have no tool that converts US dollars to {word}."
    spec, reading = usable[0]
    if reading.only and code not in reading.only:
        return f"The tool converts only to {', '.join(sorted(reading.only))}, not to {word}."
    if code in reading.excluded:
        return f"The tool does not convert to {word}."
    found = numbers(query)
    amount = found[0] if found else 0.0
    return Reply.call(spec["name"], amount=amount * 100 if reading.cents else amount,
                      currency=_written(code, reading.form) if reading.codes else word)


def _schema(trial: Trial) -> dict[str, Any]:
    """The learner's tool as the model saw it."""
    return trial.context["solution"].schema()["function"]


_MINOR = {"JPY": 0.5}  # yen have no cents: a whole number of yen is a right answer too


def _converted(amount: float, code: str) -> Any:
    expected = round(amount * RATES[code], 2)
    name = NAMES[code]
    close = _MINOR.get(code, 0.006)

    def why(trial: Trial) -> str | None:
        calls = [args for name_, args in trial.calls if name_ == "convert_currency"]
        if not calls:
            reading = read_converter(_schema(trial))
            if not reading.uses:
                return f"the model did not use convert_currency: {reading.why_not}"
            if code in reading.excluded:
                return (f"the model did not call convert_currency for {name}: your description excepts them, and the "
                        "model does what it says")
            return (f"the model did not call convert_currency for {name}: it answered {trial.final_text!r} "
                    "(an 'only' in the currency's description limits the tool to the currencies it names)")
        args = calls[0]
        result = next((content for tname, status, content in trial.tool_results if tname == "convert_currency"), "")
        status = next((status for tname, status, _ in trial.tool_results if tname == "convert_currency"), "ok")
        said_amounts = [v for v, c in amounts(result) if c == code]
        right = status == "ok" and any(same(v, expected, close) for v in said_amounts)
        if not right and args.get("currency") not in RATES:
            reading = read_converter(_schema(trial))
            if reading.codes and reading.form:
                return (f"the model passed currency={args.get('currency')!r}, a code in {reading.form} as your "
                        "docstring says; the codes in RATES are three capital letters, such as 'EUR'")
            said = ("its description tells the model not to pass a code" if not reading.codes and
                    "code" in _schema(trial).get("parameters", {}).get("properties", {})
                    .get("currency", {}).get("description", "").lower() else "the docstring does not say what to pass")
            return (f"the model passed currency={args.get('currency')!r}, not a currency code: {said}; describe "
                    "the argument in an Args: section (currency: a three-letter ISO code such as 'EUR')")
        if status != "ok":
            return f"the model called convert_currency({_args(args)}) and your tool failed: {result}"
        if not right and read_converter(_schema(trial)).cents:
            return (f"the model passed amount={args.get('amount')!r}, in cents as your docstring says; the question "
                    f"is {amount:g} US dollars (describe amount as US dollars)")
        if not right:
            if any(same(v, expected, close) for v in numbers(result)):
                return (f"your tool answered {result!r} for convert_currency({_args(args)}): the number is right, "
                        f"but it does not say which currency (return e.g. '{expected:.2f} {code}')")
            return (f"the model called convert_currency({_args(args)}) and your tool answered {result!r}: "
                    f"{args.get('amount'):g} US dollars are {expected:,.2f} {code} (1 US dollar is RATES[{code!r}] "
                    f"= {RATES[code]:g} {code})")
        if not any(same(v, expected, close) and c == code for v, c in amounts(trial.final_text)):
            return f"the model answered {trial.final_text!r}, which does not say {expected:,.2f} {code}"
        return None

    return why


def _args(args: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in args.items())


def _money(rng: random.Random) -> float:
    return float(rng.choice([rng.randrange(12, 480), rng.randrange(1200, 48000) / 100]))


def _no_rate(amount: float, code: str, name: str) -> Any:
    """A currency RATES has no rate for: the tool must fail (raise, or say it cannot), not answer."""
    def why(trial: Trial) -> str | None:
        calls = [args for name_, args in trial.calls if name_ == "convert_currency"]
        if not calls:
            return None  # the model saw from the docstring that the tool cannot: it said so
        result, status = next(((content, status) for tname, status, content in trial.tool_results
                               if tname == "convert_currency"), ("", "ok"))
        if status == "ok" and numbers(result):
            return (f"asked for {name}, which RATES has no rate for, your tool answered {result!r} for "
                    f"convert_currency({_args(calls[0])}): let it fail (raise, or say it cannot) so the model does not "
                    "give a wrong amount")
        return None
    return why


def _docstring_scenarios(rng: random.Random) -> list[Scenario]:
    def scenario(name: str, query: str, amount: float, code: str, variant: bool = False) -> Scenario:
        expected = round(amount * RATES[code], 2)
        return Scenario(name, query, model=docstring_reader, variant=variant,
                        describe=f"{query} (expects {expected:,.2f} {code})",
                        expect=[judged(_converted(amount, code), "converts")])

    a, b, c, d = _money(rng), float(rng.randrange(5, 90)), _money(rng), float(rng.randrange(20, 400))
    variant = rng.choice([f"I have ${c:g}. What is that in British pounds?",
                          f"How many pounds sterling do {c:g} USD buy?"])
    return [scenario("euros", f"How much is {a:g} US dollars in euros?", a, "EUR"),
            scenario("yen", f"Convert {b:g} dollars to yen, please.", b, "JPY"),
            scenario("pounds, asked another way", variant, c, "GBP", variant=True),
            Scenario("a currency without a rate", f"How much is {d:g} US dollars in Swiss francs?", model=docstring_reader,
                     describe=f"RATES has no Swiss francs: expects the tool to fail, not to answer",
                     expect=[judged(_no_rate(d, "CHF", "Swiss francs"), "fails")])]


TOOL_DOCSTRING = Exercise(
    name="tool_docstring", title="Write a tool whose docstring the model can use", kind="tool",
    asks_for="a tool convert_currency(amount, currency)", tool_name="convert_currency",
    tool_arguments=("amount", "currency"), minutes=10,
    instructions="""
A model never sees your code: it sees the tool's **name, description and argument descriptions**,
which `@tool` builds from the signature and the docstring. Write `convert_currency(amount: float,
currency: str)` that converts US dollars with the rates in `RATES` (`{'EUR': 0.92, 'GBP': 0.79,
'JPY': 151.0}`) and says which currency its result is in, and a docstring that tells the model what the
tool does and what to pass as `currency`.

**What the model here reads.** Only the schema, sentence by sentence: it uses the tool when the
description says (not negated) that it converts money from US dollars to another currency; it passes
`currency` as a three-letter code only when that argument's description says so (an example such as
'EUR' counts); it understands *not*, *never* and *only*, and nothing it is not told. A real model reads
more generously, and guesses where this one does not. It uses a tool only when the description says
plainly what it does: not under a condition (*only when the amount is big*, *on Tuesdays*), for other
dollars, of the past or broken; an exception it can read (*except yen*) it keeps; and it passes the
arguments as their descriptions say (a code in lower case, an amount in cents). The amounts change at
every check, one question asks for a currency `RATES` does not have (the tool must then fail, not
answer), and one is asked in a way these instructions do not show.
""",
    hints=["Print `tool(convert_currency).schema()` to see exactly what the model sees.",
           "The first line of the docstring becomes the description; say it converts US dollars to another "
           "currency.",
           "Add an `Args:` section: `currency: a three-letter ISO 4217 code such as 'EUR'.`"],
    starter='''from agio_notebook.exercises import RATES, check, exercise

def convert_currency(amount: float, currency: str) -> str:
    # write a docstring the model can use
    return f"{amount * RATES[currency]:.2f} {currency}"

check(exercise("tool_docstring"), convert_currency)''',
    scenarios=_docstring_scenarios, preflight=takes_arguments(("amount", "currency")))


# read-only: a tool that adds misspellings to it would change what every later check expects
WEATHER: Mapping[str, str] = MappingProxyType({"Paris": "18°C and sunny", "Tokyo": "22°C with rain",
                                              "Oslo": "6°C and windy", "Lima": "20°C, cloudy"})
ELSEWHERE = ["Cairo", "Quito", "Perth", "Nairobi", "Hanoi", "Dublin", "Santiago", "Montreal"]


def _close_names(content: str, asked: str) -> list[str]:
    """The words of ``content`` that look like the city asked for, as the content spells them."""
    seen = []
    for w in re.findall(r"[A-Za-zÀ-ÿ]+", content):
        if w.lower() != asked.lower() and w not in seen and len(w) > 2:
            seen.append(w)
    by_lower = {w.lower(): w for w in seen}
    close = difflib.get_close_matches(asked.lower(), list(by_lower), n=1, cutoff=0.6)
    return [by_lower[c] for c in close]


def _is_weather(content: str) -> bool:
    return bool(temperatures(content))


def recovering_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    """Asks for the city as the user spelt it. When the tool's answer is not a weather report (an error,
    or a message) and names a city that looks like the one asked for, it asks again once with that
    name, as the answer spells it; else it answers with what it got."""
    asked = re.search(r"in ([A-Za-z]+)", last_user(messages))
    city = asked.group(1) if asked else ""
    results = tool_results(messages)
    if not results:
        return Reply.call("city_weather", city=city)
    content = results[-1]
    called = last_call(messages).get("city", city)
    if _is_weather(content) and not is_error(content):
        return f"The weather in {called}: {content}"
    close = _close_names(content, city)
    if len(results) >= 2 or not close:
        return f"I could not get the weather for {city}: {content}"
    return Reply.call("city_weather", city=close[0])


def _temperature_of(city: str) -> tuple[float, str]:
    return temperatures(WEATHER[city])[0]


def _recovered(asked: str, real: str) -> Any:
    want = _temperature_of(real)

    def why(trial: Trial) -> str | None:
        results = trial.tool_results
        if not results:
            return "the model never called city_weather"
        first_status, first = results[0][1], results[0][2]
        if "mappingproxy" in first:
            return (f"city_weather({asked!r}) tried to add to WEATHER, which is read-only: leave it as it is, and "
                    "raise an error that names the cities you know")
        if asked != real and first_status == "ok" and _is_weather(first):
            return (f"city_weather({asked!r}) returned {first!r}, a weather report for a city your tool does not "
                    f"know: raise an error that names the cities you know, so the model asks again as {real!r}")
        if first_status == "ok" and asked == real and first != WEATHER[real]:
            return (f"city_weather({asked!r}) returned {first!r}, not WEATHER[{real!r}] ({WEATHER[real]!r}): return "
                    "the string WEATHER[city]")
        said = temperatures(trial.final_text)
        if want in said and all(t == want for t in said):
            return None
        if asked == real:
            if first_status != "ok":
                return f"city_weather({asked!r}) failed for a city you know: {first}"
            return f"city_weather({asked!r}) returned {first!r}, not the weather of {real} ({WEATHER[real]!r})"
        if first_status == "ok" and _is_weather(first):
            return (f"city_weather({asked!r}) returned {first!r}, a weather report for a city you do not know: "
                    f"the model took it as the weather of {asked}")
        if len(results) == 1:
            if first_status == "ok":
                return (f"city_weather({asked!r}) returned {first!r}, which the model took as the answer: it names "
                        f"no city like {asked!r}. Raise an error that names the cities you know")
            return (f"the error the model saw, {first!r}, gives it nothing to correct the spelling with: name the "
                    "cities you know in the error message")
        retried = trial.calls[1][1].get("city")
        second_status, second = results[1][1], results[1][2]
        if retried != real:
            return (f"your message led the model to retry with {retried!r}, not {real!r}: name the cities you know, "
                    "spelt as your tool accepts them")
        if second_status != "ok":
            return f"the model retried with {retried!r}, as your message spells it, and your tool failed: {second}"
        return f"the model retried with {real!r} and answered {trial.final_text!r}, without {WEATHER[real]!r}"

    return why


def _said_to_be(content: str, asked: str) -> str | None:
    """A known city the message says the asked one is ("'Perth' is Lima"): named in a clause with it, not
    denied ("Perth is not Lima" says nothing of the kind)."""
    for m in re.finditer(rf"\b{re.escape(asked)}\b", content, re.IGNORECASE):
        clause = clause_at(content, m.start(), m.end())
        known = [c for c in WEATHER if has_word(clause, c)]
        if known and not negated_at(content, m.start(), m.end()):
            return known[0]
    return None


def _says_what_works(asked: str) -> Any:
    def why(trial: Trial) -> str | None:
        results = trial.tool_results
        if not results:
            return "the model never called city_weather"
        content = results[0][2]
        if _is_weather(content):
            return (f"city_weather({asked!r}) returned {content!r}: weather for a city your tool does not know. Raise "
                    "an error instead")
        if temperatures(trial.final_text):
            return f"the model answered {trial.final_text!r}, a temperature for a city your tool does not know"
        claimed = _said_to_be(content, asked)
        if claimed:
            return (f"city_weather({asked!r}) said {content!r}, which tells the model {asked} is {claimed}: say you "
                    f"do not know {asked}, and name the cities you know")
        missing = [c for c in WEATHER if not has_word(content, c)]
        if missing:
            return (f"city_weather({asked!r}) said {content!r}: the model could not tell the user which cities "
                    f"would work (not named: {', '.join(missing)}). Name the cities you know")
        return None
    return why


def _misspell(city: str, rng: random.Random) -> str:
    kinds = [lambda c, i: c[:i] + c[i] + c[i:],  # a doubled letter
             lambda c, i: c[:i] + c[i + 1:],  # a dropped letter
             lambda c, i: c[:i] + c[i + 1] + c[i] + c[i + 2:] if i + 2 <= len(c) else c + "a"]  # swapped
    for _ in range(20):
        i = rng.randrange(1, len(city) - 1)
        made = rng.choice(kinds)(city, i)
        if made != city and made.lower() != city.lower() and made not in WEATHER:
            return made
    return city + city[-1]


def _weather_scenarios(rng: random.Random) -> list[Scenario]:
    cities = rng.sample(list(WEATHER), 3)
    unknown = rng.choice(ELSEWHERE)

    def scenario(name: str, asked: str, real: str | None, variant: bool = False) -> Scenario:
        if real is None:
            return Scenario(name, f"What's the weather in {asked}?", model=recovering_model, variant=variant,
                            describe=f"the user asks for {asked!r}, a city the tool does not know (expects an error "
                                     "that names the cities it knows, and no weather)",
                            expect=[judged(_says_what_works(asked), "says what works")])
        return Scenario(name, f"What's the weather in {asked}?", model=recovering_model, variant=variant,
                        describe=f"the user asks for {asked!r} (expects {WEATHER[real]})",
                        expect=[judged(_recovered(asked, real), "answer")])

    return [scenario("known city", cities[0], cities[0]),
            scenario("misspelt", _misspell(cities[1], rng), cities[1]),
            scenario("misspelt again", _misspell(cities[2], rng).lower(), cities[2], variant=True),
            scenario("a city it does not know", unknown, None, variant=True)]


TOOL_ERRORS = Exercise(
    name="tool_errors", title="Make a tool's errors help the model recover", kind="tool",
    asks_for="a tool city_weather(city)", tool_name="city_weather", tool_arguments=("city",), minutes=10,
    instructions="""
Every exception a tool raises becomes a tool result the model reads (`Error (exception): ...`).
Write `city_weather(city: str)` that returns `WEATHER[city]` for a city it knows (`WEATHER` has Paris,
Tokyo, Oslo and Lima), and raises an error the model can act on when it does not: users misspell
cities, and ask for cities you do not have (then the model can only tell the user what your error
says). A misspelt name is a city you do not know: say so rather than answering for the city you guess,
so the model asks again with the name you give (`WEATHER` is read-only).

**What the model here reads.** The text of the tool's result. When it is not a weather report and
names a city that looks like the one asked for, the model asks once more with that name, spelt as your
message spells it; otherwise it answers with what it got. Misspellings and cities change at every
check.
""",
    hints=["Returning a string like 'unknown' is not an error: the model takes it as the answer.",
           "`KeyError: 'Pariss'` tells the model nothing new. What would you want to read?",
           "Raise `ValueError(f\"unknown city {city!r}; I know {', '.join(WEATHER)}\")`."],
    starter='''from agio_notebook.exercises import WEATHER, check, exercise

def city_weather(city: str) -> str:
    """Today's weather in a city."""
    return WEATHER[city]  # make the error help the model

check(exercise("tool_errors"), city_weather)''',
    scenarios=_weather_scenarios, preflight=takes_arguments(("city",)))
