"""Exercises on the agent loop: a model function that calls a tool and answers, and a stopping rule."""

from __future__ import annotations

import re
from typing import Any

from ...core import ExecutionConfig, RunStatus
from ...tools import Tool, tool
from ..exercise import Exercise, Scenario, Trial, expect


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first number.
        b: the second number.
    """
    return a + b


def _why_added(expected: int) -> Any:
    def why(trial: Trial) -> str:
        path = trial.tool_path
        if trial.run is not None and trial.run.status is RunStatus.MAX_STEPS:
            return ("your model kept calling tools until max_steps: when the last message has role 'tool', "
                    "answer with text")
        if not path:
            return ("your model answered without calling add: on the first turn return "
                    "Reply.call('add', a=..., b=...) with the two numbers from the question")
        if path != ["add"]:
            return f"your model called {path}; call add once, then answer"
        return (f"your model answered {trial.final_text!r}, which does not contain {expected}: answer with the "
                "tool's result (the content of the last message)")
    return why


def _adds(query: str, a: int, b: int) -> Scenario:
    expected = a + b
    return Scenario(f"{a} + {b}", query, tools=[add], config=ExecutionConfig(max_steps=4, enable_retry=False),
                    describe=f"{query} (expects add, then {expected})", expect=[expect(
                        lambda t: t.tool_path == ["add"] and re.search(rf"\b{expected}\b", t.final_text) is not None,
                        _why_added(expected), name="calls add, then answers")])


FUNCTION_MODEL = Exercise(
    name="function_model", title="Write a function model that calls a tool and then answers", kind="model",
    asks_for="a model function fn(messages, tools)", minutes=15,
    instructions="""
A model is a function of the conversation: `fn(messages, tools)` returns the next reply, text or a tool
call (`Reply.call(name, **arguments)`). Write one that, given a question like *What is 2 + 3?*, calls
the `add` tool with the two numbers, and once the tool has answered (the last message has role
`tool`), replies with the result.
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
    scenarios=[_adds("What is 2 + 3?", 2, 3), _adds("What is 19 + 23?", 19, 23)])


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
_NOTES = {1: "Agenda: budget, hiring.", 2: "FOUND: the meeting is at 3 pm.", 3: "Minutes of last week."}
_EMPTY = {1: "Agenda: budget, hiring.", 2: "Minutes of last week.", 3: "Coffee rota."}


def _searches(trial: Trial) -> int:
    return trial.tool_path.count("search")


def _hit_limit(trial: Trial) -> bool:
    return trial.run is not None and trial.run.status is RunStatus.MAX_STEPS


def _why_found(trial: Trial) -> str:
    n = _searches(trial)
    if _hit_limit(trial):
        return (f"your model never stopped: it ran until max_steps ({_LIMIT} model calls); answer as soon as a "
                "page says FOUND")
    if n < 2:
        return f"your model stopped after {n} page(s), before page 2, which says FOUND"
    if n > 2:
        return f"your model read {n} pages: stop at the first page that says FOUND (page 2)"
    return f"your model stopped at the right page, but its answer {trial.final_text!r} does not say '3 pm'"


def _why_gave_up(trial: Trial) -> str:
    n = _searches(trial)
    if _hit_limit(trial):
        return (f"your model never stopped: it ran until max_steps ({_LIMIT} model calls); give up after 3 pages "
                "without FOUND")
    if n != 3:
        return f"your model read {n} page(s): read 3 pages before giving up, and no more"
    return f"after 3 pages without FOUND, say 'not found'; your model said {trial.final_text!r}"


_CAP = ExecutionConfig(max_steps=_LIMIT, enable_retry=False)

STOPPING_RULE = Exercise(
    name="stopping_rule", title="Add a stopping rule", kind="model", asks_for="a model function fn(messages, tools)",
    minutes=15,
    instructions=f"""
An agent loop ends when the model answers instead of calling a tool; if it never does, the run hits
`max_steps` ({_LIMIT} here) and ends without an answer. Write a model function that reads the meeting
notes with `search(page)`, page 1, 2, 3..., and **stops**: answer with what was found as soon as a page
says `FOUND`, and answer `not found` after 3 pages without it.
""",
    hints=["Count the tool results since the user's question: that is the number of pages read.",
           "Check the last tool result for 'FOUND' before asking for another page.",
           "`if len(results) >= 3: return 'Not found.'` is a stopping rule."],
    starter='''from agio_notebook import Reply
from agio_notebook.exercises import check, exercise

def searcher(messages, tools):
    results = [m["content"] for m in messages if m["role"] == "tool"]
    return Reply.call("search", page=len(results) + 1)  # add a stopping rule

check(exercise("stopping_rule"), searcher)''',
    scenarios=[
        Scenario("found on page 2", "When is the meeting?", tools=[pages_tool(_NOTES)], config=_CAP,
                 describe="page 2 says FOUND: stop there and answer",
                 expect=[expect(lambda t: not _hit_limit(t) and _searches(t) == 2 and "3 pm" in t.final_text,
                                _why_found, name="stops at FOUND")]),
        Scenario("not there", "When is the meeting?", tools=[pages_tool(_EMPTY)], config=_CAP,
                 describe="no page says FOUND: give up after 3 pages",
                 expect=[expect(lambda t: not _hit_limit(t) and _searches(t) == 3
                                and "not found" in t.final_text.lower(), _why_gave_up, name="gives up")]),
    ])
