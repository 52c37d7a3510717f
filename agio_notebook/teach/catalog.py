"""The course's exercises in course order, by name."""

from __future__ import annotations

from ..core import AgioError
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

# the tutorial that ends with each exercise, in the order the course teaches them (notebooks/course.ipynb)
TUTORIALS: dict[str, str] = {
    "tool_docstring": "quickstart",  # and mcp_tools again
    "function_model": "function_model",
    "edit_tool_call": "step_debugger",
    "stopping_rule": "metrics_and_plots",
    "fork_compare_choose": "retry_and_fork",
    "write_scorer": "compare_and_choose",
    "pass_evaluation": "evaluate_a_prompt",
    "memory_second_run": "learn_from_feedback",
    "tool_errors": "code_interpreter",
    "delegate_to_agent": "compose_agents",
    "endpoint_settings": "openai_endpoint",
}
EXERCISES: dict[str, Exercise] = {e.name: e for e in sorted(
    (TOOL_DOCSTRING, FUNCTION_MODEL, EDIT_TOOL_CALL, STOPPING_RULE, FORK_COMPARE_CHOOSE, WRITE_SCORER, PASS_EVALUATION,
     MEMORY_SECOND_RUN, TOOL_ERRORS, DELEGATE_TO_AGENT, ENDPOINT_SETTINGS), key=lambda e: list(TUTORIALS).index(e.name))}
for _exercise in EXERCISES.values():
    _exercise.reference = source(_exercise.name)


class UnknownExerciseError(AgioError, LookupError):
    """No exercise by that name; the message lists them."""


def exercise(name: str) -> Exercise:
    """The course's exercise ``name`` (the same object each time, so its hints go on where they stopped)."""
    try:
        return EXERCISES[name]
    except (KeyError, TypeError):
        raise UnknownExerciseError(f"no exercise {name!r}; the exercises are: {', '.join(EXERCISES)}") from None
