"""Exercises that check themselves — the public module: ``check(exercise("tool_docstring"), my_tool)``.

The engine is :mod:`agio_notebook.teach` (offline runs, expectations, results); this module adds the
notebook's transcript to a failing scenario, which is why it sits above both (``teach`` cannot import
the notebook layer).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from .core import StepEvent, mask
from .notebook.render import to_html, to_text
from .notebook.view_model import fold
from .teach import (EXERCISES, CheckResult, Exercise, Expectation, Hint, Scenario, ScenarioResult, Trial,
                    UnknownExerciseError, WrongKindError, exercise, expect)
from .teach import check as _check
from .teach.course.judging import calculator, literal_model, weather
from .teach.course.loop import add
from .teach.course.tools import RATES, WEATHER


def check(exercise: Exercise | str, solution: Any, *, strict: bool = False) -> CheckResult:
    """Run every scenario of ``exercise`` (an :class:`Exercise`, or a course exercise's name) with
    ``solution`` offline and show a table: each scenario, passed or failed, why, and a failing run's
    transcript. ``strict=True`` raises ``AssertionError`` with the same summary (for nbgrader and
    otter-grader). A solution of the wrong kind is one line (:class:`WrongKindError`); a solution that
    raises fails its scenario with the reason."""
    return _check(exercise, solution, strict=strict, transcript=transcript)


def transcript(events: list[StepEvent]) -> dict[str, str]:
    """A scenario's run drawn as a ``%%agio`` cell's transcript, without its Retry and Fork commands: the run
    lives in the check's throwaway store, not in yours."""
    view = fold(mask([e.to_dict() for e in events if e.type.value != "step_delta"]), None)
    return {"text/html": to_html(view), "text/plain": to_text(view)}


def exercises() -> pd.DataFrame:
    """The course's exercises: name, title, what each asks for, minutes."""
    return pd.DataFrame([{"name": e.name, "title": e.title, "asks_for": e.asks_for or e.kind, "minutes": e.minutes}
                         for e in EXERCISES.values()])


__all__ = ["EXERCISES", "RATES", "WEATHER", "CheckResult", "Exercise", "Expectation", "Hint", "Scenario",
           "ScenarioResult", "Trial", "UnknownExerciseError", "WrongKindError", "add", "calculator", "check",
           "exercise", "exercises", "expect", "literal_model", "weather"]
