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
    # the user's message is the first attempt's, and the retry's too: it lines up; the rest differ
    assert list(frame["status"]) == ["same", "changed", "changed", "changed"]
    assert list(frame["sequence_a"]) == [1, 2, 3, 4] and list(frame["sequence_b"]) == [1, 2, 3, 4]
    assert frame["setup_changed"].fillna("").tolist() == ["", "model", "", "model"]  # m1 -> m2 at each call
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


def test_a_retry_shares_the_steps_before_it_with_the_run_it_retried(repo):
    """An earlier run's steps stay out; a retry of a retry shares the first retry's steps before its own."""
    model = ScriptedModel(["Earlier.", Reply.call("weather", city="Paris"), "Sunny.", Reply.call("weather", city="Oslo"),
                           "Rain.", "Rain, surely."], name="m1")
    runner = StepRunner(Agent(model=model, tools=[weather]), repository=repo)
    go(runner.run("s", "before"))  # steps 1-2: another run of the session
    a = go(runner.run("s", "weather?"))  # steps 3-6
    b = go(runner.retry(a.run_id, from_seq=4))  # its own 4-6
    c = go(runner.retry(b.run_id, from_seq=6))  # its own 6
    ab = diff(a.run_id, b.run_id, repository=repo)
    assert list(ab.frame["status"]) == ["same", "changed", "changed", "changed"]
    assert list(ab.frame["sequence_a"]) == list(ab.frame["sequence_b"]) == [3, 4, 5, 6]
    assert ab.changed == 3 and ab.frame["arguments_changed"].iloc[1] == "weather.city"
    bc = diff(b.run_id, c.run_id, repository=repo)
    assert list(bc.frame["status"]) == ["same", "same", "same", "changed"]
    assert bc.frame["text_b"].iloc[3] == "Rain, surely." and bc.frame["text_a"].iloc[3] == "Rain."
    totals = bc.to_dict()["b"]
    assert totals["steps"] == 1 and totals["final_text"] == "Rain, surely."  # what the retry itself wrote
    assert diff(a.run_id, a.run_id, repository=repo).changed == 0


def test_forks_that_differ_only_in_the_system_prompt_or_settings_show_it(repo):
    from agio_notebook.execution import fork_session

    first = go(StepRunner(Agent(model=ScriptedModel(["Hello."], name="m1"), system_prompt="Be brief."),
                          repository=repo).run(None, "hi"))
    forks = [fork_session(first.session_id, 1, repo) for _ in range(3)]
    agents = [Agent(model=ScriptedModel(["Same answer."], name="m1"), system_prompt="Be brief.",
                    model_settings={"temperature": 0}),
              Agent(model=ScriptedModel(["Same answer."], name="m1"), system_prompt="Be brief <and> kind.",
                    model_settings={"temperature": 0}),
              Agent(model=ScriptedModel(["Same answer."], name="m1"), system_prompt="Be brief.",
                    model_settings={"temperature": 0.7, "seed": 3})]
    for session, agent in zip(forks, agents):
        go(StepRunner(agent, repository=repo).resume(session))
    prompt = diff(forks[0], forks[1], repository=repo)
    assert list(prompt.frame["status"]) == ["same", "changed"]
    assert prompt.frame["setup_changed"].iloc[1] == "system prompt"
    assert prompt.to_dict()["setup"] == [{"name": "system prompt", "a": "Be brief.", "b": "Be brief <and> kind.",
                                          "text_a": [["equal", "Be "], ["delete", "brief."]],
                                          "text_b": [["equal", "Be "], ["insert", "brief <and> kind."]]}]
    html = prompt._repr_html_()
    assert "system prompt differs" in html and "&lt;and&gt;" in html and "<and>" not in html
    assert 'class="agio-diff-insert"' in html.split("<table")[0]  # the prompt's words, highlighted above
    assert "setup: system prompt 'Be brief.' -> 'Be brief <and> kind.'" in repr(prompt)
    settings = diff(forks[0], forks[2], repository=repo)
    assert settings.frame["setup_changed"].iloc[1] == "settings.seed, settings.temperature"
    assert settings.to_dict()["setup"] == [{"name": "settings.seed", "a": None, "b": 3},
                                           {"name": "settings.temperature", "a": 0, "b": 0.7}]
    assert "settings.temperature: 0 → 0.7" in settings._repr_html_()
    assert "setup: settings.temperature: 0 -> 0.7" in repr(settings)
    assert diff(forks[0], forks[0], repository=repo).changed == 0
