"""Budgets count what was appended since the last model call: one estimate for max_tokens and max_cost,
exact for OpenAI models (bpe-openai, offline), and no run ends more than one completion over its budget."""

from __future__ import annotations

import pytest

from agio_notebook import Agent, ExecutionConfig, FunctionModel, Reply, ScriptedModel, StepRunner, tool
from agio_notebook.core import RunStatus
from agio_notebook.models.base import Usage
from agio_notebook.models.pricing import set_prices
from agio_notebook.models.scripted import call
from agio_notebook.models.tokens import count_text, count_tokens, encoding_name, prompt_tokens
from explore_support import go, repo  # noqa: F401 - the fixture


@tool
def fetch(size: int) -> str:
    """Return ``size`` characters of text."""
    return ("lorem ipsum dolor sit amet " * (size // 27 + 1))[:size]


def test_a_big_tool_result_ends_the_run_budget_exceeded(repo):  # noqa: F811
    model = ScriptedModel([Reply.call("fetch", size=8000), "Here is the summary."])
    runner = StepRunner(Agent(model=model, tools=[fetch]), repository=repo,
                        config=ExecutionConfig(max_tokens=1070))
    result = go(runner.run(None, "fetch the page and summarise it"))
    assert result.status is RunStatus.BUDGET_EXCEEDED, (result.status, result.metrics.total_tokens)
    assert len(model.calls) == 1  # the call that would have read the 8,000 characters was never made
    assert result.metrics.total_tokens <= 1070
    assert "max_tokens=1070 would be exceeded" in result.error


def test_max_cost_trusts_the_same_estimate(repo):  # noqa: F811
    set_prices({"budget-twin": {"prompt": 1000.0, "completion": 1000.0}})  # $0.001 a token
    model = ScriptedModel([Reply.call("fetch", size=8000), "Here is the summary."], name="budget-twin")
    runner = StepRunner(Agent(model=model, tools=[fetch]), repository=repo, config=ExecutionConfig(max_cost=1.07))
    result = go(runner.run(None, "fetch the page and summarise it"))
    assert result.status is RunStatus.BUDGET_EXCEEDED and len(model.calls) == 1


# -- the property: at most one completion over, whatever the shape of the run -----------------------
def _loop(*replies):
    return lambda name: ScriptedModel(list(replies), loop=True, name=name)


SHAPES = {
    "one big tool result": _loop(Reply.call("fetch", size=8000)),
    "many small tool results": _loop(Reply.call("fetch", size=40)),
    "growing tool results": lambda name: ScriptedModel([Reply.call("fetch", size=200 * 2 ** i) for i in range(9)]
                                                       + ["done"], name=name),
    "parallel calls": _loop(Reply.calls(call("fetch", size=900), call("fetch", size=1300), call("fetch", size=5))),
    "long answers between calls": _loop(Reply.call("fetch", _text="word " * 300, size=100)),
    "uneven answers": _loop(Reply.call("fetch", _text="w " * 5, size=10), Reply.call("fetch", _text="w " * 400,
                                                                                       size=10)),
}


def _last_completion(result):
    calls = [s for s in result.steps if s.role.value == "assistant"]
    return calls[-1].metrics.completion_tokens if calls else 0


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("budget", [40, 150, 600, 1070, 2500, 6000])
def test_no_run_ends_more_than_one_completion_over_max_tokens(repo, shape, budget):  # noqa: F811
    runner = StepRunner(Agent(model=SHAPES[shape]("scripted"), tools=[fetch], system_prompt="Be brief. " * 40),
                        repository=repo, config=ExecutionConfig(max_tokens=budget, max_steps=40))
    result = go(runner.run(None, "read everything"))
    assert result.status in (RunStatus.BUDGET_EXCEEDED, RunStatus.COMPLETED)
    over = (result.metrics.total_tokens or 0) - budget
    assert over <= _last_completion(result), f"{shape}: {result.metrics.total_tokens} tokens for {budget}"


@pytest.mark.parametrize("shape", list(SHAPES))
def test_no_run_ends_more_than_one_completion_over_max_cost(repo, shape):  # noqa: F811
    set_prices({"budget-shapes": {"prompt": 1000.0, "completion": 1000.0}})  # $0.001 a token
    runner = StepRunner(Agent(model=SHAPES[shape]("budget-shapes"), tools=[fetch]), repository=repo,
                        config=ExecutionConfig(max_cost=1.5, max_steps=40))
    result = go(runner.run(None, "read everything"))
    assert result.status is RunStatus.BUDGET_EXCEEDED
    assert result.metrics.cost - 1.5 <= _last_completion(result) * 0.001 + 1e-9


# -- exact counts for OpenAI models -----------------------------------------------------------------
def test_openai_models_are_counted_exactly_offline():
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hello world"}]
    counts, exact = count_tokens(messages, "gpt-4o-mini")
    assert exact and counts == [3 + 1 + 4, 3 + 1 + 2]  # role and content tokens, 3 around each message
    assert count_tokens(messages, "openai/gpt-4o-2024-08-06") == (counts, True)
    assert encoding_name("gpt-4") == "cl100k_base" and encoding_name("o3-mini") == "o200k_base"
    assert count_text("hello world", "gpt-4o") == (2, True)
    estimated, exact = count_tokens(messages, "llama3.1:8b")
    assert not exact and all(n > 0 for n in estimated)
    assert prompt_tokens(messages, "gpt-4o")[0] == sum(counts) + 3


def test_an_openai_model_with_real_counts_stays_within_one_completion(repo):  # noqa: F811
    """A model reporting usage as OpenAI does (the prompt's real token count): the run stops within one
    completion of its budget, counting the tool results with the model's own encoding."""
    import bpe_openai

    enc = bpe_openai.get_encoding("o200k_base")
    replies = iter([Reply.call("fetch", size=3000), Reply.call("fetch", size=3000), "done"])

    def real(messages, tools):
        prompt = 3 + sum(3 + len(enc.encode(m["role"])) + len(enc.encode(m.get("content") or ""))
                         + sum(len(enc.encode(c["function"]["name"] + c["function"]["arguments"]))
                               for c in m.get("tool_calls") or ()) + len(enc.encode(m.get("tool_call_id") or ""))
                         for m in messages)
        reply = next(replies)
        reply.usage = Usage(prompt, 12, prompt + 12)
        return reply

    runner = StepRunner(Agent(model=FunctionModel(real, name="gpt-4o"), tools=[fetch]), repository=repo,
                        config=ExecutionConfig(max_tokens=900))
    result = go(runner.run(None, "read"))
    assert result.status is RunStatus.BUDGET_EXCEEDED and result.metrics.model_calls == 2
    assert result.metrics.total_tokens <= 900 + 12
