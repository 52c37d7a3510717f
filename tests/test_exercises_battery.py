"""Every exercise against a battery, as a mutation test: plausible wrong solutions of different classes
(hard-coded values, keyword and substring tricks, ignoring the tool, negated or scoped prose, off by
one, stopping too early or never, the wrong output type, hanging) each fail with the reason a learner
needs, and right solutions written unlike the reference pass, as the reference does, at any seed."""

from __future__ import annotations

import asyncio
import difflib
import re
import time

import pytest

from agio_notebook import Agent, ExecutionConfig, FunctionModel, OpenAIModel, Reply, ScriptedModel, StepRole, StepRunner, memory, tool
from agio_notebook.exercises import EXERCISES, RATES, WEATHER, calculator, check, literal_model
from agio_notebook.teach import TUTORIALS
from agio_notebook.teach.guard import DEFAULT_CAP
from agio_notebook.teach.solutions import reference

SEEDS = (11, 4242)  # every wrong solution must fail at each of them (the variants catch hard-coding at any)


@pytest.fixture(autouse=True)
def own_store(tmp_path, monkeypatch):
    monkeypatch.setenv("AGIO_STORE", str(tmp_path / "store"))


def nums(text):
    return [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", text or "")]


# -- tool_docstring ------------------------------------------------------------------------------------------

def _converter(doc, body=None):
    def convert_currency(amount: float, currency: str) -> str:
        return body(amount, currency) if body else f"{amount * RATES[currency]:.2f} {currency}"
    convert_currency.__doc__ = doc
    return convert_currency


GOOD_DOC = """Convert an amount of US dollars to another currency.

    Args:
        amount: how many US dollars.
        currency: a three-letter ISO code such as 'EUR'.
    """


def dollars_and_currency(dollars: float, currency: str) -> str:
    """Convert US dollars to another currency.

    Args:
        dollars: how many US dollars.
        currency: a three-letter ISO code such as 'EUR'.
    """
    return f"{dollars * RATES[currency]:.2f} {currency}"


@tool(name="to_currency")
def exchange(amount: float, currency: str) -> str:
    """Exchange a sum of money from USD into another currency; the result says which one.

    Args:
        amount: the sum, in US dollars.
        currency: the ISO 4217 code of the currency you want, e.g. 'GBP' or 'JPY'.
    """
    return f"{currency} {amount * RATES[currency]:,.2f}"


def convert_numpy(amount: float, currency: str) -> str:
    """Converts dollars into euros, pounds or yen.

    Parameters
    ----------
    amount
        The number of dollars.
    currency
        Which currency to convert to, as its code (EUR, GBP or JPY).
    """
    return f"{round(amount * RATES[currency], 2)} {currency}"


# -- function_model ---------------------------------------------------------------------------------------------

def _question_numbers(messages):
    question = next(m["content"] for m in messages if m["role"] == "user")
    return [int(n) for n in re.findall(r"-?\d+", question)[:2]]


def fm_answers_at_once(messages, tools):
    return "5"


def fm_never_answers(messages, tools):
    a, b = _question_numbers(messages)
    return Reply.call("add", a=a, b=b)


def fm_zero_args(messages, tools):
    if messages[-1]["role"] == "tool":
        a, b = _question_numbers(messages)
        return f"The sum is {a + b}."
    return Reply.call("add", a=0, b=0)


def fm_own_sum(messages, tools):
    a, b = _question_numbers(messages)
    if messages[-1]["role"] == "tool":
        return f"The sum is {a + b}."
    return Reply.call("add", a=a, b=b)


def fm_off_by_one(messages, tools):
    if messages[-1]["role"] == "tool":
        return f"The sum is {int(messages[-1]['content']) + 1}."
    a, b = _question_numbers(messages)
    return Reply.call("add", a=a, b=b)


def fm_hard_coded(messages, tools):
    if messages[-1]["role"] == "tool":
        return f"The sum is {messages[-1]['content']}."
    return Reply.call("add", a=2, b=3)


def fm_message_dict(messages, tools):
    if messages[-1]["role"] == "tool":
        return messages[-1]
    a, b = _question_numbers(messages)
    return Reply.call("add", a=a, b=b)


def fm_returns_int(messages, tools):
    if messages[-1]["role"] == "tool":
        return int(messages[-1]["content"])
    a, b = _question_numbers(messages)
    return Reply.call("add", a=a, b=b)


def fm_no_negatives(messages, tools):
    if messages[-1]["role"] == "tool":
        return f"The sum is {messages[-1]['content']}."
    a, b = (int(n) for n in re.findall(r"\d+", messages[-1]["content"])[:2])
    return Reply.call("add", a=a, b=b)


def fm_calls_twice(messages, tools):
    a, b = _question_numbers(messages)
    calls = sum(1 for m in messages if m["role"] == "tool")
    if calls >= 2:
        return f"The sum is {messages[-1]['content']}."
    return Reply.call("add", a=a, b=b)


def fm_hedges(messages, tools):
    if messages[-1]["role"] == "tool":
        r = int(messages[-1]["content"])
        return f"The sum is {r}, or maybe {r + 1}."
    a, b = _question_numbers(messages)
    return Reply.call("add", a=a, b=b)


def fm_negates(messages, tools):
    if messages[-1]["role"] == "tool":
        return f"The sum is not {messages[-1]['content']}."
    a, b = _question_numbers(messages)
    return Reply.call("add", a=a, b=b)


def fm_own_sum_beside(messages, tools):
    a, b = _question_numbers(messages)
    if messages[-1]["role"] == "tool":
        return f"{a} + {b} = {a + b}; the tool said {messages[-1]['content']}."
    return Reply.call("add", a=a, b=b)


def fm_loops_forever(messages, tools):
    while True:
        pass


async def fm_async(messages, tools):
    last = messages[-1]
    if last["role"] == "tool":
        a, b = _question_numbers(messages)
        return f"{a} + {b} = {last['content']}"
    a, b = map(int, re.findall(r"-?\d+", last["content"]))
    return Reply.call(tools[0]["function"]["name"], a=a, b=b)


def fm_terse(messages, tools):
    if messages[-1]["role"] == "tool":
        return messages[-1]["content"]
    numbers = re.findall(r"-?\d+", messages[-1]["content"])
    return Reply.call("add", a=int(numbers[0]), b=int(numbers[1]))


# -- edit_tool_call -----------------------------------------------------------------------------------------------

def st_only_continues(pause):
    pause.cont()


def st_skips(pause):
    if pause.kind.value == "tool":
        pause.skip(str(pause.arguments["a"] + pause.arguments["b"] + 1))


def st_edits_question(pause):
    if pause.kind.value == "model" and pause.index == 1:
        a, b = (int(n) for n in re.findall(r"-?\d+", pause.messages[-1]["content"]))
        pause.edit(messages=[*pause.messages[:-1], {"role": "user", "content": f"What is {a} + {b + 1}?"}])


def st_fixes_a(pause):
    if pause.kind.value == "tool":
        pause.edit(arguments={"a": pause.arguments["a"] + 1, "b": pause.arguments["b"]})


def st_wrong_direction(pause):
    if pause.kind.value == "tool":
        pause.edit(arguments={"a": pause.arguments["a"], "b": pause.arguments["b"] - 1})


def st_hard_coded(pause):
    if pause.kind.value == "tool":
        pause.edit(arguments={"a": 2, "b": 3})


def st_sends_text(pause):
    if pause.kind.value == "tool":
        pause.edit(arguments={"a": "two", "b": 3})


def st_aborts(pause):
    if pause.kind.value == "tool":
        pause.abort()


def st_asks_input(pause):
    if pause.kind.value == "tool":
        b = int(input("what should b be? "))
        pause.edit(arguments={"a": pause.arguments["a"], "b": b})


def st_sleeps(pause):
    time.sleep(60)


async def st_async_then_continue(pause):
    if pause.kind.value == "tool":
        fixed = dict(pause.arguments)
        fixed["b"] += 1
        pause.edit(arguments=fixed).cont()


def st_from_the_question(pause):
    if pause.kind.value == "model" and pause.index == 1:
        st_from_the_question.wanted = [int(n) for n in re.findall(r"-?\d+", pause.messages[-1]["content"])]
    if pause.kind.value == "tool":
        a, b = st_from_the_question.wanted
        pause.edit(arguments={"a": a, "b": b})


# -- stopping_rule --------------------------------------------------------------------------------------------------

def _pages(messages):
    return [m["content"] for m in messages if m["role"] == "tool"]


def sr_never_stops(messages, tools):
    return Reply.call("search", page=len(_pages(messages)) + 1)


def sr_gives_up_at_once(messages, tools):
    return "Not found." if _pages(messages) else Reply.call("search", page=1)


def sr_substring(messages, tools):
    pages = _pages(messages)
    if pages and "FOUND" in pages[-1]:
        return "Found it: " + pages[-1]
    if len(pages) >= 3:
        return "Not found."
    return Reply.call("search", page=len(pages) + 1)


def sr_always_two_pages(messages, tools):
    pages = _pages(messages)
    if len(pages) == 2:
        return "Found it: " + pages[-1].removeprefix("FOUND:")
    return Reply.call("search", page=len(pages) + 1)


def sr_hard_coded_time(messages, tools):
    pages = _pages(messages)
    if pages and pages[-1].startswith("FOUND:"):
        return "The meeting is at 3 pm."
    if len(pages) >= 3:
        return "Not found."
    return Reply.call("search", page=len(pages) + 1)


def sr_four_pages(messages, tools):
    pages = _pages(messages)
    if pages and pages[-1].startswith("FOUND:"):
        return pages[-1].removeprefix("FOUND:").strip()
    if len(pages) >= 4:
        return "Not found."
    return Reply.call("search", page=len(pages) + 1)


def sr_no_answer_text(messages, tools):
    pages = _pages(messages)
    if pages and pages[-1].startswith("FOUND:"):
        return "Found it!"
    if len(pages) >= 3:
        return "Not found."
    return Reply.call("search", page=len(pages) + 1)


def sr_from_zero(messages, tools):
    pages = _pages(messages)
    if pages and pages[-1].startswith("FOUND:"):
        return pages[-1].removeprefix("FOUND:").strip()
    if len(pages) >= 3:
        return "Not found."
    return Reply.call("search", page=len(pages))


def sr_negated_time(messages, tools):
    found = [p for p in _pages(messages) if p.startswith("FOUND:")]
    if found:
        return "The meeting is not at " + re.search(r"\d{1,2}(?::\d\d)? [ap]m", found[-1])[0] + "."
    if len(_pages(messages)) >= 3:
        return "Not found in the first 3 pages."
    return Reply.call("search", page=len(_pages(messages)) + 1)


def sr_reads_all_three(messages, tools):
    pages = _pages(messages)
    if len(pages) < 3:
        return Reply.call("search", page=len(pages) + 1)
    found = [p for p in pages if p.startswith("FOUND:")]
    return "Found it: " + found[0].removeprefix("FOUND:").strip() if found else "Not found in the first 3 pages."


def sr_sleeps(messages, tools):
    time.sleep(30)
    return "Not found."


async def sr_async(messages, tools):
    since_question = []
    for m in reversed(messages):
        if m["role"] == "user":
            break
        if m["role"] == "tool":
            since_question.insert(0, m["content"])
    if since_question and re.match(r"FOUND:\s*", since_question[-1]):
        return "The notes say " + re.sub(r"^FOUND:\s*", "", since_question[-1])
    if len(since_question) == 3:
        return "I could not find the meeting time in 3 pages."
    return Reply.call("search", page=len(since_question) + 1)


def sr_plain(messages, tools):
    pages = _pages(messages)
    if pages and pages[-1][:6] == "FOUND:":
        return pages[-1][6:].strip().capitalize()
    return Reply.call("search", page=len(pages) + 1) if len(pages) < 3 else "Sorry, that was not found."


# -- fork_compare_choose ----------------------------------------------------------------------------------------------

async def _branches(session_id, candidates, repository):
    return {name: await StepRunner(agent, repository=repository).fork(session_id, 1)
            for name, agent in candidates.items()}


def fc_original(session_id, candidates, repository):
    return repository.list_runs(session_id)[0].id


async def fc_first(session_id, candidates, repository):
    return next(iter((await _branches(session_id, candidates, repository)).values())).run_id


async def fc_longest(session_id, candidates, repository):
    return max((await _branches(session_id, candidates, repository)).values(), key=lambda r: len(r.final_text)).run_id


async def fc_shortest(session_id, candidates, repository):
    return min((await _branches(session_id, candidates, repository)).values(), key=lambda r: len(r.final_text)).run_id


async def fc_by_name(session_id, candidates, repository):
    result = await StepRunner(candidates["careful"], repository=repository).fork(session_id, 1)
    return result.run_id


async def fc_most_steps(session_id, candidates, repository):
    return max((await _branches(session_id, candidates, repository)).values(), key=lambda r: len(r.steps)).run_id


async def fc_used_a_tool(session_id, candidates, repository):
    branches = list((await _branches(session_id, candidates, repository)).values())
    used = [r for r in branches if any(s.role is StepRole.TOOL for s in r.steps)]
    return (used or branches)[0].run_id


async def fc_substring(session_id, candidates, repository):
    p, n = nums(repository.get_steps(session_id)[0].content)[:2]
    right = p * n / 100
    shown = str(int(right)) if right.is_integer() else str(right)
    branches = list((await _branches(session_id, candidates, repository)).values())
    return next((r for r in branches if shown in r.final_text), branches[0]).run_id


async def fc_returns_result(session_id, candidates, repository):
    p, n = nums(repository.get_steps(session_id)[0].content)[:2]
    branches = list((await _branches(session_id, candidates, repository)).values())
    return next(r for r in branches if p * n / 100 in nums(r.final_text))


async def fc_smallest_number(session_id, candidates, repository):
    branches = (await _branches(session_id, candidates, repository)).values()
    return min(branches, key=lambda r: (nums(r.final_text) or [1e9])[-1]).run_id


async def fc_one_number(session_id, candidates, repository):
    branches = list((await _branches(session_id, candidates, repository)).values())
    return next((r for r in branches if len(nums(r.final_text)) == 1), branches[0]).run_id


async def fc_agrees_with_its_tool(session_id, candidates, repository):
    branches = list((await _branches(session_id, candidates, repository)).values())
    for r in branches:
        said = [s.content for s in r.steps if s.role is StepRole.TOOL]
        if said and nums(said[-1])[0] in nums(r.final_text):
            return r.run_id
    return branches[0].run_id


def fc_forgets_await(session_id, candidates, repository):
    results = [StepRunner(agent, repository=repository).fork(session_id, 1) for agent in candidates.values()]
    return results[0].run_id


async def fc_only_one(session_id, candidates, repository):
    agent = next(iter(candidates.values()))
    return (await StepRunner(agent, repository=repository).fork(session_id, 1)).run_id


async def fc_no_fork(session_id, candidates, repository):
    question = repository.get_steps(session_id)[0].content
    p, n = nums(question)[:2]
    for agent in candidates.values():
        result = await StepRunner(agent, repository=repository).run(None, question)
        if p * n / 100 in nums(result.final_text):
            return result.run_id
    return result.run_id


async def fc_scored(session_id, candidates, repository):
    question = repository.get_steps(session_id, include_superseded=False)[0].content
    found = re.search(r"(\d+)% of (\d+)", question)
    right = int(found.group(1)) * int(found.group(2)) / 100

    def score(result):
        return max((1.0 - min(abs(x - right), 1.0) for x in nums(result.final_text)), default=0.0)

    scored = [(score(r), r.run_id) for r in (await _branches(session_id, candidates, repository)).values()]
    return max(scored)[1]


def fc_in_threads(session_id, candidates, repository):
    found = re.search(r"(\d+)% of (\d+)", repository.get_steps(session_id)[0].content)
    right = int(found.group(1)) * int(found.group(2)) / 100
    results = [asyncio.run(StepRunner(agent, repository=repository).fork(session_id, 1)) for agent in candidates.values()]
    return next(r.run_id for r in results if any(abs(x - right) < 1e-9 for x in nums(r.final_text)))


def _percent_of(repository, session_id):
    return [int(n) for n in re.findall(r"\d+", repository.get_steps(session_id)[0].content)[:2]]


async def fc_smaller_than_whole(session_id, candidates, repository):
    _, whole = _percent_of(repository, session_id)
    branches = list((await _branches(session_id, candidates, repository)).values())
    shaped = [b for b in branches if re.fullmatch(r"\d+% of \d+ is [\d.]+\.", b.final_text or "")
              and nums(b.final_text)[-1] < whole]
    return (shaped or branches)[0].run_id


async def fc_forks_twice(session_id, candidates, repository):
    p, n = _percent_of(repository, session_id)
    await _branches(session_id, candidates, repository)
    branches = (await _branches(session_id, candidates, repository)).values()
    return next(b.run_id for b in branches if p * n / 100 in nums(b.final_text))


async def fc_integer_division(session_id, candidates, repository):
    p, n = _percent_of(repository, session_id)
    branches = list((await _branches(session_id, candidates, repository)).values())
    return next((b.run_id for b in branches if p * n // 100 in nums(b.final_text)), branches[0].run_id)


async def fc_stops_and_empties(session_id, candidates, repository):
    p, n = _percent_of(repository, session_id)
    for agent in candidates.values():
        branch = await StepRunner(agent, repository=repository).fork(session_id, 1)
        if p * n / 100 in nums(branch.final_text):
            candidates.clear()  # the dict it was given, emptied: the check counts the candidates it handed out
            return branch.run_id
    return branch.run_id


# -- write_scorer ------------------------------------------------------------------------------------------------------

TEMP = re.compile(r"(-?\d+)\s*°C")


def _tool_text(run):
    return " ".join(s.content or "" for s in run.steps if s.role is StepRole.TOOL)


def ws_any_temperature(run):
    return 1.0 if re.search(r"\d+°C", run.final_text) else 0.0


def ws_called_the_tool(run):
    return 1.0 if "weather" in run.tool_path else 0.0


def ws_substring(run):
    said = re.findall(r"-?\d+°C", _tool_text(run))
    return float(bool(said) and all(t in run.final_text for t in said))


def ws_any_number(run):
    return float(bool(set(nums(run.final_text)) & set(nums(_tool_text(run)))))


def ws_any_word(run):
    words = set(re.findall(r"[a-z]+", run.final_text.lower()))
    tool_words = set(re.findall(r"[a-z]+", _tool_text(run).lower()))
    return float(bool(words & tool_words))


def ws_unsigned(run):
    known = re.findall(r"(\d+)\s*°C", _tool_text(run))
    said = re.findall(r"(\d+)\s*°C", run.final_text)
    return float(bool(known and said) and set(said) <= set(known))


def _celsius(pattern, text):
    return [float(t) for t in re.findall(pattern, text or "")]


def _weather_said(run):
    reports = [s.content or "" for s in run.steps if s.role is StepRole.TOOL and s.name == "weather" and s.status == "ok"]
    return reports[-1] if reports else ""


def ws_last_number(run):
    known, said = nums(_weather_said(run)), nums(run.final_text)
    return float(bool(known and said) and known[-1] == said[-1])


def ws_any_unit(run):
    pattern = r"(-?\d+(?:\.\d+)?)\s*(?:°\s*[CF]?|degrees?(?: \w+)?)"
    known, said = _celsius(pattern, _weather_said(run)), _celsius(pattern, run.final_text)
    return float(bool(known and said) and all(t in known for t in said))


def ws_any_of_them(run):
    pattern = r"(-?\d+(?:\.\d+)?)\s*(?:°\s*C|degrees? Celsius)"
    known, said = _celsius(pattern, _weather_said(run)), _celsius(pattern, run.final_text)
    return float(bool(known and said) and any(t in known for t in said))


def ws_no_space(run):
    pattern = r"(-?\d+(?:\.\d+)?)(?:°C| degrees? Celsius)"
    known, said = _celsius(pattern, _weather_said(run)), _celsius(pattern, run.final_text)
    return float(bool(known and said) and all(t in known for t in said))


def ws_returns_text(run):
    return "1.0" if TEMP.findall(run.final_text) else "0.0"


def ws_percent(run):
    known, said = TEMP.findall(_tool_text(run)), TEMP.findall(run.final_text)
    return 100 if known and said and set(said) <= set(known) else 0


def ws_crashes(run):
    return run.steps[5].content


def ws_hangs(run):
    while True:
        time.sleep(0.01)


def ws_sets(run):
    pattern = r"(-?\d+(?:\.\d+)?)\s*(?:°|degrees?)\s*(?:C\b|Celsius)"
    if "weather" not in run.tool_path:
        return False
    reports = [s for s in run.steps if s.role is StepRole.TOOL and s.status == "ok"]
    known = {float(x) for s in reports for x in re.findall(pattern, s.content or "")}
    said = {float(x) for x in re.findall(pattern, run.final_text)}
    return bool(known) and bool(said) and said <= known


async def ws_async(run):
    await asyncio.sleep(0)
    found = lambda text: [float(x) for x in re.findall(r"(-?\d+)\s*(?:°\s*C|degrees Celsius)", text)]  # noqa: E731
    tool_steps = [s for s in run.steps if s.role.value == "tool" and s.status == "ok"]
    if not tool_steps:
        return 0
    said, known = found(run.final_text), found(tool_steps[-1].content)
    return int(bool(said) and all(x in known for x in said))


# -- pass_evaluation -----------------------------------------------------------------------------------------------------

def pe(prompt, tools=(calculator,)):
    return Agent(model=literal_model(), tools=list(tools), system_prompt=prompt)


# -- memory_second_run ----------------------------------------------------------------------------------------------------

def lesson(text, situation="a weather forecast question"):
    def learn(run_id, repository):
        memory.add_experience(situation, lesson=text, source_run=run_id, repository=repository)
    return learn


def ms_forgets(run_id, repository):
    pass


def ms_scoped(run_id, repository):
    city = re.search(r"for (\w+)", repository.get_run(run_id).query).group(1)
    memory.add_experience("a weather forecast question", lesson=f"For {city}, answer forecasts in Celsius.",
                          repository=repository)


def ms_both(run_id, repository):
    lesson("Answer weather forecasts in Celsius.")(run_id, repository)
    lesson("Answer weather forecasts in Fahrenheit.")(run_id, repository)


def ms_default_store(run_id, repository):
    memory.add_experience("a weather forecast question", lesson="Answer weather forecasts in Celsius.")


def ms_outcome_only(run_id, repository):
    memory.add_experience("a weather forecast question", outcome="the user wanted Celsius", repository=repository)


def ms_raises(run_id, repository):
    raise RuntimeError("not written yet")


def ms_asks(run_id, repository):
    memory.add_experience("a weather forecast question", lesson=input("lesson? "), repository=repository)


def ms_skill(run_id, repository):
    memory.add_skill("units", "Give every weather forecast in degrees Celsius, not Fahrenheit.", repository=repository)


async def ms_async(run_id, repository):
    memory.add_experience("weather forecast for a city", action="gave the forecast in °F",
                          lesson="When you give a weather forecast, always use Celsius (°C).", repository=repository)


# -- tool_errors ------------------------------------------------------------------------------------------------------------

def te_bare(city: str) -> str:
    """Today's weather in a city."""
    return WEATHER[city]


def te_unknown(city: str) -> str:
    """Today's weather in a city."""
    return WEATHER.get(city, "unknown")


def te_no_names(city: str) -> str:
    """Today's weather in a city."""
    if city not in WEATHER:
        raise ValueError("unknown city")
    return WEATHER[city]


def te_only_asked(city: str) -> str:
    """Today's weather in a city."""
    if city not in WEATHER:
        raise ValueError(f"unknown city: {city}")
    return WEATHER[city]


def te_lowercase(city: str) -> str:
    """Today's weather in a city."""
    if city not in WEATHER:
        raise ValueError(f"unknown city {city!r}; I know {', '.join(c.lower() for c in WEATHER)}")
    return WEATHER[city]


def te_inverted(city: str) -> str:
    """Today's weather in a city."""
    if city in WEATHER:
        raise ValueError(f"unknown city {city!r}; I know {', '.join(WEATHER)}")
    return WEATHER.get(city, "no data")


def te_hard_coded(city: str) -> str:
    """Today's weather in a city."""
    fixes = {"Pariss": "Paris", "Tokio": "Tokyo", "tokio": "Tokyo", "Osllo": "Oslo"}
    return WEATHER[fixes.get(city, city)]


def te_closest_always(city: str) -> str:
    """Today's weather in a city."""
    best = max(WEATHER, key=lambda c: difflib.SequenceMatcher(None, c.lower(), city.lower()).ratio())
    return WEATHER[best]


def town_weather(town: str) -> str:
    """Today's weather in a city."""
    if town not in WEATHER:
        raise ValueError(f"unknown city {town!r}; I know {', '.join(WEATHER)}")
    return WEATHER[town]


def te_sleeps(city: str) -> str:
    """Today's weather in a city."""
    time.sleep(30)
    return WEATHER[city]


@tool(name="weather_in")
def te_suggests(city: str) -> str:
    """Today's weather in a city."""
    if city in WEATHER:
        return WEATHER[city]
    close = difflib.get_close_matches(city.title(), list(WEATHER), n=1)
    hint = f"Did you mean {close[0]}? " if close else ""
    raise LookupError(f"No weather for {city!r}. {hint}Cities I know: {', '.join(sorted(WEATHER))}.")


def te_helpful_string(city: str) -> str:
    """Today's weather in a city."""
    if city not in WEATHER:
        return f"No weather for {city!r}. Cities available: Paris, Tokyo, Oslo, Lima."
    return WEATHER[city]


def te_corrects_quietly(city: str) -> str:
    """Today's weather in a city."""
    close = difflib.get_close_matches(city.title(), list(WEATHER), n=1, cutoff=0.5)
    if close:
        return WEATHER[close[0]]
    raise ValueError(f"unknown city {city!r}; I know {', '.join(WEATHER)}")


def te_a_dict(city: str) -> str:
    """Today's weather in a city."""
    if city not in WEATHER:
        raise ValueError(f"unknown city {city!r}; I know {', '.join(WEATHER)}")
    return {"city": city, "weather": WEATHER[city]}


def te_says_it_is_another(city: str) -> str:
    """Today's weather in a city."""
    if city not in WEATHER:
        raise ValueError(f"{city!r} is Lima; I know {', '.join(WEATHER)}")
    return WEATHER[city]


def te_learns_misspellings(city: str) -> str:
    """Today's weather in a city."""
    close = difflib.get_close_matches(city.title(), list(WEATHER), n=1, cutoff=0.5)
    if city not in WEATHER and close:
        WEATHER[city] = WEATHER[close[0]]
    if city not in WEATHER:
        raise ValueError(f"unknown city {city!r}; I know {', '.join(WEATHER)}")
    return WEATHER[city]


# -- delegate_to_agent -------------------------------------------------------------------------------------------------------

def da_answers_itself(messages, tools):
    return "Owls turn their heads up to 270 degrees."


def da_empty_query(messages, tools):
    if messages[-1]["role"] == "tool":
        return messages[-1]["content"]
    return Reply.call("researcher", query="")


def da_never_answers(messages, tools):
    return Reply.call("researcher", query=next(m["content"] for m in messages if m["role"] == "user"))


def da_drops(messages, tools):
    if messages[-1]["role"] == "tool":
        return "The researcher has answered."
    return Reply.call("researcher", query=messages[-1]["content"])


def da_hard_topic(messages, tools):
    if messages[-1]["role"] == "tool":
        return messages[-1]["content"]
    return Reply.call("researcher", query="owls")


def da_constant_after_tool(messages, tools):
    if messages[-1]["role"] == "tool":
        return "Owls turn their heads up to 270 degrees."
    return Reply.call("researcher", query=messages[-1]["content"])


def da_dict(messages, tools):
    if messages[-1]["role"] == "tool":
        return {"role": "assistant", "content": messages[-1]["content"]}
    return Reply.call("researcher", query=messages[-1]["content"])


def da_twice(messages, tools):
    asked = sum(1 for m in messages if m["role"] == "tool")
    if asked >= 2:
        return messages[-1]["content"]
    return Reply.call("researcher", query=next(m["content"] for m in messages if m["role"] == "user"))


def da_echoes_question(messages, tools):
    if messages[-1]["role"] == "tool":
        return next(m["content"] for m in messages if m["role"] == "user")
    return Reply.call("researcher", query=messages[-1]["content"])


def _da(answer):
    def planner(messages, tools):
        if messages[-1]["role"] == "tool":
            return answer(messages[-1]["content"])
        return Reply.call("researcher", query=messages[-1]["content"])
    return planner


def da_hangs(messages, tools):
    import threading
    threading.Event().wait()


async def da_async(messages, tools):
    if messages[-1]["role"] == "tool":
        return "The researcher says: " + messages[-1]["content"]
    topic = messages[-1]["content"].rstrip("?.").split()[-1]
    return Reply.call("researcher", query=f"facts about {topic}")


def da_whole_question(messages, tools):
    tool_msgs = [m for m in messages if m["role"] == "tool"]
    if tool_msgs:
        return f"Here is what I found: {tool_msgs[-1]['content']}."
    question = [m for m in messages if m["role"] == "user"][-1]["content"]
    return Reply.call("researcher", query=question)


# -- endpoint_settings -----------------------------------------------------------------------------------------------------

def _limits(**kw):
    return ExecutionConfig(**kw)


def ep_key_in_code(base_url):
    return Agent(model=OpenAIModel("tutor-1", base_url=base_url, api_key="sk-my-own-key-1234567890"),
                 model_settings={"temperature": 0, "max_tokens": 200},
                 config=_limits(first_token_timeout=2, idle_timeout=2))


def ep_no_temperature(base_url):
    return Agent(model=OpenAIModel("tutor-1", base_url=base_url), model_settings={"max_tokens": 200},
                 config=_limits(first_token_timeout=2, idle_timeout=2))


def ep_warm(base_url):
    return Agent(model=OpenAIModel("tutor-1", base_url=base_url), model_settings={"temperature": 0.7,
                                                                                  "max_tokens": 200},
                 config=_limits(first_token_timeout=2, idle_timeout=2))


def ep_long_replies(base_url):
    return Agent(model=OpenAIModel("tutor-1", base_url=base_url), model_settings={"temperature": 0,
                                                                                  "max_tokens": 4096},
                 config=_limits(first_token_timeout=2, idle_timeout=2))


def ep_no_limits(base_url):
    return Agent(model=OpenAIModel("tutor-1", base_url=base_url), model_settings={"temperature": 0,
                                                                                  "max_tokens": 200})


def ep_whole_call(base_url):
    return Agent(model=OpenAIModel("tutor-1", base_url=base_url), model_settings={"temperature": 0,
                                                                                  "max_tokens": 200},
                 config=_limits(timeout_per_step=2))


def ep_first_token_only(base_url):
    return Agent(model=OpenAIModel("tutor-1", base_url=base_url), model_settings={"temperature": 0,
                                                                                  "max_tokens": 200},
                 config=_limits(first_token_timeout=2))


def ep_a_second_too_long(base_url):
    return Agent(model=OpenAIModel("tutor-1", base_url=base_url), model_settings={"temperature": 0,
                                                                                  "max_tokens": 200},
                 config=_limits(first_token_timeout=3, idle_timeout=3))


def ep_wrong_model(base_url):
    return Agent(model=OpenAIModel("gpt-4o-mini", base_url=base_url), model_settings={"temperature": 0,
                                                                                       "max_tokens": 200},
                 config=_limits(first_token_timeout=2, idle_timeout=2))


def ep_returns_model(base_url):
    return OpenAIModel("tutor-1", base_url=base_url, temperature=0)


def ep_scripted(base_url):
    return Agent(model=ScriptedModel(["Paris is the capital of France."], loop=True),
                 model_settings={"temperature": 0, "max_tokens": 200})


def ep_in_the_model(base_url):
    model = OpenAIModel("tutor-1", base_url=base_url, temperature=0, settings={"max_tokens": 150})
    return Agent(model=model, config=ExecutionConfig(first_token_timeout=1.5, idle_timeout=2.0))


def ep_run_settings(base_url):
    return Agent(model=OpenAIModel("tutor-1", base_url=base_url),
                 config=ExecutionConfig(first_token_timeout=2, idle_timeout=2,
                                        model_settings={"temperature": 0.0, "max_tokens": 64}))


def ep_client_timeout(base_url):  # the same cap by its newer name; the HTTP client's own read timeout
    return Agent(model=OpenAIModel("tutor-1", base_url=base_url, timeout=2),
                 model_settings={"temperature": 0, "max_completion_tokens": 200})


# -- the battery -------------------------------------------------------------------------------------------------------------

HANG = f"did not return within {DEFAULT_CAP:g} s"

BATTERY = {
    "tool_docstring": {
        "wrong": [
            ("no docstring", _converter(None), "has no description"),
            ("arguments undescribed", _converter("Convert an amount of US dollars to another currency."),
             "not a currency code: the docstring does not say what to pass"),
            ("negated description", _converter(GOOD_DOC.replace("Convert an amount", "Does not convert an amount")),
             "says it does not convert money"),
            ("opposite direction", _converter("""Convert an amount in another currency to US dollars.

    Args:
        amount: the amount in the foreign currency.
        currency: a three-letter ISO code such as 'EUR'.
    """), "converts into US dollars"),
            ("negated code", _converter(GOOD_DOC.replace("a three-letter ISO code such as 'EUR'",
                                                         "the currency's name, never its ISO code")),
             "not a currency code"),
            ("vague argument", _converter(GOOD_DOC.replace("a three-letter ISO code such as 'EUR'", "the currency")),
             "not a currency code"),
            ("scoped to one case", _converter(GOOD_DOC.replace("a three-letter ISO code such as 'EUR'",
                                                               "'EUR' only")),
             "did not call convert_currency for"),
            ("keywords, negated", _converter("""Not a converter: dollar, currency, exchange, ISO code.

    Args:
        amount: dollars.
        currency: ISO code such as 'EUR'.
    """), "does not convert money"),
            ("only when big", _converter(GOOD_DOC.replace("another currency.", "another currency only when the "
                                                                                "amount is big.")),
             "limits the tool (a condition the model cannot check ('only when the amount is big'))"),
            ("over 1000 only", _converter(GOOD_DOC.replace("another currency.", "another currency, for amounts over "
                                                                                "1000 only.")),
             "limits the tool (a condition the model cannot check ('for amounts over 1000 only'))"),
            ("when big, first", _converter(GOOD_DOC.replace("Convert an amount", "When the amount is big, convert an "
                                                                                 "amount")),
             "limits the tool (a condition the model cannot check ('when the amount is big'))"),
            ("on Tuesdays", _converter(GOOD_DOC.replace("Convert an amount", "On Tuesdays, convert an amount")),
             "limits the tool (a condition the model cannot check ('on tuesdays'))"),
            ("except yen", _converter(GOOD_DOC.replace("another currency.", "another currency, except yen.")),
             "did not call convert_currency for yen: your description excepts them"),
            ("Canadian dollars", _converter(GOOD_DOC.replace("Convert an amount of US dollars", "Convert Canadian "
                                                                                                 "dollars")),
             "converts Canadian dollars, not US dollars"),
            ("not US dollars", _converter(GOOD_DOC.replace("Convert an amount of US dollars", "Convert money, not US "
                                                                                                "dollars,")),
             "says the tool does not convert US dollars"),
            ("broken, used to", _converter(GOOD_DOC.replace("Convert an amount of US dollars to another currency.",
                                                            "Used to convert US dollars to another currency; it is "
                                                            "broken now.")), "is about the past ('used to')"),
            ("two-letter code", _converter(GOOD_DOC.replace("a three-letter ISO code such as 'EUR'",
                                                            "a two-letter country code such as 'EU'")),
             "the model passed currency='EU', a code in two letters as your docstring says"),
            ("lower-case code", _converter(GOOD_DOC.replace("a three-letter ISO code such as 'EUR'",
                                                            "a three-letter code in lower case, such as 'eur'")),
             "the model passed currency='eur', a code in lower case as your docstring says"),
            ("amount in cents", _converter(GOOD_DOC.replace("how many US dollars.", "how many US cents (not dollars).")),
             "in cents as your docstring says"),
            ("hides a missing rate", _converter(GOOD_DOC, lambda a, c: f"{a * RATES.get(c, RATES['EUR']):.2f} "
                                                                       f"{c if c in RATES else 'EUR'}"),
             "which RATES has no rate for, your tool answered"),
            ("hard-coded result", _converter(GOOD_DOC, lambda a, c: "92.00 EUR"), "your tool answered '92.00 EUR'"),
            ("divides by the rate", _converter(GOOD_DOC, lambda a, c: f"{a / RATES[c]:.2f} {c}"),
             "US dollars are"),
            ("no currency in the result", _converter(GOOD_DOC, lambda a, c: f"{a * RATES[c]:.2f}"),
             "does not say which currency"),
            ("rounded to whole units", _converter(GOOD_DOC, lambda a, c: f"{round(a * RATES[c] + 0.5)} {c}"),
             "US dollars are"),
            ("wrong argument names", dollars_and_currency, "name its arguments amount and currency"),
            ("a string", "def convert_currency(amount, currency): ...", "asks for a tool"),
            ("hangs", _converter(GOOD_DOC, lambda a, c: time.sleep(30)), HANG),
        ],
        "right": [("another name, code first, separators", exchange), ("numpy docstring", convert_numpy),
                  ("any amount, lower case accepted", _converter(GOOD_DOC.replace(
                      "another currency.", "another currency, for any amount, whenever asked.").replace(
                      "a three-letter ISO code such as 'EUR'", "a three-letter code in lower case, such as 'eur'"),
                      lambda a, c: f"{a * RATES[c.upper()]:.2f} {c.upper()}"))],
    },
    "function_model": {
        "wrong": [
            ("answers at once", fm_answers_at_once, "answered without calling add"),
            ("never answers", fm_never_answers, "kept calling tools until max_steps"),
            ("add(0, 0), then its own sum", fm_zero_args, "not with the question's numbers"),
            ("ignores the tool's result", fm_own_sum, "does not answer with what add returned"),
            ("off by one", fm_off_by_one, "which does not say"),
            ("hard-coded numbers", fm_hard_coded, "not with the question's numbers"),
            ("a message dict", fm_message_dict, "returned a message dict"),
            ("an int", fm_returns_int, "returned an int"),
            ("no negative numbers", fm_no_negatives, "not with the question's numbers"),
            ("calls add twice", fm_calls_twice, "call add once"),
            ("two answers", fm_hedges, "which also says"),
            ("denies the result", fm_negates, "which says it is not"),
            ("its own sum beside the tool's", fm_own_sum_beside, "does not answer with what add returned"),
            ("loops forever", fm_loops_forever, HANG),
            ("wrong signature", lambda messages: "5", "not (messages, tools)"),
        ],
        "right": [("async, tool name from tools", fm_async), ("the bare result", fm_terse)],
    },
    "edit_tool_call": {
        "wrong": [
            ("only continues", st_only_continues, "add ran with the arguments the model proposed"),
            ("skips the tool", st_skips, "you answered the add call by hand with skip()"),
            ("edits the question", st_edits_question, "you changed what the model saw"),
            ("fixes the wrong number", st_fixes_a, "the model read the second number one too small"),
            ("off by one the other way", st_wrong_direction, "the model read the second number one too small"),
            ("hard-coded arguments", st_hard_coded, "the model read the second number one too small"),
            ("text for a number", st_sends_text, "your steer() raised DebugError"),
            ("aborts", st_aborts, "your steer() aborted the run"),
            ("asks for input()", st_asks_input, "called input()"),
            ("sleeps", st_sleeps, HANG),
        ],
        "right": [("async, edit then continue", st_async_then_continue), ("from the question", st_from_the_question)],
    },
    "stopping_rule": {
        "wrong": [
            ("never stops", sr_never_stops, "never stopped"),
            ("gives up after one page", sr_gives_up_at_once, "read 1 page(s): read 3 pages before giving up"),
            ("FOUND as a substring", sr_substring, "stopped after page 1"),
            ("always two pages", sr_always_two_pages, "read 2 page(s)"),
            ("hard-coded time", sr_hard_coded_time, "does not say"),
            ("gives up after four pages", sr_four_pages, "read 4 page(s)"),
            ("found, but no answer", sr_no_answer_text, "does not say"),
            ("pages from 0", sr_from_zero, "read page 1, 2, 3... in order"),
            ("denies the time", sr_negated_time, "says it is not"),
            ("always reads three pages", sr_reads_all_three, "read 3 pages: stop at the first page that says FOUND"),
            ("sleeps", sr_sleeps, HANG),
        ],
        "right": [("async, since the question", sr_async), ("slicing", sr_plain)],
    },
    "fork_compare_choose": {
        "wrong": [
            ("keeps the original", fc_original, "is not in a fork of the session"),
            ("keeps the first branch", fc_first, "another branch answered"),
            ("keeps the longest", fc_longest, "another branch answered"),
            ("keeps the shortest", fc_shortest, "another branch answered"),
            ("by name", fc_by_name, "your choose() raised KeyError"),
            ("most steps", fc_most_steps, "another branch answered"),
            ("the first that used a tool", fc_used_a_tool, "another branch answered"),
            ("the right number as a substring", fc_substring, "another branch answered"),
            ("a RunResult", fc_returns_result, "not a run id"),
            ("the smallest number", fc_smallest_number, "another branch answered"),
            ("the answer with one number", fc_one_number, "another branch answered"),
            ("agrees with its own tool", fc_agrees_with_its_tool, "another branch answered"),
            ("forgets await", fc_forgets_await, "called an async function without `await`"),
            ("one candidate", fc_only_one, "candidates were tried"),
            ("new sessions, not forks", fc_no_fork, "is not in a fork of the session"),
            ("the shape of a right answer", fc_smaller_than_whole, "another branch answered"),
            ("two forks per candidate", fc_forks_twice, "fork once per candidate"),
            ("integer division", fc_integer_division, "another branch answered"),
            ("stops early, empties the candidates", fc_stops_and_empties, "candidates were tried"),
        ],
        "right": [("scored", fc_scored), ("sync, its own loops", fc_in_threads)],
    },
    "write_scorer": {
        "wrong": [
            ("any temperature", ws_any_temperature, "should score 0"),
            ("called the tool", ws_called_the_tool, "should score 0"),
            ("substring", ws_substring, "should score 0"),
            ("any shared number", ws_any_number, "should score 0"),
            ("any shared word", ws_any_word, "should score 0"),
            ("drops the sign", ws_unsigned, "should score 0: weather said -"),
            ("the last numbers, units ignored", ws_last_number, "should score 0: weather said"),
            ("°F and 'degrees' counted as Celsius", ws_any_unit, "should score 0: weather said"),
            ("any() for all()", ws_any_of_them, "every temperature it states must be one the tool said"),
            ("misses '14 °C'", ws_no_space, "should score 1"),
            ("text for a number", ws_returns_text, "return a number or a bool"),
            ("a percentage", ws_percent, "a score is between 0 and 1"),
            ("crashes", ws_crashes, "your scorer raised IndexError"),
            ("hangs", ws_hangs, HANG),
        ],
        "right": [("sets and bools", ws_sets), ("async, ints", ws_async)],
    },
    "pass_evaluation": {
        "wrong": [
            ("no calculator", pe("Use the calculator. Reply with only the number.", tools=()), "the agent has no calculator"),
            ("not told to use it", pe("Reply with only the number."), "does not tell the model to use the calculator"),
            ("negated tool", pe("Never use the calculator. Reply with only the number."),
             "tells the model not to use the calculator"),
            ("scoped tool", pe("Use the calculator only for additions. Reply with only the number."),
             "limits the calculator to some questions"),
            ("condition it cannot tell", pe("Use the calculator when the numbers are big. Reply with only the number."),
             "limits the calculator to some questions"),
            ("negated format", pe("Use the calculator. Never reply with only the number."), "asks for more than the number"),
            ("vague format", pe("Use the calculator. Be concise."), "does not say that the reply is the number alone"),
            ("opposite format", pe("Use the calculator. Explain your answer in a full sentence."),
             "asks for more than the number"),
            ("exception that is every row", pe("Use the calculator for every question except multiplications. Reply "
                                               "with only the number."), "an exception ('except multiplications')"),
            ("a day", pe("On Mondays, use the calculator for every question. Reply with only the number."),
             "a condition the model cannot check ('on mondays')"),
            ("unless", pe("Use the calculator for every question unless the numbers are small. Reply with only the "
                          "number."), "a condition the model cannot check ('unless the numbers are small')"),
            ("hypothetical", pe("If you had a calculator you would use it for every question. Reply with only the "
                                "number."), "is a hypothetical ('would')"),
            ("past", pe("You used to use the calculator for every question. Reply with only the number."),
             "is about the past ('used to')"),
            ("someone else", pe("Another assistant will use the calculator for every question. Reply with only the "
                                "number."), "is about someone else ('another assistant')"),
            ("spelled out", pe("Use the calculator for every question. Reply with only the number, spelled out in "
                               "words."), "asks the model to change the number"),
            ("rounded", pe("Use the calculator for every question. Reply with only the number, rounded to the nearest "
                           "ten."), "asks the model to change the number"),
            ("then explain", pe("Use the calculator for every question. Reply with only the number, then explain how "
                                "you got it."), "asks for more than the number"),
            ("judged wrong", pe("Use the calculator for every question. It is wrong to reply with only the number."),
             "asks for more than the number"),
            ("keywords", pe("calculator only the number"), "does not tell the model to use the calculator"),
            ("hard-coded answers", pe("17 × 23 = 391. 12 × 34 = 408. Reply with only the number."),
             "does not tell the model to use the calculator"),
            ("another model", Agent(model=FunctionModel(lambda m, t: str(eval(re.sub(r"[^0-9*]", "", m[-1]["content"]
                                                                                      .replace("×", "*"))))),
                                    tools=[calculator]), "not literal_model()"),
            ("a prompt", "Use the calculator. Reply with only the number.", "asks for an Agent"),
        ],
        "right": [("in other words", pe("Always compute products with the calculator tool. Output just the number, "
                                        "nothing else.")),
                  ("double negatives", pe("Don't multiply in your head: call the calculator for each question. "
                                          "Do not reply with anything but the number.")),
                  ("one sentence, even small ones", pe("Always use the calculator, even when the numbers are small, "
                                                       "and reply with only the number.")),
                  ("arithmetic, told otherwise", pe("Unless told otherwise, use the calculator for every arithmetic "
                                                    "question and reply with only the number."))],
    },
    "memory_second_run": {
        "wrong": [
            ("forgets", ms_forgets, "retrieved no memory"),
            ("vague", lesson("Be more careful."), "does not say which unit"),
            ("vague rule", lesson("Check the units."), "does not say which unit"),
            ("negated", lesson("Never convert forecasts to Celsius."), "as: answer in Fahrenheit"),
            ("opposite", lesson("Answer weather forecasts in Fahrenheit."), "as: answer in Fahrenheit"),
            ("converts the wrong way", lesson("Convert forecasts from Celsius to Fahrenheit."),
             "as: answer in Fahrenheit"),
            ("a condition it cannot tell", lesson("When it is cold, answer forecasts in Celsius."), "only when cold"),
            ("a day", lesson("On Mondays, answer weather forecasts in Celsius."),
             "it is a condition the model cannot check ('on mondays')"),
            ("if asked", lesson("Answer weather forecasts in Celsius if the user asks for it."),
             "it is a condition the model cannot check ('if the user asks for it')"),
            ("unless", lesson("Answer weather forecasts in Celsius unless the city is in Europe."),
             "it is a condition the model cannot check ('unless the city is in europe')"),
            ("then converts back", lesson("Answer weather forecasts in Celsius, then convert the answer to "
                                          "Fahrenheit."), "as: answer in Fahrenheit"),
            ("called a mistake", lesson("Answering weather forecasts in Celsius was a mistake."),
             "as: answer in Fahrenheit"),
            ("once, not any more", lesson("The user once wanted weather forecasts in Celsius, but not any more."),
             "it is about the past ('once')"),
            ("another user", lesson("Another user wants weather forecasts in Celsius; this one wants Fahrenheit."),
             "as: answer in Fahrenheit"),
            ("two lessons that disagree", ms_both, "your memory says both Celsius"),
            ("a situation sharing no word", lesson("Answer in Celsius.", situation="zqx vbn"),
             "shares no word with the question"),
            ("scoped to the first city", ms_scoped, "as a rule for"),
            ("the default store", ms_default_store, "stored its lesson in the default store"),
            ("no lesson", ms_outcome_only, "has no lesson"),
            ("raises", ms_raises, "your learn() raised RuntimeError"),
            ("asks for input()", ms_asks, "called input()"),
        ],
        "right": [("a skill", ms_skill), ("async, other words", ms_async),
                  ("a mistake named, then the rule", lesson("Answering in Fahrenheit was a mistake; answer in "
                                                            "Celsius.", situation="the user asked for a forecast")),
                  ("would like, unless told otherwise", lesson("The user would like weather forecasts in Celsius "
                                                               "unless told otherwise."))],
    },
    "tool_errors": {
        "wrong": [
            ("bare KeyError", te_bare, "gives it nothing to correct the spelling with"),
            ("returns 'unknown'", te_unknown, "which the model took as the answer"),
            ("no names", te_no_names, "gives it nothing to correct the spelling with"),
            ("names only the asked city", te_only_asked, "gives it nothing to correct the spelling with"),
            ("lower-case names", te_lowercase, "spelt as your tool accepts them"),
            ("inverted", te_inverted, "failed for a city you know"),
            ("hard-coded misspellings", te_hard_coded, "gives it nothing to correct the spelling with"),
            ("always the closest city", te_closest_always, "weather for a city your tool does not know"),
            ("wrong argument name", town_weather, "name its argument city"),
            ("sleeps", te_sleeps, HANG),
            ("corrects misspellings quietly", te_corrects_quietly, "a weather report for a city your tool does not know"),
            ("a dict", te_a_dict, "return the string WEATHER[city]"),
            ("says the city is another", te_says_it_is_another, "which tells the model"),
            ("adds misspellings to WEATHER", te_learns_misspellings, "which is read-only"),
        ],
        "right": [("suggests, another name", te_suggests), ("a helpful string", te_helpful_string)],
    },
    "delegate_to_agent": {
        "wrong": [
            ("answers itself", da_answers_itself, "answered without asking the researcher"),
            ("empty query", da_empty_query, "which does not name"),
            ("never answers", da_never_answers, "kept calling tools until max_steps"),
            ("drops the answer", da_drops, "which does not say what the researcher found"),
            ("hard-coded topic", da_hard_topic, "which does not name"),
            ("ignores the result", da_constant_after_tool, "which does not say what the researcher found"),
            ("a message dict", da_dict, "returned a message dict"),
            ("asks twice", da_twice, "call the researcher once"),
            ("echoes the question", da_echoes_question, "which does not say what the researcher found"),
            ("hangs", da_hangs, HANG),
            ("denies the fact", _da(lambda fact: f"It is not true that {fact}."), "which says it is not"),
            ("a number of its own beside it", _da(lambda fact: f"{fact} (or maybe 100)"), "which also says 100"),
            ("doubts it", _da(lambda fact: f"The researcher said {fact}, but I doubt it."), "which doubts"),
        ],
        "right": [("async, the topic only", da_async), ("wrapped", da_whole_question)],
    },
    "endpoint_settings": {
        "wrong": [
            ("key in the code", ep_key_in_code, "your code contains the key"),
            ("no temperature", ep_no_temperature, "temperature=None"),
            ("warm", ep_warm, "temperature=0.7"),
            ("long replies", ep_long_replies, "max_tokens=4096"),
            ("no time limits", ep_no_limits, "was still waiting after"),
            ("limits the whole call", ep_whole_call, "cut off an answer that was still streaming"),
            ("first token only", ep_first_token_only, "in the middle of its answer"),
            ("a second too long", ep_a_second_too_long, "gave up only after 3 s"),
            ("another model", ep_wrong_model, "this endpoint serves 'tutor-1'"),
            ("a model, not an agent", ep_returns_model, "not an Agent"),
            ("never calls the endpoint", ep_scripted, "never called the endpoint"),
        ],
        "right": [("settings in the model", ep_in_the_model), ("settings in the config", ep_run_settings),
                  ("the client's timeout, max_completion_tokens", ep_client_timeout)],
    },
}

COURSE = ["quickstart", "function_model", "step_debugger", "metrics_and_plots", "retry_and_fork", "compare_and_choose",
          "evaluate_a_prompt", "learn_from_feedback", "code_interpreter", "mcp_tools", "compose_agents",
          "openai_endpoint"]
TAUGHT_IN = {"scoring.": "compare_and_choose", "regex(": "compare_and_choose", "called_before_answer": "compare_and_choose",
             "diff(": "compare_and_choose", "sweep": "compare_and_choose", "batch": "evaluate_a_prompt",
             "memory.": "learn_from_feedback", "add_experience": "learn_from_feedback", "python_sandbox": "code_interpreter",
             "mcp": "mcp_tools", "as_tool": "compose_agents", "handoff": "compose_agents",
             "OpenAIModel": "openai_endpoint", "timeout": "openai_endpoint", "pause.edit": "step_debugger",
             "context(": "step_debugger", ".fork(": "retry_and_fork", ".retry(": "retry_and_fork"}


def later_tools(name: str, text: str) -> list[str]:
    """What ``text`` recommends that only a tutorial after the exercise's own teaches."""
    here = COURSE.index(TUTORIALS[name])
    return [term for term, where in TAUGHT_IN.items() if term in text and COURSE.index(where) > here]


WRONG = [pytest.param(name, i, id=f"{name}-{cls}") for name, b in BATTERY.items()
         for i, (cls, _, _) in enumerate(b["wrong"])]
RIGHT = [pytest.param(name, i, id=f"{name}-{label}") for name, b in BATTERY.items()
         for i, (label, _) in enumerate(b["right"])]


def test_every_exercise_has_a_battery_of_six_classes_and_two_right_solutions() -> None:
    assert set(BATTERY) == set(EXERCISES)
    for name, b in BATTERY.items():
        assert len({cls for cls, _, _ in b["wrong"]}) >= 6, name
        assert len(b["right"]) >= 2, name


@pytest.mark.parametrize(("name", "index"), WRONG)
def test_a_wrong_solution_fails_with_the_reason_the_learner_needs(name: str, index: int) -> None:
    cls, solution, reason = BATTERY[name]["wrong"][index]
    slow = reason == HANG or name == "endpoint_settings"  # a hang costs its cap, an endpoint its time limits
    for seed in SEEDS[: 1 if slow else None]:
        result = check(name, solution, seed=seed)
        assert not result.passed, f"{cls} passed at seed {seed}: {result.summary()}"
        text = result.summary()
        assert reason in text, f"{cls} at seed {seed}: {text}"
        assert f"seed {seed}" in result.headline()
        assert not later_tools(name, text), later_tools(name, text)  # feedback only names what was taught


@pytest.mark.parametrize("name", list(EXERCISES))
def test_instructions_and_hints_only_name_what_the_course_has_taught(name: str) -> None:
    ex = EXERCISES[name]
    assert not later_tools(name, ex.instructions + "".join(ex.hints) + ex.starter)


@pytest.mark.parametrize(("name", "index"), RIGHT)
def test_a_right_solution_written_differently_passes(name: str, index: int) -> None:
    label, solution = BATTERY[name]["right"][index]
    for seed in (*SEEDS, 777)[: 2 if name == "endpoint_settings" else None]:
        result = check(name, solution, seed=seed)
        assert result.passed, f"{label} failed at seed {seed}: {result.summary()}"


@pytest.mark.parametrize("name", list(EXERCISES))
def test_the_reference_passes_at_many_seeds(name: str) -> None:
    seeds = range({"endpoint_settings": 2, "memory_second_run": 10}.get(name, 40))  # as each one's cost allows
    for seed in seeds:
        result = check(name, reference(name), seed=seed, record=False)
        assert result.passed, result.summary()


def test_every_stopping_rule_check_has_a_page_where_stopping_early_matters() -> None:
    for seed in range(20):  # a model that reads 3 pages whatever they say fails at every seed
        assert not check("stopping_rule", sr_reads_all_three, seed=seed, record=False).passed, seed


def test_a_tool_that_changes_weather_leaves_later_checks_as_they_were() -> None:
    assert not check("tool_errors", te_learns_misspellings, seed=3, record=False).passed
    assert dict(WEATHER) == {"Paris": "18°C and sunny", "Tokyo": "22°C with rain", "Oslo": "6°C and windy",
                             "Lima": "20°C, cloudy"}
    for seed in range(6):
        assert check("tool_errors", reference("tool_errors"), seed=seed, record=False).passed, seed
