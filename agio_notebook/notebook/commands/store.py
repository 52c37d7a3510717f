"""``%agio store ...``: store maintenance from a notebook, a thin shell over the repository's methods."""

from __future__ import annotations

from typing import Any

from ...core import AgioError
from . import arg, command


@command("store", "store maintenance: stats, verify, repair, delete (--session/--run), prune (--superseded, "
                  "--older-than DATE), compact, export PATH (.jsonl or a Parquet directory)",
         arg("action", choices=["stats", "verify", "repair", "delete", "prune", "compact", "export"]),
         arg("path", nargs="?", default=None), arg("--session", default=None), arg("--run", default=None),
         arg("--superseded", action="store_true"), arg("--older-than", default=None),
         arg("--format", choices=["jsonl", "parquet"], default=None), arg("--top", type=int, default=5))
def store(c: Any, args: Any) -> Any:
    repo = c.repository
    action = args.action
    if action == "stats":
        print(repo.stats(args.top).to_text())
        return None
    if action == "verify":
        problems = repo.verify()
        for problem in problems:
            print(f"damaged: {problem}")
        print(f"agio: {len(problems)} problem(s) found" + ("; %agio store repair salvages what is readable"
                                                           if problems else ""))
        return None
    if action == "repair":
        done = repo.repair()
        for fixed in done:
            print(f"agio: repaired {fixed.path.name}: {fixed.records} records kept; original kept as {fixed.kept_as.name}")
        return None
    if action == "delete":
        if (args.session is None) == (args.run is None):
            raise AgioError("%agio store delete needs exactly one of --session or --run")
        gone = repo.delete_session(args.session) if args.session else repo.delete_run(args.run)
    elif action == "prune":
        if not args.superseded and args.older_than is None:
            raise AgioError("%agio store prune needs --superseded and/or --older-than DATE")
        gone = repo.prune(superseded=args.superseded, older_than=args.older_than)
    elif action == "compact":
        skipped = repo.compact()
        print("agio: compacted" + (f"; left damaged files as they are: {', '.join(p.name for p in skipped)}"
                                   if skipped else ""))
        return None
    else:
        from ...storage.export import export_jsonl, export_parquet

        if args.path is None:
            raise AgioError("%agio store export needs a PATH")
        fmt = args.format or ("jsonl" if args.path.endswith(".jsonl") else "parquet")
        if fmt == "jsonl":
            print(f"agio: exported {export_jsonl(repo, args.path, args.session)} records to {args.path}")
        else:
            counts = export_parquet(repo, args.path, args.session)
            print(f"agio: exported {', '.join(f'{n} {t}' for t, n in counts.items())} to {args.path}/")
        return None
    print(f"agio: {gone.to_text()}")
    return None
