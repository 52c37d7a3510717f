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
from .storage.base import Repository
from .teach import (EXERCISES, CheckResult, Exercise, Expectation, Hint, Scenario, ScenarioResult, Trial,
                    UnknownExerciseError, WrongKindError, exercise, expect, judged)
from .teach import check as _check
from .teach.course.endpoint import local_endpoint
from .teach.course.judging import calculator, literal_model, weather
from .teach.course.loop import add
from .teach.course.tools import RATES, WEATHER
from .teach.grading import ExerciseFailed
from .teach.grading import grade as _grade
from .teach.grading import points as _points
from .teach.progress import progress


def check(exercise: Exercise | str, solution: Any, *, seed: int | None = None, strict: bool = False,
          record: bool = True, repository: Repository | None = None) -> CheckResult:
    """Run every scenario of ``exercise`` (an :class:`Exercise`, or a course exercise's name) with
    ``solution`` offline and show a table: each scenario, passed or failed, why, and a failing run's
    transcript. The scenarios' values are drawn from ``seed`` (new at every call, shown in the result;
    pass it to see the same values again). A solution of the wrong kind or signature is one line
    (``result.problem``); a solution that raises or hangs fails its scenario with the reason.
    ``strict=True`` raises ``AssertionError`` with the summary. Each check is kept in your progress
    (:func:`progress`) unless ``record=False``."""
    return _check(exercise, solution, seed=seed, strict=strict, transcript=transcript, record=record,
                  repository=repository)


def grade(exercise: Exercise | str, solution: Any, *, seed: int | None = None) -> None:
    """For a grader's test cell: prints nothing when every scenario passes; raises
    :class:`ExerciseFailed` (an ``AssertionError``) whose traceback is the summary alone when one fails."""
    _grade(exercise, solution, seed=seed)


def points(exercise: Exercise | str, solution: Any, max: float, *, seed: int | None = None) -> float:  # noqa: A002
    """Partial credit for a grader: ``max`` times the share of scenarios passed (printing the summary
    when it is less than ``max``). nbgrader takes a grade cell's number as its points."""
    return _points(exercise, solution, max, seed=seed)


def transcript(events: list[StepEvent]) -> dict[str, str]:
    """A scenario's run drawn as a ``%%agio`` cell's transcript, without its Retry and Fork commands: the run
    lives in the check's throwaway store, not in yours."""
    view = fold(mask([e.to_dict() for e in events if e.type.value != "step_delta"]), None)
    return {"text/html": to_html(view), "text/plain": to_text(view)}


def exercises() -> pd.DataFrame:
    """The course's exercises in the order the course teaches them: name, title, what each asks for,
    scenarios per check, minutes."""
    return pd.DataFrame([{"name": e.name, "title": e.title, "asks_for": e.asks_for or e.kind,
                          "scenarios": e.count, "minutes": e.minutes} for e in EXERCISES.values()])


__all__ = ["EXERCISES", "RATES", "WEATHER", "CheckResult", "Exercise", "ExerciseFailed", "Expectation", "Hint",
           "Scenario", "ScenarioResult", "Trial", "UnknownExerciseError", "WrongKindError", "add", "calculator",
           "check", "exercise", "exercises", "expect", "grade", "literal_model", "local_endpoint", "points",
           "judged", "progress", "weather"]
