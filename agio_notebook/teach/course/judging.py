"""Exercises on judging runs: write a scorer, and make an agent pass an evaluation."""

from __future__ import annotations

import operator
import random
import re
from dataclasses import dataclass
from typing import Any

from ...models import FunctionModel, Reply, ScriptedModel
from ...tools import Tool, tool
from ..exercise import Exercise, Scenario, Trial, judged
from ..reading import parts, read, scope_of
from ..values import numbers, parse_number, same
from .messages import last_user, system_text, tool_results
from .plain import condition, stance
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
    return str(int(round(value))) if abs(value - round(value)) < 1e-9 else f"{value:.6g}"


@tool
def weather(city: str) -> str:
    """Today's weather in a city."""
    return WEATHER[city]


# -- write_scorer ------------------------------------------------------------------------------------------

_CITIES = ["Paris", "Tokyo", "Oslo", "Lima", "Cairo", "Quito", "Perth", "Dublin", "Hanoi", "Nairobi"]
_SKIES = ["sunny", "cloudy", "windy", "with rain", "foggy"]


def _weather_tool(table: dict[str, str]) -> Tool:
    def weather(city: str) -> str:  # noqa: F811 - the recorded run's own weather, as the learner's scorer reads it
        """Today's weather in a city."""
        return table[city]
    return tool(weather)


def _recorded(name: str, city: str, report: str | None, answer: str, expected: float, describe: str,
              variant: bool = False) -> Scenario:
    """A recorded run (a scripted model and a weather tool) that a right scorer gives ``expected``."""
    script: list[Any] = [answer] if report is None else [Reply.call("weather", city=city), answer]
    table = {} if report is None or report == "FAILS" else {city: report}

    def why(trial: Trial) -> str | None:
        value = trial.value
        if isinstance(value, (str, bytes)) or not hasattr(value, "__float__"):
            return f"your scorer returned {value!r} ({type(value).__name__}); return a number or a bool"
        value = float(value)  # a bool, an int, a NumPy number
        if not 0.0 <= float(value) <= 1.0:
            return f"your scorer returned {value!r}: a score is between 0 and 1"
        if float(value) != expected:
            return f"your scorer gave {float(value):g} to a run that should score {expected:g}: {describe}"
        return None

    return Scenario(name, f"What's the weather in {city}?", model=ScriptedModel(script),
                    tools=[_weather_tool(table)], describe=describe, variant=variant,
                    expect=[judged(why, f"scores {expected:g}")])


def _scorer_scenarios(rng: random.Random) -> list[Scenario]:
    cities = rng.sample(_CITIES, 10)
    sky = rng.choice(_SKIES)
    t1, t2, t4 = rng.randrange(11, 30), rng.randrange(11, 30), rng.randrange(4, 25)
    digit = rng.randrange(2, 9)  # a one-digit temperature whose digit is in the wrong answer's
    t5, t6 = rng.randrange(3, 12), rng.randrange(5, 15)
    low, high, t7, t8, wind = rng.randrange(2, 12), rng.randrange(14, 28), rng.randrange(8, 30), rng.randrange(5, 25), \
        rng.randrange(31, 60)
    spaced = f"It's {t4} °C in {cities[3]} right now."  # the form the instructions name
    if rng.random() < 0.5:
        last = _recorded("another number", cities[5], f"{t6}°C, {sky}",
                         f"{t6} people asked today; it is {t6 + 6}°C and {sky} in {cities[5]}.", 0.0,
                         f"weather said {t6}°C; the answer has {t6} only as a count of people and says {t6 + 6}°C",
                         variant=True)
    else:
        last = _recorded("the tool failed", cities[5], "FAILS", f"It is {t6 + 10}°C in {cities[5]}.", 0.0,
                         "weather failed (no report), and the agent answered with a temperature anyway", variant=True)
    two = f"{low}°C at dawn, {high}°C by noon, {sky}"
    decoys = [
        _recorded("two temperatures", cities[6], two, f"From {low}°C at dawn to {high}°C by noon in {cities[6]}.", 1.0,
                  f"weather said {low}°C and {high}°C, and the answer says both"),
        _recorded("one of two temperatures wrong", cities[7], two,
                  f"{low}°C at dawn, then {high + 4}°C by noon in {cities[7]}.", 0.0,
                  f"weather said {low}°C and {high}°C; the answer says {low}°C but also {high + 4}°C: every temperature "
                  "it states must be one the tool said"),
        _recorded("Fahrenheit", cities[8], f"{t7}°C and {sky}", f"It is {t7}°F and {sky} in {cities[8]}.", 0.0,
                  f"weather said {t7}°C; the answer says {t7}°F, another temperature (the unit is part of it)"),
        _recorded("a number without a unit", cities[9], f"{t8}°C, wind {wind} km/h",
                  f"It is {t8 + 5}°C in {cities[9]}, wind {wind} km/h.", 0.0,
                  f"weather said {t8}°C but the agent answered {t8 + 5}°C ({wind} is the wind, not a temperature)"),
    ]
    return [
        _recorded("good answer", cities[0], f"{t1}°C and {sky}", f"It is {t1}°C and {sky} in {cities[0]}.", 1.0,
                  f"it called weather ({t1}°C) and said {t1}°C"),
        _recorded("a guess", cities[1], None, f"It is {t2}°C in {cities[1]}, I think.", 0.0,
                  f"the agent answered without calling weather, so its {t2}°C is a guess"),
        _recorded("wrong number", cities[2], f"{digit}°C and {sky}",
                  f"At {digit} pm it was {digit + 10}°C and {sky} in {cities[2]}.", 0.0,
                  f"weather said {digit}°C but the agent answered {digit + 10}°C ({digit} is the hour)"),
        _recorded("written differently", cities[3], f"{t4}°C and {sky}", spaced, 1.0,
                  f"it called weather ({t4}°C) and said the same temperature in other words"),
        _recorded("a sign dropped", cities[4], f"-{t5}°C and snowing", f"It is {t5}°C and snowing in {cities[4]}.",
                  0.0, f"weather said -{t5}°C but the agent answered {t5}°C"),
        *decoys,
        last,
    ]


WRITE_SCORER = Exercise(
    name="write_scorer", title="Write a scorer", kind="scorer", asks_for="a scorer fn(run) returning 0..1",
    minutes=15,
    instructions="""
A scorer is a function of a finished run (`run.final_text`, `run.steps`, `run.tool_path`) that
returns a number. Write one that gives **1.0** only when the agent called `weather` and the temperature
its answer states is the one the tool returned, and **0.0** otherwise: a right-looking guess without the
tool, a temperature the tool did not say, or an answer after the tool failed must score 0. Compare
temperatures as numbers with their unit: `6°C` is not `16°C`, and `It's 14 °C` says the same as `14°C`.
An answer may state two temperatures (each must be one the tool said), a temperature in °F, or numbers
that are not temperatures. It is checked on recorded runs whose cities and temperatures change at every
check, one of a kind these instructions do not show.
""",
    hints=["`run.tool_path` lists the tools called; the tool's result is the content of a step with role 'tool' "
           "(its `status` is 'ok' when the tool worked).",
           "`re.findall(r'(-?\\d+(?:\\.\\d+)?)\\s*(?:°\\s*C|degrees? Celsius)', text)` finds temperatures with "
           "their unit; `float()` makes them numbers.",
           "Score 1.0 only when weather returned temperatures and every temperature the answer states is one of "
           "them (as numbers, not as text: '6' in '16°C' is True)."],
    starter='''import re
from agio_notebook import StepRole
from agio_notebook.exercises import check, exercise

def repeats_the_tool(run):
    return 1.0 if re.search(r"\\d+°C", run.final_text) else 0.0  # not enough: a guess scores too

check(exercise("write_scorer"), repeats_the_tool)''',
    scenarios=_scorer_scenarios)


# -- pass_evaluation -----------------------------------------------------------------------------------------

_PROMPT = {
    "calculator": ["calculator", "calculator tool", "the tool", "your tool", "tools", "a tool", "calc"],
    "use": ["use", "uses", "using", "call", "calls", "invoke", "run", "compute", "calculate", "rely", "employ",
            "apply", "ask", "check", "verify", "work", "multiply", "consult", "always", "through", "via", "with"],
    "number": ["the number", "number", "numbers", "numeral", "digits", "the result", "result", "the product",
               "product", "the answer", "value", "figure", "integer"],
    "words": ["words", "word", "text", "explanation", "explanations", "explain", "sentence", "sentences", "prose",
              "commentary", "comments", "comment", "anything else", "other text", "units", "reasoning", "elaborate",
              "chat", "chatter", "preamble", "introduction", "working", "steps", "punctuation", "extra", "more",
              "unit", "how you got"],
    "extra": ["spelled out", "spell out", "spell it out", "spelled", "written out", "in words", "in letters",
              "round", "rounded", "rounding", "nearest", "approximately", "approximate", "roughly", "estimate",
              "estimated", "percent", "percentage", "scientific notation", "roman numerals", "in hex", "binary"],
}
_TOPIC = {"multiplication", "multiplications", "multiply", "multiplying", "product", "products", "arithmetic",
          "math", "maths", "calculation", "calculations", "computation", "computations", "number", "numbers",
          "question", "questions", "task", "tasks", "problem", "problems", "exercise", "evaluation", "job",
          "operation", "operations", "request", "requests", "input", "inputs", "row", "rows", "case", "cases",
          "answer", "answers", "result", "results", "figure", "figures", "digit", "digits", "value", "values",
          "query", "queries", "computing", "calculating", "exact", "exactly", "accurate", "accuracy", "correct",
          "precise", "precision", "get", "sure", "make", "times", "everything", "calculator", "tool", "tools"}


@dataclass
class PromptReading:
    """What ``literal_model`` understood of a system prompt: use the calculator? reply with the number
    alone? and, when not, the sentence (or its absence) that says why."""

    calculator: bool
    calculator_why: str
    number_only: bool
    format_why: str


def read_prompt(prompt: str) -> PromptReading:
    """The last instruction about the calculator and the last about the reply's form win."""
    calc: bool | None = None
    calc_why = "your prompt does not tell the model to use the calculator"
    form: bool | None = None
    form_why = ("your prompt does not say that the reply is the number alone (e.g. 'Reply with only the number'; "
                "'Be concise' does not say it)")
    # "Don't use the calculator for additions; use it for products": "it" is the calculator named before it
    prompt = re.sub(r"(calculator\b[^.!?\n]*?\b(?:use|call|invoke|run|try|ask))\s+(?:it|that)\b", r"\1 the calculator",
                    prompt or "", flags=re.I)
    for s in read(prompt, _PROMPT):
        limit = condition(s, topic=_TOPIC)
        for part in parts(s):
            tool_said, number, wordy = part.said("calculator"), part.said("number"), part.said("words")
            reservation = stance(part.tokens, s.text)
            if reservation is not None and reservation.kind == "wrong":  # "it is wrong to ...": not to be done
                tool_said = None if tool_said is None else not tool_said
                number = None if number is None else not number
                wordy = None if wordy is None else not wordy
            elif reservation is not None or limit is not None:
                why = (reservation or limit).describe()
                if tool_said and reservation is None:
                    calc, calc_why = False, (f"your prompt limits the calculator to some questions ({s.text!r}: "
                                             f"{why})")
                elif tool_said:
                    calc, calc_why = False, (f"your prompt's sentence about the calculator ({s.text!r}) is {why}: "
                                             "the model only follows a plain instruction to itself, now")
                if number or wordy:
                    form, form_why = False, (f"your prompt's sentence about the reply ({s.text!r}) is {why}: the model "
                                             "only follows a plain instruction")
                continue
            if tool_said is not None and not (part.said("use") is None and tool_said):
                scope = scope_of(part, topic=_TOPIC, cases=())
                if not tool_said:
                    calc, calc_why = False, f"your prompt tells the model not to use the calculator ({s.text!r})"
                elif scope.kind != "all":
                    calc, calc_why = False, (f"your prompt limits the calculator to some questions ({s.text!r}), and "
                                             "the model cannot tell whether this question is one")
                else:
                    calc = True
            extra = part.said("extra")
            if extra:
                form, form_why = False, (f"your prompt asks the model to change the number ({s.text!r}): the "
                                         "evaluation wants the exact number, as digits")
            elif number and part.exclusive:
                form = True
            elif wordy is False:
                form = True
            elif wordy or number is False:
                form, form_why = False, f"your prompt asks for more than the number ({s.text!r})"
    return PromptReading(bool(calc), calc_why, bool(form), form_why)


def literal_model() -> FunctionModel:
    """The model of the evaluation exercise. It reads its system prompt sentence by sentence (see
    :func:`read_prompt`): it uses the calculator when a sentence tells it to, for every question (and the
    agent has it), else it estimates to the nearest ten; it replies with the number alone when a sentence
    says so ("only the number", "just the number, nothing else", "no words"), else in a sentence. It
    understands "not", "never" and limits ("for additions only"); nothing else."""
    def literal(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        reading = read_prompt(system_text(messages))
        results = tool_results(messages)
        if results:
            value = results[-1]
            if value.startswith("Error"):
                return f"The calculator failed: {value}"
        else:
            found = numbers(last_user(messages))[:2]
            a, b = (found + [0.0, 0.0])[:2]
            if reading.calculator and any(t["function"]["name"] == "calculator" for t in tools):
                return Reply.call("calculator", expression=f"{a:g} * {b:g}")
            value = f"{round(a * b, -1):.0f}"
        return value if reading.number_only else f"The answer is {value}."

    return FunctionModel(literal, name="literal")


def _why_row(a: int, b: int) -> Any:
    expected = a * b

    def why(trial: Trial) -> str | None:
        got = parse_number(trial.final_text)
        if got is not None and same(got, expected):
            return None
        agent = trial.context["solution"]
        reading = read_prompt(agent.system_prompt or "")
        said = f"expected exactly {expected}, got {trial.final_text!r}"
        if "calculator" not in trial.tool_path:
            if "calculator" not in agent.registry.names():
                return said + ": the agent has no calculator; add calculator to tools= (the model estimated)"
            return f"{said}: the model estimated, because {reading.calculator_why}"
        if not reading.number_only:
            return f"{said}: {reading.format_why}"
        return said
    return why


def _is_literal(agent: Any) -> str | None:
    model = getattr(agent, "model", None)
    if not (isinstance(model, FunctionModel) and model.name == "literal"):
        return (f"your agent's model is {getattr(model, 'name', type(model).__name__)!r}, not literal_model(): the "
                "exercise is about the tools and the prompt you give that model (Agent(model=literal_model(), ...))")
    return None


def _rows(rng: random.Random) -> list[Scenario]:
    rows = []
    for i in range(1, 21):
        a, b = rng.randrange(11, 99), rng.randrange(11, 99)
        rows.append(Scenario(f"row {i}", f"What is {a} × {b}?", describe=f"{a} × {b} = {a * b}",
                             expect=[judged(_why_row(a, b), "the exact number")]))
    a, b = rng.randrange(101, 999), rng.randrange(11, 99)
    query = rng.choice([f"Multiply {a} by {b}.", f"What do you get when you multiply {a} and {b}?"])
    rows.append(Scenario("asked another way", query, variant=True, describe=f"{query} = {a * b}",
                         expect=[judged(_why_row(a, b), "the exact number")]))
    return rows


PASS_EVALUATION = Exercise(
    name="pass_evaluation", title="Make an agent pass an evaluation", kind="agent", asks_for="an Agent",
    minutes=15, preflight=_is_literal,
    instructions="""
An evaluation runs an agent on many inputs and scores each answer. Here, 20 multiplications (new ones at
every check, and one asked in other words) are scored exactly: the answer must be the number alone.
Build an `Agent` on `literal_model()` with the tools and the system prompt that make every row pass.

**What the model here reads.** Its system prompt, one sentence at a time, as instructions of two kinds:
whether to use the `calculator` (a sentence telling it to, for every question; it must also be in
`tools=`), and what the reply looks like (the number alone, said in any words: *only the number*, *just
the number, nothing else*, *no words*). It understands *not*, *never* and limits (*for additions only*,
*when the numbers are big*, *unless ...*, *except ...*, *on Mondays*: it cannot tell when those hold, so
it does not apply them); it follows only a plain instruction to itself, now (not *you used to*, *you
would*, *another assistant will*), and what it is told to do to the number (round it, spell it out,
explain it) it does. Anything else it ignores; without the calculator it estimates to the nearest ten. A real model reads far more, and
follows less exactly.
""",
    hints=["Run one row yourself and read the transcript: what does the model answer?",
           "The model only uses a tool the agent has and the prompt tells it to use: add `calculator` to `tools=`.",
           "The prompt must also say that the reply is the number and nothing else."],
    starter='''from agio_notebook import Agent
from agio_notebook.exercises import calculator, check, exercise, literal_model

agent = Agent(model=literal_model(), tools=[], system_prompt="You are good at arithmetic.")
check(exercise("pass_evaluation"), agent)''',
    scenarios=_rows)

