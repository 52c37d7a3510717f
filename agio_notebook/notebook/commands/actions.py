"""``%agio actions`` and ``%agio replay-code``: the built-in actions' records, and the explicit replay
of a session's sandboxed code into a fresh interpreter (after a retry or a fork)."""

from __future__ import annotations

from typing import Any

from ... import frames
from ...storage.ids import resolve_session_id
from . import arg, command
from .data import ids


@command("actions", "actions (sandboxed code, files, web, browser) as a DataFrame",
         arg("--session", default=None, help="only this session"), arg("--run", default=None, help="only this run"))
def actions(c: Any, args: Any) -> Any:
    return frames.actions(*ids(c, args), repository=c.repository)


@command("replay-code", "re-run the session's recorded run_python code, up to step N, in a fresh sandboxed "
                        "interpreter (variables come back after a retry or fork; files are untouched)",
         arg("--session", default=None, help="default: the current session"),
         arg("--upto", type=int, default=None, help="last step whose code is replayed"))
def replay_code(c: Any, args: Any) -> str:
    from ...core import InvalidOperationError
    from ...toolkits import replay_python

    session = args.session or c.session_id
    if session is None:
        raise InvalidOperationError("no current session; pass --session")
    session = resolve_session_id(c.repository, session)
    results = replay_python(session, c.repository, args.upto)
    failed = [i + 1 for i, r in enumerate(results) if r.error]
    return (f"replayed {len(results)} run_python call(s) of session {session[:8]}"
            + (f"; call(s) {', '.join(map(str, failed))} failed again" if failed else ""))
