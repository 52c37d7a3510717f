"""evaluate() on real third parties: its executions on a local Ray (``backend="ray"``), and a model-graded
scorer whose judge is a real OpenAI-compatible server (LiteLLM's proxy on 127.0.0.1, offline)."""

from __future__ import annotations

import os

import pytest

import agio_notebook as agio
from agio_notebook import Agent, ExecutionConfig, FunctionModel
from agio_notebook.explore import EvaluationError
from agio_notebook.models import OpenAIModel
from agio_notebook.scoring import model_graded
from agio_notebook.storage import TinyDBRepository

from litellm_proxy import MASTER_KEY, MODEL, LiteLLMProxy

DATA = [{"id": f"s{i}", "question": f"Say {i}", "answer": str(i)} for i in range(6)]


def echo(messages, tools):
    return messages[-1]["content"].split()[-1] + f" from {os.getpid()}"


def correct(run, sample):
    return run.final_text.split()[0] == sample["answer"]


def test_an_evaluation_runs_on_ray_and_only_the_driver_writes_the_store(tmp_path):
    ray = pytest.importorskip("ray", reason="the ray extra is installed by scripts/setup.sh")
    repo = TinyDBRepository(tmp_path / "store")

    def reply(messages, tools):  # defined here so it travels by value (Ray workers cannot import this module)
        return messages[-1]["content"].split()[-1] + f" from {os.getpid()}"

    agent = Agent(model=FunctionModel(reply, name="echo"), name="echo", config=ExecutionConfig(enable_retry=False))
    try:
        ev = agio.evaluate(agent, DATA, [correct], epochs=2, prompt="{question}", backend="ray", name="on-ray",
                           repository=repo)
    finally:
        ray.shutdown()
    frame = ev.frame
    assert frame["error"].isna().all(), frame["error"].tolist()
    assert len(frame) == 12 and (frame["status"] == "completed").all() and (frame["score_correct"] == 1).all()
    pids = {int(t.rsplit(" ", 1)[1]) for t in frame["final_text"]}
    assert os.getpid() not in pids  # the model ran in Ray workers
    for run_id in frame["run_id"]:
        assert [s.role.value for s in repo.get_steps(repo.get_run(run_id).session_id)] == ["user", "assistant"]


def test_an_agent_ray_cannot_carry_is_refused_before_any_variant_starts(tmp_path):
    import threading

    repo = TinyDBRepository(tmp_path / "store")
    lock = threading.Lock()
    ok = Agent(model=FunctionModel(echo, name="echo"), name="ok")
    bad = Agent(model=FunctionModel(lambda m, t, lock=lock: "x", name="locked"), name="bad")
    with pytest.raises(EvaluationError) as err:
        agio.evaluate({"ok": ok, "bad": bad}, DATA, [correct], prompt="{question}", backend="ray", name="unpicklable",
                      repository=repo)
    assert str(err.value).startswith("variant 'bad': ") and "\n" not in str(err.value)
    assert agio.executions(batch="unpicklable-v0", repository=repo).empty  # the first variant never started


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    p = LiteLLMProxy(tmp_path_factory.mktemp("litellm")).start()
    yield p
    p.stop()


def judge_agent(proxy: LiteLLMProxy, reply: str) -> Agent:
    model = OpenAIModel(MODEL, base_url=proxy.base_url, api_key=MASTER_KEY)
    return Agent(model=model, name="judge", model_settings={"extra_body": {"mock_response": reply}})


def test_a_judge_behind_a_real_provider_grades_as_stored_runs(proxy, tmp_path):
    repo = TinyDBRepository(tmp_path / "store")
    agent = Agent(model=FunctionModel(echo, name="echo"), name="echo")
    judge = model_graded(judge_agent(proxy, "7"), "Does the answer say the number asked for?", target="answer")
    ev = agio.evaluate(agent, DATA[:3], [judge], epochs=2, prompt="{question}", name="judged", repository=repo)
    assert ev.frame["score_judge"].tolist() == [0.7] * 6
    for run_id in ev.frame["judge_run_judge"]:
        run = repo.get_run(run_id)
        assert run.status.value == "completed" and run.final_text == "7" and run.metrics.total_tokens > 0
        assert "Expected answer: " in run.query and MASTER_KEY not in str(run.to_dict())
    # a judge whose reply holds no grade: one line naming the scorer and the sample, no evaluation stored
    vague = model_graded(judge_agent(proxy, "It looks fine to me."), "Is it right?")
    with pytest.raises(EvaluationError) as err:
        agio.evaluate(agent, DATA[:1], [vague], prompt="{question}", name="vague", repository=repo)
    assert str(err.value).startswith("scorer 'judge' raised on sample 's0', epoch 1 of variant 'echo': JudgeError: "
                                     "the judge replied without a grade: 'It looks fine to me.'")
    assert "vague" not in agio.evaluations(repository=repo)["name"].tolist()
