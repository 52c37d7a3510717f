"""Exercises that check themselves: an exercise's scenarios run a learner's solution offline and judge it.

The public face is :mod:`agio_notebook.exercises` (which adds the notebook's transcripts); see
``docs/exercises.md``.
"""

from .catalog import EXERCISES, TUTORIALS, UnknownExerciseError, exercise
from .check import check
from .exercise import Exercise, Expectation, Hint, Scenario, Solution, Trial, expect, judged
from .kinds import WrongKindError
from .report import CheckResult, ScenarioResult

__all__ = ["EXERCISES", "TUTORIALS", "CheckResult", "Exercise", "Expectation", "Hint", "Scenario", "ScenarioResult", "Trial",
           "Solution", "UnknownExerciseError", "WrongKindError", "check", "exercise", "expect", "judged"]
