"""Ids typed back: a unique prefix of at least ``MIN_PREFIX`` characters names an id, as in git.

Everything shows ids cut to 8 characters (reprs, transcripts, tables), so every function and command
that takes a run, session, batch, execution or memory id resolves it here first. A full id is taken
as is; a prefix matching one id becomes that id; a prefix matching several is one line listing them;
no match is one line too. Runs and sessions are looked up by each backend (``ids_with_prefix``: an
index scan, never a whole-store read); batches, executions and memory records by their own rooms,
through :func:`resolve_prefix`.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from ..core import AmbiguousIdError, NotFoundError

MIN_PREFIX = 6
_SHOWN = 8  # candidates listed in an ambiguity message


_LONGEST_SHOWN = 80


def _shown(wanted: str) -> str:
    """An id as an error line quotes it: whole, or its start and its length when it is longer than any id."""
    if len(wanted) <= _LONGEST_SHOWN:
        return repr(wanted)
    return f"{wanted[:40]!r}… ({len(wanted)} characters)"


def resolve_prefix(kind: str, text: Any, exists: Callable[[str], bool],
                   candidates: Callable[[str], Iterable[str]], *, where: str = "in the store") -> str:
    """The one id of ``kind`` that ``text`` names: the id itself, or a unique prefix of one.

    ``exists(id)`` answers an exact id; ``candidates(prefix)`` lists ids starting with the prefix (it
    may list more; they are filtered here).
    """
    if not isinstance(text, str):
        raise TypeError(f"a {kind} id is a string, got {type(text).__name__}")
    wanted = text.strip()
    if not wanted:
        raise NotFoundError(f"no {kind} id given")
    if exists(wanted):
        return wanted
    if len(wanted) > _LONGEST_SHOWN * 4:  # no prefix of an id: said without looking further, not echoed whole
        raise NotFoundError(f"no {kind} {_shown(wanted)} {where}")
    if len(wanted) < MIN_PREFIX:
        if any(c.startswith(wanted) for c in candidates(wanted)):
            raise NotFoundError(f"no {kind} {wanted!r} {where}: a prefix needs at least {MIN_PREFIX} characters")
        raise NotFoundError(f"no {kind} {_shown(wanted)} {where}")
    matches = sorted({c for c in candidates(wanted) if c.startswith(wanted)})
    if not matches and wanted.lower() != wanted:  # ids are lower-case hex; a prefix typed in capitals still names one
        return resolve_prefix(kind, wanted.lower(), exists, candidates, where=where)
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise NotFoundError(f"no {kind} {_shown(wanted)} {where}")
    shown = ", ".join(matches[:_SHOWN]) + (f" and {len(matches) - _SHOWN} more" if len(matches) > _SHOWN else "")
    raise AmbiguousIdError(f"{kind} id {wanted!r} is ambiguous: it starts {len(matches)} {kind} ids ({shown}); "
                           "type more characters")


def _candidates(repository: Any, kind: str) -> Callable[[str], Iterable[str]]:
    lookup = getattr(repository, "ids_with_prefix", None)
    if lookup is not None:
        return lambda prefix: lookup(kind, prefix)
    if kind == "run":  # a Repository of another make: read what the protocol offers
        return lambda prefix: (d["id"] for d in repository.iter_run_dicts())
    return lambda prefix: (s.session_id for s in repository.list_sessions())


def _where(repository: Any) -> str:
    root = getattr(repository, "root", None)
    return f"in the store at {root}" if root else "in the store"


def _exists(repository: Any, kind: str) -> Callable[[str], bool]:
    """A full id is one keyed read (tens of microseconds); only a prefix asks for candidates."""
    get = repository.get_run if kind == "run" else repository.get_session
    return lambda i: get(i) is not None


def resolve_run_id(repository: Any, run_id: Any) -> str:
    """The full id of the run ``run_id`` names (a full id or a unique prefix of 6+ characters)."""
    return resolve_prefix("run", run_id, _exists(repository, "run"), _candidates(repository, "run"),
                          where=_where(repository))


def resolve_session_id(repository: Any, session_id: Any) -> str:
    """The full id of the session ``session_id`` names (a full id or a unique prefix of 6+ characters)."""
    return resolve_prefix("session", session_id, _exists(repository, "session"), _candidates(repository, "session"),
                          where=_where(repository))


def prefix_pattern(prefix: str) -> str:
    """A SQL ``LIKE`` pattern (escape character ``\\``) for ids starting with ``prefix``."""
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def resolve_run_or_session(repository: Any, ref: Any, kind: str = "run or session") -> tuple[str, str]:
    """``("run", id)`` or ``("session", id)`` for a reference that may name either (diff, sweep)."""
    if isinstance(ref, str) and _exists(repository, "run")(ref.strip()):
        return "run", ref.strip()
    if isinstance(ref, str) and _exists(repository, "session")(ref.strip()):
        return "session", ref.strip()
    runs, sessions = _candidates(repository, "run"), _candidates(repository, "session")
    kinds: dict[str, str] = {}

    def candidates(prefix: str) -> list[str]:
        kinds.update({i: "run" for i in runs(prefix) if i.startswith(prefix)})
        kinds.update({i: "session" for i in sessions(prefix) if i.startswith(prefix)})
        return list(kinds)

    found = resolve_prefix(kind, ref, lambda i: False, candidates, where=_where(repository))
    return kinds[found], found


def resolve_filter(resolve: Callable[[Any, Any], str], repository: Any, value: str | None) -> str | None:
    """For filters (frames): a prefix becomes its id; an id that names nothing stays (an empty frame),
    a prefix of several ids is still one clear error."""
    if value is None:
        return None
    try:
        return resolve(repository, value)
    except AmbiguousIdError:
        raise
    except NotFoundError:
        return value
