"""`agio` / `python -m agio_notebook`: an offline demo run, replays of stored runs, store maintenance."""

from __future__ import annotations

import argparse
import asyncio
import sys
import warnings
from pathlib import Path
from typing import Any

from .core import AgioError
from .storage.maintenance import ACTIONS
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
    from .storage.ids import resolve_run_id

    repo = open_repository(args.store)
    run_id = resolve_run_id(repo, args.run_id)  # the 8 characters `agio runs` shows work too
    run = repo.get_run(run_id)
    if run is None:
        raise AgioError(f"no run {run_id!r} in the store at {repo.root}")
    printer = EventPrinter(sys.stdout)
    ended = False
    for event in iter_events(repo, run_id):
        printer(event)
        ended = ended or event.type.is_terminal
    if not ended:  # e.g. interrupted: its process died before a terminal event
        print(f"■ {run.status.value}" + (f": {run.error}" if run.error else ""))
    return 0


def _runs(args: argparse.Namespace) -> int:
    from .storage import open_repository
    from .storage.ids import resolve_session_id

    repo = open_repository(args.store)
    runs = repo.list_runs(resolve_session_id(repo, args.session) if args.session else None)
    print(f"{'run':<10} {'session':<10} {'kind':<7} {'status':<12} {'steps':>5}  query")
    for run in runs:
        query = (run.query or "").replace("\n", " ")
        print(f"{run.id[:8]:<10} {run.session_id[:8]:<10} {run.kind:<7} {run.status.value:<12} "
              f"{run.metrics.steps:>5}  {query[:60]}")
    return 0


def _store(args: argparse.Namespace) -> int:
    from .storage import open_repository
    from .storage.maintenance import run_maintenance

    if args.action == "migrate":
        return _migrate(args)
    outcome = run_maintenance(open_repository(args.store), args.action, path=args.path, session=args.session,
                              run=args.run, superseded=args.superseded, older_than=args.older_than,
                              fmt=args.format, top=args.top)
    print("\n".join(outcome.lines))
    return 1 if outcome.failed else 0


def _migrate(args: argparse.Namespace) -> int:
    from .storage import missing_store, new_repository
    from .storage.migrate import migrate

    if args.path is None or args.dest is None:
        raise AgioError("agio store migrate needs SRC and DST (each a directory path, sqlite:///FILE or postgresql://…)")
    missing = missing_store(args.path)  # opening it would make an empty store to copy from
    if missing is not None:
        raise AgioError(f"{missing} to migrate from")
    source, target = new_repository(args.path), new_repository(args.dest)
    try:
        report = migrate(source, target, merge=args.merge)
    finally:
        source.close()
        target.close()
    print(report.to_text(str(target.root)))
    return 0


def _mcp(args: argparse.Namespace) -> int:
    """``agio mcp serve``: the store and the named agents over stdio, or streamable HTTP with a token."""
    try:
        from .serve import build_server, http_app
    except ImportError as exc:  # the MCP SDK is an extra
        raise AgioError(f"agio mcp serve needs the MCP SDK: pip install 'agio-notebook[mcp]' ({exc})") from None
    repository, agents = _serving(args, "mcp")
    server = build_server(agents, repository, expose_store=args.expose_store)
    if not args.http:
        server.run("stdio")
        return 0
    running, shown = _serve_http(args, http_app(server), "MCP", "/mcp")
    return _serve_until_interrupted(running, f"serving {', '.join(agents)} on {running.url} (bearer token: {shown})")


def _a2a(args: argparse.Namespace) -> int:
    """``agio a2a serve``: the named agents over A2A (HTTP, a bearer token always)."""
    try:
        from .serve.a2a_server import agent_urls, build_a2a_app
    except ImportError as exc:  # the A2A SDK is an extra
        raise AgioError(f"agio a2a serve needs the A2A SDK: pip install 'agio-notebook[a2a]' ({exc})") from None
    repository, agents = _serving(args, "a2a")
    running, shown = _serve_http(args, build_a2a_app(agents, repository, expose_store=args.expose_store), "A2A", "")
    urls = ", ".join(f"{name} at {url}" for name, url in agent_urls(running.url, agents).items())
    return _serve_until_interrupted(running, f"serving {urls} (bearer token: {shown})")


def _serving(args: argparse.Namespace, what: str) -> tuple[Any, dict]:
    """What ``agio mcp|a2a serve`` serves: an existing store, the named agents; the export, if asked."""
    from .serve import load_agent_paths
    from .storage import existing_store

    repository = existing_store(args.store)
    agents = load_agent_paths(args.agents, f"agio {what} serve")
    if args.otel:
        from .telemetry import enable

        enable(args.otel)
    return repository, agents


def _serve_http(args: argparse.Namespace, app: Any, what: str, path: str) -> tuple[Any, str]:
    """``app`` on HTTP behind a token from ``$AGIO_<WHAT>_TOKEN`` (or a new one); the server, and the token as
    it may be shown (never one the environment gave)."""
    import os

    from .serve import new_token, start_http

    variable = f"AGIO_{what}_TOKEN"
    token = os.environ.get(variable) or new_token()
    try:
        running = start_http(app, token, args.host, args.port, path=path, allowed_hosts=args.allow_host,
                             allowed_origins=args.allow_origin, what=what)
    except (OSError, ValueError) as exc:
        raise AgioError(str(exc)) from None
    return running, f"from ${variable}" if os.environ.get(variable) else token


def _serve_until_interrupted(running: Any, line: str) -> int:
    import time

    print(f"agio: {line}; Ctrl-C stops", file=sys.stderr, flush=True)
    try:
        while running.running:
            time.sleep(0.5)
    except KeyboardInterrupt:
        running.stop()
    return 0


def _course(args: argparse.Namespace) -> int:
    from .teach.export import export_nbgrader, export_otter

    if not (args.nbgrader or args.otter):
        raise AgioError("agio course export: say where, with --nbgrader DIR and/or --otter DIR")
    names = [n.strip() for n in args.exercises.split(",") if n.strip()] if args.exercises else None
    if args.points <= 0:
        raise AgioError(f"--points must be more than 0, got {args.points:g}")
    if args.nbgrader:
        written = export_nbgrader(args.nbgrader, names, points=args.points, assignment=args.assignment)
        print(f"nbgrader: {written} (then, in {args.nbgrader}: nbgrader generate_assignment {args.assignment})")
    if args.otter:
        written = export_otter(args.otter, names, points=args.points, assignment=args.assignment)
        print(f"otter: {written} (then: otter assign {written} DIST)")
    return 0


def _classroom(args: argparse.Namespace) -> int:
    """``agio classroom init | add-student | remove-student``: a class on one PostgreSQL store."""
    from .classroom import admin
    from .classroom.hub_config import render
    from .classroom.roles import parse_students

    if args.action == "init":
        if not args.teacher or not args.students:
            raise AgioError("agio classroom init URL --teacher NAME --students NAMES|FILE")
        report = admin.init(args.url, args.teacher, parse_students(args.students), args.secrets)
        roster = admin.roster(args.url)
        assert roster is not None
        config = render(roster.database, roster.teacher, args.secrets, args.course, trial_password=args.trial_password)
        if args.hub_config:
            Path(args.hub_config).write_text(config)
            report.lines.append(f"JupyterHub configuration in {args.hub_config} (jupyterhub -f {args.hub_config})")
        else:
            print(config)
    elif args.action == "add-student":
        if not args.names:
            raise AgioError("agio classroom add-student URL NAMES|FILE")
        report = admin.add_student(args.url, parse_students(args.names), args.secrets)
    else:
        if not args.names:
            raise AgioError("agio classroom remove-student URL NAME [--export FILE]")
        report = admin.remove_student(args.url, args.names, args.secrets, args.export)
    for line in report.lines:
        print(f"agio: {line}", file=sys.stderr)
    return 0


def _serve_options(parser: argparse.ArgumentParser, default_port: int) -> None:
    parser.add_argument("--agents", action="append", default=[], metavar="MODULE:ATTRIBUTE",
                        help="an Agent, a list or a dict of them (or a function returning one); repeatable")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP: the address to bind (default: loopback only)")
    parser.add_argument("--port", type=int, default=default_port, help="HTTP: the port (0: a free one)")
    parser.add_argument("--allow-host", action="append", default=[], metavar="NAME[:PORT]",
                        help="HTTP: another Host the server answers to (e.g. a proxy's name); repeatable")
    parser.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                        help="HTTP: a browser Origin allowed to call (e.g. https://app.example); repeatable")
    parser.add_argument("--expose-store", action="store_true",
                        help="let clients list and read every run of the store, not only the served agents'")
    parser.add_argument("--otel", default=None, metavar="ENDPOINT",
                        help="export the served runs' spans to this OTLP endpoint (joining callers' traces)")



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agio", description="agio-notebook from the terminal")
    parser.add_argument("--store", default=None, help="store directory or URL (sqlite:///FILE, postgresql://…; "
                                                      "default: $AGIO_STORE or ./.agio)")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the offline demo agent and print its event stream")
    demo.add_argument("query", nargs="?", default="What's the weather in Paris and Tokyo, and what is 14 + 21?")
    replay = sub.add_parser("replay", help="replay a stored run's events")
    replay.add_argument("run_id")
    runs = sub.add_parser("runs", help="list stored runs with their status")
    runs.add_argument("--session", default=None, help="only this session")
    store = sub.add_parser("store", help="store maintenance: stats, verify, repair, delete, prune, compact, export, "
                                         "migrate")
    store.add_argument("action", choices=[*ACTIONS, "migrate"])
    store.add_argument("path", nargs="?", default=None,
                       help="export: a .jsonl file or a Parquet directory; migrate: the source store")
    store.add_argument("dest", nargs="?", default=None, help="migrate: the target store (path or URL)")
    store.add_argument("--merge", action="store_true", help="migrate: copy into a store that is not empty")
    store.add_argument("--session", default=None, help="delete/export: this session")
    store.add_argument("--run", default=None, help="delete: this run")
    store.add_argument("--superseded", action="store_true", help="prune: superseded attempts")
    store.add_argument("--older-than", default=None, metavar="DATE",
                       help="prune: sessions with no activity since DATE (YYYY-MM-DD)")
    store.add_argument("--format", choices=["jsonl", "parquet"], default=None, help="export format")
    store.add_argument("--top", type=int, default=5, help="stats: how many of the largest sessions")
    mcp = sub.add_parser("mcp", help="serve the store and agents to MCP clients: mcp serve --agents module:attribute")
    mcp.add_argument("action", choices=["serve"])
    mcp.add_argument("--http", action="store_true", help="streamable HTTP (a bearer token is required) instead of stdio")
    _serve_options(mcp, 8765)
    a2a = sub.add_parser("a2a", help="serve agents to A2A clients: a2a serve --agents module:attribute")
    a2a.add_argument("action", choices=["serve"])
    _serve_options(a2a, 8766)
    course = sub.add_parser("course", help="the course's exercises as graded assignments: course export --nbgrader DIR "
                                           "and/or --otter DIR")
    course.add_argument("action", choices=["export"])
    course.add_argument("--nbgrader", default=None, metavar="DIR", help="write an nbgrader course directory")
    course.add_argument("--otter", default=None, metavar="DIR", help="write an otter-grader master notebook")
    course.add_argument("--exercises", default=None, metavar="A,B", help="the exercises (default: all, in course order)")
    course.add_argument("--points", type=float, default=5.0, help="points per exercise (default 5)")
    course.add_argument("--assignment", default="agio", help="the assignment's name (default: agio)")
    classroom = sub.add_parser("classroom", help="a class on JupyterHub sharing one PostgreSQL store: init, "
                                                 "add-student, remove-student")
    classroom.add_argument("action", choices=["init", "add-student", "remove-student"])
    classroom.add_argument("url", help="the class database, as its administrator: postgresql://ADMIN:PASSWORD@HOST/DB")
    classroom.add_argument("names", nargs="?", default=None,
                           help="add-student: names (comma-separated) or a file of names; remove-student: a name")
    classroom.add_argument("--teacher", default=None, help="init: the teacher's user name")
    classroom.add_argument("--students", default=None, metavar="NAMES|FILE",
                           help="init: the students, comma-separated, or a file with one name a line")
    classroom.add_argument("--secrets", default="agio-classroom.json", metavar="FILE",
                           help="where the members' database passwords are kept for the hub (default: %(default)s)")
    classroom.add_argument("--hub-config", default=None, metavar="FILE",
                           help="init: write the JupyterHub configuration there (default: print it)")
    classroom.add_argument("--course", default=None, metavar="DIR",
                           help="init: a folder of notebooks copied into each user's home at their first spawn")
    classroom.add_argument("--trial-password", default=None, metavar="PASSWORD",
                           help="init: a trial on this machine: everyone logs in to the hub with PASSWORD, servers run "
                                "as this user with homes under ./homes (not for a real class)")
    classroom.add_argument("--export", default=None, metavar="FILE",
                           help="remove-student: write the student's rows to FILE (JSON Lines), then delete them "
                                "(default: keep them; the teacher still sees them)")
    args, extra = parser.parse_known_args(argv)
    if args.command == "store":  # `store migrate --merge SRC DST`: argparse leaves operands after an option
        for name in ("path", "dest"):
            if getattr(args, name) is None and extra and not extra[0].startswith("-"):
                setattr(args, name, extra.pop(0))
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    handler = {"demo": _demo, "replay": _replay, "runs": _runs, "store": _store, "mcp": _mcp,
               "a2a": _a2a, "course": _course, "classroom": _classroom}[args.command]
    from .storage import StoreDamageWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StoreDamageWarning)
        try:
            code = handler(args)
        except AgioError as exc:
            print(f"agio: {exc}", file=sys.stderr)
            code = 1
    seen: set[str] = set()
    for w in caught:  # damage found while reading: one line each, on stderr
        if issubclass(w.category, StoreDamageWarning) and str(w.message) not in seen:
            seen.add(str(w.message))
            print(f"agio: warning: {w.message}", file=sys.stderr)
    return code
