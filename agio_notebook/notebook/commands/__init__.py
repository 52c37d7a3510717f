"""The ``%agio`` subcommands, each declared once: its arguments, its handler and its help line.

``%agio --help`` is generated from these declarations, and the magic dispatches through them, so a
new subcommand is one decorated function in a module of this package (one module per area).
"""

from __future__ import annotations

import argparse
import textwrap
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from IPython.core.error import UsageError
from IPython.core.magic_arguments import MagicArgumentParser

if TYPE_CHECKING:
    from ..controller import Controller


@dataclass(frozen=True)
class Arg:
    """One ``add_argument`` call, kept as data so a command's arguments sit beside its handler."""

    flags: tuple[str, ...]
    options: dict[str, Any] = field(default_factory=dict)
    group: str | None = None  # arguments sharing a group name are mutually exclusive


def arg(*flags: str, group: str | None = None, **options: Any) -> Arg:
    return Arg(flags, options, group)


Handler = Callable[["Controller", argparse.Namespace], Any]


@dataclass(frozen=True)
class Command:
    name: str
    summary: str
    parser: MagicArgumentParser
    handler: Handler

    def usage(self) -> str:
        text = " ".join(self.parser.format_usage().split())
        return text[text.index(self.parser.prog):]

    def parse(self, argv: list[str]) -> argparse.Namespace:
        try:
            return self.parser.parse_args(argv)
        except UsageError as exc:
            raise UsageError(f"{self.parser.prog}: {exc}; see %agio --help") from None
        except SystemExit:  # argparse printed something itself
            raise UsageError(f"{self.parser.prog}: bad arguments; see %agio --help") from None


COMMANDS: dict[str, Command] = {}


def build_parser(prog: str, summary: str, arguments: tuple[Arg, ...]) -> MagicArgumentParser:
    parser = MagicArgumentParser(prog=prog, description=summary, add_help=False)
    groups: dict[str, Any] = {}
    for a in arguments:
        target: Any = parser
        if a.group is not None:
            if a.group not in groups:
                groups[a.group] = parser.add_mutually_exclusive_group()
            target = groups[a.group]
        target.add_argument(*a.flags, **a.options)
    return parser


def command(name: str, summary: str, *arguments: Arg) -> Callable[[Handler], Handler]:
    """Declare ``%agio NAME``: ``summary`` is its help line, ``arguments`` its parser."""

    def register(handler: Handler) -> Handler:
        if name in COMMANDS:
            raise ValueError(f"%agio {name} is declared twice")
        COMMANDS[name] = Command(name, summary, build_parser(f"%agio {name}", summary, arguments), handler)
        return handler

    return register


def help_text(cell: Command) -> str:
    """``%agio --help``: the cell magic, then one entry per subcommand, from the declarations."""
    def entry(cmd: Command) -> list[str]:
        return [cmd.usage(), *textwrap.wrap(cmd.summary, 96, initial_indent="    ", subsequent_indent="    ")]

    lines = ["Run an agent in a cell, and explore what it did.", "", *entry(cell), ""]
    for cmd in sorted(COMMANDS.values(), key=lambda c: c.name):
        lines += entry(cmd)
    return "\n".join(lines)


def _load_all() -> None:
    # one module per area; importing registers its commands
    from . import actions, attempts, batch, data, explore, mcp, memory, sessions, store, teach, telemetry  # noqa: F401


_load_all()
