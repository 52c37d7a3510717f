"""Asking the learner's model function one more question: its last call again, with another tool result.

A model function that answers with its own arithmetic instead of the tool's result is right whenever the
tool is; only a changed result tells them apart. The probe is the check's, not the course's model: it
is said in the reason when it fails.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

from ...models import FunctionModel, Reply
from ..exercise import Probe, Trial
from ..running import SolutionError, call_solution
from ..values import unstated

Messages = list[dict[str, Any]]


async def ask_again(trial: Trial, learner: Any, change: Callable[[Messages], Messages]) -> tuple[str | None, Any]:
    """``(text, reply)`` of the learner's model function on its last call's messages as ``change`` makes
    them; ``(None, None)`` when the solution is not a model function or never answered after a tool."""
    model = learner.solution
    if not isinstance(model, FunctionModel) or not trial.watch.calls:
        return None, None
    messages, tools = copy.deepcopy(trial.watch.calls[-1])
    if not messages or messages[-1].get("role") != "tool":
        return None, None
    try:
        reply = await call_solution(model.fn, change(messages), tools, what="model function", watch=None,
                                    cap=learner.cap)
    except SolutionError:
        return None, None
    if isinstance(reply, str):
        return reply, reply
    if isinstance(reply, Reply) and not reply.tool_calls:
        return reply.text or "", reply
    return None, reply


def with_last_tool_result(content: str) -> Callable[[Messages], Messages]:
    def change(messages: Messages) -> Messages:
        messages[-1] = {**messages[-1], "content": content}
        return messages
    return change


def follows_the_tool(result: str, number: float, source: str, advice: str = "", besides: tuple[float, ...] = ()
                     ) -> Probe:
    """A probe: the learner's last call again, with ``source`` (the tool, as a reason names it) answering
    ``result``; the answer must then state ``number`` (``values.unstated``: not denied, doubted or beside a
    number of its own; ``besides`` may stand with it), or the model is not reading what the tool said."""
    async def probe(trial: Trial, learner: Any) -> str | None:
        text, reply = await ask_again(trial, learner, with_last_tool_result(result))
        if reply is None and text is None:
            return None
        if text is None or unstated(text, number, besides=besides) is not None:
            return (f"your model does not answer with what {source} returned: given the same conversation with "
                    f"{source} returning {result!r}, it answered {(text if text is not None else reply)!r}{advice}")
        return None
    return probe
