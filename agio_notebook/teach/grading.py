"""Calls for graders' test cells (nbgrader, otter-grader): silent when right, the summary alone when not.

``grade`` prints nothing on a pass (otter compares a test cell's output with the master's, and nbgrader
warns about output it cannot read as points) and raises :class:`ExerciseFailed` on a failure, whose
traceback in a notebook is the summary alone: IPython shows an exception's ``_render_traceback_`` in
place of its frames, so a student reads agio's reason, never agio's files. ``points`` is partial credit:
nbgrader gives a grade cell the number it ends with. Checks made here are not kept in the progress
journal (a grader's runs are not the student's practice).
"""

from __future__ import annotations

from typing import Any

from ..core import AgioError
from ..storage.base import Repository
from .check import check
from .exercise import Exercise
from .report import CheckResult

WIDTH = 96  # grader feedback boxes cut longer lines


class GradingError(AgioError, ValueError):
    """A grading call given something it cannot use; one line."""


class ExerciseFailed(AssertionError):
    """An exercise's scenarios failed; the message is the check's summary, wrapped to fit a feedback box."""

    def __init__(self, result: CheckResult):
        super().__init__(result.summary(width=WIDTH))
        self.result = result

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {line}" if i == 0 else line for i, line in enumerate(str(self).splitlines())]

    def __str__(self) -> str:
        return self.args[0]


def grade(exercise: Exercise | str, solution: Any, *, seed: int | None = None,
          repository: Repository | None = None) -> None:
    """Nothing when every scenario passes; :class:`ExerciseFailed` with the summary when one fails."""
    result = check(exercise, solution, seed=seed, record=False, repository=repository)
    if not result.passed:
        raise ExerciseFailed(result) from None


def points(exercise: Exercise | str, solution: Any, max: float, *, seed: int | None = None,  # noqa: A002
           repository: Repository | None = None) -> float:
    """``max`` times the share of scenarios passed, rounded to 2 decimals; when that is less than ``max`` the
    summary is printed first, so the feedback says why."""
    if not isinstance(max, (int, float)) or isinstance(max, bool) or max <= 0:
        raise GradingError(f"points() needs max > 0 (the points the exercise is worth), got {max!r}")
    result = check(exercise, solution, seed=seed, record=False, repository=repository)
    got = round(float(max) * result.score, 2)
    if got < max:
        print(result.summary(width=WIDTH))
    return got
