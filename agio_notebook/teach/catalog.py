"""The course's exercises in course order, by name."""

from __future__ import annotations

from .exercise import Exercise
from .course.compose import DELEGATE_TO_AGENT
from .course.debugger import EDIT_TOOL_CALL
from .course.endpoint import ENDPOINT_SETTINGS
from .course.fork import FORK_COMPARE_CHOOSE
from .course.judging import PASS_EVALUATION, WRITE_SCORER
from .course.loop import FUNCTION_MODEL, STOPPING_RULE
from .course.memory import MEMORY_SECOND_RUN
from .course.tools import TOOL_DOCSTRING, TOOL_ERRORS
from .solutions import source

# in the order the course teaches them (notebooks/course.ipynb): each tutorial ends with its exercise
EXERCISES: dict[str, Exercise] = {e.name: e for e in (
    TOOL_DOCSTRING,  # quickstart (and mcp_tools again)
    FUNCTION_MODEL,  # function_model
    EDIT_TOOL_CALL,  # step_debugger
    STOPPING_RULE,  # metrics_and_plots
    FORK_COMPARE_CHOOSE,  # retry_and_fork
    WRITE_SCORER,  # compare_and_choose
    PASS_EVALUATION,  # evaluate_a_prompt
    MEMORY_SECOND_RUN,  # learn_from_feedback
    TOOL_ERRORS,  # code_interpreter
    DELEGATE_TO_AGENT,  # compose_agents
    ENDPOINT_SETTINGS,  # openai_endpoint
)}

for _exercise in EXERCISES.values():
    _exercise.reference = source(_exercise.name)


class UnknownExerciseError(LookupError):
    """No exercise by that name; the message lists them."""


def exercise(name: str) -> Exercise:
    """The course's exercise ``name`` (the same object each time, so its hints go on where they stopped)."""
    try:
        return EXERCISES[name]
    except (KeyError, TypeError):
        raise UnknownExerciseError(f"no exercise {name!r}; the exercises are: {', '.join(EXERCISES)}") from None
