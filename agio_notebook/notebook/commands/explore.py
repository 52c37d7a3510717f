"""``%agio diff|tree``: compare two runs, attempts or branches; see a session as a tree."""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError

from ...core import AgioError
from . import arg, command


@command("diff", "compare two runs, attempts or sessions side by side (steps, text, tool calls, tokens, "
                 "latency, cost)", arg("a", help="run or session id"), arg("b", help="run or session id"))
def diff(c: Any, args: Any) -> Any:
    from ...explore import diff as run_diff

    try:
        return run_diff(args.a, args.b, repository=c.repository)
    except AgioError as exc:
        raise UsageError(f"%agio diff: {exc}") from None


@command("tree", "a session's runs, retries and forks as a tree; click a run for its transcript",
         arg("session", nargs="?", default=None, help="default: the current session"))
def tree(c: Any, args: Any) -> Any:
    from ...explore import tree as run_tree

    session = args.session or c.session_id
    if session is None:
        raise UsageError("%agio tree: no current session; pass a session id")
    try:
        shown = run_tree(family_root(c.repository, session), repository=c.repository)
    except AgioError as exc:
        raise UsageError(f"%agio tree: {exc}") from None
    shown.data["focus"] = session  # the session asked for (a fork is drawn inside its family)
    return shown


def family_root(repository: Any, session_id: str) -> str:
    """The session a fork (of a fork ...) was first taken from, so its tree shows where it came from."""
    seen = {session_id}
    session = repository.get_session(session_id)
    while session is not None and session.forked_from and session.forked_from not in seen:
        parent = repository.get_session(session.forked_from)
        if parent is None:  # the origin was deleted: the fork is its own root
            break
        seen.add(parent.session_id)
        session = parent
    return session.session_id if session is not None else session_id
