"""%agio runs / steps / tool_calls / sessions: a compact default that fits a notebook, --all for every
column; the Python frames keep every column."""

from __future__ import annotations

import asyncio
import re

import pytest

from agio_notebook import Agent, ScriptedModel, StepRunner, frames
from agio_notebook.storage import TinyDBRepository
from agio_notebook.notebook.compact import COLUMNS, ID_CHARS, TEXT_CHARS, compact

from kernel_support import of_type, offline_kernel

SETUP = r'''
%load_ext agio_notebook
from agio_notebook import Agent, ScriptedModel, Reply, tool

@tool
def shout(text: str) -> str:
    """Upper-case some text."""
    return text.upper() + "\n" + "and a second line " * 10

long_answer = "A long answer,\nover several lines, " + "with many many words " * 20
talker = Agent(model=ScriptedModel([Reply.call("shout", text="hello " * 30), long_answer]), tools=[shout],
               name="talker")
'''


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    k = offline_kernel(tmp_path_factory, "compact", SETUP)
    k.execute("%%agio talker --new-session\nA question that is rather long, " + "and goes on " * 10)
    yield k
    k.close()


def html_table(res):
    data = of_type(res["messages"], "execute_result")[0]["content"]["data"]
    return data["text/html"]


def headers(html: str) -> list[str]:
    head = html.split("<thead>")[1].split("</thead>")[0]
    return [h for h in re.findall(r"<th[^>]*>(.*?)</th>", head) if h]


def cells(html: str) -> list[str]:
    return re.findall(r"<td[^>]*>(.*?)</td>", html.split("<tbody>")[1], flags=re.S)


def shown(kind: str) -> list[str]:
    """The columns the compact table shows of one store (``store`` names it with --every-store only)."""
    return [c for c in COLUMNS[kind] if c != "store"]


@pytest.mark.parametrize("kind", ["runs", "steps", "tool_calls", "sessions"])
def test_magic_shows_a_compact_table_by_default(kernel, kind):
    html = html_table(kernel.execute(f"%agio {kind}"))
    assert headers(html) == shown(kind)
    for cell in cells(html):
        assert "\n" not in cell and len(cell) <= max(TEXT_CHARS, 24), cell  # one short line each
    assert "…" in html or kind == "sessions"  # long text was cut, visibly


@pytest.mark.parametrize("kind", ["runs", "steps", "tool_calls", "sessions"])
def test_all_shows_every_column_and_python_frames_keep_them(kernel, kind):
    full = kernel.value(f"list(__import__('agio_notebook').frames.{kind}("
                        "repository=get_ipython().magics_manager.registry['AgioMagics'].controller.repository)"
                        ".columns)")
    assert len(full) > len(COLUMNS[kind]) or kind == "sessions"
    assert headers(html_table(kernel.execute(f"%agio {kind} --all"))) == full


def test_ids_are_short_and_filters_still_work(kernel):
    run_id = kernel.value("list(get_ipython().magics_manager.registry['AgioMagics'].controller.handles)[-1]")
    html = html_table(kernel.execute(f"%agio steps --run {run_id}"))
    assert run_id[:ID_CHARS] in html and run_id not in html
    assert len(cells(html)) == 4 * len(shown("steps"))  # user, assistant (call), tool, assistant


def test_compact_is_a_pure_view_of_the_frame(tmp_path):
    repo = TinyDBRepository(tmp_path / "store")
    asyncio.run(StepRunner(Agent(model=ScriptedModel(["line one\nline two " + "x" * 100])), repository=repo)
                .run("s", "hi"))
    full = frames.runs(repository=repo)
    view = compact(full, "runs")
    assert list(view.columns) == shown("runs") and len(full.columns) > 20
    answer = view.loc[0, "final_text"]
    assert answer.startswith("line one line two x") and answer.endswith("…") and len(answer) == TEXT_CHARS
    assert full.loc[0, "final_text"].startswith("line one\nline two")  # the frame itself is untouched
    assert str(view["duration_ms"].dtype) == "Int64" and view.loc[0, "run_id"] == full.loc[0, "run_id"][:ID_CHARS]
