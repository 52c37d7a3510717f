"""What the tables and figures a notebook shows look like: compact run tables on one line a row with whole
start times, run_metrics() with short ids (full ones kept), context() with whole texts, footers in words."""

from __future__ import annotations

import re

import pandas as pd

import agio_notebook
from agio_notebook import Agent, FunctionModel, Reply, StepRunner, tool
from agio_notebook.notebook.commands import COMMANDS
from agio_notebook.notebook.controller import Controller
from agio_notebook.notebook.render import metrics_line
from agio_notebook.storage import TinyDBRepository


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def adder(messages, tools):
    return f"The sum is {messages[-1]['content']}." if messages[-1]["role"] == "tool" else Reply.call("add", a=2, b=3)


def store(tmp_path, runs: int = 2) -> TinyDBRepository:
    repo = TinyDBRepository(tmp_path / "store")
    runner = StepRunner(Agent(model=FunctionModel(adder), tools=[add], name="adder"), repository=repo)
    for i in range(runs):
        runner.run_sync(None, f"question {i}: " + "a long question that goes on " * 4)
    return repo


def test_agio_runs_fits_one_line_a_row_and_keeps_the_start_whole(tmp_path):
    repo = store(tmp_path)
    table = COMMANDS["runs"].handler(Controller(store=str(repo.root)), COMMANDS["runs"].parse([]))
    text = repr(table)
    lines = text.splitlines()
    assert len(lines) == 3 and "\\" not in text, text  # a header and a line per run: no column block wrapped
    assert all(re.search(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$", line) for line in lines[1:]), text
    html = table._repr_html_()
    cells = re.findall(r"<t[dh][ >]", html)
    assert cells and len(re.findall(r'<t[dh] style="white-space:nowrap"', html)) == len(cells)
    assert html.count("overflow-x:auto") == 1


def test_run_metrics_shows_short_ids_and_keeps_the_full_ones(tmp_path):
    repo = store(tmp_path)
    frame = agio_notebook.run_metrics(repository=repo)
    full = list(frame.index)
    assert all(len(i) == 32 for i in full) and frame.loc[full[0], "model_calls"] == 2
    shown = repr(frame) + frame._repr_html_()
    assert all(i[:8] in shown and i not in shown for i in full)
    assert type(frame[["steps"]]) is pd.DataFrame  # anything computed from it is a plain frame


def test_context_shows_each_message_whole_with_its_line_breaks(tmp_path):
    repo = store(tmp_path, runs=1)
    run = repo.list_runs()[0]
    frame = agio_notebook.context(run.id, 4, repository=repo)
    assert list(frame["role"]) == ["user", "assistant", "tool"]
    note = "line one\n\n[Note: <b>not markup</b>]"
    frame.loc[2, "text"] = note
    text, html = repr(frame), frame._repr_html_()
    assert "\\n" not in text and "    [Note: <b>not markup</b>]" in text.splitlines()
    assert "line one\n\n[Note: &lt;b&gt;not markup&lt;/b&gt;]" in html and "white-space:pre-wrap" in html


def test_footers_say_counts_in_words_and_pauses_in_seconds():
    line = metrics_line({"steps": 1, "model_calls": 1, "tool_calls": 1, "paused_ms": 66128.4, "duration_ms": 70000},
                        run=True)
    assert line.startswith("1 step (1 model call) · 1 tool call") and "paused 66.1 s" in line
    line = metrics_line({"steps": 9, "model_calls": 4, "tool_calls": 4, "tool_errors": 1, "tool_unfinished": 2},
                        run=True)
    assert line.startswith("9 steps (4 model calls) · 4 tool calls (1 failed, 2 not finished)")
