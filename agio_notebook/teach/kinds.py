"""What each kind of solution must be, checked before anything runs, with one clear line when it is not."""

from __future__ import annotations

import inspect
from typing import Any, Callable

from ..agent import Agent
from ..models import FunctionModel
from ..tools import Tool, tool


class WrongKindError(TypeError):
    """The solution is not what the exercise asks for; the message is one line naming both."""


_DESCRIBED = {"tool": "a tool (a function, or one decorated with @tool)",
              "model": "a model function fn(messages, tools) (or a model)",
              "agent": "an Agent", "prompt": "a prompt (a non-empty str)",
              "scorer": "a scorer fn(run) returning a number or a bool",
              "function": "a function"}


def _got(solution: Any) -> str:
    if isinstance(solution, str):
        return f"a str ({solution[:40]!r})" if solution else "an empty str"
    if solution is None:
        return "None"
    kind = type(solution).__name__
    return f"{'an' if kind[0].lower() in 'aeiou' else 'a'} {kind}"


def _takes(fn: Callable[..., Any], n: int) -> bool:
    try:
        inspect.signature(fn).bind(*range(n))
    except TypeError:
        return False
    except ValueError:  # no signature (a builtin): let the call decide
        return True
    return True


def _is_function(value: Any) -> bool:
    return callable(value) and not isinstance(value, (type, str, Tool, Agent))


def as_solution(kind: str, solution: Any, exercise: str, asks_for: str = "", arity: int | None = None,
                tool_name: str | None = None) -> Any:
    """The solution normalised for its kind (a function becomes a Tool or a FunctionModel), or
    :class:`WrongKindError`."""
    wanted = asks_for or _DESCRIBED[kind]

    def wrong(detail: str = "") -> WrongKindError:
        return WrongKindError(f"exercise {exercise!r} asks for {wanted}; got {_got(solution)}{detail}")

    if kind == "tool":
        if not isinstance(solution, Tool) and not _is_function(solution):
            raise wrong()
        try:
            made = solution if isinstance(solution, Tool) else tool(solution)
        except (TypeError, ValueError) as exc:
            raise wrong(f" that cannot be a tool: {exc}") from None
        if tool_name is not None and made.name != tool_name:
            raise WrongKindError(f"exercise {exercise!r} asks for a tool named {tool_name}; yours is named "
                                 f"{made.name} (rename the function, or @tool(name={tool_name!r}))")
        return made
    if kind == "model":
        if hasattr(solution, "stream") and not isinstance(solution, type):
            return solution
        if not _is_function(solution):
            raise wrong()
        if not _takes(solution, 2):
            raise wrong(" that does not take (messages, tools)")
        return FunctionModel(solution)
    if kind == "agent":
        if not isinstance(solution, Agent):
            raise wrong()
        return solution
    if kind == "prompt":
        if not isinstance(solution, str) or not solution.strip():
            raise wrong()
        return solution
    if kind == "scorer":
        if not _is_function(solution):
            raise wrong()
        if not _takes(solution, 1):
            raise wrong(" that does not take one argument (the run)")
        return solution
    if not _is_function(solution):
        raise wrong()
    if arity is not None and not _takes(solution, arity):
        raise wrong(f" that does not take {arity} arguments")
    return solution
