"""%agio and %%agio: argument parsing only; the work is done by :class:`Controller`."""

from __future__ import annotations

import shlex
import string
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import MagicArgumentParser

from .. import frames
from ..agent import Agent
from ..core import AgioError
from .controller import Controller, RunHandle

USAGE = """Run an agent in a cell, and explore what it did.

%%agio [AGENT] [--session S | --new-session] [--model M] [--max-steps N] [--background]
    The cell body is the query; {name} inserts a variable ({{ and }} are literal braces).
    AGENT is an Agent in your namespace (default: an offline agent unless an endpoint is configured).
    Consecutive cells continue the current session. The cell's value is a run handle:
    _.final_text, _.steps, _.events, _.retry(from_seq), _.fork(at).

%agio runs [--session S]          runs as a DataFrame
%agio steps [--session S] [--run R]
%agio sessions
%agio tool_calls [--session S] [--run R]
%agio retry RUN [--from-seq N] [--background]
%agio fork [SESSION] --at N       copy steps 1..N into a new session and continue there
%agio use SESSION                 continue an existing session
%agio replay RUN                  show a stored run's transcript
%agio config [--model M] [--base-url U] [--store PATH]
                                  the API key is read from OPENAI_API_KEY, never stored or shown
"""


def _parser(prog: str, description: str) -> MagicArgumentParser:
    return MagicArgumentParser(prog=prog, description=description, add_help=False)


def _build_parsers() -> dict[str, MagicArgumentParser]:
    cell = _parser("%%agio", "send the cell body to an agent")
    cell.add_argument("agent", nargs="?", default=None)
    group = cell.add_mutually_exclusive_group()
    group.add_argument("--session", default=None)
    group.add_argument("--new-session", action="store_true")
    cell.add_argument("--model", default=None)
    cell.add_argument("--max-steps", type=int, default=None)
    cell.add_argument("--background", action="store_true")

    runs = _parser("%agio runs", "runs as a DataFrame")
    runs.add_argument("--session", default=None)
    steps = _parser("%agio steps", "steps as a DataFrame")
    steps.add_argument("--session", default=None)
    steps.add_argument("--run", default=None)
    tool_calls = _parser("%agio tool_calls", "tool calls as a DataFrame")
    tool_calls.add_argument("--session", default=None)
    tool_calls.add_argument("--run", default=None)
    sessions = _parser("%agio sessions", "sessions as a DataFrame")
    retry = _parser("%agio retry", "retry a run from a step")
    retry.add_argument("run")
    retry.add_argument("--from-seq", type=int, default=None)
    retry.add_argument("--background", action="store_true")
    fork = _parser("%agio fork", "fork a session at a step")
    fork.add_argument("session", nargs="?", default=None)
    fork.add_argument("--at", type=int, required=True)
    use = _parser("%agio use", "continue an existing session")
    use.add_argument("session")
    replay = _parser("%agio replay", "show a stored run's transcript")
    replay.add_argument("run")
    config = _parser("%agio config", "model, endpoint and store settings")
    config.add_argument("--model", default=None)
    config.add_argument("--base-url", default=None)
    config.add_argument("--store", default=None)
    return {"cell": cell, "runs": runs, "steps": steps, "tool_calls": tool_calls, "sessions": sessions,
            "retry": retry, "fork": fork, "use": use, "replay": replay, "config": config}


PARSERS = _build_parsers()


class _Namespace(dict):
    """format_map namespace that names the missing variable clearly."""

    def __missing__(self, key: str) -> Any:
        raise UsageError(f"%%agio: no variable {key!r} for {{{key}}} in the cell; write {{{{ and }}}} for "
                         "literal braces")


def interpolate(body: str, namespace: dict[str, Any]) -> str:
    """``{name}`` from the user namespace; ``{{``/``}}`` are literal braces."""
    try:
        return string.Formatter().vformat(body, (), _Namespace(namespace))
    except UsageError:
        raise
    except (ValueError, IndexError, AttributeError, KeyError) as exc:
        raise UsageError(f"%%agio: cannot fill in the cell's {{...}} placeholders ({exc}); write {{{{ and }}}} "
                         "for literal braces") from None


def _parse(name: str, argv: list[str]) -> Any:
    parser = PARSERS[name]
    try:
        return parser.parse_args(argv)
    except UsageError as exc:
        raise UsageError(f"{parser.prog}: {exc}; see %agio --help") from None
    except SystemExit:  # argparse printed something itself
        raise UsageError(f"{parser.prog}: bad arguments; see %agio --help") from None


@magics_class
class AgioMagics(Magics):
    def __init__(self, shell: Any):
        super().__init__(shell)
        self.controller = Controller(shell)

    @line_magic
    @cell_magic
    def agio(self, line: str, cell: str | None = None) -> Any:
        """Run an agent in a cell and explore what it did. See %agio --help."""
        try:
            argv = shlex.split(line)
        except ValueError as exc:
            raise UsageError(f"%agio: cannot parse the arguments ({exc})") from None
        if argv[:1] in (["--help"], ["-h"], ["help"]):
            print(USAGE)
            return None
        try:
            if cell is not None:
                return self._cell(argv, cell)
            if not argv:
                print(USAGE)
                return None
            return self._line(argv[0], argv[1:])
        except AgioError as exc:
            raise UsageError(f"%agio: {exc}") from None

    # -- %%agio ----------------------------------------------------------------------------------
    def _cell(self, argv: list[str], cell: str) -> RunHandle:
        args = _parse("cell", argv)
        if args.max_steps is not None and args.max_steps < 1:
            raise UsageError("%%agio: --max-steps must be at least 1")
        agent = None
        if args.agent is not None:
            agent = self.shell.user_ns.get(args.agent)
            if agent is None:
                raise UsageError(f"%%agio: no agent named {args.agent!r} in the notebook")
            if not isinstance(agent, Agent):
                raise UsageError(f"%%agio: {args.agent!r} is a {type(agent).__name__}, not an agio Agent")
        if args.model is not None:
            agent = self.controller.agent_with_model(agent or self.controller.default_agent(), args.model)
        query = interpolate(cell, self.shell.user_ns).strip()
        if args.session is not None and self.controller.repository.get_session(args.session) is None:
            raise UsageError(f"%%agio: no session {args.session!r}; use --new-session to start one")
        return self.controller.run_query(query, agent=agent, session=args.session, new_session=args.new_session,
                                         max_steps=args.max_steps, background=args.background)

    # -- %agio subcommand ---------------------------------------------------------------------------
    def _line(self, command: str, argv: list[str]) -> Any:
        c = self.controller
        repo = c.repository
        if command not in PARSERS or command == "cell":
            raise UsageError(f"%agio: unknown command {command!r}; see %agio --help")
        args = _parse(command, argv)
        if command == "runs":
            return frames.runs(args.session, repository=repo)
        if command == "steps":
            return frames.steps(args.session, args.run, repository=repo)
        if command == "tool_calls":
            return frames.tool_calls(args.session, args.run, repository=repo)
        if command == "sessions":
            return frames.sessions(repository=repo)
        if command == "retry":
            return c.retry(args.run, args.from_seq, background=args.background)
        if command == "fork":
            new = c.fork(args.session, args.at)
            print(f"agio: forked into session {new}; the next %%agio cell continues there")
            return new
        if command == "use":
            c.use(args.session)
            print(f"agio: now in session {args.session}")
            return None
        if command == "replay":
            from IPython.display import display

            display(c.replay(args.run), raw=True)
            return None
        print(c.configure(model=args.model, base_url=args.base_url, store=args.store))
        return None


def load_ipython_extension(ipython: Any) -> None:
    ipython.register_magics(AgioMagics)
