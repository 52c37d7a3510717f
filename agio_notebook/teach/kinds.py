"""What each kind of solution must be, checked before anything runs, and the learner's code made safe to
run: each call in a thread it can be abandoned in (see :mod:`.guard`)."""

from __future__ import annotations

import copy
import dataclasses
import inspect
from typing import Any, Callable

from ..agent import Agent
from ..models import FunctionModel, Reply, ToolCallSpec
from ..tools import Tool, tool
from .guard import Watch, call_guarded, explain


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
    if inspect.iscoroutine(solution):
        return "a coroutine (you called an async function without `await`, or passed its call, not the function)"
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


def signature(fn: Any) -> str:
    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return "(...)"


def as_solution(kind: str, solution: Any, exercise: str, asks_for: str = "", arity: int | None = None,
                tool_name: str | None = None) -> Any:
    """The solution normalised for its kind (a function becomes a Tool or a FunctionModel), or
    :class:`WrongKindError`. A tool's name does not matter: it is offered to the model under the name the
    exercise's model calls (``tool_name``)."""
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
            made = dataclasses.replace(made, name=tool_name, _schema=None)
        return made
    if kind == "model":
        if isinstance(solution, Agent):
            raise wrong(" (an exercise of this kind asks for the model alone: pass the function)")
        if hasattr(solution, "stream") and not isinstance(solution, type):
            return solution
        if not _is_function(solution):
            raise wrong()
        if not _takes(solution, 2):
            raise wrong(f" that takes {signature(solution)}, not (messages, tools)")
        return FunctionModel(solution, name=getattr(solution, "__name__", None))
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
            raise wrong(f" that takes {signature(solution)}, not one argument (the run)")
        return solution
    if not _is_function(solution):
        raise wrong()
    if arity is not None and not _takes(solution, arity):
        raise wrong(f" that takes {signature(solution)}, not {arity} argument{'s' if arity != 1 else ''}")
    return solution


def guarded_tool(made: Tool, watch: Watch, cap: float) -> Tool:
    """The tool with its function run by :func:`call_guarded` (what it raises is still its error)."""
    function = made.function

    async def run(**kwargs: Any) -> Any:
        return await call_guarded(lambda: function(**kwargs), what=f"tool {made.name}", watch=watch, cap=cap)

    return dataclasses.replace(made, function=run, is_async=True, timeout=cap + 2, _schema=None)


def guarded_model(model: Any, watch: Watch, cap: float) -> Any:
    """A model function's calls guarded and recorded in ``watch.calls``; any other model copied fresh
    (a script starts again in every scenario)."""
    if isinstance(model, FunctionModel) and not inspect.isasyncgenfunction(model.fn):
        fn = model.fn

        async def call(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
            watch.calls.append((copy.deepcopy(messages), copy.deepcopy(tools)))
            try:
                value = await call_guarded(fn, copy.deepcopy(messages), tools, what=f"model function {model.name}()",
                                           watch=watch, cap=cap)
            except TimeoutError:
                raise
            except Exception as exc:  # noqa: BLE001 - said as the learner's error, then the run fails on it
                watch.note(explain(exc, "model function"))
                raise
            problem = reply_problem(value)
            if problem:
                watch.note(f"your model function {problem}")
                raise TypeError(f"your model function {problem}")
            return value

        return FunctionModel(call, name=model.name)
    try:
        return copy.deepcopy(model)
    except Exception:  # noqa: BLE001 - a model holding a client cannot be copied; it keeps its own state
        return model


def reply_problem(value: Any) -> str | None:
    """What is wrong with a model function's return value, said for a learner (None: a reply)."""
    if isinstance(value, (str, Reply, ToolCallSpec)):
        return None
    if isinstance(value, dict):
        shown = repr(value)
        return (f"returned a message dict ({shown[:60]}{'…' if len(shown) > 60 else ''}): return the text "
                "(a str), or Reply.call(name, ...) for a tool call")
    if value is None:
        return "returned None (a missing return?): return the text (a str), or Reply.call(name, ...)"
    return (f"returned {_got(value)} ({str(value)[:40]}): return the text (a str, e.g. str(value)), or "
            "Reply.call(name, ...)")


def guarded_agent(agent: Agent, watch: Watch, cap: float) -> Agent:
    """The agent with its tools and model function guarded (its own object is left as it was)."""
    tools = [guarded_tool(t, watch, cap) if not getattr(t.function, "needs_scope", False) else t
             for t in agent._own_tools()]
    return Agent(model=guarded_model(agent.model, watch, cap), tools=tools, system_prompt=agent.system_prompt,
                 name=agent.name, config=agent.config, memory=agent.memory, model_settings=agent.model_settings,
                 handoffs=agent.handoffs, description=agent.description)


def guarded_function(fn: Callable[..., Any], what: str, watch: Watch, cap: float) -> Callable[..., Any]:
    async def call(*args: Any) -> Any:
        return await call_guarded(fn, *args, what=what, watch=watch, cap=cap)
    return call


def takes_arguments(names: tuple[str, ...]) -> Callable[[Tool], str | None]:
    """A preflight for a tool exercise: the tool must take exactly the arguments the scenarios' model
    passes (by name), and need no other."""
    def problem(made: Tool) -> str | None:
        props = list((made.parameters or {}).get("properties", {}))
        required = set((made.parameters or {}).get("required", []))
        call = f"{made.name}({', '.join(f'{n}=...' for n in names)})"
        missing = [n for n in names if n not in props]
        if missing:
            return (f"the model calls {call}, but your {made.name} takes ({', '.join(props)}): name its "
                    f"argument{'s' if len(names) > 1 else ''} {' and '.join(names)}")
        extra = sorted(required - set(names))
        if extra:
            return (f"the model calls {call}, but your {made.name} also needs {', '.join(extra)}, which the "
                    "model never passes: give it a default, or take it away")
        return None
    return problem
