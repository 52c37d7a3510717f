"""The course's exercises in course order, by name."""

from __future__ import annotations

from .exercise import Exercise
from .course.compose import DELEGATE_TO_AGENT
from .course.debugger import EDIT_TOOL_CALL
from .course.fork import FORK_COMPARE_CHOOSE
from .course.judging import PASS_EVALUATION, WRITE_SCORER
from .course.loop import FUNCTION_MODEL, STOPPING_RULE
from .course.memory import MEMORY_SECOND_RUN
from .course.tools import TOOL_DOCSTRING, TOOL_ERRORS

EXERCISES: dict[str, Exercise] = {e.name: e for e in (
    TOOL_DOCSTRING, TOOL_ERRORS, FUNCTION_MODEL, EDIT_TOOL_CALL, STOPPING_RULE, WRITE_SCORER, PASS_EVALUATION,
    MEMORY_SECOND_RUN, FORK_COMPARE_CHOOSE, DELEGATE_TO_AGENT)}


class UnknownExerciseError(LookupError):
    """No exercise by that name; the message lists them."""


def exercise(name: str) -> Exercise:
    """The course's exercise ``name`` (the same object each time, so its hints go on where they stopped)."""
    try:
        return EXERCISES[name]
    except (KeyError, TypeError):
        raise UnknownExerciseError(f"no exercise {name!r}; the exercises are: {', '.join(EXERCISES)}") from None
