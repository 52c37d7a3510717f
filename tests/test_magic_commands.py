"""%agio subcommands are declared once; the help is generated from the declarations."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError

from agio_notebook.notebook.commands import COMMANDS, arg, command, help_text
from agio_notebook.notebook.magics import CELL


def test_help_lists_every_declared_command_with_its_arguments() -> None:
    text = help_text(CELL)
    assert sum(line.startswith("%agio ") for line in text.splitlines()) == len(COMMANDS)
    for name, cmd in COMMANDS.items():
        assert f"%agio {name}" in text
        assert cmd.summary.split()[0] in text
    assert "--from-seq FROM_SEQ" in text and "%%agio" in text


def test_a_command_cannot_be_declared_twice() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        command("runs", "again", arg("--x"))(lambda c, a: None)


def test_bad_arguments_are_one_usage_line() -> None:
    with pytest.raises(UsageError, match=r"^%agio retry: .*see %agio --help$"):
        COMMANDS["retry"].parse(["--from-seq", "x", "r1"])
    with pytest.raises(UsageError, match="not allowed with"):
        CELL.parse(["--session", "s", "--new-session"])
