"""``%agio runs|steps|sessions|tool_calls``: the store as DataFrames, compact unless ``--all``."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ... import frames
from ...storage.ids import resolve_run_id, resolve_session_id
from ...core import InvalidOperationError
from ..compact import WideFrame, compact
from ..stores import every_run
from . import arg, command

_SESSION = arg("--session", default=None, help="only this session")
_RUN = arg("--run", default=None, help="only this run")
_ALL = arg("--all", action="store_true", help="every column, as the Python frame has them")


def ids(c: Any, args: Any) -> tuple[str | None, str | None]:
    """``--session`` and ``--run`` as full ids: a prefix shown in a table works; one naming nothing is an error."""
    session, run = getattr(args, "session", None), getattr(args, "run", None)
    return (None if session is None else resolve_session_id(c.repository, session),
            None if run is None else resolve_run_id(c.repository, run))


def _shown(frame: pd.DataFrame, kind: str, args: Any) -> pd.DataFrame:
    return WideFrame(frame) if args.all else compact(frame, kind)


@command("runs", "runs: short ids, one line of text, the main counts (--all: every column; --every-store: the "
                 "runs of every notebook's own store too)", _SESSION, _ALL,
         arg("--every-store", action="store_true",
             help="the default store's runs and those of every own store beside it (%%agio config --own-store)"))
def runs(c: Any, args: Any) -> Any:
    if args.every_store:
        if args.session is not None:
            raise InvalidOperationError("--every-store lists whole stores; drop --session")
        frame = every_run(c.base_store)
        return WideFrame(frame) if args.all else compact(frame, "runs")
    return _shown(frames.runs(ids(c, args)[0], repository=c.repository), "runs", args)


@command("steps", "steps: one line each (--all: every column)", _SESSION, _RUN, _ALL)
def steps(c: Any, args: Any) -> Any:
    return _shown(frames.steps(*ids(c, args), repository=c.repository), "steps", args)


@command("tool_calls", "tool calls: one line each (--all: every column)", _SESSION, _RUN, _ALL)
def tool_calls(c: Any, args: Any) -> Any:
    return _shown(frames.tool_calls(*ids(c, args), repository=c.repository), "tool_calls", args)


@command("sessions", "sessions: short ids, fork origins, run counts (--all: every column)", _ALL)
def sessions(c: Any, args: Any) -> Any:
    return _shown(frames.sessions(repository=c.repository), "sessions", args)
