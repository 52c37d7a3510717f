"""Exercises on the agent loop: a model function that calls a tool and answers, and a stopping rule."""

from __future__ import annotations

import random
import re
from typing import Any

from ...core import ExecutionConfig, RunStatus
from ...tools import Tool, tool
from ..exercise import Exercise, Scenario, Trial, judged
from ..values import clock, numbers, shown_number, time_spans, times, unstated
from .probe import follows_the_tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first number.
        b: the second number.
    """
    return a + b


def _hit_limit(trial: Trial) -> bool:
    return trial.run is not None and trial.run.status is RunStatus.MAX_STEPS


def _added(a: int, b: int) -> Any:
    def why(trial: Trial) -> str | None:
        calls = trial.calls
        if _hit_limit(trial):
            return ("your model kept calling tools until max_steps: when the last message has role 'tool', answer "
                    "with text")
        if not calls:
            return ("your model answered without calling add: on the first turn return Reply.call('add', a=..., "
                    "b=...) with the two numbers from the question")
        if [name for name, _ in calls] != ["add"]:
            return f"your model called {[name for name, _ in calls]}; call add once, then answer"
        args = calls[0][1]
        try:
            got = sorted(float(v) for v in (args.get("a"), args.get("b")))
        except (TypeError, ValueError):
            got = []
        if got != sorted([float(a), float(b)]):
            return (f"your model called add({', '.join(f'{k}={v!r}' for k, v in args.items())}), not with the "
                    f"question's numbers {a} and {b}: read them from the question (messages[-1]['content'])")
        name, status, content = trial.tool_results[0]
        if status != "ok":
            return f"add failed: {content}"
        result = numbers(content)[0]
        if (problem := unstated(trial.final_text, result, besides=(a, b))) is not None:
            return (f"your model answered {trial.final_text!r}, which {problem}: answer with add's result, "
                    f"{shown_number(result)} (the content of the last message), and nothing against it")
        return None
    return why


def _reads_the_result(a: int, b: int, rng: random.Random) -> Any:
    other = a + b + rng.choice([111, 222, 1000, -333, 77])
    return follows_the_tool(str(other), other, "add", ". Answer with the content of the last message, not with a "
                                                      "sum of your own", besides=(a, b))


def _function_scenarios(rng: random.Random) -> list[Scenario]:
    config = ExecutionConfig(max_steps=4, tool_timeout=5.0, first_token_timeout=5.0, enable_retry=False)

    def scenario(name: str, query: str, a: int, b: int, variant: bool = False) -> Scenario:
        return Scenario(name, query, tools=[add], config=config, variant=variant,
                        describe=f"{query} (expects add({a}, {b}), then {a + b})",
                        expect=[judged(_added(a, b), "calls add, then answers")], probe=_reads_the_result(a, b, rng))

    a, b = rng.randrange(2, 60), rng.randrange(2, 60)
    c, d = rng.randrange(100, 999), rng.randrange(10, 99)
    e, f = rng.randrange(20, 400), -rng.randrange(5, 99)
    variant = rng.choice([f"Please add {e} and {f}.", f"What do you get if you add {f} to {e}?"])
    return [scenario(f"{a} + {b}", f"What is {a} + {b}?", a, b),
            scenario(f"{c} + {d}", f"What is {c} + {d}?", c, d),
            scenario("asked another way", variant, e, f, variant=True)]


FUNCTION_MODEL = Exercise(
    name="function_model", title="Write a function model that calls a tool and then answers", kind="model",
    asks_for="a model function fn(messages, tools)", minutes=15,
    instructions="""
A model is a function of the conversation: `fn(messages, tools)` returns the next reply, text or a tool
call (`Reply.call(name, **arguments)`). Write one that, given a question like *What is 2 + 3?*, calls
the `add` tool with the two numbers of the question, and once the tool has answered (the last message
has role `tool`), replies with the tool's result. The numbers change at every check, and one question is
asked in words these instructions do not show (numbers can be negative). The check also asks your
function once more with another result from `add`: the answer must follow the tool.
""",
    hints=["Look at `messages[-1]['role']`: 'user' means it is your first turn, 'tool' means the result is in.",
           "`re.findall(r'-?\\d+', text)` finds the numbers in the question.",
           "First turn: `return Reply.call('add', a=a, b=b)`; after the tool: "
           "`return f\"The sum is {messages[-1]['content']}.\"`"],
    starter='''import re
from agio_notebook import Reply
from agio_notebook.exercises import check, exercise

def my_model(messages, tools):
    ...  # call add with the two numbers, then answer with its result

check(exercise("function_model"), my_model)''',
    scenarios=_function_scenarios)


def pages_tool(pages: dict[int, str]) -> Tool:
    """``search(page)`` over a fixed set of pages (missing pages are empty)."""
    def search(page: int) -> str:
        """Read one page of the meeting notes.

        Args:
            page: the page number, from 1.
        """
        return pages.get(page, "(empty page)")

    return tool(search)


_LIMIT = 6
_FILLER = ["Agenda: budget, hiring.", "Minutes of last week.", "Coffee rota: Ana, Ben, Chloe.",
           "Parking is closed on Fridays.", "Reminder: submit expenses by the 5th.", "Printer on floor 2 is fixed."]
_DISTRACTOR = "Notes from the FOUNDATION board: nothing about the meeting."
_NOT_FOUND = re.compile(r"\b(?:not|never|no|nothing|couldn't|could not|can't|cannot|didn't|did not|unable to|"
                        r"wasn't|was not|isn't|is not)\b(?:\W+\w+){0,3}?\W+(?:find|found|there|mentioned|anywhere|"
                        r"notes|pages|listed|available|known|given)\b"
                        r"|\bnowhere\b|\bno (?:page|mention|result|answer)s?\b|\bfound nothing\b"
                        r"|\b(?:don't|do not|didn't|did not|doesn't|does not) (?:know|say)\b|\bunknown\b", re.I)


def says_not_found(text: str) -> bool:
    """The answer says the thing was not found (in words, not a keyword: "I could not find it" counts)."""
    return bool(_NOT_FOUND.search(text or ""))


def _searched(trial: Trial) -> list[Any]:
    return [args.get("page") for name, args in trial.calls if name == "search"]


def _read_in_order(trial: Trial, rule: str) -> str | None:
    """What every stopping scenario needs first: the loop stopped, and read page 1, 2, 3... in order."""
    read = _searched(trial)
    if _hit_limit(trial):
        return f"your model never stopped: it ran until max_steps ({_LIMIT} model calls); {rule}"
    if read != list(range(1, len(read) + 1)):
        return f"your model read pages {read}: read page 1, 2, 3... in order"
    return None


def _found(page: int, minutes: int) -> Any:
    def why(trial: Trial) -> str | None:
        read = _searched(trial)
        if (first := _read_in_order(trial, "answer as soon as a page says FOUND")) is not None:
            return first
        if len(read) < page:
            seen = f"page {len(read)} ({trial.tool_results[-1][2]!r})" if read else "no page"
            return f"your model stopped after {seen}, before page {page}, which says FOUND"
        if len(read) > page:
            return f"your model read {len(read)} pages: stop at the first page that says FOUND: (page {page})"
        problem = unstated(trial.final_text, minutes, spans=time_spans, show=clock)
        if problem is None and says_not_found(trial.final_text):
            problem = "says it was not found"
        if problem is not None:
            return (f"your model stopped at the right page, but its answer {trial.final_text!r} {problem}: answer "
                    f"with the time the page says, {clock(minutes)}")
        return None
    return why


def _gave_up(trial: Trial) -> str | None:
    read = _searched(trial)
    if (first := _read_in_order(trial, "give up after 3 pages without FOUND")) is not None:
        return first
    if len(read) != 3:
        return f"your model read {len(read)} page(s): read 3 pages before giving up, and no more"
    if times(trial.final_text) or not says_not_found(trial.final_text):
        return f"after 3 pages without FOUND, say it was not found; your model said {trial.final_text!r}"
    return None


def _stopping_scenarios(rng: random.Random) -> list[Scenario]:
    def fact() -> tuple[int, str]:
        minutes = rng.choice(range(8 * 60, 18 * 60, 30))
        return minutes, f"FOUND: the meeting is at {clock(minutes)} in room {rng.randrange(2, 40)}."

    def filler(n: int) -> list[str]:
        return rng.sample(_FILLER, n)

    found_at = rng.choice([1, 2, 3])
    minutes, line = fact()
    notes = dict(enumerate([*filler(found_at - 1), line, *filler(1)], 1))
    _, late = fact()
    empty = dict(enumerate([*filler(3), late], 1))  # the answer is on page 4: too late
    v_minutes, v_line = fact()
    # after a page that mentions the FOUNDATION board; one of the two is found before page 3, so a model that
    # reads 3 pages whatever they say fails at every seed
    v_at = 2 if found_at == 3 else rng.choice([2, 3])
    v_pages = dict(enumerate([_DISTRACTOR, *filler(v_at - 2), v_line, *filler(1)], 1))
    cap = ExecutionConfig(max_steps=_LIMIT, tool_timeout=5.0, first_token_timeout=5.0, enable_retry=False)
    return [
        Scenario(f"found on page {found_at}", "When is the meeting?", tools=[pages_tool(notes)], config=cap,
                 describe=f"page {found_at} says FOUND: stop there and answer ({clock(minutes)})",
                 expect=[judged(_found(found_at, minutes), "stops at FOUND")]),
        Scenario("not in the first 3 pages", "When is the meeting?", tools=[pages_tool(empty)], config=cap,
                 describe="no page of the first 3 says FOUND: give up after 3 pages",
                 expect=[judged(_gave_up, "gives up")]),
        Scenario("found, another layout", "When is the meeting?", tools=[pages_tool(v_pages)], config=cap,
                 variant=True, describe=f"page {v_at} says FOUND ({clock(v_minutes)}), after a page that mentions "
                                        "the FOUNDATION board",
                 expect=[judged(_found(v_at, v_minutes), "stops at FOUND")]),
    ]


STOPPING_RULE = Exercise(
    name="stopping_rule", title="Add a stopping rule", kind="model", asks_for="a model function fn(messages, tools)",
    minutes=15,
    instructions=f"""
An agent loop ends when the model answers instead of calling a tool; if it never does, the run hits
`max_steps` ({_LIMIT} here) and ends without an answer. Write a model function that reads the meeting
notes with `search(page)`, page 1, 2, 3..., and **stops**: a page that has the answer starts with
`FOUND:`; as soon as one does, answer with what it says (the time of the meeting), and after 3 pages
without it, answer that it was not found. The pages change at every check, and one layout is one these
instructions do not show.
""",
    hints=["Count the tool results since the user's question: that is the number of pages read.",
           "Check whether the last tool result starts with 'FOUND:' before asking for another page.",
           "`if len(results) >= 3: return 'Not found.'` is a stopping rule."],
    starter='''from agio_notebook import Reply
from agio_notebook.exercises import check, exercise

def searcher(messages, tools):
    results = [m["content"] for m in messages if m["role"] == "tool"]
    return Reply.call("search", page=len(results) + 1)  # add a stopping rule

check(exercise("stopping_rule"), searcher)''',
    scenarios=_stopping_scenarios)

