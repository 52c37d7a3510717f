"""``%agio runs|steps|sessions|tool_calls``: the store as DataFrames."""

from __future__ import annotations

from typing import Any

from ... import frames
from . import arg, command

_SESSION = arg("--session", default=None, help="only this session")
_RUN = arg("--run", default=None, help="only this run")


@command("runs", "runs as a DataFrame", _SESSION)
def runs(c: Any, args: Any) -> Any:
    return frames.runs(args.session, repository=c.repository)


@command("steps", "steps as a DataFrame", _SESSION, _RUN)
def steps(c: Any, args: Any) -> Any:
    return frames.steps(args.session, args.run, repository=c.repository)


@command("tool_calls", "tool calls as a DataFrame", _SESSION, _RUN)
def tool_calls(c: Any, args: Any) -> Any:
    return frames.tool_calls(args.session, args.run, repository=c.repository)


@command("sessions", "sessions as a DataFrame")
def sessions(c: Any, args: Any) -> Any:
    return frames.sessions(repository=c.repository)
