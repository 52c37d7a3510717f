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


def test_only_agio_cells_and_retry_cells_are_turned_into_awaited_calls(monkeypatch) -> None:
    from types import SimpleNamespace

    from IPython.core.async_helpers import _asyncio_runner

    from agio_notebook.notebook import magics

    shell = SimpleNamespace(autoawait=True, loop_runner=_asyncio_runner)
    monkeypatch.setattr(magics, "get_ipython", lambda: shell)
    call = "await get_ipython().magics_manager.registry['AgioMagics'].agio_awaited"
    assert magics.await_agio_cells(["%%agio bot --new-session\n", "What's up? {x}\n"]) == [
        f"{call}('bot --new-session', \"What's up? {{x}}\\n\")\n"]
    assert magics.await_agio_cells(["%%agio\n", "hi\n"]) == [f"{call}('', 'hi\\n')\n"]
    # the cells transcript controls insert: awaited, and ended with ";" so they leave _ as it was
    assert magics.await_agio_cells(["%agio retry abc --from-seq 2\n", "\n"]) == [
        f"{call}('retry abc --from-seq 2');\n"]
    assert magics.await_agio_cells(["%agio fork abc --at 4 --run def\n"]) == [
        f"{call}('fork abc --at 4 --run def');\n"]
    assert magics.await_agio_cells(["%load_ext agio_notebook\n", "%agio fork abc --at 4\n"]) == [
        f"{call}('fork abc --at 4');\n"]  # as saved by an earlier version: the load line is dropped
    for untouched in (["%agio runs\n"], ["%agio retry abc\n", "print(1)\n"], ["%%agiox\n", "hi\n"],
                      ["x = 1\n", "%agio retry abc\n"], ["h = %agio retry abc\n"], ["%agio forks\n"],
                      ["new = %agio fork abc --at 2\n"]):
        assert magics.await_agio_cells(untouched) == untouched
    shell.autoawait = False  # %autoawait off: the magic runs as it is (a control cell still leaves _ alone)
    assert magics.await_agio_cells(["%%agio\n", "hi\n"]) == ["%%agio\n", "hi\n"]
    assert magics.await_agio_cells(["%agio fork abc --at 4\n"]) == [
        "get_ipython().run_line_magic('agio', 'fork abc --at 4');\n"]
