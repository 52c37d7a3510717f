"""evaluate() and compare(): variants over a dataset for K epochs as executions of the scheduler, each a
stored run; scorers of every kind; summaries and paired comparisons; storage; bad input."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pandas as pd
import pytest

import agio_notebook as agio
from agio_notebook import Agent, FunctionModel, ScriptedModel
from agio_notebook.explore import EvaluationError, evaluations
from agio_notebook.explore.evaluate import load
from agio_notebook.scoring import exact, model_graded, regex
from agio_notebook.scheduling import executions
from agio_notebook.storage import TinyDBRepository

DATA = [{"id": f"q{i}", "question": f"What is {i} plus {i + 2}?", "answer": str(2 * i + 2)} for i in range(10)]


def _numbers(messages):
    q = messages[-1]["content"].replace("?", "")
    return [int(w) for w in q.split() if w.isdigit()]


def adder(messages, tools):
    a, b = _numbers(messages)
    return str(a + b)


def off_on_threes(messages, tools):
    """Wrong on every sample whose first number is a multiple of 3."""
    a, b = _numbers(messages)
    return str(a + b + (a % 3 == 0))


def correct(run, sample):
    return run.final_text.strip() == sample["answer"]


@pytest.fixture
def repo(tmp_path):
    return TinyDBRepository(tmp_path / "store")


def agents():
    return {"careful": Agent(model=FunctionModel(adder, name="adder"), name="careful"),
            "hasty": Agent(model=FunctionModel(off_on_threes, name="hasty-adder"), name="hasty")}


def test_each_sample_runs_k_times_as_stored_executions_and_is_scored(repo):
    ev = agio.evaluate(agents(), DATA, [correct], epochs=3, seed=5, prompt="{question}", name="adding", repository=repo)
    frame = ev.frame
    assert len(frame) == 2 * 10 * 3
    assert frame.groupby(["variant", "sample"]).size().eq(3).all()
    assert sorted(frame["epoch"].unique().tolist()) == [1, 2, 3]
    assert (frame["status"] == "completed").all()
    for run_id in frame["run_id"]:  # each a stored run, one click from its transcript
        assert repo.get_run(run_id).status.value == "completed"
    assert frame["run_id"].nunique() == 60 and frame["session_id"].nunique() == 60
    # they were executions of the scheduler: one batch per variant, every item a record
    ex = executions(batch="adding-v0", repository=repo)
    assert len(ex) == 30 and set(ex["status"]) == {"completed"}
    hasty = frame[frame["variant"] == "hasty"]
    wrong = hasty[hasty["score_correct"] == 0]["sample"].unique().tolist()
    assert sorted(wrong) == ["q0", "q3", "q6", "q9"]
    summary = ev.summary.set_index(["variant", "scorer"])
    assert summary.loc[("careful", "correct"), "mean"] == 1.0
    assert summary.loc[("hasty", "correct"), "mean"] == pytest.approx(0.6)
    assert summary.loc[("hasty", "correct"), "samples"] == 10 and summary.loc[("hasty", "correct"), "scores"] == 30
    row = summary.loc[("hasty", "correct")]
    assert 0 <= row["ci_low"] < 0.6 < row["ci_high"] <= 1
    # three identical epochs per sample: the clustered error is that of 10 per-sample means, not of 30 scores
    assert row["stderr"] == pytest.approx(math.sqrt(0.6 * 0.4 * 10 / 9) / math.sqrt(10))
    assert row["method"] == "95% percentile cluster bootstrap (samples resampled), 2,000 resamples"
    assert ev.summary.attrs["method"] == row["method"]


def test_scorers_of_every_kind(repo):
    judge_calls = []

    def judge_reply(messages, tools):
        judge_calls.append(messages[-1]["content"])
        expected = messages[-1]["content"].split("Expected answer: ")[1].split("\n")[0]
        answer = messages[-1]["content"].split("Answer: ")[-1].split("\n")[0]
        return "10" if answer == expected else "2"

    judge = model_graded(FunctionModel(judge_reply, name="judge-model"), "Is the sum right?", target="answer",
                         name="judged")

    async def awaited(run):  # a coroutine scorer
        return len(run.final_text) <= 2

    scorers = {"exact": exact("4"), "digits": regex(r"^\d+$"), "correct": correct, "short": awaited,
               "judged": judge}
    ev = agio.evaluate(agents()["hasty"], DATA[:4], scorers, epochs=2, prompt="{question}", name="kinds",
                       repository=repo)
    f = ev.frame.set_index(["sample", "epoch"])
    assert f.loc[("q1", 1), "score_exact"] == 1.0 and f.loc[("q2", 1), "score_exact"] == 0.0
    assert (f["score_digits"] == 1.0).all()
    assert f.loc[("q0", 1), "score_correct"] == 0.0 and f.loc[("q1", 2), "score_correct"] == 1.0
    assert f.loc[("q0", 1), "score_judged"] == 0.2 and f.loc[("q1", 1), "score_judged"] == 1.0
    # the judge's calls are stored runs, linked from each row
    judge_runs = f["judge_run_judged"].tolist()
    assert len(set(judge_runs)) == 8 and len(judge_calls) == 8
    run = repo.get_run(judge_runs[0])
    assert run.status.value == "completed" and "Is the sum right?" in run.query
    # scored again under the same name: nothing runs again, the judge's grades are reused
    again = agio.evaluate(agents()["hasty"], DATA[:4], scorers, epochs=2, prompt="{question}", name="kinds",
                          repository=repo)
    assert len(judge_calls) == 8 and again.frame["run_id"].tolist() == ev.frame["run_id"].tolist()
    assert again.frame["judge_run_judged"].tolist() == judge_runs


def test_the_same_seed_and_recorded_models_give_the_same_table(repo):
    def flaky_model():  # a recorded model: the same answers in the same order, whatever runs when
        return ScriptedModel(["4", "5", "4", "4", "9", "6", "6", "6"], loop=True, name="recorded")

    def score(run):  # graded, so resampling has room to differ between seeds
        return {"4": 1.0, "6": 0.7, "5": 0.4}.get(run.final_text.strip(), 0.0)

    first = agio.evaluate(Agent(model=flaky_model(), name="r"), DATA[:8], [score], epochs=1, seed=42,
                          prompt="{question}", concurrency=1, name="r1", repository=repo)
    second = agio.evaluate(Agent(model=flaky_model(), name="r"), DATA[:8], [score], epochs=1, seed=42,
                           prompt="{question}", concurrency=1, name="r2", repository=repo)
    pd.testing.assert_frame_equal(first.summary, second.summary)
    other_seed = agio.evaluate(Agent(model=flaky_model(), name="r"), DATA[:8], [score], epochs=1, seed=43,
                               prompt="{question}", concurrency=1, name="r3", repository=repo)
    assert other_seed.summary["mean"].tolist() == first.summary["mean"].tolist()
    assert (other_seed.summary["ci_low"].tolist(), other_seed.summary["ci_high"].tolist()) != (
        first.summary["ci_low"].tolist(), first.summary["ci_high"].tolist())
    assert first.models == {"r": "recorded"} and load("r1", repo).seed == 42


def test_the_paired_comparison_lists_what_got_better_and_worse(repo):
    ev = agio.evaluate(agents(), DATA, [correct], epochs=2, seed=1, prompt="{question}", name="pair", repository=repo)
    cmp = ev.compare("hasty", "careful")  # careful against the baseline hasty
    row = cmp.summary.iloc[0]
    assert (row["a"], row["b"], row["samples"]) == ("hasty", "careful", 10)
    assert row["mean_a"] == pytest.approx(0.6) and row["mean_b"] == 1.0
    assert row["difference"] == pytest.approx(0.4) and row["better"] == 4 and row["worse"] == 0
    assert 0 < row["ci_low"] <= 0.4 <= row["ci_high"] <= 1
    assert (row["mcnemar_only_a"], row["mcnemar_only_b"]) == (0, 4)
    assert row["mcnemar_p"] == pytest.approx(2 / 2 ** 4)  # exact: both tails of 4 discordant pairs all one way
    assert "majority over its epochs" in row["mcnemar_method"]
    changed = cmp.changed()
    assert changed["sample"].tolist() == ["q0", "q3", "q6", "q9"] and set(changed["change"]) == {"better"}
    first = changed.iloc[0]
    assert len(first["runs_a"]) == 2 and len(first["runs_b"]) == 2
    assert all(repo.get_run(r).session_id for r in first["runs_a"] + first["runs_b"])
    worse = ev.compare("careful", "hasty").changed()
    assert set(worse["change"]) == {"worse"} and worse["delta"].tolist() == [-1.0] * 4


def test_two_stored_evaluations_compare_after_the_store_is_reopened(tmp_path):
    repo = TinyDBRepository(tmp_path / "store")
    agio.evaluate(agents()["hasty"], DATA, [correct], prompt="{question}", name="before", repository=repo)
    agio.evaluate(agents()["careful"], DATA[2:], [correct], prompt="{question}", name="after", repository=repo)
    reopened = TinyDBRepository(tmp_path / "store")
    cmp = agio.compare("before", "after", repository=reopened)
    row = cmp.summary.iloc[0]
    assert row["samples"] == 8 and row["better"] == 3 and row["worse"] == 0  # q3, q6, q9 among the shared
    assert row["mcnemar_p"] == pytest.approx(0.25) and row["mcnemar_method"].startswith("McNemar's exact test")
    assert "before/hasty" in repr(cmp) and "after/careful" in repr(cmp)
    assert evaluations(repository=reopened)["name"].tolist() == ["before", "after"]


def test_scheduler_options_reach_every_execution(repo):
    active, peak = [0], [0]
    lock = threading.Lock()

    def slow(messages, tools):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        import time
        time.sleep(0.02)
        with lock:
            active[0] -= 1
        return adder(messages, tools)

    ev = agio.evaluate(Agent(model=FunctionModel(slow), name="slow"), DATA, [correct], epochs=2,
                       prompt="{question}", concurrency=2, name="capped", repository=repo)
    assert peak[0] <= 2 and ev.summary["mean"].iloc[0] == 1.0
    # a token budget that runs out: the items it stopped are in the frame, unscored, and counted
    costly = Agent(model=ScriptedModel(["42"], loop=True, name="costly"), name="costly")
    budget = agio.evaluate(costly, DATA, [correct], prompt="{question}", concurrency=1, batch_max_tokens=30,
                           name="budget", repository=repo)
    unscored = budget.frame["score_correct"].isna()
    assert unscored.any() and not unscored.all()
    assert set(budget.frame.loc[unscored, "status"]) <= {"cancelled", "budget_exceeded"}
    assert budget.summary["unscored"].iloc[0] == int(unscored.sum())


KILLED = textwrap.dedent("""
    import os, signal, sys
    import agio_notebook as agio
    from agio_notebook import Agent, FunctionModel
    from agio_notebook.storage import TinyDBRepository

    def reply(messages, tools):
        q = messages[-1]["content"]
        print("asked", q, flush=True)
        if q == "item 3":
            os.kill(os.getpid(), signal.SIGKILL)
        return q.upper()

    data = [{"input": f"item {i}"} for i in range(6)]
    agio.evaluate(Agent(model=FunctionModel(reply), name="echo"), data, [lambda r: 1.0], concurrency=1,
                  name="killed", repository=TinyDBRepository(sys.argv[1]))
""")


def test_a_killed_evaluation_resumes_without_running_finished_samples_again(tmp_path):
    script = tmp_path / "killed.py"
    script.write_text(KILLED)
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "store")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == -9, done.stderr
    assert done.stdout.split("\n")[:4] == ["asked item 0", "asked item 1", "asked item 2", "asked item 3"]
    repo = TinyDBRepository(tmp_path / "store")
    with pytest.raises(Exception):
        load("killed", repo)  # nothing stored half-way
    asked = []
    ev = agio.evaluate(Agent(model=FunctionModel(lambda m, t: asked.append(m[-1]["content"]) or "ok"), name="echo"),
                       [{"input": f"item {i}"} for i in range(6)], [lambda r: 1.0], concurrency=1, name="killed",
                       repository=repo)
    assert asked == ["item 3", "item 4", "item 5"]  # items 0-2 completed before the kill: not run again
    assert len(ev.frame) == 6 and (ev.frame["status"] == "completed").all()


# -- bad input: one line, nothing stored ---------------------------------------------------------------------
def _nothing_stored(repo, name):
    assert name not in evaluations(repository=repo)["name"].tolist()
    assert executions(batch=f"{name}-v0", repository=repo).empty


@pytest.mark.parametrize("kwargs, line", [
    ({"dataset": []}, "the dataset is empty: nothing to evaluate"),
    ({"dataset": pd.DataFrame({"question": []})}, "the dataset is empty: nothing to evaluate"),
    ({"prompt": "{question} in {unit}"}, "the prompt template uses column 'unit', which the inputs do not have "
                                         "(columns: id, question, answer)"),
    ({"prompt": None}, None),
    ({"epochs": 0}, "epochs must be a whole number >= 1, got 0"),
    ({"epochs": "3"}, "epochs must be a whole number >= 1, got '3'"),
    ({"epochs": 2.5}, "epochs must be a whole number >= 1, got 2.5"),
    ({"scorers": []}, "evaluate needs at least one scorer"),
    ({"scorers": ["exact"]}, "scorers[0] is a str, not a function"),
    ({"scorers": {"right": "exact"}}, "scorer 'right' is a str, not a function"),
    ({"dataset": ["What is 1 plus 2?"]}, "dataset[0] is a str, not a dict of columns"),
    ({"dataset": [{"id": 1, "question": "a"}, {"id": 1, "question": "b"}]},
     "the dataset's id column repeats '1'; sample ids must be unique"),
    ({"agent_or_variants": {"a": "not an agent"}}, "variant 'a' is a str, not an agio Agent"),
    ({"concurrency": 0}, "variant 'careful': concurrency must be at least 1, got 0"),
])
def test_bad_input_is_one_line_and_stores_nothing(repo, kwargs, line):
    args = {"agent_or_variants": {"careful": agents()["careful"]}, "dataset": DATA, "scorers": [correct],
            "prompt": "{question}"}
    args.update(kwargs)
    if kwargs == {"prompt": None}:  # no prompt, and no input/question column to take it from
        args["dataset"] = [{"text": "x", "answer": "y"}]
        line = "the dataset has columns text, answer; say which make the prompt: prompt='... {column} ...'"
    with pytest.raises(EvaluationError) as err:
        agio.evaluate(args.pop("agent_or_variants"), args.pop("dataset"), args.pop("scorers"), name="bad",
                      repository=repo, **args)
    assert str(err.value) == line
    _nothing_stored(repo, "bad")


@pytest.mark.parametrize("scorer, line", [
    (lambda run: 1 / 0, "scorer '<lambda>' raised on sample 'q0', epoch 1 of variant 'careful': ZeroDivisionError: "
                        "division by zero"),
    (lambda run: "yes", "scorer '<lambda>' returned 'yes' (str) for sample 'q0', epoch 1 of variant 'careful'; "
                        "a score must be a finite number or a bool"),
    (lambda run: None, "scorer '<lambda>' returned None (NoneType) for sample 'q0', epoch 1 of variant 'careful'; "
                       "a score must be a finite number or a bool"),
    (lambda run: math.nan, "scorer '<lambda>' returned nan (float) for sample 'q0', epoch 1 of variant 'careful'; "
                           "a score must be a finite number or a bool"),
    (lambda run: 10 ** 400, "scorer '<lambda>' returned 1000000000000000000000000000000000000000 (int) for sample "
                            "'q0', epoch 1 of variant 'careful'; a score must be a finite number or a bool"),
])
def test_a_scorer_that_raises_or_returns_no_number_stores_no_evaluation_and_keeps_the_runs(repo, scorer, line):
    with pytest.raises(EvaluationError) as err:
        agio.evaluate({"careful": agents()["careful"]}, DATA[:1], [scorer], prompt="{question}", concurrency=1,
                      name="scored", repository=repo)
    assert str(err.value).startswith(line) and "\n" not in str(err.value)
    assert "evaluations" not in str(err.value) or "name='scored'" in str(err.value)
    assert "scored" not in evaluations(repository=repo)["name"].tolist()
    runs = executions(batch="scored-v0", repository=repo)
    assert len(runs) == 1 and runs["status"].iloc[0] == "completed"  # the run is kept
    asked = []
    fixed = Agent(model=FunctionModel(lambda m, t: asked.append(1) or "4"), name="careful")
    ev = agio.evaluate({"careful": fixed}, DATA[:1], [lambda run: 1.0], prompt="{question}", name="scored",
                       repository=repo)
    assert asked == [] and ev.frame["run_id"].tolist() == runs["run_id"].tolist()  # scored, not run again


def test_compare_refuses_variants_that_share_no_sample(repo):
    agio.evaluate(agents()["careful"], DATA[:3], [correct], prompt="{question}", name="first", repository=repo)
    agio.evaluate(agents()["careful"], DATA[5:], [correct], prompt="{question}", name="second", repository=repo)
    with pytest.raises(EvaluationError) as err:
        agio.compare("first", "second", repository=repo)
    assert str(err.value) == ("first/careful and second/careful share no scored sample: a paired comparison "
                              "needs the same samples on both sides")
    with pytest.raises(EvaluationError, match="has variants careful, hasty; say which"):
        agio.compare(agio.evaluate(agents(), DATA[:2], [correct], prompt="{question}", name="two", repository=repo),
                     "first", repository=repo)
    with pytest.raises(Exception, match="no evaluation named 'nope'"):
        agio.compare("nope", "first", repository=repo)


def test_a_name_reused_for_another_dataset_is_refused(repo):
    agio.evaluate(agents()["careful"], DATA[:3], [correct], prompt="{question}", name="named", repository=repo)
    stored = json.dumps(load("named", repo).doc)
    with pytest.raises(EvaluationError) as err:
        agio.evaluate(agents()["careful"], DATA[:4], [correct], prompt="{question}", name="named", repository=repo)
    assert str(err.value) == ("an evaluation named 'named' already exists with another dataset_fingerprint, samples; "
                              "choose another name")
    assert json.dumps(load("named", repo).doc) == stored


def test_scores_of_numpy_pandas_and_fractions_count_as_the_numbers_they_are(repo):
    """A scorer built on numpy or pandas returns their scalars (``(a == b).all()`` is ``np.True_``)."""
    import fractions

    import numpy as np

    given = iter([np.True_, np.int64(1), np.float32(0.5), fractions.Fraction(1, 2), np.False_, np.bool_(True)])
    ev = agio.evaluate({"careful": agents()["careful"]}, DATA[:6], {"s": lambda run: next(given)},
                       prompt="{question}", concurrency=1, name="numpy", repository=repo)
    assert sorted(ev.frame["score_s"].tolist()) == [0.0, 0.5, 0.5, 1.0, 1.0, 1.0]


def test_a_sample_whose_scores_did_not_change_is_neither_better_nor_worse(repo):
    """The same scores in another epoch order are the same mean: exact sums, never a 1e-17 'worse'."""
    def table(scores):
        given = {q: iter(v) for q, v in scores.items()}
        return {"s": lambda run, sample: next(given[sample["question"]])}

    data = [{"question": q} for q in ("a", "b")]
    echo = Agent(model=FunctionModel(lambda m, t: m[-1]["content"], name="echo"), name="echo")
    one = agio.evaluate(echo, data, table({"a": [0.1, 0.2, 0.3], "b": [1, 1, 1]}), epochs=3, prompt="{question}",
                        concurrency=1, name="one", repository=repo)
    two = agio.evaluate(echo, data, table({"a": [0.3, 0.2, 0.1], "b": [1, 1, 1]}), epochs=3, prompt="{question}",
                        concurrency=1, name="two", repository=repo)
    compared = agio.compare(one, two)
    row = compared.summary.iloc[0]
    assert (row["difference"], row["better"], row["worse"]) == (0.0, 0, 0)
    assert compared.changed().empty
