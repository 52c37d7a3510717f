"""Store maintenance as one list of lines: what ``agio store ACTION`` and ``%agio store ACTION`` print.

The terminal and the notebook share this, so both say the same thing; each only decides how to show
the lines (and the terminal turns ``failed`` into its exit status).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core import AgioError
from .base import Repository
from .ids import resolve_run_id, resolve_session_id

ACTIONS = ("stats", "verify", "repair", "delete", "prune", "compact", "export")


@dataclass
class Outcome:
    lines: list[str] = field(default_factory=list)
    failed: bool = False  # verify found damage


def run_maintenance(repo: Repository, action: str, *, path: str | None = None, session: str | None = None,
                    run: str | None = None, superseded: bool = False, older_than: Any = None,
                    fmt: str | None = None, top: int = 5, tool: str = "agio store") -> Outcome:
    """Do ``action`` on ``repo``; bad arguments raise one-line :class:`AgioError`s naming ``tool``."""
    out = Outcome()
    if session is not None:  # ids as shown (8 characters) work: a unique prefix names one
        session = resolve_session_id(repo, session)
    if run is not None:
        run = resolve_run_id(repo, run)
    if action == "stats":
        out.lines.append(repo.stats(top).to_text())
    elif action == "verify":
        problems = repo.verify()
        out.lines += [f"damaged: {problem}" for problem in problems]
        out.lines.append(f"{len(problems)} problem(s) found in the store at {repo.root}"
                         + (f"; `{tool} repair` salvages what is readable" if problems else ""))
        out.failed = bool(problems)
    elif action == "repair":
        done = repo.repair()
        out.lines += [fixed.to_text() for fixed in done]
        out.lines.append(f"{len(done)} file(s) repaired")
    elif action == "delete":
        if (session is None) == (run is None):
            raise AgioError(f"{tool} delete needs exactly one of --session or --run")
        out.lines.append((repo.delete_session(session) if session else repo.delete_run(run)).to_text())
    elif action == "prune":
        if not superseded and older_than is None:
            raise AgioError(f"{tool} prune needs --superseded and/or --older-than DATE")
        try:
            out.lines.append(repo.prune(superseded=superseded, older_than=older_than).to_text())
        except ValueError as exc:
            raise AgioError(str(exc)) from None
    elif action == "compact":
        skipped = repo.compact()
        out.lines += [f"skipped damaged file {p} (run `{tool} repair` first)" for p in skipped]
        out.lines.append("compacted" + (f"; {len(skipped)} damaged file(s) left as they are" if skipped else ""))
    elif action == "export":
        from .export import export_jsonl, export_parquet

        if path is None:
            raise AgioError(f"{tool} export needs a PATH")
        fmt = fmt or ("jsonl" if path.endswith(".jsonl") else "parquet")
        if fmt == "jsonl":
            out.lines.append(f"exported {export_jsonl(repo, path, session)} records to {path}")
        else:
            counts = export_parquet(repo, path, session)
            out.lines.append(f"exported {', '.join(f'{n} {t}' for t, n in counts.items())} to {path}/")
    else:
        raise AgioError(f"{tool}: unknown action {action!r} (one of {', '.join(ACTIONS)})")
    return out
