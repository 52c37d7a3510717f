"""`agio` / `python -m agio_notebook`: an offline demo run and replays of stored runs."""

from __future__ import annotations

import argparse
import asyncio
import sys

from .core import AgioError
from .terminal import EventPrinter


def _demo(args: argparse.Namespace) -> int:
    from .demo import demo_agent
    from .execution import StepRunner
    from .storage import open_repository

    runner = StepRunner(demo_agent(), repository=open_repository(args.store))
    printer = EventPrinter(sys.stdout)

    async def main() -> str:
        run_id = ""
        async for event in runner.run_stream(None, args.query):
            run_id = event.run_id
            printer(event)
        return run_id

    run_id = asyncio.run(main())
    print(f"\nreplay it with: python -m agio_notebook replay {run_id}")
    return 0


def _replay(args: argparse.Namespace) -> int:
    from .storage import iter_events, open_repository

    repo = open_repository(args.store)
    run = repo.get_run(args.run_id)
    if run is None:
        raise AgioError(f"no run {args.run_id!r} in the store at {repo.root}")
    printer = EventPrinter(sys.stdout)
    for event in iter_events(repo, args.run_id):
        printer(event)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agio", description="agio-notebook from the terminal")
    parser.add_argument("--store", default=None, help="store directory (default: $AGIO_STORE or ./.agio)")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the offline demo agent and print its event stream")
    demo.add_argument("query", nargs="?", default="What's the weather in Paris and Tokyo, and what is 14 + 21?")
    replay = sub.add_parser("replay", help="replay a stored run's events")
    replay.add_argument("run_id")
    args = parser.parse_args(argv)
    try:
        return _demo(args) if args.command == "demo" else _replay(args)
    except AgioError as exc:
        print(f"agio: {exc}", file=sys.stderr)
        return 1
