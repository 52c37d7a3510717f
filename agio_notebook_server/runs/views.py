"""What the panel's endpoints answer, as plain JSON-ready dicts: called on the store's worker thread.

Rows are summaries (a run's first words, its totals); a transcript is the same MIME data a finished
cell saves (``agio_notebook.notebook.transcript.bundle_for_run``), drawn by the same renderer; a diff and a
tree are the data ``agio_notebook.diff`` and ``tree`` show in a notebook. Nothing here writes to the store.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .store import QUERY_CHARS, PanelError, PanelStore

FILTERS = ("agent", "status", "notebook", "user", "text", "session_id")
PAGE = 50


def given(value: str, what: str) -> str:
    """A request's id or filter as given; one with a NUL character names nothing any store holds (400)."""
    if "\x00" in value:
        raise PanelError(f"{what} cannot hold a NUL character, got {value[:80]!r}", 400)
    return value


def notebook_path(store: PanelStore, notebook: str | None) -> str | None:
    """A run's notebook as a path the server can open (relative to its root), or None."""
    if not notebook:
        return None
    path = Path(notebook).expanduser()  # a kernel names a notebook in its home from ~ (core/origin.py)
    if not path.is_absolute():
        return notebook
    try:
        return path.relative_to(store.root_dir).as_posix()
    except ValueError:
        return None


def run_row(store: PanelStore, run: Any) -> dict[str, Any]:
    m = run.metrics
    return {"id": run.id, "session_id": run.session_id, "agent": run.agent_name, "model": run.model_name,
            "query": (run.query or "")[:QUERY_CHARS], "status": run.status.value, "kind": run.kind,
            "attempt": run.attempt, "superseded_by": run.superseded_by, "parent_run_id": run.parent_run_id,
            "steps": m.steps, "tokens": m.total_tokens, "cost": m.cost, "duration_ms": m.duration_ms or None,
            "started_at": run.started_at, "ended_at": run.ended_at, "notebook": run.notebook,
            "notebook_path": notebook_path(store, run.notebook), "user": run.user,
            "error": " ".join((run.error or "").split())[:300] or None}


def status(store: PanelStore) -> dict[str, Any]:
    """Which store, and who reads it (on PostgreSQL: the role, and its part in a classroom if any); a store
    that does not exist yet is ``state: none`` with the line that says how one comes to be."""
    info: dict[str, Any] = {"kind": store.kind, "where": store.where, "state": "ok", "shared": store.kind == "postgres"}
    if not store.exists():
        return {**info, "state": "none", "message": store.none_yet()}
    repo = store.repository()
    if store.kind == "postgres":
        from agio_notebook.classroom.roles import class_role

        info["user"], info["role"] = class_role(repo)
    return info


def runs_page(store: PanelStore, limit: str = "", cursor: str = "", **filters: str) -> dict[str, Any]:
    from agio_notebook.storage import RunFilter

    where = RunFilter(**{k: given(v, f"the {k} filter") for k, v in filters.items() if k in FILTERS and v})
    limit = limit or str(PAGE)
    if not re.fullmatch(r"[0-9]{1,6}", limit):  # ASCII digits (str.isdigit takes '²'), and not 5000 of them
        raise PanelError(f"limit is a number of runs, got {limit[:20]!r}{'...' if len(limit) > 20 else ''}", 400)
    page = store.repository().query_runs(where, int(limit), cursor or None)
    return {"runs": [run_row(store, r) for r in page.runs], "next_cursor": page.next_cursor}


def facets(store: PanelStore) -> dict[str, Any]:
    found = store.repository().run_facets()
    notebooks = [{"value": n, "label": notebook_path(store, n) or n} for n in found["notebook"]]
    return {**{k: [{"value": v, "label": v} for v in values] for k, values in found.items()}, "notebook": notebooks}


def transcript(store: PanelStore, run_id: str) -> dict[str, Any]:
    from agio_notebook.notebook.transcript import MIME_TYPE, bundle_for_run
    from agio_notebook.storage.ids import resolve_run_id

    repo = store.repository()
    run_id = resolve_run_id(repo, given(run_id, "a run id"))
    run = repo.get_run(run_id)
    return {"run": run_row(store, run), "mime_type": MIME_TYPE, "data": bundle_for_run(repo, run_id)[MIME_TYPE]}


def diff(store: PanelStore, a: str, b: str) -> dict[str, Any]:
    from agio_notebook.explore.diff import MIME_TYPE, diff as run_diff

    a, b = given(a, "a run id"), given(b, "a run id")
    return {"mime_type": MIME_TYPE, "data": run_diff(a, b, repository=store.repository()).to_dict()}


def tree(store: PanelStore, session_id: str) -> dict[str, Any]:
    from agio_notebook.explore.tree import MIME_TYPE, tree as run_tree

    session_id = given(session_id, "a session id")
    return {"mime_type": MIME_TYPE, "data": run_tree(session_id, repository=store.repository()).to_dict()}


def progress(store: PanelStore) -> dict[str, Any]:
    """The class dashboard: each student's exercises, the common failing reasons, their latest runs."""
    from agio_notebook.classroom.progress import dashboard

    data = dashboard(store.repository())
    for runs in data["latest_runs"].values():
        runs[:] = [run_row(store, r) for r in runs]
    return data
