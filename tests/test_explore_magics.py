"""%agio diff and %agio tree: thin shells over diff() and tree(); bad input is one UsageError line."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from IPython.core.error import UsageError

from agio_notebook import Agent, ScriptedModel, StepRunner
from agio_notebook.explore import RunDiff, RunTree
from agio_notebook.notebook.commands import COMMANDS
from agio_notebook.storage import InMemoryRepository


@pytest.fixture
def controller():
    repo = InMemoryRepository()
    runner = StepRunner(Agent(model=ScriptedModel(["a", "b"])), repository=repo)
    first = asyncio.run(runner.run(None, "q"))
    second = asyncio.run(runner.run(first.session_id, "q2"))
    return SimpleNamespace(repository=repo, session_id=first.session_id, runs=(first.run_id, second.run_id))


def call(controller, line):
    name, *argv = line.split()
    cmd = COMMANDS[name]
    return cmd.handler(controller, cmd.parse(argv))


def test_diff_and_tree_commands(controller):
    a, b = controller.runs
    assert isinstance(call(controller, f"diff {a} {b}"), RunDiff)
    tree = call(controller, "tree")  # the current session by default
    assert isinstance(tree, RunTree) and len(tree.runs) == 2


def test_bad_input_is_one_usage_line(controller):
    with pytest.raises(UsageError, match="^%agio diff: no run or session 'nope' in the store$"):
        call(controller, f"diff {controller.runs[0]} nope")
    with pytest.raises(UsageError, match="^%agio tree: no session 'nope' in the store$"):
        call(controller, "tree nope")
    with pytest.raises(UsageError, match="^%agio diff: .*see %agio --help$"):
        call(controller, "diff onlyone")
    controller.session_id = None
    with pytest.raises(UsageError, match="no current session"):
        call(controller, "tree")
