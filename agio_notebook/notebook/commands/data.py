"""``%agio runs|steps|sessions|tool_calls``: the store as DataFrames, compact unless ``--all``."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ... import frames
from ..compact import WideFrame, compact
from . import arg, command

_SESSION = arg("--session", default=None, help="only this session")
_RUN = arg("--run", default=None, help="only this run")
_ALL = arg("--all", action="store_true", help="every column, as the Python frame has them")


def _shown(frame: pd.DataFrame, kind: str, args: Any) -> pd.DataFrame:
    return WideFrame(frame) if args.all else compact(frame, kind)


@command("runs", "runs: short ids, one line of text, the main counts (--all: every column)", _SESSION, _ALL)
def runs(c: Any, args: Any) -> Any:
    return _shown(frames.runs(args.session, repository=c.repository), "runs", args)


@command("steps", "steps: one line each (--all: every column)", _SESSION, _RUN, _ALL)
def steps(c: Any, args: Any) -> Any:
    return _shown(frames.steps(args.session, args.run, repository=c.repository), "steps", args)


@command("tool_calls", "tool calls: one line each (--all: every column)", _SESSION, _RUN, _ALL)
def tool_calls(c: Any, args: Any) -> Any:
    return _shown(frames.tool_calls(args.session, args.run, repository=c.repository), "tool_calls", args)


@command("sessions", "sessions: short ids, fork origins, run counts (--all: every column)", _ALL)
def sessions(c: Any, args: Any) -> Any:
    return _shown(frames.sessions(repository=c.repository), "sessions", args)
