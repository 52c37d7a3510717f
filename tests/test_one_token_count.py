"""One token count: the pause view, "what the model saw", the budget and an offline model's usage agree.

They all count with ``models.tokens``: every message with the chat format around it, and the reply's
priming. A provider's own ``usage.prompt_tokens`` is shown beside the count, flagged where it differs.
"""

from __future__ import annotations

import pytest

import agio_notebook
from agio_notebook import Agent, ExecutionConfig, FunctionModel, Reply, ScriptedModel, StepRunner, tool
from agio_notebook.execution.budget import Budget
from agio_notebook.execution.seen import seen_total
from agio_notebook.models.base import TextDelta, Usage
from agio_notebook.models.tokens import completion_tokens, count_text, message_text, prompt_tokens
from agio_notebook.notebook.debug_marks import seen_summary
from agio_notebook.storage import open_repository
from explore_support import go


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _history(turns: int) -> list[dict]:
    """A 21-message conversation: a system prompt and ten question/answer pairs."""
    messages: list[dict] = [{"role": "system", "content": "You are a careful assistant who adds numbers."}]
    for i in range(turns):
        messages += [{"role": "user", "content": f"What is {i} + {i + 1}?"},
                     {"role": "assistant", "content": f"{i} + {i + 1} = {2 * i + 1}."}]
    return messages


async def _first_pause(runner: StepRunner, session: str, query: str):
    run = runner.debug(session, query, breakpoints=["model"])
    async for pause in run:
        total, tokens, messages = pause.token_total, pause.tokens, pause.messages
        pause.abort()
        return total, tokens, messages
    raise AssertionError("no pause")


@pytest.mark.parametrize("model_name", ["gpt-4o", "scripted"])
def test_the_pause_view_counts_what_the_budget_counts(tmp_path, model_name):
    history = _history(10)
    repo = open_repository(str(tmp_path / "s"))
    system = history[0]["content"]
    # nine question/answer pairs and a tenth question stored as the session's opening, answered "ok"
    seeding = StepRunner(Agent(model=ScriptedModel(["ok"]), system_prompt=system), repository=repo)
    seeded = go(seeding.run(None, history[19]["content"], history=history[1:19]))
    runner = StepRunner(Agent(model=ScriptedModel(["21"], name=model_name), system_prompt=system), repository=repo)
    total, tokens, messages = go(_first_pause(runner, seeded.session_id, "What is 10 + 11?"))
    assert len(messages) == 22
    budget_estimate = Budget(ExecutionConfig(max_tokens=10**6)).estimate(messages, model_name)[0]
    assert total == budget_estimate == prompt_tokens(messages, model_name)[0]
    assert all(t.estimated for t in tokens) is (model_name == "scripted")
    if model_name == "gpt-4o":  # the chat format around each message and the reply's priming count
        content_only = sum(count_text(message_text(m), model_name)[0] for m in messages)
        assert total >= content_only + 22 * 3 + 3


def test_an_offline_models_usage_is_the_same_count(tmp_path):
    repo = open_repository(str(tmp_path / "s"))
    model = ScriptedModel([Reply.call("add", a=2, b=3), "2 + 3 = 5"])
    runner = StepRunner(Agent(model=model, tools=[add], system_prompt="Add."), repository=repo)
    result = go(runner.run(None, "What is 2 + 3?"))
    calls = [s for s in result.steps if s.role.value == "assistant"]
    assert len(calls) == 2  # the tool call, then the answer
    for i, step in enumerate(calls):
        total = seen_total(repo, result.run_id, step.sequence)
        sent = model.messages_of(i)
        assert step.metrics.prompt_tokens == prompt_tokens(sent, "scripted")[0] == total["prompt_tokens"]
        assert total["estimated"] and not total["differs"]
        frame = agio_notebook.context(result.run_id, step.sequence, repository=repo)
        assert frame.attrs["prompt_tokens"] == total["prompt_tokens"]
    # the completion is counted the same way too
    assert calls[-1].metrics.completion_tokens == completion_tokens("2 + 3 = 5", [], "scripted") == 3
    assert calls[0].metrics.completion_tokens == completion_tokens(None, [("add", '{"a": 2, "b": 3}')], "scripted")


@pytest.mark.parametrize("make", [lambda: ScriptedModel(["ok"], loop=True), lambda: FunctionModel(lambda m, t: "ok")],
                         ids=["scripted", "function"])
def test_an_offline_model_used_again_counts_each_conversation_afresh(tmp_path, make):
    """One model object answers run after run (as in every tutorial): each call's usage is the count of what
    that call was sent, whether the next conversation is as long as the last, longer, or its system prompt
    was replaced (a handoff, memory, an edit in step mode)."""
    from agio_notebook.models.tokens import PromptCounter

    repo = open_repository(str(tmp_path / "s"))
    model = make()
    runner = StepRunner(Agent(model=model, system_prompt="Be brief."), repository=repo)
    for query in ("q", "a much longer question, with many more words in it than the first one had", "q2"):
        result = go(runner.run(None, query))
        step = result.steps[-1]
        total = seen_total(repo, result.run_id, step.sequence)
        assert step.metrics.prompt_tokens == total["prompt_tokens"] == prompt_tokens(
            [{"role": "system", "content": "Be brief."}, {"role": "user", "content": query}], model.name)[0]
    counter = PromptCounter("scripted")
    talk = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello there"}]
    assert counter.count(talk) == prompt_tokens(talk, "scripted")[0]
    talk.append({"role": "assistant", "content": "hi"})
    assert counter.count(talk) == prompt_tokens(talk, "scripted")[0]  # the new message counted on top
    talk[0] = {"role": "system", "content": "Be brief, and remember: the user likes long, detailed answers."}
    assert counter.count(talk) == prompt_tokens(talk, "scripted")[0]  # replaced: counted afresh


def test_a_providers_own_count_is_shown_beside_ours_when_they_differ(tmp_path):
    async def reports_more(messages, tools):
        yield TextDelta("hello")
        yield Usage(prompt_tokens=999, completion_tokens=1, total_tokens=1000)

    repo = open_repository(str(tmp_path / "s"))
    runner = StepRunner(Agent(model=FunctionModel(reports_more)), repository=repo)
    result = go(runner.run(None, "hi"))
    step = result.steps[-1]
    total = seen_total(repo, result.run_id, step.sequence)
    assert total["reported"] == 999 and total["differs"] and total["prompt_tokens"] != 999
    rows = agio_notebook.context(result.run_id, step.sequence, repository=repo)
    line = seen_summary(rows.to_dict("records"), total)
    assert line.endswith("· the model reported 999") and f"~{total['prompt_tokens']} tokens" in line


def test_after_a_handoff_the_budget_counts_with_the_agent_holding_the_session(tmp_path):
    from agio_notebook.core import RunStatus
    from agio_notebook.models.pricing import set_prices

    set_prices({"desk-model": {"prompt": 1.0, "completion": 1.0}})  # $0.000001 a token: cheap and known
    specialist = Agent(model=ScriptedModel(["Here is your refund."], name="unpriced-specialist"), name="refunds")
    desk = Agent(model=ScriptedModel([Reply.call("transfer_to_refunds")], name="desk-model"), name="desk",
                 handoffs=[specialist])
    runner = StepRunner(desk, config=ExecutionConfig(max_cost=1.0), repository=open_repository(str(tmp_path / "s")))
    result = go(runner.run(None, "I want a refund"))
    # the desk's call was priced and allowed; the specialist's would be priced with its own model
    assert result.status is RunStatus.BUDGET_EXCEEDED
    assert result.error == "max_cost is set but the price of model 'unpriced-specialist' is unknown"
    assert result.metrics.model_calls == 1
