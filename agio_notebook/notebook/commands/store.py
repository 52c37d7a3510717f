"""``%agio store ...``: store maintenance from a notebook, a thin shell over the repository's methods."""

from __future__ import annotations

from typing import Any

from ...storage.maintenance import ACTIONS, run_maintenance
from . import arg, command


@command("store", "store maintenance: stats, verify, repair, delete (--session/--run), prune (--superseded, "
                  "--older-than DATE), compact, export PATH (.jsonl or a Parquet directory)",
         arg("action", choices=ACTIONS),
         arg("path", nargs="?", default=None), arg("--session", default=None), arg("--run", default=None),
         arg("--superseded", action="store_true"), arg("--older-than", default=None),
         arg("--format", choices=["jsonl", "parquet"], default=None), arg("--top", type=int, default=5))
def store(c: Any, args: Any) -> None:
    outcome = run_maintenance(c.repository, args.action, path=args.path, session=args.session, run=args.run,
                              superseded=args.superseded, older_than=args.older_than, fmt=args.format,
                              top=args.top, tool="%agio store")
    print("\n".join(outcome.lines))
