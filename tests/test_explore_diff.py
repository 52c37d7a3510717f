"""diff(a, b): known pairs of runs, attempts and branches, aligned and measured."""

from __future__ import annotations

import pytest

import agio_notebook
from agio_notebook import Agent, Reply, ScriptedModel, StepRunner, tool
from agio_notebook.core import NotFoundError
from agio_notebook.explore import diff
from agio_notebook.explore.diff import MIME_TYPE, DiffError, align, text_ops
from agio_notebook.models.base import Usage
from agio_notebook.models.pricing import set_prices
from agio_notebook.storage import TinyDBRepository
from explore_support import go, repo


@tool
def weather(city: str) -> str:
    """Weather of a city."""
    return {"Paris": "sunny", "Oslo": "rain"}[city]


@pytest.fixture(autouse=True)
def prices():
    set_prices({"m1": {"prompt": 1.0, "completion": 2.0}, "m2": {"prompt": 3.0, "completion": 4.0}})
    yield
    set_prices({}, replace=True)


def u(p, c):
    return Usage(p, c, p + c)


def test_retry_attempts_diff(repo):
    m1 = ScriptedModel([Reply.call("weather", city="Paris", usage=None), Reply("It is sunny <b>today</b>.",
                                                                                 usage=u(20, 5))], name="m1")
    m1.replies[0].usage = u(10, 3)
    first = go(StepRunner(Agent(model=m1, tools=[weather]), repository=repo).run(None, "weather?"))
    m2 = ScriptedModel([Reply.call("weather", city="Oslo"), Reply("It is rainy today.", usage=u(30, 6))], name="m2")
    m2.replies[0].usage = u(10, 3)
    second = go(StepRunner(Agent(model=m2, tools=[weather]), repository=repo).retry(first.run_id))
    d = agio_notebook.diff(first.run_id, second.run_id, repository=repo)
    frame = d.frame
    # the first attempt owns the user's message; both own the call, the tool result and the answer
    assert list(frame["status"]) == ["only_a", "changed", "changed", "changed"]
    assert list(frame["sequence_a"]) == [1, 2, 3, 4] and list(frame["sequence_b"])[1:] == [2, 3, 4]
    assert frame["arguments_changed"].iloc[1] == "weather.city"
    assert bool(frame["result_changed"].iloc[2]) is True
    assert frame["tokens_a"].iloc[3] == 25 and frame["tokens_b"].iloc[3] == 36 and frame["tokens_delta"].iloc[3] == 11
    cost_a, cost_b = (20 * 1 + 5 * 2) / 1e6, (30 * 3 + 6 * 4) / 1e6
    assert frame["cost_a"].iloc[3] == pytest.approx(cost_a) and frame["cost_delta"].iloc[3] == pytest.approx(cost_b - cost_a)
    data = d.to_dict()
    assert data["rows"][3]["text_a"] == [["equal", "It is "], ["delete", "sunny"], ["equal", " "],
                                         ["delete", "<b>today</b>."]]
    assert data["rows"][3]["text_b"] == [["equal", "It is "], ["insert", "rainy"], ["equal", " "],
                                         ["insert", "today."]]
    html = d._repr_html_()
    assert "&lt;b&gt;today&lt;/b&gt;" in html and "<b>today</b>" not in html  # model output is escaped
    assert 'class="agio-diff-insert"' in html and "weather.city" in html
    assert "$" not in html and "cost &#36;" in html and "mathjax_ignore" in html  # costs are text, not LaTeX
    bundle = d._repr_mimebundle_()
    assert set(bundle) == {MIME_TYPE, "text/html", "text/plain"}
    assert "~ #4 assistant" in bundle["text/plain"]


def test_fork_branches_align_around_an_inserted_turn(repo):
    runner = StepRunner(Agent(model=ScriptedModel(["Hello.", "Bye."], name="m1")), repository=repo)
    a = go(runner.run(None, "hi"))
    go(runner.run(a.session_id, "bye"))
    fork_model = ScriptedModel([Reply.call("weather", city="Paris"), "Sunny. Bye."], name="m1")
    b = go(StepRunner(Agent(model=fork_model, tools=[weather]), repository=repo).fork(a.session_id, 3))
    d = diff(a.session_id, b.session_id, repository=repo)
    statuses = list(d.frame["status"])
    # steps 1-2 are the same; fork adds a tool turn (assistant call + tool) before its answer
    assert statuses[:3] == ["same", "same", "same"]
    assert statuses[3:] == ["only_b", "only_b", "changed"]
    assert d.changed == 3


def test_identical_runs_have_no_changes(repo):
    runner = StepRunner(Agent(model=ScriptedModel(["same"], loop=True, name="m1")), repository=repo)
    a, b = go(runner.run(None, "q")), go(runner.run(None, "q"))
    d = diff(a, b, repository=repo)
    assert d.changed == 0 and set(d.frame["status"]) == {"same"}


def test_bad_inputs_are_one_line(repo, tmp_path):
    runner = StepRunner(Agent(model=ScriptedModel(["x"], name="m1")), repository=repo)
    a = go(runner.run(None, "q"))
    other = TinyDBRepository(tmp_path / "other")
    b = go(StepRunner(Agent(model=ScriptedModel(["y"], name="m1")), repository=other).run(None, "q"))
    with pytest.raises(DiffError, match="cannot diff runs from different stores") as info:
        diff((repo, a.run_id), (other, b.run_id))
    assert "\n" not in str(info.value)
    with pytest.raises(NotFoundError, match="no run or session 'nope'"):
        diff(a.run_id, "nope", repository=repo)
    other.close()


def test_align_and_text_ops_units():
    assert text_ops("a b c", "a x c") == ([["equal", "a "], ["delete", "b"], ["equal", " c"]],
                                          [["equal", "a "], ["insert", "x"], ["equal", " c"]])
    assert align([], []) == []
