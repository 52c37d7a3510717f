"""sweep(): forks per variant and repeat, a results frame with the right rows, intervals, scorers, budgets."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

import agio_notebook
from agio_notebook import Agent, FunctionModel, Reply, ScriptedModel, StepRunner, frames
from agio_notebook.core import NotFoundError
from agio_notebook.explore.sweep import SweepError, bootstrap, interval_method, wilson
from agio_notebook.models.base import Usage
from agio_notebook.models.pricing import PricingError, set_prices
from agio_notebook.scoring import ScoredRun, called_before_answer, exact, llm_judge, regex, score_runs
from explore_support import go, repo, weather


@pytest.fixture(autouse=True)
def prices():
    set_prices({"careful": {"prompt": 1.0, "completion": 1.0}, "hasty": {"prompt": 1.0, "completion": 1.0}})
    yield
    set_prices({}, replace=True)


def conversation(repo):
    runner = StepRunner(Agent(model=ScriptedModel(["Hello!", "It is sunny."], name="hasty"), tools=[weather]),
                        repository=repo)
    first = go(runner.run(None, "hi"))
    go(runner.run(first.session_id, "weather in Paris?"))
    return first.session_id


def careful_reply(messages, tools):
    """Looks the weather up first, then answers: the same whatever order concurrent runs call it in."""
    return "Paris: sunny." if messages[-1]["role"] == "tool" else Reply.call("weather", city="Paris")


def models():
    careful = FunctionModel(careful_reply, name="careful")
    hasty = ScriptedModel(["Probably sunny."], name="hasty", loop=True)
    return [careful, hasty]


def test_sweep_rows_variants_scores_and_intervals(repo):
    session = conversation(repo)
    base = Agent(model=ScriptedModel(["unused"]), tools=[weather])
    result = agio_notebook.sweep(session, at=3, agent=base, models=models(),
                                 prompts=["weather in Paris?", "Paris weather, quickly"], repeats=3,
                                 scorers=[called_before_answer("weather"), regex(r"sunny")], repository=repo,
                                 monitor=False)
    frame = result.frame
    assert len(frame) == 2 * 2 * 3
    assert list(frame.columns[:2]) == ["model", "prompt"]
    assert sorted(frame.groupby(["model", "prompt"]).size().tolist()) == [3, 3, 3, 3]
    assert set(frame["status"]) == {"completed"}
    assert frame.loc[frame.model == "careful", "score_called_weather"].tolist() == [1.0] * 6
    assert frame.loc[frame.model == "hasty", "score_called_weather"].tolist() == [0.0] * 6
    assert frame["cost"].notna().all() and (frame["cost"] > 0).all()
    # every run is a fork of the source at step 2, its third step the swept user message
    for sid, prompt in zip(frame["session_id"], frame["prompt"]):
        s = repo.get_session(sid)
        assert (s.forked_from, s.forked_at) == (session, 2)
        assert repo.get_steps(sid)[2].content == prompt
    summary = result.summary
    assert len(summary) == 4 and summary["runs"].tolist() == [3, 3, 3, 3]
    careful = summary[summary.model == "careful"].iloc[0]
    assert careful["score_called_weather_mean"] == 1.0
    # a 0/1 score gets Wilson's interval: 3 of 3 is [0.44, 1], inside the score's bounds
    assert result.interval_methods["score_called_weather"] == "Wilson"
    assert careful["score_called_weather_ci_low"] == pytest.approx(0.43850, abs=1e-4)
    assert careful["score_called_weather_ci_high"] == 1.0
    assert (summary["score_called_weather_ci_low"] >= 0).all() and (summary["score_called_weather_ci_high"] <= 1).all()
    assert careful["total_tokens_ci_low"] <= careful["total_tokens_mean"] <= careful["total_tokens_ci_high"]
    assert result.best_run("called_weather") in set(frame.loc[frame.model == "careful", "run_id"])
    assert result.worst_run("called_weather") in set(frame.loc[frame.model == "hasty", "run_id"])
    html = result._repr_html_()
    assert "agio-sweep-variant" in html and "careful" in html
    # dollar amounts are text, not LaTeX: no `$` in the HTML, and MathJax is told to leave the table alone
    assert "$" not in html and "&#36;0." in html and "mathjax_ignore" in html
    assert "95% Wilson" in html and "95% bootstrap" in html
    bundle = result._repr_mimebundle_()
    data = bundle["application/vnd.agio.sweep+json"]
    assert bundle["text/html"] == html and data["methods"]["called_weather"] == "Wilson"
    [row] = [v for v in data["variants"] if v["labels"]["model"] == "careful" and v["labels"]["prompt"] == "weather in Paris?"]
    assert row["values"]["called_weather"] == {"mean": 1.0, "low": pytest.approx(0.4385, abs=1e-4), "high": 1.0}
    json.dumps(data, allow_nan=False)  # no NaN in the saved notebook: unknown is null
    # scores are columns of runs() too
    runs = frames.runs(repository=repo)
    assert runs["score_called_weather"].notna().sum() == 12


def test_bounded_scores_get_intervals_inside_their_bounds():
    # a t interval of 1/3 from 0/1 values was [-1.10, 1.77]; Wilson's stays inside [0, 1]
    mean, low, high = wilson([0.0, 1.0, 0.0])
    assert 0 <= low < mean < high <= 1
    mean, low, high = wilson([0.0, 1.0])
    assert mean == 0.5 and 0 <= low < 0.5 < high <= 1
    assert wilson([1.0, 1.0, 1.0])[1:] == (pytest.approx(0.43850, abs=1e-4), 1.0)
    assert wilson([0.0] * 5)[1] == 0.0
    # a 0..1 (or any bounded) score: a seeded bootstrap stays within the values
    values = [0.1, 0.9, 0.95, 0.2, 1.0]
    mean, low, high = bootstrap(values)
    assert min(values) <= low <= mean <= high <= max(values) and bootstrap(values) == (mean, low, high)
    assert interval_method("score_ok", [0.0, 1.0, None]) == "Wilson"
    assert interval_method("score_judge", [0.5, 1.0]) == "bootstrap"
    assert interval_method("cost", [0.0, 1.0]) == "bootstrap"  # metrics are not scores
    assert bootstrap([5.0, 40.0, 9.0])[1] >= 5.0  # a latency interval never goes below the fastest run


def test_scorer_errors_are_cells_and_the_sweep_goes_on(repo):
    session = conversation(repo)

    def broken(run: ScoredRun) -> float:
        raise ValueError("no idea")

    result = agio_notebook.sweep(session, at=4, agent=Agent(model=models()[1]), repeats=2,
                                 scorers=[broken, exact("Probably sunny.")], repository=repo, monitor=False)
    frame = result.frame
    assert len(frame) == 2 and frame["score_broken"].isna().all()
    assert frame["score_broken_error"].tolist() == ["ValueError: no idea"] * 2
    assert frame["score_exact"].tolist() == [1.0, 1.0]
    stored = repo.get_run(frame["run_id"].iloc[0]).scores
    assert stored["broken"] == {"error": "ValueError: no idea"} and stored["exact"] == 1.0


def test_llm_judge_with_a_scripted_judge(repo):
    session = conversation(repo)
    judge = ScriptedModel(["8", "no grade here"], name="judge")
    result = agio_notebook.sweep(session, at=4, agent=Agent(model=models()[1]), repeats=2,
                                 scorers=[llm_judge(judge, "Is it helpful?")], repository=repo, monitor=False,
                                 concurrency=1)
    frame = result.frame
    assert frame["score_judge"].tolist()[0] == pytest.approx(0.8)
    assert frame["score_judge_error"].tolist()[1].startswith("ValueError: the judge replied without a grade")
    assert "Probably sunny." in judge.messages_of(0)[0]["content"]


def test_sweep_budget_stops_the_sweep(repo):
    session = conversation(repo)
    expensive = ScriptedModel([Reply("Sunny.", usage=Usage(100_000, 0, 100_000))], name="careful", loop=True)
    # each run costs $0.10 (more than its prompt lets anyone foresee); the sweep may spend $0.25: runs 1-3
    # start (the 3rd with the $0.05 left as its own budget), then the budget is spent and no run starts
    result = agio_notebook.sweep(session, at=4, agent=Agent(model=expensive), repeats=6, repository=repo,
                                 max_cost=0.25, concurrency=1, monitor=False)
    frame = result.frame
    assert frame["status"].tolist() == ["completed"] * 3 + ["budget_exceeded"] * 3
    assert frame["cost"].iloc[:3].sum() == pytest.approx(0.3)
    assert frame["run_id"].isna().tolist() == [False] * 3 + [True] * 3  # three runs never started
    assert frame["error"].iloc[3].startswith("sweep budget max_cost ($0.25) spent")


def test_bad_inputs_are_one_line(repo):
    session = conversation(repo)
    agent = Agent(model=models()[1])
    with pytest.raises(NotFoundError, match="sweep: session .* has no current step at sequence 9"):
        agio_notebook.sweep(session, at=9, agent=agent, repository=repo, monitor=False)
    with pytest.raises(NotFoundError, match="sweep: no session or run 'nope'"):
        agio_notebook.sweep("nope", at=1, agent=agent, repository=repo, monitor=False)
    with pytest.raises(SweepError, match="prompts replace the user message at step 4"):
        agio_notebook.sweep(session, at=4, agent=agent, prompts=["x"], repository=repo, monitor=False)
    with pytest.raises(SweepError, match="concurrency must be >= 1, got 0"):
        agio_notebook.sweep(session, at=4, agent=agent, repository=repo, monitor=False, concurrency=0)
    with pytest.raises(SweepError, match="sweep needs agent="):
        agio_notebook.sweep(session, at=4, models=models(), repository=repo, monitor=False)
    with pytest.raises(PricingError, match="no price known for model 'mystery'"):
        agio_notebook.sweep(session, at=4, agent=Agent(model=ScriptedModel(["x"], name="mystery")),
                            repository=repo, max_cost=1.0, monitor=False)


def test_settings_axis_sets_config_and_model_attributes(repo):
    session = conversation(repo)
    agent = Agent(model=ScriptedModel([Reply.call("weather", city="P"), "done"], name="careful", loop=True),
                  tools=[weather])
    result = agio_notebook.sweep(session, at=4, agent=agent, settings={"one step": {"max_steps": 1},
                                                                      "two steps": {"max_steps": 2}},
                                 repository=repo, monitor=False, concurrency=1)
    assert result.frame.set_index("settings")["status"].to_dict() == {"one step": "max_steps", "two steps": "completed"}


def test_settings_axis_sends_model_settings(repo):
    session = conversation(repo)
    result = agio_notebook.sweep(session, at=4, agent=Agent(model=models()[1]), repository=repo, monitor=False,
                                 settings={"cold": {"temperature": 0}, "hot": {"temperature": 1.2, "max_steps": 3}})
    for run_id, label in zip(result.frame["run_id"], result.frame["settings"]):
        answer = [s for s in repo.get_steps(repo.get_run(run_id).session_id) if s.run_id == run_id][-1]
        assert answer.extra["request"]["settings"] == {"temperature": 0 if label == "cold" else 1.2}
    with pytest.raises(SweepError, match="'warmth' are neither model settings"):
        agio_notebook.sweep(session, at=4, agent=Agent(model=models()[1]), repository=repo, monitor=False,
                            settings=[{"warmth": 3}])


def test_score_runs_on_stored_runs(repo):
    session = conversation(repo)
    run_ids = [r.id for r in repo.list_runs(session)]
    scores = score_runs(run_ids, [regex("sunny")], repo)
    assert [scores[r]["regex"] for r in run_ids] == [0.0, 1.0]
    assert repo.get_run(run_ids[1]).scores == {"regex": 1.0}


def test_a_run_that_cannot_start_is_a_failed_row(repo, monkeypatch):
    session = conversation(repo)
    real_fork = StepRunner.fork_stream
    calls = []

    async def flaky_fork(self, *args, **kwargs):
        calls.append(args)
        if len(calls) == 2:
            raise RuntimeError("the store is busy")
        async for event in real_fork(self, *args, **kwargs):
            yield event

    monkeypatch.setattr(StepRunner, "fork_stream", flaky_fork)
    result = agio_notebook.sweep(session, at=4, agent=Agent(model=models()[1]), repeats=3, repository=repo,
                                 monitor=False, concurrency=1)
    frame = result.frame
    assert frame["status"].tolist() == ["completed", "failed", "completed"]
    assert frame["error"].iloc[1] == "RuntimeError: the store is busy" and pd.isna(frame["run_id"].iloc[1])


def test_the_sweep_is_one_batch_of_the_executor(repo):
    """Its runs are execution records of one batch: queued, capped and logged like any batch's."""
    from agio_notebook import scheduling

    session = conversation(repo)
    result = agio_notebook.sweep(session, at=3, agent=Agent(model=models()[1]), prompts=["a?", "b?"], repeats=2,
                                 repository=repo, monitor=False, concurrency=2)
    records = scheduling.executions(batch=result.batch, repository=repo)
    assert len(records) == 4 and set(records["status"]) == {"completed"}
    assert sorted(records["run_id"]) == sorted(result.frame["run_id"])
    assert sorted(records["session_id"]) == sorted(result.frame["session_id"])  # the forks' sessions
    stored = scheduling.default_executor(repo).store.records(result.batch)
    assert {r.request["fork"]["session_id"] for r in stored} == {session}
    assert sorted(r.request["query"] for r in stored) == ["a?", "a?", "b?", "b?"]
    assert scheduling.default_executor(repo).batches[result.batch].concurrency == 2


def test_an_interrupt_while_a_sweep_waits_cancels_what_has_not_run(repo, monkeypatch):
    import asyncio

    from agio_notebook import scheduling
    import importlib
    import time

    sweep_module = importlib.import_module("agio_notebook.explore.sweep")
    from scheduling_support import wait_until

    session = conversation(repo)

    async def slow(messages, tools):
        await asyncio.sleep(0.2)
        return "slowly sunny"

    def interrupted(self, timeout=None):  # Ctrl-C while the first run is going (this wait cancels nothing)
        time.sleep(0.1)
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep_module.BatchHandle, "wait", interrupted)
    before = set(scheduling.default_executor(repo).batches)
    with pytest.raises(KeyboardInterrupt):
        agio_notebook.sweep(session, at=4, agent=Agent(model=FunctionModel(slow, name="hasty")), repeats=6,
                            repository=repo, monitor=False, concurrency=1)
    ex = scheduling.default_executor(repo)
    (name,) = set(ex.batches) - before
    wait_until(lambda: ex.batches[name].done.done(), what="the interrupted sweep's batch ended")
    statuses = [r.status.value for r in ex.store.records(name)]
    assert statuses.count("cancelled") >= 4 and "queued" not in statuses and "running" not in statuses


def test_public_names():
    import subprocess
    import sys

    code = ("import agio_notebook as a; print(a.scoring.exact.__module__, a.diff.__name__, a.sweep.__name__, "
            "a.tree.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-500:]
    assert out.stdout.split() == ["agio_notebook.explore.scoring", "diff", "sweep", "tree"]
