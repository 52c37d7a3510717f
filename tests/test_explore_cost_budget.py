"""Cost from genai-prices and the user's table; budgets end a run before the call that would exceed them."""

from __future__ import annotations

import math

import pytest

from agio_notebook import Agent, ExecutionConfig, Reply, ScriptedModel, StepRunner, frames, tool
from agio_notebook.core import RunStatus, StepEventType as E
from agio_notebook.models import pricing
from agio_notebook.models.base import Usage
from agio_notebook.models.pricing import PricingError, cost_of, set_prices
from explore_support import go, repo


@pytest.fixture(autouse=True)
def clean_prices():
    set_prices({}, replace=True)
    yield
    set_prices({}, replace=True)


def test_package_prices_per_prompt_completion_and_cached_token():
    # gpt-4o-mini in genai-prices: $0.15 input, $0.60 output, $0.075 cached input per 1M tokens
    assert cost_of("gpt-4o-mini", 1_000_000, 0) == pytest.approx(0.15)
    assert cost_of("gpt-4o-mini", 0, 1_000_000) == pytest.approx(0.60)
    assert cost_of("gpt-4o-mini", 1_000_000, 0, cached_tokens=1_000_000) == pytest.approx(0.075)


def test_unknown_model_is_unknown_never_zero():
    assert cost_of("my-local-llama", 1000, 1000) is None
    assert pricing.format_cost(None) == "unknown"
    with pytest.raises(PricingError, match="no price known for model 'my-local-llama'"):
        pricing.check_priced("my-local-llama")


def test_override_table_wins_and_is_checked():
    set_prices({"my-local-llama": {"prompt": 1.0, "completion": 2.0, "cached": 0.5}})
    assert cost_of("my-local-llama", 1_000_000, 1_000_000, 500_000) == pytest.approx(0.5 + 0.25 + 2.0)
    set_prices({"gpt-4o-mini": {"prompt": 10, "completion": 10}})
    assert cost_of("gpt-4o-mini", 1_000_000, 0) == pytest.approx(10)
    for bad, message in [({"m": {"prompt": 1}}, "lacks completion"),
                         ({"m": {"prompt": 1, "completion": -1}}, "must be a number >= 0"),
                         ({"m": {"input": 1, "completion": 1}}, "unknown field"),
                         ({"m": 3}, "must be a dict")]:
        with pytest.raises(PricingError, match=message) as info:
            set_prices(bad)
        assert "\n" not in str(info.value)
    assert cost_of("my-local-llama", 1_000_000, 0) == pytest.approx(1.0)  # a bad table changed nothing


def scripted(n_calls, name="priced", prompt=100, completion=10):
    @tool
    def step(i: int) -> str:
        """One step."""
        return f"done {i}"

    replies = [Reply.call("step", i=i) for i in range(n_calls)] + ["finished"]
    for r in replies:
        if isinstance(r, Reply):
            r.usage = Usage(prompt, completion, prompt + completion)
    return ScriptedModel([r if isinstance(r, Reply) else Reply(text=r, usage=Usage(prompt, completion,
                                                                                   prompt + completion))
                          for r in replies], name=name), step


def test_costs_in_steps_runs_sessions_frames_and_metrics_event(repo):
    set_prices({"priced": {"prompt": 1.0, "completion": 10.0}})
    model, step = scripted(2)
    result = go(StepRunner(Agent(model=model, tools=[step]), repository=repo).run(None, "go"))
    per_call = (100 * 1.0 + 10 * 10.0) / 1_000_000
    assert result.metrics.cost == pytest.approx(3 * per_call)
    metrics_events = [e for e in result.events if e.type is E.METRICS]
    assert metrics_events[-1].payload["run"]["cost"] == pytest.approx(3 * per_call)
    st = frames.steps(result.session_id, repository=repo)
    assert st.loc[st.role == "assistant", "cost"].tolist() == pytest.approx([per_call] * 3)
    assert st.loc[st.role != "assistant", "cost"].isna().all()
    assert frames.runs(result.session_id, repository=repo)["cost"].iloc[0] == pytest.approx(3 * per_call)
    assert frames.run_metrics(result.session_id, repository=repo)["cost"].iloc[0] == pytest.approx(3 * per_call)
    assert frames.sessions(repository=repo)["cost"].iloc[0] == pytest.approx(3 * per_call)


def test_unknown_price_shows_unknown_in_frames(repo):
    model, step = scripted(1, name="nobody-prices-this")
    result = go(StepRunner(Agent(model=model, tools=[step]), repository=repo).run(None, "go"))
    assert result.metrics.cost is None
    runs = frames.runs(result.session_id, repository=repo)
    assert math.isnan(runs["cost"].iloc[0])


def test_max_tokens_stops_before_the_call_that_would_exceed(repo):
    # each call: 100 prompt + 10 completion tokens; the 3rd call's prompt (~110 + new messages) would pass 300
    model, step = scripted(5)
    runner = StepRunner(Agent(model=model, tools=[step]), repository=repo, config=ExecutionConfig(max_tokens=300))
    result = go(runner.run(None, "go"))
    assert result.status is RunStatus.BUDGET_EXCEEDED
    assert result.metrics.model_calls == 2 and result.metrics.total_tokens == 220
    assert "token budget max_tokens=300 would be exceeded" in result.error
    assert result.events[-1].type is E.RUN_BUDGET_EXCEEDED
    assert len(model.calls) == 2  # the third call was never made
    assert frames.runs(result.session_id, repository=repo)["status"].iloc[0] == "budget_exceeded"


def test_max_cost_stops_before_the_call_that_would_exceed(repo):
    set_prices({"priced": {"prompt": 1000.0, "completion": 1000.0}})  # $0.11 per call
    model, step = scripted(5)
    runner = StepRunner(Agent(model=model, tools=[step]), repository=repo, config=ExecutionConfig(max_cost=0.30))
    result = go(runner.run(None, "go"))
    assert result.status is RunStatus.BUDGET_EXCEEDED
    assert result.metrics.model_calls == 2
    assert result.metrics.cost == pytest.approx(0.22)
    assert "max_cost ($0.3) would be exceeded" in result.error


def test_max_cost_with_unknown_price_stops_at_once(repo):
    model, step = scripted(1, name="nobody-prices-this")
    runner = StepRunner(Agent(model=model, tools=[step]), repository=repo, config=ExecutionConfig(max_cost=1.0))
    result = go(runner.run(None, "go"))
    assert result.status is RunStatus.BUDGET_EXCEEDED and result.metrics.model_calls == 0
    assert "price of model 'nobody-prices-this' is unknown" in result.error


def test_budget_config_rejects_bad_values():
    with pytest.raises(ValueError, match="max_cost must be >= 0"):
        ExecutionConfig(max_cost=-1)
    with pytest.raises(ValueError, match="max_tokens must be >= 1"):
        ExecutionConfig(max_tokens=0)


def test_openai_usage_with_cached_tokens_is_priced(tmp_path):
    """Through the real openai client and a real HTTP server: cached prompt tokens get the cached price."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from openai_sse_server import FakeOpenAIServer, text_chunks

    from agio_notebook import OpenAIModel
    from agio_notebook.storage import InMemoryRepository

    usage = {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100,
             "prompt_tokens_details": {"cached_tokens": 800}}
    with FakeOpenAIServer() as server:
        server.script = [text_chunks("Hi", usage=usage)]
        model = OpenAIModel("gpt-4o-mini", base_url=server.base_url, api_key="sk-test-0123456789")
        result = go(StepRunner(Agent(model=model), repository=InMemoryRepository()).run(None, "hi"))
    step = result.steps[-1]
    assert step.metrics.cached_tokens == 800 and result.metrics.cached_tokens == 800
    expected = (200 * 0.15 + 800 * 0.075 + 100 * 0.60) / 1_000_000
    assert step.metrics.cost == pytest.approx(expected) and result.metrics.cost == pytest.approx(expected)
    assert cost_of("gpt-4o-mini", 1000, 100, 800) == pytest.approx(expected)
