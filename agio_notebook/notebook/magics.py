"""%agio and %%agio: argument parsing only; the work is done by :class:`Controller`."""

from __future__ import annotations

import re
import shlex
import string
from typing import Any

from IPython import get_ipython
from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

from ..core import AgioError, AmbiguousIdError, NotFoundError
from ..storage.ids import resolve_session_id
from ..models.settings import parse_settings
from .commands import COMMANDS, Command, arg, build_parser, help_text
from .commands import mcp as mcp_commands
from .controller import Controller, RunHandle
from .worker import awaits_on_asyncio

CELL = Command(
    "%%agio", "The cell body is the query; {name} inserts a variable ({{ and }} are literal braces). AGENT is "
    "an Agent in your namespace (default: an offline agent unless an endpoint is configured). Consecutive "
    "cells continue the current session. The cell's value is a run handle: _.final_text, _.steps, _.events, "
    "_.retry(from_seq), _.fork(at).",
    build_parser("%%agio", "send the cell body to an agent", (
        arg("agent", nargs="?", default=None),
        arg("--session", default=None, group="session"),
        arg("--new-session", action="store_true", group="session"),
        arg("--model", default=None),
        arg("--max-steps", type=int, default=None),
        arg("--deps", default=None, metavar="NAME",
            help="the run's dependencies: a variable in your namespace, handed to tools and a dynamic system "
                 "prompt through their RunContext (never stored)"),
        arg("--settings", default=None, metavar="JSON",
            help='model settings for this cell, over the agent\'s: \'{"temperature": 0, "max_tokens": 200}\''),
        arg("--background", action="store_true"),
        arg("--tools", default=None, help="built-in actions to add: python,files,web,browser"),
        arg("--wait", type=float, default=None, metavar="SECONDS",
            help="if another run (any kernel) holds the session, wait up to SECONDS for it"),
        arg("--mcp", default=None, metavar="NAME[,NAME]", help="add the tools of MCP servers named with %%agio mcp add"),
        arg("--step", action="store_true",
            help="step mode: pause before model and tool calls, show the request, take edits (docs/debugger.md)"),
        arg("--break", dest="breakpoints", default=None, metavar="WHERE",
            help="with --step, where to pause: model,tool,tool:NAME,step:N,reply,result (default model,tool)"),
    )),
    lambda controller, args: None,
)


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
            print(help_text(CELL))
            return None
        try:
            if cell is not None:
                return self._cell(argv, cell)
            if not argv:
                print(help_text(CELL))
                return None
            return self._line(argv[0], argv[1:])
        except AgioError as exc:
            raise UsageError(f"%agio: {exc}") from None

    async def agio_awaited(self, line: str, cell: str | None = None) -> Any:
        """A cell rewritten by :func:`await_agio_cells`: it starts the run, then awaits it.

        While it awaits, ipykernel 7 still handles comm messages, so the live view's Stop button
        works, and the kernel stays busy, so "Run All" waits for the run (see docs/notebook.md).
        """
        self.controller.defer_waits = True  # _start returns at once; the wait happens here
        try:
            result = self.agio(self.shell.var_expand(line), cell)
        finally:
            self.controller.defer_waits = False
        if isinstance(result, RunHandle) and result.foreground:
            return await self.controller.wait_async(result)
        return result

    # -- %%agio ----------------------------------------------------------------------------------
    def _cell(self, argv: list[str], cell: str) -> RunHandle:
        args = CELL.parse(argv)
        if args.max_steps is not None and args.max_steps < 1:
            raise UsageError("%%agio: --max-steps must be at least 1")
        agent = None
        if args.agent is not None:
            try:
                agent = self.controller.agent_variable(args.agent)
            except AgioError as exc:
                raise UsageError(f"%%agio: {exc}") from None
        if args.model is not None:
            agent = self.controller.agent_with_model(agent or self.controller.default_agent(), args.model)
        if args.tools is not None:
            from ..toolkits import toolkit

            agent = (agent or self.controller.default_agent()).with_tools(toolkit(args.tools))
        if args.mcp:
            agent = (agent or self.controller.default_agent()).with_tools(mcp_commands.tools_for(args.mcp))
        settings = parse_settings(args.settings, "--settings") if args.settings is not None else None
        query = interpolate(cell, self.shell.user_ns).strip()
        session = args.session
        if session is not None:  # the 8 characters a table shows name the session too
            try:
                session = resolve_session_id(self.controller.repository, session)
            except AmbiguousIdError as exc:
                raise UsageError(f"%%agio: {exc}") from None
            except NotFoundError:
                raise UsageError(f"%%agio: no session {args.session!r}; use --new-session to start one") from None
        if args.breakpoints is not None and not args.step:
            raise UsageError("%%agio: --break needs --step")
        if args.step and not self.controller.defer_waits:  # a blocking cell never hears the pause's buttons
            raise UsageError("%%agio: --step needs a cell that awaits its run (%autoawait on, in a Jupyter kernel)")
        if args.step and args.background:
            raise UsageError("%%agio: --step runs in the foreground (its pauses wait in the cell); drop --background")
        deps = None
        if args.deps is not None:
            try:
                deps = self.controller.notebook_variable(args.deps, "--deps")
            except NotFoundError as exc:
                raise UsageError(f"%%agio: {exc}") from None
        return self.controller.run_query(query, agent=agent, session=session, new_session=args.new_session,
                                         max_steps=args.max_steps, background=args.background, settings=settings,
                                         wait=args.wait, step=args.step, breakpoints=args.breakpoints, deps=deps)

    # -- %agio subcommand ---------------------------------------------------------------------------
    def _line(self, name: str, argv: list[str]) -> Any:
        command = COMMANDS.get(name)
        if command is None:
            raise UsageError(f"%agio: unknown command {name!r}; see %agio --help")
        return command.handler(self.controller, command.parse(argv))


_CELL_HEAD = re.compile(r"%%agio(?:[ \t]+(.*))?$")
_LOAD_LINE = re.compile(r"%load_ext[ \t]+agio_notebook[ \t]*$")
_CONTROL_CELL = re.compile(r"%agio[ \t]+((retry|fork)\b.*)$")
_AWAITED = "await get_ipython().magics_manager.registry['AgioMagics'].agio_awaited"


def await_agio_cells(lines: list[str]) -> list[str]:
    """Input transformer: a ``%%agio`` cell becomes ``await <magics>.agio_awaited(line, body)``, and a
    cell that is just ``%agio retry ...`` or ``%agio fork ...`` (what Retry and Fork under a transcript
    insert) becomes ``await <magics>.agio_awaited(line);``.

    IPython runs a cell that awaits as a coroutine; ipykernel 7 dispatches comm messages (a click on
    Stop) while it awaits, which it does not while a cell blocks.

    The ``;`` keeps a control's cell from replacing ``_``: a tutorial cell below a run that reads
    ``_`` still gets that run's handle whatever was clicked in between (``_agio`` is the latest run's,
    and ``x = %agio retry ...`` keeps the value).

    A cell a transcript control inserted before this version starts with ``%load_ext agio_notebook``;
    this transformer exists only once agio is loaded, so there the line would only print "already
    loaded": it is dropped.
    """
    if len(lines) > 1 and _LOAD_LINE.match(lines[0].rstrip("\r\n")):
        lines = lines[1:]
    if not lines:
        return lines
    first = lines[0].rstrip("\r\n")
    control = _CONTROL_CELL.match(first)
    control = control if control is not None and not "".join(lines[1:]).strip() else None
    if not awaits_on_asyncio(get_ipython()):  # the magic runs as it is, and blocks
        return [f"get_ipython().run_line_magic('agio', {control.group(1)!r});\n"] if control else lines
    head = _CELL_HEAD.match(first)
    if head is not None:
        return [f"{_AWAITED}({head.group(1) or ''!r}, {''.join(lines[1:])!r})\n"]
    if control is not None:
        return [f"{_AWAITED}({control.group(1)!r});\n"]
    return lines


def load_ipython_extension(ipython: Any) -> None:
    from .batch_cell import install
    from .evaluation_view import install as install_evaluation_view
    from .frontend import say_hello
    from .live_view import warm_up as warm_live_views
    from .metrics_view import install as show_metrics
    from .pause_view import warm_up as warm_pause_views

    ipython.register_magics(AgioMagics)
    if await_agio_cells not in ipython.input_transformers_cleanup:
        ipython.input_transformers_cleanup.append(await_agio_cells)
    install(ipython)
    install_evaluation_view(ipython)
    show_metrics(ipython)
    say_hello()
    warm_live_views()
    warm_pause_views()
