"""A learner's progress: every ``check()`` kept in the store's named journal ``exercises``.

One record per check: the exercise, the seed, passed or not, the share of scenarios passed, the reasons,
the time and a short hash of the solution's source (to tell attempts apart without keeping the code).
It lives in the repository's journal (a file of the TinyDB store, rows of a SQL store), so it is
exported and migrated with the store.
"""

from __future__ import annotations

import hashlib
import inspect
import uuid
import warnings
import weakref
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ..core import AgioError
from ..storage.base import Repository

if TYPE_CHECKING:
    import pandas as pd

    from .report import CheckResult

JOURNAL = "exercises"
KEYS = {"checks": lambda doc: doc["id"]}
COLUMNS = ["exercise", "seed", "passed", "score", "failed", "scenarios", "reasons", "time", "solution", "id"]
_journals: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def _repository(repository: Repository | None) -> Repository:
    if repository is not None:
        return repository
    from ..storage import open_repository

    return open_repository()


def _journal(repository: Repository) -> Any:
    journal = _journals.get(repository)
    if journal is None:
        journal = _journals[repository] = repository.journal(JOURNAL, KEYS)
    return journal


def _source(obj: Any) -> str:
    from ..agent import Agent
    from ..tools import Tool

    if isinstance(obj, str):
        return obj
    if isinstance(obj, Agent):
        return "\n".join([obj.system_prompt or "", obj.model_name, *(_source(t) for t in obj._own_tools())])
    if isinstance(obj, Tool):
        return f"{obj.name}\n{obj.description}\n{_source(obj.function)}"
    target = getattr(obj, "fn", obj)  # a FunctionModel: its function
    try:
        return inspect.getsource(target)
    except (OSError, TypeError):
        code = getattr(target, "__code__", None)
        return repr((code.co_code, code.co_consts)) if code is not None else repr(target)


def solution_hash(solution: Any) -> str:
    """12 hex characters of the SHA-256 of the solution's source (an Agent: its prompt, model and tools)."""
    return hashlib.sha256(_source(solution).encode("utf-8", "replace")).hexdigest()[:12]


def record(result: CheckResult, solution: Any, repository: Repository | None = None) -> dict[str, Any] | None:
    """Keep one check in the journal; a store that cannot be written is a warning, never a failed check."""
    doc = {"id": uuid.uuid4().hex, "exercise": result.exercise, "seed": result.seed, "passed": result.passed,
           "score": round(result.score, 4), "failed": len(result.failed), "scenarios": len(result.scenarios),
           "reasons": ([result.problem] if result.problem else []) + [s.reason for s in result.failed
                                                                     if s.reason and not result.problem],
           "time": datetime.now(timezone.utc).isoformat(), "solution": solution_hash(solution)}
    try:
        _journal(_repository(repository)).append([("checks", doc)])
    except (AgioError, OSError) as exc:
        warnings.warn(f"this check was not kept in your progress: {exc}", stacklevel=3)
        return None
    return doc


def progress(repository: Repository | None = None) -> pd.DataFrame:
    """Every check kept, oldest first: exercise, seed, passed, score (share of scenarios passed), failed,
    scenarios, reasons, time (UTC), solution (hash of its source), id."""
    import pandas as pd

    journal = _journal(_repository(repository))
    journal.refresh()
    docs = list(journal.tables.get("checks", {}).values())
    frame = pd.DataFrame(docs, columns=COLUMNS)
    frame["time"] = pd.to_datetime(frame["time"], utc=True, format="ISO8601").astype("datetime64[ns, UTC]")
    frame = frame.astype({"exercise": "string", "seed": "Int64", "passed": "bool", "score": "float64",
                          "failed": "Int64", "scenarios": "Int64", "solution": "string", "id": "string"})
    return frame.sort_values("time", kind="stable").reset_index(drop=True)


def done(repository: Repository | None = None) -> dict[str, tuple[int, bool]]:
    """Per exercise checked: (how many checks, passed at least once)."""
    frame = progress(repository)
    return {name: (len(group), bool(group["passed"].any())) for name, group in frame.groupby("exercise", sort=False)}
